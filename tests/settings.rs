//! The settings file: round trip, backups, broken files reported with line and reason and
//! never overwritten, `rules check`.

use std::path::Path;
use std::process::Command;

use vramwarden::act::rules::{Action, Rule};
use vramwarden::engine::settings::Settings;

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
    assert_eq!(s.general.units, vramwarden::model::format::Units::GiB);
    assert_eq!(s.leaks.min_rate_mib_per_min, 10.0);
    assert_eq!(
        s.leaks.min_growth_mib,
        vramwarden::detect::leak::LeakSettings::default().min_growth_mib,
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
    assert!(text.contains("1. Idle notebook kernels: when the process holds ≥ 8 GiB and the process is GPU-idle for ≥ 30 min and its command line matches /ipykernel/, terminate (SIGTERM; SIGKILL 10 s later if still running)"), "{text}");
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

/// The command-line review: a misspelt user passed `rules check` unsaid, though
/// `user_is_not = "rooot"` leaves every user's processes in (a terminate rule meant to spare
/// root would not). Both conditions are warned of; a real user (root, uid 0) is not.
#[test]
fn rules_check_warns_of_users_this_machine_does_not_have() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("users.toml");
    std::fs::write(
        &path,
        "[[cleanup.rules]]\nname = \"a\"\n[cleanup.rules.conditions]\nprocess_memory_min_mib = 1.0\nuser_is = \"nosuchuser_xyz\"\n\
         [[cleanup.rules]]\nname = \"b\"\n[cleanup.rules.conditions]\nprocess_memory_min_mib = 1.0\nuser_is_not = \"rooot\"\n\
         [[cleanup.rules]]\nname = \"c\"\n[cleanup.rules.conditions]\nprocess_memory_min_mib = 1.0\nuser_is_not = \"root\"\n",
    )
    .expect("write");
    let out = bin()
        .args(["rules", "check", "--config"])
        .arg(&path)
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("warning:")).collect();
    assert_eq!(
        warnings,
        [
            "   warning: no user is named \"nosuchuser_xyz\" here: user_is matches no process",
            "   warning: no user is named \"rooot\" here: user_is_not leaves every user's processes in",
        ],
        "{text}"
    );
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

/// Loads a fixture that must be rejected: its error line and that it names the file.
fn rejected(name: &str) -> vramwarden::engine::settings::ConfigError {
    let path = fixture(name);
    let (s, err) = Settings::load(&path);
    let err = err.unwrap_or_else(|| panic!("{name} accepted"));
    assert_eq!(s, Settings::default(), "{name}: runs on defaults");
    assert!(err.to_string().contains(name), "{name}: {err}");
    err
}

#[test]
fn a_bad_regex_in_the_second_rule_points_at_its_own_line() {
    let err = rejected("invalid_regex_second_rule.toml");
    assert_eq!(err.line, Some(12), "{err}");
    assert!(err.reason.contains("cleanup.rules[1]"), "{err}");
    assert!(err.reason.contains("cmdline_regex"), "{err}");
    assert!(err.reason.contains("regular expression"), "{err}");
}

#[test]
fn an_invalid_leak_setting_points_at_its_key_not_at_notifications() {
    let err = rejected("invalid_leaks.toml");
    assert_eq!(err.line, Some(7), "{err}");
    assert!(err.reason.contains("leaks.quiet_s"), "{err}");
}

#[test]
fn numbers_that_would_overflow_a_duration_are_rejected_at_their_line() {
    let err = rejected("invalid_huge_timeout.toml");
    assert_eq!(err.line, Some(9), "{err}");
    assert!(err.reason.contains("timeout_seconds"), "{err}");
    let err = rejected("invalid_huge_grace.toml");
    assert_eq!(err.line, Some(4), "{err}");
    assert!(err.reason.contains("grace_seconds"), "{err}");
}

