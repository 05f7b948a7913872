//! The reference apiserver/aggregator core (DESIGN §3): an HTTPS server that behaves like
//! kube-apiserver 1.30 (or 1.24, or a release in between: `server.version`, `profile.rs`) with its
//! aggregator on the extension paths, loaded from a scenario, so that extension-path failures
//! happen for real and extpath can be tested end to end without a cluster.
//!
//! [`RefServer::start`] generates the PKI, spawns the scenario's backends, loads the objects, starts
//! the availability controller and serves HTTPS on 127.0.0.1 (an ephemeral port unless one is
//! given). The same request handling is a `tower::Service` ([`RunningServer::service`]) that
//! `kube::Client::new` accepts, for in-process tests without a socket.
//!
//! [`RefServer::replay`] serves a recorded bundle instead of a scenario: the same server, answering
//! from the recording (`replay serve --bundle`).
//!
//! Inside, dependencies point one way. The root assembles a server. The request path — `handler`
//! and what it dispatches to (`aggregator`, `api`, `admission`, `conversion`, `controllers`,
//! `storage`) — and the tasks beside it (`traffic`, the availability controller) take the shared
//! [`state::State`]; a replay's answers (`recorded`) read only the store. The services they call
//! take only the part of the state they use (`authn::Authn`, `network::Cluster`, `apf::Apf`, the
//! `store::Store`, the `metrics::Registry`), so none of them refers back to `State`; backends
//! reach the server's authorizer through `authn::Authorizer`. Leaves (`scenario`, `profile`,
//! `registry`, `store`, `certs`, `tls`, `request`, `status`, `patch`) depend on nothing above
//! them. `tests/refserver_layers.rs` keeps it so.
//!
//! This module never imports `crate::engine`: a server that knew the verdicts would make every
//! replay test circular. The scenario's `expect:` block is data it does not read.

pub mod admission;
pub mod aggregator;
pub mod apf;
pub mod api;
pub mod authn;
pub mod backends;
pub mod certs;
pub mod controllers;
pub mod conversion;
pub mod etcd_metrics_server;
pub mod handler;
pub mod kubeconfig;
pub mod metrics;
pub mod network;
pub mod patch;
pub mod profile;
pub mod rbac;
pub mod recorded;
pub mod registry;
pub mod request;
pub mod scenario;
pub mod state;
pub mod status;
pub mod storage_faults;
pub mod store;
mod synthetic;
pub mod tls;
pub mod traffic;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use anyhow::Context as _;
use axum::body::Body;
use http::{HeaderValue, Request, Response};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use kubeconfig::ClientAuth;
pub use scenario::{Scenario, ScenarioError};

use backends::Backends;
use certs::ServerPki;
use recorded::Recorded;
use state::State;
use tls::PeerChain;

/// How to start a server.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartOptions {
    /// Port on 127.0.0.1 (0 = ephemeral).
    pub port: u16,
    /// Do not start the scenario's `traffic:`: the server has only the clients the caller brings
    /// (tests that count exact metrics, a quiet `replay serve --idle`).
    pub idle: bool,
}

/// Entry point.
#[derive(Debug)]
pub struct RefServer;

impl RefServer {
    /// Start a server replaying a recorded bundle instead of running a scenario: the same server,
    /// answering from the recording ([`recorded`]).
    ///
    /// # Errors
    /// When a port cannot be bound or the server's certificates cannot be generated.
    pub async fn replay(
        bundle: crate::bundle::EvidenceBundle,
        options: StartOptions,
    ) -> anyhow::Result<RunningServer> {
        let Core {
            pki,
            shutdown,
            shutdown_rx,
            backends,
            state,
        } = Core::build(recorded::scenario_for(&bundle)).await?;
        recorded::load(&state.storage.store, &bundle)?;
        let no_backend = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the backends' port")?;
        let recording = Arc::new(Recorded::new(bundle, no_backend.local_addr()?.port()));
        let (addr, api) = serve_api(
            &state,
            Some(recording.clone()),
            &pki,
            options.port,
            &shutdown_rx,
        )
        .await?;
        let mut tasks = vec![api];
        tasks.push(tokio::spawn(recorded::close_every_connection(
            no_backend,
            shutdown_rx.clone(),
        )));
        let mut etcd_addr = None;
        if recorded::endpoints::serves_etcd(&recording) {
            let l = TcpListener::bind("127.0.0.1:0")
                .await
                .context("binding the etcd port")?;
            etcd_addr = Some(l.local_addr()?);
            tasks.push(tokio::spawn(recorded::endpoints::serve_etcd(
                l,
                recording.clone(),
                shutdown_rx.clone(),
            )));
        }
        Ok(RunningServer {
            state,
            recorded: Some(recording),
            addr,
            shutdown,
            tasks,
            backends,
            etcd_addr,
        })
    }

