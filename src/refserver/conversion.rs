//! CRD version conversion: objects are stored at the CRD's storage version and converted when a
//! request (read or write) uses another served version.
//!
//! `strategy: None` only rewrites `apiVersion`, like the real nop converter. `strategy: Webhook`
//! sends a ConversionReview v1 over real HTTPS (`?timeout=30s`) and fails the way
//! apiextensions-apiserver does: `conversion webhook for <group>/<version>, Kind=<Kind> failed:
//! Post "https://…/convert?timeout=30s": …`, which reaches the client as a reason-less 500
//! (`Error from server: conversion webhook for …`). Metrics: the latency histogram
//! `{crd_name,from_version,to_version,succeeded}` under the release's name
//! (`apiserver_crd_conversion_webhook_duration_seconds` from 1.28,
//! `apiserver_crd_webhook_conversion_duration_seconds` before), and from 1.28 on
//! `apiserver_conversion_webhook_request_total{result,failure_type}` and
//! `apiserver_conversion_webhook_duration_seconds{result,failure_type}` (`profile.rs`).

use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use super::metrics::Desc;
use super::network::{self, Outbound, Trust, webhook_target};
use super::registry::ResourceDef;
use super::state::State;
use super::status::ApiError;

const REQUESTS: Desc = Desc {
    name: "apiserver_conversion_webhook_request_total",
    help: "[ALPHA] Counter for conversion webhook requests with success/failure and failure error type",
    labels: &["failure_type", "result"],
};
const DURATION: Desc = Desc {
    name: "apiserver_conversion_webhook_duration_seconds",
    help: "[ALPHA] Conversion webhook request latency",
    labels: &["failure_type", "result"],
};
/// Buckets of the CRD conversion latency histogram in every supported release:
/// `metrics.ExponentialBuckets(0.001, 2, 15)`, 0.001 … 16.384 (apiextensions-apiserver
/// `pkg/apiserver/conversion/metrics.go`; the 1.24 captures agree).
const CRD_DURATION_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192, 16.384,
];
/// Buckets of `apiserver_conversion_webhook_duration_seconds`: 5 ms … 60 s (REFERENCE §3).
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0,
];

fn crd_of(state: &State, def: &ResourceDef) -> Option<Value> {
    super::registry::crd_for(&state.storage.store, &def.group, &def.resource)
}

async fn convert(
    state: &State,
    def: &ResourceDef,
    objs: Vec<Value>,
    desired: &str,
) -> Result<Vec<Value>, ApiError> {
    let needs: Vec<bool> = objs
        .iter()
        .map(|o| o["apiVersion"].as_str() != Some(desired))
        .collect();
    if !needs.iter().any(|n| *n) {
        return Ok(objs);
    }
    let Some(crd) = crd_of(state, def) else {
        return Ok(objs);
    };
    if crd
        .pointer("/spec/conversion/strategy")
        .and_then(Value::as_str)
        != Some("Webhook")
    {
        return Ok(objs
            .into_iter()
            .map(|mut o| {
                o["apiVersion"] = json!(desired);
                o
            })
            .collect());
    }
    let crd_name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut out = Vec::with_capacity(objs.len());
    for (o, need) in objs.into_iter().zip(needs) {
        if !need {
            out.push(o);
            continue;
        }
        let from = o["apiVersion"].as_str().unwrap_or("").to_string();
        let started = Instant::now();
        let result = call(state, &crd, &o, desired).await;
        let ok = result.is_ok();
        state.observability.metrics.observe(
            state.profile.crd_conversion_histogram(),
            CRD_DURATION_BUCKETS,
            &[&crd_name, &from, if ok { "true" } else { "false" }, desired],
            started.elapsed().as_secs_f64(),
        );
        let webhook_families = state.profile.has_conversion_webhook_families();
        match result {
            Ok(converted) => {
                if webhook_families {
                    state.observability.metrics.inc(&REQUESTS, &["", "success"]);
                    state.observability.metrics.observe(
                        &DURATION,
                        DURATION_BUCKETS,
                        &["", "success"],
                        started.elapsed().as_secs_f64(),
                    );
                }
                out.push(converted);
            }
            Err((failure_type, cause)) => {
                if webhook_families {
                    state
                        .observability
                        .metrics
                        .inc(&REQUESTS, &[failure_type, "failure"]);
                    state.observability.metrics.observe(
                        &DURATION,
                        DURATION_BUCKETS,
                        &[failure_type, "failure"],
                        started.elapsed().as_secs_f64(),
                    );
                }
                return Err(ApiError::plain_error(format!(
                    "conversion webhook for {from}, Kind={} failed: {cause}",
                    def.kind
                )));
            }
        }
    }
    Ok(out)
}

