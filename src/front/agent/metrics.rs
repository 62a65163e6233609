//! `/metrics`: the monitor's latest state in the Prometheus text format 0.0.4, or OpenMetrics
//! 1.0 when the scraper asks for it.
//!
//! Names follow Prometheus' conventions (base units, `_total` counters, an `_info` metric) and
//! GPU labels use dcgm-exporter's names (`gpu`, `UUID`, `pci_bus_id`, `modelName`, `Hostname`)
//! so dashboards can join the two. Every series carries the same `Hostname` label (GPU,
//! process and the agent's own), so one host picked on a dashboard filters them all; the
//! driver version is a label of `vramwarden_build_info` alone (join on `Hostname`), so a driver
//! update does not start new series. Per-process series are bounded: the `max_processes` largest
//! by memory, plus every leaking process.
//!
//! The GPU time-to-full forecast here is the agent's own: free memory divided by the sum of the
//! growth rates of the ongoing leaks on that GPU (processes and unattributed memory); absent
//! when nothing grows.

use std::collections::HashMap;
use std::fmt::Write;

use crate::engine::view::{LeakKey, Monitor};
use crate::model::{DeviceSample, MIB};

use super::stats::AgentStats;

/// The exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4.
    Text,
    /// OpenMetrics 1.0 text.
    OpenMetrics,
}

impl Format {
    /// The format an `Accept` header asks for (OpenMetrics only when it is named).
    pub(crate) fn negotiate(accept: Option<&str>) -> Self {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Text,
        }
    }

    /// The `Content-Type` of a response in this format.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Escapes a label value: backslash, double quote and newline.
fn escape_label(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// A float the way both formats write it.
fn push_value(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

struct Out {
    s: String,
    format: Format,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Gauge,
    Counter,
    Info,
}

impl Out {
    /// HELP and TYPE of a family. `name` is the sample name (with `_total` / `_info`).
    fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let (family, ty) = match (self.format, kind) {
            (Format::OpenMetrics, Kind::Counter) => {
                (name.strip_suffix("_total").unwrap_or(name), "counter")
            }
            (Format::OpenMetrics, Kind::Info) => {
                (name.strip_suffix("_info").unwrap_or(name), "info")
            }
            (_, Kind::Counter) => (name, "counter"),
            (_, _) => (name, "gauge"),
        };
        let _ = writeln!(self.s, "# HELP {family} {help}");
        let _ = writeln!(self.s, "# TYPE {family} {ty}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.s.push_str(name);
        if !labels.is_empty() {
            self.s.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.s.push(',');
                }
                self.s.push_str(k);
                self.s.push_str("=\"");
                escape_label(val, &mut self.s);
                self.s.push('"');
            }
            self.s.push('}');
        }
        self.s.push(' ');
        push_value(v, &mut self.s);
        self.s.push('\n');
    }
}

/// What a scrape needs besides the monitor.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    /// The agent's counters.
    pub stats: &'a AgentStats,
    /// Most per-process series (the largest by memory; leaking ones always).
    pub max_processes: usize,
    /// Wall-clock now (ms).
    pub now_ms: i64,
}

fn gpu_labels<'a>(
    d: &'a DeviceSample,
    idx: &'a str,
    host: &'a str,
) -> [(&'static str, &'a str); 5] {
    [
        ("gpu", idx),
        ("UUID", d.uuid.as_str()),
        ("pci_bus_id", d.pci_bus_id.as_deref().unwrap_or("")),
        ("modelName", d.name.as_str()),
        ("Hostname", host),
    ]
}

/// Per-GPU forecast: the engine's ([`DeviceSample::time_to_full_s`]), else seconds until the
/// GPU is full at the summed rate of its ongoing leak records (a monitor filled elsewhere).
fn gpu_time_to_full_s(m: &Monitor, d: &DeviceSample) -> Option<f64> {
    if d.time_to_full_s.is_some() {
        return d.time_to_full_s;
    }
    let rate_mib_per_min: f64 = m
        .leaks
        .iter()
        .filter(|l| l.ended_ms.is_none() && l.info.device_index == d.index)
        .map(|l| l.info.rate_mib_per_min)
        .filter(|r| r.is_finite() && *r > 0.0)
        .sum();
    crate::detect::leak::full_in_s(d.memory_free_bytes?, rate_mib_per_min)
}

