//! Memory-over-time graphs (egui_plot): per GPU, optionally stacked by process, and one
//! process's whole lifetime. Lines are min/max-decimated to the plot's width and cached until
//! the view, the width or the data change, so hours of history stay smooth.

mod axes;
mod cache;
mod draw;
mod hover;
mod legend;
mod lines;
mod marks;
mod metrics;
mod process;
mod stacking;
mod tables;
mod toolbar;
mod zoom;

use egui::Ui;

use super::ui_state::UiState;
pub use super::ui_state::Window;
use super::widgets;
use crate::engine::view::Monitor;
use crate::model::history::{History, ProcSeriesKey};
use crate::model::{UnixMs, MIB};

pub use axes::{value_grid, value_label};
use cache::CacheKey;
pub(crate) use cache::{DrawnLayout, GraphCache};
use draw::{draw_plot, PlotOpts};
use legend::legend;
pub(crate) use lines::DeviceLines;
pub use lines::LineKind;
use marks::{forecast_line, leak_marks, shaded_windows};
use metrics::metric_plots;
pub(crate) use process::process_graph;
pub use process::PROCESS_GRAPH_MIN_HEIGHT;
pub use stacking::device_lines;
use tables::graph_tables;
use toolbar::toolbar;
pub(crate) use zoom::wheel_to_zoom;
use zoom::{kept_in_data, keyboard_move, preset_range, range_after, user_moved};

/// A time range (unix ms, from and to).
type Range = (UnixMs, UnixMs);

/// The time range the graph shows (following: the preset window up to `edge`; else where
/// the user zoomed or panned), after this frame's keys; and the keys' move, if any.
fn shown_range(
    ui: &mut Ui,
    state: &UiState,
    cache: &mut GraphCache,
    (held, edge, interval_ms): (Range, UnixMs, u64),
) -> (Option<Option<Range>>, Range) {
    let shown = cache
        .free_range
        .unwrap_or_else(|| preset_range(state.window, held.0, edge));
    let keyed = keyboard_move(ui, shown, cache.free_range.is_none());
    if let Some(moved) = keyed {
        cache.free_range = moved.map(|r| kept_in_data(r, held, interval_ms));
    }
    (keyed, cache.free_range.unwrap_or(shown))
}

/// GPU `device`'s memory size and reserved memory (MiB), and its OOM forecast line (drawn
/// from the newest sample towards the limit, when `following`).
fn device_figures(
    snap: &crate::model::Snapshot,
    device: u32,
    following: bool,
) -> (Option<f64>, Option<f64>, Option<[[f64; 2]; 2]>) {
    let dev = snap.devices.iter().find(|d| d.index == device);
    let limit = dev
        .and_then(|d| d.memory_total_bytes)
        .map(|b| (b / MIB) as f64);
    let reserved = dev
        .and_then(|d| d.memory_reserved_bytes)
        .map(|b| (b / MIB) as f64);
    let forecast = match (dev, limit) {
        (Some(d), Some(l)) if following => forecast_line(snap, d, l - reserved.unwrap_or(0.0)),
        _ => None,
    };
    (limit, reserved, forecast)
}

/// The room right of the data for the forecast, as a share of the time shown: an eighth,
/// or more where the pane is narrow, so its words (`words_w` points wide) fit between the
/// "now" line and the plot's edge. `full_w`: the pane's width (points).
fn forecast_room(full_w: f32, words_w: f32) -> f64 {
    // The value axis's labels take about this much of the pane's width.
    const AXIS_W: f32 = 64.0;
    let plot_w = (full_w - AXIS_W).max(100.0);
    let need = words_w + draw::FORECAST_PAD * 2.0;
    // The room is `room / (1 + room)` of the plot: solve that for the words' share.
    let share = (need / plot_w).min(0.5) as f64;
    (share / (1.0 - share)).max(0.12)
}

/// The height of the metric plots under the memory graph (points).
const METRICS_HEIGHT: f32 = 110.0;

/// What one frame's GPU graph shows, worked out before the plot is drawn.
struct View {
    device: u32,
    /// The time range the history holds (unix ms).
    held: Range,
    /// The time range shown (unix ms).
    range: Range,
    /// Buckets across: the pane's width, clamped.
    width: usize,
    /// The pane's width in points, taken before anything was drawn.
    full_w: f32,
    /// Seconds one point of the lines stands for (the hover's tolerance).
    step_s: f64,
    /// The time range (unix s) set on the plot this frame, if it is set.
    set_x: Option<(f64, f64)>,
    /// The GPU's memory size (MiB).
    limit: Option<f64>,
    /// Memory the driver reserves (MiB).
    reserved: Option<f64>,
    /// The OOM forecast line, when following.
    forecast: Option<[[f64; 2]; 2]>,
}

