//! Property tests of the session reader: it never panics on any bytes (arbitrary, built from
//! record markers, or real logs mutated, cut or joined), its checksum work stays linear in the
//! input, and damage to one part of a log never loses a complete record elsewhere.
//! `PROPTEST_CASES=N` runs longer (the default is proptest's 256 per property).

use std::sync::OnceLock;

use proptest::prelude::*;
use vramwarden::session::csv_export::{export, Table};
use vramwarden::session::format::{
    frame, put_varint, read_record, CRC_STRIDE, KIND_EVENT, KIND_HEADER, KIND_SAMPLE, MAGIC,
};
use vramwarden::session::reader::SessionData;
use vramwarden::source::sim::SimSource;

const T0: i64 = 1_796_000_000_000;

/// A valid 120-sample demo log and its number of samples.
fn log() -> &'static (Vec<u8>, usize) {
    static LOG: OnceLock<(Vec<u8>, usize)> = OnceLock::new();
    LOG.get_or_init(|| demo_log(T0))
}

/// The same demo, recorded starting an hour later (to join after [`log`]).
fn later_log() -> &'static (Vec<u8>, usize) {
    static LOG: OnceLock<(Vec<u8>, usize)> = OnceLock::new();
    LOG.get_or_init(|| demo_log(T0 + 3_600_000))
}

/// Every sample record of a valid log: (offset of its first byte, one past its last, time).
fn sample_records(bytes: &[u8]) -> Vec<(usize, usize, i64)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some((rec, next)) = read_record(bytes, pos) {
        if rec.kind == KIND_SAMPLE {
            let mut p = 0;
            let t = vramwarden::session::format::get_varint(rec.payload, &mut p).expect("time");
            out.push((pos, next, t as i64));
        }
        pos = next;
    }
    assert_eq!(pos, bytes.len(), "a valid log reads to its end");
    out
}

/// Everything a reader hands out, exercised: snapshots, the GUI replay and every CSV table.
fn exercise(s: &SessionData) -> Result<(), TestCaseError> {
    prop_assert!(s.report.records >= s.report.samples + s.report.events);
    prop_assert!(s.len() <= s.report.samples);
    for snap in s.snapshots() {
        prop_assert!(snap.devices.len() <= 4096);
    }
    let m = vramwarden::engine::replay::session(s);
    prop_assert!(m.history.len() <= s.len());
    for t in Table::ALL {
        export(s, t, &mut std::io::sink(), &mut |_| true)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
    Ok(())
}

/// The most checksum work a reader may do on `bytes`: the bytes once, plus two strides per
/// record marker.
fn linear_bound(bytes: &[u8]) -> u64 {
    let markers = bytes.windows(2).filter(|w| *w == MAGIC).count() as u64;
    bytes.len() as u64 + markers * 2 * CRC_STRIDE as u64
}

/// Pieces of hostile files: raw bytes, markers with any kind and length, real records.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        (
            0u8..5,
            prop_oneof![0u64..300, 0u64..(1 << 25), any::<u64>()]
        )
            .prop_map(|(k, len)| {
                let mut v = MAGIC.to_vec();
                v.push(k);
                put_varint(&mut v, len);
                v
            }),
        (
            prop_oneof![Just(KIND_HEADER), Just(KIND_SAMPLE), Just(KIND_EVENT)],
            proptest::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(k, p)| frame(k, &p)),
        // The attack: one marker claiming `len` bytes, repeated (so the claims of all
        // but the last few are backed by the file).
        (0u8..4, 0u64..(1 << 16), 1usize..1500).prop_map(|(k, len, times)| {
            let mut one = MAGIC.to_vec();
            one.push(k);
            put_varint(&mut one, len);
            one.repeat(times)
        }),
        // Valid records with garbage ids and device indexes.
        (
            any::<u64>(),
            proptest::collection::vec((any::<u32>(), any::<u32>()), 0..6),
            any::<u32>()
        )
            .prop_map(|(t, procs, dev)| {
                let devices = [vramwarden::model::DeviceSample {
                    index: dev % 8192,
                    memory_used_bytes: Some(u64::from(dev) << 10),
                    ..Default::default()
                }];
                let procs: Vec<(u32, Option<u64>)> = procs
                    .iter()
                    .map(|(id, m)| (*id, Some(u64::from(*m) << 20)))
                    .collect();
                let mut payload = Vec::new();
                vramwarden::session::format::encode_sample(
                    &mut payload,
                    (t >> 1) as i64,
                    &devices,
                    &procs,
                );
                frame(KIND_SAMPLE, &payload)
            }),
        (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(id, pid, dev)| {
            let e = vramwarden::session::Event::ProcessStart {
                unix_ms: T0,
                def: vramwarden::session::ProcDef {
                    id,
                    pid,
                    device_index: dev,
                    info: vramwarden::model::ProcInfo {
                        name: "x".into(),
                        ..Default::default()
                    },
                },
            };
            frame(KIND_EVENT, &serde_json::to_vec(&e).expect("json"))
        }),
        (0usize..1000).prop_map(|i| {
            // A slice of a real log (often cutting records in half).
            let b = &log().0;
            let a = (i * 97) % b.len();
            b[a..(a + 200).min(b.len())].to_vec()
        }),
    ]
}