/// Renders the metrics of `m` in `format`; the scrape's own duration is the last sample.
pub fn render(m: &Monitor, ctx: Context<'_>, format: Format) -> String {
    let t0 = std::time::Instant::now();
    let mut o = Out {
        s: String::with_capacity(64 * 1024),
        format,
    };
    let host = m.source.as_ref().map_or("", |s| s.host.as_str());
    let empty = crate::model::Snapshot::default();
    let snap = m.latest.as_ref().unwrap_or(&empty);
    let idx: Vec<String> = snap.devices.iter().map(|d| d.index.to_string()).collect();
    let gpus = Gpus {
        snap,
        idx: &idx,
        host,
    };
    gpu_gauges(&mut o, &gpus);
    gpu_forecast(&mut o, m, &gpus);
    gpu_guard(&mut o, m, &gpus);
    let rows = process_rows(m, snap, ctx.max_processes);
    process_gauges(&mut o, &rows, host);
    torch_figures(&mut o, &rows, host);
    agent_figures(&mut o, m, ctx, host);
    o.family(
        "vramwarden_scrape_duration_seconds",
        Kind::Gauge,
        "Seconds this scrape took to render, up to this line.",
    );
    o.sample(
        "vramwarden_scrape_duration_seconds",
        &[("Hostname", host)],
        t0.elapsed().as_secs_f64(),
    );
    ctx.stats.last_scrape_ns.store(
        t0.elapsed().as_nanos() as u64,
        std::sync::atomic::Ordering::Relaxed,
    );
    if format == Format::OpenMetrics {
        o.s.push_str("# EOF\n");
    }
    o.s
}

/// The GPUs of a scrape: the sample, each GPU's index as a label value, the host.
struct Gpus<'a> {
    snap: &'a crate::model::Snapshot,
    idx: &'a [String],
    host: &'a str,
}

impl Gpus<'_> {
    /// One sample of family `name` per GPU for which `value` has a figure.
    fn each(&self, o: &mut Out, name: &str, value: impl Fn(&DeviceSample) -> Option<f64>) {
        for (d, i) in self.snap.devices.iter().zip(self.idx) {
            if let Some(v) = value(d) {
                o.sample(name, &gpu_labels(d, i, self.host), v);
            }
        }
    }
}

/// The driver's figures per GPU.
fn gpu_gauges(o: &mut Out, gpus: &Gpus<'_>) {
    type Get = fn(&DeviceSample) -> Option<f64>;
    let gauges: [(&str, &str, Get); 7] = [
        (
            "vramwarden_gpu_memory_used_bytes",
            "GPU memory allocated by contexts, in bytes.",
            |d| d.memory_used_bytes.map(|v| v as f64),
        ),
        (
            "vramwarden_gpu_memory_reserved_bytes",
            "GPU memory the driver reserves for itself, in bytes.",
            |d| d.memory_reserved_bytes.map(|v| v as f64),
        ),
        (
            "vramwarden_gpu_memory_free_bytes",
            "GPU memory nobody holds, in bytes.",
            |d| d.memory_free_bytes.map(|v| v as f64),
        ),
        (
            "vramwarden_gpu_memory_total_bytes",
            "Installed GPU memory, in bytes.",
            |d| d.memory_total_bytes.map(|v| v as f64),
        ),
        (
            "vramwarden_gpu_utilization_ratio",
            "Fraction of time a kernel ran over the last sample period (0-1).",
            |d| d.utilization_gpu_pct.map(|v| f64::from(v) / 100.0),
        ),
        (
            "vramwarden_gpu_temperature_celsius",
            "GPU core temperature in degrees Celsius.",
            |d| d.temperature_c.map(f64::from),
        ),
        (
            "vramwarden_gpu_power_watts",
            "GPU board power draw in watts.",
            |d| d.power_w,
        ),
    ];
    for (name, help, get) in gauges {
        o.family(name, Kind::Gauge, help);
        gpus.each(o, name, get);
    }
}

