//! The engine itself: the pipeline state owned by the thread that drives it, one field per
//! stage, and its tick (enrich → watches → rules → record → publish), its commands and its end.
//! Set up by [`crate::engine::builder`].

use std::path::PathBuf;

use crate::engine::command::{self, EngineCommand};
use crate::engine::events::{AlertFilter, EngineEvent, EngineEventKind};
use crate::engine::shared::SharedMonitor;
use crate::engine::stages::outbox::{AlertSink, Alerting, Outbox};
use crate::engine::stages::{
    enrich::Enrich,
    publish,
    record::{RecordTo, Recorder},
    rules::Rules,
    watches::Watches,
};
use crate::host::cost::{self, Part};
use crate::model::{Snapshot, SourceInfo, UnixMs};
use crate::session::Event;

/// The words of an accepted command's reply: its activity entry's, without the "its answer
/// follows" the log ends it with (the reply's stage says so).
fn in_progress(detail: &str) -> String {
    detail
        .strip_suffix(crate::act::rules::action::ANSWER_FOLLOWS)
        .map_or(detail, |d| d.trim_end_matches("; "))
        .to_string()
}

/// How a front end wants the engine to behave beyond the settings file.
#[derive(Clone, Default)]
pub struct EngineOptions {
    /// The subscriber to alerts, the events the settings make alerts (the window's desktop
    /// notifier; the headless front ends' printer of the problems reported, on stderr).
    /// `None`: the events are in the View only.
    pub alerts: Option<AlertSink>,
    /// The sessions folder to keep within the retention limits of the settings (the window
    /// and `record` into the default folder); `None`: no pruning.
    pub retention_dir: Option<PathBuf>,
}

impl std::fmt::Debug for EngineOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineOptions")
            .field("alerts", &self.alerts.is_some())
            .field("retention_dir", &self.retention_dir)
            .finish()
    }
}

/// The pipeline state owned by the sampler thread (or the loop of `record`, `import`, a
/// replay): one field per stage.
pub struct Engine {
    shared: SharedMonitor,
    /// What the engine keeps beside the View to derive its rows (never published).
    state: crate::engine::state::EngineState,
    enrich: Enrich,
    recorder: Recorder,
    watches: Watches,
    rules: Rules,
    alerting: Alerting,
    /// A recorded session's engine: see [`Engine::read_only`].
    read_only: bool,
    /// The session file a read-only engine replays (named on its leak and OOM records).
    session: Option<PathBuf>,
    /// The source builds the history (see [`crate::engine::EngineBuilder::history_by_source`]).
    history_by_source: bool,
    /// Final replies to accepted commands whose work ended, until the front end's loop takes
    /// them ([`Engine::take_replies`]).
    late_replies: Vec<command::CommandReply>,
    /// The GPUs with a forecast alert, for the rules (kept for its room).
    alert_gpus: Vec<u32>,
    /// Events of commands taken since the last tick, numbered with the next tick's.
    pending: Vec<(UnixMs, EngineEventKind)>,
}

impl Engine {
    /// The stages in their first state (for [`crate::engine::EngineBuilder::build`]).
    pub(super) fn bare(shared: SharedMonitor, record: RecordTo, interval_ms: u64) -> Self {
        Self {
            shared,
            state: crate::engine::state::EngineState::default(),
            enrich: Enrich::default(),
            recorder: Recorder::new(record, interval_ms),
            watches: Watches::default(),
            rules: Rules::default(),
            alerting: Alerting::default(),
            read_only: false,
            session: None,
            history_by_source: false,
            late_replies: Vec::new(),
            alert_gpus: Vec::new(),
            pending: Vec::new(),
        }
    }

    pub(super) fn make_read_only(&mut self, session: Option<PathBuf>, history_by_source: bool) {
        self.read_only = true;
        self.session = session;
        self.history_by_source = history_by_source;
    }

