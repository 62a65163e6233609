//! A link to `vramwarden agent` over HTTP: a poller thread reads the agent's View
//! (`/api/view?since=TICK`, the one wire type [`super::wire::WireView`]) once per its sampling
//! interval, checks it ([`super::wire_checks`]) and applies it to the View the window draws
//! (GPUs, processes, the history after what it holds, leaks, OOM suspicions, rule activity,
//! the engine's events, recording status); a command thread posts the user's actions to
//! `/api/v1/command` (the agent applies its own policy and identity check) and rule tests to
//! `/api/test-rule`, and hands each answer back under its command's id. A command the agent
//! accepted (a park, a resume, a question to a PyTorch companion) gets its final reply from
//! the agent's View: the poller finds it in the View's `replies` under the agent's id and
//! hands it back under the window's.
//!
//! Nothing here blocks the window: every thread has its own timeouts; a lost agent, or one
//! whose answer fails a check, shows as [`LinkHealth::Disconnected`] with the data it last
//! sent, and the poller keeps retrying.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::remote_error::{refusal, unreadable, RemoteError};
use super::wire::WireView;
use super::{wire_checks, EngineLink, LinkHealth};
use crate::engine::command::{Answer, CommandId, CommandReply, Replies};
use crate::engine::sampler::Notify;
use crate::engine::shared::SharedMonitor;
use crate::engine::EngineCommand;
use crate::model::outcome::Outcome;
use crate::model::{now_ms, UnixMs};

/// How long one request may take before the agent counts as not answering.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a lost agent is tried again.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// How often a token the agent refused is tried again.
const RETRY_REFUSED: Duration = Duration::from_secs(10);

/// The agent's address, checked: `http://HOST:PORT` (a trailing `/` is dropped).
///
/// # Errors
/// A sentence for the connect window.
pub(crate) fn parse_url(url: &str) -> Result<String, String> {
    let u = url.trim().trim_end_matches('/');
    let Some(rest) = u.strip_prefix("http://") else {
        return Err(if u.starts_with("https://") {
            "the agent speaks plain HTTP: reach a remote one through SSH (\"over SSH\") rather than https://".into()
        } else {
            "the address starts with http:// (e.g. http://127.0.0.1:8726)".into()
        });
    };
    if rest.is_empty() || rest.contains('/') || rest.contains(char::is_whitespace) {
        return Err(format!("{url:?} is not http://HOST:PORT"));
    }
    Ok(u.to_string())
}

pub use super::files::{RemoteFiles, RemoteSession};

#[derive(Debug, Deserialize)]
struct SessionsReply {
    sessions: Vec<RemoteSession>,
}

/// Work for the link's command thread.
#[derive(Debug)]
enum Job {
    Command(CommandId, EngineCommand),
    ListSessions,
    Past,
}

/// A download for the link's download thread (never the command thread: a long download
/// must not delay a Kill).
#[derive(Debug)]
struct Download {
    name: String,
    dir: std::path::PathBuf,
}

/// The agent's past leaks (`GET /api/past`), as far as the link got with them.
#[derive(Debug, Clone, Default)]
pub enum RemotePast {
    /// Not asked yet.
    #[default]
    NotAsked,
    /// Asked; being read.
    Reading,
    /// Read and checked.
    Read(Arc<crate::engine::replay::PastEvents>),
    /// Could not be read (the next ask tries again).
    Failed(RemoteError),
}

/// A folder name for the agent at `url` (`http://HOST:PORT`): its host and port, every
/// character but letters, digits, `.` and `-` made `_`.
pub fn agent_folder(url: &str) -> String {
    let bare = url.strip_prefix("http://").unwrap_or(url);
    let name: String = bare
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    match name.trim_start_matches('.') {
        "" => "agent".into(),
        n => n.to_string(),
    }
}

/// Pages of history asked for at once, in a row, while catching up …
const CATCH_UP_BURST: u32 = 32;
/// … before a pause of this long (also after a page that brought nothing new).
const CATCH_UP_PAUSE: Duration = Duration::from_secs(1);

