//! Facts about the objects of the extension paths: APIServices, webhooks, CRDs (what they point at —
//! Service, endpoints, pods, certificates — is [`super::backend`]).
//!
//! Each builder takes an `Option` and always returns the same shape: an absent object gives
//! `present: false` and empty values, so a rule can ask `apiservice.present` on a Request whose
//! related object is unknown without an evaluation error. Derived facts that need Kubernetes
//! knowledge (the `<version>.<group>` naming rule, the webhook defaults per API version, which
//! resources a webhook intercepts, whether its namespace selector spares `kube-system`) are
//! computed here, once, so that rules stay short and version-neutral; what the aggregator does with
//! the Service and its endpoints is [`super::backend`]'s.

use super::value::Fact;

use super::value::{Obj, list, string_map, strings};
use crate::bundle::{
    ApiService, Condition, Crd, LabelSelector, SideEffects, Webhook, WebhookTarget,
};

/// One condition; an absent one is `present: false` rather than `status: "Unknown"`, because the
/// API's own `Unknown` (e.g. `ServiceAccessError`, REFERENCE.md §2.1) is a different finding from
/// "the controller never wrote it".
fn condition_fact(c: Option<&Condition>) -> Fact {
    Obj::new()
        .b("present", c.is_some())
        .s("type", c.map(|c| c.type_.clone()).unwrap_or_default())
        .s("status", c.map(|c| c.status.clone()).unwrap_or_default())
        .s("reason", c.map(|c| c.reason.clone()).unwrap_or_default())
        .s("message", c.map(|c| c.message.clone()).unwrap_or_default())
        .s(
            "since",
            c.and_then(|c| c.last_transition_time)
                .map(|t| t.to_string())
                .unwrap_or_default(),
        )
        .build()
}

fn conditions_fact(cs: &[Condition]) -> Fact {
    list(cs.iter().map(|c| condition_fact(Some(c))))
}

/// `apiservice`: the APIService itself.
pub fn apiservice_fact(a: Option<&ApiService>, backend_health: Fact) -> Fact {
    let d = ApiService::default();
    let x = a.unwrap_or(&d);
    // kube-aggregator's validation requires the name `<spec.version>.<spec.group>`; for the core
    // group that is `v1.` (empty group, trailing dot), which this format yields too. An absent
    // object "matches" so that a rule on it does not fire on nothing.
    let expected = format!("{}.{}", x.version, x.group);
    Obj::new()
        .b("present", a.is_some())
        .s("name", x.name.clone())
        .s("group", x.group.clone())
        .s("version", x.version.clone())
        .s("expected_name", expected.clone())
        .b("name_matches", a.is_none() || x.name == expected)
        // No `spec.service`: a built-in group served in-process, which the availability
        // controller marks `Local` and never probes (REFERENCE.md §2.1).
        .b("local", a.is_some() && x.is_local())
        .b("ca_bundle_present", x.ca_bundle_present)
        .b("insecure_skip_tls_verify", x.insecure_skip_tls_verify)
        // Both are required and positive in apiregistration v1 (discovery orders groups and
        // versions by them); 0 means the bundle did not carry them.
        .i(
            "group_priority_minimum",
            x.group_priority_minimum.unwrap_or(0).into(),
        )
        .i("version_priority", x.version_priority.unwrap_or(0).into())
        .v("available", condition_fact(x.available()))
        .v("conditions", conditions_fact(&x.conditions))
        .v("backend_health", backend_health)
        .build()
}

/// Where a webhook or conversion webhook sends requests: `clientConfig` has either `service` or
/// `url`. The port defaults to 443 in both forms: `ServiceReference.port` says so, and a `url` must
/// be `https://`, whose default port is 443.
pub fn target_fact(t: &WebhookTarget) -> Fact {
    let (mode, host, port, path) = match (&t.service, &t.url) {
        (Some(s), _) => (
            "service",
            s.server_name(),
            s.port.unwrap_or(443),
            s.path.clone().unwrap_or_default(),
        ),
        (None, Some(u)) => {
            let host = t.server_name().unwrap_or_default();
            let rest = u.split_once("://").map(|x| x.1).unwrap_or(u);
            let hostport = rest.split('/').next().unwrap_or("");
            // An IPv6 literal without a port (`https://[::1]/x`) ends in `]`: its last `:` is part
            // of the address, not a port separator.
            let port = hostport
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<i32>().ok())
                .filter(|_| !hostport.ends_with(']'))
                .unwrap_or(443);
            let path = rest
                .find('/')
                .map(|i| rest[i..].to_string())
                .unwrap_or_default();
            ("url", host, port, path)
        }
        (None, None) => ("", String::new(), 0, String::new()),
    };
    Obj::new()
        .s("mode", mode)
        .s("url", t.url.clone().unwrap_or_default())
        .s("host", host)
        .i("port", port.into())
        .s("path", path)
        .b("ca_bundle_present", t.ca_bundle_present)
        .build()
}

