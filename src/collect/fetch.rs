//! HTTP against the API server, with the deadlines and error classes collection needs.
//!
//! Every request goes through [`Fetcher`], which bounds it by `--request-timeout`, measures its latency,
//! keeps the headers that matter, parses `Status` bodies, and classifies failures so that a collector
//! can turn them into a gap with a reason (403 → forbidden, 404 → not served, deadline → timeout,
//! connection failure → unreachable). Lists are paginated with `limit`/`continue` and stop at
//! `--max-objects` (default [`DEFAULT_MAX_OBJECTS`]): a list cut there is recorded, and the
//! collection turns it into a `capped` gap ([`Fetcher::take_cuts`]). Long bodies (`/metrics`) are
//! streamed line by line and never held whole.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;

use crate::bundle::probes::ResponseHeaders;
use crate::bundle::yaml_limits::thousands;
use crate::bundle::{Gap, GapReason, StatusBody};

/// Page size for lists.
const PAGE: usize = 500;

/// How many objects one list may bring by default (`--max-objects`): far above any real
/// cluster's APIServices, webhooks or CRDs, and low enough that a server listing millions cannot
/// exhaust memory (each object costs a few kB, decoded).
pub const DEFAULT_MAX_OBJECTS: usize = 50_000;

/// Where a line per request goes, and whether it carries the headers that matter.
type RequestLog = (fn(&str), bool);

/// The request log of `-v 2` and up (`-v 3`: with headers). Set once by the command line; unset,
/// nothing is logged.
static REQUEST_LOG: std::sync::OnceLock<RequestLog> = std::sync::OnceLock::new();

/// Log every request the collection sends to the API server through `sink`: method, path, status
/// and latency, like `kubectl -v=6`; with `headers`, also the response headers a diagnosis reads
/// (APF flow schema and priority level, audit id, Retry-After). Only the first call counts.
pub fn log_requests(sink: fn(&str), headers: bool) {
    let _ = REQUEST_LOG.set((sink, headers));
}

fn log_request(method: &http::Method, path: &str, result: &Result<Response, FetchError>) {
    let Some((sink, with_headers)) = REQUEST_LOG.get() else {
        return;
    };
    let line = match result {
        Ok(r) => {
            let mut line = format!("{method} {path} {} in {:.0} ms", r.status, r.latency_ms);
            if *with_headers {
                let h = &r.headers;
                for (name, value) in [
                    ("flow-schema-uid", &h.flow_schema_uid),
                    ("priority-level-uid", &h.priority_level_uid),
                    ("audit-id", &h.audit_id),
                    ("retry-after", &h.retry_after),
                ] {
                    if let Some(v) = value {
                        line.push_str(&format!(" {name}={v}"));
                    }
                }
            }
            line
        }
        Err(e) => format!("{method} {path} failed: {e}"),
    };
    sink(&line);
}

/// A response of any status.
#[derive(Debug, Clone)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// Headers that matter.
    pub headers: ResponseHeaders,
    /// Body.
    pub body: Bytes,
    /// Time to the end of the body, ms.
    pub latency_ms: f64,
}

impl Response {
    /// The body as a `Status`, if it is one.
    pub fn status_body(&self) -> Option<StatusBody> {
        serde_json::from_slice::<Value>(&self.body)
            .ok()
            .and_then(|v| StatusBody::from_json(&v))
    }

    /// The body as text (lossy), for non-Status error bodies.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Why a request did not give what was asked.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FetchError {
    /// A response arrived with a non-success status.
    #[error("HTTP {code}: {message}")]
    Status {
        /// HTTP status.
        code: u16,
        /// The Status message or body text.
        message: String,
    },
    /// No response within the request timeout.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// The connection failed (refused, DNS, TLS to the API server, reset).
    #[error("{0}")]
    Transport(String),
    /// A response arrived but could not be decoded.
    #[error("undecodable response: {0}")]
    Decode(String),
}

/// What of a body an error message keeps: its text, trimmed, at most this many characters.
const BODY_IN_MESSAGE: usize = 300;

