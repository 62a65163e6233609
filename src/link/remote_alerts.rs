//! The alerts of a window attached to an agent: the agent's View, as it arrives, compared with
//! the one before — a leak flagged, an OOM forecast raised, a process that may have run out of
//! memory — each becomes the same alert a local engine would have raised (the words are
//! [`crate::engine::stages::outbox`]'s), handed to the window's subscriber. What the agent had
//! already raised when the window attached is not announced again.

use crate::engine::stages::outbox::{forecast_alert, leak_alert, oom_alert};
use crate::engine::view::{LeakKey, Monitor};
use crate::engine::{Alert, AlertSink};
use crate::model::{FastSet, UnixMs};

/// What the last View held (or, before any, nothing yet: the first View only sets it).
#[derive(Default)]
pub struct RemoteAlerts {
    /// The subscriber; `None`: nothing is compared or sent.
    sink: Option<AlertSink>,
    /// Leaks and OOMs too (the window's `notifications.leaks`); forecasts always.
    leaks_on: bool,
    /// The last View's raised items (None before the first View).
    seen: Option<Seen>,
}

/// The raised items of one View, each by what tells it from a later one of its kind.
#[derive(Default)]
struct Seen {
    leaks: FastSet<(LeakKey, UnixMs)>,
    forecasts: FastSet<(u32, UnixMs)>,
    ooms: FastSet<(u32, UnixMs)>,
}

impl Seen {
    fn of(m: &Monitor) -> Self {
        Self {
            leaks: m
                .leaks
                .iter()
                .filter(|l| l.ended_ms.is_none())
                .map(|l| (l.key, l.flagged_ms))
                .collect(),
            forecasts: m
                .oom_alerts
                .iter()
                .map(|a| (a.device_index, a.since_ms))
                .collect(),
            ooms: m.ooms.iter().map(|o| (o.device_index, o.at_ms)).collect(),
        }
    }
}

impl RemoteAlerts {
    /// Alerts to `sink`; leaks and OOMs only when `leaks_on`.
    pub fn new(sink: AlertSink, leaks_on: bool) -> Self {
        Self {
            sink: Some(sink),
            leaks_on,
            seen: None,
        }
    }

    /// The alerts `m` (the View just applied) raises beside the View before it; what it holds
    /// becomes what was seen (so this keeps no more than one View's raised items).
    pub fn compare(&mut self, m: &Monitor) -> Vec<Alert> {
        if self.sink.is_none() {
            return Vec::new();
        }
        let now = Seen::of(m);
        let Some(before) = self.seen.take() else {
            self.seen = Some(now);
            return Vec::new();
        };
        let mut out = Vec::new();
        for a in &m.oom_alerts {
            if !before.forecasts.contains(&(a.device_index, a.since_ms)) {
                out.push(forecast_alert(a.device_index, a.full_in_s, &a.drivers));
            }
        }
        if self.leaks_on {
            for l in m.leaks.iter().filter(|l| l.ended_ms.is_none()) {
                if !before.leaks.contains(&(l.key, l.flagged_ms)) {
                    out.push(leak_alert(&l.info));
                }
            }
            for o in &m.ooms {
                if !before.ooms.contains(&(o.device_index, o.at_ms)) {
                    out.push(oom_alert(
                        o.device_index,
                        o.used_pct,
                        &o.victims,
                        &o.holders,
                    ));
                }
            }
        }
        self.seen = Some(now);
        out
    }

    /// Hands `alerts` to the subscriber.
    pub fn deliver(&self, alerts: Vec<Alert>) {
        if let Some(sink) = &self.sink {
            for a in alerts {
                sink(a);
            }
        }
    }
}
