//! The real driver, through nvml-wrapper.
//!
//! Each reading is taken on its own: a metric that is `NotSupported` becomes `None` without
//! dropping the rest of the sample. Process lists are sanity-checked, since some driver/struct
//! version pairs return scrambled entries.

use std::collections::BTreeMap;

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::Nvml;

use super::traits::{host_name, GpuSource, SourceError};
use crate::host::cost::{self, Part};
use crate::model::{ContextKind, DeviceSample, ProcessSample, Snapshot, SourceInfo, UnixMs};

/// A device's raw NVML handle, kept from start to the end of the source.
#[derive(Debug, Clone, Copy)]
struct Handle(nvml_wrapper_sys::bindings::nvmlDevice_t);

// SAFETY: an NVML device handle is an opaque token that NVML accepts from any thread (the
// library is thread-safe); the source that holds it is used by one thread at a time.
unsafe impl Send for Handle {}

/// Static facts about one device, read once at start.
#[derive(Debug, Clone)]
struct DeviceStatic {
    name: String,
    uuid: String,
    pci_bus_id: Option<String>,
}

/// Samples every NVIDIA GPU through NVML.
pub(crate) struct NvmlSource {
    nvml: Nvml,
    devices: Vec<DeviceStatic>,
    /// Per device: its NVML handle, looked up once at start (valid for the life of `nvml`;
    /// `nvmlDeviceGetHandleByIndex` once a second was ≈ 4 % of the agent's CPU). None where the
    /// lookup failed then: that device is looked up again at every sample.
    handles: Vec<Option<Handle>>,
    info: SourceInfo,
    /// Per device: the last per-process utilisation reading (see [`UTIL_EVERY_MS`]).
    util: Vec<UtilCache>,
    /// Whether per-process utilisation is read at all (only idle rules need it).
    want_util: bool,
    /// Per device: buffer size for the process lists, and how many samples ago the graphics
    /// list was last read and whether it was empty.
    lists: Vec<ListState>,
}

#[derive(Debug, Clone)]
struct ListState {
    cap: u32,
    graphics: Cadence,
    graphics_empty: bool,
    /// The power limit, read now and then, and its value then.
    limit: Cadence,
    power_limit_w: Option<f64>,
    /// The fan, asked every sample while it answers (SXM boards have none and answer an error).
    fan: Cadence,
    fan_supported: bool,
    /// The process lists: read again when the GPU's used memory moved since they were last
    /// read, else every [`LISTS_EVERY`] samples; the last good ones and the used memory then.
    lists: Cadence,
    listed_used: Option<u64>,
    compute: Vec<ProcessInfo>,
    graphics_list: Vec<ProcessInfo>,
}

/// `nvmlDeviceGetMemoryInfo` (v1): total and free; for `bench-nvml --spaced` only. Once a
/// second it costs about what the v2 call (which also gives the driver's reserve) costs
/// (66 vs 72 µs of CPU on the H200), so samples use v2 alone.
fn memory_v1(nvml: &Nvml, dev: &nvml_wrapper::Device<'_>) -> Option<(u64, u64)> {
    use nvml_wrapper_sys::bindings::{nvmlMemory_t, nvmlReturn_enum_NVML_SUCCESS};
    let lib = nvml.lib();
    lib.nvmlDeviceGetMemoryInfo.as_ref().ok()?;
    // SAFETY: nvmlMemory_t is plain old data; all-zero is a valid value.
    let mut m: nvmlMemory_t = unsafe { std::mem::zeroed() };
    // SAFETY: the symbol is present (checked above), the handle comes from this Nvml and `m`
    // is a valid out-pointer.
    let r = unsafe { lib.nvmlDeviceGetMemoryInfo(dev.handle(), &mut m) };
    (r == nvmlReturn_enum_NVML_SUCCESS).then_some((m.total, m.free))
}

impl ListState {
    /// A device's state before its first sample: every reading due.
    fn new() -> Self {
        Self {
            cap: 64,
            graphics: Cadence::new(),
            graphics_empty: true,
            limit: Cadence::new(),
            power_limit_w: None,
            fan: Cadence::new(),
            fan_supported: true,
            lists: Cadence::new(),
            listed_used: None,
            compute: Vec::new(),
            graphics_list: Vec::new(),
        }
    }

