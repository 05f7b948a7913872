//! `GET /api/v1/namespaces/{ns}/pods/{name}/log`: a Pod's container log, as the kubelet would
//! stream it through kube-apiserver.
//!
//! The Pods of a scenario are objects, not processes; a Pod whose `status.podIP` the scenario's
//! `network` maps to a backend shows that backend's [`ContainerLog`] — the lines the backend wrote
//! as it served (or refused) requests. Any other Pod has an empty log. `tailLines` and
//! `limitBytes` work as in kube-apiserver; `follow` is not supported (the log is returned as it
//! stands), and `container` must name one of the Pod's containers when given.
//!
//! [`ContainerLog`]: crate::refserver::backends::container_log::ContainerLog

use axum::body::Body;
use http::Response;
use serde_json::Value;

use crate::refserver::network::Cluster;
use crate::refserver::request::RequestInfo;
use crate::refserver::status::{ApiError, text_response};
use crate::refserver::store::{Key, Store};

/// The backend a Pod IP is mapped to in the scenario's `network` (`IP` or `IP:port` keys).
fn backend_of(cluster: &Cluster, ip: &str) -> Option<String> {
    cluster
        .network
        .iter()
        .find(|(addr, _)| {
            addr.as_str() == ip || addr.rsplit_once(':').is_some_and(|(h, _)| h == ip)
        })
        .map(|(_, backend)| backend.clone())
}

/// Serve a Pod's log.
///
/// # Errors
/// 404 for a Pod that does not exist, 400 for a container the Pod does not have, 405 for
/// anything but a GET.
pub fn pod_log(
    store: &Store,
    cluster: &Cluster,
    info: &RequestInfo,
) -> Result<Response<Body>, ApiError> {
    if info.verb != "get" {
        return Err(ApiError::method_not_allowed("", "pods", &info.verb));
    }
    let pod = store
        .get(&Key::new("", "pods", &info.namespace, &info.name))
        .ok_or_else(|| ApiError::not_found("", "pods", &info.name))?;
    let containers: Vec<&str> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    if let Some(c) = info.param("container")
        && !containers.contains(&c)
    {
        return Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {}",
            info.name
        )));
    }
    let ip = pod
        .pointer("/status/podIP")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let tail = info.param("tailLines").and_then(|t| t.parse().ok());
    let limit = info.param("limitBytes").and_then(|t| t.parse().ok());
    let text = backend_of(cluster, ip)
        .and_then(|b| cluster.logs.get(&b).cloned())
        .map(|log| log.text(tail, limit))
        .unwrap_or_default();
    Ok(text_response(200, text))
}
