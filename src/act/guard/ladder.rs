//! Which step next, and when it must start. A step starts when the GPU's time to full
//! (memory that steps under way will free counted, their remaining time taken off) falls
//! under `lead_factor` × the time the step needs + `lead_margin_s`; at once when free memory
//! is under the floor while something grows. The rungs, in order: release PyTorch caches
//! (started early enough that a park could still follow), park an idle process (the largest
//! that can finish in time), pause the growing job itself, terminate a leaker (opt-in).

use super::facts::{GpuFacts, ProcFacts};
use super::settings::GuardSettings;
use super::state::{GpuState, Step};
use super::status::{NextStep, StepKind};
use super::timing::{Timing, OVERHEAD_S, RELEASE_S};
use crate::model::{UnixMs, MIB};

/// Releases smaller than this are not worth a step (bytes).
const RELEASE_MIN_BYTES: u64 = 256 * MIB;
/// A grower holding less than this is not paused (it has hardly started).
const GROWER_MIN_BYTES: u64 = 256 * MIB;
/// A grower growing slower than this share of its GPU's growth is not paused: the GPU would
/// fill about as soon without it (a slow leaker beside a job warming up at 5 GiB/s).
const GROWER_MIN_SHARE: f64 = 0.25;
/// Seconds a terminated leaker is given to exit.
const TERMINATE_S: f64 = 10.0;

/// One possible step.
#[derive(Debug, Clone)]
struct Cand<'a> {
    kind: StepKind,
    proc: &'a ProcFacts,
    bytes: u64,
    needs_s: f64,
}

/// This tick's plan for one GPU.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// Seconds left to act (time to full, steps under way counted) when the GPU is forecast
    /// full within the safe time; None when it is not.
    pub threat: Option<f64>,
    /// The threat is the GPU filling now (not paused growers waiting for room).
    pub live: bool,
    /// Time to full, steps under way counted.
    pub full_in_s: Option<f64>,
    /// The step that comes next.
    pub next: Option<NextStep>,
    /// The steps to start now.
    pub due: Vec<Step>,
    /// What the guard cannot do, in words.
    pub cannot: Vec<String>,
}

/// The words of the plan made before for the same GPU (its status's), whose room a new plan
/// takes where its words are the same: no string is made again for an unchanged plan.
#[derive(Debug, Default)]
pub(super) struct Words {
    /// The last plan's `cannot`.
    pub(super) cannot: Vec<String>,
    /// The last plan's next step, for its `who`.
    pub(super) next: Option<NextStep>,
}

impl Plan {
    /// The plan for `g`; `words` are the last plan's for it (reused where unchanged).
    pub(super) fn of(
        g: &GpuFacts,
        st: &GpuState,
        s: &GuardSettings,
        t: &Timing,
        forecast_rate: f64,
        now: UnixMs,
        words: Words,
    ) -> Plan {
        let o = Outlook::of(g, st, now);
        // Under the floor with nothing under way: act at once.
        let urgent = forecast_rate > 0.0
            && st.in_flight.is_empty()
            && (g.free_bytes as f64) < s.floor_free_mib * MIB as f64;
        let safe = s.safe_minutes * 60.0;
        let live = match o.full_in_s.map(|f| (f - o.rem_s).max(0.0)) {
            _ if urgent => Some(o.full_in_s.map_or(0.0, |f| (f - o.rem_s).max(0.0))),
            a => a.filter(|a| *a < safe),
        };
        let mut cands = candidates(g, st, s, t);
        let threat = live.or_else(|| {
            // Paused growers waiting for room: their memory and growth to come back make
            // room by parking idle processes (never by pausing another grower).
            let demand = o.paused_demand(g, st, s, t).filter(|a| *a < safe);
            if demand.is_some() {
                cands.retain(|c| matches!(c.kind, StepKind::ReleaseCache | StepKind::ParkIdle));
            }
            demand
        });
        let mut plan = Plan {
            threat,
            live: live.is_some(),
            full_in_s: o.full_in_s,
            cannot: cannot(g, s, words.cannot),
            ..Plan::default()
        };
        let Some(first) = cands.first() else {
            return plan;
        };
        let starts_at = trigger(first, &cands, o.rate, s, t);
        let who = match words.next {
            Some(last) if *last.who == *first.proc.who => last.who,
            _ => first.proc.who.to_string(),
        };
        plan.next = Some(NextStep {
            kind: first.kind,
            who,
            needs_s: first.needs_s,
            starts_at_s: starts_at,
        });
        if let Some(avail) = threat.filter(|a| urgent || *a <= starts_at) {
            plan.due = choose(&cands, avail, s)
                .into_iter()
                .map(|c| step(g, c, o.full_in_s, live.is_none()))
                .collect();
        }
        plan
    }
}

