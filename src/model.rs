//! Plain data that flows from a [`crate::source::GpuSource`] to the engine and the UI.
//!
//! Every reading the driver may refuse is an `Option`: `None` means "not reported", never zero.

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch.
pub type UnixMs = i64;

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
}

/// The identity of a process: a PID that is reused later belongs to a new key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProcessKey {
    /// Operating-system process id.
    pub pid: u32,
    /// Start time in ms since the epoch (0 where unknown).
    pub start_time_ms: UnixMs,
}

impl ProcessSample {
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

/// Bytes in one MiB.
pub const MIB: u64 = 1 << 20;
/// Bytes in one GiB.
pub const GIB: u64 = 1 << 30;
