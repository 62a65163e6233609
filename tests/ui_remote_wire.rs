//! A window attached to an agent shows what a local one does (issue 25, point 1): the agent's
//! OOM forecast banner, growing process and orphaned memory, its OOM suspicion and past leaks
//! in the Leaks tab (a past leak's session, on the agent, downloaded and opened) and its rule
//! activity in the Activity tab, read from the one wire type. The agent here is a stand-in: a
//! loopback HTTP server in this test answering `/api/view`, `/api/past` and the session list
//! and download with a `WireView` and a `WirePast` made from a real View of the simulated GPUs
//! plus those events and a real session log written here (a real agent would need minutes
//! and a filling GPU to produce them); the window, its link and the wire checks are the real
//! ones.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use egui_kittest::kittest::Queryable;
use egui_kittest::Harness;
use vramwarden::detect::forecast_alert::ForecastAlert;
use vramwarden::detect::leak::Growing;
use vramwarden::detect::orphans::{NotRunning, OrphanGpu, OrphanPid};
use vramwarden::engine::view::{LeakKey, LeakRecord, Monitor, OomRecord};
use vramwarden::front::gui::app::UiState;
use vramwarden::front::gui::{Backend, VramApp};
use vramwarden::link::wire::{WireActivity, WirePast, WireTarget, WireView, API_VERSION};
use vramwarden::model::outcome::Outcome;
use vramwarden::model::ProcessKey;

fn view_now() -> String {
    use vramwarden::source::GpuSource;
    let now = vramwarden::model::now_ms();
    let mut sim = vramwarden::source::sim::SimSource::demo(now - 60_000);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 600);
    m.source = Some(vramwarden::model::SourceInfo {
        host: "the-agents-host".into(),
        ..sim.info()
    });
    engine_state.apply(&mut m, sim.sample(now).expect("a sample"), now);
    m.ooms.push(OomRecord {
        at_ms: now - 10_000,
        device_index: 0,
        used_pct: 99.2,
        victims: vec![vramwarden::session::OomHolder {
            pid: 555,
            start_time_ms: 0,
            name: "victim-proc".into(),
            user: "bob".into(),
            mib: 1000.0,
            grown_1m_mib: None,
            releasable_mib: None,
            grown_recent_mib: None,
            grown_over_s: None,
            cause_share_pct: None,
            likely_cause: false,
        }],
        holders: Vec::new(),
        session: None,
    });
    watches(&mut m, now);
    let mut v = WireView::of(&m, 0, 4096);
    v.activity.push(WireActivity {
        unix_ms: now - 5_000,
        rule: "idle-cleanup".into(),
        target: WireTarget::Device(0),
        action: "Release cache".into(),
        outcome: Outcome::Acted,
        detail: "freed-by-the-agents-rule".into(),
        entry: vramwarden::link::wire::WireEntry::Action,
    });
    serde_json::to_string(&v).expect("json")
}

/// The agent's watches on its View `m`: an OOM forecast on GPU 0, the first process there
/// growing for a minute, the second one's memory held by a PID not running on the agent.
fn watches(m: &mut Monitor, now: vramwarden::model::UnixMs) {
    let snap = m.latest.clone().expect("a sample");
    let mut on_0 = snap.processes.iter().filter(|p| p.device_index == 0);
    let (grower, orphan) = (
        on_0.next().expect("a process on GPU 0"),
        on_0.next().expect("a second one"),
    );
    m.oom_alerts.push(ForecastAlert {
        device_index: 0,
        since_ms: now - 20_000,
        full_in_s: Some(420.0),
        drivers: vec!["forecast-driver (PID 4242)".into()],
    });
    m.growing.push((
        LeakKey::Process((grower.key(), 0)),
        Growing {
            since_ms: now - 60_000,
            grown_mib: 123.0,
            rate_mib_per_min: 123.0,
        },
    ));
    m.orphans.push(OrphanGpu {
        device_index: 0,
        total_bytes: orphan.used_bytes.unwrap_or(1),
        pids: vec![OrphanPid {
            pid: orphan.pid,
            used_bytes: orphan.used_bytes,
            kind: NotRunning::NoProcess,
        }],
        holders: Vec::new(),
        remedy: "a driver reset".into(),
    });
}

fn past() -> String {
    let now = vramwarden::model::now_ms();
    let leak = LeakRecord {
        key: LeakKey::Process((
            ProcessKey {
                pid: 777,
                start_time_ms: 1,
            },
            0,
        )),
        info: vramwarden::session::LeakInfo {
            pid: 777,
            start_time_ms: 1,
            device_index: 0,
            name: "past-leaker".into(),
            user: "alice".into(),
            ghost: false,
            since_ms: now - 3_600_000,
            rate_mib_per_min: 50.0,
            why: String::new(),
        },
        flagged_ms: now - 3_500_000,
        ended_ms: Some(now - 3_000_000),
        grown_mib: 500.0,
        peak_mib: 9000.0,
        session: Some("/var/lib/vramwarden/sessions/x.vwlog".into()),
        open_at_end: false,
    };
    serde_json::to_string(&WirePast {
        api_version: API_VERSION,
        leaks: vec![leak],
        ooms: Vec::new(),
    })
    .expect("json")
}

