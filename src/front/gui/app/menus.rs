//! The menu bar: File, Sessions, View, Help, the source menu and the right-hand side.

use egui::{Color32, RichText, Ui};

use super::banners::shows_simulated;
use super::{
    shortcut_words, Help, UiCommand, VramApp, HELP_SHORTCUT, OPEN_SHORTCUT, QUIT_SHORTCUT,
    SETTINGS_SHORTCUT,
};
use crate::engine::view::{Monitor, SourceStatus};
use crate::front::gui::widgets;
use crate::model::format::{self, Units};

impl VramApp {
    pub(super) fn menu(&mut self, ui: &mut Ui, live: &Monitor, viewing: bool) {
        egui::Panel::top("menu")
            .frame(crate::front::gui::widgets::panel_frame(ui.style()))
            .show(ui, |ui| {
                egui::MenuBar::new().ui(ui, |ui| {
                    ui.menu_button("File", |ui| self.file_menu(ui));
                    ui.menu_button("Sessions", |ui| self.sessions_menu(ui, live, viewing));
                    ui.menu_button("View", |ui| self.view_menu(ui));
                    ui.menu_button("Help", |ui| self.help_menu(ui));
                    ui.menu_button("Source", |ui| self.source_menu(ui, live));
                    ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                        self.menu_right(ui, live, viewing);
                    });
                });
            });
    }

    /// File: Settings, Connect, Disconnect, Quit (Export is in Sessions, with the logs it
    /// reads).
    fn file_menu(&mut self, ui: &mut Ui) {
        if ui
            .add(
                egui::Button::new("Settings…")
                    .shortcut_text(shortcut_words(ui.ctx(), &SETTINGS_SHORTCUT)),
            )
            .clicked()
        {
            self.push(UiCommand::OpenSettings);
            ui.close();
        }
        ui.separator();
        if ui.button("Connect to host…").clicked() {
            self.push(UiCommand::OpenConnect(None));
            ui.close();
        }
        if self.backend.remote().is_some()
            && ui.button("Disconnect (back to this computer)").clicked()
        {
            self.push(UiCommand::Disconnect);
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
    fn sessions_menu(&mut self, ui: &mut Ui, live: &Monitor, viewing: bool) {
        if self.backend.remote().is_some() && ui.button("Sessions on the agent…").clicked() {
            self.push(UiCommand::OpenAgentSessions);
            ui.close();
        }
        if ui.button("Browse sessions…").clicked() {
            self.push(UiCommand::BrowseSessions);
            ui.close();
        }
        if ui
            .add(
                egui::Button::new("Open file…")
                    .shortcut_text(shortcut_words(ui.ctx(), &OPEN_SHORTCUT)),
            )
            .clicked()
        {
            self.push(UiCommand::PickSessionFile);
            ui.close();
        }
        if ui.button("Import nvidia-smi log…").clicked() {
            self.push(UiCommand::ImportNvidiaSmi);
            ui.close();
        }
        if ui.button("Export to CSV…").clicked() {
            self.push(UiCommand::OpenExport);
            ui.close();
        }
        ui.separator();
        if viewing && ui.button("Back to live").clicked() {
            self.push(UiCommand::BackToLive);
            ui.close();
        }
        let rec = &live.recording;
        if rec.path.is_some() {
            if rec.active {
                if ui.button("Pause recording").clicked() {
                    self.push(UiCommand::Engine(
                        crate::engine::EngineCommand::PauseRecording,
                    ));
                    ui.close();
                }
            } else if ui.button("Resume recording").clicked() {
                self.push(UiCommand::Engine(
                    crate::engine::EngineCommand::ResumeRecording,
                ));
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
            self.push(UiCommand::OpenHelp(Help::Shortcuts));
            ui.close();
        }
        if ui.button("About vramwarden").clicked() {
            self.push(UiCommand::OpenHelp(Help::About));
            ui.close();
        }
    }

    /// Source: the demo or the driver (asks before clearing history).
    fn source_menu(&mut self, ui: &mut Ui, live: &Monitor) {
        let demo = self.backend.source().is_simulated();
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
                } else if !is_demo && !active && self.backend.driver_missing().is_some() {
                    // Said, and nothing stopped (the driver cannot be loaded here).
                    self.push(UiCommand::AskSwitchSource(false));
                } else if running && !live.history.is_empty() {
                    self.push(UiCommand::AskSwitchSource(is_demo));
                } else if is_demo {
                    self.push(UiCommand::StartDemo);
                } else {
                    self.push(UiCommand::RetryDriver);
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
        } else if shows_simulated(live, self.backend.source()) {
            ui.label(
                RichText::new("DEMO · simulated GPUs")
                    .color(widgets::forecast_color(ui.visuals().dark_mode))
                    .strong(),
            );
        }
        let rec = &live.recording;
        if !viewing {
            if rec.active {
                self.recording_mark(ui, live);
            } else if rec.path.is_some() {
                let paused = match self.agent_host(live) {
                    Some(host) => format!("⏸ {host}: recording paused"),
                    None => "⏸ recording paused".into(),
                };
                ui.label(RichText::new(paused).weak());
            }
        }
    }

    /// The mark of a recording going on: "● REC" (greyed while the agent is unreachable),
    /// or "⚠ REC failing" while its writes fail; where it records to on hover.
    fn recording_mark(&self, ui: &mut Ui, live: &Monitor) {
        let rec = &live.recording;
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
            None => match &rec.error {
                // Writes fail (full disk, a file-size limit): said where the eye
                // looks first, the status bar's notice may be cut short.
                Some(e) => ui
                    .label(
                        RichText::new("⚠ REC failing")
                            .monospace()
                            .color(ui.visuals().error_fg_color),
                    )
                    .on_hover_text(match self.agent_host(live) {
                        Some(host) => {
                            format!("The agent on {host}: {e}; it retries every sample")
                        }
                        None => format!("{e}; retried every sample"),
                    }),
                None => ui
                    .label(RichText::new("● REC").monospace().color(widgets::warn(ui)))
                    .on_hover_text(whose),
            },
        };
    }
}
