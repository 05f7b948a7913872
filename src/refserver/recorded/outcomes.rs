//! The answers of a replayed recording to requests for a remote APIService's group/version: the
//! recorded outcome of the same request when there is one, else what kube-aggregator would answer
//! from the recorded state alone.
//!
//! Recorded outcomes, in order of preference: extpath's own probe of the exact path and query (the
//! discovery, list and delegation probes `bundle::carried::split` serves; a delegation probe only
//! to the user it was sent as), then — for aggregated paths only — what
//! a person's client recorded for the same method and path (with the same query first; curl's
//! record before a kubectl trace's before kubectl's own error line: closest to the wire). An outcome
//! is given back as it was seen: status, the headers that matter (`Retry-After`, the APF UIDs,
//! `Audit-Id`, `Content-Type`, `Date`), the Status object with its causes or the plain body, after
//! the recorded latency — except a Status kubectl made up itself from a plain body, which is given
//! back as that body ([`client_made_from`]). A recorded success kept no body; a discovery document is rebuilt listing
//! the resources extpath's recorded list probes named, so that a collection sends them again.
//!
//! Without a recorded outcome the aggregator's own logic applies to the recorded state
//! (`pkg/apiserver/handler_proxy.go`): an APIService that is not `Available` answers 503
//! `service unavailable`; one whose recorded served chain failed verification (and that does not
//! skip it) answers the 503 `error trying to reach service: tls: failed to verify certificate: …` a
//! proxied request gets; otherwise discovery answers an empty resource list (the availability
//! check it passed got a 2xx from that path) and anything else 404, naming what is missing.

use std::time::Duration;

use axum::body::Body;
use http::{HeaderValue, Response, StatusCode};
use serde_json::{Value, json};

use super::recording::Recorded;
use crate::bundle::carried::{conversion_read, discovery_path, timed_out};
use crate::bundle::probes::{ProbeKind, ResponseHeaders};
use crate::bundle::{ApiService, CertSource, Kind, Probe, StatusBody};
use crate::refserver::request::RequestInfo;
use crate::refserver::status::ApiError;

/// A recorded latency longer than this is not waited out in full: every client gives up sooner.
const MAX_DELAY: Duration = Duration::from_secs(30);

/// The remote APIService serving the request's group/version, if the recording has one.
pub fn remote<'r>(r: &'r Recorded, info: &RequestInfo) -> Option<&'r ApiService> {
    if info.prefix != "apis" || info.group.is_empty() || info.version.is_empty() {
        return None;
    }
    r.bundle
        .api_services
        .iter()
        .find(|a| !a.is_local() && a.group == info.group && a.version == info.version)
}

/// A Kubernetes `Status` object with the recorded fields (empty ones left out, as the API does).
pub fn status_json(s: &StatusBody) -> Value {
    let mut m = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}});
    for (k, v) in [
        ("status", &s.status),
        ("message", &s.message),
        ("reason", &s.reason),
    ] {
        if !v.is_empty() {
            m[k] = json!(v);
        }
    }
    let mut details = serde_json::Map::new();
    for (k, v) in [("name", &s.name), ("group", &s.group), ("kind", &s.kind)] {
        if !v.is_empty() {
            details.insert(k.into(), json!(v));
        }
    }
    if !s.causes.is_empty() {
        let causes: Vec<Value> = s
            .causes
            .iter()
            .map(|c| {
                let mut o = serde_json::Map::new();
                for (k, v) in [
                    ("reason", &c.reason),
                    ("message", &c.message),
                    ("field", &c.field),
                ] {
                    if !v.is_empty() {
                        o.insert(k.into(), json!(v));
                    }
                }
                Value::Object(o)
            })
            .collect();
        details.insert("causes".into(), Value::Array(causes));
    }
    if !details.is_empty() {
        m["details"] = Value::Object(details);
    }
    if let Some(code) = s.code {
        m["code"] = json!(code);
    }
    m
}

fn put_headers(resp: &mut Response<Body>, h: &ResponseHeaders) {
    let pairs = [
        ("retry-after", &h.retry_after),
        ("x-kubernetes-pf-flowschema-uid", &h.flow_schema_uid),
        ("x-kubernetes-pf-prioritylevel-uid", &h.priority_level_uid),
        ("audit-id", &h.audit_id),
        ("content-type", &h.content_type),
        ("date", &h.date),
    ];
    for (name, value) in pairs {
        if let Some(v) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
            resp.headers_mut().insert(name, v);
        }
    }
}

