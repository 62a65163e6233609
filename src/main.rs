//! Thin entry point: parse the CLI, pick the front end, map errors to exit codes.

use std::process::ExitCode;

use vramwarden::front::cli::{self, docs, torch, Cli, Command};
use vramwarden::link::open::ConnectTarget;
use vramwarden::source::SourceKind;

fn main() -> ExitCode {
    vramwarden::host::signals::ignore_file_size_limit_signal();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut args = cli::args::parse(argv);
    let level = vramwarden::host::logging::Level::from_flags(args.quiet, args.verbose);
    let _log = vramwarden::host::logging::init(
        if args.command.is_none() {
            vramwarden::host::logging::Mode::Window
        } else {
            vramwarden::host::logging::Mode::Headless
        },
        level,
    );
    if args.verbose > 0 {
        // Run statistics: the CPU of each part of a tick (`host::cost`).
        vramwarden::host::cost::enable();
    }
    // The one place the source is chosen; every front end gets it as is.
    let source = args.source_kind();
    tracing::debug!(command = ?args.command, source = ?source, "vramwarden {} starting", env!("CARGO_PKG_VERSION"));
    let connect = match connect_target(&args) {
        Ok(c) => c,
        Err(code) => return ExitCode::from(code),
    };
    let code = match args.command.take() {
        None => window(args, source, connect),
        Some(command) => exit_code(run(command, &args, source)),
    };
    finish(code)
}

/// `--connect`'s address, checked before anything opens: the usage exit code when it is
/// malformed or comes with a subcommand.
fn connect_target(args: &Cli) -> Result<Option<ConnectTarget>, u8> {
    match args
        .connect
        .as_deref()
        .map(vramwarden::link::open::parse_target)
    {
        Some(Err(e)) => {
            eprintln!("vramwarden: {e}");
            Err(cli::exit::USAGE)
        }
        Some(Ok(_)) if args.command.is_some() => {
            eprintln!("vramwarden: --connect opens the window; it takes no subcommand");
            Err(cli::exit::USAGE)
        }
        other => Ok(other.and_then(Result::ok)),
    }
}

/// No subcommand: the window, on this computer's engine or attached to `connect`.
#[cfg(feature = "gui")]
fn window(args: Cli, source: SourceKind, connect: Option<ConnectTarget>) -> u8 {
    let connect = match connect.map(|t| open_connection(&args, &t)).transpose() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("vramwarden: {e}");
            return cli::exit::ERROR;
        }
    };
    let config_path = vramwarden::engine::settings::config_path(args.config.as_deref());
    let (settings, config_error) = vramwarden::engine::settings::Settings::load(&config_path);
    if let Some(e) = &config_error {
        tracing::warn!(
            "the settings file is broken, running on defaults (the file is left as it is): {e}"
        );
    }
    // A file that is no session log is said at once, not after the window opened.
    if let Some(Err(e)) = args
        .session
        .as_deref()
        .map(vramwarden::session::reader::SessionData::check)
    {
        let e = cli::CliError::Read(e);
        eprintln!("vramwarden: {e}");
        return e.exit_code();
    }
    let interval = args.interval.unwrap_or(std::time::Duration::from_millis(
        settings.sampling.interval_ms,
    ));
    let history = args.history.unwrap_or(std::time::Duration::from_secs_f64(
        settings.sampling.history_hours * 3600.0,
    ));
    match vramwarden::front::gui::run(vramwarden::front::gui::GuiOptions {
        source,
        interval,
        history_ticks: cli::history_ticks(history, interval),
        record: !args.no_record && settings.sessions.record,
        open: args.session,
        config_path,
        config_error,
        settings,
        connect,
    }) {
        Ok(()) => {
            // `-v`: the run statistics (frames per sample among them) when the window closes.
            vramwarden::host::cost::log_report();
            0
        }
        Err(e) => {
            say_window_failed(&e);
            1
        }
    }
}

/// Opens the connection to `target` that `--connect` asks for, with the token in
/// `--token-file` (else the default token file).
#[cfg(feature = "gui")]
fn open_connection(
    args: &Cli,
    target: &ConnectTarget,
) -> Result<
    (
        vramwarden::front::gui::connect::SavedHost,
        vramwarden::link::open::OpenedHost,
    ),
    String,
> {
    let file = args
        .token_file
        .clone()
        .unwrap_or_else(|| vramwarden::link::token::default_path(args.config.as_deref()));
    vramwarden::front::gui::open_connect(target, &file)
}

/// Says why the window could not open: with no display at all, what to run on a server
/// instead.
#[cfg(feature = "gui")]
fn say_window_failed(e: &dyn std::fmt::Display) {
    let no_display = ["DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET"]
        .iter()
        .all(|v| std::env::var_os(v).is_none());
    if no_display {
        tracing::debug!("the window's error: {e}");
        tracing::error!(
            "no display to open the window on (DISPLAY and WAYLAND_DISPLAY are not set). \
             On a server: `vramwarden agent` (metrics and an API), `vramwarden snapshot` or \
             `vramwarden record`; a window on your desktop can attach to the agent with \
             --connect ssh://HOST"
        );
    } else {
        tracing::error!("could not open the window: {e}");
    }
}

/// No subcommand in a build without the window: a usage error.
#[cfg(not(feature = "gui"))]
fn window(_args: Cli, _source: SourceKind, connect: Option<ConnectTarget>) -> u8 {
    exit_code(Err(cli::CliError::Usage(if connect.is_some() {
        "this vramwarden was built without the window (no `gui` feature): --connect needs it".into()
    } else {
        "this vramwarden was built without the window (no `gui` feature); use a command: agent, snapshot, record, export, import, rules, torch, park, resume (see --help)".into()
    })))
}

