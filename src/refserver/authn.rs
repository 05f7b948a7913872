//! Authentication and authorization of requests to the reference server.
//!
//! Authentication: a bearer token from the scenario's users (plus the generated `admin` token), or
//! a client certificate that chains to the server's client CA (CN = user, O = groups), or — only
//! when the scenario enables anonymous auth — `system:anonymous`. Anything else is a 401 Status.
//!
//! Authorization: `system:masters` may do everything; every authenticated user may read discovery,
//! health and version paths (`system:discovery`, `system:public-info-viewer`); everything else needs
//! an allow rule of the user or a grant of the RBAC objects in the store (`super::rbac`), else a
//! 403 with RBAC's exact wording. The aggregator authorizes before
//! proxying, like the real one, so a user without rules never reaches an extension server.
//!
//! It owns the server's identity tables ([`Authn`]: tokens, allow rules, the admin token, the
//! client CA) and reads the RBAC objects from the store it is handed; it never sees the rest of the
//! server's state. Backends with delegated authorization reach it through [`Authorizer`].

use std::collections::HashMap;

use http::HeaderMap;
use rustls_pki_types::CertificateDer;
use sha2::Digest;

use super::certs::ServerPki;
use super::request::RequestInfo;
use super::scenario::{Rule, Scenario};
use super::status::ApiError;
use super::store::Store;
use super::tls::{PeerChain, client_identity};

/// Who may call the server and what each user may do beyond RBAC: built once from the scenario
/// and the PKI.
pub struct Authn {
    /// Bearer token → user.
    tokens: HashMap<String, UserInfo>,
    /// User → allow rules.
    rules: HashMap<String, Vec<Rule>>,
    /// The admin's bearer token.
    admin_token: String,
    /// The CA client certificates must chain to.
    client_ca: CertificateDer<'static>,
    /// `server.anonymousAuth`.
    anonymous: bool,
}

