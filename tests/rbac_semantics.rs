//! One table of RBAC cases (`tests/semantics/rbac.yaml`) run against both evaluators: the engine's
//! (`engine::rbac`, over the bundle types a collection maps RBAC objects into) and the reference
//! server's (`refserver::rbac`, over the JSON objects it stores). The server may not import the
//! engine, so each has its own code; this table is what keeps them from drifting.

use extpath::bundle::{CollectionSource, EvidenceBundle, rbac as map};
use extpath::engine::rbac::{Attributes, Decision, Identity, Rbac};
use extpath::refserver::rbac as server;
use serde::Deserialize;
use serde_json::Value;

use super::util::repo;

#[derive(Deserialize)]
struct Table {
    objects: Vec<Value>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    #[serde(default)]
    objects: Option<Vec<Value>>,
    user: String,
    groups: Vec<String>,
    request: Request,
    allowed: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Request {
    verb: String,
    group: String,
    resource: String,
    subresource: String,
    namespace: String,
    name: String,
    path: Option<String>,
}

/// The bundle a collection would make of the objects.
fn bundle_of(objects: &[Value]) -> EvidenceBundle {
    let mut b = EvidenceBundle::new(CollectionSource::Live {
        server: "https://127.0.0.1".into(),
        context: None,
    });
    for o in objects {
        let o = o.clone();
        match o["kind"].as_str().unwrap() {
            "ClusterRole" => map::add_cluster_role(&mut b, &serde_json::from_value(o).unwrap()),
            "ClusterRoleBinding" => {
                map::add_cluster_role_binding(&mut b, &serde_json::from_value(o).unwrap())
            }
            "Role" => map::add_role(&mut b, &serde_json::from_value(o).unwrap()),
            "RoleBinding" => map::add_role_binding(&mut b, &serde_json::from_value(o).unwrap()),
            other => panic!("not an RBAC kind: {other}"),
        }
    }
    b
}

#[test]
fn the_engine_and_the_reference_server_decide_every_case_alike() {
    let text = std::fs::read_to_string(repo().join("tests/semantics/rbac.yaml")).unwrap();
    let table: Table = serde_saphyr::from_str(&text).unwrap();
    assert!(table.cases.len() >= 20, "the table lost its cases");
    let mut failures = Vec::new();
    for c in &table.cases {
        let objects = c.objects.as_ref().unwrap_or(&table.objects);
        let r = &c.request;
        let bundle = bundle_of(objects);
        let engine = Rbac::new(&bundle, true).decide(
            &Identity {
                user: c.user.clone(),
                groups: c.groups.clone(),
            },
            &Attributes {
                verb: r.verb.clone(),
                group: r.group.clone(),
                resource: r.resource.clone(),
                subresource: r.subresource.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                path: r.path.clone(),
            },
        );
        let reference = server::Objects::from_values(objects).allows(
            &c.user,
            &c.groups,
            &server::Attributes {
                verb: r.verb.clone(),
                group: r.group.clone(),
                resource: r.resource.clone(),
                subresource: r.subresource.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                path: r.path.clone(),
            },
        );
        let want = if c.allowed {
            Decision::Allowed
        } else {
            Decision::Denied
        };
        if engine != want || reference != c.allowed {
            failures.push(format!(
                "{}: want allowed={}, engine {engine:?}, reference server allowed={reference}",
                c.name, c.allowed
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
