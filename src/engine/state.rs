//! The engine's working state ([`EngineState`]): what the engine's thread keeps beside the
//! View ([`Monitor`]) it publishes, and the derivation of the View's process rows from
//! samples — first and last sightings, exits, peaks, the one-minute change and each process's
//! colour. Nothing outside the engine derives rows.

use std::collections::VecDeque;

use crate::engine::view::{Monitor, ProcessRow, SourceStatus, COLOR_SLOTS, EXITED_LINGER_MS};
use crate::model::history::ProcSeriesKey;
use crate::model::sample_map::SampleMap;
use crate::model::{Snapshot, UnixMs};

/// A process's memory readings of the last minute, changes only (the one-minute change).
type Recent = VecDeque<(UnixMs, u64)>;

/// The engine's working state beside the View it publishes, owned by the engine's thread (the
/// sampler's, or the loop of `record`, `import`, a replay): what it keeps to derive the View's
/// rows from samples, none of it published — the rows' readings of the last minute, how many
/// rows are live and new, and the history's evictions the rows were last matched to. Only
/// the engine derives; a window attached to an agent takes the agent's rows as sent.
#[derive(Debug, Clone, Default)]
pub struct EngineState {
    /// Each row's readings of the last minute, in the rows' order.
    recent: SampleMap<ProcSeriesKey, Recent>,
    /// The history's [`crate::model::history::History::evictions`] when rows were last matched to its series.
    evictions_seen: u64,
    /// Rows of running processes (no exit time).
    live_rows: usize,
    /// Rows first seen in the sample being taken in, not yet given a colour, in the rows'
    /// order.
    fresh: Vec<ProcSeriesKey>,
    /// The rows that may hold a colour: every running row, and those exited less than
    /// [`EXITED_LINGER_MS`] before the last colouring (or since). The others are gone for good
    /// until they come back; their exits are kept in `departed`. So taking in a sample costs
    /// the rows running or lately gone, not every row of the history (a day of short jobs is
    /// tens of thousands); a history eviction or a clock going back looks at every row once.
    holders: crate::model::FastSet<ProcSeriesKey>,
    /// Per colour slot, when the last of its rows gone for good left.
    departed: Departures,
    /// The time of the last sample taken in.
    last_ms: UnixMs,
    /// The number of the engine's last event ([`crate::engine::events::EngineEvent::seq`]).
    last_seq: u64,
}

impl EngineState {
    /// Numbers one tick's `events` on from the last one numbered.
    pub(crate) fn number_events(
        &mut self,
        events: Vec<(UnixMs, crate::engine::events::EngineEventKind)>,
    ) -> Vec<crate::engine::events::EngineEvent> {
        crate::engine::events::number(&mut self.last_seq, events)
    }

    /// Takes one snapshot (already enriched with process facts) into the View `m`: its
    /// history, its rows, its latest sample; returns the one it replaces as the latest (the
    /// caller chooses where it is dropped).
    pub fn apply(
        &mut self,
        m: &mut Monitor,
        snap: Snapshot,
        received_ms: UnixMs,
    ) -> Option<Snapshot> {
        m.history.push(&snap);
        self.apply_beside_history(m, snap, received_ms)
    }

    /// [`EngineState::apply`] but for the history, which its caller builds from the same
    /// samples with [`crate::model::history::History::push`] and hands over with [`Monitor::set_history`] (a replay
    /// builds it on a thread of its own, so the two halves are built on two cores at once).
    pub(crate) fn apply_beside_history(
        &mut self,
        m: &mut Monitor,
        snap: Snapshot,
        received_ms: UnixMs,
    ) -> Option<Snapshot> {
        let now = snap.taken_at_ms;
        if now < self.last_ms {
            self.clock_stepped_back(m);
        }
        self.last_ms = now;
        // Rows seen in this sample; when fewer than the live ones, some process left.
        let mut seen = 0;
        for (pos, p) in snap.processes.iter().enumerate() {
            seen += usize::from(self.take_in_row(m, pos, p, now));
        }
        if self.live_rows > seen {
            let mut live = 0;
            for key in &self.holders {
                let Some(row) = m.rows.get_mut(key) else {
                    continue;
                };
                if row.last_seen_ms < now && row.exited_at_ms.is_none() {
                    row.exited_at_ms = Some(now);
                    row.used_bytes = Some(0);
                }
                live += usize::from(row.exited_at_ms.is_none());
            }
            self.live_rows = live;
        }
        // Colours once this sample's exits are known: a new process's band lies beside the
        // processes running now, not beside one that ended in this same sample.
        if !self.fresh.is_empty() {
            self.color_fresh_rows(&mut m.rows, now);
        }
        // Keep rows while their history exists, so exited processes can still be inspected.
        if m.history.evictions() != self.evictions_seen {
            self.keep_rows_with_history(m);
        }
        let previous = m.latest.replace(snap);
        m.latest_received_ms = Some(received_ms);
        m.last_error = None;
        m.status = SourceStatus::Running;
        m.ticks += 1;
        previous
    }

