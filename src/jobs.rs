//! The window's file work, run on threads of its own with progress and cancellation: opening,
//! listing and importing sessions, exporting CSV, saving the settings, reading past sessions'
//! leaks. The window asks for a job and reads its result when it ends; it does no I/O itself
//! and its thread never waits on a disk.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::sampler::Notify;
use crate::session::catalog;
use crate::session::csv_export::{self, Table};
use crate::session::reader::SessionData;

/// Progress and cancellation shared with the worker.
#[derive(Debug, Default)]
pub struct Progress {
    fraction_bits: AtomicU32,
    cancel: AtomicBool,
}

impl Progress {
    /// Sets the done fraction (0..=1); returns false when the user cancelled.
    pub fn set(&self, f: f32) -> bool {
        self.fraction_bits
            .store(f.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
        !self.cancel.load(Ordering::Relaxed)
    }

    /// The done fraction.
    pub fn fraction(&self) -> f32 {
        f32::from_bits(self.fraction_bits.load(Ordering::Relaxed))
    }

    /// Asks the worker to stop.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Whether cancellation was asked for.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// A running background job producing a `T`.
pub struct Task<T> {
    result: Arc<Mutex<Option<T>>>,
    /// Its progress.
    pub progress: Arc<Progress>,
    /// What it is doing, for the UI.
    pub label: String,
}

impl<T: Send + 'static> Task<T> {
    /// Runs `work` on a named thread; `done` (if any) is called when it ends (a window asks
    /// for a redraw there, as the sampler's [`Notify`] does after a sample).
    pub fn spawn(
        label: impl Into<String>,
        done: Option<Notify>,
        work: impl FnOnce(&Progress) -> T + Send + 'static,
    ) -> Self {
        let result = Arc::new(Mutex::new(None));
        let progress = Arc::new(Progress::default());
        let (r, p) = (result.clone(), progress.clone());
        let label = label.into();
        let spawned = std::thread::Builder::new()
            .name(format!(
                "vramwarden-{}",
                label
                    .split_whitespace()
                    .next()
                    .unwrap_or("task")
                    .to_lowercase()
            ))
            .spawn(move || {
                let out = work(&p);
                if let Ok(mut slot) = r.lock() {
                    *slot = Some(out);
                }
                if let Some(done) = done {
                    done();
                }
            });
        if spawned.is_err() {
            progress.cancel();
        }
        Self {
            result,
            progress,
            label,
        }
    }

    /// The result, once (None while running).
    pub fn take(&self) -> Option<T> {
        self.result.lock().ok().and_then(|mut s| s.take())
    }
}

/// Opens the session log at `path` and hands it to `then` on the job's thread, with the
/// job's progress (a window replays it there, so its thread never holds a 24 h replay).
pub fn open_session<T: Send + 'static>(
    path: PathBuf,
    done: Option<Notify>,
    then: impl FnOnce(SessionData, &Progress) -> Result<T, String> + Send + 'static,
) -> Task<Result<T, String>> {
    let label = format!("Opening {}", path.display());
    Task::spawn(label, done, move |p| {
        then(SessionData::open(&path).map_err(|e| e.to_string())?, p)
    })
}

/// Imports nvidia-smi CSV logs into a new session in `dir`, then hands it to `then`.
pub fn import_nvidia_smi<T: Send + 'static>(
    files: Vec<PathBuf>,
    dir: PathBuf,
    done: Option<Notify>,
    then: impl FnOnce(SessionData, &Progress) -> Result<T, String> + Send + 'static,
) -> Task<Result<T, String>> {
    Task::spawn("Importing nvidia-smi logs", done, move |p| {
        then(crate::import::import_files(&files, &dir)?, p)
    })
}

/// Lists the sessions in `dir`.
pub fn list_sessions(dir: PathBuf, done: Option<Notify>) -> Task<Vec<catalog::SessionSummary>> {
    Task::spawn("Listing sessions", done, move |_| catalog::list(&dir))
}

/// Saves `settings` to `path` (TOML, fsync, `.bak`); the result comes back with them.
pub fn save_settings(
    settings: Box<crate::settings::Settings>,
    path: PathBuf,
    done: Option<Notify>,
) -> Task<(Box<crate::settings::Settings>, Result<(), String>)> {
    Task::spawn("save settings", done, move |_| {
        let r = settings.save(&path).map_err(|e| e.to_string());
        (settings, r)
    })
}

/// The leak episodes of the past sessions in `dir`, but the one being written (`skip`).
pub fn past_leaks(
    dir: PathBuf,
    skip: Option<PathBuf>,
    done: Option<Notify>,
) -> Task<crate::replay::PastEvents> {
    Task::spawn("Reading past leaks", done, move |_| {
        crate::replay::past_episodes(&dir, skip.as_deref())
    })
}

/// Exports `input` as CSV to `path` (one table, or every table beside it); files that exist
/// are kept unless `force`.
pub fn export(
    input: ExportInput,
    table: Option<Table>,
    path: PathBuf,
    force: bool,
    done: Option<Notify>,
) -> Task<Result<String, ExportFail>> {
    Task::spawn("Exporting CSV", done, move |p| {
        run_export(input, table, &path, force, p)
    })
}

/// What an export reads: a file on disk (the live log) or a session already in memory.
#[derive(Clone)]
pub enum ExportInput {
    /// Read this log first.
    File(PathBuf),
    /// Already opened.
    Data(Arc<SessionData>),
}

/// Why an export did not finish.
pub enum ExportFail {
    /// Files would be overwritten: the window asks first.
    Exists {
        /// The name chosen.
        path: PathBuf,
        /// What was to be exported.
        input: ExportInput,
        /// The files that exist.
        files: Vec<PathBuf>,
    },
    /// It failed (the reason).
    Failed(String),
}

fn run_export(
    input: ExportInput,
    table: Option<Table>,
    path: &std::path::Path,
    force: bool,
    p: &Progress,
) -> Result<String, ExportFail> {
    let jobs = csv_export::output_files(path, table);
    let source = match &input {
        ExportInput::File(src) => Some(src.as_path()),
        ExportInput::Data(_) => None,
    };
    match csv_export::check_outputs(&jobs, source, force) {
        Ok(()) => {}
        Err(csv_export::OutputClash::IsTheSession(_)) => {
            return Err(ExportFail::Failed(
                "That is the session log itself: choose another file name".into(),
            ))
        }
        Err(csv_export::OutputClash::Exist(files)) => {
            return Err(ExportFail::Exists {
                path: path.to_path_buf(),
                input,
                files,
            })
        }
    }
    let data = match input {
        ExportInput::File(f) => {
            Arc::new(SessionData::open(&f).map_err(|e| ExportFail::Failed(e.to_string()))?)
        }
        ExportInput::Data(d) => d,
    };
    // A file error names its file; a cancel is said as it is.
    let rows = csv_export::write_files(&data, &jobs, &mut |f| p.set(f)).map_err(|e| {
        ExportFail::Failed(match e.error {
            csv_export::ExportError::Io(_) => e.to_string(),
            csv_export::ExportError::Cancelled => e.error.to_string(),
        })
    })?;
    let msgs: Vec<String> = jobs
        .iter()
        .zip(rows)
        .map(|((t, out), rows)| format!("{rows} {} rows to {}", t.name(), out.display()))
        .collect();
    Ok(format!("Exported {}", msgs.join(", ")))
}
