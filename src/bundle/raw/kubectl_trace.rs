//! kubectl `-v6`…`-v9` traces → one probe per distinct request outcome.
//!
//! A trace says what kubectl asked and what it got: `round_trippers.go] GET https://… 503 Service
//! Unavailable in 1 milliseconds` (or the structured `"Response" verb=… url=… status=…` of newer
//! kubectl), `helpers.go] server response object: [{…Status…}]` with its causes, client-go's
//! `with_retry.go] Got a Retry-After 1s response for attempt N to …`, `-v8` response headers and
//! bodies, and the final `Error from server …` / `exit=N` lines. Retries of one request with the
//! same outcome fold into one probe (`attempts`). Request headers are skipped outright — at `-v8`/
//! `-v9` they include `Authorization:` — so no credential can reach the bundle.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::bundle::probes::{ClientTool, WatchEnd, WatchOutcome};
use crate::bundle::{Probe, StatusBody, StatusCause};

use super::curl::{client_probe, header};
use super::kubectl_stderr::probes_from_error_line;
use super::log_lines::parse_log_line;
use super::state::{FileCtx, FileError, Importer, PendingProbe, Yield};
use super::status_text::{forbidden_user, status_from_value};
use super::timeline::Stamp;
use super::trailer::{Trailer, parse_trailer};

/// Whether a klog message is one only kubectl's client side writes (detection).
///
/// `round_trippers.go` and `with_retry.go` are client-go's request tracing and retry files, and the
/// two messages are kubectl's own (kubeconfig loading, the Status helper); an API server log holds
/// none of them at its usual verbosity, so one of them is enough to call the file a trace.
pub(crate) fn is_trace_marker(source: &str, message: &str) -> bool {
    source.starts_with("round_trippers.go")
        || source.starts_with("with_retry.go")
        || message.starts_with("Config loaded from file")
        || message.starts_with("server response object")
}

// The request/response lines of every kubectl since 1.18: `-v6` prints one line per response
// (`GET <url> 503 Service Unavailable in 1 milliseconds`; structured from 1.31 on), `-v7`+ print the
// request line first and the status later (`Response Status: …`). A request that got no response
// (kubectl's `--request-timeout` passed, the connection broke) has an empty status: `GET <url>  in
// 3000 milliseconds`, `status=""` — still the request, with no status.
static RESPONSE_OLD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([A-Z]+) (https?://\S+) (?:(\d{3})(?: [^\n]*?)?)? ?in (\d+) milliseconds")
        .expect("static regex")
});
static RESPONSE_NEW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#""Response" verb="([A-Z]+)" url="([^"]+)" status="(\d{3})?[^"]*"(?: headers=.*?)? milliseconds=(\d+)"#)
        .expect("static regex")
});
static REQUEST_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^([A-Z]+) (https?://\S+)$").expect("static regex"));
static RESPONSE_STATUS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Response Status: (\d{3})[^\n]*? in (\d+) milliseconds").expect("static regex")
});
static RETRY_AFTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Got a Retry-After (\S+) response for attempt \d+ to (\S+)").expect("static regex")
});
// A Status printed over several lines and cut out with grep: `  "message": "…",`. The indent tells a
// top-level field (2 spaces) from a cause's (deeper).
static FRAGMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"^(\s*)"(message|reason|code|status)": (.+?),?$"#).expect("static regex")
});

/// One request seen in the trace, with the klog time of its response line.
struct Request {
    probe: Probe,
    at: Option<Stamp>,
}

/// Which multi-line block the reader is inside: headers are listed one per klog line under a
/// `Request Headers:`/`Response Headers:` line, and `helpers.go` prints a Status over many lines.
#[derive(PartialEq)]
enum Section {
    None,
    RequestHeaders,
    ResponseHeaders,
    StatusObject,
}

