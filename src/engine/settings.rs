//! The one persisted `Settings` (TOML at the platform config folder, `…/vramwarden/config.toml`;
//! `--config FILE` or `VRAMWARDEN_CONFIG` override it). Every field has a default, so a file
//! may hold only what differs. Every number has a documented range, checked where the file
//! is read, so nothing accepted can overflow a duration or timestamp later. A broken file
//! (or one that cannot be read, e.g. a symlink loop) is reported with file, line of the
//! offending key and reason; the app then runs on defaults and never writes the file until
//! the user saves. Saving is atomic (temporary file + rename), writes through a symlink to
//! its target, keeps the file's permission bits (new files 0600 in 0700 folders) and keeps
//! the previous version as `config.toml.bak`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::act::rules::action::DEFAULT_PROTECTED;
use crate::act::rules::Rule;
use crate::detect::leak::LeakSettings;
use crate::model::format::{Theme, Units};

/// General.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct General {
    /// Memory units.
    pub units: Units,
    /// Colour theme.
    pub theme: Theme,
}

impl Default for General {
    fn default() -> Self {
        Self {
            units: Units::Auto,
            theme: Theme::System,
        }
    }
}

/// Sampling and history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sampling {
    /// Interval between samples, ms (100 – 3 600 000).
    pub interval_ms: u64,
    /// History kept in memory, hours (more than 0, at most 744: 31 days).
    pub history_hours: f64,
}

impl Default for Sampling {
    fn default() -> Self {
        Self {
            interval_ms: 1000,
            history_hours: 24.0,
        }
    }
}

/// Session logs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Sessions {
    /// Record a session while the window runs.
    pub record: bool,
    /// Delete sessions older than this many days (0 – 36 500; 0 keeps them forever).
    pub retention_days: u32,
    /// Keep the sessions folder under this size (MiB, 0 – 16 PiB), oldest deleted first;
    /// 0 means no size limit (keep forever).
    pub retention_max_mib: u64,
}

impl Default for Sessions {
    fn default() -> Self {
        Self {
            record: true,
            retention_days: 14,
            retention_max_mib: 2048,
        }
    }
}

/// Desktop notifications.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Notifications {
    /// When a leak is first flagged.
    pub leaks: bool,
    /// When a rule notifies or acts.
    pub rules: bool,
    /// Warn when a GPU is forecast full within this many minutes (0: never; at most a day).
    pub oom_forecast_minutes: f64,
}

impl Default for Notifications {
    fn default() -> Self {
        Self {
            leaks: true,
            rules: true,
            oom_forecast_minutes: crate::detect::forecast_alert::DEFAULT_MINUTES,
        }
    }
}

/// Auto-cleanup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Cleanup {
    /// Every rule only says what it would do.
    pub dry_run: bool,
    /// Process names never signalled.
    pub protected: Vec<String>,
    /// The window's and the command line's own actions (a click, `vramwarden park PID`) may
    /// touch other users' processes, where vramwarden runs as root. Off: they are refused, as
    /// a rule's are unless it allows it (an agent's clients have `--remote-other-users`).
    pub manual_other_users: bool,
    /// The rules, in order.
    pub rules: Vec<Rule>,
}

impl Default for Cleanup {
    fn default() -> Self {
        Self {
            dry_run: true,
            protected: DEFAULT_PROTECTED.iter().map(|s| (*s).to_string()).collect(),
            manual_other_users: false,
            rules: Vec::new(),
        }
    }
}

/// Everything vramwarden persists (UI layout lives in eframe's own storage).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// General.
    pub general: General,
    /// Sampling and history.
    pub sampling: Sampling,
    /// Session logs.
    pub sessions: Sessions,
    /// Leak sensitivity.
    pub leaks: LeakSettings,
    /// Notifications.
    pub notifications: Notifications,
    /// Auto-cleanup rules.
    pub cleanup: Cleanup,
    /// The OOM guard.
    pub guard: crate::act::guard::GuardSettings,
}

/// A problem with the settings file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}{}: {reason}", .line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, where known.
    pub line: Option<usize>,
    /// What is wrong.
    pub reason: String,
}

