//! The PyTorch companion (`packaging/python/vramwarden_torch`) in real Python processes, and the
//! app's side of it (`vramwarden::act::torch` and `vramwarden torch …`, the real binary).
//!
//! This machine (and CI) has no torch: the companion is tested as it runs in a process that has
//! not imported torch. Only `pth_hook_*` uses a stand-in module named `torch` (a one-line
//! `torch.py` with a `__version__`, on PYTHONPATH); it is a stand-in used ONLY to test the
//! import trigger of the `.pth` hook, never to fake allocator figures.
//!
//! The uid tests run a process as uid 65534 with `setpriv` (util-linux) and need root, as CI
//! runs them.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use vramwarden::act::torch::{self, Client, TorchError};
use vramwarden::host::procinfo::ProcReader;

const NOBODY: &str = "65534";

fn pkg_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/python")
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_vramwarden")
}

/// A Python process; closing its stdin (on drop) ends it normally, so its atexit runs.
struct Py {
    child: Child,
    sock: PathBuf,
}

impl Py {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Closes stdin and waits for a normal exit.
    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = self.child.try_wait() {
                return st;
            }
            assert!(Instant::now() < deadline, "python did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(path: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Starts `python3 -c CODE` with the companion's package (and `extra`) on PYTHONPATH and
/// XDG_RUNTIME_DIR = `xdg`; with `expect_socket`, waits until its socket exists.
fn python(xdg: &Path, extra: Option<&Path>, code: &str, expect_socket: bool) -> Py {
    let mut pp = pkg_dir().display().to_string();
    if let Some(e) = extra {
        pp = format!("{pp}:{}", e.display());
    }
    let child = Command::new("python3")
        .args(["-c", code])
        .env("PYTHONPATH", pp)
        .env("XDG_RUNTIME_DIR", xdg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs");
    let sock = xdg.join("vramwarden").join(torch::socket_name(child.id()));
    let py = Py { child, sock };
    if expect_socket {
        assert!(wait_for(&py.sock), "no socket at {}", py.sock.display());
    }
    py
}

/// A companion in a process that has not imported torch, waiting on stdin.
fn companion(xdg: &Path) -> Py {
    python(
        xdg,
        None,
        "import sys, vramwarden_torch; sys.stdin.read()",
        true,
    )
}

fn run_bin(args: &[&str], xdg: &Path) -> Output {
    Command::new(bin())
        .args(args)
        .env("XDG_RUNTIME_DIR", xdg)
        .output()
        .expect("the binary runs")
}

/// Runs `cmd`, again while it fails with ETXTBSY: a binary just copied for another uid can
/// be briefly "busy" when another test thread forks while the copy's write handle is open.
fn output_retrying_busy(cmd: &mut Command) -> Output {
    for _ in 0..50 {
        let out = cmd.output().expect("runs");
        if !String::from_utf8_lossy(&out.stderr).contains("Text file busy") {
            return out;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{cmd:?} stayed busy");
}

fn assert_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test switches to uid {NOBODY} with setpriv and needs root (CI runs as root)"
    );
}

/// A raw connection to a companion's socket, its reads bounded by 5 s.
fn connect_raw(sock: &Path) -> UnixStream {
    let s = UnixStream::connect(sock).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

/// One request line on a raw connection, one reply line back.
fn raw_roundtrip(stream: &mut UnixStream, line: &[u8]) -> Value {
    stream.write_all(line).expect("write");
    let mut r = BufReader::new(stream.try_clone().expect("clone"));
    let mut reply = String::new();
    r.read_line(&mut reply).expect("a reply line");
    serde_json::from_str(&reply).expect("the reply is JSON")
}

#[test]
fn companion_without_torch_is_discovered_by_torch_ls() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    let mode = |p: &Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;
    assert_eq!(mode(&tmp.path().join("vramwarden")), 0o700);
    assert_eq!(mode(&py.sock), 0o600);

    let out = run_bin(&["torch", "ls", "--format", "json"], tmp.path());
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    println!("torch ls --format json:\n{text}");
    let list: Value = serde_json::from_str(&text).expect("JSON");
    let list = list.as_array().expect("an array");
    assert_eq!(list.len(), 1, "{text}");
    let me = &list[0];
    assert_eq!(me["pid"], json!(py.pid()));
    assert_eq!(me["torch_imported"], json!(false));
    assert_eq!(me["error"], json!("torch not imported"));
    assert_eq!(me["devices"], json!([]));
    // The start time the companion is listed with is the one procinfo reads.
    let start = ProcReader::default().start_time_ms(py.pid());
    assert!(start.is_some());
    assert_eq!(me["start_time_ms"], json!(start));

    // The library: the hello's start time equals procinfo's, computed the same way.
    let c = Client::connect_at(&py.sock, py.pid(), start, torch::DEFAULT_TIMEOUT)
        .expect("the peer check passes");
    assert_eq!(c.hello().start_time_ms, start);
    assert!(!c.hello().torch_imported);

    // A normal exit removes the socket (atexit).
    drop(c);
    let sock = py.sock.clone();
    assert!(py.finish().success());
    assert!(!sock.exists(), "the socket outlived its process");
    let out = run_bin(&["torch", "ls", "--format", "json"], tmp.path());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
}

#[test]
fn release_on_a_process_without_torch_is_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    let pid = py.pid().to_string();
    let out = run_bin(&["torch", "release", &pid], tmp.path());
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("process {pid} has not imported torch")),
        "{err}"
    );
    let mut c = Client::connect_at(&py.sock, py.pid(), None, torch::DEFAULT_TIMEOUT).expect("ok");
    assert!(matches!(c.release_cache(), Err(TorchError::TorchNotImported(p)) if p == py.pid()));
    // With the identity a rule passes ({pid} + {start_time}): a wrong start time is refused.
    let start = ProcReader::default()
        .start_time_ms(py.pid())
        .expect("start");
    let wrong = (start - 5000).to_string();
    let out = run_bin(
        &["torch", "release", &pid, "--start-time-ms", &wrong],
        tmp.path(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a reused pid?"),
        "{out:?}"
    );
    let right = start.to_string();
    let out = run_bin(
        &["torch", "release", &pid, "--start-time-ms", &right],
        tmp.path(),
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has not imported torch"),
        "{out:?}"
    );
    // A pid with no companion: a clear error too.
    let out = run_bin(&["torch", "release", "1"], tmp.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("process 1 has no vramwarden_torch companion"));
}

/// Lets uid 65534 reach `py`'s socket through the file system (folders 0755, socket 0666), so
/// that only the peer-credential checks stand in the way.
fn open_up(tmp: &Path, py: &Py) {
    for d in [tmp, &tmp.join("vramwarden")] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::set_permissions(&py.sock, std::fs::Permissions::from_mode(0o666)).expect("chmod");
}

#[test]
fn companion_refuses_a_client_of_another_uid() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    open_up(tmp.path(), &py);
    // A plain Python client (no vramwarden code) as uid 65534. The companion answers the
    // refusal as soon as it accepts, before any request (a request sent after it closed would
    // fail with EPIPE, so the client tries one only after reading, and ignores that failure).
    let client = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); \
         print(s.makefile().readline(), end='')\n\
         try:\n    s.sendall(b'{{\"cmd\":\"hello\"}}\\n'); print(s.recv(100))\nexcept OSError:\n    pass",
        py.sock.display().to_string()
    );
    let out = Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups"])
        .args(["/usr/bin/python3", "-c", &client])
        .output()
        .expect("setpriv runs");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    let reply: Value = serde_json::from_str(lines.next().unwrap_or("")).expect("a JSON reply");
    // Nothing is served after the refusal: the connection is closed (or the send failed).
    assert!(lines.next().is_none_or(|l| l == "b''"), "{stdout}");
    assert_eq!(reply["ok"], json!(false));
    assert_eq!(
        reply["error"],
        json!(format!("peer uid {NOBODY} is not allowed"))
    );
    assert!(
        reply.get("pid").is_none(),
        "it told a stranger who it is: {reply}"
    );
    // Root is served.
    let mut ours = UnixStream::connect(&py.sock).expect("connect");
    let hello = raw_roundtrip(&mut ours, b"{\"cmd\":\"hello\"}\n");
    assert_eq!(hello["pid"], json!(py.pid()));
}

