//! Bundle types → Kubernetes API objects: the inverse of [`super::from_k8s`].
//!
//! A replayed recording (`replay serve --bundle`) serves a bundle's objects as the API server would,
//! and a collection against it reads them back through `from_k8s`. So the contract is that round
//! trip: `from_k8s(to_k8s(x)) == x` for every object the bundle holds in the shape `from_k8s`
//! produces — APIServices, Services, Endpoints, EndpointSlices, Pods, webhooks (grouped back into
//! their configurations), CRDs, FlowSchemas and PriorityLevelConfigurations (in the API version they
//! were read from), ClusterRoles, Roles and their bindings, and Events. Objects come out as JSON with
//! `apiVersion` and `kind`, because flowcontrol v1beta1…v1beta3 have no k8s-openapi types and the reference server stores JSON.
//!
//! What the bundle never kept is not invented beyond what an object needs to decode: a Pod gets
//! one container status per recorded problem (the restart count on the first), a webhook as many
//! placeholder `matchConditions` as it had, a FlowSchema resource rule matching every namespace.
//!
//! `caBundle`s come from the certificates the bundle kept with their PEM ([`ca_bundle`]). A
//! certificate summary without its PEM (hand-written bundles) cannot be turned back into the bytes
//! it was decoded from; such a caBundle is written as [`CA_BUNDLE_PLACEHOLDER`], which keeps the
//! field set (it was) and decodes to no certificate, and the summaries travel with the evidence a
//! replay carries instead (`super::carried`).

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::{Value, json};

use super::objects::*;
use super::observations::Event;
use super::rbac::{PolicyRule, RbacBinding, RbacRole};
use super::{CertSource, EvidenceBundle, Kind, ObjectRef, SideEffects};

/// The text of a caBundle whose certificates the bundle kept without their PEM. It is not a PEM
/// certificate, so a reader finds the field set and no certificate in it.
pub const CA_BUNDLE_PLACEHOLDER: &str = "# extpath replay: the recording kept no PEM for the \
certificates of this caBundle; their summaries are in the carried evidence (--merge)\n";

/// What the `caBundle` of an object can be served as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaBundle {
    /// The concatenated PEM of every certificate the bundle holds for it, in chain order.
    Pem(String),
    /// The object had a caBundle, but the bundle did not keep the PEM of all of its certificates.
    Unservable,
}

/// The caBundle of `owner` (an object whose `ca_bundle_present` is true), from the certificates the
/// bundle holds for it.
pub fn ca_bundle(bundle: &EvidenceBundle, owner: &ObjectRef) -> CaBundle {
    let mut certs: Vec<_> = bundle
        .certificates
        .iter()
        .filter(|c| {
            c.origin.source == CertSource::CaBundle && c.origin.owner.as_ref() == Some(owner)
        })
        .collect();
    // All or nothing: serving the certificates that do have PEM would make a caBundle that trusts
    // fewer CAs than the recorded one, and a replayed TLS check could fail where the cluster's
    // passed.
    if certs.is_empty() || certs.iter().any(|c| c.pem.is_none()) {
        return CaBundle::Unservable;
    }
    certs.sort_by_key(|c| c.origin.chain_index);
    CaBundle::Pem(certs.iter().filter_map(|c| c.pem.as_deref()).collect())
}

fn ca_field(bundle: &EvidenceBundle, owner: &ObjectRef, present: bool) -> Value {
    if !present {
        return Value::Null;
    }
    let text = match ca_bundle(bundle, owner) {
        CaBundle::Pem(p) => p,
        CaBundle::Unservable => CA_BUNDLE_PLACEHOLDER.to_string(),
    };
    json!(base64::engine::general_purpose::STANDARD.encode(text))
}

/// Remove `null` members, so that absent optional fields are absent rather than null.
///
/// The API server writes optional fields with `omitempty`; a reader that tells "unset" from
/// "set to nothing" (a webhook's `matchPolicy`, a slice endpoint's `ready`) must see what the
/// server would have sent.
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

fn non_empty(s: &str) -> Value {
    if s.is_empty() { Value::Null } else { json!(s) }
}

fn list<T>(items: &[T], f: impl Fn(&T) -> Value) -> Value {
    if items.is_empty() {
        Value::Null
    } else {
        Value::Array(items.iter().map(f).collect())
    }
}

