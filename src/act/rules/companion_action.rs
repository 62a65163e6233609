//! The transport of the actions that go through a process's `vramwarden_torch` companion
//! ([`Action::ReleaseCache`](super::Action::ReleaseCache) and
//! [`Action::LimitMemory`](super::Action::LimitMemory)): find its socket, connect with the
//! client's peer checks (the kernel's peer pid is the target's, its uid is ours unless we are
//! root, its start time is the one the rule saw, its hello agrees), ask, and put the answer in
//! words for the activity log. The policy (dry run, protected list, other users, simulated or
//! recorded processes) and the runner's own identity check come first, in
//! [`super::action::ActionRunner::run`].

use std::path::PathBuf;

use crate::act::torch::release::connect;
use crate::act::torch::{Release, TorchError};
use crate::model::outcome::Outcome;
use crate::model::{UnixMs, GIB, MIB};

/// The words of the refusal when a process has no companion to ask.
pub const NO_COMPANION: &str = "no vramwarden_torch companion in this process";

/// What a companion action came to: its outcome and the words for the activity log.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Acted, failed, or skipped (no companion, or the peer is not the process the rule saw).
    pub outcome: Outcome,
    /// What happened, in words.
    pub detail: String,
    /// For a release that went through: the bytes PyTorch says it gave back (all devices).
    pub freed_bytes: Option<u64>,
}

impl Answer {
    /// An answer that freed nothing.
    fn new(outcome: Outcome, detail: String) -> Self {
        Self {
            outcome,
            detail,
            freed_bytes: None,
        }
    }

    fn err(e: &TorchError) -> Self {
        let outcome = match e {
            // Not the process the rule saw (or not ours to talk to): nothing was asked.
            TorchError::PidMismatch { .. }
            | TorchError::ForeignUser { .. }
            | TorchError::StartTimeMismatch { .. }
            | TorchError::HelloMismatch { .. }
            | TorchError::NoCompanion { .. }
            | TorchError::NoRuntimeDir => Outcome::Skipped,
            _ => Outcome::Failed,
        };
        let detail = match e {
            TorchError::NoCompanion { .. } | TorchError::NoRuntimeDir => {
                format!("{NO_COMPANION} ({e})")
            }
            _ => e.to_string(),
        };
        Self {
            outcome,
            detail,
            freed_bytes: None,
        }
    }
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / MIB as f64)
}

/// "; 99.8 % of the releasable cache; the driver saw 69 212.0 MiB come free on the device",
/// from what the companion measured (empty when it measured neither).
pub(crate) fn release_extras(d: &crate::act::torch::protocol::DeviceRelease) -> String {
    let mut s = String::new();
    if let Some(share) = d.released_share() {
        s.push_str(&format!("; {:.1} % of the releasable cache", share * 100.0));
    }
    if let Some(freed) = d.driver_freed_bytes() {
        s.push_str(&format!(
            "; the driver saw {} come free on the device",
            mib(freed)
        ));
    }
    s
}

