//! Property tests of the settings file: no text makes `Settings::from_toml` panic, an error
//! line always lies inside the file, and every accepted value can become the durations and
//! timestamps the app derives from it (no overflow, no panic later). `PROPTEST_CASES=N` runs
//! longer.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use proptest::prelude::*;
use vramwarden::act::rules::Action;
use vramwarden::engine::settings::{KeyPart, Settings};

/// The valid fixture every mutation starts from.
const VALID: &str = include_str!("fixtures/valid.toml");

/// A milliseconds timestamp around now, as the engine uses.
const NOW_MS: i64 = 1_800_000_000_000;

/// Table headers, keys and values that TOML-ish text is made of (including the keys the
/// settings know, so many texts get past the syntax and reach validation).
const HEADERS: &[&str] = &[
    "[general]",
    "[sampling]",
    "[sessions]",
    "[leaks]",
    "[notifications]",
    "[cleanup]",
    "[[cleanup.rules]]",
    "[cleanup.rules.conditions]",
    "[cleanup.rules.action]",
    "[cleanup.rules",
    "[[cleanup]]",
];
const KEYS: &[&str] = &[
    "units",
    "theme",
    "interval_ms",
    "history_hours",
    "record",
    "retention_days",
    "retention_max_mib",
    "min_rate_mib_per_min",
    "min_growth_mib",
    "min_duration_s",
    "window_s",
    "quiet_s",
    "drop_tolerance_mib",
    "leaks",
    "rules",
    "dry_run",
    "protected",
    "name",
    "enabled",
    "cooldown_minutes",
    "allow_other_users",
    "process_memory_min_mib",
    "device_used_min_pct",
    "device_free_max_mib",
    "idle_min_minutes",
    "leaking_min_minutes",
    "name_regex",
    "cmdline_regex",
    "user_is",
    "user_is_not",
    "age_min_minutes",
    "user_total_min_mib",
    "gpu",
    "hold_seconds",
    "at",
    "every_hours",
    "container_glob",
    "pod_glob",
    "container_total_min_mib",
    "kind",
    "signal",
    "grace_seconds",
    "argv",
    "timeout_seconds",
    "leaks.quiet_s",
    "action.kind",
    "\"quoted key\"",
];
const VALUES: &[&str] = &[
    "0",
    "-0.0",
    "1",
    "-1",
    "0.5",
    "100",
    "3600",
    "3600.0000001",
    "86400.0",
    "525600.0",
    "31536000.0",
    "1e20",
    "1e300",
    "-1e300",
    "1.7976931348623157e308",
    "5e-324",
    "nan",
    "+inf",
    "-inf",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
    "17179869184",
    "17179869185",
    "true",
    "false",
    "\"\"",
    "\"gib\"",
    "\"dark\"",
    "\"terminate\"",
    "\"run_command\"",
    "\"signal\"",
    "\"notify\"",
    "\"SIGTERM\"",
    "\"python((\"",
    "\"(a*)*b\"",
    "\"ipykernel\"",
    "[\"true\"]",
    "[]",
    "[1, \"a\"]",
    "{ kind = \"notify\" }",
    "{ kind = \"terminate\", grace_seconds = 1e300 }",
    "{ process_memory_min_mib = 1.0 }",
    "1979-05-27T07:32:00Z",
    "'''multi",
    "\"unterminated",
];

/// One line of TOML-ish text.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(HEADERS).prop_map(str::to_string),
        6 => (proptest::sample::select(KEYS), proptest::sample::select(VALUES))
            .prop_map(|(k, v)| format!("{k} = {v}")),
        1 => "[ -~]{0,40}",
        1 => Just(String::new()),
    ]
}

/// Whole documents of TOML-ish lines.
fn document() -> impl Strategy<Value = String> {
    proptest::collection::vec(line(), 0..24).prop_map(|ls| ls.join("\n"))
}

