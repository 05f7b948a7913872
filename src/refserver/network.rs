//! The cluster network as the reference server's outbound clients see it, and those clients.
//!
//! Routing: a Service's ClusterIP (or `<svc>.<ns>.svc`) goes, like kube-proxy, to a ready address
//! of the Service's Endpoints at the matching port; an address goes through the scenario's
//! `network:` map to a spawned backend's loopback port; anything else is refused. Errors carry the
//! address the real client would have dialled, in Go's words (`dial tcp 10.96.0.12:443: connect:
//! connection refused`, `service "x" not found`).
//!
//! Clients: HTTPS with rustls, verifying the served chain with `crate::pki::verify_server_chain`
//! against a caBundle and a server name at the scenario clock — so a wrong CA, a SAN mismatch or an
//! expired certificate fail with Go 1.22's `tls: failed to verify certificate: x509: …` — or not
//! verifying at all (the availability probe, `insecureSkipTLSVerify`). A client certificate (the
//! front-proxy client certificate) is presented when given.
//!
//! Connections are kept alive and reused, as kube-aggregator's and the webhook clients' Go
//! transports do: an idle HTTP/1.1 connection is pooled under everything that decided how it was
//! opened (the loopback port the route landed on, the server name, the trust, the client
//! certificate, the verification clock), so a changed route, caBundle or clock never reuses a
//! connection opened under the old one, and a backend that stops closes its pooled connections.
//!
//! It owns [`Cluster`] (where addresses land, the backends' ports and logs, the pool) and reads
//! Services and Endpoints from the store it is handed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::ring;
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::Value;
use tokio::net::TcpStream;

use super::backends::container_log::ContainerLog;
use super::certs::KeyedCert;
use super::store::{Key, Store};

/// The cluster around the server as its outbound clients reach it.
pub struct Cluster {
    /// The scenario's `network:` map: endpoint address (`IP` or `IP:port`) → backend name.
    pub network: BTreeMap<String, String>,
    /// Backend name → loopback port (a closed port for `down` backends).
    pub ports: BTreeMap<String, u16>,
    /// Backend name → its container log (served as `pods/log` of the Pods mapped to it).
    pub logs: BTreeMap<String, Arc<ContainerLog>>,
    /// The kept-alive connections to backends and webhooks.
    pub connections: ConnectionPool,
    /// The scenario clock, at which served certificates are verified.
    pub clock: jiff::Timestamp,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

/// The first ready address behind a Service port, as kube-proxy would pick one: the Service port
/// is found by its number, the endpoint port by that Service port's *name* (the same matching the
/// aggregator's availability check does, REFERENCE.md §2.1), and only `addresses` count —
/// `notReadyAddresses` receive no traffic. The first, not a random one, so that runs repeat.
fn ready_endpoint(store: &Store, ns: &str, svc: &Value, port: u16) -> Option<(String, u16)> {
    let name = svc.pointer("/metadata/name").and_then(Value::as_str)?;
    let sport = svc
        .pointer("/spec/ports")
        .and_then(Value::as_array)?
        .iter()
        .find(|p| p["port"].as_u64() == Some(port as u64))?;
    let port_name = sport["name"].as_str().unwrap_or("");
    let ep = store.get(&Key::new("", "endpoints", ns, name))?;
    for subset in ep["subsets"].as_array().into_iter().flatten() {
        let Some(p) = subset["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"].as_str().unwrap_or("") == port_name)
        else {
            continue;
        };
        if let Some(a) = subset["addresses"].as_array().and_then(|a| a.first()) {
            return Some((a["ip"].as_str()?.to_string(), p["port"].as_u64()? as u16));
        }
    }
    None
}

/// The spawned backend an address (a Pod IP of an Endpoints address, or a host the scenario's
/// `network:` map names) lands on.
fn mapped(cluster: &Cluster, host: &str, port: u16) -> Option<u16> {
    let backend = cluster
        .network
        .get(&format!("{host}:{port}"))
        .or_else(|| cluster.network.get(host))?;
    cluster.ports.get(backend).copied()
}

