//! Leak detection: pure code over one memory series at a time, `now` passed in.
//!
//! For each series (a process on a GPU, or a GPU's memory that no process accounts for) the
//! detector keeps the last [`LeakSettings::window_s`] seconds and reports two things:
//!
//! **Growing** ([`LeakTracker::growing`]), at once: since the current growth began, memory
//! has made new highs by at least half the minimum growth, at least at the minimum rate, and
//! its last new high is recent (the settle time, or twice the longest pause between its new
//! highs). It drives the OOM forecast and the rules; it says nothing about a leak yet: a
//! model being loaded grows too.
//!
//! **A leak** (a [`Transition::Started`] episode) is growth that keeps its shape past what a
//! load does. Two shapes:
//!
//! *A growth run* — memory growing without a free (a steady or stepwise leak):
//! 1. the run begins at the last significant drop (a free of more than
//!    [`LeakSettings::drop_tolerance_mib`]), at the first new high after
//!    [`LeakSettings::flat_s`] without one (a late leak after minutes of flat training is
//!    judged from its own start, not diluted by the flat minutes), or when a burst levels off
//!    (below); it is judged from its *onset*, the last point at its lowest level;
//! 2. it has grown by at least [`LeakSettings::min_growth_mib`] — half that when it never fell
//!    by more than [`JITTER_MIB`] (a clean staircase is told from noise sooner);
//! 3. **spread**: split the time from the first increase to now into four quarters; memory
//!    grew in at least three of them, the last one among them (still growing) — for two
//!    equal steps in a start-up phase (below), the first and the last;
//! 4. it has grown for at least [`LeakSettings::min_duration_s`], at a Theil–Sen slope
//!    (median of pairwise slopes, robust to single jumps) of at least
//!    [`LeakSettings::min_rate_mib_per_min`];
//! 5. **not a burst**: growth at a load's pace — a Theil–Sen slope of at least
//!    [`LeakSettings::burst_rate_mib_per_min`] (a sharded model load, a dataset moved to the
//!    GPU, a checkpoint reloaded: GiBs in seconds to tens of seconds), or, where PyTorch's
//!    companion reports the allocator, live tensors whose cache grows more than twice as much
//!    (new shapes: a growing batch) — is a leak only once it has gone on for
//!    [`LeakSettings::burst_s`]. A burst of at least [`BURST_MIN_MIB`] (or a shape-driven
//!    growth) that levels off (no new high for the settle time, nor twice its longest pause)
//!    is no part of any later run: a leak that follows a load is judged from the load's end.
//!
//! *A rising floor* — a sawtooth that frees every cycle but keeps a little more each time
//! (a training loop that appends to a list every step). Each free opens a trough; its lowest
//! point is the floor of that cycle. At least [`FLOOR_TROUGHS`] troughs in a row each above the
//! one before, rising by the minimum growth over the minimum duration at the minimum rate,
//! start an episode (the trough being made counts as soon as the free shows it). Frees do not
//! end it; a floor that falls back, or no higher floor for the quiet time, does.
//!
//! **Start-up.** A series born while vramwarden watches ([`LeakTracker::born_at`]) is in a
//! start-up phase until it levels off (after its first rise, no growth for
//! [`LeakSettings::settle_s`], nor for twice the longest pause between the ramp's rises so far;
//! then the ramp is no part of any run) or [`LeakSettings::startup_s`] has passed. During it, a
//! growth run is judged only on its *regular tail*: the newest increases (after the process's
//! first [`BIRTH_MS`]) whose sizes stay within a factor 1.5 either way of each other, at least
//! [`REGULAR_STEPS`] of them (two when they are equal within [`EQUAL_STEPS`]) — a leak
//! allocates the same amount again and again, a warm-up takes uneven or ever larger steps. Equal shards of a model load are regular too: the burst
//! rule above keeps them from being called a leak.
//!
//! An episode of a growth run ends when memory has not grown for [`LeakSettings::quiet_s`]
//! (growth stopped), or drops by more than the drop tolerance (freed).
//!
//! Measured on every public H200 trace set (`tests/leak_traces.rs`, `tests/leak_heldout.rs`)
//! and on synthetic loads, late and stepwise leaks (`tests/leak_shapes.rs`).

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
    /// A new process's start-up ramp (model load, optimizer state, the caching allocator
    /// meeting new sizes) is judged only once it has levelled off, or after this long (s, more
    /// than 0, at most a day). Regular growth (many equal steps) is judged at once.
    pub startup_s: f64,
    /// A start-up ramp or a burst has levelled off after this long without growth (s, more
    /// than 0, at most a day).
    pub settle_s: f64,
    /// Growth at least this fast is a load's pace (a model, a dataset, a checkpoint moved onto
    /// the GPU): it is called a leak only once it has gone on for [`LeakSettings::burst_s`]
    /// (MiB/min, more than 0, at most 16 PiB).
    pub burst_rate_mib_per_min: f64,
    /// How long growth at a load's pace must go on before it is a leak (s, more than 0, at
    /// most a day).
    pub burst_s: f64,
    /// After this long without a new high, the next growth is judged on its own (a late leak
    /// after minutes of flat use) (s, more than 0, at most a day).
    pub flat_s: f64,
}

