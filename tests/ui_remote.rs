//! The window attached to a real `vramwarden agent` over loopback (egui_kittest, the agent on
//! the simulated GPUs): it shows the agent's GPUs, a wrong token is refused and said so, an
//! action goes to the agent (which applies its own policy), a killed agent shows
//! "disconnected" within 3 s and the window reconnects when it is back.

#[path = "agent_support/mod.rs"]
mod agent_support;

use std::time::{Duration, Instant};

use agent_support::{AgentProc, ACTING};
use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use vramwarden::front::gui::app::UiState;
use vramwarden::front::gui::connect::SavedHost;
use vramwarden::front::gui::{Backend, VramApp};

fn harness(app: VramApp) -> Harness<'static, VramApp> {
    Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .with_max_steps(8)
        .build_eframe(|_cc| app)
}

/// Runs frames until `label` (a substring) is on screen, or panics after `limit`.
fn until_shown(h: &mut Harness<'static, VramApp>, label: &str, limit: Duration) -> Duration {
    let t = Instant::now();
    while h.query_all_by_label_contains(label).next().is_none() {
        assert!(t.elapsed() < limit, "{label:?} not shown within {limit:?}");
        std::thread::sleep(Duration::from_millis(25));
        // Background work (a download, a session opening) keeps asking for frames while
        // it runs: step as far as it lets, then look again.
        let _ = h.run_ok();
    }
    t.elapsed()
}

/// This computer's engine on the simulated GPUs, sampling every 200 ms.
fn demo_backend() -> Backend {
    Backend::start(
        vramwarden::source::SourceKind::demo().factory(),
        vramwarden::source::SourceKind::demo(),
        Duration::from_millis(200),
        1000,
        &egui::Context::default(),
    )
}

/// Opens the host selector. It is there from the first frame with saved hosts; a frame still
/// being laid out (a busy machine) may not have it yet.
fn open_host_selector(h: &mut Harness<'static, VramApp>) {
    let t = Instant::now();
    while h.query_all_by_label("Host").count() != 1 {
        assert!(t.elapsed() < Duration::from_secs(5), "no Host selector");
        std::thread::sleep(Duration::from_millis(25));
        let _ = h.run_ok();
    }
    h.get_by_label("Host").click();
    h.run();
}

/// Issue 40 (window v4), after an agent's restart, at 1280 × 800 and at 200 % (2560 × 1600
/// pixels): the graph ends inside the window (left of the detail pane when it is open), its
/// right edge is "now", and its legend names each process once (the old run's were listed
/// beside the new ones, and the graph grew past the window).
fn graph_fits_after_the_reconnect(h: &mut Harness<'static, VramApp>) {
    use egui_kittest::kittest::NodeT;
    h.set_size(egui::vec2(1280.0, 800.0));
    // The new run's graph has its lines (and legend) from its second sample.
    until_shown(h, "python3 (39002)", Duration::from_secs(5));
    for ppp in [1.0, 2.0] {
        h.set_pixels_per_point(ppp);
        for _ in 0..3 {
            let _ = h.run_ok();
        }
        let l = h.state().layout();
        let graph = l.graph.expect("the graph drawn");
        let edge = l.edge_x.expect("the newest moment placed");
        let right = l.detail_pane.map_or(1280.0, |p| p.left());
        assert!(
            graph.right() <= right + 0.5,
            "at {ppp}x the plot ({graph:?}) reaches past {right}"
        );
        assert!(
            edge <= graph.right() + 0.5 && edge > graph.left(),
            "at {ppp}x now is at x = {edge}, the plot {graph:?}"
        );
        // Legend entries are "name (PID)".
        let mut legend: Vec<String> = h
            .query_all_by_label_contains(")")
            .filter_map(|n| {
                let a = n.accesskit_node();
                a.value().or_else(|| a.label())
            })
            .filter(|l| {
                l.strip_suffix(')')
                    .and_then(|x| x.rsplit_once(" ("))
                    .is_some_and(|(_, pid)| {
                        !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
                    })
            })
            .collect();
        assert!(!legend.is_empty(), "at {ppp}x: no legend entry");
        let n = legend.len();
        legend.sort();
        legend.dedup();
        assert_eq!(
            legend.len(),
            n,
            "at {ppp}x a process is listed twice: {legend:?}"
        );
    }
}

