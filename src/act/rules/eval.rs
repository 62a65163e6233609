//! Pure rule evaluation: which rules fire on which targets at `now`, with hysteresis
//! (conditions must hold for `hold_seconds`) and a cooldown per rule and target.

use std::collections::{HashMap, VecDeque};

use super::model::{Action, Rule};
use super::schedule::{Occurrence, Schedule};
use crate::host::user_names::{UidOf, UserIds};
use crate::model::history::ProcSeriesKey;
use crate::model::{FastMap, FastSet, Snapshot, UnixMs, MIB};

/// What a rule acts on.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Target {
    /// A process on a GPU.
    Process {
        /// Identity (pid + start time) and GPU.
        key: ProcSeriesKey,
        /// Its facts (the one process-facts type; None when /proc could not be read): see
        /// [`Target::name`], [`Target::user`], [`Target::uid`].
        info: Option<std::sync::Arc<crate::model::ProcInfo>>,
        /// GPU memory it holds.
        used_bytes: Option<u64>,
        /// Live host process, simulated, or read back from a log: only live ones are acted on.
        origin: crate::model::Origin,
    },
    /// A whole GPU.
    Device(u32),
}

impl Target {
    /// The target for process `key` (pid + start time, GPU) with its facts, the GPU memory it
    /// holds and where it comes from: the one place a [`Target::Process`] is made.
    pub fn process(
        key: ProcSeriesKey,
        info: Option<std::sync::Arc<crate::model::ProcInfo>>,
        used_bytes: Option<u64>,
        origin: crate::model::Origin,
    ) -> Self {
        Target::Process {
            key,
            info,
            used_bytes,
            origin,
        }
    }

    fn id(&self) -> TargetId {
        match self {
            Target::Process { key, .. } => TargetId::Process(*key),
            Target::Device(i) => TargetId::Device(*i),
        }
    }

    /// The GPU.
    pub fn device_index(&self) -> u32 {
        match self {
            Target::Process { key, .. } => key.1,
            Target::Device(i) => *i,
        }
    }

    /// A few words naming it.
    pub fn describe(&self) -> String {
        match self {
            Target::Process {
                key, used_bytes, ..
            } => {
                // A parked process holds nothing on the GPU: "0 MiB" would read as a reading.
                let held = match used_bytes.map(|b| b / MIB) {
                    Some(mib) if mib > 0 => format!(", {mib} MiB"),
                    _ => String::new(),
                };
                format!(
                    "{} (PID {}, user {}, GPU {}{held})",
                    self.name(),
                    key.0.pid,
                    self.user(),
                    key.1,
                )
            }
            Target::Device(i) => format!("GPU {i}"),
        }
    }

    /// The process's name ("" for a GPU or when unknown).
    pub fn name(&self) -> &str {
        match self {
            Target::Process { info: Some(i), .. } => &i.name,
            _ => "",
        }
    }

    /// The process's owner ("" for a GPU or when unknown).
    pub fn user(&self) -> &str {
        match self {
            Target::Process { info: Some(i), .. } => &i.user,
            _ => "",
        }
    }

