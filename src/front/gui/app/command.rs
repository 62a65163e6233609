//! The frame's queue of [`UiCommand`]s: pushed while drawing, carried out once at the end of
//! the frame, here and nowhere else.

use super::VramApp;
use crate::engine::view::Monitor;
use crate::engine::EngineCommand;
use crate::front::gui::ui_command::UiCommand;

impl VramApp {
    /// Queues `c`, to be carried out at the end of this frame.
    pub(crate) fn push(&mut self, c: UiCommand) {
        self.queue.push(c);
    }

    /// The commands carried out at the end of the last frame, in the order they were asked
    /// (tests: a click becomes one command, carried out once).
    pub fn last_commands(&self) -> &[UiCommand] {
        &self.drained
    }

    /// Carries out the frame's queue, oldest first; `live` is the View the frame was drawn
    /// from (a confirmation is built from its rows). Something done draws one more frame,
    /// so its effect is on screen without waiting for input.
    pub(super) fn run_commands(&mut self, ctx: &egui::Context, live: &Monitor) {
        let queue = std::mem::take(&mut self.queue);
        for c in &queue {
            self.run_command(ctx, live, c.clone());
        }
        if !queue.is_empty() {
            ctx.request_repaint();
        }
        self.drained = queue;
    }

    fn run_command(&mut self, ctx: &egui::Context, live: &Monitor, c: UiCommand) {
        match c {
            UiCommand::OpenSettings => {
                let s = self.backend.settings.clone();
                self.settings_ui.show(&s);
            }
            UiCommand::OpenConnect(h) => self.connect.show(h.as_ref()),
            UiCommand::EnterToken(h) => self.connect.ask_token(&h),
            UiCommand::OpenHelp(h) => self.help = Some(h),
            UiCommand::BrowseSessions => self.sessions.show_browser(),
            UiCommand::PickSessionFile => self.sessions.pick_file(ctx),
            UiCommand::ImportNvidiaSmi => self.sessions.import_nvidia_smi(ctx),
            UiCommand::OpenExport => self.sessions.export_open = true,
            UiCommand::OpenAgentSessions => {
                self.backend.list_agent_sessions();
                self.agent_sessions = Some(None);
            }
            UiCommand::RefreshAgentSessions => self.backend.list_agent_sessions(),
            UiCommand::DownloadAgentSession(name) => self.backend.download_agent_session(&name),
            UiCommand::BackToLive => {
                self.view = None;
                self.selected = None;
                self.graph.free_range = None;
            }
            UiCommand::AskAction(key, action) => self.confirm_request(live, key, action),
            UiCommand::Engine(c) => self.send_engine(c),
            UiCommand::TestRule(i, c) => {
                self.settings_ui.testing = self.backend.send(c).map(|id| (i, id));
            }
            UiCommand::SaveSettings(s) => self.save_settings(s),
            UiCommand::ApplySettings(s) => self.backend.apply_settings(*s),
            UiCommand::GoToLeak(c) => self.go_to_leak(c),
            UiCommand::StartDemo => self.restart_local(true),
            // Back from an agent: this computer's source as it was before (the demo when no
            // driver was in use).
            UiCommand::RetryDriver => {
                self.restart_local(self.backend.remote().is_some() && self.local_demo);
            }
            UiCommand::AskSwitchSource(to_demo) => self.switch_source = Some(to_demo),
            UiCommand::Connect(req) => self.attach(ctx, &req),
            UiCommand::SwitchHost(pick) => self.switch_host(ctx, pick),
            UiCommand::ForgetHost(h) => self.forget_host(&h),
            UiCommand::Disconnect => self.disconnect(),
            UiCommand::Job(c) => self.backend.job(c),
        }
    }

    /// Sends `c` to the engine shown; a manual action's row and detail pane wait for its
    /// reply under the id it was sent with.
    fn send_engine(&mut self, c: EngineCommand) {
        let manual = match &c {
            EngineCommand::Manual { key, action, .. } => Some((*key, action.clone())),
            _ => None,
        };
        let id = self.backend.send(c);
        if let (Some((key, action)), Some(id)) = (manual, id) {
            self.action_status.asked(key, &action, id, self.now());
        }
    }

    /// File → Disconnect: the agent shown is let go; this computer is shown again (started
    /// when it was not kept in the background).
    pub(super) fn disconnect(&mut self) {
        if self.backend.disconnect() {
            self.after_host_switch();
        } else {
            self.restart_local(self.local_demo);
        }
    }

    /// Selects the process of a leak clicked in the Leaks tab, opening its session when it
    /// was recorded elsewhere. Attached to an agent, the session is the agent's: it is
    /// downloaded (as Sessions → Sessions on the agent… does) and opened once it is here.
    pub(super) fn go_to_leak(&mut self, c: crate::front::gui::leaks::LeakClick) {
        let remote = self.backend.remote().is_some();
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
}
