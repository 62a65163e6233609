//! What a tick has to say besides its data: status-bar notices (part of the View) and alerts
//! (a leak, an OOM, an OOM forecast, a rule that acted, a recording problem), handed to the
//! front end's subscriber ([`AlertSink`]) after the tick is published. The engine shows no
//! desktop notification itself: the window subscribes with one (`front::gui::notify`); the
//! headless front ends do not subscribe.

use std::sync::Arc;

use crate::model::UnixMs;
use crate::session::Event;

/// How insistent an alert is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    /// Informational (a rule acted, a recording problem, a forecast).
    Normal,
    /// Needs attention soon (a leak that will fill the GPU).
    Critical,
}

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlertKind {
    /// A leak was suspected.
    Leak,
    /// A process may have run out of GPU memory.
    Oom,
    /// A GPU is forecast to be full soon.
    Forecast,
    /// A rule acted.
    Rule,
    /// A problem the engine reports (recording failed or resumed, memory held by processes
    /// not running here).
    Report,
}

/// One alert, as the engine emits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// What it is about.
    pub kind: AlertKind,
    /// How insistent.
    pub urgency: Urgency,
    /// A later alert with the same key replaces this one where the subscriber can (a leak's
    /// notification is updated in place rather than stacked).
    pub replaces: Option<String>,
    /// The headline.
    pub summary: String,
    /// The sentence.
    pub body: String,
}

/// A front end's subscriber to the engine's alerts: called on the engine's thread after each
/// tick is published, so it must not block (the window's hands each to a short-lived thread).
pub type AlertSink = Arc<dyn Fn(Alert) + Send + Sync>;

/// Which alerts are emitted, and to whom.
#[derive(Clone, Default)]
pub struct Alerting {
    /// The subscriber; `None`: no alert is built at all.
    pub sink: Option<AlertSink>,
    /// Leaks and OOMs (the settings' `notifications.leaks`).
    pub leaks: bool,
    /// Rules that acted (the settings' `notifications.rules`).
    pub rules: bool,
}

impl std::fmt::Debug for Alerting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Alerting")
            .field("sink", &self.sink.is_some())
            .field("leaks", &self.leaks)
            .field("rules", &self.rules)
            .finish()
    }
}

impl Alerting {
    /// An empty outbox for one tick under these settings.
    pub fn outbox(&self) -> Outbox {
        Outbox {
            notices: Vec::new(),
            alerts: Vec::new(),
            alerting: self.sink.is_some(),
            leaks: self.leaks,
            rules: self.rules,
        }
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

/// What one tick (or one command) says: notices for the View, alerts for the subscriber.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Status-bar notices with their time, published with the tick.
    pub notices: Vec<(UnixMs, String)>,
    /// Alerts, delivered after the tick is published.
    pub alerts: Vec<Alert>,
    alerting: bool,
    leaks: bool,
    rules: bool,
}

impl Outbox {
    /// A notice in the status bar and an alert.
    pub fn notice(&mut self, kind: AlertKind, summary: &str, body: String) {
        self.alert(kind, summary, body.clone());
        self.notices.push((crate::model::now_ms(), body));
    }

    /// An alert (when alerting), without a status-bar notice.
    fn alert(&mut self, kind: AlertKind, summary: &str, body: String) {
        if self.alerting {
            self.alerts.push(Alert {
                kind,
                urgency: Urgency::Normal,
                replaces: None,
                summary: summary.into(),
                body,
            });
        }
    }

    /// A problem: on stderr always, in the status bar, and as an alert.
    pub fn report(&mut self, summary: &str, body: String) {
        eprintln!("vramwarden: {body}");
        self.notice(AlertKind::Report, summary, body);
    }

    /// Alerts for the leaks and OOMs among `events` (when the settings want them), and
    /// an alert for each OOM forecast raised.
    pub fn events(&mut self, events: &[Event]) {
        for e in events {
            match e {
                Event::OomForecast {
                    device_index,
                    full_in_s,
                    drivers,
                    ..
                } if self.alerting => {
                    let who: Vec<String> = drivers
                        .iter()
                        .map(|d| format!("{} (PID {})", d.name, d.pid))
                        .collect();
                    // An alert, not a status-bar notice: the window's banner and status bar
                    // show the forecast as it stands, not as raised.
                    self.alerts
                        .push(forecast_alert(*device_index, Some(*full_in_s), &who));
                }
                Event::LeakStarted { leak, .. } if self.alerting && self.leaks => {
                    self.alerts.push(leak_alert(leak));
                }
                Event::OomSuspected {
                    device_index,
                    used_pct,
                    victims,
                    holders,
                    ..
                } if self.alerting && self.leaks => {
                    self.alerts
                        .push(oom_alert(*device_index, *used_pct, victims, holders));
                }
                _ => {}
            }
        }
    }

    /// An alert for each rule action among `acts` that acted (when the settings want them).
    pub fn activity(&mut self, acts: &[crate::act::rules::action::Activity]) {
        if !(self.alerting && self.rules) {
            return;
        }
        for a in acts
            .iter()
            .filter(|a| a.outcome == crate::act::rules::action::Outcome::Acted)
        {
            self.alerts.push(Alert {
                kind: AlertKind::Rule,
                urgency: Urgency::Normal,
                replaces: None,
                summary: format!("vramwarden rule “{}”", a.rule),
                body: a.detail.clone(),
            });
        }
    }
}

/// The alert for an OOM forecast raised on GPU `device_index` (the banner's words).
pub fn forecast_alert(device_index: u32, full_in_s: Option<f64>, who: &[String]) -> Alert {
    Alert {
        kind: AlertKind::Forecast,
        urgency: Urgency::Normal,
        replaces: None,
        summary: format!("GPU {device_index} will run out of memory"),
        body: crate::detect::forecast_alert::sentence(device_index, full_in_s, who),
    }
}

/// The alert for a leak suspected (it replaces an earlier one for the same process).
pub fn leak_alert(leak: &crate::session::LeakInfo) -> Alert {
    let what = if leak.ghost {
        format!("GPU {} ghost memory", leak.device_index)
    } else {
        format!(
            "{} (PID {}) on GPU {}",
            leak.name, leak.pid, leak.device_index
        )
    };
    Alert {
        kind: AlertKind::Leak,
        urgency: Urgency::Critical,
        replaces: Some(what.clone()),
        summary: "GPU memory leak suspected".into(),
        body: format!("{what} is growing at {:.0} MiB/min", leak.rate_mib_per_min),
    }
}

/// The alert for a process that may have run out of memory on GPU `device_index`.
pub fn oom_alert(
    device_index: u32,
    used_pct: f64,
    victims: &[crate::session::OomHolder],
    holders: &[crate::session::OomHolder],
) -> Alert {
    Alert {
        kind: AlertKind::Oom,
        urgency: Urgency::Normal,
        replaces: None,
        summary: format!("GPU {device_index}: a process may have run out of memory"),
        body: crate::session::describe_oom(used_pct, victims, holders),
    }
}
