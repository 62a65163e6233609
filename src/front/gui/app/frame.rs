//! One frame of the window: reading the monitor once, drawing in order, then applying what
//! the frame asked for and scheduling the next.

use egui::Ui;

use super::panes::session_bar;
use super::{UiCommand, VramApp};
use crate::front::gui::sessions::SessionAction;
use crate::front::gui::widgets;

impl VramApp {
    /// Draws one frame into `ui` (the window's, under [`eframe::App::ui`]'s backdrop), then
    /// carries out what it asked for.
    pub fn draw(&mut self, ui: &mut Ui) {
        let ctx = ui.ctx().clone();
        widgets::readable_text(&ctx);
        widgets::set_palette(&ctx, self.state.palette);
        self.route_replies(&ctx);
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
        self.menu(ui, &live, view.is_some());
        self.banners(ui, &health);
        if let Some(v) = view.as_mut() {
            session_bar(ui, v, &mut self.queue);
        }
        self.status_panel(ui, &live, view.as_ref(), &health, &jobs);
        match view.as_mut() {
            Some(v) => self.session_panes(ui, v),
            None => self.live_panes(ui, &live, &health),
        }
        self.windows(&ctx, &live, live_log, view.as_ref(), &jobs);
        self.view = view;
        self.finish_attach();
        self.run_commands(&ctx, &live);
        // A session on screen: the live samples behind it wake nothing (a still session
        // draws no frame however it was opened).
        self.backend.set_covered(self.view.is_some());
        self.schedule_repaint(ui, live.interval_ms);
    }

    /// The engine's replies since the last frame: the actions' results, a rule's test (for
    /// the Settings window), the rest as toasts.
    fn route_replies(&mut self, ctx: &egui::Context) {
        let replies = self.backend.take_replies();
        self.action_status.answered(&replies, self.now());
        let at = ctx.input(|i| i.time);
        let st = &mut self.settings_ui;
        if let Some(t) =
            crate::front::gui::replies::route(replies, &mut st.testing, &mut self.toasts, at)
        {
            st.tested = Some(t);
        }
    }

    /// The status bar at the window's bottom: the jobs running, then the session's status or
    /// the live one.
    fn status_panel(
        &mut self,
        ui: &mut Ui,
        live: &crate::engine::view::Monitor,
        view: Option<&crate::front::gui::sessions::SessionView>,
        health: &crate::link::LinkHealth,
        jobs: &crate::link::jobs::JobBoard,
    ) {
        egui::Panel::bottom("status")
            .frame(crate::front::gui::widgets::panel_frame(ui.style()))
            .show(ui, |ui| {
                crate::front::gui::status_bar::jobs_strip(ui, jobs, &mut self.queue);
                match view {
                    Some(v) => crate::front::gui::status_bar::session(ui, v),
                    None => crate::front::gui::status_bar::live(
                        ui,
                        live,
                        self.agent_host(live),
                        self.now(),
                        health,
                        self.backend.own_notices().latest(),
                    ),
                }
            });
    }

    /// The windows and dialogs over the panes: Settings, the confirmation, sessions and
    /// export, Help, Connect, the agent's sessions, the source switch.
    fn windows(
        &mut self,
        ctx: &egui::Context,
        live: &crate::engine::view::Monitor,
        live_log: Option<std::path::PathBuf>,
        view: Option<&crate::front::gui::sessions::SessionView>,
        jobs: &crate::link::jobs::JobBoard,
    ) {
        self.settings_window(ctx, live);
        self.confirm_modal(ctx);
        let viewing = view.map(|v| v.data.clone());
        self.sessions.shown = self.graph.shown_ms;
        self.sessions
            .windows(ctx, live_log, viewing, jobs, &mut self.queue);
        self.help_window(ctx);
        if let Some(req) = self.connect.window(ctx) {
            self.push(UiCommand::Connect(req));
        }
        self.agent_sessions_window(ctx);
        self.switch_source_modal(ctx);
    }

    /// Takes what background jobs finished: past sessions' leaks, a session opened.
    fn poll_background(&mut self, ctx: &egui::Context, jobs: &crate::link::jobs::JobBoard) {
        self.tabs.leaks.poll(jobs);
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
            None => {}
        }
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
        // The panels are not filled (the window is cleared to their colour): the Ui they are
        // shown in carries that colour for what blends into the background (a scroll area's
        // fade at an edge with more to scroll to), and paints nothing.
        let fill = ui.visuals().panel_fill;
        self.panel_fill = Some(fill);
        let backdrop = egui::UiStackInfo::default().with_frame(egui::Frame::NONE.fill(fill));
        // It keeps the window's scope id, so the panels' ids (and their widths kept from
        // the run before) stay what they were.
        let scope = egui::UiBuilder::new()
            .scope_id(ui.scope_id())
            .ui_stack_info(backdrop);
        ui.scope_builder(scope, |ui| self.draw(ui));
        paint_focus_ring(ui.ctx());
    }

    /// The panels' colour as the frame was drawn (before its first frame, the theme's): the
    /// panels are not filled, the window is cleared to it.
    fn clear_color(&self, visuals: &egui::Visuals) -> [f32; 4] {
        self.panel_fill
            .unwrap_or(visuals.panel_fill)
            .to_normalized_gamma_f32()
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
        crate::front::gui::graph::wheel_to_zoom(raw, over);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        self.state.typed_paths = self.sessions.typed.clone();
        eframe::set_value(storage, eframe::APP_KEY, &self.state);
    }
}
