//! The APIService availability controller (`available_controller.go`, 1.30): it follows the world,
//! not the scenario text.
//!
//! It re-evaluates every remote APIService when APIServices, Services or Endpoints change and every
//! `availabilityPeriodMs`. Checks, in order: the Service exists (`ServiceNotFound`); for ClusterIP
//! Services the port exists (`ServicePortError`), Endpoints exist (`EndpointsNotFound`) and have a
//! ready address with the port's name (`MissingEndpoints`); then five parallel discovery probes of
//! `https://<location>/apis/<g>/<v>` **without TLS verification**, with the front-proxy client
//! certificate as `system:kube-aggregator`/`system:masters` — any 2xx/3xx is `Passed`, otherwise
//! `FailedDiscoveryCheck` with the last error in one of the three forms. It sets
//! `aggregator_unavailable_apiservice{name}` on every sync and increments
//! `aggregator_unavailable_apiservice_total{name,reason}` only on a True→False transition.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use sha2::Digest;

use super::super::metrics::Desc;
use super::super::network::{self, Outbound, Trust, url_of};
use super::super::state::State;
use super::super::store::Key;
use super::{is_available, location};

const GAUGE: Desc = Desc {
    name: "aggregator_unavailable_apiservice",
    help: "[ALPHA] Gauge of APIServices which are marked as unavailable broken down by APIService name.",
    labels: &["name"],
};
const COUNTER: Desc = Desc {
    name: "aggregator_unavailable_apiservice_total",
    help: "[ALPHA] Counter of APIServices which are marked as unavailable broken down by APIService name and reason.",
    labels: &["name", "reason"],
};

/// A computed condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `True`/`False`/`Unknown`.
    pub status: &'static str,
    /// Reason.
    pub reason: &'static str,
    /// Message.
    pub message: String,
}

fn failed(reason: &'static str, message: String) -> Condition {
    Condition {
        status: "False",
        reason,
        message,
    }
}

