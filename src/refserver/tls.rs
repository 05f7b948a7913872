//! HTTPS serving shared by the reference server and the backends it spawns: rustls (ring) with
//! ALPN h2/http1.1, an accept loop over hyper-util's auto builder, and client certificates.
//!
//! Client certificates are requested but never required or checked during the handshake, like Go's
//! `tls.RequestClientCert` in Kubernetes servers: an untrusted certificate does not break the
//! connection, it just does not authenticate anyone. The handler verifies the chain against the CA
//! it trusts ([`client_identity`]) — which is how a front-proxy CA mismatch becomes a 401 instead of
//! a TLS error. The serving configuration can be swapped while the server runs (a test replaces a
//! backend's certificate); new connections pick it up.

use std::convert::Infallible;
use std::sync::{Arc, RwLock};

use axum::body::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rustls::crypto::ring;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, ServerConfig, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::certs::KeyedCert;

/// The client certificate chain a connection presented (leaf first), if any.
pub type PeerChain = Option<Arc<Vec<CertificateDer<'static>>>>;

/// A swappable server configuration.
pub type SharedConfig = Arc<RwLock<Arc<ServerConfig>>>;

// Not rustls's `WebPkiClientVerifier::allow_unauthenticated`: that one still fails the handshake
// when a certificate *is* presented and does not chain to its roots, so a front-proxy CA mismatch
// would show as a TLS alert on the client instead of the 401 and the `Unable to authenticate the
// request` log line a Go extension server gives (REFERENCE §2.3).
#[derive(Debug)]
struct RequestAnyClientCert {
    schemes: Vec<SignatureScheme>,
}

impl ClientCertVerifier for RequestAnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    // No CA names in the CertificateRequest: a Go client then sends its certificate whatever its
    // issuer (`SupportsCertificate` checks `AcceptableCAs` only when there are some), while with
    // names listed it would send nothing and a wrong front-proxy CA would look like anonymous.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }
    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        // Trust is judged per request by `client_identity`, against the CA the handler trusts.
        Ok(ClientCertVerified::assertion())
    }
    // The handshake signatures are still checked: the client must hold the key of the certificate
    // it presents, as with Go's `RequestClientCert`, so a copied certificate alone identifies no one.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &ring::default_provider().signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &ring::default_provider().signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

/// A rustls server configuration for `cert`, requesting (not requiring) client certificates.
///
/// # Errors
/// When rustls rejects the key.
pub fn server_config(cert: &KeyedCert) -> Result<Arc<ServerConfig>, rustls::Error> {
    let provider = Arc::new(ring::default_provider());
    let schemes = provider
        .signature_verification_algorithms
        .supported_schemes();
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(RequestAnyClientCert { schemes }))
        .with_single_cert(cert.chain.clone(), cert.key())?;
    // In a Go server's order (`h2` first), so clients that speak HTTP/2 to kube-apiserver —
    // kubectl, kube-rs — negotiate it here too.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serve HTTPS on `listener` until `shutdown` turns true; `make` builds the service of one
/// connection from its client certificate chain. Open connections (watches) are dropped at shutdown.
pub async fn serve<F, S>(
    listener: TcpListener,
    config: SharedConfig,
    make: F,
    shutdown: watch::Receiver<bool>,
) where
    F: Fn(PeerChain) -> S + Send + Sync + 'static,
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let (_never, stop) = watch::channel(false);
    serve_until_stopped(listener, config, make, shutdown, stop).await;
}

/// [`serve`], but when `stop` turns true the server stops listening — its port refuses new
/// connections — while the connections it has keep being served until `shutdown`: what a Go
/// server's graceful termination does (`HTTPServerStoppedListening`), which keeps open watch
/// streams open and quiet.
pub async fn serve_until_stopped<F, S>(
    listener: TcpListener,
    config: SharedConfig,
    make: F,
    mut shutdown: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) where
    F: Fn(PeerChain) -> S + Send + Sync + 'static,
    S: tower::Service<Request<Incoming>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let make = Arc::new(make);
    let mut connections = JoinSet::new();
    let mut stopped = false;
    let mut may_stop = true;
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            changed = stop.changed(), if may_stop => match changed {
                // No one can stop it any more: it listens until shutdown.
                Err(_) => may_stop = false,
                Ok(()) if *stop.borrow() => {
                    stopped = true;
                    break;
                }
                Ok(()) => {}
            },
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let cfg = config.read().unwrap_or_else(|e| e.into_inner()).clone();
                let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                let make = make.clone();
                let mut going_away = stop.clone();
                // The handshake runs in the connection task so a slow client cannot stall accept.
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else { return };
                    let chain: PeerChain = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .map(|c| Arc::new(c.iter().map(|d| d.clone().into_owned()).collect()));
                    let svc = make(chain);
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(tls), TowerToHyperService::new(svc));
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        () = turned_true(&mut going_away) => {
                            // Like Go's `Server.Shutdown`: a kept-alive idle connection closes
                            // (its clients dial again and are refused), a response in flight —
                            // an open watch — runs to its end.
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
        }
        while connections.try_join_next().is_some() {}
    }
    if stopped && !*shutdown.borrow() {
        let addr = listener.local_addr().ok();
        drop(listener);
        // Keep the port bound but not listening, so that no other server takes it and
        // connecting to it is refused by the kernel (best effort: the bind may be refused).
        let _reserved = addr.and_then(|a| {
            let socket = tokio::net::TcpSocket::new_v4().ok()?;
            socket.set_reuseaddr(true).ok()?;
            socket.bind(a).ok()?;
            Some(socket)
        });
        let _ = shutdown.changed().await;
    }
    connections.abort_all();
}

/// Resolves when `flag` is (or turns) true; never, once no one can turn it.
async fn turned_true(flag: &mut watch::Receiver<bool>) {
    loop {
        if *flag.borrow_and_update() {
            return;
        }
        if flag.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The identity a verified client certificate carries: CN as user, O as groups — the mapping of
/// the x509 authenticator (`apiserver pkg/authentication/request/x509/x509.go`,
/// `CommonNameUserConversion`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertIdentity {
    /// Subject CN.
    pub user: String,
    /// Subject O values.
    pub groups: Vec<String>,
}

/// Verify `chain` for client authentication against `roots` at `at`, and read its identity.
///
/// # Errors
/// The webpki error as text when the chain does not verify.
pub fn client_identity(
    chain: &[CertificateDer<'_>],
    roots: &[CertificateDer<'_>],
    at: jiff::Timestamp,
) -> Result<CertIdentity, String> {
    let leaf = chain.first().ok_or("no certificate")?;
    let anchors: Vec<_> = roots
        .iter()
        .filter_map(|r| webpki::anchor_from_trusted_cert(r).ok())
        .collect();
    let ee = webpki::EndEntityCert::try_from(leaf).map_err(|e| format!("{e:?}"))?;
    let time =
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(at.as_second().max(0) as u64));
    // Client-auth extended key usage, as the x509 authenticator asks for (`ExtKeyUsageClientAuth`):
    // a serving certificate reused as the proxy client certificate is refused, as in Kubernetes.
    ee.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &anchors,
        &chain[1..],
        time,
        webpki::KeyUsage::client_auth(),
        None,
        None,
    )
    .map_err(|e| format!("{e:?}"))?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).map_err(|e| e.to_string())?;
    let subject = cert.subject();
    let user = subject
        .iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok())
        .unwrap_or_default()
        .to_string();
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Ok(CertIdentity { user, groups })
}
