//! One engine, two subscribers: the engine's own alert subscriber (a local window's) and a
//! window attached through the wire (`WireView` as JSON, the window's checks,
//! `WireView::apply_after`, the remote link's `RemoteAlerts`) hear of the same alerts — the
//! same events, with the same numbers, each once — from the simulated GPUs' demo: its
//! leaking kernel and a rule that acts on the trainer. A window attached late
//! hears of none raised before it attached.

mod common;

use std::sync::{Arc, Mutex};

use common::{poll_wire, T0};
use vramwarden::engine::builder::EngineBuilder;
use vramwarden::engine::shared::Shared;
use vramwarden::engine::view::Monitor;
use vramwarden::engine::{AlertFilter, AlertSink, EngineEvent, EngineEventKind, EngineOptions};
use vramwarden::link::remote_alerts::RemoteAlerts;
use vramwarden::source::sim::SimSource;
use vramwarden::source::GpuSource;

/// Samples the engine takes (25 minutes of the demo).
const SAMPLES: i64 = 1500;
/// Samples between two polls of the remote window.
const POLL_EVERY: i64 = 50;

/// A rule that notifies of every process over 30 GiB (the trainer, another user's), out of
/// dry run, so a rule acts.
fn settings() -> vramwarden::engine::settings::Settings {
    let mut s = vramwarden::engine::settings::Settings::default();
    s.cleanup.dry_run = false;
    s.notifications.rules = true;
    s.cleanup.rules = vec![vramwarden::act::rules::Rule {
        dry_run: false,
        allow_other_users: true,
        ..common::big_holder()
    }];
    s
}

fn collecting() -> (AlertSink, Arc<Mutex<Vec<EngineEvent>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let into = got.clone();
    let sink: AlertSink = Arc::new(move |e| into.lock().expect("alerts").push(e));
    (sink, got)
}

/// A window attached to the engine's View through the wire, with its alerts.
struct RemoteWindow {
    view: Monitor,
    since: u64,
    alerts: RemoteAlerts,
}

impl RemoteWindow {
    fn new(sink: AlertSink) -> Self {
        Self {
            view: Monitor::new(1000, 3600),
            since: 0,
            alerts: RemoteAlerts::new(sink, AlertFilter::of(&settings())),
        }
    }

    /// Polls `local` until caught up, as the remote link does, then hands on its alerts.
    fn poll(&mut self, local: &Monitor) {
        let now = local.latest.as_ref().map_or(T0, |s| s.taken_at_ms);
        self.since = poll_wire(local, &mut self.view, self.since, now, now);
        let alerts = self.alerts.take(&self.view);
        self.alerts.deliver(alerts);
    }
}

#[test]
fn one_engine_gives_a_local_subscriber_and_a_remote_window_the_same_alerts() {
    let shared = Shared::new(Monitor::new(1000, 3600));
    let (local_sink, local) = collecting();
    let mut sim = SimSource::demo(T0);
    let mut engine = EngineBuilder::new(shared.clone(), 1000)
        .settings(&settings())
        .options(EngineOptions {
            alerts: Some(local_sink),
            retention_dir: None,
        })
        .source(sim.info())
        .build();
    let (remote_sink, remote) = collecting();
    let mut window = RemoteWindow::new(remote_sink);
    // Attached before the first sample: it hears of every alert from then on.
    window.poll(&shared.view().expect("a view"));
    let (late_sink, late) = collecting();
    let mut late_window = RemoteWindow::new(late_sink);
    let mut late_from = None;
    for i in 0..SAMPLES {
        let t = T0 + i * 1000;
        engine.tick(sim.sample(t).expect("sim"), t);
        if i % POLL_EVERY == POLL_EVERY - 1 {
            let view = shared.view().expect("a view");
            window.poll(&view);
            if i >= SAMPLES / 2 {
                late_from.get_or_insert(view.events.back().map_or(0, |e| e.seq));
                late_window.poll(&view);
            }
        }
    }
    let view = shared.view().expect("a view");
    window.poll(&view);
    late_window.poll(&view);
    let (local, remote, late) = (
        local.lock().expect("alerts").clone(),
        remote.lock().expect("alerts").clone(),
        late.lock().expect("alerts").clone(),
    );
    let has = |f: &dyn Fn(&EngineEventKind) -> bool| local.iter().any(|e| f(&e.kind));
    assert!(has(&|k| matches!(k, EngineEventKind::LeakStarted { .. })));
    assert!(has(&|k| matches!(k, EngineEventKind::Activity { .. })));
    assert_eq!(remote, local, "the same alerts, each once, in order");
    let after: Vec<&EngineEvent> = local
        .iter()
        .filter(|e| late_from.is_some_and(|s| e.seq > s))
        .collect();
    assert_eq!(late.iter().collect::<Vec<_>>(), after);
    assert!(late.len() < local.len(), "the late window missed the first");
    #[cfg(feature = "gui")]
    {
        use vramwarden::front::gui::alert_words;
        let words = |v: &[EngineEvent]| v.iter().map(alert_words::of).collect::<Vec<_>>();
        assert_eq!(words(&remote), words(&local));
        assert!(words(&local).iter().all(Option::is_some));
    }
}
