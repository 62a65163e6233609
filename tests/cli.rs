//! The command line end to end: the real binary, its output parsed back.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vramwarden"))
}

/// `vramwarden --demo record --speed max --duration DURATION --out OUT`, with no settings file
/// (`VRAMWARDEN_CONFIG` names a missing one in `dir`): its output.
fn record_demo_at_full_speed(
    duration: &str,
    out: &std::path::Path,
    dir: &std::path::Path,
) -> std::process::Output {
    bin()
        .args(["--demo", "record", "--speed", "max", "--duration", duration])
        .arg("--out")
        .arg(out)
        .env("VRAMWARDEN_CONFIG", dir.join("none.toml"))
        .output()
        .expect("record")
}

#[test]
fn snapshot_demo_json_parses_back() {
    let out = bin()
        .args(["snapshot", "--demo", "--format", "json"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let devices = v["devices"].as_array().expect("devices[]");
    assert_eq!(devices.len(), 2);
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d["index"], i);
        for f in [
            "uuid",
            "name",
            "memory_total_bytes",
            "memory_used_bytes",
            "memory_reserved_bytes",
            "memory_free_bytes",
            "utilization_gpu_pct",
            "temperature_c",
            "power_w",
            "power_limit_w",
            "sm_clock_mhz",
            "mem_clock_mhz",
            "fan_pct",
        ] {
            assert!(d.get(f).is_some(), "device field {f} missing");
        }
        // The simulated H200 is an SXM module: its fan is null, never 0.
        // The H200's cap is 700 W, the RTX 4090's its default 450 W; neither draws more.
        let cap = if i == 0 { 700.0 } else { 450.0 };
        assert_eq!(d["power_limit_w"], cap);
        assert!(d["power_w"].as_f64().is_some_and(|w| w > 0.0 && w <= cap));
        assert!(d["sm_clock_mhz"].as_u64().is_some_and(|c| c > 300));
        if i == 0 {
            assert!(d["fan_pct"].is_null());
        } else {
            assert!(d["fan_pct"].as_u64().is_some_and(|f| f <= 100));
        }
        let total = d["memory_total_bytes"].as_u64().expect("total");
        let sum = d["memory_used_bytes"].as_u64().expect("used")
            + d["memory_reserved_bytes"].as_u64().expect("reserved")
            + d["memory_free_bytes"].as_u64().expect("free");
        assert_eq!(sum, total, "used + reserved + free = total");
    }
    let procs = v["processes"].as_array().expect("processes[]");
    let pids: Vec<u64> = procs.iter().filter_map(|p| p["pid"].as_u64()).collect();
    for pid in [48213, 51877, 39002, 2231] {
        assert!(pids.contains(&pid), "sim process {pid} listed: {pids:?}");
    }
    let trainer = procs.iter().find(|p| p["pid"] == 48213).expect("trainer");
    assert_eq!(trainer["user"], "alice");
    assert_eq!(trainer["device_index"], 0);
    assert!(trainer["cmdline"]
        .as_str()
        .expect("cmdline")
        .contains("train.py"));
    let start = trainer["start_time"].as_str().expect("start_time");
    let parsed = chrono::DateTime::parse_from_rfc3339(start).expect("RFC 3339");
    // The same time in ms, as `park --start-time-ms` takes it.
    assert_eq!(
        trainer["start_time_ms"].as_i64(),
        Some(parsed.timestamp_millis()),
        "{trainer}"
    );
    // Device used memory = the processes on it + memory nobody owns (the ghost 1.5 GiB on GPU 0).
    let on0: u64 = procs
        .iter()
        .filter(|p| p["device_index"] == 0)
        .filter_map(|p| p["used_bytes"].as_u64())
        .sum();
    assert_eq!(
        devices[0]["memory_used_bytes"].as_u64(),
        Some(on0 + 1536 * 1024 * 1024)
    );
}

