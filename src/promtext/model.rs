//! The parsed shape of a Prometheus text exposition, as kept in bundles.
//!
//! Histograms are joined: one series carries its `_bucket` lines (cumulative, by `le`), `_sum` and
//! `_count`. Summaries keep one series per `quantile` plus `_sum`/`_count` on the series without the
//! `quantile` label. Values are [`MetricValue`], which serialises `NaN` and `±Inf` as strings because
//! JSON has no spelling for them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A sample value: any f64, including `NaN` and `±Inf`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct MetricValue(pub f64);

impl Serialize for MetricValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if v.is_nan() {
            s.serialize_str("NaN")
        } else if v.is_infinite() {
            s.serialize_str(if v > 0.0 { "+Inf" } else { "-Inf" })
        } else {
            s.serialize_f64(v)
        }
    }
}

impl<'de> Deserialize<'de> for MetricValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = MetricValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number, or one of \"NaN\", \"+Inf\", \"-Inf\"")
            }
            fn visit_f64<E>(self, v: f64) -> Result<MetricValue, E> {
                Ok(MetricValue(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<MetricValue, E> {
                Ok(MetricValue(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<MetricValue, E> {
                Ok(MetricValue(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<MetricValue, E> {
                parse_value(v)
                    .map(MetricValue)
                    .ok_or_else(|| E::custom(format!("not a metric value: {v:?}")))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for MetricValue {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "MetricValue".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A sample value; NaN and infinities are written as strings.",
            "oneOf": [
                {"type": "number"},
                {"type": "string", "enum": ["NaN", "+Inf", "-Inf"]}
            ]
        })
    }
}

/// Parse a Prometheus float: decimal, exponent, `NaN`, `+Inf`, `-Inf`, `Inf` (case-insensitive).
pub fn parse_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" | "NAN" => return Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" | "+INF" | "INF" => return Some(f64::INFINITY),
        "-Inf" | "-inf" | "-INF" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    s.parse::<f64>().ok()
}

/// The `# TYPE` of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    /// Monotonic counter (cumulative since the process started).
    Counter,
    /// Gauge.
    Gauge,
    /// Histogram (`_bucket`/`_sum`/`_count` joined).
    Histogram,
    /// Summary.
    Summary,
    /// No `# TYPE` line, or `untyped`.
    #[default]
    Untyped,
}

impl MetricKind {
    /// The word of the `# TYPE` line.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
            MetricKind::Summary => "summary",
            MetricKind::Untyped => "untyped",
        }
    }
}

/// One cumulative histogram bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Bucket {
    /// Upper bound (`le`), `+Inf` for the last.
    pub le: MetricValue,
    /// Cumulative count of observations ≤ `le`.
    pub count: MetricValue,
}

/// What changed in one series between two scrapes. Present only when two scrapes exist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct SeriesWindow {
    /// Counter increase over the window (reset-corrected). For gauges: absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<MetricValue>,
    /// `delta / window seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<MetricValue>,
    /// Histogram: bucket increases over the window (cumulative by `le`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<Bucket>,
    /// Histogram/summary: `_sum` increase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum_delta: Option<MetricValue>,
    /// Histogram/summary: `_count` increase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_delta: Option<MetricValue>,
    /// The counter went down between scrapes: the process restarted, and `delta` counts from zero.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
}

impl SeriesWindow {
    /// The `q`-quantile of the observations made during the window (Prometheus'
    /// `histogram_quantile(q, increase(x_bucket[window]))`), from the bucket deltas. `None` for a
    /// window without buckets or without observations; see [`histogram_quantile`].
    ///
    /// [`histogram_quantile`]: super::histogram_quantile
    pub fn quantile(&self, q: f64) -> Option<f64> {
        super::histogram_quantile(q, &self.buckets)
    }
}

/// One series of a family: a label set and its value(s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct MetricSeries {
    /// Labels (without `le`, and without `quantile` for summary `_sum`/`_count`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Counter, gauge, untyped or summary-quantile value at the (last) scrape. For counters this is
    /// cumulative since the process started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<MetricValue>,
    /// Histogram buckets, cumulative, sorted by `le`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<Bucket>,
    /// Histogram/summary `_sum`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum: Option<MetricValue>,
    /// Histogram/summary `_count`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<MetricValue>,
    /// Explicit sample timestamp (ms since the epoch), when the exposition carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_ms: Option<i64>,
    /// The change over the metrics window; absent when only one scrape exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<SeriesWindow>,
}

/// One metric family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct MetricFamily {
    /// Family name (histograms without the `_bucket`/`_sum`/`_count` suffix).
    pub name: String,
    /// `# TYPE`.
    #[serde(rename = "type", default)]
    pub kind: MetricKind,
    /// `# HELP`, unescaped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    /// Series, in exposition order.
    #[serde(default)]
    pub series: Vec<MetricSeries>,
}
