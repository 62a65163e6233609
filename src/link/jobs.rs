//! The file work a front end asks for, run on threads of its own with progress and
//! cancellation: opening, listing and importing sessions, exporting CSV, saving the settings,
//! reading past sessions' leaks. A pane asks for a [`Job`] with a [`JobCommand`]; the
//! [`JobBoard`] (held beside the front end's link to its engine) runs it and the window reads
//! its state (progress, then the result) on the board each frame, as it reads the engine's
//! view. The front end does no I/O itself and its thread never waits on a disk. [`Task`] is
//! the same for what only the window asks (file dialogs, connecting).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::engine::sampler::Notify;
use crate::session::catalog;
use crate::session::csv_export::{self, Table};
use crate::session::reader::SessionData;

/// Progress and cancellation shared with the worker.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    fraction_bits: AtomicU32,
    cancel: AtomicBool,
}

impl Progress {
    /// Sets the done fraction (0..=1); returns false when the user cancelled.
    pub(crate) fn set(&self, f: f32) -> bool {
        self.fraction_bits
            .store(f.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
        !self.cancel.load(Ordering::Relaxed)
    }

    /// The done fraction.
    pub(crate) fn fraction(&self) -> f32 {
        f32::from_bits(self.fraction_bits.load(Ordering::Relaxed))
    }

    /// Asks the worker to stop.
    pub(crate) fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// Something only the window asks for (a file dialog, connecting to a host), run on a named
/// thread of its own; its result is taken once it ends.
pub(crate) struct Task<T> {
    result: Arc<Mutex<Option<T>>>,
}

impl<T: Send + 'static> Task<T> {
    /// Runs `work` on a thread named after `label`; `done` (if any) is called when it ends (a
    /// window asks for a redraw there, as the sampler's [`Notify`] does after a sample).
    pub(crate) fn spawn(
        label: &str,
        done: Option<Notify>,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Self {
        let result = Arc::new(Mutex::new(None));
        let r = result.clone();
        // A thread that cannot start leaves the task without a result, as a dialog that is
        // never answered does.
        let _ = std::thread::Builder::new()
            .name(thread_name(label))
            .spawn(move || {
                let out = work();
                if let Ok(mut slot) = r.lock() {
                    *slot = Some(out);
                }
                if let Some(done) = done {
                    done();
                }
            });
        Self { result }
    }

    /// The result, once (None while running).
    pub(crate) fn take(&self) -> Option<T> {
        self.result.lock().ok().and_then(|mut s| s.take())
    }
}

/// Names a job: the front end picks one with [`JobId::next`] when it asks, and finds the
/// job's state under it in [`JobBoard::states`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobId(u64);

impl JobId {
    /// A new id, never handed out before in this process.
    pub(crate) fn next() -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// File work a front end asks for. It runs on a thread of its own, never on the window's.
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    /// Read a session log and replay it ([`crate::engine::replay`]).
    OpenSession(PathBuf),
    /// Import nvidia-smi CSV logs into a new session in `dir`, then open it.
    ImportNvidiaSmi {
        /// The `--query-compute-apps` CSV, and optionally the `--query-gpu` one.
        files: Vec<PathBuf>,
        /// Where the new session goes.
        dir: PathBuf,
    },
    /// List the session logs in a folder.
    ListSessions(PathBuf),
    /// Export a session as CSV (one table, or every table beside `path`); files that exist
    /// are kept unless `force`.
    Export {
        /// What to export.
        input: ExportInput,
        /// One table, or all.
        table: Option<Table>,
        /// Where.
        path: PathBuf,
        /// Overwrite files that exist.
        force: bool,
        /// Only the samples and events of this time (unix ms, both ends included).
        span: Option<(crate::model::UnixMs, crate::model::UnixMs)>,
    },
    /// Save the settings (TOML, fsync, `.bak`).
    SaveSettings {
        /// What to save.
        settings: Box<crate::engine::settings::Settings>,
        /// Where.
        path: PathBuf,
    },
    /// Read the leak episodes of the past sessions in `dir`, but `skip` (the live log).
    PastLeaks {
        /// The sessions folder.
        dir: PathBuf,
        /// The log being written.
        skip: Option<PathBuf>,
    },
}

impl Job {
    /// What it does, for the UI and its thread's name.
    pub(crate) fn label(&self) -> String {
        match self {
            Job::OpenSession(p) => format!("Opening {}", p.display()),
            Job::ImportNvidiaSmi { .. } => "Importing nvidia-smi logs".into(),
            Job::ListSessions(_) => "Listing sessions".into(),
            Job::Export { .. } => "Exporting CSV".into(),
            Job::SaveSettings { .. } => "Saving settings".into(),
            Job::PastLeaks { .. } => "Reading past leaks".into(),
        }
    }

    /// True for the jobs the window's status bar shows with a progress bar and a Cancel
    /// button (opening and importing: a day's log takes most of a second); the others show
    /// in their own windows.
    pub(crate) fn in_status_bar(&self) -> bool {
        matches!(self, Job::OpenSession(_) | Job::ImportNvidiaSmi { .. })
    }

    /// Does the work (on the job's thread).
    fn run(self, p: &Progress) -> JobResult {
        let opened = |data: SessionData, p: &Progress| -> Result<Arc<OpenedSession>, String> {
            let monitor = crate::engine::replay::session_with_progress(&data, &mut |f| p.set(f))
                .ok_or_else(|| "Opening the session was cancelled".to_string())?;
            Ok(Arc::new(OpenedSession {
                data: Arc::new(data),
                monitor: Arc::new(monitor),
            }))
        };
        match self {
            Job::OpenSession(path) => JobResult::Opened(
                SessionData::open(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|d| opened(d, p)),
            ),
            Job::ImportNvidiaSmi { files, dir } => JobResult::Opened(
                crate::engine::import::import_files(&files, &dir).and_then(|d| opened(d, p)),
            ),
            Job::ListSessions(dir) => JobResult::Sessions(Arc::new(catalog::list(&dir))),
            Job::Export {
                input,
                table,
                path,
                force,
                span,
            } => JobResult::Exported(run_export(input, (table, span), &path, force, p)),
            Job::SaveSettings { settings, path } => {
                let r = settings.save(&path).map_err(|e| e.to_string());
                JobResult::Saved(settings, r)
            }
            Job::PastLeaks { dir, skip } => JobResult::PastLeaks(Arc::new(
                crate::engine::replay::past_episodes(&dir, skip.as_deref()),
            )),
        }
    }
}

/// A session read and replayed: the file's contents and the engine's state after the replay.
pub(crate) struct OpenedSession {
    /// The file's contents.
    pub data: Arc<SessionData>,
    /// The whole session replayed (history, processes, leaks).
    pub monitor: Arc<crate::engine::view::Monitor>,
}

impl std::fmt::Debug for OpenedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedSession")
            .field("path", &self.data.path)
            .field("samples", &self.data.len())
            .finish()
    }
}

