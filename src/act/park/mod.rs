//! Park and resume: a CUDA process's GPU memory moved to host memory and back through the
//! driver's checkpoint API, without stopping the process (it waits, its CUDA calls blocked,
//! while parked).
//!
//! - [`cuda`]: the driver's entry points, loaded at run time;
//! - [`checks`]: what must hold before a park, in words;
//! - [`estimate`]: how long a park or a resume takes;
//! - [`worker`]: the thread that makes the driver calls, off the engine's tick;
//! - [`Parker`] (here): the book of parked processes, which the engine shows in every sample
//!   (a parked process is no longer listed by NVML) and keeps in step with the driver.
//!
//! The policy (who may be parked, dry run, identity) is the executor's, as for every action:
//! [`crate::act::rules::action`].

pub mod checks;
pub mod cuda;
pub mod discover;
pub mod estimate;
pub mod ledger;
pub mod worker;

use std::time::{Duration, Instant};

use crate::model::history::ProcSeriesKey;
use crate::model::{Origin, ParkInfo, ParkState, ProcessSample, Snapshot, UnixMs};
use worker::{Done, Job, JobKind, Worker};

/// How often the driver is asked for the state of the processes in the book.
const REFRESH: Duration = Duration::from_secs(5);

/// One process in the book.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    key: ProcSeriesKey,
    info: ParkInfo,
}

/// The parked processes and the jobs under way.
#[derive(Default)]
pub(crate) struct Parker {
    worker: Worker,
    book: Vec<Entry>,
    last_refresh: Option<Instant>,
    states_in_flight: bool,
}

impl Parker {
    /// Starts parking `key`, which holds `bytes` (the driver's figure).
    ///
    /// # Errors
    /// When the worker cannot be started (a sentence: the caller only shows it; how the job
    /// ended comes later, by kind, in [`worker::Done::result`]).
    pub(crate) fn park(
        &mut self,
        key: ProcSeriesKey,
        bytes: Option<u64>,
        now: UnixMs,
    ) -> Result<(), String> {
        self.worker.send(Job::Park(key))?;
        self.set(key, ParkState::Parking, bytes, now);
        Ok(())
    }

    /// Starts resuming `key`.
    ///
    /// # Errors
    /// When the worker cannot be started.
    pub(crate) fn resume(&mut self, key: ProcSeriesKey, now: UnixMs) -> Result<(), String> {
        let bytes = self
            .info(&key)
            .and_then(|i| i.bytes)
            .or_else(|| ledger::bytes_of(&key));
        self.worker.send(Job::Resume(key, bytes))?;
        self.set(key, ParkState::Resuming, bytes, now);
        Ok(())
    }

    /// What the book says of `key`.
    pub(crate) fn info(&self, key: &ProcSeriesKey) -> Option<ParkInfo> {
        self.book.iter().find(|e| e.key == *key).map(|e| e.info)
    }

    fn set(&mut self, key: ProcSeriesKey, state: ParkState, bytes: Option<u64>, now: UnixMs) {
        let since_ms = match (state, self.info(&key)) {
            (ParkState::Resuming | ParkState::Failed | ParkState::Locked, Some(i)) => i.since_ms,
            _ => now,
        };
        let info = ParkInfo {
            state,
            bytes,
            since_ms,
        };
        match self.book.iter_mut().find(|e| e.key == key) {
            Some(e) => e.info = info,
            None => self.book.push(Entry { key, info }),
        }
    }

    fn forget(&mut self, key: &ProcSeriesKey) {
        self.book.retain(|e| e.key != *key);
    }

    /// Jobs finished since the last call, with the book brought in step with each (a
    /// state read that finds a process running again, or gone, drops it from the book).
    /// Asks the driver for the book's states every [`REFRESH`].
    pub(crate) fn poll(&mut self, now: UnixMs) -> Vec<Done> {
        let done = self.worker.finished();
        for d in &done {
            self.apply(d, now);
        }
        let due = self.last_refresh.is_none_or(|t| t.elapsed() >= REFRESH);
        let idle: Vec<ProcSeriesKey> = self
            .book
            .iter()
            .filter(|e| !matches!(e.info.state, ParkState::Parking | ParkState::Resuming))
            .map(|e| e.key)
            .collect();
        if due
            && !self.states_in_flight
            && !idle.is_empty()
            && self.worker.send(Job::States(idle)).is_ok()
        {
            self.states_in_flight = true;
            self.last_refresh = Some(Instant::now());
        }
        done.into_iter()
            .filter(|d| d.kind != JobKind::State)
            .collect()
    }

    fn apply(&mut self, d: &Done, now: UnixMs) {
        use cuda::CudaState as C;
        if d.kind == JobKind::State {
            self.states_in_flight = false;
        }
        let bytes = self.info(&d.key).and_then(|i| i.bytes);
        match (d.kind, &d.result, d.state) {
            // Gone, or running again (resumed here or by another tool).
            (_, _, None | Some(C::Running)) => {
                ledger::forget(&d.key);
                self.forget(&d.key)
            }
            // A failed restore: whatever state the driver shows, it will not restore it.
            _ if d.stranded() => self.set(d.key, ParkState::Failed, bytes, now),
            (_, _, Some(C::Checkpointed))
                if self.info(&d.key).map(|i| i.state) == Some(ParkState::Failed) => {}
            (JobKind::Park, Ok(_), Some(C::Checkpointed)) => {
                if let Some(b) = bytes {
                    ledger::record(&d.key, b);
                }
                self.set(d.key, ParkState::Parked, bytes, now)
            }
            (_, _, Some(C::Checkpointed)) => {
                let since = self.info(&d.key).map_or(now, |i| i.since_ms);
                self.set(d.key, ParkState::Parked, bytes, since)
            }
            (_, _, Some(C::Locked)) => self.set(d.key, ParkState::Locked, bytes, now),
            (_, _, Some(C::Failed | C::Other(_))) => self.set(d.key, ParkState::Failed, bytes, now),
        }
    }