/// Writes the demo from `t0` for 120 s and returns the file and its number of samples.
fn demo_log(t0: i64) -> (Vec<u8>, usize) {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("f.vwlog");
    {
        use vramwarden::engine::{Engine, RecordTo};
        use vramwarden::source::GpuSource;
        let sim = SimSource::demo(t0);
        let shared = vramwarden::engine::shared::Shared::new(
            vramwarden::engine::view::Monitor::new(1000, 10),
        );
        let mut e = Engine::new(shared, RecordTo::File(path.clone()), 1000);
        e.set_source(sim.info());
        for i in 0..120 {
            e.tick(sim.at(t0 + i * 1000), t0 + i * 1000);
        }
        e.finish().expect("close");
    }
    let bytes = std::fs::read(&path).expect("read");
    let n = SessionData::parse(bytes.clone()).len();
    (bytes, n)
}

proptest! {
    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        let bound = linear_bound(&bytes);
        let s = SessionData::parse(bytes);
        // Whatever it found is consistent, and every use of it works.
        exercise(&s)?;
        prop_assert!(s.report.checksummed_bytes <= bound);
    }

    #[test]
    fn hostile_pieces_never_panic_and_cost_linear_work(
        pieces in proptest::collection::vec(piece(), 0..40),
    ) {
        let bytes = pieces.concat();
        let bound = linear_bound(&bytes);
        let s = SessionData::parse(bytes);
        exercise(&s)?;
        prop_assert!(
            s.report.checksummed_bytes <= bound,
            "hashed {} bytes, bound {}", s.report.checksummed_bytes, bound
        );
    }

    #[test]
    fn mutated_logs_keep_every_untouched_record(
        muts in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..8),
        joined in any::<bool>(),
    ) {
        // A real log (or two joined end to end), some bytes changed: every sample record with
        // no changed byte is read back as written; nothing panics.
        let mut orig = log().0.clone();
        if joined {
            orig.extend_from_slice(&later_log().0);
        }
        let full = SessionData::parse(orig.clone());
        let mut bytes = orig.clone();
        let hit: Vec<usize> = muts.iter().map(|(i, _)| i.index(bytes.len())).collect();
        for (pos, (_, x)) in hit.iter().zip(&muts) {
            bytes[*pos] ^= x;
        }
        let s = SessionData::parse(bytes);
        exercise(&s)?;
        let untouched: Vec<i64> = sample_records(&orig)
            .into_iter()
            .filter(|(a, b, _)| !hit.iter().any(|h| (a..b).contains(&h)))
            .map(|(_, _, t)| t)
            .collect();
        for t in &untouched {
            let i = s.index_at(*t);
            let got = s.decoded(i).filter(|d| d.unix_ms == *t);
            prop_assert!(got.is_some(), "sample at {} lost", t);
            let want = full.decoded(full.index_at(*t));
            let (got, want) = (got.expect("checked"), want.expect("in the full log"));
            prop_assert_eq!(&got.devices, &want.devices);
            let used = |d: &vramwarden::session::format::DecodedSample| {
                let mut u: Vec<Option<u64>> = d.procs.iter().map(|p| p.1).collect();
                u.sort();
                u
            };
            prop_assert_eq!(used(&got), used(&want));
        }
        prop_assert!(s.len() >= untouched.len());
    }

    #[test]
    fn garbage_after_any_point_keeps_every_record_before_it(
        cut in any::<prop::sample::Index>(),
        tail in proptest::collection::vec(piece(), 0..8),
    ) {
        let (orig, _) = log();
        let cut = cut.index(orig.len() + 1);
        let full = SessionData::parse(orig.clone());
        let mut bytes = orig[..cut].to_vec();
        bytes.extend_from_slice(&tail.concat());
        let s = SessionData::parse(bytes);
        exercise(&s)?;
        for (_, end, t) in sample_records(orig) {
            if end > cut {
                break;
            }
            let i = s.index_at(t);
            let got = s.decoded(i).filter(|d| d.unix_ms == t);
            prop_assert!(got.is_some(), "sample at {} (ending at {} before the cut {}) lost", t, end, cut);
            prop_assert_eq!(got.map(|d| d.devices), full.decoded(full.index_at(t)).map(|d| d.devices));
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
    fn pytorch_figures_round_trip_exactly(
        procs in proptest::collection::vec((any::<u32>(), any::<bool>(), any::<[u64; 5]>()), 0..40)
    ) {
        use vramwarden::model::TorchMem;
        use vramwarden::session::format::{decode_sample, encode_sample_with_torch};
        let entries: Vec<(u32, Option<u64>)> =
            procs.iter().map(|(id, _, v)| (*id, Some((v[0] >> 20) << 20))).collect();
        let torch: Vec<(u32, TorchMem)> = procs
            .iter()
            .enumerate()
            .filter(|(_, (_, has, _))| *has)
            .map(|(i, (_, _, v))| {
                (i as u32, TorchMem {
                    allocated_bytes: v[0],
                    reserved_bytes: v[1],
                    inactive_split_bytes: v[2],
                    alloc_retries: v[3],
                    ooms: v[4],
                    ..TorchMem::default()
                })
            })
            .collect();
        let mut buf = Vec::new();
        encode_sample_with_torch(&mut buf, T0, &[], &entries, &torch);
        let d = decode_sample(&buf).expect("decodes");
        prop_assert_eq!(d.procs, entries.clone());
        prop_assert_eq!(d.torch, torch);
        // Any cut of it is malformed, never a panic — except the cut that leaves the sample
        // without its torch section (a version 1 sample: the same processes, no figures).
        let mut v1 = Vec::new();
        encode_sample_with_torch(&mut v1, T0, &[], &entries, &[]);
        for cut in 0..buf.len() {
            match decode_sample(&buf[..cut]) {
                None => {}
                Some(d) => {
                    prop_assert_eq!(cut, v1.len());
                    prop_assert_eq!(d.procs, entries.clone());
                    prop_assert!(d.torch.is_empty());
                }
            }
        }
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
