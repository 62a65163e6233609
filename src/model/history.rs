//! Bounded, compact history of memory readings, and min/max decimation for plots.
//!
//! Samples share one timeline of ticks (one per snapshot). Each series stores whole MiB values
//! in chunks of [`CHUNK`] ticks: the newest chunk raw, older chunks sealed as zig-zag deltas of
//! the narrowest width that fits (0, 1, 2 or 4 bytes) plus a min/max summary per [`BLOCK`]
//! ticks. Memory is therefore 0.7 to 4.7 bytes per sample, and decimating hours of history for
//! a plot reads the summaries instead of every value, so drawing cost follows the plot's width.
//!
//! Sealed chunks are shared (`Arc`), so a copy of a whole history costs its open chunks and
//! a pointer per series: the engine's state is copied for front ends once per change (see
//! [`crate::engine::shared::Shared`]) and they draw from their copy without holding a lock.

#[cfg(any(feature = "gui", test))]
mod buckets;
pub mod delta;
mod join;

#[cfg(any(feature = "gui", test))]
pub use buckets::BucketCache;
#[cfg(feature = "gui")]
pub(crate) use buckets::Buckets;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::model::sample_map::SampleMap;
use crate::model::{ProcessKey, Snapshot, UnixMs, MIB};

/// Ticks per chunk.
pub(crate) const CHUNK: usize = 256;
/// Ticks per min/max summary block.
const BLOCK: usize = 16;
/// The stored value for "no reading".
pub const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, serde::Serialize)]
struct Sealed {
    base: u32,
    width: u8,
    /// Whether any value is [`NONE`] (else a block whose min equals its max holds only it).
    has_none: bool,
    data: Box<[u8]>,
    blocks: Box<[(u32, u32)]>,
}

fn zigzag(d: i32) -> u32 {
    ((d << 1) ^ (d >> 31)) as u32
}

fn unzigzag(z: u32) -> i32 {
    ((z >> 1) as i32) ^ -((z & 1) as i32)
}

fn block_summary(values: &[u32]) -> (u32, u32) {
    values
        .iter()
        .filter(|v| **v != NONE)
        .fold((NONE, 0), |(lo, hi), &v| (lo.min(v), hi.max(v)))
}

impl Sealed {
    /// The chunk of `values` (at most [`CHUNK`] of them; the rest of a longer slice is
    /// not kept): each value as the zigzag of its step from the one before, in the fewest
    /// bytes that hold the largest step.
    fn seal(values: &[u32]) -> Self {
        let values = &values[..values.len().min(CHUNK)];
        let base = values.first().copied().unwrap_or(NONE);
        let mut zz = [0u32; CHUNK];
        let n = values.len().saturating_sub(1);
        // The steps' bits together have the largest step's width.
        let mut any = 0u32;
        for (z, w) in zz.iter_mut().zip(values.windows(2)) {
            *z = zigzag(w[1].wrapping_sub(w[0]) as i32);
            any |= *z;
        }
        let width: u8 = match any {
            0 => 0,
            1..=0xFF => 1,
            0x100..=0xFFFF => 2,
            _ => 4,
        };
        let zz = &zz[..n];
        let data: Box<[u8]> = match width {
            0 => Box::default(),
            1 => zz.iter().map(|z| *z as u8).collect(),
            2 => zz.iter().flat_map(|z| (*z as u16).to_le_bytes()).collect(),
            _ => zz.iter().flat_map(|z| z.to_le_bytes()).collect(),
        };
        let blocks = values.chunks(BLOCK).map(block_summary).collect();
        Self {
            base,
            width,
            has_none: values.contains(&NONE),
            data,
            blocks,
        }
    }

    fn decode(&self, out: &mut [u32; CHUNK]) {
        out[0] = self.base;
        let mut prev = self.base;
        let mut fill = |z: &mut dyn Iterator<Item = u32>| {
            for (slot, z) in out[1..].iter_mut().zip(z) {
                prev = prev.wrapping_add(unzigzag(z) as u32);
                *slot = prev;
            }
        };
        // One loop per width, the width's test out of it.
        match self.width {
            0 => out.fill(self.base),
            1 => fill(&mut self.data.iter().map(|b| u32::from(*b))),
            2 => fill(
                &mut self
                    .data
                    .chunks_exact(2)
                    .map(|b| u32::from(u16::from_le_bytes([b[0], b[1]]))),
            ),
            _ => fill(
                &mut self
                    .data
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            ),
        }
    }

    /// The value at offset `k` when its block's summary tells it without decoding (the
    /// chunk holds no [`NONE`] and the block one value).
    fn known(&self, k: usize) -> Option<u32> {
        if self.width == 0 {
            return Some(self.base);
        }
        let (lo, hi) = *self.blocks.get(k / BLOCK)?;
        (!self.has_none && lo == hi).then_some(lo)
    }

    fn heap_bytes(&self) -> usize {
        self.data.len() + self.blocks.len() * 8
    }
}

/// One series of MiB values on the shared timeline.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Series {
    /// The tick of the first stored value (a chunk boundary: the values before the series'
    /// first reading are stored as [`NONE`]).
    first_tick: u64,
    /// The tick of the series' first reading still held ([`Series::first_tick`]).
    #[serde(skip)]
    begins: u64,
    /// Shared with copies: a copy shares every sealed chunk and the list of them, which is
    /// copied (pointers only) when a chunk is sealed or evicted while a copy holds it.
    sealed: Arc<VecDeque<Arc<Sealed>>>,
    /// Chunks in `sealed`, kept here so a push never reads through the shared list.
    sealed_count: usize,
    /// The open chunk's leading [`NONE`]s, not stored: a process that lives a few ticks holds
    /// room for those ticks, not for the chunk from its boundary.
    lead: usize,
    /// The open chunk's values after `lead`.
    open: Vec<u32>,
}

