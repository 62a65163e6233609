//! Plain data that flows from a [`crate::source::GpuSource`] to the engine and the UI.
//!
//! Every reading the driver may refuse is an `Option`: `None` means "not reported", never zero.

pub mod format;
pub mod history;
pub mod outcome;
pub mod palette;
pub mod reply;
pub(crate) mod sample_map;

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch.
pub type UnixMs = i64;

/// Wall-clock time in ms since the epoch.
pub fn now_ms() -> UnixMs {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Serializes a map as a list of `[key, value]` pairs (the View's maps are keyed by process
/// and GPU, which a JSON object's keys cannot be).
///
/// # Errors
/// The serializer's.
pub(crate) fn serialize_entries<'a, K, V, M, S>(map: &'a M, s: S) -> Result<S::Ok, S::Error>
where
    &'a M: IntoIterator<Item = (&'a K, &'a V)>,
    K: Serialize + 'a,
    V: Serialize + 'a,
    S: serde::Serializer,
{
    s.collect_seq(map)
}

/// The hash map of the engine's per-process tables (history series, table rows), touched
/// once per process on every tick: foldhash instead of SipHash (a fifth of the cost), still
/// seeded at random per map, so keys read from a crafted session file cannot be aimed at it.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// The set beside [`FastMap`], for the engine's per-tick sets of processes and GPUs.
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// One reading of every GPU and every process on them, taken at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When the sample was taken.
    pub taken_at_ms: UnixMs,
    /// One entry per GPU, in index order.
    pub devices: Vec<DeviceSample>,
    /// Every process that holds memory on any GPU (one entry per process and GPU).
    pub processes: Vec<ProcessSample>,
}

/// One GPU at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceSample {
    /// NVML index of the device.
    pub index: u32,
    /// Stable identifier (`GPU-…`).
    pub uuid: String,
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// PCI bus id, e.g. "00000000:17:00.0".
    pub pci_bus_id: Option<String>,
    /// Installed frame-buffer memory.
    pub memory_total_bytes: Option<u64>,
    /// Memory allocated by contexts.
    pub memory_used_bytes: Option<u64>,
    /// Memory the driver reserves for itself.
    pub memory_reserved_bytes: Option<u64>,
    /// Memory nobody holds.
    pub memory_free_bytes: Option<u64>,
    /// Percent of time a kernel ran over the last sample period.
    pub utilization_gpu_pct: Option<u32>,
    /// Core temperature.
    pub temperature_c: Option<u32>,
    /// Board power draw.
    pub power_w: Option<f64>,
    /// The power limit the driver enforces (the power cap), W.
    #[serde(default)]
    pub power_limit_w: Option<f64>,
    /// SM clock, MHz.
    #[serde(default)]
    pub sm_clock_mhz: Option<u32>,
    /// Memory clock, MHz.
    #[serde(default)]
    pub mem_clock_mhz: Option<u32>,
    /// Fan speed, percent of its maximum (None: the board has no fan, as on an SXM module).
    #[serde(default)]
    pub fan_pct: Option<u32>,
    /// Set when the driver failed to list this GPU's processes this time (the reason): the
    /// snapshot then holds no fresh processes for it, and the engine carries the last good
    /// list forward, marked stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_list_error: Option<String>,
    /// The OOM forecast, its likely figure: seconds until this GPU is full at the rate its
    /// leaks and its steadily growing processes grow now (a load or a warm-up that slows and
    /// stops counts only at the pace it still has), from the engine's leak detector. `None`
    /// (JSON `null`) when nothing grows, or when the figure comes from a source (not the
    /// engine).
    #[serde(default, rename = "time_to_full_seconds")]
    pub time_to_full_s: Option<f64>,
    /// The OOM forecast, its earliest figure: seconds until full if everything growing on this
    /// GPU now (loads and warm-ups included) kept its current pace; at most
    /// [`DeviceSample::time_to_full_s`]. `None` when nothing grows (and in logs and agents
    /// from before leaks v4).
    #[serde(default, rename = "time_to_full_earliest_seconds")]
    pub time_to_full_earliest_s: Option<f64>,
}