/// The wait before the next poll: `wait` as `Ends::poll` says, except that catching up
/// (`wait` zero) goes on at once only while the history moves on (`progress`) and for at most
/// [`CATCH_UP_BURST`] pages in a row. An agent that never says it is caught up costs the
/// window a poll a second, not one per round trip.
fn pace(wait: Duration, progress: bool, burst: &mut u32) -> Duration {
    if !wait.is_zero() {
        *burst = 0;
        return wait;
    }
    *burst += 1;
    if progress && *burst < CATCH_UP_BURST {
        return Duration::ZERO;
    }
    *burst = 0;
    CATCH_UP_PAUSE
}

/// The link to one agent; dropping it stops its threads (they never hold the window).
pub struct RemoteLink {
    url: String,
    health: Arc<Mutex<LinkHealth>>,
    stop: Arc<AtomicBool>,
    commands: mpsc::Sender<Job>,
    downloads: mpsc::Sender<Download>,
    files: Arc<Mutex<RemoteFiles>>,
    past: Arc<Mutex<RemotePast>>,
    replies: Arc<Replies>,
    /// What the link's thread writes: the agent's state as last received.
    shared: SharedMonitor,
    alerts: Arc<Mutex<super::remote_alerts::RemoteAlerts>>,
}

impl std::fmt::Debug for RemoteLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteLink")
            .field("url", &self.url)
            .finish()
    }
}

fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into()
}

/// Most bytes of a refusal's body read for its reason (the reason is its `error`, or its
/// first 200 characters).
const MAX_REFUSAL_BYTES: u64 = 64 * 1024;

/// `r` carrying the agent's bearer token (every request to the agent does).
fn authorised<B>(r: ureq::RequestBuilder<B>, token: &str) -> ureq::RequestBuilder<B> {
    r.header("Authorization", format!("Bearer {token}"))
}

/// Why a request reached no agent, in a user's words ("io: Connection refused (os error
/// 111)" was the transport's); other errors as the transport says them.
fn transport_words(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "nothing listens at this address (connection refused): is the agent running?".into()
        }
        ureq::Error::Timeout(_) => format!(
            "no answer within {} s (the agent or the network is too slow, or it is not the agent's address)",
            REQUEST_TIMEOUT.as_secs()
        ),
        ureq::Error::HostNotFound => "the host name is not known (check its spelling)".into(),
        other => other.to_string(),
    }
}

/// `GET url/path` with the bearer token on `agent`: the response, its body unread, when its
/// status is 200; else why not (the agent's refusal, or the transport's error).
fn get(
    agent: &ureq::Agent,
    url: &str,
    path: &str,
    token: &str,
) -> Result<ureq::http::Response<ureq::Body>, RemoteError> {
    let mut resp = authorised(agent.get(format!("{url}{path}")), token)
        .call()
        .map_err(|e| RemoteError::Unreachable(transport_words(&e)))?;
    let status = resp.status().as_u16();
    if status != 200 {
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_REFUSAL_BYTES)
            .read_to_vec()
            .unwrap_or_default();
        return Err(refusal(status, &String::from_utf8_lossy(&body)));
    }
    Ok(resp)
}

/// `GET url/path` with the bearer token: its body, at most `limit` bytes (more is an error),
/// when the status is 200.
fn get_body(
    agent: &ureq::Agent,
    url: &str,
    path: &str,
    token: &str,
    limit: u64,
) -> Result<Vec<u8>, RemoteError> {
    get(agent, url, path, token)?
        .body_mut()
        .with_config()
        .limit(limit)
        .read_to_vec()
        .map_err(|e| RemoteError::BadAnswer(format!("the agent's answer could not be read: {e}")))
}

/// The agent's View after tick `since`, checked.
fn get_view(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
    since: u64,
) -> Result<WireView, RemoteError> {
    let path = format!("/api/view?since={since}");
    let body = get_body(agent, url, &path, token, wire_checks::MAX_VIEW_BYTES)?;
    wire_checks::decode_view(&body, now_ms()).map_err(|e| unreadable(&body, e))
}

/// The agent's past leaks, checked.
fn get_past(agent: &ureq::Agent, url: &str, token: &str) -> RemotePast {
    let got =
        get_body(agent, url, "/api/past", token, wire_checks::MAX_VIEW_BYTES).and_then(|body| {
            wire_checks::decode_past(&body, now_ms()).map_err(|e| unreadable(&body, e))
        });
    match got {
        Ok(p) => RemotePast::Read(Arc::new(crate::engine::replay::PastEvents {
            leaks: p.leaks,
            ooms: p.ooms,
        })),
        Err(e) => RemotePast::Failed(e),
    }
}

