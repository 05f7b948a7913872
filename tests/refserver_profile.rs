//! The reference server's release profiles held against real servers.
//!
//! On `server.version: v1.24.17` the server must expose what the real 1.24 kube-apiserver of the
//! captures (`fixtures/raw/*/kube-apiserver-metrics.txt`, `kas-readyz.txt`, `kas-livez.txt`)
//! exposes: every family it emits that a capture also has, with the same type, label names and
//! bucket bounds; no family that only a later release names; health checks that the real one runs.
//! On the default 1.30 profile the same workloads must show 1.30's names.
//!
//! The workloads are existing scenarios started with their traffic and the version changed; each
//! is scraped over HTTPS (polled until the families its traffic must produce are there — no
//! sleeps).

use std::collections::{BTreeMap, BTreeSet};

use extpath::bundle::metrics::KNOWN_FAMILIES;
use extpath::promtext::{MetricFamily, MetricKind, Selection, parse_str};
use extpath::refserver::{RefServer, RunningServer, StartOptions, scenario};

use crate::refserver::{eventually, get};
use crate::util::repo;

/// What a family looks like, as far as a rule or a dashboard depends on it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    kind: MetricKind,
    labels: BTreeSet<String>,
    /// Bucket bounds as exposed (`le` without `+Inf`), histograms only.
    buckets: BTreeSet<String>,
}

fn shapes(families: &[MetricFamily]) -> BTreeMap<String, Shape> {
    let mut out: BTreeMap<String, Shape> = BTreeMap::new();
    for f in families {
        let s = out.entry(f.name.clone()).or_insert_with(|| Shape {
            kind: f.kind,
            labels: BTreeSet::new(),
            buckets: BTreeSet::new(),
        });
        for series in &f.series {
            s.labels.extend(series.labels.keys().cloned());
            s.buckets.extend(
                series
                    .buckets
                    .iter()
                    .filter(|b| b.le.0.is_finite())
                    .map(|b| extpath::promtext::format_value(b.le.0)),
            );
        }
    }
    out
}

/// Every family of every real 1.24 capture, merged (label names and buckets unioned).
fn captured() -> BTreeMap<String, Shape> {
    let mut out: BTreeMap<String, Shape> = BTreeMap::new();
    for dir in std::fs::read_dir(repo().join("fixtures/raw")).unwrap() {
        let path = dir.unwrap().path().join("kube-apiserver-metrics.txt");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        assert!(
            text.contains("git_version=\"v1.24."),
            "{} is not a 1.24 capture",
            path.display()
        );
        for (name, shape) in shapes(&parse_str(&text, &Selection::all()).unwrap()) {
            match out.get_mut(&name) {
                Some(s) => {
                    assert_eq!(s.kind, shape.kind, "{name} has two types in the captures");
                    s.labels.extend(shape.labels);
                    s.buckets.extend(shape.buckets);
                }
                None => {
                    out.insert(name, shape);
                }
            }
        }
    }
    assert!(out.len() > 100, "the captures hold {} families", out.len());
    out
}

/// Health-check names of the captures' `kas-<endpoint>.txt` (`[+]name ok` lines, also inside
/// kubectl's quoted error).
fn captured_checks(endpoint: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for dir in std::fs::read_dir(repo().join("fixtures/raw")).unwrap() {
        let Ok(text) =
            std::fs::read_to_string(dir.unwrap().path().join(format!("kas-{endpoint}.txt")))
        else {
            continue;
        };
        for part in text.replace("\\n", "\n").lines() {
            let part = part.trim_start_matches(|c| c != '[');
            if let Some(rest) = part
                .strip_prefix("[+]")
                .or_else(|| part.strip_prefix("[-]"))
            {
                out.insert(rest.split(' ').next().unwrap_or_default().to_string());
            }
        }
    }
    assert!(!out.is_empty(), "no kas-{endpoint}.txt in fixtures/raw");
    out
}

/// A scenario whose traffic exercises some families, requests the test sends once it runs
/// (method, path, JSON body), and the families that must be there on each profile before it is
/// scraped.
struct Workload {
    scenario: &'static str,
    pokes: &'static [(&'static str, &'static str, &'static str)],
    on_1_24: &'static [&'static str],
    on_1_30: &'static [&'static str],
}

