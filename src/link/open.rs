//! Opening a remote host for a front end: its token (typed, or read from its file) and, for a
//! host reached over SSH, the `ssh -N -L` tunnel to it. Blocking work (a file read, starting
//! ssh): a window runs it on a worker thread and attaches the link with the result.

use std::process::{Child, Command, Stdio};

/// A host ready to attach: the address to poll, the token, and the tunnel it goes through.
#[derive(Debug)]
pub struct OpenedHost {
    /// `http://…` to poll: the agent's own address, or the tunnel's local end.
    pub url: String,
    /// The API token.
    pub token: String,
    /// The SSH tunnel, when the host is reached through one (the caller stops it).
    pub tunnel: Option<Child>,
}

/// Stops an SSH tunnel started by [`open_host`] (and reaps it), if there is one.
pub fn stop_tunnel(tunnel: Option<Child>) {
    if let Some(mut t) = tunnel {
        let _ = t.kill();
        let _ = t.wait();
    }
}

/// Reads the token (`typed` when not blank, else the file `token_file`, `~/` expanded) and,
/// when `ssh` names a destination, starts `ssh -N -L 127.0.0.1:PORT:HOST:PORT -- DEST` (argv,
/// no shell) on a free local port.
///
/// # Errors
/// A sentence for the connect window: the token file unreadable or empty, a malformed
/// address, no free port, ssh not runnable.
pub fn open_host(
    url: &str,
    ssh: &str,
    token_file: &str,
    typed: &str,
) -> Result<OpenedHost, String> {
    let token = if typed.trim().is_empty() {
        let path = expand_home(token_file);
        let t = std::fs::read_to_string(&path)
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
        tunnel: Some(child),
    })
}

/// `~/x` → `$HOME/x`.
fn expand_home(p: &str) -> std::path::PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => std::path::PathBuf::from(home).join(rest),
        _ => std::path::PathBuf::from(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        std::fs::write(&file, " \n").expect("write");
        let e = open_host(url, "", &f, "").expect_err("empty");
        assert!(e.ends_with("is empty"), "{e}");
        std::fs::write(&file, "s3cret\n").expect("write");
        assert_eq!(open_host(url, "", &f, "").expect("file").token, "s3cret");
    }
}
