//! The agent's own counters: sampler errors and cleanup actions, kept monotonic (the View's
//! lists are bounded, a Prometheus counter must never go down). Actions are counted from the
//! engine's numbered events ([`crate::engine::EngineEvent`]): each activity event numbered
//! above the last one counted, once.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::act::rules::action::{Activity, Outcome};
use crate::engine::view::Monitor;

/// `(rule, action kind, outcome)`.
type ActionLabels = (String, String, &'static str);

/// Counters updated after each tick (on the sampler thread, through its notify callback).
#[derive(Debug, Default)]
pub struct AgentStats {
    /// Sampling attempts that failed.
    pub sampler_errors: AtomicU64,
    actions: Mutex<ActionCount>,
    /// The last scrape's duration in nanoseconds.
    pub last_scrape_ns: AtomicU64,
}

#[derive(Debug, Default)]
struct ActionCount {
    by_label: BTreeMap<ActionLabels, u64>,
    /// The number of the last event counted.
    last_seq: u64,
}

/// The action's kind, a bounded label: the first word of its label (`terminate`, `signal`,
/// `run`, `notify`).
fn action_kind(label: &str) -> String {
    label
        .split_whitespace()
        .next()
        .unwrap_or("unknown")
        .to_string()
}

/// The outcome as a label value.
fn outcome_label(o: Outcome) -> &'static str {
    match o {
        Outcome::WouldAct => "would_act",
        Outcome::Acted => "acted",
        Outcome::Failed => "failed",
        Outcome::Skipped => "skipped",
    }
}

impl AgentStats {
    /// Counts what the View shows after a sampling attempt: a failed attempt, and the
    /// activity events numbered above the last one counted.
    pub(crate) fn observe(&self, m: &Monitor) {
        if m.last_error.is_some() {
            self.sampler_errors.fetch_add(1, Ordering::Relaxed);
        }
        let Ok(mut c) = self.actions.lock() else {
            return;
        };
        let last = c.last_seq;
        for e in m.events.iter().filter(|e| e.seq > last) {
            c.last_seq = e.seq;
            if let crate::engine::EngineEventKind::Activity { entry, .. } = &e.kind {
                c.count(entry);
            }
        }
    }

    /// The action counters, sorted by labels.
    pub(crate) fn actions(&self) -> Vec<(ActionLabels, u64)> {
        self.actions
            .lock()
            .map(|c| c.by_label.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }
}

impl ActionCount {
    /// Logs activity entry `a` in the journal and counts it if it is an action.
    fn count(&mut self, a: &Activity) {
        // The operator's record of every action, in the journal.
        tracing::info!(
            rule = %a.rule,
            target = %a.target.describe(),
            outcome = outcome_label(a.outcome),
            "{}: {}",
            a.action,
            a.detail
        );
        if !a.counts_as_action() {
            return;
        }
        *self
            .by_label
            .entry((
                a.rule.clone(),
                action_kind(&a.action),
                outcome_label(a.outcome),
            ))
            .or_insert(0) += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::rules::eval::Target;

    /// `a` as the engine's next event in `m`'s list.
    fn push(m: &mut Monitor, a: Activity) {
        let seq = m.events.back().map_or(1, |e| e.seq + 1);
        m.events.push_back(
            crate::engine::EngineEvent {
                seq,
                at_ms: a.unix_ms,
                kind: crate::engine::EngineEventKind::Activity {
                    entry: a,
                    from_command: false,
                },
            }
            .into(),
        );
    }

    fn act(ms: i64, outcome: Outcome) -> Activity {
        Activity {
            unix_ms: ms,
            rule: "r".into(),
            target: Target::Device(0),
            action: "terminate (SIGKILL after 10 s)".into(),
            outcome,
            detail: String::new(),
            entry: crate::act::rules::action::Entry::Action,
        }
    }

    #[test]
    fn counts_each_entry_once_and_failed_samples() {
        let s = AgentStats::default();
        let mut m = Monitor::new(1000, 10);
        push(&mut m, act(1, Outcome::Acted));
        s.observe(&m);
        s.observe(&m);
        push(&mut m, act(2, Outcome::Skipped));
        push(&mut m, act(3, Outcome::Acted));
        s.observe(&m);
        // The oldest scrolls out of the bounded list: nothing is counted twice.
        m.events.pop_front();
        s.observe(&m);
        // An entry equal to one counted is still a new event: counted.
        push(&mut m, act(3, Outcome::Acted));
        s.observe(&m);
        let got = s.actions();
        assert_eq!(
            got,
            vec![
                (("r".into(), "terminate".into(), "acted"), 3),
                (("r".into(), "terminate".into(), "skipped"), 1),
            ]
        );
        assert_eq!(s.sampler_errors.load(Ordering::Relaxed), 0);
        m.last_error = Some("driver hiccup".into());
        s.observe(&m);
        assert_eq!(s.sampler_errors.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_release_answered_late_counts_once_with_the_answers_outcome() {
        use crate::act::rules::action::{
            Entry, ANSWER_FOLLOWS, ANSWER_SUFFIX, DRIVER_FIGURE_SUFFIX,
        };
        let s = AgentStats::default();
        let mut m = Monitor::new(1000, 10);
        let entry = |ms, action: String, outcome, detail: String, entry| Activity {
            unix_ms: ms,
            rule: "r".into(),
            target: Target::Device(0),
            action,
            outcome,
            detail,
            entry,
        };
        let label = "release cached memory";
        push(
            &mut m,
            entry(
                1,
                label.into(),
                Outcome::Acted,
                format!("asked the PyTorch companion; {ANSWER_FOLLOWS}"),
                Entry::Asked,
            ),
        );
        push(
            &mut m,
            entry(
                2,
                format!("{label}{ANSWER_SUFFIX}"),
                Outcome::Failed,
                "timed out".into(),
                Entry::Action,
            ),
        );
        push(
            &mut m,
            entry(
                3,
                format!("{label}{DRIVER_FIGURE_SUFFIX}"),
                Outcome::Acted,
                "58178 → 6220 MiB".into(),
                Entry::FollowUp,
            ),
        );
        s.observe(&m);
        assert_eq!(
            s.actions(),
            vec![(("r".into(), "release".into(), "failed"), 1)]
        );
    }
}
