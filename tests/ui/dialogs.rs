//! Every confirmation is a dialog a screen reader finds by its question (AccessKit: a Dialog
//! labelled with it) holding its action's button and Cancel, with the keyboard on Cancel; the
//! path field asks with the path typed there last.

use super::*;
use egui::accesskit::Role;
use egui_kittest::kittest::NodeT;

/// Right-clicks the table row of `pid` and picks `item` in its menu.
fn from_row_menu(h: &mut Harness<'static, VramApp>, pid: &str, item: &str) {
    row_menu(h, pid);
    h.get_by_label(item).click();
    h.run();
}

/// The confirmation on screen is one Dialog labelled `question`, holding the buttons `verb`
/// and Cancel, with the keyboard on Cancel; Esc closes it without acting.
fn assert_confirmation(h: &mut Harness<'static, VramApp>, question: &str, verb: &str) {
    let dialogs: Vec<String> = h
        .get_all_by_role(Role::Dialog)
        .filter_map(|n| n.accesskit_node().label())
        .collect();
    assert_eq!(dialogs, [question], "the dialogs on screen");
    let dialog = h.get_by_role_and_label(Role::Dialog, question);
    dialog.get_by_role_and_label(Role::Button, verb);
    let cancel = dialog.get_by_role_and_label(Role::Button, "Cancel");
    assert!(
        cancel.is_focused(),
        "{question}: the keyboard starts on Cancel"
    );
    h.key_press(egui::Key::Escape);
    h.run();
    assert!(
        h.query_by_role_and_label(Role::Dialog, question).is_none(),
        "{question}: Esc closed it"
    );
}

/// Terminate and Kill (row menu), Release and Set limit (the PyTorch part of the detail
/// pane): each asks in a dialog named by its question.
#[test]
fn every_action_asks_in_a_dialog_named_by_its_question() {
    let mut h = harness(demo_app(300));
    h.run();
    from_row_menu(&mut h, "39002", "Terminate…");
    assert_confirmation(&mut h, "Terminate this process?", "Terminate");
    assert!(h.state().confirm.is_none(), "nothing asked any more");
    from_row_menu(&mut h, "39002", "Kill…");
    assert_confirmation(&mut h, "Kill this process?", "Kill");
    h.get_by_label("51877").click();
    h.run();
    h.get_by_label("Release cached memory").click();
    h.run();
    h.run();
    // The review: the release did not say how much it frees; the companion's last figure.
    h.get_by_label_contains("frees the cache it does not use: about ");
    assert_confirmation(
        &mut h,
        "Release this process's cached GPU memory?",
        "Release",
    );
    h.get_by_label("Set limit").click();
    h.run();
    h.run();
    let question = dialog_question(&h);
    assert!(
        question.starts_with("Limit this process to ") && question.ends_with(" GiB of GPU memory?"),
        "{question}"
    );
    assert_confirmation(&mut h, &question, "Limit");
}

/// A window over `seconds` of a simulated GPU where a real process (this test's) holds
/// 24 GiB, parked from 30 s on.
fn real_process_app(seconds: i64) -> VramApp {
    use vramwarden::source::sim::{Script, SimDevice, SimProcess};
    let pid = std::process::id();
    let mut sim = SimSource::empty(
        T0,
        vec![SimDevice {
            name: "Simulated H200".into(),
            total_mib: 143_771,
            reserved_mib: 500,
            ghost_mib: 0,
            power_cap_w: 700,
        }],
    );
    sim.add(SimProcess {
        pid,
        device_index: 0,
        info: None,
        script: Script::Idle { mib: 24 * 1024 },
        start_s: -100.0,
        restart_every_s: None,
        life_s: f64::INFINITY,
        busy_pct: 0,
    });
    let mut sim = sim.with_park(pid, 30.0, 1000.0, 3600.0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 86_400);
    m.source = Some(sim.info());
    for i in 0..seconds {
        let t = T0 + i * 1000;
        engine_state.apply(&mut m, sim.sample(t).expect("sim"), t);
    }
    VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
        .with_fixed_now(T0 + (seconds - 1) * 1000)
}

/// The one dialog on screen's question.
fn dialog_question(h: &Harness<'static, VramApp>) -> String {
    h.get_all_by_role(Role::Dialog)
        .filter_map(|n| n.accesskit_node().label())
        .next()
        .expect("a dialog")
}

/// A real process on a simulated GPU: Park asks how much moves and how long; parked, Resume
/// asks the same the other way.
#[test]
fn park_and_resume_ask_in_a_dialog_named_by_their_question() {
    let pid = std::process::id().to_string();
    let mut h = harness(real_process_app(20));
    h.run();
    from_row_menu(&mut h, &pid, "Park…");
    let question = dialog_question(&h);
    assert!(
        question.starts_with("Park: move its 24.0 GiB to host memory (~"),
        "{question}"
    );
    assert_confirmation(&mut h, &question, "Park");
    let mut h = harness(real_process_app(60));
    h.run();
    from_row_menu(&mut h, &pid, "Resume…");
    let question = dialog_question(&h);
    assert_eq!(
        question,
        "Resume: move its 24.0 GiB back to the GPU (~8 s)?"
    );
    assert_confirmation(&mut h, &question, "Resume");
}

