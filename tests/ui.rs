//! The window driven by egui_kittest on the simulated GPUs (no display, no GPU).

use std::time::{Duration, Instant};

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use vramwarden::engine::view::{Monitor, SourceStatus};
use vramwarden::front::gui::app::UiState;
use vramwarden::front::gui::{Backend, VramApp};
use vramwarden::model::UnixMs;
use vramwarden::source::sim::SimSource;
use vramwarden::source::{GpuSource, SourceError, SourceKind};

const T0: UnixMs = 1_796_000_000_000;

/// Right-clicks the table row of `pid` (its menu opens; the tests in tests/ui/ share it).
fn row_menu(h: &mut Harness<'static, VramApp>, pid: &str) {
    let at = h.get_by_label(pid).rect().center();
    h.hover_at(at);
    h.run();
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: at,
            button: egui::PointerButton::Secondary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        });
    }
    h.run();
}

#[path = "ui/contrast.rs"]
mod contrast;
#[path = "../benches/support/coverage.rs"]
mod coverage;
#[path = "ui/dialogs.rs"]
mod dialogs;
#[path = "ui/glyphs.rs"]
mod glyphs;
#[path = "ui/layout.rs"]
mod layout;
#[path = "ui/menus.rs"]
mod menus;
#[path = "ui/repaint.rs"]
mod repaint;
#[path = "ui/replies.rs"]
mod replies;
#[path = "ui/state_wording.rs"]
mod state_wording;
#[path = "ui/table.rs"]
mod table;
#[path = "ui/warnings.rs"]
mod warnings;

/// A turn of the mouse wheel by `dy` points (egui's sign: negative scrolls down) with `modifiers`
/// held, where the pointer is.
fn wheel(h: &mut Harness<'_, VramApp>, dy: f32, modifiers: egui::Modifiers) {
    h.event(egui::Event::MouseWheel {
        unit: egui::MouseWheelUnit::Point,
        delta: egui::vec2(0.0, dy),
        phase: egui::TouchPhase::Move,
        source: egui::MouseWheelSource::Unknown,
        modifiers,
    });
}

/// The demo's first `seconds` samples applied to a View holding 24 h.
fn demo_monitor(seconds: i64) -> Monitor {
    let mut sim = SimSource::demo(T0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 86_400);
    m.source = Some(sim.info());
    for i in 0..seconds {
        let t = T0 + i * 1000;
        engine_state.apply(&mut m, sim.sample(t).expect("sim"), t);
    }
    m
}

fn demo_app(seconds: i64) -> VramApp {
    let m = demo_monitor(seconds);
    VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
        .with_fixed_now(T0 + (seconds - 1) * 1000)
}

/// The demo run through the real engine (leak detection, forecast), `seconds` long: its View.
fn demo_engine_monitor(seconds: i64) -> Monitor {
    engine_monitor(SimSource::demo(T0), seconds)
}

/// `sim` run through the real engine, `seconds` long: its View.
fn engine_monitor(sim: SimSource, seconds: i64) -> Monitor {
    use vramwarden::engine::{Engine, RecordTo};
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 86_400));
    let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
    e.set_source(sim.info());
    for i in 0..seconds {
        e.tick(sim.at(T0 + i * 1000), T0 + i * 1000);
    }
    let m = shared.read().expect("lock").clone();
    m
}

/// The window on [`demo_engine_monitor`].
fn demo_engine_app(seconds: i64) -> VramApp {
    let m = demo_engine_monitor(seconds);
    VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
        .with_fixed_now(T0 + (seconds - 1) * 1000)
}

/// A GPU card's forecast is a warning (⚠) only while the GPU's forecast alert is in force (a
/// forecast within the warning time, as the banner says); the demo's, hours away, is a quiet
/// line.
#[test]
fn a_card_warns_of_a_forecast_only_while_its_alert_is_in_force() {
    let m = demo_engine_monitor(120);
    assert!(m.oom_alerts.is_empty());
    let full_in = m
        .latest
        .as_ref()
        .and_then(|s| s.devices.first()?.time_to_full_s)
        .expect("the demo's leak gives GPU 0 a forecast");
    assert!(full_in > 3600.0, "{full_in}");
    let line = format!(
        "GPU 0 full in ~{}",
        vramwarden::model::format::duration((full_in * 1000.0) as i64)
    );
    let show = |m: Monitor| {
        let app =
            VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
                .with_fixed_now(T0 + 119_000);
        let mut h = harness(app);
        h.run();
        h
    };
    let mut alerted = m.clone();
    let h = show(m);
    h.get_by_label(&line);
    assert!(h.query_by_label(&format!("⚠ {line}")).is_none());
    alerted
        .oom_alerts
        .push(vramwarden::detect::forecast_alert::ForecastAlert {
            device_index: 0,
            since_ms: T0 + 100_000,
            full_in_s: Some(full_in),
            drivers: vec!["python3 (PID 51877)".into()],
        });
    let h = show(alerted);
    h.get_by_label(&format!("⚠ {line}"));
    assert!(h.query_by_label(&line).is_none());
}

/// Records `seconds` of the demo through the real engine into the session log at `path`.
fn record_demo_session(path: &std::path::Path, seconds: i64) {
    use vramwarden::engine::{Engine, RecordTo};
    let sim = SimSource::demo(T0);
    let mut e = Engine::new(
        vramwarden::engine::shared::Shared::new(Monitor::new(1000, 10)),
        RecordTo::File(path.to_path_buf()),
        1000,
    );
    e.set_source(sim.info());
    for i in 0..seconds {
        e.tick(sim.at(T0 + i * 1000), T0 + i * 1000);
    }
    e.finish().expect("close");
}

/// The window showing a session of `seconds` of the demo, recorded at `path`.
fn recorded_session_app(path: &std::path::Path, seconds: i64) -> VramApp {
    record_demo_session(path, seconds);
    let mut app = VramApp::with_backend(
        Backend::detached(Monitor::new(1000, 10), SourceKind::Nvml),
        UiState::default(),
    );
    app.show_session(vramwarden::session::reader::SessionData::open(path).expect("open"));
    app
}

/// A harness showing `seconds` of the demo recorded into a session log and opened (the
/// folder holding the log comes with it).
fn recorded_session_harness(seconds: i64) -> (tempfile::TempDir, Harness<'static, VramApp>) {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    let app = recorded_session_app(&path, seconds).with_fixed_now(T0 + 5_000_000);
    let mut h = harness(app);
    h.run();
    h.get_by_label("SESSION · read-only");
    (dir, h)
}

/// The window with the detail pane of the process `pid` open (clicked in the table).
fn with_detail_open(app: VramApp, pid: &str) -> Harness<'static, VramApp> {
    let mut h = harness(app);
    h.run();
    h.get_by_label(pid).click();
    h.run();
    h
}

/// The window on the simulated GPUs through a real engine (its sampler thread, 10 samples a
/// second) over the local link, with the settings file `config` if given, once the demo's
/// trainer (PID 48213) is in the table.
fn live_demo_harness(config: Option<std::path::PathBuf>) -> Harness<'static, VramApp> {
    let backend = Backend::start(
        Box::new(|| {
            Ok(Box::new(SimSource::demo(vramwarden::model::now_ms())) as Box<dyn GpuSource>)
        }),
        SourceKind::demo(),
        Duration::from_millis(100),
        1000,
        &egui::Context::default(),
    );
    let mut app = VramApp::with_backend(backend, UiState::default());
    if let Some(path) = config {
        app.set_config(path, None);
    }
    let mut h = harness(app);
    let t = Instant::now();
    while h.query_by_label("48213").is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the engine never sampled"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.run();
    }
    h
}

/// Opens Settings (Ctrl+,) at its Rules section, adds the example rule (a dry run) and
/// switches it on.
fn add_the_example_rule(h: &mut Harness<'static, VramApp>) {
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Comma);
    h.run();
    h.get_by_label("Rules").click();
    h.run();
    h.get_by_label("Add the example: idle 30 min holding > 8 GiB, terminate")
        .click();
    h.run();
    h.get_by_label("on").click();
    h.run();
}

/// Settings → Rules with the example rule added (a dry run), on a settings file in the
/// folder that comes with it.
fn settings_with_the_example_rule() -> (tempfile::TempDir, Harness<'static, VramApp>) {
    let dir = tempfile::tempdir().expect("tmp");
    let mut app = demo_app(120);
    app.set_config(dir.path().join("config.toml"), None);
    let mut h = harness(app);
    h.run();
    add_the_example_rule(&mut h);
    (dir, h)
}

/// Clicks Settings' Save and waits for the worker's "Saved to …".
fn save_settings(h: &mut Harness<'static, VramApp>) {
    h.get_by_label("Save").click();
    h.run();
    // Written on a worker thread; the window says so when it is done.
    let t = Instant::now();
    while h.query_by_label_contains("Saved to").is_none() {
        assert!(t.elapsed() < Duration::from_secs(5), "never saved");
        std::thread::sleep(Duration::from_millis(10));
        h.run();
    }
}

fn harness(app: VramApp) -> Harness<'static, VramApp> {
    Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .with_max_steps(8)
        .build_eframe(|_cc| app)
}

#[test]
fn shows_every_gpu_and_every_process() {
    let mut h = harness(demo_app(120));
    h.run();
    h.get_by_label("GPU 0");
    h.get_by_label("GPU 1");
    h.get_by_label("Simulated H200");
    h.get_by_label("Simulated RTX 4090");
    // At t = 119 s: trainer, kernel, idle eval, triton, the first preprocess life.
    for pid in ["48213", "51877", "39002", "2231", "60100"] {
        h.get_by_label(pid);
    }
    h.get_by_label("5 shown");
    h.get_by_label_contains("DEMO");
    // Auto units: one unit per column and per card, never MiB beside GiB. The 38 GiB trainer
    // puts the whole memory column in GiB (the 8 GiB eval job reads 8.0 GiB, not 8192 MiB);
    // the H200's card shows its 616 MiB reserve in GiB too. Simulated processes have scripted
    // CPU and host memory.
    h.get_by_label("8.0 GiB");
    assert!(h.query_by_label("8192 MiB").is_none());
    h.get_by_label("0.6 GiB");
    assert!(h.query_by_label("616 MiB").is_none());
    h.get_by_label("6400 MiB"); // the trainer's scripted RSS: 1.5 GiB + an eighth of its 38 GiB
}

/// A process that started while the window watched has its whole life in its graph.
#[test]
fn a_process_started_while_watched_is_graphed_over_its_lifetime() {
    let mut h = harness(demo_app(119));
    h.run();
    h.get_by_label("60100").click();
    h.run();
    h.get_by_label("GPU memory over its lifetime");
}

#[test]
fn clicking_a_process_opens_its_detail_pane() {
    let mut h = harness(demo_app(300));
    h.run();
    assert!(h.query_by_label("python3 · PID 51877").is_none());
    h.get_by_label("51877").click();
    h.run();
    h.get_by_label("python3 · PID 51877");
    // Its command line in the table's column and in the pane.
    assert_eq!(
        h.query_all_by_label_contains("ipykernel_launcher").count(),
        2
    );
    // The review: the graph said "over its lifetime" for a job that started hours before the
    // window; it says since when it was watched.
    h.get_by_label_contains("GPU memory since ");
    h.get_by_label_contains(", before it was watched)");
    // The owner shows in the table row and in the pane.
    assert_eq!(h.query_all_by_label("bob").count(), 2);
    assert_eq!(h.state().selected.map(|k| k.0.pid), Some(51877));
    h.get_by_label("✖ Close").click();
    h.run();
    assert!(h.query_by_label("python3 · PID 51877").is_none());
    assert_eq!(h.state().selected, None);
}

