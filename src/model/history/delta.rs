//! A history's ticks after a given one, as plain data: what an agent sends a remote window
//! so a poll carries only what is new (see [`crate::link::wire`]), and how the window's own
//! history takes it in.
//!
//! Every series of the delta covers the same ticks as its timeline, as runs of equal values
//! (a process whose memory does not move costs one run however long the delta), [`NONE`]
//! where the series has no reading. [`History::append`] checks the whole delta before it
//! changes anything: run lengths must add up to the timeline (checked arithmetic, before any
//! value is stored), times must follow the history's last one and each other, and the number
//! of values is bounded.

use serde::{Deserialize, Serialize};

use super::{History, Metric, ProcSeriesKey, Series, NONE};
use crate::model::UnixMs;

/// Values of one series: `(value, how many ticks)` in tick order.
pub(crate) type Runs = Vec<(u32, u32)>;

/// Most ticks in one delta.
pub const MAX_DELTA_TICKS: usize = 4096;
/// Most GPUs a delta may name (device indices are below it).
const MAX_DELTA_DEVICES: usize = 64;
/// Most process series in one delta.
const MAX_DELTA_PROCESSES: usize = 16_384;
/// Most values (series × ticks) one delta may stand for.
pub const MAX_DELTA_VALUES: usize = 16 << 20;

/// The ticks of a history from `from_tick` on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HistoryDelta {
    /// The sender's tick of the first time (the next delta is asked after
    /// `from_tick + times.len()`).
    pub from_tick: u64,
    /// The time of each tick, strictly increasing.
    pub times: Vec<UnixMs>,
    /// Used memory (MiB) per GPU, indexed by GPU index.
    pub devices: Vec<Runs>,
    /// Memory no process accounts for (MiB) per GPU.
    pub ghosts: Vec<Runs>,
    /// Per GPU, one series per [`Metric`] in [`Metric::ALL`] order.
    pub metrics: Vec<Vec<Runs>>,
    /// Per process on a GPU, its memory (MiB).
    pub processes: Vec<(ProcSeriesKey, Runs)>,
    /// PyTorch's allocated and reserved memory (MiB) of processes whose companion answered.
    pub torch: Vec<(ProcSeriesKey, [Runs; 2])>,
}

/// Runs of `s` over `[t0, t1)`.
fn runs_of(s: &Series, t0: u64, t1: u64) -> Runs {
    let mut values = Vec::with_capacity((t1 - t0) as usize);
    s.values_at(t0..t1, &mut values);
    let mut out: Runs = Vec::new();
    for v in values {
        match out.last_mut() {
            Some((last, n)) if *last == v => *n += 1,
            _ => out.push((v, 1)),
        }
    }
    out
}

/// Checks that `runs` covers exactly `ticks` ticks (`what` names the series).
fn covers(what: &str, runs: &Runs, ticks: usize) -> Result<(), String> {
    let mut sum: usize = 0;
    for (_, n) in runs {
        sum = sum
            .checked_add(*n as usize)
            .filter(|s| *s <= ticks)
            .ok_or_else(|| format!("history: {what} covers more than its {ticks} ticks"))?;
    }
    if sum != ticks {
        return Err(format!(
            "history: {what} covers {sum} ticks, its timeline {ticks}"
        ));
    }
    Ok(())
}

/// Pushes `runs` into `s` from tick `first` on; [`NONE`] values are not stored (a series
/// starts at its first reading; gaps read as [`NONE`] anyway).
fn push_runs(s: &mut Series, first: u64, runs: &Runs) {
    let mut t = first;
    for (v, n) in runs {
        if *v != NONE {
            for k in 0..u64::from(*n) {
                s.push(t + k, *v);
            }
        }
        t += u64::from(*n);
    }
}

impl HistoryDelta {
    /// Number of ticks.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// True when it holds no tick.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The sender's tick after the last one of the delta.
    pub fn end_tick(&self) -> u64 {
        self.from_tick.saturating_add(self.times.len() as u64)
    }

    /// Number of series.
    pub fn series(&self) -> usize {
        self.devices.len()
            + self.ghosts.len()
            + self.metrics.iter().map(Vec::len).sum::<usize>()
            + self.processes.len()
            + 2 * self.torch.len()
    }

    /// Checks its shape: bounded counts, every series covering the timeline exactly, times
    /// strictly increasing and after `after` (the receiving history's newest time).
    ///
    /// # Errors
    /// A sentence naming the field.
    pub fn check(&self, after: Option<UnixMs>) -> Result<(), String> {
        self.check_counts()?;
        self.check_times(after)?;
        self.check_coverage()
    }

