//! The memory events (leak episodes, OOM suspicions) of past session logs, for the Leaks pane:
//! read from the sessions folder, off the UI thread.

/// Leak episodes recorded in every session file of `dir` except `skip` (the live one).
pub fn past_episodes(dir: &std::path::Path, skip: Option<&std::path::Path>) -> PastEvents {
    let mut out = PastEvents::default();
    for s in crate::session::catalog::list(dir) {
        if Some(s.path.as_path()) == skip {
            continue;
        }
        let Ok(data) = crate::session::reader::SessionData::open(&s.path) else {
            continue;
        };
        // A leak still growing when the recording stopped needs the samples (its growth and
        // peak); otherwise the events suffice.
        let m = if data.has_open_leak() {
            data.to_monitor()
        } else {
            let mut m = crate::monitor::Monitor::new(1000, 1);
            for e in &data.events {
                crate::leak_watch::record_event(&mut m, e, Some(&s.path));
            }
            m
        };
        out.leaks.extend(m.leaks);
        out.ooms.extend(m.ooms);
    }
    out
}

/// The memory events of past sessions.
#[derive(Debug, Clone, Default)]
pub struct PastEvents {
    /// Leak episodes.
    pub leaks: Vec<crate::monitor::LeakRecord>,
    /// OOM suspicions.
    pub ooms: Vec<crate::monitor::OomRecord>,
}
