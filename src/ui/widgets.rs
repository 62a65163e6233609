//! Small drawing helpers: the memory bar and per-process colours.

use egui::{Color32, CornerRadius, Rect, Sense, Stroke, StrokeKind, Ui};

use crate::model::ProcessKey;

/// Colour of used memory.
pub const USED: Color32 = Color32::from_rgb(76, 145, 255);
/// Colour of driver-reserved memory.
pub const RESERVED: Color32 = Color32::from_rgb(150, 110, 200);
/// Colour of the memory limit line.
pub const LIMIT: Color32 = Color32::from_rgb(230, 80, 80);
/// Colour of "stale" and errors.
pub const WARN: Color32 = Color32::from_rgb(235, 90, 70);

/// A stable colour for a process: the same in every graph, table marker and legend.
pub fn process_color(key: &ProcessKey) -> Color32 {
    // splitmix64 of the identity, then the golden ratio spreads neighbouring hashes apart.
    let mut h = u64::from(key.pid).wrapping_add((key.start_time_ms as u64).rotate_left(32));
    h = h.wrapping_add(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    let hue = ((h % 1000) as f32 / 1000.0 * 0.618_034 * 7.0).fract();
    egui::ecolor::Hsva::new(hue, 0.65, 0.9, 1.0).into()
}

/// Colour of the OOM forecast's marker on a memory bar.
pub const FORECAST: Color32 = Color32::from_rgb(240, 150, 40);

/// A horizontal bar split into used / reserved / free. `projected` (bytes used in
/// [`FORECAST_HORIZON_MIN`] minutes at the current leak rate) draws an orange band from the used
/// memory to that point, with a tick where it ends (at the bar's end when the GPU would be full).
pub fn memory_bar(
    ui: &mut Ui,
    total: u64,
    used: u64,
    reserved: u64,
    projected: Option<u64>,
    hover: &str,
) -> egui::Response {
    let height = 18.0;
    let (rect, resp) =
        ui.allocate_exact_size(egui::vec2(ui.available_width(), height), Sense::hover());
    let p = ui.painter();
    let radius = CornerRadius::same(4);
    p.rect_filled(rect, radius, ui.visuals().extreme_bg_color);
    if total > 0 {
        let w = rect.width();
        let fu = (used as f64 / total as f64).clamp(0.0, 1.0) as f32;
        let fr = (reserved as f64 / total as f64).clamp(0.0, 1.0 - f64::from(fu)) as f32;
        let reserved_rect = Rect::from_min_size(rect.min, egui::vec2(w * fr, height));
        let used_rect = Rect::from_min_size(
            egui::pos2(rect.min.x + w * fr, rect.min.y),
            egui::vec2(w * fu, height),
        );
        p.rect_filled(reserved_rect, radius, RESERVED);
        p.rect_filled(used_rect, radius, USED);
        if let Some(proj) = projected.filter(|p| *p > used) {
            let fp = (proj as f64 / total as f64).clamp(0.0, 1.0 - f64::from(fr)) as f32;
            let x0 = used_rect.max.x;
            let x1 = rect.min.x + w * (fr + fp);
            if x1 > x0 {
                let band = Rect::from_min_max(
                    egui::pos2(x0, rect.min.y + 4.0),
                    egui::pos2(x1, rect.max.y - 4.0),
                );
                p.rect_filled(band, CornerRadius::ZERO, FORECAST.gamma_multiply(0.55));
                p.line_segment(
                    [
                        egui::pos2(x1, rect.min.y - 2.0),
                        egui::pos2(x1, rect.max.y + 2.0),
                    ],
                    Stroke::new(2.0, FORECAST),
                );
            }
        }
    }
    p.rect_stroke(
        rect,
        radius,
        Stroke::new(1.0, ui.visuals().widgets.noninteractive.bg_stroke.color),
        StrokeKind::Inside,
    );
    resp.on_hover_text(hover)
}

/// The span of the forecast drawn on a memory bar, in minutes.
pub const FORECAST_HORIZON_MIN: f64 = 10.0;

/// A small coloured square, as legend marker in table rows.
pub fn color_swatch(ui: &mut Ui, color: Color32) {
    let (rect, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), Sense::hover());
    ui.painter().rect_filled(rect, CornerRadius::same(2), color);
}
