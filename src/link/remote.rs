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
use crate::act::rules::action::{Activity, Outcome};
use crate::engine::sampler::Notify;
use crate::engine::shared::SharedMonitor;
use crate::engine::view::{LeakKey, LeakRecord, SourceStatus};
use crate::engine::EngineCommand;
use crate::model::now_ms;
use crate::model::{ProcessKey, Snapshot, SourceInfo, UnixMs};
use crate::session::LeakInfo;

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
    /// See [`super::checks`].
    fn check(&mut self, now: UnixMs) -> Result<(), String> {
        use super::checks;
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

impl SnapshotReply {
    /// Checks and cleans every value against `now` (this computer's clock) before anything of
    /// it is applied ([`super::checks`]).
    fn check(&mut self, now: UnixMs) -> Result<(), String> {
        use super::checks;
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
/// [`super::checks`]): the snapshot the poller would apply, or why none is.
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
    m.recording = crate::engine::view::RecordingStatus {
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

/// Work for the link's command thread.
#[derive(Debug)]
enum Job {
    Command(EngineCommand),
    ListSessions,
}

/// A download for the link's download thread (never the command thread: a long download
/// must not delay a Kill).
#[derive(Debug)]
struct Download {
    name: String,
    dir: std::path::PathBuf,
}

/// The link to one agent; dropping it stops both threads (they never hold the window).
pub struct RemoteLink {
    url: String,
    health: Arc<Mutex<LinkHealth>>,
    stop: Arc<AtomicBool>,
    commands: mpsc::Sender<Job>,
    downloads: mpsc::Sender<Download>,
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

/// `GET url/path` with the bearer token: its body, at most `limit` bytes (more is an error),
/// when the status is 200.
fn get_body(
    agent: &ureq::Agent,
    url: &str,
    path: &str,
    token: &str,
    limit: u64,
) -> Result<Vec<u8>, String> {
    let mut resp = agent
        .get(format!("{url}{path}"))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(limit)
        .read_to_vec()
        .map_err(|e| format!("the agent's answer could not be read: {e}"))?;
    if status != 200 {
        return Err(refusal(status, &String::from_utf8_lossy(&body)));
    }
    Ok(body)
}

/// Largest answer of `GET /api/v1/snapshot` read, bytes.
pub const MAX_SNAPSHOT_BYTES: u64 = 16 << 20;

fn get_snapshot(agent: &ureq::Agent, url: &str, token: &str) -> Result<SnapshotReply, String> {
    let body = get_body(agent, url, "/api/v1/snapshot", token, MAX_SNAPSHOT_BYTES)?;
    parse_snapshot(&body, now_ms())
}

/// The body of a manual command for the agent's API, or why it cannot go there.
fn command_body(
    c: &EngineCommand,
) -> Result<
    (
        crate::model::history::ProcSeriesKey,
        String,
        serde_json::Value,
    ),
    String,
> {
    let EngineCommand::Manual { key, action } = c else {
        return Err("settings and recording belong to the agent's own configuration; change them on the server".into());
    };
    let mut body = serde_json::json!({
        "pid": key.0.pid,
        "start_time": key.0.start_time_ms,
        "gpu": key.1,
    });
    match action {
        crate::act::rules::Action::Terminate { grace_seconds } => {
            body["action"] = "terminate".into();
            body["grace_seconds"] = (*grace_seconds).into();
        }
        crate::act::rules::Action::Signal { signal } if signal == "SIGKILL" => {
            body["action"] = "kill".into();
        }
        crate::act::rules::Action::Signal { signal } => {
            body["action"] = "signal".into();
            body["signal"] = signal.clone().into();
        }
        crate::act::rules::Action::ReleaseCache => body["action"] = "release_cache".into(),
        crate::act::rules::Action::Park => body["action"] = "park".into(),
        crate::act::rules::Action::Resume => body["action"] = "resume".into(),
        crate::act::rules::Action::LimitMemory { gib } => {
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
            let (url, token, stop, files, notify) = (
                url.clone(),
                token.clone(),
                stop.clone(),
                files.clone(),
                notify.clone(),
            );
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
                                    let info = m.row(&key).map(|r| r.info.clone());
                                    let target = crate::act::rules::eval::Target::process(
                                        key,
                                        info,
                                        None,
                                        crate::model::Origin::Live,
                                    );
                                    m.activity.push_back(Activity {
                                        unix_ms: now_ms(),
                                        rule: "manual".into(),
                                        target,
                                        action,
                                        outcome,
                                        detail,
                                        entry: crate::act::rules::action::Entry::Action,
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
        let downloads = spawn_downloads(&url, &token, &stop, &files, &notify)?;
        Ok(Self {
            url,
            health,
            stop,
            commands: tx,
            downloads,
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
        let _ = self.downloads.send(Download {
            name: name.to_string(),
            dir,
        });
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
pub const MAX_LIST_BYTES: u64 = 16 << 20;

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
                let listed = match &lock().list {
                    Some(Ok(list)) => list.iter().find(|s| s.name == d.name).map(|s| s.size_bytes),
                    _ => None,
                };
                lock().downloading = Some(d.name.clone());
                notify();
                let got = match listed {
                    Some(size) => download(&url, &token, &d.name, size, &d.dir, &stop),
                    None => Err(format!(
                        "{} is not in the agent's list as last read: list the sessions again",
                        d.name
                    )),
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
pub fn copy_listed(
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
    let mut resp = agent
        .get(format!("{url}/api/v1/sessions/{name}"))
        .header("Authorization", format!("Bearer {token}"))
        .call()
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if status != 200 {
        let body = resp
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_string()
            .unwrap_or_default();
        return Err(refusal(status, &body));
    }
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
    fn view(&self) -> Option<std::sync::Arc<crate::engine::view::Monitor>> {
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
            action: crate::act::rules::Action::Terminate {
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
