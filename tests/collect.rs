//! `collect` against the reference server, through the real binary: what it gathers, that it only
//! reads, that it keeps no secrets, that the least-privilege ClusterRole is enough, and every
//! kubectl connection flag it honours.
//!
//! Metrics windows are zero (one scrape) except where the window itself is under test; nothing
//! waits on a clock to see a server come up.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use extpath::refserver::{ClientAuth, RunningServer};
use serde_json::Value;

use crate::util::{Files, gaps, gaps_beyond_etcd, run, shipped_cluster_role, start, start_text};

fn backend(server: &RunningServer, svc_ns: &str, backend: &str) -> String {
    format!(
        "{svc_ns}=127.0.0.1:{}",
        server.backend_port(backend).expect("backend port")
    )
}

fn probes<'a>(b: &'a Value, rung: &str) -> Vec<&'a Value> {
    b["probes"]
        .as_array()
        .map(|ps| ps.iter().filter(|p| p["rung"] == rung).collect())
        .unwrap_or_default()
}

fn served_leaf<'a>(b: &'a Value, owner: &str) -> Option<&'a Value> {
    b["certificates"].as_array()?.iter().find(|c| {
        c["origin"]["source"] == "served_chain"
            && c["origin"]["chain_index"] == 0
            && c["origin"]["owner"]["name"] == owner
    })
}

