//! Metric queries as rules see them: select series of a family by labels, then read a windowed
//! increase, a cumulative total, a gauge value or a histogram quantile — always saying which.
//!
//! The trap these answers are shaped around: a single `/metrics` dump holds counters cumulative since
//! the process started, so "non-zero" means "happened at some point", not "is happening". Every answer
//! carries `present` (the family exists in that target's metrics — a missing family is *not* zero) and
//! `windowed` (the bundle has two scrapes and `increase`/`rate` describe the window between them).
//! Histogram answers carry their `basis`: `window` (bucket increases over the window) or `cumulative`
//! (buckets since the process started).
//!
//! This module is plain Rust over bundle types; [`super::functions`] exposes it to CEL. It keeps a
//! lazily built index per (family, label) so that 2,000 CRD subjects each asking for their own
//! `crd_name` do not scan every series 2,000 times.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::bundle::{MetricFamily, MetricKind, MetricSeries, MetricTarget, MetricsSource};
use crate::promtext::{Bucket, MetricValue, histogram_quantile, histogram_quantile_floor};

/// One label condition of a selector.
#[derive(Debug, Clone)]
pub enum LabelMatch {
    /// `label == value`.
    Eq(String, String),
    /// `label` is one of the values.
    AnyOf(String, Vec<String>),
    /// `label != value` (an absent label counts as empty).
    Ne(String, String),
    /// `label` fully matches the regex.
    Re(String, std::sync::Arc<regex::Regex>),
    /// `label` does not fully match the regex.
    NotRe(String, std::sync::Arc<regex::Regex>),
}

impl LabelMatch {
    fn matches(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        let get = |k: &str| labels.get(k).map(String::as_str).unwrap_or("");
        match self {
            LabelMatch::Eq(k, v) => get(k) == v,
            LabelMatch::AnyOf(k, vs) => vs.iter().any(|v| v == get(k)),
            LabelMatch::Ne(k, v) => get(k) != v,
            LabelMatch::Re(k, r) => r.is_match(get(k)),
            LabelMatch::NotRe(k, r) => !r.is_match(get(k)),
        }
    }
}

/// Parse a selector key/value pair: `key` (equality, or any-of for a list), `key!=`, `key=~`,
/// `key!~` (regexes are anchored: they must match the whole value).
///
/// # Errors
/// A message for an invalid regex.
pub fn label_match(key: &str, values: Vec<String>) -> Result<LabelMatch, String> {
    let anchored = |r: &str| {
        super::regex_cache::compiled(&format!("^(?:{r})$"))
            .map_err(|e| format!("label regex {r:?}: {e}"))
    };
    let first = values.first().cloned().unwrap_or_default();
    Ok(if let Some(k) = key.strip_suffix("=~") {
        LabelMatch::Re(k.to_string(), anchored(&first)?)
    } else if let Some(k) = key.strip_suffix("!~") {
        LabelMatch::NotRe(k.to_string(), anchored(&first)?)
    } else if let Some(k) = key.strip_suffix("!=") {
        LabelMatch::Ne(k.to_string(), first)
    } else if values.len() == 1 {
        LabelMatch::Eq(key.to_string(), first)
    } else {
        LabelMatch::AnyOf(key.to_string(), values)
    })
}

/// What a counter query found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CounterAnswer {
    /// At least one of the families exists in that target's metrics.
    pub present: bool,
    /// The target's metrics have a window: `increase` and `rate` are meaningful.
    pub windowed: bool,
    /// Number of matching series.
    pub series: usize,
    /// Sum of the matching series' cumulative values (histograms: observation counts).
    pub total: f64,
    /// Sum of their increases over the window (0 without a window).
    pub increase: f64,
    /// `increase` per second (0 without a window).
    pub rate: f64,
    /// Window length in seconds (0 without a window).
    pub window_seconds: f64,
}

/// What a gauge query found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GaugeAnswer {
    /// The family exists.
    pub present: bool,
    /// Number of matching series.
    pub series: usize,
    /// Sum of the matching values.
    pub value: f64,
    /// Largest matching value (0 when none).
    pub max: f64,
    /// Smallest matching value (0 when none).
    pub min: f64,
}

