//! Zoom and pan: the wheel's time zoom, the keyboard's moves, the preset windows.

use egui::Ui;

use crate::front::gui::ui_state::Window;
use crate::model::UnixMs;

/// The wheel zooms time around the cursor, a notch in one frame (egui's smoothed scroll would
/// spread it over a second of frames). In the window the wheel reaches the plot as a zoom
/// event ([`wheel_to_zoom`]); this reads one that was not turned.
pub(super) fn wheel_zoom(plot_ui: &mut egui_plot::PlotUi<'_>) {
    if plot_ui.response().hovered() {
        let f = plot_ui
            .ctx()
            .input(|i| wheel_zoom_factor(&i.events, i.modifiers));
        if f != 1.0 {
            plot_ui.zoom_bounds_around_hovered(egui::vec2(f, 1.0));
        }
    }
}

/// Fits the value axis to what is drawn again after anything turned that off: egui_plot turns
/// off both axes' fitting on any zoom (the wheel's time zoom included) and on a value range
/// set once (Fit to data), and keeps it off. Called first in a plot's frame, before its time
/// is set or zoomed, on plots whose value range nobody sets this frame.
pub(super) fn fit_values_again(plot_ui: &mut egui_plot::PlotUi<'_>) {
    let auto = plot_ui.auto_bounds();
    if !auto.y {
        plot_ui.set_auto_bounds([auto.x, true]);
    }
}

pub(super) fn user_moved(ui: &Ui, resp: &egui::Response) -> bool {
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
pub(crate) fn wheel_zoom_factor(events: &[egui::Event], modifiers: egui::Modifiers) -> f32 {
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
pub(crate) fn wheel_to_zoom(raw: &mut egui::RawInput, over_graph: bool) {
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

/// The graph's range after a frame: following again after a double-click, a metric plot's
/// range when the user moved one, else the memory graph's own when moved (or already free).
pub(super) fn range_after(
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

/// A range the user zoomed or panned to, kept where the data is (`held`: the history's first
/// and last sample): at least twenty samples wide (finer, the bands end between samples and
/// the plot empties), at most the history held and a fifth more, and no further past either
/// end than a fifth of itself (a drag could carry the view hours into the empty future).
pub(super) fn kept_in_data(
    (a, b): (UnixMs, UnixMs),
    (first, last): (UnixMs, UnixMs),
    interval_ms: u64,
) -> (UnixMs, UnixMs) {
    let min_span = (i64::try_from(interval_ms).unwrap_or(i64::MAX / 40) * 20).max(5_000);
    let held = (last - first).max(min_span);
    let span = (b - a).clamp(min_span, held + held / 5);
    let mut from = a + (b - a) / 2 - span / 2;
    let slack = span / 5;
    from = from.min(last + slack - span).max(first - slack);
    (from, from + span)
}

/// The range a time preset shows at `edge`: a preset longer than the history held (from
/// `first`) shows what is held (at least 10 s), so a fresh start fills the width instead of
/// being a sliver at the right edge.
pub(super) fn preset_range(window: Window, first: UnixMs, edge: UnixMs) -> (UnixMs, UnixMs) {
    let held = (edge - first).max(10_000);
    let span = window.ms().map_or(held, |w| w.min(held)).max(1000);
    (edge - span, edge)
}

/// The graph's keys (when no text field has the keyboard): `+` / `-` zoom time in and out,
/// Shift + Left / Right pan by a fifth of the view, End follows live again. Returns the new range
/// (`Some(None)`: follow live), `None` when no key was pressed.
pub(super) fn keyboard_move(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The GUI review: a wheel zoom went down to under a second (an empty plot) and a drag
    /// carried the view hours past the newest sample. An hour held at 1 s: the view keeps at
    /// least 20 s, at most the hour and a fifth, and no more than a fifth of itself past an
    /// end; a view inside the data is left as it is.
    #[test]
    fn a_zoomed_or_panned_view_stays_where_the_data_is() {
        let held = (1_000_000, 1_000_000 + 3_600_000);
        let keep = |r| kept_in_data(r, held, 1000);
        let inside = (1_500_000, 1_800_000);
        assert_eq!(keep(inside), inside);
        // Zoomed in to 0.8 s at its middle: 20 s about the same middle.
        let (a, b) = keep((2_000_000, 2_000_800));
        assert_eq!(b - a, 20_000);
        assert_eq!((a + b) / 2, 2_000_400);
        // Dragged seven hours into the future: back to a fifth past the newest sample.
        let (a, b) = keep((held.1 + 7 * 3_600_000, held.1 + 7 * 3_600_000 + 600_000));
        assert_eq!((b - a, b), (600_000, held.1 + 120_000));
        // Zoomed out to a day: the hour and a fifth, not before the first sample by more than
        // a fifth of the view.
        let (a, b) = keep((held.0 - 43_200_000, held.1 + 43_200_000));
        assert_eq!(b - a, 4_320_000);
        assert!(a >= held.0 - 864_000 && b <= held.1 + 864_000, "{a} {b}");
    }
}
