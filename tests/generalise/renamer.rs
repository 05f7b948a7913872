//! Test support: a meaning-preserving renamer for a raw capture folder.
//!
//! [`Renamer::plan`] reads a case folder and finds the names its users chose — namespaces, Services,
//! API groups (and so APIService names `<version>.<group>` and CRD names `<plural>.<group>`) with
//! their resources and kinds, webhook and webhook configuration names, FlowSchema and
//! PriorityLevelConfiguration names, workload and Pod names, users that are not `system:`
//! identities — from the content: the objects of every JSON/YAML document (lists, watch events,
//! Status details, discovery documents), the label values of `/metrics` dumps, and the request
//! paths, namespaces, groups, users and webhook names quoted in client output and logs. Names
//! Kubernetes fixes (`kube-system`, `default`, built-in groups, the bootstrap APF objects,
//! `system:` users) are never renamed.
//!
//! Names a certificate carries (subject or SAN of any PEM block in the folder or caBundle in its
//! objects) cannot be renamed — PEM/DER cannot be re-signed — so they are *kept*: a name that
//! occurs in a certificate name is left alone everywhere, and with it the Service and namespace of
//! a `<svc>.<ns>.svc` SAN. PEM blocks and base64 blobs are copied byte for byte.
//!
//! [`Renamer::copy_case`] writes the folder again with every name replaced, consistently in every
//! file (objects, kubectl and curl output, logs, metrics label values, readyz lists, traces), by
//! word-bounded replacement (longest name first, so `wardle` inside `wardle-system` and
//! `wardle.example.com` is never touched on its own). A short name that is also a word Kubernetes
//! itself uses (a Service called `api`, next to every `/api/v1` path) is replaced only where it
//! plainly names the object: quoted whole, an item of a `[a,b]` list, or qualified by its
//! namespace (`ns/api`, `api.ns`) or its kind (`service/api`). Files and directories get opaque
//! names (`f07-body.txt`) in their original order; the extension is kept and so is the stem that
//! pairs a curl body with its headers and status files.
//!
//! Everything is deterministic: new names are handed out per category in reverse sorted order of
//! the old ones (so two names of one category also swap places when sorted).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

/// What kind of object a name belongs to; also the order new names are handed out in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    Namespace,
    Service,
    Group,
    Webhook,
    WebhookConfiguration,
    FlowSchema,
    PriorityLevel,
    Workload,
    /// A resource (plural) of a user-chosen group.
    Resource,
    /// A kind of a user-chosen group (its `<Kind>List` is renamed with it).
    Kind,
    /// A user or service account that is not a `system:` identity.
    User,
}

impl Category {
    /// The `n`th (1-based) new name of this category: valid, plausible DNS names, unlike any
    /// original. They carry words the rules look for in error texts (`storage`, `etcd`, `webhook`,
    /// `timeout`, `throttled`), as real names often do, so that a rule matching a bare word where
    /// it should match a phrase shows.
    fn fresh(self, n: usize) -> String {
        match self {
            Category::Namespace => format!("storage-a{n}"),
            Category::Service => format!("etcd-proxy-b{n}"),
            Category::Group => format!("backup-c{n}.storage.example.org"),
            Category::Webhook => format!("timeout-d{n}.webhook.example.org"),
            Category::WebhookConfiguration => format!("webhook-e{n}"),
            Category::FlowSchema => format!("throttled-f{n}"),
            Category::PriorityLevel => format!("storage-g{n}"),
            Category::Workload => format!("etcd-h{n}"),
            Category::Resource => format!("etcdbackup{n}s"),
            Category::Kind => format!("EtcdBackup{n}"),
            Category::User => format!("storage-operator-{n}"),
        }
    }
}

/// Namespaces Kubernetes creates itself.
const FIXED_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The APF objects kube-apiserver bootstraps (mandatory and suggested configuration).
const BOOTSTRAP_APF: &[&str] = &[
    "exempt",
    "probes",
    "system",
    "system-leader-election",
    "endpoint-controller",
    "workload-leader-election",
    "system-node-high",
    "system-nodes",
    "node-high",
    "leader-election",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-system-service-accounts",
    "service-accounts",
    "workload-high",
    "workload-low",
    "global-default",
    "catch-all",
];

/// Words with a fixed meaning in the evidence (request path segments, built-in names, common
/// message words). A user-chosen name equal to one is replaced only where it plainly names the
/// object (see the module docs).
const FIXED_WORDS: &[&str] = &[
    "api",
    "apis",
    "v1",
    "version",
    "healthz",
    "livez",
    "readyz",
    "metrics",
    "openapi",
    "namespaces",
    "watch",
    "proxy",
    "status",
    "log",
    "logs",
    "default",
    "kubernetes",
    "localhost",
    "svc",
    "cluster",
    "local",
    "http",
    "https",
    "server",
    "apiserver",
    "webhook",
    "webhooks",
    "service",
    "services",
    "etcd",
    "admin",
    "system",
    "pods",
    "endpoints",
    "validate",
    "mutate",
    "convert",
    "deny",
    "true",
    "false",
    "none",
];

