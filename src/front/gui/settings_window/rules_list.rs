//! The Rules section's list: protected names, the rules with their buttons, adding and moving rules.

use egui::{RichText, Ui};

use crate::act::rules::{Action, Rule};
use crate::front::gui::widgets;

/// The protected names, wrapped over as many lines as the list needs, so no name is hidden.
/// While the field has the focus its own text is kept, so a comma typed before the next name
/// stays.
pub(super) fn protected_names(
    ui: &mut Ui,
    protected: &mut Vec<String>,
    typing: &mut Option<String>,
) {
    let label = ui.label("Protected names (never acted on; comma-separated)");
    let mut text = typing.take().unwrap_or_else(|| protected.join(", "));
    let resp = ui
        .add(
            egui::TextEdit::multiline(&mut text)
                .desired_rows(1)
                .desired_width(ui.available_width().max(200.0))
                .hint_text("comma-separated process names")
                .return_key(None),
        )
        .labelled_by(label.id);
    if resp.changed() {
        *protected = text
            .split([',', '\n'])
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
    }
    if resp.has_focus() {
        *typing = Some(text);
    }
}

/// The rules, one line each; the button pressed on a line (its index and what). The rule
/// `deleting` names asks on its line whether to delete it.
pub(super) fn rules_list(
    ui: &mut Ui,
    c: &mut crate::engine::settings::Cleanup,
    editing: &mut Option<usize>,
    deleting: Option<usize>,
) -> Option<(usize, &'static str)> {
    let mut op: Option<(usize, &'static str)> = None;
    // Scrolls sideways when narrower than its lines (long names and the row's buttons) rather
    // than widening the window.
    egui::ScrollArea::horizontal()
        .id_salt("rules-list-scroll")
        .auto_shrink([false, true])
        .show(ui, |ui| {
            // One line per rule, each laid out by itself: a grid laid a new rule's line out
            // with the old column widths (its name under its DRY RUN badge) until the next
            // frame.
            let last = c.rules.len().saturating_sub(1);
            for (i, r) in c.rules.iter_mut().enumerate() {
                ui.horizontal(|ui| {
                    ui.checkbox(&mut r.enabled, "on");
                    // The row's buttons before its name: a long name never pushes them
                    // out of the window.
                    let asked = buttons_or_question(ui, deleting == Some(i), i, last);
                    if let Some(what) = asked {
                        op = Some((i, what));
                    }
                    rule_name(ui, r, i, c.dry_run, editing);
                });
            }
        });
    if c.rules.is_empty() {
        ui.label(
            RichText::new("No rules yet. A new rule starts switched off and as a dry run.").weak(),
        );
    }
    op
}

/// The buttons of rule `i`'s line (of `last` + 1): Up, Down, Duplicate, Delete; the one
/// clicked, if one was.
fn line_buttons(ui: &mut Ui, i: usize, last: usize) -> Option<&'static str> {
    let mut op = None;
    for (label, what, hover) in [
        ("Up", "up", "Move this rule up (rules are checked in order)"),
        ("Down", "down", "Move this rule down"),
        ("Duplicate", "dup", "Add a copy of this rule below it"),
        ("Delete…", "ask-del", "Remove this rule (asks first)"),
    ] {
        // The first rule cannot go up, nor the last down: the button is
        // left out, its room kept (the row's other buttons stay in line).
        let can = !(what == "up" && i == 0 || what == "down" && i == last);
        if ui
            .add_visible(can, egui::Button::new(label))
            .on_hover_text(hover)
            .clicked()
        {
            op = Some(what);
        }
    }
    op
}

/// Rule `i`'s buttons, or the question in their place while its Delete is `asked`, in the
/// room the buttons take: the rule's name stays where it was (it moved left under the
/// shorter question).
fn buttons_or_question(ui: &mut Ui, asked: bool, i: usize, last: usize) -> Option<&'static str> {
    let width_id = egui::Id::unique("rules-line-buttons-width");
    let start = ui.cursor().min.x;
    let op = if asked {
        delete_question(ui)
    } else {
        line_buttons(ui, i, last)
    };
    let used = ui.cursor().min.x - start;
    if !asked {
        ui.data_mut(|d| d.insert_temp(width_id, used));
    } else if let Some(w) = ui.data(|d| d.get_temp::<f32>(width_id)) {
        ui.add_space((w - used).max(0.0));
    }
    op
}

