//! Replaying a session in two halves at once, one on each of two cores: each half decodes
//! its own samples once, pushes them into a history of its own and notes where each process
//! was seen ([`crate::engine::sightings`]); the later history is then appended to the earlier
//! one chunk by chunk and the rows are derived from the joined sightings. The result equals
//! the replay of the whole session through the read-only engine, sample by sample
//! (`tests/session.rs` compares the two); a session this cannot replay so (a short one, a
//! sample that no longer decodes) is left to that replay. The reader holds a session's samples
//! in time order, none at the same time ([`SessionData`]), so each sample is one tick.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::engine::sightings::{self, Sightings};
use crate::engine::view::ProcessRow;
use crate::model::history::{History, ProcSeriesKey, CHUNK};
use crate::model::sample_map::SampleMap;
use crate::model::Snapshot;
use crate::session::reader::SessionData;

/// How often (in samples) a replay reports its progress and may be cancelled.
pub const PROGRESS_EVERY: u64 = 1024;

/// What a replay in halves built: the View's parts a replay fills.
pub(crate) struct Replayed {
    /// Every sample's readings.
    pub(crate) history: History,
    /// The process rows as the engine derives them.
    pub(crate) rows: SampleMap<ProcSeriesKey, ProcessRow>,
    /// The last sample, sanitized.
    pub(crate) latest: Snapshot,
    /// How many samples were taken in.
    pub(crate) ticks: u64,
}

/// How a replay in halves ended.
pub(crate) enum Halves {
    /// Built.
    Built(Box<Replayed>),
    /// `progress` asked to stop.
    Cancelled,
    /// This session is replayed sample by sample instead (see the module's documentation).
    NotHere,
}

/// One half's work: its history, its sightings and its last sample.
struct Half {
    history: History,
    seen: Sightings,
    last: Snapshot,
}

/// Why a half ended early.
enum Short {
    /// `progress` asked to stop.
    Cancelled,
    /// The other half asked to stop: it ended early.
    Stopped,
    /// A sample no longer decodes, or is no tick of its own.
    NotHere,
}

/// `data` replayed in two halves at once; `progress` is called with the done fraction about
/// every [`PROGRESS_EVERY`] samples and stops the replay by returning false.
pub(crate) fn replay(data: &SessionData, progress: &mut dyn FnMut(f32) -> bool) -> Halves {
    let n = data.len();
    // The earlier half ends on a chunk boundary (its history joins chunk by chunk).
    let split = (n / 2 / CHUNK * CHUNK).max(CHUNK);
    if n <= split {
        return Halves::NotHere;
    }
    let stop = AtomicBool::new(false);
    let (earlier, later) = std::thread::scope(|scope| {
        // Either half that ends early stops the other.
        let earlier = std::thread::Builder::new()
            .name("vramwarden-replay-half".into())
            .spawn_scoped(scope, || {
                stop_other_if_short(&stop, half(data, 0, split, &stop, &mut |_| true))
            });
        let later = stop_other_if_short(&stop, half(data, split, n, &stop, progress));
        let earlier = earlier.ok().map(|h| h.join());
        (earlier, later)
    });
    let (earlier, later) = match (earlier, later) {
        (_, Err(Short::Cancelled)) => return Halves::Cancelled,
        (Some(Ok(Ok(a))), Ok(b)) => (a, b),
        _ => return Halves::NotHere,
    };
    join(earlier, later, data)
}

/// `r`, after setting `stop` when it is short (the other half then ends early too).
fn stop_other_if_short(stop: &AtomicBool, r: Result<Half, Short>) -> Result<Half, Short> {
    if r.is_err() {
        stop.store(true, Ordering::Relaxed);
    }
    r
}

/// The two halves joined, the rows derived.
fn join(earlier: Half, later: Half, data: &SessionData) -> Halves {
    let (mut history, mut seen) = (earlier.history, earlier.seen);
    if history.join_later(later.history).is_err() {
        return Halves::NotHere;
    }
    sightings::join(&mut seen, later.seen);
    let Some(rows) = sightings::rows(seen, data, &history) else {
        return Halves::NotHere;
    };
    let ticks = history.len() as u64;
    Halves::Built(Box::new(Replayed {
        history,
        rows,
        latest: later.last,
        ticks,
    }))
}

