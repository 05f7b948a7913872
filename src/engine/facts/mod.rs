//! The fact model: what a rule sees, as CEL values (documented for rule authors in `docs/facts.md`,
//! schema `extpath.dev/rules/v1`).
//!
//! Facts are built once per analysis for the cluster-wide variables (`cluster`, `apiserver`, `etcd`,
//! `settings`) and once per subject for the subject's own variables, never once per rule: a bundle
//! with 2,000 CRDs builds 2,000 CRD fact values and then runs every CRD rule against each.
//! Everything a subject's facts look up — its observations, its log findings, its Service, the
//! requests its FlowSchema classified — is indexed once in [`FactBase`], so the cost of an analysis
//! grows with the bundle, not with subjects × evidence (`cargo bench --bench analyze_scale`).
//!
//! Which variables a rule may use depends on its subject kind ([`variables_for`]); the loader rejects
//! a rule that names another. Every fact has the same shape whatever the evidence — absent objects
//! have `present: false`, absent strings are `""` — so that a rule written against the sample of the
//! fact model ([`sample`]) cannot fail at run time on a missing key.
//!
//! Sub-modules: [`objects`] (APIServices, webhooks, CRDs), [`backend`] (the Service, endpoints and
//! pods they point at), [`tls`] (the certificates on the way: caBundle, served chain, its
//! verification), [`delegation`] (what the identity of an extension server
//! may do, from RBAC), [`requests`]
//! (observed requests, log findings), [`cluster`] (cluster, apiserver, etcd, APF objects),
//! [`timed`] (timed hops: the calls an API server traced and etcd's slow-request warnings),
//! [`value`] (CEL value building), [`shared`] (facts as the interpreter holds them, shared not
//! copied), [`sample`] (a fully populated bundle for load-time checks).

pub mod backend;
pub mod cluster;
pub mod delegation;
pub mod objects;
pub mod requests;
pub mod sample;
pub mod shared;
pub mod timed;
pub mod tls;
pub mod value;

use std::collections::HashMap;
use std::sync::OnceLock;

use value::Fact;

use super::diagnosis::SubjectKind;
use super::settings::Settings;
use super::subjects::{Lookup, SubjectEntry, SubjectSource, probe_target};
use crate::bundle::{
    CollectionSource, EvidenceBundle, Kind, ObjectRef, ServiceRef, WebhookTarget, rbac,
};
use value::list;

/// Version of the fact model and rule format; rules declare it as `schema:`.
pub const SCHEMA: &str = "extpath.dev/rules/v1";

/// Variables every rule sees, whatever its subject.
pub const COMMON_VARIABLES: &[&str] = &["subject", "cluster", "apiserver", "etcd", "settings"];

/// The subject-specific variables of each subject kind.
pub fn variables_for(kind: SubjectKind) -> &'static [&'static str] {
    match kind {
        SubjectKind::ApiService => &[
            "apiservice",
            "service",
            "endpoints",
            "pods",
            "tls",
            "delegation",
            "observations",
            "logs",
        ],
        SubjectKind::ValidatingWebhook | SubjectKind::MutatingWebhook => &[
            "webhook",
            "service",
            "endpoints",
            "pods",
            "tls",
            "observations",
            "logs",
        ],
        SubjectKind::CustomResourceDefinition => &[
            "crd",
            "service",
            "endpoints",
            "pods",
            "tls",
            "observations",
            "logs",
        ],
        SubjectKind::FlowSchema => &["flowschema", "prioritylevel", "observations"],
        SubjectKind::PriorityLevel => &["prioritylevel", "observations"],
        SubjectKind::ApiServer | SubjectKind::Etcd => &["observations"],
        SubjectKind::Source => &[],
        SubjectKind::Request => &[
            "request",
            "apiservice",
            "webhook",
            "crd",
            "flowschema",
            "prioritylevel",
            "service",
            "endpoints",
            "pods",
            "tls",
            "logs",
        ],
    }
}

