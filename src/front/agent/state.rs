//! What the agent's HTTP threads share ([`AgentState`]): the engine's state, the counters,
//! the token, and the way to the engine's replies.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::engine::command::EngineCommand;
use crate::engine::sampler::SamplerHandle;
use crate::engine::shared::SharedMonitor;

use super::stats;

/// What the HTTP threads share.
pub struct AgentState {
    /// The engine's state.
    pub shared: SharedMonitor,
    /// The agent's counters.
    pub stats: Arc<stats::AgentStats>,
    /// The API token.
    pub token: String,
    /// The sessions folder served by the API.
    pub sessions_dir: PathBuf,
    /// See [`super::AgentOptions::max_processes`].
    pub max_processes: usize,
    /// The agent listens on a loopback address only: requests must name an IP address or
    /// localhost in `Host` ([`super::http::loopback_host`]).
    pub loopback_only: bool,
    /// `/api/past`'s events per session log (see [`crate::engine::past_cache`]).
    pub past: crate::engine::past_cache::PastCache,
    pub(super) sampler: Mutex<Option<SamplerHandle>>,
    pub(super) stopping: AtomicBool,
    /// Where the engine's replies wait until the request that asked takes its own.
    pub(super) replies: Arc<crate::engine::command::Replies>,
    /// The commands answered "accepted", newest last (at most
    /// [`crate::engine::command::REPLIES_KEPT`]): their final replies come in the View.
    pub(super) accepted: Mutex<std::collections::VecDeque<crate::engine::command::CommandId>>,
}

impl AgentState {
    /// Sends a command to the engine: its id, or None when the engine is not running.
    pub(crate) fn send(&self, c: EngineCommand) -> Option<crate::engine::command::CommandId> {
        match self.sampler.lock() {
            Ok(s) => s.as_ref().map(|h| h.send(c)),
            Err(_) => None,
        }
    }

    /// Sends `c` to the engine and waits up to `wait` for its first reply: the final one, or
    /// "accepted" for work that ends later (its final reply then comes in the View's
    /// `replies`, and from [`AgentState::final_reply`]). The wait is on the reply itself
    /// (woken when it arrives), not a poll.
    ///
    /// # Errors
    /// The HTTP status and why: 503 when the engine is not running, 504 when it did not
    /// answer in time.
    pub(crate) fn ask(
        &self,
        c: EngineCommand,
        wait: Duration,
    ) -> Result<crate::engine::command::CommandReply, (u16, &'static str)> {
        let Some(id) = self.send(c) else {
            return Err((503, "the engine is not running"));
        };
        let r = self
            .replies
            .wait_take(id, wait)
            .ok_or((504, "the engine did not answer in time"))?;
        if !r.answer.is_final() {
            let mut a = self
                .accepted
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            a.push_back(id);
            while a.len() > crate::engine::command::REPLIES_KEPT {
                a.pop_front();
            }
        }
        Ok(r)
    }

    /// How command `id` stands: `Some(Some(final reply))` once it ended (while the View
    /// keeps it), `Some(None)` while an accepted command is in progress, `None` for an id
    /// this agent does not know (or no longer keeps).
    pub(crate) fn final_reply(
        &self,
        id: crate::engine::command::CommandId,
    ) -> Option<Option<crate::engine::command::CommandReply>> {
        let done = self
            .shared
            .read()
            .ok()
            .and_then(|m| m.replies.iter().rev().find(|r| r.id == id).cloned());
        if done.is_some() {
            return Some(done);
        }
        self.accepted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(&id)
            .then_some(None)
    }
}
