//! The OOM guard without acting: samples (a recorded session, or a test's simulated GPU)
//! played through the same detectors and the same guard as the live engine ([`DryGuard`]),
//! and `vramwarden guard what-if`'s report of what the guard would have done before an OOM
//! ([`what_if`]): when each step would have started, the lead time it had, and whether it
//! would have finished before the death, the park times from the measured (or given) rate.

use std::collections::HashSet;

use crate::act::guard::{Guard, ParkEnd, Step, StepKind};
use crate::act::rules::eval::RuleState;
use crate::detect::forecast_alert::ForecastWatch;
use crate::detect::leak_watch::LeakWatch;
use crate::detect::oom_watch::OomWatch;
use crate::engine::settings::Settings;
use crate::engine::stages::guard::{gpu_facts, who_of, Findings};
use crate::model::history::ProcSeriesKey;
use crate::model::outcome::Outcome;
use crate::model::{ParkInfo, ParkState, Snapshot, UnixMs};
use crate::session::Event;

/// The detectors and the guard, fed sample by sample; nothing acts.
pub struct DryGuard {
    leaks: LeakWatch,
    forecasts: ForecastWatch,
    ooms: OomWatch,
    activity: RuleState,
    /// The guard.
    pub guard: Guard,
}

/// What one sample gave.
#[derive(Debug, Default)]
pub struct DryTick {
    /// The steps the guard would start now.
    pub steps: Vec<Step>,
    /// OOM suspicions and forecast alerts found in this sample.
    pub events: Vec<Event>,
}

impl DryGuard {
    /// The detectors and the guard on `s` (leak sensitivity, warning time, guard).
    pub fn new(s: &Settings) -> Self {
        let mut leaks = LeakWatch::default();
        leaks.set_settings(s.leaks);
        Self {
            leaks,
            forecasts: ForecastWatch::new(s.notifications.oom_forecast_minutes.clamp(0.0, 1440.0)),
            ooms: OomWatch::default(),
            activity: RuleState::default(),
            guard: Guard::new(s.guard.clone()),
        }
    }

    /// Feeds one sample (its forecast is written into it).
    pub fn tick(&mut self, snap: &mut Snapshot) -> DryTick {
        let now = snap.taken_at_ms;
        let _ = self.leaks.observe(snap);
        self.leaks.forecast(snap);
        let mut events = self.ooms.observe(snap);
        let leaking = self.leaks.leaking_since();
        let growth = self.leaks.process_rates();
        let growing: HashSet<ProcSeriesKey> =
            leaking.keys().chain(growth.keys()).copied().collect();
        let leaks = &self.leaks;
        let since = |d: u32| leaks.forecast_growth_since(d);
        events.extend(self.forecasts.observe(snap, &|| growing.clone(), &since));
        let alerts: Vec<u32> = self
            .forecasts
            .alerts()
            .iter()
            .map(|a| a.device_index)
            .collect();
        self.activity.observe(snap);
        let found = Findings {
            growth: &growth,
            leaking: &leaking,
            alerts: &alerts,
        };
        let activity = &self.activity;
        let idle = |k: &ProcSeriesKey| activity.idle_ms(k, now).map(|ms| ms as f64 / 1000.0);
        let facts = gpu_facts(snap, &found, &idle, &mut |p| who_of(p).into(), &mut |_| {
            None
        });
        DryTick {
            steps: self.guard.decide(&facts, now),
            events,
        }
    }
}

/// A step the guard would have taken, as `guard what-if` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIfStep {
    /// The step.
    pub step: Step,
    /// When it would have started.
    pub at_ms: UnixMs,
    /// When it would have ended.
    pub ends_ms: UnixMs,
    /// The first OOM on its GPU after it started, if any.
    pub oom_ms: Option<UnixMs>,
}

