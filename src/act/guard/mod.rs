//! The OOM guard: keeps a GPU from filling up without killing anyone. Each tick it compares
//! every GPU's time to full (the forecast) with the time its next step needs — releasing a
//! PyTorch cache, parking an idle process, pausing the growing job itself — and starts the
//! step while there is still time, with margin. It resumes what it parked only when that is
//! safe: no forecast alert, room for the memory plus a margin, and no forecast of a full GPU
//! within the warning time with that memory back, held for a while.
//!
//! Pure: the engine gives the facts ([`GpuFacts`]) and `now`, and runs the steps the guard
//! asks for through the executor (policy, dry run, identity); it then tells the guard how
//! each ended ([`Guard::outcome`], [`Guard::park_ended`]). `vramwarden guard what-if` plays a
//! recorded session through the same code.
//!
//! - [`settings`]: the `[guard]` table;
//! - [`facts`]: what the guard is told;
//! - [`timing`]: how long a park or resume takes here (measured);
//! - [`ladder`]: which step next, and when it must start;
//! - [`resume`]: when a parked process may come back;
//! - [`status`]: what the guard shows.

pub mod facts;
pub mod ladder;
pub mod resume;
pub mod settings;
pub mod state;
pub mod status;
mod steady;
pub(crate) mod timing;

use std::collections::BTreeMap;

pub use facts::{GpuFacts, ProcFacts};
pub use settings::GuardSettings;
pub use state::Step;
use state::{GpuState, InFlight, ParkedEntry};
pub use status::{
    GuardParked, GuardPhase, GuardStatus, NextStep, StepKind, StepOutcome, StepRecord,
};
pub use timing::Timing;

use crate::model::history::ProcSeriesKey;
use crate::model::outcome::Outcome;
use crate::model::{ParkState, UnixMs, MIB};

/// Records kept per GPU for the view.
const RECENT_KEPT: usize = 12;
/// A target that was refused is not tried again for this long.
const RETRY_MS: i64 = 60_000;

/// The guard: its settings, the measured timing and its state per GPU.
#[derive(Debug, Default)]
pub struct Guard {
    settings: GuardSettings,
    timing: Timing,
    gpus: BTreeMap<u32, GpuState>,
}

impl Guard {
    /// A guard on `settings`.
    pub fn new(settings: GuardSettings) -> Self {
        Self {
            settings,
            ..Self::default()
        }
    }

    /// New settings (what it parked stays in its care).
    pub(crate) fn set_settings(&mut self, settings: GuardSettings) {
        self.settings = settings;
    }

    /// The settings in force.
    pub fn settings(&self) -> &GuardSettings {
        &self.settings
    }

    /// The park and resume rates measured here.
    pub(crate) fn timing(&self) -> &Timing {
        &self.timing
    }

    /// The measured rates, to change (a replay's given rate).
    pub(crate) fn timing_mut(&mut self) -> &mut Timing {
        &mut self.timing
    }

    /// Decides this tick's steps from `gpus` at `now`.
    pub(crate) fn decide(&mut self, gpus: &[GpuFacts], now: UnixMs) -> Vec<Step> {
        self.decide_owned(gpus.to_vec(), now)
    }

    /// [`Guard::decide`] on facts it may change (each process's growth is set to the one the
    /// guard counts): no copy of them is made.
    fn decide_owned(&mut self, mut gpus: Vec<GpuFacts>, now: UnixMs) -> Vec<Step> {
        self.decide_in(&mut gpus, now)
    }

