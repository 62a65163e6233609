//! Rules with real processes and real signals: children are bound to GPU memory through the
//! simulated source, the engine runs the rules, and the test checks which signal each child
//! really died of (or that it is still alive).

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vramwarden::act::rules::action::{ActionRunner, Outcome, Safety};
use vramwarden::act::rules::eval::{Facts, Planned, RuleState, Target};
use vramwarden::act::rules::{Action, Conditions, Rule};
use vramwarden::engine::settings::Settings;
use vramwarden::engine::view::Monitor;
use vramwarden::engine::{Engine, RecordTo};
use vramwarden::model::now_ms;
use vramwarden::model::UnixMs;
use vramwarden::source::sim::{Script, SimDevice, SimProcess, SimSource};

fn device() -> SimDevice {
    SimDevice {
        name: "Sim GPU".into(),
        total_mib: 81_920,
        reserved_mib: 500,
        ghost_mib: 0,
        power_cap_w: 700,
    }
}

/// A simulated GPU on which each real `pid` holds `mib` (and is idle).
fn bind(pids: &[(u32, u64)]) -> SimSource {
    let mut s = SimSource::empty(now_ms() - 60_000, vec![device()]);
    for (pid, mib) in pids {
        s.add(SimProcess {
            pid: *pid,
            device_index: 0,
            info: None,
            script: Script::Idle { mib: *mib },
            start_s: 0.0,
            restart_every_s: None,
            life_s: f64::INFINITY,
            busy_pct: 0,
        });
    }
    s
}

fn sleeper() -> Child {
    Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep")
}

/// A child that ignores SIGTERM (the ignore survives exec).
fn stubborn() -> Child {
    let c = Command::new("sh")
        .args(["-c", "trap '' TERM; exec sleep 60"])
        .spawn()
        .expect("spawn sh");
    std::thread::sleep(Duration::from_millis(100));
    c
}

fn settings(rule: Rule, global_dry_run: bool, protected: &[&str]) -> Settings {
    let mut s = Settings::default();
    s.cleanup.dry_run = global_dry_run;
    s.cleanup.protected = protected.iter().map(|p| (*p).to_string()).collect();
    s.cleanup.rules = vec![rule];
    s
}

fn big_holder_rule(action: Action, dry_run: bool) -> Rule {
    Rule {
        name: "big holder".into(),
        dry_run,
        conditions: Conditions {
            process_memory_min_mib: Some(4096.0),
            ..Conditions::default()
        },
        action,
        ..Rule::default()
    }
}

fn engine(s: &Settings) -> (Engine, vramwarden::engine::shared::SharedMonitor) {
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
    e.apply_settings(s);
    (e, shared)
}