#[test]
fn the_window_attached_to_an_agent_shows_acts_and_survives_its_restart() {
    let mut agent = AgentProc::start(ACTING, &[]);
    let url = format!("http://{}", agent.addr);
    let ctx = egui::Context::default();

    // A wrong token: refused, and the window says so instead of showing nothing.
    let wrong = Backend::attach(&url, "not-the-token".into(), 1000, &ctx).expect("attach");
    let mut h = harness(VramApp::with_backend(wrong, UiState::default()));
    until_shown(
        &mut h,
        "the agent refused the token",
        Duration::from_secs(5),
    );
    assert!(h.query_by_label("Simulated H200").is_none());
    drop(h);

    let backend = Backend::attach(&url, agent.token.clone(), 1000, &ctx).expect("attach");
    let mut h = harness(VramApp::with_backend(backend, UiState::default()));
    until_shown(&mut h, "Simulated H200", Duration::from_secs(10));
    until_shown(&mut h, "Simulated RTX 4090", Duration::from_secs(1));
    until_shown(&mut h, "· connected", Duration::from_secs(1));
    // A `--demo` agent: the window says so where a local demo does.
    h.get_by_label("DEMO · simulated GPUs");
    // Its recording is the agent's, on the agent's disk: the REC dot says so.
    h.get_by_label("● REC").hover();
    h.run();
    until_shown(&mut h, "(on that host)", Duration::from_secs(1));
    // The agent's processes, in the table.
    until_shown(&mut h, "39002", Duration::from_secs(5));

    // An action goes to the agent, which refuses a simulated process in its own words.
    h.get_by_label("39002").click();
    h.run();
    // Before any action, the result's slot says what it is for.
    until_shown(
        &mut h,
        "No action on this process yet",
        Duration::from_secs(1),
    );
    h.get_by_label("Terminate").click();
    h.run();
    let buttons = h.get_all_by_label("Terminate").collect::<Vec<_>>();
    buttons.last().expect("modal button").click();
    h.run();
    until_shown(&mut h, "(on the agent)", Duration::from_secs(10));
    until_shown(&mut h, "simulated process", Duration::from_secs(1));
    // The agent's reply stands in the process's row too.
    h.get_by_label("✖ skipped: simulated process: nothing was sent (on the agent)");

    // The agent dies: "disconnected" within 3 s, the last data stays on screen.
    let _ = agent.child.kill();
    let _ = agent.child.wait();
    let took = until_shown(&mut h, "disconnected — retrying", Duration::from_secs(3));
    eprintln!("disconnected shown after {took:?}");
    // The banner says since when it was lost, not a bare count beside "retrying" (read as
    // the time to the next try), and its words stay put (the GUI review: "5s ago" becoming
    // "15s ago" moved its buttons every second).
    until_shown(&mut h, " — retrying", Duration::from_secs(2));
    let banner = |h: &Harness<'static, VramApp>| {
        let n = h.get_by_label_contains("⚠ Disconnected from");
        let a = egui_kittest::kittest::NodeT::accesskit_node(&n);
        a.value().or_else(|| a.label()).unwrap_or_default()
    };
    let said = banner(&h);
    assert!(said.contains(" since "), "{said}");
    std::thread::sleep(Duration::from_millis(1100));
    h.run();
    assert_eq!(banner(&h), said, "the banner's words changed");
    h.get_by_label("Simulated H200");
    // Its last figures stay, greyed, under the time it was lost (issue 40).
    until_shown(&mut h, "⚠ Agent unreachable", Duration::from_secs(1));
    h.get_by_label("Its last figures, greyed");
    // Its rows are greyed as its cards are: the row's cells were drawn in their own colours.
    fn texts<'s>(s: &'s egui::Shape, out: &mut Vec<&'s egui::epaint::TextShape>) {
        match s {
            egui::Shape::Vec(v) => v.iter().for_each(|s| texts(s, out)),
            egui::Shape::Text(t) => out.push(t),
            _ => {}
        }
    }
    let mut all = Vec::new();
    for c in &h.output().shapes {
        texts(&c.shape, &mut all);
    }
    let row: Vec<_> = all.iter().filter(|t| t.galley.text() == "39002").collect();
    assert!(!row.is_empty(), "39002's row is not drawn");
    let faint = |t: &egui::epaint::TextShape| {
        t.galley.rows.iter().all(|r| {
            r.row
                .visuals
                .mesh
                .vertices
                .iter()
                .all(|v| v.color.a() < 200)
        })
    };
    assert!(row.iter().all(|t| faint(t)), "39002's row is drawn as live");
    // They stand as at the last sample: a process's age in its detail pane does not run on
    // (48213's, minutes old: "… (8m 05s ago)", to the second).
    h.get_by_label("48213").click();
    h.run();
    let age = |h: &Harness<'static, VramApp>| {
        let n = h.get_by_label_contains(" ago)");
        let a = egui_kittest::kittest::NodeT::accesskit_node(&n);
        a.value().or_else(|| a.label()).unwrap_or_default()
    };
    let first = age(&h);
    std::thread::sleep(Duration::from_millis(2100));
    h.run();
    assert_eq!(age(&h), first, "the age ran on while the agent was lost");
    // Nothing is offered that the agent could not carry out (the second window review:
    // Terminate stayed enabled and failed only once confirmed).
    h.get_by_label("The agent does not answer: no actions until it is back");
    assert!(h.query_by_label("Terminate").is_none());
    // Nor does the table's context menu.
    h.get_by_label("48213").click_secondary();
    h.run();
    assert!(h.query_by_label("Terminate…").is_none());
    assert!(h.query_by_label("Kill…").is_none());
    h.key_press(egui::Key::Escape);
    h.run();
    // Back to 39002 (GPU 1's graph, looked at after the reconnect).
    h.get_by_label("39002").click();
    h.run();

    // It comes back on the same address: the window reconnects by itself.
    // Kept in the agent's place: ended with it, even when an assertion below fails.
    agent.child = agent.restart("data2");
    let took = until_shown(&mut h, "· connected", Duration::from_secs(10));
    eprintln!("reconnected {took:?} after the agent was ready");
    assert!(h
        .query_all_by_label_contains("disconnected — retrying")
        .next()
        .is_none());
    assert!(h.query_by_label_contains("Agent unreachable").is_none());
    // A new run of the demo agent (its processes started anew): the window's View starts
    // over, and the old run's processes are not kept as exited rows beside the new ones.
    until_shown(&mut h, "39002", Duration::from_secs(5));
    assert!(
        h.query_all_by_label_contains("(exited)").next().is_none(),
        "the old run's processes are still listed"
    );
    graph_fits_after_the_reconnect(&mut h);
}