    /// [`Guard::decide_owned`] on facts the caller keeps (and refills next tick, in their
    /// room).
    pub(crate) fn decide_in(&mut self, gpus: &mut [GpuFacts], now: UnixMs) -> Vec<Step> {
        let mut steps = Vec::new();
        for g in gpus.iter_mut().filter(|g| g.memory_read) {
            let (s, t) = (&self.settings, &self.timing);
            let st = self.gpus.entry(g.index).or_default();
            let forecast_rate = st.samples.steady(g, now);
            let g = &*g;
            st.settle(g, now);
            // The last status's words and steps, taken up where unchanged (no copy each tick).
            let (words, last_recent) = match st.status.take() {
                Some(last) => (
                    ladder::Words {
                        cannot: last.cannot,
                        next: last.next,
                    },
                    Some(last.recent),
                ),
                None => (ladder::Words::default(), None),
            };
            let mut plan = ladder::Plan::of(g, st, s, t, forecast_rate, now, words);
            let mut chosen = if s.enabled {
                std::mem::take(&mut plan.due)
            } else {
                Vec::new()
            };
            if s.enabled && chosen.is_empty() && !plan.live {
                chosen.extend(resume::due(g, st, s, t, now));
            }
            for step in &chosen {
                st.started(step, t, now);
            }
            let recent = match last_recent {
                Some(last) if !st.recent_changed => last,
                _ => st.recent.iter().cloned().collect(),
            };
            st.recent_changed = false;
            st.status = Some(st.make_status(g, plan, s, t, recent));
            steps.extend(chosen);
        }
        self.gpus
            .retain(|i, st| gpus.iter().any(|g| g.index == *i) || !st.parked.is_empty());
        steps
    }

    /// How the executor took `step`: started, dry run, refused or failed at once.
    pub fn outcome(&mut self, step: &Step, outcome: Outcome, detail: &str, now: UnixMs) {
        let Some(st) = self.gpus.get_mut(&step.gpu) else {
            return;
        };
        let record = match outcome {
            Outcome::Acted => StepOutcome::Started,
            Outcome::WouldAct => StepOutcome::Would,
            Outcome::Skipped => StepOutcome::Refused,
            Outcome::Failed => StepOutcome::Failed,
        };
        if outcome != Outcome::Acted {
            st.in_flight
                .retain(|f| !(f.key == step.key && f.kind == step.kind));
            st.tried
                .insert((step.key, step.kind), (now, outcome == Outcome::WouldAct));
        } else if step.kind == StepKind::PauseGrower {
            *st.pauses.entry(step.key).or_default() += 1;
        }
        st.record(step, record, None, detail, now);
    }

    /// A park or resume of `key` ended (`resume` says which): `ok`, with the bytes moved and
    /// the seconds taken; `stranded` when a failed restore left the process unable to get
    /// its GPU memory back.
    pub fn park_ended(&mut self, end: &ParkEnd, now: UnixMs) {
        if end.ok {
            self.timing
                .observe(end.resume, end.bytes.unwrap_or(0), end.seconds);
        }
        let Some(st) = self.gpus.get_mut(&end.key.1) else {
            return;
        };
        let Some(i) = st.in_flight.iter().position(|f| f.key == end.key) else {
            return;
        };
        let f = st.in_flight.remove(i);
        let outcome = match (end.ok, end.refused) {
            (true, _) => StepOutcome::Done,
            (false, true) => StepOutcome::Refused,
            (false, false) => StepOutcome::Failed,
        };
        st.record(&f.step, outcome, Some(end.seconds), &end.detail, now);
        match (end.resume, end.ok) {
            (false, true) => st.parked.push(ParkedEntry {
                key: f.key,
                who: f.step.who.clone(),
                bytes: end.bytes.unwrap_or(f.step.bytes),
                grower_rate: if f.kind == StepKind::PauseGrower {
                    f.step.rate_bytes_s
                } else {
                    0.0
                },
                since_ms: now,
                pauses: *st.pauses.get(&f.key).unwrap_or(&0),
            }),
            (true, true) => st.parked.retain(|e| e.key != end.key),
            (true, false) if end.stranded => st.parked.retain(|e| e.key != end.key),
            (true, false) | (false, false) => {
                st.tried.insert((f.key, f.kind), (now, false));
            }
        }
    }

    /// The guard on each GPU, by index.
    pub fn status(&self) -> Vec<GuardStatus> {
        self.gpus
            .values()
            .filter_map(|s| s.status.clone())
            .collect()
    }

