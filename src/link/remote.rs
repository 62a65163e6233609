//! A link to `vramwarden agent` over HTTP: a poller thread reads the agent's
//! `/api/v1/snapshot` once per its sampling interval and applies it to the shared monitor the
//! window draws (GPUs, processes, history from the moment of connection, leaks, recording
//! status); a command thread posts the user's actions to `/api/v1/command`, where the agent
//! applies its own policy and identity check, and puts the agent's answer in the activity log.
//!
//! Nothing here blocks the window: both threads have their own timeouts; a lost agent shows as
//! [`LinkHealth::Disconnected`] with the data it last sent, and the poller keeps retrying.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::{EngineLink, LinkHealth};
use crate::engine::EngineCommand;
use crate::model::now_ms;
use crate::model::{ProcessKey, Snapshot, SourceInfo, UnixMs};
use crate::monitor::{LeakKey, LeakRecord, SourceStatus};
use crate::rules::action::{Activity, Outcome};
use crate::sampler::Notify;
use crate::session::LeakInfo;
use crate::shared::SharedMonitor;

/// How long one request may take before the agent counts as not answering.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How often a lost agent is tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(1);

/// The agent's address, checked: `http://HOST:PORT` (a trailing `/` is dropped).
///
/// # Errors
/// A sentence for the connect window.
pub fn parse_url(url: &str) -> Result<String, String> {
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

#[derive(Debug, Deserialize)]
struct StatusJson {
    state: String,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
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
    fn record(self) -> LeakRecord {
        let key = if self.ghost {
            LeakKey::Ghost(self.device_index)
        } else {
            LeakKey::Process((
                ProcessKey {
                    pid: self.pid,
                    start_time_ms: self.start_time_ms,
                },
                self.device_index,
            ))
        };
        LeakRecord {
            key,
            info: LeakInfo {
                pid: self.pid,
                start_time_ms: self.start_time_ms,
                device_index: self.device_index,
                name: self.name,
                user: self.user,
                ghost: self.ghost,
                since_ms: self.since_ms,
                rate_mib_per_min: self.rate_mib_per_min,
            },
            flagged_ms: self.flagged_ms,
            ended_ms: self.ended_ms,
            grown_mib: self.grown_mib,
            peak_mib: self.peak_mib,
            session: None,
            open_at_end: false,
        }
    }
}

/// Puts one answer of the agent into the monitor. Returns the agent's sampling interval.
fn apply(shared: &SharedMonitor, r: SnapshotReply, received_ms: UnixMs) -> u64 {
    let Ok(mut m) = shared.write() else {
        return r.interval_ms;
    };
    m.source = r.source;
    m.interval_ms = r.interval_ms.max(1);
    if let Some(snap) = r.snapshot {
        let newer = m
            .latest
            .as_ref()
            .is_none_or(|l| snap.taken_at_ms > l.taken_at_ms);
        if newer {
            m.apply(snap, received_ms);
        }
    }
    m.status = match r.status.state.as_str() {
        "running" => SourceStatus::Running,
        "failed" => SourceStatus::Failed(
            r.status
                .error
                .unwrap_or_else(|| "the agent's source failed".into()),
        ),
        _ => SourceStatus::Starting,
    };
    m.last_error = r.last_error;
    m.leaks = r.leaks.into_iter().map(LeakJson::record).collect();
    m.recording = crate::monitor::RecordingStatus {
        path: r.recording.path,
        active: r.recording.active,
        bytes: r.recording.bytes,
        error: r.recording.error,
        samples: r.recording.samples,
        lost: r.recording.lost,
    };
    r.interval_ms
}

/// A session log on the agent (`GET /api/v1/sessions`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RemoteSession {
    /// Its file name in the agent's sessions folder.
    pub name: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// When the recording began (ms since the epoch), when the header says.
    #[serde(default)]
    pub started_ms: Option<UnixMs>,
    /// How long it covers, ms.
    #[serde(default)]
    pub duration_ms: Option<UnixMs>,
}

#[derive(Debug, Deserialize)]
struct SessionsReply {
    sessions: Vec<RemoteSession>,
}

