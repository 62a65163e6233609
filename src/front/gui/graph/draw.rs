//! Drawing one plot: its options, its range, its lines and filled bands, its limit and marks.

use egui::{Color32, Ui};
use egui_plot::{HLine, Line, Plot, PlotPoints, VLine};

use super::axes::{time_axis, time_grid, value_axis, value_grid, value_label};
use super::hover::{bucket_at, hover_table, lines_span, HoverAt};
use super::lines::{Bucket, GraphLine, LineKind};
use super::marks::span_labels;
use super::zoom::{fit_values_again, wheel_zoom};
use crate::front::gui::widgets;
use crate::model::format::Units;
use crate::model::history::ProcSeriesKey;

/// How a plot is drawn, beyond its lines.
#[derive(Debug, Clone, Default)]
pub(super) struct PlotOpts<'a> {
    /// The GPU's memory size (MiB): the red limit line.
    pub(super) limit_mib: Option<f64>,
    /// Memory the driver reserves (MiB), for the hover's free memory.
    pub(super) reserved_mib: Option<f64>,
    /// Axis and hover units.
    pub(super) units: Units,
    /// The time range to show (following live); `None` leaves it to the user.
    pub(super) set_x: Option<(f64, f64)>,
    /// Fit the time axis to the data (the lifetime graph).
    pub(super) auto_x: bool,
    /// Fit the memory axis to the data shown instead of 0 … the GPU's size.
    pub(super) fit_y: bool,
    /// Dashed vertical marks (unix seconds, name).
    pub(super) marks: &'a [(f64, String)],
    /// The hover lists every series at the cursor's time (the GPU graph).
    pub(super) table_hover: bool,
    /// A line drawn thicker (the selected process).
    pub(super) highlight: Option<ProcSeriesKey>,
    /// The OOM forecast: from (unix s, MiB used now) to (unix s when full, MiB limit).
    pub(super) forecast: Option<[[f64; 2]; 2]>,
    /// Seconds one point of the lines stands for (the hover's tolerance).
    pub(super) step_s: f64,
    /// Fixed height in points (default: what is available).
    pub(super) height: Option<f32>,
    /// Plots of one group share their time axis (pan and zoom together) and their cursor.
    pub(super) link: Option<egui::Id>,
    /// Shaded time windows (unix s from, to, name): leaks and OOM deaths.
    pub(super) spans: &'a [(f64, f64, String)],
    /// The time range of each point (the hover's title).
    pub(super) buckets: &'a [Bucket],
    /// The lines are a stack read at each bucket's instant.
    pub(super) stacked: bool,
    /// Fixed width in points (default: what is available).
    pub(super) width: Option<f32>,
    /// The time axis stays as set (no wheel zoom, no drag): the wheel over the plot scrolls
    /// what holds it (the lifetime graph in the detail pane, which always shows the whole
    /// lifetime, live).
    pub(super) fixed_x: bool,
}

/// Draws `lines` as the plot `id`, as `o` says: the value axis in one unit (the lines'
/// points made in it), its range set or fitted, the lines, limit, forecast, marks and shaded
/// windows, and the GPU graph's hover table.
pub(super) fn draw_plot(
    ui: &mut Ui,
    id: &str,
    lines: &mut [GraphLine],
    o: &PlotOpts<'_>,
) -> egui_plot::PlotResponse<()> {
    let unit = axis_unit(lines, o);
    let scale = if unit == "GiB" { 1.0 / 1024.0 } else { 1.0 };
    rescale(lines, scale);
    let lines: &[GraphLine] = lines;
    let fit = o.fit_y.then(|| fit_range(lines, o)).flatten();
    let days = widgets::shows_days(o.set_x.or_else(|| lines_span(lines)));
    let plot = configure_plot(id, o, (unit, scale, days), fit);
    let resp = plot.show(ui, |plot_ui| {
        if fit.is_none() {
            fit_values_again(plot_ui);
        }
        if let Some((a, b)) = o.set_x {
            plot_ui.set_plot_bounds_x(a..=b);
        }
        if let Some((lo, hi)) = fit {
            plot_ui.set_plot_bounds_y(lo..=hi);
        }
        if !o.fixed_x {
            wheel_zoom(plot_ui);
        }
        plot_lines(plot_ui, lines, o, scale);
    });
    span_names(ui, &resp.transform, o.spans);
    if o.table_hover {
        table_hover(&resp, lines, o);
    }
    resp
}

