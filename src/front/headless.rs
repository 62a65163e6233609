//! What the headless front ends (the command line and the agent) share: their error type with
//! the exit code each error maps to, and loading the settings file strictly.

use std::time::Duration;

use crate::source::SourceError;

/// Loads the settings for a headless command; a broken file is an error here (the window
/// instead reports it and runs on defaults).
///
/// # Errors
/// When the file exists but cannot be read or is invalid.
pub(crate) fn load_settings(
    config: Option<&std::path::Path>,
) -> Result<crate::engine::settings::Settings, CliError> {
    let path = crate::engine::settings::config_path(config);
    if crate::engine::settings::config_named(config) && crate::engine::settings::file_missing(&path)
    {
        // A file named (--config, VRAMWARDEN_CONFIG) and missing is most often a typo: said,
        // not fatal (the agent's service names one that is optional).
        tracing::warn!(
            "{}: no such settings file; the defaults apply (no rules, global dry run on)",
            path.display()
        );
    }
    match crate::engine::settings::Settings::load(&path) {
        (s, None) => Ok(s),
        (_, Some(e)) => Err(CliError::Config(e)),
    }
}

/// Errors of the headless commands, with the exit code each maps to.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No GPU source.
    #[error("{0}\nHint: `vramwarden --demo COMMAND` (agent, record, snapshot…) runs on the simulated GPUs.")]
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
    /// A session could not be read.
    #[error("{0}")]
    Read(#[from] crate::session::reader::ReadError),
    /// Export failed.
    #[error("{0}")]
    Export(#[from] crate::session::csv_export::ExportError),
    /// The settings file is broken.
    #[error("{0}")]
    Config(crate::engine::settings::ConfigError),
    /// An import failed.
    #[error("{0}")]
    Import(#[from] crate::engine::import::ImportError),
    /// Bad combination of arguments (exit code 2, like clap's own usage errors).
    #[error("{0}")]
    Usage(String),
    /// The command ran and failed (recording failed, nothing to export, an internal error).
    #[error("{0}")]
    Failed(String),
}

/// Exit codes, as documented in the README and `--help`.
pub mod exit {
    /// Success.
    pub(crate) const OK: u8 = 0;
    /// The command failed.
    pub const ERROR: u8 = 1;
    /// Bad arguments (clap's own errors use it too).
    pub const USAGE: u8 = 2;
    /// No NVIDIA driver / NVML could not be loaded.
    pub(crate) const NO_DRIVER: u8 = 3;
}

impl CliError {
    /// Process exit code: see [`exit`].
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Source(SourceError::Unavailable(_)) => exit::NO_DRIVER,
            CliError::Usage(_) => exit::USAGE,
            _ => exit::ERROR,
        }
    }

    /// True when the error is a closed output pipe (`| head`): the command ends quietly.
    pub fn is_broken_pipe(&self) -> bool {
        let kind = match self {
            CliError::Io(e) | CliError::Export(crate::session::csv_export::ExportError::Io(e)) => {
                Some(e.kind())
            }
            CliError::Csv(e) => match e.kind() {
                csv::ErrorKind::Io(e) => Some(e.kind()),
                _ => None,
            },
            CliError::Json(e) => e.io_error_kind(),
            _ => None,
        };
        kind == Some(std::io::ErrorKind::BrokenPipe)
    }
}

/// History length in ticks for `history` at `interval`.
pub fn history_ticks(history: Duration, interval: Duration) -> usize {
    (history.as_millis() / interval.as_millis().max(1)) as usize
}
