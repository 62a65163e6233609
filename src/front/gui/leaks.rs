//! Leak flags in the table and detail pane, and the Leaks pane: every episode of this run and
//! of past sessions, newest first.

use std::collections::HashMap;
use std::path::PathBuf;

use egui::{Color32, RichText, Ui};

use crate::detect::leak::full_in_s;
use crate::engine::view::{LeakKey, LeakRecord, Monitor, OomRecord};
use crate::model::format::{self, Units};
use crate::model::history::ProcSeriesKey;
use crate::model::{Snapshot, UnixMs, MIB};

/// Colour of leak flags (on a dark background).
pub(crate) const LEAK: Color32 = Color32::from_rgb(240, 150, 40);

/// Colour of leak flags and warnings for the theme: a darker orange on light backgrounds,
/// where the dark theme's is hard to read.
pub(crate) fn leak_color(dark_mode: bool) -> Color32 {
    if dark_mode {
        LEAK
    } else {
        // 6.2:1 on the light panel, 5.5:1 on a selected table row.
        Color32::from_rgb(150, 70, 0)
    }
}

/// What the table shows for a leaking process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LeakBadge {
    /// Growth rate.
    pub rate_mib_per_min: f64,
    /// Minutes until its GPU is full at this process's rate alone (from the GPU's free
    /// memory now).
    pub full_in_min: Option<f64>,
    /// Minutes until its GPU is full by the GPU's forecast (every process growing on it
    /// together: the figure of the GPU card, the banner and the status bar), if it has one.
    pub gpu_full_in_min: Option<f64>,
    /// Gained since the leak began.
    pub grown_mib: f64,
    /// `grown_mib` is the whole episode's, which goes on after the moment shown (a recorded
    /// session looked at before the episode's end): not "so far".
    pub grown_to_its_end: bool,
    /// When the growth began.
    pub since_ms: UnixMs,
    /// A suspected leak; false: growing now, not (yet) a leak (a load or a ramp levels off).
    pub leak: bool,
}

impl LeakBadge {
    /// "⚠ leak +60 MiB/min · GPU full in ~6m 07s" (the GPU's forecast, as on its card) or,
    /// where the GPU has no forecast, "⚠ leak +60 MiB/min · alone: full in 2h 10m" (this
    /// process's rate alone): never a second, different "full in" for the GPU beside its
    /// card's.
    pub(crate) fn text(&self) -> String {
        let full = match self.shown_full_in() {
            // The GPU's forecast driven by others' growth: said so, or a slow leak's row read
            // as if it filled the GPU in minutes.
            Some(FullIn::Gpu(m)) if self.full_in_min.is_some_and(|a| a >= 2.0 * m) => {
                format!(" · GPU full in ~{} (others grow faster)", minutes(m))
            }
            Some(FullIn::Gpu(m)) => format!(" · GPU full in ~{}", minutes(m)),
            Some(FullIn::Alone(m)) => format!(" · alone: full in {}", minutes(m)),
            None => String::new(),
        };
        let what = if self.leak { "⚠ leak" } else { "↗ growing" };
        format!("{what} +{}{full}", format::rate(self.rate_mib_per_min))
    }

    /// The time to full the table shows: the GPU's forecast where it has one (the card's
    /// figure: where this process alone would fill the GPU sooner, others are giving memory
    /// back, and the GPU's whole growth is what runs out), else a leak's rate alone. A
    /// process only growing (a job's start, a load) has no time of its own: a job that took
    /// 3 GiB in its first 6 s read "alone: full in 32s" for seconds after it had levelled off.
    pub(crate) fn shown_full_in(&self) -> Option<FullIn> {
        match (self.gpu_full_in_min, self.full_in_min) {
            (Some(g), _) => Some(FullIn::Gpu(g)),
            (None, a) if self.leak => a.map(FullIn::Alone),
            (None, _) => None,
        }
    }

    /// Both times to full in sentences, for the detail pane and the table's hover: this
    /// process's rate alone, then the GPU's forecast (all its growing processes together).
    pub(crate) fn full_in_sentences(&self, gpu: u32) -> Vec<String> {
        let mut v = Vec::new();
        match self.full_in_min {
            Some(m) => v.push(format!(
                "At this process's rate alone, GPU {gpu} would be full in {}.",
                minutes(m)
            )),
            None => v.push("Time to full at its rate: unknown (no free-memory reading).".into()),
        }
        if let Some(m) = self.gpu_full_in_min {
            v.push(format!(
                "GPU {gpu}'s forecast, every growing process on it together: full in ~{}.",
                minutes(m)
            ));
        }
        v
    }
}

