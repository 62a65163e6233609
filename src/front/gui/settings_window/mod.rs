//! The Settings window (menu and Ctrl+,): General, Sampling & history, Sessions, Leaks, Rules,
//! OOM guard.
//! It edits a draft; Save validates, writes the TOML file atomically (keeping a `.bak`) and
//! applies the draft to the engine. Closing it keeps the draft: opened again, it shows the
//! changes not saved (Revert drops them), unless the settings changed meanwhile.

mod fields;
mod guard;
mod leak_fields;
mod rule_editor;
mod rules_list;

use egui::{RichText, Ui};

use super::ui_command::UiCommand;
use super::widgets;
use crate::engine::settings::Settings;
use crate::engine::view::Monitor;
use crate::model::format::{Theme, Units};

pub use fields::clamp_note;
use fields::{bounded, status_lines};
use leak_fields::leak_advanced_fields;
pub(crate) use leak_fields::leak_fields;
use rule_editor::rule_editor;
pub(crate) use rule_editor::TestedTarget;
use rules_list::{add_rule_buttons, apply_rule_op, protected_names, rules_list};

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
    /// The settings the draft was copied from: a draft that differs from them holds changes
    /// not saved, kept while the window is closed.
    draft_of: Settings,
    /// The rule being edited.
    pub editing: Option<usize>,
    /// The rule whose line asks whether to delete it.
    deleting: Option<usize>,
    /// Result of "Test this rule".
    pub tested: Option<(usize, Vec<TestedTarget>, String)>,
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
            draft_of: Settings::default(),
            editing: None,
            deleting: None,
            tested: None,
            testing: None,
            message: None,
            clamped: None,
            protected_text: None,
        }
    }
}

impl SettingsUi {
    /// Opens the window on a copy of `current`, or on the changes not saved when it was
    /// closed (if `current` is still what they were made to).
    pub fn show(&mut self, current: &Settings) {
        if !self.open {
            let kept = self.draft != self.draft_of && self.draft_of == *current;
            if !kept {
                self.draft = current.clone();
                self.draft_of = current.clone();
            }
            self.message = None;
            self.clamped = None;
        }
        self.open = true;
    }

    /// The settings were saved as `saved`: the draft's changes since are what is not saved.
    pub(crate) fn saved(&mut self, saved: &Settings) {
        self.draft_of = saved.clone();
    }

    /// Draws the window; `live` is the monitor "test this rule" looks at. Save and Test this
    /// rule go to `out`.
    pub(crate) fn window(
        &mut self,
        ctx: &egui::Context,
        current: &Settings,
        path: &std::path::Path,
        live: &Monitor,
        out: &mut Vec<UiCommand>,
    ) {
        let mut open = self.open;
        let screen = ctx.content_rect();
        let body_height = (screen.height() - 260.0).clamp(200.0, 620.0);
        egui::Window::new("Settings")
            .open(&mut open)
            // As the other windows: one collapsed with its ▼ came back collapsed on Ctrl+,
            // (its title bar alone).
            .collapsible(false)
            .default_size([780.0, body_height + 120.0])
            // A long rule line wraps instead of widening the window to the screen's width.
            .max_width((screen.width() - 40.0).clamp(400.0, 900.0))
            .default_pos([screen.center().x - 390.0, screen.min.y + 50.0])
            .resizable(true)
            .show(ctx, |ui| {
                self.save_row(ui, current, path, out);
                let cannot = super::settings_words::cannot_save(&self.draft);
                status_lines(ui, cannot, self.clamped.as_deref(), self.message.as_ref());
                ui.separator();
                ui.horizontal_top(|ui| {
                    self.section_list(ui);
                    ui.separator();
                    ui.vertical(|ui| self.section_body(ui, body_height, live, out));
                });
            });
        // Closed without saving (its ✖, Esc): the saved theme is put back, whichever way it
        // was closed (the other changes stay in the draft for the next opening).
        if !open && self.draft.general.theme != current.general.theme {
            super::ui_state::apply_theme(ctx, current.general.theme);
            self.draft.general.theme = current.general.theme;
        }
        self.open = open;
    }

    /// Save (when the draft changed and has no problem), Revert (the saved theme put back
    /// too), "unsaved changes", and the settings file's `path`.
    fn save_row(
        &mut self,
        ui: &mut Ui,
        current: &Settings,
        path: &std::path::Path,
        out: &mut Vec<UiCommand>,
    ) {
        let problems = self.draft.problems();
        ui.horizontal(|ui| {
            let changed = self.draft != *current;
            if ui
                .add_enabled(problems.is_empty() && changed, egui::Button::new("Save"))
                .clicked()
            {
                out.push(UiCommand::SaveSettings(Box::new(self.draft.clone())));
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
                self.draft_of = current.clone();
                self.clamped = None;
            }
            if changed {
                ui.label(RichText::new("unsaved changes").weak());
            }
            ui.label(widgets::hint(path.display().to_string()));
        });
    }

    /// The list of sections down the left; a click shows that section.
    fn section_list(&mut self, ui: &mut Ui) {
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
    }

    /// The section shown, scrolled at most `body_height` high. It takes the window's width
    /// and never asks for more: a rule added (or a long one chosen) wraps instead of widening
    /// the window.
    fn section_body(
        &mut self,
        ui: &mut Ui,
        body_height: f32,
        live: &Monitor,
        out: &mut Vec<UiCommand>,
    ) {
        egui::ScrollArea::vertical()
            .max_height(body_height)
            .auto_shrink([false, true])
            .show(ui, |ui| match self.section {
                Section::General => self.general(ui),
                Section::Sampling => self.sampling(ui),
                Section::Sessions => self.sessions(ui),
                Section::Leaks => self.leaks(ui),
                Section::Rules => self.rules(ui, live, out),
                Section::Guard => guard::show(
                    ui,
                    &mut self.draft.guard,
                    (self.draft.cleanup.dry_run, smallest_gpu(live)),
                    &mut self.clamped,
                ),
            });
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
            .spacing([14.0, 4.0])
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
                    .spacing([14.0, 4.0])
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

    fn rules(&mut self, ui: &mut Ui, _live: &Monitor, out: &mut Vec<UiCommand>) {
        let c = &mut self.draft.cleanup;
        ui.checkbox(
            &mut c.dry_run,
            "Global dry run: no rule or guard acts; the Activity tab says what would have happened",
        );
        protected_names(ui, &mut c.protected, &mut self.protected_text);
        ui.separator();
        if let Some(op) = rules_list(ui, c, &mut self.editing, self.deleting) {
            apply_rule_op(c, (&mut self.editing, &mut self.deleting), op);
        }
        add_rule_buttons(ui, c, &mut self.editing);
        if let Some(i) = self.editing.filter(|i| *i < c.rules.len()) {
            ui.separator();
            rule_editor(ui, c, i, &mut self.tested, out);
        }
        ui.separator();
        ui.checkbox(
            &mut c.manual_other_users,
            "Your own actions (a click, `vramwarden park`) may touch other users' processes",
        )
        .on_hover_text("Only where vramwarden runs as root; each rule has its own switch, an agent's clients --remote-other-users. Off: such actions are refused and say why.");
    }
}

/// The smallest memory of the GPUs in `live` (bytes), for the guard's floor.
fn smallest_gpu(live: &crate::engine::view::Monitor) -> Option<(u32, u64)> {
    live.latest
        .as_ref()?
        .devices
        .iter()
        .filter_map(|d| Some((d.index, d.memory_total_bytes?)))
        .min_by_key(|(_, b)| *b)
}
