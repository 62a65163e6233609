//! Past sessions in the window: the Sessions browser, opening a log (browser, file dialog or
//! command line) into a read-only view with a time slider, and CSV export with progress.

use std::path::PathBuf;
use std::sync::Arc;

use egui::{RichText, Ui};

use super::task::Task;
use super::ui_command::UiCommand;
use super::widgets;
use crate::engine::view::{Monitor, ProcessRow};
use crate::link::jobs::{Job, JobBoard, JobCommand, JobId, JobResult, OpenedSession};
use crate::model::format;
use crate::model::{Snapshot, UnixMs};
use crate::session::catalog::SessionSummary;
use crate::session::csv_export::Table;
use crate::session::reader::SessionData;

/// A recorded session opened read-only.
pub struct SessionView {
    /// The file's contents.
    pub data: Arc<SessionData>,
    /// The whole session replayed through a read-only engine ([`crate::engine::replay`]).
    pub monitor: Arc<Monitor>,
    /// The moment shown.
    pub t: UnixMs,
    snap: Option<(usize, Snapshot)>,
    rows: Option<(UnixMs, Vec<ProcessRow>)>,
}

impl SessionView {
    /// Replays `data` here and shows its last moment (tests; the window opens sessions
    /// through a [`Job::OpenSession`]).
    pub(crate) fn new(data: SessionData) -> Self {
        let monitor = crate::engine::replay::session(&data);
        Self::of(&OpenedSession {
            data: Arc::new(data),
            monitor: Arc::new(monitor),
        })
    }

    /// Shows the last moment of a session a job opened.
    pub(crate) fn of(opened: &OpenedSession) -> Self {
        let t = opened.data.span().map_or(0, |(_, b)| b);
        Self {
            data: opened.data.clone(),
            monitor: opened.monitor.clone(),
            t,
            snap: None,
            rows: None,
        }
    }

    /// The sample shown (the last one at or before the slider).
    pub(crate) fn snapshot(&mut self) -> Option<&Snapshot> {
        let i = self.data.index_at(self.t);
        if self.snap.as_ref().is_none_or(|(j, _)| *j != i) {
            self.snap = self.data.snapshot(i).map(|s| (i, s));
        }
        self.snap.as_ref().map(|(_, s)| s)
    }

    /// The process table at the slider, each row's park as its sample there shows it.
    pub(crate) fn rows(&mut self) -> &[ProcessRow] {
        if self.rows.as_ref().is_none_or(|(t, _)| *t != self.t) {
            let mut rows = self.monitor.rows_at(self.t);
            let parks: std::collections::HashMap<_, _> = self
                .snapshot()
                .map(|s| {
                    s.processes
                        .iter()
                        .filter_map(|p| Some(((p.key(), p.device_index), p.parked?)))
                        .collect()
                })
                .unwrap_or_default();
            for r in &mut rows {
                r.parked = parks
                    .get(&r.series_key())
                    .copied()
                    .filter(|_| r.exited_at_ms.is_none());
            }
            self.rows = Some((self.t, rows));
        }
        self.rows.as_ref().map_or(&[], |(_, r)| r.as_slice())
    }

    /// A short title.
    pub(crate) fn title(&self) -> String {
        let name = self
            .data
            .path
            .as_ref()
            .and_then(|p| p.file_name())
            .map_or("session".into(), |n| n.to_string_lossy().into_owned());
        match &self.data.header {
            Some(h) => format!("{name} · {} · {}", h.host, h.source),
            None => name,
        }
    }
}

/// What the user asked the session UI for this frame.
pub(crate) enum SessionAction {
    /// Show this session.
    Open(Box<SessionView>),
}

/// Which session an export reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ExportSource {
    /// This run's own log.
    Live,
    /// The session being viewed.
    Opened,
}

