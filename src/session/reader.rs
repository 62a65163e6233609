//! Reads a session log back. It never panics on any input: it keeps every complete,
//! checksummed record, skips damaged bytes (resynchronising on the next record marker) and
//! reports how much it skipped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::format::{
    decode_sample, read_record, DecodedSample, KIND_EVENT, KIND_HEADER, KIND_SAMPLE, MAGIC,
};
use super::{Event, Header, ProcDef};
use crate::model::{ProcInfo, ProcessSample, Snapshot, SourceInfo, UnixMs};
use crate::monitor::Monitor;

/// What reading a file found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Whole records read.
    pub records: usize,
    /// Sample records among them.
    pub samples: usize,
    /// Event records among them.
    pub events: usize,
    /// Bytes that belonged to no valid record.
    pub skipped_bytes: usize,
    /// Separate damaged stretches.
    pub skipped_regions: usize,
    /// Records whose checksum held but whose content did not decode.
    pub bad_records: usize,
    /// The file ends in a cut-off record (a crash or a copy still being written).
    pub truncated_tail: bool,
}

impl ReadReport {
    /// True when nothing was lost.
    pub fn is_clean(&self) -> bool {
        self.skipped_bytes == 0 && self.bad_records == 0
    }

    /// A sentence for the UI and the CLI.
    pub fn summary(&self) -> String {
        let mut s = format!("{} samples, {} events", self.samples, self.events);
        if !self.is_clean() {
            s += &format!(
                "; skipped {} damaged byte(s) in {} place(s){}{}",
                self.skipped_bytes,
                self.skipped_regions,
                if self.bad_records > 0 {
                    format!(", {} undecodable record(s)", self.bad_records)
                } else {
                    String::new()
                },
                if self.truncated_tail {
                    " (the last record was cut off)"
                } else {
                    ""
                }
            );
        }
        s
    }
}

/// Why a file could not be opened as a session.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// No record of a session was found.
    #[error("{0}: not a vramwarden session log (no valid record found)")]
    NotASession(PathBuf),
}

/// A session read into memory: the header, an index of sample records (decoded on demand),
/// the events and the process definitions.
#[derive(Debug, Clone)]
pub struct SessionData {
    /// Where it was read from.
    pub path: Option<PathBuf>,
    /// The header, if its record survived.
    pub header: Option<Header>,
    bytes: Vec<u8>,
    /// (time, payload range) of each sample record, in file order.
    samples: Vec<(UnixMs, usize, usize)>,
    /// Every event except resynchronisation tables, in file order.
    pub events: Vec<Event>,
    /// Process definitions by session-local id.
    pub defs: HashMap<u32, ProcDef>,
    infos: HashMap<u32, Arc<ProcInfo>>,
    /// What the reader found.
    pub report: ReadReport,
}

