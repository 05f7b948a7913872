//! Discovery and reads that a replayed recording answers differently from a live server: what the
//! recording does not hold, flowcontrol in the version it was recorded in, and the group list.
//!
//! * A kind the recording says nothing about (reads of APIServices, webhook configurations, CRDs,
//!   flowcontrol, Services, Endpoints and EndpointSlices, Pods, Events and RBAC roles and
//!   bindings) is answered 403 when the recording has a gap that records a refusal or failure, or
//!   when it was not collected live and holds none of them. The exception: the four lists a scan
//!   judges (APIServices, both webhook configurations, CRDs) that a raw or hand-made recording was
//!   simply not given are answered 404, since nothing refused them — a 403 there would become the
//!   critical "collection incomplete" verdict the original never had.
//! * FlowSchemas and PriorityLevelConfigurations were read in whichever flowcontrol version the
//!   recorded server served (v1beta2 on 1.24). The group is served in exactly the recorded
//!   version(s), so a collection reads them in it again; lists and gets of those versions come from
//!   the store here, since the reference server's own handlers serve v1 only.
//! * `/apis` lists the groups of the recorded APIServices — which may not include the built-in
//!   ones a hand-made or partial recording left out — plus the built-in and CRD groups the server
//!   serves, so that kubectl can find `apiservices` and the rest in any recording. A recorded Local
//!   group/version the server does not serve (`apps/v1`) has an empty resource list.

use std::collections::BTreeSet;

use axum::body::Body;
use http::Response;
use serde_json::{Value, json};

use super::recording::{Recorded, not_recorded};
use crate::bundle::{WebhookKind, rbac};
use crate::refserver::api::discovery as live;
use crate::refserver::registry::{self, BUILTIN_GROUP_VERSIONS};
use crate::refserver::request::RequestInfo;
use crate::refserver::status::{ApiError, json_response};
use crate::refserver::store::Store;

const FLOWCONTROL: &str = "flowcontrol.apiserver.k8s.io";
/// Newest first, as a collection picks them.
const FLOWCONTROL_VERSIONS: [&str; 4] = ["v1", "v1beta3", "v1beta2", "v1beta1"];

/// A kind of evidence, as a collection's gap sources name it, and whether the recording holds any.
struct Source {
    gap_prefix: &'static str,
    what: &'static str,
    empty: bool,
}

fn source_of(r: &Recorded, info: &RequestInfo) -> Option<Source> {
    let b = &r.bundle;
    let webhooks_of = |k: WebhookKind| !b.webhooks.iter().any(|w| w.kind == k);
    let s = |gap_prefix, what, empty| {
        Some(Source {
            gap_prefix,
            what,
            empty,
        })
    };
    if info.group == FLOWCONTROL {
        return s(
            "objects/flowcontrol",
            "flowcontrol",
            b.flow_schemas.is_empty() && b.priority_levels.is_empty(),
        );
    }
    match (info.group.as_str(), info.resource.as_str()) {
        ("apiregistration.k8s.io", "apiservices") => s(
            "objects/apiservices",
            "APIServices",
            b.api_services.is_empty(),
        ),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => s(
            "objects/validatingwebhookconfigurations",
            "ValidatingWebhookConfigurations",
            webhooks_of(WebhookKind::Validating),
        ),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => s(
            "objects/mutatingwebhookconfigurations",
            "MutatingWebhookConfigurations",
            webhooks_of(WebhookKind::Mutating),
        ),
        ("apiextensions.k8s.io", "customresourcedefinitions") => s(
            "objects/customresourcedefinitions",
            "CustomResourceDefinitions",
            b.crds.is_empty(),
        ),
        ("", "services") => s("objects/services", "Services", b.services.is_empty()),
        ("", "endpoints") | ("discovery.k8s.io", "endpointslices") => s(
            "objects/endpoint",
            "Endpoints and EndpointSlices",
            b.endpoints.is_empty() && b.endpoint_slices.is_empty(),
        ),
        ("", "pods") => s("objects/pods", "Pods", b.pods.is_empty()),
        ("", "events") => s("objects/events", "Events", b.events.is_empty()),
        ("rbac.authorization.k8s.io", "clusterroles") => s(
            rbac::GAP_CLUSTER_ROLES,
            "ClusterRoles",
            b.cluster_roles.is_empty(),
        ),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => s(
            rbac::GAP_CLUSTER_ROLE_BINDINGS,
            "ClusterRoleBindings",
            b.cluster_role_bindings.is_empty(),
        ),
        ("rbac.authorization.k8s.io", "roles") => s(rbac::GAP_ROLES, "Roles", b.roles.is_empty()),
        ("rbac.authorization.k8s.io", "rolebindings") => s(
            rbac::GAP_ROLE_BINDINGS,
            "RoleBindings",
            b.role_bindings.is_empty(),
        ),
        _ => None,
    }
}