impl Default for LeakSettings {
    fn default() -> Self {
        Self {
            min_rate_mib_per_min: 30.0,
            min_growth_mib: 64.0,
            min_duration_s: 12.0,
            window_s: 600.0,
            quiet_s: 90.0,
            drop_tolerance_mib: 64.0,
            startup_s: 120.0,
            settle_s: 10.0,
            burst_rate_mib_per_min: 5120.0,
            burst_s: 60.0,
            flat_s: 60.0,
        }
    }
}

/// Longest leak duration, window or quiet time (seconds): one day.
pub const MAX_LEAK_SECONDS: f64 = 86_400.0;

/// A fall this small (MiB) does not break a clean staircase, and a point this close to the
/// run's lowest level is still before its onset.
pub const JITTER_MIB: f64 = 8.0;

/// A burst at a load's pace this large (MiB) that levels off is no part of a later run.
pub const BURST_MIN_MIB: f64 = 1024.0;

impl LeakSettings {
    /// Problems with the values, as sentences (empty when valid).
    pub fn problems(&self) -> Vec<String> {
        self.problems_at().into_iter().map(|(_, m)| m).collect()
    }

    /// Problems with the values, each as (key in the `[leaks]` table, sentence). MiB values
    /// range up to [`crate::model::MAX_MIB`], times up to [`MAX_LEAK_SECONDS`].
    pub fn problems_at(&self) -> Vec<(&'static str, String)> {
        let max_mib = crate::model::MAX_MIB;
        let day = MAX_LEAK_SECONDS;
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
                day,
                " s",
            ),
            ("window_s", self.window_s, "observation window", day, " s"),
            ("quiet_s", self.quiet_s, "quiet time", day, " s"),
            ("startup_s", self.startup_s, "start-up time", day, " s"),
            ("settle_s", self.settle_s, "settling time", day, " s"),
            (
                "burst_rate_mib_per_min",
                self.burst_rate_mib_per_min,
                "burst rate",
                max_mib,
                " MiB/min",
            ),
            ("burst_s", self.burst_s, "burst time", day, " s"),
            ("flat_s", self.flat_s, "flat time", day, " s"),
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

/// What kind of growth an episode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EpisodeKind {
    /// Memory kept growing (steadily or in steps) without a free.
    #[default]
    Growth,
    /// A sawtooth whose troughs rise: each cycle frees, but keeps a little more.
    Floor,
}

/// The current leak of a series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    /// First increase of the growth run (for a rising floor: its first trough).
    pub since_ms: UnixMs,
    /// When it was flagged.
    pub flagged_ms: UnixMs,
    /// Memory at the run's start (for a rising floor: the first trough).
    pub base_mib: f64,
    /// Highest memory in the episode (for a rising floor: the highest trough).
    pub peak_mib: f64,
    /// Latest rate estimate.
    pub rate_mib_per_min: f64,
    /// Last time memory (or the floor) grew.
    pub last_growth_ms: UnixMs,
    /// Growth run or rising floor.
    pub kind: EpisodeKind,
}

impl Episode {
    /// Memory gained since the leak began.
    pub fn grown_mib(&self) -> f64 {
        self.peak_mib - self.base_mib
    }
}

/// A series growing now (not yet, or not, a leak): see [`LeakTracker::growing`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Growing {
    /// When the growth began (the last point at its lowest level).
    pub since_ms: UnixMs,
    /// Memory gained since then (MiB).
    pub grown_mib: f64,
    /// Gained over the time since it began (MiB/min).
    pub rate_mib_per_min: f64,
}