/// The agent's session logs as the link last listed them, and its downloads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteFiles {
    /// The list, or why it could not be read (`None`: not asked yet).
    pub list: Option<Result<Vec<RemoteSession>, String>>,
    /// A download in progress (its name).
    pub downloading: Option<String>,
    /// Finished downloads, oldest first: the name and the local file, or why it failed.
    pub done: Vec<(String, Result<std::path::PathBuf, String>)>,
}

/// Work for the link's second thread.
#[derive(Debug)]
enum Job {
    Command(EngineCommand),
    ListSessions,
    Download(String, std::path::PathBuf),
}

/// The link to one agent; dropping it stops both threads (they never hold the window).
pub struct RemoteLink {
    url: String,
    health: Arc<Mutex<LinkHealth>>,
    stop: Arc<AtomicBool>,
    commands: mpsc::Sender<Job>,
    files: Arc<Mutex<RemoteFiles>>,
    /// What the link's thread writes: the agent's state as last received.
    shared: SharedMonitor,
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

/// Why a reply is not a snapshot, in a few words.
fn refusal(status: u16, body: &str) -> String {
    let msg = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.trim().chars().take(200).collect());
    match status {
        401 => format!("the agent refused the token ({msg})"),
        _ => format!("HTTP {status}: {msg}"),
    }
}

/// `GET url/path` with the bearer token, its JSON body as `T` (`what` names it in errors;
/// `limit` caps the body, `None`: ureq's default of 10 MiB).
fn get_json<T: serde::de::DeserializeOwned>(
    agent: &ureq::Agent,
    url: &str,
    path: &str,
    token: &str,
    limit: Option<u64>,
    what: &str,
) -> Result<T, String> {
    let mut resp = agent
        .get(format!("{url}{path}"))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = match limit {
        Some(l) => resp.body_mut().with_config().limit(l).read_to_string(),
        None => resp.body_mut().read_to_string(),
    }
    .map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(refusal(status, &body));
    }
    serde_json::from_str(&body).map_err(|e| format!("the agent's {what} is not understood: {e}"))
}

fn get_snapshot(agent: &ureq::Agent, url: &str, token: &str) -> Result<SnapshotReply, String> {
    get_json(
        agent,
        url,
        "/api/v1/snapshot",
        token,
        Some(64 << 20),
        "answer",
    )
}

/// The body of a manual command for the agent's API, or why it cannot go there.
fn command_body(
    c: &EngineCommand,
) -> Result<(crate::history::ProcSeriesKey, String, serde_json::Value), String> {
    let EngineCommand::Manual { key, action } = c else {
        return Err("settings and recording belong to the agent's own configuration; change them on the server".into());
    };
    let mut body = serde_json::json!({
        "pid": key.0.pid,
        "start_time": key.0.start_time_ms,
        "gpu": key.1,
    });
    match action {
        crate::rules::Action::Terminate { grace_seconds } => {
            body["action"] = "terminate".into();
            body["grace_seconds"] = (*grace_seconds).into();
        }
        crate::rules::Action::Signal { signal } if signal == "SIGKILL" => {
            body["action"] = "kill".into();
        }
        crate::rules::Action::Signal { signal } => {
            body["action"] = "signal".into();
            body["signal"] = signal.clone().into();
        }
        crate::rules::Action::ReleaseCache => body["action"] = "release_cache".into(),
        crate::rules::Action::LimitMemory { gib } => {
            body["action"] = "limit_memory".into();
            body["gib"] = (*gib).into();
        }
        other => {
            return Err(format!(
                "{} is not offered by the agent's API",
                other.label()
            ))
        }
    }
    Ok((*key, action.label(), body))
}

#[derive(Debug, Deserialize)]
struct CommandReply {
    outcome: Outcome,
    detail: String,
}

fn post_command(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
    body: &serde_json::Value,
) -> (Outcome, String) {
    let sent = agent
        .post(format!("{url}/api/v1/command"))
        .header("Authorization", format!("Bearer {token}"))
        .header("Content-Type", "application/json")
        .send(body.to_string());
    let mut resp = match sent {
        Ok(r) => r,
        Err(e) => return (Outcome::Failed, format!("the agent did not answer: {e}")),
    };
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    match serde_json::from_str::<CommandReply>(&text) {
        Ok(r) => (r.outcome, format!("{} (on the agent)", r.detail)),
        Err(_) => (Outcome::Failed, refusal(status, &text)),
    }
}

