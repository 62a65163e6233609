//! A recorded session as a source: each sample is the session's next recorded one (whatever
//! moment is asked for), its leak and OOM events come at their times through
//! [`GpuSource::recorded_events`], and it ends with [`SourceError::Ended`]. The engine that
//! takes it is read-only ([`crate::engine::Engine::read_only`]): it neither detects, records
//! nor acts; see [`crate::engine::replay`].

use std::sync::mpsc::{Receiver, Sender, SyncSender};

use super::{GpuSource, SourceError};
use crate::model::{Snapshot, SourceInfo, UnixMs};
use crate::session::reader::SessionData;
use crate::session::Event;

/// Samples handed between the decoding thread and the engine at once (one wake-up per batch,
/// not per sample).
pub const BATCH: usize = 64;
/// Batches decoded ahead of the engine when decoding runs on a thread of its own.
pub const BATCHES_AHEAD: usize = 4;

/// Most given-back samples the decoding thread keeps to decode into again.
const SPARE_KEPT: usize = BATCH * (BATCHES_AHEAD + 2);

/// A session's samples, in time order, for an engine.
pub struct ReplaySource<'a> {
    data: &'a SessionData,
    samples: Samples,
    /// The memory events (leak started or ended, OOM suspected), in time order.
    events: std::iter::Peekable<std::vec::IntoIter<Event>>,
}

/// Where the decoded samples come from.
enum Samples {
    /// Decoded here, one per call; the next index.
    Here(usize),
    /// Decoded by a thread ahead of the engine (see [`ReplaySource::decoded_by`]), which
    /// also drops the samples the engine gives back.
    Ahead {
        decoded: Receiver<Result<Vec<Snapshot>, String>>,
        batch: std::vec::IntoIter<Snapshot>,
        used: Vec<Snapshot>,
        give_back: Sender<Vec<Snapshot>>,
    },
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
        }
    }

    /// The same, with the decoding done on a thread of `scope`, up to [`BATCHES_AHEAD`]
    /// batches ahead of the engine, so on two cores decoding and the engine overlap. The
    /// samples the engine is done with go back to that thread ([`GpuSource::give_back`]),
    /// which decodes the next ones into them ([`SessionData::snapshot_into`]): no allocation
    /// per sample, and the process facts they share are counted on one core only, mostly not
    /// at all. Decodes on the engine's thread if the thread cannot be started.
    pub fn decoded_by<'s>(data: &'a SessionData, scope: &'s std::thread::Scope<'s, 'a>) -> Self
    where
        'a: 's,
    {
        let mut me = Self::new(data);
        let (tx, decoded): (SyncSender<Result<Vec<Snapshot>, String>>, _) =
            std::sync::mpsc::sync_channel(BATCHES_AHEAD);
        let (give_back, returned) = std::sync::mpsc::channel::<Vec<Snapshot>>();
        let spawned = std::thread::Builder::new()
            .name("vramwarden-replay-decode".into())
            .spawn_scoped(scope, move || {
                let decode = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut batch = Vec::with_capacity(BATCH);
                    // Samples the engine gave back, decoded into again.
                    let mut spare: Vec<Snapshot> = Vec::new();
                    for i in 0..data.len() {
                        let mut s = spare.pop().unwrap_or_default();
                        if data.snapshot_into(i, &mut s) {
                            batch.push(s);
                        }
                        if batch.len() == BATCH || i + 1 == data.len() {
                            while let Ok(back) = returned.try_recv() {
                                if spare.len() < SPARE_KEPT {
                                    spare.extend(back);
                                }
                            }
                            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                            // The engine stopped (cancelled): so does the decoding.
                            if tx.send(Ok(full)).is_err() {
                                break;
                            }
                        }
                    }
                }));
                // A bug in decoding reaches the engine's thread, whose loop reports it; the
                // replay does not end as if the session were shorter.
                if let Err(p) = decode {
                    let _ = tx.send(Err(crate::host::logging::panic_text(p.as_ref())));
                }
                drop(tx);
                // Until the engine is done with the last of them.
                while returned.recv().is_ok() {}
            });
        if spawned.is_ok() {
            me.samples = Samples::Ahead {
                decoded,
                batch: Vec::new().into_iter(),
                used: Vec::with_capacity(BATCH),
                give_back,
            };
        }
        me
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
            Samples::Ahead { decoded, batch, .. } => match batch.next() {
                Some(s) => Some(s),
                None => match decoded.recv() {
                    Ok(Ok(next)) => {
                        *batch = next.into_iter();
                        batch.next()
                    }
                    // Raised here so the tick loop reports it as the bug it is.
                    Ok(Err(panic)) => std::panic::panic_any(panic),
                    Err(_) => None,
                },
            },
        };
        next.ok_or(SourceError::Ended)
    }

    fn recorded_events(&mut self, until: UnixMs) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(e) = self.events.next_if(|e| e.unix_ms() <= until) {
            out.push(e);
        }
        out
    }

    fn give_back(&mut self, snap: Snapshot) {
        if let Samples::Ahead {
            used, give_back, ..
        } = &mut self.samples
        {
            used.push(snap);
            if used.len() == BATCH {
                let full = std::mem::replace(used, Vec::with_capacity(BATCH));
                // The decoding thread has ended: they are dropped here.
                let _ = give_back.send(full);
            }
        }
    }
}