    /// Takes in process sample `p`, listed at `pos`, into its row (a new row for a new
    /// process); false when its row was already seen in this sample (counted once per sample,
    /// however often it is listed — a snapshot that was not sanitized — and whatever the clock
    /// did).
    fn take_in_row(
        &mut self,
        m: &mut Monitor,
        pos: usize,
        p: &crate::model::ProcessSample,
        now: UnixMs,
    ) -> bool {
        let mut fresh = false;
        let key = (p.key(), p.device_index);
        let (place, row) = m.rows.at_mut_placed(pos, key, |_| {
            fresh = true;
            ProcessRow::first_seen(p, now, UNCOLORED)
        });
        let d = self;
        // Kept in the rows' order (made with them, dropped with them): found at the row's
        // place without a lookup.
        let recent = d.recent.place_mut(place, pos, key, |_| Recent::new());
        if fresh {
            d.fresh.push(key);
            d.holders.insert(key);
            row.update(p, now, recent);
            d.live_rows += 1;
            return true;
        }
        if row.last_seen_ms >= now {
            // Seen again in this sample, or after the clock went back (when every row is
            // among the holders).
            row.update(p, now, recent);
            return false;
        }
        if row.exited_at_ms.is_some() {
            d.live_rows += 1;
            d.holders.insert(key);
        }
        row.update(p, now, recent);
        true
    }

    /// Drops the rows whose history is gone (evicted).
    fn keep_rows_with_history(&mut self, m: &mut Monitor) {
        self.evictions_seen = m.history.evictions();
        m.keep_rows_with_history();
        let history = &m.history;
        self.recent.retain(|k, _| history.process(k).is_some());
        self.live_rows = m.rows.values().filter(|r| r.exited_at_ms.is_none()).count();
        // The rows dropped no longer count among those gone for good.
        self.holders.retain(|k| m.rows.get(k).is_some());
        self.departed = NO_DEPARTURES;
        for r in m.rows.values() {
            if let (Some(exit), false) = (r.exited_at_ms, self.holders.contains(&r.series_key())) {
                departed(&mut self.departed, r, exit);
            }
        }
    }

    /// The clock went back: rows gone for good by a later time may hold their colour at this
    /// one (or not be seen yet), so every row is looked at again, as at the start.
    fn clock_stepped_back(&mut self, m: &Monitor) {
        self.holders = m.rows.iter().map(|(k, _)| *k).collect();
        self.departed = NO_DEPARTURES;
    }

    /// Gives each row first seen in the sample at `now` its colour slot ([`free_slot`]), one
    /// after another, among the rows that may hold one; the rows gone for good by `now` leave
    /// those first.
    fn color_fresh_rows(&mut self, rows: &mut SampleMap<ProcSeriesKey, ProcessRow>, now: UnixMs) {
        let departed_now = &mut self.departed;
        self.holders.retain(|k| match rows.get(k) {
            Some(r) => match r.exited_at_ms {
                Some(exit) if gone_for_good(exit, now) => {
                    departed(departed_now, r, exit);
                    false
                }
                _ => true,
            },
            None => false,
        });
        for key in std::mem::take(&mut self.fresh) {
            let holding = self.holders.iter().filter_map(|k| rows.get(k));
            let slot = free_slot(holding, &self.departed, key, now);
            if let Some(r) = rows.get_mut(&key) {
                r.color_slot = slot;
            }
        }
    }
}

