//! Mapping client output and log lines to the object they concern.
//!
//! A probe or a log finding is only useful to a rule when it names its subject. The mapping uses
//! what the evidence itself says, most specific first: a webhook quoted by name (`failed calling
//! webhook "<name>"`, `admission webhook "<name>" denied the request`); a CRD whose conversion
//! webhook an error names (`conversion webhook for <g>/<v>, Kind=<K> failed`); a CRD's resource in
//! the path (`/apis/<g>/<v>/…/<plural>`, when no extension API server serves the group: the CRD,
//! not the local APIService it registers); an aggregated or built-in group/version in the path
//! (`/apis/<g>/<v>/…` is served through APIService `<v>.<g>`); kubectl's request description
//! (`get flunders.wardle.example.com`: the remote APIService of that group, else the CRD
//! `flunders.wardle.example.com`); the apiVersion of objects a watch streamed; and, for a dial that
//! got no answer (curl's `Failed to connect to <host> port <port>`), the webhook or CRD conversion
//! webhook whose backend is served at that address; and for a write whose error names no webhook
//! but shows a mutating webhook's answer broke it (a 422 from the object's own validation, a
//! JSONPatch that does not apply), the one mutating webhook that intercepts that write.

use std::sync::LazyLock;

use regex::Regex;

use std::collections::BTreeMap;

use crate::bundle::{EvidenceBundle, HopLayer, Kind, ObjectRef, Probe, WebhookKind, WebhookTarget};
use crate::semantics::kind_resource::guess_resource;

static WEBHOOK_NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:failed calling webhook|admission webhook) "([^"]+)""#).expect("static regex")
});

/// A webhook by its `webhooks[].name`: of the kind the bundle's configuration says, else `Webhook`.
pub(crate) fn webhook_ref(name: &str, b: &EvidenceBundle) -> ObjectRef {
    let kind = b
        .webhooks
        .iter()
        .find(|w| w.name == name)
        .map_or(Kind::Webhook, |w| w.kind.object_kind());
    ObjectRef::cluster(kind, name)
}

/// The APIService serving a request path (`/apis/<g>/<v>/…`); `None` for the core group.
pub(crate) fn api_service_of_path(path: &str) -> Option<ObjectRef> {
    let path = path.split('?').next()?;
    let mut parts = path.trim_start_matches('/').split('/');
    if parts.next()? != "apis" {
        return None;
    }
    let group = parts.next().filter(|g| !g.is_empty())?;
    let version = parts.next().filter(|v| !v.is_empty())?;
    Some(ObjectRef::cluster(
        Kind::ApiService,
        &format!("{version}.{group}"),
    ))
}

/// The APIService of an object apiVersion (`wardle.example.com/v1alpha1`).
fn api_service_of_group_version(gv: &str) -> Option<ObjectRef> {
    let (group, version) = gv.split_once('/')?;
    Some(ObjectRef::cluster(
        Kind::ApiService,
        &format!("{version}.{group}"),
    ))
}

/// The APIService or CRD serving `<resource>.<group>`, when the bundle has it: an extension API
/// server's (remote) APIService, else the CRD of that name, else the group's local APIService. A
/// CRD's group is served by kube-apiserver itself behind a local APIService the CRD registers
/// (`v1.<group>`, no Service): the CRD, not that APIService, is what such a request concerns.
fn served_resource(resource_dot_group: &str, b: &EvidenceBundle) -> Option<ObjectRef> {
    let (resource, group) = resource_dot_group.split_once('.')?;
    if let Some(a) = remote_api_service_of_group(group, b) {
        return Some(a);
    }
    let crd = format!("{resource}.{group}");
    if b.crds.iter().any(|c| c.name == crd) {
        return Some(ObjectRef::cluster(Kind::CustomResourceDefinition, &crd));
    }
    b.api_services
        .iter()
        .filter(|a| a.group == group)
        .max_by_key(|a| a.version_priority.unwrap_or(0))
        .map(|a| ObjectRef::cluster(Kind::ApiService, &a.name))
}

