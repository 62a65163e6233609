//! Attacks on the agent's HTTP front (issue 27, items 1–5), each on real sockets against a real
//! `vramwarden --demo agent` child on loopback: huge and absurd `Content-Length`s, a client that
//! pipelines requests and never reads, a crowd of idle connections (past the process's
//! open-file limit), an endless header line. After each, the agent is alive and answers.
//! Also: `/healthz` on a stuck sampler and on a failed recording, systemd's watchdog, the
//! warning beyond loopback.

#[path = "agent_support/mod.rs"]
mod agent_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use agent_support::{get, wait_for, AgentProc};

/// Sends `bytes` on a fresh connection and reads what comes back until the server closes it
/// (or 10 s pass).
fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(bytes).expect("write");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The agent is alive and `/metrics` and `/healthz` answer 200, each within `limit`.
fn answers(a: &mut AgentProc, limit: Duration) {
    assert!(
        a.child.try_wait().expect("try_wait").is_none(),
        "the agent died"
    );
    for path in ["/healthz", "/metrics"] {
        let t = Instant::now();
        let r = get(a.addr, path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert!(t.elapsed() < limit, "{path} took {:?}", t.elapsed());
    }
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("status")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

#[test]
fn a_get_with_a_huge_content_length_gets_413_and_the_agent_lives_on() {
    let mut a = AgentProc::start("", &["--no-record"]);
    let reply = raw(
        a.addr,
        b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999999\r\n\r\n",
    );
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    // Chunked counts as unbounded too.
    let reply = raw(
        a.addr,
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    // A small body on a GET is ignored.
    let reply = raw(
        a.addr,
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc",
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    answers(&mut a, Duration::from_secs(2));
}

#[test]
fn u64_max_content_length_four_times_leaves_the_front_answering() {
    let mut a = AgentProc::start("", &["--no-record"]);
    for path in ["/metrics", "/healthz", "/api/v1/command", "/"] {
        let reply = raw(
            a.addr,
            format!(
                "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 18446744073709551615\r\n\r\n"
            )
            .as_bytes(),
        );
        let status: u16 = reply
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        assert!(
            (400..500).contains(&status) || reply.is_empty(),
            "{path}: {reply}"
        );
    }
    answers(&mut a, Duration::from_secs(2));
}

#[test]
fn a_client_that_pipelines_and_never_reads_does_not_block_others() {
    let mut a = AgentProc::start("", &["--no-record"]);
    let mut hog = TcpStream::connect(a.addr).expect("connect");
    hog.set_write_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let one = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let mut sent = 0usize;
    // Thousands of requests, until the agent stops taking more (its replies fill the socket).
    while sent < 20_000 {
        if hog.write_all(one).is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent > 100, "only {sent} requests went out");
    // While the hog is held open, others are answered at once.
    for _ in 0..3 {
        answers(&mut a, Duration::from_secs(2));
    }
    drop(hog);
    answers(&mut a, Duration::from_secs(2));
}

/// Connects from `source` (any 127.x.y.z is this machine).
fn connect_from(source: [u8; 4], to: SocketAddr) -> Option<TcpStream> {
    // SAFETY: plain socket calls on a descriptor this function owns.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let stream = <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd);
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_addr.s_addr = u32::from_ne_bytes(source);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&raw const sa).cast(), len) != 0 {
            return None;
        }
        let SocketAddr::V4(v4) = to else { return None };
        sa.sin_port = v4.port().to_be();
        sa.sin_addr.s_addr = u32::from_ne_bytes(v4.ip().octets());
        if libc::connect(fd, (&raw const sa).cast(), len) != 0 {
            return None;
        }
        Some(stream)
    }
}

fn healthz_from(source: [u8; 4], to: SocketAddr) -> Option<String> {
    let mut s = connect_from(source, to)?;
    s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

#[test]
fn six_hundred_idle_connections_past_the_file_limit_do_not_stop_accepting() {
    // The agent may hold 200 files at most (it cannot raise that: hard = soft), fewer than
    // the crowd's 600 connections from ten addresses.
    let mut a = AgentProc::start_with("", &["--no-record"], |cmd| {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe; nothing else runs in the child here.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 200,
                    rlim_max: 200,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let mut crowd = Vec::new();
    for i in 0..600u32 {
        if let Some(s) = connect_from([127, 0, 0, 1 + (i % 10) as u8], a.addr) {
            crowd.push(s);
        }
    }
    assert!(crowd.len() >= 500, "only {} connected", crowd.len());
    // Newcomers, from a crowded address and from a new one, are answered while the crowd is
    // held open.
    for source in [[127, 0, 0, 1], [127, 0, 0, 77], [127, 0, 0, 5]] {
        let got = wait_for(
            Duration::from_secs(10),
            "an answer beside the crowd",
            || healthz_from(source, a.addr).filter(|r| r.starts_with("HTTP/1.0 200")),
        );
        assert!(got.contains("ok"), "{got}");
    }
    drop(crowd);
    answers(&mut a, Duration::from_secs(2));
}

#[test]
fn an_endless_header_line_is_cut_off_after_a_bounded_number_of_bytes() {
    let mut a = AgentProc::start("", &["--no-record"]);
    let before = rss_kib(a.child.id());
    let mut s = TcpStream::connect(a.addr).expect("connect");
    s.set_write_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
        .expect("write");
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0usize;
    let cut = loop {
        if sent >= 256 << 20 {
            break false;
        }
        match s.write(&chunk) {
            Ok(n) => sent += n,
            Err(_) => break true,
        }
    };
    assert!(cut, "the agent took {sent} bytes of one header line");
    // Socket buffers on both sides take a few MiB; the agent itself keeps 64 KiB at most.
    assert!(
        sent < 24 << 20,
        "the agent took {sent} bytes before closing"
    );
    let grown = rss_kib(a.child.id()).saturating_sub(before);
    assert!(grown < 16 * 1024, "the agent's memory grew by {grown} KiB");
    answers(&mut a, Duration::from_secs(2));
}

#[test]
fn healthz_says_503_when_recording_fails() {
    // The data folder is a file: no session log can be written.
    let spot = tempfile::NamedTempFile::new().expect("tmp");
    let mut a = AgentProc::start_with("", &[], |cmd| {
        cmd.env("VRAMWARDEN_DATA_DIR", spot.path());
    });
    let r = wait_for(Duration::from_secs(10), "a 503", || {
        Some(get(a.addr, "/healthz")).filter(|r| r.status == 503)
    });
    assert!(r.text().contains("Recording failed"), "{}", r.text());
    // Metrics still answer.
    assert_eq!(get(a.addr, "/metrics").status, 200);
    assert!(a.child.try_wait().expect("try_wait").is_none());
}

#[test]
fn systemd_hears_ready_and_the_watchdog_while_samples_arrive() {
    let dir = tempfile::tempdir().expect("tmp");
    let sock_path = dir.path().join("notify");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).expect("bind");
    sock.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    let _a = AgentProc::start_with("", &["--no-record", "--interval", "100ms"], |cmd| {
        cmd.env("NOTIFY_SOCKET", &sock_path)
            .env("WATCHDOG_USEC", "1500000");
    });
    let mut heard = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut buf = [0u8; 256];
    while Instant::now() < deadline
        && heard
            .iter()
            .filter(|m: &&String| *m == "WATCHDOG=1")
            .count()
            < 2
    {
        let n = sock.recv(&mut buf).expect("a datagram");
        heard.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    assert!(heard.iter().any(|m| m == "READY=1"), "{heard:?}");
    assert!(
        heard.iter().filter(|m| *m == "WATCHDOG=1").count() >= 2,
        "{heard:?}"
    );
}

#[test]
fn listening_beyond_loopback_warns_loudly() {
    let mut a = AgentProc::start("", &["--no-record", "--listen", "0.0.0.0:0"]);
    assert!(
        a.startup
            .iter()
            .any(|l| l.contains("BEYOND LOOPBACK WITHOUT TLS") && l.contains("SSH")),
        "{:?}",
        a.startup
    );
    let quiet = AgentProc::start("", &["--no-record"]);
    assert!(
        !quiet.startup.iter().any(|l| l.contains("BEYOND LOOPBACK")),
        "{:?}",
        quiet.startup
    );
    answers(&mut a, Duration::from_secs(2));
}

// --- in process: a sampler that stops making progress ------------------------------------

/// The simulated GPUs, until the `hang_after`th sample: that one never returns (until the
/// test ends).
struct Hanging {
    inner: vramwarden::source::sim::SimSource,
    taken: u32,
    hang_after: u32,
    release: std::sync::mpsc::Receiver<()>,
}

impl vramwarden::source::GpuSource for Hanging {
    fn info(&self) -> vramwarden::model::SourceInfo {
        self.inner.info()
    }

    fn sample(
        &mut self,
        now_ms: vramwarden::model::UnixMs,
    ) -> Result<vramwarden::model::Snapshot, vramwarden::source::SourceError> {
        self.taken += 1;
        if self.taken > self.hang_after {
            let _ = self.release.recv_timeout(Duration::from_secs(60));
        }
        self.inner.sample(now_ms)
    }
}

#[test]
fn healthz_says_503_when_the_sampler_stops_making_progress() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, "").expect("config");
    let (release_tx, release) = std::sync::mpsc::channel();
    let release = std::sync::Mutex::new(Some(release));
    let factory: vramwarden::engine::sampler::SourceFactory = Box::new(move || {
        let release = release
            .lock()
            .ok()
            .and_then(|mut r| r.take())
            .ok_or_else(|| vramwarden::source::SourceError::Unavailable("used twice".into()))?;
        Ok(Box::new(Hanging {
            inner: vramwarden::source::sim::SimSource::demo(vramwarden::model::now_ms()),
            taken: 0,
            hang_after: 10,
            release,
        }) as Box<dyn vramwarden::source::GpuSource>)
    });
    let opts = vramwarden::front::agent::AgentOptions {
        source: vramwarden::source::SourceKind::demo(),
        interval: Some(Duration::from_millis(100)),
        config: Some(cfg),
        listen: "127.0.0.1:0".parse().expect("addr"),
        no_record: true,
        token_file: Some(dir.path().join("agent.token")),
        max_processes: 200,
        remote_other_users: false,
    };
    let agent = vramwarden::front::agent::start(&opts, factory, None).expect("start the agent");
    let ok = wait_for(Duration::from_secs(10), "a healthy agent", || {
        Some(get(agent.addr, "/healthz")).filter(|r| r.status == 200)
    });
    assert!(ok.text().starts_with("ok"), "{}", ok.text());
    let stale = wait_for(Duration::from_secs(10), "a 503", || {
        Some(get(agent.addr, "/healthz")).filter(|r| r.status == 503)
    });
    assert!(stale.text().contains("no progress"), "{}", stale.text());
    // Released (the hung call returns, and every later one at once), it stops cleanly.
    drop(release_tx);
    assert!(agent.stop());
}

/// `GET path` on a fresh connection from this process (root): true when it answered 200
/// within 5 s, false on a reset, a refusal or anything else.
fn answered(addr: SocketAddr, path: &str) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    if s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out.starts_with(b"HTTP/1.1 200") || out.starts_with(b"HTTP/1.0 200")
}

/// A local user's flood (uid 65534 through setpriv, as `python3`): 64 keep-alive connections
/// from 127.0.0.1, each keeping 64 pipelined `GET /-/ready` outstanding (it reads the replies
/// and sends as many again), for `seconds`. Prints "up" once every connection is open.
fn flood_as_nobody(addr: SocketAddr, seconds: u32) -> std::process::Child {
    let code = format!(
        r#"
import selectors, socket, time
req = b"GET /-/ready HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
sel = selectors.DefaultSelector()
socks = []
for _ in range(64):
    s = socket.create_connection(("{ip}", {port}))
    s.sendall(req * 64)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    socks.append(s)
print("up", flush=True)
end = time.time() + {seconds}
while time.time() < end:
    for key, _ in sel.select(timeout=0.2):
        try:
            data = key.fileobj.recv(65536)
        except BlockingIOError:
            continue
        if not data:
            sel.unregister(key.fileobj)
            continue
        try:
            key.fileobj.send(req * data.count(b"HTTP/1.1 "))
        except BlockingIOError:
            pass
"#,
        ip = addr.ip(),
        port = addr.port()
    );
    let mut child = std::process::Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &code,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("setpriv python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().expect("stdout")),
        &mut line,
    )
    .expect("the flood started");
    assert_eq!(line.trim(), "up");
    child
}

/// Security v3, item 1: another local user's flood from 127.0.0.1 (64 connections × 64
/// pipelined requests, no token) never locks out a client on the same address: Prometheus or
/// an `ssh -L` tunnel polling `/metrics` every 0.25 s is answered every time.
#[test]
fn a_local_users_flood_never_locks_out_another_on_the_same_address() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root to run the flood as another user (CI runs as root)"
    );
    let mut a = AgentProc::start("", &["--no-record"]);
    let mut flood = flood_as_nobody(a.addr, 15);
    std::thread::sleep(Duration::from_millis(500));
    let (mut ok, mut failed) = (0, 0);
    for _ in 0..40 {
        if answered(a.addr, "/metrics") {
            ok += 1;
        } else {
            failed += 1;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let _ = flood.kill();
    let _ = flood.wait();
    assert_eq!(failed, 0, "{ok} answered, {failed} refused or reset");
    answers(&mut a, Duration::from_secs(2));
}

/// Security v3, item 8: sixteen parallel `/api/past` over many session logs leave `/metrics`
/// and `/healthz` answering within 2 s each (a lane of their own), and the logs are replayed
/// once (cached per log), not once per request.
#[test]
fn parallel_api_past_never_starves_metrics() {
    let mut a = AgentProc::start("", &["--no-record"]);
    let logs = session_logs(&a, PAST_LOGS);
    let auth = a.auth();
    println!(
        "{} bytes of logs",
        PAST_LOGS as u64 * std::fs::metadata(&logs[0]).expect("meta").len()
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let addr = a.addr;
    let askers: Vec<_> = (0..16)
        .map(|_| {
            let (auth, stop) = (auth.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = Instant::now();
                    let r = agent_support::request(
                        addr,
                        "GET",
                        "/api/past",
                        &[("Authorization", &auth)],
                        b"",
                    );
                    assert_eq!(r.status, 200, "{}", r.text());
                    if n == 0 {
                        println!("first /api/past in {:?}", t.elapsed());
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(8) {
        answers(&mut a, Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let asked: u32 = askers.into_iter().map(|h| h.join().expect("asker")).sum();
    assert!(asked >= 16, "only {asked} answers to /api/past");
}

/// Session logs `/api/past` reads in [`parallel_api_past_never_starves_metrics`].
const PAST_LOGS: usize = 3;

/// `n` session logs of 6 h of the simulated GPUs (the crate's own writer, through `record`)
/// in `a`'s sessions folder.
fn session_logs(a: &AgentProc, n: usize) -> Vec<std::path::PathBuf> {
    let sessions = a.dir.path().join("data").join("sessions");
    std::fs::create_dir_all(&sessions).expect("mkdir");
    let first = sessions.join("s0.vwlog");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args([
            "record",
            "--demo",
            "--speed",
            "max",
            "--duration",
            "6h",
            "--out",
        ])
        .arg(&first)
        .output()
        .expect("record");
    assert!(o.status.success(), "{o:?}");
    let mut logs = vec![first.clone()];
    for i in 1..n {
        let p = sessions.join(format!("s{i}.vwlog"));
        std::fs::copy(&first, &p).expect("copy");
        logs.push(p);
    }
    logs
}

/// Sends `GET /api/past` and hangs up unless a byte of the reply arrives within `patience`:
/// true when it hung up.
fn ask_past_and_hang_up(addr: SocketAddr, auth: &str, patience: Duration) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) else {
        return false;
    };
    let rq = format!("GET /api/past HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\n\r\n");
    let _ = s.set_read_timeout(Some(patience));
    if s.write_all(rq.as_bytes()).is_err() {
        return false;
    }
    let got = s.read(&mut [0u8; 1]).is_ok_and(|n| n > 0);
    let _ = s.shutdown(std::net::Shutdown::Both);
    !got
}

/// `GET /healthz` on a fresh connection: the time a 200 took, `None` without one within `limit`.
fn healthz_within(addr: SocketAddr, limit: Duration) -> Option<Duration> {
    let t = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, limit).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    s.write_all(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let ok = out.starts_with(b"HTTP/1.0 200") || out.starts_with(b"HTTP/1.1 200");
    (ok && t.elapsed() < limit).then(|| t.elapsed())
}

/// Security v4, item 1: clients that ask for `/api/past` and hang up before it is answered
/// (its work goes on without them) never take the threads kept for `/healthz`. The logs'
/// times are moved every 0.2 s, so each `/api/past` replays them (slow work that lasts the
/// whole test).
#[test]
fn clients_that_hang_up_never_take_the_light_lanes_threads() {
    let a = AgentProc::start("", &["--no-record"]);
    let logs = session_logs(&a, 8);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let toucher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for p in &logs {
                    let f = std::fs::File::options().append(true).open(p).expect("open");
                    f.set_modified(std::time::SystemTime::now()).expect("mtime");
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let addr = a.addr;
    let quitters: Vec<_> = (0..10)
        .map(|_| {
            let (auth, stop) = (a.auth(), stop.clone());
            std::thread::spawn(move || {
                let mut hung_up = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    hung_up += u32::from(ask_past_and_hang_up(
                        addr,
                        &auth,
                        Duration::from_millis(200),
                    ));
                }
                hung_up
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let mut slow = Vec::new();
    for _ in 0..16 {
        if healthz_within(addr, Duration::from_secs(2)).is_none() {
            slow.push(slow.len());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let hung_up: u32 = quitters
        .into_iter()
        .map(|h| h.join().expect("quitter"))
        .sum();
    toucher.join().expect("toucher");
    assert!(hung_up >= 16, "only {hung_up} requests were abandoned");
    assert!(
        slow.is_empty(),
        "/healthz did not answer within 2 s {} times of 16",
        slow.len()
    );
}

/// Security v3, partial: `/api/test-rule` answers an invalid rule with 400 and its problem,
/// and `[]` is no rule (it was read as a rule of defaults); a valid rule is tested.
#[test]
fn test_rule_refuses_invalid_rules() {
    let a = AgentProc::start("", &["--no-record"]);
    let auth = a.auth();
    let post = |body: &str| {
        agent_support::request(
            a.addr,
            "POST",
            "/api/test-rule",
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.as_bytes(),
        )
    };
    let r = post("[]");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("JSON object"), "{}", r.text());
    let r = post(
        r#"{"name": "x", "conditions": {"cmdline_regex": "("}, "action": {"kind": "notify"}}"#,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("cmdline_regex"), "{}", r.text());
    let r = post(
        r#"{"name": "x", "conditions": {"process_memory_min_mib": 1}, "action": {"kind": "limit_memory", "gib": 5e-324}}"#,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    let r = post(
        r#"{"name": "x", "conditions": {"process_memory_min_mib": 1}, "action": {"kind": "notify"}}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
}

/// Security v3, partial: DNS rebinding — a page whose own name now resolves to 127.0.0.1 —
/// reads nothing: an agent on loopback answers 421 to a `Host` that is not an IP address or
/// localhost, and as before to those that are.
#[test]
fn a_rebound_dns_name_reads_nothing() {
    let a = AgentProc::start("", &["--no-record"]);
    let port = a.addr.port();
    for host in [format!("evil.example:{port}"), "rebind.example".to_string()] {
        let reply = raw(
            a.addr,
            format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        assert!(reply.starts_with("HTTP/1.1 421"), "{host}: {reply:.200}");
        assert!(!reply.contains("vramwarden_"), "{host}: metrics leaked");
    }
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let reply = raw(
            a.addr,
            format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        );
        assert!(reply.starts_with("HTTP/1.1 200"), "{host}: {reply:.200}");
    }
}

/// `POST path` with `body` sent chunked (in chunks of at most 4 KiB) on a fresh connection
/// that asks to be closed: the whole reply.
fn post_chunked(addr: SocketAddr, path: &str, auth: &str, body: &[u8]) -> String {
    let mut rq = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    )
    .into_bytes();
    for chunk in body.chunks(4096) {
        rq.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        rq.extend_from_slice(chunk);
        rq.extend_from_slice(b"\r\n");
    }
    rq.extend_from_slice(b"0\r\n\r\n");
    raw(addr, &rq)
}

/// Security v4, item 2: the two paths that read a body read a chunked one, under the same
/// 16 KiB cap (413 past it); without the token its body is not read (401, and the
/// connection closes); other paths still refuse one.
#[test]
fn a_chunked_body_is_read_where_bodies_are_read() {
    let a = AgentProc::start("", &["--no-record"]);
    let auth = a.auth();
    let rule = r#"{"name": "x", "conditions": {"process_memory_min_mib": 1}, "action": {"kind": "notify"}}"#;
    let reply = post_chunked(a.addr, "/api/test-rule", &auth, rule.as_bytes());
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply:.300}");
    let bad = post_chunked(a.addr, "/api/test-rule", &auth, b"[]");
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad:.300}");
    let command = post_chunked(a.addr, "/api/v1/command", &auth, b"{");
    assert!(command.starts_with("HTTP/1.1 400"), "{command:.300}");
    let huge = format!("{{\"name\": \"{}\"}}", "x".repeat(20 * 1024));
    let reply = post_chunked(a.addr, "/api/test-rule", &auth, huge.as_bytes());
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply:.300}");
    let reply = post_chunked(a.addr, "/api/test-rule", "Bearer nope", rule.as_bytes());
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply:.300}");
    let reply = post_chunked(a.addr, "/metrics", &auth, b"abc");
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply:.300}");
}

/// Security v4, item 3: the `Host` check cannot be passed around: two `Host` headers get 400,
/// and a loopback agent answers 421 to `[::1]` followed by a name and to an absolute-form
/// target naming another host (whatever `Host` says).
#[test]
fn the_host_check_takes_every_host_a_request_names() {
    let a = AgentProc::start("", &["--no-record"]);
    let ask = |target: &str, hosts: &[&str]| {
        let mut rq = format!("GET {target} HTTP/1.1\r\n");
        for h in hosts {
            rq.push_str(&format!("Host: {h}\r\n"));
        }
        rq.push_str("Connection: close\r\n\r\n");
        raw(a.addr, rq.as_bytes())
    };
    let two = ask("/healthz", &["127.0.0.1", "evil.example"]);
    assert!(two.starts_with("HTTP/1.1 400"), "{two:.300}");
    let glued = ask("/healthz", &["[::1]evil.com"]);
    assert!(glued.starts_with("HTTP/1.1 421"), "{glued:.300}");
    let absolute = ask("http://evil.example/healthz", &["127.0.0.1"]);
    assert!(absolute.starts_with("HTTP/1.1 421"), "{absolute:.300}");
    for (target, host) in [
        ("/healthz", "[::1]:8726"),
        ("http://127.0.0.1/healthz", "127.0.0.1"),
    ] {
        let ok = ask(target, &[host]);
        assert!(ok.starts_with("HTTP/1.1 200"), "{target} {host}: {ok:.300}");
    }
}
