//! Memory-over-time graphs (egui_plot): per GPU, optionally stacked by process, and one
//! process's whole lifetime. Lines are min/max-decimated to the plot's width and cached until
//! the view, the width or the data change, so hours of history stay smooth.

use egui::{Color32, Ui};
use egui_plot::{GridMark, HLine, Line, Plot, PlotPoints, VLine};

use super::ui_state::UiState;
pub use super::ui_state::Window;
use super::{plot_table, widgets};
use crate::engine::view::Monitor;
use crate::model::format::{self, Units};
use crate::model::history::{History, PlotLine, ProcSeriesKey, Series, NONE};
use crate::model::{UnixMs, MIB};

/// What a drawn line stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// A process on the GPU.
    Process(ProcSeriesKey),
    /// Memory no process accounts for.
    Unattributed,
    /// The GPU's used memory.
    Total,
    /// The lowest to highest used memory in each bucket, behind a stack.
    TotalRange,
    /// Another figure of the series drawn (PyTorch's allocated and reserved memory in a
    /// process's graph).
    Figure,
}

/// One drawn line.
#[derive(Debug, Clone)]
pub struct GraphLine {
    /// Legend name.
    pub name: String,
    /// What it stands for.
    pub kind: LineKind,
    /// Colour.
    pub color: Color32,
    /// Points (unix seconds, MiB) as drawn: cumulative when stacked.
    pub points: PlotLine,
    /// The series' own value at each point (MiB): what the hover shows.
    pub own: Vec<f64>,
    /// Filled down to the layer below (stacked areas): the band between `points` and
    /// `points` less `own`.
    pub filled: bool,
    /// Where each run of consecutive points after the first begins (a process absent from
    /// some instants in between): a band is filled run by run, never across a gap.
    pub breaks: Vec<usize>,
    /// `points` in the plot's axis unit, kept between frames (lent to the plot, not copied).
    pub scaled: Vec<egui_plot::PlotPoint>,
    /// The scale `scaled` was made with.
    pub scale: f64,
}

impl GraphLine {
    fn new(name: String, kind: LineKind, color: Color32, points: PlotLine, filled: bool) -> Self {
        let own = points.iter().map(|p| p[1]).collect();
        Self {
            name,
            kind,
            color,
            points,
            own,
            filled,
            breaks: Vec::new(),
            scaled: Vec::new(),
            scale: 0.0,
        }
    }

    /// Its runs of consecutive points (see [`GraphLine::breaks`]).
    pub fn runs(&self) -> Vec<std::ops::Range<usize>> {
        let mut starts = vec![0];
        starts.extend(self.breaks.iter().copied());
        starts.push(self.points.len());
        starts
            .windows(2)
            .filter(|w| w[1] > w[0])
            .map(|w| w[0]..w[1])
            .collect()
    }

    /// Its own value at time `x` (unix seconds): the last point at or before `x`, when `x`
    /// lies within the line (a process not yet started or gone has none).
    pub fn value_at(&self, x: f64, step: f64) -> Option<f64> {
        let i = self.points.partition_point(|p| p[0] <= x);
        if i == 0 {
            return None;
        }
        let p = self.points[i - 1];
        (x - p[0] <= step).then(|| self.own[i - 1])
    }
}

#[derive(Debug, Clone, PartialEq)]
struct CacheKey {
    /// The history summarised ([`History::id`]): lines of another source are never reused.
    history: u64,
    what: Option<ProcSeriesKey>,
    device: u32,
    from: UnixMs,
    to: UnixMs,
    width: usize,
    end_tick: u64,
    stacked: bool,
    dark: bool,
    palette: widgets::Palette,
}

/// The time one point of a decimated graph stands for (unix seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Its first sample.
    pub from_s: f64,
    /// Its last sample (the newest one while it fills).
    pub to_s: f64,
    /// The instant its stacked values were read at (its last sample).
    pub at_s: f64,
    /// The lowest and highest total used memory in it (MiB).
    pub total_range: Option<(f64, f64)>,
}

/// The lines of a GPU's graph and the buckets they were decimated into.
#[derive(Debug, Clone, Default)]
pub struct DeviceLines {
    /// What is drawn, bottom first.
    pub lines: Vec<GraphLine>,
    /// The time range of each point (for the hover).
    pub buckets: Vec<Bucket>,
}

/// Where the window's graph parts were drawn last (tests of the layout).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrawnLayout {
    /// The GPU memory graph's plot.
    pub graph: Option<egui::Rect>,
    /// The x of the newest moment shown in it ("now" when following).
    pub edge_x: Option<f32>,
    /// The detail pane (`None`: closed).
    pub detail_pane: Option<egui::Rect>,
}

/// Decimated lines of one graph, and whether it follows the live edge.
#[derive(Debug, Clone, Default)]
pub struct GraphCache {
    key: Option<CacheKey>,
    drawn: DeviceLines,
    /// The range the user zoomed or panned to; `None` follows the newest data.
    pub free_range: Option<(UnixMs, UnixMs)>,
    /// Where the plot was drawn last (the wheel over it zooms).
    pub plot_rect: Option<egui::Rect>,
    /// Where the newest moment shown ("now" when following, the slider in a session) was
    /// drawn last: its x on screen.
    pub edge_x: Option<f32>,
    buckets: crate::model::history::BucketCache,
    metrics: Option<(CacheKey, Vec<Vec<GraphLine>>)>,
    /// The plot's series shown as a table instead (the "Table" toggle).
    pub as_table: bool,
    /// The graph shows a recorded session (its right end is the slider, not "live").
    pub in_session: bool,
}

impl GraphCache {
    /// Drops the cached lines so the next frame rebuilds them.
    pub fn invalidate(&mut self) {
        self.key = None;
    }

    fn get(&mut self, key: CacheKey, build: impl FnOnce() -> DeviceLines) -> &mut DeviceLines {
        if self.key.as_ref() != Some(&key) {
            self.drawn = build();
            self.key = Some(key);
        }
        &mut self.drawn
    }
}

/// A time axis label: the clock ("23:05:00"), the day at midnight ("7 Dec"), the date and
/// time over more than two days ("12-07 06:00").
pub fn x_formatter(mark: GridMark, range: &std::ops::RangeInclusive<f64>) -> String {
    let ms = (mark.value * 1000.0).round() as i64;
    if range.end() - range.start() > 2.0 * 86400.0 {
        format::date_time(ms)
            .get(5..16)
            .unwrap_or_default()
            .to_string()
    } else {
        match format::clock(ms) {
            c if c == "00:00:00" => format::day(ms),
            c => c,
        }
    }
}

/// Lines of one GPU between `from` and `to`: the device total plus one per process and one for
/// unattributed memory, decimated into buckets `width` across. Stacked: every series is read
/// at the same instant of each bucket, processes (oldest at the bottom) then unattributed
/// memory as cumulative, filled areas whose top edge is the total at that instant; the
/// total's lowest-to-highest range in each bucket is drawn behind them. Unstacked: each
/// line keeps every bucket's lowest and highest value.
#[allow(clippy::too_many_arguments)]
pub fn device_lines(
    h: &History,
    m: &Monitor,
    device: u32,
    (from, to): (UnixMs, UnixMs),
    width: usize,
    stacked: bool,
    colors: &widgets::Colors,
    buckets: &mut crate::model::history::BucketCache,
) -> DeviceLines {
    let t0 = h.tick_at(from);
    let t1 = h.tick_at(to.saturating_add(1));
    let mut procs: Vec<(&ProcSeriesKey, &Series)> = h
        .process_keys()
        .filter(|k| k.1 == device)
        .filter_map(|k| h.process(k).map(|s| (k, s)))
        .filter(|(_, s)| s.end_tick() > t0 && s.first_tick() < t1)
        .collect();
    procs.sort_by_key(|(k, _)| (k.0.start_time_ms, k.0.pid));
    let label = |k: &ProcSeriesKey| {
        let row = m.row(k);
        let name = row.map_or("?", |r| r.info.name.as_str());
        (
            format!("{name} ({})", k.0.pid),
            colors.slot(row.map_or(0, |r| r.color_slot)),
        )
    };
    let (b0, per, n) = h.buckets(from, to, width);
    let spans = bucket_spans(h, device, (b0, per, n), buckets);
    let grid = Grid {
        b0,
        per,
        n,
        from,
        to,
        width,
    };
    let lines = if stacked {
        stacked_lines(h, device, &procs, &label, &grid, buckets)
    } else {
        plain_lines(h, device, &procs, &label, &grid, buckets)
    };
    DeviceLines {
        lines,
        buckets: spans,
    }
}