/// Largest answer of a command read, bytes.
const MAX_ANSWER_BYTES: u64 = 4 << 20;

/// `POST url/path` with `body`: the status and the body of the agent's answer, or why there
/// is none.
fn post_raw(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
    path: &str,
    body: String,
) -> Result<(u16, String), RemoteError> {
    let sent = authorised(agent.post(format!("{url}{path}")), token)
        .header("Content-Type", "application/json")
        .send(body);
    let mut resp = sent.map_err(|e| {
        RemoteError::Unreachable(format!("the agent did not answer: {}", transport_words(&e)))
    })?;
    let status = resp.status().as_u16();
    let text = resp
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER_BYTES)
        .read_to_string()
        .unwrap_or_default();
    Ok((status, text))
}

/// `POST /api/v1/command` with `body`: the agent's reply (checked), with the agent's id for
/// it, or a failed answer saying why there is none.
fn post_command(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
    body: String,
) -> (Answer, Option<u64>) {
    let (status, text) = match post_raw(agent, url, token, "/api/v1/command", body) {
        Ok(r) => r,
        Err(e) => return (Answer::new(Outcome::Failed, e.to_string()), None),
    };
    match wire_checks::decode_reply(text.as_bytes()) {
        Ok(r) => (on_the_agent(r.answer), Some(r.id)),
        Err(e)
            if serde_json::from_str::<serde_json::Value>(&text)
                .is_ok_and(|v| v.get("outcome").is_some()) =>
        {
            (Answer::new(Outcome::Failed, e), None)
        }
        Err(_) => (
            Answer::new(Outcome::Failed, refusal(status, &text).to_string()),
            None,
        ),
    }
}

/// An agent's answer as the window shows it: said to be the agent's.
fn on_the_agent(mut a: Answer) -> Answer {
    a.detail.push_str(" (on the agent)");
    a
}

/// `POST url/path` with `body`: the agent's answer (an [`Answer`], checked), or a failed one
/// saying why.
fn post(agent: &ureq::Agent, url: &str, token: &str, path: &str, body: String) -> Answer {
    let (status, text) = match post_raw(agent, url, token, path, body) {
        Ok(r) => r,
        Err(e) => return Answer::new(Outcome::Failed, e.to_string()),
    };
    match serde_json::from_str::<Answer>(&text) {
        Ok(mut a) => {
            // A rule test's answer is final and carries no figures.
            a.stage = crate::engine::command::Stage::Final;
            (a.bytes, a.seconds) = (None, None);
            super::checks::cap_text(&mut a.detail, wire_checks::MAX_DETAIL);
            if let Some(m) = &mut a.matches {
                m.truncate(super::checks::MAX_PROCESSES);
                for r in m.iter_mut() {
                    super::checks::cap_text(&mut r.target, super::checks::MAX_TEXT);
                    super::checks::cap_opt(&mut r.skipped, super::checks::MAX_TEXT);
                }
            }
            a.detail.push_str(" (on the agent)");
            a
        }
        Err(_) => Answer::new(Outcome::Failed, refusal(status, &text).to_string()),
    }
}

/// Carries out one command on the agent: a process action through `/api/v1/command`, a rule
/// test through `/api/test-rule`; anything else is the agent's own configuration. With the
/// answer, the agent's id for the command (its final reply comes under it).
fn carry_out(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
    c: &EngineCommand,
) -> (Answer, Option<u64>) {
    if let EngineCommand::TestRule { rule, .. } = c {
        // The agent judges by its own safety settings, whatever this window's are.
        return match serde_json::to_string(rule) {
            Ok(body) => (post(agent, url, token, "/api/test-rule", body), None),
            Err(e) => (
                Answer::new(Outcome::Failed, format!("internal error: {e}")),
                None,
            ),
        };
    }
    let body = super::wire_command::WireCommand::of(c)
        .and_then(|w| serde_json::to_string(&w).map_err(|e| format!("internal error: {e}")));
    match body {
        Ok(body) => post_command(agent, url, token, body),
        Err(why) => (Answer::new(Outcome::Skipped, why), None),
    }
}

/// Most commands of a window waiting for their final reply from an agent (older ones are
/// dropped: their reply no longer comes).
const PENDING_KEPT: usize = crate::engine::command::REPLIES_KEPT;