/// State of the Sessions and Export windows and their background jobs.
#[derive(Default)]
pub struct SessionsUi {
    /// Sessions browser shown.
    pub browser_open: bool,
    /// Export window shown.
    pub export_open: bool,
    /// The job listing the sessions folder.
    listing: Option<JobId>,
    list: Arc<Vec<SessionSummary>>,
    /// The job reading and replaying a session (a 24 h log takes most of a second).
    opening: Option<JobId>,
    picking: Option<Task<Picked>>,
    saving: Option<Task<Picked>>,
    importing: Option<Task<Picked>>,
    /// No file dialog could be shown: the path is typed in the window instead.
    pub path_entry: Option<PathEntry>,
    /// The paths typed there last, offered again.
    pub typed: TypedPaths,
    /// The job exporting CSV.
    exporting: Option<JobId>,
    /// An export that would overwrite files: (where, the input, the files), until confirmed.
    overwrite: Option<(PathBuf, ExportInput, Vec<PathBuf>)>,
    export_source: Option<ExportSource>,
    export_table: Option<Table>,
    /// Export only the time the GPU graph shows.
    export_shown_only: bool,
    /// The time range the GPU graph showed at the last frame (unix ms).
    pub(crate) shown: Option<(crate::model::UnixMs, crate::model::UnixMs)>,
    pending_export: Option<ExportInput>,
    /// The last export's result (done, or why not) and whether it is an error: shown in the
    /// Export window until its input changes or it is opened again.
    pub message: Option<(String, bool)>,
    /// Why the sessions folder could not be listed (shown in the browser).
    pub list_error: Option<String>,
    /// The Export window was open at the last frame (opening it clears the last result).
    export_was_open: bool,
    /// Why the last file asked to be opened (or imported) could not be: the window shows it
    /// at once, until dismissed or another file opens.
    pub open_error: Option<String>,
    /// Job requests of this frame, for the window to hand to its [`JobBoard`].
    pub outbox: Vec<JobCommand>,
}

/// What a file dialog gave.
#[derive(Debug, Clone, PartialEq)]
enum Picked {
    /// The files chosen.
    Files(Vec<PathBuf>),
    /// The user closed the dialog.
    Cancelled,
    /// No dialog appeared (no desktop portal or dialog program): it "answered" faster than a
    /// person can.
    NoDialog,
}

/// A dialog that answers within this time was never shown (nobody cancels that fast).
const NO_DIALOG_MS: u128 = 1000;

/// True when a desktop portal could be reached: the dialogs go through xdg-desktop-portal over
/// the session bus, so without one no dialog can appear.
fn session_bus() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
        || std::path::Path::new(&format!("/run/user/{}/bus", nix::unistd::getuid())).exists()
}

/// Runs a file dialog and tells a cancel from a dialog that never appeared.
fn run_dialog(pick: impl FnOnce() -> Option<Vec<PathBuf>>) -> Picked {
    if !session_bus() {
        return Picked::NoDialog;
    }
    let t = std::time::Instant::now();
    match pick() {
        Some(f) if !f.is_empty() => Picked::Files(f),
        _ if t.elapsed().as_millis() < NO_DIALOG_MS => Picked::NoDialog,
        _ => Picked::Cancelled,
    }
}

/// What a typed path is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathPurpose {
    /// Open a session log.
    Open,
    /// Export to this CSV file.
    Export,
    /// Import these nvidia-smi logs (paths separated by spaces).
    Import,
}

/// The paths last typed in the path field, per purpose: offered again the next time (they
/// survive a restart with the window's other UI state).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TypedPaths {
    /// The session log last opened.
    pub open: String,
    /// The CSV file last exported to.
    pub export: String,
    /// The nvidia-smi logs last imported.
    pub import: String,
}

impl TypedPaths {
    fn slot(&mut self, purpose: PathPurpose) -> &mut String {
        match purpose {
            PathPurpose::Open => &mut self.open,
            PathPurpose::Export => &mut self.export,
            PathPurpose::Import => &mut self.import,
        }
    }
}

/// The in-window path field shown when no file dialog can be.
#[derive(Debug, Clone, PartialEq)]
pub struct PathEntry {
    /// What the path is for.
    pub purpose: PathPurpose,
    /// The text typed so far.
    pub text: String,
    /// The field has had the keyboard focus once (given when the window opens).
    pub focused: bool,
    /// The field has been clicked once (the first click selects the path offered).
    pub clicked: bool,
}

impl SessionsUi {
    /// Asks for `job` in `slot`; its state comes back on the board under the id kept there.
    /// A job the slot held before is cancelled and forgotten (the newer request wins, and no
    /// result is left on the board unclaimed).
    fn ask(&mut self, slot: fn(&mut Self) -> &mut Option<JobId>, job: Job) {
        let id = JobId::next();
        if let Some(old) = slot(self).replace(id) {
            self.outbox.push(JobCommand::Cancel(old));
            self.outbox.push(JobCommand::Forget(old));
        }
        self.outbox.push(JobCommand::Start(id, job));
    }

