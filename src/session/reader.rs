//! Reads a session log back. It never panics on any input: it keeps every complete,
//! checksummed record, skips damaged bytes (resynchronising on the next record marker) and
//! reports how much it skipped.
//!
//! Hostile input costs bounded work: checking a candidate record costs a bounded amount
//! whatever length it claims (see [`Scanner`]), so reading is linear in the file size;
//! [`SessionData::open`] reads only regular files of at most [`MAX_FILE_BYTES`] and never
//! blocks on a FIFO.
//!
//! Logs joined end to end (`cat a.vwlog b.vwlog`) read as consecutive *segments*: each header
//! that follows a record starts one, with its own session-local process ids (the reader gives
//! the processes of later segments ids of their own, so no segment's samples take another's
//! names). Samples with a time already seen, and headers of a format version this build does
//! not know, are read as well as they can be and reported.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::format::{
    check_sample, decode_sample, DecodedSample, RawRecord, Scanner, KIND_EVENT, KIND_HEADER,
    KIND_SAMPLE,
};
use super::{Event, Header, ProcDef, FORMAT_VERSION};
use crate::model::{ProcInfo, ProcessSample, Snapshot, UnixMs};

/// Largest file [`SessionData::open`] reads (it holds the whole file in memory). A day at
/// 1 Hz with 8 GPUs and 200 processes takes about 100 MiB.
pub const MAX_FILE_BYTES: u64 = 4 << 30;

/// Longest device text (uuid, name, PCI bus id) a header keeps; longer ones are cut and
/// counted in [`ReadReport::cut_texts`]. NVML's are at most 96 bytes; a crafted name of
/// megabytes would otherwise be copied into every sample of every device.
pub const MAX_DEVICE_TEXT: usize = 128;

/// What reading a file found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// Whole records read.
    pub records: usize,
    /// Sample records among them that decoded (before duplicates are dropped).
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
    /// Sessions in the file: 1 for a log as written (0 when no record was found); more when
    /// logs were joined end to end. Each header that follows a record starts a new one, whose
    /// processes keep their own definitions.
    pub segments: usize,
    /// Samples dropped because an earlier one (in time order, then file order) had the same
    /// time.
    pub duplicate_samples: usize,
    /// The format version of a header that this build does not know (not 1 to
    /// [`FORMAT_VERSION`]);
    /// the highest one when several. Such a file is read as if it were the known version.
    pub unknown_version: Option<u32>,
    /// Bytes fed to the checksum while reading: the file once, plus at most
    /// 2 × [`super::format::CRC_STRIDE`] per record marker tried, whatever lengths they claim.
    pub checksummed_bytes: u64,
    /// Device texts in headers longer than [`MAX_DEVICE_TEXT`] bytes, cut to it.
    pub cut_texts: usize,
    /// Samples were read but no header survived: the GPUs' names and ids are unknown.
    pub(crate) no_header: bool,
}

impl ReadReport {
    /// True when nothing was lost and nothing needs the reader's attention (no damage, one
    /// segment, no duplicate times, a known format version).
    pub fn is_clean(&self) -> bool {
        self.skipped_bytes == 0
            && self.bad_records == 0
            && self.segments <= 1
            && self.duplicate_samples == 0
            && self.unknown_version.is_none()
            && self.cut_texts == 0
            && !self.no_header
    }

