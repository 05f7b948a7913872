//! A generated evidence bundle of a large cluster, shared by the `analyze_scale` bench and the
//! bundle round-trip test (`#[path]`-included by both): `n` remote APIServices, each with its
//! Service, Endpoints and Pod, two probes (discovery and a list) and a windowed
//! `aggregator_unavailable_apiservice` series; `n / 10` webhooks, `n / 5` CRDs and `n / 100` log
//! findings that name an APIService in their message. One APIService in fifty is broken (its
//! backend refuses connections, its probes answer 503), as are the webhooks and CRDs of the same
//! index pattern, so the rules have failures to judge at every size.

use std::fmt::Write as _;

use extpath::bundle::observations::Component;
use extpath::bundle::probes::{ClientTool, ProbeKind};
use extpath::bundle::*;
use extpath::promtext::{Selection, apply_window, parse_str};

/// Whether the i-th APIService is broken.
pub fn broken(i: usize) -> bool {
    i.is_multiple_of(50)
}

fn exposition(n: usize, scale: f64) -> String {
    let mut s = String::new();
    s.push_str("# TYPE aggregator_unavailable_apiservice gauge\n");
    for a in 0..n {
        let _ = writeln!(
            s,
            "aggregator_unavailable_apiservice{{name=\"v1.a{a}.example.com\"}} {}",
            u8::from(broken(a))
        );
    }
    s.push_str("# TYPE aggregator_unavailable_apiservice_total counter\n");
    for a in 0..n {
        let _ = writeln!(
            s,
            "aggregator_unavailable_apiservice_total{{name=\"v1.a{a}.example.com\",reason=\"FailedDiscoveryCheck\"}} {}",
            ((a % 7) as f64 * scale).round()
        );
    }
    s
}

fn probe(path: String, target: &str, failing: bool, rung: Rung) -> Probe {
    let mut p = Probe::new(ProbeOrigin {
        kind: ProbeKind::Probe,
        tool: ClientTool::Extpath,
        files: Vec::new(),
    });
    p.method = Some("GET".into());
    p.path = Some(path);
    p.latency_ms = Some(3.0);
    p.rung = Some(rung);
    p.target = Some(ObjectRef::cluster("APIService", target));
    if failing {
        p.status = Some(503);
        let message =
            "error trying to reach service: dial tcp 10.244.0.1:8443: connect: connection refused";
        p.status_body = Some(StatusBody {
            status: "Failure".into(),
            code: Some(503),
            reason: "ServiceUnavailable".into(),
            message: message.into(),
            causes: vec![StatusCause {
                reason: "UnexpectedServerResponse".into(),
                message: message.into(),
                ..StatusCause::default()
            }],
            ..StatusBody::default()
        });
    } else {
        p.status = Some(200);
    }
    p
}

