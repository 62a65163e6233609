//! The companion's replies (newline-delimited JSON; see `packaging/python/vramwarden_torch`).

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;

/// The answer to `{"cmd":"hello"}`: who the companion says it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Protocol version of the companion.
    pub protocol: u32,
    /// The companion's own version.
    #[serde(default)]
    pub companion_version: String,
    /// Its process id (as it sees it).
    pub pid: u32,
    /// Its effective uid.
    pub uid: u32,
    /// Field 22 of `/proc/self/stat` (clock ticks after boot).
    pub start_ticks: u64,
    /// Start time in ms since the epoch, computed as [`crate::host::procinfo`] does.
    pub start_time_ms: Option<UnixMs>,
    /// e.g. "3.11.7".
    pub python_version: String,
    /// `sys.executable`.
    #[serde(default)]
    pub executable: Option<String>,
    /// Whether the process has imported torch.
    pub torch_imported: bool,
    /// `torch.__version__`.
    pub torch_version: Option<String>,
    /// `torch.version.cuda`.
    pub cuda_version: Option<String>,
}

impl Hello {
    /// What is known of a companion before its hello: the kernel's pid and uid.
    pub(crate) fn unknown(pid: u32, uid: u32) -> Self {
        Self {
            protocol: 0,
            companion_version: String::new(),
            pid,
            uid,
            start_ticks: 0,
            start_time_ms: None,
            python_version: String::new(),
            executable: None,
            torch_imported: false,
            torch_version: None,
            cuda_version: None,
        }
    }
}

/// One device's allocator figures (`torch.cuda.memory_stats(dev)`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceStats {
    /// CUDA device index (as torch numbers them).
    pub device: u32,
    /// Bytes in live tensors (`allocated_bytes.all.current`).
    pub allocated_bytes: u64,
    /// Bytes the caching allocator holds from the driver (`reserved_bytes.all.current`).
    pub reserved_bytes: u64,
    /// Bytes in active blocks (`active_bytes.all.current`).
    pub active_bytes: u64,
    /// Free bytes in split blocks that cannot be released (`inactive_split_bytes.all.current`).
    pub inactive_split_bytes: u64,
    /// Peak of allocated.
    pub peak_allocated_bytes: u64,
    /// Peak of reserved.
    pub peak_reserved_bytes: u64,
    /// Times an allocation failed, the cache was flushed and it was retried.
    pub num_alloc_retries: u64,
    /// Out-of-memory errors raised.
    pub num_ooms: u64,
    /// The per-process memory fraction, when one is set.
    pub memory_fraction: Option<f64>,
    /// The device's UUID as NVML spells it (`GPU-…`): maps torch's index (renumbered by
    /// `CUDA_VISIBLE_DEVICES`) to NVML's. None when torch does not say.
    #[serde(default)]
    pub uuid: Option<String>,
}

impl DeviceStats {
    /// The cache `empty_cache()` could give back at most: reserved − allocated.
    pub(crate) fn releasable_bytes(&self) -> u64 {
        self.reserved_bytes.saturating_sub(self.allocated_bytes)
    }
}

/// The answer to `{"cmd":"stats"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// `torch.cuda.is_initialized()`.
    #[serde(default)]
    pub cuda_initialized: bool,
    /// `PYTORCH_CUDA_ALLOC_CONF` as set in the process.
    pub alloc_conf: Option<String>,
    /// Whether the alloc conf turns expandable segments on (None: no conf).
    pub expandable_segments: Option<bool>,
    /// Devices the allocator uses (never one it has not touched).
    pub devices: Vec<DeviceStats>,
}

/// One device in the answer to `{"cmd":"release_cache"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceRelease {
    /// CUDA device index.
    pub device: u32,
    /// Reserved bytes before `empty_cache()`.
    pub reserved_before_bytes: u64,
    /// Reserved bytes after.
    pub reserved_after_bytes: u64,
    /// Allocated bytes after.
    pub allocated_bytes: u64,
    /// Allocated bytes right before (older companions do not say).
    #[serde(default)]
    pub allocated_before_bytes: Option<u64>,
    /// The driver's free memory on the device right before `empty_cache()` (cudaMemGetInfo,
    /// the figure NVML reports too).
    #[serde(default)]
    pub device_free_before_bytes: Option<u64>,
    /// The driver's free memory right after.
    #[serde(default)]
    pub device_free_after_bytes: Option<u64>,
}

impl DeviceRelease {
    /// What the allocator gave back.
    pub(crate) fn freed_bytes(&self) -> u64 {
        self.reserved_before_bytes
            .saturating_sub(self.reserved_after_bytes)
    }