    /// The owner's uid; `u32::MAX` when unknown (never taken for root's 0).
    pub fn uid(&self) -> u32 {
        match self {
            Target::Process { info: Some(i), .. } => i.uid,
            _ => u32::MAX,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum TargetId {
    Process(ProcSeriesKey),
    Device(u32),
}

/// A rule that fired: what to do to what.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The rule's name.
    pub rule: String,
    /// Its action.
    pub action: Action,
    /// Whether it only logs.
    pub dry_run: bool,
    /// May act on other users' processes.
    pub allow_other_users: bool,
    /// The target.
    pub target: Target,
}

/// Facts the evaluation needs beyond the snapshot.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Since when each leaking process series has been flagged.
    pub leaking_since: FastMap<ProcSeriesKey, UnixMs>,
}

/// Evaluation state carried between ticks.
#[derive(Debug, Clone, Default)]
pub struct RuleState {
    held_since: FastMap<(String, TargetId), UnixMs>,
    last_fired: FastMap<(String, TargetId), UnixMs>,
    /// Per process: (last memory seen, last time it was busy or its memory changed).
    activity: FastMap<ProcSeriesKey, (Option<u64>, UnixMs)>,
    /// Per process and GPU: the PyTorch allocator's releasable cache (reserved − allocated),
    /// as its companion last reported it (see [`RuleState::set_releasable_cache`]).
    releasable_cache: FastMap<ProcSeriesKey, u64>,
    /// The local time zone's offset from UTC for schedules (`None`: the host's, read when a
    /// rule with a schedule is evaluated; see [`RuleState::set_utc_offset_s`]).
    utc_offset_s: Option<i32>,
    /// The schedule occurrence each rule last fired in, per target (once per occurrence).
    schedule_fired: FastMap<(String, TargetId), Occurrence>,
    /// The processes of the sample being observed (kept between ticks for its room).
    seen: FastSet<ProcSeriesKey>,
    /// Per process and GPU: PyTorch's allocated bytes over the last [`GROWTH_WINDOW_MS`], as
    /// (time, bytes), from the snapshots' [`crate::model::TorchMem`] (see [`RuleState::observe`]).
    allocated: FastMap<ProcSeriesKey, VecDeque<(UnixMs, u64)>>,
}

/// How far back `allocated_growth_min_mib_per_min` looks: five minutes of readings.
pub(crate) const GROWTH_WINDOW_MS: UnixMs = 5 * 60_000;
/// The readings must span at least this long (one minute) before a growth rate is given, so
/// a process that has just started (or a companion that has just appeared) never matches on
/// its first jump.
pub(crate) const GROWTH_MIN_SPAN_MS: UnixMs = 60_000;

/// The releasable PyTorch cache (reserved − allocated) of every process in `snap` whose
/// companion answered this tick (its [`crate::model::ProcessSample::torch`]), for
/// [`RuleState::set_releasable_cache`]. Stale entries (carried forward, not measured) are left
/// out.
pub(crate) fn releasable_cache_of(snap: &Snapshot) -> FastMap<ProcSeriesKey, u64> {
    snap.processes
        .iter()
        .filter(|p| !p.stale)
        .filter_map(|p| Some(((p.key(), p.device_index), p.torch?.releasable_bytes())))
        .collect()
}

/// Least-squares slope of `(time ms, bytes)` in MiB per minute; `None` with fewer than two
/// readings or when they span less than [`GROWTH_MIN_SPAN_MS`].
fn growth_mib_per_min(readings: &VecDeque<(UnixMs, u64)>) -> Option<f64> {
    let (first, last) = (readings.front()?.0, readings.back()?.0);
    if readings.len() < 2 || last - first < GROWTH_MIN_SPAN_MS {
        return None;
    }
    let n = readings.len() as f64;
    let pts = || {
        readings
            .iter()
            .map(|(t, b)| ((t - first) as f64 / 60_000.0, *b as f64 / MIB as f64))
    };
    let (mx, my) = pts().fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = pts().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    (sxx > 0.0).then(|| sxy / sxx)
}

/// A rule ready to evaluate every tick: its regular expressions compiled once (with the size
/// limit of [`super::model::compile_regex`]) and its user names resolved to uids through NSS.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    /// The rule.
    pub rule: Rule,
    name_re: Option<regex::Regex>,
    cmdline_re: Option<regex::Regex>,
    /// `user_is` as a uid.
    user_is: Option<UidOf>,
    /// `user_is_not` as a uid.
    user_is_not: Option<UidOf>,
    /// `at` / `every_hours`, parsed.
    schedule: Option<Schedule>,
}

impl CompiledRule {
    /// Compiles `rule`; `None` when it is invalid (see [`Rule::problems`]). Its user names
    /// are looked up through NSS, each waited for at most a fifth of a second.
    pub fn new(rule: &Rule) -> Option<Self> {
        Self::with_users(rule, &mut UserIds::default())
    }

    /// [`CompiledRule::new`] with the user names looked up in `users` (the engine's, which
    /// keeps the answers and takes those that come late).
    pub(crate) fn with_users(rule: &Rule, users: &mut UserIds) -> Option<Self> {
        if !rule.problems().is_empty() {
            return None;
        }
        let re = |r: &Option<String>| -> Result<Option<regex::Regex>, String> {
            r.as_deref().map(super::model::compile_regex).transpose()
        };
        let mut user = |u: &Option<String>| u.as_deref().map(|n| users.uid(n));
        Some(Self {
            name_re: re(&rule.conditions.name_regex).ok()?,
            cmdline_re: re(&rule.conditions.cmdline_regex).ok()?,
            user_is: user(&rule.conditions.user_is),
            user_is_not: user(&rule.conditions.user_is_not),
            schedule: Schedule::new(rule.conditions.at.as_deref(), rule.conditions.every_hours)
                .ok()?,
            rule: rule.clone(),
        })
    }

    /// A user name of its conditions whose lookup has not answered: until it does, the rule
    /// matches no process (a `user_is_not` taken as "no such user" would let every user's
    /// processes in).
    pub(crate) fn user_not_answered(&self) -> Option<&str> {
        let c = &self.rule.conditions;
        [
            (&self.user_is, &c.user_is),
            (&self.user_is_not, &c.user_is_not),
        ]
        .into_iter()
        .find(|(uid, _)| **uid == Some(UidOf::NotAnswered))
        .and_then(|(_, name)| name.as_deref())
    }
}

/// The enabled, valid rules of `rules`, compiled (call when the settings change, not per tick).
pub fn compile(rules: &[Rule]) -> Vec<CompiledRule> {
    compile_with(rules, &mut UserIds::default())
}

/// [`compile`] with the user names looked up in `users`.
pub(crate) fn compile_with(rules: &[Rule], users: &mut UserIds) -> Vec<CompiledRule> {
    rules
        .iter()
        .filter(|r| r.enabled)
        .filter_map(|r| CompiledRule::with_users(r, users))
        .collect()
}

