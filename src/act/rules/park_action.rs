//! The park and resume actions in the executor: their own refusals (already parked, the
//! driver's preconditions, host memory), the start of the job on the park thread, and the
//! activity entries and session records when it ends. The driver calls are in
//! [`crate::act::park`].

use super::activity::{Activity, Entry, ANSWER_FOLLOWS};
use super::eval::{Planned, Target};
use super::model::Action;
use crate::act::park::checks::{self, ParkFacts};
use crate::act::park::estimate::park_estimate_s;
use crate::act::park::worker::{Done, JobKind, ParkError};
use crate::act::park::Parker;
use crate::model::history::ProcSeriesKey;
use crate::model::outcome::Outcome;
use crate::model::reply::{Answer, CommandId, CommandReply};
use crate::model::{ParkState, Snapshot, UnixMs, GIB};

/// Park or resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParkKind {
    /// GPU memory to host memory.
    Park,
    /// Back to the GPU.
    Resume,
}

impl ParkKind {
    /// A dry run's words (a park's time estimated at `park_gib_s`).
    pub(crate) fn would(self, p: &Planned, who: &str, park_gib_s: f64) -> String {
        match self {
            ParkKind::Park => format!(
                "would park {who}: {} to host memory, about {:.0} s",
                gib(used(&p.target)),
                park_estimate_s(used(&p.target).unwrap_or(0), park_gib_s)
            ),
            ParkKind::Resume => format!("would resume {who}"),
        }
    }
}

fn used(t: &Target) -> Option<u64> {
    match t {
        Target::Process { used_bytes, .. } => *used_bytes,
        Target::Device(_) => None,
    }
}

fn gib(b: Option<u64>) -> String {
    b.map_or("its memory".into(), |b| {
        format!("{:.1} GiB", b as f64 / GIB as f64)
    })
}

/// A park or resume that ended, with its figures: the session log's record of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParkRecord {
    /// When it ended.
    pub unix_ms: UnixMs,
    /// The process.
    pub key: ProcSeriesKey,
    /// Its name.
    pub name: String,
    /// Park or resume.
    pub kind: ParkKind,
    /// The GPU memory moved (the driver's figure before the park).
    pub bytes: Option<u64>,
    /// Seconds the driver took.
    pub seconds: f64,
    /// Whether it went through.
    pub ok: bool,
    /// What happened, in words.
    pub detail: String,
    /// A failed restore left the process without its GPU memory for good.
    pub stranded: bool,
    /// Refused before any step: nothing was changed.
    pub refused: bool,
}

struct Pending {
    key: ProcSeriesKey,
    kind: ParkKind,
    rule: String,
    target: Target,
    action: String,
    bytes: Option<u64>,
    /// The front end's command it answers, if it came from one.
    command: Option<CommandId>,
}

/// The executor's part of park and resume.
#[derive(Default)]
pub(crate) struct Parks {
    parker: Parker,
    pending: Vec<Pending>,
    records: Vec<ParkRecord>,
    /// How many GPUs list each pid (a multi-GPU process is not parked).
    gpus_of: crate::model::FastMap<u32, usize>,
    /// GPUs that are MIG instances.
    mig: crate::model::FastSet<u32>,
    /// Per GPU: free and total memory in the latest sample (a resume's room check).
    room: crate::model::FastMap<u32, (Option<u64>, Option<u64>)>,
    /// Per process (pid and start time): whether its environment says it is one rank of a
    /// distributed job. The environment a process was started with does not change, so
    /// `/proc/PID/environ` is read once per process, not at every check.
    distributed: std::cell::RefCell<crate::model::FastMap<crate::model::ProcessKey, bool>>,
    /// The host's available memory, read at most once per sample (None: not read yet).
    host: std::cell::Cell<Option<Option<u64>>>,
    /// Final replies to commands whose park or resume ended, until taken.
    concluded: Vec<CommandReply>,
    /// The park rate the guard measured on this machine (GiB/s; 0 until one is known: the
    /// default rate), for the time a park is said to need.
    pub park_gib_s: f64,
}

impl Parks {
    /// Takes in the latest sample (before actions run).
    pub(crate) fn observe(&mut self, snap: &Snapshot) {
        self.gpus_of.clear();
        for p in snap.processes.iter().filter(|p| p.parked.is_none()) {
            *self.gpus_of.entry(p.pid).or_default() += 1;
        }
        self.mig.clear();
        self.mig.extend(
            snap.devices
                .iter()
                .filter(|d| d.uuid.starts_with("MIG-") || d.name.contains("MIG"))
                .map(|d| d.index),
        );
        self.room.clear();
        self.room.extend(
            snap.devices
                .iter()
                .map(|d| (d.index, (d.memory_free_bytes, d.memory_total_bytes))),
        );
        self.host.set(None);
        let known = self.distributed.get_mut();
        if known.len() > snap.processes.len() * 2 + 16 {
            let listed: crate::model::FastSet<crate::model::ProcessKey> =
                snap.processes.iter().map(|p| p.key()).collect();
            known.retain(|k, _| listed.contains(k));
        }
    }