/// Read a trace.
pub(crate) fn read(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let mut requests: Vec<Request> = Vec::new();
    let mut pending_request: Option<(String, String, Option<Stamp>)> = None;
    let mut section = Section::None;
    let mut json_block = String::new();
    let mut json_start = 0;
    let mut exit: Option<(i32, Option<f64>)> = None;
    let mut final_errors: Vec<Probe> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        // Inside `server response object: [{` … `}]`: collect until the closing line.
        if section == Section::StatusObject {
            json_block.push_str(raw);
            json_block.push('\n');
            if raw.trim_end().ends_with("}]") {
                section = Section::None;
                attach_status_block(&mut requests, &json_block)
                    .map_err(|e| FileError::at(json_start, e))?;
                json_block.clear();
            }
            continue;
        }
        // Lines without a klog header: the capture's exit line, pieces of a grep'ed Status, and
        // kubectl's own final error (`Error from server …`), which belongs to the last request.
        let Some(line) = parse_log_line(raw) else {
            let t = raw.trim();
            if let Some(Trailer::Exit { code, seconds }) = parse_trailer(t) {
                exit = Some((code, seconds));
            } else if let Some(c) = FRAGMENT.captures(raw) {
                if let Some(r) = requests.last_mut() {
                    fragment(&mut r.probe, c[1].len(), &c[2], &c[3]);
                }
            } else {
                final_errors.extend(probes_from_error_line(file, t));
            }
            continue;
        };
        let msg = line.message.as_str();
        let source = line.source.as_deref().unwrap_or_default();
        if let Some(c) = RESPONSE_NEW
            .captures(msg)
            .or_else(|| RESPONSE_OLD.captures(msg))
        {
            section = Section::None;
            let status = c.get(3).map_or("", |m| m.as_str());
            requests.push(request(file, &c[1], &c[2], status, &c[4], line.stamp));
            continue;
        }
        if let Some(c) = REQUEST_LINE.captures(msg.trim()) {
            pending_request = Some((c[1].to_string(), c[2].to_string(), line.stamp));
            continue;
        }
        if let Some(c) = RESPONSE_STATUS.captures(msg.trim()) {
            if let Some((m, url, at)) = pending_request.take() {
                requests.push(request(file, &m, &url, &c[1], &c[2], at.or(line.stamp)));
            }
            continue;
        }
        let trimmed = msg.trim();
        if trimmed.starts_with("Request Headers:") {
            section = Section::RequestHeaders;
            continue;
        }
        if trimmed.starts_with("Response Headers:") {
            section = Section::ResponseHeaders;
            continue;
        }
        if let Some(body) = trimmed.strip_prefix("Response Body: ") {
            section = Section::None;
            if let (Some(r), Ok(v)) = (requests.last_mut(), serde_json::from_str::<Value>(body)) {
                set_status(&mut r.probe, status_from_value(&v));
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("server response object:") {
            let rest = rest.trim().trim_start_matches("%s");
            json_block = format!("{rest}\n");
            json_start = i + 1;
            if rest.trim_end().ends_with("}]") {
                attach_status_block(&mut requests, &json_block)
                    .map_err(|e| FileError::at(json_start, e))?;
                json_block.clear();
            } else {
                section = Section::StatusObject;
            }
            continue;
        }
        // client-go logs the Retry-After it honours after the 429 it belongs to; the URL says which.
        if let Some(c) = RETRY_AFTER.captures(msg) {
            let url = c[2].to_string();
            if let Some(r) = requests
                .iter_mut()
                .rev()
                .find(|r| url.ends_with(r.probe.path.as_deref().unwrap_or("\u{0}")))
            {
                r.probe.headers.retry_after = Some(seconds_value(&c[1]));
            }
            continue;
        }
        // klog writes each header as its own line, indented under the `… Headers:` line; the
        // first unindented message ends the block.
        if section == Section::ResponseHeaders && msg.starts_with(' ') {
            if let Some(r) = requests.last_mut()
                && let Some(stamp) = header(&mut r.probe.headers, trimmed)
            {
                r.at = r.at.or(Some(stamp));
            }
            continue;
        }
        if section == Section::RequestHeaders && msg.starts_with(' ') {
            // Request headers (Authorization among them) are never kept.
            continue;
        }
        section = Section::None;
        if msg.contains("unable to decode an event from the watch stream") {
            if let Some(w) = requests
                .iter_mut()
                .rev()
                .find_map(|r| r.probe.watch.as_mut())
            {
                w.end = WatchEnd::Broken;
                w.end_detail = Some(msg.to_string());
            }
        // client-go's `request.go` logs transport errors (dial, TLS, EOF) that never reach a
        // response line; the first one is the request's own error, later ones its retries.
        // kubectl's `helpers.go` says the same of a request that got no response (`Connection
        // error: Get …: net/http: request canceled (Client.Timeout exceeded …)`).
        } else if (source.starts_with("request.go") && msg.contains("error")
            || source.starts_with("helpers.go") && msg.starts_with("Connection error:"))
            && let Some(r) = requests.last_mut()
        {
            r.probe.error.get_or_insert_with(|| msg.to_string());
        }
    }
    if section == Section::StatusObject {
        return Err(FileError::at(
            json_start,
            "server response object is not terminated by `}]`",
        ));
    }
    finish(imp, requests, final_errors, exit)
}

/// A probe for one response line: the path is kept with its query (`watch=true`, `limit=500`
/// matter), the host dropped.
fn request(
    file: &FileCtx,
    method: &str,
    url: &str,
    code: &str,
    ms: &str,
    at: Option<Stamp>,
) -> Request {
    let mut p = client_probe(ClientTool::KubectlTrace, file);
    p.method = Some(method.to_string());
    // kubectl sends to its kubeconfig's server: the API server's address, as this trace shows it.
    p.address = url
        .split_once("://")
        .map(|(_, rest)| rest.split('/').next().unwrap_or(rest).to_string())
        .filter(|a| !a.is_empty());
    let path = url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| rest[i..].to_string()))
        .unwrap_or_else(|| "/".into());
    if is_watch(&path) {
        p.watch = Some(WatchOutcome::default());
    }
    p.path = Some(path);
    p.status = code.parse().ok();
    p.latency_ms = ms.parse().ok();
    Request { probe: p, at }
}

