//! A spawned webhook: answers AdmissionReview v1 (allow, deny with a message and code 403, a JSON
//! patch when mutating) and ConversionReview v1 (rewrites `apiVersion` to the desired version), or
//! misbehaves as the scenario says (slow, a fixed HTTP status, a body that is not a review).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use base64::Engine;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::super::scenario::{Behaviour, WebhookAnswer};
use super::super::status::{json_response, text_response};

async fn handle(b: &Behaviour, req: Request<Incoming>) -> Response<Body> {
    if b.slow_ms > 0 {
        tokio::time::sleep(Duration::from_millis(b.slow_ms)).await;
    }
    if let Some(code) = b.status {
        return text_response(code, format!("webhook answers {code}\n"));
    }
    let body = match req.into_body().collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => return text_response(400, "bad request\n".into()),
    };
    if b.answer == WebhookAnswer::BadResponse {
        return text_response(200, "this is not a review\n".into());
    }
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    // Echoed back: the API server rejects a review whose `response.uid` is not the request's
    // (`received invalid webhook response`), so a correct webhook must answer with it.
    let uid = review
        .pointer("/request/uid")
        .cloned()
        .unwrap_or(Value::Null);
    if review["kind"] == "ConversionReview" {
        let desired = review
            .pointer("/request/desiredAPIVersion")
            .cloned()
            .unwrap_or(Value::Null);
        let converted: Vec<Value> = review
            .pointer("/request/objects")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|o| {
                // Only `apiVersion`: the scenario CRDs' versions are schemaless
                // (`x-kubernetes-preserve-unknown-fields`), so that is a complete conversion for
                // them; what the scenarios exercise is the webhook failing, not its logic.
                let mut o = o.clone();
                o["apiVersion"] = desired.clone();
                o
            })
            .collect();
        return json_response(
            200,
            &json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}
            }),
        );
    }
    let mut response = json!({"uid": uid, "allowed": b.answer == WebhookAnswer::Allow});
    // A denial carries its own Status, which the API server wraps as `admission webhook %q
    // denied the request: …` (REFERENCE §2.3): a rejection, not a failure of the call.
    if b.answer == WebhookAnswer::Deny {
        let message = b
            .deny_message
            .clone()
            .unwrap_or_else(|| "denied by policy".into());
        response["status"] = json!({"code": 403, "reason": "Forbidden", "message": message});
    } else if let Some(patch) = &b.patch {
        // `JSONPatch` is the only patchType admission/v1 defines; the patch travels base64.
        response["patchType"] = json!("JSONPatch");
        response["patch"] = json!(
            base64::engine::general_purpose::STANDARD
                .encode(Value::Array(patch.clone()).to_string())
        );
    }
    json_response(
        200,
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

/// The per-connection service.
pub fn service(
    behaviour: Arc<Behaviour>,
) -> impl tower::Service<
    Request<Incoming>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Send,
> + Clone
+ Send {
    tower::service_fn(move |req: Request<Incoming>| {
        let b = behaviour.clone();
        async move { Ok::<_, Infallible>(handle(&b, req).await) }
    })
}
