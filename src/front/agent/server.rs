//! The HTTP front's server: hyper 1 (HTTP/1.1) on a tokio runtime of one thread of its own,
//! with limits on everything a client controls.
//!
//! - Headers: at most [`MAX_HEADER_BYTES`] (else 431 and the connection closes) and
//!   [`MAX_HEADERS`] lines, within [`HEADER_TIMEOUT`] of the connection going idle (which also
//!   ends an idle keep-alive connection).
//! - Bodies: only `POST /api/v1/command` and `POST /api/test-rule` with the token have their
//!   body read, with a `Content-Length` or chunked (at most [`super::api::MAX_COMMAND_BYTES`],
//!   within [`BODY_TIMEOUT`]); any other request that announces a body over
//!   [`MAX_OTHER_BODY`] (or chunked) gets 413 and the connection closes, and a body left
//!   unread closes the connection after the reply.
//! - Connections: [`super::conns`] bounds them in all and per client address; a connection that
//!   moves no byte either way for [`IDLE_TIMEOUT`] (a client that stops reading its replies)
//!   is closed.
//! - Work: each request is answered on the runtime's blocking pool (at most
//!   [`BLOCKING_THREADS`]); all but [`LIGHT_LANE`] of its threads may answer the other paths,
//!   so `/metrics`, `/healthz` and `/-/ready` always find a thread (a slow command or a crowd
//!   of `/api/past` never delays them); sampling runs on its own thread and never waits for
//!   HTTP.
//! - The accept loop never ends on an error (out of file descriptors: it waits and retries).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::api::{Body, Reply};
use super::body::ReplyBody;
use super::conns::{self, Table};
use super::http::{self, Method, RequestHead};
use super::state::AgentState;
use crate::host::cost::{self, Part};

/// Largest request head (request line and headers), bytes.
const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Most header lines in a request.
const MAX_HEADERS: usize = 64;
/// Time to send a request's head once the connection is idle.
const HEADER_TIMEOUT: Duration = Duration::from_secs(20);
/// Time to send a command's body.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection that moves no byte for this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest body announced on a request other than a command (it is never read).
const MAX_OTHER_BODY: u64 = 1024;
/// Threads answering requests.
const BLOCKING_THREADS: usize = 8;
/// Threads kept for `/metrics`, `/healthz` and `/-/ready` (the others answer any path).
const LIGHT_LANE: usize = 2;

/// True for the paths the light lane answers (cheap, read-only, what monitoring polls).
fn light(head: &RequestHead) -> bool {
    head.method == Method::Get && matches!(head.path.as_str(), "/metrics" | "/healthz" | "/-/ready")
}

/// The running server; [`Server::stop`] ends it.
pub(crate) struct Server {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves `listener` (bound already, so a bad address is an error at start) until
    /// [`Server::stop`].
    ///
    /// # Errors
    /// When the runtime or its thread cannot be started.
    pub(crate) fn start(
        listener: std::net::TcpListener,
        state: Arc<AgentState>,
    ) -> std::io::Result<Self> {
        listener.set_nonblocking(true)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(BLOCKING_THREADS)
            .thread_keep_alive(Duration::from_secs(120))
            .thread_name("vramwarden-req")
            .on_thread_unpark(|| cost::count(Part::HttpWake))
            .build()?;
        let (stop, stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name("vramwarden-http".into())
            .spawn(move || {
                rt.block_on(accept_loop(listener, state, stopped));
                // A command still waiting for the engine is given up (the engine stops next).
                rt.shutdown_timeout(Duration::from_secs(1));
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
        })
    }

    /// Closes the listener and every connection, and waits for the server's thread.
    pub(crate) fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn builder() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_header_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HEADERS)
        .max_buf_size(4 * MAX_HEADER_BYTES)
        .keep_alive(true);
    b
}

/// Rate-limits the accept loop's complaints: one line per kind of error per minute.
fn complain(last: &mut Option<Instant>, e: &std::io::Error) {
    if last.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
        tracing::warn!("cannot accept a connection (retrying): {e}");
        *last = Some(Instant::now());
    }
}

