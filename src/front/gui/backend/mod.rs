//! The window's link to its engines: the [`Backend`] that starts this computer's engine
//! ([`local`]) or attaches agents ([`remote`]), keeps hosts in the background ([`hosts`]) and
//! carries the window's commands, and how soon a new sample wakes the window ([`wake`]). An
//! agent's own abilities (its session logs, its past leaks) are reached through the link's
//! [`crate::link::files::AgentFiles`] capability, never the concrete link.

pub(crate) mod hosts;
pub(crate) mod local;
pub(crate) mod remote;
pub(crate) mod wake;

use std::sync::Arc;
use std::time::Duration;

pub use local::NO_ENGINE;
pub(crate) use wake::WakeGate;
pub use wake::NEW_DATA_FRAME;

use super::{connect, task};
use crate::engine::sampler::SourceFactory;
use crate::engine::shared::SharedMonitor;
use crate::engine::view::Monitor;
use crate::link::files::AgentFiles;

/// The engines behind the window: the one shown (this computer's, restartable on another
/// source, or an agent's) and those kept in the background.
pub struct Backend {
    /// The engine shown.
    shown: hosts::Attached,
    /// The hosts attached in the background.
    hosts: hosts::Hosts,
    /// Whether the window shows the links' samples at all: not while a recorded session
    /// covers them, when only the replies it waits for wake it.
    wake: Arc<WakeGate>,
    interval: Duration,
    history_ticks: usize,
    pub(super) repaint: Option<egui::Context>,
    record: crate::engine::RecordTo,
    /// The settings the engine runs with.
    pub settings: crate::engine::settings::Settings,
    /// The window's file jobs (opening, exporting, saving…), whichever engine is shown.
    pub(super) jobs: crate::link::jobs::JobBoard,
    /// Replies given without a link (a detached backend answers a rule test from its state,
    /// an action with a skip).
    unlinked: crate::engine::command::Replies,
    /// The window's own notices (desktop notifications unavailable), whichever engine is
    /// shown.
    notices: crate::front::gui::notices::OwnNotices,
    /// Why the driver's library cannot be loaded here, once asked (`None` inside: it can).
    no_driver: std::sync::OnceLock<Option<String>>,
}

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
    pub(crate) fn start_with(
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
        b.jobs = crate::link::jobs::JobBoard::new(task::repaint(ctx));
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
        b.jobs = crate::link::jobs::JobBoard::new(task::repaint(ctx));
        b.connect_remote(url, token)?;
        Ok(b)
    }

    /// A backend over a monitor that something else fills (tests, replays): no thread. It
    /// answers an action with a skip ([`NO_ENGINE`]) and a rule test from the state shown.
    pub fn detached(monitor: Monitor, source: crate::source::SourceKind) -> Self {
        let interval = Duration::from_millis(monitor.interval_ms);
        let history_ticks = monitor.history.capacity();
        Self {
            shown: hosts::Attached::unlinked(crate::engine::shared::Shared::new(monitor), source),
            hosts: hosts::Hosts::default(),
            wake: Arc::new(WakeGate::default()),
            interval,
            history_ticks,
            repaint: None,
            jobs: crate::link::jobs::JobBoard::default(),
            unlinked: crate::engine::command::Replies::default(),
            record: crate::engine::RecordTo::Off,
            settings: crate::engine::settings::Settings::default(),
            notices: crate::front::gui::notices::OwnNotices::default(),
            no_driver: std::sync::OnceLock::new(),
        }
    }

    /// The window's own notices, which its status bar shows beside the engine's reports.
    pub(crate) fn own_notices(&self) -> &crate::front::gui::notices::OwnNotices {
        &self.notices
    }

    /// The state the UI draws (the shown engine's).
    pub fn shared(&self) -> &SharedMonitor {
        &self.shown.shared
    }

    /// The agent's address while the window is attached to one (`None`: this computer).
    pub(crate) fn remote(&self) -> Option<&str> {
        self.shown.remote.as_deref()
    }

    /// The GPUs this computer samples (the simulated ones, or the driver's).
    pub(crate) fn source(&self) -> crate::source::SourceKind {
        self.shown.source
    }

    /// A fresh state for a new engine, as long as the window's history.
    fn fresh_state(&self) -> SharedMonitor {
        crate::engine::shared::Shared::new(Monitor::new(
            self.interval.as_millis() as u64,
            self.history_ticks,
        ))
    }

    /// Starts this computer's engine on `factory` and shows it.
    fn spawn(&mut self, factory: SourceFactory) {
        let (shown, notify) = wake::notifier(self.repaint.clone(), self.wake.clone());
        self.shown.shown = shown;
        self.shown.link = local::LocalEngine {
            shared: &self.shown.shared,
            interval_ms: self.interval.as_millis() as u64,
            record: &self.record,
            settings: &self.settings,
            notices: &self.notices,
        }
        .start(factory, notify);
    }

    /// Applies new settings to this computer's engine (and to later restarts), also while an
    /// agent is shown (an agent runs on its own settings).
    pub(crate) fn apply_settings(&mut self, s: crate::engine::settings::Settings) {
        self.settings = s.clone();
        let c = crate::engine::EngineCommand::ApplySettings(Box::new(s));
        if self.shown.remote.is_none() {
            let _ = self.send(c);
        } else if let Some(l) = self.hosts.local() {
            l.send(c);
        }
    }

    /// The saved host shown (`None`: this computer, or an agent given by `--connect`).
    pub(crate) fn shown_host(&self) -> Option<&connect::SavedHost> {
        self.shown.host.as_ref()
    }

    /// The hosts attached now, shown or in the background (`None`: this computer).
    pub fn live_hosts(&self) -> Vec<Option<connect::SavedHost>> {
        let mut v: Vec<_> = self.hosts.listed().collect();
        if self.shown.link.is_some() {
            v.push(self.shown.host.clone());
        }
        v
    }

    /// Puts the shown link in the background, still sampling.
    fn park_current(&mut self) {
        if self.shown.link.is_none() {
            return;
        }
        // Its replies are taken when it is shown again: none is awaited meanwhile.
        self.wake.forget_awaited();
        let placeholder = hosts::Attached::unlinked(self.shown.shared.clone(), self.shown.source);
        let shown = std::mem::replace(&mut self.shown, placeholder);
        self.shown = self.hosts.park(shown);
    }

    /// Shows `host` (`None`: this computer) when it is attached in the background; the
    /// host shown until now goes on sampling in the background. False when `host` is not
    /// attached.
    pub(crate) fn switch_to(&mut self, host: Option<&connect::SavedHost>) -> bool {
        let Some(p) = self.hosts.take(host) else {
            return false;
        };
        self.park_current();
        self.shown = p;
        if let Some(c) = &self.repaint {
            c.request_repaint();
        }
        true
    }

    /// Leaves the agent shown (its link closes) and shows this computer again when it is
    /// attached in the background. False when it is not (the caller starts it).
    pub(crate) fn disconnect(&mut self) -> bool {
        if self.shown.remote.is_some() {
            self.shown.close();
        }
        self.switch_to(None)
    }

    /// Lets go of the agent `host` where it is attached in the background (its link and
    /// tunnel stop); true when it was.
    pub(crate) fn drop_background(&mut self, host: &connect::SavedHost) -> bool {
        self.hosts.drop_host(host)
    }

    /// Sends a request to the engine shown (this computer's or an agent's): its id, whose
    /// reply comes back through [`Backend::take_replies`].
    pub(crate) fn send(
        &self,
        c: crate::engine::EngineCommand,
    ) -> Option<crate::engine::command::CommandId> {
        match &self.shown.link {
            Some(l) => {
                self.wake.sent();
                Some(l.send(c))
            }
            None => local::answer_unlinked(&c, &self.shown.shared, &self.unlinked),
        }
    }

    /// The replies of the engine shown since the last call.
    pub(crate) fn take_replies(&self) -> Vec<crate::engine::command::CommandReply> {
        let mut r = self.unlinked.take();
        if let Some(l) = &self.shown.link {
            let got = l.take_replies();
            self.wake.answered(got.len());
            r.extend(got);
        }
        r
    }

    /// Tells whether a recorded session covers the live data (`true`): then the links'
    /// samples no longer wake the window (a still session draws no frame), only the replies
    /// to its commands do.
    pub(crate) fn set_covered(&self, covered: bool) {
        self.wake.cover(covered);
    }

    /// The shown agent's files, when an agent is shown and its link has them.
    fn agent(&self) -> Option<&dyn AgentFiles> {
        self.shown.link.as_deref()?.agent_files()
    }

    /// While an agent is shown: its past leaks as read so far (asked for on the first call;
    /// `Some(None)` until they arrive). None for this computer.
    pub(crate) fn agent_past(&self) -> Option<Option<Arc<crate::engine::replay::PastEvents>>> {
        self.agent().map(|a| a.past_or_ask())
    }

    /// Carries out a file job request of the window ([`crate::link::jobs::JobBoard`]): in this
    /// process, beside the link, whichever engine (local or an agent's) is shown.
    pub(crate) fn job(&self, c: crate::link::jobs::JobCommand) {
        self.jobs.command(c);
    }

    /// The window's jobs: read every frame, beside [`Backend::view`].
    pub(crate) fn jobs(&self) -> &crate::link::jobs::JobBoard {
        &self.jobs
    }

    /// What the window draws: the link's view of its engine (a copy made once per change);
    /// without a link (a detached backend in tests), the shared state's own copy.
    pub fn view(&self) -> Option<Arc<crate::engine::view::Monitor>> {
        match &self.shown.link {
            Some(l) => l.view(),
            None => self.shown.shared.view(),
        }
    }

    /// How the link to the engine is doing (local, or an agent connected or lost; a tunnel
    /// that ended says why).
    pub fn health(&mut self) -> crate::link::LinkHealth {
        let h = self
            .shown
            .link
            .as_ref()
            .map_or(crate::link::LinkHealth::Local, |l| l.health());
        remote::with_tunnel(h, self.shown.tunnel.as_mut())
    }

    /// Attaches the window to `host`, opened off the UI thread by
    /// [`crate::link::open::open_host`]; a connection to the same host kept in the background
    /// is replaced.
    ///
    /// # Errors
    /// A sentence for the connect window; the window stays as it was (a tunnel is stopped).
    pub(crate) fn attach_opened(
        &mut self,
        host: &connect::SavedHost,
        opened: crate::link::open::OpenedHost,
    ) -> Result<(), String> {
        self.hosts.drop_host(host);
        if self.shown.host.as_ref() == Some(host) {
            self.shown.close();
        }
        let crate::link::open::OpenedHost { url, token, tunnel } = opened;
        if let Err(e) = self.connect_remote(&url, token) {
            crate::link::open::stop_tunnel(tunnel);
            return Err(e);
        }
        if tunnel.is_some() {
            self.shown.tunnel = tunnel;
            self.shown.remote = Some(format!("{} via {}", host.url, host.ssh));
        }
        self.shown.host = Some(host.clone());
        Ok(())
    }

    /// The attached agent's session logs and downloads (`None`: not attached).
    pub(crate) fn agent_files(&self) -> Option<crate::link::files::RemoteFiles> {
        self.agent().map(|a| a.files())
    }

    /// Asks the attached agent for its session logs.
    pub(crate) fn list_agent_sessions(&self) {
        if let Some(a) = self.agent() {
            a.list_sessions();
        }
    }

    /// Downloads one of the attached agent's session logs into this computer's sessions
    /// folder (`from-agents/HOST_PORT/`, one folder per agent), to open it read-only.
    pub(crate) fn download_agent_session(&self, name: &str) {
        if let Some(a) = self.agent() {
            a.download(name, &remote::downloads_base());
        }
    }

    /// Downloads finished since the last call.
    pub(crate) fn take_agent_downloads(&self) -> Vec<(String, Result<std::path::PathBuf, String>)> {
        self.agent().map(|a| a.take_downloads()).unwrap_or_default()
    }

    /// Attaches the window to the agent at `url` and shows it (its history starts now); the
    /// host shown until now goes on sampling in the background.
    ///
    /// # Errors
    /// A malformed address or no thread; the window stays as it was.
    fn connect_remote(&mut self, url: &str, token: String) -> Result<(), String> {
        let shared = self.fresh_state();
        let (shown, notify) = wake::notifier(self.repaint.clone(), self.wake.clone());
        let (url, link) = remote::connect(
            url,
            token,
            &shared,
            notify,
            crate::engine::AlertFilter::of(&self.settings),
            &self.notices,
        )?;
        self.park_current();
        self.shown = hosts::Attached {
            host: None,
            remote: Some(url),
            shared,
            link: Some(link),
            tunnel: None,
            source: crate::source::SourceKind::Nvml,
            shown,
        };
        Ok(())
    }

    /// Why the NVIDIA driver's library cannot be loaded on this computer (`None`: it can),
    /// found once.
    pub(crate) fn driver_missing(&self) -> Option<&str> {
        self.no_driver
            .get_or_init(|| crate::source::nvml::driver_library().err())
            .as_deref()
    }

    /// Drops the current source and its history and starts over on `source` (this
    /// computer; one kept in the background is dropped too).
    pub(crate) fn restart(&mut self, source: crate::source::SourceKind) {
        self.shown.close();
        self.hosts.drop_local();
        self.shown = hosts::Attached::unlinked(self.fresh_state(), source);
        self.spawn(source.factory());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent's files are reached through its link's capability: a window on this computer
    /// has none, one attached to an agent has the agent's (nothing listed yet).
    #[test]
    fn only_an_agents_link_offers_its_files() {
        let local = Backend::detached(Monitor::new(1000, 10), crate::source::SourceKind::demo());
        assert_eq!(local.agent_files(), None);
        assert!(local.agent_past().is_none());
        let ctx = egui::Context::default();
        // Nothing answers on port 9 (discard): the link retries, its files are there.
        let agent =
            Backend::attach("http://127.0.0.1:9", "token".into(), 10, &ctx).expect("attach");
        assert_eq!(agent.remote(), Some("http://127.0.0.1:9"));
        assert_eq!(
            agent.agent_files(),
            Some(crate::link::files::RemoteFiles::default())
        );
    }
}