/// Which time to full a badge shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum FullIn {
    /// The GPU's forecast (minutes), as on its card.
    Gpu(f64),
    /// This process's rate alone (minutes).
    Alone(f64),
}

/// Minutes as "2h 10m", "6m 07s".
fn minutes(m: f64) -> String {
    format::duration((m * 60_000.0) as i64)
}

/// A process growing (not a leak) is labelled "growing" once its growth has lasted this long.
const GROWING_SHOWN_AFTER_MS: UnixMs = 10_000;

/// Minutes to full on GPU `dev`: at `rate` alone (from its free memory), and by the GPU's
/// forecast.
fn full_ins(snap: &Snapshot, dev: u32, rate: f64) -> (Option<f64>, Option<f64>) {
    let d = snap.devices.iter().find(|d| d.index == dev);
    let alone = d
        .and_then(|d| d.memory_free_bytes)
        .and_then(|f| full_in_s(f, rate))
        .map(|s| s / 60.0);
    (alone, d.and_then(|d| d.time_to_full_s).map(|s| s / 60.0))
}

/// The badge of every leaking process, and of every process growing for a while (see
/// [`GROWING_SHOWN_AFTER_MS`]), with time-to-full from its GPU's free memory now.
pub(crate) fn badges(m: &Monitor, snap: &Snapshot) -> HashMap<LeakKey, LeakBadge> {
    // The episodes going on at the sample shown: live, the ones not ended; in a past session,
    // the ones flagged by then and not yet ended (one still growing when the recording
    // stopped counts as going on up to its last sample).
    let t = snap.taken_at_ms;
    let full_ins = |dev: u32, rate: f64| full_ins(snap, dev, rate);
    // Growing now (this run only: the View's list is of the latest sample), shown once it has
    // lasted [`GROWING_SHOWN_AFTER_MS`] (a server's burst of a few seconds does not blink a
    // label in the table; the forecast counts it at once all the same).
    let growing = m
        .latest
        .as_ref()
        .filter(|l| l.taken_at_ms == t)
        .map(|_| m.growing.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|(_, g)| t - g.since_ms >= GROWING_SHOWN_AFTER_MS)
        .map(|(k, g)| {
            let dev = match k {
                LeakKey::Process((_, d)) | LeakKey::Ghost(d) => *d,
            };
            let (full_in_min, gpu_full_in_min) = full_ins(dev, g.rate_mib_per_min);
            (
                *k,
                LeakBadge {
                    rate_mib_per_min: g.rate_mib_per_min,
                    full_in_min,
                    gpu_full_in_min,
                    grown_mib: g.grown_mib,
                    grown_to_its_end: false,
                    since_ms: g.since_ms,
                    leak: false,
                },
            )
        });
    let leaks = m.leaks.iter().filter(|l| l.active_at(t)).map(|l| {
        let (full_in_min, gpu_full_in_min) = full_ins(l.info.device_index, l.info.rate_mib_per_min);
        (
            l.key,
            LeakBadge {
                rate_mib_per_min: l.info.rate_mib_per_min,
                full_in_min,
                gpu_full_in_min,
                grown_mib: l.grown_mib,
                grown_to_its_end: l.ended_ms.is_some_and(|e| e > t),
                since_ms: l.info.since_ms,
                leak: true,
            },
        )
    });
    growing.chain(leaks).collect()
}

/// Where a leak episode lives, for opening it.
#[derive(Debug, Clone, PartialEq)]
pub struct LeakClick {
    /// The process series.
    pub key: ProcSeriesKey,
    /// The session file (None: this run).
    pub session: Option<PathBuf>,
    /// When it was flagged.
    pub at_ms: UnixMs,
}

