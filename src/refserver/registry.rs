//! Which resources this server serves itself: the built-in kinds, and the kinds CRDs in the store
//! define (one entry per served version).
//!
//! It owns the resource table (group, version, plural, kind, scope, short names, verbs) that
//! discovery, the REST handlers and metrics read, and the Go type name kube-apiserver puts in the
//! `type` label of `etcd_request_duration_seconds` (`*core.ConfigMap`). It does not own aggregated
//! group/versions: those are APIServices with a `spec.service`, which the aggregator proxies.

use serde_json::Value;

use super::store::{Key, Store};

/// One served resource at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// Group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural.
    pub resource: String,
    /// Singular.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names (`cm`, `svc`).
    pub short_names: Vec<String>,
    /// Go type for etcd metrics.
    // The internal type the etcd3 store is built on, not the served version, so every version of
    // one resource shares it (`*core.ConfigMap`), and every custom resource reads
    // `*unstructured.Unstructured` — which is why storage metrics cannot tell two CRDs apart
    // (both spellings appear in the captures' `/metrics`).
    pub go_type: String,
    /// Whether this is a custom resource (served from a CRD).
    pub custom: bool,
    /// The version objects are stored at (differs from `version` for CRDs with several versions).
    pub storage_version: String,
    /// Subresources (`status`).
    pub subresources: Vec<String>,
}

impl ResourceDef {
    /// `group/version` (`v1` for core).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// Verbs of every resource served here.
pub const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

struct Builtin {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    go_type: &'static str,
    status: bool,
}

const BUILTINS: &[Builtin] = &[
    // Served so that kubectl can map the manifests in deploy/: ServiceAccounts, Deployments and
    // CronJobs are stored and listed like any object; no controller acts on them.
    Builtin {
        group: "",
        version: "v1",
        resource: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        namespaced: true,
        short: &["sa"],
        go_type: "*core.ServiceAccount",
        status: false,
    },
    Builtin {
        group: "apps",
        version: "v1",
        resource: "deployments",
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        short: &["deploy"],
        go_type: "*apps.Deployment",
        status: true,
    },
    Builtin {
        group: "batch",
        version: "v1",
        resource: "cronjobs",
        singular: "cronjob",
        kind: "CronJob",
        namespaced: true,
        short: &["cj"],
        go_type: "*batch.CronJob",
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        namespaced: true,
        short: &["cm"],
        go_type: "*core.ConfigMap",
        status: false,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "endpoints",
        singular: "endpoints",
        kind: "Endpoints",
        namespaced: true,
        short: &["ep"],
        go_type: "*core.Endpoints",
        status: false,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short: &["ev"],
        go_type: "*core.Event",
        status: false,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short: &["ns"],
        go_type: "*core.Namespace",
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short: &["po"],
        go_type: "*core.Pod",
        status: true,
    },
    Builtin {
        group: "",
        version: "v1",
        resource: "services",
        singular: "service",
        kind: "Service",
        namespaced: true,
        short: &["svc"],
        go_type: "*core.Service",
        status: true,
    },
    Builtin {
        group: "admissionregistration.k8s.io",
        version: "v1",
        resource: "mutatingwebhookconfigurations",
        singular: "mutatingwebhookconfiguration",
        kind: "MutatingWebhookConfiguration",
        namespaced: false,
        short: &[],
        go_type: "*admissionregistration.MutatingWebhookConfiguration",
        status: false,
    },
    Builtin {
        group: "admissionregistration.k8s.io",
        version: "v1",
        resource: "validatingwebhookconfigurations",
        singular: "validatingwebhookconfiguration",
        kind: "ValidatingWebhookConfiguration",
        namespaced: false,
        short: &[],
        go_type: "*admissionregistration.ValidatingWebhookConfiguration",
        status: false,
    },
    Builtin {
        group: "apiextensions.k8s.io",
        version: "v1",
        resource: "customresourcedefinitions",
        singular: "customresourcedefinition",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short: &["crd", "crds"],
        go_type: "*apiextensions.CustomResourceDefinition",
        status: true,
    },
    Builtin {
        group: "apiregistration.k8s.io",
        version: "v1",
        resource: "apiservices",
        singular: "apiservice",
        kind: "APIService",
        namespaced: false,
        short: &[],
        go_type: "*apiregistration.APIService",
        status: true,
    },
    Builtin {
        group: "discovery.k8s.io",
        version: "v1",
        resource: "endpointslices",
        singular: "endpointslice",
        kind: "EndpointSlice",
        namespaced: true,
        short: &[],
        go_type: "*discovery.EndpointSlice",
        status: false,
    },
    Builtin {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        resource: "flowschemas",
        singular: "flowschema",
        kind: "FlowSchema",
        namespaced: false,
        short: &[],
        go_type: "*flowcontrol.FlowSchema",
        status: true,
    },
    Builtin {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1",
        resource: "prioritylevelconfigurations",
        singular: "prioritylevelconfiguration",
        kind: "PriorityLevelConfiguration",
        namespaced: false,
        short: &[],
        go_type: "*flowcontrol.PriorityLevelConfiguration",
        status: true,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "clusterroles",
        singular: "clusterrole",
        kind: "ClusterRole",
        namespaced: false,
        short: &[],
        go_type: "*rbac.ClusterRole",
        status: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "clusterrolebindings",
        singular: "clusterrolebinding",
        kind: "ClusterRoleBinding",
        namespaced: false,
        short: &[],
        go_type: "*rbac.ClusterRoleBinding",
        status: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "roles",
        singular: "role",
        kind: "Role",
        namespaced: true,
        short: &[],
        go_type: "*rbac.Role",
        status: false,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        resource: "rolebindings",
        singular: "rolebinding",
        kind: "RoleBinding",
        namespaced: true,
        short: &[],
        go_type: "*rbac.RoleBinding",
        status: false,
    },
];

/// The built-in group/versions, each with the groupPriorityMinimum/versionPriority kube-apiserver
/// gives their Local APIService.
// These order `/apis` discovery (highest group priority first), so kubectl resolves short names
// and kinds the way it does against a real server. The values match the Local APIServices of
// captures/cases/00-healthy/apiservices.json (a 1.24 server); flowcontrol v1 is newer than the
// captures, which serve v1beta1/v1beta2 at 16100.
pub const BUILTIN_GROUP_VERSIONS: &[(&str, &str, i64, i64)] = &[
    ("", "v1", 18000, 1),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("apps", "v1", 17800, 15),
    ("batch", "v1", 17400, 15),
    ("apiregistration.k8s.io", "v1", 18000, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 20),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
];

fn builtin_def(b: &Builtin) -> ResourceDef {
    ResourceDef {
        group: b.group.into(),
        version: b.version.into(),
        resource: b.resource.into(),
        singular: b.singular.into(),
        kind: b.kind.into(),
        namespaced: b.namespaced,
        short_names: b.short.iter().map(|s| s.to_string()).collect(),
        go_type: b.go_type.into(),
        custom: false,
        storage_version: b.version.into(),
        subresources: if b.status {
            vec!["status".into()]
        } else {
            vec![]
        },
    }
}

/// Every built-in resource.
/// A built-in resource by `apiVersion` and kind (no store access).
pub fn builtin_by_kind(api_version: &str, kind: &str) -> Option<ResourceDef> {
    BUILTINS
        .iter()
        .map(builtin_def)
        .find(|d| d.api_version() == api_version && d.kind == kind)
}

pub fn builtins() -> Vec<ResourceDef> {
    BUILTINS.iter().map(builtin_def).collect()
}

/// The resources one CRD object defines (one per served version).
pub fn crd_resources(crd: &Value) -> Vec<ResourceDef> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default();
    let kind = names["kind"].as_str().unwrap_or_default();
    let singular = names["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_ascii_lowercase());
    let short: Vec<String> = names["shortNames"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let storage = versions
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))
        .and_then(|v| v["name"].as_str())
        .unwrap_or_default()
        .to_string();
    // A version with `served: false` stays in the CRD (objects may still be stored at it) but is
    // not in discovery and its paths 404, as in apiextensions-apiserver.
    versions
        .iter()
        .filter(|v| v["served"].as_bool() != Some(false))
        .filter_map(|v| {
            let version = v["name"].as_str()?;
            let status = v.pointer("/subresources/status").is_some();
            Some(ResourceDef {
                group: group.into(),
                version: version.into(),
                resource: plural.into(),
                singular: singular.clone(),
                kind: kind.into(),
                namespaced,
                short_names: short.clone(),
                go_type: "*unstructured.Unstructured".into(),
                custom: true,
                storage_version: storage.clone(),
                subresources: if status {
                    vec!["status".into()]
                } else {
                    vec![]
                },
            })
        })
        .collect()
}

