//! The window's link to its engines: the [`Backend`] that starts this computer's sampler or
//! attaches agents, keeps hosts in the background and carries the window's commands, and how
//! soon a new sample wakes the window.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{connect, notify, task};
use crate::engine::sampler::{SamplerHandle, SourceFactory};
use crate::engine::shared::SharedMonitor;
use crate::engine::view::Monitor;

/// How many agents the window keeps attached in the background besides the one shown.
pub const MAX_BACKGROUND_HOSTS: usize = 8;

/// How soon the window draws after a new sample: at once, and one frame (a non-zero delay,
/// because egui answers a zero-delay request with two frames).
pub const NEW_DATA_FRAME: Duration = Duration::from_millis(1);

/// The most frames a second that new samples cause (the eye needs no more for a graph of
/// minutes; 10 samples a second would otherwise be 10 full redraws).
pub const MAX_DATA_FRAMES_PER_S: u32 = 4;

/// How long after a sample arriving at `now` its frame is drawn, given when the last one was
/// asked for (`last`, updated): at once, or at the next slot of [`MAX_DATA_FRAMES_PER_S`].
pub fn data_frame_delay(
    last: &mut Option<std::time::Instant>,
    now: std::time::Instant,
) -> Duration {
    let gap = Duration::from_secs(1) / MAX_DATA_FRAMES_PER_S;
    match *last {
        // A frame is already due then: it draws this sample too.
        Some(l) if l > now => l - now,
        Some(l) if now - l < gap => {
            *last = Some(l + gap);
            l + gap - now
        }
        _ => {
            *last = Some(now);
            NEW_DATA_FRAME
        }
    }
}

/// What lets the engine's news (a sample, a reply) wake the window, for every link.
#[derive(Debug, Default)]
pub struct WakeGate {
    /// A recorded session is on screen instead of the live data.
    covered: AtomicBool,
    /// Commands sent whose replies have not been taken yet.
    awaiting: std::sync::atomic::AtomicUsize,
}

impl WakeGate {
    /// Whether news wakes the window now: always while the live data is shown, else only
    /// while a reply is awaited.
    pub fn wakes(&self) -> bool {
        !self.covered.load(Ordering::Relaxed) || self.awaiting.load(Ordering::Relaxed) > 0
    }

    /// `n` replies were taken.
    fn answered(&self, n: usize) {
        if n > 0 {
            let _ = self
                .awaiting
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| {
                    Some(a.saturating_sub(n))
                });
        }
    }
}

/// A host the window is attached to but not showing: its link goes on filling its own
/// history, so switching back to it shows everything since it was first opened.
struct Parked {
    /// `None`: this computer.
    host: Option<connect::SavedHost>,
    remote: Option<String>,
    shared: SharedMonitor,
    /// Always `Some` while parked (taken out when shown again: `Parked` has a `Drop`).
    link: Option<Box<dyn crate::link::EngineLink>>,
    agent: Option<Arc<crate::link::remote::RemoteLink>>,
    tunnel: Option<std::process::Child>,
    source: crate::source::SourceKind,
    shown: Arc<AtomicBool>,
}

impl Drop for Parked {
    fn drop(&mut self) {
        crate::link::open::stop_tunnel(self.tunnel.take());
    }
}

/// The sampler behind the window: can be restarted on another source (e.g. the demo).
pub struct Backend {
    /// The state the UI draws.
    pub shared: SharedMonitor,
    /// The engine it talks to: this process's sampler, or an agent over HTTP.
    link: Option<Box<dyn crate::link::EngineLink>>,
    /// The agent's address while the window is attached to one.
    pub remote: Option<String>,
    /// The saved host shown (`None`: this computer, or an agent given by `--connect`).
    host: Option<connect::SavedHost>,
    /// Whether the shown link's samples wake the window (off while it is in the background).
    shown: Arc<AtomicBool>,
    /// Whether the window shows the links' samples at all: not while a recorded session
    /// covers them, when only the replies it waits for wake it.
    wake: Arc<WakeGate>,
    /// Hosts attached in the background (this computer among them while an agent is shown).
    parked: Vec<Parked>,
    /// The `ssh -N -L` tunnel to it, when connected over SSH.
    tunnel: Option<std::process::Child>,
    /// The agent's link, for its session logs.
    agent: Option<Arc<crate::link::remote::RemoteLink>>,
    /// The GPUs this computer samples (the simulated ones, or the driver's).
    pub source: crate::source::SourceKind,
    interval: Duration,
    history_ticks: usize,
    pub(super) repaint: Option<egui::Context>,
    record: crate::engine::RecordTo,
    /// The settings the engine runs with.
    pub settings: crate::engine::settings::Settings,
    /// The window's file jobs (opening, exporting, saving…), whichever engine is shown.
    pub(super) jobs: crate::front::gui::jobs::JobBoard,
    /// Replies given without a link (a detached backend answers a rule test from its state,
    /// an action with a skip).
    unlinked: crate::engine::command::Replies,
}

