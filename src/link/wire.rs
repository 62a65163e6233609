//! The one wire type between an agent and a remote window: [`WireView`], the View
//! ([`Monitor`]) as plain serde data, versioned ([`API_VERSION`]). The agent makes it from its
//! View (`GET /api/view?since=TICK`, see docs/agent-api.md); the remote link reads exactly
//! this type, checks every value ([`super::wire_checks`]) and takes it into the window's
//! View ([`WireView::apply`]) as it is: the window derives nothing. So a remote window has
//! what a local one has: the snapshot, the history (only the ticks after `since`: a poll does
//! not resend the day), the process rows the engine derived (running and exited ones, with
//! their peaks, one-minute changes and colours), when each process was last active, leak
//! episodes, OOM suspicions, rule activity, the engine's events, the recording's status, the
//! time-to-full figures the snapshot carries, the OOM forecast alerts, the series growing now
//! and the memory held by processes not running on the agent's computer. [`WirePast`] is the
//! agent's own past leaks (`GET /api/past`).
//!
//! Activity entries go as [`WireActivity`]: the target by its identity and its facts as the
//! engine logged them; so do those of the engine's numbered events ([`WireEvent`]), which an
//! attached window alerts of (`super::remote_alerts`).
//!
//! A command's reply goes as [`WireReply`], versioned with the View: the answer of
//! `POST /api/v1/command` (final, or accepted with its agent id), and, for an accepted one,
//! its final reply later in the View's `replies` under the same id.

use serde::{Deserialize, Serialize};

pub use super::wire_command::{WireAction, WireCommand};

use crate::act::rules::action::{Activity, Entry};
use crate::act::rules::eval::Target;
use crate::detect::forecast_alert::ForecastAlert;
use crate::detect::leak::Growing;
use crate::detect::orphans::OrphanGpu;
use crate::engine::view::{
    LeakKey, LeakRecord, Monitor, OomRecord, ProcessRow, RecordingStatus, SourceStatus,
};
use crate::model::history::delta::HistoryDelta;
use crate::model::history::ProcSeriesKey;
use crate::model::outcome::Outcome;
use crate::model::{Origin, Snapshot, SourceInfo, UnixMs};

/// The most process rows a window takes from an agent (a day of a new process a second is
/// 86 400; the answer's size, at most [`super::wire_checks::MAX_VIEW_BYTES`], bounds a
/// complete list before this does).
pub(crate) const MAX_ROWS: usize = 1 << 18;

/// The version of [`WireView`], [`WirePast`] and [`WireReply`]; a window refuses any other.
/// Version 3: commands are answered as [`WireReply`], and a long one's final reply comes in
/// the View's `replies`. Version 4: the View carries the engine's process rows and when each
/// process was last active (`rows`, `last_active`) in place of `color_slots`. Version 5: the
/// View carries the engine's latest numbered events (`events`), from which an attached window
/// alerts. Version 6: the View carries no `notices` (the engine writes no sentence: a window
/// says the problems reported in its status bar from `events`). Version 7: `rows` are only the
/// rows changed since the poll's `since` (seen or exited at a later sample), unless
/// `rows_complete`; the window merges them into its own. An agent of another version is
/// refused with a sentence naming both versions.
pub const API_VERSION: u32 = 7;

/// One of the engine's events as it crosses the wire: its activity entry as a
/// [`WireActivity`].
pub type WireEvent = crate::engine::events::EngineEvent<WireActivity>;

