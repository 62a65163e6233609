//! Hostile session logs (issue 8, items 11 and 13).
//!
//! - A flood of record markers that each claim a long length costs checksum work linear in the
//!   file size (measured by the reader's own count of bytes fed to the checksum, not by time).
//! - FIFOs, devices, folders and oversized files are refused with a clear error, without
//!   blocking and without reading them.
//! - Logs joined end to end keep their own processes; duplicate sample times and unknown
//!   format versions are reported.

use std::path::Path;
use std::sync::Arc;

use vramwarden::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, UnixMs, MIB};
use vramwarden::session::csv_export::{export, Table};
use vramwarden::session::format::{frame, CRC_STRIDE, KIND_HEADER, KIND_SAMPLE, MAGIC};
use vramwarden::session::reader::{ReadError, SessionData, MAX_FILE_BYTES};
use vramwarden::session::writer::SessionWriter;
use vramwarden::session::{Header, HeaderDevice};

const T0: UnixMs = 1_796_000_000_000;

fn header(version: u32, host: &str, gpu: &str) -> Header {
    Header {
        format_version: version,
        app_version: "test".into(),
        host: host.into(),
        source: "Simulated".into(),
        driver_version: None,
        nvml_version: None,
        started_ms: T0,
        interval_ms: 1000,
        devices: vec![HeaderDevice {
            index: 0,
            uuid: format!("GPU-{host}"),
            name: gpu.into(),
            memory_total_bytes: Some(80 << 30),
            pci_bus_id: None,
        }],
    }
}

/// One GPU holding one process of `used_mib`.
fn snap(t: UnixMs, pid: u32, name: &str, used_mib: u64) -> Snapshot {
    Snapshot {
        taken_at_ms: t,
        devices: vec![DeviceSample {
            index: 0,
            memory_total_bytes: Some(80 << 30),
            memory_used_bytes: Some(used_mib * MIB),
            ..DeviceSample::default()
        }],
        processes: vec![ProcessSample {
            pid,
            device_index: 0,
            used_bytes: Some(used_mib * MIB),
            info: Some(Arc::new(ProcInfo {
                name: name.into(),
                cmdline: format!("/usr/bin/{name} --train"),
                user: format!("{name}-user"),
                uid: 1000,
                start_time_ms: T0 - 5000,
                container_id: None,
                ..ProcInfo::default()
            })),
            ..ProcessSample::default()
        }],
    }
}

/// Writes a log with the real writer: `times` samples of one process.
fn write_log(path: &Path, h: &Header, times: &[UnixMs], pid: u32, name: &str, used_mib: u64) {
    let mut w = SessionWriter::create(path, h).expect("create");
    for t in times {
        w.write_snapshot(&snap(*t, pid, name, used_mib))
            .expect("write");
    }
    w.close().expect("close");
}

/// Record markers in `bytes` (every position a reader may try a record at).
fn markers(bytes: &[u8]) -> u64 {
    bytes.windows(2).filter(|w| *w == MAGIC).count() as u64
}

/// A header record, then `pattern` repeated until the file is `size` bytes long, then one
/// valid sample record; with the length of the flood.
fn marker_flood(pattern: &[u8], size: usize) -> (Vec<u8>, usize) {
    let mut bytes = frame(
        KIND_HEADER,
        &serde_json::to_vec(&header(1, "flood", "GPU")).expect("json"),
    );
    let header_len = bytes.len();
    while bytes.len() < size {
        bytes.extend_from_slice(pattern);
    }
    let flood = bytes.len() - header_len;
    let mut payload = Vec::new();
    vramwarden::session::format::encode_sample(&mut payload, T0, &[], &[]);
    bytes.extend_from_slice(&frame(KIND_SAMPLE, &payload));
    (bytes, flood)
}

/// What the flood must cost at most: the file once, plus two strides per marker tried.
fn linear_bound(bytes: &[u8]) -> u64 {
    bytes.len() as u64 + markers(bytes) * 2 * CRC_STRIDE as u64
}

#[test]
fn marker_flood_costs_checksum_work_linear_in_the_file() {
    // Every marker claims 64 KiB (varint 80 80 04); 256 KiB of them, so each of the first
    // 192 KiB of markers has its claim backed by the file. Hashing each claim in full would
    // cost about 2 GB; the bound is about 10 MB.
    let (bytes, flood) = marker_flood(&[0xA5, 0x57, KIND_SAMPLE, 0x80, 0x80, 0x04], 256 << 10);
    let n = bytes.len();
    let bound = linear_bound(&bytes);
    let s = SessionData::parse(bytes);
    assert!(
        s.report.checksummed_bytes <= bound,
        "hashed {} bytes of a {n}-byte file (bound {bound})",
        s.report.checksummed_bytes
    );
    // The flood is skipped as one damaged stretch; the records around it are kept.
    assert!(s.header.is_some());
    assert_eq!(s.len(), 1, "the sample after the flood is found");
    assert_eq!(s.report.skipped_regions, 1);
    assert_eq!(s.report.skipped_bytes, flood);
}