    /// Start a server for a (validated) scenario.
    ///
    /// # Errors
    /// When a port cannot be bound, a certificate cannot be generated or an object cannot be loaded.
    pub async fn start(scenario: Scenario, options: StartOptions) -> anyhow::Result<RunningServer> {
        let Core {
            pki,
            shutdown,
            shutdown_rx,
            backends,
            state,
        } = Core::build(scenario).await?;
        controllers::load_initial(&state).map_err(|e| anyhow::anyhow!("loading objects: {e}"))?;
        let (addr, api) = serve_api(&state, None, &pki, options.port, &shutdown_rx).await?;
        let mut tasks = vec![api];
        tasks.push(tokio::spawn(aggregator::available::run(
            state.clone(),
            shutdown_rx.clone(),
        )));
        // Like kube-aggregator right after start-up, every APIService gets its conditions before the
        // first client looks; otherwise a fast client would race the controller and see none.
        aggregator::available::sync_all(&state).await;
        // The scenario's clients start once the server is as ready as a real one would be.
        if !options.idle {
            tasks.extend(traffic::spawn(&state, &shutdown_rx));
        }
        let mut etcd_addr = None;
        if let Some(spec) = state.scenario.faults.etcd.clone() {
            let l = TcpListener::bind("127.0.0.1:0")
                .await
                .context("binding the etcd metrics port")?;
            etcd_addr = Some(l.local_addr()?);
            tasks.push(tokio::spawn(etcd_metrics_server::serve(
                l,
                spec,
                shutdown_rx.clone(),
            )));
        }
        Ok(RunningServer {
            state,
            recorded: None,
            addr,
            shutdown,
            tasks,
            backends,
            etcd_addr,
        })
    }
}

/// What a scenario server and a recording's replay share before either loads anything: the
/// certificates, the shutdown signal, the spawned backends and the state over them.
struct Core {
    pki: Arc<ServerPki>,
    shutdown: watch::Sender<bool>,
    shutdown_rx: watch::Receiver<bool>,
    backends: Backends,
    state: Arc<State>,
}

impl Core {
    async fn build(scenario: Scenario) -> anyhow::Result<Core> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let pki = Arc::new(ServerPki::generate(&scenario).context("generating certificates")?);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let apiserver = backends::delegated::ApiserverHandle::default();
        let backends = Backends::spawn(&scenario, &pki, &shutdown_rx, &apiserver).await?;
        let state = Arc::new(State::new(
            scenario,
            pki.clone(),
            backends.ports(),
            backends.logs(),
        ));
        // Backends with delegated authorization ask this server's authorizer from now on.
        let authorizer: std::sync::Weak<dyn authn::Authorizer> = Arc::downgrade(&state) as _;
        let _ = apiserver.set(authorizer);
        Ok(Core {
            pki,
            shutdown,
            shutdown_rx,
            backends,
            state,
        })
    }
}

/// Bind the API's port on 127.0.0.1 and serve `state` (answering from `recorded` when it replays
/// one) there over TLS until shutdown.
async fn serve_api(
    state: &Arc<State>,
    recorded: Option<Arc<Recorded>>,
    pki: &ServerPki,
    port: u16,
    shutdown_rx: &watch::Receiver<bool>,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{port}"))?;
    let addr = listener.local_addr()?;
    let _ = state.listen_addr.set(addr);
    let config = Arc::new(RwLock::new(tls::server_config(&pki.serving)?));
    let serving_state = state.clone();
    let task = tokio::spawn(tls::serve(
        listener,
        config,
        move |peer| RefService {
            state: serving_state.clone(),
            recorded: recorded.clone(),
            peer,
            default_auth: None,
        },
        shutdown_rx.clone(),
    ));
    Ok((addr, task))
}

