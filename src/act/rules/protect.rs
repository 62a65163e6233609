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
//! protects every process running that file.
//!
//! A root-owned program can still run a user's code: `LD_PRELOAD=job.so
//! /lib/systemd/systemd --version` is a root-owned `systemd` executing the job. So a process
//! that does not run as root is protected by its executable only where its origin shows it
//! is the real thing ([`borrowed`]): no `LD_PRELOAD` or `LD_AUDIT` in its environment, no
//! executable mapping of a file that root does not own (or that was deleted), and its
//! environment readable. A process's name is its `comm` (cut by the
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

/// Why a process that does not run as root may be running someone's code under a root-owned
/// program's name, if it may: `LD_PRELOAD` / `LD_AUDIT` in its environment (or the
/// environment unreadable), or an executable mapping of a file root does not own.
pub(crate) fn borrowed(pid: u32) -> Option<String> {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return Some("its environment cannot be read".into());
    };
    if let Some(var) = env.split(|b| *b == 0).find_map(|v| {
        ["LD_PRELOAD=", "LD_AUDIT="]
            .iter()
            .find(|p| v.starts_with(p.as_bytes()) && v.len() > p.len())
    }) {
        return Some(format!("it runs with {}…", var.trim_end_matches('=')));
    }
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Some("its memory map cannot be read".into());
    };
    let mut seen = std::collections::HashSet::new();
    for line in maps.lines() {
        let mut cols = line.split_whitespace();
        let perms = cols.nth(1).unwrap_or("");
        let path = cols.nth(3).unwrap_or("");
        if !perms.contains('x') || !path.starts_with('/') || !seen.insert(path) {
            continue;
        }
        let owner = (!line.ends_with("(deleted)"))
            .then(|| std::fs::metadata(path).ok().map(|m| m.uid()))
            .flatten();
        if owner != Some(0) {
            return Some(format!("it runs code from {path}, which root does not own"));
        }
    }
    None
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
    // Read once, only for a process that is not root's and matches an entry.
    let mut origin: Option<Option<String>> = None;
    let mut genuine = || uid == 0 || origin.get_or_insert_with(|| borrowed(pid)).is_none();
    for entry in list {
        if entry.contains('/') {
            if exe_path.as_deref() == Some(entry.as_str()) && genuine() {
                return Some(format!("{entry} is on the protected list"));
            }
            continue;
        }
        if !names(entry, name, &argv0) {
            continue;
        }
        let by_exe = root_file && exe_name.as_deref() == Some(entry.as_str());
        if uid == 0 || (by_exe && genuine()) {
            return Some(format!("{name} is on the protected list"));
        }
    }
    None
}