fn wait_exit(c: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let t = Instant::now();
    while t.elapsed() < within {
        if let Ok(Some(s)) = c.try_wait() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn kill(c: &mut Child) {
    let _ = c.kill();
    let _ = c.wait();
}

fn outcomes(m: &vramwarden::engine::shared::SharedMonitor) -> Vec<(Outcome, String)> {
    m.read()
        .expect("lock")
        .activity
        .iter()
        .map(|a| (a.outcome, a.detail.clone()))
        .collect()
}

#[test]
fn terminate_sends_sigterm_to_the_bound_process() {
    let mut child = sleeper();
    let sim = bind(&[(child.id(), 8192)]);
    let (mut e, m) = engine(&settings(
        big_holder_rule(Action::Terminate { grace_seconds: 5.0 }, false),
        false,
        &[],
    ));
    std::thread::sleep(Duration::from_millis(50));
    let t = now_ms();
    e.tick(sim.at(t), t);
    let st = wait_exit(&mut child, Duration::from_secs(3)).expect("child exited");
    assert_eq!(st.signal(), Some(libc::SIGTERM));
    let acts = outcomes(&m);
    assert_eq!(acts[0].0, Outcome::Acted, "{acts:?}");
    assert!(acts[0].1.contains("sent SIGTERM"), "{acts:?}");
}

/// The command-line review: a terminate whose process left on SIGTERM was also counted as a
/// skipped "SIGKILL after grace period" action. The SIGKILL not needed is shown, as the
/// terminate's follow-up, and the terminate alone counts as an action.
#[test]
fn a_sigkill_not_needed_is_the_terminates_follow_up() {
    use vramwarden::act::rules::action::Entry;
    let mut child = sleeper();
    let sim = bind(&[(child.id(), 8192)]);
    let (mut e, m) = engine(&settings(
        big_holder_rule(Action::Terminate { grace_seconds: 0.3 }, false),
        false,
        &[],
    ));
    let t = now_ms();
    e.tick(sim.at(t), t);
    let st = wait_exit(&mut child, Duration::from_secs(3)).expect("child exited");
    assert_eq!(st.signal(), Some(libc::SIGTERM));
    std::thread::sleep(Duration::from_millis(400));
    let t = now_ms();
    e.tick(sim.at(t), t);
    let entries: Vec<(Entry, String)> = m
        .read()
        .expect("lock")
        .activity
        .iter()
        .map(|a| (a.entry, a.detail.clone()))
        .collect();
    assert_eq!(entries.len(), 2, "{entries:?}");
    assert_eq!(entries[0].0, Entry::Action, "{entries:?}");
    assert!(entries[0].1.contains("sent SIGTERM"), "{entries:?}");
    assert_eq!(entries[1].0, Entry::FollowUp, "{entries:?}");
    assert!(entries[1].1.starts_with("not needed"), "{entries:?}");
}

#[test]
fn terminate_escalates_to_sigkill_when_sigterm_is_ignored() {
    let mut child = stubborn();
    let sim = bind(&[(child.id(), 8192)]);
    let (mut e, m) = engine(&settings(
        big_holder_rule(Action::Terminate { grace_seconds: 0.3 }, false),
        false,
        &[],
    ));
    let t = now_ms();
    e.tick(sim.at(t), t);
    assert_eq!(
        wait_exit(&mut child, Duration::from_millis(200)),
        None,
        "SIGTERM is ignored"
    );
    std::thread::sleep(Duration::from_millis(350));
    let t = now_ms();
    e.tick(sim.at(t), t);
    let st = wait_exit(&mut child, Duration::from_secs(3)).expect("killed");
    assert_eq!(st.signal(), Some(libc::SIGKILL));
    let acts = outcomes(&m);
    assert!(
        acts.iter()
            .any(|(o, d)| *o == Outcome::Acted && d.contains("sent SIGKILL")),
        "{acts:?}"
    );
}

#[test]
fn dry_run_sends_nothing_and_says_what_it_would_do() {
    let mut a = sleeper();
    let mut b = sleeper();
    let sim = bind(&[(a.id(), 8192), (b.id(), 8192)]);
    // Rule in dry run; and a live rule under the global dry run.
    for (rule_dry, global_dry) in [(true, false), (false, true)] {
        let (mut e, m) = engine(&settings(
            big_holder_rule(Action::Terminate { grace_seconds: 0.0 }, rule_dry),
            global_dry,
            &[],
        ));
        for _ in 0..3 {
            let t = now_ms();
            e.tick(sim.at(t), t);
            std::thread::sleep(Duration::from_millis(20));
        }
        let acts = outcomes(&m);
        assert_eq!(acts.len(), 2, "once per process (cooldown): {acts:?}");
        assert!(
            acts.iter()
                .all(|(o, d)| *o == Outcome::WouldAct && d.contains("would send SIGTERM")),
            "{acts:?}"
        );
    }
    assert_eq!(a.try_wait().expect("wait"), None, "still alive");
    assert_eq!(b.try_wait().expect("wait"), None, "still alive");
    kill(&mut a);
    kill(&mut b);
}

#[test]
fn protected_processes_are_never_touched() {
    let mut child = sleeper();
    let sim = bind(&[(child.id(), 8192)]);
    let (mut e, m) = engine(&settings(
        big_holder_rule(
            Action::Signal {
                signal: "SIGKILL".into(),
            },
            false,
        ),
        false,
        &["sleep"],
    ));
    let t = now_ms();
    e.tick(sim.at(t), t);
    assert_eq!(
        wait_exit(&mut child, Duration::from_millis(300)),
        None,
        "alive"
    );
    let acts = outcomes(&m);
    assert_eq!(acts[0].0, Outcome::Skipped);
    assert!(acts[0].1.contains("protected"), "{acts:?}");
    kill(&mut child);
}

fn planned_for(pid: u32, start_time_ms: UnixMs, uid: u32) -> Planned {
    Planned {
        rule: "test".into(),
        action: Action::Signal {
            signal: "SIGTERM".into(),
        },
        dry_run: false,
        allow_other_users: false,
        target: Target::Process {
            key: (vramwarden::model::ProcessKey { pid, start_time_ms }, 0),
            info: Some(std::sync::Arc::new(vramwarden::model::ProcInfo {
                name: "sleep".into(),
                user: "x".into(),
                uid,
                ..Default::default()
            })),
            used_bytes: Some(1 << 33),
            origin: vramwarden::model::Origin::Live,
        },
    }
}

#[test]
fn a_reused_pid_is_never_hit() {
    let safety = Safety {
        global_dry_run: false,
        protected: vec![],
        remote: Default::default(),
    };
    let mut runner = ActionRunner::new();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let procs = vramwarden::host::procinfo::ProcReader::default();
    // A process that exited: its identity is gone.
    let mut gone = sleeper();
    let gone_pid = gone.id();
    let gone_start = procs.start_time_ms(gone_pid).expect("start");
    kill(&mut gone);
    let a = runner.run(&planned_for(gone_pid, gone_start, uid), &safety, now_ms());
    assert_eq!(a.outcome, Outcome::Skipped, "{a:?}");
    // A live process whose PID is presented with another process's start time (as if the PID
    // had been reused since the rule saw it): refused, and the live process is untouched.
    let mut live = sleeper();
    std::thread::sleep(Duration::from_millis(30));
    let start = procs.start_time_ms(live.id()).expect("start");
    let a = runner.run(
        &planned_for(live.id(), start - 5_000, uid),
        &safety,
        now_ms(),
    );
    assert_eq!(a.outcome, Outcome::Skipped);
    assert!(a.detail.contains("another process"), "{}", a.detail);
    assert_eq!(
        wait_exit(&mut live, Duration::from_millis(200)),
        None,
        "untouched"
    );
    // With its true identity it is signalled.
    let a = runner.run(&planned_for(live.id(), start, uid), &safety, now_ms());
    assert_eq!(a.outcome, Outcome::Acted, "{a:?}");
    assert_eq!(
        wait_exit(&mut live, Duration::from_secs(2)).and_then(|s| s.signal()),
        Some(libc::SIGTERM)
    );
}

#[test]
fn never_pid_1_itself_or_other_users() {
    let safety = Safety {
        global_dry_run: false,
        protected: vec![],
        remote: Default::default(),
    };
    let mut runner = ActionRunner::new();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    for (pid, why) in [(1, "PID 1"), (std::process::id(), "itself")] {
        let a = runner.run(&planned_for(pid, 1, uid), &safety, now_ms());
        assert_eq!(a.outcome, Outcome::Skipped, "{why}");
    }
    let mut child = sleeper();
    let start = vramwarden::host::procinfo::ProcReader::default()
        .start_time_ms(child.id())
        .expect("start");
    let a = runner.run(
        &planned_for(child.id(), start, uid.wrapping_add(1)),
        &safety,
        now_ms(),
    );
    assert_eq!(a.outcome, Outcome::Skipped);
    assert!(a.detail.contains("another user"), "{}", a.detail);
    assert_eq!(wait_exit(&mut child, Duration::from_millis(200)), None);
    kill(&mut child);
}

/// The command-line review: on the simulated GPUs (`--demo`) a GPU-wide rule ran its command
/// for real. It is refused there, in words, and its command never starts; a notification of
/// the same rule still goes out.
#[test]
fn a_gpu_wide_command_is_not_run_on_the_simulated_gpus() {
    use vramwarden::source::GpuSource;
    let dir = std::env::temp_dir().join(format!("vw-simgpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mark = dir.join("touched");
    let rule = |name: &str, action| Rule {
        name: name.into(),
        dry_run: false,
        conditions: Conditions {
            device_used_min_pct: Some(5.0),
            ..Conditions::default()
        },
        action,
        ..Rule::default()
    };
    let touch = Action::RunCommand {
        argv: vec!["touch".into(), mark.display().to_string()],
        timeout_seconds: 5.0,
    };
    let mut s = settings(rule("full", touch), false, &[]);
    s.cleanup.rules.push(rule("told", Action::Notify));
    let sim = bind(&[(999_999, 8192)]);
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = vramwarden::engine::EngineBuilder::new(shared.clone(), 1000)
        .source(sim.info())
        .settings(&s)
        .build();
    for k in 0..5 {
        let t = now_ms() + k;
        e.tick(sim.at(t), t);
        std::thread::sleep(Duration::from_millis(100));
    }
    let said = outcomes(&shared);
    assert!(
        said.iter()
            .any(|(o, d)| *o == Outcome::Skipped && d == "simulated GPU: the command was not run"),
        "{said:?}"
    );
    // The Settings window's "Test rule" says the same of it (the engine's own executor
    // judges, which knows its GPUs are simulated), not "would act".
    let tested = e.command_under(
        vramwarden::engine::command::CommandId::next(),
        vramwarden::engine::EngineCommand::TestRule {
            rule: Box::new(s.cleanup.rules[0].clone()),
            safety: None,
        },
        now_ms(),
    );
    assert_eq!(tested.outcome, Outcome::Skipped, "{tested:?}");
    let skipped = tested
        .matches
        .iter()
        .flatten()
        .filter_map(|m| m.skipped.as_deref());
    assert!(
        skipped.eq(["simulated GPU: the command was not run"]),
        "{tested:?}"
    );
    assert!(
        said.iter()
            .any(|(o, d)| *o == Outcome::Acted && d.starts_with("notified")),
        "{said:?}"
    );
    assert!(!mark.exists(), "the command ran");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_command_replaces_placeholders_and_captures_output() {
    let rule = Rule {
        name: "full".into(),
        dry_run: false,
        conditions: Conditions {
            device_used_min_pct: Some(5.0),
            ..Conditions::default()
        },
        action: Action::RunCommand {
            argv: vec!["echo".into(), "gpu={gpu}".into(), "ok".into()],
            timeout_seconds: 5.0,
        },
        ..Rule::default()
    };
    let sim = bind(&[(999_999, 8192)]);
    let (mut e, m) = engine(&settings(rule, false, &[]));
    let t = now_ms();
    e.tick(sim.at(t), t);
    let t0 = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let t = now_ms();
        e.tick(sim.at(t), t);
        if outcomes(&m).iter().any(|(_, d)| d.contains("exited 0")) {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", outcomes(&m));
    }
    assert!(
        outcomes(&m)
            .iter()
            .any(|(o, d)| *o == Outcome::Acted && d.contains("gpu=0 ok")),
        "{:?}",
        outcomes(&m)
    );
    // Its start is shown, but the action is counted once (by the agent's
    // vramwarden_cleanup_actions_total): by its end, not by its start as well.
    let entries: Vec<vramwarden::act::rules::action::Entry> = m
        .read()
        .expect("lock")
        .activity
        .iter()
        .map(|a| a.entry)
        .collect();
    use vramwarden::act::rules::action::Entry;
    assert_eq!(entries, [Entry::Asked, Entry::Action], "{:?}", outcomes(&m));
    let (o, d) = vramwarden::act::rules::action::run_command(
        &["sleep".into(), "5".into()],
        Duration::from_millis(200),
    );
    assert_eq!(o, Outcome::Failed);
    assert!(d.contains("timed out"));
}

/// Pure evaluation: conditions, hysteresis, cooldown (fake PIDs, nothing is signalled).
mod eval {
    use super::*;
    use vramwarden::model::{ProcInfo, ProcessSample, Snapshot};

    fn snap(t: UnixMs, procs: &[(u32, u64, u32, &str, &str)]) -> Snapshot {
        // (pid, MiB, util %, user, cmdline)
        let mut s = SimSource::empty(0, vec![device()]).at(t);
        let mib: u64 = procs.iter().map(|p| p.1).sum();
        s.devices[0].memory_used_bytes = Some(mib << 20);
        s.devices[0].memory_free_bytes = Some((81_920 - 500 - mib) << 20);
        s.processes = procs
            .iter()
            .map(|(pid, mib, util, user, cmd)| ProcessSample {
                pid: *pid,
                device_index: 0,
                used_bytes: Some(mib << 20),
                sm_util_pct: Some(*util),
                info: Some(Arc::new(ProcInfo {
                    name: cmd.split_whitespace().next().unwrap_or("").into(),
                    cmdline: (*cmd).into(),
                    user: (*user).into(),
                    // Rules compare users by uid: alice is 1000, anyone else 1001.
                    uid: if *user == "alice" { 1000 } else { 1001 },
                    start_time_ms: 1_000,
                    container_id: None,
                    ..ProcInfo::default()
                })),
                ..ProcessSample::default()
            })
            .collect();
        s
    }

    fn rule(c: Conditions) -> Rule {
        Rule {
            name: "r".into(),
            conditions: c,
            cooldown_minutes: 10.0,
            ..Rule::default()
        }
    }

    fn fired(st: &mut RuleState, r: &Rule, s: &Snapshot) -> Vec<u32> {
        st.observe(s);
        st.evaluate(
            &vramwarden::act::rules::eval::compile(std::slice::from_ref(r)),
            s,
            &Facts::default(),
        )
        .iter()
        .map(|p| match &p.target {
            Target::Process { key, .. } => key.0.pid,
            Target::Device(i) => 1000 + i,
        })
        .collect()
    }

    #[test]
    fn idle_for_thirty_minutes_holding_more_than_8_gib() {
        let r = rule(Conditions {
            idle_min_minutes: Some(30.0),
            process_memory_min_mib: Some(8192.0),
            ..Conditions::default()
        });
        let mut st = RuleState::default();
        let mut first = None;
        for i in 0..=40 {
            let t = i * 60_000;
            // 10: idle and big; 11: busy and big; 12: idle but small.
            let s = snap(
                t,
                &[
                    (10, 9000, 0, "bob", "python3 -m ipykernel"),
                    (11, 9000, 80, "bob", "python3 train.py"),
                    (12, 100, 0, "bob", "python3 x.py"),
                ],
            );
            let f = fired(&mut st, &r, &s);
            if !f.is_empty() {
                first.get_or_insert((i, f));
            }
        }
        assert_eq!(first, Some((30, vec![10])));
    }

    #[test]
    fn memory_that_changes_is_not_idle() {
        let r = rule(Conditions {
            idle_min_minutes: Some(5.0),
            ..Conditions::default()
        });
        let mut st = RuleState::default();
        for i in 0..20 {
            let s = snap(i * 60_000, &[(10, 1000 + i as u64, 0, "bob", "python3")]);
            assert!(fired(&mut st, &r, &s).is_empty(), "minute {i}");
        }
    }

    #[test]
    fn hysteresis_and_cooldown() {
        let mut r = rule(Conditions {
            device_used_min_pct: Some(50.0),
            hold_seconds: 120.0,
            ..Conditions::default()
        });
        r.cooldown_minutes = 5.0;
        let mut st = RuleState::default();
        let mut fires = Vec::new();
        for i in 0..=900 {
            let t = i * 1000;
            // Full for 60 s (a spike: nothing), empty, then full from 200 s on.
            let full = (10..70).contains(&i) || i >= 200;
            let s = snap(
                t,
                if full {
                    &[(10, 60_000, 50, "a", "p")][..]
                } else {
                    &[(10, 100, 50, "a", "p")][..]
                },
            );
            if !fired(&mut st, &r, &s).is_empty() {
                fires.push(i);
            }
        }
        // Held from 200 s: fires at 320 s, then once per 5 min while it holds.
        assert_eq!(fires, vec![320, 620]);
    }

    #[test]
    fn name_user_quota_and_leak_conditions() {
        let s = snap(
            3_600_000,
            &[
                (10, 30_000, 50, "alice", "python3 a.py"),
                (11, 20_000, 50, "alice", "python3 b.py"),
                (12, 5_000, 50, "bob", "jupyter-lab"),
            ],
        );
        let st = RuleState::default();
        let m = |c: Conditions| -> Vec<u32> {
            st.matches_now(&rule(c), &s, &Facts::default())
                .iter()
                .filter_map(|t| match t {
                    Target::Process { key, .. } => Some(key.0.pid),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(
            m(Conditions {
                user_total_min_mib: Some(40_960.0),
                ..Conditions::default()
            }),
            vec![10, 11]
        );
        assert_eq!(
            m(Conditions {
                // A plain number is a uid (names resolve through NSS; these users are
                // fixtures, not accounts of this machine).
                user_is_not: Some("1000".into()),
                ..Conditions::default()
            }),
            vec![12]
        );
        assert_eq!(
            m(Conditions {
                cmdline_regex: Some(r"b\.py$".into()),
                ..Conditions::default()
            }),
            vec![11]
        );
        assert_eq!(
            m(Conditions {
                name_regex: Some("^jupyter".into()),
                user_is: Some("1001".into()),
                ..Conditions::default()
            }),
            vec![12]
        );
        assert_eq!(
            m(Conditions {
                age_min_minutes: Some(59.0),
                process_memory_min_mib: Some(25_000.0),
                ..Conditions::default()
            }),
            vec![10]
        );
        let key = (
            vramwarden::model::ProcessKey {
                pid: 11,
                start_time_ms: 1_000,
            },
            0,
        );
        let facts = Facts {
            leaking_since: [(key, 3_600_000 - 11 * 60_000)].into_iter().collect(),
        };
        let r = rule(Conditions {
            leaking_min_minutes: Some(10.0),
            ..Conditions::default()
        });
        assert_eq!(st.matches_now(&r, &s, &facts).len(), 1);
    }
}

/// The settings TOML block of the configuration guide (the one under "## Settings" in
/// docs/configuration.md, which the README links to).
fn readme_settings_toml() -> String {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/configuration.md"
    ))
    .expect("docs/configuration.md");
    let at = readme.find("\n## Settings").expect("a Settings section");
    let rest = &readme[at..];
    let start = rest.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = rest[start..].find("```").expect("its end");
    rest[start..start + end].to_string()
}

#[test]
fn the_readme_ladder_is_the_example_and_reads_back() {
    let s = Settings::from_toml(
        &readme_settings_toml(),
        std::path::Path::new("docs/configuration.md"),
    )
    .expect("the documented settings are valid");
    assert_eq!(s.cleanup.rules, example_ladder_rules());
    let kinds: Vec<&Action> = s.cleanup.rules.iter().map(|r| &r.action).collect();
    assert_eq!(kinds[0], &Action::ReleaseCache);
    assert_eq!(kinds[1], &Action::Notify);
    assert!(matches!(kinds[2], Action::Terminate { .. }));
    assert!(
        s.cleanup.rules[2].dry_run,
        "the terminate rung stays a dry run"
    );
}

/// The command-line review: the guide's "full file with the defaults" left out two protected
/// names, the guard and the forecast warning: copied, it quietly changed them. Every value
/// but the example rules is the default, and every key of the defaults is written out.
#[test]
fn the_guides_settings_file_is_the_defaults_in_full() {
    let text = readme_settings_toml();
    let mut s = Settings::from_toml(&text, std::path::Path::new("docs/configuration.md"))
        .expect("the documented settings are valid");
    s.cleanup.rules.clear();
    assert_eq!(s, Settings::default());
    let doc: toml::Table = toml::from_str(&text).expect("toml");
    let defaults: toml::Table =
        toml::from_str(&toml::to_string(&Settings::default()).expect("toml")).expect("toml");
    for (section, keys) in &defaults {
        let Some(keys) = keys.as_table() else {
            continue;
        };
        for key in keys.keys() {
            assert!(
                doc.get(section)
                    .and_then(|t| t.as_table())
                    .is_some_and(|t| t.contains_key(key)),
                "[{section}] {key} is not in docs/configuration.md"
            );
        }
    }
}

fn example_ladder_rules() -> Vec<Rule> {
    vramwarden::act::rules::model::example_ladder()
}

#[test]
fn pytorch_actions_and_conditions_in_toml() {
    let text = r#"
[cleanup]
dry_run = true
[[cleanup.rules]]
name = "release"
[cleanup.rules.conditions]
releasable_cache_min_mib = 4096.0
[cleanup.rules.action]
kind = "release_cache"
[[cleanup.rules]]
name = "limit"
[cleanup.rules.conditions]
allocated_growth_min_mib_per_min = 256.0
[cleanup.rules.action]
kind = "limit_memory"
gib = 40.0
"#;
    let s = Settings::from_toml(text, std::path::Path::new("t.toml")).expect("valid");
    let (a, b) = (&s.cleanup.rules[0], &s.cleanup.rules[1]);
    assert_eq!(a.action, Action::ReleaseCache);
    assert_eq!(a.action.label(), "release cached memory");
    assert_eq!(b.action, Action::LimitMemory { gib: 40.0 });
    assert_eq!(b.action.label(), "limit to 40 GiB");
    assert!(a.action.needs_process() && b.action.needs_process());
    assert_eq!(b.conditions.allocated_growth_min_mib_per_min, Some(256.0));
    assert!(b.conditions.targets_processes());
    assert!(b
        .describe()
        .contains("PyTorch allocated memory grows ≥ 256 MiB/min"));
    // Written back, the same TOML names.
    let back = toml::to_string(&s).expect("toml");
    assert!(back.contains("kind = \"release_cache\""), "{back}");
    assert!(back.contains("kind = \"limit_memory\""), "{back}");
    assert!(back.contains("gib = 40.0"), "{back}");

    // Out of range: each refused with the key and line it is on.
    for (bad, key) in [
        ("gib = 0.0", "gib"),
        ("gib = -3.0", "gib"),
        ("gib = nan", "gib"),
        ("gib = 1e30", "gib"),
        // Security v3: a subnormal limit passed `rules check`.
        ("gib = 5e-324", "gib"),
        ("gib = 0.001", "gib"),
    ] {
        let t = text.replace("gib = 40.0", bad);
        let e = Settings::from_toml(&t, std::path::Path::new("t.toml")).expect_err(bad);
        assert!(e.reason.contains(key), "{bad}: {e:?}");
        assert!(e.reason.contains("limit must be at least"), "{e:?}");
    }
    let t = text.replace(
        "allocated_growth_min_mib_per_min = 256.0",
        "allocated_growth_min_mib_per_min = -1.0",
    );
    let e = Settings::from_toml(&t, std::path::Path::new("t.toml")).expect_err("negative");
    assert!(
        e.reason.contains("allocated_growth_min_mib_per_min"),
        "{e:?}"
    );
    // A GPU-wide rule cannot release a cache: it names no process.
    let gpu_wide = Rule {
        name: "gpu".into(),
        conditions: Conditions {
            device_used_min_pct: Some(90.0),
            ..Conditions::default()
        },
        action: Action::ReleaseCache,
        ..Rule::default()
    };
    assert_eq!(gpu_wide.problems()[0].0, "action");
}

#[test]
fn the_releasable_cache_condition_fires_from_the_engines_figures() {
    use vramwarden::source::sim::SimTorch;
    let mut child = sleeper();
    // 8 GiB reserved, 10 % of it live tensors: 7372.8 MiB releasable.
    let sim = bind(&[(child.id(), 8192)]).with_torch(
        child.id(),
        SimTorch {
            allocated_pct: 10,
            cache_mib: 0,
            inactive_split_pct: 0,
            alloc_retries: 0,
        },
    );
    let rule = |min: f64| Rule {
        name: format!("cache ≥ {min}"),
        dry_run: false,
        conditions: Conditions {
            releasable_cache_min_mib: Some(min),
            ..Conditions::default()
        },
        action: Action::Notify,
        ..Rule::default()
    };
    for (min, fires) in [(7000.0, true), (7500.0, false)] {
        let (mut e, m) = engine(&settings(rule(min), false, &[]));
        let t = now_ms();
        e.tick(sim.at(t), t);
        let acts = outcomes(&m);
        assert_eq!(acts.len(), usize::from(fires), "{min}: {acts:?}");
        if fires {
            assert_eq!(acts[0].0, Outcome::Acted);
            assert!(
                acts[0].1.contains(&format!("PID {}", child.id())),
                "{acts:?}"
            );
        }
    }
    kill(&mut child);
}

#[test]
fn the_allocated_growth_condition_follows_the_torch_figures() {
    use vramwarden::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, TorchMem, MIB};
    let snap = |t: UnixMs, alloc_mib: u64| Snapshot {
        taken_at_ms: t,
        devices: vec![DeviceSample::default()],
        processes: vec![ProcessSample {
            pid: 77,
            device_index: 0,
            used_bytes: Some(40_000 * MIB),
            info: Some(Arc::new(ProcInfo {
                name: "python3".into(),
                start_time_ms: 1,
                ..ProcInfo::default()
            })),
            origin: vramwarden::model::Origin::Live,
            torch: Some(TorchMem {
                allocated_bytes: alloc_mib * MIB,
                reserved_bytes: 40_000 * MIB,
                ..TorchMem::default()
            }),
            ..ProcessSample::default()
        }],
    };
    let rule = |min: f64| Rule {
        name: "grows".into(),
        conditions: Conditions {
            allocated_growth_min_mib_per_min: Some(min),
            ..Conditions::default()
        },
        ..Rule::default()
    };
    let facts = Facts::default();
    let t0: UnixMs = 1_000_000;
    // 300 MiB a minute (5 MiB/s), read every second, with a ±40 MiB sawtooth of the steps.
    let mut st = RuleState::default();
    let mut matched_at = None;
    for i in 0..180 {
        let jitter = [0u64, 40, 80][i % 3];
        let s = snap(t0 + i as i64 * 1000, 1000 + 5 * i as u64 + jitter);
        st.observe(&s);
        if matched_at.is_none() && !st.matches_now(&rule(250.0), &s, &facts).is_empty() {
            matched_at = Some(i);
        }
        if i == 179 {
            assert!(st.matches_now(&rule(350.0), &s, &facts).is_empty());
            let key = (s.processes[0].key(), 0);
            let r = st.allocated_growth_mib_per_min(&key).expect("a rate");
            assert!((r - 300.0).abs() < 10.0, "{r}");
        }
    }
    // Not before the readings span a minute.
    assert_eq!(matched_at, Some(60));
    // Flat memory, and memory that was freed, never match; nor does a process without figures.
    let mut st = RuleState::default();
    for i in 0..120 {
        let s = snap(t0 + i * 1000, if i < 60 { 9000 } else { 2000 });
        st.observe(&s);
        assert!(st.matches_now(&rule(1.0), &s, &facts).is_empty(), "{i}");
    }
    let mut st = RuleState::default();
    for i in 0..120 {
        let mut s = snap(t0 + i * 1000, 1000 + 100 * i as u64);
        s.processes[0].torch = None;
        st.observe(&s);
        assert!(st.matches_now(&rule(1.0), &s, &facts).is_empty());
    }
}

#[test]
fn test_this_rule_sees_the_pytorch_conditions_from_the_monitor() {
    use vramwarden::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, TorchMem, MIB};
    let snap = |t: UnixMs, alloc_mib: u64| Snapshot {
        taken_at_ms: t,
        devices: vec![DeviceSample {
            memory_total_bytes: Some(81_920 * MIB),
            memory_used_bytes: Some(40_000 * MIB),
            memory_free_bytes: Some(41_920 * MIB),
            ..DeviceSample::default()
        }],
        processes: vec![ProcessSample {
            pid: 77,
            device_index: 0,
            used_bytes: Some(30_000 * MIB),
            info: Some(Arc::new(ProcInfo {
                name: "python3".into(),
                start_time_ms: 1,
                ..ProcInfo::default()
            })),
            origin: vramwarden::model::Origin::Simulated,
            torch: Some(TorchMem {
                allocated_bytes: alloc_mib * MIB,
                reserved_bytes: 30_000 * MIB,
                ..TorchMem::default()
            }),
            ..ProcessSample::default()
        }],
    };
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 600);
    let t0: UnixMs = 1_796_000_000_000;
    // Allocated grows 5 MiB/s = 300 MiB/min for three minutes.
    for i in 0..180 {
        let t = t0 + i * 1000;
        engine_state.apply(&mut m, snap(t, 1000 + 5 * i as u64), t);
    }
    let safety = Safety::default();
    let rule = |c: Conditions| Rule {
        name: "t".into(),
        conditions: c,
        action: Action::ReleaseCache,
        ..Rule::default()
    };
    let growth = |min: f64| Conditions {
        allocated_growth_min_mib_per_min: Some(min),
        ..Conditions::default()
    };
    // Judged by an executor that has seen nothing (the engine's own is tested above).
    let runner = vramwarden::act::rules::action::ActionRunner::new();
    let found = vramwarden::engine::test_rule(&rule(growth(250.0)), &m, &safety, &runner);
    assert_eq!(found.len(), 1, "{found:?}");
    // A simulated process is matched but never acted on (said as ahead: nothing was tried).
    assert_eq!(
        found[0].1.as_deref(),
        Some("a simulated process: the demo acts on nothing")
    );
    assert!(vramwarden::engine::test_rule(&rule(growth(400.0)), &m, &safety, &runner).is_empty());
    // Releasable cache: 30000 − 1895 MiB at the last sample.
    let cache = |min: f64| Conditions {
        releasable_cache_min_mib: Some(min),
        ..Conditions::default()
    };
    assert_eq!(
        vramwarden::engine::test_rule(&rule(cache(28_000.0)), &m, &safety, &runner).len(),
        1
    );
    assert!(vramwarden::engine::test_rule(&rule(cache(28_200.0)), &m, &safety, &runner).is_empty());
}

#[test]
fn nothing_acts_from_a_replay_neither_rules_nor_a_manual_action() {
    let mut child = sleeper();
    let sim = bind(&[(child.id(), 8192)]);
    // A replay's engine with a rule that would terminate the child at once.
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::read_only(shared.clone(), 1000, None);
    e.apply_settings(&settings(
        big_holder_rule(Action::Terminate { grace_seconds: 1.0 }, false),
        false,
        &[],
    ));
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..3 {
        let t = now_ms() + i * 1000;
        e.tick(sim.at(t), t);
    }
    let key = {
        let g = shared.read().expect("lock");
        let snap = g.latest.as_ref().expect("the samples were applied");
        (
            snap.processes.first().expect("the child is listed").key(),
            0,
        )
    };
    e.command(
        vramwarden::engine::EngineCommand::Manual {
            key,
            action: Action::Terminate { grace_seconds: 1.0 },
            from: vramwarden::engine::CommandFrom::Window,
        },
        now_ms(),
    );
    assert!(
        wait_exit(&mut child, Duration::from_millis(500)).is_none(),
        "the child was signalled from a replay"
    );
    let acts = outcomes(&shared);
    assert_eq!(acts.len(), 1, "only the refused manual action: {acts:?}");
    assert_eq!(acts[0].0, Outcome::Skipped);
    assert!(acts[0].1.contains("nothing acts from a replay"), "{acts:?}");
    kill(&mut child);
}
