//! Replies to the window's commands ([`crate::engine::command::CommandReply`]) shown where
//! they were asked: a rule test's matches in the Settings window beside its rule, every other
//! reply as a toast in the window's corner for [`TOAST_SECONDS`]. The link's notify repaints
//! the window when a reply arrives; a toast asks for one more frame when it is due to go.

use std::collections::VecDeque;

use egui::{Color32, RichText};

use crate::engine::command::{CommandId, CommandReply};
use crate::model::outcome::Outcome;

/// How long a toast stays, seconds.
const TOAST_SECONDS: f64 = 6.0;
/// Most toasts shown at once (older ones go first).
const TOASTS_SHOWN: usize = 4;

/// The toasts on screen.
#[derive(Debug, Default)]
pub struct Toasts {
    /// (shown until, text, outcome), oldest first.
    shown: VecDeque<(f64, String, Outcome)>,
}

/// A reply in a line: "Terminate: sent SIGTERM to … (on the agent)".
pub(crate) fn line(r: &CommandReply) -> String {
    if r.what.is_empty() {
        r.answer.detail.clone()
    } else {
        format!("{}: {}", r.what, r.answer.detail)
    }
}

impl Toasts {
    /// Shows `r` from `now` (egui's time, seconds).
    pub(crate) fn push(&mut self, r: &CommandReply, now: f64) {
        self.shown
            .push_back((now + TOAST_SECONDS, line(r), r.answer.outcome));
        while self.shown.len() > TOASTS_SHOWN {
            self.shown.pop_front();
        }
    }

    /// Draws the toasts still due at the bottom right of the window.
    pub(crate) fn show(&mut self, ctx: &egui::Context) {
        let now = ctx.input(|i| i.time);
        self.shown.retain(|(until, _, _)| *until > now);
        let Some(next) = self.shown.iter().map(|(u, _, _)| *u).reduce(f64::min) else {
            return;
        };
        ctx.request_repaint_after(std::time::Duration::from_secs_f64((next - now).max(0.05)));
        egui::Area::new(egui::Id::unique("command-replies"))
            .anchor(egui::Align2::RIGHT_BOTTOM, egui::vec2(-12.0, -40.0))
            .order(egui::Order::Foreground)
            .show(ctx, |ui| {
                for (_, text, outcome) in &self.shown {
                    egui::Frame::popup(ui.style()).show(ui, |ui| {
                        ui.set_max_width(480.0);
                        let colour = match outcome {
                            Outcome::Acted | Outcome::WouldAct => ui.visuals().text_color(),
                            Outcome::Skipped => Color32::from_rgb(200, 140, 40),
                            Outcome::Failed => ui.visuals().error_fg_color,
                        };
                        ui.add(egui::Label::new(RichText::new(text).color(colour)).wrap());
                    });
                }
            });
    }
}

/// Routes `replies`: the one answering the rule test `testing` (the rule's index and the
/// command's id) becomes that rule's list of matches (returned with the index and the
/// engine's words, which say why when nothing matches); every other reply becomes a toast.
pub(crate) fn route(
    replies: Vec<CommandReply>,
    testing: &mut Option<(usize, CommandId)>,
    toasts: &mut Toasts,
    now: f64,
) -> Option<(usize, Vec<super::settings_window::TestedTarget>, String)> {
    let mut tested = None;
    for r in replies {
        match (*testing, &r.answer.matches) {
            (Some((i, id)), Some(m)) if id == r.id => {
                *testing = None;
                tested = Some((
                    i,
                    m.iter()
                        .map(|m| (m.target.clone(), m.skipped.clone()))
                        .collect(),
                    r.answer.detail.clone(),
                ));
            }
            _ => toasts.push(&r, now),
        }
    }
    tested
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::command::{Answer, RuleMatch};

    #[test]
    fn a_rule_tests_reply_goes_to_its_rule_and_others_to_toasts() {
        let mut toasts = Toasts::default();
        let id = CommandId::next();
        let mut testing = Some((2, id));
        let test = CommandReply {
            id,
            what: "Test rule".into(),
            answer: Answer {
                matches: Some(vec![RuleMatch {
                    target: "python (PID 7)".into(),
                    skipped: None,
                }]),
                ..Answer::new(Outcome::WouldAct, "It matches 1 right now")
            },
        };
        let kill = CommandReply {
            id: CommandId::next(),
            what: "Kill".into(),
            answer: Answer::new(Outcome::Acted, "sent SIGKILL (on the agent)"),
        };
        let got = route(vec![kill, test], &mut testing, &mut toasts, 0.0);
        assert_eq!(
            got,
            Some((
                2,
                vec![("python (PID 7)".to_string(), None)],
                "It matches 1 right now".to_string()
            ))
        );
        assert_eq!(testing, None);
        assert_eq!(
            toasts
                .shown
                .iter()
                .map(|(_, t, _)| t.as_str())
                .collect::<Vec<_>>(),
            ["Kill: sent SIGKILL (on the agent)"]
        );
    }
}