/// Per-bundle data every fact builder shares: the judging time, what was collected, and the facts
/// of each observation and log finding (built once, shared by reference-counted values).
pub struct FactBase<'b> {
    /// The bundle.
    pub bundle: &'b EvidenceBundle,
    /// The moment the evidence describes; time checks are judged here, never at the wall clock.
    pub at: Option<jiff::Timestamp>,
    /// kube-apiserver minor version, when known.
    pub server_minor: Option<u32>,
    /// Services were collected, so a missing one is really missing.
    pub services_known: bool,
    /// Endpoints/EndpointSlices were collected.
    pub endpoints_known: bool,
    /// Pods were collected.
    pub pods_known: bool,
    /// ClusterRoles and ClusterRoleBindings were collected (or supplied).
    pub rbac_cluster_known: bool,
    /// kube-system's Roles and RoleBindings were collected (or supplied).
    pub rbac_kube_system_known: bool,
    /// The RBAC objects, indexed for evaluation.
    pub rbac: crate::engine::rbac::Rbac<'b>,
    /// One request fact per probe.
    pub request_facts: Vec<Fact>,
    /// The object each probe concerns.
    pub probe_targets: Vec<Option<ObjectRef>>,
    /// Where the evidence shows the API server was reached (`subjects::apiserver_addresses`).
    pub apiserver_addresses: std::collections::BTreeSet<String>,
    /// One fact per log finding.
    pub log_facts: Vec<Fact>,
    /// The object each log finding concerns: its `target`, else the object its message names.
    pub log_targets: Vec<Option<ObjectRef>>,
    /// Objects by `(namespace, name)`, so that thousands of subjects do not each scan every list.
    pub index: ObjectIndex<'b>,
    /// The *timed* fact of each webhook and conversion webhook the timed hops name, by
    /// `(kind, name)`.
    pub traced: HashMap<(Kind, String), Fact>,
    /// The bundle's objects by name, group and uid.
    pub lookup: Lookup<'b>,
    /// The probes (indexes, in bundle order) that concern each object, by `(kind, name)`.
    observations_by_target: HashMap<(Kind, String), Vec<usize>>,
    /// The log findings (indexes, in bundle order) that concern each object, by `(kind, name)`.
    logs_by_target: HashMap<(Kind, String), Vec<usize>>,
    /// The log findings that mention each name a subject may look for, built on first use.
    mentions: OnceLock<MentionIndex>,
    /// The probes an APF FlowSchema classified, by its uid.
    by_flow_schema_uid: HashMap<&'b str, Vec<usize>>,
    /// The probes an APF priority level classified, by its uid.
    by_priority_level_uid: HashMap<&'b str, Vec<usize>>,
    /// The only remote APIService, when there is exactly one (an extension server's own health
    /// endpoints can then only be its).
    pub sole_remote: Option<&'b str>,
}

/// Which log findings contain each name or path a subject's `logs` may look for. One pass of an
/// Aho-Corasick automaton over every message replaces a `contains` per subject per finding.
///
/// Only the candidates that can occur in some message go into the automaton ([`Grams`]): a
/// cluster of 10,000 APIServices has some 45,000 candidates (names, group/versions, paths), and an
/// automaton over all of them took 38 MB and most of its build time, while a bundle's log findings
/// usually mention a handful.
struct MentionIndex {
    logs: HashMap<String, Vec<usize>>,
}

impl MentionIndex {
    fn new(base_bundle: &EvidenceBundle, candidates: Vec<String>) -> Self {
        let messages = || base_bundle.log_findings.iter().map(|l| l.message.as_str());
        let grams = Grams::of(messages());
        let mut ids: HashMap<String, usize> = HashMap::new();
        let mut patterns: Vec<String> = Vec::new();
        let mut absent: Vec<String> = Vec::new();
        for c in candidates {
            if c.is_empty() || ids.contains_key(&c) {
                continue;
            }
            if grams.may_contain(&c) {
                ids.insert(c.clone(), patterns.len());
                patterns.push(c);
            } else {
                absent.push(c);
            }
        }
        let mut hits: Vec<Vec<usize>> = vec![Vec::new(); patterns.len()];
        if let Ok(ac) = aho_corasick::AhoCorasick::new(&patterns) {
            for (i, message) in messages().enumerate() {
                for m in ac.find_overlapping_iter(message) {
                    let found = &mut hits[m.pattern().as_usize()];
                    if found.last() != Some(&i) {
                        found.push(i);
                    }
                }
            }
        } else {
            // The automaton could not be built (it never fails for plain strings within its size
            // limits); the scan gives the same answer.
            for (p, found) in patterns.iter().zip(&mut hits) {
                for (i, message) in messages().enumerate() {
                    if message.contains(p.as_str()) {
                        found.push(i);
                    }
                }
            }
        }
        let mut logs: HashMap<String, Vec<usize>> = patterns.into_iter().zip(hits).collect();
        // A candidate no message can contain is known to have no finding: recorded as such, so
        // that a lookup does not fall back to scanning every message for it.
        logs.extend(absent.into_iter().map(|c| (c, Vec::new())));
        MentionIndex { logs }
    }
}

