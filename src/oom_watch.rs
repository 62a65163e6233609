//! OOM post-mortem: notices a process that left a GPU which was nearly full in the seconds
//! before, and records who held that GPU at that moment and who grew in the minute before.
//!
//! NVML does not say why a process left; a job that dies of `torch.OutOfMemoryError` simply
//! vanishes from the process list. What tells an OOM death from an ordinary exit is the GPU's
//! fill just before: when it reached [`NEAR_FULL_PCT`] within [`NEAR_FULL_WINDOW_MS`] of the
//! process's last sighting, the exit is *suspected* to be an OOM, and the event lists every
//! holder of that last sample (largest first) with its growth over the preceding minute. The
//! sample in which the process is missing is not used for the fill: by then the allocator of
//! the process that caused the OOM has often released its cache (as in `public-oomkill`, where
//! the culprit fell from 117 GiB to 6 GiB within a second of its neighbour's death).
//!
//! Pure: time comes from the snapshots; the engine writes the events to the session log.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::history::ProcSeriesKey;
use crate::model::{Snapshot, UnixMs, MIB};
use crate::session::{Event, OomHolder};

/// A GPU at least this full (used / total, percent) counts as nearly full.
pub const NEAR_FULL_PCT: f64 = 97.0;
/// How far before a process's disappearance the GPU's fill is looked at.
pub const NEAR_FULL_WINDOW_MS: UnixMs = 10_000;
/// The span over which "grew in the minute before" is measured.
const GROWTH_SPAN_MS: UnixMs = 60_000;

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
    fill: HashMap<u32, VecDeque<(UnixMs, f64)>>,
    /// Every process series of the previous sample.
    held: HashMap<ProcSeriesKey, Held>,
}

impl OomWatch {
    /// Feeds one snapshot; returns an [`Event::OomSuspected`] per GPU on which a process
    /// vanished while the GPU was nearly full.
    pub fn observe(&mut self, snap: &Snapshot) -> Vec<Event> {
        let now = snap.taken_at_ms;
        let present: HashSet<ProcSeriesKey> = snap
            .processes
            .iter()
            .map(|p| (p.key(), p.device_index))
            .collect();
        let listed: HashSet<u32> = snap
            .devices
            .iter()
            .filter(|d| d.process_list_error.is_none())
            .map(|d| d.index)
            .collect();
        // Processes gone from a GPU that is still there and listed.
        let mut gone: HashMap<u32, Vec<ProcSeriesKey>> = HashMap::new();
        for k in self.held.keys() {
            if !present.contains(k) && listed.contains(&k.1) {
                gone.entry(k.1).or_default().push(*k);
            }
        }
        let mut events = Vec::new();
        for (dev, mut keys) in gone {
            let peak = self.fill.get(&dev).and_then(|f| {
                f.iter()
                    .filter(|(t, _)| *t >= now - NEAR_FULL_WINDOW_MS)
                    .map(|(_, p)| *p)
                    .max_by(f64::total_cmp)
            });
            let Some(peak) = peak.filter(|p| *p >= NEAR_FULL_PCT) else {
                continue;
            };
            keys.sort_by_key(|k| k.0.pid);
            let victims: Vec<OomHolder> = keys
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
            holders.sort_by(|a, b| b.mib.total_cmp(&a.mib).then(a.pid.cmp(&b.pid)));
            let total_mib = snap
                .devices
                .iter()
                .find(|d| d.index == dev)
                .and_then(|d| d.memory_total_bytes)
                .map(|b| b as f64 / MIB as f64);
            events.push(Event::OomSuspected {
                unix_ms: now,
                device_index: dev,
                used_pct: peak,
                total_mib,
                victims,
                holders,
            });
        }
        events.sort_by_key(|e| match e {
            Event::OomSuspected { device_index, .. } => *device_index,
            _ => 0,
        });
        self.remember(snap, &present);
        events
    }

    fn remember(&mut self, snap: &Snapshot, present: &HashSet<ProcSeriesKey>) {
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
            // Keep one point at least a minute old.
            while h.recent.len() > 2 && h.recent[1].0 <= now - GROWTH_SPAN_MS {
                h.recent.pop_front();
            }
        }
    }
}

fn holder(h: &Held) -> OomHolder {
    let mib = |b: u64| b as f64 / MIB as f64;
    let last = h.recent.back().map_or(0.0, |(_, b)| mib(*b));
    // Over the minute before (or the process's life, when shorter): from the oldest point
    // held, which is kept about a minute old.
    let grown_1m_mib = h
        .recent
        .front()
        .filter(|_| h.recent.len() > 1)
        .map(|(_, b)| last - mib(*b));
    OomHolder {
        pid: h.pid,
        start_time_ms: h.start_time_ms,
        name: h.name.clone(),
        user: h.user.clone(),
        mib: last,
        grown_1m_mib,
        releasable_mib: h.releasable.map(mib),
    }
}
