//! The agent's own counters: sampler errors and cleanup actions, kept monotonic (the monitor's
//! activity list is bounded, a Prometheus counter must never go down).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::act::rules::action::{Activity, Outcome};
use crate::engine::view::Monitor;

/// `(rule, action kind, outcome)`.
pub type ActionLabels = (String, String, &'static str);

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
    last_seen: Option<Activity>,
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
    /// Counts what the monitor shows after a sampling attempt: a failed attempt, and the
    /// activity entries added since the last call.
    pub fn observe(&self, m: &Monitor) {
        if m.last_error.is_some() {
            self.sampler_errors.fetch_add(1, Ordering::Relaxed);
        }
        let Ok(mut c) = self.actions.lock() else {
            return;
        };
        let acts = &m.activity;
        // New entries are those after the last one counted; if it has scrolled out of the
        // bounded list, all entries there now are new.
        let start = match &c.last_seen {
            None => 0,
            Some(last) => acts
                .iter()
                .rposition(|a| a == last)
                .map_or(0, |i| i + 1)
                .min(acts.len()),
        };
        for a in acts.iter().skip(start) {
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
                continue;
            }
            *c.by_label
                .entry((
                    a.rule.clone(),
                    action_kind(&a.action),
                    outcome_label(a.outcome),
                ))
                .or_insert(0) += 1;
        }
        c.last_seen = acts.back().cloned();
    }

    /// The action counters, sorted by labels.
    pub fn actions(&self) -> Vec<(ActionLabels, u64)> {
        self.actions
            .lock()
            .map(|c| c.by_label.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::rules::eval::Target;

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
        m.activity.push_back(act(1, Outcome::Acted));
        s.observe(&m);
        s.observe(&m);
        m.activity.push_back(act(2, Outcome::Skipped));
        m.activity.push_back(act(3, Outcome::Acted));
        s.observe(&m);
        // The oldest scrolls out of the bounded list: nothing is counted twice.
        m.activity.pop_front();
        s.observe(&m);
        let got = s.actions();
        assert_eq!(
            got,
            vec![
                (("r".into(), "terminate".into(), "acted"), 2),
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
        m.activity.push_back(entry(
            1,
            label.into(),
            Outcome::Acted,
            format!("asked the PyTorch companion; {ANSWER_FOLLOWS}"),
            Entry::Asked,
        ));
        m.activity.push_back(entry(
            2,
            format!("{label}{ANSWER_SUFFIX}"),
            Outcome::Failed,
            "timed out".into(),
            Entry::Action,
        ));
        m.activity.push_back(entry(
            3,
            format!("{label}{DRIVER_FIGURE_SUFFIX}"),
            Outcome::Acted,
            "58178 → 6220 MiB".into(),
            Entry::FollowUp,
        ));
        s.observe(&m);
        assert_eq!(
            s.actions(),
            vec![(("r".into(), "release".into(), "failed"), 1)]
        );
    }
}
