//! Schedules in rules: "at a time of day" (a daily window of local time, `at = "04:00"` or
//! `at = "04:00-04:30"`) and "every N hours" (`every_hours = 6`).
//!
//! A schedule is a condition like the others (it holds while its window is open) plus a gate:
//! a rule with a schedule fires at most once per target in each occurrence of it (each day's
//! window, each N-hour period), whatever its cooldown. Everything here is pure: the time is
//! given in ms since the epoch and the local time zone as an offset from UTC in seconds
//! ([`local_utc_offset_s`] reads the host's, daylight saving included), so tests inject both.

use crate::model::UnixMs;

/// How long the window of `at = "HH:MM"` stays open when no end is given.
const DEFAULT_WINDOW_MINUTES: u32 = 60;
/// Shortest period `every_hours` may name: one minute.
const MIN_EVERY_HOURS: f64 = 1.0 / 60.0;
/// Longest period `every_hours` may name: a year (8760 h).
const MAX_EVERY_HOURS: f64 = 8760.0;

const DAY_MS: i64 = 86_400_000;
const MINUTES_PER_DAY: u32 = 1440;

/// A window of local time that opens every day (it may run past midnight).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DailyWindow {
    /// Minute of the day it opens (0 – 1439).
    pub start_min: u32,
    /// How long it stays open, minutes (1 – 1440).
    pub len_min: u32,
}

fn parse_hhmm(s: &str) -> Option<u32> {
    let (h, m) = s.trim().split_once(':')?;
    let digits = |x: &str| !x.is_empty() && x.len() <= 2 && x.bytes().all(|b| b.is_ascii_digit());
    if !digits(h) || m.len() != 2 || !digits(m) {
        return None;
    }
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60).then_some(h * 60 + m)
}

/// Reads `at`: `"HH:MM"` (a window of [`DEFAULT_WINDOW_MINUTES`] from then) or
/// `"HH:MM-HH:MM"` (from – to, local time; an end before the start runs past midnight).
///
/// # Errors
/// The reason, in words, when the text is not such a time or window.
pub fn parse_at(s: &str) -> Result<DailyWindow, String> {
    let bad = || {
        format!(
            "{s:?} is not a time of day: write \"04:00\" (a {DEFAULT_WINDOW_MINUTES}-minute window from then) or a window \"04:00-04:30\" (24-hour local time)"
        )
    };
    match s.split_once('-') {
        None => Ok(DailyWindow {
            start_min: parse_hhmm(s).ok_or_else(bad)?,
            len_min: DEFAULT_WINDOW_MINUTES,
        }),
        Some((a, b)) => {
            let start = parse_hhmm(a).ok_or_else(bad)?;
            let end = parse_hhmm(b).ok_or_else(bad)?;
            if start == end {
                return Err(format!(
                    "the window {s:?} is empty: its end must differ from its start"
                ));
            }
            Ok(DailyWindow {
                start_min: start,
                len_min: (end + MINUTES_PER_DAY - start) % MINUTES_PER_DAY,
            })
        }
    }
}

impl DailyWindow {
    /// The local day (days since 1970-01-01 in local time) whose window `local_ms` falls in,
    /// or `None` when the window is closed then.
    pub(crate) fn occurrence(&self, local_ms: i64) -> Option<i64> {
        let day = local_ms.div_euclid(DAY_MS);
        let minute = (local_ms.rem_euclid(DAY_MS) / 60_000) as u32;
        let into = (minute + MINUTES_PER_DAY - self.start_min) % MINUTES_PER_DAY;
        if into >= self.len_min {
            return None;
        }
        // A window that runs past midnight belongs to the day it opened.
        Some(if minute >= self.start_min {
            day
        } else {
            day - 1
        })
    }

    /// The window as text, `04:00–05:00`.
    pub(crate) fn describe(&self) -> String {
        let end = (self.start_min + self.len_min) % MINUTES_PER_DAY;
        format!(
            "{:02}:{:02}–{:02}:{:02}",
            self.start_min / 60,
            self.start_min % 60,
            end / 60,
            end % 60
        )
    }
}

