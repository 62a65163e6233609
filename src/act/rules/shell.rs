//! A rule's command never hands a process's text to a shell, an interpreter or a path.
//! `run_command` starts its program directly (no shell), but the program may still take an
//! argument as code (`sh -c`, `perl -e`, `env -S`, `su -c`, `flock -c`, `timeout 5 sh -c`, …)
//! or as a file to run (`/opt/hooks/{name}.sh`). A deny-list of such programs cannot be
//! complete, so the text placeholders (`{name}`, `{user}`: any bytes a process's owner
//! chose) are replaced only where their value stays one plain argument:
//!
//! - never in the program (argv\[0\]), for any placeholder;
//! - `{name}` and `{user}` only as a whole argument (never inside a longer one, where they
//!   could land in a script, a path or an option);
//! - never right after an option (`-c`, `-e`, `-S`, `--`, …: the option may take it as code),
//!   nor as the first argument of a shell, interpreter or command runner (`sh {name}` runs a
//!   file of that name);
//! - never anywhere among the arguments of a command runner named as the program
//!   ([`RUNNERS`]: `ssh host {name}` and `watch -n 5 {name}` run their arguments as shell
//!   code, `sudo`, `timeout`, `docker exec` … as a command), whatever precedes it;
//! - and, when the rule runs, a value holding a `/` or starting with `.` or `-` is refused
//!   ([`value_problem`]): it could name a path or become an option.
//!
//! Such a rule is refused where the settings are read (`rules check`, the settings window)
//! and, should one get past, when it would run. The numeric placeholders (`{pid}`,
//! `{start_time}`, `{gpu}`) are digits only and safe inside any argument after the program.
//! A name or user reaches a script as a positional argument:
//! `["/bin/sh", "-c", "echo \"$1\"", "sh", "{name}"]` (a script that `eval`s its arguments
//! is its author's to answer for).

/// Programs that run an argument as code or as a script file.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox",
];
/// Interpreters whose first argument (or `-c` / `-e` argument) is code or a script.
const INTERPRETERS: &[&str] = &[
    "python",
    "perl",
    "ruby",
    "node",
    "php",
    "lua",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "sed",
    "tclsh",
    "expect",
    "osascript",
    "pwsh",
];
/// Programs whose operands are a command they run (some, as `ssh`, `watch`, `su -c`,
/// `tmux`, `screen`, `at`, `parallel`, run them as shell code): a text placeholder is refused
/// anywhere among their arguments when one of them is the program.
const RUNNERS: &[&str] = &[
    "busybox",
    "tmux",
    "screen",
    "at",
    "batch",
    "docker",
    "podman",
    "kubectl",
    "nerdctl",
    "ctr",
    "crictl",
    "lxc-attach",
    "machinectl",
    "pkexec",
    "dbus-launch",
    "daemonize",
    "start-stop-daemon",
    "env",
    "timeout",
    "nice",
    "nohup",
    "setsid",
    "sudo",
    "doas",
    "su",
    "runuser",
    "xargs",
    "exec",
    "chroot",
    "flock",
    "ionice",
    "taskset",
    "chrt",
    "stdbuf",
    "unshare",
    "nsenter",
    "systemd-run",
    "time",
    "command",
    "strace",
    "ltrace",
    "watch",
    "script",
    "eval",
    "parallel",
    "ssh",
    "setpriv",
    "capsh",
    "sg",
    "newgrp",
    "cgexec",
    "prlimit",
    "numactl",
    "firejail",
    "bwrap",
];

/// Placeholders whose values are text from the process (any bytes its owner chose).
const TEXT_PLACEHOLDERS: &[&str] = &["{name}", "{user}"];

/// Every placeholder a command's arguments may hold (see [`super::action`]'s substitution).
const ALL_PLACEHOLDERS: &[&str] = &["{pid}", "{start_time}", "{gpu}", "{user}", "{name}"];

/// The file name of a program argument.
fn base(a: &str) -> &str {
    a.rsplit('/').next().unwrap_or(a)
}

/// True when `name` runs an argument as code, a script or a command (`python3.11` counts as
/// `python`).
fn runs_code(name: &str) -> bool {
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    [SHELLS, INTERPRETERS, RUNNERS]
        .iter()
        .any(|l| l.contains(&name) || l.contains(&stem))
}