/// Why an action asked of a window without an engine (nothing sampling, no agent attached)
/// was not done.
pub const NO_ENGINE: &str = "no engine is attached to this window: nothing was sent";

impl Backend {
    /// A backend that samples `factory` (a `source`) on its own thread.
    pub fn start(
        factory: SourceFactory,
        source: crate::source::SourceKind,
        interval: Duration,
        history_ticks: usize,
        ctx: &egui::Context,
    ) -> Self {
        Self::start_with(
            factory,
            source,
            interval,
            history_ticks,
            ctx,
            crate::engine::RecordTo::Off,
            crate::engine::settings::Settings::default(),
        )
    }

    /// Like [`Backend::start`], recording a session log as `record` says, with these settings
    /// for the engine.
    #[allow(clippy::too_many_arguments)]
    pub fn start_with(
        factory: SourceFactory,
        source: crate::source::SourceKind,
        interval: Duration,
        history_ticks: usize,
        ctx: &egui::Context,
        record: crate::engine::RecordTo,
        settings: crate::engine::settings::Settings,
    ) -> Self {
        let mut b = Self::detached(
            Monitor::new(interval.as_millis() as u64, history_ticks),
            source,
        );
        b.settings = settings;
        b.interval = interval;
        b.history_ticks = history_ticks;
        b.repaint = Some(ctx.clone());
        b.jobs = crate::front::gui::jobs::JobBoard::new(task::repaint(ctx));
        b.record = record;
        b.spawn(factory);
        b
    }

    /// A window attached to the agent at `url` from the start (`--connect`).
    ///
    /// # Errors
    /// A malformed address or no thread.
    pub fn attach(
        url: &str,
        token: String,
        history_ticks: usize,
        ctx: &egui::Context,
    ) -> Result<Self, String> {
        let mut b = Self::detached(
            Monitor::new(1000, history_ticks),
            crate::source::SourceKind::Nvml,
        );
        b.repaint = Some(ctx.clone());
        b.jobs = crate::front::gui::jobs::JobBoard::new(task::repaint(ctx));
        b.connect_remote(url, token)?;
        Ok(b)
    }

    /// A backend over a monitor that something else fills (tests, replays): no thread. It
    /// answers an action with a skip ([`NO_ENGINE`]) and a rule test from the state shown.
    pub fn detached(monitor: Monitor, source: crate::source::SourceKind) -> Self {
        let interval = Duration::from_millis(monitor.interval_ms);
        let history_ticks = monitor.history.capacity();
        Self {
            shared: crate::engine::shared::Shared::new(monitor),
            link: None,
            remote: None,
            host: None,
            shown: Arc::new(AtomicBool::new(true)),
            wake: Arc::new(WakeGate::default()),
            parked: Vec::new(),
            tunnel: None,
            agent: None,
            source,
            interval,
            history_ticks,
            repaint: None,
            jobs: crate::front::gui::jobs::JobBoard::default(),
            unlinked: crate::engine::command::Replies::default(),
            record: crate::engine::RecordTo::Off,
            settings: crate::engine::settings::Settings::default(),
        }
    }

    /// A wake-up for a new link's samples, and its switch: a link in the background does
    /// not wake the window.
    fn notifier(&self) -> (Arc<AtomicBool>, crate::engine::sampler::Notify) {
        let shown = Arc::new(AtomicBool::new(true));
        let ctx = self.repaint.clone();
        let on = shown.clone();
        let gate = self.wake.clone();
        let last = std::sync::Mutex::new(None::<std::time::Instant>);
        let notify: crate::engine::sampler::Notify = Arc::new(move || {
            if let (Some(c), true) = (&ctx, on.load(Ordering::Relaxed) && gate.wakes()) {
                // Not `request_repaint()`: egui answers each of those with two frames; a new
                // sample needs one. At most [`MAX_DATA_FRAMES_PER_S`] of them a second: a
                // sample arriving sooner is drawn with the next one or at the next slot.
                let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
                c.request_repaint_after(data_frame_delay(&mut last, std::time::Instant::now()));
            }
        });
        (shown, notify)
    }

