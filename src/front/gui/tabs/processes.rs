//! The Processes tab: the process table.

use egui::{RichText, Ui};

use super::pane::{Pane, PaneCx};
use crate::front::gui::processes::{self, TableState};
use crate::front::gui::ui_command::UiCommand;

/// The Processes tab, and what its table keeps between frames besides the persisted choices.
#[derive(Debug, Default)]
pub(crate) struct ProcessesPane {
    /// Focus the filter box at the next frame (Ctrl+F).
    pub focus_filter: bool,
    /// Table groups folded shut.
    collapsed: std::collections::HashSet<String>,
}

impl Pane for ProcessesPane {
    fn title(&self, _ui: &Ui, _cx: &PaneCx<'_>) -> RichText {
        RichText::new("Processes").strong()
    }

    fn hint(&self) -> &'static str {
        "Ctrl+1"
    }

    fn ui(&mut self, ui: &mut Ui, cx: &mut PaneCx<'_>, out: &mut Vec<UiCommand>) {
        let now = cx.now;
        cx.actions.prune(now);
        let actions = if cx.recorded {
            std::collections::HashMap::new()
        } else {
            cx.actions.states(now)
        };
        let state = &mut *cx.state;
        let mut table = TableState {
            units: state.units,
            sort: &mut state.sort,
            desc: &mut state.sort_desc,
            filter: cx.filter,
            focus_filter: &mut self.focus_filter,
            selected: cx.selected,
            leaks: cx.badges,
            orphans: &cx.monitor.orphans,
            host: cx.host,
            request: (!cx.recorded && !cx.offline).then_some(out),
            stale_gpus: cx
                .snap
                .devices
                .iter()
                .filter(|d| d.process_list_error.is_some())
                .map(|d| d.index)
                .collect(),
            hidden: &mut state.hidden_columns,
            window_open: cx.window_open,
            group_by: &mut state.group_by,
            collapsed: &mut self.collapsed,
            actions: &actions,
            recorded: cx.recorded,
        };
        if cx.offline {
            // A lost agent's rows are its last sample's, not live: greyed as its cards are
            // (a weak text colour left the cells' own colours, most of the table, as live).
            ui.multiply_opacity(crate::front::gui::widgets::UNREACHABLE_OPACITY);
        }
        processes::table(ui, cx.rows.to_vec(), &mut table, now);
    }
}
