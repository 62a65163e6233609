//! Property tests of the agent's HTTP request path and of the window's decoder of the agent's
//! answers (issue 27): random and mutated requests to a real agent's socket never stop it (it
//! still answers `/healthz` after every batch), and random or mutated snapshot answers never
//! make the remote link's decoder panic or let a value past its caps.
//! `PROPTEST_CASES=N` runs longer (the default here is 96 per property).

#[path = "agent_support/mod.rs"]
mod agent_support;
mod v1_support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use proptest::prelude::*;
use vramwarden::link::checks;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(96),
        ..ProptestConfig::default()
    }
}

/// Requests that parse far enough to reach the interesting parts: a real request line and
/// headers, then mutated bytes.
fn request_bytes() -> impl Strategy<Value = Vec<u8>> {
    let method = prop::sample::select(vec!["GET", "POST", "HEAD", "PUT", "G\0T", "get"]);
    let path = prop::sample::select(vec![
        "/metrics",
        "/healthz",
        "/api/v1/command",
        "/api/v1/sessions/..%2f",
        "/api/v1/snapshot",
        "*",
        "",
    ]);
    let header = prop::sample::select(vec![
        "Content-Length: 18446744073709551615",
        "Content-Length: 5",
        "Content-Length: -1",
        "Content-Length: 1\r\nContent-Length: 2",
        "Transfer-Encoding: chunked",
        "Authorization: Bearer x",
        "Accept: application/openmetrics-text",
        "Connection: keep-alive",
        "Expect: 100-continue",
        "X: \u{7f}\u{1}",
    ]);
    (
        method,
        path,
        prop::collection::vec(header, 0..4),
        prop::collection::vec(any::<u8>(), 0..512),
        any::<bool>(),
    )
        .prop_map(|(m, p, hs, tail, raw)| {
            if raw {
                return tail;
            }
            let mut r = format!("{m} {p} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
            for h in hs {
                r.push_str(h);
                r.push_str("\r\n");
            }
            r.push_str("\r\n");
            let mut b = r.into_bytes();
            b.extend_from_slice(&tail);
            b
        })
}

/// One batch of requests, each on its own connection; then the agent must be alive and
/// answer `/healthz`.
fn send_batch(a: &Mutex<agent_support::AgentProc>, batch: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let mut a = a.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for bytes in batch {
        let mut s = TcpStream::connect(a.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let _ = s.write_all(bytes);
        let _ = s.shutdown(Shutdown::Write);
        let mut out = Vec::new();
        let _ = Read::by_ref(&mut s).take(1 << 20).read_to_end(&mut out);
        if !out.is_empty() {
            prop_assert!(
                out.starts_with(b"HTTP/1."),
                "{:?}",
                String::from_utf8_lossy(&out[..out.len().min(80)])
            );
        }
    }
    prop_assert!(
        a.child.try_wait().expect("try_wait").is_none(),
        "the agent died"
    );
    let h = agent_support::get(a.addr, "/healthz");
    prop_assert_eq!(h.status, 200, "{}", h.text());
    Ok(())
}

#[test]
fn any_request_bytes_leave_the_agent_answering() {
    // One agent for every case (a local, so it is stopped when the test ends).
    let a = Mutex::new(agent_support::AgentProc::start("", &["--no-record"]));
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let strategy = prop::collection::vec(request_bytes(), 1..4);
    if let Err(e) = runner.run(&strategy, |batch| send_batch(&a, &batch)) {
        panic!("{e}");
    }
}

#[test]
fn a_real_answer_decodes() {
    let now = vramwarden::model::now_ms();
    let snap = v1_support::decode_snapshot(answer().as_bytes(), now)
        .expect("a real answer is taken")
        .expect("with its snapshot");
    assert!(!snap.devices.is_empty() && !snap.processes.is_empty());
}

/// A real answer of the agent's snapshot API, as JSON text.
fn answer() -> &'static String {
    static ANSWER: OnceLock<String> = OnceLock::new();
    ANSWER.get_or_init(|| {
        use vramwarden::source::GpuSource;
        let now = vramwarden::model::now_ms();
        let mut sim = vramwarden::source::sim::SimSource::demo(now - 600_000);
        let snap = sim.sample(now).expect("a sample");
        serde_json::json!({
            "source": sim.info(),
            "status": {"state": "running"},
            "interval_ms": 1000,
            "last_error": null,
            "snapshot": snap,
            "leaks": [{
                "pid": 12, "start_time_ms": now - 5000, "device_index": 0, "name": "train",
                "user": "u", "ghost": false, "since_ms": now - 4000, "flagged_ms": now - 3000,
                "ended_ms": null, "rate_mib_per_min": 12.5, "grown_mib": 100.0, "peak_mib": 900.0
            }],
            "recording": {"path": "/x", "active": true, "bytes": 1, "samples": 1, "lost": 0, "error": null},
        })
        .to_string()
    })
}

/// Numbers that break things: huge, negative, fractional, out of every range.
fn hostile_number() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::json!(u64::MAX)),
        Just(serde_json::json!(i64::MAX)),
        Just(serde_json::json!(i64::MIN)),
        Just(serde_json::json!(4_294_967_295u64)),
        Just(serde_json::json!(5_000_000)),
        Just(serde_json::json!(-1)),
        Just(serde_json::json!(1e308)),
        Just(serde_json::json!(0.5)),
        Just(serde_json::json!(null)),
        Just(serde_json::json!("x".repeat(70_000))),
        (0u64..100).prop_map(|n| serde_json::json!(n)),
    ]
}

