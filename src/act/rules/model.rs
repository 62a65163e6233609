//! What a rule is: conditions that must all hold, an action, a cooldown and a dry-run flag.

use serde::{Deserialize, Serialize};

/// Conditions of a rule; each is optional and all that are set must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Conditions {
    /// The process holds at least this much GPU memory (MiB, 0 – [`MAX_MIB`]).
    pub process_memory_min_mib: Option<f64>,
    /// Its GPU is at least this full (used / total, percent, 0 – 100).
    pub device_used_min_pct: Option<f64>,
    /// Its GPU has at most this much free (MiB, 0 – [`MAX_MIB`]).
    pub device_free_max_mib: Option<f64>,
    /// Its GPU is forecast to be full in less than this (minutes, 0 – [`MAX_MINUTES`]; the
    /// OOM forecast from the leaks on it).
    pub device_full_within_minutes: Option<f64>,
    /// The process has been GPU-idle (utilisation 0 and memory unchanged) this long (minutes,
    /// 0 – [`MAX_MINUTES`], a year).
    pub idle_min_minutes: Option<f64>,
    /// The process has been flagged as leaking this long (minutes, 0 – [`MAX_MINUTES`]).
    pub leaking_min_minutes: Option<f64>,
    /// Its name matches this regular expression.
    pub name_regex: Option<String>,
    /// Its command line matches this regular expression.
    pub cmdline_regex: Option<String>,
    /// Its owner is this user.
    pub user_is: Option<String>,
    /// Its owner is not this user.
    pub user_is_not: Option<String>,
    /// It has run at least this long (minutes, 0 – [`MAX_MINUTES`]).
    pub age_min_minutes: Option<f64>,
    /// Its owner's processes hold at least this much on that GPU together (a quota; MiB,
    /// 0 – [`MAX_MIB`]).
    pub user_total_min_mib: Option<f64>,
    /// Its PyTorch allocator holds at least this much releasable cache on that GPU
    /// (reserved − allocated, from the `vramwarden_torch` companion; MiB, 0 – [`MAX_MIB`]).
    /// A process without a companion never matches.
    pub releasable_cache_min_mib: Option<f64>,
    /// Its PyTorch allocator's allocated memory (live tensors, from the `vramwarden_torch`
    /// companion) grew at least this fast on that GPU (MiB per minute, 0 – [`MAX_MIB`]): the
    /// least-squares slope over the last [`super::eval::GROWTH_WINDOW_MS`] of readings, once
    /// they span at least [`super::eval::GROWTH_MIN_SPAN_MS`]. A process without a companion
    /// never matches.
    pub allocated_growth_min_mib_per_min: Option<f64>,
    /// Only on this GPU.
    pub gpu: Option<u32>,
    /// Of the processes on a GPU that meet every other condition, only the one holding the
    /// most GPU memory (e.g. "park the largest idle process").
    pub largest_only: bool,
    /// The process is parked and its GPU now has room for it: its parked memory plus this
    /// much free (MiB, 0 – [`MAX_MIB`]). For `resume` rules.
    pub parked_fits_with_mib: Option<f64>,
    /// Everything above has held continuously this long before the rule fires (hysteresis;
    /// seconds, 0 – [`MAX_HOLD_SECONDS`], a year).
    pub hold_seconds: f64,
    /// Its container's name matches this pattern (`*` and `?` wildcards, see
    /// [`super::glob`]); a container without a resolved name is matched by its id. A process
    /// outside a container never matches.
    pub container_glob: Option<String>,
    /// Its Kubernetes pod matches this pattern: `namespace/pod` when the pattern holds a `/`,
    /// else the pod's name alone. A process outside a pod never matches.
    pub pod_glob: Option<String>,
    /// Only in this daily window of local time: `"04:00"` (an hour from then) or
    /// `"04:00-04:30"`; the rule fires at most once per target per day (see
    /// [`super::schedule`]).
    pub at: Option<String>,
    /// At most once per target in each period of this many hours (periods start at local
    /// midnight; 1/60 – 8760).
    pub every_hours: Option<f64>,
    /// The processes of its container (same container id) hold at least this much on that
    /// GPU together (a per-container quota; MiB, 0 – [`MAX_MIB`]). A process outside a
    /// container never matches.
    pub container_total_min_mib: Option<f64>,
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
            || self.releasable_cache_min_mib.is_some()
            || self.container_glob.is_some()
            || self.pod_glob.is_some()
            || self.container_total_min_mib.is_some()
            || self.allocated_growth_min_mib_per_min.is_some()
            || self.largest_only
            || self.parked_fits_with_mib.is_some()
    }
}

