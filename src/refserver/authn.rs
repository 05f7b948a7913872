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

use http::HeaderMap;

use super::request::RequestInfo;
use super::scenario::Rule;
use super::state::State;
use super::status::ApiError;
use super::tls::{PeerChain, client_identity};

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
    state: &State,
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
        let user = state.tokens.get(token).ok_or_else(ApiError::unauthorized)?;
        return Ok(with_authenticated(user.clone()));
    }
    if let Some(chain) = peer {
        let roots = [state.pki.client_ca.cert_der.clone()];
        if let Ok(id) = client_identity(chain, &roots, jiff::Timestamp::now()) {
            return Ok(with_authenticated(UserInfo {
                name: id.user,
                groups: id.groups,
            }));
        }
        return Err(ApiError::unauthorized());
    }
    if state.scenario.server.anonymous_auth {
        return Ok(UserInfo {
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
    state: &State,
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
        allowed(state, &user, &info)
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
    Ok(with_authenticated(UserInfo {
        name: target,
        groups,
    }))
}

fn with_authenticated(mut u: UserInfo) -> UserInfo {
    if !u.groups.iter().any(|g| g == "system:authenticated") {
        u.groups.push("system:authenticated".into());
    }
    u
}

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
pub fn allowed(state: &State, user: &UserInfo, info: &RequestInfo) -> bool {
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
    let rules = state
        .rules
        .get(&user.name)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    rules.iter().any(|r| rule_allows(r, info))
        || super::rbac::Objects::from_store(&state.store).allows(
            &user.name,
            &user.groups,
            &super::rbac::Attributes::from(info),
        )
}

/// Authorize a request.
///
/// # Errors
/// 403 Forbidden with RBAC's wording.
pub fn authorize(state: &State, user: &UserInfo, info: &RequestInfo) -> Result<(), ApiError> {
    if allowed(state, user, info) {
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
