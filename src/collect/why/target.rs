//! What one request addresses, read from its method and path the way kube-apiserver's
//! `RequestInfoFactory` reads them: discovery (`/apis/<group>/<version>`), a resource
//! (`/apis/<group>/<version>/namespaces/<ns>/<resource>/<name>/<subresource>`), or a non-resource
//! URL (`/healthz`, `/metrics`, `/version`).
//!
//! Pure: no request is made here. What serves the addressed resource — kube-apiserver itself, a CRD,
//! an extension server behind an APIService — is found out later by asking the cluster
//! ([`super::gather`]). Bad input (a method `why` does not send, a path that is not one) is a
//! [`TargetError`], which the command line turns into exit code 2.

use serde::Serialize;

pub use crate::bundle::trace::{Addressed, Method, ResourcePath};

/// Why a method or path cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// A method other than GET, LIST and WATCH.
    #[error(
        "method {0:?}: why sends GET, LIST or WATCH; a write is sent only as a server-side dry run \
         (why --dry-run -f OBJECT.yaml)"
    )]
    Method(String),
    /// Not an absolute API path.
    #[error("path {path:?}: {why}")]
    Path {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

/// `GET`, `LIST` or `WATCH` as typed on the command line (any case).
///
/// # Errors
/// [`TargetError::Method`] for anything else, writes included.
fn parse_method(s: &str) -> Result<Method, TargetError> {
    match s.to_ascii_uppercase().as_str() {
        "GET" => Ok(Method::Get),
        "LIST" => Ok(Method::List),
        "WATCH" => Ok(Method::Watch),
        _ => Err(TargetError::Method(s.to_string())),
    }
}

/// What kube-apiserver's `RequestInfoFactory.NewRequestInfo` (apiserver
/// endpoints/request/requestinfo.go) makes of a target that addresses a resource: the fields APF
/// (`FlowRequest::of_target`) and admission (`AdmissionRequest::of_target`) match on, derived in
/// one place so the two cannot read the same path differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestAttributes<'a> {
    /// The Kubernetes verb ([`Target::verb`]).
    pub verb: &'a str,
    /// Group (`""` core).
    pub group: &'a str,
    /// Version.
    pub version: &'a str,
    /// Namespace (`None` for cluster scope).
    pub namespace: Option<&'a str>,
    /// Resource (plural).
    pub resource: &'a str,
    /// `""` or the one segment after the name (`Parts[2]`): Go keeps nothing deeper, so
    /// `pods/p/proxy/healthz` is subresource `proxy`.
    pub subresource: &'a str,
}

impl RequestAttributes<'_> {
    /// `resource` or `resource/subresource`, as APF, RBAC and webhook rules spell it.
    pub fn resource_with_subresource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// One request to send: method, path with query, and what it addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    /// How it is sent.
    pub method: Method,
    /// The path with its query, as sent (WATCH adds `watch=1`, writes `dryRun=All`).
    pub path: String,
    /// What it addresses.
    pub addressed: Addressed,
    /// The Kubernetes verb kube-apiserver authorizes and APF classifies it with (`get`, `list`,
    /// `watch`, `create`, `update`).
    pub verb: String,
}

impl Target {
    /// Parse `METHOD PATH` from the command line.
    ///
    /// # Errors
    /// [`TargetError`] for a method that is not GET/LIST/WATCH, a path that is not an absolute API
    /// path, or a LIST of a path that names an object.
    pub fn parse(method: &str, path: &str) -> Result<Target, TargetError> {
        let method = parse_method(method)?;
        Target::new(method, path)
    }

