//! Park and resume and the OOM guard, without a GPU: the executor's path to the driver with a
//! real process (the driver then says no), the command line's errors, the rule conditions of
//! the guard ladder, and the demo's forecast alert and simulated park. The driver calls
//! themselves are verified on a real GPU (docs/park.md).

use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vramwarden::act::rules::action::{ActionRunner, Entry, Outcome, Safety};
use vramwarden::act::rules::eval::{compile, process_target, Facts, Planned, RuleState};
use vramwarden::act::rules::{Action, Conditions, Rule};
use vramwarden::model::{
    now_ms, DeviceSample, Origin, ParkInfo, ParkState, ProcInfo, ProcessKey, ProcessSample,
    Snapshot, GIB, MIB,
};
use vramwarden::session::reader::SessionData;
use vramwarden::session::Event;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vramwarden"))
}

struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper() -> Reaped {
    Reaped(
        Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep"),
    )
}

/// A live process sample for the real process `pid`, holding `gib` on GPU 0.
fn live(pid: u32, gib: u64) -> ProcessSample {
    let info = vramwarden::host::procinfo::ProcReader::default()
        .read(pid)
        .expect("the child is readable in /proc");
    ProcessSample {
        pid,
        used_bytes: Some(gib * GIB),
        origin: Origin::Live,
        info: Some(info),
        ..ProcessSample::default()
    }
}

fn plan(action: Action, p: &ProcessSample, dry_run: bool) -> Planned {
    Planned {
        rule: "test".into(),
        action,
        dry_run,
        allow_other_users: false,
        target: process_target(p),
    }
}

fn live_safety() -> Safety {
    Safety {
        global_dry_run: false,
        ..Safety::default()
    }
}

#[test]
fn a_park_of_a_real_process_goes_through_the_checks_and_the_driver_says_no() {
    let child = sleeper();
    let p = live(child.0.id(), 1);
    let mut runner = ActionRunner::new();
    // Dry run: the words and the estimate, nothing else.
    let a = runner.run(&plan(Action::Park, &p, true), &live_safety(), now_ms());
    assert_eq!(a.outcome, Outcome::WouldAct, "{}", a.detail);
    assert!(
        a.detail.contains("would park") && a.detail.contains("1.0 GiB"),
        "{}",
        a.detail
    );
    // For real: asked on the park thread; `sleep` has no CUDA context, so the driver (or its
    // absence here) refuses, and the process runs on untouched.
    let a = runner.run(&plan(Action::Park, &p, false), &live_safety(), now_ms());
    assert_eq!(
        (a.outcome, a.entry),
        (Outcome::Acted, Entry::Asked),
        "{}",
        a.detail
    );
    let started = Instant::now();
    let answer = loop {
        let done = runner.poll(&|_| true, now_ms());
        if let Some(a) = done.into_iter().find(|a| a.entry == Entry::Action) {
            break a;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no answer");
        std::thread::sleep(Duration::from_millis(20));
    };
    // No driver here: the park failed; with one, `sleep` is no CUDA process: refused,
    // nothing was changed.
    match answer.outcome {
        Outcome::Failed => assert!(answer.detail.contains("libcuda.so.1"), "{}", answer.detail),
        Outcome::Skipped => assert!(
            answer
                .detail
                .contains("was refused, nothing was changed: not a CUDA process"),
            "{}",
            answer.detail
        ),
        other => panic!("{other:?}: {}", answer.detail),
    }
    assert!(runner.take_park_records().iter().all(|r| !r.ok));
    // Nothing is parked: the sample is left as the driver gave it.
    let mut snap = Snapshot::default();
    runner.annotate_parked(&mut snap);
    assert!(snap.processes.is_empty());
    assert!(
        std::path::Path::new(&format!("/proc/{}", p.pid)).exists(),
        "still running"
    );
}

#[test]
fn a_park_names_the_process_it_checked_and_never_a_simulated_one() {
    let child = sleeper();
    let mut p = live(child.0.id(), 1);
    let mut runner = ActionRunner::new();
    // A start time that is not this process's: another process behind the same PID.
    let mut stale = p.clone();
    if let Some(i) = stale.info.as_mut().map(Arc::make_mut) {
        i.start_time_ms -= 60_000;
    }
    let a = runner.run(&plan(Action::Park, &stale, false), &live_safety(), now_ms());
    assert_eq!(a.outcome, Outcome::Skipped, "{}", a.detail);
    assert!(a.detail.contains("another process"), "{}", a.detail);
    p.origin = Origin::Simulated;
    let a = runner.run(&plan(Action::Park, &p, false), &live_safety(), now_ms());
    assert_eq!(a.outcome, Outcome::Skipped);
    assert!(a.detail.contains("simulated"), "{}", a.detail);
    p.origin = Origin::Recorded;
    let a = runner.run(&plan(Action::Resume, &p, false), &live_safety(), now_ms());
    assert_eq!(a.outcome, Outcome::Skipped);
    assert!(a.detail.contains("recorded session"), "{}", a.detail);
}

#[test]
fn more_gpu_memory_than_the_host_has_is_refused_before_anything_is_asked() {
    let child = sleeper();
    // 64 TiB on the GPU: no host has that much available.
    let p = live(child.0.id(), 64 * 1024);
    let mut runner = ActionRunner::new();
    let a = runner.run(&plan(Action::Park, &p, false), &live_safety(), now_ms());
    assert_eq!(a.outcome, Outcome::Skipped, "{}", a.detail);
    assert!(a.detail.contains("not enough host memory"), "{}", a.detail);
}

#[test]
fn park_and_resume_on_the_command_line_without_a_driver() {
    let out = bin().args(["park", "1"]).output().expect("run");
    // CI has no NVIDIA driver: exit 3 as every driver command; with one, PID 1 holds no GPU.
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(3) => assert!(
            err.to_lowercase().contains("nvml") || err.contains("driver"),
            "{err}"
        ),
        code => assert_eq!(code, Some(1), "{err}"),
    }
    let out = bin().args(["resume", "1"]).output().expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(3) => assert!(err.contains("libcuda.so.1"), "{err}"),
        code => assert_eq!(code, Some(1), "{err}"),
    }
    // A simulated process is never parked or resumed for real, and the reason is said once
    // (on stderr), with or without a driver.
    for what in ["park", "resume"] {
        let out = bin().args(["--demo", what, "39002"]).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{what}");
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(all.matches("simulated process").count(), 1, "{what}: {all}");
        assert!(!all.contains("libcuda"), "{what}: {all}");
    }
}

