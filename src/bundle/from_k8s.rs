//! Kubernetes API objects → bundle types. Shared by live collection and raw import.
//!
//! Each `add_*` function is a pure transform: it takes a typed object (k8s-openapi) and appends its
//! bundle form — plus the certificates of any `caBundle` it carries, and a gap when a caBundle cannot
//! be decoded — to a bundle. Tests feed them hand-built objects.
//!
//! FlowSchemas and PriorityLevelConfigurations arrive as JSON values instead: k8s-openapi carries only
//! flowcontrol v1, while 1.24–1.28 clusters serve v1beta2/v1beta3 (`assuredConcurrencyShares` vs
//! `nominalConcurrencyShares`). One dynamic mapping reads every served version the same way.

use k8s_openapi::api::admissionregistration::v1 as admreg;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;
use serde_json::Value;

use super::certs::{CertOrigin, CertSource, Certificate};
use super::objects::*;
use super::observations::{Event, Gap, GapReason};
use super::vocab::{FailurePolicy, MatchPolicy, SideEffects, WebhookDefaults};
use super::{EvidenceBundle, Kind, ObjectRef};

fn name_of(meta: &meta::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn ns_of(meta: &meta::ObjectMeta) -> String {
    meta.namespace
        .clone()
        .unwrap_or_else(|| "default".to_string())
}

fn condition(
    type_: &str,
    status: &str,
    reason: Option<&String>,
    message: Option<&String>,
    t: Option<&meta::Time>,
) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.cloned().unwrap_or_default(),
        message: message.cloned().unwrap_or_default(),
        last_transition_time: t.map(|t| t.0),
    }
}

/// Decode a caBundle into the bundle's certificates, owned by `owner`; an undecodable caBundle
/// becomes a gap rather than an error, because the rest of the evidence is still good.
pub fn add_ca_bundle(
    bundle: &mut EvidenceBundle,
    owner: &ObjectRef,
    pem: &[u8],
    file: Option<&str>,
) {
    match crate::pki::decode_pem(pem) {
        Ok(certs) => {
            for (i, (info, der)) in certs.into_iter().enumerate() {
                bundle.certificates.push(
                    Certificate::from_info(
                        info,
                        CertOrigin {
                            source: CertSource::CaBundle,
                            owner: Some(owner.clone()),
                            file: file.map(str::to_string),
                            endpoint: None,
                            chain_index: i,
                        },
                    )
                    .with_der(&der),
                );
            }
        }
        Err(e) => bundle.gaps.push(Gap::new(
            format!("tls/{owner}/caBundle"),
            GapReason::Error,
            format!("caBundle does not decode: {e}"),
        )),
    }
}

/// An APIService.
pub fn add_api_service(bundle: &mut EvidenceBundle, obj: &apireg::APIService, file: Option<&str>) {
    let name = name_of(&obj.metadata);
    let spec = obj.spec.clone().unwrap_or_default();
    let owner = ObjectRef::cluster(Kind::ApiService, &name);
    let ca = spec
        .ca_bundle
        .as_ref()
        .map(|b| b.0.clone())
        .unwrap_or_default();
    if !ca.is_empty() {
        add_ca_bundle(bundle, &owner, &ca, file);
    }
    let conditions = obj
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    condition(
                        &c.type_,
                        &c.status,
                        c.reason.as_ref(),
                        c.message.as_ref(),
                        c.last_transition_time.as_ref(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    bundle.api_services.push(ApiService {
        name,
        group: spec.group.unwrap_or_default(),
        version: spec.version.unwrap_or_default(),
        service: spec.service.map(|s| ServiceRef {
            namespace: s.namespace.unwrap_or_default(),
            name: s.name.unwrap_or_default(),
            // apiregistration/v1 ServiceReference: port "defaults to 443 for backward
            // compatibility".
            port: Some(s.port.unwrap_or(443)),
            path: None,
        }),
        ca_bundle_present: !ca.is_empty(),
        insecure_skip_tls_verify: spec.insecure_skip_tls_verify.unwrap_or(false),
        group_priority_minimum: Some(spec.group_priority_minimum),
        version_priority: Some(spec.version_priority),
        conditions,
    });
}

/// A Service.
pub fn add_service(bundle: &mut EvidenceBundle, obj: &core::Service) {
    let spec = obj.spec.clone().unwrap_or_default();
    bundle.services.push(Service {
        namespace: ns_of(&obj.metadata),
        name: name_of(&obj.metadata),
        // The API server defaults an absent type to ClusterIP. It matters: kube-aggregator checks
        // the port and endpoints of ClusterIP Services only (available_controller.go).
        type_: spec.type_.unwrap_or_else(|| "ClusterIP".to_string()),
        cluster_ip: spec.cluster_ip,
        external_name: spec.external_name,
        ports: spec
            .ports
            .unwrap_or_default()
            .into_iter()
            .map(|p| ServicePort {
                name: p.name.unwrap_or_default(),
                port: p.port,
                target_port: p.target_port.map(|t| match t {
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i) => {
                        i.to_string()
                    }
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s) => s,
                }),
                protocol: p.protocol.unwrap_or_else(|| "TCP".to_string()),
            })
            .collect(),
        selector: spec.selector.unwrap_or_default(),
    });
}