/// The CRD serving a request path (`/apis/<g>/<v>/[namespaces/<ns>/]<plural>…`), when the bundle
/// has it and no extension API server serves that group.
fn crd_of_path(path: &str, b: &EvidenceBundle) -> Option<ObjectRef> {
    let path = path.split('?').next()?;
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let plural = match rest {
        ["namespaces", _, plural, ..] => *plural,
        [plural, ..] => *plural,
        [] => return None,
    };
    if remote_api_service_of_group(group, b).is_some() {
        return None;
    }
    b.crds
        .iter()
        .find(|c| c.group == group && c.plural == plural)
        .map(|c| ObjectRef::cluster(Kind::CustomResourceDefinition, &c.name))
}

/// The CRD whose conversion webhook an error names: kube-apiserver's `conversion webhook for
/// <group>/<version>, Kind=<Kind> failed: …` (apiextensions-apiserver's `webhook_converter.go`).
fn conversion_crd(text: &str, b: &EvidenceBundle) -> Option<ObjectRef> {
    let c = CONVERSION_NAMED.captures(text)?;
    let (group, kind) = (&c[1], &c[2]);
    b.crds
        .iter()
        .find(|crd| crd.group == group && crd.kind == kind)
        .map(|crd| ObjectRef::cluster(Kind::CustomResourceDefinition, &crd.name))
}

static CONVERSION_NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"conversion webhook for ([^/\s,]*)/[^\s,]+, Kind=([A-Za-z0-9]+)")
        .expect("static regex")
});

/// The object a probe concerns.
pub(crate) fn probe_target(
    p: &Probe,
    object_group_version: Option<&str>,
    b: &EvidenceBundle,
) -> Option<ObjectRef> {
    for text in p.error_texts() {
        if let Some(c) = WEBHOOK_NAMED.captures(text) {
            return Some(webhook_ref(&c[1], b));
        }
    }
    if let Some(t) = p
        .error_texts()
        .into_iter()
        .find_map(|t| conversion_crd(t, b))
    {
        return Some(t);
    }
    if let Some(t) = dialled_backend(p, b) {
        return Some(t);
    }
    if let Some(t) = patched_by(p, b) {
        return Some(t);
    }
    // A 429 names the FlowSchema that rejected it by UID (`X-Kubernetes-PF-FlowSchema-UID`).
    let rejected = p.status == Some(429) || p.status_counts.contains_key("429");
    let flow_schema = p.headers.flow_schema_uid.as_deref().and_then(|uid| {
        b.flow_schemas
            .iter()
            .find(|f| f.uid == uid)
            .map(|f| ObjectRef::cluster(Kind::FlowSchema, &f.name))
    });
    if rejected && flow_schema.is_some() {
        return flow_schema;
    }
    if let Some(t) = p.path.as_deref().and_then(|path| crd_of_path(path, b)) {
        return Some(t);
    }
    if let Some(t) = p.path.as_deref().and_then(api_service_of_path) {
        return Some(t);
    }
    if let Some(t) = p
        .description
        .as_deref()
        .and_then(|d| d.split_whitespace().nth(1))
        .and_then(|r| served_resource(r, b))
    {
        return Some(t);
    }
    if let Some(s) = &p.status_body
        && !s.group.is_empty()
        && !s.kind.is_empty()
        && let Some(t) = served_resource(&format!("{}.{}", s.kind, s.group), b)
    {
        return Some(t);
    }
    object_group_version
        .and_then(api_service_of_group_version)
        .or(flow_schema)
}

/// The webhook (else the CRD, for a conversion webhook) whose backend is served at the address a
/// client dialled without getting an answer — an on-call's `curl -v` of the backend. Only a dial
/// that got no response: one that did is a request to whatever answered there. Of several webhooks
/// sharing one backend, the first in the bundle.
fn dialled_backend(p: &Probe, b: &EvidenceBundle) -> Option<ObjectRef> {
    let address = p.address.as_deref()?;
    if p.status.is_some() {
        return None;
    }
    let (host, port) = split_host_port(address)?;
    let at = |t: &WebhookTarget| {
        backend_addresses(t, b)
            .iter()
            .any(|(h, p)| h.eq_ignore_ascii_case(host) && *p == port)
    };
    if let Some(w) = b.webhooks.iter().find(|w| at(&w.target)) {
        return Some(ObjectRef::cluster(w.kind.object_kind(), &w.name));
    }
    b.crds
        .iter()
        .find(|c| c.conversion.webhook.as_ref().is_some_and(at))
        .map(|c| ObjectRef::cluster(Kind::CustomResourceDefinition, &c.name))
}