/// Runs a subcommand, its output on stdout.
fn run(command: Command, args: &Cli, source: SourceKind) -> Result<(), cli::CliError> {
    let mut stdout = std::io::stdout().lock();
    let mut said = summary_out(args.quiet);
    let config = args.config.as_deref();
    match command {
        Command::Snapshot {
            format,
            table,
            excel_safe,
        } => snapshot(source, format, table, excel_safe, &mut stdout),
        Command::Park {
            pid,
            start_time_ms,
            dry_run,
        } => cli::park::park(source, config, pid, start_time_ms, dry_run, &mut stdout),
        Command::Resume { pid } => cli::park::resume(source, config, pid, &mut stdout),
        Command::Record {
            duration,
            out,
            speed,
        } => record(args, source, duration, out, speed, &mut *said),
        Command::Export {
            session,
            csv,
            table,
            force,
            from,
            to,
        } => cli::export(
            &session,
            &csv,
            (table, (from, to)),
            force,
            args.quiet,
            &mut stdout,
        ),
        Command::Import { what } => cli::import(what, &mut *said),
        Command::Monitor { duration } => monitor(args, source, duration, &mut stdout),
        Command::Agent {
            listen,
            no_record,
            token_file,
            max_processes,
            remote_other_users,
        } => {
            drop(stdout);
            vramwarden::front::agent::run(vramwarden::front::agent::AgentOptions {
                source,
                interval: args.interval,
                config: args.config.clone(),
                listen,
                no_record: no_record || args.no_record,
                token_file,
                max_processes,
                remote_other_users,
            })
        }
        Command::Rules {
            what: cli::RulesCommand::Check,
        } => cli::rules_check(config, &mut stdout),
        Command::Guard {
            what: cli::GuardCommand::WhatIf { session, park_rate },
        } => cli::guard::what_if(&session, park_rate, config, args.quiet, &mut stdout),
        Command::Torch { what } => torch::run(what, &mut stdout, &mut *said),
        Command::Completions { shell } => docs::completions(shell, &mut stdout).map_err(Into::into),
        Command::Man => docs::man_page(&mut stdout).map_err(Into::into),
        Command::BenchNvml { iterations, spaced } => {
            cli::bench_nvml(iterations, spaced, &mut stdout)
        }
    }
}

/// Where a command's summary goes: stderr, or nowhere with `-q`.
fn summary_out(quiet: bool) -> Box<dyn std::io::Write> {
    if quiet {
        Box::new(std::io::sink())
    } else {
        Box::new(std::io::stderr())
    }
}

/// `vramwarden snapshot`: `--table` and `--excel-safe` only with `--format csv`; control
/// characters escaped when stdout is a terminal.
fn snapshot(
    source: SourceKind,
    format: cli::args::Format,
    table: Option<cli::snapshot_out::CsvTable>,
    excel_safe: bool,
    out: &mut dyn std::io::Write,
) -> Result<(), cli::CliError> {
    if format != cli::args::Format::Csv && (table.is_some() || excel_safe) {
        return Err(cli::CliError::Usage(
            "--table and --excel-safe shape CSV: add --format csv".into(),
        ));
    }
    let text = vramwarden::front::cli::snapshot_out::CsvText {
        escape_control: vramwarden::host::term::stdout_is_terminal(),
        excel_safe,
    };
    let table = table.unwrap_or(cli::snapshot_out::CsvTable::Processes);
    cli::snapshot(source, format, table, text, out)
}

/// `vramwarden record` for `duration` (until stopped, if `None`) into `out` (a new log in the
/// sessions folder, if `None`) at `speed`, with `--interval` and `--config`.
fn record(
    args: &Cli,
    source: SourceKind,
    duration: Option<std::time::Duration>,
    out: Option<std::path::PathBuf>,
    speed: cli::args::Speed,
    said: &mut dyn std::io::Write,
) -> Result<(), cli::CliError> {
    let config = args.config.as_deref();
    cli::record(source, args.interval, duration, out, speed, config, said)
}

/// `vramwarden monitor` for `duration`: one sample a second and a day of history unless
/// `--interval` and `--history` say otherwise.
fn monitor(
    args: &Cli,
    source: SourceKind,
    duration: std::time::Duration,
    out: &mut dyn std::io::Write,
) -> Result<(), cli::CliError> {
    let interval = args.interval.unwrap_or(std::time::Duration::from_secs(1));
    let history = args
        .history
        .unwrap_or(std::time::Duration::from_secs(24 * 3600));
    cli::monitor(
        source,
        interval,
        history,
        duration,
        args.config.as_deref(),
        out,
    )
}

/// The exit code of a command's result; its error said on stderr.
fn exit_code(result: Result<(), cli::CliError>) -> u8 {
    match result {
        Ok(()) => 0,
        // The reader went away (`| head`): end quietly.
        Err(e) if e.is_broken_pipe() => 0,
        Err(e) => {
            eprintln!(
                "vramwarden: {}",
                vramwarden::host::term::escape_keeping_lines(&e.to_string())
            );
            e.exit_code()
        }
    }
}

/// The exit code out; the process ends at once where the CUDA driver library was loaded
/// (its exit handlers are not safe while its threads run: see `exit_if_loaded`).
fn finish(code: u8) -> ExitCode {
    vramwarden::act::park::cuda::exit_if_loaded(code);
    ExitCode::from(code)
}