/// The window's commands the agent accepted, waiting for their final reply: the agent's id,
/// the window's, and what was asked, oldest first.
#[derive(Debug, Default)]
struct Pending(std::collections::VecDeque<(u64, CommandId)>);

impl Pending {
    fn add(&mut self, agent_id: u64, id: CommandId) {
        self.0.push_back((agent_id, id));
        while self.0.len() > PENDING_KEPT {
            self.0.pop_front();
        }
    }

    /// The window's command that agent command `agent_id` answers, no longer pending.
    fn take(&mut self, agent_id: u64) -> Option<CommandId> {
        let i = self.0.iter().position(|(a, _)| *a == agent_id)?;
        self.0.remove(i).map(|(_, id)| id)
    }
}

/// What the poller and the command thread share.
#[derive(Clone)]
struct Ends {
    url: String,
    token: String,
    shared: SharedMonitor,
    notify: Notify,
    health: Arc<Mutex<LinkHealth>>,
    stop: Arc<AtomicBool>,
    /// Replies for the window, under its commands' ids.
    replies: Arc<Replies>,
    /// The window's commands the agent accepted, until their final reply comes.
    pending: Arc<Mutex<Pending>>,
    /// The agent's events as alerts for the window.
    alerts: Arc<Mutex<super::remote_alerts::RemoteAlerts>>,
    /// The agent's past leaks: asked again when the agent starts a new run (the run before
    /// it is past now).
    past: Arc<Mutex<RemotePast>>,
}

impl Ends {
    /// Hands the window the final replies among `replies` (the agent's View) to its own
    /// accepted commands, each once, under the window's id.
    fn route_replies(&self, replies: Vec<super::wire::WireReply>) -> bool {
        let mut pending = lock(&self.pending);
        let mut any = false;
        for r in replies {
            if let Some(id) = pending.take(r.id) {
                self.replies.push(CommandReply {
                    id,
                    what: r.what,
                    answer: on_the_agent(r.answer),
                });
                any = true;
            }
        }
        any
    }

    fn set_health(&self, h: LinkHealth) {
        *self.health.lock().unwrap_or_else(|p| p.into_inner()) = h;
    }

    /// The health after a failed poll: disconnected since the first failure.
    fn failed(&self, error: RemoteError) -> LinkHealth {
        let since_ms = match &*self.health.lock().unwrap_or_else(|p| p.into_inner()) {
            LinkHealth::Disconnected { since_ms, .. } => *since_ms,
            _ => now_ms(),
        };
        LinkHealth::Disconnected {
            url: self.url.clone(),
            since_ms,
            error,
        }
    }

