//! Leak detection: pure code over one memory series at a time, `now` passed in.
//!
//! **One model: a leak keeps growing after a load would have stopped.** Each series (a
//! process on a GPU, or a GPU's memory that no process accounts for) is cut at its change
//! points — a free (a fall of more than [`LeakSettings::drop_tolerance_mib`]), a flat stretch
//! ([`LeakSettings::flat_s`]), a growth that levels off — into *runs*. Every run that grows is
//! **growing** at once ([`LeakTracker::growing`]; it feeds the OOM forecast at its recent pace,
//! see [`LeakTracker::forecast_pace`]). Whether it is a **leak** is read from its shape, never
//! from its pace:
//!
//! - growth that **slows and stops** — a model load, a warm-up, an autotuner, a cache filling,
//!   a batch that grows then levels — is over once it has had no new high for its settle time
//!   ([`LeakSettings::settle_s`], or twice its own longest pause); a run that grew by a load's
//!   size ([`LeakSettings::load_mib`]) and stopped is no part of any later run, so a leak that
//!   follows a load is judged from the load's end;
//! - growth that **keeps its pace** is a leak: it has grown by the minimum growth at the
//!   minimum rate (Theil–Sen slope, robust to single jumps), still grows, grew in at least three
//!   of the four quarters of its time, and has gone on for `(min_duration_s + load_s · g / (g +
//!   load_mib)) / k²` — a small growth cannot be a load and is judged after the minimum
//!   duration, a growth the size of a load must outlast a load (up to [`LeakSettings::load_s`]
//!   longer), and a growth that slows must go on longer still: `k` is the share of its pace it
//!   kept over its recent window (its settle time, twice its longest pause, or its newest
//!   third). The time needed rises smoothly with size and slowing: no pace or size flips the
//!   verdict;
//! - a **rising floor** under spikes (a sawtooth, evaluations, checkpoints that free but keep a
//!   little more each cycle) is read from the troughs between frees: at least
//!   [`ShapeConstants::floor_troughs`] troughs (the level before the first spike counts) each
//!   higher than the one before by a like amount, by the minimum growth over the minimum
//!   duration at the minimum rate — for a young process still starting up, the troughs
//!   between frees only: the level before its first spike is its birth (an autotuner frees
//!   each try's workspace while its start-up keeps growing);
//! - **a young process** (born while watched, [`LeakTracker::born_at`]) is judged, for its first
//!   [`LeakSettings::startup_s`] or until its start-up ramp levels off, on the *regular tail*
//!   of its growth only: its newest increases (after its first [`ShapeConstants::birth_s`])
//!   whose sizes stay within [`ShapeConstants::regular_factor`] of each other, at least
//!   [`ShapeConstants::regular_steps`] of them (two when equal within
//!   [`ShapeConstants::equal_factor`]) — a leak allocates the same amount again and again, a
//!   warm-up takes uneven or ever larger steps.
//!
//! An episode of a growth run ends when memory has not grown for [`LeakSettings::quiet_s`], or
//! drops by more than the drop tolerance (freed); a floor's, when a trough falls back or no
//! higher one comes for the quiet time. Where PyTorch's companion reports the allocator, live
//! tensors are judged, and tensors whose cache grows more than twice as much (new shapes: a
//! growing batch) must go on for the full load time.
//!
//! Every threshold moved ±30 % one at a time over every trace set: `docs/leaks.md`
//! (`tests/leak_sensitivity.rs`).

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
    /// A growth this large may be a load (a model, a dataset, a checkpoint moved onto the
    /// GPU): the larger a growth, the longer it must go on before it is called a leak (see
    /// [`LeakSettings::load_s`]; a growth of this size needs half the load time more) (MiB,
    /// more than 0, at most 16 PiB).
    pub load_mib: f64,
    /// How much longer than the minimum duration a growth far larger than
    /// [`LeakSettings::load_mib`] must go on before it is a leak — loads last seconds to tens
    /// of seconds; a growth of `g` MiB needs `min_duration_s + load_s · g / (g + load_mib)`
    /// (s, more than 0, at most a day). Files written before leaks v4 call it `burst_s`.
    #[serde(alias = "burst_s")]
    pub load_s: f64,
    /// After this long without a new high, the next growth is judged on its own (a late leak
    /// after minutes of flat use) (s, more than 0, at most a day).
    pub flat_s: f64,
    /// Read from settings files written before leaks v4, and ignored: the load pace it set is
    /// gone (a growth's size and shape decide, see [`LeakSettings::load_mib`]).
    #[serde(rename = "burst_rate_mib_per_min", skip_serializing)]
    pub legacy_burst_rate: Option<f64>,
    /// The shape model's fixed constants (in no settings file).
    #[serde(skip)]
    pub shape: ShapeConstants,
}

