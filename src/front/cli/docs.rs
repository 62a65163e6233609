//! `vramwarden completions SHELL` and `vramwarden man`: shell completions and the man page,
//! both generated from the clap definitions in [`crate::front::cli`], so they never drift from them.

use std::io::Write;

use clap::CommandFactory;

use crate::front::cli::{exit, Cli};

/// The exit codes every command uses (the same as `cli::CliError::exit_code` and the
/// `--help` footer): code and meaning.
pub const EXIT_CODES: &[(u8, &str)] = &[
    (exit::OK, "Success."),
    (
        exit::ERROR,
        "Error: a failed recording, a damaged input that yields nothing, an internal error.",
    ),
    (exit::USAGE, "Usage: bad arguments."),
    (
        exit::NO_DRIVER,
        "No NVIDIA driver could be loaded (try --demo).",
    ),
];

/// The environment variables vramwarden reads: name and meaning.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "VRAMWARDEN_CONFIG",
        "The settings file, when --config is not given.",
    ),
    (
        "VRAMWARDEN_DATA_DIR",
        "Replaces the platform data folder: session logs go to its sessions/ folder and the \
         window's log files to its logs/ folder.",
    ),
    (
        "VRAMWARDEN_NVML_LIB",
        "Load NVML from this file instead of libnvidia-ml.so.1 from the linker's path.",
    ),
    (
        "VRAMWARDEN_DEMO_FLEET",
        "With --demo, simulate a server instead: GPUSxPROCESSES, e.g. 8x200.",
    ),
    (
        "VRAMWARDEN_TORCH",
        "0 keeps the PyTorch companion off in a Python process.",
    ),
    (
        "RUST_LOG",
        "Which diagnostics are logged, e.g. debug, or vramwarden=debug,wgpu=warn (default: info \
         for vramwarden, warn for the libraries).",
    ),
    (
        "JOURNAL_STREAM",
        "Set by systemd: log lines then carry no time stamp (the journal adds its own) and start \
         with their syslog priority (<3> error, <4> warning, <6> info, <7> debug).",
    ),
    (
        "DBUS_SESSION_BUS_ADDRESS",
        "The session bus that desktop notifications go to; without one the window shows its \
         alerts itself.",
    ),
    (
        "XDG_RUNTIME_DIR",
        "Where PyTorch companions put their sockets (vramwarden/torch-PID.sock; else \
         /tmp/vramwarden-UID/).",
    ),
];

/// The files vramwarden reads and writes (Linux paths; other platforms use their own folders).
pub(crate) const FILES: &[(&str, &str)] = &[
    (
        "~/.config/vramwarden/config.toml",
        "The settings (File \\(-> Settings in the window); --config or $VRAMWARDEN_CONFIG \
         override it.",
    ),
    (
        "~/.local/share/vramwarden/sessions/*.vwlog",
        "Session logs, one per run of the window or of record (mode 0600 in a 0700 folder).",
    ),
    (
        "~/.local/state/vramwarden/vramwarden.*.log",
        "The window's log files, one per day, the newest few kept.",
    ),
];

/// Writes the completion script of `shell` for `vramwarden`.
///
/// # Errors
/// If writing to `out` fails.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) -> std::io::Result<()> {
    // Built first: every command then holds its own copy of each global option it offers.
    let mut built = crate::front::cli::args::command();
    built.build();
    let mut cmd = without_hidden(&built);
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "vramwarden", &mut buf);
    out.write_all(&buf)
}

/// The built `cmd` without its hidden (developer) subcommands and arguments, at every level:
/// clap's completion generators list hidden subcommands too, and clap has no way to remove
/// one. No option stays global: each command keeps the copies it offers, and a hidden one is
/// not put back.
fn without_hidden(cmd: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new(cmd.get_name().to_string()).args(
        cmd.get_arguments()
            .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
            .map(|a| a.clone().global(false)),
    );
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    if let Some(version) = cmd.get_version() {
        out = out.version(version.to_string());
    }
    // clap's own `help` command and flags are made again when the generator builds it.
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        out = out.subcommand(without_hidden(sub));
    }
    out
}