    /// The fan's reading from the driver's answer, and whether to ask every sample: a board
    /// without fans (SXM modules) answers with an error, not always "not supported"; any error
    /// gives no reading (never 0) and the question is asked again only every [`SLOW_EVERY`]
    /// samples.
    fn fan_answered(&mut self, answer: Result<u32, nvml_wrapper::error::NvmlError>) -> Option<u32> {
        self.fan_supported = answer.is_ok();
        answer.ok().filter(|f| *f <= 100)
    }

    /// Whether the process lists are read at this sample, the GPU's used memory being
    /// `used`: when it moved since the last good lists (or is unknown), else every
    /// [`LISTS_EVERY`] samples. The caller sets `listed_used` once the lists were read.
    fn lists_due(&mut self, used: Option<u64>) -> bool {
        let moved = used.is_none() || used != self.listed_used;
        self.lists.due(moved, LISTS_EVERY)
    }
}

/// A reading taken every sample while it matters, else every `n`th: counts the samples
/// since it was last taken. Starts due.
#[derive(Debug, Clone)]
struct Cadence(u32);

impl Cadence {
    fn new() -> Self {
        Self(u32::MAX)
    }

    /// Counts this sample; true when the reading is to be taken now (`always`, or `n`
    /// samples since the last one).
    fn due(&mut self, always: bool, n: u32) -> bool {
        self.0 = self.0.saturating_add(1);
        let due = always || self.0 >= n;
        if due {
            self.0 = 0;
        }
        due
    }
}

/// The power limit (set by an administrator, rarely changed) is read every this many
/// samples, and a fan that answered an error is asked again only this often: each
/// driver call costs tens of µs, and the agent's CPU is measured against `nvidia-smi -l 1`.
const SLOW_EVERY: u32 = 30;

/// An empty graphics list is read again only every this many samples (compute-only GPUs
/// have none; a desktop's Xorg keeps its list non-empty and read every sample).
const GRAPHICS_EVERY: u32 = 10;

/// While a GPU's used memory stays where it was to the byte, its process lists are read only
/// every this many samples and the last ones are kept between. A process cannot start (its
/// CUDA context takes memory), end (its memory is freed) or grow without moving the GPU's used
/// memory, so this only delays, by at most this many samples, what would cancel out exactly
/// within one interval (one process freeing what another takes). The compute list is the
/// dearest driver call of a sample (≈ 94 µs of CPU once a second on the H200).
const LISTS_EVERY: u32 = 5;

/// The most GPUs a device count from the driver is believed for (as a link's View allows).
const MAX_GPUS: u32 = 64;

/// The most processes one GPU's list is read for: a driver's count above it sizes no buffer
/// (a GPU runs at most a few thousand processes).
const MAX_LISTED: std::os::raw::c_uint = 1 << 16;

/// A process list in one driver call (nvml-wrapper asks for the count first, which doubles
/// the cost), falling back to nvml-wrapper when the symbol is missing.
fn process_list(
    nvml: &Nvml,
    dev: &nvml_wrapper::Device<'_>,
    graphics: bool,
    cap: &mut u32,
) -> Result<Vec<ProcessInfo>, nvml_wrapper::error::NvmlError> {
    use nvml_wrapper_sys::bindings::{
        nvmlProcessInfo_t, nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE,
    };
    let lib = nvml.lib();
    let present = if graphics {
        lib.nvmlDeviceGetGraphicsRunningProcesses_v3.is_ok()
    } else {
        lib.nvmlDeviceGetComputeRunningProcesses_v3.is_ok()
    };
    if present {
        for _ in 0..4 {
            let mut count: std::os::raw::c_uint = *cap;
            // SAFETY: nvmlProcessInfo_t is plain old data; all-zero is a valid value.
            let mut buf: Vec<nvmlProcessInfo_t> =
                vec![unsafe { std::mem::zeroed() }; *cap as usize];
            // SAFETY: the symbol is present (checked above), the handle comes from this Nvml,
            // and `buf` holds `count` entries.
            let r = unsafe {
                if graphics {
                    lib.nvmlDeviceGetGraphicsRunningProcesses_v3(
                        dev.handle(),
                        &mut count,
                        buf.as_mut_ptr(),
                    )
                } else {
                    lib.nvmlDeviceGetComputeRunningProcesses_v3(
                        dev.handle(),
                        &mut count,
                        buf.as_mut_ptr(),
                    )
                }
            };
            if r == nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE {
                // The driver's count sizes the next buffer, within a bound.
                *cap = count.max(*cap).min(MAX_LISTED) * 2 + 8;
                continue;
            }
            nvml_wrapper::error::nvml_try(r)?;
            buf.truncate(count as usize);
            return Ok(buf.into_iter().map(ProcessInfo::from).collect());
        }
    }
    if graphics {
        dev.running_graphics_processes()
    } else {
        dev.running_compute_processes()
    }
}

