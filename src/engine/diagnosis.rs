//! The engine's output: one verdict per subject, and a summary. This is the JSON contract
//! (`-o json`, `docs/diagnosis.schema.json`) that CI gates and other tools read, so its field names
//! are stable and changes to them are versioned with `apiVersion`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bundle::{Gap, Kind, Rung};

/// `apiVersion` of a Diagnosis document.
pub const DIAGNOSIS_API_VERSION: &str = "extpath.dev/v1alpha2";

/// `apiVersion` of a waivers file (unchanged when the Diagnosis gained `problems`).
pub const WAIVERS_API_VERSION: &str = "extpath.dev/v1alpha1";
/// `kind` of a Diagnosis document.
pub const DIAGNOSIS_KIND: &str = "Diagnosis";

/// The layer that owns a failure (docs/diagnosis.md), or `Healthy` / `Inconclusive`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum Class {
    /// APIService registration, Service/endpoints, proxy TLS, discovery, extension server availability.
    Aggregation,
    /// Mutating/validating webhooks, CRD conversion webhooks.
    Admission,
    /// Authentication and authorization, in kube-apiserver and in the extension server.
    Auth,
    /// API Priority and Fairness, max-in-flight.
    #[serde(rename = "APF")]
    Apf,
    /// storage.Interface and etcd.
    Storage,
    /// Watch streams and the watch cache.
    Watch,
    /// Not this tool's: controllers, kubelet, the extension server's own backend.
    OutOfScope,
    /// Nothing wrong on the subject.
    Healthy,
    /// The evidence needed to judge the subject is missing.
    Inconclusive,
}

impl Class {
    /// Every class, in the order the documentation lists them.
    pub const ALL: [Class; 9] = [
        Class::Aggregation,
        Class::Admission,
        Class::Auth,
        Class::Apf,
        Class::Storage,
        Class::Watch,
        Class::OutOfScope,
        Class::Healthy,
        Class::Inconclusive,
    ];

    /// The name as written in rules and output (`APF`, `OutOfScope`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Aggregation => "Aggregation",
            Class::Admission => "Admission",
            Class::Auth => "Auth",
            Class::Apf => "APF",
            Class::Storage => "Storage",
            Class::Watch => "Watch",
            Class::OutOfScope => "OutOfScope",
            Class::Healthy => "Healthy",
            Class::Inconclusive => "Inconclusive",
        }
    }

    /// Parse a class name (case-insensitive).
    pub fn parse(s: &str) -> Option<Class> {
        Class::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s))
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How bad a verdict is. Ordered: `Info < Warning < Critical`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
    Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Healthy, or informational.
    #[default]
    Info,
    /// A risk, or degraded.
    Warning,
    /// Broken.
    Critical,
}

impl Severity {
    /// `info`, `warning`, `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a verdict is about.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum SubjectKind {
    /// An APIService, by name (`v1beta1.metrics.k8s.io`).
    #[serde(rename = "APIService")]
    ApiService,
    /// One validating webhook, by its `webhooks[].name`; `parent` is its configuration.
    ValidatingWebhook,
    /// One mutating webhook, by its `webhooks[].name`; `parent` is its configuration.
    MutatingWebhook,
    /// A CRD, by name.
    CustomResourceDefinition,
    /// An APF FlowSchema.
    FlowSchema,
    /// An APF PriorityLevelConfiguration.
    PriorityLevel,
    /// kube-apiserver as a whole (name `kube-apiserver`): cluster-wide findings.
    #[serde(rename = "APIServer")]
    ApiServer,
    /// etcd (name `etcd`).
    Etcd,
    /// One failing request known from client output or a probe.
    Request,
    /// A source of evidence a live collection could not read (name: its gap source, e.g.
    /// `objects/apiservices`): every subject it would have given is unjudged. Judged by the
    /// collection's own gaps, never by rules.
    Source,
}