fn key(pid: u32) -> ProcessKey {
    ProcessKey {
        pid,
        start_time_ms: 1_000,
    }
}

fn proc_on(pid: u32, mib: u64, parked: Option<ParkInfo>) -> ProcessSample {
    ProcessSample {
        pid,
        used_bytes: Some(mib * MIB),
        origin: Origin::Live,
        parked,
        info: Some(Arc::new(ProcInfo {
            name: format!("job{pid}"),
            start_time_ms: key(pid).start_time_ms,
            ..ProcInfo::default()
        })),
        ..ProcessSample::default()
    }
}

fn gpu(free_mib: u64) -> DeviceSample {
    DeviceSample {
        index: 0,
        memory_total_bytes: Some(81_920 * MIB),
        memory_used_bytes: Some((81_920 - free_mib) * MIB),
        memory_free_bytes: Some(free_mib * MIB),
        ..DeviceSample::default()
    }
}

fn fired(rule: Rule, snap: &Snapshot) -> Vec<u32> {
    let mut st = RuleState::default();
    st.evaluate(&compile(&[rule]), snap, &Facts::default())
        .iter()
        .map(|p| match &p.target {
            vramwarden::act::rules::eval::Target::Process { key, .. } => key.0.pid,
            vramwarden::act::rules::eval::Target::Device(_) => 0,
        })
        .collect()
}