impl ProcessRow {
    /// The row of a process first seen at `now` (before its first [`ProcessRow::update`]).
    pub(crate) fn first_seen(p: &crate::model::ProcessSample, now: UnixMs, color_slot: u8) -> Self {
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

    /// Takes the readings of this process's sample `p`: memory, CPU, resident memory,
    /// PyTorch's figures, GPU share and park.
    pub(crate) fn take_readings(&mut self, p: &crate::model::ProcessSample) {
        self.used_bytes = p.used_bytes;
        self.cpu_pct = p.cpu_pct;
        self.rss_bytes = p.rss_bytes;
        self.torch = p.torch;
        self.sm_util_pct = p.sm_util_pct;
        self.parked = p.parked;
    }

    /// Takes in this process's sample at `now`; `recent` is its memory readings of the last
    /// minute (the engine's scratch for the one-minute change).
    pub(crate) fn update(
        &mut self,
        p: &crate::model::ProcessSample,
        now: UnixMs,
        recent: &mut Recent,
    ) {
        self.take_readings(p);
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
}

/// The colour slot of a row not yet given one (see [`free_slot`]).
pub(crate) const UNCOLORED: u8 = u8::MAX;

/// The colouring written out the plain way, for tests to hold the engine's to: each row first
/// seen at `now` (not yet coloured) given its slot by [`free_slot`] among every row, one after
/// another.
#[cfg(test)]
pub(crate) fn color_fresh_rows_looking_at_every_row(
    rows: &mut SampleMap<ProcSeriesKey, ProcessRow>,
    now: UnixMs,
) {
    let fresh: Vec<ProcSeriesKey> = rows
        .values()
        .filter(|r| r.color_slot == UNCOLORED)
        .map(ProcessRow::series_key)
        .collect();
    for key in fresh {
        let slot = free_slot(rows.values(), &NO_DEPARTURES, key, now);
        if let Some(r) = rows.get_mut(&key) {
            r.color_slot = slot;
        }
    }
}

/// Per colour slot, when its last holder among rows left out of a [`free_slot`] call exited
/// ([`UnixMs::MIN`]: none): rows that exited long enough ago to hold nothing again.
pub(crate) type Departures = [UnixMs; COLOR_SLOTS];

/// No rows left out.
pub(crate) const NO_DEPARTURES: Departures = [UnixMs::MIN; COLOR_SLOTS];

/// Whether a process that exited at `exit` holds no colour at `at` any more: it left
/// [`EXITED_LINGER_MS`] or more before.
pub(crate) fn gone_for_good(exit: UnixMs, at: UnixMs) -> bool {
    exit + EXITED_LINGER_MS <= at
}

/// Notes in `departed` that `row`, exited at `exit` and gone for good, held its slot.
pub(crate) fn departed(departed: &mut Departures, row: &ProcessRow, exit: UnixMs) {
    if let Some(l) = departed.get_mut(usize::from(row.color_slot)) {
        *l = (*l).max(exit);
    }
}

/// A colour slot for the process `key` first seen at `at`: one that no process on any GPU holds
/// (running, or exited less than [`EXITED_LINGER_MS`] before), among the first
/// [`COLOR_SLOTS`] the one whose last holder left longest ago (never held first), so a
/// restarted process does not take the colour its predecessor had on the graph; when all are
/// held, the lowest free one above them. Of those, the first whose colour is far from the bands
/// beside it in its GPU's stack (the processes on its GPU started just before and just after
/// it, [`crate::model::palette::far_apart`]), so two bands that touch never look alike.
/// `rows` may leave out rows gone for good whose exits `departed` holds.
pub(crate) fn free_slot<'a>(
    rows: impl Iterator<Item = &'a ProcessRow> + Clone,
    departed: &Departures,
    key: ProcSeriesKey,
    at: UnixMs,
) -> u8 {
    let mut held = [false; 256];
    let mut left = *departed;
    for r in rows.clone().filter(|r| r.first_seen_ms <= at) {
        let slot = usize::from(r.color_slot);
        match r.exited_at_ms {
            Some(e) if gone_for_good(e, at) => self::departed(&mut left, r, e),
            _ => held[slot] = true,
        }
    }
    let bands = bands_of_its_gpu(rows, key, at);
    let beside = stack_neighbours(&bands, key);
    let mut free: Vec<usize> = (0..COLOR_SLOTS).filter(|i| !held[*i]).collect();
    free.sort_by_key(|i| (left[*i], *i));
    // Far from every band of its GPU where the palette allows (two yellows on one GPU were
    // hard to tell apart in the legend though not beside each other), else from the two
    // beside it.
    let on_gpu: Vec<u8> = bands.iter().map(|r| r.color_slot).collect();
    let apart_from = |slots: &[u8], i: usize| {
        slots
            .iter()
            .all(|b| crate::model::palette::far_apart(i, usize::from(*b)))
    };
    let neighbours: Vec<u8> = beside.iter().flatten().copied().collect();
    free.iter()
        .find(|i| apart_from(&on_gpu, **i))
        .or_else(|| free.iter().find(|i| apart_from(&neighbours, **i)))
        .or_else(|| free.first())
        .copied()
        .or_else(|| held.iter().position(|h| !h))
        .map_or(0, |i| i as u8)
}

/// The coloured bands of `key`'s GPU at `at` besides its own: its running processes (one that
/// has ended has no band any more).
fn bands_of_its_gpu<'a>(
    rows: impl Iterator<Item = &'a ProcessRow>,
    key: ProcSeriesKey,
    at: UnixMs,
) -> Vec<&'a ProcessRow> {
    rows.filter(|r| {
        r.device_index == key.1
            && r.series_key() != key
            && r.first_seen_ms <= at
            && r.exited_at_ms.is_none()
            && r.color_slot != UNCOLORED
    })
    .collect()
}

