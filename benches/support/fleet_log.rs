//! The benchmarks' 24 h session log: the simulated fleet of 8 GPUs and 200 processes recorded
//! by the engine, for the benchmarks and `examples/session_open.rs` (both include this file).

use std::path::Path;

use vramwarden::engine::{shared::Shared, view::Monitor, Engine, RecordTo};
use vramwarden::model::UnixMs;
use vramwarden::source::{sim::SimSource, GpuSource};

/// Records `secs` one-second samples of the fleet, the first at `t0`, to `path`.
///
/// # Errors
/// The engine's message when the log could not be closed.
pub fn write(path: &Path, t0: UnixMs, secs: i64) -> Result<(), String> {
    let sim = SimSource::fleet(t0, 8, 200);
    let shared = Shared::new(Monitor::new(1000, 300));
    let mut e = Engine::new(shared, RecordTo::File(path.to_path_buf()), 1000);
    e.set_source(sim.info());
    for i in 0..secs {
        e.tick(sim.at(t0 + i * 1000), t0 + i * 1000);
    }
    e.finish().map(|_| ())
}
