//! The PromQL extpath sends to Prometheus, and the shaping of the answers into the same
//! [`MetricFamily`] model a two-scrape window produces. Pure: no I/O (the HTTP side is
//! `super`). `docs/prometheus.md` shows every query this module builds; a test keeps it current.
//!
//! One query per family, evaluated at one instant `end` over one range `since`. The parts a
//! two-scrape window gives (the cumulative value at the end, the increase over the window, whether
//! a counter reset) are asked for together and told apart by a label the query adds,
//! `extpath_part`, so that every part of a family comes from the same evaluation and one request:
//!
//! ```text
//! label_replace(sum without (job, instance, …) (X{sel}), "extpath_part", "value", "", "")
//!   or label_replace(sum without (…) (increase(X{sel}[10m])), "extpath_part", "increase", "", "")
//!   or label_replace(sum without (…) (resets(X{sel}[10m])), "extpath_part", "resets", "", "")
//! ```
//!
//! Instances: Prometheus keeps one series per scraped instance and adds target labels (`job`,
//! `instance`, and in operator set-ups `endpoint`, `namespace`, `service`, `pod`, `container`,
//! `node`). Those are aggregated away, so a series has the label set the process itself exposes —
//! the same as a direct scrape. Counters and histograms are summed: on a cluster with three API
//! servers, the rate of 503s is the cluster's rate, which is what a rule about "503s are happening"
//! means. Gauges are not summable in general (three `has_leader` of 1 are not 3 leaders), so each
//! gauge takes the aggregation that keeps the worst instance visible: `max` by default (the busiest
//! API server's in-flight requests, the largest database), `min` for `etcd_server_has_leader` (one
//! member without a leader shows as 0) and `etcd_server_quota_backend_bytes` (the tightest quota),
//! `sum` for `etcd_server_is_leader` (the number of leaders: 1 healthy, 0 none).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use serde::Deserialize;

use crate::promtext::{
    Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue, Selection, SeriesWindow,
};

/// The label the queries add to tell the parts of a family apart.
pub const PART: &str = "extpath_part";

/// Labels Prometheus (or a Prometheus operator) attaches to every series of a target; none of the
/// selected families exposes them itself.
pub const TARGET_LABELS: &[&str] = &[
    "job",
    "instance",
    "endpoint",
    "namespace",
    "service",
    "pod",
    "container",
    "node",
];

/// A label-matcher list such as `job=~"apiserver|kube-apiserver"` (without braces), and the label
/// names it constrains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// The matchers, as given.
    pub matchers: String,
    /// The label names matched on.
    pub labels: Vec<String>,
}

impl Selector {
    /// Parse a matcher list: `name op "value"` items separated by commas, `op` one of `=`, `!=`,
    /// `=~`, `!~`.
    ///
    /// # Errors
    /// A message saying what is wrong, for a malformed list.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let inner = text
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(text)
            .trim();
        let mut labels = Vec::new();
        let mut rest = inner;
        while !rest.is_empty() {
            let name_end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .ok_or_else(|| format!("{text:?}: matcher without operator"))?;
            let name = &rest[..name_end];
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                return Err(format!("{text:?}: expected a label name at {rest:?}"));
            }
            let after = rest[name_end..].trim_start();
            let op_len = ["=~", "!~", "!=", "="]
                .iter()
                .find(|op| after.starts_with(*op))
                .map(|op| op.len())
                .ok_or_else(|| format!("{text:?}: expected =, !=, =~ or !~ after {name}"))?;
            let value = after[op_len..].trim_start();
            let quote = value
                .chars()
                .next()
                .filter(|c| *c == '"' || *c == '\'' || *c == '`')
                .ok_or_else(|| format!("{text:?}: the value of {name} must be quoted"))?;
            let mut end = None;
            let mut escaped = false;
            for (i, c) in value.char_indices().skip(1) {
                if escaped {
                    escaped = false;
                } else if c == '\\' && quote != '`' {
                    escaped = true;
                } else if c == quote {
                    end = Some(i);
                    break;
                }
            }
            let end = end.ok_or_else(|| format!("{text:?}: unterminated value of {name}"))?;
            labels.push(name.to_string());
            rest = value[end + 1..].trim_start();
            if let Some(r) = rest.strip_prefix(',') {
                rest = r.trim_start();
            } else if !rest.is_empty() {
                return Err(format!("{text:?}: expected a comma before {rest:?}"));
            }
        }
        if labels.is_empty() {
            return Err(format!("{text:?}: no matcher"));
        }
        Ok(Selector {
            matchers: inner.to_string(),
            labels,
        })
    }

    /// The labels aggregated away: the target labels and the ones this selector matches on.
    pub fn without(&self) -> String {
        let mut names: Vec<&str> = TARGET_LABELS.to_vec();
        for l in &self.labels {
            if !names.contains(&l.as_str()) {
                names.push(l);
            }
        }
        names.join(", ")
    }
}

