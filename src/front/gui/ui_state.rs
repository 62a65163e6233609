//! What the window remembers between runs (units, the graph's window, sorting, panes, hosts,
//! the palette) and applying the theme.

use serde::{Deserialize, Serialize};

use super::processes::SortColumn;
use super::widgets;
use crate::model::format::Units;

/// UI choices that survive a restart (eframe persistence; not the settings file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UiState {
    /// MiB / GiB / automatic.
    pub units: Units,
    /// Graph time window.
    pub window: Window,
    /// Stack the graph by process.
    pub stacked: bool,
    /// Table sort column.
    pub sort: SortColumn,
    /// Sort descending.
    pub sort_desc: bool,
    /// Which pane is under the graph.
    pub bottom: BottomTab,
    /// Scale the graph's memory axis to the data shown (not 0 … the GPU's size).
    pub fit_y: bool,
    /// Process-table columns the user hid.
    pub hidden_columns: Vec<SortColumn>,
    /// Show utilisation, temperature and power under the memory graph.
    pub show_metrics: bool,
    /// Agents connected to before (File → Connect to host…), newest first.
    pub hosts: Vec<super::connect::SavedHost>,
    /// How the process table groups its rows.
    pub group_by: super::processes::GroupBy,
    /// The process colours (standard, or safe for colour-blind eyes).
    pub palette: widgets::Palette,
    /// The paths last typed where no file dialog could be shown.
    pub typed_paths: super::sessions::TypedPaths,
}

/// The panes under the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BottomTab {
    /// The process table.
    Processes,
    /// The leak history.
    Leaks,
    /// What rules and manual actions did.
    Activity,
    /// The OOM guard.
    Guard,
}

impl Default for UiState {
    fn default() -> Self {
        Self {
            units: Units::Auto,
            window: Window::TenMinutes,
            stacked: true,
            sort: SortColumn::Memory,
            sort_desc: true,
            bottom: BottomTab::Processes,
            fit_y: false,
            hidden_columns: Vec::new(),
            show_metrics: true,
            hosts: Vec::new(),
            group_by: super::processes::GroupBy::None,
            palette: widgets::Palette::Standard,
            typed_paths: Default::default(),
        }
    }
}

/// Time window presets of the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Window {
    /// Last minute.
    OneMinute,
    /// Last 10 minutes.
    TenMinutes,
    /// Last hour.
    OneHour,
    /// Everything held.
    All,
}

impl Window {
    /// Every preset, in toolbar order.
    pub(crate) const ALL: [Window; 4] = [
        Window::OneMinute,
        Window::TenMinutes,
        Window::OneHour,
        Window::All,
    ];

    /// Toolbar label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Window::OneMinute => "1 min",
            Window::TenMinutes => "10 min",
            Window::OneHour => "1 h",
            Window::All => "All",
        }
    }

    pub(super) fn ms(self) -> Option<i64> {
        match self {
            Window::OneMinute => Some(60_000),
            Window::TenMinutes => Some(600_000),
            Window::OneHour => Some(3_600_000),
            Window::All => None,
        }
    }
}

/// Applies the colour theme.
pub(crate) fn apply_theme(ctx: &egui::Context, t: crate::model::format::Theme) {
    ctx.set_theme(match t {
        crate::model::format::Theme::System => egui::ThemePreference::System,
        crate::model::format::Theme::Dark => egui::ThemePreference::Dark,
        crate::model::format::Theme::Light => egui::ThemePreference::Light,
    });
    // Applied during a frame, the theme shows whole from the next one (the window is cleared
    // to the panels' colour of the frame drawn), which nothing else may ask for.
    ctx.request_repaint();
}
