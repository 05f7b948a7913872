//! Which admission webhooks a write goes through — the API server's matching on the configurations
//! read from the cluster: the rules (operation, group, version, resource and subresource, scope),
//! then the namespace selector (against the namespace's labels) and the object selector (against
//! the object's labels). `matchConditions` are CEL that only the API server evaluates: a webhook
//! that has them is reported as called "unless its matchConditions exclude the request".
//! `matchPolicy: Equivalent` (the v1 default) also calls a webhook whose rule names the same
//! resource at another group/version the API server serves it at (a CRD's other served versions):
//! the caller passes those it knows; where it knows none (built-ins), a webhook reached only that
//! way is `Unknown`. Pure: the caller fetches the configurations, the namespace and the CRD.
//!
//! The reference server decides which webhooks it calls with its own copy (`refserver/admission.rs`),
//! kept apart on purpose: it is the oracle `why` is tested against, and a shared model would agree
//! with itself when wrong. `tests/semantics/webhook_rules.yaml` holds both to apiserver's
//! `rules.Matcher`; the selectors themselves are `crate::semantics::label_selector`, shared.

use std::collections::BTreeMap;

use super::flow_match::has_or_star;
use super::target::{RequestAttributes, Target};
pub use crate::bundle::trace::{Decision, WebhookMatch};
use crate::bundle::{LabelSelector, MatchPolicy, Webhook, WebhookRule};

/// What admission sees of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmissionRequest<'a> {
    /// `CREATE` or `UPDATE`.
    pub operation: &'a str,
    /// Group (`""` core).
    pub group: &'a str,
    /// Version.
    pub version: &'a str,
    /// Resource.
    pub resource: &'a str,
    /// Subresource (`""` none).
    pub subresource: &'a str,
    /// Namespace (`None` for cluster-scoped objects).
    pub namespace: Option<&'a str>,
    /// The namespace's labels; `None` when they could not be read.
    pub namespace_labels: Option<&'a BTreeMap<String, String>>,
    /// The object's labels.
    pub object_labels: &'a BTreeMap<String, String>,
    /// The `(group, version)`s at which the API server serves the same resource (and
    /// subresource), in the order it registered them — its `EquivalentResourceRegistry`; the
    /// request's own may be among them. `None` when they are not known (a built-in resource: the
    /// registry is not visible from outside the server).
    pub equivalents: Option<&'a [(String, String)]>,
}

impl<'a> AdmissionRequest<'a> {
    /// What admission sees of a write `operation` with request attributes `a`
    /// ([`Target::attributes`], apiserver's `RequestInfo`: one subresource segment, `Parts[2]`,
    /// as APF matching reads it). `equivalents` is left unknown.
    pub fn of_attributes(
        operation: &'a str,
        a: RequestAttributes<'a>,
        namespace_labels: Option<&'a BTreeMap<String, String>>,
        object_labels: &'a BTreeMap<String, String>,
    ) -> Self {
        AdmissionRequest {
            operation,
            group: a.group,
            version: a.version,
            resource: a.resource,
            subresource: a.subresource,
            namespace: a.namespace,
            namespace_labels,
            object_labels,
            equivalents: None,
        }
    }

    /// [`AdmissionRequest::of_attributes`] for `target`; `None` unless it writes a resource.
    pub fn of_target(
        target: &'a Target,
        namespace_labels: Option<&'a BTreeMap<String, String>>,
        object_labels: &'a BTreeMap<String, String>,
    ) -> Option<Self> {
        Some(Self::of_attributes(
            target.method.operation()?,
            target.attributes()?,
            namespace_labels,
            object_labels,
        ))
    }
}

fn split_resource(r: &str) -> (&str, &str) {
    r.split_once('/').unwrap_or((r, ""))
}

fn selector_text(sel: &LabelSelector) -> String {
    let mut parts: Vec<String> = sel
        .match_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for e in &sel.match_expressions {
        parts.push(if e.values.is_empty() {
            format!("{} {}", e.key, e.operator)
        } else {
            format!("{} {} ({})", e.key, e.operator, e.values.join(","))
        });
    }
    parts.join(", ")
}

/// A write of a Namespace object itself (the core group's `namespaces`).
fn is_namespace(a: &AdmissionRequest<'_>) -> bool {
    a.group.is_empty() && a.resource == "namespaces"
}

