//! Kubernetes objects as the bundle keeps them: the fields that decide a diagnosis, nothing secret.
//!
//! Each type here is filled from a typed Kubernetes object by [`super::from_k8s`] (live collection and
//! raw import share that mapping). Defaults that the API server applies (webhook `timeoutSeconds` 10,
//! `failurePolicy` Fail; the table is [`super::vocab::WebhookDefaults`]) are recorded as the
//! *effective* value, with the raw field kept beside it, so a rule never has to know an API default.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A status condition (APIService, CRD, FlowSchema, PriorityLevelConfiguration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// e.g. `Available`, `Established`, `Dangling`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine reason, e.g. `FailedDiscoveryCheck`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human message, e.g. `failing or missing response from https://…: … connection refused`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<jiff::Timestamp>,
}

/// A reference from an APIService, webhook or conversion config to a Service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ServiceRef {
    /// Service namespace.
    pub namespace: String,
    /// Service name.
    pub name: String,
    /// The *Service* port (not the container port). For webhooks it defaults to 443.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// URL path (webhooks and conversion webhooks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl ServiceRef {
    /// The DNS name a TLS client verifies: `<name>.<namespace>.svc`.
    pub fn server_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

/// An APIService (`apiregistration.k8s.io/v1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ApiService {
    /// Object name; should be `<version>.<group>`.
    pub name: String,
    /// `spec.group` (empty for the core group `v1.`).
    #[serde(default)]
    pub group: String,
    /// `spec.version`.
    #[serde(default)]
    pub version: String,
    /// `spec.service`; absent for a local (built-in) group/version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceRef>,
    /// Whether `spec.caBundle` is set; its certificates are in the bundle's `certificates` with
    /// origin `ca_bundle` and this APIService as owner.
    #[serde(default)]
    pub ca_bundle_present: bool,
    /// `spec.insecureSkipTLSVerify`.
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
    /// `spec.groupPriorityMinimum`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_priority_minimum: Option<i32>,
    /// `spec.versionPriority`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_priority: Option<i32>,
    /// `status.conditions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl ApiService {
    /// The `Available` condition, if reported.
    pub fn available(&self) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == "Available")
    }
    /// `true` when the APIService is served by kube-apiserver itself.
    pub fn is_local(&self) -> bool {
        self.service.is_none()
    }
}

/// A port of a Service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ServicePort {
    /// Port name (the aggregator matches Endpoints ports by this name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The Service port.
    pub port: i32,
    /// `targetPort`, as written (number or name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<String>,
    /// `TCP` unless said otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
}

/// A Service (core/v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `ClusterIP`, `NodePort`, `LoadBalancer` or `ExternalName`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `spec.clusterIP` (`None` for headless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ip: Option<String>,
    /// `spec.externalName` for ExternalName Services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
    /// `spec.ports`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ServicePort>,
    /// `spec.selector`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub selector: std::collections::BTreeMap<String, String>,
}

/// A reference from an endpoint address to the object behind it (usually a Pod).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetRef {
    /// Usually `Pod`.
    pub kind: super::Kind,
    /// Namespace of the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the target.
    pub name: String,
}

/// One address of an Endpoints subset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct EndpointAddress {
    /// IP address.
    pub ip: String,
    /// The Pod (or other object) behind the address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
}

/// A named port of an Endpoints subset or EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct EndpointPort {
    /// Port name; must equal the Service port's name for the aggregator to use it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Port number.
    pub port: i32,
}

/// One subset of an Endpoints object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct EndpointSubset {
    /// `addresses` (ready).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ready: Vec<EndpointAddress>,
    /// `notReadyAddresses`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_ready: Vec<EndpointAddress>,
    /// `ports`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<EndpointPort>,
}

/// core/v1 Endpoints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Endpoints {
    /// Namespace (same as the Service).
    pub namespace: String,
    /// Name (same as the Service).
    pub name: String,
    /// `subsets`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subsets: Vec<EndpointSubset>,
}

impl Endpoints {
    /// Ready addresses in subsets that carry a port with this name (what the aggregator accepts).
    pub fn ready_addresses_for_port_name(&self, port_name: &str) -> usize {
        self.subsets
            .iter()
            .filter(|s| s.ports.iter().any(|p| p.name == port_name))
            .map(|s| s.ready.len())
            .sum()
    }
}

/// One endpoint of an EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct SliceEndpoint {
    /// Addresses of this endpoint.
    pub addresses: Vec<String>,
    /// `conditions.ready`; absent means ready (the 1.34 aggregator counts `nil || true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// `conditions.serving`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
    /// `conditions.terminating`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
    /// The Pod behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
}

