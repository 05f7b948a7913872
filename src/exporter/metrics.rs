//! The exporter's `/metrics`: the last diagnosis and the exporter's own scan statistics as metric
//! families, written with the project's own text writer ([`crate::promtext::write_text`]).
//!
//! Names and labels are a contract (docs/exporter.md lists them; alerts in deploy/ read them), so
//! they are spelled once, here. Cardinality is bounded by the cluster's configuration, never by
//! its traffic: a labelled series exists per subject only while that subject has a finding at
//! warning or above (`extpath_verdict`) or per certificate on an extension path
//! (`extpath_certificate_expiry_timestamp_seconds`); healthy subjects are counted per class
//! (`extpath_subjects`), and gap sources lose their object names (`gap_source`).

use std::collections::BTreeMap;

use crate::bundle::{CertSource, EvidenceBundle, GapReason};
use crate::engine::{Class, Diagnosis, Severity};
use crate::promtext::{Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue};

/// Upper bounds of `extpath_scan_duration_seconds`: a scan is about one `--window` (10 s by
/// default) plus a few round trips, bounded by `--timeout` (60 s by default).
pub const DURATION_BUCKETS: &[f64] = &[
    1.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0,
];

/// Source label of `extpath_scan_errors_total` for a scan that could not read the API server at
/// all (unreachable, every read refused, or the client could not be configured).
pub const SOURCE_APISERVER: &str = "apiserver";

/// One certificate on an extension path, as `extpath_certificate_expiry_timestamp_seconds` labels it.
#[derive(Debug, Clone, PartialEq)]
pub struct CertExpiry {
    /// The owner's kind (`APIService`, `ValidatingWebhook`, …).
    pub subject_kind: String,
    /// The owner's name.
    pub subject: String,
    /// `ca_bundle/<index>` or `served_chain/<index>` (0 = the leaf of a served chain).
    pub certificate: String,
    /// `notAfter`, seconds since the epoch.
    pub not_after: f64,
}

impl CertExpiry {
    /// The certificates of a bundle that belong to an extension path (an owner is known).
    pub fn of(bundle: &EvidenceBundle) -> Vec<CertExpiry> {
        bundle
            .certificates
            .iter()
            .filter_map(|c| {
                let owner = c.origin.owner.as_ref()?;
                let source = match c.origin.source {
                    CertSource::CaBundle => "ca_bundle",
                    CertSource::ServedChain => "served_chain",
                    // A PEM file the user supplied is a local copy, not what the cluster serves
                    // or trusts; an expiry alert on it would point at the wrong thing.
                    CertSource::File => return None,
                };
                Some(CertExpiry {
                    subject_kind: owner.kind.to_string(),
                    subject: owner.name.clone(),
                    certificate: format!("{source}/{}", c.origin.chain_index),
                    // Prometheus convention for instants: float Unix seconds, so an alert reads
                    // `… - time() < 14 * 86400` with no unit conversion.
                    not_after: c.not_after.as_millisecond() as f64 / 1000.0,
                })
            })
            .collect()
    }
}

