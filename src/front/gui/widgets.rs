//! Small drawing helpers: the memory bar and per-process colours.

use egui::{Color32, CornerRadius, Rect, Sense, Stroke, StrokeKind, Ui};

/// Colour of used memory.
pub(crate) const USED: Color32 = Color32::from_rgb(76, 145, 255);
/// Colour of driver-reserved memory.
pub(crate) const RESERVED: Color32 = Color32::from_rgb(150, 110, 200);
/// Colour of the memory limit line.
pub(crate) const LIMIT: Color32 = Color32::from_rgb(230, 80, 80);
/// Colour of "stale" and errors on a dark background ([`warn`] picks the theme's).
pub(crate) const WARN: Color32 = Color32::from_rgb(235, 90, 70);
/// [`WARN`] on a light background: darker, for a contrast of 4.5:1 at least.
const WARN_LIGHT: Color32 = Color32::from_rgb(180, 40, 20);

/// A wrapped label whose `backticked` parts are shown as code (monospace, on the code
/// background), not with their backticks: one label, read whole by a screen reader.
pub(crate) fn label_with_code(ui: &mut Ui, text: &str) -> egui::Response {
    let parts = text.split('`').enumerate().map(|(i, part)| {
        if i % 2 == 1 {
            egui::RichText::new(part).code()
        } else {
            egui::RichText::new(part)
        }
    });
    let job = rich_job(ui, parts);
    ui.add(egui::Label::new(job).wrap())
}

/// One text of `parts`, each in its own style, on one line's centre (a label of mixed styles).
pub(crate) fn rich_job(
    ui: &Ui,
    parts: impl IntoIterator<Item = egui::RichText>,
) -> egui::text::LayoutJob {
    let mut job = egui::text::LayoutJob::default();
    for part in parts {
        part.append_to(
            &mut job,
            ui.style(),
            egui::FontSelection::Default,
            egui::Align::Center,
        );
    }
    job
}

/// A button for what cannot be undone (a signal): filled in the theme's warning colour, its
/// words dark on the dark theme's red and white on the light theme's, 4.5:1 at least either
/// way (red words on a grey button were 3.7:1 on the dark theme).
pub(crate) fn danger_button<'a>(ui: &Ui, text: &str) -> egui::Button<'a> {
    let dark = ui.visuals().dark_mode;
    let words = if dark {
        Color32::from_rgb(20, 20, 20)
    } else {
        Color32::WHITE
    };
    egui::Button::new(egui::RichText::new(text).color(words).strong()).fill(warn_for(dark))
}

/// The warning colour for `ui`'s theme.
pub(crate) fn warn(ui: &Ui) -> Color32 {
    warn_for(ui.visuals().dark_mode)
}

/// The warning colour on a dark or a light background.
fn warn_for(dark_mode: bool) -> Color32 {
    if dark_mode {
        WARN
    } else {
        WARN_LIGHT
    }
}

/// An outcome's colour in the Activity tab (and next to a table row), readable on either
/// theme.
pub(crate) fn outcome_color(o: crate::model::outcome::Outcome, dark: bool) -> Color32 {
    use crate::model::outcome::Outcome;
    match (o, dark) {
        (Outcome::Acted, true) => Color32::from_rgb(90, 200, 120),
        (Outcome::Acted, false) => Color32::from_rgb(20, 120, 50),
        (Outcome::WouldAct, true) => Color32::from_rgb(120, 170, 255),
        (Outcome::WouldAct, false) => Color32::from_rgb(30, 90, 190),
        (Outcome::Failed, _) => warn_for(dark),
        (Outcome::Skipped, true) => Color32::from_rgb(200, 170, 60),
        (Outcome::Skipped, false) => Color32::from_rgb(130, 95, 0),
    }
}

