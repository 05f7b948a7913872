//! Cluster-wide facts (`cluster`, `apiserver`, `etcd`, `settings`) and the APF objects
//! (`flowschema`, `prioritylevel`).
//!
//! These are built once per analysis and visible to every rule, whatever its subject: a rule about an
//! APIService may rule Storage out because `etcd.readyz_check.ok`, and a Request rule may ask whether
//! `apiserver.readyz` failed.

use super::value::Fact;

use super::FactBase;
use super::value::{Obj, list, strings};
use crate::bundle::observations::{Component, HealthCheck, HealthEndpoint};
use crate::bundle::{CollectionSource, FlowSchema, MetricTarget, PriorityLevel, TimeBasis};
use crate::engine::settings::Settings;

/// The `--window` of [`cluster_fact`]'s `rescan`: long enough for a few calls of a quiet client
/// (a controller's resync, a webhook on occasional writes) to land between the two scrapes.
const RESCAN_WINDOW: &str = "30s";

/// `settings`: every setting by name.
pub fn settings_fact(s: &Settings) -> Fact {
    let mut o = Obj::new();
    for (k, v) in s.iter() {
        o = o.f(k, v);
    }
    o.build()
}

/// What a rule may conclude from one target's metrics: counters are cumulative since the process
/// started, so only a `windowed` source (two scrapes) says what happened *recently*; a rule that
/// needs a rate checks `windowed` rather than reading a lifetime total as current.
fn metrics_source_fact(base: &FactBase<'_>, t: MetricTarget) -> Fact {
    let s = base.bundle.metrics_for(t);
    Obj::new()
        .b("present", s.is_some())
        .b("windowed", s.is_some_and(|s| s.window.is_some()))
        .f(
            "window_seconds",
            s.and_then(|s| s.window.as_ref())
                .map_or(0.0, |w| w.seconds()),
        )
        .i("families", s.map_or(0, |s| s.families.len() as i64))
        .s(
            "scraped_at",
            s.and_then(|s| s.scraped_at)
                .map(|t| t.to_string())
                .unwrap_or_default(),
        )
        .build()
}

/// `cluster`: collection facts, metrics availability, gaps.
pub fn cluster_fact(base: &FactBase<'_>) -> Fact {
    let b = base.bundle;
    let c = &b.collection;
    // 0.0 for an unknown version (`known` says which), so a `minor >= 34` test (the EndpointSlice
    // switch, REFERENCE.md §2.1) reads an unknown version as pre-1.34, as `super::backend` does.
    let (major, minor) = c
        .server_version
        .as_ref()
        .and_then(|v| v.major_minor())
        .unwrap_or((0, 0));
    // What "now" means for time checks (certificate expiry, ages): the collector's clock for a
    // live scan, else the latest date the evidence carries. A rule that judges an expiry at
    // `import` time may be judging a file weeks after the incident, so it can say so.
    let basis = match c.collected_at_basis {
        Some(TimeBasis::Clock) => "clock",
        Some(TimeBasis::Evidence) => "evidence",
        Some(TimeBasis::Import) => "import",
        Some(TimeBasis::Recording) => "recording",
        None => "",
    };
    let source = match c.source {
        CollectionSource::Live { .. } => "live",
        CollectionSource::Raw { .. } => "raw",
        CollectionSource::Unknown => "unknown",
    };
    // The re-run an undecided verdict names when only history (one scrape, one dump) spoke: a scan
    // of the same cluster whose two scrapes give the counters an increase. A raw import keeps one
    // dump per process, so its re-run is a scan too.
    let rescan = match &c.source {
        CollectionSource::Live {
            context: Some(ctx), ..
        } => format!("kubectl extpath scan --context {ctx} --window {RESCAN_WINDOW}"),
        _ => format!("kubectl extpath scan --window {RESCAN_WINDOW}"),
    };
    // Gaps are evidence too: a rule checks `gap_sources` before reading an absence as "none"
    // (no Endpoints listed because the list was forbidden is not "no endpoints").
    let gaps = list(b.gaps.iter().map(|g| {
        Obj::new()
            .s("source", g.source.clone())
            .s(
                "reason",
                serde_json::to_value(g.reason)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            )
            .s("detail", g.detail.clone())
            .build()
    }));
    // Counts of what the bundle holds: with `gaps`, they tell an empty list from a missing one.
    let objects = Obj::new()
        .i("apiservices", b.api_services.len() as i64)
        .i("services", b.services.len() as i64)
        .i("endpoints", b.endpoints.len() as i64)
        .i("endpoint_slices", b.endpoint_slices.len() as i64)
        .i("pods", b.pods.len() as i64)
        .i("webhooks", b.webhooks.len() as i64)
        .i("crds", b.crds.len() as i64)
        .i("flow_schemas", b.flow_schemas.len() as i64)
        .i("priority_levels", b.priority_levels.len() as i64)
        .i("certificates", b.certificates.len() as i64)
        .i("probes", b.probes.len() as i64)
        .i("log_findings", b.log_findings.len() as i64)
        .build();
    Obj::new()
        .s(
            "collected_at",
            base.at.map(|t| t.to_string()).unwrap_or_default(),
        )
        .b("time_known", base.at.is_some())
        .s("collected_at_basis", basis)
        .s("source", source)
        .s("rescan", rescan)
        .v(
            "server_version",
            Obj::new()
                .b("known", c.server_version.is_some())
                .s(
                    "git_version",
                    c.server_version
                        .as_ref()
                        .map(|v| v.git_version.clone())
                        .unwrap_or_default(),
                )
                .i("major", major.into())
                .i("minor", minor.into())
                .build(),
        )
        .v(
            "metrics",
            Obj::new()
                .v(
                    "apiserver",
                    metrics_source_fact(base, MetricTarget::Apiserver),
                )
                .v("etcd", metrics_source_fact(base, MetricTarget::Etcd))
                .v(
                    "extension",
                    metrics_source_fact(base, MetricTarget::Extension),
                )
                .build(),
        )
        .v("gaps", gaps)
        .v(
            "gap_sources",
            strings(b.gaps.iter().map(|g| g.source.clone())),
        )
        // How many APIServices have a backend: a listing from an extension server can be tied to
        // an APIService only when this is 1 (see [`extension_health_fact`]).
        .i(
            "remote_apiservices",
            b.api_services.iter().filter(|a| !a.is_local()).count() as i64,
        )
        .v("objects", objects)
        .build()
}

