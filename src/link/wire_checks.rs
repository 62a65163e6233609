//! Checks of the wire type ([`super::wire`]) on arrival, as strict as a session log's: the
//! version, every index and count within bounds, times plausible on this computer's clock and
//! in order, floats finite, text cut to its limits. An answer that fails is not applied (the
//! window keeps its last good View) and the link's status names the field. The body read is
//! capped ([`MAX_VIEW_BYTES`]) before it is parsed, so no count an agent sends sizes more
//! than that.
//!
//! Every check names every field of what it checks (a destructuring without `..`; `_` for a
//! field with nothing to check): a field added to the wire type does not compile until its
//! check says what it does with it.

use super::checks::{self, MAX_BYTES, MAX_DEVICES, MAX_LEAKS, MAX_PID, MAX_PROCESSES, MAX_TEXT};
use super::wire::{
    WireActivity, WireEvent, WirePast, WireReply, WireTarget, WireView, API_VERSION,
};
use crate::detect::forecast_alert::ForecastAlert;
use crate::detect::leak::Growing;
use crate::detect::orphans::OrphanGpu;
use crate::engine::view::{LeakKey, LeakRecord, OomRecord, ProcessRow, RecordingStatus};
use crate::model::history::delta::HistoryDelta;
use crate::model::UnixMs;

/// Largest answer of `GET /api/view` or `GET /api/past` read, bytes.
pub(crate) const MAX_VIEW_BYTES: u64 = 64 << 20;
/// Most activity lines in one answer.
const MAX_ACTIVITY: usize = 4096;
/// Longest activity detail, bytes.
pub(crate) const MAX_DETAIL: usize = 16 * 1024;
/// Most device files named for one process holding orphaned memory.
const MAX_HOLDER_FILES: usize = 256;

fn version(v: u32) -> Result<(), String> {
    if v == API_VERSION {
        Ok(())
    } else {
        Err(format!(
            "api_version: the agent speaks version {v}, this window version {API_VERSION} (update the older one)"
        ))
    }
}

fn path(what: &str, p: Option<&std::path::Path>) -> Result<(), String> {
    if p.is_some_and(|p| p.as_os_str().len() > checks::MAX_PATH) {
        return Err(format!("{what}: the agent sent an over-long path"));
    }
    Ok(())
}

fn pid(what: &str, pid: u32) -> Result<(), String> {
    if pid > MAX_PID {
        return Err(format!("{what}: the agent sent PID {pid}"));
    }
    Ok(())
}

/// The history part: its shape ([`HistoryDelta::check`]), GPUs and PIDs in range, times
/// plausible.
///
/// # Errors
/// A sentence naming the field.
pub fn history(d: &HistoryDelta, now: UnixMs) -> Result<(), String> {
    d.check(None)?;
    if let (Some(first), Some(last)) = (d.times.first(), d.times.last()) {
        checks::time("history: a time", *first, now)?;
        checks::time("history: a time", *last, now)?;
    }
    for (k, _) in &d.processes {
        pid("history", k.0.pid)?;
        checks::device_index("history: a process on", k.1)?;
    }
    for (k, _) in &d.torch {
        pid("history", k.0.pid)?;
        checks::device_index("history: a process on", k.1)?;
    }
    Ok(())
}

/// One leak episode.
///
/// # Errors
/// A sentence naming the field.
pub fn leak(l: &mut LeakRecord, now: UnixMs) -> Result<(), String> {
    let LeakRecord {
        key,
        info,
        flagged_ms,
        ended_ms,
        grown_mib,
        peak_mib,
        session,
        open_at_end: _,
    } = l;
    leak_info(info, now)?;
    match *key {
        LeakKey::Process((k, dev)) if k.pid != info.pid || dev != info.device_index => {
            return Err("leaks: a leak's key and facts name different processes".into())
        }
        LeakKey::Ghost(dev) if dev != info.device_index => {
            return Err("leaks: a ghost leak's key and facts name different GPUs".into())
        }
        _ => {}
    }
    for (what, t) in [
        ("leaks: a flag time", Some(*flagged_ms)),
        ("leaks: an end", *ended_ms),
    ] {
        if let Some(t) = t {
            checks::time(what, t, now)?;
        }
    }
    for (what, v) in [
        ("leaks: a growth of", *grown_mib),
        ("leaks: a peak of", *peak_mib),
    ] {
        checks::finite(what, v)?;
    }
    path("leaks", session.as_deref())
}

/// What a leak says about its series (a leak episode's, or a leak event's).
fn leak_info(info: &mut crate::session::LeakInfo, now: UnixMs) -> Result<(), String> {
    let crate::session::LeakInfo {
        pid: leak_pid,
        start_time_ms,
        device_index,
        name,
        user,
        ghost: _,
        since_ms,
        rate_mib_per_min,
        why,
    } = info;
    checks::device_index("leaks: a leak on", *device_index)?;
    pid("leaks", *leak_pid)?;
    checks::time("leaks: a start", *since_ms, now)?;
    checks::time("leaks: a process start time", *start_time_ms, now)?;
    checks::finite("leaks: a rate of", *rate_mib_per_min)?;
    checks::cap_text(name, MAX_TEXT);
    checks::cap_text(user, MAX_TEXT);
    checks::cap_text(why, MAX_TEXT);
    Ok(())
}

