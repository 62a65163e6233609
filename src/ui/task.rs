//! Work the UI hands to a background thread (opening a session, exporting, listing files, file
//! dialogs), with progress and cancellation, so the UI thread never blocks.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Progress and cancellation shared with the worker.
#[derive(Debug, Default)]
pub struct Progress {
    fraction_bits: AtomicU32,
    cancel: AtomicBool,
}

impl Progress {
    /// Sets the done fraction (0..=1); returns false when the user cancelled.
    pub fn set(&self, f: f32) -> bool {
        self.fraction_bits
            .store(f.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
        !self.cancel.load(Ordering::Relaxed)
    }

    /// The done fraction.
    pub fn fraction(&self) -> f32 {
        f32::from_bits(self.fraction_bits.load(Ordering::Relaxed))
    }

    /// Asks the worker to stop.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// Whether cancellation was asked for.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// A running background job producing a `T`.
pub struct Task<T> {
    result: Arc<Mutex<Option<T>>>,
    /// Its progress.
    pub progress: Arc<Progress>,
    /// What it is doing, for the UI.
    pub label: String,
}

impl<T: Send + 'static> Task<T> {
    /// Runs `work` on a named thread; `repaint` (if any) is asked to redraw when it ends.
    pub fn spawn(
        label: impl Into<String>,
        repaint: Option<egui::Context>,
        work: impl FnOnce(&Progress) -> T + Send + 'static,
    ) -> Self {
        let result = Arc::new(Mutex::new(None));
        let progress = Arc::new(Progress::default());
        let (r, p) = (result.clone(), progress.clone());
        let label = label.into();
        let spawned = std::thread::Builder::new()
            .name(format!(
                "vramwarden-{}",
                label
                    .split_whitespace()
                    .next()
                    .unwrap_or("task")
                    .to_lowercase()
            ))
            .spawn(move || {
                let out = work(&p);
                if let Ok(mut slot) = r.lock() {
                    *slot = Some(out);
                }
                if let Some(c) = repaint {
                    c.request_repaint();
                }
            });
        if spawned.is_err() {
            progress.cancel();
        }
        Self {
            result,
            progress,
            label,
        }
    }

    /// The result, once (None while running).
    pub fn take(&self) -> Option<T> {
        self.result.lock().ok().and_then(|mut s| s.take())
    }
}
