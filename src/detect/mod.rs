//! The detectors: they read the history and the samples and say what is wrong (leaks, OOMs,
//! the forecast alert, memory held by processes not running here). They act on nothing.

pub mod forecast_alert;
pub mod leak;
pub mod leak_watch;
pub mod oom_watch;
pub mod orphans;
pub mod records;
