//! Where the CPU of a run goes: per-part counters of the sampler's tick (the source and its
//! NVML calls by kind, the `/proc` reads, the engine's stages, the session log's writes) and
//! of the HTTP front (its wake-ups and requests), for the run statistics that `-v` prints
//! (`vramwarden -v agent` at exit and on SIGUSR1, `vramwarden -v record` at exit).
//!
//! Off unless [`enable`]d: then each [`span`] reads the calling thread's CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`) when it starts and when it ends, and adds the difference to its
//! part; a part's figure includes its sub-parts' (shown indented under it). Off, a span costs
//! one relaxed atomic load. The clock reads themselves cost CPU: the report counts them and
//! says what they cost on this machine, so a `-v` run's own figure can be corrected.
//! The threads' CPU comes from `/proc/self/task/*/schedstat`, as an outside measurement would.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// What is counted. The order is the report's; [`Part::parent`] gives the nesting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// One sampling tick: the source, the engine's stages and dropping the sample replaced.
    Tick,
    /// The source's sample (the driver's calls, or the simulator).
    Source,
    /// NVML: memory (`nvmlDeviceGetMemoryInfo_v2`).
    NvmlMemory,
    /// NVML: GPU utilisation.
    NvmlUtilization,
    /// NVML: temperature.
    NvmlTemperature,
    /// NVML: power draw.
    NvmlPower,
    /// NVML: the enforced power limit.
    NvmlPowerLimit,
    /// NVML: SM and memory clocks.
    NvmlClocks,
    /// NVML: fan speed.
    NvmlFan,
    /// NVML: the compute process list.
    NvmlComputeList,
    /// NVML: the graphics process list.
    NvmlGraphicsList,
    /// NVML: per-process utilisation.
    NvmlProcessUtilization,
    /// The enrich stage: `/proc` facts, CPU use, PyTorch's figures.
    Enrich,
    /// `/proc/PID/{stat,cmdline,status,cgroup}` for a process new to the cache or revalidated.
    ProcFacts,
    /// The processes' CPU and resident memory (their CPU-time clocks and `statm`, or `stat`).
    ProcUsage,
    /// The record stage: the sample and the tick's events into the session log.
    Record,
    /// One `write(2)` of a session log record.
    LogWrite,
    /// One `fdatasync(2)` of the session log.
    LogSync,
    /// The watches: leaks, OOMs, the forecast, orphans.
    Watches,
    /// The leak watch and its time-to-full forecast.
    LeakWatch,
    /// The rules and the OOM guard, with the runner.
    Rules,
    /// The OOM guard.
    Guard,
    /// Publishing the tick to the front ends (one write lock; the history's append).
    Publish,
    /// Dropping the sample the tick replaced.
    DropSample,
    /// What the front end does after each tick (the agent's counters, systemd's watchdog).
    AfterTick,
    /// The sampler thread woke between ticks (a command, or the next tick due).
    SamplerWake,
    /// The HTTP runtime's thread woke (a connection, a timer; none while idle).
    HttpWake,
    /// An HTTP request answered.
    HttpRequest,
    /// Who a loopback connection comes from: its owner read from the kernel's socket table.
    HttpPeer,
    /// One of the window's frames: its UI pass (layout and drawing commands; the painting
    /// that follows is in the main thread's CPU, not here).
    Frame,
}

/// How many parts there are.
const PARTS: usize = 30;

impl Part {
    /// Every part, in the report's order.
    pub const ALL: [Part; PARTS] = [
        Part::Tick,
        Part::Source,
        Part::NvmlMemory,
        Part::NvmlUtilization,
        Part::NvmlTemperature,
        Part::NvmlPower,
        Part::NvmlPowerLimit,
        Part::NvmlClocks,
        Part::NvmlFan,
        Part::NvmlComputeList,
        Part::NvmlGraphicsList,
        Part::NvmlProcessUtilization,
        Part::Enrich,
        Part::ProcFacts,
        Part::ProcUsage,
        Part::Record,
        Part::LogWrite,
        Part::LogSync,
        Part::Watches,
        Part::LeakWatch,
        Part::Rules,
        Part::Guard,
        Part::Publish,
        Part::DropSample,
        Part::AfterTick,
        Part::SamplerWake,
        Part::HttpWake,
        Part::HttpRequest,
        Part::HttpPeer,
        Part::Frame,
    ];