#[test]
fn the_issue_flood_of_16_mib_claims_opens_with_linear_work() {
    // The issue's file: a header, then `A5 57 02 80 80 80 08` (a sample claiming 16 MiB, the
    // largest length allowed) repeated to 18 MiB.
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("flood.vwlog");
    let (bytes, _) = marker_flood(&[0xA5, 0x57, 0x02, 0x80, 0x80, 0x80, 0x08], 18 << 20);
    let bound = linear_bound(&bytes);
    std::fs::write(&path, &bytes).expect("write");
    let s = SessionData::open(&path).expect("open");
    assert!(
        s.report.checksummed_bytes <= bound,
        "hashed {} bytes of an {}-byte file (bound {bound})",
        s.report.checksummed_bytes,
        bytes.len()
    );
    assert_eq!(s.len(), 1, "the sample after the flood is found");
    assert!(!s.report.is_clean());
    assert!(s.report.summary().contains("skipped"));
}

#[test]
fn dev_zero_is_refused_unread() {
    let err = SessionData::open(Path::new("/dev/zero")).expect_err("a device is not a log");
    let msg = err.to_string();
    assert!(
        msg.contains("/dev/zero") && msg.contains("character device"),
        "{msg}"
    );
    assert!(msg.contains("not a regular file"), "{msg}");
    assert!(matches!(err, ReadError::NotAFile { .. }));
}

#[test]
fn fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().expect("tmp");
    let fifo = dir.path().join("pipe.vwlog");
    let c = std::ffi::CString::new(fifo.to_str().expect("utf8")).expect("cstring");
    // SAFETY: mkfifo(3) with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let (tx, rx) = std::sync::mpsc::channel();
    let p = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(SessionData::open(&p).map(|s| s.len()));
    });
    // A watchdog, not a timing assertion: had the open blocked (no writer ever comes), the
    // test opens the write end to free it, then fails instead of hanging the suite.
    let got = match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(r) => r,
        Err(_) => {
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            panic!("SessionData::open blocked on a FIFO");
        }
    };
    let msg = got.expect_err("a FIFO is not a log").to_string();
    assert!(
        msg.contains("FIFO") && msg.contains("not a regular file"),
        "{msg}"
    );
}

#[test]
fn folders_are_refused_and_symlinks_to_logs_are_followed() {
    let dir = tempfile::tempdir().expect("tmp");
    let msg = SessionData::open(dir.path())
        .expect_err("a folder is not a log")
        .to_string();
    assert!(
        msg.contains("folder") && msg.contains("not a regular file"),
        "{msg}"
    );
    let log = dir.path().join("a.vwlog");
    write_log(&log, &header(1, "a", "GPU"), &[T0, T0 + 1000], 7, "x", 10);
    let link = dir.path().join("link.vwlog");
    std::os::unix::fs::symlink(&log, &link).expect("symlink");
    assert_eq!(
        SessionData::open(&link)
            .expect("a link to a log opens")
            .len(),
        2
    );
}

#[test]
fn a_file_over_the_size_limit_is_refused_unread() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("huge.vwlog");
    // Sparse: no disk space is used, and a reader that read it would need 4 GiB of memory.
    let f = std::fs::File::create(&path).expect("create");
    f.set_len(MAX_FILE_BYTES + 1).expect("set_len");
    drop(f);
    let err = SessionData::open(&path).expect_err("too large");
    assert!(
        matches!(err, ReadError::TooLarge { size, .. } if size == MAX_FILE_BYTES + 1),
        "{err}"
    );
    assert!(err.to_string().contains("larger than"), "{err}");
}

