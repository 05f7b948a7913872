//! Admission webhooks: mutating then validating, called over real HTTPS with AdmissionReview v1.
//!
//! Matching is by `rules` (operations, apiGroups, apiVersions, resources, scope) and
//! `namespaceSelector`/`objectSelector` (`matchLabels` and `matchExpressions`). Each call honours
//! `timeoutSeconds` (default 10; a slow webhook really times out) and `failurePolicy` (default
//! Fail). The client sees kube-apiserver's words: `Internal error occurred: failed calling webhook
//! "…": failed to call webhook: Post "https://…?timeout=5s": …` (500) when failing closed, `admission
//! webhook "…" denied the request: …` with the webhook's code (at least 400) on a denial. Metrics
//! have the names and labels of every supported release and the release's latency buckets (1.24
//! tops out at 2.5 s: `profile.rs`), including the surprise the real captures show: a call failure
//! is counted with `rejection_code="400"` although the client gets 500.
//!
//! Rule matching is apiserver's `rules.Matcher`, written here apart from the collector's copy
//! (`collect/why/webhook_match.rs`) on purpose — this server is the oracle `why` is tested against —
//! and held to the same answers by `tests/semantics/webhook_rules.yaml`. Label selectors are the
//! shared `crate::semantics::label_selector`.
//!
//! `matchPolicy` is the dispatcher's `ShouldCallHook` (`generic/webhook.go`): a rule that names the
//! request's own group/version/resource calls the webhook as is; failing that, with `Equivalent`
//! (the v1 default) each rule in turn is tried against the resources the server serves as the same
//! resource ([`equivalents`], apimachinery's `EquivalentResourceRegistry`), and the first that
//! matches is the one the webhook is called with: the AdmissionReview's `kind`/`resource` name it,
//! `requestKind`/`requestResource` name what the client sent, and the object is converted to that
//! version (through the CRD's conversion, a webhook if it has one) and, after a mutation, back.
//! `Exact` never looks past the request's own resource.

use std::time::Instant;

use base64::Engine;
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use super::authn::UserInfo;
use super::metrics::Desc;
use super::network::{self, Outbound, Trust, webhook_target};
use super::registry::ResourceDef;
use super::request::RequestInfo;
use super::state::State;
use super::status::ApiError;
use super::store::{Key, Store};
use crate::semantics::label_selector;

const DURATION: Desc = Desc {
    name: "apiserver_admission_webhook_admission_duration_seconds",
    help: "[STABLE] Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
    labels: &["name", "operation", "rejected", "type"],
};
const REJECTIONS: Desc = Desc {
    name: "apiserver_admission_webhook_rejection_count",
    help: "[ALPHA] Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
    labels: &["error_type", "name", "operation", "rejection_code", "type"],
};
const REQUESTS: Desc = Desc {
    name: "apiserver_admission_webhook_request_total",
    help: "[ALPHA] Admission webhook request total, identified by name and broken out for each admission type (validating or mutating) and operation. Additional labels specify whether the request was rejected or not and an HTTP status code. Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
    labels: &["code", "name", "operation", "rejected", "type"],
};
const FAIL_OPEN: Desc = Desc {
    name: "apiserver_admission_webhook_fail_open_count",
    help: "[ALPHA] Admission webhook fail open count, identified by name and broken out for each admission type (validating or admit).",
    labels: &["name", "type"],
};

/// An admission operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// CREATE.
    Create,
    /// UPDATE.
    Update,
    /// DELETE.
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

fn listed(list: &Value, v: &str) -> bool {
    list.as_array()
        .is_some_and(|a| a.iter().any(|x| x == "*" || x.as_str() == Some(v)))
}

