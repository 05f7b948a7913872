//! Delegated authentication and authorization of a spawned extension API server
//! (`authorize: delegated`), as a generic apiserver such as sample-apiserver does them — decided by
//! the scenario's RBAC objects, not by a behaviour flag.
//!
//! * **Identity.** The backend calls kube-apiserver as the service account of the Pod whose
//!   `status.podIP` the scenario's `network` maps to it (`system:serviceaccount:<ns>:<sa>`, `default`
//!   when the Pod names none); a backend no Pod maps to runs outside the cluster as
//!   `<backend>-apiserver`, like the sample-apiserver's kubeconfig user in the real captures.
//! * **Start-up.** It reads the front-proxy configuration from the ConfigMap
//!   `kube-system/extension-apiserver-authentication`, which its identity may do only with a grant
//!   such as the `extension-apiserver-authentication-reader` Role. When RBAC denies it, the server
//!   logs what the real one logs and exits (its port is closed), or — with
//!   `authenticationTolerateLookupFailure` — continues without the configuration, so no front proxy
//!   is trusted and every request is anonymous.
//! * **Authorization.** `system:masters` is allowed without a review; `/healthz`, `/readyz` and
//!   `/livez` always. Anyone else needs a SubjectAccessReview, created as the identity: when RBAC
//!   does not let the identity create one, the request fails with the 500 the real server gives
//!   (`Internal Server Error: "<uri>": subjectaccessreviews.authorization.k8s.io is forbidden: …`)
//!   and the log lines it writes; otherwise the review's answer is what kube-apiserver's authorizer
//!   says for the requesting user.
//!
//! The start-up look-up reads the scenario's objects (with the bootstrap policy), because backends
//! start before the store is loaded; requests read the running server's store through
//! [`ApiserverHandle`], set once the server's state exists.

use std::sync::{Arc, OnceLock, Weak};

use serde_json::Value;

use super::super::authn::{Authorizer, UserInfo, forbidden_message};
use super::super::rbac::{Attributes, Objects, bootstrap_objects};
use super::super::request::RequestInfo;
use super::super::scenario::{BackendSpec, Scenario};
use super::container_log::{ContainerLog, Level};

/// The running server's authorizer, as backends reach it (set once the server's state exists).
pub type ApiserverHandle = Arc<OnceLock<Weak<dyn Authorizer>>>;

/// The namespace and name of the ConfigMap an extension reads its authentication configuration from.
const AUTH_CONFIGMAP: (&str, &str) = ("kube-system", "extension-apiserver-authentication");

/// The identity a backend calls kube-apiserver with.
pub fn identity_of(spec: &BackendSpec, scenario: &Scenario) -> UserInfo {
    let maps_here = |ip: &str| {
        scenario.network.iter().any(|(addr, backend)| {
            *backend == spec.name
                && (addr == ip || addr.split_once(':').is_some_and(|(a, _)| a == ip))
        })
    };
    let pod = scenario.objects.iter().find(|o| {
        o["kind"] == "Pod"
            && o.pointer("/status/podIP")
                .and_then(Value::as_str)
                .is_some_and(maps_here)
    });
    match pod {
        Some(p) => {
            let ns = p
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default");
            let sa = p
                .pointer("/spec/serviceAccountName")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("default");
            UserInfo {
                name: format!("system:serviceaccount:{ns}:{sa}"),
                groups: vec![
                    "system:serviceaccounts".into(),
                    format!("system:serviceaccounts:{ns}"),
                    "system:authenticated".into(),
                ],
            }
        }
        None => UserInfo {
            name: format!("{}-apiserver", spec.name),
            groups: vec!["system:authenticated".into()],
        },
    }
}

/// How the server came up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Startup {
    /// It read its authentication configuration.
    Configured,
    /// It could not, and continues treating every request as anonymous.
    Anonymous,
    /// It could not, and exited.
    Exited,
}

/// Read the authentication ConfigMap as `identity`, per the scenario's RBAC objects and the
/// bootstrap policy, and log what the real server logs when it may not.
pub fn start(
    identity: &UserInfo,
    tolerate: bool,
    scenario: &Scenario,
    log: &ContainerLog,
) -> Startup {
    let given = |o: &Value| {
        scenario
            .objects
            .iter()
            .any(|s| s["kind"] == o["kind"] && s["metadata"]["name"] == o["metadata"]["name"])
    };
    let bootstrap: Vec<Value> = bootstrap_objects()
        .into_iter()
        .filter(|o| !given(o))
        .collect();
    let rbac = Objects::from_values(scenario.objects.iter().chain(&bootstrap));
    let (ns, name) = AUTH_CONFIGMAP;
    let get = RequestInfo::parse("GET", &format!("/api/v1/namespaces/{ns}/configmaps/{name}"));
    if identity.is_master()
        || rbac.allows(&identity.name, &identity.groups, &Attributes::from(&get))
    {
        return Startup::Configured;
    }
    let denied = forbidden_message(&identity.name, &get);
    log.write(
        Level::Warning,
        "requestheader_controller.go:193",
        &format!(
            "Unable to get configmap/{name} in {ns}.  Usually fixed by 'kubectl create rolebinding -n {ns} ROLEBINDING_NAME --role=extension-apiserver-authentication-reader --serviceaccount=YOUR_NS:YOUR_SA'"
        ),
    );
    if !tolerate {
        log.write(
            Level::Error,
            "run.go:120",
            &format!(
                "\"command failed\" err={:?}",
                format!("unable to load configmap based request-header-client-ca-file: {denied}")
            ),
        );
        return Startup::Exited;
    }
    log.write(
        Level::Warning,
        "authentication.go:345",
        &format!("Error looking up in-cluster authentication configuration: {denied}"),
    );
    log.write(
        Level::Warning,
        "authentication.go:346",
        "Continuing without authentication configuration. This may treat all requests as anonymous.",
    );
    log.write(
        Level::Warning,
        "authentication.go:347",
        "To require authentication configuration lookup to succeed, set --authentication-tolerate-lookup-failure=false",
    );
    Startup::Anonymous
}

/// What the delegating authorizer decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// The review said no: 403 with this message.
    Deny(String),
    /// The review could not be made: 500 with this error.
    Error(String),
}

/// Authorize `user`'s request `info` as the delegating authorizer of a backend running as
/// `identity`.
pub fn authorize(
    apiserver: &ApiserverHandle,
    identity: &UserInfo,
    log: &ContainerLog,
    user: &UserInfo,
    info: &RequestInfo,
) -> Decision {
    if user.is_master()
        || (!info.is_resource && ["/healthz", "/readyz", "/livez"].contains(&info.path.as_str()))
    {
        return Decision::Allow;
    }
    let Some(authorizer) = apiserver.get().and_then(Weak::upgrade) else {
        return Decision::Error("the API server is not running".into());
    };
    let review = RequestInfo::parse("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews");
    if !authorizer.allows(identity, &review) {
        let denied = forbidden_message(&identity.name, &review);
        log.write(
            Level::Error,
            "webhook.go:224",
            &format!("Failed to make webhook authorizer request: {denied}"),
        );
        log.write(Level::Error, "errors.go:77", &denied);
        return Decision::Error(denied);
    }
    if authorizer.allows(user, info) {
        Decision::Allow
    } else {
        Decision::Deny(forbidden_message(&user.name, info))
    }
}