/// In place of a rule's buttons while its Delete is asked: Delete or Keep.
fn delete_question(ui: &mut Ui) -> Option<&'static str> {
    ui.label(RichText::new("Delete this rule?").color(widgets::warn(ui)));
    if ui
        .button("Delete")
        .on_hover_text("Remove it from the rules (Save to keep the change)")
        .clicked()
    {
        return Some("del");
    }
    ui.button("Keep").clicked().then_some("keep")
}

/// Rule `i`'s name (a click edits it; in the warning colour when invalid), its DRY RUN badge
/// (its own or every rule's, `global_dry_run`) and "invalid".
fn rule_name(
    ui: &mut Ui,
    r: &crate::act::rules::Rule,
    i: usize,
    global_dry_run: bool,
    editing: &mut Option<usize>,
) {
    let bad = !r.problems().is_empty();
    let mut name = RichText::new(&r.name);
    if bad {
        name = name.color(widgets::warn(ui));
    }
    if ui.selectable_label(*editing == Some(i), name).clicked() {
        *editing = Some(i);
    }
    if r.dry_run || global_dry_run {
        ui.label(
            RichText::new(" DRY RUN ")
                .color(egui::Color32::from_rgb(20, 20, 20))
                .background_color(egui::Color32::from_rgb(235, 200, 90))
                .small(),
        );
    }
    if bad {
        ui.label(RichText::new("invalid").color(widgets::warn(ui)).small());
    }
}

/// Moves, duplicates or deletes a rule as its line's button asked (a Delete is asked first:
/// `deleting` names the rule whose line asks).
pub(super) fn apply_rule_op(
    c: &mut crate::engine::settings::Cleanup,
    (editing, deleting): (&mut Option<usize>, &mut Option<usize>),
    (i, what): (usize, &str),
) {
    *deleting = None;
    match what {
        "ask-del" => *deleting = Some(i),
        "up" if i > 0 => {
            c.rules.swap(i, i - 1);
            *editing = Some(i - 1);
        }
        "down" if i + 1 < c.rules.len() => {
            c.rules.swap(i, i + 1);
            *editing = Some(i + 1);
        }
        "dup" => {
            let mut r = c.rules[i].clone();
            r.name = format!("{} (copy)", r.name);
            r.dry_run = true;
            c.rules.insert(i + 1, r);
            *editing = Some(i + 1);
        }
        "del" => {
            c.rules.remove(i);
            *editing = None;
        }
        _ => {}
    }
}

/// Add rule, Add the example (the OOM guard has its own section).
pub(super) fn add_rule_buttons(
    ui: &mut Ui,
    c: &mut crate::engine::settings::Cleanup,
    editing: &mut Option<usize>,
) {
    ui.horizontal_wrapped(|ui| {
        if ui.button("Add rule").clicked() {
            // Off until it is switched on: a rule without conditions yet matches everything.
            let mut r = Rule {
                enabled: false,
                ..Rule::default()
            };
            let mut n = 1;
            while c.rules.iter().any(|x| x.name == r.name) {
                n += 1;
                r.name = format!("New rule {n}");
            }
            c.rules.push(r);
            *editing = Some(c.rules.len() - 1);
        }
        if ui
            .button("Add the example: idle 30 min holding > 8 GiB, terminate")
            .clicked()
        {
            // Off, as a new rule is (the list says so): it terminates once switched on.
            c.rules.push(Rule {
                name: "Idle holder".into(),
                enabled: false,
                conditions: crate::act::rules::Conditions {
                    idle_min_minutes: Some(30.0),
                    process_memory_min_mib: Some(8192.0),
                    ..crate::act::rules::Conditions::default()
                },
                action: Action::Terminate {
                    grace_seconds: crate::act::rules::model::DEFAULT_GRACE_SECONDS,
                },
                ..Rule::default()
            });
            *editing = Some(c.rules.len() - 1);
        }
    });
}
