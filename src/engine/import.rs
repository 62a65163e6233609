//! `vramwarden import nvidia-smi`: runs the engine (history, leak detection) over the samples
//! read from nvidia-smi's CSV logs ([`crate::source::nvidia_smi`]) and writes them as a session.

use std::collections::HashSet;
use std::path::Path;

use crate::engine::stages::record::RecordTo;
use crate::engine::view::Monitor;
use crate::model::{Snapshot, SourceInfo};
use crate::source::nvidia_smi::{read_logs, ReadLogs};
pub use crate::source::nvidia_smi::{ImportError, LogKind, Skipped, Zone};

/// What an import produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportSummary {
    /// Samples written.
    pub samples: usize,
    /// Distinct processes (pid and GPU) in the samples written.
    pub processes: usize,
    /// Leak episodes flagged.
    pub leaks: usize,
    /// OOM suspicions recorded (a process left a nearly full GPU).
    pub ooms: usize,
    /// Rows skipped, of both logs (the sum of `skipped`).
    pub bad_rows: usize,
    /// Data rows read, of both logs (header lines not counted).
    pub rows_read: usize,
    /// Rows that went into the samples: `rows_read == rows_used + bad_rows`.
    pub rows_used: usize,
    /// The skipped rows per log and reason, in that order.
    pub skipped: Vec<Skipped>,
    /// Rows whose time is earlier than the row before them in their log (imported, in time
    /// order; said as a warning).
    pub back_in_time: usize,
}

/// Reads the logs and writes the session to `out`.
///
/// # Errors
/// When a file cannot be read, is not the log it is given as (lacks its columns), has no usable
/// row, or the session cannot be written. Rows that cannot be read or placed on a GPU are
/// skipped and counted in the summary, not errors.
pub fn import_nvidia_smi(
    apps: &Path,
    gpu: Option<&Path>,
    out: &Path,
    zone: Zone,
) -> Result<ImportSummary, ImportError> {
    let ReadLogs {
        snaps,
        rows_read,
        rows_used,
        bad_rows,
        skipped,
        back_in_time,
    } = read_logs(apps, gpu, zone)?;
    let processes = snaps
        .iter()
        .flat_map(|s| s.processes.iter().map(|p| (p.pid, p.device_index)))
        .collect::<HashSet<_>>()
        .len();
    let samples = snaps.len();
    let (leaks, ooms) = record_snapshots(snaps, out)?;
    Ok(ImportSummary {
        samples,
        processes,
        leaks,
        ooms,
        bad_rows,
        rows_read,
        rows_used,
        skipped,
        back_in_time,
    })
}

/// The median time between samples, ms (1 s with fewer than two samples; at least 1 ms).
fn median_interval(snaps: &[Snapshot]) -> u64 {
    let mut gaps: Vec<u64> = snaps
        .windows(2)
        .map(|w| w[1].taken_at_ms.abs_diff(w[0].taken_at_ms))
        .collect();
    gaps.sort_unstable();
    gaps.get(gaps.len() / 2).copied().unwrap_or(1000).max(1)
}

/// Runs the engine over `snaps` at their median interval, recording them to `out`: the leak
/// episodes flagged and OOMs suspected.
fn record_snapshots(snaps: Vec<Snapshot>, out: &Path) -> Result<(usize, usize), ImportError> {
    let interval = median_interval(&snaps);
    let shared = crate::engine::shared::Shared::new(Monitor::new(interval, 16));
    let start = snaps.first().map_or(0, |s| s.taken_at_ms);
    let mut source = crate::source::recorded::Snapshots::new(
        snaps,
        SourceInfo {
            kind: "nvidia-smi import".into(),
            host: crate::source::host_name(),
            ..SourceInfo::default()
        },
    );
    let mut engine = crate::engine::builder::EngineBuilder::new(shared.clone(), interval)
        .record(RecordTo::File(out.to_path_buf()))
        .source(crate::source::GpuSource::info(&source))
        .build();
    let mut failed = None;
    let ended = crate::engine::tick_loop::run(
        &mut engine,
        &mut source,
        std::time::Duration::from_millis(interval),
        crate::engine::tick_loop::Clock::Simulated { start, speed: None },
        |engine, _, _| match engine.recording_failed(true) {
            Some(e) => {
                failed = Some(e);
                false
            }
            None => true,
        },
    );
    if let Some(e) = failed {
        // The recorder words it for a live recording; an import writes a session.
        let e = e.strip_prefix("Recording failed: ").unwrap_or(&e);
        return Err(ImportError::Write(format!(
            "the session could not be written: {e}"
        )));
    }
    if let crate::engine::tick_loop::Ended::Panicked(what) = ended {
        return Err(ImportError::Write(format!(
            "internal error (a bug in vramwarden; the import stopped): {what}"
        )));
    }
    engine.finish().map_err(ImportError::Write)?;
    Ok(shared
        .read()
        .map_or((0, 0), |m| (m.leaks.len(), m.ooms.len())))
}

/// Imports nvidia-smi logs (told apart by their headers) into `dir` and reads the session.
///
/// # Errors
/// A sentence when no apps log is among `files` or the import fails.
pub fn import_files(
    files: &[std::path::PathBuf],
    dir: &std::path::Path,
) -> Result<crate::session::reader::SessionData, String> {
    // Its first line only, at most 64 KiB of it (the whole file was read for it).
    let header = |p: &std::path::PathBuf| {
        use std::io::{BufRead, Read};
        let mut line = Vec::new();
        std::fs::File::open(p)
            .map(|f| std::io::BufReader::new(f.take(64 * 1024)).read_until(b'\n', &mut line))
            .map_or_else(
                |_| String::new(),
                |_| String::from_utf8_lossy(&line).to_lowercase(),
            )
    };
    let apps = files
        .iter()
        .find(|p| header(p).contains("pid"))
        .ok_or("none of the files is an nvidia-smi --query-compute-apps log (no pid column)")?;
    let gpu = files
        .iter()
        .find(|p| *p != apps && header(p).contains("memory.used"));
    let stem = apps
        .file_stem()
        .map_or("nvidia-smi".into(), |s| s.to_string_lossy().into_owned());
    let out = dir.join(format!(
        "import-{stem}-{}.{}",
        chrono::Local::now().format("%Y%m%d-%H%M%S"),
        crate::session::EXTENSION
    ));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    import_nvidia_smi(
        apps,
        gpu.map(std::path::PathBuf::as_path),
        &out,
        Zone::Local,
    )
    .map_err(|e| e.to_string())?;
    crate::session::reader::SessionData::open(&out).map_err(|e| e.to_string())
}