    /// A sentence for the UI and the CLI.
    pub fn summary(&self) -> String {
        let mut s = format!("{} samples, {} events", self.samples, self.events);
        if self.segments > 1 {
            s += &format!(
                "; {} logs joined end to end (each keeps its own processes)",
                self.segments
            );
        }
        if self.skipped_bytes > 0 {
            s += &format!(
                "; skipped {} damaged byte(s) in {} place(s){}",
                self.skipped_bytes,
                self.skipped_regions,
                if self.truncated_tail {
                    " (the last record was cut off)"
                } else {
                    ""
                }
            );
        }
        if self.bad_records > 0 {
            s += &format!("; {} undecodable record(s)", self.bad_records);
        }
        if self.duplicate_samples > 0 {
            s += &format!(
                "; dropped {} duplicate sample(s) (a time already seen)",
                self.duplicate_samples
            );
        }
        if self.no_header {
            s += "; no header survived: the GPUs' names and ids are unknown (empty in exports)";
        }
        if self.cut_texts > 0 {
            s += &format!(
                "; {} device name(s) or id(s) longer than the limit of {MAX_DEVICE_TEXT} bytes were cut",
                self.cut_texts
            );
        }
        if let Some(v) = self.unknown_version {
            s += &format!(
                "; written in unknown format version {v} (this build reads versions \
                 1 to {FORMAT_VERSION}): parts may be missing or misread"
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
    /// The file is empty.
    #[error("{0}: the file is empty (a session log that has no sample yet)")]
    Empty(PathBuf),
    /// The path names a FIFO, a device, a folder or a socket, not a regular file.
    #[error("{path}: is {kind}, not a regular file (a session log is a regular file)")]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is, in words ("a FIFO (named pipe)", "a character device", …).
        kind: &'static str,
    },
    /// The file is larger than [`MAX_FILE_BYTES`].
    #[error("{path}: {size} bytes is larger than the {limit} bytes a session log may have")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// [`MAX_FILE_BYTES`].
        limit: u64,
    },
}

/// The one field of a header every version has.
#[derive(serde::Deserialize)]
struct VersionOnly {
    format_version: u32,
}

/// A process definition as the reader keeps it: one copy, shared by every sample entry of
/// the process it replays.
#[derive(Debug, Clone)]
pub(crate) struct ProcFacts {
    /// OS pid.
    pub(crate) pid: u32,
    /// GPU.
    pub(crate) device_index: u32,
    /// Name, command line, owner, start time, container and pod.
    pub(crate) info: Arc<ProcInfo>,
}

/// One sample record in the index.
#[derive(Debug, Clone, Copy)]
struct SampleRef {
    time: UnixMs,
    /// Payload range in the file.
    start: usize,
    end: usize,
    /// Segment it belongs to.
    segment: usize,
}

/// One log of the file (see the module docs).
#[derive(Debug, Clone, Default)]
struct Segment {
    header: Option<Header>,
    /// Position in `header.devices` of each device index (the first of a repeated index):
    /// one lookup per device of a sample, whatever the number of devices.
    device_at: HashMap<u32, usize>,
    /// Session-local id → the id the reader uses; empty (identity) for the first segment.
    ids: HashMap<u32, u32>,
}

impl Segment {
    /// The reader's id of process `id` as segment number `segment` (this one) names it: the
    /// first segment keeps the file's ids; every id of a later segment's samples was mapped
    /// when the file was read (`u32::MAX`, which no process has, otherwise).
    #[inline]
    fn reader_id(&self, segment: usize, id: u32) -> u32 {
        if segment == 0 {
            id
        } else {
            self.ids.get(&id).copied().unwrap_or(u32::MAX)
        }
    }
}

/// The reader's process ids: the first segment keeps the file's ids; later segments get ids
/// no earlier segment uses.
#[derive(Debug, Default)]
struct IdSpace {
    used: HashSet<u32>,
    next: u32,
}

impl IdSpace {
    /// An id not used yet. A file holds fewer ids than bytes (far fewer than 2^32), so one
    /// is always found; `u32::MAX` is the never-reached fallback.
    fn fresh(&mut self) -> u32 {
        while self.used.len() < u32::MAX as usize {
            let id = self.next;
            self.next = self.next.wrapping_add(1);
            if self.used.insert(id) {
                return id;
            }
        }
        u32::MAX
    }

