//! `vramwarden import nvidia-smi`: turns the CSV logs of `nvidia-smi --query-compute-apps=…
//! --format=csv -l 1` (and optionally `--query-gpu=…`) into a session, running the same engine
//! (history, leak detection) over them.
//!
//! Header names are taken as nvidia-smi writes them, in any order; values may carry units
//! (`14 MiB`) or not (`--format=csv,nounits`); `[N/A]` and `[Not Supported]` are missing
//! readings; timestamps (`2026/12/02 09:40:52.963`) are local time unless told otherwise.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use chrono::{NaiveDateTime, TimeZone};

use crate::engine::{Engine, RecordTo};
use crate::model::{
    ContextKind, DeviceSample, ProcInfo, ProcessSample, Snapshot, SourceInfo, UnixMs, MIB,
};
use crate::monitor::Monitor;

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The CSV is not what nvidia-smi writes.
    #[error("{path}: {why}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// Writing the session failed.
    #[error("{0}")]
    Write(String),
}

/// How to read the timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// The importing machine's local time zone.
    Local,
    /// UTC.
    Utc,
}

/// What an import produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportSummary {
    /// Samples written.
    pub samples: usize,
    /// Distinct processes seen.
    pub processes: usize,
    /// Leak episodes flagged.
    pub leaks: usize,
    /// Rows that could not be read (skipped).
    pub bad_rows: usize,
}

fn norm(h: &str) -> String {
    // "used_gpu_memory [MiB]" → "used_gpu_memory"; "memory.used [MiB]" → "memory.used".
    h.trim()
        .split(" [")
        .next()
        .unwrap_or("")
        .trim()
        .to_lowercase()
}

fn number(v: &str) -> Option<f64> {
    let v = v.trim();
    if v.starts_with('[') || v.is_empty() || v.eq_ignore_ascii_case("n/a") {
        return None;
    }
    let num: String = v
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    num.parse().ok()
}

fn time_ms(v: &str, zone: Zone) -> Option<UnixMs> {
    let v = v.trim();
    let t = NaiveDateTime::parse_from_str(v, "%Y/%m/%d %H:%M:%S%.f").ok()?;
    match zone {
        Zone::Utc => Some(t.and_utc().timestamp_millis()),
        Zone::Local => chrono::Local
            .from_local_datetime(&t)
            .earliest()
            .map(|t| t.timestamp_millis()),
    }
}

struct Table {
    cols: Vec<String>,
    rows: Vec<csv::StringRecord>,
}

impl Table {
    fn read(path: &Path) -> Result<Self, ImportError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ImportError::Io {
            path: p.clone(),
            source,
        })?;
        let mut r = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .flexible(true)
            .from_reader(text.as_bytes());
        let cols: Vec<String> = r
            .headers()
            .map_err(|e| ImportError::Format {
                path: p.clone(),
                why: e.to_string(),
            })?
            .iter()
            .map(norm)
            .collect();
        // nvidia-smi -l repeats nothing, but a concatenation of several logs repeats the header.
        let rows = r
            .records()
            .filter_map(Result::ok)
            .filter(|rec| rec.get(0).map(norm) != cols.first().cloned())
            .collect();
        Ok(Self { cols, rows })
    }

    fn col(&self, names: &[&str]) -> Option<usize> {
        names
            .iter()
            .find_map(|n| self.cols.iter().position(|c| c == n))
    }
}

