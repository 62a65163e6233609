//! The window: menus, status bar and the panes, drawn from one read of the shared monitor.

pub use super::ui_state::{apply_theme, BottomTab, UiState};
use egui::{Color32, RichText, Ui};

use super::graph::GraphCache;
use super::processes::TableState;
use super::sessions::{SessionAction, SessionView, SessionsUi};
use super::{overview, process_detail, processes, widgets, Backend};
use crate::engine::view::{Monitor, SourceStatus};
use crate::model::format::{self, Units};
use crate::model::history::ProcSeriesKey;
use crate::model::now_ms;
use crate::model::UnixMs;

/// The leak badges of the rows on screen, by row.
type Badges = std::collections::HashMap<crate::engine::view::LeakKey, super::leaks::LeakBadge>;

const SETTINGS_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::Comma);
const FILTER_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::F);
/// Quit: egui closes the window on it (`Options::quit_shortcuts`); the File menu shows it.
pub const QUIT_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, egui::Key::Q);
const HELP_SHORTCUT: egui::KeyboardShortcut =
    egui::KeyboardShortcut::new(egui::Modifiers::NONE, egui::Key::F1);

/// The eframe application.
pub struct VramApp {
    backend: Backend,
    /// Zooms out while the window is under the size the panes need.
    fit_zoom: super::fit_zoom::FitZoom,
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
    focus_filter: bool,
    graph: GraphCache,
    detail_graph: GraphCache,
    fixed_now: Option<UnixMs>,
    /// A recorded session shown instead of the live data.
    pub view: Option<SessionView>,
    /// Sessions browser, export window and their jobs.
    pub sessions: SessionsUi,
    /// The job reading past sessions' leaks for the Leaks tab.
    past_leaks: Option<crate::front::gui::jobs::JobId>,
    past: Option<std::sync::Arc<crate::engine::replay::PastEvents>>,
    /// Job requests of this frame (besides the sessions UI's), handed to the backend at its end.
    job_requests: Vec<crate::front::gui::jobs::JobCommand>,
    pending_select: Option<(ProcSeriesKey, UnixMs)>,
    leak_clicked: Option<super::leaks::LeakClick>,
    /// The Settings window.
    pub settings_ui: super::settings_window::SettingsUi,
    /// Replies to commands, shown as toasts.
    pub toasts: super::replies::Toasts,
    config_path: std::path::PathBuf,
    /// Why the settings file could not be used, shown as a banner until saved.
    pub config_error: Option<crate::engine::settings::ConfigError>,
    /// A manual action waiting for the user's confirmation.
    pub confirm: Option<(crate::act::rules::eval::Target, crate::act::rules::Action)>,
    /// For a resume being confirmed: the bytes in host memory and the seconds the move back
    /// takes at the resume rate in use.
    confirm_resume: Option<(Option<u64>, f64)>,
    /// The park rate the confirmation's time is said at (the guard's measured one; 0: default).
    confirm_park_gib_s: f64,
    manual_request: Option<(ProcSeriesKey, crate::act::rules::Action)>,
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
    /// A host chosen in the selector this frame (`None` inside: this computer).
    host_pick: Option<Option<usize>>,
    /// A saved host the user asked to forget this frame.
    host_forget: Option<super::connect::SavedHost>,
    /// Table groups folded shut.
    collapsed_groups: std::collections::HashSet<String>,
    /// The job writing the settings.
    saving: Option<crate::front::gui::jobs::JobId>,
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
}

/// What the Help window shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Help {
    /// The keyboard shortcuts.
    Shortcuts,
    /// The version and where the project lives.
    About,
}

