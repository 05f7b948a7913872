//! The filter chain every request goes through, outermost first, as in kube-apiserver 1.30:
//! request timeout (400 for a `?timeout=` that is not a Go duration, 504 for non-long-running
//! requests past `?timeout=` or the server default) →
//! authentication (401) → APF (429, PF UID headers on every response) → authorization (403) →
//! the aggregator proxy for remote APIServices, or the local handlers. Local responses are counted
//! in `apiserver_request_total` and `apiserver_request_duration_seconds`; APF rejections and
//! aggregator short-circuits in `apiserver_request_terminations_total` only, as the real captures
//! show.
//!
//! One difference: the timer starts after authentication, not around it. This server's
//! authentication is in memory and cannot be slow, so the difference cannot show.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderValue, Request, Response};

use super::aggregator;
use super::apf::{Classification, record_termination};
use super::api;
use super::authn::{UserInfo, authenticate, authorize, impersonate};
use super::metrics::Desc;
use super::recorded::Recorded;
use super::request::RequestInfo;
use super::state::{LoggedRequest, State};
use super::status::ApiError;
use super::tls::PeerChain;
use crate::semantics::go_duration;

const REQUESTS: Desc = Desc {
    name: "apiserver_request_total",
    help: "[STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
    labels: &[
        "code",
        "component",
        "dry_run",
        "group",
        "resource",
        "scope",
        "subresource",
        "verb",
        "version",
    ],
};
const DURATION: Desc = Desc {
    name: "apiserver_request_duration_seconds",
    help: "[STABLE] Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
    labels: &[
        "component",
        "dry_run",
        "group",
        "resource",
        "scope",
        "subresource",
        "verb",
        "version",
    ],
};

/// The deadline of a request that is not long-running, as `WithRequestDeadline`'s
/// `timeoutParser.Parse` and `parseTimeout` (apiserver/pkg/endpoints/filters/request_deadline.go)
/// decide it: an empty or absent `?timeout=` takes the server's `default`; otherwise it is a Go
/// duration (`time.ParseDuration`: `32s`, `1m30s`, `1.5s`), and one that does not parse is a 400.
/// A parsed timeout applies only when positive and below the default (`0s` means none of the
/// client's own).
fn request_deadline(info: &RequestInfo, default: Duration) -> Result<Duration, ApiError> {
    let Some(value) = info.param("timeout").filter(|v| !v.is_empty()) else {
        return Ok(default);
    };
    let ns = go_duration::parse(value).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid timeout specified in the request URL - {e}"
        ))
    })?;
    Ok(match u64::try_from(ns) {
        Ok(ns) if ns > 0 && u128::from(ns) < default.as_nanos() => Duration::from_nanos(ns),
        _ => default,
    })
}

fn pf_headers(resp: &mut Response<Body>, class: &Classification) {
    // A FlowSchema or level without a UID (written by hand into a scenario) gets no headers
    // rather than empty ones: a client's "APF said so" must rest on a real UID.
    if class.flow_schema_uid.is_empty() {
        return;
    }
    if let (Ok(fs), Ok(pl)) = (
        HeaderValue::from_str(&class.flow_schema_uid),
        HeaderValue::from_str(&class.priority_level_uid),
    ) {
        resp.headers_mut()
            .insert("x-kubernetes-pf-flowschema-uid", fs);
        resp.headers_mut()
            .insert("x-kubernetes-pf-prioritylevel-uid", pl);
    }
}

/// Count one locally answered request as kube-apiserver's instrumented handlers do: `component`
/// "apiserver", `dry_run` "All" for a dry-run write. Proxied requests never get here (see the
/// module documentation).
fn record(state: &State, info: &RequestInfo, code: u16, started: Instant) {
    let verb = info.metric_verb();
    let dry_run = if info.dry_run() { "All" } else { "" };
    let sub = info.metric_subresource();
    let scope = info.metric_scope();
    state.observability.metrics.inc(
        &REQUESTS,
        &[
            &code.to_string(),
            "apiserver",
            dry_run,
            &info.group,
            &info.resource,
            scope,
            &sub,
            &verb,
            &info.version,
        ],
    );
    state.observability.metrics.observe(
        &DURATION,
        state.profile.request_duration_buckets(),
        &[
            "apiserver",
            dry_run,
            &info.group,
            &info.resource,
            scope,
            &sub,
            &verb,
            &info.version,
        ],
        started.elapsed().as_secs_f64(),
    );
}

/// Marks a request sent by the server's own traffic (`traffic.rs`), so the request log can tell
/// the server's own clients from the client under test: a request extension, never a header, so
/// a network client cannot set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traffic;