/// The 8-byte windows of a set of messages: a string that occurs in one of them has each of its
/// own windows among these, so a string with a window missing occurs in none.
struct Grams(std::collections::HashSet<u64>);

/// The window length. Shorter strings are never ruled out.
const GRAM: usize = 8;

impl Grams {
    fn of<'m>(messages: impl Iterator<Item = &'m str>) -> Self {
        let mut set = std::collections::HashSet::new();
        for m in messages {
            set.extend(m.as_bytes().windows(GRAM).map(gram));
        }
        Grams(set)
    }

    /// Whether `s` may occur in a message: its first, middle and last windows all do. (Checking
    /// three windows rather than all of them rules out nearly as much for a fraction of the cost.)
    fn may_contain(&self, s: &str) -> bool {
        let b = s.as_bytes();
        if b.len() < GRAM {
            return true;
        }
        let last = b.len() - GRAM;
        [0, last / 2, last]
            .iter()
            .all(|&at| self.0.contains(&gram(&b[at..at + GRAM])))
    }
}

fn gram(w: &[u8]) -> u64 {
    let mut a = [0u8; GRAM];
    a.copy_from_slice(w);
    u64::from_le_bytes(a)
}

/// Every name a subject's `logs` may search log messages for: each APIService's name and
/// group/version, each webhook's name (bare and quoted), each CRD's name, and each probe's path.
fn mention_candidates(b: &EvidenceBundle) -> Vec<String> {
    let mut out = Vec::new();
    for a in &b.api_services {
        out.push(a.name.clone());
        out.push(format!("{}/{}", a.group, a.version));
    }
    for w in &b.webhooks {
        out.push(w.name.clone());
        out.push(format!("\"{}\"", w.name));
    }
    for c in &b.crds {
        out.push(c.name.clone());
    }
    for p in &b.probes {
        if let Some(path) = p.path.as_deref() {
            out.push(path.split('?').next().unwrap_or("").to_string());
        }
    }
    out
}

fn key(r: &ObjectRef) -> (Kind, String) {
    (r.kind.clone(), r.name.clone())
}

fn index_by<'t>(
    targets: impl Iterator<Item = Option<&'t ObjectRef>>,
) -> HashMap<(Kind, String), Vec<usize>> {
    let mut out: HashMap<(Kind, String), Vec<usize>> = HashMap::new();
    for (i, t) in targets.enumerate() {
        if let Some(t) = t {
            out.entry(key(t)).or_default().push(i);
        }
    }
    out
}

/// Lookups of the bundle's namespaced objects by `(namespace, name)`.
#[derive(Default)]
pub struct ObjectIndex<'b> {
    /// Services.
    pub services: HashMap<(&'b str, &'b str), &'b crate::bundle::Service>,
    /// core/v1 Endpoints.
    pub endpoints: HashMap<(&'b str, &'b str), &'b crate::bundle::Endpoints>,
    /// EndpointSlices by their Service.
    pub slices: HashMap<(&'b str, &'b str), Vec<&'b crate::bundle::EndpointSlice>>,
    /// Pods.
    pub pods: HashMap<(&'b str, &'b str), &'b crate::bundle::Pod>,
    /// Pods by namespace.
    pub pods_in: HashMap<&'b str, Vec<&'b crate::bundle::Pod>>,
    /// Certificates by owner `(kind, name)`.
    pub certs: HashMap<(&'b Kind, &'b str), Vec<&'b crate::bundle::Certificate>>,
}

impl<'b> ObjectIndex<'b> {
    fn new(b: &'b EvidenceBundle) -> Self {
        let mut ix = ObjectIndex::default();
        for s in &b.services {
            ix.services.entry((&s.namespace, &s.name)).or_insert(s);
        }
        for e in &b.endpoints {
            ix.endpoints.entry((&e.namespace, &e.name)).or_insert(e);
        }
        for s in &b.endpoint_slices {
            if let Some(svc) = &s.service_name {
                ix.slices.entry((&s.namespace, svc)).or_default().push(s);
            }
        }
        for p in &b.pods {
            ix.pods.entry((&p.namespace, &p.name)).or_insert(p);
            ix.pods_in.entry(&p.namespace).or_default().push(p);
        }
        for c in &b.certificates {
            if let Some(o) = &c.origin.owner {
                ix.certs.entry((&o.kind, &o.name)).or_default().push(c);
            }
        }
        ix
    }
}