/// Where a connection to `host:port` lands: the address Go would name in errors, and the loopback
/// port to connect to (None = nothing listens there).
///
/// # Errors
/// `service "x" not found` for a `.svc` name without a Service; `dial tcp: lookup …` for unknown names.
pub fn route(
    cluster: &Cluster,
    store: &Store,
    host: &str,
    port: u16,
) -> Result<(String, Option<u16>), String> {
    if let Some(rest) = host
        .strip_suffix(".svc")
        .or_else(|| host.strip_suffix(".svc.cluster.local"))
    {
        // A Service with no ready endpoint still resolves (DNS gives the ClusterIP), and the
        // dial is then refused there: the error names the ClusterIP, as Go's would.
        let (name, ns) = rest.split_once('.').unwrap_or((rest, "default"));
        let svc = store
            .get(&Key::new("", "services", ns, name))
            .ok_or_else(|| format!("service \"{name}\" not found"))?;
        let ip = svc
            .pointer("/spec/clusterIP")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let target =
            ready_endpoint(store, ns, &svc, port).and_then(|(a, p)| mapped(cluster, &a, p));
        return Ok((format!("{ip}:{port}"), target));
    }
    if host.parse::<std::net::IpAddr>().is_ok() {
        if let Some(svc) = store.find("", "services", |s| {
            s.pointer("/spec/clusterIP").and_then(Value::as_str) == Some(host)
        }) {
            let ns = svc
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default");
            let target =
                ready_endpoint(store, ns, &svc, port).and_then(|(a, p)| mapped(cluster, &a, p));
            return Ok((format!("{host}:{port}"), target));
        }
        return Ok((format!("{host}:{port}"), mapped(cluster, host, port)));
    }
    match mapped(cluster, host, port) {
        Some(p) => Ok((format!("{host}:{port}"), Some(p))),
        // `localhost` resolves, but nothing of the scenario listens there: refused, not unknown.
        None if host == "localhost" => Ok(("127.0.0.1:".to_string() + &port.to_string(), None)),
        None => Err(format!("dial tcp: lookup {host}: no such host")),
    }
}

/// Open TCP to where `host:port` routes.
///
/// # Errors
/// Go's dial error text.
pub async fn connect(
    cluster: &Cluster,
    store: &Store,
    host: &str,
    port: u16,
) -> Result<TcpStream, String> {
    let (shown, target) = route(cluster, store, host, port)?;
    dial(&shown, target).await
}

/// Go's error for a dial to `shown` that nothing answers.
fn refused(shown: &str) -> String {
    format!("dial tcp {shown}: connect: connection refused")
}

/// Dial where a route landed (`None`: nothing listens there), failing in Go's words for `shown`.
async fn dial(shown: &str, loopback_port: Option<u16>) -> Result<TcpStream, String> {
    let Some(p) = loopback_port else {
        return Err(refused(shown));
    };
    TcpStream::connect(("127.0.0.1", p))
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => refused(shown),
            _ => format!("dial tcp {shown}: {e}"),
        })
}

/// How to check the server's certificate.
#[derive(Clone)]
pub enum Trust {
    /// Verify against these roots for this server name, at the scenario clock.
    Verify(Vec<CertificateDer<'static>>),
    /// Accept anything.
    Insecure,
}

#[derive(Debug)]
struct GoVerifier {
    roots: Option<Vec<CertificateDer<'static>>>,
    at: jiff::Timestamp,
    failure: Arc<Mutex<Option<String>>>,
    schemes: Vec<SignatureScheme>,
}

impl ServerCertVerifier for GoVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else {
            return Ok(ServerCertVerified::assertion());
        };
        let mut chain = vec![end_entity.clone()];
        chain.extend(intermediates.iter().cloned());
        let name = server_name.to_str();
        crate::pki::verify_server_chain(&chain, roots, &name, self.at)
            .map(|_| ServerCertVerified::assertion())
            .map_err(|e| {
                let msg = e.to_string();
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg.clone());
                rustls::Error::General(msg)
            })
    }
    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            m,
            c,
            d,
            &ring::default_provider().signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            m,
            c,
            d,
            &ring::default_provider().signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