/// Whether one `rules[]` entry of a webhook covers a write (apiserver's `rules.Matcher`: scope,
/// operation, group, version, then resource with `*` and `res/*`, `*/sub` subresource patterns).
/// Written apart from the collector's copy on purpose (see `crate::semantics`);
/// `tests/semantics/webhook_rules.yaml` holds both to the Go answers.
pub fn rule_matches(rule: &Value, def: &ResourceDef, op: Operation, subresource: &str) -> bool {
    let resource = if subresource.is_empty() {
        def.resource.clone()
    } else {
        format!("{}/{subresource}", def.resource)
    };
    // rules.go `Matcher.resource` splits each entry at `/`: `*` alone is every resource without a
    // subresource, `*/*` everything, `*/sub` that subresource of any resource, and `res/*` the
    // resource itself and all its subresources (its `*` matches the empty subresource too).
    let resource_ok = rule["resources"].as_array().is_some_and(|rs| {
        rs.iter().filter_map(Value::as_str).any(|r| {
            r == resource
                || (r == "*" && subresource.is_empty())
                || r == "*/*"
                || (r.starts_with("*/") && r[2..] == *subresource)
                || (r.ends_with("/*") && r[..r.len() - 2] == def.resource)
        })
    });
    // v1 defaults `scope` to `*`. A Namespace is not namespaced here, as rules.go `Matcher.scope`
    // takes it for cluster-scoped although its request carries its name as the namespace.
    let scope = rule["scope"].as_str().unwrap_or("*");
    let scope_ok = scope == "*" || (scope == "Namespaced") == def.namespaced;
    listed(&rule["operations"], op.as_str())
        && listed(&rule["apiGroups"], &def.group)
        && listed(&rule["apiVersions"], &def.version)
        && resource_ok
        && scope_ok
}

/// `metav1.LabelSelector` against labels (apimachinery's requirements, `crate::semantics`: a pure
/// rule the collector's webhook matching applies too, held to `tests/semantics/label_selector.yaml`).
/// A missing selector is the defaulted empty one, which matches everything.
pub fn label_selector_matches(sel: &Value, labels: &Value) -> bool {
    label_selector::json_selector_matches(sel, labels)
}

/// The resources this server serves as the same resource as `def` (its `subresource`), `def`
/// included, in the order the API server registers them: apimachinery's
/// `EquivalentResourceRegistry.EquivalentResourcesFor` (`runtime/mapper.go`).
///
/// The registry's key is the group/resource unless kube-apiserver's identity function gives the
/// storage prefix (`NewEquivalentResourceRegistryWithIdentity`, so that built-ins stored together
/// across groups — `events` in the core group and `events.k8s.io` — are equivalent). Every
/// built-in here is served at one group/version and none shares storage with another, so the
/// equivalents are a CRD's served versions, registered in `spec.versions` order by
/// apiextensions-apiserver's `customresource_handler.go` — each with `status` when that version
/// has the subresource.
pub fn equivalents(store: &Store, def: &ResourceDef, subresource: &str) -> Vec<ResourceDef> {
    if !def.custom {
        return vec![def.clone()];
    }
    super::registry::crd_for(store, &def.group, &def.resource)
        .map(|crd| super::registry::crd_resources(&crd))
        .unwrap_or_default()
        .into_iter()
        .filter(|d| subresource.is_empty() || d.subresources.iter().any(|s| s == subresource))
        .collect()
}

fn same_resource(a: &ResourceDef, b: &ResourceDef) -> bool {
    a.group == b.group && a.version == b.version && a.resource == b.resource
}

/// Which resource the API server calls `hook` with for a write of `def`, if any (`ShouldCallHook`'s
/// rule loops, `generic/webhook.go`): `def` itself when a rule names it; otherwise, with
/// `matchPolicy: Equivalent`, the first of `equivalents` that a rule names — rules in order, and
/// for each rule the equivalents in registration order ("honor earlier rules first").
fn called_as<'a>(
    hook: &Value,
    def: &'a ResourceDef,
    equivalents: &'a [ResourceDef],
    op: Operation,
    subresource: &str,
) -> Option<&'a ResourceDef> {
    let rules = hook["rules"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if rules.iter().any(|r| rule_matches(r, def, op, subresource)) {
        return Some(def);
    }
    // admissionregistration v1 defaults matchPolicy to Equivalent (`SetDefaults_ValidatingWebhook`,
    // `SetDefaults_MutatingWebhook`); this server serves only v1 of the configurations.
    if hook["matchPolicy"].as_str().unwrap_or("Equivalent") != "Equivalent" {
        return None;
    }
    rules.iter().find_map(|r| {
        equivalents
            .iter()
            .filter(|e| !same_resource(e, def))
            .find(|e| rule_matches(r, e, op, subresource))
    })
}

