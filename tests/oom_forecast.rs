//! The OOM forecast per GPU: from its free memory and the rate of the leaks on it, "GPU 0 full
//! in ~N min" in the snapshot the engine publishes (`time_to_full_seconds`), and the rule
//! condition "GPU full in less than T".

use vramwarden::act::rules::eval::{compile, Facts, RuleState};
use vramwarden::act::rules::model::{Conditions, Rule};
use vramwarden::detect::leak_watch::LeakWatch;
use vramwarden::model::{DeviceSample, Origin, ProcessSample, Snapshot, MIB};

const GIB: u64 = 1024 * MIB;

/// Two 80 GiB GPUs; on GPU 0 a process leaks 512 MiB/min from 10 GiB (after `t` s), on
/// GPU 1 a process holds a flat 30 GiB.
fn snap(t: i64) -> Snapshot {
    let leaker = 10 * GIB + (t.max(0) as u64) * 512 * MIB / 60;
    let dev = |index: u32, used: u64| DeviceSample {
        index,
        memory_total_bytes: Some(80 * GIB),
        memory_used_bytes: Some(used),
        memory_reserved_bytes: Some(0),
        memory_free_bytes: Some(80 * GIB - used),
        ..DeviceSample::default()
    };
    let proc_ = |pid: u32, device_index: u32, used: u64| ProcessSample {
        pid,
        device_index,
        used_bytes: Some(used),
        origin: Origin::Simulated,
        ..ProcessSample::default()
    };
    Snapshot {
        taken_at_ms: 1_700_000_000_000 + t * 1000,
        devices: vec![dev(0, leaker), dev(1, 30 * GIB)],
        processes: vec![proc_(100, 0, leaker), proc_(200, 1, 30 * GIB)],
    }
}

#[test]
fn a_leak_forecasts_its_gpu_full_and_a_rule_can_act_on_it() {
    let mut watch = LeakWatch::default();
    let rule = Rule {
        name: "full soon".into(),
        conditions: Conditions {
            device_full_within_minutes: Some(150.0),
            ..Conditions::default()
        },
        ..Rule::default()
    };
    let rules = compile(&[rule]);
    let mut state = RuleState::default();
    let mut first_forecast = None;
    let mut fired = Vec::new();
    let mut last = snap(0);
    // A minute of flat memory (no leak, no forecast), then ten minutes of growth.
    for t in -60..600 {
        let mut s = snap(t);
        watch.observe(&s);
        watch.forecast(&mut s);
        if t < 0 {
            assert_eq!(s.devices[0].time_to_full_s, None, "no growth yet at {t}");
        }
        if first_forecast.is_none() && s.devices[0].time_to_full_s.is_some() {
            first_forecast = Some(t);
        }
        assert_eq!(s.devices[1].time_to_full_s, None, "GPU 1 does not grow");
        state.observe(&s);
        for p in state.evaluate(&rules, &s, &Facts::default()) {
            fired.push((t, p.target.device_index()));
        }
        last = s;
    }
    let t0 = first_forecast.expect("the leak is forecast");
    assert!(t0 <= 60, "forecast after {t0} s of growth");
    // At 600 s: 10 GiB + 5 GiB used, 65 GiB free at 512 MiB/min → 130 min.
    let full_min = last.devices[0].time_to_full_s.expect("forecast") / 60.0;
    assert!(
        (full_min - 130.0).abs() < 13.0,
        "GPU 0 full in {full_min:.1} min, expected ~130"
    );
    // The rule fired for GPU 0 (once: its cooldown), never for GPU 1.
    assert!(!fired.is_empty(), "the rule fired");
    assert!(fired.iter().all(|(_, d)| *d == 0), "{fired:?}");
    // The forecast is in the snapshot's JSON under its documented name.
    let json = serde_json::to_value(&last).expect("json");
    assert!(json["devices"][0]["time_to_full_seconds"]
        .as_f64()
        .is_some());
    assert!(json["devices"][1]["time_to_full_seconds"].is_null());
}

