//! The sessions folder: listing past sessions (from each file's header and tail, without
//! reading it whole) and pruning old ones by age and total size.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::format::{read_record, Scanner, KIND_HEADER, KIND_SAMPLE, MAGIC};
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

/// Bytes of a file read for its header: a session's header record is well under this.
const HEAD_BYTES: u64 = 64 * 1024;
/// Bytes at the end of a file searched for its last sample.
const TAIL_BYTES: u64 = 256 * 1024;

/// Opens `path` for reading only if the name itself is a regular file: never through a
/// symbolic link (`O_NOFOLLOW`), without blocking (`O_NONBLOCK`: a FIFO swapped in for the
/// name cannot hang the open), and checked on the opened file (`fstat`), not on the name,
/// which may change in between. The one way this module (and the agent's session download)
/// opens a session.
///
/// # Errors
/// The open's error (`ELOOP` for a symbolic link), or `InvalidInput` when what was opened is
/// not a regular file.
pub(crate) fn open_session_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if f.metadata()?.file_type().is_file() {
        Ok(f)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ))
    }
}

/// Reads the header and the time of the last whole sample of `path`.
///
/// Only regular files are read: a symbolic link, FIFO or device named `*.vwlog` is passed
/// over, never followed or read (and a FIFO swapped in for the name cannot block: see
/// [`open_session_file`]). A file that does not start as a session log (a header record's
/// marker and kind) is read no further than its first [`HEAD_BYTES`]; one whose header is
/// damaged is listed when a sample survives at its end.
fn summarize(path: &Path) -> Option<SessionSummary> {
    let mut f = open_session_file(path).ok()?;
    let md = f.metadata().ok()?;
    let size = md.len();
    let modified_ms = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as i64);
    let header = read_header(&mut f, size)?;
    let tail_len = size.min(TAIL_BYTES);
    f.seek(SeekFrom::Start(size - tail_len)).ok()?;
    let mut tail = vec![0u8; tail_len as usize];
    f.read_exact(&mut tail).ok()?;
    let last = last_sample_time(&tail);
    if header.is_none() && last.is_none() {
        // Nothing of a session in it.
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

/// The header record at the start of `f` (of `size` bytes), read from its first
/// [`HEAD_BYTES`] at most: `None` when the file does not start as a session log (a header
/// record's marker and kind), `Some(None)` when it does but the header is damaged (its samples
/// may still be whole).
fn read_header(f: &mut File, size: u64) -> Option<Option<Header>> {
    let mut head = vec![0u8; size.min(HEAD_BYTES) as usize];
    f.read_exact(&mut head).ok()?;
    if !head.starts_with(&[MAGIC[0], MAGIC[1], KIND_HEADER]) {
        return None;
    }
    Some(
        read_record(&head, 0)
            .filter(|(r, _)| r.kind == KIND_HEADER)
            .and_then(|(r, _)| serde_json::from_slice::<Header>(r.payload).ok()),
    )
}

/// The time of the last whole sample record in `tail` (the end of a file). Linear in
/// `tail`'s length whatever it holds: candidates are checked by a [`Scanner`], which costs
/// bounded work per candidate however long a record claims to be.
fn last_sample_time(tail: &[u8]) -> Option<UnixMs> {
    let mut sc = Scanner::new(tail);
    let mut last = None;
    let mut from = 0;
    while let Some(pos) = sc.next_marker(from) {
        match sc.read_at(pos) {
            Some((r, next)) => {
                if r.kind == KIND_SAMPLE {
                    let mut p = 0;
                    if let Some(t) = super::format::get_varint(r.payload, &mut p) {
                        last = Some(t as i64);
                    }
                }
                from = next;
            }
            None => from = pos + 1,
        }
    }
    last
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
        let Ok(f) = open_session_file(&s.path) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::format::{frame, hashed_on_this_thread, put_varint};
    use std::sync::mpsc;
    use std::time::Duration;

    /// A header record, as a writer starts a log.
    fn header_record() -> Vec<u8> {
        let h = Header {
            format_version: crate::session::FORMAT_VERSION,
            app_version: "test".into(),
            host: "h".into(),
            source: "Simulated".into(),
            driver_version: None,
            nvml_version: None,
            started_ms: 1_700_000_000_000,
            interval_ms: 1000,
            devices: Vec::new(),
        };
        let json = serde_json::to_vec(&h).expect("json");
        frame(KIND_HEADER, &json)
    }

    /// A small valid log: a header and one sample at `t` (a sample's payload starts with its
    /// time).
    fn valid_log(t: u64) -> Vec<u8> {
        let mut out = header_record();
        let mut payload = Vec::new();
        put_varint(&mut payload, t);
        out.extend(frame(KIND_SAMPLE, &payload));
        out
    }

    /// `f()` on another thread; `None` when it has not returned within 10 s (a hang fails
    /// the test instead of hanging it).
    fn within_10s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(10)).ok()
    }

    fn mkfifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    }

    #[test]
    fn the_opener_never_blocks_on_a_fifo_and_refuses_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("20240101-000000-fifo.vwlog");
        mkfifo(&fifo);
        let opened = within_10s(move || open_session_file(&fifo).map(|_| ()));
        let opened = opened.expect("opening a FIFO blocked");
        assert!(opened.is_err(), "a FIFO was opened as a session");
    }

    #[test]
    fn a_fifo_named_like_a_session_is_listed_as_nothing_and_never_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        mkfifo(&dir.path().join("20240101-000000-fifo.vwlog"));
        std::fs::write(dir.path().join("20240102-000000-ok.vwlog"), valid_log(5)).expect("write");
        let d = dir.path().to_path_buf();
        let listed = within_10s(move || list(&d)).expect("listing blocked on a FIFO");
        let names: Vec<_> = listed.iter().filter_map(|s| s.path.file_name()).collect();
        assert_eq!(names, ["20240102-000000-ok.vwlog"]);
        assert_eq!(listed[0].last_sample_ms, Some(5));
    }

    #[test]
    fn a_symlink_named_like_a_session_is_passed_over() {
        let outside = tempfile::tempdir().expect("tempdir");
        let target = outside.path().join("valid.vwlog");
        std::fs::write(&target, valid_log(7)).expect("write");
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("20240101-000000-outside.vwlog");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        assert!(list(dir.path()).is_empty(), "a symlink was listed");
        assert!(open_session_file(&link).is_err(), "a symlink was opened");
        assert!(crate::session::reader::SessionData::open_listed(&link).is_err());
        // The same file, not a link, is listed.
        std::fs::copy(&target, dir.path().join("20240101-000000-copy.vwlog")).expect("copy");
        assert_eq!(list(dir.path()).len(), 1);
    }

    /// `n` bytes repeating a sample-record marker whose length claims all but 10 of the bytes
    /// left (every candidate fits in the buffer, none is valid).
    fn crafted(n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n + 6);
        while out.len() + 6 <= n {
            let left = n - out.len();
            out.extend_from_slice(&MAGIC);
            out.push(KIND_SAMPLE);
            let len = left.saturating_sub(10) as u64;
            out.extend_from_slice(&[
                (len as u8) | 0x80,
                ((len >> 7) as u8) | 0x80,
                (len >> 14) as u8 & 0x7F,
            ]);
        }
        out.resize(n, 0);
        out
    }

    #[test]
    fn a_crafted_tail_is_summarized_with_linear_checksum_work() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("20240101-000000-crafted.vwlog");
        let mut bytes = header_record();
        let body = 128 * 1024;
        bytes.extend(crafted(body));
        bytes.extend(frame(KIND_SAMPLE, &[9]));
        std::fs::write(&path, &bytes).expect("write");
        let before = hashed_on_this_thread();
        let s = summarize(&path).expect("listed: it has a header");
        let work = hashed_on_this_thread() - before;
        assert_eq!(s.last_sample_ms, Some(9));
        // Trying the ~21,800 markers in full would hash ~1.4 GB; a scanner hashes the tail
        // once and at most 2 × 64 bytes per marker.
        let bound = 32 * bytes.len() as u64;
        assert!(
            work <= bound,
            "{work} bytes hashed for a {} byte file",
            bytes.len()
        );
    }

    #[test]
    fn a_file_not_starting_as_a_session_is_read_no_further_than_its_head() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("20240101-000000-foreign.vwlog");
        let mut bytes = crafted(256 * 1024);
        bytes.extend(frame(KIND_SAMPLE, &[9]));
        std::fs::write(&path, &bytes).expect("write");
        let before = hashed_on_this_thread();
        assert_eq!(summarize(&path), None);
        let work = hashed_on_this_thread() - before;
        assert!(work <= HEAD_BYTES, "{work} bytes hashed");
    }
}