    /// A new one that offers `typed` in the path field (the paths typed in the last run).
    pub(crate) fn with_typed_paths(typed: TypedPaths) -> Self {
        Self {
            typed,
            ..Self::default()
        }
    }

    /// No file dialog could be shown for `purpose`: the path field asks instead, holding the
    /// path typed there last for the same purpose.
    pub fn no_dialog(&mut self, purpose: PathPurpose) {
        self.path_entry = Some(PathEntry {
            purpose,
            text: self.typed.slot(purpose).clone(),
            focused: false,
            clicked: false,
        });
    }

    /// Opens `path` in the background (the result arrives through [`SessionsUi::poll`]).
    pub fn open_path(&mut self, path: PathBuf) {
        self.ask(|s| &mut s.opening, Job::OpenSession(path));
    }

    /// Shows the browser and refreshes its list.
    pub fn show_browser(&mut self) {
        self.browser_open = true;
        let dir = crate::session::default_dir();
        self.ask(|s| &mut s.listing, Job::ListSessions(dir));
    }

    /// Asks for nvidia-smi CSV logs (the `--query-compute-apps` one, and optionally the
    /// `--query-gpu` one), imports them into a new session in the sessions folder, opens it.
    pub(crate) fn import_nvidia_smi(&mut self, ctx: &egui::Context) {
        self.importing = Some(Task::spawn(
            "Choosing files",
            super::task::repaint(ctx),
            move || {
                run_dialog(|| {
                    rfd::FileDialog::new()
                        .set_title("Import nvidia-smi logs: the --query-compute-apps CSV (and the --query-gpu CSV)")
                        .add_filter("CSV", &["csv", "txt", "log"])
                        .pick_files()
                })
            },
        ));
    }

    fn start_import(&mut self, files: Vec<PathBuf>) {
        let dir = crate::session::default_dir();
        self.ask(|s| &mut s.opening, Job::ImportNvidiaSmi { files, dir });
    }

    /// Asks for a file with the system dialog, then opens it.
    pub(crate) fn pick_file(&mut self, ctx: &egui::Context) {
        let dir = crate::session::default_dir();
        self.picking = Some(Task::spawn(
            "Choosing a file",
            super::task::repaint(ctx),
            move || {
                run_dialog(|| {
                    rfd::FileDialog::new()
                        .set_title("Open a vramwarden session")
                        .add_filter("vramwarden session", &[crate::session::EXTENSION])
                        .set_directory(dir)
                        .pick_file()
                        .map(|f| vec![f])
                })
            },
        ));
    }