fn map(m: &BTreeMap<String, String>) -> Value {
    if m.is_empty() { Value::Null } else { json!(m) }
}

fn conditions(cs: &[Condition]) -> Value {
    list(cs, |c| {
        json!({
            "type": c.type_,
            "status": c.status,
            "reason": non_empty(&c.reason),
            "message": non_empty(&c.message),
            "lastTransitionTime": c.last_transition_time.map(|t| t.to_string()),
        })
    })
}

fn status_with(conditions_value: Value) -> Value {
    if conditions_value.is_null() {
        Value::Null
    } else {
        json!({"conditions": conditions_value})
    }
}

/// An APIService.
pub fn api_service(bundle: &EvidenceBundle, a: &ApiService) -> Value {
    let owner = ObjectRef::cluster(Kind::ApiService, &a.name);
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": a.name},
        "spec": {
            "group": a.group,
            "version": a.version,
            "service": a.service.as_ref().map(|s| json!({"namespace": s.namespace, "name": s.name, "port": s.port})),
            "caBundle": ca_field(bundle, &owner, a.ca_bundle_present),
            "insecureSkipTLSVerify": a.insecure_skip_tls_verify.then_some(true),
            // Required by the API; the bundle has them whenever they were read from a server.
            "groupPriorityMinimum": a.group_priority_minimum.unwrap_or_default(),
            "versionPriority": a.version_priority.unwrap_or_default(),
        },
        "status": status_with(conditions(&a.conditions)),
    })
}

/// A targetPort is an IntOrString: a number is a port, a string the *name* of a container port.
/// Writing `"8443"` as a string would turn a port into a name that resolves to nothing.
fn int_or_string(s: &str) -> Value {
    match s.parse::<i32>() {
        Ok(n) => json!(n),
        Err(_) => json!(s),
    }
}

/// A Service.
pub fn service(s: &Service) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": s.namespace, "name": s.name},
        "spec": {
            "type": non_empty(&s.type_),
            "clusterIP": s.cluster_ip,
            "externalName": s.external_name,
            "ports": list(&s.ports, |p| json!({
                "name": non_empty(&p.name),
                "port": p.port,
                "targetPort": p.target_port.as_deref().map(int_or_string),
                "protocol": non_empty(&p.protocol),
            })),
            "selector": map(&s.selector),
        },
    })
}

fn target_ref(t: &TargetRef) -> Value {
    json!({"kind": t.kind, "namespace": t.namespace, "name": t.name})
}

fn endpoint_port(p: &EndpointPort) -> Value {
    json!({"name": non_empty(&p.name), "port": p.port})
}

/// An Endpoints object.
pub fn endpoints(e: &Endpoints) -> Value {
    let address = |a: &EndpointAddress| json!({"ip": a.ip, "targetRef": a.target_ref.as_ref().map(target_ref)});
    json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"namespace": e.namespace, "name": e.name},
        "subsets": list(&e.subsets, |s| json!({
            "addresses": list(&s.ready, address),
            "notReadyAddresses": list(&s.not_ready, address),
            "ports": list(&s.ports, endpoint_port),
        })),
    })
}

/// An EndpointSlice.
pub fn endpoint_slice(s: &EndpointSlice) -> Value {
    let labels = s
        .service_name
        .as_ref()
        .map(|n| json!({"kubernetes.io/service-name": n}));
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"namespace": s.namespace, "name": s.name, "labels": labels},
        "addressType": s.address_type,
        "endpoints": s.endpoints.iter().map(|e| {
            // Unrecorded conditions stay absent, not false: discovery/v1 says a nil `ready` is
            // an unknown state consumers should treat as ready (1.34's aggregator counts
            // `ready == nil`, REFERENCE §2.1), so `false` would turn a ready endpoint away.
            let conditions = (e.ready.is_some() || e.serving.is_some() || e.terminating.is_some())
                .then(|| json!({"ready": e.ready, "serving": e.serving, "terminating": e.terminating}));
            json!({"addresses": e.addresses, "conditions": conditions, "targetRef": e.target_ref.as_ref().map(target_ref)})
        }).collect::<Vec<_>>(),
        "ports": list(&s.ports, endpoint_port),
    })
}