/// A cumulative histogram of scan durations.
#[derive(Debug, Clone, Default)]
pub struct DurationHistogram {
    /// Observations ≤ each bound of [`DURATION_BUCKETS`].
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl DurationHistogram {
    /// Record one scan's duration.
    pub fn observe(&mut self, seconds: f64) {
        // Sized on first use so that `Default` can derive; the +Inf bucket is `count`, written
        // by `families`, as the exposition format requires every histogram to end in one.
        if self.counts.is_empty() {
            self.counts = vec![0; DURATION_BUCKETS.len()];
        }
        for (c, le) in self.counts.iter_mut().zip(DURATION_BUCKETS) {
            if seconds <= *le {
                *c += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }
}

/// What the exporter knows: the last complete scan and its own statistics.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The last diagnosis, when a scan has completed.
    pub diagnosis: Option<Diagnosis>,
    /// The certificates of the last complete scan.
    pub certificates: Vec<CertExpiry>,
    /// When the last complete scan finished, seconds since the epoch (0 before the first).
    pub last_success: f64,
    /// Durations of every scan, complete or not.
    pub durations: DurationHistogram,
    /// Scans that took longer than the interval (the next one started late, never twice at once).
    pub overruns: u64,
    /// Errors per source family (see [`gap_source`]), since the exporter started.
    pub errors: BTreeMap<String, u64>,
    /// `--interval` in seconds.
    pub interval: f64,
}

/// The source of a gap with object names taken out, so that the label's values are a fixed
/// vocabulary times the subject kinds: `tls/APIService/v1beta1.metrics.k8s.io` →
/// `tls/APIService`, `objects/apiservices/v1.x` → `objects/apiservices`,
/// `discovery/apis/wardle.example.com/v1alpha1` → `discovery/apis`, `file:…` → `file`. Segments
/// are kept up to a name (one with a dot), up to and including a kind (a capitalised segment),
/// and at most three.
pub fn gap_source(source: &str) -> String {
    if source.starts_with("file:") {
        return "file".into();
    }
    // Every label value is a new series in Prometheus' TSDB for as long as it is retained; an
    // object name per gap would let one cluster with many broken APIServices grow the exporter's
    // cardinality without bound. A dot marks an object name (group names, `v1.x`), a colon a
    // host:port or file path.
    let mut kept: Vec<&str> = Vec::new();
    for seg in source.split('/').filter(|s| !s.is_empty()) {
        if seg.contains('.') || seg.contains(':') || kept.len() == 3 {
            break;
        }
        kept.push(seg);
        if seg.starts_with(|c: char| c.is_ascii_uppercase()) {
            break;
        }
    }
    if kept.is_empty() {
        return "other".into();
    }
    kept.join("/")
}

/// Whether a gap is a failure to collect (counted in `extpath_scan_errors_total`), rather than a
/// source nobody asked for.
// `NotSupplied` and `Skipped` only arise from raw import (files a user chose to hand over), never
// from a live scan: they describe the input, not a failing source.
pub fn is_error(reason: GapReason) -> bool {
    !matches!(reason, GapReason::NotSupplied | GapReason::Skipped)
}

// The serde name, so the label value is the same word `-o json` prints in `gaps[].reason`.
fn gap_reason(reason: GapReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "error".into())
}

fn series(labels: &[(&str, &str)], value: f64) -> MetricSeries {
    MetricSeries {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        value: Some(MetricValue(value)),
        ..Default::default()
    }
}

fn family(name: &str, kind: MetricKind, help: &str, series: Vec<MetricSeries>) -> MetricFamily {
    MetricFamily {
        name: name.into(),
        kind,
        help: Some(help.into()),
        series,
    }
}

/// The rule a verdict is known by in `extpath_verdict{rule}`: the rule that decided it, or its
/// class when none did (an `Inconclusive` verdict) — either way what `kubectl extpath explain`
/// takes.
fn verdict_rule(v: &crate::engine::Verdict) -> String {
    v.rules
        .first()
        .map(|r| r.id.clone())
        .unwrap_or_else(|| v.class.as_str().to_string())
}

/// Classes a problem can have (a problem's root is a fault: never Healthy or Inconclusive).
const PROBLEM_CLASSES: [Class; 7] = [
    Class::Aggregation,
    Class::Admission,
    Class::Auth,
    Class::Apf,
    Class::Storage,
    Class::Watch,
    Class::OutOfScope,
];

/// The metric families of a snapshot, in the order docs/exporter.md lists them.
pub fn families(s: &Snapshot) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    let d = s.diagnosis.as_ref();

    // One series per subject with a finding; the same labels twice (two webhooks of one name in
    // two configurations) are one series.
    // "A finding" is what a `--fail-on warning` gate fails (`engine::gate`): an Inconclusive
    // verdict counts as a warning whatever its own severity, so a subject extpath could not judge
    // is on the dashboard as it is in CI.
    let mut verdicts: BTreeMap<Vec<(&str, String)>, ()> = BTreeMap::new();
    for v in d.iter().flat_map(|d| d.verdicts.iter()) {
        let Some(severity) = crate::engine::gate::severity(v) else {
            continue;
        };
        if !crate::engine::gate::fails(v, Severity::Warning) {
            continue;
        }
        verdicts.insert(
            vec![
                ("class", v.class.as_str().to_string()),
                ("severity", severity.as_str().to_string()),
                ("subject_kind", v.subject.kind.as_str().to_string()),
                ("subject", v.subject.name.clone()),
                ("rule", verdict_rule(v)),
            ],
            (),
        );
    }
    // An info-style metric: the value is always 1 and the facts are labels, as kube-state-metrics
    // does for object states, so `count by (class)` and joins on `subject` work in PromQL.
    out.push(family(
        "extpath_verdict",
        MetricKind::Gauge,
        "1 for each subject whose verdict is at warning or above (not waived) in the last complete scan.",
        verdicts
            .keys()
            .map(|l| {
                let labels: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
                series(&labels, 1.0)
            })
            .collect(),
    ));