/// One OOM suspicion.
///
/// # Errors
/// A sentence naming the field.
pub fn oom(o: &mut OomRecord, now: UnixMs) -> Result<(), String> {
    let OomRecord {
        at_ms,
        device_index,
        used_pct,
        victims,
        holders,
        session,
    } = o;
    checks::device_index("ooms: an OOM on", *device_index)?;
    checks::time("ooms: an OOM time", *at_ms, now)?;
    checks::finite("ooms: a fill of", *used_pct)?;
    checks::count("ooms: victims", victims.len(), MAX_PROCESSES)?;
    checks::count("ooms: holders", holders.len(), MAX_PROCESSES)?;
    path("ooms", session.as_deref())?;
    for h in victims.iter_mut().chain(holders.iter_mut()) {
        oom_holder(h)?;
    }
    Ok(())
}

/// One process named by an OOM suspicion.
fn oom_holder(h: &mut crate::session::OomHolder) -> Result<(), String> {
    let crate::session::OomHolder {
        pid: holder_pid,
        start_time_ms: _,
        name,
        user,
        mib,
        grown_1m_mib,
        releasable_mib,
        grown_recent_mib,
        grown_over_s,
        cause_share_pct,
        likely_cause: _,
    } = h;
    pid("ooms", *holder_pid)?;
    checks::finite("ooms: a holder's memory", *mib)?;
    for v in [
        grown_1m_mib,
        releasable_mib,
        grown_recent_mib,
        grown_over_s,
        cause_share_pct,
    ] {
        *v = v.filter(|f| f.is_finite());
    }
    checks::cap_text(name, MAX_TEXT);
    checks::cap_text(user, MAX_TEXT);
    Ok(())
}

/// One activity line.
///
/// # Errors
/// A sentence naming the field.
pub fn activity(a: &mut WireActivity, now: UnixMs) -> Result<(), String> {
    let WireActivity {
        unix_ms,
        rule,
        target,
        action,
        outcome: _,
        detail,
        entry: _,
    } = a;
    checks::time("activity: a time", *unix_ms, now)?;
    match target {
        WireTarget::Process {
            key,
            info,
            used_bytes,
            origin: _,
        } => {
            pid("activity", key.0.pid)?;
            checks::device_index("activity: a process on", key.1)?;
            if let Some(info) = info {
                checks::facts(info, now).map_err(|e| format!("activity: {e}"))?;
            }
            *used_bytes = used_bytes.filter(|b| *b <= MAX_BYTES);
        }
        WireTarget::Device(i) => checks::device_index("activity: a", *i)?,
    }
    checks::cap_text(rule, MAX_TEXT);
    checks::cap_text(action, MAX_TEXT);
    checks::cap_text(detail, MAX_DETAIL);
    Ok(())
}

/// The engine's events of an answer: at most [`crate::engine::events::EVENTS_KEPT`], numbered
/// from 1 in strictly increasing order, each checked ([`event`]).
///
/// # Errors
/// A sentence naming the field.
fn events(list: &mut [WireEvent], now: UnixMs) -> Result<(), String> {
    checks::count("events", list.len(), crate::engine::events::EVENTS_KEPT)?;
    let mut last = 0;
    for e in list.iter_mut() {
        if e.seq <= last {
            return Err(format!(
                "events: number {} follows {last} (they must rise)",
                e.seq
            ));
        }
        last = e.seq;
        event(e, now)?;
    }
    Ok(())
}

/// One of the engine's events: its time plausible, its GPUs and PIDs in range, its figures
/// finite, its lists bounded, its text cut.
///
/// # Errors
/// A sentence naming the field.
fn event(e: &mut WireEvent, now: UnixMs) -> Result<(), String> {
    use crate::engine::events::EngineEventKind as K;
    let WireEvent {
        seq: _,
        at_ms,
        kind,
    } = e;
    checks::time("events: a time", *at_ms, now)?;
    match kind {
        K::LeakStarted { leak } => leak_info(leak, now),
        K::LeakEnded {
            leak,
            grown_mib,
            peak_mib,
        } => {
            checks::finite("events: a leak's growth of", *grown_mib)?;
            checks::finite("events: a leak's peak of", *peak_mib)?;
            leak_info(leak, now)
        }
        K::OomSuspected {
            device_index,
            used_pct,
            victims,
            holders,
        } => oom_suspected(*device_index, *used_pct, victims, holders),
        K::OomForecast {
            device_index,
            full_in_s,
            drivers,
        } => oom_forecast(*device_index, *full_in_s, drivers),
        K::OomForecastEnded {
            device_index,
            raised_ms,
        } => {
            checks::device_index("events: a forecast on", *device_index)?;
            checks::time("events: a forecast's raise time", *raised_ms, now)
        }
        K::Activity {
            entry,
            from_command: _,
        } => activity(entry, now),
        K::RecordingFailed { cause } => {
            checks::cap_text(cause, MAX_TEXT);
            Ok(())
        }
        K::RecordingResumed { gap } => recording_gap(gap, now),
        K::OrphanMemory { gpu } => {
            let on = [gpu.device_index];
            orphan(gpu, &on)
        }
        K::ParkLost { key, name, detail } => park_lost(key, name, detail, now),
    }
}

