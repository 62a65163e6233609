//! `vramwarden guard what-if` on a real recorded OOM: the public OOM-kill trace (an H200, a
//! PyTorch cache that swelled to 120 GB in 8 s and killed its neighbour), imported from its
//! nvidia-smi logs, played through the guard without acting.

use std::path::{Path, PathBuf};
use std::process::Command;

fn traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/traces")
}

fn vramwarden(args: &[&std::ffi::OsStr], config: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("run vramwarden")
}

#[test]
fn the_oom_kill_trace_names_the_death_and_says_whether_each_step_would_have_been_in_time() {
    let tmp = tempfile::tempdir().expect("tmp");
    let (log, config) = (tmp.path().join("kill.vwlog"), tmp.path().join("none.toml"));
    let apps = traces().join("public-oomkill-smi-apps.csv");
    let gpu = traces().join("public-oomkill-smi-gpu.csv");
    let imported = vramwarden(
        &[
            "import".as_ref(),
            "nvidia-smi".as_ref(),
            "--utc".as_ref(),
            "--apps".as_ref(),
            apps.as_os_str(),
            "--gpu".as_ref(),
            gpu.as_os_str(),
            "--out".as_ref(),
            log.as_os_str(),
        ],
        &config,
    );
    assert!(
        imported.status.success(),
        "{}",
        String::from_utf8_lossy(&imported.stderr)
    );
    let out = vramwarden(
        &[
            "guard".as_ref(),
            "what-if".as_ref(),
            log.as_os_str(),
            "--park-rate".as_ref(),
            "2.4".as_ref(),
        ],
        &config,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("park rate: 2.40 GiB/s (--park-rate)"),
        "{text}"
    );
    // The death the trace's ground truth names: sawfloor, pid 463.
    let oom = text
        .lines()
        .find(|l| l.starts_with("OOM on GPU 0"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(oom.contains("PID 463"), "{oom}");
    // Every step before it says its lead time and whether it would have finished in time.
    let steps: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("  GPU 0  ") && l.contains("needs ~"))
        .collect();
    assert!(!steps.is_empty(), "the guard would have acted: {text}");
    for s in &steps {
        assert!(
            s.contains("no OOM followed") || s.contains("done ") || s.contains("TOO LATE"),
            "{s}"
        );
    }
}

#[test]
fn what_if_refuses_a_file_that_is_not_a_session_with_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tmp");
    let bad = tmp.path().join("bad.vwlog");
    std::fs::write(&bad, b"not a session").expect("write");
    let out = vramwarden(
        &["guard".as_ref(), "what-if".as_ref(), bad.as_os_str()],
        &tmp.path().join("none.toml"),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.vwlog"), "{err}");
}
