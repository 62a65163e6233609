//! The protected list: processes no action touches (the display server, the desktop shell,
//! sshd, systemd, …). A name alone proves nothing — any job can call itself `Xorg`
//! (`prctl(PR_SET_NAME)`, `exec -a`) to escape every rule — so an entry protects a process
//! only when its name matches *and* either
//!
//! - the process's executable file (`/proc/PID/exe`) has that name and belongs to root (an
//!   installed program; a user cannot make a root-owned file), or
//! - the process runs as root (a user cannot start one).
//!
//! An entry with a `/` names an executable by its full path (`/opt/app/bin/server`) and
//! protects every process running that file. A process's name is its `comm` (cut by the
//! kernel to 15 bytes: an entry matches a cut name by its first 15) or its argv\[0\]'s file
//! name.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The executable of `pid` and the owner of that file; None when it cannot be read (another
/// user's process without privileges, a kernel thread, an exited process).
fn exe_of(pid: u32) -> Option<(PathBuf, u32)> {
    let link = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    // A replaced or deleted file reads "… (deleted)": not the installed program any more.
    let owner = std::fs::metadata(format!("/proc/{pid}/exe")).ok()?.uid();
    Some((link, owner))
}

/// The file name of argv\[0\] of `pid` (lossy), or "".
fn argv0_of(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|b| {
            b.split(|c| *c == 0).next().map(|a| {
                String::from_utf8_lossy(a)
                    .rsplit('/')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
        })
        .unwrap_or_default()
}

/// True when the protected entry `entry` names `name` (the comm, maybe cut to 15 bytes) or
/// `argv0`.
fn names(entry: &str, name: &str, argv0: &str) -> bool {
    entry == name || entry == argv0 || (name.len() == 15 && entry.starts_with(name))
}

/// Why process `pid` (named `name`, running as `uid`) is protected by `list`, if it is.
pub fn protected(list: &[String], pid: u32, name: &str, uid: u32) -> Option<String> {
    if list.is_empty() {
        return None;
    }
    let exe = exe_of(pid);
    let exe_path = exe.as_ref().map(|(p, _)| p.to_string_lossy().into_owned());
    let exe_name = exe_path
        .as_deref()
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_string());
    let root_file = exe.as_ref().is_some_and(|(_, owner)| *owner == 0);
    let argv0 = argv0_of(pid);
    for entry in list {
        if entry.contains('/') {
            if exe_path.as_deref() == Some(entry.as_str()) {
                return Some(format!("{entry} is on the protected list"));
            }
            continue;
        }
        if !names(entry, name, &argv0) {
            continue;
        }
        let by_exe = root_file && exe_name.as_deref() == Some(entry.as_str());
        if uid == 0 || by_exe {
            return Some(format!("{name} is on the protected list"));
        }
    }
    None
}
