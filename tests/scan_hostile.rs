//! `scan` against a cluster that fights back: `/metrics` forbidden to the scanning identity, one
//! list answered 500 (a storage error) and another 429 (a priority level with no seats), and a
//! backend that accepts TCP but never finishes the TLS handshake. The scan keeps to its deadlines,
//! names each failure as a gap, and still judges every subject from the evidence it did get.

use std::time::Duration;

use serde_json::{Value, json};

use crate::util::hostile_server::{HostileServer, Mode, StalledTls};
use crate::util::repo;
use crate::util::{Files, extpath_run, gaps, start_text};

/// The shipped ClusterRole's rules without `/metrics`.
fn rules_without_metrics() -> Value {
    let mut rules = crate::util::shipped_cluster_role()["rules"].clone();
    for r in rules.as_array_mut().unwrap() {
        if let Some(urls) = r.get_mut("nonResourceURLs").and_then(Value::as_array_mut) {
            urls.retain(|u| u != "/metrics");
        }
    }
    rules
}

fn hostile_scenario() -> String {
    let text = std::fs::read_to_string(repo().join("fixtures/scenarios/healthy.yaml")).unwrap();
    let mut s: Value = serde_saphyr::from_str(&text).unwrap();
    let o = s.as_object_mut().unwrap();
    o.remove("expect");
    o.remove("traffic");
    o.insert("name".into(), json!("hostile"));
    o["users"].as_array_mut().unwrap().push(json!({
        "name": "gate", "token": "gate-token", "allow": rules_without_metrics()
    }));
    o.insert(
        "faults".into(),
        json!({"storage": [{
            "resource": "validatingwebhookconfigurations",
            "operations": ["list"],
            "error": "etcdserver: request timed out"
        }]}),
    );
    o["objects"].as_array_mut().unwrap().extend([
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
               "metadata": {"name": "no-seats"},
               "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 0,
                        "lendablePercent": 0, "borrowingLimitPercent": 0,
                        "limitResponse": {"type": "Reject"}}}}),
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
               "metadata": {"name": "gate-crds"},
               "spec": {"priorityLevelConfiguration": {"name": "no-seats"}, "matchingPrecedence": 10,
                        "rules": [{"subjects": [{"kind": "User", "user": {"name": "gate"}}],
                                   "resourceRules": [{"verbs": ["list"],
                                       "apiGroups": ["apiextensions.k8s.io"],
                                       "resources": ["customresourcedefinitions"],
                                       "clusterScope": true}]}]}}),
    ]);
    serde_json::to_string(&s).unwrap()
}