    /// Its ticks, series and values within their bounds.
    fn check_counts(&self) -> Result<(), String> {
        let ticks = self.times.len();
        if ticks > MAX_DELTA_TICKS {
            return Err(format!(
                "history: {ticks} ticks in one answer (at most {MAX_DELTA_TICKS})"
            ));
        }
        for (what, n, max) in [
            ("GPUs", self.devices.len(), MAX_DELTA_DEVICES),
            ("ghost series", self.ghosts.len(), MAX_DELTA_DEVICES),
            ("metric series", self.metrics.len(), MAX_DELTA_DEVICES),
            ("process series", self.processes.len(), MAX_DELTA_PROCESSES),
            ("PyTorch series", self.torch.len(), MAX_DELTA_PROCESSES),
        ] {
            if n > max {
                return Err(format!("history: {n} {what} (at most {max})"));
            }
        }
        if self.series().saturating_mul(ticks) > MAX_DELTA_VALUES {
            return Err(format!(
                "history: {} series × {ticks} ticks is more than {MAX_DELTA_VALUES} values",
                self.series()
            ));
        }
        Ok(())
    }

    /// Its times strictly increasing and after `after`.
    fn check_times(&self, after: Option<UnixMs>) -> Result<(), String> {
        let mut last = after;
        for t in &self.times {
            if last.is_some_and(|l| *t <= l) {
                return Err(format!(
                    "history: times go backwards ({t} ms after {} ms)",
                    last.unwrap_or_default()
                ));
            }
            last = Some(*t);
        }
        Ok(())
    }

    /// Every series covering the timeline exactly, and every GPU with all its metric series.
    fn check_coverage(&self) -> Result<(), String> {
        let ticks = self.times.len();
        for (i, r) in self.devices.iter().enumerate() {
            covers(&format!("GPU {i}'s memory"), r, ticks)?;
        }
        for (i, r) in self.ghosts.iter().enumerate() {
            covers(&format!("GPU {i}'s unattributed memory"), r, ticks)?;
        }
        for (i, m) in self.metrics.iter().enumerate() {
            if m.len() != Metric::COUNT {
                return Err(format!(
                    "history: GPU {i} has {} metric series (not {})",
                    m.len(),
                    Metric::COUNT
                ));
            }
            for r in m {
                covers(&format!("a metric of GPU {i}"), r, ticks)?;
            }
        }
        for (k, r) in &self.processes {
            covers(&format!("PID {}'s memory", k.0.pid), r, ticks)?;
        }
        for (k, [a, r]) in &self.torch {
            covers(&format!("PID {}'s PyTorch memory", k.0.pid), a, ticks)?;
            covers(&format!("PID {}'s PyTorch memory", k.0.pid), r, ticks)?;
        }
        Ok(())
    }
}

impl History {
    /// Its ticks from `since` on (from its oldest when `since` is older or past its end),
    /// at most `max_ticks` of them (and at most [`MAX_DELTA_TICKS`], fewer when there are
    /// so many series that [`MAX_DELTA_VALUES`] would be passed).
    pub fn delta_since(&self, since: u64, max_ticks: usize) -> HistoryDelta {
        let end = self.end_tick();
        let from = if since < self.base_tick || since > end {
            self.base_tick
        } else {
            since
        };
        let series =
            self.devices.len() * (2 + Metric::COUNT) + self.processes.len() + 2 * self.torch.len();
        let fit = MAX_DELTA_VALUES / series.max(1);
        let to = end.min(from + max_ticks.min(MAX_DELTA_TICKS).min(fit) as u64);
        let mut d = HistoryDelta {
            from_tick: from,
            times: (from..to).filter_map(|t| self.time_of(t)).collect(),
            ..HistoryDelta::default()
        };
        if from >= to {
            return d;
        }
        d.devices = self.devices.iter().map(|s| runs_of(s, from, to)).collect();
        d.ghosts = self.ghosts.iter().map(|s| runs_of(s, from, to)).collect();
        d.metrics = self
            .metrics
            .iter()
            .map(|m| m.iter().map(|s| runs_of(s, from, to)).collect())
            .collect();
        let live = |s: &Series| s.end_tick() > from && s.first_tick() < to;
        d.processes = self
            .processes
            .iter()
            .filter(|(_, s)| live(s))
            .map(|(k, s)| (*k, runs_of(s, from, to)))
            .collect();
        d.processes.sort_by_key(|(k, _)| *k);
        d.torch = self
            .torch
            .iter()
            .filter(|(_, [a, _])| live(a))
            .map(|(k, [a, r])| (*k, [runs_of(a, from, to), runs_of(r, from, to)]))
            .collect();
        d.torch.sort_by_key(|(k, _)| *k);
        d
    }

