//! Facts about observed requests and log findings.
//!
//! A request fact merges the observations of one request (kubectl stderr, its `-v6` trace, a curl of
//! the same URL): the most telling status (the first failing one), every status seen with counts,
//! the Kubernetes `Status` reason/message/causes, every error text (transport error, body, Status
//! message and causes, in-stream watch error — the inner errors docs/diagnosis.md#rule-8 says to classify on),
//! the headers that matter (Retry-After, the APF UIDs) and the watch outcome. Rules mostly read
//! `request.text`, all error texts joined by newlines, with `contains`/`matches`.

use super::value::Fact;

use super::value::{Obj, int_map, list, or_shared_absent, string_map, strings};
use crate::bundle::observations::Component;
use crate::bundle::probes::{ClientTool, ProbeKind, WatchEnd, WatchOutcome};
use crate::bundle::{LogFinding, ObjectRef, Probe};
use crate::engine::subjects::request_gvr;

fn tool_name(t: ClientTool) -> &'static str {
    match t {
        ClientTool::Extpath => "extpath",
        ClientTool::Kubectl => "kubectl",
        ClientTool::KubectlTrace => "kubectl_trace",
        ClientTool::Curl => "curl",
        ClientTool::Controller => "controller",
        ClientTool::Other => "other",
    }
}

fn watch_end(e: WatchEnd) -> &'static str {
    match e {
        WatchEnd::Closed => "closed",
        WatchEnd::Broken => "broken",
        WatchEnd::ClientTimeout => "client_timeout",
        WatchEnd::Unknown => "unknown",
    }
}

/// `target` sub-fact: the object a request or log line concerns.
pub fn ref_fact(r: Option<&ObjectRef>) -> Fact {
    static ABSENT: std::sync::OnceLock<Fact> = std::sync::OnceLock::new();
    or_shared_absent(&ABSENT, r, build_ref_fact)
}

fn build_ref_fact(r: Option<&ObjectRef>) -> Fact {
    Obj::new()
        .b("present", r.is_some())
        .s("kind", r.map_or("", |r| r.kind.as_str()))
        .s("name", r.map(|r| r.name.clone()).unwrap_or_default())
        .s(
            "namespace",
            r.and_then(|r| r.namespace.clone()).unwrap_or_default(),
        )
        .build()
}

/// The `groupVersion` of a discovery document (`APIResourceList`), from its body. Bodies are kept
/// to 2048 bytes when raw files are imported (`bundle::raw` `truncate`), so a long list does not
/// parse as JSON; Go writes `groupVersion` before `resources`, so a plain scan still finds it in
/// the kept prefix. `aggregation-discovery-wrong-group-version` compares it with the APIService: a
/// 200 from a server that serves another group is a wiring fault, not an outage.
fn discovery_group_version(body: &str) -> String {
    let trimmed = body.trim_start();
    if trimmed.starts_with('{')
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(trimmed)
        && let Some(gv) = v.get("groupVersion").and_then(|x| x.as_str())
    {
        return gv.to_string();
    }
    let key = "\"groupVersion\"";
    let Some(i) = body.find(key) else {
        return String::new();
    };
    let rest = body[i + key.len()..]
        .trim_start()
        .trim_start_matches(':')
        .trim_start();
    rest.strip_prefix('"')
        .and_then(|r| r.split('"').next())
        .unwrap_or("")
        .to_string()
}

