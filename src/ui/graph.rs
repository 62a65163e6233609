//! Memory-over-time graphs (egui_plot): per GPU, optionally stacked by process, and one
//! process's whole lifetime. Lines are min/max-decimated to the plot's width and cached until
//! the view, the width or the data change, so hours of history stay smooth.

use egui::{Color32, Ui};
use egui_plot::{GridMark, HLine, Legend, Line, Plot, PlotPoints, VLine};
use serde::{Deserialize, Serialize};

use super::app::UiState;
use super::widgets;
use crate::format::{self, Units};
use crate::history::{History, PlotLine, ProcSeriesKey, Series, NONE};
use crate::model::{UnixMs, MIB};
use crate::monitor::Monitor;

/// Time window presets of the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Window {
    /// Last minute.
    OneMinute,
    /// Last 10 minutes.
    TenMinutes,
    /// Last hour.
    OneHour,
    /// Everything held.
    All,
}

impl Window {
    /// Every preset, in toolbar order.
    pub const ALL: [Window; 4] = [
        Window::OneMinute,
        Window::TenMinutes,
        Window::OneHour,
        Window::All,
    ];

    /// Toolbar label.
    pub fn label(self) -> &'static str {
        match self {
            Window::OneMinute => "1 min",
            Window::TenMinutes => "10 min",
            Window::OneHour => "1 h",
            Window::All => "All",
        }
    }

    fn ms(self) -> Option<i64> {
        match self {
            Window::OneMinute => Some(60_000),
            Window::TenMinutes => Some(600_000),
            Window::OneHour => Some(3_600_000),
            Window::All => None,
        }
    }
}

/// One drawn line.
#[derive(Debug, Clone)]
pub struct GraphLine {
    /// Legend name.
    pub name: String,
    /// Colour.
    pub color: Color32,
    /// Points (unix seconds, MiB).
    pub points: PlotLine,
    /// Filled down to zero (stacked areas).
    pub filled: bool,
    /// `points` in the plot's axis unit, kept between frames (lent to the plot, not copied).
    pub scaled: Vec<egui_plot::PlotPoint>,
    /// The scale `scaled` was made with.
    pub scale: f64,
}

#[derive(Debug, Clone, PartialEq)]
struct CacheKey {
    what: Option<ProcSeriesKey>,
    device: u32,
    from: UnixMs,
    to: UnixMs,
    width: usize,
    end_tick: u64,
    stacked: bool,
}

/// Decimated lines of one graph, and whether it follows the live edge.
#[derive(Debug, Clone, Default)]
pub struct GraphCache {
    key: Option<CacheKey>,
    lines: Vec<GraphLine>,
    /// The range the user zoomed or panned to; `None` follows the newest data.
    pub free_range: Option<(UnixMs, UnixMs)>,
    buckets: crate::history::BucketCache,
}

impl GraphCache {
    /// Drops the cached lines so the next frame rebuilds them.
    pub fn invalidate(&mut self) {
        self.key = None;
    }

    fn get(&mut self, key: CacheKey, build: impl FnOnce() -> Vec<GraphLine>) -> &mut [GraphLine] {
        if self.key.as_ref() != Some(&key) {
            self.lines = build();
            self.key = Some(key);
        }
        &mut self.lines
    }
}

fn x_formatter(mark: GridMark, range: &std::ops::RangeInclusive<f64>) -> String {
    let ms = (mark.value * 1000.0) as i64;
    if range.end() - range.start() > 2.0 * 86400.0 {
        format::date_time(ms)[5..16].to_string()
    } else {
        format::clock(ms)
    }
}