    /// Why `p` (a park or resume of `key`) may not go ahead, if so. `ahead` (the guard's view
    /// of what it may park, not a park about to start): the host's available memory is the
    /// one read at this sample rather than read again.
    pub(crate) fn refusal(&self, p: &Planned, key: &ProcSeriesKey, ahead: bool) -> Option<String> {
        let state = self.parker.info(key).map(|i| i.state);
        match (&p.action, state) {
            (Action::Park | Action::Resume, Some(ParkState::Parking | ParkState::Resuming)) => {
                Some("a park or resume of it is under way".into())
            }
            (Action::Park, Some(_)) => Some("it is already parked".into()),
            (Action::Park, None) => {
                // The refusals never look at the mapped libraries (a warning only): the
                // process's memory map, large for a PyTorch job, is not read for them.
                let v = checks::check_park(&self.facts(p, key, ahead, false));
                (!v.refusals.is_empty()).then(|| v.refusals.join("; "))
            }
            (Action::Resume, _) => self.no_room(key),
            _ => None,
        }
    }

    /// Why GPU `key.1` has no room for `key`'s parked bytes in the latest sample, if so
    /// (the park thread checks again, with the driver's figure, right before the restore).
    fn no_room(&self, key: &ProcSeriesKey) -> Option<String> {
        let bytes = self
            .parker
            .info(key)
            .and_then(|i| i.bytes)
            .or_else(|| crate::act::park::ledger::bytes_of(key))?;
        let (Some(free), Some(total)) = self.room.get(&key.1).copied()? else {
            return None;
        };
        checks::check_room(free, total, bytes).err()
    }

    /// The park or resume of `key` just started answers command `id` when it ends (its
    /// final reply is then among [`Parks::take_concluded`]).
    pub(crate) fn answer_under(&mut self, key: &ProcSeriesKey, id: CommandId) -> bool {
        match self
            .pending
            .iter_mut()
            .rev()
            .find(|p| p.key == *key && p.command.is_none())
        {
            Some(p) => {
                p.command = Some(id);
                true
            }
            None => false,
        }
    }

    /// The final replies to commands whose park or resume ended since the last call.
    pub(crate) fn take_concluded(&mut self) -> Vec<CommandReply> {
        std::mem::take(&mut self.concluded)
    }

    /// What the checks of a park of `key` look at: the host's available memory read now (as
    /// read at this sample when `ahead`), the process's environment as read once, and its
    /// mapped libraries read now when `libraries` (only the warnings need them).
    fn facts(&self, p: &Planned, key: &ProcSeriesKey, ahead: bool, libraries: bool) -> ParkFacts {
        let host_available = match self.host.get() {
            Some(read) if ahead => read,
            _ => {
                let read = checks::host_available();
                self.host.set(Some(read));
                read
            }
        };
        let distributed = *self
            .distributed
            .borrow_mut()
            .entry(key.0)
            .or_insert_with(|| checks::is_distributed(key.0.pid));
        ParkFacts {
            gpu_bytes: used(&p.target),
            gpus: self.gpus_of.get(&key.0.pid).copied().unwrap_or(1),
            mig: self.mig.contains(&key.1),
            host_available,
            libraries: if libraries {
                checks::mapped_libraries(key.0.pid)
            } else {
                Vec::new()
            },
            distributed,
        }
    }

    /// Starts the job (policy, dry run and identity were checked by the executor).
    pub(crate) fn start(
        &mut self,
        kind: ParkKind,
        p: &Planned,
        key: ProcSeriesKey,
        now: UnixMs,
    ) -> (Outcome, String, Entry) {
        let who = p.target.describe();
        let bytes = match kind {
            ParkKind::Park => used(&p.target),
            ParkKind::Resume => self.parker.info(&key).and_then(|i| i.bytes),
        };
        let started = match kind {
            ParkKind::Park => self.parker.park(key, bytes, now),
            ParkKind::Resume => self.parker.resume(key, now),
        };
        if let Err(e) = started {
            return (Outcome::Failed, e, Entry::Action);
        }
        self.pending.push(Pending {
            key,
            kind,
            rule: p.rule.clone(),
            target: p.target.clone(),
            action: p.action.label(),
            bytes,
            command: None,
        });
        let words = match kind {
            ParkKind::Park => {
                let warnings = checks::check_park(&self.facts(p, &key, false, true)).warnings;
                format!(
                    "parking {who}: {} to host memory, about {:.0} s{}",
                    gib(bytes),
                    park_estimate_s(bytes.unwrap_or(0), self.park_gib_s),
                    warnings
                        .iter()
                        .map(|w| format!(" (note: {w})"))
                        .collect::<String>()
                )
            }
            ParkKind::Resume => format!("resuming {who}: {} back to the GPU", gib(bytes)),
        };
        (
            Outcome::Acted,
            format!("{words}; {ANSWER_FOLLOWS}"),
            Entry::Asked,
        )
    }

