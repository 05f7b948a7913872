//! `import --raw` on the kinds and shapes the real captures do not show (other versions, other
//! clients, other components), built here from their documented formats.

use extpath::bundle::Kind;
use extpath::bundle::observations::{Component, HealthEndpoint};
use extpath::bundle::{MetricTarget, ObjectRef, TimeBasis};
use extpath::pki::generate::{LeafSpec, TestCa, Validity};

use crate::util::raw_files::{import_dir, webhook_config, write};

// A dump from a pre-1.22 cluster, or a manifest kept in git, still says
// `admissionregistration.k8s.io/v1beta1`, whose defaults are the opposite of v1's. Reading it with
// v1's defaults would report a fail-open webhook as fail-closed, and blame it for outages it
// cannot cause.
#[test]
fn yaml_objects_of_older_api_versions_get_their_own_defaults() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "a",
        r#"apiVersion: admissionregistration.k8s.io/v1beta1
kind: ValidatingWebhookConfiguration
metadata:
  name: legacy
webhooks:
- name: legacy.example.com
  clientConfig:
    service: {namespace: hooks, name: legacy}
---
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: e1, namespace: hooks, creationTimestamp: "2026-03-01T10:00:00Z"}
regarding: {kind: Pod, name: legacy-0, namespace: hooks}
reason: BackOff
note: Back-off restarting failed container
type: Warning
eventTime: "2026-03-01T10:00:05.000000Z"
series: {count: 7, lastObservedTime: "2026-03-01T10:05:00.000000Z"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored, namespace: hooks}
"#,
    );
    let b = import_dir(tmp.path());
    let w = &b.webhooks[0];
    // admissionregistration v1beta1 defaults: Ignore and 30 s (v1 would be Fail and 10 s).
    assert_eq!(w.failure_policy, extpath::bundle::FailurePolicy::Ignore);
    assert_eq!(w.effective_timeout_seconds, 30);
    let e = &b.events[0];
    assert_eq!((e.reason.as_str(), e.count), ("BackOff", 7));
    assert_eq!(e.message, "Back-off restarting failed container");
    assert_eq!(
        e.involved,
        ObjectRef::namespaced(Kind::Pod, "hooks", "legacy-0")
    );
    assert_eq!(
        b.collection.collected_at.unwrap().to_string(),
        "2026-03-01T10:05:00Z"
    );
}

// Support folders often hold one object twice (a `kubectl get -o json` before and after someone
// tried a fix); the diagnosis must describe the later state, whatever the files are called.
#[test]
fn an_object_supplied_twice_is_kept_once_at_its_later_version() {
    let tmp = tempfile::tempdir().unwrap();
    let api_service = |rv: u32, status: &str| {
        format!(
            r#"{{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService",
            "metadata":{{"name":"v1beta1.metrics.k8s.io","resourceVersion":"{rv}"}},
            "spec":{{"group":"metrics.k8s.io","version":"v1beta1","groupPriorityMinimum":100,"versionPriority":100,
                     "service":{{"namespace":"kube-system","name":"metrics-server","port":443}}}},
            "status":{{"conditions":[{{"type":"Available","status":"{status}","reason":"X"}}]}}}}"#
        )
    };
    // The later copy sorts first by name: the version decides, not the order.
    write(tmp.path(), "a.json", api_service(900, "False"));
    write(tmp.path(), "b.json", api_service(100, "True"));
    let b = import_dir(tmp.path());
    assert_eq!(b.api_services.len(), 1);
    assert_eq!(b.api_services[0].available().unwrap().status, "False");
}

// `curl -v` output is what people paste into incidents, and its request headers carry the bearer
// token. The response is the evidence; the token must never reach a bundle (DESIGN §2).
#[test]
fn curl_verbose_output_keeps_the_request_line_and_drops_request_headers() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "x",
        "*   Trying 127.0.0.1:6443...\n* Connected to 127.0.0.1 (127.0.0.1) port 6443\n\
         > GET /apis/metrics.k8s.io/v1beta1 HTTP/2\n> Host: 127.0.0.1:6443\n\
         > Authorization: Bearer sekret-token-value\n> Accept: */*\n>\n\
         < HTTP/2 503\n< content-type: text/plain; charset=utf-8\n\
         < date: Tue, 03 Mar 2026 10:00:00 GMT\n<\n\
         error trying to reach service: dial tcp 10.0.0.7:4443: i/o timeout\n",
    );
    let b = import_dir(tmp.path());
    let p = &b.probes[0];
    assert_eq!(p.method.as_deref(), Some("GET"));
    assert_eq!(p.status, Some(503));
    assert_eq!(
        p.target,
        Some(ObjectRef::cluster(
            Kind::ApiService,
            "v1beta1.metrics.k8s.io"
        ))
    );
    assert_eq!(
        p.body.as_deref(),
        Some("error trying to reach service: dial tcp 10.0.0.7:4443: i/o timeout")
    );
    assert!(!b.to_yaml().unwrap().contains("sekret-token-value"));
    assert_eq!(
        b.collection.collected_at.unwrap().to_string(),
        "2026-03-03T10:00:00Z"
    );
}