/// What a rule does when it fires. New kinds are new variants here and a new arm in
/// [`super::action`] (the PyTorch ones carry their transport in [`super::companion_action`]).
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
        /// Seconds between SIGTERM and SIGKILL (0 – [`MAX_ACTION_SECONDS`], an hour;
        /// [`DEFAULT_GRACE_SECONDS`] when the file leaves it out).
        #[serde(default = "default_grace_seconds")]
        grace_seconds: f64,
    },
    /// Run a program (no shell). `{pid}`, `{gpu}`, `{user}`, `{name}` are replaced in each
    /// argument; output goes to the activity log.
    RunCommand {
        /// Program and arguments.
        argv: Vec<String>,
        /// Kill it after this many seconds (more than 0, at most [`MAX_ACTION_SECONDS`]).
        timeout_seconds: f64,
    },
    /// Ask the process's `vramwarden_torch` companion to release PyTorch's cached memory
    /// (`torch.cuda.empty_cache()` on each device it uses); the job goes on. TOML
    /// `kind = "release_cache"`.
    ReleaseCache,
    /// Set the process's per-device memory fraction through its companion
    /// (`torch.cuda.set_per_process_memory_fraction(gib / GPU total)` on the GPU of the
    /// target): a cooperative quota, the job gets its own OOM error past it. TOML
    /// `kind = "limit_memory"`.
    LimitMemory {
        /// The limit in GiB (at least [`MIN_LIMIT_GIB`], at most [`MAX_LIMIT_GIB`]; at most the GPU's total
        /// when it runs).
        gib: f64,
    },
    /// Park the process: move its GPU memory to host memory through the driver's checkpoint
    /// API (it waits, not killed; see [`crate::act::park`]). TOML `kind = "park"`.
    Park,
    /// Resume a parked process: its memory back to the GPU, and it goes on. TOML
    /// `kind = "resume"`.
    Resume,
}

/// Largest memory limit (GiB) a `limit_memory` action may name ([`MAX_MIB`] in GiB).
pub(crate) const MAX_LIMIT_GIB: f64 = MAX_MIB / 1024.0;
/// Smallest `limit_memory`, GiB (16 MiB: a smaller fraction of any GPU rounds to nothing).
const MIN_LIMIT_GIB: f64 = 1.0 / 64.0;

/// What an action does, without its parameters: the choices of the settings window's
/// action picker, each with a label and the action it starts from.
#[cfg(any(feature = "gui", test))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ActionKind {
    /// [`Action::Notify`].
    Notify,
    /// [`Action::Signal`].
    Signal,
    /// [`Action::Terminate`].
    Terminate,
    /// [`Action::RunCommand`].
    RunCommand,
    /// [`Action::ReleaseCache`].
    ReleaseCache,
    /// [`Action::LimitMemory`].
    LimitMemory,
    /// [`Action::Park`].
    Park,
    /// [`Action::Resume`].
    Resume,
}

#[cfg(any(feature = "gui", test))]
impl ActionKind {
    /// Every kind, in the order the picker shows them.
    pub const ALL: [ActionKind; 8] = [
        ActionKind::Notify,
        ActionKind::Signal,
        ActionKind::Terminate,
        ActionKind::RunCommand,
        ActionKind::ReleaseCache,
        ActionKind::LimitMemory,
        ActionKind::Park,
        ActionKind::Resume,
    ];

    /// The kind of `a`.
    pub(crate) fn of(a: &Action) -> Self {
        match a {
            Action::Notify => ActionKind::Notify,
            Action::Signal { .. } => ActionKind::Signal,
            Action::Terminate { .. } => ActionKind::Terminate,
            Action::RunCommand { .. } => ActionKind::RunCommand,
            Action::ReleaseCache => ActionKind::ReleaseCache,
            Action::LimitMemory { .. } => ActionKind::LimitMemory,
            Action::Park => ActionKind::Park,
            Action::Resume => ActionKind::Resume,
        }
    }

