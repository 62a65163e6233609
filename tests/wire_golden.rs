//! The wire View's format, pinned: `tests/fixtures/wire_view_v7.json` is an answer of
//! `GET /api/view` (API version 7) with every field and every kind of entry filled. The View
//! made here writes exactly that text, the text reads back as the same View and passes the
//! window's checks, and the View an agent sends has exactly its fields. A change of the wire
//! format changes this file (and, for a window of an earlier build, `API_VERSION`).
//! `UPDATE_GOLDEN=1 cargo test --test wire_golden` writes it anew. Versions 3's, 4's, 5's and
//! 6's fixtures stay: a window of this build refuses each with the sentence naming both versions.

use vramwarden::act::guard::{
    GuardParked, GuardPhase, GuardStatus, NextStep, StepKind, StepOutcome, StepRecord,
};
use vramwarden::detect::forecast_alert::ForecastAlert;
use vramwarden::detect::leak::Growing;
use vramwarden::detect::orphans::{DevHolder, NotRunning, OrphanGpu, OrphanPid};
use vramwarden::engine::view::{LeakKey, LeakRecord, Monitor, OomRecord};
use vramwarden::engine::EngineEventKind;
use vramwarden::link::wire::{
    WireActivity, WireEntry, WireEvent, WireReply, WireTarget, WireView, API_VERSION,
};
use vramwarden::model::outcome::Outcome;
use vramwarden::model::reply::{Answer, RuleMatch, Stage};
use vramwarden::model::{SourceInfo, UnixMs};
use vramwarden::session::{LeakInfo, OomHolder};
use vramwarden::source::GpuSource;

const T0: UnixMs = 1_796_000_000_000;
/// The time of the golden View's newest sample.
const NOW: UnixMs = T0 + 4_000;
const FIXTURE: &str = "tests/fixtures/wire_view_v7.json";
/// An answer of an agent of version 6 (every row with every poll).
const FIXTURE_V6: &str = "tests/fixtures/wire_view_v6.json";
/// An answer of an agent of version 5 (its notices in words).
const FIXTURE_V5: &str = "tests/fixtures/wire_view_v5.json";
/// An answer of an agent of version 4 (no events).
const FIXTURE_V4: &str = "tests/fixtures/wire_view_v4.json";
/// An answer of an agent of version 3 (no rows, no last activity, `color_slots`).
const FIXTURE_V3: &str = "tests/fixtures/wire_view_v3.json";

fn fixture_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)
}

fn holder(pid: u32, name: &str) -> OomHolder {
    OomHolder {
        pid,
        start_time_ms: T0 - 60_000,
        name: name.into(),
        user: "alice".into(),
        mib: 30_000.0,
        grown_1m_mib: Some(600.0),
        releasable_mib: Some(512.0),
        grown_recent_mib: Some(300.0),
        grown_over_s: Some(30.0),
        cause_share_pct: Some(80.0),
        likely_cause: true,
    }
}