    /// Takes the events a recorded source gives ([`crate::source::GpuSource::recorded_events`]):
    /// its leak episodes and OOM suspicions join the monitor's, named with the session file.
    pub(crate) fn take_recorded_events(&mut self, events: Vec<Event>) {
        if !events.is_empty() {
            publish::recorded_events(&self.shared, &events, self.session.as_deref());
        }
    }

    /// A sample that could not be taken: the source's last error until the next good one
    /// (the window shows it and the data goes stale; nothing is recorded as zero).
    pub(crate) fn sample_failed(&mut self, e: &crate::source::SourceError) {
        publish::sample_failed(&self.shared, e);
    }

    /// Why the session log could not be written, as the recording status this engine
    /// published says: when it could not be created at all
    /// ([`crate::engine::view::RecordingStatus::could_not_start`]), or, with `strict`, when the last sample
    /// could not be written either. None while all is well.
    pub(crate) fn recording_failed(&self, strict: bool) -> Option<String> {
        let m = self.shared.read().ok()?;
        let r = &m.recording;
        if strict {
            r.error.clone()
        } else {
            r.could_not_start().map(str::to_string)
        }
    }

    /// Sets what the front end wants (the alert subscriber, the folder to prune).
    pub(crate) fn set_options(&mut self, options: EngineOptions) {
        self.alerting.sink = options.alerts;
        self.recorder.retention_dir = options.retention_dir;
    }

    /// True when an enabled rule needs per-process utilisation (an idle condition).
    pub(crate) fn needs_process_utilization(&self) -> bool {
        self.rules.needs_process_utilization()
    }

    /// Applies settings: rules, protections, global dry run, leak sensitivity, notifications.
    pub fn apply_settings(&mut self, s: &crate::engine::settings::Settings) {
        self.recorder.retention = (
            s.sessions.retention_days,
            s.sessions.retention_max_mib.saturating_mul(1 << 20),
        );
        self.watches.apply_settings(s);
        self.alerting.filter = AlertFilter::of(s);
        self.rules.apply_settings(s);
    }

    /// What a command sent through an agent's API may do (kept when the settings change).
    pub(crate) fn set_remote_policy(&mut self, remote: crate::act::rules::action::RemotePolicy) {
        self.rules.safety.remote = remote;
    }

    /// Writes activity entries to the log and shows them in the monitor (outside a tick).
    fn log_activity(&mut self, acts: Vec<crate::act::rules::action::Activity>) {
        self.recorder.activity(&acts);
        let mut out = Outbox::default();
        out.activity(&acts, true);
        self.pending.append(&mut out.events);
        publish::activity(&self.shared, acts);
    }

    /// Logs a manual action on `key` that was not carried out, and why. The process is named
    /// with the facts of its table row, if any.
    fn manual_skipped(
        &mut self,
        key: crate::model::history::ProcSeriesKey,
        action: &crate::act::rules::Action,
        now: UnixMs,
        why: &str,
    ) -> command::Answer {
        let info = self
            .shared
            .read()
            .ok()
            .and_then(|m| m.row(&key).map(|r| r.info.clone()));
        self.log_activity(vec![crate::act::rules::action::Activity {
            unix_ms: now,
            rule: "manual".into(),
            action: action.label(),
            target: crate::act::rules::eval::Target::process(
                key,
                info,
                None,
                crate::model::Origin::Recorded,
            ),
            outcome: crate::act::rules::action::Outcome::Skipped,
            detail: why.into(),
            entry: crate::act::rules::action::Entry::Action,
        }]);
        command::Answer::new(crate::model::outcome::Outcome::Skipped, why)
    }

    /// Records what the source is (for the monitor and the session header).
    pub fn set_source(&mut self, info: SourceInfo) {
        publish::source(&self.shared, info.clone());
        self.rules.runner.set_simulated_gpus(info.is_simulated());
        self.recorder.source = Some(info);
    }

    /// Applies a front end's request and says how it ended (the link's reply), under a new
    /// command id: see [`Engine::command_under`].
    pub fn command(&mut self, c: EngineCommand, now: UnixMs) -> command::Answer {
        self.command_under(command::CommandId::next(), c, now)
    }

