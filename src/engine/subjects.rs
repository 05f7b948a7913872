//! Which subjects a bundle has verdicts for, and which object each observed request concerns.
//!
//! Subjects are the objects of the extension paths (remote APIServices, each webhook, CRDs, FlowSchemas,
//! PriorityLevels), the API server and etcd as a whole when there is evidence about them, each
//! failing request known from client output, and the request `why` reproduced (`Probe.reproduced`),
//! failing or not — a slow success or a watch gone quiet is judged too. Local APIServices (`spec.service` unset) are served in
//! process and have no path of their own to judge; their failures show up on the Request, APIServer
//! and Etcd subjects.
//!
//! A request seen several times — kubectl's stderr, its `-v6` trace and a curl of the same URL — is one
//! subject: observations are merged by method, path (without the query) or kubectl's description,
//! watch or not, and user. Which APIService, webhook or CRD a request concerns is read from the
//! bundle's `Probe.target` when the importer knew it, else from the evidence itself: the webhook name
//! quoted in `failed calling webhook "…"`, the CRD named in `conversion webhook for …`, or the
//! group/version of the path matched against the bundle's APIServices and CRDs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::diagnosis::{Subject, SubjectKind};
use crate::bundle::probes::{ClientTool, ProbeKind};
use crate::bundle::{
    ApiService, Crd, EvidenceBundle, FlowSchema, Kind, ObjectRef, PriorityLevel, Probe, Webhook,
};