/// A group Kubernetes defines (core, the legacy unsuffixed groups, `*.k8s.io`).
fn builtin_group(g: &str) -> bool {
    !g.contains('.') || g.ends_with(".k8s.io") || g.ends_with(".kubernetes.io")
}

/// A Prometheus text dump: its first line is a `# HELP`/`# TYPE` comment or a sample.
fn is_metrics(text: &str) -> bool {
    let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    first.starts_with("# HELP ")
        || first.starts_with("# TYPE ")
        || first.split_once('{').is_some_and(|(m, _)| {
            !m.is_empty() && m.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        })
}

/// An API version (`v1`, `v1alpha1`, `v2beta3`).
fn is_version(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('v') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let tail = &rest[digits..];
    digits > 0
        && (tail.is_empty()
            || ["alpha", "beta"].iter().any(|p| {
                tail.strip_prefix(p)
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            }))
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// The characters of a DNS name (a namespace, a group, a webhook name).
fn is_dns(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'
}

/// One name to replace.
#[derive(Debug, Clone)]
struct Entry {
    from: String,
    to: String,
    /// For a name that is also a fixed word: the namespaces that may qualify it (`ns/name`,
    /// `name.ns`); it is replaced only there, quoted whole, or after its kind (`service/name`).
    qualified: Option<Vec<String>>,
}

/// A rename plan for one case folder.
#[derive(Debug)]
pub struct Renamer {
    /// Longest `from` first.
    entries: Vec<Entry>,
    /// Entry indexes by the first byte of `from`.
    by_first: Vec<Vec<usize>>,
    /// Whether a byte starts some `from`.
    first: [bool; 256],
    /// User-chosen names left alone because a certificate carries them.
    kept: BTreeSet<String>,
    /// Old file base name → new one (filled by `copy_case`).
    files: BTreeMap<String, String>,
}

/// What the content names.
#[derive(Default)]
struct Found {
    names: BTreeMap<Category, BTreeSet<String>>,
    /// (namespace, name) of every Service.
    services: BTreeSet<(String, String)>,
    /// Subject common names and DNS SANs of every certificate.
    cert_names: BTreeSet<String>,
}

impl Found {
    fn add(&mut self, cat: Category, name: &str) {
        let ok = match cat {
            Category::Namespace => !FIXED_NAMESPACES.contains(&name),
            Category::Group => !builtin_group(name),
            Category::FlowSchema | Category::PriorityLevel => !BOOTSTRAP_APF.contains(&name),
            Category::Webhook => !builtin_group(name),
            Category::User => !name.starts_with("system:"),
            _ => true,
        };
        let chars_ok = match cat {
            Category::Kind => name.bytes().all(|b| b.is_ascii_alphanumeric()),
            Category::User => name.bytes().all(|b| is_word(b) || b == b'.' || b == b'@'),
            _ => name.bytes().all(|b| is_dns(b) || b == b'_'),
        };
        if ok && !name.is_empty() && chars_ok {
            let set = self.names.entry(cat).or_default();
            if !set.contains(name) {
                set.insert(name.to_string());
            }
        }
    }

    fn service(&mut self, ns: Option<&str>, name: Option<&str>) {
        if let (Some(ns), Some(name)) = (ns, name) {
            if FIXED_NAMESPACES.contains(&ns) {
                return;
            }
            self.add(Category::Namespace, ns);
            self.add(Category::Service, name);
            self.services.insert((ns.to_string(), name.to_string()));
        }
    }

    /// Names in one JSON value (an object, a list, a watch event, a discovery document…).
    fn value(&mut self, v: &Value, inherited_kind: Option<&str>) {
        match v {
            Value::Array(a) => a.iter().for_each(|x| self.value(x, inherited_kind)),
            Value::Object(o) => {
                let kind = o.get("kind").and_then(Value::as_str).or(inherited_kind);
                if let Some(kind) = kind {
                    self.object(kind, v);
                }
                if let Some(ca) = o.get("caBundle").and_then(Value::as_str) {
                    self.ca_bundle(ca);
                }
                if let Some(gv) = o.get("groupVersion").and_then(Value::as_str)
                    && let Some((g, _)) = gv.split_once('/')
                    && !builtin_group(g)
                {
                    self.add(Category::Group, g);
                    for r in o
                        .get("resources")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                    {
                        self.resource_names(r);
                    }
                }
                if let (Some(k), Some((g, _))) = (
                    o.get("kind").and_then(Value::as_str),
                    o.get("apiVersion")
                        .and_then(Value::as_str)
                        .and_then(|a| a.split_once('/')),
                ) && !builtin_group(g)
                {
                    self.add(Category::Kind, k.strip_suffix("List").unwrap_or(k));
                }
                let item_kind = kind
                    .and_then(|k| k.strip_suffix("List"))
                    .filter(|k| !k.is_empty());
                for (k, x) in o {
                    if k == "items" {
                        self.value(x, item_kind);
                    } else if x.is_object() || x.is_array() {
                        self.value(x, None);
                    }
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, kind: &str, v: &Value) {
        let s = |p: &str| v.pointer(p).and_then(Value::as_str);
        let name = s("/metadata/name");
        let ns = s("/metadata/namespace");
        if let Some(ns) = ns {
            self.add(Category::Namespace, ns);
        }
        let system = ns.is_some_and(|ns| FIXED_NAMESPACES.contains(&ns));
        let bootstrap = v
            .pointer("/metadata/annotations/apf.kubernetes.io~1autoupdate-spec")
            .is_some();
        match kind {
            "Namespace" => {
                if let Some(n) = name {
                    self.add(Category::Namespace, n);
                }
            }
            "Service" | "Endpoints" => self.service(ns, name),
            "EndpointSlice" => {
                self.service(ns, s("/metadata/labels/kubernetes.io~1service-name"));
                if let (false, Some(n)) = (system, name) {
                    self.add(Category::Workload, n);
                }
            }
            "APIService" if v.pointer("/spec/service").is_some_and(Value::is_object) => {
                self.service(s("/spec/service/namespace"), s("/spec/service/name"));
                if let Some(g) = s("/spec/group") {
                    self.add(Category::Group, g);
                }
            }
            "CustomResourceDefinition" => {
                if let Some(g) = s("/spec/group").filter(|g| !builtin_group(g)) {
                    self.add(Category::Group, g);
                    if let Some(names) = v.pointer("/spec/names") {
                        self.resource_names(names);
                    }
                }
                self.service(
                    s("/spec/conversion/webhook/clientConfig/service/namespace"),
                    s("/spec/conversion/webhook/clientConfig/service/name"),
                );
            }
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                if let Some(n) = name {
                    self.add(Category::WebhookConfiguration, n);
                }
                for w in v["webhooks"].as_array().into_iter().flatten() {
                    if let Some(n) = w["name"].as_str() {
                        self.add(Category::Webhook, n);
                    }
                    self.service(
                        w.pointer("/clientConfig/service/namespace")
                            .and_then(Value::as_str),
                        w.pointer("/clientConfig/service/name")
                            .and_then(Value::as_str),
                    );
                }
            }
            "FlowSchema" => {
                if let (false, Some(n)) = (bootstrap, name) {
                    self.add(Category::FlowSchema, n);
                    if let Some(pl) = s("/spec/priorityLevelConfiguration/name") {
                        self.add(Category::PriorityLevel, pl);
                    }
                }
                for r in v
                    .pointer("/spec/rules")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    for sub in r["subjects"].as_array().into_iter().flatten() {
                        if let Some(ns) = sub
                            .pointer("/serviceAccount/namespace")
                            .and_then(Value::as_str)
                        {
                            self.add(Category::Namespace, ns);
                        }
                        for user in ["/user/name", "/serviceAccount/name"] {
                            if let Some(u) = sub.pointer(user).and_then(Value::as_str) {
                                self.add(Category::User, u);
                            }
                        }
                    }
                    for rr in r["resourceRules"].as_array().into_iter().flatten() {
                        for ns in rr["namespaces"].as_array().into_iter().flatten() {
                            if let Some(ns) = ns.as_str().filter(|n| *n != "*") {
                                self.add(Category::Namespace, ns);
                            }
                        }
                    }
                }
            }
            "PriorityLevelConfiguration" => {
                if let (false, Some(n)) = (bootstrap, name) {
                    self.add(Category::PriorityLevel, n);
                }
            }
            "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Pod" => {
                if let (false, Some(n)) = (system, name) {
                    self.add(Category::Workload, n);
                }
            }
            "Status" => {
                if let Some(g) = s("/details/group") {
                    self.add(Category::Group, g);
                }
            }
            "APIGroup" => {
                if let Some(n) = s("/name") {
                    self.add(Category::Group, n);
                }
            }
            _ => {}
        }
    }

    /// The resource names of a discovery entry or a CRD's `spec.names` (a user-chosen group's).
    fn resource_names(&mut self, r: &Value) {
        for key in ["name", "plural", "singularName", "singular"] {
            if let Some(n) = r[key].as_str() {
                self.add(Category::Resource, n.split('/').next().unwrap_or(n));
            }
        }
        for key in ["kind", "listKind"] {
            if let Some(k) = r[key].as_str() {
                self.add(Category::Kind, k.strip_suffix("List").unwrap_or(k));
            }
        }
    }

    fn ca_bundle(&mut self, b64: &str) {
        use base64::Engine as _;
        if let Ok(pem) = base64::engine::general_purpose::STANDARD.decode(b64.trim()) {
            self.certs(&pem);
        }
    }

    fn certs(&mut self, pem: &[u8]) {
        for (info, _) in extpath::pki::decode_pem(pem).unwrap_or_default() {
            self.cert_names.extend(info.common_name);
            self.cert_names.extend(info.dns_names);
        }
    }

    /// Names quoted in text: request paths, `in the namespace "x"`, `webhook "x"`, and every
    /// certificate of a PEM block.
    fn text(&mut self, text: &str) {
        for (anchor, cat) in [
            ("/namespaces/", Category::Namespace),
            ("/apis/", Category::Group),
            ("namespace \"", Category::Namespace),
            ("namespace \\\"", Category::Namespace),
            ("webhook \"", Category::Webhook),
            ("webhook \\\"", Category::Webhook),
            ("API group \"", Category::Group),
            ("API group \\\"", Category::Group),
            ("User \"", Category::User),
            ("User \\\"", Category::User),
        ] {
            for (at, _) in text.match_indices(anchor) {
                let rest = &text.as_bytes()[at + anchor.len()..];
                let in_name =
                    |b: u8| is_dns(b) || (cat == Category::User && b != b'"' && b != b'\\');
                let end = rest.iter().position(|b| !in_name(*b)).unwrap_or(rest.len());
                let name = &text[at + anchor.len()..at + anchor.len() + end];
                let name = name.trim_end_matches('.');
                if cat == Category::Group && !name.contains('.') {
                    continue;
                }
                self.add(cat, name);
                if cat == Category::Group && !builtin_group(name) {
                    self.path_resource(&text[at + anchor.len() + end..]);
                }
            }
        }
        for (start, end) in pem_blocks(text.as_bytes()) {
            let block = text[start..end].replace("\\n", "\n");
            self.certs(block.as_bytes());
        }
    }

    /// Every JSON document of a file: each run of documents that starts on a line of its own (the
    /// whole file, a body after curl headers or kubectl stderr lines, watch events one a line).
    fn json_docs(&mut self, text: &str) {
        let mut offset = 0;
        while offset < text.len() {
            let line_end = text[offset..]
                .find('\n')
                .map_or(text.len(), |e| offset + e + 1);
            let line = &text[offset..line_end];
            let t = line.trim_start();
            if t.starts_with('{') || t.starts_with('[') {
                let start = offset + (line.len() - t.len());
                let mut stream =
                    serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
                let mut parsed = 0;
                while let Some(Ok(v)) = stream.next() {
                    self.value(&v, None);
                    parsed = stream.byte_offset();
                }
                if parsed > 0 {
                    let done = start + parsed;
                    offset = text[done..].find('\n').map_or(text.len(), |e| done + e + 1);
                    continue;
                }
            }
            offset = line_end;
        }
    }

    fn yaml_docs(&mut self, text: &str) {
        let t = text.trim_start();
        if !(t.starts_with("apiVersion:") || t.starts_with("kind:") || t.starts_with("---")) {
            return;
        }
        for doc in t.split("\n---") {
            if let Ok(v) = serde_saphyr::from_str::<Value>(doc.trim_start_matches("---")) {
                self.value(&v, None);
            }
        }
    }
}

impl Found {
    /// Label values of a Prometheus dump that name objects: webhooks of the admission webhook
    /// families, APIServices of the aggregator families, CRDs of the conversion families, APF flow
    /// schemas and priority levels, groups with their resources, namespaces. Histogram buckets are
    /// skipped: every series of one also has its `_count` line.
    fn metric_labels(&mut self, text: &str) {
        for line in text.lines() {
            if line.starts_with('#') {
                continue;
            }
            let Some((metric, rest)) = line.split_once('{') else {
                continue;
            };
            if metric.ends_with("_bucket") {
                continue;
            }
            let labels = rest.rsplit_once('}').map_or(rest, |(l, _)| l);
            let mut group = None;
            let mut resource = None;
            for pair in labels.split("\",") {
                let Some((k, v)) = pair.split_once("=\"") else {
                    continue;
                };
                let k = k.trim_start_matches(',');
                let v = v.trim_end_matches('"');
                match k {
                    "name" if metric.starts_with("apiserver_admission_webhook_") => {
                        self.add(Category::Webhook, v);
                    }
                    "name" if metric.starts_with("aggregator_") => {
                        if let Some((_, g)) = v.split_once('.') {
                            self.add(Category::Group, g);
                        }
                    }
                    "crd_name" => {
                        if let Some((plural, g)) = v.split_once('.')
                            && !builtin_group(g)
                        {
                            self.add(Category::Group, g);
                            self.add(Category::Resource, plural);
                        }
                    }
                    "flow_schema" => self.add(Category::FlowSchema, v),
                    "priority_level" => self.add(Category::PriorityLevel, v),
                    "namespace" => self.add(Category::Namespace, v),
                    "group" => group = Some(v),
                    "resource" => resource = Some(v),
                    _ => {}
                }
            }
            if let Some(g) = group.filter(|g| !builtin_group(g)) {
                self.add(Category::Group, g);
                if let Some(r) = resource {
                    self.add(Category::Resource, r);
                }
            }
        }
    }

    /// The resource of a request path after `/apis/<group>`: `/<version>[/namespaces/<ns>]/<resource>`.
    fn path_resource(&mut self, rest: &str) {
        let mut segs = rest
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '/'))
            .next()
            .unwrap_or("")
            .split('/')
            .skip(2);
        let resource = match segs.next() {
            Some("namespaces") => segs.nth(1),
            other => other,
        };
        if let Some(r) = resource.filter(|r| !r.is_empty()) {
            self.add(Category::Resource, r);
        }
    }
}

