//! The detail pane of one process: identity, command line, container, its GPU memory over its
//! whole lifetime, peak and current.
//!
//! Top to bottom: what needs attention (exited, orphaned, leaking, parked), the actions and
//! their result (in a slot of fixed height, so a result appearing moves nothing), the facts,
//! the lifetime graph (a usable height even at 1280 × 800), then the command line and the
//! PyTorch section.

use egui::{RichText, Ui};

use super::action_status::State;
use super::graph::{self, GraphCache};
use super::ui_command::UiCommand;
use super::widgets;
use crate::engine::view::{Monitor, ProcessRow};
use crate::model::format::{self, Units};
use crate::model::UnixMs;

/// What the pane shows besides the row.
pub(crate) struct PaneInputs<'a> {
    /// Units chosen (Auto: from the process's peak).
    pub units: Units,
    /// The clock.
    pub now: UnixMs,
    /// Its leak badge, when it is growing.
    pub leak: Option<super::leaks::LeakBadge>,
    /// Its last manual action and how it stands.
    pub result: Option<State>,
    /// The host the View is about when it is an agent's (`None`: this computer).
    pub host: Option<&'a str>,
    /// Receives the action the user asks for (a [`UiCommand::AskAction`]); `None` where
    /// actions are off (a recorded session, a lost agent).
    pub request: Option<&'a mut Vec<UiCommand>>,
    /// The engine that owns the processes does not answer (an agent lost): its last figures
    /// stand, and nothing can be asked of it.
    pub offline: bool,
}

/// Draws the pane; returns false when the user closed it.
pub(crate) fn pane(
    ui: &mut Ui,
    m: &Monitor,
    row: &ProcessRow,
    cache: &mut GraphCache,
    input: PaneInputs<'_>,
) -> bool {
    // One unit for the pane's sizes (Auto: from the process's peak).
    let units = input.units.for_largest(row.peak_bytes);
    let now = input.now;
    let open = header(ui, row);
    notices(ui, m, row, units, input.leak, input.host, input.now);
    let episodes: Vec<_> = m.leaks_of(&row.series_key()).collect();
    if !episodes.is_empty() && input.leak.is_none() {
        ui.label(
            RichText::new(format!(
                "{} past leak episode(s), marked on the graph",
                episodes.len()
            ))
            .color(super::leaks::leak_color(ui.visuals().dark_mode)),
        );
    }
    // What the user asks for in this pane (the buttons here and the PyTorch section's).
    let can_act = input.request.is_some() && row.exited_at_ms.is_none();
    let mut asked: Vec<UiCommand> = Vec::new();
    if can_act {
        action_buttons(ui, row, &mut asked);
        result_slot(ui, row, units, input.result.as_ref());
    } else if row.exited_at_ms.is_none() {
        ui.label(
            RichText::new(if input.offline {
                "The agent does not answer: no actions until it is back"
            } else {
                "Recorded session: no actions (this PID may belong to another process now)"
            })
            .weak(),
        );
    }
    ui.separator();
    facts(ui, row, units, now, input.request.is_none());
    lifetime_graph(ui, m, row, &episodes, units, cache);
    command_line(ui, row);
    if let Some(t) = &row.torch {
        let rising = input.leak.is_some() || row.delta_1m_bytes.is_some_and(|d| d > 0);
        super::torch_pane::section(
            ui,
            m,
            row,
            t,
            units,
            now,
            rising,
            can_act.then_some(&mut asked),
        );
    }
    if let Some(r) = input.request {
        r.extend(asked);
    }
    open
}

/// The swatch, name and PID, and Close; false when closed.
fn header(ui: &mut Ui, row: &ProcessRow) -> bool {
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
    open
}

