//! Bundle types → Kubernetes API objects: the inverse of [`super::from_k8s`].
//!
//! A replayed recording (`replay serve --bundle`) serves a bundle's objects as the API server would,
//! and a collection against it reads them back through `from_k8s`. So the contract is that round
//! trip: `from_k8s(to_k8s(x)) == x` for every object the bundle holds in the shape `from_k8s`
//! produces — APIServices, Services, Endpoints, EndpointSlices, Pods, webhooks (grouped back into
//! their configurations), CRDs, FlowSchemas and PriorityLevelConfigurations (in the API version they
//! were read from), and Events. Objects come out as JSON with `apiVersion` and `kind`, because
//! flowcontrol v1beta1…v1beta3 have no k8s-openapi types and the reference server stores JSON.
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
use super::{CertSource, EvidenceBundle, ObjectRef};

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
    let owner = ObjectRef::cluster("APIService", &a.name);
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
            let conditions = (e.ready.is_some() || e.serving.is_some() || e.terminating.is_some())
                .then(|| json!({"ready": e.ready, "serving": e.serving, "terminating": e.terminating}));
            json!({"addresses": e.addresses, "conditions": conditions, "targetRef": e.target_ref.as_ref().map(target_ref)})
        }).collect::<Vec<_>>(),
        "ports": list(&s.ports, endpoint_port),
    })
}

