//! What became of the manual actions the user took, per process: shown where the action was
//! taken (the table's row, the detail pane) rather than only in the Activity tab.
//!
//! Each action goes to the engine shown (this computer's, or an agent's) as a command with
//! its own [`CommandId`]; the window notes that id when it sends the action
//! ([`ActionStatus::asked`]) and takes the outcome from the engine's [`CommandReply`] under
//! it ([`ActionStatus::answered`], fed the replies the window receives), so the row shows the
//! result as soon as the reply arrives. Until then the action is shown as waiting, and as
//! late after [`ANSWER_EXPECTED_MS`]. Work that ends later (a park, a resume, a question to a
//! PyTorch companion) is first answered "accepted": the row says "in progress…" until its
//! final reply comes under the same id ("✔ parked 40.5 GiB in 16.8 s", "✖ skipped: …",
//! "✖ failed: …"). Only this window's own actions show here: another window's, or a rule's,
//! are in the Activity tab.

use std::collections::HashMap;

use crate::engine::command::{Answer, CommandId, CommandReply};
use crate::model::history::ProcSeriesKey;
use crate::model::outcome::Outcome;
use crate::model::{UnixMs, GIB, MIB};

/// How long a result stays next to its row and in the detail pane.
pub(crate) const SHOWN_MS: UnixMs = 60_000;

/// How long an action may wait for its reply before the row says so.
const ANSWER_EXPECTED_MS: UnixMs = 15_000;

/// How long accepted work (a park of a large job takes minutes) is shown in progress while
/// its final reply has not come.
const IN_PROGRESS_KEPT_MS: UnixMs = 3_600_000;

/// How a process's last action stands.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum State {
    /// Sent; no final outcome yet (`late`: no reply at all after [`ANSWER_EXPECTED_MS`]).
    Waiting {
        /// What was asked ("terminate (SIGTERM, …)").
        what: String,
        /// Past the time an answer was expected.
        late: bool,
        /// The engine accepted it and works on it (a park, a resume): its words.
        started: Option<String>,
    },
    /// The engine's final outcome, with its detail.
    Done {
        /// How it ended.
        outcome: Outcome,
        /// The reply's detail.
        detail: String,
        /// When its reply arrived.
        at_ms: UnixMs,
        /// What was done, with its figures, in a few words ("parked 40.5 GiB in 16.8 s").
        summary: Option<String>,
    },
}

impl State {
    /// A few words for the table's row (before the process's name).
    pub(crate) fn short(&self) -> String {
        match self {
            State::Waiting {
                started: Some(_), ..
            } => "in progress…".into(),
            State::Waiting { late: false, .. } => "sent, waiting…".into(),
            State::Waiting { late: true, .. } => "no answer yet".into(),
            State::Done {
                outcome,
                detail,
                summary,
                ..
            } => match (outcome, summary) {
                (Outcome::Acted, Some(s)) => format!("✔ {s}"),
                (Outcome::Acted, None) => "✔ done".into(),
                (Outcome::WouldAct, _) => "dry run: not sent".into(),
                (Outcome::Skipped, _) => format!("✖ skipped: {detail}"),
                (Outcome::Failed, _) => format!("✖ failed: {detail}"),
            },
        }
    }

    /// [`State::short`] as one sign, for beside a name: "⏳", "✔", "✖", "○" (a dry run).
    pub(crate) fn mark(&self) -> &'static str {
        match self {
            State::Waiting { .. } => "⏳",
            State::Done { outcome, .. } => match outcome {
                Outcome::Acted => "✔",
                Outcome::WouldAct => "○",
                Outcome::Skipped | Outcome::Failed => "✖",
            },
        }
    }

    /// Whether it needs the user's eye (failed, skipped, no answer).
    pub(crate) fn is_warning(&self) -> bool {
        matches!(
            self,
            State::Waiting { late: true, .. }
                | State::Done {
                    outcome: Outcome::Failed | Outcome::Skipped,
                    ..
                }
        )
    }

    /// The whole sentence (the detail pane, the cell's tooltip). `exited` and `holding` are
    /// the process's state now, for an action that acted.
    pub(crate) fn sentence(&self, exited: bool, holding: &str) -> String {
        match self {
            State::Waiting {
                started: Some(words),
                ..
            } => format!("In progress: {words}."),
            State::Waiting {
                what, late: false, ..
            } => {
                format!("Sent: {what} — waiting for the result.")
            }
            State::Waiting {
                what, late: true, ..
            } => format!(
                "Sent: {what} — no result after {} s; see the Activity tab.",
                ANSWER_EXPECTED_MS / 1000
            ),
            State::Done {
                outcome,
                detail,
                at_ms,
                ..
            } => {
                let when = crate::model::format::clock(*at_ms);
                match outcome {
                    Outcome::Acted if exited => {
                        format!("{when}: {detail} — the process has exited.")
                    }
                    Outcome::Acted => {
                        format!("{when}: {detail} — it is still running, holding {holding}.")
                    }
                    Outcome::WouldAct => format!("{when}: dry run, nothing was sent — {detail}"),
                    Outcome::Skipped => format!("{when}: skipped — {detail}"),
                    Outcome::Failed => format!("{when}: failed — {detail}"),
                }
            }
        }
    }
}