/// Per GPU: the memory no process accounts for, the time until full and the forecast alert.
fn gpu_forecast(o: &mut Out, m: &Monitor, gpus: &Gpus<'_>) {
    o.family(
        "vramwarden_gpu_memory_unattributed_bytes",
        Kind::Gauge,
        "GPU memory used that no listed process accounts for (used minus the processes' sum), in bytes.",
    );
    let ghosts = crate::model::history::ghosts_of(gpus.snap);
    let ghost_of = |d: &DeviceSample| {
        let at = crate::model::device_position(&gpus.snap.devices, d.index)?;
        ghosts.get(at).copied().flatten().map(|b| b as f64)
    };
    gpus.each(o, "vramwarden_gpu_memory_unattributed_bytes", ghost_of);
    o.family(
        "vramwarden_gpu_time_to_full_seconds",
        Kind::Gauge,
        "Seconds until the GPU's memory is full at the summed rate of its ongoing leaks (absent when nothing grows).",
    );
    gpus.each(o, "vramwarden_gpu_time_to_full_seconds", |d| {
        gpu_time_to_full_s(m, d)
    });
    o.family(
        "vramwarden_gpu_oom_forecast_alert",
        Kind::Gauge,
        "1 while the GPU is forecast full within the warning time (settings: notifications.oom_forecast_minutes), else 0.",
    );
    gpus.each(o, "vramwarden_gpu_oom_forecast_alert", |d| {
        let on = m.oom_alerts.iter().any(|a| a.device_index == d.index);
        Some(f64::from(u8::from(on)))
    });
}

/// Per GPU: the OOM guard (only where one runs).
fn gpu_guard(o: &mut Out, m: &Monitor, gpus: &Gpus<'_>) {
    if m.guard.is_empty() {
        return;
    }
    let of = |d: &DeviceSample| m.guard.iter().find(|g| g.device_index == d.index);
    type Get<'a> = &'a dyn Fn(&crate::act::guard::GuardStatus) -> Option<f64>;
    let families: [(&str, &str, Get); 6] = [
        (
            "vramwarden_guard_state",
            "The OOM guard on the GPU: 0 off, 1 watching, 2 armed (the GPU fills; its next step is planned), 3 acting, 4 waiting (processes it parked wait for room).",
            &|g| Some(f64::from(g.phase.code())),
        ),
        (
            "vramwarden_guard_dry_run",
            "1 while the OOM guard only says what it would do, else 0.",
            &|g| Some(f64::from(u8::from(g.dry_run))),
        ),
        (
            "vramwarden_guard_time_to_full_seconds",
            "Seconds until the GPU is full as the OOM guard counts it (steps under way included; absent when nothing grows).",
            &|g| g.full_in_s,
        ),
        (
            "vramwarden_guard_next_step_seconds",
            "Seconds the OOM guard's next step needs (a park's from its bytes and the measured park rate).",
            &|g| g.next.as_ref().map(|n| n.needs_s),
        ),
        (
            "vramwarden_guard_next_step_starts_at_seconds",
            "The time to full at which the OOM guard starts its next step, in seconds.",
            &|g| g.next.as_ref().map(|n| n.starts_at_s),
        ),
        (
            "vramwarden_guard_parked_bytes",
            "GPU memory of the processes the OOM guard parked, in host memory now, in bytes.",
            &|g| Some(g.parked.iter().map(|p| p.bytes as f64).sum()),
        ),
    ];
    for (name, help, get) in families {
        o.family(name, Kind::Gauge, help);
        gpus.each(o, name, |d| of(d).and_then(get));
    }
}

/// One process's labels and figures in a scrape.
struct Row {
    pid: String,
    name: String,
    user: String,
    container: String,
    pod: String,
    gpu: String,
    uuid: String,
    used: f64,
    leak: Option<f64>,
    free: Option<u64>,
    torch: Option<crate::model::TorchMem>,
    parked: Option<crate::model::ParkInfo>,
}

impl Row {
    /// One sample of family `name` with this process's labels.
    fn emit(&self, o: &mut Out, name: &str, host: &str, v: f64) {
        o.sample(
            name,
            &[
                ("pid", &self.pid),
                ("name", &self.name),
                ("user", &self.user),
                ("container", &self.container),
                ("pod", &self.pod),
                ("gpu", &self.gpu),
                ("UUID", &self.uuid),
                ("Hostname", host),
            ],
            v,
        );
    }
}