/// Reads the logs and writes the session to `out`.
///
/// # Errors
/// When a file cannot be read, lacks the needed columns, or the session cannot be written.
pub fn import_nvidia_smi(
    apps: &Path,
    gpu: Option<&Path>,
    out: &Path,
    zone: Zone,
) -> Result<ImportSummary, ImportError> {
    let at = Table::read(apps)?;
    let need = |t: &Table, names: &[&str], what: &str, path: &Path| {
        t.col(names).ok_or_else(|| ImportError::Format {
            path: path.display().to_string(),
            why: format!(
                "no {what} column (expected one of: {}); columns are: {}",
                names.join(", "),
                t.cols.join(", ")
            ),
        })
    };
    let c_time = need(&at, &["timestamp"], "timestamp", apps)?;
    let c_pid = need(&at, &["pid"], "pid", apps)?;
    let c_used = need(
        &at,
        &["used_gpu_memory", "used_memory"],
        "used memory",
        apps,
    )?;
    let c_uuid = at.col(&["gpu_uuid"]);
    let c_name = at.col(&["process_name", "name"]);
    let c_bus = at.col(&["gpu_bus_id"]);

    let mut bad_rows = 0;
    // uuid → index, from the GPU log when there is one, else in order of appearance.
    let mut index_of: BTreeMap<String, u32> = BTreeMap::new();
    let mut device_ticks: BTreeMap<UnixMs, Vec<DeviceSample>> = BTreeMap::new();
    if let Some(g) = gpu {
        let gt = Table::read(g)?;
        let t = need(&gt, &["timestamp"], "timestamp", g)?;
        let idx = gt.col(&["index"]);
        let uuid = gt.col(&["uuid"]);
        let name = gt.col(&["name"]);
        let col = |n: &[&str]| gt.col(n);
        let (total, used, reserved, free) = (
            col(&["memory.total"]),
            col(&["memory.used"]),
            col(&["memory.reserved"]),
            col(&["memory.free"]),
        );
        let (util, temp, power, bus) = (
            col(&["utilization.gpu"]),
            col(&["temperature.gpu"]),
            col(&["power.draw"]),
            col(&["pci.bus_id"]),
        );
        for rec in &gt.rows {
            let get = |c: Option<usize>| c.and_then(|c| rec.get(c));
            let Some(ts) = get(Some(t)).and_then(|v| time_ms(v, zone)) else {
                bad_rows += 1;
                continue;
            };
            let u = get(uuid).unwrap_or("").to_string();
            let i = get(idx).and_then(number).map_or_else(
                || index_of.get(&u).copied().unwrap_or(index_of.len() as u32),
                |v| v as u32,
            );
            if !u.is_empty() {
                index_of.insert(u.clone(), i);
            }
            let mib = |c: Option<usize>| get(c).and_then(number).map(|v| (v * MIB as f64) as u64);
            device_ticks.entry(ts).or_default().push(DeviceSample {
                index: i,
                uuid: u,
                name: get(name).unwrap_or("").to_string(),
                pci_bus_id: get(bus).map(str::to_string),
                memory_total_bytes: mib(total),
                memory_used_bytes: mib(used),
                memory_reserved_bytes: mib(reserved),
                memory_free_bytes: mib(free),
                utilization_gpu_pct: get(util).and_then(number).map(|v| v as u32),
                temperature_c: get(temp).and_then(number).map(|v| v as u32),
                power_w: get(power).and_then(number),
                process_list_error: None,
            });
        }
    }
    let mut app_ticks: BTreeMap<UnixMs, Vec<ProcessSample>> = BTreeMap::new();
    let mut pids = std::collections::HashSet::new();
    let mut infos: BTreeMap<(u32, String), Arc<ProcInfo>> = BTreeMap::new();
    for rec in &at.rows {
        let ts = rec.get(c_time).and_then(|v| time_ms(v, zone));
        let pid = rec.get(c_pid).and_then(number).map(|v| v as u32);
        let (Some(ts), Some(pid)) = (ts, pid) else {
            bad_rows += 1;
            continue;
        };
        let uuid = c_uuid
            .and_then(|c| rec.get(c))
            .or_else(|| c_bus.and_then(|c| rec.get(c)))
            .unwrap_or("GPU")
            .to_string();
        let next = index_of.len() as u32;
        let device_index = *index_of.entry(uuid).or_insert(next);
        let name = c_name.and_then(|c| rec.get(c)).unwrap_or("?").to_string();
        pids.insert((pid, device_index));
        let info = infos
            .entry((pid, name.clone()))
            .or_insert_with(|| {
                Arc::new(ProcInfo {
                    name: name.rsplit('/').next().unwrap_or(&name).to_string(),
                    cmdline: name.clone(),
                    ..ProcInfo::default()
                })
            })
            .clone();
        app_ticks.entry(ts).or_default().push(ProcessSample {
            pid,
            device_index,
            used_bytes: rec
                .get(c_used)
                .and_then(number)
                .map(|v| (v * MIB as f64) as u64),
            kind: ContextKind::Compute,
            sm_util_pct: None,
            info: Some(info),
            origin: crate::model::Origin::Recorded,
            stale: false,
        });
    }
    // The ticks: the GPU log's when given (processes attached from the nearest apps group
    // within 700 ms), else the apps log's.
    let mut snaps: Vec<Snapshot> = Vec::new();
    if device_ticks.is_empty() {
        let n = index_of.len() as u32;
        for (t, procs) in app_ticks {
            let devices = (0..n)
                .map(|i| DeviceSample {
                    index: i,
                    uuid: index_of
                        .iter()
                        .find(|(_, v)| **v == i)
                        .map_or(String::new(), |(k, _)| k.clone()),
                    ..DeviceSample::default()
                })
                .collect();
            snaps.push(Snapshot {
                taken_at_ms: t,
                devices,
                processes: procs,
            });
        }
    } else {
        let app_times: Vec<UnixMs> = app_ticks.keys().copied().collect();
        for (t, devices) in device_ticks {
            let i = app_times.partition_point(|a| *a < t);
            let near = [i.checked_sub(1), Some(i)]
                .into_iter()
                .flatten()
                .filter_map(|j| app_times.get(j))
                .min_by_key(|a| (*a - t).abs())
                .filter(|a| (*a - t).abs() <= 700);
            let processes = near
                .and_then(|a| app_ticks.get(a))
                .cloned()
                .unwrap_or_default();
            snaps.push(Snapshot {
                taken_at_ms: t,
                devices,
                processes,
            });
        }
    }
    if snaps.is_empty() {
        return Err(ImportError::Format {
            path: apps.display().to_string(),
            why: "no rows with a readable timestamp and pid".into(),
        });
    }
    let mut gaps: Vec<i64> = snaps
        .windows(2)
        .map(|w| w[1].taken_at_ms - w[0].taken_at_ms)
        .collect();
    gaps.sort_unstable();
    let interval = gaps.get(gaps.len() / 2).copied().unwrap_or(1000).max(1) as u64;
    let shared = Arc::new(RwLock::new(Monitor::new(interval, 16)));
    let mut engine = Engine::new(shared.clone(), RecordTo::File(out.to_path_buf()), interval);
    engine.set_source(SourceInfo {
        kind: "nvidia-smi import".into(),
        host: crate::source::host_name(),
        ..SourceInfo::default()
    });
    let samples = snaps.len();
    for s in snaps {
        let t = s.taken_at_ms;
        engine.tick(s, t);
        if let Ok(m) = shared.read() {
            if let Some(e) = &m.recording.error {
                return Err(ImportError::Write(e.clone()));
            }
        }
    }
    engine.finish().map_err(ImportError::Write)?;
    let leaks = shared.read().map_or(0, |m| m.leaks.len());
    Ok(ImportSummary {
        samples,
        processes: pids.len(),
        leaks,
        bad_rows,
    })
}
