//! The graphs' cache: lines kept until the view, the width or the data change.

use super::lines::{DeviceLines, GraphLine};
use crate::front::gui::widgets;
use crate::model::history::ProcSeriesKey;
use crate::model::UnixMs;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct CacheKey {
    /// The history summarised ([`History::id`]): lines of another source are never reused.
    pub(super) history: u64,
    pub(super) what: Option<ProcSeriesKey>,
    pub(super) device: u32,
    pub(super) from: UnixMs,
    pub(super) to: UnixMs,
    pub(super) width: usize,
    pub(super) end_tick: u64,
    pub(super) stacked: bool,
    pub(super) dark: bool,
    pub(super) palette: widgets::Palette,
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
pub(crate) struct GraphCache {
    key: Option<CacheKey>,
    pub(super) drawn: DeviceLines,
    /// The range the user zoomed or panned to; `None` follows the newest data.
    pub free_range: Option<(UnixMs, UnixMs)>,
    /// Where the plot was drawn last (the wheel over it zooms).
    pub plot_rect: Option<egui::Rect>,
    /// The time range (unix s) the plot showed last (the lifetime graph's, for tests).
    pub shown_x: Option<(f64, f64)>,
    /// The time range (unix ms) the GPU graph showed last (an export of "the time shown").
    pub shown_ms: Option<(UnixMs, UnixMs)>,
    /// When a click on a band last selected a process (egui's time, s), and the selection
    /// before it: a double click takes the selection back.
    pub(super) before_pick: Option<(f64, Option<ProcSeriesKey>)>,
    /// Where the newest moment shown ("now" when following, the slider in a session) was
    /// drawn last: its x on screen.
    pub edge_x: Option<f32>,
    pub(super) buckets: crate::model::history::BucketCache,
    pub(super) metrics: Option<(CacheKey, Vec<Vec<GraphLine>>)>,
    /// The plot's series shown as a table instead (the "Table" toggle).
    pub as_table: bool,
    /// The graph shows a recorded session (its right end is the slider, not "live").
    pub in_session: bool,
    /// `free_range` was moved back where the data is: the next frame sets the plot to it.
    pub(super) push_range: bool,
}

impl GraphCache {
    /// Drops the cached lines so the next frame rebuilds them.
    pub(crate) fn invalidate(&mut self) {
        self.key = None;
    }

    pub(super) fn get(
        &mut self,
        key: CacheKey,
        build: impl FnOnce() -> DeviceLines,
    ) -> &mut DeviceLines {
        if self.key.as_ref() != Some(&key) {
            self.drawn = build();
            self.key = Some(key);
        }
        &mut self.drawn
    }
}
