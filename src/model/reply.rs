//! Replies to a front end's commands, as plain data: each command sent through a link has a
//! [`CommandId`], and the engine that carries it out (this process's, or an agent's) answers
//! with a [`CommandReply`] under that id, which the link hands back to the front end
//! (`EngineLink::take_replies`, see `crate::engine::command`).
//!
//! A command whose work takes longer than a tick (a park, a resume, a question to a PyTorch
//! companion) is answered twice under its id: first [`Stage::Accepted`] (started, in
//! progress), then, when it ends, its final reply (done, refused or failed, with its figures:
//! the bytes moved, the seconds taken, the reason). Every other command has one reply, the
//! final one.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::outcome::Outcome;

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

/// Whether a reply ends its command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// How the command ended: done, refused (skipped) or failed.
    #[default]
    Final,
    /// Started and in progress: the final reply follows under the same id.
    Accepted,
}

impl Stage {
    /// True for [`Stage::Final`] (the wire leaves it out).
    pub fn is_final(&self) -> bool {
        *self == Stage::Final
    }
}

/// How a command ended (or, [`Stage::Accepted`], that it started), as its engine says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Acted, would act (a dry run), skipped (refused) or failed; an accepted command has
    /// acted (it started).
    pub outcome: Outcome,
    /// In a sentence: the reason for a skip, the error, what was done.
    pub detail: String,
    /// For a rule test: what the rule matches now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<Vec<RuleMatch>>,
    /// Final, or accepted with its final reply to follow.
    #[serde(default, skip_serializing_if = "Stage::is_final")]
    pub stage: Stage,
    /// The bytes the command moved or freed (a park's, a resume's, a release's), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// The seconds its work took (a park, a resume, a companion's answer), where measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

impl Answer {
    /// A final answer without matches or figures.
    pub fn new(outcome: Outcome, detail: impl Into<String>) -> Self {
        Self {
            outcome,
            detail: detail.into(),
            matches: None,
            stage: Stage::Final,
            bytes: None,
            seconds: None,
        }
    }

    /// Started, in progress: its final answer follows under the same command id.
    pub fn accepted(detail: impl Into<String>) -> Self {
        Self {
            stage: Stage::Accepted,
            ..Self::new(Outcome::Acted, detail)
        }
    }

    /// The same answer with its figures: `bytes` moved or freed, `seconds` taken.
    pub(crate) fn with_figures(self, bytes: Option<u64>, seconds: Option<f64>) -> Self {
        Self {
            bytes,
            seconds,
            ..self
        }
    }

    /// True unless it is [`Stage::Accepted`].
    pub fn is_final(&self) -> bool {
        self.stage.is_final()
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
/// front end (all at once, [`Replies::take`], or one command's, waited for,
/// [`Replies::wait_take`]).
#[derive(Debug, Default)]
pub struct Replies {
    queue: Mutex<VecDeque<CommandReply>>,
    arrived: Condvar,
}

impl Replies {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<CommandReply>> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Adds a reply (at most [`REPLIES_KEPT`] wait) and wakes whoever waits for one.
    pub(crate) fn push(&self, r: CommandReply) {
        let mut q = self.lock();
        q.push_back(r);
        while q.len() > REPLIES_KEPT {
            q.pop_front();
        }
        drop(q);
        self.arrived.notify_all();
    }

    /// Takes every waiting reply, oldest first.
    pub(crate) fn take(&self) -> Vec<CommandReply> {
        self.lock().drain(..).collect()
    }

    /// Takes the oldest reply under `id`, waiting up to `timeout` for one to arrive (woken
    /// by [`Replies::push`], never polling); None when none came in time. Other replies stay.
    pub(crate) fn wait_take(&self, id: CommandId, timeout: Duration) -> Option<CommandReply> {
        let deadline = Instant::now() + timeout;
        let mut q = self.lock();
        loop {
            if let Some(i) = q.iter().position(|r| r.id == id) {
                return q.remove(i);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            q = self
                .arrived
                .wait_timeout(q, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
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

    fn reply(id: u64, answer: Answer) -> CommandReply {
        CommandReply {
            id: CommandId(id),
            what: "Park".into(),
            answer,
        }
    }

    #[test]
    fn a_waiter_gets_its_own_replies_in_order_and_leaves_the_others() {
        let q = std::sync::Arc::new(Replies::default());
        q.push(reply(1, Answer::new(Outcome::Acted, "other")));
        let pusher = q.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            pusher.push(reply(7, Answer::accepted("parking")));
            pusher.push(reply(
                7,
                Answer::new(Outcome::Acted, "parked").with_figures(Some(1 << 30), Some(2.5)),
            ));
        });
        let started = Instant::now();
        let first = q
            .wait_take(CommandId(7), Duration::from_secs(10))
            .expect("accepted");
        assert!(started.elapsed() >= Duration::from_millis(40), "it waited");
        assert_eq!(first.answer.stage, Stage::Accepted);
        t.join().expect("pusher");
        let last = q.wait_take(CommandId(7), Duration::ZERO).expect("final");
        assert!(last.answer.is_final());
        assert_eq!(
            (last.answer.bytes, last.answer.seconds),
            (Some(1 << 30), Some(2.5))
        );
        assert_eq!(q.wait_take(CommandId(7), Duration::from_millis(20)), None);
        assert_eq!(q.take().len(), 1, "the other command's reply stays");
    }

    #[test]
    fn a_final_answer_leaves_its_stage_and_figures_off_the_wire() {
        let plain = serde_json::to_value(Answer::new(Outcome::Acted, "done")).expect("json");
        assert_eq!(
            plain,
            serde_json::json!({"outcome": "acted", "detail": "done"})
        );
        let accepted = serde_json::to_value(Answer::accepted("parking")).expect("json");
        assert_eq!(accepted["stage"], "accepted");
        let back: Answer = serde_json::from_value(plain).expect("back");
        assert!(back.is_final());
    }
}