// Read-only by construction (DESIGN §5): a tool run against a cluster in trouble must not add
// writes to it, so the test checks what the server saw, not what the collector says it did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_cluster_is_collected_whole_and_only_read() {
    let server = start("healthy").await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let wardle = backend(&server, "api.wardle-system", "wardle");
    let webhook = backend(&server, "policy.webhooks", "policy-webhook");
    // The server itself knows where its Services' backends listen.
    let known = server.backend_addresses();
    assert_eq!(
        format!("api.wardle-system={}", known["api.wardle-system"]),
        wardle
    );
    assert_eq!(
        format!("policy.webhooks={}", known["policy.webhooks"]),
        webhook
    );
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--window",
            "0",
            "-o",
            "json",
            "--backend-address",
            &wardle,
            "--backend-address",
            &webhook,
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    assert_eq!(b["collection"]["source"]["mode"], "live");
    assert_eq!(b["collection"]["server_version"]["git_version"], "v1.30.14");
    assert_eq!(b["collection"]["collected_at_basis"], "clock");
    let names: Vec<&str> = b["api_services"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert!(names.contains(&"v1alpha1.wardle.example.com"), "{names:?}");
    assert!(
        b["services"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "api")
    );
    assert!(
        b["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "api")
    );
    assert!(
        b["endpoint_slices"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    );
    assert!(
        b["webhooks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["name"] == "vwh-healthy.webhook.example.com")
    );
    let discovery = probes(&b, "discovery");
    assert_eq!(discovery.len(), 1);
    assert_eq!(discovery[0]["status"], 200);
    assert_eq!(
        discovery[0]["target"]["name"],
        "v1alpha1.wardle.example.com"
    );
    let list = probes(&b, "verb");
    assert_eq!(list[0]["status"], 200, "{list:?}");
    assert!(
        list[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("/flunders?limit=1")
    );
    for owner in [
        "v1alpha1.wardle.example.com",
        "vwh-healthy.webhook.example.com",
    ] {
        let leaf = served_leaf(&b, owner).unwrap_or_else(|| panic!("no served chain for {owner}"));
        assert_eq!(leaf["verification"]["ok"], true, "{owner}: {leaf}");
    }
    let metrics = &b["metrics"][0];
    assert_eq!(metrics["target"], "apiserver");
    assert!(metrics.get("window").is_none(), "one scrape has no window");
    assert!(
        b["health_checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["ok"] == true)
    );
    assert!(b["flow_schemas"].as_array().is_some_and(|f| !f.is_empty()));
    assert!(gaps_beyond_etcd(&b).is_empty(), "{:?}", gaps(&b));

    // Read-only: only GETs reached the server (lists and watches are GETs too).
    let writes: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect();
    assert!(writes.is_empty(), "collect sent {writes:?}");
    // No secrets: not the bearer token it used, no private key, no Secret objects.
    assert!(!r.stdout.contains(server.admin_token()));
    assert!(!r.stdout.contains("PRIVATE KEY"));
    assert!(!r.stdout.contains("\"kind\": \"Secret\""));
    server.shutdown().await;
}

// kube-aggregator's availability probe skips CA and SAN checks, so `Available=True` sits beside a
// caBundle that real proxied requests reject (DESIGN §1 rule 7): the collector must do its own
// handshake against `<svc>.<ns>.svc`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn available_true_is_not_taken_on_trust() {
    let server = start("aggregation-wrong-ca").await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let wardle = backend(&server, "api.wardle-system", "wardle");
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--window",
            "0",
            "-o",
            "json",
            "--backend-address",
            &wardle,
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    let apisvc = b["api_services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "v1alpha1.wardle.example.com")
        .unwrap();
    assert_eq!(apisvc["conditions"][0]["status"], "True");
    let d = probes(&b, "discovery");
    assert_eq!(d[0]["status"], 503);
    assert!(
        d[0]["body"]
            .as_str()
            .unwrap()
            .contains("x509: certificate signed by unknown authority"),
        "{}",
        d[0]
    );
    let leaf = served_leaf(&b, "v1alpha1.wardle.example.com").unwrap();
    assert_eq!(leaf["verification"]["ok"], false);
    assert_eq!(
        leaf["verification"]["error"],
        "x509: certificate signed by unknown authority"
    );
    server.shutdown().await;
}

// One scrape of cumulative counters describes the server's whole life, not the incident
// (DESIGN §2); only two scrapes a window apart give rates and window quantiles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_scrapes_make_a_window() {
    let server = start("healthy").await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--window",
            "300ms",
            "-o",
            "json",
            "--skip-list-probe",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    let m = &b["metrics"][0];
    assert!(m["window"]["start"].is_string() && m["window"]["end"].is_string());
    assert_eq!(b["collection"]["metrics_window"], m["window"]);
    let requests = m["families"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "apiserver_request_total")
        .expect("apiserver_request_total");
    assert!(
        requests["series"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["window"]["delta"].is_number()),
        "every counter series has a delta over the window"
    );
    assert!(probes(&b, "verb").is_empty(), "--skip-list-probe");
    server.shutdown().await;
}

// Exit 3 is "the cluster could not be reached at all" (DESIGN §4): CI must tell it from "found a
// problem" (1), or a network blip pages someone about an extension API.
#[test]
fn an_unreachable_server_is_exit_3() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let f = Files::new();
    let r = run(
        f.path(),
        &[
            "collect",
            "--server",
            &format!("https://127.0.0.1:{port}"),
            "--insecure-skip-tls-verify",
            "--token",
            "x",
            "--window",
            "0",
            "--request-timeout",
            "2s",
        ],
        &[],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("could not be reached"), "{}", r.stderr);
}

const LIMITED: &str = r#"
apiVersion: extpath.dev/v1alpha1
kind: Scenario
name: limited-users
users:
  - name: nobody
    token: nobody-token
  - name: gate
    token: gate-token
    allow: RULES
  - name: deployer
    token: deployer-token
    allow:
      - {verbs: [impersonate], apiGroups: [""], resources: [users], namespaces: []}
objects:
  - {apiVersion: v1, kind: Namespace, metadata: {name: team-a}}
"#;

fn shipped_cluster_role_rules() -> String {
    serde_json::to_string(&shipped_cluster_role()["rules"]).unwrap()
}

// Real users run with partial RBAC: a 403 must become a gap that says what is missing, not a
// failed run. And the role the project ships must really be enough for a complete collection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_may_not_be_read_is_a_gap_and_the_shipped_role_is_enough() {
    let scenario = LIMITED.replace("RULES", &shipped_cluster_role_rules());
    let server = start_text(&scenario).await;
    let f = Files::new();
    let url = server.url();
    let ca = f.write("ca.crt", server.ca_pem());
    let common = [
        "collect",
        "--server",
        url.as_str(),
        "--certificate-authority",
        ca.to_str().unwrap(),
        "--window",
        "0",
        "-o",
        "json",
    ];

    let mut args = common.to_vec();
    args.extend(["--token", "nobody-token"]);
    let r = run(f.path(), &args, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let g = gaps(&r.bundle());
    assert!(
        g.contains(&("objects/apiservices".into(), "forbidden".into())),
        "{g:?}"
    );
    assert!(
        g.contains(&("metrics/apiserver".into(), "forbidden".into())),
        "{g:?}"
    );

    let before = server.requests().len();
    let mut args = common.to_vec();
    args.extend(["--token", "gate-token", "--skip-list-probe"]);
    let r = run(f.path(), &args, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    assert!(gaps_beyond_etcd(&b).is_empty(), "{:?}", gaps(&b));
    assert!(!b["metrics"].as_array().unwrap().is_empty());
    let gate_requests: Vec<_> = server.requests().into_iter().skip(before).collect();
    // The shipped role may impersonate the probes' ordinary users, by name, and nobody else.
    assert!(
        gate_requests.iter().all(|r| r.method == "GET"
            && [
                "gate",
                "extpath:delegation-probe",
                "extpath:authorizer-probe"
            ]
            .contains(&r.user.as_str())),
        "{:?}",
        gate_requests
            .iter()
            .map(|r| (&r.user, &r.path))
            .collect::<Vec<_>>()
    );
    assert!(
        gate_requests
            .iter()
            .any(|r| r.user == "extpath:authorizer-probe")
    );
    server.shutdown().await;
}

// `--as`/`--as-group` are how an admin checks what a user or controller sees; the headers must
// reach the server, or the diagnosis silently describes the admin's view.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_flags_are_sent() {
    let scenario = LIMITED.replace("RULES", "[]");
    let server = start_text(&scenario).await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--window",
            "0",
            "-o",
            "json",
            "--as",
            "nobody",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(gaps(&r.bundle()).contains(&("objects/apiservices".into(), "forbidden".into())));
    assert!(server.requests().iter().any(|r| r.user == "nobody"));
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--window",
            "0",
            "-o",
            "json",
            "--as",
            "someone",
            "--as-group",
            "system:masters",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        gaps_beyond_etcd(&r.bundle()).is_empty(),
        "a master may read everything"
    );
    assert!(server.requests().iter().any(|r| r.user == "someone"));
    server.shutdown().await;
}

/// A kubeconfig with two contexts: `good` and (current) `broken`.
fn two_contexts(server: &RunningServer, closed_port: u16) -> String {
    let base: Value = serde_saphyr::from_str(&server.kubeconfig(ClientAuth::Token)).unwrap();
    let cluster = base["clusters"][0]["cluster"].clone();
    let user = base["users"][0]["user"].clone();
    let mut broken = cluster.clone();
    broken["server"] = Value::String(format!("https://127.0.0.1:{closed_port}"));
    let doc = serde_json::json!({
        "apiVersion": "v1", "kind": "Config", "current-context": "broken",
        "clusters": [{"name": "good", "cluster": cluster}, {"name": "broken", "cluster": broken}],
        "users": [{"name": "u", "user": user}],
        "contexts": [
            {"name": "good", "context": {"cluster": "good", "user": "u"}},
            {"name": "broken", "context": {"cluster": "broken", "user": "u"}}
        ]
    });
    serde_json::to_string(&doc).unwrap()
}

const SLOW_LISTS: &str = r#"
apiVersion: extpath.dev/v1alpha1
kind: Scenario
name: slow-apiservice-lists
faults:
  storage:
    - {resource: apiservices, operations: [list], latencyMs: 3000}
"#;

// kubectl's connection semantics (REFERENCE §5): `--context` over current-context, KUBECONFIG
// when no flag, and a request timeout that cuts one slow list without failing the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_kubeconfig_env_and_request_timeout_are_honoured() {
    let server = start_text(SLOW_LISTS).await;
    let f = Files::new();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let kc = f.write("kubeconfig", &two_contexts(&server, closed_port));
    let kc = kc.to_str().unwrap();

    // The current context is broken: unreachable. --context good works, also through $KUBECONFIG
    // (a list, whose missing entries are skipped like kubectl does).
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc,
            "--window",
            "0",
            "--request-timeout",
            "2s",
        ],
        &[],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    let list = format!("/nonexistent/kubeconfig:{kc}");
    let r = run(
        f.path(),
        &[
            "collect",
            "--context",
            "good",
            "--window",
            "0",
            "-o",
            "json",
            "--request-timeout",
            "1s",
        ],
        &[("KUBECONFIG", list.as_str())],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    assert_eq!(b["collection"]["source"]["context"], "good");
    // Listing APIServices takes 3 s; that source gives up at --request-timeout and the rest of
    // the collection goes on.
    assert!(
        gaps(&b).contains(&("objects/apiservices".into(), "timeout".into())),
        "{:?}",
        gaps(&b)
    );
    assert!(b["health_checks"].as_array().is_some_and(|h| !h.is_empty()));
    server.shutdown().await;
}

// DESIGN §5 "Safe": the API server's certificate is verified unless the user asks otherwise,
// exactly as kubectl does with `--insecure-skip-tls-verify`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_the_api_server_is_verified_unless_told_otherwise() {
    let server = start("healthy").await;
    let f = Files::new();
    let mut kc: Value = serde_saphyr::from_str(&server.kubeconfig(ClientAuth::Token)).unwrap();
    kc["clusters"][0]["cluster"]
        .as_object_mut()
        .unwrap()
        .remove("certificate-authority-data");
    let kc = f.write("kubeconfig", &serde_json::to_string(&kc).unwrap());
    let kc = kc.to_str().unwrap();
    let r = run(
        f.path(),
        &["collect", "--kubeconfig", kc, "--window", "0"],
        &[],
    );
    assert_eq!(r.code, 3, "an unknown CA must fail: {}", r.stderr);
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc,
            "--window",
            "0",
            "-o",
            "json",
            "--insecure-skip-tls-verify",
            "--skip-list-probe",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_certificate_from_another_ca_is_refused_in_kubectls_words_with_the_fix() {
    use base64::Engine;
    let server = start("healthy").await;
    let f = Files::new();
    // The kubeconfig trusts a CA that did not sign the server's certificate.
    let other = extpath::pki::generate::TestCa::new(
        "some-other-ca",
        extpath::pki::generate::Validity::around(jiff::Timestamp::now(), 1, 30),
    )
    .unwrap();
    let mut kc: Value = serde_saphyr::from_str(&server.kubeconfig(ClientAuth::Token)).unwrap();
    kc["clusters"][0]["cluster"]["certificate-authority-data"] =
        base64::engine::general_purpose::STANDARD
            .encode(&other.cert_pem)
            .into();
    let kc = f.write("kubeconfig", &serde_json::to_string(&kc).unwrap());
    let kc = kc.to_str().unwrap();
    for sub in ["collect", "scan"] {
        let r = run(f.path(), &[sub, "--kubeconfig", kc, "--window", "0"], &[]);
        assert_eq!(r.code, 3, "{sub}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{sub}: {}", r.stdout);
        assert_eq!(r.stderr.lines().count(), 1, "{sub}: one line: {}", r.stderr);
        assert!(
            r.stderr.contains(
                "Unable to connect to the server: tls: failed to verify certificate: x509: \
                 certificate signed by unknown authority"
            ),
            "{sub}: kubectl's words: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains("--certificate-authority")
                && r.stderr.contains("--insecure-skip-tls-verify"),
            "{sub}: the flags that fix it: {}",
            r.stderr
        );
    }
    // The CA that did sign it, given with the flag the message names, fixes it.
    let ca = f.write("ca.crt", server.ca_pem());
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc,
            "--certificate-authority",
            ca.to_str().unwrap(),
            "--window",
            "0",
            "-o",
            "json",
            "--skip-list-probe",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    server.shutdown().await;
}

// The exporter runs as a Deployment (in-cluster service-account config), and managed clusters
// authenticate through exec credential plugins (`aws eks get-token`, `gke-gcloud-auth-plugin`):
// both paths must work or the tool cannot reach most real clusters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_cluster_configuration_and_exec_plugins_work() {
    let server = start("healthy").await;
    let f = Files::new();
    let sa = f.path().join("serviceaccount");
    std::fs::create_dir(&sa).unwrap();
    std::fs::write(sa.join("token"), server.admin_token()).unwrap();
    std::fs::write(sa.join("ca.crt"), server.ca_pem()).unwrap();
    std::fs::write(sa.join("namespace"), "wardle-system").unwrap();
    let port = server.addr().port().to_string();
    let r = run(
        f.path(),
        &[
            "collect",
            "--window",
            "0",
            "-o",
            "json",
            "--skip-list-probe",
        ],
        &[
            ("KUBERNETES_SERVICE_HOST", "127.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", port.as_str()),
            ("EXTPATH_SERVICEACCOUNT_DIR", sa.to_str().unwrap()),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(server.requests().iter().any(|r| r.user == "admin"));

    // An exec credential plugin that prints the token.
    let plugin = f.write(
        "credential-plugin",
        &format!(
            "#!/bin/sh\nprintf '%s' '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{}\"}}}}'\n",
            server.admin_token()
        ),
    );
    let mut perms = std::fs::metadata(&plugin).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&plugin, perms).unwrap();
    let mut kc: Value = serde_saphyr::from_str(&server.kubeconfig(ClientAuth::Token)).unwrap();
    kc["users"][0]["user"] = serde_json::json!({"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": plugin.to_str().unwrap(),
        "interactiveMode": "Never"
    }});
    let kc = f.write("kubeconfig-exec", &serde_json::to_string(&kc).unwrap());
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--window",
            "0",
            "-o",
            "json",
            "--skip-list-probe",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        gaps(&r.bundle())
            .iter()
            .all(|(_, reason)| reason != "unauthorized")
    );
    server.shutdown().await;
}