#[test]
fn filter_narrows_the_table() {
    let mut h = harness(demo_app(120));
    h.run();
    h.get_by_role_and_label(egui::accesskit::Role::TextInput, "Filter")
        .focus();
    h.run();
    h.get_by_role_and_label(egui::accesskit::Role::TextInput, "Filter")
        .type_text("triton");
    h.run();
    h.get_by_label("2231");
    assert!(h.query_by_label("48213").is_none());
    h.get_by_label("1 shown");
}

#[test]
fn driver_error_is_explained_and_the_demo_offered() {
    let ctx = egui::Context::default();
    let backend = Backend::start(
        Box::new(|| {
            Err(SourceError::Unavailable(
                "No NVIDIA driver found: libnvidia-ml.so.1 could not be loaded.".into(),
            ))
        }),
        SourceKind::Nvml,
        Duration::from_millis(200),
        1000,
        &ctx,
    );
    let shared = backend.shared().clone();
    let t = Instant::now();
    while !matches!(shared.read().expect("lock").status, SourceStatus::Failed(_)) {
        assert!(t.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut h = harness(VramApp::with_backend(backend, UiState::default()));
    h.run();
    h.get_by_label("No NVIDIA GPU can be read");
    h.get_by_label_contains("libnvidia-ml.so.1 could not be loaded");
    h.get_by_label("Start the demo (simulated GPUs)").click();
    h.run();
    // The demo's sampler thread starts; its first sample arrives within a moment.
    let t = Instant::now();
    while h.query_by_label("Simulated H200").is_none() {
        assert!(t.elapsed() < Duration::from_secs(5), "demo did not start");
        std::thread::sleep(Duration::from_millis(20));
        h.run();
    }
    h.get_by_label("GPU 1");
}

/// While a session opens in a window with no GPU to show (no driver), the window says what
/// it is opening and how far, not that no GPU can be read (which read as the file's failure).
#[test]
fn a_session_opening_in_a_window_without_a_driver_shows_its_progress() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo_session(&path, 7200);
    let mut m = Monitor::new(1000, 10);
    m.status = SourceStatus::Failed("No NVIDIA driver found.".into());
    let app = VramApp::with_backend(Backend::detached(m, SourceKind::Nvml), UiState::default());
    let mut h = harness(app);
    h.run();
    h.get_by_label("No NVIDIA GPU can be read");
    h.state_mut().open_session(path.clone());
    h.step();
    // Indexing and replaying two hours takes far longer than a frame: the window's centre
    // and its status bar say what is being opened.
    let opening = format!("Opening {}…", path.display());
    assert_eq!(h.query_all_by_label(&opening).count(), 2);
    assert!(h.query_by_label("No NVIDIA GPU can be read").is_none());
    let t = Instant::now();
    while h.query_by_label("SESSION · read-only").is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the session did not open"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
    assert!(h.query_by_label(&opening).is_none());
}

#[test]
fn stale_data_is_flagged() {
    let mut sim = SimSource::demo(T0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 1000);
    engine_state.apply(&mut m, sim.sample(T0).expect("sim"), T0);
    let app = VramApp::with_backend(Backend::detached(m, SourceKind::Nvml), UiState::default())
        .with_fixed_now(T0 + 5000);
    let mut h = harness(app);
    h.run();
    h.get_by_label_contains("STALE: no sample for 5s");
}

#[test]
fn opens_a_saved_session_and_moves_the_time_slider() {
    let (_dir, mut h) = recorded_session_harness(1500);
    h.get_by_label("Simulated H200");
    let end = T0 + 1499 * 1000;
    h.get_by_label(&vramwarden::model::format::date_time(end));
    // At 1499 s the third preprocess life (1230–1470 s) has exited: greyed, still listed.
    h.get_by_label("python3 (exited)");
    h.get_by_label("◀ 1 min").click();
    h.run();
    h.get_by_label(&vramwarden::model::format::date_time(end - 60_000));
    assert_eq!(h.state().view.as_ref().map(|v| v.t), Some(end - 60_000));
    // At 1439 s that job (PID 60102) is running and holds 3 GiB.
    h.get_by_label("60102");
    assert!(h.query_by_label("python3 (exited)").is_none());
    // Far back: at 300 s the first life has just exited and the second has not started.
    for _ in 0..19 {
        h.get_by_label("◀ 1 min").click();
        h.run();
    }
    assert_eq!(
        h.state().view.as_ref().map(|v| v.t),
        Some(end - 20 * 60_000)
    );
    assert!(h.query_by_label("60102").is_none());
    h.get_by_label("Back to live").click();
    h.run();
    assert!(h.state().view.is_none());
    h.get_by_label_contains("Opening the GPU driver");
}

/// A tap on the session's time slider (press and release in one frame, as a touchpad's tap
/// comes) moves the time shown to where it points, as a held click does. (Under Xvfb an
/// `xdotool click` on the slider moved nothing until the window took taps itself; the test
/// harness's events move egui's own slider as well, so this holds the behaviour, not that
/// difference.)
#[test]
fn a_tap_on_the_time_slider_moves_the_time_there() {
    let (_dir, mut h) = recorded_session_harness(1500);
    let end = T0 + 1499 * 1000;
    assert_eq!(h.state().view.as_ref().map(|v| v.t), Some(end));
    let rail = h.get_by_role(egui::accesskit::Role::Slider).rect();
    // A quarter of the way along the rail (less the handle's radius at each end).
    let r = rail.height() / 2.5;
    let at = egui::pos2(
        rail.left() + r + (rail.width() - 2.0 * r) * 0.25,
        rail.center().y,
    );
    h.event(egui::Event::PointerMoved(at));
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: at,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::NONE,
        });
    }
    h.run();
    let t = h.state().view.as_ref().map_or(0, |v| v.t);
    let quarter = T0 + 1499 * 250;
    assert!((t - quarter).abs() <= 10_000, "{t} against {quarter}");
}

#[test]
fn creates_a_rule_in_the_settings_window_and_saves_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("config.toml");
    let mut app = demo_app(120);
    app.set_config(path.clone(), None);
    let mut h = harness(app);
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Comma);
    h.run();
    h.get_by_label("Rules").click();
    h.run();
    h.get_by_label("No rules yet. A new rule starts switched off and as a dry run.");
    h.get_by_label("Add the example: idle 30 min holding > 8 GiB, terminate")
        .click();
    h.run();
    h.get_by_label_contains(
        "Idle holder: when the process holds ≥ 8 GiB and the process is GPU-idle for ≥ 30 min",
    );
    // The GUI review: the list says a new rule starts switched off; the example (a
    // terminate rule) started on.
    use egui_kittest::kittest::NodeT;
    let on = h.get_by_label("on");
    assert_eq!(
        on.accesskit_node().toggled(),
        Some(egui::accesskit::Toggled::False),
        "the example starts switched off"
    );
    // "Test this rule": on the demo, the idle evaluation (8 GiB) has not been idle 30 min yet.
    h.get_by_label("Test this rule").scroll_to_me();
    h.run();
    h.get_by_label("Test this rule").click();
    // Asked of the engine; its reply shows on a later frame.
    h.run();
    h.run();
    // With the reason: every demo process was looked at, none is idle for 30 min yet.
    h.get_by_label_contains("It matches nothing right now: none of the ");
    h.get_by_label_contains(" processes listed meets all its conditions.");
    // The protected names: typed after a comma, a new name is added (the comma stays while
    // typing), and the whole list shows.
    let protected = "Protected names (never acted on; comma-separated)";
    h.get_by_role_and_label(egui::accesskit::Role::MultilineTextInput, protected)
        .scroll_to_me();
    h.run();
    h.get_by_role_and_label(egui::accesskit::Role::MultilineTextInput, protected)
        .click();
    h.run();
    h.key_press(egui::Key::End);
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::End);
    h.run();
    for part in [",", " ", "my", "-daemon"] {
        h.get_by_role_and_label(egui::accesskit::Role::MultilineTextInput, protected)
            .type_text(part);
        h.run();
    }
    let names = &h.state().settings_ui.draft.cleanup.protected;
    assert_eq!(
        names.last().map(String::as_str),
        Some("my-daemon"),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "Xorg"), "{names:?}");
    eprintln!(
        "save rect {:?} test rect {:?}",
        h.get_by_label("Save").rect(),
        h.get_by_label("Test this rule").rect()
    );
    save_settings(&mut h);
    let text = std::fs::read_to_string(&path).expect("written");
    assert!(text.contains("name = \"Idle holder\""), "{text}");
    assert!(text.contains("kind = \"terminate\""), "{text}");
    let (loaded, err) = vramwarden::engine::settings::Settings::load(&path);
    assert_eq!(err, None);
    assert_eq!(loaded.cleanup.rules.len(), 1);
    assert!(loaded.cleanup.rules[0].dry_run, "new rules are dry runs");
    assert_eq!(
        h.state().settings(),
        &loaded,
        "the engine runs on what was saved"
    );

    // After a reload: a new window on the saved file lists the rule.
    let mut app = demo_app(120);
    app.set_config(path.clone(), None);
    let mut h2 = harness(app);
    h2.state_mut().settings_ui.show(&loaded);
    h2.state_mut().settings_ui.section = vramwarden::front::gui::settings_window::Section::Rules;
    h2.run();
    h2.get_by_label("Idle holder");
}

/// Closing Settings with changes not saved (Esc here) loses nothing: opened again, the
/// window shows them, marked unsaved, till Revert drops them.
#[test]
fn closing_settings_keeps_the_changes_not_saved_till_revert() {
    let mut h = harness(demo_app(120));
    h.run();
    add_the_example_rule(&mut h);
    h.get_by_label("unsaved changes");
    h.key_press(egui::Key::Escape);
    h.run();
    assert!(h.query_by_label("unsaved changes").is_none());
    assert!(h.query_by_label("Revert").is_none());
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Comma);
    h.run();
    h.get_by_label("unsaved changes");
    h.get_by_label_contains("Idle holder: when the process holds ≥ 8 GiB");
    h.get_by_label("Revert").click();
    h.run();
    assert!(h.query_by_label("unsaved changes").is_none());
    h.get_by_label("No rules yet. A new rule starts switched off and as a dry run.");
    // Closed and opened again after Revert: nothing comes back.
    h.key_press(egui::Key::Escape);
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Comma);
    h.run();
    h.get_by_label("No rules yet. A new rule starts switched off and as a dry run.");
}

/// After a Save, a change made and left by closing the window is kept as the changes not
/// saved (the draft is measured against what was saved, not what was there when it opened).
#[test]
fn a_change_after_a_save_is_kept_when_settings_close() {
    let (_dir, mut h) = settings_with_the_example_rule();
    save_settings(&mut h);
    assert!(h.query_by_label("unsaved changes").is_none());
    h.get_by_label("Add the example: idle 30 min holding > 8 GiB, terminate")
        .click();
    h.run();
    h.get_by_label("unsaved changes");
    h.key_press(egui::Key::Escape);
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Comma);
    h.run();
    h.get_by_label("unsaved changes");
    assert_eq!(h.state().settings_ui.draft.cleanup.rules.len(), 2);
}

#[test]
fn a_broken_settings_file_is_announced() {
    let (_, err) = vramwarden::engine::settings::Settings::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/invalid_value.toml"),
    );
    let mut app = demo_app(60);
    app.set_config("x.toml".into(), err);
    let mut h = harness(app);
    h.run();
    h.get_by_label_contains("The settings file is broken");
    h.get_by_label_contains("invalid_value.toml:2");
}

/// The DEMO badge follows the View's source, not this computer's: simulated GPUs shown in a
/// window whose own source is the driver (as a `--demo` agent's View is) carry it; the
/// driver's View does not.
#[test]
fn the_demo_badge_follows_the_views_source() {
    let shown = |kind: &str| {
        let mut m = demo_monitor(5);
        let info = m.source.take().expect("the demo's source");
        m.source = Some(vramwarden::model::SourceInfo {
            kind: kind.into(),
            ..info
        });
        let app = VramApp::with_backend(Backend::detached(m, SourceKind::Nvml), UiState::default())
            .with_fixed_now(T0 + 4_000);
        let mut h = harness(app);
        h.run();
        h.query_by_label("DEMO · simulated GPUs").is_some()
    };
    assert!(shown(vramwarden::model::SourceInfo::SIMULATED));
    assert!(!shown("NVML"));
}