/// The shape model's fixed constants: not settings (no file holds them), gathered here so that
/// the sensitivity table (`docs/leaks.md`, `tests/leak_sensitivity.rs`) can move each of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShapeConstants {
    /// A fall this small (MiB) does not break a clean staircase, and a point this close to a
    /// run's lowest level is still before its onset.
    pub jitter_mib: f64,
    /// The steps of a regular growth (and the rises of a rising floor) stay within this factor
    /// of each other: a leak allocates the same amount again and again.
    pub regular_factor: f64,
    /// Two steps are enough to be regular when the larger is at most this factor of the
    /// smaller (a leak in big equal steps).
    pub equal_factor: f64,
    /// The first seconds of a process (its CUDA context, its model) are no part of the
    /// regularity test (s).
    pub birth_s: f64,
    /// Increases a regular growth needs in a start-up phase.
    pub regular_steps: usize,
    /// Troughs a rising floor needs (the level before its first spike counts).
    pub floor_troughs: usize,
    /// A growth at least this large (MiB) that stops (a load, a warm-up, a cache filled) is
    /// over: no part of any later run.
    pub stopped_mib: f64,
}

impl Default for ShapeConstants {
    fn default() -> Self {
        Self {
            jitter_mib: JITTER_MIB,
            regular_factor: REGULAR_FACTOR,
            equal_factor: EQUAL_STEPS,
            birth_s: BIRTH_MS as f64 / 1000.0,
            regular_steps: REGULAR_STEPS,
            floor_troughs: FLOOR_TROUGHS,
            stopped_mib: STOPPED_MIB,
        }
    }
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
            load_mib: 4096.0,
            load_s: 60.0,
            flat_s: 60.0,
            legacy_burst_rate: None,
            shape: ShapeConstants::default(),
        }
    }
}

/// Longest leak duration, window or quiet time (seconds): one day.
const MAX_LEAK_SECONDS: f64 = 86_400.0;

/// A fall this small (MiB) does not break a clean staircase, and a point this close to the
/// run's lowest level is still before its onset.
const JITTER_MIB: f64 = 8.0;

/// A growth this large (MiB) that stops is over (see [`ShapeConstants::stopped_mib`]).
const STOPPED_MIB: f64 = 1024.0;

/// The steps of a regular growth stay within this factor of each other (1.5 either way of
/// their middle).
const REGULAR_FACTOR: f64 = 2.25;

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
            ("load_mib", self.load_mib, "load size", max_mib, " MiB"),
            ("load_s", self.load_s, "load time", day, " s"),
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
        /// What the detector saw (for the leak list's "why").
        seen: Seen,
    },
    /// The leak stopped (no growth for the quiet time, or memory was freed).
    Ended {
        /// Rate over the whole episode.
        rate_mib_per_min: f64,
        /// Memory gained from the run's start to its peak.
        grown_mib: f64,
    },
}

/// What the detector saw when it called a leak: the shape, in figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Seen {
    /// A growth run or a rising floor.
    pub kind: EpisodeKind,
    /// Memory gained over the part judged (MiB).
    pub grown_mib: f64,
    /// How long that part lasted (s).
    pub over_s: f64,
    /// Its increases (a growth run) or its troughs (a rising floor).
    pub steps: usize,
    /// In how many of the four quarters of that time it grew (a growth run).
    pub quarters: usize,
    /// It was judged after a load or a start-up ramp that had stopped.
    pub after_load: bool,
}

