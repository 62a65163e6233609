//! The accessible alternative to a plot: the same series as a table (plots expose no data to
//! screen readers; a table's cells are labels AccessKit reads). A "Table" toggle beside each
//! plot switches between the two.

use egui::{Color32, RichText, Ui};

use super::widgets;

/// One series of a plot, as the table reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Series<'a> {
    /// Its legend name.
    pub name: &'a str,
    /// Its colour (the swatch).
    pub color: Color32,
    /// Its points (unix s, drawn value), in time order.
    pub points: &'a [[f64; 2]],
    /// Its own value at each point (a stacked line's points are cumulative).
    pub own: &'a [f64],
}

impl Series<'_> {
    /// Its own value at time `x`: the last point at or before `x` within `tolerance` s, else
    /// the first after it within `tolerance` (the line drawn over the time shown starts at its
    /// first bucket, a little after the time shown begins).
    pub(crate) fn value_at(&self, x: f64, tolerance: f64) -> Option<f64> {
        let i = self.points.partition_point(|p| p[0] <= x);
        let near = |j: usize| {
            let p = self.points.get(j)?;
            ((x - p[0]).abs() <= tolerance).then(|| self.own.get(j).copied())?
        };
        i.checked_sub(1).and_then(near).or_else(|| near(i))
    }
}

/// How many instants across the time shown the table lists (columns), besides the newest.
const INSTANTS: usize = 6;

/// The most series a table lists (a day of a GPU that runs short jobs draws thousands): those
/// with the highest values in the time shown, in the plot's order; the rest are counted.
const MAX_ROWS: usize = 50;

/// The series of `rows` a table over `(from_s, to_s)` lists, and how many it leaves out.
fn listed<'r, 'a>(
    rows: &'r [Series<'a>],
    (from_s, to_s): (f64, f64),
) -> (Vec<&'r Series<'a>>, usize) {
    if rows.len() <= MAX_ROWS {
        return (rows.iter().collect(), 0);
    }
    let mut by_high: Vec<(usize, f64)> = rows
        .iter()
        .map(|l| range_in(l, from_s, to_s).1.unwrap_or(f64::NEG_INFINITY))
        .enumerate()
        .collect();
    by_high.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut keep: Vec<usize> = by_high.iter().take(MAX_ROWS).map(|(i, _)| *i).collect();
    keep.sort_unstable();
    let kept = keep.iter().filter_map(|i| rows.get(*i)).collect();
    (kept, rows.len() - MAX_ROWS)
}

/// The instants (unix s) a table over `(from_s, to_s)` lists: [`INSTANTS`] evenly spaced,
/// the last at `to_s`.
pub(crate) fn instants(from_s: f64, to_s: f64) -> Vec<f64> {
    if to_s <= from_s {
        return vec![to_s];
    }
    let step = (to_s - from_s) / (INSTANTS - 1) as f64;
    (0..INSTANTS).map(|i| from_s + step * i as f64).collect()
}

/// The "Table" toggle: a selectable label beside a plot's title.
pub(crate) fn toggle(ui: &mut Ui, on: &mut bool) {
    ui.toggle_value(on, "Table")
        .on_hover_text("Show the plot's series as a table of values (readable by a screen reader)");
}

/// How a value is written in the table.
pub(crate) enum ValueFormat<'a> {
    /// Memory in MiB, written in `units`.
    Memory(crate::model::format::Units),
    /// A plain number with its unit ("%", "°C", "W", "MHz").
    Plain(&'a str),
}

impl ValueFormat<'_> {
    fn write(&self, v: f64) -> String {
        match self {
            ValueFormat::Memory(u) => u.mib(v),
            ValueFormat::Plain(unit) => format!("{v:.0} {unit}"),
        }
    }
}

