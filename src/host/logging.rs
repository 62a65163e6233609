//! Diagnostics through `tracing`: `RUST_LOG` picks what is logged (default: info for
//! vramwarden, warn for the libraries); records of the `log` crate (eframe, egui, wgpu, winit)
//! are captured too. Headless commands log to stderr (the journal under systemd); the window
//! also keeps a daily log file in the platform state folder, the newest [`KEEP_FILES`] kept.
//!
//! The command line's own messages (summaries, errors with exit codes) stay plain stderr lines;
//! this is for diagnostics. `-q` / `-v` / `-vv` pick errors only / debug / trace when `RUST_LOG`
//! is unset. Under systemd (`JOURNAL_STREAM` set) each line starts with its syslog priority
//! (`<3>` error, `<4>` warning, `<6>` info, `<7>` debug), which journald reads as the entry's
//! priority (`journalctl -p warning` then shows warnings and errors alone).

use std::path::PathBuf;

use tracing_subscriber::fmt::format::{FormatEvent, FormatFields, Writer};
use tracing_subscriber::fmt::FmtContext;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// The filter when `RUST_LOG` is unset or empty.
const DEFAULT_FILTER: &str = "warn,vramwarden=info";
/// Library warnings of every normal start of the window that say nothing a user can act on
/// (winit on Xvfb or a display without XSETTINGS or a physical size, egui_wgpu on a software
/// renderer, the font provider under the C locale): kept out of stderr when `RUST_LOG` is
/// unset, still written to the window's log file. vramwarden's own warnings are untouched.
const LIBRARY_NOISE: [&str; 3] = [
    "winit::platform_impl=error",
    "egui_wgpu=error",
    "egui_system_font_provider=error",
];

/// How many daily log files the window keeps.
const KEEP_FILES: usize = 7;

/// How much is logged when `RUST_LOG` is unset: the command line's `-q` / `-v` flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// `-q`: errors only.
    Quiet,
    /// The default: [`DEFAULT_FILTER`].
    #[default]
    Normal,
    /// `-v`: debug lines of vramwarden.
    Debug,
    /// `-vv`: trace lines of vramwarden.
    Trace,
}

impl Level {
    /// The level from `-q` and the number of `-v`.
    pub fn from_flags(quiet: bool, verbose: u8) -> Self {
        match (quiet, verbose) {
            (true, _) => Level::Quiet,
            (false, 0) => Level::Normal,
            (false, 1) => Level::Debug,
            _ => Level::Trace,
        }
    }

    fn filter(self) -> &'static str {
        match self {
            Level::Quiet => "error",
            Level::Normal => DEFAULT_FILTER,
            Level::Debug => "warn,vramwarden=debug",
            Level::Trace => "warn,vramwarden=trace",
        }
    }
}

/// The syslog priority journald reads from a `<N>` line prefix (sd-daemon(3)).
fn journal_priority(level: &tracing::Level) -> u8 {
    match *level {
        tracing::Level::ERROR => 3,
        tracing::Level::WARN => 4,
        tracing::Level::INFO => 6,
        _ => 7,
    }
}

/// Puts `<N>` (the event's syslog priority) before each event the inner format writes.
struct JournalPrefix<F>(F);

impl<S, N, F> FormatEvent<S, N> for JournalPrefix<F>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "<{}>", journal_priority(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

/// Where logs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A headless command: stderr only.
    Headless,
    /// The window: stderr and a rotated file in [`log_dir`].
    Window,
}

/// Keeps the file writer's background thread alive; dropping it flushes the file.
#[derive(Debug)]
pub struct Guard {
    _file: Option<tracing_appender::non_blocking::WorkerGuard>,
    /// The log folder, when the window logs to a file.
    pub file_dir: Option<PathBuf>,
}

/// The folder of the window's log files: `$VRAMWARDEN_DATA_DIR/logs` when that variable is set,
/// else the platform state folder (`~/.local/state/vramwarden` on Linux), else the local data
/// folder's `logs`.
fn log_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("VRAMWARDEN_DATA_DIR") {
        return Some(PathBuf::from(d).join("logs"));
    }
    let dirs = crate::host::paths::project_dirs()?;
    Some(
        dirs.state_dir()
            .map_or_else(|| dirs.data_local_dir().join("logs"), ToOwned::to_owned),
    )
}

