//! The PyTorch actions (`release_cache`, `limit_memory`) against REAL `vramwarden_torch`
//! companions in real Python processes, through the action runner and through the engine (a
//! rule, and the window's manual action).
//!
//! This machine (and CI) has no torch: a companion answers "torch not imported", and that answer
//! is what a release or a limit must report. The companion here is the real one; the test only
//! wraps its request handler to append every request line it receives to a file (the request
//! log), so a test can tell what reached the process — nothing is faked.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vramwarden::act::rules::action::{
    ActionRunner, Activity, Entry, Outcome, Safety, ANSWER_SUFFIX,
};
use vramwarden::act::rules::companion_action::NO_COMPANION;
use vramwarden::act::rules::eval::{Planned, Target};
use vramwarden::act::rules::{Action, Conditions, Rule};
use vramwarden::engine::settings::Settings;
use vramwarden::engine::view::Monitor;
use vramwarden::engine::{Engine, EngineCommand, RecordTo};
use vramwarden::host::procinfo::ProcReader;
use vramwarden::model::now_ms;
use vramwarden::model::{Origin, ProcessKey, UnixMs};
use vramwarden::source::sim::{Script, SimDevice, SimProcess, SimSource};

/// The companion, with its request handler wrapped to log each request line to
/// `$VW_TEST_REQUEST_LOG`; `<log>.ready` appears once the wrapper is in place.
const LOGGED_COMPANION: &str = "\
import os, sys, vramwarden_torch
from vramwarden_torch import _server
log = os.environ['VW_TEST_REQUEST_LOG']
inner = _server.handle_line
def logged(line):
    with open(log, 'ab') as f:
        f.write(line + b'\\n')
    return inner(line)
_server.handle_line = logged
open(log + '.ready', 'w').close()
sys.stdin.read()
";

/// A companion process; killed on drop.
struct Py {
    child: Child,
    log: PathBuf,
}

impl Py {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn start_time_ms(&self) -> UnixMs {
        ProcReader::default()
            .start_time_ms(self.pid())
            .expect("its start time")
    }

    /// The `cmd` of every request the companion received, in order.
    fn requests(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON request");
                v["cmd"].as_str().unwrap_or("?").to_string()
            })
            .collect()
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts the logged companion. With `xdg`, its sockets folder is `xdg/vramwarden`; without,
/// it inherits ours (the folder the engine looks in by default).
fn companion(tmp: &Path, xdg: Option<&Path>) -> Py {
    let log = tmp.join(format!("requests-{}.log", now_ms()));
    let mut cmd = Command::new("python3");
    cmd.args(["-c", LOGGED_COMPANION])
        .env(
            "PYTHONPATH",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/python"),
        )
        .env("VW_TEST_REQUEST_LOG", &log)
        .stdin(Stdio::piped())
        .stdout(Stdio::null());
    if let Some(x) = xdg {
        cmd.env("XDG_RUNTIME_DIR", x);
    }
    let child = cmd.spawn().expect("python3 runs");
    let py = Py { child, log };
    let dir = match xdg {
        Some(x) => x.join("vramwarden"),
        None => vramwarden::act::torch::runtime_dir().expect("a runtime folder"),
    };
    wait_for(&dir.join(vramwarden::act::torch::socket_name(py.pid())));
    wait_for(&py.log.with_extension("log.ready"));
    py
}

fn my_uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

fn target(pid: u32, start_time_ms: UnixMs, origin: Origin) -> Target {
    Target::Process {
        key: (ProcessKey { pid, start_time_ms }, 0),
        info: Some(std::sync::Arc::new(vramwarden::model::ProcInfo {
            name: "python3".into(),
            user: "me".into(),
            uid: my_uid(),
            ..Default::default()
        })),
        used_bytes: Some(8 << 30),
        origin,
    }
}

fn planned(action: Action, target: Target, dry_run: bool) -> Planned {
    Planned {
        rule: "test".into(),
        action,
        dry_run,
        allow_other_users: false,
        target,
    }
}

fn safety() -> Safety {
    Safety {
        global_dry_run: false,
        protected: Vec::new(),
        remote: Default::default(),
    }
}

/// A runner that looks for companions in `xdg/vramwarden` only.
fn runner(xdg: &Path) -> ActionRunner {
    let mut r = ActionRunner::new();
    r.set_companion_dirs(vec![xdg.join("vramwarden")]);
    r
}