/// An OOM suspicion event: its GPU in range, its fill finite, its processes bounded.
fn oom_suspected(
    device_index: u32,
    used_pct: f64,
    victims: &mut [crate::session::OomHolder],
    holders: &mut [crate::session::OomHolder],
) -> Result<(), String> {
    checks::device_index("events: an OOM on", device_index)?;
    checks::finite("events: a fill of", used_pct)?;
    oom_holders("events: an OOM's", victims, holders)
}

/// An OOM forecast event: its GPU in range, its time to full a finite amount, its processes
/// bounded.
fn oom_forecast(
    device_index: u32,
    full_in_s: f64,
    drivers: &mut [crate::session::OomHolder],
) -> Result<(), String> {
    checks::device_index("events: a forecast on", device_index)?;
    amount("events: a time to full of", full_in_s)?;
    oom_holders("events: a forecast's", drivers, &mut [])
}

/// A lost park's event: its process's PID, GPU and start time in range, its texts cut.
fn park_lost(
    key: &crate::model::history::ProcSeriesKey,
    name: &mut String,
    detail: &mut String,
    now: UnixMs,
) -> Result<(), String> {
    pid("events: a park", key.0.pid)?;
    checks::device_index("events: a park on", key.1)?;
    checks::time("events: a park's process start", key.0.start_time_ms, now)?;
    checks::cap_text(name, MAX_TEXT);
    checks::cap_text(detail, MAX_DETAIL);
    Ok(())
}

/// The processes an OOM event names (`what` says whose), at most [`MAX_PROCESSES`] each.
fn oom_holders(
    what: &str,
    first: &mut [crate::session::OomHolder],
    second: &mut [crate::session::OomHolder],
) -> Result<(), String> {
    checks::count(&format!("{what} processes"), first.len(), MAX_PROCESSES)?;
    checks::count(&format!("{what} holders"), second.len(), MAX_PROCESSES)?;
    for h in first.iter_mut().chain(second.iter_mut()) {
        oom_holder(h)?;
    }
    Ok(())
}

/// The samples a session log misses, as a recording event says.
fn recording_gap(g: &mut crate::session::RecordingGap, now: UnixMs) -> Result<(), String> {
    let crate::session::RecordingGap {
        from_ms,
        to_ms,
        lost_samples: _,
        cause,
    } = g;
    checks::time("events: a gap's start", *from_ms, now)?;
    checks::time("events: a gap's end", *to_ms, now)?;
    checks::cap_text(cause, MAX_TEXT);
    Ok(())
}

/// One command's reply (the answer of a command, or a final one in the View): its version,
/// its figures (bytes within bounds, seconds finite and not negative), its text cut.
///
/// # Errors
/// A sentence naming the field.
pub fn reply(r: &mut WireReply) -> Result<(), String> {
    let WireReply {
        api_version,
        id: _,
        what,
        answer,
    } = r;
    let crate::model::reply::Answer {
        outcome: _,
        detail,
        matches,
        stage: _,
        bytes,
        seconds,
    } = answer;
    version(*api_version)?;
    if let Some(s) = *seconds {
        amount("replies: seconds of", s)?;
    }
    if bytes.is_some_and(|b| b > MAX_BYTES) {
        return Err(format!("replies: bytes of {bytes:?}"));
    }
    checks::cap_text(what, MAX_TEXT);
    checks::cap_text(detail, MAX_DETAIL);
    if let Some(m) = matches {
        m.truncate(MAX_PROCESSES);
        for x in m.iter_mut() {
            let crate::model::reply::RuleMatch { target, skipped } = x;
            checks::cap_text(target, MAX_TEXT);
            checks::cap_opt(skipped, MAX_TEXT);
        }
    }
    Ok(())
}

/// Reads and checks the answer of `POST /api/v1/command` (at most `MAX_DETAIL` × 4 bytes).
///
/// # Errors
/// A sentence for the reply shown.
pub(crate) fn decode_reply(body: &[u8]) -> Result<WireReply, String> {
    if body.len() > 4 * MAX_DETAIL {
        return Err(format!(
            "the agent's reply is over {} bytes",
            4 * MAX_DETAIL
        ));
    }
    let mut r: WireReply = serde_json::from_slice(body)
        .map_err(|e| format!("the agent's reply is not understood: {e}"))?;
    reply(&mut r)?;
    Ok(r)
}

/// A figure that must be finite and not negative (`what` names it).
fn amount(what: &str, v: f64) -> Result<(), String> {
    checks::finite(what, v)?;
    if v < 0.0 {
        return Err(format!("the agent sent {what} {v}"));
    }
    Ok(())
}

/// A GPU the agent's snapshot lists (`listed`).
fn listed_gpu(what: &str, index: u32, listed: &[u32]) -> Result<(), String> {
    checks::device_index(what, index)?;
    if !listed.contains(&index) {
        return Err(format!(
            "{what} GPU {index}, which the agent's snapshot does not list"
        ));
    }
    Ok(())
}

