//! The rungs a reproduced request passes, in the order kube-apiserver passes them, each with what
//! the evidence shows there: authentication, priority and fairness, authorization, then the path's
//! own rungs — the APIService, its Service, port, endpoints, TLS and availability for an aggregated
//! group, then the extension server's own authentication of the aggregator and its delegated
//! authorization of the user; the CRD, admission webhooks, conversion and storage for a custom resource; admission and
//! storage for a built-in one; the stream for a watch. The steps about the path's objects are built
//! in [`super::objects`].
//!
//! This only describes; it does not judge. Whether a rung broke is said by the engine's rules, which
//! [`super::ladder`] places on these steps. The one thing a step says on its own is whether its
//! evidence looks sound ([`Seen`]), so that a failed etcd check nobody's rule explains still shows.

use serde::Serialize;

use crate::bundle::probes::WatchEnd;
use crate::bundle::trace::{Addressed, Investigation, Serving, Trace};
use crate::bundle::{EvidenceBundle, MetricTarget, Probe, Rung};

use super::objects;
use crate::engine::diagnosis::{Component, Subject, SubjectKind};
use crate::engine::metrics_query::MetricsIndex;

/// What a step's evidence looks like, before any rule is consulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Sound evidence.
    Ok,
    /// Evidence of a problem.
    Bad,
    /// No evidence (not collected, or nothing to see).
    Unknown,
}

/// A rule that fired on a step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Rule id.
    pub rule: String,
    /// Its class.
    pub class: String,
    /// The subject whose verdict it belongs to.
    pub subject: String,
    /// Its summary.
    pub summary: String,
    /// It decided the request's verdict.
    pub decides: bool,
}

/// How a step went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    /// Evidence shows it works and no rule fired.
    Passed,
    /// A rule fired here.
    Failed,
    /// The evidence shows a problem no rule explains.
    Attention,
    /// The request broke at an earlier step.
    NotReached,
    /// Nothing to judge it by.
    Unknown,
}

/// One rung of the request's path.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// The rung.
    pub rung: Rung,
    /// Whose step it is: kube-apiserver's, or the extension API server's (an aggregated request
    /// is authenticated and authorized by both).
    pub component: Component,
    /// How it went.
    pub state: StepState,
    /// The object on this rung (`APIService/v1alpha1.wardle.example.com`), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// What the evidence shows.
    pub evidence: String,
    /// Further lines (webhooks left out by a selector, a backend's endpoints and TLS).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Rules that fired here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The evidence on its own.
    #[serde(skip)]
    pub seen: Seen,
    /// The subject whose verdict's findings land here.
    #[serde(skip)]
    pub subject: Option<Subject>,
}

impl Step {
    pub fn new(rung: Rung, seen: Seen, evidence: impl Into<String>) -> Step {
        Step {
            rung,
            component: Component::KubeApiserver,
            state: StepState::Unknown,
            object: None,
            evidence: evidence.into(),
            notes: Vec::new(),
            findings: Vec::new(),
            seen,
            subject: None,
        }
    }

    /// A step of the extension API server's.
    pub(super) fn in_extension(mut self) -> Step {
        self.component = Component::ExtensionApiserver;
        self
    }

    pub(super) fn about(mut self, kind: SubjectKind, name: &str, parent: Option<&str>) -> Step {
        self.object = Some(format!("{kind}/{name}"));
        self.subject = Some(Subject {
            kind,
            name: name.to_string(),
            namespace: None,
            parent: parent.map(str::to_string),
        });
        self
    }
}

/// `503 Service Unavailable`.
pub fn status_line(status: u16) -> String {
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    format!("{status} {reason}").trim_end().to_string()
}

/// The most telling error text of a response: the Status message, else the first body line.
fn message(p: &Probe) -> String {
    if let Some(s) = &p.status_body
        && !s.message.is_empty()
    {
        return s.message.clone();
    }
    if let Some(b) = &p.body {
        return b.lines().next().unwrap_or("").to_string();
    }
    p.error.clone().unwrap_or_default()
}

/// Authentication runs before APF and authorization (apiserver `DefaultBuildHandlerChain` in
/// `pkg/server/config.go`), so any answer but a 401 is read as having passed it.
fn authn(p: &Probe, trace: &Trace) -> Step {
    match p.status {
        Some(401) => Step::new(
            Rung::Authn,
            Seen::Bad,
            format!("401 Unauthorized: {}", message(p)),
        ),
        Some(_) => Step::new(
            Rung::Authn,
            Seen::Ok,
            match &trace.user {
                Some(u) => format!("authenticated as {} ({})", u.name, u.source),
                None => "authenticated (the answer is not a 401)".into(),
            },
        ),
        None => Step::new(Rung::Authn, Seen::Unknown, "no response"),
    }
}

