//! The one persisted `Settings` (TOML at the platform config folder, `…/vramwarden/config.toml`;
//! `--config FILE` or `VRAMWARDEN_CONFIG` override it). Every field has a default, so a file
//! may hold only what differs. A broken file is reported with file, line and reason; the app
//! then runs on defaults and never writes the file until the user saves. Saving is atomic
//! (temporary file + rename) and keeps the previous version as `config.toml.bak`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::format::Units;
use crate::leak::LeakSettings;
use crate::rules::action::DEFAULT_PROTECTED;
use crate::rules::Rule;

/// Colour theme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Theme {
    /// Follow the desktop.
    #[default]
    System,
    /// Dark.
    Dark,
    /// Light.
    Light,
}

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
    /// History kept in memory, hours.
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
    /// Delete sessions older than this many days.
    pub retention_days: u32,
    /// Keep the sessions folder under this size (MiB), oldest deleted first.
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
}

impl Default for Notifications {
    fn default() -> Self {
        Self {
            leaks: true,
            rules: true,
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
    /// The rules, in order.
    pub rules: Vec<Rule>,
}

impl Default for Cleanup {
    fn default() -> Self {
        Self {
            dry_run: true,
            protected: DEFAULT_PROTECTED.iter().map(|s| (*s).to_string()).collect(),
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

/// The settings file's path: `--config`, else `VRAMWARDEN_CONFIG`, else the platform folder.
pub fn config_path(cli: Option<&Path>) -> PathBuf {
    if let Some(p) = cli {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("VRAMWARDEN_CONFIG") {
        return PathBuf::from(p);
    }
    directories::ProjectDirs::from("", "", "vramwarden").map_or_else(
        || PathBuf::from("vramwarden.toml"),
        |d| d.config_dir().join("config.toml"),
    )
}

impl Settings {
    /// Every problem of the values, as (where, what).
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut v = Vec::new();
        if !(100..=3_600_000).contains(&self.sampling.interval_ms) {
            v.push((
                "sampling.interval_ms".into(),
                "must be between 100 and 3600000".into(),
            ));
        }
        if !(self.sampling.history_hours.is_finite()
            && self.sampling.history_hours > 0.0
            && self.sampling.history_hours <= 24.0 * 31.0)
        {
            v.push((
                "sampling.history_hours".into(),
                "must be between 0 and 744 hours".into(),
            ));
        }
        for p in self.leaks.problems() {
            v.push(("leaks".into(), p));
        }
        let mut names = std::collections::HashSet::new();
        for (i, r) in self.cleanup.rules.iter().enumerate() {
            for (f, m) in r.problems() {
                v.push((format!("cleanup.rules[{i}] ({}) {f}", r.name), m));
            }
            if !names.insert(r.name.clone()) {
                v.push((
                    format!("cleanup.rules[{i}]"),
                    format!("two rules are named {:?}", r.name),
                ));
            }
        }
        v
    }

    /// Parses TOML text and validates it.
    ///
    /// # Errors
    /// A syntax error (with its line) or the first invalid value.
    pub fn from_toml(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let s: Settings = toml::from_str(text).map_err(|e| ConfigError {
            path: path.to_path_buf(),
            line: e
                .span()
                .map(|sp| text[..sp.start.min(text.len())].matches('\n').count() + 1),
            reason: e.message().to_string(),
        })?;
        if let Some((at, what)) = s.problems().into_iter().next() {
            let key = at.split(['.', '[', ' ']).next_back().unwrap_or("");
            let line = text
                .lines()
                .position(|l| l.trim_start().starts_with(key))
                .map(|i| i + 1);
            return Err(ConfigError {
                path: path.to_path_buf(),
                line,
                reason: format!("{at}: {what}"),
            });
        }
        Ok(s)
    }

    /// Loads `path`: defaults (and no error) when it does not exist; defaults and the error
    /// when it is broken.
    pub fn load(path: &Path) -> (Self, Option<ConfigError>) {
        match std::fs::read_to_string(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Self::default(), None),
            Err(e) => (
                Self::default(),
                Some(ConfigError {
                    path: path.to_path_buf(),
                    line: None,
                    reason: e.to_string(),
                }),
            ),
            Ok(text) => match Self::from_toml(&text, path) {
                Ok(s) => (s, None),
                Err(e) => (Self::default(), Some(e)),
            },
        }
    }

    /// Saves atomically, keeping the previous file as `NAME.bak`.
    ///
    /// # Errors
    /// When the values are invalid or the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let err = |reason: String| ConfigError {
            path: path.to_path_buf(),
            line: None,
            reason,
        };
        if let Some((at, what)) = self.problems().into_iter().next() {
            return Err(err(format!("not saved: {at}: {what}")));
        }
        let text = toml::to_string_pretty(self).map_err(|e| err(e.to_string()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        }
        let tmp = path.with_extension("toml.tmp");
        {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp).map_err(|e| err(e.to_string()))?;
            f.write_all(
                b"# vramwarden settings (written by the Settings window; edits by hand are fine)\n",
            )
            .map_err(|e| err(e.to_string()))?;
            f.write_all(text.as_bytes())
                .map_err(|e| err(e.to_string()))?;
            f.sync_all().map_err(|e| err(e.to_string()))?;
        }
        if path.exists() {
            let bak = PathBuf::from(format!("{}.bak", path.display()));
            std::fs::copy(path, &bak).map_err(|e| err(format!("could not keep a backup: {e}")))?;
        }
        std::fs::rename(&tmp, path).map_err(|e| err(e.to_string()))
    }
}
