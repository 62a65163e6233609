//! Runs the leak detector over every series of each snapshot: one [`LeakTracker`] per process
//! on a GPU and one per GPU's ghost memory. Produces the session events and keeps the
//! monitor's leak records current.

use crate::detect::leak::{Growing, LeakSettings, LeakTracker, Transition};
use crate::detect::records::{LeakKey, LeakRecord, OomRecord};
use crate::model::history::{ghosts_into, DEVICES_ON_STACK};
use crate::model::{FastMap, Snapshot, MIB};
use crate::session::{Event, LeakInfo};

struct Watched {
    tracker: LeakTracker,
    info: LeakInfo,
    /// The last [`LeakWatch::observe`] that saw the series (read or unread), by number.
    seen: u64,
}

/// Leak detection state for a run.
#[derive(Default)]
pub struct LeakWatch {
    settings: LeakSettings,
    series: FastMap<LeakKey, Watched>,
    /// Per GPU, from the last forecast: since when the longest growth it counts has gone on.
    growth_since: Vec<(u32, crate::model::UnixMs)>,
    /// How many times [`LeakWatch::observe`] ran: what a series seen by the current one is
    /// marked with.
    observed: u64,
    /// The forecast's sums per GPU, kept for their room.
    rates: Vec<(u32, f64, f64)>,
    /// The forecast's list of parked processes, kept for its room.
    parked: Vec<crate::model::history::ProcSeriesKey>,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// One [`LeakWatch::observe`]: its time, its number and the events it causes.
struct Tick {
    now: crate::model::UnixMs,
    seen: u64,
    events: Vec<Event>,
}

/// A series with no reading this time is marked seen: it has not left.
fn mark_unread(series: &mut FastMap<LeakKey, Watched>, key: LeakKey, seen: u64) {
    if let Some(w) = series.get_mut(&key) {
        w.seen = seen;
    }
}

/// Feeds one series' reading (key, MiB, its cache's MiB) to its tracker (made with `make`'s
/// facts the first time), and records the episode it starts or ends.
fn feed(
    series: &mut FastMap<LeakKey, Watched>,
    t: &mut Tick,
    (key, value_mib, cache_mib): (LeakKey, f64, Option<f64>),
    settings: &LeakSettings,
    make: &dyn Fn() -> LeakInfo,
) {
    let w = series.entry(key).or_insert_with(|| {
        let info = make();
        // A process's start-up ramp is judged once it levels off; ghost memory has no
        // start-up.
        let tracker = if info.ghost {
            LeakTracker::default()
        } else if info.start_time_ms > 0 {
            LeakTracker::born_at(info.start_time_ms)
        } else {
            LeakTracker::born_at(t.now)
        };
        Watched {
            tracker,
            info,
            seen: t.seen,
        }
    });
    w.seen = t.seen;
    match w
        .tracker
        .update_with_cache(t.now, value_mib, cache_mib, settings)
    {
        Some(Transition::Started {
            since_ms,
            rate_mib_per_min,
            seen,
        }) => {
            w.info.since_ms = since_ms;
            w.info.rate_mib_per_min = rate_mib_per_min;
            w.info.why = seen.describe(rate_mib_per_min);
            t.events.push(Event::LeakStarted {
                unix_ms: t.now,
                leak: w.info.clone(),
            });
        }
        Some(Transition::Ended {
            rate_mib_per_min,
            grown_mib,
        }) => {
            w.info.rate_mib_per_min = rate_mib_per_min;
            t.events.push(Event::LeakEnded {
                unix_ms: t.now,
                leak: w.info.clone(),
                grown_mib,
                peak_mib: value_mib.max(grown_mib),
            });
        }
        None => {}
    }
}

impl LeakWatch {
    /// A watch with these sensitivity settings.
    pub fn new(settings: LeakSettings) -> Self {
        Self {
            settings,
            series: FastMap::default(),
            growth_since: Vec::new(),
            observed: 0,
            rates: Vec::new(),
            parked: Vec::new(),
        }
    }

    /// Changes the sensitivity (episodes in progress continue under the new values).
    pub(crate) fn set_settings(&mut self, s: LeakSettings) {
        self.settings = s;
    }