/// What a subject is, with the bundle data behind it.
#[derive(Debug, Clone)]
pub enum SubjectSource<'b> {
    /// A remote APIService.
    ApiService(&'b ApiService),
    /// One admission webhook.
    Webhook(&'b Webhook),
    /// A CRD.
    Crd(&'b Crd),
    /// An APF FlowSchema.
    FlowSchema(&'b FlowSchema),
    /// An APF PriorityLevelConfiguration.
    PriorityLevel(&'b PriorityLevel),
    /// kube-apiserver as a whole.
    ApiServer,
    /// etcd.
    Etcd,
    /// One request: the indexes into `bundle.probes` of its merged observations.
    Request(Vec<usize>),
}

/// A subject of the bundle, its related objects and its data.
#[derive(Debug, Clone)]
pub struct SubjectEntry<'b> {
    /// The subject as the Diagnosis names it.
    pub subject: Subject,
    /// Related objects (a request's APIService/webhook/CRD, an APIService's Service).
    pub related: Vec<Subject>,
    /// The data behind it.
    pub source: SubjectSource<'b>,
}

/// The bundle's objects by the keys subjects and facts look them up by, built once per analysis,
/// so that matching thousands of requests to thousands of objects is not a scan per request.
///
/// Every list keeps the bundle's order, so a lookup returns what a scan of the bundle would have
/// found first (or, for `max_by_key`, last among equals).
pub struct Lookup<'b> {
    /// The bundle.
    pub bundle: &'b EvidenceBundle,
    remote_by_group: HashMap<&'b str, Vec<&'b ApiService>>,
    api_by_name: HashMap<&'b str, &'b ApiService>,
    webhooks_by_name: HashMap<&'b str, Vec<&'b Webhook>>,
    crds_by_group: HashMap<&'b str, Vec<&'b Crd>>,
    crd_by_name: HashMap<&'b str, &'b Crd>,
    flow_schema_by_uid: HashMap<&'b str, &'b FlowSchema>,
    level_by_uid: HashMap<&'b str, &'b PriorityLevel>,
    levels_by_name: HashMap<&'b str, Vec<&'b PriorityLevel>>,
}

impl<'b> Lookup<'b> {
    /// Index a bundle.
    pub fn new(bundle: &'b EvidenceBundle) -> Self {
        let mut l = Lookup {
            bundle,
            remote_by_group: HashMap::new(),
            api_by_name: HashMap::new(),
            webhooks_by_name: HashMap::new(),
            crds_by_group: HashMap::new(),
            crd_by_name: HashMap::new(),
            flow_schema_by_uid: HashMap::new(),
            level_by_uid: HashMap::new(),
            levels_by_name: HashMap::new(),
        };
        for a in &bundle.api_services {
            l.api_by_name.entry(&a.name).or_insert(a);
            if !a.is_local() {
                l.remote_by_group.entry(&a.group).or_default().push(a);
            }
        }
        for w in &bundle.webhooks {
            l.webhooks_by_name.entry(&w.name).or_default().push(w);
        }
        for c in &bundle.crds {
            l.crds_by_group.entry(&c.group).or_default().push(c);
            l.crd_by_name.entry(&c.name).or_insert(c);
        }
        for f in &bundle.flow_schemas {
            l.flow_schema_by_uid.entry(&f.uid).or_insert(f);
        }
        for p in &bundle.priority_levels {
            l.level_by_uid.entry(&p.uid).or_insert(p);
            l.levels_by_name.entry(&p.name).or_default().push(p);
        }
        l
    }

    /// The first APIService of this name.
    pub fn api_service(&self, name: &str) -> Option<&'b ApiService> {
        self.api_by_name.get(name).copied()
    }

    /// The remote APIServices of a group, in bundle order.
    fn remote_in_group(&self, group: &str) -> &[&'b ApiService] {
        self.remote_by_group.get(group).map_or(&[], Vec::as_slice)
    }

    /// The webhooks of this name (any kind, any configuration), in bundle order.
    pub fn webhooks_named(&self, name: &str) -> &[&'b Webhook] {
        self.webhooks_by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// The first webhook of this name and subject kind (`ValidatingWebhook`, `MutatingWebhook`).
    pub fn webhook(&self, kind: &Kind, name: &str) -> Option<&'b Webhook> {
        self.webhooks_named(name)
            .iter()
            .find(|w| w.kind.object_kind() == *kind)
            .copied()
    }

    /// The CRDs of a group, in bundle order.
    fn crds_in_group(&self, group: &str) -> &[&'b Crd] {
        self.crds_by_group.get(group).map_or(&[], Vec::as_slice)
    }

    /// The first CRD of this name.
    pub fn crd(&self, name: &str) -> Option<&'b Crd> {
        self.crd_by_name.get(name).copied()
    }

    /// The first FlowSchema of this uid.
    pub fn flow_schema_by_uid(&self, uid: &str) -> Option<&'b FlowSchema> {
        self.flow_schema_by_uid.get(uid).copied()
    }

    /// The first priority level of this uid.
    pub fn priority_level_by_uid(&self, uid: &str) -> Option<&'b PriorityLevel> {
        self.level_by_uid.get(uid).copied()
    }

    /// The priority levels of this name, in bundle order.
    pub fn priority_levels_named(&self, name: &str) -> &[&'b PriorityLevel] {
        self.levels_by_name.get(name).map_or(&[], Vec::as_slice)
    }

    /// The first priority level of this name.
    pub fn priority_level(&self, name: &str) -> Option<&'b PriorityLevel> {
        self.priority_levels_named(name).first().copied()
    }
}

/// The object a probe concerns, as a reference (kind is a subject kind name).
pub fn probe_target(lookup: &Lookup<'_>, probe: &Probe) -> Option<ObjectRef> {
    if let Some(t) = &probe.target
        && SubjectKind::of_object(&t.kind).is_some()
    {
        return Some(t.clone());
    }
    if let Some(t) = probe
        .error_texts()
        .into_iter()
        .find_map(|t| text_target(lookup, t))
    {
        return Some(t);
    }
    let (group, version, resource) = request_gvr(probe);
    if group.is_empty() {
        return None;
    }
    let remote = lookup
        .remote_in_group(&group)
        .iter()
        .filter(|a| version.is_empty() || a.version == version)
        .max_by_key(|a| a.version_priority.unwrap_or(0));
    if let Some(a) = remote {
        return Some(ObjectRef::cluster(Kind::ApiService, &a.name));
    }
    lookup
        .crds_in_group(&group)
        .iter()
        .find(|c| resource.is_empty() || c.plural == resource)
        .map(|c| ObjectRef::cluster(Kind::CustomResourceDefinition, &c.name))
}