/// discovery.k8s.io/v1 EndpointSlice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct EndpointSlice {
    /// Namespace.
    pub namespace: String,
    /// Name (generated, e.g. `api-x7k2p`).
    pub name: String,
    /// The owning Service, from the `kubernetes.io/service-name` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// `IPv4`, `IPv6` or `FQDN`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address_type: String,
    /// `endpoints`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<SliceEndpoint>,
    /// `ports`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<EndpointPort>,
}

/// A Pod, readiness only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels (to match Service selectors).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// `status.phase`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub phase: String,
    /// The `Ready` condition is `True`.
    #[serde(default)]
    pub ready: bool,
    /// Sum of container restart counts.
    #[serde(default)]
    pub restarts: i32,
    /// Waiting/terminated reasons of containers that are not running (e.g. `CrashLoopBackOff`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_problems: Vec<String>,
    /// `spec.serviceAccountName`, the identity its containers call the API server with (the API
    /// server sets `default` when a Pod names none). Absent when the Pod's spec was not seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
}

/// Validating or mutating.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, Default)]
pub enum WebhookKind {
    /// From a ValidatingWebhookConfiguration.
    #[default]
    Validating,
    /// From a MutatingWebhookConfiguration.
    Mutating,
}

impl WebhookKind {
    /// The kind a reference to one webhook of this kind carries: `ValidatingWebhook` or
    /// `MutatingWebhook`.
    pub fn object_kind(self) -> super::Kind {
        match self {
            WebhookKind::Validating => super::Kind::ValidatingWebhook,
            WebhookKind::Mutating => super::Kind::MutatingWebhook,
        }
    }
    /// The kind of the configuration object that holds it.
    pub fn configuration_kind(self) -> &'static str {
        match self {
            WebhookKind::Validating => "ValidatingWebhookConfiguration",
            WebhookKind::Mutating => "MutatingWebhookConfiguration",
        }
    }
    /// The `type` label of `apiserver_admission_webhook_*` metrics: `validating` or `admit`.
    pub fn metric_type(self) -> &'static str {
        match self {
            WebhookKind::Validating => "validating",
            WebhookKind::Mutating => "admit",
        }
    }
}

/// One rule of a webhook (`rules[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct WebhookRule {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    #[serde(default)]
    pub operations: Vec<String>,
    /// API groups (`""` is core, `*` all).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// API versions.
    #[serde(default)]
    pub api_versions: Vec<String>,
    /// Resources (`pods`, `pods/status`, `*`, `*/*`).
    #[serde(default)]
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

/// A label selector, kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct LabelSelector {
    /// `matchLabels`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub match_labels: std::collections::BTreeMap<String, String>,
    /// `matchExpressions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// An empty selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// The selector's requirements (`metav1.LabelSelectorAsSelector`).
    pub fn requirements(&self) -> Vec<crate::semantics::label_selector::Requirement> {
        use crate::semantics::label_selector::Requirement;
        self.match_labels
            .iter()
            .map(|(k, v)| Requirement::equals(k, v))
            .chain(
                self.match_expressions
                    .iter()
                    .map(|e| Requirement::from_expression(&e.key, &e.operator, e.values.clone())),
            )
            .collect()
    }

    /// Whether a set of labels satisfies the selector (Kubernetes semantics, `crate::semantics`).
    pub fn matches(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        crate::semantics::label_selector::matches_all(&self.requirements(), |k| {
            labels.get(k).map(String::as_str)
        })
    }
}

/// One `matchExpressions` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct LabelSelectorRequirement {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`.
    pub operator: String,
    /// Values for `In`/`NotIn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// Where a webhook or conversion webhook sends its requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct WebhookTarget {
    /// `clientConfig.service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceRef>,
    /// `clientConfig.url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether `clientConfig.caBundle` is set (decoded certificates are in `certificates`).
    #[serde(default)]
    pub ca_bundle_present: bool,
}

impl WebhookTarget {
    /// The host name a TLS client must find in the serving certificate.
    pub fn server_name(&self) -> Option<String> {
        if let Some(s) = &self.service {
            return Some(s.server_name());
        }
        let url = self.url.as_deref()?;
        let rest = url.split_once("://").map(|x| x.1).unwrap_or(url);
        let hostport = rest.split('/').next()?;
        let host = if let Some(stripped) = hostport.strip_prefix('[') {
            stripped.split(']').next()?.to_string()
        } else {
            hostport
                .rsplit_once(':')
                .map(|x| x.0)
                .unwrap_or(hostport)
                .to_string()
        };
        Some(host)
    }
}

