//! Session logs: an append-only file of framed records that a crash cannot corrupt beyond its
//! last record, written while the app runs, reopened later and exported to CSV.
//!
//! # Layout
//! A file is a sequence of records:
//!
//! ```text
//! record  := 0xA5 0x57 kind:u8 len:varint payload[len] crc32:u32le
//! crc32   := CRC-32 (IEEE) of kind, the len bytes and the payload
//! kind    := 1 header (JSON) | 2 sample (binary, below) | 3 event (JSON)
//! ```
//!
//! A sample payload is self-contained (no record depends on another, so a lost record loses
//! only itself):
//!
//! ```text
//! sample  := unix_ms:varint n_dev:varint device* n_proc:varint process*
//! device  := index:varint present:u8 [total_kib used_kib reserved_kib free_kib : varint]
//!            [util_pct:u8] [temp_c:u8] [power_mw:varint]     (fields present per bit 0..6)
//!            [extra:u8 [power_cap_mw:varint] [sm_mhz:varint] [mem_mhz:varint] [fan_pct:u8]
//!                      [time_to_full_s:f64le] [time_to_full_earliest_s:f64le]]
//!                                  (version 2: `extra` when bit 7 is set; fields per its bit 0..3;
//!                                   version 4: the forecast, bits 4..5)
//! process := id:varint used:varint   (0 = unknown; else (MiB << 1) + 1 … see [`format`])
//!            [torch_section]           (version 2, only when a process has PyTorch figures)
//! torch_section := n:varint (position:varint present:u8 [allocated reserved inactive_split]
//!            [alloc_retries] [ooms])*  (varints, bytes; see [`format::encode_sample_with_torch`])
//! ```
//!
//! Version 2 added the devices' power cap, clocks and fan (bit 7 of `present`) and the
//! optional torch section (PyTorch's allocator figures, from the `vramwarden_torch`
//! companion); a version 2 sample with neither is a version 1 sample. Version 3 added the
//! `park_state` event (a process's park as its samples show it). Version 4 added the OOM
//! forecast as the engine showed it (each GPU's likely and earliest time to full), so a replay
//! shows it too. This build reads every
//! version. A version 1 build reports a version 2 log as an unknown version and cannot decode
//! its samples that carry either (it keeps the others).
//!
//! Process ids are session-local; a `process_start` event names each (pid, start time, GPU,
//! name, command line, user), and a `process_table` event repeats every live definition every
//! [`writer::TABLE_EVERY`] samples so a damaged `process_start` loses no name for long.

pub mod catalog;
pub mod csv_export;
pub mod format;
mod id_table;
pub mod parks;
pub mod reader;
pub mod writer;

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;

/// Version of the file format written by this build (2: samples may carry the devices' power
/// cap, clocks and fan, and PyTorch's figures; 3: `park_state` events; 4: the forecast's time
/// to full per GPU).
/// Every version from 1 up to it is read.
pub const FORMAT_VERSION: u32 = 4;
/// File name extension of session logs.
pub(crate) const EXTENSION: &str = "vwlog";

/// Static facts about one GPU, in the header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeaderDevice {
    /// NVML index.
    pub index: u32,
    /// GPU uuid.
    pub uuid: String,
    /// Name.
    pub name: String,
    /// Total memory in bytes.
    pub memory_total_bytes: Option<u64>,
    /// PCI bus id.
    #[serde(default)]
    pub pci_bus_id: Option<String>,
}

/// The first record of a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// vramwarden version that wrote it.
    pub app_version: String,
    /// Host name.
    pub host: String,
    /// "NVML", "Simulated" or "nvidia-smi import".
    pub source: String,
    /// Driver version.
    pub driver_version: Option<String>,
    /// NVML version.
    pub nvml_version: Option<String>,
    /// When recording started.
    pub started_ms: UnixMs,
    /// Sampling interval.
    pub interval_ms: u64,
    /// The GPUs.
    pub devices: Vec<HeaderDevice>,
}

/// A process's definition in the log: its session-local id and GPU, and the same facts as
/// everywhere else ([`crate::model::ProcInfo`], its fields inline in the JSON, as before).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcDef {
    /// Session-local id used by sample records.
    pub id: u32,
    /// OS pid.
    pub pid: u32,
    /// GPU.
    pub device_index: u32,
    /// Name, command line, owner, start time (0 if unknown), container and pod.
    #[serde(flatten)]
    pub info: crate::model::ProcInfo,
}

