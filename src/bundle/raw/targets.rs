//! Mapping client output and log lines to the object they concern.
//!
//! A probe or a log finding is only useful to a rule when it names its subject. The mapping uses
//! what the evidence itself says, most specific first: a webhook quoted by name (`failed calling
//! webhook "<name>"`, `admission webhook "<name>" denied the request`); an aggregated or built-in
//! group/version in the path (`/apis/<g>/<v>/…` is served through APIService `<v>.<g>`);
//! kubectl's request description (`get flunders.wardle.example.com`: the APIService of that group,
//! or the CRD `flunders.wardle.example.com`); and the apiVersion of objects a watch streamed.

use std::sync::LazyLock;

use regex::Regex;

use std::collections::BTreeMap;

use crate::bundle::{EvidenceBundle, HopLayer, Kind, ObjectRef, Probe};

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

/// The APIService or CRD serving `<resource>.<group>`, when the bundle has it.
fn served_resource(resource_dot_group: &str, b: &EvidenceBundle) -> Option<ObjectRef> {
    let (resource, group) = resource_dot_group.split_once('.')?;
    let candidates: Vec<_> = b.api_services.iter().filter(|a| a.group == group).collect();
    if let Some(a) = candidates
        .iter()
        .max_by_key(|a| (!a.is_local(), a.version_priority.unwrap_or(0)))
    {
        return Some(ObjectRef::cluster(Kind::ApiService, &a.name));
    }
    let crd = format!("{resource}.{group}");
    b.crds
        .iter()
        .any(|c| c.name == crd)
        .then(|| ObjectRef::cluster(Kind::CustomResourceDefinition, &crd))
}

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
}