/// The answer to a read of a kind the recording has no objects of: what stopped the original
/// collection (403 for a recorded `forbidden` or other failure), or — when the recording never
/// said (a raw import that was not given the kind) — a 404, since nothing refused it: a replay
/// must not invent a refusal the recording does not hold.
fn unknown(r: &Recorded, info: &RequestInfo) -> Option<Response<Body>> {
    if info.prefix.is_empty() {
        return None;
    }
    let source = source_of(r, info)?;
    let gap = r
        .bundle
        .gaps
        .iter()
        .find(|g| g.source.starts_with(source.gap_prefix));
    // `not_supplied` and `not_served` are not refusals: the first is what a raw import lacked,
    // the second an API the recorded server did not have.
    let refused = gap.is_some_and(|g| {
        !matches!(
            g.reason,
            crate::bundle::GapReason::NotSupplied | crate::bundle::GapReason::NotServed
        )
    });
    if refused {
        return Some(not_recorded(source.what, &info.group, &info.resource));
    }
    // A live collection that found none of a kind saw that there are none: served as empty.
    if gap.is_none() && (r.live() || !source.empty) {
        return None;
    }
    // Lists of the kinds a scan judges: nothing refused them. Objects fetched by name keep the
    // 403 — a 404 there would say "this Service does not exist".
    Some(if LISTED_SOURCES.contains(&source.gap_prefix) {
        not_in_recording(source.what)
    } else {
        not_recorded(source.what, &info.group, &info.resource)
    })
}

/// The sources a collection lists whole (a missing one is not an absent object).
const LISTED_SOURCES: &[&str] = &[
    "objects/apiservices",
    "objects/validatingwebhookconfigurations",
    "objects/mutatingwebhookconfigurations",
    "objects/customresourcedefinitions",
];

/// 404 for a kind the recording was never given.
fn not_in_recording(what: &str) -> Response<Body> {
    crate::refserver::status::ApiError::Status {
        code: 404,
        reason: "NotFound",
        message: format!("not in the recording being replayed (it was not supplied to it): {what}"),
        details: Some(serde_json::json!({})),
    }
    .into_response()
}

/// The flowcontrol versions the recording's objects were read in (v1 when it holds none). A 1.24
/// recording holds v1beta2 objects (`assuredConcurrencyShares` where v1 has
/// `nominalConcurrencyShares`): served as v1 they would carry fields v1 does not have, since a
/// replay stores objects as recorded and converts nothing.
fn flowcontrol_versions(r: &Recorded) -> Vec<&'static str> {
    let b = &r.bundle;
    let recorded: BTreeSet<&str> = b
        .flow_schemas
        .iter()
        .map(|f| f.api_version.as_str())
        .chain(b.priority_levels.iter().map(|p| p.api_version.as_str()))
        .filter_map(|v| v.strip_prefix(FLOWCONTROL)?.strip_prefix('/'))
        .collect();
    let versions: Vec<&'static str> = FLOWCONTROL_VERSIONS
        .into_iter()
        .filter(|v| recorded.contains(v))
        .collect();
    if versions.is_empty() {
        vec!["v1"]
    } else {
        versions
    }
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