/// One OOM forecast alert, on a GPU of `listed`.
///
/// # Errors
/// A sentence naming the field.
pub fn forecast_alert(a: &mut ForecastAlert, listed: &[u32], now: UnixMs) -> Result<(), String> {
    let ForecastAlert {
        device_index,
        since_ms,
        full_in_s,
        drivers,
    } = a;
    listed_gpu("oom_alerts: an alert on", *device_index, listed)?;
    checks::time("oom_alerts: a raise time", *since_ms, now)?;
    if let Some(s) = *full_in_s {
        amount("oom_alerts: a time to full of", s)?;
    }
    checks::count("oom_alerts: drivers", drivers.len(), MAX_PROCESSES)?;
    for d in drivers {
        checks::cap_text(d, MAX_TEXT);
    }
    Ok(())
}

/// Most steps a guard status lists (its view keeps 12).
const MAX_GUARD_RECORDS: usize = 64;

/// One GPU's guard status, on a GPU of `listed`.
///
/// # Errors
/// A sentence naming the field.
pub fn guard(
    g: &mut crate::act::guard::GuardStatus,
    listed: &[u32],
    now: UnixMs,
) -> Result<(), String> {
    let crate::act::guard::GuardStatus {
        device_index,
        phase: _,
        dry_run: _,
        full_in_s,
        growth_mib_s,
        next,
        cannot,
        parked,
        recent,
        park_gib_s,
        park_rate_measured: _,
        resume_gib_s,
        resume_rate_measured: _,
    } = g;
    listed_gpu("guard: a status of", *device_index, listed)?;
    if let Some(s) = *full_in_s {
        amount("guard: a time to full of", s)?;
    }
    amount("guard: a growth of", *growth_mib_s)?;
    amount("guard: a park rate of", *park_gib_s)?;
    amount("guard: a resume rate of", *resume_gib_s)?;
    if let Some(n) = next {
        let crate::act::guard::NextStep {
            kind: _,
            who,
            needs_s,
            starts_at_s,
        } = n;
        amount("guard: a step's time of", *needs_s)?;
        amount("guard: a step's start of", *starts_at_s)?;
        checks::cap_text(who, MAX_TEXT);
    }
    checks::count("guard: refusals", cannot.len(), MAX_PROCESSES)?;
    checks::count("guard: parked processes", parked.len(), MAX_PROCESSES)?;
    checks::count("guard: steps", recent.len(), MAX_GUARD_RECORDS)?;
    for c in cannot {
        checks::cap_text(c, MAX_DETAIL);
    }
    for p in parked {
        guard_parked(p, now)?;
    }
    for r in recent {
        guard_step(r, now)?;
    }
    Ok(())
}

/// A process a guard parked.
fn guard_parked(p: &mut crate::act::guard::GuardParked, now: UnixMs) -> Result<(), String> {
    let crate::act::guard::GuardParked {
        who,
        bytes,
        since_ms,
        paused_grower: _,
        waits_for,
    } = p;
    checks::time("guard: a park time", *since_ms, now)?;
    if *bytes > MAX_BYTES {
        return Err(format!("guard: a parked process of {bytes} bytes"));
    }
    checks::cap_text(who, MAX_TEXT);
    checks::cap_text(waits_for, MAX_DETAIL);
    Ok(())
}

/// A step a guard took.
fn guard_step(r: &mut crate::act::guard::StepRecord, now: UnixMs) -> Result<(), String> {
    let crate::act::guard::StepRecord {
        unix_ms,
        kind: _,
        who,
        outcome: _,
        full_in_s,
        needs_s,
        took_s,
        detail,
    } = r;
    checks::time("guard: a step's time", *unix_ms, now)?;
    for v in [Some(*needs_s), *full_in_s, *took_s].into_iter().flatten() {
        amount("guard: a step's figure of", v)?;
    }
    checks::cap_text(who, MAX_TEXT);
    checks::cap_text(detail, MAX_DETAIL);
    Ok(())
}

/// One series growing now.
///
/// # Errors
/// A sentence naming the field.
pub fn growing(k: &LeakKey, g: &Growing, now: UnixMs) -> Result<(), String> {
    match k {
        LeakKey::Process((p, dev)) => {
            pid("growing", p.pid)?;
            checks::device_index("growing: a process on", *dev)?;
        }
        LeakKey::Ghost(dev) => checks::device_index("growing: a ghost on", *dev)?,
    }
    let Growing {
        since_ms,
        grown_mib,
        rate_mib_per_min,
    } = g;
    checks::time("growing: a start", *since_ms, now)?;
    amount("growing: a growth of", *grown_mib)?;
    amount("growing: a rate of", *rate_mib_per_min)
}

