//! A stand-in for etcd's own metrics port: an etcd-style `/metrics` (and `/health`) endpoint on its
//! own plain-HTTP loopback port, like etcd's client port, serving the values a scenario gives —
//! what `--etcd-metrics-url` reads in tests. The reference server stores nothing in it (objects are
//! in [`super::store`]); the collector's side of etcd is `crate::collect::etcd`.
//!
//! Only the families extpath's Storage rules read are served, with etcd 3.5's names, help texts and
//! buckets: WAL fsync and backend commit histograms (1 ms × 2^k, 14 buckets), leader gauges and
//! counters, database size and quota.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::metrics::{Desc, Registry};
use super::scenario::EtcdSpec;

const FSYNC: Desc = Desc {
    name: "etcd_disk_wal_fsync_duration_seconds",
    help: "The latency distributions of fsync called by WAL.",
    labels: &[],
};
const COMMIT: Desc = Desc {
    name: "etcd_disk_backend_commit_duration_seconds",
    help: "The latency distributions of commit called by backend.",
    labels: &[],
};
const HAS_LEADER: Desc = Desc {
    name: "etcd_server_has_leader",
    help: "Whether or not a leader exists. 1 is existence, 0 is not.",
    labels: &[],
};
const IS_LEADER: Desc = Desc {
    name: "etcd_server_is_leader",
    help: "Whether or not this member is a leader. 1 if is, 0 otherwise.",
    labels: &[],
};
const LEADER_CHANGES: Desc = Desc {
    name: "etcd_server_leader_changes_seen_total",
    help: "The number of leader changes seen.",
    labels: &[],
};
const DB_SIZE: Desc = Desc {
    name: "etcd_mvcc_db_total_size_in_bytes",
    help: "Total size of the underlying database physically allocated in bytes.",
    labels: &[],
};
const QUOTA: Desc = Desc {
    name: "etcd_server_quota_backend_bytes",
    help: "Current backend storage quota size in bytes.",
    labels: &[],
};

fn buckets() -> Vec<f64> {
    (0..14).map(|k| 0.001 * f64::from(1u32 << k)).collect()
}

/// Render the etcd metrics of a spec.
pub fn render(spec: &EtcdSpec) -> String {
    let r = Registry::default();
    let b = buckets();
    for v in &spec.wal_fsync_seconds {
        r.observe(&FSYNC, &b, &[], *v);
    }
    for v in &spec.backend_commit_seconds {
        r.observe(&COMMIT, &b, &[], *v);
    }
    r.set(&HAS_LEADER, &[], spec.has_leader);
    r.set(&IS_LEADER, &[], spec.has_leader);
    r.inc_by(&LEADER_CHANGES, &[], spec.leader_changes);
    r.set(&DB_SIZE, &[], spec.db_size_bytes);
    r.set(
        &QUOTA,
        &[],
        spec.quota_backend_bytes.unwrap_or(2_147_483_648.0),
    );
    r.render()
}

/// Serve the endpoint until shutdown.
pub async fn serve(listener: TcpListener, spec: EtcdSpec, mut shutdown: watch::Receiver<bool>) {
    let spec = Arc::new(spec);
    let healthy = spec.has_leader > 0.0;
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let spec = spec.clone();
                async move { render(&spec) }
            }),
        )
        .route(
            "/health",
            get(move || async move {
                if healthy {
                    r#"{"health":"true","reason":""}"#
                } else {
                    r#"{"health":"false","reason":"RAFT NO LEADER"}"#
                }
            }),
        );
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|s| *s).await;
        })
        .await;
}
