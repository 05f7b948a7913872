//! Hand-built diagnoses for the renderer tests, modelled on the real captures in `fixtures/raw/`
//! (their message texts, metric names and object names). They stand in for the engine's output so
//! that a renderer snapshot changes only when the renderer does, not when a rule's wording or
//! confidence is tuned; they are not used to judge anything.

use std::collections::BTreeMap;

use extpath::bundle::{Gap, GapReason, Rung};
use extpath::engine::diagnosis::*;
use extpath::engine::gate;
use extpath::engine::waivers::{apply_waivers, parse_waivers};
use serde_json::{Value, json};

/// The moment every case's evidence describes (pinned: renderers never read the clock).
pub fn collected_at() -> jiff::Timestamp {
    "2026-11-29T08:47:30Z".parse().expect("valid timestamp")
}

fn webhook(kind: SubjectKind, name: &str, config: &str) -> Subject {
    Subject {
        parent: Some(config.to_string()),
        ..Subject::new(kind, name)
    }
}

fn hit(
    id: &str,
    class: Class,
    severity: Severity,
    rung: Rung,
    summary: &str,
    evidence: &[(&str, Value)],
) -> RuleHit {
    RuleHit {
        id: id.to_string(),
        class,
        severity,
        rung,
        component: Default::default(),
        summary: summary.to_string(),
        evidence: evidence
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    }
}

fn ruled_out(class: Class, because: &str, rule: &str) -> RuledOut {
    RuledOut {
        class,
        because: because.to_string(),
        rule: rule.to_string(),
    }
}

fn consequence(rule: &str, class: Class, rung: Rung, summary: &str) -> Consequence {
    Consequence {
        rule: rule.to_string(),
        class,
        rung,
        component: Default::default(),
        summary: summary.to_string(),
    }
}

/// A verdict decided by `rules` (the first one's class, severity, rung and summary).
fn verdict(subject: Subject, confidence: f64, rules: Vec<RuleHit>) -> Verdict {
    let first = rules
        .first()
        .expect("a verdict from rules has at least one rule");
    Verdict {
        class: first.class,
        severity: first.severity,
        confidence,
        rung: Some(first.rung),
        summary: first.summary.clone(),
        rules,
        ..Verdict::new(subject, Vec::new())
    }
}

