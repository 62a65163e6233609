//! The alerts of a window attached to an agent: the agent's View, as it arrives, compared with
//! the one before — a leak flagged, an OOM forecast raised, a process that may have run out of
//! memory — each becomes the same alert a local engine would have raised (the words are
//! [`crate::engine::stages::outbox`]'s), handed to the window's subscriber. What the agent had
//! already raised when the window attached is not announced again.

use crate::engine::stages::outbox::{forecast_alert, leak_alert, oom_alert};
use crate::engine::view::{LeakKey, Monitor};
use crate::engine::{Alert, AlertSink};
use crate::model::{FastSet, UnixMs};

/// What has been announced (or was there when the window attached).
#[derive(Default)]
pub struct RemoteAlerts {
    /// The subscriber; `None`: nothing is compared or sent.
    sink: Option<AlertSink>,
    /// Leaks and OOMs too (the window's `notifications.leaks`); forecasts always.
    leaks_on: bool,
    /// The first View only sets what is known.
    primed: bool,
    leaks: FastSet<(LeakKey, UnixMs)>,
    forecasts: FastSet<(u32, UnixMs)>,
    ooms: FastSet<(u32, UnixMs)>,
}

impl RemoteAlerts {
    /// Alerts to `sink`; leaks and OOMs only when `leaks_on`.
    pub fn new(sink: AlertSink, leaks_on: bool) -> Self {
        Self {
            sink: Some(sink),
            leaks_on,
            ..Self::default()
        }
    }

    /// The alerts `m` (the View just applied) raises beside what was seen before.
    pub fn compare(&mut self, m: &Monitor) -> Vec<Alert> {
        if self.sink.is_none() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for a in &m.oom_alerts {
            if self.forecasts.insert((a.device_index, a.since_ms)) {
                out.push(forecast_alert(a.device_index, a.full_in_s, &a.drivers));
            }
        }
        for l in m.leaks.iter().filter(|l| l.ended_ms.is_none()) {
            if self.leaks.insert((l.key, l.flagged_ms)) && self.leaks_on {
                out.push(leak_alert(&l.info));
            }
        }
        for o in &m.ooms {
            if self.ooms.insert((o.device_index, o.at_ms)) && self.leaks_on {
                out.push(oom_alert(
                    o.device_index,
                    o.used_pct,
                    &o.victims,
                    &o.holders,
                ));
            }
        }
        if !self.primed {
            self.primed = true;
            out.clear();
        }
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