    /// The reader's id for `local` in `seg`.
    fn map(&mut self, seg: &mut Segment, local: u32) -> u32 {
        if let Some(id) = seg.ids.get(&local) {
            return *id;
        }
        let id = self.fresh();
        seg.ids.insert(local, id);
        id
    }
}

/// A session read into memory: the header, an index of sample records (decoded on demand),
/// the events and the process definitions.
#[derive(Debug, Clone)]
pub struct SessionData {
    /// Where it was read from.
    pub path: Option<PathBuf>,
    /// The header of the first segment that kept one, if any survived.
    pub header: Option<Header>,
    bytes: Vec<u8>,
    /// Every decodable sample record, in time order.
    samples: Vec<SampleRef>,
    /// While the file is read: the first segment's sample records, not checked yet (they are
    /// checked together, on two threads, once their segment ends; empty afterwards).
    unchecked: Vec<SampleRef>,
    segments: Vec<Segment>,
    /// Every event except resynchronisation tables, in file order (process ids of later
    /// segments rewritten to the reader's ids, as in the definitions).
    pub events: Vec<Event>,
    /// Process definitions by the reader's process id (the file's session-local id in the
    /// first segment, a fresh id for processes of later segments), the last of each id: what
    /// a sample's process entry takes from its definition, one lookup per entry.
    facts: super::id_table::IdTable<ProcFacts>,
    /// Each process's parks in time.
    parks: super::parks::ParkTimeline,
    /// True when the log has `park_state` events (format 3).
    park_states: bool,
    /// What the reader found.
    pub report: ReadReport,
}

/// Cuts the device texts of `h` to [`MAX_DEVICE_TEXT`] bytes (at a character boundary);
/// returns how many were cut.
fn cut_device_texts(h: &mut Header) -> usize {
    let cut = |s: &mut String| {
        if s.len() <= MAX_DEVICE_TEXT {
            return 0;
        }
        let mut end = MAX_DEVICE_TEXT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        1
    };
    h.devices
        .iter_mut()
        .map(|d| cut(&mut d.uuid) + cut(&mut d.name) + d.pci_bus_id.as_mut().map_or(0, cut))
        .sum()
}

/// Sample records from this many on are checked on two threads.
const CHECK_IN_TWO_FROM: usize = 4096;

/// The time of each sample record of `refs` (ranges of `bytes`) that decodes, None for one
/// that does not: many records are checked half here, half on a second thread.
fn sample_times(bytes: &[u8], refs: &[SampleRef]) -> Vec<Option<UnixMs>> {
    let check = |rs: &[SampleRef]| -> Vec<Option<UnixMs>> {
        rs.iter()
            .map(|r| check_sample(bytes.get(r.start..r.end)?, |_| {}))
            .collect()
    };
    if refs.len() < CHECK_IN_TWO_FROM {
        return check(refs);
    }
    let (first, second) = refs.split_at(refs.len() / 2);
    std::thread::scope(|scope| {
        let other = std::thread::Builder::new()
            .name("vramwarden-index".into())
            .spawn_scoped(scope, || check(second));
        let mut times = check(first);
        // Checking never panics; were the thread lost, its half is checked here.
        let rest = match other {
            Ok(handle) => handle.join().unwrap_or_else(|_| check(second)),
            Err(_) => check(second),
        };
        times.extend(rest);
        times
    })
}

/// Reads `path` if it is a regular file of at most [`MAX_FILE_BYTES`], without blocking on
/// (or reading from) anything else.
fn read_regular_file(path: &Path) -> Result<Vec<u8>, ReadError> {
    read_regular_prefix(path, u64::MAX)
}

/// Like [`read_regular_file`], at most the first `max` bytes.
fn read_regular_prefix(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    let io = |source| ReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let refuse = |md: &std::fs::Metadata| -> Result<u64, ReadError> {
        if !md.is_file() {
            return Err(ReadError::NotAFile {
                path: path.to_path_buf(),
                kind: file_kind(&md.file_type()),
            });
        }
        if md.len() > MAX_FILE_BYTES {
            return Err(ReadError::TooLarge {
                path: path.to_path_buf(),
                size: md.len(),
                limit: MAX_FILE_BYTES,
            });
        }
        Ok(md.len())
    };
    // Look before opening (opening some devices has effects), then check what was opened
    // (the path may have changed in between); non-blocking, so a FIFO cannot hang the open.
    refuse(&std::fs::metadata(path).map_err(io)?)?;
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path).map_err(io)?;
    let size = refuse(&file.metadata().map_err(io)?)?.min(max);
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(usize::try_from(size).unwrap_or(usize::MAX))
        .map_err(|e| io(std::io::Error::new(std::io::ErrorKind::OutOfMemory, e)))?;
    // At most the size seen: a file that grows while it is read is read as it was.
    file.take(size).read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

/// What a file that is not a regular file is, in words.
fn file_kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a folder"
    } else {
        "not a plain file"
    }
}

