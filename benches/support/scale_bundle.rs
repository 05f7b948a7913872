//! The one generator of large evidence bundles, shared by the `analyze` and `analyze_scale`
//! benches and the bundle round-trip tests (`#[path]`-included by each).
//!
//! A [`Shape`] says how many of each object: remote APIServices, each with its Service,
//! Endpoints and Pod, two probes (discovery and a list) and its `aggregator_unavailable_apiservice`
//! series over a one-minute window; webhooks; CRDs (every fourth with a conversion webhook); log
//! findings that name an APIService in their message; and optionally the bulk of a real
//! kube-apiserver `/metrics` dump (request, etcd, admission and conversion histograms, APF
//! rejections) that the rules' selection must wade through.
//!
//! One object in fifty is broken ([`broken`]): its APIService is unavailable, its backend refuses
//! connections and its probes answer 503, its unavailable-transitions counter rises in the window,
//! and a webhook of that index points at a Service that does not exist. Everything else is
//! healthy, so the rules have failures to judge at every size and the healthy majority costs what
//! it costs in a real cluster.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use extpath::bundle::observations::Component;
use extpath::bundle::probes::{ClientTool, ProbeKind};
use extpath::bundle::*;
use extpath::promtext::{Selection, apply_window, parse_str};

/// How many of each object a generated bundle holds.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub apiservices: usize,
    pub webhooks: usize,
    pub crds: usize,
    /// Two probes per APIService (discovery and a list).
    pub probes: bool,
    pub log_findings: usize,
    /// The families of a large cluster's `/metrics` beyond the aggregator's own.
    pub metrics_bulk: bool,
}

impl Shape {
    /// `analyze_scale`'s cluster of `n` APIServices: proportional probes (2n), webhooks (n/10),
    /// CRDs (n/5) and log findings (n/100).
    pub fn scale(n: usize) -> Self {
        Shape {
            apiservices: n,
            webhooks: n / 10,
            crds: n / 5,
            probes: true,
            log_findings: n / 100,
            metrics_bulk: false,
        }
    }

    /// `analyze`'s cluster: few objects, a ~30 MB `/metrics` dump.
    pub fn metrics_heavy() -> Self {
        Shape {
            apiservices: 500,
            webhooks: 300,
            crds: 2000,
            probes: false,
            log_findings: 0,
            metrics_bulk: true,
        }
    }
}

/// Whether the object of index `i` is broken.
pub fn broken(i: usize) -> bool {
    i.is_multiple_of(50)
}

/// A generated bundle, with what building its metrics cost.
pub struct Generated {
    pub bundle: EvidenceBundle,
    /// Size of the second (later) `/metrics` scrape.
    pub dump_bytes: usize,
    /// Time to parse and window the two scrapes.
    pub parse: Duration,
}

/// The bundle of a cluster with `n` remote APIServices ([`Shape::scale`]).
pub fn bundle(n: usize) -> EvidenceBundle {
    generate(&Shape::scale(n)).bundle
}

