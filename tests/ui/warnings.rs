//! One rule for every place that warns: the GPU card, its memory bar and the graph show a
//! forecast only once it has stood the hold the banner, the notification and the event obey.

use super::*;

/// The demo through the real engine, one window per second from `from` to `to` (s): whether
/// GPU `gpu`'s card says "full in" and whether a banner stands for it, at each second.
fn card_and_banner(from: i64, to: i64, gpu: u32) -> Vec<(i64, bool, bool)> {
    use vramwarden::engine::{Engine, RecordTo};
    let sim = SimSource::demo(T0);
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 86_400));
    let mut e = Engine::new(shared.clone(), RecordTo::Off, 1000);
    e.set_source(sim.info());
    let mut seen = Vec::new();
    for i in 0..=to {
        let t = T0 + i * 1000;
        e.tick(sim.at(t), t);
        if i < from {
            continue;
        }
        let m = shared.read().expect("lock").clone();
        let banner = m.oom_alerts.iter().any(|a| a.device_index == gpu);
        let app =
            VramApp::with_backend(Backend::detached(m, SourceKind::demo()), UiState::default())
                .with_fixed_now(t);
        let mut h = harness(app);
        h.run();
        let card = h
            .query_by_label_contains(&format!("GPU {gpu} full in"))
            .is_some();
        seen.push((i, card, banner));
    }
    seen
}

/// Major 4 of issue 40: the demo's inference server takes an 8 s burst every two minutes
/// (GPU 1). Its growth gives a forecast of seconds for a few samples; the banner holds it back
/// 15 s and so does the card, on every sample of the burst and after it.
#[test]
fn a_burst_puts_no_full_in_on_the_card() {
    let seen = card_and_banner(118, 140, 1);
    let cried: Vec<i64> = seen.iter().filter(|s| s.1).map(|s| s.0).collect();
    assert!(
        cried.is_empty(),
        "GPU 1's card said 'full in' at {cried:?} s"
    );
    assert!(seen.iter().all(|s| !s.2), "no banner either");
}

/// The other half: a leak that grows for minutes (the demo's notebook on GPU 0) is on the card
/// once its forecast has stood (farther than the banner's warning time: no banner).
#[test]
fn a_standing_forecast_is_on_the_card() {
    let seen = card_and_banner(600, 600, 0);
    assert_eq!(seen, vec![(600, true, false)], "(second, card, banner)");
}