/// Samples `from..to` of `data`: each decoded, sanitized and pushed as the engine does it
/// ([`crate::source::replay::push_sanitized`]) into a history that starts at tick `from`, and
/// its processes noted.
fn half(
    data: &SessionData,
    from: usize,
    to: usize,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<Half, Short> {
    let mut history = History::starting_at(data.len(), from as u64);
    let mut seen = Sightings::default();
    let mut s = Snapshot::default();
    let every = PROGRESS_EVERY as usize;
    for i in from..to {
        if (i - from) % every == every - 1 {
            if stop.load(Ordering::Relaxed) {
                return Err(Short::Stopped);
            }
            if !progress((i - from) as f32 / (to - from) as f32) {
                return Err(Short::Cancelled);
            }
        }
        if !data.snapshot_into(i, &mut s) {
            return Err(Short::NotHere);
        }
        crate::source::replay::push_sanitized(&mut history, &mut s);
        if history.end_tick() != i as u64 + 1 {
            return Err(Short::NotHere);
        }
        for (pos, p) in s.processes.iter().enumerate() {
            sightings::saw(&mut seen, pos, i, s.taken_at_ms, p);
        }
    }
    Ok(Half {
        history,
        seen,
        last: s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::state::EngineState;
    use crate::engine::view::Monitor;
    use crate::model::{DeviceSample, ProcInfo, ProcessSample};

    const T0: i64 = 1_796_000_000_000;

    fn process(pid: u32, gpu: u32, used: Option<u64>) -> ProcessSample {
        ProcessSample {
            pid,
            device_index: gpu,
            used_bytes: used,
            info: Some(std::sync::Arc::new(ProcInfo {
                name: format!("p{pid}"),
                start_time_ms: 1_000 + i64::from(pid),
                ..ProcInfo::default()
            })),
            ..ProcessSample::default()
        }
    }

    /// Sample `i` of a session whose processes come, go, come back, read no memory for a while
    /// and start or end right at the halves' seam (tick 256 of 600).
    fn sample(i: u64) -> Snapshot {
        let gib = 1u64 << 30;
        let mut processes = vec![process(10, 0, Some(gib + (i % 7) * (1 << 20)))];
        let mut on = |pid: u32, gpu: u32, from: u64, to: u64, used: Option<u64>| {
            if (from..to).contains(&i) {
                processes.push(process(pid, gpu, used));
            }
        };
        on(11, 0, 0, 100, Some(2 * gib));
        on(11, 0, 150, 400, Some(3 * gib + i * 4096));
        on(12, 1, 256, 600, Some(gib));
        on(13, 1, 255, 256, Some(gib));
        on(
            14,
            0,
            200,
            590,
            (!(300..=500).contains(&i)).then_some(gib + i),
        );
        on(15, 1, 40, 560, (i < 480).then_some(i << 20));
        on(16, 0, 255, 257, Some(5 * gib));
        on(17, 0, 255, 600, Some(gib));
        on(18, 1, 300, 310, None);
        // Short jobs, one every 13 s, more than there are colours: slots are taken again
        // as their holders leave.
        for k in 0..40 {
            on(
                100 + k,
                k % 2,
                5 + 13 * u64::from(k),
                25 + 13 * u64::from(k),
                Some(gib),
            );
        }
        let device = |index| DeviceSample {
            index,
            memory_total_bytes: Some(80 * gib),
            memory_used_bytes: Some(10 * gib),
            ..DeviceSample::default()
        };
        Snapshot {
            taken_at_ms: T0 + i as i64 * 1000,
            devices: vec![device(0), device(1)],
            processes,
        }
    }

    /// Records `n` samples of [`sample`] into `path`, the clock `back` ms earlier from sample
    /// `turn` on.
    fn record(path: &std::path::Path, n: u64, turn: u64, back: i64) {
        let shared = crate::engine::shared::Shared::new(Monitor::new(1000, 10));
        let to = crate::engine::RecordTo::File(path.to_path_buf());
        let mut e = crate::engine::Engine::new(shared, to, 1000);
        for i in 0..n {
            let mut s = sample(i);
            if i >= turn {
                s.taken_at_ms -= back;
            }
            let t = s.taken_at_ms;
            e.tick(s, t);
        }
        e.finish().expect("close");
    }

    /// The replay of `data` in halves equals the rows and history the engine derives from
    /// its samples one after another.
    fn assert_halves_equal_steps(data: &SessionData) -> Vec<ProcessRow> {
        let mut state = EngineState::default();
        let mut want = Monitor::new(1000, data.len());
        for i in 0..data.len() {
            let mut s = data.snapshot(i).expect("decodes");
            s.sanitize();
            state.apply(&mut want, s, 0);
        }
        let Halves::Built(got) = replay(data, &mut |_| true) else {
            panic!("replayed in halves");
        };
        let rows =
            |m: &SampleMap<ProcSeriesKey, ProcessRow>| m.values().cloned().collect::<Vec<_>>();
        let want_rows = rows(&want.rows);
        assert_eq!(rows(&got.rows), want_rows);
        assert_eq!(Some(&got.latest), want.latest.as_ref());
        assert_eq!(got.ticks, want.ticks);
        let end = want.history.end_tick();
        for key in want.history.process_keys() {
            let values = |h: &History| h.process(key).map(|s| s.values(0, end));
            assert_eq!(values(&got.history), values(&want.history), "{key:?}");
        }
        for d in 0..2 {
            let values = |h: &History| h.device(d).map(|s| s.values(0, end));
            assert_eq!(values(&got.history), values(&want.history));
        }
        assert_eq!(got.history.span(), want.history.span());
        want_rows
    }

    #[test]
    fn two_halves_give_the_rows_and_history_of_one_replay_sample_by_sample() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("s.vwlog");
        record(&path, 600, 600, 0);
        let rows = assert_halves_equal_steps(&SessionData::open(&path).expect("open"));
        assert_eq!(rows.len(), 49);
        assert!(rows.iter().filter(|r| r.exited_at_ms.is_some()).count() >= 4);
        assert!(rows.iter().any(|r| r.delta_1m_bytes.is_some()));
    }

    #[test]
    fn joined_logs_replay_in_halves_and_a_short_session_is_left_to_the_engine() {
        let dir = tempfile::tempdir().expect("tmp");
        // Two logs joined end to end, the later one recorded first: the reader puts the
        // samples in time order across the two files' id spaces.
        let (a, b) = (dir.path().join("a.vwlog"), dir.path().join("b.vwlog"));
        record(&a, 300, 300, 0);
        record(&b, 600, 0, 3_600_000);
        let mut bytes = std::fs::read(&a).expect("read");
        bytes.extend(std::fs::read(&b).expect("read"));
        let both = dir.path().join("both.vwlog");
        std::fs::write(&both, bytes).expect("write");
        let data = SessionData::open(&both).expect("open");
        assert_eq!((data.len(), data.segment_count()), (900, 2));
        assert_halves_equal_steps(&data);
        let short = dir.path().join("short.vwlog");
        record(&short, 256, 256, 0);
        let data = SessionData::open(&short).expect("open");
        assert_eq!(data.len(), 256);
        assert!(matches!(replay(&data, &mut |_| true), Halves::NotHere));
    }
}
