//! Timed hops: work a server timed and wrote down, step by step, read from its log.
//!
//! Two writers: an API server's `Trace[…]` blocks (`k8s.io/utils/trace`, logged when a request, a
//! webhook call or a storage call took longer than its threshold — 500 ms for most), and etcd's
//! own `… took too long` warnings. They are the only evidence of a request that *succeeded
//! slowly*: a fail-open webhook answering in 8 s makes every write it intercepts take 8 s, and etcd
//! can be slow while every health check passes. One record per timed piece of work; what it means
//! is for the rules (`webhook.traced`, `etcd.traced`, `etcd.slow_requests` in `docs/facts.md`).
//!
//! This file owns the serialised shape only; reading logs is `raw/timed_hops.rs`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ObjectRef;
use super::observations::Component;

/// The layer of the extension path a hop, or a step of one, timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HopLayer {
    /// An API request as the REST handler saw it (`"Create" url:…`, `"List" url:…`): its time
    /// holds admission, storage and everything else below the handler. Its steps
    /// (`"Object stored in database"`, `"Listing from storage done"`) are the handler's view and
    /// are not storage: they include admission, and a list may be served from the watch cache.
    Request,
    /// A call to an admission webhook (`"Call validating webhook"`, `"Call mutating webhook"`),
    /// naming its configuration and webhook.
    Admission,
    /// A call to a CRD conversion webhook (`"Call conversion webhook"`).
    Conversion,
    /// A call of the API server's etcd3 storage client (`"List etcd3"`, `"GuaranteedUpdate
    /// etcd3"`, their `"Txn call …"` steps): the time etcd took, as its client saw it.
    Storage,
    /// etcd's own account of a request it served slowly (`apply request took too long`,
    /// `read-only range request … took too long`, `slow fdatasync`).
    Etcd,
    /// Any other timed work (the watch cache's `"cacher list"`, a trace without a request path).
    Other,
}

/// One step of a timed hop: a `---"<name>" <fields> <N>ms (<time>)` line of a trace, or a nested
/// trace (`["<name>" <fields> <N>ms (<time>)` … `]`), which later releases write for webhook and
/// storage calls inside a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HopStep {
    /// The step's name as written (`Call validating webhook`, `Txn call completed`).
    pub name: String,
    /// The layer it timed: its own when its name (or the webhook it names) says
    /// (`Call validating webhook`, `… etcd3`, `Txn call …`), else that of the nested trace or hop
    /// around it (a request's `"Object stored in database"` is `request`).
    pub layer: HopLayer,
    /// Its attributes as written (`webhook`, `configuration`, `operation`, `len`, `err`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
    /// How long it took in milliseconds: the time since the previous step (or since the hop
    /// started), which is what the trace prints for a step; a nested trace's own total.
    pub duration_ms: f64,
    /// Nesting depth: 0 for a step of the hop itself, 1 for a step of a nested trace, …
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
    /// The step is a nested trace (`[` … `]`), not a plain step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nested: bool,
    /// The object it concerns: the webhook a webhook call names, the CRD of a conversion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ObjectRef>,
    /// When a nested trace started (the time it prints, on the hop's date); none for a plain
    /// step, which prints when it ended. Tells which calls ran inside which: 1.36 prints an
    /// UPDATE's `["Call validating webhook" …]` beside its `["GuaranteedUpdate etcd3" …]`, not in
    /// it, though admission ran inside the update's retry loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<jiff::Timestamp>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One piece of work a server timed: a `Trace[…]` block with its steps, or one of etcd's `took
