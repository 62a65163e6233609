//! The named background thread that samples a [`GpuSource`] every interval, enriches the
//! processes from `/proc` and applies the snapshot to the shared [`crate::engine::view::Monitor`].
//!
//! The UI never waits on it: a source that hangs (a wedged driver) only makes the data stale.
//! Dropping the [`SamplerHandle`] stops the thread at its next wake-up without joining it.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engine::shared::SharedMonitor;
use crate::engine::view::SourceStatus;
use crate::engine::{Engine, EngineCommand, EngineOptions, RecordTo};
use crate::model::now_ms;
use crate::source::{GpuSource, SourceError};

/// Messages to the sampler thread.
enum Control {
    Command(EngineCommand),
}

/// Opens the source on the sampler thread (NVML init can itself be slow).
pub type SourceFactory = Box<dyn FnOnce() -> Result<Box<dyn GpuSource>, SourceError> + Send>;

/// Called after each applied snapshot (the GUI passes `ctx.request_repaint`).
pub type Notify = Arc<dyn Fn() + Send + Sync>;

/// A running sampler thread.
pub struct SamplerHandle {
    stop: Option<Sender<Control>>,
    thread: Option<JoinHandle<()>>,
    /// The state it writes.
    pub shared: SharedMonitor,
}

impl SamplerHandle {
    /// Starts sampling on a thread named `vramwarden-sampler`.
    ///
    /// # Errors
    /// Only if the OS refuses to create a thread.
    pub fn spawn(
        factory: SourceFactory,
        interval: Duration,
        shared: SharedMonitor,
        notify: Notify,
    ) -> std::io::Result<Self> {
        Self::spawn_recording(
            factory,
            interval,
            shared,
            notify,
            RecordTo::Off,
            crate::engine::settings::Settings::default(),
            EngineOptions::default(),
        )
    }

    /// Like [`SamplerHandle::spawn`], also recording a session log as `record` says.
    ///
    /// # Errors
    /// Only if the OS refuses to create a thread.
    pub fn spawn_recording(
        factory: SourceFactory,
        interval: Duration,
        shared: SharedMonitor,
        notify: Notify,
        record: RecordTo,
        settings: crate::engine::settings::Settings,
        options: EngineOptions,
    ) -> std::io::Result<Self> {
        let (stop_tx, stop_rx) = mpsc::channel::<Control>();
        let state = shared.clone();
        let thread = std::thread::Builder::new()
            .name("vramwarden-sampler".into())
            .spawn(move || {
                let mut source = match factory() {
                    Ok(s) => s,
                    Err(e) => {
                        if let Ok(mut m) = state.write() {
                            m.status = SourceStatus::Failed(e.to_string());
                        }
                        notify();
                        return;
                    }
                };
                let mut engine = Engine::new(state.clone(), record, interval.as_millis() as u64);
                engine.set_options(options);
                engine.set_source(source.info());
                engine.apply_settings(&settings);
                source.set_process_utilization(engine.needs_process_utilization());
                let ended = crate::engine::tick_loop::run(
                    &mut engine,
                    source.as_mut(),
                    interval,
                    crate::engine::tick_loop::Clock::Wall,
                    |engine, source, due| {
                        notify();
                        // Commands are taken while waiting for the next sample.
                        loop {
                            match stop_rx
                                .recv_timeout(due.saturating_duration_since(Instant::now()))
                            {
                                Err(RecvTimeoutError::Timeout) => return true,
                                Err(RecvTimeoutError::Disconnected) => return false,
                                Ok(Control::Command(c)) => {
                                    engine.command(c, now_ms());
                                    source.set_process_utilization(
                                        engine.needs_process_utilization(),
                                    );
                                }
                            }
                        }
                    },
                );
                if let crate::engine::tick_loop::Ended::Panicked(what) = ended {
                    // A bug in the source or the engine must not leave a silent, dead thread:
                    // it is reported (the window shows it, `record` exits non-zero). The panic
                    // may have poisoned the lock: the status is set anyway.
                    tracing::error!("internal error on the sampler thread: {what}");
                    let mut m = state.write().unwrap_or_else(|p| p.into_inner());
                    m.status = SourceStatus::Failed(format!(
                        "internal error (a bug in vramwarden; sampling stopped): {what}"
                    ));
                    drop(m);
                    notify();
                    return;
                }
                if let Err(e) = engine.finish() {
                    if let Ok(mut m) = state.write() {
                        m.recording.error = Some(format!("Closing the session log failed: {e}"));
                    }
                }
            })?;
        Ok(Self {
            stop: Some(stop_tx),
            thread: Some(thread),
            shared,
        })
    }

    /// Sends a request to the engine (applied on the sampler thread).
    pub fn send(&self, c: EngineCommand) {
        if let Some(tx) = &self.stop {
            let _ = tx.send(Control::Command(c));
        }
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

/// The source factory for `--demo` (the simulated GPUs) or the NVIDIA driver: what the window,
/// the agent and the headless commands sample.
pub fn source_factory(demo: bool) -> SourceFactory {
    // `VRAMWARDEN_DEMO_FLEET=8x200`: the demo as a server of 8 GPUs and 200 processes (for
    // trying the window and the agent at that size).
    let fleet = std::env::var("VRAMWARDEN_DEMO_FLEET").ok().and_then(|v| {
        let (g, p) = v.split_once('x')?;
        let (g, p) = (g.trim().parse::<u32>().ok()?, p.trim().parse::<u32>().ok()?);
        ((1..=64).contains(&g) && p <= 10_000).then_some((g, p))
    });
    if let (true, Some((gpus, procs))) = (demo, fleet) {
        Box::new(move || {
            Ok(
                Box::new(crate::source::sim::SimSource::fleet(now_ms(), gpus, procs))
                    as Box<dyn crate::source::GpuSource>,
            )
        })
    } else if demo {
        Box::new(|| {
            Ok(Box::new(crate::source::sim::SimSource::demo_day(now_ms()))
                as Box<dyn crate::source::GpuSource>)
        })
    } else {
        Box::new(|| {
            crate::source::nvml::NvmlSource::new()
                .map(|s| Box::new(s) as Box<dyn crate::source::GpuSource>)
        })
    }
}