/// A minimal HTTP CONNECT proxy on 127.0.0.1 that counts tunnels.
fn connect_proxy() -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let tunnels = Arc::new(AtomicUsize::new(0));
    let count = tunnels.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut client) = conn else { continue };
            let count = count.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let Some(target) = head
                    .strip_prefix("CONNECT ")
                    .and_then(|r| r.split_whitespace().next())
                else {
                    return;
                };
                let Ok(mut upstream) = std::net::TcpStream::connect(target) else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                let _ = client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
                let mut c2 = client.try_clone().unwrap();
                let mut u2 = upstream.try_clone().unwrap();
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut u2, &mut c2);
                });
                let _ = std::io::copy(&mut client, &mut upstream);
            });
        }
    });
    (port, tunnels)
}

// Corporate networks reach API servers through a proxy, and kubectl honours HTTPS_PROXY and
// NO_PROXY; a tool that ignored them would report a healthy cluster as unreachable (exit 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_proxy_and_no_proxy_are_honoured_like_kubectl() {
    let server = start("healthy").await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let kc = kc.to_str().unwrap();
    let (port, tunnels) = connect_proxy();
    let proxy = format!("http://127.0.0.1:{port}");
    let args = [
        "collect",
        "--kubeconfig",
        kc,
        "--window",
        "0",
        "-o",
        "json",
        "--skip-list-probe",
    ];
    let r = run(f.path(), &args, &[("HTTPS_PROXY", proxy.as_str())]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        tunnels.load(Ordering::SeqCst) > 0,
        "requests went through the proxy"
    );
    let seen = tunnels.load(Ordering::SeqCst);
    let r = run(
        f.path(),
        &args,
        &[("HTTPS_PROXY", proxy.as_str()), ("NO_PROXY", "127.0.0.1")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        tunnels.load(Ordering::SeqCst),
        seen,
        "NO_PROXY bypasses the proxy"
    );
    server.shutdown().await;
}