/// True for an option cluster that may say "the next argument is code": `-c`, `-e`, `-E`,
/// `-S`, `-ec`, `-cx`, `--command`, `--eval`.
fn code_flag(a: &str) -> bool {
    if a == "--command" || a == "--eval" {
        return true;
    }
    a.strip_prefix('-')
        .is_some_and(|f| !f.starts_with('-') && f.contains(['c', 'e', 'E', 'S']))
}

/// The safe form, for the messages.
const SAFE_FORM: &str =
    "pass it alone after a plain argument, e.g. [\"/bin/sh\", \"-c\", \"echo \\\"$1\\\"\", \"sh\", \"{name}\"]";

/// Why `argv` could hand a placeholder's value to a program as code or a path, if it could
/// (see the module's documentation): the first problem found, in words for `rules check`.
pub(crate) fn placeholder_problem(argv: &[String]) -> Option<String> {
    if let Some(p) = argv
        .first()
        .and_then(|a0| ALL_PLACEHOLDERS.iter().find(|p| a0.contains(**p)))
    {
        return Some(format!(
            "{p} is in the program's path ({:?}): a process could choose which program runs as this rule. Name the program itself and pass {p} as an argument",
            argv[0]
        ));
    }
    argv.iter()
        .enumerate()
        .skip(1)
        .find_map(|(i, a)| text_argument_problem(argv, i, a))
        .or_else(|| runner_problem(argv))
}

/// The problem of a text placeholder anywhere among the arguments of a command runner named
/// as the program (`ssh gateway {name}`, `watch -n 5 {name}`): where it lands in the command
/// it runs does not depend on the argument before it.
fn runner_problem(argv: &[String]) -> Option<String> {
    let prog = base(argv.first()?);
    let stem = prog.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.' || c == '-');
    if !(RUNNERS.contains(&prog) || RUNNERS.contains(&stem)) {
        return None;
    }
    let ph = argv[1..]
        .iter()
        .find_map(|a| TEXT_PLACEHOLDERS.iter().find(|p| a.contains(**p)))?;
    Some(format!(
        "{ph} is an argument of {prog}, which runs its arguments as a command (ssh, watch, su, tmux and others as shell code), and a process can choose its own name; name a script of yours as the program instead and {SAFE_FORM}"
    ))
}

/// The problem of argument `i` (`a`) when it holds a text placeholder.
fn text_argument_problem(argv: &[String], i: usize, a: &str) -> Option<String> {
    let ph = TEXT_PLACEHOLDERS.iter().find(|p| a.contains(**p))?;
    if a != *ph {
        return Some(format!(
            "{ph} is part of the argument {a:?}: a process can choose its own name, and inside a longer argument it can land in a script, a path or an option, so {ph} is replaced only as a whole argument; {SAFE_FORM}"
        ));
    }
    // The argument before it, looking through `--` (`sh -c -- {name}` is still a script).
    let j = (1..i).rev().find(|&j| argv[j] != "--").unwrap_or(0);
    let prev = argv[j].as_str();
    if j > 0 && prev.starts_with('-') {
        return Some(format!(
            "{ph} follows the option {prev:?}, which may take it as code (as `sh -c`, `perl -e`, `env -S`, `su -c`, `flock -c` do) and a process can choose its own name; {SAFE_FORM}"
        ));
    }
    // `prev` is a program unless a script came before it (`sh -c '…' sh {name}`: the
    // second `sh` is the script's `$0`).
    if !argv[1..j.max(1)].iter().any(|a| code_flag(a)) {
        let prog = base(prev);
        if runs_code(prog) {
            return Some(format!(
                "{ph} is the first argument of {prog}, which runs it as a script or a command, and a process can choose its own name; {SAFE_FORM}"
            ));
        }
    }
    None
}