/// Lines of one GPU between `from` and `to`: the device total plus one per process
/// (stacked: cumulative, filled).
#[allow(clippy::too_many_arguments)]
pub fn device_lines(
    h: &History,
    m: &Monitor,
    device: u32,
    from: UnixMs,
    to: UnixMs,
    width: usize,
    stacked: bool,
    buckets: &mut crate::history::BucketCache,
) -> Vec<GraphLine> {
    use crate::history::SeriesId;
    let mut lines = Vec::new();
    let t0 = h.tick_at(from);
    let t1 = h.tick_at(to.saturating_add(1));
    let mut procs: Vec<(&ProcSeriesKey, &Series)> = h
        .process_keys()
        .filter(|k| k.1 == device)
        .filter_map(|k| h.process(k).map(|s| (k, s)))
        .filter(|(_, s)| s.end_tick() > t0 && s.first_tick() < t1)
        .collect();
    procs.sort_by_key(|(k, _)| (k.0.start_time_ms, k.0.pid));
    let name_of = |k: &ProcSeriesKey| {
        let name = m.row(k).map_or("?", |r| r.name.as_str());
        format!("{name} ({})", k.0.pid)
    };
    if stacked {
        let (b0, per, n) = h.buckets(from, to, width);
        let xs: Vec<Option<f64>> = (0..n)
            .map(|i| h.time_of(b0 + i as u64 * per).map(|ms| ms as f64 / 1000.0))
            .collect();
        let mut cum = vec![0u64; n];
        let mut layers = Vec::new();
        for (k, s) in &procs {
            let mm = buckets.get(SeriesId::Process(**k), s, b0, per, n);
            let mut pts = Vec::with_capacity(n);
            for i in 0..n {
                let Some(x) = xs[i] else { continue };
                if mm[i].0 != NONE {
                    cum[i] += u64::from(mm[i].1);
                }
                pts.push([x, cum[i] as f64]);
            }
            layers.push(GraphLine {
                name: name_of(k),
                color: widgets::process_color(&k.0),
                points: pts,
                filled: true,
                scaled: Vec::new(),
                scale: 0.0,
            });
        }
        // Top layer first, so each lower layer is drawn over the one above it.
        layers.reverse();
        lines.extend(layers);
    } else {
        for (k, s) in &procs {
            lines.push(GraphLine {
                name: name_of(k),
                color: widgets::process_color(&k.0),
                points: h.decimate_cached(buckets, SeriesId::Process(**k), s, from, to, width),
                filled: false,
                scaled: Vec::new(),
                scale: 0.0,
            });
        }
    }
    if let Some(g) = h.ghost(device) {
        let pts = h.decimate_cached(buckets, SeriesId::Ghost(device), g, from, to, width);
        if pts.iter().any(|p| p[1] > 0.0) {
            lines.push(GraphLine {
                name: "Unattributed (no process)".into(),
                color: Color32::GRAY,
                points: pts,
                filled: false,
                scaled: Vec::new(),
                scale: 0.0,
            });
        }
    }
    if let Some(s) = h.device(device) {
        lines.insert(
            0,
            GraphLine {
                name: "Total used".into(),
                color: widgets::USED,
                points: h.decimate_cached(buckets, SeriesId::Device(device), s, from, to, width),
                filled: false,
                scaled: Vec::new(),
                scale: 0.0,
            },
        );
    }
    lines
}

#[allow(clippy::too_many_arguments)]
fn draw_plot(
    ui: &mut Ui,
    id: &str,
    lines: &mut [GraphLine],
    limit_mib: Option<f64>,
    units: Units,
    set_x: Option<(f64, f64)>,
    auto_x: bool,
    marks: &[(f64, &str)],
) -> egui_plot::PlotResponse<()> {
    // The axis uses one unit for all its labels: GiB when the scale reaches 10 GiB (or when
    // chosen), so the grid falls on round GiB values.
    let top = limit_mib.unwrap_or_else(|| {
        lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p[1]))
            .fold(0.0, f64::max)
    });
    let unit = match units {
        Units::MiB => "MiB",
        Units::GiB => "GiB",
        Units::Auto if top >= 10.0 * 1024.0 => "GiB",
        Units::Auto => "MiB",
    };
    let scale = if unit == "GiB" { 1.0 / 1024.0 } else { 1.0 };
    for l in lines.iter_mut() {
        if l.scale != scale || l.scaled.len() != l.points.len() {
            l.scaled = l
                .points
                .iter()
                .map(|p| egui_plot::PlotPoint::new(p[0], p[1] * scale))
                .collect();
            l.scale = scale;
        }
    }
    let lines: &[GraphLine] = lines;
    let mut plot = Plot::new(id)
        .legend(Legend::default().position(egui_plot::Corner::LeftTop))
        .allow_zoom([true, false])
        .allow_drag([true, false])
        .allow_scroll([true, false])
        .allow_boxed_zoom(false)
        .auto_bounds([auto_x, true])
        .include_y(0.0)
        .x_axis_formatter(x_formatter)
        .y_axis_formatter(move |m, _| axis_text(m.value, unit))
        .y_axis_min_width(56.0)
        .label_formatter(move |pos| match pos {
            egui_plot::HoverPosition::NearDataPoint {
                plot_name,
                position,
                ..
            } => Some(format!(
                "{plot_name}\n{}\n{}",
                format::clock((position.x * 1000.0) as i64),
                units.mib(position.y / scale)
            )),
            egui_plot::HoverPosition::Elsewhere { position } => Some(format!(
                "{}\n{}",
                format::clock((position.x * 1000.0) as i64),
                units.mib(position.y / scale)
            )),
        });
    if let Some(l) = limit_mib {
        plot = plot.include_y(l * scale * 1.02);
    }
    plot.show(ui, |plot_ui| {
        if let Some((a, b)) = set_x {
            plot_ui.set_plot_bounds_x(a..=b);
        }
        for l in lines.iter() {
            let mut line =
                Line::new(l.name.clone(), PlotPoints::Borrowed(&l.scaled)).color(l.color);
            if l.filled {
                line = line.fill(0.0).fill_alpha(0.85);
            } else {
                line = line.width(if l.name == "Total used" { 2.0 } else { 1.5 });
            }
            plot_ui.line(line);
        }
        if let Some(l) = limit_mib {
            plot_ui.hline(
                HLine::new("Memory limit", l * scale)
                    .color(widgets::LIMIT)
                    .width(1.5),
            );
        }
        for (x, name) in marks {
            plot_ui.vline(
                VLine::new(*name, *x)
                    .color(super::leaks::LEAK)
                    .style(egui_plot::LineStyle::dashed_loose()),
            );
        }
    })
}

