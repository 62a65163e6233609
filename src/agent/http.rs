//! The HTTP front: routing on `tiny_http`, a few worker threads of its own (a slow client never
//! delays sampling, which runs on the sampler thread), bounded bodies, no panic reaches a client.

use std::sync::Arc;
use std::thread::JoinHandle;

use tiny_http::{Header, Method, Request, Response, Server};

use super::api::{self, Body, Reply};
use super::metrics::{self, Format};
use super::AgentState;

/// Threads answering requests.
pub const WORKERS: usize = 4;

fn header<'a>(rq: &'a Request, name: &'static str) -> Option<&'a str> {
    rq.headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
}

fn send(rq: Request, reply: Reply, extra: Option<Header>) {
    let ct = Header::from_bytes(&b"Content-Type"[..], reply.content_type.as_bytes()).ok();
    let _ = match reply.body {
        Body::Bytes(b) => {
            let mut r = Response::from_data(b).with_status_code(reply.status);
            if let Some(h) = ct {
                r.add_header(h);
            }
            if let Some(h) = extra {
                r.add_header(h);
            }
            rq.respond(r)
        }
        Body::File(f) => {
            let mut r = Response::from_file(f).with_status_code(reply.status);
            if let Some(h) = ct {
                r.add_header(h);
            }
            rq.respond(r)
        }
    };
}

/// `/healthz`: 200 while samples arrive (one within 3 intervals), else 503, with a line why.
pub fn health(state: &AgentState) -> Reply {
    let Ok(m) = state.shared.read() else {
        return Reply::text(503, "unhealthy: the engine thread panicked");
    };
    let now = crate::model::now_ms();
    if let crate::monitor::SourceStatus::Failed(e) = &m.status {
        return Reply::text(503, format!("unhealthy: {e}"));
    }
    match m.latest_received_ms {
        None => Reply::text(503, "starting: no sample yet"),
        Some(t) if m.is_stale(now) => Reply::text(
            503,
            format!(
                "stale: the last sample is {:.1} s old (interval {} ms)",
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

fn route(state: &AgentState, rq: &mut Request) -> (Reply, Option<Header>) {
    let url = rq.url().split('?').next().unwrap_or("").to_string();
    let method = rq.method().clone();
    let get = method == Method::Get || method == Method::Head;
    let unauthorized = || {
        (
            Reply::error(
                401,
                "a bearer token is needed (Authorization: Bearer …, from the agent's token file)",
            ),
            Header::from_bytes(
                &b"WWW-Authenticate"[..],
                &b"Bearer realm=\"vramwarden\""[..],
            )
            .ok(),
        )
    };
    let authed = || super::token::authorized(header(rq, "Authorization"), &state.token);
    let reply = match (url.as_str(), get) {
        ("/metrics", true) => {
            let format = Format::negotiate(header(rq, "Accept"));
            let body = {
                let Ok(m) = state.shared.read() else {
                    return (
                        Reply::text(500, "internal error: the engine thread panicked"),
                        None,
                    );
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
                body: Body::Bytes(body.into_bytes()),
            }
        }
        ("/healthz", true) => health(state),
        ("/-/ready", true) => ready(state),
        ("/", true) => Reply::text(
            200,
            "vramwarden agent: /metrics, /healthz, /-/ready, /api/v1/{snapshot,sessions,command}",
        ),
        (u, _) if u.starts_with("/api/") && !authed() => return unauthorized(),
        ("/api/v1/snapshot", true) => api::snapshot(state),
        ("/api/v1/sessions", true) => api::sessions(state),
        (u, true) if u.starts_with("/api/v1/sessions/") => {
            api::session_file(state, &u["/api/v1/sessions/".len()..])
        }
        ("/api/v1/command", false) if method == Method::Post => {
            let len = rq.body_length();
            api::command(state, rq.as_reader(), len)
        }
        ("/metrics" | "/healthz" | "/-/ready" | "/api/v1/snapshot" | "/api/v1/sessions", false)
        | ("/api/v1/command", true) => Reply::error(405, "method not allowed"),
        _ => Reply::error(404, "not found"),
    };
    (reply, None)
}

/// Answers one request; a panic inside becomes a 500.
pub fn handle(state: &AgentState, mut rq: Request) {
    let routed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| route(state, &mut rq)));
    let (reply, extra) = routed.unwrap_or_else(|p| {
        tracing::error!(
            "internal error answering a request: {}",
            crate::logging::panic_text(p.as_ref())
        );
        (Reply::text(500, "internal error"), None)
    });
    send(rq, reply, extra);
}

/// Starts `workers` threads answering requests until the server is unblocked once per thread.
///
/// # Errors
/// When a thread cannot be started.
pub fn serve(
    server: Arc<Server>,
    state: Arc<AgentState>,
    workers: usize,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    (0..workers)
        .map(|i| {
            let server = server.clone();
            let state = state.clone();
            std::thread::Builder::new()
                .name(format!("vramwarden-http-{i}"))
                .spawn(move || {
                    while let Ok(rq) = server.recv() {
                        if state.stopping() {
                            let _ = rq.respond(Response::empty(503));
                            break;
                        }
                        handle(&state, rq);
                    }
                })
        })
        .collect()
}
