//! One engine, two subscribers: the engine's own alert subscriber (a local window's) and a
//! window attached through the wire (`WireView` as JSON, the window's checks,
//! `WireView::apply_after`, the remote link's `RemoteAlerts`) hear of the same alerts — the
//! same events, with the same numbers, each once — from the simulated GPUs' demo: its
//! leaking kernel and a rule that acts on the trainer. A window attached late
//! hears of none raised before it attached. And a recording that fails and resumes shows the
//! same status-bar notice in a window on the engine and in one attached through the wire.

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
        use vramwarden::front::report_words::Where;
        let words = |v: &[EngineEvent]| {
            v.iter()
                .map(|e| alert_words::of(e, Where::Here))
                .collect::<Vec<_>>()
        };
        assert_eq!(words(&remote), words(&local));
        assert!(words(&local).iter().all(Option::is_some));
    }
}

/// Writes past `bytes` fail (EFBIG, SIGXFSZ ignored) in this whole process until dropped. The
/// other test here writes no file.
#[cfg(feature = "gui")]
struct FileSizeLimit(libc::rlimit);

#[cfg(feature = "gui")]
impl FileSizeLimit {
    fn set(bytes: u64) -> Self {
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain calls on this process's limits and signal disposition.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut old), 0);
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: old.rlim_max,
            };
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
        }
        Self(old)
    }
}

#[cfg(feature = "gui")]
impl Drop for FileSizeLimit {
    fn drop(&mut self) {
        // SAFETY: restores the limit read in `set`.
        unsafe {
            libc::setrlimit(libc::RLIMIT_FSIZE, &self.0);
        }
    }
}

/// A recording that fails and resumes on the simulated GPUs: the status bar of a window on
/// the engine and of one attached through the wire shows the same notice, for the same time,
/// in the words the headless front ends print on stderr.
#[cfg(feature = "gui")]
#[test]
fn a_remote_window_shows_the_local_window_s_status_bar_notice() {
    use vramwarden::front::gui::notices::{shown, NOTICE_SHOWN_MS};
    use vramwarden::front::report_words::stderr_line;
    let dir = tempfile::tempdir().expect("tmp");
    let shared = Shared::new(Monitor::new(1000, 3600));
    let mut sim = SimSource::demo(T0);
    let mut engine = EngineBuilder::new(shared.clone(), 1000)
        .record(vramwarden::engine::RecordTo::File(
            dir.path().join("run.vwlog"),
        ))
        .source(sim.info())
        .build();
    let (sink, _) = collecting();
    let mut window = RemoteWindow::new(sink);
    let mut t = T0;
    // Both windows' notices at `t`, and the stderr line of the newest report.
    let mut both = |engine: &mut vramwarden::Engine, t: vramwarden::model::UnixMs| {
        engine.tick(sim.sample(t).expect("sim"), t);
        let local = shared.view().expect("a view");
        window.poll(&local);
        let line = local.events.iter().rev().find_map(|e| stderr_line(e));
        (
            shown(&local, None, None, t),
            shown(&window.view, Some("gpu-box-3"), None, t),
            line,
        )
    };
    let limit = FileSizeLimit::set(8 * 1024);
    let failed = loop {
        let (local, remote, line) = both(&mut engine, t);
        if let Some(n) = local {
            assert_eq!(remote.as_deref(), Some(n.as_str()), "the same notice");
            assert_eq!(line, Some(format!("vramwarden: {n}")), "the same words");
            break n;
        }
        assert!(t < T0 + 600_000, "the recording never failed");
        t += 1000;
    };
    assert!(
        failed.starts_with("recording failed, retrying every sample: "),
        "{failed}"
    );
    t += 1000;
    assert_eq!(both(&mut engine, t).1.as_deref(), Some(failed.as_str()));
    drop(limit);
    t += 1000;
    let (local, remote, line) = both(&mut engine, t);
    let resumed = local.expect("a notice");
    assert!(
        resumed.starts_with("recording resumed; 2 sample(s) were not written: "),
        "{resumed}"
    );
    assert_eq!(remote, Some(resumed.clone()));
    assert_eq!(line, Some(format!("vramwarden: {resumed}")));
    // Shown for its time, then gone on both.
    let (local, remote, _) = both(&mut engine, t + NOTICE_SHOWN_MS - 1000);
    assert_eq!(
        (local.as_deref(), remote),
        (Some(resumed.as_str()), Some(resumed.clone()))
    );
    let (local, remote, _) = both(&mut engine, t + NOTICE_SHOWN_MS);
    assert_eq!((local, remote), (None, None));
}
