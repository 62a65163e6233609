//! The Settings window (menu and Ctrl+,): General, Sampling & history, Sessions, Leaks, Rules.
//! It edits a draft; Save validates, writes the TOML file atomically (keeping a `.bak`) and
//! applies the draft to the engine.

use egui::{RichText, Ui};

use super::widgets;
use crate::act::rules::{Action, Rule};
use crate::engine::settings::Settings;
use crate::engine::view::Monitor;
use crate::model::format::{Theme, Units};

/// Sections of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// Units, theme.
    General,
    /// Interval, history.
    Sampling,
    /// Recording, retention.
    Sessions,
    /// Leak sensitivity, notifications.
    Leaks,
    /// Auto-cleanup rules.
    Rules,
    /// The OOM guard.
    Guard,
}

/// State of the Settings window.
pub struct SettingsUi {
    /// Shown.
    pub open: bool,
    /// Section shown.
    pub section: Section,
    /// What is being edited.
    pub draft: Settings,
    /// The rule being edited.
    pub editing: Option<usize>,
    /// Result of "Test this rule".
    pub tested: Option<(usize, Vec<TestedTarget>)>,
    /// A rule test to send to the engine shown (the rule's index and the command), taken by
    /// the app; then the test awaiting its reply ([`super::replies::route`]).
    pub test_request: Option<(usize, crate::engine::EngineCommand)>,
    /// The rule test sent, awaiting its reply.
    pub testing: Option<(usize, crate::engine::command::CommandId)>,
    /// Last save result, and whether it failed.
    pub message: Option<(String, bool)>,
    /// The last value put back into its range, in words ("Minimum rate: 0 is under 0.1
    /// MiB/min, set to 0.1"), until the next edit.
    pub clamped: Option<String>,
    /// The protected-names text while it is being typed (a trailing comma or space stays
    /// until the next name is typed); None when the field is not being edited.
    protected_text: Option<String>,
}

impl Default for SettingsUi {
    fn default() -> Self {
        Self {
            open: false,
            section: Section::General,
            draft: Settings::default(),
            editing: None,
            tested: None,
            test_request: None,
            testing: None,
            message: None,
            clamped: None,
            protected_text: None,
        }
    }
}

/// What the window asks the app to do.
pub enum SettingsAction {
    /// Save the draft (already validated) and apply it.
    Save(Box<Settings>),
}