// `curl -v` of a watch, as a real 1.36 kube-apiserver answered a resume from a compacted
// resourceVersion through the aggregator: 200 headers, then the stream, whose one event is the
// 410. The event is the evidence; read as a plain response it was lost (a 200, nothing wrong).
#[test]
fn curl_verbose_output_of_a_watch_keeps_the_stream() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "x",
        "* Connected to 127.0.0.1 (127.0.0.1) port 45283 (#0)\n* ALPN: server accepted h2\n\
         > GET /apis/wardle.example.com/v1alpha1/namespaces/orders/flunders?watch=1&resourceVersion=3 HTTP/2\n\
         > Host: 127.0.0.1:45283\n> accept: */*\n> \n{ [5 bytes data]\n\
         < HTTP/2 200 \n< content-type: application/json\n< date: Mon, 07 Dec 2026 20:01:37 GMT\n< \n\
         { [5 bytes data]\n* Connection #0 to host 127.0.0.1 left intact\n\
         {\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
         \"message\":\"The resourceVersion for the provided watch is too old.\",\"reason\":\"Expired\",\"code\":410}}\n\
         \nHTTP 200 time_total=0.086906\ncurl exit=0\n",
    );
    let b = import_dir(tmp.path());
    assert_eq!(b.probes.len(), 1);
    let p = &b.probes[0];
    assert_eq!(p.status, Some(200));
    assert_eq!(
        p.path.as_deref(),
        Some(
            "/apis/wardle.example.com/v1alpha1/namespaces/orders/flunders?watch=1&resourceVersion=3"
        )
    );
    let w = p.watch.as_ref().expect("read as a watch");
    let e = w.error_event.as_ref().expect("the in-stream error");
    assert_eq!(e.code, Some(410));
    assert_eq!(e.reason, "Expired");
    assert_eq!(w.end, extpath::bundle::probes::WatchEnd::Closed);
}

#[test]
fn etcd_health_and_structured_kubectl_traces_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "1",
        "127.0.0.1:2379 is unhealthy: failed to commit proposal: context deadline exceeded\nError: unhealthy cluster\n",
    );
    write(
        tmp.path(),
        "2",
        r#"{"health":"false","reason":"RAFT NO LEADER"}"#,
    );
    write(
        tmp.path(),
        "3",
        r#"I0303 10:00:01.000001   77 round_trippers.go:632] "Response" verb="GET" url="https://127.0.0.1:6443/apis/metrics.k8s.io/v1beta1" status="503 Service Unavailable" milliseconds=2
"#,
    );
    let b = import_dir(tmp.path());
    let etcd: Vec<_> = b
        .health_checks
        .iter()
        .filter(|h| h.endpoint == HealthEndpoint::EtcdHealth)
        .collect();
    assert_eq!(etcd.len(), 2);
    assert!(etcd.iter().all(|h| !h.ok));
    assert!(
        etcd.iter()
            .any(|h| h.target.as_deref() == Some("127.0.0.1:2379"))
    );
    assert!(
        etcd.iter()
            .any(|h| h.error.as_deref() == Some("RAFT NO LEADER"))
    );
    assert_eq!(b.probes[0].status, Some(503));
    // Nothing is dated but a klog line: its year is the import's.
    assert_eq!(b.collection.collected_at_basis, Some(TimeBasis::Evidence));
    assert_eq!(
        b.collection.collected_at.unwrap().to_string(),
        "2030-03-03T10:00:01.000001Z"
    );
}

