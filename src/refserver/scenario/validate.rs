//! Phase two of scenario loading: what the types cannot check.
//!
//! References (a CA named in a certificate or `${ca:NAME}`, a backend named in `network`), unique
//! names, supported object kinds, expected classes. The typed model has no positions, so the line
//! of a problem is found by searching the text for the offending value; that is precise enough for
//! a human and never wrong about the file.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{API_VERSION, BackendKind, CLASSES, KIND, SUBJECT_KINDS, Scenario};
use crate::refserver::registry;

/// A scenario that could not be loaded: one line, `file:line: message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}{}: {message}", if *.line > 0 { format!(":{}", .line) } else { String::new() })]
pub struct ScenarioError {
    /// File.
    pub path: String,
    /// 1-based line (0 when unknown).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The first line that contains `needle` (1-based), or 0.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i + 1)
        .unwrap_or(0)
}

/// Every `${ca:NAME}` reference inside a JSON value.
pub(crate) fn ca_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(i) = rest.find("${ca:") {
                let after = &rest[i + 5..];
                if let Some(end) = after.find('}') {
                    out.push(after[..end].to_string());
                    rest = &after[end..];
                } else {
                    break;
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| ca_refs(x, out)),
        Value::Object(m) => m.values().for_each(|x| ca_refs(x, out)),
        _ => {}
    }
}

