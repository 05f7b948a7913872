//! API Priority and Fairness, as far as a failure needs it: classification by FlowSchema, one seat
//! per request, per-priority-level concurrency limits and a queue, and the real rejection.
//!
//! Limits follow the objects in the store, like the real config controller: a Limited level's
//! nominal limit is `ceil(serverConcurrencyLimit × nominalConcurrencyShares / Σ shares)` (zero
//! shares, which flowcontrol v1 allows, is zero seats: borrowing is not modelled); with
//! `limitResponse.type: Reject` a request that finds no free seat is rejected (`concurrency-limit`),
//! with `Queue` it waits in one FIFO per level of `queueLengthLimit` (shuffle sharding is not
//! modelled: one flow fills one queue, which is what a flood from one user does), and a full queue
//! rejects (`queue-full`). A request whose deadline passes while queued is dropped by the request
//! timeout (504) and counted as `time-out`. Rejections are 429 `Too many requests, please try again
//! later.` with `Retry-After` and the PF UID headers, counted in
//! `apiserver_flowcontrol_rejected_requests_total` and `apiserver_request_terminations_total` (not
//! in `apiserver_request_total`, as the real captures show). The limit and seats-in-use gauges and
//! the wait buckets are the release's (`profile.rs`: `…_request_concurrency_limit` and
//! `…_request_concurrency_in_use` on 1.24, `…_nominal_limit_seats` and `…_current_executing_seats`
//! as well on 1.30).
//!
//! Classification is apiserver's `match.go`, written here apart from the collector's copy
//! (`collect/why/flow_match.rs`) on purpose — this server is the oracle `why` is tested against —
//! and held to the same answers by `tests/semantics/flow_schema.yaml`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::authn::UserInfo;
use super::metrics::{Desc, Registry};
use super::profile::Profile;
use super::request::RequestInfo;
use super::store::Store;

const REJECTED: Desc = Desc {
    name: "apiserver_flowcontrol_rejected_requests_total",
    help: "[BETA] Number of requests rejected by API Priority and Fairness subsystem",
    labels: &["flow_schema", "priority_level", "reason"],
};
const DISPATCHED: Desc = Desc {
    name: "apiserver_flowcontrol_dispatched_requests_total",
    help: "[BETA] Number of requests executed by API Priority and Fairness subsystem",
    labels: &["flow_schema", "priority_level"],
};
const INQUEUE: Desc = Desc {
    name: "apiserver_flowcontrol_current_inqueue_requests",
    help: "[BETA] Number of requests currently pending in queues of the API Priority and Fairness subsystem",
    labels: &["flow_schema", "priority_level"],
};
const EXECUTING: Desc = Desc {
    name: "apiserver_flowcontrol_current_executing_requests",
    help: "[BETA] Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API Priority and Fairness subsystem",
    labels: &["flow_schema", "priority_level"],
};
const WAIT: Desc = Desc {
    name: "apiserver_flowcontrol_request_wait_duration_seconds",
    help: "[BETA] Length of time a request spent waiting in its queue",
    labels: &["execute", "flow_schema", "priority_level"],
};
/// `apiserver_request_terminations_total`, shared with the aggregator and the timeout filter.
pub const TERMINATIONS: Desc = Desc {
    name: "apiserver_request_terminations_total",
    help: "Number of requests which apiserver terminated in self-defense.",
    labels: &[
        "code",
        "component",
        "group",
        "resource",
        "scope",
        "subresource",
        "verb",
        "version",
    ],
};
const DROPPED: Desc = Desc {
    name: "apiserver_dropped_requests_total",
    help: "[ALPHA] Number of requests dropped with 'Try again later' response. Use apiserver_request_total and/or apiserver_request_terminations_total metrics instead.",
    labels: &["request_kind"],
};

/// Record a termination (APF, timeout, aggregator).
pub fn record_termination(metrics: &Registry, info: &RequestInfo, code: u16, component: &str) {
    metrics.inc(
        &TERMINATIONS,
        &[
            &code.to_string(),
            component,
            &info.group,
            &info.resource,
            info.metric_scope(),
            &info.metric_subresource(),
            &info.metric_verb(),
            &info.version,
        ],
    );
}

