//! What must hold before a process is parked or resumed, said in words before anything is
//! asked of the driver: the machine, the host memory the GPU memory needs, and the known
//! hazards of the driver's checkpoint API (NVIDIA/cuda-checkpoint's issues).

use crate::model::{GIB, MIB};

/// Host memory kept free beyond the process's GPU memory when it is parked: 2 GiB, or 5 %
/// of the parked bytes if more.
fn host_margin(bytes: u64) -> u64 {
    (2 * GIB).max(bytes / 20)
}

/// Bytes from `/proc/meminfo`'s `MemAvailable` line.
fn mem_available(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kb| kb.trim().parse::<u64>().ok())
        .map(|kb| kb.saturating_mul(1024))
}

/// What the host offers now (read from `/proc/meminfo`).
pub(crate) fn host_available() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| mem_available(&m))
}

/// What a park would touch, gathered by the caller from the latest sample and `/proc`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ParkFacts {
    /// GPU memory the process holds (the driver's figure), if known.
    pub gpu_bytes: Option<u64>,
    /// How many GPUs list the process.
    pub gpus: usize,
    /// The GPU is a MIG instance.
    pub mig: bool,
    /// Host memory available now (`MemAvailable`).
    pub host_available: Option<u64>,
    /// The process's mapped libraries (from `/proc/PID/maps`), file names only.
    pub libraries: Vec<String>,
    /// The process is one rank of a distributed job (`WORLD_SIZE` > 1 in its environment).
    pub distributed: bool,
}

/// Why a park may not go ahead, or what to warn about when it does.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Verdict {
    /// Reasons to refuse (empty: it may go ahead).
    pub refusals: Vec<String>,
    /// Hazards to say alongside.
    pub warnings: Vec<String>,
}

/// The checks of a park of a process with `facts`.
pub(crate) fn check_park(facts: &ParkFacts) -> Verdict {
    let mut v = Verdict::default();
    if !cfg!(target_arch = "x86_64") {
        v.refusals
            .push("the driver's checkpoint API is offered on x86_64 Linux only".into());
    }
    if facts.mig {
        v.refusals.push(
            "the process runs on a MIG instance, which the checkpoint API does not support".into(),
        );
    }
    if facts.gpus > 1 {
        v.refusals.push(format!(
            "the process uses {} GPUs; parking multi-GPU processes can hang the driver (NVIDIA/cuda-checkpoint#30, #45)",
            facts.gpus
        ));
    }
    if facts.distributed {
        v.refusals.push(
            "the process is one rank of a distributed job (WORLD_SIZE > 1): the driver cannot checkpoint NCCL communicators and locking one rank hangs the others (NVIDIA/cuda-checkpoint#30, #45)"
                .into(),
        );
    } else if facts.libraries.iter().any(|l| l.starts_with("libnccl")) {
        v.warnings.push(
            "NCCL is loaded (PyTorch always loads it); a job with an NCCL communicator cannot be parked".into(),
        );
    }
    match (facts.gpu_bytes, facts.host_available) {
        (Some(b), Some(avail)) if avail < b.saturating_add(host_margin(b)) => v.refusals.push(format!(
            "not enough host memory: parking needs {:.1} GiB (its GPU memory) + {:.1} GiB margin, {:.1} GiB is available",
            b as f64 / GIB as f64,
            host_margin(b) as f64 / GIB as f64,
            avail as f64 / GIB as f64
        )),
        (_, None) => v
            .warnings
            .push("the host's available memory could not be read".into()),
        _ => {}
    }
    if facts.gpu_bytes.is_some_and(|b| b < MIB) {
        v.warnings
            .push("the process holds almost no GPU memory: parking frees little".into());
    }
    v
}

/// GPU memory kept free beyond a parked process's memory when it is restored: 1 GiB or 3 %
/// of the GPU, whichever is more (a restore that runs out of GPU memory loses the process's
/// GPU state for good: NVIDIA/cuda-checkpoint#44).
pub(crate) fn room_margin(total_bytes: u64) -> u64 {
    GIB.max(total_bytes / 100 * 3)
}

/// Whether a GPU with `free` of `total` bytes free has room to restore `bytes`, or why not
/// (nothing is asked of the driver then, and the process stays parked, its memory safe).
///
/// # Errors
/// The refusal, in words.
pub(crate) fn check_room(free: u64, total: u64, bytes: u64) -> Result<(), String> {
    let need = bytes.saturating_add(room_margin(total));
    if free >= need {
        return Ok(());
    }
    Err(format!(
        "not enough free GPU memory to restore it: {:.1} GiB free, {:.1} GiB needed (its {:.1} GiB + a {:.1} GiB margin); it stays parked, its memory safe in host memory (free GPU memory, then resume again)",
        free as f64 / GIB as f64,
        need as f64 / GIB as f64,
        bytes as f64 / GIB as f64,
        room_margin(total) as f64 / GIB as f64
    ))
}

