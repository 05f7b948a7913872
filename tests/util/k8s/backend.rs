//! The test's own HTTPS backend for admission webhooks and CRD conversion, served on 127.0.0.1
//! with a certificate from the cluster's backends CA. What it answers is switched by the test while
//! kube-apiserver calls it ([`Backend::answer`]) — the ways a webhook breaks in production: it
//! refuses (stopped), stalls, answers 500, answers a review that cannot be used, or works and
//! denies on policy.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};

use super::RUNTIME;
use super::pki::Authority;

/// What the backend answers.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A well-formed review: allowed (a conversion rewrites `apiVersion`).
    Allow,
    /// `allowed: false` with this message (a working webhook enforcing its policy).
    Deny(String),
    /// Allowed, with this JSONPatch (mutating webhooks; it may not apply, or make the object
    /// invalid).
    Patch(Value),
    /// This HTTP status with a short text body.
    Status(u16),
    /// Wait this long, then allow (past the webhook's `timeoutSeconds`, the call times out).
    Stall(Duration),
    /// 200 with a body that is not a review.
    NotAReview,
    /// A conversion that answers with objects of the wrong apiVersion (a converter bug).
    WrongVersion,
    /// A conversion that converts, and also writes this label on every object (a converter that
    /// copies a field into a label, whatever the field holds).
    ConvertWithLabel { key: String, value: String },
}

type Body = Full<Bytes>;

/// A running backend.
pub struct Backend {
    pub port: u16,
    /// Names the serving certificate carries.
    pub names: Vec<String>,
    answer: Arc<Mutex<Answer>>,
    calls: Arc<AtomicU64>,
    acceptor: tokio_rustls::TlsAcceptor,
    task: Option<tokio::task::JoinHandle<()>>,
    reserved: Option<tokio::net::TcpSocket>,
}

impl Backend {
    /// Serve on an ephemeral port with a certificate for `names` (plus 127.0.0.1 and localhost)
    /// from `ca`.
    pub fn start(ca: &Authority, file: &str, names: &[&str]) -> Self {
        let mut all: Vec<&str> = names.to_vec();
        all.extend(["127.0.0.1", "localhost"]);
        let pair = ca.serving(file, &all);
        let acceptor = acceptor(&pair.cert_pem, &std::fs::read_to_string(&pair.key).unwrap());
        let mut b = Backend {
            port: 0,
            names: all.iter().map(|s| s.to_string()).collect(),
            answer: Arc::new(Mutex::new(Answer::Allow)),
            calls: Arc::new(AtomicU64::new(0)),
            acceptor,
            task: None,
            reserved: None,
        };
        b.listen(0);
        b
    }

    /// `https://127.0.0.1:PORT/PATH`.
    pub fn url(&self, path: &str) -> String {
        format!(
            "https://127.0.0.1:{}/{}",
            self.port,
            path.trim_start_matches('/')
        )
    }

    /// Answer `a` from now on.
    pub fn answer(&self, a: Answer) {
        *self.answer.lock().unwrap() = a;
    }

    /// How many requests it has been sent.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Stop as a crash would: open connections dropped, the port kept bound but not listening,
    /// so a dial is refused.
    pub fn stop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = RUNTIME.block_on(t);
        }
        let _guard = RUNTIME.enter();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind(([127, 0, 0, 1], self.port).into()).unwrap();
        self.reserved = Some(socket);
    }

    /// Start again on the same port.
    pub fn restart(&mut self) {
        self.reserved = None;
        self.listen(self.port);
    }

    fn listen(&mut self, port: u16) {
        let _guard = RUNTIME.enter();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind(([127, 0, 0, 1], port).into()).unwrap();
        let listener = socket.listen(128).unwrap();
        self.port = listener.local_addr().unwrap().port();
        let acceptor = self.acceptor.clone();
        let answer = self.answer.clone();
        let calls = self.calls.clone();
        self.task = Some(RUNTIME.spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let answer = answer.clone();
                let calls = calls.clone();
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = hyper::service::service_fn(move |req| {
                        let a = answer.lock().unwrap().clone();
                        calls.fetch_add(1, Ordering::Relaxed);
                        async move { Ok::<_, Infallible>(respond(a, req).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
                while connections.try_join_next().is_some() {}
            }
        }));
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

fn acceptor(cert_pem: &str, key_pem: &str) -> tokio_rustls::TlsAcceptor {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = extpath::pki::pem_certificates(cert_pem.as_bytes())
        .unwrap()
        .into_iter()
        .collect::<Vec<_>>();
    let key = rustls_pki_types::PrivateKeyDer::Pkcs8(rustls_pki_types::PrivatePkcs8KeyDer::from(
        pem_der(key_pem),
    ));
    let mut cfg = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(cfg))
}

fn pem_der(pem: &str) -> Vec<u8> {
    let b64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap()
}

fn text(code: u16, body: &str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

fn json_body(v: &Value) -> Response<Body> {
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(v.to_string())))
        .unwrap()
}

async fn respond(answer: Answer, req: Request<Incoming>) -> Response<Body> {
    if let Answer::Stall(d) = answer {
        tokio::time::sleep(d).await;
    }
    if let Answer::Status(code) = answer {
        return text(code, "internal error in the webhook backend\n");
    }
    let body = match req.into_body().collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => return text(400, "bad request\n"),
    };
    if let Answer::NotAReview = answer {
        return text(200, "this is not a review\n");
    }
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let uid = review
        .pointer("/request/uid")
        .cloned()
        .unwrap_or(Value::Null);
    if review["kind"] == "ConversionReview" {
        let desired = review
            .pointer("/request/desiredAPIVersion")
            .cloned()
            .unwrap_or(Value::Null);
        let converted: Vec<Value> = review
            .pointer("/request/objects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|o| {
                let mut o = o.clone();
                o["apiVersion"] = if matches!(answer, Answer::WrongVersion) {
                    o["apiVersion"].clone()
                } else {
                    desired.clone()
                };
                if let Answer::ConvertWithLabel { key, value } = &answer {
                    if !o["metadata"]["labels"].is_object() {
                        o["metadata"]["labels"] = json!({});
                    }
                    o["metadata"]["labels"][key] = json!(value);
                }
                o
            })
            .collect();
        return json_body(&json!({
            "apiVersion": review["apiVersion"], "kind": "ConversionReview",
            "response": {"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}
        }));
    }
    let mut response = json!({"uid": uid, "allowed": !matches!(answer, Answer::Deny(_))});
    match &answer {
        Answer::Deny(message) => {
            response["status"] = json!({"code": 403, "reason": "Forbidden", "message": message});
        }
        Answer::Patch(patch) => {
            response["patchType"] = json!("JSONPatch");
            response["patch"] =
                json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
        }
        _ => {}
    }
    json_body(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response
    }))
}
