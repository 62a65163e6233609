//! Container and pod names from fixture trees of each runtime's layout
//! (`tests/data/containers/<runtime>/{proc,log/pods,log/containers,docker}`).

use std::path::PathBuf;
use std::sync::Arc;

use vramwarden::host::container::{resolve, ContainerResolver, Roots, Runtime};
use vramwarden::model::ProcessKey;

fn roots(runtime: &str) -> Roots {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/containers")
        .join(runtime);
    Roots {
        proc: base.join("proc"),
        pod_logs: base.join("log/pods"),
        docker: base.join("docker"),
    }
}

#[test]
fn docker_name_from_its_config() {
    let c = resolve(&roots("docker"), 100);
    assert_eq!(c.cgroup.runtime, Some(Runtime::Docker));
    assert_eq!(
        c.cgroup.container_id.as_deref(),
        Some("d0".repeat(32).as_str())
    );
    assert_eq!(c.container.as_deref(), Some("web-frontend"));
    assert_eq!(c.pod, None);
    assert_eq!(c.container_label().as_deref(), Some("web-frontend"));
}

#[test]
fn kubernetes_containerd_pod_with_two_containers() {
    let r = roots("k8s-containerd");
    let c = resolve(&r, 200);
    assert_eq!(c.cgroup.runtime, Some(Runtime::Containerd));
    assert_eq!(
        c.cgroup.pod_uid.as_deref(),
        Some("1b2c3d4e-0000-1111-2222-333344445555")
    );
    assert_eq!(c.namespace.as_deref(), Some("ml"));
    assert_eq!(c.pod.as_deref(), Some("trainer-7d9f"));
    assert_eq!(c.container.as_deref(), Some("trainer"));
    let side = resolve(&r, 201);
    assert_eq!(side.pod.as_deref(), Some("trainer-7d9f"));
    assert_eq!(side.container.as_deref(), Some("metrics-sidecar"));
}

#[test]
fn kubernetes_crio_single_container_pod() {
    let c = resolve(&roots("k8s-crio"), 300);
    assert_eq!(c.cgroup.runtime, Some(Runtime::Crio));
    assert_eq!(c.namespace.as_deref(), Some("default"));
    assert_eq!(c.pod.as_deref(), Some("jupyter-0"));
    assert_eq!(c.container.as_deref(), Some("notebook"));
}

#[test]
fn kubernetes_cgroup_v1_cgroupfs_driver() {
    let c = resolve(&roots("k8s-cgroupv1"), 500);
    assert_eq!(c.cgroup.runtime, Some(Runtime::Unknown));
    assert_eq!(c.namespace.as_deref(), Some("batch"));
    assert_eq!(c.pod.as_deref(), Some("nightly-eval-x1"));
    assert_eq!(c.container.as_deref(), Some("eval"));
}

#[test]
fn podman_id_without_a_name_and_host_processes() {
    let c = resolve(&roots("podman"), 400);
    assert_eq!(c.cgroup.runtime, Some(Runtime::Podman));
    assert_eq!(c.container, None);
    // No name source: the label is the short id.
    assert_eq!(c.container_label().as_deref(), Some("f3f3f3f3f3f3"));
    let h = resolve(&roots("host"), 600);
    assert_eq!(h.cgroup.container_id, None);
    assert_eq!(h.container_label(), None);
    // A process that does not exist resolves to nothing, without an error.
    assert_eq!(resolve(&roots("host"), 999_999).container_label(), None);
}

#[test]
fn resolver_caches_by_identity_and_forgets_exited_processes() {
    let mut r = ContainerResolver::new(roots("docker"));
    let k = ProcessKey {
        pid: 100,
        start_time_ms: 1,
    };
    let a = r.get(k);
    let b = r.get(k);
    assert!(
        std::sync::Arc::ptr_eq(&a, &b),
        "the second lookup is the cached one"
    );
    assert_eq!(r.len(), 1);
    r.retain(&|_| false);
    assert!(r.is_empty());
}

/// A reader over a fixture runtime's `/proc` that resolves names under its folders.
fn reader(runtime: &str) -> vramwarden::host::procinfo::ProcReader {
    let r = roots(runtime);
    vramwarden::host::procinfo::ProcReader::new(r.proc.clone()).with_container_roots(r)
}

#[test]
fn the_engine_reader_puts_container_and_pod_names_on_the_process() {
    let i = reader("k8s-crio")
        .read(300)
        .expect("pid 300 in the fixture");
    assert_eq!(i.name, "jupyter-lab");
    assert_eq!(i.container_id.as_deref(), Some("e2".repeat(32).as_str()));
    assert_eq!(i.container_name.as_deref(), Some("notebook"));
    assert_eq!(i.pod.as_deref(), Some("default/jupyter-0"));
    assert_eq!(i.container_label().as_deref(), Some("notebook"));
    let d = reader("docker").read(100).expect("pid 100 in the fixture");
    assert_eq!(d.container_name.as_deref(), Some("web-frontend"));
    assert_eq!(d.pod, None);
}

