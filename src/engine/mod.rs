//! The engine: one per run, for every front end and every speed. Each sample goes through a
//! short pipeline of stages ([`stages`]): enrich → watches → rules → record → publish. It is
//! set up by the one [`EngineBuilder`], driven by the one loop ([`tick_loop`]) from a source
//! chosen once ([`crate::source::SourceKind`]), and takes a front end's requests between
//! ticks ([`EngineCommand`]). Alerts go to the front end's subscriber ([`EngineOptions`]);
//! the engine shows no desktop notification itself.

pub mod builder;
pub mod command;
pub mod guard_replay;
pub mod import;
pub mod past_cache;
pub mod replay;
pub mod sampler;
pub mod settings;
pub mod shared;
pub mod stages;
pub mod tick_loop;
pub mod view;

use std::path::PathBuf;

pub use builder::{EngineBuilder, EngineOptions};
pub use stages::outbox::{Alert, AlertKind, AlertSink, Urgency};
pub use stages::publish::ACTIVITY_KEPT;
pub use stages::record::{RecordTo, PRUNE_EVERY_MS};

use crate::engine::shared::SharedMonitor;
use crate::engine::stages::outbox::Alerting;
use crate::engine::stages::{
    enrich::Enrich, publish, record::Recorder, rules::Rules, watches::Watches,
};
use crate::host::cost::{self, Part};
use crate::model::{Snapshot, SourceInfo, UnixMs};
use crate::session::Event;

/// Which targets a rule matches right now (the Settings window's "test this rule"), each with
/// the reason it would be skipped under `safety` (protected, another user's, simulated…), or
/// `None` when the action would go ahead (or be logged, in a dry run).
pub fn test_rule(
    rule: &crate::act::rules::Rule,
    m: &crate::engine::view::Monitor,
    safety: &crate::act::rules::action::Safety,
) -> Vec<(crate::act::rules::eval::Target, Option<String>)> {
    let Some(snap) = &m.latest else {
        return Vec::new();
    };
    let mut st = crate::act::rules::eval::RuleState::with_last_active(snap, &m.last_active);
    st.set_releasable_cache(crate::act::rules::eval::releasable_cache_of(snap));
    // PyTorch's allocated memory over the growth window, from the history.
    let h = &m.history;
    let from = h.tick_at(snap.taken_at_ms - crate::act::rules::eval::GROWTH_WINDOW_MS);
    for p in snap.processes.iter().filter(|p| p.torch.is_some()) {
        let key = (p.key(), p.device_index);
        if let Some(series) = h.torch(&key, crate::model::history::TorchFigure::Allocated) {
            st.set_allocated_readings(
                key,
                series
                    .values(from, h.end_tick())
                    .into_iter()
                    .filter(|(_, v)| *v != crate::model::history::NONE)
                    .filter_map(|(t, v)| Some((h.time_of(t)?, u64::from(v) * crate::model::MIB))),
            );
        }
    }
    let facts = crate::act::rules::eval::Facts {
        leaking_since: m
            .leaks
            .iter()
            .filter(|l| l.ended_ms.is_none())
            .filter_map(|l| match l.key {
                crate::engine::view::LeakKey::Process(k) => Some((k, l.flagged_ms)),
                crate::engine::view::LeakKey::Ghost(_) => None,
            })
            .collect(),
    };
    let runner = crate::act::rules::action::ActionRunner::new();
    st.matches_now(rule, snap, &facts)
        .into_iter()
        .map(|target| {
            let p = crate::act::rules::eval::Planned {
                rule: rule.name.clone(),
                action: rule.action.clone(),
                dry_run: rule.dry_run,
                allow_other_users: rule.allow_other_users,
                target: target.clone(),
            };
            let why = runner.would_refuse(&p, safety);
            (target, why)
        })
        .collect()
}

/// The words of an accepted command's reply: its activity entry's, without the "its answer
/// follows" the log ends it with (the reply's stage says so).
fn in_progress(detail: &str) -> String {
    detail
        .strip_suffix(crate::act::rules::action::ANSWER_FOLLOWS)
        .map_or(detail, |d| d.trim_end_matches("; "))
        .to_string()
}