#[test]
fn a_command_without_the_token_is_refused_by_the_agent() {
    let agent = AgentProc::start(ACTING, &[]);
    let r = agent_support::request(
        agent.addr,
        "POST",
        "/api/v1/command",
        &[("Content-Type", "application/json")],
        br#"{"action":"kill","pid":1,"start_time":0}"#,
    );
    assert_eq!(r.status, 401, "{}", r.text());
}

#[test]
fn an_agents_session_is_listed_downloaded_and_opened_read_only() {
    // The window's own sessions folder (where downloads go) is a temporary one.
    let here = tempfile::tempdir().expect("tmp");
    std::env::set_var("VRAMWARDEN_DATA_DIR", here.path());
    // An agent that records (the default), on the simulated GPUs.
    let agent = AgentProc::start(ACTING, &[]);
    std::thread::sleep(Duration::from_secs(3));
    let url = format!("http://{}", agent.addr);
    let ctx = egui::Context::default();
    let backend = Backend::attach(&url, agent.token.clone(), 1000, &ctx).expect("attach");
    let mut h = harness(VramApp::with_backend(backend, UiState::default()));
    until_shown(&mut h, "Simulated H200", Duration::from_secs(10));
    h.get_by_label("Sessions").click();
    h.run();
    h.get_by_label("Sessions on the agent…").click();
    h.run();
    until_shown(&mut h, ".vwlog", Duration::from_secs(5));
    h.get_by_label("Open").click();
    until_shown(&mut h, "SESSION · read-only", Duration::from_secs(15));
    // One folder per agent under from-agents/.
    let agents: Vec<_> = std::fs::read_dir(here.path().join("sessions").join("from-agents"))
        .expect("the download folder")
        .flatten()
        .collect();
    assert_eq!(agents.len(), 1, "one agent's folder");
    let got: Vec<_> = std::fs::read_dir(agents[0].path())
        .expect("the agent's folder")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].ends_with(".vwlog"), "{got:?}");
}