/// A top, bottom or side panel's frame, unfilled: the window is cleared to the panels'
/// colour ([`VramApp`](crate::front::gui::VramApp)'s `clear_color`), so their fills painted
/// it again. A software rasterizer (Mesa's llvmpipe, on a VM or a remote desktop) pays for
/// every pixel filled: the panels' fills were two thirds of a frame's pixels at 1280 × 800.
pub(crate) fn panel_frame(style: &egui::Style) -> egui::Frame {
    egui::Frame::side_top_panel(style).fill(Color32::TRANSPARENT)
}

/// The central panel's frame, unfilled (see [`panel_frame`]).
pub(crate) fn central_frame(style: &egui::Style) -> egui::Frame {
    egui::Frame::central_panel(style).fill(Color32::TRANSPARENT)
}

/// Text colours readable at 4.5:1 on either theme (egui's weak text is 2.7:1 on its dark
/// panels and 2.9:1 on its light ones): plain text and weak text (hints, secondary figures)
/// for each theme. Set once per context.
pub(crate) fn readable_text(ctx: &egui::Context) {
    let id = egui::Id::unique("vramwarden-readable-text");
    if ctx.data(|d| d.get_temp::<bool>(id)).is_some() {
        return;
    }
    ctx.data_mut(|d| d.insert_temp(id, true));
    for theme in [egui::Theme::Dark, egui::Theme::Light] {
        let (text, weak) = text_colors(theme == egui::Theme::Dark);
        ctx.style_mut_of(theme, |s| {
            s.visuals.widgets.noninteractive.fg_stroke.color = text;
            s.visuals.weak_text_color = Some(weak);
        });
    }
}

/// The PyTorch badge's colour (PyTorch's orange-red, lighter on a dark background and darker
/// on a light one: 4.5:1 at least on the panel and on a selected table row).
pub(crate) fn torch_text(dark: bool) -> Color32 {
    if dark {
        Color32::from_rgb(255, 120, 90)
    } else {
        Color32::from_rgb(180, 40, 20)
    }
}

/// How much of the selection colour a selected table row takes (the rest is the panel): a
/// tint that coloured text on the row (a leak, a badge) stays readable on.
pub(crate) const ROW_SELECTION_ALPHA: f32 = 0.35;

/// Plain and weak text colours on a dark or a light background (see [`readable_text`]).
fn text_colors(dark: bool) -> (Color32, Color32) {
    if dark {
        (Color32::from_gray(200), Color32::from_gray(150))
    } else {
        (Color32::from_gray(60), Color32::from_gray(100))
    }
}

/// WCAG's contrast ratio of two colours (1 to 21; 4.5 is the least for body text).
pub fn contrast(a: Color32, b: Color32) -> f32 {
    let lum = |c: Color32| {
        let ch = |v: u8| {
            let v = f32::from(v) / 255.0;
            if v <= 0.039_28 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * ch(c.r()) + 0.7152 * ch(c.g()) + 0.0722 * ch(c.b())
    };
    let (x, y) = (lum(a), lum(b));
    (x.max(y) + 0.05) / (x.min(y) + 0.05)
}
/// Parked processes (their GPU memory in host memory): a calm blue, not a warning.
pub(crate) const PARKED: Color32 = Color32::from_rgb(90, 160, 235);

/// [`PARKED`] for the theme: a darker blue on light backgrounds, where the dark theme's reads
/// at 2.5:1 (6.1:1 on the light panel).
pub(crate) fn parked_color(dark_mode: bool) -> Color32 {
    if dark_mode {
        PARKED
    } else {
        Color32::from_rgb(25, 95, 170)
    }
}
/// Memory the caching allocator holds (reserved; on the strip, its releasable part): a pink
/// apart from the memory limit's red.
pub(crate) const TORCH_CACHE: Color32 = Color32::from_rgb(230, 120, 175);
/// Memory in live tensors: a teal apart from the used-memory blue.
pub(crate) const TORCH_ALLOCATED: Color32 = Color32::from_rgb(0, 170, 140);
/// Free space inside split blocks (fragmentation).
pub(crate) const TORCH_SPLIT: Color32 = Color32::from_rgb(230, 180, 40);

/// Colour of memory no process accounts for ("Unattributed"): a neutral grey no process
/// colour comes near.
pub(crate) const UNATTRIBUTED: Color32 = Color32::from_rgb(150, 150, 150);

/// Which set of process colours the window uses (View → Colours).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Palette {
    /// Twenty distinct hues.
    #[default]
    Standard,
    /// Hues told apart with the common kinds of colour blindness.
    ColorBlind,
}

