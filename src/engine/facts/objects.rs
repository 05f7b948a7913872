//! Facts about objects: APIServices, webhooks, CRDs, and what they point at — the Service, its
//! endpoints, the pods behind them, and the certificates on the way.
//!
//! Each builder takes an `Option` and always returns the same shape: an absent object gives
//! `present: false` and empty values, so a rule can ask `apiservice.present` on a Request whose
//! related object is unknown without an evaluation error. Derived facts that need Kubernetes
//! knowledge (the aggregator matches Endpoints ports by the Service port's *name*; it checks
//! endpoints only for ClusterIP Services; 1.34 moved it to EndpointSlices) are computed here, once,
//! so that rules stay short and version-neutral.

use cel::Value;

use super::FactBase;
use super::value::{Obj, list, string_map, strings};
use crate::bundle::certs::CertSource;
use crate::bundle::{
    ApiService, Certificate, Condition, Crd, LabelSelector, ObjectRef, Service, ServiceRef,
    Webhook, WebhookTarget,
};

fn condition_fact(c: Option<&Condition>) -> Value {
    Obj::new()
        .b("present", c.is_some())
        .s("type", c.map(|c| c.type_.clone()).unwrap_or_default())
        .s("status", c.map(|c| c.status.clone()).unwrap_or_default())
        .s("reason", c.map(|c| c.reason.clone()).unwrap_or_default())
        .s("message", c.map(|c| c.message.clone()).unwrap_or_default())
        .s(
            "since",
            c.and_then(|c| c.last_transition_time)
                .map(|t| t.to_string())
                .unwrap_or_default(),
        )
        .build()
}

fn conditions_fact(cs: &[Condition]) -> Value {
    list(cs.iter().map(|c| condition_fact(Some(c))))
}

/// `apiservice`: the APIService itself.
pub fn apiservice_fact(a: Option<&ApiService>) -> Value {
    let d = ApiService::default();
    let x = a.unwrap_or(&d);
    let expected = format!("{}.{}", x.version, x.group);
    Obj::new()
        .b("present", a.is_some())
        .s("name", x.name.clone())
        .s("group", x.group.clone())
        .s("version", x.version.clone())
        .s("expected_name", expected.clone())
        .b("name_matches", a.is_none() || x.name == expected)
        .b("local", a.is_some() && x.is_local())
        .b("ca_bundle_present", x.ca_bundle_present)
        .b("insecure_skip_tls_verify", x.insecure_skip_tls_verify)
        .i(
            "group_priority_minimum",
            x.group_priority_minimum.unwrap_or(0).into(),
        )
        .i("version_priority", x.version_priority.unwrap_or(0).into())
        .v("available", condition_fact(x.available()))
        .v("conditions", conditions_fact(&x.conditions))
        .build()
}

fn service_type(s: &Service) -> &str {
    if s.type_.is_empty() {
        "ClusterIP"
    } else {
        &s.type_
    }
}

/// `service`: the Service an APIService, webhook or conversion webhook points at.
pub fn service_fact(base: &FactBase<'_>, r: Option<&ServiceRef>, default_port: i32) -> Value {
    let svc = r.and_then(|r| base.bundle.service(&r.namespace, &r.name));
    let port = r.map(|r| r.port.unwrap_or(default_port)).unwrap_or(0);
    let matched = svc.and_then(|s| s.ports.iter().find(|p| p.port == port));
    let ports = svc.map(|s| s.ports.as_slice()).unwrap_or(&[]);
    Obj::new()
        .b("ref_present", r.is_some())
        .s(
            "namespace",
            r.map(|r| r.namespace.clone()).unwrap_or_default(),
        )
        .s("name", r.map(|r| r.name.clone()).unwrap_or_default())
        .i("port", port.into())
        .s("path", r.and_then(|r| r.path.clone()).unwrap_or_default())
        .s(
            "server_name",
            r.map(ServiceRef::server_name).unwrap_or_default(),
        )
        .b("known", base.services_known)
        .b("exists", svc.is_some())
        .s("type", svc.map(service_type).unwrap_or_default())
        .s(
            "cluster_ip",
            svc.and_then(|s| s.cluster_ip.clone()).unwrap_or_default(),
        )
        .s(
            "external_name",
            svc.and_then(|s| s.external_name.clone())
                .unwrap_or_default(),
        )
        .b(
            "checks_endpoints",
            svc.is_some_and(|s| service_type(s) == "ClusterIP"),
        )
        .b("port_found", matched.is_some())
        .s(
            "port_name",
            matched.map(|p| p.name.clone()).unwrap_or_default(),
        )
        .v(
            "ports",
            list(ports.iter().map(|p| {
                Obj::new()
                    .s("name", p.name.clone())
                    .i("port", p.port.into())
                    .s("target_port", p.target_port.clone().unwrap_or_default())
                    .s("protocol", p.protocol.clone())
                    .build()
            })),
        )
        .v(
            "selector",
            string_map(svc.map(|s| s.selector.iter()).into_iter().flatten()),
        )
        .build()
}

