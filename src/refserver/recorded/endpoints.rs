//! The non-resource endpoints of a replayed recording: kube-apiserver's `/metrics`, `/version`,
//! `/readyz`, `/livez` and `/healthz`, and a plain-HTTP port playing etcd's (`/metrics`, `/health`).
//!
//! Metrics are the recorded families written back as text exposition (`promtext::write_text`). A
//! windowed source was computed from two scrapes; the first request for it is answered with the
//! earlier scrape (`promtext::window_start`) and every later one with the recorded (later) one, so a
//! client that scrapes twice gets the recorded window deltas back, over its own window's length
//! (one that scrapes once reads the counters at the window's start). A single dump is always the
//! same dump.
//!
//! Health checks are written in kube-apiserver's verbose form — `[+]name ok`, `[-]name failed:
//! reason`, then `readyz check passed|failed` — with status 200 when the recorded check passed and
//! 500 when it failed; a check recorded without items answers `ok`, or its recorded error. etcd's
//! `/health` is `{"health": "true"|"false", "reason": …}` (200 or 503), as etcd 3.5 writes it.
//! Whatever the recording does not hold is answered 403 (kube-apiserver) or 404 (etcd's port), so
//! that a collection records a gap.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Body;
use axum::routing::{get, post};
use http::{HeaderValue, Response, StatusCode};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::recording::{Recorded, not_recorded};
use crate::bundle::HealthCheck;
use crate::promtext::{window_start, write_text};
use crate::refserver::request::RequestInfo;
use crate::refserver::status::{json_response, text_response};

/// The exposition of the recorded source `index`, for the `n`th scrape of it.
fn scrape(r: &Recorded, index: Option<usize>, scrapes: &AtomicUsize) -> Option<String> {
    let source = &r.bundle.metrics[index?];
    // Counted per source, not per client: the collector's first and second scrape of one run are
    // what the window was made of, and a third scrape (a person's curl) gets the end again.
    let n = scrapes.fetch_add(1, Ordering::SeqCst);
    Some(if source.window.is_some() && n == 0 {
        write_text(&window_start(&source.families))
    } else {
        write_text(&source.families)
    })
}