/// kubectl's words for the write that failed: `failed to create configmap: …` (its `create`
/// subcommands name the resource), `error when creating "x.yaml": …`, `error when patching …`.
static WRITE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?:failed to|error when) (creat|patch|replac|updat|apply)[a-z]*(?: ([a-z][a-z0-9.\-]*))?",
    )
    .expect("static regex")
});

/// evanphx/json-patch's words for a patch that does not apply to the object (kube-apiserver
/// returns them as `Internal error occurred: <error>`, naming no webhook).
static PATCH_NOT_APPLIED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"operation does not apply|doc is missing (?:path|key)").expect("static regex")
});

/// The mutating webhook whose answer broke a write that names no webhook: a 422 `Invalid` from
/// the object's own validation (which runs after mutating admission), or a JSONPatch that does not
/// apply — when exactly one mutating webhook intercepts that operation on that resource (the
/// namespace of the write is not known, so selectors are not judged). What the API server was
/// asked is read from the error: the Invalid Status's kind (`ConfigMap`, `Deployment.apps`), else
/// the resource kubectl's `create` subcommand names; the operation from kubectl's words.
fn patched_by(p: &Probe, b: &EvidenceBundle) -> Option<ObjectRef> {
    let texts = p.error_texts();
    let invalid = p
        .status_body
        .as_ref()
        .filter(|s| s.reason == "Invalid" && !s.kind.is_empty());
    let not_applied =
        p.status.is_some_and(|c| c >= 500) && texts.iter().any(|t| PATCH_NOT_APPLIED.is_match(t));
    if invalid.is_none() && !not_applied {
        return None;
    }
    let write = texts.iter().find_map(|t| WRITE.captures(t));
    let operation = match write.as_ref().map(|c| &c[1]) {
        Some("creat") => Some("CREATE"),
        Some(_) => Some("UPDATE"),
        None => None,
    };
    let (group, resource) = match invalid {
        Some(s) => (s.group.clone(), guess_resource(&s.kind)),
        None => {
            let noun = write.as_ref()?.get(2)?.as_str();
            let (kind, group) = noun.split_once('.').unwrap_or((noun, ""));
            (group.to_string(), guess_resource(kind))
        }
    };
    let any = |list: &[String], want: &str| list.iter().any(|x| x == want || x == "*");
    let mut matching = b.webhooks.iter().filter(|w| {
        w.kind == WebhookKind::Mutating
            && w.rules.iter().any(|r| {
                operation.is_none_or(|op| any(&r.operations, op))
                    && any(&r.api_groups, &group)
                    && (any(&r.resources, &resource) || r.resources.iter().any(|x| x == "*/*"))
            })
    });
    let only = matching.next()?;
    if matching.next().is_some() {
        return None;
    }
    Some(ObjectRef::cluster(Kind::MutatingWebhook, &only.name))
}

/// `host:port` (`[v6]:port` too) as host and port.
fn split_host_port(address: &str) -> Option<(&str, u16)> {
    let (host, port) = address.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host, port.parse().ok()?))
}