/// Ready/not-ready address counts for a Service port name, and the pods behind them.
struct EndpointCount {
    exists: bool,
    ready: i64,
    not_ready: i64,
    ready_any_port: i64,
    pods: Vec<(String, String)>,
}

fn legacy_endpoints(base: &FactBase<'_>, ns: &str, name: &str, port_name: &str) -> EndpointCount {
    let Some(e) = base
        .bundle
        .endpoints
        .iter()
        .find(|e| e.namespace == ns && e.name == name)
    else {
        return EndpointCount {
            exists: false,
            ready: 0,
            not_ready: 0,
            ready_any_port: 0,
            pods: Vec::new(),
        };
    };
    let mut pods = Vec::new();
    for s in &e.subsets {
        for a in s.ready.iter().chain(&s.not_ready) {
            if let Some(t) = &a.target_ref
                && t.kind == "Pod"
            {
                pods.push((
                    t.namespace.clone().unwrap_or_else(|| ns.into()),
                    t.name.clone(),
                ));
            }
        }
    }
    EndpointCount {
        exists: true,
        ready: e.ready_addresses_for_port_name(port_name) as i64,
        not_ready: e
            .subsets
            .iter()
            .filter(|s| s.ports.iter().any(|p| p.name == port_name))
            .map(|s| s.not_ready.len() as i64)
            .sum(),
        ready_any_port: e.subsets.iter().map(|s| s.ready.len() as i64).sum(),
        pods,
    }
}

fn slice_endpoints(base: &FactBase<'_>, ns: &str, name: &str, port_name: &str) -> EndpointCount {
    let slices: Vec<_> = base
        .bundle
        .endpoint_slices
        .iter()
        .filter(|s| s.namespace == ns && s.service_name.as_deref() == Some(name))
        .collect();
    let mut c = EndpointCount {
        exists: !slices.is_empty(),
        ready: 0,
        not_ready: 0,
        ready_any_port: 0,
        pods: Vec::new(),
    };
    for s in slices {
        let has_port = s.ports.iter().any(|p| p.name == port_name);
        for e in &s.endpoints {
            // The 1.34 aggregator counts `conditions.ready == nil || true` as ready.
            let ready = e.ready.unwrap_or(true);
            if ready {
                c.ready_any_port += e.addresses.len() as i64;
            }
            if has_port {
                if ready {
                    c.ready += e.addresses.len() as i64;
                } else {
                    c.not_ready += e.addresses.len() as i64;
                }
            }
            if let Some(t) = &e.target_ref
                && t.kind == "Pod"
            {
                c.pods.push((
                    t.namespace.clone().unwrap_or_else(|| ns.into()),
                    t.name.clone(),
                ));
            }
        }
    }
    c
}

