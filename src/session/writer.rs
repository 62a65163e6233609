//! Writes a session log as the run goes: one record per sample and per event, each written
//! straight to the file (no user-space buffer), fsync'd at least every [`FSYNC_EVERY`] and on
//! close.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::format::{
    encode_sample_with_torch, frame_into, ProcEntry, TorchEntry, KIND_EVENT, KIND_HEADER,
    KIND_SAMPLE, MAX_PAYLOAD,
};
use super::{Event, Header, ProcDef};
use crate::model::history::ProcSeriesKey;
use crate::model::{FastMap, Snapshot, UnixMs};

/// Longest time between two fsyncs. Each record is written with its own `write(2)`, so a
/// crash or kill -9 of vramwarden loses nothing; the fsync bounds what a power cut or a
/// kernel crash can take (journald's default is 5 minutes). It was 5 s: on the H200 the
/// fsync was ≈ 9 % of the agent's CPU.
const FSYNC_EVERY: Duration = Duration::from_secs(30);
/// Every this many samples the live process definitions are written again.
pub(crate) const TABLE_EVERY: u64 = 600;
/// Most definitions in one `process_table` record: at most 32 × (64 KiB of command line and a
/// few KiB of other text, each byte at most 6 as JSON) is well under the 16 MiB a record holds.
const TABLE_PART: usize = 32;

/// Why writing a session failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The file could not be created or written (full disk, no permission, …).
    #[error("{path}: {source}")]
    Io {
        /// The session file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A record larger than a reader accepts (its payload over 16 MiB): refused, so no log
    /// is written that its own reader would call damaged.
    #[error("{path}: a record of {bytes} bytes is over the {limit}-byte limit a reader accepts; not written")]
    RecordTooLarge {
        /// The session file.
        path: PathBuf,
        /// The record's payload, bytes.
        bytes: usize,
        /// The largest payload a reader accepts.
        limit: usize,
    },
}

impl WriteError {
    /// True when the file existed already.
    pub(crate) fn is_already_exists(&self) -> bool {
        matches!(self, WriteError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists)
    }
}

/// An open session log.
pub struct SessionWriter {
    file: File,
    path: PathBuf,
    last_sync: Instant,
    ids: FastMap<ProcSeriesKey, u32>,
    defs: FastMap<u32, ProcDef>,
    live: Vec<ProcSeriesKey>,
    /// The park last written of each process that is parked (or being parked or resumed).
    parks: FastMap<u32, crate::model::ParkInfo>,
    samples: u64,
    bytes: u64,
    scratch: Vec<u8>,
    /// The record being written (kept between records for its room).
    record: Vec<u8>,
    /// The last sample's `live` list, kept for its room.
    spare_live: Vec<ProcSeriesKey>,
    entries: Vec<ProcEntry>,
    torch: Vec<TorchEntry>,
}

impl SessionWriter {
    /// `e` from creating `path`, in words where the OS's are unclear ("File exists" for a
    /// folder); its kind is kept.
    fn explained(e: std::io::Error, path: &Path) -> std::io::Error {
        let why = match e.kind() {
            std::io::ErrorKind::AlreadyExists if path.is_dir() => {
                "is a folder: name a file for the log"
            }
            std::io::ErrorKind::AlreadyExists => {
                "exists already: a session log is never written over; name another file"
            }
            _ => return e,
        };
        std::io::Error::new(e.kind(), why)
    }

