//! A park asked from the window through the real engine: the row says "in progress…" once the
//! engine accepted it, then the final outcome from the park thread under the same command id
//! (here the driver's no: no `libcuda`, or no CUDA context in `sleep`), never "✔ done" for a
//! park that was merely asked.

use super::*;

#[test]
fn a_park_from_the_window_shows_its_final_outcome_in_the_row_never_done() {
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    // Live, its facts from /proc, so the park reaches the park thread.
    let mut h = window_with_a_real_process(pid);
    let label = pid.to_string();
    h.get_by_label(&label).click();
    h.run();
    h.get_by_label("Park").click();
    h.run();
    assert!(
        h.get_all_by_role(egui::accesskit::Role::Dialog)
            .filter_map(|n| egui_kittest::kittest::NodeT::accesskit_node(&n).label())
            .any(|q| q.starts_with("Park: move its 2.0 GiB to host memory")),
        "the park's dialog"
    );
    let buttons = h.get_all_by_label("Park").collect::<Vec<_>>();
    buttons.last().expect("modal button").click();
    h.run();
    let is_final = |h: &Harness<'static, VramApp>| {
        h.query_by_label_contains("✖ failed: the park of sleep (PID")
            .or_else(|| h.query_by_label_contains("✖ skipped: the park of sleep (PID"))
            .is_some()
    };
    let t = Instant::now();
    while !is_final(&h) {
        assert!(
            h.query_by_label("✔ done").is_none(),
            "a park shown done before its end"
        );
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no final outcome shown"
        );
        std::thread::sleep(Duration::from_millis(20));
        h.run();
    }
    assert!(h.query_by_label("✔ done").is_none());
    assert!(h.query_by_label("in progress…").is_none(), "it ended");
    let _ = child.kill();
    let _ = child.wait();
}