/// A float literal: edge values, boundaries of the ranges, and any `f64` at all.
fn float() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(&[
            "0.0", "-0.0", "-1.0", "1e-300", "0.1", "1.0", "100.0", "3600.0", "3600.0001",
            "86400.0", "86400.5", "525600.0", "525601.0", "31536000.0", "31536001.0",
            "17179869184.0", "17179869185.0", "1e20", "1e300", "inf", "-inf", "nan", "1",
            "9007199254740993",
        ][..]).prop_map(str::to_string),
        8 => (0.5f64..3000.0).prop_map(|x| format!("{x:?}")),
        1 => any::<f64>().prop_map(|x| format!("{x:?}")),
    ]
}

/// An integer literal: edge values and any `i64`.
fn int() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(&[
            "-1", "0", "1", "99", "100", "3600000", "3600001", "36500", "36501",
            "17179869184", "17179869185", "4294967295", "4294967296",
            "9223372036854775807", "1.5",
        ][..]).prop_map(str::to_string),
        6 => (100u32..36_500).prop_map(|x| x.to_string()),
        1 => any::<i64>().prop_map(|x| x.to_string()),
    ]
}

/// `key = value` lines for some of `keys`, each value from `value`.
fn some_keys(
    keys: &'static [&'static str],
    value: impl Strategy<Value = String> + 'static,
) -> BoxedStrategy<String> {
    proptest::collection::vec((proptest::sample::select(keys), value), 0..keys.len() + 1)
        .prop_map(|kv| {
            let mut seen = std::collections::HashSet::new();
            kv.into_iter()
                .filter(|(k, _)| seen.insert(*k))
                .map(|(k, v)| format!("{k} = {v}\n"))
                .collect()
        })
        .boxed()
}

/// One `[[cleanup.rules]]` entry with typed but arbitrary values.
fn rule() -> impl Strategy<Value = String> {
    let action = prop_oneof![
        Just("kind = \"notify\"\n".to_string()),
        proptest::sample::select(&["SIGTERM", "USR1", "15", "99", "SIGFOO"][..])
            .prop_map(|s| format!("kind = \"signal\"\nsignal = \"{s}\"\n")),
        float().prop_map(|g| format!("kind = \"terminate\"\ngrace_seconds = {g}\n")),
        float().prop_map(|t| format!(
            "kind = \"run_command\"\nargv = [\"true\"]\ntimeout_seconds = {t}\n"
        )),
    ];
    (
        0u8..4,
        some_keys(&["cooldown_minutes"], float()),
        some_keys(
            &[
                "process_memory_min_mib", "device_used_min_pct", "device_free_max_mib",
                "idle_min_minutes", "leaking_min_minutes", "age_min_minutes",
                "user_total_min_mib", "hold_seconds", "every_hours",
                "container_total_min_mib",
            ],
            float(),
        ),
        some_keys(&["gpu"], int()),
        some_keys(&["name_regex", "cmdline_regex"], proptest::sample::select(&[
            "\"python\"", "\"python((\"", "\"(a+)+$\"", "\"x{1000}{1000}\"",
        ][..]).prop_map(str::to_string)),
        some_keys(&["at", "container_glob", "pod_glob"], proptest::sample::select(&[
            "\"04:00\"", "\"23:30-00:15\"", "\"24:00\"", "\"04:00-04:00\"", "\"\"", "\"*\"",
            "\"jupyter-*\"", "\"99:99-99:99\"", "\"4:5\"", "\"00:00-23:59\"",
        ][..]).prop_map(str::to_string)),
        action,
    )
        .prop_map(|(n, own, conds, gpu, re, text, action)| {
            format!(
                "[[cleanup.rules]]\nname = \"r{n}\"\n{own}[cleanup.rules.conditions]\n{conds}{gpu}{re}{text}[cleanup.rules.action]\n{action}"
            )
        })
}

/// A document with the settings' own shape: every table and key known, each value of the
/// right type but arbitrary, so most texts reach validation.
fn shaped_document() -> impl Strategy<Value = String> {
    (
        some_keys(&["interval_ms"], int()),
        some_keys(&["history_hours"], float()),
        some_keys(&["retention_days", "retention_max_mib"], int()),
        some_keys(
            &[
                "min_rate_mib_per_min",
                "min_growth_mib",
                "min_duration_s",
                "window_s",
                "quiet_s",
                "drop_tolerance_mib",
            ],
            float(),
        ),
        proptest::collection::vec(rule(), 0..4),
    )
        .prop_map(|(interval, history, sessions, leaks, rules)| {
            format!(
                "[sampling]\n{interval}{history}\n[sessions]\n{sessions}\n[leaks]\n{leaks}\n{}",
                rules.join("\n")
            )
        })
}

