//! The confirmation dialog before an action on a process, and its wording.

use egui::RichText;

use super::{describe_target, Confirmation, UiCommand, VramApp};
use crate::engine::view::Monitor;
use crate::front::gui::widgets;
use crate::model::format::Units;

impl VramApp {
    /// Asks before a manual action; on yes it goes to the engine.
    pub(super) fn confirm_modal(&mut self, ctx: &egui::Context) {
        let Some(Confirmation {
            target,
            action,
            resume,
            park_gib_s,
            releasable,
        }) = self.confirm.clone()
        else {
            return;
        };
        let mut decided = None;
        let units = self.state.units;
        let resume = resume.filter(|_| action == crate::act::rules::Action::Resume);
        let (heading, verb) = confirm_wording(&target, &action, resume, park_gib_s);
        // A dialog a screen reader names by its question (AccessKit: a Dialog labelled so).
        let id = egui::Id::unique("confirm-action");
        let area = egui::Modal::default_area(id).accessible_name(heading.clone());
        egui::Modal::new(id).area(area).show(ctx, |ui| {
            // Narrower on a small screen (900 × 600 at 200 % is 450 points wide).
            ui.set_width(
                460f32
                    .min(ui.ctx().content_rect().width() - 48.0)
                    .max(200.0),
            );
            ui.heading(heading);
            ui.label(match resume {
                Some((bytes, _)) => describe_parked(&target, bytes),
                None => describe_target(&target, units),
            });
            ui.label(RichText::new(meaning(&action, releasable, units)).weak());
            ui.add_space(8.0);
            decided = choice(ui, &action, &verb);
        });
        match decided {
            Some(true) => {
                // The engine is told which process only; it builds the target itself.
                if let crate::act::rules::eval::Target::Process { key, .. } = target {
                    self.push(UiCommand::Engine(crate::engine::EngineCommand::Manual {
                        key,
                        action,
                        from: crate::engine::CommandFrom::Window,
                    }));
                }
                self.confirm = None;
            }
            Some(false) => self.confirm = None,
            None => {}
        }
    }

    /// A manual action asked for (detail pane, context menu, Delete): confirm first (none
    /// while a recorded session is drawn).
    pub(super) fn confirm_request(
        &mut self,
        monitor: &Monitor,
        key: crate::model::history::ProcSeriesKey,
        action: crate::act::rules::Action,
    ) {
        // Nothing is asked of a recorded session, nor of an agent that does not answer.
        if self.replaying || self.unreachable_since.is_some() {
            return;
        }
        let Some(r) = monitor.row(&key) else {
            return;
        };
        let live = monitor.latest.as_ref().and_then(|s| {
            s.processes
                .iter()
                .find(|p| p.key() == key.0 && p.device_index == key.1)
        });
        // The live facts where the process is listed; else the row's, with the
        // owner's uid unknown.
        let info = live
            .and_then(|p| p.info.as_ref())
            .map(|i| crate::engine::view::ProcessRow::facts(Some(i)))
            .unwrap_or_else(|| {
                std::sync::Arc::new(crate::model::ProcInfo {
                    uid: u32::MAX,
                    ..(*r.info).clone()
                })
            });
        let guard = monitor.guard.iter().find(|g| g.device_index == key.1);
        let resume = r.parked.map(|p| {
            let rate = guard.map_or(0.0, |g| g.resume_gib_s);
            (
                p.bytes,
                crate::act::park::estimate::resume_estimate_s(p.bytes.unwrap_or(0), rate),
            )
        });
        self.confirm = Some(Confirmation {
            target: crate::act::rules::eval::Target::process(
                key,
                Some(info),
                r.used_bytes,
                live.map_or(crate::model::Origin::Recorded, |p| p.origin),
            ),
            action,
            resume,
            park_gib_s: guard.map_or(0.0, |g| g.park_gib_s),
            releasable: r.torch.map(|t| t.releasable_bytes()),
        });
    }
}

/// A parked process for its resume's confirmation: "python3 (PID 7, user dave, GPU 0,
/// parked: 24.0 GiB in host memory)".
fn describe_parked(target: &crate::act::rules::eval::Target, bytes: Option<u64>) -> String {
    let crate::act::rules::eval::Target::Process { key, .. } = target else {
        return target.describe();
    };
    let user = match target.user() {
        "" => String::new(),
        u => format!(", user {u}"),
    };
    let held = bytes.map_or("its memory size unknown".into(), |b| {
        format!(
            "{:.1} GiB in host memory",
            b as f64 / crate::model::GIB as f64
        )
    });
    format!(
        "{} (PID {}{user}, GPU {}, parked: {held})",
        target.name(),
        key.0.pid,
        key.1
    )
}