/// The object an error text names: the webhook quoted in `failed calling webhook "…"` or `admission
/// webhook "…" denied`, the CRD of `conversion webhook for <gv>, Kind=<Kind>`, or the APIService of a
/// client's discovery failure — when the bundle has that object.
pub fn text_target(lookup: &Lookup<'_>, text: &str) -> Option<ObjectRef> {
    if let Some(name) = quoted_after(text, "failed calling webhook \"")
        .or_else(|| quoted_after(text, "admission webhook \""))
        .or_else(|| quoted_after(text, "rejected by webhook \""))
        && let Some(w) = lookup.webhooks_named(name).first()
    {
        return Some(ObjectRef::cluster(w.kind.object_kind(), &w.name));
    }
    if let Some(crd) = conversion_crd(lookup, text) {
        return Some(ObjectRef::cluster(
            Kind::CustomResourceDefinition,
            &crd.name,
        ));
    }
    discovery_failure_apiservice(lookup, text)
        .map(|a| ObjectRef::cluster(Kind::ApiService, &a.name))
}

/// The text between `prefix` and the next `"`.
pub fn quoted_after<'t>(text: &'t str, prefix: &str) -> Option<&'t str> {
    let start = text.find(prefix)? + prefix.len();
    let rest = &text[start..];
    let end = rest.find('"')?;
    Some(&rest[..end]).filter(|s| !s.is_empty())
}

/// The remote APIService of a group/version named by a client's discovery failure
/// (`unable to retrieve the complete list of server APIs: <g>/<v>: …`, `couldn't get resource list
/// for <g>/<v>: …`, `stale GroupVersion discovery: <g>/<v>`).
fn discovery_failure_apiservice<'b>(lookup: &Lookup<'b>, text: &str) -> Option<&'b ApiService> {
    const PREFIXES: [&str; 3] = [
        "unable to retrieve the complete list of server APIs: ",
        "couldn't get resource list for ",
        "stale GroupVersion discovery: ",
    ];
    PREFIXES.iter().find_map(|prefix| {
        let start = text.find(prefix)? + prefix.len();
        let gv = text[start..].split([':', ',', ' ', '"']).next()?;
        let (group, version) = gv.split_once('/')?;
        lookup
            .remote_in_group(group)
            .iter()
            .find(|a| a.version == version)
            .copied()
    })
}

/// The CRD named by `conversion webhook for <group>/<version>, Kind=<Kind>` in a text.
fn conversion_crd<'b>(lookup: &Lookup<'b>, text: &str) -> Option<&'b Crd> {
    let start = text.find("conversion webhook for ")? + "conversion webhook for ".len();
    let rest = &text[start..];
    let gv = rest.split([',', ' ']).next()?;
    let group = gv.split('/').next()?;
    let kind = rest
        .find("Kind=")
        .map(|i| &rest[i + 5..])
        .and_then(|k| k.split([' ', ',', ':']).next())
        .unwrap_or("");
    lookup
        .crds_in_group(group)
        .iter()
        .find(|c| kind.is_empty() || c.kind == kind)
        .copied()
}

/// Group, version and resource a request addresses, from its path or kubectl's description
/// (`get flunders.wardle.example.com`). Empty strings when unknown; the core group is `""`.
pub fn request_gvr(probe: &Probe) -> (String, String, String) {
    if let Some(path) = &probe.path {
        let path = path.split('?').next().unwrap_or("");
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        if parts.first() == Some(&"apis") && parts.len() >= 2 {
            let group = parts[1].to_string();
            let version = parts.get(2).map(|s| s.to_string()).unwrap_or_default();
            let rest = &parts[3.min(parts.len())..];
            let resource = match rest {
                ["namespaces", _, r, ..] => r.to_string(),
                [r, ..] => r.to_string(),
                [] => String::new(),
            };
            return (group, version, resource);
        }
        return (String::new(), String::new(), String::new());
    }
    if let Some(desc) = &probe.description {
        let target = desc.split_whitespace().nth(1).unwrap_or("");
        if let Some((resource, group)) = target.split_once('.') {
            return (group.to_string(), String::new(), resource.to_string());
        }
    }
    (String::new(), String::new(), String::new())
}

