//! The park ledger: the size and GPU a `vramwarden park` noted for a later `vramwarden resume`
//! (whose room check needs both), read back only from a regular file of this user holding
//! two numbers.

use vramwarden::act::park::ledger;
use vramwarden::model::ProcessKey;

#[test]
fn a_noted_size_is_read_back_once_and_a_planted_or_broken_entry_counts_as_unknown() {
    let tmp = tempfile::tempdir().expect("tmp");
    // The only test in this binary: the variable is set before anything reads it.
    std::env::set_var("VRAMWARDEN_DATA_DIR", tmp.path());
    let key = (
        ProcessKey {
            pid: 4242,
            start_time_ms: 1_700_000_000_123,
        },
        3,
    );
    assert_eq!(ledger::bytes_of(&key), None);
    ledger::record(&key, 10 << 30);
    assert_eq!(ledger::bytes_of(&key), Some(10 << 30));
    // The GPU it was parked from is noted too: a resume checks the room there, and the size
    // is nobody's on another GPU.
    assert_eq!(ledger::bytes_of(&(key.0, 0)), None);
    let file = tmp.path().join("parked/4242-1700000000123");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&file).expect("noted").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    ledger::forget(&key);
    assert_eq!(ledger::bytes_of(&key), None);
    // Not a number, a size without its GPU (an earlier build's entry), a symlink to one, an
    // oversized file: unknown (the resume is refused).
    std::fs::write(&file, "lots").expect("write");
    assert_eq!(ledger::bytes_of(&key), None);
    std::fs::write(&file, "1024").expect("write");
    assert_eq!(ledger::bytes_of(&key), None);
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::write(&elsewhere, "1 3").expect("write");
    std::fs::remove_file(&file).expect("rm");
    std::os::unix::fs::symlink(&elsewhere, &file).expect("symlink");
    assert_eq!(ledger::bytes_of(&key), None);
    std::fs::remove_file(&file).expect("rm");
    std::fs::write(&file, format!("{} 3", "1".repeat(64))).expect("write");
    assert_eq!(ledger::bytes_of(&key), None);
}
