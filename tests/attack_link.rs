//! A hostile agent against the window's remote link (issue 27, items 6–8). The agent here is a
//! stand-in: a real HTTP server on a loopback socket in this test that answers what each test
//! tells it (absurd GPU indices, a sample from the far future, a session download far larger
//! than listed, one that breaks off, one that hangs, OOM forecasts, growing series and
//! orphaned memory out of range), while the real `RemoteLink` talks to it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use vramwarden::link::remote::RemoteLink;
use vramwarden::link::remote_error::RemoteError;
use vramwarden::link::{EngineLink, LinkHealth};

/// What the stand-in answers to one request: status line's code, content type and body, or
/// a function that writes the whole reply itself.
enum Answer {
    Json(String),
    Raw(Box<dyn FnOnce(&mut TcpStream) + Send>),
}

type Router = Arc<dyn Fn(&str, &str) -> Answer + Send + Sync>;

/// The stand-in agent: answers each request with `route(method, path)`; every request line
/// goes to `seen`.
struct StandIn {
    addr: SocketAddr,
    seen: mpsc::Receiver<String>,
    stop: Arc<AtomicBool>,
}

impl StandIn {
    fn start(route: Router) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, seen) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (route, tx) = (route.clone(), tx.clone());
                std::thread::spawn(move || serve(conn, &route, &tx));
            }
        });
        Self { addr, seen, stop }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(conn: TcpStream, route: &Router, seen: &mpsc::Sender<String>) {
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length.min(1 << 20)];
    let _ = reader.read_exact(&mut body);
    let _ = seen.send(line.trim().to_string());
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let mut conn = reader.into_inner();
    match route(method, path) {
        Answer::Json(b) => {
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{b}",
                b.len()
            );
        }
        Answer::Raw(f) => f(&mut conn),
    }
}

/// A real View of the simulated GPUs as the agent's `/api/view` sends it (one sample taken
/// now, so each answer's history follows the last one's).
fn reply_with(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    use vramwarden::source::GpuSource;
    let now = vramwarden::model::now_ms();
    let mut sim = vramwarden::source::sim::SimSource::demo(now - 60_000);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = vramwarden::engine::view::Monitor::new(1000, 600);
    m.source = Some(sim.info());
    engine_state.apply(&mut m, sim.sample(now).expect("a sample"), now);
    let view = vramwarden::link::wire::WireView::of(&m, 0, 4096);
    let mut v = serde_json::to_value(&view).expect("json");
    edit(&mut v);
    v.to_string()
}

fn link_to(agent: &StandIn) -> (RemoteLink, vramwarden::engine::shared::SharedMonitor) {
    let shared =
        vramwarden::engine::shared::Shared::new(vramwarden::engine::view::Monitor::new(1000, 600));
    let link = RemoteLink::connect(
        &agent.url(),
        "t0ken".into(),
        shared.clone(),
        Arc::new(|| {}),
    )
    .expect("connect");
    (link, shared)
}

fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn refused(link: &RemoteLink) -> String {
    refused_as(link).to_string()
}

/// Why the link is down, by kind, once its first request was answered.
fn refused_as(link: &RemoteLink) -> RemoteError {
    wait_for(
        Duration::from_secs(10),
        "the link to refuse",
        || match link.health() {
            LinkHealth::Disconnected { error, .. } if error != RemoteError::Connecting => {
                Some(error)
            }
            _ => None,
        },
    )
}