    fn spawn(&mut self, factory: SourceFactory) {
        let (shown, notify) = self.notifier();
        self.shown = shown;
        let engine = crate::engine::EngineBuilder::new(
            self.shared.clone(),
            self.interval.as_millis() as u64,
        )
        .record(self.record.clone())
        .settings(&self.settings)
        .options(crate::engine::EngineOptions {
            // Alerts become desktop notifications.
            alerts: Some(notify::subscriber(self.shared.clone())),
            // The engine keeps the sessions folder within the retention limits (at
            // start and every hour), never deleting a log that is open for writing.
            retention_dir: match &self.record {
                crate::engine::RecordTo::Dir(d) => Some(d.clone()),
                _ => None,
            },
        });
        match SamplerHandle::start(factory, engine, notify) {
            Ok(h) => self.link = Some(Box::new(h)),
            Err(e) => {
                crate::engine::stages::publish::source_failed(
                    &self.shared,
                    format!("could not start the sampler thread: {e}"),
                );
            }
        }
    }

    /// Applies new settings to this computer's engine (and to later restarts), also while an
    /// agent is shown (an agent runs on its own settings).
    pub fn apply_settings(&mut self, s: crate::engine::settings::Settings) {
        self.settings = s.clone();
        let c = crate::engine::EngineCommand::ApplySettings(Box::new(s));
        if self.remote.is_none() {
            let _ = self.send(c);
        } else if let Some(p) = self.parked.iter().find(|p| p.remote.is_none()) {
            if let Some(l) = &p.link {
                l.send(c);
            }
        }
    }

    /// The saved host shown (`None`: this computer, or an agent given by `--connect`).
    pub fn shown_host(&self) -> Option<&connect::SavedHost> {
        self.host.as_ref()
    }

    /// The hosts attached now, shown or in the background (`None`: this computer).
    pub fn live_hosts(&self) -> Vec<Option<connect::SavedHost>> {
        let mut v: Vec<_> = self.parked.iter().map(|p| p.host.clone()).collect();
        if self.link.is_some() {
            v.push(self.host.clone());
        }
        v
    }

    /// Puts the shown link in the background, still sampling.
    fn park_current(&mut self) {
        let Some(link) = self.link.take() else {
            return;
        };
        self.shown.store(false, Ordering::Relaxed);
        // Its replies are taken when it is shown again: none is awaited meanwhile.
        self.wake.awaiting.store(0, Ordering::Relaxed);
        self.parked.push(Parked {
            host: self.host.take(),
            remote: self.remote.take(),
            shared: self.shared.clone(),
            link: Some(link),
            agent: self.agent.take(),
            tunnel: self.tunnel.take(),
            source: self.source,
            shown: self.shown.clone(),
        });
        // Bounded: the agent left longest ago goes first (this computer always stays).
        while self.parked.iter().filter(|p| p.remote.is_some()).count() > MAX_BACKGROUND_HOSTS {
            if let Some(i) = self.parked.iter().position(|p| p.remote.is_some()) {
                self.parked.remove(i);
            }
        }
    }

    /// Shows `host` (`None`: this computer) when it is attached in the background; the
    /// host shown until now goes on sampling in the background. False when `host` is not
    /// attached.
    pub fn switch_to(&mut self, host: Option<&connect::SavedHost>) -> bool {
        let Some(i) = self.parked.iter().position(|p| p.host.as_ref() == host) else {
            return false;
        };
        let mut p = self.parked.remove(i);
        self.park_current();
        p.shown.store(true, Ordering::Relaxed);
        self.host = p.host.take();
        self.remote = p.remote.take();
        self.shared = p.shared.clone();
        self.agent = p.agent.take();
        self.tunnel = p.tunnel.take();
        self.source = p.source;
        self.shown = p.shown.clone();
        self.link = p.link.take();
        if let Some(c) = &self.repaint {
            c.request_repaint();
        }
        true
    }

    /// Leaves the agent shown (its link closes) and shows this computer again when it is
    /// attached in the background. False when it is not (the caller starts it).
    pub fn disconnect(&mut self) -> bool {
        if self.remote.is_some() {
            self.drop_shown_agent();
        }
        self.switch_to(None)
    }

    /// Lets go of the agent `host` where it is attached in the background (its link and
    /// tunnel stop); true when it was.
    pub fn drop_background(&mut self, host: &connect::SavedHost) -> bool {
        let before = self.parked.len();
        self.parked.retain(|p| p.host.as_ref() != Some(host));
        self.parked.len() != before
    }