impl Seen {
    /// Why this is a leak, in a sentence that starts with the shape's name: "steady growth:
    /// +1.2 GiB over 45 s at 1.6 GiB/min, 45 increases of ~27 MiB each, kept its pace and
    /// still growing".
    pub(crate) fn describe(&self, rate_mib_per_min: f64) -> String {
        let size = |m: f64| {
            if m.abs() >= 1024.0 {
                format!("{:.1} GiB", m / 1024.0)
            } else {
                format!("{m:.0} MiB")
            }
        };
        let rate = format!("{}/min", size(rate_mib_per_min));
        match self.kind {
            EpisodeKind::Floor => format!(
                "rising floor: {} troughs between frees, each higher than the one before, +{} over {:.0} s at {rate} (a loop that keeps a little more each cycle)",
                self.steps,
                size(self.grown_mib),
                self.over_s
            ),
            EpisodeKind::Growth => {
                let name = if self.steps <= 6 {
                    "growth in like steps"
                } else {
                    "steady growth"
                };
                let after = if self.after_load {
                    ", after a load or warm-up that had stopped"
                } else {
                    ""
                };
                format!(
                    "{name}: +{} over {:.0} s at {rate}, {} increases of ~{} each, kept its pace and still growing{after}",
                    size(self.grown_mib),
                    self.over_s,
                    self.steps,
                    size(self.grown_mib / self.steps.max(1) as f64)
                )
            }
        }
    }
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
    pub(crate) fn grown_mib(&self) -> f64 {
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
    /// New highs the run has made.
    run_highs: u32,
    /// The allocator's reserved memory (companion) now and at the run's lowest point.
    cache_now: Option<f64>,
    cache_at_low: Option<f64>,
    growing: Option<Growing>,
    /// What the series adds to its GPU's forecast now: (likely, earliest), MiB/min.
    pace: Option<(f64, f64)>,
    episode: Option<Episode>,
    scratch: Vec<u64>,
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
    /// The current run began where a load or a start-up ramp levelled off.
    after_load: bool,
    /// The lowest point since the last free, while memory has not risen again.
    open_trough: Option<(UnixMs, f64)>,
    /// The troughs between frees (the sawtooth's lower envelope), oldest first.
    troughs: VecDeque<(UnixMs, f64)>,
    /// Counts the changes to `troughs`.
    troughs_changed: u64,
    /// The count of `troughs_changed` the rising floor's rate was last taken at, in the
    /// episode in progress: until the troughs change, the same slope.
    floor_rate_at: Option<u64>,
}

/// The most points a Theil–Sen slope is taken over (evenly chosen from longer series).
const THEIL_SEN_POINTS: usize = 32;

/// Theil–Sen slope (per ms) of at most 32 evenly chosen points of `pts`.
#[cfg(test)]
fn theil_sen(pts: &[(UnixMs, f64)], scratch: &mut Vec<u64>) -> Option<f64> {
    theil_sen_of(pts.len(), |i| pts[i], scratch)
}

/// Theil–Sen slope (per ms) of at most 32 evenly chosen of the `len` points `at(0..len)`
/// (read in place: a window in a deque is not copied).
fn theil_sen_of(
    len: usize,
    at: impl Fn(usize) -> (UnixMs, f64),
    scratch: &mut Vec<u64>,
) -> Option<f64> {
    if len < 2 {
        return None;
    }
    let n = len.min(THEIL_SEN_POINTS);
    // The chosen points, read once each (not once per pair).
    let mut picked = [(0, 0.0); THEIL_SEN_POINTS];
    for (i, p) in picked.iter_mut().enumerate().take(n) {
        *p = at(i * (len - 1) / (n - 1));
    }
    let picked = &picked[..n];
    // Every pair's slope, into a buffer that holds them all (no growth checks in the loop).
    scratch.resize(THEIL_SEN_POINTS * (THEIL_SEN_POINTS - 1) / 2, 0);
    let mut k = 0;
    for (i, &(ti, vi)) in picked.iter().enumerate() {
        for &(tj, vj) in &picked[i + 1..] {
            if tj > ti {
                if let Some(slot) = scratch.get_mut(k) {
                    *slot = total_order_key((vj - vi) / (tj - ti) as f64);
                }
                k += 1;
            }
        }
    }
    let slopes = scratch.get_mut(..k)?;
    if slopes.is_empty() {
        return None;
    }
    let mid = slopes.len() / 2;
    let (_, m, _) = slopes.select_nth_unstable(mid);
    Some(from_total_order_key(*m))
}

/// `x` as an integer whose order is `f64::total_cmp`'s (the same bit trick): slopes are
/// selected among as plain integers, and the median found is the same value.
fn total_order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    // Negative: every bit but the sign flipped (larger magnitudes sort lower); then the sign
    // bit flipped so that negatives sort below positives as unsigned integers.
    (bits ^ ((((bits as i64) >> 63) as u64) >> 1)) ^ (1 << 63)
}

/// The `f64` of a [`total_order_key`].
fn from_total_order_key(k: u64) -> f64 {
    let bits = k ^ (1 << 63);
    f64::from_bits(bits ^ ((((bits as i64) >> 63) as u64) >> 1))
}

