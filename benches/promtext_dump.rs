//! A deterministic kube-apiserver-style `/metrics` dump of about 30 MB for the parser benchmarks,
//! shaped like the one measured in STACK.md §3: a few very large histograms in the shape of
//! `apiserver_request_duration_seconds` (labels `component,dry_run,group,resource,scope,
//! subresource,verb,version` + 24 buckets), `apiserver_request_total` with thousands of series,
//! webhook counters, and hundreds of small families with HELP/TYPE — the 40 families the rules
//! read among them ([`RULES_SELECTION`]).
//!
//! Shared by the throughput bench (`promtext.rs`) and the memory bench (`promtext_memory.rs`).

#![allow(dead_code)]

use std::io::{self, Write};

/// The families the rules read (REFERENCE.md §3): the selection of a live collection.
pub const RULES_SELECTION: [&str; 40] = [
    "apiserver_request_total",
    "apiserver_request_duration_seconds",
    "apiserver_request_terminations_total",
    "apiserver_request_aborts_total",
    "aggregator_unavailable_apiservice",
    "aggregator_unavailable_apiservice_total",
    "apiserver_admission_webhook_rejection_count",
    "apiserver_admission_webhook_request_total",
    "apiserver_admission_webhook_admission_duration_seconds",
    "apiserver_admission_webhook_fail_open_count",
    "apiserver_admission_controller_admission_duration_seconds",
    "apiserver_admission_step_admission_duration_seconds",
    "apiserver_flowcontrol_rejected_requests_total",
    "apiserver_flowcontrol_request_wait_duration_seconds",
    "apiserver_flowcontrol_request_execution_seconds",
    "apiserver_flowcontrol_dispatched_requests_total",
    "apiserver_flowcontrol_current_inqueue_requests",
    "apiserver_current_inflight_requests",
    "apiserver_delegated_authn_request_total",
    "apiserver_delegated_authz_request_total",
    "apiserver_authorization_decisions_total",
    "authentication_duration_seconds",
    "authorization_attempts_total",
    "apiserver_tls_handshake_errors_total",
    "apiserver_conversion_webhook_request_total",
    "apiserver_conversion_webhook_duration_seconds",
    "apiserver_terminated_watchers_total",
    "apiserver_watch_events_total",
    "apiserver_watch_cache_events_dispatched_total",
    "apiserver_watch_cache_initializations_total",
    "apiserver_storage_objects",
    "apiserver_storage_list_total",
    "apiserver_storage_decode_errors_total",
    "etcd_request_duration_seconds",
    "etcd_requests_total",
    "etcd_request_errors_total",
    "etcd_bookmark_counts",
    "apiserver_client_certificate_expiration_seconds",
    "process_start_time_seconds",
    "apiserver_dropped_requests_total",
];

/// The big histograms: the bulk of a real `/metrics`, and only the first is selected.
const BIG_HISTOGRAMS: [&str; 8] = [
    "apiserver_request_duration_seconds",
    "apiserver_request_sli_duration_seconds",
    "apiserver_request_slo_duration_seconds",
    "apiserver_response_sizes",
    "apiserver_watch_list_duration_seconds",
    "apiserver_request_body_size_bytes",
    "apiserver_watch_events_sizes",
    "apiserver_request_filter_duration_seconds",
];

const BUCKETS: [&str; 24] = [
    "0.005", "0.025", "0.05", "0.1", "0.2", "0.4", "0.6", "0.8", "1", "1.25", "1.5", "2", "3", "4",
    "5", "6", "8", "10", "15", "20", "30", "45", "60", "+Inf",
];

const VERBS: [&str; 8] = [
    "GET", "LIST", "WATCH", "CREATE", "UPDATE", "PATCH", "DELETE", "APPLY",
];

/// xorshift64*: reproducible values without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `(group, version, resource, namespaced)` for 85 resources.
fn resources() -> Vec<(String, &'static str, String, bool)> {
    let core = [
        "pods",
        "services",
        "configmaps",
        "secrets",
        "endpoints",
        "events",
        "namespaces",
        "nodes",
        "serviceaccounts",
        "persistentvolumeclaims",
    ];
    let mut out: Vec<_> = core
        .iter()
        .map(|r| {
            (
                String::new(),
                "v1",
                r.to_string(),
                *r != "namespaces" && *r != "nodes",
            )
        })
        .collect();
    for g in 0..15 {
        for r in 0..5 {
            out.push((
                format!("group{g}.example.k8s.io"),
                ["v1", "v1beta1"][r % 2],
                format!("widgets{r}"),
                r % 3 != 0,
            ));
        }
    }
    out
}

fn family_header(out: &mut impl Write, name: &str, kind: &str) -> io::Result<()> {
    writeln!(
        out,
        "# HELP {name} [STABLE] Synthetic {kind} shaped like kube-apiserver's {name}."
    )?;
    writeln!(out, "# TYPE {name} {kind}")
}

fn request_labels(
    group: &str,
    version: &str,
    resource: &str,
    namespaced: bool,
    verb: &str,
    sub: &str,
) -> String {
    let scope = if verb == "LIST" || !namespaced {
        "cluster"
    } else {
        "namespace"
    };
    format!(
        "component=\"apiserver\",dry_run=\"\",group=\"{group}\",resource=\"{resource}\",scope=\"{scope}\",subresource=\"{sub}\",verb=\"{verb}\",version=\"{version}\""
    )
}