fn flowcontrol(store: &Store, r: &Recorded, info: &RequestInfo) -> Option<Response<Body>> {
    let versions = flowcontrol_versions(r);
    if info.version.is_empty() {
        let owned: Vec<String> = versions.iter().map(|v| v.to_string()).collect();
        let mut g = group_json(FLOWCONTROL, &owned);
        g["kind"] = json!("APIGroup");
        g["apiVersion"] = json!("v1");
        return Some(json_response(200, &g));
    }
    if versions == ["v1"] {
        // The reference server's own handlers serve v1.
        return None;
    }
    if !versions.contains(&info.version.as_str()) {
        return Some(ApiError::path_not_found().into_response());
    }
    let group_version = format!("{FLOWCONTROL}/{}", info.version);
    if !info.is_resource {
        let resources: Vec<Value> = [
            ("flowschemas", "flowschema", "FlowSchema"),
            (
                "prioritylevelconfigurations",
                "prioritylevelconfiguration",
                "PriorityLevelConfiguration",
            ),
        ]
        .iter()
        .flat_map(|(plural, singular, kind)| {
            [
                json!({"name": plural, "singularName": singular, "namespaced": false, "kind": kind,
                       "verbs": ["get", "list", "watch"]}),
                json!({"name": format!("{plural}/status"), "singularName": "", "namespaced": false,
                       "kind": kind, "verbs": ["get"]}),
            ]
        })
        .collect();
        return Some(json_response(
            200,
            &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                    "resources": resources}),
        ));
    }
    let kind = match info.resource.as_str() {
        "flowschemas" => "FlowSchema",
        "prioritylevelconfigurations" => "PriorityLevelConfiguration",
        _ => return Some(ApiError::path_not_found().into_response()),
    };
    let (items, rv) = store.list(FLOWCONTROL, &info.resource, None);
    let items: Vec<Value> = items
        .into_iter()
        .filter(|o| o["apiVersion"] == group_version.as_str())
        .collect();
    if info.name.is_empty() {
        return Some(json_response(
            200,
            &json!({"kind": format!("{kind}List"), "apiVersion": group_version,
                    "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
        ));
    }
    Some(
        match items
            .into_iter()
            .find(|o| o.pointer("/metadata/name").and_then(Value::as_str) == Some(&info.name))
        {
            Some(o) => json_response(200, &o),
            None => ApiError::not_found(FLOWCONTROL, &info.resource, &info.name).into_response(),
        },
    )
}

/// The group/versions the server serves itself: the built-in ones (flowcontrol in its recorded
/// version) and those of the stored CRDs.
fn served_groups(store: &Store, r: &Recorded) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |g: &str, v: &str| match out.iter_mut().find(|(n, _)| n == g) {
        Some((_, vs)) if !vs.iter().any(|x| x == v) => vs.push(v.to_string()),
        Some(_) => {}
        None => out.push((g.to_string(), vec![v.to_string()])),
    };
    for (g, v, _, _) in BUILTIN_GROUP_VERSIONS {
        if g.is_empty() {
            continue;
        }
        if *g == FLOWCONTROL {
            for fv in flowcontrol_versions(r) {
                add(g, fv);
            }
        } else {
            add(g, v);
        }
    }
    for d in registry::all(store).into_iter().filter(|d| d.custom) {
        add(&d.group, &d.version);
    }
    out
}

/// `/apis`: the recorded APIServices' groups, then every other group the server serves. kubectl
/// finds a resource's group through this list, so a recording that left the built-in
/// APIServices out must not hide `apiregistration.k8s.io` and the rest from it.
fn group_list(store: &Store, r: &Recorded) -> Value {
    let mut list = live::group_list(store);
    let listed: BTreeSet<String> = list["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["name"].as_str().map(str::to_string))
        .collect();
    let extra: Vec<Value> = served_groups(store, r)
        .into_iter()
        .filter(|(name, _)| !listed.contains(name))
        .map(|(name, versions)| group_json(&name, &versions))
        .collect();
    if let Some(groups) = list["groups"].as_array_mut() {
        groups.extend(extra);
    }
    list
}

/// `/apis/<g>/<v>` of a recorded Local APIService whose group/version this server does not serve
/// (`apps/v1` of a real cluster's recording): an empty resource list, so that discovery does not
/// fail on what the recording never held.
fn recorded_local_group_version(
    store: &Store,
    r: &Recorded,
    info: &RequestInfo,
) -> Option<Response<Body>> {
    let recorded = r
        .bundle
        .api_services
        .iter()
        .any(|a| a.is_local() && a.group == info.group && a.version == info.version);
    if !recorded || !registry::in_group_version(store, &info.group, &info.version).is_empty() {
        return None;
    }
    Some(json_response(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": format!("{}/{}", info.group, info.version), "resources": []}),
    ))
}

/// Answer the reads a replay answers differently (see the module documentation); `None` for the
/// rest.
pub fn answer(store: &Store, r: &Recorded, info: &RequestInfo) -> Option<Response<Body>> {
    if !matches!(info.method.as_str(), "GET" | "HEAD") {
        return None;
    }
    if let Some(resp) = unknown(r, info) {
        return Some(resp);
    }
    if info.prefix == "apis" && info.group == FLOWCONTROL {
        return flowcontrol(store, r, info);
    }
    if info.prefix == "apis" && !info.version.is_empty() && !info.is_resource {
        return recorded_local_group_version(store, r, info);
    }
    if info.path.trim_end_matches('/') == "/apis" {
        return Some(json_response(200, &group_list(store, r)));
    }
    if info.prefix == "apis" && info.version.is_empty() && !info.group.is_empty() {
        let group = live::group(store, &info.group).or_else(|| {
            let (name, versions) = served_groups(store, r)
                .into_iter()
                .find(|(n, _)| *n == info.group)?;
            let mut g = group_json(&name, &versions);
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            Some(g)
        })?;
        return Some(json_response(200, &group));
    }
    None
}