fn csv_of(args: &[&str]) -> Vec<u8> {
    let out = bin()
        .args(["snapshot", "--demo", "--format", "csv"])
        .args(args)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Reads one CSV table the way `pandas.read_csv` would need it: one header, every row as wide
/// as the header (the `csv` crate rejects a ragged row), columns looked up by name.
fn read_table(bytes: &[u8]) -> (Vec<String>, Vec<csv::StringRecord>) {
    let mut r = csv::Reader::from_reader(bytes);
    let headers = r
        .headers()
        .expect("header")
        .iter()
        .map(String::from)
        .collect();
    let rows = r
        .records()
        .collect::<Result<Vec<_>, _>>()
        .expect("a single rectangular table");
    (headers, rows)
}

fn col<'a>(headers: &[String], row: &'a csv::StringRecord, name: &str) -> &'a str {
    let i = headers
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {headers:?}"));
    &row[i]
}

#[test]
fn snapshot_csv_default_is_one_process_table_in_mib() {
    let (h, rows) = read_table(&csv_of(&[]));
    assert_eq!(h, vramwarden::front::cli::snapshot_out::PROCESS_HEADER);
    assert!(rows.len() >= 4, "the demo runs several processes");
    for row in &rows {
        let ts = col(&h, row, "timestamp");
        chrono::DateTime::parse_from_rfc3339(ts).expect("RFC 3339 timestamp");
        let ms: i64 = col(&h, row, "unix_ms").parse().expect("unix_ms");
        assert_eq!(
            chrono::DateTime::parse_from_rfc3339(ts)
                .expect("ts")
                .timestamp_millis(),
            ms
        );
        col(&h, row, "pid").parse::<u32>().expect("pid");
        let dev: u32 = col(&h, row, "device_index").parse().expect("index");
        assert!(dev < 2);
        assert!(col(&h, row, "device_uuid").starts_with("GPU-"));
        assert!(!col(&h, row, "device_name").is_empty());
        let used: f64 = col(&h, row, "used_mib").parse().expect("used MiB");
        let total: f64 = col(&h, row, "device_memory_total_mib")
            .parse()
            .expect("total MiB");
        let dev_used: f64 = col(&h, row, "device_memory_used_mib")
            .parse()
            .expect("device used MiB");
        // MiB, not bytes: the simulated GPUs have tens of GiB, so totals are in the 10^4s.
        assert!((1_000.0..1_000_000.0).contains(&total), "total {total}");
        assert!(
            used > 0.0 && used <= dev_used && dev_used <= total,
            "{row:?}"
        );
        assert!(!col(&h, row, "name").is_empty());
    }
}

/// The command-line review: `snapshot --table devices` without `--format csv` printed the
/// whole JSON, the table ignored. A usage error says what is missing.
#[test]
fn snapshot_csv_options_without_csv_are_a_usage_error() {
    for extra in [&["--table", "devices"][..], &["--excel-safe"]] {
        let out = bin()
            .args(["--demo", "snapshot"])
            .args(extra)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(out.stdout.is_empty(), "{extra:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains("add --format csv"), "{said}");
    }
}

#[test]
fn snapshot_csv_devices_has_the_columns_of_export() {
    let (h, rows) = read_table(&csv_of(&["--table", "devices"]));
    assert_eq!(
        h.join(","),
        "timestamp,unix_ms,device_index,uuid,name,memory_total_mib,memory_used_mib,\
         memory_reserved_mib,memory_free_mib,utilization_gpu_pct,temperature_c,power_w"
    );
    assert_eq!(rows.len(), 2);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(col(&h, row, "device_index"), i.to_string());
        let total: f64 = col(&h, row, "memory_total_mib").parse().expect("MiB");
        let used: f64 = col(&h, row, "memory_used_mib").parse().expect("MiB");
        let free: f64 = col(&h, row, "memory_free_mib").parse().expect("MiB");
        let reserved: f64 = col(&h, row, "memory_reserved_mib").parse().expect("MiB");
        assert!((1_000.0..1_000_000.0).contains(&total), "total {total}");
        assert!((used + free + reserved - total).abs() < 0.01, "{row:?}");
    }
}