/// The companion's answer to the action `asked` (an "asked, its answer follows" entry: the
/// runner never waits on a companion), polled as the engine does on its later ticks.
fn answer(r: &mut ActionRunner, asked: &Activity) -> Activity {
    assert_eq!(
        (asked.outcome, asked.entry),
        (Outcome::Acted, Entry::Asked),
        "{asked:?}"
    );
    let t = Instant::now();
    loop {
        if let Some(a) = r.poll(&|_| true, now_ms()).pop() {
            assert_eq!(
                a.action,
                format!("{}{ANSWER_SUFFIX}", asked.action),
                "{a:?}"
            );
            assert_eq!(a.entry, Entry::Action, "{a:?}");
            return a;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no answer");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn release_reaches_the_companion_through_the_identity_check_and_reports_its_answer() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path(), Some(tmp.path()));
    let mut r = runner(tmp.path());
    let p = planned(
        Action::ReleaseCache,
        target(py.pid(), py.start_time_ms(), Origin::Live),
        false,
    );
    assert_eq!(r.would_refuse(&p, &safety()), None);
    let asked = r.run(&p, &safety(), now_ms());
    assert_eq!(asked.action, "release cached memory");
    let a = answer(&mut r, &asked);
    assert_eq!(a.outcome, Outcome::Failed, "{a:?}");
    assert!(
        a.detail
            .contains(&format!("process {} has not imported torch", py.pid())),
        "{a:?}"
    );
    // The peer-checked hello, then the release itself.
    assert_eq!(py.requests(), vec!["hello", "release_cache"]);
}

#[test]
fn limit_memory_asks_for_the_allocator_and_reports_torch_not_imported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path(), Some(tmp.path()));
    let mut r = runner(tmp.path());
    let t = target(py.pid(), py.start_time_ms(), Origin::Live);
    let p = planned(Action::LimitMemory { gib: 8.0 }, t, false);
    // Before any snapshot the runner does not know the GPU's size: nothing is sent.
    let a = r.run(&p, &safety(), now_ms());
    assert_eq!(a.outcome, Outcome::Failed, "{a:?}");
    assert!(a.detail.contains("total memory is not known"), "{a:?}");
    assert!(py.requests().is_empty(), "{:?}", py.requests());
    // With the GPU's size from a snapshot (80 GiB), the companion is asked for its figures.
    let sim = SimSource::empty(
        now_ms(),
        vec![SimDevice {
            name: "Sim GPU".into(),
            total_mib: 81_920,
            reserved_mib: 0,
            ghost_mib: 0,
            power_cap_w: 700,
        }],
    );
    assert!(r.observe(&sim.at(now_ms())).is_empty());
    let dry = r.run(
        &planned(Action::LimitMemory { gib: 8.0 }, p.target.clone(), true),
        &safety(),
        now_ms(),
    );
    assert_eq!(dry.outcome, Outcome::WouldAct);
    assert!(dry.detail.contains("memory fraction 0.1000"), "{dry:?}");
    assert!(
        py.requests().is_empty(),
        "a dry run sent {:?}",
        py.requests()
    );
    let asked = r.run(&p, &safety(), now_ms());
    assert_eq!(asked.action, "limit to 8 GiB");
    let a = answer(&mut r, &asked);
    assert_eq!(a.outcome, Outcome::Failed, "{a:?}");
    assert!(a.detail.contains("has not imported torch"), "{a:?}");
    assert_eq!(py.requests(), vec!["hello", "stats"]);
}

#[test]
fn a_wrong_start_time_is_refused_before_anything_is_sent() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path(), Some(tmp.path()));
    let start = py.start_time_ms();
    let mut r = runner(tmp.path());
    let p = planned(
        Action::ReleaseCache,
        target(py.pid(), start - 5_000, Origin::Live),
        false,
    );
    let a = r.run(&p, &safety(), now_ms());
    assert_eq!(a.outcome, Outcome::Skipped, "{a:?}");
    assert!(a.detail.contains("now belongs to another process"), "{a:?}");
    // The transport checks it too, on its own: the client refuses the peer before its hello.
    let dirs = vec![tmp.path().join("vramwarden")];
    let b = vramwarden::act::rules::companion_action::release(&dirs, py.pid(), start - 5_000, "x");
    assert_eq!(b.outcome, Outcome::Skipped, "{b:?}");
    assert!(b.detail.contains("not at the expected"), "{b:?}");
    assert!(py.requests().is_empty(), "sent {:?}", py.requests());
}

