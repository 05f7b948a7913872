//! Delegated authentication and authorization of an extension server, found without waiting for a
//! user to fail — end to end against the reference server, whose extension backend really decides
//! by the scenario's RBAC objects (fixtures/scenarios/auth-delegation-*.yaml).
//!
//! The two checks are held apart: a scan with full access finds a missing `system:auth-delegator`
//! both from the RBAC objects and by the delegation probe, and the verdict names both; without the
//! probe the objects alone find it, without RBAC the probe alone, with neither nothing is blamed. No
//! user traffic is involved. On a healthy extension the probe passes without a Request subject, a
//! role that may not impersonate leaves a gap, and one that may not read RBAC leaves gaps — never
//! findings.

use extpath::bundle::{EvidenceBundle, Gap, GapReason};
use extpath::engine::{Filter, RuleSet, Settings, analyze};
use extpath::refserver::scenario::{self, Rule, UserSpec};
use extpath::refserver::{RefServer, RunningServer, StartOptions};
use serde_json::Value;

use super::util::repo;
use crate::util::{Files, gaps, run, shipped_cluster_role};

async fn start_with_users(name: &str) -> RunningServer {
    let path = repo().join(format!("fixtures/scenarios/{name}.yaml"));
    let mut s = scenario::load(&path).unwrap();
    // The shipped role without its impersonation rules: a scanner that may not impersonate.
    let shipped: Vec<Rule> =
        serde_json::from_value::<Vec<Rule>>(shipped_cluster_role()["rules"].clone())
            .unwrap()
            .into_iter()
            .filter(|r| !r.verbs.iter().any(|v| v == "impersonate"))
            .collect();
    let mut prober: Vec<Rule> = shipped
        .iter()
        .filter(|r| {
            !r.api_groups
                .iter()
                .any(|g| g == "rbac.authorization.k8s.io")
        })
        .cloned()
        .collect();
    prober.push(Rule {
        verbs: vec!["impersonate".into()],
        api_groups: vec!["".into()],
        resources: vec!["users".into(), "groups".into()],
        ..Rule::default()
    });
    for (name, allow) in [("gate", shipped), ("prober", prober)] {
        s.users.push(UserSpec {
            name: name.into(),
            groups: Vec::new(),
            token: Some(format!("{name}-token")),
            client_certificate: false,
            allow,
        });
    }
    RefServer::start(s, StartOptions::default()).await.unwrap()
}

fn collect(server: &RunningServer, f: &Files, token: &str) -> EvidenceBundle {
    collect_with(server, f, token, &[])
}

