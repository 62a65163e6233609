//! A command's final outcome comes back under its id: a park (or resume) is first accepted,
//! then its end arrives as a final reply with its figures, from the engine's park thread, and
//! the activity log says the same; a resume with no room on the GPU is refused at once, with
//! the reason, under its id. Without a GPU the park thread's driver says no (no `libcuda`
//! here, or, on a host with a driver, `sleep` is no CUDA process): that is the final reply
//! checked, with a real process, a real engine and its real park thread.

use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use vramwarden::act::rules::Action;
use vramwarden::engine::command::{CommandId, CommandReply, Stage};
use vramwarden::engine::settings::Settings;
use vramwarden::engine::shared::{Shared, SharedMonitor};
use vramwarden::engine::view::Monitor;
use vramwarden::engine::{Engine, EngineCommand, RecordTo};
use vramwarden::model::history::ProcSeriesKey;
use vramwarden::model::outcome::Outcome;
use vramwarden::model::{now_ms, ProcessKey, GIB};
use vramwarden::source::sim::{Script, SimDevice, SimProcess, SimSource};

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

/// The park ledger's folder for this test binary (set once, before anything reads it).
fn data_dir() -> &'static std::path::Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::tempdir().expect("tmp");
        std::env::set_var("VRAMWARDEN_DATA_DIR", d.path());
        d
    })
    .path()
}

/// A simulated 80 GiB GPU with `ghost_mib` held by no process, on which the real process
/// `pid` holds 1 GiB (a live process: its facts come from `/proc`).
fn gpu_with(pid: u32, ghost_mib: u64) -> SimSource {
    let mut s = SimSource::empty(
        now_ms() - 60_000,
        vec![SimDevice {
            name: "Sim GPU".into(),
            total_mib: 81_920,
            reserved_mib: 500,
            ghost_mib,
            power_cap_w: 700,
        }],
    );
    s.add(SimProcess {
        pid,
        device_index: 0,
        info: None,
        script: Script::Idle { mib: 1024 },
        start_s: 0.0,
        restart_every_s: None,
        life_s: f64::INFINITY,
        busy_pct: 0,
    });
    s
}

/// An engine that acts (no dry run), after one tick of `sim`; and `pid`'s key in it.
fn acting_engine(sim: &SimSource, pid: u32) -> (Engine, SharedMonitor, ProcSeriesKey) {
    let shared = Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
    let mut s = Settings::default();
    s.cleanup.dry_run = false;
    e.apply_settings(&s);
    let t = now_ms();
    e.tick(sim.at(t), t);
    let start = shared
        .read()
        .expect("lock")
        .latest
        .as_ref()
        .and_then(|l| l.processes.iter().find(|p| p.pid == pid))
        .map(|p| p.key().start_time_ms)
        .expect("the child is listed");
    let key = (
        ProcessKey {
            pid,
            start_time_ms: start,
        },
        0,
    );
    (e, shared, key)
}

