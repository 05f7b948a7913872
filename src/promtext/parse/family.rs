//! One family being built: finding or creating a series by its identity, and setting the part of
//! it a sample line carries (value, bucket, `_sum`, `_count`).

use std::collections::{BTreeMap, HashMap};

use super::Part;
use crate::promtext::model::{Bucket, MetricFamily, MetricSeries, MetricValue};

pub(super) struct FamilyBuilder {
    pub(super) family: MetricFamily,
    pub(super) index: HashMap<Box<[u8]>, usize>,
    /// The key and index of the series of the previous line: consecutive bucket lines share it.
    pub(super) last_key: Vec<u8>,
    pub(super) last_series: Option<usize>,
    /// Kept only as the `_bucket`/`_sum`/`_count` of a selected family whose TYPE is not known yet.
    pub(super) provisional: bool,
    /// Joined into another family, or discarded: not output.
    pub(super) dead: bool,
}

impl FamilyBuilder {
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
        let i = match self.index.get(key) {
            Some(&i) => i,
            None => {
                self.family.series.push(MetricSeries {
                    labels: labels(),
                    ..MetricSeries::default()
                });
                let i = self.family.series.len() - 1;
                self.index.insert(key.into(), i);
                i
            }
        };
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.last_series = Some(i);
        i
    }
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
