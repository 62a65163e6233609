//! GPU memory held by processes that are gone or unseen: the driver lists a PID that `/proc`
//! does not have (it died and the driver has not let go, it lives in another PID namespace,
//! or `/proc` hides it), or one that is a zombie. Such memory is shown as its own kind ("held
//! by PID 4711, not running here"), totalled per GPU, alerted past [`ALERT_MIB`], and the real
//! holders this machine can see are named: processes with a `/dev/nvidia*` file open that the
//! driver does not list, found by reading the links in `/proc/*/fd` (as `lsof` would) on a
//! named thread of its own, at most every [`RESCAN_MS`] and only while such memory exists.
//!
//! Inside a container with a PID namespace of its own the driver's PIDs are the host's, so a
//! PID missing from `/proc` is not judged there (zombies still are).
//!
//! The remedy offered is what is possible: terminate a visible holder, have a zombie's parent
//! reap it, or, when nothing here holds the device, say that only a driver reset (or a reboot)
//! frees it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::model::{Origin, Snapshot, UnixMs, MIB};

/// A GPU whose memory held by processes not running here reaches this much (MiB) is alerted.
const ALERT_MIB: u64 = 1024;
/// The `/proc/*/fd` scan runs at most this often (ms), and only while such memory exists.
const RESCAN_MS: UnixMs = 30_000;
/// A listed process's state (zombie or not) is read again at most this often (ms).
const STATE_EVERY_MS: UnixMs = 10_000;
/// Most processes and open files per process the scan looks at (a bound on its work).
const SCAN_MAX_PROCS: usize = 65_536;
/// See [`SCAN_MAX_PROCS`].
const SCAN_MAX_FDS: usize = 65_536;

/// Why a PID the driver lists is not a running process here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotRunning {
    /// `/proc` has no such PID: it died with the driver still holding its memory, or it
    /// lives in another PID namespace (a container), or `/proc` hides it.
    NoProcess,
    /// It has exited and its parent has not reaped it.
    Zombie,
}

/// One listed PID that is not running here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrphanPid {
    /// The PID the driver lists.
    pub pid: u32,
    /// The memory the driver says it holds.
    pub used_bytes: Option<u64>,
    /// Why it is not running here.
    pub kind: NotRunning,
}

impl OrphanPid {
    /// "held by PID 4711, not running here" (or "…, a zombie").
    pub fn label(&self) -> String {
        self.label_at("here")
    }

    /// [`OrphanPid::label`] for the host `place` names ("here", "on gpu-box").
    pub(crate) fn label_at(&self, place: &str) -> String {
        match self.kind {
            NotRunning::NoProcess => format!("held by PID {}, not running {place}", self.pid),
            NotRunning::Zombie => format!("held by PID {}, a zombie", self.pid),
        }
    }
}

/// A process this machine can see with an NVIDIA device file open, that the driver does not
/// list on any GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevHolder {
    /// Its PID here.
    pub pid: u32,
    /// Its name (`comm`).
    pub name: String,
    /// Its owner.
    pub user: String,
    /// The device files it holds open (`/dev/nvidia0`, `/dev/nvidia-uvm`, …).
    pub devices: Vec<String>,
}

/// The memory of one GPU held by processes not running here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrphanGpu {
    /// The GPU.
    pub device_index: u32,
    /// Their memory in all.
    pub total_bytes: u64,
    /// The PIDs.
    pub pids: Vec<OrphanPid>,
    /// The processes seen holding NVIDIA device files that the driver does not list.
    pub holders: Vec<DevHolder>,
    /// What can free it, in words.
    pub remedy: String,
}

/// The remedy for orphaned memory on a GPU, given what was found.
pub fn remedy(pids: &[OrphanPid], holders: &[DevHolder]) -> String {
    remedy_on(pids, holders, "this machine")
}

/// [`remedy`] on the machine `machine` names ("this machine", or an agent's host).
pub(crate) fn remedy_on(pids: &[OrphanPid], holders: &[DevHolder], machine: &str) -> String {
    if !holders.is_empty() {
        let names: Vec<String> = holders
            .iter()
            .take(5)
            .map(|h| format!("{} (PID {}, {})", h.name, h.pid, h.user))
            .collect();
        return format!(
            "terminate the process that still holds the GPU: {}{}",
            names.join(", "),
            if holders.len() > 5 { ", …" } else { "" }
        );
    }
    if pids.iter().any(|p| p.kind == NotRunning::Zombie) {
        return "a zombie's memory is freed when its parent reaps it: terminate the parent".into();
    }
    format!(
        "no process on {machine} holds the GPU: only a driver reset (nvidia-smi --gpu-reset, \
         with nothing else on the GPU) or a reboot frees it"
    )
}

