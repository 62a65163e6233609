//! Leak detection: pure code over one memory series at a time, `now` passed in.
//!
//! For each series (a process on a GPU, or a GPU's memory that no process accounts for) the
//! detector keeps the last [`LeakSettings::window_s`] seconds and asks, at every sample:
//!
//! 1. **Growth run** — since the last significant drop (a free of more than
//!    [`LeakSettings::drop_tolerance_mib`]), has memory grown by at least
//!    [`LeakSettings::min_growth_mib`]?
//! 2. **Spread** — split the time from the run's first increase to now into four quarters: did
//!    memory grow in at least three of them, the last one among them (still growing)? A warm-up (a few quick steps)
//!    or one big step then a plateau fails this; a steady or stepwise leak passes.
//! 3. **Duration** — has the run grown for at least [`LeakSettings::min_duration_s`]?
//! 4. **Rate** — is the Theil–Sen slope of the run (median of pairwise slopes, robust to single
//!    jumps) at least [`LeakSettings::min_rate_mib_per_min`]?
//!
//! All four start an episode. It ends when memory has not grown for
//! [`LeakSettings::quiet_s`] (growth stopped), or drops by more than the drop tolerance (freed).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::model::UnixMs;

/// Sensitivity of the detector (also part of the settings file).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeakSettings {
    /// Slowest growth that counts as a leak (MiB/min, more than 0, at most 16 PiB).
    pub min_rate_mib_per_min: f64,
    /// Least total growth before a leak is flagged (MiB, more than 0, at most 16 PiB).
    pub min_growth_mib: f64,
    /// Shortest time the growth must have lasted (s, more than 0, at most a day, at most
    /// the window).
    pub min_duration_s: f64,
    /// How much history each series keeps for the decision (s, more than 0, at most a day).
    pub window_s: f64,
    /// A leak ends after this long without growth (s, more than 0, at most a day).
    pub quiet_s: f64,
    /// A fall larger than this is a free: it resets the growth run and ends an episode
    /// (MiB, 0 – 16 PiB).
    pub drop_tolerance_mib: f64,
}

impl Default for LeakSettings {
    fn default() -> Self {
        Self {
            min_rate_mib_per_min: 30.0,
            min_growth_mib: 192.0,
            min_duration_s: 12.0,
            window_s: 600.0,
            quiet_s: 90.0,
            drop_tolerance_mib: 64.0,
        }
    }
}

/// Longest leak duration, window or quiet time (seconds): one day.
pub const MAX_LEAK_SECONDS: f64 = 86_400.0;

impl LeakSettings {
    /// Problems with the values, as sentences (empty when valid).
    pub fn problems(&self) -> Vec<String> {
        self.problems_at().into_iter().map(|(_, m)| m).collect()
    }

    /// Problems with the values, each as (key in the `[leaks]` table, sentence). MiB values
    /// range up to [`crate::rules::model::MAX_MIB`], times up to [`MAX_LEAK_SECONDS`].
    pub fn problems_at(&self) -> Vec<(&'static str, String)> {
        let max_mib = crate::rules::model::MAX_MIB;
        let mut v = Vec::new();
        let pos = [
            (
                "min_rate_mib_per_min",
                self.min_rate_mib_per_min,
                "minimum rate",
                max_mib,
                " MiB/min",
            ),
            (
                "min_growth_mib",
                self.min_growth_mib,
                "minimum growth",
                max_mib,
                " MiB",
            ),
            (
                "min_duration_s",
                self.min_duration_s,
                "minimum duration",
                MAX_LEAK_SECONDS,
                " s",
            ),
            (
                "window_s",
                self.window_s,
                "observation window",
                MAX_LEAK_SECONDS,
                " s",
            ),
            (
                "quiet_s",
                self.quiet_s,
                "quiet time",
                MAX_LEAK_SECONDS,
                " s",
            ),
        ];
        for (key, x, name, max, unit) in pos {
            if !(x.is_finite() && x > 0.0 && x <= max) {
                v.push((
                    key,
                    format!("the leak {name} must be more than 0 and at most {max}{unit}"),
                ));
            }
        }
        let d = self.drop_tolerance_mib;
        if !(d.is_finite() && (0.0..=max_mib).contains(&d)) {
            v.push((
                "drop_tolerance_mib",
                format!("the leak drop tolerance must be from 0 to {max_mib} MiB"),
            ));
        }
        if self.window_s < self.min_duration_s {
            v.push((
                "window_s",
                "the leak observation window must be at least the minimum duration".into(),
            ));
        }
        v
    }
}

