//! Facts about what an APIService, a webhook or a conversion webhook points at: the Service, its
//! endpoints (Endpoints before 1.34, EndpointSlices after, as the aggregator reads them) and the
//! pods behind them. The certificates on the way are [`super::tls`].
//!
//! The Kubernetes knowledge lives here so that rules stay short: the aggregator matches endpoint
//! ports by the Service port's *name* and checks endpoints only for ClusterIP Services.

use super::value::Fact;

use super::FactBase;
use super::value::{Obj, list, string_map, strings};
use crate::bundle::{Kind, Service, ServiceRef};

/// The API server defaults `spec.type` to ClusterIP, but a hand-written or imported bundle may
/// leave it out: an empty type is read as the default so that `checks_endpoints` stays true.
fn service_type(s: &Service) -> &str {
    if s.type_.is_empty() {
        "ClusterIP"
    } else {
        &s.type_
    }
}

/// The Service a reference names (when it exists) and the port it calls (the reference's, else
/// the default of the referring kind; 0 without a reference).
///
/// Every caller passes 443: APIService `spec.service.port` and the admission and conversion
/// `ServiceReference.port` all default to 443 ("for backward compatibility", in each type's doc).
fn service_and_port<'b>(
    base: &FactBase<'b>,
    r: Option<&ServiceRef>,
    default_port: i32,
) -> (Option<&'b crate::bundle::Service>, i32) {
    let svc = r.and_then(|r| {
        base.index
            .services
            .get(&(r.namespace.as_str(), r.name.as_str()))
            .copied()
    });
    (svc, r.map(|r| r.port.unwrap_or(default_port)).unwrap_or(0))
}

