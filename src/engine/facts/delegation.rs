//! `delegation`: whether the identity of the extension API server behind an APIService may do what
//! delegated authentication and authorization need, judged from the RBAC objects — before any user
//! has failed.
//!
//! An extension server (sample-apiserver, metrics-server, …) runs as the service account of its
//! Pods. To authorize a proxied request it creates a SubjectAccessReview, to authenticate a bearer
//! token a TokenReview (both granted by the `system:auth-delegator` ClusterRole), and at start it
//! reads the front-proxy configuration from the ConfigMap `kube-system/extension-apiserver-authentication`
//! (granted by the `extension-apiserver-authentication-reader` Role). Its identity is read from the
//! Pods behind the APIService's Service (`spec.serviceAccountName`); its permissions are evaluated
//! by [`crate::engine::rbac`] — by rules, never by the names of bindings. The names Kubernetes
//! fixes (`system:auth-delegator`, `extension-apiserver-authentication-reader`, `kube-system`,
//! `extension-apiserver-authentication`) appear only in what is asked and in the fix.
//!
//! Unknown stays unknown: no Pods (an extension outside the cluster, a Service without a selector
//! or endpoint targets) means no identity; RBAC lists that were not collected (403) or not supplied
//! mean no judgement — a check is then `unknown`, and `missing` holds only what RBAC really denies.

use super::value::Fact;

use super::FactBase;
use super::value::{Obj, list, strings};
use crate::bundle::{ApiService, rbac};
use crate::engine::rbac::{Attributes, Decision, Identity};

/// The namespace of the authentication ConfigMap and its reader Role.
const KUBE_SYSTEM: &str = "kube-system";
/// The ConfigMap holding the front-proxy (requestheader) and client CA configuration.
const AUTH_CONFIGMAP: &str = "extension-apiserver-authentication";
/// The ClusterRole that grants SubjectAccessReview and TokenReview creation.
const AUTH_DELEGATOR: &str = "system:auth-delegator";
/// The Role in kube-system that grants reading the authentication ConfigMap.
const AUTH_READER: &str = "extension-apiserver-authentication-reader";

/// One permission delegated authentication or authorization needs.
struct Need {
    id: &'static str,
    text: &'static str,
    grants: &'static str,
    cluster_scope: bool,
    attributes: fn() -> Attributes,
}

const NEEDS: &[Need] = &[
    Need {
        id: "create-subjectaccessreviews",
        text: "create subjectaccessreviews.authorization.k8s.io",
        grants: AUTH_DELEGATOR,
        cluster_scope: true,
        attributes: || Attributes {
            verb: "create".into(),
            group: "authorization.k8s.io".into(),
            resource: "subjectaccessreviews".into(),
            ..Attributes::default()
        },
    },
    Need {
        id: "create-tokenreviews",
        text: "create tokenreviews.authentication.k8s.io",
        grants: AUTH_DELEGATOR,
        cluster_scope: true,
        attributes: || Attributes {
            verb: "create".into(),
            group: "authentication.k8s.io".into(),
            resource: "tokenreviews".into(),
            ..Attributes::default()
        },
    },
    Need {
        id: "get-authentication-configmap",
        text: "get configmap kube-system/extension-apiserver-authentication",
        grants: AUTH_READER,
        cluster_scope: false,
        attributes: || Attributes {
            verb: "get".into(),
            resource: "configmaps".into(),
            namespace: KUBE_SYSTEM.into(),
            name: AUTH_CONFIGMAP.into(),
            ..Attributes::default()
        },
    },
];

/// A service account found behind the Service, and the Pods that run as it.
struct Found {
    namespace: String,
    service_account: String,
    pods: Vec<String>,
}

fn fix(need: &Need, ns: &str, sa: &str) -> String {
    if need.grants == AUTH_DELEGATOR {
        format!(
            "kubectl create clusterrolebinding {ns}-{sa}:{AUTH_DELEGATOR} --clusterrole={AUTH_DELEGATOR} --serviceaccount={ns}:{sa}"
        )
    } else {
        format!(
            "kubectl -n {KUBE_SYSTEM} create rolebinding {ns}-{sa}-auth-reader --role={AUTH_READER} --serviceaccount={ns}:{sa}"
        )
    }
}

/// The `delegation` fact of an APIService.
pub fn delegation_fact(base: &FactBase<'_>, a: Option<&ApiService>) -> Fact {
    let pods = match a.and_then(|a| a.service.as_ref()) {
        Some(r) => super::backend::pods_behind(base, Some(r), 443),
        None => Vec::new(),
    };
    let mut found: Vec<Found> = Vec::new();
    for p in pods {
        let Some(sa) = &p.service_account else {
            continue;
        };
        match found
            .iter_mut()
            .find(|f| f.namespace == p.namespace && f.service_account == *sa)
        {
            Some(f) => f.pods.push(p.name.clone()),
            None => found.push(Found {
                namespace: p.namespace.clone(),
                service_account: sa.clone(),
                pods: vec![p.name.clone()],
            }),
        }
    }
    let mut checks = Vec::new();
    let mut missing = Vec::new();
    let mut identities = Vec::new();
    for f in &found {
        let id = Identity::service_account(&f.namespace, &f.service_account);
        identities.push(
            Obj::new()
                .s("user", id.user.clone())
                .s("namespace", f.namespace.clone())
                .s("service_account", f.service_account.clone())
                .v("groups", strings(id.groups.clone()))
                .v("pods", strings(f.pods.clone()))
                .build(),
        );
        for need in NEEDS {
            let known =
                base.rbac_cluster_known && (need.cluster_scope || base.rbac_kube_system_known);
            let decision = if known {
                base.rbac.decide(&id, &(need.attributes)())
            } else {
                Decision::Unknown
            };
            let check = Obj::new()
                .s("user", id.user.clone())
                .s("namespace", f.namespace.clone())
                .s("service_account", f.service_account.clone())
                .s("permission", need.id)
                .s("text", need.text)
                .s("grants", need.grants)
                .s("decision", decision.as_str())
                .b("allowed", decision == Decision::Allowed)
                .s("fix", fix(need, &f.namespace, &f.service_account))
                .build();
            if decision == Decision::Denied {
                missing.push(check.clone());
            }
            checks.push(check);
        }
    }
    let mut unknown_sources = Vec::new();
    if !base.rbac_cluster_known {
        unknown_sources.extend([
            rbac::GAP_CLUSTER_ROLES.to_string(),
            rbac::GAP_CLUSTER_ROLE_BINDINGS.to_string(),
        ]);
    }
    if !base.rbac_kube_system_known {
        unknown_sources.extend([
            rbac::GAP_ROLES.to_string(),
            rbac::GAP_ROLE_BINDINGS.to_string(),
        ]);
    }
    Obj::new()
        .b("identity_known", !found.is_empty())
        .v("identities", list(identities))
        .b(
            "rbac_known",
            base.rbac_cluster_known && base.rbac_kube_system_known,
        )
        .v("rbac_unknown", strings(unknown_sources))
        .v("checks", list(checks))
        .v("missing", list(missing))
        .build()
}