/// One action sent from here, and its replies as they came.
#[derive(Debug, Clone)]
struct Sent {
    /// The command it went under.
    id: CommandId,
    /// What was asked ("terminate (SIGTERM, …)").
    what: String,
    /// The word for it done, before its figures ("parked"), where it has figures.
    done_as: Option<&'static str>,
    /// When it was sent.
    at_ms: UnixMs,
    /// The engine accepted it: its words (the final reply follows).
    started: Option<String>,
    /// The final reply's outcome and detail, its words with figures, and when it arrived.
    done: Option<(Outcome, String, Option<String>, UnixMs)>,
}

/// Bytes in a few characters: GiB from 1 GiB on, else MiB.
fn size(bytes: u64) -> String {
    if bytes >= GIB {
        format!("{:.1} GiB", bytes as f64 / GIB as f64)
    } else {
        format!("{:.0} MiB", bytes as f64 / MIB as f64)
    }
}

/// "parked 40.5 GiB in 16.8 s": `done_as` with the answer's figures, where it has any.
fn summary(done_as: Option<&str>, a: &Answer) -> Option<String> {
    let verb = done_as?;
    match (a.bytes, a.seconds) {
        (Some(b), Some(s)) => Some(format!("{verb} {} in {s:.1} s", size(b))),
        (Some(b), None) => Some(format!("{verb} {}", size(b))),
        (None, Some(s)) => Some(format!("{verb} in {s:.1} s")),
        (None, None) => None,
    }
}

impl Sent {
    /// How it stands at `now`: its final outcome for [`SHOWN_MS`] after the reply, or
    /// waiting (in progress once accepted).
    fn state(&self, now: UnixMs) -> Option<State> {
        match &self.done {
            Some((outcome, detail, summary, at_ms)) => {
                (now - *at_ms <= SHOWN_MS).then(|| State::Done {
                    outcome: *outcome,
                    detail: detail.clone(),
                    at_ms: *at_ms,
                    summary: summary.clone(),
                })
            }
            None => Some(State::Waiting {
                what: self.what.clone(),
                late: self.started.is_none() && now - self.at_ms > ANSWER_EXPECTED_MS,
                started: self.started.clone(),
            }),
        }
    }
}

/// The actions the user sent from this window, by process (the last one each), until their
/// outcome is old.
#[derive(Debug, Default, Clone)]
pub(crate) struct ActionStatus {
    sent: HashMap<ProcSeriesKey, Sent>,
}

impl ActionStatus {
    /// Notes that `action` was sent for `key` at `now` as command `id`.
    pub(crate) fn asked(
        &mut self,
        key: ProcSeriesKey,
        action: &crate::act::rules::Action,
        id: CommandId,
        now: UnixMs,
    ) {
        use crate::act::rules::Action;
        let done_as = match action {
            Action::Park => Some("parked"),
            Action::Resume => Some("resumed"),
            Action::ReleaseCache => Some("released"),
            _ => None,
        };
        self.sent.insert(
            key,
            Sent {
                id,
                what: action.label(),
                done_as,
                at_ms: now,
                started: None,
                done: None,
            },
        );
    }