/// True when no settings file is at `path` (the defaults apply there); any other failure to
/// look (a symlink loop, no permission) is not "missing": loading it says what went wrong.
pub(crate) fn file_missing(path: &Path) -> bool {
    std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

/// True when the settings file was named (`--config`, else `VRAMWARDEN_CONFIG`) rather than
/// the usual one: missing, it is most often a typo.
pub(crate) fn config_named(cli: Option<&Path>) -> bool {
    cli.is_some() || std::env::var_os("VRAMWARDEN_CONFIG").is_some()
}

/// The settings file's path: `--config`, else `VRAMWARDEN_CONFIG`, else the platform folder,
/// else (no home folder) `/etc/vramwarden/config.toml` — never a file in the current folder
/// (see [`crate::host::paths`]).
pub fn config_path(cli: Option<&Path>) -> PathBuf {
    if let Some(p) = cli {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("VRAMWARDEN_CONFIG") {
        return PathBuf::from(p);
    }
    crate::host::paths::default_config()
}

/// One step of a key path in the settings file: a table key or an array index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPart {
    /// A key of a table (`sampling`, `interval_ms`).
    Key(&'static str),
    /// An element of an array (the n-th `[[cleanup.rules]]`, 0-based).
    Index(usize),
}

/// One problem of the values: where it is (as a key path, which [`Settings::from_toml`]
/// turns into the line of that key) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key path, e.g. `cleanup`, `rules`, 1, `conditions`, `cmdline_regex`.
    pub key: Vec<KeyPart>,
    /// Where, in words (`cleanup.rules[1] (Name) conditions.cmdline_regex`).
    pub at: String,
    /// What is wrong.
    pub what: String,
}

/// Longest history kept in memory, hours (31 days).
const MAX_HISTORY_HOURS: f64 = 24.0 * 31.0;
/// Longest session retention, days (100 years; 0 keeps sessions forever).
const MAX_RETENTION_DAYS: u32 = 36_500;
/// Largest sessions folder limit, MiB (16 PiB; 0 means no limit).
const MAX_RETENTION_MIB: u64 = 16 * 1024 * 1024 * 1024;

/// The problem at a plain dotted key (no arrays on the way).
fn at_keys(keys: &[&'static str], what: String) -> Problem {
    Problem {
        key: keys.iter().map(|k| KeyPart::Key(k)).collect(),
        at: keys.join("."),
        what,
    }
}

impl Settings {
    /// Every problem of the values, as (where, what).
    pub fn problems(&self) -> Vec<(String, String)> {
        self.problems_at()
            .into_iter()
            .map(|p| (p.at, p.what))
            .collect()
    }

    /// Every problem of the values, with the key path of each. Every number has a range, so
    /// whatever passes can be turned into durations and timestamps without overflow.
    pub fn problems_at(&self) -> Vec<Problem> {
        let mut v = Vec::new();
        if !(100..=3_600_000).contains(&self.sampling.interval_ms) {
            v.push(at_keys(
                &["sampling", "interval_ms"],
                "must be between 100 and 3600000".into(),
            ));
        }
        let h = self.sampling.history_hours;
        if !(h.is_finite() && h > 0.0 && h <= MAX_HISTORY_HOURS) {
            v.push(at_keys(
                &["sampling", "history_hours"],
                format!("must be more than 0 and at most {MAX_HISTORY_HOURS} hours"),
            ));
        }
        if self.sessions.retention_days > MAX_RETENTION_DAYS {
            v.push(at_keys(
                &["sessions", "retention_days"],
                format!("must be from 0 (keep forever) to {MAX_RETENTION_DAYS} days"),
            ));
        }
        if self.sessions.retention_max_mib > MAX_RETENTION_MIB {
            v.push(at_keys(
                &["sessions", "retention_max_mib"],
                format!("must be from 0 (no limit) to {MAX_RETENTION_MIB} MiB"),
            ));
        }
        let m = self.notifications.oom_forecast_minutes;
        if !(m.is_finite() && (0.0..=1440.0).contains(&m)) {
            v.push(at_keys(
                &["notifications", "oom_forecast_minutes"],
                "must be from 0 (never) to 1440 minutes".into(),
            ));
        }
        for (key, what) in self.leaks.problems_at() {
            v.push(at_keys(&["leaks", key], what));
        }
        for (key, what) in self.guard.problems_at() {
            v.push(at_keys(&["guard", key], what));
        }
        self.rule_problems(&mut v);
        v
    }

    /// The rules' problems (each rule's own, and duplicate names).
    fn rule_problems(&self, v: &mut Vec<Problem>) {
        let mut names = std::collections::HashSet::new();
        for (i, r) in self.cleanup.rules.iter().enumerate() {
            let base = [
                KeyPart::Key("cleanup"),
                KeyPart::Key("rules"),
                KeyPart::Index(i),
            ];
            for (keys, what) in r.problems_at() {
                v.push(Problem {
                    key: base
                        .iter()
                        .copied()
                        .chain(keys.iter().map(|k| KeyPart::Key(k)))
                        .collect(),
                    at: format!("cleanup.rules[{i}] ({}) {}", r.name, keys.join(".")),
                    what,
                });
            }
            if !names.insert(r.name.clone()) {
                v.push(Problem {
                    key: base.iter().copied().chain([KeyPart::Key("name")]).collect(),
                    at: format!("cleanup.rules[{i}]"),
                    what: format!("two rules are named {:?}", r.name),
                });
            }
        }
    }

    /// Parses TOML text and validates it.
    ///
    /// # Errors
    /// A syntax error (with its line) or the first invalid value (with the line of its key,
    /// or of the nearest enclosing key or table written in the file).
    pub fn from_toml(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let s: Settings = toml::from_str(text).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: e.span().map(|sp| line_at(text, sp.start)),
            reason: crate::model::format::cap_quoted(&plain_type_words(e.message())),
        })?;
        if let Some(p) = s.problems_at().into_iter().next() {
            return Err(ConfigError {
                path: path.to_path_buf(),
                line: key_line(text, &p.key),
                reason: crate::model::format::cap_quoted(&format!("{}: {}", p.at, p.what)),
            });
        }
        Ok(s)
    }

    /// Loads `path` (following symlinks): defaults and no error when there is no file there;
    /// defaults and the error when it cannot be read (a symlink loop, a folder, no
    /// permission, not UTF-8), is broken, or is not to be trusted (not a regular file, over
    /// [`MAX_SETTINGS_BYTES`], another user's, or writable by others — the file or its
    /// folder: see [`crate::host::trusted_file`]). Never writes anything.
    pub fn load(path: &Path) -> (Self, Option<ConfigError>) {
        use crate::host::trusted_file::{read, Rules, TrustError};
        let rules = Rules {
            what: "the settings file",
            max_bytes: MAX_SETTINGS_BYTES,
            secret: false,
        };
        let err = |reason: String| {
            (
                Self::default(),
                Some(ConfigError {
                    path: path.to_path_buf(),
                    line: None,
                    reason,
                }),
            )
        };
        match read(path, &rules) {
            Err(TrustError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                (Self::default(), None)
            }
            Err(TrustError::Io(e)) => err(format!("cannot read the settings file: {e}")),
            Err(TrustError::Refused(why)) => err(format!("not loaded: {why}")),
            Ok(text) => match Self::from_toml(&text, path) {
                Ok(s) => (s, None),
                Err(e) => (Self::default(), Some(e)),
            },
        }
    }

    /// Saves atomically, keeping the previous file as `NAME.bak`. A symlinked file is written
    /// through: the link stays and its target is replaced (temporary file beside the target,
    /// then rename). An existing file keeps its permission bits (and so does the `.bak`); a
    /// new file is created 0600, in folders created 0700.
    ///
    /// Returns the backup's path when there was a file to keep (a first save makes none).
    ///
    /// # Errors
    /// When the values are invalid or the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<Option<PathBuf>, ConfigError> {
        let err = |reason: String| ConfigError {
            path: path.to_path_buf(),
            line: None,
            reason,
        };
        if let Some((at, what)) = self.problems().into_iter().next() {
            return Err(err(format!("not saved: {at}: {what}")));
        }
        let text = toml::to_string_pretty(self).map_err(|e| err(e.to_string()))?;
        let text = format!(
            "# vramwarden settings (written by the Settings window; edits by hand are fine)\n{text}"
        );
        let real = real_path(path).map_err(|e| err(format!("not saved: {e}")))?;
        write_replacing(&real, text.as_bytes()).map_err(|e| {
            if real == path {
                err(format!("not saved: {e}"))
            } else {
                err(format!(
                    "not saved to {} (the link's target): {e}",
                    real.display()
                ))
            }
        })
    }
}

