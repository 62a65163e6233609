//! The command line's definitions (clap): the commands, their options and the parsers of
//! their values. What each command does is in the parent module's runners.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, CommandFactory, Parser, Subcommand, ValueEnum};

use crate::front::cli::snapshot_out::CsvTable;
use crate::session::csv_export::Table;

pub use crate::link::DEFAULT_LISTEN;

/// Default bound on the agent's per-process series.
const DEFAULT_MAX_PROCESSES: usize = 200;

/// Watch and manage NVIDIA GPU memory.
#[derive(Debug, Parser)]
#[command(
    name = "vramwarden",
    version,
    about,
    after_help = "Exit codes: 0 ok, 1 error, 2 usage, 3 no NVIDIA driver (try --demo)."
)]
pub struct Cli {
    /// Use the built-in simulated GPUs instead of the NVIDIA driver.
    #[arg(long, global = true)]
    pub demo: bool,
    /// Sampling interval (e.g. 1s, 500ms; default: the settings, else 1s).
    #[arg(long, global = true, value_parser = parse_interval)]
    pub interval: Option<Duration>,
    /// How much history to keep in memory (e.g. 24h; default: the settings, else 24h).
    #[arg(long, value_parser = parse_history)]
    pub history: Option<Duration>,
    /// The settings file (default: the platform config folder, or $VRAMWARDEN_CONFIG).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Do not record a session log while the window runs.
    #[arg(long)]
    pub no_record: bool,
    /// More diagnostics on stderr: -v debug (and run statistics), -vv trace. RUST_LOG, when
    /// set, decides instead.
    #[arg(short, long, global = true, action = ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Errors only: no summaries or warnings on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// A session log to open in the window.
    pub session: Option<PathBuf>,
    /// Open the window attached to a `vramwarden agent`: http://HOST:PORT, or
    /// ssh://[user@]host[:port][/HOST:PORT] through an SSH tunnel (the agent on that host's
    /// loopback, 127.0.0.1:8726 unless given).
    #[arg(long, value_name = "URL", conflicts_with = "session")]
    pub connect: Option<String>,
    /// With --connect: a file holding the agent's token (default: agent.token beside the
    /// settings file).
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub token_file: Option<PathBuf>,
    /// A headless command; none opens the window.
    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// The source this run samples: the one place the flags choose it (a new source adds its
    /// flag above and its line here).
    pub fn source_kind(&self) -> crate::source::SourceKind {
        crate::source::SourceKind::from_demo_flag(self.demo)
    }
}

/// The commands that sample GPUs (`--demo` chooses what they sample); of them, those that
/// sample again and again (`--interval`); and those that read the settings (`--config`). The
/// window, the command line without a command, does all three.
const SAMPLING: [&str; 6] = ["snapshot", "park", "resume", "record", "monitor", "agent"];
const REPEATING: [&str; 3] = ["record", "monitor", "agent"];
const CONFIGURED: [&str; 7] = [
    "park", "resume", "record", "monitor", "agent", "rules", "guard",
];

/// The command line to parse: [`Cli`]'s, with `--demo`, `--interval` and `--config` (global,
/// so they may come after a command's name) left out of the help and completions of the
/// commands where they mean nothing (`export --help` does not offer simulated GPUs). They
/// are still accepted there.
pub(crate) fn command() -> clap::Command {
    let cmd = Cli::command();
    // A command that has an option of a global's name keeps its own: a hidden copy.
    let hidden = |id: &str| {
        cmd.get_arguments()
            .find(|a| a.get_id() == id)
            .map(|a| a.clone().hide(true))
    };
    let globals = [
        (hidden("demo"), &SAMPLING[..]),
        (hidden("interval"), &REPEATING[..]),
        (hidden("config"), &CONFIGURED[..]),
    ];
    cmd.mut_subcommands(|mut sub| {
        let name = sub.get_name().to_string();
        for (arg, used_by) in &globals {
            match arg {
                Some(arg) if !used_by.contains(&name.as_str()) => sub = sub.arg(arg.clone()),
                _ => {}
            }
        }
        sub
    })
}

