//! Logging through `tracing`: `RUST_LOG` works, headless commands log to stderr, the window
//! keeps a log file (tested where no window can open: the failure is logged there).

use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vramwarden"));
    c.env_remove("RUST_LOG").env_remove("JOURNAL_STREAM");
    c
}

#[test]
fn rust_log_turns_on_debug_lines_on_stderr_for_headless_commands() {
    let quiet = bin().args(["--demo", "snapshot"]).output().expect("run");
    assert!(quiet.status.success());
    assert!(
        quiet.stderr.is_empty(),
        "default level is quiet: {}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    let loud = bin()
        .args(["--demo", "snapshot"])
        .env("RUST_LOG", "debug")
        .output()
        .expect("run");
    assert!(loud.status.success());
    let err = String::from_utf8_lossy(&loud.stderr);
    assert!(err.contains("DEBUG") && err.contains("starting"), "{err}");
    // stdout stays the clean JSON document.
    serde_json::from_slice::<serde_json::Value>(&loud.stdout).expect("JSON on stdout");
}

#[test]
fn a_bad_rust_log_is_reported_and_the_default_used() {
    let out = bin()
        .args(["--demo", "snapshot"])
        .env("RUST_LOG", "vramwarden=notalevel")
        .output()
        .expect("run");
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a valid filter"), "{err}");
}

/// (The window is in the `gui` build only.)
#[cfg(feature = "gui")]
#[test]
fn the_window_writes_a_log_file_in_the_data_dir_and_captures_library_logs() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().expect("tempdir");
    // No display here: the window cannot open, which is logged (exit code 1).
    let mut child = bin()
        .args(["--demo", "--no-record"])
        .env("VRAMWARDEN_DATA_DIR", dir.path())
        .env("VRAMWARDEN_CONFIG", dir.path().join("none.toml"))
        .env("RUST_LOG", "debug")
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the window neither opened nor failed within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(1));
    let logs = dir.path().join("logs");
    let files: Vec<_> = std::fs::read_dir(&logs)
        .expect("logs folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = files[0]
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string();
    assert!(
        name.starts_with("vramwarden.") && name.ends_with(".log"),
        "{name}"
    );
    let text = std::fs::read_to_string(&files[0]).expect("read log");
    assert!(text.contains("no display to open the window on"), "{text}");
    // A record of the `log` crate from eframe or winit, captured through tracing-log.
    assert!(
        text.contains("eframe") || text.contains("winit"),
        "no library log lines: {text}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&logs).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}

/// Under systemd (JOURNAL_STREAM set) each line starts with its syslog priority, which
/// journald takes as the entry's priority; the time stamp is left to the journal.
#[test]
fn under_journald_lines_carry_their_priority() {
    let out = bin()
        .args(["--demo", "snapshot"])
        .env("JOURNAL_STREAM", "8:12345")
        .env("RUST_LOG", "debug")
        .output()
        .expect("run");
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let starting = err
        .lines()
        .find(|l| l.contains("starting"))
        .unwrap_or_else(|| panic!("no start line: {err}"));
    assert!(starting.starts_with("<7>"), "{starting}");
    assert!(
        !starting.contains("DEBUG"),
        "the priority replaces the level word: {starting}"
    );
    let bad = bin()
        .args(["--demo", "snapshot"])
        .env("JOURNAL_STREAM", "8:12345")
        .env("RUST_LOG", "vramwarden=notalevel")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.starts_with("<4>") && err.contains("not a valid filter"),
        "{err}"
    );
}

/// -v turns on debug lines and -q keeps even warnings out, when RUST_LOG is unset.
#[test]
fn v_and_q_pick_the_level() {
    let v = bin()
        .args(["-v", "--demo", "snapshot"])
        .output()
        .expect("run");
    assert!(v.status.success());
    let err = String::from_utf8_lossy(&v.stderr);
    assert!(err.contains("DEBUG") && err.contains("starting"), "{err}");
    // A bad RUST_LOG falls back to the flags' level: with -q its warning is left out too.
    let q = bin()
        .args(["-q", "--demo", "snapshot"])
        .env("RUST_LOG", "vramwarden=notalevel")
        .output()
        .expect("run");
    assert!(q.status.success());
    assert!(
        q.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&q.stderr)
    );
    assert!(!q.stdout.is_empty());
    let both = bin().args(["-q", "-v", "snapshot"]).output().expect("run");
    assert_eq!(both.status.code(), Some(2), "-q and -v conflict");
}
