//! The status bar's notices: the problems the engine reported (recording failed or resumed,
//! memory held by processes not running here, a parked process's memory lost), read from the
//! View's events and said in the words every front end says ([`crate::front::report_words`]),
//! and the window's own (`OwnNotices`: desktop notifications cannot be shown). The newest
//! is shown for [`NOTICE_SHOWN_MS`] after it was raised, for this computer's engine and an
//! agent's alike. The window's own notices are window state: the engine's View never holds
//! them.

use std::sync::{Arc, Mutex};

use crate::engine::view::Monitor;
use crate::model::UnixMs;

/// How long the status bar shows a notice.
pub const NOTICE_SHOWN_MS: UnixMs = 30_000;

/// The window's own latest notice with the time it was raised (set from the notifier's
/// threads, read by the status bar); shared by every engine the window attaches.
#[derive(Debug, Clone, Default)]
pub(crate) struct OwnNotices(Arc<Mutex<Option<(UnixMs, String)>>>);

impl OwnNotices {
    /// Raises `msg` now.
    pub(crate) fn raise(&self, msg: String) {
        self.raise_at(crate::model::now_ms(), msg);
    }

    /// Raises `msg` as of `at`.
    pub(crate) fn raise_at(&self, at: UnixMs, msg: String) {
        if let Ok(mut n) = self.0.lock() {
            *n = Some((at, msg));
        }
    }

    /// The latest one raised, with its time.
    pub(crate) fn latest(&self) -> Option<(UnixMs, String)> {
        self.0.lock().ok().and_then(|n| n.clone())
    }
}

/// The name of the host of an agent's View `m`, as the window says it ("on HOST"): the
/// source's host, or "the agent's host" before the agent named it.
pub(crate) fn agent_host(m: &Monitor) -> &str {
    m.source
        .as_ref()
        .map(|s| s.host.as_str())
        .filter(|h| !h.is_empty())
        .unwrap_or("the agent's host")
}

/// The newest problem the engine of View `m` reported, with its time, in words; `host`: the
/// agent's host for an agent's View, None for this computer's.
pub(crate) fn reported(m: &Monitor, host: Option<&str>) -> Option<(UnixMs, String)> {
    let at = crate::front::report_words::Where::of(host);
    m.events
        .iter()
        .rev()
        .find_map(|e| crate::front::report_words::sentence(&e.kind, at).map(|s| (e.at_ms, s)))
}

/// The notice the status bar shows at `now`: the newer of the engine's latest report in `m`
/// (an agent's on `host`, None for this computer's engine) and the window's own `own`, when
/// it was raised less than [`NOTICE_SHOWN_MS`] ago.
pub fn shown(
    m: &Monitor,
    host: Option<&str>,
    own: Option<(UnixMs, String)>,
    now: UnixMs,
) -> Option<String> {
    [reported(m, host), own]
        .into_iter()
        .flatten()
        .max_by_key(|(t, _)| *t)
        .filter(|(t, _)| now - t < NOTICE_SHOWN_MS)
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{EngineEvent, EngineEventKind};

    fn failed(seq: u64, at_ms: UnixMs, cause: &str) -> EngineEvent {
        EngineEvent {
            seq,
            at_ms,
            kind: EngineEventKind::RecordingFailed {
                cause: cause.into(),
            },
        }
    }

    #[test]
    fn the_newest_report_shows_for_its_time_and_other_events_none() {
        let mut m = Monitor::new(1000, 10);
        assert_eq!(shown(&m, None, None, 5_000), None);
        m.events.push_back(failed(1, 1_000, "disk full").into());
        m.events.push_back(failed(2, 2_000, "I/O error").into());
        m.events.push_back(
            EngineEvent {
                seq: 3,
                at_ms: 3_000,
                kind: EngineEventKind::OomForecastEnded {
                    device_index: 0,
                    raised_ms: 1,
                },
            }
            .into(),
        );
        let said = "recording failed, retrying every sample: I/O error";
        assert_eq!(shown(&m, None, None, 2_000).as_deref(), Some(said));
        assert_eq!(
            shown(&m, None, None, 2_000 + NOTICE_SHOWN_MS - 1).as_deref(),
            Some(said)
        );
        assert_eq!(shown(&m, None, None, 2_000 + NOTICE_SHOWN_MS), None);
    }

    #[test]
    fn the_window_s_own_notice_shows_when_newer_and_stays_out_of_the_view() {
        let mut m = Monitor::new(1000, 10);
        m.events.push_back(failed(1, 1_000, "disk full").into());
        let own = OwnNotices::default();
        own.raise_at(1_500, "No desktop notifications here".into());
        assert_eq!(
            shown(&m, None, own.latest(), 2_000).as_deref(),
            Some("No desktop notifications here")
        );
        assert_eq!(m.events.len(), 1, "the View is not written");
        m.events.push_back(failed(2, 1_800, "I/O error").into());
        assert_eq!(
            shown(&m, None, own.latest(), 2_000).as_deref(),
            Some("recording failed, retrying every sample: I/O error")
        );
    }

    #[test]
    fn an_agent_s_orphaned_memory_is_said_on_its_host_and_this_computer_s_here() {
        let mut m = Monitor::new(1000, 10);
        m.events
            .push_back(std::sync::Arc::new(crate::engine::events::first_event(
                EngineEventKind::OrphanMemory {
                    gpu: crate::detect::orphans::one_gone_pid(
                        1,
                        "no process on this machine holds the GPU",
                    ),
                },
            )));
        let remote = shown(&m, Some("gpu-box-3"), None, 2_000).expect("a notice");
        assert!(
            remote.contains("PID 4711, not running on gpu-box-3; no process on gpu-box-3 holds"),
            "{remote}"
        );
        let local = shown(&m, None, None, 2_000).expect("a notice");
        assert!(
            local.contains("PID 4711, not running here; no process on this machine holds"),
            "{local}"
        );
        m.source = Some(crate::model::SourceInfo {
            host: "gpu-box-3".into(),
            ..crate::model::SourceInfo::default()
        });
        assert_eq!(agent_host(&m), "gpu-box-3");
    }
}
