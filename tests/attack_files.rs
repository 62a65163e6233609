//! The attack suite, crafted files and output (security v2, items 17–18): session logs made to
//! multiply what they hold (one long command line referred to 400 000 times, one long GPU name
//! for 4096 devices, 4096 devices in every sample) and text that reaches a terminal or a
//! spreadsheet. The logs are made here by small generators. Memory is bounded by running the
//! real binary under an address-space limit (an allocation past it fails and aborts it).
//! Each test failed on the code before it.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vramwarden::front::cli::snapshot_out::{write_csv_with, CsvTable, CsvText};
use vramwarden::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, UnixMs};
use vramwarden::session::format::{encode_sample, frame, KIND_EVENT, KIND_HEADER, KIND_SAMPLE};
use vramwarden::session::reader::{SessionData, MAX_DEVICE_TEXT};
use vramwarden::session::{Event, Header, HeaderDevice, ProcDef};

const T0: UnixMs = 1_796_000_000_000;

fn header(devices: Vec<HeaderDevice>) -> Vec<u8> {
    let h = Header {
        format_version: 2,
        app_version: "crafted".into(),
        host: "h".into(),
        source: "Simulated".into(),
        driver_version: None,
        nvml_version: None,
        started_ms: T0,
        interval_ms: 1000,
        devices,
    };
    frame(KIND_HEADER, &serde_json::to_vec(&h).expect("json"))
}

fn gpu(index: u32, name: String) -> HeaderDevice {
    HeaderDevice {
        index,
        uuid: format!("GPU-{index}"),
        name,
        memory_total_bytes: Some(80 << 30),
        pci_bus_id: None,
    }
}

fn devices(n: u32) -> Vec<DeviceSample> {
    (0..n)
        .map(|index| DeviceSample {
            index,
            memory_used_bytes: Some(1 << 30),
            ..DeviceSample::default()
        })
        .collect()
}

/// Runs the real binary with at most `limit` bytes of address space.
fn bounded(args: &[&str], limit: u64) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vramwarden"));
    cmd.args(args);
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            libc::setrlimit(libc::RLIMIT_AS, &r);
            Ok(())
        });
    }
    cmd.output().expect("runs")
}

const GIB: u64 = 1 << 30;

/// Item 17: a 1.8 MB log whose one process has a 1 MiB command line, referred to 400 000
/// times: export refuses at once with the limit named, writes nothing, stays small.
#[test]
fn a_long_command_line_referred_400000_times_is_refused_by_export() {
    let tmp = tempfile::tempdir().expect("tmp");
    let log = tmp.path().join("crafted.vwlog");
    let mut bytes = header(vec![gpu(0, "GPU".into())]);
    let def = ProcDef {
        id: 1,
        pid: 4242,
        device_index: 0,
        info: ProcInfo {
            name: "job".into(),
            cmdline: "x".repeat(1 << 20),
            user: "u".into(),
            uid: 1000,
            start_time_ms: T0 - 1000,
            ..ProcInfo::default()
        },
    };
    let start = Event::ProcessStart { unix_ms: T0, def };
    bytes.extend(frame(
        KIND_EVENT,
        &serde_json::to_vec(&start).expect("json"),
    ));
    for s in 0..4u32 {
        let mut payload = Vec::new();
        let procs = vec![(1u32, Some(1u64 << 20)); 100_000];
        encode_sample(&mut payload, T0 + i64::from(s) * 1000, &devices(1), &procs);
        bytes.extend(frame(KIND_SAMPLE, &payload));
    }
    assert!(bytes.len() < 2_000_000, "{}", bytes.len());
    std::fs::write(&log, &bytes).expect("write");
    let out_csv = tmp.path().join("out.csv");
    let t = Instant::now();
    let out = bounded(
        &[
            "export",
            log.to_str().expect("utf-8"),
            "--table",
            "processes",
            "--csv",
            out_csv.to_str().expect("utf-8"),
        ],
        2 * GIB,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        err.contains("more than the export limit of")
            && err.contains("1024 × the log's size")
            && err.contains("a command line or name of 104")
            && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!out_csv.exists(), "a partial file was left");
    println!("refused in {:.2} s", t.elapsed().as_secs_f64());
    // The library says the same without writing a byte.
    let data = SessionData::open(&log).expect("open");
    let mut sink: Vec<u8> = Vec::new();
    let r = vramwarden::session::csv_export::export(
        &data,
        vramwarden::session::csv_export::Table::Processes,
        &mut sink,
        &mut |_| true,
    );
    assert!(
        matches!(r, Err(vramwarden::session::csv_export::ExportError::TooLarge { estimate, limit, .. }) if estimate > 400_000 << 20 && limit < estimate),
        "{r:?}"
    );
    assert!(sink.is_empty());
}