/// The target for process sample `p`: every fact from the snapshot, none from a front end.
pub fn process_target(p: &crate::model::ProcessSample) -> Target {
    Target::process(
        (p.key(), p.device_index),
        p.info.clone(),
        p.used_bytes,
        p.origin,
    )
}

/// The target for the process `key` (pid + start time, GPU) in `snap`, if it is there.
pub(crate) fn find_process_target(snap: &Snapshot, key: &ProcSeriesKey) -> Option<Target> {
    snap.processes
        .iter()
        .find(|p| p.key() == key.0 && p.device_index == key.1)
        .map(process_target)
}

/// Of `targets`, the one holding the most GPU memory on each GPU.
fn largest_per_gpu<'a>(
    targets: impl Iterator<Item = &'a Target>,
) -> std::collections::HashSet<TargetId> {
    let mut best: HashMap<u32, (u64, TargetId)> = HashMap::new();
    for t in targets {
        let Target::Process { used_bytes, .. } = t else {
            continue;
        };
        let used = used_bytes.unwrap_or(0);
        let e = best.entry(t.device_index()).or_insert((used, t.id()));
        if used > e.0 {
            *e = (used, t.id());
        }
    }
    best.into_values().map(|(_, id)| id).collect()
}

/// Whether `rule` acts on processes (else on GPUs).
fn on_processes(rule: &Rule) -> bool {
    rule.conditions.targets_processes() || rule.action.needs_process()
}

/// Whether `rule` acts on parked processes only: a parked process is the target of resume
/// rules only (parked is idle, and a rule meant for idle jobs must not end one that was parked
/// to be kept).
fn on_parked(rule: &Rule) -> bool {
    rule.action == super::Action::Resume || rule.conditions.parked_fits_with_mib.is_some()
}

/// What a rule on running processes leaves out, said after why it matches nothing: the
/// parked ones (the table counts them; only a resume rule looks at them).
fn parked_left_out(snap: &Snapshot, rule: &Rule) -> String {
    let parked = snap.processes.iter().filter(|p| p.parked.is_some()).count();
    if !on_processes(rule) || on_parked(rule) || parked == 0 {
        return String::new();
    }
    let what = crate::model::format::count(parked, "parked process", "parked processes");
    format!(" ({what} not looked at: only a resume rule acts on parked processes)")
}

fn targets(snap: &Snapshot, rule: &Rule) -> Vec<Target> {
    if on_processes(rule) {
        let for_parked = on_parked(rule);
        snap.processes
            .iter()
            .filter(|p| p.parked.is_some() == for_parked)
            .map(process_target)
            .collect()
    } else {
        snap.devices
            .iter()
            .map(|d| Target::Device(d.index))
            .collect()
    }
}

impl RuleState {
    /// Sets the time zone schedules are read in (seconds east of UTC); `None` (the default)
    /// uses the host's local time zone.
    pub fn set_utc_offset_s(&mut self, offset: Option<i32>) {
        self.utc_offset_s = offset;
    }

    /// The occurrence of `compiled`'s schedule open at `now`: `Some(None)` for a rule without
    /// a schedule, `None` when its schedule is closed.
    fn schedule_open(&self, compiled: &CompiledRule, now: UnixMs) -> Option<Option<Occurrence>> {
        match &compiled.schedule {
            None => Some(None),
            Some(s) => {
                let offset = self
                    .utc_offset_s
                    .unwrap_or_else(|| super::schedule::local_utc_offset_s(now));
                s.occurrence(now, offset).map(Some)
            }
        }
    }

    /// Sets the releasable PyTorch cache per process (pid + start time) and GPU (NVML index),
    /// from the companions (`crate::act::torch::Watch`); call once per tick before
    /// [`RuleState::evaluate`]. A process missing from `map` never matches
    /// `releasable_cache_min_mib`.
    pub(crate) fn set_releasable_cache(&mut self, map: FastMap<ProcSeriesKey, u64>) {
        self.releasable_cache = map;
    }

    /// Sets the releasable cache to [`releasable_cache_of`]`(snap)`, in the room of the last.
    pub(crate) fn refill_releasable_cache(&mut self, snap: &Snapshot) {
        self.releasable_cache.clear();
        self.releasable_cache.extend(
            snap.processes
                .iter()
                .filter(|p| !p.stale)
                .filter_map(|p| Some(((p.key(), p.device_index), p.torch?.releasable_bytes()))),
        );
    }