/// Exited (and left a nearly full GPU: an OOM suspected), an orphaned PID, a leak, parked.
fn notices(
    ui: &mut Ui,
    m: &Monitor,
    row: &ProcessRow,
    units: Units,
    leak: Option<super::leaks::LeakBadge>,
    host: Option<&str>,
    now: UnixMs,
) {
    if let Some(t) = row.exited_at_ms {
        ui.label(
            RichText::new(format!(
                "Exited at {} (last seen on the GPU)",
                format::moment(t, now)
            ))
            .color(widgets::warn(ui)),
        );
    }
    oom_notice(ui, m, row, now);
    orphan_notice(ui, m, row, units, host);
    if let Some(b) = leak {
        leak_box(ui, row, units, &b, now);
    }
    if let Some(park) = row.parked.filter(|_| row.exited_at_ms.is_none()) {
        ui.label(
            RichText::new(park.describe())
                .color(widgets::parked_color(ui.visuals().dark_mode))
                .strong(),
        );
        ui.label(widgets::hint(parked_by(m, row.key, park.since_ms)));
    }
}

/// Who parked a process, from the engine's activity: a rule, the OOM guard or a manual
/// action; else not this engine (the GUI review: the demo's scheduled park showed with
/// nothing saying who made it).
fn parked_by(m: &Monitor, key: crate::model::ProcessKey, since_ms: UnixMs) -> String {
    use crate::act::rules::eval::Target;
    // The park's own entry (done or under way: not one skipped, failed or a dry run's), at
    // most a minute before its state says it began.
    let ours = m.activity.iter().rev().find(|a| {
        a.unix_ms >= since_ms - 60_000
            && a.action.starts_with("park")
            && a.outcome == crate::model::outcome::Outcome::Acted
            && matches!(&a.target, Target::Process { key: (k, _), .. } if *k == key)
    });
    match ours {
        Some(a) if a.rule == "manual" => {
            "Parked by a manual action (the Activity tab has it).".into()
        }
        Some(a) => format!("Parked by “{}” (the Activity tab has it).", a.rule),
        None if m.source.as_ref().is_some_and(|s| s.is_simulated()) => {
            "Parked by the demo's script (the simulated GPUs park this process on a schedule)."
                .into()
        }
        None => "Not parked by this engine's rules, guard or actions: by `vramwarden park` on \
                 the command line, cuda-checkpoint or another tool."
            .into(),
    }
}

/// The OOM suspected when the process left a nearly full GPU: the post-mortem says so here
/// too (it was shown only in the Leaks tab's memory events).
fn oom_notice(ui: &mut Ui, m: &Monitor, row: &ProcessRow, now: UnixMs) {
    if let Some(o) = m.ooms.iter().find(|o| {
        o.device_index == row.device_index
            && o.victims
                .iter()
                .any(|v| v.pid == row.key.pid && v.start_time_ms == row.key.start_time_ms)
    }) {
        ui.label(
            RichText::new(format!(
                "⚠ OOM suspected: it left GPU {} at {} while the GPU was {:.1} % full (Leaks tab, Memory events)",
                o.device_index,
                format::moment(o.at_ms, now),
                o.used_pct
            ))
            .color(widgets::warn(ui)),
        );
    }
}

/// A live process whose PID the driver lists on its GPU among memory held by processes not
/// running here: what holds it and how to free it.
fn orphan_notice(ui: &mut Ui, m: &Monitor, row: &ProcessRow, units: Units, host: Option<&str>) {
    if let Some((o, g)) = m
        .orphans
        .iter()
        .filter(|g| g.device_index == row.device_index && row.exited_at_ms.is_none())
        .find_map(|g| g.pids.iter().find(|o| o.pid == row.key.pid).map(|o| (o, g)))
    {
        let place = super::processes::place(host);
        ui.label(
            RichText::new(format!(
                "⚠ {}: GPU {} has {} held by processes not running {place}. To free it: {}.",
                o.label_at(&place),
                g.device_index,
                units.bytes(g.total_bytes),
                crate::front::report_words::remedy(g, crate::front::report_words::Where::of(host))
            ))
            .color(widgets::warn(ui)),
        );
    }
}