fn target_ref(r: &core::ObjectReference) -> TargetRef {
    TargetRef {
        kind: Kind::parse(r.kind.as_deref().unwrap_or_default()),
        namespace: r.namespace.clone(),
        name: r.name.clone().unwrap_or_default(),
    }
}

/// An Endpoints object.
pub fn add_endpoints(bundle: &mut EvidenceBundle, obj: &core::Endpoints) {
    let address = |a: &core::EndpointAddress| EndpointAddress {
        ip: a.ip.clone(),
        target_ref: a.target_ref.as_ref().map(target_ref),
    };
    // Ready and not-ready addresses stay apart: kube-aggregator's `MissingEndpoints` check (before
    // 1.34) counts only `subsets[].addresses` with a port named like the Service port
    // (REFERENCE §2.1); a pod failing readiness sits in `notReadyAddresses` and does not count.
    bundle.endpoints.push(Endpoints {
        namespace: ns_of(&obj.metadata),
        name: name_of(&obj.metadata),
        subsets: obj
            .subsets
            .iter()
            .flatten()
            .map(|s| EndpointSubset {
                ready: s.addresses.iter().flatten().map(address).collect(),
                not_ready: s
                    .not_ready_addresses
                    .iter()
                    .flatten()
                    .map(address)
                    .collect(),
                ports: s
                    .ports
                    .iter()
                    .flatten()
                    // An unnamed port is "", which is what the aggregator compares with an
                    // unnamed Service port.
                    .map(|p| EndpointPort {
                        name: p.name.clone().unwrap_or_default(),
                        port: p.port,
                    })
                    .collect(),
            })
            .collect(),
    });
}

/// An EndpointSlice.
pub fn add_endpoint_slice(bundle: &mut EvidenceBundle, obj: &discovery::EndpointSlice) {
    bundle.endpoint_slices.push(EndpointSlice {
        namespace: ns_of(&obj.metadata),
        name: name_of(&obj.metadata),
        // A slice names its Service only through this label (set by the EndpointSlice
        // controller); slice names are generated, and one Service may have several.
        service_name: obj
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/service-name").cloned()),
        address_type: obj.address_type.clone(),
        endpoints: obj
            .endpoints
            .iter()
            .flatten()
            .map(|e| SliceEndpoint {
                addresses: e.addresses.clone(),
                // Kept as `Option`: the API says an unset `ready` means ready, which is how 1.34's
                // aggregator reads it (`conditions.ready == nil || true`, REFERENCE §2.1); a
                // default of false here would make such endpoints look unready.
                ready: e.conditions.as_ref().and_then(|c| c.ready),
                serving: e.conditions.as_ref().and_then(|c| c.serving),
                terminating: e.conditions.as_ref().and_then(|c| c.terminating),
                target_ref: e.target_ref.as_ref().map(target_ref),
            })
            .collect(),
        ports: obj
            .ports
            .iter()
            .flatten()
            .map(|p| EndpointPort {
                name: p.name.clone().unwrap_or_default(),
                port: p.port.unwrap_or_default(),
            })
            .collect(),
    });
}