/// Whether a process holds a compute (CUDA) or graphics context.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextKind {
    /// A CUDA / compute context.
    #[default]
    Compute,
    /// An OpenGL / Vulkan context.
    Graphics,
    /// Both kinds of context.
    Both,
}

/// One process on one GPU at one moment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSample {
    /// Operating-system process id.
    pub pid: u32,
    /// Index of the GPU it holds memory on.
    pub device_index: u32,
    /// GPU memory held (None where the driver cannot tell, e.g. under WDDM).
    pub used_bytes: Option<u64>,
    /// Compute, graphics or both.
    pub kind: ContextKind,
    /// The process's SM utilisation over the last interval (None where the driver cannot tell).
    #[serde(default)]
    pub sm_util_pct: Option<u32>,
    /// What `/proc` (or the simulator) says about the process (shared: cheap to clone).
    pub info: Option<std::sync::Arc<ProcInfo>>,
    /// Where this process lives; only [`Origin::Live`] processes can ever be acted on.
    #[serde(default)]
    pub origin: Origin,
    /// True when the driver failed to list this GPU's processes this tick and the entry is
    /// the last good reading carried forward (its memory is not a new measurement).
    #[serde(default)]
    pub stale: bool,
    /// Host CPU use over the last interval, percent of one core (the process's CPU-time
    /// clock, or `/proc/PID/stat`; live processes only).
    #[serde(default, serialize_with = "tenths")]
    pub cpu_pct: Option<f32>,
    /// Host memory (resident set, VmRSS), bytes (live processes only).
    #[serde(default)]
    pub rss_bytes: Option<u64>,
    /// PyTorch's own figures for this process on this GPU, where its companion answers.
    #[serde(default)]
    pub torch: Option<TorchMem>,
    /// Set while the process is parked (its GPU memory moved to host memory through the
    /// driver's checkpoint API) or being parked or resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked: Option<ParkInfo>,
}

/// Where a park stands, as the driver's checkpoint API and vramwarden see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParkState {
    /// Being parked (locked, its memory on its way to host memory).
    Parking,
    /// Parked: its GPU memory is in host memory; it waits, its CUDA calls blocked.
    Parked,
    /// Being resumed (its memory on its way back).
    Resuming,
    /// Locked by the driver's checkpoint API, its memory still on the GPU.
    Locked,
    /// A checkpoint or restore failed: the driver holds it in its failed state.
    Failed,
}

impl ParkState {
    /// One word for tables, logs and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Parking => "parking",
            Self::Parked => "parked",
            Self::Resuming => "resuming",
            Self::Locked => "locked",
            Self::Failed => "park failed",
        }
    }
}

/// A parked process's facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParkInfo {
    /// Where it stands.
    pub state: ParkState,
    /// The GPU memory moved to host memory (the driver's figure before the park), if known.
    pub bytes: Option<u64>,
    /// Since when (the park's start).
    pub since_ms: UnixMs,
}

/// What PyTorch's caching allocator says about a process on one GPU (from its companion).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TorchMem {
    /// Bytes in live tensors.
    pub allocated_bytes: u64,
    /// Bytes the allocator holds from the driver (allocated + cache).
    pub reserved_bytes: u64,
    /// Free bytes inside split blocks, which `empty_cache()` cannot give back (fragmentation).
    #[serde(default)]
    pub inactive_split_bytes: u64,
    /// Allocations that failed, flushed the cache and were retried (a sign of fragmentation).
    #[serde(default)]
    pub alloc_retries: u64,
    /// Out-of-memory errors PyTorch raised in this process.
    #[serde(default)]
    pub ooms: u64,
    /// The per-process memory fraction, when one is set (0 … 1).
    #[serde(default)]
    pub memory_fraction: Option<f64>,
    /// Whether `expandable_segments` is on (None: not configured).
    #[serde(default)]
    pub expandable_segments: Option<bool>,
}

