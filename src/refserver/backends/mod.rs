//! Backends a scenario spawns: real HTTPS servers on 127.0.0.1 ephemeral ports — extension API
//! servers ([`extension`]) and admission/conversion webhooks ([`webhook`]) — with serving
//! certificates generated from their specs at the scenario clock.
//!
//! A `down` backend gets a port that is bound but not listening (the socket is kept, so no other
//! server can take the port), so connecting to it is refused by the kernel, not by a pretend check. Each running backend keeps its TLS configuration swappable
//! ([`Backends::replace_certificate`]), so a test can break TLS while the server runs, and can be
//! stopped and started again on the same port ([`Backends::stop`], [`Backends::start`]): a
//! crashed pod whose Service keeps its endpoints, then the pod back.

pub mod container_log;
pub mod delegated;
pub mod extension;
pub mod webhook;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::certs::ServerPki;
use super::scenario::{Authorize, BackendKind, BackendSpec, CertSpec, Scenario};
use super::tls::{self, SharedConfig};
use container_log::ContainerLog;

/// One spawned backend.
pub struct Running {
    /// Loopback port.
    pub port: u16,
    config: Option<SharedConfig>,
    task: Option<JoinHandle<()>>,
    /// The bound, non-listening socket of a `down` backend.
    _reserved: Option<tokio::net::TcpSocket>,
}

/// What spawning a backend needs, kept to start one again after [`Backends::stop`].
struct SpawnContext {
    scenario: Scenario,
    pki: Arc<ServerPki>,
    shutdown: watch::Receiver<bool>,
    apiserver: delegated::ApiserverHandle,
}

/// All spawned backends.
#[derive(Default)]
pub struct Backends {
    running: BTreeMap<String, Running>,
    logs: BTreeMap<String, Arc<ContainerLog>>,
    context: Option<SpawnContext>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.running.iter().map(|(k, v)| (k, v.port)))
            .finish()
    }
}

/// A port that is bound but not listening: connections are refused while it stays reserved.
/// `port` 0 picks one.
fn closed_port(port: u16) -> anyhow::Result<(u16, tokio::net::TcpSocket)> {
    let socket = tokio::net::TcpSocket::new_v4().context("creating a socket")?;
    if port != 0 {
        // The port of a stopped backend may still have connections in TIME_WAIT. Only then:
        // a fresh reservation without SO_REUSEADDR keeps every other socket off the port.
        socket.set_reuseaddr(true).context("SO_REUSEADDR")?;
    }
    socket
        .bind(([127, 0, 0, 1], port).into())
        .with_context(|| format!("binding loopback port {port}"))?;
    Ok((socket.local_addr()?.port(), socket))
}

/// A listener on loopback `port` (0 picks one), with SO_REUSEADDR as `TcpListener::bind` sets it.
fn listener_on(port: u16) -> anyhow::Result<TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4().context("creating a socket")?;
    socket.set_reuseaddr(true).context("SO_REUSEADDR")?;
    socket
        .bind(([127, 0, 0, 1], port).into())
        .with_context(|| format!("binding loopback port {port}"))?;
    socket.listen(1024).context("listening")
}

impl Backends {
    /// Spawn every backend of a scenario.
    ///
    /// # Errors
    /// When a port cannot be bound or a certificate cannot be generated.
    pub async fn spawn(
        scenario: &Scenario,
        pki: &Arc<ServerPki>,
        shutdown: &watch::Receiver<bool>,
        apiserver: &delegated::ApiserverHandle,
    ) -> anyhow::Result<Self> {
        let mut running = BTreeMap::new();
        let mut logs = BTreeMap::new();
        for spec in &scenario.backends {
            let log = Arc::new(ContainerLog::default());
            let r = spawn_one(
                spec,
                scenario,
                pki,
                shutdown.clone(),
                log.clone(),
                apiserver,
                0,
            )
            .await
            .with_context(|| format!("backend {}", spec.name))?;
            running.insert(spec.name.clone(), r);
            logs.insert(spec.name.clone(), log);
        }
        Ok(Backends {
            running,
            logs,
            context: Some(SpawnContext {
                scenario: scenario.clone(),
                pki: pki.clone(),
                shutdown: shutdown.clone(),
                apiserver: apiserver.clone(),
            }),
        })
    }

    /// Stop a running backend as a crash would: its open connections are dropped and its port,
    /// kept bound, refuses new ones.
    ///
    /// # Errors
    /// Unknown backend, or one that is not running.
    pub async fn stop(&mut self, name: &str) -> anyhow::Result<()> {
        let r = self
            .running
            .get_mut(name)
            .with_context(|| format!("no backend {name}"))?;
        let task = r
            .task
            .take()
            .with_context(|| format!("backend {name} is not running"))?;
        task.abort();
        // Once the task is gone its listener and connections are closed.
        let _ = task.await;
        let (_, socket) = closed_port(r.port)?;
        r._reserved = Some(socket);
        r.config = None;
        Ok(())
    }

