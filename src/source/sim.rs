//! Deterministic simulated GPUs running scripted processes.
//!
//! The state is a pure function of the time asked for, so tests and `record --speed max` can run
//! hours of simulated time in seconds, and two runs over the same times give the same samples.

use std::sync::Arc;

use super::traits::{host_name, GpuSource, SourceError};
use crate::model::{
    DeviceSample, FastMap, ProcInfo, ProcessSample, Snapshot, SourceInfo, UnixMs, MIB,
};

/// How a simulated process's GPU memory evolves, in MiB, over seconds since it started.
#[derive(Debug, Clone, PartialEq)]
pub enum Script {
    /// Caching allocator warming up in steps for `warm_s` seconds, then flat at `plateau_mib`.
    Trainer {
        /// Final size of the cache.
        plateau_mib: u64,
        /// Length of the warm-up.
        warm_s: f64,
    },
    /// Grows by `rate_mib_s` every second from `base_mib`.
    Leak {
        /// Memory right after start.
        base_mib: u64,
        /// Growth per second.
        rate_mib_s: f64,
    },
    /// Holds `mib` and does nothing.
    Idle {
        /// Memory held.
        mib: u64,
    },
    /// At the start of every `period_s`, grows linearly from `low_mib` to `high_mib` over
    /// `rise_s`, then frees back to `low_mib` (a server taking bursts of requests).
    Saw {
        /// Memory after each free.
        low_mib: u64,
        /// Memory just before each free.
        high_mib: u64,
        /// Length of one cycle.
        period_s: f64,
        /// Length of the growing part of a cycle.
        rise_s: f64,
    },
}

impl Script {
    /// Memory in MiB `t` seconds after the process started.
    fn memory_mib(&self, t: f64) -> u64 {
        let t = t.max(0.0);
        match *self {
            Script::Trainer {
                plateau_mib,
                warm_s,
            } => {
                let steps = 8.0;
                let done = ((t / warm_s) * steps).floor().min(steps - 1.0) + 1.0;
                (plateau_mib as f64 * done / steps) as u64
            }
            Script::Leak {
                base_mib,
                rate_mib_s,
            } => base_mib + (t.floor() * rate_mib_s) as u64,
            Script::Idle { mib } => mib,
            Script::Saw {
                low_mib,
                high_mib,
                period_s,
                rise_s,
            } => {
                let ph = t % period_s;
                if ph < rise_s {
                    low_mib + ((high_mib - low_mib) as f64 * ph / rise_s) as u64
                } else {
                    low_mib
                }
            }
        }
    }
}

/// One scripted process on a simulated GPU.
#[derive(Debug, Clone)]
pub struct SimProcess {
    /// PID shown for the first life; later lives (see `restart_every_s`) count up from it.
    pub pid: u32,
    /// Which simulated GPU it uses.
    pub device_index: u32,
    /// Name, command line, user. `None` binds a real process: its facts come from `/proc`.
    pub info: Option<Arc<ProcInfo>>,
    /// How its memory evolves.
    pub script: Script,
    /// Seconds after the simulation start when it first appears (negative: already running).
    pub start_s: f64,
    /// If set, the process exits after `life_s` and a new one starts every `restart_every_s`.
    pub restart_every_s: Option<f64>,
    /// How long one life lasts (with `restart_every_s`).
    pub life_s: f64,
    /// Typical GPU utilisation it causes, percent.
    pub busy_pct: u32,
}

/// One simulated GPU.
#[derive(Debug, Clone)]
pub struct SimDevice {
    /// Displayed name.
    pub name: String,
    /// Total memory in MiB.
    pub total_mib: u64,
    /// Reserved by the "driver", MiB.
    pub reserved_mib: u64,
    /// Memory used that no listed process owns, MiB.
    pub ghost_mib: u64,
    /// Its power cap, W (the board's default limit): idle it draws a tenth of it, at full
    /// load 93 %.
    pub power_cap_w: u32,
}

/// What a simulated PyTorch companion reports for a scripted process: shares of the memory
/// the script holds (which stands for the allocator's reserved memory).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimTorch {
    /// Live tensors, percent of reserved (when `cache_mib` is 0).
    pub allocated_pct: u32,
    /// A cache of fixed size: live tensors are reserved minus this (a leak in tensors grows
    /// them at the script's full rate).
    pub cache_mib: u64,
    /// Free space inside split blocks, percent of reserved.
    pub inactive_split_pct: u32,
    /// Allocation retries reported.
    pub alloc_retries: u64,
}

