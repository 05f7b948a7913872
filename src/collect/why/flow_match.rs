//! Which FlowSchema classifies a request — APF's own matching, done on the objects read from the
//! cluster: in `matchingPrecedence` order (ties by name), the first schema with a rule whose subjects
//! match the user and whose resource or non-resource rules match the request wins.
//!
//! FlowSchemas are read as JSON because every flowcontrol version (v1beta1…v1) has the same spec
//! shape there, and the bundle's own `FlowSchema` keeps the union of a rule's resource rules, which
//! is too coarse to match with. Pure: the caller fetches the schemas.
//!
//! The reference server classifies its own requests with its own copy (`refserver/apf.rs`), kept
//! apart on purpose: it is the oracle `why` is tested against, and a shared model would agree with
//! itself when wrong. `tests/semantics/flow_schema.yaml` holds both to apiserver's `match.go`.

use serde_json::Value;

pub use crate::bundle::trace::{FlowMatch, UserInfo};

/// What APF classifies a request on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRequest<'a> {
    /// The user.
    pub user: &'a UserInfo,
    /// Kubernetes verb (`get`, `list`, `watch`, `create`, …).
    pub verb: &'a str,
    /// For resource requests: group, `resource[/subresource]`, namespace (`None` = cluster scope).
    pub resource: Option<(&'a str, String, Option<&'a str>)>,
    /// The path without the query (for non-resource rules).
    pub path: &'a str,
}

