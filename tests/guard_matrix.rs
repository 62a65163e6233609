//! The OOM guard over a matrix of growth rates, GPU sizes and job mixes, on CPU.
//!
//! The detectors and the guard are the engine's own ([`DryGuard`]: the leak watch, its
//! forecast, the forecast alert, the idle clock and the guard's decisions). The GPU is a
//! stand-in (`StandInGpu`, below): one GPU whose jobs take memory at scripted rates, a job
//! that asks for more than is free dies of OOM, a park takes 2.4 GiB/s + 2 s (the H100's rate,
//! a fixed cost above its 0.35 s; a resume 6.5 GiB/s + 2 s), a parked job makes no progress, and a
//! resume into too little free memory strands the job (as the driver does). Every scenario
//! runs with the guard's defaults (acting: dry run off) and without the guard.

use std::sync::Arc;

use vramwarden::act::guard::{ParkEnd, StepKind};
use vramwarden::engine::guard_replay::DryGuard;
use vramwarden::engine::settings::Settings;
use vramwarden::model::outcome::Outcome;
use vramwarden::model::{
    DeviceSample, Origin, ParkInfo, ParkState, ProcInfo, ProcessSample, Snapshot, GIB,
};

const T0: i64 = 1_700_000_000_000;
const PARK_GIB_S: f64 = 2.4;
/// The fixed part of a park's or resume's time: 2 s, slower than the H100's (a fit over 10
/// and 40.5 GiB in 4.4 and 16.8 s, 6.5 and 44.3 GiB in 2.9 and 17.9 s gives 0.35 s), so a
/// short park's time says less of a long one's than it does on that card.
const FIXED_S: f64 = 2.0;
const RESUME_GIB_S: f64 = 6.5;

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Run,
    Parking { until: f64, bytes: u64, since: f64 },
    Parked { bytes: u64, since: f64 },
    Resuming { until: f64, bytes: u64, since: f64 },
    Done,
    Dead(&'static str),
}

#[derive(Debug, Clone)]
struct Job {
    pid: u32,
    start_s: f64,
    base_gib: f64,
    rate_gib_s: f64,
    target_gib: f64,
    /// Seconds it keeps its target size before it exits (None: it runs to the end).
    hold_s: Option<f64>,
    busy: bool,
    progress_s: f64,
    held_s: f64,
    state: State,
}

impl Job {
    fn new(pid: u32, start_s: f64, base_gib: f64, rate_gib_s: f64, target_gib: f64) -> Self {
        Self {
            pid,
            start_s,
            base_gib,
            rate_gib_s,
            target_gib,
            hold_s: Some(30.0),
            busy: true,
            progress_s: 0.0,
            held_s: 0.0,
            state: State::Run,
        }
    }

    fn idle(pid: u32, gib: f64) -> Self {
        Self {
            busy: false,
            hold_s: None,
            ..Self::new(pid, 0.0, gib, 0.0, gib)
        }
    }

    fn wants(&self, progress_s: f64) -> u64 {
        let gib = (self.base_gib + self.rate_gib_s * progress_s).min(self.target_gib);
        (gib * GIB as f64) as u64
    }

    /// GPU memory it holds now.
    fn on_gpu(&self) -> u64 {
        match self.state {
            State::Run => self.wants(self.progress_s),
            State::Parking { bytes, .. } | State::Resuming { bytes, .. } => bytes,
            State::Parked { .. } | State::Done | State::Dead(_) => 0,
        }
    }
}

/// A stand-in for one GPU and its jobs (see the file's comment).
struct StandInGpu {
    total: u64,
    jobs: Vec<Job>,
    stranded: Vec<u32>,
    parks: usize,
    /// Parks and resumes asked for, run one at a time as the park thread does.
    queue: std::collections::VecDeque<(u32, StepKind)>,
    busy_until: f64,
}

