//! One line of a log, in any of the formats the control plane writes.
//!
//! * klog (`E1129 08:42:34.775474   32417 available_controller.go:524] message`): kube-apiserver,
//!   extension API servers, and kubectl's own `-v` traces and stderr.
//! * Go's standard `log` package (`2026/11/29 09:00:54 httputil: ReverseProxy read error …`): code
//!   inside kube-apiserver that bypasses klog, such as the aggregator's reverse proxy.
//! * etcd 3.4's capnslog (`2026-11-29 08:51:33.702066 I | mvcc: store.index: compact 250`).
//! * zap JSON (`{"level":"warn","ts":"…","logger":"etcd-client","msg":"…","error":"…"}`): the etcd
//!   client inside API servers, and etcd 3.5 itself.
//!
//! Some messages span lines: klog writes a `Trace[…]` block of kube-apiserver as one message whose
//! later lines start with `Trace[<id>]:`, and a failed health check (`healthz.go] etcd check
//! failed: readyz`) with the failed checks (`[-]etcd failed: …`) under it. Those lines are
//! continuation lines ([`count_log_lines`]): part of a log, never health output or a JSON document.
//!
//! This file only splits a line into time, severity, source and message; what the message means is
//! decided by the pattern table in `log_patterns.rs` (and `Trace[…]` blocks by `trace_blocks.rs`).

use std::sync::LazyLock;

use jiff::civil;
use regex::Regex;
use serde_json::Value;

use super::timeline::{Stamp, fraction_nanos, parse_rfc3339, utc};

/// The format a line was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFormat {
    Klog,
    GoLog,
    Capnslog,
    Json,
}

/// A parsed log line.
#[derive(Debug, Clone)]
pub(crate) struct LogLine {
    pub format: LogFormat,
    pub stamp: Option<Stamp>,
    /// klog/capnslog severity letter, or the JSON `level`.
    pub severity: Option<String>,
    /// `file.go:123` for klog, the package for capnslog, `caller` for JSON.
    pub source: Option<String>,
    /// JSON `logger` (e.g. `etcd-client`).
    pub logger: Option<String>,
    /// The message without the header. For JSON: `msg`, then `: error` when an error field exists.
    pub message: String,
}

static KLOG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d+)\s+\d+\s+([^:\]\s]+:\d+)\] ?(.*)$",
    )
    .expect("static regex")
});
static GOLOG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? (.*)$")
        .expect("static regex")
});
static CAPNSLOG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? ([DINWECF]) \| (?:([\w/.-]+): )?(.*)$",
    )
    .expect("static regex")
});

fn num<T: std::str::FromStr>(s: &str) -> Option<T> {
    s.parse().ok()
}

/// Parse one line; `None` when it has no known log header.
pub(crate) fn parse_log_line(line: &str) -> Option<LogLine> {
    let line = line.trim_end_matches(['\r', '\n']);
    let first = line.as_bytes().first()?;
    match first {
        b'I' | b'W' | b'E' | b'F' => klog(line),
        b'{' => json(line),
        b'0'..=b'9' => golog(line).or_else(|| capnslog(line)),
        _ => None,
    }
}

