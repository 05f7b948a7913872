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
//!
//! A list's items are converted in one ConversionReview, in order, as apiextensions-apiserver's
//! `webhookConverter.Convert` does for an `UnstructuredList` (webhook_converter.go); the answer
//! must carry the request's uid and exactly as many objects as were sent, each with the uid, name,
//! namespace and kind of the object at its position, or the whole request fails with Go's words.
//!
//! On a profile that serves lists from the watch cache (`Profile::lists_from_converted_watch_cache`,
//! as real 1.3x servers do), a list of a non-storage version answers from that version's cache of
//! converted objects and calls the webhook only for objects the cache does not hold at their
//! current resourceVersion; a GET and a write convert on every call. So a list keeps answering
//! after the converter stops, and a GET fails — what a real v1.36 does.

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

/// How apiextensions-apiserver's `webhookConverter.Convert` (webhook_converter.go) was called:
/// on an `UnstructuredList` (a list's items) or on one object. The review is the same; the
/// wording of a bad answer is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    List,
    Single,
}

async fn convert(
    state: &State,
    def: &ResourceDef,
    mut objs: Vec<Value>,
    desired: &str,
    shape: Shape,
) -> Result<Vec<Value>, ApiError> {
    // `getObjectsToConvert`: only the objects not already at the desired version are sent.
    let sent: Vec<usize> = (0..objs.len())
        .filter(|&i| objs[i]["apiVersion"].as_str() != Some(desired))
        .collect();
    let Some(&first) = sent.first() else {
        return Ok(objs);
    };
    let Some(crd) = crd_of(state, def) else {
        return Ok(objs);
    };
    if crd
        .pointer("/spec/conversion/strategy")
        .and_then(Value::as_str)
        != Some("Webhook")
    {
        for i in sent {
            objs[i]["apiVersion"] = json!(desired);
        }
        return Ok(objs);
    }
    let crd_name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // The version Go names is the one the objects are stored at (`in`'s GroupVersionKind):
    // `conversion webhook for stable.example.com/v1, Kind=CronTab failed: …` when reading v2.
    let from = objs[first]["apiVersion"].as_str().unwrap_or("").to_string();
    let gvk = format!("{from}, Kind={}", def.kind);
    // One ConversionReview for all of them, in order, as `webhookConverter.Convert` sends an
    // `UnstructuredList`'s items: a list of N objects is one webhook call, not N.
    let originals: Vec<Value> = sent.iter().map(|&i| objs[i].clone()).collect();
    let started = Instant::now();
    let result = call(state, &crd, &originals, desired, shape).await;
    let ok = result.is_ok();
    state.observability.metrics.observe(
        state.profile.crd_conversion_histogram(),
        CRD_DURATION_BUCKETS,
        &[&crd_name, &from, if ok { "true" } else { "false" }, desired],
        started.elapsed().as_secs_f64(),
    );
    let (failure_type, outcome) = match &result {
        Ok(_) => ("", "success"),
        Err(e) => (e.failure_type, "failure"),
    };
    if state.profile.has_conversion_webhook_families() {
        state
            .observability
            .metrics
            .inc(&REQUESTS, &[failure_type, outcome]);
        state.observability.metrics.observe(
            &DURATION,
            DURATION_BUCKETS,
            &[failure_type, outcome],
            started.elapsed().as_secs_f64(),
        );
    }
    match result {
        Ok(converted) => {
            for (i, c) in sent.into_iter().zip(converted) {
                objs[i] = c;
            }
            Ok(objs)
        }
        Err(e) => Err(ApiError::plain_error(format!(
            "conversion webhook for {gvk} {}",
            e.text
        ))),
    }
}

/// A failed conversion: the `failure_type` label of `apiserver_conversion_webhook_request_total`
/// and the text Go puts after `conversion webhook for <gvk> ` (`failed: …` or `returned …`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    failure_type: &'static str,
    text: String,
}

impl Failure {
    fn new(failure_type: &'static str, text: String) -> Self {
        Failure { failure_type, text }
    }
}

const CALL: &str = "conversion_webhook_call_failure";
const MALFORMED: &str = "conversion_webhook_malformed_response_failure";
const PARTIAL: &str = "conversion_webhook_partial_response_failure";
const INVALID: &str = "conversion_webhook_invalid_converted_object_failure";