impl StandInGpu {
    fn new(total_gib: f64, jobs: Vec<Job>) -> Self {
        Self {
            total: (total_gib * GIB as f64) as u64,
            jobs,
            stranded: Vec::new(),
            parks: 0,
            queue: std::collections::VecDeque::new(),
            busy_until: 0.0,
        }
    }
}

impl StandInGpu {
    fn used_except(&self, pid: u32) -> u64 {
        self.jobs
            .iter()
            .filter(|j| j.pid != pid)
            .map(Job::on_gpu)
            .sum()
    }

    /// One second of the jobs' lives at time `t`; the parks and resumes that ended.
    fn advance(&mut self, t: f64) -> Vec<ParkEnd> {
        let mut ended = Vec::new();
        if t >= self.busy_until {
            if let Some((pid, kind)) = self.queue.pop_front() {
                self.begin(pid, kind, t);
            }
        }
        for i in 0..self.jobs.len() {
            let others = self.used_except(self.jobs[i].pid);
            let total = self.total;
            let j = &mut self.jobs[i];
            if t < j.start_s {
                continue;
            }
            match j.state {
                State::Run => {
                    if j.wants(j.progress_s + 1.0) + others > total {
                        j.state = State::Dead("OOM");
                        continue;
                    }
                    j.progress_s += 1.0;
                    if j.wants(j.progress_s) >= (j.target_gib * GIB as f64) as u64 {
                        j.held_s += 1.0;
                        if j.hold_s.is_some_and(|h| j.held_s >= h) {
                            j.state = State::Done;
                        }
                    }
                }
                State::Parking {
                    until,
                    bytes,
                    since,
                } if t >= until => {
                    j.state = State::Parked { bytes, since };
                    ended.push(end(j.pid, false, bytes, until - since));
                }
                State::Resuming {
                    until,
                    bytes,
                    since,
                } if t >= until => {
                    j.state = State::Run;
                    ended.push(end(j.pid, true, bytes, until - since));
                }
                _ => {}
            }
        }
        ended
    }

    fn snapshot(&self, t: f64) -> Snapshot {
        let used: u64 = self.jobs.iter().map(Job::on_gpu).sum();
        let processes = self
            .jobs
            .iter()
            .filter(|j| t >= j.start_s && !matches!(j.state, State::Done | State::Dead(_)))
            .map(sample)
            .collect();
        Snapshot {
            taken_at_ms: T0 + (t * 1000.0) as i64,
            devices: vec![DeviceSample {
                index: 0,
                name: "stand-in".into(),
                memory_total_bytes: Some(self.total),
                memory_used_bytes: Some(used),
                memory_free_bytes: Some(self.total.saturating_sub(used)),
                ..DeviceSample::default()
            }],
            processes,
        }
    }

    /// Queues what the guard asked for.
    fn start(&mut self, pid: u32, kind: StepKind, t: f64) {
        self.queue.push_back((pid, kind));
        if t >= self.busy_until {
            if let Some((pid, kind)) = self.queue.pop_front() {
                self.begin(pid, kind, t);
            }
        }
    }

    /// Starts a park or resume on the park thread.
    fn begin(&mut self, pid: u32, kind: StepKind, t: f64) {
        let others = self.used_except(pid);
        let total = self.total;
        let Some(j) = self.jobs.iter_mut().find(|j| j.pid == pid) else {
            return;
        };
        match (kind, j.state) {
            (StepKind::ParkIdle | StepKind::PauseGrower, State::Run) => {
                let bytes = j.on_gpu();
                let secs = FIXED_S + bytes as f64 / GIB as f64 / PARK_GIB_S;
                j.state = State::Parking {
                    until: t + secs,
                    bytes,
                    since: t,
                };
                self.parks += 1;
                self.busy_until = t + secs;
            }
            (StepKind::Resume, State::Parked { bytes, .. }) => {
                if others + bytes > total {
                    // The driver's restore out of memory: the process is lost.
                    self.stranded.push(pid);
                    j.state = State::Dead("stranded");
                    return;
                }
                let secs = FIXED_S + bytes as f64 / GIB as f64 / RESUME_GIB_S;
                j.state = State::Resuming {
                    until: t + secs,
                    bytes,
                    since: t,
                };
                self.busy_until = t + secs;
            }
            _ => {}
        }
    }
}