    /// Sleeps `wait` in short steps, so a dropped link ends soon.
    fn sleep(&self, wait: Duration) {
        let until = Instant::now() + wait;
        while Instant::now() < until && !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
        }
    }

    /// One poll of `/api/view` after `since`: the next `since` and how long to wait (none
    /// while the history is not caught up).
    fn poll(&self, agent: &ureq::Agent, since: u64) -> (u64, Duration) {
        let got = get_view(agent, &self.url, &self.token, since).and_then(|mut v| {
            self.route_replies(std::mem::take(&mut v.replies));
            let host = v
                .source
                .as_ref()
                .map(|s| s.host.clone())
                .unwrap_or_default();
            let (interval, caught_up) = (v.interval_ms, v.caught_up());
            let mut m = self.shared.write().map_err(|_| {
                RemoteError::BadAnswer("internal error: the window's state is lost".into())
            })?;
            let restarted = v.restarted(&m, since);
            let next = v
                .apply_after(&mut m, since, now_ms())
                .map_err(RemoteError::BadAnswer)?;
            if restarted {
                // The run before is among the agent's past sessions now: read them again.
                *lock(&self.past) = RemotePast::NotAsked;
            }
            let alerts = lock(&self.alerts).take(&m);
            drop(m);
            lock(&self.alerts).deliver(alerts);
            Ok((next, host, interval, caught_up))
        });
        let (next, wait, h) = match got {
            Ok((next, host, interval, caught_up)) => {
                let wait = if caught_up {
                    Duration::from_millis(interval.clamp(200, 10_000))
                } else {
                    Duration::ZERO
                };
                let h = LinkHealth::Connected {
                    url: self.url.clone(),
                    host,
                    last_ms: now_ms(),
                };
                (next, wait, h)
            }
            // The window keeps the last good View; the status says why.
            // A refused token is asked again rarely: the same token is refused again until
            // the agent's changes back (the window asks the user for the right one).
            Err(e @ RemoteError::Unauthorized(_)) => (since, RETRY_REFUSED, self.failed(e)),
            Err(e) => (since, RETRY_EVERY, self.failed(e)),
        };
        self.set_health(h);
        (self.notify)();
        (next, wait)
    }

    /// The poller thread: the agent's View once per its interval into the window's.
    fn spawn_poller(self) -> Result<(), String> {
        std::thread::Builder::new()
            .name("vramwarden-remote-poll".into())
            .spawn(move || {
                let agent = http();
                let mut since = 0;
                let mut burst = 0u32;
                while !self.stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let (next, wait) = self.poll(&agent, since);
                    let wait = pace(wait, next > since, &mut burst);
                    since = next;
                    self.sleep(wait.saturating_sub(started.elapsed()));
                }
            })
            .map(drop)
            .map_err(|e| format!("could not start the link's thread: {e}"))
    }

    /// The command thread: commands, rule tests, lists of sessions and past leaks, one at a
    /// time; each command's answer goes to `replies` under its id.
    fn spawn_commands(
        self,
        rx: mpsc::Receiver<Job>,
        files: Arc<Mutex<RemoteFiles>>,
        past: Arc<Mutex<RemotePast>>,
    ) -> Result<(), String> {
        std::thread::Builder::new()
            .name("vramwarden-remote-cmd".into())
            .spawn(move || {
                let agent = http();
                while !self.stop.load(Ordering::Relaxed) {
                    match rx.recv_timeout(Duration::from_millis(200)) {
                        Ok(Job::Command(id, c)) => {
                            let (answer, agent_id) = carry_out(&agent, &self.url, &self.token, &c);
                            if let (false, Some(a)) = (answer.is_final(), agent_id) {
                                lock(&self.pending).add(a, id);
                            }
                            self.replies.push(CommandReply {
                                id,
                                what: c.label(),
                                answer,
                            });
                        }
                        Ok(Job::ListSessions) => {
                            let list = list_sessions(&agent, &self.url, &self.token);
                            lock(&files).list = Some(list);
                        }
                        Ok(Job::Past) => {
                            *lock(&past) = get_past(&agent, &self.url, &self.token);
                        }
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                    (self.notify)();
                }
            })
            .map(drop)
            .map_err(|e| format!("could not start the link's thread: {e}"))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl RemoteLink {
    /// Connects to the agent at `url` (see [`parse_url`]) with its bearer `token`, writing what
    /// it sends into `shared` and calling `notify` after each change and each reply.
    ///
    /// # Errors
    /// A malformed address, or the OS refusing a thread: a sentence the caller only shows.
    /// What the agent answers (a refused token, another version, no answer) comes later, by
    /// kind, in [`EngineLink::health`].
    pub fn connect(
        url: &str,
        token: String,
        shared: SharedMonitor,
        notify: Notify,
    ) -> Result<Self, String> {
        let url = parse_url(url)?;
        let ends = Ends {
            health: Arc::new(Mutex::new(LinkHealth::Disconnected {
                url: url.clone(),
                since_ms: now_ms(),
                error: RemoteError::Connecting,
            })),
            url: url.clone(),
            token: token.clone(),
            shared: shared.clone(),
            notify: notify.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            replies: Arc::new(Replies::default()),
            pending: Arc::new(Mutex::new(Pending::default())),
            alerts: Arc::new(Mutex::new(Default::default())),
            past: Arc::new(Mutex::new(RemotePast::NotAsked)),
        };
        let (tx, rx) = mpsc::channel::<Job>();
        let files = Arc::new(Mutex::new(RemoteFiles::default()));
        let past = ends.past.clone();
        let replies = ends.replies.clone();
        let alerts = ends.alerts.clone();
        ends.clone().spawn_poller()?;
        ends.clone()
            .spawn_commands(rx, files.clone(), past.clone())?;
        let downloads = spawn_downloads(&url, &token, &ends.stop, &files, &notify)?;
        Ok(Self {
            url,
            health: ends.health,
            stop: ends.stop,
            commands: tx,
            downloads,
            files,
            past,
            replies,
            shared,
            alerts,
        })
    }

    /// From the next View on, the agent's new events that `filter` makes alerts go to `sink`,
    /// as a local engine's would; what the agent had said before is not announced.
    pub fn alert_to(&self, sink: crate::engine::AlertSink, filter: crate::engine::AlertFilter) {
        *lock(&self.alerts) = super::remote_alerts::RemoteAlerts::new(sink, filter);
    }

    /// Asks for the agent's past leaks, from its own session logs (they arrive in
    /// [`RemoteLink::past`]).
    fn ask_past(&self) {
        let _ = self.commands.send(Job::Past);
    }

    /// The agent's past leaks as last read.
    pub fn past(&self) -> RemotePast {
        lock(&self.past).clone()
    }

    /// The agent's past leaks once read; the first call asks for them (a failed read is
    /// asked again by the next call).
    pub fn past_or_ask(&self) -> Option<Arc<crate::engine::replay::PastEvents>> {
        let mut p = lock(&self.past);
        match &*p {
            RemotePast::Read(events) => Some(events.clone()),
            RemotePast::Reading => None,
            RemotePast::NotAsked | RemotePast::Failed(_) => {
                *p = RemotePast::Reading;
                drop(p);
                self.ask_past();
                None
            }
        }
    }

    /// The agent's address.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Asks for the agent's list of session logs (it arrives in [`RemoteLink::files`]).
    pub fn list_sessions(&self) {
        let _ = self.commands.send(Job::ListSessions);
    }

    /// Downloads the agent's session `name` into `dir` (the result arrives in
    /// [`RemoteLink::files`]); the list is read again first when the one last read lacks it.
    pub fn download(&self, name: &str, dir: std::path::PathBuf) {
        let _ = self.downloads.send(Download {
            name: name.to_string(),
            dir,
        });
    }

    /// This agent's own folder under `base` (`from-agents/127.0.0.1_8726`): downloads of two
    /// agents never replace each other's files of the same name.
    fn downloads_folder(&self, base: &std::path::Path) -> std::path::PathBuf {
        base.join(agent_folder(&self.url))
    }

    /// The session list and downloads so far.
    pub fn files(&self) -> RemoteFiles {
        self.files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Takes the finished downloads out.
    pub fn take_done(&self) -> Vec<(String, Result<std::path::PathBuf, String>)> {
        std::mem::take(
            &mut self
                .files
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .done,
        )
    }
}

/// Largest answer of `GET /api/v1/sessions` read, bytes.
const MAX_LIST_BYTES: u64 = 16 << 20;

fn list_sessions(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
) -> Result<Vec<RemoteSession>, String> {
    let body = get_body(agent, url, "/api/v1/sessions", token, MAX_LIST_BYTES)?;
    decode_sessions(&body, now_ms())
}

/// Reads and checks the agent's list of session logs: names the API serves, sizes within
/// [`super::checks::MAX_DOWNLOAD_BYTES`], plausible times, at most
/// [`super::checks::MAX_SESSIONS`] entries.
///
/// # Errors
/// A sentence for the sessions window.
pub fn decode_sessions(body: &[u8], now: UnixMs) -> Result<Vec<RemoteSession>, String> {
    use super::checks;
    let r: SessionsReply = serde_json::from_slice(body)
        .map_err(|e| format!("the agent's list is not understood: {e}"))?;
    checks::count("sessions", r.sessions.len(), checks::MAX_SESSIONS)?;
    for s in &r.sessions {
        if !crate::session::valid_session_name(&s.name) {
            let mut shown = s.name.clone();
            checks::cap_text(&mut shown, 80);
            return Err(format!("the agent listed a session named {shown:?}"));
        }
        if s.size_bytes > checks::MAX_DOWNLOAD_BYTES {
            return Err(format!(
                "the agent listed {} at {} bytes (at most {} are downloaded)",
                s.name,
                s.size_bytes,
                checks::MAX_DOWNLOAD_BYTES
            ));
        }
        if let Some(t) = s.started_ms {
            checks::time("a session's start", t, now)?;
        }
        if s.duration_ms
            .is_some_and(|d| !(0..=100 * 365 * 86_400_000).contains(&d))
        {
            return Err(format!(
                "the agent listed {} with an absurd duration",
                s.name
            ));
        }
    }
    Ok(r.sessions)
}

/// The download thread: one download at a time, in the order asked.
fn spawn_downloads(
    url: &str,
    token: &str,
    stop: &Arc<AtomicBool>,
    files: &Arc<Mutex<RemoteFiles>>,
    notify: &Notify,
) -> Result<mpsc::Sender<Download>, String> {
    let (tx, rx) = mpsc::channel::<Download>();
    let (url, token, stop, files, notify) = (
        url.to_string(),
        token.to_string(),
        stop.clone(),
        files.clone(),
        notify.clone(),
    );
    std::thread::Builder::new()
        .name("vramwarden-remote-download".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let d = match rx.recv_timeout(Duration::from_millis(200)) {
                    Ok(d) => d,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => break,
                };
                let lock = || {
                    files
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                };
                let size_of = |f: &RemoteFiles| match &f.list {
                    Some(Ok(list)) => list.iter().find(|s| s.name == d.name).map(|s| s.size_bytes),
                    _ => None,
                };
                lock().downloading = Some(d.name.clone());
                notify();
                let mut listed = size_of(&lock());
                if listed.is_none() {
                    // Not in the list as last read (a past leak's session opened from the
                    // Leaks tab, a log begun since): the list is read again first.
                    let list = list_sessions(&http(), &url, &token);
                    let mut f = lock();
                    f.list = Some(list);
                    listed = size_of(&f);
                }
                let got = match listed {
                    Some(size) => download(&url, &token, &d.name, size, &d.dir, &stop),
                    None => Err(format!("{} is not among the agent's session logs", d.name)),
                };
                let mut f = lock();
                f.downloading = None;
                f.done.push((d.name, got));
                drop(f);
                notify();
            }
        })
        .map_err(|e| format!("could not start the link's thread: {e}"))?;
    Ok(tx)
}

/// A temporary download file, removed unless [`Part::keep`] renames it into place.
struct Part(Option<std::path::PathBuf>);

impl Part {
    fn keep(mut self, dest: &std::path::Path) -> Result<(), String> {
        let Some(p) = self.0.take() else {
            return Err("internal error: the download file is gone".into());
        };
        std::fs::rename(&p, dest).map_err(|e| {
            let _ = std::fs::remove_file(&p);
            format!(
                "cannot put the download in place at {}: {e}",
                dest.display()
            )
        })
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `dir` (and its missing parents) made with mode 0700, and `dir` itself set to 0700: the
/// logs hold every user's command lines.
fn private_dir(dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("cannot make {} private: {e}", dir.display()))
}

/// Copies exactly `size` bytes of `body` into `out` (a log is append-only: its first `size`
/// bytes are the log as it was listed, whatever it grew to since); fewer is an error. Stops
/// early when `stop` is set.
///
/// # Errors
/// A sentence for the sessions window.
fn copy_listed(
    body: &mut dyn std::io::Read,
    out: &mut dyn std::io::Write,
    size: u64,
    stop: &AtomicBool,
) -> Result<(), String> {
    let mut left = size;
    let mut buf = vec![0u8; 64 * 1024];
    while left > 0 {
        if stop.load(Ordering::Relaxed) {
            return Err("the download was cancelled".into());
        }
        let want = left.min(buf.len() as u64) as usize;
        let n = match body.read(&mut buf[..want]) {
            Ok(0) => {
                return Err(format!(
                    "the download broke off after {} of {size} bytes",
                    size - left
                ))
            }
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("the download broke off: {e}")),
        };
        out.write_all(&buf[..n])
            .map_err(|e| format!("cannot write the download: {e}"))?;
        left -= n as u64;
    }
    Ok(())
}

/// Streams the agent's session `name`, listed at `size` bytes, into `dir/name`: through a
/// temporary file (0600, removed on any failure, so a cut download never looks like a whole
/// log) in a 0700 folder, at most `size` bytes. A large log may take longer than one
/// request's usual timeout: this one allows 10 minutes.
fn download(
    url: &str,
    token: &str,
    name: &str,
    size: u64,
    dir: &std::path::Path,
    stop: &AtomicBool,
) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::OpenOptionsExt;
    if !crate::session::valid_session_name(name) {
        return Err(format!("{name:?} is not a session name"));
    }
    if size > super::checks::MAX_DOWNLOAD_BYTES {
        return Err(format!("{name} is larger than a download may be"));
    }
    private_dir(dir)?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(600)))
        .timeout_connect(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = get(&agent, url, &format!("/api/v1/sessions/{name}"), token)?;
    let dest = dir.join(name);
    let part_path = dir.join(format!(".{name}.part"));
    let _ = std::fs::remove_file(&part_path);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&part_path)
        .map_err(|e| format!("cannot write {}: {e}", part_path.display()))?;
    let part = Part(Some(part_path));
    let mut body = resp.body_mut().with_config().limit(size).reader();
    copy_listed(&mut body, &mut out, size, stop)?;
    out.sync_all().map_err(|e| e.to_string())?;
    drop(out);
    part.keep(&dest)?;
    Ok(dest)
}

