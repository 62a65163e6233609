//! Publish: the one place the engine writes the state front ends read. A tick publishes
//! everything under one write lock, so all the View's parts change at once; the few writes
//! between ticks (a source's status, a command's activity entry, a recorded session's events)
//! are here too, each one short.

use crate::act::rules::action::Activity;
use crate::engine::events::{EngineEvent, EVENTS_KEPT};
use crate::engine::shared::Shared;
use crate::engine::state::EngineState;
use crate::engine::view::{Monitor, RecordingStatus, SourceStatus};
use crate::model::{Snapshot, SourceInfo, UnixMs};
use crate::session::Event;

/// Most activity entries the View keeps.
pub(crate) const ACTIVITY_KEPT: usize = 1000;

/// What one tick publishes.
pub(crate) struct Tick {
    /// The enriched sample.
    pub snap: Snapshot,
    /// When it arrived.
    pub received_ms: UnixMs,
    /// The activity entries of the tick.
    pub acts: Vec<Activity>,
    /// Final replies to accepted commands whose work ended in this tick.
    pub replies: Vec<crate::model::reply::CommandReply>,
    /// The tick's events, numbered.
    pub events: Vec<EngineEvent>,
}

/// Publishes `t` (after `stages` wrote in place the parts the stages keep themselves: the
/// watches' (with the OOM forecast alerts), the guard's status, when processes were last
/// active, the recording's status),
/// its rows derived by the engine's `state`; returns the sample it replaced as the latest.
/// None when a writer panicked while holding the lock.
pub(crate) fn tick(
    shared: &Shared,
    state: &mut EngineState,
    t: Tick,
    stages: impl FnOnce(&mut Monitor),
) -> Option<Snapshot> {
    let mut m = shared.write().ok()?;
    stages(&mut m);
    push_activity(&mut m, t.acts);
    let previous = state.apply(&mut m, t.snap, t.received_ms);
    m.replies.extend(t.replies);
    while m.replies.len() > crate::engine::view::REPLIES_SHOWN {
        m.replies.pop_front();
    }
    push_events(&mut m, t.events);
    previous
}

/// Events outside a tick's publishing (a read-only engine's commands').
pub(crate) fn events(shared: &Shared, events: Vec<EngineEvent>) {
    if let Ok(mut m) = shared.write() {
        push_events(&mut m, events);
    }
}

/// A recorded sample as it was recorded (a read-only engine); with `history_by_source`,
/// all but the history, which the source builds.
pub(crate) fn replayed(
    shared: &Shared,
    state: &mut EngineState,
    snap: Snapshot,
    received_ms: UnixMs,
    history_by_source: bool,
) -> Option<Snapshot> {
    let mut m = shared.write().ok()?;
    if history_by_source {
        state.apply_beside_history(&mut m, snap, received_ms)
    } else {
        state.apply(&mut m, snap, received_ms)
    }
}

/// A recorded session's own leak and OOM events, named with its file.
pub(crate) fn recorded_events(
    shared: &Shared,
    events: &[Event],
    session: Option<&std::path::Path>,
) {
    if let Ok(mut m) = shared.write() {
        let m = &mut *m;
        for e in events {
            crate::detect::leak_watch::record_event(&mut m.leaks, &mut m.ooms, e, session);
        }
        let acts = events.iter().filter_map(recorded_activity).collect();
        push_activity(m, acts);
    }
}

/// A recorded rule's or the guard's entry as the Activity tab lists it (its target read back
/// from the log: nothing can act on it).
fn recorded_activity(e: &Event) -> Option<Activity> {
    let Event::Activity {
        unix_ms,
        rule,
        pid,
        device_index,
        name,
        user,
        action,
        outcome,
        detail,
    } = e
    else {
        return None;
    };
    let target = if *pid == 0 {
        crate::act::rules::eval::Target::Device(*device_index)
    } else {
        let info = crate::model::ProcInfo {
            name: name.clone(),
            user: user.clone(),
            ..Default::default()
        };
        let key = crate::model::ProcessKey {
            pid: *pid,
            start_time_ms: 0,
        };
        crate::act::rules::eval::Target::process(
            (key, *device_index),
            Some(std::sync::Arc::new(info)),
            None,
            crate::model::Origin::Recorded,
        )
    };
    Some(Activity {
        unix_ms: *unix_ms,
        rule: rule.clone(),
        target,
        action: action.clone(),
        outcome: *outcome,
        detail: detail.clone(),
        entry: Default::default(),
    })
}

/// Activity entries outside a tick (a command's).
pub(crate) fn activity(shared: &Shared, acts: Vec<Activity>) {
    if let Ok(mut m) = shared.write() {
        push_activity(&mut m, acts);
    }
}

/// The source's last error, until the next good sample.
pub(crate) fn sample_failed(shared: &Shared, e: &crate::source::SourceError) {
    if let Ok(mut m) = shared.write() {
        m.last_error = Some(e.to_string());
    }
}

/// What the source is.
pub(crate) fn source(shared: &Shared, info: SourceInfo) {
    if let Ok(mut m) = shared.write() {
        m.source = Some(info);
    }
}

/// The source could not be opened, or sampling stopped: why. Set also when a panic poisoned
/// the lock.
pub(crate) fn source_failed(shared: &Shared, why: String) {
    let mut m = shared.write().unwrap_or_else(|p| p.into_inner());
    m.status = SourceStatus::Failed(why);
}

/// The recording's status (outside a tick: paused, resumed).
pub(crate) fn recording(shared: &Shared, status: RecordingStatus) {
    if let Ok(mut m) = shared.write() {
        m.recording = status;
    }
}

/// Closing the session log failed: why.
pub(crate) fn recording_closed_badly(shared: &Shared, why: String) {
    if let Ok(mut m) = shared.write() {
        m.recording.error = Some(why);
    }
}

/// The leaks still open when a recorded session ends end with it.
pub(crate) fn close_open_leaks(shared: &Shared) {
    if let Ok(mut m) = shared.write() {
        let m = &mut *m;
        crate::detect::leak_watch::close_open_leaks(&mut m.leaks, &m.history);
    }
}

fn push_events(m: &mut Monitor, events: Vec<EngineEvent>) {
    m.events.extend(events.into_iter().map(std::sync::Arc::new));
    let over = m.events.len().saturating_sub(EVENTS_KEPT);
    m.events.drain(..over);
}

fn push_activity(m: &mut Monitor, acts: Vec<Activity>) {
    m.activity.extend(acts.into_iter().map(std::sync::Arc::new));
    while m.activity.len() > ACTIVITY_KEPT {
        m.activity.pop_front();
    }
}
