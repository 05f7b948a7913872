//! RBAC evaluation over the bundle's evidence: may this identity do this? Pure; no I/O.
//!
//! It follows kube-apiserver's RBAC authorizer (`plugin/pkg/auth/authorizer/rbac`): a
//! ClusterRoleBinding grants its ClusterRole everywhere, a RoleBinding grants its Role (or a
//! ClusterRole) in its own namespace; a subject applies to a user by name, to a group the user is
//! in, or — a ServiceAccount — to `system:serviceaccount:<ns>:<name>` (a RoleBinding's subject
//! without a namespace means the binding's); a rule allows a request when its verbs, API groups,
//! resources (`*`, `res/sub`, `*/sub`) and resource names (empty: any) — or, for a non-resource
//! request, its `nonResourceURLs` (trailing `*` a prefix) — match. An aggregated ClusterRole grants
//! the rules the aggregation controller wrote into it and those of the ClusterRoles its selectors
//! match.
//!
//! The answer is three-valued. A binding whose role is not in the evidence grants nothing on a
//! cluster (RBAC ignores it), so a live collection, which read every role, says `Denied`; an import
//! that may simply not have been given that role says `Unknown`. Which evidence is there at all
//! (were the lists collected?) is the caller's question: this module only reads what it is given.
//!
//! This module owns the semantics; the reference server has its own small evaluator (it may not
//! import the engine), and `tests/semantics/rbac.yaml` holds both to the same table of cases.

use std::collections::{BTreeSet, HashMap};

use crate::bundle::{EvidenceBundle, PolicyRule, RbacBinding, RbacRole, RbacSubject};

/// Who asks: a user name and its groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// User name (`system:serviceaccount:<ns>:<name>` for a service account).
    pub user: String,
    /// Groups.
    pub groups: Vec<String>,
}

impl Identity {
    /// A service account's identity, with the groups kube-apiserver gives it: the service account
    /// authenticator adds `system:serviceaccounts` and `system:serviceaccounts:<ns>`, and every
    /// authenticated request gets `system:authenticated` — bindings to any of the three apply.
    pub fn service_account(namespace: &str, name: &str) -> Identity {
        Identity {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".to_string(),
            ],
        }
    }
}

/// What is asked: a resource request, or a non-resource URL (`path` set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `create`, …
    pub verb: String,
    /// API group (`""` core).
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace (`""` at the cluster scope).
    pub namespace: String,
    /// Object name (`""` for none).
    pub name: String,
    /// For a non-resource request, its path.
    pub path: Option<String>,
}

/// The answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A binding grants it.
    Allowed,
    /// No binding grants it.
    Denied,
    /// No binding in the evidence grants it, but one names a role the evidence does not have.
    Unknown,
}

impl Decision {
    /// `allowed`, `denied`, `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Denied => "denied",
            Decision::Unknown => "unknown",
        }
    }
}

/// The RBAC objects of a bundle, indexed.
pub struct Rbac<'b> {
    cluster_roles: HashMap<&'b str, &'b RbacRole>,
    roles: HashMap<(&'b str, &'b str), &'b RbacRole>,
    all_cluster_roles: &'b [RbacRole],
    cluster_role_bindings: &'b [RbacBinding],
    role_bindings: &'b [RbacBinding],
    complete: bool,
}

impl<'b> Rbac<'b> {
    /// Index a bundle's RBAC objects. `complete`: the evidence holds every role (a live
    /// collection), so a binding to a missing role grants nothing rather than something unknown.
    pub fn new(bundle: &'b EvidenceBundle, complete: bool) -> Self {
        Rbac {
            cluster_roles: bundle
                .cluster_roles
                .iter()
                .map(|r| (r.name.as_str(), r))
                .collect(),
            roles: bundle
                .roles
                .iter()
                .filter_map(|r| Some(((r.namespace.as_deref()?, r.name.as_str()), r)))
                .collect(),
            all_cluster_roles: &bundle.cluster_roles,
            cluster_role_bindings: &bundle.cluster_role_bindings,
            role_bindings: &bundle.role_bindings,
            complete,
        }
    }

