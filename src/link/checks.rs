//! What the window accepts from an agent: every value an agent sends is checked as strictly as
//! a session log's before it reaches the monitor. A remote number never sizes an allocation
//! (device indices are below [`MAX_DEVICES`], counts are bounded), times must be plausible on
//! this computer's clock (an agent's sample from the far future would make every later one look
//! old), floats finite. Over-long text is cut to its limit (a long command line is real;
//! nothing else depends on its length). A reply that fails is not applied, and the link shows
//! why as its status.

use crate::model::{ProcInfo, Snapshot, SourceInfo, UnixMs};

/// Most GPUs an agent may list; device indices are below it.
pub const MAX_DEVICES: usize = 64;
/// Most process entries in one snapshot.
pub const MAX_PROCESSES: usize = 16_384;
/// Most leak entries in one answer.
pub const MAX_LEAKS: usize = 4096;
/// Most sessions in the agent's list.
pub(crate) const MAX_SESSIONS: usize = 100_000;
/// How far ahead of this computer's clock an agent's time may be.
pub const MAX_AHEAD_MS: UnixMs = 10 * 60_000;
/// How old an agent's latest sample may be (older: the agent's sampler is stuck, or its clock
/// is far behind).
const MAX_BEHIND_MS: UnixMs = 24 * 3_600_000;
/// Longest short text (names, users, ids, versions, errors), bytes.
pub const MAX_TEXT: usize = crate::model::MAX_PROC_TEXT;
/// Longest command line, bytes.
const MAX_CMDLINE: usize = crate::model::MAX_PROC_CMDLINE;
/// Largest memory figure (bytes) taken as a reading: 1 PiB.
pub(crate) const MAX_BYTES: u64 = 1 << 50;
/// Largest PID Linux hands out (`PID_MAX_LIMIT` on 64-bit systems).
pub const MAX_PID: u32 = 1 << 22;
/// Longest path the agent may name (its session log), bytes.
pub const MAX_PATH: usize = 4096;
/// Largest session log the window downloads, bytes.
pub(crate) const MAX_DOWNLOAD_BYTES: u64 = 16 << 30;
/// Sampling intervals an agent may announce, ms (the settings' range).
const INTERVAL_MS: std::ops::RangeInclusive<u64> = 100..=3_600_000;

/// Cuts `s` to at most `max` bytes, at a character boundary, marking the cut with `…`.
pub fn cap_text(s: &mut String, max: usize) {
    crate::model::cut_text(s, max);
}

/// [`cap_text`] for an optional text.
pub fn cap_opt(s: &mut Option<String>, max: usize) {
    if let Some(s) = s {
        cap_text(s, max);
    }
}

/// A time an agent sent (`what` names it): not before 1970, not past [`MAX_AHEAD_MS`] ahead
/// of `now`.
///
/// # Errors
/// A sentence for the link's status.
pub fn time(what: &str, t: UnixMs, now: UnixMs) -> Result<(), String> {
    if t < 0 {
        return Err(format!("the agent sent {what} before 1970 ({t} ms)"));
    }
    if t > now.saturating_add(MAX_AHEAD_MS) {
        return Err(format!(
            "the agent's {what} is {} ahead of this computer's clock (at most {} allowed): check both clocks",
            crate::model::format::duration(t.saturating_sub(now)),
            crate::model::format::duration(MAX_AHEAD_MS)
        ));
    }
    Ok(())
}

/// A device index (`what` names where it came from).
///
/// # Errors
/// Beyond [`MAX_DEVICES`].
pub fn device_index(what: &str, index: u32) -> Result<(), String> {
    if index as usize >= MAX_DEVICES {
        return Err(format!(
            "the agent sent {what} GPU index {index} (at most {} GPUs are taken)",
            MAX_DEVICES
        ));
    }
    Ok(())
}

/// A float that must be finite (`what` names it).
///
/// # Errors
/// NaN or infinite.
pub fn finite(what: &str, v: f64) -> Result<(), String> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(format!("the agent sent {what} {v}"))
    }
}

/// A count that must stay within `max`.
///
/// # Errors
/// Over `max`.
pub fn count(what: &str, n: usize, max: usize) -> Result<(), String> {
    if n > max {
        return Err(format!(
            "the agent sent {n} {what} (at most {max} are taken)"
        ));
    }
    Ok(())
}

/// The agent's sampling interval.
///
/// # Errors
/// Outside [`INTERVAL_MS`].
pub fn interval(ms: u64) -> Result<(), String> {
    if INTERVAL_MS.contains(&ms) {
        Ok(())
    } else {
        Err(format!(
            "the agent announced a sampling interval of {ms} ms (100 ms to 1 h are taken)"
        ))
    }
}

/// The source description: text cut to its limits.
pub fn source(s: &mut SourceInfo) {
    cap_text(&mut s.kind, MAX_TEXT);
    cap_text(&mut s.host, MAX_TEXT);
    cap_opt(&mut s.driver_version, MAX_TEXT);
    cap_opt(&mut s.nvml_version, MAX_TEXT);
    cap_opt(&mut s.cuda_version, MAX_TEXT);
}

fn proc_info(info: &mut ProcInfo) {
    info.cut_texts();
}

/// A process's facts: a plausible start time, text cut to its limits (copied only when cut).
///
/// # Errors
/// A start time before 1970 or far ahead of `now`.
pub fn facts(info: &mut std::sync::Arc<ProcInfo>, now: UnixMs) -> Result<(), String> {
    time("a process start time", info.start_time_ms, now)?;
    if over_long(info) {
        proc_info(std::sync::Arc::make_mut(info));
    }
    Ok(())
}

