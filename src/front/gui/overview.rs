//! One card per GPU: name, memory bar (used / reserved / free), utilisation, temperature, power.

use egui::{RichText, Ui};

use super::widgets;
use crate::model::format::{opt_bytes, Units};
use crate::model::Snapshot;

fn pct(part: u64, total: u64) -> String {
    if total == 0 {
        return String::new();
    }
    format!("{:.1} %", 100.0 * part as f64 / total as f64)
}

/// The forecast on the memory bar: bytes used after [`widgets::FORECAST_HORIZON_MIN`] at the
/// rate the GPU's leaks grow (its free memory over its time to full).
fn projected_used(d: &crate::model::DeviceSample) -> Option<u64> {
    let s = d.time_to_full_s.filter(|s| *s > 0.0)?;
    let rate = d.memory_free_bytes.unwrap_or(0) as f64 / s; // bytes per second
    Some(
        d.memory_used_bytes
            .unwrap_or(0)
            .saturating_add((rate * widgets::FORECAST_HORIZON_MIN * 60.0) as u64),
    )
}

/// A compact card's figures, each apart from the next: "140.4 / 140.4 GiB · 100 % · 84 °C".
fn compact_figures(d: &crate::model::DeviceSample, units: Units) -> String {
    let util = d
        .utilization_gpu_pct
        .map_or("—".into(), |u| format!("{u} %"));
    let temp = d.temperature_c.map_or("—".into(), |t| format!("{t} °C"));
    format!(
        "{} / {} · {util} · {temp}",
        opt_bytes(units, d.memory_used_bytes),
        opt_bytes(units, d.memory_total_bytes)
    )
}

/// More GPUs than this get the compact overview: one row per GPU.
const COMPACT_ABOVE: usize = 3;

/// The overview of many GPUs: a row each — index, memory bar, used / total, utilisation,
/// temperature, the forecast when a leak grows. Clicking one selects it for the graph.
fn compact(ui: &mut Ui, snap: &Snapshot, units: Units, alerted: &[u32], selected: &mut u32) {
    ui.label(RichText::new(format!("{} GPUs", snap.devices.len())).strong());
    for d in &snap.devices {
        // One unit for the whole card (Auto: from the GPU's size), never MiB beside GiB.
        let units = units.for_largest(d.memory_total_bytes.unwrap_or(0));
        let is_sel = *selected == d.index;
        let total = d.memory_total_bytes.unwrap_or(0);
        let used = d.memory_used_bytes.unwrap_or(0);
        let reserved = d.memory_reserved_bytes.unwrap_or(0);
        let frame = card_frame(ui, is_sel, 6);
        let resp = clickable_card(ui, frame, d.index, |ui| {
            ui.set_width(ui.available_width());
            ui.horizontal_wrapped(|ui| {
                ui.label(RichText::new(format!("GPU {}", d.index)).strong());
                ui.add(egui::Label::new(compact_figures(d, units)).wrap());
            });
            let projected = projected_used(d);
            widgets::memory_bar(
                ui,
                total,
                used,
                reserved,
                projected,
                &format!(
                    "{}: used {} ({})",
                    d.name,
                    units.bytes(used),
                    pct(used, total)
                ),
            );
            parked_line(ui, snap, d.index, units);
            if let Some(s) = d.time_to_full_s {
                let text = format!(
                    "full in ~{}",
                    crate::model::format::duration((s * 1000.0) as i64)
                );
                forecast_line(ui, text, alerted.contains(&d.index));
            }
        });
        if resp.clicked() {
            *selected = d.index;
        }
    }
}

/// A card's forecast line: "⚠ …" in the forecast's colour while `alerted`, else quiet.
fn forecast_line(ui: &mut Ui, text: String, alerted: bool) -> egui::Response {
    let text = if alerted {
        RichText::new(format!("⚠ {text}"))
            .color(widgets::forecast_color(ui.visuals().dark_mode))
            .strong()
    } else {
        RichText::new(text).weak()
    };
    ui.label(text)
}