/// A process seen for less than a minute has no one-minute change yet: the detail pane says
/// how long it has been seen rather than a bare dash; after a minute the change shows.
#[test]
fn the_detail_pane_says_how_long_a_young_process_was_seen() {
    let h = with_detail_open(demo_app(30), "39002");
    h.get_by_label("Δ last minute");
    h.get_by_label("— (seen for 29s)");
    let h = with_detail_open(demo_app(120), "39002");
    h.get_by_label("Δ last minute");
    assert!(h.query_all_by_label_contains("seen for").next().is_none());
}

#[test]
fn terminate_from_the_detail_pane_asks_first() {
    let mut h = with_detail_open(demo_app(120), "39002");
    h.get_by_label("Terminate").click();
    h.run();
    h.get_by_role_and_label(egui::accesskit::Role::Dialog, "Terminate this process?");
    h.get_by_label_contains("python3 (PID 39002, user alice, GPU 1, 8192 MiB)");
    h.get_by_label("Cancel").click();
    h.run();
    assert!(h.state().confirm.is_none());
    assert!(h.query_by_label("Terminate this process?").is_none());
}

#[test]
fn a_recorded_session_offers_no_actions() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    let app = recorded_session_app(&path, 300).with_fixed_now(T0 + 5_000_000);
    let mut h = harness(app);
    h.run();
    h.get_by_label("SESSION · read-only");
    // The detail pane of a process that was running at the end of the session.
    h.get_by_label("39002").click();
    h.run();
    h.get_by_label("python3 · PID 39002");
    h.get_by_label_contains("Recorded session: no actions");
    assert!(h.query_by_label("Terminate").is_none());
    assert!(h.query_by_label("Kill").is_none());
    assert!(h.query_by_label("Send signal…").is_none());
    // The table's context menu offers no Terminate / Kill either.
    h.get_by_label("39002").click_secondary();
    h.run();
    assert!(h.query_by_label("Terminate…").is_none());
    assert!(h.query_by_label("Kill…").is_none());
    // Delete asks nothing.
    h.key_press(egui::Key::Delete);
    h.run();
    assert!(h.state().confirm.is_none());
    assert!(h.query_by_label("Terminate this process?").is_none());
}

#[test]
fn a_failed_process_list_shows_stale_rows_not_exits() {
    use std::sync::Arc;
    use vramwarden::engine::{Engine, RecordTo};
    use vramwarden::source::fault::{Fault, FaultSource};
    let (mut src, switch) = FaultSource::new(Box::new(SimSource::demo(T0)));
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 86_400));
    let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
    e.set_source(src.info());
    for i in 0..120 {
        if i == 110 {
            switch.set(Fault::ProcessListFails);
        }
        let t = T0 + i * 1000;
        e.tick(src.sample(t).expect("sample"), t);
    }
    drop(e);
    let Ok(m) = Arc::try_unwrap(shared) else {
        panic!("the monitor has one owner after the engine is dropped");
    };
    let m = m.into_inner();
    let app = VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
        .with_fixed_now(T0 + 119 * 1000);
    let mut h = harness(app);
    h.run();
    // Every process of 10 s ago is still listed (none greyed as exited), marked stale.
    for pid in ["48213", "51877", "39002", "2231", "60100"] {
        h.get_by_label(pid);
    }
    assert!(h.query_by_label_contains("(exited)").is_none());
    assert_eq!(h.query_all_by_label("STALE").count(), 5);
    h.get_by_label("GPU 0: process list STALE");
    h.get_by_label("GPU 1: process list STALE");
}

/// The Export window's "Only the time shown in the graph" writes the rows of that time: a
/// five-minute session opened at its end, the graph at "1 min", exports its last minute.
#[test]
fn exporting_only_the_time_shown_writes_that_time() {
    use vramwarden::front::gui::sessions::ExportInput;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo_session(&path, 300);
    let mut h = harness(demo_app(30));
    h.run();
    h.state_mut().open_session(path.clone());
    let t = Instant::now();
    while h.query_by_label("SESSION · read-only").is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the session did not open"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
    h.get_by_label("1 min").click();
    h.run();
    h.state_mut().sessions.export_open = true;
    h.run();
    h.get_by_label_contains("Only the time shown in the graph:")
        .click();
    h.run();
    let csv = dir.path().join("last-minute.csv");
    h.state_mut().sessions.export_to(
        ExportInput::File(path.clone()),
        Some(vramwarden::session::csv_export::Table::Devices),
        csv.clone(),
    );
    let t = Instant::now();
    while h.query_all_by_label_contains("Exported").next().is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "never exported");
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
    let text = std::fs::read_to_string(&csv).expect("csv");
    let times: Vec<i64> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(1)?.parse().ok())
        .collect();
    let (first, last) = (times[0], times[times.len() - 1]);
    assert!(last - first <= 60_000, "{first}..{last}");
    assert!(last >= T0 + 299_000, "not the session's end: {last}");
    // Two GPUs a sample, a minute of samples (the whole session has 300).
    assert!((100..=130).contains(&times.len()), "{}", times.len());
}

#[test]
fn exporting_over_existing_files_asks_first() {
    use vramwarden::front::gui::sessions::ExportInput;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo_session(&path, 60);
    let csv = dir.path().join("out.csv");
    std::fs::write(&csv, "precious\n").expect("write");
    // Readable by others, as a file made by another program would be.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&csv, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let mut h = harness(demo_app(30));
    h.run();
    h.state_mut().sessions.export_open = true;
    h.state_mut().sessions.export_to(
        ExportInput::File(path.clone()),
        Some(vramwarden::session::csv_export::Table::Devices),
        csv.clone(),
    );
    let wait = |h: &mut Harness<'static, VramApp>, label: &str| {
        let t = Instant::now();
        while h.query_all_by_label_contains(label).next().is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "never showed {label}"
            );
            std::thread::sleep(Duration::from_millis(20));
            h.step();
        }
    };
    wait(&mut h, "Overwrite this file?");
    // The question is a group a screen reader names by it, holding both choices.
    let ask = h.get_by_role_and_label(egui::accesskit::Role::Group, "Overwrite this file?");
    ask.get_by_role_and_label(egui::accesskit::Role::Button, "Overwrite");
    ask.get_by_role_and_label(egui::accesskit::Role::Button, "Cancel");
    assert_eq!(std::fs::read_to_string(&csv).expect("read"), "precious\n");
    h.get_by_label("Overwrite").click();
    h.step();
    wait(&mut h, "Exported 120 device rows");
    assert!(std::fs::read_to_string(&csv)
        .expect("read")
        .starts_with("timestamp,"));
    // Overwritten, it holds every user's command lines: no longer readable by others.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&csv).expect("csv").permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
}

/// The Leaks pane is the place for memory events: the real OOM kill of `public-oomkill`
/// (imported from its nvidia-smi logs) shows as "OOM suspected" with the holder of 117 GiB,
/// and one click opens the session just before the death, the victim selected.
#[test]
fn an_oom_death_shows_in_the_leaks_pane_and_opens_at_that_moment() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("k.vwlog");
    let traces = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/traces");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args(["import", "nvidia-smi", "--utc", "--apps"])
        .arg(traces.join("public-oomkill-smi-apps.csv"))
        .arg("--gpu")
        .arg(traces.join("public-oomkill-smi-gpu.csv"))
        .arg("--out")
        .arg(&log)
        .output()
        .expect("import");
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("1 OOM suspicion;"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut app = VramApp::with_backend(
        Backend::detached(Monitor::new(1000, 10), SourceKind::Nvml),
        UiState::default(),
    )
    .with_fixed_now(T0 + 5_000_000);
    app.show_session(vramwarden::session::reader::SessionData::open(&log).expect("open"));
    let mut h = harness(app);
    h.run();
    h.get_by_label("Leaks").click();
    h.run();
    h.get_by_label("⚠ OOM suspected");
    h.get_by_label_contains("(PID 463) holding 1.7 GiB left GPU 0 while it was 99.");
    // It grew 116 GiB in the minute before: named the likely cause, first.
    h.get_by_label_contains("likely cause: python3 (PID 462): 117.3 GiB");
    assert!(h.query_by_label("python3 · PID 463").is_none());
    assert!(
        h.query_by_label("99.4 %").is_none(),
        "the session opens at its start"
    );
    h.get_by_label("Open at this moment").click();
    h.run();
    h.run();
    h.get_by_label("python3 · PID 463");
    // The GPU card shows the GPU as it was: nearly full.
    h.get_by_label("99.4 %");
}

/// The plot area of the GPU graph: below its legend, right of the memory axis.
fn plot_point(h: &Harness<'static, VramApp>, fx: f32, fy: f32) -> egui::Pos2 {
    let legend = h.get_by_label("Memory limit").rect();
    let tabs = h.get_by_label("Processes").rect();
    let (top, bottom) = (legend.bottom() + 12.0, tabs.top() - 40.0);
    let (left, right) = (legend.left().max(420.0), 1580.0);
    egui::pos2(left + (right - left) * fx, top + (bottom - top) * fy)
}

/// The hover of the stacked graph lists, at the cursor's time, each process's own memory (not
/// the stacked height) with the total; the wheel zooms time around the cursor and "Follow live"
/// goes back. (A double-click also goes back: checked under Xvfb with xdotool, as kittest's
/// synthetic clicks do not make a double click of egui_plot's.)
#[test]
fn graph_hover_shows_own_values_and_the_wheel_zooms_time() {
    let mut h = harness(demo_app(900));
    h.run();
    let before = h.query_all_by_label("38.0 GiB").count();
    // The legend names each series once; the hover's table names them again.
    assert_eq!(h.query_all_by_label("Total used").count(), 1);
    assert_eq!(h.query_all_by_label("python3 (48213)").count(), 1);
    h.hover_at(plot_point(&h, 0.97, 0.5));
    h.run();
    assert_eq!(
        h.query_all_by_label("Total used").count(),
        2,
        "the hover table"
    );
    // 48213 holds 38.0 GiB at the bottom of GPU 0's stack; the hover says 38.0 GiB for it
    // (its stacked top would be higher), once more than the table and card say it.
    assert_eq!(h.query_all_by_label("38.0 GiB").count(), before + 1);
    assert_eq!(h.query_all_by_label("python3 (48213)").count(), 2);
    assert!(h.state().graph_range().is_none(), "follows live");
    wheel(&mut h, 120.0, egui::Modifiers::NONE);
    h.run_steps(30);
    let (a, b) = h
        .state()
        .graph_range()
        .expect("zoomed: no longer follows live");
    assert!(
        b - a < 590_000,
        "the wheel zoomed in: {} s shown",
        (b - a) / 1000
    );
    h.get_by_label("▶ Follow live").click();
    h.run_steps(3);
    assert!(h.state().graph_range().is_none(), "follows live again");
}

