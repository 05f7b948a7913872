//! What happens around each store operation, between the REST handlers and [`super::store`]: the
//! scenario's injected storage faults and the etcd metrics kube-apiserver's storage layer records.
//! It does not hold objects (the store does) nor serve etcd's own `/metrics`
//! ([`super::etcd_metrics_server`]).
//!
//! Every store operation of a request goes through [`storage_op`], which applies the scenario's
//! faults for that resource and operation (added latency, holding until the test releases it, an
//! etcd error such as `etcdserver: request timed out`), and records what kube-apiserver's etcd3
//! storage records: `etcd_request_duration_seconds{operation,type}` (type is the Go type,
//! `*core.ConfigMap`), `etcd_requests_total`, `etcd_request_errors_total` (the buckets and whether
//! the counters exist are the release's: `profile.rs`). An error reaches the
//! client the way `ErrorToAPIStatus` renders a plain error: 500, no reason, the etcd text.
//! It also owns `apiserver_storage_objects` and the readiness of the `etcd` check.

use std::time::Instant;

use super::metrics::Desc;
use super::registry::ResourceDef;
use super::scenario::StorageFault;
use super::state::State;
use super::status::ApiError;

// Names, help texts (stability prefix included) and labels are kube-apiserver 1.30's
// (`apiserver pkg/storage/etcd3/metrics/metrics.go`, REFERENCE §3), so a scrape of the reference
// server parses and reads like a real one.
const ETCD_DURATION: Desc = Desc {
    name: "etcd_request_duration_seconds",
    help: "[ALPHA] Etcd request latency in seconds for each operation and object type.",
    labels: &["operation", "type"],
};
const ETCD_TOTAL: Desc = Desc {
    name: "etcd_requests_total",
    help: "[ALPHA] Etcd request counts for each operation and object type.",
    labels: &["operation", "type"],
};
const ETCD_ERRORS: Desc = Desc {
    name: "etcd_request_errors_total",
    help: "[ALPHA] Etcd failed request counts for each operation and object type.",
    labels: &["operation", "type"],
};
const STORAGE_OBJECTS: Desc = Desc {
    name: "apiserver_storage_objects",
    help: "[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
    labels: &["resource"],
};

fn applies(f: &StorageFault, def: &ResourceDef, op: &str) -> bool {
    (f.resource == "*" || f.resource == def.resource)
        && f.group.as_deref().is_none_or(|g| g == def.group)
        && (f.operations.is_empty() || f.operations.iter().any(|o| o == op))
}

/// Run the faults of one storage operation and record its metrics.
///
/// # Errors
/// The injected etcd error, as a reason-less 500.
pub async fn storage_op(state: &State, def: &ResourceDef, op: &str) -> Result<(), ApiError> {
    let started = Instant::now();
    // Faults add up (latency plus an error is a slow failure); the first error named wins, so a
    // scenario's order decides which text the client sees.
    let mut error = None;
    for f in state
        .scenario
        .faults
        .storage
        .iter()
        .filter(|f| applies(f, def, op))
    {
        if f.latency_ms > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(f.latency_ms)).await;
        }
        // A hold models an etcd that does not answer until something changes (capture 13 froze
        // it with SIGSTOP for 34 s), which a fixed sleep cannot: the test releases it.
        if f.hold {
            let mut rx = state.storage.release.subscribe();
            let _ = rx.wait_for(|released| *released).await;
        }
        if error.is_none() {
            error = f.error.clone();
        }
    }
    // Recorded for failed operations too, as the etcd3 store does: in capture 13 the stall shows
    // as `etcd_request_duration_seconds` growing (sum 3.1 s → 614 s) while the writes got 504s.
    let labels = [op, def.go_type.as_str()];
    state.observability.metrics.observe(
        &ETCD_DURATION,
        state.profile.etcd_request_buckets(),
        &labels,
        started.elapsed().as_secs_f64(),
    );
    let counters = state.profile.has_etcd_request_counters();
    if counters {
        state.observability.metrics.inc(&ETCD_TOTAL, &labels);
    }
    match error {
        Some(e) => {
            if counters {
                state.observability.metrics.inc(&ETCD_ERRORS, &labels);
            }
            Err(ApiError::plain_error(e))
        }
        None => Ok(()),
    }
}

/// Refresh `apiserver_storage_objects` for a resource.
// The `resource` label is the group-qualified resource (`deployments.apps`, plain `configmaps` for
// the core group), as kube-apiserver writes it.
pub fn count_objects(state: &State, def: &ResourceDef) {
    let count = state.storage.store.count(&def.group, &def.resource);
    let name = if def.group.is_empty() {
        def.resource.clone()
    } else {
        format!("{}.{}", def.resource, def.group)
    };
    state
        .observability
        .metrics
        .set(&STORAGE_OBJECTS, &[&name], count as f64);
}

/// The `etcd` readiness check: fails when a fault on every resource makes etcd unusable (an error,
/// a hold, or latency beyond the 2 s health-check timeout).
// 2 s is the default of kube-apiserver's `--etcd-healthcheck-timeout`.
// Only a fault on every resource (`*`) counts: the real check talks to etcd directly, not through
// a resource, so one slow resource leaves `/readyz` green — which is what makes it a storage
// diagnosis and not an outage.
pub fn etcd_healthy(state: &State) -> bool {
    !state
        .scenario
        .faults
        .storage
        .iter()
        .any(|f| f.resource == "*" && (f.error.is_some() || f.hold || f.latency_ms >= 2000))
}
