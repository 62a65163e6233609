//! The Activity tab: every rule firing and manual action, newest first.

use egui::{RichText, Ui};

use super::pane::{Pane, PaneCx};
use crate::front::gui::ui_command::UiCommand;
use crate::front::gui::widgets;
use crate::model::format;

/// The Activity tab.
#[derive(Debug, Default)]
pub(crate) struct ActivityPane;

impl Pane for ActivityPane {
    fn title(&self, _ui: &Ui, cx: &PaneCx<'_>) -> RichText {
        let n = cx.monitor.activity.len();
        RichText::new(if n > 0 {
            format!("Activity ({n})")
        } else {
            "Activity".into()
        })
        .strong()
    }

    fn hint(&self) -> &'static str {
        "Ctrl+3"
    }

    fn ui(&mut self, ui: &mut Ui, cx: &mut PaneCx<'_>, _out: &mut Vec<UiCommand>) {
        let m = cx.monitor;
        if m.activity.is_empty() {
            ui.add_space(8.0);
            ui.label("Nothing yet: every rule firing (would act, acted, failed, skipped) and every manual action is listed here.");
            return;
        }
        egui::ScrollArea::vertical()
            .id_salt("activity")
            .auto_shrink([false, false])
            .show(ui, |ui| {
                egui::Grid::new("activity-grid")
                    .num_columns(6)
                    .striped(true)
                    .spacing([14.0, 4.0])
                    .show(ui, |ui| {
                        for h in [
                            "Time",
                            "Rule",
                            "Action",
                            "Target",
                            "Outcome",
                            "What happened",
                        ] {
                            ui.label(RichText::new(h).strong());
                        }
                        ui.end_row();
                        for a in m.activity.iter().rev() {
                            ui.monospace(format::clock(a.unix_ms));
                            ui.label(&a.rule);
                            ui.label(&a.action);
                            ui.label(a.target.describe());
                            let color = widgets::outcome_color(a.outcome, ui.visuals().dark_mode);
                            ui.label(RichText::new(a.outcome.label()).color(color).strong());
                            ui.add(egui::Label::new(&a.detail).wrap());
                            ui.end_row();
                        }
                    });
            });
    }
}
