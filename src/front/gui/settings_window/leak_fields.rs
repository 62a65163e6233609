//! The Leaks section's fields: the detector's settings, plain and advanced.

/// A leak parameter's row: its label, value, range, unit and what it does.
type LeakField<'a> = (
    &'static str,
    &'a mut f64,
    std::ops::RangeInclusive<f64>,
    &'static str,
    &'static str,
);

/// The leak detector's parameters the README and docs/leaks.md document (`[leaks]`), in
/// their order there.
pub(crate) fn leak_fields(l: &mut crate::detect::leak::LeakSettings) -> [LeakField<'_>; 8] {
    [
        (
            "Minimum growth",
            &mut l.min_growth_mib,
            1.0..=1_000_000.0,
            " MiB",
            "least total growth before a leak is flagged",
        ),
        (
            "Minimum duration",
            &mut l.min_duration_s,
            1.0..=86_400.0,
            " s",
            "shortest time the growth must have lasted",
        ),
        (
            "Minimum rate",
            &mut l.min_rate_mib_per_min,
            0.1..=100_000.0,
            " MiB/min",
            "slowest growth that counts",
        ),
        (
            "Observation window",
            &mut l.window_s,
            10.0..=86_400.0,
            " s",
            "history each process keeps for the decision",
        ),
        (
            "Ends after no growth for",
            &mut l.quiet_s,
            1.0..=86_400.0,
            " s",
            "a leak ends after this long without growth",
        ),
        (
            "Drop tolerance",
            &mut l.drop_tolerance_mib,
            0.0..=1_000_000.0,
            " MiB",
            "a larger fall is a free: it resets the growth",
        ),
        (
            "Start-up grace",
            &mut l.startup_s,
            1.0..=86_400.0,
            " s",
            "a new process's ramp is judged once it levels off, or after this",
        ),
        (
            "Settled after",
            &mut l.settle_s,
            1.0..=86_400.0,
            " s",
            "a ramp or burst has levelled off after this long flat",
        ),
    ]
}

/// The detector's remaining parameters (load size, load time, flat spell).
pub(super) fn leak_advanced_fields(
    l: &mut crate::detect::leak::LeakSettings,
) -> [LeakField<'_>; 3] {
    [
        (
            "Load size",
            &mut l.load_mib,
            1.0..=1_000_000.0,
            " MiB",
            "a growth this large may be a load: it must go on longer before it is a leak",
        ),
        (
            "Load time",
            &mut l.load_s,
            1.0..=86_400.0,
            " s",
            "how much longer a load-sized growth must go on",
        ),
        (
            "Flat spell",
            &mut l.flat_s,
            1.0..=86_400.0,
            " s",
            "after this long without a new high, growth is judged afresh",
        ),
    ]
}
