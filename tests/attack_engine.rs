//! The attack suite, engine half: actions that must never reach the wrong process, a driver
//! that fails, hangs or talks nonsense (through the fault-injecting source, which stands in for
//! the driver only), and bugs that must not pass silently. Real processes and real signals.

use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vramwarden::act::rules::action::{expand_argv, ActionRunner, Outcome, Safety};
use vramwarden::act::rules::eval::{Planned, Target};
use vramwarden::act::rules::{Action, Conditions, Rule};
use vramwarden::engine::sampler::SamplerHandle;
use vramwarden::engine::settings::Settings;
use vramwarden::engine::view::Monitor;
use vramwarden::engine::{Engine, RecordTo};
use vramwarden::model::now_ms;
use vramwarden::model::{Origin, ProcessKey, UnixMs};
use vramwarden::source::fault::{Fault, FaultSource};
use vramwarden::source::sim::{Script, SimDevice, SimProcess, SimSource};
use vramwarden::source::GpuSource;

fn live_safety() -> Safety {
    Safety {
        global_dry_run: false,
        protected: vec![],
        remote: Default::default(),
    }
}

/// The start time of `pid` as vramwarden reads it.
fn start_of(pid: u32) -> UnixMs {
    vramwarden::host::procinfo::ProcReader::default()
        .start_time_ms(pid)
        .expect("start time")
}

fn planned(pid: u32, start: UnixMs, name: &str, action: Action, origin: Origin) -> Planned {
    Planned {
        rule: "attack".into(),
        action,
        dry_run: false,
        allow_other_users: false,
        target: Target::Process {
            key: (
                ProcessKey {
                    pid,
                    start_time_ms: start,
                },
                0,
            ),
            info: Some(std::sync::Arc::new(vramwarden::model::ProcInfo {
                name: name.into(),
                user: "me".into(),
                // SAFETY: getuid has no preconditions.
                uid: unsafe { libc::getuid() },
                ..Default::default()
            })),
            used_bytes: Some(8 << 30),
            origin,
        },
    }
}