/// The processes under `proc_root` with an NVIDIA device file open (`/dev/nvidia*` behind
/// one of their `fd` links), except the PIDs in `skip`. Unreadable entries are passed over;
/// at most [`SCAN_MAX_PROCS`] processes and [`SCAN_MAX_FDS`] files each are looked at.
fn scan_holders(proc_root: &Path, skip: &HashSet<u32>) -> Vec<DevHolder> {
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten().take(SCAN_MAX_PROCS) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if skip.contains(&pid) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let mut devices: Vec<String> = fds
            .flatten()
            .take(SCAN_MAX_FDS)
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter_map(|t| t.to_str().map(str::to_string))
            .filter(|t| t.starts_with("/dev/nvidia"))
            .collect();
        if devices.is_empty() {
            continue;
        }
        devices.sort();
        devices.dedup();
        let dir = entry.path();
        let name = std::fs::read_to_string(dir.join("comm"))
            .map(|c| c.trim_end().to_string())
            .unwrap_or_else(|_| "?".into());
        let uid = std::fs::read_to_string(dir.join("status"))
            .ok()
            .and_then(|s| crate::host::procinfo::parse_status_uid(&s));
        let user = uid.map_or_else(|| "?".into(), crate::host::user_names::user_name_of);
        out.push(DevHolder {
            pid,
            name,
            user,
            devices,
        });
    }
    out.sort_by_key(|h| h.pid);
    out
}

/// The result of the last scan: when it finished, and what it found.
type ScanResult = Arc<Mutex<Option<(UnixMs, Vec<DevHolder>)>>>;

/// Runs [`scan_holders`] off the tick, on a named one-shot thread.
#[derive(Default)]
struct HolderScan {
    result: ScanResult,
    running: Arc<std::sync::atomic::AtomicBool>,
    last_started: Option<UnixMs>,
}

impl HolderScan {
    /// Starts a scan when none runs and the last one is [`RESCAN_MS`] old; returns the last
    /// result (empty until one finished).
    fn poll(&mut self, root: &Path, skip: HashSet<u32>, now: UnixMs) -> Vec<DevHolder> {
        use std::sync::atomic::Ordering;
        let due = self
            .last_started
            .is_none_or(|t| (now - t).abs() >= RESCAN_MS);
        if due && !self.running.load(Ordering::Acquire) {
            self.last_started = Some(now);
            self.running.store(true, Ordering::Release);
            let (result, running, root) = (
                self.result.clone(),
                self.running.clone(),
                root.to_path_buf(),
            );
            let spawned = std::thread::Builder::new()
                .name("vw-nvidia-holders".into())
                .spawn(move || {
                    let found = scan_holders(&root, &skip);
                    if let Ok(mut r) = result.lock() {
                        *r = Some((crate::model::now_ms(), found));
                    }
                    running.store(false, Ordering::Release);
                });
            if spawned.is_err() {
                self.running.store(false, Ordering::Release);
            }
        }
        self.result
            .lock()
            .ok()
            .and_then(|r| r.as_ref().map(|(_, h)| h.clone()))
            .unwrap_or_default()
    }
}

/// Watches the driver's process lists for PIDs not running here.
pub(crate) struct OrphanWatch {
    root: PathBuf,
    /// Per PID: (zombie, when its state was read).
    states: HashMap<u32, (bool, UnixMs)>,
    alerted: HashSet<u32>,
    scan: HolderScan,
    /// False inside a container with a PID namespace of its own: a listed PID missing from
    /// `/proc` is then someone's outside it, not an orphan.
    same_pid_namespace: bool,
}

impl Default for OrphanWatch {
    fn default() -> Self {
        Self::new("/proc")
    }
}

