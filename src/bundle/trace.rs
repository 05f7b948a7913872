//! The observed trace of one reproduced request (`why`): how its path was resolved — what the
//! method and path address, what serves them (kube-apiserver, a CRD, an extension server behind an
//! APIService), which admission webhooks a write is sent to and which a selector leaves out, which
//! FlowSchema classifies the user — and the [`Investigation`] that holds it beside the focused
//! [`EvidenceBundle`].
//!
//! What this module owns: the types, as evidence (serde, no I/O). What it does not own: reading a
//! method and path or asking the cluster (that is `collect::why`), deciding which rung of the path
//! broke (`engine::why`), or drawing it (`report::why`).

use serde::{Deserialize, Serialize};

use super::{EvidenceBundle, Probe};

/// How the request is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// GET of an object or a collection, as given.
    Get,
    /// GET of a collection (a path naming an object is refused).
    List,
    /// GET with `watch=1`, read for a short time.
    Watch,
    /// POST with `dryRun=All` (never stored).
    DryRunCreate,
    /// PUT with `dryRun=All` (never stored).
    DryRunUpdate,
}

impl Method {
    /// The HTTP method on the wire.
    pub fn http(self) -> http::Method {
        match self {
            Method::Get | Method::List | Method::Watch => http::Method::GET,
            Method::DryRunCreate => http::Method::POST,
            Method::DryRunUpdate => http::Method::PUT,
        }
    }

    /// Whether the request is a (dry-run) write that goes through admission.
    pub fn is_write(self) -> bool {
        matches!(self, Method::DryRunCreate | Method::DryRunUpdate)
    }

    /// The admission operation of a write (`CREATE`, `UPDATE`).
    pub fn operation(self) -> Option<&'static str> {
        match self {
            Method::DryRunCreate => Some("CREATE"),
            Method::DryRunUpdate => Some("UPDATE"),
            _ => None,
        }
    }
}

/// A resource a path addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ResourcePath {
    /// API group; `""` for the core group (`/api/v1`).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace, for namespaced requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Resource (plural, lowercase).
    pub resource: String,
    /// Object name, when the path names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Subresource (`status`, `log`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
}

impl ResourcePath {
    /// `resource` or `resource/subresource`, as RBAC, APF and webhook rules spell it.
    pub fn resource_with_subresource(&self) -> String {
        match &self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.clone(),
        }
    }

    /// `group/version`, or `version` for the core group.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Addressed {
    /// A discovery document: `/api`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`, `/api/v1`.
    Discovery {
        /// The group (`""` for `/api…` and `/apis`).
        group: String,
        /// The version, when the path names one.
        #[serde(skip_serializing_if = "Option::is_none")]
        version: Option<String>,
    },
    /// A resource or collection.
    Resource(ResourcePath),
    /// A non-resource URL (`/healthz`, `/metrics`, `/version`, `/openapi/v2`).
    NonResource,
}

/// What serves the addressed path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Serving {
    /// kube-apiserver's own handlers (a built-in resource, discovery, a non-resource URL).
    BuiltIn,
    /// A custom resource, served in process by the apiextensions handler.
    CustomResource,
    /// An extension server behind an APIService: the aggregator proxies the request.
    Aggregated,
    /// A non-resource URL (`/healthz`, `/metrics`, …).
    NonResource,
    /// The group/version is not registered (no APIService for it): the request cannot be routed.
    Unregistered,
    /// The APIServices could not be read.
    Unknown,
}

/// The CRD of a custom resource path, and what its versions mean for this request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrdRoute {
    /// CRD name, `<plural>.<group>`.
    pub name: String,
    /// The version the request asks for.
    pub requested_version: String,
    /// Whether that version is served.
    pub served: bool,
    /// The version objects are written in.
    pub storage_version: String,
    /// `status.storedVersions`.
    pub stored_versions: Vec<String>,
    /// `spec.conversion.strategy` (`None`, `Webhook`).
    pub strategy: String,
    /// Whether the request involves the conversion webhook: it converts through a webhook and the
    /// requested version is not the only one objects are stored in.
    pub converts: bool,
}