/// The command line `argv` parsed; on a usage error or `--help` it prints what clap prints
/// and exits (with a suggestion for a mistyped command, see [`mistyped_command`]).
pub fn parse(argv: Vec<std::ffi::OsString>) -> Cli {
    if let Some(msg) = mistyped_command(&argv) {
        Cli::command()
            .error(clap::error::ErrorKind::InvalidSubcommand, msg)
            .exit();
    }
    let matches = command().get_matches_from(argv);
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Headless commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print one sample of every GPU and process, then exit.
    Snapshot {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
        /// For CSV: which table to print (processes, the default: one row per process with
        /// its GPU's columns; devices: one row per GPU; both: the two tables, a blank line
        /// between).
        #[arg(long, value_enum)]
        table: Option<CsvTable>,
        /// For CSV: put a `'` before any text cell that starts with `=`, `+`, `-` or `@`, so a
        /// spreadsheet shows it as text instead of running it as a formula (the data then
        /// differs from what the processes said; off by default). Control characters are
        /// always escaped when the output is a terminal.
        #[arg(long)]
        excel_safe: bool,
    },
    /// Park a process: move its GPU memory to host memory through the driver's checkpoint
    /// API (NVIDIA driver r570 or later); it waits, not killed, until `vramwarden resume`.
    Park {
        /// The process.
        pid: u32,
        /// Act only if the process started at this time (ms since the epoch: `start_time_ms`
        /// of `snapshot --format json`): a PID reused by another process is left alone.
        #[arg(long)]
        start_time_ms: Option<i64>,
        /// Say what would be done, do nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Resume a parked process: its memory back to the GPU, and it goes on.
    Resume {
        /// The process.
        pid: u32,
    },
    /// Record a session log without a window, until the duration ends or Ctrl-C / SIGTERM.
    Record {
        /// Stop after this long (simulated time with --speed); default: until interrupted.
        #[arg(long, value_parser = parse_record_duration)]
        duration: Option<Duration>,
        /// The session file (default: a new file in the sessions folder).
        #[arg(long)]
        out: Option<PathBuf>,
        /// With --demo: N × real time, or `max` for as fast as the CPU allows.
        #[arg(long, default_value = "1", value_parser = parse_speed)]
        speed: Speed,
    },
    /// Convert a session log to CSV.
    Export {
        /// The session log.
        session: PathBuf,
        /// Output CSV file, or `-` for standard output (with --table). Without --table, three
        /// files are written: OUT-devices.csv, OUT-processes.csv and OUT-events.csv; into an
        /// existing folder OUT: devices.csv, processes.csv and events.csv.
        #[arg(long)]
        csv: PathBuf,
        /// Export this table alone.
        #[arg(long, value_enum)]
        table: Option<Table>,
        /// Overwrite CSV files that already exist.
        #[arg(long)]
        force: bool,
        /// Only the samples and events from this time on (RFC 3339, as the CSV's timestamp
        /// column writes it: 2026-12-07T21:00:00Z, or with an offset: …+01:00).
        #[arg(long, value_parser = parse_time)]
        from: Option<i64>,
        /// Only the samples and events up to this time (RFC 3339).
        #[arg(long, value_parser = parse_time)]
        to: Option<i64>,
    },
    /// Check the auto-cleanup rules of a settings file and print them in words.
    Rules {
        /// What to do with the rules.
        #[command(subcommand)]
        what: RulesCommand,
    },
    /// The OOM guard: what it would have done in a recorded session.
    Guard {
        /// What to do.
        #[command(subcommand)]
        what: GuardCommand,
    },
    /// Turn logs of other tools into a session.
    Import {
        /// Which tool wrote the logs.
        #[command(subcommand)]
        what: ImportKind,
    },
    /// The PyTorch companion: enable/disable its hook, list companions, release a cache.
    Torch {
        /// What to do.
        #[command(subcommand)]
        what: crate::front::cli::torch::TorchCommand,
    },
    /// Print a shell completion script to standard output (e.g. `vramwarden completions bash`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to standard output; read it with `vramwarden man | man -l -`.
    Man,
    /// Run the engine without a window and serve Prometheus metrics and an API over HTTP,
    /// until SIGTERM / SIGINT (for GPU servers; see packaging/systemd).
    Agent {
        /// Address to listen on (loopback by default; port 0 picks a free one).
        #[arg(long, default_value = crate::front::cli::args::DEFAULT_LISTEN, value_parser = parse_listen)]
        listen: std::net::SocketAddr,
        /// Do not record session logs.
        #[arg(long)]
        no_record: bool,
        /// The API's bearer token file (created 0600 with a random token when missing;
        /// default: agent.token beside the settings file, which must then exist if named).
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// Most per-process series in /metrics (the largest by memory; leaking ones always).
        #[arg(long, default_value_t = crate::front::cli::args::DEFAULT_MAX_PROCESSES)]
        max_processes: usize,
        /// Remote commands may act on other users' processes (acting on them still needs root).
        #[arg(long)]
        remote_other_users: bool,
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
        /// Instead: each call once per this pause, as the sampler makes them (e.g. 1s), for
        /// `--iterations` rounds; CPU time per call.
        #[arg(long, value_parser = humantime::parse_duration)]
        spaced: Option<Duration>,
    },
}

/// How fast `record --demo` runs simulated time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// N × real time.
    Times(f64),
    /// As fast as the CPU allows.
    Max,
}

