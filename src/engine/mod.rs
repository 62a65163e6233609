//! The per-tick pipeline shared by every front end: enrich the snapshot from `/proc`, write it
//! to the session log, apply it to the monitor the UI reads.

pub mod headless;
pub mod import;
pub mod leak_watch;
pub mod replay;
pub mod sampler;
pub mod settings;
pub mod shared;
pub mod tick_loop;
pub mod view;

use std::path::PathBuf;

use crate::engine::shared::SharedMonitor;
use crate::engine::view::RecordingStatus;
use crate::host::procinfo::enrich;
use crate::host::procinfo::ProcReader;
use crate::model::{Snapshot, SourceInfo, UnixMs};
use crate::session::writer::{session_file_name, SessionWriter};
use crate::session::{Event, Header, HeaderDevice, FORMAT_VERSION};

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

/// Where and whether the run is recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordTo {
    /// Not recorded.
    Off,
    /// A new file named by start time and host in this folder.
    Dir(PathBuf),
    /// Exactly this file.
    File(PathBuf),
}

/// How a front end wants the engine to behave beyond the settings file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineOptions {
    /// Desktop notifications (the window); headless front ends report on stderr only.
    pub desktop_notifications: bool,
    /// The sessions folder to keep within the retention limits of the settings (the window
    /// and `record` into the default folder); `None`: no pruning.
    pub retention_dir: Option<PathBuf>,
}

/// How often the sessions folder is pruned while a run goes on.
pub const PRUNE_EVERY_MS: UnixMs = 3_600_000;

/// Samples that could not be written, while writing keeps failing.
#[derive(Debug, Clone)]
struct Gap {
    from_ms: UnixMs,
    to_ms: UnixMs,
    lost: u64,
    cause: String,
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
}

/// The pipeline state owned by the sampler thread (or the `record` loop).
pub struct Engine {
    shared: SharedMonitor,
    procs: ProcReader,
    record: RecordTo,
    writer: Option<SessionWriter>,
    paused: bool,
    source: Option<SourceInfo>,
    interval_ms: u64,
    leaks: crate::engine::leak_watch::LeakWatch,
    ooms: crate::detect::oom_watch::OomWatch,
    /// The OOM forecast as an alert.
    forecasts: crate::detect::forecast_alert::ForecastWatch,
    orphans: crate::detect::orphans::OrphanWatch,
    usage: crate::host::proc_usage::ProcUsage,
    /// The PyTorch companions' poller, started with the first live process.
    torch: Option<crate::act::torch::Watch>,
    notify_leaks: bool,
    notify_rules: bool,
    rules: Vec<crate::act::rules::eval::CompiledRule>,
    safety: crate::act::rules::action::Safety,
    rule_state: crate::act::rules::eval::RuleState,
    runner: crate::act::rules::action::ActionRunner,
    options: EngineOptions,
    retention: (u32, u64),
    last_prune_ms: Option<UnixMs>,
    gap: Option<Gap>,
    lost: u64,
    /// A recorded session's engine: see [`Engine::read_only`].
    read_only: bool,
    /// The session file a read-only engine replays (named on its leak and OOM records).
    session: Option<PathBuf>,
}

/// Shows `msg` in the window's status bar (the monitor keeps the last 20 notices).
fn push_notice(shared: &SharedMonitor, msg: String) {
    if let Ok(mut m) = shared.write() {
        m.notices.push_back((crate::model::now_ms(), msg));
        while m.notices.len() > 20 {
            m.notices.pop_front();
        }
    }
}

/// Most activity entries the monitor keeps.
pub const ACTIVITY_KEPT: usize = 1000;

fn push_activity(
    m: &mut crate::engine::view::Monitor,
    acts: Vec<crate::act::rules::action::Activity>,
) {
    m.activity.extend(acts);
    while m.activity.len() > ACTIVITY_KEPT {
        m.activity.pop_front();
    }
}

