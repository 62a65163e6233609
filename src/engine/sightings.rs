//! A replay's process rows from where each process was seen ([`Sightings`]): when a
//! session is replayed in two halves at once ([`crate::engine::replay_halves`]), each half
//! notes, per process, the samples it was listed in and its peak; the two are joined, and the
//! rows are then derived once — the same rows, field for field, as
//! [`crate::engine::state::EngineState`] derives sample by sample (`tests/session.rs` holds the
//! two equal): the last sighting's readings, the exit at the next sample, the one-minute
//! change from the reading a minute before the last one, and each colour chosen as the engine
//! chose it when the process was first seen, from the rows as they stood then.

use crate::engine::state;
use crate::engine::view::ProcessRow;
use crate::model::history::{History, ProcSeriesKey, NONE};
use crate::model::sample_map::SampleMap;
use crate::model::{ProcessSample, Snapshot, UnixMs};
use crate::session::reader::SessionData;

/// Where one process (on one GPU) was seen, by sample index.
#[derive(Debug, Clone)]
pub(crate) struct Sighting {
    /// Its row as first seen (its facts, its first time), the rest filled in by [`rows`].
    row: ProcessRow,
    /// Runs of consecutive samples that list it: first and last index.
    runs: Vec<(usize, usize)>,
    /// The largest memory reading.
    peak: u64,
    /// The last sample with a memory reading.
    last_reading: Option<usize>,
}

/// Every process seen in a span of samples, in the order first seen.
pub(crate) type Sightings = SampleMap<ProcSeriesKey, Sighting>;

/// Notes that sample `i` (taken at `now`) lists `p`, at position `pos`.
pub(crate) fn saw(seen: &mut Sightings, pos: usize, i: usize, now: UnixMs, p: &ProcessSample) {
    let s = seen.at_mut(pos, (p.key(), p.device_index), |_| Sighting {
        row: ProcessRow::first_seen(p, now, crate::engine::state::UNCOLORED),
        runs: Vec::new(),
        peak: 0,
        last_reading: None,
    });
    match s.runs.last_mut() {
        Some(run) if run.1 + 1 == i => run.1 = i,
        _ => s.runs.push((i, i)),
    }
    if let Some(u) = p.used_bytes {
        s.peak = s.peak.max(u);
        s.last_reading = Some(i);
    }
}

/// Joins `later`, the sightings of the samples after those of `seen`.
pub(crate) fn join(seen: &mut Sightings, later: Sightings) {
    for (key, b) in later.into_entries() {
        let Some(a) = seen.get_mut(&key) else {
            seen.insert(key, b);
            continue;
        };
        let mut runs = b.runs.into_iter();
        if let (Some(last), Some(first)) = (a.runs.last_mut(), runs.as_slice().first()) {
            if last.1 + 1 == first.0 {
                last.1 = first.1;
                runs.next();
            }
        }
        a.runs.extend(runs);
        a.peak = a.peak.max(b.peak);
        a.last_reading = b.last_reading.or(a.last_reading);
    }
}

/// What a row needs from one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Need {
    /// The readings of its last sighting.
    Last,
    /// The memory of its last reading.
    Reading,
    /// The memory of its last reading a minute or more before that one.
    MinuteBefore,
}

/// The rows of `seen`, the sightings of every sample of `data` (`history` holds them all, one
/// tick per sample). None when a sample no longer decodes.
pub(crate) fn rows(
    seen: Sightings,
    data: &SessionData,
    history: &History,
) -> Option<SampleMap<ProcSeriesKey, ProcessRow>> {
    let time = |i: usize| history.time_of(i as u64);
    let n = history.len();
    let mut rows: Vec<ProcessRow> = Vec::with_capacity(seen.len());
    let mut runs: Vec<Vec<(usize, usize)>> = Vec::with_capacity(seen.len());
    let mut needs: Vec<(usize, Need, usize)> = Vec::new();
    for (key, s) in seen.into_entries() {
        let r = rows.len();
        let last = s.runs.last().map_or(0, |run| run.1);
        let mut row = s.row;
        row.peak_bytes = s.peak;
        row.last_seen_ms = time(last)?;
        row.exited_at_ms = if last + 1 < n { time(last + 1) } else { None };
        needs.push((last, Need::Last, r));
        if let Some(j) = s.last_reading {
            needs.push((j, Need::Reading, r));
            let before = history
                .tick_at(time(j)?.saturating_sub(60_000).saturating_add(1))
                .checked_sub(1);
            if let Some(t) = before.and_then(|t| last_reading_at_or_before(history, &key, t)) {
                needs.push((t, Need::MinuteBefore, r));
            }
        }
        rows.push(row);
        runs.push(s.runs);
    }
    let mut readings = vec![(None, None); rows.len()];
    fill_from_samples(data, &mut needs, &mut rows, &mut readings)?;
    for (row, (now, before)) in rows.iter_mut().zip(readings) {
        if let (Some(u), Some(old)) = (now, before) {
            row.delta_1m_bytes = Some(u as i64 - old as i64);
        }
        if row.exited_at_ms.is_some() {
            row.used_bytes = Some(0);
        }
    }
    Some(coloured(rows, &runs, &time))
}

