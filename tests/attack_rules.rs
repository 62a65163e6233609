//! The attack suite, rules (security v2, items 13–16): a placeholder that reaches a shell, a
//! job that calls itself `Xorg`, a process name that is not UTF-8, and commands without a
//! bound. Real processes, real signals, real commands; the uid tests run a process as uid
//! 65534 with `setpriv` and need root, as CI runs them. Each test failed on the code before it.

use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vramwarden::act::rules::action::{ActionRunner, Outcome, Safety, DEFAULT_PROTECTED};
use vramwarden::act::rules::eval::{Planned, Target};
use vramwarden::act::rules::Action;
use vramwarden::host::procinfo::ProcReader;
use vramwarden::model::{now_ms, Origin, ProcInfo, ProcessKey, UnixMs};

fn assert_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test needs root (CI runs as root)"
    );
}

fn live(protected: &[&str]) -> Safety {
    Safety {
        global_dry_run: false,
        protected: protected.iter().map(|s| (*s).to_string()).collect(),
        remote: Default::default(),
    }
}

fn process(pid: u32, start: UnixMs, name: &str, uid: u32, rule: &str, action: Action) -> Planned {
    Planned {
        rule: rule.into(),
        action,
        dry_run: false,
        allow_other_users: true,
        target: Target::Process {
            key: (
                ProcessKey {
                    pid,
                    start_time_ms: start,
                },
                0,
            ),
            info: Some(Arc::new(ProcInfo {
                name: name.into(),
                user: "u".into(),
                uid,
                start_time_ms: start,
                ..Default::default()
            })),
            used_bytes: Some(8 << 30),
            origin: Origin::Live,
        },
    }
}

fn gpu_rule(rule: &str, argv: &[&str], timeout_seconds: f64) -> Planned {
    Planned {
        rule: rule.into(),
        action: Action::RunCommand {
            argv: argv.iter().map(|s| (*s).to_string()).collect(),
            timeout_seconds,
        },
        dry_run: false,
        allow_other_users: false,
        target: Target::Device(0),
    }
}

/// A child, killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `python3 -c` that names itself `name` (bytes, as a Python literal) with
/// `prctl(PR_SET_NAME)` and sleeps; as `uid` through setpriv when given.
fn renamed(name: &str, uid: Option<u32>) -> Proc {
    let code = format!(
        "import ctypes, time\nctypes.CDLL(None).prctl(15, {name}, 0, 0, 0)\nprint('ok', flush=True)\ntime.sleep(60)"
    );
    let mut cmd = match uid {
        Some(u) => {
            let mut c = Command::new("setpriv");
            let u = u.to_string();
            c.args([
                "--reuid",
                &u,
                "--regid",
                &u,
                "--clear-groups",
                "/usr/bin/python3",
            ]);
            c
        }
        None => Command::new("python3"),
    };
    let mut child = cmd
        .args(["-c", &code])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().expect("stdout")),
        &mut line,
    )
    .expect("ready");
    assert_eq!(line.trim(), "ok");
    Proc(child)
}

fn start_of(pid: u32) -> UnixMs {
    ProcReader::default().start_time_ms(pid).expect("start")
}

/// Item 13: a `{name}` inside `sh -c`'s script is refused where the settings are read …
#[test]
fn a_placeholder_inside_a_shell_script_is_refused_by_rules_check() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = tmp.path().join("config.toml");
    std::fs::write(
        &cfg,
        "[[cleanup.rules]]\nname = \"log\"\nconditions = { process_memory_min_mib = 1 }\naction = { kind = \"run_command\", argv = [\"/bin/sh\", \"-c\", \"echo {name} >> /tmp/log\"], timeout_seconds = 5.0 }\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args(["rules", "check", "--config"])
        .arg(&cfg)
        .output()
        .expect("runs");
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.toml:4")
            && err.contains("{name} is part of the argument")
            && err.contains("\"sh\", \"{name}\""),
        "{err}"
    );
    // The safe form, the value as a positional argument, is accepted.
    std::fs::write(
        &cfg,
        "[[cleanup.rules]]\nname = \"log\"\nconditions = { process_memory_min_mib = 1 }\naction = { kind = \"run_command\", argv = [\"/bin/sh\", \"-c\", \"echo \\\"$1\\\" >> /tmp/log\", \"sh\", \"{name}\"], timeout_seconds = 5.0 }\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args(["rules", "check", "--config"])
        .arg(&cfg)
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
}