/// Where PyTorch's companion reports a process's allocator, the leak watch judges the memory
/// its tensors hold: a caching allocator that swells (NVML's figure grows 1 GiB/min) while the
/// tensors stay put is no leak; tensors that grow are. (The figures are set on the samples as
/// the engine sets them from the companion; the companion itself is tested in
/// tests/torch_companion.rs.)
#[test]
fn with_allocator_figures_cache_growth_is_not_a_leak_but_tensor_growth_is() {
    use vramwarden::model::TorchMem;
    let run = |tensors_grow: bool| {
        let mut watch = LeakWatch::default();
        let mut flagged = false;
        for t in 0..300i64 {
            let reserved = 4 * GIB + (t as u64) * 1024 * MIB / 60;
            let allocated = if tensors_grow {
                2 * GIB + (t as u64) * 512 * MIB / 60
            } else {
                2 * GIB
            };
            let mut s = snap(-1000);
            s.taken_at_ms = 1_700_000_000_000 + t * 1000;
            s.processes.truncate(1);
            s.processes[0].used_bytes = Some(reserved);
            s.processes[0].torch = Some(TorchMem {
                allocated_bytes: allocated,
                reserved_bytes: reserved,
                ..Default::default()
            });
            flagged |= watch
                .observe(&s)
                .iter()
                .any(|e| matches!(e, vramwarden::session::Event::LeakStarted { .. }));
        }
        flagged
    };
    assert!(!run(false), "the cache swelled, the tensors did not");
    assert!(run(true), "the tensors grew");
}

/// One GPU of `total_gib` with these processes (pid, MiB), all started at `born_ms`.
fn gpu_snap(t_ms: i64, total_gib: u64, born_ms: i64, procs: &[(u32, f64)]) -> Snapshot {
    use std::sync::Arc;
    let total = total_gib * GIB;
    let used: u64 = procs.iter().map(|(_, m)| (*m * MIB as f64) as u64).sum();
    Snapshot {
        taken_at_ms: t_ms,
        devices: vec![DeviceSample {
            index: 0,
            memory_total_bytes: Some(total),
            memory_used_bytes: Some(used.min(total)),
            memory_reserved_bytes: Some(0),
            memory_free_bytes: Some(total.saturating_sub(used)),
            ..DeviceSample::default()
        }],
        processes: procs
            .iter()
            .map(|(pid, m)| ProcessSample {
                pid: *pid,
                used_bytes: Some((*m * MIB as f64) as u64),
                origin: Origin::Simulated,
                info: Some(Arc::new(vramwarden::model::ProcInfo {
                    name: format!("job{pid}"),
                    start_time_ms: born_ms,
                    ..Default::default()
                })),
                ..ProcessSample::default()
            })
            .collect(),
    }
}

/// Runs the leak watch, its forecast and the forecast alert (10 min) over `snaps`; returns the
/// alert events and each sample's (likely, earliest) seconds to full.
type Forecasts = Vec<(Option<f64>, Option<f64>)>;
fn run_forecast(
    snaps: impl Iterator<Item = Snapshot>,
) -> (Vec<vramwarden::session::Event>, Forecasts) {
    use vramwarden::detect::forecast_alert::ForecastWatch;
    let mut watch = LeakWatch::default();
    let mut alert = ForecastWatch::new(10.0);
    let (mut events, mut out) = (Vec::new(), Vec::new());
    for mut s in snaps {
        watch.observe(&s);
        watch.forecast(&mut s);
        let growing = || {
            watch
                .growing()
                .filter_map(|(k, _)| match k {
                    vramwarden::engine::view::LeakKey::Process(p) => Some(p),
                    vramwarden::engine::view::LeakKey::Ghost(_) => None,
                })
                .collect()
        };
        let since = |d: u32| watch.forecast_growth_since(d);
        events.extend(alert.observe(&s, &growing, &since));
        let d = &s.devices[0];
        if let (Some(l), Some(e)) = (d.time_to_full_s, d.time_to_full_earliest_s) {
            assert!(e <= l + 1e-6, "earliest {e} after likely {l}");
        }
        out.push((d.time_to_full_s, d.time_to_full_earliest_s));
    }
    (events, out)
}