    /// The window that asks for a path when no file dialog could be shown; acts on it.
    fn path_window(&mut self, ctx: &egui::Context) {
        let Some(mut entry) = self.path_entry.take() else {
            return;
        };
        let mut keep = true;
        let mut go = false;
        egui::Window::new("Choose a file")
            .collapsible(false)
            .default_pos([320.0, ctx.content_rect().min.y + 80.0])
            .show(ctx, |ui| {
                ui.label("No file dialog could be shown on this desktop (it needs xdg-desktop-portal, or zenity/kdialog). Type the path instead:");
                let r = path_field(ui, &mut entry);
                if r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)) {
                    go = true;
                }
                ui.horizontal(|ui| {
                    let verb = match entry.purpose {
                        PathPurpose::Open => "Open",
                        PathPurpose::Export => "Export",
                        PathPurpose::Import => "Import",
                    };
                    if ui
                        .add_enabled(!entry.text.trim().is_empty(), egui::Button::new(verb))
                        .clicked()
                    {
                        go = true;
                    }
                    if ui.button("Cancel").clicked() {
                        keep = false;
                    }
                });
            });
        if go {
            self.path_typed(&entry);
        } else if keep {
            self.path_entry = Some(entry);
        }
    }

    /// Acts on the path typed in `entry` (kept to be offered next time): opens, exports to or
    /// imports it.
    fn path_typed(&mut self, entry: &PathEntry) {
        let text = entry.text.trim().to_string();
        *self.typed.slot(entry.purpose) = text.clone();
        match entry.purpose {
            PathPurpose::Open => self.open_path(PathBuf::from(text)),
            PathPurpose::Export => self.start_export(PathBuf::from(text)),
            PathPurpose::Import => {
                let files = text.split_whitespace().map(PathBuf::from).collect();
                self.start_import(files);
            }
        }
    }

    /// True while a job runs (the UI keeps repainting to show progress).
    pub(crate) fn busy(&self) -> bool {
        self.opening.is_some()
            || self.exporting.is_some()
            || self.listing.is_some()
            || self.picking.is_some()
            || self.saving.is_some()
            || self.importing.is_some()
    }

    /// The result of the job in `slot` once it ended: taken, and the slot emptied.
    fn take(
        &mut self,
        slot: fn(&mut Self) -> &mut Option<JobId>,
        jobs: &JobBoard,
    ) -> Option<JobResult> {
        let result = jobs.take((*slot(self))?)?;
        *slot(self) = None;
        Some(result)
    }

    /// Collects ended jobs (from the window's `jobs`) and answered dialogs. Returns a session
    /// to show when one finished opening.
    pub(crate) fn poll(&mut self, ctx: &egui::Context, jobs: &JobBoard) -> Option<SessionAction> {
        match self.take(|s| &mut s.listing, jobs) {
            Some(JobResult::Sessions(l)) => {
                self.list = l;
                self.list_error = None;
            }
            Some(JobResult::Failed(e)) => self.list_error = Some(e),
            _ => {}
        }
        if let Some(p) = self.picking.as_ref().and_then(Task::take) {
            self.picking = None;
            self.answered(p, PathPurpose::Open);
        }
        if let Some(p) = self.saving.as_ref().and_then(Task::take) {
            self.saving = None;
            self.answered(p, PathPurpose::Export);
        }
        if let Some(p) = self.importing.as_ref().and_then(Task::take) {
            self.importing = None;
            self.answered(p, PathPurpose::Import);
        }
        self.path_window(ctx);
        self.export_done(jobs);
        self.opened(jobs)
    }

    /// A file dialog answered `p` for `purpose`: the file opened or exported to (the first
    /// chosen), the files imported; the path window when no dialog could be shown.
    fn answered(&mut self, p: Picked, purpose: PathPurpose) {
        match p {
            Picked::Files(f) => match purpose {
                PathPurpose::Open => {
                    if let Some(p) = f.into_iter().next() {
                        self.open_path(p);
                    }
                }
                PathPurpose::Export => {
                    if let Some(p) = f.into_iter().next() {
                        self.start_export(p);
                    }
                }
                PathPurpose::Import => self.start_import(f),
            },
            Picked::NoDialog => self.no_dialog(purpose),
            Picked::Cancelled => {}
        }
    }

    /// An export that ended: its message, or the question whether to overwrite its files.
    fn export_done(&mut self, jobs: &JobBoard) {
        match self.take(|s| &mut s.exporting, jobs) {
            Some(JobResult::Exported(Ok(m))) => self.message = Some((m, false)),
            Some(JobResult::Exported(Err(ExportFail::Exists { path, input, files }))) => {
                self.message = None;
                self.overwrite = Some((path, input, files));
            }
            Some(JobResult::Exported(Err(ExportFail::Failed(e)))) | Some(JobResult::Failed(e)) => {
                self.message = Some((e, true));
            }
            _ => {}
        }
    }

    /// A session that finished opening, to show (the browser closes); or its error, kept for
    /// the window's banner.
    fn opened(&mut self, jobs: &JobBoard) -> Option<SessionAction> {
        match self.take(|s| &mut s.opening, jobs)? {
            JobResult::Opened(Ok(opened)) => {
                // Damage found in the file is in the status bar while it is shown.
                let view = SessionView::of(&opened);
                self.browser_open = false;
                self.open_error = None;
                Some(SessionAction::Open(Box::new(view)))
            }
            JobResult::Opened(Err(e)) | JobResult::Failed(e) => {
                // Said in the window's banner; the Export window keeps its own results.
                self.open_error = Some(e);
                None
            }
            _ => None,
        }
    }

    fn start_export(&mut self, path: PathBuf) {
        let Some(input) = self.pending_export.take() else {
            return;
        };
        self.spawn_export(input, path, false);
    }

    fn spawn_export(&mut self, input: ExportInput, path: PathBuf, force: bool) {
        let table = self.export_table;
        let span = self.shown.filter(|_| self.export_shown_only);
        self.ask(
            |s| &mut s.exporting,
            Job::Export {
                input,
                table,
                path,
                force,
                span,
            },
        );
    }
}

