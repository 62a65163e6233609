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

/// Requests from a front end, applied by the engine on its thread.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineCommand {
    /// Stop writing samples (the file stays open).
    PauseRecording,
    /// Resume writing samples.
    ResumeRecording,
    /// New settings (rules, protections, leak sensitivity, notifications).
    ApplySettings(Box<crate::engine::settings::Settings>),
    /// The user's own action on a process (Terminate, Kill, Send signal…), through the same
    /// checks as the rules (identity, protected list, other users); from a window never a
    /// dry run, from an agent's API first under the remote policy
    /// ([`crate::act::rules::action::Safety::remote_verdict`]). The front end names the
    /// process only; the engine builds the target from its own latest sample.
    Manual {
        /// The process: pid + start time, and its GPU.
        key: crate::model::history::ProcSeriesKey,
        /// What to do.
        action: crate::act::rules::Action,
        /// Who sent it.
        from: CommandFrom,
    },
    /// Which targets a rule matches now in this engine (the one that owns the processes),
    /// and which its safety would skip: answered in the reply, nothing is done.
    TestRule {
        /// The rule as edited.
        rule: Box<crate::act::rules::Rule>,
        /// The safety settings to judge by (the window's, as edited); `None`: the engine's
        /// own (an agent always uses its own).
        safety: Option<crate::act::rules::action::Safety>,
    },
}

/// Who sent a manual action ([`EngineCommand::Manual`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandFrom {
    /// A window (this process's, or one attached to an agent through its link).
    Window,
    /// A client of an agent's HTTP API: the engine's remote policy applies.
    Agent,
}

/// Which targets a rule matches right now (the Settings window's "test this rule"), each with
/// the reason it would be skipped under `safety` (protected, another user's, simulated…), or
/// `None` when the action would go ahead (or be logged, in a dry run), as `runner` judges it.
pub fn test_rule(
    rule: &crate::act::rules::Rule,
    m: &crate::engine::view::Monitor,
    safety: &crate::act::rules::action::Safety,
    runner: &crate::act::rules::action::ActionRunner,
) -> Vec<(crate::act::rules::eval::Target, Option<String>)> {
    let Some(snap) = &m.latest else {
        return Vec::new();
    };
    let mut st = crate::act::rules::eval::RuleState::with_last_active(snap, &m.last_active);
    st.set_releasable_cache(crate::act::rules::eval::releasable_cache_of(snap));
    // PyTorch's allocated memory over the growth window, from the history.
    let h = &m.history;
    let from = h.tick_at(snap.taken_at_ms - crate::act::rules::eval::GROWTH_WINDOW_MS);
    for p in snap.processes.iter().filter(|p| p.torch.is_some()) {
        let key = (p.key(), p.device_index);
        if let Some(series) = h.torch(&key, crate::model::history::TorchFigure::Allocated) {
            st.set_allocated_readings(
                key,
                series
                    .values(from, h.end_tick())
                    .into_iter()
                    .filter(|(_, v)| *v != crate::model::history::NONE)
                    .filter_map(|(t, v)| Some((h.time_of(t)?, u64::from(v) * crate::model::MIB))),
            );
        }
    }
    let facts = crate::act::rules::eval::Facts {
        leaking_since: m
            .leaks
            .iter()
            .filter(|l| l.ended_ms.is_none())
            .filter_map(|l| match l.key {
                crate::engine::view::LeakKey::Process(k) => Some((k, l.flagged_ms)),
                crate::engine::view::LeakKey::Ghost(_) => None,
            })
            .collect(),
    };
    st.matches_now(rule, snap, &facts)
        .into_iter()
        .map(|target| {
            let p = crate::act::rules::eval::Planned {
                rule: rule.name.clone(),
                action: rule.action.clone(),
                dry_run: rule.dry_run,
                allow_other_users: rule.allow_other_users,
                target: target.clone(),
            };
            let why = runner.would_refuse(&p, safety);
            (target, why)
        })
        .collect()
}

/// Why `rule` matches nothing in `m` now (see [`crate::act::rules::eval::RuleState::why_nothing`]).
fn why_nothing(rule: &crate::act::rules::Rule, m: &crate::engine::view::Monitor) -> String {
    match &m.latest {
        None => "no sample yet".into(),
        Some(snap) => crate::act::rules::eval::RuleState::with_last_active(snap, &m.last_active)
            .why_nothing(rule, snap),
    }
}

impl EngineCommand {
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

/// What rule `rule` matches in `m` now under `safety` (see [`test_rule`]), as an answer;
/// `runner` judges each target as it would judge it acting (the engine's own, which knows its
/// GPUs, what it parked and whether its GPUs are simulated).
pub(crate) fn test_rule_answer(
    rule: &crate::act::rules::Rule,
    m: &crate::engine::view::Monitor,
    safety: &crate::act::rules::action::Safety,
    runner: &crate::act::rules::action::ActionRunner,
) -> Answer {
    let matches: Vec<RuleMatch> = test_rule(rule, m, safety, runner)
        .into_iter()
        .map(|(t, why)| RuleMatch {
            target: t.describe(),
            skipped: why,
        })
        .collect();
    let acting = matches.iter().filter(|m| m.skipped.is_none()).count();
    let detail = match (matches.len(), acting) {
        (0, _) => format!("It matches nothing right now: {}.", why_nothing(rule, m)),
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