/// too long` warnings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TimedHop {
    /// Which process wrote it, judged from the log's content like log findings: kube-apiserver,
    /// an extension API server, etcd, or unknown. Only kube-apiserver's storage hops describe the
    /// etcd rules judge; an extension server's `"List etcd3"` is its own storage.
    pub component: Component,
    /// The layer the whole hop timed.
    pub layer: HopLayer,
    /// What was timed, as written: `Create`, `List etcd3`, `Call validating webhook`, `apply
    /// request took too long`.
    pub name: String,
    /// The HTTP verb of a request hop: its `verb` attribute, else told from the handler's name
    /// (`Create` → `POST`, `Update` → `PUT`, `List` → `LIST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// The request path (`url` attribute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The client's user agent (`user-agent` attribute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// The request's audit ID (`audit-id` attribute), which ties a storage or webhook trace to
    /// its request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_id: Option<String>,
    /// Every attribute as written: `key`, `type`, `resource`, `configuration`, `webhook`,
    /// `operation`, `UID`; for etcd `request`, `response`, `expected-duration`, `prefix`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fields: BTreeMap<String, String>,
    /// When the work started (the trace header's date), or when etcd wrote the warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<jiff::Timestamp>,
    /// How long it took in milliseconds: the trace's `END` line, else its `total time`; etcd's
    /// `took`.
    pub duration_ms: f64,
    /// The steps the trace printed, in order (a trace prints only the steps that took longer than
    /// their share of its threshold, so quick steps are absent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<HopStep>,
    /// The object the hop concerns: the webhook a webhook call names, the CRD of a conversion,
    /// the APIService whose group a request path or storage key addresses (an aggregated API's
    /// request or storage is never kube-apiserver's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ObjectRef>,
    /// The trace's `END` line was read; `false` for a block cut short (its time is the header's
    /// `total time`).
    #[serde(default)]
    pub complete: bool,
    /// The file it was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

/// One timed call a hop holds: the hop itself (a webhook call, a storage call, an etcd warning),
/// or a step of a hop that is a call of another layer (a nested `["Call validating webhook" …]`,
/// a `---"Call mutating webhook" …` step, a nested `["Create etcd3" …]` inside a request).
#[derive(Debug, Clone, Copy)]
pub struct TimedCall<'a> {
    /// The hop that holds it (for a step, the request around it).
    pub hop: &'a TimedHop,
    /// The step, when the call is a step of `hop`.
    pub step: Option<&'a HopStep>,
}

impl<'a> TimedCall<'a> {
    /// The call's name (`Call validating webhook`, `List etcd3`, `apply request took too long`).
    pub fn name(&self) -> &'a str {
        self.step.map_or(&self.hop.name, |s| &s.name)
    }
    /// The layer it timed.
    pub fn layer(&self) -> HopLayer {
        self.step.map_or(self.hop.layer, |s| s.layer)
    }
    /// Its attributes.
    pub fn fields(&self) -> &'a BTreeMap<String, String> {
        self.step.map_or(&self.hop.fields, |s| &s.fields)
    }
    /// How long it took, in milliseconds.
    pub fn duration_ms(&self) -> f64 {
        self.step.map_or(self.hop.duration_ms, |s| s.duration_ms)
    }
    /// The object it concerns.
    pub fn target(&self) -> Option<&'a ObjectRef> {
        match self.step {
            Some(s) => s.target.as_ref(),
            None => self.hop.target.as_ref(),
        }
    }

    /// How long the call itself took, in milliseconds; for a storage call, its time net of the
    /// webhook and conversion calls that ran inside it. kube-apiserver runs admission inside an update's
    /// retry loop, so an UPDATE's `"Call validating webhook"` runs inside its `"GuaranteedUpdate
    /// etcd3"`: that time is the webhook's, not storage's. For a nested trace, the other nested
    /// webhook and conversion traces of the same hop whose intervals lie within its own (1.36
    /// prints them beside it, with their start times), as a union (validating webhooks run in
    /// parallel); without start times, those nested one level down in it. A call that is a hop
    /// of its own is given as is: the caller tells which other hops ran inside it
    /// ([`contained_ms`]).
    pub fn own_ms(&self) -> f64 {
        let Some(s) = self.step else {
            return self.hop.duration_ms;
        };
        // Only storage holds other layers' calls; a webhook call's time is its own.
        if !s.nested || s.layer != HopLayer::Storage {
            return s.duration_ms;
        }
        let Some(at) = self.hop.steps.iter().position(|t| std::ptr::eq(t, s)) else {
            return s.duration_ms;
        };
        let is_call =
            |t: &HopStep| t.nested && matches!(t.layer, HopLayer::Admission | HopLayer::Conversion);
        let inner = match s.started_at {
            Some(start) => union_within(
                start,
                s.duration_ms,
                self.hop
                    .steps
                    .iter()
                    .filter(|t| is_call(t))
                    .filter_map(|t| Some((t.started_at?, t.duration_ms))),
            ),
            None => self.hop.steps[at + 1..]
                .iter()
                .take_while(|t| t.depth > s.depth)
                .filter(|t| t.depth == s.depth + 1 && is_call(t))
                .map(|t| t.duration_ms)
                .sum(),
        };
        (s.duration_ms - inner).max(0.0)
    }

    /// A call of kube-apiserver's own storage: a storage call kube-apiserver wrote (never an
    /// extension API server's, never one of an unknown writer) that concerns no aggregated API.
    pub fn is_apiserver_storage(&self) -> bool {
        self.layer() == HopLayer::Storage
            && self.hop.component == Component::KubeApiserver
            && self.hop.target.is_none()
            && self.target().is_none()
    }

    /// etcd's own warning of a slow request, of an etcd that serves no aggregated API's storage.
    pub fn is_etcd_warning(&self) -> bool {
        self.layer() == HopLayer::Etcd
            && self.hop.component == Component::Etcd
            && self.target().is_none()
    }

    /// A call to the webhook (or conversion webhook) `r`, whoever made it.
    pub fn is_call_to(&self, r: &ObjectRef) -> bool {
        matches!(self.layer(), HopLayer::Admission | HopLayer::Conversion)
            && self
                .target()
                .is_some_and(|t| t.kind == r.kind && t.name == r.name)
    }
}