/// Runs `p` and waits for the command it started (if any) to finish.
fn run_to_end(runner: &mut ActionRunner, p: &Planned) -> (Outcome, String) {
    let first = runner.run(p, &live_safety(), now_ms());
    if !first.detail.starts_with("started") {
        return (first.outcome, first.detail);
    }
    let t0 = Instant::now();
    loop {
        if let Some(a) = runner.poll(&|_| true, now_ms()).pop() {
            return (a.outcome, a.detail);
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "command never ended"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sleeper() -> Child {
    let c = Command::new("sleep").arg("60").spawn().expect("spawn");
    std::thread::sleep(Duration::from_millis(50));
    c
}

fn marker_command(dir: &std::path::Path) -> Action {
    Action::RunCommand {
        argv: vec![
            "touch".into(),
            format!("{}/ran-{{pid}}-{{start_time}}", dir.display()),
        ],
        timeout_seconds: 5.0,
    }
}

#[test]
fn run_command_checks_identity_right_before_spawning() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut child = sleeper();
    let pid = child.id();
    let start = start_of(pid);
    let mut runner = ActionRunner::new();
    // The PID now belongs to another process than the one the rule saw: nothing runs.
    let (o, d) = run_to_end(
        &mut runner,
        &planned(
            pid,
            start - 5_000,
            "sleep",
            marker_command(dir.path()),
            Origin::Live,
        ),
    );
    assert_eq!(o, Outcome::Skipped, "{d}");
    assert!(d.contains("another process"), "{d}");
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("ls").count(),
        0,
        "no command ran"
    );
    // The same process: the command runs, with {pid} and {start_time} filled in.
    let (o, d) = run_to_end(
        &mut runner,
        &planned(
            pid,
            start,
            "sleep",
            marker_command(dir.path()),
            Origin::Live,
        ),
    );
    assert_eq!(o, Outcome::Acted, "{d}");
    assert!(dir.path().join(format!("ran-{pid}-{start}")).exists());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn simulated_and_recorded_processes_are_never_acted_on() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut child = sleeper();
    let pid = child.id();
    let start = start_of(pid);
    let mut runner = ActionRunner::new();
    for (origin, words) in [
        (Origin::Simulated, "simulated process: nothing was sent"),
        (Origin::Recorded, "recorded session"),
    ] {
        for action in [
            marker_command(dir.path()),
            Action::Signal {
                signal: "SIGKILL".into(),
            },
            Action::Terminate { grace_seconds: 0.0 },
        ] {
            let (o, d) = run_to_end(&mut runner, &planned(pid, start, "sleep", action, origin));
            assert_eq!(o, Outcome::Skipped, "{d}");
            assert!(d.contains(words), "{d}");
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 0);
    assert!(child.try_wait().expect("wait").is_none(), "still alive");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn demo_rules_never_reach_host_processes() {
    // The issue's reproduction: a run_command rule on the demo's Triton server (PID 2231).
    let dir = tempfile::tempdir().expect("tmp");
    let mut s = Settings::default();
    s.cleanup.dry_run = false;
    s.cleanup.rules = vec![Rule {
        name: "triton".into(),
        dry_run: false,
        conditions: Conditions {
            name_regex: Some("^tritonserver$".into()),
            ..Conditions::default()
        },
        action: marker_command(dir.path()),
        cooldown_minutes: 0.0,
        ..Rule::default()
    }];
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
    e.apply_settings(&s);
    let t0 = now_ms();
    let sim = SimSource::demo(t0 - 60_000);
    for i in 0..5 {
        e.tick(sim.at(t0 + i * 1000), t0 + i * 1000);
    }
    std::thread::sleep(Duration::from_millis(300));
    e.tick(sim.at(t0 + 6000), t0 + 6000);
    let m = shared.read().expect("lock");
    assert!(!m.activity.is_empty());
    for a in &m.activity {
        assert_eq!(a.outcome, Outcome::Skipped, "{}", a.detail);
        assert!(a.detail.contains("simulated process"), "{}", a.detail);
    }
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 0);
}

#[test]
fn a_process_name_never_becomes_an_option() {
    // A real process whose name is `-rf`.
    let dir = tempfile::tempdir().expect("tmp");
    let exe = dir.path().join("-rf");
    std::fs::copy("/bin/sleep", &exe).expect("copy sleep");
    let mut child = Command::new(&exe).arg("60").spawn().expect("spawn -rf");
    std::thread::sleep(Duration::from_millis(50));
    let pid = child.id();
    let info = vramwarden::host::procinfo::ProcReader::default()
        .read(pid)
        .expect("proc");
    assert_eq!(info.name, "-rf");
    let out = dir.path().join("out");
    let echo = |argv: &[&str]| Action::RunCommand {
        argv: argv.iter().map(|s| (*s).to_string()).collect(),
        timeout_seconds: 5.0,
    };
    let mut runner = ActionRunner::new();
    let p = planned(
        pid,
        info.start_time_ms,
        &info.name,
        echo(&["touch", "{name}"]),
        Origin::Live,
    );
    let (o, d) = run_to_end(&mut runner, &p);
    assert_eq!(o, Outcome::Skipped, "{d}");
    assert!(d.contains("would become the option"), "{d}");
    // After `--` it is plain text: the file is made in the command's folder.
    let t = p.target.clone();
    assert!(expand_argv(&["touch".into(), "--".into(), "{name}".into()], &t).is_ok());
    std::fs::create_dir(&out).expect("mkdir");
    let p = planned(
        pid,
        info.start_time_ms,
        &info.name,
        echo(&[
            "/bin/sh",
            "-c",
            "cd \"$1\" && touch -- \"$2\"",
            "--",
            &out.display().to_string(),
            "{name}",
        ]),
        Origin::Live,
    );
    let (o, d) = run_to_end(&mut runner, &p);
    assert_eq!(o, Outcome::Acted, "{d}");
    assert!(out.join("-rf").exists());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_chatty_command_is_not_reported_as_timed_out() {
    let (o, d) = vramwarden::act::rules::action::run_command(
        &[
            "sh".into(),
            "-c".into(),
            "head -c 300000 /dev/zero | tr '\\0' x; echo; echo all-done".into(),
        ],
        Duration::from_secs(4),
    );
    assert_eq!(o, Outcome::Acted, "{d:.300}");
    assert!(d.contains("all-done"), "{d:.300}");
    assert!(d.contains("300010 bytes"), "{d:.300}");
    assert!(d.len() < 5000, "a bounded tail");
}

#[test]
fn an_oversized_regex_is_refused_where_the_settings_are_read() {
    // The issue's pattern: valid, but its compiled program is huge (Unicode \w × 200).
    let rule = Rule {
        name: "huge".into(),
        conditions: Conditions {
            cmdline_regex: Some(r"(\w{200}|x)+ipykernel".into()),
            ..Conditions::default()
        },
        ..Rule::default()
    };
    let problems = rule.problems();
    assert!(
        problems.iter().any(|(_, m)| m.contains("too large")),
        "{problems:?}"
    );
    assert!(vramwarden::act::rules::eval::CompiledRule::new(&rule).is_none());
}

fn one_gpu_with(pid: u32, mib: u64) -> SimSource {
    let mut s = SimSource::empty(
        now_ms() - 60_000,
        vec![SimDevice {
            name: "Sim".into(),
            total_mib: 81_920,
            reserved_mib: 500,
            ghost_mib: 0,
            power_cap_w: 700,
        }],
    );
    s.add(SimProcess {
        pid,
        device_index: 0,
        info: None,
        script: Script::Idle { mib },
        start_s: 0.0,
        restart_every_s: None,
        life_s: f64::INFINITY,
        busy_pct: 0,
    });
    s
}

#[test]
fn a_failed_process_list_is_missing_never_zero() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("s.vwlog");
    let mut child = sleeper();
    let (mut src, switch) = FaultSource::new(Box::new(one_gpu_with(child.id(), 8192)));
    // A rule that holds for 5 s: a failed list must not reset it.
    let mut s = Settings::default();
    s.cleanup.rules = vec![Rule {
        name: "hold".into(),
        conditions: Conditions {
            process_memory_min_mib: Some(1000.0),
            hold_seconds: 5.0,
            ..Conditions::default()
        },
        ..Rule::default()
    }];
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared.clone(), RecordTo::File(log.clone()), 1000);
    e.apply_settings(&s);
    let t0 = now_ms();
    for i in 0..8 {
        switch.set(if (2..5).contains(&i) {
            Fault::ProcessListFails
        } else {
            Fault::None
        });
        let t = t0 + i * 1000;
        e.tick(src.sample(t).expect("sample"), t);
        let m = shared.read().expect("lock");
        let rows: Vec<_> = m.rows().collect();
        assert_eq!(rows.len(), 1, "tick {i}");
        assert!(
            rows[0].exited_at_ms.is_none(),
            "tick {i}: never marked exited"
        );
        if (2..5).contains(&i) {
            assert_eq!(rows[0].used_bytes, None, "tick {i}: missing, not 0");
        }
    }
    // The hysteresis held through the failure: the rule fired at 5 s, once.
    let fired = shared.read().expect("lock").activity.len();
    assert_eq!(fired, 1);
    e.finish().expect("close");
    let data = vramwarden::session::reader::SessionData::open(&log).expect("open");
    let mut csv = Vec::new();
    vramwarden::session::csv_export::export(
        &data,
        vramwarden::session::csv_export::Table::Processes,
        &mut csv,
        &mut |_| true,
    )
    .expect("export");
    let csv = String::from_utf8(csv).expect("utf8");
    let header: Vec<&str> = csv.lines().next().expect("header").split(',').collect();
    let col = header
        .iter()
        .position(|h| h.starts_with("used"))
        .expect("used column");
    let used: Vec<String> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap_or("").to_string())
        .collect();
    assert_eq!(used.len(), 8, "{csv}");
    for (i, u) in used.iter().enumerate() {
        if (2..5).contains(&i) {
            assert_eq!(u, "", "sample {i} is missing: {csv}");
        } else {
            assert!(
                u.starts_with("8192") || u.starts_with("8589934592"),
                "sample {i}: {u}"
            );
        }
    }
    let mut ev = Vec::new();
    vramwarden::session::csv_export::export(
        &data,
        vramwarden::session::csv_export::Table::Events,
        &mut ev,
        &mut |_| true,
    )
    .expect("export");
    let ev = String::from_utf8(ev).expect("utf8");
    assert!(!ev.contains("process_exit"), "{ev}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn nonsense_from_the_driver_is_dropped_not_recorded() {
    let t0 = now_ms();
    let (mut src, switch) = FaultSource::new(Box::new(SimSource::demo(t0 - 120_000)));
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
    e.tick(src.sample(t0).expect("sample"), t0);
    let normal = shared.read().expect("lock").latest.clone().expect("snap");
    for (i, f) in [
        Fault::UsedAboveTotal,
        Fault::PidZero,
        Fault::DuplicatePid,
        Fault::GpuGone,
    ]
    .into_iter()
    .enumerate()
    {
        switch.set(f);
        let t = t0 + (i as i64 + 1) * 1000;
        e.tick(src.sample(t).expect("sample"), t);
        let m = shared.read().expect("lock");
        let s = m.latest.as_ref().expect("snap");
        assert!(s.processes.iter().all(|p| p.pid != 0), "{f:?}");
        let mut keys: Vec<_> = s
            .processes
            .iter()
            .map(|p| (p.pid, p.device_index))
            .collect();
        let n = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), n, "{f:?}: each process once");
        for d in &s.devices {
            if let (Some(u), Some(t)) = (d.memory_used_bytes, d.memory_total_bytes) {
                assert!(u <= t, "{f:?}: used ≤ total");
            }
        }
        for p in &s.processes {
            let total = s.devices[p.device_index as usize].memory_total_bytes;
            if let (Some(u), Some(t)) = (p.used_bytes, total) {
                assert!(u <= t, "{f:?}: process memory ≤ total");
            }
        }
        if f == Fault::GpuGone {
            // The last GPU's processes stand, marked stale; none exited.
            let gone = normal.devices.len() as u32 - 1;
            let before = normal
                .processes
                .iter()
                .filter(|p| p.device_index == gone)
                .count();
            let now: Vec<_> = s
                .processes
                .iter()
                .filter(|p| p.device_index == gone)
                .collect();
            assert_eq!(now.len(), before);
            assert!(now.iter().all(|p| p.stale && p.used_bytes.is_none()));
        }
    }
}