impl EngineLink for RemoteLink {
    fn view(&self) -> Option<std::sync::Arc<crate::engine::view::Monitor>> {
        self.shared.view()
    }

    fn send(&self, c: EngineCommand) -> CommandId {
        let id = CommandId::next();
        if self.commands.send(Job::Command(id, c)).is_err() {
            self.replies.push(CommandReply {
                id,
                what: String::new(),
                answer: Answer::new(Outcome::Failed, "the link to the agent is closed"),
            });
        }
        id
    }

    fn take_replies(&self) -> Vec<CommandReply> {
        self.replies.take()
    }

    fn health(&self) -> LinkHealth {
        self.health
            .lock()
            .map(|h| h.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    fn agent_files(&self) -> Option<&dyn super::files::AgentFiles> {
        Some(self)
    }
}

impl super::files::AgentFiles for RemoteLink {
    fn files(&self) -> RemoteFiles {
        RemoteLink::files(self)
    }

    fn list_sessions(&self) {
        RemoteLink::list_sessions(self);
    }

    fn download(&self, name: &str, base: &std::path::Path) {
        RemoteLink::download(self, name, self.downloads_folder(base));
    }

    fn take_downloads(&self) -> Vec<(String, Result<std::path::PathBuf, String>)> {
        self.take_done()
    }

    fn past_or_ask(&self) -> Option<Arc<crate::engine::replay::PastEvents>> {
        RemoteLink::past_or_ask(self)
    }
}

impl EngineLink for Arc<RemoteLink> {
    fn view(&self) -> Option<std::sync::Arc<crate::engine::view::Monitor>> {
        self.as_ref().view()
    }

    fn send(&self, c: EngineCommand) -> CommandId {
        self.as_ref().send(c)
    }

    fn take_replies(&self) -> Vec<CommandReply> {
        self.as_ref().take_replies()
    }

    fn health(&self) -> LinkHealth {
        self.as_ref().health()
    }

    fn agent_files(&self) -> Option<&dyn super::files::AgentFiles> {
        Some(self.as_ref())
    }
}

impl Drop for RemoteLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GUI review: a lost agent was said as "io: Connection refused (os error 111)". A
    /// real refused connection (a port nothing listens on) is said in a user's words.
    #[test]
    fn a_refused_connection_is_said_in_words() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", free.local_addr().expect("addr"));
        drop(free);
        let e = get(&http(), &url, "/healthz", "t").expect_err("nothing listens");
        assert_eq!(
            e,
            RemoteError::Unreachable(
                "nothing listens at this address (connection refused): is the agent running?"
                    .into()
            )
        );
    }

