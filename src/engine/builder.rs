//! The one way an [`Engine`] is set up, for every mode: the live sampler (window, agent,
//! `record`), `record --demo --speed`, `import`, and a replay (read-only).
//!
//! ```ignore
//! let engine = EngineBuilder::new(shared, interval_ms)
//!     .record(RecordTo::Dir(dir))
//!     .settings(&settings)
//!     .options(options)
//!     .source(source.info())
//!     .build();
//! ```

use std::path::PathBuf;

use crate::engine::pipeline::{Engine, EngineOptions};
use crate::engine::shared::SharedMonitor;
use crate::engine::stages::record::RecordTo;
use crate::model::SourceInfo;

/// Sets up an [`Engine`]: what it writes into, whether and where it records, its settings,
/// options and source, and whether it is a recorded session's (read-only).
#[derive(Debug, Clone)]
pub struct EngineBuilder {
    shared: SharedMonitor,
    interval_ms: u64,
    record: RecordTo,
    options: EngineOptions,
    settings: Option<Box<crate::engine::settings::Settings>>,
    source: Option<SourceInfo>,
    read_only: Option<Option<PathBuf>>,
    history_by_source: bool,
    remote: crate::act::rules::action::RemotePolicy,
}

impl EngineBuilder {
    /// An engine writing into `shared`, for samples `interval_ms` apart; not recording, on
    /// the default settings.
    pub fn new(shared: SharedMonitor, interval_ms: u64) -> Self {
        Self {
            shared,
            interval_ms,
            record: RecordTo::Off,
            options: EngineOptions::default(),
            settings: None,
            source: None,
            read_only: None,
            history_by_source: false,
            remote: crate::act::rules::action::RemotePolicy::default(),
        }
    }

    /// What commands sent through an agent's API may do (default: only this user's
    /// processes).
    #[must_use]
    pub fn remote(mut self, remote: crate::act::rules::action::RemotePolicy) -> Self {
        self.remote = remote;
        self
    }

    /// Records a session log as `to` says.
    #[must_use]
    pub fn record(mut self, to: RecordTo) -> Self {
        self.record = to;
        self
    }

    /// The front end's options (alert subscriber, the folder to prune).
    #[must_use]
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }

    /// Runs on `settings` (rules, protections, leak sensitivity, notifications, retention).
    #[must_use]
    pub fn settings(mut self, settings: &crate::engine::settings::Settings) -> Self {
        self.settings = Some(Box::new(settings.clone()));
        self
    }

    /// What the source is (the View and the session header).
    #[must_use]
    pub fn source(mut self, info: SourceInfo) -> Self {
        self.source = Some(info);
        self
    }

    /// A recorded session's engine (`session`: the file it comes from): see
    /// [`Engine::read_only`]. Nothing is recorded.
    #[must_use]
    pub fn read_only(mut self, session: Option<PathBuf>) -> Self {
        self.read_only = Some(session);
        self.record = RecordTo::Off;
        self
    }

    /// A read-only engine whose source builds the history from the samples it gives
    /// ([`crate::source::replay::ReplaySource::take_history`]), handed to the monitor at the
    /// end ([`crate::engine::view::Monitor::set_history`]): the engine applies the rest of each
    /// sample ([`crate::engine::state::EngineState::apply_beside_history`]). No effect on a live
    /// engine.
    #[must_use]
    pub(crate) fn history_by_source(mut self) -> Self {
        self.history_by_source = true;
        self
    }

    /// The state the engine will write.
    pub fn shared(&self) -> SharedMonitor {
        self.shared.clone()
    }

    /// The interval it was set up with, in ms.
    pub fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// The engine.
    pub fn build(self) -> Engine {
        let mut e = Engine::bare(self.shared, self.record, self.interval_ms);
        if let Some(session) = self.read_only {
            e.make_read_only(session, self.history_by_source);
        }
        e.set_options(self.options);
        if let Some(info) = self.source {
            e.set_source(info);
        }
        if let Some(s) = self.settings {
            e.apply_settings(&s);
        }
        e.set_remote_policy(self.remote);
        e
    }
}

/// The engine's constructors for the usual cases, through the builder.
impl Engine {
    /// An engine writing into `shared`, recording as `record` says, on default settings:
    /// [`EngineBuilder::new`]`(shared, interval_ms).record(record).build()`.
    pub fn new(shared: SharedMonitor, record: RecordTo, interval_ms: u64) -> Self {
        EngineBuilder::new(shared, interval_ms)
            .record(record)
            .build()
    }

    /// An engine for a recorded session (`session`, the file it comes from): each sample is
    /// applied to the monitor as it was recorded, and the session's own leak and OOM events
    /// are taken as they come ([`Engine::take_recorded_events`]). Nothing is enriched from this
    /// machine, detected again, written or acted on: no rules run, and a manual action is
    /// refused. [`EngineBuilder::read_only`] says the same.
    pub fn read_only(shared: SharedMonitor, interval_ms: u64, session: Option<PathBuf>) -> Self {
        EngineBuilder::new(shared, interval_ms)
            .read_only(session)
            .build()
    }
}
