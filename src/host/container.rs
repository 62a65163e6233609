//! Container and pod names for a process: the runtime and container id from its cgroup path,
//! the Kubernetes pod (namespace, name, container) from the kubelet's pod log folders, and the
//! Docker container name from Docker's own config file when it is readable.
//!
//! Everything here reads files under roots that can be pointed elsewhere ([`Roots`]), so the
//! layouts of each runtime are tested with fixture trees (`tests/data/containers/`). Results
//! are cached per process identity (pid + start time) by [`ContainerResolver`]: the engine's
//! [`crate::host::procinfo::ProcReader`] resolves each process once, when it first reads it, and the
//! names ride on its [`crate::model::ProcInfo`] (table, detail pane, CSV, `/metrics`, rules).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::ProcessKey;

/// The container runtime a cgroup path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    /// Docker (`docker-<id>.scope`, `/docker/<id>`).
    Docker,
    /// containerd through the CRI (`cri-containerd-<id>.scope`).
    Containerd,
    /// CRI-O (`crio-<id>.scope`).
    Crio,
    /// Podman (`libpod-<id>.scope`).
    Podman,
    /// A bare 64-hex id under `kubepods` whose runtime the path does not say.
    Unknown,
}

/// Where a process runs, as far as its cgroup path tells.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct CgroupFacts {
    /// The runtime, when the process is in a container.
    pub runtime: Option<Runtime>,
    /// The 64-hex container id.
    pub container_id: Option<String>,
    /// The Kubernetes pod UID (dashes restored), when under `kubepods`.
    pub pod_uid: Option<String>,
}

/// Names of a process's container and pod (all optional).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct ContainerInfo {
    /// What the cgroup path says.
    pub cgroup: CgroupFacts,
    /// The container's name (Kubernetes container name, or Docker's name without the `/`).
    pub container: Option<String>,
    /// The pod's name.
    pub pod: Option<String>,
    /// The pod's namespace.
    pub namespace: Option<String>,
}

impl ContainerInfo {
    /// The label to show for the container: its name, else the first 12 digits of its id.
    pub fn container_label(&self) -> Option<String> {
        self.container.clone().or_else(|| {
            self.cgroup
                .container_id
                .as_ref()
                .map(|id| id.chars().take(12).collect())
        })
    }
}

fn is_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Reads the runtime, container id and pod UID from a `/proc/PID/cgroup` text (v1 or v2).
fn parse_cgroup(cgroup: &str) -> CgroupFacts {
    let mut f = CgroupFacts::default();
    for line in cgroup.lines() {
        // hierarchy-ID:controllers:path — the path itself may contain ':' (CRI-O's
        // `crio-conmon-…`), so split off the first two fields only.
        let path = line.splitn(3, ':').nth(2).unwrap_or("");
        let mut in_kubepods = false;
        for part in path.split('/') {
            if part.starts_with("kubepods") {
                in_kubepods = true;
            }
            // kubepods-burstable-pod<uid with _>.slice (systemd driver) or pod<uid> (cgroupfs).
            if in_kubepods && f.pod_uid.is_none() {
                let p = part.trim_end_matches(".slice");
                if let Some(i) = p.rfind("pod") {
                    let uid = p[i + 3..].replace('_', "-");
                    if uid.len() == 36 && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
                        f.pod_uid = Some(uid);
                    }
                }
            }
            let p = part.trim_end_matches(".scope");
            let (runtime, id) = if let Some(id) = p.strip_prefix("docker-") {
                (Runtime::Docker, id)
            } else if let Some(id) = p.strip_prefix("cri-containerd-") {
                (Runtime::Containerd, id)
            } else if let Some(id) = p.strip_prefix("crio-") {
                (Runtime::Crio, id)
            } else if let Some(id) = p.strip_prefix("libpod-") {
                (Runtime::Podman, id)
            } else if is_id(p) {
                let rt = if path.contains("/docker/") {
                    Runtime::Docker
                } else {
                    Runtime::Unknown
                };
                (rt, p)
            } else {
                continue;
            };
            if is_id(id) && f.container_id.is_none() {
                f.runtime = Some(runtime);
                f.container_id = Some(id.to_string());
            }
        }
        if f.container_id.is_some() {
            break;
        }
    }
    f
}

