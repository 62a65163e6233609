//! Container and pod names from fixture trees of each runtime's layout
//! (`tests/data/containers/<runtime>/{proc,log/pods,log/containers,docker}`).

use std::path::PathBuf;

use vramwarden::container::{resolve, ContainerResolver, Roots, Runtime};
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