/// One GPU's memory held by processes not running on the agent's computer, on a GPU of
/// `listed`.
///
/// # Errors
/// A sentence naming the field.
pub fn orphan(o: &mut OrphanGpu, listed: &[u32]) -> Result<(), String> {
    let OrphanGpu {
        device_index,
        total_bytes,
        pids,
        holders,
        remedy,
    } = o;
    listed_gpu("orphans: memory on", *device_index, listed)?;
    if *total_bytes > MAX_BYTES {
        return Err(format!("orphans: the agent sent {total_bytes} bytes"));
    }
    checks::count("orphans: PIDs", pids.len(), MAX_PROCESSES)?;
    checks::count("orphans: holders", holders.len(), MAX_PROCESSES)?;
    for p in pids {
        let crate::detect::orphans::OrphanPid {
            pid: orphan_pid,
            used_bytes,
            kind: _,
        } = p;
        pid("orphans", *orphan_pid)?;
        *used_bytes = used_bytes.filter(|b| *b <= MAX_BYTES);
    }
    for h in holders {
        let crate::detect::orphans::DevHolder {
            pid: holder_pid,
            name,
            user,
            devices,
        } = h;
        pid("orphans: a holder", *holder_pid)?;
        checks::count(
            "orphans: a holder's device files",
            devices.len(),
            MAX_HOLDER_FILES,
        )?;
        checks::cap_text(name, MAX_TEXT);
        checks::cap_text(user, MAX_TEXT);
        for d in devices {
            checks::cap_text(d, MAX_TEXT);
        }
    }
    checks::cap_text(remedy, MAX_DETAIL);
    Ok(())
}

/// The parts of an answer its watches fill: forecast alerts, growing series, orphaned
/// memory and the guard's status.
struct Watched<'a> {
    oom_alerts: &'a mut Vec<ForecastAlert>,
    growing: &'a [(LeakKey, Growing)],
    orphans: &'a mut Vec<OrphanGpu>,
    guard: &'a mut Vec<crate::act::guard::GuardStatus>,
}

/// The forecast alerts, growing series and orphaned memory of an answer: counts first, then
/// each value; alerts and orphans only on GPUs its snapshot lists (`listed`).
///
/// # Errors
/// A sentence naming the field.
fn watches(w: Watched<'_>, listed: &[u32], now: UnixMs) -> Result<(), String> {
    checks::count("oom_alerts", w.oom_alerts.len(), MAX_DEVICES)?;
    checks::count("growing series", w.growing.len(), MAX_PROCESSES)?;
    checks::count("orphans", w.orphans.len(), MAX_DEVICES)?;
    checks::count("guard", w.guard.len(), MAX_DEVICES)?;
    for g in w.guard.iter_mut() {
        guard(g, listed, now)?;
    }
    for a in w.oom_alerts.iter_mut() {
        forecast_alert(a, listed, now)?;
    }
    for (k, g) in w.growing {
        growing(k, g, now)?;
    }
    for o in w.orphans.iter_mut() {
        orphan(o, listed)?;
    }
    Ok(())
}

/// A process row as the agent's engine derived it: its identity and GPU in range, its times
/// plausible, its memory figures within bounds (one out of range is dropped, as in a
/// snapshot), its facts cut to their limits.
///
/// # Errors
/// A sentence naming the field.
fn row(r: &mut ProcessRow, now: UnixMs) -> Result<(), String> {
    let ProcessRow {
        key,
        device_index,
        info,
        used_bytes,
        peak_bytes,
        delta_1m_bytes,
        first_seen_ms,
        last_seen_ms,
        exited_at_ms,
        cpu_pct,
        rss_bytes,
        color_slot: _,
        torch,
        sm_util_pct,
        parked,
        simulated: _,
    } = r;
    pid("rows", key.pid)?;
    checks::device_index("rows: a process on", *device_index)?;
    checks::facts(info, now).map_err(|e| format!("rows: {e}"))?;
    for (what, t) in [
        ("first sighting", Some(*first_seen_ms)),
        ("last sighting", Some(*last_seen_ms)),
        ("exit", *exited_at_ms),
    ] {
        if let Some(t) = t {
            checks::time(&format!("rows: a time of {what}"), t, now)?;
        }
    }
    *used_bytes = used_bytes.filter(|b| *b <= MAX_BYTES);
    *peak_bytes = (*peak_bytes).min(MAX_BYTES);
    *delta_1m_bytes = delta_1m_bytes.filter(|d| d.unsigned_abs() <= MAX_BYTES);
    *rss_bytes = rss_bytes.filter(|b| *b <= MAX_BYTES);
    *cpu_pct = cpu_pct.filter(|c| c.is_finite() && *c >= 0.0);
    *sm_util_pct = sm_util_pct.filter(|u| *u <= 100);
    *torch = torch.filter(|t| t.reserved_bytes <= MAX_BYTES && t.allocated_bytes <= MAX_BYTES);
    if let Some(p) = parked {
        checks::time("rows: a park's start", p.since_ms, now)?;
        p.bytes = p.bytes.filter(|b| *b <= MAX_BYTES);
    }
    Ok(())
}

