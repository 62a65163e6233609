//! Thin entry point: parse the CLI, pick the front end, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use vramwarden::cli::{self, Cli, Command};

fn main() -> ExitCode {
    let args = Cli::parse();
    let mut stdout = std::io::stdout().lock();
    let interval = args.interval.unwrap_or(std::time::Duration::from_secs(1));
    let history = args
        .history
        .unwrap_or(std::time::Duration::from_secs(24 * 3600));
    let result = match args.command {
        None => {
            drop(stdout);
            let config_path = vramwarden::settings::config_path(args.config.as_deref());
            let (settings, config_error) = vramwarden::settings::Settings::load(&config_path);
            if let Some(e) = &config_error {
                eprintln!("vramwarden: the settings file is broken, running on defaults (the file is left as it is): {e}");
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
                    eprintln!("vramwarden: could not open the window: {e}");
                    ExitCode::from(1)
                }
            };
        }
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
        Some(Command::BenchNvml { iterations }) => cli::bench_nvml(iterations, &mut stdout),
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