fn gap_for(bundle: &EvidenceBundle, prefix: &str) -> bool {
    bundle.gaps.iter().any(|g| g.source.starts_with(prefix))
}

/// Whether a kind of evidence is known: collected live without a gap, or supplied (an import
/// that holds none of a kind says nothing about it).
fn known(live: bool, supplied: bool, bundle: &EvidenceBundle, gap: &str) -> bool {
    (live || supplied) && !gap_for(bundle, gap)
}

/// The moment the evidence describes: the bundle's collection time, else the latest metrics scrape,
/// else the latest dated observation. Never the wall clock.
pub fn judging_time(bundle: &EvidenceBundle) -> Option<jiff::Timestamp> {
    bundle
        .collection
        .collected_at
        .or_else(|| bundle.metrics.iter().filter_map(|m| m.scraped_at).max())
        .or_else(|| bundle.probes.iter().filter_map(|p| p.at).max())
}

impl<'b> FactBase<'b> {
    /// Index a bundle.
    pub fn new(bundle: &'b EvidenceBundle) -> Self {
        let live = matches!(bundle.collection.source, CollectionSource::Live { .. });
        let at = judging_time(bundle);
        let lookup = Lookup::new(bundle);
        let probe_targets: Vec<Option<ObjectRef>> = bundle
            .probes
            .iter()
            .map(|p| probe_target(&lookup, p))
            .collect();
        let log_targets: Vec<Option<ObjectRef>> = bundle
            .log_findings
            .iter()
            .map(|l| {
                l.target
                    .clone()
                    .or_else(|| super::subjects::text_target(&lookup, &l.message))
            })
            .collect();
        let mut by_flow_schema_uid: HashMap<&str, Vec<usize>> = HashMap::new();
        let mut by_priority_level_uid: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, p) in bundle.probes.iter().enumerate() {
            if let Some(uid) = p.headers.flow_schema_uid.as_deref() {
                by_flow_schema_uid.entry(uid).or_default().push(i);
            }
            if let Some(uid) = p.headers.priority_level_uid.as_deref() {
                by_priority_level_uid.entry(uid).or_default().push(i);
            }
        }
        // A 429 without the PF headers (a `kubectl -v=6` trace, `curl` without `-i`) is the
        // one level's that alone rejects in kube-apiserver's own counters: APF counts every
        // request it rejects (`apiserver_flowcontrol_rejected_requests_total`, over the window
        // when there is one, else since start), so the client's 429 was rejected there. With
        // two rejecting levels the request names none.
        if let Some((level, schema)) = sole_rejecting_level(bundle) {
            let level_uid = lookup.priority_level(level).map(|l| l.uid.as_str());
            let schema_uid = schema.and_then(|name| {
                bundle
                    .flow_schemas
                    .iter()
                    .find(|f| f.name == name)
                    .map(|f| f.uid.as_str())
            });
            for (i, p) in bundle.probes.iter().enumerate() {
                let rejected = p.status == Some(429) || p.status_counts.contains_key("429");
                let unnamed =
                    p.headers.flow_schema_uid.is_none() && p.headers.priority_level_uid.is_none();
                // kube-apiserver's graceful shutdown answers 429 too (`with_retry_after.go`).
                let shutting_down = p.error_texts().iter().any(|t| t.contains("shutting down"));
                if !(rejected && unnamed) || shutting_down {
                    continue;
                }
                if let Some(uid) = level_uid.filter(|u| !u.is_empty()) {
                    by_priority_level_uid.entry(uid).or_default().push(i);
                }
                if let Some(uid) = schema_uid.filter(|u| !u.is_empty()) {
                    by_flow_schema_uid.entry(uid).or_default().push(i);
                }
            }
        }
        let mut remote = bundle.api_services.iter().filter(|a| a.service.is_some());
        let sole_remote = match (remote.next(), remote.next()) {
            (Some(a), None) => Some(a.name.as_str()),
            _ => None,
        };
        // Built on one thread: built on two, each thread's allocations went to an arena of its
        // own, and the analysis's peak memory grew by a seventh (bench `analyze_scale`).
        let request_facts = bundle
            .probes
            .iter()
            .zip(&probe_targets)
            .map(|(p, t)| {
                let name = p
                    .path
                    .clone()
                    .or_else(|| p.description.clone())
                    .unwrap_or_default();
                requests::request_fact(&[p], t.as_ref(), &name)
            })
            .collect::<Vec<Fact>>();
        let log_facts: Vec<Fact> = bundle.log_findings.iter().map(requests::log_fact).collect();
        FactBase {
            bundle,
            at,
            server_minor: bundle
                .collection
                .server_version
                .as_ref()
                .and_then(|v| v.major_minor())
                .map(|(_, m)| m),
            services_known: (live || !bundle.services.is_empty())
                && !gap_for(bundle, "objects/services"),
            endpoints_known: (live
                || !bundle.endpoints.is_empty()
                || !bundle.endpoint_slices.is_empty())
                && !gap_for(bundle, "objects/endpoint"),
            pods_known: (live || !bundle.pods.is_empty()) && !gap_for(bundle, "objects/pods"),
            rbac_cluster_known: known(
                live,
                !bundle.cluster_roles.is_empty(),
                bundle,
                rbac::GAP_CLUSTER_ROLES,
            ) && known(
                live,
                !bundle.cluster_role_bindings.is_empty(),
                bundle,
                rbac::GAP_CLUSTER_ROLE_BINDINGS,
            ),
            rbac_kube_system_known: known(live, !bundle.roles.is_empty(), bundle, rbac::GAP_ROLES)
                && known(
                    live,
                    !bundle.role_bindings.is_empty(),
                    bundle,
                    rbac::GAP_ROLE_BINDINGS,
                ),
            // A live collection read every role: a binding to a missing one grants nothing.
            rbac: crate::engine::rbac::Rbac::new(bundle, live),
            request_facts,
            observations_by_target: index_by(probe_targets.iter().map(Option::as_ref)),
            probe_targets,
            apiserver_addresses: crate::engine::subjects::apiserver_addresses(bundle),
            log_facts,
            index: ObjectIndex::new(bundle),
            traced: timed::by_target(bundle),
            logs_by_target: index_by(log_targets.iter().map(Option::as_ref)),
            log_targets,
            mentions: OnceLock::new(),
            by_flow_schema_uid,
            by_priority_level_uid,
            sole_remote,
            lookup,
        }
    }

    /// The request facts of the probes that concern `r` (same kind and name), in bundle order.
    fn observations_of(&self, r: &ObjectRef) -> Fact {
        let found = self.observations_by_target.get(&key(r));
        list(
            found
                .into_iter()
                .flatten()
                .map(|&i| self.request_facts[i].clone()),
        )
    }

    /// The log facts of the findings that concern `r` (same kind and name) or whose message
    /// contains one of `mentions`, in bundle order.
    fn logs_of(&self, r: &ObjectRef, mentions: &[String]) -> Fact {
        let logs = &self.bundle.log_findings;
        if logs.is_empty() {
            return list(std::iter::empty());
        }
        let mut found: Vec<usize> = self
            .logs_by_target
            .get(&key(r))
            .cloned()
            .unwrap_or_default();
        let index = self
            .mentions
            .get_or_init(|| MentionIndex::new(self.bundle, mention_candidates(self.bundle)));
        for m in mentions.iter().filter(|m| !m.is_empty()) {
            match index.logs.get(m) {
                Some(hits) => found.extend(hits),
                // A mention no subject of this bundle makes: scan for it.
                None => found.extend(
                    logs.iter()
                        .enumerate()
                        .filter(|(_, l)| l.message.contains(m.as_str()))
                        .map(|(i, _)| i),
                ),
            }
        }
        found.sort_unstable();
        found.dedup();
        list(found.into_iter().map(|i| self.log_facts[i].clone()))
    }
}