/// Requests from a front end, applied by the engine on its thread.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineCommand {
    /// Stop writing samples (the file stays open).
    PauseRecording,
    /// Resume writing samples.
    ResumeRecording,
    /// New settings (rules, protections, leak sensitivity, notifications).
    ApplySettings(Box<crate::engine::settings::Settings>),
    /// The user's own action on a process (Terminate, Kill, Send signal…), through the same
    /// checks as the rules (identity, protected list, other users), never a dry run. The
    /// front end names the process only; the engine builds the target from its own latest
    /// sample.
    Manual {
        /// The process: pid + start time, and its GPU.
        key: crate::model::history::ProcSeriesKey,
        /// What to do.
        action: crate::act::rules::Action,
    },
    /// Which targets a rule matches now in this engine (the one that owns the processes),
    /// and which its safety would skip: answered in the reply, nothing is done.
    TestRule {
        /// The rule as edited.
        rule: Box<crate::act::rules::Rule>,
        /// The safety settings to judge by (the window's, as edited); `None`: the engine's
        /// own (an agent always uses its own).
        safety: Option<crate::act::rules::action::Safety>,
    },
}

/// The pipeline state owned by the sampler thread (or the loop of `record`, `import`, a
/// replay): one field per stage.
pub struct Engine {
    shared: SharedMonitor,
    enrich: Enrich,
    recorder: Recorder,
    watches: Watches,
    rules: Rules,
    alerting: Alerting,
    /// A recorded session's engine: see [`Engine::read_only`].
    read_only: bool,
    /// The session file a read-only engine replays (named on its leak and OOM records).
    session: Option<PathBuf>,
    /// The source builds the history (see [`EngineBuilder::history_by_source`]).
    history_by_source: bool,
    /// Final replies to accepted commands whose work ended, until the front end's loop takes
    /// them ([`Engine::take_replies`]).
    late_replies: Vec<command::CommandReply>,
}

impl Engine {
    /// An engine writing into `shared`, recording as `record` says, on default settings:
    /// [`EngineBuilder::new`]`(shared, interval_ms).record(record).build()`.
    pub fn new(shared: SharedMonitor, record: RecordTo, interval_ms: u64) -> Self {
        EngineBuilder::new(shared, interval_ms)
            .record(record)
            .build()
    }

    /// An engine for a recorded session (`session`, the file it comes from): each sample is
    /// applied to the monitor as it was recorded, and the session's own leak and OOM events
    /// are taken as they come ([`Engine::take_recorded_events`]). Nothing is enriched from this
    /// machine, detected again, written or acted on: no rules run, and a manual action is
    /// refused. [`EngineBuilder::read_only`] says the same.
    pub fn read_only(shared: SharedMonitor, interval_ms: u64, session: Option<PathBuf>) -> Self {
        EngineBuilder::new(shared, interval_ms)
            .read_only(session)
            .build()
    }

    /// The stages in their first state (for [`EngineBuilder::build`]).
    fn bare(shared: SharedMonitor, record: RecordTo, interval_ms: u64) -> Self {
        Self {
            shared,
            enrich: Enrich::default(),
            recorder: Recorder::new(record, interval_ms),
            watches: Watches::default(),
            rules: Rules::default(),
            alerting: Alerting::default(),
            read_only: false,
            session: None,
            history_by_source: false,
            late_replies: Vec::new(),
        }
    }

    fn make_read_only(&mut self, session: Option<PathBuf>, history_by_source: bool) {
        self.read_only = true;
        self.session = session;
        self.history_by_source = history_by_source;
    }

    /// Takes the events a recorded source gives ([`crate::source::GpuSource::recorded_events`]):
    /// its leak episodes and OOM suspicions join the monitor's, named with the session file.
    pub fn take_recorded_events(&mut self, events: Vec<Event>) {
        if !events.is_empty() {
            publish::recorded_events(&self.shared, &events, self.session.as_deref());
        }
    }

    /// A sample that could not be taken: the source's last error until the next good one
    /// (the window shows it and the data goes stale; nothing is recorded as zero).
    pub fn sample_failed(&mut self, e: &crate::source::SourceError) {
        publish::sample_failed(&self.shared, e);
    }

    /// Why the session log could not be written, as the recording status this engine
    /// published says: when it could not be created at all
    /// ([`view::RecordingStatus::could_not_start`]), or, with `strict`, when the last sample
    /// could not be written either. None while all is well.
    pub fn recording_failed(&self, strict: bool) -> Option<String> {
        let m = self.shared.read().ok()?;
        let r = &m.recording;
        if strict {
            r.error.clone()
        } else {
            r.could_not_start().map(str::to_string)
        }
    }

    /// Sets what the front end wants (the alert subscriber, the folder to prune).
    pub fn set_options(&mut self, options: EngineOptions) {
        self.alerting.sink = options.alerts;
        self.recorder.retention_dir = options.retention_dir;
    }

