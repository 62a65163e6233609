//! Settings → OOM guard: the ladder as one ladder — each rung in its order, which are
//! opt-in — with its timing and the rule that keeps park and resume from oscillating.

use egui::{RichText, Ui};

use crate::act::guard::GuardSettings;
use crate::front::gui::widgets;
use crate::model::MIB;

/// Draws the guard's settings into `g`; `global_dry_run` is the rules' master switch,
/// `smallest` the smallest GPU here (index, bytes), `note` says a value put back in range.
pub(super) fn show(
    ui: &mut Ui,
    g: &mut GuardSettings,
    (global_dry_run, smallest): (bool, Option<(u32, u64)>),
    note: &mut Option<String>,
) {
    ui.label("The OOM guard keeps a GPU from filling up without killing anyone. It compares each GPU's time to full (the forecast) with the time its next step needs, and starts the step while there is still time.");
    ui.checkbox(
        &mut g.enabled,
        "Guard every GPU (its tab shows what it would do next)",
    );
    ui.checkbox(&mut g.dry_run, "Dry run: only say what it would do");
    if !g.dry_run && global_dry_run {
        ui.label(
            RichText::new(
                "The global dry run (Rules) is on: the guard still only says what it would do.",
            )
            .color(widgets::warn(ui)),
        );
    }
    ui.add_space(6.0);
    ui.label(RichText::new("The ladder, in order").strong());
    egui::Grid::new("guard-ladder")
        .num_columns(2)
        .spacing([10.0, 6.0])
        .show(ui, |ui| ladder(ui, g, note));
    ui.add_space(6.0);
    ui.label(RichText::new("Timing").strong());
    egui::Grid::new("guard-timing")
        .num_columns(3)
        .show(ui, |ui| timing(ui, g, note));
    if let Some((gpu, bytes)) = smallest.filter(|(_, b)| g.floor_free_mib * MIB as f64 >= *b as f64)
    {
        ui.label(
            RichText::new(format!(
                "The floor ({:.0} GiB) is not under GPU {gpu}'s memory ({:.0} GiB): the guard would act there whenever anything grows.",
                g.floor_free_mib / 1024.0,
                bytes as f64 / MIB as f64 / 1024.0
            ))
            .color(widgets::warn(ui)),
        );
    }
    ui.add_space(6.0);
    ui.label(widgets::hint(format!(
        "No oscillation: a step starts when the time to full falls under {:.1} × the time it needs + {:.0} s (a park moves about 1.5 GiB/s until this machine's own rate is measured: 40 GiB in about half a minute); what the guard parked comes back only when, with its memory back, the GPU would not be full within {:.0} min — held {:.0} s, with no forecast alert and room for it plus a margin.",
        g.lead_factor, g.lead_margin_s, g.safe_minutes, g.resume_hold_s
    )));
}

fn ladder(ui: &mut Ui, g: &mut GuardSettings, note: &mut Option<String>) {
    ui.label("1.");
    ui.checkbox(&mut g.release_cache, "Release PyTorch caches")
        .on_hover_text("Early enough that a park can still follow if the release is not enough.");
    ui.end_row();
    ui.label("2.");
    with_minutes(
        ui,
        (
            &mut g.park_idle,
            "Park the largest process GPU-idle for at least",
        ),
        &mut g.idle_min_minutes,
        (false, note),
    );
    ui.end_row();
    ui.label("3.");
    ui.checkbox(&mut g.pause_grower, "Pause the growing job itself before its OOM")
        .on_hover_text("It is parked (its growth stops at the driver's lock) and resumed when its GPU has room again: an OOM becomes a wait.");
    ui.end_row();
    ui.label("4.");
    with_minutes(
        ui,
        (
            &mut g.terminate_leaker,
            "Terminate a process flagged as leaking for at least",
        ),
        &mut g.leaking_min_minutes,
        (true, note),
    );
    ui.end_row();
    ui.label("then");
    ui.label("Resume what the guard parked when it is safe (below).");
    ui.end_row();
}

/// A rung's switch with its minutes; `destructive` says so beside it.
fn with_minutes(
    ui: &mut Ui,
    (on, label): (&mut bool, &str),
    minutes: &mut f64,
    (destructive, note): (bool, &mut Option<String>),
) {
    ui.horizontal_wrapped(|ui| {
        ui.checkbox(on, label);
        super::fields::bounded(ui, label, minutes, 0.0..=10_080.0, (0.1, " min"), note);
        if destructive {
            ui.label(RichText::new("(opt-in: it ends the process)").color(widgets::warn(ui)));
        }
    });
}

fn timing(ui: &mut Ui, g: &mut GuardSettings, note: &mut Option<String>) {
    // Kept in MiB in the file, shown in GiB like the rest of the window.
    let (mut floor_gib, mut min_gib) = (g.floor_free_mib / 1024.0, g.min_process_mib / 1024.0);
    let rows: [(&str, &mut f64, std::ops::RangeInclusive<f64>, &str, &str); 6] = [
        (
            "Lead factor",
            &mut g.lead_factor,
            1.0..=10.0,
            " ×",
            "start a step this many times its own duration before full",
        ),
        (
            "Lead margin",
            &mut g.lead_margin_s,
            0.0..=600.0,
            " s",
            "plus this (sampling, the forecast's delay, the driver's lock)",
        ),
        (
            "Floor",
            &mut floor_gib,
            0.0..=1024.0,
            " GiB",
            "act at once under this free memory while something grows",
        ),
        (
            "Resume horizon",
            &mut g.safe_minutes,
            1.0..=1_440.0,
            " min",
            "the GPU must stay short of full this long with the memory back",
        ),
        (
            "Resume hold",
            &mut g.resume_hold_s,
            0.0..=3_600.0,
            " s",
            "…for this long before a resume",
        ),
        (
            "Smallest park",
            &mut min_gib,
            0.0..=1024.0,
            " GiB",
            "processes holding less are not parked",
        ),
    ];
    for (label, v, range, suffix, what) in rows {
        ui.label(label);
        super::fields::bounded(ui, label, v, range, (0.1, suffix), note);
        ui.label(widgets::hint(what));
        ui.end_row();
    }
    if (floor_gib * 1024.0 - g.floor_free_mib).abs() > 1e-6 {
        g.floor_free_mib = floor_gib * 1024.0;
    }
    if (min_gib * 1024.0 - g.min_process_mib).abs() > 1e-6 {
        g.min_process_mib = min_gib * 1024.0;
    }
}
