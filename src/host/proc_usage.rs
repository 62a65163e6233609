//! Host CPU and memory of the processes on the GPUs, from `/proc/PID/stat`: CPU as the change
//! of user + system time since the previous tick (percent of one core), memory as the resident
//! set. One read per process per tick (a process on two GPUs is read once); only live host
//! processes (simulated and recorded ones have none).

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
}

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
        }
    }

    /// Fills `cpu_pct` and `rss_bytes` of the live processes in `snap`.
    pub fn sample(&mut self, snap: &mut Snapshot) {
        let now = snap.taken_at_ms;
        let mut read: FastMap<u32, (Option<f32>, u64)> = FastMap::default();
        for p in snap
            .processes
            .iter_mut()
            .filter(|p| p.origin == Origin::Live)
        {
            let start = p.key().start_time_ms;
            let got = match read.get(&p.pid) {
                Some(v) => Some(*v),
                None => {
                    let v = crate::host::procinfo::read_lossy(
                        &self.root.join(p.pid.to_string()).join("stat"),
                    )
                    .and_then(|s| parse_stat_usage(&s))
                    .map(|(ticks, rss_pages)| {
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
        let alive: FastSet<u32> = snap.processes.iter().map(|p| p.pid).collect();
        self.last.retain(|pid, _| alive.contains(pid));
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
