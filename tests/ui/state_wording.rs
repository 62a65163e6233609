//! Issue 40, group B (state and wording): a replay's parks, its Leaks count and the columns
//! a log does not keep; the park's Status cell; the Export window's stale error; the Resume
//! confirmation; a simulated process's park refused before asking; Settings' save message,
//! its problems in words and its rule rows' buttons.

use super::*;
use egui_kittest::kittest::NodeT as _;

/// The demo the window runs (`--demo`, its notebook 66020 parked from 200 s), `seconds` long.
fn demo_day_app(seconds: i64) -> VramApp {
    let mut sim = SimSource::demo_day(T0);
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

/// A replayed session shows a park as the live window did: the card's line, the row's
/// Status with its amount and time; and it is gone at a moment before the park.
#[test]
fn a_replayed_session_shows_its_parks_like_live() {
    use vramwarden::engine::{Engine, RecordTo};
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    let sim = SimSource::demo_day(T0);
    let mut e = Engine::new(
        vramwarden::engine::shared::Shared::new(Monitor::new(1000, 10)),
        RecordTo::File(path.clone()),
        1000,
    );
    e.set_source(sim.info());
    for i in 0..300 {
        e.tick(sim.at(T0 + i * 1000), T0 + i * 1000);
    }
    e.finish().expect("close");
    let mut app = VramApp::with_backend(
        Backend::detached(Monitor::new(1000, 10), SourceKind::Nvml),
        UiState::default(),
    );
    app.show_session(vramwarden::session::reader::SessionData::open(&path).expect("open"));
    let mut h = harness(app.with_fixed_now(T0 + 5_000_000));
    h.run();
    h.get_by_label("SESSION · read-only");
    // At its end (299 s): parked since 200 s, 24 GiB in host memory.
    h.get_by_label("⏸ 1 parked (24.0 GiB in host memory)");
    h.get_by_label("⏸ parked 24.0 GiB, 1m 39s");
    // At 150 s, before the park: none.
    h.state_mut().view.as_mut().expect("the session").t = T0 + 150_000;
    h.run();
    assert!(h.query_by_label_contains("⏸ 1 parked").is_none());
    assert!(h.query_by_label_contains("⏸ parked").is_none());
}

/// A card's parked line speaks the units the user chose (it said GiB with MiB chosen).
#[test]
fn the_cards_parked_line_follows_the_chosen_units() {
    let mut app = demo_day_app(300);
    app.state.units = vramwarden::model::format::Units::MiB;
    let mut h = harness(app);
    h.run();
    h.get_by_label("⏸ 1 parked (24576 MiB in host memory)");
}

/// The live Status column says how much is parked and for how long, not only "parked".
#[test]
fn the_status_column_says_what_is_parked_and_for_how_long() {
    let mut h = harness(demo_day_app(300));
    h.run();
    h.get_by_label("⏸ parked 24.0 GiB, 1m 39s");
    h.get_by_label("⏸ 1 parked (24.0 GiB in host memory)");
}

/// A replay's Leaks tab counts the leaks ongoing at its slider, and its table leaves out the
/// columns a log does not keep (saying so once) instead of a dash on every row.
#[test]
fn a_replay_counts_its_ongoing_leaks_and_leaves_out_unrecorded_columns() {
    let (_dir, h) = recorded_session_harness(300);
    // The notebook's 1 MiB/s leak was still growing when the recording stopped.
    h.get_by_label_contains("ongoing)");
    h.get_by_label("GPU %, CPU and RSS: not in session logs");
    for col in ["GPU %", "CPU", "RSS"] {
        // Only the note names them: no header.
        assert_eq!(
            h.query_all_by_label_contains(col).count(),
            1,
            "{col} is still a column"
        );
    }
    // Live, the columns are there and no note.
    let mut live = harness(demo_app(120));
    live.run();
    live.get_by_label("GPU %");
    live.get_by_label("RSS");
    assert!(live
        .query_by_label_contains("not in session logs")
        .is_none());
}

/// The Export window shows its own results only: not a file's open error, and not an old
/// result once reopened or once its input changes.
#[test]
fn the_export_window_keeps_no_stale_error() {
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("not-a-log.vwlog");
    std::fs::write(&bad, b"plain text, no session").expect("write");
    let mut h = harness(demo_app(30));
    h.run();
    h.state_mut().sessions.open_path(bad);
    let t = Instant::now();
    while h.state().sessions.open_error.is_none() {
        assert!(t.elapsed() < Duration::from_secs(5), "never failed");
        std::thread::sleep(Duration::from_millis(10));
        h.run();
    }
    h.state_mut().sessions.export_open = true;
    h.run();
    h.get_by_label("Export to CSV");
    // The banner says it once; the Export window says nothing of it.
    assert_eq!(
        h.query_all_by_label_contains("not a vramwarden session log")
            .count(),
        1
    );
    // An export's error: gone when the window is opened again …
    h.state_mut().sessions.message = Some(("the disk is full".into(), true));
    h.run();
    h.get_by_label("the disk is full");
    h.state_mut().sessions.export_open = false;
    h.run();
    h.state_mut().sessions.export_open = true;
    h.run();
    assert!(h.query_by_label("the disk is full").is_none());
    // … or when another table is picked.
    h.state_mut().sessions.message = Some(("the disk is full".into(), true));
    h.run();
    h.get_by_label("the disk is full");
    h.get_by_label("events only").click();
    h.run();
    assert!(h.query_by_label("the disk is full").is_none());
}

/// A simulated process's Park and Resume are off in its menu and the detail pane, with the
/// reason, before anything is asked.
#[test]
fn a_simulated_process_cannot_be_parked_and_says_so_first() {
    let mut h = harness(demo_day_app(300));
    h.run();
    row_menu(&mut h, "39002");
    assert!(h.get_by_label("Park…").accesskit_node().is_disabled());
    assert!(!h.get_by_label("Terminate…").accesskit_node().is_disabled());
    h.key_press(egui::Key::Escape);
    h.run();
    row_menu(&mut h, "66020");
    assert!(h.get_by_label("Resume…").accesskit_node().is_disabled());
    h.key_press(egui::Key::Escape);
    h.run();
    h.get_by_label("66020").click();
    h.run();
    h.get_by_label("No resume (simulated)");
    assert!(h.query_by_label("Resume").is_none());
    assert!(h.state().confirm.is_none());
}

/// A real (not simulated) process parked on a simulated GPU: the Resume confirmation says
/// what moves back and how long it takes (at the default rate until one is measured).
#[test]
fn the_resume_confirmation_says_what_moves_back_and_how_long() {
    use vramwarden::source::sim::{Script, SimDevice, SimProcess};
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
        pid: std::process::id(),
        device_index: 0,
        info: None,
        script: Script::Idle { mib: 24 * 1024 },
        start_s: -100.0,
        restart_every_s: None,
        life_s: f64::INFINITY,
        busy_pct: 0,
    });
    let mut sim = sim.with_park(std::process::id(), 10.0, 1000.0, 3600.0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 86_400);
    m.source = Some(sim.info());
    for i in 0..60 {
        let t = T0 + i * 1000;
        engine_state.apply(&mut m, sim.sample(t).expect("sim"), t);
    }
    let app = VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
        .with_fixed_now(T0 + 59_000);
    let mut h = harness(app);
    h.run();
    let pid = std::process::id().to_string();
    row_menu(&mut h, &pid);
    h.get_by_label("Resume…").click();
    h.run();
    // 24 GiB at 4 GiB/s plus 2 s.
    h.get_by_role_and_label(
        egui::accesskit::Role::Dialog,
        "Resume: move its 24.0 GiB back to the GPU (~8 s)?",
    );
    // The process it names: its parked bytes, not the "0 MiB" it holds on the GPU.
    let named = h
        .get_by_label_contains(&format!("(PID {pid}, "))
        .accesskit_node()
        .value()
        .unwrap_or_default();
    assert!(
        named.ends_with("parked: 24.0 GiB in host memory)"),
        "{named}"
    );
    assert!(!named.contains("0 MiB"), "{named}");
}

