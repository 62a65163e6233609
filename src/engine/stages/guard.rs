//! The OOM guard's stage: turns the enriched sample and the detectors' findings into the
//! guard's facts ([`crate::act::guard::GpuFacts`]), runs the steps it asks for through the
//! executor (policy, dry run and identity checked there, as for every action), and tells it
//! how each ended.

use crate::act::guard::{GpuFacts, Guard, ParkEnd, ProcFacts, Step, StepKind};
use crate::act::rules::action::{ActionRunner, Activity, Safety};
use crate::act::rules::eval::{find_process_target, Planned, RuleState};
use crate::act::rules::park_action::{ParkKind, ParkRecord};
use crate::act::rules::Action;
use crate::model::history::ProcSeriesKey;
use crate::model::{FastMap, ProcessSample, Snapshot, UnixMs, MIB};
use std::sync::Arc;

/// How long a "may it be parked" answer is reused (it reads `/proc`).
const REFUSAL_TTL_MS: i64 = 10_000;

/// What the guard needs to know beside the sample.
pub(crate) struct Findings<'a> {
    /// How fast each process grows now (MiB/min), from the leak watch.
    pub growth: &'a FastMap<ProcSeriesKey, f64>,
    /// Since when each leaking process was flagged.
    pub leaking: &'a FastMap<ProcSeriesKey, UnixMs>,
    /// The GPUs with a forecast alert raised.
    pub alerts: &'a [u32],
}

/// How the guard names a process: `python3 (PID 4242)`.
pub(crate) fn who_of(p: &ProcessSample) -> String {
    format!("{} (PID {})", name_of(p), p.pid)
}

fn name_of(p: &ProcessSample) -> &str {
    p.info.as_deref().map_or("?", |i| i.name.as_str())
}

/// The guard's names of processes ([`who_of`]), made once per process and name rather than
/// on every tick, and shared (a tick copies none).
#[derive(Debug, Default)]
pub(crate) struct Names(crate::model::FastMap<ProcSeriesKey, (String, Arc<str>)>);

impl Names {
    /// [`who_of`]`(p)`, from the cache while the process keeps its name.
    pub(crate) fn who(&mut self, p: &ProcessSample) -> Arc<str> {
        let name = name_of(p);
        let (cached, who) = self
            .0
            .entry((p.key(), p.device_index))
            .or_insert_with(|| (name.to_string(), who_of(p).into()));
        if cached != name {
            *cached = name.to_string();
            *who = who_of(p).into();
        }
        who.clone()
    }

    /// Forgets the processes not in `snap` once the cache holds twice as many as it lists.
    fn trim(&mut self, snap: &Snapshot) {
        if self.0.len() > 2 * snap.processes.len() + 16 {
            let listed: crate::model::FastSet<ProcSeriesKey> = snap
                .processes
                .iter()
                .map(|p| (p.key(), p.device_index))
                .collect();
            self.0.retain(|k, _| listed.contains(k));
        }
    }
}

/// The guard's facts per GPU from `snap` and the detectors' findings; `idle_s` says how long
/// a process has been GPU-idle, `who` names it, `unparkable` says why it may not be parked.
pub(crate) fn gpu_facts(
    snap: &Snapshot,
    found: &Findings,
    idle_s: &dyn Fn(&ProcSeriesKey) -> Option<f64>,
    who: &mut dyn FnMut(&ProcessSample) -> Arc<str>,
    unparkable: &mut dyn FnMut(&ProcessSample) -> Option<Arc<str>>,
) -> Vec<GpuFacts> {
    let mut gpus = Vec::new();
    gpu_facts_into(&mut gpus, snap, found, idle_s, who, unparkable);
    gpus
}

