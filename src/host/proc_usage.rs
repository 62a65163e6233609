//! Host CPU and memory of the processes on the GPUs: CPU as the change of user + system time
//! since the previous tick (percent of one core), memory as the resident set. One read per
//! process per tick (a process on two GPUs is read once); only live host processes (simulated
//! and recorded ones have none).
//!
//! Where `/proc` is this process's own (the same PID namespace), a process's CPU time comes
//! from its CPU-time clock (`clock_getcpuclockid(3)`, one `clock_gettime(2)`, in ns) and its
//! resident set from `/proc/PID/statm`, which is VmRSS: the kernel writes `stat`'s fifty-two
//! fields, summing every thread's page faults, for the two figures read here, and its
//! resident set is the per-CPU approximation (397 pages against VmRSS's 430 seen for a shell).
//! Else both come from `/proc/PID/stat`.
//!
//! Each process's file is opened once and kept open for its life (up to [`KEPT_FILES`]): a
//! tick reads it again from its start with one `pread(2)` into a buffer kept between ticks,
//! rather than a path lookup, an open, a stat, two reads and a close. A kept file names the
//! process it was opened for: once that one exits it reads nothing (ESRCH), even if its PID is
//! reused. The clock, which names a PID, is read before the file: when the file still reads,
//! the process the clock named was alive when it was read, so its PID was not yet another's.

use std::path::{Path, PathBuf};

use crate::model::{FastMap, FastSet, Origin, Snapshot, UnixMs};

pub use crate::host::cost::thread_cpu_ns;

/// The per-tick reader, keeping each process's last CPU time.
#[derive(Debug)]
pub struct ProcUsage {
    root: PathBuf,
    /// True when CPU time comes from each process's CPU-time clock (`/proc` is ours).
    clocks: bool,
    ticks_per_sec: f64,
    page_size: u64,
    /// pid → (start time, when read, user + system time in ns).
    last: FastMap<u32, (UnixMs, UnixMs, u64)>,
    /// pid → its file, kept open.
    files: FastMap<u32, Kept>,
    /// The bytes of the last read.
    buf: Vec<u8>,
    /// A tick's readings by pid and its pids (kept between ticks for their room).
    read: FastMap<u32, (Option<f32>, u64)>,
    alive: FastSet<u32>,
}

/// A process's file kept open (`statm`, or `stat` without clocks) and its CPU-time clock.
#[derive(Debug)]
struct Kept {
    /// The start time of the process it was opened for.
    start: UnixMs,
    file: std::fs::File,
    /// Its CPU-time clock (with clocks).
    clock: Option<libc::clockid_t>,
}

/// Most files kept open (beyond, a process's file is opened at each tick).
const KEPT_FILES: usize = 256;

impl Default for ProcUsage {
    fn default() -> Self {
        Self::new("/proc")
    }
}

/// (utime + stime in clock ticks, rss in pages) from a `/proc/PID/stat` line.
pub fn parse_stat_usage(stat: &str) -> Option<(u64, u64)> {
    // Fields after the command name (which may hold spaces and parentheses): state is field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    // rest[0] is field 3; utime 14, stime 15, rss 24.
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    let rss: i64 = f.nth(8)?.parse().ok()?;
    Some((utime + stime, rss.max(0) as u64))
}

/// The resident set in pages from a `/proc/PID/statm` line (its second field).
pub(crate) fn parse_statm_rss(statm: &str) -> Option<u64> {
    statm.split_whitespace().nth(1)?.parse().ok()
}

/// True when `root` is the `/proc` of this process's PID namespace (its `self` names us), so
/// a PID there is one `clock_getcpuclockid(3)` knows.
fn is_own_proc(root: &Path) -> bool {
    std::fs::read_link(root.join("self"))
        .is_ok_and(|l| l.to_str() == Some(std::process::id().to_string().as_str()))
}

/// The CPU-time clock of process `pid`; None when there is no such process.
fn cpu_clock(pid: u32) -> Option<libc::clockid_t> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    let mut id: libc::clockid_t = 0;
    // SAFETY: `id` is a valid place for the clock id; the call reads nothing else.
    (unsafe { libc::clock_getcpuclockid(pid, &mut id) } == 0).then_some(id)
}

/// Clock `id`'s time in ns; None when it no longer reads (its process gone).
fn clock_ns(id: libc::clockid_t) -> Option<u64> {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write; the call reads nothing else.
    if unsafe { libc::clock_gettime(id, &mut t) } != 0 {
        return None;
    }
    Some(u64::try_from(t.tv_sec).ok()? * 1_000_000_000 + u64::try_from(t.tv_nsec).ok()?)
}