impl TimedHop {
    /// The calls this hop holds: itself when it is a call (webhook, conversion, storage, etcd),
    /// and each step that is a call of another layer than the hop's — a nested trace, or a plain
    /// step at the top level. The inner steps of a call (`"Request completed"`, `"Txn call
    /// succeeded"` inside a storage call) are part of it, never calls of their own.
    pub fn calls(&self) -> impl Iterator<Item = TimedCall<'_>> {
        let own = matches!(
            self.layer,
            HopLayer::Admission | HopLayer::Conversion | HopLayer::Storage | HopLayer::Etcd
        )
        .then_some(TimedCall {
            hop: self,
            step: None,
        });
        let steps = self
            .steps
            .iter()
            .filter(move |s| {
                matches!(
                    s.layer,
                    HopLayer::Admission | HopLayer::Conversion | HopLayer::Storage
                ) && s.layer != self.layer
                    && (s.nested || s.depth == 0)
            })
            .map(move |s| TimedCall {
                hop: self,
                step: Some(s),
            });
        own.into_iter().chain(steps)
    }
}

/// How many milliseconds of `outer` (a hop of its own, e.g. 1.24's `"GuaranteedUpdate etcd3"`
/// block) the webhook and conversion calls among `hops` spent inside it: the length of the union
/// of their intervals that lie within `outer`'s (by their start dates and durations, with the
/// millisecond of the dates' precision as slack), kube-apiserver's only. 1.24 prints the
/// webhook calls of an update as blocks of their own, not nested, yet they ran inside the
/// update's storage call. A call with an audit ID is never counted against a storage call with
/// another one.
pub fn contained_ms(outer: &TimedHop, hops: &[TimedHop]) -> f64 {
    let Some(start) = outer.started_at else {
        return 0.0;
    };
    union_within(
        start,
        outer.duration_ms,
        hops.iter()
            .filter(|h| {
                h.component == Component::KubeApiserver
                    && matches!(h.layer, HopLayer::Admission | HopLayer::Conversion)
                    && match (&h.audit_id, &outer.audit_id) {
                        (Some(a), Some(b)) => a == b,
                        _ => true,
                    }
            })
            .filter_map(|h| Some((h.started_at?, h.duration_ms))),
    )
}

/// The length (ms) of the union of the `spans` (start, ms) that lie within the `outer_ms` from
/// `start`, with two milliseconds of slack each side for the dates' millisecond precision.
fn union_within(
    start: jiff::Timestamp,
    outer_ms: f64,
    spans: impl Iterator<Item = (jiff::Timestamp, f64)>,
) -> f64 {
    const SLACK_MS: f64 = 2.0;
    let mut spans: Vec<(f64, f64)> = spans
        .filter_map(|(at, ms)| {
            let from = at.duration_since(start).as_secs_f64() * 1000.0;
            let to = from + ms;
            (from >= -SLACK_MS && to <= outer_ms + SLACK_MS)
                .then_some((from.max(0.0), to.min(outer_ms)))
        })
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (a, b) in spans {
        match current {
            Some((ca, cb)) if a <= cb => current = Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                total += cb - ca;
                current = Some((a, b));
            }
            None => current = Some((a, b)),
        }
    }
    if let Some((a, b)) = current {
        total += b - a;
    }
    total.max(0.0)
}
