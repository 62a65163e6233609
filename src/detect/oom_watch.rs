//! OOM post-mortem: notices a process that left a GPU which was nearly full in the seconds
//! before, and records who held that GPU at that moment and who grew in the minute before.
//!
//! NVML does not say why a process left; a job that dies of `torch.OutOfMemoryError` simply
//! vanishes from the process list. What tells an OOM death from an ordinary exit is the GPU's
//! fill just before: when it reached [`NEAR_FULL_PCT`] within [`NEAR_FULL_WINDOW_MS`] of the
//! process's last sighting, the exit is *suspected* to be an OOM, and the event lists every
//! holder of that last sample with its growth over the preceding minute: first the *likely
//! cause* — the process (holder or the one that left) that grew most from its lowest point in
//! the [`CAUSE_SPAN_MS`] before, when that growth is at least [`CAUSE_MIN_MIB`] and
//! [`CAUSE_MIN_PCT`] of the GPU — then the others, largest first (the largest holder is often
//! a flat model that merely sat there while another job grew into the last free memory). The
//! sample in which the process is missing is not used for the fill: by then the allocator of
//! the process that caused the OOM has often released its cache (as in `public-oomkill`, where
//! the culprit fell from 117 GiB to 6 GiB within a second of its neighbour's death).
//!
//! Pure: time comes from the snapshots; the engine writes the events to the session log.

use std::collections::VecDeque;

use crate::model::history::ProcSeriesKey;
use crate::model::{FastMap, FastSet, Snapshot, UnixMs, MIB};
use crate::session::{Event, OomHolder};

/// A GPU at least this full (used / total, percent) counts as nearly full.
const NEAR_FULL_PCT: f64 = 97.0;
/// How far before a process's disappearance the GPU's fill is looked at.
const NEAR_FULL_WINDOW_MS: UnixMs = 10_000;
/// The span over which "grew in the minute before" is measured.
const GROWTH_SPAN_MS: UnixMs = 60_000;
/// The span ("the minutes before") over which the likely cause's growth is measured.
pub(crate) const CAUSE_SPAN_MS: UnixMs = 180_000;
/// Least growth (MiB) for a process to be named the likely cause …
const CAUSE_MIN_MIB: f64 = 512.0;
/// … and least share of the GPU (percent).
const CAUSE_MIN_PCT: f64 = 1.0;

struct Held {
    pid: u32,
    start_time_ms: UnixMs,
    name: String,
    user: String,
    /// (time, bytes), oldest first, spanning a little more than a minute.
    recent: VecDeque<(UnixMs, u64)>,
    /// Releasable cache at the last sample, where a companion reported it.
    releasable: Option<u64>,
}

/// Watches for processes that leave nearly full GPUs.
#[derive(Default)]
pub struct OomWatch {
    /// Per GPU: (time, used percent) over the last [`NEAR_FULL_WINDOW_MS`].
    fill: FastMap<u32, VecDeque<(UnixMs, f64)>>,
    /// Every process series of the previous sample.
    held: FastMap<ProcSeriesKey, Held>,
    /// The sample's process series and its GPUs with a process list (kept between ticks for
    /// their room).
    present: FastSet<ProcSeriesKey>,
    listed: FastSet<u32>,
}

impl OomWatch {
    /// Feeds one snapshot; returns an [`Event::OomSuspected`] per GPU on which a process
    /// vanished while the GPU was nearly full.
    pub fn observe(&mut self, snap: &Snapshot) -> Vec<Event> {
        let mut present = std::mem::take(&mut self.present);
        present.clear();
        present.extend(snap.processes.iter().map(|p| (p.key(), p.device_index)));
        let mut listed = std::mem::take(&mut self.listed);
        listed.clear();
        listed.extend(
            snap.devices
                .iter()
                .filter(|d| d.process_list_error.is_none())
                .map(|d| d.index),
        );
        // Processes gone from a GPU that is still there and listed.
        let mut gone: FastMap<u32, Vec<ProcSeriesKey>> = FastMap::default();
        for k in self.held.keys() {
            if !present.contains(k) && listed.contains(&k.1) {
                gone.entry(k.1).or_default().push(*k);
            }
        }
        let mut events: Vec<Event> = gone
            .into_iter()
            .filter_map(|(dev, keys)| self.suspect(snap, dev, keys))
            .collect();
        events.sort_by_key(|e| match e {
            Event::OomSuspected { device_index, .. } => *device_index,
            _ => 0,
        });
        self.remember(snap, &present);
        self.present = present;
        self.listed = listed;
        events
    }