/// Item 17: a 4 MiB GPU name for 4096 devices: the name is cut to the limit (and said so),
/// each sample's devices are distinct, and export and snapshots stay small.
#[test]
fn a_4_mib_gpu_name_for_4096_devices_is_cut_and_export_stays_bounded() {
    let tmp = tempfile::tempdir().expect("tmp");
    let log = tmp.path().join("names.vwlog");
    let mut bytes = header(vec![gpu(0, "N".repeat(4 << 20))]);
    for s in 0..16i64 {
        let mut payload = Vec::new();
        encode_sample(&mut payload, T0 + s * 1000, &devices(4096), &[]);
        bytes.extend(frame(KIND_SAMPLE, &payload));
    }
    std::fs::write(&log, &bytes).expect("write");
    let data = SessionData::open(&log).expect("open");
    assert_eq!(data.report.cut_texts, 1);
    assert!(
        data.report
            .summary()
            .contains("longer than the limit of 128 bytes were cut"),
        "{}",
        data.report.summary()
    );
    let snap = data.snapshot(0).expect("sample");
    assert_eq!(snap.devices.len(), 4096);
    assert_eq!(snap.devices[0].name.len(), MAX_DEVICE_TEXT);
    let out = bounded(
        &[
            "export",
            log.to_str().expect("utf-8"),
            "--table",
            "devices",
            "--csv",
            tmp.path().join("d.csv").to_str().expect("utf-8"),
        ],
        2 * GIB,
    );
    assert!(out.status.success(), "{out:?}");

    // A sample that names one device twice is malformed (each copy would take its name).
    let mut payload = Vec::new();
    let mut twice = devices(2);
    twice[1].index = 0;
    encode_sample(&mut payload, T0, &twice, &[]);
    let mut bytes = header(vec![gpu(0, "GPU".into())]);
    bytes.extend(frame(KIND_SAMPLE, &payload));
    let data = SessionData::parse(bytes);
    assert_eq!((data.len(), data.report.bad_records), (0, 1));
}

/// Item 17: a 17 MB log of 4096 GPUs in every sample opens and reads through (what the
/// window does) in time linear in its size: every device finds its header entry by index,
/// not by a search of the header. The deadline only catches a hang (before: over 150 s).
#[test]
fn a_17_mb_log_of_4096_gpus_reads_through() {
    let mut bytes = header((0..4096).map(|i| gpu(i, format!("GPU {i}"))).collect());
    let mut s = 0i64;
    while bytes.len() < 17_000_000 {
        let mut payload = Vec::new();
        encode_sample(&mut payload, T0 + s * 1000, &devices(4096), &[]);
        bytes.extend(frame(KIND_SAMPLE, &payload));
        s += 1;
    }
    let data = Arc::new(SessionData::parse(bytes));
    let (tx, rx) = std::sync::mpsc::channel();
    let d = data.clone();
    std::thread::spawn(move || {
        let mut named = 0usize;
        for snap in d.snapshots() {
            named += snap.devices.iter().filter(|x| !x.name.is_empty()).count();
        }
        let _ = tx.send(named);
    });
    let named = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("reading every sample took more than 120 s");
    assert_eq!(named, data.len() * 4096);
}

