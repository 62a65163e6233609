//! The guard's state per GPU and the steps it asks for: plain data, which the guard
//! ([`super::Guard`]), its ladder ([`super::ladder`]) and its resume checks
//! ([`super::resume`]) share.

use std::collections::{HashMap, VecDeque};

use super::status::{GuardStatus, StepKind, StepRecord};
use super::steady;
use crate::model::history::ProcSeriesKey;
use crate::model::{UnixMs, GIB};

/// A step the guard asks the engine to start.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The GPU it is for.
    pub gpu: u32,
    /// Which step.
    pub kind: StepKind,
    /// The process.
    pub key: ProcSeriesKey,
    /// "python (PID 42)".
    pub who: String,
    /// The memory it moves or frees.
    pub bytes: u64,
    /// Seconds it is expected to need.
    pub needs_s: f64,
    /// The GPU's time to full when it was decided (None: nothing grows).
    pub full_in_s: Option<f64>,
    /// How fast the target grew when it was decided (bytes/s; 0 when it did not).
    pub rate_bytes_s: f64,
    /// Started to make room for a grower the guard paused (nothing grows meanwhile).
    pub for_paused: bool,
}

impl Step {
    /// Why it starts, in words, for the activity and session logs.
    pub fn reason(&self) -> String {
        let full = match self.full_in_s {
            Some(s) => format!(
                "GPU {} full in {}",
                self.gpu,
                crate::model::format::duration((s * 1000.0) as i64)
            ),
            None if self.for_paused => "room for the paused grower".to_string(),
            None => "no growth".to_string(),
        };
        // A pause's time is its lock's, which stops the growth; the park that moves the
        // memory out goes on after it (the executor says how long).
        let needs = if self.kind == StepKind::PauseGrower {
            format!("its growth stops in ~{:.0} s", self.needs_s)
        } else {
            format!("needs ~{:.0} s", self.needs_s)
        };
        format!(
            "{}: {} ({:.1} GiB, {needs})",
            full,
            self.kind.label(),
            self.bytes as f64 / GIB as f64,
        )
    }
}

/// A step started and not yet ended.
#[derive(Debug, Clone)]
pub(super) struct InFlight {
    pub(super) key: ProcSeriesKey,
    pub(super) kind: StepKind,
    /// Memory it frees when done (negative: a resume takes it).
    pub(super) gain: f64,
    /// When it should end, by its expected time.
    pub(super) due_ms: UnixMs,
    /// When it is given up for lost if no end has come.
    pub(super) ends_ms: UnixMs,
    pub(super) step: Step,
}

/// A process the guard parked.
#[derive(Debug, Clone)]
pub(super) struct ParkedEntry {
    pub(super) key: ProcSeriesKey,
    pub(super) who: String,
    pub(super) bytes: u64,
    /// Its growth when it was paused (0: it was idle).
    pub(super) grower_rate: f64,
    pub(super) since_ms: UnixMs,
    /// Times it was paused as the grower.
    pub(super) pauses: u32,
}

/// The guard's state on one GPU.
#[derive(Debug, Default)]
pub(super) struct GpuState {
    pub(super) in_flight: Vec<InFlight>,
    /// Targets tried: refused ones are not asked again for [`RETRY_MS`], dry-run ones not
    /// until the episode ends (nothing grows on the GPU).
    pub(super) tried: HashMap<(ProcSeriesKey, StepKind), (UnixMs, bool)>,
    /// Times each process was paused as the grower.
    pub(super) pauses: HashMap<ProcSeriesKey, u32>,
    /// Each process's last samples (the growth the guard acts on).
    pub(super) samples: steady::Recent,
    pub(super) parked: Vec<ParkedEntry>,
    /// Since when the resume of the first waiting process has been safe.
    pub(super) safe_since: Option<(ProcSeriesKey, UnixMs)>,
    pub(super) recent: VecDeque<StepRecord>,
    /// `recent` changed since `status` was made (else the status's copy of it is current).
    pub(super) recent_changed: bool,
    pub(super) status: Option<GuardStatus>,
}
