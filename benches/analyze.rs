//! Benchmark of `analyze` at scale (not a timed test): a generated bundle with 500 APIServices,
//! 300 webhooks, 2,000 CRDs, and the families the rules read out of a ~30 MB kube-apiserver
//! `/metrics` dump scraped twice a minute apart. Prints the sizes, the wall time of loading the
//! bundled rules, of building the metrics, and of `analyze` (best and median of several runs, in the
//! same process, so ratios are meaningful), and the process's peak RSS.
//!
//! Run: `cargo bench --bench analyze` (release). `EXTPATH_BENCH_RUNS=N` changes the run count.

#[path = "support/peak.rs"]
mod peak;

use std::fmt::Write as _;
use std::time::Instant;

use extpath::bundle::*;
use extpath::engine::{Filter, RuleSet, Settings, analyze};
use extpath::promtext::{Selection, apply_window, parse_str};

const APISERVICES: usize = 500;
const WEBHOOKS: usize = 300;
const CRDS: usize = 2000;

/// A kube-apiserver exposition: the families the rules read, sized like a large cluster, plus
/// `apiserver_request_duration_seconds`-style bulk that the parser must skip.
fn exposition(scale: f64) -> String {
    let mut s = String::with_capacity(32 << 20);
    let c = |x: f64| (x * scale).round();
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
    s.push_str("# TYPE aggregator_unavailable_apiservice gauge\n");
    for a in 0..APISERVICES {
        let _ = writeln!(
            s,
            "aggregator_unavailable_apiservice{{name=\"v1.a{a}.example.com\"}} {}",
            u8::from(a % 50 == 0)
        );
    }
    s.push_str("# TYPE aggregator_unavailable_apiservice_total counter\n");
    for a in 0..APISERVICES {
        let _ = writeln!(
            s,
            "aggregator_unavailable_apiservice_total{{name=\"v1.a{a}.example.com\",reason=\"FailedDiscoveryCheck\"}} {}",
            c((a % 7) as f64)
        );
    }
    s.push_str("# TYPE apiserver_admission_webhook_admission_duration_seconds histogram\n");
    s.push_str("# TYPE apiserver_admission_webhook_rejection_count counter\n");
    for w in 0..WEBHOOKS {
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
    for d in 0..CRDS {
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

fn bundle() -> (EvidenceBundle, usize, std::time::Duration) {
    let selection = Selection::names(Vec::<String>::new())
        .with_prefix("aggregator_")
        .with_prefix("etcd_")
        .with_prefix("apiserver_admission_")
        .with_prefix("apiserver_crd_conversion")
        .with_prefix("apiserver_flowcontrol_")
        .with_prefix("apiserver_terminated_watchers")
        .with_prefix("apiserver_watch_cache");
    let before_text = exposition(1.0);
    let after_text = exposition(1.2);
    let dump_bytes = after_text.len();
    let parse_start = Instant::now();
    let before = parse_str(&before_text, &selection).expect("generated text parses");
    let mut after = parse_str(&after_text, &selection).expect("generated text parses");
    apply_window(&before, &mut after, 60.0);
    let parse = parse_start.elapsed();
    drop(before_text);
    drop(after_text);
    let t0: jiff::Timestamp = "2026-11-29T08:59:00Z".parse().unwrap();
    let t1: jiff::Timestamp = "2026-11-29T09:00:00Z".parse().unwrap();
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
    for a in 0..APISERVICES {
        let ns = format!("ns{a}");
        let available = a % 50 != 0;
        b.api_services.push(ApiService {
            name: format!("v1.a{a}.example.com"),
            group: format!("a{a}.example.com"),
            version: "v1".into(),
            service: Some(ServiceRef { namespace: ns.clone(), name: "api".into(), port: Some(443), path: None }),
            ca_bundle_present: true,
            conditions: vec![Condition {
                type_: "Available".into(),
                status: if available { "True" } else { "False" }.into(),
                reason: if available { "Passed" } else { "FailedDiscoveryCheck" }.into(),
                message: if available { "all checks passed".into() } else { format!("failing or missing response from https://10.0.0.1:443/apis/a{a}.example.com/v1: dial tcp 10.0.0.1:443: connect: connection refused") },
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
    }
    for w in 0..WEBHOOKS {
        b.webhooks.push(Webhook {
            kind: if w % 2 == 0 {
                WebhookKind::Validating
            } else {
                WebhookKind::Mutating
            },
            configuration: format!("cfg{w}"),
            name: format!("w{w}.hooks.example.com"),
            target: WebhookTarget {
                service: Some(ServiceRef {
                    namespace: "ns0".into(),
                    name: "api".into(),
                    port: Some(443),
                    path: Some("/v".into()),
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
    for d in 0..CRDS {
        b.crds.push(Crd {
            name: format!("c{d}s.crds.example.com"),
            group: "crds.example.com".into(),
            kind: format!("C{d}"),
            plural: format!("c{d}s"),
            scope: "Namespaced".into(),
            versions: vec![
                CrdVersion {
                    name: "v1".into(),
                    served: true,
                    storage: true,
                    deprecated: false,
                },
                CrdVersion {
                    name: "v2".into(),
                    served: true,
                    storage: false,
                    deprecated: false,
                },
            ],
            stored_versions: vec!["v1".into()],
            conversion: if d % 4 == 0 {
                CrdConversion {
                    strategy: "Webhook".into(),
                    webhook: Some(WebhookTarget {
                        service: Some(ServiceRef {
                            namespace: "ns1".into(),
                            name: "api".into(),
                            port: Some(443),
                            path: Some("/convert".into()),
                        }),
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
    (b, dump_bytes, parse)
}

fn main() {
    let runs: usize = std::env::var("EXTPATH_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let t = Instant::now();
    let (bundle, dump_bytes, parse) = bundle();
    let build = t.elapsed();
    let series: usize = bundle
        .metrics
        .iter()
        .flat_map(|m| &m.families)
        .map(|f| f.series.len())
        .sum();
    let t = Instant::now();
    let rules = RuleSet::bundled();
    let load = t.elapsed();
    let mut times = Vec::new();
    let mut verdicts = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let d = analyze(&bundle, &rules, &Settings::default(), &Filter::default());
        times.push(t.elapsed());
        verdicts = d.verdicts.len();
    }
    times.sort();
    println!(
        "bundle: {APISERVICES} APIServices, {WEBHOOKS} webhooks, {CRDS} CRDs; metrics dump {:.1} MB -> {series} selected series (windowed)",
        dump_bytes as f64 / 1e6
    );
    println!("generate two scrapes and build the bundle: {build:.2?}");
    println!("baseline — parse and window the two scrapes: {parse:.2?}");
    println!("load {} bundled rules: {load:.2?}", rules.len());
    println!(
        "analyze ({verdicts} verdicts): best {:.2?}, median {:.2?} over {runs} runs",
        times[0],
        times[times.len() / 2]
    );
    println!(
        "ratios to the baseline: analyze {:.2}x, rule loading {:.2}x",
        times[times.len() / 2].as_secs_f64() / parse.as_secs_f64(),
        load.as_secs_f64() / parse.as_secs_f64()
    );
    println!("peak RSS (whole process): {:.0} MB", peak::own_mb());
}
