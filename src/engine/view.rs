//! The View: what the engine publishes for one run — the latest snapshot, the bounded history,
//! the process table and what the watches and rules found — as plain data. Only the engine
//! derives it from samples ([`crate::engine::state::EngineState`], owned by the engine's
//! thread); front ends read it, and a window attached to an agent takes the agent's as sent.

use std::collections::VecDeque;
use std::path::PathBuf;

pub use crate::detect::records::{LeakKey, LeakRecord, OomRecord};
use crate::model::history::{History, ProcSeriesKey};
use crate::model::sample_map::SampleMap;
use crate::model::{ProcessKey, Snapshot, SourceInfo, UnixMs};

/// How long an exited process stays in the table, greyed out.
pub(crate) const EXITED_LINGER_MS: UnixMs = 30_000;

/// What the UI shows about recording.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordingStatus {
    /// The file being written.
    pub path: Option<PathBuf>,
    /// False while paused (or off).
    pub active: bool,
    /// Bytes written.
    pub bytes: u64,
    /// The last write error (full disk, unwritable folder); recording retries every sample.
    pub error: Option<String>,
    /// Samples written to the log so far.
    pub samples: u64,
    /// Samples that could not be written (the gaps), over the whole run.
    pub lost: u64,
}

impl RecordingStatus {
    /// Why recording could not start: no file is being written and the last attempt failed
    /// (an unwritable folder). A headless run stops on it; a gap in a log being written does
    /// not count (recording retries every sample).
    pub(crate) fn could_not_start(&self) -> Option<&str> {
        self.error.as_deref().filter(|_| self.path.is_none())
    }
}

/// The state of the source behind this run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SourceStatus {
    /// The source is being opened (NVML init may take a moment).
    Starting,
    /// Samples are arriving.
    Running,
    /// The source could not be opened; the sentence says why.
    Failed(String),
}

/// One process on one GPU, as the table and the detail pane show it. Derived by the engine
/// alone; an agent sends its rows as they are (`WireView::rows`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProcessRow {
    /// Identity (pid + start time).
    pub key: ProcessKey,
    /// GPU it holds memory on.
    pub device_index: u32,
    /// Its facts, the one process-facts type shared with the sampler, the session log, rules
    /// and leaks: name ("?" when /proc could not be read), command line, owner, container,
    /// pod. Shared, so a copy of the state for a window copies a pointer.
    pub info: std::sync::Arc<crate::model::ProcInfo>,
    /// GPU memory now (last sample).
    pub used_bytes: Option<u64>,
    /// Highest GPU memory seen.
    pub peak_bytes: u64,
    /// Change over the last minute (None until a minute of data exists).
    pub delta_1m_bytes: Option<i64>,
    /// First sample it was seen in.
    pub first_seen_ms: UnixMs,
    /// Last sample it was seen in.
    pub last_seen_ms: UnixMs,
    /// Set once the process is gone from the GPU.
    pub exited_at_ms: Option<UnixMs>,
    /// Host CPU over the last interval, percent of a core (live processes).
    pub cpu_pct: Option<f32>,
    /// Host resident memory, bytes (live processes).
    pub rss_bytes: Option<u64>,
    /// Its colour in the window's palette: a slot no other process on any GPU holds at its
    /// first sighting, the one left longest ago (see `free_slot`), kept for its life.
    pub color_slot: u8,
    /// PyTorch's allocator figures, while its companion answers (last sample).
    pub torch: Option<crate::model::TorchMem>,
    /// Its share of the GPU's SM time, percent, where the driver gives it (last sample).
    pub sm_util_pct: Option<u32>,
    /// Where its park stands, while it is parked or being parked or resumed (last sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked: Option<crate::model::ParkInfo>,
    /// Scripted by the simulated GPUs: no host process stands behind it, so nothing is sent
    /// to it (the window says so before asking).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub simulated: bool,
}

impl ProcessRow {
    /// Key of its history series.
    pub fn series_key(&self) -> ProcSeriesKey {
        (self.key, self.device_index)
    }

    /// What to call its container: the name, else the first 12 digits of the id.
    pub fn container_label(&self) -> Option<String> {
        self.info.container_label()
    }

    /// The facts of a process first seen with `info` (None: /proc could not be read): its
    /// name is "?" where it has none.
    pub fn facts(
        info: Option<&std::sync::Arc<crate::model::ProcInfo>>,
    ) -> std::sync::Arc<crate::model::ProcInfo> {
        match info {
            Some(i) if !i.name.is_empty() => i.clone(),
            other => std::sync::Arc::new(crate::model::ProcInfo {
                name: "?".into(),
                ..other.map(|i| (**i).clone()).unwrap_or_default()
            }),
        }
    }

    /// Process start time, or the first time it was seen when the start time is unknown.
    pub fn started_ms(&self) -> UnixMs {
        if self.key.start_time_ms > 0 {
            self.key.start_time_ms
        } else {
            self.first_seen_ms
        }
    }
}

