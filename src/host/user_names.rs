//! User names of uids and uids of user names, through NSS (`getpwuid_r`, `getpwnam_r`),
//! cached. NSS may ask a directory server (LDAP, SSSD) that hangs: each lookup runs on a
//! thread of its own and is waited for at most [`WAIT`]; past that the caller is told it has
//! not answered, and the answer is taken when it comes ([`Lookups::resolved_late`]). Neither a
//! sampler nor the engine ever stalls on the user directory.

use std::hash::Hash;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use crate::model::{FastMap, FastSet};

/// The longest a lookup is waited for before the caller goes on without it.
const WAIT: Duration = Duration::from_millis(200);

/// Lookups of `K` through a blocking function, each on a thread of its own, with their
/// answers kept.
#[derive(Debug)]
pub(crate) struct Lookups<K, V> {
    found: FastMap<K, V>,
    running: FastSet<K>,
    tx: Sender<(K, V)>,
    rx: Receiver<(K, V)>,
    lookup: fn(&K) -> V,
}

impl<K, V> Lookups<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// Lookups through `lookup` (a blocking call, run on threads of their own).
    pub(crate) fn with_lookup(lookup: fn(&K) -> V) -> Self {
        let (tx, rx) = channel();
        Self {
            found: FastMap::default(),
            running: FastSet::default(),
            tx,
            rx,
            lookup,
        }
    }

    /// The answer for `key`, or `None` while its lookup has not answered (within [`WAIT`] the
    /// first time it is asked).
    pub(crate) fn get(&mut self, key: &K) -> Option<V> {
        self.take_answers();
        if let Some(v) = self.found.get(key) {
            return Some(v.clone());
        }
        if !self.running.contains(key) && self.start(key) {
            self.wait_for(key);
        }
        self.found.get(key).cloned()
    }

    /// Starts the lookup of `key` on a thread; false when no thread could be started.
    fn start(&mut self, key: &K) -> bool {
        let (tx, lookup, k) = (self.tx.clone(), self.lookup, key.clone());
        let started = std::thread::Builder::new()
            .name("vramwarden-user".into())
            .spawn(move || {
                let v = lookup(&k);
                let _ = tx.send((k, v));
            });
        if started.is_ok() {
            self.running.insert(key.clone());
        }
        started.is_ok()
    }

    /// Whether a lookup that was not waited for out has answered since (what was asked
    /// without an answer may be asked again).
    pub(crate) fn resolved_late(&mut self) -> bool {
        let before = self.found.len();
        self.take_answers();
        self.found.len() > before
    }

    /// Whether a lookup is still running.
    pub(crate) fn any_running(&self) -> bool {
        !self.running.is_empty()
    }

    /// Waits up to [`WAIT`] for `key`'s answer (taking the others that come meanwhile).
    fn wait_for(&mut self, key: &K) {
        let until = Instant::now() + WAIT;
        while !self.found.contains_key(key) {
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

    fn take(&mut self, (key, v): (K, V)) {
        self.running.remove(&key);
        self.found.insert(key, v);
    }
}

/// The names of uids.
pub(crate) type UserNames = Lookups<u32, String>;

impl Default for UserNames {
    fn default() -> Self {
        Self::with_lookup(|uid| user_name_of(*uid))
    }
}

impl UserNames {
    /// The name of `uid`, or the uid in digits while its lookup has not answered.
    pub(crate) fn name(&mut self, uid: u32) -> String {
        self.get(&uid).unwrap_or_else(|| uid.to_string())
    }
}

/// What a user name (of a rule's condition) stands for here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UidOf {
    /// The user's uid.
    Uid(u32),
    /// No user of this machine has the name.
    NoSuchUser,
    /// The user directory has not answered yet.
    NotAnswered,
}

/// The uids of user names.
pub(crate) type UserIds = Lookups<String, Option<u32>>;

impl Default for UserIds {
    fn default() -> Self {
        Self::with_lookup(|name| uid_of_user(name))
    }
}

impl UserIds {
    /// What `name` stands for: a plain number is a uid; otherwise NSS's answer, or
    /// [`UidOf::NotAnswered`] while it has not come.
    pub(crate) fn uid(&mut self, name: &str) -> UidOf {
        let name = name.trim();
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
            return name.parse().map_or(UidOf::NoSuchUser, UidOf::Uid);
        }
        match self.get(&name.to_string()) {
            Some(Some(uid)) => UidOf::Uid(uid),
            Some(None) => UidOf::NoSuchUser,
            None => UidOf::NotAnswered,
        }
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

/// The uid of a user named in a rule, through NSS (`getpwnam_r`); a plain number is taken
/// as a uid. `None` when no such user exists.
pub fn uid_of_user(name: &str) -> Option<u32> {
    let name = name.trim();
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
        return name.parse().ok();
    }
    nix::unistd::User::from_name(name)
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
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

    /// A rule's user names: digits are a uid, a name NSS knows is its uid, an unknown one
    /// is no user, and one whose lookup has not answered is said so until its answer comes
    /// (a stand-in answer sent as the lookup thread would).
    #[test]
    fn user_names_of_rules_are_looked_up_or_said_not_answered() {
        let mut u = UserIds::default();
        assert_eq!(u.uid("root"), UidOf::Uid(0));
        assert_eq!(u.uid(" 1234 "), UidOf::Uid(1234));
        assert_eq!(u.uid("no-such-user-vw"), UidOf::NoSuchUser);
        u.running.insert("alice".into());
        assert_eq!(u.uid("alice"), UidOf::NotAnswered);
        assert!(!u.resolved_late());
        let _ = u.tx.send(("alice".into(), Some(1001)));
        assert!(u.resolved_late());
        assert_eq!(u.uid("alice"), UidOf::Uid(1001));
    }
}