/// The last tick at or before `t` at which process `key` has a memory reading.
fn last_reading_at_or_before(history: &History, key: &ProcSeriesKey, t: u64) -> Option<usize> {
    let series = history.process(key)?;
    let mut end = t + 1;
    while end > series.first_tick() {
        let from = end
            .saturating_sub(crate::model::history::CHUNK as u64)
            .max(series.first_tick());
        let values = series.values(from, end);
        if let Some((tick, _)) = values.iter().rev().find(|(_, v)| *v != NONE) {
            return usize::try_from(*tick).ok();
        }
        end = from;
    }
    None
}

/// Fills in what each row needs from the samples named in `needs` (each sample decoded once):
/// the last sighting's readings into `rows`, the memory of the last reading and of the one a
/// minute before into `readings`. None when a sample no longer decodes.
fn fill_from_samples(
    data: &SessionData,
    needs: &mut [(usize, Need, usize)],
    rows: &mut [ProcessRow],
    readings: &mut [(Option<u64>, Option<u64>)],
) -> Option<()> {
    needs.sort_unstable();
    let mut snap = Snapshot::default();
    let mut decoded = None;
    // Where each process is listed in the decoded sample (many rows may need one sample).
    let mut at: crate::model::FastMap<ProcSeriesKey, usize> = Default::default();
    for &(i, need, r) in needs.iter() {
        if decoded != Some(i) {
            if !data.snapshot_into(i, &mut snap) {
                return None;
            }
            snap.sanitize();
            decoded = Some(i);
            at.clear();
            let keys = snap.processes.iter().map(|p| (p.key(), p.device_index));
            at.extend(keys.enumerate().map(|(pos, k)| (k, pos)));
        }
        let row = &mut rows[r];
        let p = snap.processes.get(*at.get(&row.series_key())?)?;
        match need {
            Need::Last => row.take_readings(p),
            Need::Reading => readings[r].0 = p.used_bytes,
            Need::MinuteBefore => readings[r].1 = p.used_bytes,
        }
    }
    Some(())
}

/// The rows, in their order, each with the colour the engine gave it when it was first seen:
/// rows first seen at one moment are coloured one after another
/// ([`crate::engine::state::free_slot`]) among the rows seen by then, each running or exited
/// as it was at that moment; each then gets its final exit back. A row whose last run ended
/// [`crate::engine::view::EXITED_LINGER_MS`] or more before a moment holds nothing from then on: it leaves the rows
/// looked at and only its exit is kept, per colour slot, so each moment costs the rows still
/// running or lately gone rather than every row seen (a day of short jobs is tens of
/// thousands).
fn coloured(
    mut rows: Vec<ProcessRow>,
    runs: &[Vec<(usize, usize)>],
    time: &dyn Fn(usize) -> Option<UnixMs>,
) -> SampleMap<ProcSeriesKey, ProcessRow> {
    let exits: Vec<Option<UnixMs>> = rows.iter().map(|r| r.exited_at_ms).collect();
    let gone_for_good = |i: usize, at: UnixMs| {
        let last = runs[i].last().map_or(0, |run| run.1);
        time(last + 1).filter(|e| state::gone_for_good(*e, at))
    };
    let mut live: Vec<usize> = Vec::new();
    let mut departed = state::NO_DEPARTURES;
    let mut next = 0;
    while let Some(at) = rows.get(next).map(|r| r.first_seen_ms) {
        live.retain(|&i| match gone_for_good(i, at) {
            Some(exit) => {
                state::departed(&mut departed, &rows[i], exit);
                false
            }
            None => {
                rows[i].exited_at_ms = exit_as_of(&runs[i], at, time);
                true
            }
        });
        // All rows first seen now join before the first is coloured, as in the engine's map.
        let fresh = live.len();
        while rows.get(next).is_some_and(|r| r.first_seen_ms == at) {
            rows[next].exited_at_ms = None;
            live.push(next);
            next += 1;
        }
        for &i in &live[fresh..] {
            let looked_at = live.iter().map(|&j| &rows[j]);
            let slot = state::free_slot(looked_at, &departed, rows[i].series_key(), at);
            rows[i].color_slot = slot;
        }
    }
    let mut then = SampleMap::default();
    for (mut row, exit) in rows.into_iter().zip(exits) {
        row.exited_at_ms = exit;
        then.insert(row.series_key(), row);
    }
    then
}

