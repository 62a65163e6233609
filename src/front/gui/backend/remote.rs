//! An agent attached to the window: its link opened, its alerts delivered here, an SSH
//! tunnel's end told, and where its session logs are downloaded.

use crate::engine::sampler::Notify;
use crate::engine::shared::SharedMonitor;
use crate::link::{EngineLink, LinkHealth};

/// Opens the link to the agent at `url`, filling `shared`; its alerts that `filter` wants
/// notify here as this computer's would (the window's own notices in `notices`). Returns the
/// agent's address and link.
///
/// # Errors
/// A malformed address or no thread.
pub(super) fn connect(
    url: &str,
    token: String,
    shared: &SharedMonitor,
    notify: Notify,
    filter: crate::engine::AlertFilter,
    notices: &crate::front::gui::notices::OwnNotices,
) -> Result<(String, Box<dyn EngineLink>), String> {
    let link = crate::link::remote::RemoteLink::connect(url, token, shared.clone(), notify)?;
    link.alert_to(
        crate::front::gui::notify::subscriber(notices.clone(), agent_host(shared.clone())),
        filter,
    );
    Ok((link.url().to_string(), Box::new(link)))
}

/// The agent's host as the window names it, read from its View in `shared` at each alert
/// (the link delivers alerts with the View unlocked).
fn agent_host(shared: SharedMonitor) -> crate::front::gui::notify::HostName {
    Box::new(move || {
        let m = shared
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(crate::front::gui::notices::agent_host(&m).to_string())
    })
}

/// The link's `health`, with why the SSH `tunnel` ended when the agent is lost and the
/// tunnel has exited (a refused key, an unknown host).
pub(super) fn with_tunnel(
    health: LinkHealth,
    tunnel: Option<&mut crate::link::open::Tunnel>,
) -> LinkHealth {
    let (LinkHealth::Disconnected { url, since_ms, .. }, Some(t)) = (&health, tunnel) else {
        return health;
    };
    let Some(why) = t.ended() else {
        return health;
    };
    LinkHealth::Disconnected {
        url: url.clone(),
        since_ms: *since_ms,
        error: crate::link::remote_error::RemoteError::Unreachable(why),
    }
}

/// Where agents' session logs are downloaded: `from-agents/` in this computer's sessions
/// folder, one folder per agent inside.
pub(super) fn downloads_base() -> std::path::PathBuf {
    crate::session::default_dir().join("from-agents")
}