#[test]
fn a_hung_driver_leaves_the_monitor_readable_and_flags_stale() {
    let t0 = now_ms();
    let (src, switch) = FaultSource::new(Box::new(SimSource::demo(t0)));
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(100, 100));
    let handle = SamplerHandle::spawn(
        Box::new(move || Ok(Box::new(src) as Box<dyn GpuSource>)),
        Duration::from_millis(100),
        shared.clone(),
        Arc::new(|| {}),
    )
    .expect("spawn");
    let wait_for = |what: &dyn Fn(&Monitor) -> bool| {
        let t = Instant::now();
        loop {
            // Never blocks for long: the sampler holds the lock only to apply a snapshot.
            let r = Instant::now();
            let ok = what(&shared.read().expect("lock"));
            assert!(r.elapsed() < Duration::from_millis(100));
            if ok {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_for(&|m| m.ticks >= 2);
    switch.set(Fault::Hang);
    wait_for(&|m| m.is_stale(now_ms()));
    let ticks = shared.read().expect("lock").ticks;
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        shared.read().expect("lock").ticks,
        ticks,
        "no sample while hung"
    );
    switch.set(Fault::None);
    wait_for(&|m| m.ticks > ticks && !m.is_stale(now_ms()));
    assert!(handle.stop(Duration::from_secs(2)));
}

#[test]
fn a_panic_on_the_engine_thread_ends_record_with_an_error() {
    // A stand-in bug: the fault source panics on the sampler thread after the first sample.
    let t0 = now_ms();
    let (src, switch) = FaultSource::new(Box::new(SimSource::demo(t0)));
    let flip = switch.clone();
    let factory: vramwarden::engine::sampler::SourceFactory = Box::new(move || {
        flip.set(Fault::None);
        Ok(Box::new(src) as Box<dyn GpuSource>)
    });
    let arm = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        switch.set(Fault::Panic);
    });
    let t = Instant::now();
    let r = vramwarden::front::cli::run_realtime(
        factory,
        Duration::from_millis(100),
        100,
        RecordTo::Off,
        Some(Duration::from_secs(30)),
        &Settings::default(),
        vramwarden::engine::EngineOptions::default(),
    );
    arm.join().expect("join");
    let e = match r {
        Ok(_) => panic!("a panic on the engine thread ended the run as a success"),
        Err(e) => e,
    };
    assert_eq!(e.exit_code(), 1);
    assert!(e.to_string().contains("internal error"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10), "it did not hang");
}