/// The rows and the last activity of an answer: counts first, then each value.
///
/// # Errors
/// A sentence naming the field.
fn rows(
    rows_sent: &mut [ProcessRow],
    last_active: &[(crate::model::history::ProcSeriesKey, UnixMs)],
    now: UnixMs,
) -> Result<(), String> {
    checks::count("rows", rows_sent.len(), super::wire::MAX_ROWS)?;
    checks::count("last_active", last_active.len(), MAX_PROCESSES)?;
    for r in rows_sent.iter_mut() {
        row(r, now)?;
    }
    for ((p, gpu), t) in last_active {
        pid("last_active", p.pid)?;
        checks::device_index("last_active: a process on", *gpu)?;
        checks::time("last_active: a time", *t, now)?;
    }
    Ok(())
}

/// The recording's status: its error cut, its path not over-long.
fn recording(r: &mut RecordingStatus) -> Result<(), String> {
    let RecordingStatus {
        path: file,
        active: _,
        bytes: _,
        error,
        samples: _,
        lost: _,
    } = r;
    checks::cap_opt(error, MAX_TEXT);
    path("recording", file.as_deref())
}

/// A whole answer of `GET /api/view`, checked and cleaned against `now` (this computer's
/// clock); the history's order against the window's own is checked when it is applied.
///
/// # Errors
/// A sentence naming the field; nothing of the answer is used then.
pub fn view(v: &mut WireView, now: UnixMs) -> Result<(), String> {
    let WireView {
        api_version,
        source,
        status,
        interval_ms,
        latest,
        latest_received_ms,
        last_error,
        recording: rec,
        history_end_tick,
        history: delta,
        leaks,
        ooms,
        activity: lines,
        ticks: _,
        oom_alerts,
        growing: grows,
        orphans,
        guard: guards,
        replies,
        rows: process_rows,
        rows_complete: _,
        last_active,
        events: engine_events,
    } = v;
    version(*api_version)?;
    checks::interval(*interval_ms).map_err(|e| format!("interval_ms: {e}"))?;
    if let Some(s) = source {
        checks::source(s);
    }
    latest_sample(latest, *latest_received_ms, now)?;
    history(delta, now)?;
    if delta.end_tick() > *history_end_tick {
        return Err("history: the delta ends after the agent's newest tick".into());
    }
    records(leaks, ooms, lines, now)?;
    final_replies(replies)?;
    let listed: Vec<u32> = latest
        .as_ref()
        .map(|s| s.devices.iter().map(|d| d.index).collect())
        .unwrap_or_default();
    let watched = Watched {
        oom_alerts,
        growing: grows,
        orphans,
        guard: guards,
    };
    watches(watched, &listed, now)?;
    rows(process_rows, last_active, now)?;
    events(engine_events, now)?;
    if let crate::engine::view::SourceStatus::Failed(e) = status {
        checks::cap_text(e, MAX_TEXT);
    }
    checks::cap_opt(last_error, MAX_TEXT);
    recording(rec)
}

/// The newest sample of a View and when it arrived, checked against `now`.
fn latest_sample(
    latest: &mut Option<crate::model::Snapshot>,
    received_ms: Option<UnixMs>,
    now: UnixMs,
) -> Result<(), String> {
    if let Some(snap) = latest.as_mut() {
        checks::snapshot(snap, now).map_err(|e| format!("latest: {e}"))?;
    }
    if let Some(t) = received_ms {
        checks::time("latest_received_ms", t, now)?;
    }
    Ok(())
}

/// A View's leaks, OOM suspicions and activity lines: each list within its bound, each entry
/// checked.
fn records(
    leaks: &mut [LeakRecord],
    ooms: &mut [OomRecord],
    lines: &mut [WireActivity],
    now: UnixMs,
) -> Result<(), String> {
    checks::count("leaks", leaks.len(), MAX_LEAKS)?;
    for l in leaks.iter_mut() {
        leak(l, now)?;
    }
    checks::count("OOM suspicions", ooms.len(), MAX_LEAKS)?;
    for o in ooms.iter_mut() {
        oom(o, now)?;
    }
    checks::count("activity lines", lines.len(), MAX_ACTIVITY)?;
    for a in lines.iter_mut() {
        activity(a, now)?;
    }
    Ok(())
}

/// A View's replies to commands: at most as many as the engine keeps, each checked and final.
fn final_replies(replies: &mut [WireReply]) -> Result<(), String> {
    checks::count(
        "replies",
        replies.len(),
        crate::engine::command::REPLIES_KEPT,
    )?;
    for r in replies.iter_mut() {
        reply(r)?;
        if !r.answer.is_final() {
            return Err("replies: the View carries final replies only".into());
        }
    }
    Ok(())
}

/// An answer of `GET /api/past`, checked like [`view`]'s leaks and OOMs.
///
/// # Errors
/// A sentence naming the field.
pub fn past(p: &mut WirePast, now: UnixMs) -> Result<(), String> {
    let WirePast {
        api_version,
        leaks,
        ooms,
    } = p;
    version(*api_version)?;
    checks::count("past leaks", leaks.len(), 16 * MAX_LEAKS)?;
    checks::count("past OOM suspicions", ooms.len(), 16 * MAX_LEAKS)?;
    for l in leaks.iter_mut() {
        leak(l, now)?;
    }
    for o in ooms.iter_mut() {
        oom(o, now)?;
    }
    Ok(())
}

