//! Host CPU and memory of the processes on the GPUs, from `/proc/PID/stat`: CPU as the change
//! of user + system time since the previous tick (percent of one core), memory as the resident
//! set. One read per process per tick (a process on two GPUs is read once); only live host
//! processes (simulated and recorded ones have none).
//!
//! Each process's `stat` file is opened once and kept open for its life (up to
//! [`KEPT_FILES`]): a tick reads it again from its start with one `pread(2)` into a buffer
//! kept between ticks, rather than a path lookup, an open, a stat, two reads and a close. A
//! kept file names the process it was opened for: once that one exits it reads nothing
//! (ESRCH), even if its PID is reused.

use std::path::PathBuf;

use crate::model::{FastMap, FastSet, Origin, Snapshot, UnixMs};

pub use crate::host::cost::thread_cpu_ns;

/// The per-tick reader, keeping each process's last CPU time.
#[derive(Debug)]
pub struct ProcUsage {
    root: PathBuf,
    ticks_per_sec: f64,
    page_size: u64,
    /// pid → (start time, when read, user + system ticks).
    last: FastMap<u32, (UnixMs, UnixMs, u64)>,
    /// pid → (start time, its `stat` file, kept open).
    files: FastMap<u32, (UnixMs, std::fs::File)>,
    /// The bytes of the last `stat` read.
    buf: Vec<u8>,
    /// A tick's readings by pid and its pids (kept between ticks for their room).
    read: FastMap<u32, (Option<f32>, u64)>,
    alive: FastSet<u32>,
}

/// Most `stat` files kept open (beyond, a process's file is opened at each tick).
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
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3; utime 14, stime 15, rss 24.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let rss: i64 = f.get(21)?.parse().ok()?;
    Some((utime + stime, rss.max(0) as u64))
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
        Self {
            root: root.into(),
            ticks_per_sec: if ticks > 0 { ticks as f64 } else { 100.0 },
            page_size: if page > 0 { page as u64 } else { 4096 },
            last: FastMap::default(),
            files: FastMap::default(),
            buf: Vec::new(),
            read: FastMap::default(),
            alive: FastSet::default(),
        }
    }

    /// The CPU ticks and resident pages ([`parse_stat_usage`]) of process `pid` started at
    /// `start`, read now through its kept file (opened and kept the first time); None when
    /// it cannot be read (the process is gone).
    fn read_usage(&mut self, pid: u32, start: UnixMs) -> Option<(u64, u64)> {
        if self.files.get(&pid).is_some_and(|(s, _)| *s != start) {
            self.files.remove(&pid);
        }
        // A kept file that no longer reads (its process gone, the PID maybe taken by another
        // one since) is dropped, and the path opened afresh once.
        for _ in 0..2 {
            let fresh = !self.files.contains_key(&pid);
            if fresh {
                let f = std::fs::File::open(self.root.join(pid.to_string()).join("stat")).ok()?;
                if self.files.len() >= KEPT_FILES {
                    return read_all(&f, &mut self.buf);
                }
                self.files.insert(pid, (start, f));
            }
            match self.read_kept(pid) {
                Some(n) => return parse_stat_usage(&String::from_utf8_lossy(&self.buf[..n])),
                None if fresh => break,
                None => {}
            }
        }
        self.files.remove(&pid);
        None
    }

    /// Reads `pid`'s kept file from its start into the buffer; the bytes read, or None when
    /// it does not read (the file is dropped then).
    fn read_kept(&mut self, pid: u32) -> Option<usize> {
        use std::os::unix::fs::FileExt;
        let (_, f) = self.files.get(&pid)?;
        if self.buf.len() < 1024 {
            self.buf.resize(1024, 0);
        }
        loop {
            match f.read_at(&mut self.buf, 0) {
                // A stat that fills the buffer may be cut: read it again into a larger one.
                Ok(n) if n == self.buf.len() => self.buf.resize(n * 2, 0),
                Ok(n) => return Some(n),
                Err(_) => {
                    self.files.remove(&pid);
                    return None;
                }
            }
        }
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
                    let v = self.read_usage(p.pid, start).map(|(ticks, rss_pages)| {
                        let cpu = match self.last.get(&p.pid) {
                            Some((s0, t0, k0)) if *s0 == start && now > *t0 && ticks >= *k0 => {
                                let secs = (ticks - k0) as f64 / self.ticks_per_sec;
                                Some((secs * 100_000.0 / (now - t0) as f64) as f32)
                            }
                            _ => None,
                        };
                        self.last.insert(p.pid, (start, now, ticks));
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
}

/// [`parse_stat_usage`] of the whole of `f` read into `buf` (a file not kept open).
fn read_all(f: &std::fs::File, buf: &mut Vec<u8>) -> Option<(u64, u64)> {
    use std::io::Read;
    buf.clear();
    (&*f).read_to_end(buf).ok()?;
    parse_stat_usage(&String::from_utf8_lossy(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cpu_time_and_rss_after_a_name_with_spaces_and_parens() {
        let stat = "1234 (my (weird) name) S 1 1234 1234 0 -1 4194560 500 0 0 0 70 30 0 0 20 0 4 0 8888 123456789 2048 18446744073709551615";
        assert_eq!(parse_stat_usage(stat), Some((100, 2048)));
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
        assert_eq!(u.files.get(&std::process::id()).map(|(s, _)| *s), Some(2));
    }

    #[test]
    fn a_busy_child_shows_cpu_and_memory() {
        // A real process burning CPU: its CPU % over a tick is well above zero.
        let mut child = std::process::Command::new("sh")
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
        let _ = child.kill();
        let _ = child.wait();
        let cpu = b.processes[0].cpu_pct.expect("cpu");
        // Its share of a core depends on the machine's load (11 % was seen with every core
        // busy compiling); an idle process reads 0.
        assert!(
            cpu > 1.0 && cpu <= 101.0,
            "a busy loop uses {cpu} % of a core"
        );
    }
}
