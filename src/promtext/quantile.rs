//! `histogram_quantile` with Prometheus semantics.
//!
//! Buckets are cumulative and sorted by upper bound, the last being `+Inf`. The quantile is found by
//! linear interpolation inside the bucket where the rank falls; if it falls in the `+Inf` bucket, the
//! upper bound of the highest finite bucket is returned (Prometheus does the same: it cannot know
//! more). Non-monotonic counts (a scrape racing an observation) are repaired by carrying the running
//! maximum, as Prometheus' `ensureMonotonic` does.

use super::model::Bucket;

/// The `q`-quantile (0 ≤ q ≤ 1) of a cumulative histogram; `None` when it has no observations or no
/// `+Inf` bucket. `q < 0` gives −∞ and `q > 1` gives +∞, like Prometheus.
pub fn histogram_quantile(q: f64, buckets: &[Bucket]) -> Option<f64> {
    if q.is_nan() {
        return Some(f64::NAN);
    }
    if q < 0.0 {
        return Some(f64::NEG_INFINITY);
    }
    if q > 1.0 {
        return Some(f64::INFINITY);
    }
    let mut b: Vec<(f64, f64)> = buckets.iter().map(|b| (b.le.0, b.count.0)).collect();
    b.sort_by(|x, y| x.0.partial_cmp(&y.0).unwrap_or(std::cmp::Ordering::Equal));
    if b.len() < 2 || b.last()?.0 != f64::INFINITY {
        return None;
    }
    let mut max = 0.0f64;
    for e in b.iter_mut() {
        max = max.max(e.1);
        e.1 = max;
    }
    let total = b.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let idx = b.iter().position(|e| e.1 >= rank)?;
    if idx == b.len() - 1 {
        return Some(b[b.len() - 2].0);
    }
    if idx == 0 && b[0].0 <= 0.0 {
        return Some(b[0].0);
    }
    let (start, count_before) = if idx == 0 {
        (0.0, 0.0)
    } else {
        (b[idx - 1].0, b[idx - 1].1)
    };
    let end = b[idx].0;
    let in_bucket = b[idx].1 - count_before;
    if in_bucket <= 0.0 {
        return Some(end);
    }
    Some(start + (end - start) * ((rank - count_before) / in_bucket))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promtext::MetricValue;

    fn h(pairs: &[(f64, f64)]) -> Vec<Bucket> {
        pairs
            .iter()
            .map(|&(le, c)| Bucket {
                le: MetricValue(le),
                count: MetricValue(c),
            })
            .collect()
    }

    #[test]
    fn matches_prometheus_on_textbook_cases() {
        let b = h(&[
            (0.1, 10.0),
            (0.5, 50.0),
            (1.0, 90.0),
            (f64::INFINITY, 100.0),
        ]);
        assert_eq!(histogram_quantile(0.5, &b), Some(0.5));
        let p99 = histogram_quantile(0.99, &b).unwrap();
        assert_eq!(p99, 1.0, "rank in +Inf bucket gives highest finite bound");
        let p10 = histogram_quantile(0.1, &b).unwrap();
        assert!((p10 - 0.1).abs() < 1e-12);
        let p30 = histogram_quantile(0.3, &b).unwrap();
        assert!((p30 - 0.3).abs() < 1e-12, "{p30}");
        assert_eq!(
            histogram_quantile(0.5, &h(&[(1.0, 0.0), (f64::INFINITY, 0.0)])),
            None
        );
        assert_eq!(histogram_quantile(0.5, &h(&[(1.0, 3.0)])), None);
    }
}