/// The table: a click anywhere on a row selects it, ↑/↓ move the selection, Status sorts
/// leaking processes first, and a column can be hidden from the header's menu.
#[test]
fn table_rows_select_by_click_and_keys_and_sort_by_status() {
    let mut h = harness(demo_engine_app(400));
    h.run();
    // The user cell of 51877's row ("bob"), not its PID.
    h.get_by_label("bob").click();
    h.run();
    assert_eq!(h.state().selected.map(|k| k.0.pid), Some(51877));
    // (It is the last row, by memory: up, then down again.)
    h.key_press(egui::Key::ArrowUp);
    h.run();
    let next = h.state().selected.map(|k| k.0.pid);
    assert!(next.is_some() && next != Some(51877), "moved to {next:?}");
    h.key_press(egui::Key::ArrowDown);
    h.run();
    assert_eq!(h.state().selected.map(|k| k.0.pid), Some(51877));
    // Sort by status, descending: the leaking kernel (51877) is the first row. (The detail
    // pane closed first: with it open the Status header is scrolled out of view.)
    h.key_press(egui::Key::Escape);
    h.run();
    h.get_by_label("Status").click();
    h.run();
    let first_row_pid = |h: &Harness<'static, VramApp>| {
        let mut pids: Vec<(f32, String)> = ["48213", "39002", "2231", "51877"]
            .iter()
            .filter_map(|p| h.query_by_label(p).map(|n| (n.rect().top(), p.to_string())))
            .collect();
        pids.sort_by(|a, b| a.0.total_cmp(&b.0));
        pids.first().map(|p| p.1.clone())
    };
    assert_eq!(first_row_pid(&h).as_deref(), Some("51877"));
    // Hide the User column from the header's menu (the detail pane is closed: it has a
    // "User" line too).
    assert_eq!(h.state().selected, None);
    h.get_by_label("User").click_secondary();
    h.run();
    h.get_by_label("Columns");
    let boxes: Vec<_> = h.query_all_by_label("User").collect();
    assert_eq!(boxes.len(), 2, "the header and the menu's checkbox");
    boxes[1].click();
    h.run();
    h.key_press(egui::Key::Escape);
    h.run();
    assert!(h.query_by_label("User").is_none(), "the column is hidden");
    assert_eq!(h.state().state.hidden_columns.len(), 1);
}

/// Selecting a process on another GPU brings that GPU's graph.
#[test]
fn selecting_a_process_shows_its_gpu_graph() {
    let mut h = harness(demo_app(120));
    h.run();
    h.get_by_label("GPU 0 memory");
    h.get_by_label("39002").click();
    h.run();
    h.run();
    h.get_by_label("GPU 1 memory");
    assert_eq!(h.state().selected_gpu, 1);
}

/// The GUI review: Ctrl+O did nothing. It opens a session file as Sessions → Open file…
/// does (here, without a portal, its typed-path window).
#[test]
fn ctrl_o_opens_a_session_file() {
    let mut h = harness(demo_app(10));
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::O);
    let t = Instant::now();
    while h.query_by_label("Choose a file").is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "Ctrl+O opened nothing"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
}

/// Without a desktop portal (as here: no D-Bus session, no display) the system file dialog
/// never appears; the window says so and takes a typed path instead of failing silently.
#[test]
fn without_a_file_dialog_a_typed_path_opens_the_session() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("typed.vwlog");
    record_demo_session(&path, 30);
    let mut h = harness(demo_app(60));
    h.run();
    h.state_mut().sessions.show_browser();
    h.run();
    h.get_by_label("Open file…").click();
    let t = Instant::now();
    while h.query_by_label("Choose a file").is_none() {
        assert!(t.elapsed() < Duration::from_secs(20), "no fallback shown");
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
    h.get_by_label_contains("No file dialog could be shown");
    h.run();
    // The field has the keyboard focus as the window opens: the path is typed at once.
    let field = h.get_by_role_and_label(egui::accesskit::Role::TextInput, "Path");
    assert!(field.is_focused(), "the path field has no focus");
    field.type_text(path.to_str().expect("utf-8 path"));
    h.run();
    h.key_press(egui::Key::Enter);
    let t = Instant::now();
    while h.query_by_label("SESSION · read-only").is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the typed session did not open"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
}

/// The Source menu shows which source runs; choosing it again restarts nothing; switching
/// to the other one asks first, since the history on screen would be cleared.
#[test]
fn switching_the_source_asks_before_clearing_history() {
    let mut h = harness(demo_app(600));
    h.run();
    h.get_by_label("Source").click();
    h.run();
    h.get_by_label("Simulated GPUs (demo)").click();
    h.run();
    assert!(h.query_by_label("Switch to the simulated GPUs?").is_none());
    assert!(h.query_by_label("Switch to the NVIDIA driver?").is_none());
    h.get_by_label("Source").click();
    h.run();
    h.get_by_label("NVIDIA driver (NVML)").click();
    h.run();
    // Where the driver cannot be loaded (CI, a laptop without NVIDIA), switching says so and
    // stops nothing: the review found the demo's history cleared for a "No NVIDIA GPU" screen.
    if let Err(why) = vramwarden::source::nvml::driver_library() {
        h.get_by_role_and_label(
            egui::accesskit::Role::Dialog,
            "No NVIDIA driver on this computer",
        );
        h.get_by_label_contains(&format!("could not be loaded ({why})"));
        h.get_by_label("OK").click();
        h.run();
        assert!(h
            .query_by_label("No NVIDIA driver on this computer")
            .is_none());
    } else {
        h.get_by_role_and_label(
            egui::accesskit::Role::Dialog,
            "Switch to the NVIDIA driver?",
        );
        h.get_by_label_contains("The 9m 59s of history on screen will be cleared");
        h.get_by_label("Cancel").click();
        h.run();
        assert!(h.query_by_label("Switch to the NVIDIA driver?").is_none());
    }
    // Still the demo, its history intact.
    h.get_by_label("DEMO · simulated GPUs");
    h.get_by_label("48213");
}

/// The demo's window with Settings → Rules open and a new rule added.
fn a_new_rule_in_settings() -> Harness<'static, VramApp> {
    let mut h = harness(demo_app(120));
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Comma);
    h.run();
    h.get_by_label("Rules").click();
    h.run();
    h.get_by_label("Add rule").click();
    h.run();
    h
}

/// "Test this rule" says which matches would be skipped and why: the demo's processes are
/// simulated, so a Terminate rule matches them but would act on none.
#[test]
fn testing_a_rule_tells_which_matches_would_be_skipped() {
    let mut h = a_new_rule_in_settings();
    // The review: a new rule matched everything at once, ready to save. It starts off, and
    // says it has no condition until one is ticked.
    h.get_by_label_contains("[disabled] New rule: always (no condition)");
    let none = "No condition yet: it would match every GPU at every sample. Tick one below.";
    h.get_by_label(none);
    h.get_by_label("Process GPU memory ≥").click();
    h.run();
    assert!(h.query_by_label(none).is_none());
    h.get_by_label("Terminate").click();
    h.run();
    h.get_by_label("Test this rule").click();
    h.run();
    h.run();
    // 48213 (38 GiB) and 39002 (8 GiB) hold ≥ 8192 MiB.
    h.get_by_label("It matches 2 right now, but would skip every one:");
    assert_eq!(
        h.query_all_by_label_contains("skipped: a simulated process: the demo acts on nothing")
            .count(),
        2
    );
}

/// A rule's Delete asks on its line first: Keep leaves it, Delete removes it (a click removed
/// it at once, its conditions with it).
#[test]
fn deleting_a_rule_asks_first() {
    let mut h = a_new_rule_in_settings();
    let rule = "[disabled] New rule: always (no condition)";
    // The rule's name on its line in the list (a button that opens it in the editor).
    let name_x = |h: &Harness<'static, VramApp>| h.get_by_label("New rule").rect().min.x;
    let before = name_x(&h);
    h.get_by_label("Delete…").click();
    h.run();
    h.get_by_label("Delete this rule?");
    // The GUI review: the rule's name moved left under the shorter question.
    assert_eq!(name_x(&h), before, "the rule's name moved");
    h.get_by_label("Keep").click();
    h.run();
    assert!(h.query_by_label("Delete this rule?").is_none());
    h.get_by_label_contains(rule);
    h.get_by_label("Delete…").click();
    h.run();
    h.get_by_label("Delete").click();
    h.run();
    assert!(h.query_by_label_contains(rule).is_none());
    h.get_by_label_contains("No rules yet.");
}

/// A window (as eframe runs it) on the real sampler over the demo's simulated GPUs, a sample
/// every `interval`; returned once the first sample shows.
fn live_demo_window(interval: Duration) -> Harness<'static, VramApp> {
    let mut h = Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .with_max_steps(8)
        .build_eframe(move |cc| {
            let backend = Backend::start(
                SourceKind::demo().factory(),
                SourceKind::demo(),
                interval,
                100,
                &cc.egui_ctx,
            );
            VramApp::with_backend(backend, UiState::default())
        });
    let t = Instant::now();
    while h.query_by_label("Simulated H200").is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "no sample");
        std::thread::sleep(Duration::from_millis(50));
        h.step();
    }
    h
}

/// A window on the real engine (its own sampler thread) whose simulated H200 lists the real
/// process `pid` holding 2 GiB: its facts (start time, user) come from /proc and it is live,
/// so actions reach it. Returned once its row shows.
fn window_with_a_real_process(pid: u32) -> Harness<'static, VramApp> {
    use vramwarden::source::sim::{Script, SimDevice, SimProcess};
    let factory: vramwarden::engine::sampler::SourceFactory = Box::new(move || {
        let mut sim = SimSource::empty(
            vramwarden::model::now_ms(),
            vec![SimDevice {
                name: "Simulated H200".into(),
                total_mib: 143_771,
                reserved_mib: 616,
                ghost_mib: 0,
                power_cap_w: 700,
            }],
        );
        sim.add(SimProcess {
            pid,
            device_index: 0,
            info: None,
            script: Script::Idle { mib: 2048 },
            start_s: -1.0,
            restart_every_s: None,
            life_s: f64::INFINITY,
            busy_pct: 0,
        });
        Ok(Box::new(sim) as Box<dyn GpuSource>)
    });
    let ctx = egui::Context::default();
    let backend = Backend::start(
        factory,
        SourceKind::Nvml,
        Duration::from_millis(100),
        1000,
        &ctx,
    );
    let mut h = harness(VramApp::with_backend(backend, UiState::default()));
    let label = pid.to_string();
    let t = Instant::now();
    while h.query_by_label(&label).is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the process never showed"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.run();
    }
    h
}

/// Issue 9's end-to-end check: a Terminate click in the window, confirmed, travels through the
/// real engine (its own sampler thread, identity check, policy) and the signal reaches a real
/// process, which says so in a file.
#[test]
fn terminate_click_reaches_a_real_process_through_the_real_engine() {
    let dir = tempfile::tempdir().expect("tmp");
    let marker = dir.path().join("got-term");
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap 'echo TERM > {}; exit 0' TERM; while :; do sleep 0.05; done",
            marker.display()
        ))
        .spawn()
        .expect("spawn sh");
    let pid = child.id();
    let mut h = window_with_a_real_process(pid);
    let label = pid.to_string();
    h.get_by_label(&label).click();
    h.run();
    h.get_by_label("Terminate").click();
    h.run();
    h.get_by_role_and_label(egui::accesskit::Role::Dialog, "Terminate this process?");
    assert!(!marker.exists(), "nothing is sent before the confirmation");
    // The modal's own button (the pane's one is under the modal).
    let buttons = h.get_all_by_label("Terminate").collect::<Vec<_>>();
    buttons.last().expect("modal button").click();
    h.run();
    let t = Instant::now();
    while !marker.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "SIGTERM never reached the process"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.run();
    }
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "the trap ran and the shell exited");
    assert_eq!(
        std::fs::read_to_string(&marker).expect("marker").trim(),
        "TERM"
    );
    // The window reports what happened, in the detail pane.
    let t = Instant::now();
    // In the detail pane and in the reply's toast.
    while h
        .query_all_by_label_contains("sent SIGTERM to sh (PID")
        .next()
        .is_none()
    {
        assert!(t.elapsed() < Duration::from_secs(5), "no result shown");
        std::thread::sleep(Duration::from_millis(20));
        h.run();
    }
    // The engine's reply to the command, where it was asked: a toast as well as the pane.
    let t = Instant::now();
    while h
        .query_all_by_label_contains("sent SIGTERM to sh (PID")
        .count()
        < 2
    {
        assert!(t.elapsed() < Duration::from_secs(5), "no reply shown");
        std::thread::sleep(Duration::from_millis(20));
        h.run();
    }
    // And in the process's row, from the same reply.
    h.get_by_label("✔ done");
}

