//! Property tests of the session reader: it never panics on any bytes, and damage to one part
//! of a log never loses records elsewhere. `PROPTEST_CASES=N` runs longer.

use std::sync::OnceLock;

use proptest::prelude::*;
use vramwarden::session::format::{frame, KIND_SAMPLE};
use vramwarden::session::reader::SessionData;
use vramwarden::source::sim::SimSource;

const T0: i64 = 1_796_000_000_000;

/// A valid 120-sample demo log and the byte offset where each record starts.
fn log() -> &'static (Vec<u8>, usize) {
    static LOG: OnceLock<(Vec<u8>, usize)> = OnceLock::new();
    LOG.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("f.vwlog");
        {
            use std::sync::{Arc, RwLock};
            use vramwarden::engine::{Engine, RecordTo};
            use vramwarden::source::GpuSource;
            let sim = SimSource::demo(T0);
            let shared = Arc::new(RwLock::new(vramwarden::monitor::Monitor::new(1000, 10)));
            let mut e = Engine::new(shared, RecordTo::File(path.clone()), 1000);
            e.set_source(sim.info());
            for i in 0..120 {
                e.tick(sim.at(T0 + i * 1000), T0 + i * 1000);
            }
            e.finish().expect("close");
        }
        let bytes = std::fs::read(&path).expect("read");
        let n = SessionData::parse(bytes.clone()).len();
        (bytes, n)
    })
}

proptest! {
    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let s = SessionData::parse(bytes);
        // Whatever it found is consistent.
        prop_assert!(s.report.records >= s.report.samples + s.report.events);
        for snap in s.snapshots() {
            prop_assert!(snap.devices.len() < 5000);
        }
    }

    #[test]
    fn framed_garbage_payloads_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..600)) {
        // A checksum-valid record with nonsense inside must be skipped, not trusted.
        let mut bytes = log().0.clone();
        bytes.extend_from_slice(&frame(KIND_SAMPLE, &payload));
        let s = SessionData::parse(bytes);
        prop_assert!(s.len() >= log().1);
        let _ = s.snapshots().count();
    }

    #[test]
    fn local_damage_loses_only_nearby_records(start in 0usize..60_000, len in 1usize..400, fill in any::<u8>()) {
        let (orig, n) = log();
        let mut bytes = orig.clone();
        let start = start % bytes.len();
        let end = (start + len).min(bytes.len());
        for b in &mut bytes[start..end] {
            *b = fill;
        }
        let s = SessionData::parse(bytes);
        // Sample records of this log are over 50 bytes: damage of `len` bytes can touch at most
        // len/50 + 2 of them.
        let lost = n - s.len().min(*n);
        prop_assert!(lost <= len / 50 + 2, "lost {} samples to {} bytes at {}", lost, len, start);
    }

    #[test]
    fn any_cut_keeps_the_prefix(cut in 0usize..200_000) {
        let (orig, _) = log();
        let cut = cut % (orig.len() + 1);
        let s = SessionData::parse(orig[..cut].to_vec());
        let full = SessionData::parse(orig.clone());
        // Every sample of the prefix equals the one in the full file.
        for (i, snap) in s.snapshots().enumerate() {
            prop_assert_eq!(Some(snap), full.snapshot(i));
        }
    }
}