impl SessionsUi {
    /// Draws the Sessions browser and the Export window. `live_log` is this run's log file,
    /// `viewing` the session on screen; Back to live goes to `out`.
    pub(crate) fn windows(
        &mut self,
        ctx: &egui::Context,
        live_log: Option<PathBuf>,
        viewing: Option<Arc<SessionData>>,
        jobs: &JobBoard,
        out: &mut Vec<UiCommand>,
    ) {
        let mut open = self.browser_open;
        let top = ctx.content_rect().min.y + 50.0;
        egui::Window::new("Sessions")
            .open(&mut open)
            .default_size([720.0, 420.0])
            .default_pos([200.0, top])
            .show(ctx, |ui| {
                self.browser(ui, live_log.as_deref(), viewing.is_some(), out)
            });
        self.browser_open = open;
        if self.export_open && !self.export_was_open {
            // Opened again: the last export's result is old news.
            self.message = None;
        }
        let mut open = self.export_open;
        egui::Window::new("Export to CSV")
            .open(&mut open)
            .default_width(420.0)
            .default_pos([300.0, ctx.content_rect().min.y + 50.0])
            .show(ctx, |ui| self.export_window(ui, &live_log, &viewing, jobs));
        self.export_open = open;
        self.export_was_open = open;
    }

    /// The Sessions browser: the recorded sessions, each with Open.
    fn browser(
        &mut self,
        ui: &mut Ui,
        live_log: Option<&std::path::Path>,
        viewing: bool,
        out: &mut Vec<UiCommand>,
    ) {
        ui.horizontal(|ui| {
            if ui.button("Open file…").clicked() {
                self.pick_file(ui.ctx());
            }
            if ui.button("Refresh").clicked() {
                self.show_browser();
            }
            if viewing && ui.button("Back to live").clicked() {
                out.push(UiCommand::BackToLive);
            }
        });
        ui.label(widgets::hint(format!(
            "Folder: {}",
            crate::session::default_dir().display()
        )));
        ui.separator();
        if self.listing.is_some() {
            ui.label("Reading the sessions folder…");
        } else if let Some(e) = &self.list_error {
            ui.label(
                RichText::new(format!("The sessions folder could not be read: {e}"))
                    .color(widgets::warn(ui)),
            );
        } else if self.list.is_empty() {
            widgets::label_with_code(ui, "No recorded sessions yet. Sessions are recorded while the window runs, or with `vramwarden record`.");
        }
        if let Some(p) = sessions_grid(ui, &self.list, live_log) {
            self.open_path(p);
        }
    }

    /// The Export window: which session, which table, then Save as….
    fn export_window(
        &mut self,
        ui: &mut Ui,
        live_log: &Option<PathBuf>,
        viewing: &Option<Arc<SessionData>>,
        jobs: &JobBoard,
    ) {
        let mut src = self.export_source.unwrap_or(if viewing.is_some() {
            ExportSource::Opened
        } else {
            ExportSource::Live
        });
        let before = (src, self.export_table);
        ui.label(RichText::new("Session").strong());
        ui.add_enabled_ui(live_log.is_some(), |ui| {
            ui.radio_value(&mut src, ExportSource::Live, "This run (live recording)");
        });
        ui.add_enabled_ui(viewing.is_some(), |ui| {
            ui.radio_value(&mut src, ExportSource::Opened, "The session on screen");
        });
        self.export_source = Some(src);
        ui.add_space(6.0);
        ui.label(RichText::new("Table").strong());
        ui.radio_value(
            &mut self.export_table,
            None,
            "All three (NAME-devices.csv, NAME-processes.csv, NAME-events.csv)",
        );
        for t in Table::ALL {
            ui.radio_value(
                &mut self.export_table,
                Some(t),
                format!("{} only", t.name()),
            );
        }
        self.shown_only_choice(ui);
        if before != (src, self.export_table) {
            // Another input: the last result was about the one before.
            self.message = None;
        }
        ui.add_space(8.0);
        self.export_action(ui, src, live_log, viewing, jobs);
        if let Some((m, err)) = &self.message {
            ui.add_space(6.0);
            ui.label(if *err {
                RichText::new(m).color(widgets::warn(ui))
            } else {
                RichText::new(m)
            });
        }
    }