/// A condition with a number (a memory size, given in MiB, shown and edited in GiB); its own
/// problems (key `key`) right under it.
fn opt_num(
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
fn opt_text(
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

/// How many lines the status area above the sections always takes (so nothing under the
/// pointer moves when a status appears).
pub const STATUS_LINES: usize = 2;

/// The status area: why Save is off in words (its key in the file on hover), or the last
/// value clamped, and the last save's result; always [`STATUS_LINES`] lines high, each cut to
/// one line with its whole text on hover.
fn status_lines(
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
fn bounded<T>(
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
pub fn short_number(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// A leak parameter's row: its label, value, range, unit and what it does.
type LeakField<'a> = (
    &'static str,
    &'a mut f64,
    std::ops::RangeInclusive<f64>,
    &'static str,
    &'static str,
);

/// The leak detector's parameters the README and docs/leaks.md document (`[leaks]`), in
/// their order there.
pub fn leak_fields(l: &mut crate::detect::leak::LeakSettings) -> [LeakField<'_>; 8] {
    [
        (
            "Minimum growth",
            &mut l.min_growth_mib,
            1.0..=1_000_000.0,
            " MiB",
            "least total growth before a leak is flagged",
        ),
        (
            "Minimum duration",
            &mut l.min_duration_s,
            1.0..=86_400.0,
            " s",
            "shortest time the growth must have lasted",
        ),
        (
            "Minimum rate",
            &mut l.min_rate_mib_per_min,
            0.1..=100_000.0,
            " MiB/min",
            "slowest growth that counts",
        ),
        (
            "Observation window",
            &mut l.window_s,
            10.0..=86_400.0,
            " s",
            "history each process keeps for the decision",
        ),
        (
            "Ends after no growth for",
            &mut l.quiet_s,
            1.0..=86_400.0,
            " s",
            "a leak ends after this long without growth",
        ),
        (
            "Drop tolerance",
            &mut l.drop_tolerance_mib,
            0.0..=1_000_000.0,
            " MiB",
            "a larger fall is a free: it resets the growth",
        ),
        (
            "Start-up grace",
            &mut l.startup_s,
            1.0..=86_400.0,
            " s",
            "a new process's ramp is judged once it levels off, or after this",
        ),
        (
            "Settled after",
            &mut l.settle_s,
            1.0..=86_400.0,
            " s",
            "a ramp or burst has levelled off after this long flat",
        ),
    ]
}

/// The detector's remaining parameters (load size, load time, flat spell).
fn leak_advanced_fields(l: &mut crate::detect::leak::LeakSettings) -> [LeakField<'_>; 3] {
    [
        (
            "Load size",
            &mut l.load_mib,
            1.0..=1_000_000.0,
            " MiB",
            "a growth this large may be a load: it must go on longer before it is a leak",
        ),
        (
            "Load time",
            &mut l.load_s,
            1.0..=86_400.0,
            " s",
            "how much longer a load-sized growth must go on",
        ),
        (
            "Flat spell",
            &mut l.flat_s,
            1.0..=86_400.0,
            " s",
            "after this long without a new high, growth is judged afresh",
        ),
    ]
}

/// A target "Test this rule" found: what it is, and why it would be skipped (`None`: acted on).
pub type TestedTarget = (String, Option<String>);

fn field_errors(ui: &mut Ui, problems: &[(&'static str, String)], fields: &[&str]) {
    for (f, m) in problems {
        if fields.contains(f) {
            ui.label(RichText::new(format!("⚠ {m}")).color(widgets::warn(ui)));
        }
    }
}

impl SettingsUi {
    /// Opens the window on a copy of `current`.
    pub fn show(&mut self, current: &Settings) {
        if !self.open {
            self.draft = current.clone();
            self.message = None;
            self.clamped = None;
        }
        self.open = true;
    }

    /// Draws the window; `live` is the monitor "test this rule" looks at.
    pub fn window(
        &mut self,
        ctx: &egui::Context,
        current: &Settings,
        path: &std::path::Path,
        live: &Monitor,
    ) -> Option<SettingsAction> {
        let mut action = None;
        let mut open = self.open;
        let screen = ctx.content_rect();
        let body_height = (screen.height() - 260.0).clamp(200.0, 620.0);
        egui::Window::new("Settings")
            .open(&mut open)
            .default_size([780.0, body_height + 120.0])
            // A long rule line wraps instead of widening the window to the screen's width.
            .max_width((screen.width() - 40.0).clamp(400.0, 900.0))
            .default_pos([screen.center().x - 390.0, screen.min.y + 50.0])
            .resizable(true)
            .show(ctx, |ui| {
                let problems = self.draft.problems();
                ui.horizontal(|ui| {
                    let changed = self.draft != *current;
                    if ui
                        .add_enabled(problems.is_empty() && changed, egui::Button::new("Save"))
                        .clicked()
                    {
                        action = Some(SettingsAction::Save(Box::new(self.draft.clone())));
                        self.clamped = None;
                    }
                    if ui
                        .add_enabled(changed, egui::Button::new("Revert"))
                        .clicked()
                    {
                        if self.draft.general.theme != current.general.theme {
                            // The theme previewed goes with the rest.
                            super::ui_state::apply_theme(ui.ctx(), current.general.theme);
                        }
                        self.draft = current.clone();
                        self.clamped = None;
                    }
                    if changed {
                        ui.label(RichText::new("unsaved changes").weak());
                    }
                    ui.label(widgets::hint(path.display().to_string()));
                });
                let cannot = super::settings_words::cannot_save(&self.draft);
                status_lines(ui, cannot, self.clamped.as_deref(), self.message.as_ref());
                ui.separator();
                ui.horizontal_top(|ui| {
                    ui.vertical(|ui| {
                        ui.set_width(150.0);
                        for (s, name) in [
                            (Section::General, "General"),
                            (Section::Sampling, "Sampling & history"),
                            (Section::Sessions, "Sessions"),
                            (Section::Leaks, "Leaks"),
                            (Section::Rules, "Rules"),
                            (Section::Guard, "OOM guard"),
                        ] {
                            ui.selectable_value(&mut self.section, s, name);
                        }
                    });
                    ui.separator();
                    ui.vertical(|ui| {
                        // Takes the window's width and never asks for more: a rule added
                        // (or a long one chosen) wraps instead of widening the window.
                        egui::ScrollArea::vertical()
                            .max_height(body_height)
                            .auto_shrink([false, true])
                            .show(ui, |ui| match self.section {
                                Section::General => self.general(ui),
                                Section::Sampling => self.sampling(ui),
                                Section::Sessions => self.sessions(ui),
                                Section::Leaks => self.leaks(ui),
                                Section::Rules => self.rules(ui, live),
                                Section::Guard => super::settings_guard::show(
                                    ui,
                                    &mut self.draft.guard,
                                    self.draft.cleanup.dry_run,
                                ),
                            });
                    });
                });
            });
        // Closed without saving (its ✖, Esc): the saved theme is put back, whichever way it
        // was closed.
        if !open && self.draft.general.theme != current.general.theme {
            super::ui_state::apply_theme(ctx, current.general.theme);
            self.draft.general.theme = current.general.theme;
        }
        self.open = open;
        action
    }

    fn general(&mut self, ui: &mut Ui) {
        let g = &mut self.draft.general;
        ui.label(RichText::new("Units").strong());
        ui.horizontal(|ui| {
            for u in Units::ALL {
                ui.radio_value(&mut g.units, u, u.label());
            }
        });
        ui.add_space(8.0);
        ui.label(RichText::new("Theme").strong());
        ui.horizontal(|ui| {
            let before = g.theme;
            ui.radio_value(&mut g.theme, Theme::System, "Follow the desktop");
            ui.radio_value(&mut g.theme, Theme::Dark, "Dark");
            ui.radio_value(&mut g.theme, Theme::Light, "Light");
            // A preview at once; closing without saving puts the saved theme back.
            if g.theme != before {
                super::ui_state::apply_theme(ui.ctx(), g.theme);
            }
        });
    }

    fn sampling(&mut self, ui: &mut Ui) {
        let s = &mut self.draft.sampling;
        let note = &mut self.clamped;
        ui.horizontal(|ui| {
            ui.label("Sampling interval");
            bounded(
                ui,
                "Sampling interval",
                &mut s.interval_ms,
                100..=3_600_000,
                (10.0, " ms"),
                note,
            );
        });
        ui.horizontal(|ui| {
            ui.label("History kept in memory");
            bounded(
                ui,
                "History kept in memory",
                &mut s.history_hours,
                0.1..=744.0,
                (0.5, " h"),
                note,
            );
        });
        ui.label(RichText::new("These take effect at the next start.").weak());
    }

    fn sessions(&mut self, ui: &mut Ui) {
        let s = &mut self.draft.sessions;
        let note = &mut self.clamped;
        ui.checkbox(
            &mut s.record,
            "Record a session log while the window runs (takes effect at the next start)",
        );
        ui.horizontal(|ui| {
            ui.label("Delete sessions older than");
            bounded(
                ui,
                "Delete sessions older than",
                &mut s.retention_days,
                1..=3650,
                (1.0, " days"),
                note,
            );
        });
        ui.horizontal(|ui| {
            ui.label("Keep the sessions folder under");
            bounded(
                ui,
                "Keep the sessions folder under",
                &mut s.retention_max_mib,
                16..=1_000_000,
                (16.0, " MiB"),
                note,
            );
        });
        ui.label(
            RichText::new(format!(
                "Folder: {}",
                crate::session::default_dir().display()
            ))
            .weak(),
        );
    }

    fn leaks(&mut self, ui: &mut Ui) {
        let l = &mut self.draft.leaks;
        let note = &mut self.clamped;
        ui.label("A process is flagged as leaking when its GPU memory grows by at least the minimum growth, faster than the minimum rate, for at least the minimum duration, and is still growing.");
        egui::Grid::new("leak-settings")
            .num_columns(3)
            .show(ui, |ui| {
                for (label, v, range, suffix, what) in leak_fields(l) {
                    ui.label(label);
                    bounded(ui, label, v, range, (1.0, suffix), note);
                    ui.label(widgets::hint(what));
                    ui.end_row();
                }
            });
        egui::CollapsingHeader::new("Load tuning")
            .id_salt("leak-settings-advanced")
            .show(ui, |ui| {
                egui::Grid::new("leak-settings-advanced-grid")
                    .num_columns(3)
                    .show(ui, |ui| {
                        for (label, v, range, suffix, what) in leak_advanced_fields(l) {
                            ui.label(label);
                            bounded(ui, label, v, range, (1.0, suffix), note);
                            ui.label(widgets::hint(what));
                            ui.end_row();
                        }
                    });
            });
        for p in l.problems() {
            ui.label(RichText::new(format!("⚠ {p}")).color(widgets::warn(ui)));
        }
        if ui.button("Restore defaults").clicked() {
            *l = crate::detect::leak::LeakSettings::default();
        }
        ui.add_space(8.0);
        ui.checkbox(
            &mut self.draft.notifications.leaks,
            "Desktop notification when a leak is first flagged",
        );
        ui.checkbox(
            &mut self.draft.notifications.rules,
            "Desktop notification when a rule notifies",
        );
        ui.horizontal(|ui| {
            ui.label("Warn when a GPU is forecast full within");
            bounded(
                ui,
                "Forecast warning",
                &mut self.draft.notifications.oom_forecast_minutes,
                0.0..=1440.0,
                (1.0, " min"),
                &mut self.clamped,
            );
        });
        ui.label(widgets::hint(
            "The banner, the status bar's warning, the desktop notification and the event, once the forecast has stood 15 s (0: never). A GPU card shows any forecast that has stood 15 s.",
        ));
    }

    fn rules(&mut self, ui: &mut Ui, _live: &Monitor) {
        let c = &mut self.draft.cleanup;
        ui.checkbox(&mut c.dry_run, "Global dry run: no rule signals anything, the Activity pane says what would have happened");
        protected_names(ui, &mut c.protected, &mut self.protected_text);
        ui.separator();
        if let Some(op) = rules_list(ui, c, &mut self.editing) {
            apply_rule_op(c, &mut self.editing, op);
        }
        add_rule_buttons(ui, c, &mut self.editing);
        let Some(i) = self.editing.filter(|i| *i < c.rules.len()) else {
            return;
        };
        ui.separator();
        rule_editor(ui, c, i, &mut self.tested, &mut self.test_request);
    }
}

/// The protected names, wrapped over as many lines as the list needs, so no name is hidden.
/// While the field has the focus its own text is kept, so a comma typed before the next name
/// stays.
fn protected_names(ui: &mut Ui, protected: &mut Vec<String>, typing: &mut Option<String>) {
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

/// The rules, one line each; the button pressed on a line (its index and what).
fn rules_list(
    ui: &mut Ui,
    c: &mut crate::engine::settings::Cleanup,
    editing: &mut Option<usize>,
) -> Option<(usize, &'static str)> {
    let mut op: Option<(usize, &'static str)> = None;
    // Scrolls sideways when narrower than its lines (long names and the row's buttons) rather
    // than widening the window.
    egui::ScrollArea::horizontal()
        .id_salt("rules-list-scroll")
        .auto_shrink([false, true])
        .show(ui, |ui| {
            egui::Grid::new("rules-list")
                .num_columns(4)
                .striped(true)
                .show(ui, |ui| {
                    for (i, r) in c.rules.iter_mut().enumerate() {
                        ui.checkbox(&mut r.enabled, "on");
                        // The row's buttons before its name: a long name never pushes them
                        // out of the window.
                        ui.horizontal(|ui| {
                            for (label, what, hover) in [
                                ("Up", "up", "Move this rule up (rules are checked in order)"),
                                ("Down", "down", "Move this rule down"),
                                ("Duplicate", "dup", "Add a copy of this rule below it"),
                                (
                                    "Delete",
                                    "del",
                                    "Remove this rule (Save to keep the change)",
                                ),
                            ] {
                                if ui.button(label).on_hover_text(hover).clicked() {
                                    op = Some((i, what));
                                }
                            }
                        });
                        let bad = !r.problems().is_empty();
                        let mut name = RichText::new(&r.name);
                        if bad {
                            name = name.color(widgets::warn(ui));
                        }
                        if ui.selectable_label(*editing == Some(i), name).clicked() {
                            *editing = Some(i);
                        }
                        ui.horizontal(|ui| {
                            if r.dry_run || c.dry_run {
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
                        });
                        ui.end_row();
                    }
                });
        });
    if c.rules.is_empty() {
        ui.label(RichText::new("No rules yet. A new rule starts as a dry run.").weak());
    }
    op
}

/// Moves, duplicates or deletes a rule as its line's button asked.
fn apply_rule_op(
    c: &mut crate::engine::settings::Cleanup,
    editing: &mut Option<usize>,
    (i, what): (usize, &str),
) {
    match what {
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
fn add_rule_buttons(
    ui: &mut Ui,
    c: &mut crate::engine::settings::Cleanup,
    editing: &mut Option<usize>,
) {
    ui.horizontal_wrapped(|ui| {
        if ui.button("Add rule").clicked() {
            let mut r = Rule::default();
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
            c.rules.push(Rule {
                name: "Idle holder".into(),
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

/// The rule `i`'s editor: its summary, Test this rule, and its fields.
fn rule_editor(
    ui: &mut Ui,
    c: &mut crate::engine::settings::Cleanup,
    i: usize,
    tested: &mut Option<(usize, Vec<TestedTarget>)>,
    request: &mut Option<(usize, crate::engine::EngineCommand)>,
) {
    let safety = crate::act::rules::action::Safety {
        global_dry_run: c.dry_run,
        protected: c.protected.clone(),
    };
    let r = &mut c.rules[i];
    let problems = r.problems();
    // The summary keeps its height while typing (two lines), so the fields below stay put.
    let summary_h = ui.text_style_height(&egui::TextStyle::Body) * 2.0 + 4.0;
    ui.allocate_ui(egui::vec2(ui.available_width(), summary_h), |ui| {
        ui.set_min_height(summary_h);
        ui.add(egui::Label::new(RichText::new(r.describe()).italics()).wrap());
    });
    ui.horizontal(|ui| {
        if ui
            .button("Test this rule")
            .on_hover_text("Which current processes (or GPUs) it would match right now, ignoring hold time and cooldown, and which of them its safety rules would skip")
            .clicked()
        {
            // Tested by the engine that owns the processes (an agent's for a remote
            // window); the matches come back as its reply.
            *request = Some((
                i,
                crate::engine::EngineCommand::TestRule {
                    rule: Box::new(r.clone()),
                    safety: Some(safety.clone()),
                },
            ));
            *tested = None;
            ui.ctx().request_repaint();
        }
        if let Some((j, found)) = &*tested {
            if *j == i {
                let acted = found.iter().filter(|(_, w)| w.is_none()).count();
                ui.label(match (found.len(), acted) {
                    (0, _) => "It matches nothing right now.".to_string(),
                    (n, a) if a == n => format!("It matches {n} right now, and would act on each:"),
                    (n, 0) => format!("It matches {n} right now, but would skip every one:"),
                    (n, a) => format!("It matches {n} right now; it would act on {a}:"),
                });
            }
        }
    });
    if let Some((j, found)) = &*tested {
        if *j == i {
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
    }
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
                field_errors(ui, &problems, &["name"]);
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
            ui.label("Conditions");
            ui.vertical(|ui| conditions(ui, &mut r.conditions, &problems, i));
            ui.end_row();
            ui.label("Action");
            ui.vertical(|ui| action_editor(ui, &mut r.action, &problems));
            ui.end_row();
            ui.label("Cooldown");
            ui.vertical(|ui| {
                ui.add(
                    egui::DragValue::new(&mut r.cooldown_minutes)
                        .speed(1.0)
                        .suffix(" min per target"),
                );
                field_errors(ui, &problems, &["cooldown_minutes"]);
            });
            ui.end_row();
        });
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
    containers_and_schedule(ui, k, problems, i);
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
        } => {
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
    }
    field_errors(ui, problems, &["action"]);
}
