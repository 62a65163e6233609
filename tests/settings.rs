//! The settings file: round trip, backups, broken files reported with line and reason and
//! never overwritten, `rules check`.

use std::path::Path;
use std::process::Command;

use vramwarden::rules::{Action, Rule};
use vramwarden::settings::Settings;

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vramwarden"))
}

#[test]
fn valid_fixture_loads() {
    let (s, err) = Settings::load(&fixture("valid.toml"));
    assert_eq!(err, None);
    assert_eq!(s.sampling.interval_ms, 500);
    assert_eq!(s.general.units, vramwarden::format::Units::GiB);
    assert_eq!(s.leaks.min_rate_mib_per_min, 10.0);
    assert_eq!(
        s.leaks.min_growth_mib,
        vramwarden::leak::LeakSettings::default().min_growth_mib,
        "unset fields keep defaults"
    );
    assert_eq!(s.cleanup.rules.len(), 2);
    assert_eq!(
        s.cleanup.rules[0].action,
        Action::Terminate {
            grace_seconds: 10.0
        }
    );
    assert!(
        s.cleanup.rules[1].dry_run,
        "rules are dry runs unless they say otherwise"
    );
    assert!(
        s.cleanup.protected.iter().any(|p| p == "Xorg"),
        "default protected list"
    );
}

#[test]
fn broken_files_are_reported_with_line_and_reason() {
    for (name, line, words) in [
        ("invalid_syntax.toml", Some(4), "unclosed table"),
        ("invalid_value.toml", Some(2), "interval_ms"),
        ("invalid_regex.toml", Some(4), "regular expression"),
        ("invalid_unknown_field.toml", Some(2), "intervall_ms"),
    ] {
        let path = fixture(name);
        let before = std::fs::read(&path).expect("fixture");
        let (s, err) = Settings::load(&path);
        let err = err.unwrap_or_else(|| panic!("{name} accepted"));
        assert_eq!(s, Settings::default(), "{name}: runs on defaults");
        assert_eq!(err.line, line, "{name}: {err}");
        assert!(err.to_string().contains(words), "{name}: {err}");
        assert!(
            err.to_string().contains(name),
            "{name}: the message names the file: {err}"
        );
        assert_eq!(
            std::fs::read(&path).expect("fixture"),
            before,
            "{name} untouched"
        );
    }
}

#[test]
fn save_round_trips_atomically_and_keeps_a_backup() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("cfg/config.toml");
    let mut s = Settings::default();
    s.cleanup.rules.push(Rule {
        name: "Quota".into(),
        action: Action::Signal {
            signal: "SIGUSR1".into(),
        },
        ..Rule::default()
    });
    s.cleanup.rules[0].conditions.user_total_min_mib = Some(40960.0);
    s.save(&path).expect("save");
    assert_eq!(Settings::load(&path), (s.clone(), None));
    assert!(!path.with_extension("toml.tmp").exists());
    let first = std::fs::read_to_string(&path).expect("read");
    s.sampling.interval_ms = 2000;
    s.save(&path).expect("save again");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("cfg/config.toml.bak")).expect("bak"),
        first
    );
    assert_eq!(Settings::load(&path).0.sampling.interval_ms, 2000);
    // Invalid settings are never written.
    s.sampling.interval_ms = 1;
    assert!(s.save(&path).is_err());
    assert_eq!(Settings::load(&path).0.sampling.interval_ms, 2000);
}

#[test]
fn rules_check_prints_rules_in_words() {
    let out = bin()
        .args(["rules", "check", "--config"])
        .arg(fixture("valid.toml"))
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("valid"));
    assert!(text.contains("1. Idle notebook kernels: when the process holds ≥ 8192 MiB and the process is GPU-idle for ≥ 30 min and its command line matches /ipykernel/, terminate (SIGKILL after 10 s)"), "{text}");
    assert!(text.contains("2. GPU 0 nearly full: when on GPU 0 and the GPU is ≥ 95 % full, for 120 s, run `systemctl --user restart jupyter`"), "{text}");
    assert!(text.contains("DRY RUN"));
    let out = bin()
        .args(["rules", "check", "--config"])
        .arg(fixture("invalid_regex.toml"))
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid_regex.toml:4"), "{err}");
}

#[test]
fn rule_validation_messages() {
    let mut r = Rule {
        action: Action::Terminate { grace_seconds: 5.0 },
        ..Rule::default()
    };
    assert!(
        r.problems()
            .iter()
            .any(|(f, m)| *f == "action" && m.contains("condition about the process")),
        "a GPU-wide rule cannot signal"
    );
    r.conditions.process_memory_min_mib = Some(-1.0);
    assert!(r
        .problems()
        .iter()
        .any(|(f, _)| *f == "process_memory_min_mib"));
    r.conditions.process_memory_min_mib = Some(100.0);
    assert!(r.problems().is_empty(), "{:?}", r.problems());
    r.action = Action::RunCommand {
        argv: vec![],
        timeout_seconds: 5.0,
    };
    assert!(r.problems().iter().any(|(_, m)| m.contains("empty")));
    r.action = Action::Signal {
        signal: "SIGFOO".into(),
    };
    assert!(r
        .problems()
        .iter()
        .any(|(_, m)| m.contains("unknown signal")));
}