fn webhook_applies(
    state: &State,
    hook: &Value,
    def: &ResourceDef,
    op: Operation,
    info: &RequestInfo,
    obj: &Value,
) -> Option<ResourceDef> {
    let ns_labels = if def.namespaced {
        state
            .storage
            .store
            .get(&Key::new("", "namespaces", "", &info.namespace))
            .and_then(|n| n.pointer("/metadata/labels").cloned())
            .unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let equivalents = equivalents(&state.storage.store, def, &info.subresource);
    invocation(
        hook,
        def,
        &equivalents,
        op,
        &info.subresource,
        &ns_labels,
        obj,
    )
}

/// Whether the API server calls `hook` for a write of `obj`, and with which resource: a rule
/// covers `def` — or, with `matchPolicy: Equivalent`, one of its `equivalents` (see
/// [`equivalents`]) —, the `namespaceSelector` holds for the labels of the object's namespace
/// (`namespace_labels`) — or, for a Namespace, its own labels; other cluster-scoped objects ignore
/// it — and the `objectSelector` holds for the object's labels.
pub fn invocation(
    hook: &Value,
    def: &ResourceDef,
    equivalents: &[ResourceDef],
    op: Operation,
    subresource: &str,
    namespace_labels: &Value,
    obj: &Value,
) -> Option<ResourceDef> {
    let called = called_as(hook, def, equivalents, op, subresource)?;
    let own = obj.pointer("/metadata/labels").unwrap_or(&Value::Null);
    // Go's `MatchNamespaceSelector` (webhook/predicates/namespace): a Namespace is matched by
    // its own labels, and a cluster-scoped object of any other kind is never exempted by the
    // namespaceSelector.
    let namespace_ok = if def.kind == "Namespace" {
        label_selector_matches(&hook["namespaceSelector"], own)
    } else if def.namespaced {
        label_selector_matches(&hook["namespaceSelector"], namespace_labels)
    } else {
        true
    };
    (namespace_ok && label_selector_matches(&hook["objectSelector"], own)).then(|| called.clone())
}

struct Hook {
    hook: Value,
    mutating: bool,
}

/// Every webhook in the order they are called: mutating before validating (the admission chain
/// runs `MutatingAdmissionWebhook` before `ValidatingAdmissionWebhook`), configurations by name
/// and webhooks in their configuration's order (the webhook managers'
/// `sort.SliceStable(configurations, …ByName)`, so that serial calls are deterministic; the store
/// lists by name already).
fn hooks(state: &State) -> Vec<Hook> {
    let mut out = Vec::new();
    for (resource, mutating) in [
        ("mutatingwebhookconfigurations", true),
        ("validatingwebhookconfigurations", false),
    ] {
        let (configs, _) = state
            .storage
            .store
            .list("admissionregistration.k8s.io", resource, None);
        for c in configs {
            for h in c["webhooks"].as_array().into_iter().flatten() {
                out.push(Hook {
                    hook: h.clone(),
                    mutating,
                });
            }
        }
    }
    out
}

enum CallError {
    /// Transport or response failure: the text after `failed calling webhook "…": `.
    Calling(String),
}

async fn call(state: &State, hook: &Value, review: &Value) -> Result<Value, CallError> {
    // admissionregistration v1 defaults timeoutSeconds to 10 and its validation admits 1 to 30;
    // this server does not validate webhook configurations, so the bound is kept here.
    let timeout = hook["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30);
    let target = webhook_target(&hook["clientConfig"], timeout).map_err(CallError::Calling)?;
    let url = target.url();
    let fail = |cause: String| {
        CallError::Calling(format!("failed to call webhook: Post \"{url}\": {cause}"))
    };
    let out = Outbound {
        method: "POST",
        host: &target.host,
        port: target.port,
        path: &target.path,
        server_name: &target.server_name,
        trust: Trust::Verify(target.roots.clone()),
        client_cert: None,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("accept".into(), "application/json".into()),
        ],
        body: Bytes::from(review.to_string()),
    };
    let exchange = async {
        let resp = network::send(&state.cluster, &state.storage.store, out).await?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, body))
    };
    let (status, body) =
        match tokio::time::timeout(std::time::Duration::from_secs(timeout), exchange).await {
            Err(_) => return Err(fail("context deadline exceeded".into())),
            Ok(Err(cause)) => return Err(fail(cause)),
            Ok(Ok(r)) => r,
        };
    if !(200..300).contains(&status) {
        let text = String::from_utf8_lossy(&body).trim().to_string();
        return Err(CallError::Calling(format!(
            "failed to call webhook: an error on the server (\"{text}\") has prevented the request from succeeding"
        )));
    }
    let parsed: Value = serde_json::from_slice(&body).map_err(|e| {
        CallError::Calling(format!(
            "received invalid webhook response: couldn't get version/kind; json parse error: {e}"
        ))
    })?;
    let response = parsed
        .get("response")
        .filter(|r| r.is_object())
        .ok_or_else(|| {
            CallError::Calling(
                "received invalid webhook response: webhook response was absent".into(),
            )
        })?;
    if response["uid"] != review["request"]["uid"] {
        return Err(CallError::Calling(format!(
            "received invalid webhook response: expected response.uid=\"{}\", got \"{}\"",
            review["request"]["uid"].as_str().unwrap_or(""),
            response["uid"].as_str().unwrap_or("")
        )));
    }
    Ok(response.clone())
}