fn is_watch(p: &Probe) -> bool {
    p.watch.is_some()
        || p.path.as_deref().is_some_and(|path| {
            path.split_once('?')
                .is_some_and(|(_, q)| q.split('&').any(|kv| kv == "watch=1" || kv == "watch=true"))
        })
}

/// Whether an observation belongs on a Request subject: it failed, or it is a watch a user captured.
pub fn is_failing(p: &Probe) -> bool {
    let bad_status = p.status.is_some_and(|s| s >= 400);
    let bad_counts = p
        .status_counts
        .keys()
        .any(|k| k.parse::<u16>().is_ok_and(|s| s >= 400));
    let bad_exit = p.exit_code.is_some_and(|c| c != 0);
    // A watch that simply ended is not a failure (the server closes watches at its own timeout);
    // an ERROR event (410 Expired), a broken stream or a client that gave up on a silent one is.
    let bad_watch = p.watch.as_ref().is_some_and(|w| {
        w.error_event.is_some()
            || matches!(
                w.end,
                crate::bundle::probes::WatchEnd::Broken
                    | crate::bundle::probes::WatchEnd::ClientTimeout
            )
    });
    bad_status || bad_counts || bad_exit || bad_watch || p.error.is_some()
}

/// Where the evidence shows the API server was reached, as normalised `host:port`s: kubectl's
/// traces (kubectl sends to its kubeconfig's server) and a live collection's server URL.
pub fn apiserver_addresses(bundle: &EvidenceBundle) -> BTreeSet<String> {
    let live = match &bundle.collection.source {
        crate::bundle::CollectionSource::Live { server, .. } => Some(server.as_str()),
        _ => None,
    };
    bundle
        .probes
        .iter()
        .filter(|p| p.origin.tool == ClientTool::KubectlTrace)
        .filter_map(|p| p.address.as_deref())
        .chain(live)
        .filter_map(normal_address)
        .collect()
}

/// `host:port` in one spelling: no scheme or path, lowercase, port 443 when none is given, and
/// every loopback name as one (`localhost:6443` and `127.0.0.1:6443` are one server).
fn normal_address(a: &str) -> Option<String> {
    let a = a.trim();
    let a = a.split_once("://").map_or(a, |(_, rest)| rest);
    let a = a.split('/').next()?.to_ascii_lowercase();
    if a.is_empty() {
        return None;
    }
    let (host, port) = match a.rsplit_once(':') {
        // `[::1]:443`, `host:443`; a bare IPv6 address without brackets has no port.
        Some((h, p))
            if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':') =>
        {
            (h.to_string(), p.to_string())
        }
        _ => (a.clone(), "443".to_string()),
    };
    let host = match host.trim_start_matches('[').trim_end_matches(']') {
        "localhost" | "127.0.0.1" | "::1" => "loopback".to_string(),
        h => h.to_string(),
    };
    Some(format!("{host}:{port}"))
}

/// Whether an observation is a client's request sent past the API server — to an address the API
/// server was not reached at in this evidence: a backend's Pod IP, a port-forward — that the backend
/// answered 401 or 403. A backend authenticates only the aggregator's front-proxy certificate (and
/// bearer tokens it reviews); an on-call's direct `curl` without those credentials is refused by
/// design, so its answer says nothing about the aggregated path's authentication and is no
/// failing request (docs/diagnosis.md#rule-4). Undecided (false) when either address is unknown.
pub fn refused_off_path(apiserver: &BTreeSet<String>, p: &Probe) -> bool {
    p.origin.kind == ProbeKind::ClientOutput
        && matches!(p.status, Some(401 | 403))
        && !apiserver.is_empty()
        && p.address
            .as_deref()
            .and_then(normal_address)
            .is_some_and(|a| !apiserver.contains(&a))
}

/// [`is_failing`], leaving out the answers a backend gives a client that went past the API server
/// ([`refused_off_path`]).
pub fn is_failing_on_path(apiserver: &BTreeSet<String>, p: &Probe) -> bool {
    is_failing(p) && !refused_off_path(apiserver, p)
}

