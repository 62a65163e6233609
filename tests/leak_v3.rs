//! The leak detector on the H200 traces of issue 28's shapes (`tests/workloads/shapes_v3.py`,
//! 2026-12-04): a sharded model load at start, a load mid-run, a growing batch under PyTorch's
//! companion (not leaks), a late leak and a leak in big steps. The tuning set
//! (`tests/data/traces/v3-tuning*`) is scored through the recorded session (NVML at 1 s, with
//! the companion's figures) and through `import nvidia-smi`; the held-out set
//! (`tests/data/v3-heldout`, its README) through the import only — it was scored once, after the
//! detector was fixed, and its figures are reported, not tuned on.
//! `cargo test --test leak_v3 -- --nocapture` prints the tables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use vramwarden::detect::leak_watch::LeakWatch;
use vramwarden::session::reader::SessionData;
use vramwarden::session::Event;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(rel)
}

/// pid → (pattern, is a leak, when its growth starts in unix ms: `leak_starts`, else its
/// first `grow`, else its start).
fn ground(path: &Path) -> BTreeMap<u32, (String, bool, i64)> {
    let text = std::fs::read_to_string(path).expect("ground");
    let events: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ms = |e: &serde_json::Value| (e["t"].as_f64().unwrap_or(0.0) * 1000.0) as i64;
    let first = |pid: &serde_json::Value, kind: &str| {
        events
            .iter()
            .find(|x| x["pid"] == *pid && x["event"] == kind)
            .map(ms)
    };
    events
        .iter()
        .filter(|e| e["event"] == "start")
        .map(|e| {
            let growth = first(&e["pid"], "leak_starts")
                .or_else(|| first(&e["pid"], "grow"))
                .unwrap_or_else(|| ms(e));
            (
                e["pid"].as_u64().expect("pid") as u32,
                (
                    e["pattern"].as_str().expect("pattern").to_string(),
                    e["leak"].as_bool().expect("leak"),
                    growth,
                ),
            )
        })
        .collect()
}

/// pid → first leak flag (unix ms) in `events`; ghost memory is never flagged.
fn first_flags(events: &[Event]) -> BTreeMap<u32, i64> {
    let mut flagged = BTreeMap::new();
    for e in events {
        if let Event::LeakStarted { unix_ms, leak } = e {
            assert!(!leak.ghost, "ghost memory flagged: {leak:?}");
            flagged.entry(leak.pid).or_insert(*unix_ms);
        }
    }
    flagged
}

/// The recorded session replayed through the engine's leak watch.
fn through_session(path: &Path) -> BTreeMap<u32, i64> {
    let s = SessionData::open(path).expect("open");
    let mut watch = LeakWatch::default();
    let mut events = Vec::new();
    for snap in s.snapshots() {
        events.extend(watch.observe(&snap));
    }
    first_flags(&events)
}

/// The nvidia-smi log through `vramwarden import nvidia-smi` (which runs the engine).
fn through_import(apps: &Path) -> BTreeMap<u32, i64> {
    let tmp = tempfile::tempdir().expect("tmp");
    let log = tmp.path().join("t.vwlog");
    let out = Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args(["import", "nvidia-smi", "--utc", "--apps"])
        .arg(apps)
        .arg("--out")
        .arg(&log)
        .output()
        .expect("run import");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    first_flags(&SessionData::open(&log).expect("open").events)
}

/// Scores: the table, the latencies of the leaks flagged (s after their growth began), the
/// leaks missed and the false alarms.
struct Score {
    table: String,
    latencies: Vec<f64>,
    missed: Vec<String>,
    false_alarms: Vec<String>,
}