/// One outbound HTTPS request.
pub struct Outbound<'a> {
    /// Method.
    pub method: &'a str,
    /// Host as in the URL (`10.96.0.12`, `webhook.ns.svc`).
    pub host: &'a str,
    /// Port.
    pub port: u16,
    /// Path and query.
    pub path: &'a str,
    /// TLS server name to verify (`<svc>.<ns>.svc` for the aggregator).
    pub server_name: &'a str,
    /// How to check the served chain.
    pub trust: Trust,
    /// Client certificate to present.
    pub client_cert: Option<&'a KeyedCert>,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Bytes,
}

/// The URL as Go prints it in `Op "URL": …`.
pub fn url_of(host: &str, port: u16, path: &str) -> String {
    format!("https://{host}:{port}{path}")
}

/// What a pooled connection was opened under; a connection is reused only for the same key.
#[derive(Clone, PartialEq, Eq, Hash)]
struct PoolKey {
    loopback_port: u16,
    server_name: String,
    /// `None`: not verified; otherwise the DER of every root, in order.
    roots: Option<Vec<Vec<u8>>>,
    client_cert: Option<Vec<u8>>,
    clock: jiff::Timestamp,
}

/// Idle (or busy) HTTP/1.1 senders by what they were opened under. A sender whose response body is
/// still being streamed is not ready and is skipped; a closed one is dropped when met.
#[derive(Default)]
pub struct ConnectionPool {
    idle: Mutex<std::collections::HashMap<PoolKey, Vec<SendRequest<Full<Bytes>>>>>,
    opened: std::sync::atomic::AtomicU64,
}

/// At most this many connections are kept per key (Go's `MaxIdleConnsPerHost` is 2 by default;
/// kube-apiserver's transports raise it, and the scale scenario probes hundreds of backends at once).
const POOL_PER_KEY: usize = 64;

impl ConnectionPool {
    /// How many connections were opened (TCP + TLS handshake) since the server started.
    pub fn opened(&self) -> u64 {
        self.opened.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drop every kept-alive connection to a loopback port.
    pub fn forget(&self, loopback_port: u16) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        idle.retain(|k, _| k.loopback_port != loopback_port);
    }

    fn take(&self, key: &PoolKey) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.get_mut(key)?;
        list.retain(|s| !s.is_closed());
        let i = list.iter().position(SendRequest::is_ready)?;
        Some(list.swap_remove(i))
    }

    fn put(&self, key: PoolKey, sender: SendRequest<Full<Bytes>>) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.entry(key).or_default();
        list.retain(|s| !s.is_closed());
        if list.len() < POOL_PER_KEY {
            list.push(sender);
        }
    }
}

/// Send an HTTPS request (HTTP/1.1 over a kept-alive connection when one is idle for the same
/// route and TLS settings) and return the response head with a streaming body.
///
/// # Errors
/// The cause in Go's words, without the `Op "URL": ` prefix the caller adds.
pub async fn send(
    cluster: &Cluster,
    store: &Store,
    out: Outbound<'_>,
) -> Result<Response<Incoming>, String> {
    let (shown, target) = route(cluster, store, out.host, out.port)?;
    let Some(loopback_port) = target else {
        return Err(refused(&shown));
    };
    let key = PoolKey {
        loopback_port,
        server_name: out.server_name.to_string(),
        roots: match &out.trust {
            Trust::Verify(r) => Some(r.iter().map(|c| c.to_vec()).collect()),
            Trust::Insecure => None,
        },
        client_cert: out
            .client_cert
            .and_then(|c| c.chain.first())
            .map(|c| c.to_vec()),
        clock: cluster.clock,
    };
    let request = || {
        let mut req = Request::builder()
            .method(out.method)
            .uri(out.path)
            .header(http::header::HOST, format!("{}:{}", out.host, out.port));
        for (k, v) in &out.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        req.body(Full::new(out.body.clone()))
            .map_err(|e| e.to_string())
    };
    let go_words = |e: hyper::Error| {
        if e.is_incomplete_message() || e.is_closed() {
            "EOF".to_string()
        } else {
            e.to_string()
        }
    };
    let (sender, resp) = match cluster.connections.take(&key) {
        // A kept-alive connection the backend closed while it sat idle fails before any answer;
        // like Go's transport, send once more on a new connection.
        Some(mut pooled) => match pooled.send_request(request()?).await {
            Ok(resp) => (pooled, resp),
            Err(_) => {
                let mut fresh = open(cluster, &out, &shown, loopback_port).await?;
                let resp = fresh.send_request(request()?).await.map_err(go_words)?;
                (fresh, resp)
            }
        },
        None => {
            let mut fresh = open(cluster, &out, &shown, loopback_port).await?;
            let resp = fresh.send_request(request()?).await.map_err(go_words)?;
            (fresh, resp)
        }
    };
    // Pooled now, while the body streams: the sender turns ready again once the body is read.
    cluster.connections.put(key, sender);
    Ok(resp)
}

