//! The window's fields: optional numbers and text, bounds and their notes, problems under a field.

use egui::{RichText, Ui};

use crate::front::gui::widgets;

/// A condition with a number (a memory size, given in MiB, shown and edited in GiB); its own
/// problems (key `key`) right under it.
pub(super) fn opt_num(
    ui: &mut Ui,
    label: &str,
    v: &mut Option<f64>,
    (default, suffix): (f64, &str),
    problems: &[(&'static str, String)],
    key: &str,
) {
    ui.horizontal(|ui| {
        let mut on = v.is_some();
        if ui.checkbox(&mut on, label).changed() {
            *v = on.then_some(v.unwrap_or(default));
        }
        match v.as_mut() {
            // A size of GPU memory is edited in GiB (the rule keeps MiB).
            Some(x) if suffix == " MiB" => {
                let mut gib = *x / 1024.0;
                if ui
                    .add(
                        egui::DragValue::new(&mut gib)
                            .speed(0.1)
                            .max_decimals(2)
                            .suffix(" GiB"),
                    )
                    .changed()
                {
                    *x = gib * 1024.0;
                }
            }
            Some(x) => {
                ui.add(egui::DragValue::new(x).speed(1.0).suffix(suffix));
            }
            None => {}
        }
    });
    field_errors(ui, problems, &[key]);
}

/// A condition with a text (a regular expression, a user); its own problems right under it.
pub(super) fn opt_text(
    ui: &mut Ui,
    label: &str,
    v: &mut Option<String>,
    hint: &str,
    problems: &[(&'static str, String)],
    key: &str,
) {
    ui.horizontal(|ui| {
        let mut on = v.is_some();
        if ui.checkbox(&mut on, label).changed() {
            *v = on.then(|| v.clone().unwrap_or_default());
        }
        if let Some(x) = v.as_mut() {
            ui.add(
                egui::TextEdit::singleline(x)
                    .hint_text(hint)
                    .desired_width(220.0),
            );
        }
    });
    field_errors(ui, problems, &[key]);
}

/// The status area: why Save is off in words (its key in the file on hover), or the last
/// value clamped, and the last save's result; always two lines high (so nothing under the
/// pointer moves when a status appears), each cut to
/// one line with its whole text on hover.
pub(super) fn status_lines(
    ui: &mut Ui,
    cannot: Option<(String, String)>,
    clamped: Option<&str>,
    message: Option<&(String, bool)>,
) {
    let warn = widgets::warn(ui);
    let first = cannot
        .map(|(t, key)| (RichText::new(t.clone()).color(warn), format!("{t}\n{key}")))
        .or_else(|| clamped.map(|c| (RichText::new(c.to_string()), c.to_string())));
    let second = message.map(|(m, err)| {
        let t = if *err {
            RichText::new(m).color(warn)
        } else {
            RichText::new(m)
        };
        (t, m.clone())
    });
    for line in [first, second] {
        let h = ui.text_style_height(&egui::TextStyle::Body);
        let w = ui.available_width();
        ui.allocate_ui_with_layout(
            egui::vec2(w, h),
            egui::Layout::left_to_right(egui::Align::Center),
            |ui| {
                ui.set_min_size(egui::vec2(w, h));
                if let Some((t, hover)) = line {
                    ui.add(egui::Label::new(t).truncate()).on_hover_text(hover);
                }
            },
        );
    }
}

/// A number field kept within `range`: a value typed or dragged outside it is put back to
/// the nearest bound and `note` says so ("Minimum rate: 0 is under 0.1 MiB/min; set to
/// 0.1"), rather than the value changing without a word.
pub(super) fn bounded<T>(
    ui: &mut Ui,
    label: &str,
    v: &mut T,
    range: std::ops::RangeInclusive<T>,
    (speed, suffix): (f64, &str),
    note: &mut Option<String>,
) -> egui::Response
where
    T: egui::emath::Numeric + std::fmt::Display,
{
    let resp = ui.add(egui::DragValue::new(v).speed(speed).suffix(suffix));
    if resp.changed() {
        *note = None;
    }
    if let Some(n) = clamp_note(label, v, &range, suffix) {
        *note = Some(n);
    }
    resp
}

/// Puts `v` back into `range`; the sentence saying what was changed, if anything.
pub fn clamp_note<T>(
    label: &str,
    v: &mut T,
    range: &std::ops::RangeInclusive<T>,
    suffix: &str,
) -> Option<String>
where
    T: PartialOrd + Copy + egui::emath::Numeric,
{
    let (lo, hi) = (*range.start(), *range.end());
    let (was, bound, side) = if *v < lo {
        (*v, lo, "under the least")
    } else if *v > hi {
        (*v, hi, "over the most")
    } else {
        return None;
    };
    *v = bound;
    let (was, bound) = (short_number(was.to_f64()), short_number(bound.to_f64()));
    Some(format!(
        "{label}: {was}{suffix} is {side} allowed, set to {bound}{suffix}."
    ))
}

/// A number as a field shows it: at most three decimals, no trailing zeros ("744.9999" is
/// "745", "0.05" stays).
pub(crate) fn short_number(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

pub(super) fn field_errors(ui: &mut Ui, problems: &[(&'static str, String)], fields: &[&str]) {
    for (f, m) in problems {
        if fields.contains(f) {
            ui.label(RichText::new(format!("⚠ {m}")).color(widgets::warn(ui)));
        }
    }
}