    /// Takes in `d` as its next ticks, after [`HistoryDelta::check`] against its newest
    /// time; nothing changes when the check fails. Old ticks beyond its capacity are dropped
    /// as [`History::push`] drops them.
    ///
    /// # Errors
    /// The check's sentence.
    pub fn append(&mut self, d: &HistoryDelta) -> Result<(), String> {
        d.check(self.times.back())?;
        if d.is_empty() {
            return Ok(());
        }
        let first = self.end_tick();
        let n = d.devices.len().max(d.ghosts.len()).max(d.metrics.len());
        if self.devices.len() < n {
            self.devices.resize_with(n, Series::default);
            self.ghosts.resize_with(n, Series::default);
            self.metrics.resize_with(n, Default::default);
        }
        for (s, r) in self.devices.iter_mut().zip(&d.devices) {
            push_runs(s, first, r);
        }
        for (s, r) in self.ghosts.iter_mut().zip(&d.ghosts) {
            push_runs(s, first, r);
        }
        for (m, rs) in self.metrics.iter_mut().zip(&d.metrics) {
            for (s, r) in m.iter_mut().zip(rs) {
                push_runs(s, first, r);
            }
        }
        for (k, r) in &d.processes {
            if r.iter().any(|(v, _)| *v != NONE) {
                push_runs(
                    self.processes.get_or_insert_with(*k, Default::default),
                    first,
                    r,
                );
            }
        }
        for (k, [a, r]) in &d.torch {
            if a.iter().any(|(v, _)| *v != NONE) {
                let [sa, sr] = self.torch.get_or_insert_with(*k, Default::default);
                push_runs(sa, first, a);
                push_runs(sr, first, r);
            }
        }
        for t in &d.times {
            self.times.push_back(*t);
            if self.times.len() > self.capacity {
                self.times.drop_front(1);
                self.base_tick += 1;
                if self.base_tick % super::CHUNK as u64 == 0 {
                    self.evict();
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSample, ProcessSample, Snapshot, MIB};

    fn snap(t: UnixMs, used: u64) -> Snapshot {
        Snapshot {
            taken_at_ms: t,
            devices: vec![DeviceSample {
                index: 0,
                memory_used_bytes: Some(used * MIB + 100 * MIB),
                temperature_c: Some(50),
                ..DeviceSample::default()
            }],
            processes: vec![ProcessSample {
                pid: 7,
                used_bytes: Some(used * MIB),
                ..ProcessSample::default()
            }],
        }
    }

    #[test]
    fn a_history_rebuilt_from_deltas_reads_as_the_original() {
        let mut a = History::new(300);
        let mut b = History::new(300);
        let mut since = 0;
        for i in 0..700 {
            a.push(&snap(1_000_000 + i * 1000, (i as u64 / 50) * 10));
            if i % 97 == 0 {
                let d = a.delta_since(since, 64);
                b.append(&d).expect("a good delta");
                since = d.end_tick();
                // Caught up in pages of at most 64 ticks.
                while since < a.end_tick() {
                    let d = a.delta_since(since, 64);
                    assert!(d.len() <= 64);
                    b.append(&d).expect("a good delta");
                    since = d.end_tick();
                }
            }
        }
        let d = a.delta_since(since, MAX_DELTA_TICKS);
        b.append(&d).expect("a good delta");
        assert_eq!(a.span(), b.span());
        let key = a.process_keys().next().copied().expect("a process");
        let (t0, t1) = (a.end_tick() - 250, a.end_tick());
        let (u0, u1) = (b.end_tick() - 250, b.end_tick());
        let va: Vec<u32> = a
            .process(&key)
            .expect("a")
            .values(t0, t1)
            .iter()
            .map(|x| x.1)
            .collect();
        let vb: Vec<u32> = b
            .process(&key)
            .expect("b")
            .values(u0, u1)
            .iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(va, vb);
        let da: Vec<u32> = a
            .device(0)
            .expect("a")
            .values(t0, t1)
            .iter()
            .map(|x| x.1)
            .collect();
        let db: Vec<u32> = b
            .device(0)
            .expect("b")
            .values(u0, u1)
            .iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(da, db);
        assert_eq!(
            a.metric(0, Metric::Temperature).and_then(Series::last),
            b.metric(0, Metric::Temperature).and_then(Series::last)
        );
    }

    #[test]
    fn bad_deltas_are_refused_and_change_nothing() {
        let mut a = History::new(300);
        for i in 0..10 {
            a.push(&snap(1_000_000 + i * 1000, 10));
        }
        let good = a.delta_since(0, 100);
        let mut b = History::new(300);
        b.append(&good).expect("good");
        // The same ticks again: times go backwards.
        let e = b.append(&good).expect_err("old times");
        assert!(e.contains("backwards"), "{e}");
        let mut long = a.delta_since(0, 100);
        long.processes[0].1 = vec![(5, u32::MAX), (5, u32::MAX)];
        let e = History::new(10).append(&long).expect_err("runs too long");
        assert!(e.contains("PID 7"), "{e}");
        let mut short = a.delta_since(0, 100);
        short.devices[0] = vec![(1, 3)];
        let e = History::new(10).append(&short).expect_err("runs too short");
        assert!(e.contains("GPU 0"), "{e}");
        assert_eq!(b.len(), 10, "nothing of a refused delta was taken");
    }
}
