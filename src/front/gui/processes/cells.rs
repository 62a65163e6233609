//! One row's cells: figures, status and the action's badge.

use egui::{RichText, Ui};

use super::columns::SortColumn;
use super::sorting::{container_cell, place};
use super::state::TableState;
use crate::engine::view::ProcessRow;
use crate::front::gui::widgets;
use crate::front::report_words::{self, Where};
use crate::model::format::{self, Units};
use crate::model::history::ProcSeriesKey;
use crate::model::UnixMs;

/// What every cell of a frame shares: units per column (Auto: the column's largest value
/// decides, so a column never mixes MiB and GiB), the clock, the status sources.
pub(super) struct Cells<'a> {
    units: Units,
    mem: Units,
    delta: Units,
    rss: Units,
    now: UnixMs,
    stale_gpus: Vec<u32>,
    leaks: &'a std::collections::HashMap<
        crate::engine::view::LeakKey,
        crate::front::gui::leaks::LeakBadge,
    >,
    orphans: &'a [crate::detect::orphans::OrphanGpu],
    host: Option<&'a str>,
    actions: &'a std::collections::HashMap<ProcSeriesKey, crate::front::gui::action_status::State>,
}

impl<'a> Cells<'a> {
    /// The cells of `rows` (and of groups whose largest total is `largest_group` bytes:
    /// the memory column's unit holds for both).
    pub(super) fn new(
        t: &TableState<'a>,
        rows: &[&ProcessRow],
        largest_group: u64,
        now: UnixMs,
    ) -> Self {
        let largest = |size: fn(&ProcessRow) -> Option<u64>| {
            rows.iter().filter_map(|r| size(r)).max().unwrap_or(0)
        };
        let column_units =
            |size: fn(&ProcessRow) -> Option<u64>| t.units.for_largest(largest(size));
        Self {
            units: t.units,
            mem: t
                .units
                .for_largest(largest(|r| r.used_bytes).max(largest_group)),
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

    /// The memory column's unit (group totals are written in it too).
    pub(super) fn memory_units(&self) -> Units {
        self.mem
    }
}

/// Right-aligned contents (the numeric columns).
fn right(ui: &mut Ui, add: impl FnOnce(&mut Ui)) {
    ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), add);
}

/// A cell's words, monospace; an exited process's weak and in italics.
fn words(s: String, exited: bool) -> RichText {
    let rt = RichText::new(s).monospace();
    if exited {
        rt.weak().italics()
    } else {
        rt
    }
}

/// A cell's words as a label that the row's click goes through.
fn plain(ui: &mut Ui, s: String, exited: bool) -> egui::Response {
    ui.add(egui::Label::new(words(s, exited)).selectable(false))
}

/// A cell's words cut to the column's width ("…").
fn clipped(ui: &mut Ui, s: String, exited: bool) -> egui::Response {
    ui.add(
        egui::Label::new(words(s, exited))
            .truncate()
            .selectable(false),
    )
}

