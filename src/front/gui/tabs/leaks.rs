//! The Leaks tab: this source's leak episodes and OOMs and past sessions', newest first.

use std::sync::Arc;

use egui::{RichText, Ui};

use super::pane::{Pane, PaneCx};
use crate::engine::replay::PastEvents;
use crate::engine::view::{LeakRecord, OomRecord};
use crate::front::gui::ui_command::UiCommand;
use crate::link::jobs::{Job, JobBoard, JobCommand, JobId, JobResult};

/// The Leaks tab, and the past sessions' leaks it reads once (by a job) for this computer.
#[derive(Debug, Default)]
pub(crate) struct LeaksPane {
    /// The job reading past sessions' leaks.
    reading: Option<JobId>,
    /// Past sessions' leaks, once read.
    past: Option<Arc<PastEvents>>,
    /// Whether other sessions' leaks are listed too, as chosen (by default: with this
    /// computer's or an agent's live View, not with a recorded session's).
    others: Option<bool>,
}

impl LeaksPane {
    /// Takes the past sessions' leaks when their job is done.
    pub(crate) fn poll(&mut self, jobs: &JobBoard) {
        if let Some(r) = self.reading.and_then(|id| jobs.take(id)) {
            self.reading = None;
            if let JobResult::PastLeaks(p) = r {
                self.past = Some(p);
            }
        }
    }
}

impl Pane for LeaksPane {
    /// "Leaks (N ongoing)", in the leak colour while any is ongoing at `now` (a session: its
    /// slider).
    fn title(&self, ui: &Ui, cx: &PaneCx<'_>) -> RichText {
        let n = cx
            .monitor
            .leaks
            .iter()
            .filter(|l| l.active_at(cx.now))
            .count();
        if n > 0 {
            RichText::new(format!("Leaks ({n} ongoing)"))
                .strong()
                .color(crate::front::gui::leaks::leak_color(ui.visuals().dark_mode))
        } else {
            RichText::new("Leaks").strong()
        }
    }

    fn hint(&self) -> &'static str {
        "Ctrl+2"
    }

    fn ui(&mut self, ui: &mut Ui, cx: &mut PaneCx<'_>, out: &mut Vec<UiCommand>) {
        let monitor = cx.monitor;
        // A window attached to an agent shows the agent's past leaks, not this computer's.
        let agent_past = cx.backend.agent_past();
        if agent_past.is_none() && self.past.is_none() && self.reading.is_none() {
            let dir = crate::session::default_dir();
            let skip = monitor.recording.path.clone();
            let id = JobId::next();
            out.push(UiCommand::Job(JobCommand::Start(
                id,
                Job::PastLeaks { dir, skip },
            )));
            self.reading = Some(id);
        }
        let mut all: Vec<&LeakRecord> = monitor.leaks.iter().collect();
        let own: std::collections::HashSet<_> = monitor
            .leaks
            .iter()
            .filter_map(|l| l.session.clone())
            .collect();
        let mut ooms: Vec<&OomRecord> = monitor.ooms.iter().collect();
        let past = agent_past.clone().unwrap_or_else(|| self.past.clone());
        let loading = agent_past
            .as_ref()
            .map_or(self.reading.is_some(), Option::is_none);
        // Other sessions' episodes: a session's own are in the View already.
        let other = |session: &Option<std::path::PathBuf>| {
            session.as_ref().is_none_or(|s| !own.contains(s))
        };
        let other_leaks: Vec<&LeakRecord> = past
            .as_ref()
            .map(|p| p.leaks.iter().filter(|l| other(&l.session)).collect())
            .unwrap_or_default();
        let mut show_others = self.others.unwrap_or(!cx.recorded);
        if !other_leaks.is_empty() {
            let label = format!("Include other sessions ({} leaks)", other_leaks.len());
            if ui.checkbox(&mut show_others, label).changed() {
                self.others = Some(show_others);
            }
        }
        if let Some(p) = past.as_ref().filter(|_| show_others) {
            all.extend(other_leaks);
            ooms.extend(p.ooms.iter().filter(|o| other(&o.session)));
        }
        all.sort_by_key(|l| std::cmp::Reverse(l.flagged_ms));
        ooms.sort_by_key(|o| std::cmp::Reverse(o.at_ms));
        if let Some(c) =
            crate::front::gui::leaks::pane(ui, &all, &ooms, cx.state.units, cx.now, loading, &own)
        {
            out.push(UiCommand::GoToLeak(c));
        }
    }
}