/// A Pod: readiness and its service account (nothing else from its spec is kept, so no env values
/// or mounted secrets).
pub fn add_pod(bundle: &mut EvidenceBundle, obj: &core::Pod) {
    let status = obj.status.clone().unwrap_or_default();
    // The `Ready` condition, not the phase: a Running pod whose readiness probe fails is taken out
    // of its Service's ready endpoints, which is what the aggregator and the webhook caller see.
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let statuses: Vec<core::ContainerStatus> =
        status.container_statuses.clone().unwrap_or_default();
    let restarts = statuses.iter().map(|c| c.restart_count).sum();
    let container_problems = statuses
        .iter()
        .filter_map(|c| {
            let st = c.state.as_ref()?;
            if let Some(w) = &st.waiting {
                return Some(format!(
                    "{}: {}",
                    c.name,
                    w.reason.clone().unwrap_or_else(|| "Waiting".into())
                ));
            }
            st.terminated.as_ref().map(|t| {
                format!(
                    "{}: {}",
                    c.name,
                    t.reason.clone().unwrap_or_else(|| "Terminated".into())
                )
            })
        })
        .collect();
    bundle.pods.push(Pod {
        namespace: ns_of(&obj.metadata),
        name: name_of(&obj.metadata),
        labels: obj.metadata.labels.clone().unwrap_or_default(),
        phase: status.phase.unwrap_or_default(),
        ready,
        restarts,
        container_problems,
        // `serviceAccount` is the deprecated alias of `serviceAccountName`; with neither the pod
        // runs as `default` (the ServiceAccount admission plugin sets it). The extension server's
        // delegated auth RBAC is judged against this account.
        service_account: obj.spec.as_ref().map(|s| {
            s.service_account_name
                .clone()
                .or_else(|| s.service_account.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "default".to_string())
        }),
    });
}

pub(crate) fn label_selector(s: Option<&meta::LabelSelector>) -> LabelSelector {
    let Some(s) = s else {
        return LabelSelector::default();
    };
    LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .map(|e| LabelSelectorRequirement {
                key: e.key.clone(),
                operator: e.operator.clone(),
                values: e.values.clone().unwrap_or_default(),
            })
            .collect(),
    }
}

fn rules(rs: Option<&Vec<admreg::RuleWithOperations>>) -> Vec<WebhookRule> {
    rs.iter()
        .flat_map(|v| v.iter())
        .map(|r| WebhookRule {
            operations: r.operations.clone().unwrap_or_default(),
            api_groups: r.api_groups.clone().unwrap_or_default(),
            api_versions: r.api_versions.clone().unwrap_or_default(),
            resources: r.resources.clone().unwrap_or_default(),
            // Unset means `*`, any scope (the admissionregistration v1 default); the matchers
            // read `None` that way.
            scope: r.scope.clone(),
        })
        .collect()
}

fn admission_target(
    bundle: &mut EvidenceBundle,
    owner: &ObjectRef,
    cc: &admreg::WebhookClientConfig,
    file: Option<&str>,
) -> WebhookTarget {
    let ca = cc
        .ca_bundle
        .as_ref()
        .map(|b| b.0.clone())
        .unwrap_or_default();
    if !ca.is_empty() {
        add_ca_bundle(bundle, owner, &ca, file);
    }
    WebhookTarget {
        service: cc.service.as_ref().map(|s| ServiceRef {
            namespace: s.namespace.clone(),
            name: s.name.clone(),
            // admissionregistration/v1 ServiceReference: port defaults to 443.
            port: Some(s.port.unwrap_or(443)),
            path: s.path.clone(),
        }),
        url: cc.url.clone(),
        ca_bundle_present: !ca.is_empty(),
    }
}