#[test]
fn app_not_root_refuses_a_companion_of_another_uid() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    open_up(tmp.path(), &py);
    // The binary, where uid 65534 can run it.
    let exe = tmp.path().join("vramwarden-bin");
    std::fs::copy(bin(), &exe).expect("copy");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = output_retrying_busy(
        Command::new("setpriv")
            .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups"])
            .arg(&exe)
            .args(["torch", "ls", "--format", "json"])
            .env("XDG_RUNTIME_DIR", tmp.path()),
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "the companion of pid {} runs as uid 0, not as us (uid {NOBODY})",
            py.pid()
        )),
        "{err}"
    );
}

#[test]
fn app_refuses_a_socket_whose_peer_is_another_pid_or_started_at_another_time() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    // Another live process whose name the socket will claim.
    let mut other = Command::new("sleep").arg("30").spawn().expect("sleep");
    let fake = tmp
        .path()
        .join("vramwarden")
        .join(torch::socket_name(other.id()));
    std::os::unix::fs::symlink(&py.sock, &fake).expect("symlink");
    let r = Client::connect_at(&fake, other.id(), None, torch::DEFAULT_TIMEOUT);
    assert!(
        matches!(r, Err(TorchError::PidMismatch { claimed, peer }) if claimed == other.id() && peer == py.pid()),
        "{r:?}"
    );
    let out = run_bin(&["torch", "ls", "--format", "json"], tmp.path());
    let list: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let pids: Vec<u64> = list
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|f| f["pid"].as_u64())
        .collect();
    assert_eq!(
        pids,
        vec![u64::from(py.pid())],
        "only the real one is listed"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!(
        "the socket for pid {} is served by pid {}",
        other.id(),
        py.pid()
    )));
    let _ = other.kill();
    let _ = other.wait();

    // The right pid with another start time (what a reused pid looks like).
    let start = ProcReader::default()
        .start_time_ms(py.pid())
        .expect("start time");
    let r = Client::connect_at(&py.sock, py.pid(), Some(start - 10), torch::DEFAULT_TIMEOUT);
    assert!(
        matches!(r, Err(TorchError::StartTimeMismatch { pid, expected, actual }) if pid == py.pid() && expected == start - 10 && actual == Some(start)),
        "{r:?}"
    );
    assert!(Client::connect_at(&py.sock, py.pid(), Some(start), torch::DEFAULT_TIMEOUT).is_ok());
}