/// The Container column and the detail pane: the demo trainer's container gets a name and a
/// pod here (as the engine's reader resolves them on a Kubernetes host); the column shows
/// `namespace/pod · container`, the pane a Container and a Pod line, the filter matches the pod.
#[test]
fn container_and_pod_in_the_table_and_the_detail_pane() {
    let mut sim = SimSource::demo(T0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 86_400);
    m.source = Some(sim.info());
    for i in 0..120 {
        let t = T0 + i * 1000;
        let mut s = sim.sample(t).expect("sim");
        for p in s.processes.iter_mut().filter(|p| p.pid == 48213) {
            if let Some(info) = p.info.as_mut() {
                let info = std::sync::Arc::make_mut(info);
                info.container_name = Some("trainer".into());
                info.pod = Some("ml/trainer-7d9f".into());
            }
        }
        engine_state.apply(&mut m, s, t);
    }
    let app = VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
        .with_fixed_now(T0 + 119_000);
    let mut h = harness(app);
    h.run();
    h.get_by_label("Container");
    h.get_by_label("ml/trainer-7d9f · trainer").click();
    h.run();
    assert_eq!(h.state().selected.map(|k| k.0.pid), Some(48213));
    // The pane: its Container line (the name) and Pod line.
    h.get_by_label("trainer");
    h.get_by_label("Pod");
    assert_eq!(h.query_all_by_label("ml/trainer-7d9f").count(), 1);
    // The filter finds it by its pod.
    h.key_press(egui::Key::Escape);
    h.run();
    h.state_mut().filter = "trainer-7d9f".into();
    h.run();
    h.get_by_label("1 shown");
}

/// The rule editor has the schedule and container fields, each with its own error under it.
#[test]
fn the_rule_editor_shows_schedule_and_container_fields_with_their_errors() {
    let mut s = vramwarden::engine::settings::Settings::default();
    s.cleanup.rules.push(vramwarden::act::rules::Rule {
        name: "Nightly".into(),
        conditions: vramwarden::act::rules::Conditions {
            at: Some("25:00".into()),
            container_glob: Some("jupyter-*".into()),
            process_memory_min_mib: Some(20480.0),
            ..Default::default()
        },
        ..Default::default()
    });
    let mut h = harness(demo_app(60));
    h.state_mut().settings_ui.show(&s);
    h.state_mut().settings_ui.section = vramwarden::front::gui::settings_window::Section::Rules;
    h.state_mut().settings_ui.editing = Some(0);
    h.run();
    h.get_by_label("Daily at (local time)");
    h.get_by_label("At most once every");
    h.get_by_label("Container matches");
    h.get_by_label("Pod matches");
    h.get_by_label("Container's total on the GPU ≥");
    h.get_by_label_contains("⚠ \"25:00\" is not a time of day");
}

#[test]
fn the_table_groups_by_user_and_folds_a_group() {
    let mut h = harness(demo_app(120));
    h.run();
    // Per-process GPU utilisation, where the driver (here the simulated one) gives it.
    h.get_by_label("GPU %");
    h.get_by_label("Group").click();
    h.run();
    h.get_by_label("By user").click();
    h.run();
    assert_eq!(
        h.state().state.group_by,
        vramwarden::front::gui::processes::GroupBy::User
    );
    // alice's trainer (38 GiB) and eval job (8 GiB) make the largest group.
    h.get_by_label("▼ alice");
    // Its header and GPU 0's card ("2 processes"; GPU 1 has 3).
    assert_eq!(h.query_all_by_label("2 processes").count(), 2);
    h.get_by_label("46.0 GiB");
    h.get_by_label("48213");
    // One unit for the memory column, group totals and rows alike (svc-infer's group holds
    // its one 4 GiB process).
    assert!(h.query_by_label("4096 MiB").is_none());
    assert_eq!(h.query_all_by_label("4.0 GiB").count(), 2);
    h.get_by_label("▼ alice").click();
    h.run();
    h.get_by_label("▶ alice");
    assert!(h.query_by_label("48213").is_none(), "folded away");
    assert!(h.query_by_label("39002").is_none(), "folded away");
    // Other users' rows stay.
    h.get_by_label("2231");
}

/// The PyTorch section's buttons go through the confirmation and the real engine like any
/// action: on the demo's (simulated) trainer the engine refuses in its own words.
#[test]
fn release_cached_memory_asks_first_and_reaches_the_engine() {
    let mut h = live_demo_harness(None);
    h.get_by_label("48213").click();
    h.run();
    h.get_by_label("PyTorch caching allocator");
    h.get_by_label("Release cached memory").click();
    h.run();
    h.get_by_role_and_label(
        egui::accesskit::Role::Dialog,
        "Release this process's cached GPU memory?",
    );
    h.get_by_label("Release").click();
    h.run();
    let t = Instant::now();
    // In the detail pane and in the reply's toast.
    while h
        .query_all_by_label_contains("simulated process: nothing was sent")
        .next()
        .is_none()
    {
        assert!(t.elapsed() < Duration::from_secs(5), "no answer shown");
        std::thread::sleep(Duration::from_millis(20));
        h.run();
    }
    // The trainer's row says so too, from the engine's reply.
    h.get_by_label("✖ skipped: simulated process: nothing was sent");
    // The limit control asks too, naming the size.
    h.get_by_label("Set limit").click();
    h.run();
    assert!(
        h.get_all_by_role(egui::accesskit::Role::Dialog)
            .filter_map(|n| egui_kittest::kittest::NodeT::accesskit_node(&n).label())
            .any(|q| q.starts_with("Limit this process to ") && q.ends_with(" GiB of GPU memory?")),
        "the limit's dialog"
    );
    h.get_by_label("Cancel").click();
    h.run();
}

/// Frames come from new data and input only. A recorded session asks for none once drawn; a
/// live window is woken once per new sample (the sampler's wake-up, as eframe's event loop
/// receives it through the repaint callback) and otherwise only checks back after three
/// intervals without a sample (to show STALE).
#[test]
fn no_frame_is_asked_for_without_new_data() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let repaint_delay = |h: &Harness<'static, VramApp>| {
        h.output()
            .viewport_output
            .get(&egui::ViewportId::ROOT)
            .map(|v| v.repaint_delay)
    };
    // Every frame asked for at once or for new data; and, apart, egui's own immediate ones
    // (delay 0: the layout passes it runs when the picture changed shape).
    let count_wakeups = |h: &Harness<'static, VramApp>| {
        let wakes = Arc::new(AtomicUsize::new(0));
        let immediate = Arc::new(AtomicUsize::new(0));
        let (w, i) = (wakes.clone(), immediate.clone());
        h.ctx.set_request_repaint_callback(move |info| {
            if info.delay <= vramwarden::front::gui::NEW_DATA_FRAME {
                w.fetch_add(1, Ordering::SeqCst);
            }
            if info.delay.is_zero() {
                i.fetch_add(1, Ordering::SeqCst);
            }
        });
        (wakes, immediate)
    };

    // A past session: drawn once, then nothing.
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    let app = recorded_session_app(&path, 300);
    let mut h = harness(app);
    h.run();
    h.get_by_label("SESSION · read-only");
    h.step();
    assert_eq!(
        repaint_delay(&h),
        Some(Duration::MAX),
        "a recorded session asks for no further frame"
    );
    let (wakes, _) = count_wakeups(&h);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(
        wakes.load(Ordering::SeqCst),
        0,
        "nothing wakes a still session"
    );
    drop(h);

    // Live, the real sampler on the simulated GPUs, one sample a second.
    let mut h = live_demo_window(Duration::from_millis(1000));
    h.step();
    let d = repaint_delay(&h).expect("root viewport");
    assert!(
        d >= Duration::from_millis(3000) && d <= Duration::from_millis(3050),
        "between samples the window only checks back after three intervals, asked {d:?}"
    );
    let (wakes, immediate) = count_wakeups(&h);
    // As eframe's event loop does: a wake-up runs one frame (egui calls the callback again
    // only after the frame it asked for).
    let (t, mut drawn) = (Instant::now(), 0);
    while t.elapsed() < Duration::from_millis(4500) {
        std::thread::sleep(Duration::from_millis(10));
        let n = wakes.load(Ordering::SeqCst);
        if n > drawn {
            drawn = n;
            h.step();
        }
    }
    // A sample that changes the picture's shape (the demo server's burst puts a forecast on
    // its GPU's card at once) costs egui a layout pass or two: counted apart, and bounded (a
    // loop asking for frames would ask for hundreds).
    let (n, now) = (
        wakes.load(Ordering::SeqCst),
        immediate.load(Ordering::SeqCst),
    );
    assert!(
        (4..=5).contains(&(n - now)),
        "one frame per new sample (1 s apart): {} in 4.5 s",
        n - now
    );
    assert!(now <= 4, "{now} immediate frames in 4.5 s");
}

/// The keyboard alone reaches every part of the window: Tab goes from the menu bar through
/// the GPU cards, the detail pane's actions, the graph's controls, the tabs and the filter to
/// the table, and Enter on "Terminate" asks first, as a click does.
#[test]
fn tab_reaches_every_part_of_the_window_and_enter_acts() {
    use egui_kittest::kittest::{By, NodeT};
    let mut h = with_detail_open(demo_app(300), "51877");
    let focused = |h: &Harness<'static, VramApp>| {
        h.query_all(By::new().predicate(|n| n.is_focused()))
            .find_map(|n| n.accesskit_node().label())
    };
    let mut seen = Vec::new();
    for _ in 0..48 {
        h.key_press(egui::Key::Tab);
        h.run();
        seen.push(focused(&h).unwrap_or_default());
    }
    let at = |label: &str| {
        seen.iter()
            .position(|l| l == label)
            .unwrap_or_else(|| panic!("Tab never reached {label:?}: {seen:?}"))
    };
    let order = [
        "File",
        "Show GPU 0 in the graph",
        "Show GPU 1 in the graph",
        "Terminate",
        "Release cached memory",
        "Set limit",
        "Fit to data",
        "Processes",
        "Leaks",
        "Filter",
        "Group",
    ];
    let places: Vec<usize> = order.iter().map(|l| at(l)).collect();
    assert!(places.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    // The table is not a Tab stop per cell (rows take clicks and ↑/↓): from "Group", Tab
    // passes the column headers (and egui_extras' column resize handles, one per column)
    // and comes round to "File", whatever the number of rows. Before: a stop per cell.
    while focused(&h).as_deref() != Some("Group") {
        h.key_press(egui::Key::Tab);
        h.run();
    }
    let mut after = Vec::new();
    while focused(&h).as_deref() != Some("File") {
        assert!(after.len() < 30, "Tab stays in the table: {after:?}");
        h.key_press(egui::Key::Tab);
        h.run();
        after.push(focused(&h).unwrap_or_default());
    }
    // Back to "Terminate" with Shift+Tab, then Enter: the confirmation opens, Cancel focused.
    while focused(&h).as_deref() != Some("Terminate") {
        h.key_press_modifiers(egui::Modifiers::SHIFT, egui::Key::Tab);
        h.run();
    }
    h.key_press(egui::Key::Enter);
    h.run();
    h.get_by_role_and_label(egui::accesskit::Role::Dialog, "Terminate this process?");
    h.get_by_label_contains("(PID 51877");
    assert_eq!(focused(&h).as_deref(), Some("Cancel"));
    // Enter on the focused Cancel closes it: nothing was sent.
    h.key_press(egui::Key::Enter);
    h.run();
    assert!(h.state().confirm.is_none());
}

