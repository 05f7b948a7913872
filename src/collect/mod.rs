//! Live collection: cluster → [`EvidenceBundle`]. The only module that talks to an API server.
//!
//! Collection never judges. It gathers what the rules read, and when a source cannot be read it
//! records a gap with the reason (403, timeout, not served, unreachable) and goes on: on a managed
//! cluster without etcd metrics the verdicts still come, with the gap named.
//!
//! Every source is one entry of [`sources::SOURCES`]: its id, its progress label, its stage, how
//! `--timeout` bounds it and its fetch, which brings back one [`sources::Contribution`] (evidence,
//! gaps, probes). Adding a collector is adding its file and its entry. The run ([`collect`],
//! `run.rs`) sends the entries stage by stage (DESIGN §5, "fast"): every independent request is in
//! flight at once, each under `--request-timeout`, the whole run under `--timeout`. Three stages,
//! because some requests need the answers of others:
//!
//! 1. The objects that name everything else (APIServices, webhook configurations, CRDs,
//!    FlowSchemas and priority levels), RBAC ([`rbac`]), `/version`, `/readyz`, `/livez`, etcd's
//!    health and alarms; beside them the first `/metrics` scrape, or Prometheus.
//! 2. For what stage one referenced: the Services, Endpoints and EndpointSlices behind each backend,
//!    Events in their namespaces, the discovery probe of every aggregated group/version (and, once
//!    it answered, a list of each resource it serves and the [`delegation`] probe), the
//!    [`authorizer`] probe, optional admission dry-run probes.
//! 3. Pods behind those Services (selectors come from stage two; then, with `--pod-logs`, their
//!    logs) and the TLS handshake with every reachable backend ([`tls`]).
//!
//! Meanwhile the metrics window runs; the second scrape closes it. So a scan costs about three
//! round trips or the window, whichever is longer — not the sum of the requests.
//!
//! Beside the API server, two optional servers: etcd ([`etcd`]: its `/metrics`, scraped in the
//! same rounds as the API server's, `/health` and the alarm list) and Prometheus
//! ([`metrics::prometheus`]: the API server's and etcd's families over `--since`, read instead of
//! scraping `/metrics`; no window to wait for then, unless etcd is scraped directly). Both are
//! reached through [`url_client`]; the API server through [`Fetcher`].
//!
//! Each source lives in its own file as its requests, a pure transform into bundle types, and the
//! fetch its [`sources::SOURCES`] entry calls (a function of the run that returns one
//! [`sources::Contribution`]); the transforms are tested on hand-built objects.

pub mod authorizer;
pub mod backends;
pub mod connect;
pub mod delegation;
pub mod discovery;
pub mod etcd;
pub mod fetch;
pub mod flowcontrol;
pub mod health;
pub mod logs;
pub mod metrics;
pub mod objects;
pub mod rbac;
pub mod refs;
mod run;
pub mod sources;
pub mod tls;
pub mod tls_words;
pub mod url_client;
pub mod why;

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::bundle::{EvidenceBundle, Gap};
pub use connect::{ConnectError, ConnectOptions, Connection, connect};
pub use etcd::EtcdOptions;
pub use fetch::{FetchError, Fetcher};
pub use metrics::prometheus::PrometheusOptions;
pub use run::collect;
pub use url_client::SetupError;