fn score(
    set: &str,
    truth: &BTreeMap<u32, (String, bool, i64)>,
    paths: &[(&str, BTreeMap<u32, i64>)],
) -> Score {
    let mut s = Score {
        table: String::new(),
        latencies: Vec::new(),
        missed: Vec::new(),
        false_alarms: Vec::new(),
    };
    for (path, flagged) in paths {
        for (pid, (pattern, leak, growth)) in truth {
            let got = flagged.get(pid).map(|t| (t - growth) as f64 / 1000.0);
            s.table.push_str(&format!(
                "{set:<12} {path:<8} {pid:>4}  {pattern:<12} {:<5} {}\n",
                if *leak { "leak" } else { "-" },
                got.map_or("no".into(), |t| format!("{t:.1} s after its growth began"))
            ));
            match (leak, got) {
                (true, Some(t)) => s.latencies.push(t),
                (true, None) => s.missed.push(format!("{path} {pid} {pattern}")),
                (false, Some(_)) => s.false_alarms.push(format!("{path} {pid} {pattern}")),
                (false, None) => {}
            }
        }
    }
    s.latencies.sort_by(f64::total_cmp);
    s
}

/// The median of sorted values (the mean of the middle two for an even count).
fn median(v: &[f64]) -> f64 {
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[test]
fn v3_tuning_set_every_leak_within_the_targets_no_false_alarm() {
    let truth = ground(&data("traces/v3-tuning-ground.jsonl"));
    let s = score(
        "v3-tuning",
        &truth,
        &[
            ("session", through_session(&data("traces/v3-tuning.vwlog"))),
            (
                "import",
                through_import(&data("traces/v3-tuning-smi-apps.csv")),
            ),
        ],
    );
    let (med, max) = (median(&s.latencies), s.latencies.last().copied());
    eprintln!("{}median {med:.1} s, max {max:?} s", s.table);
    assert!(s.missed.is_empty(), "missed {:?}\n{}", s.missed, s.table);
    assert!(
        s.false_alarms.is_empty(),
        "false alarms {:?}\n{}",
        s.false_alarms,
        s.table
    );
    // The goals of leaks v4 (issue 38): a step leak within 30 s of its second step, any
    // other leak within 30 s of the start of its growth.
    let ground = data("traces/v3-tuning-ground.jsonl");
    for (path, flagged) in [
        ("session", through_session(&data("traces/v3-tuning.vwlog"))),
        (
            "import",
            through_import(&data("traces/v3-tuning-smi-apps.csv")),
        ),
    ] {
        for (pid, (pattern, leak, growth)) in &truth {
            let Some(t) = flagged.get(pid).filter(|_| *leak) else {
                continue;
            };
            let from = if pattern == "bigsteps" {
                nth_grow(&ground, *pid, 2).expect("a second step")
            } else {
                *growth
            };
            let after = (t - from) as f64 / 1000.0;
            assert!(
                after <= 30.0,
                "{path} {pid} {pattern}: {after} s\n{}",
                s.table
            );
        }
    }
    assert!(max.is_some_and(|m| m <= 60.0), "max {max:?}\n{}", s.table);
}

/// When process `pid`'s `n`-th `grow` event came (unix ms).
fn nth_grow(path: &Path, pid: u32, n: usize) -> Option<i64> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["pid"] == pid && e["event"] == "grow")
        .nth(n - 1)
        .and_then(|e| e["t"].as_f64())
        .map(|t| (t * 1000.0) as i64)
}

/// The held-out set as it scored when first run (after the detector's design was fixed on
/// the tuning set and the synthetic shapes): both leaks flagged, no false alarm. A guard
/// against regressions, not a target: the figures are in the report as they came.
#[test]
fn v3_heldout_set_scored_through_the_import() {
    let truth = ground(&data("v3-heldout/v3-heldout-ground.jsonl"));
    let s = score(
        "v3-heldout",
        &truth,
        &[(
            "import",
            through_import(&data("v3-heldout/v3-heldout-smi-apps.csv")),
        )],
    );
    eprintln!(
        "{}median {:.1} s, max {:?} s",
        s.table,
        median(&s.latencies),
        s.latencies.last()
    );
    assert!(s.missed.is_empty(), "missed {:?}\n{}", s.missed, s.table);
    assert!(
        s.false_alarms.is_empty(),
        "false alarms {:?}\n{}",
        s.false_alarms,
        s.table
    );
}