    /// "Only the time shown in the graph", with that time, where the graph shows one.
    fn shown_only_choice(&mut self, ui: &mut Ui) {
        let Some((from, to)) = self.shown else {
            self.export_shown_only = false;
            return;
        };
        ui.add_space(6.0);
        ui.label(RichText::new("Time").strong());
        let words = format!(
            "Only the time shown in the graph: {} – {} ({})",
            crate::model::format::date_time(from),
            crate::model::format::clock(to),
            crate::model::format::duration(to - from)
        );
        ui.checkbox(&mut self.export_shown_only, words)
            .on_hover_text("Off: the whole session");
    }

    /// The Export window's lower part: overwrite or not, the progress, or Save as….
    fn export_action(
        &mut self,
        ui: &mut Ui,
        src: ExportSource,
        live_log: &Option<PathBuf>,
        viewing: &Option<Arc<SessionData>>,
        jobs: &JobBoard,
    ) {
        if let Some((path, input, files)) = self.overwrite.clone() {
            self.overwrite_question(ui, path, input, &files);
        } else if let Some(id) = self.exporting {
            let fraction = jobs.state(id).map_or(0.0, |j| j.progress.fraction());
            ui.horizontal(|ui| {
                ui.add(
                    egui::ProgressBar::new(fraction)
                        .show_percentage()
                        .desired_width(260.0),
                );
                if ui.button("Cancel").clicked() {
                    self.outbox.push(JobCommand::Cancel(id));
                }
            });
        } else {
            let input = match src {
                ExportSource::Live => live_log.clone().map(ExportInput::File),
                ExportSource::Opened => viewing.clone().map(ExportInput::Data),
            };
            self.save_as(ui, input);
            if live_log.is_none() && viewing.is_none() {
                ui.label(
                    RichText::new("Nothing to export: recording is off and no session is open.")
                        .weak(),
                );
            }
        }
    }

    /// Whether to overwrite the export's existing `files`: Overwrite exports `input` to
    /// `path` again, forced; Cancel drops it.
    fn overwrite_question(
        &mut self,
        ui: &mut Ui,
        path: PathBuf,
        input: ExportInput,
        files: &[PathBuf],
    ) {
        let question = if files.len() == 1 {
            "Overwrite this file?"
        } else {
            "Overwrite these files?"
        };
        // A group a screen reader names by its question, around the files and the choice.
        let group = egui::UiBuilder::new()
            .accessibility_role(egui::accesskit::Role::Group)
            .accessibility_label(question);
        ui.scope_builder(group, |ui| {
            ui.label(RichText::new(question).color(widgets::warn(ui)).strong());
            for f in files {
                ui.label(RichText::new(f.display().to_string()).monospace());
            }
            ui.horizontal(|ui| {
                if ui.button("Overwrite").clicked() {
                    self.overwrite = None;
                    self.spawn_export(input, path, true);
                }
                if ui.button("Cancel").clicked() {
                    self.overwrite = None;
                }
            });
        });
    }

    /// Save as… (while there is an `input` and no dialog is open): asks for the CSV file with
    /// the system dialog, the export waiting for its answer.
    fn save_as(&mut self, ui: &mut Ui, input: Option<ExportInput>) {
        let can = input.is_some() && self.saving.is_none();
        if ui.add_enabled(can, egui::Button::new("Save as…")).clicked() {
            self.pending_export = input;
            let name = format!(
                "vramwarden-{}.csv",
                chrono::Local::now().format("%Y%m%d-%H%M%S")
            );
            self.saving = Some(Task::spawn(
                "Choosing a file",
                super::task::repaint(ui.ctx()),
                move || {
                    run_dialog(|| {
                        rfd::FileDialog::new()
                            .set_title("Export to CSV")
                            .set_file_name(name)
                            .add_filter("CSV", &["csv"])
                            .save_file()
                            .map(|f| vec![f])
                    })
                },
            ));
        }
    }

    /// Exports without a dialog (tests, and the CLI-equivalent path).
    pub fn export_to(&mut self, input: ExportInput, table: Option<Table>, path: PathBuf) {
        self.pending_export = Some(input);
        self.export_table = table;
        self.start_export(path);
    }
}

