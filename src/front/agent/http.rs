//! The HTTP front's routing: a request's head (and, for a command, its body, read and capped by
//! [`super::server`]) in, a [`Reply`] out. No I/O on sockets here; a panic inside becomes a 500.

use super::api::{self, Reply};
use super::api_view;
use super::metrics::{self, Format};
use super::state::AgentState;

/// The request method, as far as routing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    /// `GET` (or `HEAD`: the server sends the head of the `GET` reply).
    Get,
    /// `POST`.
    Post,
    /// Anything else.
    Other,
}

/// What routing needs of a request.
#[derive(Debug, Clone)]
pub(crate) struct RequestHead {
    /// The method.
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The query (after `?`), when there is one.
    pub query: Option<String>,
    /// `Authorization`, when sent and readable.
    pub authorization: Option<String>,
    /// `Accept`, when sent and readable.
    pub accept: Option<String>,
    /// `Host`, when sent (readable or not: an unreadable one is `Some("")`).
    pub host: Option<String>,
    /// The host (and port) an absolute-form target names (`GET http://host/…`), if it does.
    pub authority: Option<String>,
}

/// True when `host` (a `Host` header) names this machine's loopback as a browser would only
/// for a page of its own: an IP literal, `localhost` or a name under `.localhost`, with or
/// without a port. A DNS name that resolves to 127.0.0.1 (DNS rebinding: a web page reading
/// the agent through its own name) is not.
pub(crate) fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [v6] or [v6]:port, nothing else after the `]`
        return rest.split_once(']').is_some_and(|(a, after)| {
            a.parse::<std::net::Ipv6Addr>().is_ok()
                && (after.is_empty() || after.strip_prefix(':').is_some_and(digits))
        });
    } else {
        host.rsplit_once(':')
            .filter(|(_, port)| port.bytes().all(|b| b.is_ascii_digit()))
            .map_or(host, |(h, _)| h)
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name.parse::<std::net::Ipv4Addr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
}

/// True for a port: one or more ASCII digits.
fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// True when the request names a host that is not [`loopback_host`]: in `Host` or in an
/// absolute-form target (both are checked; either may be what a proxy or server goes by).
fn names_another_host(head: &RequestHead) -> bool {
    [&head.host, &head.authority]
        .into_iter()
        .flatten()
        .any(|h| !loopback_host(h))
}

/// A reply header routing adds (`WWW-Authenticate` on a 401).
pub(crate) type ExtraHeader = Option<(&'static str, &'static str)>;

/// `/healthz`: 200 while samples arrive (one within 3 intervals) and the session log is being
/// written when recording was asked for; else 503, with a line why.
pub(crate) fn health(state: &AgentState) -> Reply {
    let Ok(m) = state.shared.read() else {
        return Reply::text(503, "unhealthy: the engine thread panicked");
    };
    let now = crate::model::now_ms();
    if let crate::engine::view::SourceStatus::Failed(e) = &m.status {
        return Reply::text(503, format!("unhealthy: {e}"));
    }
    // The engine's latest write error (cleared by the next good write): a full disk, an
    // unwritable folder. The text says "Recording failed: …".
    if let Some(e) = &m.recording.error {
        return Reply::text(503, format!("unhealthy: {e}"));
    }
    match m.latest_received_ms {
        None => Reply::text(503, "starting: no sample yet"),
        Some(t) if m.is_stale(now) => Reply::text(
            503,
            format!(
                "stale: the sampler makes no progress, the last sample is {:.1} s old (interval {} ms)",
                (now - t) as f64 / 1000.0,
                m.interval_ms
            ),
        ),
        Some(t) => Reply::text(
            200,
            format!(
                "ok: the last sample is {:.1} s old",
                (now - t).max(0) as f64 / 1000.0
            ),
        ),
    }
}

fn ready(state: &AgentState) -> Reply {
    match state.shared.read() {
        Ok(m) if m.ticks > 0 => Reply::text(200, "ready"),
        _ => Reply::text(503, "not ready: no sample yet"),
    }
}

/// 401: no token given, or one that is not the agent's (said apart: a client that sent one
/// needs to know it is the wrong one, not that one is missing).
fn unauthorized(head: &RequestHead) -> (Reply, ExtraHeader) {
    let why = if head.authorization.is_some() {
        "this is not the agent's token: send the one in its token file (Authorization: Bearer …)"
    } else {
        "a bearer token is needed (Authorization: Bearer …, from the agent's token file)"
    };
    (
        Reply::error(401, why),
        Some(("WWW-Authenticate", "Bearer realm=\"vramwarden\"")),
    )
}

/// True when `head` carries the agent's token.
pub(crate) fn authorized(state: &AgentState, head: &RequestHead) -> bool {
    crate::link::token::authorized(head.authorization.as_deref(), &state.token)
}