/// The window draws from its copy of the engine's state: a frame completes while the engine
/// holds its lock in the middle of a write (a wedged engine never freezes the window), and the
/// next frame after the write shows it.
#[test]
fn a_frame_is_drawn_while_the_engine_holds_its_lock() {
    let mut h = harness(demo_app(30));
    h.run();
    let shared = h.state().backend().shared().clone();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        // One write finished (a newer state to copy), the next one held.
        if let Ok(mut m) = shared.write() {
            m.last_error = Some("the driver did not answer (test)".into());
        }
        let g = shared.write().expect("write");
        held_tx.send(()).expect("send");
        // Released by the test, or after 20 s (so a window that waits fails, not hangs).
        let _ = release_rx.recv_timeout(std::time::Duration::from_secs(20));
        drop(g);
    });
    held_rx.recv().expect("the engine holds its lock");
    let t = std::time::Instant::now();
    h.run();
    let took = t.elapsed();
    // Drawn from the copy it had: the finished write is not in it yet.
    let shown_early = h
        .query_all_by_label_contains("the driver did not answer (test)")
        .next()
        .is_some();
    release_tx.send(()).expect("release");
    writer.join().expect("writer");
    assert!(
        took < std::time::Duration::from_secs(5),
        "the frame waited: {took:?}"
    );
    assert!(
        !shown_early,
        "drawn from the last copy while the lock was held"
    );
    h.run();
    assert!(
        h.query_all_by_label_contains("the driver did not answer (test)")
            .next()
            .is_some(),
        "the write shows once the lock is free"
    );
}

/// A past session shows the leak badge of the moment on its slider: at the end of a recording
/// that stopped while the leak grew, the badge is there; before the leak was flagged, it is not.
#[test]
fn a_past_session_shows_the_leak_badges_of_the_moment_shown() {
    let (_dir, mut h) = recorded_session_harness(120);
    let badge =
        |h: &Harness<'static, VramApp>| h.query_all_by_label_contains("leak +60").next().is_some();
    assert!(
        badge(&h),
        "at the end of the recording the leak is going on"
    );
    for _ in 0..2 {
        h.get_by_label("◀ 1 min").click();
        h.run();
    }
    assert_eq!(h.state().view.as_ref().map(|v| v.t), Some(T0));
    assert!(!badge(&h), "at the start nothing was flagged yet");
}

/// Settings saved in the window reach the real engine over the local link: a rule made in
/// the Settings window fires in the engine (its dry-run entries appear in the Activity tab)
/// once saved, and not before.
#[test]
fn a_rule_saved_in_the_window_runs_in_the_real_engine() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("config.toml");
    let mut h = live_demo_harness(Some(path.clone()));
    // The example rule, made to fire at once: no idle condition, and only a notification
    // (the demo's trainer holds more than 8 GiB).
    add_the_example_rule(&mut h);
    h.get_by_label("GPU-idle for ≥").click();
    h.run();
    h.get_by_label("Notify").click();
    h.run();
    h.get_by_label_contains("Idle holder: when the process holds ≥ 8 GiB, notify");
    // Not saved yet: the engine has no rule, so nothing fires.
    std::thread::sleep(Duration::from_millis(400));
    h.run();
    let fired = |h: &Harness<'static, VramApp>| {
        h.state()
            .backend()
            .view()
            .is_some_and(|m| m.activity.iter().any(|a| a.rule == "Idle holder"))
    };
    assert!(!fired(&h), "a rule fired before it was saved");
    h.get_by_label("Save").click();
    h.run();
    let t = Instant::now();
    while !fired(&h) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the saved rule never fired in the engine"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.run();
    }
    // And the Activity tab shows it.
    h.key_press(egui::Key::Escape);
    h.run();
    assert!(!h.state().settings_ui.open, "the Settings window closed");
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Num3);
    h.run();
    assert!(h.query_all_by_label("Idle holder").count() > 0);
    // Each entry names its action (the GUI review: four different actions read alike).
    h.get_by_label("Action");
    let notify = vramwarden::act::rules::Action::Notify.label();
    assert!(h.query_all_by_label(&notify).count() > 0, "{notify}");
}

/// The demo's snapshot at `t` with a constant memory picture: on every GPU the first process
/// holds `proc_gib` GiB and the GPU `used_gib` GiB in all (the rest unattributed); the other
/// processes are left out.
fn constant_snap(t: UnixMs, used_gib: u64, proc_gib: u64) -> vramwarden::model::Snapshot {
    let gib = 1u64 << 30;
    let mut s = SimSource::demo(T0).at(t);
    for d in &mut s.devices {
        d.memory_used_bytes = Some(used_gib * gib);
        d.memory_free_bytes = d
            .memory_total_bytes
            .map(|tot| tot.saturating_sub(used_gib * gib));
    }
    let mut seen = std::collections::HashSet::new();
    s.processes.retain(|p| seen.insert(p.device_index));
    for p in &mut s.processes {
        p.used_bytes = Some(proc_gib * gib);
    }
    s
}

/// A live window over `seconds` of [`constant_snap`] (16 GiB used, 10 GiB by a process), in MiB.
fn constant_live_app(seconds: i64) -> VramApp {
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 86_400);
    m.source = Some(SimSource::demo(T0).info());
    for i in 0..seconds {
        let t = T0 + i * 1000;
        engine_state.apply(&mut m, constant_snap(t, 16, 10), t);
    }
    let state = UiState {
        units: vramwarden::model::format::Units::MiB,
        show_metrics: false,
        ..UiState::default()
    };
    VramApp::with_backend(Backend::detached(m, SourceKind::demo()), state)
        .with_fixed_now(T0 + (seconds - 1) * 1000)
}

/// Records `seconds` of [`constant_snap`] (7 GiB used, 5 GiB by a process) at `path`, over
/// the same times as the live window.
fn record_constant_session(path: &std::path::Path, seconds: i64) {
    use vramwarden::engine::{Engine, RecordTo};
    let mut e = Engine::new(
        vramwarden::engine::shared::Shared::new(Monitor::new(1000, 10)),
        RecordTo::File(path.to_path_buf()),
        1000,
    );
    e.set_source(SimSource::demo(T0).info());
    for i in 0..seconds {
        e.tick(constant_snap(T0 + i * 1000, 7, 5), T0 + i * 1000);
    }
    e.finish().expect("close");
}

/// Hovers the GPU graph at `fx` across and returns how often each of `texts` is on screen.
fn hover_counts(h: &mut Harness<'static, VramApp>, fx: f32, texts: &[&str]) -> Vec<usize> {
    h.hover_at(plot_point(h, fx, 0.5));
    h.run();
    assert!(
        h.query_all_by_label("Total used").count() >= 2,
        "the hover table (besides the legend)"
    );
    texts
        .iter()
        .map(|t| h.query_all_by_label(t).count())
        .collect()
}

/// Blocker of issue 29: the graph's cached buckets are keyed by the history they summarise.
/// With the same time range and width (so the same bucket grid), switching from the live
/// source to an opened session and back draws each one's own Total used, process and
/// unattributed memory — never the other's.
#[test]
fn switching_source_never_draws_the_previous_sources_totals() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("constant.vwlog");
    record_constant_session(&path, 600);
    let mut h = harness(constant_live_app(600));
    h.run();
    let live = ["16384 MiB", "10240 MiB", "6144 MiB"];
    let session = ["7168 MiB", "5120 MiB", "2048 MiB"];
    for fx in [0.2, 0.5, 0.9] {
        let c = hover_counts(&mut h, fx, &live);
        assert!(c.iter().all(|n| *n >= 1), "live at {fx}: {c:?}");
        assert_eq!(hover_counts(&mut h, fx, &session), vec![0, 0, 0]);
    }
    h.state_mut()
        .show_session(vramwarden::session::reader::SessionData::open(&path).expect("open"));
    h.run();
    h.get_by_label("SESSION · read-only");
    for fx in [0.2, 0.5, 0.9] {
        let c = hover_counts(&mut h, fx, &session);
        assert!(c.iter().all(|n| *n >= 1), "session at {fx}: {c:?}");
        let stale = hover_counts(&mut h, fx, &live);
        assert_eq!(stale, vec![0, 0, 0], "the live source's figures at {fx}");
    }
    // And back to live: its own figures again.
    h.get_by_label("Back to live").click();
    h.run();
    h.run();
    for fx in [0.2, 0.5, 0.9] {
        let c = hover_counts(&mut h, fx, &live);
        assert!(c.iter().all(|n| *n >= 1), "live again at {fx}: {c:?}");
        assert_eq!(hover_counts(&mut h, fx, &session), vec![0, 0, 0]);
    }
}

/// Zoomed out, every bucket of the stacked graph reads all its series at one instant: the
/// processes and the unattributed memory add up to the total exactly, at every zoom; the
/// total's range in the bucket is drawn behind.
#[test]
fn the_stack_adds_up_to_the_total_at_every_zoom() {
    use vramwarden::front::gui::graph::{device_lines, LineKind};
    let app = demo_app(7200);
    let m = app.backend().view().expect("view");
    let h = &m.history;
    let (first, last) = h.span().expect("data");
    let colors = vramwarden::front::gui::widgets::Colors::new(Default::default(), true);
    let mut cache = vramwarden::model::history::BucketCache::default();
    let mut checked = 0;
    for (from, to) in [
        (first, last),
        (last - 3_600_000, last),
        (last - 600_000, last),
        (first + 1_234_000, first + 4_321_000),
    ] {
        for width in [60, 300, 1100, 3000] {
            for device in 0..2 {
                let d = device_lines(h, &m, device, (from, to), width, true, &colors, &mut cache);
                let total = d
                    .lines
                    .iter()
                    .find(|l| l.kind == LineKind::Total)
                    .expect("total");
                assert!(!total.points.is_empty());
                for p in &total.points {
                    let sum: f64 = d
                        .lines
                        .iter()
                        .filter(|l| matches!(l.kind, LineKind::Process(_) | LineKind::Unattributed))
                        .filter_map(|l| l.value_at(p[0], 0.0))
                        .sum();
                    assert_eq!(sum, p[1], "GPU {device} at {} width {width}", p[0]);
                    checked += 1;
                }
                if d.buckets.iter().any(|b| b.to_s > b.from_s) {
                    assert!(
                        d.lines.iter().any(|l| l.kind == LineKind::TotalRange),
                        "the range band behind the stack"
                    );
                }
            }
        }
    }
    assert!(checked > 5000, "{checked}");
}

/// The hover of the stacked graph names the time range of the bucket under the cursor when
/// a point stands for several samples, and one time when it stands for one.
#[test]
fn the_hover_shows_the_time_range_of_a_bucket() {
    use egui_kittest::kittest::NodeT;
    let mut h = harness(demo_app(7200));
    h.run();
    let clock = |s: &str| -> i64 {
        let p: Vec<i64> = s.split(':').map(|x| x.parse().expect("clock")).collect();
        p[0] * 3600 + p[1] * 60 + p[2]
    };
    for (window, min_s, max_s) in [
        (vramwarden::front::gui::graph::Window::All, 3, 40),
        (vramwarden::front::gui::graph::Window::OneHour, 1, 10),
        (vramwarden::front::gui::graph::Window::OneMinute, 0, 0),
    ] {
        h.state_mut().state.window = window;
        h.run();
        h.hover_at(plot_point(&h, 0.5, 0.5));
        h.run();
        assert!(h.query_all_by_label("Total used").count() >= 2, "hover");
        let title = h
            .query_all(egui_kittest::kittest::by().label_contains(":"))
            .filter_map(|n| {
                let a = n.accesskit_node();
                a.value().or_else(|| a.label())
            })
            .find(|l| {
                let parts: Vec<&str> = l.split(" – ").collect();
                let ok = |s: &str| s.len() == 8 && s.chars().filter(|c| *c == ':').count() == 2;
                match parts.as_slice() {
                    [a, b] => ok(a) && ok(b),
                    [a] => max_s == 0 && ok(a) && l.len() == 8,
                    _ => false,
                }
            })
            .unwrap_or_else(|| {
                let all: Vec<String> = h
                    .query_all(egui_kittest::kittest::by().label_contains(":"))
                    .filter_map(|n| {
                        let a = n.accesskit_node();
                        a.value().or_else(|| a.label())
                    })
                    .collect();
                panic!("no bucket title for {window:?}: {all:?}")
            });
        let span = match title.split_once(" – ") {
            Some((a, b)) => (clock(b) - clock(a)).rem_euclid(86_400),
            None => 0,
        };
        assert!(
            (min_s..=max_s).contains(&span),
            "{window:?}: {title} spans {span} s"
        );
    }
}

