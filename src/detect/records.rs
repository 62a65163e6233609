//! What the detectors' findings become in the View: leak episodes and OOM suspicions, from a
//! live run or a reopened session.

use crate::model::history::ProcSeriesKey;
use crate::model::UnixMs;

/// Which series a leak belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum LeakKey {
    /// A process on a GPU.
    Process(ProcSeriesKey),
    /// Memory of a GPU that no process accounts for.
    Ghost(u32),
}

/// One leak episode, ongoing or ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LeakRecord {
    /// The series.
    pub key: LeakKey,
    /// What the session log says about it.
    pub info: crate::session::LeakInfo,
    /// When it was flagged.
    pub flagged_ms: UnixMs,
    /// When it ended (None while ongoing).
    pub ended_ms: Option<UnixMs>,
    /// Memory gained since the growth began.
    pub grown_mib: f64,
    /// Highest memory in the episode.
    pub peak_mib: f64,
    /// The session file it comes from (None: this run).
    pub session: Option<std::path::PathBuf>,
    /// The recording ended while it was still growing: `ended_ms` is the session's end, not
    /// the end of the growth.
    pub open_at_end: bool,
}

impl LeakRecord {
    /// Whether the episode is going on at `t` by its detector's verdict: flagged by then and
    /// not yet ended (one still growing when its recording stopped counts up to its last
    /// sample). The one rule the table's Status column and the Leaks tab both follow.
    #[cfg(feature = "gui")]
    pub(crate) fn active_at(&self, t: UnixMs) -> bool {
        self.flagged_ms <= t
            && self
                .ended_ms
                .is_none_or(|e| t < e || (self.open_at_end && t <= e))
    }
}

/// A process that left a nearly full GPU (see [`crate::detect::oom_watch`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OomRecord {
    /// When the process was first missed.
    pub at_ms: UnixMs,
    /// GPU.
    pub device_index: u32,
    /// Highest used / total in the seconds before (percent).
    pub used_pct: f64,
    /// The processes that left.
    pub victims: Vec<crate::session::OomHolder>,
    /// Who held the GPU in the last sample before, largest first.
    pub holders: Vec<crate::session::OomHolder>,
    /// The session file it comes from (None: this run).
    pub session: Option<std::path::PathBuf>,
}