#[test]
fn joined_logs_keep_their_own_processes() {
    let dir = tempfile::tempdir().expect("tmp");
    let (a, b) = (dir.path().join("a.vwlog"), dir.path().join("b.vwlog"));
    let a_times: Vec<UnixMs> = (0..10).map(|i| T0 + i * 1000).collect();
    let b_times: Vec<UnixMs> = (0..12).map(|i| T0 + 100_000 + i * 1000).collect();
    // Both writers give their one process session-local id 0.
    write_log(&a, &header(1, "a", "GPU A"), &a_times, 1111, "alpha", 100);
    write_log(&b, &header(1, "b", "GPU B"), &b_times, 2222, "beta", 200);
    let joined = dir.path().join("ab.vwlog");
    let mut bytes = std::fs::read(&a).expect("a");
    bytes.extend_from_slice(&std::fs::read(&b).expect("b"));
    std::fs::write(&joined, &bytes).expect("write");

    let s = SessionData::open(&joined).expect("open");
    assert_eq!(s.len(), 22);
    assert_eq!(s.report.segments, 2);
    assert!(!s.report.is_clean(), "joined logs are reported");
    assert!(
        s.report.summary().contains("2 logs joined"),
        "{}",
        s.report.summary()
    );

    // Processes table: each pid with its own name, user, memory and times.
    let mut out = Vec::new();
    let rows = export(&s, Table::Processes, &mut out, &mut |_| true).expect("export");
    assert_eq!(rows, 22);
    let mut r = csv::Reader::from_reader(out.as_slice());
    let mut seen = (0, 0);
    for rec in r.records() {
        let rec = rec.expect("row");
        let t: UnixMs = rec[1].parse().expect("unix_ms");
        let (pid, name, user, used) = (&rec[3], &rec[5], &rec[6], &rec[7]);
        match pid {
            "1111" => {
                assert_eq!((name, user, used), ("alpha", "alpha-user", "100"), "at {t}");
                assert!(a_times.contains(&t), "alpha at {t}");
                seen.0 += 1;
            }
            "2222" => {
                assert_eq!((name, user, used), ("beta", "beta-user", "200"), "at {t}");
                assert!(b_times.contains(&t), "beta at {t}");
                seen.1 += 1;
            }
            other => panic!("unexpected pid {other:?} at {t}"),
        }
    }
    assert_eq!(seen, (10, 12));

    // Devices table: each segment's GPU name comes from its own header.
    let mut out = Vec::new();
    export(&s, Table::Devices, &mut out, &mut |_| true).expect("export");
    let text = String::from_utf8(out).expect("utf8");
    assert_eq!(text.matches(",GPU-a,GPU A,").count(), 10, "{text}");
    assert_eq!(text.matches(",GPU-b,GPU B,").count(), 12, "{text}");

    // Events: both starts, each under its own name.
    let mut out = Vec::new();
    export(&s, Table::Events, &mut out, &mut |_| true).expect("export");
    let text = String::from_utf8(out).expect("utf8");
    assert!(
        text.contains(",process_start,1111,0,alpha,alpha-user,"),
        "{text}"
    );
    assert!(
        text.contains(",process_start,2222,0,beta,beta-user,"),
        "{text}"
    );

    // The replay for the GUI has both processes, with their own memory and times.
    let m = vramwarden::engine::replay::session(&s);
    let mut rows: Vec<_> = m
        .rows()
        .map(|r| {
            (
                r.key.pid,
                r.info.name.clone(),
                r.peak_bytes,
                r.first_seen_ms,
            )
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        vec![
            (1111, "alpha".to_string(), 100 * MIB, a_times[0]),
            (2222, "beta".to_string(), 200 * MIB, b_times[0]),
        ]
    );
}

#[test]
fn a_log_joined_to_itself_reports_its_duplicates() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = dir.path().join("a.vwlog");
    let times: Vec<UnixMs> = (0..5).map(|i| T0 + i * 1000).collect();
    write_log(&a, &header(1, "a", "GPU A"), &times, 1111, "alpha", 100);
    let once = std::fs::read(&a).expect("read");
    let s = SessionData::parse([once.clone(), once].concat());
    assert_eq!(s.len(), 5);
    assert_eq!(s.report.duplicate_samples, 5);
    assert_eq!(s.report.segments, 2);
    let sum = s.report.summary();
    assert!(sum.contains("dropped 5 duplicate sample(s)"), "{sum}");
    // The samples kept are the first segment's, with its process.
    for snap in s.snapshots() {
        assert_eq!(snap.processes.len(), 1);
        assert_eq!(snap.processes[0].pid, 1111);
    }
}

#[test]
fn duplicate_sample_times_are_reported() {
    let dir = tempfile::tempdir().expect("tmp");
    let a = dir.path().join("a.vwlog");
    write_log(
        &a,
        &header(1, "a", "GPU A"),
        &[T0, T0 + 1000, T0 + 1000, T0 + 2000],
        1111,
        "alpha",
        100,
    );
    let s = SessionData::open(&a).expect("open");
    assert_eq!(s.len(), 3);
    assert!(!s.report.is_clean(), "{:?}", s.report);
    assert!(
        s.report.summary().contains("1 duplicate sample"),
        "{}",
        s.report.summary()
    );
}

#[test]
fn unknown_format_version_is_reported_by_export() {
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("v99.vwlog");
    write_log(
        &log,
        &header(99, "a", "GPU A"),
        &[T0, T0 + 1000],
        1111,
        "alpha",
        100,
    );
    let s = SessionData::open(&log).expect("open");
    assert_eq!(s.report.unknown_version, Some(99));
    assert!(!s.report.is_clean());
    assert!(
        s.report.summary().contains("version 99"),
        "{}",
        s.report.summary()
    );
    // `vramwarden export` prints the warning and still exports what it could read.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .arg("export")
        .arg(&log)
        .args(["--table", "devices", "--csv"])
        .arg(dir.path().join("d.csv"))
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown format version 99"), "{err}");
    let csv = std::fs::read_to_string(dir.path().join("d.csv")).expect("csv");
    assert_eq!(csv.lines().count(), 3);
}

#[test]
fn a_header_this_build_cannot_decode_still_reports_its_version() {
    let mut bytes = frame(
        KIND_HEADER,
        br#"{"format_version":7,"everything":"else changed"}"#,
    );
    let mut payload = Vec::new();
    vramwarden::session::format::encode_sample(&mut payload, T0, &[], &[]);
    bytes.extend_from_slice(&frame(KIND_SAMPLE, &payload));
    let s = SessionData::parse(bytes);
    assert_eq!(s.report.unknown_version, Some(7));
    assert_eq!(s.report.bad_records, 1);
    assert_eq!(s.len(), 1);
}
