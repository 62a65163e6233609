//! The engine's state as shared with front ends: written under a lock by the engine (and by
//! the link that feeds a window from a remote agent), and handed to a window as a copy made
//! at most once per change, so drawing a frame never holds a lock.
//!
//! Every write goes through [`Shared::write`], whose guard counts a new version when it is
//! dropped; [`Shared::view`] copies the state only when the version moved since the last
//! copy. A copy is cheap: the history's sealed chunks are shared ([`crate::model::history`]).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{
    Arc, LockResult, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError,
};

use crate::engine::view::Monitor;

/// The engine's state as shared between its writer and front ends.
pub type SharedMonitor = Arc<Shared>;

/// The state and its published copy.
#[derive(Debug)]
pub struct Shared {
    state: RwLock<Monitor>,
    /// Writes so far (bumped while the write lock is still held).
    version: AtomicU64,
    /// The last copy handed out and the version it was made at.
    published: Mutex<Option<(u64, Arc<Monitor>)>>,
}

/// Write access to the state; dropping it publishes a new version.
pub struct WriteGuard<'a> {
    guard: RwLockWriteGuard<'a, Monitor>,
    version: &'a AtomicU64,
}

impl Deref for WriteGuard<'_> {
    type Target = Monitor;
    fn deref(&self) -> &Monitor {
        &self.guard
    }
}

impl DerefMut for WriteGuard<'_> {
    fn deref_mut(&mut self) -> &mut Monitor {
        &mut self.guard
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        // Before the lock is released (the fields drop after this body): a reader that gets
        // the lock next sees the new version with the new state.
        self.version.fetch_add(1, Ordering::Release);
    }
}

impl Shared {
    /// Shares `monitor`.
    pub fn new(monitor: Monitor) -> Arc<Self> {
        Arc::new(Self {
            state: RwLock::new(monitor),
            version: AtomicU64::new(0),
            published: Mutex::new(None),
        })
    }

    /// Exclusive access for the writer (the engine, or a remote link). A poisoned lock (a
    /// panic while writing) still hands out the guard inside the error.
    ///
    /// # Errors
    /// When a writer panicked while holding the lock.
    pub fn write(&self) -> LockResult<WriteGuard<'_>> {
        let wrap = |guard| WriteGuard {
            guard,
            version: &self.version,
        };
        match self.state.write() {
            Ok(g) => Ok(wrap(g)),
            Err(p) => Err(PoisonError::new(wrap(p.into_inner()))),
        }
    }

    /// Shared access for headless readers that look briefly (the agent's handlers, the
    /// command-line runners, the engine itself). A window uses [`Shared::view`] instead.
    ///
    /// # Errors
    /// When a writer panicked while holding the lock.
    pub fn read(&self) -> LockResult<RwLockReadGuard<'_, Monitor>> {
        self.state.read()
    }

    /// The state itself, once no one else shares it (also after a writer panicked).
    pub fn into_inner(self) -> Monitor {
        self.state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// How many writes there have been.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The state as of the last write, as a copy no one writes to: made again only when
    /// there was a write since the last one (the lock is held for the copy alone). While a
    /// writer holds the lock, the last copy is handed out instead of waiting for it (the
    /// window never waits on the engine); only the very first copy waits. None when a writer
    /// panicked while holding the lock and no copy was ever made.
    pub fn view(&self) -> Option<Arc<Monitor>> {
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((v, m)) = &*published {
            if *v == self.version() {
                return Some(m.clone());
            }
        }
        let state = match self.state.try_read() {
            Ok(s) => s,
            Err(TryLockError::WouldBlock) if published.is_some() => {
                return published.as_ref().map(|(_, m)| m.clone());
            }
            Err(TryLockError::WouldBlock) => match self.state.read() {
                Ok(s) => s,
                Err(_) => return None,
            },
            Err(TryLockError::Poisoned(_)) => {
                return published.as_ref().map(|(_, m)| m.clone());
            }
        };
        // Read under the lock: no write is in progress, so this is the state's version.
        let v = self.version();
        let copy = Arc::new(state.clone());
        drop(state);
        *published = Some((v, copy.clone()));
        Some(copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_is_copied_once_per_write_and_keeps_its_state() {
        let shared = Shared::new(Monitor::new(1000, 100));
        let a = shared.view().expect("view");
        let b = shared.view().expect("view");
        assert!(Arc::ptr_eq(&a, &b), "no write: the same copy");
        if let Ok(mut m) = shared.write() {
            m.last_error = Some("x".into());
        }
        let c = shared.view().expect("view");
        assert!(!Arc::ptr_eq(&a, &c), "a write: a new copy");
        assert_eq!(c.last_error.as_deref(), Some("x"));
        assert_eq!(a.last_error, None, "an old copy keeps what it saw");
        assert_eq!(shared.version(), 1);
    }

    #[test]
    fn while_a_writer_holds_the_lock_the_last_copy_is_handed_out_without_waiting() {
        let shared = Shared::new(Monitor::new(1000, 100));
        let first = shared.view().expect("view");
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let s = shared.clone();
        let writer = std::thread::spawn(move || {
            // One write done (a new version to copy), the next one in progress.
            drop(s.write().expect("write"));
            let mut g = s.write().expect("write");
            g.ticks = 7;
            held_tx.send(()).expect("send");
            // Holds the lock until the reader has its answer.
            let _ = release_rx.recv();
        });
        held_rx.recv().expect("the writer holds the lock");
        // A newer version exists but the lock is held: the last copy is handed out at once
        // (a wait would hang this test, the writer waiting for our answer).
        assert_eq!(shared.version(), 1);
        let during = shared.view().expect("view");
        assert!(Arc::ptr_eq(&first, &during));
        release_tx.send(()).expect("release");
        writer.join().expect("writer");
        assert_eq!(shared.view().expect("view").ticks, 7);
    }

    #[test]
    fn a_poisoned_lock_still_gives_the_writer_its_guard_and_readers_the_last_copy() {
        let shared = Shared::new(Monitor::new(1000, 100));
        let before = shared.view().expect("view");
        let s = shared.clone();
        let _ = std::thread::spawn(move || {
            let _g = s.write();
            panic!("a bug while writing");
        })
        .join();
        let mut g = shared.write().unwrap_or_else(PoisonError::into_inner);
        g.ticks = 5;
        drop(g);
        let after = shared.view().expect("the last copy");
        assert!(Arc::ptr_eq(&before, &after));
    }
}
