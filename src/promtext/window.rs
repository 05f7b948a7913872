//! Arithmetic over two scrapes: per-series deltas and rates, with counter resets handled.
//!
//! It owns the meaning of a window and nothing about parsing. Series are matched by family name
//! and full label set.
//!
//! * A counter that went down between scrapes means the process restarted: like Prometheus'
//!   `rate()`, the increase is then counted from zero (the later value), and the series is flagged
//!   `reset` so a reader knows the window spans a restart.
//! * A histogram or summary restarted when its `_count` or any bucket went down; then every delta
//!   of the series counts from zero. Bucket deltas of a histogram stay cumulative
//!   by `le`, so [`histogram_quantile`](super::histogram_quantile) applies to them as to the
//!   buckets of a scrape ([`SeriesWindow::quantile`]).
//! * A series present only in the later scrape appeared during the window (client libraries create
//!   labelled series on first use), so it counts from zero. A series present only in the earlier
//!   scrape is gone and has nothing to report; it is not carried over.
//! * Gauges, untyped series and summary quantile series get no window: a difference of gauges is
//!   not an amount of anything.

use std::collections::HashMap;

use super::model::{Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue, SeriesWindow};

fn key(s: &MetricSeries) -> Vec<(&str, &str)> {
    s.labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// Fill `window` on every counter, histogram and summary series of `after`, comparing with
/// `before`, over `seconds`. Gauges, untyped series and summary quantiles are left without one.
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
    (seconds > 0.0 && seconds.is_finite()).then(|| MetricValue(delta / seconds))
}

/// `now - before`, unless the counter went down (a restart), then `now` and `true`. NaN stays NaN
/// and is not a reset: nothing is known about it.
fn increase(before: Option<f64>, now: f64) -> (f64, bool) {
    match before {
        Some(b) if now < b => (now, true),
        Some(b) => (now - b, false),
        None => (now, false),
    }
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
            if new.count.is_none() && new.sum.is_none() && new.buckets.is_empty() {
                // A summary quantile series: a gauge-like value.
                return None;
            }
            Some(distribution_window(old, new, seconds))
        }
        MetricKind::Gauge | MetricKind::Untyped => None,
    }
}

fn distribution_window(
    old: Option<&MetricSeries>,
    new: &MetricSeries,
    seconds: f64,
) -> SeriesWindow {
    let old_bucket = |le: MetricValue| {
        old.and_then(|o| o.buckets.iter().find(|x| x.le == le))
            .map(|x| x.count.0)
    };
    // A restart followed by more observations than before leaves `_count` higher but some
    // bucket lower, so every cumulative part is checked; `_sum` is not (it may fall legitimately
    // when negative values are observed).
    let count_fell = matches!(
        (old.and_then(|o| o.count), new.count),
        (Some(before), Some(now)) if now.0 < before.0
    );
    let reset = count_fell
        || new
            .buckets
            .iter()
            .any(|b| old_bucket(b.le).is_some_and(|before| b.count.0 < before));
    // After a restart everything counts from zero: the old values describe another process.
    let base = if reset { None } else { old };
    let since =
        |now: f64, before: Option<MetricValue>| MetricValue(now - before.map_or(0.0, |v| v.0));
    let buckets = new
        .buckets
        .iter()
        .map(|b| Bucket {
            le: b.le,
            count: since(b.count.0, base.and(old_bucket(b.le)).map(MetricValue)),
        })
        .collect();
    let sum_delta = new.sum.map(|s| since(s.0, base.and_then(|o| o.sum)));
    let count_delta = new.count.map(|c| since(c.0, base.and_then(|o| o.count)));
    SeriesWindow {
        delta: count_delta,
        rate: count_delta.and_then(|d| rate(d.0, seconds)),
        buckets,
        sum_delta,
        count_delta,
        reset,
    }
}
