//! Clients that keep using the cluster while a scan watches it: in production a broken webhook, a
//! full priority level or slow storage shows in the API server's metrics because clients keep
//! sending requests, and a scan's metrics window reads exactly that.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::RUNTIME;
use super::control_plane::ControlPlane;

/// One request a client repeats.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: reqwest::Method,
    pub path: String,
    /// A JSON body; `{n}` is replaced by a counter (unique object names).
    pub body: Option<String>,
    /// A bearer token (a static token user) instead of the admin's certificate.
    pub token: Option<&'static str>,
}

impl Call {
    pub fn get(path: &str) -> Self {
        Call {
            method: reqwest::Method::GET,
            path: path.into(),
            body: None,
            token: None,
        }
    }
    pub fn post(path: &str, body: &str) -> Self {
        Call {
            method: reqwest::Method::POST,
            path: path.into(),
            body: Some(body.into()),
            token: None,
        }
    }
    pub fn by_user(mut self, token: &'static str) -> Self {
        self.token = Some(token);
        self
    }
}

/// Running clients; they stop when this drops.
pub struct Traffic {
    stop: Arc<AtomicBool>,
    /// HTTP status (0: no answer) → count.
    pub statuses: Arc<Mutex<BTreeMap<u16, u64>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Traffic {
    /// `clients` concurrent loops, each repeating `calls` in turn with `pause` between requests.
    pub fn start(cp: &ControlPlane, calls: Vec<Call>, clients: usize, pause: Duration) -> Self {
        Self::start_with_content_type(cp, calls, clients, pause, "application/json")
    }

    /// [`Traffic::start`] with bodies sent as `content_type` (a PATCH's
    /// `application/merge-patch+json`).
    pub fn start_with_content_type(
        cp: &ControlPlane,
        calls: Vec<Call>,
        clients: usize,
        pause: Duration,
        content_type: &'static str,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let statuses = Arc::new(Mutex::new(BTreeMap::new()));
        let base = cp.url();
        let mut tasks = Vec::new();
        // The token clients must not present the admin certificate: the API server would
        // authenticate the certificate first.
        let token_client = reqwest::Client::builder()
            .tls_backend_rustls()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .tls_certs_only([
                reqwest::Certificate::from_pem(cp.pki.cluster_ca.pem().as_bytes()).unwrap(),
            ])
            .build()
            .unwrap();
        for client in 0..clients {
            let (stop, statuses, base, calls) =
                (stop.clone(), statuses.clone(), base.clone(), calls.clone());
            let admin = cp.admin.clone();
            let token_client = token_client.clone();
            tasks.push(RUNTIME.spawn(async move {
                let mut n: u64 = 0;
                while !stop.load(Ordering::Relaxed) {
                    for call in &calls {
                        n += 1;
                        let http = if call.token.is_some() {
                            &token_client
                        } else {
                            &admin
                        };
                        let mut req =
                            http.request(call.method.clone(), format!("{base}{}", call.path));
                        if let Some(t) = call.token {
                            req = req.bearer_auth(t);
                        }
                        if let Some(b) = &call.body {
                            req = req
                                .header("content-type", content_type)
                                .body(b.replace("{n}", &format!("{client}-{n}")));
                        }
                        let code = match req.send().await {
                            Ok(r) => {
                                let c = r.status().as_u16();
                                let _ = r.bytes().await;
                                c
                            }
                            Err(_) => 0,
                        };
                        *statuses.lock().unwrap().entry(code).or_default() += 1;
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        tokio::time::sleep(pause).await;
                    }
                }
            }));
        }
        Traffic {
            stop,
            statuses,
            tasks,
        }
    }

    /// How many answers had `code` so far.
    pub fn count(&self, code: u16) -> u64 {
        self.statuses
            .lock()
            .unwrap()
            .get(&code)
            .copied()
            .unwrap_or(0)
    }

    /// Every answer so far, by status.
    pub fn seen(&self) -> BTreeMap<u16, u64> {
        self.statuses.lock().unwrap().clone()
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A watch whose client stops reading once the response headers arrived — a controller stuck in
/// its event handler, a client behind a saturated link. Over HTTP/1.1, so only TCP's own buffers
/// stand between the API server's watch goroutine and a blocked write. Closed when dropped.
pub struct StalledWatch {
    _stream: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
}

impl StalledWatch {
    /// Open `GET PATH` (a `?watch=1` path) on kube-apiserver as the admin and read only the
    /// response head; `None` when it does not answer 200.
    pub fn open(cp: &ControlPlane, path: &str) -> Option<Self> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let config = super::pki::client_tls(&cp.pki, &["http/1.1"]);
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
        let (port, path) = (cp.port, path.to_string());
        RUNTIME.block_on(async move {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()?;
            // The smallest receive buffer the kernel allows, so that the API server's writes block
            // after a few events rather than after megabytes.
            shrink_receive_buffer(&tcp);
            let name = rustls_pki_types::ServerName::try_from("127.0.0.1").ok()?;
            let mut tls = connector.connect(name, tcp).await.ok()?;
            tls.write_all(
                format!(
                    "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n"
                )
                .as_bytes(),
            )
            .await
            .ok()?;
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
                tls.read_exact(&mut byte).await.ok()?;
                head.push(byte[0]);
            }
            String::from_utf8_lossy(&head)
                .starts_with("HTTP/1.1 200")
                .then_some(StalledWatch { _stream: tls })
        })
    }
}

/// Set SO_RCVBUF to its minimum on `tcp` (the kernel doubles and floors it); best effort.
fn shrink_receive_buffer(tcp: &tokio::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 4096;
    // SAFETY: setsockopt on a descriptor `tcp` owns, with a pointer to a live c_int of the size
    // passed.
    unsafe {
        libc::setsockopt(
            tcp.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}