impl<'a> FlowRequest<'a> {
    /// What APF classifies `target` on when `user` sends it: the fields of apiserver's
    /// `RequestInfo` (`RequestInfoFactory.NewRequestInfo`, endpoints/request/requestinfo.go) that
    /// `matchesResourcePolicyRule` (util/flowcontrol/match.go) reads.
    ///
    /// The Namespace object is no exception: for `/api/v1/namespaces/<n>` and its `status` and
    /// `finalize` subresources `NewRequestInfo` sets `Namespace = <n>` as for any path under
    /// `namespaces/<n>`, so the rule's `namespaces` decide and `clusterScope` does not; only the
    /// collection `/api/v1/namespaces` (list, watch, create) has no namespace. The subresource is
    /// the one segment after the name (`Parts[2]`); deeper segments (`pods/p/proxy/healthz`) are
    /// not part of it.
    pub fn of_target(user: &'a UserInfo, target: &'a super::target::Target) -> Self {
        FlowRequest {
            user,
            verb: &target.verb,
            resource: target
                .attributes()
                .map(|a| (a.group, a.resource_with_subresource(), a.namespace)),
            path: target.bare_path(),
        }
    }
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn s<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// `x` is in `list`, or `list` has `*`.
// Go's `containsString` honours the wildcard only as the list's sole member; validation rejects
// `*` beside other entries, so "anywhere in the list" gives the same answer on valid objects.
pub(super) fn has_or_star(list: &[&str], x: &str) -> bool {
    list.iter().any(|i| *i == "*" || *i == x)
}

/// The subject of a FlowSchema rule that matches the user, in words.
fn subject_match(subject: &Value, user: &UserInfo) -> Option<String> {
    match s(subject, "/kind") {
        "User" => {
            let name = s(subject, "/user/name");
            (name == "*" || name == user.name).then(|| format!("user {name:?}"))
        }
        "Group" => {
            let name = s(subject, "/group/name");
            (name == "*" || user.groups.iter().any(|g| g == name))
                .then(|| format!("group {name:?}"))
        }
        // A service account authenticates as `system:serviceaccount:<ns>:<name>`, so Go matches
        // the username (`serviceaccount.MatchesUsername`; for name `*` only the namespace part,
        // `serviceAccountMatchesNamespace`), never the groups.
        "ServiceAccount" => {
            let ns = s(subject, "/serviceAccount/namespace");
            let name = s(subject, "/serviceAccount/name");
            let prefix = format!("system:serviceaccount:{ns}:");
            let hit = user
                .name
                .strip_prefix(&prefix)
                .is_some_and(|n| name == "*" || n == name);
            hit.then(|| format!("service account {ns}/{name}"))
        }
        _ => None,
    }
}

fn resource_rule_matches(rule: &Value, req: &FlowRequest<'_>) -> bool {
    let Some((group, resource, namespace)) = &req.resource else {
        return false;
    };
    let verbs = strs(rule.get("verbs"));
    let groups = strs(rule.get("apiGroups"));
    let resources = strs(rule.get("resources"));
    // `resource` is already `resource/subresource` (Go's `rsJoin`): a rule naming `pods` does
    // not cover `pods/log`.
    if !has_or_star(&verbs, req.verb)
        || !has_or_star(&groups, group)
        || !has_or_star(&resources, resource)
    {
        return false;
    }
    // Go's `matchesResourcePolicyRule`: a request without a namespace (a cluster-scoped object,
    // or a list across all namespaces) matches only `clusterScope: true`; `namespaces: ["*"]`
    // covers every namespace but never the namespace-less request.
    match namespace {
        Some(ns) => has_or_star(&strs(rule.get("namespaces")), ns),
        None => rule.get("clusterScope").and_then(Value::as_bool) == Some(true),
    }
}

/// apiserver's `matchPolicyRuleNonResourceURL`: `*`, the path itself, or — after dropping one
/// trailing `*` and ensuring a trailing `/` — a prefix of the path. So `/healthz/*` covers
/// `/healthz/etcd` and not `/healthz` ("`/healthz/*` matches all per-component health checks"),
/// and a pattern without `*` covers the paths below it too. Written apart from the reference
/// server's copy on purpose (see `crate::semantics`); `tests/semantics/flow_schema.yaml` holds
/// both to the Go answers.
fn url_matches(pattern: &str, path: &str) -> bool {
    if pattern == "*" || pattern == path {
        return true;
    }
    let mut prefix = pattern.strip_suffix('*').unwrap_or(pattern).to_string();
    if !prefix.ends_with('/') {
        prefix.push('/');
    }
    path.starts_with(&prefix)
}

// Go's `matchesPolicyRule` tries `resourceRules` for resource requests and `nonResourceRules`
// for the rest, never both, so a `*` non-resource rule does not catch a resource request.
fn non_resource_rule_matches(rule: &Value, req: &FlowRequest<'_>) -> bool {
    req.resource.is_none()
        && has_or_star(&strs(rule.get("verbs")), req.verb)
        && strs(rule.get("nonResourceURLs"))
            .iter()
            .any(|p| url_matches(p, req.path))
}

/// The FlowSchema APF puts the request in: lowest `matchingPrecedence` first, ties by name.
pub fn match_flow_schema(schemas: &[Value], req: &FlowRequest<'_>) -> Option<FlowMatch> {
    let mut ordered: Vec<&Value> = schemas.iter().collect();
    // 1000 is what the API defaults an unset `matchingPrecedence` to (flowcontrol types.go).
    // Equal precedences fall back to the name, as APF's own config tests order them
    // (`fsPrecedes`): without it the winner would depend on list order.
    ordered.sort_by(|a, b| {
        let p = |v: &Value| {
            v.pointer("/spec/matchingPrecedence")
                .and_then(Value::as_i64)
                .unwrap_or(1000)
        };
        p(a).cmp(&p(b))
            .then_with(|| s(a, "/metadata/name").cmp(s(b, "/metadata/name")))
    });
    for (i, fs) in ordered.iter().enumerate() {
        let rules = fs
            .pointer("/spec/rules")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (n, rule) in rules.iter().enumerate() {
            let Some(who) = rule
                .get("subjects")
                .and_then(Value::as_array)
                .and_then(|subs| subs.iter().find_map(|x| subject_match(x, req.user)))
            else {
                continue;
            };
            let what = if rule
                .get("resourceRules")
                .and_then(Value::as_array)
                .is_some_and(|rs| rs.iter().any(|r| resource_rule_matches(r, req)))
            {
                "a resource rule"
            } else if rule
                .get("nonResourceRules")
                .and_then(Value::as_array)
                .is_some_and(|rs| rs.iter().any(|r| non_resource_rule_matches(r, req)))
            {
                "a non-resource rule"
            } else {
                continue;
            };
            return Some(FlowMatch {
                name: s(fs, "/metadata/name").to_string(),
                uid: s(fs, "/metadata/uid").to_string(),
                precedence: fs
                    .pointer("/spec/matchingPrecedence")
                    .and_then(Value::as_i64)
                    .unwrap_or(1000),
                priority_level: s(fs, "/spec/priorityLevelConfiguration/name").to_string(),
                reason: format!("rule {} matches {who} and {what}", n + 1),
                tried_before: i,
            });
        }
    }
    None
}

/// The APF objects of one request: the schema that matched, the one the response named, and their
/// priority levels (plus the level the response named).
#[derive(Debug, Default)]
pub struct KeptFlow<'v> {
    /// FlowSchemas to keep.
    pub schemas: Vec<&'v Value>,
    /// PriorityLevelConfigurations to keep.
    pub levels: Vec<&'v Value>,
    /// The name of the FlowSchema whose UID the response carried.
    pub from_header: Option<String>,
}