impl std::fmt::Debug for Authn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Tokens are credentials: never in debug output.
        f.debug_struct("Authn")
            .field("users", &self.rules.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Authn {
    /// The tables of a scenario's users, plus a generated `admin` in `system:masters`.
    pub fn new(scenario: &Scenario, pki: &ServerPki) -> Self {
        // Unique per start and never written anywhere but the kubeconfig.
        let admin_token =
            hex(&sha2::Sha256::digest(pki.serving_ca.cert_pem.as_bytes()))[..32].to_string();
        let mut tokens = HashMap::new();
        tokens.insert(
            admin_token.clone(),
            UserInfo {
                name: "admin".into(),
                groups: vec!["system:masters".into()],
            },
        );
        let mut rules = HashMap::new();
        for u in &scenario.users {
            if let Some(t) = &u.token {
                tokens.insert(
                    t.clone(),
                    UserInfo {
                        name: u.name.clone(),
                        groups: u.groups.clone(),
                    },
                );
            }
            rules.insert(u.name.clone(), u.allow.clone());
        }
        Authn {
            tokens,
            rules,
            admin_token,
            client_ca: pki.client_ca.cert_der.clone(),
            anonymous: scenario.server.anonymous_auth,
        }
    }

    /// The admin's bearer token (`system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The server's authorizer as a backend with delegated authorization asks it (a
/// SubjectAccessReview): the running server answers, with the RBAC objects in its store.
pub trait Authorizer: Send + Sync {
    /// Whether `user` may make the request `info` ([`allowed`]).
    fn allows(&self, user: &UserInfo, info: &RequestInfo) -> bool;
}

/// An authenticated user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// Groups (including `system:authenticated` or `system:unauthenticated`).
    pub groups: Vec<String>,
}

impl UserInfo {
    /// Member of `system:masters`.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// Authenticate a request.
///
/// # Errors
/// 401 Unauthorized when a credential is presented but invalid, or none is and anonymous auth is off.
pub fn authenticate(
    authn: &Authn,
    headers: &HeaderMap,
    peer: &PeerChain,
) -> Result<UserInfo, ApiError> {
    if let Some(auth) = headers.get(http::header::AUTHORIZATION) {
        let token = auth
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(ApiError::unauthorized)?;
        let user = authn.tokens.get(token).ok_or_else(ApiError::unauthorized)?;
        return Ok(with_authenticated(user.clone()));
    }
    if let Some(chain) = peer {
        let roots = [authn.client_ca.clone()];
        if let Ok(id) = client_identity(chain, &roots, jiff::Timestamp::now()) {
            return Ok(with_authenticated(UserInfo {
                name: id.user,
                groups: id.groups,
            }));
        }
        return Err(ApiError::unauthorized());
    }
    if authn.anonymous {
        return Ok(UserInfo {
            // kube-apiserver's anonymous authenticator: user system:anonymous, group
            // system:unauthenticated, and never system:authenticated.
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        });
    }
    Err(ApiError::unauthorized())
}

/// Apply `Impersonate-User` / `Impersonate-Group` (kubectl `--as` / `--as-group`): allowed for
/// `system:masters` and for users with an `impersonate` rule on `users` (and `groups`), like RBAC.
///
/// # Errors
/// 403 with RBAC's wording when the requester may not impersonate.
pub fn impersonate(
    authn: &Authn,
    store: &Store,
    headers: &HeaderMap,
    user: UserInfo,
) -> Result<UserInfo, ApiError> {
    let Some(target) = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
    else {
        return Ok(user);
    };
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let may = |resource: &str, name: &str| {
        let info = RequestInfo::parse("IMPERSONATE", &format!("/api/v1/{resource}/{name}"));
        allowed(authn, store, &user, &info)
    };
    if !may("users", &target) {
        let info = RequestInfo::parse("IMPERSONATE", &format!("/api/v1/users/{target}"));
        return Err(ApiError::forbidden(
            forbidden_message(&user.name, &info),
            &target,
            "",
            "users",
        ));
    }
    if let Some(g) = groups.iter().find(|g| !may("groups", g)) {
        let info = RequestInfo::parse("IMPERSONATE", &format!("/api/v1/groups/{g}"));
        return Err(ApiError::forbidden(
            forbidden_message(&user.name, &info),
            g,
            "",
            "groups",
        ));
    }
    // The impersonation filter (`WithImpersonation`) adds system:authenticated to an impersonated
    // user, as authentication does for a real one; its two exceptions (system:anonymous, or
    // system:unauthenticated among the groups asked for) are not modelled here.
    Ok(with_authenticated(UserInfo {
        name: target,
        groups,
    }))
}

fn with_authenticated(mut u: UserInfo) -> UserInfo {
    // As kube-apiserver's `AuthenticatedGroupAdder`: every authenticated user is also in
    // system:authenticated, the group the default discovery and public-info bindings name.
    if !u.groups.iter().any(|g| g == "system:authenticated") {
        u.groups.push("system:authenticated".into());
    }
    u
}

// The default ClusterRole system:public-info-viewer, bound to authenticated and
// unauthenticated users alike; system:discovery is bound to system:authenticated only (since
// 1.14 discovery is not public).
const PUBLIC_INFO: &[&str] = &["/healthz", "/livez", "/readyz", "/version"];
const DISCOVERY: &[&str] = &["/api", "/apis", "/openapi"];

fn path_matches(pattern: &str, path: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => pattern == path,
    }
}

fn listed(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

fn rule_allows(rule: &Rule, info: &RequestInfo) -> bool {
    if !listed(&rule.verbs, &info.verb) {
        return false;
    }
    if !info.is_resource {
        return rule
            .non_resource_urls
            .iter()
            .any(|p| path_matches(p, &info.path));
    }
    let resource = if info.subresource.is_empty() {
        info.resource.clone()
    } else {
        format!("{}/{}", info.resource, info.subresource)
    };
    listed(&rule.api_groups, &info.group)
        && listed(&rule.resources, &resource)
        && (rule.namespaces.is_empty() || listed(&rule.namespaces, &info.namespace))
        && (rule.resource_names.is_empty() || rule.resource_names.contains(&info.name))
}

/// The message RBAC gives a denied request.
pub fn forbidden_message(user: &str, info: &RequestInfo) -> String {
    if !info.is_resource {
        return format!(
            "forbidden: User \"{user}\" cannot {} path \"{}\"",
            info.verb, info.path
        );
    }
    let qualified = if info.group.is_empty() {
        info.resource.clone()
    } else {
        format!("{}.{}", info.resource, info.group)
    };
    let subject = if info.name.is_empty() {
        qualified
    } else {
        format!("{qualified} \"{}\"", info.name)
    };
    let what = if info.subresource.is_empty() {
        info.resource.clone()
    } else {
        format!("{}/{}", info.resource, info.subresource)
    };
    let scope = if info.namespace.is_empty() || info.resource == "namespaces" {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", info.namespace)
    };
    format!(
        "{subject} is forbidden: User \"{user}\" cannot {} resource \"{what}\" in API group \"{}\" {scope}",
        info.verb, info.group
    )
}

/// Whether kube-apiserver's authorizer allows a request: `system:masters`, discovery and public
/// information for every (authenticated) user, the user's scenario `allow:` rules, or the RBAC
/// objects in the store. It also answers the SubjectAccessReviews extension backends create.
pub fn allowed(authn: &Authn, store: &Store, user: &UserInfo, info: &RequestInfo) -> bool {
    if user.is_master() {
        return true;
    }
    if !info.is_resource && info.verb == "get" {
        let public = PUBLIC_INFO
            .iter()
            .any(|p| info.path == *p || info.path.starts_with(&format!("{p}/")));
        let discovery = user.groups.iter().any(|g| g == "system:authenticated")
            && DISCOVERY
                .iter()
                .any(|p| info.path == *p || info.path.starts_with(&format!("{p}/")));
        if public || discovery {
            return true;
        }
    }
    let rules = authn
        .rules
        .get(&user.name)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    rules.iter().any(|r| rule_allows(r, info))
        || super::rbac::Objects::from_store(store).allows(
            &user.name,
            &user.groups,
            &super::rbac::Attributes::from(info),
        )
}

/// Authorize a request.
///
/// # Errors
/// 403 Forbidden with RBAC's wording.
pub fn authorize(
    authn: &Authn,
    store: &Store,
    user: &UserInfo,
    info: &RequestInfo,
) -> Result<(), ApiError> {
    if allowed(authn, store, user, info) {
        return Ok(());
    }
    Err(ApiError::forbidden(
        forbidden_message(&user.name, info),
        &info.name,
        &info.group,
        &info.resource,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages_are_rbacs() {
        let i = RequestInfo::parse(
            "GET",
            "/apis/wardle.example.com/v1alpha1/namespaces/wardle-system/flunders",
        );
        assert_eq!(
            forbidden_message("bob", &i),
            "flunders.wardle.example.com is forbidden: User \"bob\" cannot list resource \"flunders\" in API group \"wardle.example.com\" in the namespace \"wardle-system\""
        );
        let c = RequestInfo::parse("GET", "/api/v1/namespaces/default/configmaps/x");
        assert_eq!(
            forbidden_message("bob", &c),
            "configmaps \"x\" is forbidden: User \"bob\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""
        );
        let n = RequestInfo::parse("GET", "/metrics");
        assert_eq!(
            forbidden_message("bob", &n),
            "forbidden: User \"bob\" cannot get path \"/metrics\""
        );
    }
}