/// The discovery document of a remote APIService: the resources extpath's served list probes of it
/// named (a collection lists the first one again), nothing else being known.
pub fn resource_list(r: &Recorded, a: &ApiService) -> Value {
    let base = format!("{}/", discovery_path(&a.group, &a.version));
    let resources: Vec<Value> = r
        .split
        .probes
        .iter()
        .map(|&i| &r.bundle.probes[i])
        .filter(|p| p.target.as_ref().is_some_and(|t| t.name == a.name))
        // The collector's list probe of a resource is `GET <gv>/<resource>?limit=1`: its path
        // is the only record of which resources the group served.
        .filter_map(|p| p.path.as_deref()?.strip_prefix(&base)?.strip_suffix("?limit=1"))
        .map(|name| {
            json!({"name": name, "singularName": "", "namespaced": true, "kind": "", "verbs": ["get", "list"]})
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{}/{}", a.group, a.version),
        "resources": resources,
    })
}

/// The body a client's own Status was made from, when it made one: client-go turns a response that
/// is not a Status into `the server is currently unable to handle the request` (and the like), the
/// body kept as its one `UnexpectedServerResponse` cause (apimachinery `NewGenericServerResponse`).
/// That body is what was on the wire, and what a client of the replay must get to make the same
/// Status again.
pub fn client_made_from(p: &Probe) -> Option<&str> {
    let s = p.status_body.as_ref()?;
    match s.causes.as_slice() {
        [c] if p.origin.kind == ProbeKind::ClientOutput
            && c.reason == "UnexpectedServerResponse" =>
        {
            Some(c.message.as_str())
        }
        _ => None,
    }
}

/// The response of a recorded outcome.
async fn give_back(r: &Recorded, p: &Probe, info: &RequestInfo) -> Response<Body> {
    // No answer within the collector's own request timeout: none now either, for as long as any
    // client waits.
    if p.status.is_none() && p.error.as_deref().is_some_and(timed_out) {
        tokio::time::sleep(MAX_DELAY).await;
        return ApiError::plain(504, "the recorded request got no answer").into_response();
    }
    if let Some(ms) = p.latency_ms.filter(|ms| ms.is_finite() && *ms > 0.0) {
        tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0).min(MAX_DELAY)).await;
    }
    // An outcome without a status is a transport failure the client saw (no response at all);
    // 500 is the nearest an HTTP server can answer.
    let code = p.status.unwrap_or(500);
    let wire = client_made_from(p);
    let body = if let Some(b) = wire {
        b.to_string()
    } else if let Some(s) = &p.status_body {
        status_json(s).to_string()
    } else if let Some(b) = &p.body {
        b.clone()
    } else if (200..300).contains(&code) {
        // A recorded success kept no body: the discovery document is rebuilt, a converting
        // CRD's list names the object the recorded reads went on to, any other success is an
        // empty list, so a client parses what it expects.
        match remote(r, info) {
            Some(a) if info.path.trim_end_matches('/') == discovery_path(&a.group, &a.version) => {
                resource_list(r, a).to_string()
            }
            _ => conversion_list(r, p, info)
                .unwrap_or_else(
                    || json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": []}),
                )
                .to_string(),
        }
    } else {
        String::new()
    };
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if wire.is_some() {
        // What Go's http.Error writes a plain-text error with.
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
    }
    put_headers(&mut resp, &p.headers);
    resp
}

/// The list of a converting CRD's resource that extpath's conversion reads began with: one item,
/// the object the recording's next reads of the same CRD fetched (`…/namespaces/NS/PLURAL/NAME`
/// or `…/PLURAL/NAME`), or none when they fetched nothing. `None` when `p` is no such list.
fn conversion_list(r: &Recorded, p: &Probe, info: &RequestInfo) -> Option<Value> {
    let target = p.target.as_ref()?;
    if !conversion_read(&r.bundle, p) || !info.path.ends_with(&format!("/{}", info.resource)) {
        return None;
    }
    let crd = r.bundle.crds.iter().find(|c| c.name == target.name)?;
    let api_version = format!("{}/{}", info.group, info.version);
    let object = r
        .split
        .probes
        .iter()
        .map(|&i| &r.bundle.probes[i])
        .filter(|q| q.target.as_ref() == Some(target))
        .filter_map(|q| q.path.as_deref())
        .find_map(|path| {
            let rest = path.strip_prefix(&format!("/apis/{}/", crd.group))?;
            let (_, rest) = rest.split_once('/')?;
            let (namespace, rest) = match rest.strip_prefix("namespaces/") {
                Some(r) => r.split_once('/')?,
                None => ("", rest),
            };
            let name = rest.strip_prefix(&format!("{}/", crd.plural))?;
            (!name.is_empty() && !name.contains(['/', '?'])).then(|| {
                let mut meta = json!({"name": name});
                if !namespace.is_empty() {
                    meta["namespace"] = json!(namespace);
                }
                json!({"apiVersion": api_version, "kind": crd.kind, "metadata": meta})
            })
        });
    Some(json!({
        "kind": format!("{}List", crd.kind),
        "apiVersion": api_version,
        "metadata": {},
        "items": object.into_iter().collect::<Vec<_>>(),
    }))
}