/// One change to a document's lines.
#[derive(Debug, Clone)]
enum Mutation {
    /// Replace the value of line `n` (if it has one).
    SetValue(usize, String),
    /// Insert a line before line `n`.
    Insert(usize, String),
    /// Delete line `n`.
    Delete(usize),
    /// Swap two lines.
    Swap(usize, usize),
    /// Cut the text at a byte (on a character boundary).
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (0usize..64, proptest::sample::select(VALUES)).prop_map(|(n, v)| Mutation::SetValue(n, v.to_string())),
        6 => (0usize..64, float()).prop_map(|(n, v)| Mutation::SetValue(n, v)),
        2 => (0usize..64, line()).prop_map(|(n, l)| Mutation::Insert(n, l)),
        1 => (0usize..64).prop_map(Mutation::Delete),
        1 => (0usize..64, 0usize..64).prop_map(|(a, b)| Mutation::Swap(a, b)),
        1 => (0usize..2048).prop_map(Mutation::Truncate),
    ]
}

fn mutate(text: &str, changes: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for m in changes {
        let n = lines.len().max(1);
        match m {
            Mutation::SetValue(i, v) => {
                if let Some(l) = lines.get_mut(i % n) {
                    if let Some((k, _)) = l.split_once('=') {
                        *l = format!("{}= {v}", k);
                    }
                }
            }
            Mutation::Insert(i, l) => lines.insert(i % (lines.len() + 1), l.clone()),
            Mutation::Delete(i) => {
                if !lines.is_empty() {
                    lines.remove(i % n);
                }
            }
            Mutation::Swap(a, b) => {
                if !lines.is_empty() {
                    lines.swap(a % n, b % n);
                }
            }
            Mutation::Truncate(at) => {
                let joined = lines.join("\n");
                let mut at = (*at).min(joined.len());
                while !joined.is_char_boundary(at) {
                    at -= 1;
                }
                lines = joined[..at].lines().map(str::to_string).collect();
            }
        }
    }
    lines.join("\n")
}

/// `secs` as a `Duration` that can be added to now, on both clocks.
fn usable_secs(what: &str, secs: f64) -> Result<(), TestCaseError> {
    let d = Duration::try_from_secs_f64(secs)
        .map_err(|e| TestCaseError::fail(format!("{what} = {secs} s: {e}")))?;
    prop_assert!(Instant::now().checked_add(d).is_some(), "{what}");
    prop_assert!(SystemTime::now().checked_add(d).is_some(), "{what}");
    // As milliseconds on a Unix-ms timestamp, exactly representable and far from overflow.
    let ms = secs * 1000.0;
    prop_assert!(ms < 2f64.powi(53), "{what} = {secs} s");
    prop_assert!(NOW_MS.checked_add(ms as i64).is_some(), "{what}");
    Ok(())
}

