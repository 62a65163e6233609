//! Releasing a process's PyTorch cache (`torch.cuda.empty_cache()`) through its companion: the
//! one path for the rules and the window's button ([`crate::act::rules::companion_action`]) and
//! `vramwarden torch release`. Find the socket, connect with the client's peer checks (the
//! kernel's peer pid is the target's, its uid is ours unless we are root, its start time is
//! the one asked for, its hello agrees), ask, and wait long enough for a large cache.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::client::{Client, DEFAULT_TIMEOUT};
use super::error::TorchError;
use super::protocol::Release;
use super::sockets::socket_name;
use crate::model::UnixMs;

/// Longest wait for the companion's answer to a release: an `empty_cache()` of a large cache
/// takes a while (9 s for 56 GB on the H200, while the job trains on); connecting and the
/// hello get [`DEFAULT_TIMEOUT`]. The engine does not wait this long: it asks on a thread of
/// its own ([`crate::act::rules::companion_worker`]).
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(120);

/// The companion's socket of `pid` in the first of `dirs` that has one.
pub(crate) fn socket_of(dirs: &[PathBuf], pid: u32) -> Option<PathBuf> {
    let name = socket_name(pid);
    dirs.iter().map(|d| d.join(&name)).find(|p| p.exists())
}

/// Connects to the companion of `pid` (its socket found in `dirs`, else where the first of
/// them would have it, so that the error names it), peer-checked against `start_time_ms`
/// when given.
///
/// # Errors
/// No companion, a refusal by the peer checks, or a timeout.
pub fn connect(
    dirs: &[PathBuf],
    pid: u32,
    start_time_ms: Option<UnixMs>,
) -> Result<Client, TorchError> {
    // Every folder's socket in turn until one passes the checks: another user's socket
    // named for this pid in a folder that comes first hides nothing.
    let name = socket_name(pid);
    let mut last = None;
    for path in dirs.iter().map(|d| d.join(&name)).filter(|p| p.exists()) {
        match Client::connect_at(&path, pid, start_time_ms, DEFAULT_TIMEOUT) {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    if let Some(e) = last {
        return Err(e);
    }
    let path = dirs
        .first()
        .map_or_else(|| Path::new(&name).to_path_buf(), |d| d.join(&name));
    Client::connect_at(&path, pid, start_time_ms, DEFAULT_TIMEOUT)
}

/// Asks the companion of `pid` (see [`connect`]) to release its cache, waiting up to
/// [`RELEASE_TIMEOUT`] for the answer.
///
/// # Errors
/// No companion, a refusal, torch not imported, or a timeout.
pub fn release(
    dirs: &[PathBuf],
    pid: u32,
    start_time_ms: Option<UnixMs>,
) -> Result<Release, TorchError> {
    let mut c = connect(dirs, pid, start_time_ms)?;
    c.set_timeout(RELEASE_TIMEOUT);
    c.release_cache()
}