async fn call(
    state: &State,
    crd: &Value,
    objs: &[Value],
    desired: &str,
    shape: Shape,
) -> Result<Vec<Value>, Failure> {
    let cc = crd
        .pointer("/spec/conversion/webhook/clientConfig")
        .cloned()
        .unwrap_or(Value::Null);
    // A conversion webhook has no `timeoutSeconds` (admission webhooks do): the 30 s here is the
    // fixed bound the module doc's `?timeout=30s` shows.
    let target = webhook_target(&cc, 30).map_err(|e| Failure::new(CALL, format!("failed: {e}")))?;
    let url = target.url();
    let uid = format!(
        "c0a7e25e-0000-4000-8000-{:012x}",
        state.storage.store.revision()
    );
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objs}
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
    let call_failure =
        |cause: String| Failure::new(CALL, format!("failed: Post \"{url}\": {cause}"));
    let (status, body) =
        match tokio::time::timeout(std::time::Duration::from_secs(30), exchange).await {
            Err(_) => return Err(call_failure("context deadline exceeded".into())),
            Ok(Err(cause)) => return Err(call_failure(cause)),
            Ok(Ok(r)) => r,
        };
    if !(200..300).contains(&status) {
        return Err(Failure::new(
            CALL,
            format!(
                "failed: an error on the server (\"{}\") has prevented the request from succeeding",
                String::from_utf8_lossy(&body).trim()
            ),
        ));
    }
    let parsed: Value = serde_json::from_slice(&body)
        .map_err(|e| Failure::new(MALFORMED, format!("failed: unmarshal failed: {e}")))?;
    converted_objects(objs, &uid, desired, shape, &parsed)
}

