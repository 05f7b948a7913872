//! The state one running reference server shares between its handlers, controllers and backends.
//!
//! It owns nothing clever: the validated scenario, the release profile it speaks, the store, the
//! metrics registry, the PKI, the authentication tables, the loopback ports of spawned backends, the APF dispatcher and the gate
//! that holds faulted storage operations. Behaviour lives in the modules that use it.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use sha2::Digest;
use tokio::sync::watch;

use super::apf::Apf;
use super::authn::UserInfo;
use super::backends::container_log::ContainerLog;
use super::certs::ServerPki;
use super::metrics::Registry;
use super::profile::Profile;
use super::scenario::{Rule, Scenario};
use super::store::Store;

/// Shared state.
pub struct State {
    /// The validated scenario.
    pub scenario: Scenario,
    /// The Kubernetes release the server speaks (from `server.version`).
    pub profile: Profile,
    /// Objects.
    pub store: Store,
    /// Metrics.
    pub metrics: std::sync::Arc<Registry>,
    /// Certificates.
    pub pki: std::sync::Arc<ServerPki>,
    /// Bearer token → user.
    pub tokens: HashMap<String, UserInfo>,
    /// User → allow rules.
    pub rules: HashMap<String, Vec<Rule>>,
    /// The admin's bearer token.
    pub admin_token: String,
    /// Backend name → loopback port (a closed port for `down` backends).
    pub backend_ports: BTreeMap<String, u16>,
    /// Backend name → its container log (served as `pods/log` of the Pods mapped to it).
    pub backend_logs: BTreeMap<String, std::sync::Arc<ContainerLog>>,
    /// APF.
    pub apf: Apf,
    /// Held storage operations wait until this turns true.
    pub release: watch::Sender<bool>,
    /// Server start.
    pub started: Instant,
    /// The address the server listens on (`127.0.0.1:port`), once known.
    pub listen_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// Synthetic `/metrics` padding (`server.syntheticMetricsBytes`), generated once.
    pub synthetic_metrics: String,
    /// Every request that reached the server, in arrival order (for tests that prove a client
    /// only reads).
    pub requests: std::sync::Mutex<Vec<LoggedRequest>>,
    /// The outbound clients' kept-alive connections to backends and webhooks.
    pub connections: super::network::ConnectionPool,
    /// Set when the server replays a recorded bundle instead of running a scenario.
    pub recorded: std::sync::OnceLock<std::sync::Arc<super::recorded::Recorded>>,
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

impl State {
    /// The whole `/metrics` text: the live registry, then any synthetic padding.
    pub fn metrics_text(&self) -> String {
        let mut text = self.metrics.render();
        text.push_str(&self.synthetic_metrics);
        text
    }

    /// Build the state (no tasks started).
    pub fn new(
        scenario: Scenario,
        pki: std::sync::Arc<ServerPki>,
        backend_ports: BTreeMap<String, u16>,
        backend_logs: BTreeMap<String, std::sync::Arc<ContainerLog>>,
    ) -> Self {
        // Unique per start and never written anywhere but the kubeconfig.
        let admin_token =
            hex(&sha2::Sha256::digest(pki.serving_ca.cert_pem.as_bytes()))[..32].to_string();
        let mut tokens = HashMap::new();
        tokens.insert(
            admin_token.clone(),
            UserInfo {
                name: "admin".into(),
                groups: vec!["system:masters".into()],
            },
        );
        let mut rules = HashMap::new();
        for u in &scenario.users {
            if let Some(t) = &u.token {
                tokens.insert(
                    t.clone(),
                    UserInfo {
                        name: u.name.clone(),
                        groups: u.groups.clone(),
                    },
                );
            }
            rules.insert(u.name.clone(), u.allow.clone());
        }
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
            store: Store::new(scenario.server.watch_history),
            apf: Apf::new(scenario.server.server_concurrency_limit, &profile),
            scenario,
            profile,
            metrics: std::sync::Arc::new(metrics),
            pki,
            tokens,
            rules,
            admin_token,
            backend_ports,
            backend_logs,
            release,
            started: Instant::now(),
            listen_addr: std::sync::OnceLock::new(),
            requests: std::sync::Mutex::new(Vec::new()),
            connections: Default::default(),
            synthetic_metrics,
            recorded: std::sync::OnceLock::new(),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