/// Eight jobs starting at once on an 80 GiB GPU (issue 37): sharded model loads, a warm-up in
/// irregular jumps, a batch that doubles then levels, a KV cache filling, a model in one
/// piece; after their loads their allocators creep (a few MiB now and then). The GPU never
/// passes ~55 %: no forecast alert, and no forecast within an hour once the loads are over.
#[test]
fn eight_jobs_starting_at_once_raise_no_alert_and_their_forecast_recedes_with_their_loads() {
    const T0: i64 = 1_700_000_000_000;
    let mib = |pid: u32, t: f64| -> f64 {
        let creep = 2.0 * (t / 20.0).floor();
        let steps = |from: f64, n: f64, size: f64, every: f64| {
            if t < from {
                0.0
            } else {
                size * (((t - from) / every).floor() + 1.0).min(n)
            }
        };
        500.0
            + creep
            + match pid {
                1 => steps(2.0, 10.0, 1024.0, 2.0),
                2 => {
                    let jumps = [
                        (6.0, 450.0),
                        (9.0, 820.0),
                        (16.0, 310.0),
                        (19.0, 700.0),
                        (27.0, 560.0),
                        (31.0, 890.0),
                        (40.0, 380.0),
                        (46.0, 640.0),
                    ];
                    jumps
                        .iter()
                        .filter(|(at, _)| t >= *at)
                        .map(|(_, m)| m)
                        .sum()
                }
                3 => steps(1.0, 5.0, 1024.0, 1.0),
                4 => 270.0 * (2f64.powi(((t / 5.0) as i32).min(4)) - 1.0),
                5 => 128.0 * (48.0 * (1.0 - (-t / 20.0).exp())).floor(),
                6 => steps(3.0, 1.0, 4096.0, 1.0),
                7 => steps(2.0, 8.0, 512.0, 3.0),
                _ => steps(5.0, 3.0, 1024.0, 4.0),
            }
    };
    let snaps = (0..300).map(|i| {
        let t = f64::from(i);
        let procs: Vec<(u32, f64)> = (1..=8).map(|p| (p, mib(p, t))).collect();
        gpu_snap(T0 + i64::from(i) * 1000, 80, T0, &procs)
    });
    let peak: f64 = (0..300)
        .map(|i| (1..=8).map(|p| mib(p, f64::from(i))).sum::<f64>())
        .fold(0.0, f64::max);
    assert!(peak < 0.56 * 80.0 * 1024.0, "peak {peak} MiB");
    let (events, forecasts) = run_forecast(snaps);
    assert!(events.is_empty(), "{events:?}");
    // After every load, no forecast within an hour (a creeping allocator adds a few MiB).
    for (i, (likely, _)) in forecasts.iter().enumerate().skip(70) {
        assert!(
            likely.is_none_or(|l| l > 3600.0),
            "full in {likely:?} s at {i} s, after every load"
        );
    }
}