/// The detector state of one series.
#[derive(Debug, Clone, Default)]
pub struct LeakTracker {
    points: VecDeque<(UnixMs, f64)>,
    run_start: usize,
    /// Highest and lowest memory of the run, and when it was last at its lowest.
    run_high: f64,
    run_low: f64,
    low_ms: UnixMs,
    /// Last new high of the run, the longest pause between two of them, and whether the run
    /// has made one.
    last_high_ms: UnixMs,
    high_gap_ms: UnixMs,
    run_grew: bool,
    /// The allocator's reserved memory (companion) now and at the run's lowest point.
    cache_now: Option<f64>,
    cache_at_low: Option<f64>,
    growing: Option<Growing>,
    episode: Option<Episode>,
    scratch: Vec<f64>,
    /// When the series (its process) began; `None`: long ago, no start-up phase.
    born_ms: Option<UnixMs>,
    /// The start-up phase is over (levelled off, or timed out).
    settled: bool,
    /// Last time memory rose.
    last_rise_ms: UnixMs,
    /// The longest pause between two rises during the start-up phase.
    rise_gap_ms: UnixMs,
    /// Memory rose at least once since birth (a ramp that has not begun has not levelled off).
    rose: bool,
    /// The lowest point since the last free, while memory has not risen again.
    open_trough: Option<(UnixMs, f64)>,
    /// The troughs between frees (the sawtooth's lower envelope), oldest first.
    troughs: VecDeque<(UnixMs, f64)>,
}

/// Theil–Sen slope (per ms) of at most 32 evenly chosen points of `pts`.
pub fn theil_sen(pts: &[(UnixMs, f64)], scratch: &mut Vec<f64>) -> Option<f64> {
    theil_sen_of(pts.len(), |i| pts[i], scratch)
}

