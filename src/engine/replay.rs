//! Reopening a recorded session: its samples are played through a read-only engine
//! ([`crate::engine::Engine::read_only`]) from a [`ReplaySource`], by the loop every mode uses
//! ([`crate::engine::tick_loop`]). What the window shows of a past session is built by the same code as
//! what it shows live ([`EngineState::apply`](crate::engine::state::EngineState::apply)); the session's own leak and OOM events come with it.
//! Nothing acts from a replay: the engine runs no rule and refuses manual actions.

use std::collections::HashSet;
use std::path::Path;

use crate::engine::builder::EngineBuilder;
use crate::engine::replay_halves::{Halves, Replayed};
use crate::engine::tick_loop::{Clock, Ended};
use crate::engine::view::Monitor;
use crate::session::reader::SessionData;
use crate::session::Event;
use crate::source::replay::ReplaySource;
use crate::source::GpuSource;

pub use crate::engine::replay_halves::PROGRESS_EVERY;

/// The whole of `data` replayed into a monitor (its history holds every sample).
pub fn session(data: &SessionData) -> Monitor {
    session_with_progress(data, &mut |_| true).unwrap_or_else(|| Monitor::new(1000, 1))
}

/// [`session`], calling `progress` with the done fraction (0..=1) every
/// [`PROGRESS_EVERY`] samples; None when `progress` returned false (cancelled).
///
/// The samples are decoded on the engine's thread while a second one builds the history
/// from its own decoding of them ([`ReplaySource::history_by`]), with
/// [`History::push`](crate::model::history::History::push) as [`EngineState::apply`](crate::engine::state::EngineState::apply) does: on two
/// cores the two halves are built at once. A panic (a bug) leaves the monitor with a failed
/// status that says so.
pub fn session_with_progress(
    data: &SessionData,
    progress: &mut dyn FnMut(f32) -> bool,
) -> Option<Monitor> {
    let halves = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        match crate::engine::replay_halves::replay(data, progress) {
            Halves::Built(r) => Some(Some(from_halves(data, *r, progress))),
            Halves::Cancelled => Some(None),
            Halves::NotHere => None,
        }
    }));
    match halves {
        Ok(Some(done)) => done,
        // A panic (a bug) is met again, and reported, by the replay sample by sample.
        Ok(None) | Err(_) => sample_by_sample(data, progress),
    }
}

/// The View of a replay in halves: the read-only engine is set up as for a replay sample by
/// sample, takes the session's memory events and closes the leaks still open at its end.
fn from_halves(data: &SessionData, r: Replayed, progress: &mut dyn FnMut(f32) -> bool) -> Monitor {
    let interval_ms = data.header.as_ref().map_or(1000, |h| h.interval_ms.max(1));
    let shared = crate::engine::shared::Shared::new(Monitor::new(interval_ms, data.len().max(1)));
    let mut source = ReplaySource::new(data);
    let mut engine = EngineBuilder::new(shared.clone(), interval_ms)
        .read_only(data.path.clone())
        .history_by_source()
        .source(source.info())
        .build();
    if let Ok(mut m) = shared.write() {
        m.set_history(r.history);
        m.rows = r.rows;
        m.latest_received_ms = Some(r.latest.taken_at_ms);
        m.latest = Some(r.latest);
        m.last_error = None;
        m.status = crate::engine::view::SourceStatus::Running;
        m.ticks = r.ticks;
    }
    engine.take_recorded_events(source.recorded_events(crate::model::UnixMs::MAX));
    let _ = engine.finish();
    progress(1.0);
    into_monitor(shared)
}