/// One occurrence of a schedule: the day of its window and the index of its period (each
/// `None` when that part is not set). A rule fires at most once per target per occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Occurrence {
    /// Local day of the `at` window.
    pub day: Option<i64>,
    /// Index of the `every_hours` period (periods start at local midnight of 1970-01-01, so
    /// `every_hours = 6` opens at 00:00, 06:00, 12:00 and 18:00 local time).
    pub period: Option<i64>,
}

/// A rule's schedule: a daily window, a period, or both (both must be open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Schedule {
    /// The daily window (`at`).
    pub at: Option<DailyWindow>,
    /// The period in ms (`every_hours`).
    pub every_ms: Option<i64>,
}

impl Schedule {
    /// The schedule of `at` and `every_hours`; `Ok(None)` when neither is set.
    ///
    /// # Errors
    /// The first problem, as (condition key, message).
    pub(crate) fn new(
        at: Option<&str>,
        every_hours: Option<f64>,
    ) -> Result<Option<Self>, (&'static str, String)> {
        let at = at.map(parse_at).transpose().map_err(|e| ("at", e))?;
        let every_ms = match every_hours {
            None => None,
            Some(h) if h.is_finite() && (MIN_EVERY_HOURS..=MAX_EVERY_HOURS).contains(&h) => {
                Some(((h * 3_600_000.0).round() as i64).max(60_000))
            }
            Some(_) => {
                return Err((
                    "every_hours",
                    format!(
                    "must be a number of hours from 1/60 (a minute) to {MAX_EVERY_HOURS} (a year)"
                ),
                ))
            }
        };
        Ok((at.is_some() || every_ms.is_some()).then_some(Self { at, every_ms }))
    }

    /// The occurrence open at `now_ms` (UTC) in a time zone `utc_offset_s` east of UTC, or
    /// `None` when the schedule is closed then.
    pub(crate) fn occurrence(&self, now_ms: UnixMs, utc_offset_s: i32) -> Option<Occurrence> {
        let local = now_ms.saturating_add(i64::from(utc_offset_s) * 1000);
        let day = match &self.at {
            Some(w) => Some(w.occurrence(local)?),
            None => None,
        };
        let period = self.every_ms.map(|p| local.div_euclid(p.max(1)));
        Some(Occurrence { day, period })
    }

    /// How long each occurrence stays open at most, ms (a hold longer than that never ends
    /// inside one).
    pub(crate) fn open_ms(&self) -> i64 {
        match (&self.at, self.every_ms) {
            (Some(w), Some(p)) => (i64::from(w.len_min) * 60_000).min(p),
            (Some(w), None) => i64::from(w.len_min) * 60_000,
            (None, Some(p)) => p,
            (None, None) => i64::MAX,
        }
    }

    /// The schedule in words (`daily 04:00–05:00 local time`, `once every 6 h`).
    pub(crate) fn describe(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(w) = &self.at {
            v.push(format!("it is {} local time (once a day)", w.describe()));
        }
        if let Some(p) = self.every_ms {
            v.push(format!("once every {} h", p as f64 / 3_600_000.0));
        }
        v
    }
}