/// A click on the text of a GPU card (its name, its figures) selects that GPU, as a click on
/// the card's blank space does.
#[test]
fn clicking_the_text_of_a_gpu_card_selects_it() {
    let mut h = harness(demo_app(120));
    h.run();
    assert_eq!(h.state().selected_gpu, 0);
    h.get_by_label("GPU 1").click();
    h.run();
    h.run();
    assert_eq!(h.state().selected_gpu, 1);
    h.get_by_label("GPU 1 memory");
    h.get_all_by_label("Reserved")
        .next()
        .expect("card text")
        .click();
    h.run();
    h.run();
    assert_eq!(h.state().selected_gpu, 0, "GPU 0's card is the first");
}

/// Opening an empty file, or a file that is no session log, says so at once in the window
/// (not later inside the Export window).
#[test]
fn opening_a_file_that_is_no_session_shows_the_error_at_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let empty = dir.path().join("empty.vwlog");
    std::fs::write(&empty, b"").expect("write");
    let mut h = harness(demo_app(60));
    h.run();
    h.state_mut().open_session(empty.clone());
    let t = Instant::now();
    while h
        .query_by_label_contains("Could not open the file")
        .is_none()
    {
        assert!(t.elapsed() < Duration::from_secs(20), "no error shown");
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
    h.get_by_label_contains("the file is empty");
    assert!(!h.state().sessions.export_open);
    h.get_by_label("Dismiss").click();
    h.run();
    assert!(h
        .query_by_label_contains("Could not open the file")
        .is_none());
}

/// Every value axis gets at least three labelled, distinct values on round 1-2-5 steps,
/// whatever the plot's height (from a short metric plot up) and range.
#[test]
fn value_axes_have_at_least_three_distinct_labels() {
    use vramwarden::front::gui::graph::{value_grid, value_label};
    for height in [60.0f64, 75.0, 90.0, 140.0, 400.0, 900.0] {
        for (lo, hi, unit) in [
            (0.0, 1.0, "GiB"),
            (0.0, 0.3, "GiB"),
            (0.0, 143.4, "GiB"),
            (0.0, 146_800.0, "MiB"),
            (-2.0, 104.0, "%"),
            (1000.0, 1010.0, "MiB"),
            (0.0, 7.0, "MiB"),
            (12.0, 13.5, "GiB"),
            (0.0, 700.0, "W"),
        ] {
            let marks = value_grid(egui_plot::GridInput {
                bounds: (lo, hi),
                base_step_size: (hi - lo) / height * 8.0,
            });
            let shown: Vec<_> = marks
                .iter()
                .filter(|m| m.value >= lo && m.value <= hi)
                .collect();
            let labels: Vec<String> = shown
                .iter()
                .map(|m| value_label(**m, unit))
                .filter(|l| !l.is_empty())
                .collect();
            assert!(labels.len() >= 3, "{height} pt, {lo}..{hi}: {labels:?}");
            let distinct: std::collections::HashSet<_> = labels.iter().collect();
            assert_eq!(distinct.len(), labels.len(), "{labels:?}");
            let step = shown[0].step_size;
            let gap = step / (hi - lo) * height;
            assert!(gap >= 15.9, "{height} pt, {lo}..{hi}: {gap} pt apart");
            let mantissa = step / 10f64.powf(step.log10().floor());
            assert!(
                [1.0, 2.0, 5.0].iter().any(|m| (m - mantissa).abs() < 1e-6),
                "step {step}"
            );
        }
    }
}

/// Terminates the notebook (PID 51877) from its detail pane, confirmed, and runs the frames
/// that bring the reply back. The demo's window has no engine ([`Backend::detached`]): it
/// answers the action itself, refused, through the same reply path as an engine.
fn act_on_the_notebook(h: &mut Harness<'static, VramApp>) {
    if h.query_by_label("python3 · PID 51877").is_none() {
        h.get_by_label("51877").click();
        h.run();
    }
    h.get_by_label("Terminate").click();
    h.run();
    h.get_by_role_and_label(egui::accesskit::Role::Dialog, "Terminate this process?");
    let buttons = h.get_all_by_label("Terminate").collect::<Vec<_>>();
    buttons.last().expect("modal button").click();
    h.run();
    h.run();
}

fn harness_at(app: VramApp, w: f32, h: f32) -> Harness<'static, VramApp> {
    Harness::builder()
        .with_size(egui::vec2(w, h))
        .with_max_steps(8)
        .build_eframe(|_cc| app)
}

/// At 1280 × 800 the detail pane of a PyTorch process (leak box, actions, PyTorch section)
/// keeps its lifetime graph on screen at a usable height (three axis labels at least: see
/// `value_axes_have_at_least_three_distinct_labels`), with a legend naming the driver's,
/// the allocator's and the tensors' series; an action's result appearing moves nothing.
#[test]
fn the_detail_pane_fits_at_1280x800_with_a_legend() {
    let mut plain = harness_at(demo_app(300), 1280.0, 800.0);
    plain.run();
    plain.get_by_label("51877").click();
    plain.run();
    plain.run();
    let r = plain
        .state()
        .detail_plot_rect()
        .expect("the lifetime graph drawn");
    assert!(
        r.height() >= vramwarden::front::gui::graph::PROCESS_GRAPH_MIN_HEIGHT - 0.5,
        "{r:?}"
    );
    assert!(r.bottom() <= 800.0, "below the window: {r:?}");
    for series in [
        "GPU memory (driver)",
        "Allocated (PyTorch)",
        "Reserved (PyTorch)",
    ] {
        plain.get_by_label(series);
    }
    act_on_the_notebook(&mut plain);
    plain.get_by_label_contains(&format!("skipped — {}", vramwarden::front::gui::NO_ENGINE));
    let r2 = plain.state().detail_plot_rect().expect("drawn");
    assert_eq!(r.top(), r2.top(), "the result moved the graph");
    assert_eq!(r.height(), r2.height());
}

/// The review of the window: the wheel over the detail pane's lifetime graph zoomed it and
/// left it on a window that no longer followed the process live. The wheel there scrolls the
/// pane; the graph keeps showing the whole lifetime.
#[test]
fn the_wheel_over_the_lifetime_graph_scrolls_the_pane_not_the_graph() {
    let mut h = harness_at(demo_app(300), 1280.0, 800.0);
    h.run();
    h.get_by_label("51877").click();
    h.run();
    h.run();
    let range = h
        .state()
        .detail_plot_x_range()
        .expect("the lifetime graph drawn");
    let r = h.state().detail_plot_rect().expect("drawn");
    h.hover_at(r.center());
    h.run();
    wheel(&mut h, -120.0, egui::Modifiers::NONE);
    h.run_steps(30);
    assert_eq!(
        h.state().detail_plot_x_range(),
        Some(range),
        "the wheel changed the lifetime graph's time range"
    );
    let r2 = h.state().detail_plot_rect().expect("drawn");
    assert!(
        r2.top() < r.top(),
        "the pane did not scroll: {r:?} → {r2:?}"
    );
}

/// An action's result shows in its row of the table (where it was taken from), not only in
/// the Activity tab: in words, from the reply to its command; another process's row says
/// nothing. (A result that acted: `terminate_click_reaches_a_real_process_through_the_real_engine`.)
#[test]
fn a_row_shows_the_result_of_its_last_action() {
    let mut h = harness(demo_app(120));
    h.run();
    let refused = format!("✖ skipped: {}", vramwarden::front::gui::NO_ENGINE);
    assert!(h.query_by_label(&refused).is_none());
    act_on_the_notebook(&mut h);
    h.get_by_label(&refused);
    assert_eq!(h.query_all_by_label(&refused).count(), 1);
    // Issue 40: the words are in the Status column; the Name column keeps the name, with a
    // sign before it.
    let header = |h: &Harness<'static, VramApp>, name: &str| {
        let pid = h.get_by_label("PID").rect();
        h.get_all_by_label(name)
            .map(|n| n.rect())
            .find(|r| (r.center().y - pid.center().y).abs() < 2.0)
            .unwrap_or_else(|| panic!("no {name} header"))
    };
    let mark = h.get_by_label("✖").rect();
    let words = h.get_by_label(&refused).rect();
    assert!(
        words.left() >= header(&h, "Status").left() - 1.0,
        "the words in the Status column: {words:?}"
    );
    assert!(
        mark.left() >= header(&h, "Name").left() - 1.0 && mark.right() <= header(&h, "User").left(),
        "the sign in the Name column: {mark:?}"
    );
    assert!(
        h.get_all_by_label("python3")
            .any(|n| (n.rect().center().y - mark.center().y).abs() < 3.0),
        "the name beside the sign"
    );
    // The whole sentence in the detail pane; the reply's toast and the row as well.
    let why = vramwarden::front::gui::NO_ENGINE;
    h.get_by_label_contains(&format!("skipped — {why}"));
    assert_eq!(h.query_all_by_label_contains(why).count(), 3);
}

/// A saved host can be forgotten from the host selector (a mistyped address does not stay).
#[test]
fn a_saved_host_can_be_forgotten() {
    use vramwarden::front::gui::connect::SavedHost;
    let state = UiState {
        hosts: vec![SavedHost {
            url: "http://gpu-sevrer:7480".into(),
            ssh: String::new(),
            token_file: String::new(),
        }],
        ..UiState::default()
    };
    let mut sim = SimSource::demo(T0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 1000);
    m.source = Some(sim.info());
    engine_state.apply(&mut m, sim.sample(T0).expect("sim"), T0);
    let app =
        VramApp::with_backend(Backend::detached(m, SourceKind::demo()), state).with_fixed_now(T0);
    let mut h = harness(app);
    h.run();
    h.get_by_role_and_label(egui::accesskit::Role::ComboBox, "Host")
        .click();
    h.run();
    h.get_by_label("gpu-sevrer:7480");
    h.get_by_label("✖").click();
    h.run();
    assert!(h.state().state.hosts.is_empty());
}

/// Every plot has its table: the GPU graph's "Table" shows each series' values at instants
/// across the time shown (screen readers read labels, not plots).
#[test]
fn the_graph_has_a_table_alternative() {
    let mut h = harness(demo_app(120));
    h.run();
    assert!(h.query_by_label("Lowest").is_none());
    assert_eq!(
        h.query_all_by_label("Total used").count(),
        1,
        "the legend's"
    );
    h.get_all_by_label("Table")
        .next()
        .expect("a Table toggle")
        .click();
    h.run();
    // One table for the memory graph and one per metric panel shown.
    assert!(h.query_all_by_label("Series").count() >= 2);
    assert!(h.query_all_by_label("Highest").count() >= 2);
    // The total's row (besides the legend's), with values in the graph's unit.
    assert_eq!(h.query_all_by_label("Total used").count(), 2);
    assert!(h.query_all_by_label_contains(" GiB").count() >= 6);
    // Back to the plot.
    h.get_all_by_label("Table").next().expect("toggle").click();
    h.run();
    assert!(h.query_by_label("Highest").is_none());
}