/// One bundle [`Webhook`] from a `webhooks[]` entry. k8s-openapi gives validating and mutating
/// webhooks two types whose shared fields have the same names, so this one mapping serves both;
/// the defaults are admissionregistration v1's (`SetDefaults_ValidatingWebhook`,
/// `SetDefaults_MutatingWebhook`: [`WebhookDefaults::V1`]); v1beta1 defaulted differently, so raw
/// v1beta1 objects have theirs written out before they reach here.
macro_rules! webhook_of {
    ($bundle:expr, $file:expr, $kind:expr, $configuration:expr, $w:expr, $reinvocation:expr) => {{
        let w = $w;
        let kind: WebhookKind = $kind;
        let owner = ObjectRef::cluster(kind.object_kind(), &w.name);
        let target = admission_target($bundle, &owner, &w.client_config, $file);
        let defaults = &WebhookDefaults::V1;
        Webhook {
            kind,
            configuration: $configuration,
            name: w.name.clone(),
            target,
            // Both: the raw value says whether anyone chose a timeout; the effective one (10 s by
            // default, range 1–30, REFERENCE §2.3) is what the API server enforces and what a
            // `context deadline exceeded` is compared with.
            timeout_seconds: w.timeout_seconds,
            effective_timeout_seconds: w.timeout_seconds.unwrap_or(defaults.timeout_seconds),
            failure_policy: w
                .failure_policy
                .as_deref()
                .map_or(defaults.failure_policy.clone(), FailurePolicy::parse),
            match_policy: w
                .match_policy
                .as_deref()
                .map_or(defaults.match_policy.clone(), MatchPolicy::parse),
            side_effects: Some(SideEffects::parse(&w.side_effects)),
            reinvocation_policy: $reinvocation,
            rules: rules(w.rules.as_ref()),
            namespace_selector: label_selector(w.namespace_selector.as_ref()),
            object_selector: label_selector(w.object_selector.as_ref()),
            // CEL only the API server evaluates: their number is enough to say "called unless a
            // matchCondition excludes it".
            match_conditions: w.match_conditions.as_ref().map_or(0, Vec::len),
            admission_review_versions: w.admission_review_versions.clone(),
        }
    }};
}

/// Every webhook of a ValidatingWebhookConfiguration.
pub fn add_validating_configuration(
    bundle: &mut EvidenceBundle,
    obj: &admreg::ValidatingWebhookConfiguration,
    file: Option<&str>,
) {
    let configuration = name_of(&obj.metadata);
    for w in obj.webhooks.iter().flatten() {
        let hook = webhook_of!(
            bundle,
            file,
            WebhookKind::Validating,
            configuration.clone(),
            w,
            None
        );
        bundle.webhooks.push(hook);
    }
}

/// Every webhook of a MutatingWebhookConfiguration.
pub fn add_mutating_configuration(
    bundle: &mut EvidenceBundle,
    obj: &admreg::MutatingWebhookConfiguration,
    file: Option<&str>,
) {
    let configuration = name_of(&obj.metadata);
    for w in obj.webhooks.iter().flatten() {
        // `reinvocationPolicy` is mutating-only; `Never` is its default.
        let reinvocation = Some(
            w.reinvocation_policy
                .clone()
                .unwrap_or_else(|| "Never".into()),
        );
        let hook = webhook_of!(
            bundle,
            file,
            WebhookKind::Mutating,
            configuration.clone(),
            w,
            reinvocation
        );
        bundle.webhooks.push(hook);
    }
}

/// A CustomResourceDefinition.
pub fn add_crd(
    bundle: &mut EvidenceBundle,
    obj: &apiext::CustomResourceDefinition,
    file: Option<&str>,
) {
    let name = name_of(&obj.metadata);
    let owner = ObjectRef::cluster(Kind::CustomResourceDefinition, &name);
    let spec = &obj.spec;
    let conversion = match &spec.conversion {
        Some(c) => {
            let webhook = c.webhook.as_ref().and_then(|w| {
                let cc = w.client_config.as_ref()?;
                let ca = cc
                    .ca_bundle
                    .as_ref()
                    .map(|b| b.0.clone())
                    .unwrap_or_default();
                if !ca.is_empty() {
                    add_ca_bundle(bundle, &owner, &ca, file);
                }
                Some(WebhookTarget {
                    service: cc.service.as_ref().map(|s| ServiceRef {
                        namespace: s.namespace.clone(),
                        name: s.name.clone(),
                        // apiextensions/v1 ServiceReference: port defaults to 443.
                        port: Some(s.port.unwrap_or(443)),
                        path: s.path.clone(),
                    }),
                    url: cc.url.clone(),
                    ca_bundle_present: !ca.is_empty(),
                })
            });
            CrdConversion {
                strategy: c.strategy.clone(),
                webhook,
                review_versions: c
                    .webhook
                    .as_ref()
                    .map(|w| w.conversion_review_versions.clone())
                    .unwrap_or_default(),
            }
        }
        None => CrdConversion {
            // No spec.conversion is strategy None: the API server only rewrites apiVersion between
            // versions and never calls out, so there is no conversion path to judge.
            strategy: "None".into(),
            ..CrdConversion::default()
        },
    };
    let status = obj.status.clone().unwrap_or_default();
    bundle.crds.push(Crd {
        name,
        group: spec.group.clone(),
        kind: spec.names.kind.clone(),
        plural: spec.names.plural.clone(),
        scope: spec.scope.clone(),
        versions: spec
            .versions
            .iter()
            .map(|v| CrdVersion {
                name: v.name.clone(),
                served: v.served,
                storage: v.storage,
                deprecated: v.deprecated.unwrap_or(false),
            })
            .collect(),
        stored_versions: status.stored_versions.unwrap_or_default(),
        conversion,
        conditions: status
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                condition(
                    &c.type_,
                    &c.status,
                    c.reason.as_ref(),
                    c.message.as_ref(),
                    c.last_transition_time.as_ref(),
                )
            })
            .collect(),
    });
}

