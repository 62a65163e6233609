//! The sampler thread and monitor on simulated GPUs: hours of simulated time, a hung source.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vramwarden::engine::sampler::SamplerHandle;
use vramwarden::engine::view::Monitor;
use vramwarden::model::now_ms;
use vramwarden::model::{Snapshot, SourceInfo, UnixMs};
use vramwarden::source::sim::SimSource;
use vramwarden::source::{GpuSource, SourceError};

const T0: UnixMs = 1_796_000_000_000;

#[test]
fn three_simulated_hours_in_the_monitor() {
    let mut sim = SimSource::demo(T0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 3600);
    for i in 0..3 * 3600 {
        let t = T0 + i * 1000;
        engine_state.apply(&mut m, sim.sample(t).expect("sim"), t);
    }
    assert_eq!(m.history.len(), 3600, "retention bound");
    let now = T0 + (3 * 3600 - 1) * 1000;
    let rows = m.table_rows(now);
    let leak = rows
        .iter()
        .find(|r| r.key.pid == 51877)
        .expect("leaking kernel");
    // 1 MiB/s for a minute.
    assert_eq!(leak.delta_1m_bytes, Some(60 << 20));
    // The trainer's second run (started at 3 h - 300 s, PID 48214) has warmed up and plateaued.
    let trainer = rows
        .iter()
        .find(|r| r.key.pid == 48214 && r.exited_at_ms.is_none())
        .expect("trainer");
    assert_eq!(trainer.delta_1m_bytes, Some(0), "the trainer has plateaued");
    assert_eq!(trainer.peak_bytes, 38 << 30);
    // The periodic job has had several lives, each a new identity; exited ones are not shown.
    let lives: Vec<_> = m
        .rows()
        .filter(|r| r.info.cmdline.contains("preprocess.py"))
        .collect();
    assert!(lives.len() >= 5, "{} lives held", lives.len());
    let shown = rows
        .iter()
        .filter(|r| r.info.cmdline.contains("preprocess.py"))
        .count();
    assert!(shown <= 1);
}

#[test]
fn exited_process_stays_greyed_then_leaves_the_table() {
    let mut sim = SimSource::demo(T0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 7200);
    // The preprocess job lives from 30 s to 270 s.
    for i in 0..=300 {
        let t = T0 + i * 1000;
        engine_state.apply(&mut m, sim.sample(t).expect("sim"), t);
    }
    let row = m.rows().find(|r| r.key.pid == 60100).expect("job row");
    assert_eq!(row.exited_at_ms, Some(T0 + 270_000));
    assert!(m
        .table_rows(T0 + 290_000)
        .iter()
        .any(|r| r.key.pid == 60100));
    assert!(!m
        .table_rows(T0 + 301_000)
        .iter()
        .any(|r| r.key.pid == 60100));
}

struct Hangs {
    sim: SimSource,
    served: bool,
    block: mpsc::Receiver<()>,
}

impl GpuSource for Hangs {
    fn info(&self) -> SourceInfo {
        self.sim.info()
    }
    fn sample(&mut self, now: UnixMs) -> Result<Snapshot, SourceError> {
        if self.served {
            // A wedged driver: the call never returns.
            let _ = self.block.recv();
        }
        self.served = true;
        self.sim.sample(now)
    }
}

#[test]
fn a_hung_source_makes_data_stale_but_never_blocks() {
    let (keep, block) = mpsc::channel();
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(100, 1000));
    let handle = SamplerHandle::spawn(
        Box::new(move || {
            Ok(Box::new(Hangs {
                sim: SimSource::demo(now_ms()),
                served: false,
                block,
            }) as Box<dyn GpuSource>)
        }),
        Duration::from_millis(100),
        shared.clone(),
        Arc::new(|| {}),
    )
    .expect("spawn");
    std::thread::sleep(Duration::from_millis(600));
    {
        let m = shared.read().expect("lock");
        assert_eq!(m.ticks, 1, "one sample, then the source hung");
        assert!(m.is_stale(now_ms()), "no sample for 5 intervals is stale");
    }
    let t = Instant::now();
    drop(handle);
    assert!(
        t.elapsed() < Duration::from_millis(50),
        "dropping the sampler does not wait for the hung call"
    );
    drop(keep);
}