/// Every address a webhook's backend may be dialled at, as far as the bundle tells: a URL's host
/// and port (443 by default); for a Service, its DNS names, its cluster IP, an ExternalName's
/// target, at the Service port, and its endpoints' addresses at their port.
fn backend_addresses(t: &WebhookTarget, b: &EvidenceBundle) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    if let Some(url) = &t.url {
        let authority = url
            .split_once("://")
            .map_or(url.as_str(), |x| x.1)
            .split('/')
            .next()
            .unwrap_or_default();
        let port = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') => p.parse().ok(),
            _ => Some(443),
        };
        if let (Some(host), Some(port)) = (t.server_name(), port) {
            out.push((host, port));
        }
        return out;
    }
    let Some(svc) = &t.service else {
        return out;
    };
    let port = svc.port.and_then(|p| u16::try_from(p).ok()).unwrap_or(443);
    let (ns, name) = (&svc.namespace, &svc.name);
    for host in [
        format!("{name}.{ns}.svc"),
        format!("{name}.{ns}.svc.cluster.local"),
        format!("{name}.{ns}"),
    ] {
        out.push((host, port));
    }
    let service = b
        .services
        .iter()
        .find(|s| &s.namespace == ns && &s.name == name);
    if let Some(s) = service {
        for host in s.cluster_ip.iter().chain(s.external_name.iter()) {
            out.push((host.clone(), port));
        }
    }
    // The endpoints of the Service port the webhook names, matched by its name as kube-proxy
    // does (the only port when it has no name).
    let port_name = service
        .and_then(|s| {
            s.ports
                .iter()
                .find(|p| i64::from(p.port) == i64::from(port))
        })
        .map(|p| p.name.clone());
    if let Some(port_name) = port_name {
        for e in b
            .endpoints
            .iter()
            .filter(|e| &e.namespace == ns && &e.name == name)
        {
            for subset in &e.subsets {
                let Some(ep) = subset.ports.iter().find(|p| p.name == port_name) else {
                    continue;
                };
                let Ok(ep_port) = u16::try_from(ep.port) else {
                    continue;
                };
                for a in subset.ready.iter().chain(&subset.not_ready) {
                    out.push((a.ip.clone(), ep_port));
                }
            }
        }
    }
    out
}

/// The object a log finding names, from the fields its pattern extracted.
pub(crate) fn log_target(
    fields: &std::collections::BTreeMap<String, String>,
    b: &EvidenceBundle,
) -> Option<ObjectRef> {
    if let Some(a) = fields.get("apiservice") {
        return Some(ObjectRef::cluster(Kind::ApiService, a));
    }
    if let Some(w) = fields.get("webhook") {
        return Some(webhook_ref(w, b));
    }
    if let (Some(ns), Some(svc)) = (fields.get("namespace"), fields.get("service")) {
        return Some(ObjectRef::namespaced(Kind::Service, ns, svc));
    }
    if let Some(uri) = fields.get("uri")
        && let Some(t) = api_service_of_path(uri)
    {
        return Some(t);
    }
    // `conversion webhook for wardle.example.com/v1beta1, Kind=Flunder failed: …`
    let gvk = fields.get("gvk")?;
    let (gv, kind) = gvk.split_once(", Kind=")?;
    let group = gv.split('/').next()?;
    b.crds
        .iter()
        .find(|c| c.group == group && c.kind == kind)
        .map(|c| ObjectRef::cluster(Kind::CustomResourceDefinition, &c.name))
}

/// The remote APIService serving `group` (the one of highest version priority), when the bundle
/// has one: a group an extension API server serves through the aggregator.
fn remote_api_service_of_group(group: &str, b: &EvidenceBundle) -> Option<ObjectRef> {
    b.api_services
        .iter()
        .filter(|a| !a.is_local() && a.group == group)
        .max_by_key(|a| a.version_priority.unwrap_or(0))
        .map(|a| ObjectRef::cluster(Kind::ApiService, &a.name))
}

/// The object a timed hop, or a step of one, concerns: the webhook a webhook call names; the CRD of
/// a conversion; for a request, a storage call or an etcd warning, the remote APIService whose
/// group its path (`/apis/<g>/…`), storage key (`/<g>/<resource>/…`, etcd's
/// `key:"/registry/<g>/…"`) or resource (`<resource>.<g>`) addresses — such work is an extension
/// API server's, never kube-apiserver's own storage. `None` otherwise.
pub(crate) fn hop_target(
    layer: HopLayer,
    fields: &BTreeMap<String, String>,
    path: Option<&str>,
    b: &EvidenceBundle,
) -> Option<ObjectRef> {
    let by_group = |g: &str| remote_api_service_of_group(g, b);
    match layer {
        HopLayer::Admission => fields.get("webhook").map(|w| webhook_ref(w, b)),
        HopLayer::Conversion => fields
            .get("custom-resource-definition")
            .or_else(|| fields.get("crd"))
            .map(|c| ObjectRef::cluster(Kind::CustomResourceDefinition, c)),
        HopLayer::Request | HopLayer::Other => {
            let group = path?
                .split('?')
                .next()?
                .trim_start_matches('/')
                .strip_prefix("apis/")?
                .split('/')
                .next()?;
            by_group(group)
        }
        HopLayer::Storage => {
            let from_key = fields.get("key").and_then(|k| {
                k.trim_start_matches('/')
                    .split('/')
                    .take(2)
                    .find_map(&by_group)
            });
            from_key.or_else(|| {
                fields
                    .get("resource")
                    .and_then(|r| r.split_once('.'))
                    .and_then(|(_, g)| by_group(g))
            })
        }
        HopLayer::Etcd => {
            let request = fields.get("request")?;
            let key = request.split("key:\"").nth(1)?.split('"').next()?;
            key.trim_start_matches('/')
                .split('/')
                .take(3)
                .find_map(by_group)
        }
    }
}