#[test]
fn every_numeric_setting_has_a_range() {
    let p = Path::new("t.toml");
    // (text, line of the offending key, words in the reason)
    let cases = [
        ("[sampling]\nhistory_hours = 1e300\n", 2, "history_hours"),
        ("[sampling]\nhistory_hours = nan\n", 2, "history_hours"),
        ("[sessions]\nretention_days = 4294967295\n", 2, "retention_days"),
        ("[notifications]\noom_forecast_minutes = -5.0\n", 2, "oom_forecast_minutes"),
        ("[notifications]\noom_forecast_minutes = nan\n", 2, "oom_forecast_minutes"),
        ("[notifications]\noom_forecast_minutes = 1441.0\n", 2, "oom_forecast_minutes"),
        ("[sessions]\nretention_max_mib = 9223372036854775807\n", 2, "retention_max_mib"),
        ("[leaks]\nwindow_s = 1e300\n", 2, "leaks.window_s"),
        ("[leaks]\nmin_duration_s = 1e300\nwindow_s = 1e300\n", 2, "leaks.min_duration_s"),
        ("[leaks]\nquiet_s = inf\n", 2, "leaks.quiet_s"),
        ("[leaks]\nmin_growth_mib = 1e300\n", 2, "leaks.min_growth_mib"),
        ("[leaks]\nmin_rate_mib_per_min = 1e300\n", 2, "leaks.min_rate_mib_per_min"),
        ("[leaks]\ndrop_tolerance_mib = 1e300\n", 2, "leaks.drop_tolerance_mib"),
        ("[leaks]\n\nwindow_s = 5.0\nmin_duration_s = 6.0\n", 3, "window"),
        ("[[cleanup.rules]]\nname = \"a\"\ncooldown_minutes = 1e300\n", 3, "cooldown_minutes"),
        ("[[cleanup.rules]]\nname = \"a\"\n[cleanup.rules.conditions]\nhold_seconds = 1e300\n", 4, "hold_seconds"),
        ("[[cleanup.rules]]\nname = \"a\"\n[cleanup.rules.conditions]\nidle_min_minutes = 1e300\n", 4, "idle_min_minutes"),
        ("[[cleanup.rules]]\nname = \"a\"\n[cleanup.rules.conditions]\nage_min_minutes = 1e300\n", 4, "age_min_minutes"),
        ("[[cleanup.rules]]\nname = \"a\"\n[cleanup.rules.conditions]\nleaking_min_minutes = 1e300\n", 4, "leaking_min_minutes"),
        ("[[cleanup.rules]]\nname = \"a\"\n[cleanup.rules.conditions]\nprocess_memory_min_mib = 1e300\n", 4, "process_memory_min_mib"),
        ("[[cleanup.rules]]\nname = \"a\"\n[cleanup.rules.conditions]\nuser_total_min_mib = 1e300\n", 4, "user_total_min_mib"),
        ("[[cleanup.rules]]\nname = \"a\"\n[cleanup.rules.conditions]\ndevice_free_max_mib = 1e300\n", 4, "device_free_max_mib"),
        ("[[cleanup.rules]]\nname = \"a\"\n[cleanup.rules.action]\nkind = \"terminate\"\ngrace_seconds = 3601.0\n", 5, "grace_seconds"),
        ("[[cleanup.rules]]\nname = \"a\"\naction = { kind = \"run_command\", argv = [\"x\"], timeout_seconds = 3601.0 }\n", 3, "timeout_seconds"),
        // The second rule's duplicate name points at the second rule's `name`.
        ("[[cleanup.rules]]\nname = \"a\"\n[[cleanup.rules]]\nname = \"a\"\n", 4, "two rules"),
        // Without a `name` key, at the second rule's header.
        ("[[cleanup.rules]]\n\n[[cleanup.rules]]\ncooldown_minutes = 1.0\n", 3, "two rules"),
        // A whole-rule problem points at the rule's action.
        ("[[cleanup.rules]]\nname = \"a\"\n\n[cleanup.rules.action]\nkind = \"terminate\"\ngrace_seconds = 5.0\n", 5, "condition about the process"),
        // A misspelt leak setting is an error, not silently ignored.
        ("[leaks]\nmin_rate = 5.0\n", 2, "min_rate"),
    ];
    for (text, line, words) in cases {
        let err = Settings::from_toml(text, p)
            .err()
            .unwrap_or_else(|| panic!("accepted: {text}"));
        assert_eq!(err.line, Some(line), "{text}: {err}");
        assert!(err.reason.contains(words), "{text}: {err}");
    }
    // The largest values of each range are fine, and 0 means "keep forever" for retention.
    let ok = "[notifications]\noom_forecast_minutes = 1440.0\n\
              [sessions]\nretention_days = 0\nretention_max_mib = 0\n\
              [leaks]\nwindow_s = 86400.0\nmin_duration_s = 86400.0\nquiet_s = 86400.0\n\
              [[cleanup.rules]]\nname = \"a\"\ncooldown_minutes = 525600.0\n\
              [cleanup.rules.conditions]\nhold_seconds = 31536000.0\nidle_min_minutes = 525600.0\n\
              [cleanup.rules.action]\nkind = \"terminate\"\ngrace_seconds = 3600.0\n";
    let s = Settings::from_toml(ok, p).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.sessions.retention_days, 0);
    assert_eq!(s.sessions.retention_max_mib, 0);
}

