//! User names of uids, through NSS (`getpwuid_r`), cached. NSS may ask a directory server
//! (LDAP, SSSD) that hangs: each lookup runs on a thread of its own and is waited for at most
//! [`WAIT`]; past that the uid stands for the name, and the name is taken when it comes
//! ([`UserNames::resolved_late`]). A sampler never stalls on a user name.

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use crate::model::{FastMap, FastSet};

/// The longest a lookup is waited for before the uid stands for the name.
const WAIT: Duration = Duration::from_millis(200);

/// The names found so far, and the lookups still running.
#[derive(Debug)]
pub(crate) struct UserNames {
    names: FastMap<u32, String>,
    running: FastSet<u32>,
    tx: Sender<(u32, String)>,
    rx: Receiver<(u32, String)>,
}

impl Default for UserNames {
    fn default() -> Self {
        let (tx, rx) = channel();
        Self {
            names: FastMap::default(),
            running: FastSet::default(),
            tx,
            rx,
        }
    }
}

impl UserNames {
    /// The name of `uid`, or the uid in digits while its lookup has not answered (within
    /// [`WAIT`] the first time it is asked).
    pub(crate) fn name(&mut self, uid: u32) -> String {
        self.take_answers();
        if let Some(n) = self.names.get(&uid) {
            return n.clone();
        }
        if self.running.insert(uid) {
            let tx = self.tx.clone();
            let started = std::thread::Builder::new()
                .name("vramwarden-user".into())
                .spawn(move || {
                    let _ = tx.send((uid, user_name_of(uid)));
                });
            if started.is_err() {
                self.running.remove(&uid);
                return uid.to_string();
            }
            self.wait_for(uid);
        }
        self.names
            .get(&uid)
            .cloned()
            .unwrap_or_else(|| uid.to_string())
    }

    /// Whether a lookup that was not waited for out has answered since (the names given as
    /// digits may be asked again).
    pub(crate) fn resolved_late(&mut self) -> bool {
        let before = self.names.len();
        self.take_answers();
        self.names.len() > before
    }

    /// Whether a lookup is still running.
    pub(crate) fn any_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// Waits up to [`WAIT`] for `uid`'s answer (taking the others that come meanwhile).
    fn wait_for(&mut self, uid: u32) {
        let until = Instant::now() + WAIT;
        while !self.names.contains_key(&uid) {
            let left = until.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(answer) => self.take(answer),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn take_answers(&mut self) {
        while let Ok(answer) = self.rx.try_recv() {
            self.take(answer);
        }
    }

    fn take(&mut self, (uid, name): (u32, String)) {
        self.running.remove(&uid);
        self.names.insert(uid, name);
    }
}

/// The name of `uid` through NSS (`getpwuid_r`: /etc/passwd, LDAP, SSSD, systemd… whatever
/// the host is configured for), or the number when it has none.
pub(crate) fn user_name_of(uid: u32) -> String {
    if uid == u32::MAX {
        return "?".into();
    }
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(u)) => u.name,
        _ => uid.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's own uid is named as NSS names it, and asked again from the cache.
    #[test]
    fn a_uid_is_named_once_and_kept() {
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let mut u = UserNames::default();
        let first = u.name(me);
        assert_eq!(first, super::user_name_of(me));
        assert!(!u.any_running());
        assert_eq!(u.name(me), first);
    }

    /// A lookup that has not answered in time leaves the uid in digits, and its answer is
    /// taken when it comes (a stand-in answer sent as the lookup thread would).
    #[test]
    fn a_late_answer_is_taken_when_it_comes() {
        let mut u = UserNames::default();
        u.running.insert(4242);
        assert_eq!(u.name(4242), "4242", "still running: the uid stands for it");
        assert!(!u.resolved_late());
        let _ = u.tx.send((4242, "late".into()));
        assert!(u.resolved_late());
        assert_eq!(u.name(4242), "late");
        assert!(!u.any_running());
    }
}
