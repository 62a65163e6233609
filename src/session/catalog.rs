//! The sessions folder: listing past sessions (from each file's header and tail, without
//! reading it whole) and pruning old ones by age and total size.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::format::{read_record, KIND_HEADER, KIND_SAMPLE, MAGIC};
use super::{Header, EXTENSION};
use crate::model::UnixMs;

/// One past session, as the Sessions window lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The file.
    pub path: PathBuf,
    /// Header, if readable.
    pub header: Option<Header>,
    /// Time of the last sample found at the end of the file.
    pub last_sample_ms: Option<UnixMs>,
    /// File size.
    pub size_bytes: u64,
    /// Modification time.
    pub modified_ms: UnixMs,
    /// A vramwarden (this one or another) is recording it now: its writer holds the file's
    /// lock.
    pub recording: bool,
}

impl SessionSummary {
    /// Start time (header) or modification time.
    pub(crate) fn started_ms(&self) -> UnixMs {
        self.header
            .as_ref()
            .map_or(self.modified_ms, |h| h.started_ms)
    }

    /// Length of the recording.
    pub(crate) fn duration_ms(&self) -> i64 {
        self.last_sample_ms.map_or(0, |l| l - self.started_ms())
    }
}

/// Reads the header and the time of the last whole sample of `path`.
///
/// Only regular files are read: a FIFO or device named `*.vwlog` is passed over, never opened
/// (opening a FIFO would block the session list and the engine's retention).
fn summarize(path: &Path) -> Option<SessionSummary> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut f = std::fs::File::open(path).ok()?;
    let md = f.metadata().ok()?;
    if !md.is_file() {
        return None;
    }
    let size = md.len();
    let modified_ms = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64);
    let mut head = vec![0u8; size.min(64 * 1024) as usize];
    f.read_exact(&mut head).ok()?;
    let header = read_record(&head, 0)
        .filter(|(r, _)| r.kind == KIND_HEADER)
        .and_then(|(r, _)| serde_json::from_slice::<Header>(r.payload).ok());
    let tail_len = size.min(256 * 1024);
    f.seek(SeekFrom::Start(size - tail_len)).ok()?;
    let mut tail = vec![0u8; tail_len as usize];
    f.read_exact(&mut tail).ok()?;
    let mut last = None;
    let mut pos = 0;
    while pos + 1 < tail.len() {
        if tail[pos..pos + 2] == MAGIC {
            if let Some((r, next)) = read_record(&tail, pos) {
                if r.kind == KIND_SAMPLE {
                    let mut p = 0;
                    if let Some(t) = super::format::get_varint(r.payload, &mut p) {
                        last = Some(t as i64);
                    }
                }
                pos = next;
                continue;
            }
        }
        pos += 1;
    }
    if header.is_none() && last.is_none() {
        // Nothing of a session in it (an empty or foreign file named *.vwlog).
        return None;
    }
    Some(SessionSummary {
        path: path.to_path_buf(),
        header,
        last_sample_ms: last,
        size_bytes: size,
        modified_ms,
        recording: super::writer::locked_by_writer(&f),
    })
}

/// Every session log in `dir`, newest first.
pub fn list(dir: &Path) -> Vec<SessionSummary> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<SessionSummary> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == EXTENSION))
        .filter_map(|p| summarize(&p))
        .collect();
    v.sort_by_key(|s| std::cmp::Reverse(s.started_ms()));
    v
}

/// Logs modified this recently are never pruned (a writer between creating its file and
/// locking it).
const PRUNE_GRACE_MS: UnixMs = 60_000;

/// Deletes sessions older than `max_age_days` and then the oldest until the folder holds at
/// most `max_total_bytes` (0 for either: no limit, keep forever). Never deletes `keep`, a log
/// that any instance is still writing (it holds an advisory lock), or one modified in the last
/// [`PRUNE_GRACE_MS`]. Returns what it removed.
pub fn prune(
    dir: &Path,
    max_age_days: u32,
    max_total_bytes: u64,
    now: UnixMs,
    keep: Option<&Path>,
) -> Vec<PathBuf> {
    let mut all = list(dir);
    // Oldest first.
    all.reverse();
    let mut removed = Vec::new();
    let cutoff = (max_age_days > 0).then(|| now - i64::from(max_age_days) * 86_400_000);
    let mut total: u64 = all.iter().map(|s| s.size_bytes).sum();
    for s in &all {
        if Some(s.path.as_path()) == keep || now - s.modified_ms < PRUNE_GRACE_MS {
            continue;
        }
        let too_old = cutoff.is_some_and(|c| s.modified_ms < c);
        let too_big = max_total_bytes > 0 && total > max_total_bytes;
        if !(too_old || too_big) {
            continue;
        }
        // Hold the lock while deleting, so no writer can be mid-way in this file.
        let Ok(f) = std::fs::File::open(&s.path) else {
            continue;
        };
        if super::writer::lock_exclusive(&f).is_err() {
            continue;
        }
        if std::fs::remove_file(&s.path).is_ok() {
            total = total.saturating_sub(s.size_bytes);
            removed.push(s.path.clone());
        }
    }
    removed
}
