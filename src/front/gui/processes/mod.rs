//! The table of every process on every GPU: sortable by each column, filterable.

mod cells;
mod columns;
mod filter_bar;
mod grouping;
mod header;
mod keyboard;
mod row_menu;
mod rows;
mod sorting;
mod state;

use egui::Ui;

use super::widgets;
use crate::engine::view::ProcessRow;
use crate::model::UnixMs;

use cells::Cells;
pub(crate) use columns::SortColumn;
use filter_bar::filter_bar;
pub use grouping::GroupBy;
pub(crate) use grouping::{group_rows, Item};
use header::{column_spec, header_cell};
use keyboard::keyboard_selection;
pub(crate) use row_menu::SIMULATED_PARK;
use rows::{group_row, process_row, Part};
pub(crate) use sorting::{matches, place, sort_rows};
pub(crate) use state::TableState;

/// The columns shown: those not hidden, the Container column once some process runs in a
/// container, a recorded session's only.
fn visible_columns(t: &TableState<'_>, rows: &[&ProcessRow]) -> Vec<(SortColumn, &'static str)> {
    let any_container = rows
        .iter()
        .any(|r| r.info.container_id.is_some() || r.info.pod.is_some());
    SortColumn::ALL
        .into_iter()
        .filter(|(c, _)| !t.hidden.contains(c))
        .filter(|(c, _)| *c != SortColumn::Container || any_container)
        .filter(|(c, _)| !t.recorded || c.recorded())
        .collect()
}

/// Draws the filter box and the table.
pub(crate) fn table(ui: &mut Ui, rows: Vec<&ProcessRow>, t: &mut TableState<'_>, now: UnixMs) {
    let mut rows = sorted_rows(rows, t, now);
    let shown = rows.len();
    let groups = (*t.group_by != GroupBy::None).then(|| group_rows(&rows, *t.group_by));
    let items = table_items(&mut rows, groups.as_deref(), t.collapsed);
    filter_bar(ui, t, shown);
    if items.is_empty() {
        ui.add_space(12.0);
        ui.label(if t.filter.is_empty() {
            "No process holds GPU memory right now."
        } else {
            "No process matches the filter."
        });
        return;
    }
    let scroll_to = keyboard_selection(ui, t, &rows, &items);
    let cells = Cells::new(t, &rows, largest_group(&items), now);
    let visible = visible_columns(t, &rows);
    // PID and Name stay on the left, always in view: they say which process a line is while
    // the rest scrolls sideways (Shift+wheel, or the scroll bar).
    let frozen_n = visible
        .iter()
        .take_while(|(c, _)| matches!(c, SortColumn::Pid | SortColumn::Name))
        .count();
    let (frozen, scrolled) = visible.split_at(frozen_n);
    let lines = Lines {
        items: &items,
        cells: &cells,
        row_h: ui.text_style_height(&egui::TextStyle::Monospace) + 6.0,
        scroll_to,
    };
    let sync = egui::Id::unique("process-table-v-offset");
    let (shared, hovered, frozen_w) = last_frame(ui, sync);
    let (full, left, right) = halves_rects(ui, frozen_w);
    let frozen_half = ui.scope_builder(egui::UiBuilder::new().max_rect(left), |ui| {
        let part = Part {
            cols: frozen,
            first: 0,
            frozen: true,
        };
        half_table(ui, t, &lines, &part, (shared, hovered))
    });
    let pushed = wheel_over_frozen(ui, left);
    let scrolled_half = side_half(ui, right, sync, pushed, |ui| {
        let part = Part {
            cols: scrolled,
            first: frozen_n,
            frozen: false,
        };
        half_table(ui, t, &lines, &part, (shared, hovered))
    });
    ui.advance_cursor_after_rect(full);
    let seen = [frozen_half.inner, scrolled_half];
    halves_in_step(ui, sync, &seen, (shared, hovered, frozen_w));
}

/// What the halves kept from the last frame under `sync`: the vertical offset, the hovered
/// line, and the frozen half's width. The frozen half is as wide as its columns were drawn
/// last (a column resized there widens it the next frame); the rest of the width scrolls.
fn last_frame(ui: &Ui, sync: egui::Id) -> (f32, Option<usize>, f32) {
    let shared = ui.ctx().data(|d| d.get_temp::<f32>(sync)).unwrap_or(0.0);
    let hovered = ui.ctx().data(|d| d.get_temp::<usize>(sync.with("hover")));
    let frozen_w = ui
        .ctx()
        .data(|d| d.get_temp::<f32>(sync.with("frozen-width")))
        .unwrap_or(FROZEN_START_WIDTH);
    (shared, hovered, frozen_w)
}