impl SimTorch {
    /// PyTorch's figures of a process whose allocator reserves `mib`.
    fn mem(&self, mib: u64) -> crate::model::TorchMem {
        let reserved = mib * MIB;
        crate::model::TorchMem {
            allocated_bytes: if self.cache_mib > 0 {
                reserved.saturating_sub(self.cache_mib * MIB)
            } else {
                reserved / 100 * u64::from(self.allocated_pct.min(100))
            },
            reserved_bytes: reserved,
            inactive_split_bytes: reserved / 100 * u64::from(self.inactive_split_pct.min(100)),
            alloc_retries: self.alloc_retries,
            ooms: 0,
            memory_fraction: None,
            expandable_segments: None,
        }
    }
}

/// Simulated GPUs; see the module docs.
#[derive(Debug, Clone)]
pub struct SimSource {
    start_ms: UnixMs,
    devices: Vec<SimDevice>,
    processes: Vec<SimProcess>,
    /// Scripted processes (by their first PID) that "run" the PyTorch companion.
    torch: FastMap<u32, SimTorch>,
    /// Scripted parks (by first PID): parked from `.0` to `.1` seconds into every period of
    /// `.2` seconds (a simulated park shows what a park looks like; nothing is parked).
    parks: FastMap<u32, (f64, f64, f64)>,
    /// Per device: its uuid and PCI bus id, made once (a driver source reads them once too).
    ids: Vec<(String, String)>,
    /// A sample the engine gave back ([`GpuSource::give_back`]): the next one is written into
    /// its room (its lists and the devices' strings), not allocated anew.
    spare: Option<Snapshot>,
    /// Per device, the memory and utilisation being summed (kept for their room).
    sums: (Vec<u64>, Vec<u32>),
}

/// The uuid and PCI bus id of simulated GPU `i`.
fn device_ids(i: usize) -> (String, String) {
    (
        format!("GPU-5137e0a1-0000-4000-8000-{:012x}", i + 1),
        format!("00000000:{:02X}:00.0", 0x17 + i * 0x20),
    )
}

fn info(
    name: &str,
    cmdline: &str,
    user: &str,
    uid: u32,
    start_ms: UnixMs,
) -> Option<Arc<ProcInfo>> {
    Some(Arc::new(ProcInfo {
        name: name.into(),
        cmdline: cmdline.into(),
        user: user.into(),
        uid,
        start_time_ms: start_ms,
        container_id: None,
        ..ProcInfo::default()
    }))
}

/// `secs` seconds after `start_ms` (negative: before it).
fn secs_after(start_ms: UnixMs, secs: f64) -> UnixMs {
    start_ms + (secs * 1000.0) as i64
}

/// The demo's trainer on GPU 0, in a container: its cache warms up to 38 GiB, and a new run
/// starts every 3 h.
fn demo_trainer(start_ms: UnixMs) -> SimProcess {
    let mut trainer = info(
        "python3",
        "python3 train.py --model llama-3-8b --batch-size 16 --bf16",
        "alice",
        1000,
        secs_after(start_ms, -300.0),
    );
    if let Some(i) = trainer.as_mut().map(Arc::make_mut) {
        i.container_id = Some("4f2a9c1e7b3d".repeat(5) + "c0ffee");
    }
    SimProcess {
        pid: 48213,
        device_index: 0,
        info: trainer,
        script: Script::Trainer {
            plateau_mib: 38 * 1024,
            warm_s: 8.0,
        },
        start_s: -300.0,
        // A new run every 3 h (its cache warms up again each time).
        restart_every_s: Some(3.0 * 3600.0),
        life_s: 3.0 * 3600.0 - 120.0,
        busy_pct: 93,
    }
}

/// The demo's notebook kernel on GPU 0: leaks 1 MiB a second.
fn demo_notebook(start_ms: UnixMs) -> SimProcess {
    SimProcess {
        pid: 51877,
        device_index: 0,
        info: info(
            "python3",
            "python3 -m ipykernel_launcher -f /home/bob/.local/share/jupyter/runtime/kernel-7c1e.json",
            "bob",
            1001,
            secs_after(start_ms, -1200.0),
        ),
        script: Script::Leak {
            base_mib: 2048,
            rate_mib_s: 1.0,
        },
        start_s: -1200.0,
        restart_every_s: Some(20.0 * 3600.0),
        life_s: 20.0 * 3600.0,
        busy_pct: 4,
    }
}