/// The recorded x509 failure of the served chain of `a`, if its verification failed.
fn failed_verification<'r>(r: &'r Recorded, a: &ApiService) -> Option<&'r str> {
    r.bundle.certificates.iter().find_map(|c| {
        let owner = c.origin.owner.as_ref()?;
        let v = c.verification.as_ref()?;
        (c.origin.source == CertSource::ServedChain
            && c.origin.chain_index == 0
            && owner.kind == Kind::ApiService
            && owner.name == a.name
            && !v.ok)
            .then(|| {
                v.error
                    .as_deref()
                    .unwrap_or("x509: certificate verification failed")
            })
    })
}

/// What kube-aggregator answers for `a` from the recorded state alone.
fn reconstruct(r: &Recorded, a: &ApiService, info: &RequestInfo) -> Response<Body> {
    // The order of `handler_proxy.go`: an APIService that is not Available is refused before any
    // dial (REFERENCE.md §2.2), so a recorded TLS failure only shows on an Available one.
    let available = a.available().is_some_and(|c| c.status == "True");
    if !available {
        return ApiError::plain(503, "service unavailable").into_response();
    }
    // The proxy verifies the serving chain against `caBundle` unless the APIService skips it;
    // the availability probe does not (it dials insecure), which is how an Available APIService
    // can still fail every proxied request on TLS.
    if !a.insecure_skip_tls_verify
        && let Some(error) = failed_verification(r, a)
    {
        return ApiError::plain(
            503,
            format!("error trying to reach service: tls: failed to verify certificate: {error}"),
        )
        .into_response();
    }
    if info.method == "GET"
        && info.path.trim_end_matches('/') == discovery_path(&a.group, &a.version)
    {
        return crate::refserver::status::json_response(200, &resource_list(r, a));
    }
    ApiError::Status {
        code: 404,
        reason: "NotFound",
        message: format!(
            "the recording holds no outcome of {} {}",
            info.method, info.path
        ),
        details: None,
    }
    .into_response()
}

fn same_method(p: &Probe, method: &str) -> bool {
    p.method
        .as_deref()
        .unwrap_or("GET")
        .eq_ignore_ascii_case(method)
}

fn without_query(path: &str) -> &str {
    path.split_once('?').map_or(path, |(p, _)| p)
}

/// The replay's answer to a request with a recorded outcome or under a remote APIService; `None`
/// for any other request.
pub async fn answer(
    r: &Recorded,
    info: &RequestInfo,
    path_and_query: &str,
    user: &str,
) -> Option<Response<Body>> {
    let served = r.split.probes.iter().map(|&i| &r.bundle.probes[i]);
    let same_request =
        |p: &&Probe| same_method(p, &info.method) && p.path.as_deref() == Some(path_and_query);
    // A probe sent as a user of its own (the delegation probe) is that user's outcome; the
    // scanner's own probes (no user recorded) answer everyone else.
    if let Some(p) = served
        .clone()
        .filter(same_request)
        .find(|p| p.user.as_deref() == Some(user))
        .or_else(|| {
            served
                .clone()
                .filter(same_request)
                .find(|p| p.user.is_none())
        })
    {
        return Some(give_back(r, p, info).await);
    }
    let a = remote(r, info)?;
    let client_outputs = || {
        r.bundle.probes.iter().filter(|p| {
            p.origin.kind == ProbeKind::ClientOutput
                && p.status.is_some()
                && same_method(p, &info.method)
        })
    };
    let recorded = client_outputs()
        .filter(|p| p.path.as_deref() == Some(path_and_query))
        .min_by_key(|p| p.origin.tool.wire_rank())
        .or_else(|| {
            client_outputs()
                .filter(|p| p.path.as_deref().map(without_query) == Some(info.path.as_str()))
                .min_by_key(|p| p.origin.tool.wire_rank())
        });
    Some(match recorded {
        Some(p) => give_back(r, p, info).await,
        None => reconstruct(r, a, info),
    })
}
