//! The bar over the table: the filter and the grouping.

use egui::{RichText, Ui};

use super::grouping::GroupBy;
use super::state::TableState;

/// The line above the table: filter, how many shown, grouping.
pub(super) fn filter_bar(ui: &mut Ui, t: &mut TableState<'_>, shown: usize) {
    ui.horizontal(|ui| {
        let label = ui.label("Filter");
        let edit = ui
            .add(
                egui::TextEdit::singleline(t.filter)
                    .hint_text("Ctrl+F: pid, name, command, user")
                    .desired_width(280.0),
            )
            .labelled_by(label.id);
        if std::mem::take(t.focus_filter) {
            edit.request_focus();
        }
        if !t.filter.is_empty()
            && ui
                .small_button("✖")
                .on_hover_text("Clear the filter")
                .clicked()
        {
            t.filter.clear();
        }
        ui.label(RichText::new(format!("{shown} shown")).weak());
        if t.recorded {
            ui.label(RichText::new("GPU %, CPU and RSS: not in session logs").weak())
                .on_hover_text("A session log keeps each process's GPU memory, not its share of the GPU, its CPU use or its host memory: those columns are shown live only.");
        }
        ui.separator();
        let label = ui.label("Group");
        egui::ComboBox::from_id_salt("table-group")
            .selected_text(
                GroupBy::ALL
                    .iter()
                    .find(|(g, _)| g == t.group_by)
                    .map_or("", |(_, l)| *l),
            )
            .show_ui(ui, |ui| {
                for (g, l) in GroupBy::ALL {
                    ui.selectable_value(t.group_by, g, l);
                }
            })
            .response
            .labelled_by(label.id);
    });
}
