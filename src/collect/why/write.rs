//! `why --dry-run -f OBJECT.yaml`: from an object file to the server-side dry-run write that sends it.
//!
//! The file is read (YAML or JSON, one object), its `apiVersion`/`kind` are looked up in the
//! server's discovery document to find the resource and whether it is namespaced, and the object is
//! looked up by name: a create when it does not exist, an update (carrying the current
//! `resourceVersion` when the file has none, as custom resources require) when it does. Either way
//! the target carries `dryRun=All`: the API server runs authentication, authorization, admission and
//! validation, and stores nothing.
//!
//! Planning never decides that the API server is unreachable: that is decided before, by whether it
//! answers anything at all ([`super::open_window`]). A server that answers `/version` but hangs on
//! the object (etcd down) or on the discovery document is a server with a problem to diagnose, so
//! what planning could not learn becomes a [`Gap`] and the write is still sent: a look-up of the
//! object that fails (timeout, 5xx, 403) makes it a create; a discovery document that does not
//! answer (anything but a 404) makes the resource the guess kubectl makes from the kind (lowercase,
//! plural), namespaced when the file names a namespace.
//!
//! A file that cannot be read or parsed, or names an API version (404) or a kind the server does
//! not serve, is bad input ([`PlanError::Input`], exit code 2).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::target::{Method, Target};
use crate::bundle::Gap;
use crate::collect::fetch::{FetchError, Fetcher};

