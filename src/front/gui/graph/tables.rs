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
pub(super) fn table_series<'a>(
    lines: impl IntoIterator<Item = &'a GraphLine>,
) -> Vec<plot_table::Series<'a>> {
    lines
        .into_iter()
        .filter(|l| l.kind != LineKind::TotalRange)
        .map(|l| plot_table::Series {
            name: &l.name,
            color: l.color,
            points: &l.points,
            own: &l.own,
        })
        .collect()
}

/// A GPU's lines in the order its legend names them: the processes from the stack's top
/// (the newest first), memory no process accounts for above them when `stacked` (it is the
/// stack's top) or after them, then the GPU's total.
fn in_legend_order(lines: &[GraphLine], stacked: bool) -> Vec<&GraphLine> {
    let of = |k: fn(&LineKind) -> bool| lines.iter().filter(move |l| k(&l.kind));
    let unattributed = || of(|k| *k == LineKind::Unattributed);
    let processes = of(|k| matches!(k, LineKind::Process(_))).rev();
    let top = stacked.then(unattributed).into_iter().flatten();
    let below = (!stacked).then(unattributed).into_iter().flatten();
    let rest = of(|k| !matches!(k, LineKind::Process(_) | LineKind::Unattributed));
    top.chain(processes).chain(below).chain(rest).collect()
}

/// The "Table" alternative of a GPU's graph: its series' table (rows in the legend's
/// order), then one per metric panel (`metrics_width`: the metrics are shown, at that width).
pub(super) fn graph_tables(
    ui: &mut Ui,
    h: &History,
    device: u32,
    (from, to): (UnixMs, UnixMs),
    (lines, stacked, step_s, units): (&[GraphLine], bool, f64, Units),
    cache: &mut GraphCache,
    metrics_width: Option<usize>,
) {
    let range = (from as f64 / 1000.0, to as f64 / 1000.0);
    let ordered = in_legend_order(lines, stacked);
    plot_table::series_table(
        ui,
        ("gpu-table", device),
        &table_series(ordered),
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

#[cfg(test)]
mod tests {
    use super::*;
    use egui::Color32;

    fn line(name: &str, kind: LineKind) -> GraphLine {
        GraphLine::new(name.into(), kind, Color32::RED, vec![[1.0, 1.0]], false)
    }

    fn process(name: &str, pid: u32) -> GraphLine {
        let key = crate::model::ProcessKey {
            pid,
            start_time_ms: 1,
        };
        line(name, LineKind::Process((key, 0)))
    }

    /// The GUI review: the Table listed a GPU's processes bottom first, under a legend that
    /// names them from the stack's top. The table's rows follow the legend, stacked or not.
    #[test]
    fn the_table_lists_the_series_in_the_legends_order() {
        // As the graph holds them: the processes bottom (oldest) first.
        let lines = vec![
            process("old", 1),
            process("mid", 2),
            process("new", 3),
            line("Unattributed", LineKind::Unattributed),
            line("Total used", LineKind::Total),
            line("range", LineKind::TotalRange),
        ];
        for stacked in [true, false] {
            let rows: Vec<&str> = table_series(in_legend_order(&lines, stacked))
                .iter()
                .map(|s| s.name)
                .collect();
            let (procs, _) = super::super::legend::legend_processes(&lines, None);
            let mut legend: Vec<&str> = procs.iter().map(|l| l.name.as_str()).collect();
            if stacked {
                legend.insert(0, "Unattributed");
            } else {
                legend.push("Unattributed");
            }
            legend.push("Total used");
            assert_eq!(rows, legend, "stacked: {stacked}");
        }
    }
}
