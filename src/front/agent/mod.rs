//! `vramwarden agent`: the engine without a window, for GPU servers.
//!
//! The same sampler thread and engine as the window and `record` (sessions with retention in the
//! default folder, rules, leak detection), plus an HTTP front on its own thread ([`server`],
//! with limits on headers, bodies, connections and time; routing in [`http`]): `/metrics`
//! for Prometheus ([`metrics`]), `/healthz` and `/-/ready`, and a JSON API for a remote window
//! guarded by a bearer token ([`api`], [`crate::link::token`]). It stops cleanly on SIGTERM or SIGINT
//! (the session log is closed) and tells systemd when it is ready and, with `WatchdogSec=`,
//! that the sampler makes progress ([`sdnotify`]).

pub(crate) mod api;
pub(crate) mod api_view;
pub(crate) mod body;
pub(crate) mod conns;
pub(crate) mod http;
pub mod metrics;
pub(crate) mod peer;
mod sdnotify;
pub(crate) mod server;
pub(crate) mod state;
pub mod stats;

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::engine::sampler::SamplerHandle;
use crate::engine::shared::SharedMonitor;
use crate::engine::view::{Monitor, SourceStatus};
use crate::engine::{EngineBuilder, EngineOptions, RecordTo};
use crate::front::headless::CliError;
pub(crate) use state::AgentState;

/// History the agent keeps in memory (the session log has the rest).
const HISTORY: Duration = Duration::from_secs(3600);

/// What `vramwarden agent` was asked to do.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The GPUs it samples.
    pub source: crate::source::SourceKind,
    /// Sampling interval (default: the settings).
    pub interval: Option<Duration>,
    /// The settings file.
    pub config: Option<PathBuf>,
    /// Where to listen.
    pub listen: SocketAddr,
    /// Do not record session logs.
    pub no_record: bool,
    /// The bearer token file (default: beside the settings file).
    pub token_file: Option<PathBuf>,
    /// Bound on per-process series in `/metrics`.
    pub max_processes: usize,
    /// Remote commands may act on other users' processes (the engine still needs root).
    pub remote_other_users: bool,
}

fn failure(m: &Monitor) -> Option<CliError> {
    if let SourceStatus::Failed(e) = &m.status {
        if m.ticks > 0 || e.starts_with("internal error") {
            return Some(CliError::Failed(e.clone()));
        }
        return Some(crate::source::SourceError::Unavailable(e.clone()).into());
    }
    None
}

/// A running agent: the sampler thread and the HTTP threads.
pub struct Agent {
    server: server::Server,
    /// What the HTTP threads share (the monitor, counters, the engine's command channel).
    pub state: Arc<AgentState>,
    /// The address actually bound (port 0 picks a free one).
    pub addr: SocketAddr,
}