    /// Makes `shown` equal [`Guard::status`], copying only the GPUs' statuses that differ
    /// from those it holds (a View's, published a tick before).
    pub(crate) fn show_status(&self, shown: &mut Vec<GuardStatus>) {
        let mut n = 0;
        for st in self.gpus.values().filter_map(|s| s.status.as_ref()) {
            match shown.get_mut(n) {
                Some(old) => old.copy_from(st),
                None => shown.push(st.clone()),
            }
            n += 1;
        }
        shown.truncate(n);
    }
}

/// The end of a park or resume, as the guard needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParkEnd {
    /// The process.
    pub key: ProcSeriesKey,
    /// A resume (false: a park).
    pub resume: bool,
    /// It went through.
    pub ok: bool,
    /// Bytes moved.
    pub bytes: Option<u64>,
    /// Seconds it took.
    pub seconds: f64,
    /// A failed restore left the process without its GPU memory for good.
    pub stranded: bool,
    /// Refused before any step (not parkable in its state, no room for a restore): nothing
    /// was changed.
    pub refused: bool,
    /// What happened, in words.
    pub detail: String,
}

impl GpuState {
    /// Drops what has ended: steps long past their time, parked processes gone or running
    /// again; ends the episode's memory of tried targets when nothing grows.
    fn settle(&mut self, g: &GpuFacts, now: UnixMs) {
        self.in_flight.retain(|f| now <= f.ends_ms + 120_000);
        let mut gone = Vec::new();
        self.parked.retain(|e| match g.proc(&e.key) {
            Some(p) if p.parked.is_some() => true,
            _ if self.in_flight.iter().any(|f| f.key == e.key) => true,
            _ => {
                gone.push(e.clone());
                false
            }
        });
        for e in gone {
            let ran = g.proc(&e.key).is_some();
            let what = if ran {
                "runs again (resumed elsewhere)"
            } else {
                "ended while parked"
            };
            self.push_record(StepRecord {
                unix_ms: now,
                kind: StepKind::Resume,
                who: e.who.clone(),
                outcome: StepOutcome::Done,
                full_in_s: None,
                needs_s: 0.0,
                took_s: None,
                detail: format!("{} {what}", e.who),
            });
        }
        let episode = g.growth_bytes_s > 0.0;
        self.tried
            .retain(|_, (at, dry)| (*dry && episode) || now - *at < RETRY_MS);
        self.pauses.retain(|k, _| g.proc(k).is_some());
    }

    fn started(&mut self, step: &Step, t: &Timing, now: UnixMs) {
        let gain = match step.kind {
            StepKind::Resume => -(step.bytes as f64),
            _ => step.bytes as f64,
        };
        // How long the park thread is busy with it (a pause stops the growth at its lock,
        // but its memory is free only when the whole park is done).
        let busy_s = match step.kind {
            StepKind::ParkIdle | StepKind::PauseGrower => t.park_s(step.bytes),
            StepKind::Resume => t.resume_s(step.bytes),
            _ => step.needs_s,
        }
        .min(3_600.0);
        let slack = busy_s * 2.0 + 10.0;
        self.in_flight.push(InFlight {
            key: step.key,
            kind: step.kind,
            gain,
            due_ms: now + (busy_s * 1000.0) as i64,
            ends_ms: now + (slack * 1000.0) as i64,
            step: step.clone(),
        });
    }

    /// What the paused growers that cannot come back yet will need: their bytes and their
    /// growth (bytes/s).
    fn paused_demand(&self, g: &GpuFacts, s: &GuardSettings, t: &Timing) -> (f64, f64) {
        self.parked
            .iter()
            .filter(|e| e.grower_rate > 0.0 && resume::verdict(g, e, &self.parked, s, t).is_err())
            .fold((0.0, 0.0), |(b, r), e| {
                (b + e.bytes as f64, r + e.grower_rate)
            })
    }