/// How a GPU stands with the steps under way counted.
struct Outlook {
    /// Its growth (bytes/s), less that of growers being paused.
    rate: f64,
    /// Its free memory with what the steps under way free.
    free: f64,
    /// Seconds until it is full, when it grows.
    full_in_s: Option<f64>,
    /// Seconds the steps under way still need.
    rem_s: f64,
}

impl Outlook {
    fn of(g: &GpuFacts, st: &GpuState, now: UnixMs) -> Self {
        let gains: f64 = st.in_flight.iter().map(|f| f.gain).sum();
        let rem_s: f64 = st
            .in_flight
            .iter()
            .map(|f| ((f.due_ms - now) as f64 / 1000.0).max(0.0))
            .sum();
        // A grower being paused stops growing at its lock (once it shows as parking, the
        // forecast leaves it out itself).
        let stopped: f64 = st
            .in_flight
            .iter()
            .filter(|f| f.kind == StepKind::PauseGrower)
            .filter(|f| g.proc(&f.key).is_some_and(|p| p.parked.is_none()))
            .map(|f| f.step.rate_bytes_s)
            .sum();
        let rate = (g.growth_bytes_s - stopped).max(0.0);
        Self {
            rate,
            free: g.free_bytes as f64 + gains,
            full_in_s: (rate > 0.0).then(|| full_in(g.free_bytes as f64, gains, rate, st, now)),
            rem_s,
        }
    }

    /// Seconds left before the paused growers' memory and growth, were they resumed, fill
    /// the GPU; None when none waits to grow.
    fn paused_demand(
        &self,
        g: &GpuFacts,
        st: &GpuState,
        s: &GuardSettings,
        t: &Timing,
    ) -> Option<f64> {
        let (d_bytes, d_rate) = st.paused_demand(g, s, t);
        (d_rate > 0.0).then(|| ((self.free - d_bytes) / (self.rate + d_rate) - self.rem_s).max(0.0))
    }
}

/// Seconds until `free` bytes are gone at `rate`, counting the memory the steps under way
/// free (`gains`) only if it comes before the GPU is full.
fn full_in(free: f64, gains: f64, rate: f64, st: &GpuState, now: UnixMs) -> f64 {
    let before = (free / rate).max(0.0);
    let first_gain = st
        .in_flight
        .iter()
        .filter(|f| f.gain > 0.0)
        .map(|f| (f.due_ms - now) as f64 / 1000.0)
        .fold(f64::INFINITY, f64::min);
    if before < first_gain {
        before
    } else {
        ((free + gains) / rate).max(0.0)
    }
}

/// The time to full at which `c` must start: its time × the factor + the margin; a release
/// also leaves time for the park that would follow it. A pause stops its job's growth at
/// the lock, but the others (`rate` is the GPU's, bytes/s) go on growing until its memory is
/// free: it starts early enough for that too.
fn trigger(c: &Cand, cands: &[Cand], rate: f64, s: &GuardSettings, t: &Timing) -> f64 {
    let after = match c.kind {
        StepKind::ReleaseCache => cands
            .iter()
            .find(|x| matches!(x.kind, StepKind::ParkIdle | StepKind::PauseGrower))
            .map_or(0.0, |x| x.needs_s),
        _ => 0.0,
    };
    let lead = s.lead_factor * (c.needs_s + after) + margin(c.kind, s);
    let others = (rate - c.proc.growth_bytes_s).max(0.0);
    if c.kind != StepKind::PauseGrower || others <= 0.0 || rate <= 0.0 {
        return lead;
    }
    let drain = (s.lead_factor * t.park_s(c.bytes) + s.lead_margin_s) * others / rate;
    lead.max(drain)
}

/// The margin a step's lead adds: the full margin covers sampling, the forecast's delay and
/// the driver's lock; a pause, whose lock is the step itself, takes half.
pub(super) fn margin(kind: StepKind, s: &GuardSettings) -> f64 {
    match kind {
        StepKind::PauseGrower => s.lead_margin_s / 2.0,
        _ => s.lead_margin_s,
    }
}

