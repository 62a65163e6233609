//! The window's words for the engine's alerts: an [`EngineEvent`] that is an alert becomes a
//! notification's headline and sentence ([`Words`]), how insistent it is and, for a leak, the
//! key a later one replaces it under. The engine sends typed events only; these are the words
//! users read in a desktop notification, for this computer's engine and an agent's alike (a
//! reported problem's sentence is every front end's: [`crate::front::report_words`]).

use crate::engine::{EngineEvent, EngineEventKind};
use crate::front::report_words::Where;
use crate::session::{LeakInfo, OomHolder};

/// How insistent a notification is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    /// Informational (a rule acted, a recording problem, a forecast).
    Normal,
    /// Needs attention soon (a leak that will fill the GPU).
    Critical,
}

/// One notification's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words {
    /// How insistent.
    pub urgency: Urgency,
    /// A later notification with the same key replaces this one where the server can (a
    /// leak's is updated in place rather than stacked).
    pub replaces: Option<String>,
    /// The headline.
    pub summary: String,
    /// The sentence.
    pub body: String,
}

impl Words {
    fn normal(summary: impl Into<String>, body: String) -> Self {
        Self {
            urgency: Urgency::Normal,
            replaces: None,
            summary: summary.into(),
            body,
        }
    }
}

/// The notification for event `e` of the engine `at` where it runs (this computer's, or an
/// agent's host); None for an event that is no alert (a leak that ended, a forecast that
/// receded, an activity entry that did not act or that a command asked for).
pub fn of(e: &EngineEvent, at: Where) -> Option<Words> {
    use EngineEventKind as K;
    e.kind.alert_kind()?;
    Some(match &e.kind {
        K::LeakStarted { leak } => leak_words(leak),
        K::OomSuspected {
            device_index,
            used_pct,
            victims,
            holders,
        } => Words::normal(
            format!("GPU {device_index}: a process may have run out of memory"),
            crate::session::describe_oom(*used_pct, victims, holders),
        ),
        K::OomForecast {
            device_index,
            full_in_s,
            drivers,
        } => forecast_words(*device_index, *full_in_s, drivers),
        K::Activity { entry, .. } => Words::normal(
            format!("vramwarden rule “{}”", entry.rule),
            entry.detail.clone(),
        ),
        K::RecordingFailed { .. } => report("Recording failed".into(), e, at)?,
        K::RecordingResumed { .. } => report("Recording resumed".into(), e, at)?,
        K::OrphanMemory { .. } => report(
            format!("GPU memory held by processes not running {}", at.place()),
            e,
            at,
        )?,
        K::ParkLost { .. } => report("A parked process lost its GPU memory".into(), e, at)?,
        K::LeakEnded { .. } | K::OomForecastEnded { .. } => return None,
    })
}

/// A reported problem of the engine `at`: `summary` over the words every front end says for
/// it ([`crate::front::report_words::sentence`]).
fn report(summary: String, e: &EngineEvent, at: Where) -> Option<Words> {
    crate::front::report_words::sentence(&e.kind, at).map(|body| Words::normal(summary, body))
}

/// A leak suspected (it replaces an earlier notification for the same process).
fn leak_words(leak: &LeakInfo) -> Words {
    let what = if leak.ghost {
        format!("GPU {} ghost memory", leak.device_index)
    } else {
        format!(
            "{} (PID {}) on GPU {}",
            leak.name, leak.pid, leak.device_index
        )
    };
    Words {
        urgency: Urgency::Critical,
        replaces: Some(what.clone()),
        summary: "GPU memory leak suspected".into(),
        body: format!(
            "{what} is growing at {}",
            crate::model::format::rate(leak.rate_mib_per_min)
        ),
    }
}

