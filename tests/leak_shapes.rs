//! The leak detector on synthetic shapes the H200 traces do not hold yet (issue 28): loads
//! that end — a sharded model load at start and mid-run, a dataset moved to the GPU, a
//! checkpoint reloaded, a second model, a growing batch seen through PyTorch's companion,
//! ghost memory while processes start — are never called leaks but show as "growing" at once;
//! late leaks (after minutes of flat use) and stepwise leaks (512–768 MiB every 15–20 s) are
//! flagged within 30 s of the start of their growth (median), every one within 60 s.
//! `cargo test --test leak_shapes -- --nocapture` prints the table.

use vramwarden::detect::leak::{LeakSettings, LeakTracker, Transition};
use vramwarden::detect::leak_watch::LeakWatch;
use vramwarden::model::{DeviceSample, Origin, ProcessSample, Snapshot, TorchMem, MIB};

const GIB: f64 = 1024.0;

/// A small deterministic jitter (MiB) a real allocator shows on a flat line: 0–6 MiB.
fn jitter(t: f64) -> f64 {
    [0.0, 2.0, 0.0, 4.0, 2.0, 0.0, 6.0, 0.0][(t as usize) % 8]
}

/// A shape: memory (MiB) at second `t`, and the companion's reserved memory when it has one.
struct Shape {
    name: &'static str,
    /// Seconds after which it grows (the truth's "growth starts"), for leaks.
    leak_from: Option<f64>,
    /// The process started at t = 0 (a start-up phase) rather than long before.
    born: bool,
    seconds: i64,
    mib: fn(f64) -> f64,
    reserved: Option<fn(f64) -> f64>,
}

fn shards(t: f64, from: f64, n: f64, size: f64, every: f64) -> f64 {
    if t < from {
        0.0
    } else {
        size * (((t - from) / every).floor() + 1.0).min(n)
    }
}

/// A pseudo-random step leak: steps of 512–768 MiB every 15–20 s from `from`.
fn random_steps(t: f64, from: f64) -> f64 {
    let (mut at, mut total, mut i) = (from, 0.0, 0u32);
    while at <= t {
        let r = (i.wrapping_mul(2_654_435_761) >> 16) % 1000;
        total += 512.0 + 256.0 * f64::from(r) / 1000.0;
        at += 15.0 + 5.0 * f64::from((r * 7) % 1000) / 1000.0;
        i += 1;
    }
    total
}

