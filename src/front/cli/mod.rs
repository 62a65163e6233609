//! The headless commands (snapshot, monitor, record, export, import, rules, bench) and their
//! errors; the command line's definitions are in [`args`].

pub mod docs;
pub mod guard;
pub mod snapshot_out;

pub mod args;
pub mod park;
pub mod torch;
pub use args::*;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::sampler::{SamplerHandle, SourceFactory};
use crate::engine::view::Monitor;
use crate::engine::{EngineBuilder, EngineOptions, RecordTo};
use crate::host::procinfo::enrich;
use crate::host::procinfo::ProcReader;
use crate::model::now_ms;
use crate::session::csv_export::{self, Table};
use snapshot_out::CsvTable;

pub(crate) use crate::front::headless::load_settings;
pub use crate::front::headless::{exit, history_ticks, CliError};
use crate::source::nvml::NvmlSource;
use crate::source::{GpuSource, SourceError, SourceKind};

/// `vramwarden rules check`.
///
/// # Errors
/// When the file is invalid (exit code 1, with file, line and reason).
pub fn rules_check(config: Option<&std::path::Path>, out: &mut dyn Write) -> Result<(), CliError> {
    let path = crate::engine::settings::config_path(config);
    // Only a missing file means "defaults"; any other failure (a symlink loop, no permission)
    // is reported by `load_settings` below. A file named to be checked that is not there is
    // most often a typo: a check that passed would hide it.
    if crate::engine::settings::config_named(config) && crate::engine::settings::file_missing(&path)
    {
        return Err(CliError::Config(crate::engine::settings::ConfigError {
            path,
            line: None,
            reason: "no such settings file: nothing to check (where a named file is missing, \
                     the defaults apply: no rules, global dry run on)"
                .into(),
        }));
    }
    if crate::engine::settings::file_missing(&path) {
        writeln!(
            out,
            "{}: no settings file; the defaults apply (no rules, global dry run on)",
            path.display()
        )?;
        return Ok(());
    }
    let s = load_settings(config)?;
    writeln!(out, "{}: valid", path.display())?;
    writeln!(
        out,
        "global dry run: {}",
        if s.cleanup.dry_run {
            "on (no rule signals anything)"
        } else {
            "off"
        }
    )?;
    writeln!(out, "protected: {}", s.cleanup.protected.join(", "))?;
    if s.cleanup.rules.is_empty() {
        writeln!(out, "no rules")?;
    }
    for (i, r) in s.cleanup.rules.iter().enumerate() {
        writeln!(out, "{}. {}", i + 1, r.describe())?;
        for warning in unknown_users(r) {
            writeln!(out, "   warning: {warning}")?;
        }
    }
    Ok(())
}

/// What a rule's user conditions do where a name is no user of this machine (a typo): a
/// `user_is` that matches nothing, a `user_is_not` that leaves everyone in.
fn unknown_users(r: &crate::act::rules::Rule) -> Vec<String> {
    let unknown = |name: &Option<String>| {
        name.as_deref()
            .filter(|n| crate::host::user_names::uid_of_user(n).is_none())
            .map(str::to_owned)
    };
    let mut v = Vec::new();
    if let Some(n) = unknown(&r.conditions.user_is) {
        v.push(format!(
            "no user is named {n:?} here: user_is matches no process"
        ));
    }
    if let Some(n) = unknown(&r.conditions.user_is_not) {
        v.push(format!(
            "no user is named {n:?} here: user_is_not leaves every user's processes in"
        ));
    }
    v
}

/// `vramwarden snapshot`.
///
/// # Errors
/// When the source cannot be opened or the output cannot be written.
pub fn snapshot(
    source: SourceKind,
    format: Format,
    table: CsvTable,
    text: snapshot_out::CsvText,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let simulated = source.is_simulated();
    let mut source = source.open()?;
    let mut snap = source.sample(now_ms())?;
    if !simulated
        && !crate::act::park::discover::add_unlisted_parked(&mut snap, Duration::from_secs(3))
    {
        tracing::warn!(
            "the driver did not say in time which processes are parked; they are not listed"
        );
    }
    enrich(&mut snap, &mut ProcReader::default());
    match format {
        Format::Json => writeln!(out, "{}", snapshot_out::to_json(&snap)?)?,
        Format::Csv => snapshot_out::write_csv_with(&snap, table, text, out)?,
    }
    Ok(())
}

