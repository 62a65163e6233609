//! Watches: the memory detectors run over each enriched sample — leaks (and the time-to-full
//! forecast written into the sample), OOM suspicions, the OOM forecast alert, and memory held
//! by processes not running here (orphans). They give events for the log and the View, and
//! the engine's events through the tick's [`Outbox`].

use std::collections::HashSet;

use super::outbox::Outbox;
use crate::detect::leak_watch::LeakWatch;
use crate::engine::view::{LeakKey, Monitor};
use crate::model::history::ProcSeriesKey;
use crate::model::{FastMap, Snapshot, UnixMs};
use crate::session::Event;

/// The detectors and their state across ticks.
pub(crate) struct Watches {
    leaks: LeakWatch,
    ooms: crate::detect::oom_watch::OomWatch,
    /// The OOM forecast as an alert.
    forecasts: crate::detect::forecast_alert::ForecastWatch,
    orphans: crate::detect::orphans::OrphanWatch,
    /// The processes leaking now, since when (for the rules), as of the last sample.
    leaking: FastMap<ProcSeriesKey, UnixMs>,
    /// How fast each process grows now, MiB/min (for the OOM guard), as of the last sample.
    growth: FastMap<ProcSeriesKey, f64>,
}

impl Default for Watches {
    fn default() -> Self {
        Self {
            leaks: LeakWatch::default(),
            ooms: crate::detect::oom_watch::OomWatch::default(),
            forecasts: crate::detect::forecast_alert::ForecastWatch::new(
                crate::detect::forecast_alert::DEFAULT_MINUTES,
            ),
            orphans: crate::detect::orphans::OrphanWatch::default(),
            leaking: FastMap::default(),
            growth: FastMap::default(),
        }
    }
}

/// What the watches found in one sample.
pub(crate) struct Watched {
    /// Leak, OOM and forecast events, for the log and the View.
    pub events: Vec<Event>,
    /// GPUs with memory held by processes not running here.
    pub orphans: Vec<crate::detect::orphans::OrphanGpu>,
}

impl Watches {
    /// Takes the settings' leak sensitivity and forecast horizon.
    pub(crate) fn apply_settings(&mut self, s: &crate::engine::settings::Settings) {
        self.leaks.set_settings(s.leaks);
        self.forecasts
            .set_minutes(s.notifications.oom_forecast_minutes.clamp(0.0, 1440.0));
    }

    /// Runs every watch over `snap` (the leak forecast is written into it).
    pub(crate) fn observe(&mut self, snap: &mut Snapshot, out: &mut Outbox) -> Watched {
        let leak_watch = crate::host::cost::span(crate::host::cost::Part::LeakWatch);
        let mut events = self.leaks.observe(snap);
        self.leaks.forecast(snap);
        drop(leak_watch);
        events.extend(self.ooms.observe(snap));
        self.leaks.leaking_since_into(&mut self.leaking);
        // The forecast counts every growing series (a leak, a load, a ramp): so do its drivers.
        let (leaks, leaking_ref) = (&self.leaks, &self.leaking);
        let growing = || {
            let mut keys: HashSet<ProcSeriesKey> = leaking_ref.keys().copied().collect();
            keys.extend(leaks.growing().filter_map(|(k, _)| match k {
                LeakKey::Process(p) => Some(p),
                LeakKey::Ghost(_) => None,
            }));
            keys
        };
        let since = |d: u32| leaks.forecast_growth_since(d);
        events.extend(self.forecasts.observe(snap, &growing, &since));
        out.recorded(&events);
        let (orphans, alerted) = self.orphans.observe(snap);
        for gpu in alerted {
            out.event(
                snap.taken_at_ms,
                crate::engine::events::EngineEventKind::OrphanMemory { gpu },
            );
        }
        self.leaks.process_rates_into(&mut self.growth);
        Watched { events, orphans }
    }

    /// The processes leaking now, since when (for the rules), as of the last sample.
    pub(crate) fn leaking(&self) -> &FastMap<ProcSeriesKey, UnixMs> {
        &self.leaking
    }

    /// How fast each process grows now, MiB/min (for the OOM guard), as of the last sample.
    pub(crate) fn growth(&self) -> &FastMap<ProcSeriesKey, f64> {
        &self.growth
    }

    /// What the watches show in the View: the tick's events, the leak table and the
    /// orphans.
    pub(crate) fn publish(
        &self,
        m: &mut Monitor,
        events: &[Event],
        orphans: Vec<crate::detect::orphans::OrphanGpu>,
    ) {
        for e in events {
            crate::detect::leak_watch::record_event(&mut m.leaks, &mut m.ooms, e, None);
        }
        self.leaks.refresh(&mut m.growing, &mut m.leaks);
        m.orphans = orphans;
    }

    /// Keeps in `snap` (observed last) only the forecasts that have stood the alerts' hold:
    /// what the View shows ([`crate::detect::forecast_alert::ForecastWatch::hold`]).
    pub(crate) fn hold_forecasts(&self, snap: &mut Snapshot) {
        self.forecasts.hold(snap);
    }

    /// The GPUs with an OOM forecast alert standing now, written into `out`.
    pub(crate) fn forecast_alert_gpus_into(&self, out: &mut Vec<u32>) {
        self.forecasts.alert_gpus_into(out);
    }

    /// Makes `shown` (the View's) equal the OOM forecast alerts standing now, copying only on
    /// a change.
    pub(crate) fn show_forecast_alerts(
        &self,
        shown: &mut Vec<crate::detect::forecast_alert::ForecastAlert>,
    ) {
        self.forecasts.show_alerts(shown);
    }
}
