//! Session logs end to end: record → open → same samples; kill -9 recovery; damaged files;
//! CSV export against the log; the CLI.

use std::process::Command;
use std::time::{Duration, Instant};

use vramwarden::engine::view::Monitor;
use vramwarden::model::UnixMs;
use vramwarden::session::csv_export::{export, Table};
use vramwarden::session::reader::SessionData;
use vramwarden::source::sim::SimSource;
use vramwarden::source::GpuSource;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vramwarden"))
}

const T0: UnixMs = 1_796_000_000_000;

/// Records `seconds` of the demo through the engine into `path`.
fn record_demo(path: &std::path::Path, seconds: i64) {
    use vramwarden::engine::{Engine, RecordTo};
    let sim = SimSource::demo(T0);
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared, RecordTo::File(path.to_path_buf()), 1000);
    e.set_source(sim.info());
    for i in 0..seconds {
        let t = T0 + i * 1000;
        e.tick(sim.at(t), t);
    }
    e.finish().expect("close");
}

#[test]
fn round_trip_gives_back_every_sample() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo(&path, 1500);
    let s = SessionData::open(&path).expect("open");
    assert!(s.report.is_clean(), "{:?}", s.report);
    assert_eq!(s.len(), 1500);
    let sim = SimSource::demo(T0);
    let header = s.header.clone().expect("header");
    assert_eq!(header.devices.len(), 2);
    assert_eq!(header.devices[0].name, "Simulated H200");
    for (i, mut snap) in s.snapshots().enumerate() {
        let want = sim.at(T0 + i as i64 * 1000);
        assert_eq!(snap.taken_at_ms, want.taken_at_ms);
        // The forecast is the engine's, logged with the sample (the source gives none).
        for d in &mut snap.devices {
            d.time_to_full_s = None;
            d.time_to_full_earliest_s = None;
        }
        assert_eq!(snap.devices, want.devices, "sample {i}");
        let mut got: Vec<(u32, Option<u64>, String)> = snap
            .processes
            .iter()
            .map(|p| {
                (
                    p.pid,
                    p.used_bytes,
                    p.info
                        .as_ref()
                        .map(|i| i.cmdline.clone())
                        .unwrap_or_default(),
                )
            })
            .collect();
        let mut exp: Vec<(u32, Option<u64>, String)> = want
            .processes
            .iter()
            .map(|p| {
                (
                    p.pid,
                    p.used_bytes,
                    p.info
                        .as_ref()
                        .map(|i| i.cmdline.clone())
                        .unwrap_or_default(),
                )
            })
            .collect();
        got.sort();
        exp.sort();
        assert_eq!(got, exp, "sample {i}");
    }
    // The periodic job started and exited: events say so.
    let starts = s.events.iter().filter(|e| matches!(e, vramwarden::session::Event::ProcessStart { def, .. } if def.info.cmdline.contains("preprocess"))).count();
    let exits = s
        .events
        .iter()
        .filter(
            |e| matches!(e, vramwarden::session::Event::ProcessExit { pid, .. } if *pid >= 60100),
        )
        .count();
    assert_eq!(
        (starts, exits),
        (3, 3),
        "job lives at 30 s, 630 s, 1230 s; exits at 270 s, 870 s, 1470 s"
    );
    // The monitor replay holds the whole history.
    let m = vramwarden::engine::replay::session(&s);
    assert_eq!(m.history.len(), 1500);
}

#[test]
fn truncated_and_corrupted_files_keep_every_whole_record() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo(&path, 300);
    let bytes = std::fs::read(&path).expect("read");
    let whole = SessionData::parse(bytes.clone());
    assert_eq!(whole.len(), 300);
    // Cut anywhere: every sample whose record lies wholly before the cut is still there.
    for cut in [bytes.len() - 1, bytes.len() - 7, bytes.len() / 2, 100, 3] {
        let s = SessionData::parse(bytes[..cut].to_vec());
        let t = s.span().map_or(T0 - 1000, |(_, b)| b);
        let expect_at_least = ((t - T0) / 1000 + 1) as usize;
        assert_eq!(s.len(), expect_at_least, "cut at {cut}: no gap");
        let whole_before_cut = whole
            .sample_record_ends()
            .iter()
            .filter(|(_, end)| *end <= cut)
            .count();
        assert_eq!(
            s.len(),
            whole_before_cut,
            "cut at {cut}: every whole record kept"
        );
        if cut < bytes.len() {
            assert!(s.report.truncated_tail || s.report.skipped_bytes == 0);
        }
    }
    // Garbage in the middle: only the records it overwrote are lost, and the reader says so.
    let mut bad = bytes.clone();
    let mid = bad.len() / 2;
    for b in &mut bad[mid..mid + 500] {
        *b = 0x5A;
    }
    let s = SessionData::parse(bad);
    assert!(s.report.skipped_bytes >= 500);
    assert_eq!(s.report.skipped_regions, 1);
    let lost = 300 - s.len();
    // Sample records here are over 50 bytes long.
    assert!(
        (1..=500 / 50 + 2).contains(&lost),
        "lost {lost} samples to 500 garbage bytes"
    );
    assert!(s.report.summary().contains("skipped"));
    // Random bytes and an empty file: no panic, nothing found.
    let mut x: u64 = 1;
    let noise: Vec<u8> = (0..100_000)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            (x >> 56) as u8
        })
        .collect();
    assert_eq!(SessionData::parse(noise).len(), 0);
    assert_eq!(SessionData::parse(Vec::new()).report.records, 0);
    std::fs::write(dir.path().join("empty"), b"hello").expect("write");
    assert!(SessionData::open(&dir.path().join("empty")).is_err());
}

#[test]
fn csv_export_matches_the_log() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo(&path, 700);
    let s = SessionData::open(&path).expect("open");
    let mut out = Vec::new();
    let rows = export(&s, Table::Devices, &mut out, &mut |_| true).expect("export");
    assert_eq!(rows, 1400);
    let mut r = csv::Reader::from_reader(out.as_slice());
    let h: Vec<String> = r.headers().expect("h").iter().map(String::from).collect();
    assert_eq!(&h[..3], &["timestamp", "unix_ms", "device_index"]);
    assert!(h.contains(&"memory_used_mib".to_string()));
    let recs: Vec<csv::StringRecord> = r.records().map(|x| x.expect("row")).collect();
    assert_eq!(recs.len(), 1400);
    let sim = SimSource::demo(T0);
    for rec in recs.iter().step_by(97) {
        let t: i64 = rec[1].parse().expect("unix_ms");
        let dev: usize = rec[2].parse().expect("dev");
        let want = &sim.at(t).devices[dev];
        let used: f64 = rec[6].parse().expect("used");
        assert_eq!(
            (used * 1048576.0) as u64,
            want.memory_used_bytes.expect("used")
        );
        assert_eq!(rec[4].to_string(), want.name);
        assert!(chrono::DateTime::parse_from_rfc3339(&rec[0]).is_ok());
    }
    let mut out = Vec::new();
    let prow = export(&s, Table::Processes, &mut out, &mut |_| true).expect("export");
    let expect: usize = (0..700)
        .map(|i| sim.at(T0 + i * 1000).processes.len())
        .sum();
    assert_eq!(prow as usize, expect);
    let mut out = Vec::new();
    export(&s, Table::Events, &mut out, &mut |_| true).expect("events");
    let text = String::from_utf8(out).expect("utf8");
    assert!(text.starts_with(
        "timestamp,unix_ms,kind,pid,device_index,name,user,rate_mib_per_min,detail\n"
    ));
    assert!(text.contains(",process_exit,60100,1,python3,carol,"));
    // Cancel stops it.
    let mut sink = Vec::new();
    let big = SessionData::open(&path).expect("open");
    assert!(
        export(&big, Table::Processes, &mut sink, &mut |_| false).is_err()
            || sink.len() < (1 << 20) + 4096
    );
}

