//! The small metric plots under the memory graph (utilisation, temperature, power, clocks, fan).

use egui::Ui;
use egui_plot::{Line, Plot, PlotPoints};

use super::axes::{time_axis, time_grid, value_axis, value_grid, value_label};
use super::cache::{CacheKey, GraphCache};
use super::hover::lines_span;
use super::lines::{GraphLine, LineKind};
use super::zoom::{fit_values_again, user_moved, wheel_zoom};
use crate::front::gui::widgets;
use crate::model::history::History;
use crate::model::UnixMs;

/// The small plots under the memory graph (one per panel, each with its metrics' lines), over
/// the memory graph's time range, their time axes linked to it.
pub(super) const METRIC_PANELS: [(&str, &str, &[crate::model::history::Metric]); 5] = {
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
pub(super) fn metric_lines<'c>(
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
    with_readings(plots).take(fit).collect()
}

/// The metric panels with a reading (utilisation, temperature and power always).
fn with_readings(plots: &[Vec<GraphLine>]) -> impl Iterator<Item = usize> + '_ {
    (0..METRIC_PANELS.len()).filter(|i| i < &3 || plots.get(*i).is_some_and(|p| !p.is_empty()))
}

/// Room kept at the end of the row for saying which panels did not fit.
const MORE_W: f32 = 60.0;

/// The panels shown in `available` points, those with a reading that do not fit (named at
/// the row's end rather than dropped unsaid), and the width the shown ones share.
fn panels_at(plots: &[Vec<GraphLine>], available: f32) -> (Vec<usize>, Vec<usize>, f32) {
    let shown = shown_panels(plots, available);
    if shown.len() == with_readings(plots).count() {
        return (shown, Vec::new(), available);
    }
    let room = available - MORE_W;
    let shown = shown_panels(plots, room);
    let hidden = with_readings(plots)
        .filter(|i| !shown.contains(i))
        .collect();
    (shown, hidden, room)
}

/// The small plots under the memory graph (one per panel, each with its metrics' lines) over
/// the memory graph's time range, their time axes and cursor linked to it. Returns the range
/// (unix s) one of them was zoomed or panned to by the user.
#[allow(clippy::too_many_arguments)]
pub(super) fn metric_plots(
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
    let (shown, hidden, room) = panels_at(plots, available);
    let hidden: Vec<&str> = hidden.into_iter().map(|i| METRIC_PANELS[i].0).collect();
    let n = shown.len() as f32;
    let w = ((room - 8.0 * n) / n).max(110.0);
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
        if !hidden.is_empty() {
            ui.label(widgets::hint(format!("+{} more", hidden.len())))
                .on_hover_text(format!(
                    "{}: not shown at this width; widen the window or close the detail pane",
                    hidden.join(", ")
                ));
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
    panel_title(ui, title, unit, lines);
    let legend_h = panel_legend(ui, lines);
    let days = widgets::shows_days(set_x.or_else(|| lines_span(lines)));
    let size = (w - 8.0, (height - 20.0 - legend_h).max(40.0));
    let resp = panel_plot(device, title, unit, days, size).show(ui, |p| {
        fit_values_again(p);
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

/// The panel's title with its lines' newest readings ("Power · 290 / 700 W"; "—" when it
/// has none), the lines' names on hover.
fn panel_title(ui: &mut Ui, title: &str, unit: &str, lines: &[GraphLine]) {
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
}

/// A panel of two lines (power and its cap, the two clocks) says which is which; returns
/// the height the legend took (0 for one line).
fn panel_legend(ui: &mut Ui, lines: &[GraphLine]) -> f32 {
    if lines.len() > 1 {
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
    }
}

/// The panel's plot, `(width, height)` in points: its time axis zooms and pans only (linked
/// to the memory graph's, with the cursor), its values from 0 (to 100 for a percentage).
fn panel_plot(
    device: u32,
    title: &'static str,
    unit: &str,
    days: bool,
    (width, height): (f32, f32),
) -> Plot<'static> {
    let hover_unit = unit.to_string();
    let unit = unit.to_string();
    let link = egui::Id::unique(("gpu-time", device));
    let plot = Plot::new(("gpu-metric", device, title))
        .height(height)
        .width(width)
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
        plot.include_y(100.0)
    } else {
        plot
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The window's review: beside the detail pane the Clocks and Fan panels went, unsaid.
    /// What does not fit is named; the panels without a reading are neither shown nor named.
    #[test]
    fn panels_that_do_not_fit_are_named_and_those_without_readings_are_not() {
        let line = || {
            let points = vec![[0.0, 1.0], [1.0, 2.0]];
            vec![GraphLine::new(
                "x".into(),
                LineKind::Total,
                egui::Color32::RED,
                points,
                false,
            )]
        };
        let all: Vec<Vec<GraphLine>> = (0..METRIC_PANELS.len()).map(|_| line()).collect();
        let wide = 150.0 * METRIC_PANELS.len() as f32 + 1.0;
        let (shown, hidden, room) = panels_at(&all, wide);
        assert_eq!(
            (shown.len(), hidden.len(), room),
            (METRIC_PANELS.len(), 0, wide)
        );
        let (shown, hidden, room) = panels_at(&all, 500.0);
        assert_eq!(shown, [0, 1]);
        assert_eq!(hidden, (2..METRIC_PANELS.len()).collect::<Vec<_>>());
        assert_eq!(room, 500.0 - MORE_W);
        // No fan reading (an SXM module): only the panels with one count.
        let mut no_fan = all;
        if let Some(last) = no_fan.last_mut() {
            last.clear();
        }
        let (shown, hidden, _) = panels_at(&no_fan, 150.0 * (METRIC_PANELS.len() - 1) as f32);
        assert_eq!((shown.len(), hidden.len()), (METRIC_PANELS.len() - 1, 0));
    }
}