async fn accept_loop(
    listener: std::net::TcpListener,
    state: Arc<AgentState>,
    mut stopped: watch::Receiver<bool>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("the HTTP front cannot start: {e}");
            return;
        }
    };
    let total = conns::total_limit(open_files());
    let table = Arc::new(Mutex::new(Table::new(
        total,
        conns::MAX_PER_CLIENT.min(total),
    )));
    let builder = Arc::new(builder());
    let heavy = Arc::new(tokio::sync::Semaphore::new(BLOCKING_THREADS - LIGHT_LANE));
    let mut last_complaint = None;
    loop {
        let accepted = tokio::select! {
            _ = stopped.changed() => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                complain(&mut last_complaint, &e);
                // Out of descriptors: an idle connection gives up its place, and the next
                // accept gets its descriptor. Any other error (a connection reset before
                // accept): wait a little. Never end the loop.
                let out_of_files = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                let pause = if out_of_files && lock(&table).evict_one() {
                    Duration::from_millis(2)
                } else {
                    Duration::from_millis(50)
                };
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        let local = stream.local_addr().unwrap_or(peer);
        let admitted = lock(&table).admit_from(peer, local, Instant::now());
        let Some(admitted) = admitted else {
            // Every connection in the way is answering a request: this one closes at once.
            tracing::debug!("connection from {peer} refused: every place is answering a request");
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let conn = Conn {
            id: admitted.id,
            table: table.clone(),
            state: state.clone(),
            heavy: heavy.clone(),
        };
        tokio::spawn(conn.serve(stream, builder.clone(), admitted.evict, stopped.clone()));
    }
}

fn lock(t: &Mutex<Table>) -> std::sync::MutexGuard<'_, Table> {
    t.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One connection's part in the server.
#[derive(Clone)]
struct Conn {
    id: u64,
    table: Arc<Mutex<Table>>,
    state: Arc<AgentState>,
    /// Permits to answer a path outside the light lane.
    heavy: Arc<tokio::sync::Semaphore>,
}

impl Conn {
    async fn serve(
        self,
        stream: TcpStream,
        builder: Arc<hyper::server::conn::http1::Builder>,
        evict: Arc<tokio::sync::Notify>,
        mut stopped: watch::Receiver<bool>,
    ) {
        let epoch = Instant::now();
        let moved = Arc::new(AtomicU64::new(0));
        let io = TokioIo::new(Watched {
            inner: stream,
            epoch,
            moved: moved.clone(),
        });
        let me = self.clone();
        let svc = hyper::service::service_fn(move |rq| me.clone().respond(rq));
        let conn = builder.serve_connection(io, svc);
        tokio::pin!(conn);
        let mut check = tokio::time::interval(IDLE_TIMEOUT / 4);
        loop {
            tokio::select! {
                _ = conn.as_mut() => break,
                _ = evict.notified() => break,
                _ = stopped.changed() => break,
                _ = check.tick() => {
                    let quiet = epoch.elapsed().saturating_sub(Duration::from_millis(moved.load(Ordering::Relaxed)));
                    if quiet > IDLE_TIMEOUT && !lock(&self.table).is_busy(self.id) {
                        break;
                    }
                }
            }
        }
        lock(&self.table).close(self.id);
    }

    async fn respond(self, rq: Request<Incoming>) -> Result<Response<ReplyBody>, Infallible> {
        if let Some(refused) = refuse_hosts(&rq) {
            return Ok(refused);
        }
        let head = head_of(&rq);
        if let Some(refused) = refuse_body(&rq, &head) {
            return Ok(refused);
        }
        let reads = http::wants_body(&self.state, &head);
        // A body left unread (a client without the token) ends the connection after the
        // reply: nothing of it is read as the next request, and nothing waits for the rest.
        let unread = !reads && !http_body::Body::is_end_stream(rq.body());
        let body = if reads {
            match read_body(rq.into_body()).await {
                Ok(b) => b,
                Err(reply) => return Ok(response(reply, None, true)),
            }
        } else {
            Bytes::new()
        };
        lock(&self.table).busy(self.id, true);
        // Outside the light lane, a thread is taken only with a permit: LIGHT_LANE threads
        // stay for monitoring whatever else waits.
        let permit = if light(&head) {
            None
        } else {
            self.heavy.clone().acquire_owned().await.ok()
        };
        let state = self.state.clone();
        // The permit moves into the work: a client that hangs up drops this future, not the
        // work on its thread, which keeps its permit until it ends.
        let answered = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let _request = cost::span(Part::HttpRequest);
            http::handle(&state, &head, &body)
        })
        .await;
        lock(&self.table).busy(self.id, false);
        let (reply, extra) =
            answered.unwrap_or_else(|_| (Reply::text(500, "internal error"), None));
        Ok(response(reply, extra, unread))
    }
}

