//! `vramwarden --connect URL [--token-file F]` from a shell: a malformed address is a usage
//! error (exit 2) with a sentence saying what is accepted, and an unreadable token file an
//! error (exit 1), both before any window is opened (no display is needed here).

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env(
            "VRAMWARDEN_DATA_DIR",
            std::env::temp_dir().join("vramwarden-connect-cli"),
        )
        .output()
        .expect("run vramwarden")
}

fn said(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_bad_address_is_a_usage_error_that_says_what_is_accepted() {
    for bad in [
        "gpu-box:9835",
        "ftp://gpu-box",
        "http://gpu-box:9835/api",
        "ssh://-oProxyCommand=touch /tmp/x",
        "ssh://",
    ] {
        let o = run(&["--connect", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", said(&o));
        let e = said(&o);
        assert!(e.starts_with("vramwarden: "), "{bad}: {e}");
        assert!(
            e.contains("http://") || e.contains("ssh://"),
            "{bad}: the error says what is accepted: {e}"
        );
    }
    let o = run(&["--connect", "https://gpu-box:9835"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(said(&o).contains("SSH"), "{}", said(&o));
}

#[test]
fn connect_takes_no_subcommand_and_the_token_file_needs_connect() {
    let o = run(&["--connect", "http://127.0.0.1:9835", "snapshot"]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
    assert!(said(&o).contains("no subcommand"), "{}", said(&o));
    let o = run(&["--token-file", "/x", "--demo", "snapshot"]);
    assert_eq!(o.status.code(), Some(2), "{}", said(&o));
}

#[test]
fn an_unreadable_token_file_is_an_error_before_any_window() {
    let dir = tempfile::tempdir().expect("tmp");
    let missing = dir.path().join("agent.token");
    let o = run(&[
        "--connect",
        "http://127.0.0.1:9",
        "--token-file",
        missing.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", said(&o));
    assert!(
        said(&o).contains("cannot read the token file"),
        "{}",
        said(&o)
    );
}