    /// A target for `method` on `path` (`path` may carry a query).
    ///
    /// # Errors
    /// As [`Target::parse`].
    pub fn new(method: Method, path: &str) -> Result<Target, TargetError> {
        let bad = |why: &str| TargetError::Path {
            path: path.to_string(),
            why: why.to_string(),
        };
        if path.contains("://") {
            return Err(bad(
                "give the path only (e.g. /apis/metrics.k8s.io/v1beta1/nodes); the server comes from the kubeconfig",
            ));
        }
        if !path.starts_with('/') {
            return Err(bad(
                "not an absolute path (e.g. /api/v1/namespaces/default/configmaps)",
            ));
        }
        if path
            .chars()
            // A `#fragment` is never sent to a server, so the request sent would silently differ
            // from the one asked about.
            .any(|c| c.is_whitespace() || c.is_control() || c == '#')
        {
            return Err(bad("paths contain no spaces, control characters or '#'"));
        }
        let (bare, query) = match path.split_once('?') {
            Some((p, q)) => (p, q),
            None => (path, ""),
        };
        let trimmed = bare.trim_end_matches('/');
        let parts: Vec<&str> = if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed[1..].split('/').collect()
        };
        // Clients and servers normalise such segments differently; refusing them keeps the path
        // that is reasoned about the path that is sent.
        if parts
            .iter()
            .any(|p| p.is_empty() || *p == "." || *p == "..")
        {
            return Err(bad("empty, '.' or '..' path segment"));
        }
        let addressed = addressed(&parts).map_err(|why| bad(&why))?;
        let watch_param = query_has_watch(query);
        let names_object = matches!(&addressed, Addressed::Resource(r) if r.name.is_some());
        // RequestInfoFactory.NewRequestInfo (apiserver endpoints/request/requestinfo.go) reads
        // `watch` only when the path names no object (a list); a GET of a named object stays a
        // `get` whatever its query, and its handler answers with the object, not a stream. (A
        // list's `fieldSelector=metadata.name=…` sets the name after the verb is decided, so
        // such a watch stays a watch.)
        let method = if method == Method::Get && watch_param && !names_object {
            Method::Watch
        } else {
            method
        };
        if method == Method::List && names_object {
            return Err(bad(
                "LIST needs a collection path; this one names an object (use GET)",
            ));
        }
        if method == Method::Watch && names_object {
            return Err(bad(
                "WATCH needs a collection path; kube-apiserver serves a named object with watch=1 as a plain get (watch one object with ?fieldSelector=metadata.name=NAME on its collection)",
            ));
        }
        if method == Method::Watch && !matches!(addressed, Addressed::Resource(_)) {
            return Err(bad("only resources can be watched"));
        }
        let mut full = path.to_string();
        if method == Method::Watch && !watch_param {
            full.push(if query.is_empty() { '?' } else { '&' });
            full.push_str("watch=1");
        }
        if method.is_write() && !query_has(query, "dryRun", "All") {
            full.push(if full.contains('?') { '&' } else { '?' });
            full.push_str("dryRun=All");
        }
        // The verb RequestInfoFactory derives, which authorization and APF classification see:
        // a GET of a collection is `list`, of one object `get`, and `watch=` makes a list `watch`.
        let verb = match method {
            Method::Watch => "watch",
            Method::DryRunCreate => "create",
            Method::DryRunUpdate => "update",
            Method::List => "list",
            Method::Get if names_object => "get",
            Method::Get if matches!(addressed, Addressed::Resource(_)) => "list",
            Method::Get => "get",
        };
        Ok(Target {
            method,
            path: full,
            addressed,
            verb: verb.to_string(),
        })
    }

    /// The path without its query.
    pub fn bare_path(&self) -> &str {
        self.path.split('?').next().unwrap_or(&self.path)
    }

    /// The resource the path addresses, if any.
    pub fn resource(&self) -> Option<&ResourcePath> {
        match &self.addressed {
            Addressed::Resource(r) => Some(r),
            _ => None,
        }
    }

    /// The request attributes kube-apiserver derives for a resource path; `None` for discovery
    /// and non-resource paths.
    pub fn attributes(&self) -> Option<RequestAttributes<'_>> {
        self.resource().map(|r| RequestAttributes {
            verb: &self.verb,
            group: &r.group,
            version: &r.version,
            namespace: r.namespace.as_deref(),
            resource: &r.resource,
            subresource: r
                .subresource
                .as_deref()
                .and_then(|s| s.split('/').next())
                .unwrap_or(""),
        })
    }

    /// Group and version the path addresses (resource or discovery), if it names both.
    pub fn group_version(&self) -> Option<(&str, &str)> {
        match &self.addressed {
            Addressed::Resource(r) => Some((&r.group, &r.version)),
            Addressed::Discovery {
                group,
                version: Some(v),
            } => Some((group, v)),
            _ => None,
        }
    }

    /// The group the path addresses, if it names one (`""` is the core group).
    pub fn group(&self) -> Option<&str> {
        match &self.addressed {
            Addressed::Resource(r) => Some(&r.group),
            Addressed::Discovery { group, .. } if !group.is_empty() => Some(group),
            _ => None,
        }
    }
}

fn query_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned()))
}

/// The query has `key=value`.
pub(super) fn query_has(query: &str, key: &str, value: &str) -> bool {
    query_pairs(query).any(|(k, v)| k == key && v == value)
}

