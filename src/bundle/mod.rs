//! The evidence model: everything extpath knows about a cluster at one moment, as one serde document.
//!
//! An [`EvidenceBundle`] is the only input of the rule engine. It is produced by live collection
//! (`collect`), by importing the raw files an on-call engineer already has (`import --raw`, see
//! [`raw`]), or loaded from a saved YAML/JSON file ([`load`]). It can be attached to an incident and
//! analysed elsewhere, so it is versioned (`apiVersion: extpath.dev/v1alpha1`) and documented field by
//! field in `docs/bundle.md`, with a JSON Schema generated from these types (`docs/bundle.schema.json`).
//!
//! What this module owns: the types, their serialisation, the two-phase loader, the mapping from
//! Kubernetes API objects into the bundle's own, smaller types ([`from_k8s`]) and back
//! ([`to_k8s`], for a replayed recording), and what such a replay carries beside the API
//! ([`carried`]). What it does not own:
//! fetching anything (that is `collect`), or judging anything (that is `engine`).
//!
//! The bundle keeps its own types instead of raw Kubernetes objects for two reasons: the same fields
//! arrive from several API versions (flowcontrol v1beta2…v1, Endpoints vs EndpointSlices) and must look
//! the same to rules; and a bundle must never carry secrets, so it only has fields that were chosen.
//!
//! Field names are snake_case, like the `Diagnosis` document; only `apiVersion` and `kind` follow the
//! Kubernetes spelling, so that a reader recognises the document type.

pub mod carried;
pub mod certs;
pub mod from_k8s;
pub mod hops;
pub mod load;
pub mod metrics;
pub mod objects;
pub mod observations;
pub mod probes;
pub mod raw;
pub mod rbac;
pub mod to_k8s;
pub mod trace;
pub mod vocab;
pub mod yaml_limits;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use certs::{CertOrigin, CertSource, Certificate, Verification};
pub use hops::{HopLayer, HopStep, TimedCall, TimedHop};
pub use load::{BundleError, load_bundle, load_bundle_str};
pub use metrics::{
    MetricFamily, MetricKind, MetricSeries, MetricTarget, MetricValue, MetricsSource,
};
pub use objects::*;
pub use observations::{
    ApfPriorityLevelState, Event, Gap, GapReason, HealthCheck, HealthCheckItem, LogFinding,
};
pub use probes::{Probe, ProbeOrigin, Rung, StatusBody, StatusCause, WatchOutcome};
pub use rbac::{PolicyRule, RbacBinding, RbacRole, RbacSubject, RoleRef};
pub use vocab::{FailurePolicy, Kind, MatchPolicy, SideEffects, WebhookDefaults};

/// `apiVersion` of every bundle this version of extpath writes and reads.
pub const API_VERSION: &str = "extpath.dev/v1alpha1";
/// `kind` of a bundle document.
pub const KIND: &str = "EvidenceBundle";

/// Everything collected or imported about one cluster at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct EvidenceBundle {
    /// Always `extpath.dev/v1alpha1`.
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// Always `EvidenceBundle`.
    pub kind: String,
    /// How, when and from where the evidence was gathered.
    pub collection: Collection,
    /// APIServices (apiregistration.k8s.io/v1), local and remote.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_services: Vec<ApiService>,
    /// Services referenced by APIServices and webhooks (or all, when collected broadly).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<Service>,
    /// core/v1 Endpoints: what the aggregator reads before Kubernetes 1.34.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<Endpoints>,
    /// discovery.k8s.io/v1 EndpointSlices: what the aggregator reads from 1.34 on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoint_slices: Vec<EndpointSlice>,
    /// Pods behind those Services, readiness only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<Pod>,
    /// One entry per webhook (not per configuration) of every validating and mutating configuration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<Webhook>,
    /// CustomResourceDefinitions, with their versions and conversion settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crds: Vec<Crd>,
    /// APF FlowSchemas of whatever flowcontrol version the server served.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_schemas: Vec<FlowSchema>,
    /// APF PriorityLevelConfigurations of whatever flowcontrol version the server served.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub priority_levels: Vec<PriorityLevel>,
    /// rbac.authorization.k8s.io/v1 ClusterRoles: with the bindings, what the identity of an
    /// extension API server may do (create SubjectAccessReviews and TokenReviews, read the
    /// `extension-apiserver-authentication` ConfigMap).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_roles: Vec<RbacRole>,
    /// rbac.authorization.k8s.io/v1 ClusterRoleBindings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_role_bindings: Vec<RbacBinding>,
    /// rbac.authorization.k8s.io/v1 Roles of `kube-system` (where the
    /// `extension-apiserver-authentication` ConfigMap and its reader Role live).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RbacRole>,
    /// rbac.authorization.k8s.io/v1 RoleBindings of `kube-system`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub role_bindings: Vec<RbacBinding>,
    /// Every certificate seen: decoded caBundles, served chains, PEM files supplied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificates: Vec<Certificate>,
    /// Requests whose outcome is known: sent by extpath (probes) or seen in client output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<Probe>,
    /// Metrics, one entry per scraped target (kube-apiserver, etcd, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<MetricsSource>,
    /// `/readyz?verbose`, `/livez?verbose`, etcd health results.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_checks: Vec<HealthCheck>,
    /// State of APF priority levels from `/debug/api_priority_and_fairness/dump_*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apf_state: Vec<ApfPriorityLevelState>,
    /// Known error lines found in component logs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_findings: Vec<LogFinding>,
    /// Work servers timed and logged: an API server's `Trace[…]` blocks (a request, a webhook
    /// call, a storage call, with their steps) and etcd's `took too long` warnings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timed_hops: Vec<TimedHop>,
    /// Kubernetes Events about the objects above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    /// What could not be collected or was not supplied, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gaps: Vec<Gap>,
}