    /// Sends a request to the engine shown (this computer's or an agent's): its id, whose
    /// reply comes back through [`Backend::take_replies`].
    pub fn send(
        &self,
        c: crate::engine::EngineCommand,
    ) -> Option<crate::engine::command::CommandId> {
        if let Some(l) = &self.link {
            self.wake.awaiting.fetch_add(1, Ordering::Relaxed);
            return Some(l.send(c));
        }
        // Detached (no engine): a rule test is answered from the state shown, an action with
        // a skip (nothing here could carry it out).
        let id = crate::engine::command::CommandId::next();
        if let crate::engine::EngineCommand::Manual { .. } = &c {
            self.unlinked.push(crate::engine::command::CommandReply {
                id,
                what: c.label(),
                answer: crate::engine::command::Answer::new(
                    crate::model::outcome::Outcome::Skipped,
                    NO_ENGINE,
                ),
            });
            return Some(id);
        }
        let crate::engine::EngineCommand::TestRule { rule, safety } = &c else {
            return None;
        };
        let safety = safety.clone().unwrap_or(crate::act::rules::action::Safety {
            global_dry_run: true,
            protected: Vec::new(),
            remote: crate::act::rules::action::RemotePolicy::default(),
        });
        let m = self.shared.read().ok()?;
        self.unlinked.push(crate::engine::command::CommandReply {
            id,
            what: c.label(),
            answer: crate::engine::command::test_rule_answer(rule, &m, &safety),
        });
        Some(id)
    }

    /// The replies of the engine shown since the last call.
    pub fn take_replies(&self) -> Vec<crate::engine::command::CommandReply> {
        let mut r = self.unlinked.take();
        if let Some(l) = &self.link {
            let got = l.take_replies();
            self.wake.answered(got.len());
            r.extend(got);
        }
        r
    }

    /// Tells whether a recorded session covers the live data (`true`): then the links'
    /// samples no longer wake the window (a still session draws no frame), only the replies
    /// to its commands do.
    pub fn set_covered(&self, covered: bool) {
        self.wake.covered.store(covered, Ordering::Relaxed);
    }

    /// While an agent is shown: its past leaks as read so far (asked for on the first call;
    /// `Some(None)` until they arrive). None for this computer.
    pub fn agent_past(&self) -> Option<Option<Arc<crate::engine::replay::PastEvents>>> {
        self.agent.as_ref().map(|a| a.past_or_ask())
    }

    /// Carries out a file job request of the window ([`crate::front::gui::jobs::JobBoard`]): in this
    /// process, beside the link, whichever engine (local or an agent's) is shown.
    pub fn job(&self, c: crate::front::gui::jobs::JobCommand) {
        self.jobs.command(c);
    }

    /// The window's jobs: read every frame, beside [`Backend::view`].
    pub fn jobs(&self) -> &crate::front::gui::jobs::JobBoard {
        &self.jobs
    }

    /// What the window draws: the link's view of its engine (a copy made once per change);
    /// without a link (a detached backend in tests), the shared state's own copy.
    pub fn view(&self) -> Option<Arc<crate::engine::view::Monitor>> {
        match &self.link {
            Some(l) => l.view(),
            None => self.shared.view(),
        }
    }

