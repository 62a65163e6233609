//! The status bar: the source and its health (live), or where a session was recorded (a
//! session), with the jobs running above it.

use egui::{RichText, Ui};

use super::sessions::SessionView;
use super::widgets;
use crate::engine::view::Monitor;
use crate::model::format;
use crate::model::UnixMs;

/// The live status bar: the link, the source, sampling, staleness, errors, the forecast and
/// the latest notice (the engine's reports in `m`, an agent's on `host`, and the window's own
/// latest notice `own` with its time, [`super::notices::shown`]); the history held at the
/// right.
pub(crate) fn live(
    ui: &mut Ui,
    m: &Monitor,
    host: Option<&str>,
    now: UnixMs,
    link: &crate::link::LinkHealth,
    own: Option<(UnixMs, String)>,
) {
    ui.horizontal(|ui| {
        // The history at the right first; the rest in the room left of it, each text cut
        // with "…" where it does not fit (never drawn over the history).
        ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
            let (a, b) = m.history.span().unwrap_or((now, now));
            ui.label(format!(
                "History {} ({} samples)",
                format::duration(b - a),
                m.history.len()
            ));
            ui.separator();
            ui.with_layout(egui::Layout::left_to_right(egui::Align::Center), |ui| {
                ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Truncate);
                live_left(ui, m, now, link);
                if let Some(n) = super::notices::shown(m, host, own, now) {
                    ui.separator();
                    ui.label(RichText::new(&n).weak())
                        .on_hover_text(format!("The latest notice (shown for 30 s):\n{n}"));
                }
            });
        });
    });
}

/// The live status bar's left part.
fn live_left(ui: &mut Ui, m: &Monitor, now: UnixMs, link: &crate::link::LinkHealth) {
    link_state(ui, link);
    source(ui, m);
    ui.separator();
    ui.label(format!(
        "Sampling every {}",
        format::duration(m.interval_ms as i64).replace("0s", "<1s")
    ));
    ui.separator();
    guard_state(ui, m);
    last_sample(ui, m, now);
    troubles(ui, m);
}

/// The agent this window is attached to and whether it answers (nothing for a local one).
fn link_state(ui: &mut Ui, link: &crate::link::LinkHealth) {
    match link {
        crate::link::LinkHealth::Local => {}
        crate::link::LinkHealth::Connected { url, .. } => {
            ui.label(RichText::new(format!("Agent {url} · connected")).strong())
                .on_hover_text("This window shows an agent's engine: actions are sent to it and it applies its own policy");
            ui.separator();
        }
        crate::link::LinkHealth::Disconnected { url, error, .. } => {
            let words = if matches!(
                error,
                crate::link::remote_error::RemoteError::Unauthorized(_)
            ) {
                format!("Agent {url} · token refused")
            } else {
                format!("Agent {url} · disconnected — retrying")
            };
            ui.label(RichText::new(words).color(widgets::warn(ui)).strong());
            ui.separator();
        }
    }
}

/// The source: its kind, driver, NVML and CUDA versions, and host.
fn source(ui: &mut Ui, m: &Monitor) {
    match m.source.as_ref() {
        Some(s) => {
            ui.label(format!("Source: {}", s.kind));
            ui.separator();
            ui.label(format!(
                "Driver {}",
                s.driver_version.as_deref().unwrap_or("—")
            ));
            if let Some(v) = &s.nvml_version {
                ui.label(format!("NVML {v}"));
            }
            if let Some(v) = &s.cuda_version {
                ui.label(format!("CUDA {v}"));
            }
            ui.separator();
            ui.label(format!("Host {}", s.host));
        }
        None => {
            ui.label("Source: —");
        }
    }
}

/// STALE (with how long no sample came) when the driver stopped answering, else the last
/// sample's time.
fn last_sample(ui: &mut Ui, m: &Monitor, now: UnixMs) {
    if m.is_stale(now) {
        let age = m.latest_received_ms.map_or(0, |t| now - t);
        ui.label(
            RichText::new(format!("STALE: no sample for {}", format::duration(age)))
                .color(widgets::warn(ui))
                .strong(),
        )
        .on_hover_text("The driver has not answered for 3 intervals. The window keeps working; data resumes when the driver answers.");
    } else if let Some(t) = m.latest_received_ms {
        ui.label(format!("Last sample {}", format::clock(t)));
    }
}