/// Whether a line is the later line of a multi-line log message on its own: a step or the end of a
/// kube-apiserver `Trace[<id>]:` block.
pub(crate) fn is_trace_line(line: &str) -> bool {
    line.strip_prefix("Trace[")
        .and_then(|r| r.split_once("]:"))
        .is_some_and(|(id, _)| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// Log lines among `lines`: `(headers, continuations)`. A header is a line with a log header
/// ([`parse_log_line`]); a continuation is a `Trace[<id>]:` line, or a `[+]…`/`[-]…` health item
/// that follows a header or another continuation (what klog prints under `healthz.go] … check
/// failed`; a health listing on its own has no header above its items).
pub(crate) fn count_log_lines(lines: &[&str]) -> (usize, usize) {
    let (mut headers, mut continuations) = (0, 0);
    let mut in_log = false;
    for l in lines {
        let t = l.trim_start();
        if parse_log_line(t).is_some() {
            headers += 1;
            in_log = true;
        } else if is_trace_line(t) || (in_log && (t.starts_with("[+]") || t.starts_with("[-]"))) {
            continuations += 1;
        } else {
            in_log = false;
        }
    }
    (headers, continuations)
}

/// Whether a line starts with a klog header (cheap check used by detection).
pub(crate) fn is_klog(line: &str) -> bool {
    matches!(line.as_bytes().first(), Some(b'I' | b'W' | b'E' | b'F')) && KLOG.is_match(line)
}

fn klog(line: &str) -> Option<LogLine> {
    let c = KLOG.captures(line)?;
    let time =
        civil::Time::new(num(&c[4])?, num(&c[5])?, num(&c[6])?, fraction_nanos(&c[7])).ok()?;
    Some(LogLine {
        format: LogFormat::Klog,
        stamp: Some(Stamp::Yearless {
            month: num(&c[2])?,
            day: num(&c[3])?,
            time,
        }),
        severity: Some(c[1].to_string()),
        source: Some(c[8].to_string()),
        logger: None,
        message: c[9].to_string(),
    })
}

fn dated(c: &regex::Captures<'_>, fraction: Option<regex::Match<'_>>) -> Option<Stamp> {
    utc(
        num(&c[1])?,
        num(&c[2])?,
        num(&c[3])?,
        num(&c[4])?,
        num(&c[5])?,
        num(&c[6])?,
        fraction.map_or(0, |m| fraction_nanos(m.as_str())),
    )
    .map(Stamp::Full)
}

fn golog(line: &str) -> Option<LogLine> {
    let c = GOLOG.captures(line)?;
    Some(LogLine {
        format: LogFormat::GoLog,
        stamp: dated(&c, c.get(7)),
        severity: None,
        source: None,
        logger: None,
        message: c[8].to_string(),
    })
}

fn capnslog(line: &str) -> Option<LogLine> {
    let c = CAPNSLOG.captures(line)?;
    Some(LogLine {
        format: LogFormat::Capnslog,
        stamp: dated(&c, c.get(7)),
        severity: Some(c[8].to_string()),
        source: c.get(9).map(|m| m.as_str().to_string()),
        logger: None,
        message: c[10].to_string(),
    })
}

fn json(line: &str) -> Option<LogLine> {
    let v: Value = serde_json::from_str(line).ok()?;
    let obj = v.as_object()?;
    let msg = obj.get("msg").and_then(Value::as_str)?;
    let text = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    let stamp = match obj.get("ts") {
        Some(Value::String(s)) => parse_rfc3339(s).map(Stamp::Full),
        Some(Value::Number(n)) => n
            .as_f64()
            .and_then(|secs| jiff::Timestamp::from_millisecond((secs * 1000.0) as i64).ok())
            .map(Stamp::Full),
        _ => None,
    };
    let message = match text("error") {
        Some(e) => format!("{msg}: {e}"),
        None => msg.to_string(),
    };
    Some(LogLine {
        format: LogFormat::Json,
        stamp,
        severity: text("level"),
        source: text("caller"),
        logger: text("logger"),
        message,
    })
}

/// Whether a JSON line is a structured log line rather than a document (detection).
pub(crate) fn is_json_log_line(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('{')
        && t.contains("\"msg\"")
        && (t.contains("\"level\"") || t.contains("\"ts\""))
        && json(t).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_splits_into_time_and_message() {
        let k = parse_log_line(
            "E1129 08:42:34.775474   32417 available_controller.go:524] v1 failed with: x",
        )
        .unwrap();
        assert_eq!(k.format, LogFormat::Klog);
        assert_eq!(k.source.as_deref(), Some("available_controller.go:524"));
        assert_eq!(k.message, "v1 failed with: x");
        let g = parse_log_line(
            "2026/11/29 09:00:54 httputil: ReverseProxy read error during body copy",
        )
        .unwrap();
        assert_eq!(g.format, LogFormat::GoLog);
        assert!(matches!(g.stamp, Some(Stamp::Full(_))));
        let c = parse_log_line("2026-11-29 08:51:33.702066 I | mvcc: store.index: compact 250")
            .unwrap();
        assert_eq!(c.format, LogFormat::Capnslog);
        assert_eq!(c.source.as_deref(), Some("mvcc"));
        let j = parse_log_line(r#"{"level":"warn","ts":"2026-11-29T08:55:50.371Z","logger":"etcd-client","msg":"retrying of unary invoker failed","error":"rpc error"}"#).unwrap();
        assert_eq!(j.message, "retrying of unary invoker failed: rpc error");
        assert!(parse_log_line("Error from server (Forbidden): x").is_none());
    }
}
