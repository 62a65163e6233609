//! A fault-injecting [`GpuSource`]: wraps another source and, as a test (or a demo of the
//! failure screens) asks, makes the driver fail, hang, or answer nonsense. It stands in for a
//! misbehaving NVIDIA driver only; everything downstream (engine, log, window) is the real one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::traits::{GpuSource, SourceError};
use crate::model::{ProcessSample, Snapshot, SourceInfo, UnixMs};

/// What the wrapped driver does at the next sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Answers normally.
    #[default]
    None,
    /// The whole sample fails.
    Error,
    /// The call blocks until the fault is changed (a wedged driver).
    Hang,
    /// Device 0 reports more memory used than it has, and a process above the total.
    UsedAboveTotal,
    /// A process with PID 0 appears.
    PidZero,
    /// Every process is listed twice.
    DuplicatePid,
    /// The last GPU stops answering (no readings, no process list).
    GpuGone,
    /// The process list of every GPU fails (the readings are fine).
    ProcessListFails,
    /// The call panics (a bug below the engine).
    Panic,
}

/// Changes the fault of a running [`FaultSource`] from another thread.
#[derive(Debug, Clone, Default)]
pub struct FaultSwitch(Arc<Mutex<Fault>>);

impl FaultSwitch {
    /// Sets the fault for the next samples.
    pub fn set(&self, f: Fault) {
        if let Ok(mut g) = self.0.lock() {
            *g = f;
        }
    }

    /// The fault now.
    pub(crate) fn get(&self) -> Fault {
        self.0.lock().map_or(Fault::None, |g| *g)
    }
}

/// Wraps `inner`, injecting the fault its [`FaultSwitch`] says.
pub struct FaultSource {
    inner: Box<dyn GpuSource>,
    switch: FaultSwitch,
}

impl FaultSource {
    /// A source over `inner` and the switch that controls it.
    pub fn new(inner: Box<dyn GpuSource>) -> (Self, FaultSwitch) {
        let switch = FaultSwitch::default();
        (
            Self {
                inner,
                switch: switch.clone(),
            },
            switch,
        )
    }
}

impl GpuSource for FaultSource {
    fn info(&self) -> SourceInfo {
        self.inner.info()
    }

    fn sample(&mut self, now_ms: UnixMs) -> Result<Snapshot, SourceError> {
        while self.switch.get() == Fault::Hang {
            std::thread::sleep(Duration::from_millis(5));
        }
        let fault = self.switch.get();
        if fault == Fault::Error {
            return Err(SourceError::Sample("injected driver error".into()));
        }
        if fault == Fault::Panic {
            panic!("injected panic in the GPU source");
        }
        let mut s = self.inner.sample(now_ms)?;
        match fault {
            Fault::UsedAboveTotal => {
                if let Some(d) = s.devices.first_mut() {
                    let total = d.memory_total_bytes.unwrap_or(1);
                    d.memory_used_bytes = Some(total.saturating_mul(3));
                    d.memory_free_bytes = Some(total);
                }
                if let Some(p) = s.processes.iter_mut().find(|p| p.device_index == 0) {
                    p.used_bytes = Some(u64::MAX);
                }
            }
            Fault::PidZero => s.processes.push(ProcessSample {
                pid: 0,
                device_index: 0,
                used_bytes: Some(1 << 30),
                ..ProcessSample::default()
            }),
            Fault::DuplicatePid => {
                let copies = s.processes.clone();
                s.processes.extend(copies);
            }
            Fault::GpuGone => {
                if let Some(d) = s.devices.last_mut() {
                    let index = d.index;
                    *d = crate::model::DeviceSample {
                        index,
                        uuid: d.uuid.clone(),
                        name: d.name.clone(),
                        process_list_error: Some("injected: the GPU does not answer".into()),
                        ..crate::model::DeviceSample::default()
                    };
                    s.processes.retain(|p| p.device_index != index);
                }
            }
            Fault::ProcessListFails => {
                for d in &mut s.devices {
                    d.process_list_error = Some("injected: process list failed".into());
                }
                s.processes.clear();
            }
            Fault::None | Fault::Error | Fault::Hang | Fault::Panic => {}
        }
        Ok(s)
    }

    fn set_process_utilization(&mut self, on: bool) {
        self.inner.set_process_utilization(on);
    }
}
