//! Small drawing helpers: the memory bar and per-process colours.

use egui::{Color32, CornerRadius, Rect, Sense, Stroke, StrokeKind, Ui};

/// Colour of used memory.
pub const USED: Color32 = Color32::from_rgb(76, 145, 255);
/// Colour of driver-reserved memory.
pub const RESERVED: Color32 = Color32::from_rgb(150, 110, 200);
/// Colour of the memory limit line.
pub const LIMIT: Color32 = Color32::from_rgb(230, 80, 80);
/// Colour of "stale" and errors.
pub const WARN: Color32 = Color32::from_rgb(235, 90, 70);
/// Parked processes (their GPU memory in host memory): a calm blue, not a warning.
pub const PARKED: Color32 = Color32::from_rgb(90, 160, 235);
/// PyTorch's brand orange: the badge and the allocator's reserved memory.
pub const TORCH_RESERVED: Color32 = Color32::from_rgb(238, 76, 44);
/// Memory in live tensors.
pub const TORCH_ALLOCATED: Color32 = Color32::from_rgb(60, 170, 230);
/// Free space inside split blocks (fragmentation).
pub const TORCH_SPLIT: Color32 = Color32::from_rgb(230, 180, 40);

/// Process colours on a dark background: Tableau and Okabe–Ito hues without the blue and
/// purple of the memory bar ("used", "reserved"), the red of the memory limit and the orange of
/// leak warnings, most distinct first.
const PALETTE_DARK: [Color32; 10] = [
    Color32::from_rgb(89, 161, 79),   // green
    Color32::from_rgb(237, 201, 72),  // yellow
    Color32::from_rgb(118, 183, 178), // teal
    Color32::from_rgb(255, 157, 167), // pink
    Color32::from_rgb(156, 117, 95),  // brown
    Color32::from_rgb(140, 209, 125), // light green
    Color32::from_rgb(182, 153, 45),  // olive
    Color32::from_rgb(0, 158, 115),   // bluish green
    Color32::from_rgb(186, 176, 172), // grey
    Color32::from_rgb(204, 121, 167), // reddish purple
];

/// The same hues, darker and more saturated, readable on white.
const PALETTE_LIGHT: [Color32; 10] = [
    Color32::from_rgb(46, 125, 50),
    Color32::from_rgb(176, 140, 0),
    Color32::from_rgb(0, 121, 107),
    Color32::from_rgb(194, 24, 91),
    Color32::from_rgb(121, 85, 72),
    Color32::from_rgb(104, 159, 56),
    Color32::from_rgb(130, 119, 23),
    Color32::from_rgb(0, 150, 136),
    Color32::from_rgb(97, 97, 97),
    Color32::from_rgb(158, 157, 36),
];

/// A process's colour: slot `slot` of the palette for the theme (the same in every graph, table
/// marker and legend). Slots are given per GPU in order of appearance
/// ([`crate::monitor::ProcessRow::color_slot`]), so neighbours on one GPU never share a colour
/// until more than ten run at once.
pub fn process_color(slot: u8, dark_mode: bool) -> Color32 {
    let p = if dark_mode {
        &PALETTE_DARK
    } else {
        &PALETTE_LIGHT
    };
    p[usize::from(slot) % p.len()]
}

/// Colour of the OOM forecast's marker on a memory bar.
pub const FORECAST: Color32 = Color32::from_rgb(240, 150, 40);

/// [`FORECAST`] for the theme: a darker orange on light backgrounds (4.5:1 on white).
pub fn forecast_color(dark_mode: bool) -> Color32 {
    if dark_mode {
        FORECAST
    } else {
        Color32::from_rgb(176, 88, 0)
    }
}

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

/// A small coloured square, as legend marker in table rows, outlined so that a colour close
/// to the background (the "Free" swatch) still shows.
pub fn color_swatch(ui: &mut Ui, color: Color32) {
    let (rect, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), Sense::hover());
    ui.painter().rect_filled(rect, CornerRadius::same(2), color);
    ui.painter().rect_stroke(
        rect,
        CornerRadius::same(2),
        Stroke::new(
            1.0,
            ui.visuals()
                .widgets
                .noninteractive
                .fg_stroke
                .color
                .gamma_multiply(0.5),
        ),
        StrokeKind::Inside,
    );
}