/// How a rule covers a write.
enum Covered {
    /// The rule names the request's group/version, or an equivalent one: why, in words.
    Yes(String),
    /// Only through an equivalent group/version of the same resource, and which ones the server
    /// serves is not known: why not decided, in words.
    Perhaps(String),
}

/// Whether rule `r` covers write `a` reaching the resource at `at` (group, version), or at any
/// group/version for `None` (rules.go `Matcher.Matches`: operation, group, version, resource with
/// `splitResource`, scope).
fn covers(r: &WebhookRule, a: &AdmissionRequest<'_>, at: Option<(&str, &str)>) -> bool {
    let ops: Vec<&str> = r.operations.iter().map(String::as_str).collect();
    let groups: Vec<&str> = r.api_groups.iter().map(String::as_str).collect();
    let versions: Vec<&str> = r.api_versions.iter().map(String::as_str).collect();
    let resource = r.resources.iter().any(|res| {
        let (res, sub) = split_resource(res);
        (res == "*" || res == a.resource) && (sub == "*" || sub == a.subresource)
    });
    // rules.go `Matcher.scope`: a Namespace (core `namespaces`, not a custom resource of that
    // name) is cluster-scoped although the request carries its name as the namespace.
    let scope = match r.scope.as_deref() {
        Some("Cluster") => a.namespace.is_none() || is_namespace(a),
        Some("Namespaced") => a.namespace.is_some() && !is_namespace(a),
        _ => true,
    };
    has_or_star(&ops, a.operation)
        && at.is_none_or(|(g, v)| has_or_star(&groups, g) && has_or_star(&versions, v))
        && resource
        && scope
}

fn resource_text(a: &AdmissionRequest<'_>) -> String {
    if a.group.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}.{}", a.resource, a.group)
    }
}

/// Which rule of a webhook covers the write, if any — the two rule loops of the dispatcher's
/// `ShouldCallHook` (generic/webhook.go): first every rule against the request's own resource;
/// then, with `matchPolicy: Equivalent` only, every rule in order against each equivalent resource
/// in registration order ("honor earlier rules first"), the API server then calling the webhook
/// with the object converted to that version.
fn rule_matches(w: &Webhook, a: &AdmissionRequest<'_>) -> Option<Covered> {
    if let Some(i) = w
        .rules
        .iter()
        .position(|r| covers(r, a, Some((a.group, a.version))))
    {
        return Some(Covered::Yes(format!(
            "rule {} covers {} {}",
            i + 1,
            a.operation,
            resource_text(a)
        )));
    }
    if w.match_policy == MatchPolicy::Exact {
        return None;
    }
    let Some(equivalents) = a.equivalents else {
        // Any group/version would do for this resource: whether the server serves it there too
        // decides, and that is not known here.
        let i = w.rules.iter().position(|r| covers(r, a, None))?;
        return Some(Covered::Perhaps(format!(
            "rule {} names {} {} only at another group/version; with matchPolicy Equivalent the API server calls it if it serves the same resource there, which is not known here",
            i + 1,
            a.operation,
            a.resource
        )));
    };
    w.rules.iter().enumerate().find_map(|(i, r)| {
        equivalents
            .iter()
            .filter(|(g, v)| (g.as_str(), v.as_str()) != (a.group, a.version))
            .find(|(g, v)| covers(r, a, Some((g, v))))
            .map(|(g, v)| {
                Covered::Yes(format!(
                    "rule {} covers {} {} as {}, an equivalent version (matchPolicy Equivalent)",
                    i + 1,
                    a.operation,
                    resource_text(a),
                    if g.is_empty() {
                        v.clone()
                    } else {
                        format!("{g}/{v}")
                    }
                ))
            })
    })
}