impl SessionData {
    /// Reads and indexes `path`.
    ///
    /// # Errors
    /// When the path is not a regular file ([`ReadError::NotAFile`]: a FIFO, a device, a
    /// folder), is larger than [`MAX_FILE_BYTES`], cannot be read, or holds no valid record.
    pub fn open(path: &Path) -> Result<Self, ReadError> {
        Self::of_file(path, read_regular_file(path)?)
    }

    /// The log `bytes` read from `path` hold: an error when there are none, or no valid
    /// record.
    fn of_file(path: &Path, bytes: Vec<u8>) -> Result<Self, ReadError> {
        if bytes.is_empty() {
            return Err(ReadError::Empty(path.to_path_buf()));
        }
        let mut s = Self::parse(bytes);
        if s.report.records == 0 {
            return Err(ReadError::NotASession(path.to_path_buf()));
        }
        s.path = Some(path.to_path_buf());
        Ok(s)
    }

    /// Reads and indexes a log [`super::catalog::list`] found, opening it the way the list
    /// did (never through a symbolic link, never blocking: see
    /// [`super::catalog::open_session_file`]), so a name swapped for a link or a FIFO after
    /// the listing is not read either.
    ///
    /// # Errors
    /// As [`SessionData::open`]; a link or anything but a regular file is an I/O error.
    pub(crate) fn open_listed(path: &Path) -> Result<Self, ReadError> {
        let io = |source| ReadError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = super::catalog::open_session_file(path).map_err(io)?;
        let size = file.metadata().map_err(io)?.len();
        if size > MAX_FILE_BYTES {
            return Err(ReadError::TooLarge {
                path: path.to_path_buf(),
                size,
                limit: MAX_FILE_BYTES,
            });
        }
        let mut bytes = Vec::new();
        file.take(size).read_to_end(&mut bytes).map_err(io)?;
        Self::of_file(path, bytes)
    }

    /// Checks quickly that `path` can be opened as a session log: a regular file, not too
    /// large, whose first bytes hold a valid record (an empty file or another kind of file
    /// fails at once, before a window opens on it).
    ///
    /// # Errors
    /// As [`SessionData::open`] would for such a file.
    pub fn check(path: &Path) -> Result<(), ReadError> {
        const PREFIX: u64 = 4 << 20;
        let bytes = read_regular_prefix(path, PREFIX)?;
        if bytes.is_empty() {
            return Err(ReadError::Empty(path.to_path_buf()));
        }
        let s = Self::parse(bytes);
        if s.report.records == 0 {
            return Err(ReadError::NotASession(path.to_path_buf()));
        }
        Ok(())
    }

    /// Indexes a session held in memory. Never panics; work is linear in `bytes.len()`.
    pub fn parse(bytes: Vec<u8>) -> Self {
        let mut s = Self {
            path: None,
            header: None,
            bytes: Vec::new(),
            samples: Vec::new(),
            unchecked: Vec::new(),
            segments: Vec::new(),
            events: Vec::new(),
            facts: super::id_table::IdTable::default(),
            parks: super::parks::ParkTimeline::default(),
            park_states: false,
            report: ReadReport::default(),
        };
        let hashed = s.take_records(&bytes);
        s.check_unchecked(&bytes);
        s.report.checksummed_bytes = hashed;
        s.report.segments = s.segments.len();
        s.report.no_header = s.header.is_none() && !s.samples.is_empty();
        s.facts.pack();
        s.sort_samples();
        s.bytes = bytes;
        s.finish_parks();
        s
    }