/// A change of leak state in one series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Transition {
    /// Growth became a leak.
    Started {
        /// When the growth run began (its first increase).
        since_ms: UnixMs,
        /// Estimated rate.
        rate_mib_per_min: f64,
    },
    /// The leak stopped (no growth for the quiet time, or memory was freed).
    Ended {
        /// Rate over the whole episode.
        rate_mib_per_min: f64,
        /// Memory gained from the run's start to its peak.
        grown_mib: f64,
    },
}

/// The current leak of a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    /// First increase of the growth run.
    pub since_ms: UnixMs,
    /// When it was flagged.
    pub flagged_ms: UnixMs,
    /// Memory at the run's start.
    pub base_mib: f64,
    /// Highest memory in the episode.
    pub peak_mib: f64,
    /// Latest rate estimate.
    pub rate_mib_per_min: f64,
    /// Last time memory grew.
    pub last_growth_ms: UnixMs,
}

impl Episode {
    /// Memory gained since the leak began.
    pub fn grown_mib(&self) -> f64 {
        self.peak_mib - self.base_mib
    }
}

/// The detector state of one series.
#[derive(Debug, Clone, Default)]
pub struct LeakTracker {
    points: VecDeque<(UnixMs, f64)>,
    run_start: usize,
    episode: Option<Episode>,
    scratch: Vec<f64>,
}

/// Theil–Sen slope (per ms) of at most 32 evenly chosen points of `pts`.
pub fn theil_sen(pts: &[(UnixMs, f64)], scratch: &mut Vec<f64>) -> Option<f64> {
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len().min(32);
    let pick = |i: usize| pts[i * (pts.len() - 1) / (n - 1)];
    scratch.clear();
    for i in 0..n {
        let (ti, vi) = pick(i);
        for j in i + 1..n {
            let (tj, vj) = pick(j);
            if tj > ti {
                scratch.push((vj - vi) / (tj - ti) as f64);
            }
        }
    }
    if scratch.is_empty() {
        return None;
    }
    let mid = scratch.len() / 2;
    let (_, m, _) = scratch.select_nth_unstable_by(mid, f64::total_cmp);
    Some(*m)
}

impl LeakTracker {
    /// The episode in progress, if the series is leaking.
    pub fn episode(&self) -> Option<&Episode> {
        self.episode.as_ref()
    }

    /// Takes the sample `mib` at `now` and says whether a leak started or ended.
    pub fn update(&mut self, now: UnixMs, mib: f64, s: &LeakSettings) -> Option<Transition> {
        if self.points.back().is_some_and(|(t, _)| *t >= now) || !mib.is_finite() {
            return None;
        }
        let window_ms = (s.window_s * 1000.0) as i64;
        while self
            .points
            .front()
            .is_some_and(|(t, _)| *t < now - window_ms)
        {
            self.points.pop_front();
            self.run_start = self.run_start.saturating_sub(1);
        }
        self.points.push_back((now, mib));
        let last = self.points.len() - 1;
        // A free: memory fell clearly below the run's running peak → a new run starts here.
        let run_peak = self
            .points
            .range(self.run_start..last)
            .map(|p| p.1)
            .fold(f64::MIN, f64::max);
        let freed = last > self.run_start && mib < run_peak - s.drop_tolerance_mib;
        if freed {
            self.run_start = last;
        }
        if let Some(ep) = self.episode.as_mut() {
            if mib > ep.peak_mib {
                ep.peak_mib = mib;
                ep.last_growth_ms = now;
            }
            let quiet = now - ep.last_growth_ms >= (s.quiet_s * 1000.0) as i64;
            if freed || quiet {
                let ep = *ep;
                // Growth must start afresh before another episode.
                self.run_start = last;
                let span_min = (ep.last_growth_ms - ep.since_ms).max(1) as f64 / 60_000.0;
                self.episode = None;
                return Some(Transition::Ended {
                    rate_mib_per_min: ep.grown_mib() / span_min,
                    grown_mib: ep.grown_mib(),
                });
            }
            let run: Vec<(UnixMs, f64)> = self.points.range(self.run_start..).copied().collect();
            if let Some(r) = theil_sen(&run, &mut self.scratch) {
                ep.rate_mib_per_min = r * 60_000.0;
            }
            return None;
        }
        self.evaluate(now, s)
    }

