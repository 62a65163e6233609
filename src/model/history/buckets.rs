//! The plots' cache: buckets of many series of one history on one grid, kept between frames.
//! A series is bucketed only where it holds values: a day shown whole, on a GPU that ran tens
//! of thousands of short jobs, keeps a bucket or two for each job, not the plot's width.

use std::collections::HashMap;

use super::{History, Series, SeriesId, NONE};

/// Min/max buckets of many series of one history on one bucket grid, kept between frames.
/// A history only grows at its end, so every bucket but the last computed one is final: each
/// frame recomputes that one and any new ones. Another history ([`History::id`]: a source
/// switch, a session opened, an import, an agent attached or left) or another grid (zoom,
/// pan, window) starts afresh, so a cached bucket never stands for another source's data.
#[derive(Debug, Clone, Default)]
pub struct BucketCache {
    /// (history id, first tick, ticks per bucket).
    grid: (u64, u64, u64),
    series: HashMap<SeriesId, Span<(u32, u32)>>,
    /// Each bucket's value at its last tick (the same instant for every series).
    at: HashMap<SeriesId, Span<u32>>,
}

/// A series' buckets from the first that can hold one of its values; the buckets before
/// `first` and after the last one kept hold nothing.
#[derive(Debug, Clone, Default)]
struct Span<T> {
    first: usize,
    values: Vec<T>,
}

/// The buckets of one series on a grid: [`Buckets::get`] is None where it holds nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Buckets<'a, T> {
    first: usize,
    values: &'a [T],
}

impl<'a, T> Buckets<'a, T> {
    /// Bucket `i`, None where the series holds nothing (before its first value, after its
    /// last).
    pub(crate) fn get(&self, i: usize) -> Option<&'a T> {
        self.values.get(i.checked_sub(self.first)?)
    }

    /// The buckets that may hold a value, each with its index.
    pub(crate) fn held(&self) -> impl ExactSizeIterator<Item = (usize, &'a T)> + 'a {
        let first = self.first;
        self.values
            .iter()
            .enumerate()
            .map(move |(k, v)| (first + k, v))
    }
}

/// The buckets of `per` ticks from `t0` (of `n`) that can hold a value of `series`: from the
/// one holding its first tick to the one holding its last.
fn held_range(series: &Series, t0: u64, per: u64, n: usize) -> (usize, usize) {
    let (a, b) = (series.first_tick(), series.end_tick());
    if b <= a || b <= t0 {
        return (0, 0);
    }
    let per = per.max(1);
    let first = usize::try_from(a.saturating_sub(t0) / per).unwrap_or(usize::MAX);
    let end = usize::try_from((b - 1 - t0) / per + 1).unwrap_or(usize::MAX);
    (first.min(n), end.min(n))
}

impl<T: Clone> Span<T> {
    /// Brings the span to the buckets `first..end`, keeping all but the last computed one
    /// when it starts at the same bucket; `fill(from, out)` appends the buckets `from..end`.
    fn refresh(&mut self, (first, end): (usize, usize), fill: impl FnOnce(usize, &mut Vec<T>)) {
        if self.first != first {
            self.first = first;
            self.values.clear();
        }
        let keep = self
            .values
            .len()
            .saturating_sub(1)
            .min(end.saturating_sub(first));
        self.values.truncate(keep);
        if first + keep < end {
            fill(first + keep, &mut self.values);
        }
    }

    fn view(&self) -> Buckets<'_, T> {
        Buckets {
            first: self.first,
            values: &self.values,
        }
    }
}

impl BucketCache {
    fn on_grid(&mut self, history: &History, t0: u64, per: u64) {
        let grid = (history.id(), t0, per);
        if self.grid != grid {
            self.grid = grid;
            self.series.clear();
            self.at.clear();
        }
    }

