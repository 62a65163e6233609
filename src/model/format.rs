//! Formatting of memory sizes, durations and times for the UI and the CLI.

use chrono::{DateTime, Local, TimeZone, Utc};

use crate::model::{ParkInfo, ParkState, UnixMs, GIB, MIB};

/// How memory sizes are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Units {
    /// MiB under 10 GiB, GiB above.
    #[default]
    Auto,
    /// Always MiB.
    MiB,
    /// Always GiB.
    GiB,
}

impl Units {
    /// Every choice, for menus.
    pub const ALL: [Units; 3] = [Units::Auto, Units::MiB, Units::GiB];

    /// Menu label.
    pub fn label(self) -> &'static str {
        match self {
            Units::Auto => "Auto",
            Units::MiB => "MiB",
            Units::GiB => "GiB",
        }
    }

    /// The one unit for a set of sizes shown together (a card, a table column), so they never
    /// mix MiB and GiB: Auto becomes GiB when the largest is 10 GiB or more, else MiB; a
    /// fixed choice stays.
    #[cfg(any(feature = "gui", test))]
    pub(crate) fn for_largest(self, largest_bytes: u64) -> Units {
        match self {
            Units::Auto if largest_bytes >= 10 * GIB => Units::GiB,
            Units::Auto => Units::MiB,
            fixed => fixed,
        }
    }

    /// `bytes` as text with its unit, e.g. "38.0 GiB" or "812 MiB"; in GiB, a size too small
    /// to show a tenth is "<0.1 GiB", not "0.0 GiB" (which would read as nothing).
    pub fn bytes(self, bytes: u64) -> String {
        let gib = match self {
            Units::Auto => bytes >= 10 * GIB,
            Units::MiB => false,
            Units::GiB => true,
        };
        if gib && bytes > 0 && bytes.saturating_mul(20) < GIB {
            "<0.1 GiB".to_string()
        } else if gib {
            format!("{:.1} GiB", bytes as f64 / GIB as f64)
        } else {
            format!("{} MiB", bytes / MIB)
        }
    }

    /// A signed change, e.g. "+60 MiB" or "−1.2 GiB"; "0 MiB" for none.
    pub fn delta(self, delta: i64) -> String {
        let sign = match delta.signum() {
            1 => "+",
            -1 => "−",
            _ => "",
        };
        format!("{sign}{}", self.bytes(delta.unsigned_abs()))
    }

    /// A value in MiB as text (for plot axes).
    pub fn mib(self, mib: f64) -> String {
        self.bytes((mib.max(0.0) * MIB as f64) as u64)
    }
}

/// A growth rate given in MiB per minute, as a person reads it: "60 MiB/min", "8.8 GiB/min"
/// from 1 GiB a minute on (beside sizes in GiB), "0.5 MiB/min" below 10.
#[cfg(any(feature = "gui", test))]
pub(crate) fn rate(mib_per_min: f64) -> String {
    let r = mib_per_min;
    if r.abs() >= 1024.0 {
        format!("{:.1} GiB/min", r / 1024.0)
    } else if r.abs() >= 10.0 {
        format!("{r:.0} MiB/min")
    } else {
        format!("{r:.1} MiB/min")
    }
}

/// The window's colour theme (kept in the settings file; the window applies it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Theme {
    /// Follow the desktop.
    #[default]
    System,
    /// Dark.
    Dark,
    /// Light.
    Light,
}

/// An optional size, "—" when missing.
#[cfg(feature = "gui")]
pub(crate) fn opt_bytes(units: Units, bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "—".to_string(), |b| units.bytes(b))
}

/// A duration in ms as "3d 4h", "2h 05m", "4m 10s" or "12s".
pub fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m {sec:02}s")
    } else {
        format!("{sec}s")
    }
}

/// `n` and its noun, singular or plural: "1 leak episode", "3 leak episodes".
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Longest quoted value an error message repeats from a file or a request, bytes.
const QUOTED_MAX: usize = 200;
/// Longest error message built from a file or a request, bytes.
const MESSAGE_MAX: usize = 4096;

/// `s` cut at a char boundary at most `max` bytes in, with "… (N bytes)" when cut.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