// Log files arrive with arbitrary names, so the component is told from the content (etcd 3.4's
// text format and 3.5's JSON, klog for kube-apiserver). klog's header carries no year
// (`E0101 00:00:02`): next to December evidence, January is the next year, or the timeline of an
// incident across New Year would run backwards.
#[test]
fn etcd_logs_are_told_from_their_content_and_klog_years_roll_over() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "etcd",
        "2026-12-31 23:58:00.000001 W | etcdserver: read-only range request \"key:\\\"/registry/pods\\\" \" with result \"range_response_count:1\" took too long (1.234s) to execute\n\
         {\"level\":\"warn\",\"ts\":\"2026-12-31T23:59:00.000Z\",\"caller\":\"etcdserver/raft.go:369\",\"msg\":\"failed to send out heartbeat on time\",\"to\":\"abc\"}\n",
    );
    write(
        tmp.path(),
        "kas",
        "E0101 00:00:02.000000   1 wrap.go:53] timeout or abort while handling: method=GET URI=\"/api/v1/pods\" audit-ID=\"x\"\n",
    );
    let b = import_dir(tmp.path());
    let slow = b
        .log_findings
        .iter()
        .find(|f| f.pattern == "etcd-slow-request")
        .unwrap();
    assert_eq!(slow.component, Component::Etcd);
    assert_eq!(slow.fields["took"], "1.234s");
    let late = b
        .log_findings
        .iter()
        .find(|f| f.pattern == "etcd-heartbeat-late")
        .unwrap();
    assert_eq!(late.component, Component::Etcd);
    let abort = b
        .log_findings
        .iter()
        .find(|f| f.pattern == "request-timeout-or-abort")
        .unwrap();
    assert_eq!(abort.component, Component::KubeApiserver);
    // January klog next to December evidence is in the next year.
    assert_eq!(
        abort.first_seen.unwrap().to_string(),
        "2027-01-01T00:00:02Z"
    );
    assert_eq!(
        b.collection.collected_at.unwrap().to_string(),
        "2027-01-01T00:00:02Z"
    );
}

// Two `/metrics` dumps of one process (same start time): counters only grow within a process, so
// the larger counts are the later dump. Merging them would double every rate; the other one is
// named in a gap rather than dropped silently.
#[test]
fn of_two_dumps_of_one_apiserver_the_later_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dump = |n: u32| {
        format!(
            "# TYPE aggregator_unavailable_apiservice gauge\naggregator_unavailable_apiservice{{name=\"v1.\"}} 0\n\
             # TYPE apiserver_request_total counter\napiserver_request_total{{code=\"200\"}} {n}\n\
             # TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e+09\n"
        )
    };
    write(tmp.path(), "a", dump(500));
    write(tmp.path(), "b", dump(20));
    let b = import_dir(tmp.path());
    let m = b.metrics_for(MetricTarget::Apiserver).unwrap();
    assert!(m.origin.ends_with("a"), "{}", m.origin);
    assert_eq!(b.metrics.len(), 1);
    assert!(
        b.gaps
            .iter()
            .any(|g| g.source.ends_with("b") && g.detail.contains("second kube-apiserver"))
    );
}

// Time checks are judged at the bundle's collection time (DESIGN §2): a certificate that had
// expired during the incident is the finding even when the folder is analysed a year later, and
// one valid then must not turn into a finding as the calendar moves on.
#[test]
fn a_served_leaf_is_judged_at_the_collection_time_not_now() {
    let collected: jiff::Timestamp = "2026-11-29T08:42:19Z".parse().unwrap();
    let ca = TestCa::new("hooks-ca", Validity::around(collected, 400, 3650)).unwrap();
    let leaf = ca
        .issue(&LeafSpec::server(
            &["hook.hooks.svc"],
            Validity::expired_at(collected),
        ))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), "cfg", webhook_config(&ca.cert_pem));
    write(tmp.path(), "leaf", &leaf.cert_pem);
    write(
        tmp.path(),
        "hdr",
        "HTTP/1.1 500 Internal Server Error\r\ndate: Sun, 29 Nov 2026 08:42:19 GMT\r\n\r\n",
    );
    let b = import_dir(tmp.path());
    let c = b
        .certificates
        .iter()
        .find(|c| c.subject == "CN=hook.hooks.svc")
        .unwrap();
    assert_eq!(
        c.origin.owner,
        Some(ObjectRef::cluster(
            Kind::ValidatingWebhook,
            "check.hooks.example.com"
        ))
    );
    let v = c.verification.as_ref().unwrap();
    assert_eq!(v.at, collected);
    assert!(
        v.error.as_deref().unwrap().starts_with("x509: certificate has expired or is not yet valid: current time 2026-11-29T08:42:19Z is after"),
        "{v:?}"
    );
}