    /// True when an enabled rule needs per-process utilisation (an idle condition).
    pub fn needs_process_utilization(&self) -> bool {
        self.rules.needs_process_utilization()
    }

    /// Applies settings: rules, protections, global dry run, leak sensitivity, notifications.
    pub fn apply_settings(&mut self, s: &crate::engine::settings::Settings) {
        self.recorder.retention = (
            s.sessions.retention_days,
            s.sessions.retention_max_mib.saturating_mul(1 << 20),
        );
        self.watches.apply_settings(s);
        self.alerting.leaks = s.notifications.leaks;
        self.alerting.rules = s.notifications.rules;
        self.rules.apply_settings(s);
    }

    /// Writes activity entries to the log and shows them in the monitor (outside a tick).
    fn log_activity(&mut self, acts: Vec<crate::act::rules::action::Activity>) {
        self.recorder.activity(&acts);
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
                Ok(m) => command::test_rule_answer(rule, &m, &safety),
                Err(_) => command::Answer::new(Outcome::Failed, "the engine's state is lost"),
            };
        }
        if self.read_only {
            if let EngineCommand::Manual { key, action } = c {
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
            EngineCommand::Manual { key, action } => return self.manual(id, key, action, now),
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
    /// acted on.
    fn manual(
        &mut self,
        id: command::CommandId,
        key: crate::model::history::ProcSeriesKey,
        action: crate::act::rules::Action,
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
        let p = crate::act::rules::eval::Planned {
            rule: "manual".into(),
            action,
            dry_run: false,
            allow_other_users: true,
            target,
        };
        let safety = crate::act::rules::action::Safety {
            global_dry_run: false,
            protected: self.rules.safety.protected.clone(),
        };
        let a = self.rules.runner.run(&p, &safety, now);
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
            return publish::replayed(&self.shared, snap, received_ms, self.history_by_source);
        }
        let now = snap.taken_at_ms;
        let mut out = self.alerting.outbox();
        // Enrich.
        let enrich = cost::span(Part::Enrich);
        self.enrich.carry_stale(&mut snap, &self.shared);
        self.rules.annotate_parked(&mut snap);
        self.enrich.run(&mut snap);
        drop(enrich);
        // Watches: leaks, OOMs, the forecast, orphans.
        let watches = cost::span(Part::Watches);
        let watched = self.watches.observe(&mut snap, &mut out);
        drop(watches);
        // Rules: pure decisions, then the runner (the only code that signals).
        let rules = cost::span(Part::Rules);
        let alerts: Vec<u32> = self
            .watches
            .forecast_alerts()
            .iter()
            .map(|a| a.device_index)
            .collect();
        let acts = self
            .rules
            .run(&snap, watched.leaking, &watched.growth, &alerts, now);
        let parks = self.rules.take_park_records(now);
        drop(rules);
        // The rules decided on the forecast as it is; the View shows it once it has stood
        // the alerts' hold (no card warns of a burst the banner stays quiet about).
        self.watches.hold_forecasts(&mut snap);
        // Record: the sample is final (enriched, its forecast as the View shows it), then the
        // tick's events, activity and parks.
        let record = cost::span(Part::Record);
        let mut error = self.recorder.sample(&snap, &mut out);
        if let Some(e) = self.recorder.events(&watched.events) {
            error = Some(e);
        }
        self.recorder.activity(&acts);
        for r in parks.iter().filter(|r| r.stranded) {
            out.report("A parked process lost its GPU memory", r.detail.clone());
        }
        self.recorder.parks(parks);
        drop(record);
        out.activity(&acts);
        let replies = self.rules.runner.take_concluded();
        self.late_replies.extend(replies.iter().cloned());
        // A loop that never takes them (a test's, a headless run's) keeps the newest only.
        let over = self
            .late_replies
            .len()
            .saturating_sub(command::REPLIES_KEPT);
        self.late_replies.drain(..over);
        // Publish: one write lock per tick, everything the UI reads changes at once.
        let _publish = cost::span(Part::Publish);
        let (events, orphans, watches) = (watched.events, watched.orphans, &self.watches);
        let previous = publish::tick(
            &self.shared,
            publish::Tick {
                snap,
                received_ms,
                acts,
                last_active: self.rules.last_active(),
                oom_alerts: self.watches.forecast_alerts(),
                guard: self.rules.guard_status(),
                recording: self.recorder.status(error),
                notices: out.notices,
                replies,
            },
            |m| watches.publish(m, &events, orphans),
        );
        self.alerting.deliver(out.alerts);
        previous
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