impl Palette {
    /// Every palette, in menu order.
    pub(crate) const ALL: [Palette; 2] = [Palette::Standard, Palette::ColorBlind];

    /// Menu label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Palette::Standard => "Standard colours",
            Palette::ColorBlind => "Colour-blind safe colours",
        }
    }

    /// The colour of each slot, on a dark or a light background (the RGB of
    /// [`crate::model::palette`]).
    pub(crate) fn colors(self, dark_mode: bool) -> [Color32; crate::engine::view::COLOR_SLOTS] {
        use crate::model::palette;
        let base = match self {
            Palette::Standard => palette::STANDARD,
            Palette::ColorBlind => palette::COLOR_BLIND,
        };
        // On white the same hues, a little darker.
        base.map(|c| {
            let [r, g, b] = if dark_mode { c } else { palette::on_light(c) };
            Color32::from_rgb(r, g, b)
        })
    }
}

fn palette_id() -> egui::Id {
    egui::Id::unique("vramwarden-process-palette")
}

/// Sets the palette the window's process colours come from (kept in the egui context).
pub(crate) fn set_palette(ctx: &egui::Context, palette: Palette) {
    ctx.data_mut(|d| d.insert_temp(palette_id(), palette));
}

/// The process colours of this frame: the palette chosen and the theme.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Colors {
    /// The palette chosen.
    pub palette: Palette,
    /// Dark theme.
    pub dark: bool,
    colors: [Color32; crate::engine::view::COLOR_SLOTS],
}

impl Colors {
    /// The colours for `ui` (its theme, the window's palette).
    pub(crate) fn of(ui: &Ui) -> Self {
        let palette = ui
            .ctx()
            .data(|d| d.get_temp::<Palette>(palette_id()))
            .unwrap_or_default();
        Self::new(palette, ui.visuals().dark_mode)
    }

    /// The colours of `palette` on a dark or light background.
    pub fn new(palette: Palette, dark: bool) -> Self {
        Self {
            palette,
            dark,
            colors: palette.colors(dark),
        }
    }

    /// A process's colour: its slot's (the same in every graph, table marker and legend).
    /// Slots are handed out across all GPUs, the one left longest ago first
    /// ([`crate::engine::view::ProcessRow::color_slot`]), so processes on screen together never
    /// share a colour until more than [`crate::engine::view::COLOR_SLOTS`] run at once; beyond that,
    /// hues around the colour wheel.
    pub(crate) fn slot(&self, slot: u8) -> Color32 {
        match self.colors.get(usize::from(slot)) {
            Some(c) => *c,
            None => {
                let hue = (f32::from(slot) * 0.618_034).fract();
                let l = if self.dark { 0.7 } else { 0.4 };
                egui::ecolor::Hsva::new(hue, 0.6, l, 1.0).into()
            }
        }
    }
}

/// A process's colour in the standard palette (see [`Colors::slot`]; drawing code uses
/// [`Colors::of`] to follow the palette chosen).
pub fn process_color(slot: u8, dark_mode: bool) -> Color32 {
    Colors::new(Palette::Standard, dark_mode).slot(slot)
}

/// Colour of the OOM forecast's marker on a memory bar.
pub(crate) const FORECAST: Color32 = Color32::from_rgb(240, 150, 40);

/// [`FORECAST`] for the theme: a darker orange on light backgrounds (4.5:1 on white).
pub(crate) fn forecast_color(dark_mode: bool) -> Color32 {
    if dark_mode {
        FORECAST
    } else {
        Color32::from_rgb(150, 70, 0)
    }
}

