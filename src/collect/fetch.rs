//! HTTP against the API server, with the deadlines and error classes collection needs.
//!
//! Every request goes through [`Fetcher`], which bounds it by `--request-timeout`, measures its latency,
//! keeps the headers that matter, parses `Status` bodies, and classifies failures so that a collector
//! can turn them into a gap with a reason (403 → forbidden, 404 → not served, deadline → timeout,
//! connection failure → unreachable). Lists are paginated with `limit`/`continue` and stop at
//! `--max-objects` (default [`DEFAULT_MAX_OBJECTS`]): a list cut there is recorded, and the
//! collection turns it into a `capped` gap ([`Fetcher::take_cuts`]). Long bodies (`/metrics`) are
//! streamed line by line and never held whole.
//!
//! A server may send anything, so every deadline covers the whole body, not just the headers, and
//! every body is bounded: a JSON answer by [`MAX_RESPONSE_BYTES`] (and all answers being read at
//! once by [`MAX_HELD_BYTES`]), a streamed one by its
//! [`LineLimits`] (the longest line and the most bytes). Body loops yield to the scheduler after
//! every frame (`consume_budget`): a body that is always ready — a fast, endless one — would
//! otherwise never let a deadline fire. When the headers arrived and the body did not, the error
//! says so ([`FetchError::Body`]: stalled, still arriving, cut mid-body), because such a server is
//! not one that "could not be reached".

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::Value;

use crate::bundle::probes::ResponseHeaders;
use crate::bundle::yaml_limits::thousands;
use crate::bundle::{Gap, GapReason, StatusBody};

/// Page size for lists.
// kubectl's own `--chunk-size` default: pages a real API server is used to serving, and small
// enough that one page never nears [`MAX_RESPONSE_BYTES`].
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

    /// What the server said: a `Status` body's message, else an excerpt of the body.
    pub fn message(&self) -> String {
        self.status_body()
            .map(|s| s.message)
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| body_excerpt(&self.body))
    }

    /// The body as text (lossy), for non-Status error bodies.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Answers as a server gives them, for the unit tests of collectors that classify a response.
#[cfg(test)]
pub(crate) mod answers {
    use super::{Bytes, FetchError, Response, ResponseHeaders};

    /// A response of `status` with `body`, 3 ms late.
    pub(crate) fn answer(status: u16, body: &str) -> Result<Response, FetchError> {
        Ok(Response {
            status,
            headers: ResponseHeaders::default(),
            body: Bytes::from(body.to_string()),
            latency_ms: 3.0,
        })
    }

