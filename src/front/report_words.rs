//! The front ends' words for the problems the engine reports: recording failed or resumed,
//! memory held by processes not running here, a parked process that lost its memory (the
//! events of [`AlertKind::Report`]). The engine sends these as typed events
//! ([`EngineEvent`]) and writes no sentence; each is said here once, for every front end: the
//! window's status bar and desktop notification, and the stderr line of the headless ones
//! (`record`, `monitor`, the agent), which print them through `stderr_sink`, and of a window
//! on this computer's engine, for the terminal it was started from.

use crate::detect::orphans::{OrphanGpu, OrphanPid};
use crate::engine::{AlertKind, AlertSink, EngineEvent, EngineEventKind};

/// The sentence of a reported problem; `None` for an event that is no report (a leak, an
/// OOM, a forecast, an activity entry).
pub(crate) fn sentence<A>(kind: &EngineEventKind<A>) -> Option<String> {
    use EngineEventKind as K;
    Some(match kind {
        K::RecordingFailed { cause } => {
            format!("recording failed, retrying every sample: {cause}")
        }
        K::RecordingResumed { gap } => format!(
            "recording resumed; {} sample(s) were not written: {}",
            gap.lost_samples, gap.cause
        ),
        K::OrphanMemory { gpu } => orphans(gpu),
        K::ParkLost { detail, .. } => detail.clone(),
        _ => return None,
    })
}

/// A GPU's memory held by processes not running here: how much, by whom (the first five),
/// and the remedy.
pub(crate) fn orphans(g: &OrphanGpu) -> String {
    let who: Vec<String> = g.pids.iter().take(5).map(OrphanPid::label).collect();
    format!(
        "GPU {}: {:.1} GiB {}{}; {}",
        g.device_index,
        g.total_bytes as f64 / crate::model::GIB as f64,
        who.join(", "),
        if g.pids.len() > 5 { ", …" } else { "" },
        g.remedy
    )
}

/// The stderr line of event `e` (`vramwarden: ` and its [`sentence`]); `None` for an event
/// that is no report.
pub fn stderr_line<A>(e: &EngineEvent<A>) -> Option<String> {
    sentence(&e.kind).map(|s| format!("vramwarden: {s}"))
}

/// Prints alert `e` on stderr when it is a report ([`stderr_line`]); the other alerts are not
/// printed.
pub(crate) fn print(e: &EngineEvent) {
    if e.kind.alert_kind() == Some(AlertKind::Report) {
        if let Some(line) = stderr_line(e) {
            eprintln!("{line}");
        }
    }
}

/// The headless front ends' subscriber to the engine's alerts: each report printed on stderr
/// as it happens ([`print`]).
pub(crate) fn stderr_sink() -> AlertSink {
    std::sync::Arc::new(|e: EngineEvent| print(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::orphans::NotRunning;
    use crate::session::RecordingGap;

    fn event(kind: EngineEventKind) -> EngineEvent {
        EngineEvent {
            seq: 1,
            at_ms: 1_000,
            kind,
        }
    }

    #[test]
    fn each_report_has_its_sentence_and_its_stderr_line() {
        let failed = event(EngineEventKind::RecordingFailed {
            cause: "No space left on device".into(),
        });
        assert_eq!(
            stderr_line(&failed).as_deref(),
            Some("vramwarden: recording failed, retrying every sample: No space left on device")
        );
        let gap = RecordingGap {
            from_ms: 1,
            to_ms: 2,
            lost_samples: 3,
            cause: "I/O error".into(),
        };
        assert_eq!(
            sentence(&EngineEventKind::<()>::RecordingResumed { gap }).as_deref(),
            Some("recording resumed; 3 sample(s) were not written: I/O error")
        );
        let ended = EngineEventKind::<()>::OomForecastEnded {
            device_index: 0,
            raised_ms: 1,
        };
        assert_eq!(sentence(&ended), None);
    }

    #[test]
    fn orphaned_memory_names_its_gpu_size_first_five_pids_and_remedy() {
        let pids = (1..=6)
            .map(|pid| OrphanPid {
                pid,
                used_bytes: None,
                kind: if pid == 1 {
                    NotRunning::Zombie
                } else {
                    NotRunning::NoProcess
                },
            })
            .collect();
        let g = OrphanGpu {
            device_index: 2,
            total_bytes: 34 * crate::model::GIB,
            pids,
            holders: Vec::new(),
            remedy: "reboot".into(),
        };
        let said = orphans(&g);
        assert!(
            said.starts_with(
                "GPU 2: 34.0 GiB held by PID 1, a zombie, held by PID 2, not running here"
            ),
            "{said}"
        );
        assert!(
            said.ends_with("held by PID 5, not running here, …; reboot"),
            "{said}"
        );
        assert!(!said.contains("PID 6"), "{said}");
    }
}