/// What went wrong, each after a separator: the last error, each GPU whose process list
/// failed, the recording's error; then the OOM forecasts.
fn troubles(ui: &mut Ui, m: &Monitor) {
    if let Some(e) = &m.last_error {
        ui.separator();
        ui.label(RichText::new(e).color(widgets::warn(ui)));
    }
    for d in m.latest.iter().flat_map(|s| &s.devices) {
        if let Some(e) = &d.process_list_error {
            ui.separator();
            ui.label(
                RichText::new(format!("GPU {}: process list STALE", d.index))
                    .color(widgets::warn(ui))
                    .strong(),
            )
            .on_hover_text(format!("The driver failed to list this GPU's processes ({e}). The last good list is shown, its memory unknown; nothing is recorded as 0."));
        }
    }
    if let Some(e) = &m.recording.error {
        ui.separator();
        ui.label(RichText::new(e).color(widgets::warn(ui)))
            .on_hover_text("Sampling goes on; recording retries every sample.");
    }
    // The OOM forecast as the banner says it now (never a figure frozen when raised).
    for a in &m.oom_alerts {
        ui.separator();
        ui.label(
            RichText::new(format!("⚠ {}", a.sentence()))
                .color(widgets::forecast_color(ui.visuals().dark_mode)),
        );
    }
}

/// Whether the OOM guard acts here, in a word, so it is known outside its tab.
fn guard_state(ui: &mut Ui, m: &Monitor) {
    let Some(first) = m.guard.first() else {
        return;
    };
    let off = m
        .guard
        .iter()
        .all(|g| g.phase == crate::act::guard::GuardPhase::Off);
    let (words, hover) = if off {
        (
            "Guard off",
            "The OOM guard is turned off (Settings → OOM guard).",
        )
    } else if first.dry_run {
        (
            "Guard: dry run",
            "The OOM guard only says what it would do (its tab, Ctrl+4): its own dry run or the global one (Settings → Rules) is on.",
        )
    } else {
        (
            "Guard: acts",
            "The OOM guard acts: it releases caches, parks and pauses processes before their GPU fills (its tab, Ctrl+4).",
        )
    };
    ui.label(words).on_hover_text(hover);
    ui.separator();
}

/// The status bar over a recorded session: where and how it was recorded, its span, its
/// file's health.
pub(crate) fn session(ui: &mut Ui, v: &SessionView) {
    ui.horizontal(|ui| {
        let d = &v.data;
        if let Some(h) = &d.header {
            ui.label(format!("Recorded on {} · {}", h.host, h.source));
            ui.separator();
            ui.label(format!(
                "Driver {}",
                h.driver_version.as_deref().unwrap_or("—")
            ));
            ui.separator();
            ui.label(format!(
                "Sampling every {}",
                format::duration(h.interval_ms as i64)
            ));
        }
        ui.separator();
        if let Some((a, b)) = d.span() {
            ui.label(format!(
                "{} – {} ({})",
                format::date_time(a),
                format::date_time(b),
                format::duration(b - a)
            ));
        }
        ui.separator();
        if d.report.is_clean() {
            ui.label(d.report.summary());
        } else {
            ui.label(RichText::new(d.report.summary()).color(widgets::warn(ui)));
        }
    });
}

/// Opening or importing a session: its progress and a Cancel button, while it runs.
pub(crate) fn jobs_strip(
    ui: &mut Ui,
    jobs: &crate::link::jobs::JobBoard,
    requests: &mut Vec<crate::front::gui::ui_command::UiCommand>,
) {
    for j in jobs
        .states()
        .into_iter()
        .filter(|j| j.in_status_bar && j.result.is_none())
    {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label(format!("{}…", j.label));
            ui.add(
                egui::ProgressBar::new(j.progress.fraction())
                    .show_percentage()
                    .desired_width(160.0),
            );
            if ui.small_button("Cancel").clicked() {
                requests.push(crate::front::gui::ui_command::UiCommand::Job(
                    crate::link::jobs::JobCommand::Cancel(j.id),
                ));
            }
        });
        ui.separator();
    }
}
