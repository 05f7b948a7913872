//! `/metrics` dumps of kube-apiserver, etcd and extension API servers → `metrics` sources.
//!
//! A dump is streamed through [`crate::promtext::parse_reader`] keeping only
//! [`crate::bundle::metrics::default_selection`]. Which process wrote it is told from the families
//! it holds: `aggregator_*` only exists in kube-apiserver, `etcd_server_*`/`etcd_disk_*` only in
//! etcd, and an API server without the aggregator (or with `apiserver_delegated_*`) is an
//! extension server. A single dump has no window: its counters are the process's whole history, and
//! the source says so by leaving `window` unset.
//!
//! A bundle holds one source per target, so when several dumps of one target are supplied the
//! importer keeps one and records a gap for the others ([`choose`]).

use std::io::BufRead;

use crate::bundle::{Gap, GapReason, MetricFamily, MetricKind, MetricTarget, MetricsSource};

use super::state::{FileCtx, FileError, Importer, MetricsDump, Yield};

/// Read a dump.
pub(crate) fn read<R: BufRead>(
    imp: &mut Importer,
    file: &FileCtx,
    reader: R,
) -> Result<Yield, FileError> {
    let selection = crate::bundle::metrics::default_selection();
    let families = crate::promtext::parse_reader(reader, &selection)
        .map_err(|e| FileError::at(e.line, format!("malformed metrics: {}", e.message)))?;
    let has = |prefix: &str| families.iter().any(|f| f.name.starts_with(prefix));
    let target = if has("aggregator_") {
        MetricTarget::Apiserver
    } else if has("etcd_server_") || has("etcd_disk_") || has("etcd_mvcc_") {
        MetricTarget::Etcd
    } else if has("apiserver_delegated_") {
        MetricTarget::Extension
    } else if has("apiserver_") || has("etcd_request") {
        // An API server without an aggregator is an extension server (kube-apiserver always
        // reports aggregator_unavailable_apiservice for its local APIServices).
        MetricTarget::Extension
    } else {
        return Ok(Yield::Nothing(
            "Prometheus metrics without any family extpath reads (not kube-apiserver, etcd or an extension API server)"
                .into(),
        ));
    };
    if imp.bundle.collection.server_version.is_none() {
        imp.bundle.collection.server_version = build_info(&families);
    }
    let dump = MetricsDump {
        etcd_server_id: label_of(&families, "etcd_server_id", "server_id"),
        lateness: (
            single_value(&families, "process_start_time_seconds").unwrap_or(0.0),
            counter_sum(&families),
        ),
        reported_db_size: [
            "apiserver_storage_size_bytes",
            "apiserver_storage_db_total_size_in_bytes",
            "etcd_db_total_size_in_bytes",
        ]
        .iter()
        .find_map(|n| single_value(&families, n)),
        db_size: single_value(&families, "etcd_mvcc_db_total_size_in_bytes"),
        source: MetricsSource {
            target,
            origin: file.shown.clone(),
            scraped_at: None,
            window: None,
            families,
        },
    };
    imp.metrics.push(dump);
    Ok(Yield::Used)
}

fn family<'a>(families: &'a [MetricFamily], name: &str) -> Option<&'a MetricFamily> {
    families.iter().find(|f| f.name == name)
}

fn single_value(families: &[MetricFamily], name: &str) -> Option<f64> {
    family(families, name)?
        .series
        .iter()
        .find_map(|s| s.value.map(|v| v.0))
}

fn label_of(families: &[MetricFamily], name: &str, label: &str) -> Option<String> {
    family(families, name)?
        .series
        .iter()
        .find_map(|s| s.labels.get(label).cloned())
}

fn build_info(families: &[MetricFamily]) -> Option<crate::bundle::ServerVersion> {
    let s = family(families, "kubernetes_build_info")?.series.first()?;
    Some(crate::bundle::ServerVersion {
        git_version: s.labels.get("git_version")?.clone(),
        major: s.labels.get("major").cloned().unwrap_or_default(),
        minor: s.labels.get("minor").cloned().unwrap_or_default(),
    })
}