/// Handle one request whose body has been read; `recorded` is the recording a replaying server
/// answers from.
pub async fn handle(
    state: Arc<State>,
    recorded: Option<&Recorded>,
    req: Request<Bytes>,
    peer: PeerChain,
) -> Response<Body> {
    let started = Instant::now();
    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let info = RequestInfo::parse(req.method().as_str(), &path_and_query);
    // Authentication before APF, as in `DefaultBuildHandlerChain` (server/config.go): APF
    // classifies a request by its authenticated user and groups, so it cannot run first. A 401
    // therefore never reaches a priority level.
    let user = authenticate(&state.auth, req.headers(), &peer)
        .and_then(|u| impersonate(&state.auth, &state.storage.store, req.headers(), u));
    if let Ok(mut log) = state.observability.requests.lock() {
        log.push(LoggedRequest {
            method: req.method().to_string(),
            path: path_and_query.clone(),
            user: user.as_ref().map(|u| u.name.clone()).unwrap_or_default(),
            traffic: req.extensions().get::<Traffic>().is_some(),
        });
    }
    // `WithRequestDeadline` is outside authentication: a `?timeout=` that is not a Go duration is
    // a 400 before a 401. Watches, exec, proxy and the like are exempt from the request timeout
    // (it skips long-running requests; a watch's own limit is `timeoutSeconds`).
    let deadline = if info.is_long_running() {
        None
    } else {
        let default = Duration::from_secs(state.scenario.server.request_timeout_seconds);
        match request_deadline(&info, default) {
            Ok(d) => Some(d),
            Err(e) => return e.into_response(),
        }
    };
    let user = match user {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    // A replayed recording answers what it recorded as it was recorded, before APF and the rest.
    if let Some(r) = recorded
        && let Some(resp) =
            super::recorded::answer(&state.storage.store, r, &info, &path_and_query, &user.name)
                .await
    {
        return resp;
    }
    // A watch lives for minutes.
    let Some(limit) = deadline else {
        return inner(state, req, info, user, path_and_query, started).await;
    };
    let fut = inner(
        state.clone(),
        req,
        info.clone(),
        user,
        path_and_query,
        started,
    );
    match tokio::time::timeout(limit, fut).await {
        Ok(resp) => resp,
        Err(_) => {
            record_termination(&state.observability.metrics, &info, 504, "apiserver");
            record(&state, &info, 504, started);
            ApiError::request_timeout().into_response()
        }
    }
}

async fn inner(
    state: Arc<State>,
    req: Request<Bytes>,
    info: RequestInfo,
    user: UserInfo,
    path_and_query: String,
    started: Instant,
) -> Response<Body> {
    let seat = match state
        .apf
        .admit(
            &state.storage.store,
            &state.observability.metrics,
            &user,
            &info,
        )
        .await
    {
        Ok(seat) => seat,
        Err(rejection) => {
            let mut resp =
                ApiError::plain(429, "Too many requests, please try again later.").into_response();
            resp.headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
            pf_headers(&mut resp, &rejection.class);
            return resp;
        }
    };
    // Authorization after APF, as in the real chain: a 403 still took (and released) a seat and
    // carries the PF headers.
    if let Err(e) = authorize(&state.auth, &state.storage.store, &user, &info) {
        let mut resp = e.into_response();
        pf_headers(&mut resp, &seat.class);
        return resp;
    }
    let (parts, body) = req.into_parts();
    // The aggregator proxy sits after authorization: kube-apiserver authorizes the user first,
    // then forwards the request with X-Remote-User/Group to the extension server, which
    // authorizes again by SubjectAccessReview (delegated authz).
    if let Some(apiservice) = aggregator::remote_for(&state, &info) {
        let mut resp = aggregator::proxy(
            &state,
            &apiservice,
            &info,
            &path_and_query,
            &parts.headers,
            body,
            &user,
        )
        .await;
        pf_headers(&mut resp, &seat.class);
        return resp;
    }
    let mut resp = match api::serve(&state, &info, &parts.headers, &body, &user).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    record(&state, &info, resp.status().as_u16(), started);
    // The seat is held until the response head is ready; a watch's stream runs on without it,
    // as APF only counts a watch's initial stage.
    pf_headers(&mut resp, &seat.class);
    resp
}

/// Read a request body into memory (requests to the API are small; watches have none).
pub async fn collect<B>(req: Request<B>) -> Request<Bytes>
where
    B: http_body::Body,
{
    use http_body_util::BodyExt;
    let (parts, body) = req.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    Request::from_parts(parts, bytes)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::request_deadline;
    use crate::refserver::request::RequestInfo;

    const DEFAULT: Duration = Duration::from_secs(60);

    fn deadline(query: &str) -> Result<Duration, String> {
        let info = RequestInfo::parse("GET", &format!("/api/v1/namespaces/a/configmaps?{query}"));
        request_deadline(&info, DEFAULT).map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn timeouts_are_go_durations_below_the_default() {
        // request_deadline.go timeoutParser.Parse.
        for (q, want) in [
            ("timeout=1m30s", DEFAULT),
            ("timeout=0m45.5s", Duration::from_millis(45_500)),
            ("timeout=1h", DEFAULT),
            ("timeout=1.5s", Duration::from_millis(1500)),
            ("timeout=500ms", Duration::from_millis(500)),
            ("timeout=250us", Duration::from_micros(250)),
            ("timeout=32s", Duration::from_secs(32)),
            ("timeout=0s", DEFAULT),
            ("timeout=0", DEFAULT),
            ("timeout=-5s", DEFAULT),
            ("timeout=60s", DEFAULT),
            ("timeout=", DEFAULT),
            ("limit=5", DEFAULT),
            ("timeout=5s&timeout=foo", Duration::from_secs(5)),
        ] {
            assert_eq!(deadline(q), Ok(want), "{q}");
        }
    }

    #[test]
    fn a_timeout_that_is_not_a_go_duration_is_a_bad_request() {
        for q in ["timeout=5", "timeout=foo", "timeout=1d", "timeout=1.2.3s"] {
            let err = deadline(q).unwrap_err();
            assert!(err.contains("400"), "{q}: {err}");
            assert!(
                err.contains("invalid timeout specified in the request URL - time: "),
                "{q}: {err}"
            );
        }
    }
}
