//! RBAC collectors (stage one): ClusterRoles, ClusterRoleBindings, and the Roles and RoleBindings
//! of `kube-system`.
//!
//! They are the evidence for judging an extension API server's delegated authentication and
//! authorization without waiting for a user to fail: whether its identity may create
//! SubjectAccessReviews and TokenReviews (cluster-scoped, granted by ClusterRoleBindings) and read the
//! `extension-apiserver-authentication` ConfigMap in `kube-system` (granted by RoleBindings there, or
//! by ClusterRoleBindings). Each is one paginated list decoded into the k8s-openapi type and mapped
//! by `bundle::rbac`; a 403 is a gap (the engine then does not judge from RBAC), never a finding.
//! This module evaluates nothing.

use k8s_openapi::api::rbac::v1 as rbac;

use super::fetch::Fetcher;
use super::objects::list_then;
use super::sources::EvidenceFuture;
use crate::bundle::rbac as map;

pub use crate::bundle::rbac::{
    GAP_CLUSTER_ROLE_BINDINGS as CLUSTER_ROLE_BINDINGS, GAP_CLUSTER_ROLES as CLUSTER_ROLES,
    GAP_ROLE_BINDINGS as ROLE_BINDINGS, GAP_ROLES as ROLES,
};

/// ClusterRoles.
pub fn fetch_cluster_roles(f: &Fetcher) -> EvidenceFuture<'_> {
    list_then::<rbac::ClusterRole, _>(
        f,
        CLUSTER_ROLES,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        map::add_cluster_role,
    )
}

/// ClusterRoleBindings.
pub fn fetch_cluster_role_bindings(f: &Fetcher) -> EvidenceFuture<'_> {
    list_then::<rbac::ClusterRoleBinding, _>(
        f,
        CLUSTER_ROLE_BINDINGS,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        map::add_cluster_role_binding,
    )
}

/// The Roles of kube-system.
pub fn fetch_roles(f: &Fetcher) -> EvidenceFuture<'_> {
    list_then::<rbac::Role, _>(
        f,
        ROLES,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles",
        map::add_role,
    )
}

/// The RoleBindings of kube-system.
pub fn fetch_role_bindings(f: &Fetcher) -> EvidenceFuture<'_> {
    list_then::<rbac::RoleBinding, _>(
        f,
        ROLE_BINDINGS,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings",
        map::add_role_binding,
    )
}