    /// Creates `path` (and its folder) and writes the header. Fails if the file exists.
    ///
    /// # Errors
    /// When the folder or file cannot be created or written.
    pub fn create(path: &Path, header: &Header) -> Result<Self, WriteError> {
        let io = |source| WriteError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                // Logs hold every user's command lines: a new folder is the owner's alone.
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(io)?;
            }
        }
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| io(Self::explained(e, path)))?;
        // An advisory lock for as long as the file is open: retention never deletes a log
        // that any instance is still writing (see `catalog::prune`).
        lock_exclusive(&file).map_err(io)?;
        let mut w = Self {
            file,
            path: path.to_path_buf(),
            last_sync: Instant::now(),
            ids: FastMap::default(),
            defs: FastMap::default(),
            live: Vec::new(),
            parks: FastMap::default(),
            samples: 0,
            bytes: 0,
            scratch: Vec::new(),
            record: Vec::new(),
            spare_live: Vec::new(),
            entries: Vec::new(),
            torch: Vec::new(),
        };
        let json = serde_json::to_vec(header).map_err(|e| io(std::io::Error::other(e)))?;
        w.write_record(KIND_HEADER, &json)?;
        w.sync()?;
        Ok(w)
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written so far.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.bytes
    }

    /// Samples written so far.
    pub(crate) fn samples_written(&self) -> u64 {
        self.samples
    }

    fn write_record(&mut self, kind: u8, payload: &[u8]) -> Result<(), WriteError> {
        if payload.len() > MAX_PAYLOAD {
            return Err(WriteError::RecordTooLarge {
                path: self.path.clone(),
                bytes: payload.len(),
                limit: MAX_PAYLOAD,
            });
        }
        let mut rec = std::mem::take(&mut self.record);
        rec.clear();
        frame_into(&mut rec, kind, payload);
        let write = crate::host::cost::span(crate::host::cost::Part::LogWrite);
        let written = self.file.write_all(&rec);
        drop(write);
        let len = rec.len() as u64;
        self.record = rec;
        if let Err(source) = written {
            // Cut a partly written record off, so the next one follows the last whole one.
            let _ = self.file.set_len(self.bytes);
            let _ = self.file.seek(SeekFrom::Start(self.bytes));
            return Err(WriteError::Io {
                path: self.path.clone(),
                source,
            });
        }
        self.bytes += len;
        Ok(())
    }

    /// Writes an event record.
    ///
    /// # Errors
    /// When the write fails.
    pub fn write_event(&mut self, e: &Event) -> Result<(), WriteError> {
        let json = serde_json::to_vec(e).map_err(|err| WriteError::Io {
            path: self.path.clone(),
            source: std::io::Error::other(err),
        })?;
        self.write_record(KIND_EVENT, &json)
    }

    /// Writes one snapshot: `process_start` / `process_exit` events for processes that
    /// appeared or left since the last one, `park_state` events for those whose park changed,
    /// then the sample record (with PyTorch's figures of the processes that have them). fsyncs
    /// when due.
    ///
    /// # Errors
    /// When a write fails; the writer stays usable (a later call retries).
    pub fn write_snapshot(&mut self, snap: &Snapshot) -> Result<(), WriteError> {
        let now = snap.taken_at_ms;
        let mut entries = std::mem::take(&mut self.entries);
        entries.clear();
        let mut torch = std::mem::take(&mut self.torch);
        torch.clear();
        let mut current = std::mem::take(&mut self.spare_live);
        current.clear();
        for p in &snap.processes {
            let key = (p.key(), p.device_index);
            current.push(key);
            let id = self.process_id(p, key, now)?;
            self.note_park(id, p, now)?;
            if let Some(t) = p.torch {
                torch.push((entries.len() as u32, t));
            }
            entries.push((id, p.used_bytes));
        }
        current.sort_unstable();
        self.write_exits(&current, now)?;
        self.spare_live = std::mem::replace(&mut self.live, current);
        self.write_table_when_due(now)?;
        let mut buf = std::mem::take(&mut self.scratch);
        buf.clear();
        encode_sample_with_torch(&mut buf, now, &snap.devices, &entries, &torch);
        let r = self.write_record(KIND_SAMPLE, &buf);
        self.scratch = buf;
        self.entries = entries;
        self.torch = torch;
        r?;
        self.samples += 1;
        if self.last_sync.elapsed() >= FSYNC_EVERY {
            self.sync()?;
        }
        Ok(())
    }

    /// The session-local id of process `p` (its series `key`); a process seen for the first
    /// time gets the next id, written in a `process_start` event.
    fn process_id(
        &mut self,
        p: &crate::model::ProcessSample,
        key: ProcSeriesKey,
        now: UnixMs,
    ) -> Result<u32, WriteError> {
        if let Some(id) = self.ids.get(&key) {
            return Ok(*id);
        }
        let id = self.ids.len() as u32;
        let mut info = p.info.as_deref().cloned().unwrap_or_default();
        // Texts at the limits an agent's answer keeps (a command line of 64 KiB), so no
        // definition comes near a record's limit.
        info.cut_texts();
        let def = ProcDef {
            id,
            pid: p.pid,
            device_index: p.device_index,
            info: crate::model::ProcInfo {
                start_time_ms: key.0.start_time_ms,
                ..info
            },
        };
        self.write_event(&Event::ProcessStart {
            unix_ms: now,
            def: def.clone(),
        })?;
        self.ids.insert(key, id);
        self.defs.insert(id, def);
        Ok(id)
    }

    /// Writes a `process_exit` event for each live process not in `current` (sorted), and
    /// forgets its park.
    fn write_exits(&mut self, current: &[ProcSeriesKey], now: UnixMs) -> Result<(), WriteError> {
        let gone: Vec<ProcSeriesKey> = self
            .live
            .iter()
            .filter(|k| current.binary_search(k).is_err())
            .copied()
            .collect();
        for k in gone {
            if let Some(id) = self.ids.get(&k).copied() {
                // Gone is no longer parked: nothing of it is written after its exit.
                self.parks.remove(&id);
                self.write_event(&Event::ProcessExit {
                    unix_ms: now,
                    id,
                    pid: k.0.pid,
                    device_index: k.1,
                })?;
            }
        }
        Ok(())
    }

    /// Every `TABLE_EVERY` samples, writes a `process_table` event with the live processes'
    /// definitions.
    fn write_table_when_due(&mut self, now: UnixMs) -> Result<(), WriteError> {
        if self.samples > 0 && self.samples % TABLE_EVERY == 0 {
            let procs: Vec<ProcDef> = self
                .live
                .iter()
                .filter_map(|k| self.ids.get(k))
                .filter_map(|id| self.defs.get(id))
                .cloned()
                .collect();
            // In parts, each well under a record's limit however long the texts are.
            for part in procs.chunks(TABLE_PART) {
                self.write_event(&Event::ProcessTable {
                    unix_ms: now,
                    procs: part.to_vec(),
                })?;
            }
        }
        Ok(())
    }

    /// Writes a `park_state` event when process `id`'s park (`p.parked`) differs from the
    /// last one written for it.
    fn note_park(
        &mut self,
        id: u32,
        p: &crate::model::ProcessSample,
        now: UnixMs,
    ) -> Result<(), WriteError> {
        if self.parks.get(&id) == p.parked.as_ref() {
            return Ok(());
        }
        self.write_event(&Event::ParkState {
            unix_ms: now,
            id,
            pid: p.pid,
            device_index: p.device_index,
            park: p.parked,
        })?;
        match p.parked {
            Some(park) => self.parks.insert(id, park),
            None => self.parks.remove(&id),
        };
        Ok(())
    }

    /// Flushes the file to disk.
    ///
    /// # Errors
    /// When fsync fails.
    pub fn sync(&mut self) -> Result<(), WriteError> {
        self.last_sync = Instant::now();
        let _sync = crate::host::cost::span(crate::host::cost::Part::LogSync);
        self.file.sync_data().map_err(|source| WriteError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// fsyncs and closes.
    ///
    /// # Errors
    /// When the final fsync fails.
    pub fn close(mut self) -> Result<(), WriteError> {
        self.sync()
    }
}

/// Takes a non-blocking exclusive `flock` on `file` (released when it is closed).
///
/// # Errors
/// When another open file description holds the lock.
pub(crate) fn lock_exclusive(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// True when a writer holds `file`'s lock (a session being recorded now): a shared lock
/// cannot be taken without waiting. The probe's own lock, when it gets one, goes at once.
pub(crate) fn locked_by_writer(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: flock on a descriptor the caller owns; a lock taken is released at once.
    unsafe {
        if libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) == 0 {
            libc::flock(fd, libc::LOCK_UN);
            false
        } else {
            std::io::Error::last_os_error().raw_os_error() == Some(libc::EWOULDBLOCK)
        }
    }
}

/// The file name of a session started at `started_ms` on `host`:
/// `YYYYMMDD-HHMMSS-host.vwlog` (local time).
pub(crate) fn session_file_name(started_ms: UnixMs, host: &str) -> String {
    let t = chrono::TimeZone::timestamp_millis_opt(&chrono::Local, started_ms)
        .single()
        .map(|t| t.format("%Y%m%d-%H%M%S").to_string())
        .unwrap_or_else(|| started_ms.to_string());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{t}-{host}.{}", super::EXTENSION)
}
