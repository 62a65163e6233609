//! The window: menus, status bar and the panes, drawn from one read of the shared monitor.

mod banners;
mod command;
mod confirm;
mod frame;
mod hosts;
mod keyboard;
mod menus;
mod panel_width;
mod panes;
mod windows;

use super::backend::Backend;
use super::graph::GraphCache;
use super::sessions::{SessionView, SessionsUi};
pub(crate) use super::ui_command::Help;
pub use super::ui_command::UiCommand;
pub(crate) use super::ui_state::apply_theme;
pub use super::ui_state::UiState;
use crate::engine::view::Monitor;
use crate::model::format::Units;
use crate::model::history::ProcSeriesKey;
use crate::model::now_ms;
use crate::model::UnixMs;

const SETTINGS_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::Comma);
const FILTER_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::F);
/// Quit: egui closes the window on it (`Options::quit_shortcuts`); the File menu shows it.
pub const QUIT_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::Q);
/// Sessions → Open file….
const OPEN_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::O);
const HELP_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::NONE, egui::Key::F1);

/// A shortcut as the menus show it, in the words of Help → Keyboard shortcuts: "Ctrl+,"
/// (egui spells it "Ctrl+Comma").
fn shortcut_words(ctx: &egui::Context, s: &egui::KeyboardShortcut) -> String {
    let words = ctx.format_shortcut(s);
    match words.strip_suffix("Comma") {
        Some(head) => format!("{head},"),
        None => words,
    }
}

/// The eframe application.
pub struct VramApp {
    backend: Backend,
    /// Zooms out while the window is under the size the panes need.
    fit_zoom: super::fit_zoom::FitZoom,
    /// The panels' colour of the last frame drawn, which the window is cleared to (its panels
    /// are not filled); a theme changed during that frame shows from the next one.
    panel_fill: Option<egui::Color32>,
    /// Persisted UI choices.
    pub state: UiState,
    /// GPU whose graph is shown.
    pub selected_gpu: u32,
    /// Process whose detail pane is open.
    pub selected: Option<ProcSeriesKey>,
    /// `selected` as of the last frame: a new selection brings its GPU's graph.
    last_selected: Option<ProcSeriesKey>,
    /// Process-table filter text.
    pub filter: String,
    /// The tabs under the graph.
    tabs: super::tabs::Tabs,
    graph: GraphCache,
    detail_graph: GraphCache,
    fixed_now: Option<UnixMs>,
    /// A recorded session shown instead of the live data.
    pub view: Option<SessionView>,
    /// Sessions browser, export window and their jobs.
    pub sessions: SessionsUi,
    pending_select: Option<(ProcSeriesKey, UnixMs)>,
    /// What the UI asked for this frame, carried out at its end.
    queue: Vec<UiCommand>,
    /// What the UI asked for in the last frame, as carried out.
    drained: Vec<UiCommand>,
    /// The Settings window.
    pub settings_ui: super::settings_window::SettingsUi,
    /// Replies to commands, shown as toasts.
    pub toasts: super::replies::Toasts,
    config_path: std::path::PathBuf,
    /// Why the settings file could not be used, shown as a banner until saved.
    pub config_error: Option<crate::engine::settings::ConfigError>,
    /// A manual action waiting for the user's confirmation.
    pub confirm: Option<Confirmation>,
    /// True while a recorded session is drawn (no actions are offered).
    replaying: bool,
    /// Attached to an agent that stopped answering: since when (its figures on screen are
    /// its last, drawn greyed).
    unreachable_since: Option<UnixMs>,
    /// A source switch waiting for the user's confirmation (true: the demo).
    switch_source: Option<bool>,
    /// File → Connect to host….
    pub connect: super::connect::ConnectUi,
    /// Whether this computer showed the demo before the window was attached to an agent.
    local_demo: bool,
    /// The job writing the settings.
    saving: Option<crate::link::jobs::JobId>,
    /// A host being opened (token read, SSH tunnel started) on a worker thread.
    connecting: Option<(
        super::connect::ConnectRequest,
        super::task::Task<Result<crate::link::open::OpenedHost, String>>,
    )>,
    /// Sessions → Sessions on the agent… is open; the last download error.
    agent_sessions: Option<Option<String>>,
    /// The Help window shown.
    help: Option<Help>,
    /// The manual actions sent, and their outcomes, per process (table row, detail pane).
    action_status: super::action_status::ActionStatus,
    /// Where the detail pane was drawn last (`None`: closed).
    detail_rect: Option<egui::Rect>,
    /// The GPU cards' column last drawn (tests: its width comes back after a small window).
    gpu_rect: Option<egui::Rect>,
    /// The widths the side panels had before a small window clamped them.
    kept_widths: [panel_width::KeptWidth; 2],
}