/// Troughs a rising floor needs before it is judged.
const FLOOR_TROUGHS: usize = 3;

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

    /// What this series adds to its GPU's OOM forecast now, in MiB/min: `(likely, earliest)`.
    /// A leak adds its rate while it still grows; a growth not (yet) called a leak adds, at
    /// the earliest, its pace over its recent window (its settle time, or twice its longest
    /// pause), and likely that pace times the share it kept of its pace since it began: a
    /// load or a warm-up that slows and stops falls out of the likely figure as it slows, a
    /// steady growth counts in full from its first seconds. `None` when it adds nothing.
    pub(crate) fn forecast_pace(&self) -> Option<(f64, f64)> {
        self.pace
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
        let t = if self.episode.is_some() {
            self.continue_episode(now, mib, last, freed, new_trough, s)
        } else {
            // Young processes (the start-up time since birth) are judged on their regular
            // growth only, whether or not their ramp has levelled off yet.
            let in_startup = self.born_ms.is_some_and(|b| now - b < ms(s.startup_s));
            self.evaluate(now, s, in_startup)
                .or_else(|| self.evaluate_floor(now, s))
        };
        self.track_pace(now, s);
        t
    }

    /// The forecast's share of this series (see [`LeakTracker::forecast_pace`]).
    fn track_pace(&mut self, now: UnixMs, s: &LeakSettings) {
        let recent = self.recent_pace(now, s);
        self.pace = match (&self.episode, &self.growing) {
            // A leak counts while it still grows: a growth run within its settle time (or
            // twice its longest pause), a floor within half the quiet time of its last rise.
            (Some(ep), _) => {
                let alive = match ep.kind {
                    EpisodeKind::Growth => self.quiet_ms(s),
                    EpisodeKind::Floor => ms(s.quiet_s) / 2,
                };
                (now - ep.last_growth_ms < alive).then(|| {
                    let r = ep.rate_mib_per_min.max(0.0);
                    (r, r.max(recent))
                })
            }
            // A growth not (yet) a leak: at its recent pace, discounted as it slows (by the
            // share of its pace since it began that it kept): a load or a warm-up that slows
            // and stops falls out, a steady growth counts in full.
            // One or two steps are no pace yet (a pace is seen twice): they count at the
            // earliest only; so does a young process's start-up ramp in uneven steps (a
            // warm-up, judged once it levels off), unless its newest steps are regular.
            (None, Some(_)) if self.run_highs < 3 || self.uneven_start_up(s) => Some((0.0, recent)),
            (None, Some(g)) => {
                let kept = if g.rate_mib_per_min > 0.0 {
                    (recent / g.rate_mib_per_min).min(1.0)
                } else {
                    0.0
                };
                Some((recent * kept, recent))
            }
            (None, None) => None,
        };
    }

    /// The run's growth over its recent window (its settle time, or twice its longest pause
    /// between new highs; at most since its lowest point), MiB/min.
    fn recent_pace(&self, now: UnixMs, s: &LeakSettings) -> f64 {
        self.pace_over(now, self.quiet_ms(s))
    }

    /// How much of its pace a growth that began at `start` has kept (0.05 – 1): its pace over
    /// its recent window (the settle time, twice its longest pause, or its newest third) over
    /// its pace since its first increase (both leave out the step they start on, so a
    /// staircase keeps its pace).
    fn kept_pace(&self, start: UnixMs, now: UnixMs, s: &LeakSettings) -> f64 {
        let i = self.points.partition_point(|p| p.0 <= start);
        let (Some(&(t1, v1)), Some(&(_, cur))) = (self.points.get(i), self.points.back()) else {
            return 1.0;
        };
        if now - t1 < 1000 {
            return 1.0;
        }
        let pace = (cur - v1) * 60_000.0 / (now - t1) as f64;
        if pace <= 0.0 {
            return 0.05;
        }
        let w = self.quiet_ms(s).max((now - t1) / 3);
        (self.pace_over(now, w) / pace).clamp(0.05, 1.0)
    }

    /// The run's growth over the last `w` ms (at most since its lowest point), MiB/min.
    fn pace_over(&self, now: UnixMs, w: UnixMs) -> f64 {
        let w = w.min((now - self.low_ms).max(1000));
        let i = self.points.partition_point(|p| p.0 < now - w);
        let then = self
            .points
            .get(i)
            .map_or(self.run_low, |p| p.1)
            .max(self.run_low);
        let cur = self.points.back().map_or(then, |p| p.1);
        (cur - then).max(0.0) * 60_000.0 / w as f64
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
            self.troughs_changed += 1;
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

    /// When the first seconds of the process (its birth) end; `UnixMs::MIN` for a series
    /// watched since long before.
    fn after_birth(&self, s: &LeakSettings) -> UnixMs {
        self.born_ms
            .unwrap_or(UnixMs::MIN)
            .saturating_add(ms(s.shape.birth_s))
    }

    /// How long a growth of `grown` MiB must have gone on before it is a leak (s): the
    /// minimum duration, plus up to [`LeakSettings::load_s`] as it nears and passes a load's
    /// size; the full load time for a shape-driven growth.
    fn time_needed_s(&self, grown: f64, s: &LeakSettings) -> f64 {
        let grown = grown.max(0.0);
        let share = if self.shape_driven() {
            1.0
        } else {
            grown / (grown + s.load_mib)
        };
        s.min_duration_s + s.load_s * share
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
                    self.after_load = true;
                }
            } else if now - born >= ms(s.startup_s) {
                self.settled = true;
            }
        }
    }

    /// A process born while watched whose start-up ramp has not levelled off yet.
    fn starting_up(&self) -> bool {
        self.born_ms.is_some() && !self.settled
    }

    /// A young process still starting up whose growth has no regular tail (see
    /// [`LeakTracker::regular_tail`]): a ramp whose pace says nothing of what comes next.
    fn uneven_start_up(&self, s: &LeakSettings) -> bool {
        self.starting_up()
            && self
                .regular_tail(self.after_birth(s), ms(s.min_duration_s) / 2, &s.shape)
                .is_none()
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
        self.run_highs = 0;
        self.cache_at_low = self.cache_now;
        self.growing = None;
        self.after_load = false;
    }

    /// Frees, new highs and the run's lowest level; the troughs of the lower envelope.
    /// Returns (freed, a trough was completed).
    fn track_run(&mut self, now: UnixMs, mib: f64, last: usize, s: &LeakSettings) -> (bool, bool) {
        // A free: memory fell clearly below the run's peak → a new run starts here, and the
        // lowest point after it is a trough of the lower envelope.
        let freed = last > self.run_start && mib < self.run_high - s.drop_tolerance_mib;
        let mut new_trough = false;
        if freed {
            // The first free shows the level before its spike: the floor's first trough —
            // unless the process is still starting up: then that level is where it was born
            // (its context, before the model and the autotuner's tries), and what it gained
            // since is its start-up, not a loop's keep.
            if self.troughs.is_empty() && self.open_trough.is_none() && !self.starting_up() {
                self.troughs.push_back((self.low_ms, self.run_low));
                self.troughs_changed += 1;
            }
            self.restart_run(last);
            self.open_trough = Some((now, mib));
        } else if let Some((_, low)) = self.open_trough {
            if mib < low {
                self.open_trough = Some((now, mib));
            } else if mib > low {
                // Memory rises again: the trough is known.
                self.troughs.extend(self.open_trough.take());
                self.troughs_changed += 1;
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
            self.run_highs = self.run_highs.saturating_add(1);
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

    /// The run has grown as much as a load or a warm-up does
    /// ([`ShapeConstants::stopped_mib`]), or is shape-driven.
    fn load_sized(&self, s: &LeakSettings) -> bool {
        let grown = self.run_high - self.run_low;
        self.run_grew
            && (grown >= s.shape.stopped_mib || (grown >= s.min_growth_mib && self.shape_driven()))
    }

    /// A load-sized growth that has stopped (a load, a warm-up, a cache filled) is no part of
    /// any later run.
    fn level_off(&mut self, now: UnixMs, last: usize, s: &LeakSettings) {
        // A lone step has no pace of its own to stop at: it is over after the flat time (a
        // leak's next big step comes sooner).
        let wait = if self.high_gap_ms == 0 {
            ms(s.flat_s).max(self.quiet_ms(s))
        } else {
            self.quiet_ms(s)
        };
        if self.load_sized(s) && now - self.last_high_ms >= wait {
            self.restart_run(last);
            self.after_load = true;
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
            self.troughs_changed += 1;
            let span_min = (ep.last_growth_ms - ep.since_ms).max(1) as f64 / 60_000.0;
            self.episode = None;
            return Some(Transition::Ended {
                rate_mib_per_min: ep.grown_mib() / span_min,
                grown_mib: ep.grown_mib(),
            });
        }
        let (kind, since) = (ep.kind, ep.since_ms);
        if kind == EpisodeKind::Floor {
            // A floor's rate is taken over its troughs: unchanged until they change.
            if self.floor_rate_at == Some(self.troughs_changed) {
                return None;
            }
            self.floor_rate_at = Some(self.troughs_changed);
        }
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
    fn onset(&self, s: &LeakSettings) -> usize {
        let floor = self.run_low + s.shape.jitter_mib;
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
    fn regular_tail(
        &self,
        after: UnixMs,
        span_ms: i64,
        s: &ShapeConstants,
    ) -> Option<(usize, usize)> {
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
            if t <= after || hi.max(step) > s.regular_factor * lo.min(step) {
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
        let enough = count >= s.regular_steps || (count >= 2 && hi <= s.equal_factor * lo);
        (enough && last_t - first_t >= span_ms).then_some((tail_start?, count))
    }

    /// A sawtooth whose troughs keep rising: the last [`FLOOR_TROUGHS`] or more troughs each
    /// above the one before, by at least the minimum growth in all, at the minimum rate.
    fn evaluate_floor(&mut self, now: UnixMs, s: &LeakSettings) -> Option<Transition> {
        // The trough being made now counts too: a free shows where the floor is at once.
        let n = self.troughs.len() + usize::from(self.open_trough.is_some());
        let need = s.shape.floor_troughs.max(2);
        if n < need {
            return None;
        }
        // The troughs and the one being made, read in place.
        let (done, open) = (&self.troughs, self.open_trough);
        let trough = |i: usize| match (done.get(i), open) {
            (Some(t), _) => *t,
            (None, Some(t)) => t,
            (None, None) => (0, 0.0),
        };
        // The rising tail of the troughs whose rises are alike (a leak keeps the same amount
        // each cycle; a load before a sawtooth is one rise unlike the rest).
        let mut first = n - 1;
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        while first > 0 {
            let rise = trough(first).1 - trough(first - 1).1;
            if rise <= 0.0 || hi.max(rise) > s.shape.regular_factor * lo.min(rise) {
                break;
            }
            lo = lo.min(rise);
            hi = hi.max(rise);
            first -= 1;
        }
        let rising = n - first;
        if rising < need {
            return None;
        }
        let (t0, v0) = trough(first);
        let (t1, v1) = trough(n - 1);
        if v1 - v0 < s.min_growth_mib || ((t1 - t0) as f64) < s.min_duration_s * 1000.0 {
            return None;
        }
        let rate = theil_sen_of(rising, |i| trough(first + i), &mut self.scratch)? * 60_000.0;
        if rate < s.min_rate_mib_per_min {
            return None;
        }
        self.floor_rate_at = None;
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
            seen: Seen {
                kind: EpisodeKind::Floor,
                grown_mib: v1 - v0,
                over_s: (t1 - t0) as f64 / 1000.0,
                steps: rising,
                quarters: 0,
                after_load: false,
            },
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
            let after = self.after_birth(s);
            self.regular_tail(after, ms(s.min_duration_s) / 2, &s.shape)?
        } else {
            (self.onset(s), usize::MAX)
        };
        let base = self.points.get(run_start)?.1;
        let cur = self.points.back()?.1;
        if cur - base < self.min_growth_from(run_start, s) {
            return None;
        }
        // Two equal steps have two quarters to grow in: the first and the last.
        let quarters = if steps == 2 { 2 } else { 3 };
        let spread = self.spread_from(run_start, now, quarters, s)?;
        let start = spread.start;
        // A growth as large as a load must go on as long as a load may: the time it needs
        // rises smoothly with its size. A growth that slows must go on longer, in
        // proportion: its pace over its recent window against its pace since it began.
        // (Checked before the rate: both must pass, and this one is far cheaper.)
        let elapsed = (now - start).max(1) as f64;
        let kept = self.kept_pace(start, now, s);
        if elapsed < self.time_needed_s(cur - base, s) * 1000.0 / (kept * kept) {
            return None;
        }
        let rate = self.run_rate(run_start, start, now, in_startup)?;
        if rate < s.min_rate_mib_per_min {
            return None;
        }
        Some(self.start_growth(run_start, &spread, now, rate))
    }

    /// The growth a run from `run_start` needs to count: half the minimum where it never
    /// fell (beyond jitter) — a clean staircase is told from noise sooner, which finds slow
    /// leaks over large models earlier — else the minimum.
    fn min_growth_from(&self, run_start: usize, s: &LeakSettings) -> f64 {
        let monotone = self
            .points
            .range(run_start..)
            .zip(self.points.range(run_start + 1..))
            .all(|(a, b)| b.1 >= a.1 - s.shape.jitter_mib);
        if monotone {
            s.min_growth_mib / 2.0
        } else {
            s.min_growth_mib
        }
    }

    /// The run's rate (MiB/min) from `run_start` (its growth from `start`): a regular tail's
    /// is its growth over its time (a staircase's Theil–Sen slope is 0 until its third step);
    /// a run's, the robust slope (a single jump does not count), read in place.
    fn run_rate(
        &mut self,
        run_start: usize,
        start: UnixMs,
        now: UnixMs,
        in_startup: bool,
    ) -> Option<f64> {
        let pts = &self.points;
        if in_startup {
            let (base, cur) = (pts.get(run_start)?.1, pts.back()?.1);
            return Some((cur - base) * 60_000.0 / (now - start).max(1) as f64);
        }
        let len = pts.len() - run_start;
        Some(theil_sen_of(len, |i| pts[run_start + i], &mut self.scratch)? * 60_000.0)
    }

    /// Flags the run from `run_start` as a growth episode, growing at `rate` since
    /// `spread`'s start, and says so.
    fn start_growth(
        &mut self,
        run_start: usize,
        spread: &Spread,
        now: UnixMs,
        rate: f64,
    ) -> Transition {
        let (start, last_inc) = (spread.start, spread.last_inc);
        let run = self.points.range(run_start..).map(|p| p.1);
        let base = self.points.get(run_start).map_or(0.0, |p| p.1);
        let cur = self.points.back().map_or(base, |p| p.1);
        let peak = run.fold(f64::MIN, f64::max);
        self.floor_rate_at = None;
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
        Transition::Started {
            since_ms: start,
            rate_mib_per_min: rate,
            seen: Seen {
                kind: EpisodeKind::Growth,
                grown_mib: cur - base,
                over_s: (now - start) as f64 / 1000.0,
                steps: spread.increases,
                quarters: spread.quarters,
                after_load: self.after_load,
            },
        }
    }

    /// The growth's start (the point before its first increase after `run_start`) and its
    /// last increase, when it has lasted the minimum duration, grew in at least `quarters` of
    /// the four quarters of that time and still grows (its last increase within its settle
    /// time or twice its longest pause).
    fn spread_from(
        &self,
        run_start: usize,
        now: UnixMs,
        quarters: usize,
        s: &LeakSettings,
    ) -> Option<Spread> {
        let mut prev: Option<(UnixMs, f64)> = None;
        let mut start = None;
        let mut last_inc = now;
        // Increases beyond jitter (the steps seen), and all of them (a slow drip's are small).
        let (mut increases, mut steps) = (0, 0);
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
                    increases += 1;
                    steps += usize::from(v - pv > s.shape.jitter_mib);
                }
            }
            prev = Some((t, v));
        }
        let start = start?;
        if ((now - start) as f64) < s.min_duration_s * 1000.0 {
            return None;
        }
        // Still growing: its last increase within its settle time (or twice its longest
        // pause): a staircase between two steps still grows.
        let grew_in = hit.iter().filter(|h| **h).count();
        let growing = now - last_inc < self.quiet_ms(s);
        (grew_in >= quarters && growing).then_some(Spread {
            start,
            last_inc,
            increases: if steps > 0 { steps } else { increases },
            quarters: grew_in,
        })
    }
}

/// How a growth spread over its time (see [`LeakTracker::spread_from`]).
struct Spread {
    /// The point before its first increase.
    start: UnixMs,
    /// Its last increase.
    last_inc: UnixMs,
    /// Its increases beyond jitter (all of them when none is).
    increases: usize,
    /// The quarters of its time it grew in.
    quarters: usize,
}

/// Increases a growth needs to count as regular during a start-up phase …
const REGULAR_STEPS: usize = 4;

/// … or two, when the larger is at most this many times the smaller (a leak's equal steps).
const EQUAL_STEPS: f64 = 1.25;

/// The first seconds of a process (its CUDA context, the model load) are no part of the
/// regularity test.
const BIRTH_MS: UnixMs = 5_000;

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
    use proptest::prelude::*;

    /// The Theil–Sen slope as first written: every pair of the chosen points read through
    /// `pts` again, the median chosen among the floats by `f64::total_cmp`.
    fn theil_sen_reference(pts: &[(UnixMs, f64)]) -> Option<f64> {
        let len = pts.len();
        if len < 2 {
            return None;
        }
        let n = len.min(32);
        let pick = |i: usize| pts[i * (len - 1) / (n - 1)];
        let mut slopes = Vec::new();
        for i in 0..n {
            let (ti, vi) = pick(i);
            for j in i + 1..n {
                let (tj, vj) = pick(j);
                if tj > ti {
                    slopes.push((vj - vi) / (tj - ti) as f64);
                }
            }
        }
        if slopes.is_empty() {
            return None;
        }
        let mid = slopes.len() / 2;
        let (_, m, _) = slopes.select_nth_unstable_by(mid, f64::total_cmp);
        Some(*m)
    }

    proptest! {
        /// The slope is the same value, bit for bit, as the first implementation's: series
        /// of 0 to 700 points (longer than the 32 chosen), with repeated times, negative,
        /// zero and equal slopes.
        #[test]
        fn theil_sen_equals_the_reference_bit_for_bit(
            steps in proptest::collection::vec((0i64..3_000, -5i32..6, 0u8..4), 0..700),
        ) {
            let mut t = 1_000;
            let mut v = 100.0;
            let pts: Vec<(UnixMs, f64)> = steps
                .iter()
                .map(|&(dt, dv, scale)| {
                    t += dt;
                    v += f64::from(dv) * [0.0, 0.5, 3.0, 1024.0][usize::from(scale)];
                    (t, v)
                })
                .collect();
            let mut scratch = Vec::new();
            let got = theil_sen(&pts, &mut scratch);
            let want = theil_sen_reference(&pts);
            prop_assert_eq!(got.map(f64::to_bits), want.map(f64::to_bits));
        }
    }

    #[test]
    fn total_order_keys_sort_as_total_cmp_and_give_the_value_back() {
        let xs = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            3.75,
            f64::INFINITY,
            f64::NAN,
        ];
        for a in xs {
            assert_eq!(
                from_total_order_key(total_order_key(a)).to_bits(),
                a.to_bits()
            );
            for b in xs {
                assert_eq!(
                    total_order_key(a).cmp(&total_order_key(b)),
                    a.total_cmp(&b),
                    "{a} against {b}"
                );
            }
        }
    }

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
            // 32 MiB/s: a growth this fast must outlast a load's share of its size.
            (Shape::Steady, true, 30.0),
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
        // A steady leak from birth is regular: flagged all the same, once it has outlasted
        // a load's share of its growth (from the end of the birth, 5 s).
        let mut tr = LeakTracker::born_at(0);
        let first = (0..120).find(|i| {
            matches!(
                tr.update(i * 1000, 600.0 + 32.0 * *i as f64, &s),
                Some(Transition::Started { .. })
            )
        });
        assert!(first.is_some_and(|i| i <= 30), "{first:?}");
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
    fn a_young_autotuner_that_frees_between_tries_is_no_rising_floor() {
        let s = LeakSettings::default();
        // cudnn.benchmark over six input shapes (v4 `autotune`, its NVML series from 5 s
        // after its start): each try's workspace is freed, the peaks rise, then flat. The
        // level before its first try is its birth, not a trough of a loop.
        let mut series = vec![520.0; 4];
        series.extend([724.0, 1336.0, 1538.0, 2010.0, 2010.0, 1488.0]);
        series.extend([2594.0; 3]);
        series.extend([2924.0; 3]);
        series.push(2032.0);
        series.extend([4008.0; 3]);
        series.push(2172.0);
        series.extend([4550.0; 5]);
        series.push(2032.0);
        series.extend([3568.0; 3]);
        series.extend([4780.0; 200]);
        let mut tr = LeakTracker::born_at(0);
        for (i, v) in series.iter().enumerate() {
            let t = 5_000 + i as i64 * 1000;
            assert_eq!(tr.update(t, *v, &s), None, "autotune at {t} ms");
        }
        // A young process whose loop begins once its start-up has levelled off: the level
        // before its first spike is a trough again (an eval every 20 s keeping 128 MiB).
        let eval = |t: i64| -> f64 {
            if t < 30_000 {
                return 2_000.0;
            }
            let k = (t - 30_000) / 20_000;
            let kept = 2_000.0 + 128.0 * k as f64;
            if (t - 30_000) % 20_000 < 3_000 {
                kept + 2048.0
            } else {
                kept + 128.0
            }
        };
        let mut tr = LeakTracker::born_at(0);
        let first = (5..200).find(|i| {
            matches!(
                tr.update(i * 1000, eval(i * 1000), &s),
                Some(Transition::Started { .. })
            )
        });
        assert!(first.is_some_and(|i| i <= 30 + 20 + 30), "{first:?}");
        assert_eq!(tr.episode().map(|e| e.kind), Some(EpisodeKind::Floor));
    }

    #[test]
    fn a_young_ramp_in_uneven_steps_counts_in_the_forecast_at_the_earliest_only() {
        let s = LeakSettings::default();
        // A warm-up in uneven jumps (v4 `warmup-jumps`, 573: 584 MiB, then +882, +342, +488,
        // +316, +834, +376, +652, +874, +542 over 36 s, then flat).
        let jumps = [
            (12, 1466.0),
            (13, 1808.0),
            (15, 2296.0),
            (24, 2612.0),
            (30, 3446.0),
            (35, 3822.0),
            (40, 4474.0),
            (42, 5348.0),
            (47, 5890.0),
        ];
        let warm = |t: i64| {
            jumps
                .iter()
                .rev()
                .find(|(at, _)| t >= *at)
                .map_or(584.0, |(_, v)| *v)
        };
        let mut tr = LeakTracker::born_at(0);
        let mut earliest = 0.0f64;
        for t in 5..120 {
            assert_eq!(tr.update(t * 1000, warm(t), &s), None, "warm-up at {t} s");
            let (likely, e) = tr.forecast_pace().unwrap_or((0.0, 0.0));
            assert_eq!(likely, 0.0, "likely pace at {t} s");
            earliest = earliest.max(e);
        }
        assert!(earliest > 1000.0, "earliest {earliest}");
        // A steady growth from birth is regular: it counts as likely before it is a leak.
        let mut tr = LeakTracker::born_at(0);
        let likely_at = (5..60).find(|t| {
            tr.update(t * 1000, 600.0 + 32.0 * *t as f64, &s);
            tr.episode().is_none() && tr.forecast_pace().is_some_and(|(l, _)| l > 1000.0)
        });
        assert!(likely_at.is_some_and(|t| t <= 15), "{likely_at:?}");
    }

    #[test]
    fn settings_written_before_leaks_v4_still_read() {
        let s: LeakSettings = toml::from_str(
            "burst_rate_mib_per_min = 5120.0\nburst_s = 50.0\nmin_growth_mib = 64.0\n",
        )
        .expect("an older file reads");
        assert_eq!(s.load_s, 50.0);
        assert_eq!(s.legacy_burst_rate, Some(5120.0));
        assert!(s.problems().is_empty());
        let back = toml::to_string(&s).expect("written");
        assert!(!back.contains("burst"), "{back}");
        assert!(back.contains("load_mib = 4096.0"), "{back}");
        assert!(toml::from_str::<LeakSettings>("no_such_key = 1\n").is_err());
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
