//! The graph's legend and the processes it names.

use egui::{Color32, Ui};

use super::lines::{GraphLine, LineKind};
use crate::front::gui::widgets;
use crate::model::history::ProcSeriesKey;

/// The legend, outside the plot: one swatch per series in view (the selected one bold), at most
/// [`LEGEND_MAX`] processes (the largest now, the selected one always) and a count of the
/// rest. Stacked, in the stack's order from its top (memory no process accounts for, then
/// the newest process down to the oldest), said in its first words; unstacked, the newest
/// first too.
pub(super) fn legend(
    ui: &mut Ui,
    lines: &[GraphLine],
    highlight: Option<ProcSeriesKey>,
    forecast: bool,
    stacked: bool,
) {
    let (procs, more) = legend_processes(lines, highlight);
    let is = |l: &GraphLine, k: LineKind| l.kind == k;
    let unattributed = lines.iter().find(|l| is(l, LineKind::Unattributed));
    ui.horizontal_wrapped(|ui| {
        let item = |ui: &mut Ui, color: Color32, name: &str, bold: bool| {
            widgets::legend_item(ui, color, name, bold);
        };
        if stacked {
            ui.label(widgets::hint("Stack from the top:"));
        }
        if let Some(l) = unattributed.filter(|_| stacked) {
            item(ui, l.color, &l.name, false);
        }
        for l in procs {
            let bold = matches!((l.kind, highlight), (LineKind::Process(k), Some(h)) if k == h);
            // Dimmed as its band is while another process is selected.
            let color = if highlight.is_some() && !bold && stacked {
                super::draw::dimmed(ui.visuals(), l.color)
            } else {
                l.color
            };
            item(ui, color, &l.name, bold);
        }
        if more > 0 {
            ui.label(widgets::hint(format!("and {more} more")));
            ui.add_space(6.0);
        }
        if let Some(l) = unattributed.filter(|_| !stacked) {
            item(ui, l.color, &l.name, false);
        }
        for l in lines
            .iter()
            .filter(|l| is(l, LineKind::Total) || is(l, LineKind::TotalRange))
        {
            item(ui, l.color, &l.name, false);
        }
        item(ui, widgets::LIMIT, "Memory limit", false);
        if forecast {
            item(ui, widgets::FORECAST, "OOM forecast", false);
        }
    });
}

/// The processes the legend names, in the stack's order from its top (the newest first): the
/// [`LEGEND_MAX`] largest now, the selected one always among them; and how many are left out.
pub(crate) fn legend_processes(
    lines: &[GraphLine],
    highlight: Option<ProcSeriesKey>,
) -> (Vec<&GraphLine>, usize) {
    // `lines` holds the processes bottom (oldest) first.
    let mut procs: Vec<(usize, &GraphLine)> = lines
        .iter()
        .filter(|l| matches!(l.kind, LineKind::Process(_)))
        .enumerate()
        .collect();
    let more = procs.len().saturating_sub(LEGEND_MAX);
    if more > 0 {
        let last = |l: &GraphLine| l.own.last().copied().unwrap_or(0.0);
        let selected = |l: &GraphLine| matches!((l.kind, highlight), (LineKind::Process(k), Some(h)) if k == h);
        // The selected one first, then the largest now.
        procs.sort_by(|a, b| {
            selected(b.1)
                .cmp(&selected(a.1))
                .then(last(b.1).total_cmp(&last(a.1)))
        });
        procs.truncate(LEGEND_MAX);
    }
    procs.sort_by_key(|p| std::cmp::Reverse(p.0));
    (procs.into_iter().map(|(_, l)| l).collect(), more)
}

/// Processes named in the graph's legend at most.
pub(crate) const LEGEND_MAX: usize = 12;
