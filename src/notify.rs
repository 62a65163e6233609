//! Desktop notifications through the freedesktop D-Bus service. Sent from a short-lived
//! thread so a missing or slow notification daemon never holds up sampling; failures are
//! reported to the caller's log callback, never fatal.

use std::collections::HashMap;

/// Shows `summary` / `body` as a desktop notification. `on_error` receives a sentence when it
/// could not be shown.
pub fn send(summary: String, body: String, on_error: impl FnOnce(String) + Send + 'static) {
    let spawned = std::thread::Builder::new()
        .name("vramwarden-notify".into())
        .spawn(move || {
            if let Err(e) = send_blocking(&summary, &body) {
                on_error(format!(
                    "desktop notifications are unavailable ({}); alerts show in the window",
                    short_reason(&e)
                ));
            }
        });
    if let Err(e) = spawned {
        eprintln!("vramwarden: desktop notification failed: {e}");
    }
}

/// The first line of a D-Bus error, without the address details.
fn short_reason(e: &zbus::Error) -> String {
    let s = e.to_string();
    let first = s.lines().next().unwrap_or("").trim();
    if first.contains("DBUS_SESSION_BUS_ADDRESS") || first.contains("session bus") {
        "no session bus".into()
    } else {
        first.chars().take(120).collect()
    }
}

fn send_blocking(summary: &str, body: &str) -> zbus::Result<()> {
    let conn = zbus::blocking::Connection::session()?;
    let hints: HashMap<&str, zbus::zvariant::Value<'_>> = HashMap::new();
    conn.call_method(
        Some("org.freedesktop.Notifications"),
        "/org/freedesktop/Notifications",
        Some("org.freedesktop.Notifications"),
        "Notify",
        &(
            "vramwarden",
            0u32,
            "vramwarden",
            summary,
            body,
            Vec::<&str>::new(),
            hints,
            -1i32,
        ),
    )?;
    Ok(())
}