impl View {
    /// The view of GPU `device` over `range`, `full_w` points wide; `keyed`: the keys moved
    /// the range this frame; `words_w`: how wide a text is on the plot (points).
    fn new(
        m: &Monitor,
        snap: &crate::model::Snapshot,
        device: u32,
        (held, range, full_w): (Range, Range, f32),
        keyed: bool,
        cache: &GraphCache,
        words_w: &dyn Fn(String) -> f32,
    ) -> Self {
        let (from, to) = range;
        let width = (full_w as usize).clamp(50, 4000);
        let (limit, reserved, forecast) = device_figures(snap, device, cache.free_range.is_none());
        let set_x = (cache.free_range.is_none() || keyed || cache.push_range).then(|| {
            let (a, b) = (from as f64 / 1000.0, to as f64 / 1000.0);
            let room = forecast.map_or(0.0, |[[x0, _], [x1, _]]| {
                forecast_room(full_w, words_w(draw::forecast_words(x0, x1)))
            });
            (a, b + (b - a) * room)
        });
        let step_s =
            ((to - from) as f64 / 1000.0 / width as f64).max(m.interval_ms as f64 / 1000.0) * 2.0;
        View {
            device,
            held,
            range,
            width,
            full_w,
            step_s,
            set_x,
            limit,
            reserved,
            forecast,
        }
    }

    /// The view's lines, from the cache; built anew when the key they are kept under changed.
    fn lines<'c>(
        &self,
        m: &Monitor,
        stacked: bool,
        colors: &widgets::Colors,
        cache: &'c mut GraphCache,
        buckets: &mut crate::model::history::BucketCache,
    ) -> &'c DeviceLines {
        let key = self.cache_key(&m.history, stacked, colors);
        cache.get(key, || {
            device_lines(
                &m.history,
                m,
                self.device,
                self.range,
                self.width,
                stacked,
                colors,
                buckets,
            )
        })
    }

    /// The key the cached lines of this view are kept under.
    fn cache_key(&self, h: &History, stacked: bool, colors: &widgets::Colors) -> CacheKey {
        CacheKey {
            history: h.id(),
            what: None,
            device: self.device,
            from: self.range.0,
            to: self.range.1,
            width: self.width,
            end_tick: h.end_tick(),
            stacked,
            dark: colors.dark,
            palette: colors.palette,
        }
    }
}

/// The graph of one GPU with its toolbar (window presets, stacking, fit to data, follow live)
/// and its legend. `edge` is the right end of the window when following (the live edge, or a
/// session's slider); `highlight` is the selected process, drawn thicker. Returns the new
/// selection when a click made one: the process whose band was clicked, or the selection
/// before it when a double click (back to following live) followed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn device_graph(
    ui: &mut Ui,
    m: &Monitor,
    snap: &crate::model::Snapshot,
    device: u32,
    state: &mut UiState,
    cache: &mut GraphCache,
    edge: UnixMs,
    highlight: Option<ProcSeriesKey>,
) -> Option<Option<ProcSeriesKey>> {
    let h = &m.history;
    let Some(held) = h.span() else {
        ui.label("Waiting for the first sample…");
        return None;
    };
    // The graph's width is the pane's, fixed before anything is drawn: a row that
    // overflowed (a legend, a toolbar) must never widen the plot past the window's edge or
    // under the detail pane.
    let full_w = ui.available_width();
    toolbar(ui, device, state, cache);
    let (keyed, range) = shown_range(ui, state, cache, (held, edge, m.interval_ms));
    cache.shown_ms = Some(range);
    let view = View::new(
        m,
        snap,
        device,
        (held, range, full_w),
        keyed.is_some(),
        cache,
        &|t| {
            let font = egui::TextStyle::Small.resolve(ui.style());
            ui.painter()
                .layout_no_wrap(t, font, egui::Color32::WHITE)
                .size()
                .x
        },
    );
    let colors = widgets::Colors::of(ui);
    let stacked = state.stacked;
    let mut buckets = std::mem::take(&mut cache.buckets);
    let drawn = view.lines(m, stacked, &colors, cache, &mut buckets);
    legend(
        ui,
        &drawn.lines,
        highlight,
        view.forecast.is_some(),
        stacked,
    );
    if cache.as_table {
        graph_as_tables(ui, h, &view, state, cache, buckets);
        return None;
    }
    let (resp, clicked) = memory_plot(ui, m, &view, state, cache, highlight);
    cache.buckets = buckets;
    after_plot(ui, m, &view, state, cache, &resp);
    clicked
}