impl EvidenceBundle {
    /// An empty bundle with the right `apiVersion`/`kind` and this tool's version recorded.
    pub fn new(source: CollectionSource) -> Self {
        EvidenceBundle {
            api_version: API_VERSION.to_string(),
            kind: KIND.to_string(),
            collection: Collection {
                tool_version: crate::VERSION.to_string(),
                source,
                ..Collection::default()
            },
            ..EvidenceBundle::default()
        }
    }

    /// The APIService of that name, if the bundle has it.
    pub fn api_service(&self, name: &str) -> Option<&ApiService> {
        self.api_services.iter().find(|a| a.name == name)
    }

    /// The Service `namespace/name`, if the bundle has it.
    pub fn service(&self, namespace: &str, name: &str) -> Option<&Service> {
        self.services
            .iter()
            .find(|s| s.namespace == namespace && s.name == name)
    }

    /// The metrics of one target (the first source for it, which is the only one a valid bundle has).
    pub fn metrics_for(&self, target: MetricTarget) -> Option<&MetricsSource> {
        self.metrics.iter().find(|m| m.target == target)
    }

    /// Serialise as YAML.
    pub fn to_yaml(&self) -> anyhow::Result<String> {
        Ok(serde_saphyr::to_string(self)?)
    }

    /// Serialise as pretty JSON.
    pub fn to_json(&self) -> anyhow::Result<String> {
        Ok(serde_json::to_string_pretty(self)?)
    }
}

/// Collection facts: who gathered the evidence, when, and over which window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct Collection {
    /// Version of extpath that wrote the bundle (`kubectl-extpath --version`).
    pub tool_version: String,
    /// kube-apiserver `/version`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_version: Option<ServerVersion>,
    /// The moment the evidence describes. Time-dependent checks (certificate expiry) are judged at
    /// this time, never at analysis time. For raw imports it is the latest time the evidence itself
    /// carries (HTTP `date:` headers, log timestamps); see `collected_at_basis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collected_at: Option<jiff::Timestamp>,
    /// Where `collected_at` came from: `clock` (live collection), `evidence` (the latest timestamp
    /// found in imported files), `import` (nothing in the files was dated; the import time was used)
    /// or `recording` (a collection from a replayed recording, merged with what the replay carried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collected_at_basis: Option<TimeBasis>,
    /// Live cluster, raw files, or a replayed bundle.
    #[serde(default)]
    pub source: CollectionSource,
    /// The window over which metric rates were computed, when two scrapes exist.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_window: Option<Window>,
}

/// Where the collection time of a bundle comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TimeBasis {
    /// The collector's clock during a live collection.
    Clock,
    /// The latest timestamp carried by the imported evidence.
    Evidence,
    /// Nothing imported was dated: the time of the import.
    Import,
    /// The moment of a recording that a replayed server served (`replay serve --bundle`): a
    /// collection from the replay describes that moment, and `--merge` of the evidence the replay
    /// carried sets it.
    Recording,
}

/// kube-apiserver `/version`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ServerVersion {
    /// e.g. `v1.30.14`.
    pub git_version: String,
    /// e.g. `1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub major: String,
    /// e.g. `30` (sometimes `30+` on managed clusters).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub minor: String,
}

impl ServerVersion {
    /// `(major, minor)` as numbers, ignoring a trailing `+`; from `git_version` when the fields are empty.
    pub fn major_minor(&self) -> Option<(u32, u32)> {
        let digits = |s: &str| s.trim_end_matches('+').parse::<u32>().ok();
        if let (Some(a), Some(b)) = (digits(&self.major), digits(&self.minor)) {
            return Some((a, b));
        }
        let v = self.git_version.trim_start_matches('v');
        let mut parts = v.split(['.', '-', '+']);
        Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
    }
}

/// A time window (metrics are turned into rates over it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// First scrape.
    pub start: jiff::Timestamp,
    /// Second scrape.
    pub end: jiff::Timestamp,
}

impl Window {
    /// Length of the window in seconds (never negative).
    pub fn seconds(&self) -> f64 {
        let d = self.end.as_millisecond() - self.start.as_millisecond();
        (d.max(0) as f64) / 1000.0
    }
}

/// Where the evidence came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum CollectionSource {
    /// Collected from a live API server.
    Live {
        /// The API server URL.
        server: String,
        /// The kubeconfig context used, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<String>,
    },
    /// Imported from raw files (`import --raw`, `analyze --raw`).
    Raw {
        /// The paths given on the command line.
        paths: Vec<String>,
    },
    /// Built by hand or by a tool other than extpath.
    #[default]
    Unknown,
}

/// A reference from one piece of evidence to the Kubernetes object it concerns.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ObjectRef {
    /// Kind, e.g. `APIService`, `ValidatingWebhook`, `CustomResourceDefinition`, `Service`.
    pub kind: Kind,
    /// Object name (for webhooks, the webhook's own `webhooks[].name`).
    pub name: String,
    /// Namespace, for namespaced objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ObjectRef {
    /// A cluster-scoped reference.
    pub fn cluster(kind: Kind, name: &str) -> Self {
        ObjectRef {
            kind,
            name: name.to_string(),
            namespace: None,
        }
    }
    /// A namespaced reference.
    pub fn namespaced(kind: Kind, namespace: &str, name: &str) -> Self {
        ObjectRef {
            kind,
            name: name.to_string(),
            namespace: Some(namespace.to_string()),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

/// The JSON Schema of the bundle, as checked in at `docs/bundle.schema.json`.
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(EvidenceBundle);
    serde_json::to_value(schema).expect("a JSON Schema is always representable as JSON")
}
