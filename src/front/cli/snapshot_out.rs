//! `vramwarden snapshot`: one sample as JSON or CSV.

use serde::Serialize;

use crate::model::format::rfc3339;
use crate::model::Snapshot;

/// A device as the JSON/CSV output names its fields.
#[derive(Debug, Serialize)]
struct DeviceOut<'a> {
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
    /// The enforced power limit (power cap), W.
    pub power_limit_w: Option<f64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub mem_clock_mhz: Option<u32>,
    /// Fan speed, percent (`null` on boards without a fan).
    pub fan_pct: Option<u32>,
}

/// A process as the JSON/CSV output names its fields.
#[derive(Debug, Serialize)]
struct ProcessOut<'a> {
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
    /// Start time, ms since the epoch (what `park --start-time-ms` takes).
    pub start_time_ms: Option<i64>,
    /// The process's SM utilisation over the last interval, percent.
    pub sm_util_pct: Option<u32>,
    /// Its container's name, else the first 12 digits of the container id (`null` outside a
    /// container).
    pub container: Option<String>,
    /// Its Kubernetes pod as `namespace/pod` (`null` outside a pod).
    pub pod: Option<&'a str>,
    /// `running`, or where a park stands: `parking`, `parked`, `resuming`, `locked`,
    /// `park failed` (see `vramwarden park`).
    pub state: &'static str,
    /// GPU memory moved to host memory while parked (bytes; `null` when not parked or not
    /// known).
    pub parked_bytes: Option<u64>,
}

/// The state column of a process: `running`, or where its park stands.
fn process_state(p: &crate::model::ProcessSample) -> &'static str {
    p.parked.map_or("running", |i| i.state.label())
}

/// The whole `snapshot --format json` document.
#[derive(Debug, Serialize)]
struct SnapshotOut<'a> {
    /// When it was taken, RFC 3339.
    pub timestamp: String,
    /// Every GPU.
    pub devices: Vec<DeviceOut<'a>>,
    /// Every process on them.
    pub processes: Vec<ProcessOut<'a>>,
}

impl<'a> SnapshotOut<'a> {
    /// The output view of `snap`.
    pub(crate) fn new(snap: &'a Snapshot) -> Self {
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
                    power_limit_w: d.power_limit_w,
                    sm_clock_mhz: d.sm_clock_mhz,
                    mem_clock_mhz: d.mem_clock_mhz,
                    fan_pct: d.fan_pct,
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
                        start_time_ms: i.map(|i| i.start_time_ms),
                        sm_util_pct: p.sm_util_pct,
                        container: i.and_then(|i| i.container_label()),
                        pod: i.and_then(|i| i.pod.as_deref()),
                        state: process_state(p),
                        parked_bytes: p.parked.and_then(|i| i.bytes),
                    }
                })
                .collect(),
        }
    }
}

/// Which table `snapshot --format csv` prints. The default, [`CsvTable::Processes`], is one
/// table that `pandas.read_csv` reads as is; only [`CsvTable::Both`] puts two tables in one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CsvTable {
    /// One row per process and GPU, with that GPU's uuid, name, total and used memory on the
    /// row, so each row stands alone (the default).
    Processes,
    /// One row per GPU, the columns of `export --table devices`.
    Devices,
    /// The devices table, a blank line, then the processes table: two tables in one file (for
    /// reading by eye; split it on the blank line before giving it to a CSV reader).
    Both,
}

/// Pretty JSON.
///
/// # Errors
/// Only if serialisation fails (it does not for these types).
pub fn to_json(snap: &Snapshot) -> serde_json::Result<String> {
    serde_json::to_string_pretty(&SnapshotOut::new(snap))
}

/// CSV with the columns of `export` (memory in MiB, `timestamp` in RFC 3339 UTC and `unix_ms`
/// on every row); a missing reading is an empty cell. See [`CsvTable`] for the tables.
///
/// # Errors
/// If writing to `out` fails.
pub fn write_csv(
    snap: &Snapshot,
    table: CsvTable,
    out: &mut dyn std::io::Write,
) -> csv::Result<()> {
    write_csv_with(snap, table, CsvText::default(), out)
}

/// How the text cells (names, users, command lines, uuids, container and pod names) of
/// `snapshot --format csv` are written. By default exactly as read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CsvText {
    /// Control characters as escapes (`\x1b`, `\n`): for a terminal, so a process's name or
    /// command line cannot send escape sequences to it. `snapshot` sets it when its output is
    /// a terminal.
    pub escape_control: bool,
    /// `--excel-safe`: a cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return
    /// gets a `'` in front, so a spreadsheet shows it as text instead of running it as a
    /// formula. Changes the data: off by default.
    pub excel_safe: bool,
}

impl CsvText {
    /// `s` as this option writes it.
    pub(crate) fn cell<'a>(&self, s: &'a str) -> std::borrow::Cow<'a, str> {
        let s = if self.escape_control {
            crate::host::term::escape_control(s)
        } else {
            std::borrow::Cow::Borrowed(s)
        };
        if self.excel_safe && s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
            return std::borrow::Cow::Owned(format!("'{s}"));
        }
        s
    }
}