/// What a headless real-time run measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunStats {
    /// Samples applied.
    pub samples: u64,
    /// Wall time measured, from the first sample to the end.
    pub wall_s: f64,
    /// CPU time of the whole process over that time.
    pub cpu_s: f64,
}

impl RunStats {
    /// CPU use as percent of one core.
    pub(crate) fn cpu_pct(&self) -> f64 {
        100.0 * self.cpu_s / self.wall_s.max(1e-9)
    }
}

/// Runs the sampler and engine (the GUI's own) in real time until `duration` has passed since
/// the first sample, or SIGINT/SIGTERM. The calling thread sleeps on a socket that only a signal,
/// the first sample, or a failure wakes, so the run adds no wake-ups of its own. The CPU time
/// is measured from the first sample on (driver initialisation is not counted).
///
/// # Errors
/// When the source fails to open, recording fails to start, or signals cannot be hooked.
pub fn run_realtime(
    factory: SourceFactory,
    interval: Duration,
    history_ticks: usize,
    record: RecordTo,
    duration: Option<Duration>,
    settings: &crate::engine::settings::Settings,
    options: EngineOptions,
) -> Result<(crate::engine::shared::SharedMonitor, RunStats), CliError> {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    let (mut wake_rx, wake_tx) = UnixStream::pair()?;
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::low_level::pipe::register(sig, wake_tx.try_clone()?)?;
    }
    let statistics = crate::host::cost::on_signal(&wake_tx)?;
    let shared = crate::engine::shared::Shared::new(Monitor::new(
        interval.as_millis() as u64,
        history_ticks,
    ));
    let notify = wake_on_first_sample_or_failure(shared.clone(), wake_tx.try_clone()?);
    let engine = EngineBuilder::new(shared.clone(), interval.as_millis() as u64)
        .record(record)
        .settings(settings)
        .options(options);
    let handle = SamplerHandle::start(factory, engine, notify)?;
    let mut byte = [0u8; 16];
    // Wait for the first sample (or a failure, or a signal).
    wake_rx.set_read_timeout(None)?;
    let _ = wake_rx.read(&mut byte)?;
    if let Some(e) = run_failure(&*read_monitor(&shared)?) {
        return Err(e);
    }
    let cpu0 = crate::host::cost::own_cpu_seconds().unwrap_or(0.0);
    let t0 = Instant::now();
    let ticks0 = read_monitor(&shared)?.ticks;
    crate::host::cost::restart();
    let end = run_length(duration, interval);
    wait_for_the_end(&mut wake_rx, &mut byte, &statistics, (end, t0), &shared)?;
    let stats = RunStats {
        samples: read_monitor(&shared)?.ticks - ticks0,
        wall_s: t0.elapsed().as_secs_f64(),
        cpu_s: crate::host::cost::own_cpu_seconds().unwrap_or(0.0) - cpu0,
    };
    crate::host::cost::log_report();
    handle.stop(Duration::from_secs(10));
    Ok((shared, stats))
}

/// The sampler's notice for [`run_realtime`]: writes to `tx` (waking the main thread) only for
/// the first sample and for failures; a poisoned lock (a panic on the engine thread) wakes it too.
fn wake_on_first_sample_or_failure(
    watched: crate::engine::shared::SharedMonitor,
    tx: std::os::unix::net::UnixStream,
) -> crate::engine::sampler::Notify {
    Arc::new(move || {
        let wake = watched.read().map_or(true, |m| {
            m.ticks == 1
                || matches!(m.status, crate::engine::view::SourceStatus::Failed(_))
                || m.recording.could_not_start().is_some()
        });
        if wake {
            let _ = std::io::Write::write_all(&mut &tx, b"n");
        }
    })
}