    /// Takes the replies among `replies` to actions sent from here (others are not this
    /// table's: a rule test, a setting), as of `now`: an accepted one starts the action's
    /// "in progress", a final one ends it.
    pub(crate) fn answered(&mut self, replies: &[CommandReply], now: UnixMs) {
        for r in replies {
            let Some(s) = self.sent.values_mut().find(|s| s.id == r.id) else {
                continue;
            };
            let a = &r.answer;
            if !a.is_final() {
                s.started = Some(a.detail.clone());
            } else {
                let summary = summary(s.done_as, a);
                s.done = Some((a.outcome, a.detail.clone(), summary, now));
            }
        }
    }

    /// Forgets actions whose outcome is older than [`SHOWN_MS`], ones that waited that long
    /// past [`ANSWER_EXPECTED_MS`] without a reply, and accepted ones whose final reply did
    /// not come within [`IN_PROGRESS_KEPT_MS`].
    pub(crate) fn prune(&mut self, now: UnixMs) {
        self.sent.retain(|_, s| match (&s.done, &s.started) {
            (Some((.., at_ms)), _) => now - *at_ms <= SHOWN_MS,
            (None, Some(_)) => now - s.at_ms <= IN_PROGRESS_KEPT_MS,
            (None, None) => now - s.at_ms <= SHOWN_MS + ANSWER_EXPECTED_MS,
        });
    }

    /// How `key`'s last action sent from here stands at `now`.
    pub(crate) fn state(&self, key: ProcSeriesKey, now: UnixMs) -> Option<State> {
        self.sent.get(&key).and_then(|s| s.state(now))
    }