/// Whether an observation is a Request subject of its own: it failed, it is a watch a user
/// captured, or it is the request `why` reproduced (judged whatever its outcome).
fn wants_subject(p: &Probe) -> bool {
    // extpath's own dial of an object's backend (no request path) is an observation of that
    // object, not a request of its own; so is a client's dial of a backend's address that got no
    // answer (an on-call's `curl -v` of a webhook's backend, mapped by its address on import).
    let own_dial = p.origin.kind == ProbeKind::Probe && p.path.is_none();
    let client_dial = p.address.is_some() && p.status.is_none();
    let backend_dial = (own_dial || client_dial) && p.target.is_some();
    !backend_dial
        && (p.reproduced
            || is_failing(p)
            || (p.origin.kind == ProbeKind::ClientOutput && p.watch.is_some()))
}

/// The query is left out so that kubectl's `?limit=500`, a curl without it and a trace with
/// `?timeout=32s` of one request are one subject; a watch is kept apart from a GET of the same
/// path, since it fails differently (410, terminated streams).
fn path_key(p: &Probe) -> Option<String> {
    let path = p.path.as_deref()?.split('?').next()?.to_string();
    let method = if is_watch(p) {
        "WATCH".to_string()
    } else {
        p.method
            .clone()
            .unwrap_or_else(|| "GET".into())
            .to_uppercase()
    };
    Some(format!("{method} {path}"))
}

/// The subject name of a group of observations of one request.
fn request_name(bundle: &EvidenceBundle, members: &[usize]) -> String {
    let probes = members.iter().map(|&i| &bundle.probes[i]);
    if let Some(k) = probes.clone().find_map(path_key) {
        return k;
    }
    if let Some(d) = probes.clone().find_map(|p| p.description.clone()) {
        return d;
    }
    let file = probes
        .clone()
        .find_map(|p| p.origin.files.first().cloned())
        .map(|f| {
            std::path::Path::new(&f)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or(f)
        })
        .unwrap_or_else(|| format!("probe #{}", members[0]));
    format!("request in {file}")
}

/// Group failing observations into requests.
fn request_groups(bundle: &EvidenceBundle, targets: &[Option<ObjectRef>]) -> Vec<Vec<usize>> {
    let mut groups: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    let mut order: Vec<(String, String)> = Vec::new();
    let mut loose: Vec<usize> = Vec::new();
    let apiserver = apiserver_addresses(bundle);
    for (i, p) in bundle.probes.iter().enumerate() {
        if !wants_subject(p) || refused_off_path(&apiserver, p) {
            continue;
        }
        let user = p.user.clone().unwrap_or_default();
        let key = match path_key(p) {
            Some(k) => k,
            None => match &p.description {
                Some(d) => format!("desc {d}"),
                None => {
                    loose.push(i);
                    continue;
                }
            },
        };
        let k = (key, user);
        if !groups.contains_key(&k) {
            order.push(k.clone());
        }
        groups.entry(k).or_default().push(i);
    }
    // kubectl's stderr names a request only by description (`get flunders.wardle.example.com`);
    // fold it into the traced request of the same resource and user when there is exactly one.
    let mut folded: Vec<(String, String)> = Vec::new();
    for k in order.iter().filter(|k| k.0.starts_with("desc ")) {
        let desc_probe = &bundle.probes[groups[k][0]];
        let (g, _, r) = request_gvr(desc_probe);
        let verb = desc_probe
            .description
            .as_deref()
            .and_then(|d| d.split_whitespace().next())
            .unwrap_or("");
        if r.is_empty() || !matches!(verb, "get" | "list") {
            continue;
        }
        let candidates: Vec<&(String, String)> = order
            .iter()
            .filter(|o| o.0.starts_with("GET ") && o.1 == k.1)
            .filter(|o| {
                let p = &bundle.probes[groups[*o][0]];
                let (pg, _, pr) = request_gvr(p);
                pg == g && pr == r
            })
            .collect();
        if let [only] = candidates.as_slice() {
            let only = (*only).clone();
            let moved = groups[k].clone();
            groups
                .get_mut(&only)
                .expect("candidate exists")
                .extend(moved);
            folded.push(k.clone());
        }
    }
    let mut out: Vec<Vec<usize>> = order
        .into_iter()
        .filter(|k| !folded.contains(k))
        .map(|k| groups.remove(&k).expect("every ordered key has a group"))
        .collect();
    // An observation that names neither path nor resource (a bare kubectl error line, a curl body)
    // joins the one request it is evidently part of, else stands alone.
    let keyed = out.len();
    for i in loose {
        match unique_home(bundle, targets, &out[..keyed], i) {
            Some(g) => out[g].push(i),
            None => out.push(vec![i]),
        }
    }
    out
}

