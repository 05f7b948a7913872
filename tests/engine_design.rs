//! The differential rules of docs/diagnosis.md, end to end: each classic misattribution does not happen.
//! Every test analyses a fixture bundle with the bundled rules and checks the verdicts — the right
//! class on the failing subjects, and no verdict anywhere blaming the layer the rule warns about.

use extpath::bundle::load_bundle;
use extpath::engine::{Class, Diagnosis, Filter, RuleSet, Settings, Severity, analyze};

use super::util::repo;

fn diagnose(fixture: &str) -> Diagnosis {
    let bundle = load_bundle(&repo().join("fixtures/bundles").join(fixture)).unwrap();
    analyze(
        &bundle,
        &RuleSet::bundled(),
        &Settings::default(),
        &Filter::default(),
    )
}

fn class_of(d: &Diagnosis, subject: &str) -> Class {
    d.verdicts
        .iter()
        .find(|v| v.subject.to_string() == subject)
        .unwrap_or_else(|| {
            let all: Vec<String> = d.verdicts.iter().map(|v| v.subject.to_string()).collect();
            panic!("no verdict on {subject}; verdicts on {all:?}")
        })
        .class
}

/// No verdict at warning or above blames `class`, on any subject.
fn nobody_blames(d: &Diagnosis, class: Class) {
    let bad: Vec<String> = d
        .verdicts
        .iter()
        .filter(|v| v.class == class && v.severity >= Severity::Warning)
        .map(|v| format!("{} {}", v.subject, v.summary))
        .collect();
    assert!(bad.is_empty(), "{class} blamed: {bad:?}");
}

fn ruled_out(d: &Diagnosis, subject: &str, class: Class) -> bool {
    d.verdicts
        .iter()
        .find(|v| v.subject.to_string() == subject)
        .is_some_and(|v| v.ruled_out.iter().any(|r| r.class == class))
}

#[test]
fn rule_1_a_503_is_not_etcd_is_down() {
    let d = diagnose("design-503-not-etcd.yaml");
    assert_eq!(
        class_of(&d, "Request/get pods.metrics.k8s.io"),
        Class::Aggregation
    );
    assert_eq!(
        class_of(
            &d,
            "Request/PATCH /apis/apps/v1/namespaces/team/deployments/web"
        ),
        Class::Admission
    );
    assert_eq!(class_of(&d, "Etcd/etcd"), Class::Healthy);
    nobody_blames(&d, Class::Storage);
    assert!(ruled_out(
        &d,
        "Request/get pods.metrics.k8s.io",
        Class::Storage
    ));
}

#[test]
fn rule_2_a_slow_conversion_webhook_is_not_slow_etcd() {
    let d = diagnose("adm-conversion.yaml");
    assert_eq!(
        class_of(&d, "CustomResourceDefinition/slowpokes.conv.example.com"),
        Class::Admission
    );
    assert_eq!(
        class_of(&d, "Request/GET /apis/conv.example.com/v2/slowpokes"),
        Class::Admission
    );
    nobody_blames(&d, Class::Storage);
    assert!(ruled_out(
        &d,
        "Request/GET /apis/conv.example.com/v2/slowpokes",
        Class::Storage
    ));
}

#[test]
fn rule_3_an_unavailable_extension_server_is_aggregation_and_its_backend_out_of_scope() {
    let down = diagnose("agg-discovery.yaml");
    assert_eq!(
        class_of(&down, "APIService/v1alpha1.down.example.com"),
        Class::Aggregation
    );
    nobody_blames(&down, Class::Storage);
    let backend = diagnose("outofscope.yaml");
    assert_eq!(
        class_of(
            &backend,
            "Request/GET /apis/wardle.example.com/v1alpha1/namespaces/wardle-system/flunders"
        ),
        Class::OutOfScope
    );
    assert_eq!(
        class_of(&backend, "APIService/v1alpha1.wardle.example.com"),
        Class::OutOfScope
    );
    nobody_blames(&backend, Class::Storage);
}

#[test]
fn rule_4_401_and_403_are_auth_and_delegated_authz_points_at_the_extension() {
    let users = diagnose("auth-users.yaml");
    assert_eq!(
        class_of(
            &users,
            "Request/GET /apis/wardle.example.com/v1alpha1/namespaces/wardle-system/flunders"
        ),
        Class::Auth
    );
    assert_eq!(class_of(&users, "Request/get pods"), Class::Auth);
    nobody_blames(&users, Class::Storage);
    nobody_blames(&users, Class::Aggregation);
    let ext = diagnose("auth-extension.yaml");
    let sar = ext
        .verdicts
        .iter()
        .find(|v| v.subject.to_string() == "Request/get things.sar.example.com")
        .unwrap();
    assert_eq!(sar.class, Class::Auth);
    assert!(
        sar.next.iter().any(|n| n.contains("auth-delegator")),
        "the fix is the extension server's RBAC: {:?}",
        sar.next
    );
    nobody_blames(&ext, Class::Storage);
    // A webhook's policy denial is a 403 too, and is not Auth: the webhook working as
    // configured (OutOfScope).
    let policy = diagnose("adm-webhooks.yaml");
    assert_eq!(
        class_of(
            &policy,
            "Request/POST /api/v1/namespaces/wh-s20d/configmaps"
        ),
        Class::OutOfScope
    );
    nobody_blames(&policy, Class::Auth);
}