/// How a graph's time range is cut into buckets: the first tick, ticks per bucket, how many
/// buckets, and the range and width they were made for.
struct Grid {
    b0: u64,
    per: u64,
    n: usize,
    from: UnixMs,
    to: UnixMs,
    width: usize,
}

/// A process's legend name and colour.
type Label<'a> = dyn Fn(&ProcSeriesKey) -> (String, Color32) + 'a;

/// The time each bucket covers, and the total's lowest and highest value in it.
fn bucket_spans(
    h: &History,
    device: u32,
    (b0, per, n): (u64, u64, usize),
    buckets: &mut crate::model::history::BucketCache,
) -> Vec<Bucket> {
    use crate::model::history::SeriesId;
    let secs = |tick: u64| h.time_of(tick).map(|ms| ms as f64 / 1000.0);
    let total_mm = h.device(device).map(|s| {
        buckets
            .get(h, SeriesId::Device(device), s, b0, per, n)
            .to_vec()
    });
    (0..n)
        .filter_map(|i| {
            let at = h.bucket_instant(b0, per, i);
            let from_s = secs(b0 + i as u64 * per)?;
            let to_s = secs(at)?;
            let total_range = total_mm
                .as_ref()
                .and_then(|mm| mm.get(i))
                .filter(|(lo, _)| *lo != NONE)
                .map(|(lo, hi)| (f64::from(*lo), f64::from(*hi)));
            Some(Bucket {
                from_s,
                to_s,
                at_s: to_s,
                total_range,
            })
        })
        .collect()
}

/// The stack: every series read at each bucket's instant, processes (oldest at the bottom)
/// then unattributed memory as cumulative filled areas, the total's range behind them and the
/// total on top.
fn stacked_lines(
    h: &History,
    device: u32,
    procs: &[(&ProcSeriesKey, &Series)],
    label: &Label<'_>,
    g: &Grid,
    buckets: &mut crate::model::history::BucketCache,
) -> Vec<GraphLine> {
    use crate::model::history::SeriesId;
    let (b0, per, n) = (g.b0, g.per, g.n);
    let secs = |tick: u64| h.time_of(tick).map(|ms| ms as f64 / 1000.0);
    let mut lines = Vec::new();
    let xs: Vec<Option<f64>> = (0..n).map(|i| secs(h.bucket_instant(b0, per, i))).collect();
    let mut cum = vec![0u64; n];
    let mut layer = |name: String, kind: LineKind, color: Color32, at: &[u32]| {
        let mut pts = Vec::with_capacity(n);
        let mut own = Vec::with_capacity(n);
        let mut breaks = Vec::new();
        let mut last = None;
        for i in 0..n {
            // Not alive at this instant: no point, so the hover shows nothing.
            let (Some(x), Some(&v)) = (xs[i], at.get(i).filter(|v| **v != NONE)) else {
                continue;
            };
            if last.is_some_and(|l| l + 1 != i) {
                breaks.push(pts.len());
            }
            last = Some(i);
            cum[i] += u64::from(v);
            pts.push([x, cum[i] as f64]);
            own.push(f64::from(v));
        }
        GraphLine {
            own,
            breaks,
            ..GraphLine::new(name, kind, color, pts, true)
        }
    };
    let mut layers = Vec::new();
    for (k, s) in procs {
        let at = buckets.get_at(h, SeriesId::Process(**k), s, b0, per, n);
        let (name, color) = label(k);
        layers.push(layer(name, LineKind::Process(**k), color, at));
    }
    if let Some(gh) = h.ghost(device) {
        let at = buckets.get_at(h, SeriesId::Ghost(device), gh, b0, per, n);
        if at.iter().any(|v| *v != NONE && *v > 0) {
            layers.push(layer(
                UNATTRIBUTED.into(),
                LineKind::Unattributed,
                widgets::UNATTRIBUTED,
                at,
            ));
        }
    }
    // Behind the stack: the total's range in each bucket (its peaks stay visible).
    if let Some(s) = h.device(device).filter(|_| per > 1) {
        lines.push(GraphLine::new(
            "Total used (range)".into(),
            LineKind::TotalRange,
            widgets::USED.gamma_multiply(0.55),
            h.decimate_cached(buckets, SeriesId::Device(device), s, g.from, g.to, g.width),
            false,
        ));
    }
    // Bottom first: each band is filled between its own edges, so the order they are drawn
    // in changes no colour.
    lines.extend(layers);
    if let Some(s) = h.device(device) {
        // The top edge of the stack: the total at the same instants.
        let at = buckets.get_at(h, SeriesId::Device(device), s, b0, per, n);
        let pts: PlotLine = (0..n)
            .filter_map(|i| {
                let v = *at.get(i).filter(|v| **v != NONE)?;
                Some([xs[i]?, f64::from(v)])
            })
            .collect();
        lines.push(GraphLine::new(
            "Total used".into(),
            LineKind::Total,
            widgets::USED,
            pts,
            false,
        ));
    }
    lines
}

/// Unstacked: each line keeps every bucket's lowest and highest value; the total on top.
fn plain_lines(
    h: &History,
    device: u32,
    procs: &[(&ProcSeriesKey, &Series)],
    label: &Label<'_>,
    g: &Grid,
    buckets: &mut crate::model::history::BucketCache,
) -> Vec<GraphLine> {
    use crate::model::history::SeriesId;
    let (from, to, width) = (g.from, g.to, g.width);
    let mut lines = Vec::new();
    for (k, s) in procs {
        let (name, color) = label(k);
        lines.push(GraphLine::new(
            name,
            LineKind::Process(**k),
            color,
            h.decimate_cached(buckets, SeriesId::Process(**k), s, from, to, width),
            false,
        ));
    }
    if let Some(gh) = h.ghost(device) {
        let pts = h.decimate_cached(buckets, SeriesId::Ghost(device), gh, from, to, width);
        if pts.iter().any(|p| p[1] > 0.0) {
            lines.push(GraphLine::new(
                UNATTRIBUTED.into(),
                LineKind::Unattributed,
                widgets::UNATTRIBUTED,
                pts,
                false,
            ));
        }
    }
    if let Some(s) = h.device(device) {
        // The total goes on top of everything.
        lines.push(GraphLine::new(
            "Total used".into(),
            LineKind::Total,
            widgets::USED,
            h.decimate_cached(buckets, SeriesId::Device(device), s, from, to, width),
            false,
        ));
    }
    lines
}

/// The legend name of memory no process accounts for.
pub const UNATTRIBUTED: &str = "Unattributed (no process)";

/// How a plot is drawn, beyond its lines.
#[derive(Debug, Clone, Default)]
struct PlotOpts<'a> {
    /// The GPU's memory size (MiB): the red limit line.
    limit_mib: Option<f64>,
    /// Memory the driver reserves (MiB), for the hover's free memory.
    reserved_mib: Option<f64>,
    /// Axis and hover units.
    units: Units,
    /// The time range to show (following live); `None` leaves it to the user.
    set_x: Option<(f64, f64)>,
    /// Fit the time axis to the data (the lifetime graph).
    auto_x: bool,
    /// Fit the memory axis to the data shown instead of 0 … the GPU's size.
    fit_y: bool,
    /// Dashed vertical marks (unix seconds, name).
    marks: &'a [(f64, String)],
    /// The hover lists every series at the cursor's time (the GPU graph).
    table_hover: bool,
    /// A line drawn thicker (the selected process).
    highlight: Option<ProcSeriesKey>,
    /// The OOM forecast: from (unix s, MiB used now) to (unix s when full, MiB limit).
    forecast: Option<[[f64; 2]; 2]>,
    /// Seconds one point of the lines stands for (the hover's tolerance).
    step_s: f64,
    /// Fixed height in points (default: what is available).
    height: Option<f32>,
    /// Plots of one group share their time axis (pan and zoom together) and their cursor.
    link: Option<egui::Id>,
    /// Shaded time windows (unix s from, to, name): leaks and OOM deaths.
    spans: &'a [(f64, f64, String)],
    /// The time range of each point (the hover's title).
    buckets: &'a [Bucket],
    /// The lines are a stack read at each bucket's instant.
    stacked: bool,
    /// Fixed width in points (default: what is available).
    width: Option<f32>,
}