    /// Updates the per-process idle clocks, and the PyTorch allocated readings the growth
    /// condition uses, from a snapshot (call once per tick, before [`RuleState::evaluate`]).
    pub fn observe(&mut self, snap: &Snapshot) {
        let now = snap.taken_at_ms;
        let mut seen = std::mem::take(&mut self.seen);
        seen.clear();
        for p in &snap.processes {
            let key = (p.key(), p.device_index);
            seen.insert(key);
            if p.stale {
                // No reading this time: the idle clock neither runs on nor resets.
                continue;
            }
            if let Some(t) = p.torch {
                let r = self.allocated.entry(key).or_default();
                // Time only moves forward here (a clock step back restarts the window).
                if r.back().is_some_and(|(last, _)| *last >= now) {
                    r.clear();
                }
                r.push_back((now, t.allocated_bytes));
                while r.front().is_some_and(|(t0, _)| now - t0 > GROWTH_WINDOW_MS) {
                    r.pop_front();
                }
            }
            let busy = p.sm_util_pct.is_none_or(|u| u > 0);
            let e = self.activity.entry(key).or_insert((p.used_bytes, now));
            if busy || e.0 != p.used_bytes {
                e.1 = now;
            }
            e.0 = p.used_bytes;
        }
        self.activity.retain(|k, _| seen.contains(k));
        self.allocated.retain(|k, _| seen.contains(k));
        self.seen = seen;
    }

    /// Sets the PyTorch allocated readings (time, bytes; oldest first) of one process, for a
    /// state built outside the tick loop (the editor's "test this rule" fills it from the
    /// history); only the last [`GROWTH_WINDOW_MS`] are kept.
    pub(crate) fn set_allocated_readings(
        &mut self,
        key: ProcSeriesKey,
        readings: impl IntoIterator<Item = (UnixMs, u64)>,
    ) {
        let r: VecDeque<(UnixMs, u64)> = readings.into_iter().collect();
        let Some(&(last, _)) = r.back() else {
            self.allocated.remove(&key);
            return;
        };
        let r = r
            .into_iter()
            .filter(|(t, _)| last - t <= GROWTH_WINDOW_MS)
            .collect();
        self.allocated.insert(key, r);
    }

    /// How fast PyTorch's allocated memory of a process grew over the last
    /// [`GROWTH_WINDOW_MS`] (MiB per minute; see [`growth_mib_per_min`]), where its companion
    /// answered long enough.
    pub fn allocated_growth_mib_per_min(&self, key: &ProcSeriesKey) -> Option<f64> {
        growth_mib_per_min(self.allocated.get(key)?)
    }

    /// When each process was last busy (or its memory last changed).
    pub fn last_active(&self) -> FastMap<ProcSeriesKey, UnixMs> {
        self.activity.iter().map(|(k, (_, t))| (*k, *t)).collect()
    }

    /// [`RuleState::last_active`] written into `out` (its room kept).
    pub(crate) fn last_active_into(&self, out: &mut FastMap<ProcSeriesKey, UnixMs>) {
        out.clear();
        out.extend(self.activity.iter().map(|(k, (_, t))| (*k, *t)));
    }

    /// A state that knows when processes were last active (to test a rule against what the
    /// engine has seen).
    pub(crate) fn with_last_active(snap: &Snapshot, last: &FastMap<ProcSeriesKey, UnixMs>) -> Self {
        let mut s = Self::default();
        for p in &snap.processes {
            let k = (p.key(), p.device_index);
            s.activity.insert(
                k,
                (
                    p.used_bytes,
                    last.get(&k).copied().unwrap_or(snap.taken_at_ms),
                ),
            );
        }
        s
    }

    /// How long a process has been GPU-idle at `now`.
    pub(crate) fn idle_ms(&self, key: &ProcSeriesKey, now: UnixMs) -> Option<i64> {
        self.activity.get(key).map(|(_, t)| now - t)
    }

    /// The rules' decisions at the snapshot's time.
    pub fn evaluate(
        &mut self,
        rules: &[CompiledRule],
        snap: &Snapshot,
        facts: &Facts,
    ) -> Vec<Planned> {
        let mut out = Vec::new();
        let stale: std::collections::HashSet<TargetId> = snap
            .processes
            .iter()
            .filter(|p| p.stale)
            .map(|p| TargetId::Process((p.key(), p.device_index)))
            .collect();
        for compiled in rules.iter().filter(|r| r.rule.enabled) {
            self.evaluate_rule(compiled, snap, facts, &stale, &mut out);
        }
        self.forget_gone(rules, snap);
        out
    }

    /// One rule's actions due now, added to `out`: each target where its conditions hold
    /// (the largest per GPU only, where it asks), held long enough, out of its cooldown and
    /// not yet fired in this occurrence of its schedule. A `stale` target keeps its
    /// hysteresis and gets nothing.
    fn evaluate_rule(
        &mut self,
        compiled: &CompiledRule,
        snap: &Snapshot,
        facts: &Facts,
        stale: &std::collections::HashSet<TargetId>,
        out: &mut Vec<Planned>,
    ) {
        let rule = &compiled.rule;
        let now = snap.taken_at_ms;
        let Some(occurrence) = self.schedule_open(compiled, now) else {
            // Outside its schedule the rule holds nowhere: the hysteresis starts again.
            self.held_since.retain(|(name, _), _| *name != rule.name);
            return;
        };
        let all = targets(snap, rule);
        let largest = rule
            .conditions
            .largest_only
            .then(|| largest_per_gpu(all.iter().filter(|t| self.holds(compiled, t, snap, facts))));
        for t in all {
            let id = (rule.name.clone(), t.id());
            let in_largest = largest.as_ref().is_none_or(|l| l.contains(&t.id()));
            if in_largest && stale.contains(&t.id()) {
                // Its list failed this time: hold the hysteresis as it is, act on nothing.
                continue;
            }
            if !in_largest || !self.holds(compiled, &t, snap, facts) {
                self.held_since.remove(&id);
            } else if self.fires(rule, id, now, occurrence) {
                out.push(Planned {
                    rule: rule.name.clone(),
                    action: rule.action.clone(),
                    dry_run: rule.dry_run,
                    allow_other_users: rule.allow_other_users,
                    target: t,
                });
            }
        }
    }