/// The framed leak notice: rate, since when, how much, when the GPU is full.
fn leak_box(ui: &mut Ui, row: &ProcessRow, units: Units, b: &super::leaks::LeakBadge, now: UnixMs) {
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
            let grown = units.bytes((b.grown_mib.max(0.0) * crate::model::MIB as f64) as u64);
            ui.label(format!(
                "Growing at {} since {} ({}).",
                format::rate(b.rate_mib_per_min),
                format::moment(b.since_ms, now),
                if b.grown_to_its_end {
                    format!("+{grown} by the episode's end, later in the session")
                } else {
                    format!("+{grown} so far")
                }
            ));
            for line in b.full_in_sentences(row.device_index) {
                ui.label(line);
            }
        });
}

/// Terminate, Park or Resume, Kill, Send signal….
fn action_buttons(ui: &mut Ui, row: &ProcessRow, request: &mut Vec<UiCommand>) {
    ui.horizontal(|ui| {
        if ui
            .button("Terminate")
            .on_hover_text("SIGTERM, then SIGKILL after 10 s if it still holds GPU memory (Delete)")
            .clicked()
        {
            request.push(UiCommand::AskAction(
                row.series_key(),
                crate::act::rules::Action::Terminate {
                    grace_seconds: crate::act::rules::model::DEFAULT_GRACE_SECONDS,
                },
            ));
        }
        park_button(ui, row, request);
        if ui.button("Kill").on_hover_text("SIGKILL").clicked() {
            request.push(UiCommand::AskAction(
                row.series_key(),
                crate::act::rules::Action::Signal {
                    signal: "SIGKILL".into(),
                },
            ));
        }
        ui.menu_button("Send signal…", |ui| {
            for s in [
                "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGSTOP", "SIGCONT",
            ] {
                if ui.button(s).clicked() {
                    request.push(UiCommand::AskAction(
                        row.series_key(),
                        crate::act::rules::Action::Signal { signal: s.into() },
                    ));
                    ui.close();
                }
            }
        });
    });
}

/// Park, or Resume for a parked process; for a simulated process, which nothing is sent to,
/// a note saying so instead (readable, where a disabled button's text would be faint).
fn park_button(ui: &mut Ui, row: &ProcessRow, request: &mut Vec<UiCommand>) {
    if row.simulated {
        let what = if row.parked.is_some() {
            "No resume (simulated)"
        } else {
            "No park (simulated)"
        };
        ui.label(what)
            .on_hover_text(super::processes::SIMULATED_PARK);
        return;
    }
    match row.parked {
        Some(_) => {
            if ui
                .button("Resume")
                .on_hover_text("Move its memory back to the GPU; it goes on")
                .clicked()
            {
                request.push(UiCommand::AskAction(
                    row.series_key(),
                    crate::act::rules::Action::Resume,
                ));
            }
        }
        None => {
            let gib = row.used_bytes.unwrap_or(0) as f64 / crate::model::GIB as f64;
            if ui
                .button("Park")
                .on_hover_text(format!(
                    "Move its {gib:.1} GiB to host memory (needs as much free host memory; the confirmation says how long): it waits, not killed, until resumed"
                ))
                .clicked()
            {
                request.push(UiCommand::AskAction(row.series_key(), crate::act::rules::Action::Park));
            }
        }
    }
}

/// Lines of text the action result's slot always takes, so the graph below never moves.
const RESULT_SLOT_LINES: f32 = 2.0;