fn hostile() -> Snapshot {
    Snapshot {
        taken_at_ms: T0,
        devices: vec![DeviceSample {
            index: 0,
            uuid: "GPU-0".into(),
            name: "H200\x1b[2J".into(),
            ..DeviceSample::default()
        }],
        processes: vec![ProcessSample {
            pid: 7,
            info: Some(Arc::new(ProcInfo {
                name: "=cmd|'/c calc'!A1".into(),
                cmdline: "python \x1b]0;owned\x07train.py".into(),
                user: "@alice".into(),
                uid: 1000,
                start_time_ms: T0 - 1000,
                ..ProcInfo::default()
            })),
            ..ProcessSample::default()
        }],
    }
}

fn csv(text: CsvText) -> String {
    let mut out = Vec::new();
    write_csv_with(&hostile(), CsvTable::Both, text, &mut out).expect("csv");
    String::from_utf8(out).expect("utf-8")
}

/// Item 18: the data is exact by default; a terminal gets control characters escaped; the
/// formula prefixes are neutralised only with `--excel-safe`.
#[test]
fn snapshot_csv_is_exact_by_default_escaped_on_a_terminal_and_excel_safe_on_request() {
    let exact = csv(CsvText::default());
    assert!(exact.contains("H200\x1b[2J") && exact.contains("\x1b]0;owned\x07"));
    assert!(exact.contains(",=cmd|'/c calc'!A1,@alice,"), "{exact}");

    let term = csv(CsvText {
        escape_control: true,
        excel_safe: false,
    });
    assert!(!term.contains('\x1b') && !term.contains('\x07'), "{term:?}");
    assert!(term.contains("H200\\x1b[2J") && term.contains("\\x1b]0;owned\\x07train.py"));

    let safe = csv(CsvText {
        escape_control: false,
        excel_safe: true,
    });
    assert!(safe.contains(",'=cmd|'/c calc'!A1,'@alice,"), "{safe}");
    // Numbers keep their sign: only text cells are touched.
    assert!(safe.contains(",7,"), "{safe}");

    // The flag exists and is documented.
    let help = Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args(["snapshot", "--help"])
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&help.stdout).contains("--excel-safe"));
    let out = Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args(["--demo", "snapshot", "--format", "csv", "--excel-safe"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
}

/// Item 18: exported CSV files are 0600 (they hold every user's command lines).
#[test]
fn exported_csvs_are_0600() {
    let tmp = tempfile::tempdir().expect("tmp");
    let log = tmp.path().join("demo.vwlog");
    let o = Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .args(["record", "--demo", "--speed", "max", "--duration", "5s"])
        .arg("--out")
        .arg(&log)
        .output()
        .expect("record");
    assert!(o.status.success(), "{o:?}");
    let out = tmp.path().join("x.csv");
    let o = Command::new(env!("CARGO_BIN_EXE_vramwarden"))
        .arg("export")
        .arg(&log)
        .arg("--csv")
        .arg(&out)
        .output()
        .expect("export");
    assert!(o.status.success(), "{o:?}");
    for t in ["devices", "processes", "events"] {
        let p = tmp.path().join(format!("x-{t}.csv"));
        let mode = std::fs::metadata(&p).expect("file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", p.display());
    }
}

/// A crafted log: process 1 has a command line of `cmdline` bytes and is named by `entries`
/// samples' entries (`per_sample` per sample); `filler` bytes of a second process's command
/// line (never sampled) make the log larger without adding a row.
fn repeated_log(
    path: &std::path::Path,
    cmdline: usize,
    per_sample: usize,
    samples: u32,
    filler: usize,
) {
    let mut bytes = header(vec![gpu(0, "GPU".into())]);
    for (id, len) in [(1u32, cmdline), (2, filler)] {
        let def = ProcDef {
            id,
            pid: 4242 + id,
            device_index: 0,
            info: ProcInfo {
                name: "job".into(),
                cmdline: "x".repeat(len),
                user: "u".into(),
                uid: 1000,
                start_time_ms: T0 - 1000,
                ..ProcInfo::default()
            },
        };
        let start = Event::ProcessStart { unix_ms: T0, def };
        bytes.extend(frame(
            KIND_EVENT,
            &serde_json::to_vec(&start).expect("json"),
        ));
    }
    for s in 0..samples {
        let mut payload = Vec::new();
        let procs = vec![(1u32, Some(1u64 << 20)); per_sample];
        encode_sample(&mut payload, T0 + i64::from(s) * 1000, &devices(1), &procs);
        bytes.extend(frame(KIND_SAMPLE, &payload));
    }
    std::fs::write(path, &bytes).expect("write");
}

/// Runs `vramwarden export LOG --table processes --csv OUT` with files of at most `fsize`
/// bytes (a write past it fails with EFBIG, SIGXFSZ ignored; on the code before the fix, the
/// export wrote until then).
fn export_capped(log: &std::path::Path, out: &std::path::Path, fsize: u64) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vramwarden"));
    cmd.arg("export")
        .arg(log)
        .args(["--table", "processes", "--csv"])
        .arg(out);
    // SAFETY: signal and setrlimit are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let r = libc::rlimit {
                rlim_cur: fsize,
                rlim_max: fsize,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &r);
            Ok(())
        });
    }
    cmd.output().expect("runs")
}