/// Whether the API server calls webhook `w` for write `a`.
pub fn match_webhook(w: &Webhook, a: &AdmissionRequest<'_>) -> WebhookMatch {
    let out = |decision: Decision, reason: String| WebhookMatch {
        kind: w.kind.object_kind(),
        name: w.name.clone(),
        configuration: w.configuration.clone(),
        decision,
        reason,
    };
    let Some(covered) = rule_matches(w, a) else {
        return out(
            Decision::NotInRules,
            format!(
                "no rule covers {} {}",
                a.operation,
                if a.subresource.is_empty() {
                    a.resource.to_string()
                } else {
                    format!("{}/{}", a.resource, a.subresource)
                }
            ),
        );
    };
    let (rule, perhaps) = match covered {
        Covered::Yes(why) => (why, false),
        Covered::Perhaps(why) => (why, true),
    };
    let mut why = vec![rule];
    // The namespace selector applies to namespaced objects and to Namespace objects themselves
    // (matched against their own labels); other cluster-scoped objects always pass it.
    let ns_labels: Option<&BTreeMap<String, String>> = if is_namespace(a) {
        Some(a.object_labels)
    } else if a.namespace.is_some() {
        a.namespace_labels
    } else {
        None
    };
    if !w.namespace_selector.is_empty() {
        let ns = a.namespace.unwrap_or("");
        match ns_labels {
            Some(labels) if w.namespace_selector.matches(labels) => why.push(format!(
                "namespace {ns} matches its namespaceSelector ({})",
                selector_text(&w.namespace_selector)
            )),
            Some(_) => {
                return out(
                    Decision::Excluded,
                    format!(
                        "{}, but namespace {ns} does not match its namespaceSelector ({})",
                        why.join("; "),
                        selector_text(&w.namespace_selector)
                    ),
                );
            }
            None if a.namespace.is_some() => {
                return out(
                    Decision::Unknown,
                    format!(
                        "{}; the labels of namespace {ns} could not be read to judge its namespaceSelector ({})",
                        why.join("; "),
                        selector_text(&w.namespace_selector)
                    ),
                );
            }
            None => {}
        }
    }
    if !w.object_selector.is_empty() {
        if w.object_selector.matches(a.object_labels) {
            why.push(format!(
                "the object matches its objectSelector ({})",
                selector_text(&w.object_selector)
            ));
        } else {
            return out(
                Decision::Excluded,
                format!(
                    "{}, but the object does not match its objectSelector ({})",
                    why.join("; "),
                    selector_text(&w.object_selector)
                ),
            );
        }
    }
    if w.match_conditions > 0 {
        why.push(format!(
            "unless its {} matchConditions (CEL, evaluated only by the API server) exclude the request",
            w.match_conditions
        ));
    }
    if perhaps {
        return out(Decision::Unknown, why.join("; "));
    }
    out(Decision::Called, why.join("; "))
}

