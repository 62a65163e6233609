//! The process table at a narrow width: PID and Name stay in view while the other columns
//! scroll sideways (Shift+wheel), and sorting by a narrow column moves no header.

use super::*;

/// The window at 1280 × 800 with the detail pane of the trainer (48213) open: the table is
/// narrower than its columns.
fn narrow_table() -> Harness<'static, VramApp> {
    let mut h = Harness::builder()
        .with_size(egui::vec2(1280.0, 800.0))
        .with_max_steps(8)
        .build_eframe(|_cc| demo_app(120));
    h.run();
    h.get_by_label("48213").click();
    h.run();
    h.run();
    h
}

/// The User column's header: the nearest "User" above the row at `row`.
fn user_header(h: &Harness<'_, VramApp>, row: egui::Rect) -> egui::Rect {
    h.query_all_by_label("User")
        .map(|n| n.rect())
        .filter(|r| r.bottom() <= row.top())
        .max_by(|a, b| a.top().total_cmp(&b.top()))
        .expect("the User header, the nearest User above the line")
}

/// Issue 40 (window v4): PID and Name are a frozen column: Shift+wheel over the scrolled
/// columns scrolls them sideways, and the line's PID and name stay where they were.
#[test]
fn pid_and_name_stay_while_the_table_scrolls_sideways() {
    shift_wheel_scrolls_the_columns(false);
}

/// Issue 40 (window v4): Shift+wheel with the pointer over the frozen half (on the PID)
/// scrolls the other columns too (egui gave it to no scroll area there).
#[test]
fn shift_wheel_over_pid_and_name_scrolls_the_other_columns() {
    shift_wheel_scrolls_the_columns(true);
}

/// Shift+wheel with the pointer on the trainer's line, on its PID (`on_pid`) or 150 points
/// right of its name, moves RSS left by more than 100 points; the PID and the name stay.
fn shift_wheel_scrolls_the_columns(on_pid: bool) {
    let mut h = narrow_table();
    let pid = h.get_by_label("48213").rect();
    let name_of = |h: &Harness<'static, VramApp>, pid: egui::Rect| {
        h.query_all_by_label("python3")
            .map(|n| n.rect())
            .find(|r| (r.center().y - pid.center().y).abs() < 2.0)
            .expect("the trainer's name on its line")
    };
    let name = name_of(&h, pid);
    let rss = h.get_by_label("RSS").rect();
    let pane = h.state().layout().detail_pane.expect("the pane is open");
    assert!(rss.left() > pane.left(), "RSS starts out of view: {rss:?}");
    // The scrolled columns start right after Name, in view: User is the first of them.
    let user = user_header(&h, pid);
    assert!(
        user.left() > name.left() && user.left() < pid.left() + 260.0 && user.right() < pane.left(),
        "User's header at {user:?}, the name at {name:?}"
    );
    let x = if on_pid {
        pid.center().x
    } else {
        name.right() + 150.0
    };
    h.hover_at(egui::pos2(x, pid.center().y));
    for _ in 0..4 {
        wheel(&mut h, -200.0, egui::Modifiers::SHIFT);
        h.run();
    }
    h.run_steps(30);
    let moved = h.get_by_label("RSS").rect();
    assert!(
        moved.left() < rss.left() - 100.0,
        "the columns scrolled sideways: RSS from {rss:?} to {moved:?}"
    );
    assert_eq!(h.get_by_label("48213").rect(), pid, "the PID stays");
    assert_eq!(name_of(&h, pid), name, "the name stays");
    // Still one line: a click on the scrolled part selects the same process as its PID.
    assert_eq!(h.state().selected.map(|k| k.0.pid), Some(48213));
}

/// The table's column title holding `text` (the topmost below the graphs).
fn header(h: &Harness<'static, VramApp>, text: &str) -> egui::Rect {
    h.query_all_by_label_contains(text)
        .map(|n| n.rect())
        .filter(|r| r.top() > 500.0)
        .min_by(|a, b| a.top().total_cmp(&b.top()))
        .unwrap_or_else(|| panic!("the {text} header"))
}

