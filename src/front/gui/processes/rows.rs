//! The rows of one half of the table: a group's header row and a process's row.

use egui::RichText;

use super::cells::{cell, Cells};
use super::columns::SortColumn;
use super::row_menu::row_menu;
use super::state::TableState;
use crate::engine::view::ProcessRow;
use crate::front::gui::widgets;
use crate::model::format;

/// The columns of one half of the table.
pub(super) struct Part<'a, 'c> {
    /// Its columns.
    pub(super) cols: &'a [(SortColumn, &'c str)],
    /// The index of its first column among those shown.
    pub(super) first: usize,
    /// The frozen half (PID and Name, after the colour swatch).
    pub(super) frozen: bool,
}

/// A group's header line in one half of the table (as [`process_row`]); a click folds or
/// unfolds it.
pub(super) fn group_row(
    row: &mut egui_extras::TableRow<'_, '_>,
    (k, n, bytes): (&str, usize, u64),
    t: &mut TableState<'_>,
    units: format::Units,
    part: &Part<'_, '_>,
) {
    let open = !t.collapsed.contains(k);
    if part.frozen {
        row.col(|_| {});
    }
    for (i, (col, _)) in part.cols.iter().enumerate() {
        row.col(|ui| {
            let text = match (part.first + i, col) {
                (0, _) => format!("{} {k}", if open { "▼" } else { "▶" }),
                (1, _) => format!("{n} process{}", if n == 1 { "" } else { "es" }),
                (_, SortColumn::Memory) => format::opt_bytes(units, Some(bytes)),
                _ => String::new(),
            };
            if !text.is_empty() {
                ui.add(
                    egui::Label::new(RichText::new(text).monospace().strong())
                        .truncate()
                        .selectable(false),
                );
            }
        });
    }
    if row.response().clicked() {
        if open {
            t.collapsed.insert(k.to_string());
        } else {
            t.collapsed.remove(k);
        }
    }
}

/// A process's line in one half of the table (the frozen half starts with the swatch): a
/// click selects, right-click offers actions.
pub(super) fn process_row(
    row: &mut egui_extras::TableRow<'_, '_>,
    r: &ProcessRow,
    t: &mut TableState<'_>,
    cells: &Cells<'_>,
    part: &Part<'_, '_>,
) {
    let exited = r.exited_at_ms.is_some();
    let key = r.series_key();
    let sel = *t.selected == Some(key);
    row.set_selected(sel);
    if part.frozen {
        row.col(|ui| {
            widgets::color_swatch(ui, widgets::Colors::of(ui).slot(r.color_slot));
        });
    }
    for (col, _) in part.cols {
        row.col(|ui| cell(ui, r, *col, cells));
    }
    let resp = row.response();
    if resp.clicked() {
        *t.selected = if sel { None } else { Some(key) };
    }
    if !exited {
        resp.context_menu(|ui| row_menu(ui, r, t));
    }
}
