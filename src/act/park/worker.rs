//! The thread that makes the driver's checkpoint calls, off the engine's tick: a park takes
//! seconds (about 7 s for 10 GiB) and a stuck process must never hang sampling. Every call
//! is preceded by an identity check (pid + start time) of the process it names.

use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::time::Instant;

use super::cuda::{CudaCheckpoint, CudaError, CudaState};
use crate::host::procinfo::ProcReader;
use crate::model::history::ProcSeriesKey;

/// How long a lock waits for the process's CUDA work to reach a safe point.
const LOCK_TIMEOUT_MS: u32 = 10_000;

/// What the worker is asked.
#[derive(Debug, Clone)]
pub enum Job {
    /// Lock, then checkpoint.
    Park(ProcSeriesKey),
    /// Check the GPU's room, restore, then unlock: the process and the bytes it parked (the
    /// room check needs them; None: not known here).
    Resume(ProcSeriesKey, Option<u64>),
    /// The driver's state of each process.
    States(Vec<ProcSeriesKey>),
}

/// Which step a job ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// [`Job::Park`].
    Park,
    /// [`Job::Resume`].
    Resume,
    /// [`Job::States`].
    State,
}

/// How a job ended for one process.
#[derive(Debug, Clone)]
pub struct Done {
    /// The process.
    pub key: ProcSeriesKey,
    /// What was asked.
    pub kind: JobKind,
    /// `Ok` with what was done, or why not: by what it left the process in, and in words.
    pub result: Result<String, ParkError>,
    /// The driver's state after it, where it could be read (`None`: the process is gone, or
    /// the driver would not say).
    pub state: Option<CudaState>,
    /// Seconds the driver calls took.
    pub seconds: f64,
}

/// Why a job did not do what was asked, by what it left the process in; it says itself in
/// the words of the step that stopped it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParkError {
    /// Refused before any step changed the process (not parkable in its state, no room on
    /// the GPU for a restore): nothing was changed.
    #[error("{0}")]
    Refused(String),
    /// A step failed (the words say how it left the process: running on, or locked).
    #[error("{0}")]
    Failed(String),
    /// A restore was tried and failed: the driver does not restore it again
    /// (NVIDIA/cuda-checkpoint#44), its GPU state is lost.
    #[error("{0}")]
    Stranded(String),
}

impl Done {
    /// A restore was tried and failed ([`ParkError::Stranded`]).
    pub fn stranded(&self) -> bool {
        matches!(self.result, Err(ParkError::Stranded(_)))
    }

    /// Refused before any step changed the process ([`ParkError::Refused`]).
    pub fn refused(&self) -> bool {
        matches!(self.result, Err(ParkError::Refused(_)))
    }
}

/// The handle to the worker thread (started on the first job; ends when dropped).
#[derive(Default)]
pub(crate) struct Worker {
    tx: Option<Sender<Job>>,
    rx: Option<Receiver<Done>>,
}

impl Worker {
    /// Sends `job`, starting the thread if needed.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub(crate) fn send(&mut self, job: Job) -> Result<(), String> {
        if self.tx.is_none() {
            let (jtx, jrx) = channel::<Job>();
            let (dtx, drx) = channel::<Done>();
            std::thread::Builder::new()
                .name("vramwarden-park".into())
                .spawn(move || run(&jrx, &dtx))
                .map_err(|e| format!("could not start the park thread: {e}"))?;
            self.tx = Some(jtx);
            self.rx = Some(drx);
        }
        self.tx
            .as_ref()
            .and_then(|tx| tx.send(job).ok())
            .ok_or_else(|| "the park thread has ended".to_string())
    }

    /// Jobs finished since the last call.
    pub(crate) fn finished(&mut self) -> Vec<Done> {
        let mut out = Vec::new();
        let Some(rx) = &self.rx else {
            return out;
        };
        loop {
            match rx.try_recv() {
                Ok(d) => out.push(d),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.tx = None;
                    self.rx = None;
                    break;
                }
            }
        }
        out
    }
}