/// A Pod: readiness, phase, labels, its service account, and one container status per recorded
/// problem.
pub fn pod(p: &Pod) -> Value {
    let container = |name: &str, restarts: i32, state: Value| json!({"name": name, "image": "", "imageID": "", "ready": false, "restartCount": restarts, "state": state});
    let mut statuses = Vec::new();
    for (i, problem) in p.container_problems.iter().enumerate() {
        let (name, reason) = problem.split_once(": ").unwrap_or(("container", problem));
        let restarts = if i == 0 { p.restarts } else { 0 };
        statuses.push(container(
            name,
            restarts,
            json!({"waiting": {"reason": reason}}),
        ));
    }
    if statuses.is_empty() && p.restarts != 0 {
        statuses.push(container("container", p.restarts, json!({"running": {}})));
    }
    // A recorded service account comes back as the spec that named it (a spec needs its
    // containers, which the bundle never kept).
    let spec = p
        .service_account
        .as_ref()
        .map(|sa| json!({"serviceAccountName": sa, "containers": []}));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": p.namespace, "name": p.name, "labels": map(&p.labels)},
        "spec": spec,
        "status": {
            "phase": non_empty(&p.phase),
            "conditions": [{"type": "Ready", "status": if p.ready { "True" } else { "False" }}],
            "containerStatuses": if statuses.is_empty() { Value::Null } else { Value::Array(statuses) },
        },
    })
}

fn label_selector(s: &LabelSelector) -> Value {
    if s.is_empty() {
        return Value::Null;
    }
    json!({
        "matchLabels": map(&s.match_labels),
        "matchExpressions": list(&s.match_expressions, |e| json!({
            "key": e.key, "operator": e.operator, "values": list(&e.values, |v| json!(v)),
        })),
    })
}

fn service_ref(s: &ServiceRef) -> Value {
    json!({"namespace": s.namespace, "name": s.name, "port": s.port, "path": s.path})
}

fn client_config(bundle: &EvidenceBundle, owner: &ObjectRef, t: &WebhookTarget) -> Value {
    json!({
        "service": t.service.as_ref().map(service_ref),
        "url": t.url,
        "caBundle": ca_field(bundle, owner, t.ca_bundle_present),
    })
}

fn webhook(bundle: &EvidenceBundle, w: &Webhook) -> Value {
    let owner = ObjectRef::cluster(w.kind.object_kind(), &w.name);
    // Only their number was recorded; the expressions match everything.
    let match_conditions: Vec<Value> = (0..w.match_conditions)
        .map(|i| json!({"name": format!("replayed-{i}"), "expression": "true"}))
        .collect();
    json!({
        "name": w.name,
        "clientConfig": client_config(bundle, &owner, &w.target),
        "rules": w.rules.iter().map(|r| json!({
            "operations": r.operations,
            "apiGroups": r.api_groups,
            "apiVersions": r.api_versions,
            "resources": r.resources,
            "scope": r.scope,
        })).collect::<Vec<_>>(),
        "failurePolicy": non_empty(w.failure_policy.as_str()),
        "matchPolicy": non_empty(w.match_policy.as_str()),
        "namespaceSelector": label_selector(&w.namespace_selector),
        "objectSelector": label_selector(&w.object_selector),
        // Required by the API: an unrecorded value is written empty.
        "sideEffects": w.side_effects.as_ref().map_or("", SideEffects::as_str),
        "timeoutSeconds": w.timeout_seconds,
        "admissionReviewVersions": w.admission_review_versions,
        "reinvocationPolicy": match w.kind {
            WebhookKind::Mutating => w.reinvocation_policy.clone(),
            WebhookKind::Validating => None,
        },
        "matchConditions": if match_conditions.is_empty() { Value::Null } else { Value::Array(match_conditions) },
    })
}

/// The webhook configurations of a bundle: its webhooks grouped back by kind and configuration
/// name, in the order the configurations first appear.
pub fn webhook_configurations(bundle: &EvidenceBundle) -> Vec<Value> {
    let mut order: Vec<(WebhookKind, &str)> = Vec::new();
    for w in &bundle.webhooks {
        if !order.contains(&(w.kind, w.configuration.as_str())) {
            order.push((w.kind, &w.configuration));
        }
    }
    order
        .into_iter()
        .map(|(kind, name)| {
            let hooks: Vec<Value> = bundle
                .webhooks
                .iter()
                .filter(|w| w.kind == kind && w.configuration == name)
                .map(|w| webhook(bundle, w))
                .collect();
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": kind.configuration_kind(),
                "metadata": {"name": name},
                "webhooks": hooks,
            })
        })
        .collect()
}

