//! The known families ([`crate::bundle::metrics::KNOWN_FAMILIES`]) as the Prometheus reader uses
//! them: their types let Prometheus-compatible stores without metadata (no `/api/v1/metadata`) be
//! read right, and they make the per-family PromQL reference in `docs/prometheus.md`
//! ([`reference()`]). The kinds are checked by a test against the real captures under
//! `fixtures/raw/`. Families of the selection's prefixes
//! that are not listed here are still read — typed by metadata, or by their names.

use std::time::Duration;

use crate::bundle::metrics::{KNOWN_FAMILIES as KNOWN, KnownFamily as Known};
use crate::promtext::MetricKind;

use super::promql::{FamilyPlan, Selector, query, range};
use super::{DEFAULT_APISERVER_SELECTOR, DEFAULT_ETCD_SELECTOR, DEFAULT_SINCE};

/// The known kind of a family, if it is listed (under any release's name).
pub fn known_kind(name: &str) -> Option<MetricKind> {
    crate::bundle::metrics::known_family(name).map(|k| k.kind)
}

/// How a family's instances are combined.
fn aggregation(k: &Known) -> &'static str {
    match k.kind {
        MetricKind::Counter | MetricKind::Histogram | MetricKind::Summary => "sum",
        _ => super::promql::gauge_aggregation(k.name),
    }
}

/// The generated part of `docs/prometheus.md`: the full query of each shape, what each part
/// becomes in the bundle, then one row per known family.
pub fn reference() -> String {
    let mut out = String::new();
    out.push_str(
        "### The query of each shape\n\n\
         As sent for the default selectors and `--since 10m` (one line each; `or` joins the parts):\n\n",
    );
    let apiserver = Selector::parse(DEFAULT_APISERVER_SELECTOR).expect("the default parses");
    let etcd = Selector::parse(DEFAULT_ETCD_SELECTOR).expect("the default parses");
    for (what, plan, sel) in [
        ("Counter", "apiserver_request_total", &apiserver),
        ("Histogram", "etcd_request_duration_seconds", &apiserver),
        ("Gauge", "etcd_server_has_leader", &etcd),
    ] {
        let kind = known_kind(plan).expect("listed");
        let q = query(
            &FamilyPlan {
                name: plan.to_string(),
                kind,
                help: None,
            },
            sel,
            DEFAULT_SINCE,
        );
        out.push_str(&format!("{what} (`{plan}`):\n\n```promql\n{q}\n```\n\n"));
    }
    out.push_str(&format!(
        "### What each part becomes\n\n\
         `X` is the family, `S` the target's selector, `R` the range (`--since`, e.g. `{}`); each \
         expression is aggregated over the target labels with the family's aggregation (next \
         table).\n\n\
         | type | PromQL | bundle field of the series |\n|---|---|---|\n\
         | counter | `increase(X{{S}}[R])` | `window.delta`; ÷ R seconds: `window.rate` |\n\
         | counter | `X{{S}}` | `value` (cumulative at `--until`) |\n\
         | counter | `resets(X{{S}}[R])` | `window.reset` when > 0 |\n\
         | histogram | `increase(X_bucket{{S}}[R])` per `le` | `window.buckets` |\n\
         | histogram | `increase(X_count{{S}}[R])` | `window.count_delta`, `window.delta`; ÷ R seconds: `window.rate` |\n\
         | histogram | `increase(X_sum{{S}}[R])` | `window.sum_delta` |\n\
         | histogram | `X_bucket{{S}}`, `X_sum{{S}}`, `X_count{{S}}` | `buckets`, `sum`, `count` (cumulative) |\n\
         | histogram | `resets(X_count{{S}}[R])` | `window.reset` when > 0 |\n\
         | gauge | `X{{S}}` | `value` |\n\n",
        range(Duration::from_secs(600)),
    ));
    out.push_str(&format!(
        "### Per family\n\n\
         Selectors: apiserver `{}`, etcd `{}`.\n\n\
         | rule input | family | type | target | across instances | other releases |\n|---|---|---|---|---|---|\n",
        DEFAULT_APISERVER_SELECTOR.replace('|', "\\|"),
        DEFAULT_ETCD_SELECTOR.replace('|', "\\|"),
    ));
    let mut rows: Vec<&Known> = KNOWN.iter().collect();
    rows.sort_by_key(|k| (k.layer, k.name));
    for k in rows {
        let also: Vec<String> = k
            .also
            .iter()
            .map(|(n, when)| format!("`{n}` ({when})"))
            .collect();
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | `{}` | {} |\n",
            k.layer,
            k.name,
            k.kind.as_str(),
            if k.etcd { "etcd" } else { "apiserver" },
            aggregation(k),
            also.join("; ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_family_is_selected() {
        let sel = crate::bundle::metrics::default_selection();
        for k in KNOWN {
            for name in k.names() {
                assert!(sel.wants(name), "{name} is not selected");
            }
        }
    }

    /// The types are the real servers': every selected family of the captured kube-apiserver
    /// and etcd `/metrics` is listed, with the type it was exposed with.
    #[test]
    fn the_captures_agree_with_the_table() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/raw");
        let mut seen = 0;
        for case in std::fs::read_dir(&root).unwrap() {
            for file in ["kube-apiserver-metrics.txt", "etcd-main-metrics.txt"] {
                let path = case.as_ref().unwrap().path().join(file);
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                let families =
                    crate::promtext::parse_str(&text, &crate::bundle::metrics::default_selection())
                        .unwrap();
                for f in families {
                    seen += 1;
                    assert_eq!(
                        known_kind(&f.name),
                        Some(f.kind),
                        "{}: {} is missing or typed differently",
                        path.display(),
                        f.name
                    );
                }
            }
        }
        assert!(seen > 100, "only {seen} families read from the captures");
    }
}