/// What a job gave.
#[derive(Debug, Clone)]
pub(crate) enum JobResult {
    /// [`Job::OpenSession`] and [`Job::ImportNvidiaSmi`].
    Opened(Result<Arc<OpenedSession>, String>),
    /// [`Job::ListSessions`].
    Sessions(Arc<Vec<catalog::SessionSummary>>),
    /// [`Job::Export`]: what was written, or why not.
    Exported(Result<String, ExportFail>),
    /// [`Job::SaveSettings`]: the settings, saved or not.
    Saved(
        Box<crate::engine::settings::Settings>,
        Result<Option<std::path::PathBuf>, String>,
    ),
    /// [`Job::PastLeaks`].
    PastLeaks(Arc<crate::engine::replay::PastEvents>),
    /// The job could not run (no thread could be started), or stopped on a bug.
    Failed(String),
}

/// A job as the front end sees it.
#[derive(Debug, Clone)]
pub(crate) struct JobState {
    /// Its id.
    pub id: JobId,
    /// What it does.
    pub label: String,
    /// Its progress (read live), and how to cancel it.
    pub progress: Arc<Progress>,
    /// Shown in the status bar while it runs ([`Job::in_status_bar`]).
    pub in_status_bar: bool,
    /// Its result, once it ended.
    pub result: Option<JobResult>,
}