fn axis_text(v: f64, unit: &str) -> String {
    if v < 0.0 {
        return String::new();
    }
    if unit == "GiB" && v.fract().abs() > 1e-6 {
        format!("{v:.1} GiB")
    } else {
        format!("{v:.0} {unit}")
    }
}

fn user_moved(ui: &Ui, resp: &egui::Response) -> bool {
    resp.dragged()
        || (resp.hovered()
            && ui.input(|i| i.smooth_scroll_delta != egui::Vec2::ZERO || i.zoom_delta() != 1.0))
}

/// The graph of one GPU with its toolbar (window presets, stacking, follow live).
/// `edge` is the right end of the window when following (the live edge, or a session's slider).
pub fn device_graph(
    ui: &mut Ui,
    m: &Monitor,
    snap: &crate::model::Snapshot,
    device: u32,
    state: &mut UiState,
    cache: &mut GraphCache,
    edge: UnixMs,
) {
    let h = &m.history;
    let Some((first, _)) = h.span() else {
        ui.label("Waiting for the first sample…");
        return;
    };
    let live_edge = edge;
    ui.horizontal(|ui| {
        ui.label(egui::RichText::new(format!("GPU {device} memory")).strong());
        ui.separator();
        for w in Window::ALL {
            if ui
                .selectable_label(state.window == w && cache.free_range.is_none(), w.label())
                .clicked()
            {
                state.window = w;
                cache.free_range = None;
            }
        }
        ui.separator();
        ui.checkbox(&mut state.stacked, "Stack by process");
        if cache.free_range.is_some() && ui.button("▶ Follow live").clicked() {
            cache.free_range = None;
        }
        ui.label(
            egui::RichText::new("drag to pan · scroll to zoom")
                .weak()
                .small(),
        );
    });
    let (from, to) = cache.free_range.unwrap_or_else(|| {
        let span = state.window.ms().unwrap_or(live_edge - first).max(1000);
        (live_edge - span, live_edge)
    });
    let width = (ui.available_width() as usize).clamp(50, 4000);
    let key = CacheKey {
        what: None,
        device,
        from,
        to,
        width,
        end_tick: h.end_tick(),
        stacked: state.stacked,
    };
    let stacked = state.stacked;
    let limit = snap
        .devices
        .iter()
        .find(|d| d.index == device)
        .and_then(|d| d.memory_total_bytes)
        .map(|b| (b / MIB) as f64);
    let set_x = if cache.free_range.is_none() {
        Some((from as f64 / 1000.0, to as f64 / 1000.0))
    } else {
        None
    };
    let mut buckets = std::mem::take(&mut cache.buckets);
    let lines = cache.get(key, || {
        device_lines(h, m, device, from, to, width, stacked, &mut buckets)
    });
    let resp = draw_plot(
        ui,
        &format!("gpu-graph-{device}"),
        lines,
        limit,
        state.units,
        set_x,
        false,
        &[],
    );
    cache.buckets = buckets;
    if user_moved(ui, &resp.response) || cache.free_range.is_some() {
        let b = resp.transform.bounds();
        cache.free_range = Some(((b.min()[0] * 1000.0) as i64, (b.max()[0] * 1000.0) as i64));
    }
}

/// The whole-lifetime graph of one process on one GPU, with optional marked times.
pub fn process_graph(
    ui: &mut Ui,
    m: &Monitor,
    key: ProcSeriesKey,
    units: Units,
    cache: &mut GraphCache,
    marks: &[(f64, &str)],
) {
    let h = &m.history;
    let Some(series) = h.process(&key) else {
        ui.label("No history held for this process.");
        return;
    };
    let from = m
        .row(&key)
        .map(|r| r.first_seen_ms)
        .or_else(|| h.time_of(series.first_tick()))
        .unwrap_or(0);
    let to = h
        .time_of(series.end_tick().saturating_sub(1))
        .unwrap_or(from);
    let width = (ui.available_width() as usize).clamp(50, 4000);
    let ck = CacheKey {
        what: Some(key),
        device: key.1,
        from,
        to,
        width,
        end_tick: h.end_tick(),
        stacked: false,
    };
    let lines = cache.get(ck, || {
        vec![GraphLine {
            name: "GPU memory".into(),
            color: widgets::process_color(&key.0),
            points: h.decimate(series, from, to, width),
            filled: true,
            scaled: Vec::new(),
            scale: 0.0,
        }]
    });
    draw_plot(
        ui,
        &format!("proc-graph-{}-{}", key.0.pid, key.1),
        lines,
        None,
        units,
        None,
        true,
        marks,
    );
}