/// The height of a memory bar (points).
const MEMORY_BAR_HEIGHT: f32 = 18.0;

/// A horizontal bar split into used / reserved / free. `projected` (bytes used in
/// [`FORECAST_HORIZON_MIN`] minutes at the current leak rate) draws an orange band from the used
/// memory to that point, with a tick where it ends (at the bar's end when the GPU would be full).
pub(crate) fn memory_bar(
    ui: &mut Ui,
    total: u64,
    used: u64,
    reserved: u64,
    projected: Option<u64>,
    hover: &str,
) -> egui::Response {
    let (rect, resp) = ui.allocate_exact_size(
        egui::vec2(ui.available_width(), MEMORY_BAR_HEIGHT),
        Sense::hover(),
    );
    let p = ui.painter();
    let radius = CornerRadius::same(4);
    p.rect_filled(rect, radius, ui.visuals().extreme_bg_color);
    if total > 0 {
        paint_memory(p, rect, radius, (total, used, reserved), projected);
    }
    p.rect_stroke(
        rect,
        radius,
        Stroke::new(1.0, ui.visuals().widgets.noninteractive.bg_stroke.color),
        StrokeKind::Inside,
    );
    // A name for screen readers (and tests): the figures the hover shows, on one line.
    let label = format!(
        "Memory: {}",
        hover
            .lines()
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(", ")
    );
    resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Meter, true, label.clone()));
    resp.on_hover_text(hover)
}

/// Paints a memory bar's segments in `rect` (of `total` > 0 bytes): the reserved memory from
/// the left, the used memory after it, and the projection's band past the used memory.
fn paint_memory(
    p: &egui::Painter,
    rect: Rect,
    radius: CornerRadius,
    (total, used, reserved): (u64, u64, u64),
    projected: Option<u64>,
) {
    let height = MEMORY_BAR_HEIGHT;
    let w = rect.width();
    let fu = (used as f64 / total as f64).clamp(0.0, 1.0) as f32;
    let fr = (reserved as f64 / total as f64).clamp(0.0, 1.0 - f64::from(fu)) as f32;
    let reserved_rect = Rect::from_min_size(rect.min, egui::vec2(w * fr, height));
    let used_rect = Rect::from_min_size(
        egui::pos2(rect.min.x + w * fr, rect.min.y),
        egui::vec2(w * fu, height),
    );
    // The two segments meet square; only the bar's ends are round.
    let square = |left: bool| CornerRadius {
        nw: if left { 0 } else { radius.nw },
        sw: if left { 0 } else { radius.sw },
        ne: if left { radius.ne } else { 0 },
        se: if left { radius.se } else { 0 },
    };
    p.rect_filled(reserved_rect, square(false), RESERVED);
    let used_radius = if fr > 0.0 { square(true) } else { radius };
    p.rect_filled(used_rect, used_radius, USED);
    if let Some(proj) = projected.filter(|p| *p > used) {
        let fp = (proj as f64 / total as f64).clamp(0.0, 1.0 - f64::from(fr)) as f32;
        paint_projection(p, rect, (used_rect.max.x, rect.min.x + w * (fr + fp)));
    }
}

