//! Files of repeated-request results → probes folded by outcome.
//!
//! Load tests and reproduction loops leave one line per attempt: `429 0.333515` (status, seconds),
//! or a writer's `08:55:45 curl cc-6 {…Status…}  HTTP=504 dur=10.022645` and `08:55:46 kubectl
//! kc-7 rc=1 dur=15.07 err=error: failed to create configmap: …`. Identical outcomes fold into one
//! probe with `attempts` and `status_counts`; its latency is the slowest attempt's. A plain
//! status/seconds list folds into a single probe whose `status` is the most frequent one.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::bundle::Probe;
use crate::bundle::probes::ClientTool;

use super::curl::client_probe;
use super::kubectl_stderr::probes_from_error_line;
use super::state::{FileCtx, FileError, Importer, PendingProbe, Yield};
use super::status_text::{forbidden_user, status_from_value};

static STATUS_SECONDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(\d{3})(?:\s+([0-9.]+))?$").expect("static regex"));
static CURL_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\d\d:\d\d:\d\d curl \S+ (.*?)\s*HTTP=(\d{3})(?: dur=([0-9.]+))?\s*$")
        .expect("static regex")
});
static KUBECTL_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\d\d:\d\d:\d\d kubectl \S+ rc=(\d+)(?: dur=([0-9.]+))?(?: err=(.*))?$")
        .expect("static regex")
});
static KLOG_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]\s]+\] ").expect("static regex")
});

/// Whether every line is a result line (detection).
pub(crate) fn looks_like(lines: &[&str]) -> bool {
    !lines.is_empty()
        && lines.iter().all(|l| {
            let t = l.trim();
            STATUS_SECONDS.is_match(t) || CURL_LINE.is_match(t) || KUBECTL_LINE.is_match(t)
        })
}

/// Read a result list.
pub(crate) fn read(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let mut plain: Vec<(u16, Option<f64>)> = Vec::new();
    let mut outcomes: Vec<(Probe, Option<f64>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(c) = STATUS_SECONDS.captures(t) {
            plain.push((
                c[1].parse().unwrap_or(0),
                c.get(2).and_then(|m| m.as_str().parse().ok()),
            ));
        } else if let Some(c) = CURL_LINE.captures(t) {
            let mut p = client_probe(ClientTool::Curl, file);
            p.status = c[2].parse().ok();
            let body = c[1].trim();
            if body.starts_with('{') {
                let v: Value = serde_json::from_str(body).map_err(|e| {
                    FileError::at(i + 1, format!("malformed JSON body in a result line: {e}"))
                })?;
                if let Some(s) = status_from_value(&v) {
                    p.user = forbidden_user(&s);
                    p.status_body = Some(s);
                }
            }
            outcomes.push((p, seconds(c.get(3))));
        } else if let Some(c) = KUBECTL_LINE.captures(t) {
            let rc: i32 = c[1].parse().unwrap_or(0);
            let err = c.get(3).map_or("", |m| m.as_str()).trim();
            // `err=` holds kubectl's stderr on one line, with klog headers of client warnings in it:
            // drop those and read from the `error: ` kubectl printed.
            let mut probes = if err.is_empty() {
                vec![client_probe(ClientTool::Kubectl, file)]
            } else {
                let cleaned = KLOG_HEADER.replace_all(err, "");
                let line = match cleaned.find("error: ") {
                    Some(at) => &cleaned[at..],
                    None => &cleaned[..],
                };
                let found = probes_from_error_line(file, line);
                if found.is_empty() {
                    let mut p = client_probe(ClientTool::Kubectl, file);
                    p.error = Some(line.to_string());
                    vec![p]
                } else {
                    found
                }
            };
            for p in &mut probes {
                p.exit_code = Some(rc);
            }
            let secs = seconds(c.get(2));
            outcomes.extend(probes.into_iter().map(|p| (p, secs)));
        } else {
            return Err(FileError::at(i + 1, format!("not a result line: {t:?}")));
        }
    }
    if !plain.is_empty() {
        imp.probe(PendingProbe::new(fold_plain(file, &plain)));
    }
    for p in fold_outcomes(outcomes) {
        imp.probe(PendingProbe::new(p));
    }
    Ok(Yield::Used)
}

fn seconds(m: Option<regex::Match<'_>>) -> Option<f64> {
    m.and_then(|m| m.as_str().parse::<f64>().ok())
}

/// A status/seconds list is one flood of one request: a single probe whose `status` is the most
/// frequent answer and whose `status_counts` keep the split (60 × 200, 1964 × 429).
fn fold_plain(file: &FileCtx, lines: &[(u16, Option<f64>)]) -> Probe {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (code, _) in lines {
        *counts.entry(code.to_string()).or_default() += 1;
    }
    let most = counts
        .iter()
        .max_by_key(|(_, n)| **n)
        .and_then(|(c, _)| c.parse().ok());
    let mut p = client_probe(ClientTool::Other, file);
    p.status = most;
    p.attempts = u32::try_from(lines.len()).unwrap_or(u32::MAX);
    p.latency_ms = lines
        .iter()
        .filter_map(|(_, s)| *s)
        .fold(None, |m: Option<f64>, s| Some(m.map_or(s, |m| m.max(s))))
        .map(|s| s * 1000.0);
    p.status_counts = counts;
    p
}

/// Lines of a writer loop fold by outcome: each distinct answer (201, 504 Timeout, a client timeout)
/// is one probe with its attempts.
fn fold_outcomes(outcomes: Vec<(Probe, Option<f64>)>) -> Vec<Probe> {
    let mut folded: Vec<Probe> = Vec::new();
    for (p, secs) in outcomes {
        let ms = secs.map(|s| s * 1000.0);
        match folded.iter_mut().find(|f| {
            f.status == p.status
                && f.status_body == p.status_body
                && f.error == p.error
                && f.exit_code == p.exit_code
                && f.origin.tool == p.origin.tool
        }) {
            Some(f) => {
                f.attempts += 1;
                f.latency_ms = match (f.latency_ms, ms) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
            }
            None => folded.push(Probe {
                latency_ms: ms,
                ..p
            }),
        }
    }
    for f in &mut folded {
        if let Some(code) = f.status
            && f.attempts > 1
        {
            f.status_counts
                .insert(code.to_string(), u64::from(f.attempts));
        }
    }
    folded
}
