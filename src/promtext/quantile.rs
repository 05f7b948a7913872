//! `histogram_quantile` over classic (`le`) buckets, with Prometheus' semantics.
//!
//! It owns the numerics only; which buckets to feed (one scrape's, or a window's deltas) is the
//! caller's choice. The steps follow Prometheus' `bucketQuantile` (promql/quantile.go):
//!
//! 1. `q` NaN gives NaN, `q < 0` gives −∞, `q > 1` gives +∞ (before looking at the buckets).
//! 2. Buckets are sorted by `le`; without a `+Inf` bucket there is no answer.
//! 3. Buckets with the same bound are merged by adding their counts.
//! 4. Relative differences under 1e-12 between neighbours are treated as float noise and flattened,
//!    then any remaining decrease is lifted to the running maximum (a scrape that raced an
//!    observation can see a higher bucket lower than a lower one).
//! 5. Fewer than two buckets, or zero observations: no answer.
//! 6. rank = q × count; the first bucket whose count reaches the rank holds the quantile. In the
//!    `+Inf` bucket, the highest finite bound is returned (nothing more is known); in a first bucket
//!    whose bound is ≤ 0, that bound; otherwise linear interpolation inside the bucket, from 0 for
//!    the first one.
//!
//! Where Prometheus returns NaN for "no answer" this returns `None`, so that a missing quantile is
//! not mistaken for a number. Where Prometheus' arithmetic itself gives NaN (q = 0 with an empty
//! first bucket: 0/0), so does this.

use super::model::Bucket;

const PRECISION_TOLERANCE: f64 = 1e-12;

/// The `q`-quantile (0 ≤ q ≤ 1) of cumulative buckets. `None` when there is no answer: no `+Inf`
/// bucket, fewer than two buckets, or no observations. `q < 0` gives −∞, `q > 1` gives +∞ and a
/// NaN `q` gives NaN, like Prometheus.
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
    let b = normalised(buckets)?;
    let (idx, mut rank) = rank_bucket(q, &b);
    if idx == b.len() - 1 {
        return Some(b[b.len() - 2].0);
    }
    if idx == 0 && b[0].0 <= 0.0 {
        return Some(b[0].0);
    }
    let end = b[idx].0;
    let mut count = b[idx].1;
    let mut start = 0.0;
    if idx > 0 {
        start = b[idx - 1].0;
        count -= b[idx - 1].1;
        rank -= b[idx - 1].1;
    }
    Some(start + (end - start) * (rank / count))
}

/// What the buckets *prove* of the `q`-quantile (0 ≤ q ≤ 1): the lower edge of the bucket
/// holding its rank — the highest finite bound when the rank is in `+Inf`, 0 (or the first
/// bound, when it is ≤ 0) in the first bucket. The quantile is above it; where inside the bucket
/// it lies, [`histogram_quantile`]'s interpolation only assumes. `None` exactly when
/// [`histogram_quantile`] has no answer, or `q` is outside [0, 1].
///
/// A threshold judged on a handful of observations needs this: five WAL fsyncs in a 3 s window,
/// one of them in the 8–16 ms bucket, interpolate to a p99 of 15.9 ms, yet prove only that it
/// is above 8 ms.
pub fn histogram_quantile_floor(q: f64, buckets: &[Bucket]) -> Option<f64> {
    if !(0.0..=1.0).contains(&q) {
        return None;
    }
    let b = normalised(buckets)?;
    let (idx, _) = rank_bucket(q, &b);
    if idx == 0 {
        return Some(b[0].0.min(0.0));
    }
    Some(b[idx - 1].0)
}

/// Sorted, merged, corrected cumulative buckets with a `+Inf` bucket, at least two of them and
/// at least one observation; `None` otherwise (no answer).
fn normalised(buckets: &[Bucket]) -> Option<Vec<(f64, f64)>> {
    let mut b: Vec<(f64, f64)> = buckets.iter().map(|b| (b.le.0, b.count.0)).collect();
    b.sort_by(|x, y| x.0.total_cmp(&y.0));
    if b.last()?.0 != f64::INFINITY {
        return None;
    }
    coalesce(&mut b);
    correct_precision_errors(&mut b);
    ensure_monotonic(&mut b);
    if b.len() < 2 {
        return None;
    }
    if b[b.len() - 1].1 == 0.0 {
        return None;
    }
    Some(b)
}