/// An error message that quotes what a file or a request held (`unknown variant `aaaa…``),
/// bounded: each value quoted in backticks, double or single quotes is cut to
/// [`QUOTED_MAX`] bytes and the whole message to [`MESSAGE_MAX`], each saying its full
/// length ("… (15728640 bytes)"). A hostile value is never repeated whole.
pub(crate) fn cap_quoted(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(MESSAGE_MAX + 64));
    let mut rest = msg;
    while let Some(open) = rest.find(['`', '"', '\'']) {
        let q = rest[open..].chars().next().unwrap_or('"');
        let inner_start = open + q.len_utf8();
        let Some(len) = rest[inner_start..].find(q) else {
            break;
        };
        out.push_str(&rest[..inner_start]);
        out.push_str(&cut(&rest[inner_start..inner_start + len], QUOTED_MAX));
        out.push(q);
        rest = &rest[inner_start + len + q.len_utf8()..];
        if out.len() > MESSAGE_MAX {
            break;
        }
    }
    out.push_str(rest);
    cut(&out, MESSAGE_MAX)
}

/// A file's size for people: "512 B", "9.6 KiB", "3.4 MiB", "1.2 GiB".
#[cfg(feature = "gui")]
pub(crate) fn file_size(bytes: u64) -> String {
    const K: f64 = 1024.0;
    let b = bytes as f64;
    if b < K {
        format!("{bytes} B")
    } else if b < K * K {
        format!("{:.1} KiB", b / K)
    } else if b < K * K * K {
        format!("{:.1} MiB", b / K / K)
    } else {
        format!("{:.1} GiB", b / K / K / K)
    }
}