/// Several hosts in one window: two agents and this computer stay attached; the host selector
/// switches between them at once, and each one's history goes on while another is shown.
#[test]
fn several_hosts_stay_attached_and_keep_their_history_while_another_is_shown() {
    let a = AgentProc::start(ACTING, &[]);
    let b = AgentProc::start(ACTING, &[]);
    let saved = |p: &AgentProc| SavedHost {
        url: format!("http://{}", p.addr),
        ssh: String::new(),
        token_file: p.dir.path().join("agent.token").display().to_string(),
    };
    let (ha, hb) = (saved(&a), saved(&b));
    let state = UiState {
        hosts: vec![ha.clone(), hb.clone()],
        ..UiState::default()
    };
    let mut h = harness(VramApp::with_backend(demo_backend(), state));
    until_shown(&mut h, "Simulated H200", Duration::from_secs(10));
    let span = |h: &Harness<'static, VramApp>| {
        h.state()
            .backend()
            .shared()
            .read()
            .expect("monitor")
            .history
            .span()
    };
    let shown_url = |h: &mut Harness<'static, VramApp>| match h.state_mut().backend_mut().health() {
        vramwarden::link::LinkHealth::Connected { url, .. } => url,
        other => format!("{other:?}"),
    };
    let pick = |h: &mut Harness<'static, VramApp>, item: &str| {
        open_host_selector(h);
        h.get_by_label(item).click();
        h.run();
    };
    let local_first = span(&h).expect("local history").0;

    // Attach A, then B: each shows its own data; this computer and A stay attached.
    pick(&mut h, &ha.label());
    until_shown(&mut h, "· connected", Duration::from_secs(10));
    assert_eq!(shown_url(&mut h), ha.url);
    let t = Instant::now();
    while span(&h).is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "no data from A");
        std::thread::sleep(Duration::from_millis(50));
        h.run();
    }
    let a_first = span(&h).expect("A's history").0;
    pick(&mut h, &hb.label());
    let t = Instant::now();
    while shown_url(&mut h) != hb.url {
        assert!(t.elapsed() < Duration::from_secs(10), "B not shown");
        std::thread::sleep(Duration::from_millis(50));
        h.run();
    }
    assert_eq!(
        h.state().backend().live_hosts().len(),
        3,
        "this computer, A and B"
    );
    let left_a = vramwarden::model::now_ms();
    std::thread::sleep(Duration::from_millis(2500));

    // Back to A from the selector ("· live"): the same history, grown in the background.
    pick(&mut h, &format!("{} · live", ha.label()));
    assert_eq!(shown_url(&mut h), ha.url);
    let (first, last) = span(&h).expect("A's history");
    assert_eq!(first, a_first, "A's history was kept, not restarted");
    assert!(
        last > left_a + 1000,
        "A kept sampling while B was shown: last sample {} ms after leaving it",
        last - left_a
    );

    // And this computer, which sampled on all along.
    pick(&mut h, "This computer · live");
    assert!(matches!(
        h.state_mut().backend_mut().health(),
        vramwarden::link::LinkHealth::Local
    ));
    assert_eq!(span(&h).expect("local history").0, local_first);
    assert_eq!(h.state().backend().live_hosts().len(), 3);
}

