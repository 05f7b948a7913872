//! Tables of Kubernetes semantics (`tests/semantics/*.yaml`: inputs and the answer the Kubernetes
//! docs or Go source give, each case naming its `source`) run against every implementation of the
//! rule, so that a drift on either side of the line between the collector and the reference server
//! fails here. `rbac.yaml` has its own runner (`rbac_semantics.rs`).
//!
//! * `flow_schema.yaml` — `collect::why::flow_match` and `refserver::apf` (two on purpose);
//! * `webhook_rules.yaml` — `collect::why::webhook_match` and `refserver::admission` (two on purpose);
//! * `label_selector.yaml` — `semantics::label_selector` through the bundle's `LabelSelector`, the
//!   reference server's webhook selectors and its `?labelSelector=` list filter;
//! * `x509_host.yaml` — `semantics::x509_host` directly, through the engine's TLS facts and through
//!   `pki::verify_server_chain` on a real rcgen leaf.

use std::collections::BTreeMap;

use extpath::bundle::{
    LabelSelector, LabelSelectorRequirement, MatchPolicy, Webhook, WebhookKind, WebhookRule,
};
use extpath::collect::why::flow_match::{self, FlowRequest};
use extpath::collect::why::target::{Method, Target};
use extpath::collect::why::webhook_match::{self, AdmissionRequest, Decision};
use extpath::pki::generate::{LeafSpec, TestCa, Validity};
use extpath::refserver::admission::{self, Operation};
use extpath::refserver::apf;
use extpath::refserver::api::select;
use extpath::refserver::authn;
use extpath::refserver::registry::ResourceDef;
use extpath::refserver::request::RequestInfo;
use extpath::semantics::{label_selector, x509_host};
use serde::Deserialize;
use serde_json::{Value, json};

use super::util::repo;

fn table<T: for<'de> Deserialize<'de>>(file: &str) -> Vec<T> {
    #[derive(Deserialize)]
    struct Table<T> {
        cases: Vec<T>,
    }
    let path = repo().join("tests/semantics").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let t: Table<T> =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    t.cases
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

/// The bundle's selector, as `bundle::from_k8s` maps a `metav1.LabelSelector`.
fn bundle_selector(v: &Value) -> LabelSelector {
    LabelSelector {
        match_labels: labels_of(&v["matchLabels"]),
        match_expressions: v["matchExpressions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| LabelSelectorRequirement {
                key: e["key"].as_str().unwrap_or_default().into(),
                operator: e["operator"].as_str().unwrap_or_default().into(),
                values: strs(&e["values"]),
            })
            .collect(),
    }
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect()
}

// ---- FlowSchemas --------------------------------------------------------------------------------

#[derive(Deserialize)]
struct FlowCase {
    name: String,
    source: String,
    #[serde(default)]
    rule: Option<Value>,
    #[serde(default)]
    matches: Option<bool>,
    #[serde(default)]
    schemas: Option<Vec<Value>>,
    #[serde(default)]
    classified_as: Option<String>,
    user: FlowUser,
    request: FlowReq,
}

#[derive(Deserialize)]
struct FlowUser {
    name: String,
    groups: Vec<String>,
}

#[derive(Deserialize)]
struct FlowReq {
    /// When given, each implementation derives the request from `method` and `path` as it does for
    /// a real one (`why`'s `Target` → `FlowRequest::of_target`, the server's `RequestInfo::parse`),
    /// and the fields below are what Go's `RequestInfoFactory` derives, checked on both sides.
    #[serde(default)]
    method: Option<String>,
    verb: String,
    path: String,
    #[serde(default)]
    group: String,
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    subresource: String,
    #[serde(default)]
    namespace: Option<String>,
}