/// The window tells a wrong token, an agent of another version and an agent that is gone
/// apart (it offers the token for the first and names the version for the second), in the
/// words its status always used.
#[test]
fn a_wrong_token_another_version_and_no_agent_are_told_apart() {
    let agent = StandIn::start(Arc::new(|_, _| {
        Answer::Raw(Box::new(|c| {
            let body = r#"{"error":"missing or wrong bearer token"}"#;
            let _ = write!(
                c,
                "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }))
    }));
    let (link, _) = link_to(&agent);
    let e = refused_as(&link);
    assert_eq!(
        e,
        RemoteError::Unauthorized("missing or wrong bearer token".into())
    );
    assert_eq!(
        e.to_string(),
        "the agent refused the token (missing or wrong bearer token)"
    );
    // A later agent: another version, and fields this window does not know.
    let later = StandIn::start(Arc::new(|_, _| {
        Answer::Json(reply_with(|v| {
            v["api_version"] = 99.into();
            v["source"] = serde_json::json!({"a later shape": true});
        }))
    }));
    let (link, _) = link_to(&later);
    let e = refused_as(&link);
    assert_eq!(e, RemoteError::Incompatible(99));
    assert!(e.to_string().contains("the agent speaks version 99"), "{e}");
    // Nobody listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let shared =
        vramwarden::engine::shared::Shared::new(vramwarden::engine::view::Monitor::new(1000, 600));
    let link = RemoteLink::connect(
        &format!("http://127.0.0.1:{port}"),
        "t0ken".into(),
        shared,
        Arc::new(|| {}),
    )
    .expect("connect");
    let e = refused_as(&link);
    assert!(matches!(e, RemoteError::Unreachable(_)), "{e:?}");
}

#[test]
fn an_absurd_gpu_index_is_refused_and_allocates_nothing() {
    for index in [4_294_967_295u64, 5_000_000, 64] {
        let body = reply_with(|v| v["latest"]["devices"][0]["index"] = index.into());
        let agent = StandIn::start(Arc::new(move |_, _| Answer::Json(body.clone())));
        let (link, shared) = link_to(&agent);
        let e = refused(&link);
        assert!(e.contains(&format!("GPU index {index}")), "{e}");
        let m = shared.read().expect("monitor");
        assert!(m.latest.is_none(), "nothing was applied");
        assert!(m.history.is_empty());
        assert!(m.history.heap_bytes() < 1 << 20);
    }
    // A process on a GPU the agent does not list is refused too.
    let body = reply_with(|v| v["latest"]["processes"][0]["device_index"] = 7.into());
    let agent = StandIn::start(Arc::new(move |_, _| Answer::Json(body.clone())));
    let (link, _) = link_to(&agent);
    assert!(refused(&link).contains("GPU 7, which it does not list"));
}

#[test]
fn a_sample_from_the_far_future_is_refused_and_the_next_good_one_shows() {
    let calls = Arc::new(Mutex::new(0u32));
    let counted = calls.clone();
    let agent = StandIn::start(Arc::new(move |_, _| {
        let mut n = counted.lock().expect("calls");
        *n += 1;
        if *n <= 2 {
            Answer::Json(reply_with(|v| v["latest"]["taken_at_ms"] = i64::MAX.into()))
        } else {
            Answer::Json(reply_with(|_| {}))
        }
    }));
    let (link, shared) = link_to(&agent);
    let e = refused(&link);
    assert!(e.contains("ahead of this computer's clock"), "{e}");
    wait_for(Duration::from_secs(10), "the next good sample", || {
        matches!(link.health(), LinkHealth::Connected { .. }).then_some(())
    });
    let m = shared.read().expect("monitor");
    let now = vramwarden::model::now_ms();
    assert!(!m.is_stale(now), "not STALE after a good sample");
    let t = m.latest.as_ref().expect("a sample").taken_at_ms;
    assert!((now - t).abs() < 60_000, "{t} vs {now}");
}

/// A change to a good answer.
type Edit = Box<dyn Fn(&mut serde_json::Value) + Send>;

#[test]
fn other_hostile_values_are_refused_with_a_reason() {
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|v| v["interval_ms"] = 0.into()),
            "sampling interval",
        ),
        (
            Box::new(|v| v["latest"]["processes"][0]["pid"] = 4_294_967_295u64.into()),
            "PID",
        ),
        (
            Box::new(|v| {
                v["leaks"] = serde_json::json!([{
                    "key": {"Process": [{"pid": 1, "start_time_ms": 0}, 99]},
                    "info": {"pid": 1, "start_time_ms": 0, "device_index": 99, "name": "x",
                        "since_ms": 0, "rate_mib_per_min": 1.0},
                    "flagged_ms": 0, "ended_ms": null, "grown_mib": 1.0, "peak_mib": 1.0,
                    "session": null, "open_at_end": false
                }])
            }),
            "GPU index 99",
        ),
        (
            Box::new(|v| {
                v["latest"]["devices"][1]["index"] = v["latest"]["devices"][0]["index"].clone()
            }),
            "twice",
        ),
        (
            // Security v3, partial: more than the GPU has, one process …
            Box::new(|v| {
                let total = v["latest"]["devices"][0]["memory_total_bytes"].clone();
                v["latest"]["processes"][0]["device_index"] =
                    v["latest"]["devices"][0]["index"].clone();
                v["latest"]["processes"][0]["used_bytes"] =
                    (total.as_u64().expect("total") + 1).into();
            }),
            "which has",
        ),
        (
            // … or many together (16 384 × 38 GiB on a 140 GiB GPU was accepted).
            Box::new(|v| {
                let total = v["latest"]["devices"][0]["memory_total_bytes"]
                    .as_u64()
                    .expect("total");
                let mut p = v["latest"]["processes"][0].clone();
                p["device_index"] = v["latest"]["devices"][0]["index"].clone();
                p["used_bytes"] = (total - 1).into();
                let many: Vec<serde_json::Value> = (0..8)
                    .map(|i| {
                        let mut q = p.clone();
                        q["pid"] = (100_000 + i).into();
                        q
                    })
                    .collect();
                v["latest"]["processes"] = serde_json::json!(many);
            }),
            "together",
        ),
    ];
    for (edit, says) in cases {
        let body = reply_with(edit);
        let agent = StandIn::start(Arc::new(move |_, _| Answer::Json(body.clone())));
        let (link, _) = link_to(&agent);
        let e = refused(&link);
        assert!(e.contains(says), "{says}: {e}");
    }
}

const NAME: &str = "20260101-000000-gpu.vwlog";

fn sessions_agent(download: impl Fn() -> Answer + Send + Sync + 'static, listed: u64) -> StandIn {
    StandIn::start(Arc::new(move |method, path| match (method, path) {
        ("GET", "/api/v1/sessions") => Answer::Json(format!(
            r#"{{"folder":"/x","sessions":[{{"name":"{NAME}","size_bytes":{listed},"modified_ms":0,"started_ms":null,"duration_ms":null,"host":"gpu","devices":1}}]}}"#
        )),
        ("GET", p) if p.starts_with("/api/v1/sessions/") => download(),
        ("POST", "/api/v1/command") => Answer::Json(format!(
            r#"{{"api_version":{},"id":9,"what":"kill","outcome":"acted","detail":"sent SIGKILL"}}"#,
            vramwarden::link::wire::API_VERSION
        )),
        _ => Answer::Json(reply_with(|_| {})),
    }))
}

fn listed(link: &RemoteLink) {
    link.list_sessions();
    wait_for(Duration::from_secs(10), "the list", || {
        link.files().list.filter(|l| l.is_ok()).map(|_| ())
    });
}

fn finished(link: &RemoteLink) -> Result<std::path::PathBuf, String> {
    wait_for(Duration::from_secs(20), "the download", || {
        link.take_done().pop().map(|(_, r)| r)
    })
}

/// Downloads [`NAME`] from `agent` into a fresh folder: the folder (inside the returned
/// temporary one, kept alive with it) and how the download ended.
fn download_from(
    agent: &StandIn,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    Result<std::path::PathBuf, String>,
) {
    let (link, _) = link_to(agent);
    listed(&link);
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("from-agents");
    link.download(NAME, dir.clone());
    let done = finished(&link);
    (tmp, dir, done)
}

fn parts_in(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".part"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_download_takes_only_the_listed_size_into_a_private_file() {
    use std::os::unix::fs::PermissionsExt;
    // Listed at 10 bytes; the agent sends 50 MiB.
    let agent = sessions_agent(
        || {
            Answer::Raw(Box::new(|c| {
                let total = 50usize << 20;
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {total}\r\nConnection: close\r\n\r\n"
                );
                let chunk = vec![b'x'; 1 << 20];
                for _ in 0..50 {
                    if c.write_all(&chunk).is_err() {
                        break;
                    }
                }
            }))
        },
        10,
    );
    let (_tmp, dir, done) = download_from(&agent);
    let path = done.expect("downloaded");
    let md = std::fs::metadata(&path).expect("file");
    assert_eq!(md.len(), 10, "the listed size, no more");
    assert_eq!(md.permissions().mode() & 0o777, 0o600);
    let dmd = std::fs::metadata(&dir).expect("dir");
    assert_eq!(dmd.permissions().mode() & 0o777, 0o700);
    assert!(parts_in(&dir).is_empty());
}

#[test]
fn a_download_that_breaks_off_leaves_nothing_behind() {
    let agent = sessions_agent(
        || {
            Answer::Raw(Box::new(|c| {
                let _ = c.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\nhalf",
                );
            }))
        },
        1000,
    );
    let (_tmp, dir, done) = download_from(&agent);
    let e = done.expect_err("broken off");
    assert!(e.contains("broke off"), "{e}");
    assert!(parts_in(&dir).is_empty(), "{:?}", parts_in(&dir));
    assert!(!dir.join(NAME).exists());
}