    /// Takes every checksummed record of `bytes`, resynchronising on the next record marker
    /// past damage (counted in the report); the bytes checksummed.
    fn take_records(&mut self, bytes: &[u8]) -> u64 {
        let mut ids = IdSpace::default();
        let mut scanner = Scanner::new(bytes);
        let mut pos = 0;
        let mut in_gap = false;
        while pos < bytes.len() {
            if let Some((rec, next)) = scanner.read_at(pos) {
                in_gap = false;
                if !self.take_record(bytes, &rec, &mut ids) {
                    self.report.bad_records += 1;
                }
                pos = next;
                continue;
            }
            if !in_gap {
                self.report.skipped_regions += 1;
                in_gap = true;
            }
            // Resynchronise on the next marker.
            let next = scanner
                .next_marker(pos + 1)
                .unwrap_or(bytes.len())
                .min(bytes.len());
            self.report.skipped_bytes += next - pos;
            if next == bytes.len() {
                self.report.truncated_tail = true;
            }
            pos = next;
        }
        scanner.hashed_bytes()
    }

    /// Puts the samples in time order, keeping the first of those with the same time.
    /// Samples are written in time order; a damaged stretch (or joined logs) must not reorder
    /// them. The sort is stable: of samples with the same time, the first kept is the first in
    /// the file.
    fn sort_samples(&mut self) {
        self.samples.sort_by_key(|r| r.time);
        let before = self.samples.len();
        self.samples.dedup_by_key(|r| r.time);
        self.report.duplicate_samples = before - self.samples.len();
    }

    /// Completes the park timeline: from the `park_state` events where the log has them, else
    /// from vramwarden's own park actions.
    fn finish_parks(&mut self) {
        if self.park_states {
            self.parks.finish();
        } else {
            let defs = self
                .defs()
                .map(|(id, d)| (id, d.pid, d.device_index, d.info.start_time_ms));
            self.parks = super::parks::ParkTimeline::from_actions(&self.events, defs);
        }
    }

    /// Takes one checksummed record; false if its content does not decode.
    fn take_record(&mut self, bytes: &[u8], rec: &RawRecord<'_>, ids: &mut IdSpace) -> bool {
        self.report.records += 1;
        let first_record = self.report.records == 1;
        if first_record {
            self.segments.push(Segment::default());
        }
        match rec.kind {
            KIND_HEADER => match serde_json::from_slice::<Header>(rec.payload) {
                Ok(h) => {
                    self.take_header(bytes, h, first_record, ids);
                    true
                }
                Err(_) => {
                    // A header this build cannot read may still say which version wrote it.
                    if let Ok(v) = serde_json::from_slice::<VersionOnly>(rec.payload) {
                        self.note_version(v.format_version);
                    }
                    false
                }
            },
            KIND_SAMPLE => self.take_sample(bytes, rec, ids),
            KIND_EVENT => match serde_json::from_slice::<Event>(rec.payload) {
                Ok(e) => {
                    let e = self.with_reader_ids(e, ids);
                    self.add_event(e);
                    true
                }
                Err(_) => false,
            },
            _ => false,
        }
    }

    fn take_header(&mut self, bytes: &[u8], mut h: Header, first_record: bool, ids: &mut IdSpace) {
        self.note_version(h.format_version);
        self.report.cut_texts += cut_device_texts(&mut h);
        if !first_record {
            if self.segments.len() == 1 {
                self.check_unchecked(bytes);
                self.reserve_first_segment_ids(bytes, ids);
            }
            self.segments.push(Segment::default());
        }
        if self.header.is_none() {
            self.header = Some(h.clone());
        }
        if let Some(seg) = self.segments.last_mut() {
            seg.device_at.clear();
            for (i, d) in h.devices.iter().enumerate() {
                seg.device_at.entry(d.index).or_insert(i);
            }
            seg.header = Some(h);
        }
    }