    /// The name in the report.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Part::Tick => "tick",
            Part::Source => "source",
            Part::NvmlMemory => "nvml memory",
            Part::NvmlUtilization => "nvml utilization",
            Part::NvmlTemperature => "nvml temperature",
            Part::NvmlPower => "nvml power",
            Part::NvmlPowerLimit => "nvml power limit",
            Part::NvmlClocks => "nvml clocks",
            Part::NvmlFan => "nvml fan",
            Part::NvmlComputeList => "nvml compute list",
            Part::NvmlGraphicsList => "nvml graphics list",
            Part::NvmlProcessUtilization => "nvml process utilization",
            Part::Enrich => "enrich",
            Part::ProcFacts => "/proc facts",
            Part::ProcUsage => "/proc usage",
            Part::Record => "record",
            Part::LogWrite => "log write",
            Part::LogSync => "log fsync",
            Part::Watches => "watches",
            Part::LeakWatch => "leak watch",
            Part::Rules => "rules",
            Part::Guard => "guard",
            Part::Publish => "publish",
            Part::DropSample => "drop sample",
            Part::AfterTick => "after tick (front end)",
            Part::SamplerWake => "sampler wake-ups",
            Part::HttpWake => "http wake-ups",
            Part::HttpRequest => "http requests",
            Part::HttpPeer => "http connection's owner",
            Part::Frame => "window frame (UI pass)",
        }
    }

    /// The part this one is counted within, if any.
    pub(crate) fn parent(self) -> Option<Part> {
        use Part::*;
        match self {
            Source | Enrich | Record | Watches | Rules | Publish | DropSample => Some(Tick),
            NvmlMemory
            | NvmlUtilization
            | NvmlTemperature
            | NvmlPower
            | NvmlPowerLimit
            | NvmlClocks
            | NvmlFan
            | NvmlComputeList
            | NvmlGraphicsList
            | NvmlProcessUtilization => Some(Source),
            ProcFacts | ProcUsage => Some(Enrich),
            LogWrite | LogSync => Some(Record),
            LeakWatch => Some(Watches),
            Guard => Some(Rules),
            Tick | AfterTick | SamplerWake | HttpWake | HttpRequest | HttpPeer | Frame => None,
        }
    }

    fn depth(self) -> usize {
        self.parent().map_or(0, |p| 1 + p.depth())
    }
}

#[derive(Debug)]
struct Slot {
    calls: AtomicU64,
    ns: AtomicU64,
}

/// A set of counters (the process has one, [`GLOBAL`]; tests make their own).
#[derive(Debug)]
pub struct Costs {
    on: AtomicBool,
    slots: [Slot; PARTS],
    /// Clock reads made by spans since the last reset.
    clock_reads: AtomicU64,
    /// When the counters were last reset, the process's CPU then and each thread's.
    since: Mutex<Option<(Instant, u64, Vec<ThreadCpu>)>>,
}

/// The process's counters.
pub static GLOBAL: Costs = Costs::new();

impl Default for Costs {
    fn default() -> Self {
        Self::new()
    }
}

impl Costs {
    /// Counters at zero, off.
    pub(crate) const fn new() -> Self {
        Self {
            on: AtomicBool::new(false),
            slots: [const {
                Slot {
                    calls: AtomicU64::new(0),
                    ns: AtomicU64::new(0),
                }
            }; PARTS],
            clock_reads: AtomicU64::new(0),
            since: Mutex::new(None),
        }
    }

    /// Starts counting (from zero).
    pub(crate) fn enable(&self) {
        self.reset();
        self.on.store(true, Ordering::Relaxed);
    }

