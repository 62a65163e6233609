//! Record: each enriched sample, and the tick's events and activity, appended to the session
//! log; a failed write is counted in a gap (reported once, closed with a `recording` event when
//! writing works again); the sessions folder kept within the retention limits.

use std::path::PathBuf;

use super::outbox::Outbox;
use crate::engine::events::EngineEventKind;
use crate::engine::view::RecordingStatus;
use crate::model::{Snapshot, SourceInfo, UnixMs};
use crate::session::writer::{session_file_name, SessionWriter};
use crate::session::{Event, Header, HeaderDevice, FORMAT_VERSION};

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

/// How often the sessions folder is pruned while a run goes on.
pub(crate) const PRUNE_EVERY_MS: UnixMs = 3_600_000;

/// Samples that could not be written, while writing keeps failing.
#[derive(Debug, Clone)]
struct Gap {
    from_ms: UnixMs,
    to_ms: UnixMs,
    lost: u64,
    cause: String,
}

/// The session log of a run: the record stage.
pub(crate) struct Recorder {
    to: RecordTo,
    writer: Option<SessionWriter>,
    paused: bool,
    /// What the source is (the session header).
    pub source: Option<SourceInfo>,
    interval_ms: u64,
    /// Days and bytes the sessions folder is kept within.
    pub retention: (u32, u64),
    /// The folder kept within them; `None`: no pruning.
    pub retention_dir: Option<PathBuf>,
    last_prune_ms: Option<UnixMs>,
    gap: Option<Gap>,
    lost: u64,
}

impl Recorder {
    /// A recorder writing as `to` says, for samples `interval_ms` apart.
    pub(crate) fn new(to: RecordTo, interval_ms: u64) -> Self {
        Self {
            to,
            writer: None,
            paused: false,
            source: None,
            interval_ms,
            retention: (0, 0),
            retention_dir: None,
            last_prune_ms: None,
            gap: None,
            lost: 0,
        }
    }

    /// Writes `snap` (opening the log with the first one); prunes the folder when due. The
    /// error to show as the recording status, if any.
    pub(crate) fn sample(&mut self, snap: &Snapshot, out: &mut Outbox) -> Option<String> {
        let mut error = None;
        let now = snap.taken_at_ms;
        if self.to != RecordTo::Off && !self.paused {
            if self.writer.is_none() {
                if let Err(e) = self.open_writer(snap) {
                    error = Some(format!("Recording failed: {e}"));
                }
            }
            if let Some(w) = &mut self.writer {
                match w.write_snapshot(snap) {
                    Ok(()) => {
                        if let Err(e) = self.write_resumed(now, out) {
                            error = Some(format!("Recording failed: {e}"));
                        }
                    }
                    Err(e) => {
                        error = Some(format!("Recording failed: {e}"));
                        self.write_failed(now, e.to_string(), out);
                    }
                }
            }
        }
        if self.writer.is_some() || self.to == RecordTo::Off {
            self.prune_if_due(now);
        }
        error
    }

    /// Writes `events`; the error of the last write that failed.
    pub(crate) fn events(&mut self, events: &[Event]) -> Option<String> {
        let mut error = None;
        for e in events {
            if let Some(w) = self.writer.as_mut().filter(|_| !self.paused) {
                if let Err(err) = w.write_event(e) {
                    error = Some(format!("Recording failed: {err}"));
                }
            }
        }
        error
    }

