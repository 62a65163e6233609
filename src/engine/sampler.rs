//! The named background thread that samples a [`crate::source::GpuSource`] every interval, enriches the
//! processes from `/proc` and applies the snapshot to the shared [`crate::engine::view::Monitor`].
//!
//! The UI never waits on it: a source that hangs (a wedged driver) only makes the data stale.
//! Dropping the [`SamplerHandle`] stops the thread at its next wake-up without joining it.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engine::builder::EngineBuilder;
use crate::engine::command::EngineCommand;
use crate::engine::shared::SharedMonitor;
use crate::engine::stages::publish;
use crate::host::cost::{self, Part};
use crate::model::now_ms;
pub use crate::source::SourceFactory;

/// Messages to the sampler thread.
enum Control {
    Command(crate::engine::command::CommandId, EngineCommand),
}

/// Called after each applied snapshot (the GUI passes `ctx.request_repaint`).
pub type Notify = Arc<dyn Fn() + Send + Sync>;

/// A running sampler thread.
pub struct SamplerHandle {
    stop: Option<Sender<Control>>,
    thread: Option<JoinHandle<()>>,
    /// The state it writes.
    pub shared: SharedMonitor,
    /// The engine's replies to commands, until the front end takes them.
    replies: Arc<crate::engine::command::Replies>,
}

impl SamplerHandle {
    /// Starts sampling on a thread named `vramwarden-sampler`, into `shared`, not recording,
    /// on default settings.
    ///
    /// # Errors
    /// Only if the OS refuses to create a thread.
    pub fn spawn(
        factory: SourceFactory,
        interval: Duration,
        shared: SharedMonitor,
        notify: Notify,
    ) -> std::io::Result<Self> {
        Self::start(
            factory,
            EngineBuilder::new(shared, interval.as_millis() as u64),
            notify,
        )
    }

    /// Starts sampling `factory`'s source on a thread named `vramwarden-sampler`, one sample
    /// every interval of `engine`, into the engine it builds (the source's info added once the
    /// source is open).
    ///
    /// # Errors
    /// Only if the OS refuses to create a thread.
    pub fn start(
        factory: SourceFactory,
        engine: EngineBuilder,
        notify: Notify,
    ) -> std::io::Result<Self> {
        let (stop_tx, stop_rx) = mpsc::channel::<Control>();
        let shared = engine.shared();
        let state = shared.clone();
        let interval = Duration::from_millis(engine.interval_ms());
        let replies = Arc::new(crate::engine::command::Replies::default());
        let answered = replies.clone();
        let thread = std::thread::Builder::new()
            .name("vramwarden-sampler".into())
            .spawn(move || {
                let thread = SamplerThread {
                    state,
                    notify,
                    stop_rx,
                    answered,
                };
                thread.run(factory, engine, interval);
            })?;
        Ok(Self {
            stop: Some(stop_tx),
            thread: Some(thread),
            shared,
            replies,
        })
    }

    /// Sends a request to the engine (applied on the sampler thread); its reply comes back
    /// under the id returned ([`SamplerHandle::take_replies`]).
    pub fn send(&self, c: EngineCommand) -> crate::engine::command::CommandId {
        let id = crate::engine::command::CommandId::next();
        if let Some(tx) = &self.stop {
            let _ = tx.send(Control::Command(id, c));
        }
        id
    }

    /// The engine's replies since the last call, oldest first.
    pub fn take_replies(&self) -> Vec<crate::engine::command::CommandReply> {
        self.replies.take()
    }

    /// Where the engine's replies wait (for a front end that waits on one command's,
    /// [`crate::engine::command::Replies::wait_take`]).
    pub fn replies(&self) -> Arc<crate::engine::command::Replies> {
        self.replies.clone()
    }

    /// Asks the thread to stop and waits up to `timeout` for it; returns whether it ended.
    pub fn stop(mut self, timeout: Duration) -> bool {
        self.stop.take();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }
}

impl Drop for SamplerHandle {
    fn drop(&mut self) {
        // Closing the channel wakes the thread; it is never joined here, so a source stuck in
        // the driver cannot freeze whoever drops the handle.
        self.stop.take();
    }
}
/// What the sampler thread holds besides its engine and source.
struct SamplerThread {
    /// The state it writes (its failures too, when no engine runs).
    state: SharedMonitor,
    notify: Notify,
    stop_rx: mpsc::Receiver<Control>,
    /// The engine's replies, for the front end.
    answered: Arc<crate::engine::command::Replies>,
}

impl SamplerThread {
    /// Opens the source, builds the engine and samples until stopped; then closes the
    /// session log, or reports the panic that ended it.
    fn run(self, factory: SourceFactory, engine: EngineBuilder, interval: Duration) {
        let mut source = match factory() {
            Ok(s) => s,
            Err(e) => {
                publish::source_failed(&self.state, e.to_string());
                (self.notify)();
                return;
            }
        };
        let mut engine = engine.source(source.info()).build();
        source.set_process_utilization(engine.needs_process_utilization());
        let ended = crate::engine::tick_loop::run(
            &mut engine,
            source.as_mut(),
            interval,
            crate::engine::tick_loop::Clock::Wall,
            |engine, source, due| self.between(engine, source, due),
        );
        if let crate::engine::tick_loop::Ended::Panicked(what) = ended {
            // A bug in the source or the engine must not leave a silent, dead thread: it is
            // reported (the window shows it, `record` exits non-zero). The panic may have
            // poisoned the lock: the status is set anyway.
            tracing::error!("internal error on the sampler thread: {what}");
            publish::source_failed(
                &self.state,
                format!("internal error (a bug in vramwarden; sampling stopped): {what}"),
            );
            (self.notify)();
            return;
        }
        if let Err(e) = engine.finish() {
            publish::recording_closed_badly(
                &self.state,
                format!("Closing the session log failed: {e}"),
            );
        }
    }

    /// After a sample: its replies handed over and the front end told, then commands taken
    /// until the next sample is `due`. False once the handle is dropped.
    fn between(
        &self,
        engine: &mut crate::engine::pipeline::Engine,
        source: &mut dyn crate::source::GpuSource,
        due: Instant,
    ) -> bool {
        let after = cost::span(Part::AfterTick);
        // The final replies of accepted commands whose work ended this tick.
        for r in engine.take_replies() {
            self.answered.push(r);
        }
        (self.notify)();
        drop(after);
        loop {
            let got = self
                .stop_rx
                .recv_timeout(due.saturating_duration_since(Instant::now()));
            cost::count(Part::SamplerWake);
            match got {
                Err(RecvTimeoutError::Timeout) => return true,
                Err(RecvTimeoutError::Disconnected) => return false,
                Ok(Control::Command(id, c)) => {
                    let what = c.label();
                    let answer = engine.command_under(id, c, now_ms());
                    self.answered
                        .push(crate::engine::command::CommandReply { id, what, answer });
                    (self.notify)();
                    source.set_process_utilization(engine.needs_process_utilization());
                }
            }
        }
    }
}