    fn record(
        &mut self,
        step: &Step,
        outcome: StepOutcome,
        took_s: Option<f64>,
        detail: &str,
        now: UnixMs,
    ) {
        self.push_record(StepRecord {
            unix_ms: now,
            kind: step.kind,
            who: step.who.clone(),
            outcome,
            full_in_s: step.full_in_s,
            needs_s: step.needs_s,
            took_s,
            detail: detail.to_string(),
        });
    }

    fn push_record(&mut self, r: StepRecord) {
        self.recent_changed = true;
        self.recent.push_back(r);
        while self.recent.len() > RECENT_KEPT {
            self.recent.pop_front();
        }
    }

    /// The status shown for `g`: from the tick's `plan` and the steps `recent` (a copy of
    /// [`GpuState::recent`]).
    fn make_status(
        &self,
        g: &GpuFacts,
        plan: ladder::Plan,
        s: &GuardSettings,
        t: &Timing,
        recent: Vec<StepRecord>,
    ) -> GuardStatus {
        let busy = !self.in_flight.is_empty()
            || g.procs.iter().any(|p| {
                p.parked
                    .is_some_and(|i| matches!(i.state, ParkState::Parking | ParkState::Resuming))
            });
        let phase = match () {
            _ if !s.enabled => GuardPhase::Off,
            _ if busy => GuardPhase::Acting,
            _ if plan.threat.is_some() => GuardPhase::Armed,
            _ if !self.parked.is_empty() => GuardPhase::Waiting,
            _ => GuardPhase::Watching,
        };
        let (park_gib_s, park_rate_measured) = t.park_rate();
        let (resume_gib_s, resume_rate_measured) = t.resume_rate();
        GuardStatus {
            device_index: g.index,
            phase,
            dry_run: s.dry_run,
            full_in_s: plan.full_in_s,
            growth_mib_s: g.growth_bytes_s / MIB as f64,
            next: plan.next,
            cannot: plan.cannot,
            parked: self
                .parked
                .iter()
                .map(|e| GuardParked {
                    who: e.who.clone(),
                    bytes: e.bytes,
                    since_ms: e.since_ms,
                    paused_grower: e.grower_rate > 0.0,
                    waits_for: resume::waits_for(g, e, &self.parked, s, t),
                })
                .collect(),
            recent,
            park_gib_s,
            park_rate_measured,
            resume_gib_s,
            resume_rate_measured,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ParkInfo, ProcessKey, GIB};

    const T: UnixMs = 1_000_000;

    fn key(pid: u32) -> ProcSeriesKey {
        (
            ProcessKey {
                pid,
                start_time_ms: 7,
            },
            0,
        )
    }

    fn proc(pid: u32, gib: u64, growth_gib_s: f64, idle_s: Option<f64>) -> ProcFacts {
        ProcFacts {
            key: key(pid),
            who: format!("job (PID {pid})").into(),
            bytes: gib * GIB,
            growth_bytes_s: growth_gib_s * GIB as f64,
            idle_s,
            releasable_bytes: 0,
            leaking_s: None,
            parked: None,
            unparkable: None,
        }
    }

    fn gpu(free_gib: u64, growth_gib_s: f64, procs: Vec<ProcFacts>) -> GpuFacts {
        GpuFacts {
            index: 0,
            total_bytes: 80 * GIB,
            free_bytes: free_gib * GIB,
            memory_read: true,
            growth_bytes_s: growth_gib_s * GIB as f64,
            alert: false,
            procs,
        }
    }

    /// `facts` at `now`: each growing process holds its bytes plus its growth since `T`.
    fn at(facts: &[GpuFacts], now: UnixMs) -> Vec<GpuFacts> {
        let dt = (now - T) as f64 / 1000.0;
        facts
            .iter()
            .map(|g| {
                let mut g = g.clone();
                for p in g.procs.iter_mut().filter(|p| p.growth_bytes_s > 0.0) {
                    p.bytes += (p.growth_bytes_s * dt) as u64;
                }
                g
            })
            .collect()
    }

    /// The guard's decisions at `now` on `facts` (as `at` gives them), the growing processes
    /// given their earlier samples the first time.
    fn decide(g: &mut Guard, facts: &[GpuFacts], now: UnixMs) -> Vec<Step> {
        let f = at(facts, now);
        for gf in &f {
            g.gpus.entry(gf.index).or_default().samples.seed(gf, now);
        }
        g.decide(&f, now)
    }

    fn acting() -> Guard {
        Guard::new(GuardSettings {
            dry_run: false,
            ..GuardSettings::default()
        })
    }

    /// An idle 36 GiB job next to a 0.4 GiB/s grower: the park starts when the time to full
    /// reaches 1.5 × its time (2 s + 36 GiB at 1.5 GiB/s = 26 s) + 10 s = 49 s, not before.
    #[test]
    fn the_idle_park_starts_at_its_lead_time() {
        let mut g = acting();
        let facts = |free| {
            vec![gpu(
                free,
                0.4,
                vec![proc(1, 36, 0.0, Some(900.0)), proc(2, 20, 0.4, None)],
            )]
        };
        assert!(
            decide(&mut g, &facts(24), T).is_empty(),
            "60 s to full: not yet"
        );
        let status = &g.status()[0];
        let next = status.next.as_ref().expect("planned");
        assert_eq!(
            (next.kind, status.phase),
            (StepKind::ParkIdle, GuardPhase::Armed)
        );
        assert!((next.starts_at_s - 49.0).abs() < 1e-6, "{next:?}");
        let steps = decide(&mut g, &facts(19), T + 1_000);
        assert_eq!(steps.len(), 1);
        assert_eq!((steps[0].kind, steps[0].key), (StepKind::ParkIdle, key(1)));
    }

    /// The demo's inference server takes 4 → 9.25 GiB in 8 s every two minutes and gives it
    /// back; beside an idle job it left 3.4 GiB free at its peak, and the guard paused it
    /// for good ("full in 4s"). A climb back to a peak it held, with room for the rest, is
    /// not growth; a climb past it is, and so is one the GPU has no room for.
    #[test]
    fn a_climb_back_to_an_earlier_peak_with_room_is_not_paused() {
        const M: u64 = MIB;
        let server = |free_mib: u64, mib: u64| {
            let mut busy = proc(1, 0, 0.0, None);
            busy.bytes = 11 * GIB;
            let mut p = proc(2, 0, 0.0, None);
            p.bytes = mib * M;
            GpuFacts {
                total_bytes: 24 * GIB,
                free_bytes: free_mib * M,
                ..gpu(0, 0.0, vec![busy, p])
            }
        };
        // Free at 4 GiB held: 8 859 MiB; each MiB it takes comes off that.
        let climb = |g: &mut Guard, t0: UnixMs, to: u64, free_at_low: u64| -> Vec<Step> {
            let mut steps = Vec::new();
            for (i, mib) in (4096..=to).step_by(768).enumerate() {
                let f = server(free_at_low.saturating_sub(mib - 4096), mib);
                steps.extend(g.decide(&[f], t0 + i as i64 * 1000));
            }
            steps
        };
        let rest = |g: &mut Guard, t0: UnixMs| {
            for i in 0..5 {
                assert!(g.decide(&[server(8859, 4096)], t0 + i * 1000).is_empty());
            }
        };
        let mut g = acting();
        rest(&mut g, T);
        // The first climb, seen whole: nothing known of it yet, but it never comes near full.
        assert!(climb(&mut g, T + 5_000, 9472, 20_000).is_empty());
        rest(&mut g, T + 20_000);
        // The same climb where it ends 3.4 GiB short of full: a return to its peak.
        let steps = climb(&mut g, T + 30_000, 9472, 8859);
        assert!(steps.is_empty(), "{steps:?}");
        rest(&mut g, T + 45_000);
        // Past its peak by 2 GiB, with the GPU filling: growth again, and it is paused.
        let steps = climb(&mut g, T + 55_000, 11_776, 10_400);
        assert_eq!(
            steps.first().map(|s| s.kind),
            Some(StepKind::PauseGrower),
            "{steps:?}"
        );
        // Its peak with less room than the climb has left: growth too.
        let mut g = acting();
        rest(&mut g, T);
        assert!(climb(&mut g, T + 5_000, 9472, 20_000).is_empty());
        rest(&mut g, T + 20_000);
        let steps = climb(&mut g, T + 30_000, 9472, 5_300);
        assert_eq!(
            steps.first().map(|s| s.kind),
            Some(StepKind::PauseGrower),
            "{steps:?}"
        );
    }

    /// A job warming up at 4.75 GiB/s with 84 GiB free beside a 1 MiB/s leaker: pausing the
    /// leaker would leave the GPU filling as fast, so it is not a step (the demo's replay
    /// paused it for three minutes).
    #[test]
    fn a_slow_grower_beside_a_fast_one_is_not_paused_for_it() {
        let mut g = acting();
        let mut warm = proc(1, 19, 4.75, None);
        warm.unparkable = Some("it is being released".into());
        let leak = proc(2, 13, 1.0 / 1024.0, None);
        let steps = decide(
            &mut g,
            &[gpu(84, 4.75, vec![warm.clone(), leak.clone()])],
            T,
        );
        assert!(steps.is_empty(), "{steps:?}");
        // Alone with the leaker growing, it would be: the share is what keeps it out.
        let mut slow = proc(3, 20, 0.0, None);
        slow.unparkable = Some("stand-in".into());
        let alone = GpuFacts {
            free_bytes: 4 * MIB,
            ..gpu(0, 1.0 / 1024.0, vec![slow, leak])
        };
        let steps = decide(&mut acting(), &[alone], T);
        assert_eq!(
            steps.first().map(|s| s.kind),
            Some(StepKind::PauseGrower),
            "{steps:?}"
        );
    }

    /// The CLI review: a log without free memory (or a failed reading) was taken as a full
    /// GPU, and the guard paused the grower at once ("full in 0s", 40 GiB free). A GPU whose
    /// free memory is unknown gets no step; the next reading is planned on as before.
    #[test]
    fn a_gpu_whose_free_memory_was_not_read_gets_no_step() {
        let mut g = acting();
        let facts = |free, read| {
            let mut f = gpu(
                free,
                0.4,
                vec![proc(1, 36, 0.0, Some(900.0)), proc(2, 20, 0.4, None)],
            );
            f.memory_read = read;
            vec![f]
        };
        assert!(decide(&mut g, &facts(0, false), T).is_empty());
        assert!(decide(&mut g, &facts(0, false), T + 1_000).is_empty());
        let steps = decide(&mut g, &facts(19, true), T + 2_000);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!((steps[0].kind, steps[0].key), (StepKind::ParkIdle, key(1)));
    }

    #[test]
    fn a_refused_step_goes_to_the_next_rung_and_is_not_asked_again_for_a_minute() {
        let mut g = acting();
        let facts = |free| {
            vec![gpu(
                free,
                0.4,
                vec![proc(1, 36, 0.0, Some(900.0)), proc(2, 20, 0.4, None)],
            )]
        };
        let first = decide(&mut g, &facts(19), T);
        assert_eq!(first[0].kind, StepKind::ParkIdle);
        g.outcome(&first[0], Outcome::Skipped, "protected", T);
        // The next rung, the pause, starts 8 s before full (1.5 × its 2 s lock + 5 s).
        assert!(decide(&mut g, &facts(19), T + 1_000).is_empty());
        let next = decide(&mut g, &facts(3), T + 2_000);
        assert_eq!(next[0].kind, StepKind::PauseGrower, "{next:?}");
        g.outcome(&next[0], Outcome::Skipped, "several GPUs", T + 2_000);
        assert!(
            decide(&mut g, &facts(3), T + 3_000).is_empty(),
            "both refused a minute ago"
        );
        // A minute later (its samples fed again), asked again.
        let again: usize = (61..=64)
            .map(|s| decide(&mut g, &facts(3), T + s * 1_000).len())
            .sum();
        assert!(again > 0, "asked again after a minute");
        let recent = &g.status()[0].recent;
        assert!(recent
            .iter()
            .take(2)
            .all(|r| r.outcome == StepOutcome::Refused));
    }

    /// Parked by the guard; the resume waits for the forecast alert to end, for room, and
    /// then for the hold; never while another park is under way on the GPU.
    #[test]
    fn a_resume_waits_for_no_alert_room_and_the_hold() {
        let mut g = acting();
        let facts = vec![gpu(
            19,
            0.4,
            vec![proc(1, 36, 0.0, Some(900.0)), proc(2, 20, 0.4, None)],
        )];
        let park = decide(&mut g, &facts, T).remove(0);
        assert_eq!(park.kind, StepKind::ParkIdle);
        g.outcome(&park, Outcome::Acted, "parking", T);
        let parked = ParkInfo {
            state: ParkState::Parked,
            bytes: Some(36 * GIB),
            since_ms: T,
        };
        let end = ParkEnd {
            key: key(1),
            resume: false,
            ok: true,
            bytes: Some(36 * GIB),
            seconds: 16.0,
            stranded: false,
            refused: false,
            detail: String::new(),
        };
        g.park_ended(&end, T + 16_000);
        let later = |free: u64, growth: f64, alert: bool| {
            let mut idle = proc(1, 0, 0.0, Some(900.0));
            idle.parked = Some(parked);
            let mut f = gpu(free, growth, vec![idle, proc(2, 44, growth, None)]);
            f.alert = alert;
            vec![f]
        };
        assert!(
            decide(&mut g, &later(36, 0.0, true), T + 20_000).is_empty(),
            "alert"
        );
        let waits = &g.status()[0].parked[0].waits_for;
        assert!(waits.contains("forecast alert"), "{waits}");
        assert!(
            decide(&mut g, &later(36, 0.0, false), T + 21_000).is_empty(),
            "36 GiB free: no room for 36 + 2.4"
        );
        assert!(
            decide(&mut g, &later(60, 0.0, false), T + 22_000).is_empty(),
            "room: the hold starts"
        );
        assert!(
            decide(&mut g, &later(60, 0.0, false), T + 51_000).is_empty(),
            "29 s held"
        );
        let resume = decide(&mut g, &later(60, 0.0, false), T + 52_000);
        assert_eq!(resume.len(), 1);
        assert_eq!((resume[0].kind, resume[0].key), (StepKind::Resume, key(1)));
        assert_eq!(g.status()[0].phase, GuardPhase::Acting);
    }

    /// A guard acting on GPU 0 whose 10 GiB job (PID 1) is parked and whose resume started at T.
    fn resuming_a_parked_job() -> Guard {
        let mut g = acting();
        let step = Step {
            gpu: 0,
            kind: StepKind::Resume,
            key: key(1),
            who: "job (PID 1)".into(),
            bytes: 10 * GIB,
            needs_s: 4.5,
            full_in_s: None,
            rate_bytes_s: 0.0,
            for_paused: false,
        };
        g.gpus.entry(0).or_default().parked.push(ParkedEntry {
            key: key(1),
            who: step.who.clone(),
            bytes: 10 * GIB,
            grower_rate: 0.0,
            since_ms: T,
            pauses: 0,
        });
        g.gpus
            .entry(0)
            .or_default()
            .started(&step, &Timing::default(), T);
        g
    }

    /// A restore that failed stranded the process: the guard forgets it (nothing to resume)
    /// and says so with the failure; a restore refused for room keeps it waiting.
    #[test]
    fn a_stranded_resume_is_recorded_failed_and_not_tried_again() {
        let mut g = resuming_a_parked_job();
        let end = ParkEnd {
            key: key(1),
            resume: true,
            ok: false,
            bytes: Some(10 * GIB),
            seconds: 1.0,
            stranded: true,
            refused: false,
            detail: "restore: out of memory".into(),
        };
        g.park_ended(&end, T + 2_000);
        let st = &g.gpus[&0];
        assert!(st.parked.is_empty() && st.in_flight.is_empty());
        assert_eq!(
            st.recent.back().map(|r| r.outcome),
            Some(StepOutcome::Failed)
        );
    }

    /// A resume the park thread refused (no room: nothing was changed) is the guard's step
    /// refused, as the command's final reply and the activity log say; it stays parked.
    #[test]
    fn a_resume_refused_by_the_park_thread_is_recorded_refused_and_stays_parked() {
        let mut g = resuming_a_parked_job();
        let end = ParkEnd {
            key: key(1),
            resume: true,
            ok: false,
            bytes: Some(10 * GIB),
            seconds: 0.1,
            stranded: false,
            refused: true,
            detail: "not enough free GPU memory to restore it".into(),
        };
        g.park_ended(&end, T + 1_000);
        let st = &g.gpus[&0];
        assert_eq!(st.parked.len(), 1, "still parked");
        let last = st.recent.back().expect("recorded");
        assert_eq!(
            (last.outcome, last.detail.as_str(), last.took_s),
            (StepOutcome::Refused, end.detail.as_str(), Some(0.1))
        );
    }

    /// What a View is shown equals the guard's status, whatever it held before (stale
    /// statuses, more GPUs, none), and stays so tick after tick.
    #[test]
    fn the_status_shown_in_place_equals_the_status() {
        let mut g = acting();
        let facts = |free, growth| {
            let mut two = vec![gpu(
                free,
                growth,
                vec![proc(1, 36, 0.0, Some(900.0)), proc(2, 20, growth, None)],
            )];
            let mut other = gpu(70, 0.0, vec![proc(3, 4, 0.0, None)]);
            other.index = 1;
            two.push(other);
            two
        };
        let mut shown = Vec::new();
        for (i, (free, growth)) in [(40, 0.0), (30, 0.4), (24, 0.4), (19, 0.4), (19, 0.0)]
            .into_iter()
            .enumerate()
        {
            let now = T + i as i64 * 1_000;
            for s in decide(&mut g, &facts(free, growth), now) {
                g.outcome(&s, Outcome::Acted, "started", now);
            }
            g.show_status(&mut shown);
            assert_eq!(shown, g.status(), "tick {i}");
        }
        let mut stale = g.status();
        stale[0].cannot.push("stale".into());
        stale.push(stale[0].clone());
        g.show_status(&mut stale);
        assert_eq!(stale, g.status());
    }

    #[test]
    fn in_dry_run_each_rung_is_said_once_per_episode() {
        let mut g = Guard::new(GuardSettings::default());
        let facts = |free, growth| {
            vec![gpu(
                free,
                growth,
                vec![
                    proc(1, 36, 0.0, Some(900.0)),
                    proc(3, 10, 0.0, Some(900.0)),
                    proc(2, 20, growth, None),
                ],
            )]
        };
        // Nothing is freed in a dry run: as the GPU fills, each rung is said in its turn.
        let mut said = Vec::new();
        for (i, free) in [19, 19, 8, 8, 3, 3].into_iter().enumerate() {
            let now = T + i as i64 * 1_000;
            for s in decide(&mut g, &facts(free, 0.4), now) {
                g.outcome(&s, Outcome::WouldAct, "would", now);
                said.push((s.kind, s.key.0.pid));
            }
        }
        assert_eq!(
            said,
            [
                (StepKind::ParkIdle, 1),
                (StepKind::ParkIdle, 3),
                (StepKind::PauseGrower, 2)
            ]
        );
        // Long after a refusal's minute, still not said again while the GPU fills.
        assert!(decide(&mut g, &facts(3, 0.4), T + 300_000).is_empty());
        // The episode ends when nothing grows; the next one says it again.
        assert!(decide(&mut g, &facts(19, 0.0), T + 301_000).is_empty());
        let next: Vec<StepKind> = (302..=305)
            .flat_map(|s| decide(&mut g, &facts(19, 0.4), T + s * 1_000))
            .map(|s| s.kind)
            .collect();
        assert_eq!(next.first(), Some(&StepKind::ParkIdle), "{next:?}");
    }
}
