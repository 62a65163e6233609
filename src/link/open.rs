//! Opening a remote host for a front end: its token (typed, or read from its file) and, for a
//! host reached over SSH, the `ssh -N -L` tunnel to it. Blocking work (a file read, starting
//! ssh): a window runs it on a worker thread and attaches the link with the result.

use std::process::Child;
#[cfg(any(feature = "gui", test))]
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
#[cfg(any(feature = "gui", test))]
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// A host ready to attach: the address to poll, the token, and the tunnel it goes through.
#[derive(Debug)]
pub struct OpenedHost {
    /// `http://…` to poll: the agent's own address, or the tunnel's local end.
    pub url: String,
    /// The API token.
    pub token: String,
    /// The SSH tunnel, when the host is reached through one (the caller stops it).
    pub tunnel: Option<Tunnel>,
}

/// The most of a tunnel's stderr kept (the rest is read and dropped).
#[cfg(any(feature = "gui", test))]
const SAID_MAX: usize = 2000;

/// How long after ssh exits its stderr is waited for before saying why it ended without it.
#[cfg(feature = "gui")]
const SAID_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// An `ssh -N -L` tunnel: the process and what it said on stderr, read on a thread of its
/// own (asking why it ended never waits on the pipe, which a `ProxyCommand` started by ssh
/// may hold open after ssh itself has exited).
#[derive(Debug)]
#[cfg_attr(not(feature = "gui"), allow(dead_code))] // the headless build opens no tunnel
pub struct Tunnel {
    child: Child,
    said: Arc<Mutex<String>>,
    drained: Arc<AtomicBool>,
    #[cfg(feature = "gui")]
    exited: Option<(std::time::Instant, std::process::ExitStatus)>,
}

impl Tunnel {
    /// Takes `child`'s stderr to a reading thread (nothing is kept if none can start).
    #[cfg(any(feature = "gui", test))]
    fn start(mut child: Child) -> Self {
        let said = Arc::new(Mutex::new(String::new()));
        let drained = Arc::new(AtomicBool::new(false));
        let reading = child.stderr.take().and_then(|err| {
            let (said, drained) = (said.clone(), drained.clone());
            std::thread::Builder::new()
                .name("vramwarden-ssh".into())
                .spawn(move || drain(err, &said, &drained))
                .ok()
        });
        if reading.is_none() {
            drained.store(true, Ordering::Release);
        }
        Self {
            child,
            said,
            drained,
            #[cfg(feature = "gui")]
            exited: None,
        }
    }

    /// Why the tunnel ended ("ssh ended (exit status: 255): Permission denied …"), once it
    /// has and its stderr is read (or [`SAID_WAIT`] has passed); `None` while it runs.
    #[cfg(feature = "gui")]
    pub(crate) fn ended(&mut self) -> Option<String> {
        if self.exited.is_none() {
            let status = self.child.try_wait().ok()??;
            self.exited = Some((std::time::Instant::now(), status));
        }
        let (at, status) = self.exited?;
        if !self.drained.load(Ordering::Acquire) && at.elapsed() < SAID_WAIT {
            return None;
        }
        let said = self
            .said
            .lock()
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        Some(format!("ssh ended ({status}): {said}"))
    }
}

/// Reads `err` to its end, keeping its first [`SAID_MAX`] bytes in `said`.
#[cfg(any(feature = "gui", test))]
fn drain(mut err: impl std::io::Read, said: &Mutex<String>, drained: &AtomicBool) {
    let mut buf = [0u8; 512];
    while let Ok(n) = err.read(&mut buf) {
        let Some(read) = buf.get(..n).filter(|b| !b.is_empty()) else {
            break;
        };
        if let Ok(mut s) = said.lock() {
            let room = SAID_MAX.saturating_sub(s.len()).min(read.len());
            s.push_str(&String::from_utf8_lossy(
                read.get(..room).unwrap_or_default(),
            ));
        }
    }
    drained.store(true, Ordering::Release);
}

