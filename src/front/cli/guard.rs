//! `vramwarden guard what-if SESSION`: the OOM guard's steps over a recorded session, printed
//! one a line with the lead time each had before the OOM and whether it would have finished.

use std::io::Write;
use std::path::Path;

use crate::engine::guard_replay::{what_if as replay, WhatIf, WhatIfStep};
use crate::front::headless::CliError;
use crate::model::format::{clock, date_time_zone};
use crate::model::{UnixMs, GIB};
use crate::session::reader::SessionData;

/// Replays `session` through the guard (the settings file's guard, park rate `park_rate`)
/// and prints what it would have done.
///
/// # Errors
/// The session or the settings could not be read; output failed.
pub fn what_if(
    session: &Path,
    park_rate: Option<f64>,
    config: Option<&Path>,
    quiet: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let settings = crate::front::headless::load_settings(config)?;
    let data = SessionData::open(session)?;
    super::note_damage(session, &data, quiet);
    let w = replay(data.snapshots(), &data.events, &settings, park_rate);
    print(&w, session, out)
}

/// The report in words.
fn print(w: &WhatIf, session: &Path, out: &mut dyn Write) -> Result<(), CliError> {
    let Some((start, end)) = w.span else {
        writeln!(out, "{}: no samples", session.display())?;
        return Ok(());
    };
    print_header(w, session, (start, end), out)?;
    if !w.memory_known {
        writeln!(
            out,
            "no GPU's total memory is in this session (an nvidia-smi import without --gpu?): \
             the guard has nothing to judge by and OOMs cannot be told; nothing below says the \
             session was safe"
        )?;
    }
    for (t, gpu, who) in &w.ooms {
        writeln!(
            out,
            "OOM on GPU {gpu} at {} ({}): {who}",
            clock(*t),
            offset(*t, start)
        )?;
    }
    if w.ooms.is_empty() {
        writeln!(out, "no OOM in this session")?;
    }
    for (_, line) in timeline(w, start) {
        writeln!(out, "{line}")?;
    }
    if w.steps.is_empty() {
        writeln!(out, "the guard would not have acted")?;
    }
    for (who, bytes, since) in &w.parked_at_end {
        writeln!(
            out,
            "still parked at the end: {who}, {:.1} GiB, since {} ({} parked)",
            *bytes as f64 / GIB as f64,
            clock(*since),
            span(end.saturating_sub(*since) as f64 / 1000.0)
        )?;
    }
    Ok(())
}

/// The report's first lines: the session's span, whether the guard is off in the settings, and
/// the park rate assumed.
fn print_header(
    w: &WhatIf,
    session: &Path,
    (start, end): (UnixMs, UnixMs),
    out: &mut dyn Write,
) -> Result<(), CliError> {
    writeln!(
        out,
        "{}: {} – {} ({}); times below are local, with their offset from the start",
        session.display(),
        date_time_zone(start),
        date_time_zone(end),
        span((end - start) as f64 / 1000.0)
    )?;
    if w.guard_off {
        writeln!(
            out,
            "the guard is off in the settings ([guard] enabled = false): this is what it would do on"
        )?;
    }
    let (rate, given) = w.park_gib_s;
    writeln!(
        out,
        "park rate: {rate:.2} GiB/s ({})",
        if given {
            "--park-rate"
        } else {
            "the guard's default; set this machine's with --park-rate"
        }
    )?;
    Ok(())
}

/// One timeline: every GPU's forecast alerts and the guard's steps, lines in the order of their
/// time (`start`: the session's first sample, which offsets are counted from).
fn timeline(w: &WhatIf, start: UnixMs) -> Vec<(UnixMs, String)> {
    let alerts = w.alerts.iter().map(|(t, gpu, full)| {
        let line = format!(
            "{} ({})  GPU {gpu}  forecast alert: full in {}",
            clock(*t),
            offset(*t, start),
            span(*full)
        );
        (*t, line)
    });
    let steps = w.steps.iter().map(|s| (s.at_ms, step_line(s, start)));
    let mut lines: Vec<(UnixMs, String)> = alerts.chain(steps).collect();
    lines.sort_by_key(|(t, _)| *t);
    lines
}

fn step_line(w: &WhatIfStep, start: UnixMs) -> String {
    let s = &w.step;
    let full = s
        .full_in_s
        .map_or("nothing grew".into(), |f| format!("full in {}", span(f)));
    let verdict = match (w.lead_s(), w.in_time()) {
        (None, _) => "no OOM followed".to_string(),
        (Some(lead), true) => format!(
            "lead {} before the OOM: done {} before it",
            span(lead),
            span(lead - (w.ends_ms - w.at_ms) as f64 / 1000.0)
        ),
        (Some(lead), false) => format!(
            "lead {} before the OOM: TOO LATE, it would end {} after it",
            span(lead),
            span((w.ends_ms - w.at_ms) as f64 / 1000.0 - lead)
        ),
    };
    format!(
        "{} ({})  GPU {}  {}: {}, {:.1} GiB; {full}, needs ~{}; {verdict}",
        clock(w.at_ms),
        offset(w.at_ms, start),
        s.gpu,
        s.kind.label(),
        s.who,
        s.bytes as f64 / GIB as f64,
        span(s.needs_s)
    )
}

fn offset(t: UnixMs, start: UnixMs) -> String {
    format!("+{}", span((t - start) as f64 / 1000.0))
}

/// Seconds as `vramwarden` writes a duration elsewhere ("12s", "4m 10s", "2h 05m").
fn span(s: f64) -> String {
    crate::model::format::duration((s.max(0.0) * 1000.0).round() as i64)
}