/// [`gpu_facts`] written into `gpus` (the last tick's facts: their lists' room is reused).
pub(crate) fn gpu_facts_into(
    gpus: &mut Vec<GpuFacts>,
    snap: &Snapshot,
    found: &Findings,
    idle_s: &dyn Fn(&ProcSeriesKey) -> Option<f64>,
    who: &mut dyn FnMut(&ProcessSample) -> Arc<str>,
    unparkable: &mut dyn FnMut(&ProcessSample) -> Option<Arc<str>>,
) {
    gpus.truncate(snap.devices.len());
    for (i, d) in snap.devices.iter().enumerate() {
        let facts = device_facts(d, found);
        match gpus.get_mut(i) {
            Some(g) => {
                let mut procs = std::mem::take(&mut g.procs);
                procs.clear();
                *g = GpuFacts { procs, ..facts };
            }
            None => gpus.push(facts),
        }
    }
    for p in snap.processes.iter().filter(|p| !p.stale) {
        let Some(g) = gpus.iter_mut().find(|g| g.index == p.device_index) else {
            continue;
        };
        g.procs.push(process_facts(
            p,
            found,
            snap.taken_at_ms,
            idle_s,
            who,
            unparkable,
        ));
    }
    // Where the forecast has no rate (free memory at 0), the processes' sum.
    for g in gpus.iter_mut() {
        if g.growth_bytes_s <= 0.0 && g.free_bytes == 0 {
            g.growth_bytes_s = g.procs.iter().map(|p| p.growth_bytes_s).sum();
        }
    }
}

/// The guard's facts of GPU `d`, without its processes.
fn device_facts(d: &crate::model::DeviceSample, found: &Findings) -> GpuFacts {
    // Free memory, else what the driver's figures make it (total = reserved + used + free);
    // unknown stays unknown, never 0.
    let read = d.memory_free_bytes.or_else(|| {
        let used = d.memory_used_bytes?.checked_add(d.memory_reserved_bytes?)?;
        d.memory_total_bytes?.checked_sub(used)
    });
    let free = read.unwrap_or(0);
    GpuFacts {
        index: d.index,
        total_bytes: d.memory_total_bytes.unwrap_or(0),
        free_bytes: free,
        memory_read: read.is_some(),
        growth_bytes_s: d
            .time_to_full_s
            .filter(|t| *t > 0.5)
            .map_or(0.0, |t| free as f64 / t),
        alert: found.alerts.contains(&d.index),
        procs: Vec::new(),
    }
}

/// The guard's facts of process `p` at `now`.
fn process_facts(
    p: &ProcessSample,
    found: &Findings,
    now: UnixMs,
    idle_s: &dyn Fn(&ProcSeriesKey) -> Option<f64>,
    who: &mut dyn FnMut(&ProcessSample) -> Arc<str>,
    unparkable: &mut dyn FnMut(&ProcessSample) -> Option<Arc<str>>,
) -> ProcFacts {
    let key = (p.key(), p.device_index);
    ProcFacts {
        key,
        who: who(p),
        bytes: p.used_bytes.unwrap_or(0),
        growth_bytes_s: found
            .growth
            .get(&key)
            .map_or(0.0, |r| (r * MIB as f64 / 60.0).max(0.0)),
        idle_s: idle_s(&key),
        releasable_bytes: p.torch.map_or(0, |t| t.releasable_bytes()),
        leaking_s: found.leaking.get(&key).map(|t| (now - t) as f64 / 1000.0),
        parked: p.parked,
        unparkable: if p.parked.is_some() {
            None
        } else {
            unparkable(p)
        },
    }
}

/// The guard and its cache of park refusals.
#[derive(Default)]
pub struct GuardStage {
    /// The guard.
    pub guard: Guard,
    refusals: crate::model::FastMap<ProcSeriesKey, (UnixMs, Option<Arc<str>>)>,
    names: Names,
    /// The last tick's facts, kept for their room.
    facts: Vec<GpuFacts>,
}