#[test]
fn oversized_requests_are_refused_and_the_connection_closed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    let mut s = connect_raw(&py.sock);
    let mut big = vec![b'x'; 70 * 1024];
    big.push(b'\n');
    let reply = raw_roundtrip(&mut s, &big);
    assert_eq!(reply["ok"], json!(false));
    assert_eq!(reply["error"], json!("request longer than 65536 bytes"));
    let mut rest = Vec::new();
    // EOF, or a reset when the companion closed with bytes of ours still unread.
    if let Err(e) = s.read_to_end(&mut rest) {
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}");
    }
    // Closed after the error (only the one reply line came); the companion still serves others.
    assert!(String::from_utf8_lossy(&rest).matches('\n').count() <= 1);
    let mut s2 = UnixStream::connect(&py.sock).expect("connect");
    assert_eq!(
        raw_roundtrip(&mut s2, b"{\"cmd\":\"hello\"}\n")["pid"],
        json!(py.pid())
    );
    // A long line without a newline is cut off too.
    let mut s3 = UnixStream::connect(&py.sock).expect("connect");
    let reply = raw_roundtrip(&mut s3, &vec![b'{'; 80 * 1024]);
    assert_eq!(reply["error"], json!("request longer than 65536 bytes"));
}

#[test]
fn malformed_requests_get_errors_not_a_crash() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    let mut s = connect_raw(&py.sock);
    // Nesting deep enough to exhaust Python's recursion limit, within the size bound.
    let mut deep = vec![b'['; 60_000];
    deep.push(b'\n');
    for bad in [
        &b"garbage\n"[..],
        b"[1, 2]\n",
        b"{\"cmd\": 3}\n",
        b"{\"cmd\":\"rm -rf\"}\n",
        b"\xff\xfe\n",
        b"{\"cmd\":\"set_fraction\",\"device\":0,\"fraction\":7}\n",
        &deep,
    ] {
        let reply = raw_roundtrip(&mut s, bad);
        assert_eq!(reply["ok"], json!(false), "{bad:?} → {reply}");
        assert!(reply["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
    // Same connection, still served.
    assert_eq!(
        raw_roundtrip(&mut s, b"{\"cmd\":\"hello\"}\n")["pid"],
        json!(py.pid())
    );
    drop(s);
    assert!(py.finish().success(), "the process died");
}

/// Reads `n` lines a subscription pushes on `stream` (a companion without torch: each says
/// so) and returns when each arrived.
fn read_pushes(stream: &UnixStream, n: usize) -> Vec<Instant> {
    let mut r = BufReader::new(stream.try_clone().expect("clone"));
    (0..n)
        .map(|_| {
            let mut line = String::new();
            r.read_line(&mut line).expect("a pushed line");
            let at = Instant::now();
            let v: Value = serde_json::from_str(&line).expect("JSON");
            assert_eq!(v["torch_imported"], json!(false), "{v}");
            assert_eq!(v["error"], json!("torch not imported"), "{v}");
            at
        })
        .collect()
}

/// `subscribe` with `changes_only`: figures that did not move (no torch here: they never do)
/// are pushed once at once and then only once per heartbeat, not every interval; the app's
/// client gets that agreement back; a bad flag or heartbeat is refused.
#[test]
fn a_changes_only_subscription_sends_unchanged_figures_once_per_heartbeat() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    let mut s = connect_raw(&py.sock);
    let reply = raw_roundtrip(
        &mut s,
        b"{\"cmd\":\"subscribe\",\"interval_ms\":200,\"changes_only\":true,\"heartbeat_ms\":1200}\n",
    );
    assert_eq!(reply["changes_only"], json!(true), "{reply}");
    assert_eq!(reply["heartbeat_ms"], json!(1200), "{reply}");
    let at = read_pushes(&s, 2);
    // First push at once (within the interval of the reply); the same figures again only
    // after the heartbeat, where every-interval pushes would have sent five more.
    let gap = at[1] - at[0];
    assert!(
        gap >= Duration::from_millis(1100) && gap < Duration::from_millis(2500),
        "{gap:?}"
    );
    drop(s);

    for bad in [
        &b"{\"cmd\":\"subscribe\",\"interval_ms\":200,\"changes_only\":1}\n"[..],
        b"{\"cmd\":\"subscribe\",\"interval_ms\":200,\"changes_only\":true,\"heartbeat_ms\":\"x\"}\n",
    ] {
        let mut b = connect_raw(&py.sock);
        let reply = raw_roundtrip(&mut b, bad);
        assert_eq!(reply["ok"], json!(false), "{reply}");
    }

    let start = ProcReader::default().start_time_ms(py.pid());
    let mut c =
        Client::connect_at(&py.sock, py.pid(), start, torch::DEFAULT_TIMEOUT).expect("client");
    assert_eq!(
        c.subscribe(Duration::from_millis(200), Some(Duration::from_millis(100)))
            .expect("subscribe"),
        torch::Subscribed::Changes {
            heartbeat: Duration::from_millis(200)
        },
        "a heartbeat is never shorter than the interval"
    );
    drop(c);
    assert!(py.finish().success(), "the process died");
}

/// `subscribe` turns a connection into a feed paced by the companion's own timer (what the
/// engine's poller reads, one `recv` per companion and poll); the interval has a floor; a
/// closed subscription frees its connection slot.
#[test]
fn a_subscription_pushes_figures_on_the_companions_own_timer() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    let mut s = connect_raw(&py.sock);
    let reply = raw_roundtrip(&mut s, b"{\"cmd\":\"subscribe\",\"interval_ms\":50}\n");
    assert_eq!(reply["subscribed"], json!(true), "{reply}");
    assert_eq!(reply["interval_ms"], json!(200), "raised to the floor");
    let at = read_pushes(&s, 4);
    // Paced, not a burst: three intervals of 200 ms between the first and the fourth.
    let span = at[3] - at[0];
    assert!(span >= Duration::from_millis(540), "{span:?}");

    let mut bad = connect_raw(&py.sock);
    let reply = raw_roundtrip(
        &mut bad,
        b"{\"cmd\":\"subscribe\",\"interval_ms\":\"fast\"}\n",
    );
    assert_eq!(reply["ok"], json!(false), "{reply}");
    drop(bad);

    // The app's client: subscribed, then the newest push without waiting.
    let start = ProcReader::default().start_time_ms(py.pid());
    let mut c =
        Client::connect_at(&py.sock, py.pid(), start, torch::DEFAULT_TIMEOUT).expect("client");
    assert_eq!(
        c.subscribe(Duration::from_millis(200), None)
            .expect("subscribe"),
        torch::Subscribed::Every
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let facts = loop {
        if let Some(f) = c.read_pushed().expect("read") {
            break f;
        }
        assert!(Instant::now() < deadline, "nothing pushed");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(facts.pid, py.pid());
    assert_eq!(facts.error.as_deref(), Some("torch not imported"));
    // The next push carries the same figures (no torch: nothing moves): it is recognised
    // without a parse, and the last parsed figures are still there to be had.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match c.poll_pushed().expect("read") {
            torch::client::Pushed::Same => break,
            torch::client::Pushed::Nothing => {}
            torch::client::Pushed::Figures(f) => panic!("an unchanged push was parsed: {f:?}"),
        }
        assert!(Instant::now() < deadline, "nothing pushed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.last_pushed_facts().expect("last figures"), facts);
    drop(c);
    drop(s);

    // More subscriptions opened and closed than the companion has slots: each closed one
    // ends its push loop and frees its slot, so a plain request is still served.
    for _ in 0..10 {
        let mut t = connect_raw(&py.sock);
        let reply = raw_roundtrip(&mut t, b"{\"cmd\":\"subscribe\",\"interval_ms\":1000}\n");
        assert_eq!(reply["subscribed"], json!(true), "{reply}");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut t = connect_raw(&py.sock);
        let reply = raw_roundtrip(&mut t, b"{\"cmd\":\"hello\"}\n");
        if reply["pid"] == json!(py.pid()) {
            break;
        }
        assert!(
            reply["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("busy"))
                && Instant::now() < deadline,
            "{reply}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(py.finish().success(), "the process died");
}

#[test]
fn stale_sockets_of_dead_processes_are_dropped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("vramwarden");
    std::fs::create_dir(&dir).expect("mkdir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    let mut dead = Command::new("true").spawn().expect("true");
    let _ = dead.wait();
    let stale = dir.join(torch::socket_name(dead.id()));
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind"));
    assert!(stale.exists());
    // The app drops it (and lists nothing for it) …
    assert!(torch::list_sockets(&dir).is_empty());
    assert!(!stale.exists());
    // … and so does a starting companion.
    drop(std::os::unix::net::UnixListener::bind(&stale).expect("bind"));
    let py = companion(tmp.path());
    assert!(!stale.exists());
    assert_eq!(torch::list_sockets(&dir), vec![(py.pid(), py.sock.clone())]);
}

#[test]
fn python_dash_m_runs_a_script_with_the_companion_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = tmp.path().join("train.py");
    std::fs::write(
        &script,
        "import os, sys, json\n\
         sock = os.path.join(os.environ['XDG_RUNTIME_DIR'], 'vramwarden', f'torch-{os.getpid()}.sock')\n\
         print(json.dumps({'argv': sys.argv, 'name': __name__, 'socket': os.path.exists(sock)}))\n",
    )
    .expect("write");
    let out = Command::new("python3")
        .args(["-m", "vramwarden_torch"])
        .arg(&script)
        .args(["--lr", "0.1"])
        .env("PYTHONPATH", pkg_dir())
        .env("XDG_RUNTIME_DIR", tmp.path())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["argv"],
        json!([script.display().to_string(), "--lr", "0.1"])
    );
    assert_eq!(v["name"], json!("__main__"));
    assert_eq!(v["socket"], json!(true));
}

#[test]
fn headroom_arithmetic_and_no_torch() {
    let code = "import vramwarden_torch as v\n\
        G = 1 << 30\n\
        assert v.compute_headroom(10*G, 80*G, 30*G, 10*G, None, G) == 29*G\n\
        assert v.compute_headroom(10*G, 80*G, 30*G, 10*G, 0.25, G) == 9*G\n\
        assert v.compute_headroom(0, 80*G, 5*G, 5*G, None, G) == 0\n\
        assert v.compute_headroom(0, 100*G, 0, 0) == 0\n\
        try:\n    v.headroom()\nexcept RuntimeError as e:\n    assert 'not imported' in str(e)\nelse:\n    raise SystemExit('no error')\n\
        print('ok')";
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = Command::new("python3")
        .args(["-c", code])
        .env("PYTHONPATH", pkg_dir())
        .env("XDG_RUNTIME_DIR", tmp.path())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}

/// The `.pth` hook in a temporary venv. The `torch` here is a STAND-IN (a one-line `torch.py`
/// with a `__version__`) used only to test that importing a module named torch triggers the
/// companion; it has no allocator and no figures are read from it.
#[test]
fn pth_hook_installs_into_a_venv_starts_only_with_torch_and_uninstalls() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let venv = tmp.path().join("venv");
    let st = Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .expect("python3 -m venv");
    assert!(
        st.success(),
        "python3 -m venv failed (Debian: apt-get install python3-venv)"
    );
    let vpy = venv.join("bin/python");
    let standin = tmp.path().join("standin");
    std::fs::create_dir(&standin).expect("mkdir");
    std::fs::write(standin.join("torch.py"), "__version__ = '0.0-standin'\n").expect("write");
    let xdg = tmp.path().join("xdg");
    std::fs::create_dir(&xdg).expect("mkdir");

    let out = Command::new(bin())
        .args(["torch", "enable", "--python"])
        .arg(&vpy)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let site = torch::hook::site_info(&vpy).expect("site info");
    assert!(site.venv);
    assert!(site.purelib.starts_with(&venv));
    assert!(site.purelib.join(torch::hook::PTH_NAME).exists());
    assert!(site.purelib.join("vramwarden_torch/_server.py").exists());

    let run = |with_torch: bool| -> Value {
        let code = if with_torch {
            "import sys, json, torch; print(json.dumps(sorted(m for m in sys.modules if 'vramwarden' in m)), flush=True); sys.stdin.read()"
        } else {
            "import sys, json; print(json.dumps(sorted(m for m in sys.modules if 'vramwarden' in m)), flush=True); sys.stdin.read()"
        };
        let mut child = Command::new(&vpy)
            .args(["-c", code])
            .env("PYTHONPATH", &standin) // the stand-in torch only; not the companion's source
            .env("XDG_RUNTIME_DIR", &xdg)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("venv python runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("a line");
        let sock = xdg.join("vramwarden").join(torch::socket_name(child.id()));
        let exists = sock.exists();
        let hello = if exists {
            Client::connect_at(&sock, child.id(), None, torch::DEFAULT_TIMEOUT)
                .map(|c| c.hello().clone())
                .ok()
        } else {
            None
        };
        drop(child.stdin.take());
        let _ = child.wait();
        json!({
            "modules": serde_json::from_str::<Value>(&line).expect("JSON"),
            "socket": exists,
            "torch_version": hello.and_then(|h| h.torch_version),
        })
    };
    let without = run(false);
    assert_eq!(without["socket"], json!(false), "{without}");
    assert_eq!(
        without["modules"],
        json!(["_vramwarden_torch_hook"]),
        "{without}"
    );
    let with = run(true);
    assert_eq!(with["socket"], json!(true), "{with}");
    assert_eq!(with["torch_version"], json!("0.0-standin"), "{with}");
    assert!(with["modules"]
        .as_array()
        .expect("array")
        .contains(&json!("vramwarden_torch")));

    let out = Command::new(bin())
        .args(["torch", "disable", "--python"])
        .arg(&vpy)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    assert!(!site.purelib.join(torch::hook::PTH_NAME).exists());
    assert!(!site.purelib.join("vramwarden_torch").exists());
    assert!(!site.purelib.join("_vramwarden_torch_hook.py").exists());
    let after = run(true);
    assert_eq!(after["socket"], json!(false), "{after}");
    assert_eq!(after["modules"], json!([]), "{after}");
}

/// utime + stime of `pid` in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = &stat[stat.rfind(')').expect(")") + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime")
}

/// Not a timed assertion: prints the mean time of a stats round trip (the reply of a process
/// without torch goes through the same socket, JSON and peer path).
#[test]
fn stats_round_trip_time_is_printed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    let mut c = Client::connect_at(&py.sock, py.pid(), None, torch::DEFAULT_TIMEOUT).expect("ok");
    // An idle companion blocks in accept/recv: no CPU while nobody asks.
    let idle_before = cpu_ticks(py.pid());
    std::thread::sleep(Duration::from_secs(1));
    let idle = cpu_ticks(py.pid()) - idle_before;
    assert!(
        idle <= 2,
        "the idle companion used {idle} clock ticks in 1 s"
    );
    let n = 2000;
    let cpu_before = cpu_ticks(py.pid());
    let t = Instant::now();
    for _ in 0..n {
        assert!(matches!(c.stats(), Err(TorchError::TorchNotImported(_))));
    }
    let per = t.elapsed() / n;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let cpu_us = (cpu_ticks(py.pid()) - cpu_before) as f64 / hz * 1e6 / f64::from(n);
    println!(
        "companion CPU per stats request: {cpu_us:.1} µs (at 1 Hz: {:.4} % of a core); idle 1 s: {idle} ticks",
        cpu_us / 1e4
    );
    let t = Instant::now();
    for _ in 0..200 {
        drop(Client::connect_at(&py.sock, py.pid(), None, torch::DEFAULT_TIMEOUT).expect("ok"));
    }
    let connect = t.elapsed() / 200;
    println!(
        "stats round trip: mean {per:?} over {n}; connect + peer check + hello: mean {connect:?}"
    );
}

/// A stopped (hung) process never blocks the caller: the hello runs into the timeout.
#[test]
fn a_hung_companion_times_out_instead_of_blocking() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    let pid = py.pid() as libc::pid_t;
    // SAFETY: plain syscall on our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
    let t = Instant::now();
    let r = Client::connect_at(&py.sock, py.pid(), None, Duration::from_millis(300));
    let took = t.elapsed();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
    assert!(
        matches!(r, Err(TorchError::Timeout(p)) if p == py.pid()),
        "{r:?}"
    );
    assert!(took < Duration::from_secs(5), "blocked for {took:?}");
    // Once it runs again it answers.
    assert!(Client::connect_at(&py.sock, py.pid(), None, torch::DEFAULT_TIMEOUT).is_ok());
}