fn histogram(
    out: &mut impl Write,
    name: &str,
    labels: &str,
    rng: &mut Rng,
    bounds: &[&str],
) -> io::Result<()> {
    let mut cumulative = rng.below(50);
    let sep = if labels.is_empty() { "" } else { "," };
    for le in bounds {
        cumulative += rng.below(400);
        writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
        )?;
    }
    let sum = cumulative as f64 * 0.0137;
    if labels.is_empty() {
        writeln!(out, "{name}_sum {sum}")?;
        writeln!(out, "{name}_count {cumulative}")
    } else {
        writeln!(out, "{name}_sum{{{labels}}} {sum}")?;
        writeln!(out, "{name}_count{{{labels}}} {cumulative}")
    }
}

/// A small family of the rules' selection or a filler: kind from its name, a few label sets.
fn small_family(out: &mut impl Write, name: &str, rng: &mut Rng) -> io::Result<()> {
    let kind = if name.ends_with("_seconds") {
        "histogram"
    } else if name.ends_with("_total") || name.ends_with("_count") {
        "counter"
    } else {
        "gauge"
    };
    family_header(out, name, kind)?;
    let series = 1 + rng.below(12);
    for i in 0..series {
        let labels = format!(
            "code=\"{}\",name=\"item-{i}.example.io\",reason=\"r{}\"",
            200 + 100 * (i % 4),
            i % 3
        );
        match kind {
            "histogram" => histogram(out, name, &labels, rng, &BUCKETS[..12])?,
            _ => writeln!(out, "{name}{{{labels}}} {}", rng.below(100_000))?,
        }
    }
    Ok(())
}

/// Write the dump; returns the number of bytes written (about 30 MB).
pub fn write_dump(out: &mut impl Write) -> io::Result<u64> {
    let mut counted = CountingWriter {
        inner: out,
        bytes: 0,
    };
    let out = &mut counted;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let resources = resources();
    let mut small = RULES_SELECTION
        .iter()
        .filter(|n| {
            !BIG_HISTOGRAMS.contains(n)
                && **n != "apiserver_request_total"
                && **n != "etcd_request_duration_seconds"
        })
        .map(|n| n.to_string())
        .collect::<Vec<_>>();
    for i in small.len()..300 {
        let suffix = ["_total", "_seconds", "_bytes", "_count"][i % 4];
        small.push(format!(
            "kube_component{}_synthetic_metric{i}{suffix}",
            i % 17
        ));
    }
    // Families interleave as in a real dump (alphabetical-ish by subsystem): small ones between
    // the big ones.
    let chunk = small.len().div_ceil(BIG_HISTOGRAMS.len());
    for (h, big) in BIG_HISTOGRAMS.iter().enumerate() {
        for name in small.iter().skip(h * chunk).take(chunk) {
            small_family(out, name, &mut rng)?;
        }
        family_header(out, big, "histogram")?;
        for (group, version, resource, namespaced) in &resources {
            for verb in VERBS {
                let sub = if verb == "UPDATE" && rng.below(2) == 0 {
                    "status"
                } else {
                    ""
                };
                let labels = request_labels(group, version, resource, *namespaced, verb, sub);
                histogram(out, big, &labels, &mut rng, &BUCKETS)?;
            }
        }
    }
    family_header(out, "apiserver_request_total", "counter")?;
    for (group, version, resource, namespaced) in &resources {
        for verb in VERBS {
            for code in ["200", "201", "404", "409", "500", "503"] {
                let labels = request_labels(group, version, resource, *namespaced, verb, "");
                writeln!(
                    out,
                    "apiserver_request_total{{code=\"{code}\",{labels}}} {}",
                    rng.below(1 << 20)
                )?;
            }
        }
    }
    family_header(
        out,
        "apiserver_admission_webhook_rejection_count_by_name",
        "counter",
    )?;
    for i in 0..200 {
        writeln!(
            out,
            "apiserver_admission_webhook_rejection_count_by_name{{error_type=\"calling_webhook_error\",name=\"hook{i}.example.io\",operation=\"CREATE\",rejection_code=\"400\",type=\"validating\"}} {}",
            rng.below(1000)
        )?;
    }
    family_header(out, "etcd_request_duration_seconds", "histogram")?;
    for (group, _, resource, _) in &resources {
        for op in ["get", "list", "create", "update"] {
            let labels = format!("operation=\"{op}\",type=\"*{group}.{resource}\"");
            histogram(
                out,
                "etcd_request_duration_seconds",
                &labels,
                &mut rng,
                &BUCKETS,
            )?;
        }
    }
    Ok(counted.bytes)
}

/// Write the dump into memory.
pub fn dump_string() -> String {
    let mut buf = Vec::with_capacity(32 << 20);
    write_dump(&mut buf).expect("writing to memory");
    String::from_utf8(buf).expect("the dump is ASCII")
}

struct CountingWriter<'w, W: Write> {
    inner: &'w mut W,
    bytes: u64,
}

impl<W: Write> Write for CountingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
