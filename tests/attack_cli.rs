//! The attack suite, command-line half: the real binary against the promises of the trust
//! issue (data loss, exit codes, bad arguments). Each test failed on the code before it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vramwarden"));
    // No desktop session: nothing here may try D-Bus.
    c.env_remove("DBUS_SESSION_BUS_ADDRESS");
    c
}

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A short demo session at `path` (simulated time, as fast as the CPU allows).
fn demo_log(path: &Path, duration: &str) {
    let o = bin()
        .args(["record", "--demo", "--speed", "max", "--duration", duration])
        .arg("--out")
        .arg(path)
        .output()
        .expect("run record");
    assert!(o.status.success(), "{}", stderr_of(&o));
}

/// Rows of `table` exported to standard output.
fn export_rows(path: &Path, table: &str) -> Vec<String> {
    let o = bin()
        .arg("export")
        .arg(path)
        .args(["--csv", "-", "--table", table])
        .output()
        .expect("run export");
    assert!(o.status.success(), "{}", stderr_of(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .skip(1)
        .map(str::to_string)
        .collect()
}

#[test]
fn export_never_writes_over_its_input_or_an_existing_file() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("t.vwlog");
    demo_log(&log, "2min");
    let before = std::fs::read(&log).expect("read");
    // Over its own input: refused, the log untouched.
    let o = bin()
        .arg("export")
        .arg(&log)
        .arg("--csv")
        .arg(&log)
        .args(["--table", "devices"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("refusing to write over it"));
    assert_eq!(std::fs::read(&log).expect("read"), before, "log unchanged");
    // Over an existing CSV: refused without --force, written with it.
    let csv = dir.path().join("d.csv");
    std::fs::write(&csv, "keep me\n").expect("write");
    let o = bin()
        .arg("export")
        .arg(&log)
        .arg("--csv")
        .arg(&csv)
        .args(["--table", "devices"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr_of(&o).contains("--force"), "{}", stderr_of(&o));
    assert_eq!(std::fs::read_to_string(&csv).expect("read"), "keep me\n");
    let o = bin()
        .arg("export")
        .arg(&log)
        .arg("--csv")
        .arg(&csv)
        .args(["--table", "devices", "--force"])
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", stderr_of(&o));
    let text = std::fs::read_to_string(&csv).expect("read");
    assert!(text.starts_with("timestamp,"), "{text:.80}");
    // `--csv -` is standard output (no file named `-`), the summary goes to stderr.
    let o = bin()
        .current_dir(dir.path())
        .arg("export")
        .arg(&log)
        .args(["--csv", "-", "--table", "devices"])
        .output()
        .expect("run");
    assert!(o.status.success());
    assert!(!dir.path().join("-").exists(), "no file named -");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("timestamp,"), "{out:.80}");
    assert_eq!(
        out.lines().count(),
        1 + 2 * 120,
        "a header and 2 GPUs × 120 samples"
    );
    assert!(
        stderr_of(&o).contains("240 device rows"),
        "{}",
        stderr_of(&o)
    );
    // --csv /dev/stdout stays a clean CSV too.
    let o = bin()
        .arg("export")
        .arg(&log)
        .args(["--csv", "/dev/stdout", "--table", "devices"])
        .stdout(Stdio::piped())
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", stderr_of(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.lines().skip(1).all(|l| l.split(',').count() > 5),
        "only CSV rows"
    );
}

#[test]
fn a_closed_pipe_ends_export_quietly() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("s.vwlog");
    demo_log(&log, "2h");
    let mut child = bin()
        .arg("export")
        .arg(&log)
        .args(["--csv", "-", "--table", "processes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("read");
    assert!(first.starts_with("timestamp,"));
    // The reader goes away (`| head -1`).
    let status = child.wait().expect("wait");
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err)
        .expect("read");
    assert!(status.success(), "exit {status:?}: {err}");
    assert!(!err.to_lowercase().contains("broken pipe"), "{err}");
}

#[test]
fn exit_codes_tell_usage_from_no_driver() {
    let o = bin().arg("--bogus").output().expect("run");
    assert_eq!(o.status.code(), Some(2));
    let o = bin()
        .args(["record", "--demo", "--speed", "1e-300", "--duration", "1s"])
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    // This machine has no NVIDIA driver.
    let o = bin().arg("snapshot").output().expect("run");
    assert_eq!(o.status.code(), Some(3), "{}", stderr_of(&o));
    let o = bin().arg("--help").output().expect("run");
    assert!(String::from_utf8_lossy(&o.stdout).contains("3 no NVIDIA driver"));
}

#[test]
fn record_of_zero_length_is_refused_and_leaves_no_file() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("d.vwlog");
    let o = bin()
        .args([
            "record",
            "--demo",
            "--duration",
            "0",
            "--speed",
            "max",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run");
    assert_eq!(o.status.code(), Some(2), "{}", stderr_of(&o));
    assert!(!stderr_of(&o).contains("recorded 0"));
    assert!(String::from_utf8_lossy(&o.stdout).is_empty());
    assert!(!out.exists());
}

#[test]
fn record_takes_its_interval_from_the_settings() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "[sampling]\ninterval_ms = 2000\n").expect("write");
    let out = dir.path().join("s.vwlog");
    let o = bin()
        .arg("--config")
        .arg(&cfg)
        .args([
            "record",
            "--demo",
            "--speed",
            "max",
            "--duration",
            "20s",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("recorded 10 samples"),
        "{}",
        stderr_of(&o)
    );
}

#[test]
fn headless_record_never_tries_desktop_notifications() {
    // The demo's Jupyter kernel leaks 1 MiB/s: it is flagged within minutes.
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("s.vwlog");
    let o = bin()
        .args([
            "record",
            "--demo",
            "--speed",
            "max",
            "--duration",
            "15min",
            "--out",
        ])
        .arg(&out)
        .output()
        .expect("run");
    assert!(o.status.success(), "{}", stderr_of(&o));
    let events = export_rows(&out, "events");
    assert!(
        events.iter().any(|e| e.contains("leak_started")),
        "{events:?}"
    );
    let err = stderr_of(&o).to_lowercase();
    assert!(
        !err.contains("notification") && !err.contains("d-bus"),
        "{err}"
    );
}

/// Sets `RLIMIT_FSIZE` of `pid` (a full disk, as the process sees it).
fn set_file_size_limit(pid: u32, bytes: u64) {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: prlimit on a child we own, with a valid struct.
    let r = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &lim,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
}

#[test]
fn a_full_disk_is_reported_at_once_and_the_summary_counts_only_what_was_written() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("full.vwlog");
    let mut cmd = bin();
    cmd.args([
        "record",
        "--demo",
        "--interval",
        "100ms",
        "--duration",
        "8s",
        "--out",
    ])
    .arg(&out)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            // Writes past 4 KiB raise SIGXFSZ, whose default action kills the process:
            // vramwarden ignores it itself, so its writes fail with EFBIG instead.
            let lim = libc::rlimit {
                rlim_cur: 4 * 1024,
                rlim_max: libc::RLIM_INFINITY,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn");
    let pid = child.id();
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    // The first failed write is said at once.
    let t0 = Instant::now();
    let mut said = String::new();
    while !said.contains("recording failed") {
        let mut line = String::new();
        if err.read_line(&mut line).expect("read") == 0 {
            panic!("record ended without reporting the failure: {said}");
        }
        said.push_str(&line);
        assert!(t0.elapsed() < Duration::from_secs(8), "{said}");
    }
    // Space comes back mid-run.
    std::thread::sleep(Duration::from_millis(1500));
    set_file_size_limit(pid, libc::RLIM_INFINITY);
    let mut rest = String::new();
    err.read_to_string(&mut rest).expect("read");
    said.push_str(&rest);

    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(1), "non-zero exit: {said}");
    assert!(said.contains("recording resumed"), "{said}");
    assert!(said.contains("could not be written"), "{said}");
    // The summary counts what the file holds.
    let n = recorded_count(&said);
    let rows = export_rows(&out, "devices");
    assert_eq!(rows.len(), 2 * n, "{said}");
    // The gap is named in the log, with its cause.
    let events = export_rows(&out, "events");
    let gap = events
        .iter()
        .find(|e| e.contains("resumed after a gap"))
        .unwrap_or_else(|| panic!("{events:?}"));
    assert!(gap.contains("File too large"), "{gap}");
}