/// A Pod: readiness, phase, labels, and one container status per recorded problem.
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
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": p.namespace, "name": p.name, "labels": map(&p.labels)},
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
    let owner = ObjectRef::cluster(w.kind.subject_kind(), &w.name);
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
        "failurePolicy": non_empty(&w.failure_policy),
        "matchPolicy": non_empty(&w.match_policy),
        "namespaceSelector": label_selector(&w.namespace_selector),
        "objectSelector": label_selector(&w.object_selector),
        // Required by the API: an unrecorded value is written empty.
        "sideEffects": w.side_effects.clone().unwrap_or_default(),
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
    let owner = ObjectRef::cluster("CustomResourceDefinition", &c.name);
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
    out.extend(bundle.events.iter().enumerate().map(|(i, e)| event(e, i)));
    for o in &mut out {
        drop_nulls(o);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{CollectionSource, from_k8s};

    /// What a collection makes of the objects: the `from_k8s` mapping of each, by kind.
    fn read_back(objects: &[Value]) -> EvidenceBundle {
        let mut b = EvidenceBundle::new(CollectionSource::Unknown);
        for o in objects {
            let o = o.clone();
            match o["kind"].as_str().unwrap() {
                "APIService" => {
                    from_k8s::add_api_service(&mut b, &serde_json::from_value(o).unwrap(), None)
                }
                "Service" => from_k8s::add_service(&mut b, &serde_json::from_value(o).unwrap()),
                "Endpoints" => from_k8s::add_endpoints(&mut b, &serde_json::from_value(o).unwrap()),
                "EndpointSlice" => {
                    from_k8s::add_endpoint_slice(&mut b, &serde_json::from_value(o).unwrap())
                }
                "Pod" => from_k8s::add_pod(&mut b, &serde_json::from_value(o).unwrap()),
                "ValidatingWebhookConfiguration" => from_k8s::add_validating_configuration(
                    &mut b,
                    &serde_json::from_value(o).unwrap(),
                    None,
                ),
                "MutatingWebhookConfiguration" => from_k8s::add_mutating_configuration(
                    &mut b,
                    &serde_json::from_value(o).unwrap(),
                    None,
                ),
                "CustomResourceDefinition" => {
                    from_k8s::add_crd(&mut b, &serde_json::from_value(o).unwrap(), None)
                }
                "FlowSchema" => from_k8s::add_flow_schema(&mut b, &o),
                "PriorityLevelConfiguration" => from_k8s::add_priority_level(&mut b, &o),
                "Event" => from_k8s::add_event(&mut b, &serde_json::from_value(o).unwrap()),
                other => panic!("unexpected kind {other}"),
            }
        }
        b
    }

    fn ca_pem() -> String {
        let at: jiff::Timestamp = "2026-11-29T08:00:00Z".parse().unwrap();
        let validity = crate::pki::generate::Validity::around(at, 30, 3650);
        crate::pki::generate::TestCa::new("replay-ca", validity)
            .unwrap()
            .cert_pem
    }

    /// A bundle with one of every object, every field set as `from_k8s` would set it.
    fn sample() -> EvidenceBundle {
        let yaml = r#"
apiVersion: extpath.dev/v1alpha1
kind: EvidenceBundle
collection: {tool_version: 0.1.0}
api_services:
  - {name: v1., group: "", version: v1, group_priority_minimum: 18000, version_priority: 1,
     conditions: [{type: Available, status: "True", reason: Local, message: Local APIServices are always available, last_transition_time: "2026-11-29T08:00:00Z"}]}
  - {name: v1alpha1.wardle.example.com, group: wardle.example.com, version: v1alpha1,
     service: {namespace: wardle, name: api, port: 8443}, ca_bundle_present: true, insecure_skip_tls_verify: true,
     group_priority_minimum: 1000, version_priority: 15,
     conditions: [{type: Available, status: "False", reason: FailedDiscoveryCheck, message: "failing or missing response from https://10.0.0.1:443/apis/wardle.example.com/v1alpha1: connection refused"}]}
services:
  - {namespace: wardle, name: api, type: ClusterIP, cluster_ip: 10.96.0.10, ports: [{name: https, port: 443, target_port: "8443", protocol: TCP}, {port: 80, target_port: http, protocol: UDP}], selector: {app: wardle}}
  - {namespace: ext, name: named, type: ExternalName, external_name: api.example.com}
endpoints:
  - {namespace: wardle, name: api, subsets: [{ready: [{ip: 10.244.0.5, target_ref: {kind: Pod, namespace: wardle, name: api-0}}], not_ready: [{ip: 10.244.0.6}], ports: [{name: https, port: 8443}]}]}
endpoint_slices:
  - {namespace: wardle, name: api-x7k2p, service_name: api, address_type: IPv4,
     endpoints: [{addresses: [10.244.0.5], ready: true, serving: true, terminating: false, target_ref: {kind: Pod, namespace: wardle, name: api-0}}, {addresses: [10.244.0.6]}],
     ports: [{name: https, port: 8443}]}
pods:
  - {namespace: wardle, name: api-0, labels: {app: wardle}, phase: Running, ready: true, restarts: 0}
  - {namespace: wardle, name: api-1, phase: Running, ready: false, restarts: 7, container_problems: ["server: CrashLoopBackOff", "sidecar: Error"]}
  - {namespace: wardle, name: api-2, phase: Running, ready: true, restarts: 2}
webhooks:
  - {kind: Validating, configuration: guard, name: a.guard.example.com,
     target: {service: {namespace: hooks, name: guard, port: 443, path: /validate}, ca_bundle_present: true},
     timeout_seconds: 5, effective_timeout_seconds: 5, failure_policy: Ignore, match_policy: Exact, side_effects: None,
     rules: [{operations: [CREATE, UPDATE], api_groups: [""], api_versions: [v1], resources: [configmaps], scope: Namespaced}],
     namespace_selector: {match_expressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]},
     object_selector: {match_labels: {guarded: "yes"}}, match_conditions: 2, admission_review_versions: [v1, v1beta1]}
  - {kind: Validating, configuration: guard, name: b.guard.example.com, target: {url: "https://hook.example.com:9443/x"},
     effective_timeout_seconds: 10, failure_policy: Fail, match_policy: Equivalent, side_effects: NoneOnDryRun, admission_review_versions: [v1]}
  - {kind: Mutating, configuration: inject, name: inject.example.com, target: {service: {namespace: hooks, name: inject, port: 8443}},
     effective_timeout_seconds: 10, failure_policy: Fail, match_policy: Equivalent, side_effects: None, reinvocation_policy: IfNeeded, admission_review_versions: [v1]}
crds:
  - {name: widgets.conv.example.com, group: conv.example.com, kind: Widget, plural: widgets, scope: Namespaced,
     versions: [{name: v1, served: true, storage: true}, {name: v2, served: true, storage: false, deprecated: true}],
     stored_versions: [v1], conversion: {strategy: Webhook, webhook: {service: {namespace: conv, name: conv, port: 443, path: /convert}, ca_bundle_present: false}, review_versions: [v1]},
     conditions: [{type: Established, status: "True", reason: InitialNamesAccepted, message: the initial names have been accepted}]}
  - {name: plains.conv.example.com, group: conv.example.com, kind: Plain, plural: plains, scope: Cluster, versions: [{name: v1, served: true, storage: true}], conversion: {strategy: None}}
flow_schemas:
  - {name: service-accounts, api_version: flowcontrol.apiserver.k8s.io/v1beta2, uid: 1234-abcd, matching_precedence: 9000, priority_level: workload-low, distinguisher: ByUser,
     rules: [{subjects: [{kind: Group, name: "system:serviceaccounts"}, {kind: User, name: alice}, {kind: ServiceAccount, name: kube-system/*}], verbs: ["*"], api_groups: ["*"], resources: ["*"]},
             {subjects: [{kind: Group, name: "system:authenticated"}], verbs: [get], non_resource_urls: [/healthz, /livez]}],
     conditions: [{type: Dangling, status: "False", reason: Found, message: "This FlowSchema references the PriorityLevelConfiguration object named \"workload-low\" and it exists"}]}
priority_levels:
  - {name: workload-low, api_version: flowcontrol.apiserver.k8s.io/v1beta2, uid: 5678-ef, type: Limited, concurrency_shares: 100, limit_response: Queue, queues: 128, hand_size: 6, queue_length_limit: 50}
  - {name: tiny, api_version: flowcontrol.apiserver.k8s.io/v1, uid: "", type: Limited, concurrency_shares: 1, lendable_percent: 0, limit_response: Reject}
  - {name: exempt, api_version: flowcontrol.apiserver.k8s.io/v1, uid: ex, type: Exempt}
events:
  - {involved: {kind: Pod, name: api-1, namespace: wardle}, type: Warning, reason: BackOff, message: Back-off restarting failed container, count: 12, last_seen: "2026-11-29T08:59:00Z"}
  - {involved: {kind: APIService, name: v1alpha1.wardle.example.com}, type: Normal, reason: Updated, message: status changed, count: 1}
"#;
        let mut b = crate::bundle::load_bundle_str(yaml, "sample.yaml").unwrap();
        let pem = ca_pem();
        for owner in [
            ObjectRef::cluster("APIService", "v1alpha1.wardle.example.com"),
            ObjectRef::cluster("ValidatingWebhook", "a.guard.example.com"),
        ] {
            from_k8s::add_ca_bundle(&mut b, &owner, pem.as_bytes(), None);
        }
        b
    }

    #[test]
    fn objects_read_back_as_the_bundle_they_came_from() {
        let b = sample();
        let back = read_back(&objects(&b));
        assert_eq!(back.api_services, b.api_services);
        assert_eq!(back.services, b.services);
        assert_eq!(back.endpoints, b.endpoints);
        assert_eq!(back.endpoint_slices, b.endpoint_slices);
        assert_eq!(back.pods, b.pods);
        assert_eq!(back.webhooks, b.webhooks);
        assert_eq!(back.crds, b.crds);
        assert_eq!(back.flow_schemas, b.flow_schemas);
        assert_eq!(back.priority_levels, b.priority_levels);
        assert_eq!(back.events, b.events);
        assert_eq!(back.certificates, b.certificates);
        assert!(back.gaps.is_empty(), "{:?}", back.gaps);
    }

    #[test]
    fn a_ca_bundle_without_pem_keeps_the_field_and_decodes_to_nothing() {
        let mut b = sample();
        for c in &mut b.certificates {
            c.pem = None;
        }
        let owner = ObjectRef::cluster("APIService", "v1alpha1.wardle.example.com");
        assert_eq!(ca_bundle(&b, &owner), CaBundle::Unservable);
        let back = read_back(&objects(&b));
        assert!(back.api_services[1].ca_bundle_present);
        assert!(back.certificates.is_empty());
        assert!(
            back.gaps
                .iter()
                .any(|g| g.source == "tls/APIService/v1alpha1.wardle.example.com/caBundle")
        );
    }
}