fn run(jobs: &Receiver<Job>, done: &Sender<Done>) {
    let procs = ProcReader::default();
    let mut driver: Option<Result<CudaCheckpoint, CudaError>> = None;
    while let Ok(job) = jobs.recv() {
        let api = driver.get_or_insert_with(CudaCheckpoint::load);
        let results = match (api, job) {
            (Err(e), job) => failed_all(job, &e.to_string()),
            (Ok(api), Job::Park(key)) => vec![park(api, &procs, key)],
            (Ok(api), Job::Resume(key, bytes)) => vec![resume(api, &procs, key, bytes)],
            (Ok(api), Job::States(keys)) => {
                keys.into_iter().map(|k| state_of(api, &procs, k)).collect()
            }
        };
        for r in results {
            if done.send(r).is_err() {
                return;
            }
        }
    }
}

fn failed_all(job: Job, why: &str) -> Vec<Done> {
    let (keys, kind) = match job {
        Job::Park(k) => (vec![k], JobKind::Park),
        Job::Resume(k, _) => (vec![k], JobKind::Resume),
        Job::States(ks) => (ks, JobKind::State),
    };
    keys.into_iter()
        .map(|key| Done {
            key,
            kind,
            result: Err(ParkError::Failed(why.to_string())),
            state: None,
            seconds: 0.0,
        })
        .collect()
}

/// Whether `key` still names the process it was taken from.
fn same(procs: &ProcReader, key: &ProcSeriesKey) -> Result<(), String> {
    match procs.start_time_ms(key.0.pid) {
        None => Err("the process has exited".into()),
        Some(t) if key.0.start_time_ms <= 0 || (t - key.0.start_time_ms).abs() > 10 => {
            Err(format!(
                "PID {} now belongs to another process (or its start time is unknown)",
                key.0.pid
            ))
        }
        Some(_) => Ok(()),
    }
}

struct Step<'a> {
    api: &'a CudaCheckpoint,
    procs: &'a ProcReader,
    key: ProcSeriesKey,
    kind: JobKind,
    started: Instant,
}

impl<'a> Step<'a> {
    fn new(
        api: &'a CudaCheckpoint,
        procs: &'a ProcReader,
        key: ProcSeriesKey,
        kind: JobKind,
    ) -> Self {
        Self {
            api,
            procs,
            key,
            kind,
            started: Instant::now(),
        }
    }

    /// The identity check, then `call`.
    fn call(&self, call: impl Fn(u32) -> Result<(), CudaError>) -> Result<(), String> {
        same(self.procs, &self.key)?;
        call(self.key.0.pid).map_err(|e| e.to_string())
    }

    fn state(&self) -> Option<CudaState> {
        same(self.procs, &self.key).ok()?;
        self.api.state(self.key.0.pid).ok()
    }

    fn end(&self, result: Result<String, ParkError>) -> Done {
        Done {
            key: self.key,
            kind: self.kind,
            state: self.state(),
            seconds: self.started.elapsed().as_secs_f64(),
            result,
        }
    }

    /// Ends the job before any step: nothing was changed, for the reason `why`.
    fn refuse(&self, why: String) -> Done {
        self.end(Err(ParkError::Refused(why)))
    }
}

/// The identity check, then the driver's state: before the first step of a job.
fn first_state(
    api: &CudaCheckpoint,
    procs: &ProcReader,
    key: &ProcSeriesKey,
) -> Result<CudaState, String> {
    same(procs, key)?;
    api.state(key.0.pid).map_err(|e| e.to_string())
}