/// Issue 40 (window v4): a click on a narrow column's header sorts by it without widening it
/// (its arrow has its room from the start), so the headers after it stay under the pointer.
#[test]
fn sorting_by_a_narrow_column_moves_no_header() {
    let mut h = harness(demo_app(120));
    h.run();
    let before: Vec<egui::Rect> = ["GPU memory", "GPU %", "Status", "Age"]
        .iter()
        .map(|t| header(&h, t))
        .collect();
    h.query_all_by_label("GPU")
        .find(|n| n.rect().top() > 500.0)
        .expect("the GPU header")
        .click();
    h.run();
    h.run();
    assert!(
        h.query_by_label_contains("GPU ▲").is_some(),
        "sorted by GPU"
    );
    for (t, b) in ["GPU memory", "GPU %", "Status", "Age"].iter().zip(before) {
        let a = header(&h, t);
        assert!(
            (a.left() - b.left()).abs() < 0.5,
            "the {t} header moved from {b:?} to {a:?}"
        );
    }
}

/// A column's title says what its figure is when hovered: GPU % is the driver's 10 s average
/// (not the card's instant utilisation), and the sort hint follows; a title that says it all
/// (PID) has the sort hint alone.
#[test]
fn column_titles_say_what_their_figures_are() {
    let mut h = harness(demo_app(120));
    h.run();
    // Each title hovered in turn: (title, its meaning shown, the sort hint shown).
    for (title, meaning) in [("GPU %", true), ("PID", false)] {
        let at = header(&h, title).center();
        h.hover_at(at);
        h.run_steps(90);
        let shown = |h: &Harness<'static, VramApp>, text: &str| {
            h.query_all_by_label_contains(text).next().is_some()
        };
        assert_eq!(shown(&h, "averaged over the last 10 s"), meaning, "{title}");
        assert!(shown(&h, "Click to sort"), "the sort hint over {title}");
    }
}

/// Opaque filled rectangles of the last frame inside `area`, `min_w` wide at least and 3 to
/// 14 points high (a horizontal scroll bar's track and handle).
fn thin_bars(h: &Harness<'static, VramApp>, area: egui::Rect, min_w: f32) -> Vec<egui::Rect> {
    fn walk(s: &egui::Shape, clip: egui::Rect, out: &mut Vec<(egui::Rect, egui::Color32)>) {
        match s {
            egui::Shape::Vec(v) => v.iter().for_each(|s| walk(s, clip, out)),
            egui::Shape::Rect(r) => out.push((r.rect.intersect(clip), r.fill)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    for c in &h.output().shapes {
        walk(&c.shape, c.clip_rect, &mut all);
    }
    all.into_iter()
        .filter(|(r, fill)| {
            fill.a() >= 200
                && area.contains_rect(*r)
                && r.width() >= min_w
                && (3.0..=14.0).contains(&r.height())
        })
        .map(|(r, _)| r)
        .collect()
}

/// The review of the window: with the detail pane open the GPU memory columns lay beyond the
/// table's right edge, and the sideways scroll bar showed only under the pointer — no sign
/// they were there. The bar is drawn, pointer elsewhere, under the table's scrolled columns.
#[test]
fn the_sideways_scroll_bar_shows_without_the_pointer() {
    let mut h = narrow_table();
    h.hover_at(egui::pos2(5.0, 5.0));
    h.run();
    h.run();
    let pane = h.state().layout().detail_pane.expect("the pane is open");
    let pid = h.get_by_label("48213").rect();
    let user = user_header(&h, pid);
    let last_row = h
        .query_all_by_label("python3")
        .map(|n| n.rect().bottom())
        .fold(0.0, f32::max);
    // Under the last line, from the scrolled columns to the pane, above the status bar.
    let area = egui::Rect::from_min_max(
        egui::pos2(user.left() - 4.0, last_row),
        egui::pos2(pane.left() + 1.0, 800.0),
    );
    let bars = thin_bars(&h, area, 40.0);
    assert!(
        !bars.is_empty(),
        "no scroll bar drawn in {area:?} (columns hidden beyond the right edge)"
    );
}
