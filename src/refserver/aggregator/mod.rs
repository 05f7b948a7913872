//! The aggregation layer (kube-aggregator 1.30): the proxy for remote APIServices, and the
//! availability controller in [`available`].
//!
//! The proxy (`pkg/apiserver/handler_proxy.go`): an APIService that is not `Available` answers 503
//! `service unavailable` (plain text) and counts `apiserver_request_terminations_total{component=
//! "aggregator"}`; otherwise the request goes to the Service's ClusterIP (ExternalName: its name)
//! at the APIService port — which the cluster network delivers to a ready endpoint — over TLS that
//! verifies the chain against `caBundle` for `<svc>.<ns>.svc` (unless `insecureSkipTLSVerify`),
//! presenting the front-proxy client certificate and the user in `X-Remote-User`/`X-Remote-Group`.
//! Upstream failures are 503 `error trying to reach service: <Go error>`; they are not counted
//! anywhere, as the real captures show.

pub mod available;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Response};
use serde_json::Value;

use super::apf::record_termination;
use super::authn::UserInfo;
use super::network::{self, Outbound, Trust};
use super::request::RequestInfo;
use super::state::State;
use super::status::ApiError;
use super::store::Key;

/// The remote APIService serving this request's group/version, if any.
pub fn remote_for(state: &State, info: &RequestInfo) -> Option<Value> {
    if info.prefix != "apis" || info.group.is_empty() || info.version.is_empty() {
        return None;
    }
    let name = format!("{}.{}", info.version, info.group);
    let svc = state.storage.store.get(&Key::new(
        "apiregistration.k8s.io",
        "apiservices",
        "",
        &name,
    ))?;
    // handler_proxy.go's `ServeHTTP` hands a Local APIService (no spec.service) to
    // kube-apiserver's own handlers (`localDelegate`) instead of proxying it.
    svc.pointer("/spec/service").filter(|s| !s.is_null())?;
    Some(svc)
}

/// Whether an APIService has `Available=True`.
pub fn is_available(apiservice: &Value) -> bool {
    apiservice
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Available" && c["status"] == "True")
        })
}

/// Where the aggregator sends requests for an APIService: (host, port, server name).
///
/// # Errors
/// The resolution error (the proxy answers `service unavailable` for it).
pub fn location(state: &State, apiservice: &Value) -> Result<(String, u16, String), String> {
    let ns = apiservice
        .pointer("/spec/service/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = apiservice
        .pointer("/spec/service/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let port = apiservice
        .pointer("/spec/service/port")
        .and_then(Value::as_u64)
        .unwrap_or(443) as u16;
    let svc = state
        .storage
        .store
        .get(&Key::new("", "services", ns, name))
        .ok_or_else(|| format!("service \"{name}\" not found"))?;
    // The aggregator verifies the backend as `<svc>.<ns>.svc` (handler_proxy.go), whatever
    // address the request is sent to: a serving certificate must name that, not the pod or IP.
    let server_name = format!("{name}.{ns}.svc");
    if svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        let host = svc
            .pointer("/spec/externalName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        return Ok((host, port, server_name));
    }
    let ip = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok((ip, port, server_name))
}

fn unavailable(state: &State, info: &RequestInfo) -> Response<Body> {
    record_termination(&state.observability.metrics, info, 503, "aggregator");
    ApiError::plain(503, "service unavailable").into_response()
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "host",
    "authorization",
    "content-length",
];

/// Proxy a request to the backend of `apiservice`.
pub async fn proxy(
    state: &State,
    apiservice: &Value,
    info: &RequestInfo,
    path_and_query: &str,
    headers: &HeaderMap,
    body: Bytes,
    user: &UserInfo,
) -> Response<Body> {
    if !is_available(apiservice) {
        return unavailable(state, info);
    }
    let Ok((host, port, server_name)) = location(state, apiservice) else {
        return unavailable(state, info);
    };
    let trust = if apiservice
        .pointer("/spec/insecureSkipTLSVerify")
        .and_then(Value::as_bool)
        == Some(true)
    {
        Trust::Insecure
    } else {
        use base64::Engine;
        let roots = apiservice
            .pointer("/spec/caBundle")
            .and_then(Value::as_str)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .and_then(|pem| crate::pki::pem_certificates(&pem).ok())
            .unwrap_or_default();
        Trust::Verify(roots)
    };
    let mut forwarded: Vec<(String, String)> = headers
        .iter()
        // A client's own X-Remote-* headers are dropped before the real ones are set: the backend
        // trusts them because the front-proxy certificate vouches for them, so a caller must never
        // be able to choose its identity there.
        .filter(|(k, _)| !HOP_BY_HOP.contains(&k.as_str()) && !k.as_str().starts_with("x-remote-"))
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    forwarded.push(("x-remote-user".into(), user.name.clone()));
    for g in &user.groups {
        forwarded.push(("x-remote-group".into(), g.clone()));
    }
    let out = Outbound {
        method: &info.method,
        host: &host,
        port,
        path: path_and_query,
        server_name: &server_name,
        trust,
        client_cert: Some(&state.pki.front_proxy_client),
        headers: forwarded,
        body,
    };
    match network::send(&state.cluster, &state.storage.store, out).await {
        Ok(resp) => {
            let (parts, incoming) = resp.into_parts();
            let mut out = Response::new(Body::new(incoming));
            *out.status_mut() = parts.status;
            for (k, v) in parts.headers.iter() {
                if !HOP_BY_HOP.contains(&k.as_str()) {
                    out.headers_mut().append(k, v.clone());
                }
            }
            out
        }
        Err(cause) => {
            ApiError::plain(503, format!("error trying to reach service: {cause}")).into_response()
        }
    }
}