/// An OOM forecast raised on GPU `device_index` (the banner's words).
fn forecast_words(device_index: u32, full_in_s: f64, drivers: &[OomHolder]) -> Words {
    let who: Vec<String> = drivers
        .iter()
        .map(|d| format!("{} (PID {})", d.name, d.pid))
        .collect();
    Words::normal(
        format!("GPU {device_index} will run out of memory"),
        crate::detect::forecast_alert::sentence(device_index, Some(full_in_s), &who),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::events::first_event as event;

    fn of_here(e: &EngineEvent) -> Option<Words> {
        of(e, Where::Here)
    }

    fn holder(pid: u32, name: &str) -> OomHolder {
        OomHolder::holding(pid, 0, name.into(), "alice".into(), 2048.0)
    }

    #[test]
    fn a_leak_is_critical_and_keyed_by_its_process() {
        let leak = LeakInfo {
            pid: 4242,
            start_time_ms: 1,
            device_index: 1,
            name: "python3".into(),
            user: "alice".into(),
            ghost: false,
            since_ms: 0,
            rate_mib_per_min: 61.4,
            why: String::new(),
        };
        let w =
            of_here(&event(EngineEventKind::LeakStarted { leak: leak.clone() })).expect("words");
        assert_eq!(w.summary, "GPU memory leak suspected");
        assert_eq!(
            w.body,
            "python3 (PID 4242) on GPU 1 is growing at 61 MiB/min"
        );
        assert_eq!(w.urgency, Urgency::Critical);
        assert_eq!(w.replaces.as_deref(), Some("python3 (PID 4242) on GPU 1"));
        let ghost = LeakInfo {
            ghost: true,
            ..leak
        };
        let w = of_here(&event(EngineEventKind::LeakStarted { leak: ghost })).expect("words");
        assert_eq!(w.body, "GPU 1 ghost memory is growing at 61 MiB/min");
    }

    #[test]
    fn a_forecast_and_an_oom_say_the_banner_s_and_the_log_s_words() {
        let w = of_here(&event(EngineEventKind::OomForecast {
            device_index: 0,
            full_in_s: 367.0,
            drivers: vec![holder(70411, "python3")],
        }))
        .expect("words");
        assert_eq!(w.summary, "GPU 0 will run out of memory");
        assert_eq!(
            w.body,
            crate::detect::forecast_alert::sentence(
                0,
                Some(367.0),
                &["python3 (PID 70411)".to_string()]
            )
        );
        assert!(w.body.contains("python3 (PID 70411) growing"), "{}", w.body);
        let w = of_here(&event(EngineEventKind::OomSuspected {
            device_index: 2,
            used_pct: 99.5,
            victims: vec![holder(7, "victim")],
            holders: vec![holder(8, "holder")],
        }))
        .expect("words");
        assert_eq!(w.summary, "GPU 2: a process may have run out of memory");
        assert!(
            w.body.starts_with("victim (PID 7) holding 2.0 GiB left"),
            "{}",
            w.body
        );
    }

    #[test]
    fn reports_keep_their_words_and_what_is_no_alert_has_none() {
        let w = of_here(&event(EngineEventKind::RecordingFailed {
            cause: "No space left on device".into(),
        }))
        .expect("words");
        assert_eq!(w.summary, "Recording failed");
        assert_eq!(
            w.body,
            "recording failed, retrying every sample: No space left on device"
        );
        let gap = crate::session::RecordingGap {
            from_ms: 1,
            to_ms: 2,
            lost_samples: 3,
            cause: "I/O error".into(),
        };
        let w = of_here(&event(EngineEventKind::RecordingResumed { gap })).expect("words");
        assert_eq!(
            w.body,
            "recording resumed; 3 sample(s) were not written: I/O error"
        );
        let ended = EngineEventKind::OomForecastEnded {
            device_index: 0,
            raised_ms: 1,
        };
        assert_eq!(of_here(&event(ended)), None);
    }

    #[test]
    fn an_agent_s_orphaned_memory_is_headed_and_said_on_its_host() {
        let e = event(EngineEventKind::OrphanMemory {
            gpu: crate::detect::orphans::one_gone_pid(0, "reboot"),
        });
        let here = of_here(&e).expect("words");
        assert_eq!(
            here.summary,
            "GPU memory held by processes not running here"
        );
        assert!(
            here.body.contains("PID 4711, not running here"),
            "{}",
            here.body
        );
        let there = of(&e, Where::Host("gpu-box-3")).expect("words");
        assert_eq!(
            there.summary,
            "GPU memory held by processes not running on gpu-box-3"
        );
        assert!(
            there.body.contains("PID 4711, not running on gpu-box-3"),
            "{}",
            there.body
        );
    }
}