/// Starts the sampler (on `factory`'s source) and the HTTP threads. `wake` receives a byte on
/// the first sample and on a source failure.
///
/// # Errors
/// A broken settings file, an unusable token file, an address that cannot be bound.
pub fn start(
    opts: &AgentOptions,
    factory: crate::engine::sampler::SourceFactory,
    wake: Option<std::os::unix::net::UnixStream>,
) -> Result<Agent, CliError> {
    let settings = crate::front::headless::load_settings(opts.config.as_deref())?;
    let interval = opts
        .interval
        .unwrap_or(Duration::from_millis(settings.sampling.interval_ms));
    let token = load_token(opts)?;
    let listener = server::bind(opts.listen)
        .map_err(|e| CliError::Failed(format!("cannot listen on {}: {e}", opts.listen)))?;
    let addr = listener.local_addr().unwrap_or(opts.listen);
    if let Some(w) = server::exposure_warning(addr) {
        tracing::warn!("{w}");
    }
    let shared: SharedMonitor = crate::engine::shared::Shared::new(Monitor::new(
        interval.as_millis() as u64,
        crate::front::headless::history_ticks(HISTORY, interval),
    ));
    let stats = Arc::new(stats::AgentStats::default());
    let notify = sampler_notice(shared.clone(), stats.clone(), interval, wake);
    let record = !opts.no_record && settings.sessions.record;
    let sessions_dir = crate::session::default_dir();
    let engine = agent_engine(
        shared.clone(),
        interval,
        &settings,
        opts,
        record,
        &sessions_dir,
    );
    let handle = SamplerHandle::start(factory, engine, notify)?;
    let replies = handle.replies();
    let state = Arc::new(AgentState {
        shared,
        stats,
        token,
        sessions_dir,
        max_processes: opts.max_processes,
        past: crate::engine::past_cache::PastCache::new(),
        loopback_only: addr.ip().is_loopback(),
        sampler: Mutex::new(Some(handle)),
        stopping: AtomicBool::new(false),
        replies,
        accepted: Mutex::new(std::collections::VecDeque::new()),
    });
    let server = server::Server::start(listener, state.clone())?;
    tracing::info!("listening on http://{addr} (/metrics, /healthz, /api/v1/…)");
    Ok(Agent {
        server,
        state,
        addr,
    })
}

/// The API token from `--token-file` (else the default file beside the settings), made and
/// saved there when there is none yet.
fn load_token(opts: &AgentOptions) -> Result<String, CliError> {
    let token_path = match &opts.token_file {
        Some(p) => p.clone(),
        None => default_token_path(opts.config.as_deref())?,
    };
    let (token, created) =
        crate::link::token::load_or_create(&token_path).map_err(CliError::Failed)?;
    tracing::info!(
        "API token {} {}",
        if created { "created in" } else { "read from" },
        token_path.display()
    );
    Ok(token)
}

/// The token file beside the settings file; refused where that file was named (`--config`,
/// `VRAMWARDEN_CONFIG`) and is missing: its folder is most often a typo's (a token was made at
/// `/agent.token` for `--config /nonexistent.toml`).
fn default_token_path(config: Option<&std::path::Path>) -> Result<PathBuf, CliError> {
    let c = crate::engine::settings::config_path(config);
    if crate::engine::settings::config_named(config) && crate::engine::settings::file_missing(&c) {
        return Err(CliError::Failed(format!(
            "{}: no such settings file, and the API token's default place is beside it: \
             name an existing settings file, or the token's file with --token-file",
            c.display()
        )));
    }
    Ok(crate::link::token::default_path(config))
}

/// The sampler's notice after each sample: counts it in `stats`, tells systemd's watchdog of
/// the progress, and writes to `wake` on the first sample and on a source failure (or when the
/// monitor's lock is poisoned).
fn sampler_notice(
    watched: SharedMonitor,
    counted: Arc<stats::AgentStats>,
    interval: Duration,
    wake: Option<std::os::unix::net::UnixStream>,
) -> crate::engine::sampler::Notify {
    let watchdog = sdnotify::Watchdog::from_env(interval);
    Arc::new(move || {
        let wake_now = watched.read().map_or(true, |m| {
            counted.observe(&m);
            // Progress for systemd's watchdog: a new sample arrived.
            watchdog.progress(m.ticks);
            m.ticks == 1 || matches!(m.status, SourceStatus::Failed(_))
        });
        if let (true, Some(w)) = (wake_now, &wake) {
            let _ = std::io::Write::write_all(&mut &*w, b"n");
        }
    })
}

/// The agent's engine: recording into `sessions_dir` when `record` (kept within the
/// retention limits), the settings' rules, remote commands as `opts` allows them, and the
/// problems it reports said on stderr.
fn agent_engine(
    shared: SharedMonitor,
    interval: Duration,
    settings: &crate::engine::settings::Settings,
    opts: &AgentOptions,
    record: bool,
    sessions_dir: &std::path::Path,
) -> EngineBuilder {
    EngineBuilder::new(shared, interval.as_millis() as u64)
        .record(if record {
            RecordTo::Dir(sessions_dir.to_path_buf())
        } else {
            RecordTo::Off
        })
        .settings(settings)
        .remote(crate::act::rules::action::RemotePolicy {
            other_users: opts.remote_other_users,
        })
        .options(EngineOptions {
            // The problems the engine reports are said on stderr (the journal) as they happen.
            alerts: Some(crate::front::report_words::stderr_sink()),
            retention_dir: record.then(|| sessions_dir.to_path_buf()),
        })
}

