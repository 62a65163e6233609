//! The window's subscriber to the engine's alerts ([`crate::engine::EngineEvent`]): each
//! becomes a desktop notification in the window's words
//! ([`crate::front::gui::alert_words`]) through the freedesktop notification service
//! (`notify-rust`), sent
//! from a short-lived thread so a missing or slow notification daemon never holds up
//! sampling. Every notification carries the desktop-entry hint ([`APP_ID`]) and an urgency;
//! a keyed one (a leak) replaces the notification shown earlier for the same key instead of
//! stacking a new one. Without a notification service nothing is shown and the status bar
//! hears about it once per run (the window's own notice, never the engine's), never fatally.
//! Only the window's build has this module; the engine and the headless build know nothing of
//! desktop notifications.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::engine::{AlertSink, EngineEvent};
use crate::front::gui::alert_words::{self, Urgency};
use crate::front::gui::notices::OwnNotices;
use crate::front::report_words::Where;

pub(crate) use crate::host::paths::APP_ID;

/// Keyed notifications shown so far: key → the server's notification id. Bounded: cleared
/// when it reaches [`MAX_KEYS`] (a later update then opens a new notification).
#[cfg_attr(not(feature = "notify"), allow(dead_code))]
fn shown() -> &'static Mutex<HashMap<String, u32>> {
    static SHOWN: OnceLock<Mutex<HashMap<String, u32>>> = OnceLock::new();
    SHOWN.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Most keys remembered for in-place updates.
const MAX_KEYS: usize = 256;

/// Set once "notifications are unavailable" has been reported.
static REPORTED_UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// The name of the host whose engine a subscriber hears, asked at each alert: None for this
/// computer's engine, the agent's host for an agent's (named once its View says it).
pub(crate) type HostName = Box<dyn Fn() -> Option<String> + Send + Sync>;

/// The subscriber the window gives its engine (or an agent's link, on the host `host` names):
/// each alert shown as a desktop notification in the window's words (one with a key replaces
/// the one shown for that key); when notifications cannot be shown, the window's status bar
/// says so once, as one of its `own` notices.
pub(crate) fn subscriber(own: OwnNotices, host: HostName) -> AlertSink {
    std::sync::Arc::new(move |e: EngineEvent| {
        let host = host();
        let Some(w) = alert_words::of(&e, Where::of(host.as_deref())) else {
            return;
        };
        let own = own.clone();
        spawn(w.replaces, w.urgency, w.summary, w.body, move |msg| {
            own.raise(msg)
        });
    })
}

fn spawn(
    key: Option<String>,
    urgency: Urgency,
    summary: String,
    body: String,
    on_error: impl FnOnce(String) + Send + 'static,
) {
    let spawned = std::thread::Builder::new()
        .name("vramwarden-notify".into())
        .spawn(move || {
            if let Err(e) = show(key.as_deref(), urgency, &summary, &body) {
                tracing::debug!("desktop notification not shown: {e}");
                if !REPORTED_UNAVAILABLE.swap(true, Ordering::Relaxed) {
                    on_error(format!(
                        "No desktop notifications here ({}): alerts show in this window",
                        short_reason(&e.to_string())
                    ));
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("desktop notification failed: {e}");
    }
}

#[cfg(not(feature = "notify"))]
fn show(_key: Option<&str>, _urgency: Urgency, _summary: &str, _body: &str) -> Result<(), String> {
    Err("this vramwarden was built without desktop notifications (no `notify` feature)".into())
}

#[cfg(feature = "notify")]
fn show(key: Option<&str>, urgency: Urgency, summary: &str, body: &str) -> Result<(), String> {
    let mut n = notification(summary, body, urgency);
    if let Some(id) = key.and_then(|k| shown().lock().ok()?.get(k).copied()) {
        n.id(id);
    }
    let handle = n.show().map_err(|e| e.to_string())?;
    if let Some(k) = key {
        if let Ok(mut m) = shown().lock() {
            if m.len() >= MAX_KEYS && !m.contains_key(k) {
                m.clear();
            }
            m.insert(k.to_string(), handle.id());
        }
    }
    Ok(())
}

#[cfg(feature = "notify")]
/// The notification as sent: app name, icon and desktop-entry hint = [`APP_ID`], the body's
/// markup escaped (servers read a subset of HTML there; the summary is plain text).
pub(crate) fn notification(
    summary: &str,
    body: &str,
    urgency: Urgency,
) -> notify_rust::Notification {
    let mut n = notify_rust::Notification::new();
    n.appname("vramwarden")
        .icon(APP_ID)
        .summary(summary)
        .body(&escape_markup(body))
        .hint(notify_rust::Hint::DesktopEntry(APP_ID.into()))
        .urgency(match urgency {
            Urgency::Normal => notify_rust::Urgency::Normal,
            Urgency::Critical => notify_rust::Urgency::Critical,
        });
    n
}

/// Escapes `&`, `<` and `>` so a process name like `a<b>` shows as written.
fn escape_markup(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The first line of an error, without the bus address details.
fn short_reason(s: &str) -> String {
    let first = s.lines().next().unwrap_or("").trim();
    if first.contains("DBUS_SESSION_BUS_ADDRESS")
        || first.contains("session bus")
        || first.contains("unix:path=")
        || first.contains("org.freedesktop")
    {
        "no desktop session bus".into()
    } else {
        first.chars().take(120).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape_markup("python <b>x</b> & y"),
            "python &lt;b&gt;x&lt;/b&gt; &amp; y"
        );
        assert_eq!(escape_markup("plain 5 MiB/min"), "plain 5 MiB/min");
    }

    #[cfg(feature = "notify")]
    #[test]
    fn the_notification_names_the_app_and_escapes_the_body() {
        let n = notification("leak", "a<b> & c", Urgency::Critical);
        assert_eq!(n.appname, "vramwarden");
        assert_eq!(n.icon, APP_ID);
        assert_eq!(n.body, "a&lt;b&gt; &amp; c");
        assert!(n
            .hints
            .iter()
            .any(|h| *h == notify_rust::Hint::DesktopEntry(APP_ID.into())));
        assert!(n
            .hints
            .iter()
            .any(|h| *h == notify_rust::Hint::Urgency(notify_rust::Urgency::Critical)));
    }

    #[test]
    fn a_bus_error_is_shortened() {
        assert_eq!(
            short_reason("I/O error: DBUS_SESSION_BUS_ADDRESS not set\nmore"),
            "no desktop session bus"
        );
        assert_eq!(short_reason("Some other\nsecond"), "Some other");
    }
}
