//! When a process the guard parked may come back. All of: no forecast alert on its GPU; room
//! for its memory plus a margin (max(1 GiB, 3 % of the GPU)) plus what grows on the GPU while
//! it is restored; and, with its memory back (and, for a paused grower, its own growth), no
//! forecast of a full GPU within the horizon — the warning time (`safe_minutes`) for an idle
//! process; for a paused grower the first time, twice the lead at which a new pause would
//! start (26 s with the defaults: a pause stops the growth at the driver's lock), or the lead
//! an idle process's park would need, so that the idle park comes while the grower waits, not
//! after it grows again; the warning time once it was paused twice; no horizon when nothing
//! else of size runs on its GPU (no step could make room: waiting longer would never end).
//! That held for `resume_hold_s`; one
//! resume at a time per GPU, never while a park is under way on it. The driver's room check
//! right before the restore ([`crate::act::park::checks::room_margin`]) is the last word.

use super::facts::GpuFacts;
use super::settings::GuardSettings;
use super::state::{GpuState, ParkedEntry, Step};
use super::status::StepKind;
use super::timing::{Timing, OVERHEAD_S};
use crate::act::park::checks::room_margin;
use crate::model::{ParkState, UnixMs, GIB, MIB};

/// The resume due now on `g`, if any (the oldest parked process whose resume has been safe
/// for the hold).
pub(super) fn due(
    g: &GpuFacts,
    st: &mut GpuState,
    s: &GuardSettings,
    t: &Timing,
    now: UnixMs,
) -> Option<Step> {
    let busy = g.procs.iter().any(|p| {
        p.parked
            .is_some_and(|i| matches!(i.state, ParkState::Parking | ParkState::Resuming))
    });
    let pick = if busy || !st.in_flight.is_empty() {
        None
    } else {
        st.parked
            .iter()
            .find(|e| !st.tried.contains_key(&(e.key, StepKind::Resume)))
            .filter(|e| verdict(g, e, &st.parked, s, t).is_ok())
    };
    let Some(e) = pick else {
        st.safe_since = None;
        return None;
    };
    let since = match st.safe_since {
        Some((k, since)) if k == e.key => since,
        _ => {
            st.safe_since = Some((e.key, now));
            now
        }
    };
    if (now - since) as f64 / 1000.0 < s.resume_hold_s {
        return None;
    }
    st.safe_since = None;
    Some(Step {
        gpu: g.index,
        kind: StepKind::Resume,
        key: e.key,
        who: e.who.clone(),
        bytes: e.bytes,
        needs_s: t.resume_s(e.bytes),
        full_in_s: g.full_in_s(0.0),
        rate_bytes_s: e.grower_rate,
        for_paused: false,
    })
}

/// What the resume of `e` waits for, in words ("ready" when nothing).
pub(super) fn waits_for(
    g: &GpuFacts,
    e: &ParkedEntry,
    parked: &[ParkedEntry],
    s: &GuardSettings,
    t: &Timing,
) -> String {
    match verdict(g, e, parked, s, t) {
        Ok(()) => format!("ready: resumes after {:.0} s of room", s.resume_hold_s),
        Err(why) => why,
    }
}

/// Whether `e` may be resumed on `g` now, or what it waits for.
pub(super) fn verdict(
    g: &GpuFacts,
    e: &ParkedEntry,
    parked: &[ParkedEntry],
    s: &GuardSettings,
    t: &Timing,
) -> Result<(), String> {
    let st_growers: Vec<&ParkedEntry> = parked.iter().filter(|w| w.grower_rate > 0.0).collect();
    match g.proc(&e.key).and_then(|p| p.parked).map(|i| i.state) {
        Some(ParkState::Parked) => {}
        Some(other) => return Err(format!("it is {}", other.label())),
        None => return Err("it is not in the park book".into()),
    }
    if g.alert {
        return Err(format!("the forecast alert on GPU {} to end", g.index));
    }
    if e.grower_rate <= 0.0 {
        if let Some(w) = st_growers.iter().find(|w| w.key != e.key) {
            return Err(format!(
                "{} (paused while growing) to come back first",
                w.who
            ));
        }
    }
    let gib = |b: f64| b / GIB as f64;
    let rate = g.growth_bytes_s.max(0.0) + e.grower_rate.max(0.0);
    // While it is restored it is locked: only the others grow.
    let dur = t.resume_s(e.bytes);
    let need = e.bytes as f64 + room_margin(g.total_bytes) as f64 + g.growth_bytes_s.max(0.0) * dur;
    let free = g.free_bytes as f64;
    if free < need {
        return Err(format!(
            "room: {:.1} GiB free, it needs {:.1} GiB (its memory and a margin)",
            gib(free),
            gib(need)
        ));
    }
    let horizon = horizon(g, e, s, t);
    if rate > 0.0 && (free - need) / rate < horizon {
        return Err(format!(
            "the GPU to stay short of full for {:.0} s with it back (now {:.0} s)",
            horizon,
            (free - need) / rate
        ));
    }
    Ok(())
}

/// How long the GPU must stay short of full with `e` back: for a paused grower the first
/// time, twice the lead a new pause would start at (a pause stops the growth at the driver's
/// lock) or the lead of the idle park its growth would call for, whichever is longer; 0 when
/// nothing else of size runs on its GPU; else the warning time.
fn horizon(g: &GpuFacts, e: &ParkedEntry, s: &GuardSettings, t: &Timing) -> f64 {
    if e.grower_rate <= 0.0 {
        return s.safe_minutes * 60.0;
    }
    let min = (s.min_process_mib * MIB as f64) as u64;
    let others = || g.running_others(&e.key, min);
    if others().next().is_none() {
        return 0.0;
    }
    if e.pauses >= 2 {
        return s.safe_minutes * 60.0;
    }
    let idle_s = s.idle_min_minutes * 60.0;
    let idle_lead = others()
        .filter(|p| p.growth_bytes_s <= 0.0 && p.unparkable.is_none())
        .filter(|p| p.idle_s.is_some_and(|i| i >= idle_s))
        .map(|p| s.lead_factor * t.park_s(p.bytes) + s.lead_margin_s)
        .fold(0.0, f64::max);
    let repause =
        2.0 * (s.lead_factor * OVERHEAD_S + super::ladder::margin(StepKind::PauseGrower, s));
    repause.max(idle_lead)
}