fn collect_with(server: &RunningServer, f: &Files, token: &str, extra: &[&str]) -> EvidenceBundle {
    let url = server.url();
    let ca = f.write("ca.crt", server.ca_pem());
    let mut args = vec![
        "collect",
        "--server",
        url.as_str(),
        "--certificate-authority",
        ca.to_str().unwrap(),
        "--token",
        token,
        "--window",
        "0",
        "--skip-list-probe",
        "-o",
        "json",
    ];
    args.extend(extra);
    let r = run(f.path(), &args, &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

/// What a collection that may not list RBAC records: no objects, a forbidden gap each.
fn forget_rbac(b: &mut EvidenceBundle) {
    b.cluster_roles.clear();
    b.cluster_role_bindings.clear();
    b.roles.clear();
    b.role_bindings.clear();
    for source in [
        "objects/clusterroles",
        "objects/clusterrolebindings",
        "objects/roles",
        "objects/rolebindings",
    ] {
        b.gaps
            .push(Gap::new(source, GapReason::Forbidden, "HTTP 403"));
    }
}

fn verdict(b: &EvidenceBundle, subject: &str) -> Value {
    let d = analyze(
        b,
        &RuleSet::bundled(),
        &Settings::default(),
        &Filter::default(),
    );
    let doc = serde_json::to_value(&d).unwrap();
    doc["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| {
            format!(
                "{}/{}",
                v["subject"]["kind"].as_str().unwrap(),
                v["subject"]["name"].as_str().unwrap()
            ) == subject
        })
        .cloned()
        .unwrap_or_else(|| panic!("no verdict for {subject}"))
}

fn rule_ids(v: &Value) -> Vec<String> {
    v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

fn delegation_probes(b: &EvidenceBundle) -> Vec<&extpath::bundle::Probe> {
    b.probes
        .iter()
        .filter(|p| p.user.as_deref() == Some("extpath:delegation-probe"))
        .collect()
}

const WARDLE: &str = "APIService/v1alpha1.wardle.example.com";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_auth_delegator_is_found_by_each_check_without_traffic() {
    let server = start_with_users("auth-delegation-no-auth-delegator").await;
    let f = Files::new();
    let admin = server.admin_token().to_string();

    // Full access: both checks find it, and the verdict names both.
    let b = collect(&server, &f, &admin);
    let probes = delegation_probes(&b);
    assert_eq!(probes.len(), 1, "{probes:?}");
    assert_eq!(probes[0].status, Some(500));
    assert!(
        probes[0]
            .body
            .as_deref()
            .unwrap()
            .contains("subjectaccessreviews.authorization.k8s.io is forbidden: User \"system:serviceaccount:wardle-system:wardle-apiserver\""),
        "{probes:?}"
    );
    assert_eq!(
        b.pods[0].service_account.as_deref(),
        Some("wardle-apiserver")
    );
    assert!(!b.cluster_role_bindings.is_empty() && !b.role_bindings.is_empty());
    let v = verdict(&b, WARDLE);
    assert_eq!(v["class"], "Auth", "{v}");
    let ids = rule_ids(&v);
    assert!(
        ids.contains(&"auth-delegation-rbac-auth-delegator".to_string()),
        "{ids:?}"
    );
    assert!(
        ids.contains(&"auth-delegation-probe-authz".to_string()),
        "{ids:?}"
    );
    let rbac_hit = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "auth-delegation-rbac-auth-delegator")
        .unwrap();
    let summary = rbac_hit["summary"].as_str().unwrap();
    assert!(
        summary.contains("system:serviceaccount:wardle-system:wardle-apiserver"),
        "{summary}"
    );
    assert!(
        summary.contains("create subjectaccessreviews.authorization.k8s.io"),
        "{summary}"
    );
    assert!(
        summary.contains(
            "--clusterrole=system:auth-delegator --serviceaccount=wardle-system:wardle-apiserver"
        ),
        "{summary}"
    );
    // Nobody but the scan used the extension: no user had to fail first.
    assert!(server.traffic_requests().is_empty());
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.user == "extpath:delegation-probe"
                && r.path == "/apis/wardle.example.com/v1alpha1"),
        "the probe is sent as the ordinary user"
    );

    // Without the probe, the objects alone find it.
    let b = collect_with(&server, &f, &admin, &["--skip-delegation-probe"]);
    assert!(delegation_probes(&b).is_empty());
    assert!(
        !b.gaps
            .iter()
            .any(|g| g.source.starts_with("probes/delegation")),
        "--skip-delegation-probe sends nothing: {:?}",
        b.gaps
    );
    let v = verdict(&b, WARDLE);
    assert_eq!(v["class"], "Auth", "{v}");
    assert_eq!(rule_ids(&v), vec!["auth-delegation-rbac-auth-delegator"]);

    // Without RBAC (a 403 on the lists is a gap, never a finding), the probe alone finds it; with
    // neither, nothing is judged and nothing is blamed.
    let mut b = collect(&server, &f, &admin);
    forget_rbac(&mut b);
    let v = verdict(&b, WARDLE);
    assert_eq!(v["class"], "Auth", "{v}");
    assert_eq!(rule_ids(&v), vec!["auth-delegation-probe-authz"]);
    b.probes.retain(|p| p.user.is_none());
    assert_eq!(verdict(&b, WARDLE)["class"], "Healthy");

    // A scanner outside system:masters (the shipped read-only role) meets the failure itself: its
    // own discovery request gets the 500, so no second probe is needed.
    let b = collect(&server, &f, "gate-token");
    assert!(delegation_probes(&b).is_empty());
    let v = verdict(&b, WARDLE);
    assert_eq!(v["class"], "Auth", "{v}");
    let ids = rule_ids(&v);
    assert!(
        ids.contains(&"auth-delegation-rbac-auth-delegator".to_string()),
        "{ids:?}"
    );
    assert!(
        ids.contains(&"auth-extension-sar-forbidden".to_string()),
        "{ids:?}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_extension_passes_the_probe_without_a_request_subject() {
    let server = start_with_users("auth-delegation-healthy").await;
    let f = Files::new();
    let admin = server.admin_token().to_string();
    let b = collect(&server, &f, &admin);
    let probes = delegation_probes(&b);
    assert_eq!(probes.len(), 1);
    assert_eq!(probes[0].status, Some(200));
    let d = analyze(
        &b,
        &RuleSet::bundled(),
        &Settings::default(),
        &Filter::default(),
    );
    assert!(
        !d.verdicts
            .iter()
            .any(|v| v.subject.kind == extpath::engine::SubjectKind::Request),
        "{:?}",
        d.verdicts
            .iter()
            .map(|v| v.subject.to_string())
            .collect::<Vec<_>>()
    );
    assert_eq!(verdict(&b, WARDLE)["class"], "Healthy");
    // A read-only role that may not impersonate: the probe is a gap, not a finding.
    let b = collect(&server, &f, "gate-token");
    assert!(delegation_probes(&b).is_empty());
    let g = gaps(&serde_json::to_value(&b).unwrap());
    assert!(
        g.contains(&(
            "probes/delegation/APIService/v1alpha1.wardle.example.com".into(),
            "forbidden".into()
        )),
        "{g:?}"
    );
    assert!(!g.iter().any(|(s, _)| s.starts_with("objects/")), "{g:?}");
    assert_eq!(verdict(&b, WARDLE)["class"], "Healthy");
    // A role that may impersonate but not read RBAC: the lists are gaps, the probe passes.
    let b = collect(&server, &f, "prober-token");
    let g = gaps(&serde_json::to_value(&b).unwrap());
    for source in [
        "objects/clusterroles",
        "objects/clusterrolebindings",
        "objects/roles",
        "objects/rolebindings",
    ] {
        assert!(g.contains(&(source.into(), "forbidden".into())), "{g:?}");
    }
    assert_eq!(delegation_probes(&b)[0].status, Some(200));
    assert_eq!(verdict(&b, WARDLE)["class"], "Healthy");
    // alice, granted flunders by RBAC objects, is served through the extension's review.
    let alice_ok = server.traffic_requests().iter().any(|r| r.user == "alice");
    assert!(alice_ok);
    server.shutdown().await;
}