/// The View as an agent sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireView {
    /// Always [`API_VERSION`].
    pub api_version: u32,
    /// What the agent samples.
    pub source: Option<SourceInfo>,
    /// Whether its samples arrive.
    pub status: SourceStatus,
    /// Its sampling interval, ms.
    pub interval_ms: u64,
    /// Its newest snapshot (with each GPU's time-to-full).
    pub latest: Option<Snapshot>,
    /// When that snapshot arrived on the agent.
    pub latest_received_ms: Option<UnixMs>,
    /// Its last sampling error.
    pub last_error: Option<String>,
    /// Its recording.
    pub recording: RecordingStatus,
    /// One past the newest tick of its history: the window is caught up when the delta
    /// ends here.
    pub history_end_tick: u64,
    /// Its history after the `since` asked (a page of it).
    pub history: HistoryDelta,
    /// Its leak episodes of this run.
    pub leaks: Vec<LeakRecord>,
    /// Its OOM suspicions of this run.
    pub ooms: Vec<OomRecord>,
    /// What its rules and manual actions did, newest last.
    pub activity: Vec<WireActivity>,
    /// Snapshots it applied so far.
    pub ticks: u64,
    /// Its OOM forecast alerts in force, by GPU (the banner on a GPU card). Absent from an
    /// agent of an earlier build: none.
    #[serde(default)]
    pub oom_alerts: Vec<ForecastAlert>,
    /// Its series growing now that are not (yet) leaks (the table's "growing" label).
    #[serde(default)]
    pub growing: Vec<(LeakKey, Growing)>,
    /// Per GPU, memory held by processes not running on the agent's computer.
    #[serde(default)]
    pub orphans: Vec<OrphanGpu>,
    /// Its OOM guard on each GPU. Absent from an agent of an earlier build: none.
    #[serde(default)]
    pub guard: Vec<crate::act::guard::GuardStatus>,
    /// The final replies of its commands that were accepted first (a park, a resume, a
    /// companion's answer), newest last, each under the id its accepted reply gave.
    #[serde(default)]
    pub replies: Vec<WireReply>,
    /// Its process rows as its engine derived them, in its order: running processes and
    /// exited ones whose history it still holds (their colours, peaks, one-minute changes,
    /// first and last sightings). All of them when `rows_complete`; else those changed since
    /// the poll's `since` (seen or exited in a sample after the window's newest), which the
    /// window takes into its own rows in place of theirs (a new one at the end).
    pub rows: Vec<ProcessRow>,
    /// Whether `rows` are all the agent's rows (the first poll, or one from a tick the agent
    /// no longer holds), which replace the window's.
    pub rows_complete: bool,
    /// When each process was last GPU-busy or changed its memory, by process and GPU, in
    /// key order (the idle tips and idle conditions).
    pub last_active: Vec<(ProcSeriesKey, UnixMs)>,
    /// Its engine's latest events, numbered, newest last (at most 256): an attached window
    /// alerts of those numbered above the last it saw.
    pub events: Vec<WireEvent>,
}

/// A command's reply as the agent sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireReply {
    /// Always [`API_VERSION`].
    pub api_version: u32,
    /// The command's id on the agent: an accepted command's final reply comes under it.
    pub id: u64,
    /// What was asked, in a few words.
    pub what: String,
    /// How it ended or that it was accepted: `outcome`, `detail`, `stage` (absent: final),
    /// `bytes`, `seconds`, and a rule test's `matches`.
    #[serde(flatten)]
    pub answer: crate::engine::command::Answer,
}

impl WireReply {
    /// The agent's reply `r` on the wire.
    pub fn of(r: &crate::engine::command::CommandReply) -> Self {
        Self {
            api_version: API_VERSION,
            id: r.id.0,
            what: r.what.clone(),
            answer: r.answer.clone(),
        }
    }
}

/// What an activity line acted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WireTarget {
    /// A process on a GPU.
    Process {
        /// Identity and GPU.
        key: ProcSeriesKey,
        /// Its facts (name, owner, command line, container), where known.
        info: Option<std::sync::Arc<crate::model::ProcInfo>>,
        /// GPU memory it held.
        used_bytes: Option<u64>,
        /// Live, simulated or recorded.
        origin: Origin,
    },
    /// A whole GPU.
    Device(u32),
}

/// Which entry of an action an activity line is ([`Entry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireEntry {
    /// The action and how it ended.
    Action,
    /// Asked; its answer follows.
    Asked,
    /// A figure after an action.
    FollowUp,
}

/// One line of the agent's activity log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WireActivity {
    /// When.
    pub unix_ms: UnixMs,
    /// The rule ("manual": a user's action).
    pub rule: String,
    /// On what.
    pub target: WireTarget,
    /// What was done.
    pub action: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Details.
    pub detail: String,
    /// Which entry of its action.
    pub entry: WireEntry,
}

/// The agent's past leak episodes and OOM suspicions, from its own session logs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WirePast {
    /// Always [`API_VERSION`].
    pub api_version: u32,
    /// Leak episodes, each naming its session file on the agent.
    pub leaks: Vec<LeakRecord>,
    /// OOM suspicions.
    pub ooms: Vec<OomRecord>,
}