/// The time-axis grid: round steps (10 s, 1 min, 5 min, 1 h, …) in local time, about eight
/// marks across the plot.
fn time_grid(input: egui_plot::GridInput) -> Vec<GridMark> {
    const STEPS: [f64; 18] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
        10800.0, 21600.0, 43200.0, 86400.0,
    ];
    let (lo, hi) = input.bounds;
    let span = (hi - lo).max(1e-3);
    let step = STEPS
        .iter()
        .copied()
        .find(|s| span / s <= 8.0)
        .unwrap_or_else(|| (span / 8.0 / 86400.0).ceil() * 86400.0);
    // Align to local time (a time zone may be offset by a non-round amount from UTC).
    let offset = f64::from(chrono::Local::now().offset().local_minus_utc());
    let mut marks = Vec::new();
    // A label is centred on its mark: one closer to an end than half a label's width would be
    // cut there (the lifetime graph's last one was). egui_plot asks with the size of 8 points.
    let point = input.base_step_size / 8.0;
    let margin = point * X_LABEL_HALF_WIDTH;
    let mut v = ((lo + offset) / step).ceil() * step - offset;
    while v <= hi && marks.len() < 64 {
        if v - lo >= margin && hi - v >= margin {
            marks.push(GridMark {
                value: v,
                step_size: step,
            });
        }
        v += step;
    }
    marks
}

/// Half the width of the widest time label ("23:05:00", "7 Dec"), with a little room.
const X_LABEL_HALF_WIDTH: f64 = 30.0;

/// Points between two labelled values of a value axis at least (egui_plot hides a label
/// closer than 20 points to the next).
pub const Y_LABEL_GAP: f32 = 22.0;

/// Points between two labelled values on a short plot at least (a line of text).
pub const Y_LABEL_MIN_GAP: f32 = 16.0;

/// The value-axis grid: round steps of 1, 2 or 5 × 10ⁿ, the finest that keeps
/// [`Y_LABEL_GAP`] between labels, and never fewer than three marks in view (a finer step
/// when the plot is short, down to the height of a line of text).
pub fn value_grid(input: egui_plot::GridInput) -> Vec<GridMark> {
    let (lo, hi) = input.bounds;
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) {
        return Vec::new();
    }
    // egui_plot gives the smallest step as 8 points' worth of value (its grid spacing).
    let per_point = Some(input.base_step_size / 8.0)
        .filter(|p| p.is_finite() && *p > 0.0)
        .unwrap_or(span / 100.0);
    let steps = |from: f64| {
        let mut e = 10f64.powi(from.log10().floor() as i32 - 1);
        std::iter::from_fn(move || {
            let out = [e, 2.0 * e, 5.0 * e];
            e *= 10.0;
            Some(out)
        })
        .flatten()
    };
    let marks_of = |step: f64| ((hi / step).floor() - (lo / step).ceil() + 1.0).max(0.0) as usize;
    let first = span / 1000.0;
    let mut step = steps(first)
        .find(|s| *s / per_point >= f64::from(Y_LABEL_GAP))
        .unwrap_or(span);
    if marks_of(step) < 3 {
        // Short plot: the coarsest step giving three marks, as long as labels still fit.
        if let Some(s) = steps(first)
            .take_while(|s| marks_of(*s) >= 3)
            .last()
            .filter(|s| *s / per_point >= f64::from(Y_LABEL_MIN_GAP))
        {
            step = s;
        }
    }
    let mut marks = Vec::new();
    let mut v = (lo / step).ceil() * step;
    while v <= hi + step * 1e-9 && marks.len() < 200 {
        marks.push(GridMark {
            value: v,
            step_size: step,
        });
        v += step;
    }
    marks
}

/// A value axis `width` points wide at least, labelled by `label`, whose labels show down to
/// [`Y_LABEL_MIN_GAP`] apart (egui_plot's default hides them under 20).
fn value_axis<'a>(width: f32, label: impl Fn(GridMark) -> String + 'a) -> egui_plot::AxisHints<'a> {
    egui_plot::AxisHints::new_y()
        .formatter(move |m, _| label(m))
        .min_thickness(width)
        .label_spacing(Y_LABEL_MIN_GAP..=Y_LABEL_MIN_GAP + LABEL_FADE)
}

/// The time axis: clock labels at least [`X_LABEL_MIN_GAP`] apart, never faded.
fn time_axis<'a>() -> egui_plot::AxisHints<'a> {
    egui_plot::AxisHints::new_x()
        .formatter(x_formatter)
        .label_spacing(X_LABEL_MIN_GAP..=X_LABEL_MIN_GAP + LABEL_FADE)
}

/// Points apart at least for two time labels ("23:05:00" is about 50 points wide).
const X_LABEL_MIN_GAP: f32 = 58.0;

/// egui_plot fades a label in over a range of gaps, down to a contrast no one reads (1.6:1):
/// a label shown here is shown whole (the range is this narrow).
const LABEL_FADE: f32 = 0.5;

/// A value-axis label: as many decimals as the grid's step needs, so neighbours never read
/// alike ("0.5 GiB", "1.0 GiB"; "20 %").
pub fn value_label(mark: GridMark, unit: &str) -> String {
    if mark.value < -mark.step_size * 1e-6 {
        return String::new();
    }
    let decimals = (-mark.step_size.log10().floor()).clamp(0.0, 6.0) as usize;
    let v = if mark.value.abs() < mark.step_size * 1e-6 {
        0.0
    } else {
        mark.value
    };
    format!("{v:.decimals$} {unit}")
}

fn draw_plot(
    ui: &mut Ui,
    id: &str,
    lines: &mut [GraphLine],
    o: &PlotOpts<'_>,
) -> egui_plot::PlotResponse<()> {
    // The axis uses one unit for all its labels: GiB when the scale reaches 10 GiB (or when
    // chosen), so the grid falls on round GiB values.
    let top = o.limit_mib.filter(|_| !o.fit_y).unwrap_or_else(|| {
        lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p[1]))
            .fold(0.0, f64::max)
    });
    let unit = match o.units {
        Units::MiB => "MiB",
        Units::GiB => "GiB",
        Units::Auto if top >= 10.0 * 1024.0 => "GiB",
        Units::Auto => "MiB",
    };
    let scale = if unit == "GiB" { 1.0 / 1024.0 } else { 1.0 };
    rescale(lines, scale);
    let lines: &[GraphLine] = lines;
    let fit = o.fit_y.then(|| fit_range(lines, o)).flatten();
    let days = widgets::shows_days(o.set_x.or_else(|| lines_span(lines)));
    let plot = configure_plot(id, o, (unit, scale, days), fit);
    let resp = plot.show(ui, |plot_ui| {
        if let Some((a, b)) = o.set_x {
            plot_ui.set_plot_bounds_x(a..=b);
        }
        if let Some((lo, hi)) = fit {
            plot_ui.set_plot_bounds_y(lo..=hi);
        }
        wheel_zoom(plot_ui);
        plot_lines(plot_ui, lines, o, scale);
    });
    if o.table_hover {
        if let Some(pos) = resp.response.hover_pos() {
            let x = resp.transform.value_from_position(pos).x;
            let shown = resp.transform.bounds();
            let at = HoverAt {
                x,
                step: o.step_s,
                bucket: bucket_at(o.buckets, x, o.step_s),
                stacked: o.stacked,
                days: widgets::shows_days(Some((shown.min()[0], shown.max()[0]))),
            };
            let (limit, reserved, units) = (o.limit_mib, o.reserved_mib, o.units);
            resp.response.clone().on_hover_ui_at_pointer(|ui| {
                hover_table(ui, lines, &at, limit, reserved, units);
            });
        }
    }
    resp
}

/// Makes each line's points in the axis unit (`scale` from MiB), when not made already.
fn rescale(lines: &mut [GraphLine], scale: f64) {
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
}