/// Settings: a first save claims no backup; the second names the one it kept.
#[test]
fn settings_name_a_backup_only_when_one_was_made() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("config.toml");
    let mut app = demo_app(30);
    app.set_config(path.clone(), None);
    let mut h = harness(app);
    h.run();
    let save = |h: &mut Harness<'static, VramApp>, minutes: f64| {
        let s = h.state().settings().clone();
        h.state_mut().settings_ui.show(&s);
        h.state_mut()
            .settings_ui
            .draft
            .notifications
            .oom_forecast_minutes = minutes;
        h.run();
        save_settings(h);
    };
    save(&mut h, 20.0);
    assert!(!dir.path().join("config.toml.bak").exists());
    assert!(h.query_by_label_contains(".bak").is_none());
    save(&mut h, 25.0);
    assert!(dir.path().join("config.toml.bak").exists());
    h.get_by_label_contains("the previous version kept as config.toml.bak");
}

/// Settings: what keeps Save off is said in the window's words (the file's key on hover),
/// and a rule's buttons stay in view beside a long name at the window's default size.
#[test]
fn settings_say_what_blocks_saving_in_words_and_keep_rule_buttons_in_view() {
    let mut h = harness(demo_app(30));
    h.run();
    let s = h.state().settings().clone();
    h.state_mut().settings_ui.show(&s);
    h.state_mut().settings_ui.draft.sampling.interval_ms = 5;
    h.run();
    h.get_by_label_contains("Cannot save yet: Sampling, Sampling interval: ");
    assert!(h.query_by_label_contains("interval_ms").is_none());
    h.state_mut().settings_ui.draft.sampling.interval_ms = 1000;
    h.get_by_label("Rules").click();
    h.run();
    h.get_by_label("Add the example: idle 30 min holding > 8 GiB, terminate")
        .click();
    h.run();
    // The rule's memory size is edited in GiB: 8 GiB, not 8192 (MiB).
    let sizes: Vec<f64> = h
        .get_all_by_role(egui::accesskit::Role::SpinButton)
        .filter_map(|n| n.accesskit_node().numeric_value())
        .collect();
    assert!(sizes.contains(&8.0), "{sizes:?}");
    assert!(!sizes.contains(&8192.0), "{sizes:?}");
    h.state_mut().settings_ui.draft.cleanup.rules[0].name =
        "Idle holder on the shared training nodes of the vision team, weekends included".into();
    h.run();
    h.run();
    let window = h
        .ctx
        .memory(|m| {
            let title: Option<std::borrow::Cow<'_, str>> = Some("Settings".into());
            m.area_rect(egui::Id::unique(title))
        })
        .expect("the Settings window");
    // (A lone rule has no Up or Down: it cannot move.)
    for b in ["Duplicate", "Delete…"] {
        let r = h.get_by_label(b).rect();
        assert!(
            r.right() <= window.right() && r.left() >= window.left(),
            "{b} at {r:?} is outside the window {window:?}"
        );
    }
}