/// Below this many request facts, a second thread costs more than it saves.
const PARALLEL_FROM: usize = 2_000;

impl Drop for FactBase<'_> {
    /// The request facts are freed on two threads: freeing 20,000 facts' maps one at a time was
    /// a tenth of a large analysis, after the evaluation threads had finished.
    fn drop(&mut self) {
        let mut facts = std::mem::take(&mut self.request_facts);
        if facts.len() < PARALLEL_FROM {
            return;
        }
        let half = facts.split_off(facts.len() / 2);
        std::thread::scope(|scope| {
            scope.spawn(move || drop(half));
            drop(facts);
        });
    }
}

/// The cluster-wide variables, built once per analysis.
pub fn cluster_vars(base: &FactBase<'_>, settings: &Settings) -> Vec<(&'static str, Fact)> {
    vec![
        ("cluster", cluster::cluster_fact(base)),
        ("apiserver", cluster::apiserver_fact(base)),
        ("etcd", cluster::etcd_fact(base)),
        ("settings", cluster::settings_fact(settings)),
    ]
}

fn subject_fact(entry: &SubjectEntry<'_>) -> Fact {
    let s = &entry.subject;
    value::Obj::new()
        .s("kind", s.kind.as_str())
        .s("name", s.name.clone())
        .s("namespace", s.namespace.clone().unwrap_or_default())
        .s("parent", s.parent.clone().unwrap_or_default())
        .build()
}