/// Per-process utilisation is read at most this often: the driver call scans its sample
/// buffer and costs far more than the rest of a sample (≈ 1.7–2 ms of CPU per call on an H100,
/// with or without processes, and the same through `nvmlDeviceGetProcessesUtilizationInfo`),
/// and idle decisions need minutes, not seconds. Measured on the H100 (driver 580): the driver
/// answers one entry per process, its SM utilisation averaged over its samples since the time
/// asked for (a 3.7 s burst at 100 % read 37 over the next 10 s), and keeps about 14 s of
/// samples (a window asked to reach back 60 s still held that burst 12.7 s after it ended,
/// and no longer 14.7 s after). So each read covers the whole 10 s since the one before;
/// spaced much further, a burst between two reads would go unseen.
pub(crate) const UTIL_EVERY_MS: i64 = 10_000;

/// The per-process utilisation samples since `since_us` (µs since the epoch) as (pid, SM %).
/// NotFound: no sample since then. (nvml-wrapper asks the driver for the count first; one call
/// into a kept buffer was measured on the H100 at the same 1.37 ms a read, so the safe call
/// stays.)
fn process_utilization(
    dev: &nvml_wrapper::Device<'_>,
    since_us: u64,
) -> Result<Vec<(u32, u32)>, nvml_wrapper::error::NvmlError> {
    Ok(dev
        .process_utilization_stats(since_us)?
        .into_iter()
        .map(|s| (s.pid, s.sm_util))
        .collect())
}

#[derive(Debug, Clone, Default)]
struct UtilCache {
    /// When it was last read (ms since the epoch); 0 before the first read.
    read_ms: i64,
    /// pid → its SM utilisation averaged over the time since the read before; None when
    /// unsupported.
    busy: Option<std::collections::HashMap<u32, u32>>,
}

impl NvmlSource {
    /// Loads `libnvidia-ml.so.1` and reads the device list.
    ///
    /// # Errors
    /// [`SourceError::Unavailable`] with a sentence a user can act on when the library is missing
    /// or the driver refuses to initialise.
    pub(crate) fn new() -> Result<Self, SourceError> {
        let nvml = init().map_err(|e| SourceError::Unavailable(explain_init_error(&e)))?;
        let count = nvml
            .device_count()
            .map_err(|e| SourceError::Unavailable(format!("NVML could not count GPUs: {e}")))?;
        if count > MAX_GPUS {
            return Err(SourceError::Unavailable(format!(
                "NVML counted {count} GPUs, more than the {MAX_GPUS} one machine can hold: the driver's answer is not believed"
            )));
        }
        let mut devices = Vec::new();
        let mut handles = Vec::new();
        for i in 0..count {
            let d = nvml.device_by_index(i).ok();
            // SAFETY: reading the raw handle of a device of this Nvml; it stays valid while
            // `nvml` lives, which the source owns.
            handles.push(d.as_ref().map(|d| Handle(unsafe { d.handle() })));
            devices.push(DeviceStatic {
                name: d
                    .as_ref()
                    .and_then(|d| d.name().ok())
                    .unwrap_or_else(|| format!("GPU {i}")),
                uuid: d.as_ref().and_then(|d| d.uuid().ok()).unwrap_or_default(),
                pci_bus_id: d.as_ref().and_then(|d| d.pci_info().ok()).map(|p| p.bus_id),
            });
        }
        let cuda_version = nvml.sys_cuda_driver_version().ok().map(|v| {
            format!(
                "{}.{}",
                nvml_wrapper::cuda_driver_version_major(v),
                nvml_wrapper::cuda_driver_version_minor(v)
            )
        });
        let info = SourceInfo {
            kind: "NVML".into(),
            driver_version: nvml.sys_driver_version().ok(),
            nvml_version: nvml.sys_nvml_version().ok(),
            cuda_version,
            host: host_name(),
        };
        let util = vec![UtilCache::default(); devices.len()];
        let lists = vec![ListState::new(); devices.len()];
        Ok(Self {
            nvml,
            devices,
            handles,
            info,
            util,
            want_util: false,
            lists,
        })
    }
}

/// Loads NVML. `VRAMWARDEN_NVML_LIB` loads it from another path (a driver outside the
/// linker's path; tests name a missing one to see the no-driver path on any machine).
fn init() -> Result<Nvml, nvml_wrapper::error::NvmlError> {
    match std::env::var_os("VRAMWARDEN_NVML_LIB") {
        Some(path) => Nvml::builder().lib_path(&path).init(),
        None => Nvml::init(),
    }
}

