//! Shared by the tests that hold one engine's View against a window's copy of it through the
//! wire (tests/alerts_local_remote.rs, tests/ui_local_remote.rs): the rule that makes the
//! simulated demo's trainer act, and a remote window's polls.

use vramwarden::act::rules::{Action, Conditions, Rule};
use vramwarden::engine::view::Monitor;
use vramwarden::link::wire::WireView;
use vramwarden::model::history::delta::MAX_DELTA_TICKS;
use vramwarden::model::UnixMs;

/// The start of the simulated demo.
pub const T0: UnixMs = 1_796_000_000_000;

/// A rule that notifies of every process over 30 GiB (the demo's trainer, another user's).
pub fn big_holder() -> Rule {
    Rule {
        name: "big holder".into(),
        conditions: Conditions {
            process_memory_min_mib: Some(30_000.0),
            ..Default::default()
        },
        action: Action::Notify,
        ..Default::default()
    }
}

/// A remote window's polls of the engine's View `local` until caught up, each answer going
/// through JSON and the window's checks (at `now`) as the remote link's do, applied to
/// `window` as received at `received`; returns the next `since`.
pub fn poll_wire(
    local: &Monitor,
    window: &mut Monitor,
    mut since: u64,
    now: UnixMs,
    received: UnixMs,
) -> u64 {
    loop {
        let body = serde_json::to_vec(&WireView::of(local, since, MAX_DELTA_TICKS)).expect("json");
        let v = vramwarden::link::wire_checks::decode_view(&body, now).expect("the checks pass");
        let caught_up = v.caught_up();
        since = v.apply_after(window, since, received).expect("applied");
        if caught_up {
            return since;
        }
    }
}