#[test]
fn cli_record_and_export_end_to_end() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("day.vwlog");
    let out = bin()
        .args([
            "--demo",
            "record",
            "--speed",
            "max",
            "--duration",
            "2h",
            "--out",
        ])
        .arg(&log)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("recorded 7200 samples"));
    let csv = dir.path().join("day.csv");
    let out = bin()
        .arg("export")
        .arg(&log)
        .arg("--csv")
        .arg(&csv)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let devices = std::fs::read_to_string(dir.path().join("day-devices.csv")).expect("devices csv");
    assert_eq!(devices.lines().count(), 1 + 7200 * 2);
    assert!(dir.path().join("day-processes.csv").exists());
    assert!(dir.path().join("day-events.csv").exists());
    let out = bin()
        .arg("export")
        .arg(&log)
        .args(["--table", "events", "--csv"])
        .arg(dir.path().join("ev.csv"))
        .output()
        .expect("run");
    assert!(out.status.success());
    let err = bin()
        .arg("export")
        .arg(dir.path().join("missing.vwlog"))
        .args(["--csv", "x.csv"])
        .output()
        .expect("run");
    assert_eq!(err.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&err.stderr).contains("missing.vwlog"));
    // The command-line review: a folder as --csv got OUT-devices.csv beside it, and a file
    // in a missing folder failed without naming it.
    let folder = dir.path().join("tables");
    std::fs::create_dir(&folder).expect("mkdir");
    let out = bin()
        .arg("export")
        .arg(&log)
        .arg("--csv")
        .arg(&folder)
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    for t in ["devices", "processes", "events"] {
        assert!(folder.join(format!("{t}.csv")).is_file(), "{t}.csv");
    }
    let nowhere = dir.path().join("nodir").join("x.csv");
    let err = bin()
        .arg("export")
        .arg(&log)
        .args(["--table", "events", "--csv"])
        .arg(&nowhere)
        .output()
        .expect("run");
    assert_eq!(err.status.code(), Some(1));
    let said = String::from_utf8_lossy(&err.stderr);
    assert!(said.contains(&nowhere.display().to_string()), "{said}");
}

/// Starts `record --demo` at 10 × real time into `log`, waits until it has written `bytes`,
/// then sends it `sig`.
fn record_then_signal(log: &std::path::Path, bytes: u64, sig: i32) -> std::process::Child {
    let child = bin()
        .args([
            "--demo",
            "--interval",
            "100ms",
            "record",
            "--speed",
            "10",
            "--out",
        ])
        .arg(log)
        .spawn()
        .expect("spawn");
    let t = Instant::now();
    while std::fs::metadata(log).map_or(0, |m| m.len()) < bytes {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the child wrote too little"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    child
}

#[test]
fn sigkill_mid_run_loses_nothing_before_the_last_whole_record() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("killed.vwlog");
    let mut child = record_then_signal(&log, 20_000, libc::SIGKILL);
    child.wait().expect("wait");
    let s = SessionData::open(&log).expect("reopen");
    let header = s.header.clone().expect("header survives");
    assert!(s.len() >= 20, "only {} samples", s.len());
    assert!(
        s.report.skipped_bytes < 2000,
        "at most the record being written is lost: {:?}",
        s.report
    );
    // Every sample is there, in order, one per 100 ms of simulated time, with the sim's values.
    let sim = SimSource::demo_day(header.started_ms);
    for (i, snap) in s.snapshots().enumerate() {
        assert_eq!(
            snap.taken_at_ms,
            header.started_ms + i as i64 * 100,
            "sample {i} present"
        );
        assert_eq!(snap.devices, sim.at(snap.taken_at_ms).devices);
    }
}

#[test]
fn sigterm_closes_the_log_cleanly() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("term.vwlog");
    let mut child = record_then_signal(&log, 5_000, libc::SIGTERM);
    let status = child.wait().expect("wait");
    assert!(status.success(), "record exits 0 on SIGTERM");
    let s = SessionData::open(&log).expect("reopen");
    assert!(s.report.is_clean(), "{:?}", s.report);
}

