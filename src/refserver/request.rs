//! What a request is for: apiserver's `RequestInfo` (`apiserver/pkg/endpoints/request/requestinfo.go`).
//!
//! It owns path parsing (API prefix, group, version, namespace, resource, name, subresource), the
//! verb (`get`/`list`/`watch`/`create`/`update`/`patch`/`delete`/`deletecollection`), the query
//! parameters the handlers read, and the metric labels derived from them. It does not know which
//! resources exist; the registry decides that.

use std::collections::BTreeMap;

/// A parsed request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// The path without query.
    pub path: String,
    /// `GET`, `POST`, …
    pub method: String,
    /// Whether it names an API resource (as opposed to `/version`, discovery, …).
    pub is_resource: bool,
    /// `api` or `apis` for API paths.
    pub prefix: String,
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Namespace ("" when cluster-scoped).
    pub namespace: String,
    /// Resource (plural).
    pub resource: String,
    /// Object name.
    pub name: String,
    /// Subresource.
    pub subresource: String,
    /// Kubernetes verb.
    pub verb: String,
    /// Decoded query parameters (last value wins).
    pub query: BTreeMap<String, String>,
}

impl RequestInfo {
    /// Parse a method and a path with query.
    pub fn parse(method: &str, path_and_query: &str) -> Self {
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, q),
            None => (path_and_query, ""),
        };
        // Go's `url.Values.Get` reads a repeated parameter's first value.
        let mut params: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            params
                .entry(k.into_owned())
                .or_insert_with(|| v.into_owned());
        }
        let query = params;
        let mut info = RequestInfo {
            path: path.to_string(),
            method: method.to_ascii_uppercase(),
            query,
            ..Default::default()
        };
        info.verb = info.method.to_ascii_lowercase();
        let parts: Vec<&str> = path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let Some(first) = parts.first() else {
            return info;
        };
        if *first != "api" && *first != "apis" {
            return info;
        }
        info.prefix = first.to_string();
        let mut rest: &[&str] = &parts[1..];
        if info.prefix == "apis" {
            let Some(g) = rest.first() else { return info };
            info.group = g.to_string();
            rest = &rest[1..];
        }
        let Some(v) = rest.first() else { return info };
        info.version = v.to_string();
        rest = &rest[1..];
        if rest.is_empty() {
            return info;
        }
        info.is_resource = true;
        let mut watch_path = false;
        if rest[0] == "watch" {
            watch_path = true;
            rest = &rest[1..];
        }
        if rest.first() == Some(&"namespaces") && rest.len() > 1 {
            info.namespace = rest[1].to_string();
            if rest.len() > 2 && rest[2] != "status" && rest[2] != "finalize" {
                rest = &rest[2..];
            }
        }
        if let Some(r) = rest.first() {
            info.resource = r.to_string();
        }
        if let Some(n) = rest.get(1) {
            info.name = n.to_string();
        }
        if let Some(s) = rest.get(2) {
            info.subresource = s.to_string();
        }
        // runtime's `Convert_Slice_string_To_bool` (apimachinery/pkg/runtime/conversion.go)
        // decodes `watch=`: only `0` and `false` are false, so `watch=yes` watches.
        let watch_param = crate::semantics::query_bool::query_bool(
            info.query.get("watch").map(String::as_str).into_iter(),
        );
        // requestinfo.go: the `/watch/` prefix sets the verb outright; otherwise only a GET that
        // names no object (a list) reads `watch`, so a named GET with `?watch=1` is a `get`. (A
        // list's `fieldSelector=metadata.name=…` sets the name only after the verb is decided.)
        info.verb = match info.method.as_str() {
            "GET" | "HEAD" if watch_path => "watch",
            "GET" | "HEAD" if watch_param && info.name.is_empty() => "watch",
            "GET" | "HEAD" if info.name.is_empty() => "list",
            "GET" | "HEAD" => "get",
            "POST" => "create",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" if info.name.is_empty() => "deletecollection",
            "DELETE" => "delete",
            other => {
                return RequestInfo {
                    verb: other.to_ascii_lowercase(),
                    ..info
                };
            }
        }
        .to_string();
        info
    }

    /// The API group/version string (`v1` for core).
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// A query parameter.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query.get(key).map(String::as_str)
    }

    /// `dryRun=All` was asked for.
    pub fn dry_run(&self) -> bool {
        self.param("dryRun") == Some("All")
    }

    /// The `verb` label of apiserver request metrics (uppercase, `LIST`/`WATCH` split out).
    pub fn metric_verb(&self) -> String {
        if !self.is_resource {
            return self.method.clone();
        }
        match self.verb.as_str() {
            "list" => "LIST".into(),
            "watch" => "WATCH".into(),
            "get" => "GET".into(),
            "create" => "POST".into(),
            "update" => "PUT".into(),
            "patch" => "PATCH".into(),
            "delete" | "deletecollection" => "DELETE".into(),
            other => other.to_ascii_uppercase(),
        }
    }

    /// The `scope` label: `resource` (named), `namespace` or `cluster`; "" for non-resource paths.
    pub fn metric_scope(&self) -> &'static str {
        if !self.is_resource {
            ""
        } else if !self.name.is_empty() {
            "resource"
        } else if !self.namespace.is_empty() {
            "namespace"
        } else {
            "cluster"
        }
    }

    /// The `subresource` label: the subresource, or for non-resource requests the path (kube-apiserver
    /// puts the path there, as the real captures show).
    pub fn metric_subresource(&self) -> String {
        if self.is_resource {
            self.subresource.clone()
        } else {
            self.path.clone()
        }
    }

    /// Whether the request is long-running (watches are exempt from the request timeout).
    pub fn is_long_running(&self) -> bool {
        self.verb == "watch" || matches!(self.subresource.as_str(), "log" | "exec" | "proxy")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_requestinfo_factory() {
        let i = RequestInfo::parse(
            "GET",
            "/apis/wardle.example.com/v1alpha1/namespaces/wardle-system/flunders?limit=500",
        );
        assert_eq!(
            (i.group.as_str(), i.version.as_str(), i.namespace.as_str()),
            ("wardle.example.com", "v1alpha1", "wardle-system")
        );
        assert_eq!((i.resource.as_str(), i.verb.as_str()), ("flunders", "list"));
        assert_eq!(i.param("limit"), Some("500"));
        let ns = RequestInfo::parse("GET", "/api/v1/namespaces/kube-system");
        assert_eq!(
            (ns.resource.as_str(), ns.name.as_str()),
            ("namespaces", "kube-system")
        );
        let w = RequestInfo::parse("GET", "/api/v1/configmaps?watch=1&resourceVersion=5");
        assert_eq!(w.verb, "watch");
        let g = RequestInfo::parse("GET", "/api/v1/namespaces/a/configmaps/x?watch=1");
        assert_eq!((g.verb.as_str(), g.name.as_str()), ("get", "x"));
        let p = RequestInfo::parse("GET", "/api/v1/watch/namespaces/a/configmaps/x");
        assert_eq!((p.verb.as_str(), p.name.as_str()), ("watch", "x"));
        let d = RequestInfo::parse("GET", "/apis/wardle.example.com/v1alpha1");
        assert!(!d.is_resource);
        assert_eq!(d.metric_subresource(), "/apis/wardle.example.com/v1alpha1");
        let s = RequestInfo::parse(
            "PUT",
            "/apis/apiregistration.k8s.io/v1/apiservices/x/status",
        );
        assert_eq!((s.name.as_str(), s.subresource.as_str()), ("x", "status"));
    }
}
