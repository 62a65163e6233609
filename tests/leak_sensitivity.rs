//! The leak detector over every trace set we have — the public H200 sets (through the
//! nvidia-smi import and the NVML trace), the v3 tuning and held-out sets, the H200 held-out
//! recordings, the v4 recording (`tests/data/v4`), and synthetic shapes that
//! stand for the goals of issue 38 — scored as recall, false alarms, and the median and worst
//! time from the start of a leak's growth to its flag.
//!
//! `cargo test --test leak_sensitivity` runs the centre row (the defaults) and asserts it: every
//! leak flagged, no false alarm, each synthetic goal within its deadline.
//! `cargo test --test leak_sensitivity -- --ignored --nocapture` prints the sensitivity table of
//! `docs/leaks.md`: each threshold of the detector moved −30 % and +30 % one at a time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use vramwarden::detect::leak::LeakSettings;
use vramwarden::detect::leak_watch::LeakWatch;
use vramwarden::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, MIB};
use vramwarden::session::reader::SessionData;
use vramwarden::session::Event;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

/// What one process really did.
#[derive(Debug, Clone)]
struct Truth {
    pattern: String,
    leak: bool,
    /// When its leaking growth began (unix ms); for other processes, unused.
    growth_ms: i64,
    /// A leak that lived long enough to be told from noise (40 s of growth) must be flagged.
    must: bool,
    /// For synthetic goals: the latest acceptable flag, s after `growth_ms`.
    deadline_s: Option<f64>,
}

/// A trace set: the samples as the engine sees them, and the truth.
struct Set {
    name: String,
    heldout: bool,
    snaps: Vec<Snapshot>,
    truth: BTreeMap<u32, Truth>,
}

/// Each pid's series (unix ms, MiB) in `snaps`.
fn series(snaps: &[Snapshot]) -> BTreeMap<u32, Vec<(i64, f64)>> {
    let mut out: BTreeMap<u32, Vec<(i64, f64)>> = BTreeMap::new();
    for s in snaps {
        for p in &s.processes {
            if let Some(u) = p.used_bytes {
                out.entry(p.pid)
                    .or_default()
                    .push((s.taken_at_ms, u as f64 / MIB as f64));
            }
        }
    }
    out
}

/// The first change of a series after its first 2 s (which hold the CUDA context's creation).
fn first_change(s: &[(i64, f64)]) -> Option<i64> {
    let t0 = s.first()?.0;
    s.windows(2)
        .find(|w| w[1].0 >= t0 + 2000 && w[1].1 != w[0].1)
        .map(|w| w[1].0)
}

/// The truth from a workload log: `start` (pattern, leak; the first set has no `leak`: its
/// leaks are `leak` and `steps`), `leak_starts` (else the series' first change), `end`/`oom`.
fn ground(path: &Path, snaps: &[Snapshot]) -> BTreeMap<u32, Truth> {
    let text = std::fs::read_to_string(path).expect("ground");
    let events: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ms = |e: &serde_json::Value| (e["t"].as_f64().unwrap_or(0.0) * 1000.0) as i64;
    let of = |pid: &serde_json::Value, kinds: &[&str]| {
        events
            .iter()
            .find(|x| x["pid"] == *pid && kinds.iter().any(|k| x["event"] == *k))
            .map(ms)
    };
    let series = series(snaps);
    let mut out = BTreeMap::new();
    for e in events.iter().filter(|e| e["event"] == "start") {
        let pid = e["pid"].as_u64().expect("pid") as u32;
        let pattern = e["pattern"].as_str().expect("pattern").to_string();
        let leak = e["leak"]
            .as_bool()
            .unwrap_or(pattern == "leak" || pattern == "steps");
        let Some(s) = series.get(&pid) else {
            continue;
        };
        let growth_ms = of(&e["pid"], &["leak_starts"])
            .or_else(|| first_change(s))
            .unwrap_or_else(|| ms(e));
        let end = of(&e["pid"], &["end", "oom"])
            .unwrap_or(i64::MAX)
            .min(s.last().map_or(0, |p| p.0));
        out.insert(
            pid,
            Truth {
                pattern,
                leak,
                growth_ms,
                must: leak && end - growth_ms >= 40_000,
                deadline_s: None,
            },
        );
    }
    out
}

