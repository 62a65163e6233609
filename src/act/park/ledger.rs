//! The sizes and GPUs of the processes parked from this account, kept in a file each
//! (`<data folder>/parked/<pid>-<start ms>`, see [`dir`], holding "<bytes> <gpu index>") so
//! that a resume from another vramwarden (the command line parks in one run and resumes in
//! another) can check the room on the process's own GPU before the restore: the driver says
//! neither how much a checkpointed process holds nor where. The folder is the user's own
//! (0700); a file that is not a regular file of this user, or not two numbers, counts as
//! unknown (the resume is then refused, never risked).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;

use crate::model::history::ProcSeriesKey;

/// Longest file read (a decimal u64).
const MAX_LEN: u64 = 32;

/// `$VRAMWARDEN_DATA_DIR/parked` when that is set (as the sessions folder), else the data
/// folder's.
fn dir() -> PathBuf {
    std::env::var_os("VRAMWARDEN_DATA_DIR")
        .map_or_else(crate::host::paths::default_data_dir, PathBuf::from)
        .join("parked")
}

fn file(key: &ProcSeriesKey) -> PathBuf {
    dir().join(format!("{}-{}", key.0.pid, key.0.start_time_ms))
}

/// Notes that `key` was parked holding `bytes` (best effort: a failure only means a later
/// resume from another run is refused for want of the size).
pub fn record(key: &ProcSeriesKey, bytes: u64) {
    let d = dir();
    if std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&d)
        .is_err()
    {
        return;
    }
    let tmp = d.join(format!(".{}-{}.tmp", key.0.pid, std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .and_then(|mut f| f.write_all(format!("{bytes} {}", key.1).as_bytes()));
    if written.is_err() || std::fs::rename(&tmp, file(key)).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The bytes `key` was parked with, if this account noted them parked from GPU `key.1`.
pub fn bytes_of(key: &ProcSeriesKey) -> Option<u64> {
    entry(&key.0)
        .filter(|(_, gpu)| *gpu == key.1)
        .map(|(bytes, _)| bytes)
}

/// The GPU `key` was parked from, if this account noted it.
pub(crate) fn gpu_of(key: &crate::model::ProcessKey) -> Option<u32> {
    entry(key).map(|(_, gpu)| gpu)
}

/// The (bytes, GPU) noted for `key`: none from a file that is not this user's regular file
/// of two numbers (an entry of a build that noted no GPU among them).
fn entry(key: &crate::model::ProcessKey) -> Option<(u64, u32)> {
    let path = file(&(*key, 0));
    let meta = std::fs::symlink_metadata(&path).ok()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.file_type().is_file() || meta.uid() != me || meta.len() > MAX_LEN {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let (bytes, gpu) = text.trim().split_once(' ')?;
    Some((bytes.parse().ok()?, gpu.parse().ok()?))
}

/// Forgets `key` (it runs again, or is gone).
pub fn forget(key: &ProcSeriesKey) {
    let _ = std::fs::remove_file(file(key));
}