/// The release's answer in words: per device, reserved before → after (PyTorch's figures).
fn describe_release(who: &str, r: &Release) -> String {
    if r.devices.is_empty() {
        return format!("{who}: its allocator uses no GPU yet, so there was nothing to release");
    }
    let freed: u64 = r.devices.iter().map(|d| d.freed_bytes()).sum();
    let per_dev = r
        .devices
        .iter()
        .map(|d| {
            format!(
                "cuda:{} reserved {} → {} (allocated {}){}",
                d.device,
                mib(d.reserved_before_bytes),
                mib(d.reserved_after_bytes),
                mib(d.allocated_bytes),
                release_extras(d)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "released {} of cached memory from {who}: {per_dev} (PyTorch's figures; the driver's follows with the next sample)",
        mib(freed)
    )
}

/// Asks the companion of `pid` (which must have started at `start_time_ms`) to release its
/// cache. `who` names the target in the answer.
pub fn release(dirs: &[PathBuf], pid: u32, start_time_ms: UnixMs, who: &str) -> Answer {
    match crate::act::torch::release(dirs, pid, Some(start_time_ms)) {
        Ok(r) => Answer {
            outcome: Outcome::Acted,
            detail: describe_release(who, &r),
            freed_bytes: Some(r.devices.iter().map(|d| d.freed_bytes()).sum()),
        },
        Err(e) => Answer::err(&e),
    }
}

/// The GPU a limit is for, as the app knows it from the driver.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitGpu {
    /// NVML index.
    pub index: u32,
    /// NVML uuid (`GPU-…`), to find torch's own index for it.
    pub uuid: String,
    /// Total memory (bytes).
    pub total_bytes: u64,
}

/// Sets the memory fraction of `pid` (started at `start_time_ms`) on `gpu` to `gib` / the GPU's
/// total, through its companion. torch's device is the one whose uuid is the GPU's (or the only
/// one the allocator uses, when torch gives no uuid).
pub fn limit(
    dirs: &[PathBuf],
    pid: u32,
    start_time_ms: UnixMs,
    gpu: &LimitGpu,
    gib: f64,
    who: &str,
) -> Answer {
    let fraction = match fraction_of(gib, gpu) {
        Ok(f) => f,
        Err(a) => return a,
    };
    let mut c = match connect(dirs, pid, Some(start_time_ms)) {
        Ok(c) => c,
        Err(e) => return Answer::err(&e),
    };
    let stats = match c.stats() {
        Ok(s) => s,
        Err(e) => return Answer::err(&e),
    };
    let Some(dev) = torch_device_of(&stats.devices, gpu) else {
        return Answer::new(
            Outcome::Failed,
            format!(
                "{who}: PyTorch does not use GPU {} ({}) in this process (it uses {} device(s)), so no limit was set",
                gpu.index,
                gpu.uuid,
                stats.devices.len()
            ),
        );
    };
    let (cuda, reserved) = (dev.device, dev.reserved_bytes);
    match c.set_fraction(cuda, fraction) {
        Ok(set) => {
            let over = if reserved as f64 > gib * GIB as f64 {
                format!(
                    "; it already holds {} reserved, more than the limit: its next allocation past the limit raises its own out-of-memory error",
                    mib(reserved)
                )
            } else {
                String::new()
            };
            Answer::new(
                Outcome::Acted,
                format!(
                    "limited {who} to {gib} GiB on GPU {} (cuda:{cuda}, memory fraction {:.4} of {:.1} GiB){over}",
                    gpu.index,
                    set.fraction,
                    gpu.total_bytes as f64 / GIB as f64
                ),
            )
        }
        Err(e) => Answer::err(&e),
    }
}

/// The memory fraction of `gpu` that `gib` is, or the answer that refuses it: not a size,
/// or more than the GPU holds.
fn fraction_of(gib: f64, gpu: &LimitGpu) -> Result<f64, Answer> {
    if !(gib.is_finite() && gib > 0.0) || gpu.total_bytes == 0 {
        return Err(Answer::new(
            Outcome::Failed,
            format!("a limit of {gib} GiB cannot be set"),
        ));
    }
    let fraction = gib * GIB as f64 / gpu.total_bytes as f64;
    if fraction > 1.0 {
        return Err(Answer::new(
            Outcome::Skipped,
            format!(
                "{gib} GiB is more than GPU {}'s {:.1} GiB: nothing to limit",
                gpu.index,
                gpu.total_bytes as f64 / GIB as f64
            ),
        ));
    }
    Ok(fraction)
}

/// torch's device for `gpu`: the one with its uuid, or the only one the allocator uses
/// when torch gives no uuid.
fn torch_device_of<'a>(
    devices: &'a [crate::act::torch::protocol::DeviceStats],
    gpu: &LimitGpu,
) -> Option<&'a crate::act::torch::protocol::DeviceStats> {
    devices
        .iter()
        .find(|d| d.uuid.as_deref() == Some(gpu.uuid.as_str()))
        .or_else(|| match devices {
            [only] if only.uuid.is_none() => Some(only),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::torch::DeviceRelease;

    #[test]
    fn release_answer_names_before_and_after_per_device() {
        let r = Release {
            devices: vec![DeviceRelease {
                device: 0,
                reserved_before_bytes: 71_042 * MIB,
                reserved_after_bytes: 1_830 * MIB,
                allocated_bytes: 1_829 * MIB,
                allocated_before_bytes: Some(1_829 * MIB),
                device_free_before_bytes: Some(70_000 * MIB),
                device_free_after_bytes: Some(139_000 * MIB),
            }],
        };
        let s = describe_release("bloat (PID 454)", &r);
        assert!(s.starts_with("released 69212.0 MiB of cached memory from bloat (PID 454)"));
        assert!(s.contains("cuda:0 reserved 71042.0 MiB → 1830.0 MiB (allocated 1829.0 MiB)"));
        // 69 212 of the 69 213 MiB releasable; the driver's count of the same moment.
        assert!(s.contains("; 100.0 % of the releasable cache"), "{s}");
        assert!(
            s.contains("the driver saw 69000.0 MiB come free on the device"),
            "{s}"
        );
        assert!(s.contains("PyTorch's figures"));
        let none = describe_release("x", &Release::default());
        assert!(none.contains("nothing to release"), "{none}");
    }

    #[test]
    fn a_missing_socket_is_the_no_companion_refusal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = release(&[dir.path().to_path_buf()], 4242, 1, "p");
        assert_eq!(a.outcome, Outcome::Skipped);
        assert!(a.detail.starts_with(NO_COMPANION), "{}", a.detail);
        let gpu = LimitGpu {
            index: 0,
            uuid: "GPU-x".into(),
            total_bytes: 80 * GIB,
        };
        let a = limit(&[dir.path().to_path_buf()], 4242, 1, &gpu, 8.0, "p");
        assert_eq!(a.outcome, Outcome::Skipped);
        assert!(a.detail.starts_with(NO_COMPANION), "{}", a.detail);
        // A limit above the GPU's size is refused before any socket is looked for.
        let a = limit(&[dir.path().to_path_buf()], 4242, 1, &gpu, 81.0, "p");
        assert_eq!(a.outcome, Outcome::Skipped);
        assert!(a.detail.contains("nothing to limit"), "{}", a.detail);
    }
}
