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