/// Without XDG_RUNTIME_DIR both sides use `/tmp/vramwarden-UID`; a folder there that belongs
/// to another user is refused. Runs as a uid no account uses (200000 + this test process's pid
/// modulo 10000, so two test runs at once do not meet) so the real /tmp
/// folder it touches is its own.
#[test]
fn tmp_fallback_folder_is_used_and_a_foreign_one_refused() {
    assert_root();
    let uid_n = 200_000 + std::process::id() % 10_000;
    let uid = uid_n.to_string();
    let uid = uid.as_str();
    let fallback = PathBuf::from(format!("/tmp/vramwarden-{uid}"));
    let _ = std::fs::remove_dir_all(&fallback);
    // The package and the binary where that uid can read them.
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let pkg = tmp.path().join("vramwarden_torch");
    std::fs::create_dir(&pkg).expect("mkdir");
    for f in ["__init__.py", "__main__.py", "_server.py"] {
        std::fs::copy(pkg_dir().join("vramwarden_torch").join(f), pkg.join(f)).expect("copy");
    }
    let exe = tmp.path().join("vramwarden-bin");
    std::fs::copy(bin(), &exe).expect("copy");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let as_uid = |prog: &Path| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", uid, "--regid", uid, "--clear-groups"])
            .arg(prog)
            .env_remove("XDG_RUNTIME_DIR")
            .env("PYTHONPATH", tmp.path());
        c
    };
    let code = "import os, sys, vramwarden_torch; print(vramwarden_torch.socket_path(), os.path.exists(vramwarden_torch.socket_path()), flush=True); sys.stdin.read()";

    // A fallback folder owned by root: the companion does not start (and says why).
    std::fs::create_dir(&fallback).expect("mkdir");
    let out = as_uid(Path::new("/usr/bin/python3"))
        .args(["-c", code])
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("belongs to uid 0"),
        "{out:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with("False\n"),
        "{out:?}"
    );
    std::fs::remove_dir(&fallback).expect("rmdir");

    // Its own: the socket is there, and the app (same uid, no XDG_RUNTIME_DIR) finds it.
    let mut child = as_uid(Path::new("/usr/bin/python3"))
        .args(["-c", code])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("runs");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("line");
    let pid = child.id();
    // setpriv execs python, so the child's pid is python's.
    assert_eq!(
        line.trim(),
        format!("{}/torch-{pid}.sock True", fallback.display())
    );
    let md = std::fs::metadata(&fallback).expect("folder");
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&md), uid_n);
    assert_eq!(md.permissions().mode() & 0o777, 0o700);
    let out = output_retrying_busy(as_uid(&exe).args(["torch", "ls", "--format", "json"]));
    let list: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(list[0]["pid"], json!(pid), "{out:?}");
    drop(child.stdin.take());
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&fallback);
}

