//! Utilisation, temperature and power are kept over time beside memory, live and in a
//! reopened session, for the window's per-GPU graphs; the power cap, clocks and fan live.

use vramwarden::engine::view::Monitor;
use vramwarden::engine::{Engine, RecordTo};
use vramwarden::model::history::{Metric, NONE};
use vramwarden::session::reader::SessionData;
use vramwarden::source::sim::SimSource;
use vramwarden::source::GpuSource;

const T0: i64 = 1_796_000_000_000;

#[test]
fn device_metrics_are_kept_live_and_replayed_from_the_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("m.vwlog");
    let sim = SimSource::demo(T0);
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 1000));
    let mut e = Engine::new(shared.clone(), RecordTo::File(path.clone()), 1000);
    e.set_source(sim.info());
    let mut expected = Vec::new();
    for i in 0..120 {
        let s = sim.at(T0 + i * 1000);
        expected.push(
            s.devices
                .iter()
                .map(|d| Metric::ALL.map(|m| m.of(d)))
                .collect::<Vec<_>>(),
        );
        e.tick(s, T0 + i * 1000);
    }
    e.finish().expect("close");
    let live = shared.read().expect("lock").clone();
    let replay = vramwarden::engine::replay::session(&SessionData::open(&path).expect("open"));
    for (what, m) in [("live", &live), ("replay", &replay)] {
        let h = &m.history;
        let (t0, t1) = (h.tick_at(T0), h.end_tick());
        for dev in 0..2u32 {
            for (k, metric) in Metric::ALL.into_iter().enumerate() {
                // The session log keeps every metric (format 2 added the power cap, clocks and
                // fan), so the replay has the live series.
                let got: Vec<u32> = h
                    .metric(dev, metric)
                    .expect("series")
                    .values(t0, t1)
                    .into_iter()
                    .map(|(_, v)| v)
                    .collect();
                let want: Vec<u32> = expected.iter().map(|d| d[dev as usize][k]).collect();
                assert_eq!(got, want, "{what}: GPU {dev} {metric:?}");
                // The simulated H200 (GPU 0) is an SXM module: no fan, no reading (never 0).
                if dev == 0 && metric == Metric::Fan {
                    assert!(got.iter().all(|v| *v == NONE), "{what}: no fan");
                } else {
                    assert!(got.iter().all(|v| *v != NONE), "{what}: all reported");
                }
            }
        }
    }
    // Utilisation moves in the demo: the series is not a constant.
    let u: Vec<u32> = expected.iter().map(|d| d[0][0]).collect();
    assert!(u.iter().min() != u.iter().max());
}