impl WhatIfStep {
    /// Seconds from its start to the OOM (its lead time).
    pub(crate) fn lead_s(&self) -> Option<f64> {
        self.oom_ms.map(|o| (o - self.at_ms) as f64 / 1000.0)
    }

    /// Whether it would have finished before the OOM (true when none came).
    pub(crate) fn in_time(&self) -> bool {
        self.oom_ms.is_none_or(|o| self.ends_ms <= o)
    }
}

/// `guard what-if`'s findings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WhatIf {
    /// The steps, in order.
    pub steps: Vec<WhatIfStep>,
    /// The OOMs: when, on which GPU, and who died.
    pub ooms: Vec<(UnixMs, u32, String)>,
    /// The forecast alerts raised: when, on which GPU, the time to full then.
    pub alerts: Vec<(UnixMs, u32, f64)>,
    /// The park rate used (GiB/s), and whether it was given.
    pub park_gib_s: (f64, bool),
    /// The session's first and last sample.
    pub span: Option<(UnixMs, UnixMs)>,
    /// The processes the guard would have left parked (or being parked) at the session's
    /// end: who, the bytes moved, since when.
    pub parked_at_end: Vec<(String, u64, UnixMs)>,
    /// The settings file has the guard switched off (the what-if plays it on all the same).
    pub guard_off: bool,
    /// False when no sample knew a GPU's total memory (an nvidia-smi import without its GPU
    /// log): the guard had nothing to judge by, and OOMs could not be told.
    pub memory_known: bool,
}

/// A park or resume the what-if pretends is under way.
struct Virtual {
    key: ProcSeriesKey,
    who: String,
    bytes: u64,
    resume: bool,
    since_ms: UnixMs,
    ends_ms: UnixMs,
    parked: bool,
}

/// Plays `samples` through the guard (settings `s`, park rate `park_gib_s` if given) without
/// acting; `recorded` are the session's own events (its OOMs). What the guard parks is shown
/// parked in the later samples (its memory free), so each later step is the one it would
/// then have taken.
pub fn what_if(
    samples: impl Iterator<Item = Snapshot>,
    recorded: &[Event],
    s: &Settings,
    park_gib_s: Option<f64>,
) -> WhatIf {
    let mut settings = s.clone();
    settings.guard.enabled = true;
    let mut dry = DryGuard::new(&settings);
    *dry.guard.timing_mut() = crate::act::guard::Timing::with_rates(park_gib_s, None);
    let mut out = WhatIf {
        park_gib_s: (dry.guard.timing_mut().park_rate().0, park_gib_s.is_some()),
        guard_off: !s.guard.enabled,
        ..WhatIf::default()
    };
    let mut virtuals: Vec<Virtual> = Vec::new();
    let mut detected = Vec::new();
    for mut snap in samples {
        let now = snap.taken_at_ms;
        out.span = Some((out.span.map_or(now, |s| s.0), now));
        out.memory_known |= snap.devices.iter().any(|d| d.memory_total_bytes.is_some());
        settle(&mut dry, &mut virtuals, now);
        show_virtual(&mut snap, &virtuals);
        let t = dry.tick(&mut snap);
        for step in t.steps {
            out.steps
                .push(start_step(&mut dry, step, now, &mut virtuals));
        }
        detected.extend(t.events);
    }
    out.parked_at_end = virtuals
        .iter()
        .filter(|v| !v.resume)
        .map(|v| (v.who.clone(), v.bytes, v.since_ms))
        .collect();
    out.ooms = ooms_in(recorded);
    if out.ooms.is_empty() {
        out.ooms = ooms_in(&detected);
    }
    out.alerts = alerts_in(&detected);
    for w in &mut out.steps {
        w.oom_ms = out
            .ooms
            .iter()
            .filter(|(t, gpu, _)| *gpu == w.step.gpu && *t >= w.at_ms)
            .map(|(t, _, _)| *t)
            .min();
    }
    out
}