    /// Feeds one snapshot; returns the leak events it caused (started, ended), in order.
    pub fn observe(&mut self, snap: &Snapshot) -> Vec<Event> {
        self.observed += 1;
        let mut t = Tick {
            now: snap.taken_at_ms,
            seen: self.observed,
            events: Vec::new(),
        };
        self.observe_processes(snap, &mut t);
        self.observe_ghosts(snap, &mut t);
        self.end_gone(&mut t);
        t.events
    }

    /// Each process's reading: PyTorch's allocated memory where its companion answers (a
    /// cache that swells is cache, not a leak; its reserved memory goes beside, so that
    /// tensors whose cache grows much more are judged as meeting new shapes), else the
    /// driver's figure.
    fn observe_processes(&mut self, snap: &Snapshot, t: &mut Tick) {
        let settings = self.settings;
        for p in &snap.processes {
            let key = LeakKey::Process((p.key(), p.device_index));
            if p.stale || p.parked.is_some() {
                // The driver failed to list it, or it is parked (its memory in host
                // memory for now): no reading, but it has not left.
                mark_unread(&mut self.series, key, t.seen);
                continue;
            }
            let Some(used) = p.torch.map(|t| t.allocated_bytes).or(p.used_bytes) else {
                continue;
            };
            let cache = p.torch.map(|t| mib(t.reserved_bytes));
            let now = t.now;
            let make = || {
                let i = p.info.as_deref();
                LeakInfo {
                    pid: p.pid,
                    start_time_ms: p.key().start_time_ms,
                    device_index: p.device_index,
                    name: i.map_or_else(|| "?".to_string(), |i| i.name.clone()),
                    user: i.map_or_else(String::new, |i| i.user.clone()),
                    ghost: false,
                    since_ms: now,
                    rate_mib_per_min: 0.0,
                    why: String::new(),
                }
            };
            feed(
                &mut self.series,
                t,
                (key, mib(used), cache),
                &settings,
                &make,
            );
        }
    }

    /// Each GPU's ghost memory (held by no process the driver lists).
    fn observe_ghosts(&mut self, snap: &Snapshot, t: &mut Tick) {
        let mut stack = [None; DEVICES_ON_STACK];
        let mut heap = Vec::new();
        let room: &mut [Option<u64>] = if snap.devices.len() <= DEVICES_ON_STACK {
            &mut stack
        } else {
            heap.resize(snap.devices.len(), None);
            &mut heap
        };
        for (d, &ghost) in snap.devices.iter().zip(ghosts_into(snap, room)) {
            if d.process_list_error.is_some() {
                // Without a process list, ghost memory cannot be told apart.
                mark_unread(&mut self.series, LeakKey::Ghost(d.index), t.seen);
                continue;
            }
            let Some(g) = ghost else {
                continue;
            };
            let now = t.now;
            let make = || LeakInfo {
                pid: 0,
                start_time_ms: 0,
                device_index: d.index,
                name: "ghost memory".into(),
                user: String::new(),
                ghost: true,
                since_ms: now,
                rate_mib_per_min: 0.0,
                why: String::new(),
            };
            let gs = ghost_settings(&self.settings, d.memory_total_bytes);
            let key = LeakKey::Ghost(d.index);
            feed(&mut self.series, t, (key, mib(g), None), &gs, &make);
        }
    }

    /// A process that left the GPU while leaking: its episode ends there.
    fn end_gone(&mut self, t: &mut Tick) {
        let gone: Vec<LeakKey> = self
            .series
            .iter()
            .filter(|(_, w)| w.seen != t.seen)
            .map(|(k, _)| *k)
            .collect();
        for k in gone {
            let Some(w) = self.series.remove(&k) else {
                continue;
            };
            if let Some(ep) = w.tracker.episode() {
                let mut info = w.info;
                info.rate_mib_per_min = ep.rate_mib_per_min;
                t.events.push(Event::LeakEnded {
                    unix_ms: t.now,
                    leak: info,
                    grown_mib: ep.grown_mib(),
                    peak_mib: ep.peak_mib,
                });
            }
        }
    }