    /// What the driver saw come free on the device during the call (other processes'
    /// changes in that instant included), when the companion measured it.
    pub(crate) fn driver_freed_bytes(&self) -> Option<u64> {
        Some(
            self.device_free_after_bytes?
                .saturating_sub(self.device_free_before_bytes?),
        )
    }

    /// The share of the releasable cache (reserved − allocated, right before) that was
    /// released, 0–1.
    pub(crate) fn released_share(&self) -> Option<f64> {
        let releasable = self
            .reserved_before_bytes
            .saturating_sub(self.allocated_before_bytes?);
        (releasable > 0).then(|| self.freed_bytes() as f64 / releasable as f64)
    }
}

/// The answer to `{"cmd":"release_cache"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Release {
    /// One entry per device the allocator uses.
    pub devices: Vec<DeviceRelease>,
}

/// The answer to `{"cmd":"summary"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// `torch.cuda.memory_summary()` of each device in use.
    pub text: String,
}

/// The answer to `{"cmd":"set_fraction"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FractionSet {
    /// CUDA device index.
    pub device: u32,
    /// The fraction now in force.
    pub fraction: f64,
}

/// One allocator segment (`torch.cuda.memory._snapshot()`, without stack traces).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    /// Device address.
    pub address: Option<u64>,
    /// Size of the segment.
    #[serde(default)]
    pub total_size: u64,
    /// Bytes allocated in it.
    #[serde(default)]
    pub allocated_size: u64,
    /// Bytes active in it.
    #[serde(default)]
    pub active_size: u64,
    /// CUDA device index.
    pub device: Option<u32>,
    /// CUDA stream.
    pub stream: Option<u64>,
    /// "large" or "small".
    pub segment_type: Option<String>,
}

/// The answer to `{"cmd":"segments"}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Segments {
    /// The segments (at most the companion's cap).
    pub segments: Vec<Segment>,
    /// How many there were.
    #[serde(default)]
    pub total_segments: u64,
    /// Whether the list was cut at the cap.
    #[serde(default)]
    pub truncated: bool,
}

/// Everything the app knows about one process through its companion: plain data to attach to
/// a process sample, to print (`vramwarden torch ls --format json`) and to record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TorchFacts {
    /// Process id (peer-checked).
    pub pid: u32,
    /// Start time in ms since the epoch (as [`crate::host::procinfo`] reads it).
    pub start_time_ms: Option<UnixMs>,
    /// Python version.
    pub python_version: String,
    /// Companion version.
    pub companion_version: String,
    /// Whether the process has imported torch.
    pub torch_imported: bool,
    /// `torch.__version__`.
    pub torch_version: Option<String>,
    /// `torch.version.cuda`.
    pub cuda_version: Option<String>,
    /// `PYTORCH_CUDA_ALLOC_CONF`.
    pub alloc_conf: Option<String>,
    /// Expandable segments on (None: no conf).
    pub expandable_segments: Option<bool>,
    /// Per device the allocator uses.
    pub devices: Vec<DeviceStats>,
    /// Why there are no figures (e.g. "torch not imported").
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_release_as_the_companion_writes_them() {
        let s: Stats = serde_json::from_str(
            r#"{"ok":true,"torch_imported":true,"cuda_initialized":true,
            "alloc_conf":"expandable_segments:True","expandable_segments":true,
            "devices":[{"device":1,"allocated_bytes":100,"reserved_bytes":1000,"active_bytes":120,
            "inactive_split_bytes":20,"peak_allocated_bytes":500,"peak_reserved_bytes":2000,
            "num_alloc_retries":3,"num_ooms":1,"memory_fraction":0.5}]}"#,
        )
        .expect("parses");
        assert_eq!(s.devices.len(), 1);
        assert_eq!(s.devices[0].releasable_bytes(), 900);
        assert_eq!(s.devices[0].memory_fraction, Some(0.5));
        assert_eq!(s.expandable_segments, Some(true));
        let r: Release = serde_json::from_str(
            r#"{"ok":true,"devices":[{"device":0,"reserved_before_bytes":1000,
            "reserved_after_bytes":200,"allocated_bytes":150}]}"#,
        )
        .expect("parses");
        assert_eq!(r.devices[0].freed_bytes(), 800);
        // Allocated above reserved (never in practice) does not underflow.
        let odd = DeviceStats {
            allocated_bytes: 5,
            reserved_bytes: 1,
            ..DeviceStats::default()
        };
        assert_eq!(odd.releasable_bytes(), 0);
    }
}