    /// How a job of `kind` on `who` ended, in words: refused (nothing was changed), failed,
    /// or done with its figures.
    fn outcome_of(d: &Done, kind: ParkKind, who: &str, bytes: Option<u64>) -> (Outcome, String) {
        let (the, verb) = match kind {
            ParkKind::Park => ("the park", "parked"),
            ParkKind::Resume => ("the resume", "resumed"),
        };
        match (&d.result, kind) {
            (Ok(_), ParkKind::Park) => (
                Outcome::Acted,
                format!(
                    "{verb} {who} in {:.1} s: {} moved to host memory; the driver reports it checkpointed",
                    d.seconds,
                    gib(bytes)
                ),
            ),
            (Ok(_), ParkKind::Resume) => (
                Outcome::Acted,
                format!(
                    "{verb} {who} in {:.1} s: {} back on the GPU, it runs again",
                    d.seconds,
                    gib(bytes)
                ),
            ),
            (Err(ParkError::Refused(why)), _) => (
                Outcome::Skipped,
                format!("{the} of {who} was refused, nothing was changed: {why}"),
            ),
            (Err(why @ (ParkError::Failed(_) | ParkError::Stranded(_))), _) => (
                Outcome::Failed,
                format!(
                    "{the} of {who} did not complete ({:.1} s): {why}",
                    d.seconds
                ),
            ),
        }
    }

    /// Jobs that ended: one activity entry each (and a record for the session log).
    pub(crate) fn poll(&mut self, now: UnixMs) -> Vec<Activity> {
        self.parker
            .poll(now)
            .into_iter()
            .filter_map(|d| self.finish(d, now))
            .collect()
    }

    fn finish(&mut self, d: Done, now: UnixMs) -> Option<Activity> {
        let kind = match d.kind {
            JobKind::Park => ParkKind::Park,
            JobKind::Resume => ParkKind::Resume,
            JobKind::State => return None,
        };
        let i = self
            .pending
            .iter()
            .position(|p| p.key == d.key && p.kind == kind)?;
        let p = self.pending.remove(i);
        let who = p.target.describe();
        let (outcome, detail) = Self::outcome_of(&d, kind, &who, p.bytes);
        if let Some(id) = p.command {
            let answer = Answer::new(outcome, detail.clone()).with_figures(
                d.result.is_ok().then_some(p.bytes).flatten(),
                Some(d.seconds),
            );
            self.concluded.push(CommandReply {
                id,
                what: p.action.clone(),
                answer,
            });
        }
        self.records.push(ParkRecord {
            unix_ms: now,
            key: p.key,
            name: p.target.name().to_string(),
            kind,
            bytes: p.bytes,
            seconds: d.seconds,
            ok: d.result.is_ok(),
            detail: detail.clone(),
            stranded: d.stranded(),
            refused: d.refused(),
        });
        Some(Activity {
            unix_ms: now,
            rule: p.rule,
            target: p.target,
            action: p.action,
            outcome,
            detail,
            entry: Entry::Action,
        })
    }

    /// See [`Parker::annotate`].
    pub(crate) fn annotate(&self, snap: &mut Snapshot) {
        self.parker.annotate(snap);
    }

    /// The records since the last call.
    pub(crate) fn take_records(&mut self) -> Vec<ParkRecord> {
        std::mem::take(&mut self.records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProcessKey;

    fn ended(result: Result<String, ParkError>) -> Done {
        let key = (
            ProcessKey {
                pid: 7,
                start_time_ms: 1,
            },
            0,
        );
        Done {
            key,
            kind: JobKind::Resume,
            result,
            state: None,
            seconds: 2.0,
        }
    }

    /// A job's end is answered by its kind: refused (nothing changed) is a skip, a failed
    /// step and a stranded restore are failures, and only the last is stranded.
    #[test]
    fn a_job_is_answered_by_how_it_ended() {
        let who = "python (PID 7)";
        let outcome = |d: &Done| Parks::outcome_of(d, ParkKind::Resume, who, Some(1 << 30));
        let refused = ended(Err(ParkError::Refused("no room".into())));
        assert_eq!(
            outcome(&refused),
            (
                Outcome::Skipped,
                "the resume of python (PID 7) was refused, nothing was changed: no room".into()
            )
        );
        assert!(refused.refused() && !refused.stranded());
        let failed = ended(Err(ParkError::Failed("unlock: 401".into())));
        assert_eq!(
            outcome(&failed),
            (
                Outcome::Failed,
                "the resume of python (PID 7) did not complete (2.0 s): unlock: 401".into()
            )
        );
        assert!(!failed.refused() && !failed.stranded());
        let stranded = ended(Err(ParkError::Stranded("restore: 2".into())));
        assert_eq!(outcome(&stranded).0, Outcome::Failed);
        assert!(stranded.stranded() && !stranded.refused());
        let done = ended(Ok("resumed".into()));
        assert_eq!(outcome(&done).0, Outcome::Acted);
        assert!(!done.refused() && !done.stranded());
    }
}