/// What `action` does, in a line under the process: a signal's effect, how much a release
/// frees by the companion's last word.
fn meaning(action: &crate::act::rules::Action, releasable: Option<u64>, units: Units) -> String {
    use crate::act::rules::Action;
    match action {
        Action::Signal { signal } => match signal.as_str() {
            "SIGKILL" => "SIGKILL: it ends at once, without cleaning up; its GPU memory is freed.",
            "SIGTERM" => "SIGTERM: asks it to exit; it may clean up first or ignore it.",
            "SIGINT" => "SIGINT: interrupts it, as Ctrl+C in its terminal does.",
            "SIGSTOP" => "SIGSTOP: pauses it until SIGCONT; its GPU memory stays held.",
            "SIGCONT" => "SIGCONT: a stopped process runs again.",
            "SIGHUP" => "SIGHUP: its terminal hung up; many programs exit or reload.",
            _ => "What it does is the program's own (many ignore it or exit).",
        }
        .to_string(),
        Action::ReleaseCache => match releasable {
            Some(b) if b > 0 => format!(
                "PyTorch's companion in it frees the cache it does not use: about {} by its last report. The job goes on.",
                units.bytes(b)
            ),
            _ => "PyTorch's companion in it frees the cache it does not use. The job goes on."
                .to_string(),
        },
        other => other.label(),
    }
}

/// True for the actions that cannot be undone (signals, terminate): their button is red.
fn destructive(action: &crate::act::rules::Action) -> bool {
    matches!(
        action,
        crate::act::rules::Action::Terminate { .. } | crate::act::rules::Action::Signal { .. }
    )
}

/// The confirmation's heading and its button for `action` on `target`; `resume` is a
/// parked process's bytes in host memory and the seconds its resume takes; a park's time is
/// said at `park_gib_s` (the guard's measured rate; 0: the default).
fn confirm_wording(
    target: &crate::act::rules::eval::Target,
    action: &crate::act::rules::Action,
    resume: Option<(Option<u64>, f64)>,
    park_gib_s: f64,
) -> (String, String) {
    match action {
        crate::act::rules::Action::Terminate { .. } => (
            "Terminate this process?".to_string(),
            "Terminate".to_string(),
        ),
        crate::act::rules::Action::Signal { signal } if signal == "SIGKILL" => {
            ("Kill this process?".to_string(), "Kill".to_string())
        }
        crate::act::rules::Action::Signal { signal } => (
            format!("Send {signal} to this process?"),
            format!("Send {signal}"),
        ),
        crate::act::rules::Action::ReleaseCache => (
            "Release this process's cached GPU memory?".to_string(),
            "Release".to_string(),
        ),
        crate::act::rules::Action::LimitMemory { gib } => (
            format!("Limit this process to {gib} GiB of GPU memory?"),
            "Limit".to_string(),
        ),
        crate::act::rules::Action::Resume => (
            match resume {
                Some((Some(b), s)) => format!(
                    "Resume: move its {:.1} GiB back to the GPU (~{s:.0} s)?",
                    b as f64 / crate::model::GIB as f64
                ),
                _ => "Resume: move its memory back to the GPU?".to_string(),
            },
            "Resume".to_string(),
        ),
        crate::act::rules::Action::Park => {
            let used = match target {
                crate::act::rules::eval::Target::Process { used_bytes, .. } => {
                    used_bytes.unwrap_or(0)
                }
                crate::act::rules::eval::Target::Device(_) => 0,
            };
            (
                format!(
                    "Park: move its {:.1} GiB to host memory (~{:.0} s)?",
                    used as f64 / crate::model::GIB as f64,
                    crate::act::park::estimate::park_estimate_s(used, park_gib_s)
                ),
                "Park".to_string(),
            )
        }
        a => (format!("{} this process?", a.label()), a.label()),
    }
}

/// The dialog's choice: the action's button (`verb`; red only for what cannot be undone) and
/// Cancel, which the keyboard starts on (Enter cancels, Tab reaches the action; Esc cancels
/// too). `Some(true)`: do it; `Some(false)`: cancelled; `None`: not decided yet.
fn choice(ui: &mut egui::Ui, action: &crate::act::rules::Action, verb: &str) -> Option<bool> {
    let mut decided = None;
    ui.horizontal_wrapped(|ui| {
        // Red only for what cannot be undone (a signal); a park, a resume, a
        // release or a limit is an ordinary button.
        let button = if destructive(action) {
            widgets::danger_button(ui, verb)
        } else {
            egui::Button::new(RichText::new(verb).strong())
        };
        if ui.add(button).clicked() {
            decided = Some(true);
        }
        let cancel = ui.button("Cancel");
        // The keyboard starts on the safe choice: Enter cancels, Tab reaches
        // the action.
        if ui.memory(|m| m.focused().is_none()) {
            cancel.request_focus();
        }
        if cancel.clicked() || ui.input(|i| i.key_pressed(egui::Key::Escape)) {
            decided = Some(false);
        }
    });
    decided
}