/// A `/readyz?verbose`-style listing: `[+]name ok` / `[-]name failed: reason` lines, read as
/// `passed` and `failed` check names so that rules can ask for one check (`etcd`,
/// `poststarthook/...`) without parsing the listing.
pub fn health_fact(h: Option<&HealthCheck>) -> Fact {
    let checks = h.map(|h| h.checks.as_slice()).unwrap_or(&[]);
    Obj::new()
        .b("present", h.is_some())
        .b("ok", h.is_some_and(|h| h.ok))
        .s("error", h.and_then(|h| h.error.clone()).unwrap_or_default())
        .v(
            "failed",
            strings(checks.iter().filter(|c| !c.ok).map(|c| c.name.clone())),
        )
        .v(
            "passed",
            strings(checks.iter().filter(|c| c.ok).map(|c| c.name.clone())),
        )
        .v(
            "checks",
            list(checks.iter().map(|c| {
                Obj::new()
                    .s("name", c.name.clone())
                    .b("ok", c.ok)
                    .s("reason", c.reason.clone().unwrap_or_default())
                    .build()
            })),
        )
        .s(
            "origin",
            h.and_then(|h| h.origin.clone()).unwrap_or_default(),
        )
        .build()
}

/// kube-apiserver's own answer of an endpoint. Listings of other servers (an extension API server
/// whose `[-]etcd` is its own storage, a listing whose owner is unknown) are not kube-apiserver's
/// health: two listings that disagree are two servers, not a contradiction to settle.
fn health<'b>(base: &FactBase<'b>, e: HealthEndpoint) -> Option<&'b HealthCheck> {
    owned_health(base, Component::KubeApiserver, &[e])
}

/// The answer of the first of `endpoints` that server `owner` gave; of several answers of one
/// endpoint (files taken at different moments), a failing one: a check that failed once during
/// collection is evidence of a flapping dependency, while a later pass does not undo it.
pub fn owned_health<'b>(
    base: &FactBase<'b>,
    owner: Component,
    endpoints: &[HealthEndpoint],
) -> Option<&'b HealthCheck> {
    endpoints.iter().find_map(|e| {
        let all: Vec<&HealthCheck> = base
            .bundle
            .health_checks
            .iter()
            .filter(|h| h.endpoint == *e && h.owner() == owner)
            .collect();
        all.iter().find(|h| !h.ok).or_else(|| all.first()).copied()
    })
}

