//! One rule's editor: its conditions, containers and schedule, and its action.

use egui::{RichText, Ui};

use super::fields::{field_errors, opt_num, opt_text};
use crate::act::rules::Action;

/// A target "Test this rule" found: what it is, and why it would be skipped (`None`: acted on).
pub(crate) type TestedTarget = (String, Option<String>);

/// The rule `i`'s editor: its summary, Test this rule, and its fields.
pub(super) fn rule_editor(
    ui: &mut Ui,
    c: &mut crate::engine::settings::Cleanup,
    i: usize,
    tested: &mut Option<(usize, Vec<TestedTarget>, String)>,
    out: &mut Vec<crate::front::gui::ui_command::UiCommand>,
) {
    let safety = crate::act::rules::action::Safety {
        global_dry_run: c.dry_run,
        protected: c.protected.clone(),
        remote: crate::act::rules::action::RemotePolicy::default(),
    };
    let r = &mut c.rules[i];
    let problems = r.problems();
    summary(ui, r, i);
    test_row(ui, r, i, &safety, tested, out);
    if let Some((j, found, _)) = &*tested {
        if *j == i {
            tested_targets(ui, found);
        }
    }
    fields(ui, r, &problems, i);
}

/// The rule's summary, in a room of one height (three lines; a longer one scrolls in it)
/// kept while typing and while conditions are ticked, so the fields below stay put under the
/// pointer; with a warning when no condition is ticked.
fn summary(ui: &mut Ui, r: &crate::act::rules::Rule, i: usize) {
    let summary_h = ui.text_style_height(&egui::TextStyle::Body) * 3.0 + 6.0;
    egui::ScrollArea::vertical()
        .id_salt(("rule-summary", i))
        .max_height(summary_h)
        .min_scrolled_height(summary_h)
        .auto_shrink([false, false])
        .show(ui, |ui| {
            ui.add(egui::Label::new(summary_words(ui, &r.describe_body(), r.dry_run)).wrap());
            // Inside the summary's fixed room: the fields below stay put when it goes.
            if r.matches_always() {
                ui.colored_label(
                    crate::front::gui::widgets::warn(ui),
                    "No condition yet: it would match every GPU at every sample. Tick one below.",
                );
            }
        });
}

/// The "Test this rule" button (a click asks the engine, through `out`) and, once the rule
/// `i` was tested, what the test found in a line.
fn test_row(
    ui: &mut Ui,
    r: &crate::act::rules::Rule,
    i: usize,
    safety: &crate::act::rules::action::Safety,
    tested: &mut Option<(usize, Vec<TestedTarget>, String)>,
    out: &mut Vec<crate::front::gui::ui_command::UiCommand>,
) {
    ui.horizontal(|ui| {
        if ui
            .button("Test this rule")
            .on_hover_text("Which current processes (or GPUs) it would match right now, ignoring hold time and cooldown, and which of them its safety rules would skip")
            .clicked()
        {
            // Tested by the engine that owns the processes (an agent's for a remote
            // window); the matches come back as its reply.
            out.push(crate::front::gui::ui_command::UiCommand::TestRule(
                i,
                crate::engine::EngineCommand::TestRule {
                    rule: Box::new(r.clone()),
                    safety: Some(safety.clone()),
                },
            ));
            *tested = None;
            ui.ctx().request_repaint();
        }
        if let Some((j, found, detail)) = &*tested {
            if *j == i {
                ui.label(test_verdict(found, detail));
            }
        }
    });
}

/// What a test found, in a line: how many targets the rule matches and how many it would
/// act on; the engine's `detail` (why nothing matches) when none.
fn test_verdict(found: &[TestedTarget], detail: &str) -> String {
    let acted = found.iter().filter(|(_, w)| w.is_none()).count();
    match (found.len(), acted) {
        // The engine's words: why nothing matches.
        (0, _) => detail.to_string(),
        (n, a) if a == n => format!("It matches {n} right now, and would act on each:"),
        (n, 0) => format!("It matches {n} right now, but would skip every one:"),
        (n, a) => format!("It matches {n} right now; it would act on {a}:"),
    }
}