/// … and, should such a rule get past, never run: the issue's `;touch /tmp/PW` process.
#[test]
fn a_process_name_never_runs_as_a_shell_command() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pw = tmp.path().join("PW");
    let sleeper = Proc(Command::new("sleep").arg("30").spawn().expect("sleep"));
    let pid = sleeper.0.id();
    let name = format!(";touch {}", pw.display());
    let p = process(
        pid,
        start_of(pid),
        &name,
        nix::unistd::getuid().as_raw(),
        "shell",
        Action::RunCommand {
            argv: vec!["/bin/sh".into(), "-c".into(), "echo {name}".into()],
            timeout_seconds: 5.0,
        },
    );
    let mut runner = ActionRunner::new();
    let a = runner.run(&p, &live(&[]), now_ms());
    assert_eq!(a.outcome, Outcome::Skipped, "{}", a.detail);
    assert!(
        a.detail.contains("{name} is part of the argument"),
        "{}",
        a.detail
    );
    std::thread::sleep(Duration::from_millis(300));
    for a in runner.poll(&|_| true, now_ms()) {
        assert_ne!(a.outcome, Outcome::Acted, "{a:?}");
    }
    assert!(!pw.exists(), "the process's name ran as a command");
}

/// The issue's wrappers (security v3, item 2), each with the text placeholder inside its
/// script and as a whole argument where the wrapper takes it as code.
const WRAPPED: &[&[&str]] = &[
    &["timeout", "5", "/bin/sh", "-c", "echo {name}"],
    &["nice", "/bin/sh", "-c", "echo {name}"],
    &["flock", "/tmp/vw-flock", "-c", "echo {name}"],
    &["su", "root", "-c", "echo {name}"],
    &[
        "runuser",
        "-u",
        "root",
        "--",
        "/bin/sh",
        "-c",
        "echo {name}",
    ],
    &["/bin/sh", "-c", "--", "echo {name}"],
    &["bash", "-cx", "echo {name}"],
    &["sh", "-cv", "echo {name}"],
    &["env", "-S", "sh -c 'echo {name}'"],
    &["perl", "-E", "system('echo {name}')"],
    &["timeout", "5", "/bin/sh", "-c", "{name}"],
    &["/bin/sh", "-c", "--", "{name}"],
    &["env", "-S", "{name}"],
    &["bash", "-cx", "{name}"],
    &["nice", "sh", "{name}"],
];

fn rule_file(dir: &Path, argv: &[&str]) -> std::path::PathBuf {
    let cfg = dir.join("config.toml");
    let argv: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
    std::fs::write(
        &cfg,
        format!(
            "[[cleanup.rules]]\nname = \"hook\"\nconditions = {{ process_memory_min_mib = 1 }}\naction = {{ kind = \"run_command\", argv = [{}], timeout_seconds = 5.0 }}\n",
            argv.join(", ")
        ),
    )
    .expect("write");
    cfg
}

fn rules_check(cfg: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args(["rules", "check", "--config"])
        .arg(cfg)
        .output()
        .expect("runs")
}

