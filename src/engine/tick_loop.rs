//! The one loop that drives an [`Engine`] from a [`GpuSource`], for every mode:
//!
//! - the live sampler of the window, the agent and `record` ([`crate::engine::sampler`]): wall-clock
//!   time, one sample per interval, commands taken while it waits;
//! - `record --demo --speed N|max`: simulated time, N times as fast as real time or as fast
//!   as the CPU allows;
//! - `import`: snapshots built from nvidia-smi logs, as fast as the CPU allows;
//! - a reopened session ([`crate::engine::replay`]): the recorded samples, read-only.
//!
//! Each tick's CPU is counted by part ([`crate::host::cost`], with `-v`).
//!
//! Panics in the source or the engine are caught here and reported as [`Ended::Panicked`], so
//! no mode ends in a silent, dead thread.

use std::time::{Duration, Instant};

use crate::engine::pipeline::Engine;
use crate::host::cost::{self, Part};
use crate::model::UnixMs;
use crate::source::{GpuSource, SourceError};

/// What moment each sample stands for, and how fast the loop goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Clock {
    /// The wall clock: one sample per interval, stamped when it is taken.
    Wall,
    /// Simulated time: sample `n` stands for `start + n × interval`.
    Simulated {
        /// The moment of the first sample.
        start: UnixMs,
        /// How many times faster than real time (None: as fast as the CPU allows).
        speed: Option<f64>,
    },
}

/// Why [`run`] returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// `between` asked it to stop.
    Stopped,
    /// The source has no more samples (an import or a replay is done).
    SourceEnded,
    /// A bug: the source or the engine panicked; the panic's message.
    Panicked(String),
}

/// Runs `engine` on `source` until `between` returns false, the source ends, or a panic.
///
/// After each sample, `between(engine, source, due)` is called with the moment the next one
/// is due: it waits until then (a live sampler takes commands meanwhile; a fast loop does not
/// wait) and returns false to stop. A sample that fails is recorded as the source's last
/// error ([`Engine::sample_failed`]), never as zero, and the loop goes on.
pub fn run(
    engine: &mut Engine,
    source: &mut dyn GpuSource,
    interval: Duration,
    clock: Clock,
    mut between: impl FnMut(&mut Engine, &mut dyn GpuSource, Instant) -> bool,
) -> Ended {
    let step_ms = interval.as_millis() as i64;
    let pause = match clock {
        Clock::Wall => interval,
        Clock::Simulated { speed: Some(s), .. } if s > 0.0 => interval.div_f64(s),
        Clock::Simulated { .. } => Duration::ZERO,
    };
    let mut n: i64 = 0;
    let mut due = Instant::now();
    loop {
        let now = match clock {
            Clock::Wall => crate::model::now_ms(),
            Clock::Simulated { start, .. } => start.saturating_add(n.saturating_mul(step_ms)),
        };
        let ticked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            one_tick(engine, source, now, clock)
        }));
        match ticked {
            Ok(true) => {}
            Ok(false) => return Ended::SourceEnded,
            Err(p) => return Ended::Panicked(crate::host::logging::panic_text(p.as_ref())),
        }
        n += 1;
        due += pause;
        // A loop that fell behind (a slow driver, a suspended machine) starts afresh rather
        // than catching up in a burst.
        let now = Instant::now();
        if due < now {
            due = now;
        }
        // What the front end does between samples (commands) is caught as well.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            between(engine, source, due)
        })) {
            Ok(true) => {}
            Ok(false) => return Ended::Stopped,
            Err(p) => return Ended::Panicked(crate::host::logging::panic_text(p.as_ref())),
        }
    }
}