/// Every number's place in `v` (a path of keys and indices).
fn number_paths(v: &serde_json::Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        serde_json::Value::Number(_) => out.push(at.clone()),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                at.push(i.to_string());
                number_paths(x, at, out);
                at.pop();
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                at.push(k.clone());
                number_paths(x, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn at_path<'a>(v: &'a mut serde_json::Value, path: &[String]) -> Option<&'a mut serde_json::Value> {
    path.iter().try_fold(v, |v, k| match v {
        serde_json::Value::Array(a) => a.get_mut(k.parse::<usize>().ok()?),
        serde_json::Value::Object(o) => o.get_mut(k),
        _ => None,
    })
}

/// What the decoder lets through stays within its caps, and applying it to a monitor allocates
/// little.
fn within_caps(body: &[u8]) -> Result<(), TestCaseError> {
    let now = vramwarden::model::now_ms();
    let Ok(Some(snap)) = v1_support::decode_snapshot(body, now) else {
        return Ok(());
    };
    prop_assert!(snap.devices.len() <= checks::MAX_DEVICES);
    prop_assert!(snap
        .devices
        .iter()
        .all(|d| (d.index as usize) < checks::MAX_DEVICES));
    prop_assert!(snap.processes.len() <= checks::MAX_PROCESSES);
    prop_assert!(snap.taken_at_ms <= now + checks::MAX_AHEAD_MS);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = vramwarden::engine::view::Monitor::new(1000, 60);
    engine_state.apply(&mut m, snap, now);
    prop_assert!(
        m.history.heap_bytes() < 64 << 20,
        "{}",
        m.history.heap_bytes()
    );
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_link_decoder_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let now = vramwarden::model::now_ms();
        let snapshot = v1_support::decode_snapshot(&bytes, now).is_ok();
        let sessions = vramwarden::link::remote::decode_sessions(&bytes, now).is_ok();
        let view = vramwarden::link::wire_checks::decode_view(&bytes, now).is_ok();
        let past = vramwarden::link::wire_checks::decode_past(&bytes, now).is_ok();
        // And none takes what is not JSON at all.
        if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
            prop_assert!(!(snapshot || sessions || view || past));
        }
    }

    #[test]
    fn the_wire_decoder_keeps_hostile_numbers_out(
        picks in prop::collection::vec((any::<prop::sample::Index>(), hostile_number()), 1..6)
    ) {
        let mut v: serde_json::Value = serde_json::from_str(view_answer()).expect("json");
        let mut paths = Vec::new();
        number_paths(&v, &mut Vec::new(), &mut paths);
        for (i, n) in picks {
            let path = i.get(&paths).clone();
            if let Some(slot) = at_path(&mut v, &path) {
                *slot = n;
            }
        }
        view_within_caps(v.to_string().as_bytes())?;
    }

    #[test]
    fn the_wire_decoder_survives_cut_and_flipped_answers(cut in any::<prop::sample::Index>(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8)) {
        let mut b = view_answer().as_bytes().to_vec();
        for (i, x) in flips {
            let at = i.index(b.len());
            b[at] = x;
        }
        let keep = cut.index(b.len() + 1);
        view_within_caps(&b[..keep])?;
    }

    #[test]
    fn the_link_decoder_keeps_hostile_numbers_out(
        picks in prop::collection::vec((any::<prop::sample::Index>(), hostile_number()), 1..6)
    ) {
        let mut v: serde_json::Value = serde_json::from_str(answer()).expect("json");
        let mut paths = Vec::new();
        number_paths(&v, &mut Vec::new(), &mut paths);
        for (i, n) in picks {
            let path = i.get(&paths).clone();
            if let Some(slot) = at_path(&mut v, &path) {
                *slot = n;
            }
        }
        within_caps(v.to_string().as_bytes())?;
    }

    #[test]
    fn the_link_decoder_survives_cut_and_flipped_answers(cut in any::<prop::sample::Index>(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8)) {
        let mut b = answer().as_bytes().to_vec();
        for (i, x) in flips {
            let at = i.index(b.len());
            b[at] = x;
        }
        let keep = cut.index(b.len() + 1);
        // Whole answers (keep == len) must still pass the caps when they decode.
        within_caps(&b[..keep])?;
    }
}

