//! Who a connection comes from, for the per-client limits of [`super::conns`]. A remote
//! client is its address. On loopback every local user — Prometheus, each `ssh -L` tunnel,
//! anyone with a shell — shares `127.0.0.1` (and can pick any `127.x.y.z`), so a limit per
//! address would let one user crowd out the others: a loopback client is the user that owns
//! its socket, read from the kernel's socket table (`/proc/net/tcp`, `/proc/net/tcp6`).

use std::io::BufRead;
use std::net::{IpAddr, SocketAddr};

/// A client, as the connection limits count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Client {
    /// A remote address (or a loopback one whose owner could not be read).
    Addr(IpAddr),
    /// A local user, by uid (every loopback address).
    LocalUser(u32),
}

/// The client of a connection from `peer` to our `local` address.
pub fn client_of(peer: SocketAddr, local: SocketAddr) -> Client {
    if peer.ip().is_loopback() || peer.ip().to_canonical().is_loopback() {
        if let Some(uid) = socket_owner(peer, local) {
            return Client::LocalUser(uid);
        }
    }
    Client::Addr(peer.ip())
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

/// The uid that owns the client's socket of the connection `peer` → `local`: the entry whose
/// local address is `peer` and remote address is `local`.
fn socket_owner(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .find_map(|table| {
            let v6 = table.ends_with('6');
            find_owner(table, &proc_hex(peer, v6), &proc_hex(local, v6))
        })
}

fn find_owner(table: &str, client: &str, server: &str) -> Option<u32> {
    if client.is_empty() || server.is_empty() {
        return None;
    }
    let f = std::fs::File::open(table).ok()?;
    std::io::BufReader::new(f)
        .lines()
        .skip(1)
        .take(MAX_LINES)
        .map_while(Result::ok)
        .find_map(|line| {
            let mut cols = line.split_whitespace();
            let (_, l, r) = (cols.next()?, cols.next()?, cols.next()?);
            if l != client || r != server {
                return None;
            }
            // st, tx:rx, tr:when, retrnsmt, then the uid.
            cols.nth(4)?.parse().ok()
        })
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
            client_of(peer, s.local_addr().expect("addr")),
            Client::LocalUser(me)
        );
        let remote: SocketAddr = "10.1.2.3:5555".parse().expect("addr");
        assert_eq!(
            client_of(remote, s.local_addr().expect("addr")),
            Client::Addr(remote.ip())
        );
    }
}