impl TorchMem {
    /// The cache `empty_cache()` could give back: reserved − allocated.
    pub(crate) fn releasable_bytes(&self) -> u64 {
        self.reserved_bytes.saturating_sub(self.allocated_bytes)
    }
}

/// Where a process in a snapshot lives. Actions (signals, commands) reach only
/// [`Origin::Live`] processes; the default is the safe one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Read back from a session log or an import: the PID may belong to anyone today.
    #[default]
    Recorded,
    /// A process on this host, listed by the driver now (or a real process placed on a
    /// simulated GPU by a test harness: its facts come from `/proc`).
    Live,
    /// Scripted by the simulated GPUs: no host process stands behind the PID.
    Simulated,
}

/// Facts about a process that do not come from the GPU driver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcInfo {
    /// Short name (`comm`).
    pub name: String,
    /// Full command line, arguments joined by spaces.
    pub cmdline: String,
    /// Owner's user name (or numeric uid when it has no name).
    pub user: String,
    /// Owner's numeric uid.
    pub uid: u32,
    /// Start time, milliseconds since the epoch: with the pid, the process identity.
    pub start_time_ms: UnixMs,
    /// Container id from the cgroup path, where the process runs in one.
    pub container_id: Option<String>,
    /// The container's name (Kubernetes container or Docker name), where it could be
    /// resolved (see [`crate::host::container`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_name: Option<String>,
    /// Its Kubernetes pod as `namespace/pod`, where it runs in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
}

/// Longest short text of a process (name, user, container, pod) kept where a text came from
/// outside (an agent's answer, an import, a session's definitions), bytes.
pub(crate) const MAX_PROC_TEXT: usize = 1024;
/// Longest command line kept there, bytes.
pub(crate) const MAX_PROC_CMDLINE: usize = 64 * 1024;

/// Cuts `s` to at most `max` bytes, at a character boundary, marking the cut with `…`.
pub(crate) fn cut_text(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push('…');
}

impl ProcInfo {
    /// Cuts its texts to [`MAX_PROC_TEXT`] and its command line to [`MAX_PROC_CMDLINE`].
    pub(crate) fn cut_texts(&mut self) {
        cut_text(&mut self.name, MAX_PROC_TEXT);
        cut_text(&mut self.user, MAX_PROC_TEXT);
        cut_text(&mut self.cmdline, MAX_PROC_CMDLINE);
        for t in [
            &mut self.container_id,
            &mut self.container_name,
            &mut self.pod,
        ]
        .into_iter()
        .flatten()
        {
            cut_text(t, MAX_PROC_TEXT);
        }
    }

    /// What to call its container: the name, else the first 12 digits of the id.
    pub fn container_label(&self) -> Option<String> {
        self.container_name.clone().or_else(|| {
            self.container_id
                .as_ref()
                .map(|id| id.chars().take(12).collect())
        })
    }
}

/// The identity of a process: a PID that is reused later belongs to a new key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProcessKey {
    /// Operating-system process id.
    pub pid: u32,
    /// Start time in ms since the epoch (0 where unknown).
    pub start_time_ms: UnixMs,
}

/// The position in `devices` (a snapshot's) of the device with NVML index `index`: devices
/// are in index order and usually numbered from 0, so found by position, else by search.
pub(crate) fn device_position(devices: &[DeviceSample], index: u32) -> Option<usize> {
    let i = index as usize;
    match devices.get(i) {
        Some(d) if d.index == index => Some(i),
        _ => devices.iter().position(|d| d.index == index),
    }
}

/// Processes [`Snapshot::sanitize`] checks for repeats pair by pair (more: through a set).
const PAIRWISE_MAX: usize = 32;

impl Snapshot {
    /// Drops what no driver can mean: memory readings that do not add up (used or free above
    /// total, a total of 0) become missing, processes with PID 0 are dropped, and a process
    /// listed twice on one GPU is kept once (its larger reading). Never panics.
    pub fn sanitize(&mut self) {
        for d in &mut self.devices {
            sanitize_device(d);
        }
        if self.processes.iter().any(|p| p.pid == 0) {
            self.processes.retain(|p| p.pid != 0);
        }
        let devices = &self.devices;
        for p in &mut self.processes {
            let total = device_position(devices, p.device_index)
                .and_then(|d| devices[d].memory_total_bytes);
            if let (Some(u), Some(t)) = (p.used_bytes, total) {
                if u > t {
                    p.used_bytes = None;
                }
            }
        }
        self.keep_each_process_once();
    }

