//! Legacy discovery documents: `/api`, `/api/v1`, `/apis`, `/apis/<g>`, `/apis/<g>/<v>`.
//!
//! Like kube-aggregator, `/apis` lists the groups of every APIService (Local and remote), ordered by
//! `groupPriorityMinimum` and versions by `versionPriority`; `/apis/<g>` is answered here even for
//! aggregated groups; `/apis/<g>/<v>` of an aggregated group/version is proxied (not here). Aggregated
//! discovery (`as=APIGroupDiscoveryList`) is not offered: the response is a plain `APIGroupList`
//! with `Content-Type: application/json`, and kubectl falls back to per-group-version discovery —
//! which is what makes a broken APIService show in `kubectl api-resources`.

use serde_json::{Value, json};

use super::super::registry::{self, VERBS};
use super::super::state::State;
use super::super::store::Store;

/// `/api`.
pub fn core_versions(state: &State) -> Value {
    let addr = state
        .listen_addr
        .get()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "127.0.0.1:6443".into());
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}]
    })
}

struct GroupVersions {
    name: String,
    priority: i64,
    versions: Vec<(String, i64)>,
}

fn groups(store: &Store) -> Vec<GroupVersions> {
    let (services, _) = store.list("apiregistration.k8s.io", "apiservices", None);
    let mut out: Vec<GroupVersions> = Vec::new();
    for s in &services {
        let group = s
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let version = s
            .pointer("/spec/version")
            .and_then(Value::as_str)
            .unwrap_or_default();
        // The core group's APIService (`v1.`, group "") is listed under `/api`, never `/apis`.
        if group.is_empty() || version.is_empty() {
            continue;
        }
        let gp = s
            .pointer("/spec/groupPriorityMinimum")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let vp = s
            .pointer("/spec/versionPriority")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        match out.iter_mut().find(|g| g.name == group) {
            // groupPriorityMinimum is set per APIService; apiregistration's
            // `ByGroupPriorityMinimum` sort puts a group where its highest one falls.
            Some(g) => {
                g.priority = g.priority.max(gp);
                g.versions.push((version.into(), vp));
            }
            None => out.push(GroupVersions {
                name: group.into(),
                priority: gp,
                versions: vec![(version.into(), vp)],
            }),
        }
    }
    for g in &mut out {
        g.versions
            .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    }
    // Highest priority first, then names alphabetically (not reverse-alphabetically), as
    // `ByGroupPriorityMinimum` orders them; this order is also the order kubectl lists groups
    // in and tries them in for a resource name more than one group serves.
    out.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

fn group_json(g: &GroupVersions) -> Value {
    let versions: Vec<Value> = g
        .versions
        .iter()
        .map(|(v, _)| json!({"groupVersion": format!("{}/{v}", g.name), "version": v}))
        .collect();
    json!({
        "name": g.name,
        "versions": versions,
        // The highest versionPriority is the preferred version, which is what clients use
        // when a request names only the group.
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn group_list(store: &Store) -> Value {
    let groups: Vec<Value> = groups(store).iter().map(group_json).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn group(store: &Store, name: &str) -> Option<Value> {
    let g = groups(store).into_iter().find(|g| g.name == name)?;
    let mut v = group_json(&g);
    v["kind"] = json!("APIGroup");
    v["apiVersion"] = json!("v1");
    Some(v)
}

/// `/api/v1` or `/apis/<group>/<version>` of a locally served group/version.
pub fn resource_list(store: &Store, group: &str, version: &str) -> Option<Value> {
    let defs = registry::in_group_version(store, group, version);
    if defs.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for d in &defs {
        let mut r = json!({
            "name": d.resource,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": VERBS,
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        resources.push(r);
        // Subresources are listed as `<resource>/<sub>` entries of their own, as the real server
        // lists `pods/log` or `apiservices/status`.
        for sub in &d.subresources {
            resources.push(json!({
                "name": format!("{}/{sub}", d.resource),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
}
