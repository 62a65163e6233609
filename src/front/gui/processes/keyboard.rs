//! Moving the selection with the keyboard.

use egui::Ui;

use super::grouping::Item;
use super::state::TableState;
use crate::engine::view::ProcessRow;

/// Keyboard: ↑/↓ move the selection (when no text field, popup or window has the keys); the
/// line to scroll to.
pub(super) fn keyboard_selection(
    ui: &mut Ui,
    t: &mut TableState<'_>,
    rows: &[&ProcessRow],
    items: &[Item<'_>],
) -> Option<usize> {
    // Not while a menu or a popup is open (its own ↑/↓), nor while a window such as
    // Settings has the keyboard. Esc is the detail pane's.
    let others_have_keys =
        ui.ctx().text_edit_focused() || egui::Popup::is_any_open(ui.ctx()) || t.window_open;
    if others_have_keys {
        return None;
    }
    let (down, up) = ui.input(|i| {
        (
            i.key_pressed(egui::Key::ArrowDown),
            i.key_pressed(egui::Key::ArrowUp),
        )
    });
    if !(down || up) {
        return None;
    }
    let cur = t
        .selected
        .and_then(|k| rows.iter().position(|r| r.series_key() == k));
    let next = match (cur, down) {
        (None, _) => 0,
        (Some(i), true) => (i + 1).min(rows.len().saturating_sub(1)),
        (Some(i), false) => i.saturating_sub(1),
    };
    let r = rows.get(next)?;
    if *t.selected != Some(r.series_key()) {
        // The detail pane was drawn before the table this frame: draw the
        // next one now rather than at the next sample.
        ui.ctx().request_repaint();
    }
    *t.selected = Some(r.series_key());
    let key = r.series_key();
    items
        .iter()
        .position(|i| matches!(i, Item::Row(r) if r.series_key() == key))
}