/// Largest settings file read, bytes.
const MAX_SETTINGS_BYTES: u64 = 16 << 20;

/// Permission bits of a settings file the app creates (it can hold commands).
const NEW_FILE_MODE: u32 = 0o600;
/// Permission bits of a folder the app creates for it.
const NEW_DIR_MODE: u32 = 0o700;
/// Most symlinks followed when resolving the file to write (as the kernel's limit).
const MAX_LINKS: usize = 40;

/// The 1-based line of byte offset `at` in `text`.
fn line_at(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// The line of the deepest part of `key` that the document writes (the key itself, or the
/// nearest enclosing key, array element or table header).
fn key_line(text: &str, key: &[KeyPart]) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut table: Option<&DeTable> = Some(doc.get_ref());
    let mut array: Option<&[toml::Spanned<DeValue>]> = None;
    let mut span = None;
    for part in key {
        let found = match part {
            KeyPart::Key(k) => table.and_then(|t| {
                t.iter()
                    .find(|(name, _)| name.get_ref().as_ref() == *k)
                    .map(|(name, v)| (name.span(), v))
            }),
            KeyPart::Index(i) => array.and_then(|a| a.get(*i)).map(|v| (v.span(), v)),
        };
        let Some((at, value)) = found else {
            break;
        };
        span = Some(at);
        (table, array) = match value.get_ref() {
            DeValue::Table(t) => (Some(t), None),
            DeValue::Array(a) => (None, Some(&a[..])),
            _ => (None, None),
        };
    }
    span.map(|sp| line_at(text, sp.start))
}

