//! Storage: kube-apiserver's etcd breaks — frozen, slow behind a proxy while every health check
//! passes, out of space, killed, asked to store an object larger than it accepts — each by a
//! different mechanism, with clients writing while the scan watches. And the converse (3a): a slow
//! validating webhook inside an UPDATE's storage call is not slow storage.

use std::time::Duration;

use super::{
    Checks, Expect, SETTLE, Scan, analyze_raw, assert_raw_read_all, assert_why_reads_right,
    on_both, scan, why, why_human,
};
use crate::util::k8s::backend::{Answer, Backend};
use crate::util::k8s::incident::Incident;
use crate::util::k8s::traffic::{Call, Traffic};
use crate::util::k8s::{Assets, ControlPlane};

fn on_etcd(severity: &'static str) -> Expect {
    Expect::Problem {
        class: "Storage",
        kind: "Etcd",
        name: "etcd".into(),
        severity,
    }
}

fn namespace(cp: &ControlPlane, ns: &str) {
    cp.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {ns}}}\n"
    ));
}

/// Clients creating ConfigMaps in `ns` (a `?timeout=` of their own, as kubectl sends) — what a
/// controller or a CI job keeps doing while storage breaks.
fn writers(cp: &ControlPlane, ns: &str, clients: usize) -> Traffic {
    Traffic::start(
        cp,
        vec![Call::post(
            &format!("/api/v1/namespaces/{ns}/configmaps?timeout=8s"),
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w-{n}"},"data":{"k":"v"}}"#,
        )],
        clients,
        Duration::from_millis(150),
    )
}

/// Wait until kube-apiserver's own `etcd` health check fails: in `/readyz` on 1.24; 1.36's
/// `/readyz` has no etcd check (it stays 200 with etcd dead), its `/livez` has.
fn wait_readyz_etcd_fails(cp: &ControlPlane) {
    cp.poll("kube-apiserver's etcd health check fails", SETTLE, || {
        ["/readyz?verbose", "/livez?verbose"]
            .iter()
            .any(|p| {
                let (code, body) = cp.raw_get(p);
                code != 200 && body.contains("[-]etcd")
            })
            .then_some(())
    });
}

/// The next steps (of every verdict and problem) that send the reader to RBAC.
fn suggests_rbac(s: &Scan) -> Vec<String> {
    let lists = ["verdicts", "problems"];
    lists
        .iter()
        .flat_map(|l| s.diagnosis[*l].as_array().into_iter().flatten())
        .flat_map(|v| v["next"].as_array().into_iter().flatten())
        .filter_map(|n| n.as_str())
        .filter(|n| n.contains("auth can-i") || n.contains("rbac") || n.contains("ClusterRole"))
        .map(str::to_string)
        .collect()
}

