//! What the guard shows: per GPU whether it is armed, acting or waiting, the time to full
//! against the time its next step needs, what it will do next and to whom, and what it did,
//! with the outcome. Plain serializable data: the View, the agent's wire, `/metrics` and the
//! window all read this one type.

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;

/// One of the guard's steps, in ladder order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// Release a job's PyTorch cache.
    ReleaseCache,
    /// Park an idle process.
    ParkIdle,
    /// Park the growing job itself before it hits OOM (resumed when there is room).
    PauseGrower,
    /// Terminate a process flagged as leaking (opt-in).
    TerminateLeaker,
    /// Resume a process the guard parked.
    Resume,
}

impl StepKind {
    /// Words for tables and logs: "park idle".
    pub fn label(self) -> &'static str {
        match self {
            Self::ReleaseCache => "release PyTorch cache",
            Self::ParkIdle => "park idle",
            Self::PauseGrower => "pause the grower",
            Self::TerminateLeaker => "terminate the leaker",
            Self::Resume => "resume",
        }
    }

    /// The name the activity and session logs give the step ("OOM guard: park idle").
    pub fn rule_name(self) -> String {
        format!("OOM guard: {}", self.label())
    }
}

/// Where the guard stands on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardPhase {
    /// Turned off in the settings.
    Off,
    /// Nothing fills this GPU within the warning time.
    Watching,
    /// The GPU fills: the next step is planned and starts when its lead time is reached.
    Armed,
    /// A step is under way.
    Acting,
    /// Processes the guard parked wait for room to be resumed.
    Waiting,
}

impl GuardPhase {
    /// One word.
    pub fn label(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Watching => "watching",
            Self::Armed => "armed",
            Self::Acting => "acting",
            Self::Waiting => "waiting",
        }
    }

    /// The number `/metrics` gives it (0 off … 4 waiting).
    pub fn code(self) -> u8 {
        match self {
            Self::Off => 0,
            Self::Watching => 1,
            Self::Armed => 2,
            Self::Acting => 3,
            Self::Waiting => 4,
        }
    }
}

/// The step the guard will take next on a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NextStep {
    /// Which.
    pub kind: StepKind,
    /// To whom: "python (PID 42)".
    pub who: String,
    /// Seconds the step needs (a park's from its bytes and the park rate).
    pub needs_s: f64,
    /// It starts when the GPU's time to full falls to this (seconds).
    pub starts_at_s: f64,
}

/// How a step ended (or that it only would have run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutcome {
    /// Dry run: it would have started.
    Would,
    /// Started; its end follows.
    Started,
    /// Went through.
    Done,
    /// Not started: refused by a check (protected, several GPUs, no room…); said "skipped",
    /// as the Activity tab says it.
    Refused,
    /// Started and failed.
    Failed,
}

impl StepOutcome {
    /// One word.
    pub fn label(self) -> &'static str {
        match self {
            Self::Would => "would",
            Self::Started => "started",
            Self::Done => "done",
            Self::Refused => "skipped",
            Self::Failed => "failed",
        }
    }
}

/// One thing the guard did (or would have done).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// When.
    pub unix_ms: UnixMs,
    /// Which step.
    pub kind: StepKind,
    /// To whom.
    pub who: String,
    /// How it ended.
    pub outcome: StepOutcome,
    /// The GPU's time to full when it started (seconds; None: nothing grew).
    pub full_in_s: Option<f64>,
    /// Seconds the step was expected to need.
    pub needs_s: f64,
    /// Seconds it took, when it ended.
    pub took_s: Option<f64>,
    /// What happened, in words.
    pub detail: String,
}

/// A process the guard parked, waiting to be resumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardParked {
    /// "python (PID 42)".
    pub who: String,
    /// GPU memory it holds in host memory.
    pub bytes: u64,
    /// Parked since.
    pub since_ms: UnixMs,
    /// It was the growing job, paused before it hit OOM.
    pub paused_grower: bool,
    /// What its resume waits for, in words.
    pub waits_for: String,
}

/// The guard on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardStatus {
    /// The GPU.
    pub device_index: u32,
    /// Where it stands.
    pub phase: GuardPhase,
    /// It only says what it would do.
    pub dry_run: bool,
    /// Seconds until the GPU is full, steps under way counted (None: nothing grows).
    pub full_in_s: Option<f64>,
    /// How fast it fills, MiB/s.
    pub growth_mib_s: f64,
    /// What it will do next.
    pub next: Option<NextStep>,
    /// What it cannot do, said ahead ("python (PID 7) cannot be paused: several GPUs").
    pub cannot: Vec<String>,
    /// The processes it parked.
    pub parked: Vec<GuardParked>,
    /// What it did lately, newest last.
    pub recent: Vec<StepRecord>,
    /// The park rate in use (GiB/s) …
    pub park_gib_s: f64,
    /// … measured on this machine (false: the default).
    pub park_rate_measured: bool,
    /// The resume rate in use (GiB/s; 0 from an agent that does not send it) …
    #[serde(default)]
    pub resume_gib_s: f64,
    /// … measured on this machine (false: the default).
    #[serde(default)]
    pub resume_rate_measured: bool,
}

impl GuardStatus {
    /// Makes `self` equal `new`, copying only the lists and words that differ (the figures
    /// that move every tick are plain numbers).
    pub(crate) fn copy_from(&mut self, new: &GuardStatus) {
        let GuardStatus {
            device_index,
            phase,
            dry_run,
            full_in_s,
            growth_mib_s,
            next,
            cannot,
            parked,
            recent,
            park_gib_s,
            park_rate_measured,
            resume_gib_s,
            resume_rate_measured,
        } = new;
        self.device_index = *device_index;
        self.phase = *phase;
        self.dry_run = *dry_run;
        self.full_in_s = *full_in_s;
        self.growth_mib_s = *growth_mib_s;
        match (&mut self.next, next) {
            (Some(old), Some(n)) => {
                if old.who != n.who {
                    old.who.clone_from(&n.who);
                }
                (old.kind, old.needs_s, old.starts_at_s) = (n.kind, n.needs_s, n.starts_at_s);
            }
            (old, n) => old.clone_from(n),
        }
        if self.cannot != *cannot {
            self.cannot.clone_from(cannot);
        }
        if self.parked != *parked {
            self.parked.clone_from(parked);
        }
        if self.recent != *recent {
            self.recent.clone_from(recent);
        }
        self.park_gib_s = *park_gib_s;
        self.park_rate_measured = *park_rate_measured;
        self.resume_gib_s = *resume_gib_s;
        self.resume_rate_measured = *resume_rate_measured;
    }
}
