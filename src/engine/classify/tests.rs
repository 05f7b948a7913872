//! The classifier's decisions on synthetic rules: ladder order, ties, support, Healthy and
//! Inconclusive.

use super::*;
use crate::engine::rules::load::load_sources;
use crate::engine::{Filter, Settings, analyze};

fn rule(
    id: &str,
    class: &str,
    severity: &str,
    rung: &str,
    extra: &str,
    when: &str,
) -> (String, String) {
    (
        format!("{id}.yaml"),
        format!(
            "schema: extpath.dev/rules/v1\nid: {id}\nclass: {class}\nseverity: {severity}\nsubject: APIService\nrung: {rung}\n{extra}when: \"{when}\"\nsummary: {id} fired\nexplain: test rule\n"
        ),
    )
}

fn bundle() -> EvidenceBundle {
    crate::bundle::load_bundle_str(
        "apiVersion: extpath.dev/v1alpha1\nkind: EvidenceBundle\ncollection: {tool_version: t}\napi_services:\n  - {name: v1.a.example.com, group: a.example.com, version: v1, service: {namespace: n, name: s, port: 443}}\n",
        "test",
    )
    .unwrap()
}

fn verdict(rules: &[(String, String)]) -> Verdict {
    let (set, errors) = load_sources(rules.iter().cloned(), false);
    assert!(errors.is_empty(), "{errors:?}");
    let d = analyze(&bundle(), &set, &Settings::default(), &Filter::default());
    d.verdicts.into_iter().next().unwrap()
}

#[test]
fn the_earliest_failing_rung_decides_and_the_rest_are_consequences() {
    let v = verdict(&[
        rule(
            "late-critical",
            "Storage",
            "critical",
            "storage",
            "",
            "true",
        ),
        rule(
            "early-warning",
            "Aggregation",
            "warning",
            "service",
            "",
            "true",
        ),
    ]);
    assert_eq!(v.class, Class::Aggregation);
    assert_eq!(v.severity, Severity::Warning);
    assert_eq!(v.consequences[0].rule, "late-critical");
}

#[test]
fn ties_go_to_severity_then_confidence() {
    let v = verdict(&[
        rule(
            "warn",
            "Auth",
            "warning",
            "tls",
            "confidence: 0.99\n",
            "true",
        ),
        rule(
            "crit",
            "Aggregation",
            "critical",
            "tls",
            "confidence: 0.5\n",
            "true",
        ),
    ]);
    assert_eq!(v.class, Class::Aggregation);
    let v = verdict(&[
        rule(
            "low",
            "Auth",
            "critical",
            "tls",
            "confidence: 0.5\n",
            "true",
        ),
        rule(
            "high",
            "Aggregation",
            "critical",
            "tls",
            "confidence: 0.9\n",
            "true",
        ),
    ]);
    assert_eq!(v.class, Class::Aggregation);
    assert_eq!(v.confidence, 0.9);
}

#[test]
fn support_rules_never_decide_alone() {
    let v = verdict(&[rule(
        "hist",
        "APF",
        "warning",
        "flowcontrol",
        "role: support\n",
        "true",
    )]);
    assert_eq!(v.class, Class::Inconclusive);
    assert_eq!(v.history[0].rule, "hist");
    let v = verdict(&[
        rule(
            "hist",
            "Aggregation",
            "warning",
            "discovery",
            "role: support\nconfidence: 0.6\n",
            "true",
        ),
        rule(
            "now",
            "Aggregation",
            "critical",
            "discovery",
            "confidence: 0.8\n",
            "true",
        ),
    ]);
    assert_eq!(v.class, Class::Aggregation);
    assert_eq!(
        v.rules.len(),
        2,
        "support of the same class backs the verdict"
    );
    assert_eq!(v.confidence, 0.86, "1 - (1 - 0.8)(1 - 0.6/2)");
}

#[test]
fn healthy_inconclusive_and_no_finding() {
    let v = verdict(&[rule("ok", "Healthy", "info", "discovery", "", "true")]);
    assert_eq!((v.class, v.severity), (Class::Healthy, Severity::Info));
    let v = verdict(&[rule(
        "needy",
        "Aggregation",
        "critical",
        "discovery",
        "needs: \"false\"\n",
        "false",
    )]);
    assert_eq!(
        (v.class, v.severity),
        (Class::Inconclusive, Severity::Warning)
    );
    assert!(v.summary.ends_with("missing: false"), "{}", v.summary);
    // With words, the summary says what is missing instead of showing the expression.
    let v = verdict(&[
        rule(
            "needy",
            "Aggregation",
            "critical",
            "discovery",
            "needs: {when: \"false\", what: \"the APIService's conditions\"}\n",
            "false",
        ),
        rule(
            "needy-too",
            "Aggregation",
            "critical",
            "service",
            "needs: {when: \"1 == 2\", what: \"the APIService's conditions\"}\n",
            "false",
        ),
    ]);
    assert_eq!(v.class, Class::Inconclusive);
    assert_eq!(
        v.summary,
        "the evidence these checks need is missing: the APIService's conditions"
    );
    let v = verdict(&[rule(
        "quiet",
        "Aggregation",
        "critical",
        "discovery",
        "needs: \"true\"\n",
        "false",
    )]);
    assert_eq!(v.class, Class::Healthy);
}

#[test]
fn apiservice_discovery_paths_use_the_legacy_prefix_for_the_core_group() {
    // `v1.` is the core group: kube-apiserver serves it at /api/v1, never /apis/v1.
    assert_eq!(gv_path("v1."), "/api/v1");
    assert_eq!(
        gv_path("v1beta1.metrics.k8s.io"),
        "/apis/metrics.k8s.io/v1beta1"
    );
    assert_eq!(gv_path("v1.apps"), "/apis/apps/v1");
}