/// What a leak event says about the series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeakInfo {
    /// OS pid (0 for ghost memory).
    pub pid: u32,
    /// Process start time (ms), with the pid its identity; 0 for ghost memory.
    pub start_time_ms: UnixMs,
    /// GPU.
    pub device_index: u32,
    /// Process name ("ghost memory" for memory no process accounts for).
    pub name: String,
    /// Owner.
    #[serde(default)]
    pub user: String,
    /// True for memory no listed process accounts for.
    #[serde(default)]
    pub ghost: bool,
    /// When the growth began.
    pub since_ms: UnixMs,
    /// Growth rate.
    pub rate_mib_per_min: f64,
    /// Why it was called a leak: the shape the detector saw, in a sentence that starts with
    /// its name ("steady growth: …", "rising floor: …"); empty in logs from before leaks v4.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// Something that happened, written as it happens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A process appeared on a GPU.
    ProcessStart {
        /// When it was first seen.
        unix_ms: UnixMs,
        /// Its definition.
        #[serde(flatten)]
        def: ProcDef,
    },
    /// A process left a GPU.
    ProcessExit {
        /// When it was first missed.
        unix_ms: UnixMs,
        /// Session-local id.
        id: u32,
        /// OS pid (for readers that lost the start).
        pid: u32,
        /// GPU.
        device_index: u32,
    },
    /// Every live definition again (resynchronisation, not shown as an event).
    ProcessTable {
        /// When written.
        unix_ms: UnixMs,
        /// Live processes.
        procs: Vec<ProcDef>,
    },
    /// A series started to leak.
    LeakStarted {
        /// When it was flagged.
        unix_ms: UnixMs,
        /// The leak.
        #[serde(flatten)]
        leak: LeakInfo,
    },
    /// A leak ended (growth stopped or memory was freed).
    LeakEnded {
        /// When it ended.
        unix_ms: UnixMs,
        /// The leak.
        #[serde(flatten)]
        leak: LeakInfo,
        /// Memory gained over the episode.
        grown_mib: f64,
        /// Highest memory in the episode.
        peak_mib: f64,
    },
    /// A rule or the user acted (or would have, in dry run), or was kept from acting.
    Activity {
        /// When.
        unix_ms: UnixMs,
        /// Rule name, or "manual".
        rule: String,
        /// Target pid (0 for a GPU-wide rule).
        pid: u32,
        /// GPU.
        device_index: u32,
        /// Target name.
        name: String,
        /// Target user.
        user: String,
        /// The action.
        action: String,
        /// `would_act`, `acted`, `failed` or `skipped`.
        outcome: crate::model::outcome::Outcome,
        /// What happened, in words.
        detail: String,
    },
    /// A process left a GPU that was nearly full in the seconds before: it may have died of
    /// an out-of-memory error. Lists who held the GPU at that moment.
    OomSuspected {
        /// When the process was first missed.
        unix_ms: UnixMs,
        /// GPU.
        device_index: u32,
        /// Highest used / total of the GPU in the seconds before (percent).
        used_pct: f64,
        /// The GPU's memory size (MiB), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total_mib: Option<f64>,
        /// The processes that left (usually one).
        victims: Vec<OomHolder>,
        /// Every process that held memory on the GPU in the last sample before, largest first.
        holders: Vec<OomHolder>,
    },
    /// A process was parked or resumed (or a park or resume failed): its GPU memory moved
    /// to host memory and back through the driver's checkpoint API.
    Park {
        /// When it ended.
        unix_ms: UnixMs,
        /// OS pid.
        pid: u32,
        /// Its start time (ms since the epoch).
        #[serde(default)]
        start_time_ms: UnixMs,
        /// GPU.
        device_index: u32,
        /// Its name.
        name: String,
        /// `park` or `resume`.
        action: String,
        /// GPU memory moved (bytes), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bytes: Option<u64>,
        /// Seconds the driver took.
        seconds: f64,
        /// Whether it went through.
        ok: bool,
        /// What happened, in words.
        detail: String,
    },
    /// A process's park as its samples show it changed (version 3): parked, being parked or
    /// resumed, or back on its GPU (`park` absent). Written for every park, one vramwarden
    /// made and one it only saw (a simulated park), so a replay shows what the window showed.
    ParkState {
        /// The sample it was first seen in.
        unix_ms: UnixMs,
        /// Session-local id.
        id: u32,
        /// OS pid (for readers that lost the start).
        pid: u32,
        /// GPU.
        device_index: u32,
        /// Where the park stands, with the bytes in host memory and since when; absent once
        /// the process is back on its GPU.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        park: Option<crate::model::ParkInfo>,
    },
    /// A GPU is forecast full within the warning time (the OOM forecast became an alert).
    OomForecast {
        /// When it was raised.
        unix_ms: UnixMs,
        /// GPU.
        device_index: u32,
        /// Seconds until full at the rate its processes grow.
        full_in_s: f64,
        /// The processes whose growth drives it, largest first.
        drivers: Vec<OomHolder>,
    },
    /// The forecast of an earlier [`Event::OomForecast`] receded.
    OomForecastEnded {
        /// When.
        unix_ms: UnixMs,
        /// GPU.
        device_index: u32,
        /// When the alert was raised.
        raised_ms: UnixMs,
    },
    /// Recording was paused or resumed by the user, or resumed after writes failed (then
    /// `gap` says what was lost and why).
    Recording {
        /// When.
        unix_ms: UnixMs,
        /// True when resumed, false when paused.
        active: bool,
        /// Set when writing resumed after failures: the samples that are not in the log.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gap: Option<RecordingGap>,
    },
}