fn session(path: &Path) -> Vec<Snapshot> {
    SessionData::open(path).expect("open").snapshots().collect()
}

/// An nvidia-smi log (with its GPU log when given) through the library's import.
fn import(apps: &Path, gpu: Option<&Path>) -> Vec<Snapshot> {
    let tmp = tempfile::tempdir().expect("tmp");
    let out = tmp.path().join("i.vwlog");
    vramwarden::engine::import::import_nvidia_smi(
        apps,
        gpu,
        &out,
        vramwarden::engine::import::Zone::Utc,
    )
    .expect("import");
    session(&out)
}

/// The NVML trace of a public set (0.5 s; a device row, then one row per process).
fn nvml_trace(path: &Path) -> Vec<Snapshot> {
    let text = std::fs::read_to_string(path).expect("trace");
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let mut by_time: BTreeMap<i64, Snapshot> = BTreeMap::new();
    for rec in r.records() {
        let rec = rec.expect("row");
        let Ok(t) = rec[0].parse::<i64>() else {
            continue;
        };
        let dev: u32 = rec[1].parse().unwrap_or(0);
        let snap = by_time.entry(t).or_insert_with(|| Snapshot {
            taken_at_ms: t,
            ..Snapshot::default()
        });
        match rec[2].parse::<u32>() {
            Ok(pid) => snap.processes.push(ProcessSample {
                pid,
                device_index: dev,
                used_bytes: rec[3].parse().ok(),
                ..ProcessSample::default()
            }),
            Err(_) => {
                let used: Option<u64> = rec[4].parse().ok();
                let reserved: Option<u64> = rec[5].parse().ok();
                let total: Option<u64> = rec[6].parse().ok();
                snap.devices.push(DeviceSample {
                    index: dev,
                    memory_used_bytes: used,
                    memory_reserved_bytes: reserved,
                    memory_total_bytes: total,
                    memory_free_bytes: match (total, used, reserved) {
                        (Some(t), Some(u), Some(r)) => Some(t.saturating_sub(u + r)),
                        _ => None,
                    },
                    ..DeviceSample::default()
                });
            }
        }
    }
    by_time.into_values().collect()
}

/// Memory (MiB) of a synthetic shape at second `t`.
type Curve = fn(f64) -> f64;

/// A synthetic shape: pid, name, born with the recording (else long before), its curve, and
/// for a leak (growth start s, deadline s after it).
struct Synth {
    pid: u32,
    name: &'static str,
    born: bool,
    mib: Curve,
    leak: Option<(f64, f64)>,
}

const GIB: f64 = 1024.0;

fn shards(t: f64, from: f64, n: f64, size: f64, every: f64) -> f64 {
    if t < from {
        0.0
    } else {
        size * (((t - from) / every).floor() + 1.0).min(n)
    }
}

/// Allocator jitter on a flat line: 0–6 MiB.
fn jitter(t: f64) -> f64 {
    [0.0, 2.0, 0.0, 4.0, 2.0, 0.0, 6.0, 0.0][(t as usize) % 8]
}

/// A warm-up in 8 irregular jumps of 300–900 MiB, 2–9 s apart, from `from` (seeded: `seed`).
fn warmup_jumps(t: f64, from: f64, seed: u32) -> f64 {
    let (mut at, mut total) = (from, 0.0);
    for i in 0..8u32 {
        if at > t {
            break;
        }
        let r = |k: u32| {
            f64::from(
                (seed
                    .wrapping_mul(2_654_435_761)
                    .wrapping_add(i.wrapping_mul(40_503))
                    .wrapping_add(k)
                    .wrapping_mul(2_246_822_519)
                    >> 13)
                    % 1000,
            ) / 1000.0
        };
        total += 300.0 + 600.0 * r(1);
        at += 2.0 + 7.0 * r(2);
    }
    total
}

/// A step `keep` kept at each cycle of a spike of `spike` MiB lasting `up` s every `period` s
/// from `from` (an eval that keeps a little, a sawtooth that keeps a little).
fn spiky_steps(t: f64, from: f64, period: f64, up: f64, spike: f64, keep: f64) -> f64 {
    if t < from {
        return 0.0;
    }
    let k = ((t - from) / period).floor();
    let ph = (t - from) - k * period;
    let kept = keep * k;
    if ph < up {
        kept + spike
    } else {
        kept + keep
    }
}