/// Item 2 (v3): `{name}` reaches a shell through a wrapper (`timeout`, `nice`, `flock -c`,
/// `su -c`, `runuser`, `sh -c --`, `bash -cx`, `env -S`, `perl -E`): `rules check` refuses
/// each, saying why; a real process named `;touch PW` runs none of them.
#[test]
fn wrappers_never_hand_a_name_to_a_shell() {
    let tmp = tempfile::tempdir().expect("tmp");
    for argv in WRAPPED {
        let out = rules_check(&rule_file(tmp.path(), argv));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{argv:?} accepted: {err}");
        assert!(
            err.contains("{name} is part of the argument")
                || err.contains("{name} follows the option")
                || err.contains("{name} is the first argument of"),
            "{argv:?}: {err}"
        );
    }
    let pw = tmp.path().join("PW");
    let sleeper = Proc(Command::new("sleep").arg("30").spawn().expect("sleep"));
    let pid = sleeper.0.id();
    // Short enough for a real comm (15 bytes) would need a short path; the name the engine
    // reads is what reaches the rule either way.
    let name = format!(";touch {}", pw.display());
    let mut runner = ActionRunner::new();
    for argv in WRAPPED {
        let p = process(
            pid,
            start_of(pid),
            &name,
            nix::unistd::getuid().as_raw(),
            "shell",
            Action::RunCommand {
                argv: argv.iter().map(|a| (*a).to_string()).collect(),
                timeout_seconds: 5.0,
            },
        );
        let a = runner.run(&p, &live(&[]), now_ms());
        assert_eq!(a.outcome, Outcome::Skipped, "{argv:?}: {}", a.detail);
    }
    std::thread::sleep(Duration::from_millis(500));
    for a in runner.poll(&|_| true, now_ms()) {
        assert_ne!(a.outcome, Outcome::Acted, "{a:?}");
    }
    assert!(!pw.exists(), "the process's name ran as a command");
}

/// Runners that run their arguments as shell code or a command wherever `{name}` stands
/// among them: `ssh host {name}` and `watch -n 5 {name}` passed `rules check`, and a process
/// named `a;touch${IFS}PWNED2` run by `watch -n 1` ran `touch`.
const RUNNER_FORMS: &[&[&str]] = &[
    &["/usr/bin/ssh", "gpu-gateway", "{name}"],
    &["/usr/bin/watch", "-n", "5", "{name}"],
    &["/usr/bin/watch", "-n", "1", "{name}"],
    &["sudo", "-u", "nobody", "/usr/bin/logger", "{name}"],
    &["docker", "exec", "c1", "echo", "{user}"],
    &[
        "timeout",
        "5",
        "/bin/sh",
        "-c",
        "echo \"$1\"",
        "sh",
        "{name}",
    ],
];