    fn note_version(&mut self, v: u32) {
        if !(1..=FORMAT_VERSION).contains(&v) {
            self.report.unknown_version = self.report.unknown_version.max(Some(v));
        }
    }

    /// Marks every id the first segment uses (definitions, exits, samples) as taken, so the
    /// ids given to later segments' processes differ from them.
    fn reserve_first_segment_ids(&mut self, bytes: &[u8], ids: &mut IdSpace) {
        ids.used.extend(self.facts.iter().map(|(id, _)| id));
        for e in &self.events {
            if let Event::ProcessExit { id, .. } = e {
                ids.used.insert(*id);
            }
        }
        for r in &self.samples {
            if let Some(payload) = bytes.get(r.start..r.end) {
                check_sample(payload, |id| {
                    ids.used.insert(id);
                });
            }
        }
    }

    /// Checks the first segment's sample records read so far (see [`SessionData::unchecked`]):
    /// those that decode join the index, the others count as bad records.
    fn check_unchecked(&mut self, bytes: &[u8]) {
        let refs = std::mem::take(&mut self.unchecked);
        let times = sample_times(bytes, &refs);
        for (mut r, time) in refs.into_iter().zip(times) {
            match time {
                Some(t) => {
                    r.time = t;
                    self.samples.push(r);
                    self.report.samples += 1;
                }
                None => self.report.bad_records += 1,
            }
        }
    }

    /// Takes a sample record: the first segment's are checked later, together
    /// ([`SessionData::check_unchecked`]), whose ids are the file's; a later segment's now, as
    /// its ids are mapped in file order.
    fn take_sample(&mut self, bytes: &[u8], rec: &RawRecord<'_>, ids: &mut IdSpace) -> bool {
        let segment = self.segments.len().saturating_sub(1);
        // The payload is a slice of `bytes`: its offset is the distance between the pointers.
        let start = (rec.payload.as_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize);
        if segment == 0 {
            self.unchecked.push(SampleRef {
                time: 0,
                start,
                end: start + rec.payload.len(),
                segment,
            });
            return true;
        }
        let mut local = Vec::new();
        let Some(time) = check_sample(rec.payload, |id| local.push(id)) else {
            return false;
        };
        if let Some(seg) = self.segments.last_mut() {
            for id in local {
                ids.map(seg, id);
            }
        }
        self.samples.push(SampleRef {
            time,
            start,
            end: start + rec.payload.len(),
            segment,
        });
        self.report.samples += 1;
        true
    }

    /// Rewrites the session-local ids of an event of a later segment to the reader's ids.
    fn with_reader_ids(&mut self, mut e: Event, ids: &mut IdSpace) -> Event {
        if self.segments.len() < 2 {
            return e;
        }
        let Some(seg) = self.segments.last_mut() else {
            return e;
        };
        match &mut e {
            Event::ProcessStart { def, .. } => def.id = ids.map(seg, def.id),
            Event::ProcessExit { id, .. } | Event::ParkState { id, .. } => {
                *id = ids.map(seg, *id);
            }
            Event::ProcessTable { procs, .. } => {
                for d in procs {
                    d.id = ids.map(seg, d.id);
                }
            }
            _ => {}
        }
        e
    }

    fn add_event(&mut self, e: Event) {
        if let Event::ProcessTable { procs, .. } = e {
            for d in procs {
                self.define(d);
            }
            return;
        }
        match &e {
            Event::ProcessStart { def, .. } => {
                self.define(def.clone());
                self.report.events += 1;
                self.events.push(e);
            }
            Event::ParkState {
                unix_ms, id, park, ..
            } => {
                self.park_states = true;
                self.parks.note(*id, *unix_ms, *park);
                self.report.events += 1;
                self.events.push(e);
            }
            _ => {
                self.report.events += 1;
                self.events.push(e);
            }
        }
    }

    fn define(&mut self, d: ProcDef) {
        self.facts.insert(
            d.id,
            ProcFacts {
                pid: d.pid,
                device_index: d.device_index,
                info: Arc::new(d.info),
            },
        );
    }

