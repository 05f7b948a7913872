//! Kubernetes `Status` errors in the shapes clients print them.
//!
//! The same error reaches an on-call engineer as a JSON `Status` (curl, `-v6` traces), as kubectl's
//! `Error from server (ServiceUnavailable): … (get flunders.wardle.example.com)`, or as client-go's
//! generic rendering of a non-Status response (`the server is currently unable to handle the
//! request`, `an error on the server ("…") has prevented the request from succeeding`). This file
//! turns each of them into the bundle's [`StatusBody`], using only facts of the API conventions:
//! the reason→code table of `k8s.io/apimachinery/pkg/api/errors` and the messages
//! `NewGenericServerResponse` writes (REFERENCE §2.3). Nothing is guessed beyond those tables.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::bundle::{StatusBody, StatusCause};

/// HTTP code of a `Status` reason (apimachinery `errors.go`).
pub(crate) fn code_for_reason(reason: &str) -> Option<u16> {
    Some(match reason {
        "BadRequest" => 400,
        "Unauthorized" => 401,
        "Forbidden" => 403,
        "NotFound" => 404,
        "MethodNotAllowed" => 405,
        "NotAcceptable" => 406,
        "AlreadyExists" | "Conflict" => 409,
        // `NewResourceExpired` (a watch from a compacted resourceVersion) answers 410 Gone with
        // reason Expired.
        "Gone" | "Expired" => 410,
        "RequestEntityTooLarge" => 413,
        "UnsupportedMediaType" => 415,
        "Invalid" => 422,
        "TooManyRequests" => 429,
        // Not 504: `NewServerTimeout` sets 500 with reason ServerTimeout ("the server cannot
        // complete the requested operation at this time"); 504 is reason Timeout
        // (`NewTimeoutError`).
        "InternalError" | "ServerTimeout" => 500,
        "ServiceUnavailable" => 503,
        "Timeout" => 504,
        _ => return None,
    })
}

/// client-go's rendering of a non-Status error response, by message prefix: `(reason, code)`.
pub(crate) const GENERIC_MESSAGES: &[(&str, &str, u16)] = &[
    (
        "the server is currently unable to handle the request",
        "ServiceUnavailable",
        503,
    ),
    (
        "the server was unable to return a response in the time allotted",
        "Timeout",
        504,
    ),
    (
        "the server has received too many requests and has asked us to try again later",
        "TooManyRequests",
        429,
    ),
    (
        "the server has asked for the client to provide credentials",
        "Unauthorized",
        401,
    ),
    (
        "the server does not allow access to the requested resource",
        "Forbidden",
        403,
    ),
    (
        "the server could not find the requested resource",
        "NotFound",
        404,
    ),
    ("the server reported a conflict", "Conflict", 409),
    (
        "the server rejected our request for an unknown reason",
        "BadRequest",
        400,
    ),
    ("an error on the server (", "InternalError", 500),
    // apierrors.NewInternalError: what a fail-closed webhook and other server faults return.
    ("Internal error occurred: ", "InternalError", 500),
];

/// `(reason, code)` when `message` is one of client-go's generic renderings. kubectl prints only the
/// message for writes (`error: failed to create configmap: <message>`), so the wording is the only
/// trace of the status.
pub(crate) fn generic_reason(message: &str) -> Option<(&'static str, u16)> {
    GENERIC_MESSAGES
        .iter()
        .find(|(prefix, _, _)| message.starts_with(prefix))
        .map(|(_, reason, code)| (*reason, *code))
}

/// Undo Go's `%q` quoting (the text between the quotes).
pub(crate) fn go_unquote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                match u8::from_str_radix(&hex, 16) {
                    Ok(b) => out.push(char::from(b)),
                    Err(_) => out.push_str(&hex),
                }
            }
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => out.push_str(&hex),
                }
            }
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

// client-go's rendering of a non-Status 500: the body it got, `%q`-quoted.
const SERVER_ERROR_OPEN: &str = "an error on the server (\"";
const SERVER_ERROR_CLOSE: &str = "\") has prevented the request from succeeding";

/// The body client-go quoted in `an error on the server ("…") has prevented the request from
/// succeeding`, unquoted.
pub(crate) fn unwrap_server_error(message: &str) -> Option<String> {
    let start = message.find(SERVER_ERROR_OPEN)? + SERVER_ERROR_OPEN.len();
    let end = message.rfind(SERVER_ERROR_CLOSE)?;
    (end >= start).then(|| go_unquote(&message[start..end]))
}

/// A `Status` from its JSON form (with or without `kind`, as `helpers.go` and some servers omit it).
pub(crate) fn status_from_value(v: &Value) -> Option<StatusBody> {
    let obj = v.as_object()?;
    let kind = obj.get("kind").and_then(Value::as_str);
    let status = obj.get("status").and_then(Value::as_str);
    let is_status = kind == Some("Status")
        || (kind.is_none()
            && matches!(status, Some("Failure" | "Success"))
            && (obj.contains_key("message") || obj.contains_key("code")));
    if !is_status {
        return None;
    }
    Some(StatusBody::read_fields(obj))
}