/// Whether the driver's NVML library can be loaded here, and why not: what a window asks
/// before it leaves the simulated GPUs for the driver (a machine without the library would
/// only show that no GPU can be read, the demo's history gone).
///
/// # Errors
/// The loader's words when `libnvidia-ml.so.1` cannot be loaded.
pub fn driver_library() -> Result<(), String> {
    // SAFETY: loading the NVIDIA driver's library runs its initialisers, as NVML's own
    // loading does; nothing of it is called here.
    unsafe { libloading::Library::new("libnvidia-ml.so.1") }
        .map(drop)
        .map_err(|e| e.to_string())
}

/// GPU `index`'s free and total memory, read from NVML right now (the park worker's room
/// check right before a restore; it runs on its own thread, so it opens NVML itself).
///
/// # Errors
/// NVML could not be loaded or the GPU did not answer, in words.
pub(crate) fn free_and_total(index: u32) -> Result<(u64, u64), String> {
    let nvml = init().map_err(|e| explain_init_error(&e))?;
    let m = nvml
        .device_by_index(index)
        .and_then(|d| d.memory_info())
        .map_err(|e| format!("GPU {index} did not give its free memory: {e}"))?;
    if m.total == 0 || m.free > m.total {
        return Err(format!("GPU {index} gave an impossible free-memory figure"));
    }
    Ok((m.free, m.total))
}

fn explain_init_error(e: &nvml_wrapper::error::NvmlError) -> String {
    use nvml_wrapper::error::NvmlError as E;
    match e {
        E::LibloadingError(why) => match std::env::var_os("VRAMWARDEN_NVML_LIB") {
            // The user named the library: say which, and why it did not load.
            Some(path) => format!(
                "{} (VRAMWARDEN_NVML_LIB) could not be loaded: {why}",
                std::path::Path::new(&path).display()
            ),
            None => "No NVIDIA driver found: libnvidia-ml.so.1 could not be loaded. \
             Install the NVIDIA driver, or look around with the simulated GPUs."
                .to_string(),
        },
        E::DriverNotLoaded => {
            "The NVIDIA kernel driver is not loaded (NVML: DriverNotLoaded).".to_string()
        }
        E::NoPermission => {
            "No permission to talk to the NVIDIA driver (NVML: NoPermission).".into()
        }
        other => format!("NVML failed to initialise: {other}"),
    }
}

impl GpuSource for NvmlSource {
    fn info(&self) -> SourceInfo {
        self.info.clone()
    }

    fn set_process_utilization(&mut self, on: bool) {
        self.want_util = on;
    }

    fn sample(&mut self, now_ms: UnixMs) -> Result<Snapshot, SourceError> {
        let mut snap = Snapshot {
            taken_at_ms: now_ms,
            devices: Vec::with_capacity(self.devices.len()),
            processes: Vec::new(),
        };
        for (i, st) in self.devices.iter().enumerate() {
            let index = i as u32;
            let mut ds = DeviceSample {
                index,
                uuid: st.uuid.clone(),
                name: st.name.clone(),
                pci_bus_id: st.pci_bus_id.clone(),
                ..DeviceSample::default()
            };
            let cached = self.handles.get(i).copied().flatten();
            let looked_up = match cached {
                // SAFETY: the handle was given by this `nvml` at start and it is still alive.
                Some(h) => Ok(unsafe { nvml_wrapper::Device::new(h.0, &self.nvml) }),
                None => self.nvml.device_by_index(index),
            };
            let dev = match looked_up {
                Ok(d) => d,
                Err(e) => {
                    // A GPU that stopped answering: every reading is missing, and so is its
                    // process list (the engine keeps the last good one, marked stale).
                    ds.process_list_error = Some(format!("the GPU did not answer: {e}"));
                    snap.devices.push(ds);
                    continue;
                }
            };
            let ls = &mut self.lists[i];
            read_device(&dev, ls, &mut ds);
            read_lists(&self.nvml, &dev, ls, &mut ds);
            if ds.process_list_error.is_none() {
                let mut procs =
                    merge_processes(index, &ls.compute, &ls.graphics_list, ds.memory_total_bytes);
                if self.want_util && !procs.is_empty() {
                    self.util[i].fill(&dev, now_ms, &mut procs);
                }
                snap.processes.extend(procs);
            }
            snap.devices.push(ds);
        }
        Ok(snap)
    }
}