/// Stops an SSH tunnel started by [`open_host`] (and reaps it), if there is one.
#[cfg(feature = "gui")]
pub(crate) fn stop_tunnel(tunnel: Option<Tunnel>) {
    if let Some(mut t) = tunnel {
        let _ = t.child.kill();
        let _ = t.child.wait();
    }
}

/// Reads the token (`typed` when not blank, else the file `token_file`, `~/` expanded) and,
/// when `ssh` names a destination, starts `ssh -N -L 127.0.0.1:PORT:HOST:PORT -- DEST` (argv,
/// no shell) on a free local port.
///
/// # Errors
/// A sentence for the connect window: the token file unreadable or empty, a malformed
/// address, no free port, ssh not runnable.
#[cfg(any(feature = "gui", test))]
pub(crate) fn open_host(
    url: &str,
    ssh: &str,
    token_file: &str,
    typed: &str,
) -> Result<OpenedHost, String> {
    let token = if typed.trim().is_empty() {
        let path = expand_home(token_file);
        // The same checks as the agent's own token file: ours or root's, mode 0600.
        let t = crate::link::token::read_checked(&path)
            .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
        let t = t.trim().to_string();
        if t.is_empty() {
            return Err(format!("the token file {} is empty", path.display()));
        }
        t
    } else {
        typed.trim().to_string()
    };
    if ssh.is_empty() {
        return Ok(OpenedHost {
            url: url.to_string(),
            token,
            tunnel: None,
        });
    }
    let far = super::remote::parse_url(url)?;
    let far = far.trim_start_matches("http://");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free local port: {e}"))?
        .port();
    // argv, no shell: the destination was checked not to be an option.
    let child = Command::new("ssh")
        .args([
            "-N",
            "-o",
            "ExitOnForwardFailure=yes",
            "-o",
            "BatchMode=yes",
            "-L",
            &format!("127.0.0.1:{port}:{far}"),
            "--",
            ssh,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run ssh: {e}"))?;
    Ok(OpenedHost {
        url: format!("http://127.0.0.1:{port}"),
        token,
        tunnel: Some(Tunnel::start(child)),
    })
}

/// Where `vramwarden --connect` attaches: the agent's address and, for `ssh://`, the SSH
/// destination to tunnel through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectTarget {
    /// `http://HOST:PORT`: the agent itself, or for SSH its address on the far side.
    pub url: String,
    /// The SSH destination (`ssh://[user@]host[:port]`, which OpenSSH takes as it is); empty
    /// for a direct connection.
    pub ssh: String,
}

/// Reads `--connect`'s value: `http://HOST:PORT`, or `ssh://[user@]host[:port]` with the agent
/// on that host's loopback at its default port, or `ssh://[user@]host[:port]/HOST:PORT` with
/// the agent's address on the far side.
///
/// # Errors
/// A sentence saying what is accepted.
pub fn parse_target(target: &str) -> Result<ConnectTarget, String> {
    let t = target.trim();
    if let Some(rest) = t.strip_prefix("ssh://") {
        let (dest, far) = match rest.split_once('/') {
            Some((d, f)) if !f.is_empty() => (d, format!("http://{f}")),
            Some((d, _)) => (d, format!("http://{}", crate::link::DEFAULT_LISTEN)),
            None => (rest, format!("http://{}", crate::link::DEFAULT_LISTEN)),
        };
        let host = dest.rsplit_once('@').map_or(dest, |(_, h)| h);
        let bad = dest.is_empty()
            || host.is_empty()
            || host.starts_with(':')
            || dest.starts_with('-')
            || dest
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || "/\\'\"`$;|&<>()".contains(c));
        if bad {
            return Err(format!(
                "{target:?} is not ssh://[user@]host[:port] (optionally /HOST:PORT of the agent on that host)"
            ));
        }
        let url = super::remote::parse_url(&far)
            .map_err(|e| format!("the agent's address after the host: {e}"))?;
        return Ok(ConnectTarget {
            url,
            ssh: format!("ssh://{dest}"),
        });
    }
    if t.starts_with("http://") || t.starts_with("https://") {
        return Ok(ConnectTarget {
            url: super::remote::parse_url(t)?,
            ssh: String::new(),
        });
    }
    Err(format!(
        "{target:?}: --connect takes http://HOST:PORT (e.g. http://127.0.0.1:8726) or ssh://[user@]host"
    ))
}

