//! One engine, two windows: a local window draws the engine's View; a remote window draws what
//! it decodes from the wire (`WireView` as JSON, the window's checks, `WireView::apply_after`,
//! polled every 100 samples and from the start, as the remote link does) — and the two are the
//! same View, the same process rows (exited ones, peaks, one-minute changes, colours) and the
//! same pixels (egui_kittest's wgpu renderer; on a computer without a GPU Mesa's lavapipe).
//! A guard shows the comparison can fail: rows derived on the window's side from the newest
//! sample alone (what a window did before the wire carried the rows) draw differently.
//!
//! Times are shown in UTC here (the time axis and the status bar read local time).

mod common;

use common::{poll_wire, T0};
use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use vramwarden::engine::builder::EngineBuilder;
use vramwarden::engine::shared::Shared;
use vramwarden::engine::view::Monitor;
use vramwarden::front::gui::app::UiState;
use vramwarden::front::gui::{Backend, VramApp};
use vramwarden::model::history::delta::MAX_DELTA_TICKS;
use vramwarden::source::sim::SimSource;
use vramwarden::source::{GpuSource, SourceKind};

/// Samples the engine takes (25 minutes of the demo: batch jobs come and go, a leak is called).
const SAMPLES: i64 = 1500;
/// Samples between two polls of the remote window.
const POLL_EVERY: i64 = 100;

/// The remote window's polls of the engine's View `local` until caught up
/// ([`common::poll_wire`]); returns the next `since`. (The snapshot's arrival is given as the
/// engine's; a window takes its own clock's.)
fn poll(local: &Monitor, window: &mut Monitor, since: u64) -> u64 {
    let now = local.latest.as_ref().map_or(T0, |s| s.taken_at_ms);
    let received = local.latest_received_ms.unwrap_or(now);
    poll_wire(local, window, since, now, received)
}

/// The engine's settings: a rule that notifies of every process over 30 GiB (the trainer), so
/// the View holds rule activity.
fn settings() -> vramwarden::engine::settings::Settings {
    let mut s = vramwarden::engine::settings::Settings::default();
    s.cleanup.rules = vec![common::big_holder()];
    s
}

/// The engine's View (the local window's) and the remote window's, after [`SAMPLES`].
fn one_engine_two_windows() -> (Monitor, Monitor) {
    let shared = Shared::new(Monitor::new(1000, 3600));
    let mut sim = SimSource::demo(T0);
    let mut engine = EngineBuilder::new(shared.clone(), 1000)
        .settings(&settings())
        .source(sim.info())
        .build();
    let mut window = Monitor::new(1000, 3600);
    let mut since = 0;
    for i in 0..SAMPLES {
        let t = T0 + i * 1000;
        engine.tick(sim.sample(t).expect("sim"), t);
        if i % POLL_EVERY == POLL_EVERY - 1 {
            since = poll(&shared.view().expect("a view"), &mut window, since);
        }
    }
    let local = shared.view().expect("a view");
    poll(&local, &mut window, since);
    ((*local).clone(), window)
}

/// A View as JSON, its map of last activity in key order (a hash map's order is its own) and
/// its history as what it holds — its capacity and every series' values over its whole span
/// (`History::delta_since` from its oldest tick), not how it stores them (the engine stores
/// gaps that a history built from deltas leaves out, and each history has its own identity,
/// the window's cache key).
fn json(m: &Monitor) -> serde_json::Value {
    let mut v = serde_json::to_value(m).expect("json");
    let held = m.history.delta_since(0, MAX_DELTA_TICKS);
    assert_eq!(
        held.end_tick(),
        m.history.end_tick(),
        "the whole history in one delta"
    );
    v["history"] = serde_json::json!({
        "capacity": m.history.capacity(),
        "held": held,
    });
    if let Some(a) = v["last_active"].as_array_mut() {
        a.sort_by_key(|e| e.to_string());
    }
    v
}

/// Fields of two JSON objects that differ.
fn differing_fields(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return vec!["not objects".into()];
    };
    let mut keys: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// `m` in a window of 1280 × 800 at the time of its newest sample, the leaking kernel's
/// detail pane open.
fn window(m: Monitor) -> Harness<'static, VramApp> {
    let now = m.latest.as_ref().map_or(T0, |s| s.taken_at_ms);
    let app = VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
        .with_fixed_now(now);
    let mut h = Harness::builder()
        .with_size(egui::vec2(1280.0, 800.0))
        .with_max_steps(8)
        .wgpu()
        .build_eframe(|_cc| app);
    h.run();
    h.get_by_label("51877").click();
    h.run();
    h.run();
    h
}

/// Pixels of two images of one size that differ by more than 16 in a channel.
fn differing_pixels(a: &[u8], b: &[u8]) -> usize {
    assert_eq!(a.len(), b.len());
    a.chunks(4)
        .zip(b.chunks(4))
        .filter(|(p, q)| p.iter().zip(q.iter()).any(|(x, y)| x.abs_diff(*y) > 16))
        .count()
}

#[test]
fn a_remote_window_shows_exactly_what_a_local_one_shows() {
    // SAFETY of the test: this binary's only test sets it before any time is formatted.
    std::env::set_var("TZ", "UTC");
    let (local, remote) = one_engine_two_windows();
    // The engine derived rows worth comparing: exited processes, a minute's change, colours.
    let exited = local.rows().filter(|r| r.exited_at_ms.is_some()).count();
    assert!(exited >= 2, "{exited} exited rows");
    assert!(local
        .rows()
        .any(|r| r.delta_1m_bytes.is_some_and(|d| d > 0)));
    assert!(!local.leaks.is_empty(), "the demo's kernel leaks");
    assert!(!local.activity.is_empty(), "the rule noted the trainer");
    assert!(!local.last_active.is_empty());
    // The same View, field by field.
    let (a, b) = (json(&local), json(&remote));
    assert!(
        a == b,
        "the Views differ in {:?}; history: {:?}",
        differing_fields(&a, &b),
        differing_fields(&a["history"]["held"], &b["history"]["held"])
    );
    // And the same pixels.
    let guard = {
        let mut v3 = remote.clone();
        let mut newest_only_state = vramwarden::engine::state::EngineState::default();
        let mut newest_only = Monitor::new(1000, 3600);
        newest_only_state.apply(
            &mut newest_only,
            local.latest.clone().expect("a sample"),
            T0,
        );
        v3.set_rows(newest_only.rows().cloned().collect());
        v3
    };
    let mut local_window = window(local);
    let mut remote_window = window(remote);
    let (l, r) = (local_window.render(), remote_window.render());
    let (l, r) = (
        l.expect("the local window renders"),
        r.expect("the remote one renders"),
    );
    assert_eq!(
        differing_pixels(l.as_raw(), r.as_raw()),
        0,
        "the windows differ"
    );
    // The guard: rows a window derived from the newest sample alone draw otherwise.
    let g = window(guard).render().expect("renders");
    let off = differing_pixels(l.as_raw(), g.as_raw());
    assert!(
        off > 500,
        "only {off} pixels tell the window-derived rows apart"
    );
}