/// A GPU's readings into `ds`: memory, utilisation, temperature, power and its limit (every
/// [`SLOW_EVERY`]th sample), clocks, fan (where it has one).
fn read_device(dev: &nvml_wrapper::Device<'_>, ls: &mut ListState, ds: &mut DeviceSample) {
    if let Ok(m) = timed(Part::NvmlMemory, || dev.memory_info()) {
        if m.total > 0 && m.used <= m.total && m.free <= m.total {
            ds.memory_total_bytes = Some(m.total);
            ds.memory_used_bytes = Some(m.used);
            ds.memory_reserved_bytes = Some(m.reserved);
            ds.memory_free_bytes = Some(m.free);
        }
    }
    ds.utilization_gpu_pct = timed(Part::NvmlUtilization, || dev.utilization_rates())
        .ok()
        .map(|u| u.gpu)
        .filter(|g| *g <= 100);
    ds.temperature_c = timed(Part::NvmlTemperature, || {
        dev.temperature(TemperatureSensor::Gpu)
    })
    .ok()
    .filter(|t| *t < 200);
    ds.power_w = timed(Part::NvmlPower, || dev.power_usage())
        .ok()
        .map(|mw| f64::from(mw) / 1000.0);
    if ls.limit.due(false, SLOW_EVERY) {
        ls.power_limit_w = timed(Part::NvmlPowerLimit, || dev.enforced_power_limit())
            .ok()
            .map(|mw| f64::from(mw) / 1000.0);
    }
    ds.power_limit_w = ls.power_limit_w;
    let clocks = cost::span(Part::NvmlClocks);
    ds.sm_clock_mhz = dev.clock_info(Clock::SM).ok();
    ds.mem_clock_mhz = dev.clock_info(Clock::Memory).ok();
    drop(clocks);
    if ls.fan.due(ls.fan_supported, SLOW_EVERY) {
        ds.fan_pct = ls.fan_answered(timed(Part::NvmlFan, || dev.fan_speed(0)));
    }
}

/// The GPU's process lists into `ls`, when due (its used memory moved, or every few samples;
/// the graphics list less often while empty). A failed list is missing, never "no
/// processes": said in `ds`, and the engine keeps the last good list for this GPU, marked
/// stale.
fn read_lists(
    nvml: &Nvml,
    dev: &nvml_wrapper::Device<'_>,
    ls: &mut ListState,
    ds: &mut DeviceSample,
) {
    if !ls.lists_due(ds.memory_used_bytes) {
        return;
    }
    ls.listed_used = None;
    match timed(Part::NvmlComputeList, || {
        process_list(nvml, dev, false, &mut ls.cap)
    }) {
        Ok(v) => ls.compute = v,
        Err(e) => {
            ds.process_list_error = Some(format!("compute process list: {e}"));
        }
    }
    if ls.graphics.due(!ls.graphics_empty, GRAPHICS_EVERY) {
        match timed(Part::NvmlGraphicsList, || {
            process_list(nvml, dev, true, &mut ls.cap)
        }) {
            Ok(g) => {
                ls.graphics_empty = g.is_empty();
                ls.graphics_list = g;
            }
            Err(e) => {
                ds.process_list_error = Some(format!("graphics process list: {e}"));
            }
        }
    }
    if ds.process_list_error.is_none() {
        ls.listed_used = ds.memory_used_bytes;
    }
}

impl UtilCache {
    /// Each of `procs`' SM utilisation, from the driver's per-process samples read every
    /// [`UTIL_EVERY_MS`] (samples since the last read; a process with none was idle, and
    /// NotFound means none was busy); unknown while the read fails.
    fn fill(
        &mut self,
        dev: &nvml_wrapper::Device<'_>,
        now_ms: UnixMs,
        procs: &mut [ProcessSample],
    ) {
        if now_ms - self.read_ms >= UTIL_EVERY_MS {
            // Driver timestamps are µs since the epoch.
            let since = if self.read_ms > 0 {
                self.read_ms
            } else {
                now_ms - UTIL_EVERY_MS
            };
            let stats = timed(Part::NvmlProcessUtilization, || {
                process_utilization(dev, (since.max(0) as u64) * 1000)
            });
            self.busy = match stats {
                Ok(v) => {
                    let mut m = std::collections::HashMap::new();
                    for (pid, sm) in v {
                        let e = m.entry(pid).or_insert(0);
                        *e = (*e).max(sm);
                    }
                    Some(m)
                }
                Err(nvml_wrapper::error::NvmlError::NotFound) => {
                    Some(std::collections::HashMap::new())
                }
                Err(_) => None,
            };
            self.read_ms = now_ms;
        }
        if let Some(busy) = &self.busy {
            for p in procs {
                p.sm_util_pct = Some(busy.get(&p.pid).copied().unwrap_or(0));
            }
        }
    }
}

