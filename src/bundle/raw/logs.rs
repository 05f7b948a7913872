//! Log excerpts of kube-apiserver, extension API servers and etcd → log hits and timed hops.
//!
//! Every line (and every continuation line, such as the `[-]etcd failed: …` lines under a klog
//! `healthz.go` header) is matched against the pattern table; matches become [`LogHit`]s, folded into
//! `log_findings` once the whole import is read. `Trace[…]` blocks and etcd's `took too long`
//! warnings become timed hops ([`super::timed_hops`]). Which process wrote the file is judged from
//! its content: patterns that only one component writes and a few markers vote, and lines written
//! by several components (shutdown, request timeouts, traces) take the winner. The file name is
//! never used.

use std::collections::HashMap;

use crate::bundle::observations::Component;

use super::finish::fold_hits;
use super::log_lines::{LogFormat, parse_log_line};
use super::log_patterns::match_message;
use super::state::{FileCtx, FileError, Importer, LogHit, Yield, truncate};
use super::timed_hops::{HopReader, PendingHop};
use super::timeline::{Clock, Stamp};
use crate::bundle::{EvidenceBundle, LogFinding};

/// etcd's own source packages, as zap's `caller` names them.
const ETCD_CALLERS: &[&str] = &[
    "etcdserver/",
    "embed/",
    "mvcc/",
    "wal/",
    "rafthttp/",
    "v3rpc/",
    "backend/",
    "raft/",
];

/// Read a log excerpt.
pub(crate) fn read(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let Scan {
        hits,
        component,
        stamps,
        hops,
    } = scan(text, &file.shown);
    for s in stamps {
        imp.stamp(Some(s));
    }
    if hits.is_empty() && hops.is_empty() {
        return Ok(Yield::Nothing(format!(
            "log of {}: no known error line and no timed hop",
            component_name(component)
        )));
    }
    for mut h in hits {
        h.component = h.component.or(Some(component));
        imp.log_hits.push(h);
    }
    for mut p in hops {
        // A trace is written by whichever API server served the request: the file's writer.
        if p.hop.component == Component::Unknown {
            p.hop.component = component;
        }
        p.hop.origin = Some(file.shown.clone());
        imp.stamp(p.at);
        imp.hops.push(p);
    }
    Ok(Yield::Used)
}

/// What one log holds.
struct Scan {
    /// The known error lines.
    hits: Vec<LogHit>,
    /// The component that wrote it, judged from its content.
    component: Component,
    /// Every time stamp seen.
    stamps: Vec<Stamp>,
    /// `Trace[…]` blocks and etcd's slow-request warnings.
    hops: Vec<PendingHop>,
}

/// The known error lines of one log, the component that wrote it (judged from its content),
/// every time stamp seen and the timed hops.
fn scan(text: &str, origin: &str) -> Scan {
    let mut votes: HashMap<Component, usize> = HashMap::new();
    let mut hits: Vec<LogHit> = Vec::new();
    let mut stamps: Vec<Stamp> = Vec::new();
    let mut hop_reader = HopReader::default();
    let mut current: (Option<Stamp>, Option<String>) = (None, None);
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        let message = match parse_log_line(line) {
            Some(parsed) => {
                stamps.extend(parsed.stamp);
                if written_by_etcd(
                    parsed.format,
                    parsed.source.as_deref(),
                    parsed.logger.as_deref(),
                ) {
                    *votes.entry(Component::Etcd).or_default() += 1;
                }
                hop_reader.etcd_line(&parsed, line);
                hop_reader.text(&parsed.message);
                current = (parsed.stamp, parsed.severity);
                parsed.message
            }
            None => {
                hop_reader.text(line);
                line.trim().to_string()
            }
        };
        if let Some(c) = marker_component(line) {
            *votes.entry(c).or_default() += 1;
        }
        for (pattern, fields) in match_message(&message) {
            if let Some(c) = pattern.component {
                *votes.entry(c).or_default() += 1;
            }
            hits.push(LogHit {
                pattern,
                component: pattern.component,
                severity: current.1.clone(),
                at: current.0,
                message: truncate(&message, 1024),
                fields,
                origin: origin.to_string(),
            });
        }
    }
    Scan {
        hits,
        component: winner(&votes),
        stamps,
        hops: hop_reader.finish(),
    }
}