/// The review: "signal SIGSTOP this process?" asked, and said nothing of what SIGSTOP does.
#[test]
fn a_signal_is_asked_by_its_name_and_what_it_does() {
    let mut h = harness(demo_app(300));
    h.run();
    h.get_by_label("39002").click();
    h.run();
    h.get_by_label("Send signal…").click();
    h.run();
    h.get_by_label("SIGSTOP").click();
    h.run();
    h.run();
    h.get_by_label("SIGSTOP: pauses it until SIGCONT; its GPU memory stays held.");
    assert_confirmation(&mut h, "Send SIGSTOP to this process?", "Send SIGSTOP");
}

/// Source → NVIDIA driver from the demo with history on screen asks first, in a dialog named
/// by its question; where the driver cannot be loaded, a dialog named by what it says, the
/// keyboard on OK, Esc closing it.
#[test]
fn switching_the_source_asks_in_a_dialog_named_by_its_question() {
    let mut h = harness(demo_app(120));
    h.run();
    h.get_by_label("Source").click();
    h.run();
    h.get_by_label("NVIDIA driver (NVML)").click();
    h.run();
    h.run();
    if vramwarden::source::nvml::driver_library().is_ok() {
        assert_confirmation(&mut h, "Switch to the NVIDIA driver?", "Switch");
    } else {
        let said = "No NVIDIA driver on this computer";
        let dialog = h.get_by_role_and_label(Role::Dialog, said);
        assert!(dialog
            .get_by_role_and_label(Role::Button, "OK")
            .is_focused());
        h.key_press(egui::Key::Escape);
        h.run();
        assert!(h.query_by_role_and_label(Role::Dialog, said).is_none());
        h.get_by_label("DEMO · simulated GPUs");
    }
}

/// Issue 40: where no file dialog can be shown, the path field asks with the path typed
/// there last for the same purpose (it started empty each time).
#[test]
fn the_path_field_offers_the_path_typed_last() {
    use vramwarden::front::gui::sessions::PathPurpose;
    let dir = tempfile::tempdir().expect("tmp");
    let typed = dir.path().join("night.vwlog").display().to_string();
    let mut h = harness(demo_app(30));
    h.run();
    h.state_mut().sessions.no_dialog(PathPurpose::Open);
    h.run();
    let field = h.get_by_role_and_label(Role::TextInput, "Path");
    assert_eq!(
        field.value().unwrap_or_default(),
        "",
        "nothing typed before"
    );
    field.click();
    h.run();
    h.get_by_role_and_label(Role::TextInput, "Path")
        .type_text(&typed);
    h.run();
    h.get_by_role_and_label(Role::Button, "Open").click();
    // The file is opened on a worker thread: it answers that there is no such file.
    let t = Instant::now();
    while h
        .query_all_by_label_contains("Could not open the file")
        .next()
        .is_none()
    {
        assert!(t.elapsed() < Duration::from_secs(10), "no answer to Open");
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
    assert!(
        h.query_by_label("Choose a file").is_none(),
        "the field closed"
    );
    h.state_mut().sessions.no_dialog(PathPurpose::Open);
    h.run();
    let again = h.get_by_role_and_label(Role::TextInput, "Path");
    assert_eq!(again.value().unwrap_or_default(), typed);
    // The review: typed again, a path was added to the end of the one offered. It is
    // selected, so typing replaces it, also after a click into the field.
    let other = dir.path().join("day.vwlog").display().to_string();
    again.click();
    h.run();
    h.get_by_role_and_label(Role::TextInput, "Path")
        .type_text(&other);
    h.run();
    let field = h.get_by_role_and_label(Role::TextInput, "Path");
    assert_eq!(field.value().unwrap_or_default(), other);
    // Another purpose keeps its own.
    h.get_by_role_and_label(Role::Button, "Cancel").click();
    h.run();
    h.state_mut().sessions.no_dialog(PathPurpose::Export);
    h.run();
    let export = h.get_by_role_and_label(Role::TextInput, "Path");
    assert_eq!(export.value().unwrap_or_default(), "");
}

/// The review of the window: the connect window showed Markdown's backticks round
/// `vramwarden agent` (egui draws them as they are); the Guard tab and the sessions' list had
/// the same. No text in the connect window holds a backtick, and the command is still named.
#[test]
fn the_connect_window_shows_no_markdown_backticks() {
    let mut h = harness(demo_app(60));
    h.run();
    h.get_by_label("File").click();
    h.run();
    h.get_by_label("Connect to host…").click();
    h.run();
    let texts: Vec<String> = h
        .query_all(egui_kittest::kittest::by())
        .filter_map(|n| {
            let a = n.accesskit_node();
            a.value().or_else(|| a.label())
        })
        .collect();
    assert!(
        texts.iter().any(|t| t.contains("vramwarden agent")),
        "{texts:?}"
    );
    let ticked: Vec<&String> = texts.iter().filter(|t| t.contains('`')).collect();
    assert!(ticked.is_empty(), "{ticked:?}");
}
