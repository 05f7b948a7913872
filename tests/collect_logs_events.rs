//! Two collect sources beyond objects and metrics: `--pod-logs` (the known error lines of the logs
//! of the Pods behind APIServices and webhooks, attached to what they serve; a 403 is a gap) and the
//! cluster's Warning Events that report a failed request (observations of that request).

use serde_json::Value;

use crate::util::repo;
use crate::util::{Files, gaps, run, start, start_text};

fn collect(server: &extpath::refserver::RunningServer, f: &Files, extra: &[&str]) -> Value {
    let url = server.url();
    let ca = f.write("ca.crt", server.ca_pem());
    let mut args = vec![
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
    args.extend(extra);
    let r = run(f.path(), &args, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r.bundle()
}

fn log_requests(server: &extpath::refserver::RunningServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.path.contains("/log"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_logs_attach_the_extension_servers_errors_to_its_apiservice() {
    // The scenario's alice keeps listing flunders; the extension may not review her requests.
    let server = start("auth-backend-403-delegated-authz").await;
    let f = Files::new();
    let token = server.admin_token().to_string();
    let without = collect(&server, &f, &["--token", &token]);
    assert!(without["log_findings"].as_array().is_none_or(Vec::is_empty));
    assert_eq!(
        log_requests(&server),
        0,
        "logs are read only with --pod-logs"
    );

    // Give alice's client time to be refused at least once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let b = loop {
        let b = collect(&server, &f, &["--token", &token, "--pod-logs"]);
        let found = b["log_findings"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x["pattern"] == "sar-forbidden"));
        if found || std::time::Instant::now() > deadline {
            break b;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let sar = b["log_findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["pattern"] == "sar-forbidden")
        .unwrap_or_else(|| panic!("no sar-forbidden finding: {}", b["log_findings"]));
    assert_eq!(sar["component"], "extension_apiserver");
    assert_eq!(sar["target"]["kind"], "APIService");
    assert_eq!(sar["target"]["name"], "v1alpha1.wardle.example.com");
    assert_eq!(
        sar["origin"],
        "pods/wardle-system/wardle-apiserver-6d8f9/log"
    );
    assert!(
        sar["message"]
            .as_str()
            .unwrap()
            .contains("User \"system:serviceaccount:wardle-system:wardle-apiserver\" cannot create resource \"subjectaccessreviews\"")
    );
    assert!(
        gaps(&b)
            .iter()
            .all(|(source, _)| !source.starts_with("pods/")),
        "{:?}",
        gaps(&b)
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_log_the_collector_may_not_read_is_a_gap() {
    // The shipped least-privilege role does not grant pods/log.
    let role = crate::util::shipped_cluster_role();
    let scenario = std::fs::read_to_string(
        repo().join("fixtures/scenarios/auth-backend-403-delegated-authz.yaml"),
    )
    .unwrap()
    .replace(
        "users:\n",
        &format!(
            "users:\n  - name: gate\n    token: gate-token\n    allow: {}\n",
            serde_json::to_string(&role["rules"]).unwrap()
        ),
    );
    let server = start_text(&scenario).await;
    let f = Files::new();
    let b = collect(
        &server,
        &f,
        &["--token", "gate-token", "--pod-logs", "--skip-list-probe"],
    );
    let log_gaps: Vec<(String, String)> = gaps(&b)
        .into_iter()
        .filter(|(source, _)| source.starts_with("pods/"))
        .collect();
    assert_eq!(
        log_gaps,
        vec![(
            "pods/wardle-system/wardle-apiserver-6d8f9/log".to_string(),
            "forbidden".to_string()
        )]
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controllers_warning_event_is_an_observation_of_its_failed_request() {
    let server = start("outofscope-crd-deleted").await;
    let f = Files::new();
    let token = server.admin_token().to_string();
    let b = collect(&server, &f, &["--token", &token]);
    let observed: Vec<&Value> = b["probes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["origin"]["tool"] == "controller")
        .collect();
    assert_eq!(observed.len(), 1, "{observed:?}");
    assert_eq!(
        observed[0]["description"],
        "get crontabs.stable.example.com"
    );
    assert_eq!(observed[0]["status"], 404);
    let events: Vec<&Value> = b["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "FailedList")
        .collect();
    assert_eq!(events.len(), 1, "the Event itself is kept once");
    server.shutdown().await;
}