    /// True while counting.
    pub(crate) fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Counts from zero again (the threads' CPU too).
    pub(crate) fn reset(&self) {
        for s in &self.slots {
            s.calls.store(0, Ordering::Relaxed);
            s.ns.store(0, Ordering::Relaxed);
        }
        self.clock_reads.store(0, Ordering::Relaxed);
        let mut since = self
            .since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The process first, the threads after (and the reverse at the report), so that the
        // process's figure holds each thread's; what runs between the reads is in it alone.
        let process = process_cpu_ns();
        *since = Some((Instant::now(), process, threads_cpu()));
    }

    /// A span of `part` that ends when dropped; nothing is read while off.
    pub(crate) fn span(&self, part: Part) -> Span<'_> {
        self.start(part, true)
    }

    /// More of a call of `part` already counted (a stage done in pieces): its CPU is added,
    /// no call.
    pub(crate) fn more(&self, part: Part) -> Span<'_> {
        self.start(part, false)
    }

    fn start(&self, part: Part, call: bool) -> Span<'_> {
        let start = if self.enabled() {
            self.clock_reads.fetch_add(2, Ordering::Relaxed);
            thread_cpu_ns().max(1)
        } else {
            0
        };
        Span {
            costs: self,
            part,
            call,
            start,
        }
    }

    /// Counts one event of `part` with no time (a wake-up).
    pub(crate) fn count(&self, part: Part) {
        if self.enabled() {
            self.slots[part as usize]
                .calls
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Adds `calls` (0 or 1) of `part` that took `ns` of CPU.
    pub(crate) fn add(&self, part: Part, calls: u64, ns: u64) {
        let s = &self.slots[part as usize];
        s.calls.fetch_add(calls, Ordering::Relaxed);
        s.ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Calls and CPU ns of `part` since the last reset.
    pub(crate) fn get(&self, part: Part) -> (u64, u64) {
        let s = &self.slots[part as usize];
        (
            s.calls.load(Ordering::Relaxed),
            s.ns.load(Ordering::Relaxed),
        )
    }

    /// The run statistics since the last reset.
    pub(crate) fn report(&self) -> Report {
        let (from, process_before, before) = self
            .since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| (Instant::now(), process_cpu_ns(), Vec::new()));
        let now = threads_cpu();
        let process_ns = process_cpu_ns().saturating_sub(process_before);
        let threads = with_ended(thread_deltas(&before, &now), process_ns);
        Report {
            wall_s: from.elapsed().as_secs_f64(),
            parts: Part::ALL.iter().map(|p| (*p, self.get(*p))).collect(),
            process_ns,
            threads,
            clock_reads: self.clock_reads.load(Ordering::Relaxed),
            clock_read_ns: clock_read_cost_ns(),
            rss_bytes: own_rss_bytes(),
        }
    }
}

/// A part being timed; its CPU is added when it is dropped.
#[must_use = "a span counts the CPU until it is dropped"]
pub struct Span<'a> {
    costs: &'a Costs,
    part: Part,
    call: bool,
    start: u64,
}

impl Drop for Span<'_> {
    fn drop(&mut self) {
        if self.start != 0 {
            let ns = thread_cpu_ns().saturating_sub(self.start);
            self.costs.add(self.part, u64::from(self.call), ns);
        }
    }
}

/// [`Costs::span`] on the process's counters.
pub fn span(part: Part) -> Span<'static> {
    GLOBAL.span(part)
}

/// [`Costs::more`] on the process's counters.
pub fn more(part: Part) -> Span<'static> {
    GLOBAL.more(part)
}

/// [`Costs::count`] on the process's counters.
pub fn count(part: Part) {
    GLOBAL.count(part);
}

/// Starts the process's counters (`-v`).
pub fn enable() {
    GLOBAL.enable();
}

/// True when the process's counters run.
pub fn enabled() -> bool {
    GLOBAL.enabled()
}

/// Counts from zero again when the process's counters run (from the first sample on).
pub fn restart() {
    if enabled() {
        GLOBAL.reset();
    }
}

/// Logs the process's run statistics (`-v`) when its counters run.
pub fn log_report() {
    if enabled() {
        GLOBAL.report().log();
    }
}