/// With no companion socket anywhere the poller polls every 5 intervals; once one is listed,
/// every interval again.
#[test]
fn the_poller_wakes_less_often_while_no_companion_exists() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("vramwarden");
    std::fs::create_dir_all(&dir).expect("dir");
    let interval = Duration::from_millis(20);
    let watch = torch::Watch::spawn(vec![dir.clone()], interval).expect("spawn");
    std::thread::sleep(Duration::from_secs(1));
    // No socket anywhere: a poll every 5 intervals (about 10 in a second, not 50).
    let idle = watch.state().polls;
    assert!(
        (2..=16).contains(&idle),
        "{idle} polls in 1 s with no companion"
    );
    // A socket is listed (a stand-in: a file with a companion's socket name, for a process
    // that exists, which refuses the connection): polls are one interval apart again.
    let stand_in = dir.join(format!("torch-{}.sock", std::process::id()));
    std::fs::write(&stand_in, b"").expect("stand-in");
    std::thread::sleep(Duration::from_millis(150));
    let before = watch.state().polls;
    std::thread::sleep(Duration::from_secs(1));
    let busy = watch.state().polls - before;
    assert!(
        busy >= 15 && busy >= 2 * idle,
        "{busy} polls in 1 s with a socket listed, {idle} with none"
    );
    assert!(
        watch.state().refused.contains_key(&std::process::id()),
        "{:?}",
        watch.state()
    );
}