impl From<&Activity> for WireActivity {
    fn from(a: &Activity) -> Self {
        let target = match &a.target {
            Target::Process {
                key,
                info,
                used_bytes,
                origin,
            } => WireTarget::Process {
                key: *key,
                info: info.clone(),
                used_bytes: *used_bytes,
                origin: *origin,
            },
            Target::Device(i) => WireTarget::Device(*i),
        };
        Self {
            unix_ms: a.unix_ms,
            rule: a.rule.clone(),
            target,
            action: a.action.clone(),
            outcome: a.outcome,
            detail: a.detail.clone(),
            entry: match a.entry {
                Entry::Action => WireEntry::Action,
                Entry::Asked => WireEntry::Asked,
                Entry::FollowUp => WireEntry::FollowUp,
            },
        }
    }
}

impl WireActivity {
    /// The activity line it stands for.
    fn into_activity(self) -> Activity {
        let target = match self.target {
            WireTarget::Process {
                key,
                info,
                used_bytes,
                origin,
            } => Target::Process {
                key,
                info,
                used_bytes,
                origin,
            },
            WireTarget::Device(i) => Target::Device(i),
        };
        Activity {
            unix_ms: self.unix_ms,
            rule: self.rule,
            target,
            action: self.action,
            outcome: self.outcome,
            detail: self.detail,
            entry: match self.entry {
                WireEntry::Action => Entry::Action,
                WireEntry::Asked => Entry::Asked,
                WireEntry::FollowUp => Entry::FollowUp,
            },
        }
    }
}

impl WireView {
    /// The agent's View `m` for a window that holds its history up to `since` (exclusive),
    /// with at most `max_ticks` ticks of history.
    pub fn of(m: &Monitor, since: u64, max_ticks: usize) -> Self {
        let changed_after = rows_changed_after(m, since);
        Self {
            api_version: API_VERSION,
            source: m.source.clone(),
            status: m.status.clone(),
            interval_ms: m.interval_ms,
            latest: m.latest.clone(),
            latest_received_ms: m.latest_received_ms,
            last_error: m.last_error.clone(),
            recording: m.recording.clone(),
            history_end_tick: m.history.end_tick(),
            history: m.history.delta_since(since, max_ticks),
            leaks: m.leaks.clone(),
            ooms: m.ooms.clone(),
            activity: m
                .activity
                .iter()
                .map(|a| WireActivity::from(&**a))
                .collect(),
            ticks: m.ticks,
            oom_alerts: m.oom_alerts.clone(),
            growing: m.growing.clone(),
            orphans: m.orphans.clone(),
            guard: m.guard.clone(),
            replies: m.replies.iter().map(WireReply::of).collect(),
            rows: match changed_after {
                Some(t) => m
                    .rows()
                    .filter(|r| r.last_seen_ms > t || r.exited_at_ms.is_some_and(|e| e > t))
                    .cloned()
                    .collect(),
                None => m.rows().cloned().collect(),
            },
            rows_complete: changed_after.is_none(),
            last_active: last_active(m),
            events: m
                .events
                .iter()
                .map(|e| {
                    crate::engine::events::EngineEvent::clone(e)
                        .map_activity(|a| WireActivity::from(&a))
                })
                .collect(),
        }
    }

    /// True when this answer comes from another run of the agent than the View `m` holds
    /// (asked after `since`): the agent holds less history than the window asked after (its
    /// ticks count from 0 again, so its history is sent from its start) and that history
    /// begins after the window's ends, or it records to another session log. (History sent
    /// again from an earlier point with earlier times is no new run: it is refused.)
    pub fn restarted(&self, m: &Monitor, since: u64) -> bool {
        let other_log = matches!(
            (&self.recording.path, &m.recording.path),
            (Some(a), Some(b)) if a != b
        );
        let begins_after = self
            .history
            .times
            .first()
            .is_some_and(|t| m.history.span().is_none_or(|(_, last)| *t > last));
        (self.history.from_tick < since && begins_after) || other_log
    }

    /// True when its history reaches the agent's newest tick.
    pub fn caught_up(&self) -> bool {
        self.history.end_tick() >= self.history_end_tick
    }

    /// How many of its rows `m` does not hold yet (those it holds are replaced, not added).
    fn new_rows(&self, m: &Monitor) -> usize {
        self.rows
            .iter()
            .filter(|r| m.row(&r.series_key()).is_none())
            .count()
    }

