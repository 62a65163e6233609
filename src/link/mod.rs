//! The one interface a front end talks to: the state it draws (a copy of the engine's
//! [`crate::engine::view::Monitor`], made once per change, that no one writes to), commands sent the
//! other way, and the link's health.
//!
//! Two links exist: [`crate::engine::sampler::SamplerHandle`], the engine in this process on its own
//! thread, and [`remote::RemoteLink`], an agent on another machine (or on this one) reached
//! over HTTP, whose engine applies its own policy to every command. A front end holds a
//! `Box<dyn EngineLink>` and never knows which; what only an agent has (its session logs
//! and past leaks) is the [`files::AgentFiles`] capability the link may offer.

pub mod checks;
pub mod files;
#[cfg(feature = "gui")]
pub(crate) mod jobs;
pub mod open;
pub mod remote;
pub mod remote_alerts;
pub mod remote_error;
pub mod token;
pub mod wire;
pub mod wire_checks;
pub(crate) mod wire_command;

/// Where `vramwarden agent` listens unless told otherwise (loopback only). 8726 spells VRAM on
/// a phone keypad; it is outside Prometheus' exporter range 9100-9999 (full since 2023) and
/// taken by no exporter on its wiki's list of default ports (9835, the port of 0.1.0, is
/// nvidia_gpu_exporter's).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8726";

use crate::engine::EngineCommand;
use crate::model::UnixMs;

/// How a link is doing, for the status bar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkHealth {
    /// The engine runs in this process.
    Local,
    /// Connected to a remote agent; the last answer came at this time.
    Connected {
        /// Where.
        url: String,
        /// The agent's host name, as its source reports it.
        host: String,
        /// When it last answered (ms since the epoch).
        last_ms: UnixMs,
    },
    /// The agent does not answer; the link keeps retrying.
    Disconnected {
        /// Where.
        url: String,
        /// Since when it does not answer.
        since_ms: UnixMs,
        /// Why: its kind, and in a few words.
        error: remote_error::RemoteError,
    },
}

/// A front end's connection to an engine.
pub trait EngineLink: Send {
    /// The engine's state as of its last change: a copy to draw from without holding a lock
    /// ([`crate::engine::shared::Shared::view`]). None only after a writer panicked before any copy.
    fn view(&self) -> Option<std::sync::Arc<crate::engine::view::Monitor>>;
    /// Sends a command; its reply comes back under the id returned
    /// ([`EngineLink::take_replies`]), and its effects through the shared state.
    fn send(&self, c: EngineCommand) -> crate::engine::command::CommandId;
    /// The replies that came back since the last call, oldest first (the link's notify
    /// fires when one arrives).
    fn take_replies(&self) -> Vec<crate::engine::command::CommandReply>;
    /// How the link is doing.
    fn health(&self) -> LinkHealth;
    /// What an agent's link can do besides: its session logs and past leaks (`None`: the
    /// engine runs in this process, its files are this computer's).
    fn agent_files(&self) -> Option<&dyn files::AgentFiles> {
        None
    }
}

impl EngineLink for crate::engine::sampler::SamplerHandle {
    fn view(&self) -> Option<std::sync::Arc<crate::engine::view::Monitor>> {
        self.shared.view()
    }

    fn send(&self, c: EngineCommand) -> crate::engine::command::CommandId {
        crate::engine::sampler::SamplerHandle::send(self, c)
    }

    fn take_replies(&self) -> Vec<crate::engine::command::CommandReply> {
        crate::engine::sampler::SamplerHandle::take_replies(self)
    }

    fn health(&self) -> LinkHealth {
        LinkHealth::Local
    }
}