impl Series {
    /// Number of ticks stored.
    pub fn len(&self) -> usize {
        self.sealed_count * CHUNK + self.lead + self.open.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The tick of the first value pushed (of the first held, once older ones are evicted):
    /// the series holds nothing before it.
    pub(crate) fn first_tick(&self) -> u64 {
        self.begins.max(self.first_tick)
    }

    /// One past the last stored tick.
    pub fn end_tick(&self) -> u64 {
        self.first_tick + self.len() as u64
    }

    /// Stores `value` at `tick`; ticks skipped since the last push are stored as [`NONE`].
    /// A tick at or before the last one is ignored.
    pub fn push(&mut self, tick: u64, value: u32) {
        if self.is_empty() {
            // Series start on a chunk boundary of the shared timeline (padded with NONE), so
            // the summary blocks of every series line up (decimation buckets made of whole
            // blocks never need a chunk decoded) and two histories of consecutive spans join
            // chunk by chunk ([`History::join_later`]).
            self.first_tick = tick - tick % CHUNK as u64;
            self.begins = tick;
        } else if tick < self.end_tick() {
            return;
        }
        while self.end_tick() < tick {
            if self.open.is_empty() && self.lead + 1 < CHUNK {
                // An open chunk with no value yet leads with the ticks skipped (up to its
                // last), whether the series starts there or comes back after a chunk's end.
                let skipped = usize::try_from(tick - self.end_tick()).unwrap_or(usize::MAX);
                self.lead += skipped.min(CHUNK - 1 - self.lead);
            } else {
                self.push_raw(NONE);
            }
        }
        self.push_raw(value);
    }

    #[inline]
    fn push_raw(&mut self, v: u32) {
        if self.open.len() == self.open.capacity() {
            self.grow_open();
        }
        self.open.push(v);
        if self.lead + self.open.len() == CHUNK {
            self.seal_open();
        }
    }

    /// Room for twice the open chunk's values, at most the rest of the chunk: a series that
    /// lives a few ticks keeps a few values' room (once its first chunk is full, the room is
    /// kept from chunk to chunk).
    #[cold]
    #[inline(never)]
    fn grow_open(&mut self) {
        let rest = CHUNK - self.lead - self.open.len();
        self.open.reserve_exact(self.open.len().max(4).min(rest));
    }

    /// Seals the full open chunk (once every [`CHUNK`] values: kept out of the push).
    #[cold]
    #[inline(never)]
    fn seal_open(&mut self) {
        let sealed = if self.lead == 0 {
            Sealed::seal(&self.open)
        } else {
            let mut chunk = [NONE; CHUNK];
            chunk[self.lead..].copy_from_slice(&self.open);
            Sealed::seal(&chunk)
        };
        // A series with gaps gives its room back (a job that comes back later grows it
        // again as it goes); one read every tick keeps it for the next chunk.
        if sealed.has_none {
            self.open = Vec::new();
        } else {
            self.open.clear();
        }
        Arc::make_mut(&mut self.sealed).push_back(Arc::new(sealed));
        self.sealed_count += 1;
        self.lead = 0;
    }

    /// The newest value, if any.
    pub fn last(&self) -> Option<u32> {
        if let Some(v) = self.open.last() {
            return Some(*v);
        }
        let mut buf = [0u32; CHUNK];
        self.sealed.back().map(|s| {
            s.decode(&mut buf);
            buf[CHUNK - 1]
        })
    }

    /// Drops whole chunks that end before `tick`.
    fn evict_before(&mut self, tick: u64) {
        while !self.sealed.is_empty() && self.first_tick + CHUNK as u64 <= tick {
            Arc::make_mut(&mut self.sealed).pop_front();
            self.sealed_count -= 1;
            self.first_tick += CHUNK as u64;
        }
        if self.sealed.is_empty() && self.end_tick() <= tick {
            self.open = Vec::new();
            self.lead = 0;
            self.first_tick = tick;
        }
    }

    /// Every stored value from `t0` to `t1` (exclusive), [`NONE`] where absent. For tests and
    /// export; plots use [`Series::bucket_minmax`].
    pub fn values(&self, t0: u64, t1: u64) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        self.visit(t0, t1, |t, v| out.push((t, v)), |_, _, _| false);
        out
    }

    /// Calls `value(tick, v)` for each stored tick in `[t0, t1)`, except for summary blocks that
    /// `block(start, end, (min, max))` accepts (returns true for) as a whole.
    fn visit(
        &self,
        t0: u64,
        t1: u64,
        mut value: impl FnMut(u64, u32),
        mut block: impl FnMut(u64, u64, (u32, u32)) -> bool,
    ) {
        let t0 = t0.max(self.first_tick);
        let t1 = t1.min(self.end_tick());
        if t0 >= t1 {
            return;
        }
        let mut buf = [0u32; CHUNK];
        let first_chunk = ((t0 - self.first_tick) / CHUNK as u64) as usize;
        for ci in first_chunk..self.sealed.len() {
            let cstart = self.first_tick + (ci * CHUNK) as u64;
            if cstart >= t1 {
                return;
            }
            let chunk = &self.sealed[ci];
            let mut decoded = false;
            for (bi, summary) in chunk.blocks.iter().enumerate() {
                let bstart = cstart + (bi * BLOCK) as u64;
                let bend = bstart + BLOCK as u64;
                if bend <= t0 || bstart >= t1 {
                    continue;
                }
                if bstart >= t0 && bend <= t1 && block(bstart, bend, *summary) {
                    continue;
                }
                if !decoded {
                    chunk.decode(&mut buf);
                    decoded = true;
                }
                for t in bstart.max(t0)..bend.min(t1) {
                    value(t, buf[(t - cstart) as usize]);
                }
            }
        }
        let ostart = self.first_tick + (self.sealed.len() * CHUNK) as u64;
        let lead = std::iter::repeat_n(&NONE, self.lead);
        for (i, v) in lead.chain(&self.open).enumerate() {
            let t = ostart + i as u64;
            if t >= t0 && t < t1 {
                value(t, *v);
            }
        }
    }

