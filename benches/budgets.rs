//! The budgets of the foundation issue, measured with criterion:
//! - history: 24 h at 1 Hz for 8 GPUs and 200 processes fits in ≤ 64 MiB (counted by the
//!   allocator, printed before the timings); appending one snapshot ≤ 20 µs;
//! - one full UI frame (all panes, that 24 h history loaded, no rendering) ≤ 4 ms of CPU.

use std::hint::black_box;

use criterion::{criterion_group, Criterion};
use vramwarden::engine::view::Monitor;
use vramwarden::front::gui::app::UiState;
use vramwarden::front::gui::{Backend, VramApp};
use vramwarden::model::history::History;
use vramwarden::model::{Snapshot, UnixMs};
use vramwarden::source::sim::SimSource;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
#[path = "support/fleet_log.rs"]
mod fleet_log;

const T0: UnixMs = 1_796_000_000_000;
const DAY: i64 = 86_400;

fn fleet_snapshots(n: i64) -> impl Iterator<Item = Snapshot> {
    let sim = SimSource::fleet(T0, 8, 200);
    (0..n).map(move |i| sim.at(T0 + i * 1000))
}

fn day_monitor() -> Monitor {
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, DAY as usize);
    for s in fleet_snapshots(DAY) {
        let t = s.taken_at_ms;
        engine_state.apply(&mut m, s, t);
    }
    fill_activity_and_events(&mut m);
    m
}

/// A View's lists as full as the engine keeps them: 1 000 activity entries and 256 events
/// (leaks started, suspected OOMs with holders, rule activity), as after a busy day.
fn fill_activity_and_events(m: &mut Monitor) {
    use vramwarden::act::rules::action::{Activity, Entry, Outcome};
    use vramwarden::act::rules::eval::Target;
    use vramwarden::engine::events::{EngineEvent, EngineEventKind};
    use vramwarden::model::{Origin, ProcessKey};
    use vramwarden::session::{LeakInfo, OomHolder};
    let entry = |i: u32| Activity {
        unix_ms: T0 + i as i64 * 1000,
        rule: format!("free idle notebooks {i}"),
        target: Target::process(
            (
                ProcessKey {
                    pid: 1000 + i,
                    start_time_ms: T0,
                },
                i % 8,
            ),
            None,
            Some(4 << 30),
            Origin::Simulated,
        ),
        action: "release PyTorch's cache".into(),
        outcome: Outcome::WouldAct,
        detail: format!("dry run: would release 3.2 GiB from pid {}", 1000 + i),
        entry: Entry::Action,
    };
    let holder = |i: u32| OomHolder {
        pid: 2000 + i,
        start_time_ms: T0,
        name: format!("python train_{i}.py"),
        user: "alice".into(),
        mib: 9000.0 + i as f64,
        grown_1m_mib: Some(512.0),
        releasable_mib: None,
        grown_recent_mib: Some(2048.0),
        grown_over_s: Some(90.0),
        cause_share_pct: Some(80.0),
        likely_cause: i == 0,
    };
    m.activity = (0..1000).map(|i| std::sync::Arc::new(entry(i))).collect();
    m.events = (0..256u32)
        .map(|i| {
            std::sync::Arc::new(EngineEvent {
                seq: u64::from(i) + 1,
                at_ms: T0 + i as i64 * 1000,
                kind: match i % 3 {
                    0 => EngineEventKind::LeakStarted {
                        leak: LeakInfo {
                            pid: 3000 + i,
                            start_time_ms: T0,
                            device_index: i % 8,
                            name: format!("python leak_{i}.py"),
                            user: "bob".into(),
                            ghost: false,
                            since_ms: T0,
                            rate_mib_per_min: 120.0,
                            why: "steady growth: 120 MiB/min over 10 min".into(),
                        },
                    },
                    1 => EngineEventKind::OomSuspected {
                        device_index: i % 8,
                        used_pct: 99.0,
                        victims: vec![holder(i)],
                        holders: (0..8).map(holder).collect(),
                    },
                    _ => EngineEventKind::Activity {
                        entry: entry(i),
                        from_command: false,
                    },
                },
            })
        })
        .collect();
}