/// One admission webhook (a `webhooks[]` entry of a configuration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Validating or mutating.
    pub kind: WebhookKind,
    /// Name of the ValidatingWebhookConfiguration / MutatingWebhookConfiguration.
    pub configuration: String,
    /// The webhook's own name (`webhooks[].name`), what metrics and error messages use.
    pub name: String,
    /// Where it is called.
    pub target: WebhookTarget,
    /// `timeoutSeconds` as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Effective timeout: `timeoutSeconds`, or 10 (the v1 default).
    pub effective_timeout_seconds: i32,
    /// Effective `failurePolicy`: `Fail` (the v1 default) or `Ignore`.
    pub failure_policy: super::FailurePolicy,
    /// Effective `matchPolicy` (`Equivalent` by default).
    pub match_policy: super::MatchPolicy,
    /// `sideEffects`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<super::SideEffects>,
    /// `reinvocationPolicy` (mutating only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reinvocation_policy: Option<String>,
    /// `rules`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<WebhookRule>,
    /// `namespaceSelector` (empty = all namespaces).
    #[serde(default, skip_serializing_if = "LabelSelector::is_empty")]
    pub namespace_selector: LabelSelector,
    /// `objectSelector` (empty = all objects).
    #[serde(default, skip_serializing_if = "LabelSelector::is_empty")]
    pub object_selector: LabelSelector,
    /// Number of `matchConditions`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub match_conditions: usize,
    /// `admissionReviewVersions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admission_review_versions: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One version of a CRD.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct CrdVersion {
    /// Version name, e.g. `v1beta1`.
    pub name: String,
    /// Served through the API.
    pub served: bool,
    /// The version objects are stored in.
    pub storage: bool,
    /// Marked deprecated.
    #[serde(default)]
    pub deprecated: bool,
}

/// A CRD's conversion settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct CrdConversion {
    /// `None` or `Webhook`.
    pub strategy: String,
    /// The conversion webhook, when the strategy is `Webhook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookTarget>,
    /// `conversionReviewVersions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub review_versions: Vec<String>,
}

/// A CustomResourceDefinition (apiextensions.k8s.io/v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Crd {
    /// Name, `<plural>.<group>`.
    pub name: String,
    /// `spec.group`.
    pub group: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// `spec.names.plural`.
    pub plural: String,
    /// `Namespaced` or `Cluster`.
    pub scope: String,
    /// `spec.versions`.
    #[serde(default)]
    pub versions: Vec<CrdVersion>,
    /// `status.storedVersions`: versions objects may still be stored in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stored_versions: Vec<String>,
    /// `spec.conversion`.
    #[serde(default)]
    pub conversion: CrdConversion,
    /// `status.conditions` (`Established`, `NamesAccepted`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One subject a FlowSchema matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct FlowSubject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// User or group name, or `namespace/name` of a service account (`*` wildcards kept).
    pub name: String,
}

/// One `rules[]` entry of a FlowSchema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct FlowRule {
    /// Subjects the rule matches.
    #[serde(default)]
    pub subjects: Vec<FlowSubject>,
    /// Verbs of resource rules (union of all resource rules).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verbs: Vec<String>,
    /// API groups of resource rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources of resource rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Non-resource URLs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// An APF FlowSchema, from whichever flowcontrol API version was served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct FlowSchema {
    /// Name.
    pub name: String,
    /// The API version it was read from (`flowcontrol.apiserver.k8s.io/v1beta2` … `/v1`).
    pub api_version: String,
    /// `metadata.uid`: what the `X-Kubernetes-PF-FlowSchema-UID` header carries.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// `spec.matchingPrecedence`.
    #[serde(default)]
    pub matching_precedence: i32,
    /// `spec.priorityLevelConfiguration.name`.
    pub priority_level: String,
    /// `spec.distinguisherMethod.type` (`ByUser`, `ByNamespace`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinguisher: Option<String>,
    /// `spec.rules`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<FlowRule>,
    /// `status.conditions` (`Dangling`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// An APF PriorityLevelConfiguration, from whichever flowcontrol API version was served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct PriorityLevel {
    /// Name.
    pub name: String,
    /// The API version it was read from.
    pub api_version: String,
    /// `metadata.uid`: what the `X-Kubernetes-PF-PriorityLevel-UID` header carries.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// `Limited` or `Exempt`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `nominalConcurrencyShares` (v1beta3/v1) or `assuredConcurrencyShares` (v1beta1/v1beta2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_shares: Option<i32>,
    /// `lendablePercent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lendable_percent: Option<i32>,
    /// `limitResponse.type`: `Queue` or `Reject`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_response: Option<String>,
    /// `limitResponse.queuing.queues`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<i32>,
    /// `limitResponse.queuing.handSize`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hand_size: Option<i32>,
    /// `limitResponse.queuing.queueLengthLimit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_length_limit: Option<i32>,
    /// `status.conditions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