/// The Leaks pane over `records` (this run's and past sessions'). Returns the episode the user
/// clicked. The records of what is shown (this run, or the session open: those without a
/// file or of a file in `shown`) have their status at `now`; other sessions' are told as they
/// ended (never "not yet flagged" against another session's slider).
pub(crate) fn pane(
    ui: &mut Ui,
    records: &[&LeakRecord],
    ooms: &[&OomRecord],
    units: Units,
    now: UnixMs,
    loading_past: bool,
    shown: &std::collections::HashSet<PathBuf>,
) -> Option<LeakClick> {
    let mut click = None;
    if !ooms.is_empty() {
        click = oom_list(ui, ooms, units);
        ui.separator();
    }
    if records.is_empty() {
        ui.add_space(8.0);
        ui.label(if loading_past {
            "Reading past sessions…"
        } else {
            "No leak so far: a process whose GPU memory keeps growing is flagged here, with its rate and the time until its GPU is full."
        });
        return None;
    }
    // A click in the table, else one in the OOM list.
    leaks_table(ui, records, units, now, shown).or(click)
}

/// The table of leak episodes under its header, scrolled both ways (a narrow window scrolls
/// to the columns it cannot show); the episode clicked, if one was.
fn leaks_table(
    ui: &mut Ui,
    records: &[&LeakRecord],
    units: Units,
    now: UnixMs,
    shown: &std::collections::HashSet<PathBuf>,
) -> Option<LeakClick> {
    let mut click = None;
    egui::ScrollArea::both()
        .id_salt("leaks")
        .auto_shrink([false, false])
        .show(ui, |ui| {
            // One unit for the Grown and Peak columns (Auto: from the largest peak).
            let largest = records
                .iter()
                .map(|r| r.peak_mib.max(0.0))
                .fold(0.0, f64::max);
            let units = units.for_largest((largest * MIB as f64) as u64);
            egui::Grid::new("leaks-grid")
                .num_columns(10)
                .striped(true)
                .spacing([12.0, 4.0])
                .show(ui, |ui| {
                    leaks_header(ui);
                    for r in records {
                        let here = r.session.as_ref().is_none_or(|p| shown.contains(p));
                        // Another session's episode: as at its end.
                        let at = if here { now } else { UnixMs::MAX };
                        if let Some(c) = leak_row(ui, r, units, (now, at), here) {
                            click = Some(c);
                        }
                        ui.end_row();
                    }
                });
        });
    click
}

/// The Leaks table's header row, each column's meaning on hover.
fn leaks_header(ui: &mut Ui) {
    for (h, tip) in [
        ("Process", ""),
        ("GPU", ""),
        ("Began", "When its memory began to grow"),
        ("Flagged", "How long after it began growing the detector called it a leak (hover: when)"),
        ("Status", "At the time shown (a session: its time slider)"),
        ("Rate", ""),
        ("Why", "The shape the detector saw when it called this a leak (hover for its figures)"),
        ("Grown", "Memory gained over the episode, of the figure the detector judged: PyTorch's allocated memory where the process's companion answers (its cache is not a leak), else the driver's"),
        ("Peak", "The episode's highest, of the same figure as Grown: below the driver's figure for a PyTorch process, which also counts the cache and the CUDA context"),
        ("Found by", "Whose leak detector made the verdict: this run's, or the one of the run that recorded a session"),
    ] {
        let l = ui.label(RichText::new(h).strong());
        if !tip.is_empty() {
            l.on_hover_text(tip);
        }
    }
    ui.end_row();
}

/// One row of the Leaks pane; its status is the one at `at` ([`LeakRecord::active_at`]), its
/// times written as seen at `now`. Returns the episode when its name was clicked.
fn leak_row(
    ui: &mut Ui,
    r: &LeakRecord,
    units: Units,
    (now, at): (UnixMs, UnixMs),
    here: bool,
) -> Option<LeakClick> {
    let active = r.active_at(at);
    let click = who_cell(ui, r, active);
    ui.label(r.info.device_index.to_string());
    ui.monospace(format::moment(r.info.since_ms, now));
    // After its start, so the row fits beside the GPU cards; the moment on hover.
    ui.monospace(format!(
        "+{}",
        format::duration(r.flagged_ms - r.info.since_ms)
    ))
    .on_hover_text(format::date_time(r.flagged_ms));
    status_cell(ui, r, (now, at), active);
    ui.monospace(format::rate(r.info.rate_mib_per_min));
    why_cell(ui, &r.info.why);
    // The episode's figures: at a moment before its end (a session's slider) they are not
    // "so far", and are shown faint with a word saying so.
    let later = r.ended_ms.is_some_and(|e| e > at);
    for mib in [r.grown_mib, r.peak_mib] {
        let t = RichText::new(units.bytes((mib.max(0.0) * MIB as f64) as u64)).monospace();
        if later {
            ui.label(t.weak())
                .on_hover_text("Over the whole episode, which goes on after the moment shown");
        } else {
            ui.label(t);
        }
    }
    match r.session.as_ref() {
        // Short, so the table fits beside the GPU cards; the hover names the session's file.
        // Another session's (listed with "Include other sessions") is told apart from the
        // session shown.
        Some(p) => ui
            .label(if here { "recording" } else { "other log" })
            .on_hover_text(format!(
                "The detector of the run that recorded {}, when it ran",
                p.file_name().unwrap_or_default().to_string_lossy()
            )),
        None => ui.label("this run"),
    };
    click
}