fn over_long(info: &ProcInfo) -> bool {
    [&info.name, &info.user].iter().any(|s| s.len() > MAX_TEXT)
        || info.cmdline.len() > MAX_CMDLINE
        || [&info.container_id, &info.container_name, &info.pod]
            .iter()
            .any(|s| s.as_ref().is_some_and(|s| s.len() > MAX_TEXT))
}

fn devices(snap: &mut Snapshot) -> Result<(), String> {
    count("GPUs", snap.devices.len(), MAX_DEVICES)?;
    let mut seen = [false; MAX_DEVICES];
    for d in &mut snap.devices {
        device_index("a", d.index)?;
        if std::mem::replace(&mut seen[d.index as usize], true) {
            return Err(format!("the agent listed GPU {} twice", d.index));
        }
        cap_text(&mut d.uuid, MAX_TEXT);
        cap_text(&mut d.name, MAX_TEXT);
        cap_opt(&mut d.pci_bus_id, MAX_TEXT);
        cap_opt(&mut d.process_list_error, MAX_TEXT);
        for v in [
            &mut d.memory_total_bytes,
            &mut d.memory_used_bytes,
            &mut d.memory_reserved_bytes,
            &mut d.memory_free_bytes,
        ] {
            *v = v.filter(|b| *b <= MAX_BYTES);
        }
        for v in [
            &mut d.power_w,
            &mut d.power_limit_w,
            &mut d.time_to_full_s,
            &mut d.time_to_full_earliest_s,
        ] {
            *v = v.filter(|f| f.is_finite() && *f >= 0.0);
        }
    }
    Ok(())
}

/// A snapshot from an agent, checked and cleaned against `now` (this computer's clock): at
/// most [`MAX_DEVICES`] GPUs with distinct indices below it, processes only on listed GPUs
/// and at most [`MAX_PROCESSES`], plausible times, readings in range, text cut; then
/// [`Snapshot::sanitize`] as for any source.
///
/// # Errors
/// A sentence for the link's status; nothing of the snapshot is used then.
pub fn snapshot(snap: &mut Snapshot, now: UnixMs) -> Result<(), String> {
    time("latest sample time", snap.taken_at_ms, now)?;
    if snap.taken_at_ms < now.saturating_sub(MAX_BEHIND_MS) {
        return Err(format!(
            "the agent's latest sample is {} old: its sampler is stuck or its clock is far behind",
            crate::model::format::duration(now.saturating_sub(snap.taken_at_ms))
        ));
    }
    devices(snap)?;
    count("processes", snap.processes.len(), MAX_PROCESSES)?;
    let listed: Vec<u32> = snap.devices.iter().map(|d| d.index).collect();
    for p in &mut snap.processes {
        if !listed.contains(&p.device_index) {
            device_index("a process on", p.device_index)?;
            return Err(format!(
                "the agent sent a process on GPU {}, which it does not list",
                p.device_index
            ));
        }
        if p.pid > MAX_PID {
            return Err(format!("the agent sent PID {}", p.pid));
        }
        p.used_bytes = p.used_bytes.filter(|b| *b <= MAX_BYTES);
        p.rss_bytes = p.rss_bytes.filter(|b| *b <= MAX_BYTES);
        p.cpu_pct = p.cpu_pct.filter(|c| c.is_finite() && *c >= 0.0);
        p.sm_util_pct = p.sm_util_pct.filter(|u| *u <= 100);
        if let Some(info) = &mut p.info {
            facts(info, now)?;
        }
    }
    held_within_totals(snap)?;
    snap.sanitize();
    Ok(())
}

/// How many times its size a GPU's processes may hold together (memory shared between
/// processes through CUDA IPC is counted in each).
const MAX_OVERCOUNT: u64 = 4;

/// Refuses processes that hold more than their GPU has: one above its total, or all of them
/// above [`MAX_OVERCOUNT`] × the total (16 384 processes of 38 GiB on a 140 GiB GPU).
fn held_within_totals(snap: &Snapshot) -> Result<(), String> {
    for d in &snap.devices {
        let Some(total) = d.memory_total_bytes else {
            continue;
        };
        let mut sum = 0u64;
        for p in snap.processes.iter().filter(|p| p.device_index == d.index) {
            let held = p.used_bytes.unwrap_or(0);
            if held > total {
                return Err(format!(
                    "the agent sent PID {} holding {held} bytes on GPU {}, which has {total}",
                    p.pid, d.index
                ));
            }
            sum = sum.saturating_add(held);
        }
        if sum > total.saturating_mul(MAX_OVERCOUNT) {
            return Err(format!(
                "the agent's processes on GPU {} hold {sum} bytes together, more than {MAX_OVERCOUNT} × its {total}",
                d.index
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary() {
        let mut s = "ééééé".to_string();
        cap_text(&mut s, 6);
        assert!(s.len() <= 6, "{s}");
        assert!(s.ends_with('…'));
        let mut short = "ok".to_string();
        cap_text(&mut short, 6);
        assert_eq!(short, "ok");
    }

    #[test]
    fn times_far_ahead_are_refused_with_a_reason() {
        let now = 1_700_000_000_000;
        assert!(time("x", now + 1000, now).is_ok());
        let e = time("latest sample time", i64::MAX, now).expect_err("far ahead");
        assert!(e.contains("ahead of this computer's clock"), "{e}");
        assert!(time("x", -1, now).is_err());
    }
}
