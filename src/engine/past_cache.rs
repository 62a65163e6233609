//! The agent's answer to `/api/past`, computed once per session log: each log's memory events
//! are kept under its name, size and modification time and replayed again only when one of
//! them changes. One computation runs at a time; a request that arrives meanwhile waits for it
//! and then reads what it cached (sixteen requests at once cost one replay, not sixteen).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::replay::{episodes_of, PastEvents};
use crate::model::UnixMs;

/// One log's events and what they were computed from.
#[derive(Debug)]
struct Entry {
    size: u64,
    modified_ms: UnixMs,
    recording: bool,
    events: Arc<PastEvents>,
}

/// See the module's documentation.
#[derive(Debug, Default)]
pub struct PastCache {
    logs: Mutex<HashMap<PathBuf, Entry>>,
}

impl PastCache {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The memory events of every session log in `dir` except `skip` (the live one), as
    /// [`super::replay::past_episodes`], replaying only logs not seen as they are now.
    pub(crate) fn past(&self, dir: &Path, skip: Option<&Path>) -> PastEvents {
        // Held for the whole computation: one at a time.
        let mut logs = self
            .logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let listed = crate::session::catalog::list(dir);
        logs.retain(|p, _| listed.iter().any(|s| &s.path == p));
        let mut out = PastEvents::default();
        for s in listed {
            if Some(s.path.as_path()) == skip {
                continue;
            }
            let fresh = logs.get(&s.path).is_some_and(|e| {
                (e.size, e.modified_ms, e.recording) == (s.size_bytes, s.modified_ms, s.recording)
            });
            if !fresh {
                let events = Arc::new(episodes_of(&s.path, s.recording));
                let e = Entry {
                    size: s.size_bytes,
                    modified_ms: s.modified_ms,
                    recording: s.recording,
                    events,
                };
                logs.insert(s.path.clone(), e);
            }
            if let Some(e) = logs.get(&s.path) {
                out.leaks.extend(e.events.leaks.iter().cloned());
                out.ooms.extend(e.events.ooms.iter().cloned());
            }
        }
        out
    }
}