#[test]
fn snapshot_csv_both_keeps_two_tables_split_by_a_blank_line() {
    let text = String::from_utf8(csv_of(&["--table", "both"])).expect("utf8");
    let (devs, procs) = text
        .split_once("\n\n")
        .expect("two tables separated by a blank line");
    let (dh, drows) = read_table(devs.as_bytes());
    assert_eq!(dh, vramwarden::front::cli::snapshot_out::DEVICE_HEADER);
    assert_eq!(drows.len(), 2);
    let (ph, prows) = read_table(procs.as_bytes());
    assert_eq!(ph, vramwarden::front::cli::snapshot_out::PROCESS_HEADER);
    assert!(prows.len() >= 4);
}

#[test]
fn snapshot_without_a_driver_says_why() {
    // NVML from a file that does not exist: the no-driver path on any machine, with or
    // without an NVIDIA driver installed.
    let out = bin()
        .args(["snapshot"])
        .env("VRAMWARDEN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("libnvidia-ml.so.1"), "{err}");
    assert!(err.contains("--demo"), "the demo is offered: {err}");
    // The library the user named is named, with the loader's reason.
    assert!(
        err.contains("/nonexistent/libnvidia-ml.so.1 (VRAMWARDEN_NVML_LIB) could not be loaded")
            && err.contains("No such file"),
        "{err}"
    );
}

#[test]
fn bad_interval_is_rejected_clearly() {
    let out = bin()
        .args(["--interval", "5ms", "snapshot", "--demo"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("between 100ms and 1h"));
    // Not a duration at all: said in words with an example, not the parser's offsets.
    let out = bin()
        .args(["--interval=-1s", "snapshot", "--demo"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a duration: a number and a unit, as 1s or 500ms"),
        "{err}"
    );
    assert!(!err.contains("expected number at"), "{err}");
}

/// A mistyped command is a usage error (exit 2) that names the nearest command, never a
/// session path that opens the window; `WORD --help` for a word that is no command is the
/// same error, not the main help.
#[test]
fn a_mistyped_command_is_a_usage_error_with_a_suggestion() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |args: &[&str]| {
        bin()
            .args(args)
            .current_dir(dir.path())
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .output()
            .expect("run")
    };
    let out = run(&["snapshto"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean 'snapshot'?"), "{err}");
    assert!(err.contains("Usage:"), "{err}");
    assert!(out.stdout.is_empty());
    for args in [&["frobnicate", "--help"][..], &["--demo", "frobnicate"]] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("'frobnicate' is not a command"), "{err}");
        assert!(out.stdout.is_empty(), "{args:?} printed help");
    }
    // A real command's help is still help.
    let out = run(&["snapshot", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--format"));
}

/// `--demo`, `--interval` and `--config` are offered only by the commands they change, in the
/// help and the completions; elsewhere they are still accepted (they may come before any
/// command's name).
#[test]
fn each_command_offers_only_the_global_options_it_uses() {
    let run = |args: &[&str]| bin().args(args).output().expect("run");
    let help = |args: &[&str]| {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    for (args, demo, interval, config) in [
        (&["--help"][..], true, true, true),
        (&["record", "--help"], true, true, true),
        (&["agent", "--help"], true, true, true),
        (&["snapshot", "--help"], true, false, false),
        (&["park", "--help"], true, false, true),
        (&["resume", "--help"], true, false, true),
        (&["guard", "what-if", "--help"], false, false, true),
        (&["rules", "check", "--help"], false, false, true),
        (&["export", "--help"], false, false, false),
        (&["import", "nvidia-smi", "--help"], false, false, false),
        (&["torch", "ls", "--help"], false, false, false),
    ] {
        let text = help(args);
        assert_eq!(text.contains("--demo"), demo, "{args:?}: {text}");
        assert_eq!(text.contains("--interval"), interval, "{args:?}: {text}");
        assert_eq!(text.contains("--config"), config, "{args:?}: {text}");
        assert!(text.contains("--quiet"), "{args:?}: {text}");
    }
    // The completions offer the same: bash lists each command's options on one line.
    let bash = help(&["completions", "bash"]);
    let opts = |first: &str| {
        bash.lines()
            .find(|l| {
                l.trim_start()
                    .starts_with(&format!("opts=\"-v -q -h {first}"))
            })
            .unwrap_or_else(|| panic!("no options line starting with {first}: {bash}"))
            .to_string()
    };
    let export = opts("--csv");
    assert!(
        !export.contains("--demo") && !export.contains("--config"),
        "{export}"
    );
    let record = opts("--duration");
    assert!(
        record.contains("--demo") && record.contains("--interval"),
        "{record}"
    );
    // Still accepted where hidden: a script that passes them everywhere keeps working.
    for args in [
        &["--demo", "--interval", "2s", "rules", "check"][..],
        &["rules", "check", "--demo", "--interval", "2s"],
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("settings.toml");
        std::fs::write(&config, "").expect("write");
        let out = bin()
            .args(args)
            .arg("--config")
            .arg(&config)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

/// Developer commands stay out of --help and the completions; they still run.
#[test]
fn developer_commands_are_hidden() {
    let help = bin().arg("--help").output().expect("run");
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    assert!(
        help.contains("snapshot") && help.contains("-q, --quiet"),
        "{help}"
    );
    let torch = bin().args(["torch", "--help"]).output().expect("run");
    let torch = String::from_utf8_lossy(&torch.stdout).to_string();
    assert!(torch.contains("release"), "{torch}");
    for shell in ["bash", "zsh", "fish"] {
        let c = bin().args(["completions", shell]).output().expect("run");
        let script = String::from_utf8_lossy(&c.stdout).to_string();
        for hidden in ["bench-nvml", "watch-cost", "monitor"] {
            assert!(!script.contains(hidden), "{shell} completes {hidden}");
        }
    }
    for hidden in ["bench-nvml", "watch-cost", "monitor"] {
        assert!(
            !help.contains(hidden) && !torch.contains(hidden),
            "{hidden}"
        );
    }
    let out = bin()
        .args(["--demo", "monitor", "--duration", "1s"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A command's summary is a message (stderr), not data, and `-q` leaves it out.
#[test]
fn record_says_its_summary_on_stderr_and_not_with_q() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |quiet: bool, name: &str| {
        let out = bin()
            .args(if quiet { &["-q"][..] } else { &[][..] })
            .args(["--demo", "record", "--speed", "max", "--duration", "3s"])
            .arg("--out")
            .arg(dir.path().join(name))
            .env_remove("RUST_LOG")
            .env("VRAMWARDEN_CONFIG", dir.path().join("none.toml"))
            .output()
            .expect("run");
        assert!(out.status.success(), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(run(false, "a.vwlog").contains("recorded "));
    assert_eq!(run(true, "b.vwlog"), "");
}

/// The command-line review: a settings file named with `--config` that does not exist was
/// ignored without a word (a typo ran the agent with no rules). It is said, and the command
/// runs on the defaults (the agent's service names an optional file).
#[test]
fn a_missing_config_file_named_on_the_command_line_is_said() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = bin()
        .args(["--demo", "record", "--speed", "max", "--duration", "3s"])
        .arg("--out")
        .arg(dir.path().join("a.vwlog"))
        .arg("--config")
        .arg(dir.path().join("cofnig.toml"))
        .env_remove("RUST_LOG")
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("cofnig.toml: no such settings file; the defaults apply"),
        "{said}"
    );
}

/// `record`'s own CPU statistics are -v lines (the whole run's, then per thread and per part
/// of each sample, ticks counted from the first sample on); a plain run prints only its
/// summary.
#[test]
fn record_prints_run_statistics_only_with_v() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = |extra: &[&str], name: &str| {
        let out = bin()
            .args([
                "--demo",
                "--interval",
                "100ms",
                "record",
                "--duration",
                "300ms",
            ])
            .args(extra)
            .arg("--out")
            .arg(dir.path().join(name))
            .env_remove("RUST_LOG")
            .env("VRAMWARDEN_CONFIG", dir.path().join("none.toml"))
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains("recorded "));
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let plain = rec(&[], "a.vwlog");
    assert!(!plain.contains("cpu_s="), "{plain}");
    assert!(!plain.contains("run statistics"), "{plain}");
    let verbose = rec(&["-v"], "b.vwlog");
    assert!(
        verbose.contains("cpu_s=") && verbose.contains("wall_s="),
        "{verbose}"
    );
    assert!(verbose.contains("run statistics over "), "{verbose}");
    assert!(verbose.contains("thread vramwarden-samp"), "{verbose}");
    // The parts' rows: "label calls µs-per-call µs-per-tick µs/s", sub-parts indented.
    let row = |label: &str| -> Option<Vec<f64>> {
        verbose.lines().find_map(|l| {
            let rest = l.split("vramwarden::host::cost: ").nth(1)?;
            let cells = rest.strip_prefix(label)?;
            cells
                .split_whitespace()
                .map(|c| c.parse().ok())
                .collect::<Option<Vec<f64>>>()
                .filter(|v| v.len() == 4)
        })
    };
    let tick = row("tick ").expect("a tick row");
    assert!(tick[0] >= 1.0 && tick[2] > 0.0, "{tick:?}");
    let log = row("    log write ").expect("a log write row under record");
    assert!(log[0] >= tick[0] && log[1] > 0.0, "{log:?} {tick:?}");
    let source = row("  source ").expect("a source row");
    assert!(source[2] <= tick[2], "{source:?} {tick:?}");
}

/// `vramwarden FILE` with an empty file or a file of another kind says so on stderr and exits
/// with an error before any window opens (no display is needed to see it).
#[cfg(feature = "gui")]
#[test]
fn opening_a_file_that_is_no_session_fails_at_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let empty = dir.path().join("empty.vwlog");
    std::fs::write(&empty, b"").expect("write");
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, b"timestamp, name, pid\nnot a session log\n").expect("write");
    for (path, says) in [
        (&empty, "the file is empty"),
        (&text, "not a vramwarden session log"),
    ] {
        let out = bin()
            .arg(path)
            .env("VRAMWARDEN_DATA_DIR", dir.path())
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1), "{path:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(says) && err.contains(&*path.to_string_lossy()),
            "{err}"
        );
    }
    let missing = dir.path().join("missing.vwlog");
    let out = bin().arg(&missing).output().expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.vwlog"));
}

/// Without a display, the window's failure says what to run on a server instead, in words
/// (not the windowing library's error and source line).
#[cfg(feature = "gui")]
#[test]
fn the_window_without_a_display_says_what_to_run_instead() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = bin()
        .args(["--demo", "--no-record"])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .env("VRAMWARDEN_CONFIG", dir.path().join("none.toml"))
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no display to open the window on"), "{err}");
    assert!(err.contains("vramwarden agent"), "{err}");
    assert!(!err.contains("winit") && !err.contains(".rs:"), "{err}");
}

/// `record --out` never writes over a file and says why in words, for a file and for a folder
/// (the OS says "File exists" for both).
#[test]
fn record_refuses_an_existing_file_or_a_folder_as_its_log_in_words() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kept = dir.path().join("kept.vwlog");
    std::fs::write(&kept, b"someone's file").expect("write");
    let rec = |out: &std::path::Path| record_demo_at_full_speed("3s", out, dir.path());
    let o = rec(&kept);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("exists already: a session log is never written over"),
        "{err}"
    );
    assert_eq!(std::fs::read(&kept).expect("read"), b"someone's file");
    let o = rec(dir.path());
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is a folder: name a file for the log"),
        "{err}"
    );
}