#[test]
fn unwritable_folder_is_reported() {
    let out = bin()
        .args([
            "--demo",
            "record",
            "--speed",
            "max",
            "--duration",
            "10s",
            "--out",
            "/proc/vramwarden-test/x.vwlog",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Recording failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn monitor_replay_of_a_session_has_the_processes() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo(&path, 200);
    let m = vramwarden::engine::replay::session(&SessionData::open(&path).expect("open"));
    let mut sim = SimSource::demo(T0);
    let mut live_state = vramwarden::engine::state::EngineState::default();
    let mut live = Monitor::new(1000, 200);
    for i in 0..200 {
        let t = T0 + i * 1000;
        live_state.apply(&mut live, sim.sample(t).expect("sim"), t);
    }
    let mut a: Vec<_> = m
        .rows()
        .map(|r| {
            (
                r.key,
                r.device_index,
                r.used_bytes,
                r.peak_bytes,
                r.info.name.clone(),
            )
        })
        .collect();
    let mut b: Vec<_> = live
        .rows()
        .map(|r| {
            (
                r.key,
                r.device_index,
                r.used_bytes,
                r.peak_bytes,
                r.info.name.clone(),
            )
        })
        .collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
}

/// The allocator figures that a log keeps (the memory fraction and the allocator configuration
/// are not recorded).
fn recorded_torch(t: vramwarden::model::TorchMem) -> vramwarden::model::TorchMem {
    vramwarden::model::TorchMem {
        memory_fraction: None,
        expandable_segments: None,
        ..t
    }
}

#[test]
fn pytorch_figures_round_trip_through_the_log_the_replay_and_the_csv() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo(&path, 120);
    let s = SessionData::open(&path).expect("open");
    assert!(s.report.is_clean(), "{:?}", s.report);
    assert_eq!(
        s.header.as_ref().expect("header").format_version,
        vramwarden::session::FORMAT_VERSION
    );
    let sim = SimSource::demo(T0);
    let mut with_torch = 0;
    for (i, snap) in s.snapshots().enumerate() {
        let want = sim.at(T0 + i as i64 * 1000);
        assert_eq!(snap.processes.len(), want.processes.len());
        for (got, want) in snap.processes.iter().zip(&want.processes) {
            assert_eq!(got.pid, want.pid);
            assert_eq!(got.torch, want.torch.map(recorded_torch), "sample {i}");
            with_torch += usize::from(got.torch.is_some());
        }
    }
    // The demo's trainer and notebook report figures: some samples carry them.
    assert!(with_torch >= 120, "{with_torch}");

    // The replay (session view) shows the last figures of the processes still running.
    let m = vramwarden::engine::replay::session(&s);
    let last = sim.at(T0 + 119_000);
    let latest = m.latest.as_ref().expect("latest");
    for want in last.processes.iter().filter(|p| p.torch.is_some()) {
        let got = latest
            .processes
            .iter()
            .find(|p| p.pid == want.pid && p.device_index == want.device_index)
            .expect("listed");
        assert_eq!(got.torch, want.torch.map(recorded_torch));
        let row = m
            .rows()
            .find(|r| r.key.pid == want.pid && r.device_index == want.device_index)
            .expect("a row");
        assert_eq!(row.torch, want.torch.map(recorded_torch));
        // The detail pane's allocated / reserved lines come back with the replay: every
        // sample's figures, to the MiB.
        use vramwarden::model::history::TorchFigure;
        let key = row.series_key();
        let h = &m.history;
        let (t0, t1) = (h.tick_at(T0), h.end_tick());
        for (figure, of) in [
            (
                TorchFigure::Allocated,
                (|t: vramwarden::model::TorchMem| t.allocated_bytes)
                    as fn(vramwarden::model::TorchMem) -> u64,
            ),
            (TorchFigure::Reserved, |t| t.reserved_bytes),
        ] {
            let got: Vec<u32> = h
                .torch(&key, figure)
                .expect("a torch series")
                .values(t0, t1)
                .into_iter()
                .map(|(_, v)| v)
                .filter(|v| *v != vramwarden::model::history::NONE)
                .collect();
            let want_series: Vec<u32> = (0..120)
                .filter_map(|i| {
                    sim.at(T0 + i * 1000)
                        .processes
                        .iter()
                        .find(|p| p.pid == want.pid && p.device_index == want.device_index)
                        .and_then(|p| p.torch)
                        .map(|t| (of(t) >> 20) as u32)
                })
                .collect();
            assert_eq!(got, want_series, "{figure:?} of {}", want.pid);
        }
    }

    // CSV: the three columns, filled where a companion answered and empty elsewhere.
    let mut out = Vec::new();
    export(&s, Table::Processes, &mut out, &mut |_| true).expect("export");
    let mut r = csv::Reader::from_reader(out.as_slice());
    let h: Vec<String> = r.headers().expect("h").iter().map(String::from).collect();
    let col = |name: &str| h.iter().position(|c| c == name).expect(name);
    let (ca, cr, ci) = (
        col("torch_allocated_mib"),
        col("torch_reserved_mib"),
        col("torch_inactive_split_mib"),
    );
    let (cpid, ct) = (col("pid"), col("unix_ms"));
    let (mut filled, mut empty) = (0, 0);
    for rec in r.records().map(|x| x.expect("row")) {
        let t: i64 = rec[ct].parse().expect("unix_ms");
        let pid: u32 = rec[cpid].parse().expect("pid");
        let want = sim
            .at(t)
            .processes
            .into_iter()
            .find(|p| p.pid == pid)
            .expect("in the sim");
        match want.torch {
            Some(w) => {
                filled += 1;
                let mib = |c: usize| rec[c].parse::<f64>().expect("MiB");
                // Three decimals of MiB: within 1/1000 MiB.
                assert!((mib(ca) - w.allocated_bytes as f64 / 1048576.0).abs() < 0.001);
                assert!((mib(cr) - w.reserved_bytes as f64 / 1048576.0).abs() < 0.001);
                assert!((mib(ci) - w.inactive_split_bytes as f64 / 1048576.0).abs() < 0.001);
            }
            None => {
                empty += 1;
                assert!(rec[ca].is_empty() && rec[cr].is_empty() && rec[ci].is_empty());
            }
        }
    }
    assert!(filled > 0 && empty > 0, "{filled} {empty}");
}

#[test]
fn a_version_1_log_still_reads_and_has_no_pytorch_figures() {
    use vramwarden::session::format::{encode_sample, frame, KIND_HEADER, KIND_SAMPLE};
    use vramwarden::session::Header;
    // A log as a version 1 build wrote it: a version 1 header and a version 1 sample.
    let h = Header {
        format_version: 1,
        app_version: "0.0.1".into(),
        host: "old".into(),
        source: "NVML".into(),
        driver_version: None,
        nvml_version: None,
        started_ms: T0,
        interval_ms: 1000,
        devices: Vec::new(),
    };
    let mut bytes = frame(KIND_HEADER, &serde_json::to_vec(&h).expect("json"));
    let mut payload = Vec::new();
    encode_sample(&mut payload, T0, &[], &[(0, Some(512 << 20))]);
    bytes.extend(frame(KIND_SAMPLE, &payload));
    let s = SessionData::parse(bytes);
    assert!(s.report.is_clean(), "{:?}", s.report);
    assert_eq!(s.len(), 1);
    let snap = s.snapshot(0).expect("sample");
    assert_eq!(snap.processes[0].used_bytes, Some(512 << 20));
    assert_eq!(snap.processes[0].torch, None);
    let mut out = Vec::new();
    export(&s, Table::Processes, &mut out, &mut |_| true).expect("export");
    let text = String::from_utf8(out).expect("utf8");
    assert!(
        text.lines()
            .nth(1)
            .expect("a row")
            .ends_with(",512,,,,,,,running,"),
        "{text}"
    );
}

/// Records `seconds` of the demo through the engine into `path` and returns what that engine
/// showed live (its whole history kept).
fn record_demo_live(path: &std::path::Path, seconds: i64) -> Monitor {
    use vramwarden::engine::{Engine, RecordTo};
    let sim = SimSource::demo(T0);
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, seconds as usize));
    let mut e = Engine::new(shared.clone(), RecordTo::File(path.to_path_buf()), 1000);
    e.set_source(sim.info());
    for i in 0..seconds {
        let t = T0 + i * 1000;
        e.tick(sim.at(t), t);
    }
    e.finish().expect("close");
    let m = shared.read().expect("monitor").clone();
    m
}