/// A PromQL duration for `d`, in the largest unit that divides it (`10m`, `90s`, `6512ms`).
pub fn range(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
        if ms > 0 && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// How one gauge family is aggregated across instances (see the module doc).
pub fn gauge_aggregation(family: &str) -> &'static str {
    match family {
        "etcd_server_has_leader" | "etcd_server_quota_backend_bytes" => "min",
        "etcd_server_is_leader" => "sum",
        _ => "max",
    }
}

/// One `/api/v1/metadata` entry.
#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    /// `counter`, `gauge`, `histogram`, `summary`, `unknown`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Help text.
    #[serde(default)]
    pub help: String,
}

fn kind_of(s: &str) -> MetricKind {
    match s {
        "counter" => MetricKind::Counter,
        "gauge" => MetricKind::Gauge,
        "histogram" => MetricKind::Histogram,
        "summary" => MetricKind::Summary,
        _ => MetricKind::Untyped,
    }
}

/// A family to ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyPlan {
    /// Family name (histograms and summaries without their suffixes).
    pub name: String,
    /// Its type.
    pub kind: MetricKind,
    /// Help text, when Prometheus has metadata.
    pub help: Option<String>,
}

/// The selected families among the series `names` Prometheus holds for a target, typed by
/// `metadata` (`/api/v1/metadata`, keyed by family name). Without metadata (some
/// Prometheus-compatible stores do not keep it) the type is the known one
/// ([`crate::bundle::metrics::KNOWN_FAMILIES`]), else inferred from the names: `_bucket` and `_count` siblings
/// make a histogram, a `_total` suffix a counter, anything else is read as a gauge. Sorted by
/// name.
pub fn plan(
    names: &BTreeSet<String>,
    metadata: &HashMap<String, Vec<Metadata>>,
    selection: &Selection,
) -> Vec<FamilyPlan> {
    let meta = |n: &str| metadata.get(n).and_then(|v| v.first());
    let kind = |n: &str| {
        meta(n)
            .map(|m| kind_of(&m.kind))
            .or_else(|| super::families::known_kind(n))
    };
    let mut out: BTreeMap<String, FamilyPlan> = BTreeMap::new();
    for name in names {
        let mut family: Option<(String, MetricKind)> = None;
        for suffix in ["_bucket", "_sum", "_count"] {
            let Some(base) = name.strip_suffix(suffix) else {
                continue;
            };
            match kind(base) {
                Some(k @ (MetricKind::Histogram | MetricKind::Summary)) => {
                    family = Some((base.to_string(), k));
                }
                None if kind(name).is_none()
                    && names.contains(&format!("{base}_bucket"))
                    && names.contains(&format!("{base}_count")) =>
                {
                    family = Some((base.to_string(), MetricKind::Histogram));
                }
                _ => {}
            }
        }
        let (fname, kind) = family.unwrap_or_else(|| {
            // OpenMetrics scrapes keep a counter's metadata under the name without `_total`.
            let k = kind(name).or_else(|| name.strip_suffix("_total").and_then(kind));
            let k = match k {
                Some(k) => k,
                None if name.ends_with("_total") => MetricKind::Counter,
                None => MetricKind::Untyped,
            };
            (name.clone(), k)
        });
        if !selection.wants(&fname) || out.contains_key(&fname) {
            continue;
        }
        let help = meta(&fname)
            .or_else(|| fname.strip_suffix("_total").and_then(meta))
            .map(|m| m.help.clone())
            .filter(|h| !h.is_empty());
        out.insert(
            fname.clone(),
            FamilyPlan {
                name: fname,
                kind,
                help,
            },
        );
    }
    out.into_values().collect()
}

fn part(expr: String, name: &str) -> String {
    format!("label_replace({expr}, \"{PART}\", \"{name}\", \"\", \"\")")
}

