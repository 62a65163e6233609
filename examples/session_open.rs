//! Opening a recorded session, timed in parts and small enough to run under a profiler
//! (`valgrind --tool=callgrind`): the figures of docs/benchmarks.md on opening a session.
//!
//! ```text
//! cargo run --release --example session_open -- write /tmp/day.vwlog 86400   # the bench's log: 8 GPUs × 200 processes
//! cargo run --release --example session_open -- write-jobs /tmp/jobs.vwlog 86400  # a runner's day: a new job a second
//! cargo run --release --example session_open -- open /tmp/day.vwlog 3        # index, replay, drop; memory
//! cargo run --release --example session_open -- index /tmp/day.vwlog 3       # the index alone
//! ```
use std::path::Path;
use std::time::Instant;

use vramwarden::session::reader::SessionData;

#[path = "../benches/support/counting_alloc.rs"]
mod counting_alloc;
#[path = "../benches/support/fleet_log.rs"]
mod fleet_log;

/// The bench's first sample time (ms since the epoch).
const T0: i64 = 1_796_000_000_000;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// Opens `path` (and with `replay`, replays it as the window does) `runs` times; prints the
/// time of each part and the memory the opened session holds.
fn open(path: &Path, runs: usize, replay: bool) -> Result<(), String> {
    for _ in 0..runs {
        let base = counting_alloc::live_bytes();
        let t = Instant::now();
        let data = SessionData::open(path).map_err(|e| e.to_string())?;
        let index_s = t.elapsed().as_secs_f64();
        let data_bytes = counting_alloc::live_bytes().saturating_sub(base);
        if !replay {
            println!(
                "index {} samples {index_s:.3} s; {:.1} MiB",
                data.len(),
                mib(data_bytes)
            );
            continue;
        }
        let t = Instant::now();
        let m = vramwarden::engine::replay::session(&data);
        let replay_s = t.elapsed().as_secs_f64();
        drop(data);
        let view_bytes = counting_alloc::live_bytes().saturating_sub(base);
        let t = Instant::now();
        let (samples, rows) = (m.history.len(), m.rows().count());
        drop(m);
        println!(
            "{samples} samples, {rows} rows: index {index_s:.3} s, replay {replay_s:.3} s, \
             drop {:.3} s; the file and its index {:.1} MiB, the replayed View {:.1} MiB",
            t.elapsed().as_secs_f64(),
            mib(data_bytes),
            mib(view_bytes)
        );
    }
    Ok(())
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: session_open write|write-jobs PATH SECONDS | open PATH [RUNS] | index PATH [RUNS]";
    let (Some(what), Some(path)) = (args.first(), args.get(1)) else {
        return Err(usage.into());
    };
    let n = |default: i64| args.get(2).map_or(Ok(default), |s| s.parse::<i64>());
    let n = n(1).map_err(|e| format!("{usage}: {e}"))?.max(1);
    let path = Path::new(path);
    match what.as_str() {
        "write" => fleet_log::write(path, T0, n),
        "write-jobs" => fleet_log::write_jobs(path, T0, n),
        "open" => open(path, n as usize, true),
        "index" => open(path, n as usize, false),
        _ => Err(usage.into()),
    }
}