/// Webhook names quoted by client output.
pub(crate) fn webhooks_named(p: &Probe) -> Vec<String> {
    p.error_texts()
        .iter()
        .filter_map(|t| WEBHOOK_NAMED.captures(t).map(|c| c[1].to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_api_services() {
        assert_eq!(
            api_service_of_path("/apis/wardle.example.com/v1alpha1/namespaces/x/flunders?watch=1")
                .unwrap()
                .name,
            "v1alpha1.wardle.example.com"
        );
        assert!(api_service_of_path("/api/v1/namespaces/x/configmaps").is_none());
        assert!(api_service_of_path("/apis").is_none());
    }

    /// A bundle with a CRD `gadgets.widgets.example.org` and the local APIService its group
    /// registers (`v2.widgets.example.org`, no Service).
    fn crd_bundle() -> EvidenceBundle {
        let mut b = EvidenceBundle::default();
        b.crds.push(crate::bundle::Crd {
            name: "gadgets.widgets.example.org".into(),
            group: "widgets.example.org".into(),
            kind: "Gadget".into(),
            plural: "gadgets".into(),
            ..Default::default()
        });
        b.api_services.push(crate::bundle::ApiService {
            name: "v2.widgets.example.org".into(),
            group: "widgets.example.org".into(),
            version: "v2".into(),
            ..Default::default()
        });
        b
    }

    fn client_probe(path: Option<&str>, description: Option<&str>, error: &str) -> Probe {
        let mut p = Probe::new(crate::bundle::ProbeOrigin {
            kind: crate::bundle::probes::ProbeKind::ClientOutput,
            tool: crate::bundle::probes::ClientTool::Kubectl,
            files: vec![],
        });
        p.path = path.map(str::to_string);
        p.description = description.map(str::to_string);
        p.error = Some(error.to_string()).filter(|e| !e.is_empty());
        p
    }

    #[test]
    fn a_crds_request_concerns_the_crd_not_its_local_api_service() {
        let b = crd_bundle();
        let crd = Some(ObjectRef::cluster(
            Kind::CustomResourceDefinition,
            "gadgets.widgets.example.org",
        ));
        let failed = "conversion webhook for widgets.example.org/v1, Kind=Gadget failed: Post \"https://c.s.svc:443/convert?timeout=30s\": dial tcp 127.0.0.1:443: connect: connection refused";
        // By the error alone (kubectl's output without -v: no path).
        assert_eq!(
            probe_target(&client_probe(None, None, failed), None, &b),
            crd
        );
        // By the path, whatever the error.
        let path = "/apis/widgets.example.org/v2/namespaces/w/gadgets/item-1";
        assert_eq!(
            probe_target(&client_probe(Some(path), None, ""), None, &b),
            crd
        );
        // By kubectl's description of the request.
        let desc = "get gadgets.widgets.example.org";
        assert_eq!(
            probe_target(&client_probe(None, Some(desc), ""), None, &b),
            crd
        );
        // An extension API server serving the group is still what its paths concern.
        let mut b = b;
        b.api_services[0].service = Some(crate::bundle::ServiceRef {
            namespace: "ext".into(),
            name: "api".into(),
            port: None,
            path: None,
        });
        assert_eq!(
            probe_target(&client_probe(Some(path), None, ""), None, &b)
                .unwrap()
                .kind,
            Kind::ApiService
        );
    }
}