struct Level {
    limit: u32,
    semaphore: Arc<Semaphore>,
    queued: u32,
}

/// The dispatcher.
pub struct Apf {
    server_limit: u32,
    levels: Mutex<HashMap<String, Level>>,
    /// The release's gauges of a level's nominal limit (`Profile::apf_limit_gauges`).
    limit_gauges: &'static [Desc],
    /// The release's gauges of the seats in use (`Profile::apf_seats_in_use_gauges`).
    seat_gauges: &'static [Desc],
    /// The release's buckets of the queue wait histogram.
    wait_buckets: &'static [f64],
}

/// Which FlowSchema and priority level a request belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classification {
    /// FlowSchema name.
    pub flow_schema: String,
    /// FlowSchema UID.
    pub flow_schema_uid: String,
    /// PriorityLevelConfiguration name.
    pub priority_level: String,
    /// PriorityLevelConfiguration UID.
    pub priority_level_uid: String,
}

/// A held seat; released on drop.
pub struct Seat {
    _permit: Option<OwnedSemaphorePermit>,
    release: Option<(Arc<Registry>, Classification, &'static [Desc])>,
    /// Classification, for response headers.
    pub class: Classification,
}

impl Drop for Seat {
    fn drop(&mut self) {
        if let Some((m, c, seat_gauges)) = &self.release {
            m.add(&EXECUTING, &[&c.flow_schema, &c.priority_level], -1.0);
            for g in seat_gauges.iter() {
                m.add(g, &[&c.flow_schema, &c.priority_level], -1.0);
            }
        }
    }
}

/// Why a request was not admitted.
#[derive(Debug, Clone)]
pub struct Rejection {
    /// Classification, for headers.
    pub class: Classification,
    /// `queue-full` or `concurrency-limit`.
    pub reason: &'static str,
}

fn matches_list(list: &Value, value: &str) -> bool {
    list.as_array()
        .is_some_and(|a| a.iter().any(|x| x == "*" || x.as_str() == Some(value)))
}

fn subject_matches(s: &Value, user: &UserInfo) -> bool {
    match s["kind"].as_str() {
        Some("User") => {
            let n = s
                .pointer("/user/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            n == "*" || n == user.name
        }
        Some("Group") => {
            let n = s
                .pointer("/group/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            n == "*" || user.groups.iter().any(|g| g == n)
        }
        Some("ServiceAccount") => {
            let ns = s
                .pointer("/serviceAccount/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            let n = s
                .pointer("/serviceAccount/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            // match.go's `matchesSubject` (serviceaccount.MatchesUsername): a ServiceAccount
            // subject is the user `system:serviceaccount:<ns>:<name>`, and name `*` stands for
            // every account of <ns>.
            user.name == format!("system:serviceaccount:{ns}:{n}")
                || (n == "*"
                    && user
                        .name
                        .starts_with(&format!("system:serviceaccount:{ns}:")))
        }
        _ => false,
    }
}

/// apiserver's `matchPolicyRuleNonResourceURL`: `*` matches everything, a pattern matches its
/// own path, and otherwise the pattern without a trailing `*` and with a trailing `/` is a prefix —
/// so `/healthz/*` matches `/healthz/etcd` but not `/healthz`, and `/healthz` also matches
/// `/healthz/etcd`. Written apart from the collector's copy on purpose (see `crate::semantics`);
/// `tests/semantics/flow_schema.yaml` holds both to the Go answers.
fn non_resource_url_matches(pattern: &str, path: &str) -> bool {
    if pattern == "*" || pattern == path {
        return true;
    }
    let prefix = pattern.strip_suffix('*').unwrap_or(pattern);
    if prefix.ends_with('/') {
        path.starts_with(prefix)
    } else {
        path.strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

fn rule_matches(rule: &Value, user: &UserInfo, info: &RequestInfo) -> bool {
    let subjects = rule["subjects"].as_array().cloned().unwrap_or_default();
    if !subjects.iter().any(|s| subject_matches(s, user)) {
        return false;
    }
    if info.is_resource {
        let resource = if info.subresource.is_empty() {
            info.resource.clone()
        } else {
            format!("{}/{}", info.resource, info.subresource)
        };
        rule["resourceRules"].as_array().is_some_and(|rs| {
            rs.iter().any(|r| {
                matches_list(&r["verbs"], &info.verb)
                    && matches_list(&r["apiGroups"], &info.group)
                    // Go's `rsJoin`: a subresource request is `pods/status`, not `pods`.
                    && matches_list(&r["resources"], &resource)
                    // match.go's `matchesResourcePolicyRule`: a request without a namespace matches
                    // only a rule with clusterScope true; `namespaces: ["*"]` covers every
                    // namespace but never cluster scope.
                    && if info.namespace.is_empty() {
                        r["clusterScope"].as_bool() == Some(true)
                    } else {
                        matches_list(&r["namespaces"], &info.namespace)
                    }
            })
        })
    } else {
        rule["nonResourceRules"].as_array().is_some_and(|rs| {
            rs.iter().any(|r| {
                matches_list(&r["verbs"], &info.verb)
                    && r["nonResourceURLs"].as_array().is_some_and(|u| {
                        u.iter()
                            .filter_map(Value::as_str)
                            .any(|p| non_resource_url_matches(p, &info.path))
                    })
            })
        })
    }
}

fn uid(v: &Value) -> String {
    v.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Whether one FlowSchema matches a request (apiserver's `matchesFlowSchema`: some rule whose
/// subjects include the user and whose resource or non-resource rules cover the request).
pub fn flow_schema_matches(fs: &Value, user: &UserInfo, info: &RequestInfo) -> bool {
    fs.pointer("/spec/rules")
        .and_then(Value::as_array)
        .is_some_and(|rules| rules.iter().any(|r| rule_matches(r, user, info)))
}

/// The FlowSchema that classifies a request: the first match in order of `matchingPrecedence`
/// (default 1000), ties broken by name (apiserver's `FlowSchemaSequence` order).
pub fn match_flow_schema<'v>(
    schemas: &'v [Value],
    user: &UserInfo,
    info: &RequestInfo,
) -> Option<&'v Value> {
    let key = |fs: &Value| {
        (
            fs.pointer("/spec/matchingPrecedence")
                .and_then(Value::as_i64)
                // flowcontrol v1 defaults matchingPrecedence to 1000.
                .unwrap_or(1000),
            fs.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )
    };
    let mut ordered: Vec<&Value> = schemas.iter().collect();
    ordered.sort_by_cached_key(|fs| key(fs));
    ordered
        .into_iter()
        .find(|fs| flow_schema_matches(fs, user, info))
}

impl Apf {
    /// A dispatcher for a server with `server_limit` seats, recording the families of `profile`'s
    /// release.
    pub fn new(server_limit: u32, profile: &Profile) -> Self {
        Apf {
            server_limit: server_limit.max(1),
            levels: Mutex::new(HashMap::new()),
            limit_gauges: profile.apf_limit_gauges(),
            seat_gauges: profile.apf_seats_in_use_gauges(),
            wait_buckets: profile.apf_wait_buckets(),
        }
    }

    /// Classify a request by the FlowSchemas in the store (lowest matchingPrecedence wins).
    pub fn classify(
        &self,
        store: &Store,
        user: &UserInfo,
        info: &RequestInfo,
    ) -> Option<(Classification, Value)> {
        let (schemas, _) = store.list("flowcontrol.apiserver.k8s.io", "flowschemas", None);
        let fs = match_flow_schema(&schemas, user, info)?;
        let pl_name = fs
            .pointer("/spec/priorityLevelConfiguration/name")
            .and_then(Value::as_str)?
            .to_string();
        let key = super::store::Key::new(
            "flowcontrol.apiserver.k8s.io",
            "prioritylevelconfigurations",
            "",
            &pl_name,
        );
        let pl = store.get(&key)?;
        Some((
            Classification {
                flow_schema: fs
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .into(),
                flow_schema_uid: uid(fs),
                priority_level: pl_name,
                priority_level_uid: uid(&pl),
            },
            pl,
        ))
    }

    fn nominal_limit(&self, store: &Store, pl: &Value) -> u32 {
        let (levels, _) = store.list(
            "flowcontrol.apiserver.k8s.io",
            "prioritylevelconfigurations",
            None,
        );
        let shares = |p: &Value| -> f64 {
            p.pointer("/spec/limited/nominalConcurrencyShares")
                .or_else(|| p.pointer("/spec/exempt/nominalConcurrencyShares"))
                .and_then(Value::as_f64)
                .unwrap_or(
                    if p.pointer("/spec/type").and_then(Value::as_str) == Some("Limited") {
                        // flowcontrol v1 defaults a Limited level's nominalConcurrencyShares to 30.
                        30.0
                    } else {
                        0.0
                    },
                )
        };
        let total: f64 = levels.iter().map(shares).sum();
        if total <= 0.0 {
            return self.server_limit;
        }
        // Any positive share rounds up to a seat; zero shares (allowed in flowcontrol v1) is zero.
        ((self.server_limit as f64) * shares(pl) / total).ceil() as u32
    }

    /// Admit a request: a seat, or a rejection. Waits in the queue when the level queues.
    pub async fn admit(
        &self,
        store: &Store,
        metrics: &Arc<Registry>,
        user: &UserInfo,
        info: &RequestInfo,
    ) -> Result<Seat, Rejection> {
        let Some((class, pl)) = self.classify(store, user, info) else {
            return Ok(Seat {
                _permit: None,
                release: None,
                class: Classification::default(),
            });
        };
        if pl.pointer("/spec/type").and_then(Value::as_str) != Some("Limited") {
            // Exempt requests take no seat, but kube-apiserver still counts them as dispatched
            // and executing (`flow_schema="exempt",priority_level="exempt"`): the APF families
            // exist on every server that has any client at all.
            return Ok(self.seat(metrics, class, None));
        }
        let limit = self.nominal_limit(store, &pl);
        for g in self.limit_gauges {
            metrics.set(g, &[&class.priority_level], limit as f64);
        }
        let labels = [class.flow_schema.as_str(), class.priority_level.as_str()];
        let queue_limit = pl
            .pointer("/spec/limited/limitResponse/queuing/queueLengthLimit")
            .and_then(Value::as_u64)
            // flowcontrol v1 defaults queuing.queueLengthLimit to 50.
            .unwrap_or(50) as u32;
        let queues = pl
            .pointer("/spec/limited/limitResponse/type")
            .and_then(Value::as_str)
            == Some("Queue");
        let semaphore = {
            let mut levels = self.levels.lock().unwrap_or_else(|e| e.into_inner());
            let level = levels
                .entry(class.priority_level.clone())
                .or_insert_with(|| Level {
                    limit,
                    semaphore: Arc::new(Semaphore::new(limit as usize)),
                    queued: 0,
                });
            if level.limit != limit {
                // The configuration changed: new seats for new requests; old holders drain.
                level.limit = limit;
                level.semaphore = Arc::new(Semaphore::new(limit as usize));
            }
            match level.semaphore.clone().try_acquire_owned() {
                Ok(permit) => {
                    drop(levels);
                    metrics.observe(
                        &WAIT,
                        self.wait_buckets,
                        &["true", labels[0], labels[1]],
                        0.0,
                    );
                    return Ok(self.seat(metrics, class, Some(permit)));
                }
                Err(_) if !queues => {
                    drop(levels);
                    return Err(self.reject(metrics, class, info, "concurrency-limit"));
                }
                Err(_) if level.queued >= queue_limit => {
                    drop(levels);
                    return Err(self.reject(metrics, class, info, "queue-full"));
                }
                Err(_) => {
                    level.queued += 1;
                    level.semaphore.clone()
                }
            }
        };
        metrics.add(&INQUEUE, &labels, 1.0);
        let mut waiting = QueuedGuard {
            apf: self,
            metrics: metrics.clone(),
            class: class.clone(),
            started: Instant::now(),
            done: false,
        };
        let permit = semaphore.acquire_owned().await.ok();
        waiting.finish();
        metrics.observe(
            &WAIT,
            self.wait_buckets,
            &["true", labels[0], labels[1]],
            waiting.started.elapsed().as_secs_f64(),
        );
        Ok(self.seat(metrics, class, permit))
    }

    fn seat(
        &self,
        metrics: &Arc<Registry>,
        class: Classification,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Seat {
        let labels = [class.flow_schema.as_str(), class.priority_level.as_str()];
        metrics.inc(&DISPATCHED, &labels);
        metrics.add(&EXECUTING, &labels, 1.0);
        for g in self.seat_gauges {
            metrics.add(g, &labels, 1.0);
        }
        Seat {
            _permit: permit,
            release: Some((metrics.clone(), class.clone(), self.seat_gauges)),
            class,
        }
    }

    fn reject(
        &self,
        metrics: &Registry,
        class: Classification,
        info: &RequestInfo,
        reason: &'static str,
    ) -> Rejection {
        metrics.inc(
            &REJECTED,
            &[&class.flow_schema, &class.priority_level, reason],
        );
        metrics.observe(
            &WAIT,
            self.wait_buckets,
            &["false", &class.flow_schema, &class.priority_level],
            0.0,
        );
        record_termination(metrics, info, 429, "apiserver");
        let kind = if matches!(info.verb.as_str(), "get" | "list" | "watch") || !info.is_resource {
            "readOnly"
        } else {
            "mutating"
        };
        metrics.inc(&DROPPED, &[kind]);
        Rejection { class, reason }
    }
}

/// Leaves the queue on completion or when the request is dropped by its deadline (`time-out`).
struct QueuedGuard<'a> {
    apf: &'a Apf,
    metrics: Arc<Registry>,
    class: Classification,
    started: Instant,
    done: bool,
}

impl QueuedGuard<'_> {
    fn finish(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        self.metrics.add(
            &INQUEUE,
            &[&self.class.flow_schema, &self.class.priority_level],
            -1.0,
        );
        let mut levels = self.apf.levels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = levels.get_mut(&self.class.priority_level) {
            l.queued = l.queued.saturating_sub(1);
        }
    }
}

impl Drop for QueuedGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.finish();
            let c = &self.class;
            self.metrics
                .inc(&REJECTED, &[&c.flow_schema, &c.priority_level, "time-out"]);
            self.metrics.observe(
                &WAIT,
                self.apf.wait_buckets,
                &["false", &c.flow_schema, &c.priority_level],
                self.started.elapsed().as_secs_f64(),
            );
        }
    }
}

/// The mandatory FlowSchemas and priority levels kube-apiserver always has (`exempt`, `catch-all`).
pub fn mandatory_objects() -> Vec<Value> {
    serde_json::from_str(r#"[
      {"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration","metadata":{"name":"exempt"},"spec":{"type":"Exempt","exempt":{"nominalConcurrencyShares":0,"lendablePercent":0}}},
      {"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"PriorityLevelConfiguration","metadata":{"name":"catch-all"},"spec":{"type":"Limited","limited":{"nominalConcurrencyShares":5,"lendablePercent":0,"limitResponse":{"type":"Reject"}}}},
      {"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema","metadata":{"name":"exempt"},"spec":{"priorityLevelConfiguration":{"name":"exempt"},"matchingPrecedence":1,"rules":[{"subjects":[{"kind":"Group","group":{"name":"system:masters"}}],"resourceRules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"],"clusterScope":true,"namespaces":["*"]}],"nonResourceRules":[{"verbs":["*"],"nonResourceURLs":["*"]}]}]}},
      {"apiVersion":"flowcontrol.apiserver.k8s.io/v1","kind":"FlowSchema","metadata":{"name":"catch-all"},"spec":{"priorityLevelConfiguration":{"name":"catch-all"},"matchingPrecedence":10000,"distinguisherMethod":{"type":"ByUser"},"rules":[{"subjects":[{"kind":"Group","group":{"name":"system:unauthenticated"}},{"kind":"Group","group":{"name":"system:authenticated"}}],"resourceRules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"],"clusterScope":true,"namespaces":["*"]}],"nonResourceRules":[{"verbs":["*"],"nonResourceURLs":["*"]}]}]}}
    ]"#).unwrap_or_default()
}