    /// Min and max over each of `out.len()` buckets of `bucket` ticks starting at `t0`
    /// (`(NONE, 0)` for a bucket with no reading). Every peak lands in its bucket's max.
    #[cfg(any(feature = "gui", test))]
    fn bucket_minmax(&self, t0: u64, bucket: u64, out: &mut [(u32, u32)]) {
        out.fill((NONE, 0));
        let bucket = bucket.max(1);
        let t1 = t0 + bucket * out.len() as u64;
        let mut merge = |t: u64, lo: u32, hi: u32| {
            let slot = &mut out[((t - t0) / bucket) as usize];
            slot.0 = slot.0.min(lo);
            slot.1 = slot.1.max(hi);
        };
        let cell = std::cell::RefCell::new(&mut merge);
        self.visit(
            t0,
            t1,
            |t, v| {
                if v != NONE {
                    (cell.borrow_mut())(t, v, v);
                }
            },
            |bs, be, (lo, hi)| {
                // A summary block can stand for its values when it lies inside one bucket.
                if (bs - t0) / bucket != (be - 1 - t0) / bucket {
                    return false;
                }
                if lo != NONE {
                    (cell.borrow_mut())(bs, lo, hi);
                }
                true
            },
        );
    }

    /// The value at each of `ticks` (ascending), [`NONE`] where absent: the reading every
    /// series had at one instant, so stacked series add up to their total. A chunk is decoded
    /// at most once (one of constant value never).
    pub(crate) fn values_at(&self, ticks: impl Iterator<Item = u64>, out: &mut Vec<u32>) {
        let mut buf = [0u32; CHUNK];
        let mut decoded = usize::MAX;
        let end = self.end_tick();
        let ostart = self.first_tick + (self.sealed_count * CHUNK + self.lead) as u64;
        for t in ticks {
            let v = if t < self.first_tick || t >= end {
                NONE
            } else if t >= ostart {
                self.open[(t - ostart) as usize]
            } else {
                let off = (t - self.first_tick) as usize;
                let (ci, k) = (off / CHUNK, off % CHUNK);
                match self.sealed.get(ci) {
                    Some(c) if decoded != ci && c.known(k).is_some() => c.known(k).unwrap_or(NONE),
                    Some(c) => {
                        if decoded != ci {
                            c.decode(&mut buf);
                            decoded = ci;
                        }
                        buf[k]
                    }
                    None => NONE,
                }
            };
            out.push(v);
        }
    }

    fn heap_bytes(&self) -> usize {
        self.sealed
            .iter()
            .map(|s| s.heap_bytes() + std::mem::size_of::<Sealed>() + 16)
            .sum::<usize>()
            + self.open.capacity() * 4
    }
}

/// The time of each tick, in chunks of [`CHUNK`] shared with copies like a series' chunks.
#[derive(Debug, Clone, Default, serde::Serialize)]
struct Times {
    sealed: Arc<VecDeque<Arc<[UnixMs]>>>,
    open: Vec<UnixMs>,
    /// Times dropped from the front of the first sealed chunk.
    skip: usize,
}

impl Times {
    fn len(&self) -> usize {
        self.sealed.len() * CHUNK + self.open.len() - self.skip
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push_back(&mut self, ms: UnixMs) {
        if self.open.capacity() == 0 {
            self.open.reserve_exact(CHUNK);
        }
        self.open.push(ms);
        if self.open.len() == CHUNK {
            let chunk: Arc<[UnixMs]> = Arc::from(self.open.as_slice());
            Arc::make_mut(&mut self.sealed).push_back(chunk);
            self.open.clear();
        }
    }

    /// Forgets the `n` oldest times.
    fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len());
        self.skip += n;
        while self.skip >= CHUNK && !self.sealed.is_empty() {
            Arc::make_mut(&mut self.sealed).pop_front();
            self.skip -= CHUNK;
        }
        if self.sealed.is_empty() && self.skip > 0 {
            self.open.drain(..self.skip);
            self.skip = 0;
        }
    }

    fn get(&self, i: usize) -> Option<UnixMs> {
        if i >= self.len() {
            return None;
        }
        let at = i + self.skip;
        let (c, k) = (at / CHUNK, at % CHUNK);
        match self.sealed.get(c) {
            Some(chunk) => chunk.get(k).copied(),
            None => self.open.get(at - self.sealed.len() * CHUNK).copied(),
        }
    }

    fn front(&self) -> Option<UnixMs> {
        self.get(0)
    }

    fn back(&self) -> Option<UnixMs> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// The number of leading times for which `pred` holds (times only grow).
    fn partition_point(&self, pred: impl Fn(&UnixMs) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid).is_some_and(|t| pred(&t)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn heap_bytes(&self) -> usize {
        self.sealed.len() * (CHUNK * 8 + 32) + self.open.capacity() * 8
    }
}