/// Paints the projection on a memory bar: an orange band from `x0` to `x1` (when it has
/// room), with a tick where it ends.
fn paint_projection(p: &egui::Painter, rect: Rect, (x0, x1): (f32, f32)) {
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

/// The span of the forecast drawn on a memory bar, in minutes.
pub(crate) const FORECAST_HORIZON_MIN: f64 = 10.0;

/// The least size of legend and hint text (points at 100 %): readable, not egui's 9-point
/// "small".
const LEGEND_TEXT_SIZE: f32 = 12.5;

/// A legend entry: its swatch and its name kept together on one line (a wrapped legend never
/// leaves a swatch at the end of one line and its name on the next). One widget of its own
/// size, so that a `horizontal_wrapped` legend moves it to the next line when it does not fit
/// (a group of widgets there never wraps: it overflows and widens everything below it); a
/// name wider than the whole line is cut with "…" rather than widening the line.
pub(crate) fn legend_item(ui: &mut Ui, color: Color32, name: &str, bold: bool) -> egui::Response {
    const SWATCH: f32 = 10.0;
    const GAP: f32 = 4.0;
    let t = egui::RichText::new(name).size(LEGEND_TEXT_SIZE);
    let t = if bold { t.strong() } else { t };
    let room = (ui.max_rect().width() - SWATCH - GAP - LEGEND_ITEM_SPACE).max(20.0);
    let galley = egui::WidgetText::from(t).into_galley(
        ui,
        Some(egui::TextWrapMode::Truncate),
        room,
        egui::TextStyle::Body,
    );
    let size = egui::vec2(
        SWATCH + GAP + galley.size().x + LEGEND_ITEM_SPACE,
        galley.size().y.max(SWATCH),
    );
    let (rect, resp) = ui.allocate_exact_size(size, Sense::hover());
    if ui.is_rect_visible(rect) {
        let swatch = Rect::from_center_size(
            egui::pos2(rect.left() + SWATCH / 2.0, rect.center().y),
            egui::vec2(SWATCH, SWATCH),
        );
        paint_swatch(ui, swatch, color);
        let text_pos = egui::pos2(
            swatch.right() + GAP,
            rect.center().y - galley.size().y / 2.0,
        );
        let text_color = ui.visuals().text_color();
        ui.painter().galley(text_pos, galley, text_color);
    }
    let label = name.to_owned();
    resp.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Label, true, label.clone()));
    resp
}

/// The room after a legend entry, before the next one.
const LEGEND_ITEM_SPACE: f32 = 6.0;

/// A hint under a control: readable size, in the theme's weak text colour.
pub(crate) fn hint(text: impl Into<String>) -> egui::RichText {
    egui::RichText::new(text).size(LEGEND_TEXT_SIZE).weak()
}

/// A small coloured square, as legend marker in table rows, outlined so that a colour close
/// to the background (the "Free" swatch) still shows.
pub(crate) fn color_swatch(ui: &mut Ui, color: Color32) {
    let (rect, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), Sense::hover());
    paint_swatch(ui, rect, color);
}