// Probing admission means sending a write, so it is a server-side dry run (never stored,
// DESIGN §5), and in the namespace the user names: namespaceSelectors decide which webhooks
// intercept, so the wrong namespace would probe the wrong webhooks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_probes_are_dry_run_in_the_namespace_given() {
    let server = start("admission-webhook-down-ignore").await;
    let f = Files::new();
    let kc = f.write("kubeconfig", &server.kubeconfig(ClientAuth::Token));
    let r = run(
        f.path(),
        &[
            "collect",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--window",
            "0",
            "-o",
            "json",
            "--probe-admission",
            "-n",
            "wh-guarded",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();
    let adm = probes(&b, "admission");
    assert!(!adm.is_empty(), "an admission probe was sent");
    let writes: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect();
    assert!(!writes.is_empty());
    for w in &writes {
        assert_eq!(w.method, "POST");
        assert!(
            w.path.contains("dryRun=All"),
            "never without dry run: {}",
            w.path
        );
        assert!(
            w.path
                .starts_with("/api/v1/namespaces/wh-guarded/configmaps"),
            "{}",
            w.path
        );
    }
    server.shutdown().await;
}

/// A scan that could not read the core sources is never green: one critical Inconclusive per
/// source the server refused, and a headline that says the collection is incomplete; a scan whose
/// credentials the server rejects everywhere is kubectl's "You must be logged in" and exit 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incomplete_collection_fails_the_gate_and_no_credentials_is_exit_3() {
    let scenario = LIMITED.replace("RULES", "[]");
    let server = start_text(&scenario).await;
    let f = Files::new();
    let url = server.url();
    let ca = f.write("ca.crt", server.ca_pem());
    let common = [
        "scan",
        "--server",
        url.as_str(),
        "--certificate-authority",
        ca.to_str().unwrap(),
        "--window",
        "0",
        "-o",
        "json",
    ];

    let mut args = common.to_vec();
    args.extend(["--token", "nobody-token"]);
    let r = run(f.path(), &args, &[]);
    assert_eq!(r.code, 1, "the default gate fails: {}", r.stderr);
    let d: Value = serde_json::from_str(&r.stdout).unwrap();
    let sources: Vec<&Value> = d["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["subject"]["kind"] == "Source")
        .collect();
    let names: Vec<&str> = sources
        .iter()
        .map(|v| v["subject"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"objects/apiservices"), "{names:?}");
    assert!(
        names.contains(&"objects/customresourcedefinitions"),
        "{names:?}"
    );
    for v in &sources {
        assert_eq!(v["class"], "Inconclusive");
        assert_eq!(v["severity"], "critical");
        assert!(v["summary"].as_str().unwrap().contains("forbidden"), "{v}");
    }
    assert!(
        d["summary"]["headline"]
            .as_str()
            .unwrap()
            .starts_with("collection incomplete"),
        "{}",
        d["summary"]["headline"]
    );

    let mut args = common.to_vec();
    args.extend(["--token", "no-such-token"]);
    let r = run(f.path(), &args, &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("error: You must be logged in to the server (Unauthorized)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("--token"),
        "names the identity: {}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "one line: {}", r.stderr);
    server.shutdown().await;
}