#[test]
fn apf_dumps_of_newer_releases_and_version_documents_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "pl",
        "PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing, WaitingRequests, ExecutingRequests, DispatchedRequests, RejectedRequests, TimedoutRequests, CancelledRequests\n\
         workload-low,      3,            false,  false,       41,              20,                9000,               310,              0,                0\n\
         exempt,            <none>,       <none>, <none>,      <none>,          <none>,            <none>,             <none>,           <none>,           <none>\n",
    );
    write(
        tmp.path(),
        "v",
        r#"{"major":"1","minor":"31","gitVersion":"v1.31.4","platform":"linux/amd64"}"#,
    );
    let b = import_dir(tmp.path());
    let low = b
        .apf_state
        .iter()
        .find(|s| s.priority_level == "workload-low")
        .unwrap();
    assert_eq!(
        (
            low.waiting_requests,
            low.executing_requests,
            low.active_queues
        ),
        (41, 20, 3)
    );
    assert!(
        b.apf_state
            .iter()
            .any(|s| s.priority_level == "exempt" && s.exempt)
    );
    assert_eq!(
        b.collection.server_version.as_ref().unwrap().git_version,
        "v1.31.4"
    );
}

#[test]
fn pods_keep_their_service_account_and_rbac_is_read_as_kubectl_lists_it() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "pods.json",
        r#"{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "api-0", "namespace": "ext", "labels": {"app": "api"}},
   "spec": {"serviceAccountName": "api", "serviceAccount": "api", "containers": [{"name": "c", "image": "i"}]},
   "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "api-1", "namespace": "ext"},
   "spec": {"containers": [{"name": "c", "image": "i"}]}, "status": {"phase": "Pending"}}
]}"#,
    );
    write(
        tmp.path(),
        "rbac.yaml",
        r#"apiVersion: v1
kind: List
items:
- apiVersion: rbac.authorization.k8s.io/v1
  kind: ClusterRoleBinding
  metadata: {name: ext-api:system:auth-delegator}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator"}
  subjects: [{kind: ServiceAccount, name: api, namespace: ext}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: ext-reader, namespace: kube-system}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader}
  subjects: [{kind: ServiceAccount, name: api, namespace: ext}]
- apiVersion: rbac.authorization.k8s.io/v1
  kind: RoleBinding
  metadata: {name: elsewhere, namespace: team}
  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
  subjects: [{kind: User, name: alice}]
"#,
    );
    let b = import_dir(tmp.path());
    let sa = |name: &str| {
        b.pods
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.service_account.clone())
    };
    assert_eq!(sa("api-0").as_deref(), Some("api"));
    assert_eq!(
        sa("api-1").as_deref(),
        Some("default"),
        "the API server's default"
    );
    assert_eq!(b.cluster_role_bindings.len(), 1);
    assert_eq!(
        b.cluster_role_bindings[0].subjects[0].namespace.as_deref(),
        Some("ext")
    );
    assert_eq!(
        b.role_bindings
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        vec!["ext-reader"],
        "only kube-system's RoleBindings are kept"
    );
}