fn report_memory() {
    let before = counting_alloc::live_bytes();
    let mut h = History::new(DAY as usize);
    for s in fleet_snapshots(DAY) {
        h.push(&s);
    }
    let after = counting_alloc::live_bytes();
    let samples = DAY as usize * (8 + 200);
    println!(
        "history 24h @1Hz, 8 GPUs + 200 processes: {:.1} MiB allocated ({:.2} bytes/sample over {samples} samples; own accounting {:.1} MiB)",
        (after - before) as f64 / (1 << 20) as f64,
        (after - before) as f64 / samples as f64,
        h.heap_bytes() as f64 / (1 << 20) as f64
    );
    black_box(&h);
}

fn bench_history(c: &mut Criterion) {
    let mut h = History::new(DAY as usize);
    let snaps: Vec<Snapshot> = fleet_snapshots(DAY + 4096).collect();
    for s in &snaps[..DAY as usize] {
        h.push(s);
    }
    let mut i = DAY as usize;
    // Steady state: the history is full, every push evicts.
    c.bench_function("history_append_8gpu_200proc_full_24h", |b| {
        b.iter(|| {
            let s = &snaps[DAY as usize + (i - DAY as usize) % 4096];
            let mut s2 = s.clone();
            s2.taken_at_ms = T0 + i as i64 * 1000;
            i += 1;
            h.push(black_box(&s2));
        })
    });
    let snap = snaps[0].clone();
    c.bench_function("snapshot_clone_baseline", |b| {
        b.iter(|| black_box(snap.clone()))
    });
}

fn frame_app(select: bool) -> VramApp {
    let m = day_monitor();
    let key = m
        .rows()
        .find(|r| r.key.pid == 10_001)
        .map(|r| r.series_key());
    let mut app = VramApp::with_backend(
        Backend::detached(m, vramwarden::source::SourceKind::demo()),
        UiState {
            window: vramwarden::front::gui::graph::Window::All,
            ..UiState::default()
        },
    )
    .with_fixed_now(T0 + (DAY - 1) * 1000);
    if select {
        app.selected = key;
    }
    app
}

fn raw_input() -> egui::RawInput {
    egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(1600.0, 1000.0),
        )),
        ..Default::default()
    }
}

fn bench_ui(c: &mut Criterion) {
    let ctx = egui::Context::default();
    let mut app = frame_app(true);
    // Warm up: first frames size grids and fill the line caches.
    for _ in 0..3 {
        let _ = ctx.run_ui(raw_input(), |ui| app.draw(ui));
    }
    c.bench_function("ui_frame_all_panes_24h_cached", |b| {
        b.iter(|| black_box(ctx.run_ui(raw_input(), |ui| app.draw(ui))))
    });
    // What a window pays once per sample to draw without holding the engine's lock: a copy
    // of the whole state (24 h of 8 GPUs and 200 processes; sealed history chunks shared).
    let shared = vramwarden::engine::shared::Shared::new(day_monitor());
    c.bench_function("view_copy_after_a_write_24h_8gpu_200proc", |b| {
        b.iter(|| {
            drop(shared.write());
            black_box(shared.view())
        })
    });
    // The frame after new data arrived: every line of the GPU graph and the detail graph is
    // decimated again from the 24 h history (once per sample interval).
    c.bench_function("ui_frame_all_panes_24h_rebuild_lines", |b| {
        b.iter(|| {
            app.invalidate_caches();
            black_box(ctx.run_ui(raw_input(), |ui| app.draw(ui)))
        })
    });
    // A zoom or a pan: every frame a new time range (a 6 h window moved by 1 min), so every
    // line and bucket of the GPU graph and the metric plots is computed afresh.
    let mut step = 0i64;
    c.bench_function("ui_frame_all_panes_24h_after_zoom_or_pan", |b| {
        b.iter(|| {
            step = (step + 1) % 600;
            let from = T0 + 3_600_000 + step * 60_000;
            app.set_graph_range(Some((from, from + 6 * 3_600_000)));
            black_box(ctx.run_ui(raw_input(), |ui| app.draw(ui)))
        })
    });
}