fn scrape(state: &AgentState, head: &RequestHead) -> Reply {
    let format = Format::negotiate(head.accept.as_deref());
    let body = {
        let Ok(m) = state.shared.read() else {
            return Reply::text(500, "internal error: the engine thread panicked");
        };
        metrics::render(
            &m,
            metrics::Context {
                stats: &state.stats,
                max_processes: state.max_processes,
                now_ms: crate::model::now_ms(),
            },
            format,
        )
    };
    Reply {
        status: 200,
        content_type: format.content_type(),
        body: api::Body::Bytes(body.into_bytes()),
    }
}

/// Answers one request whose body (a command's, empty otherwise) was read already.
pub(crate) fn route(state: &AgentState, head: &RequestHead, body: &[u8]) -> (Reply, ExtraHeader) {
    if state.loopback_only && names_another_host(head) {
        return (
            Reply::error(
                421,
                "this agent listens on loopback and answers only requests for an IP address or localhost (a DNS name here is what DNS rebinding looks like)",
            ),
            None,
        );
    }
    let get = head.method == Method::Get;
    let reply = match (head.path.as_str(), get) {
        ("/metrics", true) => scrape(state, head),
        ("/healthz", true) => health(state),
        ("/-/ready", true) => ready(state),
        ("/", true) => Reply::text(
            200,
            "vramwarden agent: /metrics, /healthz, /-/ready, /api/view, /api/past, /api/test-rule, /api/v1/{snapshot,sessions,command}",
        ),
        (u, _) if u.starts_with("/api/") && !authorized(state, head) => return unauthorized(head),
        ("/api/v1/snapshot", true) => api::snapshot(state),
        ("/api/view", true) => api_view::view(state, head.query.as_deref()),
        ("/api/past", true) => api_view::past(state),
        ("/api/test-rule", false) if head.method == Method::Post => api_view::test_rule(state, body),
        ("/api/v1/sessions", true) => api::sessions(state),
        (u, true) if u.starts_with("/api/v1/sessions/") => {
            api::session_file(state, &u["/api/v1/sessions/".len()..])
        }
        ("/api/v1/command", false) if head.method == Method::Post => {
            api::command(state, &mut &body[..], Some(body.len()))
        }
        (u, true) if u.starts_with("/api/v1/command/") => {
            api::command_reply(state, &u["/api/v1/command/".len()..])
        }
        // Every path served, asked with a method it does not take.
        (
            "/" | "/metrics" | "/healthz" | "/-/ready" | "/api/v1/snapshot" | "/api/v1/sessions"
            | "/api/view" | "/api/past" | "/api/v1/command" | "/api/test-rule",
            _,
        ) => Reply::error(405, "method not allowed"),
        (u, _) if u.starts_with("/api/v1/sessions/") || u.starts_with("/api/v1/command/") => {
            Reply::error(405, "method not allowed")
        }
        _ => Reply::error(404, "not found"),
    };
    // A 405 says which method the path takes (RFC 9110 asks for it).
    let allow = (reply.status == 405).then(|| {
        let post = takes_body(&head.path);
        ("allow", if post { "POST" } else { "GET" })
    });
    (reply, allow)
}

/// True when the request is a command the server should read a body for (authorized: a
/// client without the token never gets its body read).
pub(crate) fn wants_body(state: &AgentState, head: &RequestHead) -> bool {
    head.method == Method::Post && takes_body(&head.path) && authorized(state, head)
}

/// True for the paths that read a request body (commands).
pub(crate) fn takes_body(path: &str) -> bool {
    path == "/api/v1/command" || path == "/api/test-rule"
}

/// [`route`], with a panic inside turned into a 500.
pub(crate) fn handle(state: &AgentState, head: &RequestHead, body: &[u8]) -> (Reply, ExtraHeader) {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| route(state, head, body)))
        .unwrap_or_else(|p| {
            tracing::error!(
                "internal error answering a request: {}",
                crate::host::logging::panic_text(p.as_ref())
            );
            (Reply::text(500, "internal error"), None)
        })
}

#[cfg(test)]
mod host_tests {
    use super::loopback_host;

    #[test]
    fn loopback_hosts_are_ip_literals_and_localhost() {
        for ok in [
            "127.0.0.1:8726",
            "127.0.0.1",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8726",
            "a.localhost",
            "10.0.0.1:80",
        ] {
            assert!(loopback_host(ok), "{ok}");
        }
        for bad in [
            "evil.example:8726",
            "evil.example",
            "",
            "127.0.0.1.nip.io",
            "[zz]:1",
            "[::1]evil.com",
            "[::1]:",
            "[::1]:80evil",
            "[::1",
        ] {
            assert!(!loopback_host(bad), "{bad}");
        }
    }
}
