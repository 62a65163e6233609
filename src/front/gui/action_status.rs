//! What became of the manual actions the user took, per process: shown where the action was
//! taken (the table's row, the detail pane) rather than only in the Activity tab.
//!
//! Filled from what the engine publishes today: the window notes when an action is sent
//! ([`ActionStatus::asked`]) and reads its outcome from the monitor's activity log (the
//! newest manual entry for that process). Until an entry newer than the request arrives the
//! action is shown as waiting.

use std::collections::HashMap;

use crate::engine::view::Monitor;
use crate::model::history::ProcSeriesKey;
use crate::model::outcome::Outcome;
use crate::model::UnixMs;

/// How long a result stays next to its row and in the detail pane.
pub const SHOWN_MS: UnixMs = 60_000;

/// How long an action may wait for its activity entry before the row says so.
pub const ANSWER_EXPECTED_MS: UnixMs = 15_000;

/// How a process's last action stands.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Sent; no outcome yet (`late`: longer than [`ANSWER_EXPECTED_MS`]).
    Waiting {
        /// What was asked ("terminate (SIGTERM, …)").
        what: String,
        /// Past the time an answer was expected.
        late: bool,
    },
    /// The engine's outcome, with its detail.
    Done {
        /// How it ended.
        outcome: Outcome,
        /// The activity entry's detail.
        detail: String,
        /// When it ended.
        at_ms: UnixMs,
    },
}

impl State {
    /// A few words for the table's row (before the process's name).
    pub fn short(&self) -> String {
        match self {
            State::Waiting { late: false, .. } => "sent, waiting…".into(),
            State::Waiting { late: true, .. } => "no answer yet".into(),
            State::Done { outcome, .. } => match outcome {
                Outcome::Acted => "✔ done".into(),
                Outcome::WouldAct => "dry run: not sent".into(),
                Outcome::Skipped => "✖ not done".into(),
                Outcome::Failed => "✖ failed".into(),
            },
        }
    }

    /// Whether it needs the user's eye (failed, skipped, no answer).
    pub fn is_warning(&self) -> bool {
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
    pub fn sentence(&self, exited: bool, holding: &str) -> String {
        match self {
            State::Waiting { what, late: false } => {
                format!("Sent: {what} — waiting for the result.")
            }
            State::Waiting { what, late: true } => format!(
                "Sent: {what} — no result after {} s; see the Activity tab.",
                ANSWER_EXPECTED_MS / 1000
            ),
            State::Done {
                outcome,
                detail,
                at_ms,
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
                    Outcome::Skipped => format!("{when}: not done — {detail}"),
                    Outcome::Failed => format!("{when}: failed — {detail}"),
                }
            }
        }
    }
}

/// The actions the user sent this session, by process, until their outcome is old.
#[derive(Debug, Default, Clone)]
pub struct ActionStatus {
    asked: HashMap<ProcSeriesKey, (String, UnixMs)>,
}

impl ActionStatus {
    /// Notes that `action` was sent for `key` at `now`.
    pub fn asked(&mut self, key: ProcSeriesKey, action: &crate::act::rules::Action, now: UnixMs) {
        self.asked.insert(key, (action.label(), now));
    }

    /// Forgets requests whose outcome is older than [`SHOWN_MS`].
    pub fn prune(&mut self, now: UnixMs) {
        self.asked
            .retain(|_, (_, at)| now - *at <= SHOWN_MS + ANSWER_EXPECTED_MS);
    }

    /// How `key`'s last manual action stands at `now`: its outcome from `m`'s activity log
    /// (shown for [`SHOWN_MS`]), or waiting when one was sent here after the newest outcome.
    pub fn state(&self, m: &Monitor, key: ProcSeriesKey, now: UnixMs) -> Option<State> {
        let last = last_manual(m, key);
        if let Some(w) = self.waiting(key, last, now) {
            return Some(w);
        }
        last.filter(|a| now - a.unix_ms <= SHOWN_MS)
            .map(|a| State::Done {
                outcome: a.outcome,
                detail: a.detail.clone(),
                at_ms: a.unix_ms,
            })
    }

    /// `key`'s request sent here, when no outcome at or after it is in the log (`last`: the
    /// newest manual entry for `key`).
    fn waiting(
        &self,
        key: ProcSeriesKey,
        last: Option<&crate::act::rules::action::Activity>,
        now: UnixMs,
    ) -> Option<State> {
        let (what, at) = self.asked.get(&key)?;
        let answered = last.is_some_and(|a| a.unix_ms >= *at);
        (!answered).then(|| State::Waiting {
            what: what.clone(),
            late: now - *at > ANSWER_EXPECTED_MS,
        })
    }