/// The result of the last action on this process, in plain words, in a slot of fixed height
/// (a faint line saying what it is for when there is none); a longer sentence is cut with its
/// whole text on hover.
fn result_slot(ui: &mut Ui, row: &ProcessRow, units: Units, result: Option<&State>) {
    let line = ui.text_style_height(&egui::TextStyle::Body) + ui.spacing().item_spacing.y;
    let h = line * RESULT_SLOT_LINES;
    let w = ui.available_width();
    ui.allocate_ui_with_layout(
        egui::vec2(w, h),
        egui::Layout::top_down(egui::Align::Min),
        |ui| {
            ui.set_min_size(egui::vec2(w, h));
            ui.set_max_height(h);
            let Some(st) = result else {
                // The slot keeps its height; it says what it is for.
                ui.label(
                    RichText::new("No action on this process yet: what one does shows here.")
                        .weak(),
                );
                return;
            };
            let text = st.sentence(
                row.exited_at_ms.is_some(),
                &format::opt_bytes(units, row.used_bytes),
            );
            let rich = if st.is_warning() {
                RichText::new(text.clone()).color(widgets::warn(ui))
            } else {
                RichText::new(text.clone())
            };
            let mut job = egui::text::LayoutJob::default();
            rich.append_to(
                &mut job,
                ui.style(),
                egui::FontSelection::Default,
                egui::Align::Min,
            );
            job.wrap = egui::text::TextWrapping {
                max_width: w,
                max_rows: RESULT_SLOT_LINES as usize,
                break_anywhere: false,
                overflow_character: Some('…'),
            };
            ui.add(egui::Label::new(job)).on_hover_text(text);
        },
    );
}

/// User, GPU, started, container, pod, memory now, peak (the session's when `recorded`), change
/// over the last minute.
fn facts(ui: &mut Ui, row: &ProcessRow, units: Units, now: UnixMs, recorded: bool) {
    egui::Grid::new("detail")
        .num_columns(2)
        .spacing([12.0, 4.0])
        .show(ui, |ui| {
            let kv = |ui: &mut Ui, k: &str, v: String| {
                ui.label(RichText::new(k).weak());
                ui.add(egui::Label::new(RichText::new(v).monospace()).wrap());
                ui.end_row();
            };
            let user = if row.info.user.is_empty() {
                "—".into()
            } else {
                row.info.user.clone()
            };
            kv(ui, "User", user);
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
            // A recorded session's rows are as at its end: the peak is the whole session's.
            let peak = if recorded {
                "Peak in the session"
            } else {
                "Peak"
            };
            kv(ui, peak, units.bytes(row.peak_bytes));
            kv(ui, "Δ last minute", last_minute(row, units, now));
        });
}

/// Its change over the last minute; while a live process has been seen for less than a
/// minute, how long it has been seen instead ("— (seen for 34s)"), so the dash is not read as
/// "no change".
fn last_minute(row: &ProcessRow, units: Units, now: UnixMs) -> String {
    let seen = now - row.first_seen_ms;
    match row.delta_1m_bytes {
        Some(d) => units.delta(d),
        None if row.exited_at_ms.is_none() && (0..60_000).contains(&seen) => {
            format!("— (seen for {})", format::duration(seen))
        }
        None => "—".into(),
    }
}

/// The command line, selectable, wrapped in a frame.
fn command_line(ui: &mut Ui, row: &ProcessRow) {
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
}

/// The lifetime graph's title: "over its lifetime" where the graph reaches back to its start,
/// else since when it was watched (the window started after it, or the history no longer
/// holds its start).
fn lifetime_title(m: &Monitor, row: &ProcessRow) -> String {
    let held_from = m.history.span().map_or(row.first_seen_ms, |(a, _)| a);
    let from = row.first_seen_ms.max(held_from);
    let started = row.info.start_time_ms;
    // A process is first seen within a sample or two of its start.
    let slack = i64::try_from(m.interval_ms)
        .unwrap_or(i64::MAX)
        .saturating_mul(2)
        .saturating_add(1000);
    if started > 0 && from.saturating_sub(started) > slack {
        format!(
            "GPU memory since {} (it started {}, before it was watched)",
            format::moment(from, from),
            format::moment(started, from)
        )
    } else {
        "GPU memory over its lifetime".into()
    }
}

/// Its GPU memory over its lifetime, leak episodes marked.
fn lifetime_graph(
    ui: &mut Ui,
    m: &Monitor,
    row: &ProcessRow,
    episodes: &[&crate::engine::view::LeakRecord],
    units: Units,
    cache: &mut GraphCache,
) {
    ui.add_space(6.0);
    ui.label(RichText::new(lifetime_title(m, row)).strong());
    let mut marks: Vec<(f64, String)> = Vec::new();
    for e in episodes {
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
}