/// RFC 3339 in UTC with millisecond precision, e.g. "2026-12-02T09:40:52.963Z".
pub fn rfc3339(ms: UnixMs) -> String {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Local wall-clock time, "HH:MM:SS".
pub fn clock(ms: UnixMs) -> String {
    local(ms)
        .map(|t| t.format("%H:%M:%S").to_string())
        .unwrap_or_default()
}

/// The local day, "7 Dec".
pub fn day(ms: UnixMs) -> String {
    local(ms)
        .map(|t| t.format("%-d %b").to_string())
        .unwrap_or_default()
}

/// Local date and time, "YYYY-MM-DD HH:MM:SS".
pub fn date_time(ms: UnixMs) -> String {
    local(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

/// Local date and time with the zone's offset, "YYYY-MM-DD HH:MM:SS +01:00".
pub(crate) fn date_time_zone(ms: UnixMs) -> String {
    local(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S %:z").to_string())
        .unwrap_or_default()
}

/// Local time as short as it can be beside `now` and still be read alone: "HH:MM:SS" on
/// `now`'s day, "7 Dec HH:MM:SS" in its year, else [`date_time`].
#[cfg(feature = "gui")]
pub(crate) fn moment(ms: UnixMs, now: UnixMs) -> String {
    use chrono::Datelike as _;
    let (Some(t), Some(n)) = (local(ms), local(now)) else {
        return date_time(ms);
    };
    let format = if t.date_naive() == n.date_naive() {
        "%H:%M:%S"
    } else if t.year() == n.year() {
        "%-d %b %H:%M:%S"
    } else {
        "%Y-%m-%d %H:%M:%S"
    };
    t.format(format).to_string()
}

fn local(ms: UnixMs) -> Option<DateTime<Local>> {
    Local.timestamp_millis_opt(ms).single()
}

/// A park in words (the table's cell, the process's details).
impl ParkInfo {
    /// "parked — 10.6 GiB in host memory since 14:02" (local time).
    pub fn describe(&self) -> String {
        let since = chrono::DateTime::from_timestamp_millis(self.since_ms)
            .map(|t| t.with_timezone(&chrono::Local).format("%H:%M").to_string())
            .unwrap_or_default();
        match (self.state, self.bytes) {
            (ParkState::Parked, Some(b)) => format!(
                "parked — {:.1} GiB in host memory since {since}",
                b as f64 / GIB as f64
            ),
            (state, _) => format!("{} since {since}", state.label()),
        }
    }

    /// For a table cell at `now`: "⏸ parked 24.0 GiB, 3m 05s" (its state, the bytes in host
    /// memory when parked, and for how long).
    #[cfg(feature = "gui")]
    pub(crate) fn short(&self, now: UnixMs) -> String {
        let bytes = match (self.state, self.bytes) {
            (ParkState::Parked, Some(b)) => format!(" {:.1} GiB,", b as f64 / GIB as f64),
            _ => String::new(),
        };
        format!(
            "⏸ {}{bytes} {}",
            self.state.label(),
            duration(now - self.since_ms)
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn quoted_values_and_messages_are_cut_saying_their_length() {
        let long = "a".repeat(15 << 20);
        let m = super::cap_quoted(&format!(
            "unknown variant `{long}`, expected one of `mib`, `gib`"
        ));
        assert!(m.len() < 400, "{} bytes", m.len());
        assert!(
            m.starts_with(&format!(
                "unknown variant `{}… (15728640 bytes)`",
                "a".repeat(200)
            )),
            "{m}"
        );
        assert!(m.ends_with("expected one of `mib`, `gib`"), "{m}");
        let m = super::cap_quoted(&format!("two rules are named \"{long}"));
        assert!(
            m.len() < 4200 && m.ends_with("(15728661 bytes)"),
            "{}",
            m.len()
        );
        let plain = "a line: expected `=`, found \"x\"";
        assert_eq!(super::cap_quoted(plain), plain);
    }

    use super::*;

    #[test]
    #[cfg(feature = "gui")]
    fn a_moment_names_its_day_only_when_it_is_not_todays() {
        let now = 1_796_000_000_000;
        assert_eq!(moment(now, now), clock(now));
        let days_before = now - 3 * 86_400_000;
        assert_eq!(
            moment(days_before, now),
            format!("{} {}", day(days_before), clock(days_before))
        );
        let years_before = now - 400 * 86_400_000;
        assert_eq!(moment(years_before, now), date_time(years_before));
    }

    /// The window's review: a leak of 9 000 MiB/min stood beside "+8.8 GiB" in the same pane.
    #[test]
    fn a_rate_reads_in_gib_from_a_gib_a_minute() {
        assert_eq!(rate(9000.0), "8.8 GiB/min");
        assert_eq!(rate(1024.0), "1.0 GiB/min");
        assert_eq!(rate(1023.0), "1023 MiB/min");
        assert_eq!(rate(60.0), "60 MiB/min");
        assert_eq!(rate(2.25), "2.2 MiB/min");
    }

    #[test]
    fn a_size_too_small_for_a_tenth_of_a_gib_is_not_shown_as_nothing() {
        assert_eq!(Units::GiB.bytes(0), "0.0 GiB");
        assert_eq!(Units::GiB.bytes(47 * MIB), "<0.1 GiB");
        assert_eq!(Units::GiB.bytes(GIB / 20), "<0.1 GiB");
        assert_eq!(Units::GiB.bytes(GIB / 20 + 1), "0.1 GiB");
        assert_eq!(Units::GiB.delta(-(47 * MIB as i64)), "−<0.1 GiB");
        // MiB shows them as they are.
        assert_eq!(Units::MiB.bytes(47 * MIB), "47 MiB");
    }

    #[test]
    fn units_switch_at_ten_gib() {
        assert_eq!(Units::Auto.bytes(812 * MIB), "812 MiB");
        assert_eq!(Units::Auto.bytes(38 * GIB), "38.0 GiB");
        // One unit for a set: the largest decides.
        let card = Units::Auto.for_largest(140 * GIB);
        assert_eq!(card.bytes(616 * MIB), "0.6 GiB");
        assert_eq!(Units::Auto.for_largest(9 * GIB).bytes(9 * GIB), "9216 MiB");
        assert_eq!(Units::MiB.for_largest(140 * GIB), Units::MiB);
        assert_eq!(Units::MiB.bytes(38 * GIB), "38912 MiB");
        assert_eq!(Units::GiB.bytes(512 * MIB), "0.5 GiB");
        assert_eq!(Units::Auto.delta(-60 * MIB as i64), "−60 MiB");
        assert_eq!(duration(3_723_000), "1h 02m");
        assert_eq!(rfc3339(1_796_204_452_963), "2026-12-02T09:40:52.963Z");
    }
}
