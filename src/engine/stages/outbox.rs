//! What a tick has to say besides its data: events ([`EngineEvent`]: a leak, an OOM, an OOM
//! forecast, an activity entry, a recording problem…), numbered once the tick's stages ran,
//! published with the View and handed, those the settings make alerts, to the front end's
//! subscriber ([`AlertSink`]) after the tick is published. The engine writes no sentence of
//! its own, prints nothing and shows no desktop notification: the window subscribes with its
//! notifier (`front::gui::notify`, its words in `front::gui::alert_words`) and derives its
//! status-bar notices from the View's events; the headless front ends subscribe with a printer
//! of the reported problems on stderr (`front::report_words`).

use std::sync::Arc;

use crate::engine::events::{AlertFilter, EngineEvent, EngineEventKind};
use crate::model::UnixMs;
use crate::session::Event;

/// A front end's subscriber to the engine's alerts: called on the engine's thread after each
/// tick is published with each event its settings make an alert
/// ([`AlertFilter`]), so it must not block (the window's hands each to a short-lived
/// thread).
pub type AlertSink = Arc<dyn Fn(EngineEvent) + Send + Sync>;

/// Which events are alerts, and to whom.
#[derive(Clone, Default)]
pub(crate) struct Alerting {
    /// The subscriber; `None`: nothing is delivered.
    pub sink: Option<AlertSink>,
    /// The settings' `notifications`.
    pub filter: AlertFilter,
}

impl std::fmt::Debug for Alerting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alerting")
            .field("sink", &self.sink.is_some())
            .field("filter", &self.filter)
            .finish()
    }
}

impl Alerting {
    /// Hands the alerts among `events` to the subscriber.
    pub(crate) fn deliver(&self, events: &[EngineEvent]) {
        if let Some(sink) = &self.sink {
            for e in events.iter().filter(|e| self.filter.wants(&e.kind)) {
                sink(e.clone());
            }
        }
    }
}

/// What one tick (or one command) says: events to number.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// The tick's events with their times, in order, numbered once its stages ran.
    pub events: Vec<(UnixMs, EngineEventKind)>,
}

impl Outbox {
    /// An event at `at`.
    pub(crate) fn event(&mut self, at: UnixMs, kind: EngineEventKind) {
        self.events.push((at, kind));
    }

    /// The leak, OOM and forecast events among a watch's recorded `events`.
    pub(crate) fn recorded(&mut self, events: &[Event]) {
        self.events
            .extend(events.iter().filter_map(EngineEventKind::of_recorded));
    }

    /// An event for each activity entry of `acts` (`from_command`: a front end's command's).
    pub(crate) fn activity(
        &mut self,
        acts: &[crate::act::rules::action::Activity],
        from_command: bool,
    ) {
        self.events.extend(acts.iter().map(|a| {
            (
                a.unix_ms,
                EngineEventKind::Activity {
                    entry: a.clone(),
                    from_command,
                },
            )
        }));
    }
}