/// The path field of the window that asks for a path: focused when the window opens, the
/// path offered selected (as in an address bar: typing replaces it rather than adding to it)
/// at first and on its first click.
fn path_field(ui: &mut Ui, entry: &mut PathEntry) -> egui::Response {
    let hint = match entry.purpose {
        PathPurpose::Open => "/path/to/session.vwlog",
        PathPurpose::Export => "/path/to/export.csv",
        PathPurpose::Import => "apps.csv gpu.csv (separated by spaces)",
    };
    let first = !entry.focused;
    let r = ui
        .horizontal(|ui| {
            let label = ui.label("Path");
            let mut out = egui::TextEdit::singleline(&mut entry.text)
                .hint_text(hint)
                .desired_width(420.0)
                .show(ui);
            let first_click = out.response.response.clicked() && !entry.clicked;
            entry.clicked |= first_click;
            if first || first_click || out.response.response.gained_focus() {
                // The path offered (the one typed last) is selected, as in an
                // address bar: typing replaces it rather than adding to it.
                let all = egui::text::CCursorRange::select_all_str(&entry.text);
                out.state.cursor.set_char_range(Some(all));
                out.state.store(ui.ctx(), out.response.response.id);
            }
            out.response.response.clone().labelled_by(label.id)
        })
        .inner;
    // Typing goes to the field at once, as in a file dialog.
    if first {
        r.request_focus();
        entry.focused = true;
    }
    r
}

/// The recorded sessions, one a row under a header (start, duration, GPUs, host, size,
/// Open); the session whose Open was clicked, if one was.
fn sessions_grid(
    ui: &mut Ui,
    list: &[SessionSummary],
    live_log: Option<&std::path::Path>,
) -> Option<PathBuf> {
    let mut to_open = None;
    egui::ScrollArea::vertical().show(ui, |ui| {
        egui::Grid::new("sessions")
            .num_columns(6)
            .striped(true)
            .spacing([14.0, 4.0])
            .show(ui, |ui| {
                for h in ["Started", "Duration", "GPUs", "Host", "Size", ""] {
                    ui.label(RichText::new(h).strong());
                }
                ui.end_row();
                for s in list {
                    // Two logs started the same second (two windows, or a window and
                    // an agent) read alike: the file names them apart.
                    let file = s
                        .path
                        .file_name()
                        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                    ui.monospace(format::date_time(s.started_ms()))
                        .on_hover_text(&file);
                    ui.monospace(format::duration(s.duration_ms()));
                    ui.label(gpu_names(s));
                    ui.label(s.header.as_ref().map_or("?".into(), |h| h.host.clone()));
                    ui.monospace(crate::model::format::file_size(s.size_bytes));
                    let is_live = live_log == Some(s.path.as_path()) || s.recording;
                    if ui
                        .button(if is_live { "Open (recording)" } else { "Open" })
                        .on_hover_text(&file)
                        .clicked()
                    {
                        to_open = Some(s.path.clone());
                    }
                    ui.end_row();
                }
            });
    });
    to_open
}

/// The names of a session's GPUs ("none"; "?" when its header is unread).
fn gpu_names(s: &SessionSummary) -> String {
    s.header.as_ref().map_or("?".into(), |h| {
        if h.devices.is_empty() {
            "none".to_string()
        } else {
            h.devices
                .iter()
                .map(|d| d.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        }
    })
}

pub(crate) use crate::link::jobs::ExportFail;
pub use crate::link::jobs::ExportInput;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_request_replaces_the_older_one_on_the_board() {
        let mut s = SessionsUi::default();
        s.open_path("a.vwlog".into());
        s.open_path("b.vwlog".into());
        let [JobCommand::Start(a, Job::OpenSession(pa)), JobCommand::Cancel(c), JobCommand::Forget(f), JobCommand::Start(b, Job::OpenSession(pb))] =
            s.outbox.as_slice()
        else {
            panic!("{:?}", s.outbox);
        };
        assert_eq!((c, f), (a, a), "the first is cancelled and forgotten");
        assert_ne!(a, b);
        assert_eq!(
            (pa.to_str(), pb.to_str()),
            (Some("a.vwlog"), Some("b.vwlog"))
        );
        assert_eq!(s.opening, Some(*b));
    }
}