/// The value axis's unit, one for all its labels: GiB when the scale (the GPU's size, or the
/// lines' highest value when fitted) reaches 10 GiB (or when chosen), so the grid falls on
/// round GiB values.
fn axis_unit(lines: &[GraphLine], o: &PlotOpts<'_>) -> &'static str {
    let top = o.limit_mib.filter(|_| !o.fit_y).unwrap_or_else(|| {
        lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p[1]))
            .fold(0.0, f64::max)
    });
    match o.units {
        Units::MiB => "MiB",
        Units::GiB => "GiB",
        Units::Auto if top >= 10.0 * 1024.0 => "GiB",
        Units::Auto => "MiB",
    }
}

/// Under the pointer, the GPU graph's hover table of every series at its time.
fn table_hover(resp: &egui_plot::PlotResponse<()>, lines: &[GraphLine], o: &PlotOpts<'_>) {
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

/// Fit to data: the range of what is drawn in the time shown, with a margin; unstacked with
/// a process selected, the range of its line alone (a 0.2 GiB leak beside a 90 GiB job is no
/// longer a flat line).
fn fit_range(lines: &[GraphLine], o: &PlotOpts<'_>) -> Option<(f64, f64)> {
    let (x0, x1) = o.set_x.unwrap_or((f64::MIN, f64::MAX));
    let span = |only: Option<ProcSeriesKey>| {
        lines
            .iter()
            .filter(|l| only.is_none_or(|k| l.kind == LineKind::Process(k)))
            .flat_map(|l| l.scaled.iter())
            .filter(|p| p.x >= x0 && p.x <= x1)
            .fold((f64::MAX, f64::MIN), |(lo, hi), p| {
                (lo.min(p.y), hi.max(p.y))
            })
    };
    let selected = o.highlight.filter(|_| !o.stacked).map(|k| span(Some(k)));
    let (lo, hi) = match selected {
        Some((lo, hi)) if lo <= hi => (lo, hi),
        _ => span(None),
    };
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
        .allow_zoom([!o.fixed_x, false])
        .allow_drag([!o.fixed_x, false])
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
                .fill(crate::front::gui::leaks::LEAK.gamma_multiply(0.12))
                .border_width(0.0),
        );
    }
    for l in lines.iter() {
        plot_line(plot_ui, l, o.highlight);
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
        forecast_marks(plot_ui, [[x0, y0 * scale], [x1, y1 * scale]], o.set_x);
    }
    for (x, name) in o.marks {
        plot_ui.vline(
            VLine::new(name.clone(), *x)
                .color(crate::front::gui::leaks::LEAK)
                .style(egui_plot::LineStyle::dashed_loose()),
        );
    }
}

