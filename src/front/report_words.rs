//! The front ends' words for the problems the engine reports: recording failed or resumed,
//! memory held by processes not running here, a parked process that lost its memory (the
//! events of [`AlertKind::Report`]). The engine sends these as typed events
//! ([`EngineEvent`]) and writes no sentence; each is said here once, for every front end: the
//! window's status bar and desktop notification, and the stderr line of the headless ones
//! (`record`, `monitor`, the agent), which print them through `stderr_sink`, and of a window
//! on this computer's engine, for the terminal it was started from.
//!
//! Where a sentence names a place it says where the engine runs ([`Where`]): "here" for this
//! computer's engine and on the headless front ends' stderr (they run on that host), "on
//! HOST" in a window attached to an agent. Of the reports only memory held by processes not
//! running there names a place; the recording and parked-process sentences name none.

use crate::detect::orphans::OrphanGpu;
use crate::engine::{AlertKind, AlertSink, EngineEvent, EngineEventKind};

/// Where the engine whose reports are said runs, for the sentences that name a place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where<'a> {
    /// This computer: the front end runs where the engine does.
    Here,
    /// An agent's host, by its name.
    Host(&'a str),
}

impl<'a> Where<'a> {
    /// [`Where::Host`] for an agent's `host`, [`Where::Here`] for none.
    #[cfg(feature = "gui")]
    pub(crate) fn of(host: Option<&'a str>) -> Self {
        host.map_or(Self::Here, Self::Host)
    }

    /// "here", or "on HOST": what "not running …" is followed by.
    pub(crate) fn place(self) -> String {
        match self {
            Self::Here => "here".into(),
            Self::Host(h) => format!("on {h}"),
        }
    }

    /// The machine by name: "this machine", or the host's.
    #[cfg(feature = "gui")]
    pub(crate) fn machine(self) -> &'a str {
        match self {
            Self::Here => "this machine",
            Self::Host(h) => h,
        }
    }
}

/// The sentence of a reported problem, with the engine `at` where it runs; `None` for an event
/// that is no report (a leak, an OOM, a forecast, an activity entry).
pub(crate) fn sentence<A>(kind: &EngineEventKind<A>, at: Where) -> Option<String> {
    use EngineEventKind as K;
    Some(match kind {
        K::RecordingFailed { cause } => {
            format!("recording failed, retrying every sample: {cause}")
        }
        K::RecordingResumed { gap } => format!(
            "recording resumed; {} sample(s) were not written: {}",
            gap.lost_samples, gap.cause
        ),
        K::OrphanMemory { gpu } => orphans(gpu, at),
        K::ParkLost { detail, .. } => detail.clone(),
        _ => return None,
    })
}

/// A GPU's memory held by processes not running where the engine runs (`at`): how much, by
/// whom (the first five), and the remedy ([`remedy`]).
pub(crate) fn orphans(g: &OrphanGpu, at: Where) -> String {
    let place = at.place();
    let who: Vec<String> = g.pids.iter().take(5).map(|p| p.label_at(&place)).collect();
    format!(
        "GPU {}: {:.1} GiB {}{}; {}",
        g.device_index,
        g.total_bytes as f64 / crate::model::GIB as f64,
        who.join(", "),
        if g.pids.len() > 5 { ", …" } else { "" },
        remedy(g, at)
    )
}

/// What can free GPU `g`'s orphaned memory, on the engine's machine `at`: the engine's own
/// words for this computer's, said again naming the agent's host for an agent's.
pub(crate) fn remedy(g: &OrphanGpu, at: Where) -> String {
    match at {
        Where::Here => g.remedy.clone(),
        Where::Host(h) => crate::detect::orphans::remedy_on(&g.pids, &g.holders, h),
    }
}

/// The stderr line of event `e` (`vramwarden: ` and its [`sentence`], said "here": the
/// headless front ends run where their engine does); `None` for an event that is no report.
pub fn stderr_line<A>(e: &EngineEvent<A>) -> Option<String> {
    sentence(&e.kind, Where::Here).map(|s| format!("vramwarden: {s}"))
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
    use crate::detect::orphans::{NotRunning, OrphanPid};
    use crate::session::RecordingGap;

    use crate::engine::events::first_event as event;

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
            sentence(
                &EngineEventKind::<()>::RecordingResumed { gap },
                Where::Here
            )
            .as_deref(),
            Some("recording resumed; 3 sample(s) were not written: I/O error")
        );
        let ended = EngineEventKind::<()>::OomForecastEnded {
            device_index: 0,
            raised_ms: 1,
        };
        assert_eq!(sentence(&ended, Where::Here), None);
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
        let said = orphans(&g, Where::Here);
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

    fn gone(pid: u32) -> OrphanPid {
        OrphanPid {
            pid,
            used_bytes: None,
            kind: NotRunning::NoProcess,
        }
    }

    #[test]
    fn orphaned_memory_is_said_here_for_this_computer_and_on_the_host_for_an_agent() {
        let g = OrphanGpu {
            device_index: 0,
            total_bytes: 2 * crate::model::GIB,
            pids: vec![gone(4711)],
            holders: Vec::new(),
            remedy: crate::detect::orphans::remedy(&[gone(4711)], &[]),
        };
        let kind = EngineEventKind::<()>::OrphanMemory { gpu: g };
        let here = sentence(&kind, Where::Here).expect("a report");
        assert!(
            here.starts_with("GPU 0: 2.0 GiB held by PID 4711, not running here; no process on this machine holds the GPU"),
            "{here}"
        );
        let there = sentence(&kind, Where::Host("gpu-box-3")).expect("a report");
        assert!(
            there.starts_with("GPU 0: 2.0 GiB held by PID 4711, not running on gpu-box-3; no process on gpu-box-3 holds the GPU"),
            "{there}"
        );
        assert!(
            !there.contains("here") && !there.contains("this machine"),
            "{there}"
        );
        let line = stderr_line(&event(EngineEventKind::OrphanMemory {
            gpu: OrphanGpu {
                device_index: 0,
                total_bytes: 1,
                pids: vec![gone(7)],
                holders: Vec::new(),
                remedy: "reboot".into(),
            },
        }))
        .expect("a line");
        assert!(line.contains("PID 7, not running here"), "{line}");
    }

    #[test]
    fn the_sentences_that_name_no_place_are_the_same_everywhere() {
        let kinds = [
            EngineEventKind::<()>::RecordingFailed {
                cause: "disk full".into(),
            },
            EngineEventKind::<()>::ParkLost {
                key: (
                    crate::model::ProcessKey {
                        pid: 7,
                        start_time_ms: 1,
                    },
                    0,
                ),
                name: "python3".into(),
                detail: "the resume of python3 did not complete".into(),
            },
        ];
        for k in &kinds {
            assert_eq!(
                sentence(k, Where::Here),
                sentence(k, Where::Host("gpu-box-3"))
            );
        }
    }
}