/// A process on a GPU at the moment of an OOM suspicion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OomHolder {
    /// OS pid.
    pub pid: u32,
    /// Start time (ms since the epoch), 0 if unknown.
    #[serde(default)]
    pub start_time_ms: UnixMs,
    /// Short name.
    pub name: String,
    /// Owner.
    #[serde(default)]
    pub user: String,
    /// GPU memory it held in the last sample before (MiB).
    pub mib: f64,
    /// How much it gained over the minute before (MiB; negative: it shrank), when a minute
    /// of its history was held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grown_1m_mib: Option<f64>,
    /// Cache its allocator could have released (MiB), where a companion reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub releasable_mib: Option<f64>,
    /// How much it grew from its lowest point in the minutes before (MiB; see
    /// [`crate::detect::oom_watch::CAUSE_SPAN_MS`]), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grown_recent_mib: Option<f64>,
    /// Over how long that growth came (s: from its lowest point to the last sample), when
    /// known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grown_over_s: Option<f64>,
    /// For the likely cause: its share of all the growth on the GPU in the minutes before
    /// (percent; the processes that grew, itself included): how sure the verdict is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause_share_pct: Option<f64>,
    /// The likely cause: the process whose growth in the minutes before filled the GPU (at
    /// most one per suspicion; it may be the process that left).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub likely_cause: bool,
}

impl OomHolder {
    /// Process `pid` (started at `start_time_ms`) holding `mib`, with none of the figures an
    /// OOM suspicion adds (growth, releasable cache, likely cause).
    pub(crate) fn holding(
        pid: u32,
        start_time_ms: UnixMs,
        name: String,
        user: String,
        mib: f64,
    ) -> Self {
        Self {
            pid,
            start_time_ms,
            name,
            user,
            mib,
            grown_1m_mib: None,
            releasable_mib: None,
            grown_recent_mib: None,
            grown_over_s: None,
            cause_share_pct: None,
            likely_cause: false,
        }
    }
}

/// Samples a session log is missing because writing failed (full disk, I/O error).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordingGap {
    /// Time of the first sample that could not be written.
    pub from_ms: UnixMs,
    /// Time of the last sample that could not be written.
    pub to_ms: UnixMs,
    /// Samples not written.
    pub lost_samples: u64,
    /// What the OS said at the first failure.
    pub cause: String,
}

impl Event {
    /// When it happened.
    pub fn unix_ms(&self) -> UnixMs {
        match self {
            Event::ProcessStart { unix_ms, .. }
            | Event::ProcessExit { unix_ms, .. }
            | Event::ProcessTable { unix_ms, .. }
            | Event::LeakStarted { unix_ms, .. }
            | Event::LeakEnded { unix_ms, .. }
            | Event::Activity { unix_ms, .. }
            | Event::OomSuspected { unix_ms, .. }
            | Event::Park { unix_ms, .. }
            | Event::ParkState { unix_ms, .. }
            | Event::OomForecast { unix_ms, .. }
            | Event::OomForecastEnded { unix_ms, .. }
            | Event::Recording { unix_ms, .. } => *unix_ms,
        }
    }
}

/// The folder session logs go to: `$VRAMWARDEN_DATA_DIR/sessions` when that variable is set
/// (tests), else the platform data folder (`~/.local/share/vramwarden/sessions` on Linux),
/// else (no home folder) `/var/lib/vramwarden/sessions`; never the current folder.
pub(crate) fn default_dir() -> std::path::PathBuf {
    if let Some(d) = std::env::var_os("VRAMWARDEN_DATA_DIR") {
        return std::path::PathBuf::from(d).join("sessions");
    }
    crate::host::paths::default_data_dir().join("sessions")
}