/// Opening a 24 h session (8 GPUs × 200 processes) from the window: the file is read on a
/// worker thread, so no frame on the UI thread may take longer than one frame (16 ms).
fn report_open_session_frames() {
    let dir = std::env::temp_dir().join(format!("vramwarden-open-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("day.vwlog");
    let bytes = write_day(&path, DAY);
    let ctx = egui::Context::default();
    let mut app = VramApp::with_backend(
        Backend::detached(Monitor::new(1000, 10), vramwarden::source::SourceKind::Nvml),
        UiState::default(),
    );
    let _ = ctx.run_ui(raw_input(), |ui| app.draw(ui));
    let started = std::time::Instant::now();
    app.open_session(path.clone());
    let mut times: Vec<std::time::Duration> = Vec::new();
    while app.view.is_none() && started.elapsed() < std::time::Duration::from_secs(120) {
        let t = std::time::Instant::now();
        let _ = ctx.run_ui(raw_input(), |ui| app.draw(ui));
        times.push(t.elapsed());
        std::thread::sleep(std::time::Duration::from_millis(16));
    }
    let frames = times.len();
    let worst = times.iter().max().copied().unwrap_or_default();
    let mut sorted = times.clone();
    sorted.sort();
    let p95 = sorted.get(frames * 95 / 100).copied().unwrap_or_default();
    let over = times.iter().filter(|t| t.as_millis() >= 16).count();
    let opened = started.elapsed();
    // The first frame that draws the opened session (its lines are decimated then).
    let t = std::time::Instant::now();
    let _ = ctx.run_ui(raw_input(), |ui| app.draw(ui));
    println!(
        "open a 24 h session ({:.1} MB): on screen after {:.2} s; {frames} frames meanwhile (p95 {:.2} ms, the longest {:.2} ms at frame {}, {over} at 16 ms or more); the first frame of the session {:.2} ms",
        bytes as f64 / 1e6,
        opened.as_secs_f64(),
        p95.as_secs_f64() * 1000.0,
        worst.as_secs_f64() * 1000.0,
        times.iter().position(|t| *t == worst).unwrap_or(0),
        t.elapsed().as_secs_f64() * 1000.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn write_day(path: &std::path::Path, secs: i64) -> u64 {
    let _ = fleet_log::write(path, T0, secs);
    std::fs::metadata(path).map_or(0, |m| m.len())
}

fn bench_session(c: &mut Criterion) {
    use vramwarden::session::csv_export::{export, Table};
    use vramwarden::session::reader::SessionData;
    use vramwarden::session::writer::SessionWriter;
    let dir = std::env::temp_dir().join(format!("vramwarden-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let day = dir.join("day.vwlog");
    let _ = std::fs::remove_file(&day);
    let t = std::time::Instant::now();
    let bytes = write_day(&day, DAY);
    println!(
        "session 24h @1Hz, 8 GPUs + 200 processes: {:.1} MiB on disk, {:.1} bytes per device-sample (recorded in {:.1} s)",
        bytes as f64 / (1 << 20) as f64,
        bytes as f64 / (DAY as f64 * 8.0),
        t.elapsed().as_secs_f64()
    );
    // Writing one sample (the sample record; fsync every 5 s is amortised in).
    let snaps: Vec<Snapshot> = fleet_snapshots(4096)
        .map(|mut s| {
            for p in &mut s.processes {
                p.info = p.info.take();
            }
            s
        })
        .collect();
    let w_path = dir.join("w.vwlog");
    let _ = std::fs::remove_file(&w_path);
    let header = vramwarden::session::Header {
        format_version: 1,
        app_version: "bench".into(),
        host: "bench".into(),
        source: "Simulated".into(),
        driver_version: None,
        nvml_version: None,
        started_ms: T0,
        interval_ms: 1000,
        devices: Vec::new(),
    };
    if let Ok(mut w) = SessionWriter::create(&w_path, &header) {
        let mut i = 0usize;
        c.bench_function("session_write_sample_8gpu_200proc", |b| {
            b.iter(|| {
                let mut s = snaps[i % snaps.len()].clone();
                s.taken_at_ms = T0 + i as i64 * 1000;
                i += 1;
                let _ = w.write_snapshot(black_box(&s));
            })
        });
    }
    let mut g = c.benchmark_group("session_open");
    g.sample_size(10);
    g.bench_function("open_24h_8gpu_200proc_index_only", |b| {
        b.iter(|| black_box(SessionData::open(&day).map(|s| s.len()).unwrap_or(0)))
    });
    g.bench_function("open_24h_8gpu_200proc_replay_for_gui", |b| {
        b.iter(|| {
            black_box(
                SessionData::open(&day)
                    .map(|s| vramwarden::engine::replay::session(&s).history.len())
                    .unwrap_or(0),
            )
        })
    });
    g.finish();
    report_open_memory(&day);
    if let Ok(data) = SessionData::open(&day) {
        for table in [Table::Devices, Table::Processes] {
            let t = std::time::Instant::now();
            let mut sink = std::io::sink();
            let rows = export(&data, table, &mut sink, &mut |_| true).unwrap_or(0);
            let s = t.elapsed().as_secs_f64();
            println!(
                "CSV export of the 24h session, {} table: {rows} rows in {s:.2} s = {:.2} M rows/s",
                table.name(),
                rows as f64 / s / 1e6
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The memory an opened session holds (counted by the allocator): the replayed View (its
/// history and rows), and the file's bytes and index the window keeps beside it for export.
fn report_open_memory(day: &std::path::Path) {
    use vramwarden::session::reader::SessionData;
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    let before = counting_alloc::live_bytes();
    if let Ok(data) = SessionData::open(day) {
        let file = counting_alloc::live_bytes().saturating_sub(before);
        let m = vramwarden::engine::replay::session(&data);
        let all = counting_alloc::live_bytes().saturating_sub(before);
        println!(
            "session 24h opened: the replayed View {:.1} MiB (history and rows), the file's bytes and index {:.1} MiB",
            mib(all.saturating_sub(file)),
            mib(file)
        );
        black_box(&m);
    }
}

fn bench_leak(c: &mut Criterion) {
    use vramwarden::detect::leak::{LeakSettings, LeakTracker};
    let s = LeakSettings::default();
    // Steady state with a full 600 s window: a plateau after warm-up (the detector scans its
    // run every tick), and a leak in progress (Theil–Sen every tick).
    for (name, f) in [
        (
            "leak_update_plateau_full_window",
            (|t: i64| {
                if t < 4 {
                    500.0 + 1500.0 * t as f64
                } else {
                    6644.0
                }
            }) as fn(i64) -> f64,
        ),
        ("leak_update_leaking_full_window", |t: i64| {
            500.0 + 32.0 * t as f64
        }),
        ("leak_update_idle", |_t: i64| 8192.0),
    ] {
        let mut tr = LeakTracker::default();
        for t in 0..700 {
            tr.update(t * 1000, f(t), &s);
        }
        let mut t = 700i64;
        c.bench_function(name, |b| {
            b.iter(|| {
                t += 1;
                black_box(tr.update(t * 1000, f(t), &s))
            })
        });
    }
}

/// The engine's whole memory watch per tick over 8 GPUs × 200 processes in steady state: every
/// series' leak tracker, the OOM forecast and the OOM post-mortem watch (divide by 1 600 + 8
/// series for the cost per process per tick).
fn bench_leak_watch(c: &mut Criterion) {
    use vramwarden::detect::leak_watch::LeakWatch;
    use vramwarden::detect::oom_watch::OomWatch;
    let mut leaks = LeakWatch::default();
    let mut ooms = OomWatch::default();
    let mut snaps: Vec<Snapshot> = fleet_snapshots(900).collect();
    for s in &mut snaps[..700] {
        leaks.observe(s);
        leaks.forecast(s);
        ooms.observe(s);
    }
    // Time moves on: the last 200 samples again and again, each with a new time (a clone per
    // tick, as `snapshot_clone_baseline` measures).
    let mut tick = 700i64;
    c.bench_function("leak_watch_tick_8gpu_200proc", |b| {
        b.iter(|| {
            let mut s = snaps[700 + (tick % 200) as usize].clone();
            s.taken_at_ms = T0 + tick * 1000;
            tick += 1;
            let e = leaks.observe(&s);
            leaks.forecast(&mut s);
            black_box((e, ooms.observe(&s)))
        })
    });
}

/// The OOM forecast alert's share of a tick: budget < 1 µs per GPU (8 GPUs, 200 processes,
/// the forecast set on every GPU, the growing processes known).
fn bench_forecast_alert(c: &mut Criterion) {
    use vramwarden::detect::forecast_alert::ForecastWatch;
    let mut leaks = vramwarden::detect::leak_watch::LeakWatch::default();
    let mut snaps: Vec<Snapshot> = fleet_snapshots(900).collect();
    for s in &mut snaps {
        leaks.observe(s);
        leaks.forecast(s);
    }
    let leaking = leaks.leaking_since();
    let growing = || leaking.keys().copied().collect();
    let since = |d: u32| leaks.forecast_growth_since(d);
    let mut watch = ForecastWatch::new(10.0);
    let mut tick = 700i64;
    c.bench_function("forecast_alert_tick_8gpu_200proc", |b| {
        b.iter(|| {
            let s = &mut snaps[700 + (tick % 200) as usize];
            s.taken_at_ms = T0 + tick * 1000;
            tick += 1;
            black_box(watch.observe(s, &growing, &since))
        })
    });
}

/// Rules are compiled once per settings change: a tick's evaluation of a regex rule over 8 GPUs
/// and 200 processes must not compile anything (it did, per process, before).
fn bench_rules(c: &mut Criterion) {
    use vramwarden::act::rules::eval::{compile, Facts, RuleState};
    use vramwarden::act::rules::{Conditions, Rule};
    let rules = vec![Rule {
        name: "notebooks".into(),
        conditions: Conditions {
            cmdline_regex: Some(r"(\w{200}|x)+ipykernel".into()),
            name_regex: Some("^python".into()),
            process_memory_min_mib: Some(1.0),
            ..Conditions::default()
        },
        ..Rule::default()
    }];
    let compiled = compile(&rules);
    let snap = fleet_snapshots(1).next().expect("snapshot");
    let mut st = RuleState::default();
    let facts = Facts::default();
    c.bench_function("rules_evaluate_regex_rule_8gpu_200proc", |b| {
        b.iter(|| {
            st.observe(&snap);
            black_box(st.evaluate(&compiled, &snap, &facts))
        })
    });
}

/// One `/metrics` scrape (text format) of the agent with 8 GPUs × 200 processes (and a
/// 1 600-process worst case, every series emitted), with leaks flagged.
fn bench_scrape(c: &mut Criterion) {
    use vramwarden::front::agent::metrics::{render, Context, Format};
    use vramwarden::front::agent::stats::AgentStats;
    for procs in [200u32, 1600] {
        let sim = SimSource::fleet(T0, 8, procs);
        let mut engine_state = vramwarden::engine::state::EngineState::default();
        let mut m = Monitor::new(1000, 600);
        let mut w = vramwarden::detect::leak_watch::LeakWatch::default();
        for i in 0..600 {
            let s = sim.at(T0 + i * 1000);
            let t = s.taken_at_ms;
            for e in w.observe(&s) {
                vramwarden::detect::leak_watch::record_event(&mut m.leaks, &mut m.ooms, &e, None);
            }
            engine_state.apply(&mut m, s, t);
        }
        w.refresh(&mut m.growing, &mut m.leaks);
        let stats = AgentStats::default();
        let text = render(
            &m,
            Context {
                stats: &stats,
                max_processes: procs as usize,
                now_ms: T0 + 600_000,
            },
            Format::Text,
        );
        eprintln!(
            "scrape 8 GPUs × {procs} processes: {} bytes, {} lines, {} leaking",
            text.len(),
            text.lines().count(),
            m.leaks.iter().filter(|l| l.ended_ms.is_none()).count()
        );
        c.bench_function(&format!("scrape_metrics_8gpu_{procs}proc"), |b| {
            b.iter(|| {
                black_box(render(
                    &m,
                    Context {
                        stats: &stats,
                        max_processes: procs as usize,
                        now_ms: T0 + 600_000,
                    },
                    Format::Text,
                ))
            })
        });
    }
}

/// A View of 8 GPUs × 200 processes, 600 s of history (the agent's side of `/api/view`).
fn wire_monitor() -> Monitor {
    let sim = SimSource::fleet(T0, 8, 200);
    let mut engine_state = vramwarden::engine::state::EngineState::default();
    let mut m = Monitor::new(1000, 3600);
    for i in 0..600 {
        let s = sim.at(T0 + i * 1000);
        let t = s.taken_at_ms;
        engine_state.apply(&mut m, s, t);
    }
    m
}

/// Serving one poll of `/api/view` (the newest tick after `since`) and the first one (the
/// whole 600 s), 8 GPUs × 200 processes: the View made and serialized.
fn bench_api_view(c: &mut Criterion) {
    use vramwarden::link::wire::WireView;
    let m = wire_monitor();
    let since = m.history.end_tick() - 1;
    let body = serde_json::to_vec(&WireView::of(&m, since, 4096)).expect("json");
    let first = serde_json::to_vec(&WireView::of(&m, 0, 4096)).expect("json");
    eprintln!(
        "api_view 8 GPUs × 200 processes: a poll {} bytes, the first (600 ticks) {} bytes",
        body.len(),
        first.len()
    );
    c.bench_function("api_view", |b| {
        b.iter(|| black_box(serde_json::to_vec(&WireView::of(&m, since, 4096))))
    });
    c.bench_function("api_view_first_600_ticks", |b| {
        b.iter(|| black_box(serde_json::to_vec(&WireView::of(&m, 0, 4096))))
    });
}

/// Decoding and checking one poll of `/api/view` (8 GPUs × 200 processes) in the window.
fn bench_link_decode(c: &mut Criterion) {
    use vramwarden::link::wire::WireView;
    let m = wire_monitor();
    let since = m.history.end_tick() - 1;
    let body = serde_json::to_vec(&WireView::of(&m, since, 4096)).expect("json");
    let now = T0 + 600_000;
    vramwarden::link::wire_checks::decode_view(&body, now).expect("a good answer");
    c.bench_function("link_decode", |b| {
        b.iter(|| black_box(vramwarden::link::wire_checks::decode_view(&body, now)))
    });
}

/// The processes' CPU and resident memory per tick for 3 live processes: as the engine reads
/// them (each one's CPU-time clock and its `statm` kept open), through `stat` files kept open
/// (where the clocks cannot be used), and `stat` opened by path at every read for comparison.
fn bench_proc_usage(c: &mut Criterion) {
    use vramwarden::host::proc_usage::{parse_stat_usage, ProcUsage};
    use vramwarden::model::{Origin, ProcInfo, ProcessSample};
    let mut children: Vec<std::process::Child> = (0..3)
        .filter_map(|_| std::process::Command::new("sleep").arg("600").spawn().ok())
        .collect();
    let snap = Snapshot {
        taken_at_ms: 0,
        devices: Vec::new(),
        processes: children
            .iter()
            .map(|ch| ProcessSample {
                pid: ch.id(),
                origin: Origin::Live,
                info: Some(std::sync::Arc::new(ProcInfo {
                    start_time_ms: 1,
                    ..ProcInfo::default()
                })),
                ..ProcessSample::default()
            })
            .collect(),
    };
    // One tick a second of `usage` over the three, as the engine's.
    let mut ticks = |name: &str, mut usage: ProcUsage| {
        let mut t = 0;
        c.bench_function(name, |b| {
            b.iter(|| {
                let mut s = snap.clone();
                t += 1000;
                s.taken_at_ms = t;
                usage.sample(&mut s);
                black_box(s.processes[0].rss_bytes)
            })
        });
    };
    ticks("proc_usage_3_processes_kept_files", ProcUsage::default());
    // The same through `stat` files (a `/proc` that is not this process's own: links to the
    // three), as where the CPU-time clocks cannot be used.
    let links = std::env::temp_dir().join(format!("vramwarden-bench-proc-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&links);
    for ch in &children {
        let _ = std::os::unix::fs::symlink(
            format!("/proc/{}", ch.id()),
            links.join(ch.id().to_string()),
        );
    }
    ticks(
        "proc_usage_3_processes_kept_stat_files",
        ProcUsage::new(&links),
    );
    let _ = std::fs::remove_dir_all(&links);
    c.bench_function("proc_usage_3_processes_opened_by_path", |b| {
        b.iter(|| {
            let s = snap.clone();
            for p in &s.processes {
                let path = std::path::Path::new("/proc")
                    .join(p.pid.to_string())
                    .join("stat");
                black_box(
                    vramwarden::host::procinfo::read_lossy(&path)
                        .and_then(|x| parse_stat_usage(&x)),
                );
            }
        })
    });
    for ch in &mut children {
        let _ = ch.kill();
        let _ = ch.wait();
    }
}

criterion_group!(
    benches,
    bench_proc_usage,
    bench_api_view,
    bench_link_decode,
    bench_scrape,
    bench_history,
    bench_ui,
    bench_session,
    bench_leak,
    bench_leak_watch,
    bench_forecast_alert,
    bench_rules
);

fn main() {
    report_memory();
    report_open_session_frames();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