impl Engine {
    /// An engine writing into `shared`, recording as `record` says.
    pub fn new(shared: SharedMonitor, record: RecordTo, interval_ms: u64) -> Self {
        Self {
            shared,
            procs: ProcReader::default(),
            record,
            writer: None,
            paused: false,
            source: None,
            interval_ms,
            leaks: crate::engine::leak_watch::LeakWatch::default(),
            ooms: crate::detect::oom_watch::OomWatch::default(),
            forecasts: crate::detect::forecast_alert::ForecastWatch::new(
                crate::detect::forecast_alert::DEFAULT_MINUTES,
            ),
            orphans: crate::detect::orphans::OrphanWatch::default(),
            usage: crate::host::proc_usage::ProcUsage::default(),
            torch: None,
            notify_leaks: false,
            notify_rules: false,
            rules: Vec::new(),
            safety: crate::act::rules::action::Safety::default(),
            rule_state: crate::act::rules::eval::RuleState::default(),
            runner: crate::act::rules::action::ActionRunner::new(),
            options: EngineOptions::default(),
            retention: (0, 0),
            last_prune_ms: None,
            gap: None,
            lost: 0,
            read_only: false,
            session: None,
        }
    }

    /// An engine for a recorded session (`session`, the file it comes from): each sample is
    /// applied to the monitor as it was recorded, and the session's own leak and OOM events
    /// are taken as they come ([`Engine::take_recorded_events`]). Nothing is enriched from this
    /// machine, detected again, written or acted on: no rules run, and a manual action is
    /// refused.
    pub fn read_only(shared: SharedMonitor, interval_ms: u64, session: Option<PathBuf>) -> Self {
        let mut e = Self::new(shared, RecordTo::Off, interval_ms);
        e.read_only = true;
        e.session = session;
        e
    }

    /// Takes the events a recorded source gives ([`crate::source::GpuSource::recorded_events`]):
    /// its leak episodes and OOM suspicions join the monitor's, named with the session file.
    pub fn take_recorded_events(&mut self, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        if let Ok(mut m) = self.shared.write() {
            for e in &events {
                crate::engine::leak_watch::record_event(&mut m, e, self.session.as_deref());
            }
        }
    }

    /// A sample that could not be taken: the source's last error until the next good one
    /// (the window shows it and the data goes stale; nothing is recorded as zero).
    pub fn sample_failed(&mut self, e: &crate::source::SourceError) {
        if let Ok(mut m) = self.shared.write() {
            m.last_error = Some(e.to_string());
        }
    }

    /// Why the session log could not be written, as the recording status this engine
    /// published says: when it could not be created at all
    /// ([`RecordingStatus::could_not_start`]), or, with `strict`, when the last sample could
    /// not be written either. None while all is well.
    pub fn recording_failed(&self, strict: bool) -> Option<String> {
        let m = self.shared.read().ok()?;
        let r = &m.recording;
        if strict {
            r.error.clone()
        } else {
            r.could_not_start().map(str::to_string)
        }
    }

    /// Sets what the front end wants (notifications, the folder to prune).
    pub fn set_options(&mut self, options: EngineOptions) {
        self.options = options;
    }

    /// True when an enabled rule needs per-process utilisation (an idle condition).
    pub fn needs_process_utilization(&self) -> bool {
        self.rules
            .iter()
            .any(|r| r.rule.enabled && r.rule.conditions.idle_min_minutes.is_some())
    }

    /// Applies settings: rules, protections, global dry run, leak sensitivity, notifications.
    pub fn apply_settings(&mut self, s: &crate::engine::settings::Settings) {
        self.retention = (
            s.sessions.retention_days,
            s.sessions.retention_max_mib.saturating_mul(1 << 20),
        );
        self.leaks.set_settings(s.leaks);
        self.notify_leaks = s.notifications.leaks;
        self.notify_rules = s.notifications.rules;
        self.forecasts
            .set_minutes(s.notifications.oom_forecast_minutes.clamp(0.0, 1440.0));
        // Compiled once here, never per tick.
        self.rules = crate::act::rules::eval::compile(&s.cleanup.rules);
        self.safety = crate::act::rules::action::Safety {
            global_dry_run: s.cleanup.dry_run,
            protected: s.cleanup.protected.clone(),
        };
    }