fn flowcontrol(b: &EvidenceBundle, p: &Probe, trace: &Trace) -> Step {
    // The FlowSchema matched from the objects first (it says *why* it matched), else the one the
    // response's `X-Kubernetes-PF-FlowSchema-UID` names, else only the UID when the FlowSchemas
    // could not be listed: APF may be the one thing that rejected the list.
    let schema = match (&trace.flow_schema, &trace.flow_schema_from_header) {
        (Some(m), _) => format!(
            "FlowSchema {} (precedence {}; {})",
            m.name, m.precedence, m.reason
        ),
        (None, Some(h)) => format!("FlowSchema {h} (named by the response)"),
        (None, None) => match &p.headers.flow_schema_uid {
            Some(uid) => format!("FlowSchema with UID {uid} (the FlowSchemas could not be read)"),
            None if trace.user.is_none() => {
                "FlowSchema unknown (the user is not known and the response named none)".into()
            }
            None => "no FlowSchema matches".into(),
        },
    };
    let level_name = trace
        .flow_schema
        .as_ref()
        .map(|m| m.priority_level.clone())
        .or_else(|| {
            let uid = p.headers.priority_level_uid.as_deref()?;
            b.priority_levels
                .iter()
                .find(|l| l.uid == uid)
                .map(|l| l.name.clone())
        });
    let level = level_name.map(|n| match b.priority_levels.iter().find(|l| l.name == n) {
        Some(l) if l.type_ == "Exempt" => format!("PriorityLevel {n} (Exempt)"),
        Some(l) => {
            let mut t = format!("PriorityLevel {n} ({}", l.type_);
            if let Some(s) = l.concurrency_shares {
                t.push_str(&format!(", {s} share{}", if s == 1 { "" } else { "s" }));
            }
            if let Some(r) = &l.limit_response {
                t.push_str(&format!(", {r}"));
                if let (Some(q), Some(len)) = (l.queues, l.queue_length_limit) {
                    t.push_str(&format!(" {q}×{len}"));
                }
            }
            t + ")"
        }
        None => format!("PriorityLevel {n}"),
    });
    let mut text = match level {
        Some(l) => format!("{schema} → {l}"),
        None => schema,
    };
    if let (Some(m), Some(h)) = (&trace.flow_schema, &trace.flow_schema_from_header)
        && &m.name != h
    {
        text.push_str(&format!(
            "; the response names FlowSchema {h} (the user's groups may differ from those known here)"
        ));
    }
    let (seen, outcome) = match p.status {
        Some(429) => (
            Seen::Bad,
            format!(
                "rejected: 429{}",
                p.headers
                    .retry_after
                    .as_deref()
                    .map(|r| format!(", Retry-After {r}"))
                    .unwrap_or_default()
            ),
        ),
        // A 401 was refused by authentication before APF saw it.
        Some(401) | None => (Seen::Unknown, String::new()),
        Some(_) => (Seen::Ok, "dispatched".to_string()),
    };
    if !outcome.is_empty() {
        text.push_str(&format!("; {outcome}"));
    }
    Step::new(Rung::Flowcontrol, seen, text)
}

fn authz(p: &Probe, trace: &Trace) -> Step {
    let allowed = match &trace.addressed {
        Addressed::Resource(r) => {
            let what = if r.group.is_empty() {
                r.resource_with_subresource()
            } else {
                format!("{}.{}", r.resource_with_subresource(), r.group)
            };
            // `/api/v1/namespaces/<name>` carries the namespace's own name, not a scope.
            let scope = match &r.namespace {
                Some(ns) if r.resource != "namespaces" => format!(" in namespace {ns}"),
                _ => String::new(),
            };
            format!("allowed to {} {what}{scope}", trace.verb)
        }
        _ => "allowed".to_string(),
    };
    match p.status {
        Some(403) => Step::new(
            Rung::Authz,
            Seen::Bad,
            format!("403 Forbidden: {}", message(p)),
        ),
        // Refused by authentication or APF, which run before authorization: it was never asked.
        Some(401 | 429) | None => Step::new(Rung::Authz, Seen::Unknown, ""),
        Some(_) => Step::new(Rung::Authz, Seen::Ok, allowed),
    }
}

