//! The API of version 2 ([`crate::link::wire`]): the View for a remote window
//! (`GET /api/view?since=TICK`), the agent's past leaks (`GET /api/past`), and a rule tested
//! by the agent's engine on its own processes (`POST /api/test-rule`). Commands wait for the
//! engine's reply to their id ([`ask`]).

use std::time::Duration;

use crate::engine::command::Answer;
use crate::engine::EngineCommand;
use crate::link::wire::{WirePast, WireView, API_VERSION};

use super::api::Reply;
use super::state::AgentState;

/// Most history ticks in one answer of `/api/view` (a window far behind asks again).
const VIEW_PAGE_TICKS: usize = crate::model::history::delta::MAX_DELTA_TICKS;

/// The engine's reply to a command is awaited this long.
const ANSWER_WAIT: Duration = super::api::COMMAND_WAIT;

/// The `since` of a query (`since=TICK`; absent: 0, the whole history).
///
/// # Errors
/// A query that is not `since=` a number.
fn since_of(query: Option<&str>) -> Result<u64, String> {
    let mut since = 0;
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        match pair.split_once('=') {
            Some(("since", v)) => {
                since = v
                    .parse()
                    .map_err(|_| format!("since is a tick number, not {v:?}"))?;
            }
            _ => return Err(format!("unknown query {pair:?} (since=TICK is taken)")),
        }
    }
    Ok(since)
}

/// `GET /api/view?since=TICK`: the agent's View with its history after `since` (at most
/// [`VIEW_PAGE_TICKS`] ticks).
pub(crate) fn view(state: &AgentState, query: Option<&str>) -> Reply {
    let since = match since_of(query) {
        Ok(s) => s,
        Err(e) => return Reply::error(400, &e),
    };
    let v = {
        let Ok(m) = state.shared.read() else {
            return Reply::error(500, "internal error: the engine thread panicked");
        };
        WireView::of(&m, since, VIEW_PAGE_TICKS)
    };
    Reply::json(200, &v)
}

/// `GET /api/past`: leak episodes and OOM suspicions of the agent's own session logs (the
/// one being written excepted: its events are in the View), cached per log and computed one
/// request at a time ([`crate::engine::past_cache`]).
pub(crate) fn past(state: &AgentState) -> Reply {
    let skip = state
        .shared
        .read()
        .ok()
        .and_then(|m| m.recording.path.clone());
    let p = state.past.past(&state.sessions_dir, skip.as_deref());
    Reply::json(
        200,
        &WirePast {
            api_version: API_VERSION,
            leaks: p.leaks,
            ooms: p.ooms,
        },
    )
}

/// Sends `c` to the engine and waits for its reply ([`AgentState::ask`]).
///
/// # Errors
/// 503 when the engine is not running, 504 when it did not answer in time.
pub(crate) fn ask(state: &AgentState, c: EngineCommand) -> Result<Answer, Reply> {
    state
        .ask(c, ANSWER_WAIT)
        .map(|r| r.answer)
        .map_err(|(status, why)| Reply::error(status, why))
}

/// `POST /api/test-rule` (already authenticated): the body is a rule as the settings file
/// writes it; the agent's engine tests it on its own processes under its own safety settings
/// and answers with an [`Answer`] listing the matches.
pub(crate) fn test_rule(state: &AgentState, body: &[u8]) -> Reply {
    if body.len() > super::api::MAX_COMMAND_BYTES {
        return Reply::error(413, "the rule is too large");
    }
    let rule = match parse_rule(body) {
        Ok(r) => r,
        Err(why) => return Reply::error(400, &crate::model::format::cap_quoted(&why)),
    };
    match ask(
        state,
        EngineCommand::TestRule {
            rule: Box::new(rule),
            safety: None,
        },
    ) {
        Ok(a) => Reply::json(200, &a),
        Err(r) => r,
    }
}

/// The rule in a test-rule body: a JSON object (not `[]`, which serde would read as a rule of
/// defaults) whose values pass the same checks as the settings file's.
fn parse_rule(body: &[u8]) -> Result<crate::act::rules::Rule, String> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("bad rule: {e}"))?;
    if !value.is_object() {
        return Err(
            "bad rule: the body must be a JSON object (a rule as the settings file writes it)"
                .into(),
        );
    }
    let rule: crate::act::rules::Rule =
        serde_json::from_value(value).map_err(|e| format!("bad rule: {e}"))?;
    match rule.problems().into_iter().next() {
        Some(("", why)) => Err(format!("bad rule: {why}")),
        Some((field, why)) => Err(format!("bad rule: {field}: {why}")),
        None => Ok(rule),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_rule_body_must_be_a_valid_rule_object() {
        assert!(parse_rule(b"[]").is_err_and(|e| e.contains("JSON object")));
        let bad =
            br#"{"name": "x", "conditions": {"cmdline_regex": "("}, "action": {"kind": "notify"}}"#;
        assert!(
            parse_rule(bad).is_err_and(|e| e.contains("cmdline_regex")),
            "{:?}",
            parse_rule(bad)
        );
        let ok = br#"{"name": "x", "conditions": {"process_memory_min_mib": 1}, "action": {"kind": "notify"}}"#;
        assert!(parse_rule(ok).is_ok(), "{:?}", parse_rule(ok));
    }

    #[test]
    fn since_is_read_from_the_query() {
        assert_eq!(since_of(None), Ok(0));
        assert_eq!(since_of(Some("since=42")), Ok(42));
        assert!(since_of(Some("since=-1")).is_err());
        assert!(since_of(Some("since=1&x=2")).is_err());
    }
}
