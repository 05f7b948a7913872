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

/// The families extpath keeps from a kube-apiserver or etcd `/metrics`: what the rules read.
pub fn default_selection() -> crate::promtext::Selection {
    crate::promtext::Selection::names([
        "apiserver_request_terminations_total",
        "apiserver_request_total",
        "apiserver_dropped_requests_total",
        "apiserver_current_inflight_requests",
        "apiserver_crd_conversion_webhook_duration_seconds",
        "etcd_request_duration_seconds",
        "etcd_requests_total",
        "etcd_request_errors_total",
        "apiserver_storage_objects",
        "apiserver_resource_objects",
        "apiserver_storage_size_bytes",
        "apiserver_storage_db_total_size_in_bytes",
        "apiserver_terminated_watchers_total",
        "apiserver_watch_cache_read_wait_seconds",
        "authentication_attempts",
        "authorization_attempts_total",
        "apiserver_authorization_decisions_total",
        "apiserver_client_certificate_expiration_seconds",
        "apiserver_tls_handshake_errors_total",
        "process_start_time_seconds",
    ])
    .with_prefix("aggregator_")
    .with_prefix("apiserver_admission_webhook_")
    .with_prefix("apiserver_conversion_webhook_")
    .with_prefix("apiserver_flowcontrol_")
    .with_prefix("apiserver_authorization_webhook_")
    .with_prefix("apiserver_delegated_")
    .with_prefix("apiserver_webhooks_x509_")
    .with_prefix("apiserver_kube_aggregator_x509_")
    .with_prefix("etcd_disk_")
    .with_prefix("etcd_server_")
    .with_prefix("etcd_mvcc_db_")
    .with_prefix("etcd_network_peer_")
}