/// The processes with series: the `max_processes` largest by memory, every leaking one and
/// every parked one, largest first.
fn process_rows(m: &Monitor, snap: &crate::model::Snapshot, max_processes: usize) -> Vec<Row> {
    let leaking: HashMap<(crate::model::ProcessKey, u32), f64> = m
        .leaks
        .iter()
        .filter(|l| l.ended_ms.is_none())
        .filter_map(|l| match l.key {
            LeakKey::Process(k) => Some((k, l.info.rate_mib_per_min)),
            LeakKey::Ghost(_) => None,
        })
        .collect();
    let mut procs: Vec<&crate::model::ProcessSample> = snap
        .processes
        .iter()
        .filter(|p| p.used_bytes.is_some())
        .collect();
    procs.sort_unstable_by(|a, b| b.used_bytes.cmp(&a.used_bytes).then(a.pid.cmp(&b.pid)));
    procs
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            *i < max_processes
                || leaking.contains_key(&(p.key(), p.device_index))
                || p.parked.is_some()
        })
        .map(|(_, p)| {
            let leak = leaking.get(&(p.key(), p.device_index)).copied();
            process_row(p, snap, leak)
        })
        .collect()
}

/// The row of process sample `p` of `snap`, leaking at `leak` MiB/min.
fn process_row(
    p: &crate::model::ProcessSample,
    snap: &crate::model::Snapshot,
    leak: Option<f64>,
) -> Row {
    let info = p.info.as_deref();
    // Resolved once per process when the engine first read it (ProcReader); the pod
    // label is the pod's name, as Kubernetes' own metrics write it.
    let container = info.and_then(|i| i.container_label());
    let pod = info
        .and_then(|i| i.pod.as_deref())
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_string());
    let dev = snap.devices.iter().find(|d| d.index == p.device_index);
    Row {
        pid: p.pid.to_string(),
        name: info.map_or_else(String::new, |i| i.name.clone()),
        user: info.map_or_else(String::new, |i| i.user.clone()),
        container: container.unwrap_or_default(),
        pod: pod.unwrap_or_default(),
        gpu: p.device_index.to_string(),
        uuid: dev.map_or_else(String::new, |d| d.uuid.clone()),
        used: p.used_bytes.unwrap_or(0) as f64,
        leak,
        free: dev.and_then(|d| d.memory_free_bytes),
        torch: p.torch,
        parked: p.parked,
    }
}

/// One gauge family a figure of each row (absent where the row has none).
fn process_gauges(o: &mut Out, rows: &[Row], host: &str) {
    type RowFigure = fn(&Row) -> Option<f64>;
    let per_process: [(&str, &str, RowFigure); 6] = [
        (
            "vramwarden_process_gpu_memory_bytes",
            "GPU memory a process holds on one GPU, in bytes (the largest processes, bounded).",
            |r| Some(r.used),
        ),
        (
            "vramwarden_process_parked",
            "1 while the process is parked (its GPU memory moved to host memory by `vramwarden park` or a park rule), or being parked or resumed; else 0.",
            |r| Some(f64::from(u8::from(r.parked.is_some()))),
        ),
        (
            "vramwarden_process_parked_bytes",
            "GPU memory a parked process has in host memory, in bytes (the driver's figure before the park).",
            |r| r.parked.and_then(|p| p.bytes).map(|b| b as f64),
        ),
        (
            "vramwarden_process_leak",
            "1 while the process's GPU memory is flagged as a suspected leak, else 0.",
            |r| Some(f64::from(u8::from(r.leak.is_some()))),
        ),
        (
            "vramwarden_process_leak_rate_bytes_per_second",
            "Growth rate of a leaking process's GPU memory, in bytes per second.",
            |r| r.leak.map(|rate| rate * MIB as f64 / 60.0),
        ),
        (
            "vramwarden_process_time_to_full_seconds",
            "Seconds until the process's GPU is full at its leak rate.",
            |r| crate::detect::leak::full_in_s(r.free?, r.leak?),
        ),
    ];
    for (name, help, figure) in per_process {
        o.family(name, Kind::Gauge, help);
        for r in rows {
            if let Some(v) = figure(r) {
                r.emit(o, name, host, v);
            }
        }
    }
}

