//! A recorded session as a source: each sample is the session's next recorded one (whatever
//! moment is asked for), its leak and OOM events come at their times through
//! [`GpuSource::recorded_events`], and it ends with [`SourceError::Ended`]. The engine that
//! takes it is read-only ([`crate::engine::Engine::read_only`]): it neither detects, records
//! nor acts; see [`crate::replay`].

use std::sync::mpsc::{Receiver, SyncSender};

use super::{GpuSource, SourceError};
use crate::model::{Snapshot, SourceInfo, UnixMs};
use crate::session::reader::SessionData;
use crate::session::Event;

/// Samples decoded ahead of the engine when decoding runs on a thread of its own.
pub const DECODED_AHEAD: usize = 256;

/// A session's samples, in time order, for an engine.
pub struct ReplaySource<'a> {
    data: &'a SessionData,
    samples: Samples<'a>,
    /// The memory events (leak started or ended, OOM suspected), in time order.
    events: std::iter::Peekable<std::vec::IntoIter<Event>>,
    given: usize,
}

/// Where the decoded samples come from.
enum Samples<'a> {
    /// Decoded here, one per call.
    Here(usize),
    /// Decoded by a thread ahead of the engine (see [`ReplaySource::decoded_by`]).
    Ahead(Receiver<Snapshot>, std::marker::PhantomData<&'a ()>),
}

impl<'a> ReplaySource<'a> {
    /// The session's samples, decoded on the engine's thread.
    pub fn new(data: &'a SessionData) -> Self {
        let mut events: Vec<Event> = data
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::LeakStarted { .. }
                        | Event::LeakEnded { .. }
                        | Event::OomSuspected { .. }
                )
            })
            .cloned()
            .collect();
        // Logs joined end to end keep their events in file order; the engine takes them in
        // time order (stable: a start and its end at the same moment stay in that order).
        events.sort_by_key(Event::unix_ms);
        Self {
            data,
            samples: Samples::Here(0),
            events: events.into_iter().peekable(),
            given: 0,
        }
    }

    /// The same, with the decoding done on a thread of `scope` up to [`DECODED_AHEAD`]
    /// samples ahead (a day of samples decodes in about as long as the engine takes them in,
    /// so on two cores this halves the time to replay). Falls back to decoding here if the
    /// thread cannot be started.
    pub fn decoded_by<'s>(data: &'a SessionData, scope: &'s std::thread::Scope<'s, 'a>) -> Self
    where
        'a: 's,
    {
        let mut me = Self::new(data);
        let (tx, rx): (SyncSender<Snapshot>, Receiver<Snapshot>) =
            std::sync::mpsc::sync_channel(DECODED_AHEAD);
        let spawned = std::thread::Builder::new()
            .name("vramwarden-replay-decode".into())
            .spawn_scoped(scope, move || {
                for s in data.snapshots() {
                    // The engine stopped (cancelled): so does the decoding.
                    if tx.send(s).is_err() {
                        break;
                    }
                }
            });
        if spawned.is_ok() {
            me.samples = Samples::Ahead(rx, std::marker::PhantomData);
        }
        me
    }

    /// The fraction of the session's samples handed out so far (0..=1).
    pub fn fraction(&self) -> f32 {
        match self.data.len() {
            0 => 1.0,
            n => self.given as f32 / n as f32,
        }
    }
}

impl GpuSource for ReplaySource<'_> {
    fn info(&self) -> SourceInfo {
        let h = self.data.header.as_ref();
        SourceInfo {
            kind: h.map_or("session".into(), |h| h.source.clone()),
            driver_version: h.and_then(|h| h.driver_version.clone()),
            nvml_version: h.and_then(|h| h.nvml_version.clone()),
            cuda_version: None,
            host: h.map_or(String::new(), |h| h.host.clone()),
        }
    }

    fn sample(&mut self, _now_ms: UnixMs) -> Result<Snapshot, SourceError> {
        let next = match &mut self.samples {
            Samples::Here(i) => {
                // A sample that no longer decodes is skipped, as the index was built from
                // samples that did.
                let mut found = None;
                while found.is_none() && *i < self.data.len() {
                    found = self.data.snapshot(*i);
                    *i += 1;
                }
                found
            }
            Samples::Ahead(rx, _) => rx.recv().ok(),
        };
        let snap = next.ok_or(SourceError::Ended)?;
        self.given += 1;
        Ok(snap)
    }

    fn recorded_events(&mut self, until: UnixMs) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(e) = self.events.next_if(|e| e.unix_ms() <= until) {
            out.push(e);
        }
        out
    }
}