#[test]
fn a_process_without_a_companion_gets_the_clear_refusal() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut sleeper = Command::new("sleep").arg("30").spawn().expect("sleep");
    std::thread::sleep(Duration::from_millis(50));
    let start = ProcReader::default()
        .start_time_ms(sleeper.id())
        .expect("start");
    let mut r = runner(tmp.path());
    for action in [Action::ReleaseCache, Action::LimitMemory { gib: 4.0 }] {
        for dry in [false, true] {
            let p = planned(
                action.clone(),
                target(sleeper.id(), start, Origin::Live),
                dry,
            );
            let why = r.would_refuse(&p, &safety()).expect("refused");
            assert!(why.starts_with(NO_COMPANION), "{why}");
            let a = r.run(&p, &safety(), now_ms());
            assert_eq!(a.outcome, Outcome::Skipped, "{a:?}");
            assert!(a.detail.starts_with(NO_COMPANION), "{a:?}");
        }
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
}

#[test]
fn dry_run_and_simulated_or_recorded_processes_send_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let py = companion(tmp.path(), Some(tmp.path()));
    let start = py.start_time_ms();
    let mut r = runner(tmp.path());
    // The rule's dry run, and the global one.
    let a = r.run(
        &planned(
            Action::ReleaseCache,
            target(py.pid(), start, Origin::Live),
            true,
        ),
        &safety(),
        now_ms(),
    );
    assert_eq!(a.outcome, Outcome::WouldAct, "{a:?}");
    assert!(
        a.detail.starts_with("would ask the PyTorch companion"),
        "{a:?}"
    );
    let global = Safety {
        global_dry_run: true,
        protected: Vec::new(),
        remote: Default::default(),
    };
    let a = r.run(
        &planned(
            Action::ReleaseCache,
            target(py.pid(), start, Origin::Live),
            false,
        ),
        &global,
        now_ms(),
    );
    assert_eq!(a.outcome, Outcome::WouldAct, "{a:?}");
    // The companion's real pid and start time, but a simulated or recorded process.
    for (origin, words) in [
        (Origin::Simulated, "simulated process: nothing was sent"),
        (Origin::Recorded, "a process from a recorded session"),
    ] {
        for action in [Action::ReleaseCache, Action::LimitMemory { gib: 1.0 }] {
            let a = r.run(
                &planned(action, target(py.pid(), start, origin), false),
                &safety(),
                now_ms(),
            );
            assert_eq!(a.outcome, Outcome::Skipped, "{a:?}");
            assert!(a.detail.starts_with(words), "{a:?}");
        }
    }
    assert!(py.requests().is_empty(), "sent {:?}", py.requests());
}