    /// Shows the book in `snap`: a parked process listed by the driver gets its
    /// [`ParkInfo`]; one the driver no longer lists (its memory is in host memory) is added
    /// with 0 bytes on its GPU.
    pub(crate) fn annotate(&self, snap: &mut Snapshot) {
        for e in &self.book {
            let (key, gpu) = (e.key.0, e.key.1);
            match snap
                .processes
                .iter_mut()
                .find(|p| p.pid == key.pid && p.device_index == gpu)
            {
                Some(p) => p.parked = Some(e.info),
                None => snap.processes.push(ProcessSample {
                    pid: key.pid,
                    device_index: gpu,
                    used_bytes: Some(0),
                    origin: Origin::Live,
                    parked: Some(e.info),
                    ..ProcessSample::default()
                }),
            }
        }
    }

    /// True when the book is empty.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.book.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProcessKey;

    fn key(pid: u32) -> ProcSeriesKey {
        (
            ProcessKey {
                pid,
                start_time_ms: 1,
            },
            0,
        )
    }

    fn done(k: ProcSeriesKey, kind: JobKind, state: Option<cuda::CudaState>) -> Done {
        Done {
            key: k,
            kind,
            result: Ok(String::new()),
            state,
            seconds: 1.0,
        }
    }

    #[test]
    fn a_parked_process_is_shown_with_no_gpu_memory_until_it_runs_again() {
        let mut p = Parker::default();
        p.set(key(7), ParkState::Parking, Some(10 << 30), 1_000);
        p.apply(
            &done(key(7), JobKind::Park, Some(cuda::CudaState::Checkpointed)),
            8_000,
        );
        let mut snap = Snapshot::default();
        p.annotate(&mut snap);
        assert_eq!(snap.processes.len(), 1);
        let info = snap.processes[0].parked.expect("parked");
        assert_eq!(
            (info.state, info.bytes, info.since_ms),
            (ParkState::Parked, Some(10 << 30), 8_000)
        );
        assert_eq!(snap.processes[0].used_bytes, Some(0));
        p.apply(
            &done(key(7), JobKind::State, Some(cuda::CudaState::Running)),
            9_000,
        );
        assert!(p.is_empty());
    }

    #[test]
    fn a_resume_refused_for_room_keeps_it_parked_since_the_park() {
        let mut p = Parker::default();
        p.set(key(7), ParkState::Parked, Some(1 << 30), 1_000);
        p.set(key(7), ParkState::Resuming, Some(1 << 30), 5_000);
        // The room check refused before the driver was asked: the driver still shows it
        // checkpointed and its memory is whole in host memory.
        let mut d = done(key(7), JobKind::Resume, Some(cuda::CudaState::Checkpointed));
        d.result = Err(worker::ParkError::Refused(
            "not enough free GPU memory to restore it".into(),
        ));
        p.apply(&d, 6_000);
        let info = p.info(&key(7)).expect("kept");
        assert_eq!((info.state, info.since_ms), (ParkState::Parked, 1_000));
    }

    #[test]
    fn a_failed_restore_is_shown_as_failed_though_the_driver_still_says_checkpointed() {
        // The driver after a restore that ran out of memory (NVIDIA/cuda-checkpoint#44, and
        // an H100 (driver 580)): the state reads "checkpointed", yet every later restore fails with
        // CUresult 304 and the unlock with 401. The book must not call it parked.
        let mut p = Parker::default();
        p.set(key(7), ParkState::Parked, Some(1 << 30), 1_000);
        p.set(key(7), ParkState::Resuming, Some(1 << 30), 5_000);
        let mut d = done(key(7), JobKind::Resume, Some(cuda::CudaState::Checkpointed));
        d.result = Err(worker::ParkError::Stranded(format!(
            "restore: out of memory; {}",
            worker::STRANDED
        )));
        p.apply(&d, 6_000);
        let info = p.info(&key(7)).expect("kept, to be shown");
        assert_eq!(info.state, ParkState::Failed);
        // A later state read that still says "checkpointed" does not turn it back.
        let again = done(key(7), JobKind::State, Some(cuda::CudaState::Checkpointed));
        p.apply(&again, 11_000);
        assert_eq!(p.info(&key(7)).map(|i| i.state), Some(ParkState::Failed));
    }

    #[test]
    fn a_listed_process_gets_the_mark_and_no_second_row() {
        let mut p = Parker::default();
        p.set(key(7), ParkState::Parking, Some(1 << 30), 1_000);
        let mut snap = Snapshot {
            processes: vec![ProcessSample {
                pid: 7,
                used_bytes: Some(1 << 30),
                ..ProcessSample::default()
            }],
            ..Snapshot::default()
        };
        p.annotate(&mut snap);
        assert_eq!(snap.processes.len(), 1);
        assert_eq!(
            snap.processes[0].parked.map(|i| i.state),
            Some(ParkState::Parking)
        );
    }
}
