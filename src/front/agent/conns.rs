//! The HTTP front's connection table: how many connections are open, from which client, and
//! which one to give up when a limit is reached.
//!
//! Limits are on the total ([`total_limit`]: at most [`MAX_CONNECTIONS`], at most half the
//! process's open-file limit) and per client ([`super::peer::Client`]: a remote address, or on
//! loopback the local user that owns the socket — one user's crowd never costs another user
//! sharing `127.0.0.1` a place). A new connection over a limit takes the
//! place of the oldest connection that is not running a request (one idle between requests,
//! still sending its headers, or stuck writing a reply to a client that does not read): a
//! crowd of idle or slow connections never locks out a new client, and a request being
//! answered is never cut. Only when every connection is busy is the new one closed at once.
//!
//! Who a loopback connection belongs to is read from the kernel's socket table, which is dear
//! on a machine with many sockets: it is read only once the table is crowded enough for a
//! limit to matter (as many connections as one client may hold), then for every loopback
//! connection not yet told at once. Below that no limit can be reached, whoever they belong to.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Notify;

pub(crate) use super::peer::Client;

/// Most open connections in all.
const MAX_CONNECTIONS: usize = 512;
/// Most open connections from one client.
pub(crate) const MAX_PER_CLIENT: usize = 64;

/// The total limit for a process allowed `open_files` descriptors: [`MAX_CONNECTIONS`], or
/// half the descriptors when fewer (the sampler, the session log and `/proc` need the rest).
pub(crate) fn total_limit(open_files: u64) -> usize {
    MAX_CONNECTIONS.min((open_files / 2) as usize).max(8)
}

/// A connection's entry.
#[derive(Debug)]
struct Entry {
    /// Its client; for a loopback connection not yet told, its address until it is.
    client: Client,
    /// A loopback connection whose owner is not read yet: its peer and our address.
    untold: Option<(SocketAddr, SocketAddr)>,
    opened: Instant,
    /// Requests being answered right now (hyper answers one at a time per connection).
    busy: u32,
    /// Told when the connection is given up for a newer one.
    evict: Arc<Notify>,
}

/// Open connections; see the module's documentation.
#[derive(Debug)]
pub(crate) struct Table {
    entries: HashMap<u64, Entry>,
    next: u64,
    max_total: usize,
    max_per_client: usize,
    /// Tells the clients of connections (`(peer, local)`), in their order.
    tell: fn(&[(SocketAddr, SocketAddr)]) -> Vec<Client>,
}

/// A connection admitted: its id (for [`Table::close`] and [`Table::busy`]) and the signal
/// that it was given up for a newer one.
#[derive(Debug)]
pub(crate) struct Admitted {
    /// The connection's id.
    pub id: u64,
    /// Notified when the connection must close.
    pub evict: Arc<Notify>,
}

impl Table {
    /// An empty table with these limits (each at least 1).
    pub(crate) fn new(max_total: usize, max_per_client: usize) -> Self {
        Self::telling(max_total, max_per_client, super::peer::clients_of)
    }

    /// An empty table whose loopback clients are told by `tell`.
    fn telling(
        max_total: usize,
        max_per_client: usize,
        tell: fn(&[(SocketAddr, SocketAddr)]) -> Vec<Client>,
    ) -> Self {
        Self {
            entries: HashMap::new(),
            next: 0,
            max_total: max_total.max(1),
            max_per_client: max_per_client.max(1),
            tell,
        }
    }

    /// True when a new connection could meet a limit: the table holds as many connections as
    /// one client may hold, or its total.
    fn crowded(&self) -> bool {
        self.entries.len() >= self.max_per_client.min(self.max_total)
    }

    /// Reads the owners of the loopback connections not yet told, all in one go.
    fn tell_untold(&mut self) {
        let untold: Vec<(u64, (SocketAddr, SocketAddr))> = self
            .entries
            .iter()
            .filter_map(|(id, e)| Some((*id, e.untold?)))
            .collect();
        if untold.is_empty() {
            return;
        }
        let pairs: Vec<(SocketAddr, SocketAddr)> = untold.iter().map(|(_, p)| *p).collect();
        for ((id, _), client) in untold.iter().zip((self.tell)(&pairs)) {
            if let Some(e) = self.entries.get_mut(id) {
                e.client = client;
                e.untold = None;
            }
        }
    }

