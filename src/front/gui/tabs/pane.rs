//! The [`Pane`] trait the tabs under the graph implement, and what a frame gives them.

use egui::{RichText, Ui};

use crate::engine::view::{LeakKey, Monitor, ProcessRow};
use crate::front::gui::action_status::ActionStatus;
use crate::front::gui::backend::Backend;
use crate::front::gui::leaks::LeakBadge;
use crate::front::gui::ui_command::UiCommand;
use crate::front::gui::ui_state::UiState;
use crate::model::history::ProcSeriesKey;
use crate::model::{Snapshot, UnixMs};

/// The leak badges of the rows on screen, by row.
pub(crate) type Badges = std::collections::HashMap<LeakKey, LeakBadge>;

/// What a frame gives a pane: the View drawn (live, or a session at its cursor) and the
/// window's choices a pane may change (the selection, the table's sort, filter and columns).
pub(crate) struct PaneCx<'a> {
    /// The View drawn.
    pub monitor: &'a Monitor,
    /// Its sample at `now`.
    pub snap: &'a Snapshot,
    /// The table's rows at `now`.
    pub rows: &'a [&'a ProcessRow],
    /// The leak badges of the rows.
    pub badges: &'a Badges,
    /// The clock (a session: its cursor).
    pub now: UnixMs,
    /// A recorded session is drawn: no actions are offered.
    pub recorded: bool,
    /// The agent drawn has stopped answering: its figures are as of its last sample, drawn
    /// faint, and no actions are offered.
    pub offline: bool,
    /// The agent's host when the View is an agent's (`None`: this computer).
    pub host: Option<&'a str>,
    /// The GPU whose graph is shown.
    pub selected_gpu: u32,
    /// The process selected.
    pub selected: &'a mut Option<ProcSeriesKey>,
    /// The persisted choices (units, sort, hidden columns, grouping, the tab shown).
    pub state: &'a mut UiState,
    /// The process table's filter text.
    pub filter: &'a mut String,
    /// A window (Settings, Connect, Export, Sessions) is open over the panes.
    pub window_open: bool,
    /// The manual actions sent and how they stand.
    pub actions: &'a mut ActionStatus,
    /// The engine link(s), for what a pane reads besides the View (an agent's past leaks).
    pub backend: &'a Backend,
}

/// A tab under the graph: its label in the tab bar and its contents. What it asks of the
/// window (an action, a job, a leak to go to) goes to `out`, carried out at the frame's end.
pub(crate) trait Pane {
    /// The tab's label, with its counts.
    fn title(&self, ui: &Ui, cx: &PaneCx<'_>) -> RichText;
    /// The tab's tooltip (its shortcut).
    fn hint(&self) -> &'static str;
    /// Draws the tab's contents.
    fn ui(&mut self, ui: &mut Ui, cx: &mut PaneCx<'_>, out: &mut Vec<UiCommand>);
}