impl OrphanWatch {
    /// A watch over a `/proc`-like tree at `root`.
    pub(crate) fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self {
            same_pid_namespace: crate::host::pid_namespace::is_initial(&root.join("self")),
            root,
            states: HashMap::new(),
            alerted: HashSet::new(),
            scan: HolderScan::default(),
        }
    }

    /// Whether `pid` is a zombie, read at most every [`STATE_EVERY_MS`]; `None` when `/proc`
    /// has no such PID.
    fn zombie(&mut self, pid: u32, now: UnixMs) -> Option<bool> {
        if let Some((z, t)) = self.states.get(&pid) {
            if (now - t).abs() < STATE_EVERY_MS {
                return Some(*z);
            }
        }
        let stat = std::fs::read_to_string(self.root.join(pid.to_string()).join("stat"));
        let Ok(stat) = stat else {
            self.states.remove(&pid);
            return None;
        };
        let z = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            == Some("Z");
        self.states.insert(pid, (z, now));
        Some(z)
    }

    /// The GPUs with memory held by live-listed PIDs that are not running here (live
    /// processes only: a recorded or simulated PID is nobody's here), and those to alert of
    /// (a GPU that reached [`ALERT_MIB`]; the front ends say it in words).
    pub(crate) fn observe(&mut self, snap: &Snapshot) -> (Vec<OrphanGpu>, Vec<OrphanGpu>) {
        let now = snap.taken_at_ms;
        let mut by_gpu: Vec<OrphanGpu> = Vec::new();
        let live: Vec<_> = snap
            .processes
            .iter()
            .filter(|p| p.origin == Origin::Live && !p.stale)
            .collect();
        for p in &live {
            let kind = match self.zombie(p.pid, now) {
                None if !self.same_pid_namespace => continue,
                None => NotRunning::NoProcess,
                Some(true) => NotRunning::Zombie,
                Some(false) => continue,
            };
            let gpu = match by_gpu
                .iter_mut()
                .position(|g| g.device_index == p.device_index)
            {
                Some(i) => &mut by_gpu[i],
                None => {
                    by_gpu.push(OrphanGpu {
                        device_index: p.device_index,
                        total_bytes: 0,
                        pids: Vec::new(),
                        holders: Vec::new(),
                        remedy: String::new(),
                    });
                    let n = by_gpu.len() - 1;
                    &mut by_gpu[n]
                }
            };
            gpu.total_bytes = gpu.total_bytes.saturating_add(p.used_bytes.unwrap_or(0));
            gpu.pids.push(OrphanPid {
                pid: p.pid,
                used_bytes: p.used_bytes,
                kind,
            });
        }
        let listed: HashSet<u32> = live.iter().map(|p| p.pid).collect();
        self.states.retain(|pid, _| listed.contains(pid));
        if !by_gpu.is_empty() {
            let holders = self.scan.poll(&self.root, listed, now);
            for g in &mut by_gpu {
                g.holders.clone_from(&holders);
                g.remedy = remedy(&g.pids, &g.holders);
            }
        }
        by_gpu.sort_by_key(|g| g.device_index);
        let alerts = self.alerts(&by_gpu);
        (by_gpu, alerts)
    }

    /// One alert per GPU when its orphaned memory reaches [`ALERT_MIB`] (again after it fell
    /// below).
    fn alerts(&mut self, gpus: &[OrphanGpu]) -> Vec<OrphanGpu> {
        let over: HashSet<u32> = gpus
            .iter()
            .filter(|g| g.total_bytes >= ALERT_MIB * MIB)
            .map(|g| g.device_index)
            .collect();
        let alerts = gpus
            .iter()
            .filter(|g| over.contains(&g.device_index) && !self.alerted.contains(&g.device_index))
            .cloned()
            .collect();
        self.alerted = over;
        alerts
    }
}

