//! The graphs' axes: time and value grids, their marks' labels and spacing.

use egui_plot::GridMark;

use crate::model::format;

/// A time axis label: the clock ("23:05:00"), the day at midnight ("7 Dec"), the date and
/// time over more than two days ("12-07 06:00").
pub(crate) fn x_formatter(mark: GridMark, range: &std::ops::RangeInclusive<f64>) -> String {
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

/// The time-axis grid: round steps (10 s, 1 min, 5 min, 1 h, …) in local time, about eight
/// marks across the plot, never closer than a label shown whole ([`X_LABEL_MIN_GAP`]), and
/// two labelled marks at least wherever the plot is wide enough for two labels (a narrow
/// plot, as the detail pane's, showed none: its eight marks were too close to label).
pub(super) fn time_grid(input: egui_plot::GridInput) -> Vec<GridMark> {
    const STEPS: [f64; 18] = [
        1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0,
        10800.0, 21600.0, 43200.0, 86400.0,
    ];
    let (lo, hi) = input.bounds;
    let span = (hi - lo).max(1e-3);
    // egui_plot asks with the size of 8 points.
    let point = input.base_step_size / 8.0;
    // Two labels this far apart are both drawn, whole.
    let gap = point * f64::from(X_LABEL_MIN_GAP + LABEL_FADE);
    let step = STEPS
        .iter()
        .copied()
        .find(|s| span / s <= 8.0 && *s >= gap)
        .unwrap_or_else(|| ((span / 8.0).max(gap) / 86400.0).ceil() * 86400.0);
    // Align to local time (a time zone may be offset by a non-round amount from UTC).
    let offset = f64::from(chrono::Local::now().offset().local_minus_utc());
    let mut marks = Vec::new();
    // A label is centred on its mark: one closer to an end than half a label's width would be
    // cut there (the lifetime graph's last one was).
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
    if marks.len() < 2 {
        // The step gives no two labels here: two round times of a finer step, the first and
        // the last within the ends, where they lie far enough apart; else the ends themselves,
        // half a label in.
        let (a, b) = (lo + margin, hi - margin);
        if b - a >= gap {
            let round = STEPS.iter().rev().filter(|s| **s < step).find_map(|&s| {
                let first = ((a + offset) / s).ceil() * s - offset;
                let last = ((b + offset) / s).floor() * s - offset;
                (last - first >= gap).then_some((first, last))
            });
            let (x, y) = round.unwrap_or((a, b));
            return [x, y]
                .map(|value| GridMark {
                    value,
                    step_size: y - x,
                })
                .to_vec();
        }
    }
    marks
}

/// Half the width of the widest time label ("23:05:00", "7 Dec"), with a little room.
const X_LABEL_HALF_WIDTH: f64 = 30.0;

/// Points between two labelled values of a value axis at least (egui_plot hides a label
/// closer than 20 points to the next).
pub(crate) const Y_LABEL_GAP: f32 = 22.0;

/// Points between two labelled values on a short plot at least (a line of text).
pub(crate) const Y_LABEL_MIN_GAP: f32 = 16.0;

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

/// A value axis `width` points wide at least, labelled by `label`, whose labels show whole
/// down to [`Y_LABEL_MIN_GAP`] apart (egui_plot's default hides them under 20; a fade just
/// above the gap [`value_grid`] allows greyed them to 4.2:1 on the light theme once the
/// metric plots' time labels took their height).
pub(super) fn value_axis<'a>(
    width: f32,
    label: impl Fn(GridMark) -> String + 'a,
) -> egui_plot::AxisHints<'a> {
    egui_plot::AxisHints::new_y()
        .formatter(move |m, _| label(m))
        .min_thickness(width)
        .label_spacing(Y_LABEL_MIN_GAP - LABEL_FADE..=Y_LABEL_MIN_GAP)
}

/// The time axis: clock labels at least [`X_LABEL_MIN_GAP`] apart, never faded.
pub(super) fn time_axis<'a>() -> egui_plot::AxisHints<'a> {
    egui_plot::AxisHints::new_x()
        .formatter(x_formatter)
        .label_spacing(X_LABEL_MIN_GAP..=X_LABEL_MIN_GAP + LABEL_FADE)
}

/// Points apart at least for two time labels ("23:05:00" is about 50 points wide).
pub(super) const X_LABEL_MIN_GAP: f32 = 58.0;

/// egui_plot fades a label in over a range of gaps, down to a contrast no one reads (1.6:1):
/// a label shown here is shown whole (the range is this narrow).
pub(super) const LABEL_FADE: f32 = 0.5;

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
