//! How long a park or a resume is expected to take: the bytes moved at a rate (the one the
//! guard measured on this machine, or a conservative default) plus a fixed cost. One estimate
//! for the guard's plans, the confirmations and the replies.

use crate::model::GIB;

/// Park rate until one is measured, GiB/s (an H100 (driver 580) measured 2.4–2.6 GiB/s for raw
/// CUDA jobs and 1.7–1.9 GiB/s for PyTorch jobs on the H200; the default is below both).
pub const DEFAULT_PARK_GIB_S: f64 = 1.5;
/// Resume rate until one is measured, GiB/s (6.5 GiB/s measured on the H100).
pub const DEFAULT_RESUME_GIB_S: f64 = 4.0;
/// Seconds every park or resume costs beside moving memory (lock, driver bookkeeping).
pub const OVERHEAD_S: f64 = 2.0;

/// Seconds a park of `bytes` takes at `gib_s` GiB/s (the default rate where `gib_s` is not a
/// positive rate: none measured yet, or a View from an older agent): the one estimate the
/// guard plans with and the confirmations and replies show.
pub(crate) fn park_estimate_s(bytes: u64, gib_s: f64) -> f64 {
    estimate_s(bytes, gib_s, DEFAULT_PARK_GIB_S)
}

/// Seconds a resume of `bytes` takes at `gib_s` GiB/s (the default rate where `gib_s` is not
/// a positive rate).
pub(crate) fn resume_estimate_s(bytes: u64, gib_s: f64) -> f64 {
    estimate_s(bytes, gib_s, DEFAULT_RESUME_GIB_S)
}

fn estimate_s(bytes: u64, gib_s: f64, default_gib_s: f64) -> f64 {
    let rate = if gib_s.is_finite() && gib_s > 0.0 {
        gib_s
    } else {
        default_gib_s
    };
    OVERHEAD_S + bytes as f64 / GIB as f64 / rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_rate_where_one_is_given_else_the_default() {
        // 30 GiB at a measured 2.5 GiB/s: 12 s of moving plus the fixed cost.
        assert!((park_estimate_s(30 * GIB, 2.5) - (OVERHEAD_S + 12.0)).abs() < 1e-9);
        // None measured (0, or not a number): the default park rate.
        let default = OVERHEAD_S + 30.0 / DEFAULT_PARK_GIB_S;
        assert!((park_estimate_s(30 * GIB, 0.0) - default).abs() < 1e-9);
        assert!((park_estimate_s(30 * GIB, f64::NAN) - default).abs() < 1e-9);
        let resume = OVERHEAD_S + 30.0 / DEFAULT_RESUME_GIB_S;
        assert!((resume_estimate_s(30 * GIB, -1.0) - resume).abs() < 1e-9);
    }
}
