//! Watch: a stream of JSON events (`{"type":"ADDED","object":{…}}` per line) from the store.
//!
//! `resourceVersion` empty or `0` starts with the current objects as ADDED events; a version still in
//! the history resumes after it; an older one gets HTTP 200 and a single ERROR event carrying the
//! 410 `Expired` Status `too old resource version: X (Y)` — exactly what the real captures show.
//! `allowWatchBookmarks=true` adds BOOKMARK events at the scenario's interval, `timeoutSeconds` ends
//! the stream, and the scenario's watch fault closes streams early, counting them in
//! `apiserver_terminated_watchers_total{resource}` (as does a watcher too slow to keep up).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::Response;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::super::conversion;
use super::super::metrics::Desc;
use super::super::registry::ResourceDef;
use super::super::request::RequestInfo;
use super::super::state::State;
use super::super::status::ApiError;
use super::super::store::{Event, StoreError};
use super::select::filter;

const TERMINATED: Desc = Desc {
    name: "apiserver_terminated_watchers_total",
    help: "[ALPHA] Counter of watchers closed due to unresponsiveness broken by resource type.",
    labels: &["resource"],
};
// The 1.29–1.33 label set; 1.34 swaps `kind` for `resource` (REFERENCE §3), which is why the
// rules read either.
const WATCH_EVENTS: Desc = Desc {
    name: "apiserver_watch_events_total",
    help: "[ALPHA] Number of events sent in watch clients",
    labels: &["group", "kind", "version"],
};

fn line(kind: &str, object: &Value) -> Bytes {
    let mut s = json!({"type": kind, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

fn resource_label(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.resource.clone()
    } else {
        format!("{}.{}", def.resource, def.group)
    }
}

/// Serve a watch.
///
/// # Errors
/// A bad selector.
pub async fn serve(
    state: &Arc<State>,
    def: &ResourceDef,
    info: &RequestInfo,
) -> Result<Response<Body>, ApiError> {
    let keep = filter(info)?;
    let rv: u64 = info
        .param("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let ns = if def.namespaced {
        info.namespace.clone()
    } else {
        String::new()
    };
    let (group, resource) = (def.group.clone(), def.resource.clone());
    let name = info.name.clone();
    let matches = move |k: &super::super::store::Key| {
        k.group == group
            && k.resource == resource
            && (ns.is_empty() || k.namespace == ns)
            && (name.is_empty() || k.name == name)
    };
    // Bounded like the cacher's per-watcher buffer: a client that stops reading fills it, the
    // stream then falls behind the store's broadcast, and it is terminated below as the cacher
    // terminates an unresponsive watcher — an unbounded buffer would hide a stuck client.
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    match state.storage.store.watch_from(rv, &matches) {
        Err(StoreError::Expired(a, b)) => {
            let err = ApiError::expired(format!("too old resource version: {a} ({b})"));
            let _ = tx.send(line("ERROR", &err.status_object())).await;
        }
        Err(_) => {}
        Ok((backlog, live)) => {
            let state = state.clone();
            let def = def.clone();
            let bookmarks = info.param("allowWatchBookmarks") == Some("true");
            let timeout = info
                .param("timeoutSeconds")
                .and_then(|t| t.parse::<u64>().ok())
                .map(Duration::from_secs);
            let terminate = state
                .scenario
                .faults
                .watch
                .as_ref()
                .filter(|w| w.resources.is_empty() || w.resources.contains(&def.resource))
                .map(|w| Duration::from_millis(w.terminate_after_ms));
            tokio::spawn(async move {
                stream(
                    state,
                    def,
                    backlog,
                    live,
                    Box::new(move |e: &Event| matches(&e.key) && keep(&e.object)),
                    tx,
                    bookmarks,
                    timeout,
                    terminate,
                )
                .await;
            });
        }
    }
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
    }));
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

#[allow(clippy::too_many_arguments)]
async fn stream(
    state: Arc<State>,
    def: ResourceDef,
    backlog: Vec<Event>,
    mut live: broadcast::Receiver<Event>,
    wanted: Box<dyn Fn(&Event) -> bool + Send>,
    tx: mpsc::Sender<Bytes>,
    bookmarks: bool,
    timeout: Option<Duration>,
    terminate: Option<Duration>,
) {
    let send = |e: Event| {
        let state = state.clone();
        let def = def.clone();
        let tx = tx.clone();
        async move {
            let obj = match conversion::to_version(&state, &def, vec![e.object]).await {
                Ok(mut v) => v.pop().unwrap_or(Value::Null),
                Err(err) => {
                    let _ = tx.send(line("ERROR", &err.status_object())).await;
                    return false;
                }
            };
            state
                .observability
                .metrics
                .inc(&WATCH_EVENTS, &[&def.group, &def.kind, &def.version]);
            tx.send(line(e.kind.as_str(), &obj)).await.is_ok()
        }
    };
    let mut last_rv = state.storage.store.revision();
    for e in backlog {
        last_rv = last_rv.max(e.rv);
        if !send(e).await {
            return;
        }
    }
    let far = Duration::from_secs(365 * 24 * 3600);
    let deadline = tokio::time::sleep(timeout.unwrap_or(far));
    let kill = tokio::time::sleep(terminate.unwrap_or(far));
    let mut ticker = tokio::time::interval(Duration::from_millis(
        state.scenario.server.bookmark_interval_ms.max(10),
    ));
    // The first tick is immediate; a bookmark belongs one interval after the backlog.
    ticker.tick().await;
    tokio::pin!(deadline, kill);
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            _ = &mut kill => {
                state.observability.metrics.inc(&TERMINATED, &[&resource_label(&def)]);
                return;
            }
            _ = tx.closed() => return,
            // A bookmark is only kind, apiVersion and a resourceVersion (KEP-956): a reflector
            // resumes from it after a reconnect instead of from an old version that may have been
            // compacted meanwhile — the 410 of captures/cases/16b.
            _ = ticker.tick(), if bookmarks => {
                let bm = json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": {"resourceVersion": last_rv.max(state.storage.store.revision()).to_string()}});
                if tx.send(line("BOOKMARK", &bm)).await.is_err() { return; }
            }
            got = live.recv() => match got {
                Ok(e) if wanted(&e) => {
                    last_rv = e.rv;
                    if !send(e).await { return; }
                }
                // Filtered-out events still advance the bookmark: the watcher has seen the store
                // up to there, and a selective watch would otherwise resume far behind.
                Ok(e) => last_rv = e.rv,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Too slow to keep up: the cacher terminates such watchers.
                    state.observability.metrics.inc(&TERMINATED, &[&resource_label(&def)]);
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