/// `call`, its CPU counted as `part` (with `-v`).
fn timed<T>(part: Part, call: impl FnOnce() -> T) -> T {
    let _span = cost::span(part);
    call()
}

fn used_of(p: &ProcessInfo) -> Option<u64> {
    match p.used_gpu_memory {
        UsedGpuMemory::Used(b) => Some(b),
        UsedGpuMemory::Unavailable => None,
    }
}

/// Merges the compute and graphics lists of one device by PID and drops entries that cannot be
/// real (pid 0, or more memory than the card has).
pub(crate) fn merge_processes(
    device_index: u32,
    compute: &[ProcessInfo],
    graphics: &[ProcessInfo],
    total: Option<u64>,
) -> Vec<ProcessSample> {
    let mut by_pid: BTreeMap<u32, ProcessSample> = BTreeMap::new();
    let lists = [
        (compute, ContextKind::Compute),
        (graphics, ContextKind::Graphics),
    ];
    for (list, kind) in lists {
        for p in list {
            let used = used_of(p);
            let sane = p.pid > 0 && used.is_none_or(|u| total.is_none_or(|t| u <= t));
            if !sane {
                continue;
            }
            by_pid
                .entry(p.pid)
                .and_modify(|e| {
                    if e.kind != kind {
                        e.kind = ContextKind::Both;
                    }
                    e.used_bytes = match (e.used_bytes, used) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    };
                })
                .or_insert(ProcessSample {
                    pid: p.pid,
                    device_index,
                    used_bytes: used,
                    kind,
                    sm_util_pct: None,
                    info: None,
                    origin: crate::model::Origin::Live,
                    stale: false,
                    cpu_pct: None,
                    rss_bytes: None,
                    torch: None,
                    parked: None,
                });
        }
    }
    by_pid.into_values().collect()
}