/// The Process cell: the process (or the ghost memory's GPU), in the leak colour while
/// `active`; the episode when a process's name was clicked.
fn who_cell(ui: &mut Ui, r: &LeakRecord, active: bool) -> Option<LeakClick> {
    let who = if r.info.ghost {
        format!("ghost memory · GPU {}", r.info.device_index)
    } else {
        format!("{} · PID {}", r.info.name, r.info.pid)
    };
    let color = if active {
        leak_color(ui.visuals().dark_mode)
    } else {
        ui.visuals().text_color()
    };
    let mut click = None;
    if ui
        .selectable_label(false, RichText::new(who).color(color))
        .clicked()
    {
        if let LeakKey::Process(k) = r.key {
            click = Some(LeakClick {
                key: k,
                session: r.session.clone(),
                at_ms: r.flagged_ms,
            });
        }
    }
    click
}

/// The Status cell at `at`: not yet flagged, ongoing, the recording ended during it, or ended.
fn status_cell(ui: &mut Ui, r: &LeakRecord, (now, at): (UnixMs, UnixMs), active: bool) {
    match r.ended_ms {
        _ if r.flagged_ms > at => ui.label(RichText::new("not yet flagged").weak()),
        _ if active => ui.label(
            RichText::new(format!(
                "ongoing ({})",
                format::duration(now - r.info.since_ms)
            ))
            .color(leak_color(ui.visuals().dark_mode)),
        ),
        Some(t) if r.open_at_end => ui
            .label(
                RichText::new(format!(
                    "recording ended ({})",
                    format::duration(t - r.info.since_ms)
                ))
                .weak(),
            )
            .on_hover_text("The session's recording stopped while this was still growing."),
        Some(t) => ui.monospace(format!("ended {}", format::moment(t, now))),
        None => ui.label("ongoing"),
    };
}

/// The shape a leak was called for ("steady growth", "rising floor", …), its figures on
/// hover; a dash for a leak from a log written before the detector said why.
fn why_cell(ui: &mut Ui, why: &str) {
    match why.split_once(':') {
        Some((shape, _)) => {
            ui.label(shape).on_hover_text(why);
        }
        None if why.is_empty() => {
            ui.label(RichText::new("—").weak())
                .on_hover_text("Recorded before the detector said why");
        }
        None => {
            ui.label(why);
        }
    }
}

/// Growth in the minute before an OOM smaller than this (MiB) is not said ("+<0.1 GiB").
const GREW_SHOWN_MIB: f64 = 64.0;

/// The holder named as the likely cause of `o`'s death: the one its log names (true), else,
/// in a log recorded before the verdict was written, the one that grew most in the minute
/// before, by at least 512 MiB (false).
fn likely_cause(o: &OomRecord) -> Option<(&crate::session::OomHolder, bool)> {
    if let Some(h) = o.holders.iter().find(|h| h.likely_cause) {
        return Some((h, true));
    }
    if o.victims.iter().any(|v| v.likely_cause) {
        return None;
    }
    o.holders
        .iter()
        .filter(|h| h.grown_1m_mib.is_some_and(|g| g >= 512.0))
        .max_by(|a, b| {
            a.grown_1m_mib
                .unwrap_or(0.0)
                .total_cmp(&b.grown_1m_mib.unwrap_or(0.0))
        })
        .map(|h| (h, false))
}