    /// The picker's words.
    #[cfg(feature = "gui")]
    pub(crate) fn label(self) -> &'static str {
        match self {
            ActionKind::Notify => "Notify",
            ActionKind::Signal => "Send a signal",
            ActionKind::Terminate => "Terminate",
            ActionKind::RunCommand => "Run a command",
            ActionKind::ReleaseCache => "Release PyTorch cache",
            ActionKind::LimitMemory => "Limit PyTorch memory",
            ActionKind::Park => "Park (GPU memory to host memory)",
            ActionKind::Resume => "Resume a parked process",
        }
    }

    /// The action a rule gets when this kind is picked (the user then edits its parameters).
    pub(crate) fn starting_action(self) -> Action {
        match self {
            ActionKind::Notify => Action::Notify,
            ActionKind::Signal => Action::Signal {
                signal: "SIGUSR1".into(),
            },
            ActionKind::Terminate => Action::Terminate {
                grace_seconds: DEFAULT_GRACE_SECONDS,
            },
            ActionKind::RunCommand => Action::RunCommand {
                argv: Vec::new(),
                timeout_seconds: 30.0,
            },
            ActionKind::ReleaseCache => Action::ReleaseCache,
            ActionKind::LimitMemory => Action::LimitMemory { gib: 16.0 },
            ActionKind::Park => Action::Park,
            ActionKind::Resume => Action::Resume,
        }
    }
}

/// Seconds between SIGTERM and SIGKILL where nobody chose otherwise: a rule's new Terminate
/// action and the window's manual Terminate (the one place this grace is written).
pub(crate) const DEFAULT_GRACE_SECONDS: f64 = 10.0;

/// [`DEFAULT_GRACE_SECONDS`], for a `terminate` action written without `grace_seconds`.
fn default_grace_seconds() -> f64 {
    DEFAULT_GRACE_SECONDS
}

impl Action {
    /// Short name for the activity log.
    pub fn label(&self) -> String {
        match self {
            Action::Notify => "notify".into(),
            Action::Signal { signal } => format!("signal {signal}"),
            Action::Terminate { grace_seconds } => {
                format!("terminate (SIGTERM; SIGKILL {grace_seconds} s later if still running)")
            }
            Action::RunCommand { argv, .. } => format!("run `{}`", argv.join(" ")),
            Action::ReleaseCache => "release cached memory".into(),
            Action::LimitMemory { gib } => format!("limit to {gib} GiB"),
            Action::Park => "park (GPU memory to host memory)".into(),
            Action::Resume => "resume (memory back to the GPU)".into(),
        }
    }

    /// True when the action acts on a process (needs a process target).
    pub fn needs_process(&self) -> bool {
        matches!(
            self,
            Action::Signal { .. }
                | Action::Terminate { .. }
                | Action::ReleaseCache
                | Action::LimitMemory { .. }
                | Action::Park
                | Action::Resume
        )
    }

