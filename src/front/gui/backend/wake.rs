//! How soon the engine's news wakes the window: a new sample draws one frame, at most
//! [`MAX_DATA_FRAMES_PER_S`] a second, and not while a recorded session covers the live data
//! (replies awaited still do).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How soon the window draws after a new sample: at once, and one frame (a non-zero delay,
/// because egui answers a zero-delay request with two frames).
pub const NEW_DATA_FRAME: Duration = Duration::from_millis(1);

/// The most frames a second that new samples cause (the eye needs no more for a graph of
/// minutes; 10 samples a second would otherwise be 10 full redraws).
pub(crate) const MAX_DATA_FRAMES_PER_S: u32 = 4;

/// How long after a sample arriving at `now` its frame is drawn, given when the last one was
/// asked for (`last`, updated): at once, or at the next slot of [`MAX_DATA_FRAMES_PER_S`].
pub(crate) fn data_frame_delay(
    last: &mut Option<std::time::Instant>,
    now: std::time::Instant,
) -> Duration {
    let gap = Duration::from_secs(1) / MAX_DATA_FRAMES_PER_S;
    match *last {
        // A frame is already due then: it draws this sample too.
        Some(l) if l > now => l - now,
        Some(l) if now - l < gap => {
            *last = Some(l + gap);
            l + gap - now
        }
        _ => {
            *last = Some(now);
            NEW_DATA_FRAME
        }
    }
}

/// What lets the engine's news (a sample, a reply) wake the window, for every link.
#[derive(Debug, Default)]
pub(crate) struct WakeGate {
    /// A recorded session is on screen instead of the live data.
    covered: AtomicBool,
    /// Commands sent whose replies have not been taken yet.
    awaiting: AtomicUsize,
}

impl WakeGate {
    /// Whether news wakes the window now: always while the live data is shown, else only
    /// while a reply is awaited.
    pub(crate) fn wakes(&self) -> bool {
        !self.covered.load(Ordering::Relaxed) || self.awaiting.load(Ordering::Relaxed) > 0
    }

    /// A command was sent: its reply is awaited.
    pub(super) fn sent(&self) {
        self.awaiting.fetch_add(1, Ordering::Relaxed);
    }

    /// No reply is awaited any more (the link sent to went into the background).
    pub(super) fn forget_awaited(&self) {
        self.awaiting.store(0, Ordering::Relaxed);
    }

    /// Tells whether a recorded session covers the live data.
    pub(super) fn cover(&self, covered: bool) {
        self.covered.store(covered, Ordering::Relaxed);
    }

    /// `n` replies were taken.
    pub(super) fn answered(&self, n: usize) {
        if n > 0 {
            let _ = self
                .awaiting
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |a| {
                    Some(a.saturating_sub(n))
                });
        }
    }
}

/// A wake-up for a new link's samples, and its switch: a link in the background (the switch
/// off) does not wake the window, nor does one covered by a session (`gate`).
pub(super) fn notifier(
    repaint: Option<egui::Context>,
    gate: Arc<WakeGate>,
) -> (Arc<AtomicBool>, crate::engine::sampler::Notify) {
    let shown = Arc::new(AtomicBool::new(true));
    let on = shown.clone();
    let last = std::sync::Mutex::new(None::<std::time::Instant>);
    let notify: crate::engine::sampler::Notify = Arc::new(move || {
        if let (Some(c), true) = (&repaint, on.load(Ordering::Relaxed) && gate.wakes()) {
            // Not `request_repaint()`: egui answers each of those with two frames; a new
            // sample needs one. At most [`MAX_DATA_FRAMES_PER_S`] of them a second: a
            // sample arriving sooner is drawn with the next one or at the next slot.
            let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
            c.request_repaint_after(data_frame_delay(&mut last, std::time::Instant::now()));
        }
    });
    (shown, notify)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten samples a second ask for at most four frames a second, each sample drawn within
    /// a quarter of a second.
    #[test]
    fn new_samples_ask_for_at_most_four_frames_a_second() {
        let t0 = std::time::Instant::now();
        let mut last = None;
        let mut frames: Vec<std::time::Instant> = Vec::new();
        for i in 0..100u32 {
            let now = t0 + Duration::from_millis(100) * i;
            let at = now + data_frame_delay(&mut last, now);
            assert!(at - now <= Duration::from_millis(250), "sample {i} waits");
            if frames.last().is_none_or(|f| *f != at) {
                frames.push(at);
            }
        }
        for w in frames.windows(2) {
            assert!(
                w[1] - w[0] >= Duration::from_millis(249),
                "{:?}",
                w[1] - w[0]
            );
        }
        assert!(frames.len() <= 41, "{} frames in 10 s", frames.len());
    }
}