    /// How the link to the engine is doing (local, or an agent connected or lost).
    pub fn health(&mut self) -> crate::link::LinkHealth {
        let h = self
            .link
            .as_ref()
            .map_or(crate::link::LinkHealth::Local, |l| l.health());
        // A tunnel that ended says why (a refused key, an unknown host).
        if let (crate::link::LinkHealth::Disconnected { url, since_ms, .. }, Some(t)) =
            (&h, self.tunnel.as_mut())
        {
            if let Ok(Some(status)) = t.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = t.stderr.take() {
                    use std::io::Read;
                    let _ = (&mut e).take(2000).read_to_string(&mut err);
                }
                return crate::link::LinkHealth::Disconnected {
                    url: url.clone(),
                    since_ms: *since_ms,
                    error: format!("ssh ended ({status}): {}", err.trim()),
                };
            }
        }
        h
    }

    /// Attaches the window to `host`, opened off the UI thread by
    /// [`crate::link::open::open_host`]; a connection to the same host kept in the background
    /// is replaced.
    ///
    /// # Errors
    /// A sentence for the connect window; the window stays as it was (a tunnel is stopped).
    pub fn attach_opened(
        &mut self,
        host: &connect::SavedHost,
        opened: crate::link::open::OpenedHost,
    ) -> Result<(), String> {
        self.parked.retain(|p| p.host.as_ref() != Some(host));
        if self.host.as_ref() == Some(host) {
            self.drop_shown_agent();
        }
        let crate::link::open::OpenedHost { url, token, tunnel } = opened;
        if let Err(e) = self.connect_remote(&url, token) {
            crate::link::open::stop_tunnel(tunnel);
            return Err(e);
        }
        if tunnel.is_some() {
            self.tunnel = tunnel;
            self.remote = Some(format!("{} via {}", host.url, host.ssh));
        }
        self.host = Some(host.clone());
        Ok(())
    }

    /// The attached agent's session logs and downloads (`None`: not attached).
    pub fn agent_files(&self) -> Option<crate::link::remote::RemoteFiles> {
        self.agent.as_ref().map(|a| a.files())
    }

    /// Asks the attached agent for its session logs.
    pub fn list_agent_sessions(&self) {
        if let Some(a) = &self.agent {
            a.list_sessions();
        }
    }

    /// Downloads one of the attached agent's session logs into this computer's sessions
    /// folder (`from-agents/HOST_PORT/`, one folder per agent), to open it read-only.
    pub fn download_agent_session(&self, name: &str) {
        if let Some(a) = &self.agent {
            let base = crate::session::default_dir().join("from-agents");
            a.download(name, a.downloads_folder(&base));
        }
    }

    /// Downloads finished since the last call.
    pub fn take_agent_downloads(&self) -> Vec<(String, Result<std::path::PathBuf, String>)> {
        self.agent
            .as_ref()
            .map(|a| a.take_done())
            .unwrap_or_default()
    }

    /// Closes the agent shown (its link, and its tunnel when it has one).
    fn drop_shown_agent(&mut self) {
        self.link = None;
        self.agent = None;
        self.remote = None;
        self.host = None;
        crate::link::open::stop_tunnel(self.tunnel.take());
    }

    /// Attaches the window to the agent at `url` and shows it (its history starts now); the
    /// host shown until now goes on sampling in the background.
    ///
    /// # Errors
    /// A malformed address or no thread; the window stays as it was.
    pub fn connect_remote(&mut self, url: &str, token: String) -> Result<(), String> {
        let shared = crate::engine::shared::Shared::new(Monitor::new(
            self.interval.as_millis() as u64,
            self.history_ticks,
        ));
        let (shown, notify) = self.notifier();
        let link = Arc::new(crate::link::remote::RemoteLink::connect(
            url,
            token,
            shared.clone(),
            notify,
        )?);
        // The agent's leaks and forecasts notify here as this computer's would.
        link.alert_to(
            notify::subscriber(shared.clone()),
            self.settings.notifications.leaks,
        );
        self.park_current();
        self.shown = shown;
        self.host = None;
        self.remote = Some(link.url().to_string());
        self.agent = Some(link.clone());
        self.link = Some(Box::new(link));
        self.shared = shared;
        self.source = crate::source::SourceKind::Nvml;
        Ok(())
    }

    /// Drops the current source and its history and starts over on `source` (this
    /// computer; one kept in the background is dropped too).
    pub fn restart(&mut self, source: crate::source::SourceKind) {
        self.drop_shown_agent();
        self.parked.retain(|p| p.remote.is_some());
        self.shared = crate::engine::shared::Shared::new(Monitor::new(
            self.interval.as_millis() as u64,
            self.history_ticks,
        ));
        self.source = source;
        self.spawn(source.factory());
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        crate::link::open::stop_tunnel(self.tunnel.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten samples a second ask for at most four frames a second, each sample drawn within
    /// a quarter of a second.
    #[test]
    fn new_samples_ask_for_at_most_four_frames_a_second() {
        let t0 = std::time::Instant::now();
        let mut last = None;
        let mut frames: Vec<std::time::Instant> = Vec::new();
        for i in 0..100u32 {
            let now = t0 + Duration::from_millis(100) * i;
            let at = now + data_frame_delay(&mut last, now);
            assert!(at - now <= Duration::from_millis(250), "sample {i} waits");
            if frames.last().is_none_or(|f| *f != at) {
                frames.push(at);
            }
        }
        for w in frames.windows(2) {
            assert!(
                w[1] - w[0] >= Duration::from_millis(249),
                "{:?}",
                w[1] - w[0]
            );
        }
        assert!(frames.len() <= 41, "{} frames in 10 s", frames.len());
    }
}
