//! What a replayed recording serves, what it cannot serve and carries beside it instead, and the
//! merge of carried evidence into a collection (`collect --merge`, `scan --merge`).
//!
//! `replay serve --bundle` puts a recording back behind an API server so that `collect` (or kubectl)
//! can read it again. Most evidence goes back the way it came: objects through the API, metrics at
//! `/metrics`, health checks at `/readyz` and `/livez`, extpath's own discovery, list and delegation
//! probes as the answers to the same requests (a delegation probe to its user only), and its reads
//! of converting CRDs' objects (a read that got no answer, by not answering). What follows cannot, and is *carried* — written beside the
//! kubeconfig as a bundle, to be merged into the collection:
//!
//! * probes a person's client recorded (`origin.kind: client_output`: kubectl, curl, traces) — no
//!   collection sends them — and extpath probes a collection does not send again (admission
//!   dry-runs, which need `--probe-admission`; anything but the discovery, list and delegation
//!   probes of a remote APIService and the conversion reads; a second probe of the same path and
//!   user);
//! * log findings and timed hops (read from logs), Events (they are served as objects too, but a
//!   collection only reads the ones
//!   about what it references) and the APF debug state (`/debug/api_priority_and_fairness`);
//! * certificates a collection cannot get back: served chains (a TLS handshake needs the backend's
//!   private key, which a bundle never holds), PEM files a person supplied, and caBundle
//!   certificates the bundle kept without their PEM (see [`super::to_k8s::ca_bundle`]);
//! * metrics of an extension API server (a collection scrapes kube-apiserver and etcd only), and a
//!   second source of a target that already has one;
//! * health checks no collection reads (`/healthz`), a second check of an endpoint, and etcd health
//!   that etcd's `/health` answer cannot express (per-item checks, or a failure without a reason);
//! * the moment the recording describes (`collection.collected_at`, with basis `recording`), so
//!   that certificate expiry is judged when the evidence was recorded, not on the day of the replay.
//!
//! Merging ([`merge`]) adds these to a collected bundle: every probe, log finding, timed hop, Event,
//! certificate and APF state not already in it; metrics and health checks of a target or endpoint
//! the collection has none of; and the collection time when the merged file's basis is
//! `recording`. Objects, other metrics and gaps of the merged file are not merged: the collection
//! has its own.

use super::Kind;
use super::metrics::MetricTarget;
use super::observations::HealthEndpoint;
use super::probes::ProbeKind;
use super::to_k8s::{CaBundle, ca_bundle};
use super::{CertSource, EvidenceBundle, ObjectRef, Probe, Rung, TimeBasis};

/// Which pieces of a recording a replay serves (indexes into the bundle's lists); everything else
/// is carried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// extpath probes answered again: the discovery, list and delegation probes of remote
    /// APIServices, and the reads of converting CRDs' objects.
    pub probes: Vec<usize>,
    /// The metrics source served at `/metrics`.
    pub apiserver_metrics: Option<usize>,
    /// The metrics source served at etcd's `/metrics`.
    pub etcd_metrics: Option<usize>,
    /// The check served at `/readyz`.
    pub readyz: Option<usize>,
    /// The check served at `/livez`.
    pub livez: Option<usize>,
    /// The etcd check served at etcd's `/health`.
    pub etcd_health: Option<usize>,
}

/// The discovery path of a group/version: `/apis/<group>/<version>`, or `/api/<version>` for core.
pub fn discovery_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

/// The remote APIService a probe of extpath's tested, and the discovery path of its group/version.
fn remote_target<'b>(bundle: &'b EvidenceBundle, p: &Probe) -> Option<(&'b str, String)> {
    let t = p.target.as_ref()?;
    if t.kind != Kind::ApiService {
        return None;
    }
    let a = bundle.api_service(&t.name).filter(|a| !a.is_local())?;
    Some((&a.name, discovery_path(&a.group, &a.version)))
}