#[test]
fn a_failing_source_reports_why() {
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(100, 1000));
    let h = SamplerHandle::spawn(
        Box::new(|| Err(SourceError::Unavailable("No NVIDIA driver found".into()))),
        Duration::from_millis(100),
        shared.clone(),
        Arc::new(|| {}),
    )
    .expect("spawn");
    assert!(h.stop(Duration::from_secs(2)), "thread ends");
    let m = shared.read().expect("lock");
    assert_eq!(
        m.status,
        vramwarden::engine::view::SourceStatus::Failed("No NVIDIA driver found".into())
    );
}

/// Runs the demo for `minutes` of simulated time through an engine set up by the builder,
/// with a subscriber that records each alert and whether the View already held what it
/// is about, the event itself included (alerts come after the tick is published).
fn alerts_of_the_demo(
    settings: &vramwarden::engine::settings::Settings,
    minutes: i64,
) -> (Vec<(vramwarden::engine::EngineEvent, bool)>, usize) {
    use std::sync::Mutex;
    use vramwarden::engine::{AlertKind, EngineBuilder, EngineEvent, EngineOptions};
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 3600));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (sink_seen, view) = (seen.clone(), shared.clone());
    let sink: vramwarden::engine::AlertSink = Arc::new(move |a: EngineEvent| {
        let m = view
            .read()
            .expect("the lock is free when alerts are delivered");
        let shown = m.events.iter().any(|e| **e == a)
            && match a.kind.alert_kind() {
                Some(AlertKind::Leak) => !m.leaks.is_empty(),
                _ => true,
            };
        sink_seen.lock().expect("lock").push((a, shown));
    });
    let mut sim = SimSource::demo(T0);
    let mut e = EngineBuilder::new(shared.clone(), 1000)
        .settings(settings)
        .options(EngineOptions {
            alerts: Some(sink),
            retention_dir: None,
        })
        .source(sim.info())
        .build();
    for i in 0..minutes * 60 {
        let t = T0 + i * 1000;
        e.tick(sim.sample(t).expect("sim"), t);
    }
    let leaks = shared.read().expect("lock").leaks.len();
    let out = seen.lock().expect("lock").clone();
    (out, leaks)
}

#[test]
fn alerts_go_to_the_subscriber_after_the_tick_is_published_and_follow_the_settings() {
    use vramwarden::engine::{AlertKind, EngineEventKind};
    // The demo's Jupyter kernel leaks 1 MiB/s: flagged within minutes.
    let (alerts, leaks) = alerts_of_the_demo(&Default::default(), 15);
    assert!(leaks > 0, "the demo leaks");
    let leak = alerts
        .iter()
        .find(|(a, _)| matches!(a.kind, EngineEventKind::LeakStarted { .. }))
        .unwrap_or_else(|| panic!("no leak alert: {alerts:?}"));
    assert!(
        leak.1,
        "the leak and its event were in the View before its alert"
    );
    assert!(
        alerts.windows(2).all(|w| w[0].0.seq < w[1].0.seq),
        "alerts come in the order of their numbers"
    );
    assert!(
        alerts.iter().all(|(a, _)| a.kind.alert_kind().is_some()),
        "only alerts: {alerts:?}"
    );
    #[cfg(feature = "gui")]
    {
        use vramwarden::front::gui::alert_words::{self, Urgency};
        let words = alert_words::of(&leak.0, vramwarden::front::report_words::Where::Here)
            .expect("a leak's words");
        assert_eq!(words.urgency, Urgency::Critical);
        assert_eq!(words.summary, "GPU memory leak suspected");
        assert!(words.body.contains("MiB/min"), "{words:?}");
        assert!(
            words.replaces.is_some(),
            "a leak's notification is updated in place"
        );
    }
    // With leak notifications off, the leak is still found, but no leak or OOM alert is sent.
    let mut quiet = vramwarden::engine::settings::Settings::default();
    quiet.notifications.leaks = false;
    let (alerts, leaks) = alerts_of_the_demo(&quiet, 15);
    assert!(leaks > 0);
    assert!(
        alerts
            .iter()
            .all(|(a, _)| !matches!(a.kind.alert_kind(), Some(AlertKind::Leak | AlertKind::Oom))),
        "{alerts:?}"
    );
}
