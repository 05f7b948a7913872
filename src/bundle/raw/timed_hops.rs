//! Timed hops in logs: an API server's `Trace[…]` blocks and etcd's `took too long` warnings.
//!
//! `k8s.io/utils/trace` logs a block when a request, a webhook call or a storage call took longer
//! than its threshold, as one klog message whose lines all start with `Trace[<id>]:`:
//!
//! ```text
//! I1129 08:55:55.350188 32417 trace.go:205] Trace[25268463]: "Create" url:/api/v1/namespaces/x/configmaps,user-agent:curl/7.88.1,audit-id:…,client:127.0.0.1,accept:*/*,protocol:HTTP/2.0 (29-Nov-2026 08:55:45.342) (total time: 10007ms):
//! Trace[25268463]: ---"Object stored in database" 10004ms (08:55:55.347)
//! Trace[25268463]: ["Call validating webhook" configuration:vwh,webhook:v.example.com,resource:/v1, Resource=configmaps,subresource:,operation:CREATE,UID:… 8004ms (08:55:47.350)
//! Trace[25268463]:  ---"Request completed" 8003ms (08:55:55.349)]
//! Trace[25268463]: [10.007600656s] [10.007600656s] END
//! ```
//!
//! The header names the work (`"Create"`, `"List etcd3"`, `"Call validating webhook"`), its
//! attributes (`key:value` pairs joined by `,`; a value may itself hold `, ` as in `resource:/v1,
//! Resource=configmaps`), its start date and its total time. A step (`---"…"`, `|||"…"` for
//! parallel work) prints the time since the previous step; a nested trace (`["…"` … `]`, what
//! 1.27+ write for webhook and storage calls inside a request, one more space of indent per
//! level) prints its own total. 1.24 logs webhook and storage calls as blocks of their own. The
//! `END` line gives the exact duration. A JSON-format log carries the same lines inside one `msg`.
//!
//! etcd warns of a slow request in its zap JSON log (`"msg":"apply request took too long",
//! "took":"1.2s","expected-duration":"100ms","prefix":"read-only range ","request":"key:…"`) or, in
//! 3.4's capnslog, as `read-only range request "key:…" with result "…" took too long (1.2s) to
//! execute`; and of a slow disk sync (`slow fdatasync`, `sync duration of 1.2s, expected less than
//! 1s`).
//!
//! Reading is forgiving: a block cut short keeps its header's total time (`complete: false`),
//! lines of a block whose header is missing are ignored, and nothing here can fail or panic on any
//! input. Which process wrote the log, and which object a hop concerns, are decided by the caller
//! (`logs.rs` and `finish.rs`), never here.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::bundle::observations::Component;
use crate::bundle::{HopLayer, HopStep, TimedHop};

use super::log_lines::{LogFormat, LogLine};
use super::status_text::go_unquote;
use super::timeline::{Stamp, fraction_nanos, utc};

/// A hop read from a log, before its component and target are known.
pub(crate) struct PendingHop {
    pub hop: TimedHop,
    /// When the work started (a trace header's date) or was logged (etcd).
    pub at: Option<Stamp>,
}

static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^"(?P<name>(?:[^"\\]|\\.)*)"(?: (?P<fields>.*?))? ?\((?P<day>\d{1,2})-(?P<mon>[A-Za-z]{3})-(?P<year>\d{4}) (?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2})(?:\.(?P<frac>\d+))?\) \(total time: (?P<total>\d+)ms\):?\s*$"#,
    )
    .expect("static regex")
});
static SUMMARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^"(?P<name>(?:[^"\\]|\\.)*)"(?: (?P<fields>.*?))? ?(?P<ms>-?\d+)ms \((?:(?P<h>\d{1,2}):(?P<m>\d{2}):(?P<s>\d{2})(?:\.(?P<frac>\d+))?|[^()]*)\)(?P<close>\]*)\s*$"#,
    )
    .expect("static regex")
});
static END: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\[(?P<a>[^\]]*)\] \[(?P<b>[^\]]*)\] END\s*$").expect("static regex")
});
/// The start of the next `key:` of a trace's attributes: a comma, then a key with no space.
static FIELD_START: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r",([A-Za-z][A-Za-z0-9_.-]*):").expect("static regex"));
static CAPNSLOG_SLOW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?P<what>(?:read-only range )?request) "(?P<request>(?:[^"\\]|\\.)*)" with result "(?P<result>(?:[^"\\]|\\.)*)" took too long \((?P<took>[^)]+)\) to execute"#,
    )
    .expect("static regex")
});
static CAPNSLOG_SYNC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"sync duration of (?P<took>\S+), expected less than (?P<expected>\S+)")
        .expect("static regex")
});