/// Why the value of a text placeholder may not be passed (when the rule runs): one that
/// holds a `/` or starts with `.` could name a path (`../shared/m`).
pub(crate) fn value_problem(ph: &str, value: &str) -> Option<String> {
    if value.contains('/') || value.starts_with('.') {
        return Some(format!(
            "not run: {ph} is {value:?}, which holds a `/` or starts with `.` and could name a path"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn placeholders_where_a_program_could_take_them_as_code_or_a_path_are_found() {
        for bad in [
            &["/bin/sh", "-c", "echo {name} >> /tmp/log"][..],
            &["bash", "-ec", "logger {user}"],
            &["bash", "-e", "-c", "logger {user}"],
            &["/usr/bin/env", "-i", "dash", "-c", "x {name}"],
            &["python3.11", "-c", "print('{name}')"],
            &["perl", "-e", "print '{user}'"],
            &["awk", "BEGIN { print \"{name}\" }"],
            // The wrappers.
            &["timeout", "5", "/bin/sh", "-c", "x {name}"],
            &["nice", "sh", "-c", "x {name}"],
            &["flock", "/tmp/l", "-c", "x {name}"],
            &["su", "root", "-c", "x {name}"],
            &["runuser", "--", "sh", "-c", "x {name}"],
            &["/bin/sh", "-c", "--", "x {name}"],
            &["bash", "-cx", "x {name}"],
            &["sh", "-cv", "x {name}"],
            &["env", "-S", "sh -c 'x {name}'"],
            &["perl", "-E", "say '{name}'"],
            // The same as whole arguments.
            &["timeout", "5", "/bin/sh", "-c", "{name}"],
            &["/bin/sh", "-c", "--", "{name}"],
            &["env", "-S", "{name}"],
            &["perl", "-E", "{user}"],
            &["bash", "-cx", "{name}"],
            &["sh", "{name}"],
            &["timeout", "5", "python3", "{name}"],
            &["env", "{name}"],
            &["xargs", "--", "{name}"],
            // Runners, wherever the placeholder stands among their arguments.
            &["/usr/bin/ssh", "gpu-gateway", "{name}"],
            &["/usr/bin/watch", "-n", "5", "{name}"],
            &["ssh", "-o", "BatchMode=yes", "gw", "logger", "{user}"],
            &["sudo", "-u", "bob", "/usr/bin/logger", "{name}"],
            &[
                "timeout",
                "5",
                "/bin/sh",
                "-c",
                "echo \"$1\"",
                "sh",
                "{name}",
            ],
            &["docker", "exec", "c1", "echo", "{name}"],
            &["kubectl", "exec", "pod", "--", "echo", "{name}"],
            &["tmux", "new-session", "-d", "{name}"],
            &["at", "now", "{name}"],
            &["busybox", "logger", "{name}"],
            &["/usr/bin/su", "bob", "{name}"],
            &["xargs", "-0", "echo", "{name}"],
            // Paths.
            &["/opt/hooks/{name}.sh", "{pid}"],
            &["{name}"],
            &["/opt/hooks/{pid}.sh"],
            &["cat", "/var/log/{user}.log"],
        ] {
            assert!(placeholder_problem(&v(bad)).is_some(), "{bad:?}");
        }
        for ok in [
            &["/bin/sh", "-c", "kill -USR1 {pid}"][..],
            &["/bin/sh", "-c", "echo \"$1\"", "sh", "{name}"],
            &["/usr/bin/logger", "{name}"],
            &["/usr/bin/logger", "-t", "vramwarden", "--", "{name}"],
            &["/usr/bin/logger", "-t", "vramwarden", "{name}"],
            &["timeout", "5", "/opt/hooks/release", "{pid}"],
            &["touch", "--", "{name}"],
            &["notify-send", "{user}"],
            &["python3", "script.py", "{name}"],
            &["/opt/hooks/release", "--gpu={gpu}", "{pid}", "{user}"],
        ] {
            assert_eq!(placeholder_problem(&v(ok)), None, "{ok:?}");
        }
    }

    #[test]
    fn every_refusal_says_where_and_what_to_write_instead() {
        let m = placeholder_problem(&v(&["/opt/hooks/{name}.sh"])).expect("refused");
        assert!(m.contains("program's path"), "{m}");
        let m = placeholder_problem(&v(&["env", "-S", "{name}"])).expect("refused");
        assert!(m.contains("follows the option \"-S\""), "{m}");
        let m = placeholder_problem(&v(&["nice", "sh", "-c", "x {name}"])).expect("refused");
        assert!(
            m.contains("whole argument") && m.contains("\"sh\", \"{name}\""),
            "{m}"
        );
    }

    #[test]
    fn values_that_could_name_a_path_are_refused() {
        for bad in ["../shared/m", "a/b", ".hidden", "/tmp/x"] {
            assert!(value_problem("{name}", bad).is_some(), "{bad}");
        }
        for ok in ["python3", "Xorg", "a.b", "-rf", ""] {
            assert_eq!(value_problem("{name}", ok), None, "{ok}");
        }
    }
}