/// A kube-apiserver exposition for `shape`, scraped once (`later == false`) or a minute later.
fn exposition(shape: &Shape, later: bool) -> String {
    let scale = if later { 1.2 } else { 1.0 };
    let mut s = String::with_capacity(if shape.metrics_bulk { 32 << 20 } else { 0 });
    let c = |x: f64| (x * scale).round();
    s.push_str("# TYPE aggregator_unavailable_apiservice gauge\n");
    for a in 0..shape.apiservices {
        let _ = writeln!(
            s,
            "aggregator_unavailable_apiservice{{name=\"v1.a{a}.example.com\"}} {}",
            u8::from(broken(a))
        );
    }
    s.push_str("# TYPE aggregator_unavailable_apiservice_total counter\n");
    for a in 0..shape.apiservices {
        // Past transitions of every APIService, and one more during the window for a broken one
        // only: a healthy APIService's counter does not move.
        let _ = writeln!(
            s,
            "aggregator_unavailable_apiservice_total{{name=\"v1.a{a}.example.com\",reason=\"FailedDiscoveryCheck\"}} {}",
            a % 7 + usize::from(later && broken(a))
        );
    }
    if !shape.metrics_bulk {
        return s;
    }
    let buckets = [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0];
    let histogram = |s: &mut String, name: &str, labels: &str, n: f64| {
        let mut cum = 0.0;
        for (i, le) in buckets.iter().enumerate() {
            cum += (n / (i as f64 + 2.0)).floor();
            let _ = writeln!(s, "{name}_bucket{{{labels},le=\"{le}\"}} {cum}");
        }
        let _ = writeln!(s, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", n.max(cum));
        let _ = writeln!(s, "{name}_sum{{{labels}}} {}", n * 0.01);
        let _ = writeln!(s, "{name}_count{{{labels}}} {}", n.max(cum));
    };
    s.push_str("# TYPE apiserver_request_duration_seconds histogram\n");
    for r in 0..1250 {
        for verb in ["GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"] {
            let labels = format!(
                "component=\"apiserver\",dry_run=\"\",group=\"g{r}.example.com\",resource=\"r{r}\",scope=\"namespace\",subresource=\"\",verb=\"{verb}\",version=\"v1\""
            );
            histogram(
                &mut s,
                "apiserver_request_duration_seconds",
                &labels,
                c(1000.0),
            );
        }
    }
    s.push_str("# TYPE etcd_request_duration_seconds histogram\n");
    for r in 0..300 {
        for op in ["get", "list", "create", "update", "delete"] {
            let labels = format!("operation=\"{op}\",type=\"*g{r}.Thing\"");
            histogram(&mut s, "etcd_request_duration_seconds", &labels, c(5000.0));
        }
    }
    s.push_str("# TYPE apiserver_admission_webhook_admission_duration_seconds histogram\n");
    s.push_str("# TYPE apiserver_admission_webhook_rejection_count counter\n");
    for w in 0..shape.webhooks {
        for op in ["CREATE", "UPDATE", "DELETE"] {
            let labels = format!(
                "name=\"w{w}.hooks.example.com\",operation=\"{op}\",rejected=\"false\",type=\"validating\""
            );
            histogram(
                &mut s,
                "apiserver_admission_webhook_admission_duration_seconds",
                &labels,
                c(300.0),
            );
            let _ = writeln!(
                s,
                "apiserver_admission_webhook_rejection_count{{error_type=\"calling_webhook_error\",name=\"w{w}.hooks.example.com\",operation=\"{op}\",rejection_code=\"400\",type=\"validating\"}} {}",
                c((w % 3) as f64)
            );
        }
    }
    s.push_str("# TYPE apiserver_crd_conversion_webhook_duration_seconds histogram\n");
    for d in 0..shape.crds {
        let labels = format!(
            "crd_name=\"c{d}s.crds.example.com\",from_version=\"crds.example.com/v1\",succeeded=\"true\",to_version=\"crds.example.com/v2\""
        );
        histogram(
            &mut s,
            "apiserver_crd_conversion_webhook_duration_seconds",
            &labels,
            c(50.0),
        );
    }
    s.push_str("# TYPE apiserver_flowcontrol_rejected_requests_total counter\n");
    for p in 0..8 {
        for f in 0..12 {
            let _ = writeln!(
                s,
                "apiserver_flowcontrol_rejected_requests_total{{flow_schema=\"fs{f}\",priority_level=\"pl{p}\",reason=\"queue-full\"}} {}",
                c(((p * f) % 5) as f64)
            );
        }
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
    p.target = Some(ObjectRef::cluster(Kind::ApiService, target));
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

fn service_ref(namespace: String, name: &str, path: Option<&str>) -> ServiceRef {
    ServiceRef {
        namespace,
        name: name.into(),
        port: Some(443),
        path: path.map(Into::into),
    }
}

/// The bundle `shape` describes.
pub fn generate(shape: &Shape) -> Generated {
    let selection = Selection::names(Vec::<String>::new())
        .with_prefix("aggregator_")
        .with_prefix("etcd_")
        .with_prefix("apiserver_admission_")
        .with_prefix("apiserver_crd_conversion")
        .with_prefix("apiserver_flowcontrol_")
        .with_prefix("apiserver_terminated_watchers")
        .with_prefix("apiserver_watch_cache");
    let before_text = exposition(shape, false);
    let after_text = exposition(shape, true);
    let dump_bytes = after_text.len();
    let t = Instant::now();
    let before = parse_str(&before_text, &selection).expect("generated text parses");
    let mut after = parse_str(&after_text, &selection).expect("generated text parses");
    apply_window(&before, &mut after, 60.0);
    let parse = t.elapsed();
    drop(before_text);
    drop(after_text);
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
    // A namespace that has a Service `api`, for whatever points at the i-th backend.
    let backend_ns = |i: usize| format!("ns{}", i % shape.apiservices.max(1));
    for a in 0..shape.apiservices {
        let ns = format!("ns{a}");
        let name = format!("v1.a{a}.example.com");
        let available = !broken(a);
        b.api_services.push(ApiService {
            name: name.clone(),
            group: format!("a{a}.example.com"),
            version: "v1".into(),
            service: Some(service_ref(ns.clone(), "api", None)),
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
                        kind: Kind::Pod,
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
        if shape.probes {
            let gv = format!("/apis/a{a}.example.com/v1");
            b.probes
                .push(probe(gv.clone(), &name, broken(a), Rung::Discovery));
            b.probes
                .push(probe(format!("{gv}/things"), &name, broken(a), Rung::Verb));
        }
    }
    for w in 0..shape.webhooks {
        b.webhooks.push(Webhook {
            kind: if w % 2 == 0 {
                WebhookKind::Validating
            } else {
                WebhookKind::Mutating
            },
            configuration: format!("cfg{}", w / 10),
            name: format!("w{w}.hooks.example.com"),
            target: WebhookTarget {
                service: Some(service_ref(
                    backend_ns(w),
                    if broken(w) { "missing" } else { "api" },
                    Some("/validate"),
                )),
                url: None,
                ca_bundle_present: true,
            },
            timeout_seconds: Some(10),
            effective_timeout_seconds: 10,
            failure_policy: FailurePolicy::Fail,
            match_policy: MatchPolicy::Equivalent,
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
    for d in 0..shape.crds {
        let version = |name: &str, storage: bool| CrdVersion {
            name: name.into(),
            served: true,
            storage,
            deprecated: false,
        };
        b.crds.push(Crd {
            name: format!("c{d}s.crds.example.com"),
            group: "crds.example.com".into(),
            kind: format!("C{d}"),
            plural: format!("c{d}s"),
            scope: "Namespaced".into(),
            versions: vec![version("v1", true), version("v2", false)],
            stored_versions: vec!["v1".into()],
            conversion: if d % 4 == 0 {
                CrdConversion {
                    strategy: "Webhook".into(),
                    webhook: Some(WebhookTarget {
                        service: Some(service_ref(backend_ns(d), "api", Some("/convert"))),
                        url: None,
                        ca_bundle_present: true,
                    }),
                    review_versions: vec!["v1".into()],
                }
            } else {
                CrdConversion {
                    strategy: "None".into(),
                    ..CrdConversion::default()
                }
            },
            conditions: vec![Condition {
                type_: "Established".into(),
                status: "True".into(),
                ..Condition::default()
            }],
        });
    }
    for l in 0..shape.log_findings {
        // The APIServices that log findings name are broken ones (every 100th).
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
    Generated {
        bundle: b,
        dump_bytes,
        parse,
    }
}