/// The object of `-f`, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectFile {
    /// The whole object.
    pub value: Value,
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`, when set.
    pub name: Option<String>,
    /// `metadata.namespace`, when set.
    pub namespace: Option<String>,
    /// `metadata.labels` (what webhook object selectors match).
    pub labels: BTreeMap<String, String>,
}

/// Why a write cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The file or the kind it names is unusable (exit code 2).
    #[error("{0}")]
    Input(String),
}

/// A planned dry-run write.
#[derive(Debug, Clone)]
pub struct PlannedWrite {
    /// Method (create or update) and path, with `dryRun=All`.
    pub target: Target,
    /// The object to send.
    pub body: Vec<u8>,
    /// What planning could not learn (the discovery document, whether the object exists).
    pub gaps: Vec<Gap>,
}

/// Read and check an object file.
///
/// # Errors
/// [`PlanError::Input`] naming the file: unreadable, not YAML/JSON, not one object, or without
/// `apiVersion`, `kind` or a name.
pub fn read_object(path: &Path) -> Result<ObjectFile, PlanError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| PlanError::Input(format!("{}: cannot read: {e}", path.display())))?;
    parse_object(&text, &path.display().to_string())
}

/// Parse the text of an object file; `origin` names it in errors.
///
/// # Errors
/// As [`read_object`].
pub fn parse_object(text: &str, origin: &str) -> Result<ObjectFile, PlanError> {
    let bad = |why: String| PlanError::Input(format!("{origin}: {why}"));
    let docs: Vec<&str> = text
        .split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#') && l != "---")
        })
        .collect();
    if docs.len() > 1 {
        return Err(bad(format!(
            "{} YAML documents; why sends one object (split the file)",
            docs.len()
        )));
    }
    let value: Value = serde_saphyr::from_str(text).map_err(|e| bad(e.to_string()))?;
    if !value.is_object() {
        return Err(bad("not a Kubernetes object (expected a mapping)".into()));
    }
    let field = |p: &str| {
        value
            .pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let api_version = field("/apiVersion").ok_or_else(|| bad("no apiVersion".into()))?;
    let kind = field("/kind").ok_or_else(|| bad("no kind".into()))?;
    if kind.ends_with("List") {
        return Err(bad(format!("{kind}: why sends one object, not a list")));
    }
    let name = field("/metadata/name");
    if name.is_none() && field("/metadata/generateName").is_none() {
        return Err(bad("metadata.name (or generateName) is required".into()));
    }
    // Labels are kept apart because webhook `objectSelector`s match them: which webhooks the
    // write is sent to depends on them, before any call is made.
    let labels = value
        .pointer("/metadata/labels")
        .and_then(|l| serde_json::from_value::<BTreeMap<String, String>>(l.clone()).ok())
        .unwrap_or_default();
    Ok(ObjectFile {
        namespace: field("/metadata/namespace"),
        api_version,
        kind,
        name,
        labels,
        value,
    })
}

/// The group/version discovery path of an `apiVersion`.
fn discovery_path(api_version: &str) -> String {
    match api_version.split_once('/') {
        Some((g, v)) => format!("/apis/{g}/{v}"),
        None => format!("/api/{api_version}"),
    }
}

/// The resource (plural) serving `kind` in an APIResourceList, and whether it is namespaced.
pub fn resource_for_kind(doc: &Value, kind: &str) -> Option<(String, bool)> {
    doc.get("resources")?.as_array()?.iter().find_map(|r| {
        let name = r.get("name")?.as_str()?;
        // Subresources (`namespaces/status`) carry their parent's kind in discovery; only the
        // resource itself can be created or updated with a whole object.
        (r.get("kind")?.as_str()? == kind && !name.contains('/')).then(|| {
            (
                name.to_string(),
                r.get("namespaced")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            )
        })
    })
}

use crate::semantics::kind_resource::guess_resource;

/// The dry-run write of `obj`: the target, the body to send, and the gaps of the planning.
///
/// # Errors
/// [`PlanError::Input`] as described in the module documentation.
pub async fn plan_write(
    f: &Fetcher,
    obj: &ObjectFile,
    default_namespace: &str,
) -> Result<PlannedWrite, PlanError> {
    let gv_path = discovery_path(&obj.api_version);
    let mut gaps = Vec::new();
    let (resource, namespaced) = match f.get_json(&gv_path).await {
        Ok(doc) => resource_for_kind(&doc, &obj.kind).ok_or_else(|| {
            PlanError::Input(format!(
                "kind {} is not served in {}",
                obj.kind, obj.api_version
            ))
        })?,
        Err(e @ FetchError::Status { code: 404, .. }) => {
            return Err(PlanError::Input(format!(
                "apiVersion {}: the server does not serve it ({e})",
                obj.api_version
            )));
        }
        // The server answers (it was reached before planning), but not this document: the write
        // is still sent, to the resource kubectl would guess, and what it gets back is the answer.
        Err(e) => {
            let resource = guess_resource(&obj.kind);
            let namespaced = obj.namespace.is_some();
            gaps.push(Gap::new(
                format!("discovery{gv_path}"),
                e.gap_reason(),
                format!(
                    "{e}; the resource of kind {} is guessed as {resource} ({})",
                    obj.kind,
                    if namespaced {
                        "namespaced: the file names a namespace"
                    } else {
                        "cluster-scoped: the file names no namespace"
                    }
                ),
            ));
            (resource, namespaced)
        }
    };
    let mut value = obj.value.clone();
    let (collection, source) = if namespaced {
        // Written into the body too: the API server refuses (400) an object whose namespace
        // differs from the one in the path.
        let ns = obj.namespace.as_deref().unwrap_or(default_namespace);
        value["metadata"]["namespace"] = Value::String(ns.to_string());
        (
            format!("{gv_path}/namespaces/{ns}/{resource}"),
            format!("objects/{resource}/{ns}"),
        )
    } else {
        (
            format!("{gv_path}/{resource}"),
            format!("objects/{resource}"),
        )
    };
    // An object that exists is an update, not a create: a create would end in 409 AlreadyExists,
    // and webhooks whose rules list only UPDATE would not be called at all.
    let (method, path) = match &obj.name {
        Some(name) => {
            let item = format!("{collection}/{name}");
            match f.get_json(&item).await {
                Ok(current) => {
                    // An update without `resourceVersion` is refused by custom resources ("must
                    // be specified for an update"); the current one makes it a plain overwrite.
                    if value.pointer("/metadata/resourceVersion").is_none()
                        && let Some(rv) = current.pointer("/metadata/resourceVersion")
                    {
                        value["metadata"]["resourceVersion"] = rv.clone();
                    }
                    (Method::DryRunUpdate, item)
                }
                Err(FetchError::Status { code: 404, .. }) => (Method::DryRunCreate, collection),
                // Not known to exist (etcd hangs, the user may not read it): a create, and the
                // API server says the rest.
                Err(e) => {
                    gaps.push(Gap::new(
                        format!("{source}/{name}"),
                        e.gap_reason(),
                        format!(
                            "whether {} {name} exists could not be read ({e}); sent as a create",
                            obj.kind
                        ),
                    ));
                    (Method::DryRunCreate, collection)
                }
            }
        }
        None => (Method::DryRunCreate, collection),
    };
    let target = Target::new(method, &path).map_err(|e| PlanError::Input(e.to_string()))?;
    let body = serde_json::to_vec(&value).map_err(|e| PlanError::Input(e.to_string()))?;
    Ok(PlannedWrite { target, body, gaps })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_files_are_checked() {
        let o = parse_object(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n  namespace: wh-guarded\n  labels: {a: b}\ndata: {k: v}\n",
            "cm.yaml",
        )
        .unwrap();
        assert_eq!(
            (o.api_version.as_str(), o.kind.as_str()),
            ("v1", "ConfigMap")
        );
        assert_eq!(o.namespace.as_deref(), Some("wh-guarded"));
        assert_eq!(o.labels["a"], "b");
        let json = parse_object(
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"generateName":"d-"}}"#,
            "d.json",
        )
        .unwrap();
        assert!(json.name.is_none());

        for (text, want) in [
            ("kind: ConfigMap\nmetadata: {name: x}\n", "no apiVersion"),
            ("apiVersion: v1\nmetadata: {name: x}\n", "no kind"),
            ("apiVersion: v1\nkind: ConfigMap\n", "metadata.name"),
            (
                "apiVersion: v1\nkind: ConfigMapList\nitems: []\n",
                "not a list",
            ),
            ("- a\n- b\n", "expected a mapping"),
            (
                "apiVersion: v1\nkind: A\nmetadata: {name: a}\n---\napiVersion: v1\nkind: B\nmetadata: {name: b}\n",
                "2 YAML documents",
            ),
            ("apiVersion: [v1\n", "cm.yaml"),
        ] {
            let e = parse_object(text, "cm.yaml").unwrap_err();
            assert!(matches!(e, PlanError::Input(_)));
            assert!(e.to_string().contains(want), "{text:?}: {e}");
            assert!(e.to_string().starts_with("cm.yaml: "), "{e}");
        }
    }

    #[test]
    fn kinds_resolve_through_discovery() {
        let doc = serde_json::json!({"resources": [
            {"name": "configmaps", "kind": "ConfigMap", "namespaced": true},
            {"name": "namespaces/status", "kind": "Namespace", "namespaced": false},
            {"name": "namespaces", "kind": "Namespace", "namespaced": false}
        ]});
        assert_eq!(
            resource_for_kind(&doc, "ConfigMap"),
            Some(("configmaps".into(), true))
        );
        assert_eq!(
            resource_for_kind(&doc, "Namespace"),
            Some(("namespaces".into(), false))
        );
        assert_eq!(resource_for_kind(&doc, "Pod"), None);
        assert_eq!(discovery_path("v1"), "/api/v1");
        assert_eq!(guess_resource("ConfigMap"), "configmaps");
        assert_eq!(guess_resource("Ingress"), "ingresses");
        assert_eq!(guess_resource("NetworkPolicy"), "networkpolicies");
        assert_eq!(discovery_path("apps/v1"), "/apis/apps/v1");
    }
}
