//! Serving certificates of backends, captured by a TLS handshake from where the tool runs.
//!
//! The handshake accepts whatever chain the backend presents — it records, it does not judge — and
//! the chain is then verified the way the API server's client would: against the owner's caBundle,
//! for `<svc>.<ns>.svc` (or the webhook URL's host), at the collection time
//! ([`super::verify`]), with Go's wording of any failure.
//!
//! Where a backend is reached: `--backend-address svc.ns=host:port` first; an ExternalName Service's
//! name (what the aggregator itself dials); the Service DNS name when running inside the cluster; a
//! webhook URL's host, unless `--backend-address urlhost:port=host:port` moves it. Pod and
//! ClusterIP addresses are never dialled from outside the cluster (they are not routable there,
//! and an intercepting proxy would answer in their place), so from a laptop most backends are a gap
//! ("pass --backend-address"), never an error.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::time::Instant;

use crate::bundle::probes::{ClientTool, ProbeKind};
use crate::bundle::{
    CertOrigin, CertSource, Certificate, EvidenceBundle, Gap, GapReason, Kind, ObjectRef, Probe,
    ProbeOrigin, Rung, ServiceRef,
};
use crate::collect::backends::Backends;

/// A backend to shake hands with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsTarget {
    /// Whose backend.
    pub owner: ObjectRef,
    /// The name the API server verifies (also sent as SNI).
    pub server_name: String,
    /// `host:port` to dial, or why there is none.
    pub address: Result<String, String>,
}

fn service_key(s: &ServiceRef) -> String {
    format!("{}.{}", s.name, s.namespace)
}

fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

fn address_for_service(
    s: &ServiceRef,
    backends: &Backends,
    overrides: &BTreeMap<String, String>,
) -> Result<String, String> {
    // `ServiceReference.port` defaults to 443 in both apiregistration and admissionregistration.
    let port = s.port.unwrap_or(443);
    if let Some(a) = overrides.get(&service_key(s)) {
        return Ok(a.clone());
    }
    let svc = backends.services.iter().find(|x| {
        x.metadata.namespace.as_deref() == Some(&s.namespace)
            && x.metadata.name.as_deref() == Some(&s.name)
    });
    let Some(svc) = svc else {
        return Err(format!("Service {}/{} not found", s.namespace, s.name));
    };
    let spec = svc.spec.clone().unwrap_or_default();
    // An ExternalName's target is a DNS name outside the cluster's Service network, so it is
    // as reachable from here as from the API server; it is checked before the in-cluster name.
    if spec.type_.as_deref() == Some("ExternalName")
        && let Some(name) = spec.external_name
    {
        return Ok(format!("{name}:{port}"));
    }
    if in_cluster() {
        return Ok(format!("{}:{port}", s.server_name()));
    }
    // Pod and ClusterIP addresses are only routable inside the cluster; dialling them from a
    // laptop wastes the deadline or, behind an intercepting proxy, shakes hands with the proxy.
    Err(format!(
        "backend not reachable from outside the cluster; pass --backend-address {}=HOST:PORT",
        service_key(s)
    ))
}

fn address_for_url(url: &str, overrides: &BTreeMap<String, String>) -> Result<String, String> {
    // Webhook and conversion URLs must be `https://` (admissionregistration validation), so a
    // missing port is 443; an IPv6 literal's colons are inside its brackets.
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("{url}: not an https URL"))?;
    let hostport = rest.split('/').next().unwrap_or(rest);
    let has_port = if hostport.starts_with('[') {
        hostport.contains("]:")
    } else {
        hostport.contains(':')
    };
    let hostport = if has_port {
        hostport.to_string()
    } else {
        format!("{hostport}:443")
    };
    Ok(overrides.get(&hostport).cloned().unwrap_or(hostport))
}

