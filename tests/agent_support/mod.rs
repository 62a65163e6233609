//! Shared by the agent tests: a minimal HTTP/1.0 client and an agent child process on the
//! simulated GPUs (a free loopback port, its own config, token and data folders).
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A reply: status, lower-cased header lines, body.
pub struct Http {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Http {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// One request over a fresh connection (HTTP/1.0: the reply ends when the socket closes).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Http {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(req.as_bytes()).expect("write");
    s.write_all(body).expect("write body");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header end");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Http {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

pub fn get(addr: SocketAddr, path: &str) -> Http {
    request(addr, "GET", path, &[], b"")
}

/// `GET path` with `auth` as its Authorization header.
pub fn get_as(addr: SocketAddr, path: &str, auth: &str) -> Http {
    request(addr, "GET", path, &[("Authorization", auth)], b"")
}

/// `POST /api/v1/command` with `body` and `auth` as its Authorization header.
pub fn command_as(addr: SocketAddr, auth: &str, body: &[u8]) -> Http {
    request(
        addr,
        "POST",
        "/api/v1/command",
        &[("Authorization", auth)],
        body,
    )
}

/// An agent child process on the simulated GPUs; killed when dropped.
pub struct AgentProc {
    pub child: Child,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    pub token: String,
    pub stderr: mpsc::Receiver<String>,
    /// What it said on stderr until it was ready.
    pub startup: Vec<String>,
}

impl AgentProc {
    /// Starts `vramwarden --demo agent --listen 127.0.0.1:0 …` with `config` as its settings
    /// file and waits (up to 60 s) until it says it is ready.
    pub fn start(config: &str, extra: &[&str]) -> Self {
        Self::start_with(config, extra, |_| {})
    }

    /// [`AgentProc::start`], with `tweak` applied to the command last (environment, limits).
    pub fn start_with(config: &str, extra: &[&str], tweak: impl FnOnce(&mut Command)) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = dir.path().join("config.toml");
        std::fs::write(&cfg, config).expect("config");
        let token_file = dir.path().join("agent.token");
        let listen = if extra.contains(&"--listen") {
            vec![]
        } else {
            vec!["--listen", "127.0.0.1:0"]
        };
        let mut cmd = agent_command(&cfg, &token_file, &dir.path().join("data"));
        cmd.args(listen).args(extra);
        tweak(&mut cmd);
        let (child, stderr, seen) = spawn_until_ready(cmd);
        let addr = seen
            .iter()
            .find_map(|line| line.split("listening on http://").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {seen:?}"));
        let token = std::fs::read_to_string(&token_file)
            .expect("the token file")
            .trim()
            .to_string();
        Self {
            child,
            addr,
            dir,
            token,
            stderr,
            startup: seen,
        }
    }

    /// A second agent on this one's address, settings file and token file (its restart once
    /// this one is gone), with the data folder `data` in its folder; returns once it is ready.
    pub fn restart(&self, data: &str) -> Child {
        let dir = self.dir.path();
        let mut cmd = agent_command(
            &dir.join("config.toml"),
            &dir.join("agent.token"),
            &dir.join(data),
        );
        cmd.arg("--listen").arg(self.addr.to_string());
        spawn_until_ready(cmd).0
    }

    pub fn auth(&self) -> String {
        format!("Bearer {}", self.token)
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `vramwarden --demo agent` with the settings file `config`, the token file `token_file` and
/// the data folder `data`, out of systemd's reach, its stderr piped.
fn agent_command(config: &Path, token_file: &Path, data: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vramwarden"));
    cmd.args(["--demo", "agent", "--config"])
        .arg(config)
        .arg("--token-file")
        .arg(token_file)
        .env("VRAMWARDEN_DATA_DIR", data)
        .env_remove("NOTIFY_SOCKET")
        .env_remove("WATCHDOG_USEC")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Spawns `cmd` (an agent) and waits (up to 60 s) until it says it is ready; returns it, its
/// further stderr lines and what it said until then.
fn spawn_until_ready(mut cmd: Command) -> (Child, mpsc::Receiver<String>, Vec<String>) {
    let mut child = cmd.spawn().expect("spawn the agent");
    let err = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen: Vec<String> = Vec::new();
    while !seen.last().is_some_and(|l| l.ends_with("agent: ready")) {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("the agent did not become ready: {seen:?}"));
        seen.push(line);
    }
    (child, rx, seen)
}

/// Polls `f` every 50 ms until it gives `Some`, or panics after `limit` with `what`.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Settings that let remote commands act (the default has the global dry run on).
pub const ACTING: &str = "[cleanup]\ndry_run = false\n";