    /// True when the action goes through the process's `vramwarden_torch` companion.
    pub(crate) fn uses_companion(&self) -> bool {
        matches!(self, Action::ReleaseCache | Action::LimitMemory { .. })
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
    /// It fires at most once per target in this many minutes (0 – [`MAX_MINUTES`], a year).
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
const REGEX_SIZE_LIMIT: usize = 256 * 1024;

/// Compiles a rule's regular expression with [`REGEX_SIZE_LIMIT`]; the one place rule
/// patterns are compiled (validation and evaluation alike), so what validates also runs.
///
/// # Errors
/// The reason, in words, when the pattern is invalid or too large.
pub(crate) fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
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
pub(crate) fn parse_signal(s: &str) -> Option<i32> {
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

pub use crate::model::MAX_MIB;
/// Longest time (minutes) a rule condition or cooldown may name: one year (525 600 min).
const MAX_MINUTES: f64 = 525_600.0;
/// Longest hold (seconds) a rule may name: one year.
const MAX_HOLD_SECONDS: f64 = MAX_MINUTES * 60.0;
/// Longest grace period between SIGTERM and SIGKILL, and longest command timeout: one hour.
pub(crate) const MAX_ACTION_SECONDS: f64 = 3600.0;

/// `Some(message)` when `x` is not a finite number in `min..=max`.
fn out_of(x: f64, min: f64, max: f64, unit: &str) -> Option<String> {
    (!(x.is_finite() && (min..=max).contains(&x)))
        .then(|| format!("must be a number from {min} to {max}{unit}"))
}

impl Rule {
    /// Problems, each as (field, message); empty when the rule is valid. The field is the
    /// condition's name for conditions, `action` for anything about the action, else the
    /// rule's own key (`name`, `cooldown_minutes`).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        self.problems_at()
            .into_iter()
            .map(|(key, m)| {
                let field: &'static str = match key {
                    ["conditions", f, ..] | [f, ..] => f,
                    [] => "",
                };
                (field, m)
            })
            .collect()
    }

    /// Problems, each as (key path inside the rule's table, message), e.g.
    /// (`["conditions", "cmdline_regex"]`, …) or (`["action", "grace_seconds"]`, …), so the
    /// settings file can point at the exact line. Every number has a range (see the `MAX_…`
    /// constants), so whatever passes can become a `Duration` or a timestamp without overflow.
    pub fn problems_at(&self) -> Vec<(&'static [&'static str], String)> {
        let mut v: Vec<(&'static [&'static str], String)> = Vec::new();
        let c = &self.conditions;
        if self.name.trim().is_empty() {
            v.push((&["name"], "the rule needs a name".into()));
        }
        let ranged = ranged_conditions(c);
        for (key, x, max, unit) in ranged {
            if let Some(m) = x.and_then(|x| out_of(x, 0.0, max, unit)) {
                v.push((key, m));
            }
        }
        if let Some(m) = out_of(c.hold_seconds, 0.0, MAX_HOLD_SECONDS, " s") {
            v.push((&["conditions", "hold_seconds"], m));
        }
        let regexes: [(&'static [&'static str], &Option<String>); 2] = [
            (&["conditions", "name_regex"], &c.name_regex),
            (&["conditions", "cmdline_regex"], &c.cmdline_regex),
        ];
        for (key, re) in regexes {
            if let Some(Err(e)) = re.as_deref().map(compile_regex) {
                v.push((key, e));
            }
        }
        self.schedule_and_glob_problems(&mut v);
        if let Some(m) = out_of(self.cooldown_minutes, 0.0, MAX_MINUTES, " min") {
            v.push((&["cooldown_minutes"], m));
        }
        self.action_problems(&mut v);
        if self.action.needs_process() && !c.targets_processes() {
            v.push((&["action", "kind"], "acting on a process (signal, terminate, release cache, limit memory) needs a condition about the process (memory, idle, name, …): a GPU-wide rule can only notify or run a command".into()));
        }
        v
    }

    /// Problems of the schedule (`at`, `every_hours`, a hold longer than the window) and of
    /// the container and pod patterns.
    fn schedule_and_glob_problems(&self, v: &mut Vec<(&'static [&'static str], String)>) {
        let c = &self.conditions;
        match super::schedule::Schedule::new(c.at.as_deref(), c.every_hours) {
            Err(("at", m)) => v.push((&["conditions", "at"], m)),
            Err((_, m)) => v.push((&["conditions", "every_hours"], m)),
            Ok(Some(s))
                if c.hold_seconds.is_finite() && c.hold_seconds * 1000.0 > s.open_ms() as f64 =>
            {
                v.push((
                    &["conditions", "at"],
                    format!(
                        "hold_seconds ({} s) is longer than the schedule stays open ({} min): the rule could never fire (widen the window, e.g. \"04:00-06:00\", or shorten the hold)",
                        c.hold_seconds,
                        s.open_ms() / 60_000
                    ),
                ));
            }
            Ok(_) => {}
        }
        if let Some(m) = c
            .container_total_min_mib
            .and_then(|x| out_of(x, 0.0, MAX_MIB, " MiB"))
        {
            v.push((&["conditions", "container_total_min_mib"], m));
        }
        let globs: [(&'static [&'static str], &Option<String>); 2] = [
            (&["conditions", "container_glob"], &c.container_glob),
            (&["conditions", "pod_glob"], &c.pod_glob),
        ];
        for (key, g) in globs {
            if let Some(m) = g.as_deref().and_then(super::glob::problem) {
                v.push((key, m));
            }
        }
    }

    /// The action's own problems (signal name, grace period, command, timeout).
    fn action_problems(&self, v: &mut Vec<(&'static [&'static str], String)>) {
        match &self.action {
            Action::Notify | Action::ReleaseCache | Action::Park | Action::Resume => {}
            Action::LimitMemory { gib } => {
                let g = *gib;
                if !(g.is_finite() && (MIN_LIMIT_GIB..=MAX_LIMIT_GIB).contains(&g)) {
                    v.push((
                        &["action", "gib"],
                        format!(
                            "the limit must be at least {MIN_LIMIT_GIB} GiB (16 MiB) and at most {MAX_LIMIT_GIB} GiB"
                        ),
                    ));
                }
            }
            Action::Signal { signal } => {
                if parse_signal(signal).is_none() {
                    v.push((
                        &["action", "signal"],
                        format!("unknown signal {signal:?} (try SIGTERM, SIGUSR1 or a number)"),
                    ));
                }
            }
            Action::Terminate { grace_seconds } => {
                if out_of(*grace_seconds, 0.0, MAX_ACTION_SECONDS, " s").is_some() {
                    v.push((
                        &["action", "grace_seconds"],
                        format!("the grace period must be from 0 to {MAX_ACTION_SECONDS} s"),
                    ));
                }
            }
            Action::RunCommand {
                argv,
                timeout_seconds,
            } => {
                if argv.first().is_none_or(|a| a.trim().is_empty()) {
                    v.push((&["action", "argv"], "the command is empty".into()));
                }
                if let Some(why) = super::shell::placeholder_problem(argv) {
                    v.push((&["action", "argv"], why));
                }
                let t = *timeout_seconds;
                if !(t.is_finite() && t > 0.0 && t <= MAX_ACTION_SECONDS) {
                    v.push((
                        &["action", "timeout_seconds"],
                        format!(
                            "the timeout must be more than 0 s and at most {MAX_ACTION_SECONDS} s"
                        ),
                    ));
                }
            }
        }
    }

    /// The rule in words, for `rules check`: [`Rule::describe_body`], then " — DRY RUN" when
    /// it is in dry run.
    pub fn describe(&self) -> String {
        let dry = if self.dry_run { " — DRY RUN" } else { "" };
        format!("{}{dry}", self.describe_body())
    }

    /// The rule in words without its dry run (the editor says that apart).
    pub(crate) fn describe_body(&self) -> String {
        let c = &self.conditions;
        let when = self.when_words();
        let when = if when.is_empty() {
            "always (no condition)".to_string()
        } else {
            format!("when {}", when.join(" and "))
        };
        let hold = if c.hold_seconds > 0.0 {
            format!(", for {} s", c.hold_seconds)
        } else {
            String::new()
        };
        format!(
            "{}{}: {when}{hold}, {} (at most once per {} min per {})",
            if self.enabled { "" } else { "[disabled] " },
            self.name,
            self.action.label(),
            self.cooldown_minutes,
            if c.targets_processes() {
                "process"
            } else {
                "GPU"
            },
        )
    }

    /// True when no condition is set: the rule matches every GPU at every sample.
    #[cfg(feature = "gui")]
    pub(crate) fn matches_always(&self) -> bool {
        self.when_words().is_empty()
    }

    /// Each condition in words.
    fn when_words(&self) -> Vec<String> {
        let c = &self.conditions;
        let mut when = state_words(c);
        when.extend(identity_words(c));
        if let Ok(Some(s)) = super::schedule::Schedule::new(c.at.as_deref(), c.every_hours) {
            when.extend(s.describe());
        }
        when.extend(history_words(c));
        when
    }
}