#[test]
fn a_replayed_session_shows_what_the_engine_that_recorded_it_showed() {
    use vramwarden::model::history::Metric;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    let live = record_demo_live(&path, 900);
    let replay = vramwarden::engine::replay::session(&SessionData::open(&path).expect("open"));
    let (lh, rh) = (&live.history, &replay.history);
    assert_eq!(lh.len(), 900);
    assert_eq!(rh.len(), lh.len());
    assert_eq!(rh.span(), lh.span());
    let all = |s: Option<&vramwarden::model::history::Series>,
               h: &vramwarden::model::history::History| {
        s.map(|s| s.values(h.end_tick() - h.len() as u64, h.end_tick()))
    };
    let devices = live.latest.as_ref().expect("latest").devices.len() as u32;
    assert!(devices >= 2, "the demo has several GPUs");
    for d in 0..devices {
        assert_eq!(all(rh.device(d), rh), all(lh.device(d), lh), "GPU {d}");
        assert_eq!(all(rh.ghost(d), rh), all(lh.ghost(d), lh), "GPU {d} ghost");
        for m in Metric::ALL {
            assert_eq!(
                all(rh.metric(d, m), rh),
                all(lh.metric(d, m), lh),
                "GPU {d} {m:?}"
            );
        }
    }
    // Every process: its series, and its row as the table shows it (exited ones included).
    let row = |r: &vramwarden::engine::view::ProcessRow| {
        (
            r.series_key(),
            r.info.name.clone(),
            r.info.user.clone(),
            r.used_bytes,
            r.peak_bytes,
            r.delta_1m_bytes,
            r.first_seen_ms,
            r.last_seen_ms,
            r.exited_at_ms,
            r.color_slot,
        )
    };
    let mut a: Vec<_> = replay.rows().map(row).collect();
    let mut b: Vec<_> = live.rows().map(row).collect();
    a.sort_by_key(|r| r.0);
    b.sort_by_key(|r| r.0);
    assert!(b.iter().any(|r| r.8.is_some()), "some demo process exited");
    assert!(b.iter().any(|r| r.5.is_some()), "one-minute changes exist");
    assert_eq!(a, b);
    for r in live.rows() {
        let k = r.series_key();
        assert_eq!(all(rh.process(&k), rh), all(lh.process(&k), lh), "{k:?}");
    }
    // The leaks the live engine found are the replay's, from the log's events.
    let leak = |l: &vramwarden::engine::view::LeakRecord| (l.key, l.flagged_ms, l.ended_ms);
    let flagged: Vec<_> = live.leaks.iter().map(leak).collect();
    assert!(
        !flagged.is_empty(),
        "the demo's leak was flagged in 15 minutes"
    );
    let replayed: Vec<_> = replay
        .leaks
        .iter()
        .map(|l| (l.key, l.flagged_ms, l.ended_ms.filter(|_| !l.open_at_end)))
        .collect();
    assert_eq!(replayed, flagged);
    assert!(replay
        .leaks
        .iter()
        .all(|l| l.session.as_deref() == Some(path.as_path())));
    // A leak still growing when the recording stopped has the peak the live engine showed:
    // judged, as live, on PyTorch's allocated memory where its companion answered (the
    // demo's leaking job is a PyTorch one), to the MiB the history keeps.
    let peak = |m: &Monitor| {
        m.leaks
            .iter()
            .filter(|l| l.ended_ms.is_none() || l.open_at_end)
            .map(|l| (l.key, l.peak_mib.floor()))
            .collect::<Vec<_>>()
    };
    assert!(!peak(&live).is_empty(), "a leak is open at the end");
    assert_eq!(peak(&replay), peak(&live));
    // Nothing acts from a replay: a manual action on a replayed process is refused.
    assert!(replay.activity.is_empty());
}

/// A sample is final before it is logged: each GPU's forecast (likely and earliest time to
/// full) as the View showed it at every tick is in the log with its sample, and a replay of
/// the session shows it.
#[test]
fn the_forecast_is_logged_with_its_sample_and_replayed() {
    use vramwarden::engine::{Engine, RecordTo};
    use vramwarden::model::DeviceSample;
    type Forecast = Vec<(u32, Option<f64>, Option<f64>)>;
    let forecast = |devices: &[DeviceSample]| -> Forecast {
        devices
            .iter()
            .map(|d| (d.index, d.time_to_full_s, d.time_to_full_earliest_s))
            .collect()
    };
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    let sim = SimSource::demo(T0);
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared.clone(), RecordTo::File(path.clone()), 1000);
    e.set_source(sim.info());
    let mut shown: Vec<(UnixMs, Forecast)> = Vec::new();
    for i in 0..900 {
        let t = T0 + i * 1000;
        e.tick(sim.at(t), t);
        let m = shared.read().expect("monitor");
        let latest = m.latest.as_ref().expect("latest");
        shown.push((t, forecast(&latest.devices)));
    }
    e.finish().expect("close");
    let forecasts = shown
        .iter()
        .filter(|(_, f)| f.iter().any(|d| d.1.is_some()))
        .count();
    assert!(
        forecasts > 0,
        "the demo's leak gives a forecast in 15 minutes"
    );
    let s = SessionData::open(&path).expect("open");
    assert!(s.report.is_clean(), "{:?}", s.report);
    assert_eq!(s.len(), shown.len());
    for (t, f) in &shown {
        let snap = s.snapshot(s.index_at(*t)).expect("sample");
        assert_eq!(snap.taken_at_ms, *t);
        assert_eq!(&forecast(&snap.devices), f, "the log's sample at {t}");
    }
    let replay = vramwarden::engine::replay::session(&s);
    let last = replay.latest.as_ref().expect("the replay's latest sample");
    assert_eq!(Some(&forecast(&last.devices)), shown.last().map(|(_, f)| f));
}