/// The host's offset from UTC at `at_ms`, seconds east (daylight saving included; 0 when the
/// local time zone cannot be read).
pub(crate) fn local_utc_offset_s(at_ms: UnixMs) -> i32 {
    use chrono::{Offset, TimeZone};
    chrono::Local
        .timestamp_millis_opt(at_ms)
        .earliest()
        .map_or(0, |t| t.offset().fix().local_minus_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-03 00:00:00 UTC.
    const DAY0: i64 = 1_796_256_000_000;
    const H: i64 = 3_600_000;

    #[test]
    fn at_texts_parse_or_say_why_not() {
        assert_eq!(
            parse_at("04:00"),
            Ok(DailyWindow {
                start_min: 240,
                len_min: 60
            })
        );
        assert_eq!(
            parse_at("23:30-00:15"),
            Ok(DailyWindow {
                start_min: 1410,
                len_min: 45
            })
        );
        assert_eq!(parse_at(" 4:05 - 4:35 ").map(|w| w.len_min), Ok(30));
        for bad in [
            "",
            "4",
            "24:00",
            "04:60",
            "04:0",
            "four",
            "04:00-",
            "04:00-04:00",
            "-1:00",
        ] {
            assert!(parse_at(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(parse_at("04:00-04:00").is_err_and(|e| e.contains("empty")));
    }

    #[test]
    fn the_daily_window_opens_in_local_time() {
        assert_eq!(DAY0 % (24 * H), 0, "DAY0 is a UTC midnight");
        let s = Schedule::new(Some("04:00"), None).unwrap_or_default();
        let s = s.expect("a schedule");
        // UTC: open 04:00–04:59, closed before and after.
        assert!(s.occurrence(DAY0 + 4 * H - 1, 0).is_none());
        let open = s.occurrence(DAY0 + 4 * H, 0).expect("open at 04:00");
        assert_eq!(open.day, Some(DAY0 / (24 * H)));
        assert!(s.occurrence(DAY0 + 4 * H + 59 * 60_000, 0).is_some());
        assert!(s.occurrence(DAY0 + 5 * H, 0).is_none());
        // UTC+2: 04:00 local is 02:00 UTC.
        assert!(s.occurrence(DAY0 + 2 * H, 7200).is_some());
        assert!(s.occurrence(DAY0 + 4 * H, 7200).is_none());
        // UTC−5: 04:00 local is 09:00 UTC.
        assert!(s.occurrence(DAY0 + 9 * H, -5 * 3600).is_some());
        // The next day is another occurrence.
        let next = s.occurrence(DAY0 + 28 * H, 0).expect("open the next day");
        assert_ne!(next, open);
    }

    #[test]
    fn a_window_past_midnight_is_one_occurrence() {
        let s = Schedule::new(Some("23:00-01:00"), None)
            .unwrap_or_default()
            .expect("a schedule");
        let before = s.occurrence(DAY0 + 23 * H + 30 * 60_000, 0).expect("open");
        let after = s.occurrence(DAY0 + 24 * H + 30 * 60_000, 0).expect("open");
        assert_eq!(before, after, "one window, one occurrence");
        assert!(s.occurrence(DAY0 + 25 * H, 0).is_none());
        assert_eq!(s.open_ms(), 2 * H);
    }

    #[test]
    fn every_hours_counts_periods_from_local_midnight() {
        let s = Schedule::new(None, Some(6.0))
            .unwrap_or_default()
            .expect("a schedule");
        let a = s.occurrence(DAY0 + H, 0).expect("always open");
        let b = s.occurrence(DAY0 + 5 * H, 0).expect("always open");
        let c = s.occurrence(DAY0 + 6 * H, 0).expect("always open");
        assert_eq!(a, b);
        assert_ne!(b, c);
        // At UTC+1, 05:00 UTC is 06:00 local: a new period.
        assert_ne!(s.occurrence(DAY0 + 5 * H, 3600), Some(b));
    }

    #[test]
    fn both_parts_must_be_open_and_ranges_are_checked() {
        let s = Schedule::new(Some("00:00-12:00"), Some(4.0))
            .unwrap_or_default()
            .expect("a schedule");
        let a = s.occurrence(DAY0 + H, 0).expect("open");
        let b = s.occurrence(DAY0 + 5 * H, 0).expect("open");
        assert_eq!(a.day, b.day);
        assert_ne!(a.period, b.period);
        assert!(s.occurrence(DAY0 + 13 * H, 0).is_none());
        assert_eq!(Schedule::new(None, None), Ok(None));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 9000.0, 0.001] {
            assert_eq!(
                Schedule::new(None, Some(bad)).map_err(|e| e.0),
                Err("every_hours")
            );
        }
        assert_eq!(Schedule::new(Some("x"), None).map_err(|e| e.0), Err("at"));
    }
}
