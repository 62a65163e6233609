//! What the processes table keeps between frames and what it asks of the window.

use super::columns::SortColumn;
use super::grouping::GroupBy;
use crate::model::format::Units;
use crate::model::history::ProcSeriesKey;

/// What the table reads and changes.
pub(crate) struct TableState<'a> {
    /// Units for memory cells.
    pub units: Units,
    /// Sort column.
    pub sort: &'a mut SortColumn,
    /// Descending?
    pub desc: &'a mut bool,
    /// Filter text.
    pub filter: &'a mut String,
    /// Focus the filter box this frame (Ctrl+F).
    pub focus_filter: &'a mut bool,
    /// Selected process.
    pub selected: &'a mut Option<ProcSeriesKey>,
    /// Receives a manual action asked for from the context menu (a
    /// [`crate::front::gui::ui_command::UiCommand::AskAction`]); `None` where actions are off
    /// (a recorded session is on screen).
    pub request: Option<&'a mut Vec<crate::front::gui::ui_command::UiCommand>>,
    /// GPUs whose process list failed at the last sample (their rows are the last good list).
    pub stale_gpus: Vec<u32>,
    /// Leak flags by series.
    pub leaks: &'a std::collections::HashMap<
        crate::engine::view::LeakKey,
        crate::front::gui::leaks::LeakBadge,
    >,
    /// Per GPU, the memory of listed PIDs not running here (the View's).
    pub orphans: &'a [crate::detect::orphans::OrphanGpu],
    /// The host the View is about when it is an agent's (`None`: this computer): the
    /// orphaned PIDs' wording names it.
    pub host: Option<&'a str>,
    /// Columns the user hid.
    pub hidden: &'a mut Vec<SortColumn>,
    /// Grouping.
    pub group_by: &'a mut GroupBy,
    /// Groups folded shut (by key).
    pub collapsed: &'a mut std::collections::HashSet<String>,
    /// A window (Settings, Sessions, Export, Connect) is open: ↑/↓ are not the table's.
    pub window_open: bool,
    /// The processes with a recent manual action and how it stands: shown at the start of
    /// their row's Name cell, where the action was taken.
    pub actions:
        &'a std::collections::HashMap<ProcSeriesKey, crate::front::gui::action_status::State>,
    /// A recorded session is shown: the columns a session log does not keep are left out
    /// (see [`SortColumn::recorded`]), and the filter bar says so.
    pub recorded: bool,
}
