//! Checks of the wire type ([`super::wire`]) on arrival, as strict as a session log's: the
//! version, every index and count within bounds, times plausible on this computer's clock and
//! in order, floats finite, text cut to its limits. An answer that fails is not applied (the
//! window keeps its last good View) and the link's status names the field. The body read is
//! capped ([`MAX_VIEW_BYTES`]) before it is parsed, so no count an agent sends sizes more
//! than that.

use super::checks::{self, MAX_BYTES, MAX_DEVICES, MAX_LEAKS, MAX_PID, MAX_PROCESSES, MAX_TEXT};
use super::wire::{WireActivity, WirePast, WireReply, WireTarget, WireView, API_VERSION};
use crate::detect::forecast_alert::ForecastAlert;
use crate::detect::leak::Growing;
use crate::detect::orphans::OrphanGpu;
use crate::engine::view::{LeakKey, LeakRecord, OomRecord};
use crate::model::history::delta::HistoryDelta;
use crate::model::UnixMs;

/// Largest answer of `GET /api/view` or `GET /api/past` read, bytes.
pub const MAX_VIEW_BYTES: u64 = 64 << 20;
/// Most activity lines in one answer.
pub const MAX_ACTIVITY: usize = 4096;
/// Most notices in one answer.
pub const MAX_NOTICES: usize = 256;
/// Longest activity detail or notice, bytes.
pub const MAX_DETAIL: usize = 16 * 1024;
/// Most device files named for one process holding orphaned memory.
pub const MAX_HOLDER_FILES: usize = 256;

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
    checks::device_index("leaks: a leak on", l.info.device_index)?;
    pid("leaks", l.info.pid)?;
    match l.key {
        LeakKey::Process((k, dev)) if k.pid != l.info.pid || dev != l.info.device_index => {
            return Err("leaks: a leak's key and facts name different processes".into())
        }
        LeakKey::Ghost(dev) if dev != l.info.device_index => {
            return Err("leaks: a ghost leak's key and facts name different GPUs".into())
        }
        _ => {}
    }
    for (what, t) in [
        ("leaks: a start", Some(l.info.since_ms)),
        ("leaks: a flag time", Some(l.flagged_ms)),
        ("leaks: an end", l.ended_ms),
        ("leaks: a process start time", Some(l.info.start_time_ms)),
    ] {
        if let Some(t) = t {
            checks::time(what, t, now)?;
        }
    }
    for (what, v) in [
        ("leaks: a rate of", l.info.rate_mib_per_min),
        ("leaks: a growth of", l.grown_mib),
        ("leaks: a peak of", l.peak_mib),
    ] {
        checks::finite(what, v)?;
    }
    path("leaks", l.session.as_deref())?;
    checks::cap_text(&mut l.info.name, MAX_TEXT);
    checks::cap_text(&mut l.info.user, MAX_TEXT);
    checks::cap_text(&mut l.info.why, MAX_TEXT);
    Ok(())
}

/// One OOM suspicion.
///
/// # Errors
/// A sentence naming the field.
pub fn oom(o: &mut OomRecord, now: UnixMs) -> Result<(), String> {
    checks::device_index("ooms: an OOM on", o.device_index)?;
    checks::time("ooms: an OOM time", o.at_ms, now)?;
    checks::finite("ooms: a fill of", o.used_pct)?;
    checks::count("ooms: victims", o.victims.len(), MAX_PROCESSES)?;
    checks::count("ooms: holders", o.holders.len(), MAX_PROCESSES)?;
    path("ooms", o.session.as_deref())?;
    for h in o.victims.iter_mut().chain(o.holders.iter_mut()) {
        pid("ooms", h.pid)?;
        checks::finite("ooms: a holder's memory", h.mib)?;
        for v in [
            &mut h.grown_1m_mib,
            &mut h.releasable_mib,
            &mut h.grown_recent_mib,
            &mut h.grown_over_s,
            &mut h.cause_share_pct,
        ] {
            *v = v.filter(|f| f.is_finite());
        }
        checks::cap_text(&mut h.name, MAX_TEXT);
        checks::cap_text(&mut h.user, MAX_TEXT);
    }
    Ok(())
}

/// One activity line.
///
/// # Errors
/// A sentence naming the field.
pub fn activity(a: &mut WireActivity, now: UnixMs) -> Result<(), String> {
    checks::time("activity: a time", a.unix_ms, now)?;
    match &mut a.target {
        WireTarget::Process {
            key,
            name,
            user,
            used_bytes,
            ..
        } => {
            pid("activity", key.0.pid)?;
            checks::device_index("activity: a process on", key.1)?;
            checks::cap_text(name, MAX_TEXT);
            checks::cap_text(user, MAX_TEXT);
            *used_bytes = used_bytes.filter(|b| *b <= MAX_BYTES);
        }
        WireTarget::Device(i) => checks::device_index("activity: a", *i)?,
    }
    checks::cap_text(&mut a.rule, MAX_TEXT);
    checks::cap_text(&mut a.action, MAX_TEXT);
    checks::cap_text(&mut a.detail, MAX_DETAIL);
    Ok(())
}

