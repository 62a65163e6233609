//! Ready-made rule sets: the OOM guard's ladder.

use super::model::{Action, Conditions, Rule, DEFAULT_GRACE_SECONDS};

/// The default headroom of the OOM guard: act when a GPU has less than this free (MiB).
pub const GUARD_HEADROOM_MIB: f64 = 8192.0;

/// The OOM guard: a ladder of rules that act, in order, while a GPU's free memory stays under
/// `headroom_mib`. Each step waits for the driver's (NVML's) figure to show that the steps
/// before it did not free enough (its `hold_seconds` is longer than the step before):
///
/// 1. release PyTorch's cached memory of the jobs that hold some (at once);
/// 2. park the largest process that has been GPU-idle for 10 minutes (after 10 s);
/// 3. (`terminate`: opt-in) terminate the process flagged as leaking for 2 minutes or more
///    (after 60 s; created disabled);
/// 4. resume parked processes once their GPU has room for them plus the headroom (for 60 s).
///
/// The rules are made in dry run, like every new rule: the activity log says what they would
/// do until dry run is turned off.
pub fn oom_guard(headroom_mib: f64) -> Vec<Rule> {
    let tight = |hold: f64| Conditions {
        device_free_max_mib: Some(headroom_mib),
        hold_seconds: hold,
        ..Conditions::default()
    };
    vec![
        Rule {
            name: "OOM guard 1: release PyTorch caches".into(),
            conditions: Conditions {
                releasable_cache_min_mib: Some(1024.0),
                ..tight(0.0)
            },
            action: Action::ReleaseCache,
            cooldown_minutes: 2.0,
            ..Rule::default()
        },
        Rule {
            name: "OOM guard 2: park the largest idle process".into(),
            conditions: Conditions {
                idle_min_minutes: Some(10.0),
                process_memory_min_mib: Some(1024.0),
                largest_only: true,
                ..tight(10.0)
            },
            action: Action::Park,
            cooldown_minutes: 5.0,
            ..Rule::default()
        },
        Rule {
            name: "OOM guard 3: terminate the fastest leaker (opt-in)".into(),
            enabled: false,
            conditions: Conditions {
                leaking_min_minutes: Some(2.0),
                largest_only: true,
                ..tight(60.0)
            },
            action: Action::Terminate {
                grace_seconds: DEFAULT_GRACE_SECONDS,
            },
            cooldown_minutes: 10.0,
            ..Rule::default()
        },
        Rule {
            name: "OOM guard 4: resume parked processes when there is room".into(),
            conditions: Conditions {
                parked_fits_with_mib: Some(headroom_mib),
                hold_seconds: 60.0,
                ..Conditions::default()
            },
            action: Action::Resume,
            cooldown_minutes: 1.0,
            ..Rule::default()
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_is_valid_in_dry_run_and_each_step_waits_longer() {
        let rules = oom_guard(GUARD_HEADROOM_MIB);
        assert_eq!(rules.len(), 4);
        for r in &rules {
            assert!(r.dry_run, "{}", r.name);
            assert!(r.problems().is_empty(), "{}: {:?}", r.name, r.problems());
        }
        let holds: Vec<f64> = rules[..3]
            .iter()
            .map(|r| r.conditions.hold_seconds)
            .collect();
        assert!(holds.windows(2).all(|w| w[0] < w[1]), "{holds:?}");
        assert!(!rules[2].enabled, "terminating is opt-in");
    }
}
