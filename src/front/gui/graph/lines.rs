//! The lines a graph draws: what each stands for, its points, and the time buckets they share.

use egui::Color32;

use crate::model::history::{PlotLine, ProcSeriesKey};

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
    pub(super) fn new(
        name: String,
        kind: LineKind,
        color: Color32,
        points: PlotLine,
        filled: bool,
    ) -> Self {
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
    pub(crate) fn runs(&self) -> Vec<std::ops::Range<usize>> {
        let mut starts = vec![0];
        starts.extend(self.breaks.iter().copied());
        starts.push(self.points.len());
        starts
            .windows(2)
            .filter(|w| w[1] > w[0])
            .map(|w| w[0]..w[1])
            .collect()
    }

    /// Its band at time `x` in the axis unit (its lower edge and its top, as drawn), when `x`
    /// lies within the line (see [`GraphLine::value_at`]).
    pub(crate) fn band_at(&self, x: f64, step: f64) -> Option<(f64, f64)> {
        let i = self.scaled.partition_point(|p| p.x <= x);
        let top = self.scaled.get(i.checked_sub(1)?)?;
        let own = self.own.get(i - 1)?;
        (x - top.x <= step).then(|| ((top.y - own * self.scale).max(0.0), top.y))
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