/// Sum of every counter and histogram count: a later dump of the same process is larger.
fn counter_sum(families: &[MetricFamily]) -> f64 {
    families
        .iter()
        .flat_map(|f| f.series.iter().map(move |s| (f.kind, s)))
        .map(|(kind, s)| match kind {
            MetricKind::Counter => s.value.map_or(0.0, |v| v.0),
            MetricKind::Histogram | MetricKind::Summary => s.count.map_or(0.0, |v| v.0),
            MetricKind::Gauge | MetricKind::Untyped => 0.0,
        })
        .filter(|v| v.is_finite())
        .sum()
}

/// Keep one dump per target; the others become gaps.
///
/// * Two dumps of one process (same target, and for etcd the same `server_id`): the later one —
///   the later process start, then the larger counters.
/// * Two different etcds: the one whose database size is closest to what kube-apiserver reports
///   for its own etcd; without a kube-apiserver dump, the larger database (an extension server's
///   own etcd holds a handful of keys, kube-apiserver's holds every built-in object).
pub(crate) fn choose(imp: &mut Importer) {
    let dumps = std::mem::take(&mut imp.metrics);
    let apiserver_db = dumps
        .iter()
        .filter(|d| d.target() == MetricTarget::Apiserver)
        .max_by(|a, b| later(a, b))
        .and_then(|d| d.reported_db_size);
    let mut groups: [Vec<MetricsDump>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for d in dumps {
        let slot = match d.target() {
            MetricTarget::Apiserver => 0,
            MetricTarget::Etcd => 1,
            MetricTarget::Extension => 2,
        };
        groups[slot].push(d);
    }
    for group in groups {
        let Some(best) = (0..group.len()).max_by(|&a, &b| {
            let (a, b) = (&group[a], &group[b]);
            if a.etcd_server_id == b.etcd_server_id {
                return later(a, b);
            }
            etcd_rank(a, apiserver_db)
                .partial_cmp(&etcd_rank(b, apiserver_db))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| later(a, b))
        }) else {
            continue;
        };
        let kept_origin = group[best].source.origin.clone();
        let kept_id = group[best].etcd_server_id.clone();
        for (i, d) in group.into_iter().enumerate() {
            if i == best {
                imp.bundle.metrics.push(d.source);
                continue;
            }
            let detail = if d.target() == MetricTarget::Etcd && d.etcd_server_id != kept_id {
                format!(
                    "/metrics of another etcd (server_id {}), most likely an extension API server's own storage; the bundle keeps kube-apiserver's etcd ({kept_origin})",
                    d.etcd_server_id.as_deref().unwrap_or("unknown"),
                )
            } else {
                format!(
                    "a second {} /metrics dump; kept the later one ({kept_origin})",
                    describe(d.target()),
                )
            };
            imp.bundle.gaps.push(Gap::new(
                format!("file:{}", d.source.origin),
                GapReason::Skipped,
                detail,
            ));
        }
    }
}

fn later(a: &MetricsDump, b: &MetricsDump) -> std::cmp::Ordering {
    a.lateness
        .partial_cmp(&b.lateness)
        .unwrap_or(std::cmp::Ordering::Equal)
}

/// Higher is more likely kube-apiserver's etcd; the same for every dump of other targets.
fn etcd_rank(d: &MetricsDump, apiserver_db: Option<f64>) -> f64 {
    if d.target() != MetricTarget::Etcd {
        return 0.0;
    }
    let size = d.db_size.unwrap_or(0.0);
    match apiserver_db {
        Some(reported) => -(size - reported).abs(),
        None => size,
    }
}

fn describe(t: MetricTarget) -> &'static str {
    match t {
        MetricTarget::Apiserver => "kube-apiserver",
        MetricTarget::Etcd => "etcd",
        MetricTarget::Extension => "extension API server",
    }
}
