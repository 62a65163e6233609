//! Why an agent's answer is not the one asked for, by what the window can do about it: try
//! again later (unreachable), ask for the token (unauthorized), update one side (another API
//! version), or show the agent's words (refused, a bad answer). Each says itself in the words
//! the link's status always used.

use super::wire::API_VERSION;

/// Why a request to an agent brought no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    /// No request has been answered yet (a link that just started).
    #[error("connecting…")]
    Connecting,
    /// The agent did not answer: no connection, a timeout, an SSH tunnel that ended (the
    /// transport's words).
    #[error("{0}")]
    Unreachable(String),
    /// 401: the agent refused the token (its words); entering the right one is the fix.
    #[error("the agent refused the token ({0})")]
    Unauthorized(String),
    /// Any other status than the one asked for, with the agent's words (its JSON's `error`,
    /// or the first 200 characters of its answer).
    #[error("HTTP {status}: {words}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// What the agent said.
        words: String,
    },
    /// An answer that cannot be read, or that fails the window's checks.
    #[error("{0}")]
    BadAnswer(String),
    /// An agent of another API version ([`API_VERSION`]): the older side needs an update.
    #[error("api_version: the agent speaks version {0}, this window version {API_VERSION} (update the older one)")]
    Incompatible(u32),
}

/// The link's errors where only a sentence is kept (a session list, a download, a reply).
impl From<RemoteError> for String {
    fn from(e: RemoteError) -> Self {
        e.to_string()
    }
}

/// Why an answer of status `status` (not the one asked for) with `body` is refused, in the
/// agent's words: its JSON's `error`, else its first 200 characters.
pub(crate) fn refusal(status: u16, body: &str) -> RemoteError {
    let words = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.trim().chars().take(200).collect());
    match status {
        401 => RemoteError::Unauthorized(words),
        _ => RemoteError::Refused { status, words },
    }
}

/// Why a View or a reply `body` failed the window's reading or checks (`why`): an agent of
/// another version when the body says so (read only on this failure, never on a good
/// answer), else a bad answer.
pub fn unreadable(body: &[u8], why: String) -> RemoteError {
    #[derive(serde::Deserialize)]
    struct Versioned {
        api_version: u32,
    }
    match serde_json::from_slice::<Versioned>(body) {
        Ok(v) if v.api_version != API_VERSION => RemoteError::Incompatible(v.api_version),
        _ => RemoteError::BadAnswer(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_keeps_the_words_of_the_link_status() {
        let e = refusal(401, r#"{"error":"missing or wrong bearer token"}"#);
        assert_eq!(
            e,
            RemoteError::Unauthorized("missing or wrong bearer token".into())
        );
        assert_eq!(
            e.to_string(),
            "the agent refused the token (missing or wrong bearer token)"
        );
        let e = refusal(503, "  busy\n");
        assert_eq!(
            e,
            RemoteError::Refused {
                status: 503,
                words: "busy".into()
            }
        );
        assert_eq!(e.to_string(), "HTTP 503: busy");
        assert_eq!(RemoteError::Connecting.to_string(), "connecting…");
        assert_eq!(String::from(RemoteError::Unreachable("x".into())), "x");
    }

    #[test]
    fn an_agent_of_another_version_says_which() {
        let other = format!(
            r#"{{"api_version":{},"a_field_of_its_own":1}}"#,
            API_VERSION + 1
        );
        let e = unreadable(other.as_bytes(), "missing field `source`".into());
        assert_eq!(e, RemoteError::Incompatible(API_VERSION + 1));
        assert!(
            e.to_string()
                .contains(&format!("the agent speaks version {}", API_VERSION + 1)),
            "{e}"
        );
        let same = format!(r#"{{"api_version":{API_VERSION}}}"#);
        assert_eq!(
            unreadable(same.as_bytes(), "missing field `source`".into()),
            RemoteError::BadAnswer("missing field `source`".into())
        );
        assert_eq!(
            unreadable(b"<html>", "not JSON".into()),
            RemoteError::BadAnswer("not JSON".into())
        );
    }
}
