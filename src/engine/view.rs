//! The engine's state for one run: the latest snapshot, the bounded history and the process
//! table. The sampler thread applies snapshots; the UI only reads.

use std::collections::VecDeque;
use std::path::PathBuf;

pub use crate::detect::records::{LeakKey, LeakRecord, OomRecord};
use crate::model::history::{History, ProcSeriesKey};
use crate::model::sample_map::SampleMap;
use crate::model::{ProcessKey, Snapshot, SourceInfo, UnixMs};

/// How long an exited process stays in the table, greyed out.
pub const EXITED_LINGER_MS: UnixMs = 30_000;

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
    pub fn could_not_start(&self) -> Option<&str> {
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

    /// The row of a process first seen at `now` (before its first [`ProcessRow::update`]).
    fn first_seen(p: &crate::model::ProcessSample, now: UnixMs, color_slot: u8) -> Self {
        ProcessRow {
            key: p.key(),
            device_index: p.device_index,
            info: ProcessRow::facts(p.info.as_ref()),
            used_bytes: None,
            peak_bytes: 0,
            delta_1m_bytes: None,
            first_seen_ms: now,
            last_seen_ms: now,
            exited_at_ms: None,
            cpu_pct: None,
            rss_bytes: None,
            color_slot,
            torch: None,
            sm_util_pct: None,
            parked: None,
            simulated: p.origin == crate::model::Origin::Simulated,
        }
    }

    /// Takes in this process's sample at `now`; `recent` is its memory readings of the last
    /// minute (the engine's scratch for the one-minute change).
    fn update(&mut self, p: &crate::model::ProcessSample, now: UnixMs, recent: &mut Recent) {
        self.used_bytes = p.used_bytes;
        self.cpu_pct = p.cpu_pct;
        self.rss_bytes = p.rss_bytes;
        self.torch = p.torch;
        self.sm_util_pct = p.sm_util_pct;
        self.parked = p.parked;
        self.last_seen_ms = now;
        self.exited_at_ms = None;
        if let Some(u) = p.used_bytes {
            self.peak_bytes = self.peak_bytes.max(u);
            // Only changes are kept: the value at any moment is the last one at or before it.
            if recent.back().is_none_or(|(_, last)| *last != u) {
                recent.push_back((now, u));
            }
            while recent.len() >= 2 && recent[1].0 <= now - 60_000 {
                recent.pop_front();
            }
            self.delta_1m_bytes = recent
                .front()
                .filter(|(t, _)| *t <= now - 60_000)
                .map(|(_, old)| u as i64 - *old as i64);
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

/// A process's memory readings of the last minute, changes only (the one-minute change).
type Recent = VecDeque<(UnixMs, u64)>;

/// What the engine keeps beside the rows to derive them, none of it published: the rows'
/// readings of the last minute, how many rows are live and new, and the history's evictions
/// the rows were last matched to.
#[derive(Debug, Clone, Default)]
struct Derivation {
    /// Each row's readings of the last minute, in the rows' order.
    recent: SampleMap<ProcSeriesKey, Recent>,
    /// The history's [`History::evictions`] when rows were last matched to its series.
    evictions_seen: u64,
    /// Rows of running processes (no exit time).
    live_rows: usize,
    /// Rows first seen in the sample being taken in, not yet given a colour.
    fresh_rows: usize,
}

/// A process series' value (bytes) at tick `tk`, if it has one.
fn series_value(s: &crate::model::history::Series, tk: u64) -> Option<u64> {
    s.values(tk, tk + 1)
        .first()
        .map(|(_, v)| *v)
        .filter(|v| *v != crate::model::history::NONE)
        .map(|v| u64::from(v) * crate::model::MIB)
}

/// Most final replies the View keeps ([`Monitor::replies`]).
pub const REPLIES_SHOWN: usize = 64;

/// Everything the front ends read: the View. Plain data (serializable with serde; its maps
/// keyed by process are written as lists of pairs), published by the engine through
/// [`crate::engine::shared::Shared`] as a copy per change.
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
    #[serde(serialize_with = "crate::model::serialize_entries")]
    rows: SampleMap<ProcSeriesKey, ProcessRow>,
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
    /// Recent notices (recording gaps, notification failures and the like) with the time
    /// they were raised, newest last. The status bar shows one for [`NOTICE_SHOWN_MS`].
    pub notices: VecDeque<(UnixMs, String)>,
    /// What rules and manual actions did, newest last.
    pub activity: VecDeque<crate::act::rules::action::Activity>,
    /// The final replies to commands that were accepted first (a park, a resume, a
    /// companion's answer), newest last, at most [`REPLIES_SHOWN`]: what an agent's View
    /// carries to the window that sent them.
    pub replies: VecDeque<crate::model::reply::CommandReply>,
    /// When each process was last GPU-busy or changed its memory (for idle conditions).
    #[serde(serialize_with = "crate::model::serialize_entries")]
    pub last_active: crate::model::FastMap<ProcSeriesKey, UnixMs>,
    /// Snapshots applied so far.
    pub ticks: u64,
    /// The engine's scratch for deriving the rows (not published on the wire).
    #[serde(skip)]
    derivation: Derivation,
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
            notices: VecDeque::new(),
            activity: VecDeque::new(),
            replies: VecDeque::new(),
            last_active: crate::model::FastMap::default(),
            ticks: 0,
            derivation: Derivation::default(),
        }
    }

    /// Takes in one snapshot (already enriched with process facts); returns the one it
    /// replaces as the latest (the caller chooses where it is dropped).
    pub fn apply(&mut self, snap: Snapshot, received_ms: UnixMs) -> Option<Snapshot> {
        self.history.push(&snap);
        self.apply_beside_history(snap, received_ms)
    }

    /// [`Monitor::apply`] but for the history, which its caller builds from the same samples
    /// with [`History::push`] and hands over with [`Monitor::set_history`] (a replay builds
    /// it on a thread of its own, so the two halves are built on two cores at once).
    pub fn apply_beside_history(
        &mut self,
        snap: Snapshot,
        received_ms: UnixMs,
    ) -> Option<Snapshot> {
        let now = snap.taken_at_ms;
        // Rows seen in this sample; when fewer than the live ones, some process left.
        let mut seen = 0;
        for (pos, p) in snap.processes.iter().enumerate() {
            seen += usize::from(self.take_in_row(pos, p, now));
        }
        if self.derivation.live_rows > seen {
            let mut live = 0;
            for row in self.rows.values_mut() {
                if row.last_seen_ms < now && row.exited_at_ms.is_none() {
                    row.exited_at_ms = Some(now);
                    row.used_bytes = Some(0);
                }
                live += usize::from(row.exited_at_ms.is_none());
            }
            self.derivation.live_rows = live;
        }
        // Colours once this sample's exits are known: a new process's band lies beside the
        // processes running now, not beside one that ended in this same sample.
        if self.derivation.fresh_rows > 0 {
            self.derivation.fresh_rows = 0;
            color_fresh_rows(&mut self.rows, now);
        }
        // Keep rows while their history exists, so exited processes can still be inspected.
        if self.history.evictions() != self.derivation.evictions_seen {
            self.keep_rows_with_history();
        }
        let previous = self.latest.replace(snap);
        self.latest_received_ms = Some(received_ms);
        self.last_error = None;
        self.status = SourceStatus::Running;
        self.ticks += 1;
        previous
    }

    /// Takes `history` as this monitor's: the history built beside
    /// [`Monitor::apply_beside_history`] from the samples it took in.
    pub fn set_history(&mut self, history: History) {
        self.derivation.evictions_seen = history.evictions();
        self.history = history;
    }

    /// Takes in process sample `p`, listed at `pos`, into its row (a new row for a new
    /// process); false when its row was already seen in this sample (counted once per sample,
    /// however often it is listed — a snapshot that was not sanitized — and whatever the clock
    /// did).
    fn take_in_row(&mut self, pos: usize, p: &crate::model::ProcessSample, now: UnixMs) -> bool {
        let mut fresh = false;
        let key = (p.key(), p.device_index);
        let row = self.rows.at_mut(pos, key, |_| {
            fresh = true;
            ProcessRow::first_seen(p, now, UNCOLORED)
        });
        let d = &mut self.derivation;
        let recent = d.recent.at_mut(pos, key, |_| Recent::new());
        if fresh {
            d.fresh_rows += 1;
            row.update(p, now, recent);
            d.live_rows += 1;
            return true;
        }
        if row.last_seen_ms >= now {
            row.update(p, now, recent);
            return false;
        }
        if row.exited_at_ms.is_some() {
            d.live_rows += 1;
        }
        row.update(p, now, recent);
        true
    }

    /// Drops the rows whose history is gone (evicted).
    fn keep_rows_with_history(&mut self) {
        self.derivation.evictions_seen = self.history.evictions();
        let history = &self.history;
        self.rows.retain(|k, _| history.process(k).is_some());
        self.derivation
            .recent
            .retain(|k, _| history.process(k).is_some());
        self.derivation.live_rows = self
            .rows
            .values()
            .filter(|r| r.exited_at_ms.is_none())
            .count();
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
    pub fn rows_at(&self, t: UnixMs) -> Vec<ProcessRow> {
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
        self.derivation = Derivation {
            live_rows: map.values().filter(|r| r.exited_at_ms.is_none()).count(),
            evictions_seen: self.history.evictions(),
            ..Derivation::default()
        };
        self.rows = map;
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
pub const COLOR_SLOTS: usize = crate::model::palette::SLOTS;

/// The colour slot of a row not yet given one (see [`color_fresh_rows`]).
const UNCOLORED: u8 = u8::MAX;

/// Gives each row first seen in the sample at `now` its colour slot ([`free_slot`]), one
/// after another.
fn color_fresh_rows(rows: &mut SampleMap<ProcSeriesKey, ProcessRow>, now: UnixMs) {
    let fresh: Vec<ProcSeriesKey> = rows
        .values()
        .filter(|r| r.color_slot == UNCOLORED)
        .map(ProcessRow::series_key)
        .collect();
    for key in fresh {
        let slot = free_slot(rows, key, now);
        if let Some(r) = rows.values_mut().find(|r| r.series_key() == key) {
            r.color_slot = slot;
        }
    }
}

/// A colour slot for the process `key` first seen at `at`: one that no process on any GPU holds
/// (running, or exited less than [`EXITED_LINGER_MS`] before), among the first
/// [`COLOR_SLOTS`] the one whose last holder left longest ago (never held first), so a
/// restarted process does not take the colour its predecessor had on the graph; when all are
/// held, the lowest free one above them. Of those, the first whose colour is far from the bands
/// beside it in its GPU's stack (the processes on its GPU started just before and just after
/// it, [`crate::model::palette::far_apart`]), so two bands that touch never look alike.
fn free_slot(rows: &SampleMap<ProcSeriesKey, ProcessRow>, key: ProcSeriesKey, at: UnixMs) -> u8 {
    let mut held = [false; 256];
    let mut left = [UnixMs::MIN; COLOR_SLOTS];
    for r in rows.values().filter(|r| r.first_seen_ms <= at) {
        let slot = usize::from(r.color_slot);
        match r.exited_at_ms {
            Some(e) if e + EXITED_LINGER_MS <= at => {
                if let Some(l) = left.get_mut(slot) {
                    *l = (*l).max(e);
                }
            }
            _ => held[slot] = true,
        }
    }
    let beside = stack_neighbours(rows, key, at);
    let mut free: Vec<usize> = (0..COLOR_SLOTS).filter(|i| !held[*i]).collect();
    free.sort_by_key(|i| (left[*i], *i));
    let apart = |i: &&usize| {
        beside
            .iter()
            .flatten()
            .all(|b| crate::model::palette::far_apart(**i, usize::from(*b)))
    };
    free.iter()
        .find(apart)
        .or_else(|| free.first())
        .copied()
        .or_else(|| held.iter().position(|h| !h))
        .map_or(0, |i| i as u8)
}

/// The colour slots of the processes beside `key` in its GPU's stack at `at` (ordered by
/// start time, then PID, as the graph stacks them): the running one just below and the one
/// just above (one that has ended has no band beside it any more).
fn stack_neighbours(
    rows: &SampleMap<ProcSeriesKey, ProcessRow>,
    key: ProcSeriesKey,
    at: UnixMs,
) -> [Option<u8>; 2] {
    let order = |k: &ProcSeriesKey| (k.0.start_time_ms, k.0.pid);
    let mut below: Option<&ProcessRow> = None;
    let mut above: Option<&ProcessRow> = None;
    let shown = rows.values().filter(|r| {
        r.device_index == key.1
            && r.series_key() != key
            && r.first_seen_ms <= at
            && r.exited_at_ms.is_none()
            && r.color_slot != UNCOLORED
    });
    for r in shown {
        let o = order(&r.series_key());
        if o < order(&key) {
            if below.is_none_or(|b| order(&b.series_key()) < o) {
                below = Some(r);
            }
        } else if above.is_none_or(|a| order(&a.series_key()) > o) {
            above = Some(r);
        }
    }
    [below.map(|r| r.color_slot), above.map(|r| r.color_slot)]
}

/// How long the status bar shows a notice.
pub const NOTICE_SHOWN_MS: UnixMs = 30_000;

impl Monitor {
    /// Every leak episode of a process series, oldest first.
    pub fn leaks_of(&self, key: &ProcSeriesKey) -> impl Iterator<Item = &LeakRecord> {
        let k = LeakKey::Process(*key);
        self.leaks.iter().filter(move |l| l.key == k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ProcInfo, ProcessSample};

    fn sample(t: UnixMs, pids: &[u32]) -> Snapshot {
        Snapshot {
            taken_at_ms: t,
            devices: Vec::new(),
            processes: pids
                .iter()
                .map(|pid| ProcessSample {
                    pid: *pid,
                    used_bytes: Some(u64::from(*pid) << 20),
                    info: Some(std::sync::Arc::new(ProcInfo {
                        name: format!("p{pid}"),
                        start_time_ms: 1,
                        ..ProcInfo::default()
                    })),
                    ..ProcessSample::default()
                })
                .collect(),
        }
    }

    fn exited(m: &Monitor, pid: u32) -> Option<UnixMs> {
        m.rows()
            .find(|r| r.key.pid == pid)
            .expect("a row")
            .exited_at_ms
    }

    #[test]
    fn a_process_that_leaves_is_marked_exited_whatever_the_clock_and_repeats_do() {
        let mut m = Monitor::new(1000, 100);
        m.apply(sample(10_000, &[1, 2]), 10_000);
        // The clock steps back; process 2 is gone. It is marked once the clock passes its
        // last sighting, as before.
        m.apply(sample(6_000, &[1]), 6_000);
        assert_eq!(exited(&m, 2), None);
        for t in [7_000, 8_000, 9_000, 10_000] {
            m.apply(sample(t, &[1]), t);
        }
        assert_eq!(exited(&m, 2), None);
        m.apply(sample(11_000, &[1]), 11_000);
        assert_eq!(exited(&m, 2), Some(11_000));
        // A process listed twice in one (unsanitized) sample counts once: process 3 leaving
        // is still seen.
        m.apply(sample(12_000, &[1, 3]), 12_000);
        m.apply(sample(13_000, &[1, 1]), 13_000);
        assert_eq!(exited(&m, 3), Some(13_000));
        assert_eq!(exited(&m, 1), None);
        // And one that comes back is live again.
        m.apply(sample(14_000, &[1, 3]), 14_000);
        assert_eq!(exited(&m, 3), None);
        m.apply(sample(15_000, &[3]), 15_000);
        assert_eq!(exited(&m, 1), Some(15_000));
    }

    #[test]
    fn the_view_is_plain_serializable_data() {
        use crate::source::GpuSource;
        let mut sim = crate::source::sim::SimSource::demo(1_796_000_000_000);
        let mut m = Monitor::new(1000, 600);
        for i in 0..300 {
            let t = 1_796_000_000_000 + i * 1000;
            m.apply(sim.sample(t).expect("sim"), t);
        }
        let v = serde_json::to_value(&m).expect("the View serializes");
        assert_eq!(v["status"], "Running");
        assert_eq!(v["ticks"], 300);
        assert_eq!(
            v["latest"]["devices"].as_array().map(Vec::len),
            m.latest.as_ref().map(|s| s.devices.len())
        );
        // Rows keyed by (process, GPU) are written as [key, row] pairs, each row with its
        // facts.
        let rows = v["rows"].as_array().expect("a list of pairs");
        assert_eq!(rows.len(), m.rows().count());
        for pair in rows {
            assert_eq!(pair[0][0]["pid"], pair[1]["key"]["pid"], "{pair}");
            assert!(pair[1]["info"]["name"].is_string(), "{pair}");
        }
        // The history: its timeline and one series per process.
        let h = &v["history"];
        assert!(h["times"].is_object());
        assert_eq!(
            h["processes"].as_array().map(Vec::len),
            Some(m.rows().count())
        );
        assert!(v["last_active"].is_array());
    }

    /// Processes `pids` (each started at its pid, in seconds) on GPU `device`.
    fn on_gpu(t: UnixMs, device: u32, pids: &[u32]) -> Vec<ProcessSample> {
        pids.iter()
            .map(|pid| ProcessSample {
                pid: *pid,
                device_index: device,
                used_bytes: Some(1 << 30),
                info: Some(std::sync::Arc::new(ProcInfo {
                    name: format!("p{pid}"),
                    start_time_ms: UnixMs::from(*pid) * 1000,
                    ..ProcInfo::default()
                })),
                ..ProcessSample::default()
            })
            .filter(|p| p.info.as_ref().is_some_and(|i| i.start_time_ms <= t))
            .collect()
    }

    /// Every pair of bands that touch in a GPU's stack now (running processes in start order).
    fn touching(m: &Monitor, device: u32) -> Vec<(u32, u32, u8, u8)> {
        let mut shown: Vec<&ProcessRow> = m
            .rows()
            .filter(|r| r.device_index == device && r.exited_at_ms.is_none())
            .collect();
        shown.sort_by_key(|r| (r.key.start_time_ms, r.key.pid));
        shown
            .windows(2)
            .map(|w| (w[0].key.pid, w[1].key.pid, w[0].color_slot, w[1].color_slot))
            .collect()
    }

    /// Bands that touch in a stack never get colours closer than
    /// [`crate::model::palette::NEIGHBOUR_DELTA_E`] (CIEDE2000) in any palette: six processes
    /// seen at once in the first sample in no order, then one starting every 15 s on either GPU,
    /// the newest of a GPU (the top of its stack) ending first when five run there. (A process
    /// ending in the middle of a stack lets the two beside it touch: their colours were not
    /// chosen against each other.)
    #[test]
    fn bands_that_touch_get_colours_far_apart() {
        let mut m = Monitor::new(1000, 1000);
        let mut running: Vec<(u32, u32)> = vec![(0, 7), (0, 3), (0, 5), (1, 4), (1, 1), (1, 6)];
        let mut pairs = 0;
        for step in 0..300u32 {
            let t = UnixMs::from(100 + step) * 5000;
            if step % 3 == 0 {
                let d = step % 2;
                if running.iter().filter(|(g, _)| *g == d).count() >= 5 {
                    // The newest of the GPU ends (the top of its stack): the one below it
                    // touches the one starting now, which is chosen against it.
                    if let Some(i) = running.iter().rposition(|(g, _)| *g == d) {
                        running.remove(i);
                    }
                }
                running.push((d, 500 + step * 5));
            }
            let mut procs = Vec::new();
            for d in 0..2 {
                let pids: Vec<u32> = running
                    .iter()
                    .filter(|(g, _)| *g == d)
                    .map(|p| p.1)
                    .collect();
                procs.extend(on_gpu(t, d, &pids));
            }
            let snap = Snapshot {
                taken_at_ms: t,
                devices: Vec::new(),
                processes: procs,
            };
            m.apply(snap, t);
            for d in 0..2 {
                for (a, b, sa, sb) in touching(&m, d) {
                    pairs += 1;
                    assert!(
                        crate::model::palette::far_apart(usize::from(sa), usize::from(sb)),
                        "at {t}: {a} (slot {sa}) under {b} (slot {sb}) look alike"
                    );
                }
            }
        }
        assert!(pairs > 1000, "{pairs}");
        // Slots are still shared out: more than half the palette was used.
        let used: std::collections::BTreeSet<u8> = m.rows().map(|r| r.color_slot).collect();
        assert!(used.len() > COLOR_SLOTS / 2, "{used:?}");
    }
}