/// Every backend of the bundle, with where to reach it.
pub fn targets(
    bundle: &EvidenceBundle,
    backends: &Backends,
    overrides: &BTreeMap<String, String>,
) -> Vec<TlsTarget> {
    let mut out = Vec::new();
    for a in &bundle.api_services {
        let Some(s) = &a.service else { continue };
        out.push(TlsTarget {
            owner: ObjectRef::cluster(Kind::ApiService, &a.name),
            server_name: s.server_name(),
            address: address_for_service(s, backends, overrides),
        });
    }
    let mut webhook_targets = Vec::new();
    for w in &bundle.webhooks {
        webhook_targets.push((
            ObjectRef::cluster(w.kind.object_kind(), &w.name),
            w.target.clone(),
        ));
    }
    for c in &bundle.crds {
        if let Some(t) = &c.conversion.webhook {
            webhook_targets.push((
                ObjectRef::cluster(Kind::CustomResourceDefinition, &c.name),
                t.clone(),
            ));
        }
    }
    for (owner, t) in webhook_targets {
        let Some(server_name) = t.server_name() else {
            continue;
        };
        let address = match (&t.service, &t.url) {
            (Some(s), _) => address_for_service(s, backends, overrides),
            (None, Some(u)) => address_for_url(u, overrides),
            (None, None) => Err("webhook has neither service nor url".into()),
        };
        out.push(TlsTarget {
            owner,
            server_name,
            address,
        });
    }
    out
}

/// A verifier that records the presented chain and accepts it; judging happens afterwards, against
/// the owner's caBundle rather than the system roots this client would otherwise use. The
/// handshake signature is still checked: it proves the backend holds the key of the certificate
/// it presented, so the recorded chain is really the one it serves.
#[derive(Debug)]
struct Recorder {
    chain: Mutex<Vec<CertificateDer<'static>>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Recorder {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let mut chain = vec![end_entity.clone().into_owned()];
        chain.extend(intermediates.iter().map(|c| c.clone().into_owned()));
        if let Ok(mut slot) = self.chain.lock() {
            *slot = chain;
        }
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Why a served chain could not be captured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaptureError {
    /// The dial or the handshake did not finish in time (a black-holed route, a backend that
    /// accepts TCP and never answers TLS), in Go's words (`dial tcp …: i/o timeout`, `net/http:
    /// TLS handshake timeout`).
    #[error("{0}")]
    Timeout(String),
    /// The dial failed: refused, no route, unknown host — in Go's words (`dial tcp …: connect:
    /// connection refused`).
    #[error("{0}")]
    Unreachable(String),
    /// The whole run's `--timeout` ended first: says nothing about the backend.
    #[error("not finished within --timeout")]
    Deadline,
    /// Anything else (a handshake that failed outright, no address to dial).
    #[error("{0}")]
    Failed(String),
}

impl CaptureError {
    fn gap_reason(&self) -> GapReason {
        match self {
            CaptureError::Timeout(_) | CaptureError::Deadline => GapReason::Timeout,
            CaptureError::Failed(_) | CaptureError::Unreachable(_) => GapReason::Unreachable,
        }
    }