/// The known error lines of a container's log read through the API (`pods/{name}/log`), folded
/// into findings as the raw importer folds them. `writer` is the component when the content does
/// not tell (the collector knows what the Pod serves); `now` gives klog's yearless times their
/// year; `b` maps names in the lines (webhooks, APIServices, CRDs) to its objects. `origin` names
/// the log (`pods/<namespace>/<name>/log`).
pub fn container_log_findings(
    text: &str,
    origin: &str,
    writer: Component,
    now: jiff::Timestamp,
    b: &EvidenceBundle,
) -> Vec<LogFinding> {
    let Scan {
        hits,
        component: judged,
        stamps,
        ..
    } = scan(text, origin);
    let component = if judged == Component::Unknown {
        writer
    } else {
        judged
    };
    let hits: Vec<LogHit> = hits
        .into_iter()
        .map(|mut h| {
            h.component = h.component.or(Some(component));
            h
        })
        .collect();
    fold_hits(&hits, &Clock::new(&stamps, now), b)
}

fn written_by_etcd(format: LogFormat, source: Option<&str>, logger: Option<&str>) -> bool {
    match format {
        LogFormat::Capnslog => true,
        LogFormat::Json => {
            logger == Some("raft")
                || source.is_some_and(|s| ETCD_CALLERS.iter().any(|p| s.starts_with(p)))
        }
        LogFormat::Klog | LogFormat::GoLog => false,
    }
}

/// The component with the most votes; a tie or no vote is `Unknown`.
fn winner(votes: &HashMap<Component, usize>) -> Component {
    let mut ranked: Vec<(Component, usize)> = votes.iter().map(|(c, n)| (*c, *n)).collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.1));
    match ranked.as_slice() {
        [] => Component::Unknown,
        [(c, _)] => *c,
        [(c, a), (_, b), ..] if a > b => *c,
        _ => Component::Unknown,
    }
}

fn component_name(c: Component) -> &'static str {
    match c {
        Component::KubeApiserver => "kube-apiserver",
        Component::ExtensionApiserver => "an extension API server",
        Component::Etcd => "etcd",
        Component::Webhook => "a webhook server",
        Component::Unknown => "an unidentified component",
    }
}

/// Content markers of the component that wrote a log line, beyond the patterns themselves.
const MARKERS: &[(&str, Component)] = &[
    ("available_controller.go", Component::KubeApiserver),
    ("handler_proxy.go", Component::KubeApiserver),
    ("OpenAPI AggregationController", Component::KubeApiserver),
    ("httputil: ReverseProxy", Component::KubeApiserver),
    ("quota admission added evaluator", Component::KubeApiserver),
    ("dispatcher.go:", Component::KubeApiserver),
    // Only kube-apiserver serves the core group and stores core types.
    ("URI=\"/api/", Component::KubeApiserver),
    ("url:/api/", Component::KubeApiserver),
    ("cacher *core.", Component::KubeApiserver),
    ("cacher (*core.", Component::KubeApiserver),
    (
        "extension-apiserver-authentication::",
        Component::ExtensionApiserver,
    ),
    (
        "RequestHeaderAuthRequestController",
        Component::ExtensionApiserver,
    ),
    ("requestheader_controller.go", Component::ExtensionApiserver),
];

/// The component a raw line points at by its markers, if any.
fn marker_component(line: &str) -> Option<Component> {
    MARKERS
        .iter()
        .find(|(m, _)| line.contains(m))
        .map(|(_, c)| *c)
}
