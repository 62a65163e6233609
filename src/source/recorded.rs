//! Snapshots built beforehand (from nvidia-smi logs, by [`crate::source::nvidia_smi`]) as a source: each
//! sample is the next one, whatever moment is asked for, and the source then ends.

use super::traits::{GpuSource, SourceError};
use crate::model::{Snapshot, SourceInfo, UnixMs};

/// Snapshots handed out in order, then [`SourceError::Ended`].
pub(crate) struct Snapshots {
    left: std::vec::IntoIter<Snapshot>,
    info: SourceInfo,
}

impl Snapshots {
    /// `snaps` in order, described as `info`.
    pub(crate) fn new(snaps: Vec<Snapshot>, info: SourceInfo) -> Self {
        Self {
            left: snaps.into_iter(),
            info,
        }
    }
}

impl GpuSource for Snapshots {
    fn info(&self) -> SourceInfo {
        self.info.clone()
    }

    fn sample(&mut self, _now_ms: UnixMs) -> Result<Snapshot, SourceError> {
        self.left.next().ok_or(SourceError::Ended)
    }
}
