//! Command-line interface (clap) and the headless commands.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};

use crate::monitor::Monitor;
use crate::procinfo::ProcReader;
use crate::sampler::{enrich, now_ms, SamplerHandle, SourceFactory};
use crate::snapshot_out::{self, CsvTable};
use crate::source::nvml::NvmlSource;
use crate::source::sim::SimSource;
use crate::source::{GpuSource, SourceError};

/// Watch and manage NVIDIA GPU memory.
#[derive(Debug, Parser)]
#[command(name = "vramwarden", version, about)]
pub struct Cli {
    /// Use the built-in simulated GPUs instead of the NVIDIA driver.
    #[arg(long, global = true)]
    pub demo: bool,
    /// Sampling interval (e.g. 1s, 500ms).
    #[arg(long, global = true, default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,
    /// How much history to keep in memory (e.g. 24h).
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    pub history: Duration,
    /// A headless command; none opens the window.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Headless commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print one sample of every GPU and process, then exit.
    Snapshot {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
        /// For CSV: which table to print.
        #[arg(long, value_enum, default_value_t = CsvTable::Both)]
        table: CsvTable,
    },
    /// Run the sampler without a window for a while and report its own CPU use.
    #[command(hide = true)]
    Monitor {
        /// How long to run.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        duration: Duration,
    },
    /// Time each raw NVML call and a full snapshot (needs a GPU).
    #[command(hide = true)]
    BenchNvml {
        /// Calls per measurement.
        #[arg(long, default_value_t = 2000)]
        iterations: u32,
    },
}

/// Output format of `snapshot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON document.
    Json,
    /// CSV table(s).
    Csv,
}

/// A sampling interval between 100 ms and 1 h.
///
/// # Errors
/// A message for clap when the text is not a duration or is out of range.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (try 1s or 500ms)"))?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err("the interval must be between 100ms and 1h".into());
    }
    Ok(d)
}

/// The source factory for `--demo` or the driver.
pub fn source_factory(demo: bool) -> SourceFactory {
    if demo {
        Box::new(|| Ok(Box::new(SimSource::demo(now_ms())) as Box<dyn GpuSource>))
    } else {
        Box::new(|| NvmlSource::new().map(|s| Box::new(s) as Box<dyn GpuSource>))
    }
}

/// Errors of the headless commands, with the exit code each maps to.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No GPU source.
    #[error("{0}\nHint: `vramwarden --demo snapshot` shows the simulated GPUs.")]
    Source(#[from] SourceError),
    /// Output failed.
    #[error("could not write output: {0}")]
    Io(#[from] std::io::Error),
    /// CSV failed.
    #[error("could not write CSV: {0}")]
    Csv(#[from] csv::Error),
    /// JSON failed.
    #[error("could not write JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl CliError {
    /// Process exit code: 2 for a missing GPU source, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Source(_) => 2,
            _ => 1,
        }
    }
}

/// `vramwarden snapshot`.
///
/// # Errors
/// When the source cannot be opened or the output cannot be written.
pub fn snapshot(demo: bool, format: Format, table: CsvTable, out: &mut dyn Write) -> Result<(), CliError> {
    let mut source = source_factory(demo)()?;
    let mut snap = source.sample(now_ms())?;
    enrich(&mut snap, &mut ProcReader::default());
    match format {
        Format::Json => writeln!(out, "{}", snapshot_out::to_json(&snap)?)?,
        Format::Csv => snapshot_out::write_csv(&snap, table, out)?,
    }
    Ok(())
}

/// CPU seconds (user + system) this process has used so far.
pub fn own_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(ticks as f64 / hz)
}

/// `vramwarden monitor`: the GUI's sampler and engine without a window.
///
/// # Errors
/// When the source fails to open or the report cannot be written.
pub fn monitor(demo: bool, interval: Duration, history: Duration, duration: Duration, out: &mut dyn Write) -> Result<(), CliError> {
    let ticks = history_ticks(history, interval);
    let shared = Arc::new(RwLock::new(Monitor::new(interval.as_millis() as u64, ticks)));
    let cpu0 = own_cpu_seconds().unwrap_or(0.0);
    let t0 = Instant::now();
    let handle = SamplerHandle::spawn(source_factory(demo), interval, shared.clone(), Arc::new(|| {}))?;
    while t0.elapsed() < duration {
        std::thread::sleep(Duration::from_millis(200));
        if let Ok(m) = shared.read() {
            if let crate::monitor::SourceStatus::Failed(e) = &m.status {
                return Err(SourceError::Unavailable(e.clone()).into());
            }
        }
    }
    handle.stop(Duration::from_secs(5));
    let wall = t0.elapsed().as_secs_f64();
    let cpu = own_cpu_seconds().unwrap_or(0.0) - cpu0;
    let samples = shared.read().map(|m| m.ticks).unwrap_or(0);
    writeln!(
        out,
        "samples={samples} wall_s={wall:.1} cpu_s={cpu:.3} cpu_pct_of_core={:.4}",
        100.0 * cpu / wall
    )?;
    Ok(())
}

/// `vramwarden bench-nvml`.
///
/// # Errors
/// When NVML is missing.
pub fn bench_nvml(iterations: u32, out: &mut dyn Write) -> Result<(), CliError> {
    let mut src = NvmlSource::new()?;
    let raw = src.bench_raw_calls(iterations);
    let mut sum = 0.0;
    for (name, us, calls) in &raw {
        writeln!(out, "raw {name:<32} {us:>9.2} µs/sample ({calls} call(s) per sample)")?;
        sum += us;
    }
    let mut procs = ProcReader::default();
    let t = Instant::now();
    for _ in 0..iterations {
        let _ = src.sample(now_ms())?;
    }
    let full = t.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);
    let t = Instant::now();
    for _ in 0..iterations {
        let mut s = src.sample(now_ms())?;
        enrich(&mut s, &mut procs);
    }
    let enriched = t.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);
    writeln!(out, "sum of raw calls                 {sum:>9.2} µs")?;
    writeln!(out, "NvmlSource::sample               {full:>9.2} µs  ratio {:.3}", full / sum)?;
    writeln!(out, "sample + /proc enrichment        {enriched:>9.2} µs  ratio {:.3}", enriched / sum)?;
    Ok(())
}

/// History length in ticks for `history` at `interval`.
pub fn history_ticks(history: Duration, interval: Duration) -> usize {
    (history.as_millis() / interval.as_millis().max(1)) as usize
}

/// A path argument that names a session file (used by later commands).
pub type SessionPath = PathBuf;
