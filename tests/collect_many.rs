//! Stage two on a cluster with more referenced Services than `BY_NAME_LIMIT`: each kind is listed
//! once cluster-wide (and Events once, with more namespaces than the limit) and only the referenced
//! objects are kept — the same evidence the per-name fetch gathers on a small cluster.

use std::fmt::Write as _;

use extpath::collect::backends::BY_NAME_LIMIT;
use serde_json::Value;

use crate::util::{Files, extpath_run, gaps, start_text};

const APISERVICES: usize = BY_NAME_LIMIT + 10;

fn scenario() -> String {
    let mut s = String::from(
        "apiVersion: extpath.dev/v1alpha1\nkind: Scenario\nname: many\nserver:\n  availabilityPeriodMs: 600000\nobjects:\n",
    );
    for i in 0..APISERVICES {
        let _ = writeln!(
            s,
            "  - {{apiVersion: v1, kind: Namespace, metadata: {{name: ext{i}}}}}"
        );
        // ext0 has no Service, ext1 no Endpoints; the rest have both.
        if i != 0 {
            let _ = writeln!(
                s,
                "  - {{apiVersion: v1, kind: Service, metadata: {{name: api, namespace: ext{i}}}, spec: {{ports: [{{name: https, port: 443, targetPort: 8443}}]}}}}"
            );
        }
        if i > 1 {
            let _ = writeln!(
                s,
                "  - {{apiVersion: v1, kind: Endpoints, metadata: {{name: api, namespace: ext{i}}}, subsets: [{{addresses: [{{ip: 10.244.{}.{}}}], ports: [{{name: https, port: 8443}}]}}]}}",
                i / 250,
                i % 250 + 1
            );
        }
        let _ = writeln!(
            s,
            "  - {{apiVersion: apiregistration.k8s.io/v1, kind: APIService, metadata: {{name: v1.group{i}.example.com}}, spec: {{group: group{i}.example.com, version: v1, groupPriorityMinimum: 1000, versionPriority: 15, insecureSkipTLSVerify: true, service: {{namespace: ext{i}, name: api, port: 443}}}}}}"
        );
    }
    // An Event about a referenced Service, one about another Service there, and one in a
    // namespace nothing references.
    s.push_str("  - {apiVersion: v1, kind: Namespace, metadata: {name: elsewhere}}\n");
    for (ns, name, svc) in [
        ("ext5", "kept", "api"),
        ("ext5", "other-service", "other"),
        ("elsewhere", "unreferenced", "api"),
    ] {
        let _ = writeln!(
            s,
            "  - {{apiVersion: v1, kind: Event, metadata: {{name: {name}, namespace: {ns}}}, type: Warning, reason: FailedToUpdateEndpoint, message: {name}, involvedObject: {{kind: Service, namespace: {ns}, name: {svc}}}}}"
        );
    }
    s
}

fn names(b: &Value, field: &str) -> Vec<String> {
    b[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field}"))
        .iter()
        .map(|o| {
            format!(
                "{}/{}",
                o["namespace"].as_str().unwrap_or(""),
                o["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_references_are_listed_once_and_only_the_referenced_objects_kept() {
    let server = start_text(&scenario()).await;
    let f = Files::new();
    let ca = f.write("ca.crt", server.ca_pem());
    let before = server.requests().len();
    let (r, _) = extpath_run(
        &f,
        "collect",
        [
            "--server",
            &server.url(),
            "--certificate-authority",
            ca.to_str().unwrap(),
            "--token",
            server.admin_token(),
            "--window",
            "0",
            "--skip-list-probe",
            "-o",
            "json",
        ]
        .map(str::to_string)
        .to_vec(),
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let b = r.bundle();

    let services = names(&b, "services");
    assert_eq!(services.len(), APISERVICES - 1, "{services:?}");
    assert!(!services.contains(&"ext0/api".to_string()));
    assert!(services.contains(&"ext1/api".to_string()));
    let endpoints = names(&b, "endpoints");
    assert_eq!(endpoints.len(), APISERVICES - 2);
    assert!(!endpoints.contains(&"ext1/api".to_string()));
    assert_eq!(
        b["endpoint_slices"].as_array().map(Vec::len),
        Some(APISERVICES - 2),
        "the mirrored EndpointSlices of the referenced Services"
    );
    let events: Vec<&str> = b["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(events.contains(&"kept"), "{events:?}");
    assert!(!events.contains(&"other-service") && !events.contains(&"unreferenced"));
    assert!(
        gaps(&b)
            .iter()
            .all(|(source, _)| !source.starts_with("objects/")),
        "{:?}",
        gaps(&b)
    );

    let paths: Vec<String> = server
        .requests()
        .into_iter()
        .skip(before)
        .map(|r| r.path)
        .collect();
    for listed in [
        "/api/v1/services?limit=",
        "/api/v1/endpoints?limit=",
        "/apis/discovery.k8s.io/v1/endpointslices?limit=",
        "/api/v1/events?limit=",
    ] {
        assert!(
            paths.iter().any(|p| p.starts_with(listed)),
            "no {listed}… in {paths:?}"
        );
    }
    assert!(
        !paths.iter().any(|p| p.contains("/services/api")
            || p.contains("/endpoints/api")
            || p.contains("/ext5/events")),
        "per-name requests were sent"
    );
    server.shutdown().await;
}
