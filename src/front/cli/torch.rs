//! `vramwarden torch …`: enable / disable the hook, list companions, release a cache.

use std::io::Write;
use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};

use crate::act::torch::client::DEFAULT_TIMEOUT;
use crate::act::torch::discover::discover;
use crate::act::torch::error::TorchError;
use crate::act::torch::hook;
use crate::act::torch::protocol::TorchFacts;
use crate::act::torch::sockets::runtime_dir;
use crate::front::headless::CliError;
use crate::host::term::escape_control;

/// `vramwarden torch …`.
#[derive(Debug, Subcommand)]
pub enum TorchCommand {
    /// Install the companion and a `.pth` hook that starts it in every process of that
    /// interpreter that imports torch (the venv's site-packages, else the user site).
    Enable {
        /// The Python interpreter (default: python3).
        #[arg(long)]
        python: Option<PathBuf>,
    },
    /// Remove what `enable` installed.
    Disable {
        /// The Python interpreter (default: python3).
        #[arg(long)]
        python: Option<PathBuf>,
    },
    /// List the processes whose companion answers (peer-checked), with their allocator figures.
    Ls {
        /// Output format.
        #[arg(long, value_enum, default_value_t = TorchFormat::Table)]
        format: TorchFormat,
    },
    /// Release one process's cached memory (`torch.cuda.empty_cache()`), print before/after.
    Release {
        /// The process.
        pid: u32,
        /// Refuse unless the process started at this time (ms since the epoch): with the pid,
        /// its identity. A rule's command passes `{start_time}` here.
        #[arg(long)]
        start_time_ms: Option<i64>,
    },
    /// Poll every companion once a second for a while, as the engine does, and report the
    /// poller's CPU per companion per poll and the tick's cost of reading the results.
    #[command(hide = true)]
    WatchCost {
        /// How long.
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        duration: std::time::Duration,
    },
}

/// Output format of `torch ls`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TorchFormat {
    /// A JSON array, one object per process.
    Json,
    /// A table for people.
    Table,
}

/// `torch watch-cost`: what the engine pays per companion.
fn watch_cost(duration: std::time::Duration, out: &mut dyn Write) -> Result<(), CliError> {
    let w = crate::act::torch::watch::Watch::spawn(Vec::new(), std::time::Duration::from_secs(1))?;
    // Steady state: the first polls (thread start, connecting, the companions' hello) are
    // left out of the figure.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let s0 = w.state();
    std::thread::sleep(duration);
    let st = w.state();
    // The tick's side: one lookup per companion process, as `attach_torch` makes.
    let keys: Vec<(u32, i64)> = st
        .facts
        .values()
        .filter_map(|f| Some((f.pid, f.start_time_ms?)))
        .collect();
    let rounds = 2000u32;
    let t = std::time::Instant::now();
    for _ in 0..rounds {
        for (pid, start) in &keys {
            std::hint::black_box(w.get(*pid, *start));
        }
    }
    let lookup_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(rounds) / keys.len().max(1) as f64;
    let polls = st.polls - s0.polls;
    let cpu = st.cpu_us - s0.cpu_us;
    let per = cpu as f64 / (st.asked - s0.asked).max(1) as f64;
    writeln!(
        out,
        "polls={polls} companions_last_poll={} refused_last_poll={} poller_cpu_us={cpu} per_poll_us={:.1} per_companion_per_poll_us={per:.1} tick_lookup_per_companion_us={lookup_us:.2} first_polls_cpu_us={}",
        st.facts.len(),
        st.refused.len(),
        cpu as f64 / polls.max(1) as f64,
        s0.cpu_us
    )?;
    Ok(())
}

fn failed(e: TorchError) -> CliError {
    CliError::Failed(e.to_string())
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

/// Runs one `vramwarden torch` command: its data on `out`, the summary of an enable or a
/// disable on `said` (stderr, none with `-q`).
///
/// # Errors
/// A failed install, a refused or absent companion, or output errors.
pub fn run(cmd: TorchCommand, out: &mut dyn Write, said: &mut dyn Write) -> Result<(), CliError> {
    match cmd {
        TorchCommand::Enable { python } => enable(python.as_deref(), said)?,
        TorchCommand::Disable { python } => disable(python.as_deref(), said)?,
        TorchCommand::Ls { format } => {
            let dir = runtime_dir()
                .ok_or(TorchError::NoRuntimeDir)
                .map_err(failed)?;
            let ok = list_companions(&dir);
            match format {
                TorchFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&ok)?)?,
                TorchFormat::Table => write_table(&ok, out)?,
            }
        }
        TorchCommand::WatchCost { duration } => watch_cost(duration, out)?,
        TorchCommand::Release { pid, start_time_ms } => release(pid, start_time_ms, out)?,
    }
    Ok(())
}

