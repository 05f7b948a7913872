//! `serve`, the exporter, with real parts: the binary as a child process (`--listen 127.0.0.1:0`,
//! its bound address read from stderr) against the reference server, scraped by a real Prometheus
//! (Debian's package, as in `prometheus`), its `/metrics` checked by `promtool check metrics`, its
//! shipped alerts by `promtool check rules` and `promtool test rules`, and the deploy/ manifests
//! by the real kubectl and the Kubernetes API types.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use extpath::refserver::{ClientAuth, RunningServer};
use serde_json::Value;

use crate::prometheus::Prometheus;
use crate::util::daemons::dir;
use crate::util::repo;
use crate::util::{Files, start_text};

/// The exporter as a child process; killed on drop.
struct Exporter {
    child: Child,
    /// `127.0.0.1:PORT`.
    addr: String,
    stderr: Arc<Mutex<String>>,
    http: reqwest::Client,
}

impl Exporter {
    /// `serve --kubeconfig KC --listen 127.0.0.1:0 EXTRA…`, once it says where it listens.
    fn start(f: &Files, kubeconfig: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kubectl-extpath"))
            .env_remove("KUBECONFIG")
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env("HOME", f.path())
            .args(["serve", "--kubeconfig"])
            .arg(kubeconfig)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        let log = stderr.clone();
        // Drained for the whole run, so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(rest) = line.split_once("listening on http://").map(|(_, r)| r) {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
                log.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no listening line: {}", stderr.lock().unwrap()));
        Exporter {
            child,
            addr,
            stderr,
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
        }
    }

    fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .http
            .get(format!("http://{}{path}", self.addr))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.log()));
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// Poll `/readyz` until the first scan has completed.
    async fn wait_ready(&self) {
        let started = Instant::now();
        let mut pause = Duration::from_millis(20);
        while self.get("/readyz").await.0 != 200 {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "not ready: {}",
                self.log()
            );
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("sh")
            .args(["-c", &format!("kill -{sig} {}", self.child.id())])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    /// The exit status, if the child ends within `limit` (polled).
    fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let started = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return Some(s);
            }
            if started.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scenario(name: &str) -> String {
    std::fs::read_to_string(repo().join("fixtures/scenarios").join(name)).unwrap()
}