    /// Listed twice on one GPU: kept once. Checked on every sample, so the common cases
    /// cost one pass: processes in (pid, GPU) or (GPU, pid) order with no repeat (the
    /// simulator, a replay of it); else one small set, and nothing moves unless a repeat is
    /// found.
    fn keep_each_process_once(&mut self) {
        if increasing(&self.processes, |p| (p.pid, p.device_index))
            || increasing(&self.processes, |p| (p.device_index, p.pid))
        {
            return;
        }
        // A short list in another order (the demo's) is checked pair by pair, with no set.
        let n = self.processes.len();
        if n <= PAIRWISE_MAX {
            let same = |a: &ProcessSample, b: &ProcessSample| {
                (a.pid, a.device_index) == (b.pid, b.device_index)
            };
            let p = &self.processes;
            if !(1..n).any(|j| p[..j].iter().any(|a| same(a, &p[j]))) {
                return;
            }
        }
        let mut first: FastMap<(u32, u32), usize> = FastMap::default();
        first.reserve(self.processes.len());
        let mut duplicate = false;
        for (i, p) in self.processes.iter().enumerate() {
            if first.insert((p.pid, p.device_index), i).is_some() {
                duplicate = true;
                break;
            }
        }
        if !duplicate {
            return;
        }
        first.clear();
        let mut kept: Vec<ProcessSample> = Vec::with_capacity(self.processes.len());
        for p in std::mem::take(&mut self.processes) {
            match first.get(&(p.pid, p.device_index)) {
                Some(&j) => kept[j].used_bytes = kept[j].used_bytes.max(p.used_bytes),
                None => {
                    first.insert((p.pid, p.device_index), kept.len());
                    kept.push(p);
                }
            }
        }
        self.processes = kept;
    }
}

/// True when `key` strictly increases along `processes` (none is listed twice).
#[inline]
fn increasing(processes: &[ProcessSample], key: impl Fn(&ProcessSample) -> (u32, u32)) -> bool {
    processes.windows(2).all(|w| key(&w[0]) < key(&w[1]))
}

/// A device's readings that cannot be: memory figures that do not add up become missing, as
/// do a utilisation above 100 % and a power that is not a positive number.
fn sanitize_device(d: &mut DeviceSample) {
    let total = d.memory_total_bytes.filter(|t| *t > 0);
    let fits = |v: Option<u64>| match (v, total) {
        (Some(v), Some(t)) => v <= t,
        (_, None) => false,
        (None, _) => true,
    };
    if total.is_none()
        || !fits(d.memory_used_bytes)
        || !fits(d.memory_free_bytes)
        || !fits(d.memory_reserved_bytes)
    {
        d.memory_total_bytes = total;
        d.memory_used_bytes = None;
        d.memory_free_bytes = None;
        d.memory_reserved_bytes = None;
    }
    d.utilization_gpu_pct = d.utilization_gpu_pct.filter(|u| *u <= 100);
    d.power_w = d.power_w.filter(|p| p.is_finite() && *p >= 0.0);
}

impl ProcessSample {
    /// A process as a recorded file or an imported log tells it: its memory and facts, no
    /// live reading (CPU, host memory, PyTorch, park), never acted on ([`Origin::Recorded`]).
    pub fn recorded(
        pid: u32,
        device_index: u32,
        used_bytes: Option<u64>,
        info: Option<std::sync::Arc<ProcInfo>>,
    ) -> Self {
        Self {
            pid,
            device_index,
            used_bytes,
            kind: ContextKind::Compute,
            sm_util_pct: None,
            info,
            origin: Origin::Recorded,
            stale: false,
            cpu_pct: None,
            rss_bytes: None,
            torch: None,
            parked: None,
        }
    }