/// The AdmissionReview for `hook` called as `called` (the resource a rule named) for a request
/// that reached `def`; `obj` and `old` are already at `called`'s version.
#[allow(clippy::too_many_arguments)]
fn review(
    called: &ResourceDef,
    def: &ResourceDef,
    op: Operation,
    obj: &Value,
    old: Option<&Value>,
    user: &UserInfo,
    info: &RequestInfo,
    n: u64,
) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("0000a0b1-{n:04x}-4c2d-9e3f-{:012x}", n * 104729),
            "kind": {"group": called.group, "version": called.version, "kind": called.kind},
            "resource": {"group": called.group, "version": called.version, "resource": called.resource},
            "subResource": info.subresource,
            "requestKind": {"group": def.group, "version": def.version, "kind": def.kind},
            "requestResource": {"group": def.group, "version": def.version, "resource": def.resource},
            "name": info.name.clone() + obj.pointer("/metadata/name").and_then(Value::as_str).filter(|_| info.name.is_empty()).unwrap_or(""),
            "namespace": info.namespace,
            "operation": op.as_str(),
            "userInfo": {"username": user.name, "groups": user.groups},
            "object": if obj.is_null() { Value::Null } else { obj.clone() },
            "oldObject": old.cloned().unwrap_or(Value::Null),
            "dryRun": info.dry_run(),
        }
    })
}

/// `obj` at `to`'s version: a custom resource through its CRD's conversion (`strategy: Webhook`
/// calls the conversion webhook), a built-in as it is (each is served at one version here). A
/// DELETE's missing object stays null.
async fn versioned(state: &State, to: &ResourceDef, obj: &Value) -> Result<Value, ApiError> {
    if obj.is_null() {
        return Ok(Value::Null);
    }
    Ok(super::conversion::to_version(state, to, vec![obj.clone()])
        .await?
        .pop()
        .unwrap_or(Value::Null))
}