/// A core/v1 Event.
pub fn add_event(bundle: &mut EvidenceBundle, obj: &core::Event) {
    bundle.events.push(event(obj));
}

/// An Event in the bundle's shape.
pub fn event(obj: &core::Event) -> Event {
    let inv = &obj.involved_object;
    Event {
        involved: ObjectRef {
            kind: Kind::parse(inv.kind.as_deref().unwrap_or_default()),
            name: inv.name.clone().unwrap_or_default(),
            namespace: inv.namespace.clone(),
        },
        type_: obj.type_.clone().unwrap_or_else(|| "Normal".into()),
        reason: obj.reason.clone().unwrap_or_default(),
        message: obj.message.clone().unwrap_or_default(),
        count: obj
            .series
            .as_ref()
            .and_then(|s| s.count)
            .or(obj.count)
            .map_or(1, |c| c.max(1) as u64),
        last_seen: obj
            .last_timestamp
            .as_ref()
            .map(|t| t.0)
            .or_else(|| obj.event_time.as_ref().map(|t| t.0)),
    }
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

fn i32_at(v: &Value, path: &[&str]) -> Option<i32> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_i64().and_then(|n| i32::try_from(n).ok())
}

fn conditions_of(v: &Value) -> Vec<Condition> {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| Condition {
                    type_: str_at(c, &["type"]).unwrap_or_default().to_string(),
                    status: str_at(c, &["status"]).unwrap_or_default().to_string(),
                    reason: str_at(c, &["reason"]).unwrap_or_default().to_string(),
                    message: str_at(c, &["message"]).unwrap_or_default().to_string(),
                    last_transition_time: str_at(c, &["lastTransitionTime"])
                        .and_then(|t| t.parse().ok()),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A FlowSchema of any flowcontrol version (v1beta1…v1), as JSON.
pub fn add_flow_schema(bundle: &mut EvidenceBundle, v: &Value) {
    let rules = v
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    let subjects = r
                        .get("subjects")
                        .and_then(Value::as_array)
                        .map(|ss| {
                            ss.iter()
                                .map(|s| {
                                    let kind = str_at(s, &["kind"]).unwrap_or_default().to_string();
                                    let name = match kind.as_str() {
                                        "User" => str_at(s, &["user", "name"]),
                                        "Group" => str_at(s, &["group", "name"]),
                                        _ => None,
                                    }
                                    .map(str::to_string)
                                    .unwrap_or_else(|| {
                                        format!(
                                            "{}/{}",
                                            str_at(s, &["serviceAccount", "namespace"])
                                                .unwrap_or("*"),
                                            str_at(s, &["serviceAccount", "name"]).unwrap_or("*")
                                        )
                                    });
                                    crate::bundle::FlowSubject { kind, name }
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    let mut rule = crate::bundle::FlowRule {
                        subjects,
                        ..Default::default()
                    };
                    for rr in r
                        .get("resourceRules")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        rule.verbs.extend(strings(rr.get("verbs")));
                        rule.api_groups.extend(strings(rr.get("apiGroups")));
                        rule.resources.extend(strings(rr.get("resources")));
                    }
                    for nr in r
                        .get("nonResourceRules")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        rule.verbs.extend(strings(nr.get("verbs")));
                        rule.non_resource_urls
                            .extend(strings(nr.get("nonResourceURLs")));
                    }
                    // The union of the rule's resource and non-resource rules: enough to show a
                    // schema, too coarse to match with (`collect::why::flow_match` reads the JSON).
                    for list in [&mut rule.verbs, &mut rule.api_groups, &mut rule.resources] {
                        list.sort();
                        list.dedup();
                    }
                    rule
                })
                .collect()
        })
        .unwrap_or_default();
    bundle.flow_schemas.push(FlowSchema {
        name: str_at(v, &["metadata", "name"])
            .unwrap_or_default()
            .to_string(),
        api_version: str_at(v, &["apiVersion"]).unwrap_or_default().to_string(),
        uid: str_at(v, &["metadata", "uid"])
            .unwrap_or_default()
            .to_string(),
        // 1000: the API's default for an unset precedence.
        matching_precedence: i32_at(v, &["spec", "matchingPrecedence"]).unwrap_or(1000),
        priority_level: str_at(v, &["spec", "priorityLevelConfiguration", "name"])
            .unwrap_or_default()
            .to_string(),
        distinguisher: str_at(v, &["spec", "distinguisherMethod", "type"]).map(str::to_string),
        rules,
        conditions: conditions_of(v),
    });
}

