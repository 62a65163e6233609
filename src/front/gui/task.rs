//! The window's side of [`crate::link::jobs`]: a job's repaint request from the egui context.

pub(crate) use crate::link::jobs::Task;

/// What a job calls when it ends: a redraw of the window.
pub(crate) fn repaint(ctx: &egui::Context) -> Option<crate::engine::sampler::Notify> {
    let ctx = ctx.clone();
    Some(std::sync::Arc::new(move || ctx.request_repaint()))
}
