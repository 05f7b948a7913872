//! Kubernetes objects (as JSON values) → the bundle's types, and the caBundles they trust.
//!
//! The one place that knows which kinds extpath reads and how each is mapped: typed kinds through
//! k8s-openapi and [`crate::bundle::from_k8s`], flowcontrol of any version as JSON. Older API
//! versions are brought to the shape of the version k8s-openapi carries first (admissionregistration
//! v1beta1 with its own defaults, events.k8s.io Events as core Events). Every caBundle an object
//! carries is also recorded with the server name a client verifies, for `cert_check.rs`.

use k8s_openapi::api::admissionregistration::v1 as admreg;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::api::rbac::v1 as k8s_rbac;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;
use serde_json::{Value, json};

use crate::bundle::{EvidenceBundle, Kind, ObjectRef, WebhookDefaults, from_k8s, rbac};

use super::state::CaTrust;

/// Map one object into `bundle`; `Ok(false)` for a kind extpath does not read.
pub(crate) fn apply(
    bundle: &mut EvidenceBundle,
    trusts: &mut Vec<CaTrust>,
    typed: &Value,
    file: Option<&str>,
) -> Result<bool, String> {
    let str_of = |k: &str| typed.get(k).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (str_of("apiVersion"), str_of("kind"));
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    match (group, kind) {
        ("apiregistration.k8s.io", "APIService") => {
            let o: apireg::APIService = typed_as(typed)?;
            record_api_service_trust(trusts, &o);
            from_k8s::add_api_service(bundle, &o, file);
        }
        ("", "Service") => from_k8s::add_service(bundle, &typed_as(typed)?),
        ("", "Endpoints") => from_k8s::add_endpoints(bundle, &typed_as(typed)?),
        ("discovery.k8s.io", "EndpointSlice") => {
            let o: discovery::EndpointSlice = typed_as(typed)?;
            from_k8s::add_endpoint_slice(bundle, &o);
        }
        ("", "Pod") => {
            let o: core::Pod = typed_as(typed)?;
            from_k8s::add_pod(bundle, &o);
        }
        ("", "Event") => {
            let o: core::Event = typed_as(typed)?;
            from_k8s::add_event(bundle, &o);
        }
        // The API server serves the same Event objects as core/v1 and as events.k8s.io/v1; a
        // capture holds whichever its tool asked for, so both map to one shape.
        ("events.k8s.io", "Event") => {
            let o: core::Event = typed_as(&events_v1_as_core(typed))?;
            from_k8s::add_event(bundle, &o);
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            let o: admreg::ValidatingWebhookConfiguration =
                typed_as(&webhook_defaults(typed, api_version))?;
            let start = bundle.webhooks.len();
            from_k8s::add_validating_configuration(bundle, &o, file);
            let pems = o.webhooks.iter().flatten().map(|w| ca_of(&w.client_config));
            record_webhook_trusts(bundle, trusts, start, pems.collect());
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            let o: admreg::MutatingWebhookConfiguration =
                typed_as(&webhook_defaults(typed, api_version))?;
            let start = bundle.webhooks.len();
            from_k8s::add_mutating_configuration(bundle, &o, file);
            let pems = o.webhooks.iter().flatten().map(|w| ca_of(&w.client_config));
            record_webhook_trusts(bundle, trusts, start, pems.collect());
        }
        // apiextensions v1beta1 stopped being served in 1.22, before the oldest cluster extpath
        // supports (1.24): a v1beta1 CRD in an import is a stale manifest, not the live object.
        ("apiextensions.k8s.io", "CustomResourceDefinition") if api_version.ends_with("/v1") => {
            let o: apiext::CustomResourceDefinition = typed_as(typed)?;
            from_k8s::add_crd(bundle, &o, file);
            record_crd_trust(bundle, trusts, &o);
        }
        ("rbac.authorization.k8s.io", "ClusterRole") => {
            rbac::add_cluster_role(bundle, &typed_as::<k8s_rbac::ClusterRole>(typed)?)
        }
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => rbac::add_cluster_role_binding(
            bundle,
            &typed_as::<k8s_rbac::ClusterRoleBinding>(typed)?,
        ),
        // The delegation checks read kube-system's Roles only, as a collection does.
        ("rbac.authorization.k8s.io", "Role" | "RoleBinding")
            if typed.pointer("/metadata/namespace").and_then(Value::as_str)
                != Some("kube-system") => {}
        ("rbac.authorization.k8s.io", "Role") => {
            rbac::add_role(bundle, &typed_as::<k8s_rbac::Role>(typed)?)
        }
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            rbac::add_role_binding(bundle, &typed_as::<k8s_rbac::RoleBinding>(typed)?)
        }
        // Read as JSON in every version: 1.24-era clusters serve only v1beta1/v1beta2, which
        // k8s-openapi does not carry (DESIGN §5), and the fields read are the same in all.
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => from_k8s::add_flow_schema(bundle, typed),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            from_k8s::add_priority_level(bundle, typed)
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Deserialise into a k8s-openapi type (whose deserialiser insists on its own `apiVersion`, so
/// older versions read through it are relabelled first); `apiVersion`/`kind` were normalised by the caller.
fn typed_as<T>(v: &Value) -> Result<T, String>
where
    T: serde::de::DeserializeOwned + k8s_openapi::Resource,
{
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.insert("apiVersion".into(), json!(T::API_VERSION));
        o.insert("kind".into(), json!(T::KIND));
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

/// admissionregistration v1beta1 objects have other defaults than v1 (and optional fields v1
/// requires): write them out ([`WebhookDefaults::V1BETA1`]), so the v1 mapping records the
/// effective values.
fn webhook_defaults(v: &Value, api_version: &str) -> Value {
    let mut v = v.clone();
    if !api_version.ends_with("/v1beta1") {
        return v;
    }
    // v1beta1 defaulted fail-open (failurePolicy Ignore, timeoutSeconds 30, sideEffects Unknown),
    // v1 fail-closed with 10 s: mapping an old object with v1's defaults would turn a webhook
    // that is ignored on failure into one that blocks every write.
    let d = &WebhookDefaults::V1BETA1;
    if let Some(hooks) = v.get_mut("webhooks").and_then(Value::as_array_mut) {
        for h in hooks.iter_mut().filter_map(Value::as_object_mut) {
            h.entry("failurePolicy")
                .or_insert(json!(d.failure_policy.as_str()));
            h.entry("timeoutSeconds")
                .or_insert(json!(d.timeout_seconds));
            h.entry("matchPolicy")
                .or_insert(json!(d.match_policy.as_str()));
            if let Some(side_effects) = &d.side_effects {
                h.entry("sideEffects")
                    .or_insert(json!(side_effects.as_str()));
            }
            h.entry("admissionReviewVersions")
                .or_insert(json!(d.admission_review_versions));
        }
    }
    v
}

/// events.k8s.io/v1 → the core/v1 shape `add_event` reads.
fn events_v1_as_core(v: &Value) -> Value {
    // events.k8s.io/v1 renamed the core fields (involvedObject → regarding, message → note) and
    // moved repetition into `series`; `deprecatedCount`/`deprecatedLastTimestamp` carry the core
    // values for Events written through the old API.
    let get = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
    let series = v.get("series");
    json!({
        "metadata": get("metadata"),
        "involvedObject": get("regarding"),
        "reason": get("reason"),
        "message": get("note"),
        "type": get("type"),
        "count": series.and_then(|s| s.get("count")).cloned().unwrap_or(get("deprecatedCount")),
        "lastTimestamp": series
            .and_then(|s| s.get("lastObservedTime"))
            .cloned()
            .unwrap_or(get("deprecatedLastTimestamp")),
        "eventTime": get("eventTime"),
    })
}

/// The PEM of a webhook's caBundle (k8s-openapi already base64-decoded it).
fn ca_of(cc: &admreg::WebhookClientConfig) -> Vec<u8> {
    cc.ca_bundle
        .as_ref()
        .map(|b| b.0.clone())
        .unwrap_or_default()
}

/// An APIService's caBundle, unless it skips verification (then there is nothing to verify against).
fn record_api_service_trust(trusts: &mut Vec<CaTrust>, o: &apireg::APIService) {
    let Some(spec) = &o.spec else { return };
    let (Some(ca), Some(svc)) = (&spec.ca_bundle, &spec.service) else {
        return;
    };
    // The proxy's TLS config takes `Insecure` from insecureSkipTLSVerify (handler_proxy.go,
    // REFERENCE §2.2): with it set, the caBundle is not what the aggregator trusts.
    if ca.0.is_empty() || spec.insecure_skip_tls_verify == Some(true) {
        return;
    }
    trusts.push(CaTrust {
        owner: ObjectRef::cluster(
            Kind::ApiService,
            o.metadata.name.as_deref().unwrap_or_default(),
        ),
        // The aggregator dials with ServerName `<svc>.<ns>.svc` (REFERENCE §2.2), whatever name
        // the certificate was issued for.
        server_name: match (&svc.name, &svc.namespace) {
            (Some(n), Some(ns)) => Some(format!("{n}.{ns}.svc")),
            _ => None,
        },
        pem: ca.0.clone(),
    });
}

/// The caBundles of the webhooks just added (from `start`), in the order the configuration lists
/// them, each with the name its client verifies.
fn record_webhook_trusts(
    bundle: &EvidenceBundle,
    trusts: &mut Vec<CaTrust>,
    start: usize,
    pems: Vec<Vec<u8>>,
) {
    let added: Vec<(ObjectRef, Option<String>)> = bundle.webhooks[start..]
        .iter()
        .map(|w| {
            (
                ObjectRef::cluster(w.kind.object_kind(), &w.name),
                w.target.server_name(),
            )
        })
        .collect();
    for ((owner, server_name), pem) in added.into_iter().zip(pems) {
        if !pem.is_empty() {
            trusts.push(CaTrust {
                owner,
                server_name,
                pem,
            });
        }
    }
}

/// A CRD conversion webhook's caBundle.
fn record_crd_trust(
    bundle: &EvidenceBundle,
    trusts: &mut Vec<CaTrust>,
    o: &apiext::CustomResourceDefinition,
) {
    let pem = o
        .spec
        .conversion
        .as_ref()
        .and_then(|c| c.webhook.as_ref())
        .and_then(|w| w.client_config.as_ref())
        .and_then(|cc| cc.ca_bundle.as_ref())
        .map(|b| b.0.clone())
        .unwrap_or_default();
    if pem.is_empty() {
        return;
    }
    let server_name = bundle
        .crds
        .last()
        .and_then(|c| c.conversion.webhook.as_ref())
        .and_then(|w| w.server_name());
    trusts.push(CaTrust {
        owner: ObjectRef::cluster(
            Kind::CustomResourceDefinition,
            o.metadata.name.as_deref().unwrap_or_default(),
        ),
        server_name,
        pem,
    });
}
