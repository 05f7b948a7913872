//! The evidence for one request's path, and nothing else: what serves the addressed group/version
//! (an APIService with a Service — the aggregated path — or a CRD, or kube-apiserver itself), the
//! webhooks a write goes through, the FlowSchema and priority level that classify the user, then
//! the Services, endpoints, pods and served certificates behind those objects.
//!
//! Three rounds, each all at once, like the full collection: the objects that name everything else
//! (APIServices, the CRD by name, webhook configurations and the namespace for writes, FlowSchemas
//! and priority levels, `/readyz`, `/livez`); then the Services, Endpoints,
//! EndpointSlices and Events behind the kept objects — and, for an aggregated path, the RBAC
//! objects that decide the extension server's delegated authentication and authorization
//! (ClusterRoles, ClusterRoleBindings, kube-system's Roles and RoleBindings); then their Pods and a
//! TLS handshake with each backend. What cannot be read becomes a gap with its reason, never an
//! error: without RBAC objects (or their gaps) a live bundle would say "no binding grants it".

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1 as admreg;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;
use serde_json::Value;
use tokio::time::Instant;

use super::flow_match::{FlowMatch, FlowRequest, UserInfo, keep_flow_objects, match_flow_schema};
use super::target::{Addressed, Target};
use super::webhook_match::{
    AdmissionRequest, Decision, WebhookMatch, exempt_from_webhooks, match_webhook,
};
use super::{WhyOptions, bounded_gap};
pub use crate::bundle::trace::{CrdRoute, Serving};
use crate::bundle::{Crd, EvidenceBundle, Gap, GapReason, Probe, from_k8s};
use crate::collect::objects::decode_items;
use crate::collect::{FetchError, Fetcher, backends, flowcontrol, health, rbac, refs, tls};

/// Who the request was sent as, and which objects along its path were kept.
pub(super) struct PathEvidence {
    /// The path's objects, their backends and certificates, health checks and gaps.
    pub bundle: EvidenceBundle,
    /// What serves the path.
    pub serving: Serving,
    /// The remote APIService of an aggregated path.
    pub api_service: Option<String>,
    /// The CRD of a custom resource path.
    pub crd: Option<CrdRoute>,
    /// Webhooks whose rules cover the write (called, excluded by a selector, or undecided).
    pub webhooks: Vec<WebhookMatch>,
    /// Webhooks whose rules do not cover it.
    pub webhooks_not_in_rules: usize,
    /// The FlowSchema that classifies the user, by matching.
    pub flow_schema: Option<FlowMatch>,
    /// The FlowSchema named by the response's `X-Kubernetes-PF-FlowSchema-UID`.
    pub flow_schema_from_header: Option<String>,
    /// The user, when known.
    pub user: Option<UserInfo>,
}

/// What a dry-run write carries for admission matching.
pub(super) struct WriteFacts<'a> {
    /// The object's labels.
    pub object_labels: &'a BTreeMap<String, String>,
}

