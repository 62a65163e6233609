//! The graph's toolbar: time window presets and view switches.

use egui::Ui;

use super::cache::GraphCache;
use crate::front::gui::ui_state::{UiState, Window};
use crate::front::gui::{plot_table, widgets};

/// The line above the GPU graph: its title, time presets, stacking, metrics, fit, follow
/// live and how to move it. Wraps on a narrow window (or at 200 %) rather than widening the
/// panel past the screen.
pub(super) fn toolbar(ui: &mut Ui, device: u32, state: &mut UiState, cache: &mut GraphCache) {
    ui.horizontal_wrapped(|ui| {
        ui.label(egui::RichText::new(format!("GPU {device} memory")).strong());
        ui.separator();
        for w in Window::ALL {
            if ui
                .selectable_label(state.window == w && cache.free_range.is_none(), w.label())
                .clicked()
            {
                state.window = w;
                cache.free_range = None;
            }
        }
        ui.separator();
        ui.checkbox(&mut state.stacked, "Stack by process");
        ui.checkbox(&mut state.show_metrics, "GPU metrics")
            .on_hover_text("Utilisation, temperature, power and its cap, clocks and fan under the memory graph");
        ui.checkbox(&mut state.fit_y, "Fit to data")
            .on_hover_text("Scale the memory axis to the data shown instead of the GPU's size: small growth becomes visible (a stack keeps its foot at 0)");
        plot_table::toggle(ui, &mut cache.as_table);
        let follow = if cache.in_session {
            "▶ Back to the slider"
        } else {
            "▶ Follow live"
        };
        if cache.free_range.is_some() && ui.button(follow).clicked() {
            cache.free_range = None;
        }
        let (short, full) = if cache.in_session {
            (
                "wheel: zoom · drag: pan · double-click: back to the slider",
                "wheel, +/−: zoom · drag, Shift+Left/Right: pan · double-click, End: back to the slider",
            )
        } else {
            (
                "wheel: zoom · drag: pan · double-click: follow live",
                "wheel, +/−: zoom · drag, Shift+Left/Right: pan · double-click, End: follow live",
            )
        };
        // One line: cut with "…" where the row has no room (it wrapped onto a line of its
        // own under the controls); the keys on hover.
        ui.add(egui::Label::new(widgets::hint(short)).truncate())
            .on_hover_text(full);
    });
}