impl SessionData {
    /// Reads and indexes `path`.
    ///
    /// # Errors
    /// When the file cannot be read or holds no valid record.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        let bytes = std::fs::read(path).map_err(|source| ReadError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut s = Self::parse(bytes);
        if s.report.records == 0 {
            return Err(ReadError::NotASession(path.to_path_buf()));
        }
        s.path = Some(path.to_path_buf());
        Ok(s)
    }

    /// Indexes a session held in memory. Never panics.
    pub fn parse(bytes: Vec<u8>) -> Self {
        let mut s = Self {
            path: None,
            header: None,
            bytes: Vec::new(),
            samples: Vec::new(),
            events: Vec::new(),
            defs: HashMap::new(),
            infos: HashMap::new(),
            report: ReadReport::default(),
        };
        let mut pos = 0;
        let mut in_gap = false;
        while pos < bytes.len() {
            match read_record(&bytes, pos) {
                Some((rec, next)) => {
                    in_gap = false;
                    s.report.records += 1;
                    let start = rec.payload.as_ptr() as usize - bytes.as_ptr() as usize;
                    let ok = match rec.kind {
                        KIND_HEADER => serde_json::from_slice::<Header>(rec.payload)
                            .map(|h| s.header = Some(h))
                            .is_ok(),
                        KIND_SAMPLE => match sample_time(rec.payload) {
                            Some(t) => {
                                s.samples.push((t, start, start + rec.payload.len()));
                                s.report.samples += 1;
                                true
                            }
                            None => false,
                        },
                        KIND_EVENT => match serde_json::from_slice::<Event>(rec.payload) {
                            Ok(e) => {
                                s.add_event(e);
                                true
                            }
                            Err(_) => false,
                        },
                        _ => false,
                    };
                    if !ok {
                        s.report.bad_records += 1;
                    }
                    pos = next;
                }
                None => {
                    if !in_gap {
                        s.report.skipped_regions += 1;
                        in_gap = true;
                    }
                    // Resynchronise on the next marker.
                    let next = bytes[pos + 1..]
                        .windows(2)
                        .position(|w| w == MAGIC)
                        .map_or(bytes.len(), |i| pos + 1 + i);
                    s.report.skipped_bytes += next - pos;
                    if next == bytes.len() {
                        s.report.truncated_tail = true;
                    }
                    pos = next;
                }
            }
        }
        // Samples are written in time order; a damaged stretch must not reorder them.
        s.samples.sort_by_key(|(t, _, _)| *t);
        s.samples.dedup_by_key(|(t, _, _)| *t);
        s.bytes = bytes;
        s
    }

    fn add_event(&mut self, e: Event) {
        match &e {
            Event::ProcessStart { def, .. } => {
                self.define(def.clone());
                self.report.events += 1;
                self.events.push(e);
            }
            Event::ProcessTable { procs, .. } => {
                for d in procs {
                    self.define(d.clone());
                }
            }
            _ => {
                self.report.events += 1;
                self.events.push(e);
            }
        }
    }

    fn define(&mut self, d: ProcDef) {
        self.infos.insert(
            d.id,
            Arc::new(ProcInfo {
                name: d.name.clone(),
                cmdline: d.cmdline.clone(),
                user: d.user.clone(),
                uid: d.uid,
                start_time_ms: d.start_time_ms,
                container_id: d.container_id.clone(),
            }),
        );
        self.defs.insert(d.id, d);
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// True when no sample survived.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// Time of the first and last sample.
    pub fn span(&self) -> Option<(UnixMs, UnixMs)> {
        Some((self.samples.first()?.0, self.samples.last()?.0))
    }

    /// Index of the last sample at or before `ms` (the first one if `ms` is earlier).
    pub fn index_at(&self, ms: UnixMs) -> usize {
        self.samples
            .partition_point(|(t, _, _)| *t <= ms)
            .saturating_sub(1)
    }

    /// The raw decoded sample `i`.
    pub fn decoded(&self, i: usize) -> Option<DecodedSample> {
        let (_, a, b) = *self.samples.get(i)?;
        decode_sample(self.bytes.get(a..b)?)
    }

    /// Sample `i` as a [`Snapshot`], with device names from the header and process facts from
    /// their definitions.
    pub fn snapshot(&self, i: usize) -> Option<Snapshot> {
        let d = self.decoded(i)?;
        Some(self.to_snapshot(d))
    }

    fn to_snapshot(&self, d: DecodedSample) -> Snapshot {
        let mut devices = d.devices;
        if let Some(h) = &self.header {
            for dev in &mut devices {
                if let Some(hd) = h.devices.iter().find(|x| x.index == dev.index) {
                    dev.uuid.clone_from(&hd.uuid);
                    dev.name.clone_from(&hd.name);
                    dev.pci_bus_id.clone_from(&hd.pci_bus_id);
                }
            }
        }
        let processes = d
            .procs
            .iter()
            .map(|(id, used)| {
                let def = self.defs.get(id);
                ProcessSample {
                    pid: def.map_or(0, |d| d.pid),
                    device_index: def.map_or(0, |d| d.device_index),
                    used_bytes: *used,
                    kind: crate::model::ContextKind::Compute,
                    sm_util_pct: None,
                    info: self.infos.get(id).cloned(),
                }
            })
            .collect();
        Snapshot {
            taken_at_ms: d.unix_ms,
            devices,
            processes,
        }
    }

    /// (time, offset one past the end of its record) of every sample, in time order.
    pub fn sample_record_ends(&self) -> Vec<(UnixMs, usize)> {
        self.samples.iter().map(|(t, _, b)| (*t, b + 4)).collect()
    }

    /// Every sample in order, decoded (skipping any that fail to decode).
    pub fn snapshots(&self) -> impl Iterator<Item = Snapshot> + '_ {
        (0..self.samples.len()).filter_map(|i| self.snapshot(i))
    }

    /// Replays the whole session into a monitor (for the read-only session view).
    pub fn to_monitor(&self) -> Monitor {
        let interval = self.header.as_ref().map_or(1000, |h| h.interval_ms.max(1));
        let mut m = Monitor::new(interval, self.samples.len().max(1));
        m.source = Some(SourceInfo {
            kind: self
                .header
                .as_ref()
                .map_or("session".into(), |h| h.source.clone()),
            driver_version: self.header.as_ref().and_then(|h| h.driver_version.clone()),
            nvml_version: self.header.as_ref().and_then(|h| h.nvml_version.clone()),
            cuda_version: None,
            host: self
                .header
                .as_ref()
                .map_or(String::new(), |h| h.host.clone()),
        });
        let mut events = self
            .events
            .iter()
            .filter(|e| matches!(e, Event::LeakStarted { .. } | Event::LeakEnded { .. }))
            .peekable();
        for s in self.snapshots() {
            let t = s.taken_at_ms;
            m.apply(s, t);
            while let Some(e) = events.next_if(|e| e.unix_ms() <= t) {
                crate::leak_watch::record_event(&mut m, e, self.path.as_deref());
            }
        }
        for e in events {
            crate::leak_watch::record_event(&mut m, e, self.path.as_deref());
        }
        m
    }
}

fn sample_time(payload: &[u8]) -> Option<UnixMs> {
    let mut p = 0;
    super::format::get_varint(payload, &mut p).and_then(|v| i64::try_from(v).ok())
}