impl Agent {
    /// Stops the HTTP front, then the sampler (closing the session log); false when the
    /// sampler did not stop within 10 s.
    pub fn stop(self) -> bool {
        self.state.stopping.store(true, Ordering::Relaxed);
        self.server.stop();
        let handle = self.state.sampler.lock().ok().and_then(|mut s| s.take());
        handle.is_none_or(|h| h.stop(Duration::from_secs(10)))
    }
}

/// Runs the agent until SIGTERM / SIGINT.
///
/// # Errors
/// A broken settings file, an unusable token file, an address that cannot be bound, a GPU
/// source that cannot be opened (exit code 3 without a driver).
pub fn run(opts: AgentOptions) -> Result<(), CliError> {
    use std::os::unix::net::UnixStream;
    let (mut wake_rx, wake_tx) = UnixStream::pair()?;
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The flag says which wake-up was a signal; the pipe wakes the main thread.
        signal_hook::flag::register(sig, signalled.clone())?;
        signal_hook::low_level::pipe::register(sig, wake_tx.try_clone()?)?;
    }
    let statistics = crate::host::cost::on_signal(&wake_tx)?;
    let agent = start(&opts, opts.source.factory(), Some(wake_tx))?;
    let shared = agent.state.shared.clone();
    let result = serve_until_signalled(&mut wake_rx, &signalled, &statistics, &shared);
    sdnotify::notify("STOPPING=1");
    tracing::info!("stopping");
    crate::host::cost::log_report();
    if !agent.stop() {
        tracing::warn!("the sampler did not stop within 10 s");
    }
    say_recording(&shared);
    result
}

/// Sleeps on `wake_rx` until a signal (`signalled` set) or, before the first sample, a source
/// failure (an error); tells systemd the agent is ready at the first sample. Wake-ups for
/// statistics (`statistics` set) go back to sleep.
fn serve_until_signalled(
    wake_rx: &mut std::os::unix::net::UnixStream,
    signalled: &AtomicBool,
    statistics: &AtomicBool,
    shared: &SharedMonitor,
) -> Result<(), CliError> {
    let mut byte = [0u8; 16];
    let mut ready = false;
    loop {
        match wake_rx.read(&mut byte) {
            Ok(_) => {
                if signalled.load(Ordering::Relaxed) {
                    break Ok(());
                }
                if crate::host::cost::asked(statistics) {
                    continue;
                }
                let Ok(m) = shared.read() else {
                    break Err(CliError::Failed(
                        "internal error: the engine thread panicked".into(),
                    ));
                };
                // Before the first sample a failure ends the agent (no driver: exit 3, and
                // systemd's Restart= tries again); later it shows in /healthz.
                if !ready {
                    if let Some(e) = failure(&m) {
                        break Err(e);
                    }
                    if m.ticks > 0 {
                        ready = true;
                        drop(m);
                        sdnotify::notify("READY=1");
                        tracing::info!("ready");
                        crate::host::cost::restart();
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e.into()),
        }
    }
}

/// Says in the log how recording ended: its error, if any, and the session log written.
fn say_recording(shared: &SharedMonitor) {
    if let Ok(m) = shared.read() {
        if let Some(e) = &m.recording.error {
            tracing::error!("{e}");
        }
        if let Some(p) = &m.recording.path {
            tracing::info!(
                "session log {} ({} samples)",
                p.display(),
                m.recording.samples
            );
        }
    }
}