    /// How every process with a recent manual action stands at `now` (the table's rows):
    /// one pass over the activity log's last [`SHOWN_MS`], newest first, and the requests
    /// sent here.
    pub fn states(&self, m: &Monitor, now: UnixMs) -> HashMap<ProcSeriesKey, State> {
        let mut out = HashMap::new();
        for a in m.activity.iter().rev() {
            if now - a.unix_ms > SHOWN_MS {
                break;
            }
            if a.rule != "manual" || !a.counts_as_action() {
                continue;
            }
            if let crate::act::rules::eval::Target::Process { key, .. } = &a.target {
                out.entry(*key).or_insert_with(|| State::Done {
                    outcome: a.outcome,
                    detail: a.detail.clone(),
                    at_ms: a.unix_ms,
                });
            }
        }
        for key in self.asked.keys() {
            if let Some(w) = self.waiting(*key, last_manual(m, *key), now) {
                out.insert(*key, w);
            }
        }
        out
    }
}

/// The newest activity entry of a manual action on `key` that stands for its outcome.
fn last_manual(m: &Monitor, key: ProcSeriesKey) -> Option<&crate::act::rules::action::Activity> {
    m.activity.iter().rev().find(|a| {
        a.rule == "manual"
            && a.counts_as_action()
            && matches!(&a.target, crate::act::rules::eval::Target::Process { key: k, .. } if *k == key)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::rules::action::Activity;
    use crate::act::rules::eval::Target;
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

    fn entry(at: UnixMs, outcome: Outcome) -> Activity {
        Activity {
            unix_ms: at,
            rule: "manual".into(),
            target: Target::Process {
                key: key(),
                info: None,
                used_bytes: None,
                origin: crate::model::Origin::Recorded,
            },
            action: "terminate".into(),
            outcome,
            detail: "SIGTERM sent".into(),
            entry: Default::default(),
        }
    }

    #[test]
    fn waiting_until_an_entry_newer_than_the_request_then_its_outcome() {
        let mut m = Monitor::new(1000, 10);
        let mut s = ActionStatus::default();
        // An older outcome does not answer a new request.
        m.activity.push_back(entry(5_000, Outcome::Failed));
        s.asked(
            key(),
            &crate::act::rules::Action::Terminate {
                grace_seconds: 10.0,
            },
            10_000,
        );
        assert!(matches!(
            s.state(&m, key(), 11_000),
            Some(State::Waiting { late: false, .. })
        ));
        assert!(matches!(
            s.state(&m, key(), 10_000 + ANSWER_EXPECTED_MS + 1),
            Some(State::Waiting { late: true, .. })
        ));
        m.activity.push_back(entry(12_000, Outcome::Acted));
        let st = s.state(&m, key(), 13_000).expect("an outcome");
        assert_eq!(st.short(), "✔ done");
        assert!(st.sentence(true, "1 GiB").contains("has exited"));
        // Shown for a minute, then gone.
        assert_eq!(s.state(&m, key(), 12_000 + SHOWN_MS + 1), None);
    }

    #[test]
    fn the_table_map_agrees_with_the_one_process_answer() {
        let mut m = Monitor::new(1000, 10);
        let mut s = ActionStatus::default();
        m.activity.push_back(entry(1_000, Outcome::Acted));
        let all = s.states(&m, 2_000);
        assert_eq!(all.get(&key()), s.state(&m, key(), 2_000).as_ref());
        s.asked(key(), &crate::act::rules::Action::Park, 3_000);
        let all = s.states(&m, 4_000);
        assert!(matches!(all.get(&key()), Some(State::Waiting { .. })));
        assert_eq!(all.get(&key()), s.state(&m, key(), 4_000).as_ref());
        // Older than a minute: not in the map.
        assert!(ActionStatus::default()
            .states(&m, 1_000 + SHOWN_MS + 1)
            .is_empty());
    }

    #[test]
    fn an_outcome_without_a_request_here_is_shown_and_failures_warn() {
        let mut m = Monitor::new(1000, 10);
        m.activity.push_back(entry(1_000, Outcome::Failed));
        let st = ActionStatus::default()
            .state(&m, key(), 2_000)
            .expect("the engine's outcome");
        assert!(st.is_warning());
        assert_eq!(st.short(), "✖ failed");
    }
}
