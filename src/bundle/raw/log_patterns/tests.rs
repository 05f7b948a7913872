//! Tests of the pattern table against real lines of several releases.

use super::*;

#[test]
fn every_pattern_compiles_and_ids_are_unique_kebab_case() {
    for i in 0..PATTERNS.len() {
        let _ = compiled(i);
    }
    let mut ids: Vec<&str> = PATTERNS.iter().map(|p| p.id).collect();
    assert!(ids.iter().all(|id| {
        id.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    }));
    ids.sort_unstable();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate pattern id");
}

#[test]
fn every_pattern_is_documented() {
    let doc = include_str!("../../../../docs/raw-import.md");
    for p in PATTERNS {
        assert!(
            doc.contains(&format!("| `{}` |", p.id)),
            "{} is not in docs/raw-import.md",
            p.id
        );
    }
}

#[test]
fn the_real_lines_match_with_their_fields() {
    let m = match_message(
        r#"Failed calling webhook, failing closed vwh.example.com: failed calling webhook "vwh.example.com": failed to call webhook: Post "https://127.0.0.1:9444/validate?timeout=5s": dial tcp 127.0.0.1:9444: connect: connection refused"#,
    );
    assert_eq!(m[0].0.id, "webhook-failing-closed");
    assert_eq!(m[0].1["webhook"], "vwh.example.com");
    let m = match_message(
        r#""command failed" err="unable to load configmap based request-header-client-ca-file: configmaps \"extension-apiserver-authentication\" is forbidden: User \"wardle-apiserver\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\"""#,
    );
    let ids: Vec<&str> = m.iter().map(|(p, _)| p.id).collect();
    assert_eq!(ids, ["server-command-failed", "auth-reader-forbidden"]);
    assert_eq!(m[1].1["user"], "wardle-apiserver");
    let m = match_message(
        "v1alpha1.wardle.example.com failed with: failing or missing response from https://x: bad status from https://x: 403",
    );
    assert_eq!(m[0].0.id, "apiservice-check-failed");
    assert_eq!(m[0].1["apiservice"], "v1alpha1.wardle.example.com");
    let m = match_message(
        r#"loading OpenAPI spec for "v1alpha1.wardle.example.com" failed with: failed to retrieve openAPI spec"#,
    );
    assert_eq!(m[0].0.id, "openapi-aggregation-failed");
    let m =
        match_message("watch chan error: etcdserver: mvcc: required revision has been compacted");
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].0.id, "watch-chan-compacted");
    assert!(match_message("Shutting down controller").is_empty());
}

#[test]
fn auth_and_conversion_lines_of_other_releases_match() {
    let one = |line: &str| {
        let m = match_message(line);
        assert_eq!(m.len(), 1, "{line}");
        (m[0].0.id, m[0].1.clone())
    };
    let (id, f) = one(
        r#""Unable to authenticate the request" err="[x509: subject with cn=some-other-proxy is not in the allowed list]""#,
    );
    assert_eq!(
        (id, f["cn"].as_str()),
        ("front-proxy-cn-not-allowed", "some-other-proxy")
    );
    let (id, f) = one(
        r#""Unable to authenticate the request" err="[x509: certificate signed by unknown authority]""#,
    );
    assert_eq!(id, "unauthenticated-request");
    assert_eq!(f["error"], "x509: certificate signed by unknown authority");
    let (_, f) = one(
        "Unable to authenticate the request due to an error: x509: certificate has expired or is not yet valid",
    );
    assert!(f["error"].starts_with("x509: certificate has expired"));
    let (id, f) = one(
        r#"conversion webhook for stable.example.com/v1, Kind=CronTab failed: Post "https://conv.hooks.svc:443/convert?timeout=30s": dial tcp 10.0.0.1:443: connect: connection refused"#,
    );
    assert_eq!(
        (id, f["gvk"].as_str()),
        (
            "conversion-webhook-failed",
            "stable.example.com/v1, Kind=CronTab"
        )
    );
    let (id, f) =
        one("error resolving kube-system/metrics-server: service \"metrics-server\" not found");
    assert_eq!(
        (id, f["service"].as_str()),
        ("aggregator-error-resolving", "metrics-server")
    );
    let (id, _) = one(
        r#"Failed calling webhook, failing open policy.example.com: failed calling webhook "policy.example.com": failed to call webhook: Post "https://x:443/v?timeout=10s": context deadline exceeded"#,
    );
    assert_eq!(id, "webhook-failing-open");
    let (id, f) = one(
        "retrying of unary invoker failed: rpc error: code = Unavailable desc = etcdserver: leader changed",
    );
    assert_eq!(
        (id, f["error"].as_str()),
        (
            "etcd-client-retry",
            "rpc error: code = Unavailable desc = etcdserver: leader changed"
        )
    );
}
