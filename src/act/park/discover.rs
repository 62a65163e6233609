//! Parked processes that the NVIDIA driver no longer lists: a process parked by another
//! vramwarden (or NVIDIA's `cuda-checkpoint`) holds no GPU memory, so NVML does not name it.
//! Processes with a GPU device file open are asked the driver's checkpoint state.

use std::time::Duration;

use super::cuda::{CudaCheckpoint, CudaState};
use crate::model::{Origin, ParkInfo, ParkState, ProcessSample, Snapshot};

/// Processes that hold a GPU, read from `/proc` (others' processes are seen only by root):
/// with `/dev/nvidiaN` open (N: the first such file found), or with the CUDA driver library
/// mapped but no GPU file open (None: a parked process, whose device files the driver's
/// checkpoint closed, which says no GPU).
fn gpu_device_holders() -> Vec<(u32, Option<u32>)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| match gpu_file_of(pid) {
            Some(n) => Some((pid, Some(n))),
            None => maps_cuda_driver(pid).then_some((pid, None)),
        })
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

/// True when `pid` has the CUDA driver library (`libcuda.so…`) mapped.
fn maps_cuda_driver(pid: u32) -> bool {
    use std::io::BufRead;
    let Ok(f) = std::fs::File::open(format!("/proc/{pid}/maps")) else {
        return false;
    };
    std::io::BufReader::new(f)
        .lines()
        .take(1_000_000)
        .map_while(Result::ok)
        .any(|l| maps_line_is_cuda_driver(&l))
}

/// True for a `/proc/PID/maps` line that maps the CUDA driver library.
fn maps_line_is_cuda_driver(line: &str) -> bool {
    line.rsplit('/')
        .next()
        .is_some_and(|file| file.starts_with("libcuda.so"))
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
pub(crate) fn add_unlisted_parked(snap: &mut Snapshot, limit: Duration) -> bool {
    let listed: std::collections::HashSet<u32> = snap.processes.iter().map(|p| p.pid).collect();
    // A parked process says no GPU: on a machine with one, it is that one; elsewhere it is
    // not listed rather than listed on a GPU it may not be on.
    let only_gpu = match snap.devices.as_slice() {
        [d] => Some(d.index),
        _ => None,
    };
    let candidates: Vec<(u32, u32)> = gpu_device_holders()
        .into_iter()
        .filter(|(pid, _)| !listed.contains(pid) && *pid != std::process::id())
        .filter_map(|(pid, gpu)| Some((pid, gpu.or(only_gpu)?)))
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

#[cfg(test)]
mod tests {
    use super::maps_line_is_cuda_driver;

    #[test]
    fn the_cuda_driver_library_is_told_from_the_runtime_and_others() {
        let line =
            |path: &str| format!("7f3a2c000000-7f3a2c200000 r-xp 00000000 08:01 1234  {path}");
        assert!(maps_line_is_cuda_driver(&line(
            "/usr/local/nvidia/lib64/libcuda.so.580.159.04"
        )));
        assert!(maps_line_is_cuda_driver(&line(
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
        )));
        for other in [
            "/opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13",
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580",
            "/dev/nvidia0",
            "[heap]",
        ] {
            assert!(!maps_line_is_cuda_driver(&line(other)), "{other}");
        }
    }
}
