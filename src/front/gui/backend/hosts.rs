//! The hosts the window is attached to: the one shown and those kept in the background
//! (their links go on filling their own histories), switching between them, and the SSH
//! tunnels that stop with them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::engine::shared::SharedMonitor;
use crate::front::gui::connect::SavedHost;
use crate::link::EngineLink;

/// How many agents the window keeps attached in the background besides the one shown.
pub(crate) const MAX_BACKGROUND_HOSTS: usize = 8;

/// One engine the window is attached to: this computer's or an agent's.
pub(super) struct Attached {
    /// The saved host (`None`: this computer, or an agent given by `--connect`).
    pub host: Option<SavedHost>,
    /// The agent's address (`None`: this computer).
    pub remote: Option<String>,
    /// The state its link fills.
    pub shared: SharedMonitor,
    /// Its link (`None`: nothing samples, a detached window).
    pub link: Option<Box<dyn EngineLink>>,
    /// The `ssh -N -L` tunnel to it, when reached over SSH (stopped when this is dropped).
    pub tunnel: Option<crate::link::open::Tunnel>,
    /// The GPUs this computer samples (an agent: what its View says).
    pub source: crate::source::SourceKind,
    /// Whether its samples wake the window (off while it is in the background).
    pub shown: Arc<AtomicBool>,
}

impl Attached {
    /// Nothing attached yet over `shared`.
    pub(crate) fn unlinked(shared: SharedMonitor, source: crate::source::SourceKind) -> Self {
        Self {
            host: None,
            remote: None,
            shared,
            link: None,
            tunnel: None,
            source,
            shown: Arc::new(AtomicBool::new(true)),
        }
    }

    /// What stays on screen once this one's link is taken away: its state and source, no
    /// host, no link, no tunnel.
    fn left_behind(&self) -> Self {
        Self {
            host: None,
            remote: None,
            shared: self.shared.clone(),
            link: None,
            tunnel: None,
            source: self.source,
            shown: self.shown.clone(),
        }
    }

    /// Closes its link and its tunnel; its state stays.
    pub(crate) fn close(&mut self) {
        *self = self.left_behind();
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        crate::link::open::stop_tunnel(self.tunnel.take());
    }
}

/// The hosts attached in the background (this computer among them while an agent is shown).
#[derive(Default)]
pub(super) struct Hosts {
    parked: Vec<Attached>,
}

impl Hosts {
    /// Puts `shown` in the background, still sampling, when it has a link; returns what stays
    /// on screen meanwhile. The agent left longest ago goes when more than
    /// [`MAX_BACKGROUND_HOSTS`] are kept (this computer always stays).
    pub(crate) fn park(&mut self, shown: Attached) -> Attached {
        if shown.link.is_none() {
            return shown;
        }
        let stays = shown.left_behind();
        shown.shown.store(false, Ordering::Relaxed);
        self.parked.push(shown);
        while self.parked.iter().filter(|p| p.remote.is_some()).count() > MAX_BACKGROUND_HOSTS {
            if let Some(i) = self.parked.iter().position(|p| p.remote.is_some()) {
                self.parked.remove(i);
            }
        }
        stays
    }

    /// Takes `host` (`None`: this computer) out of the background, its samples waking the
    /// window again; `None` when it is not attached.
    pub(crate) fn take(&mut self, host: Option<&SavedHost>) -> Option<Attached> {
        let i = self.parked.iter().position(|p| p.host.as_ref() == host)?;
        let p = self.parked.remove(i);
        p.shown.store(true, Ordering::Relaxed);
        Some(p)
    }

    /// Lets go of `host` (its link and tunnel stop); true when it was in the background.
    pub(crate) fn drop_host(&mut self, host: &SavedHost) -> bool {
        let before = self.parked.len();
        self.parked.retain(|p| p.host.as_ref() != Some(host));
        self.parked.len() != before
    }

    /// Lets go of this computer's engine kept in the background.
    pub(crate) fn drop_local(&mut self) {
        self.parked.retain(|p| p.remote.is_some());
    }

    /// This computer's engine, when it is kept in the background.
    pub(crate) fn local(&self) -> Option<&dyn EngineLink> {
        self.parked
            .iter()
            .find(|p| p.remote.is_none())
            .and_then(|p| p.link.as_deref())
    }

    /// The hosts in the background (`None`: this computer).
    pub(crate) fn listed(&self) -> impl Iterator<Item = Option<SavedHost>> + '_ {
        self.parked.iter().map(|p| p.host.clone())
    }
}