/// The CSV tables, byte for byte, of a log whose texts need quoting: a comma, a double quote
/// and a line break are quoted as RFC 4180 says (the quote doubled); plain text, numbers,
/// empty readings and MiB fractions are written as they are, and so is a text that begins or
/// ends with a space (see docs/session-format.md).
#[test]
fn csv_fields_are_quoted_as_rfc_4180_says() {
    use vramwarden::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, MIB};
    use vramwarden::session::writer::SessionWriter;
    use vramwarden::session::{Event, LeakInfo};
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("odd.vwlog");
    let header = one_gpu_header("Big, \"fast\" GPU");
    let info = ProcInfo {
        name: "train,v2".into(),
        user: "bob".into(),
        cmdline: "python -c \"print(1)\"\nsecond line".into(),
        start_time_ms: T0 - 5000,
        container_id: Some("0123456789abcdef0123".into()),
        pod: Some("ml/job-0".into()),
        ..ProcInfo::default()
    };
    let snap = Snapshot {
        taken_at_ms: T0,
        devices: vec![DeviceSample {
            index: 0,
            memory_total_bytes: Some(80 << 30),
            memory_used_bytes: Some(10 * MIB + MIB / 2),
            memory_free_bytes: None,
            utilization_gpu_pct: Some(7),
            power_w: Some(71.25),
            ..DeviceSample::default()
        }],
        processes: vec![ProcessSample {
            pid: 42,
            device_index: 0,
            used_bytes: Some(3 * MIB),
            info: Some(std::sync::Arc::new(info)),
            ..ProcessSample::default()
        }],
    };
    let mut w = SessionWriter::create(&path, &header).expect("create");
    w.write_snapshot(&snap).expect("sample");
    w.write_event(&Event::LeakStarted {
        unix_ms: T0,
        leak: LeakInfo {
            pid: 42,
            start_time_ms: T0 - 5000,
            device_index: 0,
            name: "say \"hi\"".into(),
            user: " padded ".into(),
            ghost: false,
            since_ms: T0 - 1000,
            rate_mib_per_min: 12.345,
            why: String::new(),
        },
    })
    .expect("event");
    w.close().expect("close");
    let s = SessionData::open(&path).expect("open");
    let table = |t: Table| {
        let mut out = Vec::new();
        export(&s, t, &mut out, &mut |_| true).expect("export");
        String::from_utf8(out).expect("utf8")
    };
    let ts = "2026-11-30T00:53:20.000Z";
    assert_eq!(
        table(Table::Devices),
        format!(
            "{}\n{ts},{T0},0,GPU-0,\"Big, \"\"fast\"\" GPU\",81920,10.5,,,7,,71.25\n",
            Table::Devices.header()
        )
    );
    assert_eq!(
        table(Table::Processes),
        format!(
            "{}\n{ts},{T0},0,42,2026-11-30T00:53:15.000Z,\"train,v2\",bob,3,\"python -c \"\"print(1)\"\"\nsecond line\",0123456789ab,ml/job-0,,,,running,\n",
            Table::Processes.header()
        )
    );
    assert_eq!(
        table(Table::Events),
        format!(
            "{}\n{ts},{T0},process_start,42,0,\"train,v2\",bob,,\"python -c \"\"print(1)\"\"\nsecond line\"\n\
             {ts},{T0},leak_started,42,0,\"say \"\"hi\"\"\", padded ,12.35,since 2026-11-30T00:53:19.000Z\n",
            Table::Events.header()
        )
    );
}

/// A replay decodes each sample into one the engine gave back: whatever that one held (more
/// devices or processes, PyTorch figures, another segment's names), the result is the sample
/// as a fresh decode reads it, across the boundary of two appended segments.
/// A log of two recordings joined end to end in `dir`: a minute of the demo (with PyTorch
/// figures), then 40 s of a three-GPU fleet an hour later.
fn two_segment_session(dir: &std::path::Path) -> std::path::PathBuf {
    let (a, b, both) = (
        dir.join("a.vwlog"),
        dir.join("b.vwlog"),
        dir.join("both.vwlog"),
    );
    record_demo(&a, 60);
    {
        use vramwarden::engine::{Engine, RecordTo};
        let t1 = T0 + 3_600_000;
        let sim = SimSource::fleet(t1, 3, 40);
        let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
        let mut e = Engine::new(shared, RecordTo::File(b.clone()), 1000);
        e.set_source(sim.info());
        for i in 0..40 {
            let t = t1 + i * 1000;
            e.tick(sim.at(t), t);
        }
        e.finish().expect("close");
    }
    let mut bytes = std::fs::read(&a).expect("a");
    bytes.extend(std::fs::read(&b).expect("b"));
    std::fs::write(&both, bytes).expect("write");
    both
}

#[test]
fn a_sample_decoded_into_a_used_one_equals_a_fresh_decode() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = SessionData::open(&two_segment_session(dir.path())).expect("open");
    assert_eq!((s.segment_count(), s.len()), (2, 100));
    let fresh: Vec<_> = (0..s.len())
        .map(|i| s.snapshot(i).expect("decodes"))
        .collect();
    assert_ne!(fresh[0].processes.len(), fresh[99].processes.len());
    assert!(fresh[..60]
        .iter()
        .any(|f| f.processes.iter().any(|p| p.torch.is_some())));
    // Used samples from everywhere in the file, handed round as the replay hands them.
    let mut used: Vec<_> = [99, 0, 59, 60, 30]
        .iter()
        .map(|i| fresh[*i].clone())
        .collect();
    for (i, want) in fresh.iter().enumerate() {
        let slot = &mut used[(i * 7) % 5];
        assert!(s.snapshot_into(i, slot), "sample {i}");
        assert_eq!(slot, want, "sample {i}");
    }
    // The second segment's processes keep their own facts and the GPUs their own names.
    let last = &fresh[99];
    assert_eq!(last.devices.len(), 3);
    assert!(last.processes.iter().all(|p| p.info.is_some()));
}

/// Every series of `h` (GPUs, unattributed memory, metrics, processes, PyTorch figures),
/// named, with its values.
fn all_series(h: &vramwarden::model::history::History) -> Vec<(String, Vec<(u64, u32)>)> {
    use vramwarden::model::history::{Metric, TorchFigure};
    let (t0, t1) = (h.end_tick() - h.len() as u64, h.end_tick());
    let mut out = Vec::new();
    let mut add = |name: String, s: Option<&vramwarden::model::history::Series>| {
        if let Some(s) = s {
            out.push((name, s.values(t0, t1)));
        }
    };
    for d in 0..8 {
        add(format!("GPU {d}"), h.device(d));
        add(format!("GPU {d} unattributed"), h.ghost(d));
        for m in Metric::ALL {
            add(format!("GPU {d} {m:?}"), h.metric(d, m));
        }
    }
    let mut keys: Vec<_> = h.process_keys().copied().collect();
    keys.sort();
    for k in keys {
        add(format!("{k:?}"), h.process(&k));
        add(
            format!("{k:?} allocated"),
            h.torch(&k, TorchFigure::Allocated),
        );
        add(
            format!("{k:?} reserved"),
            h.torch(&k, TorchFigure::Reserved),
        );
    }
    out
}

