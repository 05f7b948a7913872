//! Watch streams as a client printed them → a probe with a [`WatchOutcome`].
//!
//! A watch body is one JSON event per line (`{"type":"ADDED","object":{…}}`). What matters is how the
//! stream went: how many events arrived, whether an in-stream `ERROR` event carried a `Status`
//! (410 Expired, `too old resource version`), and how it ended — by curl's own timeout while the
//! connection stayed open and silent (`curl: (28)`: [`WatchEnd::ClientTimeout`]), broken mid-stream
//! (`curl: (92) … INTERNAL_ERROR`, kubectl's `unable to decode an event from the watch stream`:
//! [`WatchEnd::Broken`]), or closed by the server (curl exit 0). The group/version of the streamed
//! objects names the API the watch was on when the path is not in the file.

use serde_json::Value;

use crate::bundle::probes::{ClientTool, WatchEnd, WatchOutcome};

use super::curl::{apply_trailers, client_probe};
use super::state::{FileCtx, FileError, Importer, PendingProbe, Yield};
use super::status_text::status_from_value;
use super::timeline::{Stamp, parse_rfc3339};
use super::trailer::{Trailer, split_trailer};

const EVENT_TYPES: &[&str] = &["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"];

/// Whether a line is one watch event.
pub(crate) fn is_event_line(line: &str) -> bool {
    let t = line.trim();
    t.starts_with("{\"type\":")
        && serde_json::from_str::<Value>(t).is_ok_and(|v| {
            v.get("object").is_some()
                && v.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|ty| EVENT_TYPES.contains(&ty))
        })
}

/// What the events of a stream and curl's trailer lines say.
pub(crate) struct StreamRead {
    pub(crate) outcome: WatchOutcome,
    /// The `apiVersion` of the first streamed object.
    pub(crate) group_version: Option<String>,
    /// The latest time an object of the stream carries.
    pub(crate) latest: Option<jiff::Timestamp>,
}

/// Read the event lines of a stream (blank lines skipped; `first_line` numbers the first of them
/// in the file, for errors).
pub(crate) fn read_events(
    lines: &[&str],
    first_line: usize,
    trailers: &[Trailer],
) -> Result<StreamRead, FileError> {
    let mut outcome = WatchOutcome::default();
    let mut group_version = None;
    let mut latest: Option<jiff::Timestamp> = None;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(t).map_err(|e| {
            let msg = e.to_string();
            let msg = msg
                .split(" at line ")
                .next()
                .unwrap_or_default()
                .to_string();
            FileError::at(first_line + i, format!("malformed watch event: {msg}"))
        })?;
        let ty = v.get("type").and_then(Value::as_str).unwrap_or_default();
        let object = v.get("object").unwrap_or(&Value::Null);
        match ty {
            "ERROR" => outcome.error_event = status_from_value(object),
            "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" => {
                outcome.events += 1;
                if ty == "BOOKMARK" {
                    outcome.bookmarks += 1;
                }
                if let Some(av) = object.get("apiVersion").and_then(Value::as_str) {
                    group_version.get_or_insert_with(|| av.to_string());
                }
                for t in object_times(object) {
                    latest = latest.max(Some(t));
                }
            }
            other => {
                return Err(FileError::at(
                    first_line + i,
                    format!("unknown watch event type {other:?}"),
                ));
            }
        }
    }
    outcome.end = end_of(trailers);
    outcome.end_detail = trailers.iter().find_map(|t| match t {
        Trailer::CurlError { code, message } => Some(format!("curl: ({code}) {message}")),
        _ => None,
    });
    Ok(StreamRead {
        outcome,
        group_version,
        latest,
    })
}

/// Put a read stream on `probe`: its lifetime is the watch's duration, not a response time.
pub(crate) fn attach(
    imp: &mut Importer,
    mut probe: crate::bundle::probes::Probe,
    read: StreamRead,
    at: Option<Stamp>,
) {
    let StreamRead {
        mut outcome,
        group_version,
        latest,
    } = read;
    probe.method.get_or_insert_with(|| "GET".into());
    outcome.duration_seconds = probe.latency_ms.map(|ms| ms / 1000.0);
    probe.latency_ms = None;
    probe.watch = Some(outcome);
    let mut pending = PendingProbe::new(probe);
    pending.object_group_version = group_version;
    pending.at = at;
    imp.stamp(latest.map(Stamp::Full));
    imp.probe(pending);
}

/// Read a captured watch stream (the events alone, then curl's trailer lines).
pub(crate) fn read(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let lines: Vec<&str> = text.lines().collect();
    let (trailer_start, trailers) = split_trailer(&lines);
    let read = read_events(&lines[..trailer_start], 1, &trailers)?;
    let mut probe = client_probe(ClientTool::Curl, file);
    apply_trailers(&mut probe, &trailers);
    attach(imp, probe, read, None);
    Ok(Yield::Used)
}

fn end_of(trailers: &[Trailer]) -> WatchEnd {
    for t in trailers {
        match t {
            // curl's own --max-time fired while the server kept the stream open.
            Trailer::CurlError { code: 28, .. } | Trailer::CurlExit { code: 28, .. } => {
                return WatchEnd::ClientTimeout;
            }
            // Stream reset, HTTP/2 INTERNAL_ERROR, transfer closed early, receive failure.
            Trailer::CurlError {
                code: 18 | 56 | 92, ..
            }
            | Trailer::CurlExit {
                code: 18 | 56 | 92, ..
            } => return WatchEnd::Broken,
            _ => {}
        }
    }
    if trailers.iter().any(|t| {
        matches!(
            t,
            Trailer::CurlExit { code: 0, .. } | Trailer::Exit { code: 0, .. }
        )
    }) {
        return WatchEnd::Closed;
    }
    WatchEnd::Unknown
}

fn object_times(object: &Value) -> Vec<jiff::Timestamp> {
    let mut out = Vec::new();
    if let Some(meta) = object.get("metadata") {
        if let Some(t) = meta
            .get("creationTimestamp")
            .and_then(Value::as_str)
            .and_then(parse_rfc3339)
        {
            out.push(t);
        }
        for mf in meta
            .get("managedFields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(t) = mf
                .get("time")
                .and_then(Value::as_str)
                .and_then(parse_rfc3339)
            {
                out.push(t);
            }
        }
    }
    out
}