/// `vramwarden torch enable`: installs the companion for `python` (else `python3`) and says so
/// on `said`.
fn enable(python: Option<&std::path::Path>, said: &mut dyn Write) -> Result<(), CliError> {
    let (info, target) = hook::target_for(python).map_err(failed)?;
    let files = hook::install(&target).map_err(failed)?;
    if let Some(owner) = hook::pip_owner(&target) {
        writeln!(
            said,
            "the companion in {} was installed by pip ({}); only its start-up hook was added",
            target.display(),
            owner.file_name().unwrap_or_default().to_string_lossy()
        )?;
    }
    writeln!(
        said,
        "enabled for Python {} ({}): {} files in {}",
        info.version,
        if info.venv { "venv" } else { "user site" },
        files.len(),
        target.display()
    )?;
    writeln!(said, "processes of this interpreter that import torch now start the companion; `vramwarden torch ls` lists them")?;
    Ok(())
}

/// `vramwarden torch disable`: removes the companion's files for `python` (else `python3`) and
/// says so on `said`.
fn disable(python: Option<&std::path::Path>, said: &mut dyn Write) -> Result<(), CliError> {
    let (_, target) = hook::target_for(python).map_err(failed)?;
    let removed = hook::uninstall(&target).map_err(failed)?;
    writeln!(
        said,
        "disabled: {} files removed from {} (running processes keep their companion until they exit)",
        removed.len(),
        target.display()
    )?;
    if let Some(owner) = hook::pip_owner(&target) {
        writeln!(
            said,
            "the companion itself was installed by pip ({}) and stays; remove it with `{} -m pip uninstall vramwarden-torch`",
            owner.file_name().unwrap_or_default().to_string_lossy(),
            python.unwrap_or(std::path::Path::new("python3")).display()
        )?;
    }
    Ok(())
}

/// `vramwarden torch release`: asks process `pid`'s companion to free its cache; what each GPU
/// freed on `out`.
fn release(pid: u32, start_time_ms: Option<i64>, out: &mut dyn Write) -> Result<(), CliError> {
    let dir = runtime_dir()
        .ok_or(TorchError::NoRuntimeDir)
        .map_err(failed)?;
    let r = crate::act::torch::release(&[dir], pid, start_time_ms).map_err(failed)?;
    if r.devices.is_empty() {
        writeln!(
            out,
            "process {pid}: torch uses no GPU yet; nothing to release"
        )?;
    }
    for d in &r.devices {
        writeln!(
            out,
            "process {pid} cuda:{}: reserved {} → {} (freed {}; allocated {}){}",
            d.device,
            mib(d.reserved_before_bytes),
            mib(d.reserved_after_bytes),
            mib(d.freed_bytes()),
            mib(d.allocated_bytes),
            crate::act::rules::companion_action::release_extras(d)
        )?;
    }
    Ok(())
}

/// The companions in `dir` that pass the checks; the others, and (as root) a folder that is
/// not ours (another user's `/tmp/vramwarden-0`), said on stderr, escaped.
fn list_companions(dir: &std::path::Path) -> Vec<TorchFacts> {
    // Root reads no folder another user made (a planted `/tmp/vramwarden-0`); anyone else is
    // refused by every companion of another uid anyway, and says so per companion.
    let me = nix::unistd::geteuid().as_raw();
    if me == 0 && dir.exists() {
        if let Some(why) = crate::act::torch::trust::folder_problem(dir, me) {
            eprintln!(
                "vramwarden: not reading the companions' folder: {}",
                escape_control(&why)
            );
            return Vec::new();
        }
    }
    let mut ok: Vec<TorchFacts> = Vec::new();
    for c in discover(dir, DEFAULT_TIMEOUT) {
        match c.facts {
            Ok(f) => ok.push(f),
            Err(e) => eprintln!(
                "vramwarden: {}: {}",
                escape_control(&c.path.display().to_string()),
                escape_control(&e)
            ),
        }
    }
    ok
}

fn write_table(facts: &[TorchFacts], out: &mut dyn Write) -> Result<(), CliError> {
    if facts.is_empty() {
        writeln!(out, "no companions answer (turn one on with `vramwarden torch enable` or `import vramwarden_torch`)")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:>8}  {:<8}  {:<14}  {:>4}  {:>12}  {:>12}  {:>12}  {:>7}  {:>5}  NOTE",
        "PID", "PYTHON", "TORCH", "DEV", "ALLOCATED", "RESERVED", "RELEASABLE", "RETRIES", "OOMS"
    )?;
    for f in facts {
        // What a companion says is text from another process: escaped for the terminal.
        let torch = escape_control(f.torch_version.as_deref().unwrap_or("-")).into_owned();
        let note = escape_control(f.error.as_deref().unwrap_or_default()).into_owned();
        let python = escape_control(&f.python_version).into_owned();
        if f.devices.is_empty() {
            writeln!(
                out,
                "{:>8}  {:<8}  {:<14}  {:>4}  {:>12}  {:>12}  {:>12}  {:>7}  {:>5}  {}",
                f.pid, python, torch, "-", "-", "-", "-", "-", "-", note
            )?;
        }
        for d in &f.devices {
            writeln!(
                out,
                "{:>8}  {:<8}  {:<14}  {:>4}  {:>12}  {:>12}  {:>12}  {:>7}  {:>5}  {}",
                f.pid,
                python,
                torch,
                d.device,
                mib(d.allocated_bytes),
                mib(d.reserved_bytes),
                mib(d.releasable_bytes()),
                d.num_alloc_retries,
                d.num_ooms,
                note
            )?;
        }
    }
    Ok(())
}