/// One sample of `source` at `now` through `engine` (the replaced sample given back); false
/// once the source has ended. A failed sample is recorded as the source's error.
fn one_tick(engine: &mut Engine, source: &mut dyn GpuSource, now: UnixMs, clock: Clock) -> bool {
    let _tick = cost::span(Part::Tick);
    let sampled = {
        let _source = cost::span(Part::Source);
        source.sample(now)
    };
    match sampled {
        Ok(snap) => {
            let received = match clock {
                Clock::Wall => crate::model::now_ms(),
                Clock::Simulated { .. } => snap.taken_at_ms,
            };
            engine.take_recorded_events(source.recorded_events(snap.taken_at_ms));
            if let Some(old) = engine.tick(snap, received) {
                let _drop = cost::span(Part::DropSample);
                source.give_back(old);
            }
            true
        }
        Err(SourceError::Ended) => {
            engine.take_recorded_events(source.recorded_events(UnixMs::MAX));
            false
        }
        Err(e) => {
            engine.sample_failed(&e);
            true
        }
    }
}

/// Sleeps until `due`, waking every 50 ms to ask `stop`; false when `stop` said so.
pub(crate) fn sleep_until(due: Instant, stop: &dyn Fn() -> bool) -> bool {
    loop {
        if stop() {
            return false;
        }
        let left = due.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::view::Monitor;
    use crate::model::{Snapshot, SourceInfo};

    /// A stand-in source (for the loop only): fails its second sample, panics at its
    /// fourth, and stamps the others with the moment asked for.
    struct Scripted(u32);

    impl GpuSource for Scripted {
        fn info(&self) -> SourceInfo {
            SourceInfo::default()
        }
        fn sample(&mut self, now_ms: UnixMs) -> Result<Snapshot, SourceError> {
            self.0 += 1;
            match self.0 {
                2 => Err(SourceError::Sample("driver hiccup".into())),
                4 => panic!("a bug in a source"),
                _ => Ok(Snapshot {
                    taken_at_ms: now_ms,
                    ..Snapshot::default()
                }),
            }
        }
    }

    #[test]
    fn simulated_time_failures_and_a_panic() {
        let shared = crate::engine::shared::Shared::new(Monitor::new(1000, 100));
        let mut engine = Engine::new(shared.clone(), crate::engine::RecordTo::Off, 1000);
        let mut seen = Vec::new();
        let ended = run(
            &mut engine,
            &mut Scripted(0),
            Duration::from_secs(1),
            Clock::Simulated {
                start: 5_000,
                speed: None,
            },
            |_, _, _| {
                let m = shared.read().expect("lock");
                seen.push((m.ticks, m.last_error.clone()));
                true
            },
        );
        assert_eq!(ended, Ended::Panicked("a bug in a source".into()));
        // Sample 1 at the start; sample 2 failed (kept as the error, not as a reading);
        // sample 3 one interval later per attempt.
        assert_eq!(
            seen,
            vec![
                (1, None),
                (1, Some("sampling failed: driver hiccup".into())),
                (2, None)
            ]
        );
        let m = shared.read().expect("lock");
        assert_eq!(m.history.span(), Some((5_000, 7_000)));
    }

    #[test]
    fn between_stops_the_loop_and_a_recorded_source_ends_it() {
        let shared = crate::engine::shared::Shared::new(Monitor::new(1000, 100));
        let mut engine = Engine::new(shared.clone(), crate::engine::RecordTo::Off, 1000);
        let mut n = 0;
        let ended = run(
            &mut engine,
            &mut Scripted(2),
            Duration::from_secs(1),
            Clock::Simulated {
                start: 0,
                speed: None,
            },
            |_, _, _| {
                n += 1;
                false
            },
        );
        assert_eq!((ended, n), (Ended::Stopped, 1));
        let snaps = (0..3)
            .map(|i| Snapshot {
                taken_at_ms: 1_000 * i,
                ..Snapshot::default()
            })
            .collect();
        let mut source = crate::source::recorded::Snapshots::new(snaps, SourceInfo::default());
        let ended = run(
            &mut engine,
            &mut source,
            Duration::from_secs(1),
            Clock::Wall,
            |_, _, _| true,
        );
        assert_eq!(ended, Ended::SourceEnded);
        assert_eq!(shared.read().expect("lock").ticks, 4);
    }
}
