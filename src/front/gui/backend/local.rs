//! This computer's engine: built on the source chosen, sampling on its own thread; and the
//! answers a window without any engine gives.

use crate::engine::command::{Answer, CommandId, CommandReply, Replies};
use crate::engine::sampler::{Notify, SamplerHandle, SourceFactory};
use crate::engine::shared::SharedMonitor;
use crate::engine::EngineCommand;
use crate::link::EngineLink;

/// Why an action asked of a window without an engine (nothing sampling, no agent attached)
/// was not done.
pub const NO_ENGINE: &str = "no engine is attached to this window: nothing was sent";

/// How this computer's engine is built.
pub(super) struct LocalEngine<'a> {
    /// The state it writes.
    pub shared: &'a SharedMonitor,
    /// Its sampling interval, ms.
    pub interval_ms: u64,
    /// Where it records its session log.
    pub record: &'a crate::engine::RecordTo,
    /// The settings it runs with.
    pub settings: &'a crate::engine::settings::Settings,
    /// The window's own notices (desktop notifications unavailable).
    pub notices: &'a crate::front::gui::notices::OwnNotices,
}

impl LocalEngine<'_> {
    /// Starts the engine on `factory`'s source on its own thread, its alerts becoming desktop
    /// notifications; `None` when no thread could be started (the View says why).
    pub(crate) fn start(
        &self,
        factory: SourceFactory,
        notify: Notify,
    ) -> Option<Box<dyn EngineLink>> {
        let engine = crate::engine::EngineBuilder::new(self.shared.clone(), self.interval_ms)
            .record(self.record.clone())
            .settings(self.settings)
            .options(crate::engine::EngineOptions {
                // Alerts become desktop notifications; reports are said on stderr too.
                alerts: Some(printing(crate::front::gui::notify::subscriber(
                    self.notices.clone(),
                    Box::new(|| None),
                ))),
                // The engine keeps the sessions folder within the retention limits (at
                // start and every hour), never deleting a log that is open for writing.
                retention_dir: match self.record {
                    crate::engine::RecordTo::Dir(d) => Some(d.clone()),
                    _ => None,
                },
            });
        match SamplerHandle::start(factory, engine, notify) {
            Ok(h) => Some(Box::new(h)),
            Err(e) => {
                crate::engine::stages::publish::source_failed(
                    self.shared,
                    format!("could not start the sampler thread: {e}"),
                );
                None
            }
        }
    }
}

/// `sink`, each report printed on stderr first ([`crate::front::report_words::print`]).
fn printing(sink: crate::engine::AlertSink) -> crate::engine::AlertSink {
    std::sync::Arc::new(move |e| {
        crate::front::report_words::print(&e);
        sink(e);
    })
}

/// Answers `c` without an engine: a rule test from the state in `shared`, an action with a
/// skip (nothing here could carry it out); the reply goes to `replies` under the id
/// returned. Other commands are not answered (`None`).
pub(super) fn answer_unlinked(
    c: &EngineCommand,
    shared: &SharedMonitor,
    replies: &Replies,
) -> Option<CommandId> {
    let id = CommandId::next();
    if let EngineCommand::Manual { .. } = c {
        replies.push(CommandReply {
            id,
            what: c.label(),
            answer: Answer::new(crate::model::outcome::Outcome::Skipped, NO_ENGINE),
        });
        return Some(id);
    }
    let EngineCommand::TestRule { rule, safety } = c else {
        return None;
    };
    let safety = safety.clone().unwrap_or(crate::act::rules::action::Safety {
        global_dry_run: true,
        protected: Vec::new(),
        remote: crate::act::rules::action::RemotePolicy::default(),
    });
    let m = shared.read().ok()?;
    replies.push(CommandReply {
        id,
        what: c.label(),
        // No engine: a runner that has seen nothing (this path holds no live processes).
        answer: crate::engine::command::test_rule_answer(
            rule,
            &m,
            &safety,
            &crate::act::rules::action::ActionRunner::new(),
        ),
    });
    Some(id)
}
