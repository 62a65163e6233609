//! The detail pane of one process: identity, command line, container, its GPU memory over its
//! whole lifetime, peak and current.

use egui::{RichText, Ui};

use super::graph::{self, GraphCache};
use super::widgets;
use crate::format::{self, Units};
use crate::model::UnixMs;
use crate::monitor::{Monitor, ProcessRow};

/// Draws the pane; returns false when the user closed it.
pub fn pane(
    ui: &mut Ui,
    m: &Monitor,
    row: &ProcessRow,
    units: Units,
    now: UnixMs,
    cache: &mut GraphCache,
) -> bool {
    let mut open = true;
    ui.horizontal(|ui| {
        widgets::color_swatch(ui, widgets::process_color(&row.key));
        ui.heading(format!("{} · PID {}", row.name, row.key.pid));
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            if ui.button("✖ Close").on_hover_text("Close (Esc)").clicked() {
                open = false;
            }
        });
    });
    if let Some(t) = row.exited_at_ms {
        ui.label(
            RichText::new(format!(
                "Exited at {} (last seen on the GPU)",
                format::date_time(t)
            ))
            .color(widgets::WARN),
        );
    }
    ui.separator();
    egui::Grid::new("detail")
        .num_columns(2)
        .spacing([12.0, 4.0])
        .show(ui, |ui| {
            let kv = |ui: &mut Ui, k: &str, v: String| {
                ui.label(RichText::new(k).weak());
                ui.label(RichText::new(v).monospace());
                ui.end_row();
            };
            kv(
                ui,
                "User",
                if row.user.is_empty() {
                    "—".into()
                } else {
                    row.user.clone()
                },
            );
            kv(ui, "GPU", row.device_index.to_string());
            let start = row.started_ms();
            kv(
                ui,
                "Started",
                format!(
                    "{} ({} ago)",
                    format::date_time(start),
                    format::duration(now - start)
                ),
            );
            kv(
                ui,
                "Container",
                row.container_id
                    .as_ref()
                    .map_or("—".into(), |c| c.chars().take(12).collect()),
            );
            kv(
                ui,
                "GPU memory now",
                format::opt_bytes(units, row.used_bytes),
            );
            kv(ui, "Peak", units.bytes(row.peak_bytes));
            kv(
                ui,
                "Δ last minute",
                row.delta_1m_bytes.map_or("—".into(), |d| units.delta(d)),
            );
        });
    ui.add_space(4.0);
    ui.label(RichText::new("Command line").weak());
    let cmd = if row.cmdline.is_empty() {
        "—".to_string()
    } else {
        row.cmdline.clone()
    };
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.set_width(ui.available_width());
        ui.add(
            egui::Label::new(RichText::new(cmd).monospace())
                .wrap()
                .selectable(true),
        );
    });
    ui.add_space(6.0);
    ui.label(RichText::new("GPU memory over its lifetime").strong());
    graph::process_graph(ui, m, row.series_key(), units, cache, &[]);
    open
}