/// Dial, shake hands and start an HTTP/1.1 connection.
async fn open(
    cluster: &Cluster,
    out: &Outbound<'_>,
    shown: &str,
    loopback_port: u16,
) -> Result<SendRequest<Full<Bytes>>, String> {
    let tcp = dial(shown, Some(loopback_port)).await?;
    cluster
        .connections
        .opened
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let failure = Arc::new(Mutex::new(None));
    let provider = Arc::new(ring::default_provider());
    let schemes = provider
        .signature_verification_algorithms
        .supported_schemes();
    let verifier = GoVerifier {
        roots: match &out.trust {
            Trust::Verify(r) => Some(r.clone()),
            Trust::Insecure => None,
        },
        at: cluster.clock,
        failure: failure.clone(),
        schemes,
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let mut config = match out.client_cert {
        Some(c) => builder
            .with_client_auth_cert(c.chain.clone(), c.key())
            .map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from(out.server_name.to_string()).map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(
            |e| match failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
                Some(msg) => format!("tls: failed to verify certificate: {msg}"),
                None if e.kind() == std::io::ErrorKind::UnexpectedEof => "EOF".to_string(),
                None => format!("remote error: {e}"),
            },
        )?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Go's `Op` for a method in `url.Error` (`Get`, `Post`).
pub fn go_op(method: &str) -> String {
    let m = method.to_ascii_lowercase();
    let mut c = m.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

/// Where a webhook `clientConfig` (admission or conversion) points.
pub struct WebhookTarget {
    /// Host in the URL.
    pub host: String,
    /// Port.
    pub port: u16,
    /// Path with the `?timeout=Ns` query kube-apiserver adds.
    pub path: String,
    /// Server name verified.
    pub server_name: String,
    /// Roots from the caBundle (empty: no trusted roots here, as no system CA signs test backends).
    pub roots: Vec<CertificateDer<'static>>,
}

impl WebhookTarget {
    /// The URL as Go prints it.
    pub fn url(&self) -> String {
        url_of(&self.host, self.port, &self.path)
    }
}

/// Resolve a `clientConfig` (`service` or `url`, plus `caBundle`).
///
/// # Errors
/// A message when the config names neither or the URL cannot be parsed.
pub fn webhook_target(cc: &Value, timeout_seconds: u64) -> Result<WebhookTarget, String> {
    use base64::Engine;
    let roots = cc["caBundle"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|pem| crate::pki::pem_certificates(&pem).ok())
        .unwrap_or_default();
    let (host, port, path) = if let Some(svc) = cc.get("service").filter(|s| !s.is_null()) {
        let ns = svc["namespace"].as_str().unwrap_or("default");
        let name = svc["name"].as_str().unwrap_or("");
        (
            format!("{name}.{ns}.svc"),
            svc["port"].as_u64().unwrap_or(443) as u16,
            svc["path"].as_str().unwrap_or("").to_string(),
        )
    } else if let Some(url) = cc["url"].as_str() {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("invalid url {url:?}: {e}"))?;
        (
            uri.host().unwrap_or("").to_string(),
            uri.port_u16().unwrap_or(443),
            uri.path().to_string(),
        )
    } else {
        return Err("clientConfig has neither service nor url".into());
    };
    let path = if path.is_empty() {
        "/".to_string()
    } else {
        path
    };
    Ok(WebhookTarget {
        server_name: host.clone(),
        host,
        port,
        path: format!("{path}?timeout={timeout_seconds}s"),
        roots,
    })
}
