//! The reference server's own clients and its backends' logs: a scenario's `traffic:` runs through
//! the whole request path (authentication, APF, RBAC, admission, storage, metrics) and stays out of
//! the caller's request log; a backend's klog lines are served as the `log` of the Pods mapped to
//! it, as the sample-apiserver writes them when its SubjectAccessReviews are forbidden or it may
//! not read its authentication configuration; RBAC objects are served and enforced, impersonation
//! included.

use extpath::refserver::{RefServer, StartOptions, scenario};

use super::refserver::{eventually, get, get_with, start};

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
            "Internal Server Error: \"{flunders}\": subjectaccessreviews.authorization.k8s.io is forbidden: User \"system:serviceaccount:wardle-system:wardle-apiserver\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope"
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
        lines.iter().any(|l| l.starts_with('E') && l.contains("webhook.go:224] Failed to make webhook authorizer request: subjectaccessreviews.authorization.k8s.io is forbidden: User \"system:serviceaccount:wardle-system:wardle-apiserver\"")),
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

/// The Available condition's status and message of an APIService.
async fn availability(server: &extpath::refserver::RunningServer, name: &str) -> (String, String) {
    let (_, _, body) = get(
        server,
        server.admin_token(),
        &format!("/apis/apiregistration.k8s.io/v1/apiservices/{name}"),
    )
    .await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let c = &v["status"]["conditions"][0];
    (
        c["status"].as_str().unwrap_or("").to_string(),
        c["message"].as_str().unwrap_or("").to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_objects_are_served_and_impersonation_is_rbacs() {
    let server = start("auth-delegation-healthy").await;
    let admin = server.admin_token().to_string();
    let (code, _, doc) = get(&server, &admin, "/apis/rbac.authorization.k8s.io/v1").await;
    assert_eq!(code, 200, "{doc}");
    for r in [
        "clusterroles",
        "clusterrolebindings",
        "roles",
        "rolebindings",
    ] {
        assert!(doc.contains(&format!("\"name\":\"{r}\"")), "{doc}");
    }
    let (_, _, roles) = get(
        &server,
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    )
    .await;
    assert!(
        roles.contains("system:auth-delegator"),
        "the bootstrap policy"
    );
    let (code, _, _) = get(
        &server,
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/extension-apiserver-authentication-reader",
    )
    .await;
    assert_eq!(code, 200);
    let (_, _, pod) = get(
        &server,
        &admin,
        "/api/v1/namespaces/wardle-system/pods/wardle-apiserver-6d8f9",
    )
    .await;
    assert!(
        pod.contains("\"serviceAccountName\":\"wardle-apiserver\""),
        "{pod}"
    );

    // alice's access to flunders is an RBAC object's; she may not impersonate.
    let flunders = "/apis/wardle.example.com/v1alpha1/namespaces/wardle-system/flunders";
    let (code, _, body) = get(&server, "alice-token", flunders).await;
    assert_eq!(code, 200, "{body}");
    let as_probe = [
        ("Impersonate-User", "extpath:delegation-probe"),
        ("Impersonate-Group", "system:authenticated"),
    ];
    let (code, _, body) = get_with(
        &server,
        "alice-token",
        "/apis/wardle.example.com/v1alpha1",
        &as_probe,
    )
    .await;
    assert_eq!(code, 403);
    assert!(
        body.contains("users \\\"extpath:delegation-probe\\\" is forbidden: User \\\"alice\\\" cannot impersonate resource \\\"users\\\" in API group \\\"\\\" at the cluster scope"),
        "{body}"
    );
    // The admin may: the ordinary user reads discovery through the extension's review.
    let (code, _, body) = get_with(
        &server,
        &admin,
        "/apis/wardle.example.com/v1alpha1",
        &as_probe,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // An impersonated user without RBAC on flunders is refused by kube-apiserver itself.
    let (code, _, body) = get_with(&server, &admin, flunders, &as_probe).await;
    assert_eq!(code, 403, "{body}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_that_may_not_read_its_authentication_configmap_exits_or_goes_anonymous() {
    let name = "v1alpha1.wardle.example.com";
    let log_path = "/api/v1/namespaces/wardle-system/pods/wardle-apiserver-6d8f9/log";
    // Tolerating the failed look-up (08c): it runs, and everyone is anonymous — the availability
    // check too.
    let server = start("auth-delegation-no-auth-reader").await;
    let admin = server.admin_token().to_string();
    let (_, _, log) = get(&server, &admin, log_path).await;
    assert!(log.contains("requestheader_controller.go:193] Unable to get configmap/extension-apiserver-authentication in kube-system."), "{log}");
    assert!(log.contains("configmaps \"extension-apiserver-authentication\" is forbidden: User \"system:serviceaccount:wardle-system:wardle-apiserver\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\""), "{log}");
    assert!(log.contains("Continuing without authentication configuration. This may treat all requests as anonymous."), "{log}");
    let (status, message) = availability(&server, name).await;
    assert_eq!(status, "False");
    assert!(message.ends_with(": 403"), "{message}");
    server.shutdown().await;

    // Not tolerating it, as sample-apiserver by default (08b): it exits, and nothing listens.
    let text = std::fs::read_to_string(
        crate::util::repo().join("fixtures/scenarios/auth-delegation-no-auth-reader.yaml"),
    )
    .unwrap()
    .replace(", authenticationTolerateLookupFailure: true", "");
    let s = scenario::load_str(&text, "inline.yaml").unwrap();
    let server = RefServer::start(s, StartOptions::default()).await.unwrap();
    let (_, _, log) = get(&server, server.admin_token(), log_path).await;
    assert!(log.contains("run.go:120] \"command failed\" err=\"unable to load configmap based request-header-client-ca-file: configmaps \\\"extension-apiserver-authentication\\\" is forbidden"), "{log}");
    let (status, message) = availability(&server, name).await;
    assert_eq!(status, "False");
    assert!(message.contains("connection refused"), "{message}");
    server.shutdown().await;
}