    /// Admits a connection from `peer` to our `local` address (see [`Table::admit`]); the
    /// owner of a loopback connection is read only when the table is crowded.
    pub(crate) fn admit_from(
        &mut self,
        peer: SocketAddr,
        local: SocketAddr,
        now: Instant,
    ) -> Option<Admitted> {
        if !super::peer::is_loopback(peer) {
            return self.admit(Client::Addr(peer.ip()), now);
        }
        if self.crowded() {
            let _owner = crate::host::cost::span(crate::host::cost::Part::HttpPeer);
            let client = (self.tell)(&[(peer, local)])[0];
            return self.admit(client, now);
        }
        let admitted = self.insert(Client::Addr(peer.ip()), now);
        if let Some(e) = self.entries.get_mut(&admitted.id) {
            e.untold = Some((peer, local));
        }
        Some(admitted)
    }

    fn count_from(&self, client: Client) -> usize {
        self.entries.values().filter(|e| e.client == client).count()
    }

    /// The oldest connection not answering a request, among those `pick` selects.
    fn oldest_idle(&self, pick: impl Fn(&Entry) -> bool) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(_, e)| e.busy == 0 && pick(e))
            .min_by_key(|(id, e)| (e.opened, **id))
            .map(|(id, _)| *id)
    }

    /// The client with the most connections (the one that gives up a place at the total
    /// limit).
    fn busiest(&self) -> Option<Client> {
        let mut counts: HashMap<Client, usize> = HashMap::new();
        for e in self.entries.values() {
            *counts.entry(e.client).or_insert(0) += 1;
        }
        counts.into_iter().max_by_key(|(_, n)| *n).map(|(c, _)| c)
    }

    /// Gives up `id`'s place: it leaves the table now and its task is told to close.
    fn evict(&mut self, id: u64) {
        if let Some(e) = self.entries.remove(&id) {
            e.evict.notify_one();
        }
    }

    /// Admits a connection from `client` opened at `now`, giving up an idle one where a
    /// limit is reached (at the client's own limit, one of its own); `None` when every
    /// connection in the way is answering a request (the new one is then closed at once).
    fn admit(&mut self, client: Client, now: Instant) -> Option<Admitted> {
        if self.crowded() {
            let _owner = crate::host::cost::span(crate::host::cost::Part::HttpPeer);
            self.tell_untold();
        }
        if self.count_from(client) >= self.max_per_client {
            let victim = self.oldest_idle(|e| e.client == client)?;
            self.evict(victim);
        }
        if self.entries.len() >= self.max_total && !self.evict_one() {
            return None;
        }
        Some(self.insert(client, now))
    }

    fn insert(&mut self, client: Client, now: Instant) -> Admitted {
        let id = self.next;
        self.next += 1;
        let evict = Arc::new(Notify::new());
        self.entries.insert(
            id,
            Entry {
                client,
                untold: None,
                opened: now,
                busy: 0,
                evict: evict.clone(),
            },
        );
        Admitted { id, evict }
    }

    /// Gives up the oldest idle connection (of the client with the most, if it has one
    /// idle): for when the process runs out of file descriptors. False when all are busy.
    pub(crate) fn evict_one(&mut self) -> bool {
        self.tell_untold();
        let victim = self
            .busiest()
            .and_then(|big| self.oldest_idle(|e| e.client == big))
            .or_else(|| self.oldest_idle(|_| true));
        match victim {
            Some(v) => {
                self.evict(v);
                true
            }
            None => false,
        }
    }

    /// Marks a request on `id` started (`true`) or answered (`false`).
    pub(crate) fn busy(&mut self, id: u64, busy: bool) {
        if let Some(e) = self.entries.get_mut(&id) {
            if busy {
                e.busy += 1;
            } else {
                e.busy = e.busy.saturating_sub(1);
            }
        }
    }

    /// True while `id` answers a request.
    pub(crate) fn is_busy(&self, id: u64) -> bool {
        self.entries.get(&id).is_some_and(|e| e.busy > 0)
    }

    /// Removes `id` (its connection ended); nothing when it was given up already.
    pub(crate) fn close(&mut self, id: u64) {
        self.entries.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ip(last: u8) -> Client {
        Client::Addr(std::net::IpAddr::from([10, 0, 0, last]))
    }

    #[test]
    fn a_client_at_its_limit_gives_up_its_oldest_idle_connection() {
        let t0 = Instant::now();
        let mut t = Table::new(100, 2);
        let a = t.admit(ip(1), t0).expect("first");
        let b = t.admit(ip(1), t0 + Duration::from_secs(1)).expect("second");
        t.busy(a.id, true);
        // A third from the same client: the oldest idle one (b; a is answering) goes.
        let c = t.admit(ip(1), t0 + Duration::from_secs(2)).expect("third");
        assert_eq!(t.entries.len(), 2);
        assert!(t.entries.contains_key(&a.id) && t.entries.contains_key(&c.id));
        assert!(!t.entries.contains_key(&b.id));
        // Another client is not affected.
        assert!(t.admit(ip(2), t0).is_some());
        assert_eq!(t.entries.len(), 3);
        // Every connection of the client busy: the newcomer is refused.
        t.busy(c.id, true);
        assert!(t.admit(ip(1), t0 + Duration::from_secs(3)).is_none());
        assert_eq!(t.entries.len(), 3);
        // Answered: a place frees up again.
        t.busy(a.id, false);
        assert!(t.admit(ip(1), t0 + Duration::from_secs(4)).is_some());
        assert!(!t.entries.contains_key(&a.id));
    }

    thread_local! {
        static TOLD: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    /// Tells a loopback client by its port: below 2000 user 1000, else user 2000; records how
    /// many connections each call was asked about.
    fn by_port(conns: &[(SocketAddr, SocketAddr)]) -> Vec<Client> {
        TOLD.with(|t| t.borrow_mut().push(conns.len()));
        conns
            .iter()
            .map(|(p, _)| Client::LocalUser(if p.port() < 2000 { 1000 } else { 2000 }))
            .collect()
    }

    fn lo(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn loopback_owners_are_read_only_when_crowded_then_all_at_once() {
        let t0 = Instant::now();
        let server = lo(8726);
        let mut t = Table::telling(100, 3, by_port);
        let a = t.admit_from(lo(1001), server, t0).expect("first");
        t.admit_from(lo(2001), server, t0 + Duration::from_secs(1))
            .expect("second");
        t.admit_from(lo(1002), server, t0 + Duration::from_secs(2))
            .expect("third");
        assert!(
            TOLD.with(|t| t.borrow().is_empty()),
            "no limit near: not read"
        );
        // The fourth could meet user 1000's limit of 3: the three are told in one read, the
        // newcomer in another; user 1000 holds 2, so nothing is given up.
        t.admit_from(lo(1003), server, t0 + Duration::from_secs(3))
            .expect("fourth");
        assert_eq!(TOLD.with(|t| t.borrow().clone()), vec![1, 3]);
        assert_eq!(t.entries.len(), 4);
        assert_eq!(t.count_from(Client::LocalUser(1000)), 3);
        // A fifth of user 1000: its oldest idle connection (the first) gives up its place,
        // as it would have had every owner been read at once.
        t.admit_from(lo(1004), server, t0 + Duration::from_secs(4))
            .expect("fifth");
        assert!(!t.entries.contains_key(&a.id));
        assert_eq!(t.count_from(Client::LocalUser(1000)), 3);
        assert_eq!(t.count_from(Client::LocalUser(2000)), 1);
        // A remote client is its address, never read.
        let remote = SocketAddr::from(([10, 0, 0, 7], 4000));
        t.admit_from(remote, server, t0).expect("remote");
        assert_eq!(t.count_from(ip(7)), 1);
        assert_eq!(TOLD.with(|t| t.borrow().len()), 3);
    }

    #[test]
    fn at_the_total_limit_the_client_with_most_connections_gives_one_up() {
        let t0 = Instant::now();
        let mut t = Table::new(4, 10);
        let quiet = t.admit(ip(9), t0).expect("quiet client");
        for i in 1..=3 {
            t.admit(ip(1), t0 + Duration::from_secs(i)).expect("crowd");
        }
        let newcomer = t.admit(ip(2), t0 + Duration::from_secs(9));
        assert!(newcomer.is_some());
        assert_eq!(t.entries.len(), 4);
        assert!(
            t.entries.contains_key(&quiet.id),
            "the oldest connection belongs to a quiet client and stays"
        );
        assert_eq!(t.count_from(ip(1)), 2);
        t.close(quiet.id);
        assert_eq!(t.entries.len(), 3);
    }
}