fn key(pid: u32) -> vramwarden::model::history::ProcSeriesKey {
    (
        vramwarden::model::ProcessKey {
            pid,
            start_time_ms: T0 + i64::from(pid),
        },
        0,
    )
}

fn end(pid: u32, resume: bool, bytes: u64, seconds: f64) -> ParkEnd {
    ParkEnd {
        key: key(pid),
        resume,
        ok: true,
        bytes: Some(bytes),
        seconds,
        stranded: false,
        refused: false,
        detail: "stand-in".into(),
    }
}

fn sample(j: &Job) -> ProcessSample {
    let parked = match j.state {
        State::Parking { since, bytes, .. } => Some((ParkState::Parking, bytes, since)),
        State::Parked { bytes, since } => Some((ParkState::Parked, bytes, since)),
        State::Resuming { bytes, since, .. } => Some((ParkState::Resuming, bytes, since)),
        _ => None,
    };
    ProcessSample {
        pid: j.pid,
        device_index: 0,
        used_bytes: Some(j.on_gpu()),
        sm_util_pct: Some(if j.busy && parked.is_none() { 60 } else { 0 }),
        info: Some(Arc::new(ProcInfo {
            name: format!("job{}", j.pid),
            user: "me".into(),
            start_time_ms: T0 + i64::from(j.pid),
            ..ProcInfo::default()
        })),
        origin: Origin::Live,
        parked: parked.map(|(state, bytes, since)| ParkInfo {
            state,
            bytes: Some(bytes),
            since_ms: T0 + (since * 1000.0) as i64,
        }),
        ..ProcessSample::default()
    }
}

/// Runs `gpu` for `secs` with the guard (its defaults, acting) or without; the jobs' ends.
fn run(mut gpu: StandInGpu, secs: u32, guard: bool) -> StandInGpu {
    let mut s = Settings::default();
    s.guard.enabled = guard;
    s.guard.dry_run = false;
    let mut dry = DryGuard::new(&s);
    for i in 0..secs {
        let t = f64::from(i);
        let now = T0 + i64::from(i) * 1000;
        for e in gpu.advance(t) {
            dry.guard.park_ended(&e, now);
        }
        let mut snap = gpu.snapshot(t);
        for step in dry.tick(&mut snap).steps {
            // A step that frees memory always says why: a time to full, or the paused
            // grower it makes room for (never "no growth", which only a resume may say).
            assert!(
                step.kind == StepKind::Resume || !step.reason().contains("no growth"),
                "{}",
                step.reason()
            );
            dry.guard.outcome(&step, Outcome::Acted, "stand-in", now);
            gpu.start(step.key.0.pid, step.kind, t);
        }
        if gpu
            .jobs
            .iter()
            .all(|j| matches!(j.state, State::Done | State::Dead(_)))
        {
            break;
        }
    }
    gpu
}