/// Whether `p` is one of extpath's reads of a converting CRD's objects (`probes/conversion`): a GET
/// under the CRD's group, as itself, that got an answer or none within the request timeout.
pub fn conversion_read(bundle: &EvidenceBundle, p: &Probe) -> bool {
    let Some(t) = p
        .target
        .as_ref()
        .filter(|t| t.kind == Kind::CustomResourceDefinition)
    else {
        return false;
    };
    let Some(crd) = bundle
        .crds
        .iter()
        .find(|c| c.name == t.name && c.conversion.webhook.is_some())
    else {
        return false;
    };
    p.origin.kind == ProbeKind::Probe
        && p.method.as_deref() == Some("GET")
        && p.user.is_none()
        && matches!(p.rung, Some(Rung::Verb | Rung::Conversion))
        && p.path
            .as_deref()
            .is_some_and(|path| path.starts_with(&format!("/apis/{}/", crd.group)))
        && (p.status.is_some() || p.error.as_deref().is_some_and(timed_out))
}

/// Whether a probe's error is the collector's own request timeout (`FetchError::Timeout`): no
/// answer at all, which a replay reproduces by not answering.
pub fn timed_out(error: &str) -> bool {
    error.starts_with("no response within")
}

fn answered(p: &Probe) -> bool {
    p.origin.kind == ProbeKind::Probe && p.method.as_deref() == Some("GET") && p.status.is_some()
}

/// Whether etcd's `/health` (`{"health": "true"|"false", "reason": …}`) can give this check back.
fn etcd_health_servable(c: &super::HealthCheck) -> bool {
    c.checks.is_empty() && (c.ok || c.error.as_deref().is_some_and(|e| !e.is_empty()))
}

/// Decide what a replay of `bundle` serves.
pub fn split(bundle: &EvidenceBundle) -> Split {
    let mut s = Split::default();
    let mut paths: Vec<&str> = Vec::new();
    // Discovery probes first: a list probe is only sent after a discovery that answered 2xx.
    for (i, p) in bundle.probes.iter().enumerate() {
        let Some((_, discovery)) = remote_target(bundle, p) else {
            continue;
        };
        let path = p.path.as_deref().unwrap_or_default();
        if answered(p)
            && p.rung == Some(Rung::Discovery)
            && path == discovery
            && !paths.contains(&path)
        {
            paths.push(path);
            s.probes.push(i);
        }
    }
    let discovered_ok = |name: &str| {
        s.probes.iter().any(|&i| {
            let p = &bundle.probes[i];
            p.target.as_ref().is_some_and(|t| t.name == name)
                && p.status.is_some_and(|c| (200..300).contains(&c))
        })
    };
    // A collection lists the resources of each APIService after its discovery: every list probe
    // of a distinct path is served — except one that records whom it was sent as (`user`: a 403
    // the extension gave somebody else), which is carried, since a replay's collection is sent as
    // somebody else.
    let mut verbs: Vec<(usize, &str)> = Vec::new();
    for (i, p) in bundle.probes.iter().enumerate() {
        let Some((name, discovery)) = remote_target(bundle, p) else {
            continue;
        };
        let path = p.path.as_deref().unwrap_or_default();
        let resource = path
            .strip_prefix(&format!("{discovery}/"))
            .and_then(|r| r.strip_suffix("?limit=1"));
        if answered(p)
            && p.rung == Some(Rung::Verb)
            && resource.is_some_and(|r| !r.is_empty() && !r.contains('/'))
            && p.user.is_none()
            && discovered_ok(name)
            && !paths.contains(&path)
        {
            paths.push(path);
            verbs.push((i, name));
        }
    }
    // A collection asks each discovery that answered once more as an ordinary user (the delegation
    // probe): the first such probe of each is served, to that user only.
    let mut delegated: Vec<(usize, &str)> = Vec::new();
    for (i, p) in bundle.probes.iter().enumerate() {
        let Some((name, discovery)) = remote_target(bundle, p) else {
            continue;
        };
        if answered(p)
            && p.user.is_some()
            && matches!(p.rung, Some(Rung::Authz | Rung::Authn))
            && p.path.as_deref() == Some(discovery.as_str())
            && discovered_ok(name)
            && !delegated.iter().any(|(_, n)| *n == name)
        {
            delegated.push((i, name));
        }
    }
    s.probes.extend(verbs.into_iter().map(|(i, _)| i));
    s.probes.extend(delegated.into_iter().map(|(i, _)| i));
    // A collection reads one object of every CRD its conversion webhook converts (the list of the
    // storage version that names it, the object in that version, then in each other): the first
    // probe of each path is served, answered or not — one the converter never answered is held
    // as long as the client waits, so the collection meets the same silence.
    for (i, p) in bundle.probes.iter().enumerate() {
        let path = p.path.as_deref().unwrap_or_default();
        if conversion_read(bundle, p) && !paths.contains(&path) {
            paths.push(path);
            s.probes.push(i);
        }
    }
    s.probes.sort_unstable();
    let first_metrics = |t: MetricTarget| bundle.metrics.iter().position(|m| m.target == t);
    s.apiserver_metrics = first_metrics(MetricTarget::Apiserver);
    s.etcd_metrics = first_metrics(MetricTarget::Etcd);
    // Only kube-apiserver's own listings are its `/readyz` and `/livez` to serve back; an
    // extension server's or an unattributed one is not.
    let first_check = |e: HealthEndpoint| {
        bundle.health_checks.iter().position(|c| {
            c.endpoint == e
                && (e == HealthEndpoint::EtcdHealth
                    || c.owner() == super::observations::Component::KubeApiserver)
        })
    };
    s.readyz = first_check(HealthEndpoint::ApiserverReadyz);
    s.livez = first_check(HealthEndpoint::ApiserverLivez);
    s.etcd_health = first_check(HealthEndpoint::EtcdHealth)
        .filter(|&i| etcd_health_servable(&bundle.health_checks[i]));
    s
}