/// A CustomResourceDefinition.
pub fn crd(bundle: &EvidenceBundle, c: &Crd) -> Value {
    let owner = ObjectRef::cluster(Kind::CustomResourceDefinition, &c.name);
    let conv = &c.conversion;
    let webhook = (conv.webhook.is_some() || !conv.review_versions.is_empty()).then(|| {
        json!({
            "clientConfig": conv.webhook.as_ref().map(|t| client_config(bundle, &owner, t)),
            "conversionReviewVersions": conv.review_versions,
        })
    });
    let conversion = (!conv.strategy.is_empty() || webhook.is_some())
        .then(|| json!({"strategy": conv.strategy, "webhook": webhook}));
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": c.name},
        "spec": {
            "group": c.group,
            "names": {"kind": c.kind, "plural": c.plural},
            "scope": c.scope,
            "versions": c.versions.iter().map(|v| json!({
                "name": v.name,
                "served": v.served,
                "storage": v.storage,
                "deprecated": v.deprecated.then_some(true),
            })).collect::<Vec<_>>(),
            "conversion": conversion,
        },
        "status": {
            "acceptedNames": {"kind": c.kind, "plural": c.plural},
            "storedVersions": list(&c.stored_versions, |v| json!(v)),
            "conditions": conditions(&c.conditions),
        },
    })
}

const FLOWCONTROL_V1: &str = "flowcontrol.apiserver.k8s.io/v1";

fn flow_subject(s: &FlowSubject) -> Value {
    match s.kind.as_str() {
        "User" => json!({"kind": "User", "user": {"name": s.name}}),
        "Group" => json!({"kind": "Group", "group": {"name": s.name}}),
        other => {
            let (ns, name) = s.name.split_once('/').unwrap_or(("*", &s.name));
            json!({"kind": other, "serviceAccount": {"namespace": ns, "name": name}})
        }
    }
}

/// A FlowSchema, in the API version it was read from.
pub fn flow_schema(f: &FlowSchema) -> Value {
    let rules: Vec<Value> = f
        .rules
        .iter()
        .map(|r| {
            let urls = !r.non_resource_urls.is_empty();
            let resources = !r.api_groups.is_empty()
                || !r.resources.is_empty()
                || (!urls && !r.verbs.is_empty());
            json!({
                "subjects": r.subjects.iter().map(flow_subject).collect::<Vec<_>>(),
                "resourceRules": resources.then(|| json!([{
                    "verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources,
                    "clusterScope": true, "namespaces": ["*"],
                }])),
                "nonResourceRules": urls.then(|| json!([{
                    "verbs": r.verbs, "nonResourceURLs": r.non_resource_urls,
                }])),
            })
        })
        .collect();
    json!({
        "apiVersion": if f.api_version.is_empty() { FLOWCONTROL_V1 } else { &f.api_version },
        "kind": "FlowSchema",
        // An empty uid is written as such, so that a store does not assign one.
        "metadata": {"name": f.name, "uid": f.uid},
        "spec": {
            "matchingPrecedence": f.matching_precedence,
            "priorityLevelConfiguration": {"name": f.priority_level},
            "distinguisherMethod": f.distinguisher.as_ref().map(|d| json!({"type": d})),
            "rules": rules,
        },
        "status": status_with(conditions(&f.conditions)),
    })
}

/// A PriorityLevelConfiguration, in the API version it was read from (`assuredConcurrencyShares`
/// before v1beta3, `nominalConcurrencyShares` from it on).
pub fn priority_level(p: &PriorityLevel) -> Value {
    let api_version = if p.api_version.is_empty() {
        FLOWCONTROL_V1
    } else {
        &p.api_version
    };
    let shares_key = if api_version.ends_with("/v1beta1") || api_version.ends_with("/v1beta2") {
        "assuredConcurrencyShares"
    } else {
        "nominalConcurrencyShares"
    };
    let queuing = (p.queues.is_some() || p.hand_size.is_some() || p.queue_length_limit.is_some())
        .then(|| {
            json!({"queues": p.queues, "handSize": p.hand_size, "queueLengthLimit": p.queue_length_limit})
        });
    let limit_response = (p.limit_response.is_some() || queuing.is_some())
        .then(|| json!({"type": p.limit_response, "queuing": queuing}));
    let limited = (p.concurrency_shares.is_some()
        || p.lendable_percent.is_some()
        || limit_response.is_some())
    .then(|| {
        let mut l = json!({"lendablePercent": p.lendable_percent, "limitResponse": limit_response});
        l[shares_key] = json!(p.concurrency_shares);
        l
    });
    json!({
        "apiVersion": api_version,
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": p.name, "uid": p.uid},
        "spec": {"type": p.type_, "limited": limited},
        "status": status_with(conditions(&p.conditions)),
    })
}