/// The leak box says since when in the time of day when it is today ("since 05:49:18"), not
/// with the whole date, as the Leaks table does.
#[test]
fn the_leak_box_says_since_when_without_todays_date() {
    let (_dir, mut h) = recorded_session_harness(300);
    h.get_by_label("51877").click();
    h.run();
    let growing = h.get_by_label_contains("Growing at");
    let node = egui_kittest::kittest::NodeT::accesskit_node(&growing);
    let text = node.value().or_else(|| node.label()).unwrap_or_default();
    // "… since 05:49:18 (+73 MiB so far)."
    let when = text.split(" since ").nth(1).unwrap_or_default();
    let clock = when.split(' ').next().unwrap_or_default();
    assert!(
        clock.len() == 8 && clock.split(':').count() == 3 && when[8..].starts_with(" (+"),
        "{text}"
    );
}

/// A recorded session looked at before a leak's end: the leak box's growth is the episode's
/// to its end, said so (it said "so far" beside a smaller "GPU memory now"), and the Peak is
/// named the session's.
#[test]
fn a_replay_before_a_leaks_end_says_its_growth_is_the_whole_episodes() {
    let (_dir, mut h) = recorded_session_harness(300);
    h.get_by_label("51877").click();
    h.run();
    h.get_by_label_contains("so far");
    h.get_by_label("Peak in the session");
    let view = h.state_mut().view.as_mut().expect("the session");
    view.t -= 120_000;
    h.run();
    h.get_by_label_contains("by the episode's end, later in the session");
    assert!(h.query_by_label_contains("so far").is_none());
}

/// The Leaks table's Grown and Peak say which figure they are of on hover (a PyTorch job's
/// peak below its GPU memory read as a wrong number).
#[test]
fn the_leaks_tables_peak_says_which_figure_it_is_of() {
    let (_dir, mut h) = recorded_session_harness(300);
    h.get_by_label_contains("Leaks (").click();
    h.run();
    h.get_by_label("Peak").hover();
    h.run();
    h.run();
    h.get_by_label_contains("below the driver's figure for a PyTorch process");
}
