//! A real Prometheus server (`/usr/bin/prometheus`, Debian's `prometheus` package, installed by
//! `.ci/run`) scrapes `vramwarden --demo agent` every second; PromQL through its HTTP API returns
//! the agent's values, the shipped alert rules load and evaluate, every expression of the
//! shipped Grafana dashboard evaluates, and promtool accepts the rules and a scrape.

#[path = "agent_support/mod.rs"]
mod agent_support;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agent_support::{get, request, wait_for, AgentProc};

const PROMETHEUS: &str = "/usr/bin/prometheus";
const PROMTOOL: &str = "/usr/bin/promtool";

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn need(tool: &str) {
    assert!(
        Path::new(tool).exists(),
        "{tool} is missing: install Debian's `prometheus` package (apt-get install -y prometheus), as .ci/run does"
    );
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Prom {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn start_prometheus(target: SocketAddr) -> Prom {
    need(PROMETHEUS);
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = repo("packaging/prometheus/vramwarden-rules.yml");
    let cfg = dir.path().join("prometheus.yml");
    let mut f = std::fs::File::create(&cfg).expect("config");
    write!(
        f,
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: vramwarden\n    static_configs:\n      - targets: ['{target}']\n",
        rules.display()
    )
    .expect("write config");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let child = Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let p = Prom {
        child,
        addr,
        _dir: dir,
    };
    wait_for(Duration::from_secs(60), "Prometheus to be ready", || {
        std::net::TcpStream::connect(addr).ok()?;
        (get(addr, "/-/ready").status == 200).then_some(())
    });
    p
}

/// An instant query: the result vector (panics on a PromQL error).
fn query(p: &Prom, q: &str) -> Vec<serde_json::Value> {
    let r = get(p.addr, &format!("/api/v1/query?query={}", encode(q)));
    let v = r.json();
    assert_eq!(v["status"], "success", "{q}: {v}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn value(s: &serde_json::Value) -> f64 {
    s["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("a sample value")
}

/// Every `"expr"` string of the dashboard, with Grafana's variables filled in as Grafana does
/// when one host and one GPU are picked in the selectors (a single value is put in as it is;
/// `$__rate_interval` and `$__range` get fixed windows).
fn dashboard_exprs(host: &str, gpu: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo("packaging/grafana/vramwarden-grafana-dashboard.json"))
        .expect("the dashboard");
    let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            let e = t["expr"].as_str().expect("expr");
            out.push(
                e.replace("$Hostname", host)
                    .replace("$gpu", gpu)
                    .replace("$__rate_interval", "1m")
                    .replace("$__range", "5m"),
            );
        }
    }
    out
}

#[test]
fn prometheus_scrapes_the_agent_and_every_shipped_expression_evaluates() {
    need(PROMTOOL);
    // Samples every 2 s, scrapes every 1 s: every sample is scraped at least once.
    let a = AgentProc::start("", &["--no-record", "--interval", "2s"]);
    let p = start_prometheus(a.addr);
    wait_for(Duration::from_secs(60), "a first scrape", || {
        (!query(&p, "vramwarden_gpu_memory_total_bytes").is_empty()).then_some(())
    });

    // The agent's own view.
    let snap = request(
        a.addr,
        "GET",
        "/api/v1/snapshot",
        &[("Authorization", &a.auth())],
        b"",
    )
    .json();
    let devices = snap["snapshot"]["devices"]
        .as_array()
        .expect("devices")
        .clone();
    let host = snap["source"]["host"].as_str().expect("host").to_string();

    let totals = wait_for(Duration::from_secs(60), "scraped GPU totals", || {
        let r = query(&p, "vramwarden_gpu_memory_total_bytes");
        (r.len() == devices.len()).then_some(r)
    });
    for d in &devices {
        let uuid = d["uuid"].as_str().expect("uuid");
        let s = totals
            .iter()
            .find(|s| s["metric"]["UUID"] == uuid)
            .unwrap_or_else(|| panic!("no series for {uuid}: {totals:?}"));
        assert_eq!(s["metric"]["gpu"], d["index"].to_string());
        assert_eq!(s["metric"]["modelName"], d["name"]);
        assert_eq!(s["metric"]["Hostname"], host.as_str());
        assert_eq!(
            value(s),
            d["memory_total_bytes"].as_f64().expect("total"),
            "total bytes of {uuid}"
        );
    }
    // Used memory moves with the simulation: the agent's reading is among the values
    // Prometheus stored (each sample is visible for 2 s and scraped every second).
    for d in &devices {
        let uuid = d["uuid"].as_str().expect("uuid");
        let want = d["memory_used_bytes"].as_f64().expect("used");
        let q = format!("vramwarden_gpu_memory_used_bytes{{UUID=\"{uuid}\"}}[60s]");
        let mut values: Vec<f64> = Vec::new();
        let found = wait_for(
            Duration::from_secs(10),
            "the agent's reading in Prometheus",
            || {
                let stored = query(&p, &q);
                values = stored
                    .first()
                    .and_then(|s| s["values"].as_array().cloned())
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|v| v[1].as_str().and_then(|x| x.parse().ok()))
                    .collect();
                values.contains(&want).then_some(true)
            },
        );
        assert!(found, "{uuid}: {want} not in {values:?}");
    }
    let up = query(&p, "up{job=\"vramwarden\"}");
    assert_eq!(up.len(), 1);
    assert_eq!(value(&up[0]), 1.0);
    let procs = query(&p, "count(vramwarden_process_gpu_memory_bytes)");
    assert!(value(&procs[0]) >= 3.0, "{procs:?}");

    // The dashboard with this host and GPU 0 picked (what a user does): every expression
    // evaluates; the ones that need no leak or action return series now, and every series
    // they return is this host's (the per-process panels too).
    let exprs = dashboard_exprs(&host, "0");
    assert!(exprs.len() >= 10, "{exprs:?}");
    assert!(
        exprs
            .iter()
            .all(|e| e.contains(&format!("Hostname=~\"{host}\""))),
        "a panel does not filter on the picked host: {exprs:?}"
    );
    // Three scrapes at least, for rate() and increase().
    wait_for(Duration::from_secs(20), "three scrapes", || {
        let r = query(&p, "count_over_time(up{job=\"vramwarden\"}[1m])");
        (r.first().map(value).unwrap_or(0.0) >= 3.0).then_some(())
    });
    for e in &exprs {
        let r = query(&p, e);
        let may_be_empty = e.contains("time_to_full")
            || e.contains("leak_rate")
            || e.contains("cleanup_actions")
            || e.contains("sampler_errors")
            || e.contains("torch")
            || e.contains("parked");
        assert!(may_be_empty || !r.is_empty(), "no series for {e}");
        for s in &r {
            assert_eq!(s["metric"]["Hostname"], host.as_str(), "{e}: {s}");
        }
    }
    // The per-process panels list GPU 0's processes (the demo always has some there).
    let top = exprs
        .iter()
        .find(|e| e.starts_with("topk(20, vramwarden_process_gpu_memory_bytes"))
        .expect("the top processes panel");
    let listed = query(&p, top);
    assert!(!listed.is_empty(), "{top}");
    for s in &listed {
        assert_eq!(s["metric"]["gpu"], "0", "{top}: {s}");
        assert!(value(s) > 0.0, "{s}");
    }
    // Another host picked: every panel is empty (no panel ignores the selector).
    for e in dashboard_exprs("other-host", "0") {
        assert!(query(&p, &e).is_empty(), "{e} shows another host's series");
    }
    // The template variables' queries.
    let hosts = get(
        p.addr,
        &format!(
            "/api/v1/label/Hostname/values?match[]={}",
            encode("vramwarden_gpu_memory_total_bytes")
        ),
    )
    .json();
    assert_eq!(hosts["data"][0], host.as_str(), "{hosts}");

    // The alert rules are loaded and evaluate without error.
    let rules = wait_for(Duration::from_secs(30), "rules evaluated", || {
        let v = get(p.addr, "/api/v1/rules").json();
        let rules: Vec<serde_json::Value> = v["data"]["groups"]
            .as_array()?
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        (!rules.is_empty() && rules.iter().all(|r| r["health"] == "ok")).then_some(rules)
    });
    assert_eq!(rules.len(), 5, "{rules:?}");
    for r in &rules {
        let q = r["query"].as_str().expect("rule query");
        let _ = query(&p, q);
    }
    // Nothing leaks at the start of the demo: the leak and time-to-full alerts are quiet, the
    // stale alert too.
    assert!(query(&p, "vramwarden_sample_age_seconds > 60").is_empty());
    assert!(!query(&p, "vramwarden_gpu_memory_unattributed_bytes >= 0").is_empty());

    // promtool: the rules file, and a scrape.
    let out = Command::new(PROMTOOL)
        .args(["check", "rules"])
        .arg(repo("packaging/prometheus/vramwarden-rules.yml"))
        .output()
        .expect("promtool");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let scrape = get(a.addr, "/metrics").body;
    let mut pt = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    pt.stdin
        .take()
        .expect("stdin")
        .write_all(&scrape)
        .expect("feed promtool");
    let out = pt.wait_with_output().expect("promtool");
    // promtool parses the whole scrape (a syntax error fails it). Its lint has exactly one
    // complaint, on purpose: dcgm-exporter's camelCase label names (`modelName`, `UUID`,
    // `Hostname`) that existing GPU dashboards join on.
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let other: Vec<&str> = said
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !l.ends_with("label names should be written in 'snake_case' not 'camelCase'"))
        .collect();
    assert!(other.is_empty(), "promtool check metrics: {other:?}");
    assert!(
        out.status.success() || said.contains("camelCase"),
        "promtool failed: {said}"
    );
}
