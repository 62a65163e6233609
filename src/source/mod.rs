//! Where snapshots come from: the real driver ([`nvml::NvmlSource`]), simulated GPUs
//! ([`sim::SimSource`]), or a recorded session ([`replay::ReplaySource`]). Sources are the
//! only code that talks to the driver. [`SourceKind`] is the one place a live source is
//! chosen: a new source is its module here, its variant (and line in [`SourceKind::open`]),
//! and the command-line flag that picks it (`front/cli/args.rs`).

pub mod fault;
pub mod nvidia_smi;
pub mod nvml;
pub mod recorded;
pub mod replay;
pub mod sim;

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
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Opens a source (on the sampler thread: NVML init can itself be slow).
pub type SourceFactory = Box<dyn FnOnce() -> Result<Box<dyn GpuSource>, SourceError> + Send>;

/// Which live source a run samples: chosen once (from the command line, or the window's
/// "Start the demo"), then carried as is by every front end. A recorded session (replay)
/// and nvidia-smi logs (import) are sources too, opened from their files by the commands
/// that read them ([`replay::ReplaySource`], [`recorded::Snapshots`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceKind {
    /// The NVIDIA driver, through NVML.
    #[default]
    Nvml,
    /// Simulated GPUs ([`sim::SimSource`]): a demo day, or, with `fleet`, a server of that
    /// many GPUs and processes.
    Sim {
        /// GPUs and processes.
        fleet: Option<(u32, u32)>,
    },
}

impl SourceKind {
    /// The simulated GPUs (`--demo`); `VRAMWARDEN_DEMO_FLEET=8x200` makes them a server of
    /// 8 GPUs and 200 processes (for trying the window and the agent at that size).
    pub fn demo() -> Self {
        let fleet = std::env::var("VRAMWARDEN_DEMO_FLEET").ok().and_then(|v| {
            let (g, p) = v.split_once('x')?;
            let (g, p) = (g.trim().parse::<u32>().ok()?, p.trim().parse::<u32>().ok()?);
            ((1..=64).contains(&g) && p <= 10_000).then_some((g, p))
        });
        Self::Sim { fleet }
    }

    /// The simulated GPUs when `demo` (`--demo`, the window's "Start the demo"), else the
    /// NVIDIA driver.
    pub fn from_demo_flag(demo: bool) -> Self {
        if demo {
            Self::demo()
        } else {
            Self::Nvml
        }
    }

    /// True for simulated GPUs (nothing acts on their processes; the window says "demo").
    pub fn is_simulated(self) -> bool {
        matches!(self, Self::Sim { .. })
    }

    /// Opens the source.
    ///
    /// # Errors
    /// When the driver cannot be loaded.
    pub fn open(self) -> Result<Box<dyn GpuSource>, SourceError> {
        Ok(match self {
            Self::Nvml => Box::new(nvml::NvmlSource::new()?),
            Self::Sim {
                fleet: Some((gpus, procs)),
            } => Box::new(sim::SimSource::fleet(crate::model::now_ms(), gpus, procs)),
            Self::Sim { fleet: None } => Box::new(sim::SimSource::demo_day(crate::model::now_ms())),
        })
    }

    /// [`SourceKind::open`], to be called later on another thread.
    pub fn factory(self) -> SourceFactory {
        Box::new(move || self.open())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_kind_opens_its_source() {
        assert_eq!(SourceKind::from_demo_flag(false), SourceKind::Nvml);
        assert!(SourceKind::from_demo_flag(true).is_simulated());
        assert!(!SourceKind::Nvml.is_simulated());
        let fleet = SourceKind::Sim {
            fleet: Some((3, 12)),
        };
        let mut s = fleet.factory()().expect("the simulator always opens");
        let snap = s.sample(crate::model::now_ms()).expect("sample");
        assert_eq!(snap.devices.len(), 3);
        let day = SourceKind::Sim { fleet: None }.open().expect("open");
        assert_ne!(day.info().kind, "");
    }
}