/// The simulated GPUs' View after five samples, with an entry of every kind besides.
fn golden_monitor() -> Monitor {
    let mut sim = vramwarden::source::sim::SimSource::demo(T0);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 60);
    m.source = Some(SourceInfo {
        host: "gpu-host".into(),
        ..sim.info()
    });
    for i in 0..5 {
        let t = T0 + i * 1000;
        engine_state.apply(&mut m, sim.sample(t).expect("a sample"), t);
    }
    let snap = m.latest.clone().expect("a sample");
    let p = snap
        .processes
        .iter()
        .find(|p| p.device_index == 0)
        .expect("a process on GPU 0");
    let key = (p.key(), 0);
    m.last_error = Some("a sampling error".into());
    m.last_active.insert(key, T0 + 3_000);
    m.leaks.push(LeakRecord {
        key: LeakKey::Process(key),
        info: LeakInfo {
            pid: p.pid,
            start_time_ms: p.key().start_time_ms,
            device_index: 0,
            name: "leaker".into(),
            user: "alice".into(),
            ghost: false,
            since_ms: T0 - 600_000,
            rate_mib_per_min: 50.0,
            why: "grows in steps".into(),
        },
        flagged_ms: T0 - 300_000,
        ended_ms: Some(T0 - 1_000),
        grown_mib: 500.0,
        peak_mib: 9000.0,
        session: None,
        open_at_end: false,
    });
    m.ooms.push(OomRecord {
        at_ms: T0 - 10_000,
        device_index: 0,
        used_pct: 99.2,
        victims: vec![holder(555, "victim")],
        holders: vec![holder(556, "holder")],
        session: None,
    });
    m.oom_alerts.push(ForecastAlert {
        device_index: 0,
        since_ms: T0 - 20_000,
        full_in_s: Some(420.0),
        drivers: vec!["leaker (PID 4242)".into()],
    });
    m.growing.push((
        LeakKey::Ghost(1),
        Growing {
            since_ms: T0 - 60_000,
            grown_mib: 123.0,
            rate_mib_per_min: 123.0,
        },
    ));
    m.orphans.push(OrphanGpu {
        device_index: 1,
        total_bytes: 1 << 30,
        pids: vec![OrphanPid {
            pid: 999,
            used_bytes: Some(1 << 30),
            kind: NotRunning::Zombie,
        }],
        holders: vec![DevHolder {
            pid: 998,
            name: "holder".into(),
            user: "bob".into(),
            devices: vec!["/dev/nvidia1".into()],
        }],
        remedy: "end the holder".into(),
    });
    m.guard.push(GuardStatus {
        device_index: 0,
        phase: GuardPhase::Armed,
        dry_run: true,
        full_in_s: Some(420.0),
        growth_mib_s: 10.0,
        next: Some(NextStep {
            kind: StepKind::ParkIdle,
            who: "idle (PID 7)".into(),
            needs_s: 12.5,
            starts_at_s: 60.0,
        }),
        cannot: vec!["python (PID 8) cannot be paused: several GPUs".into()],
        parked: vec![GuardParked {
            who: "parked (PID 9)".into(),
            bytes: 1 << 33,
            since_ms: T0 - 100_000,
            paused_grower: false,
            waits_for: "room on GPU 0".into(),
        }],
        recent: vec![StepRecord {
            unix_ms: T0 - 100_000,
            kind: StepKind::ParkIdle,
            who: "parked (PID 9)".into(),
            outcome: StepOutcome::Done,
            full_in_s: Some(300.0),
            needs_s: 3.5,
            took_s: Some(3.2),
            detail: "parked 8 GiB".into(),
        }],
        park_gib_s: 2.5,
        park_rate_measured: true,
        resume_gib_s: 6.5,
        resume_rate_measured: false,
    });
    m
}

/// The golden View: [`golden_monitor`] as the agent sends it, with an activity line and a
/// reply of every kind.
fn golden_view() -> WireView {
    let m = golden_monitor();
    let key = m
        .leaks
        .first()
        .and_then(|l| match l.key {
            LeakKey::Process(k) => Some(k),
            LeakKey::Ghost(_) => None,
        })
        .expect("a process's leak");
    let mut v = WireView::of(&m, 0, 4096);
    v.activity = vec![
        WireActivity {
            unix_ms: T0 + 2_000,
            rule: "manual".into(),
            target: WireTarget::Process {
                key,
                info: Some(std::sync::Arc::new(vramwarden::model::ProcInfo {
                    name: "leaker".into(),
                    cmdline: "python leak.py".into(),
                    user: "alice".into(),
                    uid: 1000,
                    start_time_ms: key.0.start_time_ms,
                    container_id: Some("c0ffee".into()),
                    container_name: Some("trainer".into()),
                    pod: Some("ns/pod".into()),
                })),
                used_bytes: Some(1 << 30),
                origin: vramwarden::model::Origin::Simulated,
            },
            action: "Park".into(),
            outcome: Outcome::Acted,
            detail: "asked".into(),
            entry: WireEntry::Asked,
        },
        WireActivity {
            unix_ms: T0 + 3_000,
            rule: "idle-cleanup".into(),
            target: WireTarget::Device(0),
            action: "Release cache".into(),
            outcome: Outcome::WouldAct,
            detail: "would free 1 GiB".into(),
            entry: WireEntry::FollowUp,
        },
    ];
    v.replies = vec![
        WireReply {
            api_version: API_VERSION,
            id: 7,
            what: "park".into(),
            answer: Answer {
                outcome: Outcome::Acted,
                detail: "parked".into(),
                matches: None,
                stage: Stage::Final,
                bytes: Some(1 << 33),
                seconds: Some(3.2),
            },
        },
        WireReply {
            api_version: API_VERSION,
            id: 8,
            what: "test rule".into(),
            answer: Answer {
                outcome: Outcome::Skipped,
                detail: "matches".into(),
                matches: Some(vec![RuleMatch {
                    target: "leaker (PID 4242)".into(),
                    skipped: Some("protected".into()),
                }]),
                stage: Stage::Final,
                bytes: None,
                seconds: None,
            },
        },
    ];
    v.events = golden_events(&m, key, &v.activity[0]);
    v
}

