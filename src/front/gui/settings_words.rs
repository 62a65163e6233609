//! What keeps Settings from saving, in the words of the window's own labels ("Rule 2 “Idle
//! holder”, idle for at least: must be …") instead of the file's keys
//! (`cleanup.rules[1] (Idle holder) conditions.idle_min_minutes`), which go in a tooltip.

use crate::engine::settings::{KeyPart, Problem, Settings};

/// The label the window gives a settings key (the last part of its path; `section` is the
/// first: `sampling`, `leaks`, `guard`, … or `rule` for a rule's own keys).
fn label(section: &str, key: &str) -> Option<&'static str> {
    Some(match (section, key) {
        ("sampling", "interval_ms") => "Sampling interval",
        ("sampling", "history_hours") => "History kept",
        ("sessions", "retention_days") => "Delete sessions older than",
        ("sessions", "retention_max_mib") => "Sessions folder size limit",
        ("leaks", "min_growth_mib") => "Minimum growth",
        ("leaks", "min_duration_s") => "Minimum duration",
        ("leaks", "min_rate_mib_per_min") => "Minimum rate",
        ("leaks", "window_s") => "Observation window",
        ("leaks", "quiet_s") => "Ends after no growth for",
        ("leaks", "drop_tolerance_mib") => "Drop tolerance",
        ("leaks", "startup_s") => "Start-up grace",
        ("leaks", "settle_s") => "Settled after",
        ("leaks", "load_mib") => "Load size",
        ("leaks", "load_s") => "Load time",
        ("leaks", "flat_s") => "Flat spell",
        ("guard", "idle_min_minutes") => "Park the largest process GPU-idle for at least",
        ("guard", "leaking_min_minutes") => "Terminate a process flagged as leaking for at least",
        ("guard", "lead_factor") => "Lead factor",
        ("guard", "lead_margin_s") => "Lead margin",
        ("guard", "floor_free_mib") => "Floor",
        ("guard", "safe_minutes") => "Resume horizon",
        ("guard", "resume_hold_s") => "Resume hold",
        ("guard", "min_process_mib") => "Smallest park",
        ("rule", "name") => "its name",
        ("rule", "process_memory_min_mib") => "the process's memory at least",
        ("rule", "user_total_min_mib") => "the user's total at least",
        ("rule", "device_used_min_pct") => "the GPU used at least",
        ("rule", "device_free_max_mib") => "the GPU's free memory at most",
        ("rule", "device_full_within_minutes") => "the GPU full within",
        ("rule", "idle_min_minutes") => "GPU-idle for at least",
        ("rule", "leaking_min_minutes") => "leaking for at least",
        ("rule", "age_min_minutes") => "running for at least",
        ("rule", "cmdline_regex") => "Command line matches",
        ("rule", "name_regex") => "Name matches",
        ("rule", "cooldown_minutes") => "its cooldown",
        ("rule", "hold_seconds") => "how long it must hold",
        ("rule", "action") => "its action",
        _ => return None,
    })
}

/// A key the window has no label for, readable: `retention_max_mib` → "retention max mib".
fn plain(key: &str) -> String {
    key.replace('_', " ")
}

/// Where `p` is, in the window's words: "Leaks, Minimum rate", "Rule 2 “Idle holder”, its
/// cooldown".
pub(crate) fn place(p: &Problem, s: &Settings) -> String {
    let keys: Vec<&str> = p
        .key
        .iter()
        .filter_map(|k| match k {
            KeyPart::Key(k) => Some(*k),
            KeyPart::Index(_) => None,
        })
        .collect();
    let index = p.key.iter().find_map(|k| match k {
        KeyPart::Index(i) => Some(*i),
        KeyPart::Key(_) => None,
    });
    match (keys.as_slice(), index) {
        (["cleanup", "rules", rest @ ..], Some(i)) => {
            let name = s
                .cleanup
                .rules
                .get(i)
                .map_or(String::new(), |r| format!(" “{}”", r.name));
            let what = rest
                .last()
                .map(|k| label("rule", k).map_or_else(|| plain(k), str::to_string))
                .map_or(String::new(), |w| format!(", {w}"));
            format!("Rule {}{name}{what}", i + 1)
        }
        ([section, .., key], _) => {
            let head = match *section {
                "guard" => "OOM guard".to_string(),
                other => {
                    let mut c = other.chars();
                    c.next().map_or(String::new(), |f| {
                        f.to_uppercase().collect::<String>() + c.as_str()
                    })
                }
            };
            let what = label(section, key).map_or_else(|| plain(key), str::to_string);
            format!("{head}, {what}")
        }
        _ => p.at.clone(),
    }
}

/// The first problem that keeps `s` from being saved: the sentence ("Cannot save yet:
/// Leaks, Minimum rate: must be …") and its key in the file, for the tooltip.
pub(crate) fn cannot_save(s: &Settings) -> Option<(String, String)> {
    let p = s.problems_at().into_iter().next()?;
    Some((
        format!("Cannot save yet: {}: {}", place(&p, s), p.what),
        format!("In the settings file: {}", p.at),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_s_problem_names_the_rule_and_the_field_in_words() {
        let mut s = Settings::default();
        s.cleanup.rules.push(crate::act::rules::Rule {
            name: "Idle holder".into(),
            conditions: crate::act::rules::Conditions {
                idle_min_minutes: Some(-1.0),
                ..Default::default()
            },
            ..Default::default()
        });
        let (line, key) = cannot_save(&s).expect("a problem");
        assert!(
            line.starts_with("Cannot save yet: Rule 1 “Idle holder”, GPU-idle for at least: "),
            "{line}"
        );
        assert!(!line.contains("cleanup.rules"), "{line}");
        assert!(!line.contains("idle_min_minutes"), "{line}");
        assert!(key.contains("idle_min_minutes"), "{key}");
    }

    #[test]
    fn a_section_s_problem_uses_the_field_s_label() {
        let mut s = Settings::default();
        s.sampling.interval_ms = 5;
        let (line, key) = cannot_save(&s).expect("a problem");
        assert!(
            line.starts_with("Cannot save yet: Sampling, Sampling interval: "),
            "{line}"
        );
        assert_eq!(key, "In the settings file: sampling.interval_ms");
    }
}
