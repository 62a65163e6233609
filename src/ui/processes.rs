//! The table of every process on every GPU: sortable by each column, filterable.

use egui::{RichText, Ui};
use serde::{Deserialize, Serialize};

use super::widgets;
use crate::format::{self, Units};
use crate::history::ProcSeriesKey;
use crate::model::UnixMs;
use crate::monitor::ProcessRow;

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
}

impl SortColumn {
    const ALL: [(SortColumn, &'static str); 7] = [
        (SortColumn::Pid, "PID"),
        (SortColumn::Name, "Name"),
        (SortColumn::User, "User"),
        (SortColumn::Gpu, "GPU"),
        (SortColumn::Memory, "GPU memory"),
        (SortColumn::Delta, "Δ 1 min"),
        (SortColumn::Age, "Age"),
    ];
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
    pub request: Option<&'a mut Option<(ProcSeriesKey, crate::rules::Action)>>,
    /// GPUs whose process list failed at the last sample (their rows are the last good list).
    pub stale_gpus: Vec<u32>,
    /// Leak flags by series.
    pub leaks: &'a std::collections::HashMap<crate::monitor::LeakKey, super::leaks::LeakBadge>,
}

/// True when `row` matches the filter (pid, name, command line or user; case-insensitive).
pub fn matches(row: &ProcessRow, filter: &str) -> bool {
    let f = filter.trim().to_lowercase();
    f.is_empty()
        || row.key.pid.to_string().contains(&f)
        || row.name.to_lowercase().contains(&f)
        || row.cmdline.to_lowercase().contains(&f)
        || row.user.to_lowercase().contains(&f)
}

/// Sorts rows in place by `col` (ties broken by pid so the order never flickers).
pub fn sort_rows(rows: &mut [&ProcessRow], col: SortColumn, desc: bool, now: UnixMs) {
    rows.sort_by(|a, b| {
        let o = match col {
            SortColumn::Pid => a.key.pid.cmp(&b.key.pid),
            SortColumn::Name => a.name.cmp(&b.name),
            SortColumn::User => a.user.cmp(&b.user),
            SortColumn::Gpu => a.device_index.cmp(&b.device_index),
            SortColumn::Memory => a.used_bytes.cmp(&b.used_bytes),
            SortColumn::Delta => a.delta_1m_bytes.cmp(&b.delta_1m_bytes),
            SortColumn::Age => (now - a.started_ms()).cmp(&(now - b.started_ms())),
        };
        let o = if desc { o.reverse() } else { o };
        o.then(a.key.pid.cmp(&b.key.pid))
            .then(a.device_index.cmp(&b.device_index))
    });
}

/// Draws the filter box and the table.
pub fn table(ui: &mut Ui, rows: Vec<&ProcessRow>, t: &mut TableState<'_>, now: UnixMs) {
    let mut rows: Vec<&ProcessRow> = rows.into_iter().filter(|r| matches(r, t.filter)).collect();
    sort_rows(&mut rows, *t.sort, *t.desc, now);
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
        ui.label(RichText::new(format!("{} shown", rows.len())).weak());
    });
    if rows.is_empty() {
        ui.add_space(12.0);
        ui.label(if t.filter.is_empty() {
            "No process holds GPU memory right now."
        } else {
            "No process matches the filter."
        });
        return;
    }
    // Fixed column widths, a header row, and a virtualised body: only the visible rows are
    // laid out, so hundreds of processes cost no more than a screenful.
    const W: [f32; 9] = [12.0, 64.0, 150.0, 90.0, 40.0, 100.0, 84.0, 66.0, 300.0];
    let row_h = ui.text_style_height(&egui::TextStyle::Monospace) + 6.0;
    let cell = |ui: &mut Ui, w: f32, right: bool, add: &mut dyn FnMut(&mut Ui)| {
        let layout = if right {
            egui::Layout::right_to_left(egui::Align::Center)
        } else {
            egui::Layout::left_to_right(egui::Align::Center)
        };
        ui.allocate_ui_with_layout(egui::vec2(w, row_h), layout, |ui| {
            ui.set_width(w);
            add(ui)
        });
    };
    ui.horizontal(|ui| {
        ui.spacing_mut().item_spacing.x = 10.0;
        cell(ui, W[0], false, &mut |_| {});
        for (i, (col, title)) in SortColumn::ALL.into_iter().enumerate() {
            let arrow = match (*t.sort == col, *t.desc) {
                (true, true) => " ▼",
                (true, false) => " ▲",
                _ => "",
            };
            let right = matches!(col, SortColumn::Memory | SortColumn::Delta);
            cell(ui, W[i + 1], right, &mut |ui| {
                if ui
                    .selectable_label(
                        *t.sort == col,
                        RichText::new(format!("{title}{arrow}"))
                            .monospace()
                            .strong(),
                    )
                    .clicked()
                {
                    if *t.sort == col {
                        *t.desc = !*t.desc;
                    } else {
                        *t.sort = col;
                        *t.desc = matches!(
                            col,
                            SortColumn::Memory | SortColumn::Delta | SortColumn::Age
                        );
                    }
                }
            });
        }
        cell(ui, W[8], false, &mut |ui| {
            ui.label(RichText::new("Status").monospace().strong());
        });
    });
    let stripe = ui.visuals().faint_bg_color;
    egui::ScrollArea::vertical()
        .id_salt("process-rows")
        .auto_shrink([false, false])
        .show_rows(ui, row_h, rows.len(), |ui, range| {
            ui.spacing_mut().item_spacing.y = 0.0;
            for (i, r) in rows[range.clone()].iter().enumerate() {
                let exited = r.exited_at_ms.is_some();
                let weak = |s: String| {
                    let rt = RichText::new(s).monospace();
                    if exited {
                        rt.weak().italics()
                    } else {
                        rt
                    }
                };
                let key = r.series_key();
                let bg = ui.painter().add(egui::Shape::Noop);
                let row = ui.horizontal(|ui| {
                    ui.spacing_mut().item_spacing.x = 10.0;
                    cell(ui, W[0], false, &mut |ui| {
                        widgets::color_swatch(
                            ui,
                            widgets::process_color(r.color_slot, ui.visuals().dark_mode),
                        )
                    });
                    cell(ui, W[1], false, &mut |ui| {
                        let sel = *t.selected == Some(key);
                        let c = ui
                            .selectable_label(sel, weak(r.key.pid.to_string()))
                            .on_hover_text(&r.cmdline);
                        if c.clicked() {
                            *t.selected = if sel { None } else { Some(key) };
                        }
                        if !exited {
                            c.context_menu(|ui| {
                                if let Some(request) = t.request.as_deref_mut() {
                                    if ui.button("Terminate…").clicked() {
                                        *request = Some((
                                            key,
                                            crate::rules::Action::Terminate {
                                                grace_seconds: 10.0,
                                            },
                                        ));
                                        ui.close();
                                    }
                                    if ui.button("Kill…").clicked() {
                                        *request = Some((
                                            key,
                                            crate::rules::Action::Signal {
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
                            });
                        }
                    });
                    cell(ui, W[2], false, &mut |ui| {
                        ui.add(
                            egui::Label::new(weak(if exited {
                                format!("{} (exited)", r.name)
                            } else {
                                r.name.clone()
                            }))
                            .truncate(),
                        );
                    });
                    cell(ui, W[3], false, &mut |ui| {
                        ui.add(egui::Label::new(weak(r.user.clone())).truncate());
                    });
                    cell(ui, W[4], false, &mut |ui| {
                        ui.label(weak(r.device_index.to_string()));
                    });
                    cell(ui, W[5], true, &mut |ui| {
                        ui.label(weak(format::opt_bytes(t.units, r.used_bytes)));
                    });
                    cell(ui, W[6], true, &mut |ui| {
                        ui.label(weak(
                            r.delta_1m_bytes.map_or("—".into(), |d| t.units.delta(d)),
                        ));
                    });
                    cell(ui, W[7], false, &mut |ui| {
                        ui.label(weak(format::duration(now - r.started_ms())));
                    });
                    cell(ui, W[8], false, &mut |ui| {
                        if !exited && t.stale_gpus.contains(&r.device_index) {
                            ui.label(RichText::new("STALE").color(widgets::WARN))
                                .on_hover_text("The driver failed to list this GPU's processes: the last good list is shown and its memory is unknown until the driver answers again.");
                        }
                        if let Some(b) = t.leaks.get(&crate::monitor::LeakKey::Process(key)) {
                            ui.label(RichText::new(b.text()).color(super::leaks::LEAK))
                                .on_hover_text(format!(
                                    "Growing since {}, +{}",
                                    format::clock(b.since_ms),
                                    t.units.bytes(
                                        (b.grown_mib.max(0.0) * crate::model::MIB as f64) as u64
                                    )
                                ));
                        }
                    });
                });
                if (range.start + i) % 2 == 1 {
                    ui.painter()
                        .set(bg, egui::Shape::rect_filled(row.response.rect, 0.0, stripe));
                }
            }
        });
}
