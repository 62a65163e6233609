//! The window's own windows: Settings, the agent's sessions, Help.

use egui::RichText;

use super::{Help, UiCommand, VramApp, SHORTCUTS};
use crate::engine::view::Monitor;
use crate::front::gui::ui_state::apply_theme;
use crate::front::gui::widgets;
use crate::model::format;

impl VramApp {
    /// The Settings window (its Save and rule tests go to the queue), and a save's outcome.
    pub(super) fn settings_window(&mut self, ctx: &egui::Context, live: &Monitor) {
        let current = self.backend.settings.clone();
        self.settings_ui
            .window(ctx, &current, &self.config_path, live, &mut self.queue);
        match self.saving.and_then(|id| self.backend.jobs().take(id)) {
            None => {}
            Some(crate::link::jobs::JobResult::Saved(s, r)) => {
                self.saving = None;
                match r {
                    Ok(bak) => {
                        self.settings_ui.saved(&s);
                        self.settings_ui.message =
                            Some((saved_message(&self.config_path, bak.as_deref()), false));
                        self.config_error = None;
                        self.state.units = s.general.units;
                        apply_theme(ctx, s.general.theme);
                        self.push(UiCommand::ApplySettings(s));
                    }
                    Err(e) => self.settings_ui.message = Some((e, true)),
                }
            }
            Some(other) => {
                self.saving = None;
                if let crate::link::jobs::JobResult::Failed(e) = other {
                    self.settings_ui.message = Some((e, true));
                }
            }
        }
    }

    /// Settings → Save: `s` written (TOML, fsync, .bak) on a worker thread, so a slow disk
    /// never holds a frame; one save at a time.
    pub(super) fn save_settings(&mut self, s: Box<crate::engine::settings::Settings>) {
        if self.saving.is_some() {
            return;
        }
        let path = self.config_path.clone();
        self.settings_ui.message = Some(("Saving…".into(), false));
        let id = crate::link::jobs::JobId::next();
        self.backend.job(crate::link::jobs::JobCommand::Start(
            id,
            crate::link::jobs::Job::SaveSettings { settings: s, path },
        ));
        self.saving = Some(id);
    }

    /// Sessions → Sessions on the agent…: the agent's logs, each downloaded into this
    /// computer's sessions folder and opened read-only on request.
    pub(super) fn agent_sessions_window(&mut self, ctx: &egui::Context) {
        self.agent_downloads_done();
        let Some(error) = self.agent_sessions.clone() else {
            return;
        };
        let Some(files) = self.backend.agent_files() else {
            self.agent_sessions = None;
            return;
        };
        let mut open = true;
        let mut fetch = None;
        let mut refresh = false;
        egui::Window::new("Sessions on the agent")
            .open(&mut open)
            .collapsible(false)
            .default_pos(egui::pos2(240.0, 90.0))
            .show(ctx, |ui| {
                ui.label(format!(
                    "Session logs recorded by {}. Opening one downloads it into this computer's sessions folder (from-agents/).",
                    self.backend.remote().unwrap_or("the agent")
                ));
                fetch = agent_sessions_list(ui, &files);
                if let Some(e) = &error {
                    ui.label(RichText::new(e.as_str()).color(widgets::warn(ui)));
                }
                if ui.button("Refresh").clicked() {
                    refresh = true;
                }
            });
        if refresh {
            self.push(UiCommand::RefreshAgentSessions);
        }
        if let Some(name) = fetch {
            self.push(UiCommand::DownloadAgentSession(name));
        }
        if !open {
            self.agent_sessions = None;
        } else if files.downloading.is_some() || files.list.is_none() {
            ctx.request_repaint_after(std::time::Duration::from_millis(200));
        }
    }

    /// The agent's logs downloaded since the last frame: each opened (the window closes), or
    /// its error kept for the window.
    fn agent_downloads_done(&mut self) {
        for (name, got) in self.backend.take_agent_downloads() {
            match got {
                Ok(path) => {
                    self.sessions.open_path(path);
                    self.agent_sessions = None;
                }
                Err(e) => self.agent_sessions = Some(Some(format!("{name}: {e}"))),
            }
        }
    }

    /// Help → Keyboard shortcuts / About.
    pub(super) fn help_window(&mut self, ctx: &egui::Context) {
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

/// The agent's session logs, one a row (name, start, length and size, Open), or why there
/// are none yet; the log whose Open was clicked, if one was.
fn agent_sessions_list(
    ui: &mut egui::Ui,
    files: &crate::link::files::RemoteFiles,
) -> Option<String> {
    let mut fetch = None;
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
            egui::ScrollArea::vertical()
                .max_height(360.0)
                .show(ui, |ui| {
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
                                    .add_enabled(
                                        files.downloading.is_none(),
                                        egui::Button::new("Open"),
                                    )
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
    fetch
}
