//! Frames are drawn when what is shown changes, not because the engine sampled.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Runs the window for `ms` as eframe's event loop does — a frame when the last one's
/// requested delay has passed or when something (a new sample) asks for one sooner — and
/// returns how many frames were drawn.
fn frames_during(h: &mut Harness<'static, VramApp>, ms: u64) -> usize {
    let woken = Arc::new(AtomicUsize::new(0));
    let w = woken.clone();
    h.ctx.set_request_repaint_callback(move |_| {
        w.fetch_add(1, Ordering::SeqCst);
    });
    let due_after = |h: &Harness<'static, VramApp>| {
        h.output()
            .viewport_output
            .get(&egui::ViewportId::ROOT)
            .map_or(Duration::MAX, |v| v.repaint_delay)
    };
    let start = Instant::now();
    let (mut last, mut seen, mut drawn) = (Instant::now(), 0, 0);
    let mut due = due_after(h);
    while start.elapsed() < Duration::from_millis(ms) {
        std::thread::sleep(Duration::from_millis(5));
        let n = woken.load(Ordering::SeqCst);
        if n > seen || last.elapsed() >= due {
            seen = n;
            h.step();
            drawn += 1;
            last = Instant::now();
            due = due_after(h);
        }
    }
    drawn
}

/// Major 3 of issue 40: a session opened in a window whose engine goes on sampling (File →
/// Open in a running window, `vramwarden --demo SESSION`) draws no frame while nothing on
/// screen changes; back to live, the samples are drawn again.
#[test]
fn a_session_opened_in_a_running_window_draws_no_frame_while_still() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo_session(&path, 300);
    let mut h = live_demo_window(Duration::from_millis(100));
    // Live, ten samples a second wake it (at most four frames a second).
    let live = frames_during(&mut h, 1500);
    assert!(live >= 3, "live samples are drawn: {live} frames in 1.5 s");

    h.state_mut()
        .show_session(vramwarden::session::reader::SessionData::open(&path).expect("open"));
    h.step();
    h.step();
    h.get_by_label("SESSION · read-only");
    // The frame a sample asked for just before the session came up may still be drawn.
    let settling = frames_during(&mut h, 400);
    assert!(settling <= 2, "{settling} frames while settling");
    let still = frames_during(&mut h, 2000);
    assert_eq!(still, 0, "a still session drew {still} frames in 2 s");

    h.get_by_label("Back to live").click();
    h.step();
    h.step();
    assert!(h.query_by_label("SESSION · read-only").is_none());
    let again = frames_during(&mut h, 1500);
    assert!(again >= 3, "back to live: {again} frames in 1.5 s");
}