impl SubjectKind {
    /// Every subject kind.
    pub const ALL: [SubjectKind; 10] = [
        SubjectKind::ApiService,
        SubjectKind::ValidatingWebhook,
        SubjectKind::MutatingWebhook,
        SubjectKind::CustomResourceDefinition,
        SubjectKind::FlowSchema,
        SubjectKind::PriorityLevel,
        SubjectKind::ApiServer,
        SubjectKind::Etcd,
        SubjectKind::Request,
        SubjectKind::Source,
    ];

    /// The name as written in rules and output.
    pub fn as_str(self) -> &'static str {
        match self {
            SubjectKind::ApiService => "APIService",
            SubjectKind::ValidatingWebhook => "ValidatingWebhook",
            SubjectKind::MutatingWebhook => "MutatingWebhook",
            SubjectKind::CustomResourceDefinition => "CustomResourceDefinition",
            SubjectKind::FlowSchema => "FlowSchema",
            SubjectKind::PriorityLevel => "PriorityLevel",
            SubjectKind::ApiServer => "APIServer",
            SubjectKind::Etcd => "Etcd",
            SubjectKind::Request => "Request",
            SubjectKind::Source => "Source",
        }
    }

    /// Parse a subject kind as people type it on a kubectl command line: the kind in any case
    /// (`APIService`, `apiservice`), its plural (`apiservices`), kubectl's short names where the
    /// resource has them (`crd`, `crds`), and `PriorityLevelConfiguration` (the resource whose
    /// name a `PriorityLevel` subject carries). Rule files accept only the exact kind; they check
    /// that themselves.
    pub fn parse(s: &str) -> Option<SubjectKind> {
        let exact = |t: &str| {
            SubjectKind::ALL
                .into_iter()
                .find(|k| k.as_str().eq_ignore_ascii_case(t))
        };
        let lower = s.to_ascii_lowercase();
        exact(&lower)
            .or_else(|| lower.strip_suffix('s').and_then(exact))
            .or(match lower.as_str() {
                "crd" | "crds" => Some(SubjectKind::CustomResourceDefinition),
                "prioritylevelconfiguration" | "prioritylevelconfigurations" => {
                    Some(SubjectKind::PriorityLevel)
                }
                _ => None,
            })
    }
}

impl SubjectKind {
    /// The subject kind an object of bundle kind `kind` is judged as, if the engine judges that
    /// kind (a Service or a Pod is evidence about a subject, never one itself).
    pub fn of_object(kind: &Kind) -> Option<SubjectKind> {
        match kind {
            Kind::ApiService => Some(SubjectKind::ApiService),
            Kind::ValidatingWebhook => Some(SubjectKind::ValidatingWebhook),
            Kind::MutatingWebhook => Some(SubjectKind::MutatingWebhook),
            Kind::CustomResourceDefinition => Some(SubjectKind::CustomResourceDefinition),
            Kind::FlowSchema => Some(SubjectKind::FlowSchema),
            Kind::Webhook | Kind::Service | Kind::Pod | Kind::ConfigMap | Kind::Deployment => None,
            // A hand-written bundle may spell a kind as kubectl accepts it (`apiservices`), or
            // name one only the engine has (`APIServer`): read as it always was.
            Kind::Other(s) => SubjectKind::parse(s),
        }
    }

    /// The bundle kind of the object a subject of this kind is, if it is one object (the API
    /// server, etcd, a request and a source are not).
    pub fn object_kind(self) -> Option<Kind> {
        match self {
            SubjectKind::ApiService => Some(Kind::ApiService),
            SubjectKind::ValidatingWebhook => Some(Kind::ValidatingWebhook),
            SubjectKind::MutatingWebhook => Some(Kind::MutatingWebhook),
            SubjectKind::CustomResourceDefinition => Some(Kind::CustomResourceDefinition),
            SubjectKind::FlowSchema => Some(Kind::FlowSchema),
            SubjectKind::PriorityLevel
            | SubjectKind::ApiServer
            | SubjectKind::Etcd
            | SubjectKind::Request
            | SubjectKind::Source => None,
        }
    }
}

impl std::fmt::Display for SubjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The subject of a verdict.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct Subject {
    /// Kind.
    pub kind: SubjectKind,
    /// Name.
    pub name: String,
    /// Namespace (always `null` for the current kinds; kept for namespaced subjects to come).
    pub namespace: Option<String>,
    /// The containing object: a webhook's configuration.
    pub parent: Option<String>,
}