    /// The failure as the API server's own client would meet it at the same address, when it is
    /// one: a dial that fails or a backend that never answers. A handshake that fails outright is
    /// not counted: what extpath offers (its TLS versions, no client certificate) may differ.
    pub fn as_dial_failure(&self) -> Option<&str> {
        match self {
            CaptureError::Timeout(e) | CaptureError::Unreachable(e) => Some(e),
            CaptureError::Deadline | CaptureError::Failed(_) => None,
        }
    }
}

/// Go's words for a failed dial (`net.OpError`): what kube-apiserver's webhook client logs and
/// returns for the same failure.
pub fn go_dial_error(address: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    let cause = match e.kind() {
        K::ConnectionRefused => "connect: connection refused".to_string(),
        K::TimedOut => "i/o timeout".to_string(),
        K::HostUnreachable => "connect: no route to host".to_string(),
        K::NetworkUnreachable => "connect: network is unreachable".to_string(),
        K::ConnectionReset => "read: connection reset by peer".to_string(),
        K::AddrNotAvailable => "connect: cannot assign requested address".to_string(),
        _ if e.to_string().contains("lookup") || e.to_string().contains("Name or service") => {
            let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
            return format!("dial tcp: lookup {host}: no such host");
        }
        _ => e.to_string(),
    };
    format!("dial tcp {address}: {cause}")
}

/// Shake hands with `address`, sending `server_name` as SNI, and return the presented chain.
///
/// # Errors
/// [`CaptureError::Unreachable`] when the backend refuses, cannot be routed to, or does not
/// answer the dial or the handshake in time (as the API server would meet it);
/// [`CaptureError::Failed`] for anything else.
pub async fn capture_chain(
    address: &str,
    server_name: &str,
    timeout: Duration,
) -> Result<Vec<CertificateDer<'static>>, CaptureError> {
    let failed = |e: String| CaptureError::Failed(e);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let recorder = Arc::new(Recorder {
        chain: Mutex::new(Vec::new()),
        provider: provider.clone(),
    });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| failed(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(recorder.clone())
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    // The same SNI the API server's client sends (`<svc>.<ns>.svc`, REFERENCE.md §2.2): a backend
    // that picks its certificate by SNI then shows the one the API server gets.
    let sni = ServerName::try_from(server_name.to_string()).map_err(|e| failed(e.to_string()))?;
    // Whether the TCP dial finished, so a timeout can be worded as Go words it: a dial that hangs
    // and a handshake that hangs are different faults (no route vs. a backend not speaking TLS).
    let connected = std::sync::atomic::AtomicBool::new(false);
    let work = async {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| CaptureError::Unreachable(go_dial_error(address, &e)))?;
        connected.store(true, std::sync::atomic::Ordering::Relaxed);
        connector
            .connect(sni, tcp)
            .await
            .map_err(|e| failed(format!("TLS handshake with {address}: {e}")))?;
        Ok::<_, CaptureError>(())
    };
    tokio::time::timeout(timeout, work).await.map_err(|_| {
        if connected.load(std::sync::atomic::Ordering::Relaxed) {
            // Go's http.Transport: `net/http: TLS handshake timeout`.
            CaptureError::Timeout(format!(
                "net/http: TLS handshake timeout (TLS handshake with {address}: no answer within {timeout:?})"
            ))
        } else {
            CaptureError::Timeout(format!(
                "dial tcp {address}: i/o timeout (no answer within {timeout:?})"
            ))
        }
    })??;
    let chain = recorder.chain.lock().map(|c| c.clone()).unwrap_or_default();
    if chain.is_empty() {
        return Err(failed(format!("{address} presented no certificate")));
    }
    Ok(chain)
}

/// What the handshakes found: served chains, what could not be captured, and — for webhooks and
/// conversion webhooks whose backend address was resolved — the failed dials as observations of
/// that object, since the API server's own calls meet the same failure.
#[derive(Debug, Default)]
pub struct Handshakes {
    /// Certificates of the served chains.
    pub certs: Vec<Certificate>,
    /// Chains not captured, and why.
    pub gaps: Vec<Gap>,
    /// Failed dials to a resolved webhook backend.
    pub probes: Vec<Probe>,
}

/// Whether a failed dial to this owner's backend is evidence about the owner: the API server calls
/// webhooks and conversion webhooks itself, so a backend extpath cannot reach (at the address the
/// Service resolves to) is one the API server cannot reach either. An APIService is judged on the
/// aggregator's own discovery probe instead, which goes the API server's way.
fn dial_is_evidence(owner: &ObjectRef) -> bool {
    matches!(
        owner.kind,
        Kind::ValidatingWebhook | Kind::MutatingWebhook | Kind::CustomResourceDefinition
    )
}

/// The observation of a failed dial to `t`'s backend.
fn dial_probe(t: &TlsTarget, error: String, latency: Duration) -> Probe {
    let mut p = Probe::new(ProbeOrigin {
        kind: ProbeKind::Probe,
        tool: ClientTool::Extpath,
        files: Vec::new(),
    });
    p.error = Some(error);
    p.rung = Some(Rung::Tls);
    p.target = Some(t.owner.clone());
    p.latency_ms = Some(latency.as_secs_f64() * 1000.0);
    p.at = Some(jiff::Timestamp::now());
    p
}