    /// The OOM suspected on GPU `dev`, from which the processes `keys` are gone: where it
    /// was nearly full within the window, the victims and the holders (the likely cause
    /// first, then by size).
    fn suspect(&self, snap: &Snapshot, dev: u32, mut keys: Vec<ProcSeriesKey>) -> Option<Event> {
        let now = snap.taken_at_ms;
        let peak = self.fill.get(&dev).and_then(|f| {
            f.iter()
                .filter(|(t, _)| *t >= now - NEAR_FULL_WINDOW_MS)
                .map(|(_, p)| *p)
                .max_by(f64::total_cmp)
        });
        let peak = peak.filter(|p| *p >= NEAR_FULL_PCT)?;
        keys.sort_by_key(|k| k.0.pid);
        let mut victims: Vec<OomHolder> = keys
            .iter()
            .filter_map(|k| self.held.get(k).map(holder))
            .collect();
        let mut holders: Vec<OomHolder> = self
            .held
            .iter()
            .filter(|(k, _)| k.1 == dev && !keys.contains(k))
            .map(|(_, h)| holder(h))
            .filter(|h| h.mib > 0.0)
            .collect();
        let total_mib = snap
            .devices
            .iter()
            .find(|d| d.index == dev)
            .and_then(|d| d.memory_total_bytes)
            .map(|b| b as f64 / MIB as f64);
        mark_cause(&mut victims, &mut holders, total_mib);
        holders.sort_by(|a, b| {
            b.likely_cause
                .cmp(&a.likely_cause)
                .then(b.mib.total_cmp(&a.mib))
                .then(a.pid.cmp(&b.pid))
        });
        Some(Event::OomSuspected {
            unix_ms: now,
            device_index: dev,
            used_pct: peak,
            total_mib,
            victims,
            holders,
        })
    }

    fn remember(&mut self, snap: &Snapshot, present: &FastSet<ProcSeriesKey>) {
        let now = snap.taken_at_ms;
        for d in &snap.devices {
            let f = self.fill.entry(d.index).or_default();
            if let (Some(used), Some(total)) = (d.memory_used_bytes, d.memory_total_bytes) {
                if total > 0 {
                    f.push_back((now, used as f64 * 100.0 / total as f64));
                }
            }
            while f
                .front()
                .is_some_and(|(t, _)| *t < now - NEAR_FULL_WINDOW_MS)
            {
                f.pop_front();
            }
        }
        self.held.retain(|k, _| present.contains(k));
        for p in &snap.processes {
            let h = self
                .held
                .entry((p.key(), p.device_index))
                .or_insert_with(|| {
                    let i = p.info.as_deref();
                    Held {
                        pid: p.pid,
                        start_time_ms: p.key().start_time_ms,
                        name: i.map_or_else(|| "?".to_string(), |i| i.name.clone()),
                        user: i.map_or_else(String::new, |i| i.user.clone()),
                        recent: VecDeque::new(),
                        releasable: None,
                    }
                });
            h.releasable = p.torch.map(|t| t.releasable_bytes());
            if let Some(u) = p.used_bytes {
                h.recent.push_back((now, u));
            }
            // Keep one point at least the cause span old.
            while h.recent.len() > 2 && h.recent[1].0 <= now - CAUSE_SPAN_MS {
                h.recent.pop_front();
            }
        }
    }
}

fn holder(h: &Held) -> OomHolder {
    let mib = |b: u64| b as f64 / MIB as f64;
    let last = h.recent.back().map_or(0.0, |(_, b)| mib(*b));
    let now = h.recent.back().map_or(0, |(t, _)| *t);
    // Over the minute before (or the process's life, when shorter): from the newest point at
    // least a minute old, else the oldest held.
    let grown_1m_mib = (h.recent.len() > 1)
        .then(|| {
            h.recent
                .iter()
                .rev()
                .find(|(t, _)| *t <= now - GROWTH_SPAN_MS)
                .or(h.recent.front())
        })
        .flatten()
        .map(|(_, b)| last - mib(*b));
    // From its lowest point in the cause span (its last time there: the growth's start).
    let low = (h.recent.len() > 1)
        .then(|| h.recent.iter().rev().min_by_key(|(_, b)| *b))
        .flatten();
    let grown_recent_mib = low.map(|(_, b)| last - mib(*b));
    let grown_over_s = low.map(|(t, _)| (now - t) as f64 / 1000.0);
    OomHolder {
        pid: h.pid,
        start_time_ms: h.start_time_ms,
        name: h.name.clone(),
        user: h.user.clone(),
        mib: last,
        grown_1m_mib,
        releasable_mib: h.releasable.map(mib),
        grown_recent_mib,
        grown_over_s,
        cause_share_pct: None,
        likely_cause: false,
    }
}

