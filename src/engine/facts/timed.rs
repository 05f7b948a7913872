//! Timed hops as facts: the *timed* summaries `webhook.traced`, `etcd.traced`,
//! `etcd.slow_requests` and `apiserver.traced` (documented in `docs/facts.md`).
//!
//! Which calls belong to what is the bundle's rule ([`crate::bundle::TimedCall`]): a webhook's are
//! the calls that name it, whoever made them; etcd's are kube-apiserver's own storage calls (never
//! an extension API server's, never one that concerns an aggregated API) and etcd's own `took too
//! long` warnings. This module only turns them into values: a list of *hop*s, slowest first, with
//! the numbers a rule compares (count, slowest, median) and a text for people.

use std::collections::HashMap;

use super::value::Fact;

use super::value::{Obj, list, string_map};
use crate::bundle::hops::contained_ms;
use crate::bundle::observations::Component;
use crate::bundle::{EvidenceBundle, HopLayer, Kind, ObjectRef, TimedCall};
use crate::engine::functions::human_seconds;

fn layer_name(l: HopLayer) -> &'static str {
    match l {
        HopLayer::Request => "request",
        HopLayer::Admission => "admission",
        HopLayer::Conversion => "conversion",
        HopLayer::Storage => "storage",
        HopLayer::Etcd => "etcd",
        HopLayer::Other => "other",
    }
}

fn component_name(c: Component) -> &'static str {
    match c {
        Component::KubeApiserver => "kube_apiserver",
        Component::ExtensionApiserver => "extension_apiserver",
        Component::Etcd => "etcd",
        Component::Webhook => "webhook",
        Component::Unknown => "unknown",
    }
}

/// What a call was about, in a few words: a webhook call's operation and resource, a storage
/// call's key, etcd's request.
fn detail(c: &TimedCall<'_>) -> String {
    let f = c.fields();
    let get = |k: &str| f.get(k).map(String::as_str).unwrap_or_default();
    match c.layer() {
        HopLayer::Admission | HopLayer::Conversion => {
            let parts: Vec<&str> = [get("operation"), get("resource"), get("subresource")]
                .into_iter()
                .filter(|p| !p.is_empty())
                .collect();
            parts.join(" ")
        }
        HopLayer::Storage => get("key").to_string(),
        HopLayer::Etcd => get("request").trim().to_string(),
        HopLayer::Request | HopLayer::Other => c.hop.path.clone().unwrap_or_default(),
    }
}

/// A *hop*: one timed call that took `ms`.
fn hop_fact(c: &TimedCall<'_>, ms: f64) -> Fact {
    let h = c.hop;
    let target = c.target();
    Obj::new()
        .s("name", c.name())
        .s("detail", detail(c))
        .s("layer", layer_name(c.layer()))
        .f("seconds", ms / 1000.0)
        .s(
            "at",
            h.started_at.map(|t| t.to_string()).unwrap_or_default(),
        )
        .s("component", component_name(h.component))
        .v("fields", string_map(c.fields()))
        .v(
            "request",
            Obj::new()
                .s("name", h.name.clone())
                .s("verb", h.verb.clone().unwrap_or_default())
                .s("path", h.path.clone().unwrap_or_default())
                .s("user_agent", h.user_agent.clone().unwrap_or_default())
                .s("audit_id", h.audit_id.clone().unwrap_or_default())
                .f("seconds", h.duration_ms / 1000.0)
                .build(),
        )
        .v(
            "target",
            Obj::new()
                .b("present", target.is_some())
                .s("kind", target.map_or("", |t| t.kind.as_str()))
                .s("name", target.map(|t| t.name.clone()).unwrap_or_default())
                .build(),
        )
        .s("origin", h.origin.clone().unwrap_or_default())
        .build()
}

/// A *timed* lists at most this many hops (the slowest); `count` and the numbers are over all.
pub const MAX_HOPS_SHOWN: usize = 20;