/// PyTorch's caching allocator, for processes whose companion answers.
fn torch_figures(o: &mut Out, rows: &[Row], host: &str) {
    type TorchFigure = fn(&crate::model::TorchMem) -> f64;
    let torch: [(&str, Kind, &str, TorchFigure); 6] = [
        (
            "vramwarden_process_torch_allocated_bytes",
            Kind::Gauge,
            "Bytes in live PyTorch tensors (torch.cuda.memory_allocated), from the process's companion.",
            |t| t.allocated_bytes as f64,
        ),
        (
            "vramwarden_process_torch_reserved_bytes",
            Kind::Gauge,
            "Bytes PyTorch's caching allocator holds from the driver (torch.cuda.memory_reserved).",
            |t| t.reserved_bytes as f64,
        ),
        (
            "vramwarden_process_torch_releasable_bytes",
            Kind::Gauge,
            "Cached bytes torch.cuda.empty_cache() could give back: reserved - allocated.",
            |t| t.releasable_bytes() as f64,
        ),
        (
            "vramwarden_process_torch_inactive_split_bytes",
            Kind::Gauge,
            "Free bytes inside split blocks, which empty_cache() cannot give back (fragmentation).",
            |t| t.inactive_split_bytes as f64,
        ),
        (
            "vramwarden_process_torch_alloc_retries_total",
            Kind::Counter,
            "Allocations that failed, flushed the cache and were retried (num_alloc_retries).",
            |t| t.alloc_retries as f64,
        ),
        (
            "vramwarden_process_torch_ooms_total",
            Kind::Counter,
            "Out-of-memory errors PyTorch raised in the process (num_ooms).",
            |t| t.ooms as f64,
        ),
    ];
    for (name, kind, help, figure) in torch {
        o.family(name, kind, help);
        for r in rows {
            if let Some(t) = &r.torch {
                r.emit(o, name, host, figure(t));
            }
        }
    }
}

/// The agent's own: actions taken, sampling errors, the sample's age, the build.
fn agent_figures(o: &mut Out, m: &Monitor, ctx: Context<'_>, host: &str) {
    action_figures(o, ctx, host);
    sampler_figures(o, m, ctx, host);
    build_info(o, m, host);
}

/// The cleanup actions taken, by rule, action kind and outcome.
fn action_figures(o: &mut Out, ctx: Context<'_>, host: &str) {
    o.family(
        "vramwarden_cleanup_actions_total",
        Kind::Counter,
        "Cleanup actions by rule (\"manual\" for the user's own), action kind and outcome.",
    );
    for ((rule, action, outcome), n) in ctx.stats.actions() {
        o.sample(
            "vramwarden_cleanup_actions_total",
            &[
                ("rule", &rule),
                ("action", &action),
                ("outcome", outcome),
                ("Hostname", host),
            ],
            n as f64,
        );
    }
}

/// The sampler's health: its errors since the agent started and the newest sample's age.
fn sampler_figures(o: &mut Out, m: &Monitor, ctx: Context<'_>, host: &str) {
    o.family(
        "vramwarden_sampler_errors_total",
        Kind::Counter,
        "Sampling attempts that failed since the agent started.",
    );
    o.sample(
        "vramwarden_sampler_errors_total",
        &[("Hostname", host)],
        ctx.stats
            .sampler_errors
            .load(std::sync::atomic::Ordering::Relaxed) as f64,
    );
    o.family(
        "vramwarden_sample_age_seconds",
        Kind::Gauge,
        "Seconds since the newest sample arrived (absent before the first one).",
    );
    if let Some(t) = m.latest_received_ms {
        o.sample(
            "vramwarden_sample_age_seconds",
            &[("Hostname", host)],
            ((ctx.now_ms - t).max(0)) as f64 / 1000.0,
        );
    }
}