/// One command's reply (the answer of a command, or a final one in the View): its version,
/// its figures (bytes within bounds, seconds finite and not negative), its text cut.
///
/// # Errors
/// A sentence naming the field.
pub fn reply(r: &mut WireReply) -> Result<(), String> {
    version(r.api_version)?;
    let a = &mut r.answer;
    if let Some(s) = a.seconds {
        amount("replies: seconds of", s)?;
    }
    if a.bytes.is_some_and(|b| b > MAX_BYTES) {
        return Err(format!("replies: bytes of {:?}", a.bytes));
    }
    checks::cap_text(&mut r.what, MAX_TEXT);
    checks::cap_text(&mut a.detail, MAX_DETAIL);
    if let Some(m) = &mut a.matches {
        m.truncate(MAX_PROCESSES);
        for x in m.iter_mut() {
            checks::cap_text(&mut x.target, MAX_TEXT);
            checks::cap_opt(&mut x.skipped, MAX_TEXT);
        }
    }
    Ok(())
}

/// Reads and checks the answer of `POST /api/v1/command` (at most `MAX_DETAIL` × 4 bytes).
///
/// # Errors
/// A sentence for the reply shown.
pub fn decode_reply(body: &[u8]) -> Result<WireReply, String> {
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
    listed_gpu("oom_alerts: an alert on", a.device_index, listed)?;
    checks::time("oom_alerts: a raise time", a.since_ms, now)?;
    if let Some(s) = a.full_in_s {
        amount("oom_alerts: a time to full of", s)?;
    }
    checks::count("oom_alerts: drivers", a.drivers.len(), MAX_PROCESSES)?;
    for d in &mut a.drivers {
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
    listed_gpu("guard: a status of", g.device_index, listed)?;
    if let Some(s) = g.full_in_s {
        amount("guard: a time to full of", s)?;
    }
    amount("guard: a growth of", g.growth_mib_s)?;
    amount("guard: a park rate of", g.park_gib_s)?;
    amount("guard: a resume rate of", g.resume_gib_s)?;
    if let Some(n) = &mut g.next {
        amount("guard: a step's time of", n.needs_s)?;
        amount("guard: a step's start of", n.starts_at_s)?;
        checks::cap_text(&mut n.who, MAX_TEXT);
    }
    checks::count("guard: refusals", g.cannot.len(), MAX_PROCESSES)?;
    checks::count("guard: parked processes", g.parked.len(), MAX_PROCESSES)?;
    checks::count("guard: steps", g.recent.len(), MAX_GUARD_RECORDS)?;
    for c in &mut g.cannot {
        checks::cap_text(c, MAX_DETAIL);
    }
    for p in &mut g.parked {
        checks::time("guard: a park time", p.since_ms, now)?;
        if p.bytes > MAX_BYTES {
            return Err(format!("guard: a parked process of {} bytes", p.bytes));
        }
        checks::cap_text(&mut p.who, MAX_TEXT);
        checks::cap_text(&mut p.waits_for, MAX_DETAIL);
    }
    for r in &mut g.recent {
        checks::time("guard: a step's time", r.unix_ms, now)?;
        for v in [Some(r.needs_s), r.full_in_s, r.took_s]
            .into_iter()
            .flatten()
        {
            amount("guard: a step's figure of", v)?;
        }
        checks::cap_text(&mut r.who, MAX_TEXT);
        checks::cap_text(&mut r.detail, MAX_DETAIL);
    }
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
    checks::time("growing: a start", g.since_ms, now)?;
    amount("growing: a growth of", g.grown_mib)?;
    amount("growing: a rate of", g.rate_mib_per_min)
}

/// One GPU's memory held by processes not running on the agent's computer, on a GPU of
/// `listed`.
///
/// # Errors
/// A sentence naming the field.
pub fn orphan(o: &mut OrphanGpu, listed: &[u32]) -> Result<(), String> {
    listed_gpu("orphans: memory on", o.device_index, listed)?;
    if o.total_bytes > MAX_BYTES {
        return Err(format!("orphans: the agent sent {} bytes", o.total_bytes));
    }
    checks::count("orphans: PIDs", o.pids.len(), MAX_PROCESSES)?;
    checks::count("orphans: holders", o.holders.len(), MAX_PROCESSES)?;
    for p in &mut o.pids {
        pid("orphans", p.pid)?;
        p.used_bytes = p.used_bytes.filter(|b| *b <= MAX_BYTES);
    }
    for h in &mut o.holders {
        pid("orphans: a holder", h.pid)?;
        checks::count(
            "orphans: a holder's device files",
            h.devices.len(),
            MAX_HOLDER_FILES,
        )?;
        checks::cap_text(&mut h.name, MAX_TEXT);
        checks::cap_text(&mut h.user, MAX_TEXT);
        for d in &mut h.devices {
            checks::cap_text(d, MAX_TEXT);
        }
    }
    checks::cap_text(&mut o.remedy, MAX_DETAIL);
    Ok(())
}

/// The forecast alerts, growing series and orphaned memory of an answer: counts first, then
/// each value; alerts and orphans only on GPUs its snapshot lists.
///
/// # Errors
/// A sentence naming the field.
fn watches(v: &mut WireView, now: UnixMs) -> Result<(), String> {
    let listed: Vec<u32> = v
        .latest
        .as_ref()
        .map(|s| s.devices.iter().map(|d| d.index).collect())
        .unwrap_or_default();
    checks::count("oom_alerts", v.oom_alerts.len(), MAX_DEVICES)?;
    checks::count("growing series", v.growing.len(), MAX_PROCESSES)?;
    checks::count("orphans", v.orphans.len(), MAX_DEVICES)?;
    checks::count("guard", v.guard.len(), MAX_DEVICES)?;
    checks::count("color_slots", v.color_slots.len(), MAX_PROCESSES)?;
    for ((p, _), _) in &v.color_slots {
        pid("color_slots", p.pid)?;
    }
    for g in &mut v.guard {
        guard(g, &listed, now)?;
    }
    for a in &mut v.oom_alerts {
        forecast_alert(a, &listed, now)?;
    }
    for (k, g) in &v.growing {
        growing(k, g, now)?;
    }
    for o in &mut v.orphans {
        orphan(o, &listed)?;
    }
    Ok(())
}

/// A whole answer of `GET /api/view`, checked and cleaned against `now` (this computer's
/// clock); the history's order against the window's own is checked when it is applied.
///
/// # Errors
/// A sentence naming the field; nothing of the answer is used then.
pub fn view(v: &mut WireView, now: UnixMs) -> Result<(), String> {
    version(v.api_version)?;
    checks::interval(v.interval_ms).map_err(|e| format!("interval_ms: {e}"))?;
    if let Some(s) = &mut v.source {
        checks::source(s);
    }
    if let Some(snap) = &mut v.latest {
        checks::snapshot(snap, now).map_err(|e| format!("latest: {e}"))?;
    }
    if let Some(t) = v.latest_received_ms {
        checks::time("latest_received_ms", t, now)?;
    }
    history(&v.history, now)?;
    if v.history.end_tick() > v.history_end_tick {
        return Err("history: the delta ends after the agent's newest tick".into());
    }
    checks::count("leaks", v.leaks.len(), MAX_LEAKS)?;
    for l in &mut v.leaks {
        leak(l, now)?;
    }
    checks::count("OOM suspicions", v.ooms.len(), MAX_LEAKS)?;
    for o in &mut v.ooms {
        oom(o, now)?;
    }
    checks::count("activity lines", v.activity.len(), MAX_ACTIVITY)?;
    for a in &mut v.activity {
        activity(a, now)?;
    }
    checks::count(
        "replies",
        v.replies.len(),
        crate::engine::command::REPLIES_KEPT,
    )?;
    for r in &mut v.replies {
        reply(r)?;
        if !r.answer.is_final() {
            return Err("replies: the View carries final replies only".into());
        }
    }
    checks::count("notices", v.notices.len(), MAX_NOTICES)?;
    for (t, n) in &mut v.notices {
        checks::time("notices: a time", *t, now)?;
        checks::cap_text(n, MAX_DETAIL);
    }
    watches(v, now)?;
    if let crate::engine::view::SourceStatus::Failed(e) = &mut v.status {
        checks::cap_text(e, MAX_TEXT);
    }
    checks::cap_opt(&mut v.last_error, MAX_TEXT);
    checks::cap_opt(&mut v.recording.error, MAX_TEXT);
    path("recording", v.recording.path.as_deref())
}

/// An answer of `GET /api/past`, checked like [`view`]'s leaks and OOMs.
///
/// # Errors
/// A sentence naming the field.
pub fn past(p: &mut WirePast, now: UnixMs) -> Result<(), String> {
    version(p.api_version)?;
    checks::count("past leaks", p.leaks.len(), 16 * MAX_LEAKS)?;
    checks::count("past OOM suspicions", p.ooms.len(), 16 * MAX_LEAKS)?;
    for l in &mut p.leaks {
        leak(l, now)?;
    }
    for o in &mut p.ooms {
        oom(o, now)?;
    }
    Ok(())
}

/// Reads and checks an answer of `GET /api/view`.
///
/// # Errors
/// A sentence for the link's status.
pub fn decode_view(body: &[u8], now: UnixMs) -> Result<WireView, String> {
    if body.len() as u64 > MAX_VIEW_BYTES {
        return Err(format!("the agent's answer is over {MAX_VIEW_BYTES} bytes"));
    }
    let mut v: WireView = serde_json::from_slice(body)
        .map_err(|e| format!("the agent's view is not understood: {e}"))?;
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

    /// The reply on the wire, as `POST /api/v1/command` and the View's `replies` write it.
    const PARKED: &str = r#"{"api_version":3,"id":17,"what":"park (GPU memory to host memory)","outcome":"acted","detail":"parked python (PID 42) in 16.8 s","bytes":43486543872,"seconds":16.8}"#;

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
