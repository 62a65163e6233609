//! The tabs under the graph (Processes, Leaks, Activity, Guard): each a [`Pane`], drawn
//! behind one tab bar.

pub(crate) mod activity;
pub(crate) mod guard;
pub(crate) mod leaks;
pub(crate) mod pane;
pub(crate) mod processes;

use egui::Ui;

pub(crate) use pane::{Badges, Pane, PaneCx};

use crate::front::gui::ui_command::UiCommand;
use crate::front::gui::ui_state::BottomTab;

/// The tabs in the bar's order.
const ORDER: [BottomTab; 4] = [
    BottomTab::Processes,
    BottomTab::Leaks,
    BottomTab::Activity,
    BottomTab::Guard,
];

/// The four tabs and what each keeps between frames.
#[derive(Debug, Default)]
pub(crate) struct Tabs {
    /// The process table.
    pub processes: processes::ProcessesPane,
    /// The leaks list.
    pub leaks: leaks::LeaksPane,
    activity: activity::ActivityPane,
    guard: guard::GuardPane,
}

impl Tabs {
    /// The pane of `tab`.
    pub(crate) fn pane(&mut self, tab: BottomTab) -> &mut dyn Pane {
        match tab {
            BottomTab::Processes => &mut self.processes,
            BottomTab::Leaks => &mut self.leaks,
            BottomTab::Activity => &mut self.activity,
            BottomTab::Guard => &mut self.guard,
        }
    }

    /// The tab bar, then the tab chosen (`cx.state.bottom`).
    pub(crate) fn show(&mut self, ui: &mut Ui, cx: &mut PaneCx<'_>, out: &mut Vec<UiCommand>) {
        ui.horizontal(|ui| {
            for tab in ORDER {
                let pane = self.pane(tab);
                let (title, hint) = (pane.title(ui, cx), pane.hint());
                ui.selectable_value(&mut cx.state.bottom, tab, title)
                    .on_hover_text(hint);
            }
        });
        let tab = cx.state.bottom;
        self.pane(tab).ui(ui, cx, out);
    }
}
