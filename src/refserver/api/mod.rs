//! Locally served paths: version, health, metrics, discovery, OpenAPI and resource requests.
//!
//! This is the `apiHandler` at the bottom of the filter chain, for everything the aggregator does
//! not proxy. OpenAPI documents are not served (404): kubectl then skips client-side schema
//! validation and relies on server-side field validation, which is enough for `kubectl create`.

pub mod discovery;
pub mod health;
pub mod logs;
pub mod rest;
pub mod select;
pub mod table;
pub mod watch;

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Response};

use super::authn::UserInfo;
use super::registry;
use super::request::RequestInfo;
use super::state::State;
use super::status::{ApiError, json_response, text_response};

/// Serve a request that is not proxied.
pub async fn serve(
    state: &Arc<State>,
    info: &RequestInfo,
    headers: &HeaderMap,
    body: &Bytes,
    user: &UserInfo,
) -> Result<Response<Body>, ApiError> {
    let header = |name: http::HeaderName| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    if info.is_resource {
        let def = registry::resolve(
            &state.storage.store,
            &info.group,
            &info.version,
            &info.resource,
        )
        .ok_or_else(ApiError::path_not_found)?;
        // A watch is a long-running stream (DESIGN §1's Watch branch) with its own bookmarks and
        // termination, so it never goes through the one-shot REST handlers.
        if info.verb == "watch" {
            return watch::serve(state, &def, info).await;
        }
        if def.group.is_empty() && def.resource == "pods" && info.subresource == "log" {
            return logs::pod_log(&state.storage.store, &state.cluster, info);
        }
        let accept = header(http::header::ACCEPT);
        let content_type = header(http::header::CONTENT_TYPE);
        let call = rest::Call {
            info,
            def: &def,
            body,
            content_type: &content_type,
            accept: &accept,
            user,
        };
        return rest::serve(state, &call).await;
    }
    // Everything below (version, health, metrics, discovery) is read-only: a write is refused
    // as 405 (the path exists, the verb does not) rather than 404.
    if info.method != "GET" && info.method != "HEAD" {
        return Err(ApiError::method_not_allowed("", "", &info.method));
    }
    let path = info.path.trim_end_matches('/');
    let verbose = info.query.contains_key("verbose");
    match path {
        "/version" => Ok(json_response(200, &health::version(state))),
        "/metrics" => Ok(text_response(200, state.observability.metrics_text())),
        "/api" => Ok(json_response(200, &discovery::core_versions(state))),
        "/apis" => Ok(json_response(
            200,
            &discovery::group_list(&state.storage.store),
        )),
        // `/healthz/<check>` and `?verbose` name single checks the way kube-apiserver's healthz
        // mux does; `/` answers like `/healthz`, since nothing else is served at the root here.
        p if p.starts_with("/healthz")
            || p.starts_with("/livez")
            || p.starts_with("/readyz")
            || p.is_empty() =>
        {
            Ok(health::health(
                state,
                if p.is_empty() { "/healthz" } else { p },
                verbose,
            ))
        }
        _ if info.prefix == "api" && !info.version.is_empty() => {
            discovery::resource_list(&state.storage.store, "", &info.version)
                .map(|v| json_response(200, &v))
                .ok_or_else(ApiError::path_not_found)
        }
        _ if info.prefix == "apis" && info.version.is_empty() => {
            discovery::group(&state.storage.store, &info.group)
                .map(|v| json_response(200, &v))
                .ok_or_else(ApiError::path_not_found)
        }
        _ if info.prefix == "apis" => {
            discovery::resource_list(&state.storage.store, &info.group, &info.version)
                .map(|v| json_response(200, &v))
                .ok_or_else(ApiError::path_not_found)
        }
        _ => Err(ApiError::path_not_found()),
    }
}