/// GPU `device_index`'s 1 GiB held by PID 4711, which no process here has, with `remedy`:
/// the window's unit tests' fixture.
#[cfg(all(test, feature = "gui"))]
pub(crate) fn one_gone_pid(device_index: u32, remedy: &str) -> OrphanGpu {
    OrphanGpu {
        device_index,
        total_bytes: crate::model::GIB,
        pids: vec![OrphanPid {
            pid: 4711,
            used_bytes: None,
            kind: NotRunning::NoProcess,
        }],
        holders: Vec::new(),
        remedy: remedy.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSample, ProcessSample, GIB};

    fn snap(procs: &[(u32, u64)]) -> Snapshot {
        Snapshot {
            taken_at_ms: 1_000_000,
            devices: vec![DeviceSample::default()],
            processes: procs
                .iter()
                .map(|&(pid, used)| ProcessSample {
                    pid,
                    used_bytes: Some(used),
                    origin: Origin::Live,
                    ..ProcessSample::default()
                })
                .collect(),
        }
    }

    /// A fake `/proc`: PID 10 runs, PID 11 is a zombie, PID 4711 is absent; PID 20 (not
    /// listed by the driver) holds /dev/nvidia0 and /dev/nvidiactl open.
    fn fake_proc() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tmp");
        let mk = |pid: u32, state: &str, comm: &str| {
            let p = d.path().join(pid.to_string());
            std::fs::create_dir_all(p.join("fd")).expect("dir");
            std::fs::write(
                p.join("stat"),
                format!("{pid} ({comm}) {state} 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 500 0 0"),
            )
            .expect("stat");
            std::fs::write(p.join("comm"), format!("{comm}\n")).expect("comm");
            std::fs::write(p.join("status"), "Name:\tx\nUid:\t0\t0\t0\t0\n").expect("status");
            p
        };
        mk(10, "S", "python3");
        mk(11, "Z", "python3");
        let holder = mk(20, "S", "launcher");
        for (fd, target) in [
            ("3", "/dev/nvidia0"),
            ("4", "/dev/nvidiactl"),
            ("5", "/tmp/x"),
        ] {
            std::os::unix::fs::symlink(target, holder.join("fd").join(fd)).expect("link");
        }
        d
    }

    #[test]
    fn in_a_pid_namespace_of_its_own_a_missing_pid_is_not_an_orphan_but_a_zombie_is() {
        let root = fake_proc();
        // The fake tree's `self/ns/pid` is a plain file: its inode is not the initial
        // namespace's, as inside a container.
        std::fs::create_dir_all(root.path().join("self/ns")).expect("dir");
        std::fs::write(root.path().join("self/ns/pid"), "").expect("ns");
        let mut w = OrphanWatch::new(root.path());
        let (gpus, alerts) = w.observe(&snap(&[(10, GIB), (11, 2 * GIB), (4711, 32 * GIB)]));
        let pids: Vec<u32> = gpus
            .iter()
            .flat_map(|g| g.pids.iter().map(|p| p.pid))
            .collect();
        assert_eq!(pids, vec![11], "only the zombie");
        assert_eq!(gpus[0].total_bytes, 2 * GIB);
        assert!(
            alerts.iter().all(|a| a.pids.iter().all(|p| p.pid != 4711)),
            "{alerts:?}"
        );
    }

    #[test]
    fn missing_and_zombie_pids_are_totalled_named_and_alerted_once() {
        let root = fake_proc();
        let mut w = OrphanWatch::new(root.path());
        let s = snap(&[(10, GIB), (11, 2 * GIB), (4711, 32 * GIB)]);
        let (gpus, alerts) = w.observe(&s);
        assert_eq!(gpus.len(), 1);
        let g = &gpus[0];
        assert_eq!(g.total_bytes, 34 * GIB);
        let kinds: Vec<(u32, NotRunning)> = g.pids.iter().map(|p| (p.pid, p.kind)).collect();
        assert_eq!(
            kinds,
            vec![(11, NotRunning::Zombie), (4711, NotRunning::NoProcess)]
        );
        assert_eq!(g.pids[1].label(), "held by PID 4711, not running here");
        assert_eq!(alerts.len(), 1, "{alerts:?}");
        assert_eq!(
            (alerts[0].device_index, alerts[0].total_bytes),
            (0, 34 * GIB)
        );
        // The scan runs on its own thread: its result comes with a later tick.
        let mut holders = Vec::new();
        for i in 0..200 {
            let mut s = s.clone();
            s.taken_at_ms += i;
            let (gpus, again) = w.observe(&s);
            assert!(again.is_empty(), "alerted once");
            holders = gpus[0].holders.clone();
            if !holders.is_empty() {
                assert!(
                    gpus[0].remedy.contains("launcher (PID 20"),
                    "{}",
                    gpus[0].remedy
                );
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(holders.len(), 1, "PID 20 holds the device");
        assert_eq!(holders[0].devices, vec!["/dev/nvidia0", "/dev/nvidiactl"]);
        // Freed: no orphan, no alert; back past the size: alerted again.
        assert!(w.observe(&snap(&[(10, GIB)])).0.is_empty());
        assert_eq!(w.observe(&s).1.len(), 1);
    }

    #[test]
    fn simulated_and_running_processes_are_never_orphans_and_the_remedy_says_what_is_possible() {
        let root = fake_proc();
        let mut w = OrphanWatch::new(root.path());
        let mut s = snap(&[(4711, GIB), (10, GIB)]);
        s.processes[0].origin = Origin::Simulated;
        assert!(w.observe(&s).0.is_empty());
        let gone = [OrphanPid {
            pid: 4711,
            used_bytes: Some(GIB),
            kind: NotRunning::NoProcess,
        }];
        assert!(remedy(&gone, &[]).contains("only a driver reset"));
        let zombie = [OrphanPid {
            kind: NotRunning::Zombie,
            ..gone[0].clone()
        }];
        assert!(remedy(&zombie, &[]).contains("parent"));
        // Small orphans are shown but not alerted.
        let (gpus, alerts) = w.observe(&snap(&[(4711, 100 * MIB)]));
        assert_eq!(gpus[0].total_bytes, 100 * MIB);
        assert!(alerts.is_empty());
    }
}