/// `endpoints` and `pods` for a Service reference.
pub fn endpoints_and_pods(
    base: &FactBase<'_>,
    r: Option<&ServiceRef>,
    default_port: i32,
) -> (Value, Value) {
    let svc = r.and_then(|r| base.bundle.service(&r.namespace, &r.name));
    let port = r.map(|r| r.port.unwrap_or(default_port)).unwrap_or(0);
    let port_name = svc
        .and_then(|s| s.ports.iter().find(|p| p.port == port))
        .map(|p| p.name.clone())
        .unwrap_or_default();
    let (ns, name) = r
        .map(|r| (r.namespace.as_str(), r.name.as_str()))
        .unwrap_or(("", ""));
    let legacy = legacy_endpoints(base, ns, name, &port_name);
    let slices = slice_endpoints(base, ns, name, &port_name);
    // The aggregator reads Endpoints before 1.34 and EndpointSlices from 1.34 on.
    let slices_first = base.server_minor.is_some_and(|m| m >= 34);
    let (source, chosen) = match (slices_first, legacy.exists, slices.exists) {
        (true, _, true) | (false, false, true) => ("endpointslices", &slices),
        (_, true, _) => ("endpoints", &legacy),
        _ => ("", &legacy),
    };
    let endpoints = Obj::new()
        .b("known", base.endpoints_known)
        .b("exists", chosen.exists)
        .s("source", source)
        .s("port_name", port_name.clone())
        .i("ready", chosen.ready)
        .i("not_ready", chosen.not_ready)
        .i("ready_any_port", chosen.ready_any_port)
        .build();

    let mut refs: Vec<(String, String)> = chosen.pods.clone();
    if let Some(s) = svc
        && !s.selector.is_empty()
    {
        for p in base
            .bundle
            .pods
            .iter()
            .filter(|p| p.namespace == s.namespace)
        {
            if s.selector.iter().all(|(k, v)| p.labels.get(k) == Some(v)) {
                refs.push((p.namespace.clone(), p.name.clone()));
            }
        }
    }
    refs.sort();
    refs.dedup();
    let pods: Vec<_> = refs
        .iter()
        .filter_map(|(ns, n)| {
            base.bundle
                .pods
                .iter()
                .find(|p| &p.namespace == ns && &p.name == n)
        })
        .collect();
    let ready = pods.iter().filter(|p| p.ready).count() as i64;
    let problems: Vec<String> = pods
        .iter()
        .flat_map(|p| p.container_problems.iter().cloned())
        .collect();
    let pods_fact = Obj::new()
        .b("known", base.pods_known)
        .i("total", pods.len() as i64)
        .i("ready", ready)
        .i("not_ready", pods.len() as i64 - ready)
        .i("restarts", pods.iter().map(|p| p.restarts as i64).sum())
        .v("problems", strings(problems))
        .v(
            "items",
            list(pods.iter().map(|p| {
                Obj::new()
                    .s("namespace", p.namespace.clone())
                    .s("name", p.name.clone())
                    .s("phase", p.phase.clone())
                    .b("ready", p.ready)
                    .i("restarts", p.restarts.into())
                    .v("problems", strings(p.container_problems.clone()))
                    .build()
            })),
        )
        .build();
    (endpoints, pods_fact)
}

/// Whether `name` is covered by a SAN list (DNS names with `*.` wildcards, or IP addresses).
pub fn covers(dns: &[String], ips: &[String], name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    if name.parse::<std::net::IpAddr>().is_ok() {
        return ips.iter().any(|i| i == name);
    }
    dns.iter().any(|d| {
        let d = d.to_ascii_lowercase();
        let n = name.to_ascii_lowercase();
        match d.strip_prefix("*.") {
            Some(suffix) => n
                .split_once('.')
                .is_some_and(|(first, rest)| !first.is_empty() && rest == suffix),
            None => d == n,
        }
    })
}

fn cert_fact(base: &FactBase<'_>, c: &Certificate, server_name: &str) -> Value {
    let (days_left, expired, not_yet_valid) = match base.at {
        Some(at) => {
            let secs = (c.not_after.as_second() - at.as_second()) as f64;
            (secs / 86400.0, at > c.not_after, at < c.not_before)
        }
        None => (f64::MAX, false, false),
    };
    let source = match c.origin.source {
        CertSource::CaBundle => "ca_bundle",
        CertSource::ServedChain => "served_chain",
        CertSource::File => "file",
    };
    Obj::new()
        .s("subject", c.subject.clone())
        .s("issuer", c.issuer.clone())
        .v("dns_names", strings(c.dns_names.clone()))
        .v("ip_addresses", strings(c.ip_addresses.clone()))
        .s("not_before", c.not_before.to_string())
        .s("not_after", c.not_after.to_string())
        .f("days_left", days_left)
        .b("expired", expired)
        .b("not_yet_valid", not_yet_valid)
        .b("is_ca", c.is_ca)
        .b("self_signed", c.self_signed)
        .s("signature_algorithm", c.signature_algorithm.clone())
        .b(
            "covers_server_name",
            covers(&c.dns_names, &c.ip_addresses, server_name),
        )
        .b(
            "legacy_cn_only",
            c.dns_names.is_empty() && c.ip_addresses.is_empty(),
        )
        .s("source", source)
        .i("chain_index", c.origin.chain_index as i64)
        .s("sha256", c.sha256.clone())
        .build()
}

