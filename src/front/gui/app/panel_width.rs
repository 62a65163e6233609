//! A resizable side panel's width given back after the window was too small for it: egui
//! keeps (and persists) the width it clamped the panel to, so a window shrunk once and grown
//! again kept a narrow column of GPU cards for good, across restarts. The width the panel had
//! before a clamp is remembered here (persisted beside egui's own state, so a window closed
//! while small gets it back at its next start) and restored, as far as the window allows, once
//! there is room; a width the user drags the panel to is theirs and is never changed.

use egui::{Context, Id, PanelState, Ui};

/// The largest width a panel could take in the frame before (its clamp then).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct KeptWidth {
    last_max: f32,
}

impl KeptWidth {
    /// Before the panel `salt` of `ui` is shown with `max` as its largest width: remembers
    /// the width a clamp is about to take away, or gives it back where there is room again.
    pub(super) fn before_show(&mut self, ui: &Ui, salt: &str, max: f32) {
        let id: Id = ui.scope_id().with(salt);
        let last_max = std::mem::replace(&mut self.last_max, max);
        let ctx = ui.ctx();
        let Some(mut state) = PanelState::load(ctx, id) else {
            return;
        };
        let w = state.outer_rect.width();
        let wanted = wanted(ctx, id);
        if w > max + 0.5 {
            // egui clamps it to `max` in this frame and keeps that.
            set_wanted(ctx, id, Some(wanted.map_or(w, |x| x.max(w))));
            return;
        }
        let Some(want) = wanted else {
            return;
        };
        // egui rounds the panel to whole pixels: a zoomed-out window's clamp can be off by
        // more than half a point. (After a start, `last_max` is 0: no drag is read into it.)
        let slack = 0.5 + 1.0 / ctx.pixels_per_point();
        if w + slack < last_max.min(want) {
            // Narrower than the clamp left it: the user dragged it there.
            set_wanted(ctx, id, None);
        } else if max > w + slack {
            let to = want.min(max);
            state.outer_rect.set_width(to);
            ctx.data_mut(|d| d.insert_persisted(id, state));
            if to >= want {
                set_wanted(ctx, id, None);
            }
        }
    }
}

/// The width panel `id` had before a clamp, while it is narrower for want of room.
fn wanted(ctx: &Context, id: Id) -> Option<f32> {
    ctx.data_mut(|d| d.get_persisted::<f32>(id.with("width before a clamp")))
}

fn set_wanted(ctx: &Context, id: Id, w: Option<f32>) {
    let key = id.with("width before a clamp");
    ctx.data_mut(|d| match w {
        Some(w) => d.insert_persisted(key, w),
        None => d.remove::<f32>(key),
    });
}