/// A Status built from a message as kubectl printed it: the reason (given, or from client-go's
/// generic wording), its code, and the quoted server body as an `UnexpectedServerResponse` cause
/// — exactly how client-go builds it from a non-Status response.
pub(crate) fn status_from_message(reason: Option<&str>, message: &str) -> StatusBody {
    let generic = generic_reason(message);
    let reason = reason
        .map(str::to_string)
        .or_else(|| generic.map(|(r, _)| r.to_string()))
        .unwrap_or_default();
    let code = code_for_reason(&reason).or(generic.map(|(_, c)| c));
    let causes = unwrap_server_error(message)
        .map(|inner| {
            vec![StatusCause {
                reason: "UnexpectedServerResponse".into(),
                message: inner,
                field: String::new(),
            }]
        })
        .unwrap_or_default();
    let mut status = StatusBody {
        status: "Failure".into(),
        message: message.to_string(),
        reason,
        code,
        causes,
        ..StatusBody::default()
    };
    // apimachinery's `NewInvalid` (`%s %q is invalid: %v`, the qualified kind first): the object's
    // own validation rejected it — 422, with the kind and name as its details.
    if let Some(c) = INVALID.captures(message) {
        if status.reason.is_empty() {
            status.reason = "Invalid".into();
        }
        if status.reason == "Invalid" {
            status.code.get_or_insert(422);
            let (kind, group) = c[1].split_once('.').unwrap_or((&c[1], ""));
            status.kind = kind.to_string();
            status.group = group.to_string();
            status.name = c[2].to_string();
        }
    }
    status
}

/// apimachinery's `NewInvalid` message: `ConfigMap "x" is invalid: …`, `Deployment.apps "x" is
/// invalid: …`.
pub(crate) static INVALID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^([A-Z][A-Za-z0-9]*(?:\.[a-z0-9][a-z0-9.\-]*)?) "([^"]*)" is invalid: "#)
        .expect("static regex")
});

static DESCRIPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r" \(((?:get|list|watch|post|put|patch|delete|deletecollection|create|update) [a-z0-9.\-]+(?: [a-z0-9.\-]+)?)\)$")
        .expect("static regex")
});

/// Split kubectl's request suffix off a message: `… (get flunders.wardle.example.com)`.
pub(crate) fn split_description(message: &str) -> (&str, Option<String>) {
    match DESCRIPTION.captures(message) {
        Some(c) => {
            let whole = c.get(0).expect("group 0");
            (&message[..whole.start()], Some(c[1].to_string()))
        }
        None => (message, None),
    }
}

static ERROR_FROM_SERVER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Error from server(?: \((\w+)\))?: (.*)$").expect("static regex")
});

/// kubectl's `Error from server (Reason): message (verb resource)` line.
pub(crate) fn parse_error_from_server(line: &str) -> Option<(StatusBody, Option<String>)> {
    let c = ERROR_FROM_SERVER.captures(line.trim())?;
    let (message, description) = split_description(c.get(2)?.as_str());
    Some((
        status_from_message(c.get(1).map(|m| m.as_str()), message),
        description,
    ))
}

static USER_CANNOT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"is forbidden: User "([^"]+)" cannot "#).expect("static regex"));

/// The requesting user named by a 403 Forbidden Status (`User "bob" cannot list …`).
pub(crate) fn forbidden_user(status: &StatusBody) -> Option<String> {
    let forbidden = status.reason == "Forbidden" || status.code == Some(403);
    if !forbidden {
        return None;
    }
    USER_CANNOT
        .captures(&status.message)
        .map(|c| c[1].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_error_lines_become_statuses() {
        let (s, d) = parse_error_from_server(
            "Error from server (ServiceUnavailable): the server is currently unable to handle the request (get flunders.wardle.example.com)",
        )
        .unwrap();
        assert_eq!(s.code, Some(503));
        assert_eq!(s.reason, "ServiceUnavailable");
        assert_eq!(d.as_deref(), Some("get flunders.wardle.example.com"));
        let (s, _) = parse_error_from_server(
            r#"Error from server (InternalError): an error on the server ("Internal Server Error: \"/apis/x\": boom") has prevented the request from succeeding (get flunders.wardle.example.com)"#,
        )
        .unwrap();
        assert_eq!(
            s.causes[0].message,
            r#"Internal Server Error: "/apis/x": boom"#
        );
        assert_eq!(s.causes[0].reason, "UnexpectedServerResponse");
    }

    #[test]
    fn forbidden_names_the_user_only_for_403() {
        let s = status_from_message(
            Some("Forbidden"),
            r#"flunders.wardle.example.com is forbidden: User "bob" cannot list resource "flunders""#,
        );
        assert_eq!(forbidden_user(&s).as_deref(), Some("bob"));
        let s = status_from_message(
            Some("InternalError"),
            r#"x: subjectaccessreviews.authorization.k8s.io is forbidden: User "wardle-apiserver" cannot create"#,
        );
        assert_eq!(forbidden_user(&s), None);
    }
}