fn metrics_response(text: String) -> Response<Body> {
    let mut resp = Response::new(Body::from(text));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// `/version` of the recording.
fn version(r: &Recorded) -> Option<Response<Body>> {
    let v = r.bundle.collection.server_version.as_ref()?;
    Some(json_response(
        200,
        &json!({
            "major": v.major,
            "minor": v.minor,
            "gitVersion": v.git_version,
            "gitCommit": "",
            "gitTreeState": "",
            "buildDate": "",
            "goVersion": "",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    ))
}

/// A recorded check in verbose health form, and its status code.
pub fn health_text(check: &HealthCheck, endpoint: &str, verbose: bool) -> (u16, String) {
    let code = if check.ok { 200 } else { 500 };
    if check.checks.is_empty() {
        let text = match (&check.error, check.ok) {
            (_, true) => "ok".to_string(),
            (Some(e), false) => e.clone(),
            (None, false) => format!("{endpoint} check failed"),
        };
        return (code, text);
    }
    // As the apiserver's healthz handler: a passing check without `?verbose` is a bare `ok`, a
    // failing one always lists its checks, so the failing item shows without asking.
    if check.ok && !verbose {
        return (code, "ok".into());
    }
    let mut text = String::new();
    for item in &check.checks {
        match (item.ok, &item.reason) {
            (true, _) => text.push_str(&format!("[+]{} ok\n", item.name)),
            (false, Some(reason)) => text.push_str(&format!("[-]{} failed: {reason}\n", item.name)),
            (false, None) => text.push_str(&format!("[-]{} failed\n", item.name)),
        }
    }
    let outcome = if check.ok { "passed" } else { "failed" };
    text.push_str(&format!("{endpoint} check {outcome}\n"));
    (code, text)
}

/// One check of a recorded endpoint (`/readyz/etcd`), in the words of the apiserver's per-check
/// handler: `ok`, or 500 `internal server error: <reason>`.
fn single_check(check: &HealthCheck, name: &str) -> Response<Body> {
    match check.checks.iter().find(|c| c.name == name) {
        None => text_response(404, "404 page not found\n".into()),
        Some(c) if c.ok => text_response(200, "ok".into()),
        Some(c) => text_response(
            500,
            format!(
                "internal server error: {}\n",
                c.reason.as_deref().unwrap_or("check failed")
            ),
        ),
    }
}

fn health(r: &Recorded, path: &str, verbose: bool) -> Response<Body> {
    let trimmed = path.trim_start_matches('/');
    let (endpoint, only) = match trimmed.split_once('/') {
        Some((e, rest)) => (e, Some(rest)),
        None => (trimmed, None),
    };
    // `/healthz` (deprecated for `/livez` and `/readyz`, the two a collection reads) is never in a
    // recording: a client that asks for it gets the 403 of what was not recorded, not a guess.
    let index = match endpoint {
        "readyz" => r.split.readyz,
        "livez" => r.split.livez,
        _ => None,
    };
    let Some(check) = index.map(|i| &r.bundle.health_checks[i]) else {
        return not_recorded(&format!("/{endpoint}"), "", "");
    };
    if let Some(name) = only {
        return single_check(check, name);
    }
    let (code, text) = health_text(check, endpoint, verbose);
    text_response(code, text)
}

/// Answer `/metrics`, `/version` and the health endpoints; `None` for anything else.
pub fn answer(r: &Recorded, info: &RequestInfo) -> Option<Response<Body>> {
    if !matches!(info.method.as_str(), "GET" | "HEAD") || !info.prefix.is_empty() {
        return None;
    }
    let path = info.path.trim_end_matches('/');
    let verbose = info.query.contains_key("verbose");
    match path {
        "/metrics" => Some(
            scrape(r, r.split.apiserver_metrics, &r.apiserver_scrapes)
                .map(metrics_response)
                .unwrap_or_else(|| not_recorded("kube-apiserver's /metrics", "", "")),
        ),
        "/version" => Some(version(r).unwrap_or_else(|| not_recorded("/version", "", ""))),
        p if p.starts_with("/readyz") || p.starts_with("/livez") || p.starts_with("/healthz") => {
            Some(health(r, p, verbose))
        }
        _ => None,
    }
}

/// Whether the recording has anything for etcd's port.
pub fn serves_etcd(r: &Recorded) -> bool {
    r.split.etcd_metrics.is_some() || r.split.etcd_health.is_some()
}

fn not_found() -> Response<Body> {
    text_response(404, "404 page not found\n".into())
}

/// etcd's `/health` from the recorded check.
fn etcd_health(r: &Recorded) -> Response<Body> {
    let Some(check) = r.split.etcd_health.map(|i| &r.bundle.health_checks[i]) else {
        return not_found();
    };
    let body = json!({
        "health": if check.ok { "true" } else { "false" },
        "reason": check.error.clone().unwrap_or_default(),
    });
    // etcd's `/health` answers 503 with `"health":"false"` when unhealthy; a client that reads
    // only the status code must see it too.
    let mut resp = json_response(200, &body);
    if !check.ok {
        *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    }
    resp
}

/// Serve etcd's port until shutdown.
pub async fn serve_etcd(
    listener: TcpListener,
    r: Arc<Recorded>,
    mut shutdown: watch::Receiver<bool>,
) {
    let metrics = r.clone();
    let health = r.clone();
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let r = metrics.clone();
                async move {
                    scrape(&r, r.split.etcd_metrics, &r.etcd_scrapes)
                        .map(metrics_response)
                        .unwrap_or_else(not_found)
                }
            }),
        )
        .route(
            "/health",
            get(move || {
                let r = health.clone();
                async move { etcd_health(&r) }
            }),
        )
        // The alarm list is not replayed (an alarm check travels with the carried evidence).
        .route("/v3/maintenance/alarm", post(|| async { not_found() }));
    let _ = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|s| *s).await;
        })
        .await;
}