    /// Start a stopped backend again on the same port, as its scenario describes it (a fresh
    /// certificate from the same spec).
    ///
    /// # Errors
    /// Unknown backend, one that is running, or one its scenario says is down.
    pub async fn start(&mut self, name: &str) -> anyhow::Result<()> {
        let ctx = self
            .context
            .as_ref()
            .context("these backends were not spawned from a scenario")?;
        let r = self
            .running
            .get_mut(name)
            .with_context(|| format!("no backend {name}"))?;
        anyhow::ensure!(r.task.is_none(), "backend {name} is running");
        let spec = ctx
            .scenario
            .backends
            .iter()
            .find(|b| b.name == name)
            .with_context(|| format!("no backend {name} in the scenario"))?;
        anyhow::ensure!(
            !spec.behaviour.down,
            "backend {name} is down in its scenario"
        );
        let port = r.port;
        // Release the reserved port for the new listener.
        r._reserved = None;
        let log = self.logs.get(name).cloned().unwrap_or_default();
        let started = spawn_one(
            spec,
            &ctx.scenario,
            &ctx.pki,
            ctx.shutdown.clone(),
            log,
            &ctx.apiserver,
            port,
        )
        .await
        .with_context(|| format!("backend {name}"))?;
        self.running.insert(name.to_string(), started);
        Ok(())
    }

    /// Name → the backend's container log.
    pub fn logs(&self) -> BTreeMap<String, Arc<ContainerLog>> {
        self.logs.clone()
    }

    /// Name → port.
    pub fn ports(&self) -> BTreeMap<String, u16> {
        self.running
            .iter()
            .map(|(k, v)| (k.clone(), v.port))
            .collect()
    }

    /// Serve a new certificate on new connections of a backend.
    ///
    /// # Errors
    /// Unknown or down backend, or certificate generation failure.
    pub fn replace_certificate(
        &self,
        name: &str,
        pki: &ServerPki,
        spec: &CertSpec,
    ) -> anyhow::Result<()> {
        let r = self
            .running
            .get(name)
            .with_context(|| format!("no backend {name}"))?;
        let cfg = r
            .config
            .as_ref()
            .with_context(|| format!("backend {name} is down"))?;
        let cert = pki.issue_backend(spec)?;
        *cfg.write().unwrap_or_else(|e| e.into_inner()) = tls::server_config(&cert)?;
        Ok(())
    }

    /// Stop every backend.
    pub fn abort(&mut self) {
        for r in self.running.values_mut() {
            if let Some(t) = r.task.take() {
                t.abort();
            }
        }
    }
}

async fn spawn_one(
    spec: &BackendSpec,
    scenario: &Scenario,
    pki: &Arc<ServerPki>,
    shutdown: watch::Receiver<bool>,
    log: Arc<ContainerLog>,
    apiserver: &delegated::ApiserverHandle,
    port: u16,
) -> anyhow::Result<Running> {
    let mut delegation = None;
    if spec.kind == BackendKind::Extension && spec.behaviour.authorize == Authorize::Delegated {
        let identity = delegated::identity_of(spec, scenario);
        let startup = delegated::start(
            &identity,
            spec.behaviour.authentication_tolerate_lookup_failure,
            scenario,
            &log,
        );
        delegation = Some((identity, startup));
    }
    let exited = matches!(delegation, Some((_, delegated::Startup::Exited)));
    if spec.behaviour.down || exited {
        let (port, socket) = closed_port(port)?;
        return Ok(Running {
            port,
            config: None,
            task: None,
            _reserved: Some(socket),
        });
    }
    let cert = pki.issue_backend(&spec.certificate)?;
    let config: SharedConfig = Arc::new(RwLock::new(tls::server_config(&cert)?));
    let listener = listener_on(port)?;
    let port = listener.local_addr()?.port();
    let task = match spec.kind {
        BackendKind::Extension => {
            let delegation = delegation.map(|(identity, startup)| extension::Delegation {
                identity,
                anonymous: startup == delegated::Startup::Anonymous,
                apiserver: apiserver.clone(),
            });
            let backend = Arc::new(extension::Extension::new(
                spec,
                pki.clone(),
                log,
                port,
                delegation,
            )?);
            let stop = backend.stop_listening();
            tokio::spawn(tls::serve_until_stopped(
                listener,
                config.clone(),
                move |peer| extension::service(backend.clone(), peer),
                shutdown,
                stop,
            ))
        }
        BackendKind::AdmissionWebhook | BackendKind::ConversionWebhook => {
            let behaviour = Arc::new(spec.behaviour.clone());
            tokio::spawn(tls::serve(
                listener,
                config.clone(),
                move |_| webhook::service(behaviour.clone()),
                shutdown,
            ))
        }
    };
    Ok(Running {
        port,
        config: Some(config),
        task: Some(task),
        _reserved: None,
    })
}
