//! What a rule is: conditions that must all hold, an action, a cooldown and a dry-run flag.

use serde::{Deserialize, Serialize};

/// Conditions of a rule; each is optional and all that are set must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Conditions {
    /// The process holds at least this much GPU memory.
    pub process_memory_min_mib: Option<f64>,
    /// Its GPU is at least this full (used / total, percent).
    pub device_used_min_pct: Option<f64>,
    /// Its GPU has at most this much free.
    pub device_free_max_mib: Option<f64>,
    /// The process has been GPU-idle (utilisation 0 and memory unchanged) this long.
    pub idle_min_minutes: Option<f64>,
    /// The process has been flagged as leaking this long.
    pub leaking_min_minutes: Option<f64>,
    /// Its name matches this regular expression.
    pub name_regex: Option<String>,
    /// Its command line matches this regular expression.
    pub cmdline_regex: Option<String>,
    /// Its owner is this user.
    pub user_is: Option<String>,
    /// Its owner is not this user.
    pub user_is_not: Option<String>,
    /// It has run at least this long.
    pub age_min_minutes: Option<f64>,
    /// Its owner's processes hold at least this much on that GPU together (a quota).
    pub user_total_min_mib: Option<f64>,
    /// Only on this GPU.
    pub gpu: Option<u32>,
    /// Everything above has held continuously this long before the rule fires (hysteresis).
    pub hold_seconds: f64,
}

impl Conditions {
    /// True when a condition about a process is set (the rule then targets processes;
    /// otherwise it targets GPUs).
    pub fn targets_processes(&self) -> bool {
        self.process_memory_min_mib.is_some()
            || self.idle_min_minutes.is_some()
            || self.leaking_min_minutes.is_some()
            || self.name_regex.is_some()
            || self.cmdline_regex.is_some()
            || self.user_is.is_some()
            || self.user_is_not.is_some()
            || self.age_min_minutes.is_some()
            || self.user_total_min_mib.is_some()
    }
}

/// What a rule does when it fires. New kinds (e.g. asking a cooperating PyTorch process to
/// empty its cache) are new variants here and a new arm in [`super::action`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// A desktop notification and an activity entry.
    #[default]
    Notify,
    /// Send one signal (name like `SIGUSR1` or a number).
    Signal {
        /// The signal.
        signal: String,
    },
    /// SIGTERM, then SIGKILL after the grace period if it still holds GPU memory.
    Terminate {
        /// Seconds between SIGTERM and SIGKILL.
        grace_seconds: f64,
    },
    /// Run a program (no shell). `{pid}`, `{gpu}`, `{user}`, `{name}` are replaced in each
    /// argument; output goes to the activity log.
    RunCommand {
        /// Program and arguments.
        argv: Vec<String>,
        /// Kill it after this long.
        timeout_seconds: f64,
    },
}

impl Action {
    /// Short name for the activity log.
    pub fn label(&self) -> String {
        match self {
            Action::Notify => "notify".into(),
            Action::Signal { signal } => format!("signal {signal}"),
            Action::Terminate { grace_seconds } => {
                format!("terminate (SIGKILL after {grace_seconds} s)")
            }
            Action::RunCommand { argv, .. } => format!("run `{}`", argv.join(" ")),
        }
    }

    /// True when the action acts on a process (needs a process target).
    pub fn needs_process(&self) -> bool {
        matches!(self, Action::Signal { .. } | Action::Terminate { .. })
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rule {
    /// Shown in the activity log.
    pub name: String,
    /// Disabled rules are kept but never evaluated.
    pub enabled: bool,
    /// Log what would happen instead of doing it (the default for new rules).
    pub dry_run: bool,
    /// When it fires.
    pub conditions: Conditions,
    /// What it does.
    pub action: Action,
    /// It fires at most once per target in this many minutes.
    pub cooldown_minutes: f64,
    /// May act on other users' processes (only when vramwarden runs as root).
    pub allow_other_users: bool,
}

impl Default for Rule {
    fn default() -> Self {
        Self {
            name: "New rule".into(),
            enabled: true,
            dry_run: true,
            conditions: Conditions::default(),
            action: Action::Notify,
            cooldown_minutes: 10.0,
            allow_other_users: false,
        }
    }
}

/// Most bytes a compiled rule regex may take (the `regex` crate's size limit): a pattern
/// that would compile larger is refused where the settings are read.
pub const REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// Compiles a rule's regular expression with [`REGEX_SIZE_LIMIT`]; the one place rule
/// patterns are compiled (validation and evaluation alike), so what validates also runs.
///
/// # Errors
/// The reason, in words, when the pattern is invalid or too large.
pub fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => format!(
                "the regular expression is too large (over {} KiB compiled)",
                REGEX_SIZE_LIMIT / 1024
            ),
            e => format!(
                "not a valid regular expression: {}",
                e.to_string().lines().last().unwrap_or("")
            ),
        })
}