fn first<'a, T, F: Fn(&'a Probe) -> Option<T>>(probes: &[&'a Probe], f: F) -> Option<T> {
    probes.iter().find_map(|p| f(p))
}

/// `request`: the merged observations of one request. `name` is the subject name (or a description
/// of the single observation), `target` the object it concerns when known.
pub fn request_fact(probes: &[&Probe], target: Option<&ObjectRef>, name: &str) -> Fact {
    // Observations of one request disagree when it flaps or when client-go retried (a 429 then a
    // 200): the failing status is the one there is something to diagnose, so it wins over the
    // first one seen; `statuses` and `status_counts` keep the rest for rules on mixed outcomes.
    let status = probes
        .iter()
        .filter_map(|p| p.status)
        .find(|s| *s >= 400)
        .or_else(|| first(probes, |p| p.status));
    let mut statuses: Vec<i64> = probes
        .iter()
        .filter_map(|p| p.status)
        .map(i64::from)
        .collect();
    statuses.sort();
    statuses.dedup();
    // A flood record carries its own per-status counts; a plain record stands for `attempts`
    // identical tries with its one status. Summing both keeps "1964 × 429, 60 × 200" exact when a
    // flood record and single probes of the same request are merged.
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    for p in probes {
        if p.status_counts.is_empty() {
            if let Some(s) = p.status {
                *counts.entry(s.to_string()).or_default() += u64::from(p.attempts);
            }
        } else {
            for (k, v) in &p.status_counts {
                *counts.entry(k.clone()).or_default() += v;
            }
        }
    }
    let body_status = probes
        .iter()
        .filter_map(|p| p.status_body.as_ref())
        .find(|b| !b.reason.is_empty() || !b.message.is_empty());
    // Deduplicated, in the order of the observations: kubectl stderr and its `-v6` trace repeat
    // the same message, which a `count` of matches must not see twice.
    let mut texts: Vec<String> = Vec::new();
    for p in probes {
        for t in p.error_texts() {
            if !texts.iter().any(|x| x == t) {
                texts.push(t.to_string());
            }
        }
    }
    let causes: Vec<Fact> = probes
        .iter()
        .filter_map(|p| p.status_body.as_ref())
        .flat_map(|b| b.causes.iter())
        .map(|c| {
            Obj::new()
                .s("reason", c.reason.clone())
                .s("message", c.message.clone())
                .s("field", c.field.clone())
                .build()
        })
        .collect();
    // Of several watch outcomes, the most informative: one with an in-stream ERROR event (e.g.
    // `410 Gone` "too old resource version"), else one whose end is known.
    let watch = probes
        .iter()
        .filter_map(|p| p.watch.as_ref())
        .max_by_key(|w| (w.error_event.is_some(), w.end != WatchEnd::Unknown));
    // client-go sends `watch=true`, hand-written curls often `watch=1`; the API server reads both
    // as true, so either marks a watch even when no outcome was recorded.
    let is_watch = watch.is_some()
        || probes.iter().any(|p| {
            p.path
                .as_deref()
                .is_some_and(|x| x.contains("watch=1") || x.contains("watch=true"))
        });
    // The group/version/resource come from the first observation that has a path: kubectl's
    // bare stderr line (`Error from server (ServiceUnavailable): …`) carries none, its `-v6`
    // trace does.
    let rep = probes
        .iter()
        .find(|p| p.path.is_some())
        .or_else(|| probes.first())
        .copied();
    let (group, version, resource) = rep.map(request_gvr).unwrap_or_default();
    let path = first(probes, |p| p.path.clone()).unwrap_or_default();
    let header = |f: fn(&Probe) -> Option<String>| first(probes, f).unwrap_or_default();
    let flow_schema_uid = header(|p| p.headers.flow_schema_uid.clone());
    let priority_level_uid = header(|p| p.headers.priority_level_uid.clone());
    // Same rule as `status`: a non-zero exit from any observation is the one that matters.
    let exit_code = probes
        .iter()
        .filter_map(|p| p.exit_code)
        .find(|c| *c != 0)
        .or_else(|| first(probes, |p| p.exit_code));
    // The slowest observation: latency rules look for a request that came near a deadline (a
    // webhook's `timeoutSeconds`, the 60 s request timeout), which the fastest retry would hide.
    let latency = probes
        .iter()
        .filter_map(|p| p.latency_ms)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let body = first(probes, |p| p.body.clone()).unwrap_or_default();
    let mut files: Vec<String> = probes.iter().flat_map(|p| p.origin.files.clone()).collect();
    files.dedup();
    let watch_fact = watch_fact(watch);
    // A request extpath sent itself is controlled evidence (known identity, known time); one read
    // from a person's client output is what they saw; rules tell them apart (`o.from == 'probe'`).
    let from = if probes.iter().any(|p| p.origin.kind == ProbeKind::Probe) {
        "probe"
    } else {
        "client_output"
    };
    Obj::new()
        .s("name", name)
        .s(
            "method",
            first(probes, |p| p.method.clone()).unwrap_or_default(),
        )
        .s("path", path.split('?').next().unwrap_or("").to_string())
        .s(
            "query",
            path.split_once('?').map(|x| x.1).unwrap_or("").to_string(),
        )
        .s(
            "description",
            first(probes, |p| p.description.clone()).unwrap_or_default(),
        )
        .s(
            "user",
            first(probes, |p| p.user.clone()).unwrap_or_default(),
        )
        .s(
            "tool",
            probes
                .first()
                .map(|p| tool_name(p.origin.tool))
                .unwrap_or(""),
        )
        .v(
            "tools",
            strings({
                let mut t: Vec<&str> = probes.iter().map(|p| tool_name(p.origin.tool)).collect();
                t.dedup();
                t
            }),
        )
        .s("from", from)
        .v("files", strings(files))
        .i("observations", probes.len() as i64)
        .i("status", status.map_or(0, i64::from))
        .b("status_known", status.is_some())
        .v("statuses", list(statuses.into_iter().map(Fact::int)))
        .v("status_counts", int_map(&counts))
        .s(
            "reason",
            body_status.map(|b| b.reason.clone()).unwrap_or_default(),
        )
        .s(
            "message",
            body_status.map(|b| b.message.clone()).unwrap_or_default(),
        )
        .v("causes", list(causes))
        .s("body", body.clone())
        .s(
            "error",
            first(probes, |p| p.error.clone()).unwrap_or_default(),
        )
        .s("text", texts.join("\n"))
        .v("texts", strings(texts))
        .i("exit_code", exit_code.map_or(0, i64::from))
        .b("exit_code_known", exit_code.is_some())
        .i(
            "attempts",
            probes.iter().map(|p| i64::from(p.attempts)).sum::<i64>(),
        )
        .f("latency_ms", latency.unwrap_or(0.0))
        .b("latency_known", latency.is_some())
        // `Retry-After` comes with a 429 (APF, max-in-flight, a shutting-down server) and tells
        // clients when to retry; client-go honours it, which is how one rejection becomes many
        // attempts.
        .s("retry_after", header(|p| p.headers.retry_after.clone()))
        .s("flow_schema_uid", flow_schema_uid.clone())
        .s("priority_level_uid", priority_level_uid.clone())
        // APF puts `X-Kubernetes-PF-FlowSchema-UID` / `-PriorityLevel-UID` on the responses it
        // classified (REFERENCE.md §2.3): on a 429 they tell APF from max-in-flight, which sends
        // the same `Too many requests` text without them.
        .b(
            "apf_headers",
            !flow_schema_uid.is_empty() || !priority_level_uid.is_empty(),
        )
        .s("audit_id", header(|p| p.headers.audit_id.clone()))
        .s("content_type", header(|p| p.headers.content_type.clone()))
        .b("is_watch", is_watch)
        .v("watch", watch_fact)
        .s(
            "rung",
            first(probes, |p| p.rung.map(|r| r.as_str().to_string())).unwrap_or_default(),
        )
        .s("group", group)
        .s("version", version)
        .s("resource", resource)
        .v("target", ref_fact(target))
        .s(
            "address",
            first(probes, |p| p.address.clone()).unwrap_or_default(),
        )
        .b("reproduced", probes.iter().any(|p| p.reproduced))
        // The webhooks a write is sent to, as `why` matched their rules and selectors: a rule
        // about a failed write looks among these for the webhook to blame.
        .v(
            "admitted_by",
            list({
                let mut refs: Vec<&ObjectRef> =
                    probes.iter().flat_map(|p| &p.admitted_by).collect();
                refs.dedup();
                refs.into_iter()
                    .map(|r| {
                        Obj::new()
                            .s("kind", r.kind.as_str())
                            .s("name", r.name.clone())
                            .build()
                    })
                    .collect::<Vec<_>>()
            }),
        )
        .s(
            "discovery_group_version",
            first(probes, |p| p.discovery_group_version.clone())
                .unwrap_or_else(|| discovery_group_version(&body)),
        )
        .build()
}

/// `request.watch`.
fn watch_fact(watch: Option<&WatchOutcome>) -> Fact {
    static ABSENT: std::sync::OnceLock<Fact> = std::sync::OnceLock::new();
    or_shared_absent(&ABSENT, watch, build_watch_fact)
}

fn build_watch_fact(watch: Option<&WatchOutcome>) -> Fact {
    Obj::new()
        .b("present", watch.is_some())
        .i("events", watch.map_or(0, |w| w.events as i64))
        .i("bookmarks", watch.map_or(0, |w| w.bookmarks as i64))
        .s("end", watch.map_or("", |w| watch_end(w.end)))
        .s(
            "end_detail",
            watch.and_then(|w| w.end_detail.clone()).unwrap_or_default(),
        )
        .i(
            "error_code",
            watch
                .and_then(|w| w.error_event.as_ref())
                .and_then(|e| e.code)
                .map_or(0, i64::from),
        )
        .s(
            "error_reason",
            watch
                .and_then(|w| w.error_event.as_ref())
                .map(|e| e.reason.clone())
                .unwrap_or_default(),
        )
        .s(
            "error_message",
            watch
                .and_then(|w| w.error_event.as_ref())
                .map(|e| e.message.clone())
                .unwrap_or_default(),
        )
        .f(
            "duration_seconds",
            watch.and_then(|w| w.duration_seconds).unwrap_or(0.0),
        )
        .build()
}

/// The snake_case name of a log component.
pub fn component_name(c: Component) -> &'static str {
    match c {
        Component::KubeApiserver => "kube_apiserver",
        Component::ExtensionApiserver => "extension_apiserver",
        Component::Etcd => "etcd",
        Component::Webhook => "webhook",
        Component::Unknown => "unknown",
    }
}

/// A log finding.
pub fn log_fact(l: &LogFinding) -> Fact {
    Obj::new()
        .s("pattern", l.pattern.clone())
        .s("component", component_name(l.component))
        .s("severity", l.severity.clone().unwrap_or_default())
        .i("count", l.count as i64)
        .s("message", l.message.clone())
        .v("fields", string_map(l.fields.iter()))
        .v("target", ref_fact(l.target.as_ref()))
        .s(
            "first_seen",
            l.first_seen.map(|t| t.to_string()).unwrap_or_default(),
        )
        .s(
            "last_seen",
            l.last_seen.map(|t| t.to_string()).unwrap_or_default(),
        )
        .s("origin", l.origin.clone().unwrap_or_default())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_documents_name_their_group_version() {
        assert_eq!(
            discovery_group_version(r#"{"kind":"APIResourceList","groupVersion":"a.io/v1"}"#),
            "a.io/v1"
        );
        assert_eq!(
            discovery_group_version(
                r#"{"kind":"APIResourceList","groupVersion": "b.io/v2", "resources": [ {"#
            ),
            "b.io/v2"
        );
        assert_eq!(discovery_group_version("service unavailable"), "");
    }
}
