//! Banners over the panes and the states with nothing to show: connecting, unreachable, empty.

use egui::{RichText, Ui};

use super::{UiCommand, VramApp};
use crate::engine::view::{Monitor, SourceStatus};
use crate::front::gui::widgets;
use crate::model::{format, UnixMs};

impl VramApp {
    /// The banners under the menu: a broken settings file, a file that could not be opened,
    /// a lost agent.
    pub(super) fn banners(&mut self, ui: &mut Ui, health: &crate::link::LinkHealth) {
        self.config_banner(ui);
        self.open_error_banner(ui);
        self.link_banner(ui, health);
    }

    /// The banner of a broken settings file (the window runs on defaults).
    fn config_banner(&self, ui: &mut Ui) {
        if let Some(e) = &self.config_error {
            egui::Panel::top("config-banner")
                .frame(widgets::panel_frame(ui.style()))
                .show(ui, |ui| {
                ui.horizontal_wrapped(|ui| {
                    ui.label(RichText::new(format!("⚠ The settings file is broken: {e}")).color(widgets::warn(ui)).strong());
                    ui.label("vramwarden runs on defaults and leaves the file as it is until you save from Settings.");
                });
            });
        }
    }

    /// The banner of a file that could not be opened, with Dismiss.
    fn open_error_banner(&mut self, ui: &mut Ui) {
        if let Some(e) = self.sessions.open_error.clone() {
            egui::Panel::top("open-error-banner")
                .frame(widgets::panel_frame(ui.style()))
                .show(ui, |ui| {
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
    }

    /// The banner of an agent lost (or never reached), with the way back to this computer
    /// and, where it helps, a new token or forgetting the host.
    fn link_banner(&mut self, ui: &mut Ui, health: &crate::link::LinkHealth) {
        if let crate::link::LinkHealth::Disconnected {
            url,
            since_ms,
            error,
        } = health
        {
            // A host that never answered was not "disconnected" (a mistyped address).
            let answered = self.backend.view().is_some_and(|m| m.latest.is_some());
            // Since a time that stays put: "5s ago" becoming "15s ago" moved the buttons.
            let lost = format::clock(*since_ms);
            let refused = matches!(
                error,
                crate::link::remote_error::RemoteError::Unauthorized(_)
            );
            // A refused token is no outage: said as what it is, without the agent's words
            // again beside it.
            let words = if refused {
                format!("⚠ {url} refused this token")
            } else if answered {
                format!("⚠ Disconnected from {url} since {lost} — retrying")
            } else {
                format!("⚠ {url} has not answered (since {lost}) — retrying")
            };
            egui::Panel::top("link-banner")
                .frame(widgets::panel_frame(ui.style()))
                .show(ui, |ui| {
                ui.horizontal_wrapped(|ui| {
                    ui.label(
                        RichText::new(words)
                        .color(widgets::warn(ui))
                        .strong(),
                    );
                    if !refused {
                        ui.label(RichText::new(error.to_string()).weak());
                    }
                    self.offer_token(ui, error);
                    if ui.button("Back to this computer").clicked() {
                        // As File → Disconnect: this computer's history is kept.
                        self.push(UiCommand::Disconnect);
                    }
                    if let Some(h) = self.backend.shown_host().cloned() {
                        if ui
                            .button("Forget this host")
                            .on_hover_text("Back to this computer, and remove the host from the list (a mistyped address)")
                            .clicked()
                        {
                            self.push(UiCommand::ForgetHost(h));
                        }
                    }
                });
            });
        }
    }

    /// "Connecting to …" while an agent has sent nothing yet.
    pub(super) fn connecting_state(&mut self, ui: &mut Ui, health: &crate::link::LinkHealth) {
        ui.vertical_centered(|ui| {
            ui.add_space(ui.available_height() * 0.25);
            ui.heading(format!(
                "Connecting to {}…",
                self.backend.remote().unwrap_or("")
            ));
            if let crate::link::LinkHealth::Disconnected { error, .. } = health {
                ui.label(RichText::new(error.to_string()).color(widgets::warn(ui)));
            }
            if ui.button("Back to this computer").clicked() {
                // As File → Disconnect: history is kept.
                self.push(UiCommand::Disconnect);
            }
            if let Some(h) = self.backend.shown_host().cloned() {
                if ui
                    .button("Forget this host")
                    .on_hover_text("Back to this computer, and remove the host from the list")
                    .clicked()
                {
                    self.push(UiCommand::ForgetHost(h));
                }
            }
        });
    }
}

impl VramApp {
    /// For an agent that refused the token (a 401, not an outage): a button that opens the
    /// connect window for the host shown, to enter the right token.
    fn offer_token(&mut self, ui: &mut Ui, error: &crate::link::remote_error::RemoteError) {
        if !matches!(
            error,
            crate::link::remote_error::RemoteError::Unauthorized(_)
        ) {
            return;
        }
        if let Some(h) = self.backend.shown_host().cloned() {
            if ui
                .button("Enter the token…")
                .on_hover_text(
                    "The agent refused this token: open the connect window for this host",
                )
                .clicked()
            {
                self.push(UiCommand::EnterToken(h));
            }
        }
    }
}

/// Above a lost agent's cards: what happened, on a line of its own ("⚠ Agent unreachable"),
/// then since when and what the greyed figures are, in a box as wide as the cards (one long
/// line wrapped in the middle of a phrase in the narrow panel).
pub(super) fn unreachable_note(ui: &mut Ui, since: UnixMs) {
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

/// Whether the View shown is of simulated GPUs: as its source says (a `--demo` agent's too,
/// whatever link brings it), else as this computer's source was chosen (before a sample).
pub(super) fn shows_simulated(live: &Monitor, local: crate::source::SourceKind) -> bool {
    live.source
        .as_ref()
        .map_or(local.is_simulated(), crate::model::SourceInfo::is_simulated)
}

/// While a session opens (or an import runs) and nothing live is on screen: what is being
/// opened and how far, with its Cancel, in place of the live source's empty state (whose "No
/// NVIDIA GPU can be read" read as the file's failure). False when no such job runs.
pub(super) fn opening_state(
    ui: &mut Ui,
    jobs: &crate::link::jobs::JobBoard,
    out: &mut Vec<UiCommand>,
) -> bool {
    let states = jobs.states();
    let Some(job) = states
        .iter()
        .find(|j| j.in_status_bar && j.result.is_none())
    else {
        return false;
    };
    ui.vertical_centered(|ui| {
        ui.add_space(ui.available_height() * 0.25);
        ui.heading(format!("{}…", job.label));
        ui.add_space(8.0);
        ui.add(
            egui::ProgressBar::new(job.progress.fraction())
                .show_percentage()
                .desired_width(280.0),
        );
        ui.add_space(8.0);
        if ui.button("Cancel").clicked() {
            out.push(UiCommand::Job(crate::link::jobs::JobCommand::Cancel(
                job.id,
            )));
        }
    });
    true
}

pub(super) fn empty_state(ui: &mut Ui, m: &Monitor, out: &mut Vec<UiCommand>) {
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
                    out.push(UiCommand::StartDemo);
                }
                ui.add_space(4.0);
                if ui.button("Retry the NVIDIA driver").clicked() {
                    out.push(UiCommand::RetryDriver);
                }
                ui.add_space(4.0);
                if ui.button("Connect to a GPU server's agent…").clicked() {
                    out.push(UiCommand::OpenConnect(None));
                }
            }
            SourceStatus::Starting => {
                ui.heading("Opening the GPU driver…");
            }
            SourceStatus::Running => {
                ui.heading("No GPUs found");
                ui.label("The driver answered but lists no devices.");
                if ui.button("Start the demo (simulated GPUs)").clicked() {
                    out.push(UiCommand::StartDemo);
                }
            }
        }
    });
}