    fn evaluate(&mut self, now: UnixMs, s: &LeakSettings) -> Option<Transition> {
        let run = self.points.range(self.run_start..);
        let base = self.points.get(self.run_start)?.1;
        let cur = self.points.back()?.1;
        if cur - base < s.min_growth_mib {
            return None;
        }
        // Times at which memory grew.
        let mut first_inc = None;
        let mut prev = None;
        let mut incs: Vec<UnixMs> = Vec::new();
        for &(t, v) in run {
            if let Some(p) = prev {
                if v > p {
                    first_inc.get_or_insert(t);
                    incs.push(t);
                }
            }
            prev = Some(v);
        }
        let first = first_inc?;
        // The growth run starts just before its first increase.
        let start = self
            .points
            .range(self.run_start..)
            .take_while(|(t, _)| *t < first)
            .last()
            .map_or(first, |(t, _)| *t);
        let span = now - start;
        if (span as f64) < s.min_duration_s * 1000.0 {
            return None;
        }
        let quarter = (span as f64 / 4.0).max(1.0);
        let mut hit = [false; 4];
        for t in &incs {
            let q = (((t - start) as f64 / quarter) as usize).min(3);
            hit[q] = true;
        }
        // Growing in three of the four quarters, one of them the last: still growing.
        let spread = hit.iter().filter(|h| **h).count() >= 3 && hit[3];
        if !spread {
            return None;
        }
        let run: Vec<(UnixMs, f64)> = self.points.range(self.run_start..).copied().collect();
        let rate = theil_sen(&run, &mut self.scratch)? * 60_000.0;
        if rate < s.min_rate_mib_per_min {
            return None;
        }
        let peak = run.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        self.episode = Some(Episode {
            since_ms: start,
            flagged_ms: now,
            base_mib: base,
            peak_mib: peak,
            rate_mib_per_min: rate,
            last_growth_ms: *incs.last().unwrap_or(&now),
        });
        Some(Transition::Started {
            since_ms: start,
            rate_mib_per_min: rate,
        })
    }
}