/// True when `pid`'s environment says it is one of several ranks (`WORLD_SIZE` > 1, as
/// torchrun, DeepSpeed and Horovod set it). False where it cannot be read.
pub(crate) fn is_distributed(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| {
            env.split(|b| *b == 0).any(|kv| {
                kv.strip_prefix(b"WORLD_SIZE=")
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.trim().parse::<u32>().ok())
                    .is_some_and(|n| n > 1)
            })
        })
        .unwrap_or(false)
}

/// The file names of the libraries mapped by `pid` (empty where unreadable).
pub(crate) fn mapped_libraries(pid: u32) -> Vec<String> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let mut libs: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter_map(|p| p.rsplit('/').next())
        .filter(|n| n.contains(".so"))
        .map(str::to_string)
        .collect();
    libs.sort();
    libs.dedup();
    libs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_for_a_restore_is_its_memory_plus_the_larger_of_1_gib_and_3_percent() {
        assert_eq!(room_margin(16 * GIB), GIB);
        assert_eq!(room_margin(80 * GIB), 80 * GIB / 100 * 3);
        // 80 GiB: a 2.4 GiB margin.
        assert!(check_room(42 * GIB, 80 * GIB, 40 * GIB).is_err());
        assert!(check_room(43 * GIB, 80 * GIB, 40 * GIB).is_ok());
        let why = check_room(0, 80 * GIB, 10 * GIB).expect_err("no room");
        assert!(
            why.contains("stays parked") && why.contains("0.0 GiB free"),
            "{why}"
        );
    }

    fn facts(gpu_gib: u64, host_gib: u64) -> ParkFacts {
        ParkFacts {
            gpu_bytes: Some(gpu_gib * GIB),
            gpus: 1,
            mig: false,
            host_available: Some(host_gib * GIB),
            libraries: vec!["libcuda.so.1".into()],
            distributed: false,
        }
    }

    #[test]
    fn enough_host_memory_goes_ahead() {
        let v = check_park(&facts(10, 64));
        assert!(v.refusals.is_empty(), "{v:?}");
    }

    #[test]
    fn too_little_host_memory_is_refused_with_the_figures() {
        let v = check_park(&facts(10, 11));
        assert_eq!(v.refusals.len(), 1);
        assert!(v.refusals[0].contains("10.0 GiB"), "{}", v.refusals[0]);
        assert!(
            v.refusals[0].contains("11.0 GiB is available"),
            "{}",
            v.refusals[0]
        );
    }

    #[test]
    fn a_distributed_rank_several_gpus_and_mig_are_refused() {
        let mut f = facts(1, 64);
        f.distributed = true;
        f.gpus = 2;
        f.mig = true;
        let v = check_park(&f);
        assert_eq!(v.refusals.len(), 3, "{v:?}");
    }

    /// The refusals are decided without the mapped libraries, so a check made only for its
    /// refusals (the guard's list of what it may not park) does not read the memory map.
    #[test]
    fn the_refusals_do_not_depend_on_the_mapped_libraries() {
        for (gpu_gib, host_gib, distributed, gpus) in [
            (10, 64, false, 1),
            (10, 11, false, 1),
            (1, 64, true, 1),
            (1, 64, false, 2),
        ] {
            let mut with = facts(gpu_gib, host_gib);
            with.distributed = distributed;
            with.gpus = gpus;
            with.libraries = vec!["libnccl.so.2".into(), "libcuda.so.1".into()];
            let without = ParkFacts {
                libraries: Vec::new(),
                ..with.clone()
            };
            assert_eq!(
                check_park(&with).refusals,
                check_park(&without).refusals,
                "{with:?}"
            );
        }
    }

    #[test]
    fn nccl_loaded_alone_is_a_warning() {
        let mut f = facts(1, 64);
        f.libraries.push("libnccl.so.2".into());
        let v = check_park(&f);
        assert!(v.refusals.is_empty(), "{v:?}");
        assert_eq!(v.warnings.len(), 1, "{v:?}");
    }

    #[test]
    fn meminfo_is_read_in_bytes() {
        let m = "MemTotal:       131072000 kB\nMemAvailable:   1024 kB\n";
        assert_eq!(mem_available(m), Some(1024 * 1024));
        assert_eq!(mem_available("garbage"), None);
    }

    #[test]
    fn this_process_maps_libc() {
        let libs = mapped_libraries(std::process::id());
        assert!(libs.iter().any(|l| l.starts_with("libc")), "{libs:?}");
    }
}