// What an on-call saved from a real kube-apiserver (1.24) whose etcd was frozen: kubectl with
// `--request-timeout` got no response (its `-v=6` line has no status), `curl -v` of the same LIST
// timed out after the TLS handshake, and `curl -v` of etcd's own `/health` timed out. The two
// clients' requests are one request, by its path; etcd's `/health` is etcd's health check (no
// answer: a gap, as a scan records it), not a request through the API server.
#[test]
fn requests_that_got_no_response_keep_their_path_and_etcd_health_is_a_check() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        "kubectl",
        "I1207 22:34:06.575862   16270 loader.go:402] Config loaded from file:  /tmp/admin.kubeconfig\n\
         I1207 22:34:09.583528   16270 round_trippers.go:560] GET https://127.0.0.1:40761/api/v1/namespaces/ledger/configmaps?limit=500&timeout=3s  in 3000 milliseconds\n\
         I1207 22:34:09.583686   16270 helpers.go:264] Connection error: Get https://127.0.0.1:40761/api/v1/namespaces/ledger/configmaps?limit=500&timeout=3s: net/http: request canceled (Client.Timeout exceeded while awaiting headers)\n\
         Unable to connect to the server: net/http: request canceled (Client.Timeout exceeded while awaiting headers)\n\
         exit=1\n",
    );
    let mut tls = String::new();
    for note in [
        "* ALPN: offers h2,http/1.1",
        "} [5 bytes data]",
        "* TLSv1.3 (OUT), TLS handshake, Client hello (1):",
        "} [512 bytes data]",
        "*  CAfile: /tmp/cluster-ca.crt",
        "{ [5 bytes data]",
        "* TLSv1.3 (IN), TLS handshake, Server hello (2):",
        "{ [122 bytes data]",
        "* TLSv1.3 (IN), TLS handshake, Encrypted Extensions (8):",
        "{ [15 bytes data]",
        "* TLSv1.3 (IN), TLS handshake, Request CERT (13):",
        "{ [125 bytes data]",
        "* TLSv1.3 (IN), TLS handshake, Certificate (11):",
        "{ [456 bytes data]",
        "* TLSv1.3 (IN), TLS handshake, CERT verify (15):",
        "{ [78 bytes data]",
        "* TLSv1.3 (IN), TLS handshake, Finished (20):",
        "{ [36 bytes data]",
        "* TLSv1.3 (OUT), TLS change cipher, Change cipher spec (1):",
        "} [1 bytes data]",
        "* SSL connection using TLSv1.3 / TLS_AES_128_GCM_SHA256",
        "* ALPN: server accepted h2",
        "* Server certificate:",
        "*  subject: CN=127.0.0.1",
        "*  SSL certificate verify ok.",
        "* using HTTP/2",
        "* h2h3 [:method: GET]",
        "* Using Stream ID: 1 (easy handle 0x556bc3beb2b0)",
    ] {
        tls.push_str(note);
        tls.push('\n');
    }
    write(
        tmp.path(),
        "curl",
        format!(
            "*   Trying 127.0.0.1:40761...\n* Connected to 127.0.0.1 (127.0.0.1) port 40761 (#0)\n{tls}\
             > GET /api/v1/namespaces/ledger/configmaps HTTP/2\n> Host: 127.0.0.1:40761\n\
             > user-agent: curl/7.88.1\n> accept: */*\n> \n{{ [5 bytes data]\n\
             * Operation timed out after 3000 milliseconds with 0 bytes received\n\
             * Connection #0 to host 127.0.0.1 left intact\n\
             curl: (28) Operation timed out after 3000 milliseconds with 0 bytes received\n\n\
             HTTP 000 time_total=3.000751\ncurl exit=28\n"
        ),
    );
    write(
        tmp.path(),
        "etcd-health",
        "*   Trying 127.0.0.1:2379...\n* Connected to 127.0.0.1 (127.0.0.1) port 2379 (#0)\n\
         > GET /health HTTP/1.1\n> Host: 127.0.0.1:2379\n> User-Agent: curl/7.88.1\n> Accept: */*\n> \n\
         * Operation timed out after 3000 milliseconds with 0 bytes received\n* Closing connection 0\n\
         curl: (28) Operation timed out after 3000 milliseconds with 0 bytes received\n\n\
         HTTP 000 time_total=2.999805\ncurl exit=28\n",
    );
    write(
        tmp.path(),
        "etcd-health-ok",
        "*   Trying 127.0.0.1:2379...\n* Connected to 127.0.0.1 (127.0.0.1) port 2379 (#0)\n\
         > GET /health HTTP/1.1\n> Host: 127.0.0.1:2379\n> \n< HTTP/1.1 200 OK\n\
         < Content-Length: 17\n< Content-Type: text/plain; charset=utf-8\n< \n{ [17 bytes data]\n\
         * Connection #0 to host 127.0.0.1 left intact\n{\"health\":\"true\"}\n\
         HTTP 200 time_total=0.001095\ncurl exit=0\n",
    );
    let b = import_dir(tmp.path());
    let unread: Vec<_> = b
        .gaps
        .iter()
        .filter(|g| g.source.starts_with("file:"))
        .collect();
    assert!(unread.is_empty(), "every file is read: {unread:?}");
    let paths: Vec<_> = b.probes.iter().map(|p| p.path.as_deref()).collect();
    assert_eq!(
        paths.len(),
        2,
        "kubectl's and curl's request, not etcd's /health: {paths:?}"
    );
    for p in &b.probes {
        assert!(
            p.path
                .as_deref()
                .is_some_and(|x| x.starts_with("/api/v1/namespaces/ledger/configmaps")),
            "{p:?}"
        );
        assert_eq!(p.status, None);
        assert!(p.error.is_some(), "{p:?}");
    }
    let health: Vec<_> = b
        .health_checks
        .iter()
        .filter(|h| h.endpoint == HealthEndpoint::EtcdHealth)
        .collect();
    assert_eq!(health.len(), 1);
    assert!(health[0].ok);
    assert_eq!(health[0].target.as_deref(), Some("127.0.0.1:2379"));
    assert!(
        b.gaps
            .iter()
            .any(|g| g.source == "health/etcd" && g.detail.contains("timed out")),
        "{:?}",
        b.gaps
    );
}
