//! `why` against the reference server, through the real binary: one real request per case, and the
//! class it is given — an aggregated 503 from a down backend (Aggregation at discovery), a TLS
//! failure behind `Available=True` (Aggregation at tls), a webhook timeout on a dry-run write
//! (Admission), a failing CRD conversion webhook (Admission at conversion), an APF 429 with seats
//! held (APF), an etcd stall (Storage) and a 403 (Auth); a watch; bad input and an unreachable
//! server. The human view is snapshot-tested with latencies, ports and UIDs redacted.
//!
//! No sleeps to wait for servers or seats: saturation is made deterministic by holding storage
//! operations and polling the server's own gauges.

use std::time::{Duration, Instant};

use extpath::refserver::{ClientAuth, RefServer, RunningServer, scenario};
use serde_json::Value;

use crate::util::repo;
use crate::util::{Files, Run, extpath_run, start};

/// Run `why ARGS…` against `server` as its admin (kubeconfig with the admin token).
async fn why(server: &RunningServer, args: &[&str]) -> (Run, Duration) {
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let mut all: Vec<String> = vec![
        "--kubeconfig".into(),
        kc.display().to_string(),
        "--color".into(),
        "never".into(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    extpath_run(&f, "why", all).await
}

fn report(r: &Run) -> Value {
    serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not a WhyReport ({e}); stderr: {}", r.stderr))
}

/// The request's verdict: class and the rung it broke at.
fn verdict(doc: &Value) -> (&str, &str) {
    let v = &doc["verdict"];
    (
        v["class"].as_str().unwrap_or("none"),
        v["rung"].as_str().unwrap_or("none"),
    )
}

fn step<'a>(doc: &'a Value, rung: &str) -> &'a Value {
    doc["path"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rung"] == rung)
        .unwrap_or_else(|| panic!("no {rung} step in {}", doc["path"]))
}

/// The step of `rung` that is the extension API server's (an aggregated path has one authn and
/// one authz of kube-apiserver's, then the extension server's own).
fn extension_step<'a>(doc: &'a Value, rung: &str) -> &'a Value {
    doc["path"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rung"] == rung && s["component"] == "extension_apiserver")
        .unwrap_or_else(|| panic!("no extension {rung} step in {}", doc["path"]))
}

