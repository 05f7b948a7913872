//! A hostile API server for the tests: HTTPS (rustls with ring, an rcgen CA) on 127.0.0.1 that
//! answers like a small, healthy cluster everywhere except on one path, where it misbehaves on
//! purpose in one [`Mode`]. It writes HTTP/1.1 by hand, because the misbehaviour is in what a
//! proper HTTP server would never send: a Content-Length it does not honour, a body that never
//! ends, a connection cut in the middle.
//!
//! Every loop is bounded in count and in time: each connection stops after [`LIFETIME`] and after
//! [`MAX_BYTES`] written, and the accept loop stops after [`LIFETIME`] or when the server is
//! dropped, so a failing test cannot leave it running.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use extpath::pki::generate::{LeafSpec, TestCa, Validity};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// The longest any connection (and the accept loop) lives.
pub const LIFETIME: Duration = Duration::from_secs(40);
/// The most one response writes.
pub const MAX_BYTES: u64 = 8 << 30;

/// How the hostile path misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Answers like a healthy cluster everywhere.
    Healthy,
    /// 200 with a chunked JSON list whose items never end, sent as fast as the client reads.
    EndlessBody,
    /// 200 announcing a 5 GB Content-Length, then one byte a second.
    Trickle,
    /// 200 with a list of this many items in one page (`limit` ignored).
    // The API concepts doc allows a server that does not support chunking to ignore `limit` and
    // return the whole list; an aggregated server may do just that, so `--max-objects` must hold
    // without the server's help.
    HugeList(usize),
    /// 200 with JSON nested this deep.
    // A recursive-descent parser without a depth limit overflows the stack on this; serde_json
    // stops at 128 levels, and the test holds the tool to an error rather than an abort.
    DeepJson(usize),
    /// 200 with an HTML login page.
    // What an authenticating proxy in front of the API server answers to a client it does not
    // recognise: a 200 that is not JSON must be a clear error, never an empty cluster.
    Html,
    /// 302 to the same URL.
    RedirectToSelf,
    /// 200 announcing a body, half of it sent, then the connection closed.
    CloseMidBody,
    /// `/metrics` as an endless run of bytes without a newline.
    NewlineFreeMetrics,
    /// `/metrics` as an endless run of lines, each a new series of a family the tool keeps.
    EndlessMetrics,
}

/// A running hostile server; it stops when dropped.
pub struct HostileServer {
    port: u16,
    /// PEM of the CA that signed its serving certificate.
    pub ca_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HostileServer {
    /// Serve on an ephemeral port; requests whose path starts with `target` get `mode`.
    pub async fn start(target: &'static str, mode: Mode) -> HostileServer {
        let (ca_pem, config) = tls_config();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let until = Instant::now() + LIFETIME;
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok(Ok((tcp, _))) = tokio::time::timeout_at(until, listener.accept()).await {
                let acceptor = acceptor.clone();
                conns.spawn(async move {
                    let serve = async {
                        let Ok(mut tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        if let Some(path) = read_request(&mut tls).await {
                            let mode = if path.starts_with(target) {
                                mode
                            } else {
                                Mode::Healthy
                            };
                            let _ = answer(&mut tls, &path, mode).await;
                        }
                        let _ = tls.shutdown().await;
                    };
                    let _ = tokio::time::timeout_at(until, serve).await;
                });
            }
        });
        HostileServer { port, ca_pem, task }
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

/// A port that accepts TCP, reads the client's TLS hello, and never answers it (for at most
/// [`LIFETIME`]); it stops when dropped.
pub struct StalledTls {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StalledTls {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StalledTls {
    /// Listen on an ephemeral port.
    pub async fn start() -> StalledTls {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let until = Instant::now() + LIFETIME;
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok(Ok((mut tcp, _))) = tokio::time::timeout_at(until, listener.accept()).await
            {
                conns.spawn(async move {
                    let mut buf = [0u8; 4096];
                    // Read whatever the client sends (its hello) until it gives up; never write.
                    let drain =
                        async { while matches!(tcp.read(&mut buf).await, Ok(n) if n > 0) {} };
                    let _ = tokio::time::timeout_at(until, drain).await;
                });
            }
        });
        StalledTls { port, task }
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }
}

fn tls_config() -> (String, Arc<rustls::ServerConfig>) {
    let validity = Validity::around(jiff::Timestamp::now(), 1, 30);
    let ca = TestCa::new("hostile-ca", validity).unwrap();
    let leaf = ca
        .issue(&LeafSpec::server(&["localhost", "127.0.0.1"], validity))
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.cert_der.clone()], leaf.key_der())
        .unwrap();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (ca.cert_pem.clone(), Arc::new(config))
}

