//! Metrics as evidence: one entry per scraped target, with the families the rules read.
//!
//! The trap this shape exists to avoid: a single `/metrics` dump holds counters cumulative since the
//! process started, so a non-zero counter says "this happened at some point", not "this is happening
//! now" (the real captures carry aggregator 503 counters from an earlier incident during a webhook
//! failure). So every source says whether it is windowed (`window` set, and each series has a
//! `window` with deltas and rates) or a single scrape (`window` absent: counters are history only).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::promtext::{
    Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue, SeriesWindow,
};

use super::Window;
use crate::promtext::MetricKind::{Counter as C, Gauge as G, Histogram as H};

/// Which process the metrics came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MetricTarget {
    /// kube-apiserver (including its aggregator and apiextensions server).
    Apiserver,
    /// etcd's own `/metrics`.
    Etcd,
    /// An extension API server's `/metrics`.
    Extension,
}

impl MetricTarget {
    /// `apiserver`, `etcd`, `extension`.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricTarget::Apiserver => "apiserver",
            MetricTarget::Etcd => "etcd",
            MetricTarget::Extension => "extension",
        }
    }
}

/// The metrics of one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsSource {
    /// Which process.
    pub target: MetricTarget,
    /// Where they were read: a URL, a Prometheus query, or a file.
    pub origin: String,
    /// Time of the (last) scrape, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scraped_at: Option<jiff::Timestamp>,
    /// Set when two scrapes exist: series then carry deltas and rates over it. Absent for a single
    /// dump, whose counters are cumulative history only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// The selected families.
    #[serde(default)]
    pub families: Vec<MetricFamily>,
}

impl MetricsSource {
    /// The family of that name, if present. Absence is meaningful: a missing family is not zero.
    pub fn family(&self, name: &str) -> Option<&MetricFamily> {
        self.families.iter().find(|f| f.name == name)
    }

    /// Whether the counters of this source describe a window (true) or the whole process life.
    pub fn is_windowed(&self) -> bool {
        self.window.is_some()
    }
}

/// A family extpath reads: its name, its type as kube-apiserver and etcd expose it (REFERENCE §3,
/// checked against the real captures), the layer whose rules read it, whether etcd itself
/// exposes it (read with the etcd selector from Prometheus), and the names other supported
/// releases give the same family.
pub struct KnownFamily {
    /// Family name: the one rules use (kube-apiserver 1.30's, etcd 3.5's).
    pub name: &'static str,
    /// Type as exposed.
    pub kind: MetricKind,
    /// The layer (rule input) it serves.
    pub layer: &'static str,
    /// Exposed by etcd itself.
    pub etcd: bool,
    /// The same family under the names of other supported releases, each with the releases that
    /// use it. A rule asking for `name` reads the first of `name` and these that a target exposes
    /// (never their sum: during a deprecation both names carry the same observations).
    pub also: &'static [(&'static str, &'static str)],
}

impl KnownFamily {
    /// The same family under other names in other releases.
    const fn also(self, also: &'static [(&'static str, &'static str)]) -> Self {
        KnownFamily { also, ..self }
    }

    /// Every name of the family, the rules' name first.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        std::iter::once(self.name).chain(self.also.iter().map(|(n, _)| *n))
    }
}

const fn k(name: &'static str, kind: MetricKind, layer: &'static str) -> KnownFamily {
    KnownFamily {
        name,
        kind,
        layer,
        etcd: false,
        also: &[],
    }
}

const fn e(name: &'static str, kind: MetricKind) -> KnownFamily {
    KnownFamily {
        name,
        kind,
        layer: "Storage (etcd)",
        etcd: true,
        also: &[],
    }
}

/// The family a name belongs to, under whichever release's name it is given.
pub fn known_family(name: &str) -> Option<&'static KnownFamily> {
    KNOWN_FAMILIES.iter().find(|f| f.names().any(|n| n == name))
}

/// The names to try, in order, for a family a rule asks for by `name`: the family's names when it
/// is known (the asked name first), else the name alone.
pub fn names_to_try(name: &str) -> Vec<&str> {
    let mut out = vec![name];
    if let Some(f) = known_family(name) {
        for other in f.names() {
            if other != name {
                out.push(other);
            }
        }
    }
    out
}