/// The colour slots of the bands (of [`bands_of_its_gpu`]) beside `key` in its GPU's stack
/// (ordered by start time, then PID, as the graph stacks them): the one just below and the
/// one just above.
fn stack_neighbours(bands: &[&ProcessRow], key: ProcSeriesKey) -> [Option<u8>; 2] {
    let order = |k: &ProcSeriesKey| (k.0.start_time_ms, k.0.pid);
    let mut below: Option<&ProcessRow> = None;
    let mut above: Option<&ProcessRow> = None;
    for &r in bands {
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

    /// Job `j` of [`short_jobs`] runs in samples `3j .. 3j + 25` on GPU `j % 2`; every 7th
    /// comes back for 15 samples a minute after it left.
    fn short_jobs(i: u32, t: UnixMs) -> Snapshot {
        let mut s = sample(t, &[]);
        for j in 0..=i / 3 {
            let first = 3 * j;
            let back = first + 25 + 60;
            let running = i < first + 25 || (j % 7 == 0 && (back..back + 15).contains(&i));
            if i >= first && running {
                let mut p = sample(t, &[1000 + j]).processes.remove(0);
                p.device_index = j % 2;
                s.processes.push(p);
            }
        }
        s
    }

    /// The engine colours new processes as the plain colouring that looks at every row does,
    /// though it looks only at the rows running or lately gone: short jobs on two GPUs, far
    /// more than the colours, some back a minute after they left, with a history short
    /// enough to drop rows.
    #[test]
    fn the_engine_colours_as_if_it_looked_at_every_row() {
        let mut state = crate::engine::state::EngineState::default();
        let mut m = Monitor::new(1000, 600);
        let mut reused = 0;
        for i in 0..1500 {
            let t = 1_796_000_000_000 + UnixMs::from(i) * 1000;
            state.apply(&mut m, short_jobs(i, t), t);
            assert_coloured_as_if_every_row_was_looked_at(&m, t);
            let fresh = m.rows.values().filter(|r| r.first_seen_ms == t);
            reused += fresh
                .filter(|r| usize::from(r.color_slot) < COLOR_SLOTS)
                .count();
        }
        // Rows were dropped with their history, and slots were taken again and again.
        assert!(m.history.evictions() > 0 && m.rows().count() < 500);
        assert!(reused > 400, "{reused}");
    }

    /// Colours and exits after the clock goes back past processes gone for good: one listed
    /// again is marked when it leaves again; a new process's colour is chosen among the rows
    /// as they were at that earlier time, as the colouring that looks at every row does.
    #[test]
    fn after_the_clock_goes_back_exits_and_colours_are_as_if_every_row_was_looked_at() {
        let mut state = crate::engine::state::EngineState::default();
        let mut m = Monitor::new(1000, 1000);
        let mut take = |m: &mut Monitor, t: UnixMs, pids: Vec<u32>| {
            state.apply(m, sample(t, &pids), t);
            assert_coloured_as_if_every_row_was_looked_at(m, t);
        };
        // Processes 1–20 take the 20 colours; 1 leaves; 21, new 39 s later, takes its colour.
        take(&mut m, 100_000, (1..=20).collect());
        take(&mut m, 101_000, (2..=20).collect());
        take(&mut m, 140_000, (2..=21).collect());
        assert_eq!(slot(&m, 21), slot(&m, 1));
        // Back to 120 000, when 1 had left 19 s before and still held its colour: 22, new,
        // gets another.
        take(&mut m, 120_000, (2..=20).chain([22]).collect());
        assert_ne!(slot(&m, 22), slot(&m, 1));
        // Back to 90 000, before 1 left: listed again, then leaving again, it is marked.
        take(&mut m, 90_000, (1..=20).chain([22]).collect());
        assert_eq!(exited(&m, 1), None);
        take(&mut m, 91_000, (2..=20).chain([22]).collect());
        assert_eq!(exited(&m, 1), Some(91_000));
    }

    fn row(m: &Monitor, pid: u32) -> &ProcessRow {
        m.rows().find(|r| r.key.pid == pid).expect("a row")
    }

    fn exited(m: &Monitor, pid: u32) -> Option<UnixMs> {
        row(m, pid).exited_at_ms
    }

    fn slot(m: &Monitor, pid: u32) -> u8 {
        row(m, pid).color_slot
    }

    /// The rows' colours equal those the colouring that looks at every row gives the rows
    /// first seen at `t` (the last sample taken in).
    fn assert_coloured_as_if_every_row_was_looked_at(m: &Monitor, t: UnixMs) {
        let mut plain = m.rows.clone();
        for r in plain.values_mut().filter(|r| r.first_seen_ms == t) {
            r.color_slot = UNCOLORED;
        }
        color_fresh_rows_looking_at_every_row(&mut plain, t);
        let slots = |rows: &SampleMap<ProcSeriesKey, ProcessRow>| -> Vec<(u32, u8)> {
            rows.values().map(|r| (r.key.pid, r.color_slot)).collect()
        };
        assert_eq!(slots(&m.rows), slots(&plain), "at {t}");
    }

    #[test]
    fn a_process_that_leaves_is_marked_exited_whatever_the_clock_and_repeats_do() {
        let mut state = crate::engine::state::EngineState::default();
        let mut m = Monitor::new(1000, 100);
        state.apply(&mut m, sample(10_000, &[1, 2]), 10_000);
        // The clock steps back; process 2 is gone. It is marked once the clock passes its
        // last sighting, as before.
        state.apply(&mut m, sample(6_000, &[1]), 6_000);
        assert_eq!(exited(&m, 2), None);
        for t in [7_000, 8_000, 9_000, 10_000] {
            state.apply(&mut m, sample(t, &[1]), t);
        }
        assert_eq!(exited(&m, 2), None);
        state.apply(&mut m, sample(11_000, &[1]), 11_000);
        assert_eq!(exited(&m, 2), Some(11_000));
        // A process listed twice in one (unsanitized) sample counts once: process 3 leaving
        // is still seen.
        state.apply(&mut m, sample(12_000, &[1, 3]), 12_000);
        state.apply(&mut m, sample(13_000, &[1, 1]), 13_000);
        assert_eq!(exited(&m, 3), Some(13_000));
        assert_eq!(exited(&m, 1), None);
        // And one that comes back is live again.
        state.apply(&mut m, sample(14_000, &[1, 3]), 14_000);
        assert_eq!(exited(&m, 3), None);
        state.apply(&mut m, sample(15_000, &[3]), 15_000);
        assert_eq!(exited(&m, 1), Some(15_000));
    }

    #[test]
    fn the_view_is_plain_serializable_data() {
        use crate::source::GpuSource;
        let mut sim = crate::source::sim::SimSource::demo(1_796_000_000_000);
        let mut state = crate::engine::state::EngineState::default();
        let mut m = Monitor::new(1000, 600);
        for i in 0..300 {
            let t = 1_796_000_000_000 + i * 1000;
            state.apply(&mut m, sim.sample(t).expect("sim"), t);
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
        let mut state = crate::engine::state::EngineState::default();
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
            state.apply(&mut m, snap, t);
            // Every two bands of one GPU, touching or not, are far apart too (at most five
            // run on a GPU: the palette has room for that).
            for d in 0..2 {
                let slots: Vec<u8> = m
                    .rows()
                    .filter(|r| r.device_index == d && r.exited_at_ms.is_none())
                    .map(|r| r.color_slot)
                    .collect();
                for (i, a) in slots.iter().enumerate() {
                    for b in &slots[i + 1..] {
                        assert!(
                            crate::model::palette::far_apart(usize::from(*a), usize::from(*b)),
                            "at {t}, GPU {d}: slots {a} and {b} look alike"
                        );
                    }
                }
            }
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