#[test]
fn the_history_a_replay_builds_beside_its_engine_is_the_one_apply_builds() {
    use std::sync::atomic::AtomicBool;
    use vramwarden::source::replay::{build_history, ReplaySource};
    let dir = tempfile::tempdir().expect("tmp");
    let s = SessionData::open(&two_segment_session(dir.path())).expect("open");
    // In step, as a live engine builds it: each sample sanitized, then applied.
    let m = applied_in_step(&s);
    let want = all_series(&m.history);
    assert!(want.len() > 40 + 3 * 9, "{} series", want.len());
    assert!(want.iter().any(|(n, _)| n.ends_with("reserved")));
    // The replay (its history built on a thread of its own)…
    let replay = vramwarden::engine::replay::session(&s);
    assert_eq!(replay.history.span(), m.history.span());
    assert_eq!(all_series(&replay.history), want);
    // …whose engine took in every sample as applied in step: the same rows (exited ones,
    // peaks, one-minute changes, colours) and the same latest sample.
    let rows = |m: &Monitor| m.rows().cloned().collect::<Vec<_>>();
    assert!(rows(&m).len() > 3, "{} rows", rows(&m).len());
    assert_eq!(rows(&replay), rows(&m));
    assert_eq!(replay.latest, m.latest);
    assert_eq!(replay.ticks, m.ticks);
    // …that thread's work, and the source's own where no thread can be started.
    assert_eq!(
        all_series(&build_history(&s, &AtomicBool::new(false))),
        want
    );
    let mut here = ReplaySource::new(&s);
    while let Ok(x) = here.sample(0) {
        here.give_back(x);
    }
    assert_eq!(all_series(&here.take_history().expect("history")), want);
    assert!(here.take_history().is_err(), "taken once");
    // Told to stop, the thread stops.
    assert!(build_history(&s, &AtomicBool::new(true)).is_empty());
}

#[test]
fn a_cancelled_replay_gives_nothing_and_asks_no_more() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo(
        &path,
        2 * vramwarden::engine::replay::PROGRESS_EVERY as i64 + 10,
    );
    let s = SessionData::open(&path).expect("open");
    let mut asked = 0;
    let m = vramwarden::engine::replay::session_with_progress(&s, &mut |_| {
        asked += 1;
        false
    });
    assert!(m.is_none());
    assert_eq!(asked, 1);
}

/// Records `seconds` of the demo the window runs (`--demo`: its notebook, PID 66020, parked
/// from 200 s to 600 s holding 24 GiB) through the engine into `path`.
fn record_demo_day(path: &std::path::Path, seconds: i64) {
    use vramwarden::engine::{Engine, RecordTo};
    let sim = SimSource::demo_day(T0);
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared, RecordTo::File(path.to_path_buf()), 1000);
    e.set_source(sim.info());
    for i in 0..seconds {
        let t = T0 + i * 1000;
        e.tick(sim.at(t), t);
    }
    e.finish().expect("close");
}

/// Issue 40: a park is in the log (format 3), the replay's samples carry it as the live ones
/// did (state, bytes in host memory, since when), and the events CSV has its rows.
#[test]
fn a_park_is_recorded_replayed_and_exported() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("s.vwlog");
    record_demo_day(&path, 700);
    let s = SessionData::open(&path).expect("open");
    assert!(s.report.is_clean(), "{:?}", s.report);
    assert_eq!(
        s.header.as_ref().expect("header").format_version,
        vramwarden::session::FORMAT_VERSION
    );
    let sim = SimSource::demo_day(T0);
    let parked_at = |i: i64| {
        let snap = s.snapshot(s.index_at(T0 + i * 1000)).expect("sample");
        snap.processes
            .iter()
            .find(|p| p.pid == 66020)
            .expect("the notebook")
            .parked
    };
    let mut seen = 0;
    for i in (0..700).step_by(7) {
        let want = sim.at(T0 + i * 1000);
        let want = want.processes.iter().find(|p| p.pid == 66020).expect("sim");
        assert_eq!(parked_at(i), want.parked, "at {i} s");
        seen += usize::from(want.parked.is_some());
    }
    assert!(seen > 40, "{seen}");
    let p = parked_at(300).expect("parked at 300 s");
    assert_eq!(p.state, vramwarden::model::ParkState::Parked);
    assert_eq!(p.bytes, Some(24 << 30));
    assert_eq!(p.since_ms, T0 + 200_000);
    assert_eq!(parked_at(650), None);

    let mut out = Vec::new();
    export(&s, Table::Events, &mut out, &mut |_| true).expect("events");
    let text = String::from_utf8(out).expect("utf8");
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(",66020,")).collect();
    let kinds: Vec<&str> = rows
        .iter()
        .filter_map(|l| l.split(',').nth(2))
        .filter(|k| k.contains("park") || k.contains("resume"))
        .collect();
    assert_eq!(kinds, ["parked", "resumed"], "{rows:?}");
    let parked = rows.iter().find(|l| l.contains(",parked,")).expect("row");
    assert!(parked.contains(",python3,dave,"), "{parked}");
    assert!(
        parked.contains("24576 MiB in host memory since"),
        "{parked}"
    );

    // The processes table says the park on each of the notebook's rows: parked, with the
    // 24 GiB in host memory, while the driver lists it at 0 MiB; running before and after.
    let mut out = Vec::new();
    export(&s, Table::Processes, &mut out, &mut |_| true).expect("processes");
    let mut r = csv::Reader::from_reader(out.as_slice());
    let h: Vec<String> = r.headers().expect("h").iter().map(String::from).collect();
    let col = |name: &str| h.iter().position(|c| c == name).expect(name);
    let (ct, cpid, cused) = (col("unix_ms"), col("pid"), col("used_mib"));
    let (cstate, cparked) = (col("state"), col("parked_mib"));
    let mut parked_rows = 0;
    for rec in r.records().map(|x| x.expect("row")) {
        if &rec[cpid] != "66020" {
            assert_eq!((&rec[cstate], &rec[cparked]), ("running", ""), "{rec:?}");
            continue;
        }
        let t: i64 = rec[ct].parse().expect("unix_ms");
        let want = sim.at(t);
        let want = want.processes.iter().find(|p| p.pid == 66020).expect("sim");
        match want.parked {
            Some(p) => {
                parked_rows += 1;
                assert_eq!(&rec[cstate], p.state.label(), "{rec:?}");
                let mib = p.bytes.map_or(String::new(), |b| format!("{}", b >> 20));
                assert_eq!(
                    rec[cparked].split('.').next(),
                    Some(mib.as_str()),
                    "{rec:?}"
                );
            }
            None => assert_eq!((&rec[cstate], &rec[cparked]), ("running", ""), "{rec:?}"),
        }
        if want
            .parked
            .is_some_and(|p| p.state == vramwarden::model::ParkState::Parked)
        {
            assert_eq!(rec[cused].parse::<f64>().ok(), Some(0.0), "{rec:?}");
        }
    }
    assert!(parked_rows > 300, "{parked_rows}");
}