/// The files the resolver reads; each can point at a fixture tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    /// `/proc`.
    pub proc: PathBuf,
    /// `/var/log/pods` (kubelet: `<namespace>_<pod>_<uid>/<container>/N.log`).
    pub pod_logs: PathBuf,
    /// `/var/lib/docker/containers` (`<id>/config.v2.json`, readable by root).
    pub docker: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Self {
            proc: "/proc".into(),
            pod_logs: "/var/log/pods".into(),
            docker: "/var/lib/docker/containers".into(),
        }
    }
}

/// `(namespace, pod, container)` for a pod UID and container id from the pod log folders.
///
/// A pod's folder holds one folder per container name. With one container, that is the
/// name; with several, the container id is looked up in the kubelet's links beside the pod
/// folders (`../containers/<pod>_<ns>_<container>-<id>.log`), or in a log link inside the
/// container folder that names the id (the docker-shim layout).
fn pod_names(
    pod_logs: &Path,
    pod_uid: &str,
    container_id: Option<&str>,
) -> Option<(String, String, Option<String>)> {
    let entries = std::fs::read_dir(pod_logs).ok()?;
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        // <namespace>_<pod>_<uid>: namespaces and pod names cannot hold '_'.
        let mut parts = name.splitn(3, '_');
        let (Some(ns), Some(pod), Some(uid)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if uid != pod_uid {
            continue;
        }
        let pod_dir = e.path();
        let containers = container_dirs(&pod_dir);
        let container = match (containers.len(), container_id) {
            (1, _) => containers.into_iter().next(),
            // /var/log/containers/<pod>_<ns>_<container>-<id>.log names the container of each
            // id (CRI runtimes); the docker-shim layout links the log in the pod folder to
            // …/containers/<id>/<id>-json.log.
            (_, Some(id)) => container_by_kubelet_link(pod_logs, (ns, pod), id)
                .or_else(|| container_by_log_link(&pod_dir, containers, id)),
            _ => None,
        };
        return Some((ns.to_string(), pod.to_string(), container));
    }
    None
}