/// Defects 3i and 3j, checked on a scan of a frozen or dead etcd: the headline is the Storage
/// verdict (never a collection gap), no next step suggests RBAC for what timed out, and no
/// summary says "none failed" next to evidence of failures.
fn assert_storage_headline(s: &Scan) {
    let headline = s.diagnosis["summary"]["headline"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The Storage verdict leads; sources that timed out (its consequence) may follow.
    let storage_at = headline.find("Storage");
    let incomplete_at = headline.find("collection incomplete");
    assert!(
        storage_at.is_some_and(|s| incomplete_at.is_none_or(|i| s < i)),
        "3i: the headline must lead with the Storage verdict, got {headline:?}\n{}",
        s.describe()
    );
    let rbac = suggests_rbac(s);
    assert!(
        rbac.is_empty(),
        "3i: timeouts are not permissions, yet the scan suggests RBAC: {rbac:#?}"
    );
    for v in s.diagnosis["verdicts"].as_array().into_iter().flatten() {
        let summary = v["summary"].as_str().unwrap_or_default();
        assert!(
            !summary.contains("none failed"),
            "3j: a summary contradicts its evidence: {summary}\n{}",
            s.describe()
        );
    }
}

/// etcd frozen (SIGSTOP: a stuck process, a VM paused by its host): it accepts connections and
/// never answers; writes hang until their timeout. Also judged by `why` of a client's LIST and by
/// `analyze --raw` of the on-call's folder.
fn etcd_frozen(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    namespace(&cp, "ledger");
    let _w = writers(&cp, "ledger", 2);
    cp.etcd.daemon.signal("STOP");
    wait_readyz_etcd_fails(&cp);
    let s = scan(&cp, &[]);
    // A client's read that hangs on storage: `why` of it, and what the on-call saves.
    let path = "/api/v1/namespaces/ledger/configmaps";
    // As an on-call runs it against a hanging server: a short request timeout, a bounded
    // gathering.
    let bounded = ["--request-timeout", "3s", "--timeout", "10s"];
    let w = why(&cp, "LIST", path, &bounded);
    let (code, text) = why_human(&cp, None, &[&["LIST", path][..], &bounded].concat());
    let incident = client_read_incident(&cp, "ledger", path);
    cp.etcd.daemon.signal("CONT");
    assert_storage_headline(&s);
    assert_eq!(code, 1, "a critical verdict exits 1:\n{text}");
    assert_why_reads_right(&text, "Storage", &["etcd"]);
    // The storage step shows the health check that failed (1.36's is in livez: its readyz has
    // no etcd check), not "no etcd check" above the findings that it fails.
    assert!(
        text.lines()
            .any(|l| l.starts_with("  ✗ storage") && l.contains("[-]etcd failed")),
        "the storage step names the failing etcd check:\n{text}"
    );
    let a = analyze_raw(incident.path());
    assert_raw_read_all(&a);
    Checks::scan_why_raw(on_etcd("critical"), s, w, ("Storage", "critical"), a)
}

/// What an on-call engineer saves when a client's reads of `namespace`'s ConfigMaps fail or
/// crawl: the usual objects and dumps (etcd's health and metrics among them), `/livez?verbose`
/// (1.36's readyz has no etcd check), the client's `kubectl get -v=6` with a request timeout, `curl`
/// of the same LIST with the `-w` trailer, and kube-apiserver's log tail.
fn client_read_incident(cp: &ControlPlane, namespace: &str, path: &str) -> Incident {
    let mut incident = Incident::new();
    incident.usual(cp);
    let (_, livez) = cp.raw_get("/livez?verbose");
    incident.write("livez", &livez);
    incident.kubectl(
        cp,
        "kubectl-get",
        &[
            "get",
            "configmaps",
            "-n",
            namespace,
            "--request-timeout=3s",
            "-v=6",
        ],
    );
    incident.curl_apiserver(cp, "curl-list", path, &["--max-time", "3"]);
    incident.log("kube-apiserver-log", cp.kube_apiserver(), 200);
    incident
}
on_both!(etcd_frozen);

/// etcd killed (an OOM kill, a node lost): kube-apiserver's dials are refused. Also judged by
/// `why` of a controller's GET and by `analyze --raw` of the on-call's folder.
fn etcd_killed(assets: &Assets) -> Checks {
    let mut cp = ControlPlane::start(assets, &[]);
    namespace(&cp, "orders");
    cp.kubectl(&[
        "create",
        "configmap",
        "routing",
        "-n",
        "orders",
        "--from-literal=zone=a",
    ]);
    let _w = writers(&cp, "orders", 1);
    cp.etcd.daemon.signal("KILL");
    let _ = cp.etcd.daemon.wait_exit();
    wait_readyz_etcd_fails(&cp);
    let s = scan(&cp, &[]);
    assert_storage_headline(&s);
    // A controller's GET of its object fails: `why` of it, and what the on-call saves.
    let path = "/api/v1/namespaces/orders/configmaps/routing";
    let bounded = ["--request-timeout", "3s", "--timeout", "10s"];
    let w = why(&cp, "GET", path, &bounded);
    let (code, text) = why_human(&cp, None, &[&["GET", path][..], &bounded].concat());
    assert_eq!(code, 1, "a critical verdict exits 1:\n{text}");
    assert_why_reads_right(&text, "Storage", &["etcd"]);
    let incident = client_read_incident(&cp, "orders", path);
    let a = analyze_raw(incident.path());
    assert_raw_read_all(&a);
    Checks::scan_why_raw(on_etcd("critical"), s, w, ("Storage", "critical"), a)
}
on_both!(etcd_killed);

/// etcd slow (a saturated disk, a distant member): every round trip from kube-apiserver takes
/// hundreds of milliseconds more, while etcd's own health, kube-apiserver's readyz and every
/// other check pass (3c: Storage, a warning). Also `why` of a client's LIST (it succeeds) and
/// `analyze --raw` of the on-call's folder.
fn etcd_slow(assets: &Assets) -> Checks {
    let cp = ControlPlane::start(assets, &[]);
    namespace(&cp, "billing");
    let w = writers(&cp, "billing", 2);
    // Every etcd round trip (one `etcd_request_duration_seconds` observation) in (1 s, 1.25 s]: a
    // p99 the buckets prove over the 0.5 s warning and short of the 2 s critical threshold, and
    // storage calls kube-apiserver traces at over 1 s (what a folder without a window shows).
    cp.etcd_proxy.set_delay(Duration::from_millis(1050));
    // Writes now take the delay at least; let a few land before the window opens.
    std::thread::sleep(Duration::from_secs(3));
    let (code, body) = cp.raw_get("/readyz?verbose");
    assert_eq!(code, 200, "the health checks must pass: {body}");
    let s = scan(&cp, &["--window", "5s"]);
    // Without etcd's own metrics (a managed control plane) the verdict is the same: kube-apiserver's
    // etcd request latency over the window is storage evidence of its own.
    let without = super::scan_without_etcd(&cp, &["--window", "5s"]);
    let (code, body) = cp.raw_get("/readyz?verbose");
    assert_eq!(code, 200, "the health checks must still pass: {body}");
    assert!(
        without.meets(&on_etcd("warning")).is_ok(),
        "3c without etcd's metrics: {:?}\n{}",
        without.problems(),
        without.describe()
    );
    assert!(w.count(201) > 0, "no write succeeded: {:?}", w.seen());
    // A client's LIST takes the delay, over the 1 s the tool calls a slow request: `why` of it
    // says where the time went (storage), that the request was answered — slow at storage, not
    // broken there — and exits 0, a warning not failing its default gate.
    let path = "/api/v1/namespaces/billing/configmaps";
    let (code, text) = why_human(&cp, None, &["LIST", path]);
    assert_eq!(
        code, 0,
        "a warning does not fail why's default gate:\n{text}"
    );
    let verdict = text
        .lines()
        .find(|l| l.starts_with("Verdict"))
        .unwrap_or("");
    assert!(
        verdict.contains("Storage, warning, slow at storage")
            && text.contains("succeeded but took"),
        "why's verdict on a request that got through a slow etcd: {verdict}\n{text}"
    );
    let traced = why(&cp, "LIST", path, &[]);
    // What the on-call saves: one dump of /metrics is history, so the folder's storage evidence
    // is in the log (traced storage calls taking the delay) and etcd's own metrics.
    let incident = client_read_incident(&cp, "billing", path);
    let a = analyze_raw(incident.path());
    assert_raw_read_all(&a);
    vec![
        (s, on_etcd("warning")),
        (
            traced,
            Expect::Request {
                class: "Storage",
                severity: "warning",
            },
        ),
        (a, on_etcd("warning")),
    ]
    .into()
}
on_both!(etcd_slow);

/// etcd out of space: restarted with a `--quota-backend-bytes` its database outgrows, then filled
/// by writes until it raises the NOSPACE alarm; every write then fails with `mvcc: database space
/// exceeded`.
fn etcd_out_of_space(assets: &Assets) -> (Scan, Expect) {
    let mut cp = ControlPlane::start(assets, &[]);
    namespace(&cp, "archive");
    let size = etcd_db_size(&cp);
    let quota = size + 6 * 1024 * 1024;
    cp.etcd.restart(&[format!("--quota-backend-bytes={quota}")]);
    // Fill it with 700 KiB ConfigMaps until a write is refused for space.
    let blob = "x".repeat(700 * 1024);
    let mut n = 0;
    cp.poll("etcd raises NOSPACE", SETTLE, || {
        n += 1;
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"fill-{n}"}},"data":{{"blob":"{blob}"}}}}"#
        );
        let (code, text) = cp.admin_post("/api/v1/namespaces/archive/configmaps", &body);
        (code >= 500 && text.contains("database space exceeded")).then_some(())
    });
    let _w = writers(&cp, "archive", 1);
    std::thread::sleep(Duration::from_secs(1));
    (scan(&cp, &[]), on_etcd("critical"))
}
on_both!(etcd_out_of_space);

