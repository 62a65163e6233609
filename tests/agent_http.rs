//! `vramwarden agent` over HTTP: /metrics in both formats, /healthz, the token-guarded API,
//! sessions, commands on simulated and real processes, a clean stop on SIGTERM.

#[path = "agent_support/mod.rs"]
mod agent_support;

use std::collections::HashSet;
use std::io::Write;
use std::process::{Child, Command};
use std::time::Duration;

use agent_support::{command_as, get, get_as, request, wait_for, AgentProc, ACTING};
use vramwarden::source::sim::{Script, SimDevice, SimProcess, SimSource};

#[test]
fn metrics_in_both_formats_with_help_and_type_for_every_family() {
    let a = AgentProc::start("", &["--no-record"]);
    let h = get(a.addr, "/healthz");
    assert_eq!(h.status, 200, "{}", h.text());
    assert!(h.text().starts_with("ok"), "{}", h.text());
    assert_eq!(get(a.addr, "/-/ready").status, 200);

    let m = get(a.addr, "/metrics");
    assert_eq!(m.status, 200);
    assert_eq!(
        m.header("Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = m.text();
    let mut typed = HashSet::new();
    let mut helped = HashSet::new();
    for line in text.lines() {
        if let Some(r) = line.strip_prefix("# TYPE ") {
            typed.insert(r.split(' ').next().unwrap_or("").to_string());
        } else if let Some(r) = line.strip_prefix("# HELP ") {
            helped.insert(r.split(' ').next().unwrap_or("").to_string());
        } else {
            let name = line.split(['{', ' ']).next().unwrap_or("");
            assert!(typed.contains(name), "{name} has no TYPE line before it");
            assert!(helped.contains(name), "{name} has no HELP line");
        }
    }
    for needed in [
        "vramwarden_gpu_memory_used_bytes{gpu=\"0\",UUID=\"GPU-",
        "vramwarden_gpu_memory_reserved_bytes{",
        "vramwarden_gpu_memory_free_bytes{",
        "vramwarden_gpu_memory_total_bytes{",
        "modelName=\"Simulated H200\"",
        "vramwarden_gpu_utilization_ratio{",
        "vramwarden_gpu_temperature_celsius{",
        "vramwarden_gpu_power_watts{",
        "vramwarden_process_gpu_memory_bytes{pid=\"",
        "vramwarden_process_leak{",
        "vramwarden_gpu_memory_unattributed_bytes{",
        "vramwarden_sampler_errors_total{Hostname=\"",
        "vramwarden_sample_age_seconds{Hostname=\"",
        "vramwarden_scrape_duration_seconds{Hostname=\"",
        "vramwarden_build_info{version=\"",
    ] {
        assert!(text.contains(needed), "{needed} missing from\n{text}");
    }
    // The demo's container id shows (short) as the container label.
    assert!(text.contains("container=\"4f2a9c1e7b3d\""), "{text}");
    // The GPU machine's scripts read these families by name: each name they use begins one.
    for (script, name) in metric_names_in_workload_scripts() {
        assert!(
            typed.iter().any(|family| family.starts_with(&name)),
            "{script} reads {name}, which the agent does not serve"
        );
    }

    let om = request(
        a.addr,
        "GET",
        "/metrics",
        &[("Accept", "application/openmetrics-text; version=1.0.0")],
        b"",
    );
    assert_eq!(
        om.header("Content-Type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let t = om.text();
    assert!(t.ends_with("# EOF\n"), "{t}");
    assert!(
        t.contains("# TYPE vramwarden_sampler_errors counter"),
        "{t}"
    );
    assert!(t.contains("# TYPE vramwarden_build info"), "{t}");
    assert!(
        t.lines().any(
            |l| l.starts_with("vramwarden_sampler_errors_total{Hostname=\"") && l.ends_with("} 0")
        ),
        "{t}"
    );

    assert_eq!(get(a.addr, "/nope").status, 404);
    assert_eq!(request(a.addr, "POST", "/metrics", &[], b"").status, 405);
    // A path that is served, with a method it does not take: 405 whatever the method.
    let auth = a.auth();
    let with_token = [("Authorization", auth.as_str())];
    for (method, path, allow) in [
        ("PUT", "/api/v1/command", "POST"),
        ("DELETE", "/api/v1/command", "POST"),
        ("GET", "/api/v1/command", "POST"),
        ("POST", "/api/v1/sessions/x.vwlog", "GET"),
        ("POST", "/metrics", "GET"),
    ] {
        let r = request(a.addr, method, path, &with_token, b"");
        assert_eq!(r.status, 405, "{method} {path}");
        // It says which method the path takes.
        let said = r
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("allow"))
            .map(|(_, v)| v.as_str());
        assert_eq!(said, Some(allow), "{method} {path}: {:?}", r.headers);
    }
}

/// Every `vramwarden_…` name in tests/workloads/ (the scripts run on a GPU machine), with
/// its script: the Python companion's module name left out.
fn metric_names_in_workload_scripts() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/workloads");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/workloads") {
        let path = entry.expect("entry").path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for (at, _) in text.match_indices("vramwarden_") {
            let rest = &text[at + "vramwarden_".len()..];
            // A grep's alternation, `vramwarden_(a|b)`, names vramwarden_a and vramwarden_b.
            let tails: Vec<&str> = match rest.strip_prefix('(') {
                Some(group) => group.split(')').next().unwrap_or("").split('|').collect(),
                None => vec![rest],
            };
            for tail in tails {
                let name: String = tail
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                let name = format!("vramwarden_{}", name.trim_end_matches('_'));
                if name.len() > "vramwarden_".len() && name != "vramwarden_torch" {
                    names.push((path.display().to_string(), name));
                }
            }
        }
    }
    assert!(names.len() >= 3, "{names:?}");
    names
}

#[test]
fn the_api_needs_the_token_and_refuses_simulated_processes() {
    let a = AgentProc::start(ACTING, &["--no-record"]);
    for path in ["/api/v1/snapshot", "/api/v1/sessions"] {
        let r = get(a.addr, path);
        assert_eq!(r.status, 401, "{path}");
        assert!(r
            .header("WWW-Authenticate")
            .is_some_and(|v| v.starts_with("Bearer")));
        assert!(
            r.text().contains("a bearer token is needed"),
            "{}",
            r.text()
        );
        let r = get_as(a.addr, path, "Bearer wrong");
        assert_eq!(r.status, 401, "{path} with a wrong token");
        assert!(r.text().contains("not the agent's token"), "{}", r.text());
    }
    let snap = get_as(a.addr, "/api/v1/snapshot", &a.auth());
    assert_eq!(snap.status, 200, "{}", snap.text());
    let v = snap.json();
    assert_eq!(v["snapshot"]["devices"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["status"]["state"], "running");
    let p = &v["snapshot"]["processes"][0];
    let pid = p["pid"].as_u64().expect("pid");
    let start = p["info"]["start_time_ms"].as_i64().expect("start time");
    let body = format!(r#"{{"action":"terminate","pid":{pid},"start_time":{start}}}"#);

    let r = request(a.addr, "POST", "/api/v1/command", &[], body.as_bytes());
    assert_eq!(r.status, 401, "no token");
    let wrong = format!("Bearer {}x", a.token);
    let r = command_as(a.addr, &wrong, body.as_bytes());
    assert_eq!(r.status, 401, "a wrong token");
    let r = command_as(a.addr, &a.auth(), body.as_bytes());
    assert_eq!(r.status, 403, "{}", r.text());
    let v = r.json();
    assert_eq!(v["outcome"], "skipped");
    assert_eq!(v["detail"], "simulated process: nothing was sent");
    // The refusal is counted (on this host's series).
    let counted = |m: &str| {
        m.lines().any(|l| {
            l.starts_with("vramwarden_cleanup_actions_total{rule=\"manual\",action=\"terminate\",outcome=\"skipped\",Hostname=\"")
                && l.ends_with("} 1")
        })
    };
    let m = get(a.addr, "/metrics").text();
    assert!(
        counted(&m) || {
            // Counted after the next tick.
            wait_for(Duration::from_secs(5), "the action counter", || {
                counted(&get(a.addr, "/metrics").text()).then_some(true)
            })
        }
    );
    // A start time that does not match is not acted on, whatever the pid.
    let other = format!(
        r#"{{"action":"kill","pid":{pid},"start_time":{}}}"#,
        start + 5000
    );
    let r = command_as(a.addr, &a.auth(), other.as_bytes());
    assert_eq!(r.status, 404, "{}", r.text());
    // The PyTorch actions reach the engine the same way (and a simulated process the same
    // refusal); a limit needs its size.
    for body in [
        format!(r#"{{"action":"release_cache","pid":{pid},"start_time":{start}}}"#),
        format!(r#"{{"action":"limit_memory","gib":8,"pid":{pid},"start_time":{start}}}"#),
    ] {
        let r = command_as(a.addr, &a.auth(), body.as_bytes());
        assert_eq!(r.status, 403, "{}", r.text());
        assert_eq!(r.json()["detail"], "simulated process: nothing was sent");
    }
    // Every action a window sends, in the window's own body, reaches the engine as that
    // action (the reply names it as the engine does).
    every_window_command_reaches_the_engine(&a, pid as u32, start);
    let no_size = format!(r#"{{"action":"limit_memory","pid":{pid},"start_time":{start}}}"#);
    let r = command_as(a.addr, &a.auth(), no_size.as_bytes());
    assert_eq!(r.status, 400, "{}", r.text());
    // Bad and oversized bodies.
    for (body, status) in [
        (b"{not json".to_vec(), 400),
        (
            br#"{"action":"format_disk","pid":1,"start_time":0}"#.to_vec(),
            400,
        ),
        (vec![b' '; 20_000], 413),
    ] {
        let r = command_as(a.addr, &a.auth(), &body);
        assert_eq!(r.status, status, "{}", r.text());
    }
}

/// Posts the body a window writes ([`vramwarden::link::wire::WireCommand::of`]) for every
/// action the agent's API takes, on simulated process `pid`: each is answered under that
/// action's own label, so the agent read back the very action the window meant.
fn every_window_command_reaches_the_engine(a: &AgentProc, pid: u32, start: i64) {
    use vramwarden::act::rules::Action;
    use vramwarden::link::wire::WireCommand;
    let key = vramwarden::model::ProcessKey {
        pid,
        start_time_ms: start,
    };
    for action in [
        Action::Terminate { grace_seconds: 7.5 },
        Action::Signal {
            signal: "SIGKILL".into(),
        },
        Action::Signal {
            signal: "SIGUSR2".into(),
        },
        Action::ReleaseCache,
        Action::Park,
        Action::Resume,
        Action::LimitMemory { gib: 3.5 },
    ] {
        let c = vramwarden::engine::EngineCommand::Manual {
            key: (key, 0),
            action: action.clone(),
            from: vramwarden::engine::CommandFrom::Window,
        };
        let body = serde_json::to_string(&WireCommand::of(&c).expect("offered")).expect("json");
        let r = command_as(a.addr, &a.auth(), body.as_bytes());
        assert_eq!(r.status, 403, "{body}: {}", r.text());
        assert_eq!(r.json()["what"], action.label(), "{body}");
    }
}

#[test]
fn sessions_are_listed_and_downloaded_by_name_only() {
    let a = AgentProc::start("", &[]);
    let auth = a.auth();
    let list = wait_for(Duration::from_secs(20), "a recorded session", || {
        let r = get_as(a.addr, "/api/v1/sessions", &auth);
        let v = r.json();
        v["sessions"]
            .as_array()
            .filter(|s| !s.is_empty())
            .map(|s| s[0]["name"].as_str().unwrap_or("").to_string())
    });
    assert!(list.ends_with(".vwlog"), "{list}");
    let r = get_as(a.addr, &format!("/api/v1/sessions/{list}"), &auth);
    assert_eq!(r.status, 200);
    assert_eq!(
        &r.body[..2],
        &[0xA5, 0x57],
        "a .vwlog starts with its record marker"
    );
    let secret = a.dir.path().join("secret.vwlog");
    std::fs::write(&secret, b"outside").expect("write");
    // In the sessions folder: a link to a file outside it, and a FIFO (an open that would
    // wait for a writer): neither is served, and the FIFO does not hang the request.
    let sessions = a.dir.path().join("data/sessions");
    std::os::unix::fs::symlink(&secret, sessions.join("link.vwlog")).expect("symlink");
    let fifo = std::ffi::CString::new(sessions.join("pipe.vwlog").as_os_str().as_encoded_bytes())
        .expect("path");
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    for bad in [
        "/api/v1/sessions/../secret.vwlog",
        "/api/v1/sessions/..%2Fsecret.vwlog",
        "/api/v1/sessions/%2e%2e%2fsecret.vwlog",
        "/api/v1/sessions/config.toml",
        "/api/v1/sessions/missing.vwlog",
        "/api/v1/sessions/link.vwlog",
        "/api/v1/sessions/pipe.vwlog",
    ] {
        let r = get_as(a.addr, bad, &auth);
        assert!(
            r.status == 400 || r.status == 404,
            "{bad}: {} {}",
            r.status,
            r.text()
        );
        assert_ne!(r.body, b"outside");
    }
}

#[test]
fn sigterm_stops_cleanly_and_closes_the_log() {
    let mut a = AgentProc::start("", &[]);
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(a.child.id() as i32, libc::SIGTERM) }, 0);
    let status = wait_for(Duration::from_secs(20), "the agent to exit", || {
        a.child.try_wait().ok().flatten()
    });
    assert!(status.success(), "{status:?}");
    let said: Vec<String> = a.stderr.try_iter().collect();
    assert!(
        said.iter()
            .any(|l| l.contains("session log") && l.contains(".vwlog")),
        "{said:?}"
    );
}

/// Stalled clients never delay sampling (it runs on its own thread), and the agent keeps
/// answering. (tests/attack_http.rs has the hostile cases: huge bodies, clients that never
/// read, crowds of idle connections, endless headers.)
#[test]
fn stalled_clients_do_not_stop_sampling() {
    let mut child = sleeper();
    let (agent, _dir) = agent_on(&child, "");
    let ticks = || agent.state.shared.read().map(|m| m.ticks).unwrap_or(0);
    let stalled: Vec<std::net::TcpStream> = (0..8)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(agent.addr).expect("connect");
            s.write_all(b"POST /api/v1/command HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
                .expect("write");
            s
        })
        .collect();
    let t0 = ticks();
    wait_for(Duration::from_secs(5), "3 more samples", || {
        (ticks() >= t0 + 3).then_some(())
    });
    let ok = wait_for(Duration::from_secs(10), "a /healthz answer", || {
        let mut s = std::net::TcpStream::connect(agent.addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").ok()?;
        let mut out = String::new();
        std::io::Read::read_to_string(&mut s, &mut out).ok()?;
        Some(out)
    });
    assert!(ok.starts_with("HTTP/1.0 200"), "{ok}");
    drop(stalled);
    let _ = child.kill();
    let _ = child.wait();
    assert!(agent.stop());
}

// --- in process: a real child process placed on a simulated GPU -------------------------

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep")
}

fn agent_on(child: &Child, config: &str) -> (vramwarden::front::agent::Agent, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("config.toml");
    std::fs::write(&cfg, config).expect("config");
    let pid = child.id();
    let factory: vramwarden::engine::sampler::SourceFactory = Box::new(move || {
        let mut s = SimSource::empty(
            vramwarden::model::now_ms() - 60_000,
            vec![SimDevice {
                name: "Sim GPU".into(),
                total_mib: 81_920,
                reserved_mib: 500,
                ghost_mib: 0,
                power_cap_w: 700,
            }],
        );
        s.add(SimProcess {
            pid,
            device_index: 0,
            info: None,
            script: Script::Idle { mib: 1024 },
            start_s: 0.0,
            restart_every_s: None,
            life_s: f64::INFINITY,
            busy_pct: 0,
        });
        Ok(Box::new(s) as Box<dyn vramwarden::source::GpuSource>)
    });
    let opts = vramwarden::front::agent::AgentOptions {
        source: vramwarden::source::SourceKind::demo(),
        interval: Some(Duration::from_millis(200)),
        config: Some(cfg),
        listen: "127.0.0.1:0".parse().expect("addr"),
        no_record: true,
        token_file: Some(dir.path().join("agent.token")),
        max_processes: 200,
        remote_other_users: false,
    };
    let agent = vramwarden::front::agent::start(&opts, factory, None).expect("start the agent");
    (agent, dir)
}

fn start_time_of(agent: &vramwarden::front::agent::Agent, pid: u32) -> i64 {
    wait_for(Duration::from_secs(10), "the child in the snapshot", || {
        let m = agent.state.shared.read().ok()?;
        m.latest
            .as_ref()?
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| p.key().start_time_ms)
    })
}

#[test]
fn a_command_with_the_token_terminates_a_real_child() {
    let mut child = sleeper();
    let (agent, dir) = agent_on(&child, ACTING);
    let token = std::fs::read_to_string(dir.path().join("agent.token")).expect("token");
    let start = start_time_of(&agent, child.id());
    let body = format!(
        r#"{{"action":"terminate","pid":{},"start_time":{start},"grace_seconds":5}}"#,
        child.id()
    );
    let r = request(agent.addr, "POST", "/api/v1/command", &[], body.as_bytes());
    assert_eq!(r.status, 401);
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "refused: still alive"
    );
    let auth = format!("Bearer {}", token.trim());
    let r = command_as(agent.addr, &auth, body.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["outcome"], "acted", "{}", r.text());
    let status = wait_for(Duration::from_secs(5), "the child to die", || {
        child.try_wait().ok().flatten()
    });
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM));
    assert!(agent.stop());
}

