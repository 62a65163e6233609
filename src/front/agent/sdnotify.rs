//! systemd's readiness and watchdog protocol without a library: one datagram to
//! `$NOTIFY_SOCKET`.

use std::os::unix::net::UnixDatagram;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Sends `state` (e.g. `READY=1`) when the service manager asked for it; returns whether a
/// datagram went out. A socket name starting with `@` is in the abstract namespace.
pub(crate) fn notify(state: &str) -> bool {
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

/// systemd's watchdog (`WatchdogSec=`): `WATCHDOG=1` while the sampler makes progress, so a
/// sampler that hangs or dies gets the service restarted. Nothing is sent without
/// `$WATCHDOG_USEC` (or when `$WATCHDOG_PID` names another process).
#[derive(Debug)]
pub(crate) struct Watchdog {
    /// Least time between two `WATCHDOG=1`.
    every: Option<Duration>,
    state: Mutex<KickState>,
}

#[derive(Debug, Default)]
struct KickState {
    ticks: u64,
    last: Option<Instant>,
}

/// The watchdog timeout the agent needs at `interval`: three intervals without a sample
/// (what `/healthz` calls stale) and some slack.
fn needed_timeout(interval: Duration) -> Duration {
    interval * 3 + Duration::from_secs(2)
}

impl Watchdog {
    /// A watchdog kicked at least every third of `timeout` (none: disabled).
    pub(crate) fn new(timeout: Option<Duration>) -> Self {
        Self {
            every: timeout.map(|t| t / 3),
            state: Mutex::new(KickState::default()),
        }
    }

    /// From the service manager's environment; when its timeout is shorter than the sampling
    /// `interval` needs ([`needed_timeout`]), the agent asks for a longer one
    /// (`WATCHDOG_USEC=…`) and says so.
    pub(crate) fn from_env(interval: Duration) -> Self {
        let ours = std::env::var("WATCHDOG_PID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            .is_none_or(|p| p == std::process::id());
        let usec = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|u| *u > 0 && ours);
        let Some(usec) = usec else {
            return Self::new(None);
        };
        let mut timeout = Duration::from_micros(usec);
        let need = needed_timeout(interval);
        if timeout < need && notify(&format!("WATCHDOG_USEC={}", need.as_micros())) {
            tracing::warn!(
                "WatchdogSec= ({} s) is shorter than 3 sampling intervals; asked systemd for {} s",
                timeout.as_secs_f64(),
                need.as_secs_f64()
            );
            timeout = need;
        }
        Self::new(Some(timeout))
    }

    /// Whether `ticks` (the sampler's count of samples) at `now` is progress worth a
    /// `WATCHDOG=1`: a new sample, and a third of the timeout since the last one sent.
    pub(crate) fn due(&self, ticks: u64, now: Instant) -> bool {
        let Some(every) = self.every else {
            return false;
        };
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if ticks == s.ticks {
            return false;
        }
        s.ticks = ticks;
        if s.last.is_some_and(|l| now.duration_since(l) < every) {
            return false;
        }
        s.last = Some(now);
        true
    }

    /// Called after each sampling attempt with the sampler's count of samples.
    pub(crate) fn progress(&self, ticks: u64) {
        if self.due(ticks, Instant::now()) {
            notify("WATCHDOG=1");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kicks_on_new_samples_at_most_every_third_of_the_timeout() {
        let w = Watchdog::new(Some(Duration::from_secs(30)));
        let t0 = Instant::now();
        assert!(w.due(1, t0), "the first sample");
        assert!(!w.due(2, t0 + Duration::from_secs(1)), "too soon");
        assert!(
            !w.due(2, t0 + Duration::from_secs(20)),
            "no new sample: a stuck sampler is not progress"
        );
        assert!(w.due(3, t0 + Duration::from_secs(20)));
        let off = Watchdog::new(None);
        assert!(!off.due(1, t0));
    }

    #[test]
    fn the_timeout_covers_three_intervals() {
        assert!(needed_timeout(Duration::from_secs(10)) > Duration::from_secs(30));
    }
}