/// The filter from `RUST_LOG`, or `level`'s when it is unset, empty or invalid (an invalid one
/// is reported once the logger runs).
fn filter(level: Level) -> (EnvFilter, Option<String>) {
    let fallback = level.filter();
    match std::env::var("RUST_LOG") {
        Ok(s) if !s.trim().is_empty() => match EnvFilter::try_new(&s) {
            Ok(f) => (f, None),
            Err(e) => (
                EnvFilter::new(fallback),
                Some(format!(
                    "RUST_LOG={s:?} is not a valid filter ({e}); using {fallback}"
                )),
            ),
        },
        _ => (EnvFilter::new(fallback), None),
    }
}

/// The stderr filter: `level`'s (or `RUST_LOG`'s), and without `RUST_LOG` the
/// [`LIBRARY_NOISE`] directives on top.
fn stderr_filter(level: Level) -> EnvFilter {
    let (mut f, _) = filter(level);
    let user_set = std::env::var("RUST_LOG").is_ok_and(|s| !s.trim().is_empty());
    if !user_set && level != Level::Quiet {
        for d in LIBRARY_NOISE {
            if let Ok(d) = d.parse() {
                f = f.add_directive(d);
            }
        }
    }
    f
}

/// Installs the logger for `mode` at `level` (`RUST_LOG` wins when set). Never fails: when the
/// log file cannot be opened the window logs to stderr alone and says why; a second call
/// (tests) leaves the first logger in place.
pub fn init(mode: Mode, level: Level) -> Guard {
    let (filter, bad_filter) = filter(level);
    // journald stamps every line itself and takes the priority from a `<N>` prefix.
    let under_journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let stderr = if under_journal {
        let format = tracing_subscriber::fmt::format()
            .without_time()
            .with_level(false);
        stderr.event_format(JournalPrefix(format)).boxed()
    } else {
        stderr.boxed()
    };
    let stderr = stderr.with_filter(stderr_filter(level));
    let mut file_error = None;
    let (file_layer, guard, file_dir) = if mode == Mode::Window {
        match open_file() {
            Ok((writer, guard, dir)) => (
                Some(
                    tracing_subscriber::fmt::layer()
                        .with_writer(writer)
                        .with_ansi(false)
                        .boxed(),
                ),
                Some(guard),
                Some(dir),
            ),
            Err(e) => {
                file_error = Some(e);
                (None, None, None)
            }
        }
    } else {
        (None, None, None)
    };
    let installed = tracing_subscriber::registry()
        .with(stderr)
        .with(file_layer.with_filter(filter))
        .try_init()
        .is_ok();
    if installed {
        if let Some(e) = bad_filter {
            tracing::warn!("{e}");
        }
        if let Some(e) = file_error {
            tracing::warn!("no log file: {e}");
        }
    }
    Guard {
        _file: guard,
        file_dir,
    }
}

type FileParts = (
    tracing_appender::non_blocking::NonBlocking,
    tracing_appender::non_blocking::WorkerGuard,
    PathBuf,
);

fn open_file() -> Result<FileParts, String> {
    let dir = log_dir().ok_or("no home folder")?;
    create_private_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let appender = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("vramwarden")
        .filename_suffix("log")
        .max_log_files(KEEP_FILES)
        .build(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let (writer, guard) = tracing_appender::non_blocking(appender);
    Ok((writer, guard, dir))
}

/// Log lines can name processes and command lines: the folder is the user's alone.
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// The message of a caught panic.
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without `RUST_LOG` the window's stderr leaves out the libraries' start-up noise and
    /// keeps vramwarden's own lines; with it, the user's filter is taken as it is.
    #[test]
    fn stderr_leaves_out_library_noise_unless_rust_log_asks() {
        let shown = stderr_filter(Level::Normal).to_string();
        let user_set = std::env::var("RUST_LOG").is_ok_and(|s| !s.trim().is_empty());
        for d in LIBRARY_NOISE {
            assert_eq!(shown.contains(d), !user_set, "{shown}");
        }
        if !user_set {
            assert!(shown.contains("vramwarden=info"), "{shown}");
        }
        // -q asks for errors only: nothing to add.
        assert!(!stderr_filter(Level::Quiet).to_string().contains("winit"));
    }
}
