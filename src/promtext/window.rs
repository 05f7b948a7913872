//! Arithmetic over two scrapes: per-series deltas and rates, with counter resets handled.
//!
//! A counter that went down between scrapes means the process restarted; like Prometheus' `rate()`,
//! the increase is then counted from zero (the later value), and the series is flagged `reset` so a
//! reader knows the window spans a restart.

use std::collections::HashMap;

use super::model::{Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue, SeriesWindow};

fn key(s: &MetricSeries) -> Vec<(&str, &str)> {
    s.labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

fn increase(before: Option<f64>, after: f64) -> (f64, bool) {
    match before {
        Some(b) if after >= b => (after - b, false),
        Some(_) => (after, true),
        // A series that appeared during the window started from zero.
        None => (after, false),
    }
}

/// Fill `window` on every counter, histogram and summary series of `after`, comparing with
/// `before`, over `seconds`. Gauges and untyped series are left without a window.
pub fn apply_window(before: &[MetricFamily], after: &mut [MetricFamily], seconds: f64) {
    let before_by_name: HashMap<&str, &MetricFamily> =
        before.iter().map(|f| (f.name.as_str(), f)).collect();
    for fam in after.iter_mut() {
        let prev = before_by_name.get(fam.name.as_str());
        let prev_series: HashMap<Vec<(&str, &str)>, &MetricSeries> = prev
            .map(|f| f.series.iter().map(|s| (key(s), s)).collect())
            .unwrap_or_default();
        for s in fam.series.iter_mut() {
            let old = prev_series.get(&key(s)).copied();
            s.window = window_of(fam.kind, old, s, seconds);
        }
    }
}

fn rate(delta: f64, seconds: f64) -> Option<MetricValue> {
    (seconds > 0.0).then(|| MetricValue(delta / seconds))
}

fn window_of(
    kind: MetricKind,
    old: Option<&MetricSeries>,
    new: &MetricSeries,
    seconds: f64,
) -> Option<SeriesWindow> {
    match kind {
        MetricKind::Counter => {
            let now = new.value?.0;
            let (delta, reset) = increase(old.and_then(|o| o.value).map(|v| v.0), now);
            Some(SeriesWindow {
                delta: Some(MetricValue(delta)),
                rate: rate(delta, seconds),
                reset,
                ..SeriesWindow::default()
            })
        }
        MetricKind::Histogram | MetricKind::Summary => {
            let count_now = new.count.map(|v| v.0);
            let count_old = old.and_then(|o| o.count).map(|v| v.0);
            let reset = matches!((count_old, count_now), (Some(o), Some(n)) if n < o);
            let base = if reset { None } else { old };
            let buckets = new
                .buckets
                .iter()
                .map(|b| {
                    let prev = base
                        .and_then(|o| o.buckets.iter().find(|x| x.le == b.le))
                        .map_or(0.0, |x| x.count.0);
                    Bucket {
                        le: b.le,
                        count: MetricValue((b.count.0 - prev).max(0.0)),
                    }
                })
                .collect();
            let sum_delta = new
                .sum
                .map(|s| MetricValue(s.0 - base.and_then(|o| o.sum).map_or(0.0, |v| v.0)));
            let count_delta =
                count_now.map(|c| MetricValue(c - base.and_then(|o| o.count).map_or(0.0, |v| v.0)));
            if new.count.is_none() && new.buckets.is_empty() {
                // A summary quantile series: a gauge-like value.
                return None;
            }
            Some(SeriesWindow {
                delta: count_delta,
                rate: count_delta.and_then(|d| rate(d.0, seconds)),
                buckets,
                sum_delta,
                count_delta,
                reset,
            })
        }
        MetricKind::Gauge | MetricKind::Untyped => None,
    }
}