/// A core/v1 Event; `index` makes its generated name unique.
pub fn event(e: &Event, index: usize) -> Value {
    let inv = &e.involved;
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "namespace": inv.namespace.clone().unwrap_or_else(|| "default".into()),
            // client-go's event recorder names events `<object>.<hex nanoseconds>`; the index
            // stands in for the time so names stay unique and look familiar.
            "name": format!("{}.{index:016x}", inv.name),
        },
        "involvedObject": {"kind": inv.kind, "name": inv.name, "namespace": inv.namespace},
        "type": non_empty(&e.type_),
        "reason": e.reason,
        "message": e.message,
        "count": e.count,
        "lastTimestamp": e.last_seen.map(|t| t.to_string()),
    })
}

fn policy_rule(r: &PolicyRule) -> Value {
    let strings = |v: &[String]| list(v, |x| json!(x));
    json!({
        "verbs": r.verbs,
        "apiGroups": strings(&r.api_groups),
        "resources": strings(&r.resources),
        "resourceNames": strings(&r.resource_names),
        "nonResourceURLs": strings(&r.non_resource_urls),
    })
}

/// A ClusterRole or Role: rules, labels, and a ClusterRole's aggregation selectors.
pub fn rbac_role(r: &RbacRole) -> Value {
    let kind = if r.namespace.is_some() {
        "Role"
    } else {
        "ClusterRole"
    };
    let aggregation = (!r.aggregation_selectors.is_empty()).then(|| {
        json!({"clusterRoleSelectors": r.aggregation_selectors.iter().map(|s| {
            let v = label_selector(s);
            if v.is_null() { json!({}) } else { v }
        }).collect::<Vec<_>>()})
    });
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"namespace": r.namespace, "name": r.name, "labels": map(&r.labels)},
        "rules": list(&r.rules, policy_rule),
        "aggregationRule": aggregation,
    })
}

/// A ClusterRoleBinding or RoleBinding.
pub fn rbac_binding(b: &RbacBinding) -> Value {
    let kind = if b.namespace.is_some() {
        "RoleBinding"
    } else {
        "ClusterRoleBinding"
    };
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"namespace": b.namespace, "name": b.name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": b.role_ref.kind, "name": b.role_ref.name},
        "subjects": list(&b.subjects, |s| {
            let api_group = if s.kind == "ServiceAccount" { "" } else { "rbac.authorization.k8s.io" };
            json!({"kind": s.kind, "name": s.name, "namespace": s.namespace, "apiGroup": non_empty(api_group)})
        }),
    })
}

/// Every object of a bundle, as the API server would serve it.
pub fn objects(bundle: &EvidenceBundle) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    out.extend(bundle.api_services.iter().map(|a| api_service(bundle, a)));
    out.extend(bundle.services.iter().map(service));
    out.extend(bundle.endpoints.iter().map(endpoints));
    out.extend(bundle.endpoint_slices.iter().map(endpoint_slice));
    out.extend(bundle.pods.iter().map(pod));
    out.extend(webhook_configurations(bundle));
    out.extend(bundle.crds.iter().map(|c| crd(bundle, c)));
    out.extend(bundle.flow_schemas.iter().map(flow_schema));
    out.extend(bundle.priority_levels.iter().map(priority_level));
    out.extend(bundle.cluster_roles.iter().map(rbac_role));
    out.extend(bundle.cluster_role_bindings.iter().map(rbac_binding));
    out.extend(bundle.roles.iter().map(rbac_role));
    out.extend(bundle.role_bindings.iter().map(rbac_binding));
    out.extend(bundle.events.iter().enumerate().map(|(i, e)| event(e, i)));
    for o in &mut out {
        drop_nulls(o);
    }
    out
}

#[cfg(test)]
mod tests;