/// Why a real-time run must end with an error, if it must: the source failed (unavailable
/// before the first sample, failed after it or on an internal error) or recording could not
/// start.
fn run_failure(m: &Monitor) -> Option<CliError> {
    if let crate::engine::view::SourceStatus::Failed(e) = &m.status {
        if m.ticks > 0 || e.starts_with("internal error") {
            return Some(CliError::Failed(e.clone()));
        }
        return Some(SourceError::Unavailable(e.clone()).into());
    }
    if let Some(e) = m.recording.could_not_start() {
        return Some(CliError::Failed(e.to_string()));
    }
    None
}

/// The monitor read; an error if the engine thread panicked while holding it.
fn read_monitor(
    s: &crate::engine::shared::Shared,
) -> Result<std::sync::RwLockReadGuard<'_, Monitor>, CliError> {
    s.read().map_err(|_| {
        CliError::Failed("internal error: the engine thread panicked (a bug in vramwarden)".into())
    })
}

/// How long a real-time run of `duration` lasts from its first sample: as many samples as
/// `record --speed max` takes for the same duration (one at each interval from the start while
/// less than `duration` from it), ending half an interval after the last one is due, never
/// racing the one after it.
fn run_length(duration: Option<Duration>, interval: Duration) -> Option<Duration> {
    duration.map(|d| {
        let step = interval.max(Duration::from_millis(1));
        let n = d.as_nanos().div_ceil(step.as_nanos()).max(1);
        step * u32::try_from(n - 1).unwrap_or(u32::MAX) + step / 2
    })
}