    /// Final replies to accepted commands whose work (a park, a resume, a companion's answer)
    /// ended since the last call; the sampler hands them to its front end after each tick.
    pub fn take_replies(&mut self) -> Vec<command::CommandReply> {
        std::mem::take(&mut self.late_replies)
    }

    /// Applies a front end's request, sent as command `id`, and says how it ended (the link's
    /// reply), or, for work that ends later (a park, a resume, a companion's answer), that it
    /// was accepted: its final reply then comes under `id` from a later tick
    /// ([`Engine::take_replies`], and the View's `replies`).
    pub fn command_under(
        &mut self,
        id: command::CommandId,
        c: EngineCommand,
        now: UnixMs,
    ) -> command::Answer {
        use crate::model::outcome::Outcome;
        if let EngineCommand::TestRule { rule, safety } = &c {
            let safety = safety.clone().unwrap_or_else(|| self.rules.safety.clone());
            return match self.shared.read() {
                Ok(m) => command::test_rule_answer(rule, &m, &safety, &self.rules.runner),
                Err(_) => command::Answer::new(Outcome::Failed, "the engine's state is lost"),
            };
        }
        if self.read_only {
            if let EngineCommand::Manual { key, action, .. } = c {
                return self.manual_skipped(
                    key,
                    &action,
                    now,
                    "a recorded session: nothing acts from a replay",
                );
            }
            return command::Answer::new(
                Outcome::Skipped,
                "a recorded session: settings and recording belong to the live engine",
            );
        }
        let active = match c {
            EngineCommand::PauseRecording => false,
            EngineCommand::ResumeRecording => true,
            EngineCommand::ApplySettings(s) => {
                self.apply_settings(&s);
                return command::Answer::new(Outcome::Acted, "settings applied");
            }
            EngineCommand::Manual { key, action, from } => {
                return self.manual(id, key, action, from, now)
            }
            EngineCommand::TestRule { .. } => {
                return command::Answer::new(Outcome::Failed, "internal error: a rule test")
            }
        };
        if self.recorder.set_active(active, now) {
            publish::recording(&self.shared, self.recorder.status(None));
        }
        let what = if active {
            "recording"
        } else {
            "recording paused"
        };
        command::Answer::new(Outcome::Acted, what)
    }

    /// The user's own action on `key`: the engine builds the target from its own latest
    /// snapshot (a front end only names the process); a process no longer listed is not
    /// acted on. A command from an agent's API is judged by the remote policy first
    /// ([`crate::act::rules::action::Safety::remote_verdict`]).
    fn manual(
        &mut self,
        id: command::CommandId,
        key: crate::model::history::ProcSeriesKey,
        action: crate::act::rules::Action,
        from: command::CommandFrom,
        now: UnixMs,
    ) -> command::Answer {
        let current = self.shared.read().ok().and_then(|m| {
            m.latest
                .as_ref()
                .and_then(|s| crate::act::rules::eval::find_process_target(s, &key))
        });
        let Some(target) = current else {
            return self.manual_skipped(
                key,
                &action,
                now,
                "the process is no longer listed on that GPU",
            );
        };
        if from == command::CommandFrom::Agent {
            if let Some((outcome, detail)) = self.rules.safety.remote_verdict(&target) {
                self.log_activity(vec![crate::act::rules::action::Activity {
                    unix_ms: now,
                    rule: "manual".into(),
                    action: action.label(),
                    target,
                    outcome,
                    detail: detail.clone(),
                    entry: crate::act::rules::action::Entry::Action,
                }]);
                return command::Answer::new(outcome, detail);
            }
        }
        self.run_manual(id, key, action, target, from, now)
    }