impl ProcUsage {
    /// A reader over `root` (normally `/proc`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        // SAFETY: sysconf has no preconditions.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let root = root.into();
        Self {
            clocks: is_own_proc(&root),
            root,
            ticks_per_sec: if ticks > 0 { ticks as f64 } else { 100.0 },
            page_size: if page > 0 { page as u64 } else { 4096 },
            last: FastMap::default(),
            files: FastMap::default(),
            buf: Vec::new(),
            read: FastMap::default(),
            alive: FastSet::default(),
        }
    }

    /// Opens process `pid`'s file (and finds its clock), for the process started at `start`.
    fn open(&self, pid: u32, start: UnixMs) -> Option<Kept> {
        let name = if self.clocks { "statm" } else { "stat" };
        let clock = if self.clocks {
            Some(cpu_clock(pid)?)
        } else {
            None
        };
        let file = std::fs::File::open(self.root.join(pid.to_string()).join(name)).ok()?;
        Some(Kept { start, file, clock })
    }

    /// The CPU time (ns) and resident pages of process `pid` started at `start`, read now
    /// through its kept file (opened and kept the first time); None when it cannot be read
    /// (the process is gone).
    fn read_usage(&mut self, pid: u32, start: UnixMs) -> Option<(u64, u64)> {
        if self.files.get(&pid).is_some_and(|k| k.start != start) {
            self.files.remove(&pid);
        }
        // A kept file that no longer reads (its process gone, the PID maybe taken by another
        // one since) is dropped, and the path opened afresh once.
        for _ in 0..2 {
            let fresh = !self.files.contains_key(&pid);
            if fresh {
                let kept = self.open(pid, start)?;
                if self.files.len() >= KEPT_FILES {
                    return read_from(&kept, &mut self.buf, self.ticks_per_sec);
                }
                self.files.insert(pid, kept);
            }
            let tps = self.ticks_per_sec;
            match self
                .files
                .get(&pid)
                .and_then(|k| read_from(k, &mut self.buf, tps))
            {
                Some(v) => return Some(v),
                None => {
                    self.files.remove(&pid);
                    if fresh {
                        break;
                    }
                }
            }
        }
        None
    }

    /// Fills `cpu_pct` and `rss_bytes` of the live processes in `snap`.
    pub fn sample(&mut self, snap: &mut Snapshot) {
        let now = snap.taken_at_ms;
        let mut read = std::mem::take(&mut self.read);
        read.clear();
        for p in snap
            .processes
            .iter_mut()
            .filter(|p| p.origin == Origin::Live)
        {
            let start = p.key().start_time_ms;
            let got = match read.get(&p.pid) {
                Some(v) => Some(*v),
                None => {
                    let v = self.read_usage(p.pid, start).map(|(ns, rss_pages)| {
                        let cpu = self.cpu_pct(p.pid, start, now, ns);
                        self.last.insert(p.pid, (start, now, ns));
                        (cpu, rss_pages * self.page_size)
                    });
                    if let Some(v) = v {
                        read.insert(p.pid, v);
                    }
                    v
                }
            };
            if let Some((cpu, rss)) = got {
                p.cpu_pct = cpu;
                p.rss_bytes = Some(rss);
            }
        }
        let mut alive = std::mem::take(&mut self.alive);
        alive.clear();
        alive.extend(snap.processes.iter().map(|p| p.pid));
        self.last.retain(|pid, _| alive.contains(pid));
        self.files.retain(|pid, _| alive.contains(pid));
        self.read = read;
        self.alive = alive;
    }

    /// The percent of one core process `pid` (started at `start`) used since its last
    /// reading, now that its CPU time is `ns` at `now`; None without one.
    fn cpu_pct(&self, pid: u32, start: UnixMs, now: UnixMs, ns: u64) -> Option<f32> {
        match self.last.get(&pid) {
            Some((s0, t0, n0)) if *s0 == start && now > *t0 && ns >= *n0 => {
                let busy_ms = (ns - n0) as f64 / 1e6;
                Some((busy_ms * 100.0 / (now - t0) as f64) as f32)
            }
            _ => None,
        }
    }
}

/// The CPU time (ns) and resident pages through `kept`: its clock first, then its file (read
/// into `buf`; a `stat` file's clock ticks are `ticks_per_sec`).
fn read_from(kept: &Kept, buf: &mut Vec<u8>, ticks_per_sec: f64) -> Option<(u64, u64)> {
    let clock = match kept.clock {
        Some(id) => Some(clock_ns(id)?),
        None => None,
    };
    let n = read_at_start(&kept.file, buf)?;
    let text = String::from_utf8_lossy(buf.get(..n)?);
    match clock {
        Some(ns) => Some((ns, parse_statm_rss(&text)?)),
        None => {
            let (ticks, rss) = parse_stat_usage(&text)?;
            Some(((ticks as f64 * 1e9 / ticks_per_sec) as u64, rss))
        }
    }
}