    /// Whether `rule`, holding on target `id` now, fires: held for its hold time, out of its
    /// cooldown, and not fired yet in this `occurrence` of its schedule. Noted when it does.
    fn fires(
        &mut self,
        rule: &Rule,
        id: (String, TargetId),
        now: UnixMs,
        occurrence: Option<Occurrence>,
    ) -> bool {
        let hold = (rule.conditions.hold_seconds * 1000.0) as i64;
        let cooldown = (rule.cooldown_minutes * 60_000.0) as i64;
        let since = *self.held_since.entry(id.clone()).or_insert(now);
        if now - since < hold || self.last_fired.get(&id).is_some_and(|t| now - t < cooldown) {
            return false;
        }
        if let Some(o) = occurrence {
            if self.schedule_fired.get(&id) == Some(&o) {
                return false;
            }
            self.schedule_fired.insert(id.clone(), o);
        }
        self.last_fired.insert(id, now);
        true
    }

    /// Forgets the state of targets that are gone, and cooldowns that have run out (an agent
    /// runs for months).
    fn forget_gone(&mut self, rules: &[CompiledRule], snap: &Snapshot) {
        let now = snap.taken_at_ms;
        let alive: std::collections::HashSet<TargetId> = snap
            .processes
            .iter()
            .map(|p| TargetId::Process((p.key(), p.device_index)))
            .chain(snap.devices.iter().map(|d| TargetId::Device(d.index)))
            .collect();
        self.held_since.retain(|(_, t), _| alive.contains(t));
        self.schedule_fired.retain(|(_, t), _| alive.contains(t));
        let cooldowns: HashMap<&str, i64> = rules
            .iter()
            .map(|r| {
                (
                    r.rule.name.as_str(),
                    (r.rule.cooldown_minutes * 60_000.0) as i64,
                )
            })
            .collect();
        self.last_fired
            .retain(|(name, _), t| cooldowns.get(name.as_str()).is_some_and(|c| now - *t < *c));
    }

    /// The targets whose conditions hold right now, ignoring hold time and cooldown (the
    /// editor's "test this rule").
    pub fn matches_now(&self, rule: &Rule, snap: &Snapshot, facts: &Facts) -> Vec<Target> {
        let Some(compiled) = CompiledRule::new(rule) else {
            return Vec::new();
        };
        if self.schedule_open(&compiled, snap.taken_at_ms).is_none() {
            return Vec::new();
        }
        targets(snap, rule)
            .into_iter()
            .filter(|t| self.holds(&compiled, t, snap, facts))
            .collect()
    }

    /// Why `rule` matches nothing in `snap` ([`Self::matches_now`] found nothing), in words:
    /// it is not valid, its schedule is closed, there is nothing of the kind it acts on, or
    /// none of what there is meets all its conditions.
    pub(crate) fn why_nothing(&self, rule: &Rule, snap: &Snapshot) -> String {
        let Some(compiled) = CompiledRule::new(rule) else {
            return "the rule is not valid (Settings says what to fix)".into();
        };
        if self.schedule_open(&compiled, snap.taken_at_ms).is_none() {
            return "its schedule is closed at this time".into();
        }
        if let Some(name) = compiled.user_not_answered() {
            return format!(
                "the user directory has not answered for {name:?} yet, and until it does \
                 the rule matches no process"
            );
        }
        let n = targets(snap, rule).len();
        let why = match (n, on_processes(rule)) {
            (0, true) if on_parked(rule) => "no process is parked".into(),
            (0, true) => "no process is listed".into(),
            (0, false) => "no GPU is listed".into(),
            (1, true) => "the one process listed does not meet all its conditions".into(),
            (n, true) => format!("none of the {n} processes listed meets all its conditions"),
            (1, false) => "the GPU does not meet all its conditions".into(),
            (n, false) => format!("none of the {n} GPUs meets all its conditions"),
        };
        format!("{why}{}", parked_left_out(snap, rule))
    }

    fn holds(&self, compiled: &CompiledRule, t: &Target, snap: &Snapshot, facts: &Facts) -> bool {
        let c = &compiled.rule.conditions;
        let dev_index = t.device_index();
        if c.gpu.is_some_and(|g| g != dev_index) {
            return false;
        }
        let dev = snap.devices.iter().find(|d| d.index == dev_index);
        if !device_holds(c, dev) {
            return false;
        }
        let Target::Process {
            key, used_bytes, ..
        } = t
        else {
            return true;
        };
        let uid = Some(t.uid()).filter(|u| *u != u32::MAX);
        let p = snap
            .processes
            .iter()
            .find(|p| p.key() == key.0 && p.device_index == key.1);
        let info = p.and_then(|p| p.info.as_deref());
        let process = ProcessCheck {
            key,
            used_bytes: *used_bytes,
            uid,
            sample: p,
            dev,
            now: snap.taken_at_ms,
        };
        self.process_holds(c, &process, facts)
            && identity_holds(compiled, t.name(), uid, info)
            && totals_hold(c, &process, snap)
    }

