//! Where the companions' sockets live, their names, and listing them.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

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
fn pid_of_name(name: &str) -> Option<u32> {
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