/// Whether the replay serves a certificate back through its owner's `caBundle`.
fn certificate_served(bundle: &EvidenceBundle, c: &super::Certificate) -> bool {
    if c.origin.source != CertSource::CaBundle {
        return false;
    }
    let Some(owner) = &c.origin.owner else {
        return false;
    };
    owner_has_ca_bundle(bundle, owner) && matches!(ca_bundle(bundle, owner), CaBundle::Pem(_))
}

/// Whether `owner` is an object of the bundle whose caBundle is set.
fn owner_has_ca_bundle(bundle: &EvidenceBundle, owner: &ObjectRef) -> bool {
    match owner.kind {
        Kind::ApiService => bundle
            .api_service(&owner.name)
            .is_some_and(|a| a.ca_bundle_present),
        Kind::ValidatingWebhook | Kind::MutatingWebhook => bundle.webhooks.iter().any(|w| {
            w.kind.object_kind() == owner.kind && w.name == owner.name && w.target.ca_bundle_present
        }),
        Kind::CustomResourceDefinition => bundle.crds.iter().any(|c| {
            c.name == owner.name
                && c.conversion
                    .webhook
                    .as_ref()
                    .is_some_and(|w| w.ca_bundle_present)
        }),
        _ => false,
    }
}

/// The evidence of `recording` a replay of it cannot serve (see the module documentation), as a
/// bundle of its own: the file `replay serve --bundle` writes for `--merge`.
pub fn carried(recording: &EvidenceBundle) -> EvidenceBundle {
    let s = split(recording);
    let mut out = EvidenceBundle::new(recording.collection.source.clone());
    out.collection.collected_at = recording.collection.collected_at;
    out.collection.collected_at_basis = recording
        .collection
        .collected_at
        .map(|_| TimeBasis::Recording);
    out.probes = recording
        .probes
        .iter()
        .enumerate()
        .filter(|(i, _)| !s.probes.contains(i))
        .map(|(_, p)| p.clone())
        .collect();
    out.log_findings = recording.log_findings.clone();
    out.timed_hops = recording.timed_hops.clone();
    out.events = recording.events.clone();
    out.apf_state = recording.apf_state.clone();
    out.certificates = recording
        .certificates
        .iter()
        .filter(|c| !certificate_served(recording, c))
        .cloned()
        .collect();
    out.metrics = recording
        .metrics
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != s.apiserver_metrics && Some(*i) != s.etcd_metrics)
        .map(|(_, m)| m.clone())
        .collect();
    out.health_checks = recording
        .health_checks
        .iter()
        .enumerate()
        .filter(|(i, _)| ![s.readyz, s.livez, s.etcd_health].contains(&Some(*i)))
        .map(|(_, c)| c.clone())
        .collect();
    out
}

fn add_missing<T: PartialEq + Clone>(into: &mut Vec<T>, from: &[T]) {
    for x in from {
        if !into.contains(x) {
            into.push(x.clone());
        }
    }
}