/// The index of the bucket holding the `q`-quantile's rank, and the rank. Like Go's
/// `sort.Search` over all but the last bucket: the last answers when none does.
fn rank_bucket(q: f64, b: &[(f64, f64)]) -> (usize, f64) {
    let rank = q * b[b.len() - 1].1;
    let idx = b[..b.len() - 1]
        .iter()
        .position(|e| e.1 >= rank)
        .unwrap_or(b.len() - 1);
    (idx, rank)
}

/// Merge neighbours with the same bound (the input is sorted), adding their counts.
fn coalesce(b: &mut Vec<(f64, f64)>) {
    b.dedup_by(|later, kept| {
        if later.0 == kept.0 {
            kept.1 += later.1;
            true
        } else {
            false
        }
    });
}

fn correct_precision_errors(b: &mut [(f64, f64)]) {
    let Some(&(_, mut prev)) = b.first() else {
        return;
    };
    for e in b.iter_mut().skip(1) {
        let delta = (e.1 - prev).abs();
        if delta == 0.0 {
            continue;
        }
        if delta / e.1 <= PRECISION_TOLERANCE {
            e.1 = prev;
        } else {
            prev = e.1;
        }
    }
}

fn ensure_monotonic(b: &mut [(f64, f64)]) {
    let Some(&(_, mut max)) = b.first() else {
        return;
    };
    for e in b.iter_mut().skip(1) {
        if e.1 > max {
            max = e.1;
        } else if e.1 < max {
            e.1 = max;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promtext::MetricValue;

    const INF: f64 = f64::INFINITY;

    fn h(pairs: &[(f64, f64)]) -> Vec<Bucket> {
        pairs
            .iter()
            .map(|&(le, c)| Bucket {
                le: MetricValue(le),
                count: MetricValue(c),
            })
            .collect()
    }

    fn close(got: Option<f64>, want: f64) {
        let got = got.expect("a quantile");
        assert!((got - want).abs() < 1e-9, "got {got}, want {want}");
    }

    #[test]
    fn interpolates_linearly_inside_the_bucket_from_zero_for_the_first() {
        let b = h(&[(0.1, 10.0), (0.5, 50.0), (1.0, 90.0), (INF, 100.0)]);
        close(histogram_quantile(0.5, &b), 0.5);
        close(histogram_quantile(0.3, &b), 0.3);
        close(histogram_quantile(0.05, &b), 0.05);
        close(histogram_quantile(0.0, &b), 0.0);
        // A rank exactly on a bucket's count is in that bucket, at its upper bound.
        close(histogram_quantile(0.9, &b), 1.0);
    }

    #[test]
    fn rank_in_the_inf_bucket_gives_the_highest_finite_bound() {
        let b = h(&[(0.1, 10.0), (0.5, 50.0), (1.0, 90.0), (INF, 100.0)]);
        assert_eq!(histogram_quantile(0.99, &b), Some(1.0));
        assert_eq!(histogram_quantile(1.0, &b), Some(1.0));
        assert_eq!(
            histogram_quantile(0.9, &h(&[(1.0, 5.0), (INF, 10.0)])),
            Some(1.0)
        );
    }

    #[test]
    fn q_outside_zero_one_answers_before_looking_at_buckets() {
        for b in [h(&[]), h(&[(1.0, 1.0), (INF, 2.0)])] {
            assert!(histogram_quantile(f64::NAN, &b).unwrap().is_nan());
            assert_eq!(histogram_quantile(-0.1, &b), Some(f64::NEG_INFINITY));
            assert_eq!(histogram_quantile(1.01, &b), Some(INF));
        }
    }

    #[test]
    fn first_bucket_at_or_below_zero_returns_its_bound() {
        let b = h(&[(-1.0, 5.0), (1.0, 10.0), (INF, 10.0)]);
        assert_eq!(histogram_quantile(0.2, &b), Some(-1.0));
        let b = h(&[(0.0, 5.0), (1.0, 10.0), (INF, 10.0)]);
        assert_eq!(histogram_quantile(0.2, &b), Some(0.0));
        // Past the first bucket, negative bounds interpolate normally.
        let b = h(&[(-1.0, 5.0), (0.0, 8.0), (INF, 10.0)]);
        close(histogram_quantile(0.6, &b), -1.0 + 1.0 / 3.0);
    }

    #[test]
    fn no_answer_without_inf_bucket_observations_or_two_buckets() {
        assert_eq!(histogram_quantile(0.5, &h(&[])), None);
        assert_eq!(histogram_quantile(0.5, &h(&[(1.0, 3.0), (2.0, 4.0)])), None);
        assert_eq!(histogram_quantile(0.5, &h(&[(INF, 3.0)])), None);
        assert_eq!(histogram_quantile(0.5, &h(&[(1.0, 0.0), (INF, 0.0)])), None);
    }

    #[test]
    fn q_zero_with_an_empty_first_bucket_is_nan_as_in_prometheus() {
        let b = h(&[(1.0, 0.0), (2.0, 5.0), (INF, 5.0)]);
        assert!(histogram_quantile(0.0, &b).unwrap().is_nan());
        close(histogram_quantile(0.5, &b), 1.5);
    }

    #[test]
    fn unsorted_input_is_sorted_and_decreases_are_lifted() {
        let b = h(&[(INF, 12.0), (2.0, 8.0), (1.0, 10.0)]);
        // Seen as (1,10) (2,10) (+Inf,12).
        close(histogram_quantile(0.5, &b), 0.6);
        assert_eq!(histogram_quantile(0.9, &b), Some(2.0));
    }

    #[test]
    fn float_noise_is_flattened_before_searching() {
        let b = h(&[(1.0, 10.0), (2.0, 10.000000000005), (INF, 10.000000000005)]);
        // Without the correction the rank would land in (1, 2] and give 2.
        close(histogram_quantile(1.0, &b), 1.0);
    }

    #[test]
    fn equal_bounds_are_merged_by_adding_counts() {
        let b = h(&[(1.0, 3.0), (1.0, 2.0), (2.0, 5.0), (INF, 5.0)]);
        close(histogram_quantile(0.5, &b), 0.5);
    }

    #[test]
    fn floor_is_the_lower_edge_of_the_bucket_holding_the_rank() {
        // Five WAL fsyncs, one in (8 ms, 16 ms]: p99 interpolates to ~15.9 ms but is proven
        // only above 8 ms.
        let b = h(&[
            (0.001, 0.0),
            (0.002, 2.0),
            (0.004, 3.0),
            (0.008, 4.0),
            (0.016, 5.0),
            (0.032, 5.0),
            (INF, 5.0),
        ]);
        close(histogram_quantile(0.99, &b), 0.0156);
        assert_eq!(histogram_quantile_floor(0.99, &b), Some(0.008));
        assert_eq!(histogram_quantile_floor(0.2, &b), Some(0.001));
        // In +Inf: the highest finite bound, as the quantile itself; the first bucket proves
        // nothing above 0.
        let b = h(&[(0.1, 10.0), (0.5, 50.0), (1.0, 90.0), (INF, 100.0)]);
        assert_eq!(histogram_quantile_floor(0.05, &b), Some(0.0));
        assert_eq!(histogram_quantile_floor(0.99, &b), Some(1.0));
        assert_eq!(histogram_quantile_floor(0.5, &b), Some(0.1));
        // A negative first bound stays.
        let b = h(&[(-1.0, 5.0), (1.0, 10.0), (INF, 10.0)]);
        assert_eq!(histogram_quantile_floor(0.2, &b), Some(-1.0));
    }

    #[test]
    fn floor_has_no_answer_where_the_quantile_has_none() {
        assert_eq!(histogram_quantile_floor(0.5, &h(&[])), None);
        assert_eq!(
            histogram_quantile_floor(0.5, &h(&[(1.0, 0.0), (INF, 0.0)])),
            None
        );
        assert_eq!(
            histogram_quantile_floor(0.5, &h(&[(1.0, 3.0), (2.0, 4.0)])),
            None
        );
        assert_eq!(
            histogram_quantile_floor(1.5, &h(&[(1.0, 1.0), (INF, 2.0)])),
            None
        );
        assert_eq!(
            histogram_quantile_floor(f64::NAN, &h(&[(1.0, 1.0), (INF, 2.0)])),
            None
        );
    }
}
