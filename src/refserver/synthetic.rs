//! Synthetic `/metrics` volume, for benchmarks that need a large cluster's exposition.
//!
//! A busy kube-apiserver's `/metrics` runs to tens of megabytes, most of it
//! `apiserver_request_duration_seconds` buckets for every verb × resource × group. A scenario can ask
//! for that volume (`server.syntheticMetricsBytes`): the server appends families shaped like those
//! (real names of families extpath reads are avoided, so the padding never changes a verdict — it
//! only costs what a real exposition costs to transfer and parse). Generated once, at start-up.

use std::fmt::Write;

const BUCKETS: [&str; 23] = [
    "0.005", "0.025", "0.05", "0.1", "0.2", "0.4", "0.6", "0.8", "1", "1.25", "1.5", "2", "3", "4",
    "5", "6", "8", "10", "15", "20", "30", "45", "60",
];
const VERBS: [&str; 8] = [
    "GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE", "APPLY",
];

/// About `bytes` of exposition text: histogram families `apiserver_synthetic_<n>_seconds` with
/// kube-apiserver's request label set, plus a counter per family.
pub fn exposition(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 4096);
    let mut family = 0usize;
    while out.len() < bytes {
        let name = format!("apiserver_synthetic_{family}_request_duration_seconds");
        let _ = writeln!(
            out,
            "# HELP {name} [ALPHA] Synthetic padding shaped like apiserver_request_duration_seconds."
        );
        let _ = writeln!(out, "# TYPE {name} histogram");
        'series: for resource in 0..200 {
            for verb in VERBS {
                let labels = format!(
                    "component=\"apiserver\",dry_run=\"\",group=\"group{family}.example.com\",resource=\"resource{resource}\",scope=\"namespace\",subresource=\"\",verb=\"{verb}\",version=\"v1\""
                );
                let mut cumulative = 0u64;
                for (i, le) in BUCKETS.iter().enumerate() {
                    cumulative += (resource as u64 + i as u64) % 7;
                    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
                }
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {cumulative}");
                let _ = writeln!(out, "{name}_sum{{{labels}}} {}.5", cumulative * 3);
                let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
                if out.len() >= bytes {
                    break 'series;
                }
            }
        }
        family += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_is_valid_exposition_of_the_asked_size() {
        let text = exposition(200_000);
        assert!(
            text.len() >= 200_000 && text.len() < 210_000,
            "{}",
            text.len()
        );
        let fams = crate::promtext::parse_str(&text, &crate::promtext::Selection::all()).unwrap();
        assert!(
            fams.iter()
                .all(|f| f.name.starts_with("apiserver_synthetic_"))
        );
        // None of it is a family extpath reads.
        let selected =
            crate::promtext::parse_str(&text, &crate::bundle::metrics::default_selection())
                .unwrap();
        assert!(selected.is_empty());
    }
}