/// Run admission for a write; returns the (possibly mutated) object.
///
/// Every webhook is called in turn. kube-apiserver calls the matching validating webhooks in
/// parallel (`validating/dispatcher.go`) and reports the first failure to arrive; in turn, the
/// first in `hooks` order is reported, so a scenario with one failing validating webhook is the
/// same and one with several names the first by configuration name.
///
/// # Errors
/// The Status a failing-closed or denying webhook produces.
pub async fn admit(
    state: &State,
    def: &ResourceDef,
    op: Operation,
    mut obj: Value,
    old: Option<Value>,
    user: &UserInfo,
    info: &RequestInfo,
) -> Result<Value, ApiError> {
    let subject = if obj.is_null() {
        old.clone().unwrap_or(Value::Null)
    } else {
        obj.clone()
    };
    for (i, Hook { hook, mutating }) in hooks(state).into_iter().enumerate() {
        let Some(called) = webhook_applies(state, &hook, def, op, info, &subject) else {
            continue;
        };
        let name = hook["name"].as_str().unwrap_or("").to_string();
        let kind = if mutating { "admit" } else { "validating" };
        let side_effects = hook["sideEffects"].as_str().unwrap_or("Unknown");
        // The dispatcher refuses a dry run that would call a webhook with side effects
        // (`webhookerrors.NewDryRunUnsupportedErr`: 400) rather than call it.
        if info.dry_run() && !matches!(side_effects, "None" | "NoneOnDryRun") {
            return Err(ApiError::bad_request(format!(
                "admission webhook \"{name}\" does not support dry run"
            )));
        }
        let fail_open = hook["failurePolicy"].as_str() == Some("Ignore");
        // The dispatcher sends the object at the version the webhook was matched at
        // (`VersionedAttribute`); a conversion that fails is an internal error whatever the
        // failurePolicy, since the webhook was never called.
        let converts = !same_resource(&called, def);
        let mut versioned_obj = if converts {
            versioned(state, &called, &obj).await?
        } else {
            obj.clone()
        };
        let versioned_old = match &old {
            Some(o) if converts => Some(versioned(state, &called, o).await?),
            o => o.clone(),
        };
        let started = Instant::now();
        let rv = review(
            &called,
            def,
            op,
            &versioned_obj,
            versioned_old.as_ref(),
            user,
            info,
            state.storage.store.revision() * 1000 + i as u64,
        );
        let outcome = call(state, &hook, &rv).await;
        let elapsed = started.elapsed().as_secs_f64();
        let opn = op.as_str();
        match outcome {
            Err(CallError::Calling(cause)) => {
                let message = format!("failed calling webhook \"{name}\": {cause}");
                // failurePolicy Ignore: kube-apiserver logs "Failed calling webhook, failing open",
                // counts `apiserver_admission_webhook_fail_open_count` and lets the request go on.
                if fail_open {
                    state.observability.metrics.inc(&FAIL_OPEN, &[&name, kind]);
                    state
                        .observability
                        .metrics
                        .inc(&REQUESTS, &["400", &name, opn, "false", kind]);
                    state.observability.metrics.observe(
                        &DURATION,
                        state.profile.webhook_latency_buckets(),
                        &[&name, opn, "false", kind],
                        elapsed,
                    );
                    continue;
                }
                state.observability.metrics.inc(
                    &REJECTIONS,
                    &["calling_webhook_error", &name, opn, "400", kind],
                );
                state
                    .observability
                    .metrics
                    .inc(&REQUESTS, &["400", &name, opn, "true", kind]);
                state.observability.metrics.observe(
                    &DURATION,
                    state.profile.webhook_latency_buckets(),
                    &[&name, opn, "true", kind],
                    elapsed,
                );
                return Err(ApiError::internal(&message));
            }
            Ok(response) if response["allowed"] != true => {
                let status = response.get("status").cloned().unwrap_or(json!({}));
                // `ToStatusErr` (webhook/errors/statuserror.go): a rejection never carries a code
                // below 400.
                let code = status["code"].as_u64().unwrap_or(0).max(400) as u16;
                let msg = status["message"].as_str().unwrap_or("");
                let denied = format!("admission webhook \"{name}\" denied the request");
                let message = if msg.is_empty() {
                    format!("{denied} without explanation")
                } else {
                    format!("{denied}: {msg}")
                };
                state.observability.metrics.inc(
                    &REJECTIONS,
                    &["no_error", &name, opn, &code.to_string(), kind],
                );
                state
                    .observability
                    .metrics
                    .inc(&REQUESTS, &[&code.to_string(), &name, opn, "true", kind]);
                state.observability.metrics.observe(
                    &DURATION,
                    state.profile.webhook_latency_buckets(),
                    &[&name, opn, "true", kind],
                    elapsed,
                );
                let reason: &'static str = match status["reason"].as_str() {
                    Some("Forbidden") => "Forbidden",
                    Some("Invalid") => "Invalid",
                    Some("BadRequest") => "BadRequest",
                    _ => "",
                };
                return Err(ApiError::Status {
                    code,
                    reason,
                    message,
                    details: None,
                });
            }
            Ok(response) => {
                state
                    .observability
                    .metrics
                    .inc(&REQUESTS, &["200", &name, opn, "false", kind]);
                state.observability.metrics.observe(
                    &DURATION,
                    state.profile.webhook_latency_buckets(),
                    &[&name, opn, "false", kind],
                    elapsed,
                );
                if mutating
                    && !obj.is_null()
                    && let Some(patch) = response["patch"].as_str()
                {
                    let bytes = base64::engine::general_purpose::STANDARD.decode(patch).map_err(|e| {
                        ApiError::internal(&format!("failed calling webhook \"{name}\": received invalid webhook response: {e}"))
                    })?;
                    super::patch::apply_patch(
                        &mut versioned_obj,
                        "application/json-patch+json",
                        &bytes,
                    )?;
                    // The mutating dispatcher converts the patched object back to the request's
                    // version before the next webhook and storage see it.
                    obj = if converts {
                        versioned(state, def, &versioned_obj).await?
                    } else {
                        versioned_obj
                    };
                }
            }
        }
    }
    Ok(obj)
}
