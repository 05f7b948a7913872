//! RBAC as the reference server enforces it: the ClusterRoles, ClusterRoleBindings, Roles and
//! RoleBindings of the store (or of a scenario, before the store exists), evaluated like
//! kube-apiserver's RBAC authorizer, and the bootstrap policy a cluster starts with.
//!
//! It decides for kube-apiserver (a request no scenario `allow:` rule grants may still be granted
//! by an RBAC object), for the SubjectAccessReviews an extension backend "creates", and for the
//! extension's own look-up of `kube-system/extension-apiserver-authentication` at start. It works
//! on the JSON objects the store keeps, with its own small code: the reference server never imports
//! the engine (which has its own evaluator over bundle types); `tests/semantics/rbac.yaml` holds the
//! two to one table of cases.
//!
//! Semantics: a ClusterRoleBinding grants its ClusterRole everywhere, a RoleBinding its Role (or a
//! ClusterRole) in its namespace; subjects match a user by name, a group the user is in, or a
//! ServiceAccount `system:serviceaccount:<ns>:<name>` (a RoleBinding's subject without a namespace:
//! the binding's). A rule matches on verbs, API groups, resources (`*`, `res/sub`, `*/sub`) and
//! resource names (empty: any), or on non-resource URLs (trailing `*`: a prefix). An aggregated
//! ClusterRole grants its `rules` and those of the ClusterRoles its `aggregationRule` selects, as
//! the aggregation controller would have written them. A binding to a role that does not exist
//! grants nothing.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::request::RequestInfo;
use super::store::Store;
use crate::semantics::label_selector;

const GROUP: &str = "rbac.authorization.k8s.io";

/// What a request asks, as RBAC sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Verb.
    pub verb: String,
    /// API group.
    pub group: String,
    /// Resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace (`""` cluster-wide).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// For a non-resource request, its path.
    pub path: Option<String>,
}

impl From<&RequestInfo> for Attributes {
    fn from(i: &RequestInfo) -> Self {
        Attributes {
            verb: i.verb.clone(),
            group: i.group.clone(),
            resource: i.resource.clone(),
            subresource: i.subresource.clone(),
            namespace: i.namespace.clone(),
            name: i.name.clone(),
            path: (!i.is_resource).then(|| i.path.clone()),
        }
    }
}

/// The RBAC objects a decision reads.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    cluster_roles: Vec<Value>,
    cluster_role_bindings: Vec<Value>,
    roles: Vec<Value>,
    role_bindings: Vec<Value>,
}

impl Objects {
    /// The RBAC objects of the store now.
    pub fn from_store(store: &Store) -> Objects {
        let list = |r: &str| store.list(GROUP, r, None).0;
        Objects {
            cluster_roles: list("clusterroles"),
            cluster_role_bindings: list("clusterrolebindings"),
            roles: list("roles"),
            role_bindings: list("rolebindings"),
        }
    }

    /// The RBAC objects among `values` (a scenario's objects), by kind.
    pub fn from_values<'v>(values: impl IntoIterator<Item = &'v Value>) -> Objects {
        let mut o = Objects::default();
        for v in values {
            if !v["apiVersion"]
                .as_str()
                .is_some_and(|a| a.starts_with(&format!("{GROUP}/")))
            {
                continue;
            }
            let into = match v["kind"].as_str() {
                Some("ClusterRole") => &mut o.cluster_roles,
                Some("ClusterRoleBinding") => &mut o.cluster_role_bindings,
                Some("Role") => &mut o.roles,
                Some("RoleBinding") => &mut o.role_bindings,
                _ => continue,
            };
            into.push(v.clone());
        }
        o
    }

    fn cluster_role(&self, name: &str) -> Option<&Value> {
        self.cluster_roles.iter().find(|r| meta(r, "name") == name)
    }

    /// The rules a ClusterRole grants, aggregation included.
    fn cluster_role_rules(&self, name: &str) -> Vec<&Value> {
        let mut rules = Vec::new();
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&Value> = self.cluster_role(name).into_iter().collect();
        // Selectors may select a role that selects back (or the role itself): each role counts
        // once, so aggregation ends like the controller's single pass does.
        while let Some(r) = todo.pop() {
            if !seen.insert(meta(r, "name")) {
                continue;
            }
            rules.extend(r["rules"].as_array().into_iter().flatten());
            for sel in r
                .pointer("/aggregationRule/clusterRoleSelectors")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                todo.extend(self.cluster_roles.iter().filter(|c| {
                    !seen.contains(meta(c, "name"))
                        && label_selector::json_selector_matches(sel, &c["metadata"]["labels"])
                }));
            }
        }
        rules
    }

    /// Whether `user` (in `groups`) may do `a`.
    pub fn allows(&self, user: &str, groups: &[String], a: &Attributes) -> bool {
        let grants = |rules: Vec<&Value>| rules.iter().any(|r| rule_allows(r, a));
        let cluster_wide = self.cluster_role_bindings.iter().any(|b| {
            b.pointer("/roleRef/kind").and_then(Value::as_str) == Some("ClusterRole")
                && applies(b, user, groups, "")
                && grants(self.cluster_role_rules(role_name(b)))
        });
        if cluster_wide {
            return true;
        }
        // A RoleBinding grants only inside its namespace, and non-resource URLs (`/healthz`,
        // `/metrics`) have no namespace: they are granted by ClusterRoleBindings alone.
        if a.namespace.is_empty() || a.path.is_some() {
            return false;
        }
        self.role_bindings
            .iter()
            .filter(|b| meta(b, "namespace") == a.namespace)
            .filter(|b| applies(b, user, groups, &a.namespace))
            .any(|b| {
                let rules = match b.pointer("/roleRef/kind").and_then(Value::as_str) {
                    Some("ClusterRole") => self.cluster_role_rules(role_name(b)),
                    Some("Role") => self
                        .roles
                        .iter()
                        .find(|r| {
                            meta(r, "namespace") == a.namespace && meta(r, "name") == role_name(b)
                        })
                        .map(|r| r["rules"].as_array().into_iter().flatten().collect())
                        .unwrap_or_default(),
                    _ => Vec::new(),
                };
                grants(rules)
            })
    }
}