const WORKLOADS: &[Workload] = &[
    Workload {
        pokes: &[],
        scenario: "admission-conversion-webhook-down",
        on_1_24: &[
            "apiserver_crd_webhook_conversion_duration_seconds",
            "etcd_request_duration_seconds",
            "apiserver_request_duration_seconds",
            "kubernetes_build_info",
        ],
        on_1_30: &[
            "apiserver_crd_conversion_webhook_duration_seconds",
            "apiserver_conversion_webhook_request_total",
            "apiserver_conversion_webhook_duration_seconds",
            "etcd_requests_total",
            "kubernetes_build_info",
        ],
    },
    Workload {
        pokes: &[],
        scenario: "admission-webhook-down-ignore",
        on_1_24: &[
            "apiserver_admission_webhook_admission_duration_seconds",
            "apiserver_admission_webhook_fail_open_count",
            "apiserver_admission_webhook_request_total",
        ],
        on_1_30: &["apiserver_admission_webhook_admission_duration_seconds"],
    },
    Workload {
        pokes: &[],
        scenario: "admission-webhook-down-fail",
        on_1_24: &["apiserver_admission_webhook_rejection_count"],
        on_1_30: &["apiserver_admission_webhook_rejection_count"],
    },
    Workload {
        pokes: &[],
        scenario: "apf-saturation",
        on_1_24: &[
            "apiserver_flowcontrol_rejected_requests_total",
            "apiserver_flowcontrol_request_wait_duration_seconds",
            "apiserver_flowcontrol_request_concurrency_limit",
            "apiserver_flowcontrol_request_concurrency_in_use",
            "apiserver_flowcontrol_current_inqueue_requests",
            "apiserver_request_terminations_total",
            "apiserver_dropped_requests_total",
        ],
        on_1_30: &[
            "apiserver_flowcontrol_nominal_limit_seats",
            "apiserver_flowcontrol_current_executing_seats",
            "apiserver_flowcontrol_request_concurrency_limit",
            "apiserver_flowcontrol_request_concurrency_in_use",
        ],
    },
    Workload {
        scenario: "watch-terminated-watchers",
        // An event for the watching controller, and an APIService that stops being available.
        pokes: &[
            (
                "POST",
                "/api/v1/namespaces/default/configmaps",
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"poke"}}"#,
            ),
            (
                "DELETE",
                "/api/v1/namespaces/wardle-system/services/api",
                "",
            ),
        ],
        on_1_24: &[
            "apiserver_terminated_watchers_total",
            "apiserver_watch_events_total",
            "aggregator_unavailable_apiservice_total",
        ],
        on_1_30: &[
            "apiserver_terminated_watchers_total",
            "apiserver_watch_events_total",
            "aggregator_unavailable_apiservice_total",
        ],
    },
    Workload {
        pokes: &[],
        scenario: "aggregation-backend-down",
        on_1_24: &["aggregator_unavailable_apiservice"],
        on_1_30: &["aggregator_unavailable_apiservice"],
    },
];

/// Families a 1.24 kube-apiserver has but that no capture recorded a series of (a vector with no
/// series is not exposed at all).
const IN_1_24_BUT_NOT_CAPTURED: &[(&str, &str)] = &[
    (
        "apiserver_terminated_watchers_total",
        "cacher metrics since before 1.24; no capture terminated a watcher",
    ),
    (
        "apiserver_admission_webhook_fail_open_count",
        "kubernetes PR #107171 (1.24); no capture had a fail-open webhook",
    ),
];

/// Families only releases after 1.24 name: the server must not show them on 1.24.
const NEWER_THAN_1_24: &[&str] = &[
    "apiserver_crd_conversion_webhook_duration_seconds",
    "apiserver_conversion_webhook_request_total",
    "apiserver_conversion_webhook_duration_seconds",
    "apiserver_flowcontrol_nominal_limit_seats",
    "apiserver_flowcontrol_current_executing_seats",
    "apiserver_storage_size_bytes",
    "apiserver_storage_db_total_size_in_bytes",
    "apiserver_watch_cache_read_wait_seconds",
    "apiserver_watch_cache_initializations_total",
    "etcd_requests_total",
    "etcd_request_errors_total",
];

struct Scraped {
    families: BTreeMap<String, Shape>,
    text: String,
    checks: BTreeMap<&'static str, BTreeSet<String>>,
    version: serde_json::Value,
}

async fn start(name: &str, version: &str) -> RunningServer {
    let path = repo()
        .join("fixtures/scenarios")
        .join(format!("{name}.yaml"));
    let mut s = scenario::load(&path).unwrap();
    s.server.version = Some(version.into());
    RefServer::start(
        s,
        StartOptions {
            port: 0,
            idle: false,
        },
    )
    .await
    .unwrap()
}