/// A port that accepts TCP connections and never says a word.
fn silent_port() -> (u16, std::net::TcpListener) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (l.local_addr().unwrap().port(), l)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_cluster_neither_holds_the_scan_nor_costs_the_other_evidence() {
    let server = start_text(&hostile_scenario()).await;
    let (silent, _listener) = silent_port();
    let f = Files::new();
    let ca = f.write("ca.crt", server.ca_pem());
    let args = |out: &str| {
        [
            "--server",
            &server.url(),
            "--certificate-authority",
            ca.to_str().unwrap(),
            "--token",
            "gate-token",
            "--window",
            "0",
            "--request-timeout",
            "2s",
            "--timeout",
            "30s",
            "--backend-address",
            &format!("api.wardle-system=127.0.0.1:{silent}"),
            "-o",
            out,
        ]
        .map(str::to_string)
        .to_vec()
    };
    let (r, took) = extpath_run(&f, "scan", args("json")).await;
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    // The silent backend costs one request timeout, not the whole budget.
    assert!(took < Duration::from_secs(20), "the scan took {took:?}");
    let d: Value = serde_json::from_str(&r.stdout).unwrap();
    let g = gaps(&d);
    let detail = |source: &str| -> String {
        d["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["source"] == source)
            .map(|x| format!("{} {}", x["reason"], x["detail"]))
            .unwrap_or_else(|| panic!("no {source} gap in {g:?}"))
    };
    assert!(detail("metrics/apiserver").contains("forbidden"));
    let storage = detail("objects/validatingwebhookconfigurations");
    assert!(
        storage.contains("500") && storage.contains("etcdserver: request timed out"),
        "{storage}"
    );
    let throttled = detail("objects/customresourcedefinitions");
    assert!(throttled.contains("429"), "{throttled}");
    assert!(
        g.iter()
            .any(|(s, reason)| s.contains("wardle") && reason == "timeout"),
        "the silent backend's handshake is a timeout gap: {g:?}"
    );

    // What could be read is still judged.
    let verdicts = d["verdicts"].as_array().unwrap();
    let wardle = verdicts
        .iter()
        .find(|v| v["subject"]["name"] == "v1alpha1.wardle.example.com")
        .expect("the APIService is judged");
    assert_ne!(wardle["class"], "Inconclusive", "{wardle:#}");
    assert!(
        verdicts
            .iter()
            .any(|v| v["subject"]["kind"] == "FlowSchema"),
        "FlowSchemas were read"
    );

    // A person sees the gaps too.
    let (r, _) = extpath_run(&f, "scan", args("table")).await;
    assert!(
        r.stdout.contains("metrics/apiserver")
            && r.stdout.contains("objects/customresourcedefinitions"),
        "{}",
        r.stdout
    );
    server.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// One misbehaviour at a time (tests/util/hostile_server.rs): the real binary, as a child, pointed at a
// server that answers like a small healthy cluster except on one path. Each scan ends within its
// `--timeout` plus 2 s, stays under a memory bound read from the child's `VmHWM`, names the path
// that misbehaved as a gap, and keeps what the rest of the server said.

/// `--timeout` of these scans.
const DEADLINE: Duration = Duration::from_secs(3);
/// The most resident memory a scan of the hostile server may reach (a debug build; the healthy
/// server costs ~60 MB). What holds it is the budget of all answers being read at once
/// (`MAX_HELD_BYTES`, 192 MB), not only the cap on one answer: a server whose every body never
/// ends reached 505–529 MB with the cap alone, 252 MB with the budget.
const MEMORY_BOUND_MB: u64 = 320;

/// A finished child: exit code, output, wall time and peak resident memory.
struct Measured {
    code: i32,
    stdout: String,
    stderr: String,
    took: Duration,
    max_rss_mb: u64,
}

/// Run `kubectl-extpath ARGS…` as a child in an empty HOME and reap it with `wait4`. Its peak
/// resident memory is its `VmHWM`, read from `/proc/<pid>/status` every few milliseconds until it
/// exits: not `wait4`'s `ru_maxrss`, which on Linux also carries the peak of the test process
/// the child was spawned from (exec keeps the maximum of the mm it replaces), so it would
/// measure this test binary's own hostile servers. A child still running after a minute is
/// killed, so a hung scan fails the test instead of holding it.
// The child is reaped by `wait4`, not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_measured(home: &std::path::Path, args: &[String]) -> Measured {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    let started = std::time::Instant::now();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("kubectl-extpath"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let exited = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let peak = {
        let exited = exited.clone();
        // Until the child is reaped its pid cannot be reused, so this reads only the child.
        std::thread::spawn(move || {
            let path = format!("/proc/{pid}/status");
            let mut peak_kb = 0u64;
            while !exited.load(std::sync::atomic::Ordering::Acquire) {
                let hwm = std::fs::read_to_string(&path).ok().and_then(|t| {
                    t.lines()
                        .find_map(|l| l.strip_prefix("VmHWM:"))
                        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
                });
                peak_kb = peak_kb.max(hwm.unwrap_or(0));
                std::thread::sleep(Duration::from_millis(5));
            }
            peak_kb
        })
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // Wait for the exit without reaping, so that the pid stays the child's until the poller
        // has stopped; then reap.
        // SAFETY: a zeroed siginfo is a valid out-parameter; `pid` is our own unreaped child.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        exited.store(true, std::sync::atomic::Ordering::Release);
        let peak_kb = peak.join().unwrap_or(0);
        let mut status = 0;
        // SAFETY: `pid` is our own unreaped child; no rusage is asked for.
        let r = unsafe { libc::wait4(pid, &mut status, 0, std::ptr::null_mut()) };
        let _ = tx.send((r, status, peak_kb));
    });
    let (r, status, max_rss_kb) = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(x) => x,
        Err(_) => {
            // SAFETY: the child has not been reaped (wait4 has not returned), so the pid is ours.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            rx.recv().unwrap()
        }
    };
    assert_eq!(r, pid, "wait4 failed");
    let took = started.elapsed();
    let code = std::process::ExitStatus::from_raw(status)
        .code()
        .unwrap_or(-1);
    Measured {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        took,
        max_rss_mb: max_rss_kb / 1024,
    }
}