    /// Runs the user's own `action` on `target` (already found and, from an agent's API,
    /// judged by the remote policy) through the executor; its answer, accepted for later
    /// when the work goes on past this call.
    fn run_manual(
        &mut self,
        id: command::CommandId,
        key: crate::model::history::ProcSeriesKey,
        action: crate::act::rules::Action,
        target: crate::act::rules::eval::Target,
        from: command::CommandFrom,
        now: UnixMs,
    ) -> command::Answer {
        let agent = from == command::CommandFrom::Agent;
        // An agent's client was judged by the remote policy; a window's click by the
        // settings' word on other users' processes.
        let p = crate::act::rules::eval::Planned {
            rule: "manual".into(),
            action,
            dry_run: false,
            allow_other_users: agent || self.rules.manual_other_users,
            target,
        };
        // An agent's command in its global dry run goes through every refusal first, as a
        // real one would, and then says what it would do; a window's is never a dry run.
        let dry = agent && self.rules.safety.global_dry_run;
        let safety = crate::act::rules::action::Safety {
            global_dry_run: dry,
            protected: self.rules.safety.protected.clone(),
            remote: self.rules.safety.remote,
        };
        let mut a = self.rules.runner.run(&p, &safety, now);
        if dry && a.outcome == crate::model::outcome::Outcome::WouldAct {
            a.detail = crate::act::rules::action::Safety::remote_dry_run(&a.detail);
        }
        let started = a.entry == crate::act::rules::action::Entry::Asked
            && self.rules.runner.answer_under(&p.action, &key, id);
        let answer = if started {
            command::Answer::accepted(in_progress(&a.detail))
        } else {
            command::Answer::new(a.outcome, a.detail.clone())
        };
        self.log_activity(vec![a]);
        answer
    }

    /// One tick: enrich → watches → rules → record → publish (a sample is logged once it is
    /// final, with the forecast the View shows). Returns the sample this one
    /// replaced as the latest (see [`crate::source::GpuSource::give_back`]).
    pub fn tick(&mut self, mut snap: Snapshot, received_ms: UnixMs) -> Option<Snapshot> {
        snap.sanitize();
        if self.read_only {
            return self.tick_replayed(snap, received_ms);
        }
        let mut out = Outbox::default();
        self.enrich_stage(&mut snap);
        let watches = cost::span(Part::Watches);
        let watched = self.watches.observe(&mut snap, &mut out);
        drop(watches);
        let (acts, parks) = self.rules_stage(&snap);
        // The rules decided on the forecast as it is; the View shows it once it has stood
        // the alerts' hold (no card warns of a burst the banner stays quiet about).
        self.watches.hold_forecasts(&mut snap);
        let error = self.record_stage(&snap, &watched.events, &acts, parks, &mut out);
        out.activity(&acts, false);
        let numbered = self.number(out.events);
        let replies = self.keep_replies();
        let previous = self.publish_stage(
            publish::Tick {
                snap,
                received_ms,
                acts,
                replies,
                events: numbered.clone(),
            },
            watched,
            error,
        );
        self.alerting.deliver(&numbered);
        previous
    }

    /// A read-only engine's tick (a replay): the commands' events, then the sample shown as
    /// recorded.
    fn tick_replayed(&mut self, snap: Snapshot, received_ms: UnixMs) -> Option<Snapshot> {
        let events = self.number(Vec::new());
        if !events.is_empty() {
            publish::events(&self.shared, events);
        }
        publish::replayed(
            &self.shared,
            &mut self.state,
            snap,
            received_ms,
            self.history_by_source,
        )
    }

    /// Enrich: stale processes carried, parks shown, `/proc` facts and usage added.
    fn enrich_stage(&mut self, snap: &mut Snapshot) {
        let _enrich = cost::span(Part::Enrich);
        self.enrich.carry_stale(snap, &self.shared);
        self.rules.annotate_parked(snap);
        self.enrich.run(snap);
    }

