//! Growth the guard acts on: a process counts as growing when its memory grew in at least
//! two of its last three samples, at the rate of its last few seconds. A model load that
//! takes its memory in one jump, a warm-up step, a burst that stops, are not extrapolated into
//! "full in 1 s" (seen on an H100: a job loading 40 GiB at once looked like a grower filling
//! the GPU). The forecast's own rate is kept for the floor (`floor_free_mib`): under it, any
//! growth the forecast sees makes the guard act at once.

use std::collections::VecDeque;

use super::facts::GpuFacts;
use crate::model::history::ProcSeriesKey;
use crate::model::{FastMap, UnixMs};

/// Seconds of samples kept per process.
const WINDOW_MS: UnixMs = 6_000;

/// Each process's recent samples: (time, bytes).
#[derive(Debug, Default)]
pub(super) struct Recent(FastMap<ProcSeriesKey, VecDeque<(UnixMs, u64)>>);

impl Recent {
    /// Takes in `g`'s samples and sets each process's growth in `g` (and the GPU's, their
    /// sum) as the guard counts it; returns the forecast's GPU rate, as `g` had it.
    pub(super) fn steady(&mut self, g: &mut GpuFacts, now: UnixMs) -> f64 {
        self.0
            .retain(|k, _| g.proc(k).is_some_and(|p| p.parked.is_none()));
        let forecast_rate = g.growth_bytes_s;
        let out = g;
        for p in out.procs.iter_mut() {
            if p.parked.is_some() {
                // Parked, or being parked or resumed: it does not grow now.
                p.growth_bytes_s = 0.0;
                continue;
            }
            let q = self.0.entry(p.key).or_default();
            if q.back().is_none_or(|(t, _)| *t < now) {
                q.push_back((now, p.bytes));
            }
            while q.front().is_some_and(|(t, _)| now - t > WINDOW_MS) {
                q.pop_front();
            }
            p.growth_bytes_s = rate(q);
        }
        out.growth_bytes_s = out.procs.iter().map(|p| p.growth_bytes_s).sum();
        forecast_rate
    }
}

#[cfg(test)]
impl Recent {
    /// Gives each growing process of `g` (by its stated growth) the three samples before
    /// `now` it would have had, where it has none yet (unit tests start mid-growth).
    pub(super) fn seed(&mut self, g: &GpuFacts, now: UnixMs) {
        for p in g.procs.iter().filter(|p| p.growth_bytes_s > 0.0) {
            let q = self.0.entry(p.key).or_default();
            if q.is_empty() {
                for back in (1..=3).rev() {
                    let b = p.bytes as f64 - p.growth_bytes_s * f64::from(back);
                    q.push_back((now - i64::from(back) * 1000, b.max(0.0) as u64));
                }
            }
        }
    }
}

/// Bytes/s over the window where the memory grew in at least two of the last three steps;
/// else 0.
fn rate(q: &VecDeque<(UnixMs, u64)>) -> f64 {
    let n = q.len();
    if n < 3 {
        return 0.0;
    }
    let grew = q
        .iter()
        .skip(n.saturating_sub(4))
        .zip(q.iter().skip(n.saturating_sub(3)))
        .filter(|(a, b)| b.1 > a.1)
        .count();
    let (Some(first), Some(last)) = (q.front(), q.back()) else {
        return 0.0;
    };
    let secs = (last.0 - first.0) as f64 / 1000.0;
    if grew < 2 || secs <= 0.0 || last.1 <= first.1 {
        return 0.0;
    }
    (last.1 - first.1) as f64 / secs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(v: &[u64]) -> VecDeque<(UnixMs, u64)> {
        v.iter()
            .enumerate()
            .map(|(i, b)| (i as i64 * 1000, *b))
            .collect()
    }

    #[test]
    fn a_jump_is_not_growth_a_steady_climb_is() {
        let g = 1u64 << 30;
        // 0 → 40 GiB in one sample, then flat: a load.
        assert_eq!(rate(&q(&[0, 0, 40 * g, 40 * g, 40 * g])), 0.0);
        assert_eq!(rate(&q(&[0, 0, 0, 40 * g])), 0.0, "the jump's own sample");
        // 1.5 GiB/s for five seconds.
        let climb: Vec<u64> = (0..6).map(|i| i * 3 * g / 2).collect();
        assert!((rate(&q(&climb)) - 1.5 * g as f64).abs() < 1.0);
        // Growth in two of the last three steps counts, over the whole window.
        assert!(rate(&q(&[0, 0, g, g, 2 * g, 3 * g])) > 0.0);
        assert_eq!(rate(&q(&[0, g])), 0.0, "too few samples");
    }
}