/// Merge the carried evidence of `from` into a collected bundle (see the module documentation for
/// what is taken).
pub fn merge(into: &mut EvidenceBundle, from: &EvidenceBundle) {
    add_missing(&mut into.probes, &from.probes);
    add_missing(&mut into.log_findings, &from.log_findings);
    add_missing(&mut into.timed_hops, &from.timed_hops);
    add_missing(&mut into.events, &from.events);
    add_missing(&mut into.certificates, &from.certificates);
    add_missing(&mut into.apf_state, &from.apf_state);
    for m in &from.metrics {
        if into.metrics_for(m.target).is_none() {
            into.metrics.push(m.clone());
        }
    }
    // One answer per source: an endpoint of one server, and etcd's alarm list apart from its
    // `/health` (both are etcd health checks).
    let key = |c: &super::HealthCheck| {
        let alarms = !c.checks.is_empty() && c.checks.iter().all(|i| i.name.starts_with("alarm "));
        (c.endpoint, c.owner(), alarms)
    };
    let present: Vec<_> = into.health_checks.iter().map(key).collect();
    for c in &from.health_checks {
        if !present.contains(&key(c)) {
            into.health_checks.push(c.clone());
        }
    }
    if from.collection.collected_at_basis == Some(TimeBasis::Recording) {
        into.collection.collected_at = from.collection.collected_at;
        into.collection.collected_at_basis = Some(TimeBasis::Recording);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::load_bundle_str;

    fn recording() -> EvidenceBundle {
        load_bundle_str(
            r#"
apiVersion: extpath.dev/v1alpha1
kind: EvidenceBundle
collection: {tool_version: 0.1.0, collected_at: "2026-11-29T09:00:00Z", source: {mode: live, server: "https://x"}}
api_services:
  - {name: v1.a.example.com, group: a.example.com, version: v1, service: {namespace: n, name: s, port: 443}}
probes:
  - {origin: {kind: probe, tool: extpath}, method: GET, path: /apis/a.example.com/v1, status: 200, rung: discovery, target: {kind: APIService, name: v1.a.example.com}}
  - {origin: {kind: probe, tool: extpath}, method: GET, path: /apis/a.example.com/v1/things?limit=1, status: 403, rung: verb, target: {kind: APIService, name: v1.a.example.com}}
  - {origin: {kind: probe, tool: extpath}, method: POST, path: "/api/v1/namespaces/d/configmaps?dryRun=All", status: 500, rung: admission, target: {kind: ValidatingWebhook, name: w}}
  - {origin: {kind: client_output, tool: kubectl}, status: 503, description: get things.a.example.com}
health_checks:
  - {endpoint: apiserver_readyz, ok: true}
  - {endpoint: apiserver_healthz, ok: true}
  - {endpoint: etcd_health, ok: false}
log_findings:
  - {pattern: p, component: kube_apiserver, count: 1, message: m}
"#,
            "recording.yaml",
        )
        .unwrap()
    }

    #[test]
    fn probes_a_collection_sends_are_served_and_the_rest_carried() {
        let r = recording();
        let s = split(&r);
        assert_eq!(s.probes, vec![0, 1]);
        assert_eq!(s.readyz, Some(0));
        assert_eq!(s.etcd_health, None, "a failure without a reason");
        let c = carried(&r);
        assert_eq!(c.probes.len(), 2);
        assert_eq!(c.health_checks.len(), 2);
        assert_eq!(c.log_findings.len(), 1);
        assert_eq!(c.collection.collected_at_basis, Some(TimeBasis::Recording));
    }

    #[test]
    fn merging_adds_what_is_missing_once_and_takes_the_recorded_time() {
        let r = recording();
        let c = carried(&r);
        let mut collected = EvidenceBundle::new(crate::bundle::CollectionSource::Unknown);
        collected.health_checks.push(r.health_checks[0].clone());
        merge(&mut collected, &c);
        merge(&mut collected, &c);
        assert_eq!(collected.probes.len(), 2);
        assert_eq!(collected.health_checks.len(), 3);
        assert_eq!(collected.collection.collected_at, r.collection.collected_at);
        let mut plain = c.clone();
        plain.collection.collected_at_basis = None;
        let mut other = EvidenceBundle::new(crate::bundle::CollectionSource::Unknown);
        merge(&mut other, &plain);
        assert_eq!(other.collection.collected_at, None);
    }
}