/// The health of the extension API server behind APIService `name`: the listings an extension
/// server gave, when they can be tied to this APIService — the bundle has one remote APIService
/// (a listing does not name its server's group).
pub fn extension_health_fact(base: &FactBase<'_>, apiservice: &str) -> Fact {
    let h = (base.sole_remote == Some(apiservice))
        .then(|| {
            owned_health(
                base,
                Component::ExtensionApiserver,
                &[
                    HealthEndpoint::ApiserverReadyz,
                    HealthEndpoint::ApiserverLivez,
                    HealthEndpoint::ApiserverHealthz,
                ],
            )
        })
        .flatten();
    health_fact(h)
}

fn logs_of(base: &FactBase<'_>, c: Option<Component>) -> Fact {
    list(
        base.bundle
            .log_findings
            .iter()
            .zip(&base.log_facts)
            .filter(|(l, _)| c.is_none_or(|c| l.component == c))
            .map(|(_, f)| f.clone()),
    )
}

/// `apiserver`: kube-apiserver as a whole. Its logs and the extension servers' are kept apart:
/// an extension server's `[-]etcd` or "Unable to authenticate" line is about that server, and a
/// rule that read it as kube-apiserver's would blame the wrong layer.
pub fn apiserver_fact(base: &FactBase<'_>) -> Fact {
    // The failing requests of the whole bundle, for rules about the API server itself that no
    // one request's subject owns (e.g. `auth-webhook-authorizer-failing`: 500s from the
    // authorization webhook, on requests tied to no object).
    let failing: Vec<Fact> = base
        .bundle
        .probes
        .iter()
        .zip(&base.request_facts)
        .filter(|(p, _)| crate::engine::subjects::is_failing_on_path(&base.apiserver_addresses, p))
        .map(|(_, f)| f.clone())
        .collect();
    Obj::new()
        .b("present", true)
        .v(
            "readyz",
            health_fact(health(base, HealthEndpoint::ApiserverReadyz)),
        )
        .v(
            "livez",
            health_fact(health(base, HealthEndpoint::ApiserverLivez)),
        )
        .v(
            "healthz",
            health_fact(health(base, HealthEndpoint::ApiserverHealthz)),
        )
        .v("logs", logs_of(base, Some(Component::KubeApiserver)))
        .v(
            "extension_logs",
            logs_of(base, Some(Component::ExtensionApiserver)),
        )
        .v("all_logs", logs_of(base, None))
        .v("traced", super::timed::apiserver_requests(base.bundle))
        .v("observations", list(base.request_facts.iter().cloned()))
        .v("failing", list(failing))
        .v(
            "metrics",
            metrics_source_fact(base, MetricTarget::Apiserver),
        )
        .build()
}

fn check_item(base: &FactBase<'_>, e: HealthEndpoint, name: &str) -> Fact {
    let item = health(base, e).and_then(|h| h.checks.iter().find(|c| c.name == name));
    Obj::new()
        .b("present", item.is_some())
        .b("ok", item.is_some_and(|c| c.ok))
        .s(
            "reason",
            item.and_then(|c| c.reason.clone()).unwrap_or_default(),
        )
        .build()
}

/// `etcd`: etcd as kube-apiserver's storage.
pub fn etcd_fact(base: &FactBase<'_>) -> Fact {
    Obj::new()
        .b("present", true)
        .v(
            "health",
            // etcd's own `/health` (or `etcdctl endpoint health`), else its own readyz.
            health_fact(owned_health(
                base,
                Component::Etcd,
                &[HealthEndpoint::EtcdHealth, HealthEndpoint::ApiserverReadyz],
            )),
        )
        // kube-apiserver's own `etcd` check says whether *its* client reaches etcd, which may
        // differ from etcd's own health (a wrong client certificate, a partitioned node): a rule
        // ruling Storage out reads this one.
        .v(
            "readyz_check",
            check_item(base, HealthEndpoint::ApiserverReadyz, "etcd"),
        )
        .v(
            "livez_check",
            check_item(base, HealthEndpoint::ApiserverLivez, "etcd"),
        )
        .v(
            "alarms",
            // `etcdctl alarm list` / the gateway's alarm list: `NOSPACE`, `CORRUPT` (the alarm
            // types of etcd's `AlarmType`). NOSPACE turns writes into `mvcc: database space
            // exceeded` until the alarm is disarmed.
            strings(
                base.bundle
                    .health_checks
                    .iter()
                    .filter(|h| h.owner() == Component::Etcd)
                    .flat_map(|h| h.checks.iter())
                    .filter(|c| !c.ok)
                    .filter_map(|c| c.name.strip_prefix("alarm ").map(str::to_string)),
            ),
        )
        .v("logs", logs_of(base, Some(Component::Etcd)))
        .v("traced", super::timed::apiserver_storage(base.bundle))
        .v("slow_requests", super::timed::etcd_warnings(base.bundle))
        .v("metrics", metrics_source_fact(base, MetricTarget::Etcd))
        .build()
}

