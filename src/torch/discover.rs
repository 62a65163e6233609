//! Where the companions' sockets live, and listing them.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::client::Client;
use super::protocol::TorchFacts;

/// The companions' folder, as the companion computes it: `$XDG_RUNTIME_DIR/vramwarden`, else
/// `/tmp/vramwarden-<euid>`.
pub fn runtime_dir() -> Option<PathBuf> {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(x) if !x.is_empty() => Some(PathBuf::from(x).join("vramwarden")),
        _ => Some(PathBuf::from(format!(
            "/tmp/vramwarden-{}",
            nix::unistd::geteuid().as_raw()
        ))),
    }
}

/// `torch-<pid>.sock`.
pub fn socket_name(pid: u32) -> String {
    format!("torch-{pid}.sock")
}

/// The pid a socket name claims, if it is a companion's name.
pub fn pid_of_name(name: &str) -> Option<u32> {
    name.strip_prefix("torch-")?
        .strip_suffix(".sock")?
        .parse()
        .ok()
}

/// The companions' sockets in `dir` as (pid the name claims, path), sorted by pid. Sockets of
/// processes that no longer exist are removed when they are ours, and left out either way.
pub fn list_sockets(dir: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let me = nix::unistd::geteuid().as_raw();
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(pid_of_name) else {
            continue;
        };
        let path = e.path();
        if !Path::new(&format!("/proc/{pid}")).exists() {
            if let Ok(md) = std::fs::symlink_metadata(&path) {
                if md.file_type().is_socket() && md.uid() == me {
                    let _ = std::fs::remove_file(&path);
                }
            }
            continue;
        }
        out.push((pid, path));
    }
    out.sort();
    out
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(pid_of_name(&socket_name(4242)), Some(4242));
        assert_eq!(pid_of_name("torch-x.sock"), None);
        assert_eq!(pid_of_name("torch-12.sock.bak"), None);
        assert_eq!(pid_of_name("other-12.sock"), None);
    }
}
