//! The thread that asks the PyTorch companions, off the engine's tick: connecting, the hello
//! and the answer take milliseconds, but a release of a large cache takes seconds (9 s for
//! 56 GB on the H200), and the engine must never wait on a process. Jobs are asked one after
//! another on this one thread, as the park worker does the driver's calls
//! ([`crate::act::park::worker`]); each answer goes back on the job's own channel, which the
//! runner reads on a later tick. The companion's client checks the peer (pid, uid, start time)
//! before anything is sent.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};

use super::companion_action::{self, Answer, LimitGpu};
use super::Action;
use crate::model::UnixMs;

/// One question to a companion.
pub struct Job {
    /// Where its socket is looked for.
    pub dirs: Vec<PathBuf>,
    /// The process: pid and start time (checked against the peer).
    pub pid: u32,
    /// Its start time (ms).
    pub start_time_ms: UnixMs,
    /// Release the cache, or limit the memory (on `gpu`).
    pub action: Action,
    /// The GPU a limit is for.
    pub gpu: Option<LimitGpu>,
    /// The process in words, for the answer.
    pub who: String,
    /// Where the answer goes.
    pub answer: Sender<Answer>,
}

/// The handle to the worker thread (started on the first job; ends when dropped, after the
/// job it is on).
#[derive(Default)]
pub(crate) struct Worker {
    tx: Option<Sender<Job>>,
}

impl Worker {
    /// Queues `job`, starting the thread if needed; its answer comes on the job's channel.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub(crate) fn send(&mut self, job: Job) -> Result<(), String> {
        if self.tx.is_none() {
            let (tx, rx) = channel::<Job>();
            std::thread::Builder::new()
                .name("vramwarden-companion".into())
                .spawn(move || run(&rx))
                .map_err(|e| format!("could not start a thread to ask the companion: {e}"))?;
            self.tx = Some(tx);
        }
        if self.tx.as_ref().is_some_and(|tx| tx.send(job).is_ok()) {
            return Ok(());
        }
        // The thread ended (it never does on its own): the next job starts another.
        self.tx = None;
        Err("the companion thread has ended".into())
    }
}

fn run(jobs: &Receiver<Job>) {
    while let Ok(j) = jobs.recv() {
        let answer = match (&j.action, &j.gpu) {
            (Action::LimitMemory { gib }, Some(g)) => {
                companion_action::limit(&j.dirs, j.pid, j.start_time_ms, g, *gib, &j.who)
            }
            _ => companion_action::release(&j.dirs, j.pid, j.start_time_ms, &j.who),
        };
        // The runner may be gone (the engine stopped): nothing to tell then.
        let _ = j.answer.send(answer);
    }
}