/// The table of `lines` over `(from_s, to_s)`: a row per series (its swatch and name), a
/// column per instant, then the lowest and highest value in the range. `step_s` is how far
/// from a point a value still counts (the plot's hover tolerance).
pub(crate) fn series_table(
    ui: &mut Ui,
    id: impl std::hash::Hash + std::fmt::Debug,
    rows: &[Series<'_>],
    (from_s, to_s): (f64, f64),
    step_s: f64,
    fmt: &ValueFormat<'_>,
) {
    let times = instants(from_s, to_s);
    if rows.is_empty() {
        ui.label("No data in the time shown.");
        return;
    }
    let (rows, left_out) = listed(rows, (from_s, to_s));
    if left_out > 0 {
        ui.label(widgets::hint(format!(
            "The {MAX_ROWS} series with the highest values in the time shown; {left_out} more \
             not listed (zoom in to list fewer)"
        )));
    }
    egui::ScrollArea::both()
        .id_salt(("plot-table-scroll", &id))
        .auto_shrink([false, true])
        .max_height(ui.available_height().max(120.0))
        .show(ui, |ui| {
            egui::Grid::new(("plot-table", id))
                .striped(true)
                .num_columns(times.len() + 3)
                .spacing([12.0, 3.0])
                .show(ui, |ui| {
                    ui.label(RichText::new("Series").strong());
                    let days = widgets::shows_days(Some((from_s, to_s)));
                    for t in &times {
                        ui.label(RichText::new(widgets::hover_time(*t, days)).strong());
                    }
                    ui.label(RichText::new("Lowest").strong());
                    ui.label(RichText::new("Highest").strong());
                    ui.end_row();
                    for l in rows {
                        series_row(ui, l, &times, (from_s, to_s), step_s, fmt);
                    }
                });
        });
}

/// One series: its values at each instant ("—" where it has none), its lowest and highest.
fn series_row(
    ui: &mut Ui,
    l: &Series<'_>,
    times: &[f64],
    (from_s, to_s): (f64, f64),
    step_s: f64,
    fmt: &ValueFormat<'_>,
) {
    ui.horizontal(|ui| {
        widgets::color_swatch(ui, l.color);
        ui.label(l.name);
    });
    // A sparse line (a metric sampled every second, drawn wider apart than the tolerance)
    // still answers between its points.
    let tolerance = step_s.max(mean_gap(l) * 1.5);
    for t in times {
        let v = l.value_at(*t, tolerance);
        ui.monospace(v.map_or("—".into(), |v| fmt.write(v)));
    }
    let (lo, hi) = range_in(l, from_s, to_s);
    ui.monospace(lo.map_or("—".into(), |v| fmt.write(v)));
    ui.monospace(hi.map_or("—".into(), |v| fmt.write(v)));
    ui.end_row();
}

/// The mean time between a line's points (0 with fewer than two).
fn mean_gap(l: &Series<'_>) -> f64 {
    match (l.points.first(), l.points.last()) {
        (Some(a), Some(b)) if l.points.len() > 1 => (b[0] - a[0]) / (l.points.len() - 1) as f64,
        _ => 0.0,
    }
}

/// The lowest and highest of a line's own values between `from_s` and `to_s`.
fn range_in(l: &Series<'_>, from_s: f64, to_s: f64) -> (Option<f64>, Option<f64>) {
    l.points
        .iter()
        .zip(l.own)
        .filter(|(p, _)| p[0] >= from_s && p[0] <= to_s)
        .fold(
            (None, None),
            |(lo, hi): (Option<f64>, Option<f64>), (_, v)| {
                (
                    Some(lo.map_or(*v, |x: f64| x.min(*v))),
                    Some(hi.map_or(*v, |x: f64| x.max(*v))),
                )
            },
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_span_the_range_and_end_at_its_end() {
        let t = instants(100.0, 200.0);
        assert_eq!(t.len(), INSTANTS);
        assert_eq!(t[0], 100.0);
        assert_eq!(*t.last().expect("one"), 200.0);
        assert_eq!(instants(5.0, 5.0), vec![5.0]);
    }

    /// Past [`MAX_ROWS`] series, a table lists those with the highest values in the time
    /// shown, in the plot's order, and counts the rest.
    #[test]
    fn a_table_of_many_series_lists_the_highest() {
        let points: Vec<[[f64; 2]; 2]> = (0..80)
            .map(|i| [[10.0, 0.0], [20.0, f64::from(i)]])
            .collect();
        let own: Vec<[f64; 2]> = (0..80u32)
            .map(|i| [1.0, f64::from((i * 37) % 80)])
            .collect();
        let rows: Vec<Series> = points
            .iter()
            .zip(&own)
            .map(|(p, o)| Series {
                name: "x",
                color: Color32::WHITE,
                points: p,
                own: o,
            })
            .collect();
        let (kept, left_out) = listed(&rows, (0.0, 30.0));
        assert_eq!(left_out, 30);
        let highs: Vec<f64> = kept.iter().map(|l| l.own[1]).collect();
        assert_eq!(highs.len(), MAX_ROWS);
        assert!(highs.iter().all(|h| *h >= 30.0), "{highs:?}");
        let at: Vec<usize> = kept
            .iter()
            .map(|l| {
                rows.iter()
                    .position(|r| std::ptr::eq(r, *l))
                    .unwrap_or(usize::MAX)
            })
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
        assert_eq!(listed(&rows[..MAX_ROWS], (0.0, 30.0)).1, 0);
    }

    #[test]
    fn a_series_answers_near_its_points_with_its_own_values() {
        let s = Series {
            name: "x",
            color: Color32::WHITE,
            points: &[[10.0, 100.0], [20.0, 300.0]],
            own: &[1.0, 2.0],
        };
        assert_eq!(s.value_at(5.0, 3.0), None);
        // The GUI review: the table's first instant, where the time shown begins, read "—"
        // for every series: the drawn line starts at its first bucket, just after it.
        assert_eq!(s.value_at(8.0, 3.0), Some(1.0));
        assert_eq!(s.value_at(12.0, 3.0), Some(1.0));
        assert_eq!(s.value_at(15.0, 3.0), None);
        assert_eq!(s.value_at(21.0, 3.0), Some(2.0));
        assert_eq!(range_in(&s, 0.0, 30.0), (Some(1.0), Some(2.0)));
        assert_eq!(range_in(&s, 15.0, 30.0), (Some(2.0), Some(2.0)));
    }
}
