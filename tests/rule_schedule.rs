//! Schedules in rules (`at`, `every_hours`) evaluated over simulated days with an injected
//! time zone, docs/rules.md's nightly-restart example, and the errors a bad schedule gets.

use std::path::Path;
use std::sync::Arc;

use vramwarden::act::rules::eval::{compile, Facts, RuleState, Target};
use vramwarden::act::rules::{Action, Conditions, Rule};
use vramwarden::engine::settings::Settings;
use vramwarden::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, UnixMs, MIB};

/// 2026-12-03 00:00:00 UTC.
const DAY0: UnixMs = 1_796_256_000_000;
const MIN: UnixMs = 60_000;
const H: UnixMs = 60 * MIN;

/// One GPU with a Jupyter server (pid 10) holding `jupyter_mib`, GPU-idle unless `busy`,
/// and a trainer (pid 20) holding 30 GiB, always busy.
fn snap(t: UnixMs, jupyter_mib: u64, busy: bool) -> Snapshot {
    let proc_ = |pid: u32, mib: u64, util: u32, cmd: &str| ProcessSample {
        pid,
        device_index: 0,
        used_bytes: Some(mib * MIB),
        sm_util_pct: Some(util),
        info: Some(Arc::new(ProcInfo {
            name: "python3".into(),
            cmdline: cmd.into(),
            user: "jupyter".into(),
            start_time_ms: DAY0 - 48 * H,
            ..ProcInfo::default()
        })),
        ..ProcessSample::default()
    };
    Snapshot {
        taken_at_ms: t,
        devices: vec![DeviceSample {
            memory_total_bytes: Some(80 * 1024 * MIB),
            memory_used_bytes: Some((jupyter_mib + 30 * 1024) * MIB),
            ..DeviceSample::default()
        }],
        processes: vec![
            proc_(
                10,
                jupyter_mib,
                u32::from(busy) * 40,
                "python3 -m jupyter lab --port 8888",
            ),
            proc_(20, 30 * 1024, 90, "python3 train.py"),
        ],
    }
}

/// Runs `rule` over ticks `from..to` every `step`, the Jupyter server's state given by
/// `state(t)`; returns (time, pid or 1000 + GPU) of each firing.
fn run(
    rule: &Rule,
    offset_s: i32,
    (from, to, step): (UnixMs, UnixMs, UnixMs),
    state: &dyn Fn(UnixMs) -> (u64, bool),
) -> Vec<(UnixMs, u32)> {
    let rules = compile(std::slice::from_ref(rule));
    assert_eq!(rules.len(), 1, "the rule is valid: {:?}", rule.problems());
    let mut st = RuleState::default();
    st.set_utc_offset_s(Some(offset_s));
    let mut fired = Vec::new();
    let mut t = from;
    while t < to {
        let (mib, busy) = state(t);
        let s = snap(t, mib, busy);
        st.observe(&s);
        for p in st.evaluate(&rules, &s, &Facts::default()) {
            fired.push((
                t,
                match p.target {
                    Target::Process { key, .. } => key.0.pid,
                    Target::Device(i) => 1000 + i,
                },
            ));
        }
        t += step;
    }
    fired
}

/// The rules guide's example rule (the TOML block of docs/rules.md that defines "Nightly
/// Jupyter restart").
fn readme_rule() -> Rule {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/rules.md"))
            .expect("docs/rules.md");
    let block = readme
        .split("```toml")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .find(|b| b.contains("name = \"Nightly Jupyter restart\""))
        .expect("docs/rules.md has the nightly restart example");
    let s = Settings::from_toml(block, Path::new("docs/rules.md")).expect("the example is valid");
    s.cleanup
        .rules
        .into_iter()
        .find(|r| r.name == "Nightly Jupyter restart")
        .expect("the example rule")
}

#[test]
fn the_readme_nightly_restart_fires_once_a_night_in_its_window() {
    let rule = readme_rule();
    assert_eq!(rule.conditions.at.as_deref(), Some("04:00"));
    assert!(
        matches!(&rule.action, Action::RunCommand { argv, .. } if argv.iter().any(|a| a.contains("jupyter"))),
        "{:?}",
        rule.action
    );
    assert!(
        rule.describe().contains("04:00–05:00 local time"),
        "{}",
        rule.describe()
    );
    // Three days, a tick every 5 minutes, 24 GiB held and idle throughout, in UTC.
    let fired = run(&rule, 0, (DAY0, DAY0 + 72 * H, 5 * MIN), &|_| {
        (24 * 1024, false)
    });
    assert_eq!(
        fired,
        vec![(DAY0 + 4 * H, 10), (DAY0 + 28 * H, 10), (DAY0 + 52 * H, 10)],
        "once a night at 04:00, the Jupyter server only"
    );
}

