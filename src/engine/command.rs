//! A front end's commands get replies: each command sent through a link has a
//! [`CommandId`], and the engine that carries it out (this process's, or an agent's) answers
//! with a [`CommandReply`] under that id, which the link hands back to the front end
//! ([`crate::link::EngineLink::take_replies`]). The window shows it where it was asked.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::model::outcome::Outcome;

/// Names one command sent through a link (unique in this process).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct CommandId(pub u64);

impl CommandId {
    /// A new id, never handed out before in this process.
    pub fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// One target a tested rule matches now, and why it would be skipped (`None`: it would act,
/// or log in a dry run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleMatch {
    /// The target in a few words.
    pub target: String,
    /// Why the rule's safety would skip it.
    pub skipped: Option<String>,
}

/// How a command ended, as its engine says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Acted, would act (a dry run), skipped or failed.
    pub outcome: Outcome,
    /// In a sentence: the reason for a skip, the error, what was done.
    pub detail: String,
    /// For a rule test: what the rule matches now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<RuleMatch>>,
}

impl Answer {
    /// An answer without matches.
    pub fn new(outcome: Outcome, detail: impl Into<String>) -> Self {
        Self {
            outcome,
            detail: detail.into(),
            matches: None,
        }
    }
}

/// The reply to one command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandReply {
    /// The command's id.
    pub id: CommandId,
    /// What was asked, in a word or two ("Terminate", "Test rule").
    pub what: String,
    /// How it ended.
    pub answer: Answer,
}

/// Most replies a link keeps for its front end (older ones are dropped first).
pub const REPLIES_KEPT: usize = 256;

/// Replies waiting for a front end: written by an engine's or a link's thread, taken by the
/// front end.
#[derive(Debug, Default)]
pub struct Replies(Mutex<VecDeque<CommandReply>>);

impl Replies {
    /// Adds a reply (at most [`REPLIES_KEPT`] wait).
    pub fn push(&self, r: CommandReply) {
        let mut q = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        q.push_back(r);
        while q.len() > REPLIES_KEPT {
            q.pop_front();
        }
    }

    /// Takes every waiting reply, oldest first.
    pub fn take(&self) -> Vec<CommandReply> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain(..)
            .collect()
    }
}

impl super::EngineCommand {
    /// What it asks, in a word or two (the reply's [`CommandReply::what`]).
    pub fn label(&self) -> String {
        match self {
            Self::PauseRecording => "Pause recording".into(),
            Self::ResumeRecording => "Resume recording".into(),
            Self::ApplySettings(_) => "Apply settings".into(),
            Self::Manual { action, .. } => action.label(),
            Self::TestRule { .. } => "Test rule".into(),
        }
    }
}

/// What rule `rule` matches in `m` now under `safety` (see [`super::test_rule`]), as an answer.
pub fn test_rule_answer(
    rule: &crate::act::rules::Rule,
    m: &crate::engine::view::Monitor,
    safety: &crate::act::rules::action::Safety,
) -> Answer {
    let matches: Vec<RuleMatch> = super::test_rule(rule, m, safety)
        .into_iter()
        .map(|(t, why)| RuleMatch {
            target: t.describe(),
            skipped: why,
        })
        .collect();
    let acting = matches.iter().filter(|m| m.skipped.is_none()).count();
    let detail = match (matches.len(), acting) {
        (0, _) => "It matches nothing right now.".to_string(),
        (n, a) if a == n => format!("It matches {n} right now, and would act on each."),
        (n, 0) => format!("It matches {n} right now, but would skip every one."),
        (n, a) => format!("It matches {n} right now; it would act on {a}."),
    };
    Answer {
        outcome: if acting > 0 {
            Outcome::WouldAct
        } else {
            Outcome::Skipped
        },
        detail,
        matches: Some(matches),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_replies_are_bounded() {
        let (a, b) = (CommandId::next(), CommandId::next());
        assert_ne!(a, b);
        let q = Replies::default();
        for i in 0..(REPLIES_KEPT + 10) {
            q.push(CommandReply {
                id: CommandId(i as u64),
                what: "x".into(),
                answer: Answer::new(Outcome::Acted, "done"),
            });
        }
        let got = q.take();
        assert_eq!(got.len(), REPLIES_KEPT);
        assert_eq!(got[0].id, CommandId(10), "the oldest go first");
        assert!(q.take().is_empty());
    }
}