/// The single keyed request a loose observation belongs to: the one that printed the very same
/// error text with the same status, or — for a watch — the only watch of a compatible target.
fn unique_home(
    bundle: &EvidenceBundle,
    targets: &[Option<ObjectRef>],
    groups: &[Vec<usize>],
    loose: usize,
) -> Option<usize> {
    let p = &bundle.probes[loose];
    let texts = p.error_texts();
    // The client's whole error line is the most specific text; any shared inner text comes next.
    let matching = |same: &dyn Fn(&Probe) -> bool| -> Vec<usize> {
        groups
            .iter()
            .enumerate()
            .filter(|(_, g)| {
                g.iter().any(|&j| {
                    let q = &bundle.probes[j];
                    (p.status.is_none() || q.status == p.status) && same(q)
                })
            })
            .map(|(i, _)| i)
            .collect()
    };
    for candidates in [
        matching(&|q: &Probe| p.error.is_some() && q.error == p.error),
        matching(&|q: &Probe| q.error_texts().iter().any(|t| texts.contains(t))),
    ] {
        if let [only] = candidates.as_slice() {
            return Some(*only);
        }
    }
    p.watch.as_ref()?;
    let target = &targets[loose];
    let watches: Vec<usize> = groups
        .iter()
        .enumerate()
        .filter(|(_, g)| {
            g.iter().any(|&j| {
                let q = &bundle.probes[j];
                is_watch(q)
                    && match (target, &targets[j]) {
                        (Some(a), Some(b)) => a == b,
                        _ => true,
                    }
            })
        })
        .map(|(i, _)| i)
        .collect();
    match watches.as_slice() {
        [only] => Some(*only),
        _ => None,
    }
}

fn related_subject(r: &ObjectRef, lookup: &Lookup<'_>) -> Option<Subject> {
    let kind = SubjectKind::of_object(&r.kind)?;
    let parent = match kind {
        SubjectKind::ValidatingWebhook | SubjectKind::MutatingWebhook => lookup
            .webhook(&kind.object_kind()?, &r.name)
            .map(|w| w.configuration.as_str()),
        _ => None,
    };
    Some(Subject {
        parent: parent.map(str::to_string),
        ..Subject::new(kind, r.name.as_str())
    })
}

fn has_apiserver_evidence(b: &EvidenceBundle) -> bool {
    use crate::bundle::observations::Component;
    b.metrics_for(crate::bundle::MetricTarget::Apiserver)
        .is_some()
        || b.health_checks
            .iter()
            .any(|h| h.owner() == Component::KubeApiserver)
        || b.log_findings
            .iter()
            .any(|l| l.component == Component::KubeApiserver)
        || b.timed_hops
            .iter()
            .any(|h| h.component == Component::KubeApiserver)
}

fn has_etcd_evidence(b: &EvidenceBundle) -> bool {
    use crate::bundle::observations::Component;
    // kube-apiserver's etcd: its own metrics, health and logs, kube-apiserver's etcd check, or
    // kube-apiserver's traced storage calls — never an extension server's `[+]etcd` or `"List
    // etcd3"`, which are that server's own storage.
    b.metrics_for(crate::bundle::MetricTarget::Etcd).is_some()
        || b.health_checks.iter().any(|h| {
            h.owner() == Component::Etcd
                || (h.owner() == Component::KubeApiserver
                    && h.checks.iter().any(|c| c.name == "etcd"))
        })
        || b.log_findings
            .iter()
            .any(|l| l.component == Component::Etcd)
        || b.timed_hops
            .iter()
            .flat_map(|h| h.calls())
            .any(|c| c.is_apiserver_storage() || c.is_etcd_warning())
}