    /// The `n` buckets of `per` ticks from `t0` of `series`, one of `history`'s: each one's
    /// lowest and highest value.
    pub(crate) fn get(
        &mut self,
        history: &History,
        id: SeriesId,
        series: &Series,
        t0: u64,
        per: u64,
        n: usize,
    ) -> Buckets<'_, (u32, u32)> {
        self.on_grid(history, t0, per);
        held_buckets(
            &mut self.series,
            id,
            series,
            (t0, per, n),
            |from, end, out| {
                // Written in place, after the buckets kept (no vector of its own each frame).
                let kept = out.len();
                out.resize(kept + (end - from), (NONE, 0u32));
                series.bucket_minmax(t0 + from as u64 * per, per, &mut out[kept..]);
            },
        )
    }

    /// Each of the `n` buckets of `per` ticks from `t0` of `series`, one of `history`'s, as
    /// its value at the bucket's instant ([`History::bucket_instant`]): the same tick for
    /// every series, so the values of a GPU's processes and its unattributed memory add up
    /// to its total in every bucket.
    #[cfg(feature = "gui")]
    pub(crate) fn get_at(
        &mut self,
        history: &History,
        id: SeriesId,
        series: &Series,
        t0: u64,
        per: u64,
        n: usize,
    ) -> Buckets<'_, u32> {
        self.on_grid(history, t0, per);
        held_buckets(&mut self.at, id, series, (t0, per, n), |from, end, out| {
            let instants = (from..end).map(|i| history.bucket_instant(t0, per, i));
            series.values_at(instants, out);
        })
    }
}

/// The buckets of `series` (named `id` in `spans`) on the grid `(t0, per, n)`, brought up to
/// date: `fill(from, end, out)` appends the buckets `from..end`.
fn held_buckets<'c, T: Clone + Default>(
    spans: &'c mut HashMap<SeriesId, Span<T>>,
    id: SeriesId,
    series: &Series,
    (t0, per, n): (u64, u64, usize),
    fill: impl FnOnce(usize, usize, &mut Vec<T>),
) -> Buckets<'c, T> {
    let span = spans.entry(id).or_default();
    let range = held_range(series, t0, per, n);
    span.refresh(range, |from, out| fill(from, range.1, out));
    span.view()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{ProcInfo, ProcessSample, Snapshot, MIB};

    /// Sample `i`: one GPU; job `j` runs from sample 13j for 9 samples, one in 4 of them
    /// back 300 samples later, with memory that moves each sample.
    fn sample(i: u64) -> Snapshot {
        let mut processes = Vec::new();
        for j in i.saturating_sub(400) / 13..=i / 13 {
            let (start, back) = (13 * j, 13 * j + 300);
            if (start..start + 9).contains(&i) || (j % 4 == 0 && (back..back + 9).contains(&i)) {
                processes.push(ProcessSample {
                    pid: 1000 + j as u32,
                    used_bytes: Some((100 + (i * 7 + j) % 50) * MIB),
                    info: Some(Arc::new(ProcInfo {
                        start_time_ms: 1,
                        ..ProcInfo::default()
                    })),
                    ..ProcessSample::default()
                });
            }
        }
        super::super::tests::one_gpu_sample(i, processes)
    }

    /// As samples arrive (and the history drops its oldest chunks), the cached buckets of
    /// every process, short jobs and jobs back later among them, read as buckets made afresh
    /// over the whole grid, on a grid of the whole history and one of its last minutes; and
    /// the cache keeps a few buckets per short job, not the grid's width.
    #[test]
    fn cached_buckets_of_short_jobs_read_as_fresh_ones() {
        let mut h = History::new(1500);
        let (mut whole, mut recent) = (BucketCache::default(), BucketCache::default());
        for i in 0..2400u64 {
            h.push(&sample(i));
            if i % 37 != 36 {
                continue;
            }
            let now = 1000 * i as i64;
            for (cache, from) in [(&mut whole, 0), (&mut recent, now - 400_000)] {
                let (t0, per, n) = h.buckets(from, now, 300);
                let keys: Vec<super::super::ProcSeriesKey> = h.process_keys().copied().collect();
                for k in keys {
                    let s = h.process(&k).expect("listed");
                    let mut fresh = vec![(NONE, 0); n];
                    s.bucket_minmax(t0, per, &mut fresh);
                    let cached = cache.get(&h, SeriesId::Process(k), s, t0, per, n);
                    let read: Vec<_> = (0..n)
                        .map(|b| *cached.get(b).unwrap_or(&(NONE, 0)))
                        .collect();
                    assert_eq!(read, fresh, "sample {i}, from {from}, {k:?}");
                    assert!(cached.held().len() <= 2 * (s.len() / per as usize + 2));
                    #[cfg(feature = "gui")]
                    {
                        let mut fresh_at = Vec::new();
                        s.values_at((0..n).map(|b| h.bucket_instant(t0, per, b)), &mut fresh_at);
                        let at = cache.get_at(&h, SeriesId::Process(k), s, t0, per, n);
                        let read: Vec<_> = (0..n).map(|b| *at.get(b).unwrap_or(&NONE)).collect();
                        assert_eq!(read, fresh_at, "sample {i}, from {from}, {k:?} at");
                    }
                }
            }
        }
        assert!(h.evictions() > 0);
    }
}
