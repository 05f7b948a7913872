//! `import --raw` on the real captures: for every case in `fixtures/raw`, the evidence that decides
//! it (fixtures/raw-notes, expect.json) is recognised — and still is when every file is renamed to
//! a meaningless name, which proves detection never looks at file names.

use std::path::{Path, PathBuf};

use extpath::bundle::Kind;
use extpath::bundle::observations::{Component, HealthEndpoint};
use extpath::bundle::probes::WatchEnd;
use extpath::bundle::{
    EvidenceBundle, GapReason, LogFinding, MetricTarget, ObjectRef, Probe, TimeBasis,
};

use crate::util::repo;

fn case_dir(case: &str) -> PathBuf {
    repo().join("fixtures/raw").join(case)
}

/// A fixed import time, so undated cases are deterministic.
fn import_time() -> jiff::Timestamp {
    "2030-01-01T00:00:00Z".parse().unwrap()
}

fn import(dir: &Path) -> EvidenceBundle {
    extpath::bundle::raw::import_paths_at(&[dir.to_path_buf()], import_time())
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

const WARDLE: &str = "v1alpha1.wardle.example.com";

fn wardle() -> ObjectRef {
    ObjectRef::cluster(Kind::ApiService, WARDLE)
}

fn available(b: &EvidenceBundle) -> (String, String, String) {
    let a = b
        .api_service(WARDLE)
        .expect("APIService v1alpha1.wardle.example.com");
    let c = a.available().expect("Available condition");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn probe<'b>(b: &'b EvidenceBundle, what: &str, f: impl Fn(&Probe) -> bool) -> &'b Probe {
    b.probes
        .iter()
        .find(|p| f(p))
        .unwrap_or_else(|| panic!("no probe {what}; probes: {:#?}", b.probes))
}

fn says(p: &Probe, needle: &str) -> bool {
    p.error_texts().iter().any(|t| t.contains(needle))
}

fn finding<'b>(b: &'b EvidenceBundle, pattern: &str) -> &'b LogFinding {
    b.log_findings
        .iter()
        .find(|f| f.pattern == pattern)
        .unwrap_or_else(|| panic!("no log finding {pattern}; findings: {:#?}", b.log_findings))
}

