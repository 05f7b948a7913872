//! The state one running reference server shares between its handlers, controllers and backends,
//! grouped by concern so that a function can be handed the part it uses.
//!
//! It owns nothing clever. The server's identity — the validated scenario, the release profile it
//! speaks, its PKI, when it started and where it listens — sits on [`State`] itself; beside it:
//! authentication ([`Authn`]), the cluster as outbound clients reach it ([`Cluster`]), storage
//! ([`Storage`]: the objects and the gate that holds faulted operations), APF, and what the server
//! lets tests and clients observe ([`Observability`]). Behaviour lives in the modules that own each
//! part; this module only builds them. The parts never refer back to [`State`]: the modules that
//! take the whole of it are the request handlers and controllers, above them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use tokio::sync::watch;

use super::apf::Apf;
use super::authn::{Authn, Authorizer, UserInfo};
use super::backends::container_log::ContainerLog;
use super::certs::ServerPki;
use super::metrics::Registry;
use super::network::Cluster;
use super::profile::Profile;
use super::request::RequestInfo;
use super::scenario::Scenario;
use super::store::Store;

/// Shared state.
pub struct State {
    /// The validated scenario.
    pub scenario: Scenario,
    /// The Kubernetes release the server speaks (from `server.version`).
    pub profile: Profile,
    /// Certificates.
    pub pki: Arc<ServerPki>,
    /// Server start.
    pub started: Instant,
    /// The address the server listens on (`127.0.0.1:port`), once known.
    pub listen_addr: OnceLock<std::net::SocketAddr>,
    /// Who may call, and what a user may do beyond RBAC.
    pub auth: Authn,
    /// Where outbound connections land, the backends' logs, the kept-alive connections.
    pub cluster: Cluster,
    /// Objects, and the gate of held storage operations.
    pub storage: Storage,
    /// APF.
    pub apf: Apf,
    /// Metrics and the request log.
    pub observability: Observability,
}

/// One CRD version's watch cache of converted objects: `namespace/name` → the object's
/// resourceVersion and its converted form.
pub type ConvertedCache = HashMap<String, (String, serde_json::Value)>;

/// The objects and the gate that holds faulted storage operations.
pub struct Storage {
    /// Objects.
    pub store: Store,
    /// The watch cache of each CRD version that is not the storage version, on a profile that
    /// serves lists from it (`group/version/resource` → `namespace/name` → the object's
    /// resourceVersion and its converted form): what a list of that version answers without the
    /// conversion webhook (`conversion::list_to_version`).
    pub converted_caches: Mutex<HashMap<String, ConvertedCache>>,
    /// Held storage operations wait until this turns true.
    pub release: watch::Sender<bool>,
}

/// What the server lets tests and clients observe of it.
pub struct Observability {
    /// Metrics.
    pub metrics: Arc<Registry>,
    /// Synthetic `/metrics` padding (`server.syntheticMetricsBytes`), generated once.
    pub synthetic_metrics: String,
    /// Every request that reached the server, in arrival order (for tests that prove a client
    /// only reads).
    pub requests: Mutex<Vec<LoggedRequest>>,
}

impl Observability {
    /// The whole `/metrics` text: the live registry, then any synthetic padding.
    pub fn metrics_text(&self) -> String {
        let mut text = self.metrics.render();
        text.push_str(&self.synthetic_metrics);
        text
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// The authenticated (or impersonated) user; empty when authentication failed.
    pub user: String,
    /// Sent by the scenario's own `traffic:`, not by a client.
    pub traffic: bool,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("scenario", &self.scenario.name)
            .finish_non_exhaustive()
    }
}

impl Authorizer for State {
    fn allows(&self, user: &UserInfo, info: &RequestInfo) -> bool {
        super::authn::allowed(&self.auth, &self.storage.store, user, info)
    }
}

impl State {
    /// Build the state (no tasks started).
    pub fn new(
        scenario: Scenario,
        pki: Arc<ServerPki>,
        backend_ports: std::collections::BTreeMap<String, u16>,
        backend_logs: std::collections::BTreeMap<String, Arc<ContainerLog>>,
    ) -> Self {
        let (release, _) = watch::channel(false);
        let synthetic_metrics = match scenario.server.synthetic_metrics_bytes {
            0 => String::new(),
            n => super::synthetic::exposition(n),
        };
        let profile = Profile::for_version(scenario.server.version.as_deref());
        let metrics = Registry::default();
        let (build_info, labels) = profile.build_info();
        metrics.set(build_info, &labels.each_ref().map(String::as_str), 1.0);
        State {
            auth: Authn::new(&scenario, &pki),
            cluster: Cluster {
                network: scenario.network.clone(),
                ports: backend_ports,
                logs: backend_logs,
                connections: Default::default(),
                clock: pki.clock,
            },
            storage: Storage {
                store: Store::new(scenario.server.watch_history),
                converted_caches: Mutex::new(HashMap::new()),
                release,
            },
            apf: Apf::new(scenario.server.server_concurrency_limit, &profile),
            observability: Observability {
                metrics: Arc::new(metrics),
                synthetic_metrics,
                requests: Mutex::new(Vec::new()),
            },
            scenario,
            profile,
            pki,
            started: Instant::now(),
            listen_addr: OnceLock::new(),
        }
    }
}