/// Ticks until the engine hands over a final reply (at most 20 s).
fn final_reply(e: &mut Engine, sim: &SimSource) -> CommandReply {
    let t = Instant::now();
    loop {
        let now = now_ms();
        e.tick(sim.at(now), now);
        if let Some(r) = e.take_replies().into_iter().next() {
            return r;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no final reply");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_park_is_accepted_then_its_end_comes_under_its_id_with_its_seconds() {
    data_dir();
    let child = sleeper();
    let pid = child.0.id();
    let sim = gpu_with(pid, 0);
    let (mut e, shared, key) = acting_engine(&sim, pid);
    let id = CommandId::next();
    let first = e.command_under(
        id,
        EngineCommand::Manual {
            key,
            action: Action::Park,
            from: vramwarden::engine::CommandFrom::Window,
        },
        now_ms(),
    );
    assert_eq!(first.stage, Stage::Accepted, "{first:?}");
    assert_eq!(first.outcome, Outcome::Acted);
    assert!(first.detail.starts_with("parking sleep (PID"), "{first:?}");
    assert!(!first.detail.contains("its answer follows"), "{first:?}");
    // Another command meanwhile gets its own final reply at once, not the park's.
    let other = e.command_under(CommandId::next(), EngineCommand::PauseRecording, now_ms());
    assert!(other.is_final());

    let r = final_reply(&mut e, &sim);
    assert_eq!(r.id, id, "the final reply comes under the park's id");
    assert_eq!(r.what, Action::Park.label());
    assert!(r.answer.is_final());
    // No driver here (no libcuda), or a driver that finds no CUDA context in `sleep`.
    match r.answer.outcome {
        Outcome::Failed => assert!(
            r.answer.detail.contains("the park of sleep (PID")
                && r.answer.detail.contains("did not complete"),
            "{r:?}"
        ),
        Outcome::Skipped => assert!(
            r.answer
                .detail
                .contains("was refused, nothing was changed: not a CUDA process"),
            "{r:?}"
        ),
        other => panic!("a park of sleep ended {other:?}: {r:?}"),
    }
    let seconds = r.answer.seconds.expect("the seconds it took");
    assert!((0.0..20.0).contains(&seconds), "{seconds}");
    assert_eq!(r.answer.bytes, None, "nothing was moved");
    assert!(e.take_replies().is_empty(), "one final reply");
    // The View keeps it for an agent's windows, and the activity log says the same.
    let m = shared.read().expect("lock");
    assert_eq!(m.replies.back(), Some(&r));
    let last = m.activity.back().expect("the park's end is logged");
    assert_eq!(
        (last.outcome, &last.detail),
        (r.answer.outcome, &r.answer.detail)
    );
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the process runs on"
    );
}

#[test]
fn a_resume_without_room_on_the_gpu_is_refused_under_its_id_with_the_reason() {
    let dir = data_dir();
    let child = sleeper();
    let pid = child.0.id();
    // 78 GiB held by no process: about 2 GiB free, for a process that parked 40 GiB.
    let sim = gpu_with(pid, 78 * 1024);
    let (mut e, shared, key) = acting_engine(&sim, pid);
    vramwarden::act::park::ledger::record(&key, 40 * GIB);
    assert!(dir.join("parked").exists(), "the ledger is this test's");
    let id = CommandId::next();
    let a = e.command_under(
        id,
        EngineCommand::Manual {
            key,
            action: Action::Resume,
            from: vramwarden::engine::CommandFrom::Window,
        },
        now_ms(),
    );
    vramwarden::act::park::ledger::forget(&key);
    assert!(a.is_final(), "refused at once: {a:?}");
    assert_eq!(a.outcome, Outcome::Skipped, "{a:?}");
    assert!(
        a.detail
            .starts_with("not enough free GPU memory to restore it")
            && a.detail.contains("it stays parked"),
        "{a:?}"
    );
    // Nothing started: no later reply, and the refusal is logged as the action's outcome.
    let now = now_ms();
    e.tick(sim.at(now), now);
    assert!(e.take_replies().is_empty());
    let m = shared.read().expect("lock");
    let last = m.activity.back().expect("logged");
    assert_eq!((last.outcome, &last.detail), (Outcome::Skipped, &a.detail));
    assert!(m.replies.is_empty(), "no accepted command ended");
}

/// A command from an agent's API is judged by the engine's own safety settings: with the
/// global dry run on, the engine answers "would act", sends nothing and logs it; the same
/// command from a window is never a dry run.
#[test]
fn the_engine_applies_the_remote_policy_to_a_command_from_an_agent_and_logs_it() {
    use vramwarden::engine::CommandFrom;
    data_dir();
    let mut child = sleeper();
    let pid = child.0.id();
    let sim = gpu_with(pid, 0);
    let (mut e, shared, key) = acting_engine(&sim, pid);
    e.apply_settings(&Settings::default());
    let kill = |from| EngineCommand::Manual {
        key,
        action: Action::Signal {
            signal: "SIGKILL".into(),
        },
        from,
    };
    let a = e.command(kill(CommandFrom::Agent), now_ms());
    assert_eq!(a.outcome, Outcome::WouldAct, "{}", a.detail);
    assert!(
        a.detail
            .starts_with("dry run is on in the agent's settings (cleanup.dry_run): would "),
        "{}",
        a.detail
    );
    let logged = shared.read().expect("lock").activity.back().cloned();
    assert!(
        logged
            .as_ref()
            .is_some_and(|l| l.rule == "manual" && l.outcome == Outcome::WouldAct),
        "{logged:?}"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        child.0.try_wait().expect("try_wait").is_none(),
        "nothing was sent"
    );
    // The dry run predicts the real answer: a protected process is refused, dry run or not,
    // never "would act".
    let mut protecting = Settings::default();
    protecting.cleanup.protected.push("sleep".into());
    e.apply_settings(&protecting);
    let p = e.command(kill(CommandFrom::Agent), now_ms());
    assert_eq!(p.outcome, Outcome::Skipped, "{}", p.detail);
    assert!(p.detail.contains("protected"), "{}", p.detail);
    e.apply_settings(&Settings::default());
    let w = e.command(kill(CommandFrom::Window), now_ms());
    assert_eq!(w.outcome, Outcome::Acted, "{}", w.detail);
    let status = child.0.wait().expect("wait");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

/// The code review: a window's (or `vramwarden park`'s) own action reached another user's
/// process whenever vramwarden ran as root, with no setting allowing it. It is refused and
/// says where to allow it; with `cleanup.manual_other_users` on, it goes through. A real
/// process of uid 65534 (`setpriv`; root, as CI runs).
#[test]
fn a_click_on_another_users_process_needs_the_setting() {
    use vramwarden::engine::CommandFrom;
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (CI runs as root)"
    );
    data_dir();
    let child = Reaped(
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "sleep",
                "60",
            ])
            .spawn()
            .expect("setpriv"),
    );
    let pid = child.0.id();
    // setpriv execs sleep: wait until the process is sleep, owned by 65534.
    let t = Instant::now();
    while std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim() != "sleep")
        .unwrap_or(true)
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "setpriv did not exec"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let sim = gpu_with(pid, 0);
    let (mut e, _shared, key) = acting_engine(&sim, pid);
    let kill = EngineCommand::Manual {
        key,
        action: Action::Signal {
            signal: "SIGKILL".into(),
        },
        from: CommandFrom::Window,
    };
    let a = e.command(kill.clone(), now_ms());
    assert_eq!(a.outcome, Outcome::Skipped, "{}", a.detail);
    assert!(
        a.detail.contains("cleanup.manual_other_users"),
        "{}",
        a.detail
    );
    let mut allowing = Settings::default();
    allowing.cleanup.dry_run = false;
    allowing.cleanup.manual_other_users = true;
    e.apply_settings(&allowing);
    let a = e.command(kill, now_ms());
    assert_eq!(a.outcome, Outcome::Acted, "{}", a.detail);
    let mut child = child;
    let status = child.0.wait().expect("wait");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}
