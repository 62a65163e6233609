//! A rule's command never hands a process's text to a shell to interpret. `run_command` starts
//! its program directly (no shell), and each placeholder becomes (part of) one argument; but a
//! rule written as `["/bin/sh", "-c", "… {name} …"]` puts the value *inside a script*, where a
//! process named `;touch /tmp/PW` runs that command. Such a rule is refused where the settings
//! are read (`rules check`, the settings window) and, should one get past, when it would run.
//!
//! The numeric placeholders (`{pid}`, `{start_time}`, `{gpu}`) are digits only and safe
//! anywhere. A name or user reaches a script safely as a positional argument:
//! `["/bin/sh", "-c", "echo \"$1\"", "sh", "{name}"]`.

/// Programs that run their `-c` (or `-e`) argument as code.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox",
];
/// Interpreters whose `-c` / `-e` argument is code.
const INTERPRETERS: &[&str] = &["python", "perl", "ruby", "node", "php", "lua", "awk"];

/// Placeholders whose values are text from the process (any bytes its owner chose).
pub const TEXT_PLACEHOLDERS: &[&str] = &["{name}", "{user}"];

/// The program's file name, with a leading `env` (and its options) looked through.
fn program(argv: &[String]) -> Option<(usize, String)> {
    let base = |a: &str| a.rsplit('/').next().unwrap_or(a).to_string();
    let first = base(argv.first()?);
    if first != "env" {
        return Some((0, first));
    }
    argv.iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| !a.starts_with('-') && !a.contains('='))
        .map(|(i, a)| (i, base(a)))
}

/// True when `name` is a shell or an interpreter (`python3.11` counts as `python`).
fn runs_code(name: &str) -> bool {
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    SHELLS.contains(&name) || SHELLS.contains(&stem) || INTERPRETERS.contains(&stem)
}

/// True for an option cluster that says "the next argument is code": `-c`, `-e`, `-ec`,
/// `-xc`, `--command`, `--eval`.
fn code_flag(a: &str) -> bool {
    if a == "--command" || a == "--eval" {
        return true;
    }
    a.strip_prefix('-')
        .is_some_and(|f| !f.starts_with('-') && !f.is_empty() && f.ends_with(['c', 'e']))
}

/// Why `argv` would hand a text placeholder to a shell or interpreter as code, if it would:
/// the program runs code (a shell, `python`, `perl`, …, also behind `env`) and a `{name}` or
/// `{user}` appears in the argument after its `-c`/`-e` (the script), or in an `awk` program.
pub fn placeholder_in_code(argv: &[String]) -> Option<String> {
    let (at, prog) = program(argv)?;
    if !runs_code(&prog) {
        return None;
    }
    let rest = &argv[at + 1..];
    let has_text = |a: &&String| TEXT_PLACEHOLDERS.iter().any(|p| a.contains(*p));
    let script = if prog.ends_with("awk") {
        rest.iter().find(|a| !a.starts_with('-')).filter(has_text)
    } else {
        // Every argument that follows a code option (`bash -e -c '…'` has two).
        rest.windows(2)
            .filter(|w| code_flag(&w[0]))
            .map(|w| &w[1])
            .find(has_text)
    }?;
    let ph = TEXT_PLACEHOLDERS.iter().find(|p| script.contains(**p))?;
    Some(format!(
        "{ph} is inside the code that {prog} runs ({script:?}): a process can choose its own name or command line, and its text would run as a command. Pass it as a separate argument instead, e.g. [\"/bin/sh\", \"-c\", \"echo \\\"$1\\\"\", \"sh\", \"{ph}\"]"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn scripts_with_text_placeholders_are_found() {
        for bad in [
            &["/bin/sh", "-c", "echo {name} >> /tmp/log"][..],
            &["bash", "-ec", "logger {user}"],
            &["bash", "-e", "-c", "logger {user}"],
            &["/usr/bin/env", "-i", "dash", "-c", "x {name}"],
            &["python3.11", "-c", "print('{name}')"],
            &["perl", "-e", "print '{user}'"],
            &["awk", "BEGIN { print \"{name}\" }"],
        ] {
            assert!(placeholder_in_code(&v(bad)).is_some(), "{bad:?}");
        }
        for ok in [
            &["/bin/sh", "-c", "kill -USR1 {pid}"][..],
            &["/bin/sh", "-c", "echo \"$1\"", "sh", "{name}"],
            &["/usr/bin/logger", "--", "{name} on GPU {gpu}"],
            &["notify-send", "{user}"],
            &["python3", "script.py", "{name}"],
        ] {
            assert!(placeholder_in_code(&v(ok)).is_none(), "{ok:?}");
        }
    }
}
