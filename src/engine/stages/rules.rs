//! Rules: pure decisions over the enriched sample and the watches' findings
//! ([`crate::act::rules::eval`]), then the runner, the only code that signals, spawns or asks
//! a process ([`crate::act::rules::action::ActionRunner`]); and the runner's follow-ups
//! (SIGKILL after a grace period, companion answers, parks), which arrive as activity entries
//! on a later tick.

use crate::act::rules::action::{ActionRunner, Activity, Safety};
use crate::act::rules::eval::{CompiledRule, Facts, RuleState};
use crate::model::history::ProcSeriesKey;
use crate::model::{FastMap, Snapshot, UnixMs};

/// The rules in force and what acts on them.
#[derive(Default)]
pub struct Rules {
    compiled: Vec<CompiledRule>,
    /// The uids of the rules' user names (looked up off the engine's thread).
    users: crate::host::user_names::UserIds,
    /// Dry run and protections.
    pub safety: Safety,
    state: RuleState,
    /// The runner (also for a front end's manual actions).
    pub runner: ActionRunner,
    /// A window's own actions may touch other users' processes (`cleanup.manual_other_users`).
    pub(crate) manual_other_users: bool,
    /// The OOM guard, acting through the same runner.
    pub guard: super::guard::GuardStage,
}

impl Rules {
    /// Takes the settings' rules (compiled once here, never per tick), global dry run and
    /// protections.
    pub fn apply_settings(&mut self, s: &crate::engine::settings::Settings) {
        self.compiled = crate::act::rules::eval::compile_with(&s.cleanup.rules, &mut self.users);
        self.safety = Safety {
            global_dry_run: s.cleanup.dry_run,
            protected: s.cleanup.protected.clone(),
            remote: self.safety.remote,
        };
        self.manual_other_users = s.cleanup.manual_other_users;
        self.guard.guard.set_settings(s.guard.clone());
    }

    /// True when an enabled rule needs per-process utilisation (an idle condition).
    pub(crate) fn needs_process_utilization(&self) -> bool {
        self.guard.needs_process_utilization()
            || self
                .compiled
                .iter()
                .any(|r| r.rule.enabled && r.rule.conditions.idle_min_minutes.is_some())
    }

    /// Shows parked processes (and those being parked or resumed) in `snap`; before it is
    /// enriched.
    pub fn annotate_parked(&self, snap: &mut Snapshot) {
        self.runner.annotate_parked(snap);
    }

    /// Evaluates the rules on `snap` and runs what they plan; with the runner's follow-ups
    /// due now; then the OOM guard's steps. `leaking`: the processes leaking now, since
    /// when; `growth`: how fast each grows (MiB/min); `alerts`: GPUs with a forecast alert.
    pub fn run(
        &mut self,
        snap: &Snapshot,
        leaking: &FastMap<ProcSeriesKey, UnixMs>,
        growth: &FastMap<ProcSeriesKey, f64>,
        alerts: &[u32],
        now: UnixMs,
    ) -> Vec<Activity> {
        self.state.observe(snap);
        self.state.refill_releasable_cache(snap);
        self.take_late_user_names();
        let found = super::guard::Findings {
            growth,
            leaking,
            alerts,
        };
        let guard = crate::host::cost::span(crate::host::cost::Part::Guard);
        let guarded = self
            .guard
            .run(snap, &found, &self.state, &mut self.runner, &self.safety);
        drop(guard);
        let planned = if self.compiled.is_empty() {
            Vec::new()
        } else {
            let facts = Facts {
                leaking_since: leaking.clone(),
            };
            self.state.evaluate(&self.compiled, snap, &facts)
        };
        // The GPUs' sizes for memory limits, and the driver's figure after cache releases.
        let mut acts = self.runner.observe(snap);
        acts.extend(
            planned
                .iter()
                .map(|p| self.runner.run(p, &self.safety, now)),
        );
        let holds = |k: &ProcSeriesKey| {
            snap.processes.iter().any(|p| {
                p.key() == k.0 && p.device_index == k.1 && p.used_bytes.is_some_and(|u| u > 0)
            })
        };
        acts.extend(self.runner.poll(&holds, now));
        acts.extend(guarded);
        acts
    }

    /// Compiles the rules again once a user name's lookup that was not waited out has
    /// answered (a rule with a name not answered matches nothing until then).
    fn take_late_user_names(&mut self) {
        if self.users.any_running() && self.users.resolved_late() {
            let users = &mut self.users;
            self.compiled = self
                .compiled
                .iter()
                .filter_map(|c| CompiledRule::with_users(&c.rule, users))
                .collect();
        }
    }

    /// The parks and resumes that ended since the last call.
    /// The guard is told of them here.
    pub fn take_park_records(
        &mut self,
        now: UnixMs,
    ) -> Vec<crate::act::rules::park_action::ParkRecord> {
        let records = self.runner.take_park_records();
        self.guard.park_ended(&records, now);
        // A park's time is said at the rate the guard measured (one estimate everywhere).
        let measured = self.guard.guard.timing().park_rate();
        self.runner
            .set_park_rate(if measured.1 { measured.0 } else { 0.0 });
        records
    }

    /// Makes `shown` (the View's) equal the OOM guard's status on each GPU, copying only what
    /// changed.
    pub(crate) fn show_guard_status(&self, shown: &mut Vec<crate::act::guard::GuardStatus>) {
        self.guard.guard.show_status(shown);
        // The global dry run holds the guard back too: its status says so (its tab said it
        // acts while every step was only said).
        if self.safety.global_dry_run {
            for g in shown.iter_mut() {
                g.dry_run = true;
            }
        }
    }

    /// When each process was last active (for the View).
    pub fn last_active(&self) -> FastMap<ProcSeriesKey, UnixMs> {
        self.state.last_active()
    }

    /// Makes `shown` (the View's) equal [`Rules::last_active`], in its room.
    pub(crate) fn show_last_active(&self, shown: &mut FastMap<ProcSeriesKey, UnixMs>) {
        self.state.last_active_into(shown);
    }
}