/// Fit to data: the range of what is drawn in the time shown, with a margin.
fn fit_range(lines: &[GraphLine], o: &PlotOpts<'_>) -> Option<(f64, f64)> {
    let (x0, x1) = o.set_x.unwrap_or((f64::MIN, f64::MAX));
    let (lo, hi) = lines
        .iter()
        .flat_map(|l| l.scaled.iter())
        .filter(|p| p.x >= x0 && p.x <= x1)
        .fold((f64::MAX, f64::MIN), |(lo, hi), p| {
            (lo.min(p.y), hi.max(p.y))
        });
    (lo <= hi).then(|| {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.002).max(1e-3);
        // A stack is read from 0: cutting its foot would cut its bottom band (the process
        // at the bottom would look smaller than it is). Fit its top only.
        let lo = if o.stacked { 0.0 } else { (lo - pad).max(0.0) };
        (lo, hi + pad)
    })
}

/// The plot's axes, hover label, size and links, before its lines.
fn configure_plot<'a>(
    id: &str,
    o: &PlotOpts<'_>,
    (unit, scale, days): (&'static str, f64, bool),
    fit: Option<(f64, f64)>,
) -> Plot<'a> {
    let units = o.units;
    let mut plot = Plot::new(id)
        .allow_zoom([true, false])
        .allow_drag([true, false])
        .allow_scroll(false)
        .allow_boxed_zoom(false)
        .allow_double_click_reset(false)
        .auto_bounds([o.auto_x, fit.is_none()])
        .custom_x_axes(vec![time_axis()])
        .x_grid_spacer(time_grid)
        .y_grid_spacer(value_grid)
        .custom_y_axes(vec![value_axis(56.0, move |m| value_label(m, unit))]);
    plot = if o.table_hover {
        // The hover table (drawn by the caller) replaces the single-value label.
        plot.label_formatter(|_| None)
    } else {
        plot.label_formatter(move |pos| match pos {
            egui_plot::HoverPosition::NearDataPoint {
                plot_name,
                position,
                ..
            } => Some(format!(
                "{plot_name}\n{}\n{}",
                widgets::hover_time(position.x, days),
                units.mib(position.y / scale)
            )),
            egui_plot::HoverPosition::Elsewhere { .. } => None,
        })
    };
    if let Some(h) = o.height {
        plot = plot.height(h);
    }
    if let Some(w) = o.width {
        plot = plot.width(w);
    }
    if let Some(g) = o.link {
        plot = plot
            .link_axis(g, [true, false])
            .link_cursor(g, [true, false]);
    }
    if fit.is_none() {
        plot = plot.include_y(0.0);
        if let Some(l) = o.limit_mib {
            plot = plot.include_y(l * scale * 1.02);
        }
    }
    plot
}

/// The wheel zooms time around the cursor, a notch in one frame (egui's smoothed scroll would
/// spread it over a second of frames). In the window the wheel reaches the plot as a zoom
/// event ([`wheel_to_zoom`]); this reads one that was not turned.
fn wheel_zoom(plot_ui: &mut egui_plot::PlotUi<'_>) {
    if plot_ui.response().hovered() {
        let f = plot_ui
            .ctx()
            .input(|i| wheel_zoom_factor(&i.events, i.modifiers));
        if f != 1.0 {
            plot_ui.zoom_bounds_around_hovered(egui::vec2(f, 1.0));
        }
    }
}

/// The lines (the highlighted one thicker), the memory limit, the OOM forecast and the marks.
fn plot_lines<'a>(
    plot_ui: &mut egui_plot::PlotUi<'a>,
    lines: &'a [GraphLine],
    o: &PlotOpts<'_>,
    scale: f64,
) {
    // The shading of each window first, behind the bands: a band keeps its own colour in a
    // leak's time too (the shading shows above the stack).
    for (a, b, _) in o.spans {
        plot_ui.span(
            egui_plot::Span::new("", *a..=*b)
                .fill(super::leaks::LEAK.gamma_multiply(0.12))
                .border_width(0.0),
        );
    }
    for l in lines.iter() {
        let mut line = Line::new(l.name.clone(), PlotPoints::Borrowed(&l.scaled)).color(l.color);
        let highlighted =
            matches!((l.kind, o.highlight), (LineKind::Process(k), Some(h)) if k == h);
        if l.filled {
            // Opaque, between its own edges: the band has its swatch's colour whatever lies
            // above, below or behind it (dimmed towards the plot's background, still opaque,
            // while another is selected).
            let dim = o.highlight.is_some() && !highlighted;
            let fill = if dim {
                let bg = plot_ui.ctx().global_style().visuals.extreme_bg_color;
                bg.lerp_to_gamma(l.color, 0.45)
            } else {
                l.color
            };
            fill_band(plot_ui, l, fill);
            line = line.color(fill).width(if highlighted { 2.5 } else { 1.0 });
        } else {
            line = line.width(match l.kind {
                LineKind::Total => 2.0,
                _ if highlighted => 3.0,
                _ => 1.5,
            });
        }
        plot_ui.line(line);
    }
    if let Some(l) = o.limit_mib {
        plot_ui.hline(
            HLine::new("Memory limit", l * scale)
                .color(widgets::LIMIT)
                .width(1.5),
        );
    }
    if let Some([[x0, y0], [x1, y1]]) = o.forecast {
        plot_ui.line(
            Line::new(
                "OOM forecast",
                PlotPoints::new(vec![[x0, y0 * scale], [x1, y1 * scale]]),
            )
            .color(widgets::FORECAST)
            .width(2.0)
            .style(egui_plot::LineStyle::dashed_loose()),
        );
    }
    // One label per group of windows that overlap (two labels over one another read as
    // neither).
    for (a, b, name) in span_labels(o.spans) {
        plot_ui.span(
            egui_plot::Span::new(name, a..=b)
                .fill(Color32::TRANSPARENT)
                .border_width(0.0),
        );
    }
    for (x, name) in o.marks {
        plot_ui.vline(
            VLine::new(name.clone(), *x)
                .color(super::leaks::LEAK)
                .style(egui_plot::LineStyle::dashed_loose()),
        );
    }
}

/// One stacked band, filled run by run between its lower edge (the bands below) and its top.
fn fill_band(plot_ui: &mut egui_plot::PlotUi<'_>, l: &GraphLine, fill: Color32) {
    for run in l.runs() {
        let (Some(top), Some(own)) = (l.scaled.get(run.clone()), l.own.get(run)) else {
            continue;
        };
        if top.len() < 2 {
            continue;
        }
        let xs: Vec<f64> = top.iter().map(|p| p.x).collect();
        let hi: Vec<f64> = top.iter().map(|p| p.y).collect();
        let lo: Vec<f64> = hi
            .iter()
            .zip(own)
            .map(|(h, v)| (h - v * l.scale).max(0.0))
            .collect();
        plot_ui.add(
            egui_plot::FilledArea::new(l.name.clone(), &xs, &lo, &hi)
                .fill_color(fill)
                .allow_hover(false),
        );
    }
}

/// The labels of shaded windows (unix s from, to, name): one per group of windows that
/// overlap, over the group's whole span, naming each window once ("leak: a (1) · leak: b (2)").
pub fn span_labels(spans: &[(f64, f64, String)]) -> Vec<(f64, f64, String)> {
    let mut sorted: Vec<&(f64, f64, String)> = spans.iter().collect();
    sorted.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut groups: Vec<(f64, f64, Vec<&str>)> = Vec::new();
    for (a, b, name) in sorted {
        match groups.last_mut() {
            Some(g) if *a <= g.1 => {
                g.1 = g.1.max(*b);
                if !g.2.contains(&name.as_str()) {
                    g.2.push(name);
                }
            }
            _ => groups.push((*a, *b, vec![name])),
        }
    }
    groups
        .into_iter()
        .map(|(a, b, names)| (a, b, names.join(" · ")))
        .collect()
}

/// Where the pointer is on a GPU graph, for its hover.
struct HoverAt {
    /// Its time (unix s).
    x: f64,
    /// Seconds one point stands for.
    step: f64,
    /// The bucket under it.
    bucket: Option<Bucket>,
    /// Whether the lines are a stack read at each bucket's instant.
    stacked: bool,
    /// The graph shows more than one day: times name their day.
    days: bool,
}

/// The bucket that holds time `x` (within `step` after its last sample).
pub fn bucket_at(buckets: &[Bucket], x: f64, step: f64) -> Option<Bucket> {
    let i = buckets.partition_point(|b| b.from_s <= x);
    let b = *buckets.get(i.checked_sub(1)?)?;
    (x <= b.to_s + step).then_some(b)
}

