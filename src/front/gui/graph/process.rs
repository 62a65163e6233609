//! One process's lifetime graph.

use egui::Ui;

use super::cache::{CacheKey, GraphCache};
use super::draw::{draw_plot, PlotOpts};
use super::lines::{DeviceLines, GraphLine, LineKind};
use super::tables::table_series;
use crate::engine::view::Monitor;
use crate::front::gui::{plot_table, widgets};
use crate::model::format::Units;
use crate::model::history::{History, ProcSeriesKey, Series};
use crate::model::UnixMs;

/// The least height of a process's lifetime graph (points).
pub const PROCESS_GRAPH_MIN_HEIGHT: f32 = 180.0;

/// The most height a process's lifetime graph takes (the pane's other parts stay in view).
pub(crate) const PROCESS_GRAPH_MAX_HEIGHT: f32 = 240.0;

/// The whole-lifetime graph of one process on one GPU, with marked times (unix s, name).
pub(crate) fn process_graph(
    ui: &mut Ui,
    m: &Monitor,
    key: ProcSeriesKey,
    units: Units,
    cache: &mut GraphCache,
    marks: &[(f64, String)],
) {
    let h = &m.history;
    let Some(series) = h.process(&key) else {
        ui.label("No history held for this process.");
        return;
    };
    let (from, to) = lifetime(m, key, series);
    let width = (ui.available_width() as usize).clamp(50, 4000);
    let colors = widgets::Colors::of(ui);
    let ck = CacheKey {
        history: h.id(),
        what: Some(key),
        device: key.1,
        from,
        to,
        width,
        end_tick: h.end_tick(),
        stacked: false,
        dark: colors.dark,
        palette: colors.palette,
    };
    let color = colors.slot(m.row(&key).map_or(0, |r| r.color_slot));
    let mut as_table = cache.as_table;
    let drawn = cache.get(ck, || {
        lifetime_lines(h, key, series, (from, to), width, color)
    });
    // Which line is which (the driver's figure, PyTorch's allocated and reserved memory).
    ui.horizontal_wrapped(|ui| {
        for l in &drawn.lines {
            widgets::legend_item(ui, l.color, &l.name, false);
        }
        plot_table::toggle(ui, &mut as_table);
    });
    if as_table {
        lifetime_table(ui, key, &drawn.lines, (from, to), width, units);
        cache.as_table = as_table;
        return;
    }
    let resp = lifetime_plot(ui, key, &mut drawn.lines, units, marks);
    cache.as_table = as_table;
    cache.plot_rect = Some(resp.response.rect);
    let b = resp.transform.bounds();
    cache.shown_x = Some((b.min()[0], b.max()[0]));
}

/// The time range of the process's lifetime (unix ms): from when it was first seen (or its
/// first sample held) to its last sample.
fn lifetime(m: &Monitor, key: ProcSeriesKey, series: &Series) -> (UnixMs, UnixMs) {
    let h = &m.history;
    let from = m
        .row(&key)
        .map(|r| r.first_seen_ms)
        .or_else(|| h.time_of(series.first_tick()))
        .unwrap_or(0);
    let to = h
        .time_of(series.end_tick().saturating_sub(1))
        .unwrap_or(from);
    (from, to)
}

/// The lifetime's lines as a table instead of a plot.
fn lifetime_table(
    ui: &mut Ui,
    key: ProcSeriesKey,
    lines: &[GraphLine],
    (from, to): (UnixMs, UnixMs),
    width: usize,
    units: Units,
) {
    let step = ((to - from) as f64 / 1000.0 / width as f64).max(1.0) * 2.0;
    plot_table::series_table(
        ui,
        ("proc-table", key.0.pid, key.1),
        &table_series(lines),
        (from as f64 / 1000.0, to as f64 / 1000.0),
        step,
        &plot_table::ValueFormat::Memory(units),
    );
}

/// The lines of one process's lifetime from `from` to `to`, `width` buckets across: the
/// driver's figure in `color` and, where its PyTorch companion answered, what the allocator
/// holds and what its tensors use.
fn lifetime_lines(
    h: &History,
    key: ProcSeriesKey,
    series: &Series,
    (from, to): (UnixMs, UnixMs),
    width: usize,
    color: egui::Color32,
) -> DeviceLines {
    let mut lines = vec![GraphLine::new(
        "GPU memory (driver)".into(),
        LineKind::Process(key),
        color,
        h.decimate(series, from, to, width),
        true,
    )];
    // Where its PyTorch companion answered: what the allocator holds and what its
    // tensors use, over the driver's figure.
    use crate::model::history::TorchFigure;
    for (figure, name, c) in [
        (
            TorchFigure::Reserved,
            "Reserved (PyTorch)",
            widgets::TORCH_CACHE,
        ),
        (
            TorchFigure::Allocated,
            "Allocated (PyTorch)",
            widgets::TORCH_ALLOCATED,
        ),
    ] {
        if let Some(s) = h.torch(&key, figure) {
            lines.push(GraphLine::new(
                name.into(),
                LineKind::Figure,
                c,
                h.decimate(s, from, to, width),
                false,
            ));
        }
    }
    DeviceLines {
        lines,
        buckets: Vec::new(),
    }
}

/// Draws the lifetime's plot: its whole time range, fixed, with the marked times.
fn lifetime_plot(
    ui: &mut Ui,
    key: ProcSeriesKey,
    lines: &mut [GraphLine],
    units: Units,
    marks: &[(f64, String)],
) -> egui_plot::PlotResponse<()> {
    // Room for a readable plot (three axis labels at least) even in a short pane: the pane
    // scrolls rather than squeezing it.
    let height = ui
        .available_height()
        .clamp(PROCESS_GRAPH_MIN_HEIGHT, PROCESS_GRAPH_MAX_HEIGHT);
    draw_plot(
        ui,
        &format!("proc-graph-{}-{}", key.0.pid, key.1),
        lines,
        &PlotOpts {
            units,
            auto_x: true,
            marks,
            step_s: 1.0,
            height: Some(height),
            fixed_x: true,
            ..PlotOpts::default()
        },
    )
}