/// The one query for a family: its parts joined with `or`.
pub fn query(plan: &FamilyPlan, selector: &Selector, since: Duration) -> String {
    let sel = &selector.matchers;
    let w = selector.without();
    let r = range(since);
    let sum = |m: &str| format!("sum without ({w}) ({m}{{{sel}}})");
    let inc = |m: &str| format!("sum without ({w}) (increase({m}{{{sel}}}[{r}]))");
    let resets = |m: &str| format!("sum without ({w}) (resets({m}{{{sel}}}[{r}]))");
    let n = &plan.name;
    let parts = match plan.kind {
        MetricKind::Counter => vec![
            part(sum(n), "value"),
            part(inc(n), "increase"),
            part(resets(n), "resets"),
        ],
        MetricKind::Histogram | MetricKind::Summary => {
            let mut parts = Vec::new();
            if plan.kind == MetricKind::Histogram {
                let b = format!("{n}_bucket");
                parts.push(part(sum(&b), "bucket"));
                parts.push(part(inc(&b), "bucket_increase"));
            } else {
                parts.push(part(
                    format!("max without ({w}) ({n}{{{sel}}})"),
                    "quantile",
                ));
            }
            let (s, c) = (format!("{n}_sum"), format!("{n}_count"));
            parts.extend([
                part(sum(&s), "sum"),
                part(inc(&s), "sum_increase"),
                part(sum(&c), "count"),
                part(inc(&c), "count_increase"),
                part(resets(&c), "resets"),
            ]);
            parts
        }
        MetricKind::Gauge | MetricKind::Untyped => vec![part(
            format!("{} without ({w}) ({n}{{{sel}}})", gauge_aggregation(n)),
            "value",
        )],
    };
    parts.join(" or ")
}

/// One element of an instant-vector answer.
#[derive(Debug, Clone, Deserialize)]
pub struct Sample {
    /// Its labels.
    pub metric: BTreeMap<String, String>,
    /// `[unix seconds, "value"]`.
    pub value: (f64, String),
}

#[derive(Default)]
struct Parts {
    value: Option<f64>,
    increase: Option<f64>,
    resets: Option<f64>,
    buckets: Vec<Bucket>,
    bucket_increases: Vec<Bucket>,
    sum: Option<f64>,
    sum_increase: Option<f64>,
    count: Option<f64>,
    count_increase: Option<f64>,
}