/// Resources a controller writes constantly: a Fail webhook with a long timeout on these stalls the
/// cluster when it is slow. Node heartbeats (`leases`, `nodes/status`), scheduling (`pods/binding`),
/// kubelet status updates (`pods/status`), the endpoint controllers and `events` are written by
/// the control plane itself, so a webhook down on them blocks recovery as well as users.
pub const HOT_RESOURCES: &[&str] = &[
    "*",
    "*/*",
    "pods",
    "pods/*",
    "pods/status",
    "pods/binding",
    "leases",
    "events",
    "endpoints",
    "endpointslices",
    "nodes",
    "nodes/status",
    "configmaps",
    "secrets",
];

fn selector_fact(s: &LabelSelector) -> Fact {
    Obj::new()
        .b("empty", s.is_empty())
        .v("match_labels", string_map(s.match_labels.iter()))
        .v(
            "expressions",
            list(s.match_expressions.iter().map(|e| {
                Obj::new()
                    .s("key", e.key.clone())
                    .s("operator", e.operator.clone())
                    .v("values", strings(e.values.clone()))
                    .build()
            })),
        )
        .build()
}

/// Whether a namespace selector leaves out the namespace `ns`, judged from the label every namespace
/// carries since 1.21 (`kubernetes.io/metadata.name`). Only that label is known for certain: a
/// selector on any other label is judged as if the namespace did not carry it, which is what a
/// namespace with default labels would give.
pub fn selector_excludes_namespace(s: &LabelSelector, ns: &str) -> bool {
    let mut labels = std::collections::BTreeMap::new();
    labels.insert("kubernetes.io/metadata.name".to_string(), ns.to_string());
    !s.matches(&labels)
}