fn shapes() -> Vec<Shape> {
    vec![
        // Loads that end.
        Shape {
            name: "sharded load at start (12 x 1 GiB / 2 s)",
            leak_from: None,
            born: true,
            seconds: 600,
            mib: |t| 500.0 + shards(t, 3.0, 12.0, GIB, 2.0) + jitter(t),
            reserved: None,
        },
        Shape {
            name: "sharded load mid-run (12 x 1 GiB / 2 s)",
            leak_from: None,
            born: false,
            seconds: 900,
            mib: |t| 8.0 * GIB + shards(t, 300.0, 12.0, GIB, 2.0) + jitter(t),
            reserved: None,
        },
        Shape {
            name: "slow sharded load mid-run (8 x 1.5 GiB / 5 s)",
            leak_from: None,
            born: false,
            seconds: 900,
            mib: |t| 8.0 * GIB + shards(t, 300.0, 8.0, 1.5 * GIB, 5.0) + jitter(t),
            reserved: None,
        },
        Shape {
            name: "dataset to GPU (24 x 256 MiB / 0.5 s)",
            leak_from: None,
            born: false,
            seconds: 900,
            mib: |t| 4.0 * GIB + shards(t, 200.0, 24.0, 256.0, 0.5),
            reserved: None,
        },
        Shape {
            name: "checkpoint reload (free 10 GiB, 10 x 1 GiB / 2 s)",
            leak_from: None,
            born: false,
            seconds: 900,
            mib: |t| {
                let base = 2.0 * GIB;
                if t < 300.0 {
                    base + 10.0 * GIB
                } else {
                    base + shards(t, 305.0, 10.0, GIB, 2.0)
                }
            },
            reserved: None,
        },
        Shape {
            name: "second model (20 GiB at once)",
            leak_from: None,
            born: false,
            seconds: 900,
            mib: |t| 10.0 * GIB + shards(t, 400.0, 1.0, 20.0 * GIB, 1.0) + jitter(t),
            reserved: None,
        },
        Shape {
            name: "one step of 768 MiB mid-run (a small model)",
            leak_from: None,
            born: false,
            seconds: 900,
            mib: |t| 6.0 * GIB + shards(t, 300.0, 1.0, 768.0, 1.0) + jitter(t),
            reserved: None,
        },
        Shape {
            name: "one step of 300 MiB mid-run",
            leak_from: None,
            born: false,
            seconds: 900,
            mib: |t| 6.0 * GIB + shards(t, 300.0, 1.0, 300.0, 1.0) + jitter(t),
            reserved: None,
        },
        Shape {
            name: "growing batch, companion (1.6 -> 2.2 GiB, cache 4 -> 10 GiB)",
            leak_from: None,
            born: false,
            seconds: 900,
            mib: |t| 1.6 * GIB + shards(t, 200.0, 6.0, 100.0, 5.0),
            reserved: Some(|t| 4.0 * GIB + shards(t, 200.0, 6.0, 1024.0, 5.0)),
        },
        Shape {
            name: "warm-up ramp at start (batch doubling / 5 s)",
            leak_from: None,
            born: true,
            seconds: 600,
            mib: |t| 900.0 + 270.0 * (2f64.powi(((t / 5.0) as i32).min(5)) - 1.0),
            reserved: None,
        },
        // Leaks.
        Shape {
            name: "late leak 2 MiB/s after 5 min flat",
            leak_from: Some(300.0),
            born: false,
            seconds: 600,
            mib: |t| 8.0 * GIB + jitter(t) + 2.0 * (t - 300.0).max(0.0).floor(),
            reserved: None,
        },
        Shape {
            name: "late leak 32 MiB/s after 5 min flat",
            leak_from: Some(300.0),
            born: false,
            seconds: 600,
            mib: |t| 8.0 * GIB + jitter(t) + 32.0 * (t - 300.0).max(0.0).floor(),
            reserved: None,
        },
        Shape {
            name: "late leak 1 MiB/s after 8 min of training",
            leak_from: Some(480.0),
            born: true,
            seconds: 900,
            mib: |t| {
                900.0
                    + 270.0 * (2f64.powi(((t / 5.0) as i32).min(5)) - 1.0)
                    + jitter(t)
                    + (t - 480.0).max(0.0).floor()
            },
            reserved: None,
        },
        Shape {
            name: "steps 512 MiB / 15 s after 3 min",
            leak_from: Some(180.0),
            born: false,
            seconds: 600,
            mib: |t| 6.0 * GIB + jitter(t) + shards(t, 180.0, 100.0, 512.0, 15.0),
            reserved: None,
        },
        Shape {
            name: "steps 768 MiB / 15 s after 3 min",
            leak_from: Some(180.0),
            born: false,
            seconds: 600,
            mib: |t| 6.0 * GIB + shards(t, 180.0, 100.0, 768.0, 15.0),
            reserved: None,
        },
        Shape {
            name: "steps 768 MiB / 20 s after 3 min",
            leak_from: Some(180.0),
            born: false,
            seconds: 600,
            mib: |t| 6.0 * GIB + jitter(t) + shards(t, 180.0, 100.0, 768.0, 20.0),
            reserved: None,
        },
        Shape {
            name: "steps 512-768 MiB / 15-20 s after 4 min",
            leak_from: Some(240.0),
            born: false,
            seconds: 700,
            mib: |t| 6.0 * GIB + jitter(t) + random_steps(t, 240.0),
            reserved: None,
        },
        Shape {
            name: "steps 512 MiB / 15 s from the start",
            leak_from: Some(5.0),
            born: true,
            seconds: 400,
            mib: |t| 500.0 + shards(t, 5.0, 100.0, 512.0, 15.0),
            reserved: None,
        },
        Shape {
            name: "sharded load, then a leak of 2 MiB/s",
            leak_from: Some(90.0),
            born: true,
            seconds: 400,
            mib: |t| 500.0 + shards(t, 3.0, 12.0, GIB, 2.0) + 2.0 * (t - 90.0).max(0.0).floor(),
            reserved: None,
        },
        Shape {
            name: "companion: tensors leak 512 MiB/min, cache in step",
            leak_from: Some(120.0),
            born: false,
            seconds: 500,
            mib: |t| 2.0 * GIB + 512.0 / 60.0 * (t - 120.0).max(0.0).floor(),
            reserved: Some(|t| 3.0 * GIB + 512.0 / 60.0 * (t - 120.0).max(0.0).floor()),
        },
    ]
}

/// (first flag in seconds, flags, seconds "growing" was first shown).
fn run(s: &Shape, step_ms: i64) -> (Option<f64>, usize, Option<f64>) {
    let settings = LeakSettings::default();
    let mut tr = if s.born {
        LeakTracker::born_at(0)
    } else {
        // A process running long before the watch began.
        LeakTracker::default()
    };
    let (mut first, mut flags, mut growing) = (None, 0, None);
    for i in 0..s.seconds * 1000 / step_ms {
        let t = i * step_ms;
        let x = t as f64 / 1000.0;
        let cache = s.reserved.map(|r| r(x));
        if let Some(Transition::Started { .. }) =
            tr.update_with_cache(t, (s.mib)(x), cache, &settings)
        {
            flags += 1;
            first.get_or_insert(x);
        }
        if tr.growing().is_some() || tr.episode().is_some() {
            growing.get_or_insert(x);
        }
    }
    (first, flags, growing)
}

