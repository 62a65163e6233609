//! Listing the companions with their facts, each peer-checked.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::client::Client;
use super::protocol::TorchFacts;
use super::sockets::list_sockets;

/// One socket found by [`discover`]: its facts, or why it was refused.
#[derive(Debug, Clone, PartialEq)]
pub struct CompanionInfo {
    /// The pid the socket's name claims.
    pub pid: u32,
    /// The socket.
    pub path: PathBuf,
    /// The peer-checked facts, or the reason it was refused / did not answer.
    pub facts: Result<TorchFacts, String>,
}

/// Every companion in `dir`, each connected, peer-checked (against `/proc`'s start time) and
/// asked for its stats, with `timeout` per step.
pub fn discover(dir: &Path, timeout: Duration) -> Vec<CompanionInfo> {
    list_sockets(dir)
        .into_iter()
        .map(|(pid, path)| {
            let facts = Client::connect_at(&path, pid, None, timeout)
                .and_then(|mut c| c.facts())
                .map_err(|e| e.to_string());
            CompanionInfo { pid, path, facts }
        })
        .collect()
}