/// One holder of a GPU at an OOM: "    likely cause: python3 (PID 1101, root): 117.5 GiB ·
/// +116.6 GiB in the minute before" (its growth, its releasable cache, how sure the verdict
/// is), or "    held by …"; `cause` is the likely cause (and whether its log named it).
fn holder_line(
    h: &crate::session::OomHolder,
    cause: Option<(&crate::session::OomHolder, bool)>,
    units: Units,
) -> String {
    let grew = h
        .grown_1m_mib
        .filter(|g| g.abs() >= GREW_SHOWN_MIB)
        .map_or(String::new(), |g| {
            format!(
                " · {}{} in the minute before",
                if g > 0.0 { "+" } else { "−" },
                units.bytes((g.abs() * MIB as f64) as u64)
            )
        });
    let cache = h.releasable_mib.map_or(String::new(), |r| {
        format!(
            " · {} releasable cache",
            units.bytes((r * MIB as f64) as u64)
        )
    });
    let user = if h.user.is_empty() {
        String::new()
    } else {
        format!(", {}", h.user)
    };
    let (what, sure) = match cause {
        Some((c, recorded)) if std::ptr::eq(c, h) => (
            if recorded {
                "likely cause:"
            } else {
                "likely cause (by the minute before):"
            },
            crate::session::how_sure(h),
        ),
        _ => ("held by", String::new()),
    };
    format!(
        "    {what} {} (PID {}{user}): {}{grew}{cache}{sure}",
        h.name,
        h.pid,
        units.bytes((h.mib * MIB as f64) as u64)
    )
}

/// The OOM suspicions, newest first: who left a nearly full GPU and who held it. Returns the
/// one whose "Open" the user clicked (its victim, just before it left).
fn oom_list(ui: &mut Ui, ooms: &[&OomRecord], units: Units) -> Option<LeakClick> {
    let mut click = None;
    // One unit for every figure of the list (Auto: from the largest holder).
    let largest = ooms
        .iter()
        .flat_map(|o| o.holders.iter().map(|h| h.mib.max(0.0)))
        .fold(0.0, f64::max);
    let units = units.for_largest((largest * MIB as f64) as u64);
    ui.label(RichText::new("Memory events").strong());
    egui::ScrollArea::vertical()
        .id_salt("ooms")
        .max_height(160.0)
        .auto_shrink([false, true])
        .show(ui, |ui| {
            for (i, o) in ooms.iter().enumerate() {
                ui.push_id(i, |ui| {
                    ui.horizontal_wrapped(|ui| {
                        if let Some(c) = oom_line(ui, o, units) {
                            click = Some(c);
                        }
                    });
                    let cause = likely_cause(o);
                    for h in o.holders.iter().take(5) {
                        ui.label(holder_line(h, cause, units));
                    }
                    if o.holders.len() > 5 {
                        ui.label(format!("    and {} more", o.holders.len() - 5));
                    }
                });
            }
        });
    click
}