/// `record --duration` takes as many samples in real time as at `--speed max`: one at each
/// interval from the start while less than the duration from it (real time took one more when
/// the last tick beat the deadline), and a duration under one interval records one.
#[test]
fn record_takes_the_same_samples_in_real_time_and_at_full_speed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let count = |speed: &str, duration: &str, name: &str| -> usize {
        let out = bin()
            .args(["--demo", "--interval", "1s", "record", "--speed", speed])
            .args(["--duration", duration, "--out"])
            .arg(dir.path().join(name))
            .env("VRAMWARDEN_CONFIG", dir.path().join("none.toml"))
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{err}");
        err.lines()
            .find_map(|l| l.strip_prefix("recorded "))
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{err}"))
    };
    // (1 s apart: a tick late by up to half a second on a loaded machine still counts.)
    assert_eq!(count("max", "3s", "a.vwlog"), 3);
    assert_eq!(count("1", "3s", "b.vwlog"), 3);
    assert_eq!(count("1", "1ms", "c.vwlog"), 1);
}

/// `VRAMWARDEN_DEMO_FLEET` sizes the demo at `--speed max` as in real time (the demo's own two
/// GPUs were recorded), and a `--duration` too long to simulate is refused, not cut short to
/// one sample (its milliseconds overflowed).
#[test]
fn record_at_full_speed_takes_the_fleet_and_refuses_a_duration_past_a_year() {
    let dir = tempfile::tempdir().expect("tempdir");
    let record = |duration: &str, log: &std::path::Path, fleet: &str| {
        bin()
            .args(["--demo", "record", "--speed", "max", "--duration", duration])
            .arg("--out")
            .arg(log)
            .env("VRAMWARDEN_DEMO_FLEET", fleet)
            .env("VRAMWARDEN_CONFIG", dir.path().join("none.toml"))
            .output()
            .expect("run")
    };
    let log = dir.path().join("fleet.vwlog");
    let out = record("5s", &log, "3x12");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let csv = bin()
        .args(["export", "--table", "devices", "--csv", "-"])
        .arg(&log)
        .output()
        .expect("export");
    let text = String::from_utf8_lossy(&csv.stdout);
    let gpus: std::collections::BTreeSet<&str> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(2))
        .collect();
    assert_eq!(gpus.len(), 3, "{text}");
    for duration in ["5124095576030h", "400d"] {
        let out = record(
            duration,
            &dir.path().join(format!("{duration}.vwlog")),
            "3x12",
        );
        assert_eq!(out.status.code(), Some(2), "{duration}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("at most 366 days"), "{err}");
    }
}

