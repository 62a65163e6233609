//! The detail pane of one process: identity, command line, container, its GPU memory over its
//! whole lifetime, peak and current.

use egui::{RichText, Ui};

use super::graph::{self, GraphCache};
use super::widgets;
use crate::engine::view::{Monitor, ProcessRow};
use crate::model::format::{self, Units};
use crate::model::UnixMs;

/// How long the detail pane shows the result of an action asked for there.
pub const ACTION_RESULT_SHOWN_MS: UnixMs = 60_000;

/// Draws the pane; returns false when the user closed it.
#[allow(clippy::too_many_arguments)]
pub fn pane(
    ui: &mut Ui,
    m: &Monitor,
    row: &ProcessRow,
    units: Units,
    now: UnixMs,
    cache: &mut GraphCache,
    leak: Option<super::leaks::LeakBadge>,
    request: Option<&mut Option<crate::act::rules::Action>>,
) -> bool {
    // One unit for the pane's sizes (Auto: from the process's peak).
    let units = units.for_largest(row.peak_bytes);
    let mut open = true;
    ui.horizontal(|ui| {
        widgets::color_swatch(ui, widgets::Colors::of(ui).slot(row.color_slot));
        ui.heading(format!("{} · PID {}", row.info.name, row.key.pid));
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
    if let Some((o, g)) = m
        .orphans
        .iter()
        .filter(|g| g.device_index == row.device_index && row.exited_at_ms.is_none())
        .find_map(|g| g.pids.iter().find(|o| o.pid == row.key.pid).map(|o| (o, g)))
    {
        ui.label(
            RichText::new(format!(
                "⚠ {}: GPU {} has {} held by processes not running here. To free it: {}.",
                o.label(),
                g.device_index,
                units.bytes(g.total_bytes),
                g.remedy
            ))
            .color(widgets::WARN),
        );
    }
    if let Some(b) = leak {
        egui::Frame::group(ui.style())
            .stroke(egui::Stroke::new(
                1.5,
                super::leaks::leak_color(ui.visuals().dark_mode),
            ))
            .show(ui, |ui| {
                ui.set_width(ui.available_width());
                let title = if b.leak {
                    "⚠ Suspected leak"
                } else {
                    "↗ Growing (not called a leak: a load or a warm-up levels off)"
                };
                ui.label(
                    RichText::new(title)
                        .strong()
                        .color(super::leaks::leak_color(ui.visuals().dark_mode)),
                );
                ui.label(format!(
                    "Growing at {:.1} MiB/min since {} (+{} so far).",
                    b.rate_mib_per_min,
                    format::date_time(b.since_ms),
                    units.bytes((b.grown_mib.max(0.0) * crate::model::MIB as f64) as u64)
                ));
                ui.label(match b.full_in_min {
                    Some(m) => format!(
                        "At this rate GPU {} is full in {}.",
                        row.device_index,
                        format::duration((m * 60_000.0) as i64)
                    ),
                    None => "Time to full: unknown (no free-memory reading).".to_string(),
                });
            });
    }
    let episodes: Vec<_> = m.leaks_of(&row.series_key()).collect();
    if !episodes.is_empty() && leak.is_none() {
        ui.label(
            RichText::new(format!(
                "{} past leak episode(s), marked on the graph",
                episodes.len()
            ))
            .color(super::leaks::leak_color(ui.visuals().dark_mode)),
        );
    }
    if let Some(park) = row.parked.filter(|_| row.exited_at_ms.is_none()) {
        ui.label(
            RichText::new(park.describe())
                .color(widgets::PARKED)
                .strong(),
        );
    }
    if row.exited_at_ms.is_none() && request.is_none() {
        ui.label(
            RichText::new(
                "Recorded session: no actions (this PID may belong to another process now)",
            )
            .weak(),
        );
    }
    // What the user asks for in this pane (the buttons here and the PyTorch section's).
    let can_act = request.is_some();
    let mut asked: Option<crate::act::rules::Action> = None;
    if let (None, true) = (row.exited_at_ms, can_act) {
        let request = &mut asked;
        ui.horizontal(|ui| {
            if ui
                .button("Terminate")
                .on_hover_text(
                    "SIGTERM, then SIGKILL after 10 s if it still holds GPU memory (Delete)",
                )
                .clicked()
            {
                *request = Some(crate::act::rules::Action::Terminate {
                    grace_seconds: crate::act::rules::model::DEFAULT_GRACE_SECONDS,
                });
            }
            match row.parked {
                Some(_) => {
                    if ui
                        .button("Resume")
                        .on_hover_text("Move its memory back to the GPU; it goes on")
                        .clicked()
                    {
                        *request = Some(crate::act::rules::Action::Resume);
                    }
                }
                None => {
                    let gib = row.used_bytes.unwrap_or(0) as f64 / crate::model::GIB as f64;
                    if ui
                        .button("Park")
                        .on_hover_text(format!(
                            "Move its {gib:.1} GiB to host memory (about {:.0} s; needs as much free host memory): it waits, not killed, until resumed",
                            crate::act::park::checks::park_estimate_s(row.used_bytes.unwrap_or(0))
                        ))
                        .clicked()
                    {
                        *request = Some(crate::act::rules::Action::Park);
                    }
                }
            }
            if ui.button("Kill").on_hover_text("SIGKILL").clicked() {
                *request = Some(crate::act::rules::Action::Signal {
                    signal: "SIGKILL".into(),
                });
            }
            ui.menu_button("Send signal…", |ui| {
                for s in [
                    "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGSTOP", "SIGCONT",
                ] {
                    if ui.button(s).clicked() {
                        *request = Some(crate::act::rules::Action::Signal { signal: s.into() });
                        ui.close();
                    }
                }
            });
        });
    }
    // The result of the last action asked for here, for a minute, in plain words.
    let last = m.activity.iter().rev().find(|a| {
        a.rule == "manual"
            && now - a.unix_ms <= ACTION_RESULT_SHOWN_MS
            && matches!(&a.target, crate::act::rules::eval::Target::Process { key, .. } if *key == row.series_key())
    });
    if let Some(a) = last {
        use crate::act::rules::action::Outcome;
        let when = format::clock(a.unix_ms);
        let text = match a.outcome {
            Outcome::Acted if row.exited_at_ms.is_some() => {
                format!("{when}: {} — the process has exited.", a.detail)
            }
            Outcome::Acted => format!(
                "{when}: {} — it is still running, holding {}.",
                a.detail,
                format::opt_bytes(units, row.used_bytes)
            ),
            Outcome::WouldAct => format!("{when}: dry run, nothing was sent — {}", a.detail),
            Outcome::Skipped => format!("{when}: not done — {}", a.detail),
            Outcome::Failed => format!("{when}: failed — {}", a.detail),
        };
        let warn = matches!(a.outcome, Outcome::Failed | Outcome::Skipped);
        ui.add(
            egui::Label::new(if warn {
                RichText::new(text).color(widgets::WARN)
            } else {
                RichText::new(text)
            })
            .wrap(),
        );
    }
    ui.separator();
    egui::Grid::new("detail")
        .num_columns(2)
        .spacing([12.0, 4.0])
        .show(ui, |ui| {
            let kv = |ui: &mut Ui, k: &str, v: String| {
                ui.label(RichText::new(k).weak());
                ui.add(egui::Label::new(RichText::new(v).monospace()).wrap());
                ui.end_row();
            };
            kv(
                ui,
                "User",
                if row.info.user.is_empty() {
                    "—".into()
                } else {
                    row.info.user.clone()
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
                row.container_label().unwrap_or_else(|| "—".into()),
            );
            if let Some(pod) = &row.info.pod {
                kv(ui, "Pod", pod.clone());
            }
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
    let cmd = if row.info.cmdline.is_empty() {
        "—".to_string()
    } else {
        row.info.cmdline.clone()
    };
    egui::Frame::group(ui.style()).show(ui, |ui| {
        ui.set_width(ui.available_width());
        ui.add(
            egui::Label::new(RichText::new(cmd).monospace())
                .wrap()
                .selectable(true),
        );
    });
    if let Some(t) = &row.torch {
        let rising = leak.is_some() || row.delta_1m_bytes.is_some_and(|d| d > 0);
        super::torch_pane::section(
            ui,
            m,
            row,
            t,
            units,
            now,
            rising,
            (can_act && row.exited_at_ms.is_none()).then_some(&mut asked),
        );
    }
    if let (Some(r), Some(a)) = (request, asked) {
        *r = Some(a);
    }
    ui.add_space(6.0);
    ui.label(RichText::new("GPU memory over its lifetime").strong());
    let mut marks: Vec<(f64, String)> = Vec::new();
    for e in &episodes {
        marks.push((e.info.since_ms as f64 / 1000.0, "leak began".into()));
        if let Some(t) = e.ended_ms {
            marks.push((
                t as f64 / 1000.0,
                if e.open_at_end {
                    "recording ended".into()
                } else {
                    "leak ended".into()
                },
            ));
        }
    }
    graph::process_graph(ui, m, row.series_key(), units, cache, &marks);
    open
}