    #[test]
    fn each_agent_downloads_into_a_folder_of_its_own() {
        assert_eq!(agent_folder("http://127.0.0.1:8726"), "127.0.0.1_8726");
        assert_eq!(agent_folder("http://127.0.0.1:8727"), "127.0.0.1_8727");
        assert_eq!(agent_folder("http://[::1]:1"), "___1__1");
        for hostile in ["http://../..", "http://a/../../b", "http://."] {
            let f = agent_folder(hostile);
            assert!(
                !f.contains('/') && !f.starts_with('.') && !f.is_empty(),
                "{f}"
            );
        }
        let mut pace_burst = 0;
        assert_eq!(pace(Duration::ZERO, true, &mut pace_burst), Duration::ZERO);
        assert_eq!(pace(Duration::ZERO, false, &mut pace_burst), CATCH_UP_PAUSE);
    }

    #[test]
    fn addresses_are_checked() {
        assert_eq!(
            parse_url(" http://127.0.0.1:8726/ ").as_deref(),
            Ok("http://127.0.0.1:8726")
        );
        assert!(parse_url("https://gpu-box:8726")
            .expect_err("https is refused")
            .contains("SSH"));
        assert!(parse_url("gpu-box:8726").is_err());
        assert!(parse_url("http://gpu-box:8726/api").is_err());
    }
}