/// One hostile scan at a time: their servers write as fast as the scan reads, and two of them at
/// once on two cores would measure each other.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The scan of `server` (and `extra` flags), as JSON, within [`DEADLINE`].
async fn scan_hostile(server: &HostileServer, extra: &[&str]) -> (Measured, Value) {
    let _turn = ONE_AT_A_TIME.lock().await;
    let f = Files::new();
    let ca = f.write("ca.crt", &server.ca_pem);
    let timeout = format!("{}s", DEADLINE.as_secs());
    let mut args: Vec<String> = [
        "scan",
        "--server",
        &server.url(),
        "--certificate-authority",
        ca.to_str().unwrap(),
        "--token",
        "t",
        "--window",
        "0",
        "--request-timeout",
        "2s",
        "--timeout",
        &timeout,
        "-o",
        "json",
    ]
    .map(str::to_string)
    .to_vec();
    args.extend(extra.iter().map(|s| s.to_string()));
    let home = f.path().to_path_buf();
    let m = tokio::task::spawn_blocking(move || run_measured(&home, &args))
        .await
        .unwrap();
    eprintln!(
        "scan of the hostile server: {:?}, {} MB peak, exit {}",
        m.took, m.max_rss_mb, m.code
    );
    assert!(
        m.took <= DEADLINE + Duration::from_secs(2),
        "the scan took {:?} (--timeout {timeout}); stderr: {}",
        m.took,
        m.stderr
    );
    assert!(
        m.max_rss_mb < MEMORY_BOUND_MB,
        "the scan reached {} MB; stderr: {}",
        m.max_rss_mb,
        m.stderr
    );
    assert!(m.code == 0 || m.code == 1, "exit {}: {}", m.code, m.stderr);
    let d: Value = serde_json::from_str(&m.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}; stderr: {}", m.stdout, m.stderr));
    (m, d)
}