    /// The conditions on the process's memory and times: parked and fitting, memory held,
    /// idle, leaking, age, releasable cache, growth of PyTorch's allocations.
    fn process_holds(&self, c: &super::Conditions, p: &ProcessCheck<'_>, facts: &Facts) -> bool {
        let (key, now) = (p.key, p.now);
        let mib = |b: u64| b as f64 / MIB as f64;
        if let Some(headroom) = c.parked_fits_with_mib {
            let parked = p.sample.and_then(|p| p.parked).and_then(|i| i.bytes);
            let free = p.dev.and_then(|d| d.memory_free_bytes);
            match (parked, free) {
                (Some(b), Some(f)) if (f as f64) >= b as f64 + headroom * MIB as f64 => {}
                _ => return false,
            }
        }
        if let Some(min) = c.process_memory_min_mib {
            if p.used_bytes.is_none_or(|u| mib(u) < min) {
                return false;
            }
        }
        if let Some(min) = c.idle_min_minutes {
            if self
                .idle_ms(key, now)
                .is_none_or(|ms| (ms as f64) < min * 60_000.0)
            {
                return false;
            }
        }
        if let Some(min) = c.leaking_min_minutes {
            if facts
                .leaking_since
                .get(key)
                .is_none_or(|s| ((now - s) as f64) < min * 60_000.0)
            {
                return false;
            }
        }
        if let Some(min) = c.age_min_minutes {
            let start = key.0.start_time_ms;
            if start <= 0 || ((now - start) as f64) < min * 60_000.0 {
                return false;
            }
        }
        if let Some(min) = c.releasable_cache_min_mib {
            if self.releasable_cache.get(key).is_none_or(|b| mib(*b) < min) {
                return false;
            }
        }
        if let Some(min) = c.allocated_growth_min_mib_per_min {
            if self
                .allocated_growth_mib_per_min(key)
                .is_none_or(|r| r < min)
            {
                return false;
            }
        }
        true
    }
}

/// A process a rule is tested on: its identity, memory and owner, its sample and GPU in the
/// snapshot, and the snapshot's time.
struct ProcessCheck<'a> {
    key: &'a ProcSeriesKey,
    used_bytes: Option<u64>,
    uid: Option<u32>,
    sample: Option<&'a crate::model::ProcessSample>,
    dev: Option<&'a crate::model::DeviceSample>,
    now: UnixMs,
}

/// The conditions on the GPU: memory used, free, and the forecast.
fn device_holds(c: &super::Conditions, dev: Option<&crate::model::DeviceSample>) -> bool {
    if let Some(min) = c.device_used_min_pct {
        let pct = dev
            .and_then(|d| Some(100.0 * d.memory_used_bytes? as f64 / d.memory_total_bytes? as f64));
        if pct.is_none_or(|p| p < min) {
            return false;
        }
    }
    if let Some(max) = c.device_free_max_mib {
        let free = dev
            .and_then(|d| d.memory_free_bytes)
            .map(|b| b as f64 / MIB as f64);
        if free.is_none_or(|f| f > max) {
            return false;
        }
    }
    if let Some(max) = c.device_full_within_minutes {
        let full_in_min = dev.and_then(|d| d.time_to_full_s).map(|s| s / 60.0);
        if full_in_min.is_none_or(|m| m >= max) {
            return false;
        }
    }
    true
}

/// The conditions on who the process is: name and command line patterns, container and pod,
/// user (compared by uid: names were resolved through NSS when the rule was compiled).
fn identity_holds(
    compiled: &CompiledRule,
    name: &str,
    uid: Option<u32>,
    info: Option<&crate::model::ProcInfo>,
) -> bool {
    let re_ok =
        |re: &Option<regex::Regex>, text: &str| re.as_ref().is_none_or(|r| r.is_match(text));
    let cmdline = info.map_or("", |i| i.cmdline.as_str());
    re_ok(&compiled.name_re, name)
        && re_ok(&compiled.cmdline_re, cmdline)
        && container_matches(&compiled.rule.conditions, info)
        && compiled.user_is.is_none_or(|want| match want {
            UidOf::Uid(want) => uid == Some(want),
            UidOf::NoSuchUser | UidOf::NotAnswered => false,
        })
        && compiled.user_is_not.is_none_or(|not| match not {
            UidOf::Uid(not) => uid != Some(not),
            UidOf::NoSuchUser => true,
            UidOf::NotAnswered => false,
        })
}