/// kube-apiserver's etcd, as its health checks and the latency around the request show it.
/// The `etcd` check is kube-apiserver's own client reaching etcd, the storage this request used;
/// etcd's own `/health` may be fine while that client is not. It is read from `/readyz`, else from
/// `/livez`: since 1.3x kube-apiserver's readyz has no etcd check (`etcd-readiness` aside), its
/// livez still has one — a step that said "readyz has no etcd check" beside a finding that livez's
/// etcd check fails read as a contradiction.
fn storage(b: &EvidenceBundle) -> Step {
    fn etcd_in(h: Option<&crate::bundle::HealthCheck>) -> Option<&crate::bundle::HealthCheckItem> {
        h.and_then(|h| h.checks.iter().find(|c| c.name == "etcd"))
    }
    use crate::bundle::observations::HealthEndpoint;
    let of = |e: HealthEndpoint| b.health_checks.iter().find(|h| h.endpoint == e);
    let readyz = of(HealthEndpoint::ApiserverReadyz);
    let check = etcd_in(readyz)
        .map(|c| ("readyz", c))
        .or_else(|| etcd_in(of(HealthEndpoint::ApiserverLivez)).map(|c| ("livez", c)));
    let (seen, text) = match check {
        Some((endpoint, c)) if c.ok => (Seen::Ok, format!("{endpoint}: etcd ok")),
        Some((endpoint, c)) => (
            Seen::Bad,
            format!(
                "{endpoint}: [-]etcd failed: {}",
                c.reason.as_deref().unwrap_or("")
            ),
        ),
        None => (
            Seen::Unknown,
            match readyz {
                Some(_) => "readyz has no etcd check".to_string(),
                None => "readyz not read".to_string(),
            },
        ),
    };
    let index = MetricsIndex::new(&b.metrics);
    let q = index.quantile(
        MetricTarget::Apiserver,
        &["etcd_request_duration_seconds".to_string()],
        &[],
        0.99,
        false,
    );
    let mut step = Step::new(Rung::Storage, seen, text);
    // Only over a window: `etcd_request_duration_seconds` is a histogram cumulative since start,
    // and a p99 of its lifetime says nothing about the moment of this request.
    // On a line of its own: a number's width must not move the wrapping of the prose around it.
    if q.present && q.windowed && q.count > 0.0 {
        step.notes.push(format!(
            "etcd request p99 {} over the window ({} requests)",
            crate::engine::functions::human_seconds(q.value),
            q.count
        ));
    }
    step
}

fn watch(p: &Probe) -> Step {
    let Some(w) = &p.watch else {
        return Step::new(Rung::Watch, Seen::Unknown, "no stream was opened");
    };
    let mut text = format!(
        "{} event{} ({} bookmark{})",
        w.events,
        if w.events == 1 { "" } else { "s" },
        w.bookmarks,
        if w.bookmarks == 1 { "" } else { "s" }
    );
    if let Some(e) = &w.error_event {
        text.push_str(&format!(
            "; ERROR event {} {}: {}",
            e.code.map(|c| c.to_string()).unwrap_or_default(),
            e.reason,
            e.message
        ));
    }
    if let Some(d) = &w.end_detail {
        text.push_str(&format!("; {d}"));
    }
    // A server that closes a watch cleanly (its `--min-request-timeout` jitter) is normal, and
    // clients re-watch; an ERROR event or a broken stream is not.
    let bad =
        w.error_event.is_some() || matches!(w.end, WatchEnd::Broken | WatchEnd::ClientTimeout);
    Step::new(Rung::Watch, if bad { Seen::Bad } else { Seen::Ok }, text)
}

/// The steps of an investigated request, in the order kube-apiserver passes them.
pub fn observe(inv: &Investigation) -> Vec<Step> {
    let b = &inv.bundle;
    let p = inv.probe();
    let trace = &inv.trace;
    let mut out = vec![authn(p, trace), flowcontrol(b, p, trace), authz(p, trace)];
    match trace.serving {
        // No storage step: kube-apiserver proxies an aggregated request to the extension server,
        // whose own storage (not kube-apiserver's etcd) answers it.
        Serving::Aggregated => {
            if let Some(a) = trace.api_service.as_deref().and_then(|n| b.api_service(n)) {
                out.extend(objects::aggregated(b, p, trace, a));
            }
        }
        Serving::CustomResource => {
            out.extend(objects::custom_resource(b, trace));
            out.push(storage(b));
        }
        Serving::BuiltIn if matches!(trace.addressed, Addressed::Resource(_)) => {
            if trace.method.is_write() {
                out.extend(objects::webhook_steps(b, trace));
            }
            out.push(storage(b));
        }
        Serving::Unregistered => {
            let gv = match &trace.addressed {
                Addressed::Resource(r) => r.group_version(),
                Addressed::Discovery { group, version } => match version {
                    Some(v) => format!("{group}/{v}"),
                    None => group.clone(),
                },
                Addressed::NonResource => String::new(),
            };
            out.push(Step::new(
                Rung::Registration,
                Seen::Bad,
                format!("no APIService serves {gv}: kube-apiserver cannot route the request"),
            ));
        }
        Serving::BuiltIn | Serving::NonResource | Serving::Unknown => {}
    }
    if p.watch.is_some() || trace.verb == "watch" {
        out.push(watch(p));
    }
    out
}
