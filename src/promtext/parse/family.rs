//! One family being built: finding or creating a series by its identity, and setting the part of
//! it a sample line carries (value, bucket, `_sum`, `_count`).

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, RandomState};

use super::Part;
use crate::promtext::model::{Bucket, MetricFamily, MetricSeries, MetricValue};

pub(super) struct FamilyBuilder {
    pub(super) family: MetricFamily,
    /// Series by the hash of their identity (the key of `lex::push_key_pair`). Keeping the keys
    /// themselves would store every label a second time — most of a parse's memory — so a hit is
    /// confirmed against the series' labels instead, and a collision falls back to a scan.
    index: HashMap<u64, usize>,
    /// Randomly seeded per family: label values come from a server nobody controls, and with a
    /// fixed hash a body crafted to collide would turn every lookup into the fallback scan.
    hasher: RandomState,
    /// The key and index of the series of the previous line: consecutive bucket lines share it.
    last_key: Vec<u8>,
    last_series: Option<usize>,
    /// Kept only as the `_bucket`/`_sum`/`_count` of a selected family whose TYPE is not known yet.
    pub(super) provisional: bool,
    /// Joined into another family, or discarded: not output.
    pub(super) dead: bool,
}

impl FamilyBuilder {
    pub(super) fn new(family: MetricFamily, provisional: bool) -> Self {
        FamilyBuilder {
            family,
            index: HashMap::new(),
            hasher: RandomState::new(),
            last_key: Vec::new(),
            last_series: None,
            provisional,
            dead: false,
        }
    }

    /// The index of the series with identity `key`, created with `labels()` if new. The series of
    /// the previous line is checked first: consecutive bucket lines share it.
    pub(super) fn series_for(
        &mut self,
        key: &[u8],
        labels: impl FnOnce() -> BTreeMap<String, String>,
    ) -> usize {
        if let Some(i) = self.last_series
            && self.last_key == key
        {
            return i;
        }
        let series = &mut self.family.series;
        let hash = self.hasher.hash_one(key);
        let found = match self.index.get(&hash) {
            Some(&i) if key_matches(&series[i].labels, key) => Some(i),
            Some(_) => series.iter().position(|s| key_matches(&s.labels, key)),
            None => None,
        };
        let i = found.unwrap_or_else(|| {
            // Series of a histogram family share their bucket layout: size for the last one's.
            let buckets = series.last().map_or(0, |s| s.buckets.len());
            series.push(MetricSeries {
                labels: labels(),
                buckets: Vec::with_capacity(buckets),
                ..MetricSeries::default()
            });
            let i = series.len() - 1;
            self.index.entry(hash).or_insert(i);
            i
        });
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.last_series = Some(i);
        i
    }
}

/// Whether `labels` are the identity `key` (pairs in name order, as a `BTreeMap` iterates them).
fn key_matches(labels: &BTreeMap<String, String>, mut key: &[u8]) -> bool {
    for (name, value) in labels {
        let rest = key
            .strip_prefix(name.as_bytes())
            .and_then(|r| r.strip_prefix(&[0xFF]))
            .and_then(|r| r.strip_prefix(value.as_bytes()))
            .and_then(|r| r.strip_prefix(&[0xFE]));
        match rest {
            Some(r) => key = r,
            None => return false,
        }
    }
    key.is_empty()
}

/// Set the part of `series` a sample carries; `le` is the bound of a bucket sample.
pub(super) fn set_part(series: &mut MetricSeries, part: Part, value: f64, le: Option<f64>) {
    let v = MetricValue(value);
    match part {
        Part::Value => series.value = Some(v),
        Part::Sum => series.sum = Some(v),
        Part::Count => series.count = Some(v),
        Part::Bucket => {
            let le = MetricValue(le.unwrap_or(f64::INFINITY));
            // Buckets are kept sorted by `le`; they usually arrive in that order, so appending is
            // the common case and the search only runs for duplicates or out-of-order lines.
            let buckets = &mut series.buckets;
            if buckets.last().is_none_or(|last| last.le.0 < le.0) {
                buckets.push(Bucket { le, count: v });
            } else {
                match buckets.binary_search_by(|b| b.le.0.total_cmp(&le.0)) {
                    Ok(i) => buckets[i].count = v,
                    Err(i) => buckets.insert(i, Bucket { le, count: v }),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::promtext::lex::push_key_pair;

    fn key(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut k = Vec::new();
        for (n, v) in pairs {
            push_key_pair(&mut k, n, v);
        }
        k
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_match_exactly_their_label_sets() {
        let l = labels(&[("a", "1"), ("b", "")]);
        assert!(key_matches(&l, &key(&[("a", "1"), ("b", "")])));
        assert!(!key_matches(&l, &key(&[("a", "1")])));
        assert!(!key_matches(&l, &key(&[("a", "1"), ("b", ""), ("c", "")])));
        assert!(!key_matches(&l, &key(&[("a", "1b"), ("b", "")])));
        assert!(key_matches(&labels(&[]), &[]));
    }

    #[test]
    fn a_hash_collision_still_finds_the_right_series() {
        let mut b = FamilyBuilder::new(MetricFamily::default(), false);
        let (ka, kb) = (key(&[("x", "a")]), key(&[("x", "b")]));
        let a = b.series_for(&ka, || labels(&[("x", "a")]));
        let bi = b.series_for(&kb, || labels(&[("x", "b")]));
        // Point b's hash at a, as a collision of the two hashes would.
        b.index.insert(b.hasher.hash_one(&kb), a);
        b.last_series = None;
        assert_eq!(b.series_for(&kb, || labels(&[("x", "new b")])), bi);
        assert_eq!(b.series_for(&ka, || labels(&[("x", "new a")])), a);
        assert_eq!(b.family.series.len(), 2, "no series was created twice");
        // A third identity colliding with a is a new series.
        let kc = key(&[("x", "c")]);
        b.index.insert(b.hasher.hash_one(&kc), a);
        let c = b.series_for(&kc, || labels(&[("x", "c")]));
        assert_eq!((c, b.family.series.len()), (2, 3));
        assert_eq!(b.series_for(&kc, || labels(&[("x", "again")])), c);
    }
}