/// Security v3, item 10: a 4 MB log that would export 8 GiB of CSV (2 000 × its size: inside
/// the old 4096 × guard, which let a 515 MB log write 70 GB; the guard is 1024 × now) is
/// refused before a byte is written, with the limit named.
#[test]
fn a_log_two_thousand_times_smaller_than_its_csv_is_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let log = tmp.path().join("crafted.vwlog");
    repeated_log(&log, 1 << 20, 1000, 4, 3 << 20);
    let size = std::fs::metadata(&log).expect("meta").len();
    assert!((4 << 20..5 << 20).contains(&size), "{size}");
    let out_csv = tmp.path().join("out.csv");
    let o = export_capped(&log, &out_csv, 64 << 20);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{o:?}");
    assert!(
        err.contains("more than the export limit of") && err.contains("nothing was written"),
        "{err}"
    );
    assert!(!out_csv.exists(), "a partial file was left");
}

/// A tmpfs of `mib` MiB mounted on a fresh folder (root, as CI runs), unmounted on drop.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn new(mib: u64) -> Self {
        let dir = tempfile::tempdir().expect("tmp");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount");
        assert!(
            ok.success(),
            "mounting a tmpfs needs root (CI runs as root)"
        );
        Self(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Security v3, item 10: an export larger than the free space is refused before anything is
/// written (on the code before, it filled the disk and left its partial file), and an export
/// that fails part-way (a file size limit) leaves no partial file.
#[test]
fn an_export_larger_than_the_free_space_is_refused_and_a_failed_one_leaves_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let log = tmp.path().join("crafted.vwlog");
    // 64 KiB command line × 2 000 rows: ≥ 256 MiB of CSV, from a log of 100 KB.
    repeated_log(&log, 64 << 10, 500, 4, 0);
    let fs = Tmpfs::new(96);
    let out_csv = fs.0.path().join("out.csv");
    let o = export_capped(&log, &out_csv, libc::RLIM_INFINITY);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{o:?}");
    assert!(err.contains("are free there"), "{err}");
    assert!(!out_csv.exists(), "a partial file was left");
    // Enough room, but each file may be only 1 MiB: it fails part-way and is removed.
    let out_csv = tmp.path().join("out.csv");
    let o = export_capped(&log, &out_csv, 1 << 20);
    assert!(!o.status.success(), "{o:?}");
    assert!(!out_csv.exists(), "a partial file was left");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("ls")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "only the log stays: {left:?}");
}