    /// Writes activity entries to the session log as events.
    fn write_activity(&mut self, acts: &[crate::act::rules::action::Activity]) {
        for a in acts {
            let (pid, name, user) = match &a.target {
                t @ crate::act::rules::eval::Target::Process { key, .. } => {
                    (key.0.pid, t.name().to_string(), t.user().to_string())
                }
                crate::act::rules::eval::Target::Device(_) => (0, String::new(), String::new()),
            };
            let e = Event::Activity {
                unix_ms: a.unix_ms,
                rule: a.rule.clone(),
                pid,
                device_index: a.target.device_index(),
                name,
                user,
                action: a.action.clone(),
                outcome: a.outcome,
                detail: a.detail.clone(),
            };
            if let Some(w) = self.writer.as_mut().filter(|_| !self.paused) {
                let _ = w.write_event(&e);
            }
        }
    }

    /// Writes the parks and resumes that ended to the session log, with their figures.
    fn write_park_records(&mut self) {
        for r in self.runner.take_park_records() {
            let e = Event::Park {
                unix_ms: r.unix_ms,
                pid: r.key.0.pid,
                start_time_ms: r.key.0.start_time_ms,
                device_index: r.key.1,
                name: r.name,
                action: match r.kind {
                    crate::act::rules::park_action::ParkKind::Park => "park".into(),
                    crate::act::rules::park_action::ParkKind::Resume => "resume".into(),
                },
                bytes: r.bytes,
                seconds: r.seconds,
                ok: r.ok,
                detail: r.detail,
            };
            if let Some(w) = self.writer.as_mut().filter(|_| !self.paused) {
                let _ = w.write_event(&e);
            }
        }
    }

    /// A desktop notification and a status-bar notice for each OOM forecast raised.
    fn announce_forecasts(&self, events: &[Event]) {
        for e in events {
            let Event::OomForecast {
                device_index,
                full_in_s,
                drivers,
                ..
            } = e
            else {
                continue;
            };
            let who = drivers
                .iter()
                .map(|d| format!("{} (PID {})", d.name, d.pid))
                .collect::<Vec<_>>()
                .join(", ");
            let body = format!(
                "GPU {device_index} is forecast full in {:.1} min at the rate {} grows",
                full_in_s / 60.0,
                if who.is_empty() {
                    "its memory".to_string()
                } else {
                    who
                }
            );
            self.notice(&format!("GPU {device_index} will run out of memory"), body);
        }
    }

    /// Writes activity entries to the log and shows them in the monitor (outside a tick).
    fn log_activity(&mut self, acts: Vec<crate::act::rules::action::Activity>) {
        self.write_activity(&acts);
        if let Ok(mut m) = self.shared.write() {
            push_activity(&mut m, acts);
        }
    }

    /// Logs a manual action on `key` that was not carried out, and why. The process is named
    /// with the facts of its table row, if any.
    fn manual_skipped(
        &mut self,
        key: crate::model::history::ProcSeriesKey,
        action: &crate::act::rules::Action,
        now: UnixMs,
        why: &str,
    ) {
        let info = self
            .shared
            .read()
            .ok()
            .and_then(|m| m.row(&key).map(|r| r.info.clone()));
        self.log_activity(vec![crate::act::rules::action::Activity {
            unix_ms: now,
            rule: "manual".into(),
            action: action.label(),
            target: crate::act::rules::eval::Target::Process {
                key,
                info,
                used_bytes: None,
                origin: crate::model::Origin::Recorded,
            },
            outcome: crate::act::rules::action::Outcome::Skipped,
            detail: why.into(),
            entry: crate::act::rules::action::Entry::Action,
        }]);
    }

    /// Records what the source is (for the monitor and the session header).
    pub fn set_source(&mut self, info: SourceInfo) {
        if let Ok(mut m) = self.shared.write() {
            m.source = Some(info.clone());
        }
        self.source = Some(info);
    }