/// Capture every target's chain, all at once; unreachable backends are gaps (and, for webhooks,
/// observations).
pub async fn capture_all(
    targets: Vec<TlsTarget>,
    request_timeout: Duration,
    deadline: Instant,
) -> Handshakes {
    // kube-aggregator's availability check gives a backend 5 s (its HTTP client timeout in
    // available_controller.go): a backend slower than that to answer is unavailable to the
    // aggregator already, so waiting longer would not change the verdict.
    let connect_timeout = request_timeout.min(Duration::from_secs(5));
    let results = futures::stream::iter(targets)
        .map(|t| async move {
            let started = Instant::now();
            let r = match &t.address {
                Ok(addr) => match tokio::time::timeout_at(
                    deadline,
                    capture_chain(addr, &t.server_name, connect_timeout),
                )
                .await
                {
                    Ok(r) => r,
                    Err(_) => Err(CaptureError::Deadline),
                },
                Err(why) => Err(CaptureError::Failed(why.clone())),
            };
            (t, r, started.elapsed())
        })
        // At most 64 at once: a cluster with hundreds of webhooks must not open hundreds of
        // sockets (and file descriptors) in one burst.
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
    let mut out = Handshakes::default();
    let mut results = results;
    // Answers arrive in any order; sorted by owner so that one cluster gives one bundle.
    results.sort_by(|a, b| a.0.owner.cmp(&b.0.owner));
    for (t, r, took) in results {
        match r {
            Ok(chain) => {
                let endpoint = t.address.clone().ok();
                for (i, der) in chain.iter().enumerate() {
                    match crate::pki::decode_der(der, i) {
                        Ok(info) => out.certs.push(
                            Certificate::from_info(
                                info,
                                CertOrigin {
                                    source: CertSource::ServedChain,
                                    owner: Some(t.owner.clone()),
                                    file: None,
                                    endpoint: endpoint.clone(),
                                    chain_index: i,
                                },
                            )
                            .with_der(der),
                        ),
                        Err(e) => out.gaps.push(Gap::new(
                            format!("tls/{}", t.owner),
                            GapReason::Error,
                            e.to_string(),
                        )),
                    }
                }
            }
            Err(why) => {
                if let Some(e) = why.as_dial_failure()
                    && t.address.is_ok()
                    && dial_is_evidence(&t.owner)
                {
                    out.probes.push(dial_probe(&t, e.to_string(), took));
                }
                // No address to dial (ClusterIP from a laptop) is evidence not supplied, not a
                // backend that failed: the fix is `--backend-address`, not the backend.
                out.gaps.push(Gap::new(
                    format!("tls/{}", t.owner),
                    if t.address.is_err() {
                        GapReason::NotSupplied
                    } else {
                        why.gap_reason()
                    },
                    why.to_string(),
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_urls_resolve_to_host_and_port() {
        let none = BTreeMap::new();
        assert_eq!(
            address_for_url("https://127.0.0.1:9444/validate", &none).unwrap(),
            "127.0.0.1:9444"
        );
        assert_eq!(
            address_for_url("https://hook.example.com/x", &none).unwrap(),
            "hook.example.com:443"
        );
        assert!(address_for_url("http://x", &none).is_err());
        let moved = [(
            "hook.example.com:443".to_string(),
            "127.0.0.1:9".to_string(),
        )]
        .into();
        assert_eq!(
            address_for_url("https://hook.example.com/x", &moved).unwrap(),
            "127.0.0.1:9"
        );
    }

    #[test]
    fn overrides_win() {
        let s = ServiceRef {
            namespace: "kube-system".into(),
            name: "metrics-server".into(),
            port: Some(443),
            path: None,
        };
        let overrides = [(
            "metrics-server.kube-system".to_string(),
            "127.0.0.1:4443".to_string(),
        )]
        .into();
        assert_eq!(
            address_for_service(&s, &Backends::default(), &overrides).unwrap(),
            "127.0.0.1:4443"
        );
        let err = address_for_service(&s, &Backends::default(), &BTreeMap::new()).unwrap_err();
        assert!(err.contains("not found"), "{err}");
    }

    /// A backend that refuses is met in Go's words, as the API server's webhook client meets it,
    /// and counts as a dial failure; a port that accepts and never answers TLS is a handshake
    /// timeout.
    #[tokio::test]
    async fn a_refused_or_silent_backend_is_a_dial_failure_in_gos_words() {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let closed = socket.local_addr().unwrap().to_string();
        let e = capture_chain(&closed, "x.ns.svc", Duration::from_secs(2))
            .await
            .unwrap_err();
        assert_eq!(
            e.as_dial_failure(),
            Some(format!("dial tcp {closed}: connect: connection refused").as_str())
        );
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = silent.local_addr().unwrap().to_string();
        let e = capture_chain(&addr, "x.ns.svc", Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(
            e.as_dial_failure()
                .is_some_and(|t| t.starts_with("net/http: TLS handshake timeout")),
            "{e:?}"
        );
        assert!(CaptureError::Deadline.as_dial_failure().is_none());
    }
}
