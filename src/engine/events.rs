//! The engine's events ([`EngineEvent`]): what happened in a tick, as typed data and never as
//! sentences — a leak started or ended, an OOM suspected, an OOM forecast raised or cleared, a
//! rule's or a command's activity, recording failed or resumed, memory held by processes not
//! running here, a parked process that lost its memory. The engine numbers them once per tick,
//! after the tick's stages ran (`seq` strictly increasing over a run); its subscriber, the View
//! and the wire get them as they are, and each front end writes its own words from them
//! (the window's desktop notifications: `front::gui::alert_words`).

use serde::{Deserialize, Serialize};

use crate::act::rules::action::{Activity, Outcome};
use crate::model::UnixMs;
use crate::session::{Event, LeakInfo, OomHolder, RecordingGap};

/// Most events the View keeps ([`crate::engine::view::Monitor::events`]), newest last.
pub(crate) const EVENTS_KEPT: usize = 256;

/// One event of a tick, numbered by the engine. `A` is how an activity entry is held (the
/// engine's [`Activity`]; the wire's own type on the wire).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineEvent<A = Activity> {
    /// Its number: strictly increasing over the engine's run, from 1.
    pub seq: u64,
    /// When it happened.
    pub at_ms: UnixMs,
    /// What happened.
    #[serde(flatten)]
    pub kind: EngineEventKind<A>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EngineEventKind<A = Activity> {
    /// A series started to leak.
    LeakStarted {
        /// The leak.
        leak: LeakInfo,
    },
    /// A leak ended (growth stopped or memory was freed).
    LeakEnded {
        /// The leak.
        leak: LeakInfo,
        /// Memory gained over the episode (MiB).
        grown_mib: f64,
        /// Highest memory in the episode (MiB).
        peak_mib: f64,
    },
    /// A process left a nearly full GPU: it may have run out of memory.
    OomSuspected {
        /// The GPU.
        device_index: u32,
        /// Highest used / total of the GPU in the seconds before (percent).
        used_pct: f64,
        /// The processes that left.
        victims: Vec<OomHolder>,
        /// Who held the GPU then, largest first.
        holders: Vec<OomHolder>,
    },
    /// A GPU is forecast full within the warning time (the forecast became an alert).
    OomForecast {
        /// The GPU.
        device_index: u32,
        /// Seconds until full.
        full_in_s: f64,
        /// The processes whose growth drives it, largest first.
        drivers: Vec<OomHolder>,
    },
    /// The forecast raised at `raised_ms` receded.
    OomForecastEnded {
        /// The GPU.
        device_index: u32,
        /// When it was raised.
        raised_ms: UnixMs,
    },
    /// A rule, the guard or a command acted (or would have, or was kept from acting).
    Activity {
        /// The activity entry.
        entry: A,
        /// True for a front end's command taken between ticks, false for the tick's own.
        from_command: bool,
    },
    /// Writing the session log failed (the first failure of a gap).
    RecordingFailed {
        /// What the OS said.
        cause: String,
    },
    /// Writing the session log works again after a gap.
    RecordingResumed {
        /// The samples that are not in the log, and why.
        gap: RecordingGap,
    },
    /// A GPU's memory held by processes not running here reached the alert size.
    OrphanMemory {
        /// The GPU, its holders and the remedy.
        gpu: crate::detect::orphans::OrphanGpu,
    },
    /// A parked process's restore failed for good: it lost its GPU memory.
    ParkLost {
        /// The process and its GPU.
        key: crate::model::history::ProcSeriesKey,
        /// Its name.
        name: String,
        /// What happened (the park worker's account).
        detail: String,
    },
}

/// What an event is about, for the front ends' alert settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertKind {
    /// A leak was suspected.
    Leak,
    /// A process may have run out of GPU memory.
    Oom,
    /// A GPU is forecast to be full soon.
    Forecast,
    /// A rule acted.
    Rule,
    /// A problem the engine reports (recording failed or resumed, memory held by processes
    /// not running here, a parked process's memory lost).
    Report,
}

impl<A> EngineEventKind<A> {
    /// The same event with its activity entry made by `f`.
    pub(crate) fn map_activity<B>(self, f: impl FnOnce(A) -> B) -> EngineEventKind<B> {
        use EngineEventKind as K;
        match self {
            K::LeakStarted { leak } => K::LeakStarted { leak },
            K::LeakEnded {
                leak,
                grown_mib,
                peak_mib,
            } => K::LeakEnded {
                leak,
                grown_mib,
                peak_mib,
            },
            K::OomSuspected {
                device_index,
                used_pct,
                victims,
                holders,
            } => K::OomSuspected {
                device_index,
                used_pct,
                victims,
                holders,
            },
            K::OomForecast {
                device_index,
                full_in_s,
                drivers,
            } => K::OomForecast {
                device_index,
                full_in_s,
                drivers,
            },
            K::OomForecastEnded {
                device_index,
                raised_ms,
            } => K::OomForecastEnded {
                device_index,
                raised_ms,
            },
            K::Activity {
                entry,
                from_command,
            } => K::Activity {
                entry: f(entry),
                from_command,
            },
            K::RecordingFailed { cause } => K::RecordingFailed { cause },
            K::RecordingResumed { gap } => K::RecordingResumed { gap },
            K::OrphanMemory { gpu } => K::OrphanMemory { gpu },
            K::ParkLost { key, name, detail } => K::ParkLost { key, name, detail },
        }
    }
}