/// Paints a swatch ([`color_swatch`]) into `rect`.
fn paint_swatch(ui: &Ui, rect: Rect, color: Color32) {
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

/// A time in a hover: the clock ("23:59:58"), with its day first when `days`
/// ("7 Dec 00:00:05").
pub(crate) fn hover_time(s: f64, days: bool) -> String {
    let ms = (s * 1000.0).round() as i64;
    if days {
        format!(
            "{} {}",
            crate::model::format::day(ms),
            crate::model::format::clock(ms)
        )
    } else {
        crate::model::format::clock(ms)
    }
}

/// Whether unix times `a` and `b` (s) fall on the same local day.
pub(crate) fn same_day(a: f64, b: f64) -> bool {
    let day = |s: f64| crate::model::format::day((s * 1000.0).round() as i64);
    day(a) == day(b)
}

/// Whether a graph over `range` (unix s) shows more than one local day: its time axis then
/// names the day at midnight, and its hovers name the day of each time.
pub(crate) fn shows_days(range: Option<(f64, f64)>) -> bool {
    range.is_some_and(|(a, b)| b - a > 86_400.0 || !same_day(a, b))
}

/// The opacity of a lost agent's last figures (its cards, forecast banners and table rows).
pub(crate) const UNREACHABLE_OPACITY: f32 = 0.45;

#[cfg(test)]
mod tests {
    use super::*;

    /// The GUI review: "parked" read at 2.5:1 on the light theme. Both shades reach 4.5:1 on
    /// their theme's panel, windows and plot backgrounds.
    #[test]
    fn the_parked_colour_is_readable_on_both_themes() {
        for dark in [true, false] {
            let v = if dark {
                egui::Visuals::dark()
            } else {
                egui::Visuals::light()
            };
            for bg in [v.panel_fill, v.window_fill, v.extreme_bg_color] {
                let c = contrast(parked_color(dark), bg);
                assert!(c >= 4.5, "dark {dark}: {c:.2}:1 on {bg:?}");
            }
        }
    }

    fn distance(a: Color32, b: Color32) -> f32 {
        let d = |x: u8, y: u8| (f32::from(x) - f32::from(y)).powi(2);
        (d(a.r(), b.r()) + d(a.g(), b.g()) + d(a.b(), b.b())).sqrt()
    }

    /// Every palette, on both backgrounds: no two slots alike, none near the Unattributed
    /// grey, the memory bar's used blue or the limit red.
    /// The warning colour reads on both themes' panels (4.5:1 at least).
    #[test]
    fn warning_colour_contrast_on_both_themes() {
        let light = egui::Visuals::light().panel_fill;
        let dark = egui::Visuals::dark().panel_fill;
        assert!(
            contrast(warn_for(false), light) >= 4.5,
            "{}",
            contrast(warn_for(false), light)
        );
        assert!(
            contrast(warn_for(true), dark) >= 4.5,
            "{}",
            contrast(warn_for(true), dark)
        );
        assert!(contrast(forecast_color(false), light) >= 4.5);
        use crate::model::outcome::Outcome;
        for o in [
            Outcome::Acted,
            Outcome::WouldAct,
            Outcome::Failed,
            Outcome::Skipped,
        ] {
            let c = contrast(outcome_color(o, false), light);
            assert!(c >= 4.5, "{o:?} on light: {c}");
        }
        // The sum is not there by itself: the plain WARN on white is the failure this fixes.
        assert!(contrast(WARN, light) < 4.5);
    }

    #[test]
    fn process_colours_are_distinct_and_never_the_unattributed_grey() {
        for p in Palette::ALL {
            for dark in [true, false] {
                let c = p.colors(dark);
                for (i, a) in c.iter().enumerate() {
                    for b in &c[i + 1..] {
                        let de = crate::model::palette::delta_e2000(
                            [a.r(), a.g(), a.b()],
                            [b.r(), b.g(), b.b()],
                        );
                        assert!(de > 5.0, "{p:?} {a:?} ~ {b:?}: {de:.1}");
                    }
                    let grey = if dark {
                        UNATTRIBUTED
                    } else {
                        let [r, g, b] = crate::model::palette::on_light([150, 150, 150]);
                        Color32::from_rgb(r, g, b)
                    };
                    assert!(distance(*a, grey) > 50.0, "{p:?} {a:?} ~ grey");
                    let sat = a.r().max(a.g()).max(a.b()) - a.r().min(a.g()).min(a.b());
                    assert!(sat > 30, "{p:?} {a:?} is a grey");
                }
                // The allocator's colours (strip, lifetime graph) are not the used / limit ones.
                for t in [TORCH_ALLOCATED, TORCH_CACHE, TORCH_SPLIT] {
                    assert!(distance(t, USED) > 80.0, "{t:?} ~ used");
                    assert!(distance(t, LIMIT) > 80.0, "{t:?} ~ limit");
                    assert!(distance(t, RESERVED) > 80.0, "{t:?} ~ reserved");
                }
                // Neither palette (the colour-blind one had Okabe-Ito's blue); the forecast's
                // orange and the rest: `model::palette`'s tests.
                for a in &c {
                    assert!(distance(*a, USED) > 60.0, "{p:?} {a:?} ~ used");
                    assert!(distance(*a, LIMIT) > 60.0, "{p:?} {a:?} ~ limit");
                }
            }
        }
        // Beyond the palette: still colours, not the grey.
        let c = Colors::new(Palette::Standard, true);
        assert_ne!(c.slot(20), c.slot(21));
        assert!(distance(c.slot(25), UNATTRIBUTED) > 30.0);
    }
}