impl Subject {
    /// A subject that is neither namespaced nor contained in another object: every kind but a
    /// webhook, which names its configuration as `parent`.
    pub fn new(kind: SubjectKind, name: impl Into<String>) -> Self {
        Subject {
            kind,
            name: name.into(),
            namespace: None,
            parent: None,
        }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// Whose step a rule's rung is: kube-apiserver's own, or the extension API server's behind an
/// APIService. Two servers authenticate and authorize an aggregated request — kube-apiserver the
/// user, then the extension server the aggregator's front-proxy identity (authn) and the user by a
/// SubjectAccessReview (delegated authz) — so a rung alone does not say whose step failed.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    /// kube-apiserver (its aggregator, admission and storage included).
    #[default]
    KubeApiserver,
    /// The extension API server behind an APIService.
    ExtensionApiserver,
}

impl Component {
    /// `kube_apiserver` or `extension_apiserver`, as rules write it (the fact model's log
    /// components are named the same way).
    pub fn as_str(self) -> &'static str {
        match self {
            Component::KubeApiserver => "kube_apiserver",
            Component::ExtensionApiserver => "extension_apiserver",
        }
    }

    /// Every component, the default first.
    pub const ALL: [Component; 2] = [Component::KubeApiserver, Component::ExtensionApiserver];

    /// Whether this is the default (left out of serialized hits).
    pub fn is_default(&self) -> bool {
        *self == Component::KubeApiserver
    }
}

impl std::fmt::Display for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule that fired on a subject, with the values of its evidence expressions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RuleHit {
    /// Rule id (`aggregation-service-missing`).
    pub id: String,
    /// The rule's class.
    pub class: Class,
    /// The rule's severity.
    pub severity: Severity,
    /// The rung the rule tests.
    pub rung: Rung,
    /// Whose step that rung is (left out for kube-apiserver's).
    #[serde(default, skip_serializing_if = "Component::is_default")]
    pub component: Component,
    /// The rule's summary, rendered for this subject.
    pub summary: String,
    /// Named evidence values, in the rule's order.
    pub evidence: BTreeMap<String, serde_json::Value>,
}

/// A class the verdict excludes, and the fact that excludes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RuledOut {
    /// The excluded class.
    pub class: Class,
    /// Why, in words that name the fact.
    pub because: String,
    /// The rule that ruled it out.
    pub rule: String,
}

/// A finding explained by an earlier failing rung.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Consequence {
    /// The rule that fired.
    pub rule: String,
    /// Its class.
    pub class: Class,
    /// Its rung.
    pub rung: Rung,
    /// Whose step that rung is (left out for kube-apiserver's).
    #[serde(default, skip_serializing_if = "Component::is_default")]
    pub component: Component,
    /// Its summary, rendered.
    pub summary: String,
}

/// A waiver that applied to a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AppliedWaiver {
    /// The waiver's reason.
    pub reason: String,
    /// Its expiry date.
    pub expires: String,
}

/// One verdict per subject.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// What it is about.
    pub subject: Subject,
    /// Objects it maps to (a Request's APIService, webhook or CRD; an APIService's Service).
    pub related: Vec<Subject>,
    /// The owning layer.
    pub class: Class,
    /// How bad.
    pub severity: Severity,
    /// 0..1: how strongly the evidence supports the class.
    pub confidence: f64,
    /// The rung of the deciding rule.
    pub rung: Option<Rung>,
    /// One sentence: the deciding rule's summary.
    pub summary: String,
    /// The rules that decided the verdict (same class and rung as the verdict), with evidence.
    pub rules: Vec<RuleHit>,
    /// Classes ruled out, and by which fact.
    pub ruled_out: Vec<RuledOut>,
    /// Findings explained by the earlier failing rung.
    pub consequences: Vec<Consequence>,
    /// Findings from evidence that never decides a verdict (e.g. the cumulative counters of a single
    /// metrics dump): they happened at some point in the process's life, not necessarily now.
    pub history: Vec<Consequence>,
    /// Commands to run next.
    pub next: Vec<String>,
    /// Set when a waiver matched; a waived verdict does not count toward `--fail-on`.
    pub waived: Option<AppliedWaiver>,
}