/// A saved host whose token file holds a wrong token: the window says the agent refused the
/// token (not that it is unreachable) and offers to enter it; the connect window opens for
/// that host saying why, and the right token attaches it.
#[test]
fn a_refused_token_is_asked_for_again_and_the_right_one_attaches() {
    use std::os::unix::fs::PermissionsExt;
    use vramwarden::front::gui::connect::REFUSED_TOKEN;
    let a = AgentProc::start(ACTING, &[]);
    let tmp = tempfile::tempdir().expect("tmp");
    let wrong = tmp.path().join("old.token");
    std::fs::write(&wrong, "not-the-token\n").expect("write");
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (_, mut h) = refused_by(&a, wrong.display().to_string());
    // The GUI review: the banner said "has not answered … — retrying" of an agent that
    // answered with a refusal.
    until_shown(&mut h, "refused this token", Duration::from_secs(2));
    for wrong in ["has not answered", "retrying"] {
        assert!(h.query_by_label_contains(wrong).is_none(), "{wrong}");
    }
    h.get_by_label("Enter the token…").click();
    h.run();
    until_shown(&mut h, REFUSED_TOKEN, Duration::from_secs(2));
    use egui::accesskit::Role;
    h.get_by_role_and_label(Role::PasswordInput, "Token")
        .focus();
    h.run();
    h.get_by_role_and_label(Role::PasswordInput, "Token")
        .type_text(&a.token);
    h.run();
    h.get_by_label("Connect").click();
    h.run();
    until_shown(&mut h, "· connected", Duration::from_secs(10));
    assert!(h.query_by_label_contains(REFUSED_TOKEN).is_none());
}

/// The window on the demo with agent `a` saved with `token_file` (a token it refuses), that
/// host picked in the selector, once the refusal shows: the saved host and the window.
fn refused_by(a: &AgentProc, token_file: String) -> (SavedHost, Harness<'static, VramApp>) {
    let host = SavedHost {
        url: format!("http://{}", a.addr),
        ssh: String::new(),
        token_file,
    };
    let state = UiState {
        hosts: vec![host.clone()],
        ..UiState::default()
    };
    let mut h = harness(VramApp::with_backend(demo_backend(), state));
    until_shown(&mut h, "Simulated H200", Duration::from_secs(10));
    open_host_selector(&mut h);
    h.get_by_label(&host.label()).click();
    h.run();
    until_shown(
        &mut h,
        "the agent refused the token",
        Duration::from_secs(10),
    );
    (host, h)
}

/// The GUI review: a refused token file, then the right one entered in the connect window:
/// the refused attempt stayed attached in the background, and the host selector listed the
/// agent twice, both "· live". It is listed once now.
#[test]
fn an_agent_reached_again_with_another_token_file_is_listed_once() {
    use std::os::unix::fs::PermissionsExt;
    let a = AgentProc::start(ACTING, &[]);
    let tmp = tempfile::tempdir().expect("tmp");
    let token_file = |name: &str, token: &str| {
        let f = tmp.path().join(name);
        std::fs::write(&f, format!("{token}\n")).expect("write");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        f.display().to_string()
    };
    let wrong = token_file("old.token", "not-the-token");
    let right = token_file("new.token", &a.token);
    let (host, mut h) = refused_by(&a, wrong);
    h.get_by_label("Enter the token…").click();
    h.run();
    h.get_by_label("or token file").focus();
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.run();
    h.get_by_label("or token file").type_text(&right);
    h.run();
    h.get_by_label("Connect").click();
    h.run();
    until_shown(&mut h, "· connected", Duration::from_secs(10));
    open_host_selector(&mut h);
    let live = format!("{} · live", host.label());
    let listed = h.query_all_by_label(&live).count();
    assert_eq!(listed, 1, "the agent is listed {listed} times as live");
}

/// The second window review: an address that never answered (a mistyped port) was said as
/// "Disconnected from … ago": a host never reached says it has not answered.
#[test]
fn a_host_that_never_answered_is_not_said_disconnected() {
    let ctx = egui::Context::default();
    // Port 1 on the loopback: nothing listens there.
    let backend = Backend::attach("http://127.0.0.1:1", "x".into(), 1000, &ctx).expect("attach");
    let mut h = harness(VramApp::with_backend(backend, UiState::default()));
    until_shown(
        &mut h,
        "http://127.0.0.1:1 has not answered",
        Duration::from_secs(10),
    );
    assert!(h.query_by_label_contains("Disconnected from").is_none());
}
