//! A resizable side panel's width given back after the window was too small for it: egui
//! keeps (and persists) the width it clamped the panel to, so a window shrunk once and grown
//! again kept a narrow column of GPU cards for good, across restarts. The width the panel had
//! before a clamp is remembered here and restored, as far as the window allows, once there is
//! room; a width the user drags the panel to is theirs and is never changed.

use egui::{Id, PanelState, Ui};

/// What one panel had before the window clamped it.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct KeptWidth {
    /// The width before the clamp, while the panel is narrower than it for want of room.
    wanted: Option<f32>,
    /// The most the panel could take in the frame before (its clamp then).
    last_max: f32,
}

impl KeptWidth {
    /// Before the panel `salt` of `ui` is shown with `max` as its largest width: remembers
    /// the width a clamp is about to take away, or gives it back where there is room again.
    pub(super) fn before_show(&mut self, ui: &Ui, salt: &str, max: f32) {
        let id: Id = ui.scope_id().with(salt);
        let last_max = std::mem::replace(&mut self.last_max, max);
        let Some(mut state) = PanelState::load(ui.ctx(), id) else {
            return;
        };
        let w = state.outer_rect.width();
        if w > max + 0.5 {
            // egui clamps it to `max` in this frame and keeps that.
            self.wanted = Some(self.wanted.map_or(w, |x| x.max(w)));
            return;
        }
        let Some(want) = self.wanted else {
            return;
        };
        // egui rounds the panel to whole pixels: a zoomed-out window's clamp can be off by
        // more than half a point.
        let slack = 0.5 + 1.0 / ui.ctx().pixels_per_point();
        if w + slack < last_max.min(want) {
            // Narrower than the clamp left it: the user dragged it there.
            self.wanted = None;
        } else if max > w + slack {
            let to = want.min(max);
            state.outer_rect.set_width(to);
            ui.ctx().data_mut(|d| d.insert_persisted(id, state));
            if to >= want {
                self.wanted = None;
            }
        }
    }
}