fn header(rq: &Request<Incoming>, name: hyper::header::HeaderName) -> Option<String> {
    rq.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

fn head_of(rq: &Request<Incoming>) -> RequestHead {
    let method = match *rq.method() {
        hyper::Method::GET | hyper::Method::HEAD => Method::Get,
        hyper::Method::POST => Method::Post,
        _ => Method::Other,
    };
    RequestHead {
        method,
        path: rq.uri().path().to_string(),
        query: rq.uri().query().map(str::to_string),
        authorization: header(rq, hyper::header::AUTHORIZATION),
        accept: header(rq, hyper::header::ACCEPT),
        host: rq
            .headers()
            .get(hyper::header::HOST)
            .map(|v| v.to_str().map(str::to_string).unwrap_or_default()),
        authority: rq.uri().authority().map(|a| a.as_str().to_string()),
    }
}

/// 400 for a request with more than one `Host` (RFC 9112 asks for it: which one it is for
/// cannot be told, and a check of one would let the other through).
fn refuse_hosts(rq: &Request<Incoming>) -> Option<Response<ReplyBody>> {
    let hosts = rq.headers().get_all(hyper::header::HOST).iter().count();
    (hosts > 1).then(|| {
        response(
            Reply::error(400, "a request has one Host header, not several"),
            None,
            true,
        )
    })
}

/// 413 for a body announced where none is read (over [`MAX_OTHER_BODY`]; chunked counts as
/// unbounded) or one announced over its limit on a path that reads it (a chunked one is read
/// there, and cut at the same limit by [`read_body`]).
fn refuse_body(rq: &Request<Incoming>, head: &RequestHead) -> Option<Response<ReplyBody>> {
    use http_body::Body as _;
    let hint = rq.body().size_hint();
    if rq.body().is_end_stream() {
        return None;
    }
    let too_large = if head.method == Method::Post && super::http::takes_body(&head.path) {
        hint.upper()
            .is_some_and(|u| u > super::api::MAX_COMMAND_BYTES as u64)
    } else {
        hint.upper().is_none_or(|u| u > MAX_OTHER_BODY)
    };
    too_large.then(|| {
        response(
            Reply::error(413, "the request's body is too large"),
            None,
            true,
        )
    })
}

/// A command's body, at most its limit, within [`BODY_TIMEOUT`].
async fn read_body(body: Incoming) -> Result<Bytes, Reply> {
    let limited = http_body_util::Limited::new(body, super::api::MAX_COMMAND_BYTES);
    match tokio::time::timeout(BODY_TIMEOUT, limited.collect()).await {
        Err(_) => Err(Reply::error(408, "the body did not arrive in time")),
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(Reply::error(413, "the command body is too large"))
        }
        Ok(Err(e)) => Err(Reply::error(400, &format!("cannot read the body: {e}"))),
    }
}

/// The reply as hyper sends it; `close` asks for the connection to end after it.
fn response(reply: Reply, extra: http::ExtraHeader, close: bool) -> Response<ReplyBody> {
    let body = match reply.body {
        Body::Bytes(b) => ReplyBody::bytes(b),
        Body::File(f) => ReplyBody::file(f),
    };
    let mut r = Response::new(body);
    *r.status_mut() = hyper::StatusCode::from_u16(reply.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(reply.content_type),
    );
    if let Some((k, v)) = extra {
        h.insert(k, hyper::header::HeaderValue::from_static(v));
    }
    if close {
        h.insert(
            hyper::header::CONNECTION,
            hyper::header::HeaderValue::from_static("close"),
        );
    }
    r
}

/// A socket that notes when it last moved a byte (ms since `epoch`).
struct Watched {
    inner: TcpStream,
    epoch: Instant,
    moved: Arc<AtomicU64>,
}

impl Watched {
    fn note(&self, n: usize) {
        if n > 0 {
            self.moved
                .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        self.note(n);
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.note(n);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            self.note(n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Binds `addr` for [`Server::start`], after raising the soft limit on open files to the
/// hard one (the connection limits stay well below either).
///
/// # Errors
/// When the address cannot be bound.
pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    raise_nofile();
    std::net::TcpListener::bind(addr)
}

/// The soft limit on open files.
fn open_files() -> u64 {
    nofile().map_or(1024, |(soft, _)| soft)
}

/// The soft and hard `RLIMIT_NOFILE`.
fn nofile() -> nix::Result<(u64, u64)> {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
}

/// Soft `RLIMIT_NOFILE` up to the hard limit (a failure, e.g. under a seccomp filter, is
/// logged and harmless: the connection limits hold at the usual 1024).
fn raise_nofile() {
    let Ok((soft, hard)) = nofile() else {
        return;
    };
    if soft >= hard {
        return;
    }
    let raised =
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard);
    if let Err(e) = raised {
        tracing::debug!("cannot raise the open-file limit from {soft}: {e}");
    }
}

/// The warning when the agent listens beyond loopback (plain HTTP: the token and every reply
/// cross the network readable); `None` on loopback.
pub(crate) fn exposure_warning(addr: SocketAddr) -> Option<String> {
    (!addr.ip().is_loopback()).then(|| {
        format!(
            "LISTENING ON {addr} BEYOND LOOPBACK WITHOUT TLS: the API token, process names, \
             users and command lines cross the network in clear text. Listen on 127.0.0.1 and \
             reach the agent through an SSH tunnel (`vramwarden --connect ssh://user@host`), or \
             put a TLS reverse proxy in front of it"
        )
    })
}
