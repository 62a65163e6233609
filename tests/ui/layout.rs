//! The window's layout at the sizes users run it: 1280 × 800 at 100 % and 2560 × 1600 at
//! 200 % (the same 1280 × 800 points). The detail pane shrinks the graph, never covers it;
//! the legend wraps within its pane; "now" stays on screen.

use super::*;

/// 12 workers on GPU 0 (the legend's most) started one after another, besides the demo's own
/// processes: each a GiB more than the one before it, or (`oldest_largest`) a GiB less.
fn crowded_snap_sized(t: UnixMs, oldest_largest: bool) -> vramwarden::model::Snapshot {
    let mut s = SimSource::demo(T0).at(t);
    let template = s
        .processes
        .iter()
        .find(|p| p.device_index == 0)
        .cloned()
        .expect("a process on GPU 0");
    s.processes.retain(|p| p.device_index != 0);
    for k in 0..12u32 {
        let mut p = template.clone();
        p.pid = 50_001 + k;
        let gib = if oldest_largest { 12 - k } else { k + 1 };
        p.used_bytes = Some(u64::from(gib) << 30);
        let mut info = (*p.info.clone().expect("info")).clone();
        info.name = format!("worker-{k:02}");
        info.start_time_ms = T0 - 3_600_000 + i64::from(k);
        p.info = Some(std::sync::Arc::new(info));
        s.processes.push(p);
    }
    let gib = 1u64 << 30;
    for d in s.devices.iter_mut().filter(|d| d.index == 0) {
        let used = 78 * gib;
        d.memory_used_bytes = Some(used);
        d.memory_free_bytes = d.memory_total_bytes.map(|t| t.saturating_sub(used));
    }
    s
}

/// A window over `seconds` of [`crowded_snap_sized`] (the newest the largest), its graph on
/// `window`.
fn crowded_app(seconds: i64, window: vramwarden::front::gui::ui_state::Window) -> VramApp {
    crowded_app_sized(seconds, window, false)
}

/// [`crowded_app`], the oldest the largest when `oldest_largest`.
fn crowded_app_sized(
    seconds: i64,
    window: vramwarden::front::gui::ui_state::Window,
    oldest_largest: bool,
) -> VramApp {
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 86_400);
    m.source = Some(SimSource::demo(T0).info());
    for i in 0..seconds {
        let t = T0 + i * 1000;
        engine_state.apply(&mut m, crowded_snap_sized(t, oldest_largest), t);
    }
    let state = UiState {
        window,
        ..UiState::default()
    };
    VramApp::with_backend(Backend::detached(m, SourceKind::demo()), state)
        .with_fixed_now(T0 + (seconds - 1) * 1000)
}

fn harness_scaled(app: VramApp, ppp: f32) -> Harness<'static, VramApp> {
    Harness::builder()
        .with_size(egui::vec2(1280.0, 800.0))
        .with_pixels_per_point(ppp)
        .with_max_steps(8)
        .build_eframe(|_cc| app)
}

/// The graph's plot ends left of the pane (or of the window), "now" is at or left of its right
/// edge, and every legend entry named is inside the graph's part of the window.
fn assert_now_visible(h: &Harness<'static, VramApp>, legend: &[&str], what: &str) {
    let l = h.state().layout();
    let graph = l.graph.expect("the graph drawn");
    let edge = l.edge_x.expect("the newest moment placed");
    let right = l.detail_pane.map_or(1280.0, |p| p.left());
    assert!(
        graph.right() <= right + 0.5,
        "{what}: the plot ({graph:?}) reaches past {right} (pane {:?})",
        l.detail_pane
    );
    assert!(
        edge <= graph.right() + 0.5 && edge > graph.left(),
        "{what}: now at x = {edge}, the plot {graph:?}"
    );
    for name in legend {
        let r = h.get_by_label(name).rect();
        assert!(
            r.right() <= right + 0.5,
            "{what}: the legend entry {name} ({r:?}) reaches past {right}"
        );
    }
}

