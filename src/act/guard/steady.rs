//! Growth the guard acts on: a process counts as growing when its memory grew in at least
//! two of its last three samples, at the rate of its last few seconds. A model load that
//! takes its memory in one jump, a warm-up step, a burst that stops, are not extrapolated into
//! "full in 1 s" (seen on an H100: a job loading 40 GiB at once looked like a grower filling
//! the GPU). Nor is a climb back to a level the process held within the last
//! [`PEAK_KEPT_MS`], while its GPU has room for the rest of it (with the restore margin): an
//! inference server that takes 6 GiB for a few seconds every two minutes and gives it back is
//! not a job filling its GPU; past its earlier peak, or once the GPU lacks the room, it
//! counts again. The forecast's own rate is kept for the floor (`floor_free_mib`): under it,
//! any growth the forecast sees makes the guard act at once.

use std::collections::VecDeque;

use super::facts::GpuFacts;
use crate::model::history::ProcSeriesKey;
use crate::model::{FastMap, UnixMs};

/// Seconds of samples kept per process.
const WINDOW_MS: UnixMs = 6_000;

/// How long a process's highest memory is remembered: a climb back to it within this long
/// is a return to a level it held, not growth (while its GPU has room for it).
const PEAK_KEPT_MS: UnixMs = 30 * 60_000;

/// Each process's recent samples (time, bytes) and its peak.
#[derive(Debug, Default)]
pub(super) struct Recent {
    samples: FastMap<ProcSeriesKey, VecDeque<(UnixMs, u64)>>,
    peaks: FastMap<ProcSeriesKey, Peak>,
}

/// The most a process held (within [`PEAK_KEPT_MS`]), and the least it held since.
#[derive(Debug, Clone, Copy)]
struct Peak {
    bytes: u64,
    at: UnixMs,
    low_since: u64,
}

impl Peak {
    fn at(bytes: u64, at: UnixMs) -> Self {
        Self {
            bytes,
            at,
            low_since: bytes,
        }
    }

    /// What is left of a climb from `bytes` back to this peak (a sixty-fourth above it: the
    /// same climb is sampled at other moments), once the process came down from the peak by
    /// at least a sixteenth of it; `None` when it did not come down, or is past the peak.
    fn climb_left(&self, bytes: u64) -> Option<u64> {
        let came_down = self.bytes - self.low_since.min(self.bytes) >= self.bytes / 16;
        let ceiling = self.bytes.saturating_add(self.bytes / 64);
        (came_down && self.bytes > 0 && bytes <= ceiling).then(|| ceiling - bytes)
    }

    /// Takes in a sample: a new peak at or above this one, else a new low since it.
    fn take(&mut self, bytes: u64, now: UnixMs) {
        if bytes >= self.bytes {
            *self = Self::at(bytes, now);
        } else {
            self.low_since = self.low_since.min(bytes);
        }
    }
}

impl Recent {
    /// Takes in `g`'s samples and sets each process's growth in `g` (and the GPU's, their
    /// sum) as the guard counts it; returns the forecast's GPU rate, as `g` had it.
    pub(super) fn steady(&mut self, g: &mut GpuFacts, now: UnixMs) -> f64 {
        let running = |k: &ProcSeriesKey| g.proc(k).is_some_and(|p| p.parked.is_none());
        self.samples.retain(|k, _| running(k));
        self.peaks.retain(|k, _| running(k));
        let forecast_rate = g.growth_bytes_s;
        // The room climbs back to earlier peaks may take, each taking its share.
        let mut room = g
            .free_bytes
            .saturating_sub(crate::act::park::checks::room_margin(g.total_bytes));
        let out = g;
        for p in out.procs.iter_mut() {
            if p.parked.is_some() {
                // Parked, or being parked or resumed: it does not grow now.
                p.growth_bytes_s = 0.0;
                continue;
            }
            let q = self.samples.entry(p.key).or_default();
            if q.back().is_none_or(|(t, _)| *t < now) {
                q.push_back((now, p.bytes));
            }
            while q.front().is_some_and(|(t, _)| now - t > WINDOW_MS) {
                q.pop_front();
            }
            p.growth_bytes_s = rate(q);
            let peak = self.peaks.entry(p.key).or_insert(Peak::at(p.bytes, now));
            if now - peak.at > PEAK_KEPT_MS {
                *peak = Peak::at(p.bytes, now);
            }
            if let Some(left) = peak.climb_left(p.bytes).filter(|l| *l <= room) {
                if p.growth_bytes_s > 0.0 {
                    p.growth_bytes_s = 0.0;
                    room -= left;
                }
            }
            peak.take(p.bytes, now);
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
            let q = self.samples.entry(p.key).or_default();
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