    /// The definition of process `id` (the reader's id, as in [`Self::events`] and
    /// [`Self::decoded`]).
    pub(crate) fn def(&self, id: u32) -> Option<&ProcFacts> {
        self.facts.get(id)
    }

    /// Every process definition with its reader's id.
    pub(crate) fn defs(&self) -> impl Iterator<Item = (u32, &ProcFacts)> {
        self.facts.iter()
    }

    /// Process `id`'s park at `t` (the reader's id), as the session's samples show it.
    pub(crate) fn park_at(&self, id: u32, t: UnixMs) -> Option<crate::model::ParkInfo> {
        self.parks.at(id, t)
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
        Some((self.samples.first()?.time, self.samples.last()?.time))
    }

    /// The indices of the samples from `from` to `to` (ms, both included).
    pub(crate) fn indices_between(&self, from: UnixMs, to: UnixMs) -> std::ops::Range<usize> {
        let start = self.samples.partition_point(|r| r.time < from);
        let end = self.samples.partition_point(|r| r.time <= to);
        start..end.max(start)
    }

    /// Index of the last sample at or before `ms` (the first one if `ms` is earlier).
    pub fn index_at(&self, ms: UnixMs) -> usize {
        self.samples
            .partition_point(|r| r.time <= ms)
            .saturating_sub(1)
    }

    /// Number of segments (logs joined end to end; 1 for a log as written).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The segment sample `i` belongs to.
    pub(crate) fn segment_of(&self, i: usize) -> Option<usize> {
        Some(self.samples.get(i)?.segment)
    }

    /// The header of segment `seg`, if its record survived.
    pub(crate) fn segment_header(&self, seg: usize) -> Option<&Header> {
        self.segments.get(seg)?.header.as_ref()
    }

    /// The raw decoded sample `i`, its process ids the reader's (those of [`Self::defs`]).
    pub fn decoded(&self, i: usize) -> Option<DecodedSample> {
        let r = *self.samples.get(i)?;
        let mut d = decode_sample(self.bytes.get(r.start..r.end)?)?;
        if r.segment > 0 {
            let seg = self.segments.get(r.segment)?;
            for (id, _) in &mut d.procs {
                *id = seg.reader_id(r.segment, *id);
            }
        }
        Some(d)
    }

    /// Sample `i` as a [`Snapshot`], with device names from its segment's header and process
    /// facts from their definitions.
    pub fn snapshot(&self, i: usize) -> Option<Snapshot> {
        let mut snap = Snapshot::default();
        self.snapshot_into(i, &mut snap).then_some(snap)
    }

    /// Sample `i` decoded into `out`, reusing what `out` holds (a sample given back by the
    /// engine): its vectors and device texts keep their memory, and a process at the same
    /// position as before keeps its facts without touching their reference count. `out` then
    /// equals [`SessionData::snapshot`]`(i)`; false (and `out` left unusable) when the sample
    /// no longer decodes.
    pub fn snapshot_into(&self, i: usize, out: &mut Snapshot) -> bool {
        let Some(r) = self.samples.get(i).copied() else {
            return false;
        };
        let Some(buf) = self.bytes.get(r.start..r.end) else {
            return false;
        };
        let seg = self.segments.get(r.segment);
        if r.segment > 0 && seg.is_none() {
            return false;
        }
        let (mut n_dev, mut n_proc) = (0, 0);
        // PyTorch's figures come after every process; few samples have any.
        let mut torch = Vec::new();
        let (devices, processes) = (&mut out.devices, &mut out.processes);
        let time = super::format::walk_sample(
            buf,
            |d| {
                self.device_into(seg, d, devices, n_dev);
                n_dev += 1;
            },
            |(id, used)| {
                let id = seg.map_or(id, |seg| seg.reader_id(r.segment, id));
                self.process_into(id, used, processes, n_proc);
                if !self.parks.is_empty() {
                    if let Some(p) = processes.get_mut(n_proc) {
                        p.parked = self.parks.at(id, r.time);
                    }
                }
                n_proc += 1;
            },
            |t| torch.push(t),
        );
        out.devices.truncate(n_dev);
        out.processes.truncate(n_proc);
        for (pos, t) in torch {
            if let Some(p) = out.processes.get_mut(pos as usize) {
                p.torch = Some(t);
            }
        }
        match time {
            Some(t) => {
                out.taken_at_ms = t;
                true
            }
            None => false,
        }
    }