    /// Applies a front end's request.
    pub fn command(&mut self, c: EngineCommand, now: UnixMs) {
        if self.read_only {
            if let EngineCommand::Manual { key, action } = c {
                self.manual_skipped(
                    key,
                    &action,
                    now,
                    "a recorded session: nothing acts from a replay",
                );
            }
            return;
        }
        let active = match c {
            EngineCommand::PauseRecording => false,
            EngineCommand::ResumeRecording => true,
            EngineCommand::ApplySettings(s) => {
                self.apply_settings(&s);
                return;
            }
            EngineCommand::Manual { key, action } => {
                // The engine builds the target from its own latest snapshot (a front end only
                // names the process); a process no longer listed is not acted on.
                let current = self.shared.read().ok().and_then(|m| {
                    m.latest
                        .as_ref()
                        .and_then(|s| crate::act::rules::eval::find_process_target(s, &key))
                });
                let Some(target) = current else {
                    self.manual_skipped(
                        key,
                        &action,
                        now,
                        "the process is no longer listed on that GPU",
                    );
                    return;
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
                    protected: self.safety.protected.clone(),
                };
                let a = self.runner.run(&p, &safety, now);
                self.log_activity(vec![a]);
                return;
            }
        };
        if self.paused != active {
            return;
        }
        self.paused = !active;
        if let Some(w) = &mut self.writer {
            let _ = w.write_event(&Event::Recording {
                unix_ms: now,
                active,
                gap: None,
            });
        }
        self.publish_recording(None);
    }

    fn open_writer(&mut self, snap: &Snapshot) -> Result<(), String> {
        // In a folder, two instances started in the same second get `NAME-2.vwlog`, ….
        let candidates: Vec<PathBuf> = match &self.record {
            RecordTo::Off => return Ok(()),
            RecordTo::File(p) => vec![p.clone()],
            RecordTo::Dir(d) => {
                let name = session_file_name(
                    snap.taken_at_ms,
                    &self
                        .source
                        .as_ref()
                        .map_or_else(crate::source::host_name, |s| s.host.clone()),
                );
                let stem = name
                    .strip_suffix(&format!(".{}", crate::session::EXTENSION))
                    .unwrap_or(&name)
                    .to_string();
                std::iter::once(d.join(&name))
                    .chain(
                        (2..100)
                            .map(|i| d.join(format!("{stem}-{i}.{}", crate::session::EXTENSION))),
                    )
                    .collect()
            }
        };
        let src = self.source.clone().unwrap_or_default();
        let header = Header {
            format_version: FORMAT_VERSION,
            app_version: env!("CARGO_PKG_VERSION").into(),
            host: src.host.clone(),
            source: src.kind.clone(),
            driver_version: src.driver_version.clone(),
            nvml_version: src.nvml_version.clone(),
            started_ms: snap.taken_at_ms,
            interval_ms: self.interval_ms,
            devices: snap
                .devices
                .iter()
                .map(|d| HeaderDevice {
                    index: d.index,
                    uuid: d.uuid.clone(),
                    name: d.name.clone(),
                    memory_total_bytes: d.memory_total_bytes,
                    pci_bus_id: d.pci_bus_id.clone(),
                })
                .collect(),
        };
        let mut last = None;
        for path in &candidates {
            match SessionWriter::create(path, &header) {
                Ok(w) => {
                    self.writer = Some(w);
                    return Ok(());
                }
                Err(e) if e.is_already_exists() && candidates.len() > 1 => last = Some(e),
                Err(e) => return Err(e.to_string()),
            }
        }
        Err(last.map_or_else(|| "no file name left".into(), |e| e.to_string()))
    }

    fn recording_status(&self, error: Option<String>) -> RecordingStatus {
        RecordingStatus {
            path: self.writer.as_ref().map(|w| w.path().to_path_buf()),
            active: self.writer.is_some() && !self.paused,
            bytes: self.writer.as_ref().map_or(0, SessionWriter::bytes_written),
            error,
            samples: self
                .writer
                .as_ref()
                .map_or(0, SessionWriter::samples_written),
            lost: self.lost,
        }
    }

    /// Reports a message where the front end shows them: stderr always, the window's status
    /// bar (the monitor's notices), and a desktop notification when the front end wants them.
    fn report(&self, summary: &str, body: String) {
        eprintln!("vramwarden: {body}");
        self.notice(summary, body);
    }