fn healthy(subject: Subject, summary: &str, id: &str, evidence: &[(&str, Value)]) -> Verdict {
    verdict(
        subject,
        0.9,
        vec![hit(
            id,
            Class::Healthy,
            Severity::Info,
            Rung::Verb,
            summary,
            evidence,
        )],
    )
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Totals as the engine computes them, so every case is a consistent document.
fn diagnosis(verdicts: Vec<Verdict>, gaps: Vec<Gap>, headline: &str) -> Diagnosis {
    let mut by_class = BTreeMap::new();
    let mut by_severity = BTreeMap::new();
    for v in &verdicts {
        *by_class.entry(v.class.to_string()).or_insert(0) += 1;
        *by_severity.entry(v.severity.to_string()).or_insert(0) += 1;
    }
    let mut d = Diagnosis {
        api_version: DIAGNOSIS_API_VERSION.to_string(),
        kind: DIAGNOSIS_KIND.to_string(),
        collected_at: Some(collected_at()),
        problems: extpath::engine::problems::group(&verdicts),
        verdicts,
        gaps,
        waiver_notices: Vec::new(),
        summary: Summary {
            subjects: 0,
            by_class,
            by_severity,
            waived: 0,
            worst: Severity::Info,
            problems: 0,
            headline: headline.to_string(),
        },
    };
    d.summary.problems = extpath::engine::problems::open(&d.problems).count();
    d.summary.subjects = d.verdicts.len();
    d.summary.worst = gate::worst(&d.verdicts);
    d
}

fn storage_ruled_out() -> RuledOut {
    ruled_out(
        Class::Storage,
        "etcd_request_duration_seconds p99 is 0.012s over the 30s window and readyz reports etcd ok",
        "storage-etcd-latency-normal",
    )
}

fn apf_ruled_out() -> RuledOut {
    ruled_out(
        Class::Apf,
        "apiserver_flowcontrol_rejected_requests_total did not increase in the window",
        "apf-no-rejections",
    )
}

fn healthy_apiserver() -> Verdict {
    healthy(
        Subject::new(SubjectKind::ApiServer, "kube-apiserver"),
        "readyz ok, no APF rejections, request latency normal",
        "apiserver-healthy",
        &[
            ("readyz", json!("ok (47 checks)")),
            ("rejected_requests_rate", json!(0.0)),
        ],
    )
}

/// (a) The aggregated API `v1alpha1.wardle.example.com` after its caBundle was replaced by an
/// unrelated CA: Available=True (the availability probe skips TLS), every real request 503 with
/// an x509 error (capture `05-cabundle-ca-settled`).
pub fn aggregation_wrong_ca_bundle() -> Diagnosis {
    let tls_summary = "caBundle does not trust the extension server's serving certificate \
        (x509: certificate signed by unknown authority); Available=True hides it because the \
        availability probe skips TLS verification";
    let mut api = verdict(
        Subject::new(SubjectKind::ApiService, "v1alpha1.wardle.example.com"),
        0.95,
        vec![
            hit(
                "aggregation-tls-unknown-authority",
                Class::Aggregation,
                Severity::Critical,
                Rung::Tls,
                tls_summary,
                &[
                    ("ca_bundle_subjects", json!(["CN=some-other-ca"])),
                    ("server_name", json!("api.wardle-system.svc")),
                    ("served_issuer", json!("CN=wardle-ca")),
                    (
                        "verification_error",
                        json!("x509: certificate signed by unknown authority"),
                    ),
                ],
            ),
            hit(
                "aggregation-available-but-proxy-fails",
                Class::Aggregation,
                Severity::Critical,
                Rung::Tls,
                "APIService reports Available=True while proxied requests fail",
                &[
                    ("available", json!("True (Passed: all checks passed)")),
                    ("probe_status", json!(503)),
                    (
                        "probe_body",
                        json!(
                            "error trying to reach service: tls: failed to verify certificate: \
                             x509: certificate signed by unknown authority"
                        ),
                    ),
                ],
            ),
        ],
    );
    api.ruled_out = vec![
        storage_ruled_out(),
        apf_ruled_out(),
        ruled_out(
            Class::Admission,
            "the failing requests are reads (GET); admission webhooks only run on writes",
            "admission-not-on-reads",
        ),
    ];
    api.consequences = vec![
        consequence(
            "aggregation-discovery-unavailable",
            Class::Aggregation,
            Rung::Discovery,
            "GET /apis/wardle.example.com/v1alpha1 returns 503: the server is currently unable \
             to handle the request",
        ),
        consequence(
            "aggregation-discovery-incomplete",
            Class::Aggregation,
            Rung::Discovery,
            "kubectl api-resources fails: unable to retrieve the complete list of server APIs: \
             wardle.example.com/v1alpha1",
        ),
    ];
    api.next = strings(&[
        "kubectl get apiservice v1alpha1.wardle.example.com -o jsonpath='{.spec.caBundle}' | base64 -d | openssl x509 -noout -subject",
        "kubectl get --raw /apis/wardle.example.com/v1alpha1",
        "kubectl extpath explain aggregation-tls-unknown-authority",
    ]);

    let mut request = verdict(
        Subject::new(SubjectKind::Request, "get flunders.wardle.example.com"),
        0.9,
        vec![hit(
            "request-aggregated-503",
            Class::Aggregation,
            Severity::Critical,
            Rung::Tls,
            "kubectl gets 503 ServiceUnavailable from the aggregated API; the proxy's inner error is x509",
            &[
                ("status", json!(503)),
                (
                    "client_message",
                    json!(
                        "Error from server (ServiceUnavailable): the server is currently unable \
                         to handle the request (get flunders.wardle.example.com)"
                    ),
                ),
            ],
        )],
    );
    request.related = vec![Subject::new(
        SubjectKind::ApiService,
        "v1alpha1.wardle.example.com",
    )];
    request.ruled_out = vec![storage_ruled_out()];
    request.next = strings(&[
        "kubectl extpath why GET /apis/wardle.example.com/v1alpha1/namespaces/default/flunders",
    ]);

    let etcd = healthy(
        Subject::new(SubjectKind::Etcd, "etcd"),
        "etcd request latency is normal and there are no etcd errors",
        "storage-etcd-latency-normal",
        &[("etcd_request_p99_seconds", json!(0.012))],
    );

    diagnosis(
        vec![healthy_apiserver(), etcd, request, api],
        Vec::new(),
        "APIService/v1alpha1.wardle.example.com is broken at tls: its caBundle does not trust the \
         serving certificate, so every proxied request gets 503 although Available=True",
    )
}

/// (b) A validating webhook whose URL refuses connections, with failurePolicy Fail: ConfigMap
/// creates fail with 500 while etcd is healthy (capture `09-validating-webhook-unreachable`); the
/// aggregated API beside it is healthy.
pub fn admission_webhook_unreachable() -> Diagnosis {
    let client_error = "Internal error occurred: failed calling webhook \
        \"vwh-unreachable.webhook.example.com\": failed to call webhook: Post \
        \"https://127.0.0.1:9444/validate?timeout=5s\": dial tcp 127.0.0.1:9444: connect: \
        connection refused";
    let mut wh = verdict(
        webhook(
            SubjectKind::ValidatingWebhook,
            "vwh-unreachable.webhook.example.com",
            "vwh-unreachable",
        ),
        0.95,
        vec![hit(
            "admission-webhook-unreachable-fail-closed",
            Class::Admission,
            Severity::Critical,
            Rung::Admission,
            "Webhook backend refuses connections and failurePolicy is Fail: every matching \
             write is rejected",
            &[
                ("failure_policy", json!("Fail")),
                ("target", json!("url https://127.0.0.1:9444/validate")),
                ("operations", json!(["CREATE configmaps"])),
                ("timeout_seconds", json!(5)),
                ("client_error", json!(client_error)),
                ("calling_webhook_errors_in_window", json!(4)),
            ],
        )],
    );
    wh.ruled_out = vec![
        ruled_out(
            Class::Storage,
            "etcd_request_duration_seconds p99 is 0.009s; the failed creates were rejected in \
             admission and never reached storage",
            "storage-etcd-latency-normal",
        ),
        apf_ruled_out(),
        ruled_out(
            Class::Auth,
            "the requests were authenticated and authorized: the error is raised by the webhook call",
            "auth-not-before-admission",
        ),
    ];
    wh.consequences = vec![consequence(
        "admission-writes-failing",
        Class::Admission,
        Rung::Verb,
        "CREATE configmaps in namespaces labelled webhook-test=s09 fail with HTTP 500",
    )];
    wh.next = strings(&[
        "kubectl get validatingwebhookconfiguration vwh-unreachable -o yaml",
        "kubectl get --raw /metrics | grep 'apiserver_admission_webhook_rejection_count{.*vwh-unreachable'",
        "kubectl extpath explain admission-webhook-unreachable-fail-closed",
    ]);

    let mut request = verdict(
        Subject::new(SubjectKind::Request, "create configmap"),
        0.9,
        vec![hit(
            "request-webhook-call-failed",
            Class::Admission,
            Severity::Critical,
            Rung::Admission,
            "The create failed in admission: failed calling webhook (connection refused)",
            &[
                ("status", json!(500)),
                ("client_error", json!(client_error)),
            ],
        )],
    );
    request.related = vec![webhook(
        SubjectKind::ValidatingWebhook,
        "vwh-unreachable.webhook.example.com",
        "vwh-unreachable",
    )];

    let api = healthy(
        Subject::new(SubjectKind::ApiService, "v1alpha1.wardle.example.com"),
        "Available=True; discovery answers 200 in 12 ms; the serving certificate verifies for \
         api.wardle-system.svc",
        "aggregation-path-healthy",
        &[
            ("available", json!("True (Passed)")),
            ("discovery_status", json!(200)),
        ],
    );

    diagnosis(
        vec![api, request, wh, healthy_apiserver()],
        Vec::new(),
        "ValidatingWebhook/vwh-unreachable.webhook.example.com rejects every matching write: its \
         backend refuses connections and failurePolicy is Fail",
    )
}

/// (c) A healthy cluster with one serving certificate close to expiry, and no etcd metrics.
pub fn healthy_with_expiring_cert() -> Diagnosis {
    let mut metrics = verdict(
        Subject::new(SubjectKind::ApiService, "v1beta1.metrics.k8s.io"),
        1.0,
        vec![hit(
            "aggregation-cert-expiring-soon",
            Class::Aggregation,
            Severity::Warning,
            Rung::Tls,
            "The serving certificate of metrics-server expires in 9 days, within cert_warn_days (14)",
            &[
                ("subject", json!("CN=metrics-server.kube-system.svc")),
                ("not_after", json!("2026-12-08T00:00:00Z")),
                ("days_left", json!(9)),
                ("cert_warn_days", json!(14)),
                (
                    "origin",
                    json!("served chain of 10.244.0.12:10250, position 0"),
                ),
            ],
        )],
    );
    metrics.next = strings(&[
        "kubectl -n kube-system get certificate,secret -l k8s-app=metrics-server",
        "kubectl extpath explain aggregation-cert-expiring-soon",
    ]);

    let wardle = healthy(
        Subject::new(SubjectKind::ApiService, "v1alpha1.wardle.example.com"),
        "Available=True; discovery answers 200; the serving certificate verifies",
        "aggregation-path-healthy",
        &[("discovery_status", json!(200))],
    );
    let kyverno = healthy(
        webhook(
            SubjectKind::ValidatingWebhook,
            "validate.kyverno.svc-fail",
            "kyverno-resource-validating-webhook-cfg",
        ),
        "Backend has 3 ready endpoints; admission latency p99 0.04s against a 10s timeout",
        "admission-webhook-healthy",
        &[("latency_p99_seconds", json!(0.04))],
    );
    let etcd = healthy(
        Subject::new(SubjectKind::Etcd, "etcd"),
        "etcd request latency seen from kube-apiserver is normal (p99 0.011s); etcd's own \
         metrics were not available",
        "storage-etcd-latency-normal",
        &[("etcd_request_p99_seconds", json!(0.011))],
    );

    diagnosis(
        vec![etcd, kyverno, wardle, metrics, healthy_apiserver()],
        vec![Gap::new(
            "metrics/etcd",
            GapReason::NotSupplied,
            "etcd /metrics was not scraped (it needs an etcd client certificate); fsync, commit \
             and leader metrics could not be checked",
        )],
        "No broken extension path; 1 warning: APIService/v1beta1.metrics.k8s.io serving \
         certificate expires in 9 days",
    )
}

/// The waivers file applied in case (d).
pub const WAIVERS_D: &str = "\
apiVersion: extpath.dev/v1alpha1
kind: Waivers
waivers:
  - rule: admission-timeout-max-on-hot-path
    subject: MutatingWebhook/vault.*
    reason: vault injector latency is accepted until the sidecar rollout (OPS-4411)
    expires: 2026-12-31
  - rule: aggregation-cert-expiring-soon
    subject: APIService/v1beta1.metrics.k8s.io
    reason: cert-manager renews it on the 20th
    expires: 2026-11-20
  - rule: apf-rejections-workload-low
    subject: PriorityLevel/workload-low
    reason: batch jobs are throttled on purpose
    expires: 2027-01-31
";

/// The date the waivers of case (d) are judged at.
pub fn today_d() -> jiff::civil::Date {
    jiff::civil::date(2026, 11, 29)
}

/// (d) What a CI gate sees: an APIService that could not be judged (its probe was forbidden and
/// its pods unreachable), a waived warning, one expired and one unmatched waiver.
pub fn inconclusive_and_waived() -> Diagnosis {
    let custom = Verdict {
        class: Class::Inconclusive,
        severity: Severity::Warning,
        summary: "Not enough evidence to judge: no discovery probe and no serving chain (see gaps)"
            .to_string(),
        next: strings(&[
            "kubectl get apiservice v1beta1.custom.metrics.k8s.io -o yaml",
            "kubectl get --raw /apis/custom.metrics.k8s.io/v1beta1",
        ]),
        ..Verdict::new(
            Subject::new(SubjectKind::ApiService, "v1beta1.custom.metrics.k8s.io"),
            Vec::new(),
        )
    };
    let mut vault = verdict(
        webhook(
            SubjectKind::MutatingWebhook,
            "vault.hashicorp.com",
            "vault-agent-injector-cfg",
        ),
        0.8,
        vec![hit(
            "admission-timeout-max-on-hot-path",
            Class::Admission,
            Severity::Warning,
            Rung::Admission,
            "timeoutSeconds is 30 (the maximum) on pod CREATE: a slow injector stalls every pod \
             creation for up to 30s",
            &[
                ("timeout_seconds", json!(30)),
                ("operations", json!(["CREATE pods"])),
                ("failure_policy", json!("Ignore")),
            ],
        )],
    );
    vault.next =
        strings(&["kubectl get mutatingwebhookconfiguration vault-agent-injector-cfg -o yaml"]);
    let mut d = diagnosis(
        vec![healthy_apiserver(), vault, custom],
        vec![
            Gap::new(
                "probes/APIService/v1beta1.custom.metrics.k8s.io",
                GapReason::Forbidden,
                "GET /apis/custom.metrics.k8s.io/v1beta1: 403 Forbidden: User \"ci-gate\" cannot \
                 get path \"/apis/custom.metrics.k8s.io/v1beta1\"",
            ),
            Gap::new(
                "tls/APIService/v1beta1.custom.metrics.k8s.io",
                GapReason::Unreachable,
                "dial tcp 10.244.3.9:6443: i/o timeout (the pod network is not reachable from \
                 where extpath ran)",
            ),
        ],
        "APIService/v1beta1.custom.metrics.k8s.io could not be judged: its discovery probe was \
         forbidden and its pods were unreachable",
    );
    let waivers = parse_waivers(WAIVERS_D, "waivers-d.yaml").expect("the case's waivers load");
    apply_waivers(&mut d, &waivers, today_d());
    d
}

/// Every case, named for snapshot files.
pub fn all() -> Vec<(&'static str, Diagnosis)> {
    vec![
        (
            "a_aggregation_wrong_ca_bundle",
            aggregation_wrong_ca_bundle(),
        ),
        (
            "b_admission_webhook_unreachable",
            admission_webhook_unreachable(),
        ),
        ("c_healthy_with_expiring_cert", healthy_with_expiring_cert()),
        ("d_inconclusive_and_waived", inconclusive_and_waived()),
    ]
}