    /// The rules a ClusterRole grants: its own, and for an aggregated one those of the ClusterRoles
    /// its selectors match (transitively). `None` when the evidence does not have it.
    ///
    /// On a cluster the aggregation controller has already copied the matched rules into `rules`;
    /// following the selectors as well makes a role read from a manifest (empty `rules`, as
    /// shipped) grant what it will grant once applied. `seen` stops selector cycles.
    fn cluster_role_rules(&self, name: &str) -> Option<Vec<&'b PolicyRule>> {
        let root = *self.cluster_roles.get(name)?;
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        let mut todo = vec![root];
        let mut rules = Vec::new();
        while let Some(r) = todo.pop() {
            if !seen.insert(r.name.as_str()) {
                continue;
            }
            rules.extend(r.rules.iter());
            for sel in &r.aggregation_selectors {
                todo.extend(
                    self.all_cluster_roles
                        .iter()
                        .filter(|c| !seen.contains(c.name.as_str()) && sel.matches(&c.labels)),
                );
            }
        }
        Some(rules)
    }

    /// Whether `id` may do `a`.
    pub fn decide(&self, id: &Identity, a: &Attributes) -> Decision {
        // RBAC has no deny rules: the first grant decides, so the order of bindings does not
        // matter, and "denied" can only be said after every binding was read.
        let mut unknown = false;
        let mut grants = |rules: Option<Vec<&PolicyRule>>| match rules {
            Some(rules) => rules.iter().any(|r| rule_allows(r, a)),
            None => {
                unknown |= !self.complete;
                false
            }
        };
        for b in self.cluster_role_bindings {
            if b.role_ref.kind == "ClusterRole"
                && applies(&b.subjects, id, "")
                && grants(self.cluster_role_rules(&b.role_ref.name))
            {
                return Decision::Allowed;
            }
        }
        // A RoleBinding grants only inside its namespace: never a cluster-scoped request, and never
        // a `nonResourceURLs` rule (those apply only through a ClusterRoleBinding, RBAC docs).
        if !a.namespace.is_empty() && a.path.is_none() {
            for b in self
                .role_bindings
                .iter()
                .filter(|b| b.namespace.as_deref() == Some(a.namespace.as_str()))
            {
                if !applies(&b.subjects, id, &a.namespace) {
                    continue;
                }
                let rules = match b.role_ref.kind.as_str() {
                    "ClusterRole" => self.cluster_role_rules(&b.role_ref.name),
                    "Role" => self
                        .roles
                        .get(&(a.namespace.as_str(), b.role_ref.name.as_str()))
                        .map(|r| r.rules.iter().collect()),
                    // The API allows only Role and ClusterRole; anything else grants nothing.
                    _ => Some(Vec::new()),
                };
                if grants(rules) {
                    return Decision::Allowed;
                }
            }
        }
        if unknown {
            Decision::Unknown
        } else {
            Decision::Denied
        }
    }
}

/// Whether one of a binding's subjects is `id`; `namespace` is the binding's (`""` for a
/// ClusterRoleBinding), which a ServiceAccount subject without one refers to.
fn applies(subjects: &[RbacSubject], id: &Identity, namespace: &str) -> bool {
    subjects.iter().any(|s| match s.kind.as_str() {
        "User" => s.name == id.user,
        "Group" => id.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = s.namespace.as_deref().unwrap_or(namespace);
            !ns.is_empty() && id.user == format!("system:serviceaccount:{ns}:{}", s.name)
        }
        _ => false,
    })
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

/// Whether one rule allows the request.
fn rule_allows(r: &PolicyRule, a: &Attributes) -> bool {
    if !has(&r.verbs, &a.verb) {
        return false;
    }
    if let Some(path) = &a.path {
        return r.non_resource_urls.iter().any(|u| {
            u == "*"
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
    // As the RBAC authorizer's `ResourceMatches`: `*` is every resource with its subresources,
    // `pods` does not cover `pods/log`, and `*/scale` is that subresource of any resource.
    let resource = r.resources.iter().any(|x| {
        x == "*"
            || *x == combined
            || (!a.subresource.is_empty() && x.strip_prefix("*/") == Some(a.subresource.as_str()))
    });
    has(&r.api_groups, &a.group)
        && resource
        && (r.resource_names.is_empty() || r.resource_names.contains(&a.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(yaml: &str) -> EvidenceBundle {
        crate::bundle::load_bundle_str(
            &format!(
                "apiVersion: extpath.dev/v1alpha1\nkind: EvidenceBundle\ncollection: {{tool_version: x}}\n{yaml}"
            ),
            "t",
        )
        .unwrap()
    }

    fn sar() -> Attributes {
        Attributes {
            verb: "create".into(),
            group: "authorization.k8s.io".into(),
            resource: "subjectaccessreviews".into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn a_dangling_role_is_denied_live_and_unknown_imported() {
        let b = bundle(
            "cluster_role_bindings:\n  - {name: x, role_ref: {kind: ClusterRole, name: gone}, subjects: [{kind: Group, name: \"system:authenticated\"}]}\n",
        );
        let id = Identity::service_account("ns", "sa");
        assert_eq!(Rbac::new(&b, true).decide(&id, &sar()), Decision::Denied);
        assert_eq!(Rbac::new(&b, false).decide(&id, &sar()), Decision::Unknown);
    }

    #[test]
    fn aggregated_roles_grant_what_their_selectors_match() {
        let b = bundle(
            "cluster_roles:\n  - {name: agg, aggregation_selectors: [{match_labels: {x: y}}]}\n  - {name: part, labels: {x: y}, rules: [{verbs: [create], api_groups: [authorization.k8s.io], resources: [subjectaccessreviews]}]}\ncluster_role_bindings:\n  - {name: b, role_ref: {kind: ClusterRole, name: agg}, subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]}\n",
        );
        let rbac = Rbac::new(&b, true);
        assert_eq!(
            rbac.decide(&Identity::service_account("ns", "sa"), &sar()),
            Decision::Allowed
        );
        assert_eq!(
            rbac.decide(&Identity::service_account("other", "sa"), &sar()),
            Decision::Denied
        );
    }
}
