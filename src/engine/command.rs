//! A front end's commands get replies: each command sent through a link has a
//! [`CommandId`], and the engine that carries it out (this process's, or an agent's) answers
//! with a [`CommandReply`] under that id, which the link hands back to the front end
//! ([`crate::link::EngineLink::take_replies`]). The window shows it where it was asked.
//!
//! A command whose work takes longer than a tick (a park, a resume, a question to a PyTorch
//! companion) is answered twice under its id: first [`Stage::Accepted`], then its final
//! reply. The reply types are plain data ([`crate::model::reply`]); here is what the engine
//! adds: a command's label and a rule test's answer.

use crate::model::outcome::Outcome;
pub use crate::model::reply::{
    Answer, CommandId, CommandReply, Replies, RuleMatch, Stage, REPLIES_KEPT,
};

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
        matches: Some(matches),
        ..Answer::new(
            if acting > 0 {
                Outcome::WouldAct
            } else {
                Outcome::Skipped
            },
            detail,
        )
    }
}