/// Draws the cards (the compact overview for more than [`COMPACT_ABOVE`] GPUs); clicking one
/// selects its GPU for the graph.
/// A GPU's forecast is a warning (⚠, in the forecast's colour) only while its alert is in
/// force (`alerted`: the GPUs whose forecast is within the warning time, as the banners
/// above the cards say); a forecast hours away is a plain, quiet line.
pub(crate) fn cards(
    ui: &mut Ui,
    snap: &Snapshot,
    units: Units,
    alerted: &[u32],
    selected: &mut u32,
) {
    if snap.devices.len() > COMPACT_ABOVE {
        compact(ui, snap, units, alerted, selected);
        return;
    }
    for d in &snap.devices {
        card(ui, snap, d, units, alerted.contains(&d.index), selected);
        ui.add_space(6.0);
    }
}

/// One GPU's card: name, memory bar, used / reserved / free, readings, processes.
fn card(
    ui: &mut Ui,
    snap: &Snapshot,
    d: &crate::model::DeviceSample,
    units: Units,
    alerted: bool,
    selected: &mut u32,
) {
    // One unit for the whole card (Auto: from the GPU's size), never MiB beside GiB.
    let units = units.for_largest(d.memory_total_bytes.unwrap_or(0));
    let is_sel = *selected == d.index;
    let frame = card_frame(ui, is_sel, 10);
    let resp = clickable_card(ui, frame, d.index, |ui| {
        ui.set_width(ui.available_width());
        ui.horizontal(|ui| {
            ui.label(
                RichText::new(format!("GPU {}", d.index))
                    .strong()
                    .size(15.0),
            );
            ui.label(RichText::new(&d.name).size(15.0));
        });
        card_bar(ui, d, units);
        if let Some(s) = d.time_to_full_s {
            let text = format!(
                "GPU {} full in ~{}",
                d.index,
                crate::model::format::duration((s * 1000.0) as i64)
            );
            forecast_line(ui, text, alerted).on_hover_text(
                "From the growth rate of the leaks on this GPU and its free memory now",
            );
        }
        card_memory(ui, d, units);
        card_readings(ui, d);
        let n = snap
            .processes
            .iter()
            .filter(|p| p.device_index == d.index)
            .count();
        ui.label(
            RichText::new(match n {
                0 => format!("No processes on GPU {}", d.index),
                1 => "1 process".to_string(),
                n => format!("{n} processes"),
            })
            .weak(),
        );
        parked_line(ui, snap, d.index, units);
    });
    if resp.clicked() {
        *selected = d.index;
    }
}

/// The card's memory bar with its figures (and the forecast) on hover.
fn card_bar(ui: &mut Ui, d: &crate::model::DeviceSample, units: Units) {
    let total = d.memory_total_bytes.unwrap_or(0);
    let used = d.memory_used_bytes.unwrap_or(0);
    let reserved = d.memory_reserved_bytes.unwrap_or(0);
    let free = d.memory_free_bytes.unwrap_or(0);
    let hover = format!(
        "used {} ({})\nreserved by driver {} ({})\nfree {} ({})\ntotal {}",
        units.bytes(used),
        pct(used, total),
        units.bytes(reserved),
        pct(reserved, total),
        units.bytes(free),
        pct(free, total),
        units.bytes(total)
    );
    let projected = projected_used(d);
    let hover = match d.time_to_full_s {
        Some(s) => format!(
            "{hover}\n\nAt the rate its leaks grow, GPU {} is full in ~{}.\nThe orange band is the growth over the next {} minutes.",
            d.index,
            crate::model::format::duration((s * 1000.0) as i64),
            widgets::FORECAST_HORIZON_MIN
        ),
        None => hover,
    };
    widgets::memory_bar(ui, total, used, reserved, projected, &hover);
}

