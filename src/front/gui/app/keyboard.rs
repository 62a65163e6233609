//! The window's keyboard shortcuts, and Esc closing the topmost window.

use egui::Ui;

use super::{
    Help, UiCommand, VramApp, FILTER_SHORTCUT, HELP_SHORTCUT, OPEN_SHORTCUT, SETTINGS_SHORTCUT,
};
use crate::front::gui::ui_state::BottomTab;

impl VramApp {
    /// The window-wide keys: Ctrl+F, Ctrl+, (settings), Ctrl+O (open a session), Esc,
    /// Ctrl+1/2/3/4, Delete.
    pub(super) fn keyboard(&mut self, ui: &mut Ui, ctx: &egui::Context) {
        if ui.input_mut(|i| i.consume_shortcut(&FILTER_SHORTCUT)) {
            self.tabs.processes.focus_filter = true;
        }
        if ui.input_mut(|i| i.consume_shortcut(&SETTINGS_SHORTCUT)) {
            self.push(UiCommand::OpenSettings);
        }
        if ui.input_mut(|i| i.consume_shortcut(&OPEN_SHORTCUT)) {
            self.push(UiCommand::PickSessionFile);
        }
        if ui.input_mut(|i| i.consume_shortcut(&HELP_SHORTCUT)) {
            self.push(UiCommand::OpenHelp(Help::Shortcuts));
        }
        // Esc closes the topmost thing: a window (settings, sessions, export, connect), else
        // the detail pane. Ctrl+1/2/3/4 switch the tabs under the graph.
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
                self.push(UiCommand::AskAction(
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
}
