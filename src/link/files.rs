//! An agent's files as a window sees them: its session logs, their downloads and its past
//! leaks, and the [`AgentFiles`] capability a link to an agent offers
//! ([`super::EngineLink::agent_files`]).

use serde::Deserialize;

use crate::model::UnixMs;

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

/// The agent's session logs as the link last listed them, and its downloads. Their errors
/// are sentences: the sessions window only shows them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RemoteFiles {
    /// The list, or why it could not be read (`None`: not asked yet).
    pub list: Option<Result<Vec<RemoteSession>, String>>,
    /// A download in progress (its name).
    pub downloading: Option<String>,
    /// Finished downloads, oldest first: the name and the local file, or why it failed.
    pub done: Vec<(String, Result<std::path::PathBuf, String>)>,
}

/// An agent's session logs and past leaks, reached over its link (a capability of
/// [`super::EngineLink::agent_files`]); every call returns at once, the work runs on the link's
/// threads.
pub trait AgentFiles {
    /// The session list as last read and the downloads so far.
    fn files(&self) -> RemoteFiles;
    /// Asks for the agent's list of session logs (it arrives in [`AgentFiles::files`]).
    fn list_sessions(&self);
    /// Downloads the session log `name` into this agent's own folder under `base` (so two
    /// agents' logs of the same name never replace each other).
    fn download(&self, name: &str, base: &std::path::Path);
    /// Takes the finished downloads out: each name and the local file, or why it failed.
    fn take_downloads(&self) -> Vec<(String, Result<std::path::PathBuf, String>)>;
    /// The agent's past leaks once read; the first call asks for them.
    fn past_or_ask(&self) -> Option<std::sync::Arc<crate::engine::replay::PastEvents>>;
}
