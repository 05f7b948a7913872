//! Backends a scenario spawns: real HTTPS servers on 127.0.0.1 ephemeral ports — extension API
//! servers ([`extension`]) and admission/conversion webhooks ([`webhook`]) — with serving
//! certificates generated from their specs at the scenario clock.
//!
//! A `down` backend gets a port that is bound but not listening (the socket is kept, so no other
//! server can take the port), so connecting to it is refused by the kernel, not by a pretend check. Each running backend keeps its TLS configuration swappable
//! ([`Backends::replace_certificate`]), so a test can break TLS while the server runs.

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

/// All spawned backends.
#[derive(Default)]
pub struct Backends {
    running: BTreeMap<String, Running>,
    logs: BTreeMap<String, Arc<ContainerLog>>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.running.iter().map(|(k, v)| (k, v.port)))
            .finish()
    }
}

/// A port that is bound but not listening: connections are refused while it stays reserved.
fn closed_port() -> anyhow::Result<(u16, tokio::net::TcpSocket)> {
    let socket = tokio::net::TcpSocket::new_v4().context("creating a socket")?;
    socket
        .bind(([127, 0, 0, 1], 0).into())
        .context("binding a loopback port")?;
    Ok((socket.local_addr()?.port(), socket))
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
            )
            .await
            .with_context(|| format!("backend {}", spec.name))?;
            running.insert(spec.name.clone(), r);
            logs.insert(spec.name.clone(), log);
        }
        Ok(Backends { running, logs })
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
        let (port, socket) = closed_port()?;
        return Ok(Running {
            port,
            config: None,
            task: None,
            _reserved: Some(socket),
        });
    }
    let cert = pki.issue_backend(&spec.certificate)?;
    let config: SharedConfig = Arc::new(RwLock::new(tls::server_config(&cert)?));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding a loopback port")?;
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
