//! The exporter behind `kubectl extpath serve`: scan on a schedule, keep the last diagnosis, serve
//! it over HTTP for Prometheus and people.
//!
//! It owns the schedule (one scan at a time: the next starts a jittered `--interval` (±10 %) after
//! the last one started, so that many exporters do not hit their API servers in step, or as soon
//! as the last one ended when it overran), the state a scan leaves behind ([`Shared`]), and
//! the HTTP surface: `/metrics` ([`metrics`]), `/diagnosis` (the last Diagnosis document, byte for
//! byte what `scan -o json` prints), `/healthz` and `/readyz` (ready once a scan has completed).
//! How a scan is done is the caller's: `cli::serve` passes the same collection and analysis `scan`
//! runs. Nothing here talks to a cluster.

pub mod metrics;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::bundle::EvidenceBundle;
use crate::engine::Diagnosis;
use metrics::{CertExpiry, SOURCE_APISERVER, Snapshot, gap_source, is_error};

/// The content type of the text exposition format.
///
/// `version=0.0.4` names the Prometheus text format (as opposed to OpenMetrics); a scraper picks its
/// parser from this header, so the body below must stay in that format.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What one scan gave.
pub enum ScanOutcome {
    /// A complete scan: the evidence and its diagnosis.
    Complete(Box<(EvidenceBundle, Diagnosis)>),
    /// The API server could not be read at all, or the client could not be set up.
    Failed(String),
}

#[derive(Default)]
struct Inner {
    snapshot: Snapshot,
    /// The last diagnosis as `scan -o json` prints it.
    diagnosis_json: Option<String>,
}

/// The exporter's state, shared by the scan loop and the HTTP handlers.
#[derive(Default)]
pub struct Shared {
    inner: Mutex<Inner>,
}

impl Shared {
    /// State for an exporter scanning every `interval`.
    pub fn new(interval: Duration) -> Arc<Shared> {
        let s = Shared::default();
        s.lock().snapshot.interval = interval.as_secs_f64();
        Arc::new(s)
    }

    // A poisoned lock (a panic while it was held) still holds the last snapshot; serving that
    // beats answering every later scrape with an error.
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record a scan that took `took`. A complete scan replaces the last diagnosis; a failed one
    /// leaves it (it is what was last known; `extpath_last_successful_scan_timestamp_seconds`
    /// says how old it is).
    pub fn record(&self, outcome: ScanOutcome, took: Duration) {
        let mut inner = self.lock();
        let s = &mut inner.snapshot;
        s.durations.observe(took.as_secs_f64());
        if took.as_secs_f64() > s.interval {
            s.overruns += 1;
        }
        match outcome {
            ScanOutcome::Failed(_) => {
                *s.errors.entry(SOURCE_APISERVER.into()).or_default() += 1;
            }
            ScanOutcome::Complete(done) => {
                let (bundle, diagnosis) = *done;
                let mut failed: Vec<String> = diagnosis
                    .gaps
                    .iter()
                    .filter(|g| is_error(g.reason))
                    .map(|g| gap_source(&g.source))
                    .collect();
                // One increment per failing source per scan, however many gaps it left, so
                // `rate(extpath_scan_errors_total)` compares with the scan rate.
                failed.sort();
                failed.dedup();
                for f in failed {
                    *s.errors.entry(f).or_default() += 1;
                }
                s.certificates = CertExpiry::of(&bundle);
                // Wall-clock Unix seconds, unlike the monotonic durations: alerts compute
                // `time() - extpath_last_successful_scan_timestamp_seconds`.
                s.last_success = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
                let mut json = Vec::new();
                // Writing to a Vec cannot fail.
                let _ = crate::report::json::render(&diagnosis, &mut json);
                inner.diagnosis_json = Some(String::from_utf8_lossy(&json).into_owned());
                inner.snapshot.diagnosis = Some(diagnosis);
            }
        }
    }

    /// Whether a scan has completed.
    pub fn ready(&self) -> bool {
        self.lock().diagnosis_json.is_some()
    }

    /// The `/metrics` text now.
    pub fn exposition(&self) -> String {
        metrics::exposition(&self.lock().snapshot)
    }
}

/// The HTTP routes.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/diagnosis", get(diagnosis_handler))
        // Liveness never depends on the cluster: a kubelet probing it would otherwise restart
        // the exporter whenever the API server is down, the moment its metrics matter most.
        // Whether there is anything to read is `/readyz`'s question.
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz_handler))
        .with_state(shared)
}

async fn metrics_handler(State(shared): State<Arc<Shared>>) -> Response {
    (
        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        shared.exposition(),
    )
        .into_response()
}

async fn diagnosis_handler(State(shared): State<Arc<Shared>>) -> Response {
    match shared.lock().diagnosis_json.clone() {
        Some(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "no scan has completed yet\n",
        )
            .into_response(),
    }
}

async fn readyz_handler(State(shared): State<Arc<Shared>>) -> Response {
    if shared.ready() {
        "ok\n".into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "no scan has completed yet\n",
        )
            .into_response()
    }
}

/// A number in [0, 1) that differs between processes and calls: enough to spread schedules.
///
/// `RandomState` is seeded randomly per process and the counter makes successive calls differ,
/// which is all jitter needs; it spares a dependency on `rand`.
fn unit_random() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `interval` ±10 %.
pub fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(0.9 + 0.2 * unit_random())
}

/// Scan until `scan` gives up, one scan at a time: each starts a jittered `interval` after the
/// previous one started, or as soon as it ended when it overran. `on_scan` sees each outcome
/// before it is recorded (for a log line). `scan` ends the loop by returning an error (a
/// configuration that can never work), which is returned; callers race the loop against their
/// shutdown signal, which drops a scan in flight.
pub async fn scan_loop<F, Fut, E>(
    shared: Arc<Shared>,
    interval: Duration,
    mut scan: F,
    mut on_scan: impl FnMut(&ScanOutcome, Duration),
) -> E
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<ScanOutcome, E>>,
{
    loop {
        let started = Instant::now();
        let outcome = match scan().await {
            Ok(o) => o,
            Err(e) => return e,
        };
        let took = started.elapsed();
        on_scan(&outcome, took);
        shared.record(outcome, took);
        // Counted from the start, not the end, so the cadence does not drift by each scan's
        // duration; an overrun (next already past) starts the next scan at once.
        let next = started + jittered(interval);
        let now = Instant::now();
        if next > now {
            tokio::time::sleep(next - now).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent() {
        let i = Duration::from_secs(60);
        for _ in 0..1000 {
            let j = jittered(i);
            assert!(
                j >= Duration::from_secs(54) && j <= Duration::from_secs(66),
                "{j:?}"
            );
        }
        let spread: std::collections::BTreeSet<u128> =
            (0..20).map(|_| jittered(i).as_millis()).collect();
        assert!(spread.len() > 10, "not spread: {spread:?}");
    }

    #[test]
    fn a_failed_scan_keeps_the_last_diagnosis_and_counts_an_error() {
        let shared = Shared::new(Duration::from_secs(1));
        assert!(!shared.ready());
        shared.record(ScanOutcome::Failed("down".into()), Duration::from_secs(2));
        assert!(!shared.ready());
        let text = shared.exposition();
        assert!(
            text.contains("extpath_scan_errors_total{source=\"apiserver\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("extpath_scan_overruns_total 1\n"), "{text}");
    }
}