/// A log written before `park_state` events (format 2) still opens, and the parks its
/// `park` events tell (vramwarden's own, each written at its end) are shown in its samples.
#[test]
fn a_format_2_log_s_park_events_give_its_parks() {
    use vramwarden::session::format::{encode_sample, frame, KIND_EVENT, KIND_HEADER, KIND_SAMPLE};
    use vramwarden::session::{Event, Header, ProcDef};
    let h = Header {
        format_version: 2,
        app_version: "0.0.2".into(),
        host: "old".into(),
        source: "NVML".into(),
        driver_version: None,
        nvml_version: None,
        started_ms: T0,
        interval_ms: 1000,
        devices: Vec::new(),
    };
    let event = |e: &Event| frame(KIND_EVENT, &serde_json::to_vec(e).expect("json"));
    let mut bytes = frame(KIND_HEADER, &serde_json::to_vec(&h).expect("json"));
    bytes.extend(event(&Event::ProcessStart {
        unix_ms: T0,
        def: ProcDef {
            id: 0,
            pid: 4242,
            device_index: 0,
            info: vramwarden::model::ProcInfo {
                name: "train".into(),
                start_time_ms: T0 - 5_000,
                ..Default::default()
            },
        },
    }));
    let park = |unix_ms, action: &str| Event::Park {
        unix_ms,
        pid: 4242,
        start_time_ms: T0 - 5_000,
        device_index: 0,
        name: "train".into(),
        action: action.into(),
        bytes: Some(6 << 30),
        seconds: 3.0,
        ok: true,
        detail: String::new(),
    };
    for i in 0..10 {
        let t = T0 + i * 1000;
        match i {
            4 => bytes.extend(event(&park(t, "park"))),
            8 => bytes.extend(event(&park(t, "resume"))),
            _ => {}
        }
        let mut payload = Vec::new();
        let used = if (4..8).contains(&i) { 0 } else { 6 << 30 };
        encode_sample(&mut payload, t, &[], &[(0, Some(used))]);
        bytes.extend(frame(KIND_SAMPLE, &payload));
    }
    let s = SessionData::parse(bytes);
    assert!(s.report.is_clean(), "{:?}", s.report);
    let parked = |i: usize| s.snapshot(i).expect("sample").processes[0].parked;
    assert_eq!(parked(3), None);
    let p = parked(5).expect("parked");
    assert_eq!(p.bytes, Some(6 << 30));
    assert_eq!(p.since_ms, T0 + 1_000);
    assert_eq!(parked(8), None);
}

/// The View a live engine derives from `s`'s samples, one after another (each sanitized, then
/// applied).
fn applied_in_step(s: &SessionData) -> Monitor {
    let mut state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, s.len());
    for i in 0..s.len() {
        let mut x = s.snapshot(i).expect("decodes");
        x.sanitize();
        state.apply(&mut m, x, 0);
    }
    m
}

/// A session of more than 256 samples is replayed in two halves at once (one per core): the
/// rows (in order, every field), the history, the latest sample and the count equal those the
/// engine derives sample by sample — on the H200 logs kept with the tests and on the demo's
/// day with its park.
#[test]
fn a_replay_in_halves_equals_one_sample_by_sample_on_real_logs() {
    let dir = tempfile::tempdir().expect("tmp");
    let day = dir.path().join("day.vwlog");
    record_demo_day(&day, 1300);
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let logs = [
        data.join("v4/v4.vwlog"),
        data.join("traces/v3-tuning.vwlog"),
        data.join("h200-heldout/heldout.vwlog"),
        day,
    ];
    let mut long = 0;
    for path in logs {
        let s = SessionData::open(&path).expect("open");
        long += usize::from(s.len() > 256);
        let want = applied_in_step(&s);
        let got = vramwarden::engine::replay::session(&s);
        let rows = |m: &Monitor| m.rows().cloned().collect::<Vec<_>>();
        assert!(!rows(&want).is_empty(), "{path:?}");
        assert_eq!(rows(&got), rows(&want), "{path:?}");
        assert_eq!(got.latest, want.latest, "{path:?}");
        assert_eq!(got.ticks, want.ticks, "{path:?}");
        assert_eq!(got.history.span(), want.history.span(), "{path:?}");
        assert_eq!(
            all_series(&got.history),
            all_series(&want.history),
            "{path:?}"
        );
    }
    assert!(long >= 2, "{long} logs long enough for two halves");
}

/// The window's review: the Leaks tab called a leak in a log another window was still
/// recording "recording ended", and the Sessions window marked only its own log as recording.
/// A log whose writer holds its lock is listed as recording, and a leak still growing at its
/// end is ongoing; once the writer has closed it, the same leak ended with the recording.
#[test]
fn a_log_being_recorded_is_listed_so_and_its_open_leak_is_ongoing() {
    use vramwarden::model::{DeviceSample, ProcessSample, Snapshot, MIB};
    use vramwarden::session::writer::SessionWriter;
    use vramwarden::session::{Event, LeakInfo};
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("live.vwlog");
    let header = one_gpu_header("GPU");
    let snap = |k: i64| Snapshot {
        taken_at_ms: T0 + k * 1000,
        devices: vec![DeviceSample {
            index: 0,
            memory_total_bytes: Some(80 << 30),
            memory_used_bytes: Some((10 + k as u64) * 100 * MIB),
            ..DeviceSample::default()
        }],
        processes: vec![ProcessSample {
            pid: 42,
            device_index: 0,
            used_bytes: Some((1 + k as u64) * 100 * MIB),
            ..ProcessSample::default()
        }],
    };
    let mut w = SessionWriter::create(&path, &header).expect("create");
    for k in 0..5 {
        w.write_snapshot(&snap(k)).expect("sample");
    }
    w.write_event(&Event::LeakStarted {
        unix_ms: T0 + 4000,
        leak: LeakInfo {
            pid: 42,
            start_time_ms: 0,
            device_index: 0,
            name: "python3".into(),
            user: "bob".into(),
            ghost: false,
            since_ms: T0,
            rate_mib_per_min: 6000.0,
            why: String::new(),
        },
    })
    .expect("event");
    w.sync().expect("sync");
    // Whether the folder lists it as recording, and each past leak's (end, open at end).
    let seen = || {
        let listed = vramwarden::session::catalog::list(dir.path());
        let recording: Vec<bool> = listed.iter().map(|s| s.recording).collect();
        let past = vramwarden::engine::replay::past_episodes(dir.path(), None);
        let ends: Vec<_> = past
            .leaks
            .iter()
            .map(|l| (l.ended_ms, l.open_at_end))
            .collect();
        (recording, ends)
    };
    assert_eq!(
        seen(),
        (vec![true], vec![(None, false)]),
        "ongoing while recorded"
    );
    w.close().expect("close");
    assert_eq!(
        seen(),
        (vec![false], vec![(Some(T0 + 4000), true)]),
        "ended with the recording"
    );
}