/// The rows the filter keeps, sorted by the table's column (with each row's leak rate,
/// stale and exited status for the columns that sort by them).
fn sorted_rows<'r>(
    rows: Vec<&'r ProcessRow>,
    t: &TableState<'_>,
    now: UnixMs,
) -> Vec<&'r ProcessRow> {
    let mut rows: Vec<&ProcessRow> = rows.into_iter().filter(|r| matches(r, t.filter)).collect();
    let status = |r: &ProcessRow| {
        (
            t.leaks
                .get(&crate::engine::view::LeakKey::Process(r.series_key()))
                .map_or(-1.0, |b| b.rate_mib_per_min),
            t.stale_gpus.contains(&r.device_index) && r.exited_at_ms.is_none(),
            r.exited_at_ms.is_some(),
        )
    };
    sort_rows(&mut rows, *t.sort, *t.desc, now, &status);
    rows
}

/// The memory of the largest group among the table's lines (0 when not grouped).
fn largest_group(items: &[Item<'_>]) -> u64 {
    items
        .iter()
        .filter_map(|i| match i {
            Item::Group(_, _, bytes) => Some(*bytes),
            Item::Row(_) => None,
        })
        .max()
        .unwrap_or(0)
}

/// The table's room (what is left of the pane) and its two halves side by side: the frozen
/// one `frozen_w` wide (at most 60 % of it), and the rest.
fn halves_rects(ui: &Ui, frozen_w: f32) -> (egui::Rect, egui::Rect, egui::Rect) {
    let full = ui.available_rect_before_wrap();
    let split = full.left() + frozen_w.min(full.width() * 0.6);
    let left = egui::Rect::from_min_max(full.min, egui::pos2(split, full.bottom()));
    let right = egui::Rect::from_min_max(egui::pos2(split, full.top()), full.max);
    (full, left, right)
}

/// The half after the frozen columns, in `right`, drawn by `draw` inside its sideways
/// scroll, moved by the wheel `pushed` over the frozen half; keeps its sideways offset.
fn side_half(
    ui: &mut Ui,
    right: egui::Rect,
    sync: egui::Id,
    pushed: f32,
    draw: impl FnOnce(&mut Ui) -> Half,
) -> Half {
    let side = sync.with("side-offset");
    let last_side = ui.ctx().data(|d| d.get_temp::<f32>(side)).unwrap_or(0.0);
    ui.scope_builder(egui::UiBuilder::new().max_rect(right), |ui| {
        let mut area = side_scroll(ui);
        if pushed != 0.0 {
            area = area.horizontal_scroll_offset((last_side - pushed).max(0.0));
        }
        // Its bar is drawn whenever columns lie beyond the right edge (egui's floating bar
        // shows only under the pointer: the GPU memory columns, hidden behind the detail pane,
        // had no sign of being there). Floating still, so that it takes no height: a solid bar
        // made this half's rows scroll 10 points further than the frozen half's, and the last
        // row's figures stood out of line with its PID. The table's own bar keeps the style.
        let style = ui.spacing().scroll;
        ui.spacing_mut().scroll = egui::style::ScrollStyle {
            floating_width: 6.0,
            dormant_handle_opacity: 1.0,
            dormant_background_opacity: 1.0,
            ..egui::style::ScrollStyle::floating()
        };
        let out = area.show(ui, |ui| {
            ui.spacing_mut().scroll = style;
            draw(ui)
        });
        let offset = out.state.clamped_offset().x;
        ui.ctx().data_mut(|d| d.insert_temp(side, offset));
        out.inner
    })
    .inner
}

/// The two halves scroll up and down as one (the one scrolled gives its offset to both),
/// share the hovered row, and the frozen half keeps the width its columns were drawn at;
/// `last` is what the frame began with (offset, hovered row, frozen width).
fn halves_in_step(
    ui: &Ui,
    sync: egui::Id,
    seen: &[Half; 2],
    (shared, hovered, frozen_w): (f32, Option<usize>, f32),
) {
    let moved = if (seen[0].offset - shared).abs() > 0.5 {
        seen[0].offset
    } else {
        seen[1].offset
    };
    let hover = seen[0].hovered.or(seen[1].hovered);
    if (moved - shared).abs() > 0.5 || hover != hovered || (seen[0].width - frozen_w).abs() > 0.5 {
        ui.ctx().request_repaint();
    }
    ui.ctx().data_mut(|d| {
        d.insert_temp(sync, moved);
        d.insert_temp(sync.with("frozen-width"), seen[0].width);
        match hover {
            Some(i) => {
                d.insert_temp(sync.with("hover"), i);
            }
            None => d.remove::<usize>(sync.with("hover")),
        }
    });
}

/// The sideways part of a wheel turned over the frozen half (Shift+wheel, or a touchpad's
/// sideways swipe), taken from the frame's input: egui gives it only to the scroll area under
/// the pointer, and the frozen half scrolls up and down only. The columns after it scroll by it.
fn wheel_over_frozen(ui: &Ui, frozen: egui::Rect) -> f32 {
    if !ui.rect_contains_pointer(frozen) {
        return 0.0;
    }
    ui.input_mut(|i| std::mem::take(&mut i.smooth_scroll_delta.x))
}

/// The sideways scroll of the table's columns after PID and Name. A window starts with it
/// at its left: a sideways scroll restored from the last run (egui keeps it) is not.
fn side_scroll(ui: &Ui) -> egui::ScrollArea {
    let started = egui::Id::unique("process-table-h-started");
    let area = egui::ScrollArea::horizontal().id_salt("process-table-h");
    if ui.ctx().data(|d| d.get_temp::<bool>(started)).is_none() {
        ui.ctx().data_mut(|d| d.insert_temp(started, true));
        return area.horizontal_scroll_offset(0.0);
    }
    area
}

/// What both halves of the table draw from.
struct Lines<'a, 'r> {
    items: &'a [Item<'r>],
    cells: &'a Cells<'a>,
    row_h: f32,
    scroll_to: Option<usize>,
}