    /// A `Forbidden` Status body of `code` with `message`.
    pub(crate) fn forbidden(code: u16, message: &str) -> String {
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": message, "reason": "Forbidden", "code": code})
        .to_string()
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
    /// The headers arrived, the whole body did not: it stalled, was still arriving at the
    /// deadline, was cut mid-body, or passed its size limit.
    #[error("HTTP {status}, then {what}")]
    Body {
        /// HTTP status of the headers that did arrive.
        status: u16,
        /// What happened to the body, in words.
        what: String,
        /// Whether a deadline ended it (the gap reason is then a timeout).
        timed_out: bool,
    },
    /// A streamed body was cut at one of its [`LineLimits`] (or a caller's limit): what was read
    /// before the cut is sound, and the caller may keep it.
    #[error("{0}")]
    Cut(String),
}

/// The most bytes one non-streamed answer (a page of a list, a discovery document, a health
/// report) may bring. A page of 500 objects is a few megabytes on real clusters; past this the
/// server is not sending what was asked.
pub const MAX_RESPONSE_BYTES: u64 = 128 << 20;

/// The most memory all non-streamed answers being read at once may hold, together. A scan reads
/// a dozen answers at a time; with only the per-answer cap, a server whose every body never ends
/// would cost a dozen times [`MAX_RESPONSE_BYTES`] (and a growing buffer briefly holds twice what
/// it received). Real answers are megabytes: this budget only ever stops such a server.
pub const MAX_HELD_BYTES: u64 = 192 << 20;

/// Buffer capacity held right now by every [`read_body`] in the process.
static HELD_BYTES: AtomicU64 = AtomicU64::new(0);

/// One reader's share of [`HELD_BYTES`], given back when the reader ends.
#[derive(Default)]
struct HeldShare(u64);

impl HeldShare {
    /// Account `n` more bytes of buffer; whether the process is still within [`MAX_HELD_BYTES`].
    fn grow(&mut self, n: u64) -> bool {
        self.0 += n;
        HELD_BYTES.fetch_add(n, Ordering::Relaxed) + n <= MAX_HELD_BYTES
    }
}

impl Drop for HeldShare {
    fn drop(&mut self) {
        HELD_BYTES.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// A byte count in words: `812 bytes`, `1.2 MB`, `5.0 GB` (decimal units, as `curl` prints).
pub fn size_words(n: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let f = n as f64;
    match n {
        0..1_000 => format!("{n} bytes"),
        1_000..1_000_000 => format!("{:.1} kB", f / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", f / 1e6),
        _ => format!("{:.1} GB", f / 1e9),
    }
}

/// How far a response got, shared between the future reading it and the code that reports its
/// deadline (which drops that future, so it cannot ask it).
pub struct BodyProgress {
    started: Instant,
    /// HTTP status once the headers arrived; 0 before.
    status: AtomicU16,
    received: AtomicU64,
    /// When the last byte arrived, ms after `started`.
    last_byte_ms: AtomicU64,
}

impl Default for BodyProgress {
    fn default() -> Self {
        BodyProgress {
            started: Instant::now(),
            status: AtomicU16::new(0),
            received: AtomicU64::new(0),
            last_byte_ms: AtomicU64::new(0),
        }
    }
}

impl BodyProgress {
    /// The headers arrived with `status`.
    pub fn headers(&self, status: u16) {
        self.status.store(status, Ordering::Relaxed);
        self.touch();
    }

    fn touch(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_byte_ms.store(ms, Ordering::Relaxed);
    }

    /// `n` more bytes of the body arrived; the total so far.
    pub fn got(&self, n: usize) -> u64 {
        self.touch();
        self.received.fetch_add(n as u64, Ordering::Relaxed) + n as u64
    }

    /// Bytes of the body received so far.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    fn body_error(&self, what: String, timed_out: bool) -> FetchError {
        FetchError::Body {
            status: self.status.load(Ordering::Relaxed),
            what,
            timed_out,
        }
    }

    /// The error for `timeout` having passed: no response at all, or a body that stalled or
    /// was still arriving.
    pub fn timed_out(&self, timeout: Duration) -> FetchError {
        if self.status.load(Ordering::Relaxed) == 0 {
            return FetchError::Timeout(timeout);
        }
        let received = self.received();
        let elapsed = self.started.elapsed();
        let idle = elapsed.saturating_sub(Duration::from_millis(
            self.last_byte_ms.load(Ordering::Relaxed),
        ));
        // Quiet for a quarter of the deadline (at most a second) is a stall, not a slow link.
        let what = if received == 0 {
            format!("no byte of the body arrived within {timeout:?}")
        } else if idle >= (timeout / 4).min(Duration::from_secs(1)) {
            format!(
                "the body stalled after {} (nothing more for {:.1}s; deadline {timeout:?})",
                size_words(received),
                idle.as_secs_f64()
            )
        } else {
            format!(
                "the body was still arriving when the {timeout:?} deadline passed ({} received)",
                size_words(received)
            )
        };
        self.body_error(what, true)
    }

    /// The error for a body that ended in a transport error (the connection closed or reset).
    pub fn cut(&self, e: &(dyn std::error::Error + 'static)) -> FetchError {
        self.body_error(
            format!(
                "the connection closed mid-body after {} ({})",
                size_words(self.received()),
                error_chain(e)
            ),
            false,
        )
    }

    /// The error for a body dropped because the answers being read at once held too much.
    pub fn over_budget(&self) -> FetchError {
        self.body_error(
            format!(
                "the body was dropped after {}: the answers being read at once passed their {} budget",
                size_words(self.received()),
                size_words(MAX_HELD_BYTES)
            ),
            false,
        )
    }

    /// The error for a body past `limit` bytes.
    pub fn too_large(&self, limit: u64) -> FetchError {
        self.body_error(
            format!(
                "the body passed the {} limit on one answer and was dropped",
                size_words(limit)
            ),
            false,
        )
    }
}

/// Read a whole body of at most `limit` bytes, reporting to `progress`, yielding after every
/// frame so the caller's deadline can fire however fast the frames come.
///
/// # Errors
/// [`FetchError::Body`] when the connection fails mid-body or the body passes `limit`.
pub async fn read_body<B>(
    mut body: B,
    limit: u64,
    progress: &BodyProgress,
) -> Result<Bytes, FetchError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + 'static,
{
    let mut buf = BodyBuffer::default();
    while let Some(frame) = body.frame().await {
        tokio::task::consume_budget().await;
        let frame = frame.map_err(|e| progress.cut(&e))?;
        if let Ok(data) = frame.into_data() {
            buf.push(&data, limit, progress)?;
        }
    }
    Ok(buf.freeze())
}

/// A whole body being gathered: bounded by a per-answer limit and by its share of
/// [`MAX_HELD_BYTES`], which it gives back when gathered or dropped. Every client that holds a
/// body whole (the API server's, etcd's and Prometheus's) gathers it here.
#[derive(Default)]
pub struct BodyBuffer {
    buf: bytes::BytesMut,
    share: HeldShare,
}

impl BodyBuffer {
    /// Add a chunk, reporting it to `progress`.
    ///
    /// # Errors
    /// [`FetchError::Body`] when the body passes `limit` or the process's budget.
    pub fn push(
        &mut self,
        chunk: &[u8],
        limit: u64,
        progress: &BodyProgress,
    ) -> Result<(), FetchError> {
        if progress.got(chunk.len()) > limit {
            return Err(progress.too_large(limit));
        }
        let before = self.buf.capacity();
        self.buf.extend_from_slice(chunk);
        if !self.share.grow((self.buf.capacity() - before) as u64) {
            return Err(progress.over_budget());
        }
        Ok(())
    }

    /// The body gathered.
    pub fn freeze(self) -> Bytes {
        let BodyBuffer { buf, share } = self;
        drop(share);
        buf.freeze()
    }
}

/// One page of a list, its items left undecoded.
#[derive(serde::Deserialize)]
struct Page<'a> {
    kind: Option<String>,
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    #[serde(default)]
    metadata: PageMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a serde_json::value::RawValue>>,
}

#[derive(serde::Deserialize, Default)]
struct PageMeta {
    #[serde(rename = "continue")]
    continue_token: Option<String>,
}

/// Bounds on a body read line by line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineLimits {
    /// The longest line kept whole (the parser's own line limit).
    pub max_line: usize,
    /// The most bytes read before the body is cut.
    pub max_bytes: u64,
    /// The flag that sets `max_bytes`, for the message of a cut.
    pub bytes_flag: &'static str,
}

/// What of a body an error message keeps: its text, trimmed, at most this many characters.
const BODY_IN_MESSAGE: usize = 300;

/// A body as the text of an error message (trimmed, at most `BODY_IN_MESSAGE` (300) characters).
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
            // A 404 on a list or a discovery path means the server does not serve that API at all
            // (a group not installed, or none of the versions extpath knows): nothing to read, not
            // an error.
            FetchError::Status { code: 404, .. } => GapReason::NotServed,
            FetchError::Status { .. } | FetchError::Decode(_) | FetchError::Cut(_) => {
                GapReason::Error
            }
            FetchError::Body { timed_out, .. } => {
                if *timed_out {
                    GapReason::Timeout
                } else {
                    GapReason::Error
                }
            }
            // A timeout is kept apart from unreachable: a server that accepted the connection but
            // did not answer in time is slow or overloaded (an APF queue, a stalled etcd), which is
            // itself evidence.
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