    /// Shows `body` in the status bar and, where wanted, as a desktop notification.
    fn notice(&self, summary: &str, body: String) {
        push_notice(&self.shared, body.clone());
        if self.options.desktop_notifications {
            let shared = self.shared.clone();
            crate::host::notify::send(summary.into(), body, move |msg| push_notice(&shared, msg));
        }
    }

    /// A failed write: the first one of a gap is reported, the rest counted.
    fn write_failed(&mut self, now: UnixMs, cause: String) {
        self.lost += 1;
        match &mut self.gap {
            Some(g) => {
                g.to_ms = now;
                g.lost += 1;
            }
            None => {
                self.report(
                    "Recording failed",
                    format!("recording failed, retrying every sample: {cause}"),
                );
                self.gap = Some(Gap {
                    from_ms: now,
                    to_ms: now,
                    lost: 1,
                    cause,
                });
            }
        }
    }

    /// A write succeeded: a gap before it is closed with a `recording` event naming it.
    fn write_resumed(&mut self, now: UnixMs) -> Result<(), String> {
        let Some(g) = self.gap.take() else {
            return Ok(());
        };
        self.report(
            "Recording resumed",
            format!(
                "recording resumed; {} sample(s) were not written: {}",
                g.lost, g.cause
            ),
        );
        let e = Event::Recording {
            unix_ms: now,
            active: true,
            gap: Some(crate::session::RecordingGap {
                from_ms: g.from_ms,
                to_ms: g.to_ms,
                lost_samples: g.lost,
                cause: g.cause.clone(),
            }),
        };
        match self.writer.as_mut().map(|w| w.write_event(&e)) {
            Some(Err(err)) => {
                // Keep the gap open: the event is written with the next good sample.
                self.gap = Some(g);
                Err(err.to_string())
            }
            _ => Ok(()),
        }
    }

    /// Keeps the sessions folder within the retention limits (never the log being written,
    /// nor any log another instance holds open).
    fn prune_if_due(&mut self, now: UnixMs) {
        let Some(dir) = self.options.retention_dir.clone() else {
            return;
        };
        if self
            .last_prune_ms
            .is_some_and(|t| (now - t).abs() < PRUNE_EVERY_MS)
        {
            return;
        }
        self.last_prune_ms = Some(now);
        let keep = self.writer.as_ref().map(|w| w.path().to_path_buf());
        let removed = crate::session::catalog::prune(
            &dir,
            self.retention.0,
            self.retention.1,
            crate::model::now_ms(),
            keep.as_deref(),
        );
        if !removed.is_empty() {
            eprintln!(
                "vramwarden: retention removed {} old session log(s) from {}",
                removed.len(),
                dir.display()
            );
        }
    }

    fn publish_recording(&self, error: Option<String>) {
        let status = self.recording_status(error);
        if let Ok(mut m) = self.shared.write() {
            m.recording = status;
        }
    }