/// The rule ids on a step, and whether one of them decided the request's verdict.
fn findings(step: &Value) -> (Vec<&str>, bool) {
    let f = step["findings"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    (
        f.iter().map(|x| x["rule"].as_str().unwrap()).collect(),
        f.iter().any(|x| x["decides"] == true),
    )
}

fn related(doc: &Value) -> Vec<String> {
    doc["verdict"]["related"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    format!(
                        "{}/{}",
                        s["kind"].as_str().unwrap(),
                        s["name"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Latencies, durations, ports and UIDs vary from run to run; nothing else may.
fn redact(text: &str) -> String {
    let rules = [
        (r"in \d+(\.\d+)? (µs|ms|s|min)", "in [latency]"),
        (r"\d+(\.\d+)? (µs|ms|s|min)\b", "[duration]"),
        (r"\(\d+ requests\)", "([n] requests)"),
        (r"127\.0\.0\.1:\d+", "127.0.0.1:[port]"),
        (
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[uid]",
        ),
    ];
    let mut out = text.to_string();
    for (re, with) in rules {
        out = regex::Regex::new(re)
            .unwrap()
            .replace_all(&out, with)
            .into_owned();
    }
    out
}

fn backend_flags(server: &RunningServer) -> Vec<String> {
    server
        .backend_addresses()
        .into_iter()
        .flat_map(|(svc, addr)| ["--backend-address".to_string(), format!("{svc}={addr}")])
        .collect()
}

const FLUNDERS: &str = "/apis/wardle.example.com/v1alpha1/namespaces/wardle-system/flunders";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aggregated_503_from_a_down_backend_is_aggregation_at_discovery() {
    let server = start("aggregation-backend-down").await;
    let (r, _) = why(&server, &["GET", FLUNDERS, "--as", "alice", "-o", "json"]).await;
    assert_eq!(r.code, 1, "a critical verdict exits 1: {}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["kind"], "WhyReport");
    assert_eq!(doc["request"]["status"], 503);
    assert_eq!(doc["request"]["body"], "service unavailable\n");
    assert_eq!(doc["request"]["user"], "alice");
    assert_eq!(doc["trace"]["serving"], "aggregated");
    assert_eq!(verdict(&doc), ("Aggregation", "discovery"));
    assert!(related(&doc).contains(&"APIService/v1alpha1.wardle.example.com".to_string()));
    let discovery = step(&doc, "discovery");
    assert_eq!(discovery["state"], "failed");
    assert!(
        discovery["evidence"]
            .as_str()
            .unwrap()
            .contains("FailedDiscoveryCheck"),
        "{discovery}"
    );
    // What is not on this path is not blamed.
    for v in doc["diagnosis"]["verdicts"].as_array().unwrap() {
        assert!(
            !matches!(v["class"].as_str(), Some("Storage" | "APF" | "Admission")),
            "misattribution: {v}"
        );
    }
    // Only reads were sent, and only the one request as alice.
    let requests = server.requests();
    assert!(requests.iter().all(|q| q.method == "GET"), "{requests:?}");
    assert_eq!(requests.iter().filter(|q| q.user == "alice").count(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_failure_behind_available_true_is_aggregation_at_tls() {
    let server = start("aggregation-wrong-ca").await;
    let backends = backend_flags(&server);
    let mut args: Vec<&str> = vec!["GET", FLUNDERS, "--as", "alice"];
    args.extend(backends.iter().map(String::as_str));
    let mut json = args.clone();
    json.extend(["-o", "json"]);
    let (r, _) = why(&server, &json).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 503);
    assert_eq!(verdict(&doc), ("Aggregation", "tls"));
    let tls = step(&doc, "tls");
    assert_eq!(tls["state"], "failed");
    assert!(
        tls["evidence"]
            .as_str()
            .unwrap()
            .contains("x509: certificate signed by unknown authority"),
        "the handshake's own verification: {tls}"
    );
    // Available=True is shown, and not taken on trust.
    assert!(
        step(&doc, "discovery")["evidence"]
            .as_str()
            .unwrap()
            .starts_with("Available=True")
    );
    for earlier in [
        "authn",
        "flowcontrol",
        "authz",
        "service",
        "port",
        "endpoints",
    ] {
        assert_eq!(step(&doc, earlier)["state"], "passed", "{earlier}");
    }
    assert_eq!(step(&doc, "verb")["state"], "not_reached");

    let (r, _) = why(&server, &args).await;
    assert_eq!(r.code, 1);
    insta::assert_snapshot!("aggregation_wrong_ca", redact(&r.stdout));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_timeout_on_a_dry_run_write_is_admission() {
    let server = start("admission-webhook-slow-timeout").await;
    let f = Files::new();
    let cm = f.write(
        "configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: why-probe\n  namespace: wh-guarded\ndata:\n  k: v\n",
    );
    let (r, took) = why(
        &server,
        &["--dry-run", "-f", cm.to_str().unwrap(), "-o", "json"],
    )
    .await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["request"]["method"], "POST");
    assert_eq!(
        doc["request"]["path"],
        "/api/v1/namespaces/wh-guarded/configmaps?dryRun=All"
    );
    assert_eq!(doc["request"]["status"], 500);
    assert_eq!(verdict(&doc), ("Admission", "admission"));
    assert!(
        related(&doc).contains(&"MutatingWebhook/policy.webhook.example.com".to_string()),
        "{:?}",
        related(&doc)
    );
    let webhooks = doc["trace"]["webhooks"].as_array().unwrap();
    assert_eq!(webhooks.len(), 1);
    assert_eq!(webhooks[0]["decision"], "called");
    assert!(
        webhooks[0]["reason"]
            .as_str()
            .unwrap()
            .contains("namespace wh-guarded matches its namespaceSelector")
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    // Every write carried dryRun=All, and nothing was stored.
    let writes: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|q| q.method != "GET")
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert!(writes[0].path.contains("dryRun=All"), "{writes:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_conversion_webhook_breaks_only_the_version_it_converts() {
    let server = start("admission-conversion-webhook-down").await;
    let (r, _) = why(
        &server,
        &[
            "GET",
            "/apis/stable.example.com/v2/namespaces/default/crontabs",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["trace"]["serving"], "custom_resource");
    let crd = &doc["trace"]["crd"];
    assert_eq!(
        (
            crd["requested_version"].as_str(),
            crd["storage_version"].as_str()
        ),
        (Some("v2"), Some("v1"))
    );
    assert_eq!(crd["converts"], true);
    assert_eq!(verdict(&doc), ("Admission", "conversion"));
    assert!(
        related(&doc).contains(&"CustomResourceDefinition/crontabs.stable.example.com".to_string())
    );
    assert_eq!(step(&doc, "storage")["state"], "not_reached");

    // The stored version needs no conversion: it is served, and nothing on its path is blamed.
    let (r, _) = why(
        &server,
        &[
            "GET",
            "/apis/stable.example.com/v1/namespaces/default/crontabs",
            "-o",
            "yaml",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc: Value = serde_saphyr::from_str(&r.stdout).unwrap();
    assert_eq!(doc["request"]["status"], 200);
    assert!(doc["verdict"].is_null(), "{}", doc["verdict"]);
    assert_eq!(doc["trace"]["crd"]["converts"], false);
    assert_eq!(step(&doc, "conversion")["state"], "passed");
    // The scenario's clients keep failing at v2; when that lands in this request's window it is
    // another finding about the CRD, never a failed step of this request.
    for s in doc["path"].as_array().unwrap() {
        assert_ne!(s["state"], "failed", "{s:?}");
    }
    for f in doc["other_findings"].as_array().into_iter().flatten() {
        assert_eq!(
            f["subject"],
            "CustomResourceDefinition/crontabs.stable.example.com"
        );
    }
    assert_eq!(step(&doc, "storage")["state"], "passed");
    server.shutdown().await;
}

/// Poll `f` until it is true (the server's gauges change asynchronously).
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_apf_rejection_of_the_flooding_user_is_apf() {
    // One seat and a queue of one: hold the seat and fill the queue, then ask why as the flooder.
    let text = std::fs::read_to_string(repo().join("fixtures/scenarios/apf-saturation.yaml"))
        .unwrap()
        .replace("latencyMs: 200", "hold: true");
    assert!(
        text.contains("hold: true"),
        "the scenario's slow list moved: {text}"
    );
    // Idle: the scenario's own burst traffic would take the seat and the queue the test holds.
    let s = scenario::load_str(&text, "apf-saturation.yaml").unwrap();
    let server = RefServer::start(s, crate::refserver::IDLE).await.unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(server.ca_pem().as_bytes()).unwrap()])
        .build()
        .unwrap();
    let url = format!("{}/api/v1/namespaces/apf-load/configmaps", server.url());
    let send = || {
        let (c, u) = (client.clone(), url.clone());
        tokio::spawn(async move {
            c.get(u)
                .bearer_auth("flooder-token")
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    let gauge = |name: &str| {
        let prefix = format!("{name}{{flow_schema=\"flooders\",priority_level=\"tiny\"}} ");
        server
            .metrics_text()
            .lines()
            .find_map(|l| l.strip_prefix(&prefix)?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let executing = send();
    eventually("the seat is held", || {
        gauge("apiserver_flowcontrol_current_executing_seats") == 1.0
    })
    .await;
    let queued = send();
    eventually("the queue is full", || {
        gauge("apiserver_flowcontrol_current_inqueue_requests") == 1.0
    })
    .await;

    let path = "/api/v1/namespaces/apf-load/configmaps";
    let (r, _) = why(&server, &["LIST", path, "--as", "flooder", "-o", "json"]).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 429);
    assert_eq!(doc["request"]["headers"]["retry_after"], "1");
    assert_eq!(verdict(&doc), ("APF", "flowcontrol"));
    assert_eq!(doc["trace"]["flow_schema"]["name"], "flooders");
    assert_eq!(doc["trace"]["flow_schema"]["priority_level"], "tiny");
    assert_eq!(doc["trace"]["flow_schema_from_header"], "flooders");
    assert_eq!(step(&doc, "authz")["state"], "not_reached");
    assert_eq!(step(&doc, "storage")["state"], "not_reached");

    let (r, _) = why(&server, &["LIST", path, "--as", "flooder"]).await;
    assert_eq!(r.code, 1);
    insta::assert_snapshot!("apf_rejected", redact(&r.stdout));

    server.release_held();
    assert_eq!(executing.await.unwrap(), 200);
    assert_eq!(queued.await.unwrap(), 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_stall_is_storage() {
    let server = start("storage-slow-etcd").await;
    let (r, _) = why(
        &server,
        &[
            "GET",
            "/api/v1/namespaces/etcd-stall/configmaps?timeout=1s",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 504);
    assert_eq!(doc["request"]["status_body"]["reason"], "Timeout");
    assert_eq!(doc["trace"]["serving"], "built_in");
    assert_eq!(verdict(&doc), ("Storage", "storage"));
    let storage = step(&doc, "storage");
    assert!(
        storage["evidence"]
            .as_str()
            .unwrap()
            .contains("[-]etcd failed"),
        "{storage}"
    );

    // Without a timeout the list succeeds, in 2.5 s: slowed by storage, a warning.
    let (r, _) = why(
        &server,
        &[
            "LIST",
            "/api/v1/namespaces/etcd-stall/configmaps",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 200);
    assert_eq!(verdict(&doc), ("Storage", "storage"));
    assert_eq!(doc["verdict"]["severity"], "warning");
    assert_eq!(doc["verdict"]["rules"][0]["id"], "storage-request-slow");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_refusing_the_front_proxy_breaks_at_its_own_authn() {
    // kube-apiserver authenticated and authorized alice; the extension server refuses the
    // aggregator's front-proxy client certificate (its availability check gets 401).
    let server = start("auth-backend-401-front-proxy").await;
    let backends = backend_flags(&server);
    let mut args: Vec<&str> = vec!["GET", FLUNDERS, "--as", "alice", "-o", "json"];
    args.extend(backends.iter().map(String::as_str));
    let (r, _) = why(&server, &args).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 503);
    assert_eq!(verdict(&doc), ("Auth", "authn"));
    // kube-apiserver's own steps passed: the user was authenticated and authorized there.
    for rung in ["authn", "flowcontrol", "authz"] {
        let s = step(&doc, rung);
        assert_eq!(s["component"], "kube_apiserver", "{s}");
        assert_eq!(s["state"], "passed", "{rung}: {s}");
        assert!(!findings(s).1, "{rung}: {s}");
    }
    // The aggregator's check reached the extension through Service, endpoints and TLS.
    for rung in [
        "registration",
        "service",
        "port",
        "endpoints",
        "tls",
        "discovery",
    ] {
        assert_eq!(
            step(&doc, rung)["state"],
            "passed",
            "{rung}: {}",
            step(&doc, rung)
        );
    }
    let authn = extension_step(&doc, "authn");
    assert_eq!(authn["state"], "failed", "{authn}");
    let (rules, decides) = findings(authn);
    assert!(decides, "{authn}");
    assert!(
        rules.contains(&"auth-request-extension-rejects-aggregator")
            && rules.contains(&"auth-discovery-unauthorized"),
        "{rules:?}"
    );
    assert_eq!(extension_step(&doc, "authz")["state"], "not_reached");
    assert_eq!(extension_step(&doc, "verb")["state"], "not_reached");

    let mut human = vec!["GET", FLUNDERS, "--as", "alice"];
    human.extend(backends.iter().map(String::as_str));
    let (r, _) = why(&server, &human).await;
    assert!(
        r.stdout
            .contains("Auth, critical, broke at authn in the extension API server"),
        "{}",
        r.stdout
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_that_may_not_review_access_breaks_at_its_own_authz() {
    // The extension's service account has no system:auth-delegator: its SubjectAccessReview for
    // alice is forbidden (500). alice passed kube-apiserver's authorization; the RBAC objects
    // gathered for the path say which binding is missing, and nothing else.
    let server = start("auth-backend-403-delegated-authz").await;
    let backends = backend_flags(&server);
    let mut args: Vec<&str> = vec!["GET", FLUNDERS, "--as", "alice", "-o", "json"];
    args.extend(backends.iter().map(String::as_str));
    let (r, _) = why(&server, &args).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 500);
    assert_eq!(verdict(&doc), ("Auth", "authz"));
    assert_eq!(
        doc["verdict"]["rules"][0]["component"],
        "extension_apiserver"
    );
    for rung in ["authn", "authz", "tls", "discovery"] {
        let s = step(&doc, rung);
        assert_eq!(s["state"], "passed", "{rung}: {s}");
    }
    assert_eq!(extension_step(&doc, "authn")["state"], "passed");
    let authz = extension_step(&doc, "authz");
    assert_eq!(authz["state"], "failed", "{authz}");
    let (rules, decides) = findings(authz);
    assert!(decides, "{authz}");
    assert!(
        rules.contains(&"auth-request-extension-delegation-failed")
            && rules.contains(&"auth-delegation-rbac-auth-delegator"),
        "{rules:?}"
    );
    // The reader Role is bound in this scenario: with the RBAC objects gathered, no finding may
    // say it is missing (without them, an empty live bundle would).
    let all = serde_json::to_string(&doc["diagnosis"]).unwrap();
    assert!(!all.contains("auth-delegation-rbac-auth-reader"), "{all}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_externalname_backend_has_no_endpoints_by_design() {
    let server = start("aggregation-externalname-healthy").await;
    let port = server.backend_port("wardle").unwrap();
    let addr = format!("api.wardle-system=127.0.0.1:{port}");
    let (r, _) = why(
        &server,
        &[
            "GET",
            FLUNDERS,
            "--as",
            "alice",
            "--backend-address",
            &addr,
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 200);
    assert!(doc["verdict"].is_null(), "{}", doc["verdict"]);
    for s in doc["path"].as_array().unwrap() {
        assert_eq!(s["state"], "passed", "every step passed: {s}");
    }
    let endpoints = step(&doc, "endpoints");
    assert!(
        endpoints["evidence"]
            .as_str()
            .unwrap()
            .contains("ExternalName"),
        "{endpoints}"
    );
    for v in doc["diagnosis"]["verdicts"].as_array().unwrap() {
        assert_eq!(v["class"], "Healthy", "{v}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_write_while_etcd_hangs_is_storage_not_unreachable() {
    // The server answers /version and discovery; etcd never answers for ConfigMaps. The look-up
    // of the object and the dry-run create both time out: that is the storage's failure to
    // diagnose, never "the server could not be reached".
    let server = start("storage-etcd-hung-writes").await;
    let f = Files::new();
    let cm = f.write(
        "configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: why-probe\n  namespace: etcd-stall\ndata:\n  k: v\n",
    );
    let bounds = ["--request-timeout", "3s", "--timeout", "5s"];
    let mut args = vec!["--dry-run", "-f", cm.to_str().unwrap(), "-o", "json"];
    args.extend(bounds);
    let (r, _) = why(&server, &args).await;
    assert_eq!(r.code, 1, "exit by the critical verdict: {}", r.stderr);
    let doc = report(&r);
    assert_eq!(doc["request"]["method"], "POST");
    assert!(doc["request"]["status"].is_null(), "{}", doc["request"]);
    assert!(
        doc["request"]["error"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{}",
        doc["request"]
    );
    assert_eq!(doc["trace"]["serving"], "built_in");
    assert_eq!(verdict(&doc), ("Storage", "storage"));
    assert!(
        doc["diagnosis"]["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["source"] == "objects/configmaps/etcd-stall/why-probe"
                && g["reason"] == "timeout"),
        "the look-up that could not be made is a gap: {}",
        doc["diagnosis"]["gaps"]
    );
    // Nothing is stored: the one write carried dryRun=All.
    let writes: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|q| q.method != "GET")
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert!(writes[0].path.contains("dryRun=All"), "{writes:?}");

    // A list of the same resource: the same class.
    let mut args = vec![
        "LIST",
        "/api/v1/namespaces/etcd-stall/configmaps",
        "-o",
        "json",
    ];
    args.extend(bounds);
    let (r, _) = why(&server, &args).await;
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(verdict(&report(&r)), ("Storage", "storage"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_403_is_auth_and_a_warning() {
    let server = start("auth-user-forbidden").await;
    let args = ["GET", FLUNDERS, "--as", "bob", "--as-group", "developers"];
    let mut json = args.to_vec();
    json.extend(["-o", "json"]);
    let (r, _) = why(&server, &json).await;
    assert_eq!(
        r.code, 0,
        "a warning is below the default --fail-on critical: {}",
        r.stderr
    );
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 403);
    assert_eq!(verdict(&doc), ("Auth", "authz"));
    assert_eq!(doc["verdict"]["severity"], "warning");
    assert_eq!(step(&doc, "registration")["state"], "not_reached");

    let mut gate = args.to_vec();
    gate.extend(["--fail-on", "warning"]);
    let (r, _) = why(&server, &gate).await;
    assert_eq!(r.code, 1, "--fail-on warning counts it");
    insta::assert_snapshot!("auth_forbidden", redact(&r.stdout));
    // Piped output is not wrapped: grep finds the whole denial on one line.
    assert!(
        r.stdout.lines().any(|l| l.contains(
            r#"User "bob" cannot list resource "flunders" in API group "wardle.example.com" in the namespace "wardle-system""#
        )),
        "the denial is cut across lines: {}",
        r.stdout
    );

    // With the user's own token instead of impersonation, the evidence this user may not read
    // becomes gaps, and the verdict is the same.
    let (r, _) = why(
        &server,
        &["GET", FLUNDERS, "--token", "bob-token", "-o", "json"],
    )
    .await;
    let doc = report(&r);
    assert_eq!(verdict(&doc), ("Auth", "authz"));
    assert!(
        doc["diagnosis"]["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["reason"] == "forbidden"),
        "{}",
        doc["diagnosis"]["gaps"]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_is_read_for_a_short_time_and_its_end_recorded() {
    let server = start("watch-terminated-watchers").await;
    let (r, took) = why(
        &server,
        &[
            "WATCH",
            "/api/v1/namespaces/wardle-system/configmaps",
            "--watch-for",
            "20s",
            "-o",
            "json",
        ],
    )
    .await;
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 200);
    assert_eq!(
        doc["request"]["watch"]["end"], "closed",
        "{}",
        doc["request"]
    );
    assert!(
        took < Duration::from_secs(15),
        "the server's termination ends the watch before --watch-for: {took:?}"
    );
    let watch = step(&doc, "watch");
    assert!(
        watch["evidence"]
            .as_str()
            .unwrap()
            .contains("the server closed the stream"),
        "{watch}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_left_quiet_by_an_extension_that_went_away_is_aggregation() {
    // The extension server goes away a second after the first watch opened — why's own, as the
    // server is idle — and the stream stays open and quiet (then, with closeWatchesAfterMs, ends
    // without an ERROR event). From the stream alone it looks healthy; the APIService around it
    // does not.
    let text = std::fs::read_to_string(repo().join("fixtures/scenarios/watch-extension-gone.yaml"))
        .unwrap();
    let gone = "{downAfterFirstWatchMs: 1000}";
    assert!(text.contains(gone), "the scenario's behaviour moved");
    let watch = "/apis/wardle.example.com/v1alpha1/namespaces/wardle-system/flunders";
    for (behaviour, watch_for, end) in [
        (gone.to_string(), "4s", "unknown"),
        (
            "{downAfterFirstWatchMs: 1000, closeWatchesAfterMs: 3000}".to_string(),
            "10s",
            "closed",
        ),
    ] {
        let s = scenario::load_str(&text.replace(gone, &behaviour), "watch.yaml").unwrap();
        let server = RefServer::start(s, crate::refserver::IDLE).await.unwrap();
        let (r, _) = why(
            &server,
            &[
                "WATCH",
                watch,
                "--as",
                "alice",
                "--watch-for",
                watch_for,
                "-o",
                "json",
            ],
        )
        .await;
        assert_eq!(r.code, 1, "{behaviour}: {}", r.stderr);
        let doc = report(&r);
        assert_eq!(doc["request"]["status"], 200, "{behaviour}");
        let w = &doc["request"]["watch"];
        assert_eq!(w["end"], end, "{behaviour}: {w}");
        assert!(w["error_event"].is_null(), "{behaviour}: {w}");
        assert_eq!(verdict(&doc), ("Aggregation", "watch"), "{behaviour}");
        let (rules, decides) = findings(step(&doc, "watch"));
        assert!(
            decides && rules.contains(&"aggregation-request-watch-stale"),
            "{behaviour}: {rules:?}"
        );
        assert!(
            step(&doc, "discovery")["evidence"]
                .as_str()
                .unwrap()
                .contains("connection refused"),
            "{behaviour}: {}",
            step(&doc, "discovery")
        );
        // Every step was passed through: the stream opened and delivered its event.
        for st in doc["path"].as_array().unwrap() {
            assert_ne!(st["state"], "not_reached", "{behaviour}: {st}");
        }
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_slowed_by_a_webhook_is_an_admission_warning() {
    // A fail-open webhook answering in about 8 s: the dry-run create succeeds, slowly. The
    // webhook's mean call over the window (exact, although 1.24's histogram stops at 2.5 s) is most
    // of the request's latency.
    let server = start("v1-24-admission-webhook-slow-ignore").await;
    let f = Files::new();
    let cm = f.write(
        "configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: why-probe\n  namespace: wh-guarded\ndata:\n  k: v\n",
    );
    let file = cm.to_str().unwrap();
    let args = ["--dry-run", "-f", file, "--request-timeout", "20s"];
    let mut json = args.to_vec();
    json.extend(["-o", "json"]);
    let (r, _) = why(&server, &json).await;
    assert_eq!(
        r.code, 0,
        "a warning is below the default --fail-on critical: {}",
        r.stderr
    );
    let doc = report(&r);
    assert_eq!(doc["request"]["status"], 201);
    assert_eq!(verdict(&doc), ("Admission", "admission"));
    assert_eq!(doc["verdict"]["severity"], "warning");
    let summary = doc["verdict"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("webhook policy.webhook.example.com takes")
            && summary.contains(" s per call"),
        "names the webhook and the time: {summary}"
    );
    assert_eq!(
        doc["request"]["admitted_by"][0]["name"],
        "policy.webhook.example.com"
    );
    // The marks agree with the verdict: admission broke (slowly), nothing is "not reached" in a
    // request that went through, and no ✓ sits above the webhook that took the time.
    for st in doc["path"].as_array().unwrap() {
        assert_ne!(st["state"], "not_reached", "{st}");
        if st["rung"] == "admission" {
            assert_eq!(st["state"], "failed", "{st}");
        }
    }
    let head = step(&doc, "admission");
    assert!(
        head["evidence"]
            .as_str()
            .unwrap()
            .starts_with("called for this write: ValidatingWebhook/policy.webhook.example.com"),
        "{head}"
    );
    assert_eq!(step(&doc, "storage")["state"], "passed");

    let mut gate = args.to_vec();
    gate.extend(["--fail-on", "warning"]);
    let (r, _) = why(&server, &gate).await;
    assert_eq!(r.code, 1, "--fail-on warning counts it: {}", r.stderr);
    assert!(
        r.stdout
            .contains("Verdict   Admission, warning, slow at admission"),
        "{}",
        r.stdout
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_and_an_unreachable_server_exits_3() {
    let server = start("healthy").await;
    for (args, want) in [
        (vec!["POST", "/api/v1/namespaces/a/configmaps"], "dry run"),
        (vec!["GET", "api/v1/pods"], "not an absolute path"),
        (
            vec!["LIST", "/api/v1/namespaces/a/configmaps/x"],
            "LIST needs",
        ),
        (
            vec!["--dry-run", "-f", "/nonexistent/object.yaml"],
            "cannot read",
        ),
    ] {
        let (r, _) = why(&server, &args).await;
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
    let f = Files::new();
    let unknown = f.write(
        "thing.yaml",
        "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t}\n",
    );
    let (r, _) = why(&server, &["--dry-run", "-f", unknown.to_str().unwrap()]).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("example.com/v1"), "{}", r.stderr);
    // Nothing was written while refusing.
    assert!(server.requests().iter().all(|q| q.method == "GET"));

    // A closed port: nothing answers.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let kc = f.write(
        "kubeconfig",
        &server
            .kubeconfig(ClientAuth::Token)
            .replace(&server.url(), &format!("https://127.0.0.1:{port}")),
    );
    let (r, _) = extpath_run(
        &f,
        "why",
        vec![
            "GET".into(),
            "/api/v1/namespaces".into(),
            "--kubeconfig".into(),
            kc.display().to_string(),
        ],
    )
    .await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("could not be reached"), "{}", r.stderr);
    // A write against it: the same — nothing answers, so there is nothing to plan.
    let cm = f.write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: a}\n",
    );
    let (r, _) = extpath_run(
        &f,
        "why",
        vec![
            "--dry-run".into(),
            "-f".into(),
            cm.display().to_string(),
            "--kubeconfig".into(),
            kc.display().to_string(),
        ],
    )
    .await;
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("could not be reached"), "{}", r.stderr);
    server.shutdown().await;
}
