//! The table of every process on every GPU: sortable by each column, filterable.

use egui::{RichText, Ui};
use serde::{Deserialize, Serialize};

use super::widgets;
use crate::engine::view::ProcessRow;
use crate::model::format::{self, Units};
use crate::model::history::ProcSeriesKey;
use crate::model::UnixMs;

/// Columns the table sorts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortColumn {
    /// Process id.
    Pid,
    /// Process name.
    Name,
    /// Owner.
    User,
    /// GPU index.
    Gpu,
    /// GPU memory now.
    Memory,
    /// Change over the last minute.
    Delta,
    /// Time since start.
    Age,
    /// Host CPU, percent of a core.
    Cpu,
    /// Host resident memory.
    Rss,
    /// Leak flag (by rate), stale, exited.
    Status,
    /// Command line.
    Command,
    /// Container name (else short id), with the pod as `namespace/pod` in its tooltip.
    Container,
    /// The process's share of the GPU's SM time, where the driver gives it.
    GpuUtil,
}

/// How the table groups its rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupBy {
    /// One flat list.
    #[default]
    None,
    /// A group per user.
    User,
    /// A group per container (or pod); processes outside any in one group.
    Container,
}

impl GroupBy {
    /// Every choice with its label.
    pub const ALL: [(GroupBy, &'static str); 3] = [
        (GroupBy::None, "No grouping"),
        (GroupBy::User, "By user"),
        (GroupBy::Container, "By container"),
    ];

    /// The group a row belongs to.
    pub fn key(self, r: &ProcessRow) -> String {
        match self {
            GroupBy::None => String::new(),
            GroupBy::User if r.info.user.is_empty() => "(unknown user)".into(),
            GroupBy::User => r.info.user.clone(),
            GroupBy::Container => {
                let c = container_cell(r);
                if c.is_empty() {
                    "(no container)".into()
                } else {
                    c
                }
            }
        }
    }
}

/// A line of the table: a group's header or a process.
#[derive(Debug, Clone, Copy)]
pub enum Item<'a> {
    /// A group: its key, how many processes and how much GPU memory they hold.
    Group(&'a str, usize, u64),
    /// A process.
    Row(&'a ProcessRow),
}

/// The groups of `rows` (already sorted): each group's key, its rows in their order and the
/// GPU memory they hold now; the largest group first.
pub fn group_rows<'a>(
    rows: &[&'a ProcessRow],
    by: GroupBy,
) -> Vec<(String, Vec<&'a ProcessRow>, u64)> {
    let mut groups: Vec<(String, Vec<&'a ProcessRow>, u64)> = Vec::new();
    for r in rows {
        let k = by.key(r);
        let used = r
            .used_bytes
            .filter(|_| r.exited_at_ms.is_none())
            .unwrap_or(0);
        match groups.iter_mut().find(|g| g.0 == k) {
            Some(g) => {
                g.1.push(r);
                g.2 += used;
            }
            None => groups.push((k, vec![r], used)),
        }
    }
    groups.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    groups
}

impl SortColumn {
    /// Every column in table order, with its title.
    pub const ALL: [(SortColumn, &'static str); 13] = [
        (SortColumn::Pid, "PID"),
        (SortColumn::Name, "Name"),
        (SortColumn::User, "User"),
        (SortColumn::Container, "Container"),
        (SortColumn::Gpu, "GPU"),
        (SortColumn::Memory, "GPU memory"),
        (SortColumn::GpuUtil, "GPU %"),
        (SortColumn::Delta, "Δ 1 min"),
        // The leak badge right after the memory figures: seen without scrolling sideways.
        (SortColumn::Status, "Status"),
        (SortColumn::Age, "Age"),
        (SortColumn::Cpu, "CPU"),
        (SortColumn::Rss, "RSS"),
        (SortColumn::Command, "Command line"),
    ];

    /// False for the columns a session log does not keep (GPU %, CPU, RSS: sampled live,
    /// never recorded).
    pub fn recorded(self) -> bool {
        !matches!(
            self,
            SortColumn::GpuUtil | SortColumn::Cpu | SortColumn::Rss
        )
    }

    fn numeric(self) -> bool {
        matches!(
            self,
            SortColumn::Memory
                | SortColumn::Delta
                | SortColumn::Age
                | SortColumn::Status
                | SortColumn::Cpu
                | SortColumn::Rss
                | SortColumn::GpuUtil
        )
    }
}

/// What the table reads and changes.
pub struct TableState<'a> {
    /// Units for memory cells.
    pub units: Units,
    /// Sort column.
    pub sort: &'a mut SortColumn,
    /// Descending?
    pub desc: &'a mut bool,
    /// Filter text.
    pub filter: &'a mut String,
    /// Focus the filter box this frame (Ctrl+F).
    pub focus_filter: &'a mut bool,
    /// Selected process.
    pub selected: &'a mut Option<ProcSeriesKey>,
    /// A manual action asked for from the context menu; `None` where actions are off (a
    /// recorded session is on screen).
    pub request: Option<&'a mut Option<(ProcSeriesKey, crate::act::rules::Action)>>,
    /// GPUs whose process list failed at the last sample (their rows are the last good list).
    pub stale_gpus: Vec<u32>,
    /// Leak flags by series.
    pub leaks: &'a std::collections::HashMap<crate::engine::view::LeakKey, super::leaks::LeakBadge>,
    /// Per GPU, the memory of listed PIDs not running here (the View's).
    pub orphans: &'a [crate::detect::orphans::OrphanGpu],
    /// The host the View is about when it is an agent's (`None`: this computer): the
    /// orphaned PIDs' wording names it.
    pub host: Option<&'a str>,
    /// Columns the user hid.
    pub hidden: &'a mut Vec<SortColumn>,
    /// Grouping.
    pub group_by: &'a mut GroupBy,
    /// Groups folded shut (by key).
    pub collapsed: &'a mut std::collections::HashSet<String>,
    /// A window (Settings, Sessions, Export, Connect) is open: ↑/↓ are not the table's.
    pub window_open: bool,
    /// The processes with a recent manual action and how it stands: shown at the start of
    /// their row's Name cell, where the action was taken.
    pub actions: &'a std::collections::HashMap<ProcSeriesKey, super::action_status::State>,
    /// A recorded session is shown: the columns a session log does not keep are left out
    /// (see [`SortColumn::recorded`]), and the filter bar says so.
    pub recorded: bool,
}

/// Where the processes shown run, for "not running …": "here" on this computer, "on HOST"
/// for an agent's (`host`).
pub fn place(host: Option<&str>) -> String {
    host.map_or_else(|| "here".into(), |h| format!("on {h}"))
}

/// True when `row` matches the filter (pid, name, command line, user, container or pod;
/// case-insensitive).
pub fn matches(row: &ProcessRow, filter: &str) -> bool {
    let f = filter.trim().to_lowercase();
    let opt = |s: &Option<String>| s.as_deref().is_some_and(|s| s.to_lowercase().contains(&f));
    f.is_empty()
        || row.key.pid.to_string().contains(&f)
        || row.info.name.to_lowercase().contains(&f)
        || row.info.cmdline.to_lowercase().contains(&f)
        || row.info.user.to_lowercase().contains(&f)
        || opt(&row.info.container_name)
        || opt(&row.info.container_id)
        || opt(&row.info.pod)
}

/// The Container cell: the container's name (else its short id) and, for a pod, `ns/pod ·`
/// before it; empty outside a container.
pub fn container_cell(row: &ProcessRow) -> String {
    match (&row.info.pod, row.container_label()) {
        (Some(pod), Some(c)) => format!("{pod} · {c}"),
        (Some(pod), None) => pod.clone(),
        (None, Some(c)) => c,
        (None, None) => String::new(),
    }
}

/// Sorts rows in place by `col` (ties broken by pid so the order never flickers). Status
/// sorts by leak rate (`leak_rate` of the row's series), then stale, then exited.
pub fn sort_rows(
    rows: &mut [&ProcessRow],
    col: SortColumn,
    desc: bool,
    now: UnixMs,
    status: &dyn Fn(&ProcessRow) -> (f64, bool, bool),
) {
    rows.sort_by(|a, b| {
        let o = match col {
            SortColumn::Pid => a.key.pid.cmp(&b.key.pid),
            SortColumn::Name => a.info.name.cmp(&b.info.name),
            SortColumn::User => a.info.user.cmp(&b.info.user),
            SortColumn::Gpu => a.device_index.cmp(&b.device_index),
            SortColumn::Memory => a.used_bytes.cmp(&b.used_bytes),
            SortColumn::Delta => a.delta_1m_bytes.cmp(&b.delta_1m_bytes),
            SortColumn::Age => (now - a.started_ms()).cmp(&(now - b.started_ms())),
            SortColumn::Command => a.info.cmdline.cmp(&b.info.cmdline),
            SortColumn::Container => container_cell(a).cmp(&container_cell(b)),
            SortColumn::Cpu => a
                .cpu_pct
                .unwrap_or(-1.0)
                .total_cmp(&b.cpu_pct.unwrap_or(-1.0)),
            SortColumn::Rss => a.rss_bytes.cmp(&b.rss_bytes),
            SortColumn::GpuUtil => a.sm_util_pct.cmp(&b.sm_util_pct),
            SortColumn::Status => {
                let (ra, sa, ea) = status(a);
                let (rb, sb, eb) = status(b);
                ra.total_cmp(&rb).then(sa.cmp(&sb)).then(eb.cmp(&ea))
            }
        };
        let o = if desc { o.reverse() } else { o };
        o.then(a.key.pid.cmp(&b.key.pid))
            .then(a.device_index.cmp(&b.device_index))
    });
}

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

/// Draws the filter box and the table.
pub fn table(ui: &mut Ui, rows: Vec<&ProcessRow>, t: &mut TableState<'_>, now: UnixMs) {
    let mut rows: Vec<&ProcessRow> = rows.into_iter().filter(|r| matches(r, t.filter)).collect();
    let leaks = t.leaks;
    let stale_gpus = t.stale_gpus.clone();
    let status = |r: &ProcessRow| {
        (
            leaks
                .get(&crate::engine::view::LeakKey::Process(r.series_key()))
                .map_or(-1.0, |b| b.rate_mib_per_min),
            stale_gpus.contains(&r.device_index) && r.exited_at_ms.is_none(),
            r.exited_at_ms.is_some(),
        )
    };
    sort_rows(&mut rows, *t.sort, *t.desc, now, &status);
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
    // The Container column appears once some process runs in a container.
    let any_container = rows
        .iter()
        .any(|r| r.info.container_id.is_some() || r.info.pod.is_some());
    let cells = Cells::new(t, &rows, now);
    let visible: Vec<(SortColumn, &str)> = SortColumn::ALL
        .into_iter()
        .filter(|(c, _)| !t.hidden.contains(c))
        .filter(|(c, _)| *c != SortColumn::Container || any_container)
        .filter(|(c, _)| !t.recorded || c.recorded())
        .collect();
    let row_h = ui.text_style_height(&egui::TextStyle::Monospace) + 6.0;
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
        row_h,
        scroll_to,
    };
    let sync = egui::Id::unique("process-table-v-offset");
    let shared = ui.ctx().data(|d| d.get_temp::<f32>(sync)).unwrap_or(0.0);
    let hovered = ui.ctx().data(|d| d.get_temp::<usize>(sync.with("hover")));
    let mut seen = [Half::default(), Half::default()];
    // The frozen half is as wide as its columns were drawn last (a column resized there
    // widens it the next frame); the rest of the width scrolls.
    let frozen_w = ui
        .ctx()
        .data(|d| d.get_temp::<f32>(sync.with("frozen-width")))
        .unwrap_or(FROZEN_START_WIDTH);
    let full = ui.available_rect_before_wrap();
    let split = full.left() + frozen_w.min(full.width() * 0.6);
    let left = egui::Rect::from_min_max(full.min, egui::pos2(split, full.bottom()));
    let right = egui::Rect::from_min_max(egui::pos2(split, full.top()), full.max);
    ui.scope_builder(egui::UiBuilder::new().max_rect(left), |ui| {
        let part = Part {
            cols: frozen,
            first: 0,
            frozen: true,
        };
        seen[0] = half_table(ui, t, &lines, &part, (shared, hovered));
    });
    let pushed = wheel_over_frozen(ui, left);
    let side = sync.with("side-offset");
    let last_side = ui.ctx().data(|d| d.get_temp::<f32>(side)).unwrap_or(0.0);
    ui.scope_builder(egui::UiBuilder::new().max_rect(right), |ui| {
        let mut area = side_scroll(ui);
        if pushed != 0.0 {
            area = area.horizontal_scroll_offset((last_side - pushed).max(0.0));
        }
        let out = area.show(ui, |ui| {
            let part = Part {
                cols: scrolled,
                first: frozen_n,
                frozen: false,
            };
            seen[1] = half_table(ui, t, &lines, &part, (shared, hovered));
        });
        let offset = out.state.clamped_offset().x;
        ui.ctx().data_mut(|d| d.insert_temp(side, offset));
    });
    ui.advance_cursor_after_rect(full);
    // The two halves scroll up and down as one: the one scrolled gives its offset to both.
    let moved = if (seen[0].offset - shared).abs() > 0.5 {
        seen[0].offset
    } else {
        seen[1].offset
    };
    let hover = seen[0].hovered.or(seen[1].hovered);
    if (moved - shared).abs() > 0.5 || hover != hovered {
        ui.ctx().request_repaint();
    }
    if (seen[0].width - frozen_w).abs() > 0.5 {
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

/// The columns of one half of the table.
struct Part<'a, 'c> {
    /// Its columns.
    cols: &'a [(SortColumn, &'c str)],
    /// The index of its first column among those shown.
    first: usize,
    /// The frozen half (PID and Name, after the colour swatch).
    frozen: bool,
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
    if let Some(i) = l.scroll_to {
        b = b.scroll_to_row(i, None);
    }
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
                    Item::Group(k, n, bytes) => group_row(&mut row, (k, n, bytes), t, part),
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

/// The line above the table: filter, how many shown, grouping.
fn filter_bar(ui: &mut Ui, t: &mut TableState<'_>, shown: usize) {
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

/// Keyboard: ↑/↓ move the selection (when no text field, popup or window has the keys); the
/// line to scroll to.
fn keyboard_selection(
    ui: &mut Ui,
    t: &mut TableState<'_>,
    rows: &[&ProcessRow],
    items: &[Item<'_>],
) -> Option<usize> {
    // Not while a menu or a popup is open (its own ↑/↓), nor while a window such as
    // Settings has the keyboard. Esc is the detail pane's.
    let others_have_keys =
        ui.ctx().text_edit_focused() || egui::Popup::is_any_open(ui.ctx()) || t.window_open;
    if others_have_keys {
        return None;
    }
    let (down, up) = ui.input(|i| {
        (
            i.key_pressed(egui::Key::ArrowDown),
            i.key_pressed(egui::Key::ArrowUp),
        )
    });
    if !(down || up) {
        return None;
    }
    let cur = t
        .selected
        .and_then(|k| rows.iter().position(|r| r.series_key() == k));
    let next = match (cur, down) {
        (None, _) => 0,
        (Some(i), true) => (i + 1).min(rows.len().saturating_sub(1)),
        (Some(i), false) => i.saturating_sub(1),
    };
    let r = rows.get(next)?;
    if *t.selected != Some(r.series_key()) {
        // The detail pane was drawn before the table this frame: draw the
        // next one now rather than at the next sample.
        ui.ctx().request_repaint();
    }
    *t.selected = Some(r.series_key());
    let key = r.series_key();
    items
        .iter()
        .position(|i| matches!(i, Item::Row(r) if r.series_key() == key))
}

/// A column's width rules.
fn column_spec(c: SortColumn) -> egui_extras::Column {
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
        SortColumn::Status => Column::initial(200.0).at_least(60.0).clip(true),
        SortColumn::Command => Column::remainder().at_least(120.0).clip(true),
    }
}

/// A column's title: click sorts (again: the other way), right-click shows or hides columns.
fn header_cell(ui: &mut Ui, t: &mut TableState<'_>, col: SortColumn, title: &str) {
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
        .on_hover_text("Click to sort · right-click to show or hide columns");
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

/// A group's header line in one half of the table (as [`process_row`]); a click folds or
/// unfolds it.
fn group_row(
    row: &mut egui_extras::TableRow<'_, '_>,
    (k, n, bytes): (&str, usize, u64),
    t: &mut TableState<'_>,
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
                (_, SortColumn::Memory) => format::opt_bytes(t.units, Some(bytes)),
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

/// What every cell of a frame shares: units per column (Auto: the column's largest value
/// decides, so a column never mixes MiB and GiB), the clock, the status sources.
struct Cells<'a> {
    units: Units,
    mem: Units,
    delta: Units,
    rss: Units,
    now: UnixMs,
    stale_gpus: Vec<u32>,
    leaks: &'a std::collections::HashMap<crate::engine::view::LeakKey, super::leaks::LeakBadge>,
    orphans: &'a [crate::detect::orphans::OrphanGpu],
    host: Option<&'a str>,
    actions: &'a std::collections::HashMap<ProcSeriesKey, super::action_status::State>,
}

impl<'a> Cells<'a> {
    fn new(t: &TableState<'a>, rows: &[&ProcessRow], now: UnixMs) -> Self {
        let column_units = |size: fn(&ProcessRow) -> Option<u64>| {
            t.units
                .for_largest(rows.iter().filter_map(|r| size(r)).max().unwrap_or(0))
        };
        Self {
            units: t.units,
            mem: column_units(|r| r.used_bytes),
            delta: column_units(|r| r.delta_1m_bytes.map(i64::unsigned_abs)),
            rss: column_units(|r| r.rss_bytes),
            now,
            stale_gpus: t.stale_gpus.clone(),
            leaks: t.leaks,
            orphans: t.orphans,
            host: t.host,
            actions: t.actions,
        }
    }
}

/// A process's line in one half of the table (the frozen half starts with the swatch): a
/// click selects, right-click offers actions.
fn process_row(
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

/// Right-aligned contents (the numeric columns).
fn right(ui: &mut Ui, add: impl FnOnce(&mut Ui)) {
    ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), add);
}

/// One cell of a process's line.
fn cell(ui: &mut Ui, r: &ProcessRow, col: SortColumn, c: &Cells<'_>) {
    let exited = r.exited_at_ms.is_some();
    let weak = |s: String| {
        let rt = RichText::new(s).monospace();
        if exited {
            rt.weak().italics()
        } else {
            rt
        }
    };
    let plain = |ui: &mut Ui, s: String| ui.add(egui::Label::new(weak(s)).selectable(false));
    let clipped =
        |ui: &mut Ui, s: String| ui.add(egui::Label::new(weak(s)).truncate().selectable(false));
    match col {
        SortColumn::Pid => {
            plain(ui, r.key.pid.to_string()).on_hover_text(&r.info.cmdline);
        }
        SortColumn::Name => {
            ui.horizontal(|ui| {
                // The last action's result as a mark before the name (the name stays
                // readable; the words are in the Status column, the sentence on hover).
                if let Some(st) = c.actions.get(&r.series_key()) {
                    action_badge(ui, r, st, c, true);
                }
                if let Some(tm) = r.torch.filter(|_| !exited) {
                    super::torch_pane::badge(ui, &tm, c.units);
                }
                clipped(
                    ui,
                    if exited {
                        format!("{} (exited)", r.info.name)
                    } else {
                        r.info.name.clone()
                    },
                );
            });
        }
        SortColumn::User => {
            clipped(ui, r.info.user.clone());
        }
        SortColumn::Container => {
            let resp = clipped(ui, container_cell(r));
            if let Some(id) = &r.info.container_id {
                let pod = r
                    .info
                    .pod
                    .as_deref()
                    .map(|p| format!("pod {p}\n"))
                    .unwrap_or_default();
                let name = r
                    .info
                    .container_name
                    .as_deref()
                    .map(|n| format!("container {n}\n"))
                    .unwrap_or_default();
                resp.on_hover_text(format!("{pod}{name}id {id}"));
            }
        }
        SortColumn::Gpu => {
            plain(ui, r.device_index.to_string());
        }
        SortColumn::Memory => right(ui, |ui| {
            plain(ui, format::opt_bytes(c.mem, r.used_bytes));
        }),
        SortColumn::Delta => right(ui, |ui| {
            // An exited process has no change to show.
            let d = r.delta_1m_bytes.filter(|_| !exited);
            plain(ui, d.map_or("—".into(), |d| c.delta.delta(d)));
        }),
        SortColumn::Age => {
            plain(ui, format::duration(c.now - r.started_ms()));
        }
        SortColumn::Status => status_cell(ui, r, c),
        SortColumn::Command => {
            clipped(ui, r.info.cmdline.clone());
        }
        SortColumn::Cpu => right(ui, |ui| {
            let p = r.cpu_pct.filter(|_| !exited);
            plain(ui, p.map_or("—".into(), |p| format!("{p:.0} %")));
        }),
        SortColumn::Rss => right(ui, |ui| {
            let m = r.rss_bytes.filter(|_| !exited);
            plain(ui, format::opt_bytes(c.rss, m));
        }),
        SortColumn::GpuUtil => right(ui, |ui| {
            let u = r.sm_util_pct.filter(|_| !exited);
            plain(ui, u.map_or("—".into(), |u| format!("{u} %"))).on_hover_text(
                "Its share of the GPU's SM time over the last seconds, as the driver reports it",
            );
        }),
    }
}

/// The Status cell: stale list, parked, orphaned PID (for a live process), leak badge.
fn status_cell(ui: &mut Ui, r: &ProcessRow, c: &Cells<'_>) {
    let exited = r.exited_at_ms.is_some();
    if let Some(st) = c.actions.get(&r.series_key()) {
        action_badge(ui, r, st, c, false);
    }
    if !exited && c.stale_gpus.contains(&r.device_index) {
        ui.label(RichText::new("STALE").color(widgets::warn(ui)))
            .on_hover_text("The driver failed to list this GPU's processes: the last good list is shown and its memory is unknown until the driver answers again.");
    }
    if let Some(park) = r.parked.filter(|_| !exited) {
        ui.add(
            egui::Label::new(RichText::new(park.short(c.now)).color(widgets::PARKED))
                .truncate()
                .selectable(false),
        )
        .on_hover_text(park.describe());
    }
    let orphan = c
        .orphans
        .iter()
        .filter(|g| g.device_index == r.device_index)
        .find_map(|g| g.pids.iter().find(|o| o.pid == r.key.pid).map(|o| (o, g)))
        .filter(|_| !exited);
    if let Some((o, g)) = orphan {
        ui.label(RichText::new(o.label_at(&place(c.host))).color(widgets::warn(ui)))
            .on_hover_text(format!(
                "The driver lists this PID; {} has no such running process. To free it: {}",
                c.host.unwrap_or("this machine"),
                g.remedy
            ));
    }
    if let Some(b) = c
        .leaks
        .get(&crate::engine::view::LeakKey::Process(r.series_key()))
    {
        ui.add(
            egui::Label::new(
                RichText::new(b.text()).color(super::leaks::leak_color(ui.visuals().dark_mode)),
            )
            .truncate()
            .selectable(false),
        )
        .on_hover_text(format!(
            "Growing since {}, +{}",
            format::clock(b.since_ms),
            c.units
                .bytes((b.grown_mib.max(0.0) * crate::model::MIB as f64) as u64)
        ));
    }
}

/// The result of the last action taken on this row, in a few words (`mark`: a sign alone;
/// the whole sentence on hover), coloured by its outcome.
fn action_badge(
    ui: &mut Ui,
    r: &ProcessRow,
    st: &super::action_status::State,
    c: &Cells<'_>,
    mark: bool,
) {
    use super::action_status::State;
    let dark = ui.visuals().dark_mode;
    let color = match st {
        State::Done { outcome, .. } => widgets::outcome_color(*outcome, dark),
        State::Waiting { late: true, .. } => widgets::warn(ui),
        State::Waiting { .. } => ui.visuals().text_color(),
    };
    let sentence = st.sentence(
        r.exited_at_ms.is_some(),
        &format::opt_bytes(c.mem, r.used_bytes),
    );
    let text = if mark {
        st.mark().to_string()
    } else {
        st.short()
    };
    ui.add(
        egui::Label::new(RichText::new(text).color(color).strong())
            .truncate()
            .selectable(false),
    )
    .on_hover_text(sentence);
}

/// Why a simulated process's Park and Resume are off.
pub const SIMULATED_PARK: &str =
    "A simulated process cannot be parked or resumed: no program stands behind it (the demo shows its scripted park).";

/// A live process's right-click menu: park or resume, terminate, kill, details.
fn row_menu(ui: &mut Ui, r: &ProcessRow, t: &mut TableState<'_>) {
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
            *request = Some((key, action));
            ui.close();
        }
        if ui.button("Terminate…").clicked() {
            *request = Some((
                key,
                crate::act::rules::Action::Terminate {
                    grace_seconds: crate::act::rules::model::DEFAULT_GRACE_SECONDS,
                },
            ));
            ui.close();
        }
        if ui.button("Kill…").clicked() {
            *request = Some((
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