// A 404 is an answer, not a failed read: the CRD or namespace does not exist. Kept apart from a
// gap so the path can be called unregistered (no CRD, no APIService) instead of "unknown".
async fn get_optional(f: &Fetcher, path: &str) -> Result<Option<Value>, FetchError> {
    match f.get_json(path).await {
        Ok(v) => Ok(Some(v)),
        Err(FetchError::Status { code: 404, .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// FlowSchemas and priority levels as JSON, in the newest flowcontrol version served.
// Not a fixed path: a 1.24 cluster serves only v1beta1/v1beta2 and a 1.32 one only v1 and v1beta3
// (`flowcontrol::KNOWN_VERSIONS` has the ranges), so the group's discovery document decides.
async fn fetch_flow(f: &Fetcher) -> Result<(Vec<Value>, Vec<Value>), FetchError> {
    const GROUP: &str = "flowcontrol.apiserver.k8s.io";
    let doc = f.get_json(&format!("/apis/{GROUP}")).await?;
    let version = flowcontrol::pick_version(&doc).ok_or_else(|| FetchError::Status {
        code: 404,
        message: format!("{GROUP} serves no known version"),
    })?;
    let fs_path = format!("/apis/{GROUP}/{version}/flowschemas");
    let pl_path = format!("/apis/{GROUP}/{version}/prioritylevelconfigurations");
    let (fs, pl) = tokio::join!(f.list_all(&fs_path), f.list_all(&pl_path));
    Ok((fs?, pl?))
}

fn crd_route(crd: &Crd, requested: &str) -> CrdRoute {
    let storage = crd
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
        .unwrap_or_default();
    // Strategy `None` converts in process by rewriting `apiVersion` only (the CRD versioning
    // docs); only `Webhook` puts a conversion webhook on the read path. Objects stay in etcd at the
    // version they were written in until rewritten, and `status.storedVersions` lists every such
    // version, so a read at the storage version still converts while another version is listed.
    let webhook = crd.conversion.strategy == "Webhook";
    let other_stored = crd.stored_versions.iter().any(|v| v != requested) || storage != requested;
    CrdRoute {
        name: crd.name.clone(),
        requested_version: requested.to_string(),
        served: crd.versions.iter().any(|v| v.name == requested && v.served),
        storage_version: storage,
        stored_versions: crd.stored_versions.clone(),
        strategy: crd.conversion.strategy.clone(),
        converts: webhook && other_stored,
    }
}

/// Gather the path of `target`, whose reproduction is `probe`.
pub(super) async fn gather(
    f: &Fetcher,
    target: &Target,
    probe: &Probe,
    write: Option<WriteFacts<'_>>,
    opts: &WhyOptions,
    deadline: Instant,
) -> PathEvidence {
    let mut scratch = EvidenceBundle::default();
    let resource = target.resource();
    let namespace = resource.and_then(|r| r.namespace.clone());

    // Round one: the objects that name everything else.
    let apiservices = bounded_gap(
        deadline,
        "objects/apiservices",
        f.list_all("/apis/apiregistration.k8s.io/v1/apiservices"),
    );
    let crd = async {
        match resource {
            Some(r) if !r.group.is_empty() => {
                let name = format!("{}.{}", r.resource, r.group);
                Some(
                    bounded_gap(
                        deadline,
                        &format!("objects/customresourcedefinitions/{name}"),
                        get_optional(
                            f,
                            &format!(
                                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                            ),
                        ),
                    )
                    .await,
                )
            }
            _ => None,
        }
    };
    let webhook_configs = async {
        write.as_ref()?;
        let (v, m) = tokio::join!(
            bounded_gap(
                deadline,
                "objects/validatingwebhookconfigurations",
                f.list_all("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations")
            ),
            bounded_gap(
                deadline,
                "objects/mutatingwebhookconfigurations",
                f.list_all("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")
            )
        );
        Some((v, m))
    };
    let ns_labels = async {
        let ns = namespace.as_deref()?;
        write.as_ref()?;
        let r = bounded_gap(
            deadline,
            &format!("objects/namespaces/{ns}"),
            get_optional(f, &format!("/api/v1/namespaces/{ns}")),
        )
        .await;
        Some(r)
    };
    let flow = bounded_gap(deadline, "objects/flowcontrol", fetch_flow(f));
    let readyz = bounded_gap(deadline, "health/readyz", health::fetch_readyz(f));
    let livez = bounded_gap(deadline, "health/livez", health::fetch_livez(f));
    let (apiservices, crd, webhook_configs, ns_labels, flow, readyz, livez) = tokio::join!(
        apiservices,
        crd,
        webhook_configs,
        ns_labels,
        flow,
        readyz,
        livez
    );
    let user = opts.as_user.clone();

    for r in [readyz, livez] {
        match r {
            Ok(apply) => apply(&mut scratch),
            Err(g) => scratch.gaps.push(g),
        }
    }

    // What serves the path.
    let mut api_service = None;
    // The core group (`/api/v1`) is always kube-apiserver's own: no APIService can take it, so
    // it is known even when the APIServices cannot be read (etcd hanging).
    let mut serving = match &target.addressed {
        Addressed::NonResource => Serving::NonResource,
        Addressed::Discovery { group, .. } if group.is_empty() => Serving::BuiltIn,
        Addressed::Resource(r) if r.group.is_empty() => Serving::BuiltIn,
        _ => Serving::Unknown,
    };
    match apiservices {
        Ok(items) => {
            let (objs, gaps) = decode_items::<apireg::APIService>("objects/apiservices", items);
            scratch.gaps.extend(gaps);
            let mut all = EvidenceBundle::default();
            for o in &objs {
                from_k8s::add_api_service(&mut all, o, None);
            }
            if serving == Serving::Unknown {
                let group = target.group().unwrap_or("");
                let version = target.group_version().map(|(_, v)| v);
                let of_path: Vec<_> = all
                    .api_services
                    .iter()
                    .filter(|a| a.group == group && version.is_none_or(|v| a.version == v))
                    .collect();
                // A group-level path (`/apis/<group>`) has one APIService per version; the
                // remote one with the highest `versionPriority` is the one the group is about.
                let remote = of_path
                    .iter()
                    .filter(|a| !a.is_local())
                    .max_by_key(|a| a.version_priority.unwrap_or(0));
                // Only local APIServices (`spec.service` nil, condition reason `Local`): kube-
                // apiserver serves the path itself — a built-in group, or a CRD group, whose local
                // APIService kube-apiserver's `crdregistration` controller creates. The CRD read
                // below tells the two apart.
                serving = match (remote, of_path.is_empty()) {
                    (Some(a), _) => {
                        api_service = Some(a.name.clone());
                        Serving::Aggregated
                    }
                    (None, true) => Serving::Unregistered,
                    (None, false) => Serving::BuiltIn,
                };
            }
            if let Some(name) = &api_service {
                scratch
                    .api_services
                    .extend(all.api_services.iter().filter(|a| &a.name == name).cloned());
                scratch.certificates.extend(
                    all.certificates
                        .iter()
                        .filter(|c| c.origin.owner.as_ref().is_some_and(|o| &o.name == name))
                        .cloned(),
                );
                scratch.gaps.extend(all.gaps);
            }
        }
        Err(g) => scratch.gaps.push(g),
    }

    // A custom resource: its CRD, unless an extension server serves the group. kube-aggregator
    // sits first in kube-apiserver's handler chain and proxies a remote APIService's whole
    // `/apis/<group>/<version>`, so a CRD of the same group/version never sees the request.
    let mut crd_info = None;
    match crd {
        Some(Ok(Some(v))) if serving != Serving::Aggregated => {
            match serde_json::from_value::<apiext::CustomResourceDefinition>(v) {
                Ok(obj) => {
                    from_k8s::add_crd(&mut scratch, &obj, None);
                    if let (Some(c), Some(r)) = (scratch.crds.last(), resource) {
                        crd_info = Some(crd_route(c, &r.version));
                        serving = Serving::CustomResource;
                    }
                }
                Err(e) => scratch.gaps.push(Gap::new(
                    "objects/customresourcedefinitions",
                    GapReason::Error,
                    format!("does not decode: {e}"),
                )),
            }
        }
        Some(Err(g)) => scratch.gaps.push(g),
        _ => {}
    }

    // The webhooks a write goes through (an aggregated write is admitted by the extension server).
    let mut webhooks = Vec::new();
    let mut not_in_rules = 0;
    if let (Some(write), Some(attributes), Some(operation), Some((validating, mutating))) = (
        &write,
        target.attributes(),
        target.method.operation(),
        webhook_configs,
    ) && serving != Serving::Aggregated
        && !exempt_from_webhooks(attributes.group, attributes.resource)
    {
        // Mutating before validating: the order the API server's admission chain calls them in
        // (MutatingAdmissionWebhook runs before ValidatingAdmissionWebhook), so the trace lists
        // the calls in the order they happen.
        let mut all = EvidenceBundle::default();
        match mutating {
            Ok(items) => {
                let (objs, gaps) = decode_items::<admreg::MutatingWebhookConfiguration>(
                    "objects/mutatingwebhookconfigurations",
                    items,
                );
                scratch.gaps.extend(gaps);
                for o in &objs {
                    from_k8s::add_mutating_configuration(&mut all, o, None);
                }
            }
            Err(g) => scratch.gaps.push(g),
        }
        match validating {
            Ok(items) => {
                let (objs, gaps) = decode_items::<admreg::ValidatingWebhookConfiguration>(
                    "objects/validatingwebhookconfigurations",
                    items,
                );
                scratch.gaps.extend(gaps);
                for o in &objs {
                    from_k8s::add_validating_configuration(&mut all, o, None);
                }
            }
            Err(g) => scratch.gaps.push(g),
        }
        let labels: Option<BTreeMap<String, String>> = match ns_labels {
            Some(Ok(Some(ns))) => Some(
                ns.pointer("/metadata/labels")
                    .and_then(|l| serde_json::from_value(l.clone()).ok())
                    .unwrap_or_default(),
            ),
            Some(Err(g)) => {
                scratch.gaps.push(g);
                None
            }
            // Unreadable labels stay `None`, not empty: a namespaceSelector judged against no
            // labels would wrongly exclude the webhook; `match_webhook` says "undecided" instead.
            _ => None,
        };
        // What matchPolicy Equivalent may convert to: a custom resource's served versions (its
        // CRD registers each with the API server's EquivalentResourceRegistry). Which versions
        // serve a subresource, and which built-ins share storage, the bundle does not say.
        let equivalents: Option<Vec<(String, String)>> = scratch
            .crds
            .last()
            .filter(|_| serving == Serving::CustomResource && attributes.subresource.is_empty())
            .map(|c| {
                c.versions
                    .iter()
                    .filter(|v| v.served)
                    .map(|v| (c.group.clone(), v.name.clone()))
                    .collect()
            });
        // The request as `Target::attributes` derives it, the derivation APF matching uses too.
        let attrs = AdmissionRequest {
            equivalents: equivalents.as_deref(),
            ..AdmissionRequest::of_attributes(
                operation,
                attributes,
                labels.as_ref(),
                write.object_labels,
            )
        };
        for w in &all.webhooks {
            let m = match_webhook(w, &attrs);
            match m.decision {
                Decision::NotInRules => not_in_rules += 1,
                Decision::Called | Decision::Unknown => {
                    scratch.webhooks.push(w.clone());
                    let kind = w.kind.object_kind();
                    scratch.certificates.extend(
                        all.certificates
                            .iter()
                            .filter(|c| {
                                c.origin
                                    .owner
                                    .as_ref()
                                    .is_some_and(|o| o.kind == kind && o.name == w.name)
                            })
                            .cloned(),
                    );
                    webhooks.push(m);
                }
                Decision::Excluded => webhooks.push(m),
            }
        }
    }

    // APF: the schema that classifies the user, and the one the response names.
    let mut flow_schema = None;
    let mut from_header = None;
    match flow {
        Ok((schemas, levels)) => {
            if let Some(u) = &user {
                flow_schema = match_flow_schema(&schemas, &FlowRequest::of_target(u, target));
            }
            let kept = keep_flow_objects(
                &schemas,
                &levels,
                flow_schema.as_ref(),
                probe.headers.flow_schema_uid.as_deref(),
                probe.headers.priority_level_uid.as_deref(),
            );
            from_header = kept.from_header;
            for s in kept.schemas {
                from_k8s::add_flow_schema(&mut scratch, s);
            }
            for l in kept.levels {
                from_k8s::add_priority_level(&mut scratch, l);
            }
        }
        Err(g) => scratch.gaps.push(g),
    }

    // Rounds two and three: what the kept objects point at.
    let references = refs::References::of(&scratch);
    // An extension server built on k8s.io/apiserver authenticates the front proxy with the CA in
    // kube-system's `extension-apiserver-authentication` ConfigMap (read through a RoleBinding to
    // the `extension-apiserver-authentication-reader` Role) and delegates authn/authz to
    // kube-apiserver with TokenReviews and SubjectAccessReviews (the `system:auth-delegator`
    // ClusterRole). Those bindings are what a 401/403 on an aggregated path is judged against
    // (captures 08a/08b); no other path needs them.
    let rbac = async {
        if serving != Serving::Aggregated {
            return Vec::new();
        }
        let sources = [
            (rbac::CLUSTER_ROLES, rbac::fetch_cluster_roles(f)),
            (
                rbac::CLUSTER_ROLE_BINDINGS,
                rbac::fetch_cluster_role_bindings(f),
            ),
            (rbac::ROLES, rbac::fetch_roles(f)),
            (rbac::ROLE_BINDINGS, rbac::fetch_role_bindings(f)),
        ];
        futures::future::join_all(
            sources
                .into_iter()
                .map(|(id, fut)| async move { bounded_gap(deadline, id, fut).await }),
        )
        .await
    };
    let (found, rbac) = tokio::join!(
        crate::collect::bounded(deadline, backends::fetch(f, &references)),
        rbac
    );
    for r in rbac {
        match r {
            Ok(apply) => apply(&mut scratch),
            Err(g) => scratch.gaps.push(g),
        }
    }
    let found = match found {
        Ok(b) => b,
        Err(e) => {
            scratch
                .gaps
                .push(crate::collect::gap_for("objects/backends", &e));
            backends::Backends::default()
        }
    };
    // The handshakes need the endpoints found in round two; `--backend-address` overrides them
    // where a pod IP is not reachable from where `why` runs (the reference server's backends
    // listen on 127.0.0.1 ports, not on the addresses their Endpoints name).
    let targets = tls::targets(&scratch, &found, &opts.backend_addresses);
    let (pods, handshakes) = tokio::join!(
        crate::collect::bounded(deadline, backends::fetch_pods(f, &found)),
        tls::capture_all(targets, opts.request_timeout, deadline)
    );
    scratch.gaps.extend(found.gaps.clone());
    found.apply(&mut scratch);
    match pods {
        Ok(pods) => pods.apply(&mut scratch),
        Err(e) => scratch
            .gaps
            .push(crate::collect::gap_for("objects/pods", &e)),
    }
    scratch.certificates.extend(handshakes.certs);
    scratch.gaps.extend(handshakes.gaps);
    scratch.probes.extend(handshakes.probes);

    PathEvidence {
        bundle: scratch,
        serving,
        api_service,
        crd: crd_info,
        webhooks,
        webhooks_not_in_rules: not_in_rules,
        flow_schema,
        flow_schema_from_header: from_header,
        user,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{CrdConversion, CrdVersion};

    fn crd(strategy: &str, storage: &str, stored: &[&str]) -> Crd {
        Crd {
            name: "crontabs.stable.example.com".into(),
            group: "stable.example.com".into(),
            versions: ["v1", "v2"]
                .iter()
                .map(|v| CrdVersion {
                    name: v.to_string(),
                    served: true,
                    storage: *v == storage,
                    deprecated: false,
                })
                .collect(),
            stored_versions: stored.iter().map(|s| s.to_string()).collect(),
            conversion: CrdConversion {
                strategy: strategy.into(),
                ..CrdConversion::default()
            },
            ..Crd::default()
        }
    }

    #[test]
    fn conversion_is_involved_only_through_a_webhook_across_versions() {
        let r = crd_route(&crd("Webhook", "v1", &["v1"]), "v2");
        assert!(r.converts && r.served);
        assert_eq!(r.storage_version, "v1");
        assert!(!crd_route(&crd("Webhook", "v1", &["v1"]), "v1").converts);
        assert!(crd_route(&crd("Webhook", "v1", &["v1", "v2"]), "v1").converts);
        assert!(!crd_route(&crd("None", "v1", &["v1"]), "v2").converts);
        assert!(!crd_route(&crd("None", "v1", &["v1"]), "v3").served);
    }
}