    /// When each process series now leaking was flagged (for the rules' leak condition).
    pub fn leaking_since(
        &self,
    ) -> FastMap<crate::model::history::ProcSeriesKey, crate::model::UnixMs> {
        self.series
            .iter()
            .filter_map(|(k, w)| match (k, w.tracker.episode()) {
                (LeakKey::Process(p), Some(ep)) => Some((*p, ep.flagged_ms)),
                _ => None,
            })
            .collect()
    }

    /// The OOM forecast: sets each GPU's [`crate::model::DeviceSample::time_to_full_s`] (likely)
    /// and [`crate::model::DeviceSample::time_to_full_earliest_s`] (earliest) from its free
    /// memory and what its series add ([`LeakTracker::forecast_pace`]: leaks at their rate,
    /// processes growing now at their recent pace, the likely figure discounting growth that
    /// slows); `None` when nothing on it grows.
    pub fn forecast(&mut self, snap: &mut Snapshot) {
        // Per GPU: (likely, earliest) MiB/min.
        let mut rates = std::mem::take(&mut self.rates);
        rates.clear();
        self.growth_since.clear();
        // A parked process grows no more while parked (its series only waits).
        let mut parked = std::mem::take(&mut self.parked);
        parked.clear();
        parked.extend(
            snap.processes
                .iter()
                .filter(|p| p.parked.is_some())
                .map(|p| (p.key(), p.device_index)),
        );
        for (k, w) in &self.series {
            if matches!(k, LeakKey::Process(p) if parked.contains(p)) {
                continue;
            }
            // Ghost memory counts once it is a leak (its growth while processes start is
            // their contexts being made).
            if matches!(k, LeakKey::Ghost(_)) && w.tracker.episode().is_none() {
                continue;
            }
            let Some((likely, earliest)) = w.tracker.forecast_pace() else {
                continue;
            };
            let dev = match k {
                LeakKey::Process((_, d)) | LeakKey::Ghost(d) => *d,
            };
            note_growth_since(&mut self.growth_since, dev, &w.tracker, likely);
            match rates.iter_mut().find(|(d, _, _)| *d == dev) {
                Some((_, l, e)) => {
                    *l += likely;
                    *e += earliest;
                }
                None => rates.push((dev, likely, earliest)),
            }
        }
        for d in &mut snap.devices {
            let (likely, earliest) = rates
                .iter()
                .find(|(i, _, _)| *i == d.index)
                .map_or((0.0, 0.0), |(_, l, e)| (*l, *e));
            let full = |rate| {
                d.memory_free_bytes
                    .and_then(|f| crate::detect::leak::full_in_s(f, rate))
            };
            d.time_to_full_s = full(likely);
            d.time_to_full_earliest_s = full(earliest);
        }
        self.rates = rates;
        self.parked = parked;
    }

    /// [`LeakWatch::leaking_since`] written into `out` (its room kept).
    pub(crate) fn leaking_since_into(
        &self,
        out: &mut FastMap<crate::model::history::ProcSeriesKey, crate::model::UnixMs>,
    ) {
        out.clear();
        out.extend(
            self.series
                .iter()
                .filter_map(|(k, w)| match (k, w.tracker.episode()) {
                    (LeakKey::Process(p), Some(ep)) => Some((*p, ep.flagged_ms)),
                    _ => None,
                }),
        );
    }

    /// [`LeakWatch::process_rates`] written into `out` (its room kept).
    pub(crate) fn process_rates_into(
        &self,
        out: &mut FastMap<crate::model::history::ProcSeriesKey, f64>,
    ) {
        out.clear();
        out.extend(self.process_rates_iter());
    }

    /// How fast each process grows now (MiB/min): its leak's rate, or the rate of its growth
    /// not yet called a leak (the OOM guard picks the grower to pause by it).
    pub(crate) fn process_rates(&self) -> FastMap<crate::model::history::ProcSeriesKey, f64> {
        self.process_rates_iter().collect()
    }

