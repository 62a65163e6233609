//! Enrich: what the driver does not say, added to a sample before anything reads it. A GPU
//! whose process list failed keeps its last good list (stale, memory missing); then each
//! process gets its `/proc` facts (name, user, container), CPU use, and PyTorch's figures from
//! its companion (read from the poller's map: no socket I/O on the tick).

use crate::engine::shared::Shared;
use crate::host::procinfo::{enrich, ProcReader};
use crate::model::Snapshot;

/// The enrich stage's caches.
#[derive(Default)]
pub(crate) struct Enrich {
    procs: ProcReader,
    usage: crate::host::proc_usage::ProcUsage,
    /// The PyTorch companions' poller, started with the first live process.
    torch: Option<crate::act::torch::Watch>,
}

impl Enrich {
    /// For each GPU whose process list failed this time, the last good list stands (from the
    /// published state): its processes are kept (so nothing "exits", no episode or hysteresis
    /// resets), marked stale, with their memory missing (never 0) in the history and the log.
    pub(crate) fn carry_stale(&self, snap: &mut Snapshot, shared: &Shared) {
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
        let Ok(m) = shared.read() else {
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

    /// The processes' `/proc` facts, CPU use and PyTorch figures.
    pub(crate) fn run(&mut self, snap: &mut Snapshot) {
        enrich(snap, &mut self.procs);
        let usage = crate::host::cost::span(crate::host::cost::Part::ProcUsage);
        self.usage.sample(snap);
        drop(usage);
        self.attach_torch(snap);
    }

    /// PyTorch's figures for live processes whose companion answers, matched to the GPU by
    /// uuid, or by being its only one.
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
}