/// `tls`: the certificates of an object (its caBundle and the chain its backend served), judged at
/// the collection time against the server name a client verifies.
pub fn tls_fact(
    base: &FactBase<'_>,
    owner: Option<&ObjectRef>,
    server_name: &str,
    ca_bundle_present: bool,
    insecure: bool,
) -> Value {
    let owned: Vec<&Certificate> = match owner {
        Some(o) => base
            .bundle
            .certificates
            .iter()
            .filter(|c| {
                c.origin
                    .owner
                    .as_ref()
                    .is_some_and(|x| x.kind == o.kind && x.name == o.name)
            })
            .collect(),
        None => Vec::new(),
    };
    let mut served: Vec<&Certificate> = owned
        .iter()
        .copied()
        .filter(|c| c.origin.source == CertSource::ServedChain)
        .collect();
    served.sort_by_key(|c| c.origin.chain_index);
    let ca: Vec<&Certificate> = owned
        .iter()
        .copied()
        .filter(|c| c.origin.source != CertSource::ServedChain)
        .collect();
    let verification = served
        .first()
        .and_then(|c| c.verification.as_ref())
        .or_else(|| owned.iter().find_map(|c| c.verification.as_ref()));
    let all: Vec<Value> = ca
        .iter()
        .chain(served.iter())
        .map(|c| cert_fact(base, c, server_name))
        .collect();
    let min_days = ca
        .iter()
        .chain(served.iter())
        .filter(|_| base.at.is_some())
        .map(|c| (c.not_after.as_second() - base.at.map_or(0, |a| a.as_second())) as f64 / 86400.0)
        .fold(f64::MAX, f64::min);
    Obj::new()
        .s("server_name", server_name)
        .b("ca_bundle_present", ca_bundle_present)
        .b("insecure", insecure)
        .b("time_known", base.at.is_some())
        .v(
            "ca_bundle",
            list(ca.iter().map(|c| cert_fact(base, c, server_name))),
        )
        .v(
            "served",
            list(served.iter().map(|c| cert_fact(base, c, server_name))),
        )
        .v("certs", list(all))
        .f("min_days_left", min_days)
        .v(
            "verification",
            Obj::new()
                .b("checked", verification.is_some())
                .b("ok", verification.is_some_and(|v| v.ok))
                .s(
                    "error",
                    verification
                        .and_then(|v| v.error.clone())
                        .unwrap_or_default(),
                )
                .s(
                    "trust",
                    verification.map(|v| v.trust.clone()).unwrap_or_default(),
                )
                .s(
                    "server_name",
                    verification
                        .map(|v| v.server_name.clone())
                        .unwrap_or_default(),
                )
                .build(),
        )
        .build()
}

/// Where a webhook or conversion webhook sends requests.
pub fn target_fact(t: &WebhookTarget) -> Value {
    let (mode, host, port, path) = match (&t.service, &t.url) {
        (Some(s), _) => (
            "service",
            s.server_name(),
            s.port.unwrap_or(443),
            s.path.clone().unwrap_or_default(),
        ),
        (None, Some(u)) => {
            let host = t.server_name().unwrap_or_default();
            let rest = u.split_once("://").map(|x| x.1).unwrap_or(u);
            let hostport = rest.split('/').next().unwrap_or("");
            let port = hostport
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<i32>().ok())
                .filter(|_| !hostport.ends_with(']'))
                .unwrap_or(443);
            let path = rest
                .find('/')
                .map(|i| rest[i..].to_string())
                .unwrap_or_default();
            ("url", host, port, path)
        }
        (None, None) => ("", String::new(), 0, String::new()),
    };
    Obj::new()
        .s("mode", mode)
        .s("url", t.url.clone().unwrap_or_default())
        .s("host", host)
        .i("port", port.into())
        .s("path", path)
        .b("ca_bundle_present", t.ca_bundle_present)
        .build()
}