/// The request target of the request head (bounded to 64 KiB); the body, if any, is not read.
async fn read_request<S: AsyncReadExt + Unpin>(s: &mut S) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > 64 << 10 {
            return None;
        }
        let n = s.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next()?;
    line.split(' ').nth(1).map(str::to_string)
}

async fn head<S: AsyncWrite + Unpin>(
    s: &mut S,
    status: &str,
    content_type: &str,
    length: Option<u64>,
    extra: &str,
) -> std::io::Result<()> {
    let length = match length {
        Some(n) => format!("content-length: {n}\r\n"),
        None => "transfer-encoding: chunked\r\n".into(),
    };
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n{length}{extra}connection: close\r\n\r\n"
    );
    s.write_all(text.as_bytes()).await
}

async fn whole<S: AsyncWrite + Unpin>(
    s: &mut S,
    status: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    head(s, status, content_type, Some(body.len() as u64), "").await?;
    s.write_all(body).await?;
    s.flush().await
}

async fn chunk<S: AsyncWrite + Unpin>(s: &mut S, data: &[u8]) -> std::io::Result<()> {
    s.write_all(format!("{:x}\r\n", data.len()).as_bytes())
        .await?;
    s.write_all(data).await?;
    s.write_all(b"\r\n").await
}

/// Write chunks made by `next(i)` until [`MAX_BYTES`] (the caller's deadline bounds the time).
async fn endless<S: AsyncWrite + Unpin>(
    s: &mut S,
    mut next: impl FnMut(u64) -> Vec<u8>,
) -> std::io::Result<()> {
    let mut written = 0u64;
    let mut i = 0u64;
    while written < MAX_BYTES {
        let data = next(i);
        written += data.len() as u64;
        i += 1;
        chunk(s, &data).await?;
    }
    s.write_all(b"0\r\n\r\n").await
}

/// What a list of `path` says about its kind and apiVersion.
fn list_kind(path: &str) -> (&'static str, &'static str) {
    let p = path.split('?').next().unwrap_or_default();
    let table = [
        ("apiservices", "APIServiceList", "apiregistration.k8s.io/v1"),
        (
            "validatingwebhookconfigurations",
            "ValidatingWebhookConfigurationList",
            "admissionregistration.k8s.io/v1",
        ),
        (
            "mutatingwebhookconfigurations",
            "MutatingWebhookConfigurationList",
            "admissionregistration.k8s.io/v1",
        ),
        (
            "customresourcedefinitions",
            "CustomResourceDefinitionList",
            "apiextensions.k8s.io/v1",
        ),
        (
            "flowschemas",
            "FlowSchemaList",
            "flowcontrol.apiserver.k8s.io/v1",
        ),
        (
            "prioritylevelconfigurations",
            "PriorityLevelConfigurationList",
            "flowcontrol.apiserver.k8s.io/v1",
        ),
        (
            "clusterrolebindings",
            "ClusterRoleBindingList",
            "rbac.authorization.k8s.io/v1",
        ),
        (
            "clusterroles",
            "ClusterRoleList",
            "rbac.authorization.k8s.io/v1",
        ),
        (
            "rolebindings",
            "RoleBindingList",
            "rbac.authorization.k8s.io/v1",
        ),
        ("roles", "RoleList", "rbac.authorization.k8s.io/v1"),
    ];
    table
        .iter()
        .find(|(suffix, _, _)| p.ends_with(suffix))
        .map_or(("List", "v1"), |(_, k, a)| (*k, *a))
}