/// What to start with `avail` seconds left: every release at once; else the first park that
/// can finish in time (largest idle first, then the grower); else the quickest.
fn choose<'a>(cands: &[Cand<'a>], avail: f64, s: &GuardSettings) -> Vec<Cand<'a>> {
    let releases: Vec<Cand> = cands
        .iter()
        .filter(|c| c.kind == StepKind::ReleaseCache)
        .cloned()
        .collect();
    if !releases.is_empty() {
        return releases;
    }
    // It can finish before full, with its factor's margin (the trigger added the rest).
    let fits = |c: &&Cand| s.lead_factor * c.needs_s <= avail.max(0.0) + 1e-9;
    if let Some(c) = cands.iter().find(fits) {
        return vec![c.clone()];
    }
    cands
        .iter()
        .filter(|c| c.kind != StepKind::TerminateLeaker)
        .min_by(|a, b| a.needs_s.total_cmp(&b.needs_s))
        .or_else(|| cands.first())
        .cloned()
        .into_iter()
        .collect()
}

/// The step for `c`; `for_paused` when it makes room for a paused grower (no live threat).
fn step(g: &GpuFacts, c: Cand, full_in_s: Option<f64>, for_paused: bool) -> Step {
    Step {
        gpu: g.index,
        kind: c.kind,
        key: c.proc.key,
        who: c.proc.who.to_string(),
        bytes: c.bytes,
        needs_s: c.needs_s,
        full_in_s,
        rate_bytes_s: c.proc.growth_bytes_s,
        for_paused,
    }
}

/// The possible steps, in ladder order.
fn candidates<'a>(g: &'a GpuFacts, st: &GpuState, s: &GuardSettings, t: &Timing) -> Vec<Cand<'a>> {
    let fresh = |p: &ProcFacts, kind: StepKind| {
        p.parked.is_none()
            && !st.tried.contains_key(&(p.key, kind))
            && !st.in_flight.iter().any(|f| f.key == p.key)
    };
    let mut v = Vec::new();
    rung(
        &mut v,
        g,
        s.release_cache,
        |p| p.releasable_bytes >= RELEASE_MIN_BYTES && fresh(p, StepKind::ReleaseCache),
        |p| p.releasable_bytes as f64,
        |p| cand(StepKind::ReleaseCache, p, p.releasable_bytes, RELEASE_S),
    );
    rung(
        &mut v,
        g,
        s.park_idle,
        |p| idle_and_parkable(p, s) && fresh(p, StepKind::ParkIdle),
        |p| p.bytes as f64,
        |p| cand(StepKind::ParkIdle, p, p.bytes, t.park_s(p.bytes)),
    );
    // A pause stops the growth at the driver's lock: it needs the lock's time, not the whole
    // park's.
    rung(
        &mut v,
        g,
        s.pause_grower,
        |p| grower_to_pause(g, p, s) && fresh(p, StepKind::PauseGrower),
        |p| p.growth_bytes_s,
        |p| cand(StepKind::PauseGrower, p, p.bytes, OVERHEAD_S),
    );
    rung(
        &mut v,
        g,
        s.terminate_leaker,
        |p| {
            p.leaking_s
                .is_some_and(|l| l >= s.leaking_min_minutes * 60.0)
                && fresh(p, StepKind::TerminateLeaker)
        },
        |p| p.bytes as f64,
        |p| cand(StepKind::TerminateLeaker, p, p.bytes, TERMINATE_S),
    );
    v
}

/// Whether `p` may be parked as idle: not growing, holding enough to matter, GPU-idle long
/// enough, and nothing refuses its park.
fn idle_and_parkable(p: &ProcFacts, s: &GuardSettings) -> bool {
    let min = (s.min_process_mib * MIB as f64) as u64;
    p.growth_bytes_s <= 0.0
        && p.bytes >= min.max(1)
        && p.idle_s.is_some_and(|i| i >= s.idle_min_minutes * 60.0)
        && p.unparkable.is_none()
}

/// Whether `p` is a grower worth pausing on `g`: a quarter or more of the GPU's growth,
/// large enough, parkable, and not alone on the GPU (pausing a grower with the GPU to itself
/// makes room for nobody, and its wait could never end).
fn grower_to_pause(g: &GpuFacts, p: &ProcFacts, s: &GuardSettings) -> bool {
    let min = (s.min_process_mib * MIB as f64) as u64;
    p.growth_bytes_s > 0.0
        && p.growth_bytes_s >= GROWER_MIN_SHARE * g.growth_bytes_s
        && p.bytes >= GROWER_MIN_BYTES
        && p.unparkable.is_none()
        && g.running_others(&p.key, min).next().is_some()
}