/// A trace whose `END` has not been read yet.
struct Open {
    id: String,
    pending: PendingHop,
    /// The layers of the nested traces the next lines are inside, innermost last.
    nesting: Vec<HopLayer>,
}

/// Reads the timed hops of one log, line by line.
#[derive(Default)]
pub(crate) struct HopReader {
    open: Vec<Open>,
    done: Vec<PendingHop>,
}

/// Traces whose `END` never came stay open at most this many at a time (a log of cut blocks
/// cannot grow memory without bound); the oldest is closed as incomplete.
const MAX_OPEN: usize = 256;

impl HopReader {
    /// Feed one line of a log: the message after its header (a JSON `msg` may hold several
    /// lines), or a line without a header as it is. Lines that are not part of a trace are
    /// ignored.
    pub(crate) fn text(&mut self, text: &str) {
        for line in text.lines() {
            self.trace_line(line);
        }
    }

    /// Feed a parsed line that may be one of etcd's slow-request warnings.
    pub(crate) fn etcd_line(&mut self, parsed: &LogLine, raw: &str) {
        let hop = match parsed.format {
            LogFormat::Json if is_etcd_slow_message(&parsed.message) => etcd_json(raw),
            LogFormat::Capnslog => etcd_capnslog(&parsed.message),
            _ => None,
        };
        if let Some(mut hop) = hop {
            hop.started_at = parsed.stamp.and_then(|s| match s {
                Stamp::Full(t) => Some(t),
                Stamp::Yearless { .. } => None,
            });
            self.done.push(PendingHop {
                hop,
                at: parsed.stamp,
            });
        }
    }

    /// Every hop read, cut blocks included.
    pub(crate) fn finish(mut self) -> Vec<PendingHop> {
        for o in std::mem::take(&mut self.open) {
            self.done.push(o.pending);
        }
        self.done
    }

    fn trace_line(&mut self, line: &str) {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix("Trace[") else {
            return;
        };
        let Some((id, rest)) = rest.split_once("]:") else {
            return;
        };
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return;
        }
        let body = rest.strip_prefix(' ').unwrap_or(rest);
        if let Some(c) = HEADER.captures(body) {
            self.open_trace(id, &c);
            return;
        }
        let Some(pos) = self.open.iter().rposition(|o| o.id == id) else {
            return;
        };
        let depth = body.len() - body.trim_start_matches(' ').len();
        let body = body.trim_start_matches(' ');
        if let Some(c) = END.captures(body) {
            let mut o = self.open.remove(pos);
            let exact = c.name("b").and_then(|m| parse_go_duration(m.as_str()));
            if let Some(ms) = exact {
                o.pending.hop.duration_ms = ms;
            }
            o.pending.hop.complete = true;
            self.done.push(o.pending);
            return;
        }
        let (nested, summary) = if let Some(s) = body.strip_prefix('[') {
            (true, s)
        } else if let Some(s) = body
            .strip_prefix("---")
            .or_else(|| body.strip_prefix("|||"))
        {
            (false, s)
        } else {
            return;
        };
        let Some(c) = SUMMARY.captures(summary) else {
            return;
        };
        let open = &mut self.open[pos];
        let name = unquote(c.name("name").map_or("", |m| m.as_str()));
        let fields = parse_fields(c.name("fields").map_or("", |m| m.as_str()));
        let duration_ms = c
            .name("ms")
            .and_then(|m| m.as_str().parse::<f64>().ok())
            .unwrap_or(0.0);
        let inherited = open
            .nesting
            .last()
            .copied()
            .unwrap_or(open.pending.hop.layer);
        let layer = layer_of(&name, &fields).unwrap_or(inherited);
        // A nested trace prints when it started (a plain step, when it ended): on the day of the
        // hop's header, or the next one when the clock passed midnight in between.
        let started_at = if nested {
            step_start(open.pending.hop.started_at, &c)
        } else {
            None
        };
        open.pending.hop.steps.push(HopStep {
            started_at,
            name,
            layer,
            fields,
            duration_ms,
            depth: u32::try_from(depth.min(open.nesting.len())).unwrap_or(0),
            nested,
            target: None,
        });
        if nested {
            open.nesting.push(layer);
        }
        let closes = c.name("close").map_or(0, |m| m.as_str().len());
        for _ in 0..closes {
            open.nesting.pop();
        }
    }

    fn open_trace(&mut self, id: &str, c: &regex::Captures<'_>) {
        // A header for an id still open: the earlier block was cut.
        if let Some(pos) = self.open.iter().position(|o| o.id == id) {
            let o = self.open.remove(pos);
            self.done.push(o.pending);
        }
        if self.open.len() >= MAX_OPEN {
            let o = self.open.remove(0);
            self.done.push(o.pending);
        }
        let name = unquote(c.name("name").map_or("", |m| m.as_str()));
        let fields = parse_fields(c.name("fields").map_or("", |m| m.as_str()));
        let started = header_time(c);
        let layer = layer_of(&name, &fields).unwrap_or(if fields.contains_key("url") {
            HopLayer::Request
        } else {
            HopLayer::Other
        });
        let verb = fields
            .get("verb")
            .cloned()
            .or_else(|| handler_verb(&name).map(str::to_string));
        let hop = TimedHop {
            component: Component::Unknown,
            layer,
            verb: if layer == HopLayer::Request {
                verb
            } else {
                None
            },
            path: fields.get("url").cloned(),
            user_agent: fields.get("user-agent").cloned(),
            audit_id: fields.get("audit-id").cloned(),
            name,
            fields,
            started_at: started,
            duration_ms: c
                .name("total")
                .and_then(|m| m.as_str().parse::<f64>().ok())
                .unwrap_or(0.0),
            steps: Vec::new(),
            target: None,
            complete: false,
            origin: None,
        };
        self.open.push(Open {
            id: id.to_string(),
            pending: PendingHop {
                hop,
                at: started.map(Stamp::Full),
            },
            nesting: Vec::new(),
        });
    }
}