/// Everything the app derives from accepted settings, done the checked way.
fn everything_converts(s: &Settings) -> Result<(), TestCaseError> {
    let interval = Duration::from_millis(s.sampling.interval_ms);
    usable_secs("history_hours", s.sampling.history_hours * 3600.0)?;
    let history = Duration::from_secs_f64(s.sampling.history_hours * 3600.0);
    let ticks = vramwarden::front::cli::history_ticks(history, interval);
    prop_assert!(ticks <= 31 * 24 * 36_000, "history ticks {ticks}");
    let days = i64::from(s.sessions.retention_days);
    prop_assert!(chrono::TimeDelta::try_days(days).is_some());
    prop_assert!(NOW_MS.checked_sub(days * 86_400_000).is_some());
    prop_assert!(s.sessions.retention_max_mib.checked_mul(1 << 20).is_some());
    let l = &s.leaks;
    for (what, secs) in [
        ("min_duration_s", l.min_duration_s),
        ("window_s", l.window_s),
        ("quiet_s", l.quiet_s),
    ] {
        usable_secs(what, secs)?;
    }
    for (what, mib) in [
        ("min_rate_mib_per_min", l.min_rate_mib_per_min),
        ("min_growth_mib", l.min_growth_mib),
        ("drop_tolerance_mib", l.drop_tolerance_mib),
    ] {
        prop_assert!(
            mib.is_finite() && mib * 1_048_576.0 < u64::MAX as f64,
            "{what}"
        );
    }
    for r in &s.cleanup.rules {
        let c = &r.conditions;
        usable_secs("hold_seconds", c.hold_seconds)?;
        usable_secs("cooldown_minutes", r.cooldown_minutes * 60.0)?;
        for (what, min) in [
            ("idle_min_minutes", c.idle_min_minutes),
            ("leaking_min_minutes", c.leaking_min_minutes),
            ("age_min_minutes", c.age_min_minutes),
        ] {
            if let Some(min) = min {
                usable_secs(what, min * 60.0)?;
            }
        }
        for (what, mib) in [
            ("process_memory_min_mib", c.process_memory_min_mib),
            ("device_free_max_mib", c.device_free_max_mib),
            ("user_total_min_mib", c.user_total_min_mib),
            ("container_total_min_mib", c.container_total_min_mib),
            ("releasable_cache_min_mib", c.releasable_cache_min_mib),
            (
                "allocated_growth_min_mib_per_min",
                c.allocated_growth_min_mib_per_min,
            ),
        ] {
            if let Some(mib) = mib {
                prop_assert!(
                    mib.is_finite() && mib * 1_048_576.0 < u64::MAX as f64,
                    "{what}"
                );
            }
        }
        if let Some(h) = c.every_hours {
            prop_assert!(h * 3600.0 >= 60.0, "every_hours {h}");
            usable_secs("every_hours", h * 3600.0)?;
        }
        if let Some(at) = &c.at {
            prop_assert!(
                vramwarden::act::rules::schedule::parse_at(at).is_ok(),
                "at {at:?}"
            );
        }
        match &r.action {
            Action::Terminate { grace_seconds } => usable_secs("grace_seconds", *grace_seconds)?,
            Action::RunCommand {
                timeout_seconds, ..
            } => usable_secs("timeout_seconds", *timeout_seconds)?,
            Action::LimitMemory { gib } => prop_assert!(
                gib.is_finite() && *gib > 0.0 && gib * 1_073_741_824.0 < u64::MAX as f64,
                "gib"
            ),
            Action::Notify
            | Action::Signal { .. }
            | Action::ReleaseCache
            | Action::Park
            | Action::Resume => {}
        }
    }
    Ok(())
}

/// True when `line` writes the key `k` (as `k = …`, in a dotted key `a.k = …`, or inside an
/// inline table `{ k = … }`).
fn writes_key(line: &str, k: &str) -> bool {
    line.match_indices(k).any(|(i, _)| {
        let before = line[..i].trim_end_matches('"').chars().next_back();
        let after = line[i + k.len()..].trim_start_matches('"').trim_start();
        before.is_none_or(|c| matches!(c, ' ' | '.' | '{' | ',' | '\t'))
            && (after.starts_with('=') || after.starts_with('.'))
    })
}