/// The words of the conditions on the GPU and the process's memory and state.
fn state_words(c: &Conditions) -> Vec<String> {
    [
        c.gpu.map(|g| format!("on GPU {g}")),
        c.process_memory_min_mib
            .map(|x| format!("the process holds ≥ {}", gib(x))),
        c.device_used_min_pct
            .map(|x| format!("the GPU is ≥ {x} % full")),
        c.device_free_max_mib
            .map(|x| format!("the GPU has ≤ {} free", gib(x))),
        c.device_full_within_minutes
            .map(|x| format!("the GPU is forecast full in < {x} min")),
        c.idle_min_minutes
            .map(|x| format!("the process is GPU-idle for ≥ {x} min")),
        c.leaking_min_minutes
            .map(|x| format!("the process is leaking for ≥ {x} min")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The words of the conditions on who the process is: name, command line, user,
/// container, pod.
fn identity_words(c: &Conditions) -> Vec<String> {
    [
        c.name_regex
            .as_ref()
            .map(|x| format!("its name matches /{x}/")),
        c.cmdline_regex
            .as_ref()
            .map(|x| format!("its command line matches /{x}/")),
        c.user_is.as_ref().map(|x| format!("its user is {x}")),
        c.user_is_not
            .as_ref()
            .map(|x| format!("its user is not {x}")),
        c.container_glob
            .as_ref()
            .map(|x| format!("its container matches {x}")),
        c.pod_glob.as_ref().map(|x| format!("its pod matches {x}")),
        c.container_total_min_mib
            .map(|x| format!("its container holds ≥ {} on that GPU", gib(x))),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The words of the conditions on the process's age, its user's total, its PyTorch
/// allocator, its park and its rank on the GPU.
fn history_words(c: &Conditions) -> Vec<String> {
    [
        c.age_min_minutes.map(|x| format!("it has run ≥ {x} min")),
        c.user_total_min_mib
            .map(|x| format!("its user holds ≥ {} on that GPU", gib(x))),
        c.releasable_cache_min_mib
            .map(|x| format!("its PyTorch cache holds ≥ {} releasable", size(x))),
        c.allocated_growth_min_mib_per_min
            .map(|x| format!("its PyTorch allocated memory grows ≥ {x} MiB/min")),
        c.parked_fits_with_mib.map(|x| {
            format!(
                "it is parked and its GPU has room for it with {} to spare",
                size(x)
            )
        }),
        c.largest_only
            .then(|| "it is the largest of those on its GPU".to_string()),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The example rules of the settings documentation (docs/configuration.md): a ladder for PyTorch jobs
/// that crowd a GPU — release the cache first (the job goes on), then tell, then terminate (left
/// in dry run until its owner turns that off).
pub fn example_ladder() -> Vec<Rule> {
    vec![
        Rule {
            name: "1. Release a large PyTorch cache".into(),
            dry_run: false,
            conditions: Conditions {
                releasable_cache_min_mib: Some(16384.0),
                device_used_min_pct: Some(90.0),
                hold_seconds: 30.0,
                ..Conditions::default()
            },
            action: Action::ReleaseCache,
            cooldown_minutes: 5.0,
            ..Rule::default()
        },
        Rule {
            name: "2. Tell about a growing PyTorch job".into(),
            dry_run: false,
            conditions: Conditions {
                allocated_growth_min_mib_per_min: Some(512.0),
                device_used_min_pct: Some(95.0),
                hold_seconds: 120.0,
                ..Conditions::default()
            },
            action: Action::Notify,
            cooldown_minutes: 30.0,
            ..Rule::default()
        },
        Rule {
            name: "3. Terminate a job that will fill the GPU".into(),
            dry_run: true,
            conditions: Conditions {
                leaking_min_minutes: Some(15.0),
                device_full_within_minutes: Some(10.0),
                process_memory_min_mib: Some(8192.0),
                ..Conditions::default()
            },
            action: Action::Terminate {
                grace_seconds: 30.0,
            },
            cooldown_minutes: 30.0,
            ..Rule::default()
        },
    ]
}

/// A memory size from a rule (MiB) as the editor shows it: GiB with at most two decimals
/// ("8 GiB", "0.5 GiB").
fn gib(mib: f64) -> String {
    let g = format!("{:.2}", mib / 1024.0);
    let g = g.trim_end_matches('0').trim_end_matches('.');
    // Too small for a hundredth of a GiB: in MiB, not "0 GiB".
    if (g == "0" || g == "-0") && mib != 0.0 {
        return format!("{mib} MiB");
    }
    format!("{g} GiB")
}

/// A memory size from a rule (MiB) in words: MiB under 1 GiB ("256 MiB"), else GiB.
fn size(mib: f64) -> String {
    if mib.abs() < 1024.0 {
        format!("{mib} MiB")
    } else {
        gib(mib)
    }
}

/// The conditions that are numbers in a range from 0: each one's key in the rule's table,
/// its value, its largest value and its unit.
fn ranged_conditions(
    c: &Conditions,
) -> [(&'static [&'static str], Option<f64>, f64, &'static str); 11] {
    macro_rules! ranged {
        ($($field:ident: $max:expr, $unit:expr;)*) => {
            [$((&["conditions", stringify!($field)] as &'static [&'static str], c.$field, $max, $unit)),*]
        };
    }
    ranged! {
        process_memory_min_mib: MAX_MIB, " MiB";
        device_used_min_pct: 100.0, " %";
        device_free_max_mib: MAX_MIB, " MiB";
        device_full_within_minutes: MAX_MINUTES, " min";
        idle_min_minutes: MAX_MINUTES, " min";
        leaking_min_minutes: MAX_MINUTES, " min";
        age_min_minutes: MAX_MINUTES, " min";
        user_total_min_mib: MAX_MIB, " MiB";
        releasable_cache_min_mib: MAX_MIB, " MiB";
        allocated_growth_min_mib_per_min: MAX_MIB, " MiB/min";
        parked_fits_with_mib: MAX_MIB, " MiB";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_too_small_for_a_hundredth_of_a_gib_is_said_in_mib() {
        assert_eq!(gib(1.0), "1 MiB");
        assert_eq!(gib(0.0), "0 GiB");
        assert_eq!(gib(8192.0), "8 GiB");
        assert_eq!(gib(512.0), "0.5 GiB");
    }

    #[test]
    fn the_picker_offers_each_kind_once_and_its_starting_action_is_of_that_kind_and_valid() {
        for (i, k) in ActionKind::ALL.into_iter().enumerate() {
            assert_eq!(ActionKind::ALL.iter().filter(|x| **x == k).count(), 1);
            let a = k.starting_action();
            assert_eq!(ActionKind::of(&a), k, "{i}");
            // A new rule with it is only incomplete where the user must say more (the
            // command to run).
            let r = Rule {
                name: "r".into(),
                conditions: Conditions {
                    process_memory_min_mib: Some(1024.0),
                    ..Conditions::default()
                },
                action: a,
                ..Rule::default()
            };
            let problems = r.problems();
            assert!(
                problems.is_empty() || k == ActionKind::RunCommand,
                "{k:?}: {problems:?}"
            );
        }
    }

    /// Issue 40 (window v4): a rule's summary gives its memory sizes in GiB, as the editor
    /// edits them (it said "holds ≥ 8192 MiB" beside a field reading 8 GiB).
    #[test]
    fn a_rules_summary_gives_memory_sizes_in_gib_as_the_editor() {
        let r = Rule {
            name: "big".into(),
            conditions: Conditions {
                process_memory_min_mib: Some(8192.0),
                device_free_max_mib: Some(512.0),
                user_total_min_mib: Some(40_960.0),
                releasable_cache_min_mib: Some(256.0),
                ..Conditions::default()
            },
            ..Rule::default()
        };
        let words = r.describe();
        for part in [
            "the process holds ≥ 8 GiB",
            "the GPU has ≤ 0.5 GiB free",
            "its user holds ≥ 40 GiB on that GPU",
            "its PyTorch cache holds ≥ 256 MiB releasable",
        ] {
            assert!(words.contains(part), "{part:?} in {words:?}");
        }
        assert!(!words.contains("8192"), "{words}");
        assert_eq!(gib(1536.0), "1.5 GiB");
        assert_eq!(gib(100.0), "0.1 GiB");
        assert_eq!(size(2048.0), "2 GiB");
    }
}
