//! The hover: the bucket under the cursor, its title and the table of every series there.

use egui::Ui;

use super::lines::{Bucket, GraphLine, LineKind};
use crate::front::gui::widgets;
use crate::model::format::Units;
use crate::model::history::ProcSeriesKey;

/// Where the pointer is on a GPU graph, for its hover.
pub(super) struct HoverAt {
    /// Its time (unix s).
    pub(super) x: f64,
    /// Seconds one point stands for.
    pub(super) step: f64,
    /// The bucket under it.
    pub(super) bucket: Option<Bucket>,
    /// Whether the lines are a stack read at each bucket's instant.
    pub(super) stacked: bool,
    /// The graph shows more than one day: times name their day.
    pub(super) days: bool,
}

/// The bucket that holds time `x` (within `step` after its last sample).
pub(crate) fn bucket_at(buckets: &[Bucket], x: f64, step: f64) -> Option<Bucket> {
    let i = buckets.partition_point(|b| b.from_s <= x);
    let b = *buckets.get(i.checked_sub(1)?)?;
    (x <= b.to_s + step).then_some(b)
}

/// The hover's title: the bucket's time range ("12:00:00 – 12:01:36"), or one time when it
/// holds one sample. With `days` (the graph shows more than one day) each time names its
/// day ("7 Dec 00:00:00 – 00:01:36"; the end's day only when it is another).
pub(crate) fn bucket_title(b: &Bucket, days: bool) -> String {
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
pub(super) fn lines_span(lines: &[GraphLine]) -> Option<(f64, f64)> {
    let first = lines.iter().filter_map(|l| l.points.first()).map(|p| p[0]);
    let last = lines.iter().filter_map(|l| l.points.last()).map(|p| p[0]);
    let a = first.fold(f64::INFINITY, f64::min);
    let b = last.fold(f64::NEG_INFINITY, f64::max);
    (a <= b).then_some((a, b))
}

/// The process whose stacked band lies under the point `(x, y)` of the plot (unix seconds,
/// the axis unit): a click there selects it.
pub(super) fn process_at(
    lines: &[GraphLine],
    (x, y): (f64, f64),
    step: f64,
) -> Option<ProcSeriesKey> {
    lines.iter().find_map(|l| match l.kind {
        LineKind::Process(k) if l.filled => l
            .band_at(x, step)
            .filter(|(lo, hi)| (*lo..=*hi).contains(&y))
            .map(|_| k),
        _ => None,
    })
}

/// The hover of the GPU graph: the bucket under the cursor (its time range), every series's
/// own value with its colour (stacked: in the stack's order from its top, as the legend;
/// else largest first), then the total and the free memory. Stacked,
/// the values are those of the bucket's last sample, so they add up to the total; the total's
/// range in the bucket follows.
pub(super) fn hover_table(
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
    hover_title(ui, at, x);
    // One unit for the whole list (Auto: from the GPU's size).
    let largest = limit_mib.unwrap_or(0.0).max(0.0) * crate::model::MIB as f64;
    let units = units.for_largest(largest as u64);
    let rows = hover_rows(lines, (x, step), at.stacked);
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
                total_rows(ui, t, at, (limit_mib, reserved_mib), units);
            }
        });
    if rows.is_empty() && total.is_none() {
        ui.label(egui::RichText::new("No data at this time").weak());
    }
}

/// The hover's title: the bucket's time range (stacked, with the instant its values are
/// read at), or the time at `x` where there are no buckets.
fn hover_title(ui: &mut Ui, at: &HoverAt, x: f64) {
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
}

/// Every series but the total's with its own value at `x` (within `step`): stacked, in the
/// stack's order from its top (as the legend); else largest first.
fn hover_rows(lines: &[GraphLine], (x, step): (f64, f64), stacked: bool) -> Vec<(&GraphLine, f64)> {
    let mut rows: Vec<(&GraphLine, f64)> = lines
        .iter()
        .filter(|l| !matches!(l.kind, LineKind::Total | LineKind::TotalRange))
        .filter_map(|l| l.value_at(x, step).map(|v| (l, v)))
        .collect();
    if stacked {
        // As the stack and the legend: its top first.
        rows.reverse();
    } else {
        rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    }
    rows
}

/// The hover's last rows: the total `t`, its range in the bucket (when it varied), and the
/// free memory (the GPU's size less the total and what the driver reserves).
fn total_rows(
    ui: &mut Ui,
    t: f64,
    at: &HoverAt,
    (limit_mib, reserved_mib): (Option<f64>, Option<f64>),
    units: Units,
) {
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