/// The graph drawn as tables (the memory lines', then the metrics' when shown) instead of
/// plots; `buckets` goes back into the cache.
fn graph_as_tables(
    ui: &mut Ui,
    h: &History,
    view: &View,
    state: &UiState,
    cache: &mut GraphCache,
    buckets: crate::model::history::BucketCache,
) {
    let memory_units = state
        .units
        .for_largest(view.limit.map_or(0, |l| (l * MIB as f64) as u64));
    // Out of the cache while the tables (which read the metrics' cache) are drawn.
    let lines = std::mem::take(&mut cache.drawn.lines);
    cache.buckets = buckets;
    cache.plot_rect = None;
    let show_metrics = state.show_metrics.then_some(view.width);
    graph_tables(
        ui,
        h,
        view.device,
        view.range,
        (&lines, state.stacked, view.step_s, memory_units),
        cache,
        show_metrics,
    );
    cache.drawn.lines = lines;
}

/// Draws the memory plot of the cached lines (the limit, the forecast, leak marks, shaded
/// windows); returns its response and the selection a click made, if one did (`Some(None)`:
/// none, a double click taking its first click's back).
fn memory_plot(
    ui: &mut Ui,
    m: &Monitor,
    view: &View,
    state: &UiState,
    cache: &mut GraphCache,
    highlight: Option<ProcSeriesKey>,
) -> (egui_plot::PlotResponse<()>, Option<Option<ProcSeriesKey>>) {
    let (device, range) = (view.device, view.range);
    let marks = leak_marks(m, device, range);
    let mem_h = state
        .show_metrics
        .then(|| (ui.available_height() - METRICS_HEIGHT - 8.0).max(120.0));
    let spans_shaded = shaded_windows(m, device, range);
    let link = egui::Id::unique(("gpu-time", device));
    let DeviceLines {
        lines,
        buckets: spans,
    } = &mut cache.drawn;
    let resp = draw_plot(
        ui,
        &format!("gpu-graph-{device}"),
        lines,
        &PlotOpts {
            height: mem_h,
            link: Some(link),
            spans: &spans_shaded,
            limit_mib: view.limit,
            reserved_mib: view.reserved,
            units: state.units,
            set_x: view.set_x,
            auto_x: false,
            fit_y: state.fit_y,
            marks: &marks,
            table_hover: true,
            highlight,
            forecast: view.forecast,
            step_s: view.step_s,
            buckets: spans,
            stacked: state.stacked,
            width: Some(view.full_w),
            fixed_x: false,
        },
    );
    let now_s = ui.input(|i| i.time);
    // A double click (back to following live) takes back the selection its first click made:
    // it opened the detail pane of the band under the pointer and squeezed the graph.
    if resp.response.double_clicked() {
        let undo = cache
            .before_pick
            .take()
            .filter(|(at, _)| now_s - at <= PICK_UNDONE_WITHIN_S)
            .map(|(_, was)| was);
        return (resp, undo);
    }
    // A click on a band selects its process (as a click on its row does).
    let clicked = resp
        .response
        .clicked()
        .then(|| resp.response.interact_pointer_pos())
        .flatten()
        .map(|pos| resp.transform.value_from_position(pos))
        .and_then(|p| hover::process_at(lines, (p.x, p.y), view.step_s));
    if clicked.is_some() {
        cache.before_pick = Some((now_s, highlight));
    }
    (resp, clicked.map(Some))
}

/// How soon after a click on a band a double click takes its selection back (s): egui's
/// double click comes within 0.3 s.
const PICK_UNDONE_WITHIN_S: f64 = 0.5;

/// After the memory plot: keeps where it was drawn, draws the metric plots under it (when
/// shown), and keeps the range a zoom or pan of either leaves, within the data.
fn after_plot(
    ui: &mut Ui,
    m: &Monitor,
    view: &View,
    state: &UiState,
    cache: &mut GraphCache,
    resp: &egui_plot::PlotResponse<()>,
) {
    cache.plot_rect = Some(resp.response.rect);
    cache.edge_x = Some(
        resp.transform
            .position_from_point_x(view.range.1 as f64 / 1000.0),
    );
    // A metric plot zoomed or panned moves the memory graph too (their time axes are
    // linked): its range becomes the graph's.
    let mut metric_moved = None;
    let moved_here = user_moved(ui, &resp.response);
    if state.show_metrics {
        // The same time range as the memory graph, the forecast's room on the right
        // included (their time axes line up): set where the memory graph set it (following,
        // keys), else taken from the link, so a zoom of the memory graph in this frame is not
        // undone.
        let range = view.set_x.filter(|_| !moved_here);
        metric_moved = metric_plots(
            ui,
            &m.history,
            view.device,
            view.range,
            range,
            (view.width, view.full_w),
            cache,
            METRICS_HEIGHT,
        );
    }
    let after = range_after(resp, moved_here, metric_moved, cache.free_range);
    let kept = after.map(|r| kept_in_data(r, view.held, m.interval_ms));
    cache.push_range = kept != after;
    cache.free_range = kept;
}