    /// One tick: enrich, record, apply. Returns the sample this one replaced as the latest
    /// (see [`crate::source::GpuSource::give_back`]).
    pub fn tick(&mut self, mut snap: Snapshot, received_ms: UnixMs) -> Option<Snapshot> {
        snap.sanitize();
        if self.read_only {
            return self
                .shared
                .write()
                .ok()
                .and_then(|mut m| m.apply(snap, received_ms));
        }
        self.carry_stale(&mut snap);
        self.runner.annotate_parked(&mut snap);
        enrich(&mut snap, &mut self.procs);
        self.usage.sample(&mut snap);
        self.attach_torch(&mut snap);
        let mut error = None;
        let now = snap.taken_at_ms;
        if self.record != RecordTo::Off && !self.paused {
            if self.writer.is_none() {
                if let Err(e) = self.open_writer(&snap) {
                    error = Some(format!("Recording failed: {e}"));
                }
            }
            if let Some(w) = &mut self.writer {
                match w.write_snapshot(&snap) {
                    Ok(()) => {
                        if let Err(e) = self.write_resumed(now) {
                            error = Some(format!("Recording failed: {e}"));
                        }
                    }
                    Err(e) => {
                        error = Some(format!("Recording failed: {e}"));
                        self.write_failed(now, e.to_string());
                    }
                }
            }
        }
        if self.writer.is_some() || self.record == RecordTo::Off {
            self.prune_if_due(now);
        }
        let mut leak_events = self.leaks.observe(&snap);
        self.leaks.forecast(&mut snap);
        leak_events.extend(self.ooms.observe(&snap));
        let leaking = self.leaks.leaking_since();
        // The forecast counts every growing series (a leak, a load, a ramp): so do its drivers.
        let (leaks, leaking_ref) = (&self.leaks, &leaking);
        let growing = || {
            let mut keys: std::collections::HashSet<crate::model::history::ProcSeriesKey> =
                leaking_ref.keys().copied().collect();
            keys.extend(leaks.growing().filter_map(|(k, _)| match k {
                crate::engine::view::LeakKey::Process(p) => Some(p),
                crate::engine::view::LeakKey::Ghost(_) => None,
            }));
            keys
        };
        let forecast_events = self.forecasts.observe(&snap, &growing);
        self.announce_forecasts(&forecast_events);
        leak_events.extend(forecast_events);
        let (orphans, orphan_alerts) = self.orphans.observe(&snap);
        for a in orphan_alerts {
            self.report("GPU memory held by processes not running here", a);
        }
        for e in &leak_events {
            if let Some(w) = self.writer.as_mut().filter(|_| !self.paused) {
                if let Err(err) = w.write_event(e) {
                    error = Some(format!("Recording failed: {err}"));
                }
            }
            if let (true, crate::session::Event::LeakStarted { leak, .. }) =
                (self.notify_leaks && self.options.desktop_notifications, e)
            {
                let shared = self.shared.clone();
                let what = if leak.ghost {
                    format!("GPU {} ghost memory", leak.device_index)
                } else {
                    format!(
                        "{} (PID {}) on GPU {}",
                        leak.name, leak.pid, leak.device_index
                    )
                };
                crate::host::notify::send_replacing(
                    what.clone(),
                    crate::host::notify::Urgency::Critical,
                    "GPU memory leak suspected".into(),
                    format!("{what} is growing at {:.0} MiB/min", leak.rate_mib_per_min),
                    move |msg| push_notice(&shared, msg),
                );
            }
            if let (
                true,
                crate::session::Event::OomSuspected {
                    device_index,
                    used_pct,
                    victims,
                    holders,
                    ..
                },
            ) = (self.notify_leaks && self.options.desktop_notifications, e)
            {
                let shared = self.shared.clone();
                crate::host::notify::send(
                    format!("GPU {device_index}: a process may have run out of memory"),
                    crate::session::describe_oom(*used_pct, victims, holders),
                    move |msg| push_notice(&shared, msg),
                );
            }
        }
        // Rules: pure decisions, then the runner (the only code that signals).
        self.rule_state.observe(&snap);
        self.rule_state
            .set_releasable_cache(crate::act::rules::eval::releasable_cache_of(&snap));
        let facts = crate::act::rules::eval::Facts {
            leaking_since: leaking,
        };
        let planned = if self.rules.is_empty() {
            Vec::new()
        } else {
            self.rule_state.evaluate(&self.rules, &snap, &facts)
        };
        // The GPUs' sizes for memory limits, and the driver's figure after cache releases.
        let mut acts = self.runner.observe(&snap);
        acts.extend(
            planned
                .iter()
                .map(|p| self.runner.run(p, &self.safety, now)),
        );
        let holds = |k: &crate::model::history::ProcSeriesKey| {
            snap.processes.iter().any(|p| {
                p.key() == k.0 && p.device_index == k.1 && p.used_bytes.is_some_and(|u| u > 0)
            })
        };
        acts.extend(self.runner.poll(&holds, now));
        self.write_activity(&acts);
        self.write_park_records();
        if self.notify_rules && self.options.desktop_notifications {
            for a in acts
                .iter()
                .filter(|a| a.outcome == crate::act::rules::action::Outcome::Acted)
            {
                let shared = self.shared.clone();
                crate::host::notify::send(
                    format!("vramwarden rule “{}”", a.rule),
                    a.detail.clone(),
                    move |msg| push_notice(&shared, msg),
                );
            }
        }
        // One write lock per tick: everything the UI reads changes at once.
        let recording = self.recording_status(error);
        let mut m = self.shared.write().ok()?;
        for e in &leak_events {
            crate::engine::leak_watch::record_event(&mut m, e, None);
        }
        self.leaks.refresh(&mut m);
        m.orphans = orphans;
        push_activity(&mut m, acts);
        let previous = m.apply(snap, received_ms);
        m.last_active = self.rule_state.last_active();
        m.oom_alerts = self.forecasts.alerts();
        m.recording = recording;
        previous
    }