/// A front end's requests about jobs.
#[derive(Debug, Clone, PartialEq)]
pub enum JobCommand {
    /// Start `job`; its state shows under `id`.
    Start(JobId, Job),
    /// Ask the job to stop where it can (replays and exports check often).
    Cancel(JobId),
    /// The front end took the result: the job leaves the board.
    Forget(JobId),
}

/// The jobs of a front end: each runs on a thread of its own and reports on the board, which
/// the window reads every frame beside the engine's view. The window itself starts no thread
/// and touches no file.
#[derive(Clone, Default)]
pub(crate) struct JobBoard {
    jobs: Arc<Mutex<Vec<JobState>>>,
    /// Called when a job ends (a window asks for a redraw).
    done: Option<Notify>,
}

impl JobBoard {
    /// A board that calls `done` when a job ends.
    pub(crate) fn new(done: Option<Notify>) -> Self {
        Self {
            jobs: Arc::default(),
            done,
        }
    }

    /// Carries out `c`.
    pub(crate) fn command(&self, c: JobCommand) {
        match c {
            JobCommand::Start(id, job) => self.start(id, job),
            JobCommand::Cancel(id) => {
                if let Some(j) = self.lock().iter().find(|j| j.id == id) {
                    j.progress.cancel();
                }
            }
            JobCommand::Forget(id) => self.lock().retain(|j| j.id != id),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<JobState>> {
        self.jobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn start(&self, id: JobId, job: Job) {
        let label = job.label();
        let progress = Arc::new(Progress::default());
        self.lock().push(JobState {
            id,
            label: label.clone(),
            progress: progress.clone(),
            in_status_bar: job.in_status_bar(),
            result: None,
        });
        let board = self.clone();
        let p = progress.clone();
        let spawned = std::thread::Builder::new()
            .name(thread_name(&label))
            .spawn(move || {
                // A bug in a job is its result, not a job that never ends.
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run(&p)))
                    .unwrap_or_else(|panic| {
                        JobResult::Failed(format!(
                            "internal error (a bug in vramwarden): {}",
                            crate::host::logging::panic_text(panic.as_ref())
                        ))
                    });
                board.finish(id, r);
                if let Some(done) = &board.done {
                    done();
                }
            });
        if let Err(e) = spawned {
            progress.cancel();
            self.finish(
                id,
                JobResult::Failed(format!("{label}: could not start a thread: {e}")),
            );
        }
    }

    /// Puts the result of job `id` on the board (a job forgotten meanwhile: it is dropped).
    fn finish(&self, id: JobId, r: JobResult) {
        if let Some(j) = self.lock().iter_mut().find(|j| j.id == id) {
            j.result = Some(r);
        }
    }

    /// Every job not forgotten yet, running or ended (a copy: progress is shared).
    pub(crate) fn states(&self) -> Vec<JobState> {
        self.lock().clone()
    }

    /// The result of job `id` once it ended, taken: the job leaves the board. None while it
    /// runs (it stays) or when there is no such job.
    pub(crate) fn take(&self, id: JobId) -> Option<JobResult> {
        let mut jobs = self.lock();
        let i = jobs.iter().position(|j| j.id == id && j.result.is_some())?;
        jobs.remove(i).result
    }

    /// The state of job `id`.
    pub(crate) fn state(&self, id: JobId) -> Option<JobState> {
        self.lock().iter().find(|j| j.id == id).cloned()
    }

    /// True while a job runs or holds a result not taken.
    pub(crate) fn busy(&self) -> bool {
        !self.lock().is_empty()
    }
}

fn thread_name(label: &str) -> String {
    format!(
        "vramwarden-{}",
        label
            .split_whitespace()
            .next()
            .unwrap_or("task")
            .to_lowercase()
    )
}

/// What an export reads: a file on disk (the live log) or a session already in memory.
#[derive(Clone)]
pub enum ExportInput {
    /// Read this log first.
    File(PathBuf),
    /// Already opened.
    Data(Arc<SessionData>),
}

impl PartialEq for ExportInput {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ExportInput::File(a), ExportInput::File(b)) => a == b,
            (ExportInput::Data(a), ExportInput::Data(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl std::fmt::Debug for ExportInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportInput::File(p) => f.debug_tuple("File").field(p).finish(),
            ExportInput::Data(d) => f.debug_tuple("Data").field(&d.path).finish(),
        }
    }
}