/// Sleeps on `wake_rx` (which signals and the sampler write to, its bytes read into `byte`)
/// until `end` has passed since `t0` (never, if `None`), a signal comes or the run fails (an
/// error); wake-ups for statistics (`statistics` set) and for samples go back to sleep.
fn wait_for_the_end(
    wake_rx: &mut std::os::unix::net::UnixStream,
    byte: &mut [u8; 16],
    statistics: &std::sync::atomic::AtomicBool,
    (end, t0): (Option<Duration>, Instant),
    shared: &crate::engine::shared::Shared,
) -> Result<(), CliError> {
    use std::io::Read;
    loop {
        let left = end.map(|d| d.saturating_sub(t0.elapsed()));
        if left.is_some_and(|l| l.is_zero()) {
            break;
        }
        wake_rx.set_read_timeout(left)?;
        match wake_rx.read(byte) {
            Ok(_) => {
                if let Some(e) = run_failure(&*read_monitor(shared)?) {
                    return Err(e);
                }
                if crate::host::cost::asked(statistics) {
                    byte.fill(0);
                    continue;
                }
                if byte.contains(&b'n') && end.is_some() {
                    byte.fill(0);
                    continue;
                }
                // A signal.
                break;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `vramwarden monitor`: the GUI's sampler and engine without a window; prints its CPU use.
///
/// # Errors
/// When the source fails to open or the report cannot be written.
pub fn monitor(
    source: SourceKind,
    interval: Duration,
    history: Duration,
    duration: Duration,
    config: Option<&std::path::Path>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let (_, st) = run_realtime(
        source.factory(),
        interval,
        history_ticks(history, interval),
        RecordTo::Off,
        Some(duration),
        &load_settings(config)?,
        EngineOptions {
            alerts: Some(crate::front::report_words::stderr_sink()),
            retention_dir: None,
        },
    )?;
    writeln!(
        out,
        "samples={} wall_s={:.1} cpu_s={:.4} cpu_pct_of_core={:.4}",
        st.samples,
        st.wall_s,
        st.cpu_s,
        st.cpu_pct()
    )?;
    Ok(())
}

/// `vramwarden bench-nvml`.
///
/// # Errors
/// When NVML is missing.
pub fn bench_nvml(
    iterations: u32,
    spaced: Option<Duration>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut src = NvmlSource::new()?;
    if let Some(pause) = spaced {
        let _ = src.sample(now_ms())?;
        for (name, v) in src.bench_spaced_calls(iterations, pause) {
            writeln!(out, "spaced {name:<46} {v:>10.2}")?;
        }
        return Ok(());
    }
    // One sample first, so the graphics-list cadence reflects this machine.
    let _ = src.sample(now_ms())?;
    let every_s = crate::source::nvml::UTIL_EVERY_MS as f64 / 1000.0;
    let mut sum = 0.0;
    let mut seq = 0.0;
    for (name, us, calls) in src.bench_raw_calls(iterations) {
        match calls {
            0 => seq = us,
            usize::MAX => writeln!(out, "raw {name:<32} {us:>9.2} µs/call, read once per {every_s} s: {:.2} µs per 1 s sample (not in the sums)", us / every_s)?,
            n => {
                writeln!(out, "raw {name:<32} {us:>9.2} µs/sample ({n} call(s) per sample)")?;
                sum += us;
            }
        }
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
    writeln!(
        out,
        "sum of the raw calls, each timed alone   {sum:>9.2} µs"
    )?;
    writeln!(
        out,
        "the same calls in one sample's order     {seq:>9.2} µs"
    )?;
    writeln!(out, "NvmlSource::sample                       {full:>9.2} µs  = {:.3} × the sum, {:.3} × the in-order calls", full / sum.max(1e-9), full / seq.max(1e-9))?;
    writeln!(out, "sample + /proc enrichment                {enriched:>9.2} µs  = {:.3} × the sum, {:.3} × the in-order calls", enriched / sum.max(1e-9), enriched / seq.max(1e-9))?;
    Ok(())
}

/// `vramwarden record`.
///
/// `interval` defaults to the settings' `sampling.interval_ms`. Recording into the default
/// sessions folder keeps that folder within the settings' retention limits, as the window does.
/// A write that fails (full disk) is reported at once on stderr and retried every sample; the
/// summary counts only what was written, and any gap makes the exit code non-zero. The run's own
/// CPU time is a debug line (`-v`).
///
/// # Errors
/// When the source cannot be opened, the arguments do not fit, or the log cannot be written.
pub fn record(
    source: SourceKind,
    interval: Option<Duration>,
    duration: Option<Duration>,
    out: Option<PathBuf>,
    speed: Speed,
    config: Option<&std::path::Path>,
    said: &mut dyn Write,
) -> Result<(), CliError> {
    let settings = load_settings(config)?;
    let interval = interval.unwrap_or(Duration::from_millis(settings.sampling.interval_ms));
    if !source.is_simulated() && !matches!(speed, Speed::Times(s) if (s - 1.0).abs() < f64::EPSILON)
    {
        return Err(CliError::Usage(
            "--speed other than 1 needs --demo (real GPUs run in real time)".into(),
        ));
    }
    let start = now_ms();
    let (record_to, options) = record_target(out.as_ref());
    let ticks = 4096;
    let mut shared =
        crate::engine::shared::Shared::new(Monitor::new(interval.as_millis() as u64, ticks));
    match speed {
        Speed::Times(s) if (s - 1.0).abs() < f64::EPSILON => {
            let (m, st) = run_realtime(
                source.factory(),
                interval,
                ticks,
                record_to,
                duration,
                &settings,
                options,
            )?;
            shared = m;
            // The run's own cost: a diagnostic, shown with -v (or RUST_LOG=debug).
            tracing::debug!(
                "cpu_s={:.4} wall_s={:.1} cpu_pct_of_core={:.4} (from the first sample on)",
                st.cpu_s,
                st.wall_s,
                st.cpu_pct()
            );
        }
        _ => simulated_record(
            source,
            &shared,
            interval,
            duration,
            (speed, start),
            (record_to, options),
            &settings,
        )?,
    }
    say_recorded(&shared, out, said)
}

/// Where `record` writes (`out`, else a new log in the default sessions folder) and the engine
/// options it runs with: problems said on stderr as they happen, and the default folder kept
/// within the retention limits when it is written to.
fn record_target(out: Option<&PathBuf>) -> (RecordTo, EngineOptions) {
    let options = EngineOptions {
        // The problems the engine reports are said on stderr as they happen.
        alerts: Some(crate::front::report_words::stderr_sink()),
        retention_dir: out.is_none().then(crate::session::default_dir),
    };
    let record_to = match out {
        Some(p) => RecordTo::File(p.clone()),
        None => RecordTo::Dir(crate::session::default_dir()),
    };
    (record_to, options)
}

/// What `record` wrote, said on `said`; an error when nothing was recorded or samples were
/// lost.
fn say_recorded(
    shared: &crate::engine::shared::SharedMonitor,
    out: Option<PathBuf>,
    said: &mut dyn Write,
) -> Result<(), CliError> {
    let m = shared.read().map_err(|_| {
        CliError::Failed("internal error: the engine thread panicked (a bug in vramwarden)".into())
    })?;
    let r = &m.recording;
    let path = r
        .path
        .clone()
        .or(out)
        .unwrap_or_else(crate::session::default_dir);
    let devices = m.latest.as_ref().map_or(0, |s| s.devices.len()).max(1) as u64;
    if r.samples == 0 {
        return Err(CliError::Failed(format!(
            "nothing was recorded to {}{}",
            path.display(),
            r.error
                .as_ref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        )));
    }
    writeln!(
        said,
        "recorded {} sample{} to {} ({} bytes, {:.1} bytes per device-sample)",
        r.samples,
        if r.samples == 1 { "" } else { "s" },
        path.display(),
        r.bytes,
        r.bytes as f64 / (r.samples * devices) as f64
    )?;
    if r.lost > 0 {
        return Err(CliError::Failed(format!(
            "{} could not be written ({}); the log records each gap as a `recording` event",
            crate::model::format::count(r.lost as usize, "sample", "samples"),
            r.error.as_deref().unwrap_or("writing failed")
        )));
    }
    Ok(())
}

/// `record --demo` at a speed other than real time: the simulated day, `interval` apart in
/// its own time, for `duration`, into `record_to`; stops on SIGINT or SIGTERM.
fn simulated_record(
    source: SourceKind,
    shared: &crate::engine::shared::SharedMonitor,
    interval: Duration,
    duration: Option<Duration>,
    (speed, start): (Speed, crate::model::UnixMs),
    (record_to, options): (RecordTo, EngineOptions),
    settings: &crate::engine::settings::Settings,
) -> Result<(), CliError> {
    use std::sync::atomic::Ordering;
    let samples = simulated_samples(duration, interval)?;
    let stop = stop_flag()?;
    let mut sim = source.simulated(start);
    let mut engine = EngineBuilder::new(shared.clone(), interval.as_millis() as u64)
        .record(record_to)
        .options(options)
        .source(sim.info())
        .settings(settings)
        .build();
    let mut taken = 0;
    let mut failed = None;
    let ended = if samples == Some(0) {
        crate::engine::tick_loop::Ended::Stopped
    } else {
        crate::engine::tick_loop::run(
            &mut engine,
            &mut sim,
            interval,
            crate::engine::tick_loop::Clock::Simulated {
                start,
                speed: match speed {
                    Speed::Times(s) => Some(s),
                    Speed::Max => None,
                },
            },
            |engine, _, due| {
                if let Some(e) = engine.recording_failed(false) {
                    failed = Some(e);
                    return false;
                }
                taken += 1;
                if samples.is_some_and(|n| taken >= n) {
                    return false;
                }
                crate::engine::tick_loop::sleep_until(due, &|| stop.load(Ordering::Relaxed))
            },
        )
    };
    if let crate::engine::tick_loop::Ended::Panicked(what) = ended {
        return Err(CliError::Failed(format!(
            "internal error (a bug in vramwarden; recording stopped): {what}"
        )));
    }
    if let Some(e) = failed {
        return Err(CliError::Failed(e));
    }
    engine.finish().map_err(CliError::Failed)?;
    Ok(())
}

/// A flag SIGINT and SIGTERM set.
fn stop_flag() -> Result<Arc<std::sync::atomic::AtomicBool>, CliError> {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    Ok(stop)
}

/// How many samples a simulated recording of `duration` takes: one at start, start +
/// `interval`, … while less than `duration` from the start (no limit without a duration).
fn simulated_samples(
    duration: Option<Duration>,
    interval: Duration,
) -> Result<Option<i64>, CliError> {
    const LONGEST: Duration = Duration::from_secs(366 * 86_400);
    if duration.is_some_and(|d| d > LONGEST) {
        return Err(CliError::Usage(
            "--duration with --speed is at most 366 days of simulated time".into(),
        ));
    }
    let step = interval.as_millis().max(1);
    Ok(duration.map(|d| d.as_millis().div_ceil(step) as i64))
}

/// Says on stderr what reading `session` skipped or joined, if anything (damaged bytes, logs
/// joined end to end, duplicate samples); nothing with `quiet` (`-q`: errors only).
fn note_damage(session: &std::path::Path, data: &crate::session::reader::SessionData, quiet: bool) {
    if !quiet && !data.report.is_clean() {
        eprintln!(
            "vramwarden: {}: {}",
            session.display(),
            data.report.summary()
        );
    }
}

/// `vramwarden export`. `--csv -` writes one table to standard output; summaries go to
/// stderr so the CSV stays clean (none with `quiet`). Never writes over the session it reads, nor over an
/// existing file unless `force`.
///
/// # Errors
/// When the session cannot be read, an output would overwrite something, or the CSV cannot be
/// written.
pub fn export(
    session: &std::path::Path,
    csv: &std::path::Path,
    (table, span): (Option<Table>, (Option<i64>, Option<i64>)),
    force: bool,
    quiet: bool,
    stdout: &mut dyn Write,
) -> Result<(), CliError> {
    let span = (span.0.unwrap_or(i64::MIN), span.1.unwrap_or(i64::MAX));
    if span.0 > span.1 {
        return Err(CliError::Usage("--from is after --to".into()));
    }
    // `/dev/stdout` is standard output too (written as `-`, not opened as a file).
    let to_stdout = csv.as_os_str() == "-" || csv.as_os_str() == "/dev/stdout";
    let jobs = if to_stdout {
        let Some(t) = table else {
            return Err(CliError::Usage(
                "--csv - writes one table to standard output: add --table devices|processes|events"
                    .into(),
            ));
        };
        vec![(t, PathBuf::from("-"))]
    } else {
        csv_export::output_files(csv, table)
    };
    if !to_stdout {
        refuse_clashes(&jobs, session, force)?;
    }
    let data = crate::session::reader::SessionData::open(session)?;
    note_damage(session, &data, quiet);
    let rows = if to_stdout {
        export_to_stdout(&data, (&jobs, span), stdout)?
    } else {
        export_to_files(&data, (&jobs, span), force)?
    };
    for ((t, path), rows) in jobs.iter().zip(rows).filter(|_| !quiet) {
        eprintln!("{}: {rows} {} rows", path.display(), t.row_word());
    }
    Ok(())
}

/// A usage error where writing `jobs` would write over `session`, over something that is no
/// regular file, or (without `force`) over an existing file.
fn refuse_clashes(
    jobs: &[(Table, PathBuf)],
    session: &std::path::Path,
    force: bool,
) -> Result<(), CliError> {
    match csv_export::check_outputs(jobs, Some(session), force) {
        Ok(()) => Ok(()),
        Err(csv_export::OutputClash::IsTheSession(path)) => {
            Err(CliError::Usage(format!(
                "{} is the session being exported: refusing to write over it",
                path.display()
            )))
        }
        Err(csv_export::OutputClash::NotRegular(path, kind)) => {
            Err(CliError::Usage(format!(
                "{} is {kind}, not a regular file: refusing to write to it (use --csv - for standard output)",
                path.display()
            )))
        }
        Err(csv_export::OutputClash::Exist(paths)) => {
            Err(CliError::Usage(format!(
                "{} already exists: add --force to overwrite it",
                paths
                    .first()
                    .map_or_else(String::new, |p| p.display().to_string())
            )))
        }
    }
}

/// The tables of `jobs` written one after another to `stdout`: the rows of each.
fn export_to_stdout(
    data: &crate::session::reader::SessionData,
    (jobs, span): (&[(Table, PathBuf)], (i64, i64)),
    stdout: &mut dyn Write,
) -> Result<Vec<u64>, CliError> {
    let mut w = std::io::BufWriter::new(stdout);
    let rows = jobs
        .iter()
        .map(|(t, _)| csv_export::export_between(data, *t, span, &mut w, &mut |_| true))
        .collect::<Result<Vec<u64>, _>>()?;
    w.flush()?;
    Ok(rows)
}

/// The tables of `jobs` written to their files: the rows of each; an error names the file.
fn export_to_files(
    data: &crate::session::reader::SessionData,
    (jobs, span): (&[(Table, PathBuf)], (i64, i64)),
    force: bool,
) -> Result<Vec<u64>, CliError> {
    let rows = csv_export::write_files(data, jobs, (force, span), &mut |_| true).map_err(|e| {
        match e.error {
            // Which file: the OS's words alone do not say.
            csv_export::ExportError::Io(io) => csv_export::ExportError::Io(std::io::Error::new(
                io.kind(),
                format!("{}: {io}", e.path.display()),
            )),
            other => other,
        }
    })?;
    Ok(rows)
}

/// `vramwarden import nvidia-smi`.
///
/// # Errors
/// When the logs cannot be read or the session cannot be written.
pub fn import(what: ImportKind, said: &mut dyn Write) -> Result<(), CliError> {
    let ImportKind::NvidiaSmi {
        apps,
        gpu,
        out,
        utc,
    } = what;
    let zone = if utc {
        crate::engine::import::Zone::Utc
    } else {
        crate::engine::import::Zone::Local
    };
    use crate::model::format::count;
    let s = crate::engine::import::import_nvidia_smi(&apps, gpu.as_deref(), &out, zone)?;
    writeln!(
        said,
        "imported {} of {} into {} ({} flagged{}; {} of {} rows used, {} skipped)",
        count(s.samples, "sample", "samples"),
        count(s.processes, "process", "processes"),
        out.display(),
        count(s.leaks, "leak episode", "leak episodes"),
        match s.ooms {
            0 => String::new(),
            n => format!(", {}", count(n, "OOM suspicion", "OOM suspicions")),
        },
        s.rows_used,
        s.rows_read,
        s.bad_rows,
    )?;
    if s.back_in_time > 0 {
        writeln!(
            said,
            "warning: {} earlier than the row before (times out of order: a clock set \
             back, or logs joined out of order); the samples are written in time order",
            count(s.back_in_time, "row is", "rows are"),
        )?;
    }
    if gpu.is_none() {
        writeln!(
            said,
            "note: without --gpu (nvidia-smi --query-gpu=… of the same run) the GPUs' total and \
             free memory are not in the session: it has no OOM forecast or post-mortem, and \
             `guard what-if` cannot judge it"
        )?;
    }
    // The skipped rows, one line per log and reason.
    for k in &s.skipped {
        let file = match k.log {
            crate::engine::import::LogKind::Apps => apps.display().to_string(),
            crate::engine::import::LogKind::Gpu => gpu
                .as_deref()
                .map_or(String::new(), |g| g.display().to_string()),
        };
        writeln!(
            said,
            "{file}: skipped {}: {} (first at line {})",
            crate::model::format::count(k.rows, "row", "rows"),
            k.reason,
            k.first_line
        )?;
    }
    Ok(())
}
