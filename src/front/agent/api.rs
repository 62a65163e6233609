//! The JSON API for a remote window: the latest snapshot with leaks and recording status, the
//! session logs (list and download), and commands on processes.
//!
//! A command ([`WireCommand`], the window's own type) names a process by pid and start time
//! only; the agent finds its key in its own
//! latest snapshot and hands it to the engine as a command from an agent
//! ([`crate::engine::CommandFrom::Agent`]). The engine alone decides under its safety settings:
//! the global dry run and other users' processes (only with `--remote-other-users`: see
//! [`crate::act::rules::action::Safety::remote_verdict`]), then its manual-action path, which
//! checks identity and refuses what it must (protected names, simulated or recorded processes,
//! PID 1, itself). The reply is a [`WireReply`] under the command's id:
//! final (200 done or would act, 403 refused, 404 not listed, 500 failed), or 202 accepted
//! for a park, a resume or a question to a PyTorch companion, whose final reply comes later
//! in the View's `replies` and from `GET /api/v1/command/ID` ([`command_reply`]).

use crate::session::valid_session_name;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::act::rules::action::Outcome;
use crate::engine::view::{LeakKey, Monitor};

use crate::engine::command::{Answer, CommandId, CommandReply};
use crate::engine::EngineCommand;
use crate::link::wire::{WireCommand, WireReply};

use super::state::AgentState;

/// A reply body.
pub(crate) enum Body {
    /// Bytes in memory.
    Bytes(Vec<u8>),
    /// A file streamed as is.
    File(std::fs::File),
}

/// A reply: status, content type, body.
pub(crate) struct Reply {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Body,
}

impl Reply {
    /// A JSON reply of any serializable value (a 500 `{"error": …}` if it cannot be
    /// serialized).
    pub(crate) fn json<T: serde::Serialize + ?Sized>(status: u16, v: &T) -> Self {
        let (status, body) = match serde_json::to_vec(v) {
            Ok(body) => (status, body),
            Err(e) => (
                500,
                json!({ "error": format!("internal error: {e}") })
                    .to_string()
                    .into_bytes(),
            ),
        };
        Self {
            status,
            content_type: "application/json",
            body: Body::Bytes(body),
        }
    }

    /// A short text reply.
    pub(crate) fn text(status: u16, s: impl Into<String>) -> Self {
        let mut s = s.into();
        s.push('\n');
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Body::Bytes(s.into_bytes()),
        }
    }

    /// `{"error": msg}` with `status`.
    pub(crate) fn error(status: u16, msg: &str) -> Self {
        Self::json(status, &json!({ "error": msg }))
    }
}

/// The leak list of the monitor as JSON (ongoing and ended episodes of this run).
fn leaks_json(m: &Monitor) -> serde_json::Value {
    let snap = m.latest.as_ref();
    let leaks: Vec<serde_json::Value> = m
        .leaks
        .iter()
        .map(|l| {
            let free = snap
                .and_then(|s| s.devices.iter().find(|d| d.index == l.info.device_index))
                .and_then(|d| d.memory_free_bytes);
            let ttf = match (l.ended_ms, free) {
                (None, Some(f)) => crate::detect::leak::full_in_s(f, l.info.rate_mib_per_min),
                _ => None,
            };
            json!({
                "pid": l.info.pid,
                "start_time_ms": l.info.start_time_ms,
                "device_index": l.info.device_index,
                "name": l.info.name,
                "user": l.info.user,
                "ghost": matches!(l.key, LeakKey::Ghost(_)),
                "since_ms": l.info.since_ms,
                "flagged_ms": l.flagged_ms,
                "ended_ms": l.ended_ms,
                "rate_mib_per_min": l.info.rate_mib_per_min,
                "grown_mib": l.grown_mib,
                "peak_mib": l.peak_mib,
                "time_to_full_seconds": ttf,
                "why": l.info.why,
            })
        })
        .collect();
    serde_json::Value::Array(leaks)
}

/// `GET /api/v1/snapshot`.
pub(crate) fn snapshot(state: &AgentState) -> Reply {
    let Ok(m) = state.shared.read() else {
        return Reply::error(500, "internal error: the engine thread panicked");
    };
    let status = match &m.status {
        crate::engine::view::SourceStatus::Starting => json!({"state": "starting"}),
        crate::engine::view::SourceStatus::Running => json!({"state": "running"}),
        crate::engine::view::SourceStatus::Failed(e) => json!({"state": "failed", "error": e}),
    };
    let r = &m.recording;
    let v = json!({
        "source": m.source,
        "status": status,
        "interval_ms": m.interval_ms,
        "received_ms": m.latest_received_ms,
        "last_error": m.last_error,
        "snapshot": m.latest,
        "leaks": leaks_json(&m),
        "recording": {
            "path": r.path,
            "active": r.active,
            "bytes": r.bytes,
            "samples": r.samples,
            "lost": r.lost,
            "error": r.error,
        },
    });
    Reply::json(200, &v)
}

/// `GET /api/v1/sessions`.
pub(crate) fn sessions(state: &AgentState) -> Reply {
    let list: Vec<serde_json::Value> = crate::session::catalog::list(&state.sessions_dir)
        .into_iter()
        .filter_map(|s| {
            let name = s.path.file_name()?.to_str()?.to_string();
            valid_session_name(&name).then(|| {
                json!({
                    "name": name,
                    "size_bytes": s.size_bytes,
                    "modified_ms": s.modified_ms,
                    "started_ms": s.started_ms(),
                    "duration_ms": s.duration_ms(),
                    "host": s.header.as_ref().map(|h| h.host.clone()),
                    "devices": s.header.as_ref().map_or(0, |h| h.devices.len()),
                })
            })
        })
        .collect();
    Reply::json(
        200,
        &json!({ "folder": state.sessions_dir, "sessions": list }),
    )
}

