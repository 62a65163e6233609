//! Who a connection comes from, for the per-client limits of [`super::conns`]. A remote
//! client is its address. On loopback every local user — Prometheus, each `ssh -L` tunnel,
//! anyone with a shell — shares `127.0.0.1` (and can pick any `127.x.y.z`), so a limit per
//! address would let one user crowd out the others: a loopback client is the user that owns
//! its socket, read from the kernel's socket table (`/proc/net/tcp`, `/proc/net/tcp6`). That
//! table lists every socket of the machine (about 1.5 ms to read on a busy GPU server), so it is
//! read only when a limit needs to know who a loopback connection belongs to, for all such
//! connections at once ([`clients_of`]), never per request.

use std::io::BufRead;
use std::net::{IpAddr, SocketAddr};

/// A client, as the connection limits count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Client {
    /// A remote address (or a loopback one whose owner could not be read).
    Addr(IpAddr),
    /// A local user, by uid (every loopback address).
    LocalUser(u32),
}

/// True when `peer` is a loopback address (its client is the user that owns its socket).
pub(crate) fn is_loopback(peer: SocketAddr) -> bool {
    peer.ip().is_loopback() || peer.ip().to_canonical().is_loopback()
}

/// The clients of the connections `(peer, local)`, in their order, reading each socket table
/// once for all of them: a loopback connection's is the user that owns its socket, any other's
/// (or one whose owner cannot be read) its address.
pub(crate) fn clients_of(conns: &[(SocketAddr, SocketAddr)]) -> Vec<Client> {
    let mut out: Vec<Client> = conns.iter().map(|(p, _)| Client::Addr(p.ip())).collect();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let v6 = table.ends_with('6');
        let mut wanted: std::collections::HashMap<(String, String), usize> = conns
            .iter()
            .enumerate()
            .filter(|(i, (p, _))| is_loopback(*p) && matches!(out[*i], Client::Addr(_)))
            .map(|(i, (p, l))| ((proc_hex(*p, v6), proc_hex(*l, v6)), i))
            .filter(|((c, l), _)| !c.is_empty() && !l.is_empty())
            .collect();
        if wanted.is_empty() {
            continue;
        }
        find_owners(table, &mut |client, server, uid| {
            if let Some(i) = wanted.remove(&(client.to_string(), server.to_string())) {
                out[i] = Client::LocalUser(uid);
            }
            !wanted.is_empty()
        });
    }
    out
}

/// `addr` as `/proc/net/tcp*` prints it: each 32-bit word of the address in the host's byte
/// order, in hex, then `:` and the port.
fn proc_hex(addr: SocketAddr, v6_table: bool) -> String {
    let words: Vec<[u8; 4]> = match (addr.ip(), v6_table) {
        (IpAddr::V4(a), false) => vec![a.octets()],
        (IpAddr::V4(a), true) => {
            let m = a.to_ipv6_mapped().octets();
            m.chunks(4).map(|c| [c[0], c[1], c[2], c[3]]).collect()
        }
        (IpAddr::V6(a), true) => a
            .octets()
            .chunks(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect(),
        (IpAddr::V6(a), false) => match a.to_ipv4_mapped() {
            Some(v4) => vec![v4.octets()],
            None => return String::new(),
        },
    };
    let mut s: String = words
        .iter()
        .map(|w| format!("{:08X}", u32::from_ne_bytes(*w)))
        .collect();
    s.push_str(&format!(":{:04X}", addr.port()));
    s
}

/// Lines of a socket table read at most (a table larger than this is not searched further).
const MAX_LINES: usize = 1 << 20;

/// Calls `found(local address, remote address, uid)` for each entry of the socket table
/// `table` until it returns false.
fn find_owners(table: &str, found: &mut dyn FnMut(&str, &str, u32) -> bool) {
    let Ok(f) = std::fs::File::open(table) else {
        return;
    };
    for line in std::io::BufReader::new(f)
        .lines()
        .skip(1)
        .take(MAX_LINES)
        .map_while(Result::ok)
    {
        let mut cols = line.split_whitespace();
        let (Some(_), Some(l), Some(r)) = (cols.next(), cols.next(), cols.next()) else {
            continue;
        };
        // st, tx:rx, tr:when, retrnsmt, then the uid.
        let Some(uid) = cols.nth(4).and_then(|u| u.parse().ok()) else {
            continue;
        };
        if !found(l, r, uid) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loopback_client_is_the_user_that_owns_its_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, peer) = l.accept().expect("accept");
        assert_eq!(peer, c.local_addr().expect("addr"));
        let me = nix::unistd::geteuid().as_raw();
        assert_eq!(
            clients_of(&[(peer, s.local_addr().expect("addr"))])[0],
            Client::LocalUser(me)
        );
        let remote: SocketAddr = "10.1.2.3:5555".parse().expect("addr");
        assert_eq!(
            clients_of(&[(remote, s.local_addr().expect("addr"))])[0],
            Client::Addr(remote.ip())
        );
    }

    #[test]
    fn several_connections_are_told_in_one_read_in_their_order() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let _c1 = std::net::TcpStream::connect(addr).expect("connect");
        let _c2 = std::net::TcpStream::connect(addr).expect("connect");
        let (s1, p1) = l.accept().expect("accept");
        let (s2, p2) = l.accept().expect("accept");
        let remote: SocketAddr = "10.1.2.3:5555".parse().expect("addr");
        // A loopback address no socket has: its owner cannot be read, so it is its address.
        let gone: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let me = Client::LocalUser(nix::unistd::geteuid().as_raw());
        let got = clients_of(&[
            (p1, s1.local_addr().expect("addr")),
            (remote, addr),
            (gone, addr),
            (p2, s2.local_addr().expect("addr")),
        ]);
        assert_eq!(
            got,
            vec![me, Client::Addr(remote.ip()), Client::Addr(gone.ip()), me]
        );
    }
}