fn is_watch(path: &str) -> bool {
    path.split_once('?')
        .is_some_and(|(_, q)| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}

/// `1s` → `1`, the value the `Retry-After` header carried.
///
/// client-go logs the delay as a Go duration, while the header (RFC 9110) carries whole seconds;
/// the probe keeps the header's form so a trace and a curl capture of one 429 agree.
fn seconds_value(d: &str) -> String {
    match d.strip_suffix('s') {
        Some(n) if n.bytes().all(|b| b.is_ascii_digit()) => n.to_string(),
        _ => d.to_string(),
    }
}

fn set_status(p: &mut Probe, status: Option<StatusBody>) {
    if let Some(s) = status {
        p.user = p.user.take().or_else(|| forbidden_user(&s));
        p.status_body = Some(s);
    }
}

fn attach_status_block(requests: &mut [Request], block: &str) -> Result<(), String> {
    let v: Value = serde_json::from_str(block.trim())
        .map_err(|e| format!("malformed server response object: {e}"))?;
    let first = v.as_array().and_then(|a| a.first()).unwrap_or(&v);
    if let Some(r) = requests.last_mut() {
        set_status(&mut r.probe, status_from_value(first));
    }
    Ok(())
}

/// A line of a Status printed in pieces (a trace excerpt cut with grep).
fn fragment(p: &mut Probe, indent: usize, key: &str, raw_value: &str) {
    let value: Value = serde_json::from_str(raw_value).unwrap_or(Value::Null);
    let status = p.status_body.get_or_insert_with(StatusBody::default);
    let text = value.as_str().map(str::to_string);
    if indent <= 2 {
        match (key, text) {
            ("message", Some(t)) => status.message = t,
            ("reason", Some(t)) => status.reason = t,
            ("status", Some(t)) => status.status = t,
            ("code", _) => status.code = value.as_u64().and_then(|c| u16::try_from(c).ok()),
            _ => {}
        }
        return;
    }
    let Some(t) = text else { return };
    // A StatusCause serialises as `reason`, `message`, `field` (apimachinery's field order), so a
    // cause's `reason` line opens it and the `message` after it belongs to the same cause.
    match key {
        "reason" => status.causes.push(StatusCause {
            reason: t,
            ..StatusCause::default()
        }),
        "message" => match status.causes.last_mut() {
            Some(c) if c.message.is_empty() => c.message = t,
            _ => status.causes.push(StatusCause {
                message: t,
                ..StatusCause::default()
            }),
        },
        _ => {}
    }
}

fn finish(
    imp: &mut Importer,
    requests: Vec<Request>,
    final_errors: Vec<Probe>,
    exit: Option<(i32, Option<f64>)>,
) -> Result<Yield, FileError> {
    if requests.is_empty() && final_errors.is_empty() {
        return Ok(Yield::Nothing(
            "kubectl trace without a request line".into(),
        ));
    }
    // client-go retries a 429/503 with Retry-After up to 10 times: consecutive attempts with the same
    // outcome are one observation with `attempts`, not ten pieces of evidence.
    let mut folded: Vec<Request> = Vec::new();
    for r in requests {
        match folded.last_mut() {
            Some(last) if same_outcome(&last.probe, &r.probe) => {
                last.probe.attempts += 1;
                last.probe.latency_ms = max_opt(last.probe.latency_ms, r.probe.latency_ms);
                if last.probe.headers.retry_after.is_none() {
                    last.probe.headers.retry_after = r.probe.headers.retry_after;
                }
            }
            _ => folded.push(r),
        }
    }
    let last_error = final_errors.into_iter().last();
    let n = folded.len();
    for (i, mut r) in folded.into_iter().enumerate() {
        if r.probe.attempts > 1
            && let Some(code) = r.probe.status
        {
            r.probe
                .status_counts
                .insert(code.to_string(), u64::from(r.probe.attempts));
        }
        // The command's final error and exit status describe its last request.
        if i + 1 == n {
            if let Some(e) = &last_error {
                r.probe.error = r.probe.error.or(e.error.clone());
                if r.probe.status_body.is_none() {
                    r.probe.status_body = e.status_body.clone();
                }
            }
            if let Some((code, seconds)) = exit {
                r.probe.exit_code = Some(code);
                if let Some(w) = r.probe.watch.as_mut() {
                    end_watch(w, code, seconds);
                }
            }
        }
        imp.probe(PendingProbe {
            at: r.at,
            ..PendingProbe::new(r.probe)
        });
    }
    if n == 0
        && let Some(mut e) = last_error
    {
        e.exit_code = exit.map(|x| x.0);
        imp.probe(PendingProbe::new(e));
    }
    Ok(Yield::Used)
}

/// How a watch ended, judged from how kubectl exited (when the trace did not already say).
fn end_watch(w: &mut WatchOutcome, code: i32, seconds: Option<f64>) {
    w.duration_seconds = seconds;
    if w.end != WatchEnd::Unknown {
        return;
    }
    let after = seconds.map_or(String::new(), |s| format!(" after {s:.1} s"));
    match code {
        // GNU timeout(1) killed the command while the stream was still open.
        124 => {
            w.end = WatchEnd::ClientTimeout;
            w.end_detail = Some(format!(
                "killed by timeout (exit 124){after}, stream still open"
            ));
        }
        _ => w.end_detail = Some(format!("stream ended{after}; kubectl exited {code}")),
    }
}

/// Two attempts of one request that got the same answer (watches are never folded: each stream is
/// its own story).
///
/// The Status body and error count too: two 503s with different messages (an APIService going
/// from `MissingEndpoints` to `FailedDiscoveryCheck`) are two observations, not one retried.
fn same_outcome(a: &Probe, b: &Probe) -> bool {
    a.method == b.method
        && a.path == b.path
        && a.status == b.status
        && a.status_body == b.status_body
        && a.error == b.error
        && a.watch.is_none()
        && b.watch.is_none()
}

fn max_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}
