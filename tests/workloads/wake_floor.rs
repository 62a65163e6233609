//! The CPU a thread costs just to wake once a second, on this machine: the floor under any
//! 1 Hz sampler's figure. It waits on a channel with a timeout (as the agent's sampling thread
//! does between samples) N times, one interval apart (1 s unless given in ms), and prints its
//! own CPU per wake-up from `/proc/thread-self/schedstat`. With `write`, each wake-up also
//! appends one 160-byte record to a file (as the session log does once a sample) and the
//! write's own CPU is read from the thread's CPU clock around it. Standalone, no crates:
//!
//! ```sh
//! rustc -O tests/workloads/wake_floor.rs -o /tmp/wake_floor && /tmp/wake_floor 120
//! /tmp/wake_floor 120 1000 write     # also the write(2) after each 1 s wait
//! /tmp/wake_floor 2000 1 write       # the same, 1 ms apart
//! ```

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// CLOCK_THREAD_CPUTIME_ID on Linux.
const THREAD_CPU_CLOCK: i32 = 3;

/// This thread's CPU time so far (ns), from its CPU clock.
fn thread_clock_ns() -> u64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec, which `ts` is, and reads nothing else.
    unsafe { clock_gettime(THREAD_CPU_CLOCK, &mut ts) };
    ts.sec as u64 * 1_000_000_000 + ts.nsec as u64
}

/// This thread's CPU time so far (ns), from schedstat.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let wakes: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(60).max(1);
    let every_ms: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1000).max(1);
    let path = std::env::temp_dir().join(format!("wake_floor.{}", std::process::id()));
    let mut log = match args.next().as_deref() {
        Some("write") => match std::fs::File::create(&path) {
            Ok(f) => Some(f),
            Err(e) => {
                eprintln!("cannot create {}: {e}", path.display());
                std::process::exit(1);
            }
        },
        _ => None,
    };
    let (_keep, rx) = mpsc::channel::<()>();
    let record = [b'r'; 160];
    let mut due = Instant::now();
    let mut writing_ns = 0;
    let Some(start) = thread_cpu_ns() else {
        eprintln!("no /proc/thread-self/schedstat here");
        std::process::exit(1);
    };
    for _ in 0..wakes {
        due += Duration::from_millis(every_ms);
        let _ = rx.recv_timeout(due.saturating_duration_since(Instant::now()));
        if let Some(f) = log.as_mut() {
            let before = thread_clock_ns();
            if let Err(e) = f.write_all(&record) {
                eprintln!("write: {e}");
                std::process::exit(1);
            }
            writing_ns += thread_clock_ns() - before;
        }
    }
    let end = thread_cpu_ns().unwrap_or(start);
    let us = |ns: u64| ns as f64 / wakes as f64 / 1000.0;
    println!(
        "{:.1} µs of CPU per wake-up over {wakes} wake-ups, {every_ms} ms apart",
        us(end - start - writing_ns)
    );
    if log.is_some() {
        let _ = std::fs::remove_file(&path);
        println!("{:.1} µs per 160-byte write(2) after the wait", us(writing_ns));
    }
}
