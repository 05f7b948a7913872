//! Stage-two and stage-three collectors: the Services, Endpoints, EndpointSlices, Events and Pods
//! behind every referenced backend, and the cluster's Warning Events that report a failed API
//! request (a ReplicaSet blocked by a webhook, a controller whose CRD is gone): those are the
//! controllers' own observations of the extension paths, added as observations of that request.
//!
//! Objects are fetched by name (GET) rather than listed cluster-wide: a large cluster has thousands of
//! Services and only a handful matter — until the handful is itself large ([`BY_NAME_LIMIT`]), when
//! one paged list per kind is cheaper than three requests per Service. A 404 is evidence (the Service is missing) and is recorded as
//! absence, not as a gap; a 403 or a timeout is a gap, so a rule can tell "missing" from "not seen".

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use serde_json::Value;

use super::fetch::urlencode;
use super::objects::decode_items;
use super::refs::References;
use super::sources::{Contribution, Found, Run, SourceFuture};
use super::{FetchError, Fetcher};
use crate::bundle::{EvidenceBundle, Gap, from_k8s};

/// How many requests of one kind are in flight at once.
// A bound, not a target: kube-apiserver serves 600 requests at once by default
// (--max-requests-inflight 400 plus --max-mutating-requests-inflight 200, split among priority
// levels under APF, where a surplus queues); a scan keeps to a small share of that so it never
// becomes the overload it diagnoses.
const IN_FLIGHT: usize = 64;

/// What stage two found behind the references.
#[derive(Default)]
pub struct Backends {
    /// Services that exist.
    pub services: Vec<core::Service>,
    /// Endpoints that exist.
    pub endpoints: Vec<core::Endpoints>,
    /// EndpointSlices of the referenced Services.
    pub slices: Vec<discovery::EndpointSlice>,
    /// Events about the referenced objects.
    pub events: Vec<core::Event>,
    /// Warning Events anywhere that report a failed API request.
    pub request_failures: Vec<core::Event>,
    /// What could not be fetched.
    pub gaps: Vec<Gap>,
}

impl Backends {
    /// Add everything to the bundle (gaps are added by the caller).
    pub fn apply(&self, b: &mut EvidenceBundle) {
        for s in &self.services {
            from_k8s::add_service(b, s);
        }
        for e in &self.endpoints {
            from_k8s::add_endpoints(b, e);
        }
        for s in &self.slices {
            from_k8s::add_endpoint_slice(b, s);
        }
        for e in &self.events {
            from_k8s::add_event(b, e);
        }
        for e in &self.request_failures {
            let ev = from_k8s::event(e);
            b.probes.extend(crate::bundle::raw::probes_from_event(&ev));
            if !b.events.contains(&ev) {
                b.events.push(ev);
            }
        }
    }
}

enum Got<T> {
    Found(T),
    Absent,
}

async fn get_optional<T: serde::de::DeserializeOwned>(
    f: &Fetcher,
    path: &str,
) -> Result<Got<T>, FetchError> {
    match f.get_json(path).await {
        Ok(v) => serde_json::from_value(v)
            .map(Got::Found)
            .map_err(|e| FetchError::Decode(e.to_string())),
        Err(FetchError::Status { code: 404, .. }) => Ok(Got::Absent),
        Err(e) => Err(e),
    }
}

/// Above this many referenced Services (or their namespaces), stage two lists each kind once
/// cluster-wide and keeps the referenced ones, rather than fetching three objects per Service (and
/// the Events of each namespace): at the scale benchmark's 500 APIServices that is a handful of
/// paged lists instead of 2,000 requests.
pub const BY_NAME_LIMIT: usize = 100;