/// Reads `f` from its start into `buf` (grown when a read fills it, as the text may be cut);
/// the bytes read, or None when it does not read.
fn read_at_start(f: &std::fs::File, buf: &mut Vec<u8>) -> Option<usize> {
    use std::os::unix::fs::FileExt;
    if buf.len() < 1024 {
        buf.resize(1024, 0);
    }
    loop {
        match f.read_at(buf, 0) {
            Ok(n) if n == buf.len() => buf.resize(n * 2, 0),
            Ok(n) => return Some(n),
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_time_and_rss_after_a_name_with_spaces_and_parens() {
        let stat = "1234 (my (weird) name) S 1 1234 1234 0 -1 4194560 500 0 0 0 70 30 0 0 20 0 4 0 8888 123456789 2048 18446744073709551615";
        assert_eq!(parse_stat_usage(stat), Some((100, 2048)));
    }

    #[test]
    fn reads_the_resident_set_of_a_statm_line() {
        assert_eq!(parse_statm_rss("123456 2048 300 10 0 9000 0\n"), Some(2048));
        assert_eq!(parse_statm_rss("123456"), None);
        assert_eq!(parse_statm_rss("1 x 3"), None);
    }

    /// A busy child (`sh` in a loop), exec'd; killed when dropped.
    struct Busy(std::process::Child);

    impl Busy {
        fn start() -> Self {
            let child = std::process::Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .expect("spawn");
            let pid = child.id();
            // Wait until the shell has replaced the spawned copy (its RSS reads 0 while exec
            // builds the new address space; seen on CI).
            let started = std::time::Instant::now();
            let execed = || {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sh")
                    && std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .ok()
                        .and_then(|s| parse_stat_usage(&s))
                        .is_some_and(|(_, rss)| rss > 0)
            };
            while !execed() {
                assert!(
                    started.elapsed() < std::time::Duration::from_secs(10),
                    "the child never showed a resident set"
                );
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Busy(child)
        }
    }

    impl Drop for Busy {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The kernel's two ways to a process's CPU time agree: its CPU-time clock and
    /// `/proc/PID/stat`'s user + system ticks; and its resident set in `statm` and `stat`.
    #[test]
    fn the_cpu_clock_and_statm_agree_with_stat() {
        let busy = Busy::start();
        let pid = busy.0.id();
        let stat = |pid: u32| {
            let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
            parse_stat_usage(&s).expect("parse")
        };
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        // Until it has used 150 ms of CPU (on a loaded machine that takes longer than 150 ms).
        let t = std::time::Instant::now();
        while stat(pid).0 * 1000 / hz < 150 {
            assert!(t.elapsed().as_secs() < 30, "the busy child never ran");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let (ticks0, rss) = stat(pid);
        let clock = clock_ns(cpu_clock(pid).expect("its clock")).expect("clock");
        let (ticks1, _) = stat(pid);
        let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).expect("statm");
        let statm = parse_statm_rss(&statm).expect("statm's resident set");
        // statm's resident set is VmRSS, the exact one; stat's the kernel's per-CPU
        // approximation (397 pages against 430 seen here): at most a batch per CPU apart.
        let page_size = ProcUsage::default().page_size;
        assert_eq!(statm * page_size, vm_rss(pid), "statm is VmRSS");
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        assert!(
            statm.abs_diff(rss) <= 64 * cpus,
            "statm {statm} stat {rss} pages"
        );
        let (lo, hi) = (
            ticks0 * 1_000_000_000 / hz,
            (ticks1 + 1) * 1_000_000_000 / hz,
        );
        assert!(
            clock > 100_000_000 && lo <= clock + 20_000_000 && clock <= hi + 20_000_000,
            "the clock {clock} ns against stat's {lo}..{hi} ns"
        );
        drop(busy);
        assert_eq!(cpu_clock(pid).and_then(clock_ns), None, "gone: no clock");
    }

    /// `/proc` is this process's own here, so the clock is used; a `/proc` that is not (a
    /// folder of links to its entries, whose `self` is not ours) is read through `stat`; both
    /// give the same CPU share of a busy process and the same resident set.
    #[test]
    fn own_proc_uses_the_clock_and_another_stat_with_the_same_figures() {
        let busy = Busy::start();
        let pid = busy.0.id();
        let other = tempfile::tempdir().expect("tmp");
        std::os::unix::fs::symlink(format!("/proc/{pid}"), other.path().join(pid.to_string()))
            .expect("link");
        let mut by_clock = ProcUsage::default();
        let mut by_stat = ProcUsage::new(other.path());
        assert!(by_clock.clocks && !by_stat.clocks);
        let snap = |t| live(pid, 7, t);
        let t0 = crate::model::now_ms();
        let (mut a, mut b) = (snap(t0), snap(t0));
        by_clock.sample(&mut a);
        by_stat.sample(&mut b);
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let t1 = crate::model::now_ms();
        let (mut a, mut b) = (snap(t1), snap(t1));
        by_clock.sample(&mut a);
        by_stat.sample(&mut b);
        let (pa, pb) = (&a.processes[0], &b.processes[0]);
        let (ca, cb) = (pa.cpu_pct.expect("clock"), pb.cpu_pct.expect("stat"));
        // The same second of CPU, read a few µs apart (stat counts in 10 ms ticks); a reader
        // preempted between the two reads on a busy machine moves them by its wait.
        assert!(
            ca > 1.0 && (ca - cb).abs() < 15.0,
            "clock {ca} % against stat {cb} %"
        );
        // The clock's reader takes the resident set from statm: VmRSS.
        assert_eq!(pa.rss_bytes, Some(vm_rss(pid)));
        assert!(pb.rss_bytes.is_some_and(|r| r > 0));
    }

    /// A process's VmRSS (`/proc/PID/status`), in bytes.
    fn vm_rss(pid: u32) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        crate::host::cost::vm_rss_bytes(&status).expect("VmRSS")
    }

    fn live(pid: u32, start: UnixMs, t: UnixMs) -> Snapshot {
        Snapshot {
            taken_at_ms: t,
            devices: Vec::new(),
            processes: vec![crate::model::ProcessSample {
                pid,
                origin: Origin::Live,
                info: Some(std::sync::Arc::new(crate::model::ProcInfo {
                    start_time_ms: start,
                    ..Default::default()
                })),
                ..Default::default()
            }],
        }
    }

    /// A process's stat file is opened once and read again at each tick; once the process is
    /// gone it reads nothing and the file is let go.
    #[test]
    fn a_kept_stat_file_reads_its_process_until_it_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn");
        let pid = child.id();
        let mut u = ProcUsage::default();
        for t in [1_000, 2_000, 3_000] {
            let mut snap = live(pid, 7, t);
            u.sample(&mut snap);
            assert!(snap.processes[0].rss_bytes.is_some(), "tick {t}");
            assert_eq!(u.files.len(), 1);
        }
        let _ = child.kill();
        let _ = child.wait();
        let mut snap = live(pid, 7, 4_000);
        u.sample(&mut snap);
        assert_eq!(snap.processes[0].rss_bytes, None, "gone: no reading");
        assert!(u.files.is_empty());
        // Another start time under the same PID is another process: its own file.
        let mut me = live(std::process::id(), 1, 5_000);
        u.sample(&mut me);
        let mut again = live(std::process::id(), 2, 6_000);
        u.sample(&mut again);
        assert_eq!(
            again.processes[0].cpu_pct, None,
            "no reading of this one before"
        );
        assert_eq!(u.files.get(&std::process::id()).map(|k| k.start), Some(2));
    }

    #[test]
    fn a_busy_child_shows_cpu_and_memory() {
        // A real process burning CPU: its CPU % over a tick is well above zero.
        let busy = Busy::start();
        let pid = busy.0.id();
        let mut u = ProcUsage::default();
        let mut reader = crate::host::procinfo::ProcReader::default();
        let snap = |t: UnixMs, r: &mut crate::host::procinfo::ProcReader| Snapshot {
            taken_at_ms: t,
            devices: Vec::new(),
            processes: vec![crate::model::ProcessSample {
                pid,
                origin: Origin::Live,
                info: r.read(pid),
                ..Default::default()
            }],
        };
        let t0 = crate::model::now_ms();
        let mut a = snap(t0, &mut reader);
        u.sample(&mut a);
        assert_eq!(a.processes[0].cpu_pct, None, "no previous reading");
        assert!(a.processes[0].rss_bytes.is_some_and(|r| r > 0));
        std::thread::sleep(std::time::Duration::from_millis(600));
        let mut b = snap(crate::model::now_ms(), &mut reader);
        u.sample(&mut b);
        drop(busy);
        let cpu = b.processes[0].cpu_pct.expect("cpu");
        // Its share of a core depends on the machine's load (11 % was seen with every core
        // busy compiling); an idle process reads 0.
        assert!(
            cpu > 1.0 && cpu <= 101.0,
            "a busy loop uses {cpu} % of a core"
        );
    }
}