#[test]
fn the_guard_parks_only_the_largest_and_resumes_only_when_there_is_room() {
    let parked = Some(ParkInfo {
        state: ParkState::Parked,
        bytes: Some(20_000 * MIB),
        since_ms: 0,
    });
    let snap = |free| Snapshot {
        taken_at_ms: 10_000,
        devices: vec![gpu(free)],
        processes: vec![
            proc_on(11, 4_000, None),
            proc_on(12, 30_000, None),
            proc_on(13, 0, parked),
        ],
    };
    let park = Rule {
        name: "park".into(),
        conditions: Conditions {
            device_free_max_mib: Some(8_192.0),
            process_memory_min_mib: Some(1_024.0),
            largest_only: true,
            ..Conditions::default()
        },
        action: Action::Park,
        ..Rule::default()
    };
    assert_eq!(
        fired(park.clone(), &snap(4_000)),
        vec![12],
        "only the largest"
    );
    assert!(fired(park, &snap(40_000)).is_empty(), "room enough");
    let resume = Rule {
        name: "resume".into(),
        conditions: Conditions {
            parked_fits_with_mib: Some(8_192.0),
            ..Conditions::default()
        },
        action: Action::Resume,
        ..Rule::default()
    };
    assert!(
        fired(resume.clone(), &snap(25_000)).is_empty(),
        "20 000 + 8 192 MiB do not fit in 25 000"
    );
    assert_eq!(fired(resume, &snap(30_000)), vec![13]);
    // A rule for idle holders never ends a parked process.
    let terminate = Rule {
        name: "terminate".into(),
        conditions: Conditions {
            name_regex: Some("job".into()),
            ..Conditions::default()
        },
        action: Action::Terminate { grace_seconds: 1.0 },
        ..Rule::default()
    };
    assert_eq!(fired(terminate, &snap(4_000)), vec![11, 12]);
}

#[test]
fn the_demo_raises_a_forecast_alert_and_shows_a_simulated_park() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("demo.vwlog");
    let out = bin()
        .args([
            "--demo",
            "record",
            "--speed",
            "max",
            "--duration",
            "11m",
            "--out",
        ])
        .arg(&log)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = SessionData::open(&log).expect("open");
    let started = s.header.clone().expect("header").started_ms;
    let raised: Vec<_> = s
        .events
        .iter()
        .filter_map(|e| match *e {
            Event::OomForecast {
                unix_ms,
                device_index,
                ref drivers,
                full_in_s,
            } => Some((unix_ms - started, device_index, drivers.clone(), full_in_s)),
            _ => None,
        })
        .collect();
    assert_eq!(raised.len(), 1, "{raised:?}");
    let (at, gpu, drivers, full_in_s) = &raised[0];
    assert_eq!(*gpu, 0);
    assert!(*at > 120_000 && *at < 240_000, "raised {at} ms in");
    assert!(*full_in_s < 600.0);
    assert_eq!(drivers.first().map(|d| d.pid), Some(70411), "{drivers:?}");
    assert!(
        s.events.iter().any(|e| matches!(
            e,
            Event::OomForecastEnded {
                device_index: 0,
                ..
            }
        )),
        "the alert ends once the fine-tune is gone"
    );
    // The simulated park: the idle notebook has no GPU memory from 200 s to 600 s, and
    // nothing acted on anything.
    let sim = vramwarden::source::sim::SimSource::demo_day(started);
    let at = |secs: i64| sim.at(started + secs * 1000);
    let nb = |snap: Snapshot| {
        snap.processes
            .into_iter()
            .find(|p| p.pid == 66020)
            .expect("notebook")
    };
    let parked = nb(at(300));
    assert_eq!(parked.used_bytes, Some(0));
    assert_eq!(
        parked.parked.map(|i| (i.state, i.bytes)),
        Some((ParkState::Parked, Some(24 * GIB)))
    );
    assert_eq!(nb(at(650)).parked, None);
    assert_eq!(nb(at(650)).used_bytes, Some(24 * GIB));
    assert!(!s
        .events
        .iter()
        .any(|e| matches!(e, Event::Park { .. } | Event::Activity { .. })));
}

/// Security v3, partial: `vramwarden --config F resume PID` honours F's protected list (it
/// used the built-in list whatever F said), and says so before the driver is loaded.
#[test]
fn park_and_resume_honour_the_config_files_protected_list() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = tmp.path().join("config.toml");
    std::fs::write(&cfg, "[cleanup]\nprotected = [\"sleep\"]\n").expect("write");
    let s = sleeper();
    let out = bin()
        .arg("--config")
        .arg(&cfg)
        .args(["resume", &s.0.id().to_string()])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("sleep is on the protected list"), "{err}");
    // Without it, the same process is not protected (the driver is asked, or is missing).
    std::fs::write(&cfg, "[cleanup]\nprotected = []\n").expect("write");
    let out = bin()
        .arg("--config")
        .arg(&cfg)
        .args(["resume", &s.0.id().to_string()])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("protected list"), "{err}");
}
