//! The command line end to end: the real binary, its output parsed back.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vramwarden"))
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
        ] {
            assert!(d.get(f).is_some(), "device field {f} missing");
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
    assert!(
        chrono::DateTime::parse_from_rfc3339(start).is_ok(),
        "RFC 3339: {start}"
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

#[test]
fn snapshot_demo_csv_has_the_same_columns() {
    let out = bin()
        .args([
            "snapshot", "--demo", "--format", "csv", "--table", "devices",
        ])
        .output()
        .expect("run");
    assert!(out.status.success());
    let mut r = csv::Reader::from_reader(out.stdout.as_slice());
    let headers: Vec<String> = r
        .headers()
        .expect("header")
        .iter()
        .map(String::from)
        .collect();
    assert_eq!(headers[0], "index");
    assert!(headers.contains(&"memory_reserved_bytes".to_string()));
    assert_eq!(r.records().count(), 2);
    let out = bin()
        .args(["snapshot", "--demo", "--format", "csv"])
        .output()
        .expect("run");
    let text = String::from_utf8(out.stdout).expect("utf8");
    let (devs, procs) = text
        .split_once("\n\n")
        .expect("two tables separated by a blank line");
    assert_eq!(devs.lines().count(), 3);
    assert!(
        procs.starts_with("pid,device_index,used_bytes,name,cmdline,user,start_time,sm_util_pct")
    );
    assert!(procs.lines().count() >= 5);
}

#[test]
fn snapshot_without_a_driver_says_why() {
    let has_driver = [
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "/usr/lib64/libnvidia-ml.so.1",
        "/usr/lib/libnvidia-ml.so.1",
    ]
    .iter()
    .any(|p| std::path::Path::new(p).exists());
    if has_driver {
        eprintln!("skipped: this machine has an NVIDIA driver");
        return;
    }
    let out = bin().args(["snapshot"]).output().expect("run");
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("libnvidia-ml.so.1"), "{err}");
    assert!(err.contains("--demo"), "the demo is offered: {err}");
}

#[test]
fn bad_interval_is_rejected_clearly() {
    let out = bin()
        .args(["--interval", "5ms", "snapshot", "--demo"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("between 100ms and 1h"));
}
