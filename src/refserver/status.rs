//! Kubernetes `Status` error bodies, and the one error type every handler returns.
//!
//! The shapes are apimachinery's (`pkg/api/errors/errors.go`): `NotFound`, `AlreadyExists`,
//! `Conflict`, `Forbidden`, `Unauthorized`, `Expired` (410), `Timeout` (504), `InternalError`, and
//! the reason-less 500 that `ErrorToAPIStatus` makes of a plain error (how an etcd error reaches a
//! client: `Error from server: etcdserver: request timed out`). Plain-text errors (the aggregator's
//! `service unavailable`, APF's `Too many requests…`) are a separate variant because the real server
//! writes them with `http.Error`, not as a Status.

use axum::body::Body;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};

/// An error response: either a Kubernetes Status or a plain-text body.
#[derive(Debug, Clone)]
pub enum ApiError {
    /// A `Status` object.
    Status {
        /// HTTP code (also `code` in the body).
        code: u16,
        /// `reason` ("" for an unknown reason: the field is then omitted).
        reason: &'static str,
        /// `message`.
        message: String,
        /// `details`, when the real server sets them.
        details: Option<Value>,
    },
    /// A `text/plain` body written with Go's `http.Error` (it appends a newline).
    Plain {
        /// HTTP code.
        code: u16,
        /// Body text without the trailing newline.
        text: String,
    },
}

fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(kind));
    Value::Object(d)
}

impl ApiError {
    /// `<resource>.<group> "<name>" not found` (404 NotFound).
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        ApiError::Status {
            code: 404,
            reason: "NotFound",
            message: format!("{} \"{name}\" not found", qualified(group, resource)),
            details: Some(details(name, group, resource)),
        }
    }

    /// 404 for a path nothing serves (the real body is the bare `404 page not found` text).
    pub fn path_not_found() -> Self {
        ApiError::Status {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: Some(json!({})),
        }
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        ApiError::Status {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{} \"{name}\" already exists", qualified(group, resource)),
            details: Some(details(name, group, resource)),
        }
    }

    /// 409 Conflict for a stale resourceVersion.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        ApiError::Status {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(group, resource)
            ),
            details: Some(details(name, group, resource)),
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::Status {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
            details: None,
        }
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(group: &str, resource: &str, verb: &str) -> Self {
        ApiError::Status {
            code: 405,
            reason: "MethodNotAllowed",
            message: format!(
                "{verb} is not supported on resources of kind \"{}\"",
                qualified(group, resource)
            ),
            details: None,
        }
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        ApiError::Status {
            code: 401,
            reason: "Unauthorized",
            message: "Unauthorized".into(),
            details: None,
        }
    }

    /// 403 Forbidden with an RBAC-style message already formatted by the caller.
    pub fn forbidden(message: String, name: &str, group: &str, resource: &str) -> Self {
        ApiError::Status {
            code: 403,
            reason: "Forbidden",
            message,
            details: Some(details(name, group, resource)),
        }
    }

    /// 410 Expired: `too old resource version: X (Y)`.
    pub fn expired(message: String) -> Self {
        ApiError::Status {
            code: 410,
            reason: "Expired",
            message,
            details: None,
        }
    }

    /// 504 Timeout from the request-timeout filter.
    pub fn request_timeout() -> Self {
        ApiError::Status {
            code: 504,
            reason: "Timeout",
            message: "Timeout: request did not complete within the allotted timeout".into(),
            details: Some(json!({})),
        }
    }

    /// 500 InternalError: `Internal error occurred: <msg>`.
    pub fn internal(message: &str) -> Self {
        ApiError::Status {
            code: 500,
            reason: "InternalError",
            message: format!("Internal error occurred: {message}"),
            details: Some(json!({"causes": [{"message": message}]})),
        }
    }

    /// 500 with no reason: what `ErrorToAPIStatus` makes of a plain Go error (e.g. from etcd).
    pub fn plain_error(message: impl Into<String>) -> Self {
        ApiError::Status {
            code: 500,
            reason: "",
            message: message.into(),
            details: None,
        }
    }

    /// 422 Invalid.
    pub fn invalid(kind: &str, name: &str, message: &str) -> Self {
        ApiError::Status {
            code: 422,
            reason: "Invalid",
            message: format!("{kind} \"{name}\" is invalid: {message}"),
            details: None,
        }
    }

    /// A plain-text error (`http.Error`).
    pub fn plain(code: u16, text: impl Into<String>) -> Self {
        ApiError::Plain {
            code,
            text: text.into(),
        }
    }

    /// The HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::Status { code, .. } | ApiError::Plain { code, .. } => *code,
        }
    }

    /// The Status object (for watch ERROR events); plain errors become reason-less Status.
    pub fn status_object(&self) -> Value {
        match self {
            ApiError::Status {
                code,
                reason,
                message,
                details,
            } => {
                let mut m = serde_json::Map::new();
                m.insert("kind".into(), json!("Status"));
                m.insert("apiVersion".into(), json!("v1"));
                m.insert("metadata".into(), json!({}));
                m.insert("status".into(), json!("Failure"));
                m.insert("message".into(), json!(message));
                if !reason.is_empty() {
                    m.insert("reason".into(), json!(reason));
                }
                if let Some(d) = details {
                    m.insert("details".into(), d.clone());
                }
                m.insert("code".into(), json!(code));
                Value::Object(m)
            }
            ApiError::Plain { code, text } => json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": text, "code": code
            }),
        }
    }

    /// The HTTP response.
    pub fn into_response(self) -> Response<Body> {
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let (ctype, body) = match &self {
            ApiError::Status { .. } => ("application/json", self.status_object().to_string()),
            ApiError::Plain { text, .. } => ("text/plain; charset=utf-8", format!("{text}\n")),
        };
        let mut resp = Response::new(Body::from(body));
        *resp.status_mut() = code;
        resp.headers_mut()
            .insert(http::header::CONTENT_TYPE, HeaderValue::from_static(ctype));
        resp.headers_mut().insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        resp
    }
}

/// A JSON response with status 200 (or `code`).
pub fn json_response(code: u16, value: &Value) -> Response<Body> {
    let mut resp = Response::new(Body::from(value.to_string()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A plain-text response.
pub fn text_response(code: u16, text: String) -> Response<Body> {
    let mut resp = Response::new(Body::from(text));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