/// The gap of `source`, as `reason: detail`.
fn gap_of(d: &Value, source: &str) -> String {
    d["gaps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["source"] == source)
        .map(|g| {
            format!(
                "{}: {}",
                g["reason"].as_str().unwrap(),
                g["detail"].as_str().unwrap()
            )
        })
        .unwrap_or_else(|| panic!("no {source} gap in {:?}", gaps(d)))
}

/// What the healthy rest of the server said is in the diagnosis: the version, both health
/// checks, the /metrics families (unless `/metrics` is the hostile path), and no gap beyond
/// `hostile` (and etcd, which the scan was not given).
fn rest_kept(d: &Value, hostile: &[&str]) {
    for (source, _) in gaps(d) {
        assert!(
            hostile.iter().any(|h| source.starts_with(h)) || source.starts_with("health/etcd"),
            "only the hostile path is a gap, not {source}: {:?}",
            gaps(d)
        );
    }
}

/// The bundle the scan saw, written with `--save-bundle`, for what JSON output does not carry.
async fn scan_bundle(server: &HostileServer, extra: &[&str]) -> (Measured, Value, Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.json");
    let mut all = vec!["--save-bundle", path.to_str().unwrap()];
    all.extend_from_slice(extra);
    let (m, d) = scan_hostile(server, &all).await;
    let b: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (m, d, b)
}

fn evidence_kept(b: &Value, metrics: bool) {
    assert_eq!(
        b["collection"]["server_version"]["git_version"], "v1.31.4-hostile",
        "the version is kept"
    );
    let checks = b["health_checks"].to_string();
    assert!(
        checks.contains("readyz") && checks.contains("livez"),
        "{checks}"
    );
    if metrics {
        assert!(
            b["metrics"].to_string().contains("apiserver_request_total"),
            "the /metrics families are kept"
        );
    }
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_ends_is_cut_at_the_request_deadline() {
    let server = HostileServer::start(CRDS, Mode::EndlessBody).await;
    let (_, d, b) = scan_bundle(&server, &[]).await;
    let gap = gap_of(&d, "objects/customresourcedefinitions");
    assert!(
        gap.contains("body"),
        "the gap says the body was the trouble: {gap}"
    );
    assert!(!gap.contains("could not be reached"), "{gap}");
    rest_kept(&d, &["objects/customresourcedefinitions"]);
    evidence_kept(&b, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_every_body_never_ends_is_not_called_unreachable() {
    let server = HostileServer::start("/", Mode::EndlessBody).await;
    let (_, d) = scan_hostile(&server, &[]).await;
    let g = gaps(&d);
    for source in ["version", "objects/apiservices", "health/readyz"] {
        let gap = gap_of(&d, source);
        assert!(gap.contains("HTTP 200, then"), "{source}: {gap}");
    }
    // Its /metrics is one endless line.
    assert!(gap_of(&d, "metrics/apiserver").contains("cut"), "{g:?}");
    assert!(!d.to_string().contains("could not be reached"), "{g:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickle_under_a_huge_content_length_is_a_stalled_body() {
    let target = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
    let server = HostileServer::start(target, Mode::Trickle).await;
    let (_, d, b) = scan_bundle(&server, &[]).await;
    let gap = gap_of(&d, "objects/validatingwebhookconfigurations");
    assert!(
        gap.starts_with("timeout: HTTP 200, then the body") && gap.contains("bytes"),
        "the gap says how far the body got: {gap}"
    );
    rest_kept(&d, &["objects/validatingwebhookconfigurations"]);
    evidence_kept(&b, true);
}

// A server that ignores `limit` and sends 200,000 items in one page: the items are decoded one by
// one, yielding, and not past --max-objects (default 50,000), so the list is cut with a `capped`
// gap and the analysis of what was kept runs under --timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_of_200000_items_in_one_page_keeps_the_scan_bounded() {
    let target = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
    let server = HostileServer::start(target, Mode::HugeList(200_000)).await;
    let (_, d, b) = scan_bundle(&server, &[]).await;
    let gap = gap_of(&d, "objects/clusterrolebindings");
    assert!(
        gap.contains("listed 50,000") && gap.contains("--max-objects"),
        "{gap}"
    );
    rest_kept(&d, &["objects/clusterrolebindings"]);
    evidence_kept(&b, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_nested_100000_deep_is_an_undecodable_answer() {
    let target = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
    let server = HostileServer::start(target, Mode::DeepJson(100_000)).await;
    let (_, d, b) = scan_bundle(&server, &[]).await;
    let gap = gap_of(&d, "objects/mutatingwebhookconfigurations");
    assert!(gap.contains("undecodable"), "{gap}");
    rest_kept(&d, &["objects/mutatingwebhookconfigurations"]);
    evidence_kept(&b, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_page_with_200_is_not_a_list() {
    let server = HostileServer::start("/apis/flowcontrol", Mode::Html).await;
    let (_, d, b) = scan_bundle(&server, &[]).await;
    let gap = gap_of(&d, "objects/flowcontrol");
    assert!(gap.starts_with("error:"), "{gap}");
    rest_kept(&d, &["objects/flowcontrol"]);
    evidence_kept(&b, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_itself_is_not_followed_forever() {
    let server = HostileServer::start("/apis/apiregistration.k8s.io", Mode::RedirectToSelf).await;
    let (_, d, b) = scan_bundle(&server, &[]).await;
    let gap = gap_of(&d, "objects/apiservices");
    assert!(gap.contains("302"), "{gap}");
    rest_kept(&d, &["objects/apiservices"]);
    evidence_kept(&b, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_closed_mid_body_is_said_so() {
    let target = "/apis/rbac.authorization.k8s.io/v1/clusterroles";
    let server = HostileServer::start(target, Mode::CloseMidBody).await;
    let (_, d, b) = scan_bundle(&server, &[]).await;
    let gap = gap_of(&d, "objects/clusterroles");
    assert!(
        gap.starts_with("error: HTTP 200, then the connection closed mid-body after"),
        "{gap}"
    );
    rest_kept(&d, &["objects/clusterroles"]);
    evidence_kept(&b, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_whose_tls_handshake_never_completes_costs_one_request_timeout() {
    let server = HostileServer::start("/nothing-misbehaves", Mode::Healthy).await;
    let etcd = StalledTls::start().await;
    let url = format!("{}/metrics", etcd.url());
    let (_, d, b) = scan_bundle(&server, &["--etcd-metrics-url", &url]).await;
    for source in ["metrics/etcd", "health/etcd"] {
        let gap = gap_of(&d, source);
        assert!(gap.starts_with("timeout:"), "{source}: {gap}");
    }
    rest_kept(&d, &["metrics/etcd", "health/etcd"]);
    evidence_kept(&b, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_body_without_a_newline_is_cut_at_the_line_limit() {
    let server = HostileServer::start("/metrics", Mode::NewlineFreeMetrics).await;
    let (_, d, b) = scan_bundle(&server, &[]).await;
    let gap = gap_of(&d, "metrics/apiserver");
    assert!(
        gap.contains("is longer than 1.0 MB") && gap.contains("cut"),
        "{gap}"
    );
    rest_kept(&d, &["metrics/apiserver"]);
    // The lines before the endless one are kept.
    evidence_kept(&b, true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_metrics_body_is_cut_at_the_series_limit() {
    let server = HostileServer::start("/metrics", Mode::EndlessMetrics).await;
    let (_, d, b) = scan_bundle(&server, &["--max-series", "20000"]).await;
    let gap = gap_of(&d, "metrics/apiserver");
    assert!(gap.contains("more than 20000 series"), "{gap}");
    rest_kept(&d, &["metrics/apiserver"]);
    evidence_kept(&b, true);
    let series: usize = b["metrics"][0]["families"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["series"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(series <= 20_001, "{series} series kept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_metrics_body_is_cut_at_the_byte_limit() {
    let server = HostileServer::start("/metrics", Mode::EndlessMetrics).await;
    let (_, d, _) = scan_bundle(&server, &["--max-scrape-bytes", "2Mi"]).await;
    let gap = gap_of(&d, "metrics/apiserver");
    assert!(gap.contains("passed 2.1 MB (--max-scrape-bytes)"), "{gap}");
    rest_kept(&d, &["metrics/apiserver"]);
}