/// The conditions on sums over the GPU: the memory of the process's container, of its user.
fn totals_hold(c: &super::Conditions, p: &ProcessCheck<'_>, snap: &Snapshot) -> bool {
    let on_gpu_where = |same: &dyn Fn(&crate::model::ProcessSample) -> bool| {
        let total: u64 = snap
            .processes
            .iter()
            .filter(|q| q.device_index == p.key.1 && same(q))
            .filter_map(|q| q.used_bytes)
            .sum();
        total as f64 / MIB as f64
    };
    if let Some(min) = c.container_total_min_mib {
        fn container(q: &crate::model::ProcessSample) -> Option<&str> {
            q.info.as_deref().and_then(|i| i.container_id.as_deref())
        }
        let Some(id) = p.sample.and_then(container) else {
            return false;
        };
        if on_gpu_where(&|q| container(q) == Some(id)) < min {
            return false;
        }
    }
    if let Some(min) = c.user_total_min_mib {
        let uid = p.uid;
        let total = on_gpu_where(&|q| q.info.as_deref().map(|i| i.uid) == uid && uid.is_some());
        if total < min {
            return false;
        }
    }
    true
}

/// True when the process's container and pod match the rule's `container_glob` and
/// `pod_glob` (each unset pattern matches everything; a set one never matches a process
/// outside a container or pod).
fn container_matches(c: &super::Conditions, info: Option<&crate::model::ProcInfo>) -> bool {
    use super::glob::matches;
    if let Some(g) = &c.container_glob {
        let hit = info.is_some_and(|i| {
            i.container_name.as_deref().is_some_and(|n| matches(g, n))
                || i.container_id.as_deref().is_some_and(|id| matches(g, id))
        });
        if !hit {
            return false;
        }
    }
    if let Some(g) = &c.pod_glob {
        let pod = info.and_then(|i| i.pod.as_deref());
        let hit = pod.is_some_and(|p| {
            if g.contains('/') {
                matches(g, p)
            } else {
                matches(g, p.rsplit('/').next().unwrap_or(p))
            }
        });
        if !hit {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod user_lookup_tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::act::rules::Conditions;
    use crate::model::{DeviceSample, ProcInfo, ProcessSample};

    /// A user directory that takes 0.6 s to answer (a real lookup thread, a slow answer).
    fn slow_directory(name: &String) -> Option<u32> {
        std::thread::sleep(Duration::from_millis(600));
        (name == "alice").then_some(1001)
    }

    /// Bob's training job: 20 GiB on GPU 0, uid 1000.
    fn bobs_job() -> Snapshot {
        let info = ProcInfo {
            name: "python3".into(),
            uid: 1000,
            start_time_ms: 1_000,
            ..ProcInfo::default()
        };
        Snapshot {
            taken_at_ms: 100_000,
            devices: vec![DeviceSample::default()],
            processes: vec![ProcessSample {
                pid: 10,
                used_bytes: Some(20_000 * MIB),
                info: Some(Arc::new(info)),
                ..ProcessSample::default()
            }],
        }
    }

    /// A rule that spares alice's processes acts on nobody while the directory has not said
    /// who alice is (taken as "no such user", it would act on alice's too), and on bob's job
    /// once it has.
    #[test]
    fn a_user_name_not_answered_yet_matches_nothing_until_it_is() {
        let mut users = UserIds::with_lookup(slow_directory);
        let rule = Rule {
            name: "not alice".into(),
            conditions: Conditions {
                process_memory_min_mib: Some(1_000.0),
                user_is_not: Some("alice".into()),
                ..Conditions::default()
            },
            ..Rule::default()
        };
        let started = Instant::now();
        let compiled = compile_with(std::slice::from_ref(&rule), &mut users);
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "waited out the lookup"
        );
        assert_eq!(compiled[0].user_not_answered(), Some("alice"));
        let (snap, facts) = (bobs_job(), Facts::default());
        let mut st = RuleState::default();
        st.observe(&snap);
        assert!(st.evaluate(&compiled, &snap, &facts).is_empty());
        while !users.resolved_late() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no answer came"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let compiled = compile_with(std::slice::from_ref(&rule), &mut users);
        assert_eq!(compiled[0].user_not_answered(), None);
        assert_eq!(st.evaluate(&compiled, &snap, &facts).len(), 1);
    }
}

#[cfg(test)]
mod releasable_cache_tests {
    use std::sync::Arc;

    use super::*;
    use crate::act::rules::Conditions;
    use crate::model::{DeviceSample, ProcInfo, ProcessKey, ProcessSample};

    fn snap() -> Snapshot {
        let proc = |pid: u32| ProcessSample {
            pid,
            device_index: 0,
            used_bytes: Some(20_000 * MIB),
            info: Some(Arc::new(ProcInfo {
                name: "python3".into(),
                start_time_ms: 1_000,
                ..ProcInfo::default()
            })),
            ..ProcessSample::default()
        };
        Snapshot {
            taken_at_ms: 100_000,
            devices: vec![DeviceSample::default()],
            processes: vec![proc(10), proc(11), proc(12)],
        }
    }

    #[test]
    fn releasable_cache_condition_uses_the_companions_figures() {
        let key = |pid, start| {
            (
                ProcessKey {
                    pid,
                    start_time_ms: start,
                },
                0,
            )
        };
        let mut st = RuleState::default();
        st.set_releasable_cache(
            [
                (key(10, 1_000), 8_192 * MIB),
                (key(11, 1_000), 1_024 * MIB),
                // Same pid, another start time: another process.
                (key(12, 999), 99_999 * MIB),
            ]
            .into_iter()
            .collect(),
        );
        let rule = Rule {
            name: "release".into(),
            conditions: Conditions {
                releasable_cache_min_mib: Some(4_096.0),
                ..Conditions::default()
            },
            ..Rule::default()
        };
        assert!(rule.problems().is_empty());
        assert!(rule.conditions.targets_processes());
        assert!(rule.describe().contains("PyTorch cache holds ≥ 4 GiB"));
        let pids: Vec<u32> = st
            .matches_now(&rule, &snap(), &Facts::default())
            .iter()
            .filter_map(|t| match t {
                Target::Process { key, .. } => Some(key.0.pid),
                Target::Device(_) => None,
            })
            .collect();
        assert_eq!(pids, vec![10]);
        let bad = Rule {
            conditions: Conditions {
                releasable_cache_min_mib: Some(-1.0),
                ..Conditions::default()
            },
            ..rule
        };
        assert_eq!(bad.problems()[0].0, "releasable_cache_min_mib");
    }
}

#[cfg(test)]
mod target_tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{ProcInfo, ProcessSample};

    #[test]
    fn a_target_shares_the_samples_facts_and_an_unread_owner_is_unknown_never_root() {
        let info = Arc::new(ProcInfo {
            name: "python3".into(),
            user: "alice".into(),
            uid: 1000,
            start_time_ms: 5,
            ..ProcInfo::default()
        });
        let read = ProcessSample {
            pid: 7,
            info: Some(info.clone()),
            ..ProcessSample::default()
        };
        let t = process_target(&read);
        assert!(matches!(&t, Target::Process { info: Some(i), .. } if Arc::ptr_eq(i, &info)));
        assert_eq!((t.name(), t.user(), t.uid()), ("python3", "alice", 1000));
        assert!(t.describe().starts_with("python3 (PID 7, user alice"));
        // /proc could not be read: no name, no owner, and a uid that matches no one (the
        // rules' owner checks and the executor's other-user refusal see "unknown", not 0).
        let unread = process_target(&ProcessSample {
            pid: 8,
            ..ProcessSample::default()
        });
        assert_eq!(
            (unread.name(), unread.user(), unread.uid()),
            ("", "", u32::MAX)
        );
        assert_eq!(Target::Device(0).uid(), u32::MAX);
    }

    /// The GUI review: "none of the 5 processes listed" beside a table of 6 (one parked):
    /// the parked ones a rule on running processes leaves out are said.
    #[test]
    fn why_nothing_says_the_parked_processes_left_out() {
        let p = |pid: u32, parked: bool| ProcessSample {
            pid,
            used_bytes: Some(crate::model::MIB),
            parked: parked.then_some(crate::model::ParkInfo {
                state: crate::model::ParkState::Parked,
                bytes: None,
                since_ms: 0,
            }),
            ..ProcessSample::default()
        };
        let snap = Snapshot {
            processes: vec![p(1, false), p(2, false), p(3, true)],
            ..Snapshot::default()
        };
        let rule = super::super::Rule {
            conditions: super::super::Conditions {
                process_memory_min_mib: Some(1e9),
                ..Default::default()
            },
            ..Default::default()
        };
        let st = RuleState::default();
        assert_eq!(
            st.why_nothing(&rule, &snap),
            "none of the 2 processes listed meets all its conditions (1 parked process not \
             looked at: only a resume rule acts on parked processes)"
        );
        let running = Snapshot {
            processes: vec![p(1, false), p(2, false)],
            ..Snapshot::default()
        };
        assert_eq!(
            st.why_nothing(&rule, &running),
            "none of the 2 processes listed meets all its conditions"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::Target;
    use crate::model::{Origin, ProcInfo, ProcessKey};

    fn python(used_bytes: Option<u64>) -> Target {
        let info = ProcInfo {
            name: "python".into(),
            user: "alice".into(),
            ..ProcInfo::default()
        };
        let key = ProcessKey {
            pid: 513,
            start_time_ms: 1,
        };
        Target::process((key, 0), Some(info.into()), used_bytes, Origin::Live)
    }

    #[test]
    fn a_process_is_named_with_what_it_holds_and_nothing_when_it_holds_nothing() {
        assert_eq!(
            python(Some(10850 << 20)).describe(),
            "python (PID 513, user alice, GPU 0, 10850 MiB)"
        );
        // Parked: its memory is in host memory, so no "0 MiB" reading is shown.
        assert_eq!(
            python(Some(0)).describe(),
            "python (PID 513, user alice, GPU 0)"
        );
        assert_eq!(
            python(None).describe(),
            "python (PID 513, user alice, GPU 0)"
        );
    }
}