/// What a histogram query found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramAnswer {
    /// The family exists.
    pub present: bool,
    /// The target's metrics have a window.
    pub windowed: bool,
    /// `window` (bucket increases over the window), `cumulative` (since the process started) or
    /// `none` (family absent).
    pub basis: &'static str,
    /// Observations counted in that basis.
    pub count: f64,
    /// The quantile in seconds (0 when there are no observations), or for `above` queries the
    /// number of observations above the threshold.
    pub value: f64,
    /// For `above` queries: `value / count` (0 when there are no observations).
    pub fraction: f64,
    /// The quantile's rank falls in the `+Inf` bucket: the true value is above `top_bucket`, and
    /// `value` (that bound, as Prometheus answers) is only a lower bound.
    pub beyond_top_bucket: bool,
    /// The highest finite bucket bound of the matching series (0 when there is none).
    pub top_bucket: f64,
    /// The quantile as far as the buckets prove it, for comparing with a threshold: `value`
    /// when at least one observation lies beyond the rank (`(1 − q) × count ≥ 1`: the rank is
    /// not simply the largest observation, and interpolating inside its bucket reads a
    /// distribution), else the largest observation's lower bounds: the lower edge of the bucket
    /// holding the rank, or the mean when it is higher (no observation set has a maximum below
    /// its mean). A handful of observations proves no more (five fsyncs with one in 8–16 ms
    /// interpolate to a p99 of 15.6 ms, yet prove only > 8 ms). 0 without observations; for
    /// `above` queries, `value`.
    pub proven: f64,
    /// The mean observation in seconds: `_sum` over `_count` in the same basis (0 without
    /// observations or without `_sum`). Exact where a quantile beyond the top bucket is only a
    /// bound — a 1.24 webhook histogram stops at 2.5 s; its mean still says 8 s.
    pub mean: f64,
    /// The quantile for people: `1.2 s`, `> 2.5 s` when it lies beyond the top bucket, `no
    /// observations` when there are none; empty for `above` queries.
    pub text: String,
}

/// The quantile of `value` seconds for people, saying when it lies beyond the top bucket.
pub fn quantile_text(count: f64, value: f64, beyond_top_bucket: bool) -> String {
    if count <= 0.0 {
        "no observations".to_string()
    } else if beyond_top_bucket {
        format!("> {}", super::functions::human_seconds(value))
    } else {
        super::functions::human_seconds(value)
    }
}

/// One matching series, for listing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesAnswer {
    /// Its labels.
    pub labels: Vec<(String, String)>,
    /// Cumulative value (counter), current value (gauge) or observation count (histogram).
    pub value: f64,
    /// Increase over the window (0 without a window).
    pub increase: f64,
    /// Rate over the window (0 without a window).
    pub rate: f64,
}

type IndexKey = (usize, usize, String);
/// Series indexes of a family by the value of one label.
type LabelIndex = Arc<HashMap<String, Vec<usize>>>;

/// The metrics of a bundle, ready to be queried many times.
#[derive(Debug, Default)]
pub struct MetricsIndex {
    sources: Vec<MetricsSource>,
    by_label: Mutex<HashMap<IndexKey, LabelIndex>>,
    families: Mutex<HashMap<(usize, String), Option<usize>>>,
}

/// Parse a target name (`apiserver`, `etcd`, `extension`).
pub fn parse_target(s: &str) -> Option<MetricTarget> {
    match s {
        "apiserver" => Some(MetricTarget::Apiserver),
        "etcd" => Some(MetricTarget::Etcd),
        "extension" => Some(MetricTarget::Extension),
        _ => None,
    }
}

fn num(v: Option<MetricValue>) -> f64 {
    v.map(|v| v.0).filter(|v| v.is_finite()).unwrap_or(0.0)
}

fn cumulative_of(kind: MetricKind, s: &MetricSeries) -> f64 {
    match kind {
        MetricKind::Histogram | MetricKind::Summary if s.count.is_some() => num(s.count),
        _ => num(s.value),
    }
}

fn increase_of(s: &MetricSeries) -> f64 {
    s.window.as_ref().map_or(0.0, |w| num(w.delta))
}

/// Summing bucket counts by `le` across series is how a quantile over several label sets is
/// taken (PromQL's `histogram_quantile(q, sum by (le) (…))`); it is valid because every series of
/// one family shares the bucket layout its release declares.
fn merge_buckets(into: &mut Vec<Bucket>, add: &[Bucket]) {
    for b in add {
        match into.iter_mut().find(|x| x.le == b.le) {
            Some(x) => x.count = MetricValue(x.count.0 + b.count.0),
            None => into.push(*b),
        }
    }
}