/// Used, reserved, free and total, each with its swatch and share.
fn card_memory(ui: &mut Ui, d: &crate::model::DeviceSample, units: Units) {
    let total = d.memory_total_bytes.unwrap_or(0);
    egui::Grid::new(("card", d.index))
        .num_columns(3)
        .spacing([10.0, 2.0])
        .show(ui, |ui| {
            let row = |ui: &mut Ui, color: egui::Color32, label: &str, v: Option<u64>| {
                ui.horizontal(|ui| {
                    widgets::color_swatch(ui, color);
                    ui.label(label);
                });
                ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                    ui.label(RichText::new(opt_bytes(units, v)).monospace());
                });
                ui.label(
                    RichText::new(v.map_or(String::new(), |v| pct(v, total)))
                        .monospace()
                        .weak(),
                );
                ui.end_row();
            };
            row(ui, widgets::USED, "Used", d.memory_used_bytes);
            row(ui, widgets::RESERVED, "Reserved", d.memory_reserved_bytes);
            row(
                ui,
                ui.visuals().extreme_bg_color,
                "Free",
                d.memory_free_bytes,
            );
            ui.label("Total");
            ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                ui.label(RichText::new(opt_bytes(units, d.memory_total_bytes)).monospace());
            });
            ui.label("");
            ui.end_row();
        });
}

/// Utilisation, temperature, power, clocks, fan: each reading one unbreakable piece (a
/// narrow card moves a whole reading to the next line, never its unit alone).
fn card_readings(ui: &mut Ui, d: &crate::model::DeviceSample) {
    ui.horizontal_wrapped(|ui| {
        let util = d
            .utilization_gpu_pct
            .map_or("—".into(), |u| format!("{u} %"));
        let temp = d.temperature_c.map_or("—".into(), |t| format!("{t} °C"));
        let power = match (d.power_w, d.power_limit_w) {
            (Some(p), Some(cap)) => format!("{p:.0} / {cap:.0} W"),
            (Some(p), None) => format!("{p:.0} W"),
            (None, _) => "—".into(),
        };
        ui.add(egui::Label::new(format!("Util {util}")).extend())
            .on_hover_text(
                "Share of the last sample period in which a kernel ran on this GPU (the \
                 driver's figure, as nvidia-smi shows it): not how much of the GPU it used. \
                 Each process's share is the table's GPU % column.",
            );
        ui.separator();
        ui.add(egui::Label::new(format!("Temp {temp}")).extend());
        ui.separator();
        ui.add(egui::Label::new(format!("Power {power}")).extend())
            .on_hover_text("Board power draw / the power cap the driver enforces");
    });
    if d.sm_clock_mhz.is_some() || d.fan_pct.is_some() {
        ui.horizontal_wrapped(|ui| {
            let mhz = |c: Option<u32>| c.map_or("—".into(), |c| format!("{c} MHz"));
            ui.add(
                egui::Label::new(
                    RichText::new(format!(
                        "SM {} · Mem {}",
                        mhz(d.sm_clock_mhz),
                        mhz(d.mem_clock_mhz)
                    ))
                    .weak(),
                )
                .extend(),
            )
            .on_hover_text("Current SM and memory clocks");
            if let Some(f) = d.fan_pct {
                ui.separator();
                ui.add(egui::Label::new(RichText::new(format!("Fan {f} %")).weak()).extend());
            }
        });
    }
}

/// "⏸ 2 parked (21.2 GiB in host memory)" on a card, when processes of the GPU are parked
/// (or being parked or resumed): seen where a user looks first.
fn parked_line(ui: &mut Ui, snap: &Snapshot, gpu: u32, units: Units) {
    let parked: Vec<&crate::model::ParkInfo> = snap
        .processes
        .iter()
        .filter(|p| p.device_index == gpu)
        .filter_map(|p| p.parked.as_ref())
        .collect();
    if parked.is_empty() {
        return;
    }
    let bytes: u64 = parked.iter().filter_map(|p| p.bytes).sum();
    let text = if bytes > 0 {
        format!(
            "⏸ {} parked ({} in host memory)",
            parked.len(),
            units.bytes(bytes)
        )
    } else {
        format!("⏸ {} parked", parked.len())
    };
    ui.label(RichText::new(text).color(widgets::parked_color(ui.visuals().dark_mode)))
        .on_hover_text(
            parked
                .iter()
                .map(|p| p.describe())
                .collect::<Vec<_>>()
                .join("\n"),
        );
}