/// Copies a fixture tree (files and folders) to `to`.
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("fixture folder").flatten() {
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).expect("copy");
        }
    }
}

#[test]
fn names_are_resolved_once_per_process_not_per_tick() {
    let tmp = tempfile::tempdir().expect("tempdir");
    copy_tree(&roots("k8s-crio").proc.join(".."), tmp.path());
    let r = Roots {
        proc: tmp.path().join("proc"),
        pod_logs: tmp.path().join("log/pods"),
        docker: tmp.path().join("docker"),
    };
    let mut rd =
        vramwarden::host::procinfo::ProcReader::new(r.proc.clone()).with_container_roots(r);
    let t0 = 1_000_000;
    let first = rd.read_at(300, t0).expect("pid 300");
    assert_eq!(first.pod.as_deref(), Some("default/jupyter-0"));
    // The pod's log folder goes away: later ticks (and a revalidation of the start time)
    // keep the names read the first time, without reading the folders again.
    std::fs::remove_dir_all(tmp.path().join("log/pods")).expect("rm");
    let again = rd
        .read_at(300, t0 + vramwarden::host::procinfo::REVALIDATE_MS + 1)
        .expect("pid 300");
    assert!(Arc::ptr_eq(&first, &again), "the cached facts");
    assert_eq!(again.pod.as_deref(), Some("default/jupyter-0"));
    // The PID is reused by a new process (another start time): it is resolved afresh.
    let stat = tmp.path().join("proc/300/stat");
    let text = std::fs::read_to_string(&stat).expect("stat");
    std::fs::write(&stat, text.replace(" 12345 ", " 99999 ")).expect("write stat");
    let new = rd
        .read_at(300, t0 + 3 * vramwarden::host::procinfo::REVALIDATE_MS)
        .expect("pid 300");
    assert_ne!(new.start_time_ms, first.start_time_ms);
    assert_eq!(new.pod, None, "no pod folder any more");
    assert_eq!(
        new.container_label().as_deref(),
        Some("e2e2e2e2e2e2"),
        "the id still comes from the cgroup"
    );
}

/// Rules on container and pod names over processes the fixture reader describes.
#[test]
fn a_per_container_quota_rule() {
    use vramwarden::act::rules::eval::{compile, Facts, RuleState, Target};
    use vramwarden::act::rules::{Conditions, Rule};
    use vramwarden::model::{DeviceSample, ProcessSample, Snapshot, MIB};
    let jupyter = reader("k8s-crio").read(300).expect("pid 300");
    let web = reader("docker").read(100).expect("pid 100");
    let host = Arc::new(vramwarden::model::ProcInfo {
        name: "python3".into(),
        ..Default::default()
    });
    // A second process in the notebook's container (a kernel).
    let kernel = Arc::new(vramwarden::model::ProcInfo {
        name: "ipykernel".into(),
        start_time_ms: jupyter.start_time_ms + 1,
        ..(*jupyter).clone()
    });
    let p = |pid: u32, gib: u64, info: &Arc<vramwarden::model::ProcInfo>| ProcessSample {
        pid,
        device_index: 0,
        used_bytes: Some(gib * 1024 * MIB),
        sm_util_pct: Some(50),
        info: Some(info.clone()),
        ..ProcessSample::default()
    };
    let snap = Snapshot {
        taken_at_ms: 10_000_000_000_000,
        devices: vec![DeviceSample::default()],
        processes: vec![
            p(300, 24, &jupyter),
            p(301, 8, &kernel),
            p(100, 30, &web),
            p(7, 40, &host),
        ],
    };
    let pids = |c: Conditions| -> Vec<u32> {
        let rule = Rule {
            name: "quota".into(),
            conditions: c,
            ..Rule::default()
        };
        assert!(rule.problems().is_empty(), "{:?}", rule.problems());
        let mut st = RuleState::default();
        st.observe(&snap);
        let mut v: Vec<u32> = st
            .evaluate(&compile(&[rule]), &snap, &Facts::default())
            .into_iter()
            .filter_map(|p| match p.target {
                Target::Process { key, .. } => Some(key.0.pid),
                Target::Device(_) => None,
            })
            .collect();
        v.sort_unstable();
        v
    };
    let quota = |pod: Option<&str>, container: Option<&str>, gib: f64| Conditions {
        pod_glob: pod.map(String::from),
        container_glob: container.map(String::from),
        process_memory_min_mib: Some(gib * 1024.0),
        ..Conditions::default()
    };
    // "Any process in a jupyter-* pod above 20 GiB": the notebook only, not the host's
    // 40 GiB process nor the Docker container.
    assert_eq!(pids(quota(Some("jupyter-*"), None, 20.0)), vec![300]);
    assert_eq!(
        pids(quota(Some("jupyter-*"), None, 25.0)),
        Vec::<u32>::new()
    );
    // With a '/', the namespace is part of what is matched.
    assert_eq!(pids(quota(Some("default/*"), None, 1.0)), vec![300, 301]);
    assert_eq!(pids(quota(Some("ml/*"), None, 1.0)), Vec::<u32>::new());
    // Container names of either runtime; `*` is any container, never a host process.
    assert_eq!(pids(quota(None, Some("web-*"), 20.0)), vec![100]);
    assert_eq!(pids(quota(None, Some("note*"), 20.0)), vec![300]);
    assert_eq!(pids(quota(None, Some("*"), 1.0)), vec![100, 300, 301]);
    // A container without a resolved name is matched by its id.
    assert_eq!(pids(quota(None, Some("e2e2*"), 1.0)), vec![300, 301]);
    // The container's total: 24 + 8 GiB for the notebook's, 30 GiB for the web container's;
    // the host's 40 GiB process is in no container.
    let total = |gib: f64| Conditions {
        container_total_min_mib: Some(gib * 1024.0),
        ..Conditions::default()
    };
    assert_eq!(pids(total(30.0)), vec![100, 300, 301]);
    assert_eq!(pids(total(31.0)), vec![300, 301]);
    assert_eq!(pids(total(33.0)), Vec::<u32>::new());
}