/// A running server.
pub struct RunningServer {
    state: Arc<State>,
    /// The recording it replays, when it replays one instead of running a scenario.
    recorded: Option<Arc<Recorded>>,
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    backends: Backends,
    etcd_addr: Option<SocketAddr>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer")
            .field("addr", &self.addr)
            .field("backends", &self.backends)
            .finish_non_exhaustive()
    }
}

impl RunningServer {
    /// Whether it replays a recorded bundle (rather than running a scenario).
    pub fn is_recording(&self) -> bool {
        self.recorded.is_some()
    }

    /// The recorded bundle this server replays, when it replays one.
    pub fn recording(&self) -> Option<&crate::bundle::EvidenceBundle> {
        self.recorded.as_deref().map(|r| &r.bundle)
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// PEM of the CA that signed the serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.state.pki.serving_ca.cert_pem
    }

    /// The admin's bearer token (`system:masters`).
    pub fn admin_token(&self) -> &str {
        self.state.auth.admin_token()
    }

    /// A user's client certificate and key PEM (`admin`, or a scenario user with
    /// `clientCertificate: true`).
    pub fn client_certificate(&self, user: &str) -> Option<(&str, &str)> {
        self.state
            .pki
            .user_certs
            .get(user)
            .map(|c| (c.cert_pem.as_str(), c.key_pem.as_str()))
    }

    /// A kubeconfig for the admin.
    pub fn kubeconfig(&self, auth: ClientAuth) -> String {
        let cert = match auth {
            ClientAuth::Token => None,
            ClientAuth::Cert => self.client_certificate("admin"),
        };
        kubeconfig::render(&self.url(), self.ca_pem(), self.admin_token(), cert)
    }

    /// The in-process service, authenticated as admin unless a request carries its own
    /// `Authorization` header.
    pub fn service(&self) -> RefService {
        RefService {
            state: self.state.clone(),
            recorded: self.recorded.clone(),
            peer: None,
            default_auth: HeaderValue::from_str(&format!(
                "Bearer {}",
                self.state.auth.admin_token()
            ))
            .ok(),
        }
    }

    /// Where each Service with a listening backend is reachable from outside the "cluster", as
    /// `name.namespace` → `127.0.0.1:port` — what `collect --backend-address` takes, so a client
    /// running beside the server can shake hands with the backends as if it were in the cluster.
    pub fn backend_addresses(&self) -> std::collections::BTreeMap<String, String> {
        if let Some(r) = &self.recorded {
            return recorded::backend_addresses(r);
        }
        let mut out = std::collections::BTreeMap::new();
        let (services, _) = self.state.storage.store.list("", "services", None);
        for svc in &services {
            let ns = svc
                .pointer("/metadata/namespace")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("default");
            let Some(name) = svc
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
            else {
                continue;
            };
            let ports = svc
                .pointer("/spec/ports")
                .and_then(serde_json::Value::as_array)
                .cloned()
                .unwrap_or_default();
            for p in ports {
                let Some(port) = p["port"].as_u64().and_then(|p| u16::try_from(p).ok()) else {
                    continue;
                };
                if let Ok((_, Some(local))) = network::route(
                    &self.state.cluster,
                    &self.state.storage.store,
                    &format!("{name}.{ns}.svc"),
                    port,
                ) {
                    out.insert(format!("{name}.{ns}"), format!("127.0.0.1:{local}"));
                    break;
                }
            }
        }
        out
    }

    /// Every request the server has received so far from clients (method, path with query,
    /// user) — not the scenario's own `traffic:`.
    pub fn requests(&self) -> Vec<state::LoggedRequest> {
        self.state
            .observability
            .requests
            .lock()
            .map(|l| l.iter().filter(|r| !r.traffic).cloned().collect())
            .unwrap_or_default()
    }