/// The checks every parse result must pass: an error's line lies in the file; accepted
/// settings convert, and written back out they read back the same.
fn check(text: &str) -> Result<(), TestCaseError> {
    let path = Path::new("attack.toml");
    match Settings::from_toml(text, path) {
        Err(e) => {
            let lines = text.lines().count().max(1) + 1;
            if let Some(line) = e.line {
                prop_assert!((1..=lines).contains(&line), "line {line} of {lines}: {e}");
            }
            if let Ok(parsed) = toml::from_str::<Settings>(text) {
                // A validation error: it points at the offending key's own line, or (when
                // that key is not written) at a table header above it.
                let p = parsed.problems_at().into_iter().next();
                let p = p.ok_or_else(|| {
                    TestCaseError::fail(format!("rejected without a problem: {e}"))
                })?;
                let key = p.key.iter().rev().find_map(|k| match k {
                    KeyPart::Key(k) => Some(*k),
                    KeyPart::Index(_) => None,
                });
                let line = e
                    .line
                    .ok_or_else(|| TestCaseError::fail(format!("no line: {e}")))?;
                let at = text.lines().nth(line - 1).unwrap_or("").trim_start();
                prop_assert!(
                    key.is_some_and(|k| writes_key(at, k)) || at.starts_with('['),
                    "{e} points at {at:?}"
                );
            }
            prop_assert!(!e.reason.is_empty());
            prop_assert!(e.to_string().contains("attack.toml"));
        }
        Ok(s) => {
            prop_assert!(s.problems().is_empty());
            everything_converts(&s)?;
            let again = toml::to_string_pretty(&s)
                .map_err(|e| TestCaseError::fail(format!("cannot write accepted settings: {e}")))?;
            let back = Settings::from_toml(&again, path).map_err(|e| {
                TestCaseError::fail(format!("written settings rejected: {e}\n{again}"))
            })?;
            prop_assert_eq!(back, s);
        }
    }
    Ok(())
}

#[test]
fn the_valid_fixture_passes_the_checks() {
    // The properties below start from this; it must itself be accepted.
    let s = Settings::from_toml(VALID, Path::new("valid.toml")).expect("valid");
    assert_eq!(s.cleanup.rules.len(), 2);
    check(VALID).expect("checks");
}

proptest! {
    #[test]
    fn toml_ish_text_never_panics(text in document()) {
        check(&text)?;
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        check(&text)?;
    }

    #[test]
    fn shaped_documents_never_panic_and_accepted_values_convert(text in shaped_document()) {
        check(&text)?;
    }

    #[test]
    fn mutated_valid_configs_never_panic(changes in proptest::collection::vec(mutation(), 1..6)) {
        check(&mutate(VALID, &changes))?;
    }
}

/// How many of `n` texts from `strategy` are accepted, and how many are rejected by
/// validation (they parse, but a value is out of range).
fn outcomes(strategy: BoxedStrategy<String>, n: usize) -> (usize, usize) {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut accepted, mut invalid) = (0, 0);
    for _ in 0..n {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        let text = tree.current();
        match Settings::from_toml(&text, Path::new("x.toml")) {
            Ok(_) => accepted += 1,
            Err(_) if toml::from_str::<Settings>(&text).is_ok() => invalid += 1,
            Err(_) => {}
        }
    }
    (accepted, invalid)
}

#[test]
fn the_generators_reach_both_acceptance_and_validation() {
    // Otherwise the properties would pass by only ever testing the TOML parser.
    let (accepted, invalid) = outcomes(shaped_document().boxed(), 400);
    assert!(
        accepted >= 10 && invalid >= 100,
        "shaped: {accepted} accepted, {invalid} invalid"
    );
    let mutated = proptest::collection::vec(mutation(), 1..6).prop_map(|c| mutate(VALID, &c));
    let (accepted, invalid) = outcomes(mutated.boxed(), 400);
    assert!(
        accepted >= 40 && invalid >= 10,
        "mutated: {accepted} accepted, {invalid} invalid"
    );
}

/// A number out of its type's range is said in words, not in Rust's type names.
#[test]
fn numbers_out_of_range_are_refused_in_words() {
    let path = Path::new("c.toml");
    for (key, value, words) in [
        (
            "[sampling]\ninterval_ms",
            "99999999999999999999",
            "is too large: expected a whole number",
        ),
        (
            "[sampling]\ninterval_ms",
            "-5",
            "expected a whole number, 0 or more",
        ),
        (
            "[sessions]\nretention_days",
            "5000000000",
            "expected a whole number from 0 to 4294967295",
        ),
    ] {
        let text = format!("{key} = {value}\n");
        let e = Settings::from_toml(&text, path).expect_err("refused");
        let said = e.to_string();
        assert!(said.contains(words), "{said}");
        assert!(
            !said.contains("u64") && !said.contains("u32") && !said.contains("i128"),
            "{said}"
        );
        assert_eq!(e.line, Some(2));
    }
}