/// What a half of the table reports after a frame: its vertical offset and the line under
/// the pointer.
#[derive(Debug, Clone, Copy, Default)]
struct Half {
    offset: f32,
    hovered: Option<usize>,
    /// The width of its columns.
    width: f32,
}

/// The frozen half's width before it is first drawn: the swatch, PID and Name at their
/// starting widths.
const FROZEN_START_WIDTH: f32 = 12.0 + 64.0 + 130.0 + 3.0 * 8.0;

/// One half of the table: the frozen columns (with the colour swatch) or the columns after
/// them, at vertical offset `offset`, the line `hovered` (in either half) lit.
fn half_table(
    ui: &mut Ui,
    t: &mut TableState<'_>,
    l: &Lines<'_, '_>,
    part: &Part<'_, '_>,
    (offset, hovered): (f32, Option<usize>),
) -> Half {
    let (frozen, cols) = (part.frozen, part.cols);
    // A selected row is tinted, not filled: coloured text on it stays readable.
    let sel = &mut ui.visuals_mut().selection.bg_fill;
    *sel = sel.gamma_multiply(widgets::ROW_SELECTION_ALPHA);
    let b = table_builder(ui, frozen, cols, l.scroll_to, offset);
    let mut seen = Half::default();
    let out = b
        .header(l.row_h + 2.0, |mut header| {
            if frozen {
                header.col(|_| {});
            }
            for (col, title) in cols {
                header.col(|ui| header_cell(ui, t, *col, title));
            }
        })
        .body(|body| {
            body.rows(l.row_h, l.items.len(), |mut row| {
                let i = row.index();
                row.set_hovered(hovered == Some(i));
                match l.items[i] {
                    Item::Row(r) => process_row(&mut row, r, t, l.cells, part),
                    Item::Group(k, n, bytes) => {
                        group_row(&mut row, (k, n, bytes), t, l.cells.memory_units(), part)
                    }
                }
                if row.response().hovered() {
                    seen.hovered = Some(i);
                }
            });
        });
    seen.offset = out.state.clamped_offset().y;
    seen.width = out.content_size.x;
    seen
}

/// The builder of a half of the table: its id, stripes, resizable columns (after the
/// swatch's, in the frozen half), clicks, its vertical offset and the row to scroll to.
fn table_builder<'u>(
    ui: &'u mut Ui,
    frozen: bool,
    cols: &[(SortColumn, &str)],
    scroll_to: Option<usize>,
    offset: f32,
) -> egui_extras::TableBuilder<'u> {
    let mut b = egui_extras::TableBuilder::new(ui)
        .id_salt(if frozen {
            "process-table-frozen"
        } else {
            "process-table"
        })
        .striped(true)
        .resizable(true)
        // Rows answer clicks but are not Tab stops (a stop per cell made Tab walk
        // every cell of every row); the keyboard moves the selection with ↑/↓.
        .sense(egui::Sense::CLICK)
        .auto_shrink([frozen, false])
        .vertical_scroll_offset(offset)
        .animate_scrolling(false)
        .cell_layout(egui::Layout::left_to_right(egui::Align::Center));
    if frozen {
        // Its scroll bar would stand between the halves; the other half's serves both.
        b = b
            .scroll_bar_visibility(egui::scroll_area::ScrollBarVisibility::AlwaysHidden)
            .column(egui_extras::Column::exact(12.0));
    }
    for (c, _) in cols {
        b = b.column(column_spec(*c));
    }
    if let Some(i) = scroll_to {
        b = b.scroll_to_row(i, None);
    }
    b
}

/// The table's lines in order: each group's header then its rows (unless folded), or the
/// rows alone; `rows` keeps the rows shown, in that order.
fn table_items<'r: 'g, 'g>(
    rows: &mut Vec<&'r ProcessRow>,
    groups: Option<&'g [(String, Vec<&'r ProcessRow>, u64)]>,
    collapsed: &std::collections::HashSet<String>,
) -> Vec<Item<'g>> {
    let mut items: Vec<Item<'g>> = Vec::with_capacity(rows.len());
    match groups {
        Some(groups) => {
            rows.clear();
            for (k, members, bytes) in groups {
                items.push(Item::Group(k, members.len(), *bytes));
                if !collapsed.contains(k) {
                    items.extend(members.iter().map(|r| Item::Row(r)));
                    rows.extend(members.iter().copied());
                }
            }
        }
        None => items.extend(rows.iter().map(|r| Item::Row(r))),
    }
    items
}
