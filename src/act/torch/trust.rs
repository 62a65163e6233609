//! Whom a companion's socket is trusted to speak for. A socket is trusted only when
//!
//! - its folder is a real folder (not a symlink) that belongs to the uid the peer runs as,
//!   that no one else can write to, and whose name, where it names a uid
//!   (`/tmp/vramwarden-N`, `/run/user/N/vramwarden`), names that same uid;
//! - the process the socket's name claims (its pid, whose start time the caller checks)
//!   belongs to the uid the peer runs as: after the pid of a process that made a socket is
//!   reused, the socket's peer credentials (taken when it listened) still name the old owner,
//!   and the new process of another user is not spoken for;
//! - where the kernel gives one (`SO_PEERPIDFD`, Linux 6.5), the process that made the socket
//!   is still alive: a pid reused by another process of the same user is caught too.
//!
//! [`super::Client`] checks all of it on connect, and again right before it asks for an action
//! (a cache release, a memory limit).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// `SO_PEERPIDFD` (not in every libc crate yet; the same number on every Linux architecture
/// that uses the generic socket options).
const SO_PEERPIDFD: libc::c_int = 77;

/// The uid a companions' folder names: `vramwarden-N` (the `/tmp` fallback) and
/// `/run/user/N/vramwarden` name uid N; any other folder names none.
fn claimed_uid(dir: &Path) -> Option<u32> {
    let name = dir.file_name()?.to_str()?;
    if let Some(n) = name.strip_prefix("vramwarden-") {
        return n.parse().ok();
    }
    let parent = dir.parent()?;
    if name == "vramwarden" && parent.parent() == Some(Path::new("/run/user")) {
        return parent.file_name()?.to_str()?.parse().ok();
    }
    None
}

/// Why the companions' folder `dir` cannot speak for uid `uid`, if so.
pub(crate) fn folder_problem(dir: &Path, uid: u32) -> Option<String> {
    let md = match std::fs::symlink_metadata(dir) {
        Ok(md) => md,
        Err(e) => return Some(format!("{}: {e}", dir.display())),
    };
    if !md.is_dir() {
        return Some(format!("{} is not a folder (a symlink?)", dir.display()));
    }
    if md.uid() != uid {
        return Some(format!(
            "{} belongs to uid {}, not to uid {uid} that the companion runs as",
            dir.display(),
            md.uid()
        ));
    }
    if md.mode() & 0o022 != 0 {
        return Some(format!(
            "{} can be written by others (mode {:o})",
            dir.display(),
            md.mode() & 0o777
        ));
    }
    match claimed_uid(dir) {
        Some(claimed) if claimed != uid => Some(format!(
            "{} is named for uid {claimed} but belongs to uid {uid}",
            dir.display()
        )),
        _ => None,
    }
}

/// The effective uid of process `pid` (the second figure of `Uid:` in `/proc/PID/status`).
pub(crate) fn process_euid(pid: u32) -> Option<u32> {
    let status = crate::host::procinfo::read_lossy(Path::new(&format!("/proc/{pid}/status")))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The peer's pidfd (`SO_PEERPIDFD`): `Ok(None)` where the kernel has none; an error when the
/// process that made the socket is gone.
pub(crate) fn peer_pidfd(stream: &UnixStream) -> std::io::Result<Option<OwnedFd>> {
    let mut fd: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the socket is valid for the borrow; fd and len are valid out-pointers.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut fd as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        // ENOPROTOOPT: a kernel without it. EINVAL or ESRCH: the peer has no process any
        // more (it exited).
        return match e.raw_os_error() {
            Some(libc::ENOPROTOOPT) => Ok(None),
            _ => Err(e),
        };
    }
    // SAFETY: the kernel handed us this new descriptor.
    Ok((fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// True while the process behind `pidfd` has not exited (signal 0 through the pidfd).
pub fn alive(pidfd: &OwnedFd) -> bool {
    // SAFETY: plain syscall on a descriptor we own; signal 0 only checks.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            0,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Why the socket at `path`, whose peer runs as `peer_uid`, may not speak for process `pid`,
/// if so (the folder, the process's owner, a dead peer).
pub(crate) fn peer_problem(
    path: &Path,
    pid: u32,
    peer_uid: u32,
    pidfd: Option<&OwnedFd>,
) -> Option<String> {
    if let Some(p) = path.parent().and_then(|d| folder_problem(d, peer_uid)) {
        return Some(p);
    }
    match process_euid(pid) {
        Some(owner) if owner == peer_uid => {}
        Some(owner) => {
            return Some(format!(
                "process {pid} belongs to uid {owner}, but its socket is served as uid {peer_uid} (a reused pid?)"
            ))
        }
        None => return Some(format!("process {pid} has exited")),
    }
    if pidfd.is_some_and(|fd| !alive(fd)) {
        return Some(format!(
            "the process that made the socket of pid {pid} has exited (a reused pid?)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claimed_uids() {
        assert_eq!(claimed_uid(Path::new("/tmp/vramwarden-0")), Some(0));
        assert_eq!(claimed_uid(Path::new("/tmp/vramwarden-1000")), Some(1000));
        assert_eq!(
            claimed_uid(Path::new("/run/user/1000/vramwarden")),
            Some(1000)
        );
        assert_eq!(claimed_uid(Path::new("/home/a/run/vramwarden")), None);
        assert_eq!(claimed_uid(Path::new("/tmp/vramwarden-x")), None);
    }
}