/// The file a write to `path` must replace: `path` with every symlink followed (a missing
/// final target is fine: it is created).
///
/// # Errors
/// A symlink loop, or a link or folder that cannot be read.
fn real_path(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let target = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) => dir.join(target),
                    None => target,
                };
            }
            Ok(_) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(p),
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "{}: too many levels of symbolic links",
        path.display()
    )))
}

/// `dir` and its missing parents, each new one created 0700.
fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(NEW_DIR_MODE)
        .create(dir)
}

/// Replaces the regular file `real` with `bytes` atomically: a temporary file beside it with
/// the same permission bits (0600 when new), synced, then renamed over it; the old contents
/// are kept as `NAME.bak` with the old permission bits (its path is returned; none for a new
/// file).
fn write_replacing(real: &Path, bytes: &[u8]) -> std::io::Result<Option<PathBuf>> {
    use std::os::unix::fs::PermissionsExt;
    let dir = real.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir {
        create_private_dirs(dir)?;
    }
    let name = real
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} is not a file name", real.display())))?
        .to_string_lossy()
        .into_owned();
    let beside = |suffix: &str| {
        let n = format!("{name}{suffix}");
        dir.map_or_else(|| PathBuf::from(&n), |d| d.join(&n))
    };
    let old = match std::fs::metadata(real) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let mode = old
        .as_ref()
        .map_or(NEW_FILE_MODE, |m| m.permissions().mode() & 0o7777);
    let tmp = beside(".tmp");
    remove_if_present(&tmp)?;
    let written = write_new(&tmp, bytes, mode).and_then(|()| {
        let kept = match old {
            Some(_) => {
                let bak = beside(".bak");
                remove_if_present(&bak)?;
                // `copy` gives the backup the original's permission bits.
                std::fs::copy(real, &bak).map_err(|e| {
                    std::io::Error::new(e.kind(), format!("could not keep a backup: {e}"))
                })?;
                Some(bak)
            }
            None => None,
        };
        std::fs::rename(&tmp, real).map(|()| kept)
    });
    if written.is_err() {
        // Best effort: the error that matters is the one returned.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Creates `p` (which must not exist) with exactly the permission bits `mode`, writes
/// `bytes` and syncs them to disk.
fn write_new(p: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(p)?;
    // The umask may have narrowed the bits; the file keeps exactly the old ones.
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Removes `p` (a stale temporary file or backup; a symlink there is removed, not followed).
fn remove_if_present(p: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// A TOML decoding message with Rust's type names in words ("invalid value: integer `-5`,
/// expected u64" says "expected a whole number, 0 or more"; a number too large for any
/// integer, "`99999999999999999999` as i128", says so).
fn plain_type_words(message: &str) -> String {
    let words = [
        (
            "as i128, expected u64",
            "is too large: expected a whole number",
        ),
        (
            "as i128, expected u32",
            "is too large: expected a whole number",
        ),
        (
            "as i128, expected u8",
            "is too large: expected a whole number",
        ),
        ("expected u64", "expected a whole number, 0 or more"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected i64", "expected a whole number"),
        ("expected f64", "expected a number"),
        ("expected f32", "expected a number"),
    ];
    let mut m = message.to_string();
    for (rust, plain) in words {
        m = m.replace(rust, plain);
    }
    m.replace("invalid type: integer", "invalid value:")
}
