//! How long the guard's steps take on this machine: a park's and a resume's time from the
//! bytes moved and the rate measured by the parks and resumes that ended here, with a
//! conservative default until one has been measured.

pub(crate) use crate::act::park::estimate::{park_estimate_s, resume_estimate_s};
pub use crate::act::park::estimate::{DEFAULT_PARK_GIB_S, DEFAULT_RESUME_GIB_S, OVERHEAD_S};
use crate::model::GIB;

/// The fixed part of a park's or resume's time as measured on the H100 (driver 580): 10 and
/// 40.5 GiB parked in 4.4 and 16.8 s, 6.5 and 44.3 GiB in 2.9 and 17.9 s, fit to about 0.35 s
/// plus 2.45 GiB/s. Only this is taken off a measured time; planning adds [`OVERHEAD_S`],
/// so an estimate errs long, never short.
const MEASURED_OVERHEAD_S: f64 = 0.35;
/// Seconds a PyTorch cache release takes to show in the driver's figures.
pub(crate) const RELEASE_S: f64 = 3.0;
/// Moves smaller than this say little about the rate and are not measured.
const MEASURE_MIN_BYTES: u64 = GIB;

/// The measured rates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timing {
    park_gib_s: Option<f64>,
    resume_gib_s: Option<f64>,
}

impl Timing {
    /// Rates known beforehand (e.g. `guard what-if --park-rate`).
    pub(crate) fn with_rates(park_gib_s: Option<f64>, resume_gib_s: Option<f64>) -> Self {
        let ok = |r: Option<f64>| r.filter(|r| r.is_finite() && *r > 0.0);
        Self {
            park_gib_s: ok(park_gib_s),
            resume_gib_s: ok(resume_gib_s),
        }
    }

    /// Takes in a park (`resume` false) or resume that went through: `bytes` in `seconds`.
    pub(crate) fn observe(&mut self, resume: bool, bytes: u64, seconds: f64) {
        if bytes < MEASURE_MIN_BYTES || !seconds.is_finite() || seconds <= 0.0 {
            return;
        }
        // Beside the driver's fixed cost as measured (not the planning's OVERHEAD_S): taking
        // 2 s off a short park made a 6.5 GiB park in 2.9 s on the H100 read as 7.2 GiB/s,
        // and the next 44 GiB park was planned at 8 s when it took 17.9 s.
        let rate = (bytes as f64 / GIB as f64 / (seconds - MEASURED_OVERHEAD_S).max(0.25))
            .clamp(0.1, 100.0);
        let slot = if resume {
            &mut self.resume_gib_s
        } else {
            &mut self.park_gib_s
        };
        // The slower of the last measurement and the mean: a slow park is never forgotten at once.
        *slot = Some(slot.map_or(rate, |old| rate.min((old + rate) / 2.0)));
    }

    /// The park rate in use, GiB/s, and whether it was measured here.
    pub(crate) fn park_rate(&self) -> (f64, bool) {
        (
            self.park_gib_s.unwrap_or(DEFAULT_PARK_GIB_S),
            self.park_gib_s.is_some(),
        )
    }

    /// Seconds a park of `bytes` takes.
    pub(crate) fn park_s(&self, bytes: u64) -> f64 {
        park_estimate_s(bytes, self.park_rate().0)
    }

    /// Seconds a resume of `bytes` takes.
    pub(crate) fn resume_s(&self, bytes: u64) -> f64 {
        resume_estimate_s(bytes, self.resume_rate().0)
    }

    /// The resume rate in use, GiB/s, and whether it was measured here.
    pub(crate) fn resume_rate(&self) -> (f64, bool) {
        (
            self.resume_gib_s.unwrap_or(DEFAULT_RESUME_GIB_S),
            self.resume_gib_s.is_some(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_until_measured_then_the_slower_of_the_new_rate_and_the_mean() {
        let mut t = Timing::default();
        assert_eq!(t.park_rate(), (DEFAULT_PARK_GIB_S, false));
        assert!((t.park_s(15 * GIB) - 12.0).abs() < 1e-9);
        // 40.5 GiB parked in 16.8 s (the H100): 2.46 GiB/s beside the measured fixed cost.
        t.observe(false, 40 * GIB + GIB / 2, 16.8);
        let (r, measured) = t.park_rate();
        assert!(measured && (r - 40.5 / 16.45).abs() < 1e-9, "{r}");
        // A slower park lowers it at once; a faster one only halfway.
        t.observe(false, 10 * GIB, 10.35);
        assert!((t.park_rate().0 - 1.0).abs() < 1e-9);
        t.observe(false, 10 * GIB, 2.35);
        assert!((t.park_rate().0 - 3.0).abs() < 1e-9);
        // Small moves and nonsense are not measured.
        t.observe(false, GIB / 2, 0.1);
        t.observe(false, 10 * GIB, f64::NAN);
        assert!((t.park_rate().0 - 3.0).abs() < 1e-9);
    }

    /// Seen on the H100 (driver 580): a paused grower's 6.5 GiB parked in 2.9 s, then an
    /// idle job's 44.3 GiB in 17.9 s. Planned from the first, the second must not be
    /// planned shorter than it took.
    #[test]
    fn a_short_park_does_not_make_a_long_one_look_quick() {
        let mut t = Timing::default();
        t.observe(false, 6662 * crate::model::MIB, 2.9);
        let planned = t.park_s(45318 * crate::model::MIB);
        assert!(planned >= 17.9, "planned {planned:.1} s, took 17.9 s");
        assert!(
            planned <= 17.9 * 1.5,
            "planned {planned:.1} s: far too long"
        );
    }
}