/// Tells the guard that `step`, decided at `now`, was taken; a park or resume is pretended
/// under way (added to `virtuals`) until its time is up. The step as reported.
fn start_step(
    dry: &mut DryGuard,
    step: Step,
    now: UnixMs,
    virtuals: &mut Vec<Virtual>,
) -> WhatIfStep {
    dry.guard.outcome(&step, Outcome::Acted, "what-if", now);
    let ends_ms = now + (step.needs_s * 1000.0) as i64;
    if matches!(
        step.kind,
        StepKind::ParkIdle | StepKind::PauseGrower | StepKind::Resume
    ) {
        virtuals.push(Virtual {
            key: step.key,
            who: step.who.clone(),
            bytes: step.bytes,
            resume: step.kind == StepKind::Resume,
            since_ms: now,
            ends_ms,
            parked: false,
        });
    }
    WhatIfStep {
        step,
        at_ms: now,
        ends_ms,
        oom_ms: None,
    }
}

/// The OOMs suspected in `events`: when, on which GPU, and who died (names and PIDs).
fn ooms_in(events: &[Event]) -> Vec<(UnixMs, u32, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::OomSuspected {
                unix_ms,
                device_index,
                victims,
                ..
            } => Some((
                *unix_ms,
                *device_index,
                victims
                    .iter()
                    .map(|v| format!("{} (PID {})", v.name, v.pid))
                    .collect::<Vec<_>>()
                    .join(", "),
            )),
            _ => None,
        })
        .collect()
}

/// The forecast alerts raised in `events`: when, on which GPU, the time to full then.
fn alerts_in(events: &[Event]) -> Vec<(UnixMs, u32, f64)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::OomForecast {
                unix_ms,
                device_index,
                full_in_s,
                ..
            } => Some((*unix_ms, *device_index, *full_in_s)),
            _ => None,
        })
        .collect()
}

/// Ends the virtual parks and resumes whose time has come, telling the guard.
fn settle(dry: &mut DryGuard, virtuals: &mut Vec<Virtual>, now: UnixMs) {
    for v in virtuals
        .iter_mut()
        .filter(|v| !v.parked && v.ends_ms <= now)
    {
        v.parked = !v.resume;
        dry.guard.park_ended(
            &ParkEnd {
                key: v.key,
                resume: v.resume,
                ok: true,
                bytes: Some(v.bytes),
                seconds: (v.ends_ms - v.since_ms) as f64 / 1000.0,
                stranded: false,
                refused: false,
                detail: "what-if".into(),
            },
            now,
        );
    }
    let resumed: Vec<ProcSeriesKey> = virtuals
        .iter()
        .filter(|v| v.resume && v.ends_ms <= now)
        .map(|v| v.key)
        .collect();
    virtuals.retain(|v| !resumed.contains(&v.key));
}

/// Shows the virtual parks in `snap`: a parked process with no GPU memory, its GPU's free
/// memory that much larger.
fn show_virtual(snap: &mut Snapshot, virtuals: &[Virtual]) {
    for v in virtuals {
        let state = match (v.parked, v.resume) {
            (true, _) => ParkState::Parked,
            (false, false) => ParkState::Parking,
            (false, true) => ParkState::Resuming,
        };
        let moved = if v.parked { v.bytes } else { 0 };
        let Some(p) = snap
            .processes
            .iter_mut()
            .find(|p| p.key() == v.key.0 && p.device_index == v.key.1)
        else {
            continue;
        };
        p.parked = Some(ParkInfo {
            state,
            bytes: Some(v.bytes),
            since_ms: v.since_ms,
        });
        if moved > 0 {
            p.used_bytes = Some(0);
            if let Some(d) = snap.devices.iter_mut().find(|d| d.index == v.key.1) {
                d.memory_free_bytes = d.memory_free_bytes.map(|f| f.saturating_add(moved));
                d.memory_used_bytes = d.memory_used_bytes.map(|u| u.saturating_sub(moved));
            }
        }
    }
}