impl NvmlSource {
    /// The CPU cost of a few calls made the way the sampler makes them, once per `spacing`
    /// (a call repeated in a loop is far cheaper than the same call once a second): per
    /// call, the mean CPU µs over `rounds`, each call after its own pause. The last row holds
    /// the largest gap between the v2 call's used and total − reserved − free, in bytes.
    pub(crate) fn bench_spaced_calls(
        &mut self,
        rounds: u32,
        spacing: std::time::Duration,
    ) -> Vec<(&'static str, f64)> {
        let mut sums = [0u64; 5];
        let names = [
            "memory_info v2",
            "memory_info v1",
            "compute processes",
            "utilization+temperature+power",
            "whole sample (all devices)",
        ];
        let mut gap = 0u64;
        for _ in 0..rounds {
            for (k, sum) in sums.iter_mut().enumerate() {
                std::thread::sleep(spacing);
                let t = crate::host::proc_usage::thread_cpu_ns();
                if k == 4 {
                    let _ = self.sample(crate::model::now_ms());
                    *sum += crate::host::proc_usage::thread_cpu_ns().saturating_sub(t);
                    continue;
                }
                for i in 0..self.devices.len() as u32 {
                    let Ok(d) = self.nvml.device_by_index(i) else {
                        continue;
                    };
                    match k {
                        0 => {
                            if let Ok(m) = d.memory_info() {
                                let sum = m.reserved.saturating_add(m.free).saturating_add(m.used);
                                gap = gap.max(sum.abs_diff(m.total));
                            }
                        }
                        1 => {
                            let _ = memory_v1(&self.nvml, &d);
                        }
                        2 => {
                            let _ = process_list(&self.nvml, &d, false, &mut 64);
                        }
                        _ => {
                            let _ = d.utilization_rates();
                            let _ = d.temperature(TemperatureSensor::Gpu);
                            let _ = d.power_usage();
                        }
                    }
                }
                *sum += crate::host::proc_usage::thread_cpu_ns().saturating_sub(t);
            }
        }
        let mut out: Vec<(&'static str, f64)> = names
            .iter()
            .zip(sums)
            .map(|(n, s)| (*n, s as f64 / 1000.0 / f64::from(rounds.max(1))))
            .collect();
        out.push(("v2 gap |total - reserved - free - used| bytes", gap as f64));
        out
    }

    /// Times each raw NVML call a sample makes, per sample (summed over devices), averaged over
    /// `iterations`: `(call, µs per sample, calls per sample)`. For `vramwarden bench-nvml`.
    pub(crate) fn bench_raw_calls(&self, iterations: u32) -> Vec<(&'static str, f64, usize)> {
        let n = self.devices.len() as u32;
        let iters = iterations.max(1);
        let nvml = &self.nvml;
        let base = micros_per_round(n, iters, &|i| {
            let _ = nvml.device_by_index(i);
        });
        let n_us = n as usize;
        let mut out = vec![("device_by_index", base, n_us)];
        for (name, per, f) in raw_calls() {
            let with = |i: u32| {
                if let Ok(d) = nvml.device_by_index(i) {
                    f(nvml, &d);
                }
            };
            let mut us = (micros_per_round(n, iters, &with) - base).max(0.0);
            if name.starts_with("graphics") {
                // Read every sample only where a graphics process exists.
                let empty = self.lists.iter().all(|l| l.graphics_empty);
                if empty {
                    us /= f64::from(GRAPHICS_EVERY);
                }
            }
            out.push((name, us, per * n_us));
        }
        let seq = self.bench_sample_order(iters);
        out.push(("ALL RAW CALLS IN SAMPLE ORDER", seq, 0));
        let util = self.bench_process_utilization(iters) - base;
        out.push(("process_utilization_stats", util, usize::MAX));
        out
    }

    /// The same calls in the order a sample makes them, results dropped: the raw cost of one
    /// sample's NVML work without the driver's benefit of repeating one call in a loop
    /// (µs per sample, over `iters` rounds).
    fn bench_sample_order(&self, iters: u32) -> f64 {
        let nvml = &self.nvml;
        let k = std::cell::Cell::new(0u32);
        let empty = self.lists.iter().all(|l| l.graphics_empty);
        micros_per_round(self.devices.len() as u32, iters, &|i| {
            if let Ok(d) = nvml.device_by_index(i) {
                let _ = d.memory_info();
                let _ = d.utilization_rates();
                let _ = d.temperature(TemperatureSensor::Gpu);
                let _ = d.power_usage();
                let _ = d.enforced_power_limit();
                let _ = d.clock_info(Clock::SM);
                let _ = d.clock_info(Clock::Memory);
                let _ = d.fan_speed(0);
                let _ = process_list(nvml, &d, false, &mut 64);
                k.set(k.get() + 1);
                if !empty || k.get() % GRAPHICS_EVERY == 0 {
                    let _ = process_list(nvml, &d, true, &mut 64);
                }
            }
        })
    }

    /// Per-process utilisation, read once per UTIL_EVERY_MS over the samples since then: µs per
    /// round over the devices, `device_by_index` included, over `iters` rounds.
    fn bench_process_utilization(&self, iters: u32) -> f64 {
        let nvml = &self.nvml;
        micros_per_round(self.devices.len() as u32, iters, &|i| {
            if let Ok(d) = nvml.device_by_index(i) {
                let since = (crate::model::now_ms() - UTIL_EVERY_MS).max(0) as u64 * 1000;
                let _ = d.process_utilization_stats(since);
            }
        })
    }
}

/// One raw NVML call [`NvmlSource::bench_raw_calls`] times: its name, how many a device makes per
/// sample, and the call (its result dropped).
type RawCall = (&'static str, usize, fn(&Nvml, &nvml_wrapper::Device<'_>));

/// The raw NVML calls a sample makes on each device, timed one by one by
/// [`NvmlSource::bench_raw_calls`].
fn raw_calls() -> [RawCall; 9] {
    [
        ("memory_info (v2)", 1, |_, d| {
            let _ = d.memory_info();
        }),
        ("compute processes (v3, one call)", 1, |nvml, d| {
            let _ = process_list(nvml, d, false, &mut 64);
        }),
        ("graphics processes, 1 sample in 10", 1, |nvml, d| {
            let _ = process_list(nvml, d, true, &mut 64);
        }),
        ("utilization_rates", 1, |_, d| {
            let _ = d.utilization_rates();
        }),
        ("temperature", 1, |_, d| {
            let _ = d.temperature(TemperatureSensor::Gpu);
        }),
        ("power_usage", 1, |_, d| {
            let _ = d.power_usage();
        }),
        ("enforced_power_limit", 1, |_, d| {
            let _ = d.enforced_power_limit();
        }),
        ("clock_info (SM + memory)", 1, |_, d| {
            let _ = d.clock_info(Clock::SM);
            let _ = d.clock_info(Clock::Memory);
        }),
        ("fan_speed", 1, |_, d| {
            let _ = d.fan_speed(0);
        }),
    ]
}