fn meta<'v>(v: &'v Value, field: &str) -> &'v str {
    v["metadata"][field].as_str().unwrap_or_default()
}

fn role_name(b: &Value) -> &str {
    b.pointer("/roleRef/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn applies(binding: &Value, user: &str, groups: &[String], namespace: &str) -> bool {
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| {
            let name = s["name"].as_str().unwrap_or_default();
            match s["kind"].as_str() {
                Some("User") => name == user,
                Some("Group") => groups.iter().any(|g| g == name),
                Some("ServiceAccount") => {
                    let ns = s["namespace"]
                        .as_str()
                        .filter(|n| !n.is_empty())
                        .unwrap_or(namespace);
                    !ns.is_empty() && user == format!("system:serviceaccount:{ns}:{name}")
                }
                _ => false,
            }
        })
}

fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    let listed = |field: &str, value: &str| {
        strings(&rule[field])
            .iter()
            .any(|x| *x == "*" || *x == value)
    };
    if !listed("verbs", &a.verb) {
        return false;
    }
    if let Some(path) = &a.path {
        return strings(&rule["nonResourceURLs"]).iter().any(|u| {
            *u == "*"
                || u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        });
    }
    let combined = if a.subresource.is_empty() {
        a.resource.clone()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let resources = strings(&rule["resources"]).iter().any(|r| {
        *r == "*"
            || *r == combined
            || (!a.subresource.is_empty() && r.strip_prefix("*/") == Some(a.subresource.as_str()))
    });
    let names = strings(&rule["resourceNames"]);
    listed("apiGroups", &a.group)
        && resources
        && (names.is_empty() || names.contains(&a.name.as_str()))
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "rules": rules})
}

fn cluster_role_binding(name: &str, group: &[&str]) -> Value {
    let subjects: Vec<Value> = group
        .iter()
        .map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g}))
        .collect();
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": subjects})
}

/// The part of kube-apiserver's bootstrap RBAC policy the extension paths touch: `cluster-admin`
/// for `system:masters`, discovery and public info for every user, `system:auth-delegator` (unbound:
/// an extension server's installer binds it), and the `extension-apiserver-authentication-reader`
/// Role in kube-system (likewise).
pub fn bootstrap_objects() -> Vec<Value> {
    vec![
        cluster_role(
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        cluster_role_binding("cluster-admin", &["system:masters"]),
        cluster_role(
            "system:discovery",
            json!([{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        cluster_role_binding("system:discovery", &["system:authenticated"]),
        cluster_role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
        ),
        cluster_role_binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
        cluster_role(
            "system:auth-delegator",
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
            ]),
        ),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "extension-apiserver-authentication-reader", "namespace": "kube-system",
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["extension-apiserver-authentication"], "verbs": ["get", "list", "watch"]}]}),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_policy_serves_discovery_and_masters_only() {
        let o = Objects::from_values(&bootstrap_objects());
        let get = |path: &str| Attributes {
            verb: "get".into(),
            path: Some(path.into()),
            ..Attributes::default()
        };
        let authed = vec!["system:authenticated".to_string()];
        assert!(o.allows("x", &authed, &get("/apis/wardle.example.com/v1alpha1")));
        assert!(!o.allows("x", &[], &get("/apis/wardle.example.com/v1alpha1")));
        let sar = Attributes {
            verb: "create".into(),
            group: "authorization.k8s.io".into(),
            resource: "subjectaccessreviews".into(),
            ..Attributes::default()
        };
        assert!(!o.allows("system:serviceaccount:a:b", &authed, &sar));
        assert!(o.allows("admin", &["system:masters".to_string()], &sar));
    }
}