fn uid_of(v: &Value) -> &str {
    s(v, "/metadata/uid")
}

fn name_of(v: &Value) -> &str {
    s(v, "/metadata/name")
}

/// Keep the matched schema, the schema and level the response headers name, and the levels of the
/// kept schemas — every other APF object is not on this request's path.
pub fn keep_flow_objects<'v>(
    schemas: &'v [Value],
    levels: &'v [Value],
    matched: Option<&FlowMatch>,
    schema_uid: Option<&str>,
    level_uid: Option<&str>,
) -> KeptFlow<'v> {
    // The response names its FlowSchema and priority level by UID only
    // (`X-Kubernetes-PF-FlowSchema-UID`, `X-Kubernetes-PF-PriorityLevel-UID`, REFERENCE §2.3),
    // so they are resolved against the listed objects. When matching and the header disagree
    // (the user guessed wrong, or the schemas changed between the request and the list) both
    // are kept: the disagreement is itself evidence.
    let from_header = schema_uid
        .filter(|u| !u.is_empty())
        .and_then(|uid| schemas.iter().find(|x| uid_of(x) == uid))
        .map(|x| name_of(x).to_string());
    let names: Vec<&str> = matched
        .map(|m| m.name.as_str())
        .into_iter()
        .chain(from_header.as_deref())
        .collect();
    let kept_schemas: Vec<&Value> = schemas
        .iter()
        .filter(|x| names.contains(&name_of(x)))
        .collect();
    let mut level_names: Vec<&str> = kept_schemas
        .iter()
        .map(|x| s(x, "/spec/priorityLevelConfiguration/name"))
        .collect();
    if let Some(l) = level_uid
        .filter(|u| !u.is_empty())
        .and_then(|uid| levels.iter().find(|l| uid_of(l) == uid))
    {
        level_names.push(name_of(l));
    }
    KeptFlow {
        levels: levels
            .iter()
            .filter(|l| level_names.contains(&name_of(l)))
            .collect(),
        schemas: kept_schemas,
        from_header,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            source: "--as".into(),
        }
    }

    fn schemas() -> Vec<Value> {
        vec![
            json!({"metadata": {"name": "catch-all", "uid": "u-ca"}, "spec": {
                "matchingPrecedence": 10000, "priorityLevelConfiguration": {"name": "catch-all"},
                "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
                           "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}],
                           "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}),
            json!({"metadata": {"name": "exempt", "uid": "u-ex"}, "spec": {
                "matchingPrecedence": 1, "priorityLevelConfiguration": {"name": "exempt"},
                "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:masters"}}],
                           "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"], "clusterScope": true}]}]}}),
            json!({"metadata": {"name": "flooders", "uid": "u-fl"}, "spec": {
                "matchingPrecedence": 100, "priorityLevelConfiguration": {"name": "tiny"},
                "rules": [{"subjects": [{"kind": "User", "user": {"name": "flooder"}}],
                           "resourceRules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"], "namespaces": ["apf-load"]}]}]}}),
            json!({"metadata": {"name": "controllers", "uid": "u-sa"}, "spec": {
                "matchingPrecedence": 100, "priorityLevelConfiguration": {"name": "workload"},
                "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "ops", "name": "*"}}],
                           "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz/*"]}]}]}}),
        ]
    }

    #[test]
    fn the_lowest_precedence_matching_schema_wins() {
        let u = user("flooder", &["system:authenticated"]);
        let req = FlowRequest {
            user: &u,
            verb: "list",
            resource: Some(("", "configmaps".into(), Some("apf-load"))),
            path: "/api/v1/namespaces/apf-load/configmaps",
        };
        let m = match_flow_schema(&schemas(), &req).unwrap();
        assert_eq!((m.name.as_str(), m.uid.as_str()), ("flooders", "u-fl"));
        assert_eq!(m.priority_level, "tiny");
        assert_eq!(
            m.tried_before, 2,
            "exempt first, then controllers (same precedence, earlier by name)"
        );
        assert!(m.reason.contains("user \"flooder\""), "{}", m.reason);

        // Another namespace falls through to catch-all; cluster scope needs clusterScope.
        let req = FlowRequest {
            resource: Some(("", "configmaps".into(), Some("other"))),
            ..req
        };
        assert_eq!(
            match_flow_schema(&schemas(), &req).unwrap().name,
            "catch-all"
        );
        let admin = user("admin", &["system:masters", "system:authenticated"]);
        let req = FlowRequest {
            user: &admin,
            ..req
        };
        assert_eq!(match_flow_schema(&schemas(), &req).unwrap().name, "exempt");
    }

    #[test]
    fn service_accounts_and_non_resource_urls() {
        let u = user("system:serviceaccount:ops:robot", &[]);
        let req = FlowRequest {
            user: &u,
            verb: "get",
            resource: None,
            path: "/healthz/etcd",
        };
        assert_eq!(
            match_flow_schema(&schemas(), &req).unwrap().name,
            "controllers"
        );
        let req = FlowRequest {
            path: "/metrics",
            ..req
        };
        assert!(match_flow_schema(&schemas(), &req).is_none());
        // Go's matchPolicyRuleNonResourceURL: the per-component checks, not `/healthz` itself.
        assert!(!url_matches("/healthz/*", "/healthz"));
        assert!(!url_matches("/healthz/*", "/healthzx"));
    }

    #[test]
    fn only_the_request_s_apf_objects_are_kept() {
        let levels = vec![
            json!({"metadata": {"name": "tiny", "uid": "l-tiny"}}),
            json!({"metadata": {"name": "exempt", "uid": "l-ex"}}),
            json!({"metadata": {"name": "catch-all", "uid": "l-ca"}}),
        ];
        let all = schemas();
        let u = user("flooder", &["system:authenticated"]);
        let req = FlowRequest {
            user: &u,
            verb: "list",
            resource: Some(("", "configmaps".into(), Some("apf-load"))),
            path: "/api/v1/namespaces/apf-load/configmaps",
        };
        let m = match_flow_schema(&all, &req);
        let kept = keep_flow_objects(&all, &levels, m.as_ref(), Some("u-fl"), Some("l-tiny"));
        assert_eq!(kept.from_header.as_deref(), Some("flooders"));
        assert_eq!(kept.schemas.len(), 1);
        assert_eq!(kept.levels.len(), 1);
        // The user unknown: only what the response named.
        let kept = keep_flow_objects(&all, &levels, None, Some("u-ca"), None);
        assert_eq!(kept.from_header.as_deref(), Some("catch-all"));
        assert_eq!(kept.levels.len(), 1);
        let kept = keep_flow_objects(&all, &levels, None, None, None);
        assert!(kept.schemas.is_empty() && kept.levels.is_empty());
    }
}