/// Major 1 of issue 40: with a process selected, the detail pane takes its room from the
/// graph: the plot ends where the pane begins and its right edge is "now"; the legend (12
/// processes and the totals) wraps within the graph's part. Both at 100 % and 200 %.
#[test]
fn the_detail_pane_shrinks_the_graph_and_now_stays_in_view() {
    use vramwarden::front::gui::ui_state::Window;
    for ppp in [1.0, 2.0] {
        let mut h = harness_scaled(crowded_app(1200, Window::TenMinutes), ppp);
        h.run();
        assert_now_visible(&h, &["worker-11 (50012)", "Memory limit"], "no pane");
        h.get_by_label("50012").click();
        h.run();
        h.run();
        assert!(h.state().layout().detail_pane.is_some(), "the pane opened");
        h.get_by_label("worker-11 · PID 50012");
        let what = format!("pane open at {ppp}x");
        assert_now_visible(
            &h,
            &["worker-11 (50012)", "worker-00 (50001)", "Memory limit"],
            &what,
        );
    }
}

/// Major 2 of issue 40: on "All" over half an hour ("Total used (range)" joins the legend)
/// the graph, "now" and the last metric panel stay inside the window; the legend wraps.
#[test]
fn the_graph_never_grows_wider_than_the_window() {
    use vramwarden::front::gui::ui_state::Window;
    for ppp in [1.0, 2.0] {
        let mut h = harness_scaled(crowded_app(1800, Window::All), ppp);
        h.run();
        h.get_by_label("Total used (range)");
        let what = format!("All at {ppp}x");
        assert_now_visible(
            &h,
            &["Total used (range)", "Memory limit", "worker-00 (50001)"],
            &what,
        );
        for panel in ["Utilisation ·", "Temperature ·", "Power ·"] {
            let r = h.get_by_label_contains(panel).rect();
            assert!(r.right() <= 1280.5, "{what}: {panel} at {r:?}");
        }
    }
}

/// Reading order of rects: top to bottom, then left to right (a wrapped legend).
fn reading_order(a: egui::Rect, b: egui::Rect) -> std::cmp::Ordering {
    if (a.center().y - b.center().y).abs() > a.height() / 2.0 {
        a.center().y.total_cmp(&b.center().y)
    } else {
        a.left().total_cmp(&b.left())
    }
}

/// Issue 40 (window v4): the legend and the hover list the stack in its own order, its top
/// first (memory no process accounts for, then the newest process down to the oldest), and the
/// legend says so.
#[test]
fn legend_and_hover_follow_the_stack_from_its_top() {
    use vramwarden::front::gui::ui_state::Window;
    // The oldest the largest: a legend by size would list them the other way round.
    let mut h = harness_scaled(crowded_app_sized(600, Window::TenMinutes, true), 1.0);
    h.run();
    h.get_by_label("Stack from the top:");
    // Started one after another: worker-00 is the oldest (the bottom), worker-11 the top.
    let names: Vec<String> = (0..12u32)
        .rev()
        .map(|k| format!("worker-{k:02} ({})", 50_001 + k))
        .collect();
    let legend: Vec<egui::Rect> = names.iter().map(|n| h.get_by_label(n).rect()).collect();
    for (w, n) in legend.windows(2).zip(names.iter()) {
        assert_eq!(
            reading_order(w[0], w[1]),
            std::cmp::Ordering::Less,
            "{n} comes before the one under it in the stack"
        );
    }
    let graph = h.state().layout().graph.expect("graph");
    h.hover_at(egui::pos2(graph.right() - 20.0, graph.center().y));
    h.run();
    // The hover's rows: each name's second label, top to bottom in the stack's order.
    let rows: Vec<egui::Rect> = names
        .iter()
        .zip(&legend)
        .map(|(n, in_legend)| {
            h.query_all_by_label(n)
                .map(|node| node.rect())
                .find(|r| r != in_legend)
                .unwrap_or_else(|| panic!("{n} in the hover"))
        })
        .collect();
    for (w, n) in rows.windows(2).zip(names.iter()) {
        assert!(
            w[0].top() < w[1].top(),
            "the hover lists {n} above the next"
        );
    }
}