    /// [`Self::apply`] for the answer to a poll after `since`. From a restarted agent
    /// ([`Self::restarted`]) it goes into a View started over, which replaces `m`: the old
    /// run's processes are not kept as exited rows (and legend entries) beside the new run's.
    /// The next poll then asks from the new run's start.
    ///
    /// # Errors
    /// Why the answer was refused; `m` keeps its last good state.
    pub fn apply_after(
        self,
        m: &mut Monitor,
        since: u64,
        received_ms: UnixMs,
    ) -> Result<u64, String> {
        if !self.restarted(m, since) {
            return self.apply(m, received_ms);
        }
        let mut fresh = Monitor::new(self.interval_ms.max(1), m.history.capacity());
        if self.history.from_tick > 0 {
            // Its history from a point of the new run: asked again from its start.
            *m = fresh;
            return Ok(0);
        }
        let next = self.apply(&mut fresh, received_ms)?;
        *m = fresh;
        Ok(next)
    }

    /// Takes an answer, already checked ([`super::wire_checks::view`]), into the window's
    /// View `m`: its history first (refused as a whole, `m` unchanged, when its times do not
    /// follow the window's), then the rest, as the agent's engine made it. The snapshot, the
    /// rows and the last activity are taken once the history is caught up (the snapshot's
    /// tick is the history's newest), the snapshot only when newer than the one held (its
    /// arrival is this computer's time, so a window sees a stalled agent as stale). Returns
    /// the `since` of the next poll.
    ///
    /// # Errors
    /// Why the answer was refused; `m` keeps its last good state.
    pub fn apply(self, m: &mut Monitor, received_ms: UnixMs) -> Result<u64, String> {
        let caught_up = self.caught_up();
        if !self.rows_complete && m.rows().count() + self.new_rows(m) > MAX_ROWS {
            return Err(format!(
                "the agent's rows would grow past {MAX_ROWS} in this window"
            ));
        }
        m.history.append(&self.history)?;
        let next = self.history.end_tick();
        if caught_up {
            if let Some(snap) = self.latest {
                let newer = m
                    .latest
                    .as_ref()
                    .is_none_or(|l| snap.taken_at_ms > l.taken_at_ms);
                if newer {
                    m.latest = Some(snap);
                    m.latest_received_ms = Some(received_ms);
                }
            }
            m.last_active = self.last_active.into_iter().collect();
            m.ticks = self.ticks;
        }
        // Rows always (a poll's changes are not sent again), then those whose history is gone.
        if self.rows_complete {
            m.set_rows(self.rows);
        } else {
            m.merge_rows(self.rows);
        }
        if caught_up {
            m.keep_rows_with_history();
        }
        m.source = self.source;
        m.interval_ms = self.interval_ms.max(1);
        m.status = self.status;
        m.last_error = self.last_error;
        m.recording = self.recording;
        m.leaks = self.leaks;
        m.ooms = self.ooms;
        m.activity = self
            .activity
            .into_iter()
            .map(|a| std::sync::Arc::new(a.into_activity()))
            .collect();
        m.oom_alerts = self.oom_alerts;
        m.growing = self.growing;
        m.orphans = self.orphans;
        m.guard = self.guard;
        m.events = self
            .events
            .into_iter()
            .map(|e| std::sync::Arc::new(e.map_activity(WireActivity::into_activity)))
            .collect();
        // `replies` are the agent's, under its ids: the link routes them to its own commands.
        Ok(next)
    }
}

/// The time of the newest sample a window holding the history up to `since` (exclusive) has
/// seen, when every sample after it is later: a row changed since then was seen or exited
/// after it. None (send every row) for the first poll, a tick the View no longer holds or a
/// clock that went back.
fn rows_changed_after(m: &Monitor, since: u64) -> Option<UnixMs> {
    let t = m.history.time_of(since.checked_sub(1)?)?;
    let later = since..m.history.end_tick();
    later
        .map(|tick| m.history.time_of(tick))
        .all(|time| time.is_some_and(|time| time > t))
        .then_some(t)
}