/// Writes the man page (section 1, roff): the clap sections, one entry per command and
/// subcommand with its usage, then EXIT STATUS, ENVIRONMENT and FILES.
///
/// # Errors
/// If writing to `out` fails.
pub fn man_page(out: &mut dyn Write) -> std::io::Result<()> {
    let mut cmd = Cli::command();
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut buf: Vec<u8> = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;
    buf.extend_from_slice(b".SH COMMANDS\n");
    for (path, usage, about) in command_list(&cmd) {
        buf.extend_from_slice(
            format!(
                ".TP\n\\fB{}\\fR\n{}\n.br\n{}\n",
                roff_escape(&path),
                roff_escape(&about),
                roff_escape(&usage)
            )
            .as_bytes(),
        );
        if let Some(sub) = find(&cmd, &path) {
            for (name, help) in own_args(sub) {
                buf.extend_from_slice(
                    format!(
                        ".RS\n.TP\n{}\n{}\n.RE\n",
                        roff_escape(&name),
                        roff_escape(&help)
                    )
                    .as_bytes(),
                );
            }
        }
    }
    section(
        &mut buf,
        "EXIT STATUS",
        EXIT_CODES.iter().map(|(c, m)| (c.to_string(), *m)),
    );
    section(
        &mut buf,
        "ENVIRONMENT",
        ENVIRONMENT.iter().map(|(n, m)| ((*n).to_string(), *m)),
    );
    section(
        &mut buf,
        "FILES",
        FILES.iter().map(|(n, m)| ((*n).to_string(), *m)),
    );
    buf.extend_from_slice(b".SH \"SEE ALSO\"\n\\fBnvidia-smi\\fR(1)\n");
    man.render_version_section(&mut buf)?;
    out.write_all(ascii_roff(&String::from_utf8_lossy(&buf)).as_bytes())
}

/// `page` with every character beyond ASCII as a roff escape (`×` as `\[u00D7]`): groff reads
/// its input as Latin-1 and warns of (and drops) UTF-8 bytes.
fn ascii_roff(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    for c in page.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            out.push_str(&format!("\\[u{:04X}]", u32::from(c)));
        }
    }
    out
}

/// Every visible subcommand, depth first: its full name (`vramwarden rules check`), its usage
/// line and its one-line description.
fn command_list(cmd: &clap::Command) -> Vec<(String, String, String)> {
    let mut list = Vec::new();
    walk(cmd, cmd.get_name(), &mut list);
    list
}

fn walk(cmd: &clap::Command, prefix: &str, list: &mut Vec<(String, String, String)>) {
    // clap's generated `help` subcommands are left out (the page itself is the help).
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let path = format!("{prefix} {}", sub.get_name());
        let usage = sub
            .clone()
            .render_usage()
            .to_string()
            .trim_start_matches("Usage:")
            .trim()
            .to_string();
        let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
        list.push((path.clone(), usage, about));
        walk(sub, &path, list);
    }
}

/// The subcommand at `path` (`vramwarden rules check`).
fn find<'a>(root: &'a clap::Command, path: &str) -> Option<&'a clap::Command> {
    let mut cmd = root;
    for name in path.split(' ').skip(1) {
        cmd = cmd.find_subcommand(name)?;
    }
    Some(cmd)
}

/// A command's own arguments (not the global ones, not --help): how to write it and its help,
/// with the accepted values when there is a fixed set.
fn own_args(cmd: &clap::Command) -> Vec<(String, String)> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set() && !a.is_global_set())
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .map(|a| {
            let values = a
                .get_value_names()
                .map(|v| {
                    v.iter()
                        .map(|n| format!("<{n}>"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_else(|| format!("<{}>", a.get_id().as_str().to_uppercase()));
            let takes_value = a.get_action().takes_values();
            let name = match (a.get_long(), a.is_positional()) {
                (_, true) => values,
                (Some(l), _) if takes_value => format!("--{l} {values}"),
                (Some(l), _) => format!("--{l}"),
                (None, _) => a.get_id().to_string(),
            };
            let mut help = a.get_help().map(ToString::to_string).unwrap_or_default();
            let possible: Vec<String> = a
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect();
            if !possible.is_empty() {
                help.push_str(&format!(" [values: {}]", possible.join(", ")));
            }
            if let Some(d) = a.get_default_values().first().filter(|_| takes_value) {
                help.push_str(&format!(" [default: {}]", d.to_string_lossy()));
            }
            (name, help)
        })
        .collect()
}

fn section<'a>(buf: &mut Vec<u8>, title: &str, rows: impl Iterator<Item = (String, &'a str)>) {
    buf.extend_from_slice(format!(".SH \"{title}\"\n").as_bytes());
    for (name, meaning) in rows {
        buf.extend_from_slice(
            format!(".TP\n\\fB{}\\fR\n{}\n", roff_escape(&name), meaning).as_bytes(),
        );
    }
}

/// Escapes the characters roff treats specially in running text (backslash, a leading dot or
/// quote, and hyphens, which would otherwise be typeset as Unicode hyphens).
fn roff_escape(s: &str) -> String {
    let mut out = s.replace('\\', "\\e").replace('-', "\\-");
    if out.starts_with('.') || out.starts_with('\'') {
        out.insert_str(0, "\\&");
    }
    out
}