/// The request facts of the probes whose APF header (`uid_of`) names this object's `uid` — the
/// requests a FlowSchema or priority level classified. An object without a uid has none.
fn observations_with_uid(
    by_uid: &HashMap<&str, Vec<usize>>,
    base: &FactBase<'_>,
    uid: &str,
) -> Fact {
    let found = (!uid.is_empty()).then(|| by_uid.get(uid)).flatten();
    list(
        found
            .into_iter()
            .flatten()
            .map(|&i| base.request_facts[i].clone()),
    )
}

/// `service`, `endpoints`, `pods`, `tls` of an object that points at a Service or URL.
fn backend_vars(
    base: &FactBase<'_>,
    owner: Option<&ObjectRef>,
    service: Option<&ServiceRef>,
    default_port: i32,
    server_name: &str,
    ca_bundle_present: bool,
    insecure: bool,
) -> Vec<(&'static str, Fact)> {
    let (endpoints, pods) = backend::endpoints_and_pods(base, service, default_port);
    vec![
        (
            "service",
            backend::service_fact(base, service, default_port),
        ),
        ("endpoints", endpoints),
        ("pods", pods),
        (
            "tls",
            tls::tls_fact(base, owner, server_name, ca_bundle_present, insecure),
        ),
    ]
}

fn webhook_target_vars(
    base: &FactBase<'_>,
    owner: Option<&ObjectRef>,
    t: Option<&WebhookTarget>,
) -> Vec<(&'static str, Fact)> {
    backend_vars(
        base,
        owner,
        t.and_then(|t| t.service.as_ref()),
        443,
        &t.and_then(WebhookTarget::server_name).unwrap_or_default(),
        t.is_some_and(|t| t.ca_bundle_present),
        false,
    )
}

/// The subject's own variables, built once per subject.
pub fn subject_vars(base: &FactBase<'_>, entry: &SubjectEntry<'_>) -> Vec<(&'static str, Fact)> {
    let b = base.bundle;
    let mut vars = vec![("subject", subject_fact(entry))];
    match &entry.source {
        SubjectSource::ApiService(a) => {
            let r = ObjectRef::cluster(Kind::ApiService, &a.name);
            vars.push((
                "apiservice",
                objects::apiservice_fact(Some(a), cluster::extension_health_fact(base, &a.name)),
            ));
            let server_name = a
                .service
                .as_ref()
                .map(ServiceRef::server_name)
                .unwrap_or_default();
            vars.extend(backend_vars(
                base,
                Some(&r),
                a.service.as_ref(),
                443,
                &server_name,
                a.ca_bundle_present,
                a.insecure_skip_tls_verify,
            ));
            vars.push(("delegation", delegation::delegation_fact(base, Some(a))));
            vars.push(("observations", base.observations_of(&r)));
            let gv = format!("{}/{}", a.group, a.version);
            vars.push(("logs", base.logs_of(&r, &[a.name.clone(), gv])));
        }
        SubjectSource::Webhook(w) => {
            let r = ObjectRef::cluster(w.kind.object_kind(), &w.name);
            vars.push((
                "webhook",
                objects::webhook_fact(Some(w), timed::of(&base.traced, Some(&r))),
            ));
            vars.extend(webhook_target_vars(base, Some(&r), Some(&w.target)));
            vars.push(("observations", base.observations_of(&r)));
            vars.push(("logs", base.logs_of(&r, &[format!("\"{}\"", w.name)])));
        }
        SubjectSource::Crd(c) => {
            let r = ObjectRef::cluster(Kind::CustomResourceDefinition, &c.name);
            vars.push(("crd", objects::crd_fact(Some(c))));
            vars.extend(webhook_target_vars(
                base,
                Some(&r),
                c.conversion.webhook.as_ref(),
            ));
            vars.push(("observations", base.observations_of(&r)));
            vars.push(("logs", base.logs_of(&r, std::slice::from_ref(&c.name))));
        }
        SubjectSource::FlowSchema(f) => {
            let level = base.lookup.priority_level(&f.priority_level);
            vars.push(("flowschema", cluster::flowschema_fact(base, Some(f))));
            vars.push(("prioritylevel", cluster::prioritylevel_fact(base, level)));
            vars.push((
                "observations",
                observations_with_uid(&base.by_flow_schema_uid, base, &f.uid),
            ));
        }
        SubjectSource::PriorityLevel(p) => {
            vars.push(("prioritylevel", cluster::prioritylevel_fact(base, Some(p))));
            vars.push((
                "observations",
                observations_with_uid(&base.by_priority_level_uid, base, &p.uid),
            ));
        }
        SubjectSource::ApiServer | SubjectSource::Etcd => {
            vars.push((
                "observations",
                list(
                    b.probes
                        .iter()
                        .zip(&base.request_facts)
                        .filter(|(p, _)| {
                            super::subjects::is_failing_on_path(&base.apiserver_addresses, p)
                        })
                        .map(|(_, v)| v.clone()),
                ),
            ));
        }
        SubjectSource::Request(members) => {
            vars.extend(request_vars(base, entry, members));
        }
    }
    vars
}