/// An event of every kind, numbered from 1.
fn golden_events(
    m: &Monitor,
    key: vramwarden::model::history::ProcSeriesKey,
    act: &WireActivity,
) -> Vec<WireEvent> {
    let leak = m.leaks[0].info.clone();
    let (victims, holders) = (m.ooms[0].victims.clone(), m.ooms[0].holders.clone());
    let kinds = vec![
        EngineEventKind::LeakStarted { leak: leak.clone() },
        EngineEventKind::LeakEnded {
            leak,
            grown_mib: 500.0,
            peak_mib: 9000.0,
        },
        EngineEventKind::OomSuspected {
            device_index: 0,
            used_pct: 99.2,
            victims,
            holders: holders.clone(),
        },
        EngineEventKind::OomForecast {
            device_index: 0,
            full_in_s: 420.0,
            drivers: holders,
        },
        EngineEventKind::OomForecastEnded {
            device_index: 0,
            raised_ms: T0 - 20_000,
        },
        EngineEventKind::Activity {
            entry: act.clone(),
            from_command: true,
        },
        EngineEventKind::RecordingFailed {
            cause: "No space left on device".into(),
        },
        EngineEventKind::RecordingResumed {
            gap: vramwarden::session::RecordingGap {
                from_ms: T0 - 5_000,
                to_ms: T0 - 3_000,
                lost_samples: 3,
                cause: "No space left on device".into(),
            },
        },
        EngineEventKind::OrphanMemory {
            gpu: m.orphans[0].clone(),
        },
        EngineEventKind::ParkLost {
            key,
            name: "leaker".into(),
            detail: "the restore failed: the process lost its GPU memory".into(),
        },
    ];
    kinds
        .into_iter()
        .zip(1..)
        .map(|(kind, seq)| WireEvent {
            seq,
            at_ms: T0 + seq as i64 * 100,
            kind,
        })
        .collect()
}

fn golden_text() -> String {
    let mut text = serde_json::to_string_pretty(&golden_view()).expect("json");
    text.push('\n');
    text
}

fn fixture() -> String {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        // Written whole to a file of its own, then renamed: the tests run side by side.
        let text = golden_text();
        let tmp = fixture_path().with_extension(format!("json.{}", std::process::id()));
        std::fs::write(&tmp, &text).expect("write the fixture");
        std::fs::rename(&tmp, fixture_path()).expect("put the fixture in place");
    }
    std::fs::read_to_string(fixture_path()).expect("the fixture")
}

#[test]
fn the_wire_view_writes_the_golden_text() {
    let text = golden_text();
    let want = fixture();
    if text != want {
        let _ = std::fs::write(std::env::temp_dir().join("wire_view_v7.json"), &text);
    }
    assert!(
        text == want,
        "the wire View's JSON differs from {FIXTURE} (this build's is in the temp folder)"
    );
}