/// A body as the text of an error message (trimmed, at most [`BODY_IN_MESSAGE`] characters).
pub fn body_excerpt(body: &[u8]) -> String {
    String::from_utf8_lossy(body)
        .trim()
        .chars()
        .take(BODY_IN_MESSAGE)
        .collect()
}

impl FetchError {
    /// A non-success status whose message is the body's text.
    pub fn status_with_body(code: u16, body: &[u8]) -> FetchError {
        FetchError::Status {
            code,
            message: body_excerpt(body),
        }
    }

    /// The gap reason for this failure.
    pub fn gap_reason(&self) -> GapReason {
        match self {
            FetchError::Status { code: 401, .. } => GapReason::Unauthorized,
            FetchError::Status { code: 403, .. } => GapReason::Forbidden,
            FetchError::Status { code: 404, .. } => GapReason::NotServed,
            FetchError::Status { .. } | FetchError::Decode(_) => GapReason::Error,
            FetchError::Timeout(_) => GapReason::Timeout,
            FetchError::Transport(_) => GapReason::Unreachable,
        }
    }

    /// Whether this says the API server itself could not be reached.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, FetchError::Transport(_) | FetchError::Timeout(_))
    }
}

/// The request side of collection.
#[derive(Clone)]
pub struct Fetcher {
    client: kube::Client,
    request_timeout: Duration,
    max_objects: usize,
    /// The lists cut at `max_objects`, as gaps (shared by clones).
    cuts: Arc<Mutex<Vec<Gap>>>,
}

/// The gap of a list cut at `max`: its source is `objects/<resource>` (the collection's name for
/// that list), its detail says how many were read, of which kind, and why it stopped.
fn cut_gap(path: &str, kind: Option<&str>, listed: usize, max: usize) -> Gap {
    let resource = path
        .split('?')
        .next()
        .unwrap_or(path)
        .rsplit('/')
        .next()
        .unwrap_or(path);
    let what = match kind {
        Some(k) if k.ends_with('s') => k.to_string(),
        Some(k) if !k.is_empty() => format!("{k}s"),
        _ => resource.to_string(),
    };
    Gap::new(
        format!("objects/{resource}"),
        GapReason::Capped,
        format!(
            "listed {} {what} and stopped: --max-objects {} (the server has more; a larger --max-objects reads them)",
            thousands(listed),
            thousands(max)
        ),
    )
}

/// An error and its sources, each cause once.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = s.source();
    }
    parts.join(": ")
}