impl MetricsIndex {
    /// Index the metrics sources of a bundle (they are copied: the CEL functions that query them
    /// must own what they read).
    pub fn new(sources: &[MetricsSource]) -> Self {
        MetricsIndex {
            sources: sources.to_vec(),
            by_label: Mutex::new(HashMap::new()),
            families: Mutex::new(HashMap::new()),
        }
    }

    /// The source of a target, if supplied.
    pub fn source(&self, target: MetricTarget) -> Option<&MetricsSource> {
        self.sources.iter().find(|s| s.target == target)
    }

    fn source_index(&self, target: MetricTarget) -> Option<usize> {
        self.sources.iter().position(|s| s.target == target)
    }

    /// The matching series of each present family, with the family's kind.
    fn select<'a>(
        &'a self,
        target: MetricTarget,
        families: &[String],
        selector: &[LabelMatch],
    ) -> (bool, Vec<(&'a MetricFamily, &'a MetricSeries)>) {
        let Some(si) = self.source_index(target) else {
            return (false, Vec::new());
        };
        let source = &self.sources[si];
        let mut present = false;
        let mut out = Vec::new();
        // Each asked name is one family: read it under the first of its releases' names the
        // target exposes (`bundle::metrics::KNOWN_FAMILIES`), so a rule written against 1.30's
        // names reads a 1.24 server, and a server exposing an old and a new name during a
        // deprecation is not counted twice. Names given in one list are alternatives too.
        let mut chosen: Vec<usize> = Vec::new();
        for name in families {
            if let Some(fi) = self.family_index(si, name)
                && !chosen.contains(&fi)
            {
                chosen.push(fi);
            }
        }
        if families.len() > 1 {
            // A list names one family under several names: the first present wins.
            chosen.truncate(1);
        }
        for fi in chosen {
            present = true;
            let fam = &source.families[fi];
            // Narrow by the most selective equality label (an index per label, built once), then
            // check the whole selector on what is left.
            let narrowest = if fam.series.len() > 64 {
                selector
                    .iter()
                    .filter_map(|m| match m {
                        LabelMatch::Eq(k, v) => Some((self.label_index(si, fi, k), v)),
                        _ => None,
                    })
                    .min_by_key(|(idx, v)| idx.get(*v).map_or(0, Vec::len))
            } else {
                None
            };
            match narrowest {
                Some((idx, v)) => {
                    for &i in idx.get(v).map(Vec::as_slice).unwrap_or(&[]) {
                        let s = &fam.series[i];
                        if selector.iter().all(|m| m.matches(&s.labels)) {
                            out.push((fam, s));
                        }
                    }
                }
                None => out.extend(
                    fam.series
                        .iter()
                        .filter(|s| selector.iter().all(|m| m.matches(&s.labels)))
                        .map(|s| (fam, s)),
                ),
            }
        }
        (present, out)
    }

    /// The family a rule's name stands for in source `si`, under whichever release's name it
    /// is exposed; resolved once per (source, name).
    fn family_index(&self, si: usize, name: &str) -> Option<usize> {
        let key = (si, name.to_string());
        let mut cache = self.families.lock().unwrap_or_else(|e| e.into_inner());
        *cache.entry(key).or_insert_with(|| {
            let families = &self.sources[si].families;
            crate::bundle::metrics::names_to_try(name)
                .into_iter()
                .find_map(|n| families.iter().position(|f| f.name == n))
        })
    }

    fn label_index(&self, si: usize, fi: usize, label: &str) -> LabelIndex {
        let key = (si, fi, label.to_string());
        let mut cache = self.by_label.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(key)
            .or_insert_with(|| {
                let mut m: HashMap<String, Vec<usize>> = HashMap::new();
                for (i, s) in self.sources[si].families[fi].series.iter().enumerate() {
                    let v = s.labels.get(label).cloned().unwrap_or_default();
                    m.entry(v).or_default().push(i);
                }
                Arc::new(m)
            })
            .clone()
    }

    fn window_seconds(&self, target: MetricTarget) -> f64 {
        self.source(target)
            .and_then(|s| s.window.as_ref())
            .map_or(0.0, |w| w.seconds())
    }

    /// Counter totals and window increases of the matching series.
    pub fn counter(
        &self,
        target: MetricTarget,
        families: &[String],
        selector: &[LabelMatch],
    ) -> CounterAnswer {
        let (present, series) = self.select(target, families, selector);
        let window_seconds = self.window_seconds(target);
        let windowed = self.source(target).is_some_and(|s| s.window.is_some());
        let total = series.iter().map(|(f, s)| cumulative_of(f.kind, s)).sum();
        let increase: f64 = if windowed {
            series.iter().map(|(_, s)| increase_of(s)).sum()
        } else {
            0.0
        };
        CounterAnswer {
            present,
            windowed,
            series: series.len(),
            total,
            increase,
            rate: if window_seconds > 0.0 {
                increase / window_seconds
            } else {
                0.0
            },
            window_seconds,
        }
    }

    /// Current values of the matching gauge series.
    pub fn gauge(
        &self,
        target: MetricTarget,
        families: &[String],
        selector: &[LabelMatch],
    ) -> GaugeAnswer {
        let (present, series) = self.select(target, families, selector);
        let values: Vec<f64> = series.iter().map(|(_, s)| num(s.value)).collect();
        GaugeAnswer {
            present,
            series: values.len(),
            value: values.iter().sum(),
            max: values
                .iter()
                .copied()
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
                .unwrap_or(0.0),
            min: values
                .iter()
                .copied()
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.min(v))))
                .unwrap_or(0.0),
        }
    }

    /// The matching series' buckets summed by `le`, over the window when there is one and
    /// `cumulative` is false, else since the process started.
    fn merged_buckets(
        &self,
        target: MetricTarget,
        families: &[String],
        selector: &[LabelMatch],
        cumulative: bool,
    ) -> (bool, bool, &'static str, Vec<Bucket>, f64) {
        let (present, series) = self.select(target, families, selector);
        let windowed = self.source(target).is_some_and(|s| s.window.is_some());
        let use_window = windowed && !cumulative;
        let mut merged: Vec<Bucket> = Vec::new();
        let mut sum = 0.0;
        for (_, s) in &series {
            if use_window {
                if let Some(w) = &s.window {
                    merge_buckets(&mut merged, &w.buckets);
                    sum += w.sum_delta.map_or(0.0, |v| v.0);
                }
            } else {
                merge_buckets(&mut merged, &s.buckets);
                sum += s.sum.map_or(0.0, |v| v.0);
            }
        }
        merged.sort_by(|a, b| {
            a.le.0
                .partial_cmp(&b.le.0)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let basis = match (present, use_window) {
            (false, _) => "none",
            (true, true) => "window",
            (true, false) => "cumulative",
        };
        (present, windowed, basis, merged, sum)
    }

    /// The `q`-quantile (seconds) of the matching histogram series.
    pub fn quantile(
        &self,
        target: MetricTarget,
        families: &[String],
        selector: &[LabelMatch],
        q: f64,
        cumulative: bool,
    ) -> HistogramAnswer {
        let (present, windowed, basis, buckets, sum) =
            self.merged_buckets(target, families, selector, cumulative);
        // The `+Inf` bucket is the observation count of a Prometheus histogram.
        let count = buckets
            .iter()
            .find(|b| b.le.0.is_infinite())
            .map_or(0.0, |b| b.count.0);
        let value = histogram_quantile(q, &buckets)
            .filter(|v| v.is_finite())
            .unwrap_or(0.0);
        let top = buckets.iter().rfind(|b| b.le.0.is_finite());
        let top_bucket = top.map_or(0.0, |b| b.le.0);
        // Prometheus answers the top finite bound when the rank is not reached below it.
        // On 1.24 the webhook latency histogram tops out at 2.5 s (REFERENCE §3.9): a 10 s timeout
        // reads as "2.5 s" unless the answer says the rank lies beyond the top bucket.
        let beyond_top_bucket = count > 0.0 && top.is_some_and(|b| b.count.0 < q * count);
        let mean = if count > 0.0 { sum / count } else { 0.0 };
        // With fewer than 1 / (1 − q) observations the q-quantile's rank is past all but the
        // largest observation, so the quantile is the largest one — at least the floor of its
        // bucket, and at least the mean (`_sum` is exact): ten webhook calls of 600 ms each prove
        // 600 ms, not the 995 ms their bucket's interpolation reads, nor only its 500 ms floor.
        let proven = if (1.0 - q) * count >= 1.0 {
            value
        } else {
            histogram_quantile_floor(q, &buckets)
                .filter(|v| v.is_finite())
                .unwrap_or(0.0)
                .max(mean)
        };
        HistogramAnswer {
            present,
            windowed,
            basis,
            count,
            value,
            fraction: 0.0,
            beyond_top_bucket,
            top_bucket,
            proven,
            mean,
            text: quantile_text(count, value, beyond_top_bucket),
        }
    }

    /// How many observations of the matching histogram series were above `threshold` seconds
    /// (counted from the largest bucket bound at or below it, so never over-counting).
    pub fn above(
        &self,
        target: MetricTarget,
        families: &[String],
        selector: &[LabelMatch],
        threshold: f64,
    ) -> HistogramAnswer {
        let (present, windowed, basis, buckets, sum) =
            self.merged_buckets(target, families, selector, false);
        let count = buckets
            .iter()
            .find(|b| b.le.0.is_infinite())
            .map_or(0.0, |b| b.count.0);
        let at_or_below = buckets
            .iter()
            .filter(|b| b.le.0 <= threshold)
            .map(|b| b.count.0)
            .fold(0.0, f64::max);
        let value = (count - at_or_below).max(0.0);
        HistogramAnswer {
            present,
            windowed,
            basis,
            count,
            value,
            fraction: if count > 0.0 { value / count } else { 0.0 },
            beyond_top_bucket: false,
            proven: value,
            top_bucket: buckets
                .iter()
                .rfind(|b| b.le.0.is_finite())
                .map_or(0.0, |b| b.le.0),
            mean: if count > 0.0 { sum / count } else { 0.0 },
            text: String::new(),
        }
    }

    /// Every matching series with its labels.
    pub fn series(
        &self,
        target: MetricTarget,
        families: &[String],
        selector: &[LabelMatch],
    ) -> Vec<SeriesAnswer> {
        let (_, series) = self.select(target, families, selector);
        let window_seconds = self.window_seconds(target);
        series
            .iter()
            .map(|(f, s)| {
                let increase = increase_of(s);
                SeriesAnswer {
                    labels: s
                        .labels
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                    value: cumulative_of(f.kind, s),
                    increase,
                    rate: if window_seconds > 0.0 {
                        increase / window_seconds
                    } else {
                        0.0
                    },
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promtext::{Selection, apply_window, parse_str};

    /// The index of one single-dump source of `target` read from exposition `text`.
    fn index_of(target: MetricTarget, text: &str) -> MetricsIndex {
        MetricsIndex::new(&[MetricsSource {
            target,
            origin: "test".into(),
            scraped_at: None,
            window: None,
            families: parse_str(text, &Selection::all()).unwrap(),
        }])
    }

    const BEFORE: &str = "\
# TYPE req counter
req{code=\"200\",verb=\"GET\"} 10
req{code=\"503\",verb=\"GET\"} 5
# TYPE lat histogram
lat_bucket{op=\"get\",le=\"0.1\"} 10
lat_bucket{op=\"get\",le=\"1\"} 10
lat_bucket{op=\"get\",le=\"+Inf\"} 10
lat_sum{op=\"get\"} 0.5
lat_count{op=\"get\"} 10
# TYPE up gauge
up 1
";
    const AFTER: &str = "\
# TYPE req counter
req{code=\"200\",verb=\"GET\"} 30
req{code=\"503\",verb=\"GET\"} 5
# TYPE lat histogram
lat_bucket{op=\"get\",le=\"0.1\"} 10
lat_bucket{op=\"get\",le=\"1\"} 15
lat_bucket{op=\"get\",le=\"+Inf\"} 20
lat_sum{op=\"get\"} 20
lat_count{op=\"get\"} 20
# TYPE up gauge
up 0
";

    fn source(windowed: bool) -> MetricsSource {
        let before = parse_str(BEFORE, &Selection::all()).unwrap();
        let mut after = parse_str(AFTER, &Selection::all()).unwrap();
        let window = if windowed {
            apply_window(&before, &mut after, 10.0);
            Some(crate::bundle::Window {
                start: "2026-01-01T00:00:00Z".parse().unwrap(),
                end: "2026-01-01T00:00:10Z".parse().unwrap(),
            })
        } else {
            None
        };
        MetricsSource {
            target: MetricTarget::Apiserver,
            origin: "test".into(),
            scraped_at: None,
            window,
            families: after,
        }
    }

    fn sel(k: &str, v: &str) -> Vec<LabelMatch> {
        vec![label_match(k, vec![v.to_string()]).unwrap()]
    }

    #[test]
    fn counters_say_windowed_or_cumulative_and_absent_is_not_zero() {
        let idx = MetricsIndex::new(&[source(true)]);
        let fam = vec!["req".to_string()];
        let c = idx.counter(MetricTarget::Apiserver, &fam, &sel("code", "200"));
        assert!(c.present && c.windowed);
        assert_eq!((c.total, c.increase, c.rate), (30.0, 20.0, 2.0));
        let c503 = idx.counter(MetricTarget::Apiserver, &fam, &sel("code=~", "5.."));
        assert_eq!((c503.total, c503.increase), (5.0, 0.0));
        let missing = idx.counter(MetricTarget::Apiserver, &["nope".into()], &[]);
        assert!(!missing.present);
        let etcd = idx.counter(MetricTarget::Etcd, &fam, &[]);
        assert!(!etcd.present && !etcd.windowed);

        let single = MetricsIndex::new(&[source(false)]);
        let c = single.counter(MetricTarget::Apiserver, &fam, &sel("code", "200"));
        assert!(c.present && !c.windowed);
        assert_eq!((c.total, c.increase), (30.0, 0.0));
    }

    #[test]
    fn histograms_use_the_window_when_there_is_one() {
        let idx = MetricsIndex::new(&[source(true)]);
        let fam = vec!["lat".to_string()];
        let q = idx.quantile(MetricTarget::Apiserver, &fam, &[], 0.99, false);
        assert_eq!((q.basis, q.count), ("window", 10.0));
        assert!(q.value > 1.0 - 1e-9, "{q:?}");
        let cum = idx.quantile(MetricTarget::Apiserver, &fam, &[], 0.5, true);
        assert_eq!((cum.basis, cum.count), ("cumulative", 20.0));
        let above = idx.above(MetricTarget::Apiserver, &fam, &[], 0.1);
        assert_eq!((above.value, above.count), (10.0, 10.0));
        let g = idx.gauge(MetricTarget::Apiserver, &["up".into()], &[]);
        assert_eq!((g.present, g.value), (true, 0.0));
    }

    /// One family under two releases' names: a rule names it once and reads it on either
    /// release, and a server that exposes both during a deprecation is not counted twice.
    #[test]
    fn a_renamed_family_is_read_under_the_name_the_release_gives_it() {
        let old = "\
# TYPE apiserver_crd_webhook_conversion_duration_seconds histogram
apiserver_crd_webhook_conversion_duration_seconds_bucket{crd_name=\"a\",succeeded=\"false\",le=\"1\"} 3
apiserver_crd_webhook_conversion_duration_seconds_bucket{crd_name=\"a\",succeeded=\"false\",le=\"+Inf\"} 3
apiserver_crd_webhook_conversion_duration_seconds_sum{crd_name=\"a\",succeeded=\"false\"} 0.1
apiserver_crd_webhook_conversion_duration_seconds_count{crd_name=\"a\",succeeded=\"false\"} 3
# TYPE etcd_mvcc_db_total_size_in_bytes gauge
etcd_mvcc_db_total_size_in_bytes 100
# TYPE etcd_debugging_mvcc_db_total_size_in_bytes gauge
etcd_debugging_mvcc_db_total_size_in_bytes 100
";
        let families = parse_str(old, &Selection::all()).unwrap();
        let src = |target| MetricsSource {
            target,
            origin: "test".into(),
            scraped_at: None,
            window: None,
            families: families.clone(),
        };
        let idx = MetricsIndex::new(&[src(MetricTarget::Apiserver), src(MetricTarget::Etcd)]);
        let current = vec!["apiserver_crd_conversion_webhook_duration_seconds".to_string()];
        let c = idx.counter(MetricTarget::Apiserver, &current, &sel("crd_name", "a"));
        assert!(c.present, "the 1.24 name is read for the 1.30 one");
        assert_eq!(c.total, 3.0);
        let size = idx.gauge(
            MetricTarget::Etcd,
            &["etcd_mvcc_db_total_size_in_bytes".to_string()],
            &[],
        );
        assert_eq!(size.value, 100.0, "etcd 3.4's two names are one family");
        let listed = idx.gauge(
            MetricTarget::Etcd,
            &[
                "etcd_mvcc_db_total_size_in_bytes".to_string(),
                "etcd_debugging_mvcc_db_total_size_in_bytes".to_string(),
            ],
            &[],
        );
        assert_eq!(listed.value, 100.0, "names in one list are alternatives");
    }

    /// 1.24's webhook histogram stops at 2.5 s: a quantile whose rank is in `+Inf` is a lower
    /// bound, said as such.
    #[test]
    fn proven_is_the_bucket_floor_until_an_observation_lies_beyond_the_rank() {
        // Five fsyncs, the slowest in (8 ms, 16 ms]; then 200 with three in (16 ms, 32 ms].
        let text = "\
# TYPE f histogram
f_bucket{n=\"few\",le=\"0.008\"} 4
f_bucket{n=\"few\",le=\"0.016\"} 5
f_bucket{n=\"few\",le=\"0.032\"} 5
f_bucket{n=\"few\",le=\"+Inf\"} 5
f_count{n=\"few\"} 5
f_bucket{n=\"many\",le=\"0.008\"} 190
f_bucket{n=\"many\",le=\"0.016\"} 197
f_bucket{n=\"many\",le=\"0.032\"} 200
f_bucket{n=\"many\",le=\"+Inf\"} 200
f_count{n=\"many\"} 200
";
        let idx = index_of(MetricTarget::Etcd, text);
        let fam = vec!["f".to_string()];
        let few = idx.quantile(MetricTarget::Etcd, &fam, &sel("n", "few"), 0.99, false);
        assert!(few.value > 0.015, "{}", few.value);
        assert_eq!(few.proven, 0.008, "five observations prove only the floor");
        let many = idx.quantile(MetricTarget::Etcd, &fam, &sel("n", "many"), 0.99, false);
        assert!(many.proven > 0.016, "{many:?}");
        assert_eq!(many.proven, many.value, "observations lie beyond the rank");
    }

    /// A handful of observations whose exact mean is above their bucket's floor prove the mean:
    /// ten calls of 600 ms in the 0.5–1 s bucket.
    #[test]
    fn proven_is_at_least_the_mean_of_a_handful() {
        let text = "\
# TYPE w histogram
w_bucket{le=\"0.5\"} 0
w_bucket{le=\"1\"} 10
w_bucket{le=\"+Inf\"} 10
w_sum 6
w_count 10
";
        let idx = index_of(MetricTarget::Apiserver, text);
        let q = idx.quantile(
            MetricTarget::Apiserver,
            &["w".to_string()],
            &[],
            0.99,
            false,
        );
        assert!(q.value > 0.99, "the interpolation reads {}", q.value);
        assert!((q.proven - 0.6).abs() < 1e-9, "{q:?}");
        let median = idx.quantile(MetricTarget::Apiserver, &["w".to_string()], &[], 0.5, false);
        assert_eq!(
            median.proven, median.value,
            "five of ten lie beyond the median's rank"
        );
    }

    #[test]
    fn a_quantile_beyond_the_top_bucket_says_so() {
        let text = "\
# TYPE w histogram
w_bucket{name=\"slow\",le=\"1\"} 0
w_bucket{name=\"slow\",le=\"2.5\"} 1
w_bucket{name=\"slow\",le=\"+Inf\"} 10
w_sum{name=\"slow\"} 85
w_count{name=\"slow\"} 10
w_bucket{name=\"fast\",le=\"1\"} 10
w_bucket{name=\"fast\",le=\"2.5\"} 10
w_bucket{name=\"fast\",le=\"+Inf\"} 10
w_sum{name=\"fast\"} 0.5
w_count{name=\"fast\"} 10
";
        let idx = index_of(MetricTarget::Apiserver, text);
        let fam = vec!["w".to_string()];
        let slow = idx.quantile(
            MetricTarget::Apiserver,
            &fam,
            &sel("name", "slow"),
            0.5,
            false,
        );
        assert!(slow.beyond_top_bucket);
        assert_eq!((slow.value, slow.top_bucket), (2.5, 2.5));
        assert_eq!(slow.text, "> 2.5 s");
        assert_eq!(
            slow.mean, 8.5,
            "the mean is exact where the quantile is a bound"
        );
        let fast = idx.quantile(
            MetricTarget::Apiserver,
            &fam,
            &sel("name", "fast"),
            0.99,
            false,
        );
        assert!(!fast.beyond_top_bucket);
        assert_eq!(fast.text, "990 ms");
        let none = idx.quantile(MetricTarget::Apiserver, &fam, &sel("name", "x"), 0.5, false);
        assert_eq!(none.text, "no observations");
    }
}