/// The colours of the single-coloured meshes painted in the last frame (egui_plot fills a band
/// with one).
fn mesh_colours(h: &Harness<'static, VramApp>) -> Vec<egui::Color32> {
    fn walk(s: &egui::Shape, out: &mut Vec<egui::Color32>) {
        match s {
            egui::Shape::Vec(v) => v.iter().for_each(|s| walk(s, out)),
            egui::Shape::Mesh(m) => {
                if let Some(first) = m.vertices.first() {
                    if m.vertices.iter().all(|v| v.color == first.color) {
                        out.push(first.color);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for c in &h.output().shapes {
        walk(&c.shape, &mut out);
    }
    out
}

/// Issue 40 (window v4): each band of the stack is painted in exactly its process's colour
/// (the table's and the legend's swatch), opaque, so nothing above or behind it tints it; with
/// a process selected the others are dimmed, still opaque.
#[test]
fn each_band_is_painted_in_its_swatch_colour() {
    use vramwarden::front::gui::widgets::process_color;
    let mut h = harness_scaled(demo_app(300), 1.0);
    h.run();
    let m = demo_monitor(300);
    let painted = mesh_colours(&h);
    let on_gpu0: Vec<_> = m
        .rows()
        .filter(|r| r.device_index == 0 && r.exited_at_ms.is_none())
        .collect();
    assert!(on_gpu0.len() >= 2, "{}", on_gpu0.len());
    for r in on_gpu0 {
        let c = process_color(r.color_slot, true);
        assert!(
            painted.contains(&c),
            "{} (slot {}) has no band of {c:?}: {painted:?}",
            r.key.pid,
            r.color_slot
        );
    }
    h.get_by_label("48213").click();
    h.run();
    h.run();
    let painted = mesh_colours(&h);
    assert!(!painted.is_empty());
    assert!(
        painted.iter().all(|c| c.a() == 255),
        "a band is see-through: {painted:?}"
    );
}

/// Major 2 of issue 40, in a session: half an hour recorded and opened, on "All" and on
/// "1 h", a process's pane open, at 100 % and 200 %: the graph ends where the pane begins,
/// its right edge is the slider's moment, and its legend stays within the graph's part.
#[test]
fn a_sessions_graph_stays_inside_the_window_on_all_and_one_hour() {
    use vramwarden::front::gui::ui_state::Window;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo_session(&path, 1800);
    for window in [Window::All, Window::OneHour] {
        for ppp in [1.0, 2.0] {
            let state = UiState {
                window,
                ..UiState::default()
            };
            let mut app = VramApp::with_backend(
                Backend::detached(Monitor::new(1000, 10), SourceKind::Nvml),
                state,
            );
            app.show_session(vramwarden::session::reader::SessionData::open(&path).expect("open"));
            let mut h = harness_scaled(app.with_fixed_now(T0 + 5_000_000), ppp);
            h.run();
            h.get_by_label("SESSION · read-only");
            h.get_by_label("48213").click();
            h.run();
            h.run();
            assert!(h.state().layout().detail_pane.is_some(), "the pane opened");
            let what = format!("session on {window:?} at {ppp}x");
            assert_now_visible(&h, &["python3 (48213)", "Memory limit"], &what);
        }
    }
}

/// The card's "Util" says on hover that it is the share of time a kernel ran (the driver's
/// figure), not how much of the GPU was used, and points to the table's GPU % for each process.
#[test]
fn the_cards_utilisation_says_what_it_is() {
    let mut h = harness(demo_app(120));
    h.run();
    let util = h
        .get_all_by_label_contains("Util ")
        .min_by(|a, b| a.rect().top().total_cmp(&b.rect().top()))
        .expect("GPU 0's Util")
        .rect()
        .center();
    h.hover_at(util);
    h.run_steps(90);
    assert!(
        h.query_all_by_label_contains("not how much of the GPU it used")
            .next()
            .is_some(),
        "the Util hover is shown"
    );
}

/// The panels are not filled (a software rasterizer pays for every pixel filled): the window
/// is cleared to the panels' colour instead, in either theme, opaque; once a frame is drawn,
/// to the colour it was drawn with (a theme changed during a frame shows from the next).
#[test]
fn the_window_is_cleared_to_the_panels_colour() {
    let app = demo_app(10);
    for visuals in [egui::Visuals::dark(), egui::Visuals::light()] {
        let want = visuals.panel_fill.to_normalized_gamma_f32();
        assert_eq!(eframe::App::clear_color(&app, &visuals), want);
        assert_eq!(want[3], 1.0);
    }
    let mut h = harness_scaled(demo_app(10), 1.0);
    h.run();
    let drawn = h.ctx.global_style().visuals.clone();
    let other = if drawn.dark_mode {
        egui::Visuals::light()
    } else {
        egui::Visuals::dark()
    };
    assert_eq!(
        eframe::App::clear_color(h.state(), &other),
        drawn.panel_fill.to_normalized_gamma_f32()
    );
}

/// Pixels the triangles of the last frame cover (overlaps counted each time), at `ppp`.
fn pixels_painted(h: &Harness<'static, VramApp>, ppp: f32) -> f64 {
    let meshes = h.ctx.tessellate(h.output().shapes.clone(), ppp);
    super::coverage::coverage(&meshes, ppp).1
}

/// A software rasterizer (llvmpipe on a VM or a remote desktop) pays for every pixel a frame
/// paints: the window's 1280 × 800 pixels are cleared to the panels' colour and the panels
/// not filled again, so a frame of the demo with the detail pane open paints well under the
/// window's own area (1.5 M pixels when the panels were filled).
#[test]
fn a_frame_paints_less_than_the_window_once_over() {
    let mut h = harness_scaled(demo_app(300), 1.0);
    h.run();
    h.get_by_label("48213").click();
    h.run();
    h.run();
    let painted = pixels_painted(&h, 1.0);
    assert!(
        painted < 0.75 * 1280.0 * 800.0,
        "{painted:.0} pixels painted"
    );
}

/// The Leaks table fits a 1280-point window beside the GPU cards: its last column (who found
/// the leak) is inside the window, header and cells, and a recorded leak's time says no date
/// on the day it is shown at.
#[test]
fn the_leaks_table_fits_the_window_to_its_last_column() {
    let dir = tempfile::tempdir().expect("tmp");
    let app = recorded_session_app(&dir.path().join("s.vwlog"), 300);
    let mut h = harness_scaled(app.with_fixed_now(T0 + 5_000_000), 1.0);
    h.run();
    h.get_by_label("Leaks (1 ongoing)").click();
    h.run();
    let header = h.get_by_label("Found by").rect();
    assert!(header.right() <= 1280.0, "the header ends at {header:?}");
    let cells: Vec<egui::Rect> = h
        .query_all_by_label("recording")
        .map(|n| n.rect())
        .collect();
    assert!(!cells.is_empty(), "no recorded leak listed");
    for r in &cells {
        assert!(r.right() <= 1280.0, "a cell ends at {r:?}");
    }
    let table_bottom = cells
        .iter()
        .map(|r| r.bottom())
        .fold(header.bottom(), f32::max);
    // The session's day is written in its bar and the status bar, not in the table's times.
    let day = &vramwarden::model::format::date_time(T0)[..10];
    let shown = h.query_all_by_label_contains(day).count();
    assert!(shown > 0, "the session's day is written nowhere");
    for n in h.query_all_by_label_contains(day) {
        let r = n.rect();
        assert!(
            r.bottom() <= header.top() || r.top() >= table_bottom,
            "a time in the table shows the date of the day it is shown at: {r:?}"
        );
    }
}

/// A window shrunk to 800 × 560 and grown back, or closed small and started again, gets its
/// column of GPU cards back at the width it had (egui kept the clamped width, and persisted it:
/// the cards stayed cramped for good).
#[test]
fn the_gpu_cards_get_their_width_back_when_the_window_grows_again() {
    let mut h = harness_scaled(demo_app(120), 1.0);
    h.run();
    let width = |h: &Harness<'static, VramApp>| h.state().gpu_panel_rect().expect("drawn").width();
    let before = width(&h);
    // (800 points: the smallest the window lays out without zooming out.)
    h.set_size(egui::vec2(800.0, 560.0));
    h.run();
    h.run();
    let small = width(&h);
    assert!(
        small + 20.0 < before,
        "{small} at 800 × 560, {before} before"
    );
    // A window closed while small and started again (its memory as egui persisted it) gets
    // the width back too.
    let memory = h.ctx.memory(|m| m.clone());
    let app = demo_app(120);
    let mut next = Harness::builder()
        .with_size(egui::vec2(1280.0, 800.0))
        .with_max_steps(8)
        .build_eframe(move |cc| {
            cc.egui_ctx.memory_mut(|m| *m = memory);
            app
        });
    next.run();
    next.run();
    let started = width(&next);
    assert!(
        (started - before).abs() < 1.0,
        "{started} after a start, {before} before"
    );
    h.set_size(egui::vec2(1280.0, 800.0));
    h.run();
    h.run();
    let after = width(&h);
    assert!(
        (after - before).abs() < 1.0,
        "{after} after, {before} before"
    );
}

/// The review of the window: ticking a rule's condition in Settings → Rules made the rule's
/// summary a line longer and moved every control under it (the pointer then lay on another
/// checkbox). The controls stay where they are however long the summary grows.
#[test]
fn ticking_a_rule_condition_moves_no_control() {
    let (_dir, mut h) = settings_with_the_example_rule();
    let tops = |h: &Harness<'static, VramApp>| -> Vec<f32> {
        [
            "GPU used ≥",
            "Leaking for ≥",
            "Running for ≥",
            "Only on GPU",
        ]
        .iter()
        .map(|l| h.get_by_label(l).rect().top())
        .collect()
    };
    let before = tops(&h);
    for c in [
        "GPU used ≥",
        "GPU free ≤",
        "GPU full in <",
        "Leaking for ≥",
        "Running for ≥",
    ] {
        h.get_by_label(c).click();
        h.run();
        h.run();
        assert_eq!(tops(&h), before, "ticking “{c}” moved the controls");
    }
    let summary = h
        .get_all_by_label_contains("Idle holder: when")
        .next()
        .and_then(|n| {
            let a = egui_kittest::kittest::NodeT::accesskit_node(&n);
            a.value().or_else(|| a.label())
        })
        .expect("the summary");
    assert!(
        summary.contains("is leaking for") && summary.contains("has run"),
        "the conditions were ticked: {summary}"
    );
}

/// The review of the window: the rule's summary, all in italics, read "per process)— DRY
/// RUN" (the leaning ")" closed the space). Its " — DRY RUN" is drawn upright.
#[test]
fn a_rule_summary_draws_its_dry_run_upright() {
    let (_dir, h) = settings_with_the_example_rule();
    fn walk(s: &egui::Shape, out: &mut Vec<(String, bool)>) {
        match s {
            egui::Shape::Vec(v) => v.iter().for_each(|s| walk(s, out)),
            egui::Shape::Text(t) => {
                let job = &t.galley.job;
                for sec in &job.sections {
                    let part = &job.text[sec.byte_range.start.0..sec.byte_range.end.0];
                    out.push((part.to_string(), sec.format.italics));
                }
            }
            _ => {}
        }
    }
    let mut parts = Vec::new();
    for c in &h.output().shapes {
        walk(&c.shape, &mut parts);
    }
    let dry: Vec<&(String, bool)> = parts
        .iter()
        .filter(|(t, _)| t.contains("— DRY RUN"))
        .collect();
    assert!(!dry.is_empty(), "no summary ending in DRY RUN drawn");
    assert!(dry.iter().all(|(_, italic)| !italic), "{dry:?}");
    assert!(
        parts
            .iter()
            .any(|(t, italic)| *italic && t.starts_with("Idle holder: when")),
        "the rest stays in italics: {parts:?}"
    );
}

/// A single rule can be moved neither up nor down: neither button is shown (both were, and
/// did nothing); the "Conditions" label stands at the top of its list, not halfway down it.
#[test]
fn a_lone_rule_offers_no_move_and_its_conditions_label_heads_the_list() {
    let (_dir, h) = settings_with_the_example_rule();
    for label in ["Up", "Down"] {
        assert!(
            h.query_by_role_and_label(egui::accesskit::Role::Button, label)
                .is_none(),
            "{label} is offered"
        );
    }
    h.get_by_role_and_label(egui::accesskit::Role::Button, "Duplicate");
    let label = h.get_by_label("Conditions").rect();
    let first = h.get_by_label("Process GPU memory ≥").rect();
    assert!(
        (label.top() - first.top()).abs() < 6.0,
        "the label at {label:?}, the first condition at {first:?}"
    );
}