impl Verdict {
    /// A verdict on `subject` before any rule has spoken: Healthy, info, no confidence, nothing
    /// fired, ruled out or to run next. The classifier starts from it; so do hand-made verdicts.
    #[must_use]
    pub fn new(subject: Subject, related: Vec<Subject>) -> Verdict {
        Verdict {
            subject,
            related,
            class: Class::Healthy,
            severity: Severity::Info,
            confidence: 0.0,
            rung: None,
            summary: String::new(),
            rules: Vec::new(),
            ruled_out: Vec::new(),
            consequences: Vec::new(),
            history: Vec::new(),
            next: Vec::new(),
            waived: None,
        }
    }
}

/// Totals over all verdicts. Waived verdicts are counted apart: `subjects` = the sum of
/// `by_severity` + `waived` (the table's `Totals:` line says the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
pub struct Summary {
    /// Number of verdicts.
    pub subjects: usize,
    /// Verdicts not waived, per class.
    pub by_class: BTreeMap<String, usize>,
    /// Verdicts not waived, per severity.
    pub by_severity: BTreeMap<String, usize>,
    /// Waived verdicts (they count toward neither `by_class`, `by_severity` nor `worst`).
    #[serde(default)]
    pub waived: usize,
    /// The highest severity of any non-waived verdict (`Inconclusive` counts as warning).
    pub worst: Severity,
    /// Problems that are not waived.
    #[serde(default)]
    pub problems: usize,
    /// One line for humans: the most important verdict not waived, or "no findings".
    pub headline: String,
}

/// A waiver that matched nothing, or has expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WaiverNotice {
    /// The waiver's rule.
    pub rule: String,
    /// The waiver's subject.
    pub subject: String,
    /// `unmatched` or `expired`.
    pub problem: String,
    /// Its reason.
    pub reason: String,
    /// Its expiry date (`YYYY-MM-DD`).
    #[serde(default)]
    pub expires: String,
}

/// The engine's whole answer for one bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Diagnosis {
    /// `extpath.dev/v1alpha2` (v1alpha1 had no `problems`).
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    /// `Diagnosis`.
    pub kind: String,
    /// The time the evidence describes (the bundle's collection time).
    pub collected_at: Option<jiff::Timestamp>,
    /// The problems: root causes, each with the verdicts it explains, worst first (see
    /// `engine::problems`). Every verdict at warning or above that is not `Inconclusive` belongs
    /// to exactly one.
    pub problems: Vec<super::problems::Problem>,
    /// One per subject, most severe first.
    pub verdicts: Vec<Verdict>,
    /// The bundle's gaps: what the verdicts could not see.
    pub gaps: Vec<Gap>,
    /// Waivers that matched nothing or have expired.
    pub waiver_notices: Vec<WaiverNotice>,
    /// Totals.
    pub summary: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_kinds_and_bundle_kinds_map_both_ways() {
        for s in SubjectKind::ALL {
            if let Some(k) = s.object_kind() {
                assert_eq!(SubjectKind::of_object(&k), Some(s), "{s}");
                assert_eq!(k.as_str(), s.as_str());
            }
        }
        // A judged kind is judged under the subject kind of the same name; evidence-only kinds
        // (Service, Pod, an unknown webhook) are never subjects.
        for k in Kind::KNOWN {
            assert_eq!(
                SubjectKind::of_object(k),
                SubjectKind::parse(k.as_str()),
                "{k}"
            );
        }
        assert_eq!(SubjectKind::of_object(&Kind::Service), None);
        assert_eq!(SubjectKind::of_object(&Kind::Webhook), None);
        // As when kinds were strings, a kind spelled as kubectl accepts it still names a subject.
        assert_eq!(
            SubjectKind::of_object(&Kind::parse("apiservices")),
            Some(SubjectKind::ApiService)
        );
    }
}