/// One list item of the kind `path` lists, named by `i`.
fn item(path: &str, i: u64) -> String {
    let (kind, _) = list_kind(path);
    if kind == "APIServiceList" {
        format!(
            r#"{{"metadata":{{"name":"v1.g{i}.example.com","uid":"u{i}"}},"spec":{{"group":"g{i}.example.com","version":"v1","groupPriorityMinimum":1000,"versionPriority":15}},"status":{{"conditions":[{{"type":"Available","status":"True","reason":"Local"}}]}}}}"#
        )
    } else {
        format!(r#"{{"metadata":{{"name":"item-{i}","uid":"u{i}"}}}}"#)
    }
}

const METRICS: &str = "# HELP apiserver_request_total Counter of apiserver requests.\n\
# TYPE apiserver_request_total counter\n\
apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"\",resource=\"pods\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 12\n";

async fn answer<S: AsyncWrite + Unpin>(s: &mut S, path: &str, mode: Mode) -> std::io::Result<()> {
    let json = "application/json";
    let (kind, api_version) = list_kind(path);
    let list_open =
        format!(r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{}},"items":["#);
    match mode {
        Mode::Healthy => healthy(s, path).await,
        Mode::EndlessBody => {
            head(s, "200 OK", json, None, "").await?;
            chunk(s, list_open.as_bytes()).await?;
            endless(s, |i| {
                let mut c = String::new();
                for j in 0..256 {
                    c.push_str(&item(path, i * 256 + j));
                    c.push(',');
                }
                c.into_bytes()
            })
            .await
        }
        Mode::Trickle => {
            head(s, "200 OK", json, Some(5_000_000_000), "").await?;
            let body = list_open.as_bytes();
            // One byte a second: the connection's lifetime bounds it long before 5 GB.
            for b in body.iter().cycle().take(1 << 20) {
                s.write_all(&[*b]).await?;
                s.flush().await?;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Ok(())
        }
        Mode::HugeList(n) => {
            let mut body = list_open.into_bytes();
            for i in 0..n as u64 {
                if i > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(item(path, i).as_bytes());
            }
            body.extend_from_slice(b"]}");
            whole(s, "200 OK", json, &body).await
        }
        Mode::DeepJson(depth) => {
            let mut body = "[".repeat(depth);
            body.push_str(&"]".repeat(depth));
            whole(s, "200 OK", json, body.as_bytes()).await
        }
        Mode::Html => {
            let page = "<!DOCTYPE html><html><head><title>Sign in</title></head>\
                <body><form action=\"/login\"><input name=\"user\"></form></body></html>\n";
            whole(s, "200 OK", "text/html; charset=utf-8", page.as_bytes()).await
        }
        Mode::RedirectToSelf => {
            head(
                s,
                "302 Found",
                "text/plain",
                Some(0),
                &format!("location: {path}\r\n"),
            )
            .await?;
            s.flush().await
        }
        Mode::CloseMidBody => {
            let mut body = list_open.into_bytes();
            for i in 0..200 {
                body.extend_from_slice(item(path, i).as_bytes());
                body.push(b',');
            }
            head(s, "200 OK", json, Some(body.len() as u64 * 2), "").await?;
            s.write_all(&body).await?;
            s.flush().await
        }
        Mode::NewlineFreeMetrics => {
            head(s, "200 OK", "text/plain; version=0.0.4", None, "").await?;
            chunk(s, METRICS.as_bytes()).await?;
            chunk(s, b"apiserver_request_total{resource=\"").await?;
            endless(s, |_| vec![b'x'; 64 << 10]).await
        }
        Mode::EndlessMetrics => {
            head(s, "200 OK", "text/plain; version=0.0.4", None, "").await?;
            chunk(s, METRICS.as_bytes()).await?;
            endless(s, |i| {
                let mut c = String::new();
                for j in 0..512 {
                    c.push_str(&format!(
                        "apiserver_request_total{{code=\"200\",resource=\"r{}\",verb=\"GET\"}} 1\n",
                        i * 512 + j
                    ));
                }
                c.into_bytes()
            })
            .await
        }
    }
}

/// What a small healthy cluster answers: its version, passing health checks, a short `/metrics`,
/// an empty list for every collection, and 404 for the rest.
async fn healthy<S: AsyncWrite + Unpin>(s: &mut S, path: &str) -> std::io::Result<()> {
    let json = "application/json";
    let bare = path.split('?').next().unwrap_or_default();
    match bare {
        "/version" => {
            let v = r#"{"major":"1","minor":"31","gitVersion":"v1.31.4-hostile","platform":"linux/amd64"}"#;
            whole(s, "200 OK", json, v.as_bytes()).await
        }
        "/readyz" | "/livez" => {
            let text = format!(
                "[+]ping ok\n[+]etcd ok\n{} check passed\n",
                bare.trim_start_matches('/')
            );
            whole(s, "200 OK", "text/plain; charset=utf-8", text.as_bytes()).await
        }
        "/metrics" => whole(s, "200 OK", "text/plain; version=0.0.4", METRICS.as_bytes()).await,
        "/apis/flowcontrol.apiserver.k8s.io" => {
            let g = r#"{"kind":"APIGroup","apiVersion":"v1","name":"flowcontrol.apiserver.k8s.io","versions":[{"groupVersion":"flowcontrol.apiserver.k8s.io/v1","version":"v1"}]}"#;
            whole(s, "200 OK", json, g.as_bytes()).await
        }
        _ if path.contains("limit=") => {
            let (kind, api_version) = list_kind(path);
            let body = format!(
                r#"{{"kind":"{kind}","apiVersion":"{api_version}","metadata":{{"resourceVersion":"7"}},"items":[]}}"#
            );
            whole(s, "200 OK", json, body.as_bytes()).await
        }
        _ => {
            let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}"#;
            whole(s, "404 Not Found", json, body.as_bytes()).await
        }
    }
}