/// Check a ConversionReview v1 answer to the review of `sent` (request `uid`) and return the
/// converted objects, in Go's order of checks: `getConvertedObjectsFromResponse` (a response, the
/// request's uid, `result.status`), then `Convert`'s count — as many objects back as were sent —
/// then, object by object in order, the version, the kind, `validateConvertedObject` (same kind,
/// name, namespace and uid as the object sent at that position) and `restoreObjectMeta` (the
/// metadata is the original's; only labels and annotations come from the webhook).
fn converted_objects(
    sent: &[Value],
    uid: &str,
    desired: &str,
    shape: Shape,
    parsed: &Value,
) -> Result<Vec<Value>, Failure> {
    let malformed = |text: String| Failure::new(MALFORMED, format!("failed: {text}"));
    let Some(response) = parsed.get("response").filter(|r| r.is_object()) else {
        return Err(malformed("no response provided".into()));
    };
    let got_uid = response["uid"].as_str().unwrap_or("");
    if got_uid != uid {
        return Err(malformed(format!(
            "expected response.uid={uid:?}, got {got_uid:?}"
        )));
    }
    // A 200 with `result.status: Failure` is the webhook refusing the conversion: the call worked,
    // the read still fails.
    let result_status = response["result"]["status"].as_str().unwrap_or("");
    if result_status != "Success" {
        return Err(malformed(
            match response["result"]["message"]
                .as_str()
                .filter(|m| !m.is_empty())
            {
                Some(m) => m.to_string(),
                None => format!("response.result.status was '{result_status}', not 'Success'"),
            },
        ));
    }
    let converted: Vec<Value> = response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if converted.len() != sent.len() {
        return Err(Failure::new(
            PARTIAL,
            format!(
                "returned {} objects, expected {}",
                converted.len(),
                sent.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(sent.len());
    for (i, (original, mut c)) in sent.iter().zip(converted).enumerate() {
        // Go's list loop counts the object before checking it, so its messages name index i+1;
        // a single object's name index 0.
        let (invalid, invalid_meta) = match shape {
            Shape::List => (
                format!("returned invalid converted object at index {}", i + 1),
                format!("returned invalid metadata in object at index {}", i + 1),
            ),
            Shape::Single => (
                "returned invalid object at index 0".to_string(),
                "returned invalid metadata".to_string(),
            ),
        };
        let s = |v: &Value, p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (got_gv, want_kind, got_kind) =
            (s(&c, "/apiVersion"), s(original, "/kind"), s(&c, "/kind"));
        if got_gv != desired {
            return Err(Failure::new(
                INVALID,
                format!("{invalid}: invalid groupVersion (expected {desired}, received {got_gv})"),
            ));
        }
        if got_kind != want_kind {
            return Err(Failure::new(
                INVALID,
                format!("{invalid}: invalid kind (expected {want_kind}, received {got_kind})"),
            ));
        }
        // `validateConvertedObject`; a single object's message has no index.
        let invalid_object = match shape {
            Shape::List => invalid.clone(),
            Shape::Single => "returned invalid object".to_string(),
        };
        for (field, pointer) in [
            ("name", "/metadata/name"),
            ("namespace", "/metadata/namespace"),
            ("UID", "/metadata/uid"),
        ] {
            let (e, a) = (s(original, pointer), s(&c, pointer));
            if e != a {
                return Err(Failure::new(
                    INVALID,
                    format!("{invalid_object}: must have the same {field}: {e} != {a}"),
                ));
            }
        }
        let Some(returned) = c.get("metadata").cloned() else {
            return Err(Failure::new(
                INVALID,
                format!("{invalid_meta}: missing metadata in converted object"),
            ));
        };
        let mut meta = original.get("metadata").cloned().unwrap_or(json!({}));
        for field in ["labels", "annotations"] {
            match returned.get(field).filter(|v| !v.is_null()) {
                Some(v) => meta[field] = v.clone(),
                None => {
                    if let Some(m) = meta.as_object_mut() {
                        m.remove(field);
                    }
                }
            }
        }
        c["metadata"] = meta;
        out.push(c);
    }
    Ok(out)
}

/// Convert an object read from storage to the version of the request.
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
    convert(state, def, objs, &def.api_version(), Shape::Single).await
}

/// Convert a list's items read from storage to the version of the request: one ConversionReview
/// for all of them (apiextensions-apiserver converts the `UnstructuredList` in one call).
///
/// # Errors
/// A failed conversion webhook call, or an answer Go refuses (fewer or more objects than sent,
/// an object whose uid, name, namespace or kind changed).
pub async fn list_to_version(
    state: &State,
    def: &ResourceDef,
    items: Vec<Value>,
) -> Result<Vec<Value>, ApiError> {
    if !def.custom {
        return Ok(items);
    }
    if !state.profile.lists_from_converted_watch_cache() || def.version == def.storage_version {
        return convert(state, def, items, &def.api_version(), Shape::List).await;
    }
    // The version's watch cache: an object it holds at its current resourceVersion was converted
    // when the cache filled or the object last changed, and is served as it is; the others are
    // converted now, in one review, as the cache's fill or its next event would.
    let cache_key = format!("{}/{}/{}", def.group, def.version, def.resource);
    let object_key = super::store::namespaced_name;
    let version_of = |o: &Value| {
        o.pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut out: Vec<Option<Value>> = Vec::with_capacity(items.len());
    let mut missing: Vec<(usize, Value)> = Vec::new();
    {
        let caches = state.storage.converted_caches.lock().unwrap();
        let cache = caches.get(&cache_key);
        for (i, o) in items.into_iter().enumerate() {
            match cache.and_then(|c| c.get(&object_key(&o))) {
                Some((rv, converted)) if *rv == version_of(&o) => out.push(Some(converted.clone())),
                _ => {
                    out.push(None);
                    missing.push((i, o));
                }
            }
        }
    }
    if !missing.is_empty() {
        let originals: Vec<Value> = missing.iter().map(|(_, o)| o.clone()).collect();
        let converted = convert(state, def, originals, &def.api_version(), Shape::List).await?;
        let mut caches = state.storage.converted_caches.lock().unwrap();
        let cache = caches.entry(cache_key).or_default();
        for ((i, original), c) in missing.into_iter().zip(converted) {
            cache.insert(object_key(&original), (version_of(&original), c.clone()));
            out[i] = Some(c);
        }
    }
    Ok(out.into_iter().flatten().collect())
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
    Ok(convert(state, def, vec![obj], &storage, Shape::Single)
        .await?
        .pop()
        .unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crontab(name: &str, uid: &str) -> Value {
        json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
               "metadata": {"name": name, "namespace": "default", "uid": uid, "resourceVersion": "7",
                            "labels": {"app": name}}})
    }

    fn answer(uid: &str, objs: &[Value]) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
               "response": {"uid": uid, "convertedObjects": objs, "result": {"status": "Success"}}})
    }

    fn to_v2(o: &Value) -> Value {
        let mut o = o.clone();
        o["apiVersion"] = json!("stable.example.com/v2");
        o
    }

    const V2: &str = "stable.example.com/v2";

    // webhook_converter.go `Convert`: the converted objects come back in the order sent, and the
    // metadata is the original's except labels and annotations (`restoreObjectMeta`).
    #[test]
    fn an_answer_with_every_object_in_order_is_taken() {
        let sent = [crontab("a", "u-a"), crontab("b", "u-b")];
        let mut b = to_v2(&sent[1]);
        b["metadata"]["resourceVersion"] = json!("999");
        b["metadata"]["labels"] = json!({"app": "b", "converted": "yes"});
        let got = converted_objects(
            &sent,
            "r1",
            V2,
            Shape::List,
            &answer("r1", &[to_v2(&sent[0]), b]),
        )
        .unwrap();
        assert_eq!(got[0], to_v2(&sent[0]));
        assert_eq!(got[1]["metadata"]["resourceVersion"], "7");
        assert_eq!(got[1]["metadata"]["labels"]["converted"], "yes");
    }

    // `len(convertedObjects) != len(objectsToConvert)` fails the whole request.
    #[test]
    fn fewer_or_more_objects_than_sent_fail_the_request() {
        let sent = [crontab("a", "u-a"), crontab("b", "u-b")];
        for back in [
            vec![to_v2(&sent[0])],
            vec![to_v2(&sent[0]), to_v2(&sent[1]), to_v2(&sent[1])],
        ] {
            let e =
                converted_objects(&sent, "r1", V2, Shape::List, &answer("r1", &back)).unwrap_err();
            assert_eq!(e.failure_type, PARTIAL);
            assert_eq!(
                e.text,
                format!("returned {} objects, expected 2", back.len())
            );
        }
        let e =
            converted_objects(&sent[..1], "r1", V2, Shape::Single, &answer("r1", &[])).unwrap_err();
        assert_eq!(e.text, "returned 0 objects, expected 1");
    }

    // `validateConvertedObject`: each object keeps the uid of the one sent at its position, so an
    // answer in another order, or one whose uid is missing, is refused.
    #[test]
    fn a_changed_or_missing_uid_fails_the_request() {
        let sent = [crontab("a", "u-a"), crontab("b", "u-b")];
        let swapped = [to_v2(&sent[1]), to_v2(&sent[0])];
        let e =
            converted_objects(&sent, "r1", V2, Shape::List, &answer("r1", &swapped)).unwrap_err();
        assert_eq!(e.failure_type, INVALID);
        assert_eq!(
            e.text,
            "returned invalid converted object at index 1: must have the same name: a != b"
        );
        let mut no_uid = to_v2(&sent[1]);
        no_uid["metadata"].as_object_mut().unwrap().remove("uid");
        let e = converted_objects(
            &sent,
            "r1",
            V2,
            Shape::List,
            &answer("r1", &[to_v2(&sent[0]), no_uid]),
        )
        .unwrap_err();
        assert_eq!(
            e.text,
            "returned invalid converted object at index 2: must have the same UID: u-b != "
        );
        let mut other = to_v2(&sent[0]);
        other["metadata"]["uid"] = json!("u-x");
        let e = converted_objects(&sent[..1], "r1", V2, Shape::Single, &answer("r1", &[other]))
            .unwrap_err();
        assert_eq!(
            e.text,
            "returned invalid object: must have the same UID: u-a != u-x"
        );
    }

    // `getConvertedObjectsFromResponse`: the review must answer this request.
    #[test]
    fn an_answer_to_another_review_is_malformed() {
        let sent = [crontab("a", "u-a")];
        let e = converted_objects(
            &sent,
            "r1",
            V2,
            Shape::Single,
            &answer("r2", &[to_v2(&sent[0])]),
        )
        .unwrap_err();
        assert_eq!(e.failure_type, MALFORMED);
        assert_eq!(e.text, "failed: expected response.uid=\"r1\", got \"r2\"");
        let e =
            converted_objects(&sent, "r1", V2, Shape::Single, &answer("r1", &sent)).unwrap_err();
        assert_eq!(
            e.text,
            "returned invalid object at index 0: invalid groupVersion (expected stable.example.com/v2, received stable.example.com/v1)"
        );
    }
}
