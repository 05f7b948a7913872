//! The `expect:` block of a scenario: what `kubectl extpath replay` compares extpath's verdicts
//! with. The reference server never reads it — a server that knew the verdicts would make every
//! replay test circular — so it holds only data and the names loading checks it against.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The verdicts `replay` expects. The server never reads this.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// Verdict class per subject: `Kind/name` (`APIService/v1alpha1.wardle.example.com`), or
    /// `Kind/prefix*` for every subject of that kind whose name starts with the prefix.
    #[serde(default)]
    pub subjects: BTreeMap<String, String>,
    /// Classes no other verdict may carry at warning or above: the misattributions the scenario's
    /// fault must not be mistaken for.
    #[serde(default)]
    pub forbid: Vec<String>,
    /// How long `replay` lets the server and its traffic run before scanning, at least (ms; the
    /// `--warmup` flag when longer). For a fault that takes longer than the default second to
    /// show: a webhook whose calls take 8 s has completed no call before 8 s.
    #[serde(default)]
    pub warmup_ms: Option<u64>,
}

/// The classes a scenario may expect (docs/diagnosis.md).
pub const CLASSES: &[&str] = &[
    "Aggregation",
    "Admission",
    "Auth",
    "APF",
    "Storage",
    "Watch",
    "OutOfScope",
    "Healthy",
    "Inconclusive",
];

/// The subject kinds extpath gives verdicts on (the names `expect.subjects` keys start with).
pub const SUBJECT_KINDS: &[&str] = &[
    "APIService",
    "ValidatingWebhook",
    "MutatingWebhook",
    "CustomResourceDefinition",
    "FlowSchema",
    "PriorityLevel",
    "APIServer",
    "Etcd",
    "Request",
];