/// `GET /api/v1/sessions/NAME`: the file as it is (a regular file in the sessions folder).
pub(crate) fn session_file(state: &AgentState, name: &str) -> Reply {
    if !valid_session_name(name) {
        return Reply::error(
            400,
            "a session name is a file name in the sessions folder ending .vwlog",
        );
    }
    let path: PathBuf = state.sessions_dir.join(name);
    // No symlinks out of the folder, no FIFO to hang on: opened as the session list opens
    // (without following a link, without blocking, a regular file checked on the open file).
    match crate::session::catalog::open_session_file(&path) {
        Ok(f) => Reply {
            status: 200,
            content_type: "application/octet-stream",
            body: Body::File(f),
        },
        // Not a regular file.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            Reply::error(404, "no such session")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Reply::error(404, "no such session"),
        // ELOOP: the name is a symbolic link.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Reply::error(404, "no such session"),
        Err(e) => Reply::error(500, &format!("cannot open the session: {e}")),
    }
}

/// Largest command body read.
pub(crate) const MAX_COMMAND_BYTES: usize = 16 * 1024;

/// The engine's reply to a manual command is awaited this long.
pub(crate) const COMMAND_WAIT: Duration = Duration::from_secs(5);

/// `r` as the wire's reply: 202 while accepted, else by its outcome (200 done or would act,
/// 403 refused, 500 failed).
fn wire_reply(r: &CommandReply) -> Reply {
    let status = match r.answer.outcome {
        _ if !r.answer.is_final() => 202,
        Outcome::Acted | Outcome::WouldAct => 200,
        Outcome::Skipped => 403,
        Outcome::Failed => 500,
    };
    Reply::json(status, &WireReply::of(r))
}

/// The agent's own final answer to a command it did not hand to the engine (a process not
/// listed), under a new id, with `status` (None: by outcome).
fn agent_reply(status: Option<u16>, what: String, outcome: Outcome, detail: &str) -> Reply {
    let r = CommandReply {
        id: CommandId::next(),
        what,
        answer: Answer::new(outcome, detail),
    };
    let mut reply = wire_reply(&r);
    if let Some(s) = status {
        reply.status = s;
    }
    reply
}

/// `GET /api/v1/command/ID` (already authenticated): the final reply of command `ID` once it
/// ended (200, or as its outcome says: see [`wire_reply`]), 202 `{"stage": "accepted"}` while
/// it is in progress, 404 for an id the agent does not know or no longer keeps (the View keeps
/// the last 64 final replies).
pub(crate) fn command_reply(state: &AgentState, id: &str) -> Reply {
    let Ok(id) = id.parse::<u64>() else {
        return Reply::error(400, "a command id is a number, as its reply gave it");
    };
    match state.final_reply(CommandId(id)) {
        Some(Some(r)) => wire_reply(&r),
        Some(None) => Reply::json(
            202,
            &json!({"api_version": crate::link::wire::API_VERSION, "id": id, "stage": "accepted", "detail": "in progress: ask again for its final reply"}),
        ),
        None => Reply::error(
            404,
            "no command with that id is known here (or its reply is no longer kept)",
        ),
    }
}

/// `POST /api/v1/command` (already authenticated): reads the body from `body`.
pub(crate) fn command(state: &AgentState, body: &mut dyn Read, length: Option<usize>) -> Reply {
    if length.is_some_and(|l| l > MAX_COMMAND_BYTES) {
        return Reply::error(413, "the command body is too large");
    }
    let mut buf = Vec::new();
    if let Err(e) = body
        .take(MAX_COMMAND_BYTES as u64 + 1)
        .read_to_end(&mut buf)
    {
        return Reply::error(400, &format!("cannot read the body: {e}"));
    }
    if buf.len() > MAX_COMMAND_BYTES {
        return Reply::error(413, "the command body is too large");
    }
    // The one command type of the wire: its shape, then its action's parameters.
    let req = match WireCommand::parse(&buf) {
        Ok(r) => r,
        Err(e) => return Reply::error(400, &e),
    };
    let action = match req.action() {
        Ok(a) => a,
        Err(e) => return Reply::error(400, &e),
    };
    // The process's key comes from the agent's own snapshot; the client gave only pid +
    // start time.
    let key = {
        let Ok(m) = state.shared.read() else {
            return Reply::error(500, "internal error: the engine thread panicked");
        };
        m.latest.as_ref().and_then(|s| {
            s.processes
                .iter()
                .filter(|p| p.pid == req.pid && p.key().start_time_ms == req.start_time)
                .find(|p| req.gpu.is_none_or(|g| g == p.device_index))
                .map(|p| (p.key(), p.device_index))
        })
    };
    let Some(key) = key else {
        return agent_reply(
            Some(404),
            action.label(),
            Outcome::Skipped,
            &format!(
                "no process with PID {} and that start time is listed",
                req.pid
            ),
        );
    };
    // The engine decides under its safety settings (dry run, the remote policy, protected
    // names, identity) and logs its answer.
    let from = crate::engine::CommandFrom::Agent;
    match state.ask(EngineCommand::Manual { key, action, from }, COMMAND_WAIT) {
        Ok(r) => wire_reply(&r),
        Err((status, why)) => Reply::error(status, why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names() {
        assert!(valid_session_name("20260101-120000-host.vwlog"));
        assert!(valid_session_name("a-2.vwlog"));
        for bad in [
            "../x.vwlog",
            "..vwlog",
            ".hidden.vwlog",
            "a/b.vwlog",
            "x.txt",
            "",
            "%2e%2e.vwlog",
            "a\0.vwlog",
        ] {
            assert!(!valid_session_name(bad), "{bad:?}");
        }
    }
}