/// A nested trace's start: its printed time of day on the date of `hop_start`.
fn step_start(
    hop_start: Option<jiff::Timestamp>,
    c: &regex::Captures<'_>,
) -> Option<jiff::Timestamp> {
    let hop_start = hop_start?;
    let num = |n: &str| c.name(n).and_then(|m| m.as_str().parse::<i8>().ok());
    let day = hop_start.to_zoned(jiff::tz::TimeZone::UTC).date();
    let at = utc(
        day.year(),
        day.month(),
        day.day(),
        num("h")?,
        num("m")?,
        num("s")?,
        c.name("frac").map_or(0, |m| fraction_nanos(m.as_str())),
    )?;
    // Printed with milliseconds: a start up to a few of them before the header's is the same
    // instant; much earlier is the next day.
    if at.duration_since(hop_start).as_secs_f64() < -60.0 {
        at.checked_add(jiff::SignedDuration::from_hours(24)).ok()
    } else {
        Some(at)
    }
}

/// The layer a trace or step's name (or the webhook it names) says it timed.
fn layer_of(name: &str, fields: &BTreeMap<String, String>) -> Option<HopLayer> {
    if name.starts_with("Call validating webhook")
        || name.starts_with("Call mutating webhook")
        || (fields.contains_key("webhook") && fields.contains_key("configuration"))
    {
        return Some(HopLayer::Admission);
    }
    if name.starts_with("Call conversion webhook") {
        return Some(HopLayer::Conversion);
    }
    if name.ends_with(" etcd3") || name.starts_with("Txn call") {
        return Some(HopLayer::Storage);
    }
    None
}

/// The HTTP verb of a REST handler's trace name.
fn handler_verb(name: &str) -> Option<&'static str> {
    Some(match name {
        "Create" => "POST",
        "Update" => "PUT",
        "Patch" => "PATCH",
        "Get" => "GET",
        "List" => "LIST",
        "Delete" | "Delete collection" => "DELETE",
        _ => return None,
    })
}

fn unquote(s: &str) -> String {
    if s.contains('\\') {
        go_unquote(s)
    } else {
        s.to_string()
    }
}

/// A trace's attributes: `key:value` pairs joined by `,`, where a value may itself hold `, `
/// (`resource:/v1, Resource=configmaps`) or a comma not followed by a key (`accept:a,b`).
pub(crate) fn parse_fields(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let s = s.trim();
    if s.is_empty() {
        return out;
    }
    let mut starts: Vec<usize> = vec![0];
    starts.extend(FIELD_START.find_iter(s).map(|m| m.start() + 1));
    starts.push(s.len() + 1);
    for w in starts.windows(2) {
        let (a, b) = (w[0], w[1].saturating_sub(1));
        let Some(part) = s.get(a..b) else {
            continue;
        };
        if let Some((k, v)) = part.split_once(':')
            && !k.is_empty()
            && !k.contains(' ')
        {
            out.insert(k.to_string(), v.to_string());
        }
    }
    out
}

