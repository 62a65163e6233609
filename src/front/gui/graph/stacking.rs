//! A GPU's lines from its history: plain per-process lines or a stack, bucketed to the plot's width.

use egui::Color32;

use super::lines::{Bucket, DeviceLines, GraphLine, LineKind};
use crate::engine::view::Monitor;
use crate::front::gui::widgets;
use crate::model::history::{Buckets, History, PlotLine, ProcSeriesKey, Series, NONE};
use crate::model::UnixMs;

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
    let total_mm: Option<Vec<_>> = h.device(device).map(|s| {
        let mm = buckets.get(h, SeriesId::Device(device), s, b0, per, n);
        (0..n).map(|i| mm.get(i).copied()).collect()
    });
    (0..n)
        .filter_map(|i| {
            let at = h.bucket_instant(b0, per, i);
            let from_s = secs(b0 + i as u64 * per)?;
            let to_s = secs(at)?;
            let total_range = total_mm
                .as_ref()
                .and_then(|mm| *mm.get(i)?)
                .filter(|(lo, _)| *lo != NONE)
                .map(|(lo, hi)| (f64::from(lo), f64::from(hi)));
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
    let secs = |tick: u64| h.time_of(tick).map(|ms| ms as f64 / 1000.0);
    let mut stack = Stack {
        xs: (0..g.n)
            .map(|i| secs(h.bucket_instant(g.b0, g.per, i)))
            .collect(),
        cum: vec![0u64; g.n],
    };
    let layers = stack_layers(h, device, procs, label, g, buckets, &mut stack);
    let mut lines = Vec::new();
    // Behind the stack: the total's range in each bucket (its peaks stay visible).
    if let Some(s) = h.device(device).filter(|_| g.per > 1) {
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
    lines.extend(stack_top(h, device, g, buckets, &stack.xs));
    lines
}

/// Bands being stacked: each bucket's instant (unix s; `None` where no sample is held) and
/// the memory stacked there so far.
struct Stack {
    xs: Vec<Option<f64>>,
    cum: Vec<u64>,
}

impl Stack {
    /// A band on the stack: the series `at` each instant, laid on what lies below it.
    fn layer(
        &mut self,
        name: String,
        kind: LineKind,
        color: Color32,
        at: Buckets<'_, u32>,
    ) -> GraphLine {
        // Alive at these instants (elsewhere no point, so the hover shows nothing); room
        // grows with the points, not the plot's width.
        let alive = at
            .held()
            .filter(|(_, v)| **v != NONE)
            .filter_map(|(i, v)| Some((i, self.xs.get(i).copied().flatten()?, *v)));
        let (mut pts, mut own, mut breaks) = (Vec::new(), Vec::new(), Vec::new());
        let mut last = None;
        for (i, x, v) in alive {
            if last.is_some_and(|l| l + 1 != i) {
                breaks.push(pts.len());
            }
            last = Some(i);
            self.cum[i] += u64::from(v);
            pts.push([x, self.cum[i] as f64]);
            own.push(f64::from(v));
        }
        GraphLine {
            own,
            breaks,
            ..GraphLine::new(name, kind, color, pts, true)
        }
    }
}

/// The stack's bands, bottom first: each process alive at some instant, then unattributed
/// memory where there is some.
fn stack_layers(
    h: &History,
    device: u32,
    procs: &[(&ProcSeriesKey, &Series)],
    label: &Label<'_>,
    g: &Grid,
    buckets: &mut crate::model::history::BucketCache,
    stack: &mut Stack,
) -> Vec<GraphLine> {
    use crate::model::history::SeriesId;
    let (b0, per, n) = (g.b0, g.per, g.n);
    let mut layers = Vec::new();
    for (k, s) in procs {
        let at = buckets.get_at(h, SeriesId::Process(**k), s, b0, per, n);
        // A process alive at none of the instants (a short job in a long range) has no
        // band to draw, nor a row in the legend or the table.
        if at.held().all(|(_, v)| *v == NONE) {
            continue;
        }
        let (name, color) = label(k);
        layers.push(stack.layer(name, LineKind::Process(**k), color, at));
    }
    if let Some(gh) = h.ghost(device) {
        let at = buckets.get_at(h, SeriesId::Ghost(device), gh, b0, per, n);
        if at.held().any(|(_, v)| *v != NONE && *v > 0) {
            layers.push(stack.layer(
                UNATTRIBUTED.into(),
                LineKind::Unattributed,
                widgets::UNATTRIBUTED,
                at,
            ));
        }
    }
    layers
}

/// The top edge of the stack: the total at the same instants `xs`.
fn stack_top(
    h: &History,
    device: u32,
    g: &Grid,
    buckets: &mut crate::model::history::BucketCache,
    xs: &[Option<f64>],
) -> Option<GraphLine> {
    use crate::model::history::SeriesId;
    let s = h.device(device)?;
    let at = buckets.get_at(h, SeriesId::Device(device), s, g.b0, g.per, g.n);
    let pts: PlotLine = (0..g.n)
        .filter_map(|i| {
            let v = *at.get(i).filter(|v| **v != NONE)?;
            Some([xs[i]?, f64::from(v)])
        })
        .collect();
    Some(GraphLine::new(
        "Total used".into(),
        LineKind::Total,
        widgets::USED,
        pts,
        false,
    ))
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
pub(crate) const UNATTRIBUTED: &str = "Unattributed (no process)";
