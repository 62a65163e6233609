//! The layout of the panes: the GPU panels, the detail pane, the bottom tabs, a session's bar.

use egui::{RichText, Ui};

use super::banners::{empty_state, opening_state, unreachable_note};
use super::{UiCommand, VramApp};
use crate::engine::view::Monitor;
use crate::front::gui::sessions::SessionView;
use crate::front::gui::tabs::{Badges, PaneCx};
use crate::front::gui::widgets::UNREACHABLE_OPACITY;
use crate::front::gui::{overview, process_detail};
use crate::model::{format, UnixMs};

impl VramApp {
    /// The panes over a recorded session at its cursor.
    pub(super) fn session_panes(&mut self, ui: &mut Ui, v: &mut SessionView) {
        let t = v.t;
        let snap = v.snapshot().cloned();
        let rows: Vec<crate::engine::view::ProcessRow> = v.rows().to_vec();
        let refs: Vec<&crate::engine::view::ProcessRow> = rows.iter().collect();
        match snap {
            Some(snap) => self.panes(ui, &v.monitor, &snap, refs, t, t),
            None => {
                egui::CentralPanel::default()
                    .frame(crate::front::gui::widgets::central_frame(ui.style()))
                    .show(ui, |ui| {
                        ui.label("This session holds no samples.");
                    });
            }
        }
    }

    /// The live panes, or what stands in for them before the first sample.
    pub(super) fn live_panes(
        &mut self,
        ui: &mut Ui,
        live: &Monitor,
        health: &crate::link::LinkHealth,
    ) {
        let mut now = self.now();
        match live.latest.as_ref().filter(|s| !s.devices.is_empty()) {
            Some(snap) => {
                let last = live.history.span().map_or(now, |(_, b)| b);
                if self.unreachable_since.is_some() {
                    // A lost agent's last figures stand as they were at its last sample:
                    // an ongoing leak's age does not run on while nothing is known.
                    now = last;
                }
                let edge = last.max(now.min(last + 3 * live.interval_ms as i64));
                self.panes(ui, live, snap, live.table_rows(now), now, edge);
            }
            None => {
                egui::CentralPanel::default()
                    .frame(crate::front::gui::widgets::central_frame(ui.style()))
                    .show(ui, |ui| {
                        if self.backend.remote().is_some() {
                            self.connecting_state(ui, health);
                        } else if !opening_state(ui, self.backend.jobs(), &mut self.queue) {
                            empty_state(ui, live, &mut self.queue);
                        }
                    });
            }
        }
    }