    /// Device reading `d` at position `k` of `devices`, its texts from the segment's header
    /// (written over the texts already there, keeping their memory).
    fn device_into(
        &self,
        seg: Option<&Segment>,
        mut d: crate::model::DeviceSample,
        devices: &mut Vec<crate::model::DeviceSample>,
        k: usize,
    ) {
        if devices.len() <= k {
            devices.resize_with(k + 1, Default::default);
        }
        let Some(slot) = devices.get_mut(k) else {
            return;
        };
        d.uuid = std::mem::take(&mut slot.uuid);
        d.name = std::mem::take(&mut slot.name);
        d.pci_bus_id = slot.pci_bus_id.take();
        let hd = seg.and_then(|seg| {
            let h = seg.header.as_ref()?;
            h.devices.get(*seg.device_at.get(&d.index)?)
        });
        match hd {
            Some(hd) => {
                d.uuid.clone_from(&hd.uuid);
                d.name.clone_from(&hd.name);
                d.pci_bus_id.clone_from(&hd.pci_bus_id);
            }
            None => {
                d.uuid.clear();
                d.name.clear();
                d.pci_bus_id = None;
            }
        }
        *slot = d;
    }

    /// Process `id` (the reader's) holding `used` at position `k` of `processes`; the facts
    /// already there are kept when they are this process's (no reference count touched).
    #[inline]
    fn process_into(
        &self,
        id: u32,
        used: Option<u64>,
        processes: &mut Vec<ProcessSample>,
        k: usize,
    ) {
        let facts = self.facts.get(id);
        let (pid, device_index) = facts.map_or((0, 0), |f| (f.pid, f.device_index));
        let info = facts.map(|f| &f.info);
        match processes.get_mut(k) {
            Some(slot) => {
                let same = match (&slot.info, info) {
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    (None, None) => true,
                    _ => false,
                };
                let kept = if same {
                    slot.info.take()
                } else {
                    info.cloned()
                };
                *slot = ProcessSample::recorded(pid, device_index, used, kept);
            }
            None => processes.push(ProcessSample::recorded(
                pid,
                device_index,
                used,
                info.cloned(),
            )),
        }
    }

    /// The size of the log's bytes as read (for limits that scale with it).
    pub(crate) fn file_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Walks every sample without decoding it into values: `on_device(segment)` for each
    /// device reading, `on_proc(id)` for each process entry (the reader's ids, as in
    /// [`Self::defs`]). Linear in the file; allocates nothing per sample.
    pub(crate) fn for_each_entry(
        &self,
        mut on_device: impl FnMut(usize),
        mut on_proc: impl FnMut(u32),
    ) {
        for r in &self.samples {
            let Some(payload) = self.bytes.get(r.start..r.end) else {
                continue;
            };
            let seg = self.segments.get(r.segment).filter(|_| r.segment > 0);
            super::format::walk_shape(
                payload,
                || on_device(r.segment),
                |id| on_proc(seg.map_or(id, |s| s.ids.get(&id).copied().unwrap_or(u32::MAX))),
            );
        }
    }

    /// (time, offset one past the end of its record) of every sample, in time order.
    pub fn sample_record_ends(&self) -> Vec<(UnixMs, usize)> {
        self.samples.iter().map(|r| (r.time, r.end + 4)).collect()
    }

    /// Every sample in order, decoded (skipping any that fail to decode).
    pub fn snapshots(&self) -> impl Iterator<Item = Snapshot> + '_ {
        (0..self.samples.len()).filter_map(|i| self.snapshot(i))
    }
}