/// Slowest and fastest `--speed` other than `max`.
const SPEED_RANGE: (f64, f64) = (0.001, 1_000_000.0);

/// `max` or a number in [`SPEED_RANGE`].
///
/// # Errors
/// A message for clap.
fn parse_speed(s: &str) -> Result<Speed, String> {
    if s.eq_ignore_ascii_case("max") {
        return Ok(Speed::Max);
    }
    match s.parse::<f64>() {
        Ok(v) if (SPEED_RANGE.0..=SPEED_RANGE.1).contains(&v) => Ok(Speed::Times(v)),
        _ => Err(format!(
            "the speed is `max` or a number from {} to {}",
            SPEED_RANGE.0, SPEED_RANGE.1
        )),
    }
}

/// An address to listen on: `IP:PORT`, or `HOST:PORT` (`localhost:8726`) as the system
/// resolves it (its first IPv4 address, else its first).
///
/// # Errors
/// A message for clap when it is neither.
fn parse_listen(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let bad = || {
        format!("not an address: HOST:PORT, as {DEFAULT_LISTEN}, localhost:8726 or 0.0.0.0:8726")
    };
    // IPv4 first where the name has both (localhost: 127.0.0.1, which scrapers and
    // windows of other tools ask for, rather than ::1).
    let all: Vec<std::net::SocketAddr> = s.to_socket_addrs().map_err(|_| bad())?.collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or_else(|| all.first())
        .copied()
        .ok_or_else(bad)
}

/// `s` as a duration; else a message that gives `example` (clap quotes the value before it:
/// "invalid value '-1s' for '--interval': not a duration: a number and a unit, as 1s or 500ms").
fn duration(s: &str, example: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|_| format!("not a duration: a number and a unit, as {example}"))
}

/// A history length between one minute and 31 days (the settings' limit).
///
/// # Errors
/// A message for clap when the text is not a duration or is out of range.
fn parse_history(s: &str) -> Result<Duration, String> {
    let d = duration(s, "24h")?;
    if d < Duration::from_secs(60) || d > Duration::from_secs(31 * 86_400) {
        return Err("the history must be between 1 minute and 31 days".into());
    }
    Ok(d)
}