#[test]
fn out_of_range_durations_never_panic_the_runner() {
    // Validation refuses them first; the runner clamps them as the second line.
    let mut runner = ActionRunner::new();
    let mut child = sleeper();
    let pid = child.id();
    let a = runner.run(
        &planned(
            pid,
            start_of(pid),
            "sleep",
            Action::RunCommand {
                argv: vec!["true".into()],
                timeout_seconds: 1e300,
            },
            Origin::Live,
        ),
        &live_safety(),
        now_ms(),
    );
    assert_ne!(a.outcome, Outcome::Failed, "{}", a.detail);
    let a = runner.run(
        &planned(
            pid,
            start_of(pid),
            "sleep",
            Action::Terminate {
                grace_seconds: 1e300,
            },
            Origin::Live,
        ),
        &live_safety(),
        now_ms(),
    );
    assert_eq!(a.outcome, Outcome::Acted, "{}", a.detail);
    let _ = child.wait();
}

#[test]
fn users_resolve_through_nss_and_rules_compare_uids() {
    // A user that only NSS knows (a systemd userdb drop-in record, as LDAP/SSSD users are
    // only in NSS too): not in /etc/passwd. Writing /run/userdb needs root, as CI runs.
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test runs as root (CI does)"
    );
    let (name, uid) = ("vwnss-attack", 61_235u32);
    let passwd = std::fs::read_to_string("/etc/passwd").expect("passwd");
    assert!(!passwd.contains(name), "the user is not in /etc/passwd");
    std::fs::create_dir_all("/run/userdb").expect("mkdir /run/userdb");
    let rec = format!("/run/userdb/{name}.user");
    let link = format!("/run/userdb/{uid}.user");
    std::fs::write(
        &rec,
        format!(r#"{{"userName":"{name}","uid":{uid},"gid":{uid},"disposition":"regular"}}"#),
    )
    .expect("write record");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(format!("{name}.user"), &link).expect("link");
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("sleep")
        .arg("60")
        .uid(uid)
        .spawn()
        .expect("spawn as the NSS user");
    std::thread::sleep(Duration::from_millis(50));
    let info = vramwarden::host::procinfo::ProcReader::default()
        .read(child.id())
        .expect("proc");
    assert_eq!(info.uid, uid);
    assert_eq!(info.user, name, "the name comes from NSS, not the number");
    assert_eq!(vramwarden::host::procinfo::uid_of_user(name), Some(uid));
    // Rules compare by uid.
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
    let sim = one_gpu_with(child.id(), 4096);
    let t = now_ms();
    e.tick(sim.at(t), t);
    let rule = |c: Conditions| Rule {
        name: "u".into(),
        conditions: c,
        ..Rule::default()
    };
    let m = shared.read().expect("lock");
    let is = rule(Conditions {
        user_is: Some(name.into()),
        ..Conditions::default()
    });
    let is_not = rule(Conditions {
        user_is_not: Some(name.into()),
        ..Conditions::default()
    });
    let by_number = rule(Conditions {
        user_is: Some(uid.to_string()),
        ..Conditions::default()
    });
    // What each rule matches now, judged by an executor that has seen nothing.
    let runner = vramwarden::act::rules::action::ActionRunner::new();
    let matched = |r| vramwarden::engine::test_rule(r, &m, &Default::default(), &runner).len();
    assert_eq!(matched(&is), 1);
    assert_eq!(matched(&by_number), 1);
    assert_eq!(matched(&is_not), 0);
    drop(m);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&link);
    let _ = std::fs::remove_file(&rec);
}

#[test]
fn a_fifo_in_the_sessions_folder_never_blocks_listing_or_retention() {
    let dir = tempfile::tempdir().expect("tmp");
    let fifo = dir.path().join("20200101-000000-x.vwlog");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: mkfifo with a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let d = dir.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let listed = vramwarden::session::catalog::list(&d).len();
        let removed =
            vramwarden::session::catalog::prune(&d, 1, 1, now_ms() + 10 * 86_400_000, None);
        let _ = tx.send((listed, removed.len()));
    });
    // A watchdog only turns a hang into a failure; nothing asserts on timing.
    let got = rx.recv_timeout(Duration::from_secs(60));
    if got.is_err() {
        // Free the blocked thread before failing.
        let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
    }
    assert_eq!(
        got.expect("listing and pruning never block on a FIFO"),
        (0, 0)
    );
    assert!(fifo.exists());
}
