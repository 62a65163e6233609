//! Facts about a process from `/proc`: name, command line, user (its name through
//! [`super::user_names`]), start time, container id,
//! and its container's and pod's names (resolved once per process through
//! [`crate::host::container::ContainerResolver`]).
//!
//! The start time comes from field 22 of `/proc/PID/stat` (clock ticks after boot) plus the boot
//! time from `/proc/stat`, so it is stable for the life of the process and a reused PID gets a
//! different one.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

pub use super::user_names::uid_of_user;
use crate::host::container::{ContainerResolver, Roots};
use crate::model::{ProcInfo, ProcessKey, UnixMs};

/// Reads process facts from a `/proc`-like directory, caching user names and the boot time.
#[derive(Debug)]
pub struct ProcReader {
    root: PathBuf,
    boot_time_ms: Option<UnixMs>,
    ticks_per_sec: u64,
    users: super::user_names::UserNames,
    cache: crate::model::FastMap<u32, (Arc<ProcInfo>, UnixMs)>,
    containers: ContainerResolver,
    /// The pids of the sample being enriched (kept between ticks for its room).
    alive: crate::model::FastSet<u32>,
}

/// A cached process's start time is read again (to notice a reused PID) at least this often
/// by [`ProcReader::read_at`]. Actions always re-read it right before acting.
pub const REVALIDATE_MS: UnixMs = 10_000;

impl Default for ProcReader {
    fn default() -> Self {
        Self::new("/proc")
    }
}

impl ProcReader {
    /// A reader over `root` (normally `/proc`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let boot_time_ms = fs::read_to_string(root.join("stat"))
            .ok()
            .and_then(|s| parse_btime(&s))
            .map(|secs| secs * 1000);
        // SAFETY: sysconf has no preconditions.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let containers = ContainerResolver::new(Roots {
            proc: root.clone(),
            ..Roots::default()
        });
        Self {
            root,
            boot_time_ms,
            ticks_per_sec: if ticks > 0 { ticks as u64 } else { 100 },
            users: super::user_names::UserNames::default(),
            cache: crate::model::FastMap::default(),
            containers,
            alive: crate::model::FastSet::default(),
        }
    }

    /// The same reader resolving container and pod names under `roots` (pod log folders,
    /// Docker's configs; fixture trees in tests) instead of the host's.
    pub fn with_container_roots(mut self, roots: Roots) -> Self {
        self.containers = ContainerResolver::new(roots);
        self
    }

    /// The start time of `pid` in ms since the epoch, read fresh (no cache): the identity check.
    pub fn start_time_ms(&self, pid: u32) -> Option<UnixMs> {
        let stat = read_lossy(&self.root.join(pid.to_string()).join("stat"))?;
        let ticks = parse_stat_start_ticks(&stat)?;
        Some(self.boot_time_ms? + (ticks * 1000 / self.ticks_per_sec) as i64)
    }

    /// Everything about `pid`, or `None` if it does not exist (or has exited).
    ///
    /// The cheap start-time read runs every call; the rest is cached until the PID's start time
    /// changes (a reused PID).
    pub fn read(&mut self, pid: u32) -> Option<Arc<ProcInfo>> {
        self.read_at(pid, i64::MAX)
    }

    /// Like [`ProcReader::read`], but a PID read less than [`REVALIDATE_MS`] before `now_ms`
    /// is answered from the cache without touching `/proc` (the sampler's per-tick path).
    pub fn read_at(&mut self, pid: u32, now_ms: UnixMs) -> Option<Arc<ProcInfo>> {
        if let Some((hit, checked)) = self.cache.get(&pid) {
            if now_ms != i64::MAX && now_ms - checked < REVALIDATE_MS && now_ms >= *checked {
                return Some(hit.clone());
            }
        }
        let _facts = crate::host::cost::span(crate::host::cost::Part::ProcFacts);
        let start = self.start_time_ms(pid)?;
        let checked = if now_ms == i64::MAX { 0 } else { now_ms };
        if let Some((hit, at)) = self.cache.get_mut(&pid) {
            if hit.start_time_ms == start {
                *at = checked;
                return Some(hit.clone());
            }
        }
        let info = Arc::new(self.read_uncached(pid, start)?);
        self.cache.insert(pid, (info.clone(), checked));
        Some(info)
    }

    /// Names that came late (a slow NSS) replace the digits that stood for them.
    fn take_late_names(&mut self) {
        if !self.users.any_running() || !self.users.resolved_late() {
            return;
        }
        for (info, _) in self.cache.values_mut() {
            if info.user == info.uid.to_string() {
                let name = self.users.name(info.uid);
                if name != info.user {
                    Arc::make_mut(info).user = name;
                }
            }
        }
    }

    /// Drops cache entries for PIDs not in `alive`.
    pub fn retain(&mut self, alive: &dyn Fn(u32) -> bool) {
        self.cache.retain(|pid, _| alive(*pid));
        let cache = &self.cache;
        self.containers.retain(&|k| {
            cache
                .get(&k.pid)
                .is_some_and(|(i, _)| i.start_time_ms == k.start_time_ms)
        });
    }

    fn read_uncached(&mut self, pid: u32, start_time_ms: UnixMs) -> Option<ProcInfo> {
        let dir = self.root.join(pid.to_string());
        // A name need not be UTF-8 (`prctl(PR_SET_NAME)` takes any bytes): the files are read
        // as bytes and the name shown lossily, so the user and start time are kept.
        let stat = read_lossy(&dir.join("stat"))?;
        let name = parse_stat_comm(&stat).unwrap_or_default();
        let cmdline = fs::read(dir.join("cmdline"))
            .map(|b| cmdline_from_bytes(&b))
            .unwrap_or_default();
        let uid = read_lossy(&dir.join("status"))
            .and_then(|s| parse_status_uid(&s))
            .unwrap_or(u32::MAX);
        // Through NSS, waited for briefly (a directory server may hang): the uid in digits
        // until it answers.
        let user = self.users.name(uid);
        let cgroup = fs::read_to_string(dir.join("cgroup")).ok();
        let container_id = cgroup.as_deref().and_then(container_id_from_cgroup);
        // Once per process (this runs for a new process only): the pod log folders and
        // Docker's config are read here, never per tick.
        let key = ProcessKey { pid, start_time_ms };
        let c = self
            .containers
            .get_parsed(key, cgroup.as_deref().unwrap_or(""));
        Some(ProcInfo {
            name,
            cmdline,
            user,
            uid,
            start_time_ms,
            container_id,
            container_name: c.container.clone(),
            pod: c.pod.as_ref().map(|p| match &c.namespace {
                Some(ns) => format!("{ns}/{p}"),
                None => p.clone(),
            }),
        })
    }
}