/// The command-line review: an empty file and one of garbage named `*.vwlog` were listed as
/// sessions (started at their file time, 0 s long). A file with neither a header nor a sample
/// is no session; a log whose header was damaged but whose samples survive still is.
#[test]
fn files_with_nothing_of_a_session_are_not_listed() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(dir.path().join("empty.vwlog"), b"").expect("write");
    std::fs::write(dir.path().join("garbage.vwlog"), [0x5au8; 4096]).expect("write");
    let path = dir.path().join("real.vwlog");
    record_demo(&path, 5);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[8] ^= 0xff; // inside the header record: its checksum fails
    std::fs::write(dir.path().join("damaged.vwlog"), &bytes).expect("write");
    let mut names: Vec<String> = vramwarden::session::catalog::list(dir.path())
        .iter()
        .filter_map(|s| s.path.file_name().map(|n| n.to_string_lossy().to_string()))
        .collect();
    names.sort();
    assert_eq!(names, ["damaged.vwlog", "real.vwlog"]);
    // Its export says what the lost header takes with it (the rows' GPU names are empty).
    let out = bin()
        .arg("export")
        .arg(dir.path().join("damaged.vwlog"))
        .args(["--csv", "-", "--table", "devices"])
        .output()
        .expect("run");
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("no header survived: the GPUs' names and ids are unknown"),
        "{said}"
    );
}

/// The header of a log of one 80 GiB GPU named `name`, started at `T0`.
fn one_gpu_header(name: &str) -> vramwarden::session::Header {
    vramwarden::session::Header {
        format_version: 1,
        app_version: "test".into(),
        host: "h".into(),
        source: "Simulated".into(),
        driver_version: None,
        nvml_version: None,
        started_ms: T0,
        interval_ms: 1000,
        devices: vec![vramwarden::session::HeaderDevice {
            index: 0,
            uuid: "GPU-0".into(),
            name: name.into(),
            memory_total_bytes: Some(80 << 30),
            pci_bus_id: None,
        }],
    }
}

/// The GUI review: an opened session's Activity tab said "Nothing yet" over a log holding
/// its rules' and guard's entries. Each recorded entry is listed, read back as a recorded
/// target (never acted on), with its rule, outcome and words.
#[test]
fn an_opened_session_lists_the_activity_it_recorded() {
    use vramwarden::act::rules::{Action, Conditions, Rule};
    use vramwarden::engine::{EngineBuilder, RecordTo};
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("acts.vwlog");
    let mut s = vramwarden::engine::settings::Settings::default();
    s.cleanup.rules = vec![Rule {
        name: "big".into(),
        dry_run: false,
        conditions: Conditions {
            process_memory_min_mib: Some(20_000.0),
            ..Conditions::default()
        },
        action: Action::Terminate { grace_seconds: 5.0 },
        ..Rule::default()
    }];
    s.cleanup.dry_run = false;
    let sim = SimSource::demo(T0);
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = EngineBuilder::new(shared.clone(), 1000)
        .record(RecordTo::File(path.clone()))
        .settings(&s)
        .source(sim.info())
        .build();
    for i in 0..30 {
        let t = T0 + i * 1000;
        e.tick(sim.at(t), t);
    }
    e.finish().expect("close");
    let live = shared.read().expect("view").activity.len();
    assert!(live > 0, "the rule never fired");
    let data = SessionData::open(&path).expect("open");
    let recorded = data
        .events
        .iter()
        .filter(|e| matches!(e, vramwarden::session::Event::Activity { .. }))
        .count();
    let m = vramwarden::engine::replay::session(&data);
    assert_eq!(m.activity.len(), recorded);
    assert_eq!(recorded, live);
    let a = m.activity.front().expect("listed");
    assert_eq!(a.rule, "big");
    assert_eq!(a.outcome, vramwarden::model::outcome::Outcome::Skipped);
    assert!(a.detail.starts_with("simulated process"), "{}", a.detail);
    match &a.target {
        vramwarden::act::rules::eval::Target::Process { origin, .. } => {
            assert_eq!(*origin, vramwarden::model::Origin::Recorded);
        }
        t => panic!("{t:?}"),
    }
    assert!(
        a.target.describe().contains("python3"),
        "{}",
        a.target.describe()
    );
}

/// A record larger than the reader accepts (16 MiB) is refused by the writer with an error,
/// not written: an import of a 200 MiB process name wrote a 419 MB log whose every byte its
/// own reader then skipped as damaged. The log stays whole and clean.
#[test]
fn the_writer_refuses_a_record_its_reader_would_reject() {
    use vramwarden::model::ProcInfo;
    use vramwarden::session::writer::{SessionWriter, WriteError};
    use vramwarden::session::{Event, ProcDef};
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("big.vwlog");
    let mut w = SessionWriter::create(&path, &one_gpu_header("GPU")).expect("create");
    let def = |cmdline: String| ProcDef {
        id: 1,
        pid: 42,
        device_index: 0,
        info: ProcInfo {
            name: "job".into(),
            cmdline,
            ..ProcInfo::default()
        },
    };
    let huge = Event::ProcessStart {
        unix_ms: T0,
        def: def("A".repeat(17 << 20)),
    };
    let err = w
        .write_event(&huge)
        .expect_err("a 17 MiB record was written");
    assert!(matches!(err, WriteError::RecordTooLarge { .. }), "{err}");
    assert!(err.to_string().contains("limit"), "{err}");
    w.write_event(&Event::ProcessStart {
        unix_ms: T0,
        def: def("job --small".into()),
    })
    .expect("a small record after it");
    w.close().expect("close");
    assert!(std::fs::metadata(&path).expect("size").len() < 1 << 20);
    let s = SessionData::open(&path).expect("open");
    assert!(s.report.is_clean(), "{}", s.report.summary());
}

/// A process whose command line is longer than a record may hold (a user can raise their
/// stack limit for a 17 MiB argv) is still recorded: its definition's texts are cut to the
/// limits an agent's answer keeps, not refused (which would lose every sample while it ran).
#[test]
fn a_process_with_a_huge_command_line_is_recorded_with_it_cut() {
    use vramwarden::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, MIB};
    use vramwarden::session::writer::SessionWriter;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("long.vwlog");
    let mut w = SessionWriter::create(&path, &one_gpu_header("GPU")).expect("create");
    let snap = Snapshot {
        taken_at_ms: T0,
        devices: vec![DeviceSample {
            index: 0,
            memory_total_bytes: Some(80 << 30),
            memory_used_bytes: Some(10 * MIB),
            ..DeviceSample::default()
        }],
        processes: vec![ProcessSample {
            pid: 42,
            device_index: 0,
            used_bytes: Some(3 * MIB),
            info: Some(std::sync::Arc::new(ProcInfo {
                name: "job".into(),
                cmdline: "x".repeat(17 << 20),
                ..ProcInfo::default()
            })),
            ..ProcessSample::default()
        }],
    };
    w.write_snapshot(&snap)
        .expect("a sample with a huge command line");
    w.close().expect("close");
    let s = SessionData::open(&path).expect("open");
    assert!(s.report.is_clean(), "{}", s.report.summary());
    assert_eq!(s.len(), 1);
    let p = s
        .snapshots()
        .flat_map(|sn| sn.processes)
        .next()
        .expect("the process");
    let cmd = p.info.expect("its facts").cmdline.len();
    assert!((1000..=64 * 1024).contains(&cmd), "{cmd}");
}