/// Theil–Sen slope (per ms) of at most 32 evenly chosen of the `len` points `at(0..len)`
/// (read in place: a window in a deque is not copied).
fn theil_sen_of(
    len: usize,
    at: impl Fn(usize) -> (UnixMs, f64),
    scratch: &mut Vec<f64>,
) -> Option<f64> {
    if len < 2 {
        return None;
    }
    let n = len.min(32);
    let pick = |i: usize| at(i * (len - 1) / (n - 1));
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

/// Troughs a rising floor needs before it is judged.
pub const FLOOR_TROUGHS: usize = 3;

fn ms(s: f64) -> i64 {
    (s * 1000.0) as i64
}

impl LeakTracker {
    /// A tracker for a series that began at `born_ms` (its process's start): a start-up ramp
    /// is not judged until it levels off (see [`LeakSettings::startup_s`]).
    pub fn born_at(born_ms: UnixMs) -> Self {
        Self {
            born_ms: Some(born_ms),
            ..Self::default()
        }
    }

    /// The episode in progress, if the series is leaking.
    pub fn episode(&self) -> Option<&Episode> {
        self.episode.as_ref()
    }

    /// The growth going on now, if any (whether or not it is a leak): for the forecast.
    pub fn growing(&self) -> Option<&Growing> {
        self.growing.as_ref()
    }

    /// Takes the sample `mib` at `now` and says whether a leak started or ended.
    pub fn update(&mut self, now: UnixMs, mib: f64, s: &LeakSettings) -> Option<Transition> {
        self.update_with_cache(now, mib, None, s)
    }

    /// Like [`LeakTracker::update`], for a series of live tensors (PyTorch's allocated
    /// memory) with the allocator's reserved memory beside it: tensors whose cache grows
    /// more than twice as much are meeting new shapes (a growing batch), judged as a burst.
    pub fn update_with_cache(
        &mut self,
        now: UnixMs,
        mib: f64,
        cache_mib: Option<f64>,
        s: &LeakSettings,
    ) -> Option<Transition> {
        if self.points.back().is_some_and(|(t, _)| *t >= now) || !mib.is_finite() {
            return None;
        }
        self.cache_now = cache_mib.filter(|c| c.is_finite());
        self.push(now, mib, s);
        let last = self.points.len() - 1;
        self.startup_phase(now, s);
        let (freed, new_trough) = self.track_run(now, mib, last, s);
        if self.episode.is_none() {
            self.level_off(now, last, s);
        }
        self.track_growing(now, s);
        if self.episode.is_some() {
            return self.continue_episode(now, mib, last, freed, new_trough, s);
        }
        // Young processes (the start-up time since birth) are judged on their regular growth
        // only, whether or not their ramp has levelled off yet.
        let in_startup = self.born_ms.is_some_and(|b| now - b < ms(s.startup_s));
        self.evaluate(now, s, in_startup)
            .or_else(|| self.evaluate_floor(now, s))
    }

    /// Appends the point, drops what left the window, notes rises for the start-up phase.
    fn push(&mut self, now: UnixMs, mib: f64, s: &LeakSettings) {
        let window_ms = ms(s.window_s);
        while self
            .points
            .front()
            .is_some_and(|(t, _)| *t < now - window_ms)
        {
            self.points.pop_front();
            self.run_start = self.run_start.saturating_sub(1);
        }
        while self
            .troughs
            .front()
            .is_some_and(|(t, _)| *t < now - window_ms)
        {
            self.troughs.pop_front();
        }
        let prev = self.points.back().map(|p| p.1);
        self.points.push_back((now, mib));
        if prev.is_none() {
            self.restart_run(0);
        }
        if prev.is_none_or(|p| mib > p) {
            if prev.is_some() && !self.settled {
                self.rise_gap_ms = self.rise_gap_ms.max(now - self.last_rise_ms);
                self.rose = true;
            }
            self.last_rise_ms = now;
        }
    }

    /// The start-up phase ends when the ramp levels off (then the ramp is no part of any
    /// run) or when it has lasted too long (then the growth is judged as it is). Levelling
    /// off is measured against the ramp's own pace: no rise for the settle time, nor for
    /// twice the longest pause between its rises so far (a ramp that steps every 11 s is
    /// not over after 10 quiet seconds).
    fn startup_phase(&mut self, now: UnixMs, s: &LeakSettings) {
        if let (Some(born), false) = (self.born_ms, self.settled) {
            let settle_ms = ms(s.settle_s).max(2 * self.rise_gap_ms);
            if self.rose && now - self.last_rise_ms >= settle_ms {
                self.settled = true;
                if self.episode.is_none() {
                    self.restart_run(self.points.len() - 1);
                }
            } else if now - born >= ms(s.startup_s) {
                self.settled = true;
            }
        }
    }

    /// A new growth run from point `at`.
    fn restart_run(&mut self, at: usize) {
        let Some(&(t, v)) = self.points.get(at) else {
            return;
        };
        self.run_start = at;
        self.run_high = v;
        self.run_low = v;
        self.low_ms = t;
        self.last_high_ms = t;
        self.high_gap_ms = 0;
        self.run_grew = false;
        self.cache_at_low = self.cache_now;
        self.growing = None;
    }

    /// Frees, new highs and the run's lowest level; the troughs of the lower envelope.
    /// Returns (freed, a trough was completed).
    fn track_run(&mut self, now: UnixMs, mib: f64, last: usize, s: &LeakSettings) -> (bool, bool) {
        // A free: memory fell clearly below the run's peak → a new run starts here, and the
        // lowest point after it is a trough of the lower envelope.
        let freed = last > self.run_start && mib < self.run_high - s.drop_tolerance_mib;
        let mut new_trough = false;
        if freed {
            self.restart_run(last);
            self.open_trough = Some((now, mib));
        } else if let Some((_, low)) = self.open_trough {
            if mib < low {
                self.open_trough = Some((now, mib));
            } else if mib > low {
                // Memory rises again: the trough is known.
                self.troughs.extend(self.open_trough.take());
                new_trough = true;
            }
        }
        if freed {
            return (true, new_trough);
        }
        if mib > self.run_high {
            // Growth after a long flat stretch is judged on its own (a late leak).
            if self.episode.is_none() && last > 0 && now - self.last_high_ms >= ms(s.flat_s) {
                self.restart_run(last - 1);
            }
            if self.run_grew {
                self.high_gap_ms = self.high_gap_ms.max(now - self.last_high_ms);
            }
            self.run_grew = true;
            self.run_high = mib;
            self.last_high_ms = now;
        } else if mib <= self.run_low {
            self.run_low = mib;
            self.low_ms = now;
            self.cache_at_low = self.cache_now;
        }
        (false, new_trough)
    }

    /// How long without a new high ends the run's growth: the settle time, or twice its
    /// longest pause between new highs.
    fn quiet_ms(&self, s: &LeakSettings) -> UnixMs {
        ms(s.settle_s).max(2 * self.high_gap_ms)
    }

    /// Live tensors whose allocator cache grew more than twice as much since the run's
    /// lowest point: the allocator meeting new shapes (a growing batch).
    fn shape_driven(&self) -> bool {
        match (self.cache_now, self.cache_at_low) {
            (Some(c), Some(c0)) => {
                let grown = self.run_high - self.run_low;
                grown > 0.0 && c - c0 > 2.0 * grown
            }
            _ => false,
        }
    }

    /// The run's growth so far at a load's pace: at least [`BURST_MIN_MIB`] at the burst rate
    /// (from its lowest point to its last new high), or shape-driven.
    fn bursty(&self, s: &LeakSettings) -> bool {
        let grown = self.run_high - self.run_low;
        let min = ((self.last_high_ms - self.low_ms).max(1000)) as f64 / 60_000.0;
        self.run_grew
            && ((grown >= BURST_MIN_MIB && grown / min >= s.burst_rate_mib_per_min)
                || (grown >= s.min_growth_mib && self.shape_driven()))
    }

    /// A burst (a load) that has levelled off is no part of any later run.
    fn level_off(&mut self, now: UnixMs, last: usize, s: &LeakSettings) {
        if self.bursty(s) && now - self.last_high_ms >= self.quiet_ms(s) {
            self.restart_run(last);
        }
    }

    /// The "growing" state: new highs lately, by half the minimum growth in all since the
    /// run's lowest point, at the minimum rate over the time since.
    fn track_growing(&mut self, now: UnixMs, s: &LeakSettings) {
        let grown = self.run_high - self.run_low;
        let recent = now - self.last_high_ms < self.quiet_ms(s);
        let minutes = ((now - self.low_ms).max(1000)) as f64 / 60_000.0;
        let rate = grown / minutes;
        self.growing = (self.run_grew
            && recent
            && grown >= s.min_growth_mib / 2.0
            && rate >= s.min_rate_mib_per_min)
            .then_some(Growing {
                since_ms: self.low_ms,
                grown_mib: grown,
                rate_mib_per_min: rate,
            });
    }

    /// The episode in progress: grows, ends (quiet, freed, a floor that fell back), or
    /// carries on with a fresh rate.
    fn continue_episode(
        &mut self,
        now: UnixMs,
        mib: f64,
        last: usize,
        freed: bool,
        new_trough: bool,
        s: &LeakSettings,
    ) -> Option<Transition> {
        let ep = self.episode.as_mut()?;
        let ended = match ep.kind {
            EpisodeKind::Growth => {
                if mib > ep.peak_mib {
                    ep.peak_mib = mib;
                    ep.last_growth_ms = now;
                }
                freed || now - ep.last_growth_ms >= ms(s.quiet_s)
            }
            EpisodeKind::Floor => {
                let mut fell = false;
                if new_trough {
                    if let Some(&(t, v)) = self.troughs.back() {
                        if v > ep.peak_mib {
                            ep.peak_mib = v;
                            ep.last_growth_ms = t;
                        }
                        fell = v < ep.peak_mib - s.drop_tolerance_mib;
                    }
                }
                fell || now - ep.last_growth_ms >= ms(s.quiet_s)
            }
        };
        if ended {
            let ep = *ep;
            // Growth must start afresh before another episode.
            self.restart_run(last);
            self.troughs.clear();
            let span_min = (ep.last_growth_ms - ep.since_ms).max(1) as f64 / 60_000.0;
            self.episode = None;
            return Some(Transition::Ended {
                rate_mib_per_min: ep.grown_mib() / span_min,
                grown_mib: ep.grown_mib(),
            });
        }
        let (kind, since) = (ep.kind, ep.since_ms);
        let (pts, from) = match kind {
            EpisodeKind::Growth => (&self.points, self.points.partition_point(|p| p.0 < since)),
            EpisodeKind::Floor => (&self.troughs, 0),
        };
        let rate = theil_sen_of(pts.len() - from, |i| pts[from + i], &mut self.scratch);
        if let Some(r) = rate {
            if let Some(ep) = self.episode.as_mut() {
                ep.rate_mib_per_min = r * 60_000.0;
            }
        }
        None
    }

    /// The run's onset: its last point at (within [`JITTER_MIB`] of) its lowest level.
    fn onset(&self) -> usize {
        let floor = self.run_low + JITTER_MIB;
        let mut i = self.points.len();
        while i > self.run_start + 1 {
            i -= 1;
            if self.points[i].1 <= floor {
                return i;
            }
        }
        self.run_start
    }
    /// Where the regular tail of the current run begins (the point before its first step):
    /// walking back from the newest increase, the increases after `after` whose sizes stay
    /// within a factor 2.25 of each other (1.5 either way of their middle) — a leak allocates
    /// the same amount again and again, a ramp takes ever larger or uneven steps. With the
    /// number of its increases; `None` unless the tail has [`REGULAR_STEPS`] increases (or two
    /// equal ones, see [`EQUAL_STEPS`]) spanning `span_ms`.
    fn regular_tail(&self, after: UnixMs, span_ms: i64) -> Option<(usize, usize)> {
        let pts = &self.points;
        let mut lo = f64::MAX;
        let mut hi = f64::MIN;
        let mut count = 0;
        let mut tail_start = None;
        let (mut first_t, mut last_t) = (0, 0);
        let mut i = pts.len();
        while i > self.run_start + 1 {
            i -= 1;
            let (t, v) = pts[i];
            let step = v - pts[i - 1].1;
            if step <= 0.0 {
                continue;
            }
            if t <= after || hi.max(step) > 2.25 * lo.min(step) {
                break;
            }
            lo = lo.min(step);
            hi = hi.max(step);
            count += 1;
            if count == 1 {
                last_t = t;
            }
            first_t = t;
            tail_start = Some(i - 1);
        }
        // Two steps suffice when they are equal (within [`EQUAL_STEPS`]): a leak in big steps
        // is judged at its second step after the birth, a warm-up's doubling steps are not.
        let enough = count >= REGULAR_STEPS || (count == 2 && hi <= EQUAL_STEPS * lo);
        (enough && last_t - first_t >= span_ms).then_some((tail_start?, count))
    }

    /// A sawtooth whose troughs keep rising: the last [`FLOOR_TROUGHS`] or more troughs each
    /// above the one before, by at least the minimum growth in all, at the minimum rate.
    fn evaluate_floor(&mut self, now: UnixMs, s: &LeakSettings) -> Option<Transition> {
        // The trough being made now counts too: a free shows where the floor is at once.
        let troughs: Vec<(UnixMs, f64)> = self
            .troughs
            .iter()
            .copied()
            .chain(self.open_trough)
            .collect();
        let n = troughs.len();
        if n < FLOOR_TROUGHS {
            return None;
        }
        // The rising tail of the troughs.
        let mut first = n - 1;
        while first > 0 && troughs[first - 1].1 < troughs[first].1 {
            first -= 1;
        }
        let rising: Vec<(UnixMs, f64)> = troughs[first..].to_vec();
        if rising.len() < FLOOR_TROUGHS {
            return None;
        }
        let (t0, v0) = rising[0];
        let (t1, v1) = rising[rising.len() - 1];
        if v1 - v0 < s.min_growth_mib || ((t1 - t0) as f64) < s.min_duration_s * 1000.0 {
            return None;
        }
        let rate = theil_sen(&rising, &mut self.scratch)? * 60_000.0;
        if rate < s.min_rate_mib_per_min {
            return None;
        }
        self.episode = Some(Episode {
            since_ms: t0,
            flagged_ms: now,
            base_mib: v0,
            peak_mib: v1,
            rate_mib_per_min: rate,
            last_growth_ms: t1,
            kind: EpisodeKind::Floor,
        });
        Some(Transition::Started {
            since_ms: t0,
            rate_mib_per_min: rate,
        })
    }

    fn evaluate(&mut self, now: UnixMs, s: &LeakSettings, in_startup: bool) -> Option<Transition> {
        // Cheap exits first: too little growth, or no new high lately (not growing).
        if !self.run_grew
            || self.run_high - self.run_low < s.min_growth_mib / 2.0
            || now - self.last_high_ms >= self.quiet_ms(s)
        {
            return None;
        }
        // During start-up only the regular tail of the run counts (a ramp's uneven steps, the
        // model load before a leak's even ones, are cut off); else the run from its onset.
        let (run_start, steps) = if in_startup {
            let after = self.born_ms.unwrap_or(UnixMs::MIN).saturating_add(BIRTH_MS);
            self.regular_tail(after, ms(s.min_duration_s) / 2)?
        } else {
            (self.onset(), usize::MAX)
        };
        let base = self.points.get(run_start)?.1;
        let cur = self.points.back()?.1;
        // A run that never fell (beyond jitter) is a clean staircase: its growth is told from
        // noise sooner (half the minimum growth), which finds slow leaks over large models
        // earlier.
        let monotone = self
            .points
            .range(run_start..)
            .zip(self.points.range(run_start + 1..))
            .all(|(a, b)| b.1 >= a.1 - JITTER_MIB);
        let min_growth = if monotone {
            s.min_growth_mib / 2.0
        } else {
            s.min_growth_mib
        };
        if cur - base < min_growth {
            return None;
        }
        // In start-up the growth's time is counted from the run's start (the tail's steps are
        // judged for their regularity, the run for its duration), as before the tail.
        let spread_start = if in_startup {
            self.run_start
        } else {
            run_start
        };
        // Two equal steps have two quarters to grow in: the first and the last.
        let quarters = if steps == 2 { 2 } else { 3 };
        let (start, last_inc) = self.spread_from(spread_start, now, quarters, s)?;
        let run: Vec<(UnixMs, f64)> = self.points.range(run_start..).copied().collect();
        // A regular tail's rate is its growth over its time (a staircase's Theil–Sen slope is
        // 0 until its third step); a run's, the robust slope (a single jump does not count).
        let rate = if in_startup {
            (cur - base) * 60_000.0 / (now - start).max(1) as f64
        } else {
            theil_sen(&run, &mut self.scratch)? * 60_000.0
        };
        if rate < s.min_rate_mib_per_min {
            return None;
        }
        // Growth at a load's pace is a leak only once it has gone on longer than a load.
        let burst = rate >= s.burst_rate_mib_per_min || self.shape_driven();
        if burst && ((now - start) as f64) < s.burst_s * 1000.0 {
            return None;
        }
        let peak = run.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        self.episode = Some(Episode {
            since_ms: start,
            flagged_ms: now,
            base_mib: base,
            peak_mib: peak,
            rate_mib_per_min: rate,
            last_growth_ms: last_inc,
            kind: EpisodeKind::Growth,
        });
        self.growing = None;
        Some(Transition::Started {
            since_ms: start,
            rate_mib_per_min: rate,
        })
    }

    /// The growth's start (the point before its first increase after `run_start`) and its
    /// last increase, when it has lasted the minimum duration and grew in at least `quarters`
    /// of the four quarters of that time, the last one among them (still growing).
    fn spread_from(
        &self,
        run_start: usize,
        now: UnixMs,
        quarters: usize,
        s: &LeakSettings,
    ) -> Option<(UnixMs, UnixMs)> {
        let mut prev: Option<(UnixMs, f64)> = None;
        let mut start = None;
        let mut last_inc = now;
        let mut hit = [false; 4];
        let mut quarter = 1.0;
        for &(t, v) in self.points.range(run_start..) {
            if let Some((pt, pv)) = prev {
                if v > pv {
                    let st = *start.get_or_insert_with(|| {
                        quarter = ((now - pt) as f64 / 4.0).max(1.0);
                        pt
                    });
                    hit[(((t - st) as f64 / quarter) as usize).min(3)] = true;
                    last_inc = t;
                }
            }
            prev = Some((t, v));
        }
        let start = start?;
        if ((now - start) as f64) < s.min_duration_s * 1000.0 {
            return None;
        }
        let spread = hit.iter().filter(|h| **h).count() >= quarters && hit[3];
        spread.then_some((start, last_inc))
    }
}

/// Increases a growth needs to count as regular during a start-up phase …
pub const REGULAR_STEPS: usize = 3;

/// … or two, when the larger is at most this many times the smaller (a leak's equal steps).
pub const EQUAL_STEPS: f64 = 1.25;

/// The first seconds of a process (its CUDA context, the model load) are no part of the
/// regularity test.
pub const BIRTH_MS: UnixMs = 5_000;

/// Seconds until `free_bytes` of a GPU are used up at `rate_mib_per_min` (None when not
/// growing): the one time-to-full of the engine's forecast, the agent's API and metrics and
/// the window.
pub fn full_in_s(free_bytes: u64, rate_mib_per_min: f64) -> Option<f64> {
    let free_mib = free_bytes as f64 / crate::model::MIB as f64;
    (rate_mib_per_min > 0.0).then(|| free_mib / rate_mib_per_min * 60.0)
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
    fn a_start_up_ramp_is_not_a_leak_but_a_rising_floor_is() {
        let s = LeakSettings::default();
        // Batch size doubling every 5 s from a 0.9 GiB model, then flat (the warm-up trace).
        let ramp = |t: i64| -> f64 {
            let k = (t / 5_000).min(5) as i32;
            900.0 + 270.0 * (2f64.powi(k) - 1.0)
        };
        let mut tr = LeakTracker::born_at(0);
        for i in 0..600 {
            assert_eq!(tr.update(i * 500, ramp(i * 500), &s), None, "ramp at {i}");
        }
        // A slower ramp (`warmup --ramp 45`): a doubling every 11.25 s, pauses longer than
        // the settle time; the ramp is over only after twice its longest pause.
        let slow = |t: i64| -> f64 {
            let k = (t / 11_250).min(4) as i32;
            900.0 + 540.0 * (2f64.powi(k) - 1.0)
        };
        let mut tr = LeakTracker::born_at(0);
        for i in 0..600 {
            assert_eq!(
                tr.update(i * 500, slow(i * 500), &s),
                None,
                "slow ramp at {i}"
            );
        }
        // The same ramp in a process watched since long before (no start-up phase) grows at
        // a load's pace (8 GiB in 25 s): a burst, shown growing, never a leak.
        let mut old = LeakTracker::default();
        let mut growing = 0;
        for i in 0..600 {
            assert_eq!(old.update(i * 500, ramp(i * 500), &s), None, "burst at {i}");
            growing += usize::from(old.growing().is_some());
        }
        assert!(
            (40..=80).contains(&growing),
            "growing for {growing} samples"
        );
        // A steady leak from birth is regular: flagged quickly all the same (its growth is
        // judged from the end of the birth, 5 s, plus the minimum duration, 12 s).
        let mut tr = LeakTracker::born_at(0);
        let first = (0..120).find(|i| {
            matches!(
                tr.update(i * 1000, 600.0 + 32.0 * *i as f64, &s),
                Some(Transition::Started { .. })
            )
        });
        assert!(first.is_some_and(|i| i <= 18), "{first:?}");
        // A big first allocation (the model), then a leak of even 2 MiB steps: the model load
        // is cut off, the steps are judged during start-up.
        let mut tr = LeakTracker::born_at(0);
        let drip = |t: i64| {
            if t < 4_000 {
                500.0
            } else {
                41_000.0 + 2.0 * ((t - 4_000) / 1_000) as f64
            }
        };
        let first = (0..120).find(|i| {
            matches!(
                tr.update(i * 1000, drip(i * 1000), &s),
                Some(Transition::Started { .. })
            )
        });
        assert!(first.is_some_and(|i| i <= 30), "{first:?}");
        // 2 GiB taken and freed every 12 s, 96 MiB kept each cycle.
        let saw = |t: i64| -> f64 {
            let cycle = t / 12_000;
            let floor = 600.0 + 96.0 * cycle as f64;
            if t % 12_000 < 6_000 {
                floor + 2048.0
            } else {
                floor
            }
        };
        let mut tr = LeakTracker::born_at(0);
        let mut starts = 0;
        let mut first = None;
        for i in 0..360 {
            if let Some(Transition::Started {
                rate_mib_per_min, ..
            }) = tr.update(i * 1000, saw(i * 1000), &s)
            {
                starts += 1;
                first.get_or_insert((i, rate_mib_per_min));
            }
        }
        let (at, rate) = first.expect("rising floor flagged");
        assert!(at <= 40, "flagged at {at} s");
        assert!((rate - 480.0).abs() < 50.0, "rate {rate}");
        assert_eq!(starts, 1, "one episode through every free");
        assert_eq!(tr.episode().map(|e| e.kind), Some(EpisodeKind::Floor));
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
        assert_eq!(full_in_s(600 * crate::model::MIB, 60.0), Some(600.0));
        assert_eq!(full_in_s(600 * crate::model::MIB, 0.0), None);
        assert_eq!(full_in_s(600 * crate::model::MIB, -1.0), None);
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