/// Appends to `v` one rung's possible steps (none when it is off): the processes `keep`
/// picks, largest `rank` first (a stable sort: equals keep their order).
fn rung<'a>(
    v: &mut Vec<Cand<'a>>,
    g: &'a GpuFacts,
    on: bool,
    keep: impl Fn(&ProcFacts) -> bool,
    rank: impl Fn(&ProcFacts) -> f64,
    make: impl Fn(&'a ProcFacts) -> Cand<'a>,
) {
    if !on {
        return;
    }
    let from = v.len();
    v.extend(g.procs.iter().filter(|p| keep(p)).map(make));
    if let Some(added) = v.get_mut(from..) {
        added.sort_by(|a, b| rank(b.proc).total_cmp(&rank(a.proc)));
    }
}

fn cand(kind: StepKind, proc: &ProcFacts, bytes: u64, needs_s: f64) -> Cand<'_> {
    Cand {
        kind,
        proc,
        bytes,
        needs_s,
    }
}

/// Between a process and why it may not be parked, in [`cannot`]'s lines.
const CANNOT: &str = " cannot be parked: ";

/// What the guard cannot do on `g`, said ahead: growers and idle processes it may not park.
/// Written into `last` (the last plan's list): a line that reads the same is kept as it is.
fn cannot(g: &GpuFacts, s: &GuardSettings, last: Vec<String>) -> Vec<String> {
    let mut out = last;
    let mut n = 0;
    let lines = g
        .procs
        .iter()
        .filter(|p| p.parked.is_none())
        .filter(|p| {
            (s.pause_grower && p.growth_bytes_s > 0.0)
                || (s.park_idle
                    && p.idle_s.is_some_and(|i| i >= s.idle_min_minutes * 60.0)
                    && p.bytes as f64 >= s.min_process_mib * MIB as f64)
        })
        .filter_map(|p| Some((&*p.who, &**p.unparkable.as_ref()?)));
    for (who, why) in lines {
        match out.get_mut(n) {
            Some(line) if reads(line, who, why) => {}
            Some(line) => *line = format!("{who}{CANNOT}{why}"),
            None => out.push(format!("{who}{CANNOT}{why}")),
        }
        n += 1;
    }
    out.truncate(n);
    out
}

/// `line` is `who` + [`CANNOT`] + `why`.
fn reads(line: &str, who: &str, why: &str) -> bool {
    line.len() == who.len() + CANNOT.len() + why.len()
        && line.starts_with(who)
        && line[who.len()..].starts_with(CANNOT)
        && line.ends_with(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ProcessKey, GIB};

    fn refused(pid: u32, why: &str) -> ProcFacts {
        ProcFacts {
            key: (
                ProcessKey {
                    pid,
                    start_time_ms: 7,
                },
                0,
            ),
            who: format!("job (PID {pid})").into(),
            bytes: 8 * GIB,
            growth_bytes_s: 1.0,
            idle_s: None,
            releasable_bytes: 0,
            leaking_s: None,
            parked: None,
            unparkable: Some(why.into()),
        }
    }

    /// The 'cannot' lines written into the last plan's list are the lines made afresh,
    /// whatever that list held.
    #[test]
    fn cannot_lines_in_the_last_lists_room_read_as_made_afresh() {
        let s = GuardSettings::default();
        let g = GpuFacts {
            procs: vec![refused(1, "another user's"), refused(22, "protected")],
            ..GpuFacts::default()
        };
        let fresh = cannot(&g, &s, Vec::new());
        assert_eq!(
            fresh,
            [
                "job (PID 1) cannot be parked: another user's",
                "job (PID 22) cannot be parked: protected"
            ]
        );
        for last in [
            fresh.clone(),
            vec!["job (PID 1) cannot be parked: another user'".to_string()],
            vec![
                "job (PID 2) cannot be parked: protected".to_string(),
                "x".into(),
                "y".into(),
            ],
            vec!["job (PID 1) cannot be parked: another user'sX".to_string()],
        ] {
            assert_eq!(cannot(&g, &s, last.clone()), fresh, "{last:?}");
        }
        assert!(cannot(&GpuFacts::default(), &s, fresh).is_empty());
    }
}