#[test]
fn the_agents_own_dry_run_wins_over_the_client() {
    let mut child = sleeper();
    // Default settings: the global dry run is on.
    let (agent, dir) = agent_on(&child, "");
    let token = std::fs::read_to_string(dir.path().join("agent.token")).expect("token");
    let start = start_time_of(&agent, child.id());
    let body = format!(
        r#"{{"action":"kill","pid":{},"start_time":{start}}}"#,
        child.id()
    );
    let auth = format!("Bearer {}", token.trim());
    let r = command_as(agent.addr, &auth, body.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["outcome"], "would_act");
    assert!(
        v["detail"].as_str().is_some_and(|d| d.contains("dry run")),
        "{v}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "nothing was sent"
    );
    let _ = child.kill();
    let _ = child.wait();
    assert!(agent.stop());
}

/// A park is long work: the agent answers 202 "accepted" with the command's id at once, and
/// its final reply (here the driver's no: no `libcuda`, or no CUDA context in `sleep`) comes
/// under that id, from `GET /api/v1/command/ID` and in the View's `replies`; a window attached
/// through the remote link gets it under its own command's id.
#[test]
fn a_park_is_accepted_and_its_final_reply_is_obtained_under_its_id() {
    use vramwarden::engine::command::Stage;
    use vramwarden::link::EngineLink;
    let mut child = sleeper();
    let (agent, dir) = agent_on(&child, ACTING);
    let token = std::fs::read_to_string(dir.path().join("agent.token")).expect("token");
    let auth = format!("Bearer {}", token.trim());
    let start = start_time_of(&agent, child.id());
    let body = format!(
        r#"{{"action":"park","pid":{},"start_time":{start}}}"#,
        child.id()
    );
    let r = command_as(agent.addr, &auth, body.as_bytes());
    assert_eq!(r.status, 202, "{}", r.text());
    let v = r.json();
    assert_eq!(v["stage"], "accepted", "{v}");
    assert_eq!(v["api_version"], vramwarden::link::wire::API_VERSION);
    let id = v["id"].as_u64().expect("an id");
    let path = format!("/api/v1/command/{id}");
    let last = wait_for(Duration::from_secs(20), "the park's final reply", || {
        let r = get_as(agent.addr, &path, &auth);
        (r.status != 202).then_some(r)
    });
    let f = last.json();
    assert!(matches!(last.status, 403 | 500), "{}", last.text());
    assert_eq!(f["id"].as_u64(), Some(id), "{f}");
    assert!(f.get("stage").is_none(), "final: {f}");
    assert!(f["seconds"].as_f64().is_some(), "{f}");
    assert!(
        f["detail"]
            .as_str()
            .is_some_and(|d| d.contains("park of sleep (PID")),
        "{f}"
    );
    // The same final reply in the View, for attached windows.
    let view = get_as(agent.addr, "/api/view", &auth);
    let replies = view.json()["replies"].clone();
    assert!(
        replies
            .as_array()
            .is_some_and(|a| a.iter().any(|r| r["id"].as_u64() == Some(id))),
        "{replies}"
    );
    // Unknown and malformed ids.
    let r = get_as(agent.addr, "/api/v1/command/999999", &auth);
    assert_eq!(r.status, 404);
    let r = get_as(agent.addr, "/api/v1/command/x", &auth);
    assert_eq!(r.status, 400);
    let r = request(agent.addr, "GET", &path, &[], b"");
    assert_eq!(r.status, 401);

    // A window attached through the remote link: accepted, then the final reply under the
    // window's own id.
    let shared =
        vramwarden::engine::shared::Shared::new(vramwarden::engine::view::Monitor::new(200, 100));
    let link = vramwarden::link::remote::RemoteLink::connect(
        &format!("http://{}", agent.addr),
        token.trim().to_string(),
        shared,
        std::sync::Arc::new(|| {}),
    )
    .expect("connect");
    let key = (
        vramwarden::model::ProcessKey {
            pid: child.id(),
            start_time_ms: start,
        },
        0,
    );
    let sent = link.send(vramwarden::engine::EngineCommand::Manual {
        key,
        action: vramwarden::act::rules::Action::Park,
        from: vramwarden::engine::CommandFrom::Window,
    });
    let mut got = Vec::new();
    wait_for(Duration::from_secs(20), "the link's final reply", || {
        got.extend(link.take_replies());
        got.iter().any(|r| r.answer.is_final()).then_some(())
    });
    assert!(got.iter().all(|r| r.id == sent), "{got:?}");
    assert_eq!(got[0].answer.stage, Stage::Accepted, "{got:?}");
    let fin = got.last().expect("final");
    assert!(
        fin.answer.is_final() && fin.answer.seconds.is_some(),
        "{fin:?}"
    );
    assert!(fin.answer.detail.ends_with("(on the agent)"), "{fin:?}");
    assert!(
        matches!(
            fin.answer.outcome,
            vramwarden::model::outcome::Outcome::Failed
                | vramwarden::model::outcome::Outcome::Skipped
        ),
        "{fin:?}"
    );
    drop(link);
    let _ = child.kill();
    let _ = child.wait();
    assert!(agent.stop());
}
