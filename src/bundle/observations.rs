//! Other evidence: health checks, APF state, log findings, events, and gaps.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ObjectRef;

/// Which health endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HealthEndpoint {
    /// kube-apiserver `/readyz?verbose`.
    ApiserverReadyz,
    /// kube-apiserver `/livez?verbose`.
    ApiserverLivez,
    /// kube-apiserver `/healthz?verbose`.
    ApiserverHealthz,
    /// etcd `/health` or `etcdctl endpoint health`.
    EtcdHealth,
}

/// One `[+]name ok` / `[-]name failed: reason` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckItem {
    /// Check name, e.g. `etcd`, `poststarthook/start-apiextensions-controllers`.
    pub name: String,
    /// `[+]` (true) or `[-]` (false).
    pub ok: bool,
    /// Text after `failed:` (often `reason withheld`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The result of one health endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthCheck {
    /// Which endpoint.
    pub endpoint: HealthEndpoint,
    /// Overall result (`readyz check passed`, etcd `health: true`).
    pub ok: bool,
    /// Individual checks (verbose output).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<HealthCheckItem>,
    /// Error text when the endpoint could not be read or answered unhealthy (`took too long`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The endpoint URL or `host:port` (etcd), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Where it was read (file or URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// Which server answered: kube-apiserver, an extension API server, etcd — told from the checks
    /// it lists ([`health_owner`]) when read from a file, known when collected. Absent in bundles
    /// written before extpath recorded it, whose API-server listings all came from kube-apiserver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<Component>,
}

impl HealthCheck {
    /// Which server answered (see `component`).
    pub fn owner(&self) -> Component {
        self.component.unwrap_or(match self.endpoint {
            HealthEndpoint::EtcdHealth => Component::Etcd,
            _ => Component::KubeApiserver,
        })
    }
}

/// Checks only kube-apiserver registers: the aggregator's and apiextensions' hooks and the
/// control plane's bootstrap controllers (a generic extension API server has none of them).
/// Matched as substrings of check names, so that releases that rename a hook keep a match.
const KUBE_APISERVER_CHECKS: &[&str] = &[
    "apiservice",
    "kube-aggregator",
    "aggregator-reload-proxy-client-cert",
    "apiextensions",
    "crd-informer-synced",
    "autoregister",
    "bootstrap-controller",
    "rbac/bootstrap-roles",
    "bootstrap-system-priority-classes",
    "kube-apiserver",
    "start-cluster-authentication-info-controller",
    "priority-and-fairness-config-producer",
    "start-system-namespaces-controller",
    "start-legacy-token-tracking-controller",
    "start-service-ip-repair-controllers",
];

/// Checks of etcd's own `/readyz` and `/livez` (etcd 3.6).
const ETCD_CHECKS: &[&str] = &[
    "data_corruption",
    "serializable_read",
    "linearizable_read",
    "non_learner",
];

/// Which server wrote a verbose health listing, from the checks it lists: kube-apiserver when
/// a kube-apiserver-only check is there; etcd when every check is etcd's; an extension API server
/// when it lists the hooks of a generic API server (`poststarthook/…`, `informer-sync`,
/// `shutdown`) but none of kube-apiserver's; otherwise unknown — `[+]ping ok` and `[+]etcd ok`
/// alone are said by every API server, so they never decide.
pub fn health_owner(checks: &[HealthCheckItem]) -> Component {
    let names = || checks.iter().map(|c| c.name.as_str());
    if names().any(|n| KUBE_APISERVER_CHECKS.iter().any(|k| n.contains(k))) {
        return Component::KubeApiserver;
    }
    if !checks.is_empty() && names().all(|n| ETCD_CHECKS.contains(&n)) {
        return Component::Etcd;
    }
    if names().any(|n| n.starts_with("poststarthook/") || n == "shutdown" || n == "informer-sync") {
        return Component::ExtensionApiserver;
    }
    Component::Unknown
}

/// One priority level from `/debug/api_priority_and_fairness/dump_priority_levels` and
/// `dump_queues` (summed over queues).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApfPriorityLevelState {
    /// Priority level name.
    pub priority_level: String,
    /// Exempt levels have no queues.
    #[serde(default)]
    pub exempt: bool,
    /// `ActiveQueues`.
    #[serde(default)]
    pub active_queues: u64,
    /// `IsIdle`.
    #[serde(default)]
    pub idle: bool,
    /// `IsQuiescing`.
    #[serde(default)]
    pub quiescing: bool,
    /// `WaitingRequests`.
    #[serde(default)]
    pub waiting_requests: u64,
    /// `ExecutingRequests`.
    #[serde(default)]
    pub executing_requests: u64,
    /// Number of queues in `dump_queues` for the level, when supplied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<u64>,
    /// Sum of `PendingRequests` over its queues, when supplied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_in_queues: Option<u64>,
}