#[test]
fn loads_are_growing_not_leaks_and_late_and_stepwise_leaks_are_flagged_within_30_s() {
    let mut report = String::from("step  shape                                                  flagged (after growth)  growing from\n");
    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    for step in [1000, 500] {
        for s in shapes() {
            let (first, flags, growing) = run(&s, step);
            let after = match (first, s.leak_from) {
                (Some(f), Some(from)) => format!("{:.1} s", f - from),
                (Some(f), None) => format!("FALSE ALARM at {f:.1} s"),
                (None, _) => "no".into(),
            };
            report.push_str(&format!(
                "{step:>4}  {:<54} {after:<23} {}\n",
                s.name,
                growing.map_or("-".into(), |g| format!("{g:.1} s"))
            ));
            match (s.leak_from, first) {
                (Some(from), Some(f)) => {
                    latencies.push(f - from);
                    if flags != 1 {
                        failures.push(format!("{}: {flags} episodes", s.name));
                    }
                }
                (Some(_), None) => failures.push(format!("{}: not flagged", s.name)),
                (None, Some(_)) => failures.push(format!("{}: false alarm", s.name)),
                (None, None) => {
                    // A load shows as growing while it lasts.
                    if growing.is_none() && s.reserved.is_none() {
                        failures.push(format!("{}: never shown growing", s.name));
                    }
                }
            }
        }
    }
    latencies.sort_by(f64::total_cmp);
    let median = latencies[latencies.len() / 2];
    let max = latencies[latencies.len() - 1];
    eprintln!("{report}leaks: median {median:.1} s, max {max:.1} s after the growth began");
    assert!(failures.is_empty(), "{failures:?}\n{report}");
    assert!(median <= 30.0, "median {median}\n{report}");
    assert!(max <= 60.0, "max {max}\n{report}");
}

fn ghost_snap(t: i64, ghost_mib: f64) -> Snapshot {
    let proc_mib = 8192.0;
    let used = ((proc_mib + ghost_mib) * MIB as f64) as u64;
    let total = 143_771 * MIB;
    Snapshot {
        taken_at_ms: 1_700_000_000_000 + t * 1000,
        devices: vec![DeviceSample {
            index: 0,
            memory_total_bytes: Some(total),
            memory_used_bytes: Some(used),
            memory_free_bytes: Some(total - used),
            memory_reserved_bytes: Some(0),
            ..DeviceSample::default()
        }],
        processes: vec![ProcessSample {
            pid: 100,
            used_bytes: Some((proc_mib * MIB as f64) as u64),
            origin: Origin::Simulated,
            ..ProcessSample::default()
        }],
    }
}

/// Ghost memory is called a leak only past max(512 MiB, 0.5 % of the GPU) and when it lasts:
/// 105 MiB of contexts while processes start (gone 20 s later), or 400 MiB that stays, are
/// not; 2 GiB growing over two minutes and staying is.
#[test]
fn ghost_memory_alarms_only_when_large_and_lasting() {
    let flagged = |g: fn(i64) -> f64| {
        let mut w = LeakWatch::default();
        (0..600).find(|&t| {
            w.observe(&ghost_snap(t, g(t))).iter().any(
                |e| matches!(e, vramwarden::session::Event::LeakStarted { leak, .. } if leak.ghost),
            )
        })
    };
    assert_eq!(
        flagged(|t| if (100..120).contains(&t) {
            105.0 * ((t - 99) as f64 / 20.0)
        } else {
            0.0
        }),
        None
    );
    assert_eq!(
        flagged(|t| (t.clamp(100, 140) - 100) as f64 * 10.0),
        None,
        "400 MiB that stays"
    );
    assert_eq!(
        flagged(|t| (t.clamp(100, 112) - 100) as f64 * 100.0),
        None,
        "1.2 GiB at once, a burst"
    );
    let t =
        flagged(|t| (t.clamp(100, 220) - 100) as f64 * 2048.0 / 120.0).expect("2 GiB over 2 min");
    assert!((130..=190).contains(&t), "flagged at {t}");
}

/// Through the leak watch with the companion's figures: a growing batch whose cache swells
/// is growing, then levels, never a leak; the forecast counts it while it grows.
#[test]
fn a_growing_batch_with_the_companion_is_growing_then_nothing() {
    let mut w = LeakWatch::default();
    let mut grew_at = None;
    for t in 0..600i64 {
        let x = t as f64;
        let alloc = 1.6 * GIB + shards(x, 200.0, 6.0, 100.0, 5.0);
        let reserved = 4.0 * GIB + shards(x, 200.0, 6.0, 1024.0, 5.0);
        let mut s = ghost_snap(t, 0.0);
        s.processes[0].used_bytes = Some((reserved * MIB as f64) as u64);
        s.processes[0].torch = Some(TorchMem {
            allocated_bytes: (alloc * MIB as f64) as u64,
            reserved_bytes: (reserved * MIB as f64) as u64,
            ..TorchMem::default()
        });
        let events = w.observe(&s);
        assert!(events.is_empty(), "{t}: {events:?}");
        w.forecast(&mut s);
        if s.devices[0].time_to_full_s.is_some() {
            grew_at.get_or_insert(t);
        }
        if t > 300 {
            assert_eq!(s.devices[0].time_to_full_s, None, "levelled at {t}");
        }
    }
    assert!(
        grew_at.is_some_and(|t| (200..215).contains(&t)),
        "{grew_at:?}"
    );
}