/// [`session_with_progress`] through the engine's loop, one sample after another.
fn sample_by_sample(data: &SessionData, progress: &mut dyn FnMut(f32) -> bool) -> Option<Monitor> {
    let interval_ms = data.header.as_ref().map_or(1000, |h| h.interval_ms.max(1));
    let shared = crate::engine::shared::Shared::new(Monitor::new(interval_ms, data.len().max(1)));
    let builder = EngineBuilder::new(shared.clone(), interval_ms)
        .read_only(data.path.clone())
        .history_by_source();
    let (engine, ended, history) = std::thread::scope(|scope| {
        let mut source = ReplaySource::history_by(data, scope);
        let mut engine = builder.source(source.info()).build();
        let start = data.span().map_or(0, |(a, _)| a);
        let mut n = 0u64;
        let ended = crate::engine::tick_loop::run(
            &mut engine,
            &mut source,
            std::time::Duration::from_millis(interval_ms),
            Clock::Simulated { start, speed: None },
            |_, _, _| {
                n += 1;
                n % PROGRESS_EVERY != 0 || progress((n as f32 / data.len().max(1) as f32).min(1.0))
            },
        );
        // A cancelled replay's history is not waited for (dropping the source stops it).
        let history = (ended != Ended::Stopped).then(|| source.take_history());
        (engine, ended, history)
    });
    let history = history?;
    let failed = match (&ended, &history) {
        (Ended::Panicked(what), _) => Some(what.clone()),
        (_, Err(what)) => Some(format!("the history could not be built: {what}")),
        _ => None,
    };
    if let (Ok(h), Ok(mut m)) = (history, shared.write()) {
        m.set_history(h);
    }
    // After the history is in: the leaks still open at the end take their peak from it.
    let _ = engine.finish();
    let mut m = into_monitor(shared);
    if let Some(what) = failed {
        m.status = crate::engine::view::SourceStatus::Failed(format!(
            "internal error (a bug in vramwarden; the replay stopped): {what}"
        ));
    }
    progress(1.0);
    Some(m)
}

/// The View an engine published, taken out of its lock.
fn into_monitor(shared: crate::engine::shared::SharedMonitor) -> Monitor {
    std::sync::Arc::try_unwrap(shared)
        .map(crate::engine::shared::Shared::into_inner)
        .unwrap_or_else(|s| {
            s.read()
                .map(|m| m.clone())
                .unwrap_or_else(|p| p.into_inner().clone())
        })
}

/// True when a leak began in `data` and has no end in it (the recording stopped while it
/// grew).
pub fn has_open_leak(data: &SessionData) -> bool {
    let mut open = HashSet::new();
    for e in &data.events {
        match e {
            Event::LeakStarted { leak, .. } => {
                open.insert(crate::detect::leak_watch::key_of(leak));
            }
            Event::LeakEnded { leak, .. } => {
                open.remove(&crate::detect::leak_watch::key_of(leak));
            }
            _ => {}
        }
    }
    !open.is_empty()
}

/// Leak episodes recorded in every session file of `dir` except `skip` (the live one), for
/// the Leaks pane (read off the UI thread).
pub fn past_episodes(dir: &Path, skip: Option<&Path>) -> PastEvents {
    let mut out = PastEvents::default();
    for s in crate::session::catalog::list(dir) {
        if Some(s.path.as_path()) == skip {
            continue;
        }
        let one = episodes_of(&s.path, s.recording);
        out.leaks.extend(one.leaks);
        out.ooms.extend(one.ooms);
    }
    out
}

/// The memory events of one session log (none when it cannot be read). In a log being
/// `recording` now (by another window or an agent), a leak still growing at its end is
/// ongoing, not ended with the recording.
pub(crate) fn episodes_of(path: &Path, recording: bool) -> PastEvents {
    let Ok(data) = SessionData::open_listed(path) else {
        return PastEvents::default();
    };
    // A leak still growing when the recording stopped needs the samples (its growth and
    // peak); otherwise the events suffice.
    let m = if has_open_leak(&data) {
        session(&data)
    } else {
        let mut m = Monitor::new(1000, 1);
        for e in &data.events {
            crate::detect::leak_watch::record_event(&mut m.leaks, &mut m.ooms, e, Some(path));
        }
        m
    };
    let mut leaks: Vec<_> = m.leaks.into_iter().collect();
    if recording {
        for l in leaks.iter_mut().filter(|l| l.open_at_end) {
            l.open_at_end = false;
            l.ended_ms = None;
        }
    }
    PastEvents {
        leaks,
        ooms: m.ooms.into_iter().collect(),
    }
}

/// The memory events of past sessions.
#[derive(Debug, Clone, Default)]
pub struct PastEvents {
    /// Leak episodes.
    pub leaks: Vec<crate::engine::view::LeakRecord>,
    /// OOM suspicions.
    pub ooms: Vec<crate::engine::view::OomRecord>,
}