/// A manual action on a process waiting for the user's yes, with what its dialog says.
#[derive(Debug, Clone)]
pub struct Confirmation {
    /// The process, with its facts as the View has them.
    pub target: crate::act::rules::eval::Target,
    /// The action asked for.
    pub action: crate::act::rules::Action,
    /// For a parked process: the bytes in host memory and the seconds a resume takes at the
    /// resume rate in use.
    resume: Option<(Option<u64>, f64)>,
    /// The park rate its time is said at (the guard's measured one; 0: the default).
    park_gib_s: f64,
    /// What its PyTorch companion last said it could release (bytes), where it reports.
    releasable: Option<u64>,
}

/// Every keyboard shortcut of the window, for Help → Keyboard shortcuts.
pub(crate) const SHORTCUTS: &[(&str, &str)] = &[
    ("Ctrl+,", "Settings"),
    ("Ctrl+F", "Filter the process table"),
    ("Ctrl+O", "Open a session log"),
    (
        "Ctrl+1 / 2 / 3 / 4",
        "Processes, Leaks, Activity, Guard tab",
    ),
    (
        "Up / Down",
        "Select the previous / next process in the table",
    ),
    ("Delete", "Terminate the selected process (asks first)"),
    (
        "Esc",
        "Close the topmost window or popup, else the detail pane",
    ),
    ("+ / −", "Zoom the graph's time in / out"),
    ("Shift+Left / Right", "Pan the graph"),
    ("End", "Follow live again"),
    ("Tab / Enter", "Move the keyboard focus / press"),
    ("F1", "This list"),
    ("Ctrl+Q", "Quit"),
];

impl VramApp {
    /// The app for a real window, restoring persisted UI state.
    pub(crate) fn new(cc: &eframe::CreationContext<'_>, backend: Backend) -> Self {
        let state = cc
            .storage
            .and_then(|s| eframe::get_value::<UiState>(s, eframe::APP_KEY))
            .unwrap_or_default();
        // The theme of the settings file from the first frame (not only after a Save).
        apply_theme(&cc.egui_ctx, backend.settings.general.theme);
        Self::with_backend(backend, state)
    }

    /// The engine link(s) behind the window (tests read which host is shown and its history).
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Like [`VramApp::backend`], to ask the link's health.
    pub fn backend_mut(&mut self) -> &mut Backend {
        &mut self.backend
    }

    /// The app over `backend` with the given UI state (tests, benchmarks).
    pub fn with_backend(backend: Backend, state: UiState) -> Self {
        let typed = state.typed_paths.clone();
        Self {
            fit_zoom: super::fit_zoom::FitZoom::default(),
            panel_fill: None,
            backend,
            state,
            selected_gpu: 0,
            last_selected: None,
            switch_source: None,
            selected: None,
            filter: String::new(),
            tabs: super::tabs::Tabs::default(),
            graph: GraphCache::default(),
            detail_graph: GraphCache::default(),
            fixed_now: None,
            view: None,
            sessions: SessionsUi::with_typed_paths(typed),
            pending_select: None,
            queue: Vec::new(),
            drained: Vec::new(),
            settings_ui: super::settings_window::SettingsUi::default(),
            toasts: super::replies::Toasts::default(),
            config_path: crate::engine::settings::config_path(None),
            config_error: None,
            confirm: None,
            replaying: false,
            unreachable_since: None,
            connect: super::connect::ConnectUi::default(),
            local_demo: false,
            agent_sessions: None,
            saving: None,
            connecting: None,
            help: None,
            action_status: super::action_status::ActionStatus::default(),
            detail_rect: None,
            gpu_rect: None,
            kept_widths: Default::default(),
        }
    }