    /// [`Fetcher::request_with_headers`] that also ends at `deadline`, a collection stage's
    /// budget: a request still running then is a timeout, reported as this fetcher's request
    /// timeout as if it had run out.
    ///
    /// # Errors
    /// [`FetchError::Timeout`] or [`FetchError::Transport`] when no response arrived.
    pub async fn request_until(
        &self,
        deadline: tokio::time::Instant,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> Result<Response, FetchError> {
        match tokio::time::timeout_at(
            deadline,
            self.request_with_headers(method, path, body, headers),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(FetchError::Timeout(self.request_timeout)),
        }
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
        let progress = BodyProgress::default();
        let fut = async {
            let res = self.client.send(req).await.map_err(|e| {
                // A certificate check that failed is said in kubectl's words.
                FetchError::Transport(
                    super::tls_words::tls_words(&e).unwrap_or_else(|| error_chain(&e)),
                )
            })?;
            let status = res.status().as_u16();
            progress.headers(status);
            let headers = headers_of(res.headers());
            let body = read_body(res.into_body(), MAX_RESPONSE_BYTES, &progress).await?;
            Ok(Response {
                status,
                headers,
                body,
                latency_ms: 0.0,
            })
        };
        let result = tokio::time::timeout(self.request_timeout, fut)
            .await
            .map_err(|_| progress.timed_out(self.request_timeout))
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
            let res = self.request(http::Method::GET, &url, None).await?;
            if !(200..300).contains(&res.status) {
                return Err(status_error(&res));
            }
            // Items are decoded one by one, yielding now and then, so that a page of hundreds of
            // thousands of items (a server ignoring `limit`) cannot hold the scan past its
            // deadline in one long decode; past `--max-objects` they are not decoded at all.
            let page: Page<'_> =
                serde_json::from_slice(&res.body).map_err(|e| FetchError::Decode(e.to_string()))?;
            let list_kind = page
                .kind
                .as_deref()
                .map(|k| k.trim_end_matches("List").to_string());
            let mut over = false;
            for (i, raw) in page.items.unwrap_or_default().into_iter().enumerate() {
                if items.len() >= self.max_objects {
                    // A server that ignores `limit` sent more than asked: keep no more than allowed.
                    over = true;
                    break;
                }
                if i % 64 == 63 {
                    tokio::task::consume_budget().await;
                }
                let mut item: Value = serde_json::from_str(raw.get())
                    .map_err(|e| FetchError::Decode(format!("item {i}: {e}")))?;
                // Items of a list carry no apiVersion/kind; restore them so typed decoding and
                // version-aware mapping see what the list said.
                if let Value::Object(obj) = &mut item {
                    if let (Some(k), false) = (&list_kind, obj.contains_key("kind")) {
                        obj.insert("kind".into(), Value::String(k.clone()));
                    }
                    if let (Some(a), false) = (&page.api_version, obj.contains_key("apiVersion")) {
                        obj.insert("apiVersion".into(), Value::String(a.clone()));
                    }
                }
                items.push(item);
            }
            token = page.metadata.continue_token.filter(|s| !s.is_empty());
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
    /// GET and feed the body to `on_line` one line at a time, without holding it whole, within
    /// `limits`. Non-2xx is an error (its body is read, bounded, for the message).
    ///
    /// # Errors
    /// [`FetchError`] for transport failures and non-2xx statuses; [`FetchError::Cut`] at a limit;
    /// an error from `on_line` is returned as it is.
    pub async fn get_lines<F>(
        &self,
        path: &str,
        limits: LineLimits,
        mut on_line: F,
    ) -> Result<(), FetchError>
    where
        F: FnMut(&str) -> Result<(), FetchError>,
    {
        let req = http::Request::get(path)
            .header("accept", "text/plain;version=0.0.4, */*")
            .body(kube::client::Body::from(Vec::new()))
            .map_err(|e| FetchError::Transport(e.to_string()))?;
        let progress = BodyProgress::default();
        let fut = async {
            let res = self.client.send(req).await.map_err(|e| {
                // A certificate check that failed is said in kubectl's words.
                FetchError::Transport(
                    super::tls_words::tls_words(&e).unwrap_or_else(|| error_chain(&e)),
                )
            })?;
            let status = res.status().as_u16();
            progress.headers(status);
            let headers = headers_of(res.headers());
            let mut body = res.into_body();
            if !(200..300).contains(&status) {
                let bytes = read_body(body, MAX_RESPONSE_BYTES, &progress)
                    .await
                    .unwrap_or_default();
                return Err(status_error(&Response {
                    status,
                    headers,
                    body: bytes,
                    latency_ms: 0.0,
                }));
            }
            let mut lines = LineSplitter::with_max_line(limits.max_line);
            while let Some(frame) = body.frame().await {
                tokio::task::consume_budget().await;
                let frame = frame.map_err(|e| progress.cut(&e))?;
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if progress.got(data.len()) > limits.max_bytes {
                    return Err(bytes_cut(limits));
                }
                lines.push(&data, &mut on_line)?;
            }
            lines.finish(&mut on_line).map(|()| status)
        };
        // A body of tens of megabytes may legitimately take longer than one round trip; it still
        // has a bound, four request timeouts.
        let started = Instant::now();
        let result = tokio::time::timeout(self.request_timeout * 4, fut)
            .await
            .map_err(|_| progress.timed_out(self.request_timeout * 4))
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

/// The cut of a streamed body at `limits.max_bytes`.
pub fn bytes_cut(limits: LineLimits) -> FetchError {
    FetchError::Cut(format!(
        "the body passed {} ({}) and was cut there",
        size_words(limits.max_bytes),
        limits.bytes_flag
    ))
}

/// Cuts a body arriving in chunks into lines, holding at most one partial line between chunks,
/// and that line at most `max_line` bytes long. Each byte is looked at once: a chunk is searched
/// for newlines, never the pending line again.
pub struct LineSplitter {
    pending: Vec<u8>,
    max_line: usize,
    lines: usize,
}

impl Default for LineSplitter {
    /// Lines up to 16 MiB (a watch event carries a whole object).
    fn default() -> Self {
        LineSplitter::with_max_line(16 << 20)
    }
}

impl LineSplitter {
    /// A splitter refusing lines longer than `max_line` bytes.
    pub fn with_max_line(max_line: usize) -> Self {
        LineSplitter {
            pending: Vec::new(),
            max_line,
            lines: 0,
        }
    }

    fn too_long(&self) -> FetchError {
        FetchError::Cut(format!(
            "line {} is longer than {} (the longest line read), so the body was cut there",
            self.lines + 1,
            size_words(self.max_line as u64)
        ))
    }

    fn deliver<F>(&mut self, line: &[u8], on_line: &mut F) -> Result<(), FetchError>
    where
        F: FnMut(&str) -> Result<(), FetchError>,
    {
        self.lines += 1;
        let line = std::str::from_utf8(line).map_err(|_| FetchError::Decode("not UTF-8".into()))?;
        on_line(line)
    }

    /// Feed one chunk; every complete line goes to `on_line`.
    ///
    /// # Errors
    /// [`FetchError::Cut`] for a line longer than the limit, [`FetchError::Decode`] for a line
    /// that is not UTF-8, and whatever `on_line` returns.
    pub fn push<F>(&mut self, chunk: &[u8], on_line: &mut F) -> Result<(), FetchError>
    where
        F: FnMut(&str) -> Result<(), FetchError>,
    {
        let mut rest = chunk;
        while let Some(nl) = memchr::memchr(b'\n', rest) {
            if self.pending.len() + nl > self.max_line {
                return Err(self.too_long());
            }
            if self.pending.is_empty() {
                self.deliver(&rest[..nl], on_line)?;
            } else {
                let mut line = std::mem::take(&mut self.pending);
                line.extend_from_slice(&rest[..nl]);
                let r = self.deliver(&line, on_line);
                line.clear();
                self.pending = line;
                r?;
            }
            rest = &rest[nl + 1..];
        }
        if self.pending.len() + rest.len() > self.max_line {
            return Err(self.too_long());
        }
        self.pending.extend_from_slice(rest);
        Ok(())
    }

    /// The last line, when the body did not end with a newline.
    ///
    /// # Errors
    /// As [`LineSplitter::push`].
    pub fn finish<F>(mut self, on_line: &mut F) -> Result<(), FetchError>
    where
        F: FnMut(&str) -> Result<(), FetchError>,
    {
        if self.pending.is_empty() {
            return Ok(());
        }
        let line = std::mem::take(&mut self.pending);
        self.deliver(&line, on_line)
    }
}

/// The error for a non-2xx response: the Status message when there is one, else the body text.
pub fn status_error(res: &Response) -> FetchError {
    let message = res.message();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_at_once_share_one_budget_given_back_when_each_ends() {
        let mut small = HeldShare(0);
        assert!(small.grow(1 << 20), "a megabyte is within the budget");
        let mut huge = HeldShare(0);
        assert!(
            !huge.grow(MAX_HELD_BYTES),
            "with another answer held, a whole budget more is past it"
        );
        drop(huge);
        drop(small);
        let mut again = HeldShare(0);
        assert!(
            again.grow(MAX_HELD_BYTES / 2),
            "ended readers gave their share back"
        );
    }

    fn split(chunks: &[&[u8]], max_line: usize) -> (Vec<String>, Result<(), FetchError>) {
        let mut lines = Vec::new();
        let mut s = LineSplitter::with_max_line(max_line);
        let mut sink = |l: &str| -> Result<(), FetchError> {
            lines.push(l.to_string());
            Ok(())
        };
        for c in chunks {
            if let Err(e) = s.push(c, &mut sink) {
                return (lines, Err(e));
            }
        }
        let r = s.finish(&mut sink);
        (lines, r)
    }

    #[test]
    fn lines_span_chunks_and_the_last_needs_no_newline() {
        let (lines, r) = split(&[b"a 1\nb ", b"2", b"\n\nc 3"], 16);
        r.unwrap();
        assert_eq!(lines, ["a 1", "b 2", "", "c 3"]);
    }

    #[test]
    fn a_line_past_the_limit_is_a_cut_whether_or_not_it_ends() {
        // Without a newline: held no further than the limit.
        let (lines, r) = split(&[b"ok\n", b"xxxxxx", b"xxxxxx"], 8);
        assert_eq!(lines, ["ok"]);
        let e = r.unwrap_err();
        assert!(
            matches!(&e, FetchError::Cut(m) if m.starts_with("line 2 is longer than 8 bytes")),
            "{e}"
        );
        // With one, across chunks.
        let (_, r) = split(&[b"xxxxx", b"xxxxx\n"], 8);
        assert!(matches!(r, Err(FetchError::Cut(_))));
        // Exactly the limit is fine.
        let (lines, r) = split(&[b"xxxx", b"xxxx\n"], 8);
        r.unwrap();
        assert_eq!(lines, ["xxxxxxxx"]);
    }

    #[test]
    fn a_newline_free_body_costs_linear_time() {
        // 4 MiB in 4 KiB chunks under a 16 MiB limit: rescanning the pending line on every chunk
        // would look at ~2 GB; looking at each byte once, 4 MiB.
        let chunk = vec![b'x'; 4096];
        let mut s = LineSplitter::with_max_line(16 << 20);
        let mut sink = |_: &str| -> Result<(), FetchError> { Ok(()) };
        let started = Instant::now();
        for _ in 0..1024 {
            s.push(&chunk, &mut sink).unwrap();
        }
        assert_eq!(s.pending.len(), 4 << 20);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn sizes_are_said_in_words() {
        assert_eq!(size_words(812), "812 bytes");
        assert_eq!(size_words(1_234_567), "1.2 MB");
        assert_eq!(size_words(5_000_000_000), "5.0 GB");
    }

    #[test]
    fn a_deadline_after_the_headers_says_what_the_body_did() {
        let p = BodyProgress::default();
        assert!(matches!(
            p.timed_out(Duration::from_secs(2)),
            FetchError::Timeout(_)
        ));
        p.headers(200);
        let e = p.timed_out(Duration::from_secs(2)).to_string();
        assert!(
            e.starts_with("HTTP 200, then no byte of the body arrived"),
            "{e}"
        );
        p.got(1_200_000);
        let e = p.timed_out(Duration::from_secs(2));
        assert_eq!(e.gap_reason(), GapReason::Timeout);
        assert!(!e.is_unreachable());
        assert!(
            e.to_string().contains("still arriving") && e.to_string().contains("1.2 MB"),
            "{e}"
        );
    }
}