#[test]
fn the_window_is_local_time() {
    let rule = readme_rule();
    // UTC+2: 04:00 local is 02:00 UTC; UTC−5: 09:00 UTC.
    let fired = run(&rule, 7200, (DAY0, DAY0 + 24 * H, 5 * MIN), &|_| {
        (24 * 1024, false)
    });
    assert_eq!(fired, vec![(DAY0 + 2 * H, 10)]);
    let fired = run(&rule, -5 * 3600, (DAY0, DAY0 + 24 * H, 5 * MIN), &|_| {
        (24 * 1024, false)
    });
    assert_eq!(fired, vec![(DAY0 + 9 * H, 10)]);
}

#[test]
fn the_other_conditions_still_decide_inside_the_window() {
    let rule = readme_rule();
    let day = (DAY0, DAY0 + 24 * H, 5 * MIN);
    // Last busy at the 03:25 tick: idle an hour at 04:25, still inside the window.
    let fired = run(&rule, 0, day, &|t| (24 * 1024, t < DAY0 + 3 * H + 30 * MIN));
    assert_eq!(fired, vec![(DAY0 + 4 * H + 25 * MIN, 10)]);
    // Last busy at 04:25: idle an hour at 05:25, after the window: not tonight.
    let fired = run(&rule, 0, day, &|t| (24 * 1024, t < DAY0 + 4 * H + 30 * MIN));
    assert_eq!(fired, vec![]);
    // Idle but holding only 16 GiB: never.
    let fired = run(&rule, 0, day, &|_| (16 * 1024, false));
    assert_eq!(fired, vec![]);
}

#[test]
fn once_per_window_even_with_no_cooldown_and_the_hold_counts_from_the_opening() {
    let mut rule = readme_rule();
    rule.cooldown_minutes = 0.0;
    rule.conditions.hold_seconds = 600.0;
    let fired = run(&rule, 0, (DAY0, DAY0 + 24 * H, MIN), &|_| {
        (24 * 1024, false)
    });
    // The conditions held all night, but the hysteresis restarts when the window opens.
    assert_eq!(fired, vec![(DAY0 + 4 * H + 10 * MIN, 10)]);
}

#[test]
fn every_six_hours_on_each_gpu() {
    let rule = Rule {
        name: "report".into(),
        cooldown_minutes: 0.0,
        conditions: Conditions {
            every_hours: Some(6.0),
            ..Conditions::default()
        },
        action: Action::Notify,
        ..Rule::default()
    };
    let fired = run(
        &rule,
        0,
        (DAY0 + 30 * MIN, DAY0 + 24 * H, 30 * MIN),
        &|_| (1024, true),
    );
    // The first period is already open at 00:30; then 06:00, 12:00, 18:00.
    assert_eq!(
        fired,
        vec![
            (DAY0 + 30 * MIN, 1000),
            (DAY0 + 6 * H, 1000),
            (DAY0 + 12 * H, 1000),
            (DAY0 + 18 * H, 1000)
        ]
    );
}

#[test]
fn a_window_and_a_period_together() {
    let rule = Rule {
        name: "night shift".into(),
        cooldown_minutes: 0.0,
        conditions: Conditions {
            at: Some("22:00-02:00".into()),
            every_hours: Some(1.0),
            process_memory_min_mib: Some(20_000.0),
            ..Conditions::default()
        },
        ..Rule::default()
    };
    let fired: Vec<UnixMs> = run(&rule, 0, (DAY0, DAY0 + 24 * H, 15 * MIN), &|_| {
        (24 * 1024, false)
    })
    .into_iter()
    .filter(|(_, pid)| *pid == 10)
    .map(|(t, _)| t)
    .collect();
    // 00:00 and 01:00 (the window of the day before), then 22:00 and 23:00.
    assert_eq!(fired, vec![DAY0, DAY0 + H, DAY0 + 22 * H, DAY0 + 23 * H]);
}

/// The settings file's error for `conditions`, one per case: (what the rule says, the line
/// the error must point at, words it must contain).
#[test]
fn bad_schedules_are_reported_with_file_line_and_reason() {
    let cases = [
        ("at = \"25:00\"", "not a time of day"),
        ("at = \"04:00-04:00\"", "empty"),
        ("every_hours = 0.0", "every_hours"),
        ("every_hours = 10000.0", "8760"),
        ("at = \"04:00\"\nhold_seconds = 7200.0", "could never fire"),
        ("container_glob = \"\"", "empty"),
        ("container_total_min_mib = -1.0", "container_total_min_mib"),
    ];
    for (conditions, words) in cases {
        let text = format!(
            "[cleanup]\n[[cleanup.rules]]\nname = \"x\"\n[cleanup.rules.conditions]\nprocess_memory_min_mib = 1.0\n{conditions}\n"
        );
        let err = Settings::from_toml(&text, Path::new("conf.toml"))
            .expect_err("the schedule is refused");
        assert_eq!(err.line, Some(6), "{conditions}: {err}");
        assert!(
            err.to_string().starts_with("conf.toml:6: ") && err.to_string().contains(words),
            "{conditions}: {err}"
        );
    }
}