#[cfg(unix)]
mod files {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).expect("stat").permissions().mode() & 0o7777
    }

    fn changed() -> Settings {
        let mut s = Settings::default();
        s.sampling.interval_ms = 2500;
        s
    }

    #[test]
    fn save_keeps_the_files_mode_and_the_backup_keeps_it_too() {
        for m in [0o600, 0o640] {
            let dir = tempfile::tempdir().expect("tmp");
            let path = dir.path().join("config.toml");
            std::fs::write(&path, "[sampling]\ninterval_ms = 500\n").expect("write");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(m)).expect("chmod");
            changed().save(&path).expect("save");
            assert_eq!(mode(&path), m, "{m:o}");
            assert_eq!(mode(&dir.path().join("config.toml.bak")), m, "{m:o}");
            assert_eq!(Settings::load(&path).0.sampling.interval_ms, 2500);
        }
    }

    #[test]
    fn a_new_file_is_private_in_private_folders() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("a/b/config.toml");
        changed().save(&path).expect("save");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("a")), 0o700);
        assert_eq!(mode(&dir.path().join("a/b")), 0o700);
        assert!(
            !dir.path().join("a/b/config.toml.bak").exists(),
            "nothing to back up"
        );
    }

    #[test]
    fn a_symlinked_config_stays_a_link_and_its_target_is_updated() {
        let dir = tempfile::tempdir().expect("tmp");
        let dotfiles = dir.path().join("dotfiles");
        std::fs::create_dir(&dotfiles).expect("mkdir");
        let target = dotfiles.join("vramwarden.toml");
        std::fs::write(&target, "[sampling]\ninterval_ms = 500\n").expect("write");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let cfg = dir.path().join("cfg");
        std::fs::create_dir(&cfg).expect("mkdir");
        let link = cfg.join("config.toml");
        // A relative link, as dotfile managers make them.
        symlink("../dotfiles/vramwarden.toml", &link).expect("symlink");
        changed().save(&link).expect("save");
        let meta = std::fs::symlink_metadata(&link).expect("lstat");
        assert!(meta.file_type().is_symlink(), "the link was replaced");
        assert_eq!(
            std::fs::read_link(&link).expect("readlink"),
            Path::new("../dotfiles/vramwarden.toml")
        );
        assert_eq!(Settings::load(&target).0.sampling.interval_ms, 2500);
        assert_eq!(mode(&target), 0o600);
        assert_eq!(
            std::fs::read_to_string(dotfiles.join("vramwarden.toml.bak")).expect("bak"),
            "[sampling]\ninterval_ms = 500\n",
            "the backup lies beside the real file"
        );
        assert!(!dotfiles.join("vramwarden.toml.tmp").exists());
        assert!(!cfg.join("config.toml.tmp").exists());
    }

    #[test]
    fn a_symlink_loop_is_an_error_not_a_missing_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let a = dir.path().join("config.toml");
        let b = dir.path().join("other.toml");
        symlink(&b, &a).expect("symlink");
        symlink(&a, &b).expect("symlink");
        let (s, err) = Settings::load(&a);
        assert_eq!(s, Settings::default());
        let err = err.expect("a loop is an error");
        assert_eq!(err.path, a);
        assert_eq!(err.line, None);
        assert!(err.reason.contains("symbolic links"), "{err}");
        let out = bin()
            .args(["rules", "check", "--config"])
            .arg(&a)
            .output()
            .expect("run");
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains(&a.display().to_string()), "{text}");
        assert!(text.contains("symbolic links"), "{text}");
        // A file that is simply missing is still the defaults where it is loaded; a check of
        // a file named and missing (a typo) fails, and names it.
        let missing = dir.path().join("missing.toml");
        assert_eq!(Settings::load(&missing), (Settings::default(), None));
        let out = bin()
            .args(["rules", "check", "--config"])
            .arg(&missing)
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(1));
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(
            text.contains("missing.toml: no such settings file"),
            "{text}"
        );
        // The usual file, not named and not there: the defaults, said.
        let home = dir.path().join("home");
        let out = bin()
            .args(["rules", "check"])
            .env_remove("VRAMWARDEN_CONFIG")
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .output()
            .expect("run");
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("no settings file"));
        // Saving through it fails too, and leaves the links as they were.
        assert!(changed().save(&a).is_err());
        assert!(std::fs::symlink_metadata(&a)
            .expect("lstat")
            .file_type()
            .is_symlink());
    }

    #[test]
    fn loading_never_writes_not_even_a_broken_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("config.toml");
        let broken = "[sampling]\ninterval_ms = 5\n";
        std::fs::write(&path, broken).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let before = std::fs::metadata(&path)
            .expect("stat")
            .modified()
            .expect("mtime");
        for _ in 0..3 {
            let (s, err) = Settings::load(&path);
            assert!(err.is_some());
            assert_eq!(s, Settings::default());
        }
        assert_eq!(std::fs::read_to_string(&path).expect("read"), broken);
        assert_eq!(
            std::fs::metadata(&path)
                .expect("stat")
                .modified()
                .expect("mtime"),
            before
        );
        assert_eq!(mode(&path), 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("config.toml")]);
        // Only an explicit save replaces it (keeping the broken one as the backup).
        changed().save(&path).expect("save");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("config.toml.bak")).expect("bak"),
            broken
        );
    }
}

/// A `terminate` action written without `grace_seconds` waits the default 10 s before SIGKILL
/// (it was refused: "missing field `grace_seconds`"); a `signal` action still needs its signal.
#[test]
fn a_terminate_action_without_grace_seconds_takes_the_default() {
    let text = r#"
[[cleanup.rules]]
name = "stop leakers"
[cleanup.rules.conditions]
leaking_min_minutes = 15.0
[cleanup.rules.action]
kind = "terminate"
"#;
    let path = std::path::Path::new("inline.toml");
    let s = Settings::from_toml(text, path).expect("valid");
    assert_eq!(
        s.cleanup.rules[0].action,
        Action::Terminate {
            grace_seconds: 10.0
        }
    );
    let err = Settings::from_toml(&text.replace("terminate", "signal"), path)
        .expect_err("a signal needs its signal");
    assert!(err.reason.contains("signal"), "{err}");
}
