//! Parked processes that the NVIDIA driver no longer lists: a process parked by another
//! vramwarden (or NVIDIA's `cuda-checkpoint`) holds no GPU memory, so NVML does not name it.
//! Processes with a GPU device file open are asked the driver's checkpoint state.

use std::time::Duration;

use super::cuda::{CudaCheckpoint, CudaState};
use crate::model::{Origin, ParkInfo, ParkState, ProcessSample, Snapshot};

/// Processes with `/dev/nvidiaN` open, with N (the first such file found), read from
/// `/proc/*/fd` (others' processes are seen only by root).
pub fn gpu_device_holders() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| gpu_file_of(pid).map(|n| (pid, n)))
        .collect()
}

fn gpu_file_of(pid: u32) -> Option<u32> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    fds.flatten().take(65_536).find_map(|fd| {
        let target = std::fs::read_link(fd.path()).ok()?;
        target
            .to_str()?
            .strip_prefix("/dev/nvidia")?
            .parse::<u32>()
            .ok()
    })
}

/// The state for a parked process of `state` (None: it runs).
fn park_state(state: CudaState) -> Option<ParkState> {
    match state {
        CudaState::Running => None,
        CudaState::Checkpointed => Some(ParkState::Parked),
        CudaState::Locked => Some(ParkState::Locked),
        CudaState::Failed | CudaState::Other(_) => Some(ParkState::Failed),
    }
}

/// Adds to `snap` the processes with a GPU open that the driver did not list and whose
/// checkpoint state is not "running" (each with 0 bytes on its GPU and its park state).
/// Gives up after `limit` (a state query can block while a related process is locked:
/// NVIDIA/cuda-checkpoint#30); returns false then.
pub fn add_unlisted_parked(snap: &mut Snapshot, limit: Duration) -> bool {
    let listed: std::collections::HashSet<u32> = snap.processes.iter().map(|p| p.pid).collect();
    let candidates: Vec<(u32, u32)> = gpu_device_holders()
        .into_iter()
        .filter(|(pid, _)| !listed.contains(pid) && *pid != std::process::id())
        .collect();
    if candidates.is_empty() {
        return true;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("vramwarden-park-discover".into())
        .spawn(move || {
            let found: Vec<(u32, u32, ParkState)> = match CudaCheckpoint::load() {
                Ok(api) => candidates
                    .into_iter()
                    .filter_map(|(pid, gpu)| Some((pid, gpu, park_state(api.state(pid).ok()?)?)))
                    .collect(),
                Err(_) => Vec::new(),
            };
            let _ = tx.send(found);
        });
    if spawned.is_err() {
        return false;
    }
    let Ok(found) = rx.recv_timeout(limit) else {
        return false;
    };
    for (pid, gpu, state) in found {
        snap.processes.push(ProcessSample {
            pid,
            device_index: gpu,
            used_bytes: Some(0),
            origin: Origin::Live,
            parked: Some(ParkInfo {
                state,
                bytes: None,
                since_ms: snap.taken_at_ms,
            }),
            ..ProcessSample::default()
        });
    }
    true
}
