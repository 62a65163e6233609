//! The graphs shown as tables (the accessible alternative to the plots).

use egui::Ui;

use super::cache::GraphCache;
use super::lines::{GraphLine, LineKind};
use super::metrics::{metric_lines, METRIC_PANELS};
use crate::front::gui::plot_table;
use crate::model::format::Units;
use crate::model::history::History;
use crate::model::UnixMs;

/// The lines as the table reads them (a stacked graph's range band left out: the total's
/// row says the same).
pub(super) fn table_series(lines: &[GraphLine]) -> Vec<plot_table::Series<'_>> {
    lines
        .iter()
        .filter(|l| l.kind != LineKind::TotalRange)
        .map(|l| plot_table::Series {
            name: &l.name,
            color: l.color,
            points: &l.points,
            own: &l.own,
        })
        .collect()
}

/// The "Table" alternative of a GPU's graph: its series' table, then one per metric panel
/// (`metrics_width`: the metrics are shown, at that width).
pub(super) fn graph_tables(
    ui: &mut Ui,
    h: &History,
    device: u32,
    (from, to): (UnixMs, UnixMs),
    (lines, step_s, units): (&[GraphLine], f64, Units),
    cache: &mut GraphCache,
    metrics_width: Option<usize>,
) {
    let range = (from as f64 / 1000.0, to as f64 / 1000.0);
    plot_table::series_table(
        ui,
        ("gpu-table", device),
        &table_series(lines),
        range,
        step_s,
        &plot_table::ValueFormat::Memory(units),
    );
    if let Some(width) = metrics_width {
        metric_tables(ui, h, device, (from, to), width, cache);
    }
}

/// The metric panels as tables (the "Table" toggle): a heading and a table per panel.
fn metric_tables(
    ui: &mut Ui,
    h: &History,
    device: u32,
    (from, to): (UnixMs, UnixMs),
    width: usize,
    cache: &mut GraphCache,
) {
    let dark = ui.visuals().dark_mode;
    let plots = metric_lines(h, device, (from, to), width, dark, cache);
    let step = ((to - from) as f64 / 1000.0 / (width / 4).max(20) as f64) * 2.0;
    for ((title, unit, _), lines) in METRIC_PANELS.iter().zip(plots.iter()) {
        let (title, unit) = (*title, *unit);
        if lines.is_empty() {
            continue;
        }
        ui.label(egui::RichText::new(title).strong());
        plot_table::series_table(
            ui,
            ("metric-table", device, title),
            &table_series(lines),
            (from as f64 / 1000.0, to as f64 / 1000.0),
            step,
            &plot_table::ValueFormat::Plain(unit),
        );
    }
}