/// The engine's poller: facts appear for the right pid + start time only, and go when the
/// process exits. Prints the cost of one lookup (what a tick pays per process).
#[test]
fn watch_polls_companions_in_the_background() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path());
    let pid = py.pid();
    let start = ProcReader::default().start_time_ms(pid).expect("start");
    let dir = tmp.path().join("vramwarden");
    let watch = torch::Watch::spawn(vec![dir.clone()], Duration::from_millis(50)).expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    while watch.get(pid, start).is_none() {
        assert!(
            Instant::now() < deadline,
            "never polled: {:?}",
            watch.state()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let f = watch.get(pid, start).expect("facts");
    assert_eq!(f.error.as_deref(), Some("torch not imported"));
    // Unchanged figures are pushed once per heartbeat (5 s), not every poll: between two,
    // polls that find nothing keep the figures, and the connection is not given up.
    let polls = watch.state().polls;
    // Read as the engine reads them (once per tick), many times over 1.5 s: present at
    // every read, not every other poll.
    let until = Instant::now() + Duration::from_millis(1500);
    let mut reads = 0;
    while Instant::now() < until {
        assert_eq!(
            watch.get(pid, start).as_ref(),
            Some(&f),
            "read {reads}: {:?}",
            watch.state()
        );
        reads += 1;
        std::thread::sleep(Duration::from_millis(37));
    }
    let later = watch.state();
    assert!(later.polls >= polls + 10, "{later:?}");
    assert_eq!(later.facts.get(&pid), Some(&f), "{later:?}");
    assert!(later.refused.is_empty(), "{later:?}");
    assert!(
        watch.get(pid, start + 1).is_none(),
        "another start time is another process"
    );
    let n = 100_000u32;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(watch.get(pid, start));
    }
    println!(
        "Watch::get per process per tick: mean {:?}",
        t.elapsed() / n
    );

    // The rules' release: identity by pid + start time, through the same checks.
    let r = torch::release(std::slice::from_ref(&dir), pid, Some(start));
    assert!(
        matches!(r, Err(TorchError::TorchNotImported(p)) if p == pid),
        "{r:?}"
    );
    let r = torch::release(&[dir], pid, Some(start - 1000));
    assert!(
        matches!(r, Err(TorchError::StartTimeMismatch { .. })),
        "{r:?}"
    );

    assert!(py.finish().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while watch.state().facts.contains_key(&pid) {
        assert!(Instant::now() < deadline, "an exited process stayed listed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(watch.state().polls >= 2);
}

/// `torch enable` outside a venv writes into the user site (here PYTHONUSERBASE points at a
/// temporary folder). The `torch` is the same STAND-IN as above, used only for the trigger.
#[test]
fn pth_hook_installs_into_the_user_site_outside_a_venv() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let base = tmp.path().join("userbase");
    let standin = tmp.path().join("standin");
    std::fs::create_dir(&standin).expect("mkdir");
    std::fs::write(standin.join("torch.py"), "__version__ = '0.0-standin'\n").expect("write");
    let xdg = tmp.path().join("xdg");
    std::fs::create_dir(&xdg).expect("mkdir");
    let user_site = String::from_utf8(
        Command::new("python3")
            .args(["-m", "site", "--user-site"])
            .env("PYTHONUSERBASE", &base)
            .output()
            .expect("python3")
            .stdout,
    )
    .expect("utf-8");
    let user_site = PathBuf::from(user_site.trim());
    assert!(user_site.starts_with(&base), "{}", user_site.display());
    let out = Command::new(bin())
        .args(["torch", "enable"])
        .env("PYTHONUSERBASE", &base)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("user site"));
    assert!(user_site.join(torch::hook::PTH_NAME).exists());
    let probe = |xdg: &Path| {
        Command::new("python3")
            .args(["-c", "import os, torch, vramwarden_torch; print(os.path.exists(vramwarden_torch.socket_path()))"])
            .env("PYTHONUSERBASE", &base)
            .env("PYTHONPATH", &standin)
            .env("XDG_RUNTIME_DIR", xdg)
            .output()
            .expect("python3")
    };
    let out = probe(&xdg);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "True",
        "{out:?}"
    );
    let out = Command::new(bin())
        .args(["torch", "disable"])
        .env("PYTHONUSERBASE", &base)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    assert!(!user_site.join(torch::hook::PTH_NAME).exists());
    assert!(!user_site.join("vramwarden_torch").exists());
    // Gone: importing the companion now fails.
    let out = probe(&xdg);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No module named 'vramwarden_torch'"),
        "{out:?}"
    );
}

/// A forked child (a DataLoader worker) neither serves nor removes its parent's socket when it
/// exits normally (atexit runs in it).
#[test]
fn a_forked_child_leaves_the_parents_socket_alone() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let code = "import os, sys, vramwarden_torch\n\
        p = vramwarden_torch.socket_path()\n\
        pid = os.fork()\n\
        if pid == 0:\n    sys.exit(0)\n\
        os.waitpid(pid, 0)\n\
        child_sock = os.path.exists(vramwarden_torch.socket_path(pid))\n\
        print(os.path.exists(p), child_sock, flush=True)\n\
        sys.stdin.read()";
    let mut py = python(tmp.path(), None, code, true);
    let mut line = String::new();
    BufReader::new(py.child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("line");
    assert_eq!(
        line.trim(),
        "True False",
        "the child removed the socket or made one"
    );
    // And the parent still answers.
    let c = Client::connect_at(&py.sock, py.pid(), None, torch::DEFAULT_TIMEOUT);
    assert!(c.is_ok(), "{c:?}");
}
