//! Thin entry point: parse the CLI, pick the front end, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use vramwarden::cli::{self, Cli, Command};

fn main() -> ExitCode {
    let args = Cli::parse();
    let mut stdout = std::io::stdout().lock();
    let result = match args.command {
        None => {
            drop(stdout);
            return match vramwarden::ui::run(vramwarden::ui::GuiOptions {
                demo: args.demo,
                interval: args.interval,
                history_ticks: cli::history_ticks(args.history, args.interval),
                record: !args.no_record,
                open: args.session,
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
        }) => cli::record(args.demo, args.interval, duration, out, speed, &mut stdout),
        Some(Command::Export {
            session,
            csv,
            table,
        }) => cli::export(&session, &csv, table, &mut stdout),
        Some(Command::Import { what }) => cli::import(what, &mut stdout),
        Some(Command::Monitor { duration }) => cli::monitor(
            args.demo,
            args.interval,
            args.history,
            duration,
            &mut stdout,
        ),
        Some(Command::BenchNvml { iterations }) => cli::bench_nvml(iterations, &mut stdout),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vramwarden: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
