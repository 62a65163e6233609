//! A strict reader of the agent's answer of API version 1 (`GET /api/v1/snapshot`, see
//! docs/agent-api.md), which the agent still serves for scripts: its snapshot, checked with
//! the link's own checks. The window reads the wire View instead; this reader pins the v1
//! answer's format for the tests.

use serde::Deserialize;

use vramwarden::link::checks;
use vramwarden::model::{Snapshot, SourceInfo, UnixMs};

#[derive(Debug, Deserialize)]
#[allow(dead_code)] // read to check the format, not used
struct StatusJson {
    state: String,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)] // read to check the format, not used
struct RecordingJson {
    path: Option<std::path::PathBuf>,
    #[serde(default)]
    active: bool,
    #[serde(default)]
    bytes: u64,
    #[serde(default)]
    samples: u64,
    #[serde(default)]
    lost: u64,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[allow(dead_code)] // read to check the format, not used
struct LeakJson {
    pid: u32,
    start_time_ms: UnixMs,
    device_index: u32,
    name: String,
    #[serde(default)]
    user: String,
    #[serde(default)]
    ghost: bool,
    since_ms: UnixMs,
    flagged_ms: UnixMs,
    ended_ms: Option<UnixMs>,
    rate_mib_per_min: f64,
    grown_mib: f64,
    peak_mib: f64,
}

/// The body of `GET /api/v1/snapshot`.
#[derive(Debug, Deserialize)]
#[allow(dead_code)] // read to check the format, not used
struct SnapshotReply {
    source: Option<SourceInfo>,
    status: StatusJson,
    interval_ms: u64,
    last_error: Option<String>,
    snapshot: Option<Snapshot>,
    #[serde(default)]
    leaks: Vec<LeakJson>,
    recording: RecordingJson,
}

impl LeakJson {
    /// See the link's checks.
    fn check(&mut self, now: UnixMs) -> Result<(), String> {
        checks::device_index("a leak on", self.device_index)?;
        if self.pid > checks::MAX_PID {
            return Err(format!("the agent sent a leak of PID {}", self.pid));
        }
        for (what, t) in [
            ("a leak's start", Some(self.since_ms)),
            ("a leak's flag time", Some(self.flagged_ms)),
            ("a leak's end", self.ended_ms),
            ("a leaking process's start time", Some(self.start_time_ms)),
        ] {
            if let Some(t) = t {
                checks::time(what, t, now)?;
            }
        }
        for (what, v) in [
            ("a leak rate of", self.rate_mib_per_min),
            ("a leak growth of", self.grown_mib),
            ("a leak peak of", self.peak_mib),
        ] {
            checks::finite(what, v)?;
        }
        checks::cap_text(&mut self.name, checks::MAX_TEXT);
        checks::cap_text(&mut self.user, checks::MAX_TEXT);
        Ok(())
    }
}

impl SnapshotReply {
    /// Checks and cleans every value against `now` (this computer's clock) before anything of
    /// it is applied (the link's checks).
    fn check(&mut self, now: UnixMs) -> Result<(), String> {
        checks::interval(self.interval_ms)?;
        if let Some(s) = &mut self.source {
            checks::source(s);
        }
        if let Some(snap) = &mut self.snapshot {
            checks::snapshot(snap, now)?;
        }
        checks::count("leaks", self.leaks.len(), checks::MAX_LEAKS)?;
        for l in &mut self.leaks {
            l.check(now)?;
        }
        checks::cap_opt(&mut self.status.error, checks::MAX_TEXT);
        checks::cap_opt(&mut self.last_error, checks::MAX_TEXT);
        checks::cap_opt(&mut self.recording.error, checks::MAX_TEXT);
        if self
            .recording
            .path
            .as_ref()
            .is_some_and(|p| p.as_os_str().len() > checks::MAX_PATH)
        {
            return Err("the agent sent an over-long session log path".into());
        }
        Ok(())
    }
}

/// Reads an answer of `GET /api/v1/snapshot` and checks it against `now` (see
/// the link's checks): the snapshot the poller would apply, or why none is.
///
/// # Errors
/// A sentence for the link's status.
pub fn decode_snapshot(body: &[u8], now: UnixMs) -> Result<Option<Snapshot>, String> {
    parse_snapshot(body, now).map(|r| r.snapshot)
}

fn parse_snapshot(body: &[u8], now: UnixMs) -> Result<SnapshotReply, String> {
    let mut r: SnapshotReply = serde_json::from_slice(body)
        .map_err(|e| format!("the agent's answer is not understood: {e}"))?;
    r.check(now)?;
    Ok(r)
}