/// The demo's idle holder on GPU 1: an evaluation that holds 8 GiB and does nothing.
fn demo_idle_holder(start_ms: UnixMs) -> SimProcess {
    SimProcess {
        pid: 39002,
        device_index: 1,
        info: info(
            "python3",
            "python3 eval_checkpoint.py --ckpt run42/step9000.pt",
            "alice",
            1000,
            secs_after(start_ms, -7200.0),
        ),
        script: Script::Idle { mib: 8 * 1024 },
        start_s: -7200.0,
        restart_every_s: None,
        life_s: f64::INFINITY,
        busy_pct: 0,
    }
}

/// The demo's inference server on GPU 1: a saw-tooth from 4 to 10 GiB every 2 minutes.
fn demo_inference_server(start_ms: UnixMs) -> SimProcess {
    SimProcess {
        pid: 2231,
        device_index: 1,
        info: info(
            "tritonserver",
            "tritonserver --model-repository=/srv/models --http-port 8000",
            "svc-infer",
            998,
            secs_after(start_ms, -86400.0),
        ),
        script: Script::Saw {
            low_mib: 4 * 1024,
            high_mib: 10 * 1024,
            period_s: 120.0,
            rise_s: 8.0,
        },
        start_s: -86400.0,
        restart_every_s: None,
        life_s: f64::INFINITY,
        busy_pct: 35,
    }
}

/// The demo's batch job on GPU 1: a 4-minute preprocessing run every 10 minutes.
fn demo_batch_job(start_ms: UnixMs) -> SimProcess {
    SimProcess {
        pid: 60100,
        device_index: 1,
        info: info(
            "python3",
            "python3 preprocess.py --shard 0",
            "carol",
            1002,
            secs_after(start_ms, 30.0),
        ),
        script: Script::Trainer {
            plateau_mib: 3 * 1024,
            warm_s: 6.0,
        },
        start_s: 30.0,
        restart_every_s: Some(600.0),
        life_s: 240.0,
        busy_pct: 60,
    }
}

/// The demo's two GPUs: an H200 with memory no process owns, and an RTX 4090.
fn demo_devices() -> Vec<SimDevice> {
    vec![
        SimDevice {
            name: "Simulated H200".into(),
            total_mib: 143_771,
            reserved_mib: 616,
            ghost_mib: 1536,
            power_cap_w: 700,
        },
        SimDevice {
            name: "Simulated RTX 4090".into(),
            total_mib: 24_564,
            reserved_mib: 345,
            ghost_mib: 0,
            // An RTX 4090's default power limit.
            power_cap_w: 450,
        },
    ]
}

impl SimSource {
    /// The demo: two GPUs of different sizes and the scripted processes from the brief
    /// (a plateauing trainer, a leaking notebook kernel, an idle holder, a saw-tooth server,
    /// a periodic batch job, and some memory no process owns). `start_ms` is simulated time zero.
    pub fn demo(start_ms: UnixMs) -> Self {
        let processes = vec![
            demo_trainer(start_ms),
            demo_notebook(start_ms),
            demo_idle_holder(start_ms),
            demo_inference_server(start_ms),
            demo_batch_job(start_ms),
        ];
        Self {
            processes,
            ..Self::empty(start_ms, demo_devices())
        }
        // The trainer's cache holds a third more than its tensors; the notebook's tensors
        // are what grows.
        .with_torch(
            48213,
            SimTorch {
                allocated_pct: 64,
                cache_mib: 0,
                inactive_split_pct: 4,
                alloc_retries: 0,
            },
        )
        .with_torch(
            51877,
            SimTorch {
                allocated_pct: 0,
                cache_mib: 192,
                inactive_split_pct: 1,
                alloc_retries: 3,
            },
        )
    }