/// `--backend-address` for every backend of the server: the exporter runs beside the "cluster".
fn backend_flags(server: &RunningServer) -> Vec<String> {
    server
        .backend_addresses()
        .iter()
        .flat_map(|(k, v)| ["--backend-address".to_string(), format!("{k}={v}")])
        .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Run `promtool ARGS` (stdin from `input`), or `None` when promtool is not installed.
fn promtool(args: &[&str], input: Option<&str>, cwd: &Path) -> Option<std::process::Output> {
    let mut child = match Command::new("promtool")
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: promtool is not installed (Debian's prometheus package has it)");
            return None;
        }
        Err(e) => panic!("promtool: {e}"),
    };
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        if let Some(text) = input {
            stdin.write_all(text.as_bytes()).unwrap();
        }
    }
    Some(child.wait_with_output().unwrap())
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exporter_serves_metrics_promtool_accepts_and_the_diagnosis_scan_prints() {
    let server = start_text(&scenario("aggregation-backend-down.yaml")).await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let backends = backend_flags(&server);
    let mut args = vec!["--interval", "1m", "--window", "2s"];
    args.extend(strs(&backends));
    let exporter = Exporter::start(&f, &kc, &args);
    // The first scan waits out its 2 s window: not ready, and no diagnosis, until it is done.
    assert_eq!(exporter.get("/readyz").await.0, 503, "{}", exporter.log());
    assert_eq!(exporter.get("/diagnosis").await.0, 503);
    assert_eq!(exporter.get("/healthz").await, (200, "ok\n".into()));
    exporter.wait_ready().await;

    let (code, metrics) = exporter.get("/metrics").await;
    assert_eq!(code, 200);
    if let Some(out) = promtool(&["check", "metrics"], Some(&metrics), f.path()) {
        assert!(out.status.success(), "{}\n{metrics}", text(&out));
    }
    let parsed =
        extpath::promtext::parse_str(&metrics, &extpath::promtext::Selection::all()).unwrap();
    let family = |name: &str| {
        parsed
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no {name}:\n{metrics}"))
    };
    let verdicts = family("extpath_verdict");
    let apiservice = verdicts
        .series
        .iter()
        .find(|s| s.labels["subject_kind"] == "APIService")
        .unwrap_or_else(|| panic!("{metrics}"));
    assert_eq!(apiservice.labels["subject"], "v1alpha1.wardle.example.com");
    assert_eq!(apiservice.labels["class"], "Aggregation");
    assert_eq!(apiservice.labels["severity"], "critical");
    // Healthy subjects are counted, never labelled.
    assert!(
        verdicts
            .series
            .iter()
            .all(|s| s.labels["severity"] != "info")
    );
    let healthy = family("extpath_subjects")
        .series
        .iter()
        .find(|s| s.labels["class"] == "Healthy")
        .and_then(|s| s.value)
        .unwrap();
    assert!(healthy.0 >= 1.0, "{metrics}");
    let problems = family("extpath_problems");
    let critical_aggregation = problems
        .series
        .iter()
        .find(|s| s.labels["class"] == "Aggregation" && s.labels["severity"] == "critical")
        .and_then(|s| s.value)
        .unwrap();
    assert_eq!(critical_aggregation.0, 1.0);
    assert!(
        !family("extpath_certificate_expiry_timestamp_seconds")
            .series
            .is_empty()
    );
    assert_eq!(
        family("extpath_scan_duration_seconds").series[0]
            .count
            .unwrap()
            .0,
        1.0
    );
    assert!(
        family("extpath_last_successful_scan_timestamp_seconds").series[0]
            .value
            .unwrap()
            .0
            > 1e9
    );

    // /diagnosis is the document `scan -o json` prints: the same verdicts for the same cluster.
    let (code, diagnosis) = exporter.get("/diagnosis").await;
    assert_eq!(code, 200);
    let served: Value = serde_json::from_str(&diagnosis).unwrap();
    let mut scan_args = vec![
        "scan".to_string(),
        "--kubeconfig".into(),
        kc.display().to_string(),
        "--window".into(),
        "2s".into(),
        "-o".into(),
        "json".into(),
    ];
    scan_args.extend(backends.iter().cloned());
    let scanned = crate::util::run(f.path(), &strs(&scan_args), &[]);
    let scanned: Value = serde_json::from_str(&scanned.stdout).unwrap();
    let outline = |d: &Value| -> Vec<(Value, Value, Value)> {
        d["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["subject"].clone(),
                    v["class"].clone(),
                    v["severity"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(served["apiVersion"], scanned["apiVersion"]);
    assert_eq!(served["kind"], "Diagnosis");
    assert_eq!(outline(&served), outline(&scanned));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_exporter_mid_scan_within_a_second() {
    let server = start_text(&scenario("healthy.yaml")).await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    for sig in ["TERM", "INT"] {
        let mut exporter = Exporter::start(&f, &kc, &["--window", "20s", "--timeout", "30s"]);
        // The first scan is inside its 20 s window now.
        assert_eq!(exporter.get("/readyz").await.0, 503);
        let sent = Instant::now();
        exporter.signal(sig);
        let status = exporter
            .wait_exit(Duration::from_secs(1))
            .unwrap_or_else(|| panic!("still running 1 s after SIG{sig}: {}", exporter.log()));
        assert_eq!(status.code(), Some(0), "SIG{sig}: {}", exporter.log());
        assert!(sent.elapsed() < Duration::from_secs(1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_that_overruns_its_interval_is_not_started_twice() {
    // No scenario traffic: every request the server sees is the exporter's.
    let healthy =
        extpath::refserver::scenario::load_str(&scenario("healthy.yaml"), "healthy.yaml").unwrap();
    let server = extpath::refserver::RefServer::start(
        healthy,
        extpath::refserver::StartOptions {
            idle: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    // Each scan waits a 1.5 s window; scans are due every 0.5 s.
    let exporter = Exporter::start(&f, &kc, &["--interval", "500ms", "--window", "1500ms"]);
    let metrics_requests = || {
        server
            .requests()
            .into_iter()
            .filter(|r| r.path == "/metrics" || r.path == "/version")
            .map(|r| r.path)
            .collect::<Vec<_>>()
    };
    let started = Instant::now();
    let mut pause = Duration::from_millis(50);
    while metrics_requests().len() < 9 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{}",
            exporter.log()
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
    // One scan reads /version and its first /metrics together, and its second /metrics after the
    // window. Two scans at once would interleave two of those triples.
    let seen = metrics_requests();
    for triple in seen.chunks(3).filter(|c| c.len() == 3) {
        let mut sorted = triple.to_vec();
        sorted.sort();
        assert_eq!(sorted, ["/metrics", "/metrics", "/version"], "{seen:?}");
        assert_eq!(triple[2], "/metrics", "{seen:?}");
    }
    let (_, metrics) = exporter.get("/metrics").await;
    let overruns = metrics
        .lines()
        .find_map(|l| l.strip_prefix("extpath_scan_overruns_total "))
        .unwrap()
        .parse::<f64>()
        .unwrap();
    assert!(overruns >= 1.0, "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prometheus_sees_verdicts_appear_when_a_backend_stops_and_go_when_it_is_back() {
    let mut server = start_text(&scenario("healthy.yaml")).await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let backends = backend_flags(&server);
    let mut args = vec!["--interval", "1s", "--window", "0"];
    args.extend(strs(&backends));
    let exporter = Exporter::start(&f, &kc, &args);
    exporter.wait_ready().await;

    let config = format!(
        r#"
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: extpath-exporter
    static_configs: [{{targets: ["{}"]}}]
"#,
        exporter.addr
    );
    let mut prom = Prometheus::start_with(dir(), &config).await;
    let wardle =
        r#"extpath_verdict{subject_kind="APIService",subject="v1alpha1.wardle.example.com"}"#;
    // Healthy: the subjects are counted, and no verdict series exists for the APIService.
    prom.wait_for(r#"extpath_subjects{class="Healthy"}"#, 1.0)
        .await;
    assert_eq!(prom.value(wardle).await, None, "{}", exporter.log());
    assert_eq!(
        prom.value(r#"extpath_problems{class="Aggregation",severity="critical"}"#)
            .await,
        Some(0.0)
    );

    // The extension server crashes: its APIService goes unavailable, and the verdict appears.
    server.stop_backend("wardle").await.unwrap();
    server.sync_availability().await;
    prom.wait_until(wardle, |v| v == Some(1.0)).await;
    let series = prom.vector(wardle).await;
    assert_eq!(series.len(), 1, "{series:?}");
    let labels = &series[0]["metric"];
    assert_eq!(labels["class"], "Aggregation", "{labels}");
    assert_eq!(labels["severity"], "critical", "{labels}");
    assert_eq!(labels["job"], "extpath-exporter");
    let rule = labels["rule"].as_str().unwrap().to_string();
    assert!(rule.starts_with("aggregation-"), "{rule}");
    prom.wait_for(
        r#"extpath_problems{class="Aggregation",severity="critical"}"#,
        1.0,
    )
    .await;
    // The rule label is what the alerts tell people to explain.
    let explained = crate::util::run(f.path(), &["explain", &rule], &[]);
    assert_eq!(explained.code, 0, "{}", explained.stderr);

    // Back again: the next scan finds it healthy and the series is gone (stale) in Prometheus.
    server.start_backend("wardle").await.unwrap();
    server.sync_availability().await;
    prom.wait_until(wardle, |v| v.is_none()).await;
    prom.wait_until(
        r#"extpath_problems{class="Aggregation",severity="critical"}"#,
        |v| v == Some(0.0),
    )
    .await;
    assert!(
        prom.value(r#"extpath_scan_errors_total{source="apiserver"}"#)
            .await
            == Some(0.0)
    );
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

#[test]
fn shipped_alerts_pass_promtool_check_and_unit_tests() {
    let d = repo().join("deploy/prometheus");
    let Some(check) = promtool(&["check", "rules", "extpath-rules.yml"], None, &d) else {
        return;
    };
    assert!(check.status.success(), "{}", text(&check));
    let test = promtool(&["test", "rules", "extpath-rules.test.yml"], None, &d).unwrap();
    assert!(test.status.success(), "{}", text(&test));

    // Every alert has a unit test that expects it to fire, and says what to explain and do.
    let rules = &yaml_docs(&d.join("extpath-rules.yml"))[0];
    let tests = std::fs::read_to_string(d.join("extpath-rules.test.yml")).unwrap();
    let mut alerts = 0;
    for group in rules["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let name = rule["alert"].as_str().unwrap();
            alerts += 1;
            assert!(
                tests.contains(&format!(
                    "alertname: {name}\n        exp_alerts:\n          - "
                )),
                "{name} has no unit test in which it fires"
            );
            let a = &rule["annotations"];
            assert!(
                a["explain"]
                    .as_str()
                    .unwrap()
                    .starts_with("kubectl extpath explain "),
                "{name}"
            );
            assert!(!a["runbook"].as_str().unwrap_or("").is_empty(), "{name}");
        }
    }
    assert_eq!(alerts, 5);
    // The fixed words alerts tell people to explain exist.
    let f = Files::new();
    for word in [
        "Inconclusive",
        "aggregation-tls-cert-expiring",
        "admission-webhook-cert-expiring",
    ] {
        let r = crate::util::run(f.path(), &["explain", word], &[]);
        assert_eq!(r.code, 0, "explain {word}: {}", r.stderr);
    }
    // The PrometheusRule carries the same groups.
    let pr = &yaml_docs(&repo().join("deploy/prometheusrule.yaml"))[0];
    assert_eq!(pr["kind"], "PrometheusRule");
    assert_eq!(pr["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(pr["spec"]["groups"], rules["groups"]);
}

/// A built-in object read into its Kubernetes API type and written back: a field the type does
/// not have, or a value of the wrong type, does not survive.
fn round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(doc: &Value) {
    let typed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{} {}: {e}", doc["kind"], doc["metadata"]["name"]));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(&back, doc, "{} does not round-trip", doc["kind"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_manifests_are_valid_for_kubectl_and_the_api_types() {
    use k8s_openapi::api::{apps::v1::Deployment, core, rbac};
    let exporter = yaml_docs(&repo().join("deploy/exporter.yaml"));
    let rbac_docs = yaml_docs(&repo().join("deploy/rbac.yaml"));
    let kinds: Vec<&str> = exporter
        .iter()
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRoleBinding",
            "Deployment",
            "Service"
        ]
    );
    for doc in &exporter {
        match doc["kind"].as_str().unwrap() {
            "ServiceAccount" => round_trips::<core::v1::ServiceAccount>(doc),
            "ClusterRoleBinding" => round_trips::<rbac::v1::ClusterRoleBinding>(doc),
            "Deployment" => round_trips::<Deployment>(doc),
            "Service" => round_trips::<core::v1::Service>(doc),
            other => panic!("{other}"),
        }
    }

    // The real kubectl decodes and maps every document (it needs an API server for discovery;
    // the reference server serves every kind deploy/ uses but the Prometheus operator's CRDs).
    let server = start_text(&scenario("healthy.yaml")).await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let mut checked = 0;
    for doc in exporter.iter().chain(&rbac_docs) {
        let (api_version, kind) = (
            doc["apiVersion"].as_str().unwrap(),
            doc["kind"].as_str().unwrap(),
        );
        if extpath::refserver::registry::builtin_by_kind(api_version, kind).is_none() {
            continue;
        }
        let file = f.write("doc.json", &doc.to_string());
        let out = Command::new("kubectl")
            .env("KUBECONFIG", &kc)
            .env("HOME", f.path())
            .args([
                "create",
                "--dry-run=client",
                "--validate=false",
                "-o",
                "json",
                "-f",
            ])
            .arg(&file)
            .output()
            .unwrap();
        assert!(out.status.success(), "{kind}: {}", text(&out));
        let created: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(created["kind"], kind);
        assert_eq!(created["metadata"]["name"], doc["metadata"]["name"]);
        checked += 1;
    }
    assert_eq!(
        checked,
        exporter.len() + rbac_docs.len(),
        "kubectl checked only {checked} documents"
    );

    // What the documents must agree on.
    let doc = |kind: &str| exporter.iter().find(|d| d["kind"] == kind).unwrap();
    let reader = rbac_docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole")
        .unwrap();
    assert_eq!(
        doc("ClusterRoleBinding")["roleRef"]["name"],
        reader["metadata"]["name"]
    );
    let pod = &doc("Deployment")["spec"]["template"];
    assert_eq!(
        pod["spec"]["serviceAccountName"],
        doc("ServiceAccount")["metadata"]["name"]
    );
    assert_eq!(
        doc("Service")["spec"]["selector"],
        pod["metadata"]["labels"]
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["ports"][0]["name"], "metrics");
    assert_eq!(doc("Service")["spec"]["ports"][0]["targetPort"], "metrics");
    // The container's arguments are a valid `serve` command line.
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(args[0], "serve");
    let mut command_line = vec!["kubectl extpath".to_string()];
    command_line.extend(args.iter().cloned());
    <extpath::cli::Cli as clap::Parser>::try_parse_from(&command_line)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));

    // The CRD kinds kubectl cannot check without their CRDs: their shape.
    let sm = &yaml_docs(&repo().join("deploy/servicemonitor.yaml"))[0];
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(sm["kind"], "ServiceMonitor");
    assert_eq!(
        sm["spec"]["selector"]["matchLabels"],
        doc("Service")["metadata"]["labels"]
    );
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(
        sm["spec"]["namespaceSelector"]["matchNames"][0],
        doc("Service")["metadata"]["namespace"]
    );
    // The job label the alerts select is the Service's name (the Operator's default).
    let rules =
        std::fs::read_to_string(repo().join("deploy/prometheus/extpath-rules.yml")).unwrap();
    assert!(rules.contains(&format!(
        "job=\"{}\"",
        doc("Service")["metadata"]["name"].as_str().unwrap()
    )));
}

#[test]
fn an_exporter_that_can_never_connect_exits_2_with_the_reason() {
    let f = Files::new();
    let r = crate::util::run(f.path(), &["serve", "--listen", "127.0.0.1:0"], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("no kubeconfig found"), "{}", r.stderr);
    let r = crate::util::run(f.path(), &["serve", "--listen", "nowhere"], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--listen \"nowhere\""), "{}", r.stderr);
}