impl GuardStage {
    /// True when the guard needs per-process utilisation (to know who is idle).
    pub(crate) fn needs_process_utilization(&self) -> bool {
        let s = self.guard.settings();
        s.enabled && s.park_idle
    }

    /// One tick: facts, decisions, the steps run. `state` knows who was last active.
    pub(crate) fn run(
        &mut self,
        snap: &Snapshot,
        found: &Findings,
        state: &RuleState,
        runner: &mut ActionRunner,
        safety: &Safety,
    ) -> Vec<Activity> {
        let now = snap.taken_at_ms;
        let mut facts = std::mem::take(&mut self.facts);
        self.facts_into(&mut facts, snap, found, state, runner, safety);
        let steps = self.guard.decide_in(&mut facts, now);
        self.facts = facts;
        steps
            .iter()
            .filter_map(|step| self.start(step, snap, runner, safety, now))
            .collect()
    }

    fn start(
        &mut self,
        step: &Step,
        snap: &Snapshot,
        runner: &mut ActionRunner,
        safety: &Safety,
        now: UnixMs,
    ) -> Option<Activity> {
        let target = find_process_target(snap, &step.key)?;
        let p = self.planned(step, target);
        let mut a = runner.run(&p, safety, now);
        a.detail = format!("{} — {}", step.reason(), a.detail);
        self.guard.outcome(step, a.outcome, &a.detail, now);
        Some(a)
    }

    fn planned(&self, step: &Step, target: crate::act::rules::eval::Target) -> Planned {
        let s = self.guard.settings();
        Planned {
            rule: step.kind.rule_name(),
            action: match step.kind {
                StepKind::ReleaseCache => Action::ReleaseCache,
                StepKind::ParkIdle | StepKind::PauseGrower => Action::Park,
                StepKind::TerminateLeaker => Action::Terminate {
                    grace_seconds: crate::act::rules::model::DEFAULT_GRACE_SECONDS,
                },
                StepKind::Resume => Action::Resume,
            },
            dry_run: s.dry_run,
            allow_other_users: s.allow_other_users,
            target,
        }
    }

    /// Tells the guard how parks and resumes ended.
    pub(crate) fn park_ended(&mut self, records: &[ParkRecord], now: UnixMs) {
        for r in records {
            self.guard.park_ended(
                &ParkEnd {
                    key: r.key,
                    resume: r.kind == ParkKind::Resume,
                    ok: r.ok,
                    bytes: r.bytes,
                    seconds: r.seconds,
                    stranded: r.stranded,
                    refused: r.refused,
                    detail: r.detail.clone(),
                },
                now,
            );
        }
    }

    /// The guard's facts per GPU, written into `facts`.
    fn facts_into(
        &mut self,
        facts: &mut Vec<GpuFacts>,
        snap: &Snapshot,
        found: &Findings,
        state: &RuleState,
        runner: &ActionRunner,
        safety: &Safety,
    ) {
        let now = snap.taken_at_ms;
        self.refusals
            .retain(|_, (at, _)| now - *at < REFUSAL_TTL_MS);
        let idle = |k: &ProcSeriesKey| state.idle_ms(k, now).map(|ms| ms as f64 / 1000.0);
        // A guard turned off reads nothing of /proc for its "cannot" list.
        let enabled = self.guard.settings().enabled;
        let mut names = std::mem::take(&mut self.names);
        names.trim(snap);
        gpu_facts_into(facts, snap, found, &idle, &mut |p| names.who(p), &mut |p| {
            enabled
                .then(|| self.unparkable(p, runner, safety, now))
                .flatten()
        });
        self.names = names;
    }