/// A process's exit as the engine's rows held it at `at` (None while it runs): the time of
/// the sample after its last sighting at or before `at`.
fn exit_as_of(
    runs: &[(usize, usize)],
    at: UnixMs,
    time: &dyn Fn(usize) -> Option<UnixMs>,
) -> Option<UnixMs> {
    let started = runs.partition_point(|run| time(run.0).is_some_and(|t| t <= at));
    let run = runs.get(started.checked_sub(1)?)?;
    if time(run.1).is_some_and(|t| t >= at) {
        return None;
    }
    time(run.1 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ProcInfo, ProcessSample};
    use std::sync::Arc;

    const T0: UnixMs = 1_800_000_000_000;
    const SAMPLES: usize = 900;

    /// The colouring written out the plain way, every row looked at every moment (what
    /// [`coloured`] did before it left the rows gone for good out): the engine's
    /// [`state::color_fresh_rows_looking_at_every_row`] over the rows as they stood at each moment.
    fn coloured_looking_at_every_row(
        rows: Vec<ProcessRow>,
        runs: &[Vec<(usize, usize)>],
        time: &dyn Fn(usize) -> Option<UnixMs>,
    ) -> SampleMap<ProcSeriesKey, ProcessRow> {
        let exits: Vec<Option<UnixMs>> = rows.iter().map(|r| r.exited_at_ms).collect();
        let mut then: SampleMap<ProcSeriesKey, ProcessRow> = SampleMap::default();
        let mut rows = rows.into_iter().peekable();
        while let Some(at) = rows.peek().map(|r| r.first_seen_ms) {
            for (row, runs) in then.values_mut().zip(runs) {
                row.exited_at_ms = exit_as_of(runs, at, time);
            }
            while let Some(mut fresh) = rows.next_if(|r| r.first_seen_ms == at) {
                fresh.exited_at_ms = None;
                then.insert(fresh.series_key(), fresh);
            }
            state::color_fresh_rows_looking_at_every_row(&mut then, at);
        }
        for (row, exit) in then.values_mut().zip(exits) {
            row.exited_at_ms = exit;
        }
        then
    }

    /// `count` processes on two GPUs, each listed in one to three runs of 1–40 samples with
    /// gaps of 1–60 samples between them, first seen anywhere in [`SAMPLES`] one-second
    /// samples; in the order first seen, with their runs.
    fn short_jobs(count: u32) -> (Vec<ProcessRow>, Vec<Vec<(usize, usize)>>) {
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let mut draw = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut jobs = Vec::new();
        for pid in 0..count {
            let mut runs = Vec::new();
            let mut at = draw(SAMPLES - 1);
            for _ in 0..=draw(3) {
                let end = (at + draw(40)).min(SAMPLES - 1);
                runs.push((at, end));
                at = end + 2 + draw(60);
                if at >= SAMPLES {
                    break;
                }
            }
            let p = ProcessSample {
                pid: 1000 + pid,
                device_index: pid % 2,
                info: Some(Arc::new(ProcInfo {
                    name: format!("job{pid}"),
                    start_time_ms: T0 - 1000,
                    ..ProcInfo::default()
                })),
                ..ProcessSample::default()
            };
            let first = T0 + runs[0].0 as UnixMs * 1000;
            let mut row = ProcessRow::first_seen(&p, first, state::UNCOLORED);
            let last = runs.last().map_or(0, |run| run.1);
            row.exited_at_ms = (last + 1 < SAMPLES).then(|| T0 + (last + 1) as UnixMs * 1000);
            jobs.push((row, runs));
        }
        jobs.sort_by_key(|(row, _)| row.first_seen_ms);
        jobs.into_iter().unzip()
    }

    #[test]
    fn leaving_out_the_rows_gone_for_good_changes_no_colour() {
        // 300 processes for 20 colours: slots are taken again and again, by processes first
        // seen at every distance from another's exit (the 30 s linger included).
        let (rows, runs) = short_jobs(300);
        let time = |i: usize| (i < SAMPLES).then(|| T0 + i as UnixMs * 1000);
        let slots = |m: &SampleMap<ProcSeriesKey, ProcessRow>| -> Vec<(u32, u8)> {
            m.values().map(|r| (r.key.pid, r.color_slot)).collect()
        };
        let plain = coloured_looking_at_every_row(rows.clone(), &runs, &time);
        let quick = coloured(rows, &runs, &time);
        assert_eq!(slots(&quick), slots(&plain));
        assert!(quick.values().eq(plain.values()));
        // Every process was coloured, and slots were taken again and again (a session that
        // never reuses one would not test the rows left out).
        let mut holders = [0; 256];
        for (_, slot) in slots(&quick) {
            holders[usize::from(slot)] += 1;
        }
        assert_eq!(quick.len(), 300);
        assert_eq!(holders[usize::from(state::UNCOLORED)], 0);
        assert!(
            holders[..20].iter().all(|n| *n >= 5),
            "{:?}",
            &holders[..20]
        );
    }
}