/// The query asks for a watch as kube-apiserver reads `watch=`: its first value decoded by
/// runtime's `Convert_Slice_string_To_bool` (apimachinery/pkg/runtime/conversion.go), so
/// `watch=yes` and a bare `watch` are watches and only `0`/`false` are not.
fn query_has_watch(query: &str) -> bool {
    let values: Vec<String> = query_pairs(query)
        .filter(|(k, _)| k == "watch")
        .map(|(_, v)| v)
        .collect();
    crate::semantics::query_bool::query_bool(values.iter().map(String::as_str))
}

fn valid_segment(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '%' | '~'))
}

/// kube-apiserver's reading of the path segments after the leading `/`.
fn addressed(parts: &[&str]) -> Result<Addressed, String> {
    let (group, rest) = match parts {
        ["api"] => {
            return Ok(Addressed::Discovery {
                group: String::new(),
                version: None,
            });
        }
        ["apis"] => {
            return Ok(Addressed::Discovery {
                group: String::new(),
                version: None,
            });
        }
        ["api", rest @ ..] => (String::new(), rest),
        ["apis", group] => {
            if !valid_segment(group) {
                return Err(format!("{group:?} is not an API group"));
            }
            return Ok(Addressed::Discovery {
                group: group.to_string(),
                version: None,
            });
        }
        ["apis", group, rest @ ..] => {
            if !valid_segment(group) {
                return Err(format!("{group:?} is not an API group"));
            }
            (group.to_string(), rest)
        }
        _ => return Ok(Addressed::NonResource),
    };
    let Some((version, mut rest)) = rest.split_first() else {
        return Err("no API version".into());
    };
    if !valid_segment(version) {
        return Err(format!("{version:?} is not an API version"));
    }
    if rest.is_empty() {
        return Ok(Addressed::Discovery {
            group,
            version: Some(version.to_string()),
        });
    }
    if let Some(bad) = rest.iter().find(|s| !valid_segment(s)) {
        return Err(format!("{bad:?} is not a resource, namespace or name"));
    }
    let mut namespace = None;
    // `namespaces/<ns>/<resource>…` is namespaced; `namespaces/<ns>` and its `status`/`finalize`
    // are the Namespace object itself (its namespace is its own name, as kube-apiserver sets it).
    if rest[0] == "namespaces" && rest.len() > 1 {
        namespace = Some(rest[1].to_string());
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest = &rest[2..];
        }
    }
    let resource = rest[0].to_string();
    let name = rest.get(1).map(|s| s.to_string());
    let subresource = if rest.len() > 2 {
        Some(rest[2..].join("/"))
    } else {
        None
    };
    Ok(Addressed::Resource(ResourcePath {
        group,
        version: version.to_string(),
        namespace,
        resource,
        name,
        subresource,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(t: &Target) -> &ResourcePath {
        t.resource().expect("a resource")
    }

    #[test]
    fn resource_paths_are_read_like_kube_apiserver() {
        let t = Target::parse(
            "get",
            "/apis/wardle.example.com/v1alpha1/namespaces/ns1/flunders",
        )
        .unwrap();
        assert_eq!(t.method, Method::Get);
        assert_eq!(t.verb, "list");
        let r = res(&t);
        assert_eq!(
            (r.group.as_str(), r.version.as_str()),
            ("wardle.example.com", "v1alpha1")
        );
        assert_eq!(r.namespace.as_deref(), Some("ns1"));
        assert_eq!(r.resource, "flunders");
        assert!(r.name.is_none());

        let t = Target::parse("GET", "/api/v1/namespaces/kube-system/pods/p1/log").unwrap();
        assert_eq!(t.verb, "get");
        let r = res(&t);
        assert_eq!(r.group, "");
        assert_eq!(r.resource_with_subresource(), "pods/log");
        assert_eq!(r.name.as_deref(), Some("p1"));

        // The Namespace object itself.
        let t = Target::parse("GET", "/api/v1/namespaces/team-a").unwrap();
        let r = res(&t);
        assert_eq!(
            (r.resource.as_str(), r.name.as_deref()),
            ("namespaces", Some("team-a"))
        );
        let t = Target::parse("GET", "/api/v1/namespaces/team-a/status").unwrap();
        assert_eq!(res(&t).subresource.as_deref(), Some("status"));

        let t = Target::parse("GET", "/apis/apps/v1/deployments").unwrap();
        assert!(res(&t).namespace.is_none());
    }

    #[test]
    fn discovery_and_non_resource_paths() {
        let t = Target::parse("GET", "/apis/metrics.k8s.io/v1beta1").unwrap();
        assert_eq!(
            t.addressed,
            Addressed::Discovery {
                group: "metrics.k8s.io".into(),
                version: Some("v1beta1".into())
            }
        );
        assert_eq!(t.group_version(), Some(("metrics.k8s.io", "v1beta1")));
        let t = Target::parse("GET", "/apis/metrics.k8s.io/").unwrap();
        assert_eq!(t.group(), Some("metrics.k8s.io"));
        assert_eq!(t.group_version(), None);
        assert_eq!(
            Target::parse("GET", "/healthz").unwrap().addressed,
            Addressed::NonResource
        );
        assert!(matches!(
            Target::parse("GET", "/api").unwrap().addressed,
            Addressed::Discovery { .. }
        ));
    }

    #[test]
    fn watches_and_writes_carry_their_query() {
        let t = Target::parse("WATCH", "/api/v1/namespaces/a/configmaps").unwrap();
        assert_eq!(t.path, "/api/v1/namespaces/a/configmaps?watch=1");
        assert_eq!(t.verb, "watch");
        let t = Target::parse(
            "get",
            "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5",
        )
        .unwrap();
        assert_eq!(t.method, Method::Watch);
        assert_eq!(
            t.path,
            "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5"
        );
        assert_eq!(t.bare_path(), "/api/v1/namespaces/a/configmaps");
        let t = Target::new(Method::DryRunCreate, "/api/v1/namespaces/a/configmaps").unwrap();
        assert_eq!(t.path, "/api/v1/namespaces/a/configmaps?dryRun=All");
        assert_eq!(t.verb, "create");
        assert_eq!(t.method.http(), http::Method::POST);
        let t = Target::new(
            Method::DryRunUpdate,
            "/api/v1/namespaces/a/configmaps/x?dryRun=All",
        )
        .unwrap();
        assert_eq!(t.path, "/api/v1/namespaces/a/configmaps/x?dryRun=All");
    }

    #[test]
    fn a_named_object_is_a_get_whatever_its_watch_parameter() {
        // requestinfo.go: only a GET without a name becomes `list` or `watch`.
        for q in ["watch=1", "watch=true"] {
            let t =
                Target::parse("GET", &format!("/api/v1/namespaces/a/configmaps/x?{q}")).unwrap();
            assert_eq!((t.method, t.verb.as_str()), (Method::Get, "get"), "{q}");
            assert_eq!(t.path, format!("/api/v1/namespaces/a/configmaps/x?{q}"));
        }
        // A list narrowed to one name by fieldSelector is still a watch.
        let t = Target::parse(
            "GET",
            "/api/v1/namespaces/a/configmaps?fieldSelector=metadata.name%3Dx&watch=1",
        )
        .unwrap();
        assert_eq!((t.method, t.verb.as_str()), (Method::Watch, "watch"));
        let e = Target::parse("WATCH", "/api/v1/namespaces/a/configmaps/x").unwrap_err();
        assert!(e.to_string().contains("WATCH needs a collection"), "{e}");
    }

    #[test]
    fn attributes_keep_one_subresource_segment() {
        let t = Target::parse("GET", "/api/v1/namespaces/a/pods/p/proxy/healthz").unwrap();
        let a = t.attributes().unwrap();
        assert_eq!(
            (
                a.verb,
                a.group,
                a.version,
                a.namespace,
                a.resource,
                a.subresource
            ),
            ("get", "", "v1", Some("a"), "pods", "proxy")
        );
        assert_eq!(a.resource_with_subresource(), "pods/proxy");
        let t = Target::parse("GET", "/apis/apps/v1/deployments").unwrap();
        assert_eq!(
            t.attributes().unwrap().resource_with_subresource(),
            "deployments"
        );
        assert!(
            Target::parse("GET", "/healthz")
                .unwrap()
                .attributes()
                .is_none()
        );
    }

    #[test]
    fn bad_input_is_refused() {
        for m in ["POST", "delete", "PATCH", "put"] {
            assert!(matches!(
                Target::parse(m, "/api/v1/pods"),
                Err(TargetError::Method(_))
            ));
        }
        for p in [
            "api/v1/pods",
            "https://10.0.0.1:6443/api/v1/pods",
            "/api/v1/name spaces",
            "/api//v1",
            "/apis/a b",
            "/api/../etc",
        ] {
            assert!(
                matches!(Target::parse("GET", p), Err(TargetError::Path { .. })),
                "{p}"
            );
        }
        let e = Target::parse("LIST", "/api/v1/namespaces/a/configmaps/x").unwrap_err();
        assert!(e.to_string().contains("LIST needs a collection"), "{e}");
        assert!(Target::parse("WATCH", "/healthz").is_err());
    }
}
