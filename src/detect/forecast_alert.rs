//! The OOM forecast as an alert: a GPU forecast full within the set minutes raises an
//! `oom_forecast` event (naming the processes whose growth drives it) and a desktop
//! notification; an `oom_forecast_ended` event follows when the forecast recedes. Pure: the
//! caller passes the snapshot (with [`crate::model::DeviceSample::time_to_full_s`] set by the
//! leak watch) and the growing processes.

use std::collections::HashSet;

use crate::model::history::ProcSeriesKey;
use crate::model::{Snapshot, UnixMs, MIB};
use crate::session::{Event, OomHolder};

/// The default warning time: a GPU forecast full within 10 minutes.
pub(crate) const DEFAULT_MINUTES: f64 = 10.0;

/// A forecast must stay past this factor of the threshold (or vanish) for
/// [`RECEDE_MS`] before the alert ends (no flapping at the edge).
const RECEDE_FACTOR: f64 = 1.5;
/// See [`RECEDE_FACTOR`].
const RECEDE_MS: i64 = 15_000;
/// When nothing on the GPU grows any more (no forecast at all), its cause is gone: the alert
/// ends after this long.
const GONE_MS: i64 = 5_000;
/// A forecast must stay within the warning time this long before the alert is raised: a
/// server's burst of a few seconds (growth that stops) raises nothing.
const RAISE_HOLD_MS: i64 = 15_000;
/// The growth behind a forecast is believed once it has gone on for as long as the time it
/// predicts, or for this long (s), whichever is shorter: jobs loading or warming up at once
/// predict a full GPU that their growth, seconds old, does not bear out.
const BELIEVED_AFTER_S: f64 = 45.0;

/// An alert in force on one GPU.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ForecastAlert {
    /// The GPU.
    pub device_index: u32,
    /// When it was raised.
    pub since_ms: UnixMs,
    /// Seconds until full at the latest sample (None: the forecast has lapsed, the alert is
    /// about to end).
    pub full_in_s: Option<f64>,
    /// The processes whose growth drives it, largest first: "name (PID n)".
    pub drivers: Vec<String>,
}

impl ForecastAlert {
    /// The alert in words, as the banner, the status bar and the notification say it:
    /// "GPU 0 full in ~6m 07s: python3 (PID 70411) growing".
    #[cfg(feature = "gui")]
    pub(crate) fn sentence(&self) -> String {
        sentence(self.device_index, self.full_in_s, &self.drivers)
    }
}

/// A forecast alert in words: "GPU 0 full in ~6m 07s: python3 (PID 70411) growing" (a
/// lapsed forecast: "forecast receding"). The window's words (its banner, its notification).
#[cfg(feature = "gui")]
pub(crate) fn sentence(device: u32, full_in_s: Option<f64>, drivers: &[String]) -> String {
    let when = full_in_s.map_or_else(
        || "forecast receding".to_string(),
        |s| {
            format!(
                "full in ~{}",
                crate::model::format::duration((s * 1000.0) as i64)
            )
        },
    );
    if drivers.is_empty() {
        format!("GPU {device} {when}")
    } else {
        format!("GPU {device} {when}: {} growing", drivers.join(", "))
    }
}

/// Per GPU: the alert in force and since when its forecast has receded.
#[derive(Debug, Default)]
pub struct ForecastWatch {
    minutes: f64,
    active: crate::model::FastMap<u32, (ForecastAlert, Option<UnixMs>)>,
    /// Per GPU: since when its forecast has been within the warning time (not raised yet).
    near_since: crate::model::FastMap<u32, UnixMs>,
    /// Per GPU: since when it has had a forecast at all (see [`ForecastWatch::hold`]).
    standing_since: crate::model::FastMap<u32, UnixMs>,
}

impl ForecastWatch {
    /// A watch that warns `minutes` ahead (0 turns it off).
    pub fn new(minutes: f64) -> Self {
        Self {
            minutes,
            active: crate::model::FastMap::default(),
            near_since: crate::model::FastMap::default(),
            standing_since: crate::model::FastMap::default(),
        }
    }