    /// Writes activity entries as events.
    pub(crate) fn activity(&mut self, acts: &[crate::act::rules::action::Activity]) {
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

    /// Writes the parks and resumes that ended, with their figures.
    pub(crate) fn parks(&mut self, records: Vec<crate::act::rules::park_action::ParkRecord>) {
        for r in records {
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

    /// Pauses (`active` false) or resumes writing samples, with a `recording` event; false
    /// when it already was so.
    pub(crate) fn set_active(&mut self, active: bool, now: UnixMs) -> bool {
        if self.paused != active {
            return false;
        }
        self.paused = !active;
        if let Some(w) = &mut self.writer {
            let _ = w.write_event(&Event::Recording {
                unix_ms: now,
                active,
                gap: None,
            });
        }
        true
    }

    /// The recording status to publish, with `error` as its last error.
    pub(crate) fn status(&self, error: Option<String>) -> RecordingStatus {
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

    /// Makes `shown` (the View's) equal [`Recorder::status`]`(error)`: the path is copied
    /// only when it changed.
    pub(crate) fn show_status(&self, error: Option<String>, shown: &mut RecordingStatus) {
        let path = self.writer.as_ref().map(SessionWriter::path);
        // Every field named: one added later is not left behind.
        let RecordingStatus {
            path: shown_path,
            active,
            bytes,
            error: shown_error,
            samples,
            lost,
        } = shown;
        if shown_path.as_deref() != path {
            *shown_path = path.map(std::path::Path::to_path_buf);
        }
        *active = self.writer.is_some() && !self.paused;
        *bytes = self.writer.as_ref().map_or(0, SessionWriter::bytes_written);
        *shown_error = error;
        *samples = self
            .writer
            .as_ref()
            .map_or(0, SessionWriter::samples_written);
        *lost = self.lost;
    }

    /// Closes the log (fsync): its path, if one was written.
    ///
    /// # Errors
    /// The message of a failed final fsync.
    pub(crate) fn finish(&mut self) -> Result<Option<PathBuf>, String> {
        match self.writer.take() {
            Some(w) => {
                let p = w.path().to_path_buf();
                w.close().map_err(|e| e.to_string())?;
                Ok(Some(p))
            }
            None => Ok(None),
        }
    }

    fn candidates(&self, snap: &Snapshot) -> Vec<PathBuf> {
        // In a folder, two instances started in the same second get `NAME-2.vwlog`, ….
        match &self.to {
            RecordTo::Off => Vec::new(),
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
        }
    }

    fn header(&self, snap: &Snapshot) -> Header {
        let src = self.source.clone().unwrap_or_default();
        Header {
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
        }
    }

    fn open_writer(&mut self, snap: &Snapshot) -> Result<(), String> {
        let candidates = self.candidates(snap);
        if candidates.is_empty() {
            return Ok(());
        }
        let header = self.header(snap);
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

    /// A failed write: the first one of a gap is reported, the rest counted.
    fn write_failed(&mut self, now: UnixMs, cause: String, out: &mut Outbox) {
        self.lost += 1;
        match &mut self.gap {
            Some(g) => {
                g.to_ms = now;
                g.lost += 1;
            }
            None => {
                out.event(
                    now,
                    EngineEventKind::RecordingFailed {
                        cause: cause.clone(),
                    },
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
    fn write_resumed(&mut self, now: UnixMs, out: &mut Outbox) -> Result<(), String> {
        let Some(g) = self.gap.take() else {
            return Ok(());
        };
        let gap = crate::session::RecordingGap {
            from_ms: g.from_ms,
            to_ms: g.to_ms,
            lost_samples: g.lost,
            cause: g.cause.clone(),
        };
        out.event(now, EngineEventKind::RecordingResumed { gap: gap.clone() });
        let e = Event::Recording {
            unix_ms: now,
            active: true,
            gap: Some(gap),
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
        let Some(dir) = self.retention_dir.clone() else {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status shown in place equals the status made afresh: before the log exists, while
    /// it is written, with an error, from a stale status of another file.
    #[test]
    fn the_status_shown_in_place_equals_the_status() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut r = Recorder::new(RecordTo::File(dir.path().join("s.vwlog")), 1000);
        let mut shown = RecordingStatus {
            path: Some(dir.path().join("other.vwlog")),
            error: Some("stale".into()),
            samples: 99,
            ..RecordingStatus::default()
        };
        r.show_status(None, &mut shown);
        assert_eq!(shown, r.status(None));
        let mut out = crate::engine::stages::outbox::Outbox::default();
        for i in 0..3 {
            let snap = Snapshot {
                taken_at_ms: 1_000 * (i + 1),
                ..Snapshot::default()
            };
            assert_eq!(r.sample(&snap, &mut out), None);
            let error = (i == 1).then(|| "Recording failed: disk full".to_string());
            r.show_status(error.clone(), &mut shown);
            assert_eq!(shown, r.status(error), "sample {i}");
        }
        assert_eq!((shown.samples, shown.active), (3, true));
    }
}
