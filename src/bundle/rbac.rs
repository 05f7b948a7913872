//! RBAC evidence: ClusterRoles, ClusterRoleBindings, and the Roles and RoleBindings of
//! `kube-system` (rbac.authorization.k8s.io/v1), kept as the authorizer reads them.
//!
//! They are collected so that the engine can tell, without waiting for a user to fail, whether an
//! extension API server's identity may do what delegated authentication and authorization need
//! (create SubjectAccessReviews and TokenReviews, read the `extension-apiserver-authentication`
//! ConfigMap). Only what RBAC decides on is kept: rules, role references, subjects, and for
//! ClusterRoles their labels and aggregation selectors. Nothing here is secret.
//!
//! What this module owns: the types and the mapping from k8s-openapi objects. It does not evaluate
//! anything (that is `engine::rbac`).

use k8s_openapi::api::rbac::v1 as rbac;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EvidenceBundle;
use super::objects::LabelSelector;

/// Gap source of the ClusterRoles (a collection that could not list them records it).
pub const GAP_CLUSTER_ROLES: &str = "objects/clusterroles";
/// Gap source of the ClusterRoleBindings.
pub const GAP_CLUSTER_ROLE_BINDINGS: &str = "objects/clusterrolebindings";
/// Gap source of kube-system's Roles.
pub const GAP_ROLES: &str = "objects/roles";
/// Gap source of kube-system's RoleBindings.
pub const GAP_ROLE_BINDINGS: &str = "objects/rolebindings";

/// One rule of a ClusterRole or Role (`rules[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    /// `verbs` (`*` for all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verbs: Vec<String>,
    /// `apiGroups` (`""` is the core group, `*` all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// `resources` (`*` all, `pods/log` a subresource, `*/scale` a subresource of any resource).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// `resourceNames` (empty: any name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// `nonResourceURLs` (a trailing `*` is a prefix match).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// A ClusterRole (no namespace) or a Role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RbacRole {
    /// The namespace of a Role; absent for a ClusterRole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Labels (an aggregated ClusterRole selects the ClusterRoles it aggregates by them).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// `rules`. For an aggregated ClusterRole these are the rules the aggregation controller
    /// already wrote into it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<PolicyRule>,
    /// `aggregationRule.clusterRoleSelectors` of an aggregated ClusterRole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregation_selectors: Vec<LabelSelector>,
}

/// `roleRef` of a binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RoleRef {
    /// `ClusterRole` or `Role`.
    pub kind: String,
    /// The role's name.
    pub name: String,
}

/// One subject of a binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RbacSubject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// Name.
    pub name: String,
    /// Namespace of a ServiceAccount (in a RoleBinding, absent means the binding's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A ClusterRoleBinding (no namespace) or a RoleBinding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct RbacBinding {
    /// The namespace of a RoleBinding; absent for a ClusterRoleBinding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// The role it grants.
    pub role_ref: RoleRef,
    /// Who it grants it to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<RbacSubject>,
}

fn rule(r: &rbac::PolicyRule) -> PolicyRule {
    let v = |x: &Option<Vec<String>>| x.clone().unwrap_or_default();
    PolicyRule {
        verbs: r.verbs.clone(),
        api_groups: v(&r.api_groups),
        resources: v(&r.resources),
        resource_names: v(&r.resource_names),
        non_resource_urls: v(&r.non_resource_urls),
    }
}

fn role_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    namespaced: bool,
    rules: Option<&Vec<rbac::PolicyRule>>,
) -> RbacRole {
    RbacRole {
        namespace: namespaced.then(|| {
            meta.namespace
                .clone()
                .unwrap_or_else(|| "default".to_string())
        }),
        name: meta.name.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        rules: rules.into_iter().flatten().map(rule).collect(),
        aggregation_selectors: Vec::new(),
    }
}

fn binding_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    namespaced: bool,
    role_ref: &rbac::RoleRef,
    subjects: Option<&Vec<rbac::Subject>>,
) -> RbacBinding {
    RbacBinding {
        namespace: namespaced.then(|| {
            meta.namespace
                .clone()
                .unwrap_or_else(|| "default".to_string())
        }),
        name: meta.name.clone().unwrap_or_default(),
        role_ref: RoleRef {
            kind: role_ref.kind.clone(),
            name: role_ref.name.clone(),
        },
        subjects: subjects
            .into_iter()
            .flatten()
            .map(|s| RbacSubject {
                kind: s.kind.clone(),
                name: s.name.clone(),
                namespace: s.namespace.clone().filter(|n| !n.is_empty()),
            })
            .collect(),
    }
}

/// A ClusterRole.
pub fn add_cluster_role(bundle: &mut EvidenceBundle, obj: &rbac::ClusterRole) {
    let mut r = role_of(&obj.metadata, false, obj.rules.as_ref());
    r.aggregation_selectors = obj
        .aggregation_rule
        .as_ref()
        .and_then(|a| a.cluster_role_selectors.as_ref())
        .into_iter()
        .flatten()
        .map(|s| super::from_k8s::label_selector(Some(s)))
        .collect();
    bundle.cluster_roles.push(r);
}

/// A Role.
pub fn add_role(bundle: &mut EvidenceBundle, obj: &rbac::Role) {
    bundle
        .roles
        .push(role_of(&obj.metadata, true, obj.rules.as_ref()));
}

/// A ClusterRoleBinding.
pub fn add_cluster_role_binding(bundle: &mut EvidenceBundle, obj: &rbac::ClusterRoleBinding) {
    bundle.cluster_role_bindings.push(binding_of(
        &obj.metadata,
        false,
        &obj.role_ref,
        obj.subjects.as_ref(),
    ));
}

/// A RoleBinding.
pub fn add_role_binding(bundle: &mut EvidenceBundle, obj: &rbac::RoleBinding) {
    bundle.role_bindings.push(binding_of(
        &obj.metadata,
        true,
        &obj.role_ref,
        obj.subjects.as_ref(),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rbac_objects_keep_what_the_authorizer_reads() {
        let cr: rbac::ClusterRole = serde_json::from_value(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "agg", "labels": {"a": "b"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]},
            "rules": [{"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"]}]
        }))
        .unwrap();
        let rb: rbac::RoleBinding = serde_json::from_value(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "r", "namespace": "kube-system"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}, {"kind": "Group", "name": "g", "apiGroup": "rbac.authorization.k8s.io"}]
        }))
        .unwrap();
        let mut b = EvidenceBundle::default();
        add_cluster_role(&mut b, &cr);
        add_role_binding(&mut b, &rb);
        assert_eq!(b.cluster_roles[0].namespace, None);
        assert_eq!(b.cluster_roles[0].aggregation_selectors.len(), 1);
        assert_eq!(b.cluster_roles[0].rules[0].verbs, vec!["create"]);
        assert_eq!(b.role_bindings[0].namespace.as_deref(), Some("kube-system"));
        assert_eq!(b.role_bindings[0].role_ref.kind, "Role");
        assert_eq!(b.role_bindings[0].subjects[1].namespace, None);
    }
}
