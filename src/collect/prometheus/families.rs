//! The families extpath reads, with their types and the layer whose rules read them: the types
//! let Prometheus-compatible stores without metadata (no `/api/v1/metadata`) be read right, and
//! the table is the per-family PromQL reference in `docs/prometheus.md` ([`reference`]).
//!
//! The kinds are those of kube-apiserver and etcd as they expose them (REFERENCE §3, checked by a
//! test against the real captures under `fixtures/raw/`). Families of the selection's prefixes
//! that are not listed here are still read — typed by metadata, or by their names.

use std::time::Duration;

use crate::promtext::MetricKind;
use MetricKind::{Counter as C, Gauge as G, Histogram as H};

use super::promql::{FamilyPlan, Selector, query, range};
use super::{DEFAULT_APISERVER_SELECTOR, DEFAULT_ETCD_SELECTOR, DEFAULT_SINCE};

/// One known family: name, type, the layer whose rules read it, and whose process exposes it
/// (`true` for etcd's own).
pub struct Known {
    /// Family name.
    pub name: &'static str,
    /// Type as exposed.
    pub kind: MetricKind,
    /// The layer (rule input) it serves.
    pub layer: &'static str,
    /// Exposed by etcd itself (read with the etcd selector).
    pub etcd: bool,
}

const fn k(name: &'static str, kind: MetricKind, layer: &'static str) -> Known {
    Known {
        name,
        kind,
        layer,
        etcd: false,
    }
}

const fn e(name: &'static str, kind: MetricKind) -> Known {
    Known {
        name,
        kind,
        layer: "Storage (etcd)",
        etcd: true,
    }
}

