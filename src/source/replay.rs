//! A recorded session as a source: each sample is the session's next recorded one (whatever
//! moment is asked for), its leak, OOM and activity events come at their times through
//! [`GpuSource::recorded_events`], and it ends with [`SourceError::Ended`]. The engine that
//! takes it is read-only ([`crate::engine::Engine::read_only`]): it neither detects, records
//! nor acts; see [`crate::engine::replay`].
//!
//! The source also builds the session's history ([`ReplaySource::take_history`]): each
//! sample, sanitized as the engine sanitizes it, pushed with [`History::push`] as
//! [`crate::engine::state::EngineState::apply`] pushes it. [`ReplaySource::history_by`] builds it
//! on a thread of its own that decodes the samples a second time, so on two cores the history
//! and the engine's rows are built at once, and no sample crosses between cores.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};

use super::traits::{GpuSource, SourceError};
use crate::model::history::History;
use crate::model::{Snapshot, SourceInfo, UnixMs};
use crate::session::reader::SessionData;
use crate::session::Event;

/// How often (in samples) the history's thread looks whether it should stop.
const STOP_EVERY: usize = 1024;

/// A session's samples, in time order, for an engine.
pub struct ReplaySource<'a> {
    data: &'a SessionData,
    /// The index of the next sample.
    next: usize,
    /// The sample the engine gave back last, decoded into again.
    spare: Option<Snapshot>,
    /// Where the history is built.
    history: HistoryBuild<'a>,
    /// Set when the source is dropped: a history still being built is not needed.
    stop: Arc<AtomicBool>,
    /// The memory events (leak started or ended, OOM suspected) and the activity entries
    /// (rules', the guard's, manual actions), in time order.
    events: std::iter::Peekable<std::vec::IntoIter<Event>>,
}

/// Where the session's history is built.
enum HistoryBuild<'a> {
    /// Here, from each sample as it is given.
    Here(Box<History>),
    /// On a thread of its own, from every sample.
    Thread(ScopedJoinHandle<'a, History>),
    /// Taken out already.
    Taken,
}

impl<'a> ReplaySource<'a> {
    /// The session's samples, decoded on the engine's thread, which also builds the history.
    pub fn new(data: &'a SessionData) -> Self {
        let mut events: Vec<Event> = data
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::LeakStarted { .. }
                        | Event::LeakEnded { .. }
                        | Event::OomSuspected { .. }
                        | Event::Activity { .. }
                )
            })
            .cloned()
            .collect();
        // Logs joined end to end keep their events in file order; the engine takes them in
        // time order (stable: a start and its end at the same moment stay in that order).
        events.sort_by_key(Event::unix_ms);
        Self {
            data,
            next: 0,
            spare: None,
            history: HistoryBuild::Here(Box::new(session_history(data))),
            stop: Arc::new(AtomicBool::new(false)),
            events: events.into_iter().peekable(),
        }
    }

    /// The same, with the history built on a thread of `scope` that decodes every sample
    /// itself ([`build_history`]); built here if the thread cannot be started.
    pub(crate) fn history_by<'env>(data: &'env SessionData, scope: &'a Scope<'a, 'env>) -> Self
    where
        'env: 'a,
    {
        let mut me = Self::new(data);
        let stop = me.stop.clone();
        let spawned = std::thread::Builder::new()
            .name("vramwarden-replay-history".into())
            .spawn_scoped(scope, move || build_history(data, &stop));
        if let Ok(handle) = spawned {
            me.history = HistoryBuild::Thread(handle);
        }
        me
    }

    /// The history, taken out. After the last sample, it is the history of the whole
    /// session.
    ///
    /// # Errors
    /// The panic's text when its thread panicked (a bug); a later call says it was taken.
    pub fn take_history(&mut self) -> Result<History, String> {
        match std::mem::replace(&mut self.history, HistoryBuild::Taken) {
            HistoryBuild::Here(h) => Ok(*h),
            HistoryBuild::Thread(handle) => handle
                .join()
                .map_err(|p| crate::host::logging::panic_text(p.as_ref())),
            HistoryBuild::Taken => Err("the history was taken already".into()),
        }
    }
}

impl Drop for ReplaySource<'_> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// An empty history that holds every sample of `data`.
fn session_history(data: &SessionData) -> History {
    History::new(data.len().max(1))
}

/// The history of every sample of `data` that decodes, each sanitized first; stops early
/// (a partial history) once `stop` is set.
pub fn build_history(data: &SessionData, stop: &AtomicBool) -> History {
    let mut history = session_history(data);
    let mut s = Snapshot::default();
    for i in 0..data.len() {
        if i % STOP_EVERY == 0 && stop.load(Ordering::Relaxed) {
            break;
        }
        if data.snapshot_into(i, &mut s) {
            push_sanitized(&mut history, &mut s);
        }
    }
    history
}

/// Sample `s` sanitized, as the engine sanitizes it, then pushed as [`EngineState::apply`] pushes
/// it.
///
/// [`EngineState::apply`]: crate::engine::state::EngineState::apply
pub(crate) fn push_sanitized(history: &mut History, s: &mut Snapshot) {
    s.sanitize();
    history.push(s);
}

impl GpuSource for ReplaySource<'_> {
    fn info(&self) -> SourceInfo {
        let h = self.data.header.as_ref();
        SourceInfo {
            kind: h.map_or("session".into(), |h| h.source.clone()),
            driver_version: h.and_then(|h| h.driver_version.clone()),
            nvml_version: h.and_then(|h| h.nvml_version.clone()),
            cuda_version: None,
            host: h.map_or(String::new(), |h| h.host.clone()),
        }
    }

    fn sample(&mut self, _now_ms: UnixMs) -> Result<Snapshot, SourceError> {
        let mut s = self.spare.take().unwrap_or_default();
        // A sample that no longer decodes is skipped, as the index was built from samples
        // that did.
        while self.next < self.data.len() {
            let i = self.next;
            self.next += 1;
            if self.data.snapshot_into(i, &mut s) {
                if let HistoryBuild::Here(history) = &mut self.history {
                    push_sanitized(history, &mut s);
                }
                return Ok(s);
            }
        }
        Err(SourceError::Ended)
    }

    fn recorded_events(&mut self, until: UnixMs) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(e) = self.events.next_if(|e| e.unix_ms() <= until) {
            out.push(e);
        }
        out
    }

    fn give_back(&mut self, snap: Snapshot) {
        self.spare = Some(snap);
    }
}