/// Why an export did not finish.
#[derive(Debug, Clone)]
pub(crate) enum ExportFail {
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
    (table, span): (
        Option<Table>,
        Option<(crate::model::UnixMs, crate::model::UnixMs)>,
    ),
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
        Err(csv_export::OutputClash::NotRegular(path, kind)) => {
            return Err(ExportFail::Failed(format!(
                "{} is {kind}, not a regular file: choose another file name",
                path.display()
            )))
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
    let span = span.unwrap_or((i64::MIN, i64::MAX));
    let rows =
        csv_export::write_files(&data, &jobs, (force, span), &mut |f| p.set(f)).map_err(|e| {
            ExportFail::Failed(match e.error {
                csv_export::ExportError::Cancelled => e.error.to_string(),
                _ => e.to_string(),
            })
        })?;
    let msgs: Vec<String> = jobs
        .iter()
        .zip(rows)
        .map(|((t, out), rows)| format!("{rows} {} rows to {}", t.row_word(), out.display()))
        .collect();
    Ok(format!("Exported {}", msgs.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait(board: &JobBoard, id: JobId) -> JobState {
        let t = std::time::Instant::now();
        loop {
            let s = board.state(id).expect("on the board until forgotten");
            if s.result.is_some() {
                return s;
            }
            assert!(t.elapsed().as_secs() < 20, "the job never ended");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    #[test]
    fn jobs_report_on_the_board_until_forgotten() {
        let dir = tempfile::tempdir().expect("tmp");
        let board = JobBoard::new(None);
        // Saving settings: written by the job, the result says so.
        let path = dir.path().join("config.toml");
        let id = JobId::next();
        board.command(JobCommand::Start(
            id,
            Job::SaveSettings {
                settings: Box::default(),
                path: path.clone(),
            },
        ));
        assert_eq!(
            board.state(id).expect("listed at once").label,
            "Saving settings"
        );
        assert!(board.busy());
        match wait(&board, id).result {
            Some(JobResult::Saved(_, Ok(None))) => {}
            other => panic!("{other:?}"),
        }
        assert!(path.exists());
        // Opening what is not a session: the reason comes back, nothing panics.
        let bad = JobId::next();
        board.command(JobCommand::Start(bad, Job::OpenSession(path.clone())));
        match wait(&board, bad).result {
            Some(JobResult::Opened(Err(e))) => {
                assert!(e.contains("not a vramwarden session log"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        // Listing: the folder's sessions (none).
        let list = JobId::next();
        board.command(JobCommand::Start(
            list,
            Job::ListSessions(dir.path().into()),
        ));
        assert!(matches!(
            wait(&board, list).result,
            Some(JobResult::Sessions(l)) if l.is_empty()
        ));
        // Taken once: the result, then nothing; forgotten: gone.
        assert!(matches!(board.take(list), Some(JobResult::Sessions(_))));
        assert!(board.take(list).is_none());
        assert!(board.state(list).is_none());
        for id in [id, bad] {
            board.command(JobCommand::Forget(id));
        }
        assert!(board.state(id).is_none());
        assert!(!board.busy());
    }
}
