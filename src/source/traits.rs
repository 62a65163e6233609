//! What every source is: the [`GpuSource`] trait, its [`SourceError`], and the host's name a
//! source reports. The sources (and [`super::SourceKind`], which picks one) build on it.

use crate::model::{Snapshot, SourceInfo, UnixMs};

/// Why a source could not start or could not take a sample.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SourceError {
    /// The NVIDIA management library could not be loaded or initialised.
    #[error("{0}")]
    Unavailable(String),
    /// A sample could not be taken at all.
    #[error("sampling failed: {0}")]
    Sample(String),
    /// A recorded source has no more samples.
    #[error("the recording has no more samples")]
    Ended,
}

/// Something that can be asked for a [`Snapshot`] of every GPU and process.
pub trait GpuSource: Send {
    /// Driver and library versions, fixed for the life of the source.
    fn info(&self) -> SourceInfo;
    /// Takes one sample. `now_ms` is the moment it stands for (the simulator computes the state
    /// at that time; the driver source stamps its reading with it).
    fn sample(&mut self, now_ms: UnixMs) -> Result<Snapshot, SourceError>;
    /// Whether per-process utilisation is wanted (it can be costly to read; only rules with
    /// an idle condition need it). Sources that have it for free ignore this.
    fn set_process_utilization(&mut self, _on: bool) {}
    /// What a recorded source says happened up to `until` (the leak and OOM events of a
    /// reopened session), oldest first, each once. Live sources have none: the engine
    /// detects such events itself.
    fn recorded_events(&mut self, _until: UnixMs) -> Vec<crate::session::Event> {
        Vec::new()
    }
    /// A sample of this source that the engine no longer needs, handed back to be dropped
    /// where the source likes (a replay drops it on the thread that made it, so the shared
    /// process facts' reference counts never move between cores). Dropped here by default.
    fn give_back(&mut self, _snap: Snapshot) {}
}

/// The host's name, for session headers and the status bar.
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