/// A PriorityLevelConfiguration of any flowcontrol version (v1beta1…v1), as JSON.
pub fn add_priority_level(bundle: &mut EvidenceBundle, v: &Value) {
    let limited = v.pointer("/spec/limited");
    // v1beta3 (1.26) renamed `assuredConcurrencyShares` to `nominalConcurrencyShares` when
    // borrowing between levels came in (with `lendablePercent`); the 1.24 captures serve v1beta2
    // and carry only the old name (captures/notes/12-apf-rejection.md).
    let shares = limited.and_then(|l| {
        i32_at(l, &["nominalConcurrencyShares"])
            .or_else(|| i32_at(l, &["assuredConcurrencyShares"]))
    });
    bundle.priority_levels.push(PriorityLevel {
        name: str_at(v, &["metadata", "name"])
            .unwrap_or_default()
            .to_string(),
        api_version: str_at(v, &["apiVersion"]).unwrap_or_default().to_string(),
        uid: str_at(v, &["metadata", "uid"])
            .unwrap_or_default()
            .to_string(),
        type_: str_at(v, &["spec", "type"]).unwrap_or_default().to_string(),
        concurrency_shares: shares,
        lendable_percent: limited.and_then(|l| i32_at(l, &["lendablePercent"])),
        limit_response: limited
            .and_then(|l| str_at(l, &["limitResponse", "type"]))
            .map(str::to_string),
        queues: limited.and_then(|l| i32_at(l, &["limitResponse", "queuing", "queues"])),
        hand_size: limited.and_then(|l| i32_at(l, &["limitResponse", "queuing", "handSize"])),
        queue_length_limit: limited
            .and_then(|l| i32_at(l, &["limitResponse", "queuing", "queueLengthLimit"])),
        conditions: conditions_of(v),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_defaults_are_recorded_as_effective_values() {
        let mut b = EvidenceBundle::new(crate::bundle::CollectionSource::Unknown);
        let cfg: admreg::ValidatingWebhookConfiguration =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "cfg"},
                "webhooks": [{
                    "name": "w.example.com",
                    "clientConfig": {"service": {"namespace": "ns", "name": "svc"}},
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"]
                }]
            }))
            .unwrap();
        add_validating_configuration(&mut b, &cfg, None);
        let w = &b.webhooks[0];
        assert_eq!(w.effective_timeout_seconds, 10);
        assert_eq!(w.timeout_seconds, None);
        assert_eq!(w.failure_policy, FailurePolicy::Fail);
        assert_eq!(w.target.service.as_ref().unwrap().port, Some(443));
        assert_eq!(w.target.server_name().as_deref(), Some("svc.ns.svc"));
    }

    #[test]
    fn flowcontrol_v1beta2_shares_are_read() {
        let mut b = EvidenceBundle::new(crate::bundle::CollectionSource::Unknown);
        add_priority_level(
            &mut b,
            &serde_json::json!({
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta2",
                "kind": "PriorityLevelConfiguration",
                "metadata": {"name": "tiny", "uid": "u"},
                "spec": {"type": "Limited", "limited": {"assuredConcurrencyShares": 1,
                    "limitResponse": {"type": "Queue", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1}}}}
            }),
        );
        let pl = &b.priority_levels[0];
        assert_eq!(pl.concurrency_shares, Some(1));
        assert_eq!(pl.queue_length_limit, Some(1));
        assert_eq!(pl.limit_response.as_deref(), Some("Queue"));
    }
}