/// Hooks SIGUSR1: it writes a byte to `wake` (the front end's wake-up socket) and raises the
/// flag returned, which [`asked`] takes.
///
/// # Errors
/// When the signal cannot be hooked.
pub(crate) fn on_signal(
    wake: &std::os::unix::net::UnixStream,
) -> std::io::Result<std::sync::Arc<AtomicBool>> {
    let flag = std::sync::Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, flag.clone())?;
    signal_hook::low_level::pipe::register(signal_hook::consts::SIGUSR1, wake.try_clone()?)?;
    Ok(flag)
}

/// True when SIGUSR1 came (the flag of [`on_signal`]): the run statistics so far are logged
/// (with `-v`; without, a line says they need it) and counted from zero again.
pub fn asked(flag: &AtomicBool) -> bool {
    if !flag.swap(false, Ordering::Relaxed) {
        return false;
    }
    if enabled() {
        log_report();
        GLOBAL.reset();
    } else {
        tracing::info!("SIGUSR1: run statistics are kept with -v only");
    }
    true
}

/// CPU time the calling thread has used, in ns (`CLOCK_THREAD_CPUTIME_ID`); 0 when the clock
/// cannot be read.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// The time of `clock` in ns; 0 when it cannot be read.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    // SAFETY: clock_gettime writes the timespec we pass.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What one clock read costs here, in ns (the mean of 2 000 reads).
fn clock_read_cost_ns() -> f64 {
    const N: u32 = 2000;
    let t = Instant::now();
    for _ in 0..N {
        std::hint::black_box(thread_cpu_ns());
    }
    t.elapsed().as_nanos() as f64 / f64::from(N)
}

/// The name the report gives the CPU of threads that ended in its window.
const ENDED: &str = "(threads that ended)";

/// `threads` (CPU ns by name) with a line for the threads that ended in the window: what the
/// process's clock holds beyond them (a window's renderer threads, stopped before its
/// statistics are logged at close). Below 1 ms or 1 % of the process it is the reads' own
/// time, and left out; so it is where no thread could be read.
fn with_ended(mut threads: Vec<(String, u64)>, process_ns: u64) -> Vec<(String, u64)> {
    let listed: u64 = threads.iter().map(|(_, n)| n).sum();
    let ended = process_ns.saturating_sub(listed);
    if !threads.is_empty() && ended > 1_000_000 && ended > process_ns / 100 {
        threads.push((ENDED.to_string(), ended));
        threads.sort_by_key(|t| std::cmp::Reverse(t.1));
    }
    threads
}

/// CPU time of the whole process so far, its ended threads' included, in ns
/// (`CLOCK_PROCESS_CPUTIME_ID`); 0 when the clock cannot be read.
fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// One thread's CPU, from `/proc/self/task/TID/schedstat`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ThreadCpu {
    /// The thread's id.
    pub tid: u32,
    /// Its name (`comm`).
    pub name: String,
    /// CPU time on the CPU so far, ns.
    pub ns: u64,
}

/// CPU seconds this process's live threads have run, from `/proc/self/task/*/schedstat`
/// ([`threads_cpu`], nanosecond resolution), falling back to `/proc/self/stat` (clock ticks).
pub(crate) fn own_cpu_seconds() -> Option<f64> {
    let threads = threads_cpu();
    if !threads.is_empty() {
        return Some(threads.iter().map(|t| t.ns).sum::<u64>() as f64 / 1e9);
    }
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(1)
        .max(1) as f64;
    Some(ticks as f64 / hz)
}

/// Every thread of this process and its CPU so far.
fn threads_cpu() -> Vec<ThreadCpu> {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
            let ns = stat.split_whitespace().next()?.parse().ok()?;
            let name = std::fs::read_to_string(t.path().join("comm"))
                .map(|s| s.trim().to_string())
                .unwrap_or_default();
            Some(ThreadCpu { tid, name, ns })
        })
        .collect()
}