fn sorted(mut b: Vec<Bucket>) -> Vec<Bucket> {
    b.sort_by(|x, y| {
        x.le.0
            .partial_cmp(&y.le.0)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    b
}

/// The family a query's answer describes, with windows over `since` seconds.
///
/// # Errors
/// A message for a sample whose value or `le` is not a number, or without the part label.
pub fn assemble(
    plan: &FamilyPlan,
    samples: &[Sample],
    since: Duration,
) -> Result<MetricFamily, String> {
    let seconds = since.as_secs_f64();
    let mut series: BTreeMap<BTreeMap<String, String>, Parts> = BTreeMap::new();
    for s in samples {
        let part = s
            .metric
            .get(PART)
            .ok_or_else(|| format!("{}: a sample without {PART}", plan.name))?;
        let value = crate::promtext::model::parse_value(&s.value.1)
            .ok_or_else(|| format!("{}: value {:?} is not a number", plan.name, s.value.1))?;
        let mut labels = s.metric.clone();
        labels.remove(PART);
        labels.remove("__name__");
        let le = match part.as_str() {
            "bucket" | "bucket_increase" => {
                let text = labels
                    .remove("le")
                    .ok_or_else(|| format!("{}: a bucket without le", plan.name))?;
                Some(
                    crate::promtext::model::parse_value(&text)
                        .ok_or_else(|| format!("{}: le {text:?} is not a number", plan.name))?,
                )
            }
            _ => None,
        };
        let p = series.entry(labels).or_default();
        match (part.as_str(), le) {
            ("value" | "quantile", _) => p.value = Some(value),
            ("increase", _) => p.increase = Some(value),
            ("resets", _) => p.resets = Some(value),
            ("bucket", Some(le)) => p.buckets.push(Bucket {
                le: MetricValue(le),
                count: MetricValue(value),
            }),
            ("bucket_increase", Some(le)) => p.bucket_increases.push(Bucket {
                le: MetricValue(le),
                count: MetricValue(value),
            }),
            ("sum", _) => p.sum = Some(value),
            ("sum_increase", _) => p.sum_increase = Some(value),
            ("count", _) => p.count = Some(value),
            ("count_increase", _) => p.count_increase = Some(value),
            (other, _) => return Err(format!("{}: unknown part {other:?}", plan.name)),
        }
    }
    let rate = |d: f64| (seconds > 0.0).then(|| MetricValue(d / seconds));
    let reset = |p: &Parts| p.resets.is_some_and(|r| r > 0.0);
    let series = series
        .into_iter()
        .map(|(labels, p)| {
            let window = match plan.kind {
                MetricKind::Counter => p.increase.map(|d| SeriesWindow {
                    delta: Some(MetricValue(d)),
                    rate: rate(d),
                    reset: reset(&p),
                    ..SeriesWindow::default()
                }),
                MetricKind::Histogram | MetricKind::Summary => {
                    p.count_increase.map(|d| SeriesWindow {
                        delta: Some(MetricValue(d)),
                        rate: rate(d),
                        buckets: sorted(p.bucket_increases.clone()),
                        sum_delta: p.sum_increase.map(MetricValue),
                        count_delta: Some(MetricValue(d)),
                        reset: reset(&p),
                    })
                }
                MetricKind::Gauge | MetricKind::Untyped => None,
            };
            MetricSeries {
                labels,
                value: p.value.map(MetricValue),
                buckets: sorted(p.buckets),
                sum: p.sum.map(MetricValue),
                count: p.count.map(MetricValue),
                timestamp_ms: None,
                window,
            }
        })
        .collect();
    Ok(MetricFamily {
        name: plan.name.clone(),
        kind: plan.kind,
        help: plan.help.clone(),
        series,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(kind: &str) -> Vec<Metadata> {
        vec![Metadata {
            kind: kind.into(),
            help: format!("a {kind}"),
        }]
    }

    #[test]
    fn selectors_parse_and_name_their_labels() {
        let s = Selector::parse(r#"job=~"apiserver|kube-apiserver""#).unwrap();
        assert_eq!(s.labels, ["job"]);
        let s = Selector::parse(r#"{cluster="prod, eu", job!~'x\'y'}"#).unwrap();
        assert_eq!(s.matchers, r#"cluster="prod, eu", job!~'x\'y'"#);
        assert_eq!(s.labels, ["cluster", "job"]);
        assert!(s.without().ends_with("node, cluster"), "{}", s.without());
        for bad in [
            "",
            "job",
            r#"job="x"#,
            r#"job=x"#,
            r#"job="x" cluster="y""#,
            r#"1a="x""#,
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn families_are_typed_by_metadata_or_by_their_names() {
        let names: BTreeSet<String> = [
            "apiserver_request_total",
            "etcd_request_duration_seconds_bucket",
            "etcd_request_duration_seconds_sum",
            "etcd_request_duration_seconds_count",
            "etcd_disk_wal_fsync_duration_seconds_bucket",
            "etcd_disk_wal_fsync_duration_seconds_sum",
            "etcd_disk_wal_fsync_duration_seconds_count",
            "etcd_server_has_leader",
            "etcd_server_proposals_failed_total",
            "apiserver_admission_webhook_new_thing_total",
            "aggregator_new_thing",
            "aggregator_new_seconds_bucket",
            "aggregator_new_seconds_sum",
            "aggregator_new_seconds_count",
            "go_goroutines",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let metadata: HashMap<String, Vec<Metadata>> = [
            ("apiserver_request_total", meta("counter")),
            ("etcd_request_duration_seconds", meta("histogram")),
            ("etcd_server_has_leader", meta("gauge")),
            ("go_goroutines", meta("gauge")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let plans = plan(
            &names,
            &metadata,
            &crate::bundle::metrics::default_selection(),
        );
        let got: Vec<(&str, MetricKind)> =
            plans.iter().map(|p| (p.name.as_str(), p.kind)).collect();
        assert_eq!(
            got,
            [
                ("aggregator_new_seconds", MetricKind::Histogram),
                ("aggregator_new_thing", MetricKind::Untyped),
                (
                    "apiserver_admission_webhook_new_thing_total",
                    MetricKind::Counter
                ),
                ("apiserver_request_total", MetricKind::Counter),
                (
                    "etcd_disk_wal_fsync_duration_seconds",
                    MetricKind::Histogram
                ),
                ("etcd_request_duration_seconds", MetricKind::Histogram),
                ("etcd_server_has_leader", MetricKind::Gauge),
                ("etcd_server_proposals_failed_total", MetricKind::Counter),
            ]
        );
        assert_eq!(plans[3].help.as_deref(), Some("a counter"));
        assert_eq!(plans[4].help, None);
    }

    #[test]
    fn queries_ask_for_every_part_at_once() {
        let sel = Selector::parse(r#"job="etcd""#).unwrap();
        let p = |name: &str, kind| FamilyPlan {
            name: name.into(),
            kind,
            help: None,
        };
        let q = query(
            &p("etcd_server_has_leader", MetricKind::Gauge),
            &sel,
            Duration::from_secs(600),
        );
        assert_eq!(
            q,
            "label_replace(min without (job, instance, endpoint, namespace, service, pod, \
             container, node) (etcd_server_has_leader{job=\"etcd\"}), \"extpath_part\", \"value\", \
             \"\", \"\")"
        );
        let q = query(
            &p("x_total", MetricKind::Counter),
            &sel,
            Duration::from_millis(6500),
        );
        assert!(
            q.contains("(increase(x_total{job=\"etcd\"}[6500ms]))"),
            "{q}"
        );
        assert!(q.contains("(resets(x_total{job=\"etcd\"}[6500ms]))"), "{q}");
        assert_eq!(q.matches(" or ").count(), 2);
        let q = query(
            &p("h_seconds", MetricKind::Histogram),
            &sel,
            Duration::from_secs(60),
        );
        assert!(
            q.contains("(increase(h_seconds_bucket{job=\"etcd\"}[1m]))"),
            "{q}"
        );
        assert_eq!(q.matches(" or ").count(), 6);
    }

    fn sample(labels: &[(&str, &str)], v: &str) -> Sample {
        Sample {
            metric: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            value: (1.0, v.into()),
        }
    }

    #[test]
    fn answers_become_windowed_series() {
        let plan = FamilyPlan {
            name: "h".into(),
            kind: MetricKind::Histogram,
            help: Some("h".into()),
        };
        let samples = vec![
            sample(&[(PART, "bucket"), ("le", "+Inf"), ("op", "get")], "10"),
            sample(&[(PART, "bucket"), ("le", "0.5"), ("op", "get")], "7"),
            sample(
                &[(PART, "bucket_increase"), ("le", "0.5"), ("op", "get")],
                "3.5",
            ),
            sample(
                &[(PART, "bucket_increase"), ("le", "+Inf"), ("op", "get")],
                "5",
            ),
            sample(&[(PART, "sum"), ("op", "get")], "2"),
            sample(&[(PART, "sum_increase"), ("op", "get")], "1"),
            sample(&[(PART, "count"), ("op", "get")], "10"),
            sample(&[(PART, "count_increase"), ("op", "get")], "5"),
            sample(&[(PART, "resets"), ("op", "get")], "1"),
        ];
        let f = assemble(&plan, &samples, Duration::from_secs(10)).unwrap();
        assert_eq!(f.series.len(), 1);
        let s = &f.series[0];
        assert_eq!(s.labels.get("op").map(String::as_str), Some("get"));
        assert_eq!(s.buckets[0].le.0, 0.5);
        assert!(s.buckets[1].le.0.is_infinite());
        let w = s.window.as_ref().unwrap();
        assert_eq!(w.rate, Some(MetricValue(0.5)));
        assert_eq!(w.buckets[0].count.0, 3.5);
        assert_eq!(w.sum_delta, Some(MetricValue(1.0)));
        assert!(w.reset);

        let counter = FamilyPlan {
            name: "c_total".into(),
            kind: MetricKind::Counter,
            help: None,
        };
        let f = assemble(
            &counter,
            &[
                sample(&[(PART, "value"), ("code", "503")], "40"),
                sample(&[(PART, "increase"), ("code", "503")], "20"),
                sample(&[(PART, "resets"), ("code", "503")], "0"),
                // Born in the last scrape interval: one sample, no increase.
                sample(&[(PART, "value"), ("code", "429")], "1"),
            ],
            Duration::from_secs(10),
        )
        .unwrap();
        let w = f.series[1].window.as_ref().unwrap();
        assert_eq!(
            (w.delta, w.rate, w.reset),
            (Some(MetricValue(20.0)), Some(MetricValue(2.0)), false)
        );
        assert_eq!(f.series[0].window, None);
        assert!(assemble(&counter, &[sample(&[], "1")], Duration::from_secs(1)).is_err());
        assert!(
            assemble(
                &counter,
                &[sample(&[(PART, "value")], "x")],
                Duration::from_secs(1)
            )
            .is_err()
        );
    }
}