/// When each process of `m` was last active, in key order (the same text for the same View).
fn last_active(m: &Monitor) -> Vec<(ProcSeriesKey, UnixMs)> {
    let mut v: Vec<(ProcSeriesKey, UnixMs)> = m.last_active.iter().map(|(k, t)| (*k, *t)).collect();
    v.sort_unstable();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::GpuSource;

    const T0: UnixMs = 1_796_000_000_000;

    /// An agent's View: the demo started at `start`, sampled from `from` for `seconds`.
    fn agent(start: UnixMs, from: UnixMs, seconds: i64) -> Monitor {
        let mut sim = crate::source::sim::SimSource::demo(start);
        let mut engine_state = crate::engine::state::EngineState::default();
        let mut m = Monitor::new(1000, 3600);
        m.source = Some(sim.info());
        for i in 0..seconds {
            let t = from + i * 1000;
            if let Ok(s) = sim.sample(t) {
                engine_state.apply(&mut m, s, t);
            }
        }
        m
    }

    #[test]
    fn a_window_reads_the_change_of_the_last_minute_from_the_history_it_received() {
        let a = agent(T0, T0, 120);
        let mut w = Monitor::new(1000, 3600);
        let v = WireView::of(&a, 0, 100_000);
        assert!(v.caught_up());
        v.apply_after(&mut w, 0, T0 + 119_000).expect("applied");
        let now = T0 + 119_000;
        let kernel = w
            .table_rows(now)
            .into_iter()
            .find(|r| r.key.pid == 51877)
            .expect("the notebook kernel");
        // It leaks 1 MiB/s: about 60 MiB in the last minute, on the first sample applied.
        let d = kernel
            .delta_1m_bytes
            .expect("a change over the last minute");
        assert!((58 << 20..=62 << 20).contains(&d), "{d}");
    }

    #[test]
    fn a_restarted_agent_s_view_replaces_the_old_run_s() {
        let a = agent(T0, T0, 120);
        let mut w = Monitor::new(1000, 3600);
        let since = WireView::of(&a, 0, 100_000)
            .apply_after(&mut w, 0, T0 + 119_000)
            .expect("applied");
        assert!(since > 0);
        // The same run's history sent again from its start is no new run (it is refused).
        assert!(!WireView::of(&a, 0, 100_000).restarted(&w, since));
        // The demo agent restarted at 200 s: its processes start anew (new start times).
        let b = agent(T0 + 200_000, T0 + 200_000, 30);
        let v = WireView::of(&b, since, 100_000);
        assert!(v.restarted(&w, since));
        v.apply_after(&mut w, since, T0 + 229_000).expect("applied");
        let rows = w.table_rows(T0 + 229_000);
        assert!(!rows.is_empty());
        assert!(
            rows.iter().all(|r| r.exited_at_ms.is_none()),
            "the old run's processes are kept: {:?}",
            rows.iter()
                .filter(|r| r.exited_at_ms.is_some())
                .map(|r| r.key)
                .collect::<Vec<_>>()
        );
        assert_eq!(rows.len(), b.table_rows(T0 + 229_000).len());
        assert!(w.history.span().is_some_and(|(a, _)| a >= T0 + 200_000));
        // The same run asked again after its newest tick: no restart.
        let next = w.history.end_tick();
        assert!(!WireView::of(&b, next, 100_000).restarted(&w, next));
    }

    /// A window attached to an agent takes the agent's rows as they are: the agent saw the
    /// demo's batch jobs come and go for 42 minutes (colours handed out, peaks, exits), the
    /// window attaches at the end and has the same rows, exited ones included, with the
    /// same colours, and the same last activity, though it saw one sample.
    #[test]
    fn an_attached_window_has_the_agent_s_rows_and_last_activity() {
        let t0 = T0;
        let mut sim = crate::source::sim::SimSource::demo(t0);
        let mut agent_state = crate::engine::state::EngineState::default();
        let mut agent = Monitor::new(1000, 3600);
        let mut t = t0;
        for i in 0..2500 {
            t = t0 + i * 1000;
            agent_state.apply(&mut agent, sim.sample(t).expect("sim"), t);
            if i % 7 == 0 {
                let keys: Vec<ProcSeriesKey> = agent.rows().map(ProcessRow::series_key).collect();
                agent.last_active = keys.into_iter().map(|k| (k, t)).collect();
            }
        }
        let wire = WireView::of(&agent, 0, usize::MAX);
        let mut window = Monitor::new(1000, 3600);
        wire.apply(&mut window, t).expect("applied");
        let json = |m: &Monitor| serde_json::to_value(m.rows().collect::<Vec<_>>()).expect("json");
        assert_eq!(json(&window), json(&agent));
        let exited = window.rows().filter(|r| r.exited_at_ms.is_some()).count();
        assert!(exited >= 1, "{exited}");
        assert_eq!(window.table_rows(t).len(), agent.table_rows(t).len());
        assert!(!window.last_active.is_empty());
        assert_eq!(window.last_active, agent.last_active);
        assert_eq!(window.ticks, agent.ticks);
    }

    /// The bound on a window's rows counts the rows a poll adds: rows it replaces (a process
    /// seen again) do not bring a window at the bound closer to it. (The rows past the demo's
    /// are copies of one of its rows under other PIDs, with no history of their own.)
    #[test]
    fn a_window_at_the_row_bound_takes_changed_rows_and_refuses_new_ones() {
        let a = agent(T0, T0, 30);
        let mut w = Monitor::new(1000, 3600);
        let since = WireView::of(&a, 0, 100_000)
            .apply_after(&mut w, 0, T0 + 29_000)
            .expect("applied");
        let row = w.rows().next().cloned().expect("a row");
        let with_pid = |pid: u32| ProcessRow {
            key: crate::model::ProcessKey { pid, ..row.key },
            ..row.clone()
        };
        let held = w.rows().count();
        w.merge_rows(
            (0..(MAX_ROWS - held) as u32)
                .map(|p| with_pid(1 << 24 | p))
                .collect(),
        );
        assert_eq!(w.rows().count(), MAX_ROWS);
        let poll = |rows: Vec<ProcessRow>| {
            let mut v = WireView::of(&a, since, 100_000);
            assert!(!v.rows_complete);
            v.rows = rows;
            // A page of a window catching up: rows without history are kept till it is.
            v.history_end_tick += 1;
            v
        };
        let changed = vec![with_pid(1 << 24), with_pid(1 << 24 | 1), row.clone()];
        poll(changed)
            .apply(&mut w, T0 + 29_500)
            .expect("rows replaced, none added");
        assert_eq!(w.rows().count(), MAX_ROWS);
        let err = poll(vec![with_pid(7), row])
            .apply(&mut w, T0 + 29_500)
            .expect_err("a new row past the bound");
        assert!(err.contains("grow past"), "{err}");
        assert_eq!(w.rows().count(), MAX_ROWS);
    }

    /// A window polling an agent every few samples gets only the rows that changed, and has
    /// the agent's rows after each poll: short jobs come and go on two GPUs (far more than a
    /// poll carries), the window catches up in pages at first, and both histories drop their
    /// oldest chunks, and with them the rows of processes gone from them.
    #[test]
    fn a_polling_window_gets_the_changed_rows_and_keeps_the_agent_s() {
        let mut agent_state = crate::engine::state::EngineState::default();
        let mut agent = Monitor::new(1000, 600);
        let mut window = Monitor::new(1000, 600);
        let mut since = 0;
        let json = |m: &Monitor| serde_json::to_value(m.rows().collect::<Vec<_>>()).expect("json");
        let (mut sent, mut polls) = (0, 0);
        for i in 0..2000u32 {
            let t = T0 + UnixMs::from(i) * 1000;
            let mut snap = Snapshot {
                taken_at_ms: t,
                ..Snapshot::default()
            };
            // Job j runs from sample 2j for 7 samples; one in 5 comes back 40 samples later.
            for j in (i.saturating_sub(90) / 2)..=i / 2 {
                let (start, back) = (2 * j, 2 * j + 47);
                if (start..start + 7).contains(&i) || (j % 5 == 0 && (back..back + 7).contains(&i))
                {
                    snap.processes.push(crate::model::ProcessSample {
                        pid: 1000 + j,
                        device_index: j % 2,
                        used_bytes: Some(u64::from(j % 9 + 1) << 28),
                        ..crate::model::ProcessSample::default()
                    });
                }
            }
            agent_state.apply(&mut agent, snap, t);
            if i % 3 == 2 && i > 300 {
                // The first poll is made late and caught up in pages of 100 ticks.
                loop {
                    let wire = WireView::of(&agent, since, 100);
                    assert_eq!(wire.rows_complete, since == 0);
                    sent += wire.rows.len();
                    polls += 1;
                    let caught_up = wire.caught_up();
                    since = wire.apply_after(&mut window, since, t).expect("applied");
                    if caught_up {
                        break;
                    }
                }
                assert_eq!(json(&window), json(&agent), "sample {i}");
            }
        }
        assert!(agent.history.evictions() > 2);
        // Each poll carried the few rows that changed, not the agent's hundreds.
        assert!(agent.rows().count() > 200, "{}", agent.rows().count());
        assert!(sent < polls * 20, "{sent} rows in {polls} polls");
    }
}