/// `webhook`: one admission webhook; `traced` is the *timed* fact of the calls to it
/// ([`super::timed`]).
pub fn webhook_fact(w: Option<&Webhook>, traced: Fact) -> Fact {
    let d = Webhook::default();
    let x = w.unwrap_or(&d);
    let ops: Vec<String> = {
        let mut v: Vec<String> = x.rules.iter().flat_map(|r| r.operations.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let resources: Vec<String> = {
        let mut v: Vec<String> = x.rules.iter().flat_map(|r| r.resources.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    let groups: Vec<String> = {
        let mut v: Vec<String> = x.rules.iter().flat_map(|r| r.api_groups.clone()).collect();
        v.sort();
        v.dedup();
        v
    };
    // A rule's `resources` entry `pods/*` or `pods/status` still sends pod traffic to the webhook,
    // so a subresource entry counts for its resource; `*` and `*/*` count for every resource.
    let any_op = |o: &str| ops.iter().any(|x| x == "*" || x == o);
    let any_res = |r: &str| {
        resources
            .iter()
            .any(|x| x == "*" || x == "*/*" || x == r || x.split('/').next() == Some(r))
    };
    let any_group = |g: &str| groups.iter().any(|x| x == "*" || x == g);
    let own_ns = x
        .target
        .service
        .as_ref()
        .map(|s| s.namespace.clone())
        .unwrap_or_default();
    let intercepts = Obj::new()
        .b("delete", any_op("DELETE"))
        .b("create", any_op("CREATE"))
        .b("update", any_op("UPDATE"))
        .b("namespaces", any_res("namespaces") && any_group(""))
        .b(
            "leases",
            any_res("leases") && any_group("coordination.k8s.io"),
        )
        .b("pods", any_res("pods") && any_group(""))
        .b(
            "all_resources",
            resources.iter().any(|r| r == "*" || r == "*/*"),
        )
        .b(
            "hot_path",
            resources
                .iter()
                .any(|r| HOT_RESOURCES.contains(&r.as_str())),
        )
        .build();
    Obj::new()
        .b("present", w.is_some())
        .s("name", x.name.clone())
        .s("configuration", x.configuration.clone())
        .s(
            "kind",
            if w.is_some() {
                x.kind.object_kind().to_string()
            } else {
                String::new()
            },
        )
        .s(
            "type",
            if w.is_some() {
                x.kind.metric_type()
            } else {
                ""
            },
        )
        // The per-version defaults (v1: Fail, Equivalent, 10 s; v1beta1: Ignore, Exact, 30 s) were
        // applied when the bundle was built (`bundle::vocab::WebhookDefaults`), so a rule reads the
        // policy the API server enforces; `timeout_set` says whether anyone chose the timeout.
        .s("failure_policy", x.failure_policy.as_str())
        .i("timeout_seconds", x.effective_timeout_seconds.into())
        .b("timeout_set", x.timeout_seconds.is_some())
        .s("match_policy", x.match_policy.as_str())
        .s(
            "side_effects",
            x.side_effects.as_ref().map_or("", SideEffects::as_str),
        )
        // Mutating webhooks only (default `Never`): `IfNeeded` calls the webhook again when a
        // later mutation changed the object, one more call inside the same request deadline.
        .s(
            "reinvocation_policy",
            x.reinvocation_policy.clone().unwrap_or_default(),
        )
        // The API server sends the first version in this list that it supports, and the webhook
        // must answer in that version.
        .v(
            "admission_review_versions",
            strings(x.admission_review_versions.clone()),
        )
        .i("match_conditions", x.match_conditions as i64)
        .v("target", target_fact(&x.target))
        .v(
            "rules",
            list(x.rules.iter().map(|r| {
                Obj::new()
                    .v("operations", strings(r.operations.clone()))
                    .v("api_groups", strings(r.api_groups.clone()))
                    .v("api_versions", strings(r.api_versions.clone()))
                    .v("resources", strings(r.resources.clone()))
                    // `scope` defaults to "*" (both Cluster and Namespaced) in admissionregistration.
                    .s("scope", r.scope.clone().unwrap_or_else(|| "*".into()))
                    .build()
            })),
        )
        .v("operations", strings(ops.clone()))
        .v("resources", strings(resources.clone()))
        .v("intercepts", intercepts)
        .v("namespace_selector", selector_fact(&x.namespace_selector))
        // An empty selector matches everything: the webhook sees every object of its rules.
        .b("object_selector_empty", x.object_selector.is_empty())
        .b(
            "kube_system_excluded",
            selector_excludes_namespace(&x.namespace_selector, "kube-system"),
        )
        // A webhook whose selector covers its own namespace can deadlock: while it is down, the
        // writes that would start its own Pods go through it (the dynamic admission control docs,
        // "Avoiding deadlocks in self-hosted webhooks"). A `url` webhook has no namespace here.
        .s("own_namespace", own_ns.clone())
        .b(
            "own_namespace_excluded",
            own_ns.is_empty() || selector_excludes_namespace(&x.namespace_selector, &own_ns),
        )
        .v("traced", traced)
        .build()
}

/// `crd`: a CustomResourceDefinition and its conversion settings.
pub fn crd_fact(c: Option<&Crd>) -> Fact {
    let d = Crd::default();
    let x = c.unwrap_or(&d);
    let cond = |t: &str| x.conditions.iter().find(|c| c.type_ == t);
    // Validation allows exactly one storage version; objects are stored in it, so a conversion
    // webhook sits on every read and write in a version other than this one.
    let storage = x
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
        .unwrap_or_default();
    let served: Vec<String> = x
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect();
    let conv_target = x.conversion.webhook.clone().unwrap_or_default();
    Obj::new()
        .b("present", c.is_some())
        .s("name", x.name.clone())
        .s("group", x.group.clone())
        .s("kind", x.kind.clone())
        .s("plural", x.plural.clone())
        .s("scope", x.scope.clone())
        .v(
            "versions",
            list(x.versions.iter().map(|v| {
                Obj::new()
                    .s("name", v.name.clone())
                    .b("served", v.served)
                    .b("storage", v.storage)
                    .b("deprecated", v.deprecated)
                    .build()
            })),
        )
        .v("served_versions", strings(served))
        .s("storage_version", storage)
        // `status.storedVersions`: versions objects may still be stored in. A version listed here
        // cannot be removed from `spec.versions` until a migration clears it.
        .v("stored_versions", strings(x.stored_versions.clone()))
        // Established must be seen True ("the resource has become active", in the CRD API doc). A
        // missing NamesAccepted is not a conflict: only `False` says another CRD holds the names.
        .b(
            "established",
            cond("Established").is_some_and(|c| c.status == "True"),
        )
        .b(
            "names_accepted",
            cond("NamesAccepted").is_none_or(|c| c.status == "True"),
        )
        .v("conditions", conditions_fact(&x.conditions))
        .v(
            "conversion",
            Obj::new()
                .s("strategy", x.conversion.strategy.clone())
                // Strategy `None` only rewrites `apiVersion`; only `Webhook` has a backend to fail.
                .b(
                    "webhook",
                    x.conversion.strategy == "Webhook" && x.conversion.webhook.is_some(),
                )
                .v(
                    "review_versions",
                    strings(x.conversion.review_versions.clone()),
                )
                .v("target", target_fact(&conv_target))
                .build(),
        )
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_selectors_exclude_by_metadata_name() {
        let mut s = LabelSelector::default();
        assert!(!selector_excludes_namespace(&s, "kube-system"));
        s.match_expressions
            .push(crate::bundle::LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".into(),
                operator: "NotIn".into(),
                values: vec!["kube-system".into()],
            });
        assert!(selector_excludes_namespace(&s, "kube-system"));
        assert!(!selector_excludes_namespace(&s, "default"));
    }
}