/// The known families, in the order of the selection (`bundle::metrics::default_selection`).
pub const KNOWN: &[Known] = &[
    k("process_start_time_seconds", G, "Identity"),
    k("kubernetes_build_info", G, "Identity"),
    k("apiserver_request_total", C, "All layers"),
    k("apiserver_request_terminations_total", C, "All layers"),
    k("apiserver_dropped_requests_total", C, "APF"),
    k("apiserver_current_inflight_requests", G, "APF"),
    k("apiserver_tls_handshake_errors_total", C, "Auth"),
    k(
        "apiserver_crd_conversion_webhook_duration_seconds",
        H,
        "Admission",
    ),
    k("apiserver_flowcontrol_rejected_requests_total", C, "APF"),
    k("apiserver_flowcontrol_dispatched_requests_total", C, "APF"),
    k("apiserver_flowcontrol_current_inqueue_requests", G, "APF"),
    k("apiserver_flowcontrol_current_executing_requests", G, "APF"),
    k("apiserver_flowcontrol_current_executing_seats", G, "APF"),
    k(
        "apiserver_flowcontrol_request_wait_duration_seconds",
        H,
        "APF",
    ),
    k("apiserver_flowcontrol_request_concurrency_limit", G, "APF"),
    k("apiserver_flowcontrol_nominal_limit_seats", G, "APF"),
    k("etcd_request_duration_seconds", H, "Storage"),
    k("etcd_requests_total", C, "Storage"),
    k("etcd_request_errors_total", C, "Storage"),
    k("apiserver_storage_objects", G, "Storage"),
    k("apiserver_resource_objects", G, "Storage"),
    k("apiserver_storage_size_bytes", G, "Storage"),
    k("apiserver_storage_db_total_size_in_bytes", G, "Storage"),
    k("etcd_db_total_size_in_bytes", G, "Storage"),
    k("etcd_object_counts", G, "Storage"),
    k("apiserver_terminated_watchers_total", C, "Watch"),
    k("apiserver_watch_cache_read_wait_seconds", H, "Watch"),
    k("authentication_attempts", C, "Auth"),
    k("authorization_attempts_total", C, "Auth"),
    k("apiserver_authorization_decisions_total", C, "Auth"),
    k("apiserver_client_certificate_expiration_seconds", H, "Auth"),
    e("etcd_disk_wal_fsync_duration_seconds", H),
    e("etcd_disk_backend_commit_duration_seconds", H),
    e("etcd_server_has_leader", G),
    e("etcd_server_is_leader", G),
    e("etcd_server_leader_changes_seen_total", C),
    e("etcd_server_proposals_failed_total", C),
    e("etcd_server_slow_apply_total", C),
    e("etcd_server_heartbeat_send_failures_total", C),
    e("etcd_server_quota_backend_bytes", G),
    e("etcd_mvcc_db_total_size_in_bytes", G),
    e("etcd_mvcc_db_total_size_in_use_in_bytes", G),
    e("etcd_network_peer_round_trip_time_seconds", H),
    e("etcd_network_peer_sent_failures_total", C),
    e("etcd_server_version", G),
    e("etcd_cluster_version", G),
    e("etcd_server_id", G),
    k("aggregator_unavailable_apiservice", G, "Aggregation"),
    k("aggregator_unavailable_apiservice_total", C, "Aggregation"),
    k("aggregator_openapi_v2_regeneration_count", C, "Aggregation"),
    k(
        "aggregator_openapi_v2_regeneration_duration",
        G,
        "Aggregation",
    ),
    k(
        "apiserver_kube_aggregator_x509_missing_san_total",
        C,
        "Aggregation",
    ),
    k(
        "apiserver_kube_aggregator_x509_insecure_sha1_total",
        C,
        "Aggregation",
    ),
    k(
        "apiserver_admission_webhook_admission_duration_seconds",
        H,
        "Admission",
    ),
    k(
        "apiserver_admission_webhook_rejection_count",
        C,
        "Admission",
    ),
    k("apiserver_admission_webhook_request_total", C, "Admission"),
    k(
        "apiserver_admission_webhook_fail_open_count",
        C,
        "Admission",
    ),
    k("apiserver_webhooks_x509_missing_san_total", C, "Admission"),
    k(
        "apiserver_webhooks_x509_insecure_sha1_total",
        C,
        "Admission",
    ),
    k(
        "apiserver_conversion_webhook_duration_seconds",
        H,
        "Admission",
    ),
    k("apiserver_conversion_webhook_request_total", C, "Admission"),
    k(
        "apiserver_authorization_webhook_evaluations_total",
        C,
        "Auth",
    ),
    k(
        "apiserver_authorization_webhook_duration_seconds",
        H,
        "Auth",
    ),
    k(
        "apiserver_authorization_webhook_evaluations_fail_open_total",
        C,
        "Auth",
    ),
    k("apiserver_delegated_authn_request_total", C, "Auth"),
    k(
        "apiserver_delegated_authn_request_duration_seconds",
        H,
        "Auth",
    ),
    k("apiserver_delegated_authz_request_total", C, "Auth"),
    k(
        "apiserver_delegated_authz_request_duration_seconds",
        H,
        "Auth",
    ),
];

/// The known kind of a family, if it is listed.
pub fn known_kind(name: &str) -> Option<MetricKind> {
    KNOWN.iter().find(|k| k.name == name).map(|k| k.kind)
}

fn kind_name(kind: MetricKind) -> &'static str {
    match kind {
        MetricKind::Counter => "counter",
        MetricKind::Gauge => "gauge",
        MetricKind::Histogram => "histogram",
        MetricKind::Summary => "summary",
        MetricKind::Untyped => "untyped",
    }
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
         | rule input | family | type | target | across instances |\n|---|---|---|---|---|\n",
        DEFAULT_APISERVER_SELECTOR.replace('|', "\\|"),
        DEFAULT_ETCD_SELECTOR.replace('|', "\\|"),
    ));
    let mut rows: Vec<&Known> = KNOWN.iter().collect();
    rows.sort_by_key(|k| (k.layer, k.name));
    for k in rows {
        out.push_str(&format!(
            "| {} | `{}` | {} | {} | `{}` |\n",
            k.layer,
            k.name,
            kind_name(k.kind),
            if k.etcd { "etcd" } else { "apiserver" },
            aggregation(k)
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
            assert!(sel.wants(k.name), "{} is not selected", k.name);
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