/// [`write_csv`] with the text cells written as `text` says.
///
/// # Errors
/// If writing to `out` fails.
pub fn write_csv_with(
    snap: &Snapshot,
    table: CsvTable,
    text: CsvText,
    out: &mut dyn std::io::Write,
) -> csv::Result<()> {
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(&mut *out);
    if table != CsvTable::Processes {
        write_devices(snap, text, &mut w)?;
    }
    if table == CsvTable::Both {
        w.flush()?;
        drop(w);
        out.write_all(b"\n")?;
        w = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(&mut *out);
    }
    if table != CsvTable::Devices {
        write_processes(snap, text, &mut w)?;
    }
    w.flush()?;
    Ok(())
}

/// The header of `snapshot --format csv --table devices` (that of `export --table devices`).
pub const DEVICE_HEADER: &[&str] = &[
    "timestamp",
    "unix_ms",
    "device_index",
    "uuid",
    "name",
    "memory_total_mib",
    "memory_used_mib",
    "memory_reserved_mib",
    "memory_free_mib",
    "utilization_gpu_pct",
    "temperature_c",
    "power_w",
];

/// The header of `snapshot --format csv` (`--table processes`): the columns of
/// `export --table processes` (without `container`, `pod`), then the process's SM
/// utilisation, its GPU's columns, and its container and pod.
pub const PROCESS_HEADER: &[&str] = &[
    "timestamp",
    "unix_ms",
    "device_index",
    "pid",
    "start_time",
    "name",
    "user",
    "used_mib",
    "cmdline",
    "sm_util_pct",
    "device_uuid",
    "device_name",
    "device_memory_total_mib",
    "device_memory_used_mib",
    "container",
    "pod",
    "state",
];

fn write_devices<W: std::io::Write>(
    snap: &Snapshot,
    t: CsvText,
    w: &mut csv::Writer<W>,
) -> csv::Result<()> {
    // The header is written by hand so an empty table still has one.
    w.write_record(DEVICE_HEADER)?;
    let ts = rfc3339(snap.taken_at_ms);
    let ms = snap.taken_at_ms.to_string();
    for d in &snap.devices {
        w.write_record([
            ts.as_str(),
            &ms,
            &d.index.to_string(),
            &t.cell(&d.uuid),
            &t.cell(&d.name),
            &mib(d.memory_total_bytes),
            &mib(d.memory_used_bytes),
            &mib(d.memory_reserved_bytes),
            &mib(d.memory_free_bytes),
            &opt(d.utilization_gpu_pct),
            &opt(d.temperature_c),
            &d.power_w.map(watts).unwrap_or_default(),
        ])?;
    }
    Ok(())
}

fn write_processes<W: std::io::Write>(
    snap: &Snapshot,
    t: CsvText,
    w: &mut csv::Writer<W>,
) -> csv::Result<()> {
    w.write_record(PROCESS_HEADER)?;
    let ts = rfc3339(snap.taken_at_ms);
    let ms = snap.taken_at_ms.to_string();
    for p in &snap.processes {
        let i = p.info.as_ref();
        let dev = snap.devices.iter().find(|d| d.index == p.device_index);
        w.write_record([
            ts.as_str(),
            &ms,
            &p.device_index.to_string(),
            &p.pid.to_string(),
            &i.map(|i| rfc3339(i.start_time_ms)).unwrap_or_default(),
            &t.cell(i.map_or("", |i| i.name.as_str())),
            &t.cell(i.map_or("", |i| i.user.as_str())),
            &mib(p.used_bytes),
            &t.cell(i.map_or("", |i| i.cmdline.as_str())),
            &opt(p.sm_util_pct),
            &t.cell(dev.map_or("", |d| d.uuid.as_str())),
            &t.cell(dev.map_or("", |d| d.name.as_str())),
            &mib(dev.and_then(|d| d.memory_total_bytes)),
            &mib(dev.and_then(|d| d.memory_used_bytes)),
            &t.cell(&i.and_then(|i| i.container_label()).unwrap_or_default()),
            &t.cell(i.and_then(|i| i.pod.as_deref()).unwrap_or("")),
            process_state(p),
        ])?;
    }
    Ok(())
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

const MIB: u64 = 1 << 20;

/// MiB as `export` writes them: up to three decimals, trailing zeros dropped, exact for whole
/// MiB; empty for a missing reading.
pub(crate) fn mib(bytes: Option<u64>) -> String {
    let Some(b) = bytes else {
        return String::new();
    };
    thousandths(b / MIB, (b % MIB) * 1000 / MIB)
}

/// Watts as `export` writes them: milliwatt precision, trailing zeros dropped.
fn watts(w: f64) -> String {
    let mw = (w.max(0.0) * 1000.0).round() as u64;
    thousandths(mw / 1000, mw % 1000)
}

/// `whole` and `frac` thousandths (0..1000) as a decimal without trailing zeros.
fn thousandths(whole: u64, frac: u64) -> String {
    if frac == 0 {
        return whole.to_string();
    }
    let f = format!("{frac:03}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::{mib, watts};

    #[test]
    fn mib_matches_the_export_format() {
        assert_eq!(mib(None), "");
        assert_eq!(mib(Some(0)), "0");
        assert_eq!(mib(Some(5 << 20)), "5");
        assert_eq!(mib(Some((5 << 20) + (1 << 19))), "5.5");
        assert_eq!(mib(Some((1 << 20) + 1)), "1");
        assert_eq!(mib(Some((1 << 20) + 1050)), "1.001");
        assert_eq!(watts(251.25), "251.25");
        assert_eq!(watts(-1.0), "0");
    }
}
