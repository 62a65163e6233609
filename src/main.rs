//! Thin entry point: parse the CLI, pick the front end, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use vramwarden::cli::{self, Cli, Command};

fn main() -> ExitCode {
    let args = Cli::parse();
    let _log = vramwarden::logging::init(if args.command.is_none() {
        vramwarden::logging::Mode::Window
    } else {
        vramwarden::logging::Mode::Headless
    });
    tracing::debug!(command = ?args.command, demo = args.demo, "vramwarden {} starting", env!("CARGO_PKG_VERSION"));
    let mut stdout = std::io::stdout().lock();
    let interval = args.interval.unwrap_or(std::time::Duration::from_secs(1));
    let history = args
        .history
        .unwrap_or(std::time::Duration::from_secs(24 * 3600));
    let result = match args.command {
        #[cfg(feature = "gui")]
        None => {
            drop(stdout);
            let config_path = vramwarden::settings::config_path(args.config.as_deref());
            let (settings, config_error) = vramwarden::settings::Settings::load(&config_path);
            if let Some(e) = &config_error {
                tracing::warn!("the settings file is broken, running on defaults (the file is left as it is): {e}");
            }
            // A file that is no session log is said at once, not after the window opened.
            if let Some(Err(e)) = args
                .session
                .as_deref()
                .map(vramwarden::session::reader::SessionData::check)
            {
                let e = cli::CliError::Read(e);
                eprintln!("vramwarden: {e}");
                return ExitCode::from(e.exit_code());
            }
            let interval = args.interval.unwrap_or(std::time::Duration::from_millis(
                settings.sampling.interval_ms,
            ));
            let history = args.history.unwrap_or(std::time::Duration::from_secs_f64(
                settings.sampling.history_hours * 3600.0,
            ));
            return match vramwarden::ui::run(vramwarden::ui::GuiOptions {
                demo: args.demo,
                interval,
                history_ticks: cli::history_ticks(history, interval),
                record: !args.no_record && settings.sessions.record,
                open: args.session,
                config_path,
                config_error,
                settings,
            }) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!("could not open the window: {e}");
                    ExitCode::from(1)
                }
            };
        }
        #[cfg(not(feature = "gui"))]
        None => Err(cli::CliError::Usage(
            "this vramwarden was built without the window (no `gui` feature); use a subcommand: snapshot, record, export, import, rules (see --help)".into(),
        )),
        Some(Command::Snapshot { format, table }) => {
            cli::snapshot(args.demo, format, table, &mut stdout)
        }
        Some(Command::Record {
            duration,
            out,
            speed,
        }) => cli::record(
            args.demo,
            args.interval,
            duration,
            out,
            speed,
            args.config.as_deref(),
            &mut stdout,
        ),
        Some(Command::Export {
            session,
            csv,
            table,
            force,
        }) => cli::export(&session, &csv, table, force, &mut stdout),
        Some(Command::Import { what }) => cli::import(what, &mut stdout),
        Some(Command::Monitor { duration }) => cli::monitor(
            args.demo,
            interval,
            history,
            duration,
            args.config.as_deref(),
            &mut stdout,
        ),
        Some(Command::Agent {
            listen,
            no_record,
            token_file,
            max_processes,
            remote_other_users,
        }) => {
            drop(stdout);
            vramwarden::agent::run(vramwarden::agent::AgentOptions {
                demo: args.demo,
                interval: args.interval,
                config: args.config.clone(),
                listen,
                no_record: no_record || args.no_record,
                token_file,
                max_processes,
                remote_other_users,
            })
        }
        Some(Command::Rules {
            what: cli::RulesCommand::Check,
        }) => cli::rules_check(args.config.as_deref(), &mut stdout),
        Some(Command::Torch { what }) => vramwarden::cli::torch::run(what, &mut stdout),
        Some(Command::Completions { shell }) => {
            vramwarden::cli_docs::completions(shell, &mut stdout).map_err(Into::into)
        }
        Some(Command::Man) => vramwarden::cli_docs::man_page(&mut stdout).map_err(Into::into),
        Some(Command::BenchNvml { iterations, spaced }) => cli::bench_nvml(iterations, spaced, &mut stdout),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): end quietly.
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vramwarden: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
