//! /proc enrichment against this test's own process and a spawned child.

use std::process::Command;
use std::time::Duration;

use vramwarden::host::procinfo::ProcReader;
use vramwarden::model::now_ms;

#[test]
fn reads_own_process() {
    let mut r = ProcReader::default();
    let me = r.read(std::process::id()).expect("own /proc entry");
    let exe = std::env::current_exe().expect("exe");
    let exe_name = exe.file_name().and_then(|n| n.to_str()).expect("name");
    // comm is truncated to 15 bytes by the kernel.
    assert!(
        exe_name.starts_with(&me.name),
        "comm {:?} vs exe {exe_name}",
        me.name
    );
    assert!(me.cmdline.contains(exe_name), "cmdline {:?}", me.cmdline);
    // SAFETY: getuid has no preconditions.
    assert_eq!(me.uid, unsafe { libc::getuid() });
    assert!(!me.user.is_empty());
    let now = now_ms();
    assert!(
        me.start_time_ms <= now + 1000 && me.start_time_ms > now - 3_600_000,
        "start {}",
        me.start_time_ms
    );
}

#[test]
fn reads_a_child_and_notices_its_exit() {
    let mut child = Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("spawn sleep");
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(50));
    let mut r = ProcReader::default();
    let info = r.read(pid).expect("child entry");
    assert_eq!(info.name, "sleep");
    assert_eq!(info.cmdline, "sleep 30");
    let mine = r.read(std::process::id()).expect("self");
    assert!(
        info.start_time_ms >= mine.start_time_ms,
        "child started after us"
    );
    assert_eq!(
        r.start_time_ms(pid),
        Some(info.start_time_ms),
        "start time is stable"
    );
    child.kill().expect("kill");
    child.wait().expect("wait");
    assert_eq!(r.read(pid), None, "an exited (reaped) process has no entry");
}

#[test]
fn a_reused_pid_is_read_afresh() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("stat"), "cpu 1 2 3\nbtime 1700000000\n").expect("write");
    let p = dir.path().join("4242");
    std::fs::create_dir(&p).expect("mkdir");
    let stat = |comm: &str, start: u64| {
        format!("4242 ({comm}) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0")
    };
    std::fs::write(p.join("stat"), stat("first", 100)).expect("write");
    std::fs::write(p.join("cmdline"), b"first\0--a\0").expect("write");
    std::fs::write(p.join("status"), "Name:\tfirst\nUid:\t0\t0\t0\t0\n").expect("write");
    let mut r = ProcReader::new(dir.path());
    let a = r.read(4242).expect("first");
    assert_eq!(
        (a.name.as_str(), a.cmdline.as_str()),
        ("first", "first --a")
    );
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as i64;
    assert_eq!(a.start_time_ms, 1_700_000_000_000 + 100 * 1000 / hz);
    // The PID is reused by another program: new start time → the cache must not answer.
    std::fs::write(p.join("stat"), stat("second", 500)).expect("write");
    std::fs::write(p.join("cmdline"), b"second\0").expect("write");
    let b = r.read(4242).expect("second");
    assert_eq!(b.name, "second");
    assert_ne!(a.start_time_ms, b.start_time_ms);
}