/// Every resource served at this moment: built-ins and what the stored CRDs define.
pub fn all(store: &Store) -> Vec<ResourceDef> {
    let mut out = builtins();
    let (crds, _) = store.list("apiextensions.k8s.io", "customresourcedefinitions", None);
    for crd in &crds {
        out.extend(crd_resources(crd));
    }
    out
}

/// The stored CRD that defines `plural` in `group`. The API server requires a CRD's name to be
/// `<plural>.<group>` (see [`crd_name_error`]), so this is one lookup, not a scan of every CRD.
pub fn crd_for(store: &Store, group: &str, plural: &str) -> Option<Value> {
    store.get(&Key::new(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "",
        &format!("{plural}.{group}"),
    ))
}

/// Why a CRD's name is not the one the API server requires, in its words, if it is not.
pub fn crd_name_error(crd: &Value) -> Option<String> {
    let name = crd.pointer("/metadata/name").and_then(Value::as_str)?;
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("");
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    (name != format!("{plural}.{group}")).then(|| {
        format!(
            "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
        )
    })
}

/// Look a resource up by group, version and plural.
pub fn resolve(store: &Store, group: &str, version: &str, resource: &str) -> Option<ResourceDef> {
    if let Some(b) = BUILTINS
        .iter()
        .find(|b| b.group == group && b.version == version && b.resource == resource)
    {
        return Some(builtin_def(b));
    }
    crd_resources(&crd_for(store, group, resource)?)
        .into_iter()
        .find(|d| d.version == version)
}

/// Every resource served in one group/version.
pub fn in_group_version(store: &Store, group: &str, version: &str) -> Vec<ResourceDef> {
    all(store)
        .into_iter()
        .filter(|d| d.group == group && d.version == version)
        .collect()
}

/// The resource of a kind at a group/version (used when loading scenario objects).
pub fn by_kind(store: &Store, api_version: &str, kind: &str) -> Option<ResourceDef> {
    all(store)
        .into_iter()
        .find(|d| d.api_version() == api_version && d.kind == kind)
}