/// Byte ranges of PEM blocks (`-----BEGIN …` to the end of its `-----END …-----`).
fn pem_blocks(src: &[u8]) -> Vec<(usize, usize)> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const END: &[u8] = b"-----END ";
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(b) = find(&src[i..], BEGIN) {
        let start = i + b;
        let Some(e) = find(&src[start..], END) else {
            out.push((start, src.len()));
            break;
        };
        let after = start + e + END.len();
        let close = find(&src[after..], b"-----").map_or(src.len(), |c| after + c + 5);
        out.push((start, close));
        i = close;
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// Whether `at` lies in a base64 blob: a run of 64 or more base64 characters with upper and lower
/// case letters and digits (a caBundle; request paths are lower case). Checked only where a name
/// matched, so the scan stays one pass.
fn in_base64_blob(src: &[u8], at: usize) -> bool {
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=';
    let start = src[..at]
        .iter()
        .rposition(|b| !b64(*b))
        .map_or(0, |p| p + 1);
    let end = src[at..]
        .iter()
        .position(|b| !b64(*b))
        .map_or(src.len(), |p| at + p);
    let run = &src[start..end];
    run.len() >= 64
        && run.iter().any(u8::is_ascii_uppercase)
        && run.iter().any(u8::is_ascii_lowercase)
        && run.iter().any(u8::is_ascii_digit)
}

impl Renamer {
    /// Find the names of a case folder and plan their new names.
    pub fn plan(dir: &Path) -> std::io::Result<Renamer> {
        let mut found = Found::default();
        let mut texts = Vec::new();
        for path in files_under(dir)? {
            let Ok(text) = String::from_utf8(std::fs::read(&path)?) else {
                continue;
            };
            if is_metrics(&text) {
                // A /metrics dump names objects only in label values.
                found.metric_labels(&text);
                continue;
            }
            found.text(&text);
            found.json_docs(&text);
            found.yaml_docs(&text);
            texts.push(text);
        }
        // `<plural>.<group>` (kubectl's `get flunders.<group>`, `flunders.<group> is forbidden`)
        // names a resource of a group found above.
        let groups = found
            .names
            .get(&Category::Group)
            .cloned()
            .unwrap_or_default();
        for text in &texts {
            for g in &groups {
                for at in word_positions(text.as_bytes(), g.as_bytes()) {
                    let before = &text[..at];
                    let Some(label) = before.strip_suffix('.') else {
                        continue;
                    };
                    let start = label
                        .rfind(|c: char| {
                            !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                        })
                        .map_or(0, |i| i + 1);
                    let label = &label[start..];
                    if !label.is_empty()
                        && !is_version(label)
                        && label.as_bytes().first() != Some(&b'.')
                    {
                        found.add(Category::Resource, label);
                    }
                }
            }
        }
        Ok(Renamer::from_found(found))
    }

    fn from_found(found: Found) -> Renamer {
        let mut kept = BTreeSet::new();
        let mut taken: BTreeSet<String> = BTreeSet::new();
        let mut entries = Vec::new();
        let in_cert = |name: &str| {
            found.cert_names.iter().any(|c| {
                word_positions(c.as_bytes(), name.as_bytes())
                    .next()
                    .is_some()
            })
        };
        for (cat, names) in &found.names {
            let mut n = 0;
            // Reverse order: two names of a category swap places in sorted order, so a verdict
            // that hangs on which name sorts first shows.
            for name in names.iter().rev() {
                if !taken.insert(name.clone()) {
                    continue; // the same string in an earlier category: renamed once
                }
                if in_cert(name) {
                    kept.insert(name.clone());
                    continue;
                }
                n += 1;
                let qualified = FIXED_WORDS.contains(&name.as_str()).then(|| {
                    found
                        .services
                        .iter()
                        .filter(|(_, s)| s == name)
                        .map(|(ns, _)| ns.clone())
                        .collect()
                });
                if *cat == Category::Kind {
                    entries.push(Entry {
                        from: format!("{name}List"),
                        to: format!("{}List", cat.fresh(n)),
                        qualified: None,
                    });
                }
                entries.push(Entry {
                    from: name.clone(),
                    to: cat.fresh(n),
                    qualified,
                });
            }
        }
        entries.sort_by(|a, b| b.from.len().cmp(&a.from.len()).then(a.from.cmp(&b.from)));
        let mut by_first = vec![Vec::new(); 256];
        for (i, e) in entries.iter().enumerate() {
            by_first[usize::from(e.from.as_bytes()[0])].push(i);
        }
        let mut first = [false; 256];
        for (b, f) in first.iter_mut().enumerate() {
            *f = !by_first[b].is_empty();
        }
        Renamer {
            entries,
            by_first,
            first,
            kept,
            files: BTreeMap::new(),
        }
    }

    /// The rename map, old → new, longest old name first.
    pub fn map(&self) -> Vec<(&str, &str)> {
        self.entries
            .iter()
            .map(|e| (e.from.as_str(), e.to.as_str()))
            .collect()
    }

    /// User-chosen names left alone because a certificate carries them.
    pub fn kept(&self) -> &BTreeSet<String> {
        &self.kept
    }

    /// A name as the renamed case spells it: the whole name when it is one of the map, else every
    /// name in it.
    pub fn rename_name(&self, name: &str) -> String {
        match self.entries.iter().find(|e| e.from == name) {
            Some(e) => e.to.clone(),
            None => String::from_utf8_lossy(&self.rename_bytes(name.as_bytes())).into_owned(),
        }
    }

    /// A verdict's subject name as the renamed case gives it: names renamed, and the file of a
    /// `request in <file>` subject renamed as its file was.
    pub fn rename_subject(&self, name: &str) -> String {
        if let Some(rest) = name.strip_prefix("request in ") {
            let (file, nth) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(new) = self.files.get(file) {
                return format!("request in {new} {nth}").trim_end().to_string();
            }
        }
        self.rename_name(name)
    }

    fn qualified_here(&self, e: &Entry, src: &[u8], at: usize, end: usize) -> bool {
        let Some(namespaces) = &e.qualified else {
            return true;
        };
        let before = &src[..at];
        let after = &src[end..];
        let quoted =
            before.ends_with(b"\"") && (after.starts_with(b"\"") || after.starts_with(b"\\\""));
        // An item of a list such as klog's `validServingFor=[127.0.0.1,api,api.ns]`.
        let listed = matches!(before.last(), Some(b'[' | b','))
            && matches!(after.first(), Some(b']' | b','));
        let kind = [&b"service/"[..], b"services/", b"services \""]
            .iter()
            .any(|k| {
                before.ends_with(k)
                    && (before.len() == k.len() || !is_word(before[before.len() - k.len() - 1]))
            });
        let by_ns = namespaces.iter().any(|ns| {
            let ns = ns.as_bytes();
            let prefixed = before.ends_with(b"/")
                && before[..before.len() - 1].ends_with(ns)
                && before
                    .len()
                    .checked_sub(ns.len() + 2)
                    .is_none_or(|i| !is_word(before[i]) && before[i] != b'.');
            let suffixed = after.first() == Some(&b'.')
                && after[1..].starts_with(ns)
                && after.get(1 + ns.len()).is_none_or(|b| !is_word(*b));
            prefixed || suffixed
        });
        quoted || listed || kind || by_ns
    }

    /// Replace every name in `src`, word-bounded, longest first; PEM and base64 are left as they are.
    pub fn rename_bytes(&self, src: &[u8]) -> Vec<u8> {
        let pem = pem_blocks(src);
        let mut pem = pem.iter().peekable();
        let mut out = Vec::with_capacity(src.len() + 256);
        let mut copied = 0;
        let mut i = 0;
        let n = src.len();
        while i < n {
            // The tight loop: most bytes cannot start a name.
            while i < n && !self.first[usize::from(src[i])] {
                i += 1;
            }
            if i >= n {
                break;
            }
            if i > 0 && is_word(src[i - 1]) {
                i += 1;
                continue;
            }
            while pem.peek().is_some_and(|&&(_, e)| e <= i) {
                pem.next();
            }
            if let Some(&&(s, e)) = pem.peek()
                && s <= i
            {
                i = e;
                continue;
            }
            let hit = self.by_first[usize::from(src[i])]
                .iter()
                .map(|&k| &self.entries[k])
                .find(|e| {
                    let end = i + e.from.len();
                    src[i..].starts_with(e.from.as_bytes())
                        && src.get(end).is_none_or(|b| !is_word(*b))
                        && self.qualified_here(e, src, i, end)
                });
            match hit {
                Some(e) if !in_base64_blob(src, i) => {
                    out.extend_from_slice(&src[copied..i]);
                    out.extend_from_slice(e.to.as_bytes());
                    i += e.from.len();
                    copied = i;
                }
                _ => i += 1,
            }
        }
        out.extend_from_slice(&src[copied..]);
        out
    }

    /// Write the case folder `src` to `dst` (created) with every name, file and directory
    /// renamed. Directory shape is kept; files get `f<NN>` names in their original order, files of
    /// one curl stem (`x-body.txt`, `x-headers.txt`, `x.stderr`) keep one stem.
    pub fn copy_case(&mut self, src: &Path, dst: &Path) -> std::io::Result<()> {
        let mut stems: BTreeMap<(PathBuf, String), usize> = BTreeMap::new();
        let mut dirs: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
        dirs.insert(src.to_path_buf(), dst.to_path_buf());
        std::fs::create_dir_all(dst)?;
        for path in files_under(src)? {
            let parent = path.parent().unwrap_or(src).to_path_buf();
            let new_parent = new_dir(&mut dirs, src, &parent)?;
            let file_stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let (stem, suffix) = curl_stem(&file_stem);
            let next = stems.len() + 1;
            let n = *stems.entry((parent.clone(), stem)).or_insert(next);
            let ext = path
                .extension()
                .map(|e| format!(".{}", e.to_string_lossy()))
                .unwrap_or_default();
            let name = format!("f{n:02}{suffix}{ext}");
            let bytes = std::fs::read(&path)?;
            std::fs::write(new_parent.join(&name), self.rename_bytes(&bytes))?;
            if let Some(old) = path.file_name() {
                self.files.insert(old.to_string_lossy().into_owned(), name);
            }
        }
        Ok(())
    }
}

/// The renamed directory of `dir` (created), `d<NN>` for each level under the case.
fn new_dir(
    dirs: &mut BTreeMap<PathBuf, PathBuf>,
    root: &Path,
    dir: &Path,
) -> std::io::Result<PathBuf> {
    if let Some(d) = dirs.get(dir) {
        return Ok(d.clone());
    }
    let parent = dir.parent().unwrap_or(root).to_path_buf();
    let new_parent = new_dir(dirs, root, &parent)?;
    let new = new_parent.join(format!("d{:02}", dirs.len()));
    std::fs::create_dir_all(&new)?;
    dirs.insert(dir.to_path_buf(), new.clone());
    Ok(new)
}

/// The importer's curl stem of a file stem, and the suffix after it (`x-body` → `x`, `-body`).
fn curl_stem(file_stem: &str) -> (String, String) {
    for suffix in ["body", "headers", "header", "status", "hdr", "out", "err"] {
        for sep in ['-', '_', '.'] {
            let tail = format!("{sep}{suffix}");
            if let Some(stem) = file_stem.strip_suffix(&tail) {
                return (stem.to_string(), tail);
            }
        }
    }
    (file_stem.to_string(), String::new())
}

/// Every file under `dir`, sorted by path (the importer's order).
fn files_under(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        if e.file_type()?.is_dir() {
            out.extend(files_under(&path)?);
        } else {
            out.push(path);
        }
    }
    Ok(out)
}