fn synthetic_shapes() -> Vec<Synth> {
    vec![
        // Goals of issue 38 (leaks, with their deadlines).
        Synth {
            pid: 1,
            name: "steps 512 MiB / 15 s after 2 min flat",
            born: false,
            mib: |t| 6.0 * GIB + jitter(t) + shards(t, 120.0, 100.0, 512.0, 15.0),
            leak: Some((120.0, 15.0 + 30.0)),
        },
        Synth {
            pid: 2,
            name: "eval every 20 s (2 GiB, 3 s) keeps 128 MiB",
            born: false,
            mib: |t| 4.0 * GIB + jitter(t) + spiky_steps(t, 60.0, 20.0, 3.0, 2048.0, 128.0),
            leak: Some((60.0, 20.0 + 30.0)),
        },
        Synth {
            pid: 3,
            name: "sawtooth 3 GiB / 12 s keeps 192 MiB a cycle",
            born: false,
            mib: |t| {
                let ph = t % 12.0;
                let saw = if ph < 6.0 {
                    512.0 * (ph + 1.0).floor()
                } else {
                    0.0
                };
                3.0 * GIB + saw + 192.0 * (t / 12.0).floor()
            },
            leak: Some((0.0, 12.0 + 30.0)),
        },
        Synth {
            pid: 4,
            name: "load 12 x 1 GiB / 2 s, then 2 MiB/s",
            born: true,
            mib: |t| 500.0 + shards(t, 3.0, 12.0, GIB, 2.0) + 2.0 * (t - 30.0).max(0.0).floor(),
            leak: Some((30.0, 30.0)),
        },
        Synth {
            pid: 5,
            name: "load 8 x 1 GiB / 2 s, then 256 MiB / 10 s",
            born: true,
            mib: |t| 500.0 + shards(t, 3.0, 8.0, GIB, 2.0) + shards(t, 29.0, 100.0, 256.0, 10.0),
            leak: Some((29.0, 30.0)),
        },
        Synth {
            pid: 6,
            name: "2 MiB/s over a 20 GiB model",
            born: true,
            mib: |t| {
                500.0 + shards(t, 2.0, 1.0, 20.0 * GIB, 1.0) + 2.0 * (t - 10.0).max(0.0).floor()
            },
            leak: Some((10.0, 180.0)),
        },
        Synth {
            pid: 7,
            name: "late leak 24 MiB/s after 4 min flat",
            born: false,
            mib: |t| 8.0 * GIB + jitter(t) + 24.0 * (t - 240.0).max(0.0).floor(),
            leak: Some((240.0, 30.0)),
        },
        // Not leaks: growth that slows and stops.
        Synth {
            pid: 11,
            name: "warm-up, 8 irregular jumps (seed 1)",
            born: true,
            mib: |t| 900.0 + jitter(t) + warmup_jumps(t, 6.0, 1),
            leak: None,
        },
        Synth {
            pid: 12,
            name: "warm-up, 8 irregular jumps (seed 2)",
            born: true,
            mib: |t| 900.0 + jitter(t) + warmup_jumps(t, 6.0, 2),
            leak: None,
        },
        Synth {
            pid: 13,
            name: "warm-up, 8 irregular jumps (seed 3)",
            born: true,
            mib: |t| 900.0 + jitter(t) + warmup_jumps(t, 6.0, 3),
            leak: None,
        },
        Synth {
            pid: 15,
            name: "KV cache filling 8 GiB (256 MiB chunks, time constant 30 s)",
            born: true,
            mib: |t| 700.0 + 256.0 * (32.0 * (1.0 - (-t / 30.0).exp())).floor(),
            leak: None,
        },
        Synth {
            pid: 16,
            name: "sharded load mid-run 12 x 1 GiB / 2 s",
            born: false,
            mib: |t| 8.0 * GIB + jitter(t) + shards(t, 300.0, 12.0, GIB, 2.0),
            leak: None,
        },
        Synth {
            pid: 17,
            name: "pipeline: 6 GiB loaded, freed, 5 GiB loaded, ... every 50 s",
            born: true,
            mib: |t| {
                let k = (t / 50.0).floor() as i64;
                let ph = t - 50.0 * k as f64;
                let (size, n) = if k % 2 == 0 {
                    (6.0 * GIB, 3.0)
                } else {
                    (5.0 * GIB, 5.0)
                };
                600.0
                    + if ph < 48.0 {
                        shards(ph, 1.0, n, size / n, 2.0)
                    } else {
                        0.0
                    }
            },
            leak: None,
        },
        Synth {
            pid: 18,
            name: "eval every 20 s (2 GiB, 3 s), nothing kept",
            born: false,
            mib: |t| 4.0 * GIB + jitter(t) + spiky_steps(t, 60.0, 20.0, 3.0, 2048.0, 0.0),
            leak: None,
        },
        Synth {
            pid: 19,
            name: "compile-ish: graph pools 800, 400, 600, 200, 300 MiB, pauses growing",
            born: true,
            mib: |t| {
                let steps = [
                    (8.0, 800.0),
                    (14.0, 400.0),
                    (24.0, 600.0),
                    (38.0, 200.0),
                    (56.0, 300.0),
                ];
                1200.0
                    + steps
                        .iter()
                        .filter(|(at, _)| t >= *at)
                        .map(|(_, m)| m)
                        .sum::<f64>()
            },
            leak: None,
        },
    ]
}