    /// PyTorch's figures for live processes whose companion answers (read from the poller's
    /// map: no socket I/O on the tick), matched to the GPU by uuid, or by being its only one.
    fn attach_torch(&mut self, snap: &mut Snapshot) {
        use crate::model::Origin;
        if !snap.processes.iter().any(|p| p.origin == Origin::Live) {
            return;
        }
        if self.torch.is_none() {
            self.torch =
                crate::act::torch::Watch::spawn(Vec::new(), std::time::Duration::from_secs(1)).ok();
        }
        let Some(w) = &self.torch else { return };
        for p in snap
            .processes
            .iter_mut()
            .filter(|p| p.origin == Origin::Live)
        {
            let Some(f) = w.get(p.pid, p.key().start_time_ms) else {
                continue;
            };
            let uuid = snap
                .devices
                .iter()
                .find(|d| d.index == p.device_index)
                .map(|d| d.uuid.as_str());
            let dev = f
                .devices
                .iter()
                .find(|d| d.uuid.is_some() && d.uuid.as_deref() == uuid)
                .or_else(|| (f.devices.len() == 1).then(|| &f.devices[0]));
            p.torch = dev.map(|d| crate::model::TorchMem {
                allocated_bytes: d.allocated_bytes,
                reserved_bytes: d.reserved_bytes,
                inactive_split_bytes: d.inactive_split_bytes,
                alloc_retries: d.num_alloc_retries,
                ooms: d.num_ooms,
                memory_fraction: d.memory_fraction,
                expandable_segments: f.expandable_segments,
            });
        }
    }

    /// For each GPU whose process list failed this time, the last good list stands: its
    /// processes are kept (so nothing "exits", no episode or hysteresis resets), marked stale,
    /// with their memory missing (never 0) in the history and the log.
    fn carry_stale(&self, snap: &mut Snapshot) {
        let failed: Vec<u32> = snap
            .devices
            .iter()
            .filter(|d| d.process_list_error.is_some())
            .map(|d| d.index)
            .collect();
        if failed.is_empty() {
            return;
        }
        snap.processes.retain(|p| !failed.contains(&p.device_index));
        let Ok(m) = self.shared.read() else {
            return;
        };
        let Some(prev) = &m.latest else {
            return;
        };
        snap.processes.extend(
            prev.processes
                .iter()
                .filter(|p| failed.contains(&p.device_index))
                .map(|p| crate::model::ProcessSample {
                    used_bytes: None,
                    sm_util_pct: None,
                    stale: true,
                    ..p.clone()
                }),
        );
    }

    /// Closes the session log (fsync); a read-only engine closes the leaks still open at the
    /// end of its session.
    ///
    /// # Errors
    /// The message of a failed final fsync.
    pub fn finish(mut self) -> Result<Option<PathBuf>, String> {
        if self.read_only {
            // A leak still growing when the recording stopped ended with it.
            if let Ok(mut m) = self.shared.write() {
                crate::engine::leak_watch::close_open_leaks(&mut m);
            }
        }
        match self.writer.take() {
            Some(w) => {
                let p = w.path().to_path_buf();
                w.close().map_err(|e| e.to_string())?;
                Ok(Some(p))
            }
            None => Ok(None),
        }
    }
}