/// A process series' value (bytes) at tick `tk`, if it has one.
#[cfg(feature = "gui")]
fn series_value(s: &crate::model::history::Series, tk: u64) -> Option<u64> {
    s.values(tk, tk + 1)
        .first()
        .map(|(_, v)| *v)
        .filter(|v| *v != crate::model::history::NONE)
        .map(|v| u64::from(v) * crate::model::MIB)
}

/// Most final replies the View keeps ([`Monitor::replies`]).
pub(crate) const REPLIES_SHOWN: usize = 64;

/// Everything the front ends read: the View. Plain data (serializable with serde; its maps
/// keyed by process are written as lists of pairs), published by the engine through
/// [`crate::engine::shared::Shared`] as a copy per change; the engine's working state beside
/// it is [`crate::engine::state::EngineState`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct Monitor {
    /// What is being sampled.
    pub source: Option<SourceInfo>,
    /// Whether samples are arriving.
    pub status: SourceStatus,
    /// Sampling interval in ms.
    pub interval_ms: u64,
    /// The newest snapshot.
    pub latest: Option<Snapshot>,
    /// Wall-clock time the newest snapshot arrived (ms since the epoch).
    pub latest_received_ms: Option<UnixMs>,
    /// The last sampling error, if the last attempt failed.
    pub last_error: Option<String>,
    /// Bounded history of every series.
    pub history: History,
    /// The process rows, derived by the engine alone ([`crate::engine::state::EngineState`]).
    #[serde(serialize_with = "crate::model::serialize_entries")]
    pub(crate) rows: SampleMap<ProcSeriesKey, ProcessRow>,
    /// Session recording state.
    pub recording: crate::engine::view::RecordingStatus,
    /// Leak episodes of this run, oldest first (ongoing ones have no end).
    pub leaks: Vec<LeakRecord>,
    /// OOM suspicions of this run, oldest first.
    pub ooms: Vec<OomRecord>,
    /// GPUs forecast full within the warning time, by GPU (the OOM forecast alerts).
    pub oom_alerts: Vec<crate::detect::forecast_alert::ForecastAlert>,
    /// The OOM guard on each GPU (empty where no guard runs: a replay, an old agent).
    pub guard: Vec<crate::act::guard::GuardStatus>,
    /// Series growing now that are not (yet) leaks (a load, a ramp, a leak not yet called),
    /// with their growth: the forecast counts them, the table shows "growing".
    pub growing: Vec<(LeakKey, crate::detect::leak::Growing)>,
    /// Per GPU, memory held by PIDs the driver lists that are not running here (dead,
    /// zombie, another PID namespace), with the holders seen and the remedy.
    pub orphans: Vec<crate::detect::orphans::OrphanGpu>,
    /// What rules and manual actions did, newest last.
    pub activity: VecDeque<std::sync::Arc<crate::act::rules::action::Activity>>,
    /// The final replies to commands that were accepted first (a park, a resume, a
    /// companion's answer), newest last, at most [`REPLIES_SHOWN`]: what an agent's View
    /// carries to the window that sent them.
    pub replies: VecDeque<crate::model::reply::CommandReply>,
    /// When each process was last GPU-busy or changed its memory (for idle conditions).
    #[serde(serialize_with = "crate::model::serialize_entries")]
    pub last_active: crate::model::FastMap<ProcSeriesKey, UnixMs>,
    /// The engine's latest events, numbered, newest last, at most 256: what a window attached
    /// to an agent alerts of, and what the front ends say of the problems reported (the
    /// window's status-bar notices).
    pub events: VecDeque<std::sync::Arc<crate::engine::events::EngineEvent>>,
    /// Snapshots applied so far.
    pub ticks: u64,
}

impl Monitor {
    /// An empty monitor keeping `history_ticks` samples.
    pub fn new(interval_ms: u64, history_ticks: usize) -> Self {
        Self {
            source: None,
            status: SourceStatus::Starting,
            interval_ms,
            latest: None,
            latest_received_ms: None,
            last_error: None,
            history: History::new(history_ticks),
            rows: SampleMap::default(),
            recording: crate::engine::view::RecordingStatus::default(),
            leaks: Vec::new(),
            ooms: Vec::new(),
            oom_alerts: Vec::new(),
            guard: Vec::new(),
            growing: Vec::new(),
            orphans: Vec::new(),
            activity: VecDeque::new(),
            replies: VecDeque::new(),
            last_active: crate::model::FastMap::default(),
            events: VecDeque::new(),
            ticks: 0,
        }
    }

    /// Takes `history` as this View's: the history built beside
    /// [`crate::engine::state::EngineState::apply_beside_history`] from the samples it took in.
    pub(crate) fn set_history(&mut self, history: History) {
        self.history = history;
    }

    /// Every known process: running ones and ones whose history is still held.
    pub fn rows(&self) -> impl Iterator<Item = &ProcessRow> {
        self.rows.values()
    }