/// Marks the likely cause among the processes that left and the holders: the one that grew
/// most in the minutes before, when that growth is at least [`CAUSE_MIN_MIB`] and
/// [`CAUSE_MIN_PCT`] of the GPU (`total_mib`, when known).
fn mark_cause(victims: &mut [OomHolder], holders: &mut [OomHolder], total_mib: Option<f64>) {
    let min = CAUSE_MIN_MIB.max(total_mib.map_or(0.0, |t| t * CAUSE_MIN_PCT / 100.0));
    let all: f64 = victims
        .iter()
        .chain(holders.iter())
        .filter_map(|h| h.grown_recent_mib)
        .filter(|g| *g > 0.0)
        .sum();
    let best = victims
        .iter_mut()
        .chain(holders.iter_mut())
        .filter(|h| h.grown_recent_mib.is_some_and(|g| g >= min))
        .max_by(|a, b| {
            a.grown_recent_mib
                .unwrap_or(0.0)
                .total_cmp(&b.grown_recent_mib.unwrap_or(0.0))
        });
    if let Some(h) = best {
        h.likely_cause = true;
        h.cause_share_pct = h
            .grown_recent_mib
            .filter(|_| all > 0.0)
            .map(|g| 100.0 * g / all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSample, Origin, ProcessSample, GIB};

    /// GPU 0 (140 GiB): PID 1 holds a flat 100 GiB model, PID 2 grows 3.1 GiB over the minute
    /// before, PID 3 (2 GiB) dies when the GPU is full.
    fn snap(t: i64, with_victim: bool) -> Snapshot {
        let grower = 30 * GIB + (t.clamp(120, 180) - 120) as u64 * (3174 * MIB / 60);
        let mut procs = vec![(1, 100 * GIB), (2, grower)];
        if with_victim {
            procs.push((3, 2 * GIB));
        }
        let used: u64 = procs.iter().map(|p| p.1).sum();
        Snapshot {
            taken_at_ms: t * 1000,
            devices: vec![DeviceSample {
                memory_total_bytes: Some(137 * GIB),
                memory_used_bytes: Some(used),
                ..DeviceSample::default()
            }],
            processes: procs
                .into_iter()
                .map(|(pid, used)| ProcessSample {
                    pid,
                    used_bytes: Some(used),
                    origin: Origin::Simulated,
                    ..ProcessSample::default()
                })
                .collect(),
        }
    }

    #[test]
    fn how_sure_the_likely_cause_is_follows_its_share_of_the_growth() {
        let cause = |share: Option<f64>| OomHolder {
            pid: 7,
            start_time_ms: 0,
            name: "python".into(),
            user: String::new(),
            mib: 9000.0,
            grown_1m_mib: None,
            releasable_mib: None,
            grown_recent_mib: Some(3072.0),
            grown_over_s: Some(120.0),
            cause_share_pct: share,
            likely_cause: true,
        };
        let says = |share| crate::session::how_sure(&cause(share));
        assert_eq!(
            says(Some(92.0)),
            " (over 120 s, 1.5 GiB/min, 92 % of the growth: sure)"
        );
        assert!(says(Some(60.0)).ends_with("60 % of the growth: probable)"));
        assert!(says(Some(35.0)).ends_with("35 % of the growth: one of several that grew)"));
        assert_eq!(says(None), " (over 120 s, 1.5 GiB/min)");
    }

    #[test]
    fn the_process_that_grew_into_the_last_memory_comes_first_then_the_holders_by_size() {
        let mut w = OomWatch::default();
        for t in 0..=180 {
            assert!(w.observe(&snap(t, true)).is_empty(), "no death yet at {t}");
        }
        let events = w.observe(&snap(181, false));
        let [Event::OomSuspected {
            victims, holders, ..
        }] = events.as_slice()
        else {
            panic!("one suspicion: {events:?}");
        };
        assert_eq!(victims[0].pid, 3);
        assert!(!victims[0].likely_cause);
        let order: Vec<(u32, bool)> = holders.iter().map(|h| (h.pid, h.likely_cause)).collect();
        assert_eq!(order, vec![(2, true), (1, false)]);
        let g = holders[0].grown_recent_mib.expect("growth");
        assert!((g - 3174.0).abs() < 60.0, "grew {g} MiB");
        // How sure: it grew for 60 s (from its last time at its lowest), all of the growth.
        assert_eq!(holders[0].grown_over_s, Some(60.0));
        assert_eq!(holders[0].cause_share_pct, Some(100.0));
        let text = crate::session::describe_oom(99.0, victims, holders);
        assert!(
            text.contains("(over 60 s, 3.1 GiB/min, 100 % of the growth: sure)"),
            "{text}"
        );
        assert!(
            text.contains("likely cause: ? (PID 2), +3.1 GiB in the minutes before"),
            "{text}"
        );
    }

    #[test]
    fn no_cause_is_named_when_nobody_grew_much() {
        let mut w = OomWatch::default();
        let flat = |t: i64, v: bool| {
            let mut s = snap(t, v);
            s.processes[1].used_bytes = Some(35 * GIB);
            s.devices[0].memory_used_bytes =
                Some(s.processes.iter().filter_map(|p| p.used_bytes).sum());
            s
        };
        for t in 0..=100 {
            w.observe(&flat(t, true));
        }
        let events = w.observe(&flat(101, false));
        let Some(Event::OomSuspected { holders, .. }) = events.first() else {
            panic!("{events:?}");
        };
        assert!(holders.iter().all(|h| !h.likely_cause));
        assert_eq!(holders[0].pid, 1, "by size");
    }
}