/// The `api_version` of an answer that did not read as this version's type.
#[derive(serde::Deserialize)]
struct Versioned {
    api_version: u32,
}

/// Reads and checks an answer of `GET /api/view`. An answer of another version (an agent of
/// version 3 sends no rows) is refused with the sentence naming both versions, not with the
/// field it lacks.
///
/// # Errors
/// A sentence for the link's status.
pub fn decode_view(body: &[u8], now: UnixMs) -> Result<WireView, String> {
    if body.len() as u64 > MAX_VIEW_BYTES {
        return Err(format!("the agent's answer is over {MAX_VIEW_BYTES} bytes"));
    }
    let mut v: WireView =
        serde_json::from_slice(body).map_err(|e| {
            match serde_json::from_slice::<Versioned>(body).map(|v| version(v.api_version)) {
                Ok(Err(other)) => other,
                _ => format!("the agent's view is not understood: {e}"),
            }
        })?;
    view(&mut v, now)?;
    Ok(v)
}

/// Reads and checks an answer of `GET /api/past`.
///
/// # Errors
/// A sentence for the Leaks tab.
pub fn decode_past(body: &[u8], now: UnixMs) -> Result<WirePast, String> {
    if body.len() as u64 > MAX_VIEW_BYTES {
        return Err(format!("the agent's answer is over {MAX_VIEW_BYTES} bytes"));
    }
    let mut p: WirePast = serde_json::from_slice(body)
        .map_err(|e| format!("the agent's past leaks are not understood: {e}"))?;
    past(&mut p, now)?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ProcessKey;

    const NOW: UnixMs = 1_700_000_000_000;

    fn alert(device_index: u32, full_in_s: Option<f64>) -> ForecastAlert {
        ForecastAlert {
            device_index,
            since_ms: NOW,
            full_in_s,
            drivers: vec!["x".repeat(5 * MAX_TEXT)],
        }
    }

    #[test]
    fn forecast_alerts_on_listed_gpus_with_a_finite_time_pass_and_others_are_refused() {
        let mut a = alert(1, Some(90.0));
        forecast_alert(&mut a, &[0, 1], NOW).expect("a good alert");
        assert!(a.drivers[0].len() <= MAX_TEXT, "its text is cut");
        let e = forecast_alert(&mut alert(2, None), &[0, 1], NOW).expect_err("not listed");
        assert!(e.contains("oom_alerts") && e.contains("GPU 2"), "{e}");
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            let e = forecast_alert(&mut alert(0, Some(bad)), &[0], NOW).expect_err("bad time");
            assert!(e.contains("oom_alerts: a time to full"), "{e}");
        }
    }

    #[test]
    fn growing_series_need_finite_non_negative_figures_and_a_pid_in_range() {
        let key = LeakKey::Process((
            ProcessKey {
                pid: 7,
                start_time_ms: 0,
            },
            0,
        ));
        let good = Growing {
            since_ms: NOW - 60_000,
            grown_mib: 10.0,
            rate_mib_per_min: 10.0,
        };
        growing(&key, &good, NOW).expect("a good series");
        let nan = Growing {
            rate_mib_per_min: f64::NAN,
            ..good
        };
        let e = growing(&key, &nan, NOW).expect_err("NaN");
        assert!(e.contains("growing: a rate of NaN"), "{e}");
        let shrinking = Growing {
            grown_mib: -3.0,
            ..good
        };
        assert!(growing(&key, &shrinking, NOW).is_err());
        let far = LeakKey::Process((
            ProcessKey {
                pid: MAX_PID + 1,
                start_time_ms: 0,
            },
            0,
        ));
        assert!(growing(&far, &good, NOW).is_err());
        assert!(growing(&LeakKey::Ghost(MAX_DEVICES as u32), &good, NOW).is_err());
    }

    /// A row of the simulated GPUs' View after two samples.
    fn a_row() -> ProcessRow {
        use crate::source::GpuSource;
        let mut sim = crate::source::sim::SimSource::demo(NOW - 10_000);
        let mut engine_state = crate::engine::state::EngineState::default();
        let mut m = crate::engine::view::Monitor::new(1000, 10);
        for t in [NOW - 1_000, NOW] {
            engine_state.apply(&mut m, sim.sample(t).expect("sim"), t);
        }
        let r = m.rows().next().cloned();
        r.expect("a row")
    }

    #[test]
    fn a_row_out_of_range_is_refused_and_its_figures_out_of_bounds_dropped() {
        let good = a_row();
        let mut r = good.clone();
        row(&mut r, NOW).expect("a good row");
        assert_eq!(r, good, "a good row is taken as it is");
        let mut far_pid = good.clone();
        far_pid.key.pid = MAX_PID + 1;
        assert!(row(&mut far_pid, NOW).is_err_and(|e| e.contains("rows")));
        let mut far_gpu = good.clone();
        far_gpu.device_index = MAX_DEVICES as u32;
        assert!(row(&mut far_gpu, NOW).is_err());
        let mut ahead = good.clone();
        ahead.exited_at_ms = Some(NOW + 3_600_000);
        let e = row(&mut ahead, NOW).expect_err("an exit an hour ahead");
        assert!(e.contains("rows: a time of exit"), "{e}");
        let mut odd = good.clone();
        odd.used_bytes = Some(u64::MAX);
        odd.peak_bytes = u64::MAX;
        odd.cpu_pct = Some(f32::NAN);
        odd.sm_util_pct = Some(400);
        odd.delta_1m_bytes = Some(i64::MIN);
        std::sync::Arc::make_mut(&mut odd.info).cmdline = "x".repeat(1 << 20);
        row(&mut odd, NOW).expect("taken, cleaned");
        assert_eq!(
            (
                odd.used_bytes,
                odd.peak_bytes,
                odd.cpu_pct,
                odd.sm_util_pct,
                odd.delta_1m_bytes
            ),
            (None, MAX_BYTES, None, None, None)
        );
        assert!(odd.info.cmdline.len() < 1 << 20);
        let key = good.series_key();
        let mut many = vec![good.clone(); super::super::wire::MAX_ROWS + 1];
        assert!(rows(&mut many, &[], NOW).is_err_and(|e| e.contains("rows")));
        assert!(
            rows(&mut [], &[(key, NOW + 3_600_000)], NOW).is_err_and(|e| e.contains("last_active"))
        );
        assert!(rows(&mut [good], &[(key, NOW)], NOW).is_ok());
    }

    /// The reply on the wire, as `POST /api/v1/command` and the View's `replies` write it.
    const PARKED: &str = r#"{"api_version":7,"id":17,"what":"park (GPU memory to host memory)","outcome":"acted","detail":"parked python (PID 42) in 16.8 s","bytes":43486543872,"seconds":16.8}"#;

    #[test]
    fn a_reply_reads_and_writes_as_its_golden_text_and_round_trips() {
        use crate::engine::command::{Answer, Stage};
        let r = decode_reply(PARKED.as_bytes()).expect("a good reply");
        assert_eq!(r.id, 17);
        assert_eq!(r.answer.stage, Stage::Final);
        assert_eq!(
            (r.answer.outcome, r.answer.bytes, r.answer.seconds),
            (
                crate::model::outcome::Outcome::Acted,
                Some(43_486_543_872),
                Some(16.8)
            )
        );
        assert_eq!(serde_json::to_string(&r).expect("json"), PARKED);
        let accepted = WireReply {
            api_version: API_VERSION,
            id: 18,
            what: "resume".into(),
            answer: Answer::accepted("resuming"),
        };
        let text = serde_json::to_string(&accepted).expect("json");
        assert!(text.contains(r#""stage":"accepted""#), "{text}");
        assert_eq!(decode_reply(text.as_bytes()), Ok(accepted));
    }

    #[test]
    fn a_reply_with_bad_figures_or_another_version_is_refused_and_its_text_cut() {
        let edit = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_str(PARKED).expect("json");
            f(&mut v);
            decode_reply(v.to_string().as_bytes())
        };
        let e = edit(&|v| v["seconds"] = (-1.0).into()).expect_err("negative seconds");
        assert!(e.contains("replies: seconds"), "{e}");
        let e = edit(&|v| v["bytes"] = u64::MAX.into()).expect_err("bytes");
        assert!(e.contains("replies: bytes"), "{e}");
        let e = edit(&|v| v["api_version"] = 2.into()).expect_err("version");
        assert!(e.contains("api_version"), "{e}");
        assert!(edit(&|v| v["stage"] = "later".into()).is_err());
        let long = edit(&|v| v["detail"] = "d".repeat(5 * MAX_DETAIL).into());
        assert!(
            long.is_err_and(|e| e.contains("bytes")),
            "over the body's limit"
        );
        let cut = edit(&|v| {
            v["what"] = "w".repeat(2 * MAX_TEXT).into();
            v["detail"] = "d".repeat(2 * MAX_DETAIL).into();
        })
        .expect("cut, kept");
        assert!(cut.what.len() <= MAX_TEXT && cut.answer.detail.len() <= MAX_DETAIL);
        // The View carries final replies only.
        let mut r = decode_reply(PARKED.as_bytes()).expect("good");
        r.answer.stage = crate::engine::command::Stage::Accepted;
        let mut v = WireView::of(&crate::engine::view::Monitor::new(1000, 10), 0, 10);
        v.replies.push(r);
        let e = view(&mut v, NOW).expect_err("an accepted reply in the View");
        assert!(e.contains("final replies only"), "{e}");
    }

    #[test]
    fn orphaned_memory_is_refused_off_the_listed_gpus_and_its_counts_are_capped() {
        let mut o = OrphanGpu {
            device_index: 0,
            total_bytes: 1 << 30,
            pids: Vec::new(),
            holders: Vec::new(),
            remedy: "r".repeat(2 * MAX_DETAIL),
        };
        orphan(&mut o, &[0]).expect("good");
        assert!(o.remedy.len() <= MAX_DETAIL);
        let e = orphan(&mut o.clone(), &[1]).expect_err("not listed");
        assert!(e.contains("orphans: memory on GPU 0"), "{e}");
        o.total_bytes = u64::MAX;
        assert!(orphan(&mut o, &[0]).is_err());
    }
}