    /// Rules: pure decisions, then the runner (the only code that signals); the OOM guard's
    /// steps among them. Returns the tick's activity and the parks that ended.
    fn rules_stage(
        &mut self,
        snap: &Snapshot,
    ) -> (
        Vec<crate::act::rules::action::Activity>,
        Vec<crate::act::rules::park_action::ParkRecord>,
    ) {
        let _rules = cost::span(Part::Rules);
        let now = snap.taken_at_ms;
        let mut alerts = std::mem::take(&mut self.alert_gpus);
        self.watches.forecast_alert_gpus_into(&mut alerts);
        let acts = self.rules.run(
            snap,
            self.watches.leaking(),
            self.watches.growth(),
            &alerts,
            now,
        );
        self.alert_gpus = alerts;
        let parks = self.rules.take_park_records(now);
        (acts, parks)
    }

    /// Record: the sample, final (enriched, its forecast as the View shows it), then the
    /// tick's events, activity and parks (a park that lost its process's memory is said in
    /// `out`). Returns the recording's error, if any.
    fn record_stage(
        &mut self,
        snap: &Snapshot,
        events: &[Event],
        acts: &[crate::act::rules::action::Activity],
        parks: Vec<crate::act::rules::park_action::ParkRecord>,
        out: &mut Outbox,
    ) -> Option<String> {
        let _record = cost::span(Part::Record);
        let mut error = self.recorder.sample(snap, out);
        if let Some(e) = self.recorder.events(events) {
            error = Some(e);
        }
        self.recorder.activity(acts);
        for r in parks.iter().filter(|r| r.stranded) {
            out.event(r.unix_ms, park_lost(r));
        }
        self.recorder.parks(parks);
        error
    }

    /// The final replies the runner concluded this tick, also kept for a loop that takes
    /// them later (one that never does, a test's or a headless run's, keeps the newest).
    fn keep_replies(&mut self) -> Vec<crate::model::reply::CommandReply> {
        let replies = self.rules.runner.take_concluded();
        self.late_replies.extend(replies.iter().cloned());
        let over = self
            .late_replies
            .len()
            .saturating_sub(command::REPLIES_KEPT);
        self.late_replies.drain(..over);
        replies
    }

    /// Publish: one write lock per tick, everything the UI reads changes at once. Returns the
    /// sample the new one replaced.
    fn publish_stage(
        &mut self,
        tick: publish::Tick,
        watched: crate::engine::stages::watches::Watched,
        error: Option<String>,
    ) -> Option<Snapshot> {
        let _publish = cost::span(Part::Publish);
        let (events, orphans) = (watched.events, watched.orphans);
        let (watches, rules, recorder) = (&self.watches, &self.rules, &self.recorder);
        publish::tick(&self.shared, &mut self.state, tick, |m| {
            watches.publish(m, &events, orphans);
            watches.show_forecast_alerts(&mut m.oom_alerts);
            rules.show_guard_status(&mut m.guard);
            rules.show_last_active(&mut m.last_active);
            recorder.show_status(error, &mut m.recording);
        })
    }

    /// The tick's `events` after the commands' taken since the last, numbered on.
    fn number(&mut self, events: Vec<(UnixMs, EngineEventKind)>) -> Vec<EngineEvent> {
        let all = if self.pending.is_empty() {
            events
        } else {
            let mut all = std::mem::take(&mut self.pending);
            all.extend(events);
            all
        };
        self.state.number_events(all)
    }

    /// Closes the session log (fsync); a read-only engine closes the leaks still open at the
    /// end of its session.
    ///
    /// # Errors
    /// The message of a failed final fsync.
    pub fn finish(mut self) -> Result<Option<PathBuf>, String> {
        if self.read_only {
            // A leak still growing when the recording stopped ended with it.
            publish::close_open_leaks(&self.shared);
        }
        self.recorder.finish()
    }
}

/// The event of a parked process whose restore failed for good.
fn park_lost(r: &crate::act::rules::park_action::ParkRecord) -> EngineEventKind {
    EngineEventKind::ParkLost {
        key: r.key,
        name: r.name.clone(),
        detail: r.detail.clone(),
    }
}