/// Microseconds one round of `f` over devices `0..n` takes, averaged over `iters` rounds.
fn micros_per_round(n: u32, iters: u32, f: &dyn Fn(u32)) -> f64 {
    let t = std::time::Instant::now();
    for _ in 0..iters {
        for i in 0..n {
            f(i);
        }
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(iters)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvml_wrapper::enums::device::UsedGpuMemory;

    #[test]
    fn a_cadence_reads_at_once_then_every_nth_sample_or_always_while_asked() {
        let mut c = Cadence::new();
        let taken: Vec<usize> = (0..65).filter(|_| c.due(false, 30)).collect();
        assert_eq!(taken, vec![0, 30, 60]);
        let mut c = Cadence::new();
        assert!((0..5).all(|_| c.due(true, 30)));
        // After the last reading while asked, the next comes n samples later.
        let next = (1..=40).find(|_| c.due(false, 30));
        assert_eq!(next, Some(30));
    }

    #[test]
    fn a_fan_that_answers_an_error_is_asked_every_30th_sample_and_reads_nothing() {
        use nvml_wrapper::error::NvmlError;
        let mut ls = ListState::new();
        let mut asked = Vec::new();
        for i in 0..65 {
            if ls.fan.due(ls.fan_supported, SLOW_EVERY) {
                asked.push(i);
                // What an H100 SXM answers for fan 0 (measured: "invalid argument").
                assert_eq!(ls.fan_answered(Err(NvmlError::InvalidArg)), None);
            }
        }
        assert_eq!(asked, vec![0, 30, 60]);
        assert_eq!(ls.fan_answered(Err(NvmlError::NotSupported)), None);
        assert!(!ls.fan_supported);
        // A fan that answers is read every sample, an impossible speed never shown.
        assert_eq!(ls.fan_answered(Ok(41)), Some(41));
        assert!((0..5).all(|_| ls.fan.due(ls.fan_supported, SLOW_EVERY)));
        assert_eq!(ls.fan_answered(Ok(250)), None);
    }

    #[test]
    fn process_lists_are_read_when_used_memory_moves_else_every_nth_sample() {
        let mut ls = ListState::new();
        // What the sampler does: read when due, remember the used memory of a good read.
        let mut read_at = Vec::new();
        let used = [10, 10, 10, 10, 10, 10, 10, 12, 12, 12, 12, 12, 12, 12];
        for (i, u) in used.iter().enumerate() {
            if ls.lists_due(Some(*u)) {
                read_at.push(i);
                ls.listed_used = Some(*u);
            }
        }
        // At once, then LISTS_EVERY samples later, at the move (7), and LISTS_EVERY after it.
        let every = LISTS_EVERY as usize;
        assert_eq!(read_at, vec![0, every, 7, 7 + every]);
        // A failed read leaves nothing remembered: the next sample reads again.
        ls.listed_used = None;
        assert!(ls.lists_due(Some(12)));
        // Unknown used memory: read every sample.
        assert!((0..3).all(|_| ls.lists_due(None)));
    }

    fn p(pid: u32, mib: u64) -> ProcessInfo {
        ProcessInfo {
            pid,
            used_gpu_memory: UsedGpuMemory::Used(mib << 20),
            gpu_instance_id: None,
            compute_instance_id: None,
        }
    }

    #[test]
    fn merges_by_pid_and_drops_scrambled_entries() {
        let total = Some(80 << 30);
        let compute = [p(10, 100), p(0, 5), p(11, 1 << 30), p(12, 300)];
        let graphics = [p(12, 310), p(13, 20)];
        let merged = merge_processes(1, &compute, &graphics, total);
        let got: Vec<(u32, Option<u64>, ContextKind)> = merged
            .iter()
            .map(|s| (s.pid, s.used_bytes.map(|b| b >> 20), s.kind))
            .collect();
        assert_eq!(
            got,
            vec![
                (10, Some(100), ContextKind::Compute),
                (12, Some(310), ContextKind::Both),
                (13, Some(20), ContextKind::Graphics),
            ]
        );
        assert!(merged.iter().all(|s| s.device_index == 1));
    }

    #[test]
    fn init_failure_is_explained() {
        // On a machine without the driver this is the message the GUI and CLI show.
        let e = nvml_wrapper::error::NvmlError::DriverNotLoaded;
        assert!(explain_init_error(&e).contains("not loaded"));
    }
}