    /// Changes the warning time.
    pub(crate) fn set_minutes(&mut self, minutes: f64) {
        self.minutes = minutes;
    }

    /// The alerts in force, by GPU.
    pub fn alerts(&self) -> Vec<ForecastAlert> {
        let mut v: Vec<ForecastAlert> = self.active.values().map(|(a, _)| a.clone()).collect();
        v.sort_by_key(|a| a.device_index);
        v
    }

    /// Makes `shown` (the View's) equal [`ForecastWatch::alerts`]; copied only when they
    /// changed.
    pub(crate) fn show_alerts(&self, shown: &mut Vec<ForecastAlert>) {
        // The same GPUs (the common case): each alert's figures copied, its drivers only
        // when they changed.
        let same_gpus = shown.len() == self.active.len()
            && shown
                .iter()
                .all(|a| self.active.contains_key(&a.device_index));
        if !same_gpus {
            *shown = self.alerts();
            return;
        }
        for a in shown.iter_mut() {
            if let Some((b, _)) = self.active.get(&a.device_index) {
                // Every field named: one added later is not left behind.
                let ForecastAlert {
                    device_index: _,
                    since_ms,
                    full_in_s,
                    drivers,
                } = b;
                a.since_ms = *since_ms;
                a.full_in_s = *full_in_s;
                if a.drivers != *drivers {
                    a.drivers.clone_from(drivers);
                }
            }
        }
    }

    /// The GPUs with an alert in force (no copy of the alerts), sorted, written into `out`.
    pub(crate) fn alert_gpus_into(&self, out: &mut Vec<u32>) {
        out.clear();
        out.extend(self.active.keys().copied());
        out.sort_unstable();
    }

    /// Feeds one snapshot; `growing` gives the processes whose growth the forecast counts
    /// (asked only when an alert is raised: nothing is built on an ordinary tick), and
    /// `growth_since` since when the longest growth behind a GPU's forecast has gone on.
    /// The alert is raised when the forecast has been within the warning time for
    /// [`RAISE_HOLD_MS`] and its growth is believed (see [`BELIEVED_AFTER_S`]).
    pub fn observe(
        &mut self,
        snap: &Snapshot,
        growing: &dyn Fn() -> HashSet<ProcSeriesKey>,
        growth_since: &dyn Fn(u32) -> Option<UnixMs>,
    ) -> Vec<Event> {
        let now = snap.taken_at_ms;
        let limit = self.minutes * 60.0;
        let mut events = Vec::new();
        for d in &snap.devices {
            let t = d.time_to_full_s.filter(|_| limit > 0.0);
            let held = self.held_near(d, t, limit, now, growth_since);
            match self.active.get_mut(&d.index) {
                None if held => {
                    let holders = drivers(snap, d.index, &growing());
                    events.push(self.raise(d.index, t, holders, now));
                }
                None => {}
                Some(_) => events.extend(self.follow(d.index, t, limit, now)),
            }
        }
        let listed = |i: &u32| snap.devices.iter().any(|d| d.index == *i);
        self.active.retain(|i, _| listed(i));
        self.near_since.retain(|i, _| listed(i));
        self.standing_since.retain(|i, _| listed(i));
        events
    }

    /// Whether GPU `d`'s forecast, full in `t` seconds, has been near (within `limit`) for
    /// the raise hold and is believed (its growth went on long enough); notes since when
    /// its forecast stands and is near.
    fn held_near(
        &mut self,
        d: &crate::model::DeviceSample,
        t: Option<f64>,
        limit: f64,
        now: UnixMs,
        growth_since: &dyn Fn(u32) -> Option<UnixMs>,
    ) -> bool {
        match d.time_to_full_s {
            Some(_) => {
                self.standing_since.entry(d.index).or_insert(now);
            }
            None => {
                self.standing_since.remove(&d.index);
            }
        }
        let believed = |full_in: f64| {
            growth_since(d.index)
                .is_some_and(|since| (now - since) as f64 / 1000.0 >= BELIEVED_AFTER_S.min(full_in))
        };
        let near = t.is_some_and(|s| s < limit);
        if !near {
            self.near_since.remove(&d.index);
        }
        near && now - *self.near_since.entry(d.index).or_insert(now) >= RAISE_HOLD_MS
            && t.is_some_and(believed)
    }