/// Every subject of the bundle, in a stable order: APIServices, webhooks, CRDs, FlowSchemas,
/// PriorityLevels, the API server, etcd, then requests.
pub fn subjects(bundle: &EvidenceBundle) -> Vec<SubjectEntry<'_>> {
    let lookup = Lookup::new(bundle);
    let targets: Vec<Option<ObjectRef>> = bundle
        .probes
        .iter()
        .map(|p| probe_target(&lookup, p))
        .collect();
    subjects_with(&lookup, &targets)
}

/// [`subjects`] over an indexed bundle, with the object each probe concerns already known
/// (`targets[i]` is [`probe_target`] of probe `i`).
pub fn subjects_with<'b>(
    lookup: &Lookup<'b>,
    targets: &[Option<ObjectRef>],
) -> Vec<SubjectEntry<'b>> {
    let bundle = lookup.bundle;
    let mut out = Vec::new();
    for a in bundle.api_services.iter().filter(|a| !a.is_local()) {
        out.push(SubjectEntry {
            subject: Subject::new(SubjectKind::ApiService, &a.name),
            related: Vec::new(),
            source: SubjectSource::ApiService(a),
        });
    }
    for w in &bundle.webhooks {
        let kind = match w.kind {
            crate::bundle::WebhookKind::Validating => SubjectKind::ValidatingWebhook,
            crate::bundle::WebhookKind::Mutating => SubjectKind::MutatingWebhook,
        };
        out.push(SubjectEntry {
            subject: Subject {
                parent: Some(w.configuration.clone()),
                ..Subject::new(kind, w.name.as_str())
            },
            related: Vec::new(),
            source: SubjectSource::Webhook(w),
        });
    }
    for c in &bundle.crds {
        out.push(SubjectEntry {
            subject: Subject::new(SubjectKind::CustomResourceDefinition, &c.name),
            related: Vec::new(),
            source: SubjectSource::Crd(c),
        });
    }
    for f in &bundle.flow_schemas {
        let related = lookup
            .priority_levels_named(&f.priority_level)
            .iter()
            .map(|p| Subject::new(SubjectKind::PriorityLevel, &p.name))
            .collect();
        out.push(SubjectEntry {
            subject: Subject::new(SubjectKind::FlowSchema, &f.name),
            related,
            source: SubjectSource::FlowSchema(f),
        });
    }
    for p in &bundle.priority_levels {
        out.push(SubjectEntry {
            subject: Subject::new(SubjectKind::PriorityLevel, &p.name),
            related: Vec::new(),
            source: SubjectSource::PriorityLevel(p),
        });
    }
    if has_apiserver_evidence(bundle) {
        out.push(SubjectEntry {
            subject: Subject::new(SubjectKind::ApiServer, "kube-apiserver"),
            related: Vec::new(),
            source: SubjectSource::ApiServer,
        });
    }
    if has_etcd_evidence(bundle) {
        out.push(SubjectEntry {
            subject: Subject::new(SubjectKind::Etcd, "etcd"),
            related: Vec::new(),
            source: SubjectSource::Etcd,
        });
    }
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for members in request_groups(bundle, targets) {
        let mut name = request_name(bundle, &members);
        let user = bundle.probes[members[0]].user.clone();
        let seen = names.entry(name.clone()).or_insert(0);
        *seen += 1;
        if *seen > 1 {
            name = match user {
                Some(u) => format!("{name} as {u}"),
                None => format!("{name} #{seen}"),
            };
        }
        let mut related: Vec<Subject> = Vec::new();
        for &i in &members {
            if let Some(r) = targets[i].as_ref().and_then(|r| related_subject(r, lookup))
                && !related.contains(&r)
            {
                related.push(r);
            }
        }
        out.push(SubjectEntry {
            subject: Subject::new(SubjectKind::Request, &name),
            related,
            source: SubjectSource::Request(members),
        });
    }
    out
}