    /// The identity of this process (pid + start time).
    pub fn key(&self) -> ProcessKey {
        ProcessKey {
            pid: self.pid,
            start_time_ms: self.info.as_ref().map_or(0, |i| i.start_time_ms),
        }
    }
}

/// What the source knows about the driver and itself; fixed for a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceInfo {
    /// "NVML" or "Simulated".
    pub kind: String,
    /// Driver version string.
    pub driver_version: Option<String>,
    /// NVML library version string.
    pub nvml_version: Option<String>,
    /// CUDA driver API version, e.g. "12.8".
    pub cuda_version: Option<String>,
    /// Host name.
    pub host: String,
}

impl SourceInfo {
    /// The simulated GPUs' [`SourceInfo::kind`] (`--demo`).
    pub const SIMULATED: &'static str = "Simulated";

    /// Whether it is the simulated GPUs (a demo, here or on an agent).
    pub(crate) fn is_simulated(&self) -> bool {
        self.kind == Self::SIMULATED
    }
}

/// Bytes in one MiB.
pub const MIB: u64 = 1 << 20;
/// Bytes in one GiB.
pub const GIB: u64 = 1 << 30;
/// Largest memory amount (MiB) a setting may name: 16 PiB, far above any GPU, low enough that
/// byte counts derived from it (× 2^20) fit in 64 bits.
pub const MAX_MIB: f64 = 16.0 * 1024.0 * 1024.0 * 1024.0;

/// A percentage to a tenth, as f64: an `f32` widened in a JSON value reads 97.69999694824219.
fn tenths<S: serde::Serializer>(v: &Option<f32>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) => s.serialize_some(&((f64::from(*x) * 10.0).round() / 10.0)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_cpu_share_goes_into_json_to_a_tenth_without_float_noise() {
        let p = ProcessSample {
            cpu_pct: Some(97.7),
            ..ProcessSample::default()
        };
        let v = serde_json::json!({ "p": p });
        assert_eq!(v["p"]["cpu_pct"].to_string(), "97.7");
        let back: ProcessSample = serde_json::from_value(v["p"].clone()).expect("reads back");
        assert_eq!(back.cpu_pct, Some(97.7));
        let none = serde_json::to_value(ProcessSample::default()).expect("json");
        assert!(none["cpu_pct"].is_null());
    }

    fn proc(pid: u32, device_index: u32, mib: u64) -> ProcessSample {
        ProcessSample {
            pid,
            device_index,
            used_bytes: Some(mib * MIB),
            ..ProcessSample::default()
        }
    }

    fn gpus() -> Vec<DeviceSample> {
        (0..2)
            .map(|index| DeviceSample {
                index,
                memory_total_bytes: Some(1 << 40),
                ..DeviceSample::default()
            })
            .collect()
    }

    /// A short list in neither order is kept as it is with no repeat, and a repeat in one
    /// (checked pair by pair) or in a long list (through the set) is kept once, its larger
    /// reading, in the place of its first listing.
    #[test]
    fn repeats_are_kept_once_in_short_unordered_lists_and_long_ones() {
        let listed = vec![proc(9, 0, 1), proc(3, 1, 2), proc(5, 0, 3), proc(9, 1, 4)];
        let mut snap = Snapshot {
            taken_at_ms: 1,
            devices: gpus(),
            processes: listed.clone(),
        };
        snap.sanitize();
        assert_eq!(snap.processes, listed);
        for n in [4, 2 * PAIRWISE_MAX] {
            let mut processes: Vec<ProcessSample> =
                (0..n as u32).map(|i| proc(1000 - i, i % 2, 1)).collect();
            processes.push(proc(1000 - 2, 0, 7));
            processes.push(proc(1000 - 2, 1, 1));
            let mut snap = Snapshot {
                taken_at_ms: 1,
                devices: gpus(),
                processes,
            };
            snap.sanitize();
            assert_eq!(snap.processes.len(), n + 1, "{n} listed");
            assert_eq!(snap.processes[2], proc(1000 - 2, 0, 7), "{n} listed");
        }
    }
}