#[test]
fn the_golden_text_reads_back_as_the_same_view_and_passes_the_checks() {
    let text = fixture();
    let read: WireView = serde_json::from_str(&text).expect("a WireView");
    assert_eq!(read.api_version, API_VERSION);
    assert_eq!(read.api_version, 7, "this fixture is version 7's");
    assert_eq!(read, golden_view());
    let mut again = serde_json::to_string_pretty(&read).expect("json");
    again.push('\n');
    assert_eq!(again, text);
    let checked = vramwarden::link::wire_checks::decode_view(text.as_bytes(), NOW)
        .expect("the window's checks take it");
    assert_eq!(checked.leaks, read.leaks);
    assert_eq!(checked.guard, read.guard);
    assert_eq!(checked.events, read.events);
}

/// Every field of the golden View carries a value (no empty list, no `null`), so the format of
/// every kind of entry is pinned; and the View an agent makes has the same fields.
#[test]
fn the_golden_text_fills_every_field_the_agent_sends() {
    let text = fixture();
    let golden: serde_json::Value = serde_json::from_str(&text).expect("json");
    let fields = golden.as_object().expect("an object");
    for (name, value) in fields {
        let empty = value.is_null()
            || value.as_array().is_some_and(Vec::is_empty)
            || value.as_object().is_some_and(serde_json::Map::is_empty);
        assert!(!empty, "{name} is empty in {FIXTURE}");
    }
    let agent = serde_json::to_value(WireView::of(&Monitor::new(1000, 10), 0, 10)).expect("json");
    let names = |v: &serde_json::Value| -> Vec<String> {
        v.as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&agent), names(&golden));
}

/// An agent of version 3 (its answer lacks the rows and the last activity), 4 (it lacks the
/// events) or 5 (it carries `notices`) is refused with the sentence naming both versions, not
/// with the field it lacks.
#[test]
fn agents_of_versions_3_4_5_and_6_are_refused_by_name() {
    for (fixture, old) in [
        (FIXTURE_V3, "version 3"),
        (FIXTURE_V4, "version 4"),
        (FIXTURE_V5, "version 5"),
        (FIXTURE_V6, "version 6"),
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture);
        let text = std::fs::read_to_string(path).expect("an older version's fixture");
        let e = vramwarden::link::wire_checks::decode_view(text.as_bytes(), NOW)
            .expect_err("an older version is refused");
        assert!(
            e.contains(old) && e.contains("version 7") && e.contains("update the older one"),
            "{e}"
        );
    }
}

/// The events' checks bound every value: numbers must rise, and a time ahead of this
/// computer's clock, a GPU out of range or a figure that is not finite refuses the answer.
#[test]
fn the_checks_refuse_events_out_of_order_or_out_of_bounds() {
    let refused = |change: &dyn Fn(&mut WireView)| {
        let mut v = golden_view();
        change(&mut v);
        let body = serde_json::to_vec(&v).expect("json");
        vramwarden::link::wire_checks::decode_view(&body, NOW).expect_err("refused")
    };
    let e = refused(&|v| v.events[1].seq = 1);
    assert!(e.contains("events: number 1 follows 1"), "{e}");
    let e = refused(&|v| v.events[0].at_ms = NOW + 86_400_000);
    assert!(e.contains("events: a time"), "{e}");
    let e = refused(&|v| {
        if let EngineEventKind::OomForecast { full_in_s, .. } = &mut v.events[3].kind {
            *full_in_s = -1.0;
        }
    });
    assert!(e.contains("events: a time to full of"), "{e}");
    let e = refused(&|v| {
        if let EngineEventKind::OomForecastEnded { device_index, .. } = &mut v.events[4].kind {
            *device_index = 100_000;
        }
    });
    assert!(e.contains("events: a forecast on"), "{e}");
    let e = refused(&|v| {
        let last = v.events.last().cloned().expect("an event");
        v.events.extend((0..300).map(|i| WireEvent {
            seq: last.seq + 1 + i,
            ..last.clone()
        }));
    });
    assert!(e.contains("events"), "{e}");
}
