//! The bottom tabs: their bar, the processes table and the leaks list.

use egui::{RichText, Ui};

use super::{Badges, UiCommand, VramApp};
use crate::engine::view::Monitor;
use crate::front::gui::processes::{self, TableState};
use crate::front::gui::ui_state::BottomTab;
use crate::model::UnixMs;

impl VramApp {
    /// Selects the process of a leak clicked in the Leaks tab, opening its session when it
    /// was recorded elsewhere. Attached to an agent, the session is the agent's: it is
    /// downloaded (as Sessions → Sessions on the agent… does) and opened once it is here.
    pub(super) fn go_to_leak(&mut self, c: crate::front::gui::leaks::LeakClick) {
        let remote = self.backend.remote.is_some();
        let here = match (&c.session, &self.view) {
            (None, None) => true,
            (Some(p), Some(v)) if remote => {
                let name = v.data.path.as_deref().and_then(std::path::Path::file_name);
                name.is_some() && name == p.file_name()
            }
            (Some(p), Some(v)) => v.data.path.as_deref() == Some(p.as_path()),
            _ => false,
        };
        if here {
            self.selected = Some(c.key);
            if let Some(v) = self.view.as_mut() {
                v.t = c.at_ms;
            }
        } else if let (true, Some(p)) = (remote, &c.session) {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            self.pending_select = Some((c.key, c.at_ms));
            self.backend
                .download_agent_session(name.as_deref().unwrap_or_default());
        } else if let Some(p) = c.session {
            self.pending_select = Some((c.key, c.at_ms));
            self.sessions.open_path(p);
        } else {
            self.view = None;
            self.selected = Some(c.key);
        }
    }

    /// Processes · Leaks · Activity, with their counts; the leaks ongoing at `now` (a
    /// session: its slider).
    pub(super) fn tab_bar(&mut self, ui: &mut Ui, monitor: &Monitor, now: UnixMs) {
        let n_leaks = monitor.leaks.iter().filter(|l| l.active_at(now)).count();
        ui.horizontal(|ui| {
            ui.selectable_value(
                &mut self.state.bottom,
                BottomTab::Processes,
                RichText::new("Processes").strong(),
            )
            .on_hover_text("Ctrl+1");
            let leaks_label = if n_leaks > 0 {
                format!("Leaks ({n_leaks} ongoing)")
            } else {
                "Leaks".to_string()
            };
            let leaks_text = if n_leaks > 0 {
                RichText::new(leaks_label)
                    .strong()
                    .color(crate::front::gui::leaks::leak_color(ui.visuals().dark_mode))
            } else {
                RichText::new(leaks_label).strong()
            };
            ui.selectable_value(&mut self.state.bottom, BottomTab::Leaks, leaks_text)
                .on_hover_text("Ctrl+2");
            let n_act = monitor.activity.len();
            ui.selectable_value(
                &mut self.state.bottom,
                BottomTab::Activity,
                RichText::new(if n_act > 0 {
                    format!("Activity ({n_act})")
                } else {
                    "Activity".into()
                })
                .strong(),
            )
            .on_hover_text("Ctrl+3");
            ui.selectable_value(
                &mut self.state.bottom,
                BottomTab::Guard,
                RichText::new(crate::front::gui::guard_pane::tab_label(monitor)).strong(),
            )
            .on_hover_text("Ctrl+4: the OOM guard on each GPU");
        });
    }

    /// The process table.
    pub(super) fn processes_tab(
        &mut self,
        ui: &mut Ui,
        monitor: &Monitor,
        snap: &crate::model::Snapshot,
        rows: &[&crate::engine::view::ProcessRow],
        badges: &Badges,
        now: UnixMs,
    ) {
        self.action_status.prune(now);
        let actions = if self.replaying {
            std::collections::HashMap::new()
        } else {
            self.action_status.states(now)
        };
        let host = self.agent_host(monitor);
        let mut table = TableState {
            units: self.state.units,
            sort: &mut self.state.sort,
            desc: &mut self.state.sort_desc,
            filter: &mut self.filter,
            focus_filter: &mut self.focus_filter,
            selected: &mut self.selected,
            leaks: badges,
            orphans: &monitor.orphans,
            host,
            request: (!self.replaying).then_some(&mut self.queue),
            stale_gpus: snap
                .devices
                .iter()
                .filter(|d| d.process_list_error.is_some())
                .map(|d| d.index)
                .collect(),
            hidden: &mut self.state.hidden_columns,
            window_open: self.settings_ui.open
                || self.connect.open
                || self.sessions.export_open
                || self.sessions.browser_open,
            group_by: &mut self.state.group_by,
            collapsed: &mut self.collapsed_groups,
            actions: &actions,
            recorded: self.replaying,
        };
        processes::table(ui, rows.to_vec(), &mut table, now);
    }

    /// The Leaks tab: this source's episodes and past sessions' (read by a job), newest
    /// first.
    pub(super) fn leaks_tab(&mut self, ui: &mut Ui, monitor: &Monitor, now: UnixMs) {
        // A window attached to an agent shows the agent's past leaks, not this computer's.
        let agent_past = self.backend.agent_past();
        if agent_past.is_none() && self.past.is_none() && self.past_leaks.is_none() {
            let dir = crate::session::default_dir();
            let skip = monitor.recording.path.clone();
            let id = crate::front::gui::jobs::JobId::next();
            self.push(UiCommand::Job(crate::front::gui::jobs::JobCommand::Start(
                id,
                crate::front::gui::jobs::Job::PastLeaks { dir, skip },
            )));
            self.past_leaks = Some(id);
        }
        let mut all: Vec<&crate::engine::view::LeakRecord> = monitor.leaks.iter().collect();
        let own: std::collections::HashSet<_> = monitor
            .leaks
            .iter()
            .filter_map(|l| l.session.clone())
            .collect();
        let mut ooms: Vec<&crate::engine::view::OomRecord> = monitor.ooms.iter().collect();
        let past = agent_past.clone().unwrap_or_else(|| self.past.clone());
        let loading = agent_past
            .as_ref()
            .map_or(self.past_leaks.is_some(), Option::is_none);
        if let Some(p) = &past {
            all.extend(
                p.leaks
                    .iter()
                    .filter(|l| l.session.as_ref().is_none_or(|s| !own.contains(s))),
            );
            ooms.extend(
                p.ooms
                    .iter()
                    .filter(|o| o.session.as_ref().is_none_or(|s| !own.contains(s))),
            );
        }
        all.sort_by_key(|l| std::cmp::Reverse(l.flagged_ms));
        ooms.sort_by_key(|o| std::cmp::Reverse(o.at_ms));
        if let Some(c) =
            crate::front::gui::leaks::pane(ui, &all, &ooms, self.state.units, now, loading)
        {
            self.push(UiCommand::GoToLeak(c));
        }
    }
}