/// Parses a signal name (`SIGTERM`, `TERM`, `15`).
pub fn parse_signal(s: &str) -> Option<i32> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let name = s.to_ascii_uppercase();
    let name = name.strip_prefix("SIG").unwrap_or(&name);
    Some(match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "TERM" => libc::SIGTERM,
        "CONT" => libc::SIGCONT,
        "STOP" => libc::SIGSTOP,
        _ => return None,
    })
}

impl Rule {
    /// Problems, each as (field, message); empty when the rule is valid.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        let c = &self.conditions;
        if self.name.trim().is_empty() {
            v.push(("name", "the rule needs a name".into()));
        }
        let nonneg = [
            ("process_memory_min_mib", c.process_memory_min_mib),
            ("device_free_max_mib", c.device_free_max_mib),
            ("idle_min_minutes", c.idle_min_minutes),
            ("leaking_min_minutes", c.leaking_min_minutes),
            ("age_min_minutes", c.age_min_minutes),
            ("user_total_min_mib", c.user_total_min_mib),
        ];
        for (f, x) in nonneg {
            if let Some(x) = x {
                if !(x.is_finite() && x >= 0.0) {
                    v.push((f, "must be a number ≥ 0".into()));
                }
            }
        }
        if let Some(p) = c.device_used_min_pct {
            if !(0.0..=100.0).contains(&p) {
                v.push(("device_used_min_pct", "must be between 0 and 100".into()));
            }
        }
        if !(c.hold_seconds.is_finite() && c.hold_seconds >= 0.0) {
            v.push(("hold_seconds", "must be a number ≥ 0".into()));
        }
        for (f, re) in [
            ("name_regex", &c.name_regex),
            ("cmdline_regex", &c.cmdline_regex),
        ] {
            if let Some(re) = re {
                if let Err(e) = compile_regex(re) {
                    v.push((f, e));
                }
            }
        }
        if !(self.cooldown_minutes.is_finite() && self.cooldown_minutes >= 0.0) {
            v.push(("cooldown_minutes", "must be a number ≥ 0".into()));
        }
        match &self.action {
            Action::Signal { signal } if parse_signal(signal).is_none() => v.push((
                "action",
                format!("unknown signal {signal:?} (try SIGTERM, SIGUSR1 or a number)"),
            )),
            Action::Terminate { grace_seconds }
                if !(grace_seconds.is_finite() && *grace_seconds >= 0.0) =>
            {
                v.push(("action", "the grace period must be ≥ 0 s".into()))
            }
            Action::RunCommand {
                argv,
                timeout_seconds,
            } => {
                if argv.first().is_none_or(|a| a.trim().is_empty()) {
                    v.push(("action", "the command is empty".into()));
                }
                if !(timeout_seconds.is_finite() && *timeout_seconds > 0.0) {
                    v.push(("action", "the timeout must be > 0 s".into()));
                }
            }
            _ => {}
        }
        if self.action.needs_process() && !c.targets_processes() {
            v.push(("action", "signalling needs a condition about the process (memory, idle, name, …): a GPU-wide rule can only notify or run a command".into()));
        }
        v
    }

    /// The rule in words, for `rules check` and the editor.
    pub fn describe(&self) -> String {
        let c = &self.conditions;
        let mut when = Vec::new();
        if let Some(g) = c.gpu {
            when.push(format!("on GPU {g}"));
        }
        if let Some(x) = c.process_memory_min_mib {
            when.push(format!("the process holds ≥ {x} MiB"));
        }
        if let Some(x) = c.device_used_min_pct {
            when.push(format!("the GPU is ≥ {x} % full"));
        }
        if let Some(x) = c.device_free_max_mib {
            when.push(format!("the GPU has ≤ {x} MiB free"));
        }
        if let Some(x) = c.idle_min_minutes {
            when.push(format!("the process is GPU-idle for ≥ {x} min"));
        }
        if let Some(x) = c.leaking_min_minutes {
            when.push(format!("the process is leaking for ≥ {x} min"));
        }
        if let Some(x) = &c.name_regex {
            when.push(format!("its name matches /{x}/"));
        }
        if let Some(x) = &c.cmdline_regex {
            when.push(format!("its command line matches /{x}/"));
        }
        if let Some(x) = &c.user_is {
            when.push(format!("its user is {x}"));
        }
        if let Some(x) = &c.user_is_not {
            when.push(format!("its user is not {x}"));
        }
        if let Some(x) = c.age_min_minutes {
            when.push(format!("it has run ≥ {x} min"));
        }
        if let Some(x) = c.user_total_min_mib {
            when.push(format!("its user holds ≥ {x} MiB on that GPU"));
        }
        let when = if when.is_empty() {
            "always".to_string()
        } else {
            when.join(" and ")
        };
        let hold = if c.hold_seconds > 0.0 {
            format!(", for {} s", c.hold_seconds)
        } else {
            String::new()
        };
        format!(
            "{}{}: when {when}{hold}, {} (at most once per {} min per {}){}",
            if self.enabled { "" } else { "[disabled] " },
            self.name,
            self.action.label(),
            self.cooldown_minutes,
            if c.targets_processes() {
                "process"
            } else {
                "GPU"
            },
            if self.dry_run { " — DRY RUN" } else { "" }
        )
    }
}
