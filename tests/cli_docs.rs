//! `vramwarden completions SHELL` and `vramwarden man`, through the real binary.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vramwarden"))
}

fn run(args: &[&str]) -> String {
    let out = bin().args(args).output().expect("run");
    assert!(
        out.status.success(),
        "{args:?}: stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// The visible subcommands a user can type.
const SUBCOMMANDS: &[&str] = &[
    "snapshot",
    "record",
    "export",
    "rules",
    "import",
    "completions",
    "man",
];

#[test]
fn completions_for_each_shell_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish"] {
        let script = run(&["completions", shell]);
        assert!(script.len() > 500, "{shell}: only {} bytes", script.len());
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell} completion lacks `{sub}`");
        }
        // Nested subcommands are completed too.
        assert!(
            script.contains("nvidia-smi"),
            "{shell}: no `import nvidia-smi`"
        );
        assert!(script.contains("check"), "{shell}: no `rules check`");
    }
    // Each shell gets its own syntax, not one script for all.
    assert!(run(&["completions", "bash"]).contains("complete -F"));
    assert!(run(&["completions", "zsh"]).starts_with("#compdef vramwarden"));
    assert!(run(&["completions", "fish"]).contains("complete -c vramwarden"));
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let out = bin()
        .args(["completions", "cmd.exe"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

#[test]
fn the_man_page_lists_commands_exit_status_files_and_environment() {
    let page = run(&["man"]);
    assert!(
        page.starts_with(".ie") || page.contains(".TH vramwarden 1"),
        "not roff"
    );
    assert!(page.contains(".TH vramwarden 1"));
    for sub in SUBCOMMANDS {
        assert!(
            page.contains(&format!("vramwarden {sub}")),
            "the man page lacks `vramwarden {sub}`"
        );
    }
    assert!(page.contains("vramwarden rules check"));
    assert!(page.contains("vramwarden import nvidia\\-smi"));
    // Hidden developer commands stay out.
    assert!(
        !page.contains("bench"),
        "hidden commands must not be documented"
    );
    for section in ["EXIT STATUS", "ENVIRONMENT", "FILES", "OPTIONS"] {
        assert!(
            page.contains(&format!(".SH \"{section}\""))
                || page.contains(&format!(".SH {section}")),
            "no {section}"
        );
    }
    for code in vramwarden::cli_docs::EXIT_CODES {
        assert!(page.contains(&format!(".TP\n\\fB{}\\fR\n", code.0)));
    }
    for var in ["VRAMWARDEN_CONFIG", "VRAMWARDEN_DATA_DIR", "RUST_LOG"] {
        assert!(page.contains(var), "the man page lacks ${var}");
    }
    assert!(page.contains("config.toml") && page.contains("sessions"));
}

#[test]
fn every_environment_variable_the_code_reads_is_documented() {
    // A stand-in for a full scan: the variables the sources read by name.
    let documented: Vec<&str> = vramwarden::cli_docs::ENVIRONMENT
        .iter()
        .map(|e| e.0)
        .collect();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut missing = Vec::new();
    let mut found = 0;
    for file in ["settings.rs", "session/mod.rs", "logging.rs"] {
        let text = std::fs::read_to_string(src.join(file)).expect("source file");
        let reads = text
            .match_indices("var_os(\"")
            .map(|(i, m)| i + m.len())
            .chain(text.match_indices("env::var(\"").map(|(i, m)| i + m.len()));
        for start in reads.collect::<Vec<_>>() {
            let name: String = text[start..].chars().take_while(|c| *c != '"').collect();
            found += 1;
            if !documented.contains(&name.as_str()) {
                missing.push(name);
            }
        }
    }
    assert!(found >= 4, "the scan found only {found} variables");
    assert!(missing.is_empty(), "undocumented: {missing:?}");
}