/// Resources a controller writes constantly: a Fail webhook with a long timeout on these stalls the
/// cluster when it is slow.
pub const HOT_RESOURCES: &[&str] = &[
    "*",
    "*/*",
    "pods",
    "pods/*",
    "pods/status",
    "pods/binding",
    "leases",
    "events",
    "endpoints",
    "endpointslices",
    "nodes",
    "nodes/status",
    "configmaps",
    "secrets",
];

fn selector_fact(s: &LabelSelector) -> Value {
    Obj::new()
        .b("empty", s.is_empty())
        .v("match_labels", string_map(s.match_labels.iter()))
        .v(
            "expressions",
            list(s.match_expressions.iter().map(|e| {
                Obj::new()
                    .s("key", e.key.clone())
                    .s("operator", e.operator.clone())
                    .v("values", strings(e.values.clone()))
                    .build()
            })),
        )
        .build()
}

/// Whether a namespace selector leaves out the namespace `ns`, judged from the label every namespace
/// carries since 1.21 (`kubernetes.io/metadata.name`).
pub fn selector_excludes_namespace(s: &LabelSelector, ns: &str) -> bool {
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("kubernetes.io/metadata.name".to_string(), ns.to_string());
    !s.matches(&labels)
}

/// `webhook`: one admission webhook.
pub fn webhook_fact(w: Option<&Webhook>) -> Value {
    let d = Webhook::default();
    let x = w.unwrap_or(&d);
    let ops: Vec<String> = {
        let mut v: Vec<String> = x.rules.iter().flat_map(|r| r.operations.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let resources: Vec<String> = {
        let mut v: Vec<String> = x.rules.iter().flat_map(|r| r.resources.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let groups: Vec<String> = {
        let mut v: Vec<String> = x.rules.iter().flat_map(|r| r.api_groups.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let any_op = |o: &str| ops.iter().any(|x| x == "*" || x == o);
    let any_res = |r: &str| {
        resources
            .iter()
            .any(|x| x == "*" || x == "*/*" || x == r || x.split('/').next() == Some(r))
    };
    let any_group = |g: &str| groups.iter().any(|x| x == "*" || x == g);
    let own_ns = x
        .target
        .service
        .as_ref()
        .map(|s| s.namespace.clone())
        .unwrap_or_default();
    let intercepts = Obj::new()
        .b("delete", any_op("DELETE"))
        .b("create", any_op("CREATE"))
        .b("update", any_op("UPDATE"))
        .b("namespaces", any_res("namespaces") && any_group(""))
        .b(
            "leases",
            any_res("leases") && any_group("coordination.k8s.io"),
        )
        .b("pods", any_res("pods") && any_group(""))
        .b(
            "all_resources",
            resources.iter().any(|r| r == "*" || r == "*/*"),
        )
        .b(
            "hot_path",
            resources
                .iter()
                .any(|r| HOT_RESOURCES.contains(&r.as_str())),
        )
        .build();
    Obj::new()
        .b("present", w.is_some())
        .s("name", x.name.clone())
        .s("configuration", x.configuration.clone())
        .s(
            "kind",
            if w.is_some() {
                x.kind.subject_kind()
            } else {
                ""
            },
        )
        .s(
            "type",
            if w.is_some() {
                x.kind.metric_type()
            } else {
                ""
            },
        )
        .s("failure_policy", x.failure_policy.clone())
        .i("timeout_seconds", x.effective_timeout_seconds.into())
        .b("timeout_set", x.timeout_seconds.is_some())
        .s("match_policy", x.match_policy.clone())
        .s("side_effects", x.side_effects.clone().unwrap_or_default())
        .s(
            "reinvocation_policy",
            x.reinvocation_policy.clone().unwrap_or_default(),
        )
        .v(
            "admission_review_versions",
            strings(x.admission_review_versions.clone()),
        )
        .i("match_conditions", x.match_conditions as i64)
        .v("target", target_fact(&x.target))
        .v(
            "rules",
            list(x.rules.iter().map(|r| {
                Obj::new()
                    .v("operations", strings(r.operations.clone()))
                    .v("api_groups", strings(r.api_groups.clone()))
                    .v("api_versions", strings(r.api_versions.clone()))
                    .v("resources", strings(r.resources.clone()))
                    .s("scope", r.scope.clone().unwrap_or_else(|| "*".into()))
                    .build()
            })),
        )
        .v("operations", strings(ops.clone()))
        .v("resources", strings(resources.clone()))
        .v("intercepts", intercepts)
        .v("namespace_selector", selector_fact(&x.namespace_selector))
        .b("object_selector_empty", x.object_selector.is_empty())
        .b(
            "kube_system_excluded",
            selector_excludes_namespace(&x.namespace_selector, "kube-system"),
        )
        .s("own_namespace", own_ns.clone())
        .b(
            "own_namespace_excluded",
            own_ns.is_empty() || selector_excludes_namespace(&x.namespace_selector, &own_ns),
        )
        .build()
}

/// `crd`: a CustomResourceDefinition and its conversion settings.
pub fn crd_fact(c: Option<&Crd>) -> Value {
    let d = Crd::default();
    let x = c.unwrap_or(&d);
    let cond = |t: &str| x.conditions.iter().find(|c| c.type_ == t);
    let storage = x
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let served: Vec<String> = x
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    let conv_target = x.conversion.webhook.clone().unwrap_or_default();
    Obj::new()
        .b("present", c.is_some())
        .s("name", x.name.clone())
        .s("group", x.group.clone())
        .s("kind", x.kind.clone())
        .s("plural", x.plural.clone())
        .s("scope", x.scope.clone())
        .v(
            "versions",
            list(x.versions.iter().map(|v| {
                Obj::new()
                    .s("name", v.name.clone())
                    .b("served", v.served)
                    .b("storage", v.storage)
                    .b("deprecated", v.deprecated)
                    .build()
            })),
        )
        .v("served_versions", strings(served))
        .s("storage_version", storage)
        .v("stored_versions", strings(x.stored_versions.clone()))
        .b(
            "established",
            cond("Established").is_some_and(|c| c.status == "True"),
        )
        .b(
            "names_accepted",
            cond("NamesAccepted").is_none_or(|c| c.status == "True"),
        )
        .v("conditions", conditions_fact(&x.conditions))
        .v(
            "conversion",
            Obj::new()
                .s("strategy", x.conversion.strategy.clone())
                .b(
                    "webhook",
                    x.conversion.strategy == "Webhook" && x.conversion.webhook.is_some(),
                )
                .v(
                    "review_versions",
                    strings(x.conversion.review_versions.clone()),
                )
                .v("target", target_fact(&conv_target))
                .build(),
        )
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn san_coverage_follows_go_rules() {
        let dns = vec!["api.wardle-system.svc".to_string(), "*.example.com".into()];
        assert!(covers(&dns, &[], "api.wardle-system.svc"));
        assert!(covers(&dns, &[], "a.example.com"));
        assert!(!covers(&dns, &[], "a.b.example.com"));
        assert!(!covers(&dns, &[], "api.wardle-system"));
        assert!(covers(&[], &["127.0.0.1".into()], "127.0.0.1"));
        assert!(!covers(&dns, &[], "127.0.0.1"));
    }

    #[test]
    fn namespace_selectors_exclude_by_metadata_name() {
        let mut s = LabelSelector::default();
        assert!(!selector_excludes_namespace(&s, "kube-system"));
        s.match_expressions
            .push(crate::bundle::LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".into(),
                operator: "NotIn".into(),
                values: vec!["kube-system".into()],
            });
        assert!(selector_excludes_namespace(&s, "kube-system"));
        assert!(!selector_excludes_namespace(&s, "default"));
    }
}