    /// How every process with a recent action sent from here stands at `now` (the table's
    /// rows).
    pub(crate) fn states(&self, now: UnixMs) -> HashMap<ProcSeriesKey, State> {
        self.sent
            .iter()
            .filter_map(|(k, s)| s.state(now).map(|st| (*k, st)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::command::Answer;
    use crate::model::ProcessKey;

    fn key() -> ProcSeriesKey {
        (
            ProcessKey {
                pid: 42,
                start_time_ms: 1_000,
            },
            0,
        )
    }

    fn reply(id: CommandId, outcome: Outcome) -> CommandReply {
        CommandReply {
            id,
            what: "Terminate".into(),
            answer: Answer::new(outcome, "SIGTERM sent"),
        }
    }

    fn terminate() -> crate::act::rules::Action {
        crate::act::rules::Action::Terminate {
            grace_seconds: 10.0,
        }
    }

    fn park_reply(id: CommandId, answer: Answer) -> CommandReply {
        CommandReply {
            id,
            what: "park (GPU memory to host memory)".into(),
            answer,
        }
    }

    #[test]
    fn a_park_is_in_progress_once_accepted_then_shows_its_figures_never_done() {
        let mut s = ActionStatus::default();
        let id = CommandId::next();
        s.asked(key(), &crate::act::rules::Action::Park, id, 1_000);
        s.answered(
            &[park_reply(
                id,
                Answer::accepted("parking python (PID 42): 40.5 GiB to host memory, about 23 s"),
            )],
            1_100,
        );
        // In progress, not late, however long a large park takes.
        let st = s
            .state(key(), 1_000 + 10 * ANSWER_EXPECTED_MS)
            .expect("shown");
        assert_eq!(st.short(), "in progress…");
        assert!(!st.is_warning());
        assert_eq!(st.mark(), "⏳");
        assert!(st
            .sentence(false, "0 B")
            .contains("In progress: parking python"));
        s.prune(1_000 + 10 * ANSWER_EXPECTED_MS);
        assert!(s.state(key(), 1_000 + 10 * ANSWER_EXPECTED_MS).is_some());
        let done = Answer::new(Outcome::Acted, "parked python (PID 42) in 16.8 s")
            .with_figures(Some(40 * GIB + GIB / 2), Some(16.8));
        s.answered(&[park_reply(id, done)], 18_000);
        let st = s.state(key(), 18_500).expect("shown");
        assert_eq!(st.short(), "✔ parked 40.5 GiB in 16.8 s");
        assert_eq!(st.mark(), "✔");
    }

    #[test]
    fn a_refused_or_failed_park_says_why_in_the_row() {
        for (outcome, words) in [
            (Outcome::Skipped, "✖ skipped: "),
            (Outcome::Failed, "✖ failed: "),
        ] {
            let mut s = ActionStatus::default();
            let id = CommandId::next();
            s.asked(key(), &crate::act::rules::Action::Resume, id, 1_000);
            s.answered(&[park_reply(id, Answer::accepted("resuming"))], 1_100);
            let why = "not enough free GPU memory to restore it";
            s.answered(
                &[park_reply(
                    id,
                    Answer::new(outcome, why).with_figures(None, Some(0.2)),
                )],
                2_000,
            );
            let st = s.state(key(), 2_500).expect("shown");
            assert_eq!(st.short(), format!("{words}{why}"));
            assert!(st.is_warning());
        }
    }

    #[test]
    fn waiting_until_its_reply_then_its_outcome() {
        let mut s = ActionStatus::default();
        let id = CommandId::next();
        s.asked(key(), &terminate(), id, 10_000);
        // Another command's reply does not answer it.
        s.answered(&[reply(CommandId::next(), Outcome::Failed)], 10_500);
        assert!(matches!(
            s.state(key(), 11_000),
            Some(State::Waiting {
                late: false,
                started: None,
                ..
            })
        ));
        assert_eq!(
            s.state(key(), 11_000).map(|w| w.short()).as_deref(),
            Some("sent, waiting…")
        );
        let late = s
            .state(key(), 10_000 + ANSWER_EXPECTED_MS + 1)
            .expect("late");
        assert_eq!(late.short(), "no answer yet");
        assert!(late.is_warning());
        s.answered(&[reply(id, Outcome::Acted)], 12_000);
        let st = s.state(key(), 13_000).expect("an outcome");
        assert_eq!(st.short(), "✔ done");
        assert!(st
            .sentence(true, "1 GiB")
            .contains("SIGTERM sent — the process has exited"));
        // Shown for a minute after the reply, then gone (and pruned).
        assert!(s.state(key(), 12_000 + SHOWN_MS).is_some());
        assert_eq!(s.state(key(), 12_000 + SHOWN_MS + 1), None);
        s.prune(12_000 + SHOWN_MS + 1);
        assert!(s.sent.is_empty());
    }

    #[test]
    fn the_table_map_agrees_with_the_one_process_answer() {
        let mut s = ActionStatus::default();
        let id = CommandId::next();
        s.asked(key(), &crate::act::rules::Action::Park, id, 3_000);
        let all = s.states(4_000);
        assert!(matches!(all.get(&key()), Some(State::Waiting { .. })));
        assert_eq!(all.get(&key()), s.state(key(), 4_000).as_ref());
        s.answered(&[reply(id, Outcome::Skipped)], 5_000);
        let all = s.states(6_000);
        assert_eq!(
            all.get(&key()).map(State::short).as_deref(),
            Some("✖ skipped: SIGTERM sent")
        );
        assert_eq!(all.get(&key()), s.state(key(), 6_000).as_ref());
        // Older than a minute: not in the map.
        assert!(s.states(5_000 + SHOWN_MS + 1).is_empty());
    }

    #[test]
    fn a_reply_without_a_request_here_shows_nothing_and_failures_warn() {
        let mut s = ActionStatus::default();
        s.answered(&[reply(CommandId::next(), Outcome::Failed)], 1_000);
        assert_eq!(s.state(key(), 2_000), None);
        assert!(s.states(2_000).is_empty());
        let id = CommandId::next();
        s.asked(key(), &terminate(), id, 3_000);
        s.answered(&[reply(id, Outcome::Failed)], 4_000);
        let st = s.state(key(), 5_000).expect("the engine's outcome");
        assert!(st.is_warning());
        assert_eq!(st.short(), "✖ failed: SIGTERM sent");
    }

    #[test]
    fn a_new_action_replaces_the_last_ones_result() {
        let mut s = ActionStatus::default();
        let first = CommandId::next();
        s.asked(key(), &terminate(), first, 1_000);
        s.answered(&[reply(first, Outcome::Failed)], 2_000);
        let second = CommandId::next();
        s.asked(key(), &terminate(), second, 3_000);
        assert!(matches!(s.state(key(), 3_500), Some(State::Waiting { .. })));
        // The first command's reply, late or repeated, no longer stands for the row.
        s.answered(&[reply(first, Outcome::Failed)], 4_000);
        assert!(matches!(s.state(key(), 4_500), Some(State::Waiting { .. })));
        s.answered(&[reply(second, Outcome::Acted)], 5_000);
        assert_eq!(
            s.state(key(), 5_500).map(|st| st.short()).as_deref(),
            Some("✔ done")
        );
    }
}
