//! The park and resume actions in the executor: their own refusals (already parked, the
//! driver's preconditions, host memory), the start of the job on the park thread, and the
//! activity entries and session records when it ends. The driver calls are in
//! [`crate::act::park`].

use super::activity::{Activity, Entry, ANSWER_FOLLOWS};
use super::eval::{Planned, Target};
use super::model::Action;
use crate::act::park::checks::{self, ParkFacts};
use crate::act::park::worker::{Done, JobKind};
use crate::act::park::Parker;
use crate::model::history::ProcSeriesKey;
use crate::model::outcome::Outcome;
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
    /// A dry run's words.
    pub fn would(self, p: &Planned, who: &str) -> String {
        match self {
            ParkKind::Park => format!(
                "would park {who}: {} to host memory, about {:.0} s",
                gib(used(&p.target)),
                checks::park_estimate_s(used(&p.target).unwrap_or(0))
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
}

struct Pending {
    key: ProcSeriesKey,
    kind: ParkKind,
    rule: String,
    target: Target,
    action: String,
    bytes: Option<u64>,
}

/// The executor's part of park and resume.
#[derive(Default)]
pub struct Parks {
    parker: Parker,
    pending: Vec<Pending>,
    records: Vec<ParkRecord>,
    /// How many GPUs list each pid (a multi-GPU process is not parked).
    gpus_of: crate::model::FastMap<u32, usize>,
    /// GPUs that are MIG instances.
    mig: crate::model::FastSet<u32>,
}

impl Parks {
    /// Takes in the latest sample (before actions run).
    pub fn observe(&mut self, snap: &Snapshot) {
        self.gpus_of.clear();
        for p in snap.processes.iter().filter(|p| p.parked.is_none()) {
            *self.gpus_of.entry(p.pid).or_default() += 1;
        }
        self.mig = snap
            .devices
            .iter()
            .filter(|d| d.uuid.starts_with("MIG-") || d.name.contains("MIG"))
            .map(|d| d.index)
            .collect();
    }

    /// Why `p` (a park or resume of `key`) may not go ahead, if so.
    pub fn refusal(&self, p: &Planned, key: &ProcSeriesKey) -> Option<String> {
        let state = self.parker.info(key).map(|i| i.state);
        match (&p.action, state) {
            (Action::Park | Action::Resume, Some(ParkState::Parking | ParkState::Resuming)) => {
                Some("a park or resume of it is under way".into())
            }
            (Action::Park, Some(_)) => Some("it is already parked".into()),
            (Action::Park, None) => {
                let v = checks::check_park(&self.facts(p, key));
                (!v.refusals.is_empty()).then(|| v.refusals.join("; "))
            }
            _ => None,
        }
    }

    /// What the checks of a park of `key` look at, read now.
    fn facts(&self, p: &Planned, key: &ProcSeriesKey) -> ParkFacts {
        ParkFacts {
            gpu_bytes: used(&p.target),
            gpus: self.gpus_of.get(&key.0.pid).copied().unwrap_or(1),
            mig: self.mig.contains(&key.1),
            host_available: checks::host_available(),
            libraries: checks::mapped_libraries(key.0.pid),
            distributed: checks::is_distributed(key.0.pid),
        }
    }

    /// Starts the job (policy, dry run and identity were checked by the executor).
    pub fn start(
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
        });
        let words = match kind {
            ParkKind::Park => {
                let warnings = checks::check_park(&self.facts(p, &key)).warnings;
                format!(
                    "parking {who}: {} to host memory, about {:.0} s{}",
                    gib(bytes),
                    checks::park_estimate_s(bytes.unwrap_or(0)),
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

    /// Jobs that ended: one activity entry each (and a record for the session log).
    pub fn poll(&mut self, now: UnixMs) -> Vec<Activity> {
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
        let (outcome, detail) = match (&d.result, kind) {
            (Ok(_), ParkKind::Park) => (
                Outcome::Acted,
                format!(
                    "parked {who} in {:.1} s: {} moved to host memory; the driver reports it checkpointed",
                    d.seconds,
                    gib(p.bytes)
                ),
            ),
            (Ok(_), ParkKind::Resume) => (
                Outcome::Acted,
                format!(
                    "resumed {who} in {:.1} s: {} back on the GPU, it runs again",
                    d.seconds,
                    gib(p.bytes)
                ),
            ),
            (Err(why), _) => (
                Outcome::Failed,
                format!(
                    "{} of {who} did not complete ({:.1} s): {why}",
                    match kind {
                        ParkKind::Park => "the park",
                        ParkKind::Resume => "the resume",
                    },
                    d.seconds
                ),
            ),
        };
        self.records.push(ParkRecord {
            unix_ms: now,
            key: p.key,
            name: p.target.name().to_string(),
            kind,
            bytes: p.bytes,
            seconds: d.seconds,
            ok: d.result.is_ok(),
            detail: detail.clone(),
            stranded: d.stranded,
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
    pub fn annotate(&self, snap: &mut Snapshot) {
        self.parker.annotate(snap);
    }

    /// The records since the last call.
    pub fn take_records(&mut self) -> Vec<ParkRecord> {
        std::mem::take(&mut self.records)
    }
}