/// One line: a band filled between its own edges (dimmed while another is selected), or a
/// plain line; the highlighted one thicker.
fn plot_line<'a>(
    plot_ui: &mut egui_plot::PlotUi<'a>,
    l: &'a GraphLine,
    highlight: Option<ProcSeriesKey>,
) {
    let mut line = Line::new(l.name.clone(), PlotPoints::Borrowed(&l.scaled)).color(l.color);
    let highlighted = matches!((l.kind, highlight), (LineKind::Process(k), Some(h)) if k == h);
    if l.filled {
        // Opaque, between its own edges: the band has its swatch's colour whatever lies
        // above, below or behind it (dimmed towards the plot's background, still opaque,
        // while another is selected).
        let dim = highlight.is_some() && !highlighted;
        let fill = if dim {
            dimmed(&plot_ui.ctx().global_style().visuals, l.color)
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

/// The names of the shaded windows along the plot's top, one per group of windows that
/// overlap (two names over one another read as neither), each on a chip of the plot's
/// background so the bands under it do not run through its letters; cut with "…" to its
/// window's width in view.
fn span_names(ui: &Ui, t: &egui_plot::PlotTransform, spans: &[(f64, f64, String)]) {
    const PAD: f32 = 3.0;
    let frame = *t.frame();
    let painter = ui.painter_at(frame);
    let visuals = ui.visuals();
    for (a, b, name) in span_labels(spans) {
        let left = t.position_from_point_x(a).max(frame.left());
        let right = t.position_from_point_x(b).min(frame.right());
        let room = right - left - 4.0 * PAD;
        if room < 24.0 {
            continue;
        }
        let mut job = egui::text::LayoutJob::simple_singleline(
            name,
            egui::TextStyle::Small.resolve(ui.style()),
            visuals.text_color(),
        );
        job.wrap = egui::text::TextWrapping::truncate_at_width(room);
        let galley = painter.layout_job(job);
        let at = egui::pos2(
            (left + right - galley.size().x) / 2.0,
            frame.top() + 2.0 * PAD,
        );
        let chip = egui::Rect::from_min_size(at, galley.size()).expand(PAD);
        painter.rect_filled(chip, PAD, visuals.extreme_bg_color.gamma_multiply(0.9));
        painter.galley(at, galley, visuals.text_color());
    }
}

/// The forecast's words: "full at 16:43:07", with its day too when that is not the
/// data's (a forecast a day away). `x0`: now, `x1`: when it is full (unix s).
pub(super) fn forecast_words(x0: f64, x1: f64) -> String {
    let ms = |x: f64| (x * 1000.0) as crate::model::UnixMs;
    format!("full at {}", crate::model::format::moment(ms(x1), ms(x0)))
}

/// Where the forecast heads, said in the room right of the data (at the height where the
/// line leaves the view or meets the limit): "full at 16:43:07"; and a thin "now" line where
/// the data ends, so the room does not read as missing data. The words start right of "now"
/// and never cover the data, however soon the GPU is full.
fn forecast_marks(
    plot_ui: &mut egui_plot::PlotUi<'_>,
    [[x0, y0], [x1, y1]]: [[f64; 2]; 2],
    view: Option<(f64, f64)>,
) {
    plot_ui.vline(
        VLine::new("now", x0)
            .color(widgets::FORECAST.gamma_multiply(0.5))
            .width(1.0),
    );
    let right = view.map_or(x1, |(_, r)| r);
    let at = x1.min(right);
    let y = if x1 > x0 {
        y0 + (y1 - y0) * (at - x0) / (x1 - x0)
    } else {
        y1
    };
    let dark = plot_ui.ctx().global_style().visuals.dark_mode;
    // Above the line, or below it near the plot's top (the words would be cut there).
    let shown = plot_ui.plot_bounds();
    let near_top = y > shown.min()[1] + 0.8 * (shown.max()[1] - shown.min()[1]);
    let anchor = if near_top {
        egui::Align2::LEFT_TOP
    } else {
        egui::Align2::LEFT_BOTTOM
    };
    let pad = plot_ui.transform().dvalue_dpos()[0].abs() * FORECAST_PAD as f64;
    plot_ui.text(
        egui_plot::Text::new(
            "OOM forecast",
            egui_plot::PlotPoint::new(x0 + pad, y),
            egui::RichText::new(forecast_words(x0, x1)).color(widgets::forecast_color(dark)),
        )
        .anchor(anchor),
    );
}

/// Points between the "now" line and the forecast's words.
pub(super) const FORECAST_PAD: f32 = 6.0;

/// A band's colour while another process is selected: towards the plot's background, still
/// opaque (its legend swatch is dimmed the same, so the two still match).
pub(super) fn dimmed(visuals: &egui::Visuals, color: Color32) -> Color32 {
    visuals.extreme_bg_color.lerp_to_gamma(color, 0.45)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One frame of a 800×400 window holding the plot, with `events`: its value range.
    fn value_range(
        ctx: &egui::Context,
        lines: &mut [GraphLine],
        o: &PlotOpts<'_>,
        events: Vec<egui::Event>,
    ) -> (f64, f64) {
        let mut got = (f64::NAN, f64::NAN);
        let input = egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(
                egui::Pos2::ZERO,
                egui::vec2(800.0, 400.0),
            )),
            events,
            ..Default::default()
        };
        let mut out = ctx.run_ui(input, |ui| {
            let b = *draw_plot(ui, "memory", lines, o).transform.bounds();
            got = (b.min()[1], b.max()[1]);
        });
        out.textures_delta.clear();
        got
    }

    fn growing_job() -> Vec<GraphLine> {
        let points = (0..60)
            .map(|i| {
                [
                    1_796_000_000.0 + f64::from(i),
                    40_000.0 + f64::from(i) * 10.0,
                ]
            })
            .collect();
        vec![GraphLine::new(
            "job".into(),
            LineKind::Total,
            Color32::RED,
            points,
            false,
        )]
    }

    /// The memory graph of an 80 GiB GPU, `fit_y` as given.
    fn opts(fit_y: bool, limit_mib: f64) -> PlotOpts<'static> {
        PlotOpts {
            limit_mib: Some(limit_mib),
            fit_y,
            step_s: 1.0,
            ..Default::default()
        }
    }

    /// The value range after three frames (the plot settles in two).
    fn settled(ctx: &egui::Context, lines: &mut [GraphLine], o: &PlotOpts<'_>) -> (f64, f64) {
        value_range(ctx, lines, o, vec![]);
        value_range(ctx, lines, o, vec![]);
        value_range(ctx, lines, o, vec![])
    }

    /// Where the forecast's words were drawn, and the screen x of "now", after a few frames
    /// of the growing job's plot with a forecast `full_in_s` away (the data ends at "now").
    fn forecast_words_at(full_in_s: f64, width: f32) -> (egui::Rect, f32) {
        let ctx = egui::Context::default();
        let mut lines = growing_job();
        let now = 1_796_000_059.0;
        let room = super::super::forecast_room(width, 110.0);
        let o = PlotOpts {
            forecast: Some([[now, 40_590.0], [now + full_in_s, 80_000.0]]),
            set_x: Some((now - 59.0, now + 59.0 * room)),
            ..opts(false, 81_920.0)
        };
        let mut found = (egui::Rect::NOTHING, f32::NAN);
        for _ in 0..3 {
            let input = egui::RawInput {
                screen_rect: Some(egui::Rect::from_min_size(
                    egui::Pos2::ZERO,
                    egui::vec2(width, 400.0),
                )),
                ..Default::default()
            };
            let mut out = ctx.run_ui(input, |ui| {
                let now_x = draw_plot(ui, "memory", &mut lines, &o)
                    .transform
                    .position_from_point_x(now);
                found.1 = now_x;
            });
            out.textures_delta.clear();
            for s in std::mem::take(&mut out.shapes) {
                if let egui::Shape::Text(t) = s.shape {
                    if t.galley.text().starts_with("full at") {
                        found.0 = t.visual_bounding_rect();
                    }
                }
            }
        }
        found
    }

    /// The forecast's words never cover the data's end ("now"), however soon the GPU is
    /// full and however narrow the pane: they start right of the "now" line and end inside
    /// the plot.
    #[test]
    fn the_forecast_words_never_cover_now() {
        for (full_in_s, width) in [(3.0, 800.0), (600.0, 800.0), (3.0, 420.0), (1e5, 420.0)] {
            let (words, now_x) = forecast_words_at(full_in_s, width);
            assert!(
                words.is_positive(),
                "no forecast words drawn ({full_in_s} s, {width})"
            );
            assert!(
                words.min.x > now_x,
                "words at {words:?} cover now at {now_x} ({full_in_s} s, {width} wide)"
            );
            assert!(
                words.max.x <= width,
                "words at {words:?} cut by the edge ({full_in_s} s, {width} wide)"
            );
        }
    }

    /// The GUI review: Fit to data kept a small leak flat beside a large job. Unstacked with
    /// the leaking process selected, the axis fits its line alone; with none selected, all.
    #[test]
    fn fit_to_data_fits_the_selected_process_alone() {
        let key: ProcSeriesKey = (
            crate::model::ProcessKey {
                pid: 7,
                start_time_ms: 1,
            },
            0,
        );
        let line = |kind, mib: &dyn Fn(f64) -> f64| {
            let points = (0..60)
                .map(|i| [1_796_000_000.0 + f64::from(i), mib(f64::from(i))])
                .collect();
            GraphLine::new("p".into(), kind, Color32::RED, points, false)
        };
        let big: ProcSeriesKey = (
            crate::model::ProcessKey {
                pid: 8,
                start_time_ms: 1,
            },
            0,
        );
        let mut lines = vec![
            line(LineKind::Process(big), &|_| 92_160.0),
            line(LineKind::Process(key), &|i| 3_072.0 + i * 4.0),
        ];
        let ctx = egui::Context::default();
        let o = PlotOpts {
            highlight: Some(key),
            ..opts(true, 143_360.0)
        };
        let range = settled(&ctx, &mut lines, &o);
        assert!(range.0 > 2.9 && range.1 < 3.4, "selected: {range:?} GiB");
        let range = settled(&ctx, &mut lines, &opts(true, 143_360.0));
        assert!(
            range.0 < 3.0 && range.1 > 90.0,
            "none selected: {range:?} GiB"
        );
    }

    /// The window's review: once "Fit to data" had been on, the memory axis kept its fitted
    /// range after it was turned off (the limit line out of view, a growing stack cut at the
    /// top).
    #[test]
    fn the_memory_axis_reaches_the_limit_again_after_fit_to_data() {
        let ctx = egui::Context::default();
        let mut lines = growing_job();
        let range = settled(&ctx, &mut lines, &opts(true, 81_920.0));
        assert!(range.0 > 30.0 && range.1 < 45.0, "fitted: {range:?} GiB");
        let range = settled(&ctx, &mut lines, &opts(false, 81_920.0));
        assert!(
            range.0 <= 0.0 && range.1 >= 80.0,
            "after a fit: {range:?} GiB"
        );
    }

    /// The same review: a wheel zoom of the time froze the value axis too (egui_plot turns
    /// off both axes' fitting on any zoom): a larger limit after it stayed out of view.
    #[test]
    fn the_memory_axis_follows_its_limit_after_a_time_zoom() {
        let ctx = egui::Context::default();
        let mut lines = growing_job();
        let range = settled(&ctx, &mut lines, &opts(false, 81_920.0));
        assert!(range.1 >= 80.0 && range.1 < 90.0, "before: {range:?} GiB");
        // A notch of the wheel over the plot zooms its time.
        let over = egui::Event::PointerMoved(egui::pos2(400.0, 200.0));
        let wheel = egui::Event::MouseWheel {
            unit: egui::MouseWheelUnit::Line,
            delta: egui::vec2(0.0, 1.0),
            phase: egui::TouchPhase::Move,
            source: egui::MouseWheelSource::Unknown,
            modifiers: egui::Modifiers::NONE,
        };
        let o = opts(false, 81_920.0);
        value_range(&ctx, &mut lines, &o, vec![over]);
        value_range(&ctx, &mut lines, &o, vec![wheel]);
        let range = settled(&ctx, &mut lines, &opts(false, 143_360.0));
        assert!(range.1 >= 140.0, "after a zoom: {range:?} GiB");
    }
}