/// A session file in `dir` that looks `days` old and holds `bytes` of padding after a
/// real demo log.
fn old_log(dir: &Path, name: &str, days: u64) -> PathBuf {
    let p = dir.join(name);
    demo_log(&p, "30min");
    let t = std::time::SystemTime::now() - Duration::from_secs(days * 86_400);
    let f = std::fs::File::options().write(true).open(&p).expect("open");
    f.set_times(std::fs::FileTimes::new().set_modified(t).set_accessed(t))
        .expect("set times");
    p
}

/// The samples `record`'s summary line on stderr counts ("recorded N samples to …").
fn recorded_count(stderr: &str) -> usize {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("recorded "))
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no summary: {stderr}"))
}

#[test]
fn retention_never_deletes_a_log_being_written_and_record_prunes_too() {
    let data = tempfile::tempdir().expect("tmp");
    let sessions = data.path().join("sessions");
    std::fs::create_dir_all(&sessions).expect("mkdir");
    let cfg = data.path().join("c.toml");
    std::fs::write(
        &cfg,
        "[sessions]\nretention_days = 7\nretention_max_mib = 1\n",
    )
    .expect("write");
    let stale = old_log(&sessions, "20200101-000000-old.vwlog", 30);
    // A recorder writing into the folder, one sample an hour: after its first sample its
    // file is not touched again for a long time.
    let mut first = bin()
        .env("VRAMWARDEN_DATA_DIR", data.path())
        .arg("--config")
        .arg(&cfg)
        .args(["record", "--demo", "--interval", "1h"])
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(data.path().join("first.err")).expect("stderr file"),
        ))
        .spawn()
        .expect("spawn");
    let live = loop {
        let found: Vec<PathBuf> = std::fs::read_dir(&sessions)
            .expect("ls")
            .flatten()
            .map(|e| e.path())
            .filter(|p| *p != stale)
            .collect();
        if let Some(p) = found.first() {
            if std::fs::metadata(p).is_ok_and(|m| m.len() > 200) {
                std::thread::sleep(Duration::from_millis(200));
                break p.clone();
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Make the live log look 40 days old: only its lock protects it now.
    let t = std::time::SystemTime::now() - Duration::from_secs(40 * 86_400);
    std::fs::File::options()
        .write(true)
        .open(&live)
        .expect("open")
        .set_times(std::fs::FileTimes::new().set_modified(t))
        .expect("times");
    // The first recorder still runs (and so holds its log's lock); if not, say why.
    assert!(
        first.try_wait().expect("try_wait").is_none(),
        "the first recorder ended early: {}",
        std::fs::read_to_string(data.path().join("first.err")).unwrap_or_default()
    );
    let listed = |what: &str| {
        format!(
            "{what}; the folder: {:?}",
            std::fs::read_dir(&sessions)
                .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
                .unwrap_or_default()
        )
    };
    // A second recorder prunes at start, with the same code as the window.
    let second = bin()
        .env("VRAMWARDEN_DATA_DIR", data.path())
        .arg("--config")
        .arg(&cfg)
        .args([
            "record",
            "--demo",
            "--interval",
            "100ms",
            "--duration",
            "1s",
        ])
        .output()
        .expect("run");
    assert!(second.status.success(), "{}", stderr_of(&second));
    assert!(!stale.exists(), "the old log was pruned by headless record");
    assert!(
        live.exists(),
        "{}",
        listed(&format!(
            "the log being written ({}) was kept; the second recorder said: {}",
            live.display(),
            stderr_of(&second)
        ))
    );
    // SAFETY: SIGTERM to our own child.
    unsafe { libc::kill(first.id() as i32, libc::SIGTERM) };
    assert!(first.wait().expect("wait").success());
    let said = std::fs::read_to_string(data.path().join("first.err")).expect("stderr");
    let n = recorded_count(&said);
    assert!(n > 0);
    assert_eq!(
        export_rows(&live, "devices").len(),
        2 * n,
        "every sample is there"
    );
}