    fn process_rates_iter(
        &self,
    ) -> impl Iterator<Item = (crate::model::history::ProcSeriesKey, f64)> + '_ {
        self.series.iter().filter_map(|(k, w)| {
            let LeakKey::Process(p) = k else {
                return None;
            };
            let rate = match (w.tracker.episode(), w.tracker.growing()) {
                (Some(ep), _) => ep.rate_mib_per_min,
                (None, Some(g)) => g.rate_mib_per_min,
                _ => return None,
            };
            (rate > 0.0).then_some((*p, rate))
        })
    }

    /// Since when the longest growth that the last forecast of GPU `device` counted (its
    /// likely figure) has gone on; `None` when nothing on it grows.
    pub fn forecast_growth_since(&self, device: u32) -> Option<crate::model::UnixMs> {
        self.growth_since
            .iter()
            .find(|(d, _)| *d == device)
            .map(|(_, t)| *t)
    }

    /// The series growing now that are not (yet) leaks: processes only (ghost memory that
    /// grows is reported once it is a leak, see [`ghost_settings`]).
    pub fn growing(&self) -> impl Iterator<Item = (LeakKey, Growing)> + '_ {
        self.series.iter().filter_map(|(k, w)| match k {
            LeakKey::Process(_) if w.tracker.episode().is_none() => {
                w.tracker.growing().map(|g| (*k, *g))
            }
            _ => None,
        })
    }

    /// Brings the ongoing leak records up to date (rate, growth, peak) and the list of
    /// series growing now.
    pub fn refresh(&self, growing: &mut Vec<(LeakKey, Growing)>, leaks: &mut [LeakRecord]) {
        growing.clear();
        growing.extend(self.growing());
        for rec in leaks.iter_mut().filter(|r| r.ended_ms.is_none()) {
            if let Some(ep) = self.series.get(&rec.key).and_then(|w| w.tracker.episode()) {
                rec.info.rate_mib_per_min = ep.rate_mib_per_min;
                rec.grown_mib = ep.grown_mib();
                rec.peak_mib = ep.peak_mib;
            }
        }
    }
}

/// Ghost memory smaller than this (MiB) is never called a leak (contexts being created as
/// processes start show up briefly as used memory no process accounts for) …
const GHOST_MIN_MIB: f64 = 512.0;
/// … nor smaller than this share of the GPU (percent) …
const GHOST_MIN_PCT: f64 = 0.5;
/// … and it must have grown for at least this long (s).
const GHOST_PERSIST_S: f64 = 30.0;

/// The detector's settings for a GPU's ghost memory (total `total_bytes`): its growth must
/// reach max([`GHOST_MIN_MIB`], [`GHOST_MIN_PCT`] of the GPU) and last [`GHOST_PERSIST_S`].
fn ghost_settings(s: &LeakSettings, total_bytes: Option<u64>) -> LeakSettings {
    let pct = total_bytes.map_or(0.0, |t| mib(t) * GHOST_MIN_PCT / 100.0);
    LeakSettings {
        // Twice the threshold: a clean staircase needs half the minimum growth.
        min_growth_mib: s.min_growth_mib.max(2.0 * GHOST_MIN_MIB.max(pct)),
        min_duration_s: s.min_duration_s.max(GHOST_PERSIST_S),
        ..*s
    }
}

/// The key of the series a leak event is about.
pub(crate) fn key_of(info: &LeakInfo) -> LeakKey {
    if info.ghost {
        LeakKey::Ghost(info.device_index)
    } else {
        LeakKey::Process((
            crate::model::ProcessKey {
                pid: info.pid,
                start_time_ms: info.start_time_ms,
            },
            info.device_index,
        ))
    }
}