#[test]
fn flow_schema_matching_agrees_with_apiserver_on_both_sides() {
    let cases: Vec<FlowCase> = table("flow_schema.yaml");
    assert!(cases.len() >= 25, "the table lost its cases");
    let mut failures = Vec::new();
    for c in &cases {
        assert!(!c.source.is_empty(), "{}: no source", c.name);
        let (schemas, want): (Vec<Value>, Option<String>) = match (&c.rule, &c.schemas) {
            (Some(rule), None) => (
                vec![
                    json!({"metadata": {"name": "under-test", "uid": "u"}, "spec": {
                    "matchingPrecedence": 500,
                    "priorityLevelConfiguration": {"name": "level"},
                    "rules": [rule]}}),
                ],
                c.matches
                    .expect("a rule case says whether it matches")
                    .then(|| "under-test".to_string()),
            ),
            (None, Some(schemas)) => (schemas.clone(), c.classified_as.clone()),
            _ => panic!("{}: give either rule or schemas", c.name),
        };
        let r = &c.request;
        let joined = r.resource.as_ref().map(|res| {
            if r.subresource.is_empty() {
                res.clone()
            } else {
                format!("{res}/{}", r.subresource)
            }
        });
        let collect_user = flow_match::UserInfo {
            name: c.user.name.clone(),
            groups: c.user.groups.clone(),
            source: "table".into(),
        };
        let given = FlowRequest {
            user: &collect_user,
            verb: &r.verb,
            resource: joined
                .clone()
                .map(|res| (r.group.as_str(), res, r.namespace.as_deref())),
            path: &r.path,
        };
        let target = r.method.as_deref().map(|m| {
            let method = match m {
                "GET" => Method::Get,
                "POST" => Method::DryRunCreate,
                "PUT" => Method::DryRunUpdate,
                other => panic!("{}: why sends no {other}", c.name),
            };
            Target::new(method, &r.path).unwrap_or_else(|e| panic!("{}: {e}", c.name))
        });
        let collect_req = match &target {
            Some(t) => {
                let derived = FlowRequest::of_target(&collect_user, t);
                // The path is the case's own; the query (`?watch=1`) is not part of it.
                if (derived.verb, &derived.resource) != (given.verb, &given.resource) {
                    failures.push(format!(
                        "{}: collect::why derives {:?} {:?}, Go {:?} {:?}",
                        c.name, derived.verb, derived.resource, given.verb, given.resource
                    ));
                }
                derived
            }
            None => given,
        };
        let collected = flow_match::match_flow_schema(&schemas, &collect_req).map(|m| m.name);
        let given = RequestInfo {
            path: r.path.clone(),
            method: "GET".into(),
            is_resource: r.resource.is_some(),
            prefix: if r.resource.is_none() {
                String::new()
            } else if r.group.is_empty() {
                "api".into()
            } else {
                "apis".into()
            },
            group: r.group.clone(),
            version: "v1".into(),
            namespace: r.namespace.clone().unwrap_or_default(),
            resource: r.resource.clone().unwrap_or_default(),
            name: String::new(),
            subresource: r.subresource.clone(),
            verb: r.verb.clone(),
            query: BTreeMap::new(),
        };
        let info = match &r.method {
            Some(m) => {
                let derived = RequestInfo::parse(m, &r.path);
                let fields = |i: &RequestInfo| {
                    (
                        i.verb.clone(),
                        i.group.clone(),
                        i.resource.clone(),
                        i.subresource.clone(),
                        i.namespace.clone(),
                    )
                };
                if fields(&derived) != fields(&given) {
                    failures.push(format!(
                        "{}: refserver derives {:?}, Go {:?}",
                        c.name,
                        fields(&derived),
                        fields(&given)
                    ));
                }
                derived
            }
            None => given,
        };
        let server_user = authn::UserInfo {
            name: c.user.name.clone(),
            groups: c.user.groups.clone(),
        };
        let served = apf::match_flow_schema(&schemas, &server_user, &info).map(|fs| {
            fs.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        });
        if collected != want || served != want {
            failures.push(format!(
                "{} ({}): want {want:?}, collect::why::flow_match {collected:?}, refserver::apf {served:?}",
                c.name, c.source
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---- Webhook rules ------------------------------------------------------------------------------

#[derive(Deserialize)]
struct WebhookCase {
    name: String,
    source: String,
    webhook: Value,
    request: WebhookReq,
    called: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WebhookReq {
    /// With `path`: each side derives the request from them as for a real one (`why`'s
    /// `Target` → `AdmissionRequest::of_target`, the server's `RequestInfo::parse`), and the
    /// fields below are what Go's `RequestInfoFactory` derives, checked on both sides.
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    path: Option<String>,
    operation: String,
    group: String,
    version: String,
    resource: String,
    #[serde(default)]
    subresource: String,
    namespaced: bool,
    #[serde(default)]
    namespace_labels: Value,
    #[serde(default)]
    object_labels: Value,
    /// The `(group, version)`s the server serves the same resource at, besides the request's own.
    #[serde(default)]
    equivalents: Vec<GroupVersion>,
}

#[derive(Deserialize)]
struct GroupVersion {
    group: String,
    version: String,
}

#[test]
fn webhook_matching_agrees_with_apiserver_on_both_sides() {
    let cases: Vec<WebhookCase> = table("webhook_rules.yaml");
    assert!(cases.len() >= 25, "the table lost its cases");
    let mut failures = Vec::new();
    for c in &cases {
        assert!(!c.source.is_empty(), "{}: no source", c.name);
        let r = &c.request;
        let w = &c.webhook;
        let hook = Webhook {
            kind: WebhookKind::Validating,
            configuration: "table".into(),
            name: "table.example.com".into(),
            match_policy: w["matchPolicy"]
                .as_str()
                .map_or(MatchPolicy::default(), MatchPolicy::parse),
            rules: w["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|rule| WebhookRule {
                    operations: strs(&rule["operations"]),
                    api_groups: strs(&rule["apiGroups"]),
                    api_versions: strs(&rule["apiVersions"]),
                    resources: strs(&rule["resources"]),
                    scope: rule["scope"].as_str().map(String::from),
                })
                .collect(),
            namespace_selector: bundle_selector(&w["namespaceSelector"]),
            object_selector: bundle_selector(&w["objectSelector"]),
            ..Webhook::default()
        };
        let ns_labels = labels_of(&r.namespace_labels);
        let obj_labels = labels_of(&r.object_labels);
        let equivalents: Vec<(String, String)> = r
            .equivalents
            .iter()
            .map(|gv| (gv.group.clone(), gv.version.clone()))
            .collect();
        let given = AdmissionRequest {
            operation: &r.operation,
            group: &r.group,
            version: &r.version,
            resource: &r.resource,
            subresource: &r.subresource,
            namespace: r.namespaced.then_some("table-ns"),
            namespace_labels: Some(&ns_labels),
            object_labels: &obj_labels,
            equivalents: Some(&equivalents),
        };
        let target = r.method.as_deref().map(|m| {
            let method = match m {
                "POST" => Method::DryRunCreate,
                "PUT" => Method::DryRunUpdate,
                other => panic!("{}: why writes with POST or PUT, not {other}", c.name),
            };
            let path = r.path.as_deref().expect("a method comes with a path");
            Target::new(method, path).unwrap_or_else(|e| panic!("{}: {e}", c.name))
        });
        let request = match &target {
            Some(t) => {
                let derived = AdmissionRequest::of_target(t, Some(&ns_labels), &obj_labels)
                    .unwrap_or_else(|| panic!("{}: not a write of a resource", c.name));
                let fields = |a: &AdmissionRequest<'_>| {
                    (
                        a.operation.to_string(),
                        a.group.to_string(),
                        a.version.to_string(),
                        a.resource.to_string(),
                        a.subresource.to_string(),
                        a.namespace.is_some(),
                    )
                };
                if fields(&derived) != fields(&given) {
                    failures.push(format!(
                        "{}: collect::why derives {:?}, Go {:?}",
                        c.name,
                        fields(&derived),
                        fields(&given)
                    ));
                }
                AdmissionRequest {
                    equivalents: Some(&equivalents),
                    ..derived
                }
            }
            None => given,
        };
        let decision = webhook_match::match_webhook(&hook, &request).decision;
        let collected = decision == Decision::Called;
        let def = ResourceDef {
            group: r.group.clone(),
            version: r.version.clone(),
            resource: r.resource.clone(),
            singular: String::new(),
            kind: if r.group.is_empty() && r.resource == "namespaces" {
                "Namespace".into()
            } else {
                "TableKind".into()
            },
            namespaced: r.namespaced,
            short_names: Vec::new(),
            go_type: String::new(),
            custom: false,
            storage_version: r.version.clone(),
            subresources: Vec::new(),
        };
        let op = match r.operation.as_str() {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            "DELETE" => Operation::Delete,
            other => panic!("{}: the reference server has no operation {other}", c.name),
        };
        let object = json!({"metadata": {"name": "x", "labels": r.object_labels}});
        // The server's registry: the request's own resource, then the table's equivalents.
        let registry: Vec<ResourceDef> = std::iter::once(def.clone())
            .chain(r.equivalents.iter().map(|gv| ResourceDef {
                group: gv.group.clone(),
                version: gv.version.clone(),
                ..def.clone()
            }))
            .collect();
        let subresource = match (&r.method, &r.path) {
            (Some(m), Some(path)) => {
                let derived = RequestInfo::parse(m, path);
                let fields = |i: &RequestInfo| {
                    (
                        i.group.clone(),
                        i.version.clone(),
                        i.resource.clone(),
                        i.subresource.clone(),
                        !i.namespace.is_empty(),
                    )
                };
                let want = (
                    r.group.clone(),
                    r.version.clone(),
                    r.resource.clone(),
                    r.subresource.clone(),
                    r.namespaced,
                );
                if fields(&derived) != want {
                    failures.push(format!(
                        "{}: refserver derives {:?}, Go {want:?}",
                        c.name,
                        fields(&derived)
                    ));
                }
                derived.subresource
            }
            _ => r.subresource.clone(),
        };
        let served = admission::invocation(
            w,
            &def,
            &registry,
            op,
            &subresource,
            &r.namespace_labels,
            &object,
        )
        .is_some();
        if collected != c.called || served != c.called {
            failures.push(format!(
                "{} ({}): want called={}, collect::why::webhook_match {decision:?}, refserver::admission called={served}",
                c.name, c.source, c.called
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---- Label selectors ----------------------------------------------------------------------------

#[derive(Deserialize)]
struct SelectorCase {
    name: String,
    source: String,
    #[serde(default)]
    selector: Option<Value>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    labels: Value,
    #[serde(default)]
    matches: Option<bool>,
    #[serde(default)]
    error: bool,
}

#[test]
fn label_selectors_agree_with_apimachinery_through_every_entry_point() {
    let cases: Vec<SelectorCase> = table("label_selector.yaml");
    assert!(cases.len() >= 20, "the table lost its cases");
    let mut failures = Vec::new();
    for c in &cases {
        assert!(!c.source.is_empty(), "{}: no source", c.name);
        let labels = labels_of(&c.labels);
        let object = json!({"metadata": {"name": "x", "labels": c.labels}});
        let mut got: Vec<(&str, Result<bool, String>)> = Vec::new();
        if let Some(sel) = &c.selector {
            got.push((
                "bundle LabelSelector",
                Ok(bundle_selector(sel).matches(&labels)),
            ));
            got.push((
                "refserver::admission",
                Ok(admission::label_selector_matches(sel, &c.labels)),
            ));
        }
        if let Some(text) = &c.text {
            let query: String = form_urlencoded::Serializer::new(String::new())
                .append_pair("labelSelector", text)
                .finish();
            let info = RequestInfo::parse("GET", &format!("/api/v1/configmaps?{query}"));
            got.push((
                "refserver::api::select",
                select::filter(&info)
                    .map(|f| f(&object))
                    .map_err(|e| format!("{e:?}")),
            ));
            got.push((
                "semantics::label_selector::parse",
                label_selector::parse(text)
                    .map(|reqs| {
                        label_selector::matches_all(&reqs, |k| labels.get(k).map(String::as_str))
                    })
                    .map_err(|e| e.to_string()),
            ));
        }
        assert!(!got.is_empty(), "{}: give a selector or a text", c.name);
        for (entry, result) in got {
            let ok = match (&result, c.error, c.matches) {
                (Err(_), true, _) => true,
                (Ok(m), false, Some(want)) => *m == want,
                _ => false,
            };
            if !ok {
                failures.push(format!(
                    "{} ({}): want {}, {entry} gave {result:?}",
                    c.name,
                    c.source,
                    if c.error {
                        "a parse error".to_string()
                    } else {
                        format!("matches={:?}", c.matches)
                    }
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---- x509 host names ----------------------------------------------------------------------------

#[derive(Deserialize)]
struct HostCase {
    name: String,
    source: String,
    #[serde(default)]
    dns: Vec<String>,
    #[serde(default)]
    ips: Vec<String>,
    host: String,
    matches: bool,
}

#[test]
fn x509_host_names_match_like_go_in_every_verifier() {
    let cases: Vec<HostCase> = table("x509_host.yaml");
    assert!(cases.len() >= 20, "the table lost its cases");
    let at = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let ca = TestCa::new("semantics-ca", Validity::around(at, 1, 30)).unwrap();
    let mut failures = Vec::new();
    for c in &cases {
        assert!(!c.source.is_empty(), "{}: no source", c.name);
        let direct = x509_host::verify_hostname(&c.dns, &c.ips, &c.host);
        let engine = extpath::engine::facts::tls::covers(&c.dns, &c.ips, &c.host);
        let leaf = ca
            .issue(&LeafSpec {
                common_name: "semantics-leaf".into(),
                organizations: Vec::new(),
                dns_names: c.dns.clone(),
                ip_addresses: c.ips.iter().map(|i| i.parse().unwrap()).collect(),
                validity: Validity::around(at, 1, 30),
                server_auth: true,
                client_auth: false,
            })
            .unwrap();
        let verified = extpath::pki::verify_server_chain(
            std::slice::from_ref(&leaf.cert_der),
            std::slice::from_ref(&ca.cert_der),
            &c.host,
            at,
        );
        let hostname_error = matches!(verified, Err(extpath::pki::VerifyError::Hostname { .. }));
        if direct != c.matches
            || engine != c.matches
            || verified.is_ok() != c.matches
            || (!c.matches && !hostname_error)
        {
            failures.push(format!(
                "{} ({}): want matches={}, semantics::x509_host {direct}, engine facts {engine}, pki::verify_server_chain {verified:?}",
                c.name, c.source, c.matches
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