/// One cell of a process's line.
pub(super) fn cell(ui: &mut Ui, r: &ProcessRow, col: SortColumn, c: &Cells<'_>) {
    let exited = r.exited_at_ms.is_some();
    match col {
        SortColumn::Pid => {
            plain(ui, r.key.pid.to_string(), exited).on_hover_text(&r.info.cmdline);
        }
        SortColumn::Name => name_cell(ui, r, c),
        SortColumn::User => {
            clipped(ui, r.info.user.clone(), exited);
        }
        SortColumn::Container => container(ui, r),
        SortColumn::Gpu => {
            plain(ui, r.device_index.to_string(), exited);
        }
        SortColumn::Memory => right(ui, |ui| {
            plain(ui, format::opt_bytes(c.mem, r.used_bytes), exited);
        }),
        SortColumn::Delta => right(ui, |ui| {
            // An exited process has no change to show.
            let d = r.delta_1m_bytes.filter(|_| !exited);
            plain(ui, d.map_or("—".into(), |d| c.delta.delta(d)), exited);
        }),
        SortColumn::Age => {
            plain(ui, format::duration(c.now - r.started_ms()), exited);
        }
        SortColumn::Status => status_cell(ui, r, c),
        SortColumn::Command => {
            clipped(ui, r.info.cmdline.clone(), exited);
        }
        SortColumn::Cpu => right(ui, |ui| {
            let p = r.cpu_pct.filter(|_| !exited);
            plain(ui, p.map_or("—".into(), |p| format!("{p:.0} %")), exited);
        }),
        SortColumn::Rss => right(ui, |ui| {
            let m = r.rss_bytes.filter(|_| !exited);
            plain(ui, format::opt_bytes(c.rss, m), exited);
        }),
        SortColumn::GpuUtil => right(ui, |ui| {
            let u = r.sm_util_pct.filter(|_| !exited);
            plain(ui, u.map_or("—".into(), |u| format!("{u} %")), exited).on_hover_text(
                "Its share of the GPU's SM time over the last seconds, as the driver reports it",
            );
        }),
    }
}

/// The Name cell: the last action's mark, a leak's, the PyTorch badge, then the name.
fn name_cell(ui: &mut Ui, r: &ProcessRow, c: &Cells<'_>) {
    let exited = r.exited_at_ms.is_some();
    ui.horizontal(|ui| {
        // The last action's result as a mark before the name (the name stays
        // readable; the words are in the Status column, the sentence on hover).
        if let Some(st) = c.actions.get(&r.series_key()) {
            action_badge(ui, r, st, c, true);
        }
        // A leak as a mark before the name too: the Status column is out of view
        // beside the detail pane on a small screen.
        let leak = crate::engine::view::LeakKey::Process(r.series_key());
        if let Some(b) = c.leaks.get(&leak).filter(|b| b.leak && !exited) {
            let color = crate::front::gui::leaks::leak_color(ui.visuals().dark_mode);
            ui.add(egui::Label::new(RichText::new("⚠").color(color)).selectable(false))
                .on_hover_text(b.text());
        }
        if let Some(tm) = r.torch.filter(|_| !exited) {
            crate::front::gui::torch_pane::badge(ui, &tm, c.units);
        }
        clipped(
            ui,
            if exited {
                format!("{} (exited)", r.info.name)
            } else {
                r.info.name.clone()
            },
            exited,
        );
    });
}

/// The Container cell: its container or pod, with the pod, name and id on hover.
fn container(ui: &mut Ui, r: &ProcessRow) {
    let resp = clipped(ui, container_cell(r), r.exited_at_ms.is_some());
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
            egui::Label::new(
                RichText::new(park.short(c.now))
                    .color(widgets::parked_color(ui.visuals().dark_mode)),
            )
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
                Where::of(c.host).machine(),
                report_words::remedy(g, Where::of(c.host))
            ));
    }
    if let Some(b) = c
        .leaks
        .get(&crate::engine::view::LeakKey::Process(r.series_key()))
    {
        ui.add(
            egui::Label::new(
                RichText::new(b.text())
                    .color(crate::front::gui::leaks::leak_color(ui.visuals().dark_mode)),
            )
            .truncate()
            .selectable(false),
        )
        .on_hover_text(format!(
            "Growing since {}, +{}\n{}",
            format::clock(b.since_ms),
            c.units
                .bytes((b.grown_mib.max(0.0) * crate::model::MIB as f64) as u64),
            b.full_in_sentences(r.device_index).join("\n")
        ));
    }
}

/// The result of the last action taken on this row, in a few words (`mark`: a sign alone;
/// the whole sentence on hover), coloured by its outcome.
fn action_badge(
    ui: &mut Ui,
    r: &ProcessRow,
    st: &crate::front::gui::action_status::State,
    c: &Cells<'_>,
    mark: bool,
) {
    use crate::front::gui::action_status::State;
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