impl RemoteLink {
    /// Connects to the agent at `url` (see [`parse_url`]) with its bearer `token`, writing what
    /// it sends into `shared` and calling `notify` after each change.
    ///
    /// # Errors
    /// A malformed address, or the OS refusing a thread.
    pub fn connect(
        url: &str,
        token: String,
        shared: SharedMonitor,
        notify: Notify,
    ) -> Result<Self, String> {
        let url = parse_url(url)?;
        let health = Arc::new(Mutex::new(LinkHealth::Disconnected {
            url: url.clone(),
            since_ms: now_ms(),
            error: "connecting…".into(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Job>();
        let files = Arc::new(Mutex::new(RemoteFiles::default()));
        let kept = shared.clone();
        {
            let (url, token, shared, notify, health, stop) = (
                url.clone(),
                token.clone(),
                shared.clone(),
                notify.clone(),
                health.clone(),
                stop.clone(),
            );
            std::thread::Builder::new()
                .name("vramwarden-remote-poll".into())
                .spawn(move || {
                    let agent = http();
                    while !stop.load(Ordering::Relaxed) {
                        let started = Instant::now();
                        let interval;
                        let h = match get_snapshot(&agent, &url, &token) {
                            Ok(r) => {
                                let host = r
                                    .source
                                    .as_ref()
                                    .map(|s| s.host.clone())
                                    .unwrap_or_default();
                                let ms = apply(&shared, r, now_ms());
                                interval = Duration::from_millis(ms.clamp(200, 10_000));
                                LinkHealth::Connected {
                                    url: url.clone(),
                                    host,
                                    last_ms: now_ms(),
                                }
                            }
                            Err(error) => {
                                let since_ms =
                                    match &*health.lock().unwrap_or_else(|p| p.into_inner()) {
                                        LinkHealth::Disconnected { since_ms, .. } => *since_ms,
                                        _ => now_ms(),
                                    };
                                interval = RETRY_EVERY;
                                LinkHealth::Disconnected {
                                    url: url.clone(),
                                    since_ms,
                                    error,
                                }
                            }
                        };
                        *health.lock().unwrap_or_else(|p| p.into_inner()) = h;
                        notify();
                        let wait = interval.saturating_sub(started.elapsed());
                        // Sleep in short steps so a dropped link ends soon.
                        let until = Instant::now() + wait;
                        while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                            std::thread::sleep(
                                Duration::from_millis(50).min(until - Instant::now()),
                            );
                        }
                    }
                })
                .map_err(|e| format!("could not start the link's thread: {e}"))?;
        }
        {
            let (url, stop, files) = (url.clone(), stop.clone(), files.clone());
            std::thread::Builder::new()
                .name("vramwarden-remote-cmd".into())
                .spawn(move || {
                    let agent = http();
                    while !stop.load(Ordering::Relaxed) {
                        let c = match rx.recv_timeout(Duration::from_millis(200)) {
                            Ok(Job::Command(c)) => c,
                            Ok(Job::ListSessions) => {
                                let list = list_sessions(&agent, &url, &token);
                                files
                                    .lock()
                                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                                    .list = Some(list);
                                notify();
                                continue;
                            }
                            Ok(Job::Download(name, dir)) => {
                                files
                                    .lock()
                                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                                    .downloading = Some(name.clone());
                                notify();
                                let got = download(&url, &token, &name, &dir);
                                let mut f = files
                                    .lock()
                                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                                f.downloading = None;
                                f.done.push((name, got));
                                drop(f);
                                notify();
                                continue;
                            }
                            Err(RecvTimeoutError::Timeout) => continue,
                            Err(RecvTimeoutError::Disconnected) => break,
                        };
                        let (key, action, outcome, detail) = match command_body(&c) {
                            Ok((key, action, body)) => {
                                let (o, d) = post_command(&agent, &url, &token, &body);
                                (Some(key), action, o, d)
                            }
                            Err(why) => (None, String::new(), Outcome::Skipped, why),
                        };
                        if let Ok(mut m) = shared.write() {
                            match key {
                                Some(key) => {
                                    // Named with the facts of its row (the agent acted on
                                    // its own target).
                                    let target = crate::rules::eval::Target::Process {
                                        key,
                                        info: m.row(&key).map(|r| r.info.clone()),
                                        used_bytes: None,
                                        origin: crate::model::Origin::Live,
                                    };
                                    m.activity.push_back(Activity {
                                        unix_ms: now_ms(),
                                        rule: "manual".into(),
                                        target,
                                        action,
                                        outcome,
                                        detail,
                                        entry: crate::rules::action::Entry::Action,
                                    });
                                    while m.activity.len() > crate::engine::ACTIVITY_KEPT {
                                        m.activity.pop_front();
                                    }
                                }
                                None => m.notices.push_back((now_ms(), detail)),
                            }
                        }
                        notify();
                    }
                })
                .map_err(|e| format!("could not start the link's thread: {e}"))?;
        }
        Ok(Self {
            url,
            health,
            stop,
            commands: tx,
            files,
            shared: kept,
        })
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
    /// [`RemoteLink::files`]).
    pub fn download(&self, name: &str, dir: std::path::PathBuf) {
        let _ = self.commands.send(Job::Download(name.to_string(), dir));
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

fn list_sessions(
    agent: &ureq::Agent,
    url: &str,
    token: &str,
) -> Result<Vec<RemoteSession>, String> {
    get_json::<SessionsReply>(agent, url, "/api/v1/sessions", token, None, "list")
        .map(|r| r.sessions)
}

/// Streams the agent's session `name` into `dir/name` (through a temporary file, so a cut
/// download never looks like a whole log). A large log may take longer than one request's
/// usual timeout: this one allows 10 minutes.
fn download(
    url: &str,
    token: &str,
    name: &str,
    dir: &std::path::Path,
) -> Result<std::path::PathBuf, String> {
    if !crate::agent::api::valid_session_name(name) {
        return Err(format!("{name:?} is not a session name"));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(600)))
        .timeout_connect(Some(REQUEST_TIMEOUT))
        .http_status_as_error(false)
        .build()
        .into();
    let mut resp = agent
        .get(format!("{url}/api/v1/sessions/{name}"))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if status != 200 {
        let body = resp.body_mut().read_to_string().unwrap_or_default();
        return Err(refusal(status, &body));
    }
    let dest = dir.join(name);
    let part = dir.join(format!(".{name}.part"));
    let mut out = std::fs::File::create(&part)
        .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
    let mut body = resp.body_mut().with_config().limit(u64::MAX).reader();
    std::io::copy(&mut body, &mut out).map_err(|e| format!("the download broke off: {e}"))?;
    out.sync_all().map_err(|e| e.to_string())?;
    std::fs::rename(&part, &dest).map_err(|e| e.to_string())?;
    Ok(dest)
}

impl EngineLink for RemoteLink {
    fn view(&self) -> Option<std::sync::Arc<crate::monitor::Monitor>> {
        self.shared.view()
    }

    fn send(&self, c: EngineCommand) {
        let _ = self.commands.send(Job::Command(c));
    }

    fn health(&self) -> LinkHealth {
        self.health
            .lock()
            .map(|h| h.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }
}

impl EngineLink for Arc<RemoteLink> {
    fn view(&self) -> Option<std::sync::Arc<crate::monitor::Monitor>> {
        self.as_ref().view()
    }

    fn send(&self, c: EngineCommand) {
        self.as_ref().send(c);
    }

    fn health(&self) -> LinkHealth {
        self.as_ref().health()
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

    #[test]
    fn only_process_actions_go_to_the_agent() {
        let key = (
            ProcessKey {
                pid: 42,
                start_time_ms: 7,
            },
            1,
        );
        let (_, _, body) = command_body(&EngineCommand::Manual {
            key,
            action: crate::rules::Action::Terminate {
                grace_seconds: 10.0,
            },
        })
        .expect("terminate");
        assert_eq!(body["action"], "terminate");
        assert_eq!(body["pid"], 42);
        assert_eq!(body["start_time"], 7);
        assert_eq!(body["gpu"], 1);
        assert!(command_body(&EngineCommand::PauseRecording).is_err());
    }
}