    /// The processes the table shows at `now`: running, or exited less than
    /// [`EXITED_LINGER_MS`] ago.
    pub fn table_rows(&self, now: UnixMs) -> Vec<&ProcessRow> {
        self.rows
            .values()
            .filter(|r| r.exited_at_ms.is_none_or(|t| now - t < EXITED_LINGER_MS))
            .collect()
    }

    /// The table as it stood at `t` (a recorded session's time slider): processes seen at or
    /// shortly before `t`, with their memory and one-minute change at `t` from the history.
    #[cfg(feature = "gui")]
    pub(crate) fn rows_at(&self, t: UnixMs) -> Vec<ProcessRow> {
        let h = &self.history;
        let tick = h.tick_at(t.saturating_add(1)).saturating_sub(1);
        let tick_1m = h.tick_at(t - 60_000);
        let value = series_value;
        self.rows
            .iter()
            .filter(|(_, r)| {
                r.first_seen_ms <= t
                    && t < r
                        .exited_at_ms
                        .unwrap_or(r.last_seen_ms + self.interval_ms as i64)
                        + EXITED_LINGER_MS
            })
            .filter_map(|(k, r)| {
                let s = h.process(k)?;
                let mut row = r.clone();
                if t > r.last_seen_ms {
                    row.exited_at_ms = Some(r.exited_at_ms.unwrap_or(r.last_seen_ms));
                    row.used_bytes = Some(0);
                    row.delta_1m_bytes = None;
                } else {
                    row.exited_at_ms = None;
                    row.used_bytes = value(s, tick);
                    let figure = |f| h.torch(k, f).and_then(|s| value(s, tick));
                    row.torch = match (
                        figure(crate::model::history::TorchFigure::Allocated),
                        figure(crate::model::history::TorchFigure::Reserved),
                    ) {
                        (Some(a), Some(r)) => Some(crate::model::TorchMem {
                            allocated_bytes: a,
                            reserved_bytes: r,
                            ..Default::default()
                        }),
                        _ => None,
                    };
                    row.delta_1m_bytes = match (row.used_bytes, h.time_of(tick_1m)) {
                        (Some(now), Some(then_ms))
                            if then_ms <= t - 60_000 + self.interval_ms as i64 =>
                        {
                            value(s, tick_1m).map(|old| now as i64 - old as i64)
                        }
                        _ => None,
                    };
                }
                Some(row)
            })
            .collect()
    }

    /// One process row.
    pub fn row(&self, key: &ProcSeriesKey) -> Option<&ProcessRow> {
        self.rows.get(key)
    }

    /// Takes `rows` as this View's rows, as an engine derived them (a window attached to an
    /// agent takes the agent's): nothing is derived from them here.
    pub fn set_rows(&mut self, rows: Vec<ProcessRow>) {
        let mut map = SampleMap::default();
        for r in rows {
            map.insert(r.series_key(), r);
        }
        self.rows = map;
    }

    /// Takes `rows` in, each in place of its process's row (a new one at the end): the rows
    /// an agent changed since the window's last poll.
    pub(crate) fn merge_rows(&mut self, rows: Vec<ProcessRow>) {
        for r in rows {
            self.rows.insert(r.series_key(), r);
        }
    }

    /// Drops the rows whose history is gone (as the engine does when its history drops its
    /// oldest chunk).
    pub(crate) fn keep_rows_with_history(&mut self) {
        let history = &self.history;
        self.rows.retain(|k, _| history.process(k).is_some());
    }

    /// The process on GPU `gpu` growing fastest now (an ongoing leak at its rate, or a
    /// growth not yet called a leak): what a click on the GPU's forecast banner selects.
    pub fn fastest_grower(&self, gpu: u32) -> Option<ProcSeriesKey> {
        let leaks = self
            .leaks
            .iter()
            .filter(|l| l.ended_ms.is_none())
            .map(|l| (l.key, l.info.rate_mib_per_min));
        let growing = self.growing.iter().map(|(k, g)| (*k, g.rate_mib_per_min));
        leaks
            .chain(growing)
            .filter_map(|(k, rate)| match k {
                LeakKey::Process(p) if p.1 == gpu => Some((p, rate)),
                _ => None,
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(p, _)| p)
    }

    /// True when no sample arrived for 3 intervals (a hung or lost driver).
    pub fn is_stale(&self, now: UnixMs) -> bool {
        match self.latest_received_ms {
            Some(t) => now - t > 3 * self.interval_ms as i64,
            None => self.status == SourceStatus::Running,
        }
    }
}

/// How many process colours the window's palettes have: slots below it are handed out first.
pub(crate) const COLOR_SLOTS: usize = crate::model::palette::SLOTS;

impl Monitor {
    /// Every leak episode of a process series, oldest first.
    #[cfg(feature = "gui")]
    pub(crate) fn leaks_of(&self, key: &ProcSeriesKey) -> impl Iterator<Item = &LeakRecord> {
        let k = LeakKey::Process(*key);
        self.leaks.iter().filter(move |l| l.key == k)
    }
}
