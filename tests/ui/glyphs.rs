//! No text the window paints needs a glyph its fonts lack (egui would draw an empty box): the
//! bundled proportional font has no arrows (→ ↑ ↓ ▲ ▼), the monospace one has them. Every
//! egui_kittest frame in these tests refuses such a text (egui's `MissingGlyphPolicy::Panic`):
//! a screen drawn is a screen checked.

use super::*;
use egui_kittest::kittest::NodeT;

/// The check finds what it is for: a frame with an arrow in the proportional font fails, the
/// same arrow in the monospace font does not.
#[test]
fn a_frame_with_a_glyph_its_font_lacks_fails() {
    let frame = |monospace: bool| {
        std::panic::catch_unwind(move || {
            let mut h = Harness::builder().build_ui(move |ui| {
                let text = egui::RichText::new("from a → b");
                ui.label(if monospace { text.monospace() } else { text });
            });
            h.run();
        })
    };
    let refused = frame(false).expect_err("the proportional arrow is refused");
    let why = refused
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(why.contains("No glyph for \"→\""), "{why}");
    assert!(frame(true).is_ok(), "the monospace font has the arrow");
}

/// The main window (a forecast banner and its hover, a leak, the detail pane of a PyTorch
/// process, the sorted table) and Settings (each section, a rule's summary with its ≥) paint
/// only glyphs their fonts have.
#[test]
fn every_glyph_the_window_paints_is_in_its_fonts() {
    let app = demo_engine_app(601);
    let t = T0 + 600_000;
    let mut m = (*app.backend().view().expect("view")).clone();
    m.oom_alerts
        .push(vramwarden::detect::forecast_alert::ForecastAlert {
            device_index: 0,
            since_ms: t,
            full_in_s: Some(540.0),
            drivers: vec!["python3 (PID 51877)".into()],
        });
    let dir = tempfile::tempdir().expect("tmp");
    let mut app =
        VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
            .with_fixed_now(t);
    app.set_config(dir.path().join("config.toml"), None);
    let mut h = harness(app);
    h.run();
    // The banner's hover (it named "Settings → Notifications").
    let banner = h
        .get_all_by_label_contains("growing")
        .filter(|n| n.rect().left() < 400.0)
        .min_by(|a, b| a.rect().top().total_cmp(&b.rect().top()))
        .expect("the banner")
        .rect()
        .center();
    h.hover_at(banner);
    h.run_steps(90);
    assert!(
        h.query_all_by_label_contains("runs out of memory within the warning time")
            .next()
            .is_some(),
        "the banner's hover is shown"
    );
    h.get_by_label("51877").click();
    h.run();
    h.run();
    h.get_by_label("python3 · PID 51877");
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Comma);
    h.run();
    // A section's button (a toggle; the menu bar has a "Sessions" too), clicked.
    let section = |h: &mut Harness<'static, VramApp>, name: &str| {
        h.get_all_by_label(name)
            .find(|n| n.accesskit_node().toggled().is_some())
            .unwrap_or_else(|| panic!("the section {name}"))
            .click();
        h.run();
        h.run();
    };
    for (name, shown) in [
        ("General", "Theme"),
        ("Sampling & history", "Sampling interval"),
        ("Sessions", "Record"),
        ("Leaks", "Warn when a GPU is forecast full within"),
        ("OOM guard", "The ladder, in order"),
    ] {
        section(&mut h, name);
        assert!(
            h.query_all_by_label_contains(shown).next().is_some(),
            "{name}: {shown:?} shown"
        );
    }
    section(&mut h, "Rules");
    h.get_by_label("Add the example: idle 30 min holding > 8 GiB, terminate")
        .click();
    h.run();
    h.run();
    h.get_by_label_contains("when the process holds ≥ 8 GiB");
}