/// A simulated GPU of 80 GiB on which the real process `pid` holds 8 GiB (a live process: its
/// facts come from `/proc`).
fn bind(pid: u32) -> SimSource {
    let mut s = SimSource::empty(
        now_ms() - 60_000,
        vec![SimDevice {
            name: "Sim GPU".into(),
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
        script: Script::Idle { mib: 8192 },
        start_s: 0.0,
        restart_every_s: None,
        life_s: f64::INFINITY,
        busy_pct: 0,
    });
    s
}

fn engine_with(rule: Option<Rule>) -> (Engine, vramwarden::engine::shared::SharedMonitor) {
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
    let mut s = Settings::default();
    s.cleanup.dry_run = false;
    s.cleanup.rules = rule.into_iter().collect();
    e.apply_settings(&s);
    (e, shared)
}

fn activity(
    m: &vramwarden::engine::shared::SharedMonitor,
) -> Vec<(String, String, Outcome, String)> {
    m.read()
        .expect("lock")
        .activity
        .iter()
        .map(|a| {
            (
                a.rule.clone(),
                a.action.clone(),
                a.outcome,
                a.detail.clone(),
            )
        })
        .collect()
}

/// The activity once the entry after the first `n` arrived: the engine ticks (the rule's
/// own further entries aside, see the caller) until a companion's answer comes.
fn answered(
    e: &mut Engine,
    sim: &SimSource,
    m: &vramwarden::engine::shared::SharedMonitor,
    n: usize,
) -> Vec<(String, String, Outcome, String)> {
    let t = Instant::now();
    loop {
        let acts = activity(m);
        if acts.len() > n && acts[n].1.ends_with(ANSWER_SUFFIX) {
            return acts;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no answer: {acts:?}");
        std::thread::sleep(Duration::from_millis(20));
        let now = now_ms();
        e.tick(sim.at(now), now);
    }
}

#[test]
fn a_release_cache_rule_and_the_manual_actions_reach_a_real_companion_through_the_engine() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // In the default sockets folder, where the engine looks.
    let py = companion(tmp.path(), None);
    let sim = bind(py.pid());
    let rule = Rule {
        name: "release big holders".into(),
        dry_run: false,
        conditions: Conditions {
            process_memory_min_mib: Some(4096.0),
            ..Conditions::default()
        },
        action: Action::ReleaseCache,
        ..Rule::default()
    };
    assert!(rule.problems().is_empty(), "{:?}", rule.problems());
    let (mut e, m) = engine_with(Some(rule));
    let t = now_ms();
    let started = Instant::now();
    e.tick(sim.at(t), t);
    // The tick did not wait for the companion: it asked, and the answer follows.
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let acts = activity(&m);
    let (rule_name, action, outcome, detail) = acts.first().expect("the rule fired").clone();
    assert_eq!(rule_name, "release big holders");
    assert_eq!(action, "release cached memory");
    assert_eq!(outcome, Outcome::Acted, "{acts:?}");
    assert!(detail.ends_with("its answer follows"), "{acts:?}");
    let acts = answered(&mut e, &sim, &m, 1);
    let (rule_name, action, outcome, detail) = acts[1].clone();
    assert_eq!(rule_name, "release big holders");
    assert_eq!(action, format!("release cached memory{ANSWER_SUFFIX}"));
    assert_eq!(outcome, Outcome::Failed, "{acts:?}");
    assert!(
        detail.contains(&format!("process {} has not imported torch", py.pid())),
        "{acts:?}"
    );
    assert!(py.requests().contains(&"release_cache".to_string()));

    // The window's manual actions: the engine builds the target from its own snapshot.
    let key = (
        ProcessKey {
            pid: py.pid(),
            start_time_ms: py.start_time_ms(),
        },
        0,
    );
    for action in [Action::ReleaseCache, Action::LimitMemory { gib: 8.0 }] {
        let before = activity(&m).len();
        let id = vramwarden::engine::command::CommandId::next();
        let first = e.command_under(
            id,
            EngineCommand::Manual {
                key,
                action: action.clone(),
                from: vramwarden::engine::CommandFrom::Window,
            },
            now_ms(),
        );
        // Accepted: the companion's answer is the command's final reply, under its id.
        assert!(!first.is_final(), "{first:?}");
        assert!(
            first.detail.starts_with("asked the PyTorch companion"),
            "{first:?}"
        );
        let acts = activity(&m);
        assert_eq!(acts.len(), before + 1, "{acts:?}");
        let (rule_name, label, outcome, _) = acts.last().expect("logged").clone();
        assert_eq!(rule_name, "manual");
        assert_eq!(label, action.label());
        assert_eq!(outcome, Outcome::Acted, "{acts:?}");
        let acts = answered(&mut e, &sim, &m, before + 1);
        let (rule_name, label, outcome, detail) = acts[before + 1].clone();
        assert_eq!(rule_name, "manual");
        assert_eq!(label, format!("{}{ANSWER_SUFFIX}", action.label()));
        assert_eq!(outcome, Outcome::Failed, "{acts:?}");
        assert!(detail.contains("has not imported torch"), "{acts:?}");
        let last = e.take_replies();
        assert_eq!(last.len(), 1, "{last:?}");
        assert_eq!((last[0].id, &last[0].what), (id, &action.label()));
        assert!(last[0].answer.is_final());
        assert_eq!(
            (last[0].answer.outcome, &last[0].answer.detail),
            (Outcome::Failed, &detail)
        );
        assert!(last[0].answer.seconds.is_some_and(|s| s < 10.0));
    }
    let reqs = py.requests();
    assert_eq!(
        reqs.iter().filter(|r| *r == "release_cache").count(),
        2,
        "{reqs:?}"
    );
    // Without torch there is no device to limit: no fraction was set.
    assert!(!reqs.contains(&"set_fraction".to_string()), "{reqs:?}");
}
