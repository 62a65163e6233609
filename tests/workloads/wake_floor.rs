//! The CPU a thread costs just to wake once a second, on this machine: the floor under any
//! 1 Hz sampler's figure. It waits on a channel with a timeout (as the agent's sampling thread
//! does between samples) N times, one second apart, and prints its own CPU per wake-up from
//! `/proc/thread-self/schedstat`. Standalone, no crates:
//!
//! ```sh
//! rustc -O tests/workloads/wake_floor.rs -o /tmp/wake_floor && /tmp/wake_floor 120
//! ```

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// This thread's CPU time so far (ns), from schedstat.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

fn main() {
    let wakes: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(60)
        .max(1);
    let (_keep, rx) = mpsc::channel::<()>();
    let mut due = Instant::now();
    let Some(start) = thread_cpu_ns() else {
        eprintln!("no /proc/thread-self/schedstat here");
        std::process::exit(1);
    };
    for _ in 0..wakes {
        due += Duration::from_secs(1);
        let _ = rx.recv_timeout(due.saturating_duration_since(Instant::now()));
    }
    let end = thread_cpu_ns().unwrap_or(start);
    println!(
        "{:.1} µs of CPU per wake-up over {wakes} wake-ups, 1 s apart",
        (end - start) as f64 / wakes as f64 / 1000.0
    );
}