/// Minutes until `free_mib` is used up at `rate_mib_per_min` (None when not growing).
pub fn time_to_full_min(free_mib: f64, rate_mib_per_min: f64) -> Option<f64> {
    (rate_mib_per_min > 0.0 && free_mib.is_finite()).then(|| free_mib.max(0.0) / rate_mib_per_min)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory in MiB at second `t` of each shape.
    #[derive(Debug, Clone, Copy)]
    enum Shape {
        Steady,
        Stepwise,
        SlowOverBaseline,
        CacheWarmup,
        Sawtooth,
        StepThenPlateau,
        Idle,
        NoisyFlat,
    }

    fn mib(shape: Shape, t: f64) -> f64 {
        let ctx = 500.0;
        match shape {
            Shape::Steady => ctx + 32.0 * t.floor(),
            Shape::Stepwise => ctx + 512.0 * ((t / 15.0).floor() + 1.0),
            Shape::SlowOverBaseline => 40.0 * 1024.0 + 2.0 * t.floor(),
            // PyTorch's allocator: four iterations of growing batches, then flat.
            Shape::CacheWarmup => ctx + 6144.0 * ((t.floor() + 1.0).min(4.0) / 4.0),
            // Eight chunks over 5 s, free, 5 s pause (gpu_workload.py sawtooth).
            Shape::Sawtooth => {
                let ph = t % 10.0;
                if ph < 5.0 {
                    ctx + 512.0 * (ph / 0.625).floor()
                } else {
                    ctx
                }
            }
            Shape::StepThenPlateau => {
                if t < 30.0 {
                    ctx
                } else {
                    ctx + 20_000.0
                }
            }
            Shape::Idle => ctx + 8192.0,
            Shape::NoisyFlat => {
                ctx + 4096.0 + [0.0, 2.0, 0.0, 4.0, 2.0, 0.0, 6.0, 0.0][(t as usize) % 8]
            }
        }
    }

    fn first_flag(shape: Shape, seconds: u32, step_ms: i64) -> (Option<f64>, usize) {
        let s = LeakSettings::default();
        let mut tr = LeakTracker::default();
        let mut first = None;
        let mut starts = 0;
        let n = seconds as i64 * 1000 / step_ms;
        for i in 0..n {
            let t = i * step_ms;
            if let Some(Transition::Started { .. }) =
                tr.update(t, mib(shape, t as f64 / 1000.0), &s)
            {
                starts += 1;
                first.get_or_insert(t as f64 / 1000.0);
            }
        }
        (first, starts)
    }

    #[test]
    fn table_of_shapes() {
        // (shape, must flag, latency bound in s)
        let cases = [
            (Shape::Steady, true, 20.0),
            (Shape::Stepwise, true, 60.0),
            (Shape::SlowOverBaseline, true, 180.0),
            (Shape::CacheWarmup, false, 0.0),
            (Shape::Sawtooth, false, 0.0),
            (Shape::StepThenPlateau, false, 0.0),
            (Shape::Idle, false, 0.0),
            (Shape::NoisyFlat, false, 0.0),
        ];
        for step in [1000, 500] {
            for (shape, flag, bound) in cases {
                // Leaks over 10 min; non-leaks over one hour.
                let secs = if flag { 600 } else { 3600 };
                let (first, starts) = first_flag(shape, secs, step);
                if flag {
                    let t = first.unwrap_or_else(|| panic!("{shape:?} not flagged"));
                    assert!(
                        t <= bound,
                        "{shape:?} flagged after {t} s (bound {bound} s)"
                    );
                    assert_eq!(starts, 1, "{shape:?} one episode");
                } else {
                    assert_eq!(first, None, "{shape:?} falsely flagged (step {step} ms)");
                }
            }
        }
    }

    #[test]
    fn rate_estimates_are_close() {
        let s = LeakSettings::default();
        for (shape, rate) in [
            (Shape::Steady, 32.0 * 60.0),
            (Shape::Stepwise, 512.0 * 4.0),
            (Shape::SlowOverBaseline, 120.0),
        ] {
            let mut tr = LeakTracker::default();
            for i in 0..600 {
                tr.update(i * 1000, mib(shape, i as f64), &s);
            }
            let ep = tr.episode().expect("leaking");
            let err = (ep.rate_mib_per_min - rate).abs() / rate;
            assert!(
                err < 0.1,
                "{shape:?}: estimated {} MiB/min, real {rate}",
                ep.rate_mib_per_min
            );
        }
    }

    #[test]
    fn episode_ends_when_growth_stops_or_memory_is_freed() {
        let s = LeakSettings::default();
        let mut tr = LeakTracker::default();
        let mut ended = None;
        for i in 0..400 {
            let v = 500.0 + 32.0 * (i.min(120) as f64);
            if let Some(Transition::Ended { grown_mib, .. }) = tr.update(i * 1000, v, &s) {
                ended = Some((i, grown_mib));
            }
        }
        let (i, grown) = ended.expect("ended");
        assert!((120 + 90..=120 + 92).contains(&i), "ended at {i} s");
        assert!((grown - 32.0 * 120.0).abs() < 1.0);
        let mut tr = LeakTracker::default();
        let mut freed_at = None;
        for i in 0..200 {
            let v = if i < 100 {
                500.0 + 32.0 * i as f64
            } else {
                500.0
            };
            if let Some(Transition::Ended { .. }) = tr.update(i * 1000, v, &s) {
                freed_at = Some(i);
            }
        }
        assert_eq!(freed_at, Some(100));
        assert_eq!(time_to_full_min(600.0, 60.0), Some(10.0));
        assert_eq!(time_to_full_min(600.0, 0.0), None);
        assert!(
            LeakSettings {
                min_rate_mib_per_min: -1.0,
                ..LeakSettings::default()
            }
            .problems()
            .len()
                == 1
        );
    }
}
