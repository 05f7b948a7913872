//! The reference server's own clients and its backends' logs: a scenario's `traffic:` runs through
//! the whole request path (authentication, APF, RBAC, admission, storage, metrics) and stays out of
//! the caller's request log; a backend's klog lines are served as the `log` of the Pods mapped to
//! it, as the sample-apiserver writes them when its SubjectAccessReviews are forbidden.

use extpath::refserver::{RefServer, StartOptions, scenario};

use super::refserver::{eventually, get, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_runs_through_the_whole_request_path() {
    let text = r#"
apiVersion: extpath.dev/v1alpha1
kind: Scenario
name: traffic
users:
  - name: reader
    token: reader-token
    allow: [{verbs: [list], apiGroups: [""], resources: [configmaps]}]
  - name: nobody
    token: nobody-token
objects:
  - {apiVersion: v1, kind: Namespace, metadata: {name: team}}
traffic:
  - {user: reader, path: /api/v1/namespaces/team/configmaps, count: 3, concurrency: 3, everyMs: 20}
  - {user: nobody, path: /api/v1/namespaces/team/configmaps, everyMs: 0}
  - {method: POST, path: "/api/v1/namespaces/team/configmaps?dryRun=All", body: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}, everyMs: 0}
"#;
    let s = scenario::load_str(text, "inline.yaml").unwrap();
    let server = RefServer::start(s, StartOptions::default()).await.unwrap();
    let count = |needle: &str| {
        server
            .metrics_text()
            .lines()
            .filter(|l| l.starts_with(needle))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    // Rounds repeat: the reader's lists keep coming, through APF (catch-all) and RBAC.
    eventually("two rounds of lists", async || {
        (count(r#"apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST""#) >= 6.0).then_some(())
    })
    .await;
    assert!(
        count(r#"apiserver_flowcontrol_dispatched_requests_total{flow_schema="catch-all""#) >= 6.0
    );
    // The admin's write is exempt, and exempt requests are dispatched too, as in kube-apiserver.
    eventually("the dry-run create", async || {
        (count(r#"apiserver_request_total{code="201",component="apiserver",dry_run="All""#) == 1.0)
            .then_some(())
    })
    .await;
    assert!(
        count(
            r#"apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"}"#
        ) >= 1.0
    );
    let traffic = server.traffic_requests();
    assert!(
        traffic.iter().any(|r| r.user == "nobody"),
        "authenticated, then denied by RBAC"
    );
    assert!(
        traffic
            .iter()
            .any(|r| r.user == "admin" && r.method == "POST")
    );
    assert!(
        server.requests().is_empty(),
        "the scenario's own clients are not the caller's"
    );
    // everyMs: 0 is one round only.
    assert_eq!(traffic.iter().filter(|r| r.method == "POST").count(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_subjectaccessreview_path_is_a_500_and_a_line_in_the_pods_log() {
    let server = start("auth-backend-403-delegated-authz").await;
    let flunders = "/apis/wardle.example.com/v1alpha1/namespaces/wardle-system/flunders";
    let (code, _, body) = get(&server, server.admin_token(), flunders).await;
    assert_eq!(code, 200, "system:masters needs no review: {body}");
    let (code, _, body) = get(&server, "alice-token", flunders).await;
    assert_eq!(code, 500);
    assert_eq!(
        body.trim_end(),
        format!(
            "Internal Server Error: \"{flunders}\": subjectaccessreviews.authorization.k8s.io is forbidden: User \"wardle-apiserver\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
        )
    );
    let log_path = "/api/v1/namespaces/wardle-system/pods/wardle-apiserver-6d8f9/log";
    let (code, _, log) = get(&server, server.admin_token(), log_path).await;
    assert_eq!(code, 200);
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines[0].contains("secure_serving.go:213] Serving securely on [::]:"),
        "{log}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with('E') && l.contains("webhook.go:224] Failed to make webhook authorizer request: subjectaccessreviews.authorization.k8s.io is forbidden: User \"wardle-apiserver\"")),
        "{log}"
    );
    let (_, _, tail) = get(
        &server,
        server.admin_token(),
        &format!("{log_path}?tailLines=1"),
    )
    .await;
    assert_eq!(tail.lines().count(), 1);
    assert!(tail.contains("errors.go:77]"), "{tail}");
    let (code, _, _) = get(
        &server,
        server.admin_token(),
        &format!("{log_path}?container=nope"),
    )
    .await;
    assert_eq!(code, 400);
    let (code, _, _) = get(
        &server,
        server.admin_token(),
        "/api/v1/namespaces/wardle-system/pods/gone/log",
    )
    .await;
    assert_eq!(code, 404);
    server.shutdown().await;
}