/// How sure a likely cause is, from what was seen: its rate and how long it grew, and its
/// share of the growth on the GPU — " (over 62 s, 3.0 GiB/min, 91 % of the growth: sure)".
pub(crate) fn how_sure(h: &OomHolder) -> String {
    let grown = h.grown_recent_mib.unwrap_or(0.0);
    let over = h
        .grown_over_s
        .filter(|s| *s > 0.0)
        .map_or(String::new(), |s| {
            format!(
                "over {s:.0} s, {:.1} GiB/min, ",
                grown / 1024.0 / (s / 60.0)
            )
        });
    match h.cause_share_pct {
        Some(p) => {
            let verdict = if p >= 80.0 {
                "sure"
            } else if p >= 50.0 {
                "probable"
            } else {
                "one of several that grew"
            };
            format!(" ({over}{p:.0} % of the growth: {verdict})")
        }
        None if !over.is_empty() => format!(" ({})", over.trim_end_matches(", ")),
        None => String::new(),
    }
}

/// One line for people (the CSV's detail column, notifications): "sawfloor (PID 463)
/// holding 2.1 GiB left while the GPU was 99.4 % full; likely cause: bloat (PID 462), +116.4
/// GiB in the minutes before; holders: bloat (PID 462) 117.3 GiB (+115.2 GiB in the minute
/// before), …" (the likely cause first, then the holders by size).
pub fn describe_oom(used_pct: f64, victims: &[OomHolder], holders: &[OomHolder]) -> String {
    let gib = |m: f64| format!("{:.1} GiB", m / 1024.0);
    let who = |h: &OomHolder| format!("{} (PID {})", h.name, h.pid);
    let cause = victims
        .iter()
        .chain(holders)
        .find(|h| h.likely_cause)
        .map_or(String::new(), |h| {
            format!(
                "; likely cause: {}{}, +{} in the minutes before{}",
                who(h),
                if victims.iter().any(|v| v.pid == h.pid) {
                    " itself"
                } else {
                    ""
                },
                gib(h.grown_recent_mib.unwrap_or(0.0)),
                how_sure(h)
            )
        });
    let left: Vec<String> = victims
        .iter()
        .map(|v| format!("{} holding {}", who(v), gib(v.mib)))
        .collect();
    let held: Vec<String> = holders
        .iter()
        .take(5)
        .map(|h| {
            let grew = h
                .grown_1m_mib
                .filter(|g| g.abs() >= 1.0)
                .map_or(String::new(), |g| {
                    format!(
                        " ({}{} in the minute before)",
                        if g > 0.0 { "+" } else { "−" },
                        gib(g.abs())
                    )
                });
            let cache = h
                .releasable_mib
                .map_or(String::new(), |r| format!(", {} releasable cache", gib(r)));
            format!("{} {}{grew}{cache}", who(h), gib(h.mib))
        })
        .collect();
    let more = holders.len().saturating_sub(5);
    format!(
        "{} left while the GPU was {used_pct:.1} % full{cause}; holders: {}{}",
        left.join(", "),
        if held.is_empty() {
            "none listed".to_string()
        } else {
            held.join(", ")
        },
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

/// True for a session file name the API serves: `[A-Za-z0-9._-]`, ending `.vwlog`, not
/// starting with a dot, at most 255 bytes (so no `/`, no `..` component, no hidden file).
pub(crate) fn valid_session_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name.ends_with(&format!(".{}", EXTENSION))
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_definition_keeps_its_flat_json_and_reads_older_logs() {
        let def = ProcDef {
            id: 3,
            pid: 4242,
            device_index: 1,
            info: crate::model::ProcInfo {
                name: "python3".into(),
                cmdline: "python3 train.py".into(),
                user: "alice".into(),
                uid: 1000,
                start_time_ms: 1_700_000_000_000,
                container_id: None,
                container_name: None,
                pod: None,
            },
        };
        let v = serde_json::to_value(&def).expect("json");
        // The facts sit beside id, pid and GPU, as they did before they became one type.
        assert_eq!(v["name"], "python3");
        assert_eq!(v["start_time_ms"], 1_700_000_000_000i64);
        assert_eq!(v["uid"], 1000);
        assert!(v.get("info").is_none(), "{v}");
        assert!(v.get("pod").is_none(), "{v}");
        // A definition as a log of format 2 before container names wrote it.
        let old = r#"{"id":3,"pid":4242,"device_index":1,"start_time_ms":1700000000000,"name":"python3","cmdline":"python3 train.py","user":"alice","uid":1000,"container_id":null}"#;
        let back: ProcDef = serde_json::from_str(old).expect("an older definition");
        assert_eq!(back, def);
    }
}