/// The build: the agent's version and its GPU source and driver.
fn build_info(o: &mut Out, m: &Monitor, host: &str) {
    let src = m.source.clone().unwrap_or_default();
    o.family(
        "vramwarden_build_info",
        Kind::Info,
        "The agent's version and GPU source (always 1).",
    );
    o.sample(
        "vramwarden_build_info",
        &[
            ("version", env!("CARGO_PKG_VERSION")),
            ("source", &src.kind),
            (
                "driver_version",
                src.driver_version.as_deref().unwrap_or(""),
            ),
            ("Hostname", host),
        ],
        1.0,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut s = String::new();
        escape_label("a\\b\"c\nd", &mut s);
        assert_eq!(s, "a\\\\b\\\"c\\nd");
    }

    #[test]
    fn values_print_without_exponent_or_fraction_noise() {
        let mut s = String::new();
        push_value(150_323_855_360.0, &mut s);
        s.push(' ');
        push_value(0.25, &mut s);
        s.push(' ');
        push_value(f64::NAN, &mut s);
        assert_eq!(s, "150323855360 0.25 NaN");
    }

    #[test]
    fn negotiation() {
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(
            Format::negotiate(Some(
                "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
            )),
            Format::OpenMetrics
        );
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Text);
    }

    /// A monitor after one sample of [`snapshot`], with a leak flagged on the small leaker.
    fn monitor() -> Monitor {
        let mut engine_state = crate::engine::state::EngineState::default();
        let mut m = Monitor::new(1000, 10);
        engine_state.apply(&mut m, snapshot(), 5000);
        m.leaks.push(leak_record());
        m
    }

    /// Two 80 GiB GPUs and three processes on GPU 0 (the first with PyTorch's figures, the
    /// second with a name that needs escaping).
    fn snapshot() -> crate::model::Snapshot {
        use crate::model::{DeviceSample, Origin, ProcInfo, ProcessSample, Snapshot, GIB};
        let dev = |i: u32| DeviceSample {
            index: i,
            uuid: format!("GPU-{i}"),
            name: "Test GPU".into(),
            memory_total_bytes: Some(80 * GIB),
            memory_used_bytes: Some(10 * GIB),
            memory_reserved_bytes: Some(GIB / 2),
            memory_free_bytes: Some(60 * GIB),
            ..DeviceSample::default()
        };
        let proc_ = |pid: u32, gib: u64, name: &str| ProcessSample {
            pid,
            device_index: 0,
            used_bytes: Some(gib * GIB),
            info: Some(std::sync::Arc::new(ProcInfo {
                name: name.into(),
                user: "alice".into(),
                start_time_ms: 1000 + i64::from(pid),
                ..ProcInfo::default()
            })),
            origin: Origin::Simulated,
            ..ProcessSample::default()
        };
        Snapshot {
            taken_at_ms: 5000,
            devices: vec![dev(0), dev(1)],
            processes: vec![
                ProcessSample {
                    torch: Some(crate::model::TorchMem {
                        allocated_bytes: GIB,
                        reserved_bytes: 3 * GIB,
                        inactive_split_bytes: 5 << 20,
                        alloc_retries: 2,
                        ooms: 1,
                        ..crate::model::TorchMem::default()
                    }),
                    ..proc_(10, 4, "big")
                },
                proc_(11, 3, "we\"ird\nname"),
                proc_(12, 1, "small-leaker"),
            ],
        }
    }

    /// The leak flagged on the small leaker (PID 12, GPU 0): 1 GiB a minute since 1 s.
    fn leak_record() -> crate::engine::view::LeakRecord {
        crate::engine::view::LeakRecord {
            key: LeakKey::Process((
                crate::model::ProcessKey {
                    pid: 12,
                    start_time_ms: 1012,
                },
                0,
            )),
            info: crate::session::LeakInfo {
                pid: 12,
                start_time_ms: 1012,
                device_index: 0,
                name: "small-leaker".into(),
                user: "alice".into(),
                ghost: false,
                since_ms: 1000,
                rate_mib_per_min: 1024.0,
                why: String::new(),
            },
            flagged_ms: 2000,
            ended_ms: None,
            grown_mib: 0.0,
            peak_mib: 0.0,
            session: None,
            open_at_end: false,
        }
    }

    /// [`monitor`] on host `gpu-node-01` (driver 570.1) with one action taken, and the
    /// agent's counters that saw it.
    fn hosted_monitor() -> (Monitor, AgentStats) {
        let mut m = monitor();
        m.source = Some(crate::model::SourceInfo {
            kind: "Simulated".into(),
            host: "gpu-node-01".into(),
            driver_version: Some("570.1".into()),
            ..crate::model::SourceInfo::default()
        });
        let act = crate::act::rules::action::Activity {
            unix_ms: 5000,
            rule: "r".into(),
            target: crate::act::rules::eval::Target::Device(0),
            action: "terminate".into(),
            outcome: crate::act::rules::action::Outcome::Acted,
            detail: String::new(),
            entry: crate::act::rules::action::Entry::Action,
        };
        m.activity.push_back(act.clone().into());
        m.events.push_back(
            crate::engine::EngineEvent {
                seq: 1,
                at_ms: 5000,
                kind: crate::engine::EngineEventKind::Activity {
                    entry: act,
                    from_command: false,
                },
            }
            .into(),
        );
        let stats = AgentStats::default();
        stats.observe(&m);
        (m, stats)
    }

    #[test]
    fn bounded_processes_keep_leakers_and_forecast_per_gpu() {
        let m = monitor();
        let stats = AgentStats::default();
        let text = render(
            &m,
            Context {
                stats: &stats,
                max_processes: 1,
                now_ms: 6500,
            },
            Format::Text,
        );
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("vramwarden_process_gpu_memory_bytes{"))
            .collect();
        // The largest process, and the leaking one beyond the bound; not the middle one.
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("name=\"big\"") && lines[0].ends_with(" 4294967296"));
        assert!(lines[1].contains("name=\"small-leaker\""));
        assert!(text.contains("pid=\"12\",name=\"small-leaker\",user=\"alice\",container=\"\",pod=\"\",gpu=\"0\",UUID=\"GPU-0\",Hostname=\"\"} 1\n"));
        // 1 GiB/min on 60 GiB free: 60 minutes, for the process and for its GPU; GPU 1 has none.
        assert!(text.contains("vramwarden_process_time_to_full_seconds{pid=\"12\""));
        assert!(text.contains("vramwarden_gpu_time_to_full_seconds{gpu=\"0\",UUID=\"GPU-0\",pci_bus_id=\"\",modelName=\"Test GPU\",Hostname=\"\"} 3600\n"), "{text}");
        assert!(!text.contains("vramwarden_gpu_time_to_full_seconds{gpu=\"1\""));
        assert!(text.contains("vramwarden_process_leak_rate_bytes_per_second{pid=\"12\""));
        // Unattributed: 10 GiB used − 8 GiB of processes on GPU 0; all 10 GiB on GPU 1.
        assert!(text.contains("vramwarden_gpu_memory_unattributed_bytes{gpu=\"0\",UUID=\"GPU-0\",pci_bus_id=\"\",modelName=\"Test GPU\",Hostname=\"\"} 2147483648\n"));
        assert!(text.contains("{gpu=\"1\",UUID=\"GPU-1\",pci_bus_id=\"\",modelName=\"Test GPU\",Hostname=\"\"} 10737418240\n"));
        assert!(text.contains("vramwarden_sample_age_seconds{Hostname=\"\"} 1.5\n"));
        assert!(!text.contains("# EOF"));
    }

    /// PyTorch's figures of a process whose companion answers, under the process's labels;
    /// nothing for processes without one.
    #[test]
    fn torch_allocator_figures_per_process() {
        let m = monitor();
        let stats = AgentStats::default();
        let ctx = Context {
            stats: &stats,
            max_processes: 10,
            now_ms: 6000,
        };
        let text = render(&m, ctx, Format::Text);
        let labels = "{pid=\"10\",name=\"big\",user=\"alice\",container=\"\",pod=\"\",gpu=\"0\",UUID=\"GPU-0\",Hostname=\"\"}";
        for (name, v) in [
            ("vramwarden_process_torch_allocated_bytes", "1073741824"),
            ("vramwarden_process_torch_reserved_bytes", "3221225472"),
            ("vramwarden_process_torch_releasable_bytes", "2147483648"),
            ("vramwarden_process_torch_inactive_split_bytes", "5242880"),
            ("vramwarden_process_torch_alloc_retries_total", "2"),
            ("vramwarden_process_torch_ooms_total", "1"),
        ] {
            assert!(
                text.contains(&format!("{name}{labels} {v}\n")),
                "{name}: {text}"
            );
        }
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("vramwarden_process_torch_") && !l.contains("pid=\"10\""))
                .count(),
            0
        );
        let om = render(&m, ctx, Format::OpenMetrics);
        assert!(
            om.contains("# TYPE vramwarden_process_torch_ooms counter\n"),
            "{om}"
        );
    }

    /// One host picked on a dashboard (`Hostname="gpu-node-01"`) selects every series the
    /// agent exports: GPU, process, PyTorch, actions and the agent's own health.
    #[test]
    fn every_series_carries_the_hostname() {
        let (m, stats) = hosted_monitor();
        let text = render(
            &m,
            Context {
                stats: &stats,
                max_processes: 10,
                now_ms: 6000,
            },
            Format::Text,
        );
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(samples.len() >= 25, "{text}");
        for family in [
            "vramwarden_process_gpu_memory_bytes{",
            "vramwarden_process_leak{",
            "vramwarden_process_torch_releasable_bytes{",
            "vramwarden_cleanup_actions_total{",
            "vramwarden_sample_age_seconds{",
        ] {
            assert!(samples.iter().any(|l| l.starts_with(family)), "no {family}");
        }
        for l in samples {
            assert!(l.contains("Hostname=\"gpu-node-01\""), "{l}");
        }
    }

    /// The whole scrape of a monitor with GPUs, a leak, PyTorch figures and an action, in
    /// both formats and both process bounds, is the one recorded in
    /// `tests/fixtures/metrics_scrape.txt` byte for byte (but the scrape's own duration and
    /// the version): a rewrite of `render` keeps every name, label, value and order.
    #[test]
    fn the_scrape_is_the_recorded_one() {
        let (m, stats) = hosted_monitor();
        let mut all = String::new();
        for format in [Format::Text, Format::OpenMetrics] {
            for max_processes in [1, 10] {
                let ctx = Context {
                    stats: &stats,
                    max_processes,
                    now_ms: 6500,
                };
                let text = render(&m, ctx, format);
                for l in text.lines() {
                    if !l.starts_with("vramwarden_scrape_duration_seconds{") {
                        all.push_str(&l.replace(env!("CARGO_PKG_VERSION"), "VERSION"));
                        all.push('\n');
                    }
                }
            }
        }
        let recorded = include_str!("../../../tests/fixtures/metrics_scrape.txt");
        if all != recorded {
            let _ = std::fs::write(std::env::temp_dir().join("metrics_scrape.txt"), &all);
        }
        assert!(
            all == recorded,
            "the scrape differs from tests/fixtures/metrics_scrape.txt (this one: metrics_scrape.txt in the temp folder)"
        );
    }

    #[test]
    fn escaped_names_and_openmetrics_counters() {
        let m = monitor();
        let stats = AgentStats::default();
        let text = render(
            &m,
            Context {
                stats: &stats,
                max_processes: 10,
                now_ms: 6000,
            },
            Format::OpenMetrics,
        );
        assert!(text.contains("name=\"we\\\"ird\\nname\""), "{text}");
        assert!(text.contains("# TYPE vramwarden_cleanup_actions counter\n"));
        assert!(text.contains("# TYPE vramwarden_build info\n"));
        assert!(text.ends_with("# EOF\n"));
        // No raw newline inside a sample line: every line is a comment or `name{…} value`.
        for l in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(l.starts_with("vramwarden_"), "{l:?}");
        }
    }

    #[test]
    fn container_and_pod_labels_come_from_the_process_facts() {
        use crate::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, GIB};
        let info = ProcInfo {
            name: "python3".into(),
            container_id: Some("e2".repeat(32)),
            container_name: Some("notebook".into()),
            pod: Some("default/jupyter-0".into()),
            ..ProcInfo::default()
        };
        let unnamed = ProcInfo {
            name: "worker".into(),
            container_id: Some("f3".repeat(32)),
            ..ProcInfo::default()
        };
        let mut engine_state = crate::engine::state::EngineState::default();
        let mut m = Monitor::new(1000, 10);
        engine_state.apply(
            &mut m,
            Snapshot {
                taken_at_ms: 5000,
                devices: vec![DeviceSample {
                    uuid: "GPU-0".into(),
                    ..DeviceSample::default()
                }],
                processes: [(10, info), (11, unnamed)]
                    .into_iter()
                    .map(|(pid, i)| ProcessSample {
                        pid,
                        used_bytes: Some(GIB),
                        info: Some(std::sync::Arc::new(i)),
                        ..ProcessSample::default()
                    })
                    .collect(),
            },
            5000,
        );
        let stats = AgentStats::default();
        let text = render(
            &m,
            Context {
                stats: &stats,
                max_processes: 10,
                now_ms: 5000,
            },
            Format::Text,
        );
        assert!(
            text.contains("name=\"python3\",user=\"\",container=\"notebook\",pod=\"jupyter-0\""),
            "{text}"
        );
        assert!(
            text.contains("name=\"worker\",user=\"\",container=\"f3f3f3f3f3f3\",pod=\"\""),
            "{text}"
        );
    }
}