/// The bundle of a cluster with `n` remote APIServices.
pub fn bundle(n: usize) -> EvidenceBundle {
    let selection = Selection::names(Vec::<String>::new()).with_prefix("aggregator_");
    let before = parse_str(&exposition(n, 1.0), &selection).expect("generated text parses");
    let mut after = parse_str(&exposition(n, 1.2), &selection).expect("generated text parses");
    apply_window(&before, &mut after, 60.0);
    let t0: jiff::Timestamp = "2026-11-29T08:59:00Z".parse().expect("a time");
    let t1: jiff::Timestamp = "2026-11-29T09:00:00Z".parse().expect("a time");
    let mut b = EvidenceBundle::new(CollectionSource::Live {
        server: "https://bench".into(),
        context: None,
    });
    b.collection.collected_at = Some(t1);
    b.collection.metrics_window = Some(Window { start: t0, end: t1 });
    b.metrics.push(MetricsSource {
        target: MetricTarget::Apiserver,
        origin: "generated".into(),
        scraped_at: Some(t1),
        window: Some(Window { start: t0, end: t1 }),
        families: after,
    });
    for a in 0..n {
        let ns = format!("ns{a}");
        let name = format!("v1.a{a}.example.com");
        let available = !broken(a);
        b.api_services.push(ApiService {
            name: name.clone(),
            group: format!("a{a}.example.com"),
            version: "v1".into(),
            service: Some(ServiceRef {
                namespace: ns.clone(),
                name: "api".into(),
                port: Some(443),
                path: None,
            }),
            ca_bundle_present: true,
            conditions: vec![Condition {
                type_: "Available".into(),
                status: if available { "True" } else { "False" }.into(),
                reason: if available { "Passed" } else { "FailedDiscoveryCheck" }.into(),
                message: if available {
                    "all checks passed".into()
                } else {
                    format!(
                        "failing or missing response from https://10.244.0.1:8443/apis/a{a}.example.com/v1: dial tcp 10.244.0.1:8443: connect: connection refused"
                    )
                },
                last_transition_time: None,
            }],
            ..ApiService::default()
        });
        b.services.push(Service {
            namespace: ns.clone(),
            name: "api".into(),
            type_: "ClusterIP".into(),
            cluster_ip: Some("10.96.0.1".into()),
            ports: vec![ServicePort {
                name: "https".into(),
                port: 443,
                target_port: Some("8443".into()),
                protocol: "TCP".into(),
            }],
            selector: [("app".to_string(), "api".to_string())].into(),
            ..Service::default()
        });
        b.endpoints.push(Endpoints {
            namespace: ns.clone(),
            name: "api".into(),
            subsets: vec![EndpointSubset {
                ready: vec![EndpointAddress {
                    ip: "10.244.0.1".into(),
                    target_ref: Some(TargetRef {
                        kind: "Pod".into(),
                        namespace: Some(ns.clone()),
                        name: "api-0".into(),
                    }),
                }],
                not_ready: vec![],
                ports: vec![EndpointPort {
                    name: "https".into(),
                    port: 8443,
                }],
            }],
        });
        b.pods.push(Pod {
            namespace: ns,
            name: "api-0".into(),
            labels: [("app".to_string(), "api".to_string())].into(),
            phase: "Running".into(),
            ready: true,
            ..Pod::default()
        });
        let gv = format!("/apis/a{a}.example.com/v1");
        b.probes
            .push(probe(gv.clone(), &name, broken(a), Rung::Discovery));
        b.probes
            .push(probe(format!("{gv}/things"), &name, broken(a), Rung::Verb));
    }
    for w in 0..n / 10 {
        b.webhooks.push(Webhook {
            kind: if w % 2 == 0 {
                WebhookKind::Validating
            } else {
                WebhookKind::Mutating
            },
            configuration: format!("cfg{}", w / 10),
            name: format!("w{w}.hooks.example.com"),
            target: WebhookTarget {
                service: Some(ServiceRef {
                    namespace: format!("ns{w}"),
                    name: if broken(w) { "missing" } else { "api" }.into(),
                    port: Some(443),
                    path: Some("/validate".into()),
                }),
                url: None,
                ca_bundle_present: true,
            },
            timeout_seconds: Some(10),
            effective_timeout_seconds: 10,
            failure_policy: "Fail".into(),
            match_policy: "Equivalent".into(),
            rules: vec![WebhookRule {
                operations: vec!["CREATE".into()],
                api_groups: vec!["".into()],
                api_versions: vec!["v1".into()],
                resources: vec!["configmaps".into()],
                scope: None,
            }],
            ..Webhook::default()
        });
    }
    for d in 0..n / 5 {
        b.crds.push(Crd {
            name: format!("c{d}s.crds.example.com"),
            group: "crds.example.com".into(),
            kind: format!("C{d}"),
            plural: format!("c{d}s"),
            scope: "Namespaced".into(),
            versions: vec![CrdVersion {
                name: "v1".into(),
                served: true,
                storage: true,
                deprecated: false,
            }],
            stored_versions: vec!["v1".into()],
            conversion: CrdConversion {
                strategy: "None".into(),
                ..CrdConversion::default()
            },
            conditions: vec![Condition {
                type_: "Established".into(),
                status: "True".into(),
                ..Condition::default()
            }],
        });
    }
    for l in 0..n / 100 {
        let a = l * 100;
        b.log_findings.push(LogFinding {
            pattern: "apiservice-unavailable".into(),
            component: Component::KubeApiserver,
            severity: Some("E".into()),
            first_seen: Some(t0),
            last_seen: Some(t1),
            count: 3,
            message: format!(
                "v1.a{a}.example.com failed with: failing or missing response from https://10.244.0.1:8443/apis/a{a}.example.com/v1"
            ),
            fields: Default::default(),
            target: None,
            origin: Some("kube-apiserver.log".into()),
        });
    }
    b
}