fn request_vars(
    base: &FactBase<'_>,
    entry: &SubjectEntry<'_>,
    members: &[usize],
) -> Vec<(&'static str, Fact)> {
    let b = base.bundle;
    let probes: Vec<&crate::bundle::Probe> = members.iter().map(|&i| &b.probes[i]).collect();
    let targets: Vec<&ObjectRef> = members
        .iter()
        .filter_map(|&i| base.probe_targets[i].as_ref())
        .collect();
    let find = |kinds: &[Kind]| targets.iter().find(|t| kinds.contains(&t.kind)).copied();
    let api_ref = find(&[Kind::ApiService]);
    let wh_ref = find(&[Kind::ValidatingWebhook, Kind::MutatingWebhook]);
    let crd_ref = find(&[Kind::CustomResourceDefinition]);
    let target = api_ref.or(wh_ref).or(crd_ref).or(targets.first().copied());
    let lookup = &base.lookup;
    let api = api_ref.and_then(|r| lookup.api_service(&r.name));
    let wh = wh_ref.and_then(|r| lookup.webhook(&r.kind, &r.name));
    let crd = crd_ref.and_then(|r| lookup.crd(&r.name));
    let fs = probes.iter().find_map(|p| {
        let uid = p.headers.flow_schema_uid.as_deref()?;
        lookup.flow_schema_by_uid(uid)
    });
    let pl = probes
        .iter()
        .find_map(|p| {
            let uid = p.headers.priority_level_uid.as_deref()?;
            lookup.priority_level_by_uid(uid)
        })
        .or_else(|| fs.and_then(|f| lookup.priority_level(&f.priority_level)));
    let mut vars = vec![
        (
            "request",
            requests::request_fact(&probes, target, &entry.subject.name),
        ),
        (
            "apiservice",
            objects::apiservice_fact(
                api,
                cluster::extension_health_fact(base, api.map_or("", |a| a.name.as_str())),
            ),
        ),
        (
            "webhook",
            objects::webhook_fact(wh, timed::of(&base.traced, wh_ref)),
        ),
        ("crd", objects::crd_fact(crd)),
        ("flowschema", cluster::flowschema_fact(base, fs)),
        ("prioritylevel", cluster::prioritylevel_fact(base, pl)),
    ];
    if let Some(a) = api {
        let r = ObjectRef::cluster(Kind::ApiService, &a.name);
        vars.extend(backend_vars(
            base,
            Some(&r),
            a.service.as_ref(),
            443,
            &a.service
                .as_ref()
                .map(ServiceRef::server_name)
                .unwrap_or_default(),
            a.ca_bundle_present,
            a.insecure_skip_tls_verify,
        ));
        let gv = format!("{}/{}", a.group, a.version);
        vars.push(("logs", base.logs_of(&r, &[a.name.clone(), gv])));
    } else if let Some(w) = wh {
        let r = ObjectRef::cluster(w.kind.object_kind(), &w.name);
        vars.extend(webhook_target_vars(base, Some(&r), Some(&w.target)));
        vars.push(("logs", base.logs_of(&r, &[format!("\"{}\"", w.name)])));
    } else if let Some(c) = crd {
        let r = ObjectRef::cluster(Kind::CustomResourceDefinition, &c.name);
        vars.extend(webhook_target_vars(
            base,
            Some(&r),
            c.conversion.webhook.as_ref(),
        ));
        vars.push(("logs", base.logs_of(&r, std::slice::from_ref(&c.name))));
    } else {
        vars.extend(backend_vars(base, None, None, 443, "", false, false));
        let mut mentions: Vec<String> = target.map(|t| vec![t.name.clone()]).unwrap_or_default();
        mentions.extend(
            probes
                .iter()
                .filter_map(|p| p.path.as_deref())
                .map(|p| p.split('?').next().unwrap_or("").to_string())
                .filter(|p| p.len() > 1),
        );
        let r = target
            .cloned()
            .unwrap_or_else(|| ObjectRef::cluster(Kind::Other(String::new()), "\u{0}"));
        vars.push(("logs", base.logs_of(&r, &mentions)));
    }
    vars
}

