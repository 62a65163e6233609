//! The Guard tab: where the OOM guard stands on each GPU.

use egui::{RichText, Ui};

use super::pane::{Pane, PaneCx};
use crate::front::gui::guard_pane;
use crate::front::gui::ui_command::UiCommand;

/// The Guard tab.
#[derive(Debug, Default)]
pub(crate) struct GuardPane;

impl Pane for GuardPane {
    fn title(&self, _ui: &Ui, cx: &PaneCx<'_>) -> RichText {
        RichText::new(guard_pane::tab_label(cx.monitor)).strong()
    }

    fn hint(&self) -> &'static str {
        "Ctrl+4: the OOM guard on each GPU"
    }

    fn ui(&mut self, ui: &mut Ui, cx: &mut PaneCx<'_>, _out: &mut Vec<UiCommand>) {
        guard_pane::show(ui, cx.monitor, cx.selected_gpu);
    }
}