/// The synthetic shapes as one recording on an 80 GiB GPU, 1 s samples over 600 s.
fn synthetic() -> Set {
    const T0: i64 = 1_700_000_000_000;
    let shapes = synthetic_shapes();
    let infos: Vec<Arc<ProcInfo>> = shapes
        .iter()
        .map(|s| {
            Arc::new(ProcInfo {
                name: "python".into(),
                start_time_ms: if s.born { T0 } else { T0 - 3_600_000 },
                ..ProcInfo::default()
            })
        })
        .collect();
    let snaps = (0..600)
        .map(|i| {
            let t = f64::from(i);
            let processes: Vec<ProcessSample> = shapes
                .iter()
                .zip(&infos)
                .map(|(s, info)| ProcessSample {
                    pid: s.pid,
                    used_bytes: Some(((s.mib)(t) * MIB as f64) as u64),
                    info: Some(info.clone()),
                    ..ProcessSample::default()
                })
                .collect();
            let total = 80 * 1024 * MIB;
            let used: u64 = processes.iter().filter_map(|p| p.used_bytes).sum();
            Snapshot {
                taken_at_ms: T0 + i64::from(i) * 1000,
                devices: vec![DeviceSample {
                    index: 0,
                    memory_total_bytes: Some(total),
                    memory_used_bytes: Some(used.min(total)),
                    memory_reserved_bytes: Some(0),
                    memory_free_bytes: Some(total.saturating_sub(used)),
                    ..DeviceSample::default()
                }],
                processes,
            }
        })
        .collect();
    let truth = shapes
        .iter()
        .map(|s| {
            (
                s.pid,
                Truth {
                    pattern: s.name.into(),
                    leak: s.leak.is_some(),
                    growth_ms: T0 + s.leak.map_or(0, |(from, _)| (from * 1000.0) as i64),
                    must: s.leak.is_some(),
                    deadline_s: s.leak.map(|(_, d)| d),
                },
            )
        })
        .collect();
    Set {
        name: "synthetic goals".into(),
        heldout: false,
        snaps,
        truth,
    }
}

fn set(name: &str, heldout: bool, snaps: Vec<Snapshot>, ground_path: &Path) -> Set {
    let truth = ground(ground_path, &snaps);
    Set {
        name: name.into(),
        heldout,
        snaps,
        truth,
    }
}