    /// Why `p` may not be parked (policy and the driver's preconditions), cached a while.
    fn unparkable(
        &mut self,
        p: &ProcessSample,
        runner: &ActionRunner,
        safety: &Safety,
        now: UnixMs,
    ) -> Option<Arc<str>> {
        let key = (p.key(), p.device_index);
        if let Some((_, why)) = self.refusals.get(&key) {
            return why.clone();
        }
        let s = self.guard.settings();
        let planned = Planned {
            rule: StepKind::ParkIdle.rule_name(),
            action: Action::Park,
            dry_run: s.dry_run,
            allow_other_users: s.allow_other_users,
            target: crate::act::rules::eval::process_target(p),
        };
        let why: Option<Arc<str>> = runner.would_refuse(&planned, safety).map(Arc::from);
        self.refusals.insert(key, (now, why.clone()));
        why
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ProcInfo, ProcessKey};

    fn proc(pid: u32, start: UnixMs, name: Option<&str>) -> ProcessSample {
        ProcessSample {
            pid,
            info: name.map(|n| {
                Arc::new(ProcInfo {
                    name: n.into(),
                    start_time_ms: start,
                    ..ProcInfo::default()
                })
            }),
            ..ProcessSample::default()
        }
    }

    /// Free memory missing from a reading (an imported log without `memory.free`, a failed
    /// driver call) comes from the other three figures where they were read, and is otherwise
    /// unknown to the guard, not 0.
    #[test]
    fn free_memory_comes_from_the_other_figures_or_stays_unknown() {
        let gib = 1u64 << 30;
        let device = |free: Option<u64>, reserved: Option<u64>| crate::model::DeviceSample {
            memory_total_bytes: Some(80 * gib),
            memory_used_bytes: Some(30 * gib),
            memory_reserved_bytes: reserved,
            memory_free_bytes: free,
            ..crate::model::DeviceSample::default()
        };
        let snap = Snapshot {
            devices: vec![
                device(Some(49 * gib), Some(gib)),
                device(None, Some(gib)),
                device(None, None),
                // A crafted log's figures that overflow: unknown, never a panic.
                device(None, Some(u64::MAX)),
            ],
            ..Snapshot::default()
        };
        let none = FastMap::default();
        let found = Findings {
            growth: &none,
            leaking: &FastMap::default(),
            alerts: &[],
        };
        let facts = gpu_facts(
            &snap,
            &found,
            &|_| None,
            &mut |_| Arc::from(""),
            &mut |_| None,
        );
        let read: Vec<(bool, u64)> = facts
            .iter()
            .map(|g| (g.memory_read, g.free_bytes / gib))
            .collect();
        assert_eq!(read, [(true, 49), (true, 49), (false, 0), (false, 0)]);
    }

    #[test]
    fn names_are_made_once_per_process_and_name_and_equal_who_of() {
        let mut names = Names::default();
        let a = proc(7, 1_000, Some("python3"));
        assert_eq!(&*names.who(&a), "python3 (PID 7)");
        assert_eq!(&*names.who(&a), who_of(&a).as_str());
        assert_eq!(&*names.who(&proc(8, 0, None)), "? (PID 8)");
        // The process renames itself (its facts read again): the new name is used.
        assert_eq!(
            &*names.who(&proc(9, 2_000, Some("python3"))),
            "python3 (PID 9)"
        );
        assert_eq!(
            &*names.who(&proc(9, 2_000, Some("trainer"))),
            "trainer (PID 9)"
        );
        // A reused PID (another start time) is another process.
        let reused = proc(7, 5_000, Some("bash"));
        assert_eq!(&*names.who(&reused), "bash (PID 7)");
        assert_eq!(&*names.who(&a), "python3 (PID 7)");
        // Once it holds far more than the sample lists, the cache keeps only those listed.
        for pid in 100..140 {
            names.who(&proc(pid, 1, Some("x")));
        }
        let snap = Snapshot {
            processes: vec![a.clone()],
            ..Snapshot::default()
        };
        names.trim(&snap);
        assert_eq!(names.0.len(), 1);
        assert!(names.0.contains_key(&(
            ProcessKey {
                pid: 7,
                start_time_ms: 1_000
            },
            0
        )));
    }
}