    if let Some(d) = d {
        // Every (class, severity) pair is written, zeros included: a series that vanishes when
        // its count drops to 0 reads as "no data" to an alert, not as "resolved".
        let mut problems = Vec::new();
        for class in PROBLEM_CLASSES {
            for severity in [Severity::Warning, Severity::Critical] {
                let n = d
                    .problems
                    .iter()
                    .filter(|p| !p.waived && p.class == class && p.severity == severity)
                    .count();
                problems.push(series(
                    &[("class", class.as_str()), ("severity", severity.as_str())],
                    n as f64,
                ));
            }
        }
        out.push(family(
            "extpath_problems",
            MetricKind::Gauge,
            "Problems (root causes with the verdicts they explain, not waived) in the last complete scan.",
            problems,
        ));
        out.push(family(
            "extpath_subjects",
            MetricKind::Gauge,
            "Subjects judged in the last complete scan, by the class of their verdict (Healthy included).",
            Class::ALL
                .iter()
                .map(|c| {
                    let n = d.verdicts.iter().filter(|v| v.class == *c).count();
                    series(&[("class", c.as_str())], n as f64)
                })
                .collect(),
        ));
        let mut gaps: BTreeMap<(String, String), usize> = BTreeMap::new();
        for g in &d.gaps {
            *gaps
                .entry((gap_source(&g.source), gap_reason(g.reason)))
                .or_default() += 1;
        }
        out.push(family(
            "extpath_gaps",
            MetricKind::Gauge,
            "Evidence the last complete scan could not collect, by source (object names removed) and reason.",
            gaps.iter()
                .map(|((source, reason), n)| {
                    series(&[("source", source), ("reason", reason)], *n as f64)
                })
                .collect(),
        ));
    }

    let mut certs: BTreeMap<(String, String, String), f64> = BTreeMap::new();
    for c in &s.certificates {
        let e = certs
            .entry((
                c.subject_kind.clone(),
                c.subject.clone(),
                c.certificate.clone(),
            ))
            .or_insert(c.not_after);
        // The same labels twice: the one that expires first is the one to act on.
        *e = e.min(c.not_after);
    }
    out.push(family(
        "extpath_certificate_expiry_timestamp_seconds",
        MetricKind::Gauge,
        "notAfter of each certificate on an extension path (caBundle and served chain), seconds since the epoch.",
        certs
            .iter()
            .map(|((kind, subject, cert), t)| {
                series(
                    &[
                        ("subject_kind", kind),
                        ("subject", subject),
                        ("certificate", cert),
                    ],
                    *t,
                )
            })
            .collect(),
    ));

    let h = &s.durations;
    let counts = if h.counts.is_empty() {
        vec![0; DURATION_BUCKETS.len()]
    } else {
        h.counts.clone()
    };
    let mut buckets: Vec<Bucket> = DURATION_BUCKETS
        .iter()
        .zip(counts)
        .map(|(le, c)| Bucket {
            le: MetricValue(*le),
            count: MetricValue(c as f64),
        })
        .collect();
    buckets.push(Bucket {
        le: MetricValue(f64::INFINITY),
        count: MetricValue(h.count as f64),
    });
    out.push(family(
        "extpath_scan_duration_seconds",
        MetricKind::Histogram,
        "How long each scan took (collection and analysis), complete or not.",
        vec![MetricSeries {
            buckets,
            sum: Some(MetricValue(h.sum)),
            count: Some(MetricValue(h.count as f64)),
            ..Default::default()
        }],
    ));
    // The apiserver series exists from the start at 0, so `increase()` sees the first failure;
    // a counter born at 1 has no earlier sample and `rate()` misses that increment.
    let mut errors = s.errors.clone();
    errors.entry(SOURCE_APISERVER.into()).or_default();
    out.push(family(
        "extpath_scan_errors_total",
        MetricKind::Counter,
        "Collection errors since the exporter started: per scan, one for each source family that failed (source=\"apiserver\": the scan could not read the API server at all).",
        errors
            .iter()
            .map(|(source, n)| series(&[("source", source)], *n as f64))
            .collect(),
    ));
    out.push(family(
        "extpath_scan_overruns_total",
        MetricKind::Counter,
        "Scans that took longer than --interval; the next scan started when it ended, never alongside it.",
        vec![series(&[], s.overruns as f64)],
    ));
    out.push(family(
        "extpath_last_successful_scan_timestamp_seconds",
        MetricKind::Gauge,
        "When the last complete scan finished, seconds since the epoch (0 until the first).",
        vec![series(&[], s.last_success)],
    ));
    out.push(family(
        "extpath_scan_interval_seconds",
        MetricKind::Gauge,
        "The configured --interval between scans.",
        vec![series(&[], s.interval)],
    ));
    let rules = crate::engine::rules::bundled_sources().len().to_string();
    out.push(family(
        "extpath_build_info",
        MetricKind::Gauge,
        "1, labelled with the version of this build, its bundled rule count and the document versions it writes.",
        vec![series(
            &[
                ("version", crate::VERSION),
                ("bundled_rules", &rules),
                ("bundle_api_version", crate::bundle::API_VERSION),
                (
                    "diagnosis_api_version",
                    crate::engine::diagnosis::DIAGNOSIS_API_VERSION,
                ),
            ],
            1.0,
        )],
    ));
    out
}