fn header_time(c: &regex::Captures<'_>) -> Option<jiff::Timestamp> {
    let num = |n: &str| c.name(n).and_then(|m| m.as_str().parse::<i64>().ok());
    let month = match c.name("mon")?.as_str().to_ascii_lowercase().as_str() {
        "jan" => 1,
        "feb" => 2,
        "mar" => 3,
        "apr" => 4,
        "may" => 5,
        "jun" => 6,
        "jul" => 7,
        "aug" => 8,
        "sep" => 9,
        "oct" => 10,
        "nov" => 11,
        "dec" => 12,
        _ => return None,
    };
    utc(
        i16::try_from(num("year")?).ok()?,
        month,
        i8::try_from(num("day")?).ok()?,
        i8::try_from(num("h")?).ok()?,
        i8::try_from(num("m")?).ok()?,
        i8::try_from(num("s")?).ok()?,
        c.name("frac").map_or(0, |m| fraction_nanos(m.as_str())),
    )
}

/// A Go `time.Duration` as printed (`10.007600656s`, `503.1ms`, `1m2.5s`, `850µs`), in ms, read
/// by Go's own grammar ([`crate::semantics::go_duration`]).
pub(crate) fn parse_go_duration(s: &str) -> Option<f64> {
    let ns = crate::semantics::go_duration::parse(s.trim()).ok()?;
    // Nanosecond precision, without binary noise (`10.007600656s` is 10007.600656 ms).
    Some(ns as f64 / 1e6)
}

fn is_etcd_slow_message(msg: &str) -> bool {
    msg.contains("took too long") || msg.starts_with("slow fdatasync")
}

/// etcd 3.5's zap warning: `msg`, and the time in `took`.
fn etcd_json(raw: &str) -> Option<TimedHop> {
    let v: Value = serde_json::from_str(raw.trim()).ok()?;
    let obj = v.as_object()?;
    let msg = obj.get("msg").and_then(Value::as_str)?;
    let took = obj
        .get("took")
        .and_then(Value::as_str)
        .and_then(parse_go_duration)?;
    let mut fields = BTreeMap::new();
    for (k, v) in obj {
        if matches!(
            k.as_str(),
            "level" | "ts" | "caller" | "msg" | "took" | "logger"
        ) {
            continue;
        }
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => continue,
        };
        fields.insert(k.clone(), text);
    }
    Some(etcd_hop(msg, took, fields))
}

/// etcd 3.4's capnslog warnings.
fn etcd_capnslog(message: &str) -> Option<TimedHop> {
    if let Some(c) = CAPNSLOG_SLOW.captures(message) {
        let took = parse_go_duration(c.name("took")?.as_str())?;
        let what = c.name("what").map_or("request", |m| m.as_str());
        let mut fields = BTreeMap::new();
        fields.insert(
            "request".to_string(),
            unquote(c.name("request").map_or("", |m| m.as_str())),
        );
        fields.insert(
            "response".to_string(),
            unquote(c.name("result").map_or("", |m| m.as_str())),
        );
        if what.starts_with("read-only range") {
            fields.insert("prefix".to_string(), "read-only range ".to_string());
        }
        return Some(etcd_hop(&format!("{what} took too long"), took, fields));
    }
    if let Some(c) = CAPNSLOG_SYNC.captures(message) {
        let took = parse_go_duration(c.name("took")?.as_str())?;
        let mut fields = BTreeMap::new();
        fields.insert(
            "expected-duration".to_string(),
            c.name("expected").map_or("", |m| m.as_str()).to_string(),
        );
        return Some(etcd_hop("slow fdatasync", took, fields));
    }
    None
}

fn etcd_hop(name: &str, took_ms: f64, fields: BTreeMap<String, String>) -> TimedHop {
    TimedHop {
        component: Component::Etcd,
        layer: HopLayer::Etcd,
        name: name.to_string(),
        verb: None,
        path: None,
        user_agent: None,
        audit_id: None,
        fields,
        started_at: None,
        duration_ms: took_ms,
        steps: Vec::new(),
        target: None,
        complete: true,
        origin: None,
    }
}

#[cfg(test)]
mod tests;