/// The value of the series of `family` whose labels include all of `labels`.
fn metric(b: &EvidenceBundle, family: &str, labels: &[(&str, &str)]) -> f64 {
    let source = b
        .metrics_for(MetricTarget::Apiserver)
        .expect("kube-apiserver metrics");
    assert!(source.window.is_none(), "a single dump has no window");
    let fam = source
        .family(family)
        .unwrap_or_else(|| panic!("no family {family}"));
    fam.series
        .iter()
        .find(|s| {
            labels
                .iter()
                .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .and_then(|s| s.value.or(s.count))
        .unwrap_or_else(|| panic!("no series {family}{labels:?}"))
        .0
}

/// What holds for every imported case.
// What holds for every real capture, whatever it shows: the bundle loads back (it is a file people
// attach to incidents), raw import only ever yields client output (it never probed anything
// itself), and no key or token from the dumps survives (DESIGN §2).
fn invariants(case: &str, b: &EvidenceBundle) {
    let yaml = b.to_yaml().unwrap();
    extpath::bundle::load_bundle_str(&yaml, case)
        .unwrap_or_else(|e| panic!("{case}: the imported bundle does not load back: {e}"));
    assert!(
        b.probes
            .iter()
            .all(|p| p.origin.kind == extpath::bundle::probes::ProbeKind::ClientOutput)
    );
    assert!(!yaml.contains("PRIVATE KEY") && !yaml.to_lowercase().contains("bearer"));
    assert!(b.collection.collected_at.is_some());
    assert!(matches!(
        b.collection.source,
        extpath::bundle::CollectionSource::Raw { .. }
    ));
}

/// The deciding evidence of each case (fixtures/raw-notes/*.md, expect.json).
fn check(case: &str, b: &EvidenceBundle) {
    invariants(case, b);
    match case {
        "00-healthy" => {
            assert_eq!(available(b).0, "True");
            assert_eq!(available(b).1, "Passed");
            let p = probe(b, "GET discovery 200", |p| {
                p.status == Some(200)
                    && p.path.as_deref() == Some("/apis/wardle.example.com/v1alpha1")
                    && p.target == Some(wardle())
            });
            assert_eq!(p.method.as_deref(), Some("GET"));
            assert!(b.probes.iter().all(|p| p.status.is_none_or(|s| s < 400)));
            assert_eq!(
                metric(b, "aggregator_unavailable_apiservice", &[("name", WARDLE)]),
                0.0
            );
            // The served leaf verifies against the APIService's caBundle.
            let leaf = b
                .certificates
                .iter()
                .find(|c| c.subject == "CN=api.wardle-system.svc")
                .unwrap();
            let v = leaf.verification.as_ref().unwrap();
            assert!(v.ok, "{v:?}");
            assert_eq!(v.server_name, "api.wardle-system.svc");
            // Two etcd dumps: kube-apiserver's is kept, the extension's own etcd is a gap.
            assert!(b.metrics_for(MetricTarget::Etcd).is_some());
            assert!(
                b.gaps
                    .iter()
                    .any(|g| g.reason == GapReason::Skipped && g.detail.contains("another etcd"))
            );
            assert_eq!(
                b.collection.collected_at.unwrap().to_string(),
                "2026-11-29T08:42:19.964672Z"
            );
            assert_eq!(b.collection.collected_at_basis, Some(TimeBasis::Evidence));
        }
        "01-server-down-immediate" => {
            assert_eq!(available(b).0, "True", "not re-probed yet");
            let p = probe(b, "discovery 503 with the dial cause", |p| {
                p.status == Some(503)
                    && p.target == Some(wardle())
                    && p.status_body.as_ref().is_some_and(|s| {
                        s.causes
                            .iter()
                            .any(|c| c.message.contains("connection refused"))
                    })
            });
            assert_eq!(p.path.as_deref(), Some("/apis/wardle.example.com/v1alpha1"));
            probe(b, "plain-text proxy body", |p| {
                p.body.as_deref()
                    == Some(
                        "error trying to reach service: dial tcp 127.0.0.1:8443: connect: connection refused",
                    )
            });
            assert_eq!(
                metric(b, "aggregator_unavailable_apiservice", &[("name", WARDLE)]),
                0.0
            );
        }
        "01-server-down-settled" => {
            let (status, reason, message) = available(b);
            assert_eq!(
                (status.as_str(), reason.as_str()),
                ("False", "FailedDiscoveryCheck")
            );
            assert!(message.contains("connection refused"));
            assert_eq!(
                metric(b, "aggregator_unavailable_apiservice", &[("name", WARDLE)]),
                1.0
            );
            let f = finding(b, "apiservice-check-failed");
            assert_eq!(f.target, Some(wardle()));
            assert_eq!(f.component, Component::KubeApiserver);
            assert!(f.count > 1);
            probe(b, "503 service unavailable", |p| {
                p.status == Some(503) && says(p, "service unavailable")
            });
        }
        "02-service-missing-immediate" | "02-service-missing-settled" => {
            let (status, reason, _) = available(b);
            assert_eq!(
                (status.as_str(), reason.as_str()),
                ("False", "ServiceNotFound")
            );
            assert!(b.service("wardle-system", "api").is_none());
            probe(b, "503 on the APIService", |p| {
                p.status == Some(503) && p.target == Some(wardle())
            });
            let f = finding(b, "apiservice-availability-changed");
            assert_eq!(f.fields["reason"], "ServiceNotFound");
        }
        "05-cabundle-ca-immediate" | "05-cabundle-ca-settled" => {
            assert_eq!(
                available(b).0,
                "True",
                "the availability probe skips TLS verification"
            );
            probe(b, "503 with the x509 cause", |p| {
                p.status == Some(503)
                    && p.target == Some(wardle())
                    && p.status_body.as_ref().is_some_and(|s| {
                        s.causes.iter().any(|c| {
                            c.message
                                .contains("x509: certificate signed by unknown authority")
                        })
                    })
            });
            let leaf = b
                .certificates
                .iter()
                .find(|c| c.subject == "CN=api.wardle-system.svc")
                .expect("served leaf");
            let v = leaf.verification.as_ref().expect("verified");
            assert!(!v.ok);
            assert!(
                v.error
                    .as_deref()
                    .unwrap()
                    .contains("signed by unknown authority"),
                "{v:?}"
            );
            assert!(v.trust.contains(WARDLE));
            assert_eq!(leaf.origin.owner, Some(wardle()));
            assert!(
                b.certificates
                    .iter()
                    .any(|c| c.subject == "CN=some-other-ca" && c.origin.owner == Some(wardle()))
            );
        }
        "08a-no-auth-delegator" => {
            assert_eq!(available(b).0, "True");
            probe(b, "500 SAR forbidden through the aggregated path", |p| {
                p.status == Some(500)
                    && p.target == Some(wardle())
                    && says(
                        p,
                        "subjectaccessreviews.authorization.k8s.io is forbidden: User \"wardle-apiserver\"",
                    )
            });
            let f = finding(b, "sar-forbidden");
            assert_eq!(f.fields["user"], "wardle-apiserver");
            assert_eq!(f.component, Component::ExtensionApiserver);
        }
        "08b-no-auth-reader-immediate" | "08b-no-auth-reader-settled" => {
            let f = finding(b, "auth-reader-forbidden");
            assert_eq!(f.fields["user"], "wardle-apiserver");
            assert_eq!(f.component, Component::ExtensionApiserver);
            finding(b, "auth-configmap-unreadable");
            let (status, reason, _) = available(b);
            assert_eq!(
                (status.as_str(), reason.as_str()),
                ("False", "FailedDiscoveryCheck")
            );
        }
        "08c-no-auth-reader-tolerate-lookup-failure" => {
            let (status, reason, message) = available(b);
            assert_eq!(
                (status.as_str(), reason.as_str()),
                ("False", "FailedDiscoveryCheck")
            );
            assert!(
                message.contains("bad status") && message.ends_with(": 403"),
                "{message}"
            );
            finding(b, "authn-config-skipped");
            assert!(finding(b, "apiservice-check-failed").fields["error"].contains("403"));
        }
        "08d-end-user-no-rbac" => {
            let p = probe(b, "403 Forbidden for bob", |p| {
                p.status == Some(403) && p.user.as_deref() == Some("bob")
            });
            assert_eq!(p.status_body.as_ref().unwrap().reason, "Forbidden");
            assert!(
                b.gaps
                    .iter()
                    .any(|g| g.source == "metrics/apiserver" && g.reason == GapReason::NotSupplied)
            );
        }
        "09-validating-webhook-unreachable" => {
            let hook = ObjectRef::cluster(
                Kind::ValidatingWebhook,
                "vwh-unreachable.webhook.example.com",
            );
            probe(b, "500 failed calling webhook", |p| {
                p.status == Some(500)
                    && p.target.as_ref() == Some(&hook)
                    && says(p, "failed calling webhook")
                    && says(p, "connection refused")
            });
            let w = b.webhooks.iter().find(|w| w.name == hook.name).unwrap();
            assert_eq!(
                (w.failure_policy.as_str(), w.effective_timeout_seconds),
                ("Fail", 5)
            );
            let labels = [
                ("error_type", "calling_webhook_error"),
                ("name", hook.name.as_str()),
            ];
            assert_eq!(
                metric(b, "apiserver_admission_webhook_rejection_count", &labels),
                4.0
            );
            assert_eq!(finding(b, "webhook-failing-closed").target, Some(hook));
        }
        "12-apf-queue-full" => {
            let labels = [("reason", "queue-full"), ("priority_level", "tiny")];
            assert!(metric(b, "apiserver_flowcontrol_rejected_requests_total", &labels) > 0.0);
            let fs = b
                .flow_schemas
                .iter()
                .find(|f| f.name == "flooders")
                .unwrap();
            assert!(fs.api_version.ends_with("/v1beta2"));
            let pl = b.priority_levels.iter().find(|p| p.name == "tiny").unwrap();
            assert!(pl.api_version.ends_with("/v1beta2"));
            assert_eq!(
                (pl.concurrency_shares, pl.queue_length_limit),
                (Some(1), Some(1))
            );
            let p = probe(b, "429 with Retry-After and the FlowSchema UID", |p| {
                p.status == Some(429)
                    && p.headers.retry_after.as_deref() == Some("1")
                    && p.headers.flow_schema_uid.as_deref() == Some(fs.uid.as_str())
            });
            assert_eq!(
                p.target,
                Some(ObjectRef::cluster(Kind::FlowSchema, "flooders"))
            );
            probe(b, "the flood folded into one probe", |p| {
                p.status_counts.get("429") == Some(&1964) && p.attempts == 2024
            });
            probe(b, "client-go retries folded", |p| {
                p.status == Some(429) && p.attempts == 10 && p.headers.retry_after.is_some()
            });
            assert!(b.apf_state.iter().any(|s| s.priority_level == "tiny"));
        }
        "13-etcd-stalled" => {
            for endpoint in [
                HealthEndpoint::ApiserverReadyz,
                HealthEndpoint::ApiserverLivez,
            ] {
                let h = b
                    .health_checks
                    .iter()
                    .find(|h| h.endpoint == endpoint)
                    .unwrap();
                assert!(!h.ok);
                let etcd = h.checks.iter().find(|c| c.name == "etcd").unwrap();
                assert!(!etcd.ok);
                assert_eq!(etcd.reason.as_deref(), Some("reason withheld"));
            }
            let p = probe(b, "504 Timeout", |p| {
                p.status == Some(504)
                    && p.status_body
                        .as_ref()
                        .is_some_and(|s| s.reason == "Timeout")
                    && p.attempts > 1
            });
            assert!(p.latency_ms.unwrap() > 9_000.0);
            let fam = b
                .metrics_for(MetricTarget::Apiserver)
                .unwrap()
                .family("etcd_request_duration_seconds")
                .unwrap();
            assert!(
                fam.series
                    .iter()
                    .any(|s| s.labels.get("operation").map(String::as_str) == Some("create"))
            );
            let f = finding(b, "etcd-no-server-preface");
            assert_eq!(f.component, Component::KubeApiserver);
            assert_eq!(f.fields["address"], "127.0.0.1:2379");
            finding(b, "etcd-health-failed");
        }
        "16a-watch-stale-after-extension-stop" => {
            let p = probe(b, "watch ended by the client's timeout", |p| {
                p.watch
                    .as_ref()
                    .is_some_and(|w| w.end == WatchEnd::ClientTimeout && w.events > 0)
            });
            assert_eq!(p.target, Some(wardle()));
            finding(b, "stopped-listening");
        }
        "16b-watch-too-old-resource-version" => {
            for msg in [
                "too old resource version: 1 (267)",
                "too old resource version: 1 (2)",
            ] {
                probe(b, msg, |p| {
                    p.watch
                        .as_ref()
                        .and_then(|w| w.error_event.as_ref())
                        .is_some_and(|e| {
                            e.code == Some(410) && e.reason == "Expired" && e.message == msg
                        })
                });
            }
            assert_eq!(b.collection.collected_at_basis, Some(TimeBasis::Import));
        }
        "16c-watch-stream-broken-extension-crash" => {
            probe(b, "broken watch (curl 92)", |p| {
                p.watch.as_ref().is_some_and(|w| {
                    w.end == WatchEnd::Broken
                        && w.end_detail
                            .as_deref()
                            .is_some_and(|d| d.contains("INTERNAL_ERROR"))
                })
            });
            probe(b, "broken watch (kubectl Status row)", |p| {
                p.watch.as_ref().is_some_and(|w| w.end == WatchEnd::Broken)
                    && says(p, "unable to decode an event from the watch stream")
            });
            let f = finding(b, "reverse-proxy-body-copy-error");
            assert_eq!(f.component, Component::KubeApiserver);
            assert_eq!(f.count, 2);
        }
        "20a-mutating-webhook-unreachable" => {
            let hook =
                ObjectRef::cluster(Kind::MutatingWebhook, "mwh-unreachable.webhook.example.com");
            probe(b, "500 failed calling webhook", |p| {
                p.status == Some(500)
                    && p.target.as_ref() == Some(&hook)
                    && says(p, "connection refused")
            });
            let w = b.webhooks.iter().find(|w| w.name == hook.name).unwrap();
            assert_eq!(
                (w.failure_policy.as_str(), w.effective_timeout_seconds),
                ("Fail", 5)
            );
            let labels = [
                ("error_type", "calling_webhook_error"),
                ("name", hook.name.as_str()),
                ("type", "admit"),
            ];
            assert_eq!(
                metric(b, "apiserver_admission_webhook_rejection_count", &labels),
                2.0
            );
            assert_eq!(finding(b, "webhook-failing-closed").target, Some(hook));
        }
        "20b-validating-webhook-policy-deny" => {
            let hook = ObjectRef::cluster(Kind::ValidatingWebhook, "vwh-deny.webhook.example.com");
            probe(b, "403 denied the request", |p| {
                p.status == Some(403)
                    && p.target.as_ref() == Some(&hook)
                    && says(p, "denied the request")
            });
            let labels = [("error_type", "no_error"), ("name", hook.name.as_str())];
            assert_eq!(
                metric(b, "apiserver_admission_webhook_rejection_count", &labels),
                2.0
            );
            assert_eq!(finding(b, "webhook-rejected").fields["code"], "403");
        }
        other => panic!("case {other} has no assertions: add them"),
    }
}

/// Copy a case under meaningless names (`f17.dat`), shuffled, keeping or flattening directories.
///
/// Real support folders are named by whoever gathered them (`out2.txt`, `metrics`, `new folder`):
/// import must tell each file by its content, and a case that only passes under its tidy
/// fixture names would hide that it does not.
fn copy_renamed(src: &Path, dst: &Path, flatten: bool) {
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                files(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    files(src, &mut all);
    let n = all.len();
    // A fixed permutation (multiplier coprime with n) so that sorted order is scrambled.
    let mult = (2..n.max(3)).rev().find(|m| gcd(*m, n) == 1).unwrap_or(1);
    for (i, path) in all.iter().enumerate() {
        let name = format!("f{}.dat", (i * mult + 7) % n.max(1));
        let target = if flatten {
            dst.join(name)
        } else {
            let rel = path.parent().unwrap().strip_prefix(src).unwrap();
            let dirs: PathBuf = rel
                .components()
                .enumerate()
                .map(|(k, _)| format!("d{k}"))
                .collect();
            dst.join(dirs).join(name)
        };
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(path, &target).unwrap();
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn run_case(case: &str) {
    let started = std::time::Instant::now();
    let b = import(&case_dir(case));
    let elapsed = started.elapsed();
    check(case, &b);
    for flatten in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        copy_renamed(&case_dir(case), tmp.path(), flatten);
        let renamed = import(tmp.path());
        check(case, &renamed);
        // Curl parts no longer pair by name, so there may be more probes, never fewer objects.
        assert_eq!(renamed.api_services.len(), b.api_services.len(), "{case}");
        assert_eq!(renamed.log_findings.len(), b.log_findings.len(), "{case}");
    }
    eprintln!("{case}: imported in {elapsed:?}");
}

macro_rules! cases {
    ($($test:ident => $case:literal),* $(,)?) => {
        $(#[test] fn $test() { run_case($case); })*

        // A capture added to fixtures/raw/ without deciding what it must show would pass
        // silently; this makes adding its assertions part of adding it.
        #[test]
        fn every_case_directory_has_a_test() {
            let tested = [$($case),*];
            for e in std::fs::read_dir(repo().join("fixtures/raw")).unwrap() {
                let e = e.unwrap();
                if e.path().is_dir() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    assert!(tested.contains(&name.as_str()), "untested case {name}");
                }
            }
        }
    };
}

cases! {
    case_00_healthy => "00-healthy",
    case_01_server_down_immediate => "01-server-down-immediate",
    case_01_server_down_settled => "01-server-down-settled",
    case_02_service_missing_immediate => "02-service-missing-immediate",
    case_02_service_missing_settled => "02-service-missing-settled",
    case_05_cabundle_ca_immediate => "05-cabundle-ca-immediate",
    case_05_cabundle_ca_settled => "05-cabundle-ca-settled",
    case_08a_no_auth_delegator => "08a-no-auth-delegator",
    case_08b_no_auth_reader_immediate => "08b-no-auth-reader-immediate",
    case_08b_no_auth_reader_settled => "08b-no-auth-reader-settled",
    case_08c_tolerate_lookup_failure => "08c-no-auth-reader-tolerate-lookup-failure",
    case_08d_end_user_no_rbac => "08d-end-user-no-rbac",
    case_09_validating_webhook_unreachable => "09-validating-webhook-unreachable",
    case_12_apf_queue_full => "12-apf-queue-full",
    case_13_etcd_stalled => "13-etcd-stalled",
    case_16a_watch_stale => "16a-watch-stale-after-extension-stop",
    case_16b_watch_too_old => "16b-watch-too-old-resource-version",
    case_16c_watch_broken => "16c-watch-stream-broken-extension-crash",
    case_20a_mutating_webhook_unreachable => "20a-mutating-webhook-unreachable",
    case_20b_validating_webhook_deny => "20b-validating-webhook-policy-deny",
}