/// The text exposition of a snapshot (format 0.0.4).
pub fn exposition(s: &Snapshot) -> String {
    crate::promtext::write_text(&families(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_sources_lose_object_names() {
        for (given, want) in [
            ("tls/APIService/v1beta1.metrics.k8s.io", "tls/APIService"),
            (
                "probes/delegation/APIService/v1alpha1.x.example.com",
                "probes/delegation/APIService",
            ),
            ("objects/apiservices/v1.foo.io", "objects/apiservices"),
            (
                "discovery/apis/wardle.example.com/v1alpha1",
                "discovery/apis",
            ),
            ("health/etcd/alarms", "health/etcd/alarms"),
            ("metrics/apiserver", "metrics/apiserver"),
            ("file:/tmp/x.yaml", "file"),
            ("", "other"),
        ] {
            assert_eq!(gap_source(given), want, "{given}");
        }
    }

    #[test]
    fn a_verdict_series_is_what_a_warning_gate_fails() {
        use crate::engine::{Subject, SubjectKind, Verdict};
        let verdict = |name: &str, class: Class, severity: Severity| Verdict {
            class,
            severity,
            ..Verdict::new(Subject::new(SubjectKind::ApiService, name), Vec::new())
        };
        let verdicts = vec![
            verdict("healthy", Class::Healthy, Severity::Info),
            verdict("unjudged", Class::Inconclusive, Severity::Info),
            verdict("info-finding", Class::Aggregation, Severity::Info),
            verdict("broken", Class::Aggregation, Severity::Critical),
        ];
        let text = exposition(&Snapshot {
            interval: 60.0,
            diagnosis: Some(crate::engine::Diagnosis {
                api_version: "extpath.dev/v1alpha1".into(),
                kind: "Diagnosis".into(),
                collected_at: None,
                problems: Vec::new(),
                verdicts,
                gaps: Vec::new(),
                waiver_notices: Vec::new(),
                summary: Default::default(),
            }),
            ..Default::default()
        });
        let series: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("extpath_verdict{"))
            .collect();
        assert_eq!(series.len(), 2, "{series:#?}");
        assert!(
            series
                .iter()
                .any(|l| l.contains("subject=\"broken\"") && l.contains("severity=\"critical\""))
        );
        assert!(series.iter().any(|l| l.contains("subject=\"unjudged\"")
            && l.contains("class=\"Inconclusive\"")
            && l.contains("severity=\"warning\"")));
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let mut h = DurationHistogram::default();
        h.observe(0.5);
        h.observe(12.0);
        h.observe(500.0);
        assert_eq!(h.counts[0], 1);
        assert_eq!(h.counts[4], 2);
        assert_eq!(*h.counts.last().unwrap(), 2);
        assert_eq!(h.count, 3);
    }

    #[test]
    fn before_the_first_scan_only_the_exporters_own_families_have_series() {
        let text = exposition(&Snapshot {
            interval: 60.0,
            ..Default::default()
        });
        let parsed = crate::promtext::parse_str(&text, &crate::promtext::Selection::all()).unwrap();
        let names: Vec<&str> = parsed.iter().map(|f| f.name.as_str()).collect();
        assert!(!names.contains(&"extpath_problems"), "{names:?}");
        assert!(text.contains("extpath_last_successful_scan_timestamp_seconds 0\n"));
        assert!(text.contains("extpath_scan_errors_total{source=\"apiserver\"} 0\n"));
        assert!(text.contains("extpath_scan_duration_seconds_bucket{le=\"+Inf\"} 0\n"));
    }
}