/// Identifies a process series: one process on one GPU.
pub type ProcSeriesKey = (ProcessKey, u32);

/// The history of every device and process, bounded to `capacity` ticks.
#[derive(Debug, Clone, serde::Serialize)]
pub struct History {
    /// Which history this is: a new one (another source, a session opened, an import, an
    /// agent attached) gets a new id; its copies share it. Caches of what a history holds
    /// are keyed by it.
    id: u64,
    capacity: usize,
    base_tick: u64,
    times: Times,
    devices: Vec<Series>,
    ghosts: Vec<Series>,
    /// Per device: one series per [`Metric`], on the same ticks.
    metrics: Vec<MetricSeries>,
    #[serde(serialize_with = "crate::model::serialize_entries")]
    processes: SampleMap<ProcSeriesKey, Series>,
    /// PyTorch's allocated and reserved memory of the processes whose companion answers.
    #[serde(serialize_with = "crate::model::serialize_entries")]
    torch: SampleMap<ProcSeriesKey, [Series; 2]>,
    /// How many times old chunks were dropped (series may have gone with them).
    evictions: u64,
}

/// Which of PyTorch's figures a torch series holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TorchFigure {
    /// Memory in live tensors.
    Allocated,
    /// Memory the caching allocator holds (tensors + cache).
    Reserved,
}

/// A device reading besides memory, kept over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// GPU utilisation, percent.
    Utilization,
    /// Core temperature, °C.
    Temperature,
    /// Board power draw, W.
    Power,
    /// The enforced power limit (power cap), W.
    PowerLimit,
    /// SM clock, MHz.
    SmClock,
    /// Memory clock, MHz.
    MemClock,
    /// Fan speed, percent.
    Fan,
}

/// One series per [`Metric`] of a device, in [`Metric::ALL`] order.
type MetricSeries = [Series; Metric::COUNT];

impl Metric {
    /// How many metrics there are.
    pub(crate) const COUNT: usize = 7;

    /// Every metric, in display order (also the order of [`MetricSeries`]).
    pub const ALL: [Metric; Metric::COUNT] = [
        Metric::Utilization,
        Metric::Temperature,
        Metric::Power,
        Metric::PowerLimit,
        Metric::SmClock,
        Metric::MemClock,
        Metric::Fan,
    ];

    /// Its value in a device sample (whole units; `NONE` when not reported).
    pub fn of(self, d: &crate::model::DeviceSample) -> u32 {
        let watts = |w: Option<f64>| {
            w.filter(|w| w.is_finite() && *w >= 0.0)
                .map(|w| w.round() as u32)
        };
        let v = match self {
            Metric::Utilization => d.utilization_gpu_pct,
            Metric::Temperature => d.temperature_c,
            Metric::Power => watts(d.power_w),
            Metric::PowerLimit => watts(d.power_limit_w),
            Metric::SmClock => d.sm_clock_mhz,
            Metric::MemClock => d.mem_clock_mhz,
            Metric::Fan => d.fan_pct,
        };
        v.map_or(NONE, |v| v.min(NONE - 1))
    }