/// The families rules read, grouped by layer: the one list behind [`default_selection`] and the
/// Prometheus reader's types and docs (`collect::metrics::prometheus::families`). A family renamed between
/// supported releases (1.24 to the newest; etcd 3.4 and 3.5) is one entry with its other names in
/// `also`, so rules name it once and read it on every version.
pub const KNOWN_FAMILIES: &[KnownFamily] = &[
    // Identity and age of the process: tells dumps apart and says how much history the
    // cumulative counters hold.
    k("process_start_time_seconds", G, "Identity"),
    k("kubernetes_build_info", G, "Identity"),
    // All layers: what kube-apiserver answered and what it terminated in self-defense
    // (`component="aggregator"` marks the aggregator's own 503s; APF 429s are here and in
    // dropped requests, not in apiserver_request_total).
    k("apiserver_request_total", C, "All layers"),
    k("apiserver_request_terminations_total", C, "All layers"),
    k("apiserver_dropped_requests_total", C, "APF"),
    k("apiserver_current_inflight_requests", G, "APF"),
    k("apiserver_tls_handshake_errors_total", C, "Auth"),
    // Admission: CRD conversion webhooks (the admission webhook families are prefixes below).
    k(
        "apiserver_crd_conversion_webhook_duration_seconds",
        H,
        "Admission",
    )
    .also(&[(
        "apiserver_crd_webhook_conversion_duration_seconds",
        "up to 1.27 (renamed by kubernetes#118542)",
    )]),
    // APF: rejections by reason, dispatches, queues, executing seats, limits.
    k("apiserver_flowcontrol_rejected_requests_total", C, "APF"),
    k("apiserver_flowcontrol_dispatched_requests_total", C, "APF"),
    k("apiserver_flowcontrol_current_inqueue_requests", G, "APF"),
    k("apiserver_flowcontrol_current_executing_requests", G, "APF"),
    k("apiserver_flowcontrol_current_executing_seats", G, "APF").also(&[(
        "apiserver_flowcontrol_request_concurrency_in_use",
        "up to 1.26 (deprecated in 1.27, removed in 1.31)",
    )]),
    k(
        "apiserver_flowcontrol_request_wait_duration_seconds",
        H,
        "APF",
    ),
    k("apiserver_flowcontrol_nominal_limit_seats", G, "APF").also(&[(
        "apiserver_flowcontrol_request_concurrency_limit",
        "up to 1.27 (deprecated in 1.28, removed in 1.31)",
    )]),
    // Storage, as kube-apiserver sees etcd.
    k("etcd_request_duration_seconds", H, "Storage"),
    k("etcd_requests_total", C, "Storage"),
    k("etcd_request_errors_total", C, "Storage"),
    k("apiserver_storage_objects", G, "Storage").also(&[
        (
            "apiserver_resource_objects",
            "1.34 and later (labels group, resource)",
        ),
        ("etcd_object_counts", "up to 1.21"),
    ]),
    k("apiserver_storage_size_bytes", G, "Storage").also(&[
        (
            "apiserver_storage_db_total_size_in_bytes",
            "1.23 to 1.27 (label endpoint)",
        ),
        ("etcd_db_total_size_in_bytes", "up to 1.27 (label endpoint)"),
    ]),
    // Watch: watchers closed for unresponsiveness, watch-cache freshness.
    k("apiserver_terminated_watchers_total", C, "Watch"),
    k("apiserver_watch_cache_read_wait_seconds", H, "Watch"),
    // Auth: authn/authz outcomes in kube-apiserver, and client certificates presented to it.
    k("authentication_attempts", C, "Auth"),
    k("authorization_attempts_total", C, "Auth"),
    k("apiserver_authorization_decisions_total", C, "Auth"),
    k("apiserver_client_certificate_expiration_seconds", H, "Auth"),
    // etcd itself: disk latency, leadership, proposals, quota, peers, identity.
    e("etcd_disk_wal_fsync_duration_seconds", H),
    e("etcd_disk_backend_commit_duration_seconds", H),
    e("etcd_server_has_leader", G),
    e("etcd_server_is_leader", G),
    e("etcd_server_leader_changes_seen_total", C),
    e("etcd_server_proposals_failed_total", C),
    e("etcd_server_slow_apply_total", C),
    e("etcd_server_heartbeat_send_failures_total", C),
    e("etcd_server_quota_backend_bytes", G),
    e("etcd_mvcc_db_total_size_in_bytes", G).also(&[(
        "etcd_debugging_mvcc_db_total_size_in_bytes",
        "etcd 3.3 and 3.4 (3.4 exposes both)",
    )]),
    e("etcd_mvcc_db_total_size_in_use_in_bytes", G),
    e("etcd_network_peer_round_trip_time_seconds", H),
    e("etcd_network_peer_sent_failures_total", C),
    e("etcd_server_version", G),
    e("etcd_cluster_version", G),
    e("etcd_server_id", G),
    // etcd's gRPC server (go-grpc-prometheus, every etcd release): the KV calls it refused, by
    // code — `request is too large` is InvalidArgument, and etcd logs nothing of it.
    e("grpc_server_handled_total", C),
    // Aggregation: APIService availability (gauge and transitions) and OpenAPI aggregation.
    k("aggregator_unavailable_apiservice", G, "Aggregation"),
    k("aggregator_unavailable_apiservice_total", C, "Aggregation").also(&[(
        "aggregator_unavailable_apiservice_count",
        "releases before the _total rename",
    )]),
    k("aggregator_openapi_v2_regeneration_count", C, "Aggregation"),
    k(
        "aggregator_openapi_v2_regeneration_duration",
        G,
        "Aggregation",
    ),
    // Admission: webhook latency, rejections by error_type, requests by code, fail-open.
    k(
        "apiserver_admission_webhook_admission_duration_seconds",
        H,
        "Admission",
    ),
    k(
        "apiserver_admission_webhook_rejection_count",
        C,
        "Admission",
    ),
    k("apiserver_admission_webhook_request_total", C, "Admission"),
    k(
        "apiserver_admission_webhook_fail_open_count",
        C,
        "Admission",
    ),
    // CRD conversion webhook requests and latency by result and failure type.
    k(
        "apiserver_conversion_webhook_duration_seconds",
        H,
        "Admission",
    ),
    k("apiserver_conversion_webhook_request_total", C, "Admission"),
    // Auth: authorization webhooks, and delegated authn/authz of extension API servers.
    k(
        "apiserver_authorization_webhook_evaluations_total",
        C,
        "Auth",
    ),
    k(
        "apiserver_authorization_webhook_duration_seconds",
        H,
        "Auth",
    ),
    k(
        "apiserver_authorization_webhook_evaluations_fail_open_total",
        C,
        "Auth",
    ),
    k("apiserver_delegated_authn_request_total", C, "Auth"),
    k(
        "apiserver_delegated_authn_request_duration_seconds",
        H,
        "Auth",
    ),
    k("apiserver_delegated_authz_request_total", C, "Auth"),
    k(
        "apiserver_delegated_authz_request_duration_seconds",
        H,
        "Auth",
    ),
    // TLS of webhooks and of the aggregator's backends (missing SAN, SHA-1).
    k("apiserver_webhooks_x509_missing_san_total", C, "Admission"),
    k(
        "apiserver_webhooks_x509_insecure_sha1_total",
        C,
        "Admission",
    ),
    k(
        "apiserver_kube_aggregator_x509_missing_san_total",
        C,
        "Aggregation",
    ),
    k(
        "apiserver_kube_aggregator_x509_insecure_sha1_total",
        C,
        "Aggregation",
    ),
];

/// Families kept by prefix as well as by name: a release may add members (a new webhook metric)
/// that rules can then read without a change here.
pub const SELECTED_PREFIXES: &[&str] = &[
    "aggregator_",
    "apiserver_admission_webhook_",
    "apiserver_conversion_webhook_",
    "apiserver_authorization_webhook_",
    "apiserver_delegated_authn_",
    "apiserver_delegated_authz_",
    "apiserver_webhooks_x509_",
    "apiserver_kube_aggregator_x509_",
];

/// The families extpath keeps from a kube-apiserver, extension API server or etcd `/metrics`
/// dump: [`KNOWN_FAMILIES`] and [`SELECTED_PREFIXES`]. Everything else — most of a 30 MB dump is
/// `apiserver_request_duration_seconds_bucket` — is dropped after reading only the metric name.
pub fn default_selection() -> crate::promtext::Selection {
    let by_name = KNOWN_FAMILIES
        .iter()
        .flat_map(KnownFamily::names)
        .filter(|n| !SELECTED_PREFIXES.iter().any(|p| n.starts_with(p)));
    SELECTED_PREFIXES
        .iter()
        .fold(crate::promtext::Selection::names(by_name), |s, p| {
            s.with_prefix(*p)
        })
}