/// The hover's title: the bucket's time range ("12:00:00 – 12:01:36"), or one time when it
/// holds one sample. With `days` (the graph shows more than one day) each time names its
/// day ("7 Dec 00:00:00 – 00:01:36"; the end's day only when it is another).
pub fn bucket_title(b: &Bucket, days: bool) -> String {
    if b.to_s > b.from_s {
        let end_days = days && !widgets::same_day(b.from_s, b.to_s);
        format!(
            "{} – {}",
            widgets::hover_time(b.from_s, days),
            widgets::hover_time(b.to_s, end_days)
        )
    } else {
        widgets::hover_time(b.from_s, days)
    }
}

/// The time range the lines cover (unix s), first point to last.
fn lines_span(lines: &[GraphLine]) -> Option<(f64, f64)> {
    let first = lines.iter().filter_map(|l| l.points.first()).map(|p| p[0]);
    let last = lines.iter().filter_map(|l| l.points.last()).map(|p| p[0]);
    let a = first.fold(f64::INFINITY, f64::min);
    let b = last.fold(f64::NEG_INFINITY, f64::max);
    (a <= b).then_some((a, b))
}

/// The hover of the GPU graph: the bucket under the cursor (its time range), every series's
/// own value with its colour (stacked: in the stack's order from its top, as the legend;
/// else largest first), then the total and the free memory. Stacked,
/// the values are those of the bucket's last sample, so they add up to the total; the total's
/// range in the bucket follows.
fn hover_table(
    ui: &mut Ui,
    lines: &[GraphLine],
    at: &HoverAt,
    limit_mib: Option<f64>,
    reserved_mib: Option<f64>,
    units: Units,
) {
    let (x, step) = match (at.stacked, at.bucket) {
        (true, Some(b)) => (b.at_s, 0.0),
        _ => (at.x, at.step),
    };
    match &at.bucket {
        Some(b) => {
            ui.label(egui::RichText::new(bucket_title(b, at.days)).strong());
            if at.stacked && b.to_s > b.from_s {
                ui.label(
                    egui::RichText::new(format!(
                        "values at {}",
                        widgets::hover_time(b.at_s, false)
                    ))
                    .weak(),
                );
            }
        }
        None => {
            ui.label(egui::RichText::new(widgets::hover_time(x, at.days)).strong());
        }
    }
    // One unit for the whole list (Auto: from the GPU's size).
    let largest = limit_mib.unwrap_or(0.0).max(0.0) * crate::model::MIB as f64;
    let units = units.for_largest(largest as u64);
    let mut rows: Vec<(&GraphLine, f64)> = lines
        .iter()
        .filter(|l| !matches!(l.kind, LineKind::Total | LineKind::TotalRange))
        .filter_map(|l| l.value_at(x, step).map(|v| (l, v)))
        .collect();
    if at.stacked {
        // As the stack and the legend: its top first.
        rows.reverse();
    } else {
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    }
    let total = lines
        .iter()
        .find(|l| l.kind == LineKind::Total)
        .and_then(|l| l.value_at(x, step));
    egui::Grid::new("graph-hover")
        .num_columns(2)
        .spacing([12.0, 2.0])
        .show(ui, |ui| {
            for (l, v) in &rows {
                ui.horizontal(|ui| {
                    widgets::color_swatch(ui, l.color);
                    ui.label(&l.name);
                });
                ui.monospace(units.mib(*v));
                ui.end_row();
            }
            if let Some(t) = total {
                ui.horizontal(|ui| {
                    widgets::color_swatch(ui, widgets::USED);
                    ui.label(egui::RichText::new("Total used").strong());
                });
                ui.monospace(units.mib(t));
                ui.end_row();
                if let Some((lo, hi)) = at
                    .bucket
                    .and_then(|b| b.total_range)
                    .filter(|(lo, hi)| hi > lo)
                {
                    ui.label("Range in this time");
                    ui.monospace(format!("{} – {}", units.mib(lo), units.mib(hi)));
                    ui.end_row();
                }
                if let Some(l) = limit_mib {
                    ui.label("Free");
                    ui.monospace(units.mib((l - t - reserved_mib.unwrap_or(0.0)).max(0.0)));
                    ui.end_row();
                }
            }
        });
    if rows.is_empty() && total.is_none() {
        ui.label(egui::RichText::new("No data at this time").weak());
    }
}