/// The names of the container folders in a pod's log folder.
fn container_dirs(pod_dir: &Path) -> Vec<String> {
    std::fs::read_dir(pod_dir)
        .map(|d| {
            d.flatten()
                .filter(|c| c.path().is_dir())
                .map(|c| c.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The name of container `id` of pod `pod` in namespace `ns`, from the kubelet's links beside
/// the pod folders (`../containers/<pod>_<ns>_<container>-<id>.log`).
fn container_by_kubelet_link(pod_logs: &Path, (ns, pod): (&str, &str), id: &str) -> Option<String> {
    let prefix = format!("{pod}_{ns}_");
    let suffix = format!("-{id}.log");
    pod_logs
        .parent()
        .and_then(|p| std::fs::read_dir(p.join("containers")).ok())
        .and_then(|d| {
            d.flatten().find_map(|f| {
                let n = f.file_name().to_string_lossy().into_owned();
                n.strip_prefix(&prefix)
                    .and_then(|r| r.strip_suffix(&suffix))
                    .map(str::to_string)
            })
        })
}

/// Of `containers` (folders in `pod_dir`), the one holding a log link whose target names
/// container `id` (the docker-shim layout).
fn container_by_log_link(pod_dir: &Path, containers: Vec<String>, id: &str) -> Option<String> {
    containers.into_iter().find(|c| {
        std::fs::read_dir(pod_dir.join(c)).is_ok_and(|mut d| {
            d.any(|f| {
                f.ok().is_some_and(|f| {
                    std::fs::read_link(f.path()).is_ok_and(|t| t.to_string_lossy().contains(id))
                })
            })
        })
    })
}

/// The container name from Docker's `config.v2.json` (`"Name": "/web"` → `web`).
fn docker_name(docker: &Path, id: &str) -> Option<String> {
    if !is_id(id) {
        return None;
    }
    let text = std::fs::read_to_string(docker.join(id).join("config.v2.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    let name = v.get("Name")?.as_str()?.trim_start_matches('/');
    (!name.is_empty()).then(|| name.to_string())
}

/// Resolves a process's container facts from its cgroup file and the name sources.
pub fn resolve(roots: &Roots, pid: u32) -> ContainerInfo {
    let cg = std::fs::read_to_string(roots.proc.join(pid.to_string()).join("cgroup"))
        .map(|t| parse_cgroup(&t))
        .unwrap_or_default();
    resolve_facts(roots, cg)
}

/// Resolves names for cgroup facts already read.
fn resolve_facts(roots: &Roots, cg: CgroupFacts) -> ContainerInfo {
    let mut info = ContainerInfo {
        cgroup: cg,
        ..ContainerInfo::default()
    };
    if let Some(uid) = info.cgroup.pod_uid.clone() {
        if let Some((ns, pod, c)) =
            pod_names(&roots.pod_logs, &uid, info.cgroup.container_id.as_deref())
        {
            info.namespace = Some(ns);
            info.pod = Some(pod);
            info.container = c;
        }
    }
    if info.container.is_none() && info.cgroup.runtime == Some(Runtime::Docker) {
        if let Some(id) = &info.cgroup.container_id {
            info.container = docker_name(&roots.docker, id);
        }
    }
    info
}

/// A cache of [`resolve`] by process identity: each process is resolved once in its life.
#[derive(Debug, Default)]
pub struct ContainerResolver {
    roots: Roots,
    cache: HashMap<ProcessKey, Arc<ContainerInfo>>,
}

impl ContainerResolver {
    /// A resolver reading under `roots`.
    pub fn new(roots: Roots) -> Self {
        Self {
            roots,
            cache: HashMap::new(),
        }
    }

    /// The facts of process `key` (cached).
    pub fn get(&mut self, key: ProcessKey) -> Arc<ContainerInfo> {
        let roots = &self.roots;
        self.cache
            .entry(key)
            .or_insert_with(|| Arc::new(resolve(roots, key.pid)))
            .clone()
    }

    /// The facts of process `key` whose `/proc/PID/cgroup` text the caller has already read
    /// (cached like [`ContainerResolver::get`]; the cgroup file is not read again).
    pub(crate) fn get_parsed(&mut self, key: ProcessKey, cgroup: &str) -> Arc<ContainerInfo> {
        let roots = &self.roots;
        self.cache
            .entry(key)
            .or_insert_with(|| Arc::new(resolve_facts(roots, parse_cgroup(cgroup))))
            .clone()
    }

    /// Drops entries of processes not in `alive`.
    pub fn retain(&mut self, alive: &dyn Fn(&ProcessKey) -> bool) {
        self.cache.retain(|k, _| alive(k));
    }

    /// Entries cached.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_paths_of_each_runtime() {
        let id = "0123456789abcdef".repeat(4);
        let c = parse_cgroup(&format!("0::/system.slice/docker-{id}.scope\n"));
        assert_eq!(c.runtime, Some(Runtime::Docker));
        assert_eq!(c.container_id.as_deref(), Some(id.as_str()));
        let c = parse_cgroup(&format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-{id}.scope\n"
        ));
        assert_eq!(c.runtime, Some(Runtime::Containerd));
        assert_eq!(
            c.pod_uid.as_deref(),
            Some("1b2c3d4e-0000-1111-2222-333344445555")
        );
        let c = parse_cgroup(&format!(
            "11:memory:/kubepods/besteffort/pod1b2c3d4e-0000-1111-2222-333344445555/{id}\n"
        ));
        assert_eq!(c.runtime, Some(Runtime::Unknown));
        assert!(c.pod_uid.is_some());
        let c = parse_cgroup(&format!("0::/machine.slice/libpod-{id}.scope/container\n"));
        assert_eq!(c.runtime, Some(Runtime::Podman));
        let c = parse_cgroup(&format!("0::/kubepods.slice/crio-{id}.scope"));
        assert_eq!(c.runtime, Some(Runtime::Crio));
        assert_eq!(
            parse_cgroup("0::/user.slice/user-1000.slice/session-2.scope"),
            CgroupFacts::default()
        );
        assert_eq!(
            parse_cgroup("garbage\n::\n0::/docker-xyz.scope"),
            CgroupFacts::default()
        );
    }
}