/// The targets a test found, one a line: ✔ acted on, or ✖ skipped and why.
fn tested_targets(ui: &mut Ui, found: &[TestedTarget]) {
    for (f, why) in found {
        match why {
            None => ui.monospace(format!("  ✔ {f}")),
            Some(w) => ui.label(
                RichText::new(format!("  ✖ {f} — skipped: {w}"))
                    .monospace()
                    .weak(),
            ),
        };
    }
}

/// The rule's fields in a grid: name, mode, conditions, action and cooldown, each with its
/// problems under it.
fn fields(
    ui: &mut Ui,
    r: &mut crate::act::rules::Rule,
    problems: &[(&'static str, String)],
    i: usize,
) {
    egui::Grid::new("rule-edit")
        .num_columns(2)
        .spacing([10.0, 6.0])
        .show(ui, |ui| {
            ui.label("Name");
            ui.vertical(|ui| {
                ui.add(
                    egui::TextEdit::singleline(&mut r.name)
                        .hint_text("rule name")
                        .desired_width(260.0),
                );
                field_errors(ui, problems, &["name"]);
            });
            ui.end_row();
            ui.label("Mode");
            ui.horizontal_wrapped(|ui| {
                ui.checkbox(&mut r.enabled, "Enabled");
                ui.checkbox(&mut r.dry_run, "Dry run (log only)");
                ui.checkbox(
                    &mut r.allow_other_users,
                    "May act on other users' processes (as root)",
                );
            });
            ui.end_row();
            // At the top of its list of conditions, not halfway down it.
            ui.vertical(|ui| ui.add(egui::Label::new("Conditions").extend()));
            ui.vertical(|ui| conditions(ui, &mut r.conditions, problems, i));
            ui.end_row();
            ui.label("Action");
            ui.vertical(|ui| action_editor(ui, &mut r.action, problems));
            ui.end_row();
            ui.label("Cooldown");
            ui.vertical(|ui| {
                ui.add(
                    egui::DragValue::new(&mut r.cooldown_minutes)
                        .speed(1.0)
                        .suffix(" min per target"),
                );
                field_errors(ui, problems, &["cooldown_minutes"]);
            });
            ui.end_row();
        });
}

/// A rule's summary in italics, its " — DRY RUN" upright: an italic ")" leant onto the dash
/// and read as "per process)— DRY RUN".
fn summary_words(ui: &Ui, body: &str, dry_run: bool) -> egui::text::LayoutJob {
    let tail = dry_run.then(|| RichText::new(" — DRY RUN").strong());
    let body = RichText::new(body).italics();
    crate::front::gui::widgets::rich_job(ui, std::iter::once(body).chain(tail))
}

/// A numeric condition's row: label, field, (default when ticked, unit), its problems' key.
type NumCond<'a> = (
    &'static str,
    &'a mut Option<f64>,
    (f64, &'static str),
    &'static str,
);
/// A text condition's row: label, field, hint, its problems' key.
type TextCond<'a> = (
    &'static str,
    &'a mut Option<String>,
    &'static str,
    &'static str,
);

/// A rule's conditions, each with its own problems under it.
fn conditions(
    ui: &mut Ui,
    k: &mut crate::act::rules::Conditions,
    problems: &[(&'static str, String)],
    i: usize,
) {
    memory_conditions(ui, k, problems);
    who_conditions(ui, k, problems);
    age_and_user_conditions(ui, k, problems);
    containers_and_schedule(ui, k, problems, i);
    gpu_and_hold(ui, k, problems);
}

/// The memory conditions: the process's, the GPU's use, free memory and forecast, idleness
/// and leaking; each ticked on with its default.
fn memory_conditions(
    ui: &mut Ui,
    k: &mut crate::act::rules::Conditions,
    problems: &[(&'static str, String)],
) {
    let memory: [NumCond<'_>; 6] = [
        (
            "Process GPU memory ≥",
            &mut k.process_memory_min_mib,
            (8192.0, " MiB"),
            "process_memory_min_mib",
        ),
        (
            "GPU used ≥",
            &mut k.device_used_min_pct,
            (95.0, " %"),
            "device_used_min_pct",
        ),
        (
            "GPU free ≤",
            &mut k.device_free_max_mib,
            (1024.0, " MiB"),
            "device_free_max_mib",
        ),
        (
            "GPU full in <",
            &mut k.device_full_within_minutes,
            (30.0, " min"),
            "device_full_within_minutes",
        ),
        (
            "GPU-idle for ≥",
            &mut k.idle_min_minutes,
            (30.0, " min"),
            "idle_min_minutes",
        ),
        (
            "Leaking for ≥",
            &mut k.leaking_min_minutes,
            (10.0, " min"),
            "leaking_min_minutes",
        ),
    ];
    for (label, v, default, key) in memory {
        opt_num(ui, label, v, default, problems, key);
    }
}

/// Whose process: its name, its command line, its user.
fn who_conditions(
    ui: &mut Ui,
    k: &mut crate::act::rules::Conditions,
    problems: &[(&'static str, String)],
) {
    let who: [TextCond<'_>; 4] = [
        (
            "Name matches",
            &mut k.name_regex,
            "regular expression",
            "name_regex",
        ),
        (
            "Command line matches",
            &mut k.cmdline_regex,
            "regular expression",
            "cmdline_regex",
        ),
        ("User is", &mut k.user_is, "user name", "user_is"),
        (
            "User is not",
            &mut k.user_is_not,
            "user name",
            "user_is_not",
        ),
    ];
    for (label, v, hint, key) in who {
        opt_text(ui, label, v, hint, problems, key);
    }
}

/// The process's age and its user's total on the GPU.
fn age_and_user_conditions(
    ui: &mut Ui,
    k: &mut crate::act::rules::Conditions,
    problems: &[(&'static str, String)],
) {
    let more: [NumCond<'_>; 2] = [
        (
            "Running for ≥",
            &mut k.age_min_minutes,
            (60.0, " min"),
            "age_min_minutes",
        ),
        (
            "User's total on the GPU ≥",
            &mut k.user_total_min_mib,
            (40960.0, " MiB"),
            "user_total_min_mib",
        ),
    ];
    for (label, v, default, key) in more {
        opt_num(ui, label, v, default, problems, key);
    }
}

/// Only on one GPU, and how long all the conditions must hold.
fn gpu_and_hold(
    ui: &mut Ui,
    k: &mut crate::act::rules::Conditions,
    problems: &[(&'static str, String)],
) {
    ui.horizontal(|ui| {
        let mut on = k.gpu.is_some();
        if ui.checkbox(&mut on, "Only on GPU").changed() {
            k.gpu = on.then_some(k.gpu.unwrap_or(0));
        }
        if let Some(g) = k.gpu.as_mut() {
            ui.add(egui::DragValue::new(g).range(0..=63));
        }
    });
    ui.horizontal(|ui| {
        ui.label("All of it held for");
        ui.add(
            egui::DragValue::new(&mut k.hold_seconds)
                .speed(1.0)
                .suffix(" s"),
        );
    });
    field_errors(ui, problems, &["hold_seconds", "gpu"]);
}

/// Containers and schedules: folded away unless the rule uses them.
fn containers_and_schedule(
    ui: &mut Ui,
    k: &mut crate::act::rules::Conditions,
    problems: &[(&'static str, String)],
    i: usize,
) {
    let used = k.container_glob.is_some()
        || k.pod_glob.is_some()
        || k.container_total_min_mib.is_some()
        || k.at.is_some()
        || k.every_hours.is_some();
    egui::CollapsingHeader::new("Containers and schedule")
        .id_salt(("rule-containers-schedule", i))
        .default_open(used)
        .show(ui, |ui| {
            opt_text(
                ui,
                "Container matches",
                &mut k.container_glob,
                "pattern, e.g. jupyter-*",
                problems,
                "container_glob",
            );
            opt_text(
                ui,
                "Pod matches",
                &mut k.pod_glob,
                "pattern, e.g. ml/trainer-* or jupyter-*",
                problems,
                "pod_glob",
            );
            opt_num(
                ui,
                "Container's total on the GPU ≥",
                &mut k.container_total_min_mib,
                (20480.0, " MiB"),
                problems,
                "container_total_min_mib",
            );
            opt_text(
                ui,
                "Daily at (local time)",
                &mut k.at,
                "04:00 or 04:00-04:30",
                problems,
                "at",
            );
            opt_num(
                ui,
                "At most once every",
                &mut k.every_hours,
                (6.0, " h"),
                problems,
                "every_hours",
            );
        });
}

/// A rule's action: its kind and that kind's fields.
fn action_editor(ui: &mut Ui, action: &mut Action, problems: &[(&'static str, String)]) {
    action_kind(ui, action);
    action_fields(ui, action);
    field_errors(ui, problems, &["action"]);
}

/// The action's kind, one radio button each; a new choice starts that kind's action anew.
fn action_kind(ui: &mut Ui, action: &mut Action) {
    let kind = crate::act::rules::model::ActionKind::of(action);
    let mut k = kind;
    ui.horizontal_wrapped(|ui| {
        for choice in crate::act::rules::model::ActionKind::ALL {
            ui.radio_value(&mut k, choice, choice.label());
        }
    });
    if k != kind {
        *action = k.starting_action();
    }
}

/// The fields (or the words) of the action's kind.
fn action_fields(ui: &mut Ui, action: &mut Action) {
    match action {
        Action::Notify | Action::ReleaseCache => {}
        Action::Park => {
            ui.label("Moves its GPU memory to host memory through the driver's checkpoint API; it waits, not killed (needs as much free host memory).");
        }
        Action::Resume => {
            ui.label("Moves a parked process's memory back to the GPU; it goes on.");
        }
        Action::LimitMemory { gib } => {
            ui.horizontal(|ui| {
                ui.label("Memory fraction for");
                ui.add(
                    egui::DragValue::new(gib)
                        .speed(0.5)
                        .range(0.0..=crate::act::rules::model::MAX_LIMIT_GIB)
                        .suffix(" GiB"),
                );
                ui.label("(through its vramwarden_torch companion)");
            });
        }
        Action::Signal { signal } => {
            ui.add(
                egui::TextEdit::singleline(signal)
                    .hint_text("SIGUSR1")
                    .desired_width(120.0),
            );
        }
        Action::Terminate { grace_seconds } => {
            ui.horizontal(|ui| {
                ui.label("SIGTERM, then SIGKILL after");
                ui.add(egui::DragValue::new(grace_seconds).speed(1.0).suffix(" s"));
                ui.label("if it still holds GPU memory");
            });
        }
        Action::RunCommand {
            argv,
            timeout_seconds,
        } => command_fields(ui, argv, timeout_seconds),
    }
}

/// A command's fields: its line (split at spaces into its arguments) and its timeout.
fn command_fields(ui: &mut Ui, argv: &mut Vec<String>, timeout_seconds: &mut f64) {
    let mut line = argv.join(" ");
    if ui
        .add(
            egui::TextEdit::singleline(&mut line)
                .hint_text("systemctl --user restart jupyter  ({pid} {gpu} {user} {name})")
                .desired_width(420.0),
        )
        .changed()
    {
        *argv = line.split_whitespace().map(str::to_string).collect();
    }
    ui.horizontal(|ui| {
        ui.label("Timeout");
        ui.add(
            egui::DragValue::new(timeout_seconds)
                .speed(1.0)
                .suffix(" s"),
        );
    });
}