/// The past leak's session log as the agent keeps it: a real log, written here, with the
/// leaking process's samples around the time it was flagged.
fn past_session() -> Vec<u8> {
    use vramwarden::model::{DeviceSample, ProcInfo, ProcessSample, Snapshot, MIB};
    use vramwarden::session::writer::SessionWriter;
    use vramwarden::session::{Header, HeaderDevice, FORMAT_VERSION};
    let flagged = vramwarden::model::now_ms() - 3_500_000;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("x.vwlog");
    let header = Header {
        format_version: FORMAT_VERSION,
        app_version: "test".into(),
        host: "the-agents-host".into(),
        source: "Simulated".into(),
        driver_version: None,
        nvml_version: None,
        started_ms: flagged - 10_000,
        interval_ms: 1000,
        devices: vec![HeaderDevice {
            index: 0,
            uuid: "GPU-0".into(),
            name: "Simulated H200".into(),
            memory_total_bytes: Some(80 << 30),
            pci_bus_id: None,
        }],
    };
    let mut w = SessionWriter::create(&path, &header).expect("create");
    for (i, t) in [flagged - 10_000, flagged, flagged + 10_000]
        .into_iter()
        .enumerate()
    {
        w.write_snapshot(&Snapshot {
            taken_at_ms: t,
            devices: vec![DeviceSample {
                index: 0,
                memory_total_bytes: Some(80 << 30),
                memory_used_bytes: Some((9000 + 500 * i as u64) * MIB),
                ..DeviceSample::default()
            }],
            processes: vec![ProcessSample {
                pid: 777,
                device_index: 0,
                used_bytes: Some((8500 + 500 * i as u64) * MIB),
                info: Some(std::sync::Arc::new(ProcInfo {
                    name: "past-leaker".into(),
                    user: "alice".into(),
                    start_time_ms: 1,
                    ..ProcInfo::default()
                })),
                ..ProcessSample::default()
            }],
        })
        .expect("sample");
    }
    w.close().expect("close");
    std::fs::read(&path).expect("the log")
}

/// The stand-in agent: `/api/past`, the session list and download of `x.vwlog`, and
/// `/api/view` (anything else gets the view).
fn stand_in() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn);
                let mut line = String::new();
                let _ = r.read_line(&mut line);
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
                        break;
                    }
                }
                let body = if line.contains("/api/past") {
                    past().into_bytes()
                } else if line.contains("/api/v1/sessions/x.vwlog") {
                    past_session()
                } else if line.contains("/api/v1/sessions") {
                    let size = past_session().len();
                    format!(r#"{{"sessions": [{{"name": "x.vwlog", "size_bytes": {size}}}]}}"#)
                        .into_bytes()
                } else {
                    view_now().into_bytes()
                };
                let mut c = r.into_inner();
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = c.write_all(&body);
            });
        }
    });
    format!("http://{addr}")
}

fn until_shown(h: &mut Harness<'static, VramApp>, label: &str, limit: Duration) {
    let t = Instant::now();
    while h.query_all_by_label_contains(label).next().is_none() {
        assert!(t.elapsed() < limit, "{label:?} not shown within {limit:?}");
        std::thread::sleep(Duration::from_millis(25));
        let _ = h.run_ok();
    }
}

#[test]
fn a_remote_window_shows_the_agents_forecast_growth_orphans_oom_activity_and_past_leaks_sessions() {
    // The window's own sessions folder (where downloads go) is a temporary one.
    let here = tempfile::tempdir().expect("tmp");
    std::env::set_var("VRAMWARDEN_DATA_DIR", here.path());
    let url = stand_in();
    let ctx = egui::Context::default();
    let backend = Backend::attach(&url, "t0ken".into(), 1000, &ctx).expect("attach");
    let app = VramApp::with_backend(backend, UiState::default());
    let mut h: Harness<'static, VramApp> = Harness::builder()
        .with_size(egui::vec2(1600.0, 1000.0))
        .with_max_steps(8)
        .build_eframe(|_cc| app);
    until_shown(&mut h, "Simulated H200", Duration::from_secs(10));
    // The agent's OOM forecast banner, its growing process and its orphaned memory.
    until_shown(&mut h, "⚠ GPU 0 full in ~7m", Duration::from_secs(5));
    until_shown(
        &mut h,
        "forecast-driver (PID 4242) growing",
        Duration::from_secs(1),
    );
    until_shown(&mut h, "↗ growing +123 MiB/min", Duration::from_secs(1));
    // Orphaned memory is worded by the agent's host, not this computer.
    until_shown(
        &mut h,
        "not running on the-agents-host",
        Duration::from_secs(1),
    );
    assert!(h
        .query_all_by_label_contains("not running here")
        .next()
        .is_none());
    h.get_by_label("Leaks").click();
    let _ = h.run_ok();
    until_shown(&mut h, "OOM suspected", Duration::from_secs(5));
    until_shown(&mut h, "victim-proc", Duration::from_secs(1));
    // The agent's past leak, not this computer's.
    until_shown(&mut h, "past-leaker", Duration::from_secs(5));
    h.get_all_by_label_contains("Activity (")
        .next()
        .expect("tab")
        .click();
    let _ = h.run_ok();
    until_shown(&mut h, "freed-by-the-agents-rule", Duration::from_secs(5));
    // The past leak's session is on the agent: opening it downloads it into this computer's
    // sessions folder and opens it read-only.
    h.get_by_label("Leaks").click();
    let _ = h.run_ok();
    until_shown(&mut h, "past-leaker", Duration::from_secs(5));
    h.get_by_label("past-leaker · PID 777").click();
    until_shown(&mut h, "SESSION · read-only", Duration::from_secs(10));
    assert!(
        here.path()
            .join("sessions/from-agents")
            .join(vramwarden::link::remote::agent_folder(&url))
            .join("x.vwlog")
            .is_file(),
        "downloaded into this computer's sessions folder, the agent's own folder there"
    );
}