    /// Where the settings file is, and what was wrong with it at start.
    pub fn set_config(
        &mut self,
        path: std::path::PathBuf,
        error: Option<crate::engine::settings::ConfigError>,
    ) {
        self.config_path = path;
        self.config_error = error;
    }

    /// The settings in force.
    pub fn settings(&self) -> &crate::engine::settings::Settings {
        &self.backend.settings
    }

    /// Opens a session log in the background; the view switches to it when it is read.
    pub fn open_session(&mut self, path: std::path::PathBuf) {
        self.sessions.open_path(path);
        self.hand_over_jobs();
    }

    /// Hands the sessions UI's job requests to the backend's job board.
    fn hand_over_jobs(&mut self) {
        for c in self.sessions.outbox.drain(..) {
            self.backend.job(c);
        }
    }

    /// Shows `data` read-only (tests; the UI goes through [`VramApp::open_session`]).
    pub fn show_session(&mut self, data: crate::session::reader::SessionData) {
        self.view = Some(SessionView::new(data));
        self.selected = None;
        self.graph.free_range = None;
    }

    /// Freezes the app's clock (tests and benchmarks: no wall-clock dependence).
    pub fn with_fixed_now(mut self, now: UnixMs) -> Self {
        self.fixed_now = Some(now);
        self
    }

    /// Forgets the decimated graph lines, as new data does (benchmarks).
    pub fn invalidate_caches(&mut self) {
        self.graph.invalidate();
        self.detail_graph.invalidate();
    }

    /// Zooms or pans the GPU graph to `range` (`None`: follow live), as the wheel and a drag
    /// do (benchmarks).
    pub fn set_graph_range(&mut self, range: Option<(UnixMs, UnixMs)>) {
        self.graph.free_range = range;
    }

    /// The time range the GPU graph was zoomed or panned to (`None`: it follows live).
    pub fn graph_range(&self) -> Option<(UnixMs, UnixMs)> {
        self.graph.free_range
    }

    /// Where the detail pane's lifetime graph was drawn last (tests: it keeps a usable
    /// height at 1280 × 800).
    pub fn detail_plot_rect(&self) -> Option<egui::Rect> {
        self.detail_graph.plot_rect
    }

    /// Where the column of GPU cards was drawn last (tests: its width after a resize).
    pub fn gpu_panel_rect(&self) -> Option<egui::Rect> {
        self.gpu_rect
    }

    /// The time range (unix s) the detail pane's lifetime graph showed last (tests: the
    /// wheel over it scrolls the pane and leaves the range alone).
    pub fn detail_plot_x_range(&self) -> Option<(f64, f64)> {
        self.detail_graph.shown_x
    }

    /// Where the GPU graph, its newest moment and the detail pane were drawn last (tests: the
    /// pane never covers the graph, "now" is on screen).
    pub fn layout(&self) -> super::graph::DrawnLayout {
        super::graph::DrawnLayout {
            graph: self.graph.plot_rect,
            edge_x: self.graph.edge_x,
            detail_pane: self.detail_rect,
        }
    }

    /// The agent's host when the window is attached to one (its View's host name, else
    /// "the agent's host"); `None` for this computer.
    fn agent_host<'m>(&self, m: &'m Monitor) -> Option<&'m str> {
        self.backend.remote()?;
        Some(crate::front::gui::notices::agent_host(m))
    }

    fn now(&self) -> UnixMs {
        self.fixed_now.unwrap_or_else(now_ms)
    }
}

/// The target of a confirmation in the window's units (Auto: from its size, as the detail
/// pane shows it: "38.0 GiB", not "38912 MiB").
pub(crate) fn describe_target(target: &crate::act::rules::eval::Target, units: Units) -> String {
    match target {
        crate::act::rules::eval::Target::Process {
            key, used_bytes, ..
        } => {
            let used = used_bytes.unwrap_or(0);
            let user = match target.user() {
                "" => String::new(),
                u => format!(", user {u}"),
            };
            format!(
                "{} (PID {}{user}, GPU {}, {})",
                target.name(),
                key.0.pid,
                key.1,
                units.for_largest(used).bytes(used)
            )
        }
        crate::act::rules::eval::Target::Device(_) => target.describe(),
    }
}
