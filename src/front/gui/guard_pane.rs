//! The Guard tab: per GPU, whether the OOM guard is watching, armed, acting or waiting; the
//! time to full against the time its next step needs; what it will do next and to whom;
//! what it cannot do; the processes it parked and what their resume waits for; and what it
//! did, with the outcome.

use egui::{Color32, RichText, Ui};

use super::widgets;
use crate::act::guard::{GuardPhase, GuardStatus, StepOutcome};
use crate::engine::view::Monitor;
use crate::model::{format, GIB};

/// The tab's label: "Guard", with its state where it is doing something (acting, or waiting
/// to resume what it parked). Armed (something grows toward full within its safe time) is
/// said in the tab only: a burst of a few seconds arms it, which is no news.
pub(crate) fn tab_label(m: &Monitor) -> String {
    let busiest = m.guard.iter().map(|g| g.phase).max_by_key(|p| p.code());
    match busiest {
        Some(p @ (GuardPhase::Acting | GuardPhase::Waiting)) => {
            format!("Guard ({})", p.label())
        }
        _ => "Guard".into(),
    }
}

/// Draws the tab; the selected GPU first.
pub(crate) fn show(ui: &mut Ui, m: &Monitor, selected_gpu: u32) {
    if m.guard.is_empty() {
        ui.add_space(8.0);
        super::widgets::label_with_code(ui, "No OOM guard runs here: a recorded session, or an agent of an earlier build. In a recorded session, the steps its guard took are in the Activity tab (rules named \"OOM guard: …\"); `vramwarden guard what-if SESSION` tells what the guard would have done.");
        return;
    }
    let mut order: Vec<&GuardStatus> = m.guard.iter().collect();
    order.sort_by_key(|g| (g.device_index != selected_gpu, g.device_index));
    egui::ScrollArea::vertical()
        .id_salt("guard")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            for g in order {
                gpu(ui, g);
                ui.separator();
            }
        });
}

fn phase_color(p: GuardPhase, ui: &Ui) -> Color32 {
    match p {
        GuardPhase::Acting | GuardPhase::Armed => widgets::warn(ui),
        _ => ui.visuals().text_color(),
    }
}

/// One GPU's guard: its phase, the time to full, its next step, what it cannot do, the
/// processes parked, the park rate and its recent steps.
fn gpu(ui: &mut Ui, g: &GuardStatus) {
    heading(ui, g);
    if g.phase == GuardPhase::Off {
        ui.label("Off: turn it on in Settings, OOM guard.");
        return;
    }
    ui.label(timeline(g));
    if g.phase == GuardPhase::Armed {
        ui.label(widgets::hint(
            "Armed: at the present rate this GPU would be full within its safe time; it acts only when the time to full reaches its next step's lead. The card's forecast warns once the growth has lasted.",
        ));
    }
    if let Some(n) = &g.next {
        ui.label(format!(
            "Next: {} {} — needs ~{}, starts when full in at most {}",
            n.kind.label(),
            n.who,
            secs(n.needs_s),
            secs(n.starts_at_s)
        ));
    } else {
        ui.label("Next: nothing it may do here (no idle, releasable or parkable process).");
    }
    for c in &g.cannot {
        ui.label(RichText::new(c).color(widgets::warn(ui)));
    }
    parked(ui, g);
    ui.label(widgets::hint(format!(
        "Park rate {:.2} GiB/s ({})",
        g.park_gib_s,
        if g.park_rate_measured {
            "measured here"
        } else {
            "default until a park is measured"
        }
    )));
    recent(ui, g);
}

/// The GPU's heading: its index, its phase (in the warning colour when armed or acting),
/// and whether it only says what it would do.
fn heading(ui: &mut Ui, g: &GuardStatus) {
    ui.horizontal_wrapped(|ui| {
        ui.label(RichText::new(format!("GPU {}", g.device_index)).strong());
        ui.label(
            RichText::new(g.phase.label().to_uppercase())
                .strong()
                .color(phase_color(g.phase, ui)),
        );
        if g.dry_run && g.phase != GuardPhase::Off {
            ui.label(RichText::new("dry run: it only says what it would do").italics());
        }
    });
}

/// The processes the guard parked, one a line: how much waits in host memory since when,
/// and for what.
fn parked(ui: &mut Ui, g: &GuardStatus) {
    for p in &g.parked {
        ui.label(format!(
            "⏸ {} — {:.1} GiB in host memory since {}{}; waits for {}",
            p.who,
            p.bytes as f64 / GIB as f64,
            format::clock(p.since_ms),
            if p.paused_grower {
                " (paused grower)"
            } else {
                ""
            },
            p.waits_for
        ));
    }
}

fn timeline(g: &GuardStatus) -> String {
    match g.full_in_s {
        Some(f) => format!(
            "Full in {} at {:.0} MiB/s (steps under way counted)",
            secs(f),
            g.growth_mib_s
        ),
        None => "Nothing grows toward full.".into(),
    }
}

fn recent(ui: &mut Ui, g: &GuardStatus) {
    if g.recent.is_empty() {
        return;
    }
    egui::Grid::new(("guard-steps", g.device_index))
        .num_columns(6)
        .striped(true)
        .spacing([12.0, 3.0])
        .show(ui, |ui| {
            for h in [
                "Time",
                "Step",
                "Process",
                "Outcome",
                "Full in / needs / took",
                "What happened",
            ] {
                ui.label(RichText::new(h).strong());
            }
            ui.end_row();
            for r in g.recent.iter().rev() {
                ui.monospace(format::clock(r.unix_ms));
                ui.label(r.kind.label());
                ui.label(&r.who);
                let color = match r.outcome {
                    StepOutcome::Failed | StepOutcome::Refused => widgets::warn(ui),
                    _ => ui.visuals().text_color(),
                };
                ui.label(RichText::new(r.outcome.label()).strong().color(color));
                ui.label(format!(
                    "{} / {} / {}",
                    r.full_in_s.map_or("—".into(), secs),
                    secs(r.needs_s),
                    r.took_s.map_or("—".into(), secs)
                ));
                // Wrapped in the room left (a long refusal widened the pane past the window).
                ui.add(egui::Label::new(&r.detail).wrap());
                ui.end_row();
            }
        });
}

/// Seconds as the rest of the window writes a duration ("12s", "4m 10s", "2h 05m").
fn secs(s: f64) -> String {
    format::duration((s.max(0.0) * 1000.0).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window's review: a burst of a few seconds armed the guard and the tab cried
    /// "Guard (armed)" while the card and banner said nothing. The tab names acting and
    /// waiting only; armed is said in the tab's pane.
    #[test]
    fn the_tab_names_acting_and_waiting_but_not_armed() {
        let status = |device_index, phase| GuardStatus {
            device_index,
            phase,
            dry_run: true,
            full_in_s: Some(8.0),
            growth_mib_s: 768.0,
            next: None,
            cannot: Vec::new(),
            parked: Vec::new(),
            recent: Vec::new(),
            park_gib_s: 1.5,
            park_rate_measured: false,
            resume_gib_s: 0.0,
            resume_rate_measured: false,
        };
        let mut m = Monitor::new(1000, 10);
        m.guard = vec![
            status(0, GuardPhase::Watching),
            status(1, GuardPhase::Armed),
        ];
        assert_eq!(tab_label(&m), "Guard");
        m.guard.push(status(2, GuardPhase::Acting));
        assert_eq!(tab_label(&m), "Guard (acting)");
        m.guard[0].phase = GuardPhase::Waiting;
        assert_eq!(tab_label(&m), "Guard (waiting)");
    }
}