/// A `record --duration`: more than zero.
///
/// # Errors
/// A message for clap.
fn parse_record_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s, "10m")?;
    if d.is_zero() {
        return Err(
            "the duration must be more than 0 (leave it out to record until stopped)".into(),
        );
    }
    Ok(d)
}

/// `vramwarden rules …`.
#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// Validate the settings file and print each rule in words.
    Check,
}

/// `vramwarden guard …`.
#[derive(Debug, Subcommand)]
pub enum GuardCommand {
    /// Replay a recorded session through the OOM guard without acting: when each step would
    /// have started, the lead time it had, and whether it would have finished before an OOM.
    #[command(name = "what-if")]
    WhatIf {
        /// The session log (`vramwarden import nvidia-smi` turns nvidia-smi logs into one).
        session: PathBuf,
        /// Park rate of this machine, GiB/s (default: the guard's conservative 1.5 GiB/s).
        #[arg(long, value_name = "GIB_PER_S", value_parser = positive_rate)]
        park_rate: Option<f64>,
    },
}

/// A rate from 0.01 to 1000 GiB/s.
fn positive_rate(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(0.01..=1000.0).contains(&v) {
        return Err("must be from 0.01 to 1000 GiB/s".into());
    }
    Ok(v)
}

/// Log formats `import` reads.
#[derive(Debug, Subcommand)]
pub enum ImportKind {
    /// CSV from `nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,process_name,used_memory --format=csv -l 1`.
    #[command(name = "nvidia-smi")]
    NvidiaSmi {
        /// The --query-compute-apps log.
        #[arg(long)]
        apps: PathBuf,
        /// The --query-gpu log of the same time (timestamp,index,uuid,name,memory.total,memory.used,…);
        /// without it the GPUs' sizes are unknown: no OOM forecast or post-mortem.
        #[arg(long)]
        gpu: Option<PathBuf>,
        /// The session file to write.
        #[arg(long)]
        out: PathBuf,
        /// The timestamps are UTC (default: this machine's local time, as nvidia-smi writes them).
        #[arg(long)]
        utc: bool,
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

/// An RFC 3339 time as ms since the epoch.
fn parse_time(s: &str) -> Result<i64, String> {
    chrono::DateTime::parse_from_rfc3339(s.trim())
        .map(|t| t.timestamp_millis())
        .map_err(|e| format!("{e}: give an RFC 3339 time, e.g. 2026-12-07T21:00:00Z"))
}

/// A sampling interval between 100 ms and 1 h.
///
/// # Errors
/// A message for clap when the text is not a duration or is out of range.
fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = duration(s, "1s or 500ms")?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err("the interval must be between 100ms and 1h".into());
    }
    Ok(d)
}

/// A usage error for a first positional argument that names no file and looks like a
/// mistyped command (`vramwarden snapshto`, `vramwarden park --help` where there is no `park`),
/// with the nearest command as a suggestion. `None` when the arguments are fine as far as this
/// check goes (clap then parses them): a known command, an existing file, a path, or nothing.
/// Looked at before clap parses, so `--help` after such a word does not print the main help.
pub(crate) fn mistyped_command(argv: &[std::ffi::OsString]) -> Option<String> {
    let mut cmd = Cli::command();
    // Built, so clap's own `help` command is among the known ones.
    cmd.build();
    let takes_value: Vec<&str> = cmd
        .get_arguments()
        .filter(|a| a.get_action().takes_values() && !a.is_positional())
        .filter_map(|a| a.get_long())
        .collect();
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        let s = a.to_str()?;
        if s == "--" {
            return None;
        }
        if let Some(long) = s.strip_prefix("--") {
            if takes_value.contains(&long) {
                args.next();
            }
            continue;
        }
        if s.starts_with('-') && s.len() > 1 {
            continue;
        }
        let known = cmd.find_subcommand(s).is_some();
        if known || std::path::Path::new(s).exists() || !looks_like_a_command(s) {
            return None;
        }
        let visible: Vec<&str> = cmd
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name())
            .collect();
        let hint = nearest(s, &visible)
            .map(|n| format!("\n\n  did you mean '{n}'?"))
            .unwrap_or_default();
        return Some(format!(
            "'{s}' is not a command, and no file of that name exists{hint}\n\n\
             Commands: {}\nA SESSION to open is a path to a .vwlog file.",
            visible.join(", ")
        ));
    }
    None
}