pub(super) fn validate(s: &Scenario, text: &str, path: &str) -> Result<(), ScenarioError> {
    let err = |needle: &str, message: String| ScenarioError {
        path: path.into(),
        line: line_of(text, needle),
        message,
    };
    if s.api_version != API_VERSION || s.kind != KIND {
        return Err(err(
            "apiVersion",
            format!(
                "expected apiVersion {API_VERSION:?}, kind {KIND:?}, found {:?}, {:?}",
                s.api_version, s.kind
            ),
        ));
    }
    if let Some(v) = &s.server.version
        && let Some(why) = crate::refserver::profile::unsupported(v)
    {
        return Err(err(v, why));
    }
    if let Some(now) = &s.now
        && now.parse::<jiff::Timestamp>().is_err()
    {
        return Err(err("now:", format!("now: {now:?} is not an RFC 3339 time")));
    }
    // `selfSigned` is the issuer word for a certificate signed by its own key; a CA of that name
    // would make `issuer: selfSigned` mean two things.
    let mut cas: BTreeSet<&str> = BTreeSet::new();
    for ca in &s.cas {
        if !cas.insert(ca.as_str()) || ca == "selfSigned" {
            return Err(err(
                ca,
                format!("CA {ca:?} is defined twice or uses a reserved name"),
            ));
        }
    }
    let mut users = BTreeSet::new();
    for u in &s.users {
        if !users.insert(u.name.as_str()) || u.name == "admin" {
            return Err(err(
                &format!("name: {}", u.name),
                format!("user {:?} is defined twice (admin is built in)", u.name),
            ));
        }
    }
    let mut backends = BTreeSet::new();
    for b in &s.backends {
        let at = format!("name: {}", b.name);
        if !backends.insert(b.name.as_str()) {
            return Err(err(&at, format!("backend {:?} is defined twice", b.name)));
        }
        if b.certificate.issuer != "selfSigned" && !cas.contains(b.certificate.issuer.as_str()) {
            return Err(err(
                &format!("issuer: {}", b.certificate.issuer),
                format!(
                    "backend {:?}: issuer {:?} is not a CA in `cas` (or selfSigned)",
                    b.name, b.certificate.issuer
                ),
            ));
        }
        // Go has refused to match a host against a certificate's Common Name since 1.15 ("x509:
        // certificate relies on legacy Common Name field", REFERENCE §2.3), and so does
        // `pki::verify`: a serving certificate without SANs could never be trusted, whatever the
        // scenario meant to test.
        if b.certificate.names.is_empty() {
            return Err(err(
                &at,
                format!("backend {:?}: certificate has no names", b.name),
            ));
        }
        if let Some(ca) = &b.behaviour.trusted_front_proxy_ca
            && !cas.contains(ca.as_str())
        {
            return Err(err(
                ca,
                format!(
                    "backend {:?}: trustedFrontProxyCa {ca:?} is not a CA in `cas`",
                    b.name
                ),
            ));
        }
        // Only an extension server is reached by a watch (through the aggregator's proxy); a
        // webhook answers one POST per call, so the setting would silently do nothing there.
        if b.kind != BackendKind::Extension && b.behaviour.down_after_first_watch_ms.is_some() {
            return Err(err(
                &at,
                format!(
                    "backend {:?}: downAfterFirstWatchMs is for extension servers (only they serve watches)",
                    b.name
                ),
            ));
        }
        match (b.kind, &b.extension) {
            (BackendKind::Extension, None) => {
                return Err(err(
                    &at,
                    format!("backend {:?}: an extension needs `extension:`", b.name),
                ));
            }
            // An extension serves `/apis/<group>/<version>`; the group-less core API (`/api/v1`)
            // is always served locally (its APIService is `Local`, REFERENCE §2.1).
            (BackendKind::Extension, Some(e)) if !e.group_version.contains('/') => {
                return Err(err(
                    &e.group_version,
                    format!(
                        "backend {:?}: groupVersion {:?} is not group/version",
                        b.name, e.group_version
                    ),
                ));
            }
            (BackendKind::AdmissionWebhook | BackendKind::ConversionWebhook, Some(_)) => {
                return Err(err(
                    &at,
                    format!("backend {:?}: `extension:` is only for extensions", b.name),
                ));
            }
            _ => {}
        }
    }
    // The `network:` map is the only way an address reaches a spawned backend (network.rs); a
    // name that is not a backend would turn into "connection refused" at run time and read as
    // the scenario's fault being tested rather than a typo.
    for (addr, backend) in &s.network {
        if !backends.contains(backend.as_str()) {
            return Err(err(
                addr,
                format!("network: {addr} maps to {backend:?}, which is not a backend"),
            ));
        }
    }
    let crd_kinds: Vec<(String, String)> = s
        .objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .flat_map(|crd| {
            registry::crd_resources(crd)
                .into_iter()
                .map(|d| (d.api_version(), d.kind))
        })
        .collect();
    let builtin_kinds: Vec<(String, String)> = registry::builtins()
        .into_iter()
        .map(|d| (d.api_version(), d.kind))
        .collect();
    for (i, o) in s.objects.iter().enumerate() {
        let api_version = o["apiVersion"].as_str().unwrap_or_default();
        let kind = o["kind"].as_str().unwrap_or_default();
        let name = o
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let needle = if name.is_empty() {
            kind.to_string()
        } else {
            format!("name: {name}")
        };
        if api_version.is_empty() || kind.is_empty() || name.is_empty() {
            return Err(err(
                &needle,
                format!("objects[{i}]: needs apiVersion, kind and metadata.name"),
            ));
        }
        // The store would hold an object of any kind, but discovery and the list handlers serve
        // only the registry's kinds (built-ins and the scenario's CRDs): an unknown kind would be
        // loaded and then never seen by a client.
        let known = builtin_kinds
            .iter()
            .any(|(a, k)| a == api_version && k == kind)
            || crd_kinds.iter().any(|(a, k)| a == api_version && k == kind);
        if !known {
            return Err(err(
                &format!("kind: {kind}"),
                format!("objects[{i}]: {api_version} {kind} is not a kind this server serves"),
            ));
        }
        let mut refs = Vec::new();
        ca_refs(o, &mut refs);
        if let Some(missing) = refs.iter().find(|r| !cas.contains(r.as_str())) {
            return Err(err(
                &format!("${{ca:{missing}}}"),
                format!("objects[{i}]: ${{ca:{missing}}} names no CA in `cas`"),
            ));
        }
    }
    for (i, t) in s.traffic.iter().enumerate() {
        let at = format!("path: {}", t.path);
        // Traffic authenticates like a real client: with neither a token nor a client
        // certificate its requests would arrive as system:anonymous (or get a 401 when anonymous
        // auth is off), not as the user the scenario names in its RBAC and flow schemas.
        let known = t.user == "admin"
            || s.users
                .iter()
                .any(|u| u.name == t.user && (u.token.is_some() || u.client_certificate));
        if !known {
            return Err(err(
                &format!("user: {}", t.user),
                format!(
                    "traffic[{i}]: user {:?} is not admin or a user with a token or client certificate",
                    t.user
                ),
            ));
        }
        if !["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&t.method.as_str()) {
            return Err(err(
                &t.method,
                format!(
                    "traffic[{i}]: method {:?} is not GET, POST, PUT, PATCH or DELETE",
                    t.method
                ),
            ));
        }
        if !t.path.starts_with('/') || t.count == 0 || t.concurrency == 0 {
            return Err(err(
                &at,
                format!(
                    "traffic[{i}]: needs a path starting with / and count, concurrency of at least 1"
                ),
            ));
        }
    }
    for (subject, class) in &s.expect.subjects {
        if !CLASSES.contains(&class.as_str()) {
            return Err(err(
                subject,
                format!(
                    "expect: {class:?} is not a class (one of {})",
                    CLASSES.join(", ")
                ),
            ));
        }
        let kind = subject.split_once('/').map(|(k, _)| k);
        if !kind.is_some_and(|k| SUBJECT_KINDS.contains(&k)) {
            return Err(err(
                subject,
                format!(
                    "expect: subject {subject:?} is not Kind/name with Kind one of {}",
                    SUBJECT_KINDS.join(", ")
                ),
            ));
        }
    }
    for class in &s.expect.forbid {
        if !CLASSES.contains(&class.as_str()) {
            return Err(err(
                "forbid:",
                format!(
                    "expect.forbid: {class:?} is not a class (one of {})",
                    CLASSES.join(", ")
                ),
            ));
        }
    }
    Ok(())
}