/// The GPU cards' custom parts carry names for screen readers: the card (a button), its
/// memory bar (a meter with its figures); compact cards keep their figures apart.
#[test]
fn cards_carry_accessible_names() {
    let mut h = harness(demo_app(30));
    h.run();
    h.get_by_label("Show GPU 0 in the graph");
    assert!(h.query_all_by_label_contains("Memory: used").count() >= 2);
    // A reading is one piece: "Power 580 / 700 W" never leaves its "W" on a line alone.
    for n in h.query_all_by_label_contains("Power ") {
        let line = n.rect().height();
        assert!(line < 24.0, "a reading wrapped: {line}");
    }
}

/// Settings: the window keeps its width when a rule is added, and its sections do not move
/// down when a status line appears (the space is kept).
#[test]
fn settings_keep_their_place_and_width() {
    let mut h = harness(demo_app(30));
    h.run();
    let s = h.state().settings().clone();
    h.state_mut().settings_ui.show(&s);
    h.run();
    h.get_by_label("Rules").click();
    h.run();
    let general = h.get_by_label("General").rect();
    let width = |h: &Harness<'static, VramApp>| {
        h.ctx
            .memory(|m| {
                // egui names a window's area by its title's text (an `Option<Cow<str>>`).
                let title: Option<std::borrow::Cow<'_, str>> = Some("Settings".into());
                m.area_rect(egui::Id::unique(title))
            })
            .expect("the Settings window")
            .width()
    };
    let before = width(&h);
    // A rule with a long line and its buttons; then the OOM guard's section, its ladder.
    h.get_by_label("Add the example: idle 30 min holding > 8 GiB, terminate")
        .click();
    h.run();
    h.run();
    assert!((width(&h) - before).abs() < 1.0, "{before} → {}", width(&h));
    h.get_by_label("OOM guard").click();
    h.run();
    h.run();
    h.get_by_label("Pause the growing job itself before its OOM");
    assert!(
        (width(&h) - before).abs() < 1.0,
        "the guard's section: {before} → {}",
        width(&h)
    );
    h.get_by_label("Rules").click();
    h.run();
    h.get_by_label("Add rule").click();
    h.run();
    h.run();
    assert!(
        h.query_by_label("New rule").is_some() || h.query_by_label_contains("New rule").is_some()
    );
    assert!((width(&h) - before).abs() < 1.0, "{before} → {}", width(&h));
    h.state_mut().settings_ui.message = Some(("Saved to /tmp/x".into(), false));
    h.run();
    let moved = h.get_by_label("General").rect().top() - general.top();
    assert!(moved.abs() < 1.0, "the sections moved {moved} points");
    // The leak detector's documented parameters, all eight (the second "Leaks": the
    // window's section list, after the tab under the graph).
    h.get_all_by_label("Leaks")
        .last()
        .expect("the section")
        .click();
    h.run();
    for p in [
        "Minimum growth",
        "Minimum duration",
        "Minimum rate",
        "Observation window",
        "Ends after no growth for",
        "Drop tolerance",
        "Start-up grace",
        "Settled after",
    ] {
        h.get_by_label(p);
    }
    // Minimum rate (the third number) set to 0 through the screen reader's "set value": put
    // back to its least, with a sentence saying so in the status lines.
    let rate = h
        .get_all_by_role(egui::accesskit::Role::SpinButton)
        .nth(2)
        .expect("the minimum rate field");
    rate.set_value_accesskit(0.0);
    h.run();
    assert_eq!(h.state().settings_ui.draft.leaks.min_rate_mib_per_min, 0.1);
    h.get_by_label_contains(
        "Minimum rate: 0 MiB/min is under the least allowed, set to 0.1 MiB/min",
    );
    let moved = h.get_by_label("General").rect().top() - general.top();
    assert!(moved.abs() < 1.0, "the sections moved {moved} points");
    // Issue 40: Revert takes the sentence away with the value it spoke of.
    h.get_by_label("Revert").click();
    h.run();
    assert!(
        h.query_by_label_contains("is under the least allowed")
            .is_none(),
        "the clamp note outlived Revert"
    );
    // The GUI review: the guard's lead factor typed as 0 became 1 without a word, and a
    // floor larger than any GPU was taken in silence.
    h.get_all_by_label("OOM guard")
        .last()
        .expect("the section")
        .click();
    h.run();
    let set = |h: &Harness<'static, VramApp>, n: usize, v: f64| {
        h.get_all_by_role(egui::accesskit::Role::SpinButton)
            .nth(n)
            .expect("a guard field")
            .set_value_accesskit(v);
    };
    // The two rungs' minutes, then the lead factor.
    set(&h, 2, 0.0);
    h.run();
    assert_eq!(h.state().settings_ui.draft.guard.lead_factor, 1.0);
    h.get_by_label_contains("Lead factor: 0 × is under the least allowed, set to 1 ×");
    set(&h, 4, 500.0);
    h.run();
    assert_eq!(
        h.state().settings_ui.draft.guard.floor_free_mib,
        500.0 * 1024.0
    );
    h.get_by_label_contains("The floor (500 GiB) is not under GPU 1's memory (24 GiB)");
}

/// A value out of range is put back with a word saying what changed.
#[test]
fn an_out_of_range_value_is_clamped_with_a_word() {
    use vramwarden::front::gui::settings_window::clamp_note;
    let mut v = 0.0f64;
    let note = clamp_note("Minimum rate", &mut v, &(0.1..=100_000.0), " MiB/min").expect("said");
    assert_eq!(v, 0.1);
    assert!(
        note.contains("Minimum rate") && note.contains("0.1 MiB/min"),
        "{note}"
    );
    let mut ok = 5u64;
    assert_eq!(clamp_note("x", &mut ok, &(1..=10), " s"), None);
    assert_eq!(ok, 5);
    // Issue 40: the value as the field shows it, not its last float digits.
    let mut h = 744.9999f64;
    assert_eq!(
        clamp_note("History kept in memory", &mut h, &(0.1..=744.0), " h").as_deref(),
        Some("History kept in memory: 745 h is over the most allowed, set to 744 h.")
    );
}

/// The Leaks tab lists the newest first, whatever the order the episodes were recorded in.
#[test]
fn the_leaks_tab_is_newest_first() {
    use vramwarden::engine::view::{LeakKey, LeakRecord};
    let mut sim = SimSource::demo(T0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 1000);
    m.source = Some(sim.info());
    engine_state.apply(&mut m, sim.sample(T0).expect("sim"), T0);
    for (pid, flagged) in [(101u32, 1_000i64), (102, 3_000), (103, 2_000)] {
        let key = (
            vramwarden::model::ProcessKey {
                pid,
                start_time_ms: 0,
            },
            0,
        );
        m.leaks.push(LeakRecord {
            key: LeakKey::Process(key),
            info: vramwarden::session::LeakInfo {
                pid,
                start_time_ms: 0,
                device_index: 0,
                name: format!("leaker{pid}"),
                user: String::new(),
                ghost: false,
                since_ms: T0 - 60_000 + flagged - 10_000,
                rate_mib_per_min: 50.0,
                why: String::new(),
            },
            flagged_ms: T0 - 60_000 + flagged,
            ended_ms: Some(T0 - 30_000),
            grown_mib: 500.0,
            peak_mib: 2000.0,
            session: None,
            open_at_end: false,
        });
    }
    let app = VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
        .with_fixed_now(T0);
    let mut h = harness(app);
    h.run();
    h.get_by_label("Leaks").click();
    h.run();
    let mut rows: Vec<(f32, String)> = ["leaker101", "leaker102", "leaker103"]
        .iter()
        .map(|n| {
            let label = format!("{n} · PID {}", &n[6..]);
            let top = h.get_by_label(&label).rect().top();
            (top, n.to_string())
        })
        .collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let order: Vec<&str> = rows.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(order, ["leaker102", "leaker103", "leaker101"]);
}

/// The Guard tab, from the real engine's guard over the demo: per GPU its state, that it only
/// says what it would do (the default), the park rate it uses, and what it cannot do (the
/// demo's processes are simulated: nothing acts on them).
#[test]
fn the_guard_tab_says_per_gpu_where_the_guard_stands_and_what_it_cannot_do() {
    let mut h = harness(demo_engine_app(200));
    h.get_by_label("Guard").click();
    h.run();
    // One state per GPU.
    let states: usize = ["WATCHING", "ARMED", "ACTING", "WAITING"]
        .iter()
        .map(|s| h.query_all_by_label(s).count())
        .sum();
    assert_eq!(states, 2);
    assert_eq!(
        h.query_all_by_label_contains("dry run: it only says what it would do")
            .count(),
        2
    );
    assert_eq!(
        h.query_all_by_label_contains("Park rate 1.50 GiB/s (default until a park is measured)")
            .count(),
        2
    );
    assert!(
        h.query_all_by_label_contains("cannot be parked: simulated process")
            .count()
            + h.query_all_by_label_contains("Next: nothing it may do here")
                .count()
            > 0
    );
}

/// While the session log's writes fail (a full disk, a file-size limit), the top bar's REC
/// says so in the error colour, with the engine's error on hover; the status bar's notice may
/// be cut short on a narrow window. Once writes work again it is the plain REC dot.
#[test]
fn a_failing_recording_shows_in_the_top_bar() {
    use vramwarden::engine::view::RecordingStatus;
    let failing = |error: Option<&str>| {
        let mut m = demo_monitor(30);
        m.recording = RecordingStatus {
            path: Some("/data/sessions/today.vwlog".into()),
            active: true,
            error: error.map(str::to_string),
            ..RecordingStatus::default()
        };
        harness(
            VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
                .with_fixed_now(T0 + 29_000),
        )
    };
    let mut h = failing(Some("today.vwlog: File too large (os error 27)"));
    h.run();
    assert!(h.query_by_label("● REC").is_none());
    h.get_by_label("⚠ REC failing").hover();
    h.run();
    h.get_by_label_contains("today.vwlog: File too large (os error 27); retried every sample");
    let mut h = failing(None);
    h.run();
    assert!(h.query_by_label("⚠ REC failing").is_none());
    h.get_by_label("● REC");
}

/// The GUI review: whether the OOM guard acts was said only in its tab. The status bar says
/// it, from the engine's View: a dry run by default; a dry run still while only the guard's
/// own is off (the global one holds it back, and its status now says so); "acts" once both
/// are off.
#[test]
fn the_status_bar_says_whether_the_guard_acts() {
    use vramwarden::engine::{Engine, RecordTo};
    let words = |guard_dry: bool, global_dry: bool| {
        let sim = SimSource::demo(T0);
        let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
        let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
        e.set_source(sim.info());
        let mut s = vramwarden::engine::settings::Settings::default();
        s.guard.dry_run = guard_dry;
        s.cleanup.dry_run = global_dry;
        e.apply_settings(&s);
        for i in 0..3 {
            e.tick(sim.at(T0 + i * 1000), T0 + i * 1000);
        }
        let m = shared.read().expect("lock").clone();
        let app =
            VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
                .with_fixed_now(T0 + 2000);
        let mut h = harness(app);
        h.run();
        ["Guard: dry run", "Guard: acts"]
            .into_iter()
            .filter(|w| h.query_by_label(w).is_some())
            .collect::<Vec<_>>()
    };
    assert_eq!(words(true, true), ["Guard: dry run"]);
    assert_eq!(words(false, true), ["Guard: dry run"]);
    assert_eq!(words(false, false), ["Guard: acts"]);
}

/// The GUI review: the demo's scheduled park of 66020 showed with nothing on screen saying
/// who made it (the Activity tab was empty, the guard in dry run). Its detail pane says.
#[test]
fn a_parked_process_says_who_parked_it() {
    // The day `--demo` shows, which parks 66020 from its 200th second.
    let m = engine_monitor(SimSource::demo_day(T0), 300);
    let app = VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
        .with_fixed_now(T0 + 299_000);
    let mut h = with_detail_open(app, "66020");
    h.run();
    h.get_by_label_contains("parked — 24.0 GiB in host memory since");
    h.get_by_label(
        "Parked by the demo's script (the simulated GPUs park this process on a schedule).",
    );
}