/// The user a request is sent as, as far as it is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// Groups (with `system:authenticated`).
    pub groups: Vec<String>,
    /// Where this came from (`--as`).
    pub source: String,
}

/// The FlowSchema that matched, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowMatch {
    /// FlowSchema name.
    pub name: String,
    /// Its `metadata.uid` (what `X-Kubernetes-PF-FlowSchema-UID` carries).
    pub uid: String,
    /// `matchingPrecedence`.
    pub precedence: i64,
    /// The priority level it assigns.
    pub priority_level: String,
    /// Which subject and rule matched, in words.
    pub reason: String,
    /// How many schemas with a lower precedence were tried first.
    pub tried_before: usize,
}

/// Whether a webhook is called for a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The API server calls it.
    Called,
    /// Its rules match, but a selector leaves the request out.
    Excluded,
    /// Its rules do not cover this operation and resource.
    NotInRules,
    /// Its rules match but the namespace's labels could not be read to judge its selector.
    Unknown,
}

/// A webhook's decision with the reason in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookMatch {
    /// `ValidatingWebhook` or `MutatingWebhook`.
    pub kind: super::Kind,
    /// The webhook's name.
    pub name: String,
    /// Its configuration.
    pub configuration: String,
    /// Called or not.
    pub decision: Decision,
    /// Why, in words.
    pub reason: String,
}

/// How the request's path was resolved: what serves it, and what along it matches the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// How it was sent.
    pub method: Method,
    /// The Kubernetes verb.
    pub verb: String,
    /// What the path addresses.
    pub addressed: Addressed,
    /// What serves it.
    pub serving: Serving,
    /// The user, when known (`--as`; a token or certificate does not say whose it is without a
    /// write, and `why` sends none but the dry run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<UserInfo>,
    /// The remote APIService of an aggregated path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_service: Option<String>,
    /// The CRD of a custom resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crd: Option<CrdRoute>,
    /// Webhooks whose rules cover a write: called, or left out by a selector, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhooks: Vec<WebhookMatch>,
    /// How many other webhooks' rules do not cover it.
    pub webhooks_not_in_rules: usize,
    /// The FlowSchema that matches the user and request (APF's own matching, done here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_schema: Option<FlowMatch>,
    /// The FlowSchema whose UID the response's `X-Kubernetes-PF-FlowSchema-UID` carried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_schema_from_header: Option<String>,
    /// Length of the metrics window around the request, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<f64>,
}

/// The evidence of one reproduced request.
pub struct Investigation {
    /// Only this path's objects, the request as a probe, the metrics window around it, gaps.
    pub bundle: EvidenceBundle,
    /// Index of the reproduced request in `bundle.probes`.
    pub request: usize,
    /// How the path was resolved.
    pub trace: Trace,
}

impl Investigation {
    /// The reproduced request.
    pub fn probe(&self) -> &Probe {
        &self.bundle.probes[self.request]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trace is read back as written: a `why -o json` document's `trace` is evidence that can
    /// be loaded again, with what it leaves out (an empty list, an unknown user) defaulted.
    #[test]
    fn a_trace_reads_back_as_written() {
        let trace = Trace {
            method: Method::DryRunCreate,
            verb: "create".into(),
            addressed: Addressed::Resource(ResourcePath {
                group: "stable.example.com".into(),
                version: "v1".into(),
                namespace: Some("team-a".into()),
                resource: "crontabs".into(),
                name: None,
                subresource: None,
            }),
            serving: Serving::CustomResource,
            user: None,
            api_service: None,
            crd: None,
            webhooks: Vec::new(),
            webhooks_not_in_rules: 2,
            flow_schema: None,
            flow_schema_from_header: Some("global-default".into()),
            window_seconds: Some(1.5),
        };
        let text = serde_json::to_string(&trace).unwrap();
        assert!(!text.contains("webhooks\""), "{text}");
        let back: Trace = serde_json::from_str(&text).unwrap();
        assert_eq!(back, trace);
    }
}