/// A job growing steadily from 0.05 to 2 GiB/s beside a 36.5 GiB idle job, on an 80 GiB and a
/// 141 GiB GPU: its GPU's likely time to full is set within 15 s of its growth's start and is
/// close to the truth; the alert is raised before the GPU is full; once the growth stops, the
/// forecast is gone within 15 s and the alert ends.
#[test]
fn a_steady_grower_counts_within_15_s_and_its_alert_ends_when_it_stops() {
    const T0: i64 = 1_700_000_000_000;
    for total_gib in [80u64, 141] {
        for gib_per_s in [0.05, 0.4, 2.0] {
            let idle = 36.5 * 1024.0;
            let free0 = total_gib as f64 * 1024.0 - idle - 1000.0;
            // Grows from t = 60 s until 90 % of the free memory is taken, then stays.
            let grow_s = 0.9 * free0 / (gib_per_s * 1024.0);
            let grower = |t: f64| 500.0 + (gib_per_s * 1024.0 * (t - 60.0).clamp(0.0, grow_s));
            let end = 60.0 + grow_s;
            let n = (end + 60.0) as i64;
            let snaps = (0..n).map(|i| {
                let t = i as f64;
                gpu_snap(
                    T0 + i * 1000,
                    total_gib,
                    T0 - 3_600_000,
                    &[(1, idle + 500.0), (2, grower(t))],
                )
            });
            let (events, forecasts) = run_forecast(snaps);
            let what = format!("{gib_per_s} GiB/s on {total_gib} GiB");
            let first = forecasts
                .iter()
                .position(|(l, _)| l.is_some())
                .unwrap_or_else(|| panic!("{what}: never forecast"));
            assert!(
                (60..=75).contains(&first),
                "{what}: forecast from {first} s"
            );
            // At 20 s of growth (or half-way), the likely figure is within 25 % of the truth.
            let at = (60.0 + 20f64.min(grow_s / 2.0)) as usize;
            let truth = (free0 - (grower(at as f64) - 500.0)) / (gib_per_s * 1024.0);
            let got = forecasts[at].0.unwrap_or(f64::NAN);
            assert!(
                (got - truth).abs() <= 0.25 * truth,
                "{what}: at {at} s likely {got:.0} s, truth {truth:.0} s"
            );
            let raised = events.iter().find_map(|e| match e {
                vramwarden::session::Event::OomForecast { unix_ms, .. } => {
                    Some((unix_ms - T0) as f64 / 1000.0)
                }
                _ => None,
            });
            // The forecast alert warns 10 min ahead: raised before the growth ends.
            let raised = raised.unwrap_or_else(|| panic!("{what}: no alert"));
            assert!(
                raised < end,
                "{what}: alert at {raised} s, growth ended {end:.0} s"
            );
            // It stops: no forecast within 15 s, and the alert ends within 25 s.
            let gone = forecasts
                .iter()
                .enumerate()
                .skip(end.ceil() as usize)
                .find(|(_, (l, _))| l.is_none())
                .map(|(i, _)| i as f64 - end);
            assert!(
                gone.is_some_and(|g| g <= 15.0),
                "{what}: forecast gone after {gone:?} s"
            );
            let ended = events.iter().find_map(|e| match e {
                vramwarden::session::Event::OomForecastEnded { unix_ms, .. } => {
                    Some((unix_ms - T0) as f64 / 1000.0 - end)
                }
                _ => None,
            });
            assert!(
                ended.is_some_and(|e| e <= 25.0),
                "{what}: alert ended {ended:?} s after"
            );
        }
    }
}

/// The v4 recording (`tests/data/v4`, nine jobs started at once on one GPU beside `record`):
/// replayed through the leak watch and the forecast alert, no alert is raised by their
/// start-ups (the first two minutes). The build that recorded it raised one 49 s after the
/// start, driven by a warm-up in uneven jumps.
#[test]
fn the_v4_start_ups_raise_no_forecast_alert() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/v4/v4.vwlog");
    let data = vramwarden::session::reader::SessionData::open(&path).expect("open");
    let snaps: Vec<Snapshot> = data.snapshots().collect();
    let t0 = snaps.first().map_or(0, |s| s.taken_at_ms);
    let (events, forecasts) = run_forecast(snaps.into_iter());
    let raised: Vec<f64> = events
        .iter()
        .filter_map(|e| match e {
            vramwarden::session::Event::OomForecast { unix_ms, .. } => {
                Some((unix_ms - t0) as f64 / 1000.0)
            }
            _ => None,
        })
        .collect();
    let shortest = forecasts
        .iter()
        .filter_map(|(l, _)| *l)
        .fold(f64::INFINITY, f64::min);
    let recorded: Vec<f64> = data
        .events
        .iter()
        .filter_map(|e| match e {
            vramwarden::session::Event::OomForecast { unix_ms, .. } => {
                Some((unix_ms - t0) as f64 / 1000.0)
            }
            _ => None,
        })
        .collect();
    eprintln!(
        "v4: alerts raised now at {raised:?} s, by the recording build at {recorded:?} s; shortest likely forecast {shortest:.0} s"
    );
    assert!(
        !recorded.is_empty(),
        "the recording holds its build's alert"
    );
    assert!(raised.iter().all(|t| *t > 120.0), "{raised:?}");
}