/// `flowschema`: an APF FlowSchema.
pub fn flowschema_fact(base: &FactBase<'_>, f: Option<&FlowSchema>) -> Fact {
    let d = FlowSchema::default();
    let x = f.unwrap_or(&d);
    // Requests a FlowSchema matches are limited by its level; an Exempt level is never queued
    // or rejected, so no APF rule may blame a FlowSchema that points at one.
    let level = base
        .bundle
        .priority_levels
        .iter()
        .find(|p| f.is_some() && p.name == x.priority_level);
    Obj::new()
        .b("present", f.is_some())
        .s("name", x.name.clone())
        .s("uid", x.uid.clone())
        .s("api_version", x.api_version.clone())
        .s("priority_level", x.priority_level.clone())
        .i("matching_precedence", x.matching_precedence.into())
        .s("distinguisher", x.distinguisher.clone().unwrap_or_default())
        // The APF config controller sets `Dangling=True` when the FlowSchema names a priority level
        // that does not exist; a rule must not blame a level that is not there.
        .b(
            "dangling",
            x.conditions
                .iter()
                .any(|c| c.type_ == "Dangling" && c.status == "True"),
        )
        .b("exempt", level.is_some_and(|l| l.type_ == "Exempt"))
        .build()
}

/// `prioritylevel`: an APF PriorityLevelConfiguration with its debug-dump state.
pub fn prioritylevel_fact(base: &FactBase<'_>, p: Option<&PriorityLevel>) -> Fact {
    let d = PriorityLevel::default();
    let x = p.unwrap_or(&d);
    // The queue state comes from the `/debug/api_priority_and_fairness/dump_priority_levels`
    // dump, matched by level name; without it, `state.present` is false and rules judge from the
    // configuration and metrics only.
    let state = base
        .bundle
        .apf_state
        .iter()
        .find(|s| p.is_some() && s.priority_level == x.name);
    let schemas: Vec<String> = base
        .bundle
        .flow_schemas
        .iter()
        .filter(|f| p.is_some() && f.priority_level == x.name)
        .map(|f| f.name.clone())
        .collect();
    Obj::new()
        .b("present", p.is_some())
        .s("name", x.name.clone())
        .s("uid", x.uid.clone())
        .s("api_version", x.api_version.clone())
        .s("type", x.type_.clone())
        .b("exempt", x.type_ == "Exempt")
        .i(
            "concurrency_shares",
            x.concurrency_shares.unwrap_or(0).into(),
        )
        .i("lendable_percent", x.lendable_percent.unwrap_or(0).into())
        .s(
            "limit_response",
            x.limit_response.clone().unwrap_or_default(),
        )
        // Queuing parameters exist only with `limitResponse: Queue`; with `Reject` a request
        // that finds no seat is refused at once, so 0 here means "no queue".
        .i("queues", x.queues.unwrap_or(0).into())
        .i("hand_size", x.hand_size.unwrap_or(0).into())
        .i(
            "queue_length_limit",
            x.queue_length_limit.unwrap_or(0).into(),
        )
        .v("flow_schemas", strings(schemas))
        .v(
            "state",
            Obj::new()
                .b("present", state.is_some())
                .i("waiting", state.map_or(0, |s| s.waiting_requests as i64))
                .i(
                    "executing",
                    state.map_or(0, |s| s.executing_requests as i64),
                )
                .i("active_queues", state.map_or(0, |s| s.active_queues as i64))
                .i(
                    "pending_in_queues",
                    state.and_then(|s| s.pending_in_queues).unwrap_or(0) as i64,
                )
                .build(),
        )
        .build()
}