fn etcd_db_size(cp: &ControlPlane) -> u64 {
    let text = crate::util::k8s::RUNTIME.block_on(async {
        crate::util::k8s::control_plane::plain_client()
            .get(format!("{}/metrics", cp.etcd.url()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    text.lines()
        .find_map(|l| l.strip_prefix("etcd_mvcc_db_total_size_in_bytes "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .expect("etcd reports its database size")
}

/// Invented from kube-apiserver's storage (`staging/src/k8s.io/apiserver/pkg/storage/etcd3/
/// store.go`, `Create` → `Txn` with the whole object as one Put) and etcd's request limit
/// (`--max-request-bytes`, 1.5 MiB by default, `rpctypes.ErrRequestTooLarge`): kube-apiserver
/// accepts bodies up to 3 MiB (`MaxRequestBodyBytes`) and a custom resource has no size
/// validation of its own, so a 2 MiB object passes every check above storage and etcd refuses
/// it (bodies over 2 MiB the etcd client refuses itself) — `etcdserver: request is too large`, a
/// 500, for every writer of such objects while
/// smaller writes succeed and every health check passes.
fn etcd_request_too_large(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    namespace(&cp, "reports");
    cp.apply(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: snapshots.analytics.example.org}
spec:
  group: analytics.example.org
  scope: Namespaced
  names: {plural: snapshots, singular: snapshot, kind: Snapshot}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#,
    );
    let path = "/apis/analytics.example.org/v1/namespaces/reports/snapshots";
    cp.poll("the custom resource is served", SETTLE, || {
        (cp.raw_get(path).0 == 200).then_some(())
    });
    // Over etcd's 1.5 MiB, under kube-apiserver's etcd client's own 2 MiB send limit (past
    // which the client refuses first: `ResourceExhausted … larger than max`).
    let blob = "y".repeat(1700 * 1024);
    let body = format!(
        r#"{{"apiVersion":"analytics.example.org/v1","kind":"Snapshot","metadata":{{"name":"s-{{n}}"}},"data":"{blob}"}}"#
    );
    let (code, text) = cp.admin_post(path, &body.replace("{n}", "probe"));
    assert!(
        code >= 500 && text.contains("request is too large"),
        "etcd must refuse the object: {code} {}",
        &text[..text.len().min(300)]
    );
    let _w = Traffic::start(
        &cp,
        vec![Call::post(path, &body)],
        1,
        Duration::from_millis(300),
    );
    std::thread::sleep(Duration::from_secs(1));
    (scan(&cp, &[]), on_etcd("warning"))
}
on_both!(etcd_request_too_large);

/// 3a: a validating webhook that answers slowly (allowed, 1.2 s) on UPDATEs while clients update
/// objects. kube-apiserver's `Trace[…]` of each update shows the webhook call inside the
/// `GuaranteedUpdate etcd3` step (admission runs inside the update's retry loop): the time is the
/// webhook's, not storage's. Neither `scan` nor `analyze --raw` of the kube-apiserver log may say
/// Storage; the slow webhook is Admission's.
fn slow_webhook_inside_update(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    namespace(&cp, "inventory");
    let backend = Backend::start(&cp.pki.backends_ca, "gatekeeper", &[]);
    backend.answer(Answer::Stall(Duration::from_millis(1200)));
    let ca = base64_of(cp.pki.backends_ca.pem());
    let url = backend.url("/validate");
    for i in 0..4 {
        cp.kubectl(&[
            "create",
            "configmap",
            &format!("item-{i}"),
            "-n",
            "inventory",
            "--from-literal=v=0",
        ]);
    }
    cp.apply(&format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: policy-gate}}
webhooks:
- name: updates.policy-gate.example.org
  clientConfig: {{url: "{url}", caBundle: {ca}}}
  rules: [{{operations: [UPDATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}]
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: inventory}}}}
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 10
"#
    ));
    let updates: Vec<Call> = (0..4)
        .map(|i| Call {
            method: reqwest::Method::PATCH,
            path: format!("/api/v1/namespaces/inventory/configmaps/item-{i}"),
            body: Some(r#"{"data":{"v":"{n}"}}"#.into()),
            token: None,
        })
        .collect();
    let w = Traffic::start_with_content_type(
        &cp,
        updates,
        2,
        Duration::from_millis(50),
        "application/merge-patch+json",
    );
    cp.poll("updates are traced", SETTLE, || {
        let log = cp.kube_apiserver().log();
        (log.contains("GuaranteedUpdate etcd3") && backend.calls() >= 4).then_some(())
    });
    let s = scan(&cp, &["--window", "5s"]);
    assert!(w.count(200) > 0, "no update succeeded: {:?}", w.seen());
    // An on-call engineer saves the kube-apiserver log; analyze --raw must not blame storage.
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(
        folder.path().join("kube-apiserver.log"),
        cp.kube_apiserver().log(),
    )
    .unwrap();
    let a = super::analyze_raw(folder.path());
    let storage: Vec<String> = a
        .problems()
        .into_iter()
        .filter(|p| p.starts_with("Storage"))
        .collect();
    assert!(
        storage.is_empty(),
        "3a: analyze --raw of the log blames storage for the webhook's time: {storage:?}\n{}",
        a.describe()
    );
    (
        s,
        Expect::Problem {
            class: "Admission",
            kind: "ValidatingWebhook",
            name: "updates.policy-gate.example.org".into(),
            severity: "warning",
        },
    )
}
on_both!(slow_webhook_inside_update);

fn base64_of(s: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(s)
}