fn park(api: &CudaCheckpoint, procs: &ProcReader, key: ProcSeriesKey) -> Done {
    let s = Step::new(api, procs, key, JobKind::Park);
    match first_state(api, procs, &key) {
        Ok(CudaState::Running) => {}
        Ok(CudaState::Checkpointed) => return s.refuse("it is already parked".into()),
        Ok(other) => {
            return s.refuse(format!(
                "it is {} (another tool may be checkpointing it): nothing was changed",
                other.label()
            ))
        }
        Err(e) => return s.refuse(format!("not a CUDA process the driver can park: {e}")),
    }
    if let Err(e) = s.call(|pid| api.lock(pid, LOCK_TIMEOUT_MS)) {
        return s.end(Err(ParkError::Failed(format!(
            "lock: {e}; nothing was changed, it runs on"
        ))));
    }
    if let Err(e) = s.call(|pid| api.checkpoint(pid)) {
        let after = match s.call(|pid| api.unlock(pid)) {
            Ok(()) => "it was unlocked and runs on".to_string(),
            Err(u) => format!(
                "unlocking it failed too ({u}): it is locked; `vramwarden resume {}` unlocks it",
                key.0.pid
            ),
        };
        return s.end(Err(ParkError::Failed(format!("checkpoint: {e}; {after}"))));
    }
    s.end(Ok("parked".into()))
}

/// What a failed restore leaves, as measured: the driver refuses every later restore
/// (CUresult 304) and the unlock (401), so the process cannot use its GPU memory again.
pub(crate) const STRANDED: &str = "the driver does not restore a process again after a failed restore (NVIDIA/cuda-checkpoint#44): its GPU memory is lost and it cannot use CUDA again; end it and start it anew";

fn resume(
    api: &CudaCheckpoint,
    procs: &ProcReader,
    key: ProcSeriesKey,
    bytes: Option<u64>,
) -> Done {
    let s = Step::new(api, procs, key, JobKind::Resume);
    let state = match first_state(api, procs, &key) {
        Ok(st) => Some(st),
        Err(e) => return s.refuse(format!("not a CUDA process the driver knows: {e}")),
    };
    match state {
        Some(CudaState::Checkpointed) => {
            // The room check right before the restore: a restore that runs out of GPU
            // memory loses the process's GPU state for good.
            if let Err(why) = room(key.1, bytes) {
                return s.refuse(why);
            }
            if let Err(e) = s.call(|pid| api.restore(pid)) {
                return s.end(Err(ParkError::Stranded(format!(
                    "restore: {e}; {STRANDED}"
                ))));
            }
        }
        Some(CudaState::Locked) => {}
        Some(CudaState::Running) => return s.refuse("it is not parked: it runs".into()),
        Some(other) => return s.refuse(format!("it is {}: not resumable", other.label())),
        None => return s.refuse("the driver gave no state for it".into()),
    }
    match s.call(|pid| api.unlock(pid)) {
        Ok(()) => s.end(Ok("resumed".into())),
        Err(e) => s.end(Err(ParkError::Failed(format!(
            "unlock: {e}; its memory is back on the GPU but it is locked (resume again to unlock it)"
        )))),
    }
}

/// Whether GPU `gpu` has room to restore `bytes` now (NVML's figure, read right before the
/// restore), or why not; the process stays parked then, its memory safe in host memory.
fn room(gpu: u32, bytes: Option<u64>) -> Result<(), String> {
    let Some(bytes) = bytes else {
        return Err(
            "its size and GPU are not known to this vramwarden (it was parked by another one), so the room for it cannot be checked and a restore that runs out of memory would lose it; it stays parked, its memory safe in host memory: resume it from the vramwarden that parked it".into()
        );
    };
    let (free, total) = crate::source::nvml::free_and_total(gpu).map_err(|e| {
        format!("the room on GPU {gpu} could not be checked before the restore ({e}); it stays parked, its memory safe in host memory")
    })?;
    super::checks::check_room(free, total, bytes)
}

fn state_of(api: &CudaCheckpoint, procs: &ProcReader, key: ProcSeriesKey) -> Done {
    let s = Step::new(api, procs, key, JobKind::State);
    let result = match same(procs, &key) {
        Ok(()) => api
            .state(key.0.pid)
            .map(|st| st.label())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    s.end(result.map_err(ParkError::Failed))
}
