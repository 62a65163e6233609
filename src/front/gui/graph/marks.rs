//! Marks on the time axis: shaded leak and OOM windows, the forecast line, leak marks.

use crate::engine::view::Monitor;
use crate::model::{UnixMs, MIB};

/// The labels of shaded windows (unix s from, to, name): one per group of windows that
/// overlap, over the group's whole span, naming each window once ("leak: a (1) · leak: b (2)").
pub(crate) fn span_labels(spans: &[(f64, f64, String)]) -> Vec<(f64, f64, String)> {
    let mut sorted: Vec<&(f64, f64, String)> = spans.iter().collect();
    sorted.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut groups: Vec<(f64, f64, Vec<&str>)> = Vec::new();
    for (a, b, name) in sorted {
        match groups.last_mut() {
            Some(g) if *a <= g.1 => {
                g.1 = g.1.max(*b);
                if !g.2.contains(&name.as_str()) {
                    g.2.push(name);
                }
            }
            _ => groups.push((*a, *b, vec![name])),
        }
    }
    groups
        .into_iter()
        .map(|(a, b, names)| (a, b, names.join(" · ")))
        .collect()
}

/// The time windows shaded on a GPU's graph: each leak of its processes (from when it
/// began growing to its end, or now) and the 10 s before each OOM death, in view.
pub(super) fn shaded_windows(
    m: &Monitor,
    device: u32,
    (from, to): (UnixMs, UnixMs),
) -> Vec<(f64, f64, String)> {
    let s = |ms: UnixMs| ms as f64 / 1000.0;
    let leaks = m
        .leaks
        .iter()
        .filter(|l| l.info.device_index == device)
        .map(|l| {
            let end = l.ended_ms.unwrap_or(to);
            (
                l.info.since_ms,
                end,
                format!("leak: {} ({})", l.info.name, l.info.pid),
            )
        });
    let ooms = m
        .ooms
        .iter()
        .filter(|o| o.device_index == device)
        .map(|o| (o.at_ms - 10_000, o.at_ms, "OOM suspected".to_string()));
    leaks
        .chain(ooms)
        .filter(|(a, b, _)| *b >= from && *a <= to)
        .map(|(a, b, name)| (s(a.max(from)), s(b.min(to)), name))
        .collect()
}

/// The OOM forecast of `d`: from its newest sample to when it is full (`usable_mib`).
pub(super) fn forecast_line(
    snap: &crate::model::Snapshot,
    d: &crate::model::DeviceSample,
    usable_mib: f64,
) -> Option<[[f64; 2]; 2]> {
    d.time_to_full_s.zip(d.memory_used_bytes).map(|(s, u)| {
        let x0 = snap.taken_at_ms as f64 / 1000.0;
        [[x0, (u / MIB) as f64], [x0 + s, usable_mib]]
    })
}

/// Leak episodes of this GPU's processes that began in view, as marks.
pub(super) fn leak_marks(
    m: &Monitor,
    device: u32,
    (from, to): (UnixMs, UnixMs),
) -> Vec<(f64, String)> {
    m.leaks
        .iter()
        .filter(|l| {
            l.info.device_index == device && l.info.since_ms >= from && l.info.since_ms <= to
        })
        .map(|l| {
            (
                l.info.since_ms as f64 / 1000.0,
                format!("leak began: {} ({})", l.info.name, l.info.pid),
            )
        })
        .collect()
}