/// The names ride through the session log: its CSV export, its replay in the window, and
/// `snapshot`'s JSON and CSV.
#[test]
fn names_reach_the_session_csv_the_replay_and_snapshot_output() {
    use vramwarden::engine::view::Monitor;
    use vramwarden::engine::{Engine, RecordTo};
    use vramwarden::model::{DeviceSample, ProcessSample, Snapshot, MIB};
    use vramwarden::session::csv_export::{export, Table};
    use vramwarden::session::reader::SessionData;
    let jupyter = reader("k8s-crio").read(300).expect("pid 300");
    let web = reader("docker").read(100).expect("pid 100");
    let host = Arc::new(vramwarden::model::ProcInfo {
        name: "Xorg".into(),
        ..Default::default()
    });
    let t0 = 1_796_256_000_000;
    let snap = |t: i64| Snapshot {
        taken_at_ms: t,
        devices: vec![DeviceSample {
            uuid: "GPU-0".into(),
            memory_total_bytes: Some(80 << 30),
            memory_used_bytes: Some(60 << 30),
            ..DeviceSample::default()
        }],
        processes: [(300, &jupyter), (100, &web), (7, &host)]
            .into_iter()
            .map(|(pid, info)| ProcessSample {
                pid,
                used_bytes: Some(1024 * MIB),
                info: Some(info.clone()),
                ..ProcessSample::default()
            })
            .collect(),
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.vwlog");
    let shared = vramwarden::engine::shared::Shared::new(Monitor::new(1000, 100));
    let mut e = Engine::new(shared, RecordTo::File(path.clone()), 1000);
    for i in 0..3 {
        e.tick(snap(t0 + i * 1000), t0 + i * 1000);
    }
    e.finish().expect("closed");
    let s = SessionData::open(&path).expect("open");
    let mut out = Vec::new();
    export(&s, Table::Processes, &mut out, &mut |_| true).expect("export");
    let text = String::from_utf8(out).expect("utf-8");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (pid, container, pod) = (col("pid"), col("container"), col("pod"));
    let mut seen = std::collections::BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), header.len(), "{l}");
        seen.insert(
            f[pid].to_string(),
            (f[container].to_string(), f[pod].to_string()),
        );
    }
    assert_eq!(seen["300"], ("notebook".into(), "default/jupyter-0".into()));
    assert_eq!(seen["100"], ("web-frontend".into(), String::new()));
    assert_eq!(seen["7"], (String::new(), String::new()));
    // The replay's rows (the window's table and detail pane on a recorded session).
    let m = vramwarden::engine::replay::session(&s);
    let row = m.rows().find(|r| r.key.pid == 300).expect("row");
    assert_eq!(row.info.container_name.as_deref(), Some("notebook"));
    assert_eq!(row.info.pod.as_deref(), Some("default/jupyter-0"));
    // `snapshot --format json` and `--format csv`.
    let one = snap(t0);
    let json: serde_json::Value =
        serde_json::from_str(&vramwarden::front::cli::snapshot_out::to_json(&one).expect("json"))
            .expect("parse");
    assert_eq!(json["processes"][0]["container"], "notebook");
    assert_eq!(json["processes"][0]["pod"], "default/jupyter-0");
    assert_eq!(json["processes"][2]["container"], serde_json::Value::Null);
    let mut csv = Vec::new();
    vramwarden::front::cli::snapshot_out::write_csv(
        &one,
        vramwarden::front::cli::snapshot_out::CsvTable::Processes,
        &mut csv,
    )
    .expect("csv");
    let csv = String::from_utf8(csv).expect("utf-8");
    let second = csv.lines().nth(1).expect("a row");
    assert!(
        second.ends_with(",notebook,default/jupyter-0,running"),
        "{second}"
    );
}