/// A real answer of the agent's `/api/view` (the simulated GPUs, 300 s of history), as JSON.
fn view_answer() -> &'static String {
    static ANSWER: OnceLock<String> = OnceLock::new();
    ANSWER.get_or_init(|| {
        use vramwarden::source::GpuSource;
        let now = vramwarden::model::now_ms();
        let mut sim = vramwarden::source::sim::SimSource::demo(now - 400_000);
        let mut engine_state = vramwarden::engine::state::EngineState::default();
        let mut m = vramwarden::engine::view::Monitor::new(1000, 600);
        m.source = Some(sim.info());
        for i in (0..300).rev() {
            let t = now - i * 1000;
            engine_state.apply(&mut m, sim.sample(t).expect("sim"), t);
        }
        let v = vramwarden::link::wire::WireView::of(&m, 0, 4096);
        serde_json::to_string(&v).expect("json")
    })
}

/// What the wire decoder lets through stays within its caps, and applying it to a window's
/// View allocates little.
fn view_within_caps(body: &[u8]) -> Result<(), TestCaseError> {
    use vramwarden::model::history::delta;
    let now = vramwarden::model::now_ms();
    let Ok(v) = vramwarden::link::wire_checks::decode_view(body, now) else {
        return Ok(());
    };
    prop_assert_eq!(v.api_version, vramwarden::link::wire::API_VERSION);
    prop_assert!(v.history.len() <= delta::MAX_DELTA_TICKS);
    prop_assert!(v.history.series() * v.history.len() <= delta::MAX_DELTA_VALUES);
    if let Some(snap) = &v.latest {
        prop_assert!(snap.devices.len() <= checks::MAX_DEVICES);
        prop_assert!(snap.taken_at_ms <= now + checks::MAX_AHEAD_MS);
    }
    let mut m = vramwarden::engine::view::Monitor::new(1000, 600);
    let _ = v.apply(&mut m, now);
    prop_assert!(
        m.history.heap_bytes() < 64 << 20,
        "{}",
        m.history.heap_bytes()
    );
    Ok(())
}