/// Which process wrote a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    /// kube-apiserver (aggregator and apiextensions included).
    KubeApiserver,
    /// An extension (aggregated) API server.
    ExtensionApiserver,
    /// etcd.
    Etcd,
    /// A webhook server.
    Webhook,
    /// Could not be told from the content.
    Unknown,
}

/// A known error line found in a log (REFERENCE §2), folded by pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogFinding {
    /// Stable pattern id, e.g. `webhook-failing-closed`, `sar-forbidden`, `etcd-no-server-preface`.
    pub pattern: String,
    /// Which process wrote it, judged from the content.
    pub component: Component,
    /// klog severity letter (`I`, `W`, `E`, `F`) or the JSON level, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// First occurrence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<jiff::Timestamp>,
    /// Last occurrence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<jiff::Timestamp>,
    /// Number of lines that matched.
    pub count: u64,
    /// The first matching line's message (without the klog header), truncated to 1 KiB.
    pub message: String,
    /// Values the pattern extracted (e.g. `webhook`, `user`, `resource`, `apiservice`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub fields: std::collections::BTreeMap<String, String>,
    /// The object the line names, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ObjectRef>,
    /// The file it was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// A Kubernetes Event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// The object the event is about.
    pub involved: ObjectRef,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// e.g. `FailedCreate`, `Unhealthy`.
    pub reason: String,
    /// Message.
    pub message: String,
    /// `count` / `series.count`.
    #[serde(default = "one")]
    pub count: u64,
    /// Last time seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<jiff::Timestamp>,
}

fn one() -> u64 {
    1
}

/// Why a piece of evidence is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GapReason {
    /// 403 from the API server (RBAC).
    Forbidden,
    /// 401.
    Unauthorized,
    /// The request timed out.
    Timeout,
    /// The server does not serve this API (404 on discovery) — e.g. no flowcontrol on old clusters.
    NotServed,
    /// The target could not be reached (connection refused, DNS, no route).
    Unreachable,
    /// Not part of the raw files supplied.
    NotSupplied,
    /// A supplied file whose kind could not be recognised; it was skipped.
    Skipped,
    /// A supplied file (or an item of one: a List's object, a ConfigMap's PEM value) that could
    /// not be read as the kind its content shows — malformed, cut short, unreadable, too large,
    /// invalid UTF-8 — inside a directory; whatever else could be read was kept. The detail is
    /// the one line `--strict` would have failed with (`file:line: message`).
    Unreadable,
    /// The source held more objects than `--max-objects` allows one list to bring; the list
    /// stopped there, and the objects beyond it were not read (the detail says how many were).
    Capped,
    /// Anything else (the detail says what).
    Error,
}

/// What could not be collected or was not supplied, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gap {
    /// What is missing: a source id such as `metrics/apiserver`, `objects/apiservices`,
    /// `tls/APIService/v1beta1.metrics.k8s.io`, or `file:<path>` for a skipped file.
    pub source: String,
    /// Why.
    pub reason: GapReason,
    /// Detail (the error text, the file's first line, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Gap {
    /// A gap with detail.
    pub fn new(source: impl Into<String>, reason: GapReason, detail: impl Into<String>) -> Self {
        Gap {
            source: source.into(),
            reason,
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(names: &[&str]) -> Vec<HealthCheckItem> {
        names
            .iter()
            .map(|n| HealthCheckItem {
                name: n.to_string(),
                ok: true,
                reason: None,
            })
            .collect()
    }

    #[test]
    fn a_health_listing_says_whose_it_is_by_its_checks_never_by_default() {
        let kas = items(&[
            "ping",
            "etcd",
            "poststarthook/start-kube-aggregator-informers",
            "poststarthook/apiservice-registration-controller",
        ]);
        assert_eq!(health_owner(&kas), Component::KubeApiserver);
        let extension = items(&[
            "ping",
            "log",
            "etcd",
            "poststarthook/generic-apiserver-start-informers",
            "poststarthook/start-sample-server-informers",
            "shutdown",
        ]);
        assert_eq!(health_owner(&extension), Component::ExtensionApiserver);
        let etcd = items(&["data_corruption", "serializable_read", "linearizable_read"]);
        assert_eq!(health_owner(&etcd), Component::Etcd);
        assert_eq!(health_owner(&items(&["ping", "etcd"])), Component::Unknown);
        assert_eq!(health_owner(&[]), Component::Unknown);
    }
}
