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

/// The families extpath keeps from a kube-apiserver, extension API server or etcd `/metrics`
/// dump: the ones rules read (REFERENCE §3, METRICS-NOTES.md), grouped by layer. Everything else —
/// most of a 30 MB dump is `apiserver_request_duration_seconds_bucket` — is dropped after reading
/// only the metric name. Names of older releases are kept beside their successors so that rules
/// work on every supported version.
pub fn default_selection() -> crate::promtext::Selection {
    crate::promtext::Selection::names([
        // Identity and age of the process: tells dumps apart and says how much history the
        // cumulative counters hold.
        "process_start_time_seconds",
        "kubernetes_build_info",
        // All layers: what kube-apiserver answered and what it terminated in self-defense
        // (`component="aggregator"` marks the aggregator's own 503s; APF 429s are here and in
        // dropped requests, not in apiserver_request_total).
        "apiserver_request_total",
        "apiserver_request_terminations_total",
        "apiserver_dropped_requests_total",
        "apiserver_current_inflight_requests",
        "apiserver_tls_handshake_errors_total",
        // Admission: CRD conversion webhooks (the admission webhook families are prefixes below).
        "apiserver_crd_conversion_webhook_duration_seconds",
        // APF: rejections by reason, dispatches, queues, executing seats, limits.
        "apiserver_flowcontrol_rejected_requests_total",
        "apiserver_flowcontrol_dispatched_requests_total",
        "apiserver_flowcontrol_current_inqueue_requests",
        "apiserver_flowcontrol_current_executing_requests",
        "apiserver_flowcontrol_current_executing_seats",
        "apiserver_flowcontrol_request_wait_duration_seconds",
        "apiserver_flowcontrol_request_concurrency_limit",
        "apiserver_flowcontrol_nominal_limit_seats",
        // Storage, as kube-apiserver sees etcd (`etcd_db_total_size_in_bytes` and
        // `etcd_object_counts` are the pre-1.28 / pre-1.21 names).
        "etcd_request_duration_seconds",
        "etcd_requests_total",
        "etcd_request_errors_total",
        "apiserver_storage_objects",
        "apiserver_resource_objects",
        "apiserver_storage_size_bytes",
        "apiserver_storage_db_total_size_in_bytes",
        "etcd_db_total_size_in_bytes",
        "etcd_object_counts",
        // Watch: watchers closed for unresponsiveness, watch-cache freshness.
        "apiserver_terminated_watchers_total",
        "apiserver_watch_cache_read_wait_seconds",
        // Auth: authn/authz outcomes in kube-apiserver, and client certificates presented to it.
        "authentication_attempts",
        "authorization_attempts_total",
        "apiserver_authorization_decisions_total",
        "apiserver_client_certificate_expiration_seconds",
        // etcd itself: disk latency, leadership, proposals, quota, peers, identity.
        "etcd_disk_wal_fsync_duration_seconds",
        "etcd_disk_backend_commit_duration_seconds",
        "etcd_server_has_leader",
        "etcd_server_is_leader",
        "etcd_server_leader_changes_seen_total",
        "etcd_server_proposals_failed_total",
        "etcd_server_slow_apply_total",
        "etcd_server_heartbeat_send_failures_total",
        "etcd_server_quota_backend_bytes",
        "etcd_mvcc_db_total_size_in_bytes",
        "etcd_mvcc_db_total_size_in_use_in_bytes",
        "etcd_network_peer_round_trip_time_seconds",
        "etcd_network_peer_sent_failures_total",
        "etcd_server_version",
        "etcd_cluster_version",
        "etcd_server_id",
    ])
    // Aggregation: APIService availability (gauge and transitions) and OpenAPI aggregation.
    .with_prefix("aggregator_")
    // Admission: webhook latency, rejections by error_type, requests by code, fail-open.
    .with_prefix("apiserver_admission_webhook_")
    // CRD conversion webhook requests and latency by result and failure type.
    .with_prefix("apiserver_conversion_webhook_")
    // Auth: authorization webhooks, and delegated authn/authz of extension API servers.
    .with_prefix("apiserver_authorization_webhook_")
    .with_prefix("apiserver_delegated_authn_")
    .with_prefix("apiserver_delegated_authz_")
    // TLS of webhooks and of the aggregator's backends (missing SAN, SHA-1).
    .with_prefix("apiserver_webhooks_x509_")
    .with_prefix("apiserver_kube_aggregator_x509_")
}