    /// The demo the app runs (`--demo`): [`SimSource::demo`] and, every hour, a fine-tune that
    /// grows fast on GPU 0 (the OOM forecast alert is raised) while an idle notebook there is
    /// parked (a simulated park: nothing is parked for real) from 200 s to 600 s, then resumed.
    pub fn demo_day(start_ms: UnixMs) -> Self {
        let s = |secs: f64| start_ms + (secs * 1000.0) as i64;
        let mut sim = Self::demo(start_ms);
        for p in [
            SimProcess {
                pid: 66020,
                device_index: 0,
                info: info(
                    "python3",
                    "python3 -m ipykernel_launcher -f /home/dave/.local/share/jupyter/runtime/kernel-2b9d.json",
                    "dave",
                    1003,
                    s(-5400.0),
                ),
                script: Script::Idle { mib: 24 * 1024 },
                start_s: -5400.0,
                restart_every_s: None,
                life_s: f64::INFINITY,
                busy_pct: 0,
            },
            SimProcess {
                pid: 70411,
                device_index: 0,
                info: info("python3", "python3 finetune.py --lora --max-steps 2000", "erin", 1004, s(120.0)),
                script: Script::Leak {
                    base_mib: 16 * 1024,
                    rate_mib_s: 150.0,
                },
                start_s: 120.0,
                restart_every_s: Some(3600.0),
                life_s: 360.0,
                busy_pct: 85,
            },
        ] {
            sim.add(p);
        }
        sim.with_park(66020, 200.0, 600.0, 3600.0)
    }

    /// Parks the scripted process first shown as `pid` from `from_s` to `to_s` seconds into
    /// every `period_s` of simulated time (its memory shown in host memory meanwhile).
    pub fn with_park(mut self, pid: u32, from_s: f64, to_s: f64, period_s: f64) -> Self {
        self.parks.insert(pid, (from_s, to_s, period_s));
        self
    }

    /// The scripted park of `p` at `t` seconds, holding `mib`.
    fn park_at(&self, p: &SimProcess, t: f64, mib: u64) -> Option<crate::model::ParkInfo> {
        let &(from, to, period) = self.parks.get(&p.pid)?;
        let phase = t.rem_euclid(period.max(1.0));
        (t >= 0.0 && phase >= from && phase < to).then(|| crate::model::ParkInfo {
            state: crate::model::ParkState::Parked,
            bytes: Some(mib * MIB),
            since_ms: self.start_ms + ((t - phase + from) * 1000.0) as i64,
        })
    }

    /// Makes the scripted process first shown as `pid` report PyTorch allocator figures.
    pub fn with_torch(mut self, pid: u32, t: SimTorch) -> Self {
        self.torch.insert(pid, t);
        self
    }

    /// Bare simulated GPUs with no processes (tests add their own).
    pub fn empty(start_ms: UnixMs, devices: Vec<SimDevice>) -> Self {
        Self {
            start_ms,
            ids: (0..devices.len()).map(device_ids).collect(),
            devices,
            processes: Vec::new(),
            torch: FastMap::default(),
            parks: FastMap::default(),
            spare: None,
            sums: (Vec::new(), Vec::new()),
        }
    }

    /// A large fleet for benchmarks: `gpus` H200-sized GPUs and `procs` processes spread over
    /// them, cycling through every script shape.
    pub fn fleet(start_ms: UnixMs, gpus: u32, procs: u32) -> Self {
        let devices = (0..gpus)
            .map(|i| SimDevice {
                name: format!("Simulated H200 #{i}"),
                total_mib: 143_771,
                reserved_mib: 616,
                ghost_mib: 512,
                power_cap_w: 700,
            })
            .collect();
        let mut s = Self::empty(start_ms, devices);
        for i in 0..procs {
            let script = match i % 4 {
                0 => Script::Trainer {
                    plateau_mib: 2048 + u64::from(i) * 7,
                    warm_s: 900.0,
                },
                1 => Script::Leak {
                    base_mib: 1024,
                    rate_mib_s: 0.002 * f64::from(i % 9 + 1),
                },
                2 => Script::Idle {
                    mib: 512 + u64::from(i) * 3,
                },
                _ => Script::Saw {
                    low_mib: 256,
                    high_mib: 900 + u64::from(i),
                    period_s: 120.0 + f64::from(i),
                    rise_s: 10.0,
                },
            };
            s.add(SimProcess {
                pid: 10_000 + i,
                device_index: i % gpus.max(1),
                info: info(
                    "python3",
                    &format!("python3 job_{i}.py"),
                    "bench",
                    1000,
                    start_ms - 1000,
                ),
                script,
                start_s: -1.0,
                restart_every_s: None,
                life_s: f64::INFINITY,
                busy_pct: (i * 13 % 100),
            });
        }
        s
    }

    /// Adds a scripted process (a real PID with `info: None` binds a real process).
    pub fn add(&mut self, p: SimProcess) {
        self.processes.push(p);
    }

