//! The header: each column's width, its sorting button and the columns menu.

use egui::{RichText, Ui};

use super::columns::SortColumn;
use super::state::TableState;

/// The header's menu: a checkbox per column (PID and memory always shown; a recorded
/// session's columns that its log does not keep are off and say so).
fn columns_menu(ui: &mut Ui, hidden: &mut Vec<SortColumn>, recorded: bool) {
    ui.label(RichText::new("Columns").strong());
    for (c, name) in SortColumn::ALL {
        let unrecorded = recorded && !c.recorded();
        let mut shown = !hidden.contains(&c) && !unrecorded;
        // Without PID and memory a row means nothing.
        let fixed = matches!(c, SortColumn::Pid | SortColumn::Memory);
        if ui
            .add_enabled(!fixed && !unrecorded, egui::Checkbox::new(&mut shown, name))
            .on_disabled_hover_text(if unrecorded {
                "Not in session logs: shown live only"
            } else {
                "Always shown"
            })
            .changed()
        {
            if shown {
                hidden.retain(|h| *h != c);
            } else {
                hidden.push(c);
            }
        }
    }
}

/// A column's width rules.
pub(super) fn column_spec(c: SortColumn) -> egui_extras::Column {
    use egui_extras::Column;
    match c {
        SortColumn::Pid => Column::initial(64.0).at_least(48.0),
        SortColumn::Name => Column::initial(130.0).at_least(60.0).clip(true),
        SortColumn::User => Column::initial(80.0).at_least(40.0).clip(true),
        SortColumn::Container => Column::initial(120.0).at_least(50.0).clip(true),
        SortColumn::GpuUtil => Column::initial(56.0).at_least(40.0),
        SortColumn::Gpu => Column::initial(40.0).at_least(30.0),
        SortColumn::Memory => Column::initial(100.0).at_least(70.0),
        SortColumn::Delta => Column::initial(84.0).at_least(60.0),
        SortColumn::Age => Column::initial(70.0).at_least(50.0),
        SortColumn::Cpu => Column::initial(56.0).at_least(40.0),
        SortColumn::Rss => Column::initial(84.0).at_least(50.0),
        SortColumn::Status => Column::initial(280.0).at_least(60.0).clip(true),
        SortColumn::Command => Column::remainder().at_least(120.0).clip(true),
    }
}

/// What a column's title does, said in its tooltip.
const SORT_HINT: &str = "Click to sort · right-click to show or hide columns";

/// A column's title: click sorts (again: the other way), right-click shows or hides columns.
pub(super) fn header_cell(ui: &mut Ui, t: &mut TableState<'_>, col: SortColumn, title: &str) {
    let arrow = match (*t.sort == col, *t.desc) {
        (true, true) => " ▼",
        (true, false) => " ▲",
        _ => "",
    };
    let text = |s: String| RichText::new(s).monospace().strong();
    // The room of the sort arrow is kept on every header: a narrow column sized by its
    // title would widen when sorted and move the headers after it under the pointer.
    let widest = egui::WidgetText::from(text(format!("{title} ▼"))).into_galley(
        ui,
        Some(egui::TextWrapMode::Extend),
        f32::INFINITY,
        egui::TextStyle::Monospace,
    );
    ui.set_min_width(widest.size().x + 2.0 * ui.spacing().button_padding.x);
    let resp = ui
        .selectable_label(*t.sort == col, text(format!("{title}{arrow}")))
        .on_hover_text(match col.meaning() {
            Some(m) => format!("{m}\n\n{SORT_HINT}"),
            None => SORT_HINT.to_string(),
        });
    if resp.clicked() {
        if *t.sort == col {
            *t.desc = !*t.desc;
        } else {
            *t.sort = col;
            *t.desc = col.numeric();
        }
    }
    let recorded = t.recorded;
    resp.context_menu(|ui| columns_menu(ui, t.hidden, recorded));
}