#[test]
fn a_runner_never_gets_a_name_wherever_it_stands() {
    let tmp = tempfile::tempdir().expect("tmp");
    for argv in RUNNER_FORMS {
        let out = rules_check(&rule_file(tmp.path(), argv));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{argv:?} accepted: {err}");
        assert!(err.contains("is an argument of"), "{argv:?}: {err}");
    }
    // A program that takes data, not commands, still gets the name.
    let out = rules_check(&rule_file(
        tmp.path(),
        &["/usr/bin/logger", "-t", "vramwarden", "{name}"],
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And should such a rule get past, it never runs: a real process with the tester's name.
    let sleeper = Proc(Command::new("sleep").arg("30").spawn().expect("sleep"));
    let pid = sleeper.0.id();
    let marker = format!("vw-pwned-{}", std::process::id());
    let name = format!("a;touch${{IFS}}{marker}");
    let mut runner = ActionRunner::new();
    for argv in RUNNER_FORMS {
        let p = process(
            pid,
            start_of(pid),
            &name,
            nix::unistd::getuid().as_raw(),
            "runner",
            Action::RunCommand {
                argv: argv.iter().map(|a| (*a).to_string()).collect(),
                timeout_seconds: 3.0,
            },
        );
        let a = runner.run(&p, &live(&[]), now_ms());
        assert_eq!(a.outcome, Outcome::Skipped, "{argv:?}: {}", a.detail);
        assert!(a.detail.contains("is an argument of"), "{}", a.detail);
    }
    std::thread::sleep(Duration::from_millis(500));
    for a in runner.poll(&|_| true, now_ms()) {
        assert_ne!(a.outcome, Outcome::Acted, "{a:?}");
    }
    let planted = std::env::current_dir().expect("cwd").join(&marker);
    let ran = planted.exists();
    let _ = std::fs::remove_file(&planted);
    assert!(!ran, "the process's name ran as a command");
}

/// Item 3 (v3): `{name}` in the program's path — a job named `../shared/m` made root run
/// the attacker's `m.sh`. Refused by `rules check` and when it would run; a name with a `/`
/// or a leading `.` never reaches an argument either.
#[test]
fn a_name_never_chooses_the_program_or_a_path() {
    let tmp = tempfile::tempdir().expect("tmp");
    let hooks = tmp.path().join("hooks");
    let shared = tmp.path().join("shared");
    std::fs::create_dir_all(&hooks).expect("mkdir");
    std::fs::create_dir_all(&shared).expect("mkdir");
    let ran = tmp.path().join("RAN");
    let m = shared.join("m.sh");
    std::fs::write(&m, format!("#!/bin/sh\ntouch {}\n", ran.display())).expect("write");
    std::fs::set_permissions(&m, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let program = format!("{}/{{name}}.sh", hooks.display());
    let out = rules_check(&rule_file(tmp.path(), &[&program, "{pid}"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {err}");
    assert!(err.contains("{name} is in the program's path"), "{err}");

    let sleeper = Proc(Command::new("sleep").arg("30").spawn().expect("sleep"));
    let pid = sleeper.0.id();
    let mut runner = ActionRunner::new();
    for (argv, why) in [
        (vec![program.clone(), "{pid}".to_string()], "program's path"),
        (
            vec![m.display().to_string(), "{name}".to_string()],
            "could name a path",
        ),
    ] {
        let p = process(
            pid,
            start_of(pid),
            "../shared/m",
            nix::unistd::getuid().as_raw(),
            "hook",
            Action::RunCommand {
                argv,
                timeout_seconds: 5.0,
            },
        );
        let a = runner.run(&p, &live(&[]), now_ms());
        assert_eq!(a.outcome, Outcome::Skipped, "{}", a.detail);
        assert!(a.detail.contains(why), "{}", a.detail);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(!ran.exists(), "the job's name chose the program that ran");
    // The same hook with a plain name runs (the check is not a blanket refusal).
    let p = process(
        pid,
        start_of(pid),
        "python3",
        nix::unistd::getuid().as_raw(),
        "hook",
        Action::RunCommand {
            argv: vec![m.display().to_string(), "{name}".to_string()],
            timeout_seconds: 5.0,
        },
    );
    let a = runner.run(&p, &live(&[]), now_ms());
    assert!(a.detail.starts_with("started"), "{}", a.detail);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ran.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(ran.exists(), "the hook did not run for a plain name");
}

/// Item 14: a job of another user that calls itself `Xorg` is not protected; the real thing
/// (here: a root process of that name) is.
#[test]
fn a_job_named_xorg_is_not_protected_but_a_root_xorg_is() {
    assert_root();
    let safety = live(DEFAULT_PROTECTED);
    let mut runner = ActionRunner::new();
    let fake = renamed("b'Xorg'", Some(65534));
    let pid = fake.0.id();
    let p = process(
        pid,
        start_of(pid),
        "Xorg",
        65534,
        "impostor",
        Action::Signal {
            signal: "SIGTERM".into(),
        },
    );
    let a = runner.run(&p, &safety, now_ms());
    assert_eq!(a.outcome, Outcome::Acted, "{}", a.detail);
    let mut fake = fake;
    let status = fake.0.wait().expect("wait");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM)
    );

    let real = renamed("b'Xorg'", None);
    let pid = real.0.id();
    let p = process(
        pid,
        start_of(pid),
        "Xorg",
        0,
        "root",
        Action::Signal {
            signal: "SIGTERM".into(),
        },
    );
    let a = runner.run(&p, &safety, now_ms());
    assert_eq!(a.outcome, Outcome::Skipped, "{}", a.detail);
    assert!(
        a.detail.contains("Xorg is on the protected list"),
        "{}",
        a.detail
    );
    // An entry with a `/` names the executable itself.
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("exe");
    let by_path = live(&[exe.to_str().expect("utf-8")]);
    let a = runner.run(&p, &by_path, now_ms());
    assert_eq!(a.outcome, Outcome::Skipped, "{}", a.detail);
}

/// Item 15: a process whose name is not UTF-8 keeps its user and start time.
#[test]
fn a_non_utf8_name_keeps_the_user_and_start_time() {
    let p = renamed("b'\\xff\\xfeGPU\\x80job'", None);
    let pid = p.0.id();
    let info = ProcReader::default()
        .read(pid)
        .expect("the process is read");
    assert_eq!(info.name, "\u{fffd}\u{fffd}GPU\u{fffd}job");
    assert_eq!(info.uid, nix::unistd::getuid().as_raw());
    assert_ne!(info.user, "?");
    assert!(info.start_time_ms > 0);
    assert_eq!(
        Some(info.start_time_ms),
        ProcReader::default().start_time_ms(pid)
    );
}

/// True while `pid` runs (gone or a zombie: false).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| !r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn wait_gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while running(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// A command that starts a background `sleep`, writes its pid to `file` and waits.
fn with_background(file: &Path) -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        format!("sleep 30 & echo $! > {}; wait", file.display()),
    ]
}

fn background_pid(file: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(pid) = std::fs::read_to_string(file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Item 16: one run per rule and target in flight, and a cap over all rules.
#[test]
fn commands_are_one_per_rule_and_target_and_capped_overall() {
    let mut runner = ActionRunner::new();
    let safety = live(&[]);
    let sleep = ["sleep", "5"];
    let a = runner.run(&gpu_rule("r0", &sleep, 10.0), &safety, now_ms());
    assert!(a.detail.starts_with("started"), "{}", a.detail);
    let again = runner.run(&gpu_rule("r0", &sleep, 10.0), &safety, now_ms());
    assert_eq!(again.outcome, Outcome::Skipped);
    assert!(again.detail.contains("still running"), "{}", again.detail);
    for i in 1..vramwarden::act::rules::command::MAX_RUNNING {
        let a = runner.run(&gpu_rule(&format!("r{i}"), &sleep, 10.0), &safety, now_ms());
        assert!(a.detail.starts_with("started"), "{i}: {}", a.detail);
    }
    let over = runner.run(&gpu_rule("one more", &sleep, 10.0), &safety, now_ms());
    assert_eq!(over.outcome, Outcome::Skipped);
    assert!(
        over.detail.contains("8 commands are already running"),
        "{}",
        over.detail
    );
}

/// Item 16: a command's process group ends on its timeout and when the runner (the engine)
/// is dropped: nothing it started outlives it.
#[test]
fn a_commands_group_ends_on_timeout_and_with_the_engine() {
    let tmp = tempfile::tempdir().expect("tmp");
    let safety = live(&[]);
    let mut runner = ActionRunner::new();
    let f1 = tmp.path().join("bg1");
    let argv = with_background(&f1);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    runner.run(&gpu_rule("timeout", &argv, 1.0), &safety, now_ms());
    let bg = background_pid(&f1);
    let deadline = Instant::now() + Duration::from_secs(10);
    let done = loop {
        if let Some(a) = runner.poll(&|_| true, now_ms()).pop() {
            break a;
        }
        assert!(Instant::now() < deadline, "the command never ended");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(done.detail.contains("timed out"), "{}", done.detail);
    assert!(wait_gone(bg), "its background process outlived the timeout");

    let f2 = tmp.path().join("bg2");
    let argv = with_background(&f2);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    runner.run(&gpu_rule("long", &argv, 60.0), &safety, now_ms());
    let bg = background_pid(&f2);
    assert!(running(bg));
    drop(runner);
    assert!(wait_gone(bg), "a command's process outlived the engine");
}

/// `/usr/bin/sleep 60` as uid 65534, with `env` set (through `env`), killed on drop.
fn sleep_as_nobody(env: &[(&str, &str)]) -> Proc {
    let mut cmd = Command::new("setpriv");
    cmd.args([
        "--reuid",
        "65534",
        "--regid",
        "65534",
        "--clear-groups",
        "/usr/bin/env",
    ]);
    for (k, v) in env {
        cmd.arg(format!("{k}={v}"));
    }
    let p = Proc(cmd.args(["/usr/bin/sleep", "60"]).spawn().expect("setpriv"));
    // Until env has become sleep.
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_link(format!("/proc/{}/exe", p.0.id()))
        .map_or(true, |e| !e.ends_with("sleep"))
    {
        assert!(Instant::now() < deadline, "sleep did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    p
}

/// Security v3, item 4: protection by a root-owned executable is not borrowable. A user's
/// `LD_PRELOAD=job.so /usr/bin/sleep` is a root-owned `sleep` running the user's code: with
/// `sleep` on the protected list it is still acted on, while the same program without the
/// preload stays protected.
#[test]
fn a_preloaded_root_program_of_a_user_is_not_protected() {
    assert_root();
    let tmp = tempfile::tempdir().expect("tmp");
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let so = tmp.path().join("job.so");
    let ok = Command::new("cc")
        .args(["-shared", "-fPIC", "-x", "c", "/dev/null", "-o"])
        .arg(&so)
        .status()
        .expect("cc");
    assert!(ok.success(), "cc could not make a shared library");
    std::os::unix::fs::lchown(&so, Some(65534), Some(65534)).expect("chown");
    let safety = live(&["sleep"]);
    let mut runner = ActionRunner::new();
    let term = || Action::Signal {
        signal: "SIGTERM".into(),
    };
    // The real thing: protected.
    let real = sleep_as_nobody(&[]);
    let pid = real.0.id();
    let p = process(pid, start_of(pid), "sleep", 65534, "r", term());
    let a = runner.run(&p, &safety, now_ms());
    assert_eq!(a.outcome, Outcome::Skipped, "{}", a.detail);
    assert!(a.detail.contains("protected"), "{}", a.detail);
    // The borrowed one: acted on.
    let mut fake = sleep_as_nobody(&[("LD_PRELOAD", so.to_str().expect("utf-8"))]);
    // The loader maps the library after the exec that made it `sleep`: wait for it.
    let maps = format!("/proc/{}/maps", fake.0.id());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(&maps).is_ok_and(|m| m.contains("job.so")) {
        assert!(Instant::now() < deadline, "the library is loaded");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = fake.0.id();
    let p = process(pid, start_of(pid), "sleep", 65534, "r", term());
    let a = runner.run(&p, &safety, now_ms());
    assert_eq!(a.outcome, Outcome::Acted, "{}", a.detail);
    let status = fake.0.wait().expect("wait");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM)
    );
}

/// A settings file with `units = "<15 MiB of a>"` made `rules check` print a 15 MB error
/// (`unknown variant 'aaaa…'`): a value quoted in an error is cut, saying its length.
#[test]
fn an_error_never_repeats_a_whole_hostile_value() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = tmp.path().join("config.toml");
    let value = "a".repeat(15 << 20);
    std::fs::write(&cfg, format!("[general]\nunits = \"{value}\"\n")).expect("write");
    let out = rules_check(&cfg);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.len() < 8192, "{} bytes of error", err.len());
    assert!(err.contains("… (15728640 bytes)"), "{err}");
    // The same for a rule's name, repeated by a check of the rules.
    let name = "n".repeat(1 << 20);
    std::fs::write(
        &cfg,
        format!("[[cleanup.rules]]\nname = \"{name}\"\nconditions = {{ process_memory_min_mib = 1 }}\naction = {{ kind = \"run_command\", argv = [\"/bin/sh\", \"-c\", \"echo {{name}}\"], timeout_seconds = 5.0 }}\n"),
    )
    .expect("write");
    let out = rules_check(&cfg);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.len() < 8192, "{} bytes of error", err.len());
}