/// Stage two: Services, Endpoints, EndpointSlices and Events of the references.
///
/// # Errors
/// Never as a whole; per-object failures are gaps in the result.
pub async fn fetch(f: &Fetcher, refs: &References) -> Result<Backends, FetchError> {
    let mut out = Backends::default();
    let aggregated_path = format!(
        "/api/v1/events?fieldSelector={}",
        urlencode("involvedObject.kind=APIService")
    );
    let warnings_path = format!("/api/v1/events?fieldSelector={}", urlencode("type=Warning"));
    let mut of_namespaces = Backends::default();
    let (_, _, (aggregated, warnings)) = tokio::join!(
        services_endpoints_slices(f, refs, &mut out),
        namespace_events(f, refs, &mut of_namespaces),
        async { tokio::join!(f.list_all(&aggregated_path), f.list_all(&warnings_path)) }
    );
    out.events = of_namespaces.events;
    out.gaps.extend(of_namespaces.gaps);
    finish(out, aggregated, warnings)
}

/// The referenced Services, their Endpoints and EndpointSlices: by name, or listed when there are
/// many (see [`BY_NAME_LIMIT`]). A Service that is not there is absence, not a gap.
async fn services_endpoints_slices(f: &Fetcher, refs: &References, out: &mut Backends) {
    if refs.services.len() > BY_NAME_LIMIT {
        let (svcs, eps, slices) = tokio::join!(
            f.list_all("/api/v1/services"),
            f.list_all("/api/v1/endpoints"),
            f.list_all("/apis/discovery.k8s.io/v1/endpointslices")
        );
        let named = |v: &Value| {
            let meta = |k: &str| {
                v.pointer(&format!("/metadata/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            refs.services.contains(&(meta("namespace"), meta("name")))
        };
        let of_service = |v: &Value| {
            let ns = v
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let svc = v
                .pointer("/metadata/labels/kubernetes.io~1service-name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            refs.services.contains(&(ns.to_string(), svc.to_string()))
        };
        keep_listed(
            svcs,
            named,
            "objects/services",
            &mut out.services,
            &mut out.gaps,
        );
        keep_listed(
            eps,
            named,
            "objects/endpoints",
            &mut out.endpoints,
            &mut out.gaps,
        );
        match slices {
            // Clusters before 1.21 serve no discovery.k8s.io/v1: Endpoints are the evidence there.
            Err(FetchError::Status { code: 404, .. }) => {}
            slices => keep_listed(
                slices,
                of_service,
                "objects/endpointslices",
                &mut out.slices,
                &mut out.gaps,
            ),
        }
        return;
    }
    let per_service = futures::stream::iter(refs.services.iter().cloned())
        .map(|(ns, name)| async move {
            let svc_path = format!("/api/v1/namespaces/{ns}/services/{name}");
            let eps_path = format!("/api/v1/namespaces/{ns}/endpoints/{name}");
            let slices_path = format!(
                "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices?labelSelector={}",
                urlencode(&format!("kubernetes.io/service-name={name}"))
            );
            let svc = get_optional::<core::Service>(f, &svc_path);
            let eps = get_optional::<core::Endpoints>(f, &eps_path);
            let slices = f.list_all(&slices_path);
            let (svc, eps, slices) = tokio::join!(svc, eps, slices);
            (ns, name, svc, eps, slices)
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let mut per_service = per_service;
    per_service.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    for (ns, name, svc, eps, slices) in per_service {
        match svc {
            Ok(Got::Found(s)) => out.services.push(s),
            Ok(Got::Absent) => {}
            Err(e) => out
                .gaps
                .push(gap(&format!("objects/services/{ns}/{name}"), &e)),
        }
        match eps {
            Ok(Got::Found(e)) => out.endpoints.push(e),
            Ok(Got::Absent) => {}
            Err(e) => out
                .gaps
                .push(gap(&format!("objects/endpoints/{ns}/{name}"), &e)),
        }
        match slices {
            Ok(items) => {
                let (ok, gaps) = decode_items(&format!("objects/endpointslices/{ns}"), items);
                out.slices.extend(ok);
                out.gaps.extend(gaps);
            }
            // Clusters before 1.21 serve no discovery.k8s.io/v1: Endpoints are the evidence there.
            Err(FetchError::Status { code: 404, .. }) => {}
            Err(e) => out
                .gaps
                .push(gap(&format!("objects/endpointslices/{ns}/{name}"), &e)),
        }
    }
}

/// The items of a cluster-wide list that `keep` selects, decoded; the list's failure as one gap.
fn keep_listed<T: serde::de::DeserializeOwned>(
    listed: Result<Vec<Value>, FetchError>,
    keep: impl Fn(&Value) -> bool,
    source: &str,
    into: &mut Vec<T>,
    gaps: &mut Vec<Gap>,
) {
    match listed {
        Ok(items) => {
            let (ok, g) = decode_items(source, items.into_iter().filter(|v| keep(v)).collect());
            into.extend(ok);
            gaps.extend(g);
        }
        Err(e) => gaps.push(gap(source, &e)),
    }
}

/// Events about the referenced Services and Endpoints, and Warnings about Pods and EndpointSlices
/// in their namespaces: per namespace, or listed once when there are many namespaces.
async fn namespace_events(f: &Fetcher, refs: &References, out: &mut Backends) {
    let names = &refs.services;
    if refs.namespaces.len() > BY_NAME_LIMIT {
        let listed = f.list_all("/api/v1/events").await;
        let relevant = |e: &Value| {
            let ns = e
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            refs.namespaces.contains(ns) && event_is_relevant(e, ns, names)
        };
        keep_listed(
            listed,
            relevant,
            "objects/events",
            &mut out.events,
            &mut out.gaps,
        );
        return;
    }
    let mut events = futures::stream::iter(refs.namespaces.iter().cloned())
        .map(|ns| async move {
            let r = f.list_all(&format!("/api/v1/namespaces/{ns}/events")).await;
            (ns, r)
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    events.sort_by(|a, b| a.0.cmp(&b.0));
    for (ns, r) in events {
        match r {
            Ok(items) => {
                let relevant: Vec<Value> = items
                    .into_iter()
                    .filter(|e| event_is_relevant(e, &ns, names))
                    .collect();
                let (ok, gaps) = decode_items::<core::Event>("objects/events", relevant);
                out.events.extend(ok);
                out.gaps.extend(gaps);
            }
            Err(e) => out.gaps.push(gap(&format!("objects/events/{ns}"), &e)),
        }
    }
}

/// The cluster-wide Events: about APIServices, and Warnings that report a failed request.
fn finish(
    mut out: Backends,
    aggregated: Result<Vec<Value>, FetchError>,
    warnings: Result<Vec<Value>, FetchError>,
) -> Result<Backends, FetchError> {
    match aggregated {
        Ok(items) => {
            let (ok, gaps) = decode_items::<core::Event>("objects/events", items);
            out.events.extend(ok);
            out.gaps.extend(gaps);
        }
        Err(e) => out.gaps.push(gap("objects/events/apiservices", &e)),
    }
    match warnings {
        Ok(items) => {
            let (ok, gaps) = decode_items::<core::Event>("objects/events", items);
            out.request_failures = ok
                .into_iter()
                .filter(|e| !crate::bundle::raw::probes_from_event(&from_k8s::event(e)).is_empty())
                .collect();
            out.gaps.extend(gaps);
        }
        Err(e) => out.gaps.push(gap("objects/events/warnings", &e)),
    }
    Ok(out)
}

/// Events about a referenced Service or its Endpoints, and Warning events about Pods in its
/// namespace (their names are not known until stage three).
fn event_is_relevant(
    e: &Value,
    ns: &str,
    services: &std::collections::BTreeSet<(String, String)>,
) -> bool {
    let kind = e
        .pointer("/involvedObject/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = e
        .pointer("/involvedObject/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let warning = e.get("type").and_then(Value::as_str) == Some("Warning");
    match kind {
        "Service" | "Endpoints" => services.contains(&(ns.to_string(), name.to_string())),
        "Pod" | "EndpointSlice" => warning,
        _ => false,
    }
}

fn gap(source: &str, e: &FetchError) -> Gap {
    Gap::new(source, e.gap_reason(), e.to_string())
}

/// The Pods behind the referenced Services (stage three).
#[derive(Default)]
pub struct PodsBehind {
    /// `(namespace, service)` and the Pods its selector matches, in that order.
    pub by_service: Vec<((String, String), Vec<core::Pod>)>,
    /// What could not be listed.
    pub gaps: Vec<Gap>,
}

impl PodsBehind {
    /// Add the Pods (each once) and the gaps to the bundle.
    pub fn apply(&self, b: &mut EvidenceBundle) {
        let mut seen = std::collections::BTreeSet::new();
        for ((ns, _), pods) in &self.by_service {
            for p in pods {
                if seen.insert((ns.clone(), p.metadata.name.clone().unwrap_or_default())) {
                    from_k8s::add_pod(b, p);
                }
            }
        }
        b.gaps.extend(self.gaps.iter().cloned());
    }
}

/// Stage three: the Pods selected by each Service found in stage two.
///
/// # Errors
/// Never as a whole; per-Service failures become gaps in the result.
pub async fn fetch_pods(f: &Fetcher, backends: &Backends) -> Result<PodsBehind, FetchError> {
    let selectors: Vec<(String, String, String)> = backends
        .services
        .iter()
        .filter_map(|s| {
            let sel = s.spec.as_ref()?.selector.as_ref()?;
            if sel.is_empty() {
                return None;
            }
            let text = sel
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            Some((
                s.metadata.namespace.clone().unwrap_or_default(),
                s.metadata.name.clone().unwrap_or_default(),
                text,
            ))
        })
        .collect();
    let results = futures::stream::iter(selectors)
        .map(|(ns, name, sel)| async move {
            let r = f
                .list_all(&format!(
                    "/api/v1/namespaces/{ns}/pods?labelSelector={}",
                    urlencode(&sel)
                ))
                .await;
            (ns, name, r)
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let mut out = PodsBehind::default();
    let mut results = results;
    results.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    for (ns, name, r) in results {
        match r {
            Ok(items) => {
                let (ok, g) = decode_items::<core::Pod>("objects/pods", items);
                out.by_service.push(((ns, name), ok));
                out.gaps.extend(g);
            }
            Err(e) => out.gaps.push(gap(&format!("objects/pods/{ns}/{name}"), &e)),
        }
    }
    Ok(out)
}

/// The `objects/backends` entry (stage two): what the references point at.
pub(super) fn services<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let found = Arc::new(fetch(&run.fetcher, found.references).await?);
        run.leave_backends(Arc::clone(&found));
        let gaps = found.gaps.clone();
        Ok(Contribution {
            evidence: Some(Box::new(move |b: &mut EvidenceBundle| found.apply(b))),
            gaps,
            ..Contribution::default()
        })
    })
}

/// The `objects/pods` entry (stage three): the Pods behind stage two's Services.
pub(super) fn pods<'a>(run: &'a Run<'a>, _: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let pods = Arc::new(fetch_pods(&run.fetcher, &run.found_backends()).await?);
        run.leave_pods(Arc::clone(&pods));
        Ok(Contribution::of(Box::new(move |b: &mut EvidenceBundle| {
            pods.apply(b)
        })))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_events_about_referenced_objects_are_kept() {
        let services: std::collections::BTreeSet<_> =
            [("kube-system".to_string(), "metrics-server".to_string())].into();
        let ev = |kind: &str, name: &str, ty: &str| serde_json::json!({"involvedObject": {"kind": kind, "name": name}, "type": ty});
        assert!(event_is_relevant(
            &ev("Service", "metrics-server", "Normal"),
            "kube-system",
            &services
        ));
        assert!(!event_is_relevant(
            &ev("Service", "other", "Warning"),
            "kube-system",
            &services
        ));
        assert!(event_is_relevant(
            &ev("Pod", "metrics-server-abc", "Warning"),
            "kube-system",
            &services
        ));
        assert!(!event_is_relevant(
            &ev("Pod", "x", "Normal"),
            "kube-system",
            &services
        ));
        assert!(!event_is_relevant(
            &ev("ConfigMap", "x", "Warning"),
            "kube-system",
            &services
        ));
    }
}