    /// The requests the scenario's `traffic:` has sent so far.
    pub fn traffic_requests(&self) -> Vec<state::LoggedRequest> {
        self.state
            .observability
            .requests
            .lock()
            .map(|l| l.iter().filter(|r| r.traffic).cloned().collect())
            .unwrap_or_default()
    }

    /// The current `/metrics` text.
    pub fn metrics_text(&self) -> String {
        self.state.observability.metrics_text()
    }

    /// `http://127.0.0.1:<port>` of the etcd metrics endpoint, when the scenario has one.
    pub fn etcd_url(&self) -> Option<String> {
        self.etcd_addr.map(|a| format!("http://{a}"))
    }

    /// Loopback port of a backend.
    pub fn backend_port(&self, name: &str) -> Option<u16> {
        self.state.cluster.ports.get(name).copied()
    }

    /// Serve a new certificate from a running backend (new connections).
    ///
    /// # Errors
    /// Unknown or down backend.
    pub fn replace_backend_certificate(
        &self,
        name: &str,
        spec: &scenario::CertSpec,
    ) -> anyhow::Result<()> {
        self.backends
            .replace_certificate(name, &self.state.pki, spec)?;
        // As when a rotated extension server restarts: no kept-alive connection survives to
        // speak with the old certificate.
        if let Some(port) = self.backend_port(name) {
            self.state.cluster.connections.forget(port);
        }
        Ok(())
    }

    /// How many connections the server's outbound clients (aggregator proxy, availability
    /// probe, webhook and conversion clients) have opened — each a TCP dial and a TLS handshake.
    pub fn outbound_connections_opened(&self) -> u64 {
        self.state.cluster.connections.opened()
    }

    /// Stop a backend as a crash would (connections dropped, its port refusing new ones) until
    /// [`start_backend`](Self::start_backend); its Service and endpoints stay as they are.
    ///
    /// # Errors
    /// Unknown backend, or one that is not running.
    pub async fn stop_backend(&mut self, name: &str) -> anyhow::Result<()> {
        self.backends.stop(name).await
    }

    /// Start a stopped backend again on its port.
    ///
    /// # Errors
    /// Unknown backend, one that is running, or one its scenario says is down.
    pub async fn start_backend(&mut self, name: &str) -> anyhow::Result<()> {
        self.backends.start(name).await
    }

    /// Let storage operations held by a `hold: true` fault proceed.
    pub fn release_held(&self) {
        self.state.storage.release.send_replace(true);
    }

    /// Drop all watch history (later watches from an older resourceVersion get 410).
    pub fn compact(&self) {
        self.state.storage.store.compact();
    }

    /// Run one availability-controller pass now.
    pub async fn sync_availability(&self) {
        aggregator::available::sync_all(&self.state).await;
    }

    /// The scenario this server runs.
    pub fn scenario(&self) -> &Scenario {
        &self.state.scenario
    }

    /// Stop serving, stop the backends and the controller.
    pub async fn shutdown(mut self) {
        self.stop();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }

    fn stop(&mut self) {
        self.shutdown.send_replace(true);
        self.backends.abort();
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop();
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The server's request handling as a `tower::Service`.
#[derive(Clone)]
pub struct RefService {
    state: Arc<State>,
    recorded: Option<Arc<Recorded>>,
    peer: PeerChain,
    default_auth: Option<HeaderValue>,
}

impl std::fmt::Debug for RefService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefService").finish_non_exhaustive()
    }
}

impl<B> tower::Service<Request<B>> for RefService
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Send,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let state = self.state.clone();
        let recorded = self.recorded.clone();
        let peer = self.peer.clone();
        if let Some(auth) = &self.default_auth
            && !req.headers().contains_key(http::header::AUTHORIZATION)
        {
            req.headers_mut()
                .insert(http::header::AUTHORIZATION, auth.clone());
        }
        Box::pin(async move {
            let req = handler::collect(req).await;
            Ok(handler::handle(state, recorded.as_deref(), req, peer).await)
        })
    }
}