    /// The window's panes: the GPU cards on the left, the selected process's details on the
    /// right, and between them the selected GPU's graph over the tabs.
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
        let badges = crate::front::gui::leaks::badges(monitor, snap);
        self.detail_panel(ui, monitor, &rows, &badges, now, full);
        egui::CentralPanel::default()
            .frame(crate::front::gui::widgets::central_frame(ui.style()))
            .show(ui, |ui| {
                self.graph_area(ui, monitor, snap, edge);
                ui.separator();
                let host = self.agent_host(monitor);
                let window_open = self.settings_ui.open
                    || self.connect.open
                    || self.sessions.export_open
                    || self.sessions.browser_open;
                let mut cx = PaneCx {
                    monitor,
                    snap,
                    rows: &rows,
                    badges: &badges,
                    now,
                    recorded: self.replaying,
                    offline: !self.replaying && self.unreachable_since.is_some(),
                    host,
                    selected_gpu: self.selected_gpu,
                    selected: &mut self.selected,
                    state: &mut self.state,
                    filter: &mut self.filter,
                    window_open,
                    actions: &mut self.action_status,
                    backend: &self.backend,
                };
                self.tabs.show(ui, &mut cx, &mut self.queue);
            });
    }

    /// The selected GPU's graph in the upper half (at least 220 points) of the central
    /// panel; a click on a process's band selects it.
    fn graph_area(
        &mut self,
        ui: &mut Ui,
        monitor: &Monitor,
        snap: &crate::model::Snapshot,
        edge: UnixMs,
    ) {
        let h = (ui.available_height() * 0.5).max(220.0);
        ui.allocate_ui(egui::vec2(ui.available_width(), h), |ui| {
            self.graph.in_session = self.replaying;
            let clicked = crate::front::gui::graph::device_graph(
                ui,
                monitor,
                snap,
                self.selected_gpu,
                &mut self.state,
                &mut self.graph,
                edge,
                self.selected.filter(|k| k.1 == self.selected_gpu),
            );
            if let Some(selection) = clicked {
                self.selected = selection;
            }
        });
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
        let max = (full * 0.3).max(200.0);
        self.kept_widths[0].before_show(ui, "gpus", max);
        let shown = egui::Panel::left("gpus")
            .frame(crate::front::gui::widgets::panel_frame(ui.style()))
            .resizable(true)
            .default_size((full * 0.24).clamp(210.0, 340.0))
            .min_size(200.0)
            .max_size(max)
            .show(ui, |ui| {
                if !self.state.hosts.is_empty() || self.backend.remote().is_some() {
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
                    let alerted: Vec<u32> =
                        monitor.oom_alerts.iter().map(|a| a.device_index).collect();
                    overview::cards(ui, snap, self.state.units, &alerted, &mut self.selected_gpu);
                });
            });
        self.gpu_rect = Some(shown.response.rect);
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
        let mut asked = Vec::new();
        let max = (full * 0.45).max(240.0);
        self.kept_widths[1].before_show(ui, "detail", max);
        let shown = egui::Panel::right("detail")
            .frame(crate::front::gui::widgets::panel_frame(ui.style()))
            .resizable(true)
            .default_size((full * 0.32).clamp(260.0, 420.0))
            .min_size(240.0)
            .max_size(max)
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
                        open = self.detail_pane(ui, monitor, row, (badge, now), &mut asked);
                    });
            });
        self.detail_rect = Some(shown.response.rect);
        if !open {
            self.selected = None;
        }
        self.queue.extend(asked);
    }

    /// The selected process's details in the right panel, its leak `badge` and action result
    /// at `now`; actions asked for go to `asked` (none in a recorded session, nor from a lost
    /// agent). False when the pane was closed.
    fn detail_pane(
        &mut self,
        ui: &mut Ui,
        monitor: &Monitor,
        row: &crate::engine::view::ProcessRow,
        (badge, now): (Option<crate::front::gui::leaks::LeakBadge>, UnixMs),
        asked: &mut Vec<UiCommand>,
    ) -> bool {
        let result = (!self.replaying)
            .then(|| self.action_status.state(row.series_key(), now))
            .flatten();
        let input = process_detail::PaneInputs {
            units: self.state.units,
            now,
            leak: badge,
            result,
            host: self.agent_host(monitor),
            // A recorded session offers no actions, nor a lost agent.
            request: (!self.replaying && self.unreachable_since.is_none()).then_some(asked),
            offline: !self.replaying && self.unreachable_since.is_some(),
        };
        process_detail::pane(ui, monitor, row, &mut self.detail_graph, input)
    }
}

pub(super) fn session_bar(ui: &mut Ui, v: &mut SessionView, out: &mut Vec<UiCommand>) {
    let Some((a, b)) = v.data.span() else { return };
    egui::Panel::top("session-bar")
        .frame(crate::front::gui::widgets::panel_frame(ui.style()))
        .show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.label(RichText::new(v.title()).strong());
                ui.separator();
                if ui.button("Back to live").clicked() {
                    out.push(UiCommand::BackToLive);
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
                let slider = egui::Slider::new(&mut t, a as f64..=b as f64).show_value(false);
                // The label apart, so the slider's response is its rail's alone.
                let resp = ui.add(slider);
                let label = ui.label("Time");
                let resp = resp.labelled_by(label.id);
                if resp.changed() {
                    v.t = t as i64;
                } else if let Some(at) = clicked_time(ui, &resp, (a, b)) {
                    v.t = at;
                }
            });
        });
}

/// The time a click on the session's time slider points at: egui's slider moves on a press
/// held over frames, and a tap whose press and release come in one frame (a touchpad's) did
/// nothing. Its rail spans the slider less a handle's radius at each end, as egui draws it.
fn clicked_time(ui: &Ui, slider: &egui::Response, (a, b): (UnixMs, UnixMs)) -> Option<UnixMs> {
    if slider.drag_stopped() {
        // A held press: egui's slider took it.
        return None;
    }
    let click = ui.interact(slider.rect, slider.id.with("tap"), egui::Sense::click());
    let x = click.interact_pointer_pos().filter(|_| click.clicked())?.x;
    let rail = slider.rect.x_range().shrink(slider.rect.height() / 2.5);
    let f = f64::from(((x - rail.min) / rail.span().max(1.0)).clamp(0.0, 1.0));
    Some(a + ((b - a) as f64 * f).round() as UnixMs)
}
