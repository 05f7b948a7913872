//! `scan` against a cluster that fights back: `/metrics` forbidden to the scanning identity, one
//! list answered 500 (a storage error) and another 429 (a priority level with no seats), and a
//! backend that accepts TCP but never finishes the TLS handshake. The scan keeps to its deadlines,
//! names each failure as a gap, and still judges every subject from the evidence it did get.

use std::time::Duration;

use serde_json::{Value, json};

use crate::collect::{Files, extpath_run, gaps, start_text};
use crate::util::repo;

/// The shipped ClusterRole's rules without `/metrics`.
fn rules_without_metrics() -> Value {
    let mut rules = crate::collect::shipped_cluster_role()["rules"].clone();
    for r in rules.as_array_mut().unwrap() {
        if let Some(urls) = r.get_mut("nonResourceURLs").and_then(Value::as_array_mut) {
            urls.retain(|u| u != "/metrics");
        }
    }
    rules
}

fn hostile_scenario() -> String {
    let text = std::fs::read_to_string(repo().join("fixtures/scenarios/healthy.yaml")).unwrap();
    let mut s: Value = serde_saphyr::from_str(&text).unwrap();
    let o = s.as_object_mut().unwrap();
    o.remove("expect");
    o.remove("traffic");
    o.insert("name".into(), json!("hostile"));
    o["users"].as_array_mut().unwrap().push(json!({
        "name": "gate", "token": "gate-token", "allow": rules_without_metrics()
    }));
    o.insert(
        "faults".into(),
        json!({"storage": [{
            "resource": "validatingwebhookconfigurations",
            "operations": ["list"],
            "error": "etcdserver: request timed out"
        }]}),
    );
    o["objects"].as_array_mut().unwrap().extend([
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
               "metadata": {"name": "no-seats"},
               "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 0,
                        "lendablePercent": 0, "borrowingLimitPercent": 0,
                        "limitResponse": {"type": "Reject"}}}}),
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
               "metadata": {"name": "gate-crds"},
               "spec": {"priorityLevelConfiguration": {"name": "no-seats"}, "matchingPrecedence": 10,
                        "rules": [{"subjects": [{"kind": "User", "user": {"name": "gate"}}],
                                   "resourceRules": [{"verbs": ["list"],
                                       "apiGroups": ["apiextensions.k8s.io"],
                                       "resources": ["customresourcedefinitions"],
                                       "clusterScope": true}]}]}}),
    ]);
    serde_json::to_string(&s).unwrap()
}

/// A port that accepts TCP connections and never says a word.
fn silent_port() -> (u16, std::net::TcpListener) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (l.local_addr().unwrap().port(), l)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_cluster_neither_holds_the_scan_nor_costs_the_other_evidence() {
    let server = start_text(&hostile_scenario()).await;
    let (silent, _listener) = silent_port();
    let f = Files::new();
    let ca = f.write("ca.crt", server.ca_pem());
    let args = |out: &str| {
        [
            "--server",
            &server.url(),
            "--certificate-authority",
            ca.to_str().unwrap(),
            "--token",
            "gate-token",
            "--window",
            "0",
            "--request-timeout",
            "2s",
            "--timeout",
            "30s",
            "--backend-address",
            &format!("api.wardle-system=127.0.0.1:{silent}"),
            "-o",
            out,
        ]
        .map(str::to_string)
        .to_vec()
    };
    let (r, took) = extpath_run(&f, "scan", args("json")).await;
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    // The silent backend costs one request timeout, not the whole budget.
    assert!(took < Duration::from_secs(20), "the scan took {took:?}");
    let d: Value = serde_json::from_str(&r.stdout).unwrap();
    let g = gaps(&d);
    let detail = |source: &str| -> String {
        d["gaps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["source"] == source)
            .map(|x| format!("{} {}", x["reason"], x["detail"]))
            .unwrap_or_else(|| panic!("no {source} gap in {g:?}"))
    };
    assert!(detail("metrics/apiserver").contains("forbidden"));
    let storage = detail("objects/validatingwebhookconfigurations");
    assert!(
        storage.contains("500") && storage.contains("etcdserver: request timed out"),
        "{storage}"
    );
    let throttled = detail("objects/customresourcedefinitions");
    assert!(throttled.contains("429"), "{throttled}");
    assert!(
        g.iter()
            .any(|(s, reason)| s.contains("wardle") && reason == "timeout"),
        "the silent backend's handshake is a timeout gap: {g:?}"
    );

    // What could be read is still judged.
    let verdicts = d["verdicts"].as_array().unwrap();
    let wardle = verdicts
        .iter()
        .find(|v| v["subject"]["name"] == "v1alpha1.wardle.example.com")
        .expect("the APIService is judged");
    assert_ne!(wardle["class"], "Inconclusive", "{wardle:#}");
    assert!(
        verdicts
            .iter()
            .any(|v| v["subject"]["kind"] == "FlowSchema"),
        "FlowSchemas were read"
    );

    // A person sees the gaps too.
    let (r, _) = extpath_run(&f, "scan", args("table")).await;
    assert!(
        r.stdout.contains("metrics/apiserver")
            && r.stdout.contains("objects/customresourcedefinitions"),
        "{}",
        r.stdout
    );
    server.shutdown().await;
}
