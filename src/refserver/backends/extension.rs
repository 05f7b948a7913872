//! A spawned extension API server: discovery of its group/version, list/get/watch of its objects,
//! delegated authentication of the front proxy, delegated authorization, and the scenario's bad
//! behaviours (slow, fixed status, wrong or non-APIResourceList discovery, closing watches, going
//! away after its first watch — it stops listening and its open watches stay quiet).
//!
//! Authentication is what a generic apiserver with requestheader authentication does: the
//! `X-Remote-*` headers count only when the client certificate chains to the trusted front-proxy CA
//! and its CN is `front-proxy-client`; otherwise the request is rejected with 401 (anonymous auth
//! off), and a certificate that does not verify is logged as the real server logs it. With
//! `frontProxy: ignore` the headers are trusted whatever the certificate.
//!
//! Authorization: `authorize: delegated` is a generic apiserver's delegated authentication and
//! authorization decided by the scenario's RBAC objects ([`super::delegated`]): masters are allowed
//! without asking, everyone else by a SubjectAccessReview created as the backend's identity — the
//! 500 a forbidden review gives (`Internal Server Error: "<uri>":
//! subjectaccessreviews.authorization.k8s.io is forbidden: …`) with the log lines it writes, or
//! the 403 of a review that says no — and an identity that may not read its authentication
//! configuration makes it exit at start or, tolerating that, treat every request as anonymous.
//! `authorize: all` allows everyone; `authorize: none` is a review that always denies (403).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::super::authn::{UserInfo, forbidden_message};
use super::super::certs::ServerPki;
use super::super::request::RequestInfo;
use super::super::scenario::{
    Authorize, BackendSpec, Behaviour, DiscoveryBehaviour, ExtensionSpec, FrontProxy,
};
use super::super::status::{ApiError, json_response};
use super::super::tls::{PeerChain, client_identity};
use super::container_log::{ContainerLog, Level};
use super::delegated::{self, ApiserverHandle};

/// Delegated authentication and authorization (`authorize: delegated`).
pub struct Delegation {
    /// The identity the backend calls kube-apiserver with.
    pub identity: UserInfo,
    /// It could not read its authentication configuration and treats every request as anonymous.
    pub anonymous: bool,
    /// The running server whose authorizer answers its SubjectAccessReviews.
    pub apiserver: ApiserverHandle,
}

/// The backend.
pub struct Extension {
    /// Turned true when the server goes away (`downAfterFirstWatchMs`): it stops listening.
    stop_listening: Arc<tokio::sync::watch::Sender<bool>>,
    /// A first watch was opened (the countdown to going away has started).
    watched: std::sync::atomic::AtomicBool,
    spec: ExtensionSpec,
    delegation: Option<Delegation>,
    log: Arc<ContainerLog>,
    behaviour: Behaviour,
    trusted_ca: rustls_pki_types::CertificateDer<'static>,
    group: String,
    version: String,
}

impl Extension {
    /// Build from a backend spec.
    ///
    /// # Errors
    /// When the spec has no `extension:` (validation prevents it) or names an unknown CA.
    pub fn new(
        spec: &BackendSpec,
        pki: Arc<ServerPki>,
        log: Arc<ContainerLog>,
        port: u16,
        delegation: Option<Delegation>,
    ) -> anyhow::Result<Self> {
        let ext = spec
            .extension
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no extension spec"))?;
        let trusted_ca = match &spec.behaviour.trusted_front_proxy_ca {
            Some(name) => pki
                .cas
                .get(name)
                .ok_or_else(|| anyhow::anyhow!("no CA {name}"))?
                .cert_der
                .clone(),
            None => pki.front_proxy_ca.cert_der.clone(),
        };
        let (group, version) = ext.group_version.split_once('/').unwrap_or(("", ""));
        log.write(
            Level::Info,
            "secure_serving.go:213",
            &format!("Serving securely on [::]:{port}"),
        );
        Ok(Extension {
            stop_listening: Arc::new(tokio::sync::watch::channel(false).0),
            watched: std::sync::atomic::AtomicBool::new(false),
            delegation,
            log,
            group: group.into(),
            version: version.into(),
            spec: ext,
            behaviour: spec.behaviour.clone(),
            trusted_ca,
        })
    }

    /// What the serving loop watches to stop listening.
    pub fn stop_listening(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stop_listening.subscribe()
    }

