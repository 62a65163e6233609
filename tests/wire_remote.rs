//! The wire type against a real `vramwarden agent` (the simulated GPUs): `/api/view` serves
//! the View with the current `api_version` and only the history after `since`, `/api/past` the agent's
//! own past leaks, and a remote link fed by it holds the agent's history and has a rule
//! tested by the agent's engine, the answer coming back under the command's id; an attached
//! window is alerted of the agent's new leaks.

#[path = "agent_support/mod.rs"]
mod agent_support;

use std::sync::Arc;
use std::time::Duration;

use agent_support::{wait_for, AgentProc};
use vramwarden::link::EngineLink;

fn get(a: &AgentProc, path: &str) -> agent_support::Http {
    let auth = a.auth();
    agent_support::request(a.addr, "GET", path, &[("Authorization", &auth)], b"")
}

/// A remote link to agent `a`, writing into a View of its own (returned beside it).
fn link_to(
    a: &AgentProc,
) -> (
    vramwarden::link::remote::RemoteLink,
    vramwarden::engine::shared::SharedMonitor,
) {
    let shared =
        vramwarden::engine::shared::Shared::new(vramwarden::engine::view::Monitor::new(1000, 3600));
    let link = vramwarden::link::remote::RemoteLink::connect(
        &format!("http://{}", a.addr),
        a.token.clone(),
        shared.clone(),
        Arc::new(|| {}),
    )
    .expect("connect");
    (link, shared)
}

#[test]
fn the_agent_serves_its_view_with_only_the_history_after_since() {
    let a = AgentProc::start("", &["--no-record"]);
    let full = wait_for(Duration::from_secs(20), "three ticks", || {
        let r = get(&a, "/api/view");
        (r.status == 200 && r.json()["history_end_tick"].as_u64() >= Some(3)).then_some(r)
    });
    let body = full.body.clone();
    let v = vramwarden::link::wire_checks::decode_view(&body, vramwarden::model::now_ms())
        .expect("the agent's own answer passes the checks");
    assert_eq!(v.api_version, vramwarden::link::wire::API_VERSION);
    assert!(v.history.len() >= 3);
    assert!(v.latest.as_ref().is_some_and(|s| !s.devices.is_empty()));
    // Its OOM forecast alerts, growing series and orphaned memory go too (none here yet).
    let sent = full.json();
    for field in ["oom_alerts", "growing", "orphans"] {
        assert!(sent[field].is_array(), "{field} is sent: {sent}");
    }
    // Asked after its newest tick: no history is sent again.
    let end = v.history_end_tick;
    let later = get(&a, &format!("/api/view?since={end}")).json();
    let sent = later["history"]["times"].as_array().map_or(0, Vec::len) as u64;
    let new_end = later["history_end_tick"].as_u64().expect("end");
    assert_eq!(sent, new_end - end, "only the ticks after since");
    assert_eq!(later["history"]["from_tick"].as_u64(), Some(end));
    // A bad query is refused; /api/view needs the token.
    assert_eq!(get(&a, "/api/view?since=x").status, 400);
    assert_eq!(agent_support::get(a.addr, "/api/view").status, 401);
    // The past leaks of its own session folder (none yet), in the wire type.
    let past = get(&a, "/api/past");
    assert_eq!(past.status, 200, "{}", past.text());
    let p = vramwarden::link::wire_checks::decode_past(&past.body, vramwarden::model::now_ms())
        .expect("past");
    assert!(p.leaks.is_empty());
}

#[test]
fn a_remote_link_holds_the_agents_history_and_its_rule_test_is_answered_by_the_agent() {
    let a = AgentProc::start("", &["--no-record"]);
    let (link, shared) = link_to(&a);
    wait_for(Duration::from_secs(20), "the agent's history", || {
        let m = shared.read().ok()?;
        (m.history.len() >= 3 && m.latest.is_some()).then_some(())
    });
    {
        let m = shared.read().expect("monitor");
        let agent = get(&a, "/api/view").json();
        let agent_end = agent["history_end_tick"].as_u64().expect("end");
        // Its history from the agent's first tick, not from the moment of connection.
        assert!(
            m.history.len() as u64 + 3 >= agent_end,
            "{} of {agent_end}",
            m.history.len()
        );
        assert!(m.rows().count() > 0);
    }
    let id = link.send(vramwarden::engine::EngineCommand::TestRule {
        rule: Box::new(vramwarden::act::rules::Rule::default()),
        safety: None,
    });
    let r = wait_for(Duration::from_secs(10), "the agent's answer", || {
        link.take_replies().into_iter().find(|r| r.id == id)
    });
    assert_eq!(r.what, "Test rule");
    assert!(
        r.answer.detail.contains("(on the agent)"),
        "{}",
        r.answer.detail
    );
    assert!(
        r.answer.detail.contains("It matches"),
        "{}",
        r.answer.detail
    );
    assert!(r.answer.matches.is_some(), "the matches came back");
}