/// Applies a memory event (a leak's start or end, an OOM suspicion) to the records (live runs
/// and session replays alike).
pub fn record_event(
    leaks: &mut Vec<LeakRecord>,
    ooms: &mut Vec<OomRecord>,
    e: &Event,
    session: Option<&std::path::Path>,
) {
    match e {
        Event::LeakStarted { unix_ms, leak } => leaks.push(LeakRecord {
            key: key_of(leak),
            info: leak.clone(),
            flagged_ms: *unix_ms,
            ended_ms: None,
            grown_mib: 0.0,
            peak_mib: 0.0,
            session: session.map(std::path::Path::to_path_buf),
            open_at_end: false,
        }),
        Event::OomSuspected {
            unix_ms,
            device_index,
            used_pct,
            victims,
            holders,
            ..
        } => ooms.push(OomRecord {
            at_ms: *unix_ms,
            device_index: *device_index,
            used_pct: *used_pct,
            victims: victims.clone(),
            holders: holders.clone(),
            session: session.map(std::path::Path::to_path_buf),
        }),
        Event::LeakEnded {
            unix_ms,
            leak,
            grown_mib,
            peak_mib,
        } => {
            let key = key_of(leak);
            if let Some(r) = leaks
                .iter_mut()
                .rev()
                .find(|r| r.key == key && r.ended_ms.is_none())
            {
                r.ended_ms = Some(*unix_ms);
                r.grown_mib = *grown_mib;
                r.peak_mib = *peak_mib;
                r.info.rate_mib_per_min = leak.rate_mib_per_min;
            }
        }
        _ => {}
    }
}

/// The MiB a leak of `key` is judged on from tick `from` to the history's end, as the live
/// watch judges it: a process's PyTorch allocated memory where its companion answered, else
/// its memory as the driver reports it; a GPU's memory no process accounts for.
fn judged_values(h: &crate::model::history::History, key: LeakKey, from: u64) -> Vec<f64> {
    use crate::model::history::{TorchFigure, NONE};
    let (series, torch) = match key {
        LeakKey::Process(k) => (h.process(&k), h.torch(&k, TorchFigure::Allocated)),
        LeakKey::Ghost(d) => (h.ghost(d), None),
    };
    let Some(series) = series else {
        return Vec::new();
    };
    let values = series.values(from, h.end_tick());
    // PyTorch's figure at each of those ticks, NONE where it has none.
    let mut allocated = Vec::with_capacity(values.len());
    if let Some(t) = torch {
        t.values_at(values.iter().map(|(tick, _)| *tick), &mut allocated);
    }
    values
        .iter()
        .enumerate()
        .map(|(i, (_, v))| {
            allocated
                .get(i)
                .copied()
                .filter(|a| *a != NONE)
                .unwrap_or(*v)
        })
        .filter(|v| *v != NONE)
        .map(f64::from)
        .collect()
}

/// A past session's leak that never ended in it ended with the recording: it is closed at the
/// last sample (marked [`LeakRecord::open_at_end`]), with its growth and peak read from the
/// history `h` ([`judged_values`]: on PyTorch's figure where the live watch judged it on it).
pub(crate) fn close_open_leaks(leaks: &mut [LeakRecord], h: &crate::model::history::History) {
    let Some((_, end_ms)) = h.span() else {
        return;
    };
    for r in leaks.iter_mut().filter(|r| r.ended_ms.is_none()) {
        r.ended_ms = Some(end_ms.max(r.flagged_ms));
        r.open_at_end = true;
        let values = judged_values(h, r.key, h.tick_at(r.info.since_ms));
        if let (Some(first), Some(peak)) = (
            values.first().copied(),
            values.iter().copied().max_by(f64::total_cmp),
        ) {
            r.peak_mib = peak;
            r.grown_mib = (peak - first).max(0.0);
        }
    }
}

/// Notes in `growth_since` since when GPU `dev` has grown: the earliest start of a leak or
/// growth of its series that adds to its likely pace (`likely` MiB/min).
fn note_growth_since(
    growth_since: &mut Vec<(u32, crate::model::UnixMs)>,
    dev: u32,
    tracker: &LeakTracker,
    likely: f64,
) {
    let since = tracker
        .episode()
        .map(|e| e.since_ms)
        .or_else(|| tracker.growing().map(|g| g.since_ms));
    if let (Some(since), true) = (since, likely > 0.0) {
        match growth_since.iter_mut().find(|(d, _)| *d == dev) {
            Some((_, t)) => *t = (*t).min(since),
            None => growth_since.push((dev, since)),
        }
    }
}