    /// With `downAfterFirstWatchMs`, the first watch starts the countdown to going away, logged
    /// as a stopping generic apiserver logs it.
    fn on_watch(&self) {
        let Some(ms) = self.behaviour.down_after_first_watch_ms else {
            return;
        };
        if self.watched.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let (stop, log) = (self.stop_listening.clone(), self.log.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            log.write(
                Level::Info,
                "genericapiserver.go:448",
                "\"[graceful-termination] shutdown event\" name=\"HTTPServerStoppedListening\"",
            );
            stop.send_replace(true);
        });
    }

    fn user(&self, req: &Request<Incoming>, peer: &PeerChain) -> Option<(String, Vec<String>)> {
        if self.delegation.as_ref().is_some_and(|d| d.anonymous) {
            // Without its authentication configuration it trusts no front proxy: anonymous.
            return Some((
                "system:anonymous".into(),
                vec!["system:unauthenticated".into()],
            ));
        }
        let trusted = match self.behaviour.front_proxy {
            FrontProxy::Ignore => true,
            FrontProxy::Verify => match peer.as_ref() {
                // No certificate: an anonymous request, refused without a log line.
                None => false,
                Some(chain) => match client_identity(
                    chain,
                    std::slice::from_ref(&self.trusted_ca),
                    jiff::Timestamp::now(),
                ) {
                    // kubeadm's `--requestheader-allowed-names` (which extension servers read
                    // from the `extension-apiserver-authentication` ConfigMap): only the
                    // aggregator's client certificate may assert a user; any other CN is the
                    // "not in the allowed list" failure (REFERENCE.md §2.3).
                    Ok(id) if id.user == "front-proxy-client" => true,
                    Ok(id) => {
                        self.log.write(
                            Level::Error,
                            "authentication.go:73",
                            &format!(
                                "\"Unable to authenticate the request\" err=\"[x509: subject with cn={} is not in the allowed list]\"",
                                id.user
                            ),
                        );
                        false
                    }
                    Err(e) => {
                        self.log.write(
                            Level::Error,
                            "authentication.go:73",
                            &format!(
                                "\"Unable to authenticate the request\" err=\"[{}]\"",
                                go_x509_error(&e)
                            ),
                        );
                        false
                    }
                },
            },
        };
        if !trusted {
            return None;
        }
        let user = req
            .headers()
            .get("x-remote-user")?
            .to_str()
            .ok()?
            .to_string();
        // The aggregator sends one `X-Remote-Group` header per group; all of them count.
        let groups = req
            .headers()
            .get_all("x-remote-group")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        Some((user, groups))
    }

    fn discovery(&self) -> Value {
        let resources: Vec<Value> = self
            .spec
            .resources
            .iter()
            .map(|r| json!({"name": r.name, "singularName": r.kind.to_ascii_lowercase(), "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "list", "watch"]}))
            .collect();
        match self.behaviour.discovery {
            DiscoveryBehaviour::Normal => {
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": self.spec.group_version, "resources": resources})
            }
            DiscoveryBehaviour::WrongGroupVersion => {
                json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{}/v0wrong", self.group), "resources": resources})
            }
            DiscoveryBehaviour::NotApiResourceList => {
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "message": "this is not a discovery document"})
            }
        }
    }

    fn objects(&self, resource: &str, namespace: &str) -> Vec<Value> {
        let kind = self
            .spec
            .resources
            .iter()
            .find(|r| r.name == resource)
            .map(|r| r.kind.clone())
            .unwrap_or_default();
        self.spec
            .objects
            .iter()
            .filter(|o| o["kind"] == kind.as_str())
            .filter(|o| {
                namespace.is_empty()
                    || o.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace)
            })
            .cloned()
            .enumerate()
            .map(|(i, mut o)| {
                o["apiVersion"] = json!(self.spec.group_version);
                // Positions as resourceVersions, and the list's own is the count: a watch from the
                // list's resourceVersion then sends nothing old, as a real server sends only
                // what changed after it.
                if o.pointer("/metadata/resourceVersion").is_none() {
                    o["metadata"]["resourceVersion"] = json!((i + 1).to_string());
                }
                // A fixed time, so that answers (and snapshots of them) do not change per run.
                if o.pointer("/metadata/creationTimestamp").is_none() {
                    o["metadata"]["creationTimestamp"] = json!("2026-11-29T08:00:00Z");
                }
                o
            })
            .collect()
    }

    async fn handle(&self, req: Request<Incoming>, peer: PeerChain) -> Response<Body> {
        // Slowness and a fixed status come before authentication, so they hit every caller alike,
        // the aggregator's availability probe included: its 5 s client timeout and its
        // "bad status" are what `FailedDiscoveryCheck` reports (REFERENCE.md §2.1).
        if self.behaviour.slow_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.behaviour.slow_ms)).await;
        }
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .to_string();
        let info = RequestInfo::parse(req.method().as_str(), &path);
        if let Some(code) = self.behaviour.status {
            return match code {
                401 => ApiError::unauthorized().into_response(),
                403 => ApiError::forbidden(
                    forbidden_message("system:anonymous", &info),
                    &info.name,
                    &info.group,
                    &info.resource,
                )
                .into_response(),
                c => ApiError::Status {
                    code: c,
                    reason: "",
                    message: format!("the extension server answers {c}"),
                    details: None,
                }
                .into_response(),
            };
        }
        let Some((user, groups)) = self.user(&req, &peer) else {
            return ApiError::unauthorized().into_response();
        };
        if let Some(d) = &self.delegation {
            let requester = UserInfo {
                name: user.clone(),
                groups: groups.clone(),
            };
            match delegated::authorize(&d.apiserver, &d.identity, &self.log, &requester, &info) {
                delegated::Decision::Allow => {}
                delegated::Decision::Deny(message) => {
                    return ApiError::forbidden(message, &info.name, &info.group, &info.resource)
                        .into_response();
                }
                delegated::Decision::Error(e) => {
                    // responsewriters.InternalError: http.Error with the request URI quoted.
                    return ApiError::plain(500, format!("Internal Server Error: {path:?}: {e}"))
                        .into_response();
                }
            }
        }
        if self.behaviour.authorize == Authorize::None {
            return ApiError::forbidden(
                forbidden_message(&user, &info),
                &info.name,
                &info.group,
                &info.resource,
            )
            .into_response();
        }
        if !info.is_resource {
            return match info.path.trim_end_matches('/') {
                p if p == format!("/apis/{}/{}", self.group, self.version) => {
                    json_response(200, &self.discovery())
                }
                "/healthz" | "/readyz" | "/livez" if self.behaviour.storage_hang_ms.is_some() => {
                    // A generic API server's verbose listing with its storage check failing; the
                    // real one withholds the reason in the listing and logs it instead.
                    let endpoint = info.path.trim_matches('/');
                    super::super::status::text_response(
                        500,
                        format!(
                            "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]poststarthook/generic-apiserver-start-informers ok\n[+]shutdown ok\n{endpoint} check failed\n"
                        ),
                    )
                }
                "/healthz" | "/readyz" | "/livez" => {
                    super::super::status::text_response(200, "ok".into())
                }
                _ => ApiError::path_not_found().into_response(),
            };
        }
        if info.group != self.group
            || info.version != self.version
            || !self.spec.resources.iter().any(|r| r.name == info.resource)
        {
            return ApiError::path_not_found().into_response();
        }
        if let Some(ms) = self.behaviour.storage_hang_ms {
            // Its own etcd does not answer: the handler waits out its deadline, and the finisher
            // answers the Timeout Status (apiserver pkg/endpoints/handlers/finisher).
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return ApiError::Status {
                code: 504,
                reason: "Timeout",
                message: "Timeout: request did not complete within requested timeout - context deadline exceeded".into(),
                details: Some(json!({})),
            }
            .into_response();
        }
        match info.verb.as_str() {
            "list" => {
                let items = self.objects(&info.resource, &info.namespace);
                let kind = self
                    .spec
                    .resources
                    .iter()
                    .find(|r| r.name == info.resource)
                    .map(|r| r.kind.clone())
                    .unwrap_or_default();
                json_response(
                    200,
                    &json!({"kind": format!("{kind}List"), "apiVersion": self.spec.group_version, "metadata": {"resourceVersion": items.len().to_string()}, "items": items}),
                )
            }
            "get" => match self
                .objects(&info.resource, &info.namespace)
                .into_iter()
                .find(|o| {
                    o.pointer("/metadata/name").and_then(Value::as_str) == Some(info.name.as_str())
                }) {
                Some(o) => json_response(200, &o),
                None => {
                    ApiError::not_found(&info.group, &info.resource, &info.name).into_response()
                }
            },
            "watch" => self.watch(&info),
            verb => ApiError::method_not_allowed(&info.group, &info.resource, verb).into_response(),
        }
    }

    fn watch(&self, info: &RequestInfo) -> Response<Body> {
        self.on_watch();
        let rv: usize = info
            .param("resourceVersion")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let items = self.objects(&info.resource, &info.namespace);
        let lines: Vec<Bytes> = items
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i >= rv)
            .map(|(_, o)| Bytes::from(json!({"type": "ADDED", "object": o}).to_string() + "\n"))
            .collect();
        let close_after = self
            .behaviour
            .close_watches_after_ms
            .map(Duration::from_millis);
        let stream = futures::stream::unfold(
            (lines.into_iter(), close_after, false),
            |(mut it, close, done)| async move {
                if done {
                    return None;
                }
                if let Some(l) = it.next() {
                    return Some((Ok::<_, Infallible>(l), (it, close, false)));
                }
                // After the initial ADDED events a watch stays open until the client leaves, unless
                // the scenario closes it (a server ending watches early).
                match close {
                    Some(d) => {
                        tokio::time::sleep(d).await;
                        None
                    }
                    None => {
                        std::future::pending::<()>().await;
                        None
                    }
                }
            },
        );
        let mut resp = Response::new(Body::from_stream(stream));
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        resp
    }
}

/// Go's wording of a client-certificate verification failure (webpki names them differently).
fn go_x509_error(webpki_error: &str) -> String {
    if webpki_error.contains("UnknownIssuer") {
        "x509: certificate signed by unknown authority".into()
    } else if webpki_error.contains("Expired") || webpki_error.contains("NotValidYet") {
        "x509: certificate has expired or is not yet valid".into()
    } else {
        format!("x509: {webpki_error}")
    }
}

/// The per-connection service.
pub fn service(
    backend: Arc<Extension>,
    peer: PeerChain,
) -> impl tower::Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send {
    tower::service_fn(move |req: Request<Incoming>| {
        let backend = backend.clone();
        let peer = peer.clone();
        async move { Ok::<_, Infallible>(backend.handle(req, peer).await) }
    })
}
