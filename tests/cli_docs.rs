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
    for code in vramwarden::front::cli::docs::EXIT_CODES {
        assert!(page.contains(&format!(".TP\n\\fB{}\\fR\n", code.0)));
    }
    for var in ["VRAMWARDEN_CONFIG", "VRAMWARDEN_DATA_DIR", "RUST_LOG"] {
        assert!(page.contains(var), "the man page lacks ${var}");
    }
    assert!(page.contains("config.toml") && page.contains("sessions"));
    // groff reads Latin-1: anything beyond ASCII goes as an escape.
    assert!(page.is_ascii(), "the man page has raw UTF-8");
}

/// docs/configuration.md says `vramwarden man` lists the same variables as its table.
#[test]
fn the_man_page_lists_every_variable_of_the_configuration_guide() {
    let guide = repo_file("docs/configuration.md");
    let table = guide
        .split("## Environment")
        .nth(1)
        .and_then(|t| t.split("\n## ").next())
        .expect("an Environment section");
    let listed: Vec<&str> = vramwarden::front::cli::docs::ENVIRONMENT
        .iter()
        .map(|e| e.0)
        .collect();
    let mut rows = 0;
    for row in table.lines().filter(|l| l.starts_with("| `")) {
        let name = row.split('`').nth(1).expect("a name");
        rows += 1;
        assert!(listed.contains(&name), "{name} is not in `vramwarden man`");
    }
    assert!(rows >= 8, "{rows} rows read");
}

#[test]
fn every_environment_variable_the_code_reads_is_documented() {
    // A stand-in for a full scan: the variables the sources read by name.
    let documented: Vec<&str> = vramwarden::front::cli::docs::ENVIRONMENT
        .iter()
        .map(|e| e.0)
        .collect();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut missing = Vec::new();
    let mut found = 0;
    for file in ["engine/settings.rs", "session/mod.rs", "host/logging.rs"] {
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

fn repo_file(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The user's manual: at most 400 lines, the two commands first (the app, and the tests as CI
/// runs them), the slots for the features being added, and the documents it links to.
#[test]
fn the_readme_opens_with_the_two_commands_that_ci_uses() {
    let readme = repo_file("README.md");
    assert!(
        readme.lines().count() <= 400,
        "{} lines",
        readme.lines().count()
    );
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a first sh block");
    let commands: Vec<&str> = block
        .lines()
        .map(|l| l.split(" #").next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands, ["cargo run --release", ".ci/run"]);
    // The first block comes before any section: it is the first thing a reader sees.
    assert!(readme.find("```sh") < readme.find("\n## "));
    let ci = repo_file(".ci/run");
    assert!(
        ci.contains("\ncargo test --locked\n"),
        "CI runs the test suite"
    );
    assert!(ci.contains("pytest") && ci.contains("--no-default-features"));
    for slot in [
        "## Park and resume\n\n<!-- park -->",
        "## OOM guard\n\n<!-- guard -->",
    ] {
        assert!(readme.contains(slot), "the README lacks the slot {slot:?}");
    }
}

/// Every relative link of the README and docs/ names a file that exists, and none of them
/// reads like a work diary.
#[test]
fn the_documentation_links_resolve_and_hold_no_diary() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![("README.md".to_string(), root.to_path_buf())];
    for e in std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().to_string();
        if name.ends_with(".md") {
            files.push((format!("docs/{name}"), root.join("docs")));
        }
    }
    assert!(files.len() >= 10, "{files:?}");
    let mut links = 0;
    for (rel, dir) in &files {
        let text = repo_file(rel);
        for (i, _) in text.match_indices("](") {
            let target: String = text[i + 2..].chars().take_while(|c| *c != ')').collect();
            // Web links, anchors, and `](` inside code (a regex such as `[- ](lab|notebook)`).
            if target.starts_with("http")
                || target.starts_with('#')
                || target.contains(|c: char| c.is_whitespace() || c == '|')
            {
                continue;
            }
            let path = target.split('#').next().unwrap_or("");
            assert!(dir.join(path).exists(), "{rel}: broken link {target}");
            links += 1;
        }
        for diary in [
            "this session",
            "devrun",
            " lent ",
            "(stop ",
            "stop 2",
            "device tool",
        ] {
            assert!(!text.contains(diary), "{rel} reads like a diary: {diary:?}");
        }
    }
    assert!(links >= 20, "only {links} links checked");
    for doc in [
        "docs/park-and-resume.md",
        "docs/oom-guard.md",
        "docs/security.md",
    ] {
        assert!(root.join(doc).is_file(), "{doc}");
    }
}