    /// Title and unit for people.
    pub fn label(self) -> (&'static str, &'static str) {
        match self {
            Metric::Utilization => ("Utilisation", "%"),
            Metric::Temperature => ("Temperature", "°C"),
            Metric::Power => ("Power", "W"),
            Metric::PowerLimit => ("Power cap", "W"),
            Metric::SmClock => ("SM clock", "MHz"),
            Metric::MemClock => ("Memory clock", "MHz"),
            Metric::Fan => ("Fan", "%"),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Names a series in a [`BucketCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeriesId {
    /// A device's used memory.
    Device(u32),
    /// A device's ghost memory.
    Ghost(u32),
    /// A process on a GPU.
    Process(ProcSeriesKey),
}

/// A decimated line, ready for a plot: `[unix seconds, MiB]` points.
#[cfg(any(feature = "gui", test))]
pub(crate) type PlotLine = Vec<[f64; 2]>;

/// For each device of `snap`, in its order, the memory it reports used that no listed process
/// accounts for ("ghost" memory: other containers, dead processes stuck in the driver,
/// contexts the driver hides); None where used memory is unknown. One pass over the
/// processes.
pub(crate) fn ghosts_of(snap: &Snapshot) -> Vec<Option<u64>> {
    let mut ghosts = vec![None; snap.devices.len()];
    ghosts_into(snap, &mut ghosts);
    ghosts
}

/// Devices a sample's per-device sums are kept on the stack for (more take the heap).
pub(crate) const DEVICES_ON_STACK: usize = 16;

/// [`ghosts_of`] computed in `room` (at least one slot per device; [`DEVICES_ON_STACK`] fit
/// a caller's array): the ghost memory per device, in the devices' order.
pub(crate) fn ghosts_into<'a>(snap: &Snapshot, room: &'a mut [Option<u64>]) -> &'a [Option<u64>] {
    let ghosts = &mut room[..snap.devices.len()];
    // The memory the processes own, summed in each slot …
    ghosts.fill(Some(0));
    for p in &snap.processes {
        let device = crate::model::device_position(&snap.devices, p.device_index);
        if let (Some(u), Some(Some(owned))) = (p.used_bytes, device.map(|i| &mut ghosts[i])) {
            *owned = owned.saturating_add(u);
        }
    }
    // … then the used memory they leave.
    for (g, d) in ghosts.iter_mut().zip(&snap.devices) {
        let owned = g.unwrap_or(0);
        *g = d.memory_used_bytes.map(|u| u.saturating_sub(owned));
    }
    ghosts
}

/// Like [`ghosts_of`], in the whole MiB a series stores: the device's used MiB less the MiB
/// stored for its processes, so that a GPU's process series and its unattributed series add
/// up to its used series exactly ([`NONE`] where used memory is unknown).
fn ghost_mibs<'a>(snap: &Snapshot, room: &'a mut [u32]) -> &'a [u32] {
    let owned = &mut room[..snap.devices.len()];
    owned.fill(0);
    for p in &snap.processes {
        let device = crate::model::device_position(&snap.devices, p.device_index);
        if let (v, Some(i)) = (to_mib(p.used_bytes), device) {
            if v != NONE {
                owned[i] = owned[i].saturating_add(v);
            }
        }
    }
    for (o, d) in owned.iter_mut().zip(&snap.devices) {
        *o = match to_mib(d.memory_used_bytes) {
            NONE => NONE,
            u => u.saturating_sub(*o),
        };
    }
    owned
}

/// Bytes to the whole MiB stored in a series ([`NONE`] for no reading).
fn to_mib(bytes: Option<u64>) -> u32 {
    bytes.map_or(NONE, |b| (b / MIB).min(u64::from(NONE - 1)) as u32)
}

impl History {
    /// A history that keeps the newest `capacity` ticks (at least one chunk).
    pub fn new(capacity: usize) -> Self {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            capacity: capacity.max(CHUNK),
            base_tick: 0,
            times: Times::default(),
            devices: Vec::new(),
            ghosts: Vec::new(),
            metrics: Vec::new(),
            processes: SampleMap::default(),
            torch: SampleMap::default(),
            evictions: 0,
        }
    }

    /// Appends one snapshot as the next tick.
    pub fn push(&mut self, snap: &Snapshot) {
        if let Some(last) = self.times.back() {
            if snap.taken_at_ms <= last {
                return;
            }
        }
        let tick = self.base_tick + self.times.len() as u64;
        self.times.push_back(snap.taken_at_ms);
        let mut stack = [0u32; DEVICES_ON_STACK];
        let mut heap = Vec::new();
        let room: &mut [u32] = if snap.devices.len() <= DEVICES_ON_STACK {
            &mut stack
        } else {
            heap.resize(snap.devices.len(), 0);
            &mut heap
        };
        for (d, &ghost) in snap.devices.iter().zip(ghost_mibs(snap, room)) {
            let i = d.index as usize;
            if self.devices.len() <= i {
                self.devices.resize_with(i + 1, Series::default);
                self.ghosts.resize_with(i + 1, Series::default);
                self.metrics.resize_with(i + 1, Default::default);
            }
            self.devices[i].push(tick, to_mib(d.memory_used_bytes));
            self.ghosts[i].push(tick, ghost);
            for m in Metric::ALL {
                self.metrics[i][m.index()].push(tick, m.of(d));
            }
        }
        for (pos, p) in snap.processes.iter().enumerate() {
            let key = (p.key(), p.device_index);
            let value = to_mib(p.used_bytes);
            self.processes
                .at_mut(pos, key, |_| Series::default())
                .push(tick, value);
            if let Some(t) = p.torch {
                let [a, r] = self.torch.get_or_insert_with(key, Default::default);
                a.push(tick, to_mib(Some(t.allocated_bytes)));
                r.push(tick, to_mib(Some(t.reserved_bytes)));
            }
        }
        if self.times.len() > self.capacity {
            let drop = self.times.len() - self.capacity;
            self.times.drop_front(drop);
            self.base_tick += drop as u64;
            if self.base_tick % CHUNK as u64 == 0 {
                self.evict();
            }
        }
    }

    fn evict(&mut self) {
        self.evictions += 1;
        let base = self.base_tick;
        for s in self
            .devices
            .iter_mut()
            .chain(self.ghosts.iter_mut())
            .chain(self.metrics.iter_mut().flatten())
        {
            s.evict_before(base);
        }
        self.processes.retain(|_, s| {
            s.evict_before(base);
            !s.is_empty()
        });
        self.torch.retain(|_, s| {
            s.iter_mut().for_each(|s| s.evict_before(base));
            !s[0].is_empty()
        });
    }

    /// Which history this is: unique to each history made, shared by its copies (which only
    /// ever see it grow). A cache of decimated lines keyed by it never mixes two sources.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// How many times old chunks were dropped: a series can disappear only when it grows.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Number of ticks held.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The most ticks kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Time of the oldest and newest tick.
    pub fn span(&self) -> Option<(UnixMs, UnixMs)> {
        Some((self.times.front()?, self.times.back()?))
    }

    /// The tick of the first sample at or after `ms`.
    pub fn tick_at(&self, ms: UnixMs) -> u64 {
        self.base_tick + self.times.partition_point(|t| *t < ms) as u64
    }

    /// One past the newest tick.
    pub fn end_tick(&self) -> u64 {
        self.base_tick + self.times.len() as u64
    }

    /// Time of `tick`, if still held.
    pub(crate) fn time_of(&self, tick: u64) -> Option<UnixMs> {
        let i = tick.checked_sub(self.base_tick)?;
        self.times.get(i as usize)
    }

    /// A metric's series of device `index`.
    pub fn metric(&self, index: u32, m: Metric) -> Option<&Series> {
        self.metrics.get(index as usize).map(|s| &s[m.index()])
    }

    /// The used-memory series of device `index`.
    pub fn device(&self, index: u32) -> Option<&Series> {
        self.devices.get(index as usize)
    }

    /// Memory of device `index` that no listed process accounts for.
    pub fn ghost(&self, index: u32) -> Option<&Series> {
        self.ghosts.get(index as usize)
    }

    /// The series of one process on one GPU.
    pub fn process(&self, key: &ProcSeriesKey) -> Option<&Series> {
        self.processes.get(key)
    }

    /// PyTorch's allocated or reserved memory of a process, where its companion answered.
    pub fn torch(&self, key: &ProcSeriesKey, figure: TorchFigure) -> Option<&Series> {
        self.torch.get(key).map(|s| match figure {
            TorchFigure::Allocated => &s[0],
            TorchFigure::Reserved => &s[1],
        })
    }

    /// Every process series key.
    pub fn process_keys(&self) -> impl Iterator<Item = &ProcSeriesKey> {
        self.processes.keys()
    }

    /// Splits `[from_ms, to_ms]` into at most `width` buckets: (first tick, ticks per bucket, count).
    pub fn buckets(&self, from_ms: UnixMs, to_ms: UnixMs, width: usize) -> (u64, u64, usize) {
        let t0 = self.tick_at(from_ms);
        let t1 = self.tick_at(to_ms.saturating_add(1)).max(t0);
        let width = width.max(1);
        let mut per = ((t1 - t0) as usize).div_ceil(width).max(1) as u64;
        let mut t0 = t0;
        if per >= BLOCK as u64 {
            // Whole, aligned blocks per bucket: read from the summaries alone.
            per = per.div_ceil(BLOCK as u64) * BLOCK as u64;
            t0 -= t0 % BLOCK as u64;
        }
        (t0, per, (t1 - t0).div_ceil(per) as usize)
    }

    /// The tick that stands for bucket `i` of `per` ticks from `t0` when series are read at
    /// one instant: its last tick, or the newest one held while it is still filling.
    #[cfg(feature = "gui")]
    pub(crate) fn bucket_instant(&self, t0: u64, per: u64, i: usize) -> u64 {
        let last = t0 + (i as u64 + 1) * per.max(1) - 1;
        last.min(self.end_tick().saturating_sub(1))
    }

    /// A min/max-decimated line of `series` over `[from_ms, to_ms]` for a plot `width` points
    /// wide: two points (min then max) per bucket, one per tick when zoomed in to single ticks.
    #[cfg(any(feature = "gui", test))]
    pub(crate) fn decimate(
        &self,
        series: &Series,
        from_ms: UnixMs,
        to_ms: UnixMs,
        width: usize,
    ) -> PlotLine {
        let (t0, per, n) = self.buckets(from_ms, to_ms, width);
        let mut mm = vec![(NONE, 0u32); n];
        series.bucket_minmax(t0, per, &mut mm);
        self.line_of(t0, per, mm.iter().enumerate())
    }

    /// Like [`History::decimate`], reusing the buckets `cache` holds for `id` from earlier
    /// frames: only the newest bucket and any new ones are recomputed.
    #[cfg(any(feature = "gui", test))]
    pub(crate) fn decimate_cached(
        &self,
        cache: &mut BucketCache,
        id: SeriesId,
        series: &Series,
        from_ms: UnixMs,
        to_ms: UnixMs,
        width: usize,
    ) -> PlotLine {
        let (t0, per, n) = self.buckets(from_ms, to_ms, width);
        let mm = cache.get(self, id, series, t0, per, n);
        self.line_of(t0, per, mm.held())
    }

    /// The points of buckets `(index, (lowest, highest))` of `per` ticks from `t0`.
    #[cfg(any(feature = "gui", test))]
    fn line_of<'a>(
        &self,
        t0: u64,
        per: u64,
        mm: impl ExactSizeIterator<Item = (usize, &'a (u32, u32))>,
    ) -> PlotLine {
        let mut out = Vec::with_capacity(mm.len() * 2);
        for (i, &(lo, hi)) in mm {
            if lo == NONE {
                continue;
            }
            let tick = t0 + i as u64 * per;
            let Some(ms) = self.time_of(tick) else {
                continue;
            };
            let x = ms as f64 / 1000.0;
            out.push([x, f64::from(lo)]);
            if hi != lo || per > 1 {
                out.push([x, f64::from(hi)]);
            }
        }
        out
    }

    /// Bytes of heap this history holds (its own accounting; the benchmark also measures it
    /// with a counting allocator).
    pub fn heap_bytes(&self) -> usize {
        self.times.heap_bytes()
            + self
                .devices
                .iter()
                .chain(self.ghosts.iter())
                .chain(self.metrics.iter().flatten())
                .map(Series::heap_bytes)
                .sum::<usize>()
            + self
                .processes
                .values()
                .map(|s| s.heap_bytes() + std::mem::size_of::<(ProcSeriesKey, Series)>())
                .sum::<usize>()
            + self
                .torch
                .values()
                .map(|[a, r]| {
                    a.heap_bytes()
                        + r.heap_bytes()
                        + std::mem::size_of::<(ProcSeriesKey, [Series; 2])>()
                })
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    /// Sample `i` of a history's tests: one 1 TiB GPU using `i + 1` MiB, with `processes`
    /// (the buckets' and the joins' tests).
    pub(super) fn one_gpu_sample(
        i: u64,
        processes: Vec<crate::model::ProcessSample>,
    ) -> crate::model::Snapshot {
        crate::model::Snapshot {
            taken_at_ms: 1_000 * i as i64,
            devices: vec![crate::model::DeviceSample {
                index: 0,
                memory_total_bytes: Some(1 << 40),
                memory_used_bytes: Some((i + 1) * crate::model::MIB),
                ..crate::model::DeviceSample::default()
            }],
            processes,
        }
    }

    use super::*;

    fn lcg(seed: &mut u64) -> u32 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) as u32
    }

    #[test]
    fn times_in_shared_chunks_read_as_a_queue_would() {
        let mut t = Times::default();
        let mut model: VecDeque<UnixMs> = VecDeque::new();
        for i in 0..(CHUNK * 4 + 77) as i64 {
            t.push_back(1000 + i * 10);
            model.push_back(1000 + i * 10);
            // Dropped from the front in uneven steps, as a full history does.
            if i % 5 == 0 && model.len() > 300 {
                let n = (i % 7 + 1) as usize;
                t.drop_front(n);
                model.drain(..n);
            }
        }
        assert_eq!(t.len(), model.len());
        for (i, ms) in model.iter().enumerate() {
            assert_eq!(t.get(i), Some(*ms), "index {i}");
        }
        assert_eq!(t.get(model.len()), None);
        assert_eq!(
            (t.front(), t.back()),
            (model.front().copied(), model.back().copied())
        );
        for ms in [0, 1000, 5005, 5010, model[200], model[200] + 1, i64::MAX] {
            assert_eq!(
                t.partition_point(|x| *x < ms),
                model.partition_point(|x| *x < ms),
                "{ms}"
            );
        }
        t.drop_front(usize::MAX);
        assert!(t.is_empty() && t.front().is_none());
    }

    #[test]
    fn a_copy_keeps_what_it_saw_while_the_original_goes_on() {
        let snap = |ms: i64, mib: u64| Snapshot {
            taken_at_ms: ms,
            devices: vec![crate::model::DeviceSample {
                index: 0,
                memory_used_bytes: Some(mib * MIB),
                ..Default::default()
            }],
            processes: Vec::new(),
        };
        let mut h = History::new(CHUNK * 2);
        for i in 0..(CHUNK * 3) as i64 {
            h.push(&snap(i * 1000, i as u64));
        }
        let copy = h.clone();
        let seen = copy.device(0).map(|s| s.values(0, u64::MAX));
        let span = copy.span();
        // The original seals, evicts and drops times past the copy's chunks.
        for i in (CHUNK * 3) as i64..(CHUNK * 6) as i64 {
            h.push(&snap(i * 1000, i as u64 + 7));
        }
        assert_eq!(copy.device(0).map(|s| s.values(0, u64::MAX)), seen);
        assert_eq!(copy.span(), span);
        assert_eq!(copy.len(), CHUNK * 2);
        assert_eq!(
            h.span(),
            Some((CHUNK as i64 * 4 * 1000, (CHUNK as i64 * 6 - 1) * 1000))
        );
        assert_eq!(
            h.device(0).and_then(Series::last),
            Some((CHUNK * 6 - 1 + 7) as u32)
        );
    }

    #[test]
    fn round_trip_of_every_width() {
        let mut seed = 7;
        let mut s = Series::default();
        let mut expect = Vec::new();
        for i in 0..(CHUNK * 5 + 17) as u64 {
            let v = match i / CHUNK as u64 {
                0 => 100,                            // constant: width 0
                1 => 1000 + (i as u32 % 7),          // small deltas: width 1
                2 => 5000 + (lcg(&mut seed) % 9000), // width 2
                3 => lcg(&mut seed),                 // width 4
                _ if i % 3 == 0 => NONE,             // gaps
                _ => 42,
            };
            s.push(i + 10, v);
            expect.push((i + 10, v));
        }
        // The series starts on a block boundary: ticks before the first push read as NONE.
        assert!(s.values(0, 10).iter().all(|(_, v)| *v == NONE));
        assert_eq!(s.values(10, u64::MAX), expect);
        assert_eq!(s.last(), expect.last().map(|e| e.1));
    }

    /// A series that starts or resumes after a gap reads as pushed, wherever in a chunk the
    /// gap ends (the open chunk's leading gap is not stored), and one that lives a few ticks
    /// holds room for those ticks only.
    #[test]
    fn series_with_gaps_read_as_pushed_and_short_ones_stay_small() {
        let mut seed = 11;
        for round in 0..200u64 {
            let mut s = Series::default();
            let mut expect = vec![NONE; 4 * CHUNK];
            let mut t = lcg(&mut seed) as u64 % (2 * CHUNK as u64);
            while t < expect.len() as u64 {
                let v = lcg(&mut seed) % 5000;
                s.push(t, v);
                expect[t as usize] = v;
                let next_chunk = t - t % CHUNK as u64 + CHUNK as u64;
                t = match lcg(&mut seed) % 8 {
                    0 => t + 1 + u64::from(lcg(&mut seed)) % (CHUNK as u64 + 40),
                    // A gap from the first tick of a chunk (after one was sealed).
                    1 if t % CHUNK as u64 == CHUNK as u64 - 1 => {
                        next_chunk + u64::from(lcg(&mut seed)) % CHUNK as u64
                    }
                    2 => (next_chunk - 1).max(t + 1),
                    _ => t + 1,
                };
            }
            let end = s.end_tick();
            let stored = s.values(0, u64::MAX);
            let pushed: Vec<_> = (s.first_tick..end)
                .map(|t| (t, expect[t as usize]))
                .collect();
            assert_eq!(stored, pushed, "round {round}");
            let mut at = Vec::new();
            s.values_at(0..expect.len() as u64, &mut at);
            let upto = (0..expect.len()).map(|t| if t < end as usize { expect[t] } else { NONE });
            assert_eq!(at, upto.collect::<Vec<_>>(), "round {round}");
        }
        let mut short = Series::default();
        for t in 200..208 {
            short.push(t, 300);
        }
        let held = short.values(0, u64::MAX);
        assert_eq!(
            held[..200],
            [(0..200).map(|t| (t, NONE)).collect::<Vec<_>>()][0][..]
        );
        assert_eq!(
            held[200..],
            (200..208).map(|t| (t, 300)).collect::<Vec<_>>()
        );
        assert!(short.heap_bytes() <= 8 * 4, "{}", short.heap_bytes());
        // Back in the next chunk: that chunk too leads with the ticks skipped, and the room
        // grown while the first one was padded to its end is given back.
        for t in 300..308 {
            short.push(t, 400);
        }
        assert_eq!((short.lead, short.open.len()), (300 - CHUNK, 8));
        assert!(short.open.capacity() <= 8, "{}", short.open.capacity());
        let back = short.values(CHUNK as u64, u64::MAX);
        assert!(back[..300 - CHUNK].iter().all(|(_, v)| *v == NONE));
        assert_eq!(
            back[300 - CHUNK..],
            (300..308).map(|t| (t, 400)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn bucket_max_keeps_every_peak() {
        let mut s = Series::default();
        let mut seed = 3;
        let n = 20_000u64;
        let mut raw = Vec::new();
        for t in 0..n {
            let spike = if lcg(&mut seed) % 97 == 0 { 50_000 } else { 0 };
            let v = 1000 + (t as u32 % 300) + spike;
            s.push(t, v);
            raw.push(v);
        }
        for per in [1u64, 7, 16, 33, 256, 1000] {
            let buckets = n.div_ceil(per) as usize;
            let mut mm = vec![(0, 0); buckets];
            s.bucket_minmax(0, per, &mut mm);
            for (b, (lo, hi)) in mm.iter().enumerate() {
                let slice = &raw[b * per as usize..((b + 1) * per as usize).min(raw.len())];
                assert_eq!(
                    *hi,
                    *slice.iter().max().expect("non-empty"),
                    "max, per={per} b={b}"
                );
                assert_eq!(
                    *lo,
                    *slice.iter().min().expect("non-empty"),
                    "min, per={per} b={b}"
                );
            }
        }
    }

    #[test]
    fn cached_buckets_equal_fresh_ones_as_data_arrives() {
        let mut h = History::new(100_000);
        let mut sim = crate::source::sim::SimSource::demo(0);
        use crate::source::GpuSource;
        let mut cache = BucketCache::default();
        for i in 0..20_000i64 {
            h.push(&sim.sample(i * 1000).expect("sim"));
            if i % 997 == 0 || i == 19_999 {
                let dev = h.device(0).expect("dev");
                let fresh = h.decimate(dev, 0, i * 1000, 300);
                let cached =
                    h.decimate_cached(&mut cache, SeriesId::Device(0), dev, 0, i * 1000, 300);
                assert_eq!(fresh, cached, "at tick {i}");
            }
        }
    }

    /// The value at chosen ticks (sealed chunks constant, varying, with gaps; the open
    /// chunk; before and after the series) is the value stored there.
    #[test]
    fn values_at_ticks_are_the_stored_values() {
        let mut seed = 7u64;
        let mut s = Series::default();
        for t in 40..3000u64 {
            let v = match t {
                40..=600 => 5,
                700..=760 => continue,
                _ if t % 97 < 30 => 9,
                _ => lcg(&mut seed) % 1000,
            };
            s.push(t, v);
        }
        let ticks: Vec<u64> = (0..3100).step_by(7).collect();
        let mut got = Vec::new();
        s.values_at(ticks.iter().copied(), &mut got);
        for (t, v) in ticks.iter().zip(got) {
            let want = s.values(*t, t + 1).first().map_or(NONE, |(_, v)| *v);
            assert_eq!(v, want, "tick {t}");
        }
    }

    #[test]
    fn retention_is_bounded_and_keeps_the_newest() {
        let mut h = History::new(1000);
        let mut sim = crate::source::sim::SimSource::demo(0);
        use crate::source::GpuSource;
        for i in 0..5000 {
            let snap = sim.sample(i * 1000).expect("sim");
            h.push(&snap);
        }
        assert_eq!(h.len(), 1000);
        assert_eq!(h.span(), Some((4_000_000, 4_999_000)));
        let dev = h.device(0).expect("device 0");
        // Whole chunks older than the window are dropped; at most one chunk of slack remains.
        assert!(
            dev.len() <= 1000 + CHUNK,
            "device series holds {}",
            dev.len()
        );
        assert_eq!(dev.end_tick(), h.end_tick());
        // Processes that exited before the window are gone (the periodic job restarts every 600 s).
        for (key, s) in h.processes.iter() {
            assert!(
                s.end_tick() + CHUNK as u64 > h.end_tick() - 1000,
                "stale series {key:?}"
            );
        }
    }

    #[test]
    fn decimation_is_bounded_by_width() {
        let mut h = History::new(100_000);
        let mut sim = crate::source::sim::SimSource::demo(0);
        use crate::source::GpuSource;
        for i in 0..50_000 {
            h.push(&sim.sample(i * 1000).expect("sim"));
        }
        let line = h.decimate(h.device(0).expect("dev"), 0, 50_000_000, 500);
        assert!(line.len() <= 1000, "{} points", line.len());
        // Buckets are whole 16-tick blocks: 50 000 ticks / 500 px → 112 ticks a bucket.
        assert!(line.len() >= 2 * (50_000 / 112), "{} points", line.len());
        let zoomed = h.decimate(h.device(0).expect("dev"), 10_000_000, 10_099_000, 500);
        assert_eq!(zoomed.len(), 100);
    }
}