/// `~/x` → `$HOME/x`.
#[cfg(any(feature = "gui", test))]
fn expand_home(p: &str) -> std::path::PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => std::path::PathBuf::from(home).join(rest),
        _ => std::path::PathBuf::from(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ssh that fails and leaves a process of its own holding its stderr (as a
    /// `ProxyCommand` may): why it ended is said within about a second, with what it wrote,
    /// not once that process lets the pipe go (the window asks every frame).
    #[cfg(feature = "gui")]
    #[test]
    fn a_tunnel_that_ended_is_said_without_waiting_for_its_pipe() {
        let dir = tempfile::tempdir().expect("tmp");
        let held = dir.path().join("held");
        let script = format!(
            "echo 'Permission denied (publickey).' >&2; sleep 30 & echo $! > {}; exit 255",
            held.display()
        );
        let child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh");
        let mut t = Tunnel::start(child);
        let asked = std::time::Instant::now();
        let why = loop {
            if let Some(why) = t.ended() {
                break why;
            }
            assert!(
                asked.elapsed().as_secs() < 10,
                "not said while the pipe is held"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        if let Ok(pid) = std::fs::read_to_string(&held) {
            let _ = Command::new("kill").arg(pid.trim()).status();
        }
        assert!(why.contains("255"), "{why}");
        assert!(why.ends_with("Permission denied (publickey)."), "{why}");
    }

    #[test]
    fn connect_targets_are_http_or_ssh_and_nothing_else() {
        let t = parse_target("http://10.0.0.5:9835/").expect("http");
        assert_eq!(
            (t.url.as_str(), t.ssh.as_str()),
            ("http://10.0.0.5:9835", "")
        );
        let t = parse_target("ssh://alice@gpu-7").expect("ssh");
        assert_eq!(t.ssh, "ssh://alice@gpu-7");
        assert_eq!(t.url, "http://127.0.0.1:8726");
        let t = parse_target("ssh://gpu-7:2222/127.0.0.1:9900").expect("ssh with the agent");
        assert_eq!(
            (t.url.as_str(), t.ssh.as_str()),
            ("http://127.0.0.1:9900", "ssh://gpu-7:2222")
        );
        for bad in [
            "gpu-7:9835",
            "ftp://x",
            "ssh://",
            "ssh://-oProxyCommand=x",
            "ssh://a b",
            "ssh://alice@",
            "ssh://h;rm",
            "https://x:1",
            "http://x:1/api",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_token_is_typed_or_read_from_its_file_and_a_bad_file_says_why() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("agent.token");
        let f = file.display().to_string();
        let url = "http://10.0.0.5:8726";
        // Typed wins over the file (which does not exist yet).
        let o = open_host(url, "", &f, "  typed  ").expect("typed");
        assert_eq!((o.url.as_str(), o.token.as_str()), (url, "typed"));
        assert!(o.tunnel.is_none());
        let e = open_host(url, "", &f, "").expect_err("no file");
        assert!(e.starts_with("cannot read the token file"), "{e}");
        std::fs::write(&file, "s3cret\n").expect("write");
        // Readable by others: refused, with the fix named.
        set_mode(&file, 0o644);
        let e = open_host(url, "", &f, "").expect_err("mode 644");
        assert!(e.contains("chmod 600"), "{e}");
        set_mode(&file, 0o600);
        assert_eq!(open_host(url, "", &f, "").expect("file").token, "s3cret");
        std::fs::write(&file, " \n").expect("write");
        let e = open_host(url, "", &f, "").expect_err("empty");
        assert!(e.ends_with("is empty"), "{e}");
    }

    fn set_mode(path: &std::path::Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
}