/// Alerts a sink collects (the stand-in for the window's desktop notifications).
fn collecting() -> (
    vramwarden::engine::AlertSink,
    Arc<std::sync::Mutex<Vec<vramwarden::engine::EngineEvent>>>,
) {
    let got = Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = got.clone();
    let sink: vramwarden::engine::AlertSink = Arc::new(move |a| {
        into.lock().expect("alerts").push(a);
    });
    (sink, got)
}

fn attach(
    a: &AgentProc,
    leaks_on: bool,
) -> (
    vramwarden::link::remote::RemoteLink,
    Arc<std::sync::Mutex<Vec<vramwarden::engine::EngineEvent>>>,
) {
    let (link, _) = link_to(a);
    let (sink, got) = collecting();
    let filter = vramwarden::engine::AlertFilter {
        leaks: leaks_on,
        ..Default::default()
    };
    link.alert_to(sink, filter);
    (link, got)
}

#[test]
fn an_attached_window_is_alerted_of_the_agents_new_leak_once_and_a_later_one_not_of_the_old() {
    // The simulated notebook is flagged as leaking about 40 s after the agent starts.
    let a = AgentProc::start("", &["--no-record"]);
    let (_link, got) = attach(&a, true);
    let (_quiet, quiet) = attach(&a, false);
    let leak = wait_for(Duration::from_secs(120), "a leak alert", || {
        let g = got.lock().ok()?;
        g.iter()
            .find(|x| x.kind.alert_kind() == Some(vramwarden::engine::AlertKind::Leak))
            .cloned()
    });
    assert!(
        matches!(
            leak.kind,
            vramwarden::engine::EngineEventKind::LeakStarted { .. }
        ),
        "{leak:?}"
    );
    // A window attached now knows that leak already: no alert for it; the first sees it once.
    let (_late, late) = attach(&a, true);
    std::thread::sleep(Duration::from_secs(4));
    let leaks = |v: &[vramwarden::engine::EngineEvent]| {
        v.iter()
            .filter(|x| x.kind.alert_kind() == Some(vramwarden::engine::AlertKind::Leak))
            .count()
    };
    assert_eq!(leaks(&got.lock().expect("alerts")), 1);
    assert_eq!(leaks(&late.lock().expect("alerts")), 0);
    // With leak notifications off, the window hears of no leak.
    assert_eq!(leaks(&quiet.lock().expect("alerts")), 0);
}

/// A window's link reads the agent's past leaks again when the agent starts a new run: the
/// run before, with its leak, is past now (the Leaks tab said "No leak so far" after a
/// restart until the window was attached again).
#[test]
fn the_agents_past_leaks_are_read_again_when_it_starts_a_new_run() {
    let mut a = AgentProc::start("", &[]);
    let (link, shared) = link_to(&a);
    // The simulated notebook is flagged about 40 s in; its log is this run's, not yet past.
    wait_for(Duration::from_secs(120), "the run's leak", || {
        let m = shared.read().ok()?;
        (!m.leaks.is_empty()).then_some(())
    });
    let before = wait_for(Duration::from_secs(10), "the past leaks", || {
        link.past_or_ask()
    });
    assert!(before.leaks.is_empty(), "{:?}", before.leaks);
    // The agent stops (its log closed) and starts again on the same folder and address.
    let _ = a.child.kill();
    let _ = a.child.wait();
    a.child = a.restart("data");
    let after = wait_for(
        Duration::from_secs(30),
        "the past leaks after the restart",
        || link.past_or_ask().filter(|p| !p.leaks.is_empty()),
    );
    assert!(
        after.leaks.iter().all(|l| l.session.is_some()),
        "{:?}",
        after.leaks
    );
}
