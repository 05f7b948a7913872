//! The steps about the path's own objects: an APIService and the backend it points at (Service,
//! port, endpoints, served certificate, availability), then the extension server's own steps — its
//! authentication of the aggregator's front-proxy identity, its delegated authorization of the
//! user, the verb it serves; the admission webhooks a write is sent to and their backends; a CRD
//! with its conversion webhook. Each step names its object, so the findings of that object's
//! verdict land on it ([`super::ladder`]).
//!
//! A Service of type ExternalName has no endpoints by design: the aggregator (and the webhook
//! client) dial its external name at the port the object names, and check neither the Service's
//! ports nor its endpoints, so neither step is a problem for it.

use crate::bundle::trace::{Addressed, Decision, Trace, WebhookMatch};
use crate::bundle::{
    ApiService, CertSource, EvidenceBundle, ObjectRef, Probe, Rung, ServiceRef, Webhook,
    WebhookKind,
};
use crate::engine::diagnosis::SubjectKind;

use super::steps::{Seen, Step, status_line};

fn gap_detail(b: &EvidenceBundle, prefix: &str) -> Option<String> {
    b.gaps
        .iter()
        .find(|g| g.source.starts_with(prefix))
        .map(|g| g.detail.clone())
}

/// Service, port, endpoints and TLS of a backend, as steps about `owner`.
pub(super) fn backend_steps(
    b: &EvidenceBundle,
    owner: (SubjectKind, &str, Option<&str>),
    svc: &ServiceRef,
    insecure: bool,
) -> Vec<Step> {
    let (kind, name, parent) = owner;
    // APIService and webhook service references default their port to 443 in the API.
    let port = svc.port.unwrap_or(443);
    let mut out = Vec::new();
    let found = b.service(&svc.namespace, &svc.name);
    let missing_gap = gap_detail(
        b,
        &format!("objects/services/{}/{}", svc.namespace, svc.name),
    );
    out.push(match (found, missing_gap) {
        (Some(s), _) => Step::new(
            Rung::Service,
            Seen::Ok,
            format!(
                "Service {}/{} ({}{})",
                s.namespace,
                s.name,
                if s.type_.is_empty() {
                    "ClusterIP"
                } else {
                    &s.type_
                },
                s.cluster_ip
                    .as_deref()
                    .map(|ip| format!(" {ip}"))
                    .unwrap_or_default()
            ),
        ),
        (None, Some(why)) => Step::new(
            Rung::Service,
            Seen::Unknown,
            format!("Service {}/{} not read: {why}", svc.namespace, svc.name),
        ),
        (None, None) => Step::new(
            Rung::Service,
            Seen::Bad,
            format!("Service {}/{} not found", svc.namespace, svc.name),
        ),
    });
    let external = found
        .filter(|s| s.type_ == "ExternalName")
        .map(|s| s.external_name.clone().unwrap_or_default());
    if let Some(host) = external {
        out.push(Step::new(
            Rung::Port,
            Seen::Ok,
            format!("port {port} of {host} (an ExternalName Service: its ports are not consulted)"),
        ));
        out.push(Step::new(
            Rung::Endpoints,
            Seen::Ok,
            format!(
                "none by design: an ExternalName Service is dialled by name ({host}:{port}), without endpoints"
            ),
        ));
        out.push(tls_step(b, (kind, name), insecure));
        return out
            .into_iter()
            .map(|s| s.about(kind, name, parent))
            .collect();
    }
    // kube-aggregator's ServicePortError: the reference's port must be one of the Service's
    // `spec.ports[].port` (the Service port, not the container's targetPort), REFERENCE §2.1.
    let svc_port = found.and_then(|s| s.ports.iter().find(|p| p.port == port));
    out.push(match (found, svc_port) {
        (Some(_), Some(p)) => Step::new(
            Rung::Port,
            Seen::Ok,
            format!(
                "port {port}{} → target port {}",
                if p.name.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", p.name)
                },
                p.target_port.as_deref().unwrap_or("(same)")
            ),
        ),
        (Some(s), None) => Step::new(
            Rung::Port,
            Seen::Bad,
            format!(
                "no port {port} (the Service has {})",
                s.ports
                    .iter()
                    .map(|p| p.port.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        (None, _) => Step::new(Rung::Port, Seen::Unknown, ""),
    });
    out.push(match svc_port {
        Some(p) => {
            // Addresses are matched by the Service port's *name*, as kube-aggregator's
            // MissingEndpoints check does (REFERENCE §2.1). Endpoints and EndpointSlices are both
            // read because the aggregator reads Endpoints before 1.34 and slices after; a bundle
            // may hold either, and the better one is what that cluster's aggregator would find.
            let from_endpoints: Option<usize> = b
                .endpoints
                .iter()
                .find(|e| e.namespace == svc.namespace && e.name == svc.name)
                .map(|e| e.ready_addresses_for_port_name(&p.name));
            let slices: Vec<_> = b
                .endpoint_slices
                .iter()
                .filter(|s| {
                    s.namespace == svc.namespace && s.service_name.as_deref() == Some(&svc.name)
                })
                .collect();
            let from_slices: usize = slices
                .iter()
                .filter(|s| s.ports.iter().any(|x| x.name == p.name))
                .flat_map(|s| &s.endpoints)
                // An unset `ready` counts as ready (discovery/v1; 1.34's aggregator alike).
                .filter(|e| e.ready != Some(false))
                .map(|e| e.addresses.len())
                .sum();
            let ready = from_endpoints.unwrap_or(0).max(from_slices);
            let pods: Vec<_> = b
                .pods
                .iter()
                .filter(|pod| {
                    pod.namespace == svc.namespace
                        && found.is_some_and(|s| {
                            !s.selector.is_empty()
                                && s.selector.iter().all(|(k, v)| pod.labels.get(k) == Some(v))
                        })
                })
                .collect();
            let mut text = format!(
                "{ready} ready address{} for port {}",
                if ready == 1 { "" } else { "es" },
                if p.name.is_empty() { "\"\"" } else { &p.name }
            );
            if !pods.is_empty() {
                text.push_str(&format!(
                    "; pods ready {}/{}",
                    pods.iter().filter(|p| p.ready).count(),
                    pods.len()
                ));
            }
            if from_endpoints.is_none() && slices.is_empty() {
                Step::new(
                    Rung::Endpoints,
                    Seen::Bad,
                    format!("no Endpoints or EndpointSlices for {}", svc.name),
                )
            } else {
                Step::new(
                    Rung::Endpoints,
                    if ready > 0 { Seen::Ok } else { Seen::Bad },
                    text,
                )
            }
        }
        None => Step::new(Rung::Endpoints, Seen::Unknown, ""),
    });
    out.push(tls_step(b, (kind, name), insecure));
    out.into_iter()
        .map(|s| s.about(kind, name, parent))
        .collect()
}

/// The served certificate of `owner`'s backend, as extpath's own handshake saw it.
fn tls_step(b: &EvidenceBundle, owner: (SubjectKind, &str), insecure: bool) -> Step {
    let (kind, name) = owner;
    let object = kind.object_kind();
    let leaf = b.certificates.iter().find(|c| {
        c.origin.source == CertSource::ServedChain
            && c.origin.chain_index == 0
            && c.origin
                .owner
                .as_ref()
                .is_some_and(|o| object.as_ref() == Some(&o.kind) && o.name == name)
    });
    match leaf {
        _ if insecure => Step::new(
            Rung::Tls,
            Seen::Bad,
            "insecureSkipTLSVerify: the serving certificate is not verified",
        ),
        // The aggregator's *availability probe* skips verification, but proxied requests verify
        // the served chain against caBundle for `<svc>.<ns>.svc` (DESIGN §1 rule 7); this is
        // the check those requests make, done by extpath's own handshake.
        Some(c) => match &c.verification {
            Some(v) if v.ok => Step::new(
                Rung::Tls,
                Seen::Ok,
                format!(
                    "served certificate {} (issuer {}) verifies for {}",
                    c.subject, c.issuer, v.server_name
                ),
            ),
            Some(v) => Step::new(
                Rung::Tls,
                Seen::Bad,
                format!(
                    "served certificate {} (issuer {}) does not verify for {}: {}",
                    c.subject,
                    c.issuer,
                    v.server_name,
                    v.error.as_deref().unwrap_or("")
                ),
            ),
            None => Step::new(
                Rung::Tls,
                Seen::Unknown,
                format!(
                    "served certificate {} (issuer {}); no caBundle to verify it against",
                    c.subject, c.issuer
                ),
            ),
        },
        None => Step::new(
            Rung::Tls,
            Seen::Unknown,
            // What extpath could not do itself, said as such: a ✗ here comes from other evidence
            // (the proxy's own x509 error), and the text must not read "not checked" beside it.
            match object
                .and_then(|k| gap_detail(b, &format!("tls/{}", ObjectRef::cluster(k, name))))
            {
                Some(why) => format!("no handshake of extpath's own: {why}"),
                None => "no handshake of extpath's own".into(),
            },
        ),
    }
}

pub(super) fn aggregated(
    b: &EvidenceBundle,
    p: &Probe,
    trace: &Trace,
    a: &ApiService,
) -> Vec<Step> {
    let mut out = Vec::new();
    let svc_text = a.service.as_ref().map(service_arrow).unwrap_or_default();
    let ca = if a.insecure_skip_tls_verify {
        "insecureSkipTLSVerify"
    } else if a.ca_bundle_present {
        "caBundle set"
    } else {
        "no caBundle"
    };
    out.push(
        Step::new(
            Rung::Registration,
            Seen::Ok,
            format!(
                "APIService {} serves {}/{}{svc_text}; {ca}",
                a.name, a.group, a.version
            ),
        )
        .about(SubjectKind::ApiService, &a.name, None),
    );
    if let Some(s) = &a.service {
        out.extend(backend_steps(
            b,
            (SubjectKind::ApiService, &a.name, None),
            s,
            a.insecure_skip_tls_verify,
        ));
    }
    // The aggregator's availability check is a request to the extension server too: when it got
    // an answer (`bad status from …: 401`), it reached the server through Service, endpoints and
    // TLS, and what failed is the extension server's authentication or authorization, below.
    let answered = a
        .available()
        .filter(|c| c.status != "True")
        .and_then(|c| backend_answer(&c.message));
    out.push(
        match a.available() {
            Some(c) if c.status == "True" => Step::new(
                Rung::Discovery,
                Seen::Ok,
                format!("Available=True ({})", c.reason),
            ),
            Some(c) if matches!(answered, Some(401 | 403)) => Step::new(
                Rung::Discovery,
                Seen::Ok,
                format!(
                    "Available={} ({}): {} — the aggregator's check reached the extension server, which refused it",
                    c.status, c.reason, c.message
                ),
            ),
            Some(c) => Step::new(
                Rung::Discovery,
                Seen::Bad,
                format!("Available={} ({}): {}", c.status, c.reason, c.message),
            ),
            None => Step::new(Rung::Discovery, Seen::Unknown, "no Available condition"),
        }
        .about(SubjectKind::ApiService, &a.name, None),
    );
    let served = p.status.is_some_and(|s| (200..300).contains(&s));
    let user = trace
        .user
        .as_ref()
        .map_or_else(|| "the user".to_string(), |u| u.name.clone());
    let available = a.available().is_some_and(|c| c.status == "True");
    // The extension server's own authentication: the aggregator's front-proxy client certificate,
    // the user from X-Remote-User.
    let authn = if served {
        Step::new(
            Rung::Authn,
            Seen::Ok,
            format!(
                "the extension server accepted the aggregator's front-proxy client certificate and took {user} from X-Remote-User (it answered)"
            ),
        )
    } else if answered == Some(401) {
        Step::new(
            Rung::Authn,
            Seen::Bad,
            "the extension server answers the aggregator with 401: it does not accept its front-proxy client certificate",
        )
    } else if available {
        Step::new(
            Rung::Authn,
            Seen::Ok,
            "the extension server accepts the aggregator's front-proxy client certificate (its availability check passed)",
        )
    } else {
        Step::new(
            Rung::Authn,
            Seen::Unknown,
            format!(
                "the extension server authenticates the aggregator's front-proxy client certificate and takes {user} from X-Remote-User"
            ),
        )
    };
    // Its delegated authorization: a SubjectAccessReview to kube-apiserver, as its own identity.
    // The availability check runs as system:masters, which is authorized without one, so it says
    // nothing here.
    let authz = if served {
        Step::new(
            Rung::Authz,
            Seen::Ok,
            format!("the extension server authorized {user} (it answered)"),
        )
    } else if answered == Some(403) {
        Step::new(
            Rung::Authz,
            Seen::Bad,
            "the extension server answers the aggregator with 403",
        )
    } else {
        Step::new(
            Rung::Authz,
            Seen::Unknown,
            format!(
                "the extension server authorizes {user} by a SubjectAccessReview to kube-apiserver (delegated; the aggregator's own check is system:masters and does not test it)"
            ),
        )
    };
    for step in [authn, authz] {
        out.push(
            step.in_extension()
                .about(SubjectKind::ApiService, &a.name, None),
        );
    }
    if matches!(trace.addressed, Addressed::Resource(_)) {
        out.push(
            match p.status {
                Some(s) if (200..300).contains(&s) => Step::new(
                    Rung::Verb,
                    Seen::Ok,
                    format!("the extension server answered {}", status_line(s)),
                ),
                _ => Step::new(
                    Rung::Verb,
                    Seen::Unknown,
                    format!(
                        "the extension server serves {} of {}",
                        trace.verb,
                        resource_text(trace)
                    ),
                ),
            }
            .in_extension()
            .about(SubjectKind::ApiService, &a.name, None),
        );
    }
    out
}

/// `flunders.wardle.example.com`: the resource a path addresses.
fn resource_text(trace: &Trace) -> String {
    match &trace.addressed {
        Addressed::Resource(r) if r.group.is_empty() => r.resource_with_subresource(),
        Addressed::Resource(r) => format!("{}.{}", r.resource_with_subresource(), r.group),
        _ => String::new(),
    }
}

/// The status an extension server answered the aggregator's availability check with, from the
/// condition message kube-aggregator writes (`… bad status from https://…: 401`).
fn backend_answer(message: &str) -> Option<u16> {
    let (_, rest) = message.rsplit_once("bad status from ")?;
    let (_, code) = rest.split_once(": ")?;
    code.get(..3)?.parse().ok()
}

/// `ValidatingWebhook/a, MutatingWebhook/b`.
fn webhook_list<'m>(ms: impl Iterator<Item = &'m WebhookMatch>) -> String {
    ms.map(|m| format!("{}/{}", m.kind, m.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The admission head — which webhooks this write is sent to, which may be, which are not — then
/// one step per webhook that is (or may be) called, with its backend.
pub(super) fn webhook_steps(b: &EvidenceBundle, trace: &Trace) -> Vec<Step> {
    let of = |d: Decision| trace.webhooks.iter().filter(move |m| m.decision == d);
    let called = of(Decision::Called).count();
    let maybe = of(Decision::Unknown).count();
    let mut text = match called {
        0 => "no webhook is called for this write".to_string(),
        _ => format!(
            "called for this write: {}",
            webhook_list(of(Decision::Called))
        ),
    };
    if maybe > 0 {
        text.push_str(&format!(
            "; may be called (not decided here): {}",
            webhook_list(of(Decision::Unknown))
        ));
    }
    let mut head = Step::new(
        Rung::Admission,
        if maybe > 0 { Seen::Unknown } else { Seen::Ok },
        text,
    );
    for m in of(Decision::Excluded) {
        head.notes
            .push(format!("not called: {}/{} — {}", m.kind, m.name, m.reason));
    }
    match trace.webhooks_not_in_rules {
        0 if trace.webhooks.is_empty() => head.notes.push("no webhook is configured".into()),
        0 => {}
        n => head.notes.push(format!(
            "not called: {n} other webhook{} whose rules do not cover this {} of {}",
            if n == 1 { "" } else { "s" },
            trace.method.operation().unwrap_or("write"),
            resource_text(trace)
        )),
    }
    let called: Vec<_> = trace
        .webhooks
        .iter()
        .filter(|m| m.decision != Decision::Excluded)
        .collect();
    let mut out = vec![head];
    for m in called {
        let w: Option<&Webhook> = b
            .webhooks
            .iter()
            .find(|w| w.name == m.name && w.kind.object_kind() == m.kind);
        let Some(w) = w else { continue };
        let target = match (&w.target.service, &w.target.url) {
            (Some(s), _) => format!(
                "Service {}/{}:{}{}",
                s.namespace,
                s.name,
                s.port.unwrap_or(443),
                s.path.as_deref().unwrap_or("")
            ),
            (None, Some(u)) => u.clone(),
            (None, None) => "no target".into(),
        };
        let kind = if w.kind == WebhookKind::Mutating {
            SubjectKind::MutatingWebhook
        } else {
            SubjectKind::ValidatingWebhook
        };
        let mut step = Step::new(
            Rung::Admission,
            if m.decision == Decision::Called {
                Seen::Ok
            } else {
                Seen::Unknown
            },
            format!(
                "{}; failurePolicy {}, timeout {}s → {target}",
                m.reason, w.failure_policy, w.effective_timeout_seconds
            ),
        )
        .about(kind, &w.name, Some(&w.configuration));
        if let Some(s) = &w.target.service {
            // `false`: a webhook's clientConfig has no insecureSkipTLSVerify; the API server
            // always verifies a webhook's certificate.
            for sub in backend_steps(b, (kind, &w.name, None), s, false) {
                if !sub.evidence.is_empty() {
                    step.notes.push(format!("{}: {}", sub.rung, sub.evidence));
                }
            }
        }
        out.push(step);
    }
    out
}

pub(super) fn custom_resource(b: &EvidenceBundle, trace: &Trace) -> Vec<Step> {
    let Some(route) = &trace.crd else {
        return Vec::new();
    };
    let Some(crd) = b.crds.iter().find(|c| c.name == route.name) else {
        return Vec::new();
    };
    let established = crd
        .conditions
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True");
    let mut out = vec![
        Step::new(
            Rung::Registration,
            if established && route.served {
                Seen::Ok
            } else {
                Seen::Bad
            },
            format!(
                "CustomResourceDefinition {}: {}; version {} {}; storage version {}",
                crd.name,
                if established {
                    "Established"
                } else {
                    "not Established"
                },
                route.requested_version,
                if route.served { "served" } else { "not served" },
                route.storage_version
            ),
        )
        .about(SubjectKind::CustomResourceDefinition, &crd.name, None),
    ];
    if trace.method.is_write() {
        out.extend(webhook_steps(b, trace));
    }
    // The step speaks for the CRD's conversion only when this request is converted: a failing
    // conversion webhook breaks other versions, not one read as it is stored, so its findings are
    // then other findings, not this request's.
    let mut conv = Step::new(
        Rung::Conversion,
        Seen::Ok,
        if route.converts {
            let target = crd
                .conversion
                .webhook
                .as_ref()
                .and_then(|w| w.service.as_ref())
                .map(service_arrow)
                .unwrap_or_default();
            format!(
                "requested {}, stored as {}: converted by the conversion webhook{target}",
                route.requested_version,
                route.stored_versions.join(", ")
            )
        } else if route.strategy == "Webhook" {
            format!(
                "no conversion call: objects are stored as {}, the version requested",
                route.requested_version
            )
        } else {
            format!(
                "no conversion webhook (strategy {})",
                if route.strategy.is_empty() {
                    "None"
                } else {
                    &route.strategy
                }
            )
        },
    );
    if route.converts {
        conv = conv.about(SubjectKind::CustomResourceDefinition, &crd.name, None);
    } else {
        conv.object = Some(format!(
            "{}/{}",
            SubjectKind::CustomResourceDefinition,
            crd.name
        ));
    }
    if route.converts
        && let Some(s) = crd
            .conversion
            .webhook
            .as_ref()
            .and_then(|w| w.service.as_ref())
    {
        for sub in backend_steps(
            b,
            (SubjectKind::CustomResourceDefinition, &crd.name, None),
            s,
            false,
        ) {
            if !sub.evidence.is_empty() {
                conv.notes.push(format!("{}: {}", sub.rung, sub.evidence));
            }
        }
    }
    out.push(conv);
    out
}

/// ` → Service ns/name:port`, the hop from an object to the Service it calls (port 443 when the
/// object names none, as the API defaults it).
fn service_arrow(s: &crate::bundle::ServiceRef) -> String {
    format!(
        " → Service {}/{}:{}",
        s.namespace,
        s.name,
        s.port.unwrap_or(443)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_an_extension_answered_the_availability_check_with() {
        assert_eq!(
            backend_answer(
                "failing or missing response from https://10.96.0.11:443/apis/wardle.example.com/v1alpha1: bad status from https://10.96.0.11:443/apis/wardle.example.com/v1alpha1: 401"
            ),
            Some(401)
        );
        assert_eq!(
            backend_answer(
                "failing or missing response from https://x: dial tcp 10.96.0.11:443: connect: connection refused"
            ),
            None
        );
        assert_eq!(
            backend_answer("bad status from https://x:443/apis: 403 Forbidden"),
            Some(403)
        );
    }
}
