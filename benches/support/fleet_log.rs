//! The benchmarks' session logs, recorded by the engine from the simulated GPUs: a 24 h day of
//! 8 GPUs and 200 long processes, and a runner's day of short jobs, for the benchmarks and
//! `examples/session_open.rs` (both include this file).

use std::path::Path;
use std::sync::Arc;

use vramwarden::engine::{shared::Shared, view::Monitor, Engine, RecordTo};
use vramwarden::model::{ProcInfo, UnixMs};
use vramwarden::source::sim::{Script, SimProcess, SimSource};
use vramwarden::source::GpuSource;

/// Records `secs` one-second samples of the fleet, the first at `t0`, to `path`.
///
/// # Errors
/// The engine's message when the log could not be closed.
pub fn write(path: &Path, t0: UnixMs, secs: i64) -> Result<(), String> {
    record(&SimSource::fleet(t0, 8, 200), path, t0, secs, 300)
}

/// Records `secs` one-second samples of a test runner's GPUs, the first at `t0`, to `path`:
/// 2 GPUs with 4 long processes, and 10 job slots that each start a new 8-second job every
/// 10 s (a new process a second: 86 400 in a day). The engine keeps the whole history, as a
/// window or an agent keeps a day, and prints what a sample cost it, per 2 hours of samples.
///
/// # Errors
/// The engine's message when the log could not be closed.
#[allow(dead_code)] // The benchmarks use only `write`.
pub fn write_jobs(path: &Path, t0: UnixMs, secs: i64) -> Result<(), String> {
    let mut sim = SimSource::fleet(t0, 2, 4);
    for k in 0..10u32 {
        sim.add(SimProcess {
            pid: 100_000 + k * 100_000,
            device_index: k % 2,
            info: Some(Arc::new(ProcInfo {
                name: "pytest".into(),
                cmdline: format!("pytest -k shard{k}"),
                user: "ci".into(),
                uid: 1000,
                start_time_ms: t0,
                ..ProcInfo::default()
            })),
            script: Script::Idle {
                mib: 300 + u64::from(k) * 10,
            },
            start_s: f64::from(k),
            restart_every_s: Some(10.0),
            life_s: 8.0,
            busy_pct: 50,
        });
    }
    record(&sim, path, t0, secs, secs.max(1) as usize)
}

/// Records `secs` samples of `sim` with an engine that keeps `ticks` of history; with more
/// than 300, prints the wall time per sample of each 7 200.
fn record(sim: &SimSource, path: &Path, t0: UnixMs, secs: i64, ticks: usize) -> Result<(), String> {
    let shared = Shared::new(Monitor::new(1000, ticks));
    let mut e = Engine::new(shared, RecordTo::File(path.to_path_buf()), 1000);
    e.set_source(sim.info());
    let mut since = std::time::Instant::now();
    for i in 0..secs {
        e.tick(sim.at(t0 + i * 1000), t0 + i * 1000);
        if ticks > 300 && i % 7200 == 7199 {
            let us = since.elapsed().as_secs_f64() * 1e6 / 7200.0;
            println!("samples {}..{}: {us:.1} µs a sample", i - 7199, i + 1);
            since = std::time::Instant::now();
        }
    }
    e.finish().map(|_| ())
}
