//! The alerts of a window attached to an agent: the agent's View carries its engine's latest
//! events, numbered ([`crate::engine::EngineEvent::seq`]); each one numbered above the last
//! this window saw and wanted by the window's settings ([`AlertFilter`]) goes to the window's
//! subscriber, as a local engine's would. What the agent had said before the window attached
//! is not announced, and none is announced twice after a reconnect; an agent that started
//! over (its numbers fell back) is taken as newly attached.

use crate::engine::events::{AlertFilter, EngineEvent};
use crate::engine::view::Monitor;
use crate::engine::AlertSink;

/// The number of the last event this window saw (none before the first View).
#[derive(Default)]
pub struct RemoteAlerts {
    /// The subscriber; `None`: nothing is sent.
    sink: Option<AlertSink>,
    /// The window's notification settings.
    filter: AlertFilter,
    /// The last event's number in the last View (None before the first View).
    seen: Option<u64>,
}

impl RemoteAlerts {
    /// Alerts to `sink`, those `filter` wants.
    pub fn new(sink: AlertSink, filter: AlertFilter) -> Self {
        Self {
            sink: Some(sink),
            filter,
            seen: None,
        }
    }

    /// The alerts among the events of `m` (the View just applied) numbered above the last
    /// seen; the first View's, and those of an agent that started over, only set the mark.
    pub fn take(&mut self, m: &Monitor) -> Vec<EngineEvent> {
        let newest = m.events.back().map_or(0, |e| e.seq);
        let last = match self.seen.replace(newest) {
            Some(last) if self.sink.is_some() && newest >= last => last,
            _ => return Vec::new(),
        };
        m.events
            .iter()
            .filter(|e| e.seq > last && self.filter.wants(&e.kind))
            .map(|e| EngineEvent::clone(e))
            .collect()
    }

    /// Hands `alerts` to the subscriber.
    pub fn deliver(&self, alerts: Vec<EngineEvent>) {
        if let Some(sink) = &self.sink {
            for a in alerts {
                sink(a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::events::EngineEventKind;
    use std::sync::{Arc, Mutex};

    fn view(seqs: &[u64]) -> Monitor {
        let mut m = Monitor::new(1000, 10);
        m.events = seqs
            .iter()
            .map(|s| {
                Arc::new(EngineEvent {
                    seq: *s,
                    at_ms: 1000,
                    kind: EngineEventKind::RecordingFailed { cause: "x".into() },
                })
            })
            .collect();
        m
    }

    #[test]
    fn only_events_after_the_attach_are_sent_once_and_a_restart_sets_the_mark_again() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let into = got.clone();
        let sink: AlertSink = Arc::new(move |e| into.lock().expect("lock").push(e.seq));
        let mut r = RemoteAlerts::new(sink, AlertFilter::default());
        let mut step = |seqs: &[u64]| {
            let a = r.take(&view(seqs));
            r.deliver(a);
        };
        step(&[1, 2]);
        step(&[1, 2, 3]);
        step(&[1, 2, 3]);
        step(&[2, 3, 4, 5]);
        step(&[1]);
        step(&[1, 2]);
        assert_eq!(*got.lock().expect("lock"), [3, 4, 5, 2]);
    }
}