/// CPU per thread name between `before` and `now` (threads of one name summed; a thread that
/// started since counts from zero, one that ended is gone from both).
fn thread_deltas(before: &[ThreadCpu], now: &[ThreadCpu]) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    for t in now {
        let was = before
            .iter()
            .find(|b| b.tid == t.tid && b.name == t.name)
            .map_or(0, |b| b.ns);
        let d = t.ns.saturating_sub(was);
        match out.iter_mut().find(|(n, _)| *n == t.name) {
            Some((_, sum)) => *sum += d,
            None => out.push((t.name.clone(), d)),
        }
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// This process's resident set, bytes (`VmRSS` of `/proc/self/status`).
fn own_rss_bytes() -> Option<u64> {
    vm_rss_bytes(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// The resident set, bytes, of a `/proc/PID/status` text (its `VmRSS` line).
pub(crate) fn vm_rss_bytes(status: &str) -> Option<u64> {
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The run statistics: per part and per thread.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    /// Wall time they cover, s.
    pub wall_s: f64,
    /// Per part: calls and CPU ns.
    pub parts: Vec<(Part, (u64, u64))>,
    /// The process's CPU ns (its own clock: every thread's, those that ended included).
    pub process_ns: u64,
    /// CPU ns per thread name.
    pub threads: Vec<(String, u64)>,
    /// Clock reads the spans made.
    pub clock_reads: u64,
    /// What one clock read costs, ns.
    pub clock_read_ns: f64,
    /// The process's resident set.
    pub rss_bytes: Option<u64>,
}

impl Report {
    /// Ticks counted.
    pub(crate) fn ticks(&self) -> u64 {
        self.parts
            .iter()
            .find(|(p, _)| *p == Part::Tick)
            .map_or(0, |(_, (n, _))| *n)
    }

    /// The process's CPU over the wall time, µs per second (its threads', those that ended
    /// in the window included).
    fn process_us_per_s(&self) -> f64 {
        self.process_ns as f64 / 1000.0 / self.wall_s.max(1e-9)
    }

    /// The report as lines, without a trailing newline on the last.
    pub(crate) fn lines(&self) -> Vec<String> {
        let per_s = |ns: u64| ns as f64 / 1000.0 / self.wall_s.max(1e-9);
        let ticks = self.ticks().max(1) as f64;
        let mut out = vec![format!(
            "run statistics over {:.1} s, {} ticks: process CPU {:.1} µs/s (its CPU clock), RSS {:.1} MB",
            self.wall_s,
            self.ticks(),
            self.process_us_per_s(),
            self.rss_bytes.unwrap_or(0) as f64 / 1e6
        )];
        for (name, ns) in &self.threads {
            out.push(format!("thread {name:<24} {:>10.1} µs/s", per_s(*ns)));
        }
        out.push(format!(
            "{:<30} {:>9} {:>12} {:>12} {:>11}",
            "part", "calls", "µs per call", "µs per tick", "µs/s"
        ));
        for (p, (calls, ns)) in &self.parts {
            if *calls == 0 {
                continue;
            }
            let mut label = "  ".repeat(p.depth());
            label.push_str(p.label());
            let mut line = format!("{label:<30} {calls:>9}");
            if *ns > 0 || p.parent().is_some() || *p == Part::Tick {
                let _ = write!(
                    line,
                    " {:>12.2} {:>12.2} {:>11.2}",
                    *ns as f64 / 1000.0 / *calls as f64,
                    *ns as f64 / 1000.0 / ticks,
                    per_s(*ns)
                );
            }
            out.push(line);
        }
        out.push(format!(
            "clock reads by the counters: {} ({:.0} ns each, {:.1} µs/s of the figures above)",
            self.clock_reads,
            self.clock_read_ns,
            self.clock_reads as f64 * self.clock_read_ns / 1000.0 / self.wall_s.max(1e-9)
        ));
        out
    }

    /// Logs the report at debug level (shown by `-v`), one line each.
    pub(crate) fn log(&self) {
        for l in self.lines() {
            tracing::debug!("{l}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burn(ns: u64) {
        let t = thread_cpu_ns();
        while thread_cpu_ns().saturating_sub(t) < ns {
            std::hint::black_box(0u64);
        }
    }

    #[test]
    fn spans_count_only_while_on_and_nest_in_the_report() {
        let c = Costs::new();
        drop(c.span(Part::Tick));
        c.count(Part::HttpWake);
        assert_eq!(c.get(Part::Tick), (0, 0));
        assert_eq!(c.get(Part::HttpWake), (0, 0));
        c.enable();
        {
            let _t = c.span(Part::Tick);
            let _s = c.span(Part::Source);
            burn(2_000_000);
        }
        c.count(Part::HttpWake);
        c.count(Part::HttpWake);
        {
            let _rest = c.more(Part::Source);
            burn(1_000_000);
        }
        let (ticks, tick_ns) = c.get(Part::Tick);
        let (sources, source_ns) = c.get(Part::Source);
        assert_eq!((ticks, sources), (1, 1));
        assert!(source_ns >= 3_000_000, "{source_ns}");
        assert!(
            tick_ns >= 2_000_000 && tick_ns < source_ns,
            "{tick_ns} {source_ns}"
        );
        assert_eq!(c.get(Part::HttpWake), (2, 0));
        let r = c.report();
        assert_eq!(r.ticks(), 1);
        assert_eq!(r.clock_reads, 6);
        let lines = r.lines();
        assert!(lines[0].starts_with("run statistics over "), "{lines:?}");
        assert!(
            lines.iter().any(|l| l.starts_with("  source ")),
            "{lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.starts_with("http wake-ups ")),
            "{lines:?}"
        );
        // Parts never counted are left out.
        assert!(!lines.iter().any(|l| l.contains("nvml")), "{lines:?}");
        c.reset();
        assert_eq!(c.get(Part::Tick), (0, 0));
    }

    #[test]
    fn every_part_is_listed_once_under_a_listed_parent() {
        for (i, p) in Part::ALL.iter().enumerate() {
            assert_eq!(*p as usize, i, "{p:?}");
            if let Some(parent) = p.parent() {
                assert!((parent as usize) < i, "{p:?} comes after its parent");
            }
        }
    }

    #[test]
    fn a_thread_that_ended_in_the_window_is_counted() {
        let costs = Costs::new();
        costs.enable();
        // A real thread spends 30 ms of CPU (by its own clock) and ends before the report.
        let spent = std::thread::spawn(|| {
            let start = thread_cpu_ns();
            while thread_cpu_ns() - start < 30_000_000 {
                std::hint::black_box(start);
            }
            thread_cpu_ns() - start
        })
        .join()
        .expect("the thread ran");
        let r = costs.report();
        let ended = r
            .threads
            .iter()
            .find(|(n, _)| n == ENDED)
            .map_or(0, |(_, ns)| *ns);
        assert!(
            ended >= spent,
            "ended threads {ended} ns, the thread spent {spent}"
        );
    }

    #[test]
    fn the_ended_line_is_left_out_below_the_reads_own_time_and_without_threads() {
        let main = || vec![("main".to_string(), 50_000_000)];
        // 0.5 ms beyond the threads: the reads' own time.
        assert_eq!(with_ended(main(), 50_500_000), main());
        // No thread could be read: nothing is said to have ended.
        assert!(with_ended(Vec::new(), 50_000_000).is_empty());
        // 150 ms beyond them: threads ended, listed first.
        assert_eq!(
            with_ended(main(), 200_000_000),
            vec![
                (ENDED.to_string(), 150_000_000),
                ("main".to_string(), 50_000_000)
            ]
        );
    }

    #[test]
    fn thread_deltas_sum_by_name_and_count_new_threads_from_zero() {
        let t = |tid, name: &str, ns| ThreadCpu {
            tid,
            name: name.into(),
            ns,
        };
        let before = [t(1, "main", 100), t(2, "req", 50), t(3, "req", 70)];
        let now = [
            t(1, "main", 150),
            t(2, "req", 80),
            t(3, "req", 70),
            t(4, "req", 5),
        ];
        assert_eq!(
            thread_deltas(&before, &now),
            vec![("main".to_string(), 50), ("req".to_string(), 35)]
        );
        let own = threads_cpu();
        assert!(own.iter().any(|x| x.ns > 0));
    }
}