/// `service`: the Service an APIService, webhook or conversion webhook points at.
pub fn service_fact(base: &FactBase<'_>, r: Option<&ServiceRef>, default_port: i32) -> Fact {
    let (svc, port) = service_and_port(base, r, default_port);
    // kube-aggregator's `available_controller.go` matches the reference's port against
    // `spec.ports[].port` (not `targetPort`): no match is `ServicePortError` (REFERENCE.md §2.1).
    // The matched entry's *name* is then what endpoints are looked up by.
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
        // The availability controller checks the port and endpoints only when `spec.type` is
        // ClusterIP; an ExternalName (or other) Service goes straight to the discovery probe, so
        // no endpoint rule may fire for it (REFERENCE.md §2.1).
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
        .s(
            "selector_text",
            svc.map(|s| {
                s.selector
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default(),
        )
        .build()
}

/// Ready/not-ready address counts for a Service port name, and the pods behind them.
///
/// `ready` is what the aggregator accepts; `ready_any_port` exists so that a rule can tell "the
/// Service port's name matches no endpoint port" (ready addresses exist, but under another port
/// name: a renamed or unnamed port) from "nothing is ready" — both are `MissingEndpoints`.
struct EndpointCount {
    exists: bool,
    ready: i64,
    not_ready: i64,
    ready_any_port: i64,
    pods: Vec<(String, String)>,
}

/// Counts from a core/v1 Endpoints object, the source of the aggregator before 1.34. The endpoints
/// controller puts a Pod that is not Ready under `notReadyAddresses`, so readiness is which list an
/// address is in; an address only counts for the port name when its own subset carries that port,
/// as the aggregator's "subset has both ready addresses and a port with the name" check does.
fn legacy_endpoints(base: &FactBase<'_>, ns: &str, name: &str, port_name: &str) -> EndpointCount {
    let Some(e) = base.index.endpoints.get(&(ns, name)).copied() else {
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
                && t.kind == Kind::Pod
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

/// Counts from the EndpointSlices of a Service (the `kubernetes.io/service-name` label ties a slice
/// to it), the source of the aggregator from 1.34 on. A Service may have several slices; the ports
/// are per slice, so the port-name test is per slice as in [`legacy_endpoints`] per subset.
fn slice_endpoints(base: &FactBase<'_>, ns: &str, name: &str, port_name: &str) -> EndpointCount {
    let slices: Vec<_> = base
        .index
        .slices
        .get(&(ns, name))
        .cloned()
        .unwrap_or_default();
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
            // The 1.34 aggregator counts `conditions.ready == nil || true` as ready (REFERENCE.md
            // §2.1), as the EndpointSlice API asks consumers to read an unknown (nil) `ready`:
            // a slice written by hand or by another controller is not reported as not ready.
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
                && t.kind == Kind::Pod
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

/// What the endpoints of a Service reference say: the `endpoints` fact, and the Pods behind the
/// Service (endpoint target references, or the Service selector).
struct Behind<'b> {
    endpoints: Fact,
    pods: Vec<&'b crate::bundle::Pod>,
}

fn behind<'b>(base: &FactBase<'b>, r: Option<&ServiceRef>, default_port: i32) -> Behind<'b> {
    let (svc, port) = service_and_port(base, r, default_port);
    let port_name = svc
        .and_then(|s| s.ports.iter().find(|p| p.port == port))
        .map(|p| p.name.clone())
        .unwrap_or_default();
    let (ns, name) = r
        .map(|r| (r.namespace.as_str(), r.name.as_str()))
        .unwrap_or(("", ""));
    let legacy = legacy_endpoints(base, ns, name, &port_name);
    let slices = slice_endpoints(base, ns, name, &port_name);
    // The aggregator reads Endpoints before 1.34 and EndpointSlices from 1.34 on, so the counts
    // come from the source the cluster's own controller reads (an unknown version reads as
    // pre-1.34). When that source is absent from the bundle the other one stands in: for a
    // Service with a selector both are written from the same Pods, and a missing kind is more
    // often a collection gap than a missing object. `source` says which one was read.
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

    // Pods named by the endpoints, plus the Pods the selector matches: the endpoints controller
    // leaves out a Pod with no IP yet (`ShouldPodBeInEndpoints`), which is exactly the Pending or
    // ContainerCreating Pod a rule needs to see behind "no ready endpoints".
    let mut refs: Vec<(String, String)> = chosen.pods.clone();
    if let Some(s) = svc
        && !s.selector.is_empty()
    {
        for p in base
            .index
            .pods_in
            .get(s.namespace.as_str())
            .into_iter()
            .flatten()
        {
            if s.selector.iter().all(|(k, v)| p.labels.get(k) == Some(v)) {
                refs.push((p.namespace.clone(), p.name.clone()));
            }
        }
    }
    refs.sort();
    refs.dedup();
    let pods = refs
        .iter()
        .filter_map(|(ns, n)| base.index.pods.get(&(ns.as_str(), n.as_str())).copied())
        .collect();
    Behind { endpoints, pods }
}

/// The Pods behind a Service reference (endpoint target references, or the Service selector).
pub fn pods_behind<'b>(
    base: &FactBase<'b>,
    r: Option<&ServiceRef>,
    default_port: i32,
) -> Vec<&'b crate::bundle::Pod> {
    behind(base, r, default_port).pods
}

/// `endpoints` and `pods` for a Service reference.
pub fn endpoints_and_pods(
    base: &FactBase<'_>,
    r: Option<&ServiceRef>,
    default_port: i32,
) -> (Fact, Fact) {
    let Behind { endpoints, pods } = behind(base, r, default_port);
    // The Pods' own view, beside the endpoints': a Pod can be Ready while the endpoints lag (or
    // the other way round), and only the Pod says why it is not (`CrashLoopBackOff`,
    // `ImagePullBackOff` in `problems`), which is the next thing an on-call engineer checks.
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
                    // An extension API server calls kube-apiserver (TokenReviews, SubjectAccess-
                    // Reviews, its authentication ConfigMap) as this account, so delegation
                    // checks look up its RBAC (`super::delegation`).
                    .s(
                        "service_account",
                        p.service_account.clone().unwrap_or_default(),
                    )
                    .build()
            })),
        )
        .build();
    (endpoints, pods_fact)
}