/// A download the agent refuses says why in the agent's words, as any refused request does,
/// and writes nothing.
#[test]
fn a_refused_download_says_why_and_leaves_nothing_behind() {
    let agent = sessions_agent(
        || {
            Answer::Raw(Box::new(|c| {
                let body = r#"{"error":"missing or wrong bearer token"}"#;
                let _ = write!(
                    c,
                    "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }))
        },
        1000,
    );
    let (_tmp, dir, done) = download_from(&agent);
    let e = done.expect_err("refused");
    assert_eq!(
        e,
        "the agent refused the token (missing or wrong bearer token)"
    );
    assert!(parts_in(&dir).is_empty(), "{:?}", parts_in(&dir));
    assert!(!dir.join(NAME).exists());
}

#[test]
fn a_hanging_download_never_delays_a_kill() {
    let release = Arc::new(AtomicBool::new(false));
    let hold = release.clone();
    let agent = sessions_agent(
        move || {
            let hold = hold.clone();
            Answer::Raw(Box::new(move |c| {
                let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nsome");
                let until = Instant::now() + Duration::from_secs(30);
                while !hold.load(Ordering::Relaxed) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }))
        },
        1000,
    );
    let (link, shared) = link_to(&agent);
    listed(&link);
    wait_for(Duration::from_secs(10), "a sample", || {
        shared.read().ok()?.latest.as_ref().map(|_| ())
    });
    let tmp = tempfile::tempdir().expect("tmp");
    link.download(NAME, tmp.path().join("from-agents"));
    wait_for(Duration::from_secs(5), "the download to start", || {
        link.files().downloading.map(|_| ())
    });
    while agent.seen.try_recv().is_ok() {}
    let sent = Instant::now();
    link.send(vramwarden::engine::EngineCommand::Manual {
        key: (
            vramwarden::model::ProcessKey {
                pid: 4242,
                start_time_ms: 7,
            },
            0,
        ),
        action: vramwarden::act::rules::Action::Signal {
            signal: "SIGKILL".into(),
        },
        from: vramwarden::engine::CommandFrom::Window,
    });
    let line = wait_for(Duration::from_secs(3), "the kill at the agent", || {
        std::iter::from_fn(|| agent.seen.try_recv().ok())
            .find(|l| l.starts_with("POST /api/v1/command"))
    });
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "{line} after {:?}",
        sent.elapsed()
    );
    assert!(
        link.files().downloading.is_some(),
        "the download is still going"
    );
    release.store(true, Ordering::Relaxed);
}

#[test]
fn hostile_views_are_refused_by_field_and_the_window_keeps_its_last_good_one() {
    let cases: Vec<(Edit, &str)> = vec![
        (Box::new(|v| v["api_version"] = 99.into()), "api_version"),
        (
            // A count far over the caps: refused before anything is expanded.
            Box::new(|v| v["history"]["devices"][0] = serde_json::json!([[5, 4_000_000_000u32]])),
            "covers more than",
        ),
        (
            Box::new(|v| {
                let t = v["history"]["times"][0].clone();
                v["history"]["times"] = serde_json::json!(vec![t; 5000]);
            }),
            "5000 ticks",
        ),
        (
            Box::new(|v| v["history"]["processes"][0][0][1] = 64.into()),
            "GPU index 64",
        ),
        (
            Box::new(|v| v["activity"] = serde_json::json!(vec![serde_json::Value::Null; 5000])),
            "not understood",
        ),
        (
            // An OOM forecast on a GPU the agent's snapshot does not list.
            Box::new(|v| v["oom_alerts"] = serde_json::json!([alert(v, 63, 60.0)])),
            "oom_alerts: an alert on GPU 63, which the agent's snapshot does not list",
        ),
        (
            Box::new(|v| v["oom_alerts"] = serde_json::json!([alert(v, 0, -60.0)])),
            "oom_alerts: a time to full of -60",
        ),
        (
            Box::new(|v| {
                let t = v["latest"]["taken_at_ms"].clone();
                v["growing"] = serde_json::json!([[
                    {"Process": [{"pid": 48213, "start_time_ms": 0}, 0]},
                    {"since_ms": t, "grown_mib": 100.0, "rate_mib_per_min": -5.0}
                ]]);
            }),
            "growing: a rate of -5",
        ),
        (
            // More orphaned GPUs than any agent has: refused before any is looked at.
            Box::new(|v| {
                let one = serde_json::json!({"device_index": 0, "total_bytes": 1,
                    "pids": [], "holders": [], "remedy": "reboot"});
                v["orphans"] = serde_json::json!(vec![one; 65]);
            }),
            "the agent sent 65 orphans",
        ),
    ];
    for (edit, says) in cases {
        // A good answer first, then the hostile one for ever.
        let calls = Arc::new(Mutex::new(0u32));
        let counted = calls.clone();
        let edit = Arc::new(Mutex::new(Some(edit)));
        let agent = StandIn::start(Arc::new(move |_, _| {
            let mut n = counted.lock().expect("calls");
            *n += 1;
            if *n == 1 {
                return Answer::Json(reply_with(|_| {}));
            }
            let e = edit.lock().expect("edit");
            Answer::Json(reply_with(|v| {
                if let Some(f) = e.as_ref() {
                    f(v)
                }
            }))
        }));
        let (link, shared) = link_to(&agent);
        let e = refused(&link);
        assert!(e.contains(says), "{says}: {e}");
        let m = shared.read().expect("monitor");
        assert!(m.latest.is_some(), "{says}: the last good view stays");
        assert_eq!(
            m.history.len(),
            1,
            "{says}: nothing of the hostile one was taken"
        );
        assert!(
            m.oom_alerts.is_empty() && m.growing.is_empty() && m.orphans.is_empty(),
            "{says}: nothing of the hostile one was taken"
        );
    }
}

/// An OOM forecast alert on GPU `gpu`, full in `full_in_s`, raised at the view's sample.
fn alert(v: &serde_json::Value, gpu: u32, full_in_s: f64) -> serde_json::Value {
    serde_json::json!({"device_index": gpu, "since_ms": v["latest"]["taken_at_ms"],
        "full_in_s": full_in_s, "drivers": ["python3 (PID 48213)"]})
}

#[test]
fn times_going_backwards_are_refused_and_the_last_good_view_stays() {
    let first = reply_with(|_| {});
    let calls = Arc::new(Mutex::new(0u32));
    let counted = calls.clone();
    let agent = StandIn::start(Arc::new(move |_, _| {
        let mut n = counted.lock().expect("calls");
        *n += 1;
        if *n == 1 {
            return Answer::Json(first.clone());
        }
        // The same tick with a time one minute earlier.
        Answer::Json(reply_with(|v| {
            let t = v["history"]["times"][0].as_i64().expect("a time");
            v["history"]["times"][0] = (t - 60_000).into();
        }))
    }));
    let (link, shared) = link_to(&agent);
    let e = refused(&link);
    assert!(e.contains("times go backwards"), "{e}");
    let m = shared.read().expect("monitor");
    assert_eq!(m.history.len(), 1);
    assert!(m.latest.is_some());
}

#[test]
fn a_command_reply_comes_back_with_its_id() {
    let agent = sessions_agent(|| Answer::Json("{}".into()), 10);
    let (link, _) = link_to(&agent);
    let id = link.send(vramwarden::engine::EngineCommand::Manual {
        key: (
            vramwarden::model::ProcessKey {
                pid: 4242,
                start_time_ms: 7,
            },
            0,
        ),
        action: vramwarden::act::rules::Action::Signal {
            signal: "SIGKILL".into(),
        },
        from: vramwarden::engine::CommandFrom::Window,
    });
    let r = wait_for(Duration::from_secs(5), "the reply", || {
        link.take_replies().into_iter().find(|r| r.id == id)
    });
    assert_eq!(r.answer.outcome, vramwarden::model::outcome::Outcome::Acted);
    assert!(
        r.answer.detail.contains("sent SIGKILL"),
        "{}",
        r.answer.detail
    );
    // A command the agent's API does not take is answered too, by the link.
    let id = link.send(vramwarden::engine::EngineCommand::PauseRecording);
    let r = wait_for(Duration::from_secs(5), "the reply", || {
        link.take_replies().into_iter().find(|r| r.id == id)
    });
    assert_eq!(
        r.answer.outcome,
        vramwarden::model::outcome::Outcome::Skipped
    );
}

/// Security v3, partial: an agent that never says it is caught up (its history always "ends"
/// far ahead, and each page brings nothing new) made the window poll it 14–21 times a
/// second; now the link pauses a second after a page that brought nothing new (and after a
/// burst of pages), so it asks about once a second.
#[test]
fn an_agent_never_caught_up_is_polled_about_once_a_second() {
    use vramwarden::source::GpuSource;
    let now = vramwarden::model::now_ms();
    let mut sim = vramwarden::source::sim::SimSource::demo(now - 60_000);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = vramwarden::engine::view::Monitor::new(1000, 600);
    m.source = Some(sim.info());
    engine_state.apply(&mut m, sim.sample(now).expect("a sample"), now);
    let end = m.history.end_tick();
    let page = |since: u64| {
        let mut v = serde_json::to_value(vramwarden::link::wire::WireView::of(&m, since, 4096))
            .expect("json");
        v["history_end_tick"] = serde_json::json!(1u64 << 40);
        v.to_string()
    };
    let (first, empty) = (page(0), page(end));
    let agent = StandIn::start(Arc::new(move |_, path: &str| {
        if path.starts_with("/api/view") && !path.ends_with("since=0") && path.contains("since=") {
            Answer::Json(empty.clone())
        } else {
            Answer::Json(first.clone())
        }
    }));
    let (_link, _shared) = link_to(&agent);
    let views = |limit: Duration| {
        let until = Instant::now() + limit;
        let mut n = 0;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match agent.seen.recv_timeout(left) {
                Ok(line) if line.contains("/api/view") => n += 1,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        n
    };
    assert!(views(Duration::from_secs(2)) > 0, "the link never asked");
    let n = views(Duration::from_secs(3));
    assert!(n <= 6, "{n} polls in 3 s");
}

/// A command the agent accepted gets its final reply from the agent's View, under the
/// window's own id, once: a final reply to another window's command (an id this window did
/// not send) is not shown, and one with an impossible figure refuses the whole View.
#[test]
fn an_accepted_commands_final_reply_comes_from_the_view_once_and_only_ours() {
    let final_of = |id: u64, seconds: f64| {
        serde_json::json!({"api_version": vramwarden::link::wire::API_VERSION, "id": id,
            "what": "park (GPU memory to host memory)", "outcome": "acted",
            "detail": "parked python (PID 4242) in 16.8 s", "bytes": 1u64 << 30,
            "seconds": seconds})
    };
    let view =
        reply_with(|v| v["replies"] = serde_json::json!([final_of(99, 2.0), final_of(5, 16.8)]));
    let agent = StandIn::start(Arc::new(move |method, path| match (method, path) {
        ("POST", "/api/v1/command") => Answer::Json(format!(
            r#"{{"api_version":{},"id":5,"what":"park","stage":"accepted","outcome":"acted","detail":"parking"}}"#,
            vramwarden::link::wire::API_VERSION
        )),
        _ => Answer::Json(view.clone()),
    }));
    let (link, _) = link_to(&agent);
    let id = link.send(vramwarden::engine::EngineCommand::Manual {
        key: (
            vramwarden::model::ProcessKey {
                pid: 4242,
                start_time_ms: 7,
            },
            0,
        ),
        action: vramwarden::act::rules::Action::Park,
        from: vramwarden::engine::CommandFrom::Window,
    });
    let mut got = Vec::new();
    wait_for(Duration::from_secs(10), "the final reply", || {
        got.extend(link.take_replies());
        got.iter().any(|r| r.answer.is_final()).then_some(())
    });
    // Further polls bring the same View: the final reply is not handed over again.
    std::thread::sleep(Duration::from_millis(1500));
    got.extend(link.take_replies());
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got.iter().all(|r| r.id == id), "{got:?}");
    assert!(!got[0].answer.is_final(), "{got:?}");
    assert_eq!(got[1].answer.seconds, Some(16.8));
    assert_eq!(got[1].answer.bytes, Some(1 << 30));
    assert_eq!(
        got[1].answer.detail,
        "parked python (PID 4242) in 16.8 s (on the agent)"
    );

    let bad = reply_with(|v| v["replies"] = serde_json::json!([final_of(5, -1.0)]));
    let agent = StandIn::start(Arc::new(move |_, _| Answer::Json(bad.clone())));
    let (link, _) = link_to(&agent);
    let e = refused(&link);
    assert!(e.contains("replies: seconds"), "{e}");
}

/// The agent's past leaks are asked once and read once: a failed read says why by kind and
/// is asked again by the next call, a good one is kept.
#[test]
fn past_leaks_are_asked_again_after_a_failed_read_and_kept_once_read() {
    use vramwarden::link::remote::RemotePast;
    let calls = Arc::new(Mutex::new(0u32));
    let counted = calls.clone();
    let agent = StandIn::start(Arc::new(move |_, path| {
        if !path.starts_with("/api/past") {
            return Answer::Json(reply_with(|_| {}));
        }
        let mut n = counted.lock().expect("calls");
        *n += 1;
        if *n == 1 {
            return Answer::Raw(Box::new(|c| {
                let body = r#"{"error":"the sessions folder cannot be read"}"#;
                let _ = write!(
                    c,
                    "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }));
        }
        Answer::Json(format!(
            r#"{{"api_version":{},"leaks":[],"ooms":[]}}"#,
            vramwarden::link::wire::API_VERSION
        ))
    }));
    let (link, _) = link_to(&agent);
    assert!(matches!(link.past(), RemotePast::NotAsked));
    assert!(link.past_or_ask().is_none());
    let failed = wait_for(Duration::from_secs(5), "the failed read", || {
        match link.past() {
            RemotePast::Failed(e) => Some(e),
            _ => None,
        }
    });
    assert_eq!(
        failed,
        RemoteError::Refused {
            status: 500,
            words: "the sessions folder cannot be read".into()
        }
    );
    assert!(link.past_or_ask().is_none(), "asked again");
    let read = wait_for(Duration::from_secs(5), "the good read", || {
        link.past_or_ask()
    });
    assert!(read.leaks.is_empty() && read.ooms.is_empty());
    assert!(link.past_or_ask().is_some());
    assert_eq!(
        *calls.lock().expect("calls"),
        2,
        "read once more, then kept"
    );
}