/// The one PriorityLevel (and, when one alone, FlowSchema) whose
/// `apiserver_flowcontrol_rejected_requests_total` counts rejections in kube-apiserver's metrics:
/// over the window when the metrics have one, else since the process started. `None` when no
/// level or more than one rejects.
fn sole_rejecting_level(b: &EvidenceBundle) -> Option<(&str, Option<&str>)> {
    use crate::bundle::metrics::MetricTarget;
    let source = b
        .metrics
        .iter()
        .find(|m| m.target == MetricTarget::Apiserver)?;
    // Under whichever name this release exposes it (the one version table).
    let family =
        crate::bundle::metrics::names_to_try("apiserver_flowcontrol_rejected_requests_total")
            .into_iter()
            .find_map(|name| source.family(name))?;
    let windowed = source.is_windowed();
    let mut levels: Vec<&str> = Vec::new();
    let mut schemas: Vec<&str> = Vec::new();
    for s in &family.series {
        let count = if windowed {
            s.window.as_ref().and_then(|w| w.delta).map_or(0.0, |d| d.0)
        } else {
            s.value.map_or(0.0, |v| v.0)
        };
        if count <= 0.0 {
            continue;
        }
        let (Some(level), schema) = (s.labels.get("priority_level"), s.labels.get("flow_schema"))
        else {
            continue;
        };
        if !levels.contains(&level.as_str()) {
            levels.push(level);
        }
        if let Some(schema) = schema
            && !schemas.contains(&schema.as_str())
        {
            schemas.push(schema);
        }
    }
    match (levels.as_slice(), schemas.as_slice()) {
        ([level], [schema]) => Some((level, Some(schema))),
        ([level], _) => Some((level, None)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::LogFinding;

    /// The index finds exactly the findings a `contains` scan finds, for candidates that occur,
    /// that do not, that are shorter than a window, that overlap each other and that hold
    /// multi-byte characters; none of what occurs is ruled out by the window filter.
    #[test]
    fn the_mention_index_finds_what_a_scan_finds() {
        let messages = [
            "loading OpenAPI spec for \"v1beta1.metrics.k8s.io\" failed with: failing or missing response",
            "Failed calling webhook \"pod-policy.example.com\": context deadline exceeded",
            "GET /apis/metrics.k8s.io/v1beta1 503 — ünïcode détail",
            "short",
        ];
        let mut bundle = EvidenceBundle::default();
        bundle.log_findings = messages
            .iter()
            .map(|m| LogFinding {
                pattern: String::new(),
                component: crate::bundle::observations::Component::Unknown,
                severity: None,
                first_seen: None,
                last_seen: None,
                count: 1,
                message: (*m).to_string(),
                fields: std::collections::BTreeMap::new(),
                target: None,
                origin: None,
            })
            .collect();
        let candidates: Vec<String> = [
            "v1beta1.metrics.k8s.io",
            "metrics.k8s.io/v1beta1",
            "\"pod-policy.example.com\"",
            "pod-policy.example.com",
            "v1.other.example.com",
            "/apis/metrics.k8s.io/v1beta1",
            "metrics",
            "sho",
            "ünïcode détail",
            "ünïcode dètail",
            "k8s.io",
            "",
        ]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
        let index = MentionIndex::new(&bundle, candidates.clone());
        for c in candidates.iter().filter(|c| !c.is_empty()) {
            let scan: Vec<usize> = messages
                .iter()
                .enumerate()
                .filter(|(_, m)| m.contains(c.as_str()))
                .map(|(i, _)| i)
                .collect();
            assert_eq!(index.logs.get(c), Some(&scan), "{c}");
        }
    }
}