    /// Raises the alert on GPU `index`, full in `t` seconds, driven by `holders`: its event.
    fn raise(&mut self, index: u32, t: Option<f64>, holders: Vec<OomHolder>, now: UnixMs) -> Event {
        let alert = ForecastAlert {
            device_index: index,
            since_ms: now,
            full_in_s: t,
            drivers: holders
                .iter()
                .map(|h| format!("{} (PID {})", h.name, h.pid))
                .collect(),
        };
        self.active.insert(index, (alert, None));
        Event::OomForecast {
            unix_ms: now,
            device_index: index,
            full_in_s: t.unwrap_or(0.0),
            drivers: holders,
        }
    }

    /// Follows the raised alert on GPU `index` to its forecast now (full in `t` seconds):
    /// ended, with its event, once the forecast has receded (or gone) for its hold.
    fn follow(&mut self, index: u32, t: Option<f64>, limit: f64, now: UnixMs) -> Option<Event> {
        let (alert, receded) = self.active.get_mut(&index)?;
        alert.full_in_s = t;
        let gone = t.is_none_or(|s| s > limit * RECEDE_FACTOR);
        let hold = if t.is_none() { GONE_MS } else { RECEDE_MS };
        match (gone, *receded) {
            (false, _) => *receded = None,
            (true, None) => *receded = Some(now),
            (true, Some(since)) if now - since >= hold => {
                let raised_ms = alert.since_ms;
                self.active.remove(&index);
                return Some(Event::OomForecastEnded {
                    unix_ms: now,
                    device_index: index,
                    raised_ms,
                });
            }
            (true, Some(_)) => {}
        }
        None
    }

    /// The forecasts as shown (the GPU card's "full in", its memory bar's band, the graph's
    /// forecast line, the agent's figures): a GPU's time to full is kept only once its
    /// forecast has stood [`RAISE_HOLD_MS`] — the hold of the banner, the notification and
    /// the event, so no place warns of a server's burst of a few seconds. `snap` is the one
    /// just observed.
    pub fn hold(&self, snap: &mut Snapshot) {
        let now = snap.taken_at_ms;
        for d in &mut snap.devices {
            let stood = self
                .standing_since
                .get(&d.index)
                .is_some_and(|since| now - since >= RAISE_HOLD_MS);
            if !stood {
                d.time_to_full_s = None;
                d.time_to_full_earliest_s = None;
            }
        }
    }
}