async fn call(
    state: &State,
    crd: &Value,
    obj: &Value,
    desired: &str,
) -> Result<Value, (&'static str, String)> {
    let cc = crd
        .pointer("/spec/conversion/webhook/clientConfig")
        .cloned()
        .unwrap_or(Value::Null);
    // A conversion webhook has no `timeoutSeconds` (admission webhooks do): the 30 s here is the
    // fixed bound the module doc's `?timeout=30s` shows.
    let target = webhook_target(&cc, 30).map_err(|e| ("conversion_webhook_call_failure", e))?;
    let url = target.url();
    let uid = format!(
        "c0a7e25e-0000-4000-8000-{:012x}",
        state.storage.store.revision()
    );
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": [obj]}
    });
    let out = Outbound {
        method: "POST",
        host: &target.host,
        port: target.port,
        path: &target.path,
        server_name: &target.server_name,
        trust: Trust::Verify(target.roots.clone()),
        client_cert: None,
        headers: vec![("content-type".into(), "application/json".into())],
        body: Bytes::from(review.to_string()),
    };
    let exchange = async {
        let resp = network::send(&state.cluster, &state.storage.store, out).await?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, body))
    };
    let call_failure = |cause: String| {
        (
            "conversion_webhook_call_failure",
            format!("Post \"{url}\": {cause}"),
        )
    };
    let (status, body) =
        match tokio::time::timeout(std::time::Duration::from_secs(30), exchange).await {
            Err(_) => return Err(call_failure("context deadline exceeded".into())),
            Ok(Err(cause)) => return Err(call_failure(cause)),
            Ok(Ok(r)) => r,
        };
    if !(200..300).contains(&status) {
        return Err((
            "conversion_webhook_call_failure",
            format!(
                "an error on the server (\"{}\") has prevented the request from succeeding",
                String::from_utf8_lossy(&body).trim()
            ),
        ));
    }
    let parsed: Value = serde_json::from_slice(&body).map_err(|e| {
        (
            "conversion_webhook_malformed_response_failure",
            format!("unmarshal failed: {e}"),
        )
    })?;
    let response = &parsed["response"];
    // A 200 with `result.status: Failure` is the webhook refusing the conversion: the call worked,
    // the read still fails (`if response.Result.Status != StatusSuccess` in webhook_converter.go).
    if response["result"]["status"] != "Success" {
        return Err((
            "conversion_webhook_malformed_response_failure",
            response["result"]["message"]
                .as_str()
                .unwrap_or("conversion failed")
                .to_string(),
        ));
    }
    let converted = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    match converted.as_slice() {
        [] => Err((
            "conversion_webhook_no_objects_returned_failure",
            "no objects returned".into(),
        )),
        // The API server checks each returned object's apiVersion against the desired one, so a
        // webhook that echoes its input unconverted fails here rather than storing the wrong version.
        [one] if one["apiVersion"] == desired => Ok(one.clone()),
        [one] => Err((
            "conversion_webhook_invalid_converted_object_failure",
            format!(
                "returned invalid converted object at index 0: invalid apiVersion {:?}, expected {desired:?}",
                one["apiVersion"].as_str().unwrap_or("")
            ),
        )),
        more => Err((
            "conversion_webhook_partial_response_failure",
            format!("returned {} objects, expected 1", more.len()),
        )),
    }
}

/// Convert objects read from storage to the version of the request.
///
/// # Errors
/// A failed conversion webhook call.
pub async fn to_version(
    state: &State,
    def: &ResourceDef,
    objs: Vec<Value>,
) -> Result<Vec<Value>, ApiError> {
    if !def.custom {
        return Ok(objs);
    }
    convert(state, def, objs, &def.api_version()).await
}

/// Convert an object written at the request's version to the storage version.
///
/// # Errors
/// A failed conversion webhook call.
pub async fn to_storage(state: &State, def: &ResourceDef, obj: Value) -> Result<Value, ApiError> {
    if !def.custom || def.version == def.storage_version {
        return Ok(obj);
    }
    let storage = format!("{}/{}", def.group, def.storage_version);
    Ok(convert(state, def, vec![obj], &storage)
        .await?
        .pop()
        .unwrap_or(Value::Null))
}