fn outcome(gpu: &StandInGpu) -> String {
    gpu.jobs
        .iter()
        .map(|j| format!("job{}: {:?}", j.pid, j.state))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Idle job holding 45 % of the GPU from the start; at 11 min (idle long enough for the
/// default 10 min) a job grows at `rate` from 2 GiB to more than is left, holds 30 s, ends.
fn idle_and_grower(total_gib: f64, rate: f64) -> StandInGpu {
    let idle = Job::idle(100, total_gib * 0.45);
    let grower = Job::new(200, 660.0, 2.0, rate, total_gib * 0.75);
    StandInGpu::new(total_gib, vec![idle, grower])
}

const RATES: [f64; 5] = [0.05, 0.1, 0.4, 1.0, 2.0];
const SIZES: [f64; 2] = [80.0, 140.0];

#[test]
fn an_idle_job_is_parked_in_time_and_resumed_after_every_job_lives() {
    for total in SIZES {
        for rate in RATES {
            let horizon = 660 + ((total * 0.75) / rate) as u32 + 900;
            let without = run(idle_and_grower(total, rate), horizon, false);
            assert_eq!(
                without.jobs[1].state,
                State::Dead("OOM"),
                "{total} GiB at {rate} GiB/s: without the guard the grower must die: {}",
                outcome(&without)
            );
            let with = run(idle_and_grower(total, rate), horizon, true);
            assert!(
                with.stranded.is_empty(),
                "{total} GiB at {rate}: {}",
                outcome(&with)
            );
            assert_eq!(
                with.jobs[1].state,
                State::Done,
                "{total} GiB at {rate} GiB/s: {}",
                outcome(&with)
            );
            assert_eq!(
                with.jobs[0].state,
                State::Run,
                "{total} GiB at {rate} GiB/s: the idle job back: {}",
                outcome(&with)
            );
            assert!(with.parks >= 1, "{total} GiB at {rate}");
        }
    }
}

/// Two jobs growing at once, each alone fits, together they do not: one is paused, the
/// other finishes, then the paused one comes back and finishes.
#[test]
fn of_two_growers_one_waits_paused_and_both_finish() {
    for total in SIZES {
        for rate in RATES {
            let jobs = || {
                let mut a = Job::new(300, 0.0, 2.0, rate, total * 0.55);
                let mut b = Job::new(400, 5.0, 2.0, rate * 0.8, total * 0.55);
                // Each holds its size a while: their peaks overlap at every rate.
                a.hold_s = Some(0.3 * total / rate);
                b.hold_s = a.hold_s;
                StandInGpu::new(total, vec![a, b])
            };
            let horizon = ((total * 1.6) / (rate * 0.8)) as u32 + 1200;
            let without = run(jobs(), horizon, false);
            assert!(
                without.jobs.iter().any(|j| j.state == State::Dead("OOM")),
                "{total} GiB at {rate}: {}",
                outcome(&without)
            );
            let with = run(jobs(), horizon, true);
            assert!(
                with.stranded.is_empty(),
                "{total} GiB at {rate}: {}",
                outcome(&with)
            );
            assert!(
                with.jobs.iter().all(|j| j.state == State::Done),
                "{total} GiB at {rate} GiB/s: {}",
                outcome(&with)
            );
        }
    }
}

/// Nothing idle: a busy job holds half the GPU and ends later; the grower is paused before
/// its OOM and resumed once the busy job has ended: the OOM became a wait.
#[test]
fn with_nothing_idle_the_grower_is_paused_then_resumed_when_the_gpu_has_room() {
    for total in SIZES {
        for rate in RATES {
            let grow_s = (total * 0.6) / rate;
            let jobs = || {
                // It takes its half in one jump (a model load), seen on an H100 to look like a
                // grower filling the GPU in a second.
                let mut busy = Job::new(500, 20.0, total * 0.5, 0.0, total * 0.5);
                busy.hold_s = Some(grow_s + 300.0);
                StandInGpu::new(
                    total,
                    vec![busy, Job::new(600, 30.0, 2.0, rate, total * 0.6)],
                )
            };
            let horizon = (grow_s * 2.0) as u32 + 1500;
            let without = run(jobs(), horizon, false);
            assert_eq!(
                without.jobs[1].state,
                State::Dead("OOM"),
                "{total} at {rate}"
            );
            let with = run(jobs(), horizon, true);
            assert!(
                with.stranded.is_empty(),
                "{total} GiB at {rate}: {}",
                outcome(&with)
            );
            assert!(
                with.jobs.iter().all(|j| j.state == State::Done),
                "{total} GiB at {rate} GiB/s: {}",
                outcome(&with)
            );
        }
    }
}
