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
                    origin: crate::model::Origin::Recorded,
                    stale: false,
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
        let events = self
            .events
            .iter()
            .filter(|e| matches!(e, Event::LeakStarted { .. } | Event::LeakEnded { .. }));
        self.replay_into(&mut m);
        for e in events {
            crate::leak_watch::record_event(&mut m, e, self.path.as_deref());
        }
        m
    }
}

impl SessionData {
    /// Builds the monitor's history and process table in one pass over the samples (series are
    /// filled directly by session-local id; no per-sample snapshot is built).
    fn replay_into(&self, m: &mut Monitor) {
        use crate::history::{to_mib, History, Series};
        use std::collections::{HashMap, VecDeque};
        #[derive(Default)]
        struct Stats {
            series: Series,
            first: Option<(u64, UnixMs)>,
            last: (u64, UnixMs),
            peak: u64,
            last_used: Option<u64>,
        }
        let mut times: VecDeque<UnixMs> = VecDeque::with_capacity(self.samples.len());
        let mut devices: Vec<Series> = Vec::new();
        let mut ghosts: Vec<Series> = Vec::new();
        let mut by_id: Vec<Stats> = Vec::new();
        let mut owned: Vec<u64> = Vec::new();
        let mut last_decoded = None;
        for i in 0..self.samples.len() {
            let Some(d) = self.decoded(i) else { continue };
            let tick = times.len() as u64;
            times.push_back(d.unix_ms);
            owned.iter_mut().for_each(|o| *o = 0);
            for (id, used) in &d.procs {
                let idx = *id as usize;
                if by_id.len() <= idx {
                    by_id.resize_with(idx + 1, Stats::default);
                }
                let st = &mut by_id[idx];
                st.series.push(tick, to_mib(*used));
                st.first.get_or_insert((tick, d.unix_ms));
                st.last = (tick, d.unix_ms);
                st.last_used = *used;
                if let Some(u) = used {
                    st.peak = st.peak.max(*u);
                    let dev = self.defs.get(id).map_or(0, |x| x.device_index) as usize;
                    if owned.len() <= dev {
                        owned.resize(dev + 1, 0);
                    }
                    owned[dev] += u;
                }
            }
            for dev in &d.devices {
                let i = dev.index as usize;
                if devices.len() <= i {
                    devices.resize_with(i + 1, Series::default);
                    ghosts.resize_with(i + 1, Series::default);
                }
                devices[i].push(tick, to_mib(dev.memory_used_bytes));
                let ghost = dev
                    .memory_used_bytes
                    .map(|u| u.saturating_sub(owned.get(i).copied().unwrap_or(0)));
                ghosts[i].push(tick, to_mib(ghost));
            }
            last_decoded = Some(d);
        }
        let end_tick = times.len() as u64;
        let end_ms = times.back().copied().unwrap_or(0);
        let mut processes = HashMap::with_capacity(by_id.len());
        let mut rows = Vec::new();
        for (id, st) in by_id.into_iter().enumerate() {
            let (Some(def), Some((_, first_ms))) = (self.defs.get(&(id as u32)), st.first) else {
                continue;
            };
            let key = (
                crate::model::ProcessKey {
                    pid: def.pid,
                    start_time_ms: def.start_time_ms,
                },
                def.device_index,
            );
            let alive = st.last.0 + 1 == end_tick;
            let value_at = |t: u64| {
                st.series
                    .values(t, t + 1)
                    .first()
                    .map(|(_, v)| *v)
                    .filter(|v| *v != crate::history::NONE)
            };
            let minute = 60_000 / m.interval_ms.max(1);
            let delta = (alive && end_tick > minute)
                .then(|| {
                    Some(
                        (value_at(end_tick - 1)? as i64 - value_at(end_tick - 1 - minute)? as i64)
                            * crate::model::MIB as i64,
                    )
                })
                .flatten();
            rows.push(crate::monitor::ProcessRow {
                key: key.0,
                device_index: key.1,
                name: if def.name.is_empty() {
                    "?".into()
                } else {
                    def.name.clone()
                },
                cmdline: def.cmdline.clone(),
                user: def.user.clone(),
                container_id: def.container_id.clone(),
                used_bytes: if alive { st.last_used } else { Some(0) },
                peak_bytes: st.peak,
                delta_1m_bytes: delta,
                first_seen_ms: first_ms,
                last_seen_ms: st.last.1,
                exited_at_ms: (!alive)
                    .then(|| times.get(st.last.0 as usize + 1).copied().unwrap_or(end_ms)),
                recent: VecDeque::new(),
            });
            processes.insert(key, st.series);
        }
        m.history = History::from_parts(times, devices, ghosts, processes);
        for r in rows {
            m.insert_row(r);
        }
        m.latest = last_decoded.map(|d| self.to_snapshot(d));
        m.latest_received_ms = m.latest.as_ref().map(|s| s.taken_at_ms);
        m.status = crate::monitor::SourceStatus::Running;
        m.ticks = self.samples.len() as u64;
    }
}

fn sample_time(payload: &[u8]) -> Option<UnixMs> {
    let mut p = 0;
    super::format::get_varint(payload, &mut p).and_then(|v| i64::try_from(v).ok())
}
