//! `vramwarden snapshot`: one sample as JSON or CSV.

use serde::Serialize;

use crate::format::rfc3339;
use crate::model::Snapshot;

/// A device as the JSON/CSV output names its fields.
#[derive(Debug, Serialize)]
pub struct DeviceOut<'a> {
    /// NVML index.
    pub index: u32,
    /// GPU uuid.
    pub uuid: &'a str,
    /// Name.
    pub name: &'a str,
    /// Total memory.
    pub memory_total_bytes: Option<u64>,
    /// Used memory.
    pub memory_used_bytes: Option<u64>,
    /// Reserved by the driver.
    pub memory_reserved_bytes: Option<u64>,
    /// Free memory.
    pub memory_free_bytes: Option<u64>,
    /// GPU utilisation.
    pub utilization_gpu_pct: Option<u32>,
    /// Temperature.
    pub temperature_c: Option<u32>,
    /// Power draw.
    pub power_w: Option<f64>,
}

/// A process as the JSON/CSV output names its fields.
#[derive(Debug, Serialize)]
pub struct ProcessOut<'a> {
    /// OS pid.
    pub pid: u32,
    /// GPU index.
    pub device_index: u32,
    /// GPU memory held.
    pub used_bytes: Option<u64>,
    /// Short name.
    pub name: Option<&'a str>,
    /// Command line.
    pub cmdline: Option<&'a str>,
    /// Owner.
    pub user: Option<&'a str>,
    /// Start time, RFC 3339.
    pub start_time: Option<String>,
    /// The process's SM utilisation over the last interval, percent.
    pub sm_util_pct: Option<u32>,
}

/// The whole `snapshot --format json` document.
#[derive(Debug, Serialize)]
pub struct SnapshotOut<'a> {
    /// When it was taken, RFC 3339.
    pub timestamp: String,
    /// Every GPU.
    pub devices: Vec<DeviceOut<'a>>,
    /// Every process on them.
    pub processes: Vec<ProcessOut<'a>>,
}

impl<'a> SnapshotOut<'a> {
    /// The output view of `snap`.
    pub fn new(snap: &'a Snapshot) -> Self {
        Self {
            timestamp: rfc3339(snap.taken_at_ms),
            devices: snap
                .devices
                .iter()
                .map(|d| DeviceOut {
                    index: d.index,
                    uuid: &d.uuid,
                    name: &d.name,
                    memory_total_bytes: d.memory_total_bytes,
                    memory_used_bytes: d.memory_used_bytes,
                    memory_reserved_bytes: d.memory_reserved_bytes,
                    memory_free_bytes: d.memory_free_bytes,
                    utilization_gpu_pct: d.utilization_gpu_pct,
                    temperature_c: d.temperature_c,
                    power_w: d.power_w,
                })
                .collect(),
            processes: snap
                .processes
                .iter()
                .map(|p| {
                    let i = p.info.as_ref();
                    ProcessOut {
                        pid: p.pid,
                        device_index: p.device_index,
                        used_bytes: p.used_bytes,
                        name: i.map(|i| i.name.as_str()),
                        cmdline: i.map(|i| i.cmdline.as_str()),
                        user: i.map(|i| i.user.as_str()),
                        start_time: i.map(|i| rfc3339(i.start_time_ms)),
                        sm_util_pct: p.sm_util_pct,
                    }
                })
                .collect(),
        }
    }
}

/// Which table(s) `snapshot --format csv` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CsvTable {
    /// Devices, a blank line, then processes.
    Both,
    /// One row per GPU.
    Devices,
    /// One row per process and GPU.
    Processes,
}

/// Pretty JSON.
///
/// # Errors
/// Only if serialisation fails (it does not for these types).
pub fn to_json(snap: &Snapshot) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&SnapshotOut::new(snap))
}

/// CSV with the JSON's field names as headers; a missing reading is an empty cell.
///
/// # Errors
/// If writing to `out` fails.
pub fn write_csv(
    snap: &Snapshot,
    table: CsvTable,
    out: &mut dyn std::io::Write,
) -> csv::Result<()> {
    let view = SnapshotOut::new(snap);
    if table != CsvTable::Processes {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(&mut *out);
        write_rows(&mut w, &view.devices, DEVICE_HEADER)?;
        w.flush()?;
    }
    if table == CsvTable::Both {
        out.write_all(b"\n")?;
    }
    if table != CsvTable::Devices {
        let mut w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(&mut *out);
        write_rows(&mut w, &view.processes, PROCESS_HEADER)?;
        w.flush()?;
    }
    Ok(())
}

const DEVICE_HEADER: &[&str] = &[
    "index",
    "uuid",
    "name",
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_reserved_bytes",
    "memory_free_bytes",
    "utilization_gpu_pct",
    "temperature_c",
    "power_w",
];
const PROCESS_HEADER: &[&str] = &[
    "pid",
    "device_index",
    "used_bytes",
    "name",
    "cmdline",
    "user",
    "start_time",
    "sm_util_pct",
];

fn write_rows<W: std::io::Write, T: Serialize>(
    w: &mut csv::Writer<W>,
    rows: &[T],
    header: &[&str],
) -> csv::Result<()> {
    // The header is written by hand so an empty table still has one.
    w.write_record(header)?;
    for r in rows {
        w.serialize(r)?;
    }
    Ok(())
}
