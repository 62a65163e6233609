//! Image snapshots of the window (egui_kittest's wgpu renderer; on a computer without a GPU
//! it draws with a software rasterizer, Mesa's lavapipe: `apt-get install
//! mesa-vulkan-drivers`; without any adapter the test fails saying so): the demo at 1280 × 800 with
//! the detail pane open, at 100 % and at 200 %. Each is compared with its image under
//! `tests/snapshots/` with a per-pixel threshold of 0.6 (egui_kittest's default: anti-aliasing
//! and rasterizer rounding pass, a colour change does not) and at most 0.2 % of the pixels
//! over it; `UPDATE_SNAPSHOTS=1 cargo test --test ui_snapshots` writes them anew. A guard
//! shows the tolerance lets no colour change through: the same window in the colour-blind
//! palette differs from it in many times more pixels than are allowed to.
//!
//! Times are shown in UTC here (the time axis and the status bar read local time).

use egui_kittest::kittest::Queryable;
use egui_kittest::{Harness, SnapshotOptions, SnapshotResults};
use vramwarden::engine::view::Monitor;
use vramwarden::front::gui::app::UiState;
use vramwarden::front::gui::widgets::Palette;
use vramwarden::front::gui::{Backend, VramApp};
use vramwarden::model::UnixMs;
use vramwarden::source::sim::SimSource;
use vramwarden::source::{GpuSource, SourceKind};

const T0: UnixMs = 1_796_000_000_000;

/// The demo's first five minutes in the window, the palette `palette`.
fn demo_app(palette: Palette) -> VramApp {
    let mut sim = SimSource::demo(T0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 86_400);
    m.source = Some(sim.info());
    for i in 0..300 {
        let t = T0 + i * 1000;
        engine_state.apply(&mut m, sim.sample(t).expect("sim"), t);
    }
    let state = UiState {
        palette,
        ..UiState::default()
    };
    VramApp::with_backend(Backend::detached(m, SourceKind::demo()), state)
        .with_fixed_now(T0 + 299_000)
}

/// The window as a screen shows it: eframe clears the window to the app's clear colour before
/// each frame (its panels are not filled); egui_kittest's renderer clears to transparent, so
/// this paints that colour under the frame first.
struct OnItsBackground(VramApp);

impl eframe::App for OnItsBackground {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        let [r, g, b, a] =
            eframe::App::clear_color(&self.0, ui.visuals()).map(|c| (c * 255.0).round() as u8);
        let fill = egui::Color32::from_rgba_unmultiplied(r, g, b, a);
        ui.painter().rect_filled(ui.max_rect(), 0.0, fill);
        self.0.ui(ui, frame);
    }
}

/// The window at 1280 × 800 points and `ppp` pixels per point, the trainer's detail pane open.
fn window(palette: Palette, ppp: f32) -> Harness<'static, OnItsBackground> {
    // SAFETY of the test: this binary's only test sets it before any time is formatted.
    std::env::set_var("TZ", "UTC");
    let app = demo_app(palette);
    let mut h = Harness::builder()
        .with_size(egui::vec2(1280.0, 800.0))
        .with_pixels_per_point(ppp)
        .with_max_steps(8)
        .wgpu()
        .build_eframe(|_cc| OnItsBackground(app));
    h.run();
    h.get_by_label("48213").click();
    h.run();
    h.run();
    h
}

fn options() -> SnapshotOptions {
    // 0.2 % of the 1280 × 800 pixels (of 2560 × 1600 at 200 %).
    SnapshotOptions::new()
        .threshold(0.6)
        .max_failed_pixels(2048)
}

/// Pixels of two images of one size that differ by more than 16 in a channel.
fn differing(a: &[u8], b: &[u8]) -> usize {
    assert_eq!(a.len(), b.len());
    a.chunks(4)
        .zip(b.chunks(4))
        .filter(|(p, q)| p.iter().zip(q.iter()).any(|(x, y)| x.abs_diff(*y) > 16))
        .count()
}

#[test]
fn the_window_matches_its_snapshots_at_100_and_200_percent() {
    // One test: TZ is set before any other thread formats a time.
    let mut results = SnapshotResults::new();
    let mut h = window(Palette::Standard, 1.0);
    results.add(h.try_snapshot_options("window_1280x800", &options()));
    // The guard: the bands in other colours differ in far more pixels than are let through.
    let standard = h.render().expect("rendered");
    let other = window(Palette::ColorBlind, 1.0).render().expect("rendered");
    let n = differing(standard.as_raw(), other.as_raw());
    assert!(n > 10 * 2048, "the palettes differ in only {n} pixels");
    let mut h2 = window(Palette::Standard, 2.0);
    results
        .add(h2.try_snapshot_options("window_1280x800_200pct", &options().max_failed_pixels(8192)));
    results.extend_harness(&mut h);
    results.extend_harness(&mut h2);
    if let Err(e) = results.into_result() {
        panic!("{:?}", e.into_inner());
    }
}