    /// The devices and processes at `now_ms`.
    pub fn at(&self, now_ms: UnixMs) -> Snapshot {
        let mut snap = Snapshot::default();
        self.write_at(now_ms, &mut snap, &mut (Vec::new(), Vec::new()));
        snap
    }

    /// [`SimSource::at`] written into `out` (its lists and strings reused: every field of
    /// every entry is set anew); `sums` is room for the per-device sums.
    fn write_at(&self, now_ms: UnixMs, out: &mut Snapshot, sums: &mut (Vec<u64>, Vec<u32>)) {
        let t = (now_ms - self.start_ms) as f64 / 1000.0;
        let (used, busy) = sums;
        used.clear();
        used.resize(self.devices.len(), 0);
        busy.clear();
        busy.resize(self.devices.len(), 0);
        out.processes.clear();
        for p in &self.processes {
            let Some((life, since)) = life_at(p, t) else {
                continue;
            };
            let dev = p.device_index as usize;
            if dev >= self.devices.len() {
                continue;
            }
            let full_mib = p.script.memory_mib(since);
            let parked = self.park_at(p, t, full_mib);
            let mib = if parked.is_some() { 0 } else { full_mib };
            used[dev] += mib;
            busy[dev] = busy[dev].max(p.busy_pct);
            let mut sample = self.process_sample(p, life, mib, now_ms);
            sample.parked = parked;
            out.processes.push(sample);
        }
        out.devices.truncate(self.devices.len());
        for i in 0..self.devices.len() {
            let sample = self.device_sample(i, (used[i], busy[i]), now_ms, out.devices.get_mut(i));
            match out.devices.get_mut(i) {
                Some(slot) => *slot = sample,
                None => out.devices.push(sample),
            }
        }
        out.taken_at_ms = now_ms;
    }

    /// Scripted process `p` in its `life`-th run, holding `mib`, at `now_ms` (not parked).
    fn process_sample(&self, p: &SimProcess, life: u32, mib: u64, now_ms: UnixMs) -> ProcessSample {
        let info = p.info.clone().map(|i| {
            if life == 0 {
                return i;
            }
            let mut i = (*i).clone();
            i.start_time_ms = self.start_ms
                + ((p.start_s + life as f64 * p.restart_every_s.unwrap_or(0.0)) * 1000.0) as i64;
            if let Some(n) = i.cmdline.rfind("--shard ") {
                i.cmdline = format!("{}--shard {life}", &i.cmdline[..n]);
            }
            Arc::new(i)
        });
        ProcessSample {
            pid: p.pid + life,
            device_index: p.device_index,
            used_bytes: Some(mib * MIB),
            kind: crate::model::ContextKind::Compute,
            sm_util_pct: Some(if p.busy_pct == 0 {
                0
            } else {
                (p.busy_pct as i64 + jitter(now_ms / 1000, u64::from(p.pid), 3)).clamp(1, 100)
                    as u32
            }),
            // A scripted process has simulated facts; a real process a test harness placed
            // on a simulated GPU (no scripted facts) is read from /proc.
            origin: if info.is_some() {
                crate::model::Origin::Simulated
            } else {
                crate::model::Origin::Live
            },
            stale: false,
            parked: None,
            // Scripted host figures: a job that keeps its GPU busy feeds it from about one
            // core; its host memory is a base plus a share of its GPU memory.
            cpu_pct: info.is_some().then(|| {
                let base = if p.busy_pct == 0 {
                    0.4
                } else {
                    18.0 + 0.9 * p.busy_pct as f32
                };
                (base + jitter(now_ms / 1000, u64::from(p.pid) + 7, 4) as f32).max(0.1)
            }),
            rss_bytes: info.is_some().then(|| (1536 + mib / 8) * MIB),
            info,
            torch: self.torch.get(&p.pid).map(|t| t.mem(mib)),
        }
    }