/// Word-bounded positions of `needle` in `hay` (dots are boundaries).
fn word_positions<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    memchr::memmem::find_iter(hay, needle).filter(move |&at| {
        (at == 0 || !is_word(hay[at - 1]))
            && hay.get(at + needle.len()).is_none_or(|b| !is_word(*b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn renamer(names: &[(Category, &str)], services: &[(&str, &str)], certs: &[&str]) -> Renamer {
        let mut f = Found::default();
        for (c, n) in names {
            f.add(*c, n);
        }
        for (ns, s) in services {
            f.service(Some(ns), Some(s));
        }
        f.cert_names = certs.iter().map(|s| s.to_string()).collect();
        Renamer::from_found(f)
    }

    fn r(rn: &Renamer, s: &str) -> String {
        String::from_utf8(rn.rename_bytes(s.as_bytes())).unwrap()
    }

    #[test]
    fn longest_name_first_and_word_bounded() {
        let rn = renamer(
            &[(Category::Group, "wardle.example.com")],
            &[("wardle-system", "wardle-api")],
            &[],
        );
        assert_eq!(
            r(
                &rn,
                "v1alpha1.wardle.example.com wardle-system/wardle-api wardle wardle-ca x-wardle-system"
            ),
            "v1alpha1.backup-c1.storage.example.org storage-a1/etcd-proxy-b1 wardle wardle-ca x-wardle-system"
        );
        assert_eq!(
            r(&rn, "flunders.wardle.example.com/v1"),
            "flunders.backup-c1.storage.example.org/v1"
        );
    }

    #[test]
    fn fixed_words_are_renamed_only_where_they_name_the_object() {
        let rn = renamer(&[], &[("wardle-system", "api")], &[]);
        assert_eq!(
            r(
                &rn,
                r#"GET /api/v1/x "name": "api" \"name\":\"api\" wardle-system/api api.wardle-system.svc service/api [1.2.3.4,api,x]"#
            ),
            r#"GET /api/v1/x "name": "etcd-proxy-b1" \"name\":\"etcd-proxy-b1\" storage-a1/etcd-proxy-b1 etcd-proxy-b1.storage-a1.svc service/etcd-proxy-b1 [1.2.3.4,etcd-proxy-b1,x]"#
        );
    }

    #[test]
    fn names_a_certificate_carries_are_kept() {
        let rn = renamer(
            &[(Category::Group, "wardle.example.com")],
            &[("wardle-system", "api")],
            &["api.wardle-system.svc", "wardle-ca"],
        );
        assert_eq!(
            rn.kept().iter().collect::<Vec<_>>(),
            ["api", "wardle-system"]
        );
        assert_eq!(
            r(&rn, "wardle-system/api v1alpha1.wardle.example.com"),
            "wardle-system/api v1alpha1.backup-c1.storage.example.org"
        );
    }

    #[test]
    fn builtin_names_are_never_renamed() {
        let rn = renamer(
            &[
                (Category::Namespace, "kube-system"),
                (Category::Group, "apiregistration.k8s.io"),
                (Category::Group, "apps"),
                (Category::FlowSchema, "catch-all"),
                (Category::PriorityLevel, "tiny"),
            ],
            &[("default", "kubernetes")],
            &[],
        );
        assert_eq!(rn.map(), [("tiny", "storage-g1")]);
    }

    #[test]
    fn pem_and_base64_are_copied_as_they_are() {
        let rn = renamer(&[(Category::PriorityLevel, "tiny")], &[], &[]);
        let blob = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0NTY3ODk+tiny/";
        let pem = "-----BEGIN CERTIFICATE-----\nabc/tiny/def\n-----END CERTIFICATE-----";
        assert_eq!(
            r(&rn, &format!("tiny {blob} {pem} tiny")),
            format!("storage-g1 {blob} {pem} storage-g1")
        );
    }

    #[test]
    fn plan_reads_names_from_yaml_objects_client_output_and_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let w = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        w(
            "a.yaml",
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n\
             metadata: {name: guard}\nwebhooks:\n- name: check.guard.example.com\n  \
             clientConfig: {service: {namespace: hooks, name: guard-svc}}\n",
        );
        w(
            "b.stderr",
            "Error from server (Forbidden): widgets.acme.example.net is forbidden: User \"carol\" \
             cannot list resource \"widgets\" in API group \"acme.example.net\" in the namespace \"shop\"\nexit=1\n",
        );
        w(
            "c.txt",
            "# TYPE apiserver_flowcontrol_rejected_requests_total counter\n\
             apiserver_flowcontrol_rejected_requests_total{flow_schema=\"batch-jobs\",priority_level=\"slow-lane\",reason=\"queue-full\"} 3\n",
        );
        let rn = Renamer::plan(dir.path()).unwrap();
        let mut from: Vec<&str> = rn.map().iter().map(|(f, _)| *f).collect();
        from.sort_unstable();
        assert_eq!(
            from,
            [
                "acme.example.net",
                "batch-jobs",
                "carol",
                "check.guard.example.com",
                "guard",
                "guard-svc",
                "hooks",
                "shop",
                "slow-lane",
                "widgets"
            ]
        );
        assert_eq!(
            rn.rename_name("widgets.acme.example.net"),
            "etcdbackup1s.backup-c1.storage.example.org"
        );
    }

    #[test]
    fn curl_parts_keep_one_stem() {
        assert_eq!(
            curl_stem("raw-discovery-curl-body"),
            ("raw-discovery-curl".into(), "-body".into())
        );
        assert_eq!(curl_stem("hdr-1"), ("hdr-1".into(), String::new()));
    }
}