/// The growing processes on GPU `gpu`, largest first.
fn drivers(snap: &Snapshot, gpu: u32, growing: &HashSet<ProcSeriesKey>) -> Vec<OomHolder> {
    let mut v: Vec<OomHolder> = snap
        .processes
        .iter()
        .filter(|p| p.device_index == gpu && growing.contains(&(p.key(), gpu)))
        .map(|p| {
            let i = p.info.as_deref();
            OomHolder::holding(
                p.pid,
                p.key().start_time_ms,
                i.map_or_else(|| "?".into(), |i| i.name.clone()),
                i.map_or_else(String::new, |i| i.user.clone()),
                p.used_bytes.unwrap_or(0) as f64 / MIB as f64,
            )
        })
        .collect();
    v.sort_by(|a, b| b.mib.total_cmp(&a.mib));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSample, ProcessKey, ProcessSample};

    fn snap(t: UnixMs, full_in_s: Option<f64>) -> Snapshot {
        Snapshot {
            taken_at_ms: t,
            devices: vec![DeviceSample {
                index: 0,
                time_to_full_s: full_in_s,
                ..DeviceSample::default()
            }],
            processes: vec![ProcessSample {
                pid: 42,
                used_bytes: Some(2048 * MIB),
                ..ProcessSample::default()
            }],
        }
    }

    fn growing() -> HashSet<ProcSeriesKey> {
        let key = ProcessKey {
            pid: 42,
            start_time_ms: 0,
        };
        HashSet::from([(key, 0)])
    }

    /// Growth going on since long before.
    fn old(_: u32) -> Option<UnixMs> {
        Some(-10_000_000)
    }

    /// The alerts shown in place equal the alerts, as they are raised, move and end, and
    /// whatever the list held.
    #[test]
    fn the_alerts_shown_in_place_equal_the_alerts() {
        let mut w = ForecastWatch::new(10.0);
        let mut shown = vec![ForecastAlert {
            device_index: 3,
            since_ms: 1,
            full_in_s: None,
            drivers: vec!["stale".into()],
        }];
        let forecasts = (0..600).map(|i| match i {
            0..=99 => Some(300.0 - f64::from(i)),
            100..=149 => Some(120.0),
            _ => None,
        });
        for (i, f) in forecasts.enumerate() {
            w.observe(&snap(i as i64 * 1_000, f), &growing, &old);
            w.show_alerts(&mut shown);
            assert_eq!(shown, w.alerts(), "at {i} s");
            if i == 120 {
                assert_eq!(shown.len(), 1, "raised");
                shown[0].drivers.push("stale".into());
            }
        }
        assert!(shown.is_empty(), "ended");
    }

    #[test]
    fn a_young_growth_is_believed_after_the_time_it_predicts_or_the_load_time() {
        // Growth that began at 0, forecast full in 30 s: believed at 30 s, not at the hold.
        let since = |_: u32| Some(0);
        let mut w = ForecastWatch::new(10.0);
        let mut raised = None;
        for t in (0..60_000).step_by(1_000) {
            if !w.observe(&snap(t, Some(30.0)), &growing, &since).is_empty() {
                raised.get_or_insert(t);
            }
        }
        assert_eq!(raised, Some(30_000));
        // Forecast full in 5 min: believed after the load time (45 s), not after 300 s.
        let mut w = ForecastWatch::new(10.0);
        let mut raised = None;
        for t in (0..120_000).step_by(1_000) {
            if !w
                .observe(&snap(t, Some(300.0)), &growing, &since)
                .is_empty()
            {
                raised.get_or_insert(t);
            }
        }
        assert_eq!(raised, Some((BELIEVED_AFTER_S * 1000.0) as i64));
        // Nothing known to grow: never believed.
        let mut w = ForecastWatch::new(10.0);
        let none = |_: u32| None;
        for t in (0..120_000).step_by(1_000) {
            assert!(w.observe(&snap(t, Some(60.0)), &growing, &none).is_empty());
        }
    }

    /// Issue 40: the forecast shown obeys the alert's hold — a burst shorter than
    /// [`RAISE_HOLD_MS`] is never shown; a forecast that stands is, from then on, and a
    /// pause in it starts the hold again.
    #[test]
    fn a_forecast_is_shown_only_once_it_has_stood_the_hold() {
        let mut w = ForecastWatch::new(10.0);
        let shown = |w: &mut ForecastWatch, t: UnixMs, s: Option<f64>| {
            let mut sn = snap(t, s);
            w.observe(&sn, &growing, &old);
            w.hold(&mut sn);
            sn.devices[0].time_to_full_s
        };
        // An 8 s burst, forecast "full in 9 s": shown nowhere.
        for t in (0..8_000).step_by(1_000) {
            assert_eq!(shown(&mut w, t, Some(9.0)), None, "at {t}");
        }
        assert_eq!(shown(&mut w, 8_000, None), None);
        // A forecast that stands: hidden for the hold, then shown as it is.
        for t in (10_000..10_000 + RAISE_HOLD_MS).step_by(1_000) {
            assert_eq!(shown(&mut w, t, Some(1200.0)), None, "at {t}");
        }
        assert_eq!(
            shown(&mut w, 10_000 + RAISE_HOLD_MS, Some(1100.0)),
            Some(1100.0)
        );
        // Gone, then back: held again.
        assert_eq!(shown(&mut w, 30_000, None), None);
        assert_eq!(shown(&mut w, 31_000, Some(1000.0)), None);
    }

    #[test]
    fn raised_once_with_its_drivers_then_ended_after_the_forecast_recedes() {
        let mut w = ForecastWatch::new(10.0);
        assert!(w.observe(&snap(0, Some(900.0)), &growing, &old).is_empty());
        // A burst: within the warning time for less than RAISE_HOLD_MS raises nothing.
        assert!(w
            .observe(&snap(1_000, Some(300.0)), &growing, &old)
            .is_empty());
        assert!(w
            .observe(&snap(1_500, Some(900.0)), &growing, &old)
            .is_empty());
        assert!(w
            .observe(&snap(2_000, Some(500.0)), &growing, &old)
            .is_empty());
        let raised = 2_000 + RAISE_HOLD_MS;
        let e = w.observe(&snap(raised, Some(500.0)), &growing, &old);
        match e.as_slice() {
            [Event::OomForecast {
                drivers, full_in_s, ..
            }] => {
                assert_eq!(drivers.len(), 1);
                assert_eq!(drivers[0].pid, 42);
                assert_eq!(*full_in_s, 500.0);
            }
            other => panic!("{other:?}"),
        }
        let t = raised;
        assert!(w
            .observe(&snap(t + 1_000, Some(400.0)), &growing, &old)
            .is_empty());
        assert_eq!(w.alerts().len(), 1);
        // Receded: ends only once it has stayed away for RECEDE_MS.
        assert!(w.observe(&snap(t + 2_000, None), &growing, &old).is_empty());
        assert!(w
            .observe(&snap(t + 9_000, Some(700.0)), &growing, &old)
            .is_empty());
        assert!(w
            .observe(&snap(t + 10_000, None), &growing, &old)
            .is_empty());
        let e = w.observe(&snap(t + 10_000 + RECEDE_MS, None), &growing, &old);
        assert!(
            matches!(e.as_slice(), [Event::OomForecastEnded { raised_ms, .. }] if *raised_ms == raised),
            "{e:?}"
        );
        assert!(w.alerts().is_empty());
    }

    #[test]
    fn it_ends_soon_after_nothing_grows_any_more() {
        let mut w = ForecastWatch::new(10.0);
        assert!(w.observe(&snap(0, Some(60.0)), &growing, &old).is_empty());
        assert_eq!(
            w.observe(&snap(RAISE_HOLD_MS, Some(60.0)), &growing, &old)
                .len(),
            1
        );
        // The growth stops: no forecast at all. Gone for GONE_MS ends it (not RECEDE_MS).
        let t = RAISE_HOLD_MS + 1_000;
        assert!(w.observe(&snap(t, None), &growing, &old).is_empty());
        assert!(w
            .observe(&snap(t + GONE_MS - 1, None), &growing, &old)
            .is_empty());
        let e = w.observe(&snap(t + GONE_MS, None), &growing, &old);
        assert!(
            matches!(e.as_slice(), [Event::OomForecastEnded { .. }]),
            "{e:?}"
        );
        // A forecast far beyond the warning time (not gone) still waits RECEDE_MS.
        let mut w = ForecastWatch::new(10.0);
        w.observe(&snap(0, Some(60.0)), &growing, &old);
        w.observe(&snap(RAISE_HOLD_MS, Some(60.0)), &growing, &old);
        let t = RAISE_HOLD_MS + 1_000;
        assert!(w
            .observe(&snap(t, Some(5_000.0)), &growing, &old)
            .is_empty());
        assert!(w
            .observe(&snap(t + GONE_MS, Some(5_000.0)), &growing, &old)
            .is_empty());
        assert_eq!(w.alerts().len(), 1);
        assert_eq!(
            w.observe(&snap(t + RECEDE_MS, Some(5_000.0)), &growing, &old)
                .len(),
            1
        );
    }

    #[test]
    fn zero_minutes_turns_it_off() {
        let mut w = ForecastWatch::new(0.0);
        assert!(w.observe(&snap(0, Some(1.0)), &growing, &old).is_empty());
    }
}