/// An OOM's first line: when, who left which GPU how full, in which log, and "Open at this
/// moment" (the victim just before it left, when clicked).
fn oom_line(ui: &mut Ui, o: &OomRecord, units: Units) -> Option<LeakClick> {
    ui.label(
        RichText::new("⚠ OOM suspected")
            .color(leak_color(ui.visuals().dark_mode))
            .strong(),
    );
    ui.monospace(format::date_time(o.at_ms));
    let who: Vec<String> = o
        .victims
        .iter()
        .map(|v| {
            format!(
                "{} (PID {}) holding {}",
                v.name,
                v.pid,
                units.bytes((v.mib.max(0.0) * MIB as f64) as u64)
            )
        })
        .collect();
    ui.label(format!(
        "{} left GPU {} while it was {:.1} % full",
        who.join(", "),
        o.device_index,
        o.used_pct
    ));
    ui.label(
        RichText::new(
            o.session
                .as_ref()
                .and_then(|p| p.file_name())
                .map_or("this run".into(), |n| n.to_string_lossy().into_owned()),
        )
        .weak(),
    );
    let v = o.victims.first()?;
    ui.small_button("Open at this moment")
        .on_hover_text("Show the GPU and its processes just before")
        .clicked()
        .then(|| LeakClick {
            key: (
                crate::model::ProcessKey {
                    pid: v.pid,
                    start_time_ms: v.start_time_ms,
                },
                o.device_index,
            ),
            session: o.session.clone(),
            at_ms: o.at_ms - 1000,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use egui_kittest::kittest::Queryable;

    /// A leak whose rate alone would fill its GPU sooner than the GPU's forecast says the
    /// card's figure, not a second, sooner one; with no forecast it says its own, as its own.
    #[test]
    fn a_badge_says_the_gpus_forecast_where_the_gpu_has_one() {
        let mut b = LeakBadge {
            rate_mib_per_min: 60.0,
            full_in_min: Some(6.0),
            gpu_full_in_min: Some(7.5),
            grown_mib: 10.0,
            grown_to_its_end: false,
            since_ms: 0,
            leak: true,
        };
        assert_eq!(b.text(), "⚠ leak +60 MiB/min · GPU full in ~7m 30s");
        // The GUI review: a slow leak beside a fast grower read "GPU full in ~6m" as its own.
        b.full_in_min = Some(1_247.0);
        b.gpu_full_in_min = Some(6.1);
        assert_eq!(
            b.text(),
            "⚠ leak +60 MiB/min · GPU full in ~6m 06s (others grow faster)"
        );
        b.full_in_min = Some(6.0);
        b.gpu_full_in_min = None;
        assert_eq!(b.text(), "⚠ leak +60 MiB/min · alone: full in 6m 00s");
        // A process growing, not a leak: no time to full of its own.
        b.leak = false;
        assert_eq!(b.text(), "↗ growing +60 MiB/min");
        b.gpu_full_in_min = Some(7.5);
        assert_eq!(b.text(), "↗ growing +60 MiB/min · GPU full in ~7m 30s");
    }

    fn record(pid: u32, flagged_ms: UnixMs, session: &str) -> LeakRecord {
        LeakRecord {
            key: LeakKey::Process((
                crate::model::ProcessKey {
                    pid,
                    start_time_ms: 1,
                },
                0,
            )),
            info: crate::session::LeakInfo {
                pid,
                start_time_ms: 1,
                device_index: 0,
                name: format!("job{pid}"),
                user: String::new(),
                ghost: false,
                since_ms: flagged_ms - 60_000,
                rate_mib_per_min: 60.0,
                why: String::new(),
            },
            flagged_ms,
            ended_ms: Some(flagged_ms + 120_000),
            grown_mib: 120.0,
            peak_mib: 3000.0,
            session: Some(PathBuf::from(session)),
            open_at_end: false,
        }
    }

    /// The GUI review: an OOM of a log recorded before the verdict was written named no
    /// likely cause, left out the victim's own memory and said "+<0.1 GiB". The process that
    /// grew most in the minute before is named (said as found from that minute), the victim's
    /// memory is given, and growth too small to read is left out.
    #[test]
    fn an_oom_of_an_older_log_names_its_likely_cause_and_the_victims_memory() {
        use crate::session::OomHolder;
        let holder = |pid, mib, grown| OomHolder {
            grown_1m_mib: Some(grown),
            ..OomHolder::holding(pid, 1, "python3".into(), "root".into(), mib)
        };
        let o = OomRecord {
            at_ms: 1_800_000_000_000,
            device_index: 0,
            used_pct: 99.6,
            victims: vec![OomHolder::holding(
                1102,
                1,
                "python3".into(),
                "root".into(),
                1740.0,
            )],
            holders: vec![
                holder(1101, 120_320.0, 119_398.0),
                holder(1103, 21_094.0, 10.0),
            ],
            session: None,
        };
        let h = egui_kittest::Harness::new_ui(|ui| {
            let _ = oom_list(ui, &[&o], Units::GiB);
        });
        h.get_by_label_contains("python3 (PID 1102) holding 1.7 GiB left GPU 0");
        h.get_by_label_contains("likely cause (by the minute before): python3 (PID 1101");
        h.get_by_label_contains("held by python3 (PID 1103, root): 20.6 GiB");
        assert!(h.query_by_label_contains("<0.1").is_none());
    }

    /// A session open at its slider judges its own episodes there ("not yet flagged" before
    /// one), and tells another session's as it ended: that one was flagged "not yet" against a
    /// slider of a file it is not in.
    #[test]
    fn only_the_open_sessions_episodes_are_judged_at_its_slider() {
        let now = 1_800_000_000_000;
        let (own, other) = (
            record(1, now + 60_000, "a.vwlog"),
            record(2, now + 60_000, "b.vwlog"),
        );
        let shown: std::collections::HashSet<PathBuf> = [PathBuf::from("a.vwlog")].into();
        let h = egui_kittest::Harness::new_ui(|ui| {
            let _ = pane(ui, &[&own, &other], &[], Units::Auto, now, false, &shown);
        });
        assert_eq!(h.query_all_by_label("not yet flagged").count(), 1);
        h.get_by_label_contains("ended ");
    }
}