/// Every trace set we have.
fn all_sets() -> Vec<Set> {
    let mut sets = vec![synthetic()];
    for p in ["public", "public2", "public-oom", "public-oomkill"] {
        let g = data(&format!("traces/{p}-ground.jsonl"));
        let apps = data(&format!("traces/{p}-smi-apps.csv"));
        let gpu = data(&format!("traces/{p}-smi-gpu.csv"));
        sets.push(set(
            &format!("{p} import"),
            false,
            import(&apps, Some(&gpu)),
            &g,
        ));
        sets.push(set(
            &format!("{p} nvml"),
            false,
            nvml_trace(&data(&format!("traces/{p}-trace.csv"))),
            &g,
        ));
    }
    let g = data("traces/v3-tuning-ground.jsonl");
    sets.push(set(
        "v3-tuning session",
        false,
        session(&data("traces/v3-tuning.vwlog")),
        &g,
    ));
    sets.push(set(
        "v3-tuning import",
        false,
        import(&data("traces/v3-tuning-smi-apps.csv"), None),
        &g,
    ));
    sets.push(set(
        "v3-heldout import",
        true,
        import(&data("v3-heldout/v3-heldout-smi-apps.csv"), None),
        &data("v3-heldout/v3-heldout-ground.jsonl"),
    ));
    sets.push(set(
        "h200-heldout",
        true,
        session(&data("h200-heldout/heldout.vwlog")),
        &data("h200-heldout/heldout-ground.jsonl"),
    ));
    sets.push(set(
        "h200-heldout oom",
        true,
        session(&data("h200-heldout/oom.vwlog")),
        &data("h200-heldout/oom-ground.jsonl"),
    ));
    sets.extend(v4_sets());
    sets
}

/// The v4 recording (`tests/data/v4`, made by `tests/workloads/leak_traces_v4.sh`):
/// its tuning and held-out halves (each job's `heldout`), through the session and
/// the nvidia-smi import.
fn v4_sets() -> Vec<Set> {
    let g = data("v4/v4-ground.jsonl");
    let mut out = Vec::new();
    let text = std::fs::read_to_string(&g).expect("v4 ground");
    let heldout: Vec<u32> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "start" && e["heldout"] == true)
        .filter_map(|e| e["pid"].as_u64().map(|p| p as u32))
        .collect();
    let paths = [
        ("session", session(&data("v4/v4.vwlog"))),
        (
            "import",
            import(
                &data("v4/v4-smi-apps.csv"),
                Some(&data("v4/v4-smi-gpu.csv")),
            ),
        ),
    ];
    for (path, snaps) in paths {
        let all = set("v4", false, snaps, &g);
        for held in [false, true] {
            out.push(Set {
                name: format!("v4 {} {path}", if held { "heldout" } else { "tuning" }),
                heldout: held,
                snaps: all.snaps.clone(),
                truth: all
                    .truth
                    .iter()
                    .filter(|(p, _)| heldout.contains(p) == held)
                    .map(|(p, t)| (*p, t.clone()))
                    .collect(),
            });
        }
    }
    out
}

/// One set scored under one setting.
#[derive(Debug, Default, Clone)]
struct Score {
    musts: usize,
    missed: Vec<String>,
    false_alarms: Vec<String>,
    late: Vec<String>,
    latencies: Vec<f64>,
    /// Each leak flagged: its pattern and time to flag (s).
    flagged: Vec<(String, f64)>,
}

