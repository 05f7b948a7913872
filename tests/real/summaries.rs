//! 3j: a summary never contradicts its evidence. A scan that blames a component while the
//! metrics window counts the failures it causes must not say that none failed.

use std::time::Duration;

use super::{Expect, SETTLE, Scan, on_both, scan};
use crate::util::k8s::backend::Backend;
use crate::util::k8s::traffic::{Call, Traffic};
use crate::util::k8s::{Assets, ControlPlane};

/// A validating webhook with `failurePolicy: Fail` whose backend is down (the dial is refused)
/// while clients keep creating the objects it intercepts: every create fails with 500 during the
/// window, and the verdict on the webhook must say so — not "none failed during the scan".
fn fail_webhook_down_under_writes(assets: &Assets) -> (Scan, Expect) {
    let cp = ControlPlane::start(assets, &[]);
    cp.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: payments}\n");
    let mut backend = Backend::start(&cp.pki.backends_ca, "ledger-guard", &[]);
    let ca = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(cp.pki.backends_ca.pem())
    };
    cp.apply(&format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: ledger-guard}}
webhooks:
- name: creates.ledger-guard.example.org
  clientConfig: {{url: "{url}", caBundle: {ca}}}
  rules: [{{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}}]
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: payments}}}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
"#,
        url = backend.url("/validate")
    ));
    backend.stop();
    let t = Traffic::start(
        &cp,
        vec![Call::post(
            "/api/v1/namespaces/payments/configmaps",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p-{n}"}}"#,
        )],
        2,
        Duration::from_millis(100),
    );
    cp.poll("creates fail in admission", SETTLE, || {
        (t.count(500) > 3).then_some(())
    });
    let s = scan(&cp, &[]);
    let failed = t.count(500);
    for v in s.diagnosis["verdicts"].as_array().into_iter().flatten() {
        let summary = v["summary"].as_str().unwrap_or_default();
        assert!(
            !summary.contains("none failed"),
            "3j: {failed} creates failed, yet: {summary}"
        );
    }
    (
        s,
        Expect::Problem {
            class: "Admission",
            kind: "ValidatingWebhook",
            name: "creates.ledger-guard.example.org".into(),
            severity: "critical",
        },
    )
}
on_both!(fail_webhook_down_under_writes);