/// The legend, outside the plot: one swatch per series in view (the selected one bold), at most
/// [`LEGEND_MAX`] processes (the largest now, the selected one always) and a count of the
/// rest. Stacked, in the stack's order from its top (memory no process accounts for, then
/// the newest process down to the oldest), said in its first words; unstacked, the newest
/// first too.
fn legend(
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
            item(ui, l.color, &l.name, bold);
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
pub fn legend_processes(
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
pub const LEGEND_MAX: usize = 12;

fn user_moved(ui: &Ui, resp: &egui::Response) -> bool {
    resp.dragged()
        || (resp.hovered()
            && ui.input(|i| {
                wheel_zoom_factor(&i.events, i.modifiers) != 1.0 || i.zoom_delta() != 1.0
            }))
}

/// Points one wheel line scrolls (egui's default for a line of a mouse wheel).
const LINE_POINTS: f32 = 40.0;

/// The time zoom the wheel events of one frame ask for: a notch (120 points) zooms by about
/// 1.8; Ctrl + wheel (egui's own zoom) and horizontal scrolling are left alone.
pub fn wheel_zoom_factor(events: &[egui::Event], modifiers: egui::Modifiers) -> f32 {
    if modifiers.command {
        return 1.0;
    }
    let dy: f32 = events
        .iter()
        .filter_map(|e| match e {
            egui::Event::MouseWheel {
                unit,
                delta,
                modifiers,
                ..
            } if !modifiers.command => Some(match unit {
                egui::MouseWheelUnit::Point => delta.y,
                egui::MouseWheelUnit::Line => delta.y * LINE_POINTS,
                egui::MouseWheelUnit::Page => delta.y * 400.0,
            }),
            _ => None,
        })
        .sum();
    (dy / 200.0).exp()
}

/// Turns the wheel over a graph (`over_graph`: the pointer is on one) into one zoom event per
/// frame, before egui sees it: egui smooths a wheel notch over a second of frames, each a
/// full redraw; a zoom event moves the plot once.
pub fn wheel_to_zoom(raw: &mut egui::RawInput, over_graph: bool) {
    if !over_graph {
        return;
    }
    let f = wheel_zoom_factor(&raw.events, egui::Modifiers::NONE);
    if f == 1.0 {
        return;
    }
    raw.events
        .retain(|e| !matches!(e, egui::Event::MouseWheel { modifiers, .. } if !modifiers.command));
    raw.events.push(egui::Event::Zoom(f));
}

/// The graph of one GPU with its toolbar (window presets, stacking, fit to data, follow live)
/// and its legend. `edge` is the right end of the window when following (the live edge, or a
/// session's slider); `highlight` is the selected process, drawn thicker.
#[allow(clippy::too_many_arguments)]
pub fn device_graph(
    ui: &mut Ui,
    m: &Monitor,
    snap: &crate::model::Snapshot,
    device: u32,
    state: &mut UiState,
    cache: &mut GraphCache,
    edge: UnixMs,
    highlight: Option<ProcSeriesKey>,
) {
    let h = &m.history;
    let Some((first, _)) = h.span() else {
        ui.label("Waiting for the first sample…");
        return;
    };
    // The graph's width is the pane's, fixed before anything is drawn: a row that
    // overflowed (a legend, a toolbar) must never widen the plot past the window's edge or
    // under the detail pane.
    let full_w = ui.available_width();
    toolbar(ui, device, state, cache);
    let shown = cache
        .free_range
        .unwrap_or_else(|| preset_range(state.window, first, edge));
    let keyed = keyboard_move(ui, shown, cache.free_range.is_none());
    if let Some(moved) = keyed {
        cache.free_range = moved;
    }
    let (from, to) = cache.free_range.unwrap_or(shown);
    let width = (full_w as usize).clamp(50, 4000);
    let colors = widgets::Colors::of(ui);
    let key = CacheKey {
        history: h.id(),
        what: None,
        device,
        from,
        to,
        width,
        end_tick: h.end_tick(),
        stacked: state.stacked,
        dark: colors.dark,
        palette: colors.palette,
    };
    let stacked = state.stacked;
    let dev = snap.devices.iter().find(|d| d.index == device);
    let limit = dev
        .and_then(|d| d.memory_total_bytes)
        .map(|b| (b / MIB) as f64);
    let reserved = dev
        .and_then(|d| d.memory_reserved_bytes)
        .map(|b| (b / MIB) as f64);
    // The OOM forecast, drawn from the newest sample towards the limit, when following.
    let forecast = match (dev, limit, cache.free_range) {
        (Some(d), Some(l), None) => forecast_line(snap, d, l - reserved.unwrap_or(0.0)),
        _ => None,
    };
    let set_x = (cache.free_range.is_none() || keyed.is_some()).then(|| {
        let (a, b) = (from as f64 / 1000.0, to as f64 / 1000.0);
        // Room on the right for the forecast to show where it heads.
        (a, b + forecast.map_or(0.0, |_| (b - a) * 0.12))
    });
    let marks = leak_marks(m, device, (from, to));
    let as_table = cache.as_table;
    let mut buckets = std::mem::take(&mut cache.buckets);
    let drawn = cache.get(key, || {
        device_lines(
            h,
            m,
            device,
            (from, to),
            width,
            stacked,
            &colors,
            &mut buckets,
        )
    });
    let DeviceLines {
        lines,
        buckets: spans,
    } = drawn;
    legend(ui, lines, highlight, forecast.is_some(), stacked);
    let step_s =
        ((to - from) as f64 / 1000.0 / width as f64).max(m.interval_ms as f64 / 1000.0) * 2.0;
    let metrics_h = 110.0;
    let memory_units = state
        .units
        .for_largest(limit.map_or(0, |l| (l * MIB as f64) as u64));
    if as_table {
        // Out of the cache while the tables (which read the metrics' cache) are drawn.
        let lines = std::mem::take(lines);
        cache.buckets = buckets;
        cache.plot_rect = None;
        let show_metrics = state.show_metrics.then_some(width);
        graph_tables(
            ui,
            h,
            device,
            (from, to),
            (&lines, step_s, memory_units),
            cache,
            show_metrics,
        );
        cache.drawn.lines = lines;
        return;
    }
    let mem_h = state
        .show_metrics
        .then(|| (ui.available_height() - metrics_h - 8.0).max(120.0));
    let spans_shaded = shaded_windows(m, device, (from, to));
    let link = egui::Id::unique(("gpu-time", device));
    let resp = draw_plot(
        ui,
        &format!("gpu-graph-{device}"),
        lines,
        &PlotOpts {
            height: mem_h,
            link: Some(link),
            spans: &spans_shaded,
            limit_mib: limit,
            reserved_mib: reserved,
            units: state.units,
            set_x,
            auto_x: false,
            fit_y: state.fit_y,
            marks: &marks,
            table_hover: true,
            highlight,
            forecast,
            step_s,
            buckets: spans,
            stacked,
            width: Some(full_w),
        },
    );
    cache.buckets = buckets;
    cache.plot_rect = Some(resp.response.rect);
    cache.edge_x = Some(resp.transform.position_from_point_x(to as f64 / 1000.0));
    // A metric plot zoomed or panned moves the memory graph too (their time axes are
    // linked): its range becomes the graph's.
    let mut metric_moved = None;
    let moved_here = user_moved(ui, &resp.response);
    if state.show_metrics {
        // The same time range as the memory graph: set where the memory graph set it
        // (following, keys), else taken from the link, so a zoom of the memory graph in
        // this frame is not undone.
        let range = set_x
            .filter(|_| !moved_here)
            .map(|_| (from as f64 / 1000.0, to as f64 / 1000.0));
        metric_moved = metric_plots(
            ui,
            h,
            device,
            (from, to),
            range,
            (width, full_w),
            cache,
            metrics_h,
        );
    }
    cache.free_range = range_after(&resp, moved_here, metric_moved, cache.free_range);
}

/// The graph's range after a frame: following again after a double-click, a metric plot's
/// range when the user moved one, else the memory graph's own when moved (or already free).
fn range_after(
    resp: &egui_plot::PlotResponse<()>,
    moved_here: bool,
    metric_moved: Option<(f64, f64)>,
    free: Option<(UnixMs, UnixMs)>,
) -> Option<(UnixMs, UnixMs)> {
    let to_ms = |a: f64, b: f64| ((a * 1000.0) as i64, (b * 1000.0) as i64);
    if resp.response.double_clicked() {
        None
    } else if let Some((a, b)) = metric_moved {
        Some(to_ms(a, b))
    } else if moved_here || free.is_some() {
        let b = resp.transform.bounds();
        Some(to_ms(b.min()[0], b.max()[0]))
    } else {
        None
    }
}

/// The lines as the table reads them (a stacked graph's range band left out: the total's
/// row says the same).
fn table_series(lines: &[GraphLine]) -> Vec<plot_table::Series<'_>> {
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
fn graph_tables(
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

/// The time windows shaded on a GPU's graph: each leak of its processes (from when it
/// began growing to its end, or now) and the 10 s before each OOM death, in view.
fn shaded_windows(
    m: &Monitor,
    device: u32,
    (from, to): (UnixMs, UnixMs),
) -> Vec<(f64, f64, String)> {
    let s = |ms: UnixMs| ms as f64 / 1000.0;
    let leaks = m
        .leaks
        .iter()
        .filter(|l| l.info.device_index == device)
        .map(|l| {
            let end = l.ended_ms.unwrap_or(to);
            (
                l.info.since_ms,
                end,
                format!("leak: {} ({})", l.info.name, l.info.pid),
            )
        });
    let ooms = m
        .ooms
        .iter()
        .filter(|o| o.device_index == device)
        .map(|o| (o.at_ms - 10_000, o.at_ms, "OOM suspected".to_string()));
    leaks
        .chain(ooms)
        .filter(|(a, b, _)| *b >= from && *a <= to)
        .map(|(a, b, name)| (s(a.max(from)), s(b.min(to)), name))
        .collect()
}

/// The range a time preset shows at `edge`: a preset longer than the history held (from
/// `first`) shows what is held (at least 10 s), so a fresh start fills the width instead of
/// being a sliver at the right edge.
fn preset_range(window: Window, first: UnixMs, edge: UnixMs) -> (UnixMs, UnixMs) {
    let held = (edge - first).max(10_000);
    let span = window.ms().map_or(held, |w| w.min(held)).max(1000);
    (edge - span, edge)
}

/// The line above the GPU graph: its title, time presets, stacking, metrics, fit, follow
/// live and how to move it. Wraps on a narrow window (or at 200 %) rather than widening the
/// panel past the screen.
fn toolbar(ui: &mut Ui, device: u32, state: &mut UiState, cache: &mut GraphCache) {
    ui.horizontal_wrapped(|ui| {
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
        ui.checkbox(&mut state.show_metrics, "GPU metrics")
            .on_hover_text("Utilisation, temperature, power and its cap, clocks and fan under the memory graph");
        ui.checkbox(&mut state.fit_y, "Fit to data")
            .on_hover_text("Scale the memory axis to the data shown instead of the GPU's size: small growth becomes visible (a stack keeps its foot at 0)");
        plot_table::toggle(ui, &mut cache.as_table);
        let follow = if cache.in_session {
            "▶ Back to the slider"
        } else {
            "▶ Follow live"
        };
        if cache.free_range.is_some() && ui.button(follow).clicked() {
            cache.free_range = None;
        }
        let (short, full) = if cache.in_session {
            (
                "wheel: zoom · drag: pan · double-click: back to the slider",
                "wheel, +/−: zoom · drag, Shift+Left/Right: pan · double-click, End: back to the slider",
            )
        } else {
            (
                "wheel: zoom · drag: pan · double-click: follow live",
                "wheel, +/−: zoom · drag, Shift+Left/Right: pan · double-click, End: follow live",
            )
        };
        // One line: cut with "…" where the row has no room (it wrapped onto a line of its
        // own under the controls); the keys on hover.
        ui.add(egui::Label::new(widgets::hint(short)).truncate())
            .on_hover_text(full);
    });
}

/// The OOM forecast of `d`: from its newest sample to when it is full (`usable_mib`).
fn forecast_line(
    snap: &crate::model::Snapshot,
    d: &crate::model::DeviceSample,
    usable_mib: f64,
) -> Option<[[f64; 2]; 2]> {
    d.time_to_full_s.zip(d.memory_used_bytes).map(|(s, u)| {
        let x0 = snap.taken_at_ms as f64 / 1000.0;
        [[x0, (u / MIB) as f64], [x0 + s, usable_mib]]
    })
}

/// Leak episodes of this GPU's processes that began in view, as marks.
fn leak_marks(m: &Monitor, device: u32, (from, to): (UnixMs, UnixMs)) -> Vec<(f64, String)> {
    m.leaks
        .iter()
        .filter(|l| {
            l.info.device_index == device && l.info.since_ms >= from && l.info.since_ms <= to
        })
        .map(|l| {
            (
                l.info.since_ms as f64 / 1000.0,
                format!("leak began: {} ({})", l.info.name, l.info.pid),
            )
        })
        .collect()
}

/// The graph's keys (when no text field has the keyboard): `+` / `-` zoom time in and out,
/// Shift + Left / Right pan by a fifth of the view, End follows live again. Returns the new range
/// (`Some(None)`: follow live), `None` when no key was pressed.
fn keyboard_move(
    ui: &Ui,
    (from, to): (UnixMs, UnixMs),
    following: bool,
) -> Option<Option<(UnixMs, UnixMs)>> {
    // Ctrl/Cmd + / − are egui's zoom of the whole window, not of the graph.
    if ui.ctx().egui_wants_keyboard_input() || ui.input(|i| i.modifiers.command) {
        return None;
    }
    let span = (to - from).max(1000);
    let key = |k| ui.input(|i| i.key_pressed(k));
    let shift = ui.input(|i| i.modifiers.shift);
    let zoom = |f: f64| {
        // Following live, the right edge stays; else the middle.
        let new = ((span as f64 * f) as i64).max(1000);
        let end = if following {
            to
        } else {
            (from + to) / 2 + new / 2
        };
        Some(Some((end - new, end)))
    };
    if key(egui::Key::Plus) || key(egui::Key::Equals) {
        zoom(1.0 / 1.5)
    } else if key(egui::Key::Minus) {
        zoom(1.5)
    } else if shift && key(egui::Key::ArrowLeft) {
        Some(Some((from - span / 5, to - span / 5)))
    } else if shift && key(egui::Key::ArrowRight) {
        Some(Some((from + span / 5, to + span / 5)))
    } else if key(egui::Key::End) {
        Some(None)
    } else {
        None
    }
}

/// The small plots under the memory graph (one per panel, each with its metrics' lines), over
/// the memory graph's time range, their time axes linked to it.
const METRIC_PANELS: [(&str, &str, &[crate::model::history::Metric]); 5] = {
    use crate::model::history::Metric as M;
    [
        ("Utilisation", "%", &[M::Utilization]),
        ("Temperature", "°C", &[M::Temperature]),
        ("Power", "W", &[M::Power, M::PowerLimit]),
        ("Clocks", "MHz", &[M::SmClock, M::MemClock]),
        ("Fan", "%", &[M::Fan]),
    ]
};

/// Builds (or keeps) the metric panels' lines of `device` over `(from, to)` in `cache`.
fn metric_lines<'c>(
    h: &History,
    device: u32,
    (from, to): (UnixMs, UnixMs),
    width: usize,
    dark: bool,
    cache: &'c mut GraphCache,
) -> &'c mut Vec<Vec<GraphLine>> {
    use crate::model::history::Metric;
    let key = CacheKey {
        history: h.id(),
        what: None,
        device,
        from,
        to,
        width: width / 4,
        end_tick: h.end_tick(),
        stacked: false,
        dark,
        palette: widgets::Palette::Standard,
    };
    let stale = cache.metrics.as_ref().is_none_or(|(k, _)| *k != key);
    if stale {
        let lines = METRIC_PANELS
            .iter()
            .map(|(_, _, metrics)| {
                metrics
                    .iter()
                    .filter_map(|m| {
                        let (name, _) = m.label();
                        let points =
                            h.decimate(h.metric(device, *m)?, from, to, (width / 4).max(20));
                        let color = match m {
                            Metric::PowerLimit => widgets::LIMIT,
                            Metric::MemClock => widgets::RESERVED,
                            _ => widgets::USED,
                        };
                        (!points.is_empty()).then(|| {
                            GraphLine::new(name.into(), LineKind::Total, color, points, false)
                        })
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        cache.metrics = Some((key.clone(), lines));
    }
    &mut cache.metrics.get_or_insert_with(|| (key, Vec::new())).1
}

/// The metric panels shown: those with a reading (no fan on an SXM module, clocks in an old
/// session are left out rather than drawn empty), utilisation, temperature and power always,
/// as many as fit at 150 points each.
fn shown_panels(plots: &[Vec<GraphLine>], available_width: f32) -> Vec<usize> {
    let fit = ((available_width / 150.0) as usize).max(1);
    (0..METRIC_PANELS.len())
        .filter(|i| i < &3 || plots.get(*i).is_some_and(|p| !p.is_empty()))
        .take(fit)
        .collect()
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

/// The small plots under the memory graph (one per panel, each with its metrics' lines) over
/// the memory graph's time range, their time axes and cursor linked to it. Returns the range
/// (unix s) one of them was zoomed or panned to by the user.
#[allow(clippy::too_many_arguments)]
fn metric_plots(
    ui: &mut Ui,
    h: &History,
    device: u32,
    (from, to): (UnixMs, UnixMs),
    set_x: Option<(f64, f64)>,
    (width, available): (usize, f32),
    cache: &mut GraphCache,
    height: f32,
) -> Option<(f64, f64)> {
    let dark = ui.visuals().dark_mode;
    let plots = metric_lines(h, device, (from, to), width, dark, cache);
    let shown = shown_panels(plots, available);
    let n = shown.len() as f32;
    let w = ((available - 8.0 * n) / n).max(110.0);
    let mut moved = None;
    ui.horizontal(|ui| {
        for i in shown {
            let lines = &plots[i];
            ui.allocate_ui(egui::vec2(w, height), |ui| {
                ui.vertical(|ui| {
                    if let Some(r) = metric_plot(ui, device, i, lines, set_x, (w, height)) {
                        moved = Some(r);
                    }
                });
            });
        }
    });
    moved
}

/// One metric panel: "Power · 290 / 700 W" (its lines' names on hover) over its plot.
/// Returns the range the user moved it to.
fn metric_plot(
    ui: &mut Ui,
    device: u32,
    panel: usize,
    lines: &[GraphLine],
    set_x: Option<(f64, f64)>,
    (w, height): (f32, f32),
) -> Option<(f64, f64)> {
    let (title, unit, _) = METRIC_PANELS[panel];
    let now: Vec<String> = lines
        .iter()
        .filter_map(|l| Some(format!("{:.0}", l.points.last()?[1])))
        .collect();
    let now = if now.is_empty() {
        "—".to_string()
    } else {
        format!("{} {unit}", now.join(" / "))
    };
    ui.label(widgets::hint(format!("{title} · {now}")).strong())
        .on_hover_text(
            lines
                .iter()
                .map(|l| l.name.as_str())
                .collect::<Vec<_>>()
                .join(" / "),
        );
    // A panel of two lines (power and its cap, the two clocks) says which is which.
    let legend_h = if lines.len() > 1 {
        ui.horizontal(|ui| {
            for l in lines {
                widgets::legend_item(ui, l.color, metric_legend_name(&l.name), false);
            }
        })
        .response
        .rect
        .height()
            + ui.spacing().item_spacing.y
    } else {
        0.0
    };
    let days = widgets::shows_days(set_x.or_else(|| lines_span(lines)));
    let hover_unit = unit.to_string();
    let unit = unit.to_string();
    let link = egui::Id::unique(("gpu-time", device));
    let mut plot = Plot::new(("gpu-metric", device, title))
        .height((height - 20.0 - legend_h).max(40.0))
        .width(w - 8.0)
        .allow_zoom([true, false])
        .allow_drag([true, false])
        .allow_scroll(false)
        .allow_double_click_reset(false)
        .auto_bounds([false, true])
        .include_y(0.0)
        .show_x(true)
        .link_axis(link, [true, false])
        .link_cursor(link, [true, false])
        .custom_x_axes(vec![time_axis()])
        .x_grid_spacer(time_grid)
        .y_grid_spacer(value_grid)
        .custom_y_axes(vec![value_axis(48.0, move |m| value_label(m, &unit))])
        // Its name, the clock and the value with its unit (egui_plot's own label is "x = "
        // in unix seconds).
        .label_formatter(move |pos| match pos {
            egui_plot::HoverPosition::NearDataPoint {
                plot_name,
                position,
                ..
            } => Some(format!(
                "{plot_name}\n{}\n{:.0} {hover_unit}",
                widgets::hover_time(position.x, days),
                position.y
            )),
            egui_plot::HoverPosition::Elsewhere { .. } => None,
        });
    if title == "Utilisation" || title == "Fan" {
        plot = plot.include_y(100.0);
    }
    let resp = plot.show(ui, |p| {
        if let Some((a, b)) = set_x {
            p.set_plot_bounds_x(a..=b);
        }
        wheel_zoom(p);
        for l in lines.iter() {
            let mut line = Line::new(l.name.clone(), PlotPoints::new(l.points.clone()))
                .color(l.color)
                .width(1.5);
            if l.color == widgets::LIMIT {
                line = line.style(egui_plot::LineStyle::dashed_loose());
            }
            p.line(line);
        }
    });
    user_moved(ui, &resp.response).then(|| {
        let b = resp.transform.bounds();
        (b.min()[0], b.max()[0])
    })
}

/// A metric's name in its panel's legend, where the panel's title says the rest ("Clocks":
/// "SM", "memory").
fn metric_legend_name(name: &str) -> &str {
    match name {
        "Power" => "drawn",
        "Power cap" => "cap",
        "SM clock" => "SM",
        "Memory clock" => "memory",
        n => n,
    }
}

/// The least height of a process's lifetime graph (points).
pub const PROCESS_GRAPH_MIN_HEIGHT: f32 = 180.0;

/// The most height a process's lifetime graph takes (the pane's other parts stay in view).
pub const PROCESS_GRAPH_MAX_HEIGHT: f32 = 240.0;

/// The whole-lifetime graph of one process on one GPU, with marked times (unix s, name).
pub fn process_graph(
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
    let from = m
        .row(&key)
        .map(|r| r.first_seen_ms)
        .or_else(|| h.time_of(series.first_tick()))
        .unwrap_or(0);
    let to = h
        .time_of(series.end_tick().saturating_sub(1))
        .unwrap_or(from);
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
    });
    // Which line is which (the driver's figure, PyTorch's allocated and reserved memory).
    ui.horizontal_wrapped(|ui| {
        for l in &drawn.lines {
            widgets::legend_item(ui, l.color, &l.name, false);
        }
        plot_table::toggle(ui, &mut as_table);
    });
    if as_table {
        let step = ((to - from) as f64 / 1000.0 / width as f64).max(1.0) * 2.0;
        plot_table::series_table(
            ui,
            ("proc-table", key.0.pid, key.1),
            &table_series(&drawn.lines),
            (from as f64 / 1000.0, to as f64 / 1000.0),
            step,
            &plot_table::ValueFormat::Memory(units),
        );
        cache.as_table = as_table;
        return;
    }
    // Room for a readable plot (three axis labels at least) even in a short pane: the pane
    // scrolls rather than squeezing it.
    let height = ui
        .available_height()
        .clamp(PROCESS_GRAPH_MIN_HEIGHT, PROCESS_GRAPH_MAX_HEIGHT);
    let resp = draw_plot(
        ui,
        &format!("proc-graph-{}-{}", key.0.pid, key.1),
        &mut drawn.lines,
        &PlotOpts {
            units,
            auto_x: true,
            marks,
            step_s: 1.0,
            height: Some(height),
            ..PlotOpts::default()
        },
    );
    cache.as_table = as_table;
    cache.plot_rect = Some(resp.response.rect);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 40 (m11): two leaks shaded over the same minutes get one label naming both;
    /// a window apart keeps its own.
    #[test]
    fn overlapping_windows_share_one_label() {
        let w = |a: f64, b: f64, n: &str| (a, b, n.to_string());
        let labels = span_labels(&[
            w(100.0, 400.0, "leak: b (2)"),
            w(50.0, 300.0, "leak: a (1)"),
            w(500.0, 600.0, "OOM suspected"),
            w(120.0, 200.0, "leak: a (1)"),
        ]);
        assert_eq!(
            labels,
            vec![
                w(50.0, 400.0, "leak: a (1) · leak: b (2)"),
                w(500.0, 600.0, "OOM suspected"),
            ]
        );
    }

    /// Issue 40 (window v4): a mark at local midnight reads as the day, not "00:00:00"; other
    /// marks as the clock.
    #[test]
    fn midnight_on_the_time_axis_shows_the_date() {
        use chrono::TimeZone;
        let midnight = chrono::Local
            .with_ymd_and_hms(2026, 12, 7, 0, 0, 0)
            .earliest()
            .expect("a local midnight")
            .timestamp() as f64;
        let range = (midnight - 3600.0)..=(midnight + 3600.0);
        let mark = |value: f64| GridMark {
            value,
            step_size: 1800.0,
        };
        assert_eq!(x_formatter(mark(midnight), &range), "7 Dec");
        let half_past = x_formatter(mark(midnight + 1800.0), &range);
        assert_eq!(half_past, "00:30:00");
        let before = x_formatter(mark(midnight - 1800.0), &range);
        assert_eq!(before, "23:30:00");
    }

    /// Issue 40 (window v4): a hover names the day when the graph shows more than one day
    /// (midnight in view, as its axis names it), and gives the clock alone within a day.
    #[test]
    fn the_hover_names_the_day_when_the_graph_shows_midnight() {
        use chrono::TimeZone;
        let midnight = chrono::Local
            .with_ymd_and_hms(2026, 12, 7, 0, 0, 0)
            .earliest()
            .expect("a local midnight")
            .timestamp() as f64;
        let around = widgets::shows_days(Some((midnight - 600.0, midnight + 600.0)));
        assert!(around, "ten minutes either side of midnight");
        let morning = widgets::shows_days(Some((midnight + 3600.0, midnight + 7200.0)));
        assert!(!morning, "one morning hour");
        assert!(widgets::shows_days(Some((
            midnight + 60.0,
            midnight + 3.0 * 86_400.0
        ))));
        let one = Bucket {
            from_s: midnight + 5.0,
            to_s: midnight + 5.0,
            at_s: midnight + 5.0,
            total_range: None,
        };
        assert_eq!(bucket_title(&one, true), "7 Dec 00:00:05");
        assert_eq!(bucket_title(&one, false), "00:00:05");
        let across = Bucket {
            from_s: midnight - 30.0,
            to_s: midnight + 66.0,
            at_s: midnight + 66.0,
            total_range: None,
        };
        assert_eq!(
            bucket_title(&across, true),
            "6 Dec 23:59:30 – 7 Dec 00:01:06"
        );
        let within = Bucket {
            from_s: midnight + 30.0,
            to_s: midnight + 126.0,
            at_s: midnight + 126.0,
            total_range: None,
        };
        assert_eq!(bucket_title(&within, true), "7 Dec 00:00:30 – 00:02:06");
    }

    /// Issue 40 (window v4): no time mark lies closer to an end of the plot than half a label
    /// (its label would be cut there, as the lifetime graph's last one was); the others stay.
    #[test]
    fn time_marks_keep_half_a_label_from_the_ends() {
        // One point is a second (egui_plot asks with the size of 8 points).
        let offset = f64::from(chrono::Local::now().offset().local_minus_utc());
        let lo = 1_796_000_000.0 - (1_796_000_000.0 + offset).rem_euclid(60.0);
        let input = |lo: f64, hi: f64| egui_plot::GridInput {
            bounds: (lo, hi),
            base_step_size: 8.0,
        };
        // A mark each minute: the first at `lo` itself, the last 20 s before the end.
        let marks = time_grid(input(lo, lo + 440.0));
        let values: Vec<f64> = marks.iter().map(|m| m.value - lo).collect();
        assert_eq!(values, vec![60.0, 120.0, 180.0, 240.0, 300.0, 360.0]);
        // Half a label (30 s here) from both ends, the same minutes are all kept.
        let all = time_grid(input(lo - 30.0, lo + 450.0));
        assert_eq!(all.len(), 8, "{all:?}");
    }
}