/// What a collection does beyond the defaults.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    /// Per request (`--request-timeout`, default 10 s).
    pub request_timeout: Duration,
    /// The whole run (`--timeout`); what is not done by then becomes a gap.
    pub timeout: Duration,
    /// Metrics window (`--window`): the time between the two scrapes; zero = one scrape.
    pub window: Duration,
    /// `--backend-address svc.ns=host:port`: where to reach a backend for the TLS handshake.
    pub backend_addresses: BTreeMap<String, String>,
    /// `--probe-admission`: send server-side dry-run creates through matching webhooks.
    pub probe_admission: bool,
    /// `--pod-logs`: read the known error lines of the logs of the Pods behind the extension paths.
    pub pod_logs: bool,
    /// After a discovery probe answers, list each resource of the group/version (up to
    /// [`discovery::LIST_PROBES_PER_GROUP_VERSION`]); and read one object of each CRD that
    /// converts through a webhook in its other served versions (off with `--skip-list-probe`: the
    /// least-privilege ClusterRole does not grant reads of aggregated or custom resources).
    pub list_probe: bool,
    /// After a discovery probe answers, send it again as an ordinary authenticated user
    /// ([`delegation`]); off with `--skip-delegation-probe`, and when the collection itself
    /// impersonates (`--as`), since impersonation does not chain.
    pub delegation_probe: bool,
    /// Send one read RBAC does not allow as an ordinary user ([`authorizer`]), so that the
    /// authorizers after RBAC are asked; off with `--skip-delegation-probe` (the other
    /// impersonated probe) and with `--as`, like the delegation probe.
    pub authorizer_probe: bool,
    /// Namespace for namespaced probes (`-n`).
    pub namespace: String,
    /// `--etcd-metrics-url` and its TLS files: etcd's own metrics, health and alarms.
    pub etcd: Option<EtcdOptions>,
    /// `--prometheus` and its options: read the metric families from Prometheus instead of
    /// scraping the API server (and etcd, unless `etcd` is given).
    pub prometheus: Option<PrometheusOptions>,
    /// `--max-scrape-bytes` and `--max-series`: how much one `/metrics` scrape may bring.
    pub scrape_limits: metrics::ScrapeLimits,
    /// `--max-objects`: how many objects one list may bring; a list with more stops there and
    /// becomes a `capped` gap.
    pub max_objects: usize,
}

impl Default for CollectOptions {
    fn default() -> Self {
        CollectOptions {
            request_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(60),
            window: Duration::from_secs(10),
            backend_addresses: BTreeMap::new(),
            probe_admission: false,
            pod_logs: false,
            list_probe: true,
            delegation_probe: true,
            authorizer_probe: true,
            max_objects: fetch::DEFAULT_MAX_OBJECTS,
            namespace: "default".into(),
            etcd: None,
            prometheus: None,
            scrape_limits: metrics::ScrapeLimits::default(),
        }
    }
}

/// Progress reporting, so the CLI can draw a bar on a TTY and nothing elsewhere.
pub trait Progress: Send + Sync {
    /// `total` steps are now known (or changed: a step that will not happen is taken off).
    fn set_total(&self, total: u64);
    /// One step finished.
    fn step(&self, what: &str);
    /// Waiting on purpose: `what` comes in `remaining`, because of `why` (a flag, a phase).
    /// Called about once a second while it lasts, so a bar can count down instead of looking hung.
    fn waiting(&self, _what: &str, _why: &str, _remaining: Duration) {}
}

/// No progress output.
pub struct NoProgress;

impl Progress for NoProgress {
    fn set_total(&self, _: u64) {}
    fn step(&self, _: &str) {}
}

/// Sleep until `until`, telling `progress` what is awaited, and why, once a second.
pub async fn wait_until(progress: &dyn Progress, what: &str, why: &str, until: Instant) {
    loop {
        let now = Instant::now();
        if now >= until {
            return;
        }
        let remaining = until - now;
        progress.waiting(what, why, remaining);
        let tick = Duration::from_millis(u64::try_from(remaining.as_millis() % 1000).unwrap_or(0))
            .max(Duration::from_millis(1));
        tokio::time::sleep(tick.min(remaining)).await;
    }
}

/// The result of a collection.
pub struct Collected {
    /// The evidence, with gaps.
    pub bundle: EvidenceBundle,
    /// Set when the API server could not be reached at all (exit code 3).
    pub unreachable: Option<String>,
    /// Set when it answered but refused every read (401/403 everywhere): nothing to judge, which
    /// is not "no findings" (exit code 3, in kubectl's words).
    pub refused: Option<String>,
}

/// Run `fut` until `deadline`; a miss becomes a timeout.
async fn bounded<T>(
    deadline: Instant,
    fut: impl std::future::Future<Output = Result<T, FetchError>>,
) -> Result<T, FetchError> {
    match tokio::time::timeout_at(deadline, fut).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout(Duration::ZERO)),
    }
}

fn gap_for(id: &str, e: &FetchError) -> Gap {
    let detail = match e {
        FetchError::Timeout(d) if d.is_zero() => "not finished within --timeout".to_string(),
        other => other.to_string(),
    };
    Gap::new(id, e.gap_reason(), detail)
}
