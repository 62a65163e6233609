//! Where snapshots come from: the real driver ([`nvml::NvmlSource`]), simulated GPUs
//! ([`sim::SimSource`]), or a recorded session ([`replay::ReplaySource`]). Sources are the
//! only code that talks to the driver. [`SourceKind`] is the one place a live source is
//! chosen: a new source is its module here, its variant (and line in [`SourceKind::open`]),
//! and the command-line flag that picks it (`front/cli/args.rs`).

pub mod fault;
pub(crate) mod nvidia_smi;
pub mod nvml;
pub mod recorded;
pub mod replay;
pub mod sim;
pub(crate) mod traits;

pub(crate) use traits::host_name;
pub use traits::{GpuSource, SourceError};

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
            let fleet = Self::fleet_of(&v);
            if fleet.is_none() {
                tracing::warn!(
                    "VRAMWARDEN_DEMO_FLEET={v:?} is not GPUSxPROCESSES (1 to 64 GPUs, at most 10000 processes; e.g. 8x200): the demo's own GPUs are shown"
                );
            }
            fleet
        });
        Self::Sim { fleet }
    }

    /// `8x200` as (8, 200), within 1..=64 GPUs and 10 000 processes.
    fn fleet_of(v: &str) -> Option<(u32, u32)> {
        let (g, p) = v.split_once('x')?;
        let (g, p) = (g.trim().parse::<u32>().ok()?, p.trim().parse::<u32>().ok()?);
        ((1..=64).contains(&g) && p <= 10_000).then_some((g, p))
    }

    /// The simulated GPUs when `demo` (`--demo`, the window's "Start the demo"), else the
    /// NVIDIA driver.
    pub(crate) fn from_demo_flag(demo: bool) -> Self {
        if demo {
            Self::demo()
        } else {
            Self::Nvml
        }
    }

    /// True for simulated GPUs (nothing acts on their processes; the window says "demo").
    pub(crate) fn is_simulated(self) -> bool {
        matches!(self, Self::Sim { .. })
    }

    /// The simulated GPUs starting at `start_ms` (the fleet asked for, else the demo's day)
    /// for a run on a simulated clock.
    pub(crate) fn simulated(self, start_ms: crate::model::UnixMs) -> sim::SimSource {
        match self {
            Self::Sim {
                fleet: Some((gpus, procs)),
            } => sim::SimSource::fleet(start_ms, gpus, procs),
            _ => sim::SimSource::demo_day(start_ms),
        }
    }

    /// Opens the source.
    ///
    /// # Errors
    /// When the driver cannot be loaded.
    pub fn open(self) -> Result<Box<dyn GpuSource>, SourceError> {
        Ok(match self {
            Self::Nvml => Box::new(nvml::NvmlSource::new()?),
            Self::Sim { .. } => Box::new(self.simulated(crate::model::now_ms())),
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
        assert_eq!(SourceKind::fleet_of("8x200"), Some((8, 200)));
        for bad in ["0x0", "x", "65x100", "999999x999999", "8x"] {
            assert_eq!(SourceKind::fleet_of(bad), None, "{bad}");
        }
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