/// A GPU card as one widget: clickable and focusable (Tab reaches it, Enter or Space picks
/// it), with a focus ring and a name for screen readers. (Making a frame's response clickable
/// afterwards took the keyboard focus and dropped it, so Tab never got past the cards.)
fn clickable_card(
    ui: &mut Ui,
    frame: egui::Frame,
    gpu: u32,
    add: impl FnOnce(&mut Ui),
) -> egui::Response {
    let resp = ui
        .scope_builder(egui::UiBuilder::new().sense(egui::Sense::click()), |ui| {
            // Its text is not selectable, so a click on it (most of the card) selects the GPU
            // rather than starting a text selection.
            ui.style_mut().interaction.selectable_labels = false;
            frame.show(ui, add);
        })
        .response;
    resp.widget_info(|| {
        egui::WidgetInfo::labeled(
            egui::Role::Button,
            true,
            format!("Show GPU {gpu} in the graph"),
        )
    });
    // Its keyboard focus is shown by the window's focus ring (app.rs), outside the frame and
    // in the text colour: never mistaken for the selected card's blue outline.
    resp
}

/// A banner per GPU forecast full within the warning time (the OOM forecast alerts), naming
/// the processes whose growth drives it. Returns the GPU whose banner was clicked (the window
/// then shows it and selects its fastest grower).
pub(crate) fn forecast_banners(
    ui: &mut Ui,
    alerts: &[crate::detect::forecast_alert::ForecastAlert],
) -> Option<u32> {
    let mut clicked = None;
    for a in alerts {
        let color = widgets::forecast_color(ui.visuals().dark_mode);
        let frame = egui::Frame::new()
            .fill(color.gamma_multiply(0.25))
            .inner_margin(6.0)
            .corner_radius(4.0)
            .show(ui, |ui| {
                ui.set_width(ui.available_width());
                ui.add(
                    egui::Label::new(
                        RichText::new(format!("⚠ {}", a.sentence()))
                            .strong()
                            .color(color),
                    )
                    .selectable(false)
                    .sense(egui::Sense::click()),
                )
            });
        let resp = frame
            .response
            .interact(egui::Sense::click())
            .on_hover_cursor(egui::CursorIcon::PointingHand)
            .on_hover_text(format!(
                "Raised at {}: at the rate its processes grow, this GPU runs out of memory within the warning time (Settings, Leaks: the forecast warning).\nClick: show this GPU and select the process growing fastest.",
                crate::model::format::clock(a.since_ms)
            ));
        if resp.clicked() || frame.inner.clicked() {
            clicked = Some(a.device_index);
        }
    }
    clicked
}

/// A GPU card's frame: `margin` inside, outlined in the selection colour when selected.
fn card_frame(ui: &Ui, selected: bool, margin: i8) -> egui::Frame {
    egui::Frame::group(ui.style())
        .inner_margin(egui::Margin::same(margin))
        .stroke(if selected {
            egui::Stroke::new(2.0, ui.visuals().selection.stroke.color)
        } else {
            ui.visuals().widgets.noninteractive.bg_stroke
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact card's figures stay apart ("140.4 / 140.4 GiB · 100 % · 84 °C", never
    /// "140.4 GiB100 %").
    #[test]
    fn compact_figures_are_separated() {
        let gib = crate::model::GIB;
        let d = crate::model::DeviceSample {
            memory_used_bytes: Some(140 * gib + 400 * crate::model::MIB),
            memory_total_bytes: Some(140 * gib + 400 * crate::model::MIB),
            utilization_gpu_pct: Some(100),
            temperature_c: Some(84),
            ..Default::default()
        };
        assert_eq!(
            compact_figures(&d, Units::GiB),
            "140.4 GiB / 140.4 GiB · 100 % · 84 °C"
        );
        let none = crate::model::DeviceSample::default();
        assert_eq!(compact_figures(&none, Units::GiB), "— / — · — · —");
    }
}
