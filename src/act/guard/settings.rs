//! The guard's settings: the `[guard]` table of `config.toml`. Every field has a default, so
//! a file holds only what differs; every number has a range ([`GuardSettings::problems_at`]).

use serde::{Deserialize, Serialize};

/// The OOM guard's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardSettings {
    /// The guard watches every GPU (its view says what it would do next).
    pub enabled: bool,
    /// It only says what it would do (the global `cleanup.dry_run` must be off too to act).
    pub dry_run: bool,
    /// Rung 1: release the PyTorch caches of jobs whose companion reports releasable memory.
    pub release_cache: bool,
    /// Rung 2: park the largest process that has been GPU-idle this long.
    pub park_idle: bool,
    /// Rung 2: minutes a process must have been GPU-idle to be parked.
    pub idle_min_minutes: f64,
    /// Rung 3: park the growing job itself before it hits OOM, resume it when there is room.
    pub pause_grower: bool,
    /// Rung 4 (opt-in, destructive): terminate a process flagged as leaking.
    pub terminate_leaker: bool,
    /// Rung 4: minutes a process must have been flagged as leaking.
    pub leaking_min_minutes: f64,
    /// A step starts when the time to full is under this factor × the time the step needs …
    pub lead_factor: f64,
    /// … plus these seconds (sampling, the forecast's delay, the driver's lock).
    pub lead_margin_s: f64,
    /// While something grows, the guard acts at once when free memory is under this (MiB).
    pub floor_free_mib: f64,
    /// A parked process is resumed only when, with its memory back, the GPU would not be
    /// forecast full within this many minutes.
    pub safe_minutes: f64,
    /// … and that has held this many seconds.
    pub resume_hold_s: f64,
    /// Processes holding less than this (MiB) are not parked.
    pub min_process_mib: f64,
    /// May act on other users' processes (root's agent on a shared server).
    pub allow_other_users: bool,
}

impl Default for GuardSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            dry_run: true,
            release_cache: true,
            park_idle: true,
            idle_min_minutes: 10.0,
            pause_grower: true,
            terminate_leaker: false,
            leaking_min_minutes: 2.0,
            lead_factor: 1.5,
            lead_margin_s: 10.0,
            floor_free_mib: 1024.0,
            safe_minutes: 10.0,
            resume_hold_s: 30.0,
            min_process_mib: 1024.0,
            allow_other_users: false,
        }
    }
}

impl GuardSettings {
    /// Every problem of the values: (key under `guard`, what is wrong).
    pub(crate) fn problems_at(&self) -> Vec<(&'static str, String)> {
        let ranges: [(&'static str, f64, f64, f64); 8] = [
            ("idle_min_minutes", self.idle_min_minutes, 0.0, 10_080.0),
            (
                "leaking_min_minutes",
                self.leaking_min_minutes,
                0.0,
                10_080.0,
            ),
            ("lead_factor", self.lead_factor, 1.0, 10.0),
            ("lead_margin_s", self.lead_margin_s, 0.0, 600.0),
            ("floor_free_mib", self.floor_free_mib, 0.0, 1_048_576.0),
            ("safe_minutes", self.safe_minutes, 1.0, 1_440.0),
            ("resume_hold_s", self.resume_hold_s, 0.0, 3_600.0),
            ("min_process_mib", self.min_process_mib, 0.0, 1_048_576.0),
        ];
        ranges
            .into_iter()
            .filter(|(_, v, lo, hi)| !(v.is_finite() && (*lo..=*hi).contains(v)))
            .map(|(k, _, lo, hi)| (k, format!("must be from {lo} to {hi}")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_each_range_is_checked() {
        assert!(GuardSettings::default().problems_at().is_empty());
        let s = GuardSettings {
            lead_factor: 0.5,
            safe_minutes: f64::NAN,
            ..GuardSettings::default()
        };
        let keys: Vec<&str> = s.problems_at().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["lead_factor", "safe_minutes"]);
    }

    #[test]
    fn a_table_with_one_key_keeps_the_other_defaults_and_unknown_keys_are_refused() {
        let s: GuardSettings = toml::from_str("dry_run = false").expect("parses");
        assert!(!s.dry_run && s.enabled && s.pause_grower && !s.terminate_leaker);
        assert!(toml::from_str::<GuardSettings>("headroom = 1").is_err());
    }
}