#[cfg(test)]
mod tests {
    use super::axes::{time_grid, x_formatter};
    use super::hover::bucket_title;
    use super::lines::Bucket;
    use super::marks::span_labels;
    use super::*;
    use egui_plot::GridMark;

    /// The second window review: a click on a band selected nothing. The band under the
    /// point is its process's: the lower one from 0 to its own value, the one stacked on it
    /// from there to its top; above the stack or before the lines, none.
    #[test]
    fn a_point_on_a_band_names_its_process() {
        use super::hover::process_at;
        use super::lines::{GraphLine, LineKind};
        let key = |pid| {
            (
                crate::model::ProcessKey {
                    pid,
                    start_time_ms: 1,
                },
                0,
            )
        };
        let band = |pid, own: f64, top: f64| {
            let mut l = GraphLine::new(
                format!("p{pid}"),
                LineKind::Process(key(pid)),
                egui::Color32::RED,
                vec![[100.0, top], [101.0, top]],
                true,
            );
            l.own = vec![own, own];
            l.scaled = vec![
                egui_plot::PlotPoint::new(100.0, top),
                egui_plot::PlotPoint::new(101.0, top),
            ];
            l.scale = 1.0;
            l
        };
        let lines = vec![band(1, 10.0, 10.0), band(2, 5.0, 15.0)];
        assert_eq!(process_at(&lines, (100.5, 4.0), 1.0), Some(key(1)));
        assert_eq!(process_at(&lines, (100.5, 12.0), 1.0), Some(key(2)));
        assert_eq!(process_at(&lines, (100.5, 20.0), 1.0), None);
        assert_eq!(process_at(&lines, (99.0, 4.0), 1.0), None);
    }

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

    /// A plot too narrow for its step's labels keeps two round times when a finer step has
    /// them far enough apart (8 minutes in 180 points: two whole minutes, not 06:54:13 and
    /// 06:58:48 at the plot's ends).
    #[test]
    fn a_narrow_time_axis_keeps_round_times() {
        let offset = f64::from(chrono::Local::now().offset().local_minus_utc());
        let lo = 1_796_000_013.0;
        let (span, width) = (450.0, 180.0);
        let marks = time_grid(egui_plot::GridInput {
            bounds: (lo, lo + span),
            base_step_size: span / width * 8.0,
        });
        assert_eq!(marks.len(), 2, "{marks:?}");
        for m in &marks {
            assert_eq!((m.value + offset).rem_euclid(60.0), 0.0, "{marks:?}");
        }
    }

    /// The review of the window: the detail pane's lifetime graph often had no time label.
    /// Whatever the plot's width (from the narrowest pane's) and the time it spans, at least
    /// two marks are far enough apart for egui_plot to draw their labels whole.
    #[test]
    fn a_time_axis_always_has_two_labels() {
        let full = f64::from(super::axes::X_LABEL_MIN_GAP + super::axes::LABEL_FADE);
        for width in [
            160.0, 200.0, 250.0, 300.0, 340.0, 400.0, 470.0, 600.0, 900.0, 1400.0,
        ] {
            for span in [
                3.0, 7.0, 12.0, 45.0, 100.0, 299.0, 470.0, 900.0, 2000.0, 5000.0, 20_000.0,
                80_000.0, 200_000.0, 900_000.0,
            ] {
                let lo = 1_796_000_013.0;
                let point = span / width;
                let marks = time_grid(egui_plot::GridInput {
                    bounds: (lo, lo + span),
                    base_step_size: point * 8.0,
                });
                let labelled = marks
                    .iter()
                    .filter(|m| m.step_size / point >= full)
                    .filter(|m| m.value >= lo && m.value <= lo + span)
                    .count();
                assert!(
                    labelled >= 2,
                    "{width} points showing {span} s: {labelled} labels ({marks:?})"
                );
            }
        }
    }
}