/// The headers of a response that matter to a diagnosis.
pub fn headers_of(h: &http::HeaderMap) -> ResponseHeaders {
    let get = |name: &str| {
        h.get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    ResponseHeaders {
        retry_after: get("retry-after"),
        flow_schema_uid: get("x-kubernetes-pf-flowschema-uid"),
        priority_level_uid: get("x-kubernetes-pf-prioritylevel-uid"),
        audit_id: get("audit-id"),
        content_type: get("content-type"),
        date: get("date"),
    }
}

impl Fetcher {
    /// A fetcher over a client, each request bounded by `request_timeout` (zero = 10 s).
    pub fn new(client: kube::Client, request_timeout: Duration) -> Self {
        let request_timeout = if request_timeout.is_zero() {
            Duration::from_secs(10)
        } else {
            request_timeout
        };
        Fetcher {
            client,
            request_timeout,
            max_objects: DEFAULT_MAX_OBJECTS,
            cuts: Arc::default(),
        }
    }

    /// The same fetcher, its lists stopping at `max` objects (at least one).
    #[must_use]
    pub fn with_max_objects(mut self, max: usize) -> Self {
        self.max_objects = max.max(1);
        self
    }

    /// The lists cut at `--max-objects` so far, as `capped` gaps (taken: a second call returns
    /// only later cuts).
    pub fn take_cuts(&self) -> Vec<Gap> {
        std::mem::take(
            &mut *self
                .cuts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The per-request deadline.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// Send one request and read the whole body; any status is a response.
    ///
    /// # Errors
    /// [`FetchError::Timeout`] or [`FetchError::Transport`] when no response arrived.
    pub async fn request(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Response, FetchError> {
        self.request_with_headers(method, path, body, &[]).await
    }

    /// [`Fetcher::request`] with extra request headers (e.g. `Impersonate-User`; a header given
    /// twice is sent twice, as `Impersonate-Group` may be).
    ///
    /// # Errors
    /// [`FetchError::Timeout`] or [`FetchError::Transport`] when no response arrived.
    pub async fn request_with_headers(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> Result<Response, FetchError> {
        let logged_method = method.clone();
        let mut builder = http::Request::builder().method(method).uri(path);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        if body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        let req = builder
            .header("accept", "application/json, */*")
            .body(kube::client::Body::from(body.unwrap_or_default()))
            .map_err(|e| FetchError::Transport(e.to_string()))?;
        let started = Instant::now();
        let fut = async {
            let res = self.client.send(req).await.map_err(|e| {
                // A certificate check that failed is said in kubectl's words.
                FetchError::Transport(
                    super::tls_words::tls_words(&e).unwrap_or_else(|| error_chain(&e)),
                )
            })?;
            let status = res.status().as_u16();
            let headers = headers_of(res.headers());
            let body = res
                .into_body()
                .collect()
                .await
                .map_err(|e| FetchError::Transport(error_chain(&e)))?
                .to_bytes();
            Ok(Response {
                status,
                headers,
                body,
                latency_ms: 0.0,
            })
        };
        let result = tokio::time::timeout(self.request_timeout, fut)
            .await
            .map_err(|_| FetchError::Timeout(self.request_timeout))
            .and_then(|r| r)
            .map(|mut res| {
                res.latency_ms = started.elapsed().as_secs_f64() * 1000.0;
                res
            });
        log_request(&logged_method, path, &result);
        result
    }

    /// GET a JSON document; non-2xx is an error.
    ///
    /// # Errors
    /// [`FetchError`] for transport failures, non-2xx statuses and undecodable bodies.
    pub async fn get_json(&self, path: &str) -> Result<Value, FetchError> {
        let res = self.request(http::Method::GET, path, None).await?;
        if !(200..300).contains(&res.status) {
            return Err(status_error(&res));
        }
        serde_json::from_slice(&res.body).map_err(|e| FetchError::Decode(e.to_string()))
    }

    /// List every item of a collection, following `continue` tokens, up to `--max-objects`: a
    /// list with more stops there (the last page asks only for what is still allowed) and is
    /// recorded as a cut ([`Fetcher::take_cuts`]).
    ///
    /// # Errors
    /// The first page's [`FetchError`].
    pub async fn list_all(&self, path: &str) -> Result<Vec<Value>, FetchError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let limit = PAGE.min(self.max_objects - items.len()).max(1);
            let url = match &token {
                Some(t) => format!("{path}{sep}limit={limit}&continue={}", urlencode(t)),
                None => format!("{path}{sep}limit={limit}"),
            };
            let mut page = self.get_json(&url).await?;
            let list_kind = page
                .get("kind")
                .and_then(Value::as_str)
                .map(|k| k.trim_end_matches("List").to_string());
            let api_version = page
                .get("apiVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
            if let Some(Value::Array(arr)) = page.get_mut("items").map(Value::take) {
                for mut item in arr {
                    // Items of a list carry no apiVersion/kind; restore them so typed decoding and
                    // version-aware mapping see what the list said.
                    if let Value::Object(obj) = &mut item {
                        if let (Some(k), false) = (&list_kind, obj.contains_key("kind")) {
                            obj.insert("kind".into(), Value::String(k.clone()));
                        }
                        if let (Some(a), false) = (&api_version, obj.contains_key("apiVersion")) {
                            obj.insert("apiVersion".into(), Value::String(a.clone()));
                        }
                    }
                    items.push(item);
                }
            }
            token = page
                .pointer("/metadata/continue")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            // A server that ignores `limit` may send more than asked: keep no more than allowed.
            let over = items.len() > self.max_objects;
            items.truncate(self.max_objects);
            if over || (token.is_some() && items.len() >= self.max_objects) {
                let gap = cut_gap(path, list_kind.as_deref(), items.len(), self.max_objects);
                self.cuts
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(gap);
                return Ok(items);
            }
            if token.is_none() {
                return Ok(items);
            }
        }
    }

    /// GET and feed the body to `on_line` one line at a time, without holding it whole.
    /// Non-2xx is an error (its body is read, bounded, for the message).
    ///
    /// # Errors
    /// [`FetchError`] for transport failures and non-2xx statuses; an error from `on_line` is
    /// returned as [`FetchError::Decode`].
    pub async fn get_lines<F>(&self, path: &str, mut on_line: F) -> Result<(), FetchError>
    where
        F: FnMut(&str) -> Result<(), String>,
    {
        let req = http::Request::get(path)
            .header("accept", "text/plain;version=0.0.4, */*")
            .body(kube::client::Body::from(Vec::new()))
            .map_err(|e| FetchError::Transport(e.to_string()))?;
        let fut = async {
            let res = self.client.send(req).await.map_err(|e| {
                // A certificate check that failed is said in kubectl's words.
                FetchError::Transport(
                    super::tls_words::tls_words(&e).unwrap_or_else(|| error_chain(&e)),
                )
            })?;
            let status = res.status().as_u16();
            let headers = headers_of(res.headers());
            let mut body = res.into_body();
            if !(200..300).contains(&status) {
                let bytes = body
                    .collect()
                    .await
                    .map(|c| c.to_bytes())
                    .unwrap_or_default();
                return Err(status_error(&Response {
                    status,
                    headers,
                    body: bytes,
                    latency_ms: 0.0,
                }));
            }
            let mut lines = LineSplitter::default();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| FetchError::Transport(error_chain(&e)))?;
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                lines.push(&data, &mut on_line)?;
            }
            lines.finish(&mut on_line).map(|()| status)
        };
        // A body of tens of megabytes may legitimately take longer than one round trip; it still
        // has a bound, four request timeouts.
        let started = Instant::now();
        let result = tokio::time::timeout(self.request_timeout * 4, fut)
            .await
            .map_err(|_| FetchError::Timeout(self.request_timeout * 4))
            .and_then(|r| r);
        if let Some((sink, _)) = REQUEST_LOG.get() {
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            sink(&match &result {
                Ok(status) => format!("GET {path} {status} in {ms:.0} ms (streamed)"),
                Err(e) => format!("GET {path} failed: {e}"),
            });
        }
        result.map(|_| ())
    }
}

/// Cuts a body arriving in chunks into lines, holding at most one partial line between chunks.
#[derive(Default)]
pub struct LineSplitter {
    pending: Vec<u8>,
}

impl LineSplitter {
    /// Feed one chunk; every complete line goes to `on_line`.
    ///
    /// # Errors
    /// [`FetchError::Decode`] for a line that is not UTF-8 or that `on_line` rejects.
    pub fn push<F>(&mut self, chunk: &[u8], on_line: &mut F) -> Result<(), FetchError>
    where
        F: FnMut(&str) -> Result<(), String>,
    {
        self.pending.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(pos) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let line = std::str::from_utf8(&self.pending[start..start + pos])
                .map_err(|_| FetchError::Decode("not UTF-8".into()))?;
            on_line(line).map_err(FetchError::Decode)?;
            start += pos + 1;
        }
        self.pending.drain(..start);
        Ok(())
    }

    /// The last line, when the body did not end with a newline.
    ///
    /// # Errors
    /// As [`LineSplitter::push`].
    pub fn finish<F>(self, on_line: &mut F) -> Result<(), FetchError>
    where
        F: FnMut(&str) -> Result<(), String>,
    {
        if self.pending.is_empty() {
            return Ok(());
        }
        let line = std::str::from_utf8(&self.pending)
            .map_err(|_| FetchError::Decode("not UTF-8".into()))?;
        on_line(line).map_err(FetchError::Decode)
    }
}

/// The error for a non-2xx response: the Status message when there is one, else the body text.
pub fn status_error(res: &Response) -> FetchError {
    let message = res
        .status_body()
        .map(|s| s.message)
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| body_excerpt(&res.body));
    FetchError::Status {
        code: res.status,
        message,
    }
}

/// Percent-encode a query value.
pub fn urlencode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