async fn send(server: &RunningServer, method: &str, path: &str, body: &str) -> u16 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(server.ca_pem().as_bytes()).unwrap()])
        .build()
        .unwrap();
    client
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            format!("{}{path}", server.url()),
        )
        .bearer_auth(server.admin_token())
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Start every workload on `version`, wait for the families its traffic must produce, and scrape
/// `/metrics`, the health endpoints and `/version` over HTTPS.
async fn scrape(version: &str, on_1_24: bool) -> Scraped {
    let mut servers = Vec::new();
    for w in WORKLOADS {
        let server = start(w.scenario, version).await;
        for (method, path, body) in w.pokes {
            let status = send(&server, method, path, body).await;
            assert!(status < 300, "{method} {path} on {}: {status}", w.scenario);
        }
        servers.push((w, server));
    }
    let mut families = BTreeMap::new();
    let mut text = String::new();
    for (w, server) in &servers {
        let needs = if on_1_24 { w.on_1_24 } else { w.on_1_30 };
        let metrics = eventually(&format!("{} on {version}", w.scenario), async || {
            let (status, _, body) = get(server, server.admin_token(), "/metrics").await;
            assert_eq!(status, 200);
            let have = shapes(&parse_str(&body, &Selection::all()).unwrap());
            needs
                .iter()
                .all(|n| have.contains_key(*n))
                .then_some((have, body))
        })
        .await;
        for (name, shape) in metrics.0 {
            let s = families.entry(name).or_insert_with(|| shape.clone());
            s.labels.extend(shape.labels);
            s.buckets.extend(shape.buckets);
        }
        text.push_str(&metrics.1);
    }
    let server = &servers[0].1;
    let mut checks = BTreeMap::new();
    for endpoint in ["readyz", "livez", "healthz"] {
        let (status, _, body) = get(
            server,
            server.admin_token(),
            &format!("/{endpoint}?verbose"),
        )
        .await;
        assert_eq!(status, 200, "{endpoint}: {body}");
        assert!(
            body.ends_with(&format!("{endpoint} check passed\n")),
            "{body}"
        );
        let names = body
            .lines()
            .filter_map(|l| l.strip_prefix("[+]"))
            .map(|l| l.trim_end_matches(" ok").to_string())
            .collect();
        checks.insert(endpoint, names);
    }
    let (_, _, body) = get(server, server.admin_token(), "/version").await;
    let version = serde_json::from_str(&body).unwrap();
    for (_, s) in servers {
        s.shutdown().await;
    }
    Scraped {
        families,
        text,
        checks,
        version,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_1_24_every_family_and_check_is_a_real_1_24_one() {
    let real = captured();
    let got = scrape("v1.24.17", true).await;

    let mut problems = Vec::new();
    for (name, shape) in &got.families {
        match real.get(name) {
            Some(r) => {
                if r.kind != shape.kind {
                    problems.push(format!("{name}: {:?}, 1.24 has {:?}", shape.kind, r.kind));
                }
                if r.labels != shape.labels {
                    problems.push(format!(
                        "{name}: labels {:?}, 1.24 has {:?}",
                        shape.labels, r.labels
                    ));
                }
                if r.buckets != shape.buckets {
                    problems.push(format!(
                        "{name}: buckets {:?}, 1.24 has {:?}",
                        shape.buckets, r.buckets
                    ));
                }
            }
            None if IN_1_24_BUT_NOT_CAPTURED.iter().any(|(n, _)| n == name) => {}
            None => problems.push(format!("{name}: not a family of the 1.24 captures")),
        }
    }
    // A renamed family (one entry of KNOWN_FAMILIES) is exposed under 1.24's name, never a later
    // one; and the families only later releases have stay away.
    for known in KNOWN_FAMILIES {
        let in_1_24: Vec<&str> = known.names().filter(|n| real.contains_key(*n)).collect();
        for n in known.names() {
            if got.families.contains_key(n) && !in_1_24.is_empty() && !in_1_24.contains(&n) {
                problems.push(format!("{n}: 1.24 names this family {in_1_24:?}"));
            }
        }
    }
    for n in NEWER_THAN_1_24 {
        if got.families.contains_key(*n) {
            problems.push(format!("{n}: only releases after 1.24 expose it"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // The webhook latency of a fail-open call that took longer than 2.5 s would land in +Inf: the
    // top finite bucket is 2.5 (REFERENCE §3.9).
    assert_eq!(
        got.families["apiserver_admission_webhook_admission_duration_seconds"]
            .buckets
            .last()
            .map(String::as_str),
        Some("2.5")
    );

    let ready = captured_checks("readyz");
    let live = captured_checks("livez");
    assert_eq!(got.checks["readyz"], ready, "readyz is the captured list");
    assert_eq!(got.checks["livez"], live, "livez is the captured list");
    // No capture of /healthz: kube-apiserver runs the livez checks there.
    assert_eq!(got.checks["healthz"], live);

    assert_eq!(got.version["gitVersion"], "v1.24.17");
    assert_eq!(got.version["minor"], "24");
    assert!(got.text.contains("kubernetes_build_info{build_date="));
    assert!(got.text.contains("git_version=\"v1.24.17\""));
    assert!(got.text.contains("minor=\"24\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_1_30_the_same_workloads_show_1_30_names() {
    let real_1_24 = captured();
    let got = scrape("v1.30.14", false).await;
    for old in [
        "apiserver_crd_webhook_conversion_duration_seconds",
        "etcd_db_total_size_in_bytes",
    ] {
        assert!(!got.families.contains_key(old), "{old} on 1.30");
    }
    assert_eq!(
        got.families["apiserver_admission_webhook_admission_duration_seconds"]
            .buckets
            .iter()
            .map(String::as_str)
            .collect::<BTreeSet<_>>(),
        BTreeSet::from(["0.005", "0.025", "0.1", "0.5", "1", "2.5", "10", "25"])
    );
    assert!(
        got.families["apiserver_flowcontrol_request_wait_duration_seconds"]
            .buckets
            .contains("15")
    );
    assert!(
        got.families["apiserver_request_duration_seconds"]
            .buckets
            .contains("0.005")
    );
    // The CRD conversion histogram kept its labels and buckets through the rename.
    assert_eq!(
        got.families["apiserver_crd_conversion_webhook_duration_seconds"],
        real_1_24["apiserver_crd_webhook_conversion_duration_seconds"]
    );
    // 1.30's health checks the server models: no 1.24-only ones.
    assert!(got.checks["readyz"].contains("informer-sync"));
    assert!(!got.checks["livez"].contains("informer-sync"));
    assert_eq!(got.version["gitVersion"], "v1.30.14");
    assert!(got.text.contains("git_version=\"v1.30.14\""));
}

#[test]
fn a_release_without_a_profile_is_refused_at_load_naming_the_line() {
    for (version, says) in [
        ("v1.23.17", "has profiles for 1.24 to 1.30"),
        ("v1.31.0", "has profiles for 1.24 to 1.30"),
        ("latest", "is not a Kubernetes version"),
    ] {
        let text = format!(
            "apiVersion: extpath.dev/v1alpha1\nkind: Scenario\nname: x\nserver:\n  version: {version}\n"
        );
        let e = scenario::load_str(&text, "inline.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("inline.yaml:5: "), "{e}");
        assert!(e.contains(says), "{e}");
    }
    let ok =
        "apiVersion: extpath.dev/v1alpha1\nkind: Scenario\nname: x\nserver: {version: v1.27.3}\n";
    assert_eq!(
        scenario::load_str(ok, "inline.yaml")
            .unwrap()
            .server
            .version
            .as_deref(),
        Some("v1.27.3")
    );
}

/// Reads of a CRD's non-storage version after its converter stopped, as `tests/real/fidelity.rs`
/// sees them on real servers: (a list, a list with `limit`, a GET). A 1.24 converts every read
/// (all fail); a 1.3x serves lists from a watch cache per version, converted when it filled, while
/// a GET converts on every call (lists answer, the GET fails).
async fn reads_after_the_converter_stops(version: &str) -> [u16; 3] {
    let path = repo().join("fixtures/scenarios/admission-conversion-webhook-down.yaml");
    let mut s = scenario::load(&path).unwrap();
    s.server.version = Some(version.into());
    s.traffic.clear();
    for b in &mut s.backends {
        b.behaviour.down = false;
    }
    let mut server = RefServer::start(
        s,
        StartOptions {
            port: 0,
            idle: false,
        },
    )
    .await
    .unwrap();
    let list = "/apis/stable.example.com/v2/namespaces/default/crontabs";
    assert_eq!(
        send(&server, "GET", list, "").await,
        200,
        "the list converts"
    );
    server.stop_backend("converter").await.unwrap();
    let got = [
        send(&server, "GET", list, "").await,
        send(&server, "GET", &format!("{list}?limit=500"), "").await,
        send(&server, "GET", &format!("{list}/nightly"), "").await,
    ];
    server.shutdown().await;
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_converter_fails_every_read_on_1_24_and_only_gets_on_1_30() {
    assert_eq!(
        reads_after_the_converter_stops("v1.24.17").await,
        [500, 500, 500],
        "1.24: (list, list?limit, get)"
    );
    assert_eq!(
        reads_after_the_converter_stops("v1.30.14").await,
        [200, 200, 500],
        "1.30: (list, list?limit, get)"
    );
}