/// A word of lowercase letters, digits and dashes, starting with a letter: what a command
/// looks like (a session file is named `*.vwlog` or given with a folder).
fn looks_like_a_command(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// The candidate closest to `word` by edit distance, when it is close enough to be a typo.
fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (edit_distance(word, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, with a swap of two neighbours counted as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_listens_on_an_address_or_a_host_name_and_refuses_nonsense() {
        assert_eq!(
            parse_listen("127.0.0.1:8726").map(|a| a.to_string()),
            Ok("127.0.0.1:8726".to_string())
        );
        let local = parse_listen("localhost:8726").expect("localhost resolves");
        assert!(local.ip().is_loopback() && local.port() == 8726, "{local}");
        let bad = parse_listen("nowhere").expect_err("no port");
        assert!(bad.starts_with("not an address: HOST:PORT"), "{bad}");
    }

    /// A renamed command would silently lose its options' help: every name is a command.
    #[test]
    fn the_commands_named_for_the_global_options_exist() {
        let cmd = Cli::command();
        for name in SAMPLING.iter().chain(&REPEATING).chain(&CONFIGURED) {
            assert!(cmd.find_subcommand(name).is_some(), "{name}");
        }
        assert!(REPEATING.iter().all(|n| SAMPLING.contains(n)));
    }

    fn argv(a: &[&str]) -> Vec<std::ffi::OsString> {
        std::iter::once("vramwarden")
            .chain(a.iter().copied())
            .map(Into::into)
            .collect()
    }

    #[test]
    fn a_typo_gets_the_nearest_visible_command() {
        let e = mistyped_command(&argv(&["snapshto"])).expect("an error");
        assert!(e.contains("did you mean 'snapshot'?"), "{e}");
        let e = mistyped_command(&argv(&["--demo", "recrod", "--duration", "1s"])).expect("err");
        assert!(e.contains("did you mean 'record'?"), "{e}");
        // A word far from every command: an error without a guess.
        let e = mistyped_command(&argv(&["frobnicate", "--help"])).expect("an error");
        assert!(!e.contains("did you mean"), "{e}");
        // Hidden developer commands are never suggested.
        let e = mistyped_command(&argv(&["monitr"])).expect("an error");
        assert!(!e.contains("'monitor'"), "{e}");
    }

    #[test]
    fn commands_paths_and_option_values_pass() {
        for ok in [
            &["snapshot"][..],
            &["--demo", "agent", "--listen", "127.0.0.1:0"],
            &["--config", "cfg", "rules", "check"],
            &["--interval", "1s", "snapshot"],
            &["./recent"],
            &["run.vwlog"],
            &["--", "snapshto"],
            &["help", "snapshot"],
            &["-vv", "--demo", "snapshot"],
            &["--config=cfg", "man"],
            &[],
        ] {
            assert_eq!(mistyped_command(&argv(ok)), None, "{ok:?}");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("snapshto");
        std::fs::write(&file, b"").expect("write");
        let path = file.to_string_lossy().to_string();
        assert_eq!(mistyped_command(&argv(&[&path])), None);
    }

    #[test]
    fn edit_distance_counts_a_swap_once() {
        assert_eq!(edit_distance("snapshto", "snapshot"), 1);
        assert_eq!(edit_distance("", "man"), 3);
        assert_eq!(edit_distance("export", "export"), 0);
    }
}
