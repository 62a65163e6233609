//! Switching what the window shows: saved hosts, attaching to an agent, the local source.

use egui::Ui;

use super::{UiCommand, VramApp};

impl VramApp {
    /// Removes `h` from the saved hosts; shown, the window goes back to this computer
    /// (history kept); attached in the background, its link stops.
    pub(super) fn forget_host(&mut self, h: &crate::front::gui::connect::SavedHost) {
        self.state.hosts.retain(|x| x != h);
        if self.backend.shown_host() == Some(h) {
            self.disconnect();
        } else {
            self.backend.drop_background(h);
        }
    }

    /// A host chosen in the selector: shown at once when attached in the background, else
    /// opened.
    pub(super) fn switch_host(&mut self, ctx: &egui::Context, pick: Option<usize>) {
        let host = pick.and_then(|i| self.state.hosts.get(i).cloned());
        let showing = match &host {
            None => self.backend.remote().is_none(),
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
                        &crate::front::gui::connect::ConnectRequest {
                            host: h,
                            token: String::new(),
                        },
                    );
                }
                Some(h) => self.connect.show(Some(&h)),
                None => self.restart_local(self.backend.remote().is_some() && self.local_demo),
            }
        }
    }

    /// Asks before switching between the demo and the driver (history on screen is cleared);
    /// where the driver cannot be loaded, says so and keeps the demo.
    pub(super) fn switch_source_modal(&mut self, ctx: &egui::Context) {
        let Some(to_demo) = self.switch_source else {
            return;
        };
        if !to_demo {
            if let Some(why) = self.backend.driver_missing().map(str::to_owned) {
                self.no_driver_modal(ctx, &why);
                return;
            }
        }
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
                    self.push(if to_demo {
                        UiCommand::StartDemo
                    } else {
                        UiCommand::RetryDriver
                    });
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

    /// Switching to the driver on a computer without it: nothing is cleared or restarted.
    fn no_driver_modal(&mut self, ctx: &egui::Context, why: &str) {
        let heading = "No NVIDIA driver on this computer";
        let id = egui::Id::unique("no-driver");
        let area = egui::Modal::default_area(id).accessible_name(heading);
        egui::Modal::new(id).area(area).show(ctx, |ui| {
            ui.set_width(
                440f32
                    .min(ui.ctx().content_rect().width() - 48.0)
                    .max(200.0),
            );
            ui.heading(heading);
            ui.label(format!(
                "The driver's library could not be loaded ({why}). The simulated GPUs go on, \
                 their history kept."
            ));
            ui.add_space(8.0);
            let ok = ui.button("OK");
            if ui.memory(|m| m.focused().is_none()) {
                ok.request_focus();
            }
            if ok.clicked() || ui.input(|i| i.key_pressed(egui::Key::Escape)) {
                self.switch_source = None;
            }
        });
    }

    /// Opens the host of `req`: its token is read and an SSH tunnel started on a worker thread
    /// ([`crate::link::open::open_host`]); [`Self::finish_attach`] attaches the result.
    pub(super) fn attach(
        &mut self,
        ctx: &egui::Context,
        req: &crate::front::gui::connect::ConnectRequest,
    ) {
        if self.connecting.is_some() {
            // One host at a time: the one being opened is attached first.
            return;
        }
        if let Err(e) = crate::front::gui::connect::validate(&req.host, &req.token) {
            self.connect.show(Some(&req.host));
            self.connect.error = Some(e);
            return;
        }
        let (h, typed) = (req.host.clone(), req.token.clone());
        let task = crate::front::gui::task::Task::spawn(
            "connect",
            crate::front::gui::task::repaint(ctx),
            move || crate::link::open::open_host(&h.url, &h.ssh, &h.token_file, &typed),
        );
        self.connecting = Some((req.clone(), task));
    }

    /// Puts `host` first among the saved hosts (once; the newest 20 kept): one attached from
    /// the window, or with `--connect`. It replaces an entry for the same agent reached the
    /// same way (with another token: a refused one), and an attempt at it left in the
    /// background stops: the selector listed the agent twice, both sampling.
    pub(crate) fn remember_host(&mut self, host: crate::front::gui::connect::SavedHost) {
        let same_agent =
            |h: &crate::front::gui::connect::SavedHost| h.url == host.url && h.ssh == host.ssh;
        let mut superseded: Vec<_> = self
            .state
            .hosts
            .iter()
            .filter(|h| same_agent(h))
            .cloned()
            .collect();
        superseded.push(host.clone());
        // The host shown is never in the background: only earlier attempts are let go.
        for old in &superseded {
            self.backend.drop_background(old);
        }
        self.state.hosts.retain(|h| !same_agent(h));
        self.state.hosts.insert(0, host);
        self.state.hosts.truncate(20);
    }

    /// Attaches the host opened by [`Self::attach`] once its worker is done: on success the
    /// host joins the saved list (first), on failure the connect window shows why.
    pub(super) fn finish_attach(&mut self) {
        let Some(opened) = self.connecting.as_ref().and_then(|(_, t)| t.take()) else {
            return;
        };
        let Some((req, _)) = self.connecting.take() else {
            return;
        };
        if self.backend.remote().is_none() {
            self.local_demo = self.backend.source().is_simulated();
        }
        match opened.and_then(|o| self.backend.attach_opened(&req.host, o)) {
            Ok(()) => {
                self.remember_host(req.host.clone());
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
    pub(super) fn restart_local(&mut self, demo: bool) {
        self.view = None;
        self.backend
            .restart(crate::source::SourceKind::from_demo_flag(demo));
        self.selected = None;
    }

    /// Another host is shown: its own graphs and table, nothing selected (a recorded session
    /// on screen stays).
    pub(super) fn after_host_switch(&mut self) {
        self.selected = None;
        self.selected_gpu = 0;
        self.graph.free_range = None;
        self.invalidate_caches();
    }

    /// "Host: …" above the GPU cards: this computer or a saved agent.
    pub(super) fn host_selector(&mut self, ui: &mut Ui) {
        let current = self.backend.remote().unwrap_or("This computer").to_string();
        ui.horizontal(|ui| {
            let label = ui.label("Host");
            egui::ComboBox::from_id_salt("host-selector")
                .selected_text(current.trim_start_matches("http://"))
                .width(ui.available_width() - 8.0)
                .show_ui(ui, |ui| {
                    // Hosts attached in the background go on sampling: "· live".
                    let live = self.backend.live_hosts();
                    let mark = |h: Option<&crate::front::gui::connect::SavedHost>,
                                label: String| {
                        if live.iter().any(|l| l.as_ref() == h) {
                            format!("{label} · live")
                        } else {
                            label
                        }
                    };
                    if ui
                        .selectable_label(
                            self.backend.remote().is_none(),
                            mark(None, "This computer".into()),
                        )
                        .clicked()
                    {
                        self.push(UiCommand::SwitchHost(None));
                    }
                    let shown = self.backend.shown_host().cloned();
                    for (i, h) in self.state.hosts.iter().enumerate() {
                        ui.horizontal(|ui| {
                            if ui
                                .small_button("✖")
                                .on_hover_text("Forget this host (remove it from the list)")
                                .clicked()
                            {
                                self.queue.push(UiCommand::ForgetHost(h.clone()));
                            }
                            if ui
                                .selectable_label(
                                    shown.as_ref() == Some(h),
                                    mark(Some(h), h.label()),
                                )
                                .clicked()
                            {
                                self.queue.push(UiCommand::SwitchHost(Some(i)));
                            }
                        });
                    }
                    ui.separator();
                    if ui.selectable_label(false, "Connect to host…").clicked() {
                        self.push(UiCommand::OpenConnect(None));
                    }
                })
                .response
                .labelled_by(label.id);
        });
        ui.add_space(4.0);
    }
}
