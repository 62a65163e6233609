//! A process row's context menu.

use egui::{RichText, Ui};

use super::state::TableState;
use crate::engine::view::ProcessRow;
use crate::front::gui::ui_command::UiCommand;

/// Why a simulated process's Park and Resume are off.
pub(crate) const SIMULATED_PARK: &str =
    "A simulated process cannot be parked or resumed: no program stands behind it (the demo shows its scripted park).";

/// A live process's right-click menu: park or resume, terminate, kill, details.
pub(super) fn row_menu(ui: &mut Ui, r: &ProcessRow, t: &mut TableState<'_>) {
    let key = r.series_key();
    ui.label(RichText::new(format!("{} · PID {}", r.info.name, r.key.pid)).strong());
    if let Some(request) = t.request.as_deref_mut() {
        let (label, action) = match r.parked {
            Some(_) => ("Resume…", crate::act::rules::Action::Resume),
            None => ("Park…", crate::act::rules::Action::Park),
        };
        if ui
            .add_enabled(!r.simulated, egui::Button::new(label))
            .on_hover_text("Park: move its GPU memory to host memory (it waits, not killed); Resume: back to the GPU")
            .on_disabled_hover_text(SIMULATED_PARK)
            .clicked()
        {
            request.push(UiCommand::AskAction(key, action));
            ui.close();
        }
        if ui.button("Terminate…").clicked() {
            request.push(UiCommand::AskAction(
                key,
                crate::act::rules::Action::Terminate {
                    grace_seconds: crate::act::rules::model::DEFAULT_GRACE_SECONDS,
                },
            ));
            ui.close();
        }
        if ui.button("Kill…").clicked() {
            request.push(UiCommand::AskAction(
                key,
                crate::act::rules::Action::Signal {
                    signal: "SIGKILL".into(),
                },
            ));
            ui.close();
        }
    }
    if ui.button("Show details").clicked() {
        *t.selected = Some(key);
        ui.close();
    }
    ui.separator();
    if ui.button("Copy PID").clicked() {
        ui.ctx().copy_text(r.key.pid.to_string());
        ui.close();
    }
    if ui
        .button("Copy command line")
        .on_hover_text(&r.info.cmdline)
        .clicked()
    {
        ui.ctx().copy_text(r.info.cmdline.clone());
        ui.close();
    }
}