/// Webhooks are never called for the admission configuration objects themselves (the API server
/// exempts them so a broken webhook can always be removed).
pub fn exempt_from_webhooks(group: &str, resource: &str) -> bool {
    group == "admissionregistration.k8s.io"
        && matches!(
            resource,
            "validatingwebhookconfigurations"
                | "mutatingwebhookconfigurations"
                | "validatingadmissionpolicies"
                | "validatingadmissionpolicybindings"
                | "mutatingadmissionpolicies"
                | "mutatingadmissionpolicybindings"
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{LabelSelectorRequirement, WebhookKind};

    fn webhook() -> Webhook {
        Webhook {
            kind: WebhookKind::Mutating,
            configuration: "cfg".into(),
            name: "policy.webhook.example.com".into(),
            rules: vec![WebhookRule {
                operations: vec!["CREATE".into()],
                api_groups: vec!["".into()],
                api_versions: vec!["v1".into()],
                resources: vec!["configmaps".into()],
                scope: None,
            }],
            namespace_selector: LabelSelector {
                match_labels: [("webhook-test".to_string(), "guarded".to_string())].into(),
                match_expressions: vec![],
            },
            match_policy: MatchPolicy::Equivalent,
            ..Webhook::default()
        }
    }

    #[test]
    fn webhooks_match_on_rules_then_selectors() {
        let guarded: BTreeMap<String, String> = [("webhook-test".into(), "guarded".into())].into();
        let plain: BTreeMap<String, String> = BTreeMap::new();
        let none = BTreeMap::new();
        let a = AdmissionRequest {
            operation: "CREATE",
            group: "",
            version: "v1",
            resource: "configmaps",
            subresource: "",
            namespace: Some("wh-guarded"),
            namespace_labels: Some(&guarded),
            object_labels: &none,
            equivalents: None,
        };
        let m = match_webhook(&webhook(), &a);
        assert_eq!(m.decision, Decision::Called, "{}", m.reason);
        assert!(
            m.reason.contains(
                "namespace wh-guarded matches its namespaceSelector (webhook-test=guarded)"
            ),
            "{}",
            m.reason
        );

        let m = match_webhook(
            &webhook(),
            &AdmissionRequest {
                namespace: Some("default"),
                namespace_labels: Some(&plain),
                ..a.clone()
            },
        );
        assert_eq!(m.decision, Decision::Excluded);
        let m = match_webhook(
            &webhook(),
            &AdmissionRequest {
                namespace_labels: None,
                ..a.clone()
            },
        );
        assert_eq!(m.decision, Decision::Unknown);
        let m = match_webhook(
            &webhook(),
            &AdmissionRequest {
                operation: "UPDATE",
                ..a.clone()
            },
        );
        assert_eq!(m.decision, Decision::NotInRules);

        let mut w = webhook();
        w.namespace_selector = LabelSelector::default();
        w.object_selector = LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: "skip".into(),
                operator: "DoesNotExist".into(),
                values: vec![],
            }],
        };
        w.match_conditions = 2;
        let m = match_webhook(&w, &a);
        assert_eq!(m.decision, Decision::Called);
        assert!(m.reason.contains("2 matchConditions"), "{}", m.reason);
        let skip: BTreeMap<String, String> = [("skip".into(), "yes".into())].into();
        assert_eq!(
            match_webhook(
                &w,
                &AdmissionRequest {
                    object_labels: &skip,
                    ..a.clone()
                }
            )
            .decision,
            Decision::Excluded
        );
    }

    #[test]
    fn subresources_scope_and_versions() {
        let none = BTreeMap::new();
        let mut w = webhook();
        w.namespace_selector = LabelSelector::default();
        w.rules[0].resources = vec!["pods/*".into()];
        let a = AdmissionRequest {
            operation: "CREATE",
            group: "",
            version: "v1",
            resource: "pods",
            subresource: "eviction",
            namespace: Some("a"),
            namespace_labels: Some(&none),
            object_labels: &none,
            equivalents: None,
        };
        assert_eq!(match_webhook(&w, &a).decision, Decision::Called);
        // `pods/*` also matches pods itself: the API server's matcher takes `*` for any
        // subresource, the empty one included.
        let pods = AdmissionRequest {
            subresource: "",
            ..a.clone()
        };
        assert_eq!(match_webhook(&w, &pods).decision, Decision::Called);
        w.rules[0].resources = vec!["pods/eviction".into()];
        assert_eq!(match_webhook(&w, &pods).decision, Decision::NotInRules);
        assert_eq!(match_webhook(&w, &a).decision, Decision::Called);
        w.rules[0].resources = vec!["*".into()];
        w.rules[0].scope = Some("Cluster".into());
        assert_eq!(
            match_webhook(
                &w,
                &AdmissionRequest {
                    subresource: "",
                    ..a.clone()
                }
            )
            .decision,
            Decision::NotInRules
        );
        w.rules[0].scope = None;
        w.match_policy = MatchPolicy::Exact;
        assert_eq!(
            match_webhook(
                &w,
                &AdmissionRequest {
                    subresource: "",
                    version: "v2",
                    ..a.clone()
                }
            )
            .decision,
            Decision::NotInRules
        );
        // Equivalent (the default): the CRD's other served version is called as that version; with
        // nothing known about the server's versions (a built-in), the answer is not decided.
        w.match_policy = MatchPolicy::Equivalent;
        let v2 = AdmissionRequest {
            subresource: "",
            version: "v2",
            ..a.clone()
        };
        let m = match_webhook(&w, &v2);
        assert_eq!(m.decision, Decision::Unknown, "{}", m.reason);
        assert!(m.reason.contains("not known here"), "{}", m.reason);
        let served = [("".to_string(), "v2".to_string()), ("".into(), "v1".into())];
        let m = match_webhook(
            &w,
            &AdmissionRequest {
                equivalents: Some(&served),
                ..v2.clone()
            },
        );
        assert_eq!(m.decision, Decision::Called, "{}", m.reason);
        assert!(
            m.reason.contains("as v1, an equivalent version"),
            "{}",
            m.reason
        );
        let m = match_webhook(
            &w,
            &AdmissionRequest {
                equivalents: Some(&served[..1]),
                ..v2.clone()
            },
        );
        assert_eq!(m.decision, Decision::NotInRules, "{}", m.reason);
        assert!(exempt_from_webhooks(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations"
        ));
        assert!(!exempt_from_webhooks("", "configmaps"));
    }
}
