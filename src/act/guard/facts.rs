//! What the guard is told each tick: per GPU its memory, how fast it fills and what runs on
//! it. Built by the engine from its sample and its detectors; plain data, so the guard's
//! decisions are pure and a recorded session can be played through them (`guard what-if`).

use crate::model::history::ProcSeriesKey;
use crate::model::ParkInfo;

/// One GPU at one tick.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuFacts {
    /// The GPU.
    pub index: u32,
    /// Its memory.
    pub total_bytes: u64,
    /// Free memory (the driver's figure).
    pub free_bytes: u64,
    /// Its free memory was read this tick: the guard plans nothing on a GPU whose free
    /// memory is unknown (a failed reading is never taken as a full GPU), and keeps what it
    /// knew of it for the next reading.
    pub memory_read: bool,
    /// How fast it fills: the summed rate of everything growing on it (bytes/s, the
    /// forecast's), 0 when nothing grows.
    pub growth_bytes_s: f64,
    /// A forecast alert is raised on it.
    pub alert: bool,
    /// The processes on it, parked ones included.
    pub procs: Vec<ProcFacts>,
}

/// One process on a GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcFacts {
    /// pid + start time, and the GPU.
    pub key: ProcSeriesKey,
    /// "python (PID 42)" (shared: the engine makes it once per process and name).
    pub who: std::sync::Arc<str>,
    /// GPU memory it holds.
    pub bytes: u64,
    /// How fast it grows (bytes/s; 0 when it does not).
    pub growth_bytes_s: f64,
    /// Seconds it has been GPU-idle (None: unknown or busy).
    pub idle_s: Option<f64>,
    /// PyTorch cache its companion says can be released.
    pub releasable_bytes: u64,
    /// Seconds since it was flagged as leaking.
    pub leaking_s: Option<f64>,
    /// Its park state, if it is in the park book.
    pub parked: Option<ParkInfo>,
    /// Why it may not be parked (several GPUs, NCCL, host memory short, protected…), said
    /// ahead so the guard's view tells it before it matters.
    pub unparkable: Option<std::sync::Arc<str>>,
}

impl GpuFacts {
    /// The process `key` on this GPU.
    pub(crate) fn proc(&self, key: &ProcSeriesKey) -> Option<&ProcFacts> {
        self.procs.iter().find(|p| p.key == *key)
    }

    /// The processes on this GPU other than `key` that run (not parked) and hold at least
    /// `min_bytes` (at least 1 byte).
    pub(crate) fn running_others<'a>(
        &'a self,
        key: &'a ProcSeriesKey,
        min_bytes: u64,
    ) -> impl Iterator<Item = &'a ProcFacts> + 'a {
        self.procs
            .iter()
            .filter(move |p| p.key != *key && p.parked.is_none() && p.bytes >= min_bytes.max(1))
    }

    /// Seconds until full at the current rate (None: nothing grows).
    pub(crate) fn full_in_s(&self, extra_free: f64) -> Option<f64> {
        (self.growth_bytes_s > 0.0)
            .then(|| ((self.free_bytes as f64 + extra_free) / self.growth_bytes_s).max(0.0))
    }
}