#[test]
fn rule_5_429_and_504_after_queueing_are_apf_not_etcd_lag() {
    let flood = diagnose("apf-single.yaml");
    assert_eq!(
        class_of(&flood, "Request/GET /api/v1/namespaces/apf-load/configmaps"),
        Class::Apf
    );
    assert_eq!(class_of(&flood, "PriorityLevel/tiny"), Class::Apf);
    let queued = diagnose("apf-windowed.yaml");
    assert_eq!(
        class_of(
            &queued,
            "Request/PATCH /apis/apps/v1/namespaces/team/deployments/web"
        ),
        Class::Apf
    );
    nobody_blames(&queued, Class::Storage);
    // The client's own rate limiter and a shutting-down server are not APF.
    let misc = diagnose("apf-misc.yaml");
    assert_eq!(
        class_of(&misc, "Request/GET /api/v1/namespaces/default/configmaps"),
        Class::OutOfScope
    );
    assert_eq!(
        class_of(&misc, "Request/GET /api/v1/namespaces/default/services"),
        Class::OutOfScope
    );
}

#[test]
fn rule_6_a_stale_controller_with_a_healthy_watch_is_out_of_scope() {
    let d = diagnose("watch.yaml");
    assert_eq!(
        class_of(
            &d,
            "Request/WATCH /apis/apps/v1/namespaces/team/deployments"
        ),
        Class::OutOfScope
    );
    assert!(ruled_out(
        &d,
        "Request/WATCH /apis/apps/v1/namespaces/team/deployments",
        Class::Watch
    ));
    // A broken or silent stream is Watch, checked first.
    assert_eq!(
        class_of(&d, "Request/WATCH /api/v1/namespaces/team/pods"),
        Class::Watch
    );
}

#[test]
fn rule_7_available_true_does_not_prove_the_aggregated_path() {
    let d = diagnose("agg-tls.yaml");
    assert_eq!(
        class_of(&d, "APIService/v1.badca.example.com"),
        Class::Aggregation
    );
    assert_eq!(
        class_of(&d, "APIService/v1.badsan.example.com"),
        Class::Aggregation
    );
    assert_eq!(
        class_of(&d, "APIService/v1.goodtls.example.com"),
        Class::Healthy
    );
}

#[test]
fn rule_8_the_same_client_words_are_classified_on_the_inner_error() {
    let d = diagnose("design-503-not-etcd.yaml");
    // Both say "the server is currently unable to handle the request": one is an unavailable
    // APIService, the other a TLS failure of the proxy. Their rungs differ.
    let unavailable = d
        .verdicts
        .iter()
        .find(|v| v.subject.to_string() == "Request/get pods.metrics.k8s.io")
        .unwrap();
    let tls = d
        .verdicts
        .iter()
        .find(|v| v.subject.to_string() == "Request/GET /apis/custom.example.com/v1")
        .unwrap();
    assert_eq!(unavailable.class, Class::Aggregation);
    assert_eq!(tls.class, Class::Aggregation);
    assert_eq!(tls.rules[0].id, "aggregation-request-proxy-tls");
    assert_ne!(unavailable.rung, tls.rung);
    // "Internal error occurred: failed calling webhook" is Admission whatever its status.
    assert_eq!(
        class_of(
            &d,
            "Request/PATCH /apis/apps/v1/namespaces/team/deployments/web"
        ),
        Class::Admission
    );
}

#[test]
fn rule_9_the_first_failing_rung_explains_the_rest() {
    let d = diagnose("design-ladder.yaml");
    let v = d
        .verdicts
        .iter()
        .find(|v| v.subject.to_string() == "APIService/v1.layered.example.com")
        .unwrap();
    assert_eq!(v.class, Class::Aggregation);
    assert_eq!(v.rung, Some(extpath::bundle::Rung::Service));
    assert_eq!(v.rules[0].id, "aggregation-service-missing");
    assert!(
        v.consequences
            .iter()
            .any(|c| c.rule == "aggregation-tls-cert-expired"),
        "the expired CA is a consequence: {:?}",
        v.consequences
    );
}