/// A `/proc` text file read as bytes, invalid UTF-8 replaced (a process name may hold any
/// bytes but the fields around it are ASCII).
pub fn read_lossy(path: &std::path::Path) -> Option<String> {
    fs::read(path)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// `btime` (boot time, seconds since the epoch) from `/proc/stat`.
fn parse_btime(stat: &str) -> Option<i64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The `comm` field of `/proc/PID/stat` (between the first '(' and the last ')').
fn parse_stat_comm(stat: &str) -> Option<String> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    (close > open).then(|| stat[open + 1..close].to_string())
}

/// Field 22 (`starttime`, clock ticks after boot) of `/proc/PID/stat`.
pub(crate) fn parse_stat_start_ticks(stat: &str) -> Option<u64> {
    // Fields after the comm start at field 3 (state); starttime is field 22 → index 19 after ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The real uid from the `Uid:` line of `/proc/PID/status`.
pub(crate) fn parse_status_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// NUL-separated argv to one space-separated line.
fn cmdline_from_bytes(bytes: &[u8]) -> String {
    bytes
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(String::from_utf8_lossy)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A container id (64 hex digits, as Docker, containerd, CRI-O and Podman name them) in a
/// `/proc/PID/cgroup` file, if there is one.
fn container_id_from_cgroup(cgroup: &str) -> Option<String> {
    for line in cgroup.lines() {
        let path = line.rsplit(':').next().unwrap_or("");
        for part in path.split('/').rev() {
            let part = part.trim_end_matches(".scope");
            let id = part.rsplit(['-', ':']).next().unwrap_or(part);
            if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Some(id.to_string());
            }
        }
    }
    None
}

/// Fills in `/proc` facts for processes the source did not describe.
pub(crate) fn enrich(snap: &mut crate::model::Snapshot, procs: &mut ProcReader) {
    procs.take_late_names();
    for p in &mut snap.processes {
        if p.info.is_none() {
            p.info = procs.read_at(p.pid, snap.taken_at_ms);
        }
    }
    if !snap.processes.is_empty() {
        let mut alive = std::mem::take(&mut procs.alive);
        alive.clear();
        alive.extend(snap.processes.iter().map(|p| p.pid));
        procs.retain(&|pid| alive.contains(&pid));
        procs.alive = alive;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_and_parens_in_comm() {
        let stat = "1234 (my (weird) proc) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 98765 1000 10";
        assert_eq!(parse_stat_comm(stat).as_deref(), Some("my (weird) proc"));
        assert_eq!(parse_stat_start_ticks(stat), Some(98765));
    }

    #[test]
    fn container_ids_from_common_runtimes() {
        let id = "a".repeat(64);
        let docker = format!("0::/system.slice/docker-{id}.scope\n");
        assert_eq!(container_id_from_cgroup(&docker), Some(id.clone()));
        let k8s = format!("12:memory:/kubepods/burstable/pod123/{id}\n");
        assert_eq!(container_id_from_cgroup(&k8s), Some(id.clone()));
        let crio = format!("0::/kubepods.slice/crio-{id}.scope");
        assert_eq!(container_id_from_cgroup(&crio), Some(id));
        assert_eq!(
            container_id_from_cgroup("0::/user.slice/user-1000.slice/session-2.scope"),
            None
        );
    }

    #[test]
    fn status_and_cmdline() {
        assert_eq!(
            parse_status_uid("Name:\tx\nUid:\t1000\t1000\t1000\t1000\n"),
            Some(1000)
        );
        assert_eq!(
            cmdline_from_bytes(b"python3\0train.py\0--lr\x000.1\0"),
            "python3 train.py --lr 0.1"
        );
    }
}