/// An agent told to use a settings file that is missing, with no `--token-file`, does not
/// make its token beside that file (a typo's folder, `/` for `--config /x.toml`): it stops and
/// says how to go on.
#[test]
fn an_agent_makes_no_token_beside_a_missing_settings_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let typo = dir.path().join("etc-typo").join("config.toml");
    let out = bin()
        .args([
            "--demo",
            "agent",
            "--listen",
            "127.0.0.1:0",
            "--no-record",
            "--config",
        ])
        .arg(&typo)
        .env("VRAMWARDEN_DATA_DIR", dir.path().join("data"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no such settings file"), "{err}");
    assert!(err.contains("--token-file"), "{err}");
    assert!(
        !dir.path().join("etc-typo").exists(),
        "a folder was made for the token"
    );
}

/// `export --from --to` writes the samples and events of that time only: each row's time is
/// within it, and the rows are those of the whole export in that time.
#[test]
fn export_writes_only_the_time_asked_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("day.vwlog");
    let out = record_demo_at_full_speed("10m", &log, dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let export = |table: &str, span: &[&str]| -> Vec<(i64, String)> {
        let out = bin()
            .args(["export", "--table", table, "--csv", "-"])
            .args(span)
            .arg(&log)
            .output()
            .expect("export");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .map(|l| {
                (
                    l.split(',')
                        .nth(1)
                        .and_then(|t| t.parse().ok())
                        .unwrap_or(-1),
                    l.into(),
                )
            })
            .collect()
    };
    for table in ["devices", "processes", "events"] {
        let all = export(table, &[]);
        let (t0, t1) = (all[0].0 + 120_000, all[0].0 + 300_000);
        let rfc = |ms: i64| vramwarden::model::format::rfc3339(ms);
        let (a, b) = (rfc(t0), rfc(t1));
        let some = export(table, &["--from", &a, "--to", &b]);
        let want: Vec<_> = all
            .iter()
            .filter(|(t, _)| (t0..=t1).contains(t))
            .cloned()
            .collect();
        assert!(!want.is_empty() || table == "events", "{table}");
        assert_eq!(some, want, "{table}");
    }
    let bad = bin()
        .args([
            "export",
            "--table",
            "devices",
            "--csv",
            "-",
            "--from",
            "yesterday",
        ])
        .arg(&log)
        .output()
        .expect("export");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("RFC 3339"));
}