/// A *timed*: the calls, slowest first, and their numbers.
pub fn timed_fact(calls: &[TimedCall<'_>]) -> Fact {
    timed_fact_of(calls.iter().map(|c| (*c, c.duration_ms())).collect())
}

/// A *timed* of calls each with the milliseconds it counts for.
fn timed_fact_of(mut calls: Vec<(TimedCall<'_>, f64)>) -> Fact {
    calls.sort_by(|a, b| b.1.total_cmp(&a.1));
    let seconds: Vec<f64> = calls.iter().map(|c| c.1 / 1000.0).collect();
    let max = seconds.first().copied().unwrap_or(0.0);
    let median = match seconds.len() {
        0 => 0.0,
        n if n % 2 == 1 => seconds[n / 2],
        n => (seconds[n / 2 - 1] + seconds[n / 2]) / 2.0,
    };
    let shown: Vec<String> = seconds.iter().take(5).map(|s| human_seconds(*s)).collect();
    let text = match seconds.len() {
        0 => "none traced".to_string(),
        1 => format!("{} (1 traced)", shown.join(", ")),
        n if n <= 5 => format!("{} ({n} traced)", shown.join(", ")),
        n => format!("{}, … ({n} traced)", shown.join(", ")),
    };
    Obj::new()
        .b("present", !calls.is_empty())
        .i("count", calls.len() as i64)
        .f("max_seconds", max)
        .f("median_seconds", median)
        .v("seconds", list(seconds.iter().map(|s| Fact::float(*s))))
        .v(
            "hops",
            list(
                calls
                    .iter()
                    .take(MAX_HOPS_SHOWN)
                    .map(|(c, ms)| hop_fact(c, *ms)),
            ),
        )
        .s("text", text)
        .build()
}

/// The timed facts of every webhook and conversion webhook the hops name, by `(kind, name)`.
pub fn by_target(b: &EvidenceBundle) -> HashMap<(Kind, String), Fact> {
    let mut calls: HashMap<(Kind, String), Vec<TimedCall<'_>>> = HashMap::new();
    for h in &b.timed_hops {
        for c in h.calls() {
            if !matches!(c.layer(), HopLayer::Admission | HopLayer::Conversion) {
                continue;
            }
            if let Some(t) = c.target() {
                calls
                    .entry((t.kind.clone(), t.name.clone()))
                    .or_default()
                    .push(c);
            }
        }
    }
    calls
        .into_iter()
        .map(|(k, v)| (k, timed_fact(&v)))
        .collect()
}

/// The timed fact of one object, from [`by_target`]; an empty one when nothing named it.
pub fn of(index: &HashMap<(Kind, String), Fact>, r: Option<&ObjectRef>) -> Fact {
    r.and_then(|r| index.get(&(r.kind.clone(), r.name.clone())))
        .cloned()
        .unwrap_or_else(|| timed_fact(&[]))
}

/// kube-apiserver's own storage calls (`etcd.traced`), each counted for its own time: net of
/// the webhook and conversion calls that ran inside it (an UPDATE's admission runs inside its
/// `GuaranteedUpdate etcd3`; a slow webhook is not slow storage) — nested in it (1.27+), or
/// blocks of their own within its interval (1.24).
pub fn apiserver_storage(b: &EvidenceBundle) -> Fact {
    let calls: Vec<(TimedCall<'_>, f64)> = b
        .timed_hops
        .iter()
        .flat_map(|h| h.calls())
        .filter(TimedCall::is_apiserver_storage)
        .map(|c| {
            let own = match c.step {
                Some(_) => c.own_ms(),
                None => (c.hop.duration_ms - contained_ms(c.hop, &b.timed_hops)).max(0.0),
            };
            (c, own)
        })
        .collect();
    timed_fact_of(calls)
}

/// etcd's own slow-request warnings (`etcd.slow_requests`).
pub fn etcd_warnings(b: &EvidenceBundle) -> Fact {
    let calls: Vec<TimedCall<'_>> = b
        .timed_hops
        .iter()
        .flat_map(|h| h.calls())
        .filter(TimedCall::is_etcd_warning)
        .collect();
    timed_fact(&calls)
}

/// kube-apiserver's own request traces (`apiserver.traced`): requests it served slowly, whatever
/// layer the time went to; never a request to an aggregated API (the extension's).
pub fn apiserver_requests(b: &EvidenceBundle) -> Fact {
    let calls: Vec<TimedCall<'_>> = b
        .timed_hops
        .iter()
        .filter(|h| {
            h.layer == HopLayer::Request
                && h.component == Component::KubeApiserver
                && h.target.is_none()
        })
        .map(|h| TimedCall { hop: h, step: None })
        .collect();
    timed_fact(&calls)
}