/// Every keyboard shortcut of the window, for Help → Keyboard shortcuts.
pub const SHORTCUTS: &[(&str, &str)] = &[
    ("Ctrl+,", "Settings"),
    ("Ctrl+F", "Filter the process table"),
    ("Ctrl+1 / 2 / 3", "Processes, Leaks, Activity tab"),
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
    pub fn new(cc: &eframe::CreationContext<'_>, backend: Backend) -> Self {
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
            backend,
            state,
            selected_gpu: 0,
            last_selected: None,
            switch_source: None,
            selected: None,
            filter: String::new(),
            focus_filter: false,
            graph: GraphCache::default(),
            detail_graph: GraphCache::default(),
            fixed_now: None,
            view: None,
            sessions: SessionsUi::with_typed_paths(typed),
            past_leaks: None,
            past: None,
            job_requests: Vec::new(),
            pending_select: None,
            leak_clicked: None,
            settings_ui: super::settings_window::SettingsUi::default(),
            toasts: super::replies::Toasts::default(),
            config_path: crate::engine::settings::config_path(None),
            config_error: None,
            confirm: None,
            confirm_resume: None,
            confirm_park_gib_s: 0.0,
            manual_request: None,
            replaying: false,
            unreachable_since: None,
            connect: super::connect::ConnectUi::default(),
            host_pick: None,
            host_forget: None,
            local_demo: false,
            collapsed_groups: std::collections::HashSet::new(),
            agent_sessions: None,
            saving: None,
            connecting: None,
            help: None,
            action_status: super::action_status::ActionStatus::default(),
            detail_rect: None,
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

    /// Hands this frame's job requests to the backend's job board.
    fn hand_over_jobs(&mut self) {
        for c in self
            .sessions
            .outbox
            .drain(..)
            .chain(self.job_requests.drain(..))
        {
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
        self.backend.remote.as_ref()?;
        Some(
            m.source
                .as_ref()
                .map(|s| s.host.as_str())
                .filter(|h| !h.is_empty())
                .unwrap_or("the agent's host"),
        )
    }

    fn now(&self) -> UnixMs {
        self.fixed_now.unwrap_or_else(now_ms)
    }

    /// Draws one frame into `ui` (the root of the window).
    pub fn draw(&mut self, ui: &mut Ui) {
        let ctx = ui.ctx().clone();
        widgets::readable_text(&ctx);
        widgets::set_palette(&ctx, self.state.palette);
        let replies = self.backend.take_replies();
        self.action_status.answered(&replies, self.now());
        let at = ctx.input(|i| i.time);
        let st = &mut self.settings_ui;
        if let Some((i, c)) = st.test_request.take() {
            st.testing = self.backend.send(c).map(|id| (i, id));
        }
        if let Some(t) = super::replies::route(replies, &mut st.testing, &mut self.toasts, at) {
            st.tested = Some(t);
        }
        self.toasts.show(&ctx);
        let jobs = self.backend.jobs().clone();
        self.poll_background(&ctx, &jobs);
        self.keyboard(ui, &ctx);
        let health = self.backend.health();
        self.unreachable_since = match &health {
            crate::link::LinkHealth::Disconnected { since_ms, .. } => Some(*since_ms),
            _ => None,
        };
        // The engine's state as of its last write, from the link: a copy made at most once per
        // change, so the frame is drawn without holding the engine's lock.
        let Some(live) = self.backend.view() else {
            ui.label("internal error: the monitor lock is poisoned");
            return;
        };
        let live_log = live.recording.path.clone();
        let mut view = self.view.take();
        // The view is out of `self` while the panes draw: they ask this instead.
        self.replaying = view.is_some();
        let mut cmd = Commands::default();
        self.menu(ui, &live, view.is_some(), &mut cmd);
        self.banners(ui, &health, &mut cmd);
        if let Some(v) = view.as_mut() {
            session_bar(ui, v, &mut cmd);
        }
        egui::Panel::bottom("status").show(ui, |ui| {
            super::status_bar::jobs_strip(ui, &jobs, &mut self.job_requests);
            match view.as_ref() {
                Some(v) => super::status_bar::session(ui, v),
                None => super::status_bar::live(ui, &live, self.now(), &health),
            }
        });
        match view.as_mut() {
            Some(v) => self.session_panes(ui, v),
            None => self.live_panes(ui, &live, &health, &mut cmd),
        }
        self.settings_window(&ctx, &live, &mut cmd);
        self.confirm_modal(&ctx, &mut cmd);
        let viewing = view.as_ref().map(|v| v.data.clone());
        if let Some(a) = self.sessions.windows(&ctx, live_log, viewing, &jobs) {
            match a {
                SessionAction::Open(v) => view = Some(*v),
                SessionAction::BackToLive => cmd.back_to_live = true,
            }
        }
        self.help_window(&ctx);
        let connect_req = self.connect.window(&ctx);
        self.agent_sessions_window(&ctx);
        let interval_ms = live.interval_ms;
        drop(live);
        if let Some(req) = connect_req {
            self.attach(&ctx, &req);
        }
        self.finish_attach();
        self.apply_host_pick(&ctx, &mut cmd);
        if let Some(h) = self.host_forget.take() {
            self.forget_host(&h, &mut cmd);
        }
        if cmd.disconnect {
            if self.backend.disconnect() {
                self.after_host_switch();
            } else {
                self.restart_local(self.local_demo);
            }
        }
        self.view = view;
        self.apply_commands(&mut cmd);
        self.switch_source_modal(&ctx, &mut cmd);
        if cmd.start_demo {
            self.restart_local(true);
        } else if cmd.retry {
            // Back from an agent: this computer's source as it was before (the demo when no
            // driver was in use).
            self.restart_local(self.backend.remote.is_some() && self.local_demo);
        }
        // A session on screen: the live samples behind it wake nothing (a still session
        // draws no frame however it was opened).
        self.backend.set_covered(self.view.is_some());
        self.schedule_repaint(ui, interval_ms);
    }

    /// Takes what background jobs finished: past sessions' leaks, a session opened.
    fn poll_background(&mut self, ctx: &egui::Context, jobs: &super::jobs::JobBoard) {
        if let Some(r) = self.past_leaks.and_then(|id| self.backend.jobs().take(id)) {
            self.past_leaks = None;
            if let crate::front::gui::jobs::JobResult::PastLeaks(p) = r {
                self.past = Some(p);
            }
        }
        match self.sessions.poll(ctx, jobs) {
            Some(SessionAction::Open(v)) => {
                self.view = Some(*v);
                self.selected = None;
                self.graph.free_range = None;
                if let (Some((k, t)), Some(v)) = (self.pending_select.take(), self.view.as_mut()) {
                    v.t = t;
                    self.selected = Some(k);
                }
            }
            Some(SessionAction::BackToLive) => self.view = None,
            None => {}
        }
    }

    /// The window-wide keys: Ctrl+F, Ctrl+, (settings), Esc, Ctrl+1/2/3, Delete.
    fn keyboard(&mut self, ui: &mut Ui, ctx: &egui::Context) {
        if ui.input_mut(|i| i.consume_shortcut(&FILTER_SHORTCUT)) {
            self.focus_filter = true;
        }
        if ui.input_mut(|i| i.consume_shortcut(&SETTINGS_SHORTCUT)) {
            let s = self.backend.settings.clone();
            self.settings_ui.show(&s);
        }
        if ui.input_mut(|i| i.consume_shortcut(&HELP_SHORTCUT)) {
            self.help = Some(Help::Shortcuts);
        }
        // Esc closes the topmost thing: a window (settings, sessions, export, connect), else
        // the detail pane. Ctrl+1/2/3 switch the tabs under the graph.
        // (A popup or menu open takes the Esc for itself: the Send-signal list closes, the
        // pane under it stays.)
        if ui.input(|i| i.key_pressed(egui::Key::Escape))
            && self.confirm.is_none()
            && !egui::Popup::is_any_open(ctx)
        {
            self.close_topmost();
        }
        for (key, tab) in [
            (egui::Key::Num1, BottomTab::Processes),
            (egui::Key::Num2, BottomTab::Leaks),
            (egui::Key::Num3, BottomTab::Activity),
            (egui::Key::Num4, BottomTab::Guard),
        ] {
            let shortcut = egui::KeyboardShortcut::new(egui::Modifiers::COMMAND, key);
            if ui.input_mut(|i| i.consume_shortcut(&shortcut)) {
                self.state.bottom = tab;
            }
        }
        if ui.input(|i| i.key_pressed(egui::Key::Delete))
            && !ui.ctx().egui_wants_keyboard_input()
            && self.view.is_none()
        {
            if let Some(k) = self.selected {
                self.manual_request = Some((
                    k,
                    crate::act::rules::Action::Terminate {
                        grace_seconds: crate::act::rules::model::DEFAULT_GRACE_SECONDS,
                    },
                ));
            }
        }
    }

    /// Esc: closes the topmost window, else the detail pane.
    fn close_topmost(&mut self) {
        if self.help.is_some() {
            self.help = None;
        } else if self.settings_ui.open {
            self.settings_ui.open = false;
        } else if self.connect.open {
            self.connect.open = false;
        } else if self.sessions.export_open {
            self.sessions.export_open = false;
        } else if self.sessions.browser_open {
            self.sessions.browser_open = false;
        } else {
            self.selected = None;
        }
    }

    /// The banners under the menu: a broken settings file, a file that could not be opened,
    /// a lost agent.
    fn banners(&mut self, ui: &mut Ui, health: &crate::link::LinkHealth, cmd: &mut Commands) {
        if let Some(e) = &self.config_error {
            egui::Panel::top("config-banner").show(ui, |ui| {
                ui.horizontal_wrapped(|ui| {
                    ui.label(RichText::new(format!("⚠ The settings file is broken: {e}")).color(widgets::warn(ui)).strong());
                    ui.label("vramwarden runs on defaults and leaves the file as it is until you save from Settings.");
                });
            });
        }
        if let Some(e) = self.sessions.open_error.clone() {
            egui::Panel::top("open-error-banner").show(ui, |ui| {
                ui.horizontal_wrapped(|ui| {
                    ui.label(
                        RichText::new(format!("⚠ Could not open the file: {e}"))
                            .color(widgets::warn(ui))
                            .strong(),
                    );
                    if ui.button("Dismiss").clicked() {
                        self.sessions.open_error = None;
                    }
                });
            });
        }
        if let crate::link::LinkHealth::Disconnected {
            url,
            since_ms,
            error,
        } = health
        {
            let now = self.now();
            egui::Panel::top("link-banner").show(ui, |ui| {
                ui.horizontal_wrapped(|ui| {
                    ui.label(
                        RichText::new(format!(
                            "⚠ Disconnected from {url} — retrying ({})",
                            format::duration(now - since_ms)
                        ))
                        .color(widgets::warn(ui))
                        .strong(),
                    );
                    ui.label(RichText::new(error.as_str()).weak());
                    if ui.button("Back to this computer").clicked() {
                        // As File → Disconnect: this computer's history is kept.
                        cmd.disconnect = true;
                    }
                    if let Some(h) = self.backend.shown_host().cloned() {
                        if ui
                            .button("Forget this host")
                            .on_hover_text("Back to this computer, and remove the host from the list (a mistyped address)")
                            .clicked()
                        {
                            self.host_forget = Some(h);
                        }
                    }
                });
            });
        }
    }

    /// The panes over a recorded session at its cursor.
    fn session_panes(&mut self, ui: &mut Ui, v: &mut SessionView) {
        let t = v.t;
        let snap = v.snapshot().cloned();
        let rows: Vec<crate::engine::view::ProcessRow> = v.rows().to_vec();
        let refs: Vec<&crate::engine::view::ProcessRow> = rows.iter().collect();
        match snap {
            Some(snap) => self.panes(ui, &v.monitor, &snap, refs, t, t),
            None => {
                egui::CentralPanel::default().show(ui, |ui| {
                    ui.label("This session holds no samples.");
                });
            }
        }
    }

    /// The live panes, or what stands in for them before the first sample.
    fn live_panes(
        &mut self,
        ui: &mut Ui,
        live: &Monitor,
        health: &crate::link::LinkHealth,
        cmd: &mut Commands,
    ) {
        let now = self.now();
        match live.latest.as_ref().filter(|s| !s.devices.is_empty()) {
            Some(snap) => {
                let last = live.history.span().map_or(now, |(_, b)| b);
                let edge = last.max(now.min(last + 3 * live.interval_ms as i64));
                self.panes(ui, live, snap, live.table_rows(now), now, edge);
            }
            None => {
                egui::CentralPanel::default().show(ui, |ui| {
                    if self.backend.remote.is_some() {
                        if let Some(h) = self.connecting_state(ui, health, cmd) {
                            self.host_forget = Some(h);
                        }
                    } else {
                        empty_state(ui, live, &mut cmd.start_demo, &mut cmd.retry);
                        if matches!(live.status, SourceStatus::Failed(_)) {
                            ui.vertical_centered(|ui| {
                                ui.add_space(4.0);
                                if ui.button("Connect to a GPU server's agent…").clicked() {
                                    self.connect.show(None);
                                }
                            });
                        }
                    }
                });
            }
        }
    }

    /// "Connecting to …" while an agent has sent nothing yet.
    fn connecting_state(
        &self,
        ui: &mut Ui,
        health: &crate::link::LinkHealth,
        cmd: &mut Commands,
    ) -> Option<super::connect::SavedHost> {
        let mut forget = None;
        ui.vertical_centered(|ui| {
            ui.add_space(ui.available_height() * 0.25);
            ui.heading(format!(
                "Connecting to {}…",
                self.backend.remote.as_deref().unwrap_or("")
            ));
            if let crate::link::LinkHealth::Disconnected { error, .. } = health {
                ui.label(RichText::new(error.as_str()).color(widgets::warn(ui)));
            }
            if ui.button("Back to this computer").clicked() {
                // As File → Disconnect: history is kept.
                cmd.disconnect = true;
            }
            if let Some(h) = self.backend.shown_host() {
                if ui
                    .button("Forget this host")
                    .on_hover_text("Back to this computer, and remove the host from the list")
                    .clicked()
                {
                    forget = Some(h.clone());
                }
            }
        });
        forget
    }

    /// The Settings window, and its Save written on a worker thread.
    fn settings_window(&mut self, ctx: &egui::Context, live: &Monitor, cmd: &mut Commands) {
        let current = self.backend.settings.clone();
        if let Some(super::settings_window::SettingsAction::Save(s)) =
            self.settings_ui
                .window(ctx, &current, &self.config_path, live)
        {
            // Written (TOML, fsync, .bak) on a worker thread: a slow disk never holds a frame.
            if self.saving.is_none() {
                let path = self.config_path.clone();
                self.settings_ui.message = Some(("Saving…".into(), false));
                let id = crate::front::gui::jobs::JobId::next();
                self.job_requests
                    .push(crate::front::gui::jobs::JobCommand::Start(
                        id,
                        crate::front::gui::jobs::Job::SaveSettings { settings: s, path },
                    ));
                self.saving = Some(id);
            }
        }
        match self.saving.and_then(|id| self.backend.jobs().take(id)) {
            None => {}
            Some(crate::front::gui::jobs::JobResult::Saved(s, r)) => {
                self.saving = None;
                match r {
                    Ok(bak) => {
                        self.settings_ui.message =
                            Some((saved_message(&self.config_path, bak.as_deref()), false));
                        self.config_error = None;
                        self.state.units = s.general.units;
                        apply_theme(ctx, s.general.theme);
                        cmd.settings = Some(*s);
                    }
                    Err(e) => self.settings_ui.message = Some((e, true)),
                }
            }
            Some(other) => {
                self.saving = None;
                if let crate::front::gui::jobs::JobResult::Failed(e) = other {
                    self.settings_ui.message = Some((e, true));
                }
            }
        }
    }

    /// Asks before a manual action; on yes it goes to the engine.
    fn confirm_modal(&mut self, ctx: &egui::Context, cmd: &mut Commands) {
        let Some((target, action)) = self.confirm.clone() else {
            return;
        };
        let mut decided = None;
        let units = self.state.units;
        let resume = self
            .confirm_resume
            .filter(|_| action == crate::act::rules::Action::Resume);
        let (heading, verb) = confirm_wording(&target, &action, resume, self.confirm_park_gib_s);
        // A dialog a screen reader names by its question (AccessKit: a Dialog labelled so).
        let id = egui::Id::unique("confirm-action");
        let area = egui::Modal::default_area(id).accessible_name(heading.clone());
        egui::Modal::new(id).area(area).show(ctx, |ui| {
            // Narrower on a small screen (900 × 600 at 200 % is 450 points wide).
            ui.set_width(
                460f32
                    .min(ui.ctx().content_rect().width() - 48.0)
                    .max(200.0),
            );
            ui.heading(heading);
            ui.label(match resume {
                Some((bytes, _)) => describe_parked(&target, bytes),
                None => describe_target(&target, units),
            });
            ui.label(RichText::new(action.label()).weak());
            ui.add_space(8.0);
            ui.horizontal_wrapped(|ui| {
                // Red only for what cannot be undone (a signal); a park, a resume, a
                // release or a limit is an ordinary button.
                let button = if destructive(&action) {
                    widgets::danger_button(ui, &verb)
                } else {
                    egui::Button::new(RichText::new(verb.clone()).strong())
                };
                if ui.add(button).clicked() {
                    decided = Some(true);
                }
                let cancel = ui.button("Cancel");
                // The keyboard starts on the safe choice: Enter cancels, Tab reaches
                // the action.
                if ui.memory(|m| m.focused().is_none()) {
                    cancel.request_focus();
                }
                if cancel.clicked() || ui.input(|i| i.key_pressed(egui::Key::Escape)) {
                    decided = Some(false);
                }
            });
        });
        match decided {
            Some(true) => {
                // The engine is told which process only; it builds the target itself.
                if let crate::act::rules::eval::Target::Process { key, .. } = target {
                    cmd.engine = Some(crate::engine::EngineCommand::Manual { key, action });
                }
                self.confirm = None;
            }
            Some(false) => self.confirm = None,
            None => {}
        }
    }

    /// Removes `h` from the saved hosts; shown, the window goes back to this computer
    /// (history kept); attached in the background, its link stops.
    fn forget_host(&mut self, h: &super::connect::SavedHost, cmd: &mut Commands) {
        self.state.hosts.retain(|x| x != h);
        if self.backend.shown_host() == Some(h) {
            cmd.disconnect = true;
        } else {
            self.backend.drop_background(h);
        }
    }

    /// A host chosen in the selector: shown at once when attached in the background, else
    /// opened.
    fn apply_host_pick(&mut self, ctx: &egui::Context, cmd: &mut Commands) {
        let Some(pick) = self.host_pick.take() else {
            return;
        };
        let host = pick.and_then(|i| self.state.hosts.get(i).cloned());
        let showing = match &host {
            None => self.backend.remote.is_none(),
            Some(h) => self.backend.shown_host() == Some(h),
        };
        if showing {
            // Already on screen: nothing to do.
        } else if self.backend.switch_to(host.as_ref()) {
            // Attached in the background: shown at once, its history intact.
            self.after_host_switch();
        } else {
            match host {
                Some(h) if !h.token_file.is_empty() => {
                    self.attach(
                        ctx,
                        &super::connect::ConnectRequest {
                            host: h,
                            token: String::new(),
                        },
                    );
                }
                Some(h) => self.connect.show(Some(&h)),
                None => cmd.retry = true,
            }
        }
    }

    /// The frame's effects after drawing: back to live, engine commands, settings, a leak
    /// clicked in the Leaks tab.
    fn apply_commands(&mut self, cmd: &mut Commands) {
        if cmd.back_to_live {
            self.view = None;
            self.selected = None;
            self.graph.free_range = None;
        }
        if let Some(c) = cmd.engine.take() {
            let manual = match &c {
                crate::engine::EngineCommand::Manual { key, action } => {
                    Some((*key, action.clone()))
                }
                _ => None,
            };
            let id = self.backend.send(c);
            // The row and the detail pane wait for the reply under this id.
            if let (Some((key, action)), Some(id)) = (manual, id) {
                self.action_status.asked(key, &action, id, self.now());
            }
        }
        if let Some(s) = cmd.settings.take() {
            self.backend.apply_settings(s);
        }
        if let Some(c) = self.leak_clicked.take() {
            self.go_to_leak(c);
        }
    }

    /// Selects the process of a leak clicked in the Leaks tab, opening its session when it
    /// was recorded elsewhere. Attached to an agent, the session is the agent's: it is
    /// downloaded (as Sessions → Sessions on the agent… does) and opened once it is here.
    fn go_to_leak(&mut self, c: super::leaks::LeakClick) {
        let remote = self.backend.remote.is_some();
        let here = match (&c.session, &self.view) {
            (None, None) => true,
            (Some(p), Some(v)) if remote => {
                let name = v.data.path.as_deref().and_then(std::path::Path::file_name);
                name.is_some() && name == p.file_name()
            }
            (Some(p), Some(v)) => v.data.path.as_deref() == Some(p.as_path()),
            _ => false,
        };
        if here {
            self.selected = Some(c.key);
            if let Some(v) = self.view.as_mut() {
                v.t = c.at_ms;
            }
        } else if let (true, Some(p)) = (remote, &c.session) {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            self.pending_select = Some((c.key, c.at_ms));
            self.backend
                .download_agent_session(name.as_deref().unwrap_or_default());
        } else if let Some(p) = c.session {
            self.pending_select = Some((c.key, c.at_ms));
            self.sessions.open_path(p);
        } else {
            self.view = None;
            self.selected = Some(c.key);
        }
    }

    /// Asks before switching between the demo and the driver (history on screen is cleared).
    fn switch_source_modal(&mut self, ctx: &egui::Context, cmd: &mut Commands) {
        let Some(to_demo) = self.switch_source else {
            return;
        };
        let held = self
            .backend
            .view()
            .and_then(|m| m.history.span().map(|(a, b)| b - a))
            .unwrap_or(0);
        let heading = if to_demo {
            "Switch to the simulated GPUs?"
        } else {
            "Switch to the NVIDIA driver?"
        };
        let id = egui::Id::unique("switch-source");
        let area = egui::Modal::default_area(id).accessible_name(heading);
        egui::Modal::new(id).area(area).show(ctx, |ui| {
            ui.set_width(440f32.min(ui.ctx().content_rect().width() - 48.0).max(200.0));
            ui.heading(heading);
            ui.label(format!(
                "The {} of history on screen will be cleared (the session log keeps what was recorded).",
                crate::model::format::duration(held)
            ));
            ui.add_space(8.0);
            ui.horizontal(|ui| {
                if ui.button("Switch").clicked() {
                    if to_demo {
                        cmd.start_demo = true;
                    } else {
                        cmd.retry = true;
                    }
                    self.switch_source = None;
                }
                let cancel = ui.button("Cancel");
                // As the action's confirmation: the keyboard starts on the safe choice, Esc
                // cancels.
                if ui.memory(|m| m.focused().is_none()) {
                    cancel.request_focus();
                }
                if cancel.clicked() || ui.input(|i| i.key_pressed(egui::Key::Escape)) {
                    self.switch_source = None;
                }
            });
        });
    }

    /// Frames come from input and from new samples (the sampler asks for one per sample).
    /// Besides that: jobs in progress are polled, and a live window wakes after three
    /// intervals without a sample to show STALE. A recorded session draws nothing unasked.
    fn schedule_repaint(&mut self, ui: &mut Ui, interval_ms: u64) {
        self.hand_over_jobs();
        if self.sessions.busy() || self.backend.jobs().busy() || self.connecting.is_some() {
            ui.request_repaint_after(std::time::Duration::from_millis(100));
        } else if !self.replaying {
            let interval = interval_ms.max(100);
            ui.request_repaint_after(std::time::Duration::from_millis(3 * interval + 50));
        }
    }

    /// Opens the host of `req`: its token is read and an SSH tunnel started on a worker thread
    /// ([`crate::link::open::open_host`]); [`Self::finish_attach`] attaches the result.
    fn attach(&mut self, ctx: &egui::Context, req: &super::connect::ConnectRequest) {
        if self.connecting.is_some() {
            // One host at a time: the one being opened is attached first.
            return;
        }
        if let Err(e) = super::connect::validate(&req.host, &req.token) {
            self.connect.show(Some(&req.host));
            self.connect.error = Some(e);
            return;
        }
        let (h, typed) = (req.host.clone(), req.token.clone());
        let task = super::task::Task::spawn("connect", super::task::repaint(ctx), move || {
            crate::link::open::open_host(&h.url, &h.ssh, &h.token_file, &typed)
        });
        self.connecting = Some((req.clone(), task));
    }

    /// Attaches the host opened by [`Self::attach`] once its worker is done: on success the
    /// host joins the saved list (first), on failure the connect window shows why.
    fn finish_attach(&mut self) {
        let Some(opened) = self.connecting.as_ref().and_then(|(_, t)| t.take()) else {
            return;
        };
        let Some((req, _)) = self.connecting.take() else {
            return;
        };
        if self.backend.remote.is_none() {
            self.local_demo = self.backend.source.is_simulated();
        }
        match opened.and_then(|o| self.backend.attach_opened(&req.host, o)) {
            Ok(()) => {
                self.state.hosts.retain(|h| h != &req.host);
                self.state.hosts.insert(0, req.host.clone());
                self.state.hosts.truncate(20);
                self.connect.open = false;
                self.after_host_switch();
            }
            Err(e) => {
                self.connect.show(Some(&req.host));
                self.connect.error = Some(e);
            }
        }
    }

    /// Starts this computer's source over (the demo when `demo`), history cleared.
    fn restart_local(&mut self, demo: bool) {
        self.view = None;
        self.backend
            .restart(crate::source::SourceKind::from_demo_flag(demo));
        self.selected = None;
    }

    /// Another host is shown: its own graphs and table, nothing selected.
    fn after_host_switch(&mut self) {
        self.view = None;
        self.selected = None;
        self.selected_gpu = 0;
        self.graph.free_range = None;
        self.invalidate_caches();
    }

    /// Sessions → Sessions on the agent…: the agent's logs, each downloaded into this
    /// computer's sessions folder and opened read-only on request.
    fn agent_sessions_window(&mut self, ctx: &egui::Context) {
        for (name, got) in self.backend.take_agent_downloads() {
            match got {
                Ok(path) => {
                    self.sessions.open_path(path);
                    self.agent_sessions = None;
                }
                Err(e) => self.agent_sessions = Some(Some(format!("{name}: {e}"))),
            }
        }
        let Some(error) = self.agent_sessions.clone() else {
            return;
        };
        let Some(files) = self.backend.agent_files() else {
            self.agent_sessions = None;
            return;
        };
        let mut open = true;
        let mut fetch = None;
        egui::Window::new("Sessions on the agent")
            .open(&mut open)
            .collapsible(false)
            .default_pos(egui::pos2(240.0, 90.0))
            .show(ctx, |ui| {
                ui.label(format!(
                    "Session logs recorded by {}. Opening one downloads it into this computer's sessions folder (from-agents/).",
                    self.backend.remote.as_deref().unwrap_or("the agent")
                ));
                match &files.list {
                    None => {
                        ui.label("Asking the agent…");
                    }
                    Some(Err(e)) => {
                        ui.label(RichText::new(e.as_str()).color(widgets::warn(ui)));
                    }
                    Some(Ok(list)) if list.is_empty() => {
                        ui.label("The agent has recorded no sessions (is it started with --no-record?).");
                    }
                    Some(Ok(list)) => {
                        egui::ScrollArea::vertical().max_height(360.0).show(ui, |ui| {
                            egui::Grid::new("agent-sessions")
                                .num_columns(4)
                                .striped(true)
                                .spacing([12.0, 4.0])
                                .show(ui, |ui| {
                                    for s in list {
                                        ui.label(RichText::new(&s.name).monospace());
                                        ui.label(s.started_ms.map_or("—".into(), format::date_time));
                                        ui.label(format!(
                                            "{} · {}",
                                            s.duration_ms.map_or("—".into(), format::duration),
                                            format::file_size(s.size_bytes)
                                        ));
                                        let busy = files.downloading.as_deref() == Some(s.name.as_str());
                                        if busy {
                                            ui.spinner();
                                        } else if ui
                                            .add_enabled(files.downloading.is_none(), egui::Button::new("Open"))
                                            .clicked()
                                        {
                                            fetch = Some(s.name.clone());
                                        }
                                        ui.end_row();
                                    }
                                });
                        });
                    }
                }
                if let Some(e) = &error {
                    ui.label(RichText::new(e.as_str()).color(widgets::warn(ui)));
                }
                if ui.button("Refresh").clicked() {
                    self.backend.list_agent_sessions();
                }
            });
        if let Some(name) = fetch {
            self.backend.download_agent_session(&name);
        }
        if !open {
            self.agent_sessions = None;
        } else if files.downloading.is_some() || files.list.is_none() {
            ctx.request_repaint_after(std::time::Duration::from_millis(200));
        }
    }

    /// Help → Keyboard shortcuts / About.
    fn help_window(&mut self, ctx: &egui::Context) {
        let Some(which) = self.help else {
            return;
        };
        let mut open = true;
        let title = match which {
            Help::Shortcuts => "Keyboard shortcuts",
            Help::About => "About vramwarden",
        };
        egui::Window::new(title)
            .open(&mut open)
            .collapsible(false)
            .resizable(false)
            .show(ctx, |ui| match which {
                Help::Shortcuts => {
                    egui::Grid::new("shortcuts")
                        .num_columns(2)
                        .spacing([16.0, 4.0])
                        .striped(true)
                        .show(ui, |ui| {
                            for (keys, what) in SHORTCUTS {
                                ui.label(RichText::new(*keys).monospace().strong());
                                ui.label(*what);
                                ui.end_row();
                            }
                        });
                }
                Help::About => {
                    ui.heading(format!("vramwarden {}", env!("CARGO_PKG_VERSION")));
                    ui.label("Watches and manages NVIDIA GPU memory: who holds it, what leaks, what to do about it.");
                    ui.label(format!("Licence: {}", env!("CARGO_PKG_LICENSE")));
                    ui.hyperlink(env!("CARGO_PKG_REPOSITORY"));
                    ui.label(format!(
                        "Built for {} ({} build)",
                        std::env::consts::ARCH,
                        if cfg!(debug_assertions) { "debug" } else { "release" }
                    ));
                    ui.label(format!("Settings file: {}", self.config_path.display()));
                    ui.label(format!(
                        "Session logs: {}",
                        crate::session::default_dir().display()
                    ));
                }
            });
        if !open {
            self.help = None;
        }
    }

    /// "Host: …" above the GPU cards: this computer or a saved agent.
    fn host_selector(&mut self, ui: &mut Ui) {
        let current = self
            .backend
            .remote
            .clone()
            .unwrap_or_else(|| "This computer".into());
        ui.horizontal(|ui| {
            let label = ui.label("Host");
            egui::ComboBox::from_id_salt("host-selector")
                .selected_text(current.trim_start_matches("http://"))
                .width(ui.available_width() - 8.0)
                .show_ui(ui, |ui| {
                    // Hosts attached in the background go on sampling: "· live".
                    let live = self.backend.live_hosts();
                    let mark = |h: Option<&super::connect::SavedHost>, label: String| {
                        if live.iter().any(|l| l.as_ref() == h) {
                            format!("{label} · live")
                        } else {
                            label
                        }
                    };
                    if ui
                        .selectable_label(
                            self.backend.remote.is_none(),
                            mark(None, "This computer".into()),
                        )
                        .clicked()
                    {
                        self.host_pick = Some(None);
                    }
                    let shown = self.backend.shown_host().cloned();
                    for (i, h) in self.state.hosts.iter().enumerate() {
                        ui.horizontal(|ui| {
                            if ui
                                .small_button("✖")
                                .on_hover_text("Forget this host (remove it from the list)")
                                .clicked()
                            {
                                self.host_forget = Some(h.clone());
                            }
                            if ui
                                .selectable_label(
                                    shown.as_ref() == Some(h),
                                    mark(Some(h), h.label()),
                                )
                                .clicked()
                            {
                                self.host_pick = Some(Some(i));
                            }
                        });
                    }
                    ui.separator();
                    if ui.selectable_label(false, "Connect to host…").clicked() {
                        self.connect.show(None);
                    }
                })
                .response
                .labelled_by(label.id);
        });
        ui.add_space(4.0);
    }

    fn menu(&mut self, ui: &mut Ui, live: &Monitor, viewing: bool, cmd: &mut Commands) {
        egui::Panel::top("menu").show(ui, |ui| {
            egui::MenuBar::new().ui(ui, |ui| {
                ui.menu_button("File", |ui| self.file_menu(ui, cmd));
                ui.menu_button("Sessions", |ui| self.sessions_menu(ui, live, viewing, cmd));
                ui.menu_button("View", |ui| self.view_menu(ui));
                ui.menu_button("Help", |ui| self.help_menu(ui));
                ui.menu_button("Source", |ui| self.source_menu(ui, live, cmd));
                ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                    self.menu_right(ui, live, viewing);
                });
            });
        });
    }

    /// File: Settings, Connect, Disconnect, Quit (Export is in Sessions, with the logs it
    /// reads).
    fn file_menu(&mut self, ui: &mut Ui, cmd: &mut Commands) {
        if ui
            .add(
                egui::Button::new("Settings…")
                    .shortcut_text(ui.ctx().format_shortcut(&SETTINGS_SHORTCUT)),
            )
            .clicked()
        {
            let s = self.backend.settings.clone();
            self.settings_ui.show(&s);
            ui.close();
        }
        ui.separator();
        if ui.button("Connect to host…").clicked() {
            self.connect.show(None);
            ui.close();
        }
        if self.backend.remote.is_some()
            && ui.button("Disconnect (back to this computer)").clicked()
        {
            cmd.disconnect = true;
            ui.close();
        }
        ui.separator();
        if ui
            .add(egui::Button::new("Quit").shortcut_text(ui.ctx().format_shortcut(&QUIT_SHORTCUT)))
            .clicked()
        {
            ui.send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    /// Sessions: the agent's, browse, open, import, export, back to live, recording.
    fn sessions_menu(&mut self, ui: &mut Ui, live: &Monitor, viewing: bool, cmd: &mut Commands) {
        if self.backend.remote.is_some() && ui.button("Sessions on the agent…").clicked() {
            self.backend.list_agent_sessions();
            self.agent_sessions = Some(None);
            ui.close();
        }
        if ui.button("Browse sessions…").clicked() {
            self.sessions.show_browser();
            ui.close();
        }
        if ui.button("Open file…").clicked() {
            self.sessions.pick_file(ui.ctx());
            ui.close();
        }
        if ui.button("Import nvidia-smi log…").clicked() {
            self.sessions.import_nvidia_smi(ui.ctx());
            ui.close();
        }
        if ui.button("Export to CSV…").clicked() {
            self.sessions.export_open = true;
            ui.close();
        }
        ui.separator();
        if viewing && ui.button("Back to live").clicked() {
            cmd.back_to_live = true;
            ui.close();
        }
        let rec = &live.recording;
        if rec.path.is_some() {
            if rec.active {
                if ui.button("Pause recording").clicked() {
                    cmd.engine = Some(crate::engine::EngineCommand::PauseRecording);
                    ui.close();
                }
            } else if ui.button("Resume recording").clicked() {
                cmd.engine = Some(crate::engine::EngineCommand::ResumeRecording);
                ui.close();
            }
        }
    }

    /// View: units, stacking, process colours.
    fn view_menu(&mut self, ui: &mut Ui) {
        ui.label("Units");
        for u in Units::ALL {
            ui.radio_value(&mut self.state.units, u, u.label());
        }
        ui.separator();
        ui.checkbox(&mut self.state.stacked, "Stack graph by process");
        ui.separator();
        ui.label("Process colours");
        for p in widgets::Palette::ALL {
            ui.radio_value(&mut self.state.palette, p, p.label());
        }
    }

    /// Help: keyboard shortcuts, About.
    fn help_menu(&mut self, ui: &mut Ui) {
        if ui
            .add(
                egui::Button::new("Keyboard shortcuts")
                    .shortcut_text(ui.ctx().format_shortcut(&HELP_SHORTCUT)),
            )
            .clicked()
        {
            self.help = Some(Help::Shortcuts);
            ui.close();
        }
        if ui.button("About vramwarden").clicked() {
            self.help = Some(Help::About);
            ui.close();
        }
    }

    /// Source: the demo or the driver (asks before clearing history).
    fn source_menu(&mut self, ui: &mut Ui, live: &Monitor, cmd: &mut Commands) {
        let demo = self.backend.source.is_simulated();
        let running = live.status == SourceStatus::Running;
        for (is_demo, label) in [
            (true, "Simulated GPUs (demo)"),
            (false, "NVIDIA driver (NVML)"),
        ] {
            let active = demo == is_demo;
            // The active source is checked; choosing it again keeps it running
            // (a failed driver is retried).
            if ui.radio(active, label).clicked() {
                if active && running {
                    // Nothing to do.
                } else if running && !live.history.is_empty() {
                    self.switch_source = Some(is_demo);
                } else if is_demo {
                    cmd.start_demo = true;
                } else {
                    cmd.retry = true;
                }
                ui.close();
            }
        }
    }

    /// The menu bar's right end: units, what is shown (session, demo: this computer's or an
    /// agent's), recording.
    fn menu_right(&mut self, ui: &mut Ui, live: &Monitor, viewing: bool) {
        for u in Units::ALL.iter().rev() {
            ui.selectable_value(&mut self.state.units, *u, u.label());
        }
        ui.label("Units:");
        if viewing {
            ui.label(
                RichText::new("SESSION · read-only")
                    .color(if ui.visuals().dark_mode {
                        Color32::from_rgb(120, 190, 255)
                    } else {
                        Color32::from_rgb(20, 90, 170)
                    })
                    .strong(),
            );
        } else if shows_simulated(live, self.backend.source) {
            ui.label(
                RichText::new("DEMO · simulated GPUs")
                    .color(widgets::forecast_color(ui.visuals().dark_mode))
                    .strong(),
            );
        }
        let rec = &live.recording;
        if !viewing {
            if rec.active {
                let to = rec
                    .path
                    .as_ref()
                    .map_or(String::new(), |p| p.display().to_string());
                // In a window attached to an agent, the recording is the agent's, on its disk.
                let whose = match self.agent_host(live) {
                    Some(host) => format!("The agent on {host} records to {to} (on that host)"),
                    None => format!("Recording to {to}"),
                };
                match self.unreachable_since {
                    // Not known to record now: the dot of its last answer, greyed.
                    Some(since) => ui
                        .label(RichText::new("● REC").monospace().weak())
                        .on_hover_text(format!(
                            "{whose} (as of its last answer: agent unreachable since {})",
                            format::clock(since)
                        )),
                    None => ui
                        .label(RichText::new("● REC").monospace().color(widgets::warn(ui)))
                        .on_hover_text(whose),
                };
            } else if rec.path.is_some() {
                let paused = match self.agent_host(live) {
                    Some(host) => format!("⏸ {host}: recording paused"),
                    None => "⏸ recording paused".into(),
                };
                ui.label(RichText::new(paused).weak());
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn panes(
        &mut self,
        ui: &mut Ui,
        monitor: &Monitor,
        snap: &crate::model::Snapshot,
        rows: Vec<&crate::engine::view::ProcessRow>,
        now: UnixMs,
        edge: UnixMs,
    ) {
        self.sync_selection(snap.devices.len() as u32);
        // Side panels in proportion to the window, so the graph keeps room at 900 × 600 or
        // at 200 % as at 1920 × 1080.
        let full = ui.available_width();
        self.gpu_panel(ui, monitor, snap, full);
        let badges = super::leaks::badges(monitor, snap);
        self.detail_panel(ui, monitor, &rows, &badges, now, full);
        egui::CentralPanel::default().show(ui, |ui| {
            let h = (ui.available_height() * 0.5).max(220.0);
            ui.allocate_ui(egui::vec2(ui.available_width(), h), |ui| {
                self.graph.in_session = self.replaying;
                super::graph::device_graph(
                    ui,
                    monitor,
                    snap,
                    self.selected_gpu,
                    &mut self.state,
                    &mut self.graph,
                    edge,
                    self.selected.filter(|k| k.1 == self.selected_gpu),
                );
            });
            ui.separator();
            self.tab_bar(ui, monitor, now);
            match self.state.bottom {
                BottomTab::Processes => self.processes_tab(ui, monitor, snap, &rows, &badges, now),
                BottomTab::Leaks => self.leaks_tab(ui, monitor, now),
                BottomTab::Activity => activity_pane(ui, monitor),
                BottomTab::Guard => super::guard_pane::show(ui, monitor, self.selected_gpu),
            }
        });
        self.confirm_request(monitor, &rows);
    }

    /// A new selection brings its GPU's graph; a GPU index past the last falls back to 0.
    fn sync_selection(&mut self, n_devices: u32) {
        if self.selected != self.last_selected {
            if let Some(k) = self.selected {
                self.selected_gpu = k.1;
            }
            self.last_selected = self.selected;
        }
        if self.selected_gpu >= n_devices {
            self.selected_gpu = 0;
        }
    }

    /// The left panel: the host selector, forecast banners and the GPU cards.
    fn gpu_panel(
        &mut self,
        ui: &mut Ui,
        monitor: &Monitor,
        snap: &crate::model::Snapshot,
        full: f32,
    ) {
        egui::Panel::left("gpus")
            .resizable(true)
            .default_size((full * 0.24).clamp(210.0, 340.0))
            .min_size(200.0)
            .max_size((full * 0.3).max(200.0))
            .show(ui, |ui| {
                if !self.state.hosts.is_empty() || self.backend.remote.is_some() {
                    self.host_selector(ui);
                }
                egui::ScrollArea::vertical().show(ui, |ui| {
                    // A lost agent's last figures stay, greyed, under the time it was lost.
                    if let Some(since) = self.unreachable_since.filter(|_| !self.replaying) {
                        unreachable_note(ui, since);
                        ui.multiply_opacity(UNREACHABLE_OPACITY);
                    }
                    if let Some(gpu) = overview::forecast_banners(ui, &monitor.oom_alerts) {
                        // The GPU's graph, with the process growing fastest selected.
                        self.selected_gpu = gpu;
                        if let Some(k) = monitor.fastest_grower(gpu) {
                            self.selected = Some(k);
                            self.last_selected = self.selected;
                        }
                    }
                    overview::cards(ui, snap, self.state.units, &mut self.selected_gpu);
                });
            });
    }

    /// The right panel: the selected process's details and actions.
    fn detail_panel(
        &mut self,
        ui: &mut Ui,
        monitor: &Monitor,
        rows: &[&crate::engine::view::ProcessRow],
        badges: &Badges,
        now: UnixMs,
        full: f32,
    ) {
        let selected_row = self.selected.and_then(|k| {
            rows.iter()
                .copied()
                .find(|r| r.series_key() == k)
                .or_else(|| monitor.row(&k))
        });
        if self.selected.is_some() && selected_row.is_none() {
            self.selected = None;
        }
        self.detail_rect = None;
        let Some(row) = selected_row else {
            return;
        };
        let mut open = true;
        let mut request = None;
        let shown = egui::Panel::right("detail")
            .resizable(true)
            .default_size((full * 0.32).clamp(260.0, 420.0))
            .min_size(240.0)
            .max_size((full * 0.45).max(240.0))
            .show(ui, |ui| {
                let badge = badges
                    .get(&crate::engine::view::LeakKey::Process(row.series_key()))
                    .copied();
                // Scrolls when it does not fit (900 × 600, 200 %, a leak box and a
                // PyTorch section together).
                egui::ScrollArea::vertical()
                    .id_salt("detail-scroll")
                    .auto_shrink([false, false])
                    .show(ui, |ui| {
                        let result = (!self.replaying)
                            .then(|| self.action_status.state(row.series_key(), now))
                            .flatten();
                        let input = process_detail::PaneInputs {
                            units: self.state.units,
                            now,
                            leak: badge,
                            result,
                            host: self.agent_host(monitor),
                            // A recorded session offers no actions.
                            request: (!self.replaying).then_some(&mut request),
                        };
                        open =
                            process_detail::pane(ui, monitor, row, &mut self.detail_graph, input);
                    });
            });
        self.detail_rect = Some(shown.response.rect);
        if !open {
            self.selected = None;
        }
        if let Some(a) = request.filter(|_| !self.replaying) {
            self.manual_request = Some((row.series_key(), a));
        }
    }

    /// Processes · Leaks · Activity, with their counts; the leaks ongoing at `now` (a
    /// session: its slider).
    fn tab_bar(&mut self, ui: &mut Ui, monitor: &Monitor, now: UnixMs) {
        let n_leaks = monitor.leaks.iter().filter(|l| l.active_at(now)).count();
        ui.horizontal(|ui| {
            ui.selectable_value(
                &mut self.state.bottom,
                BottomTab::Processes,
                RichText::new("Processes").strong(),
            )
            .on_hover_text("Ctrl+1");
            let leaks_label = if n_leaks > 0 {
                format!("Leaks ({n_leaks} ongoing)")
            } else {
                "Leaks".to_string()
            };
            let leaks_text = if n_leaks > 0 {
                RichText::new(leaks_label)
                    .strong()
                    .color(super::leaks::leak_color(ui.visuals().dark_mode))
            } else {
                RichText::new(leaks_label).strong()
            };
            ui.selectable_value(&mut self.state.bottom, BottomTab::Leaks, leaks_text)
                .on_hover_text("Ctrl+2");
            let n_act = monitor.activity.len();
            ui.selectable_value(
                &mut self.state.bottom,
                BottomTab::Activity,
                RichText::new(if n_act > 0 {
                    format!("Activity ({n_act})")
                } else {
                    "Activity".into()
                })
                .strong(),
            )
            .on_hover_text("Ctrl+3");
            ui.selectable_value(
                &mut self.state.bottom,
                BottomTab::Guard,
                RichText::new(super::guard_pane::tab_label(monitor)).strong(),
            )
            .on_hover_text("Ctrl+4: the OOM guard on each GPU");
        });
    }

    /// The process table.
    fn processes_tab(
        &mut self,
        ui: &mut Ui,
        monitor: &Monitor,
        snap: &crate::model::Snapshot,
        rows: &[&crate::engine::view::ProcessRow],
        badges: &Badges,
        now: UnixMs,
    ) {
        self.action_status.prune(now);
        let actions = if self.replaying {
            std::collections::HashMap::new()
        } else {
            self.action_status.states(now)
        };
        let host = self.agent_host(monitor);
        let mut table = TableState {
            units: self.state.units,
            sort: &mut self.state.sort,
            desc: &mut self.state.sort_desc,
            filter: &mut self.filter,
            focus_filter: &mut self.focus_filter,
            selected: &mut self.selected,
            leaks: badges,
            orphans: &monitor.orphans,
            host,
            request: (!self.replaying).then_some(&mut self.manual_request),
            stale_gpus: snap
                .devices
                .iter()
                .filter(|d| d.process_list_error.is_some())
                .map(|d| d.index)
                .collect(),
            hidden: &mut self.state.hidden_columns,
            window_open: self.settings_ui.open
                || self.connect.open
                || self.sessions.export_open
                || self.sessions.browser_open,
            group_by: &mut self.state.group_by,
            collapsed: &mut self.collapsed_groups,
            actions: &actions,
            recorded: self.replaying,
        };
        processes::table(ui, rows.to_vec(), &mut table, now);
    }

    /// The Leaks tab: this source's episodes and past sessions' (read by a job), newest
    /// first.
    fn leaks_tab(&mut self, ui: &mut Ui, monitor: &Monitor, now: UnixMs) {
        // A window attached to an agent shows the agent's past leaks, not this computer's.
        let agent_past = self.backend.agent_past();
        if agent_past.is_none() && self.past.is_none() && self.past_leaks.is_none() {
            let dir = crate::session::default_dir();
            let skip = monitor.recording.path.clone();
            let id = crate::front::gui::jobs::JobId::next();
            self.job_requests
                .push(crate::front::gui::jobs::JobCommand::Start(
                    id,
                    crate::front::gui::jobs::Job::PastLeaks { dir, skip },
                ));
            self.past_leaks = Some(id);
        }
        let mut all: Vec<&crate::engine::view::LeakRecord> = monitor.leaks.iter().collect();
        let own: std::collections::HashSet<_> = monitor
            .leaks
            .iter()
            .filter_map(|l| l.session.clone())
            .collect();
        let mut ooms: Vec<&crate::engine::view::OomRecord> = monitor.ooms.iter().collect();
        let past = agent_past.clone().unwrap_or_else(|| self.past.clone());
        let loading = agent_past
            .as_ref()
            .map_or(self.past_leaks.is_some(), Option::is_none);
        if let Some(p) = &past {
            all.extend(
                p.leaks
                    .iter()
                    .filter(|l| l.session.as_ref().is_none_or(|s| !own.contains(s))),
            );
            ooms.extend(
                p.ooms
                    .iter()
                    .filter(|o| o.session.as_ref().is_none_or(|s| !own.contains(s))),
            );
        }
        all.sort_by_key(|l| std::cmp::Reverse(l.flagged_ms));
        ooms.sort_by_key(|o| std::cmp::Reverse(o.at_ms));
        if let Some(c) = super::leaks::pane(ui, &all, &ooms, self.state.units, now, loading) {
            self.leak_clicked = Some(c);
        }
    }

    /// A manual action asked for (detail pane, context menu, Delete): confirm first.
    fn confirm_request(&mut self, monitor: &Monitor, rows: &[&crate::engine::view::ProcessRow]) {
        let Some((key, action)) = self.manual_request.take().filter(|_| !self.replaying) else {
            return;
        };
        let Some(r) = rows
            .iter()
            .copied()
            .find(|r| r.series_key() == key)
            .or_else(|| monitor.row(&key))
        else {
            return;
        };
        let live = monitor.latest.as_ref().and_then(|s| {
            s.processes
                .iter()
                .find(|p| p.key() == key.0 && p.device_index == key.1)
        });
        // The live facts where the process is listed; else the row's, with the
        // owner's uid unknown.
        let info = live
            .and_then(|p| p.info.as_ref())
            .map(|i| crate::engine::view::ProcessRow::facts(Some(i)))
            .unwrap_or_else(|| {
                std::sync::Arc::new(crate::model::ProcInfo {
                    uid: u32::MAX,
                    ..(*r.info).clone()
                })
            });
        let guard = monitor.guard.iter().find(|g| g.device_index == key.1);
        self.confirm_park_gib_s = guard.map_or(0.0, |g| g.park_gib_s);
        self.confirm_resume = r.parked.map(|p| {
            let rate = guard.map_or(0.0, |g| g.resume_gib_s);
            (
                p.bytes,
                crate::act::guard::timing::resume_estimate_s(p.bytes.unwrap_or(0), rate),
            )
        });
        self.confirm = Some((
            crate::act::rules::eval::Target::process(
                key,
                Some(info),
                r.used_bytes,
                live.map_or(crate::model::Origin::Recorded, |p| p.origin),
            ),
            action,
        ));
    }
}

/// The target of a confirmation in the window's units (Auto: from its size, as the detail
/// pane shows it: "38.0 GiB", not "38912 MiB").
pub fn describe_target(target: &crate::act::rules::eval::Target, units: Units) -> String {
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

/// The opacity of a lost agent's last figures (its cards and forecast banners).
const UNREACHABLE_OPACITY: f32 = 0.45;

/// Above a lost agent's cards: what happened, on a line of its own ("⚠ Agent unreachable"),
/// then since when and what the greyed figures are, in a box as wide as the cards (one long
/// line wrapped in the middle of a phrase in the narrow panel).
fn unreachable_note(ui: &mut Ui, since: UnixMs) {
    let warn = widgets::warn(ui);
    egui::Frame::new()
        .fill(warn.gamma_multiply(0.12))
        .stroke(egui::Stroke::new(1.0, warn))
        .inner_margin(6.0)
        .corner_radius(4.0)
        .show(ui, |ui| {
            ui.set_width(ui.available_width());
            ui.label(RichText::new("⚠ Agent unreachable").color(warn).strong());
            ui.label(format!("since {}", format::clock(since)));
            ui.label("Its last figures, greyed");
        });
    ui.add_space(4.0);
}

/// "Saved to PATH", with "(the previous version kept as NAME.bak)" only when a backup was
/// made (a first save has nothing to keep).
fn saved_message(path: &std::path::Path, bak: Option<&std::path::Path>) -> String {
    match bak.and_then(|b| b.file_name()) {
        Some(b) => format!(
            "Saved to {} (the previous version kept as {})",
            path.display(),
            b.to_string_lossy()
        ),
        None => format!("Saved to {}", path.display()),
    }
}

/// A parked process for its resume's confirmation: "python3 (PID 7, user dave, GPU 0,
/// parked: 24.0 GiB in host memory)".
fn describe_parked(target: &crate::act::rules::eval::Target, bytes: Option<u64>) -> String {
    let crate::act::rules::eval::Target::Process { key, .. } = target else {
        return target.describe();
    };
    let user = match target.user() {
        "" => String::new(),
        u => format!(", user {u}"),
    };
    let held = bytes.map_or("its memory size unknown".into(), |b| {
        format!(
            "{:.1} GiB in host memory",
            b as f64 / crate::model::GIB as f64
        )
    });
    format!(
        "{} (PID {}{user}, GPU {}, parked: {held})",
        target.name(),
        key.0.pid,
        key.1
    )
}

/// True for the actions that cannot be undone (signals, terminate): their button is red.
fn destructive(action: &crate::act::rules::Action) -> bool {
    matches!(
        action,
        crate::act::rules::Action::Terminate { .. } | crate::act::rules::Action::Signal { .. }
    )
}

/// The confirmation's heading and its button for `action` on `target`; `resume` is a
/// parked process's bytes in host memory and the seconds its resume takes; a park's time is
/// said at `park_gib_s` (the guard's measured rate; 0: the default).
fn confirm_wording(
    target: &crate::act::rules::eval::Target,
    action: &crate::act::rules::Action,
    resume: Option<(Option<u64>, f64)>,
    park_gib_s: f64,
) -> (String, String) {
    match action {
        crate::act::rules::Action::Terminate { .. } => (
            "Terminate this process?".to_string(),
            "Terminate".to_string(),
        ),
        crate::act::rules::Action::Signal { signal } if signal == "SIGKILL" => {
            ("Kill this process?".to_string(), "Kill".to_string())
        }
        crate::act::rules::Action::ReleaseCache => (
            "Release this process's cached GPU memory?".to_string(),
            "Release".to_string(),
        ),
        crate::act::rules::Action::LimitMemory { gib } => (
            format!("Limit this process to {gib} GiB of GPU memory?"),
            "Limit".to_string(),
        ),
        crate::act::rules::Action::Resume => (
            match resume {
                Some((Some(b), s)) => format!(
                    "Resume: move its {:.1} GiB back to the GPU (~{s:.0} s)?",
                    b as f64 / crate::model::GIB as f64
                ),
                _ => "Resume: move its memory back to the GPU?".to_string(),
            },
            "Resume".to_string(),
        ),
        crate::act::rules::Action::Park => {
            let used = match target {
                crate::act::rules::eval::Target::Process { used_bytes, .. } => {
                    used_bytes.unwrap_or(0)
                }
                crate::act::rules::eval::Target::Device(_) => 0,
            };
            (
                format!(
                    "Park: move its {:.1} GiB to host memory (~{:.0} s)?",
                    used as f64 / crate::model::GIB as f64,
                    crate::act::park::estimate::park_estimate_s(used, park_gib_s)
                ),
                "Park".to_string(),
            )
        }
        a => (format!("{} this process?", a.label()), a.label()),
    }
}

fn activity_pane(ui: &mut Ui, m: &Monitor) {
    if m.activity.is_empty() {
        ui.add_space(8.0);
        ui.label("Nothing yet: every rule firing (would act, acted, failed, skipped) and every manual action is listed here.");
        return;
    }
    egui::ScrollArea::vertical()
        .id_salt("activity")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            egui::Grid::new("activity-grid")
                .num_columns(5)
                .striped(true)
                .spacing([14.0, 4.0])
                .show(ui, |ui| {
                    for h in ["Time", "Rule", "Target", "Outcome", "What happened"] {
                        ui.label(RichText::new(h).strong());
                    }
                    ui.end_row();
                    for a in m.activity.iter().rev() {
                        ui.monospace(format::clock(a.unix_ms));
                        ui.label(&a.rule);
                        ui.label(a.target.describe());
                        let color = widgets::outcome_color(a.outcome, ui.visuals().dark_mode);
                        ui.label(RichText::new(a.outcome.label()).color(color).strong());
                        ui.label(&a.detail);
                        ui.end_row();
                    }
                });
        });
}

/// Effects the frame asks for, applied after drawing.
#[derive(Default)]
struct Commands {
    settings: Option<crate::engine::settings::Settings>,
    start_demo: bool,
    retry: bool,
    /// File → Disconnect: leave the agent shown for this computer.
    disconnect: bool,
    back_to_live: bool,
    engine: Option<crate::engine::EngineCommand>,
}

fn session_bar(ui: &mut Ui, v: &mut SessionView, cmd: &mut Commands) {
    let Some((a, b)) = v.data.span() else { return };
    egui::Panel::top("session-bar").show(ui, |ui| {
        ui.horizontal(|ui| {
            ui.label(RichText::new(v.title()).strong());
            ui.separator();
            if ui.button("Back to live").clicked() {
                cmd.back_to_live = true;
            }
            ui.separator();
            ui.label(RichText::new(format::date_time(v.t)).monospace().strong());
            if ui.button("◀ 1 min").clicked() {
                v.t = (v.t - 60_000).max(a);
            }
            if ui.button("1 min ▶").clicked() {
                v.t = (v.t + 60_000).min(b);
            }
            let mut t = v.t as f64;
            ui.spacing_mut().slider_width = (ui.available_width() - 50.0).max(120.0);
            let slider = egui::Slider::new(&mut t, a as f64..=b as f64)
                .show_value(false)
                .text("Time");
            if ui.add(slider).changed() {
                v.t = t as i64;
            }
        });
    });
}

/// Whether the View shown is of simulated GPUs: as its source says (a `--demo` agent's too,
/// whatever link brings it), else as this computer's source was chosen (before a sample).
fn shows_simulated(live: &Monitor, local: crate::source::SourceKind) -> bool {
    live.source
        .as_ref()
        .map_or(local.is_simulated(), crate::model::SourceInfo::is_simulated)
}

fn empty_state(ui: &mut Ui, m: &Monitor, start_demo: &mut bool, retry: &mut bool) {
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() * 0.25);
        match &m.status {
            SourceStatus::Failed(why) => {
                ui.heading(RichText::new("No NVIDIA GPU can be read").color(widgets::warn(ui)));
                ui.add_space(8.0);
                ui.label(why.as_str());
                ui.add_space(16.0);
                ui.label("You can still explore vramwarden on simulated GPUs:");
                ui.add_space(8.0);
                if ui
                    .button(RichText::new("Start the demo (simulated GPUs)").size(16.0))
                    .clicked()
                {
                    *start_demo = true;
                }
                ui.add_space(4.0);
                if ui.button("Retry the NVIDIA driver").clicked() {
                    *retry = true;
                }
            }
            SourceStatus::Starting => {
                ui.heading("Opening the GPU driver…");
            }
            SourceStatus::Running => {
                ui.heading("No GPUs found");
                ui.label("The driver answered but lists no devices.");
                if ui.button("Start the demo (simulated GPUs)").clicked() {
                    *start_demo = true;
                }
            }
        }
    });
}

/// A ring around the widget that has the keyboard focus, above every layer (menus too). egui
/// marks a focused button only with its pressed fill, which is faint in a menu; a ring in the
/// strong text colour is seen at once and is not the selection's blue. Text fields show
/// their own cursor and border, so they get none. The mouse does not move the focus (egui
/// focuses only on Tab, the arrows, or a field clicked), so the ring follows the keyboard.
fn paint_focus_ring(ctx: &egui::Context) {
    if ctx.text_edit_focused() {
        return;
    }
    let Some(rect) = ctx
        .memory(|m| m.focused())
        .and_then(|id| ctx.read_response(id))
        .map(|r| r.rect)
    else {
        return;
    };
    let color = ctx.global_style().visuals.strong_text_color();
    ctx.layer_painter(egui::LayerId::new(
        egui::Order::Tooltip,
        egui::Id::unique("vramwarden-focus-ring"),
    ))
    .rect_stroke(
        rect.expand(2.0),
        3.0,
        egui::Stroke::new(1.5, color),
        egui::StrokeKind::Outside,
    );
}

impl eframe::App for VramApp {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        // `-v`: the frames drawn (per sample, beside the ticks) and each one's UI pass.
        let _pass = crate::host::cost::span(crate::host::cost::Part::Frame);
        // `-vv`: why each frame was drawn (which request for a repaint led to it).
        tracing::trace!(causes = ?ui.ctx().repaint_causes(), "frame");
        self.fit_zoom.update(ui.ctx());
        self.draw(ui);
        paint_focus_ring(ui.ctx());
    }

    fn raw_input_hook(&mut self, ctx: &egui::Context, raw: &mut egui::RawInput) {
        // The pointer as of this input (or as last known).
        let pos = raw
            .events
            .iter()
            .rev()
            .find_map(|e| match e {
                egui::Event::PointerMoved(p) => Some(*p),
                _ => None,
            })
            .or_else(|| ctx.input(|i| i.pointer.hover_pos()));
        let over = matches!((pos, self.graph.plot_rect), (Some(p), Some(r)) if r.contains(p));
        super::graph::wheel_to_zoom(raw, over);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        self.state.typed_paths = self.sessions.typed.clone();
        eframe::set_value(storage, eframe::APP_KEY, &self.state);
    }
}