fn score(set: &Set, s: &LeakSettings) -> Score {
    let mut watch = LeakWatch::new(*s);
    let mut first: BTreeMap<u32, i64> = BTreeMap::new();
    for snap in &set.snaps {
        for e in watch.observe(snap) {
            if let Event::LeakStarted { unix_ms, leak } = e {
                if !leak.ghost {
                    first.entry(leak.pid).or_insert(unix_ms);
                }
            }
        }
    }
    let mut out = Score::default();
    for (pid, t) in &set.truth {
        let got = first.get(pid).map(|f| (f - t.growth_ms) as f64 / 1000.0);
        let who = format!("{}: {pid} {}", set.name, t.pattern);
        match (t.leak, got) {
            (true, Some(l)) => {
                out.latencies.push(l);
                out.flagged
                    .push((t.pattern.clone(), (l * 10.0).round() / 10.0));
                if t.deadline_s.is_some_and(|d| l > d) {
                    out.late.push(format!("{who} at {l:.1} s"));
                }
            }
            (true, None) if t.must => out.missed.push(who),
            (false, Some(l)) => out.false_alarms.push(format!("{who} at {l:.1} s")),
            _ => {}
        }
        out.musts += usize::from(t.must);
    }
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A row of the table: the sets' scores together.
struct Row {
    name: String,
    scores: Vec<Score>,
}

impl Row {
    fn line(&self) -> String {
        let musts: usize = self.scores.iter().map(|s| s.musts).sum();
        let missed: usize = self.scores.iter().map(|s| s.missed.len()).sum();
        let fa: usize = self.scores.iter().map(|s| s.false_alarms.len()).sum();
        let late: usize = self.scores.iter().map(|s| s.late.len()).sum();
        let mut lat: Vec<f64> = self
            .scores
            .iter()
            .flat_map(|s| s.latencies.iter().copied())
            .collect();
        let med = median(&mut lat);
        let worst = lat.last().copied().unwrap_or(f64::NAN);
        format!(
            "| {} | {}/{musts} | {fa} | {late} | {med:.1} s | {worst:.1} s |",
            self.name,
            musts - missed
        )
    }
}

/// Moves one threshold of `base` by `f` (0.7 or 1.3): settings directly; factors by their
/// excess over 1; counts rounded (3 → 2 and 4).
/// A threshold's name and how to move it by a factor.
type Move = (&'static str, fn(&mut LeakSettings, f64));

fn moves() -> Vec<Move> {
    // A count is an "at least n" threshold: n × 0.7 (2.1 for 3) still asks for 3, n × 1.3
    // (3.9) for 4. The table shows each count lowered by one besides (not a ±30 % move).
    fn count(n: usize, f: f64) -> usize {
        (n as f64 * f - 1e-9).ceil() as usize
    }
    vec![
        ("min_rate_mib_per_min", |s, f| s.min_rate_mib_per_min *= f),
        ("min_growth_mib", |s, f| s.min_growth_mib *= f),
        ("min_duration_s", |s, f| s.min_duration_s *= f),
        ("window_s", |s, f| s.window_s *= f),
        ("quiet_s", |s, f| s.quiet_s *= f),
        ("drop_tolerance_mib", |s, f| s.drop_tolerance_mib *= f),
        ("startup_s", |s, f| s.startup_s *= f),
        ("settle_s", |s, f| s.settle_s *= f),
        ("load_mib", |s, f| s.load_mib *= f),
        ("load_s", |s, f| s.load_s *= f),
        ("flat_s", |s, f| s.flat_s *= f),
        ("jitter_mib", |s, f| s.shape.jitter_mib *= f),
        ("regular_factor", |s, f| {
            s.shape.regular_factor = 1.0 + (s.shape.regular_factor - 1.0) * f;
        }),
        ("equal_factor", |s, f| {
            s.shape.equal_factor = 1.0 + (s.shape.equal_factor - 1.0) * f;
        }),
        ("birth_s", |s, f| s.shape.birth_s *= f),
        ("regular_steps", |s, f| {
            s.shape.regular_steps = count(s.shape.regular_steps, f);
        }),
        ("floor_troughs", |s, f| {
            s.shape.floor_troughs = count(s.shape.floor_troughs, f);
        }),
        ("stopped_mib", |s, f| s.shape.stopped_mib *= f),
    ]
}

fn row(name: String, sets: &[Set], s: &LeakSettings) -> Row {
    Row {
        name,
        scores: sets.iter().map(|set| score(set, s)).collect(),
    }
}

const HEADER: &str = "| setting | leaks flagged | false alarms | past a goal's deadline | median time to flag | worst |\n|---|---|---|---|---|---|";

/// The centre row: every leak that lived 40 s flagged, no false alarm, every goal in time.
#[test]
fn centre_row_every_leak_no_false_alarm_every_goal_in_time() {
    let sets = all_sets();
    let centre = row("defaults".into(), &sets, &LeakSettings::default());
    let mut detail = String::new();
    for (set, sc) in sets.iter().zip(&centre.scores) {
        let mut lat = sc.latencies.clone();
        detail.push_str(&format!(
            "{:<24} {} leaks {}/{} flagged, median {:.1} s {:?}, false alarms {:?}, missed {:?}, late {:?}\n",
            set.name,
            if set.heldout { "(held out)" } else { "          " },
            sc.musts - sc.missed.len(),
            sc.musts,
            median(&mut lat),
            sc.flagged,
            sc.false_alarms,
            sc.missed,
            sc.late
        ));
    }
    eprintln!("{HEADER}\n{}\n\n{detail}", centre.line());
    for sc in &centre.scores {
        assert!(sc.missed.is_empty(), "missed {:?}\n{detail}", sc.missed);
        assert!(
            sc.false_alarms.is_empty(),
            "false alarms {:?}\n{detail}",
            sc.false_alarms
        );
        assert!(sc.late.is_empty(), "late {:?}\n{detail}", sc.late);
    }
    let mut all: Vec<f64> = centre
        .scores
        .iter()
        .flat_map(|s| s.latencies.iter().copied())
        .collect();
    let med = median(&mut all);
    assert!(med <= 30.0, "median {med}\n{detail}");
}

/// The whole table: each threshold −30 % and +30 %, one at a time. No single move may lose a
/// leak or add a false alarm on any set.
#[test]
#[ignore = "the sensitivity table (35 rows over every set): run with --ignored --nocapture"]
fn sensitivity_table() {
    let sets = all_sets();
    let base = LeakSettings::default();
    let mut rows = vec![row("defaults".into(), &sets, &base)];
    for (name, apply) in moves() {
        for f in [0.7, 1.3] {
            let mut s = base;
            apply(&mut s, f);
            rows.push(row(
                format!("{name} {}", if f < 1.0 { "−30 %" } else { "+30 %" }),
                &sets,
                &s,
            ));
        }
    }
    let mut table = String::from(HEADER);
    let mut broken = Vec::new();
    for r in &rows {
        table.push('\n');
        table.push_str(&r.line());
        for sc in &r.scores {
            for m in sc.missed.iter().chain(&sc.false_alarms).chain(&sc.late) {
                broken.push(format!("{}: {m}", r.name));
            }
        }
    }
    // Besides (not ±30 % moves, not asserted): each count one lower.
    let mut fewer = Vec::new();
    for (name, apply) in [
        ("floor_troughs 2 (one fewer)", |s: &mut LeakSettings| {
            s.shape.floor_troughs -= 1;
        }),
        ("regular_steps 3 (one fewer)", |s: &mut LeakSettings| {
            s.shape.regular_steps -= 1;
        }),
    ] as [(&str, fn(&mut LeakSettings)); 2]
    {
        let mut s = base;
        apply(&mut s);
        let r = row(name.into(), &sets, &s);
        table.push('\n');
        table.push_str(&r.line());
        for sc in &r.scores {
            for m in sc.missed.iter().chain(&sc.false_alarms).chain(&sc.late) {
                fewer.push(format!("{name}: {m}"));
            }
        }
    }
    eprintln!("{table}\n");
    eprintln!("{}\n\n{}", broken.join("\n"), fewer.join("\n"));
    assert!(broken.is_empty(), "{} problems", broken.len());
}

/// Each leak says why it was called one: the shape seen, with its figures (the leak list's
/// "Why" column and the session log's `why`).
#[test]
fn every_flag_says_why_with_the_shape_seen() {
    let set = synthetic();
    let mut watch = LeakWatch::default();
    let mut why: BTreeMap<u32, String> = BTreeMap::new();
    for snap in &set.snaps {
        for e in watch.observe(snap) {
            if let Event::LeakStarted { leak, .. } = e {
                why.entry(leak.pid).or_insert(leak.why);
            }
        }
    }
    eprintln!("{why:#?}");
    let said = |pid: u32| why.get(&pid).cloned().unwrap_or_default();
    assert!(
        said(1).starts_with("growth in like steps: +"),
        "{}",
        said(1)
    );
    assert!(
        said(2).starts_with("rising floor: 3 troughs"),
        "{}",
        said(2)
    );
    assert!(said(3).starts_with("rising floor: "), "{}", said(3));
    assert!(said(7).starts_with("steady growth: +"), "{}", said(7));
    assert!(
        said(7).contains("MiB/min") || said(7).contains("GiB/min"),
        "{}",
        said(7)
    );
    assert_eq!(why.len(), 7, "{why:?}");
}