    /// Simulated GPU `i` with `used` MiB of processes on it, the busiest at `busy` percent, at
    /// `now_ms`; the strings of `old` (the entry written before) refilled in place.
    fn device_sample(
        &self,
        i: usize,
        (used, busy): (u64, u32),
        now_ms: UnixMs,
        old: Option<&mut DeviceSample>,
    ) -> DeviceSample {
        let d = &self.devices[i];
        let used_mib = (used + d.ghost_mib).min(d.total_mib - d.reserved_mib);
        let util = if busy == 0 {
            0
        } else {
            (busy as i64 + jitter(now_ms / 1000, i as u64, 7)).clamp(0, 100) as u32
        };
        let (mut uuid, mut name, mut pci) = match old {
            Some(old) => (
                std::mem::take(&mut old.uuid),
                std::mem::take(&mut old.name),
                old.pci_bus_id.take().unwrap_or_default(),
            ),
            None => Default::default(),
        };
        match self.ids.get(i) {
            Some((u, p)) => {
                uuid.clone_from(u);
                pci.clone_from(p);
            }
            None => (uuid, pci) = device_ids(i),
        }
        name.clone_from(&d.name);
        DeviceSample {
            index: i as u32,
            uuid,
            name,
            pci_bus_id: Some(pci),
            memory_total_bytes: Some(d.total_mib * MIB),
            memory_used_bytes: Some(used_mib * MIB),
            memory_reserved_bytes: Some(d.reserved_mib * MIB),
            memory_free_bytes: Some((d.total_mib - d.reserved_mib - used_mib) * MIB),
            utilization_gpu_pct: Some(util),
            temperature_c: Some(34 + util / 2),
            power_w: Some(sim_power_w(d.power_cap_w, util)),
            power_limit_w: Some(f64::from(d.power_cap_w)),
            // Boost clocks under load, idle clocks without.
            sm_clock_mhz: Some(if util == 0 { 345 } else { 1980 - util }),
            mem_clock_mhz: Some(if util == 0 { 1593 } else { 3201 }),
            fan_pct: if i == 0 { None } else { Some(30 + util / 2) },
            process_list_error: None,
            time_to_full_s: None,
            time_to_full_earliest_s: None,
        }
    }
}

/// The power a simulated board with cap `cap_w` draws at `util` percent: a tenth of its cap
/// idle, 93 % of it at full load, to the hundredth of a watt.
fn sim_power_w(cap_w: u32, util: u32) -> f64 {
    // In whole centiwatts, as a session log keeps it: a replay reads back the same figure.
    let cw = cap_w * 10 + cap_w * 83 * util.min(100) / 100;
    f64::from(cw) / 100.0
}

/// Which life of `p` runs at time `t` (0 for the first) and how long it has run, or `None`.
fn life_at(p: &SimProcess, t: f64) -> Option<(u32, f64)> {
    let since_first = t - p.start_s;
    if since_first < 0.0 {
        return None;
    }
    match p.restart_every_s {
        None => (since_first < p.life_s).then_some((0, since_first)),
        Some(every) => {
            let life = (since_first / every).floor();
            let since = since_first - life * every;
            (since < p.life_s).then_some((life as u32, since))
        }
    }
}

/// Small deterministic noise in `-amp..=amp` for a given second and channel.
fn jitter(sec: i64, channel: u64, amp: i64) -> i64 {
    let mut x = (sec as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ channel.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    (x % (2 * amp as u64 + 1)) as i64 - amp
}

impl GpuSource for SimSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: crate::model::SourceInfo::SIMULATED.into(),
            driver_version: Some("simulated".into()),
            nvml_version: None,
            cuda_version: None,
            host: host_name(),
        }
    }

    fn sample(&mut self, now_ms: UnixMs) -> Result<Snapshot, SourceError> {
        let mut snap = self.spare.take().unwrap_or_default();
        let mut sums = std::mem::take(&mut self.sums);
        self.write_at(now_ms, &mut snap, &mut sums);
        self.sums = sums;
        Ok(snap)
    }

    fn give_back(&mut self, snap: Snapshot) {
        self.spare = Some(snap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample written into the room of one given back (another moment, other processes, a
    /// longer device list) equals the same moment sampled afresh, field for field.
    #[test]
    fn a_sample_in_a_given_back_room_equals_a_fresh_one() {
        let start = 1_765_000_000_000;
        let mut sim = SimSource::demo_day(start);
        let fresh = SimSource::demo_day(start);
        for secs in [0, 1, 130, 250, 31, 700, 2] {
            let now = start + secs * 1000;
            let got = sim.sample(now).expect("a sample");
            assert_eq!(got, fresh.at(now), "at {secs} s");
            sim.give_back(got);
        }
        // Room from a larger fleet: the extra devices and processes are not kept.
        let mut big = SimSource::fleet(start, 4, 40).at(start);
        big.devices[0].uuid = "stale".into();
        sim.give_back(big);
        let got = sim.sample(start + 5000).expect("a sample");
        assert_eq!(got, fresh.at(start + 5000));
    }
}