async fn probe(
    state: &State,
    host: &str,
    port: u16,
    path: &str,
    server_name: &str,
) -> Result<(), String> {
    let url = url_of(host, port, path);
    let timeout = Duration::from_millis(state.scenario.server.discovery_timeout_ms.max(1));
    let out = Outbound {
        method: "GET",
        host,
        port,
        path,
        server_name,
        trust: Trust::Insecure,
        client_cert: Some(&state.pki.front_proxy_client),
        headers: vec![
            ("x-remote-user".into(), "system:kube-aggregator".into()),
            ("x-remote-group".into(), "system:masters".into()),
        ],
        body: Bytes::new(),
    };
    let attempt = async {
        match tokio::time::timeout(
            timeout,
            network::send(&state.cluster, &state.storage.store, out),
        )
        .await
        {
            Err(_) => Err(format!(
                "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            )),
            Ok(Err(cause)) => Err(format!("Get \"{url}\": {cause}")),
            // 3xx passes: the probe client does not follow redirects (CheckRedirect returns
            // http.ErrUseLastResponse), and `sync()` accepts any status below 400.
            Ok(Ok(resp)) if resp.status().as_u16() < 200 || resp.status().as_u16() >= 400 => {
                Err(format!("bad status from {url}: {}", resp.status().as_u16()))
            }
            Ok(Ok(_)) => Ok(()),
        }
    };
    // The controller's own guard fires one second after the client timeout.
    match tokio::time::timeout(timeout + Duration::from_secs(1), attempt).await {
        Err(_) => Err(format!("timed out waiting for {url}")),
        Ok(Err(e)) if e.starts_with("timed out") => Err(e),
        Ok(Err(e)) => Err(format!("failing or missing response from {url}: {e}")),
        Ok(Ok(())) => Ok(()),
    }
}

/// Compute the Available condition of one remote APIService.
pub async fn evaluate(state: &State, apiservice: &Value) -> Condition {
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
        .unwrap_or(443);
    let Some(svc) = state.storage.store.get(&Key::new("", "services", ns, name)) else {
        return failed(
            "ServiceNotFound",
            format!("service/{name} in \"{ns}\" is not present"),
        );
    };
    let cluster_ip = svc
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        == "ClusterIP";
    // As `sync()` in available_controller.go: only a ClusterIP Service has its port and endpoints
    // checked; any other type goes straight to the discovery probes.
    if cluster_ip {
        let ports = svc
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let Some(sport) = ports.iter().find(|p| p["port"].as_u64() == Some(port)) else {
            return failed(
                "ServicePortError",
                format!("service/{name} in \"{ns}\" is not listening on port {port}"),
            );
        };
        let port_name = sport["name"].as_str().unwrap_or("").to_string();
        let Some(ep) = state
            .storage
            .store
            .get(&Key::new("", "endpoints", ns, name))
        else {
            return failed(
                "EndpointsNotFound",
                format!("cannot find endpoints for service/{name} in \"{ns}\""),
            );
        };
        // Ready addresses only (`subset.Addresses`, never `NotReadyAddresses`), with the port found
        // by the Service port's *name*, as `sync()` does (an unnamed port matches an unnamed one).
        let has_ready = ep["subsets"].as_array().into_iter().flatten().any(|s| {
            s["addresses"].as_array().is_some_and(|a| !a.is_empty())
                && s["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|p| p["name"].as_str().unwrap_or("") == port_name)
        });
        if !has_ready {
            return failed(
                "MissingEndpoints",
                format!(
                    "endpoints for service/{name} in \"{ns}\" have no addresses with port name \"{port_name}\""
                ),
            );
        }
    }
    let Ok((host, port, server_name)) = location(state, apiservice) else {
        return failed(
            "ServiceNotFound",
            format!("service/{name} in \"{ns}\" is not present"),
        );
    };
    let group = apiservice
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let version = apiservice
        .pointer("/spec/version")
        .and_then(Value::as_str)
        .unwrap_or("");
    let path = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    // `sync()` sends five attempts at once and passes on the first success, so one slow or dead
    // pod among several does not make the group unavailable.
    let probes = (0..5).map(|_| probe(state, &host, port, &path, &server_name));
    let results = futures::future::join_all(probes).await;
    if results.iter().any(Result::is_ok) {
        return Condition {
            status: "True",
            reason: "Passed",
            message: "all checks passed".into(),
        };
    }
    // `sync()` reports the last error it received; the last by index is the same text whenever
    // the attempts fail alike, and deterministic when they do not.
    let last = results
        .into_iter()
        .filter_map(Result::err)
        .next_back()
        .unwrap_or_default();
    failed("FailedDiscoveryCheck", last)
}

fn current(apiservice: &Value) -> Option<Value> {
    apiservice
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available").cloned())
}

/// Evaluate and write the condition of one APIService; returns whether it changed.
pub async fn sync_one(state: &State, name: &str) -> bool {
    let key = Key::new("apiregistration.k8s.io", "apiservices", "", name);
    let Some(before) = state.storage.store.get(&key) else {
        return false;
    };
    if before.pointer("/spec/service").is_none_or(Value::is_null) {
        return false;
    }
    let cond = evaluate(state, &before).await;
    state.observability.metrics.set(
        &GAUGE,
        &[name],
        if cond.status == "True" { 0.0 } else { 1.0 },
    );
    // Re-read: the object may have changed while probing.
    let Some(mut obj) = state.storage.store.get(&key) else {
        return false;
    };
    let old = current(&obj);
    let same = old.as_ref().is_some_and(|c| {
        c["status"] == cond.status
            && c["reason"] == cond.reason
            && c["message"] == cond.message.as_str()
    });
    // An unchanged status is not written, as `updateAPIServiceStatus` skips a semantically equal
    // one: a write every period would bump the resourceVersion and wake every APIService watcher.
    if same {
        return false;
    }
    // `SetAPIServiceCondition` keeps `lastTransitionTime` while the status stays the same (only the
    // reason or message changed): it dates the last True↔False flip, which is what says how long
    // a group has been down.
    let transition = match &old {
        Some(c) if c["status"] == cond.status => c["lastTransitionTime"].clone(),
        _ => json!(
            jiff::Timestamp::now()
                .strftime("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        ),
    };
    let was_available = is_available(&obj);
    obj["status"] = json!({"conditions": [{
        "type": "Available", "status": cond.status, "lastTransitionTime": transition,
        "reason": cond.reason, "message": cond.message,
    }]});
    if state.storage.store.update(key, obj, false).is_ok() && was_available && cond.status != "True"
    {
        state
            .observability
            .metrics
            .inc(&COUNTER, &[name, cond.reason]);
    }
    true
}

/// A digest of what the controller watches (APIService specs, Services, Endpoints).
fn fingerprint(state: &State) -> Vec<u8> {
    let mut h = sha2::Sha256::new();
    let (apis, _) = state
        .storage
        .store
        .list("apiregistration.k8s.io", "apiservices", None);
    for a in &apis {
        h.update(a["metadata"]["name"].to_string());
        h.update(a["spec"].to_string());
    }
    for r in ["services", "endpoints"] {
        let (items, _) = state.storage.store.list("", r, None);
        for i in &items {
            h.update(
                i["metadata"]
                    .get("resourceVersion")
                    .map(Value::to_string)
                    .unwrap_or_default(),
            );
            h.update(i["metadata"]["name"].to_string());
        }
    }
    h.finalize().to_vec()
}

/// Evaluate every remote APIService once.
pub async fn sync_all(state: &State) {
    let (apis, _) = state
        .storage
        .store
        .list("apiregistration.k8s.io", "apiservices", None);
    let names: Vec<String> = apis
        .iter()
        .filter(|a| a.pointer("/spec/service").is_some_and(|s| !s.is_null()))
        .filter_map(|a| {
            a.pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    // kube-aggregator's controller works its queue with a few workers; probing hundreds of
    // APIServices at once would time every probe out on a small machine.
    let mut pending = names.into_iter();
    loop {
        let batch: Vec<String> = pending.by_ref().take(AVAILABILITY_WORKERS).collect();
        if batch.is_empty() {
            break;
        }
        futures::future::join_all(batch.iter().map(|n| sync_one(state, n))).await;
    }
}

/// Concurrent availability checks (kube-aggregator runs a handful of workers).
const AVAILABILITY_WORKERS: usize = 8;

/// Run the controller until shutdown.
pub async fn run(state: Arc<State>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut revisions = state.storage.store.subscribe_revision();
    let period = Duration::from_millis(state.scenario.server.availability_period_ms.max(10));
    let mut seen = Vec::new();
    let mut ticker = tokio::time::interval(period);
    ticker.tick().await;
    loop {
        let fp = fingerprint(&state);
        if fp != seen {
            sync_all(&state).await;
            seen = fingerprint(&state);
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = revisions.changed() => {}
            _ = ticker.tick() => {
                sync_all(&state).await;
                seen = fingerprint(&state);
            }
        }
    }
}
