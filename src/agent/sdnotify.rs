//! systemd's readiness protocol without a library: one datagram to `$NOTIFY_SOCKET`.

use std::os::unix::net::UnixDatagram;

/// Sends `state` (e.g. `READY=1`) when the service manager asked for it; returns whether a
/// datagram went out. A socket name starting with `@` is in the abstract namespace.
pub fn notify(state: &str) -> bool {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return false;
    };
    let Ok(sock) = UnixDatagram::unbound() else {
        return false;
    };
    let bytes = path.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        match std::os::unix::net::SocketAddr::from_abstract_name(name) {
            Ok(addr) => sock.send_to_addr(state.as_bytes(), &addr).is_ok(),
            Err(_) => false,
        }
    } else {
        sock.send_to(state.as_bytes(), &path).is_ok()
    }
}
