//! Where vramwarden keeps its files when nothing says otherwise: the platform folders of the
//! user's home (`~/.config/vramwarden`, `~/.local/share/vramwarden`, …), and, with no usable
//! home (HOME unset or relative and no passwd entry for the uid, as for a service or a
//! container uid), the system folders a service uses. Never the current folder: a settings
//! file planted where a command happens to run must never be read (it may hold a rule's
//! `run_command`).

use std::path::PathBuf;

/// The application id: the desktop file's name, the icon's name and the window's app id.
pub const APP_ID: &str = "io.github.vramwarden.VramWarden";

/// The settings file used when there is no home folder (root's to write).
const SYSTEM_CONFIG: &str = "/etc/vramwarden/config.toml";
/// The data folder used when there is no home folder (the service's).
const SYSTEM_DATA_DIR: &str = "/var/lib/vramwarden";

/// The platform folders, only when they are absolute paths (a relative `$HOME` such as `.`
/// would make them relative to the current folder).
pub(crate) fn project_dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "vramwarden").filter(|d| {
        d.config_dir().is_absolute()
            && d.data_dir().is_absolute()
            && d.data_local_dir().is_absolute()
    })
}

/// The settings file when neither `--config` nor `VRAMWARDEN_CONFIG` names one: the platform
/// config folder's `config.toml`, else [`SYSTEM_CONFIG`].
pub(crate) fn default_config() -> PathBuf {
    project_dirs().map_or_else(
        || PathBuf::from(SYSTEM_CONFIG),
        |d| d.config_dir().join("config.toml"),
    )
}

/// The data folder: the platform one, else [`SYSTEM_DATA_DIR`].
pub(crate) fn default_data_dir() -> PathBuf {
    project_dirs().map_or_else(
        || PathBuf::from(SYSTEM_DATA_DIR),
        |d| d.data_dir().to_path_buf(),
    )
}