impl<A> EngineEvent<A> {
    /// The same event with its activity entry made by `f`.
    pub(crate) fn map_activity<B>(self, f: impl FnOnce(A) -> B) -> EngineEvent<B> {
        EngineEvent {
            seq: self.seq,
            at_ms: self.at_ms,
            kind: self.kind.map_activity(f),
        }
    }
}

impl EngineEventKind {
    /// The event a watch's recorded event `e` stands for (leaks, OOMs, forecasts), with its
    /// time; None for the log's other events.
    pub(crate) fn of_recorded(e: &Event) -> Option<(UnixMs, Self)> {
        let kind = match e.clone() {
            Event::LeakStarted { leak, .. } => Self::LeakStarted { leak },
            Event::LeakEnded {
                leak,
                grown_mib,
                peak_mib,
                ..
            } => Self::LeakEnded {
                leak,
                grown_mib,
                peak_mib,
            },
            Event::OomSuspected {
                device_index,
                used_pct,
                victims,
                holders,
                ..
            } => Self::OomSuspected {
                device_index,
                used_pct,
                victims,
                holders,
            },
            Event::OomForecast {
                device_index,
                full_in_s,
                drivers,
                ..
            } => Self::OomForecast {
                device_index,
                full_in_s,
                drivers,
            },
            Event::OomForecastEnded {
                device_index,
                raised_ms,
                ..
            } => Self::OomForecastEnded {
                device_index,
                raised_ms,
            },
            _ => return None,
        };
        Some((e.unix_ms(), kind))
    }

    /// What it alerts of, if anything: a leak started, an OOM suspected, a forecast raised, a
    /// rule's entry that acted (not a command's: its front end asked for it), a report.
    pub fn alert_kind(&self) -> Option<AlertKind> {
        match self {
            Self::LeakStarted { .. } => Some(AlertKind::Leak),
            Self::OomSuspected { .. } => Some(AlertKind::Oom),
            Self::OomForecast { .. } => Some(AlertKind::Forecast),
            Self::Activity {
                entry,
                from_command: false,
            } if entry.outcome == Outcome::Acted => Some(AlertKind::Rule),
            Self::RecordingFailed { .. }
            | Self::RecordingResumed { .. }
            | Self::OrphanMemory { .. }
            | Self::ParkLost { .. } => Some(AlertKind::Report),
            _ => None,
        }
    }
}

/// Which events a front end is alerted of (the settings' `notifications`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertFilter {
    /// Leaks and OOMs (`notifications.leaks`).
    pub leaks: bool,
    /// Rules that acted (`notifications.rules`).
    pub rules: bool,
}

impl Default for AlertFilter {
    fn default() -> Self {
        Self {
            leaks: true,
            rules: true,
        }
    }
}

impl AlertFilter {
    /// The filter of settings `s`.
    pub fn of(s: &crate::engine::settings::Settings) -> Self {
        Self {
            leaks: s.notifications.leaks,
            rules: s.notifications.rules,
        }
    }

    /// True when `e` is an alert these settings want: forecasts and reports always.
    pub(crate) fn wants(&self, e: &EngineEventKind) -> bool {
        match e.alert_kind() {
            Some(AlertKind::Leak | AlertKind::Oom) => self.leaks,
            Some(AlertKind::Rule) => self.rules,
            Some(AlertKind::Forecast | AlertKind::Report) => true,
            None => false,
        }
    }
}

/// Numbers one tick's events in their order, after `last` (the number before them).
pub(crate) fn number(last: &mut u64, events: Vec<(UnixMs, EngineEventKind)>) -> Vec<EngineEvent> {
    events
        .into_iter()
        .map(|(at_ms, kind)| {
            *last += 1;
            EngineEvent {
                seq: *last,
                at_ms,
                kind,
            }
        })
        .collect()
}

/// Event `kind` as the first of a run, at 1 s past the epoch: the unit tests' fixture.
#[cfg(test)]
pub(crate) fn first_event(kind: EngineEventKind) -> EngineEvent {
    EngineEvent {
        seq: 1,
        at_ms: 1_000,
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_numbered_on_from_the_last() {
        let mut last = 0;
        let kind = || EngineEventKind::RecordingFailed {
            cause: "disk full".into(),
        };
        let a = number(&mut last, vec![(5, kind()), (6, kind())]);
        let b = number(&mut last, vec![(7, kind())]);
        let seqs: Vec<u64> = a.iter().chain(&b).map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3]);
        assert_eq!(b[0].at_ms, 7);
        assert!(number(&mut last, Vec::new()).is_empty());
        assert_eq!(last, 3);
    }

    #[test]
    fn the_filter_follows_the_settings_and_always_keeps_forecasts_and_reports() {
        let forecast = EngineEventKind::OomForecast {
            device_index: 0,
            full_in_s: 60.0,
            drivers: Vec::new(),
        };
        let ended = EngineEventKind::OomForecastEnded {
            device_index: 0,
            raised_ms: 1,
        };
        let report = EngineEventKind::RecordingFailed { cause: "x".into() };
        let quiet = AlertFilter {
            leaks: false,
            rules: false,
        };
        assert!(quiet.wants(&forecast) && quiet.wants(&report));
        assert!(!quiet.wants(&ended) && !AlertFilter::default().wants(&ended));
    }
}
