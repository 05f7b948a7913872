//! Assembly: what happens once every file is read.
//!
//! In order: one metrics source per target; lone curl parts of one request joined by file stem;
//! the collection time taken from the evidence and every klog time resolved against it; identical
//! probes folded into one with `attempts`; an on-call's request of etcd's own `/health` read as
//! etcd's health check (or a gap, when it got no answer); probes, log findings and timed hops mapped to the
//! objects they concern; supplied leaf certificates verified at the collection time; and gaps recorded for the
//! evidence a diagnosis usually wants but that was not supplied.

use std::collections::BTreeMap;
use std::path::PathBuf;

use jiff::Timestamp;

use crate::bundle::{
    EvidenceBundle, Gap, GapReason, HopLayer, Kind, LogFinding, MetricTarget, ObjectRef, Probe,
    TimeBasis,
};

use super::state::{CurlPart, Importer, LogHit, PendingProbe, truncate};
use super::targets::{hop_target, log_target, probe_target, webhook_ref, webhooks_named};
use super::timeline::Clock;
use super::{cert_check, kube_objects, metrics_dump};

/// Turn what was read into the bundle.
pub(crate) fn assemble(mut imp: Importer, now: Timestamp) -> EvidenceBundle {
    kube_objects::add_all(&mut imp);
    metrics_dump::choose(&mut imp);
    // Pair before folding: the parts of one curl request are one observation, not three.
    let mut pending = pair_curl_parts(std::mem::take(&mut imp.probes));
    // Controllers' Warning Events that report a failed request are observations of it.
    for e in &imp.bundle.events {
        for p in super::events::probes_from_event(e) {
            let at = p.at.map(super::timeline::Stamp::Full);
            let mut pending_probe = PendingProbe::new(p);
            pending_probe.at = at;
            pending.push(pending_probe);
        }
    }

    // Every time the evidence carries is known now, so klog times can be given their year.
    let clock = Clock::new(&imp.stamps, now);
    // The latest time any piece of evidence carries is when the capture ended, and so the time
    // the diagnosis judges at (DESIGN §2: expiry at collection time). The import's own clock is
    // only the fallback, and says so in the basis, because a bundle is often analysed days later.
    let collected_at = imp.stamps.iter().filter_map(|s| clock.resolve(*s)).max();
    let at = collected_at.unwrap_or(now);
    imp.bundle.collection.collected_at = Some(at);
    imp.bundle.collection.collected_at_basis = Some(if collected_at.is_some() {
        TimeBasis::Evidence
    } else {
        TimeBasis::Import
    });

    let mut probes: Vec<(Probe, Option<String>)> = Vec::new();
    for p in pending {
        let mut probe = p.probe;
        probe.at = p.at.and_then(|s| clock.resolve(s));
        fold_into(&mut probes, probe, p.object_group_version);
    }
    // Targets are mapped last: they need every object (webhooks by name, FlowSchemas by UID).
    for (mut probe, gv) in probes {
        if let Some(health) = etcd_health(&probe) {
            match health {
                Ok(check) => imp.bundle.health_checks.push(check),
                Err(gap) => imp.bundle.gaps.push(gap),
            }
            continue;
        }
        if probe.attempts > 1
            && probe.status_counts.is_empty()
            && let Some(code) = probe.status
        {
            probe
                .status_counts
                .insert(code.to_string(), u64::from(probe.attempts));
        }
        probe.error = probe.error.map(|e| truncate(&e, 2048));
        probe.target = probe_target(&probe, gv.as_deref(), &imp.bundle);
        imp.bundle.probes.push(probe);
    }

    let findings = fold_log_hits(&imp, &clock);
    imp.bundle.log_findings = findings;
    timed_hops(&mut imp, &clock);
    imp.bundle.apf_state = std::mem::take(&mut imp.apf.levels);
    // Certificates are judged at the collection time, never at import or analysis time.
    cert_check::verify_supplied_leaves(&mut imp, at);
    not_supplied_gaps(&mut imp.bundle);
    imp.bundle
}

/// An on-call's request of etcd's own `/health` (`curl -v http://<etcd>:2379/health`): a health
/// check of etcd, as `scan --etcd-metrics-url` reads it, not a request through the API server —
/// no API server serves `/health` (kube-apiserver and every generic API server serve `/healthz`,
/// `/livez` and `/readyz`). Its answer is the check; no answer is a `health/etcd` gap with curl's
/// words, as a scan records a `/health` that does not answer in time. `None` for other requests.
fn etcd_health(p: &Probe) -> Option<Result<crate::bundle::HealthCheck, Gap>> {
    use crate::bundle::observations::{Component, HealthEndpoint};
    let path = p.path.as_deref()?.split('?').next()?;
    if path != "/health" {
        return None;
    }
    let origin = p.origin.files.first().cloned();
    let answer = p
        .body
        .as_deref()
        .and_then(|b| serde_json::from_str::<serde_json::Value>(b).ok());
    let Some(answer) = answer.filter(|v| v.get("health").is_some_and(|h| h.is_string())) else {
        let why = p.error.clone().unwrap_or_else(|| match p.status {
            Some(code) => format!("HTTP {code} without a health document"),
            None => "no answer".to_string(),
        });
        let reason = if p.status.is_some() {
            GapReason::Error
        } else if why.contains("(28)") || why.contains("timed out") {
            GapReason::Timeout
        } else {
            GapReason::Unreachable
        };
        let file = origin.map(|f| format!(" ({f})")).unwrap_or_default();
        return Some(Err(Gap::new(
            "health/etcd",
            reason,
            format!("etcd's /health{file}: {why}"),
        )));
    };
    let ok = answer["health"] == "true";
    let reason = answer
        .get("reason")
        .and_then(serde_json::Value::as_str)
        .filter(|r| !r.is_empty());
    Some(Ok(crate::bundle::HealthCheck {
        endpoint: HealthEndpoint::EtcdHealth,
        ok,
        checks: Vec::new(),
        error: (!ok).then(|| reason.unwrap_or("etcd reported health false").to_string()),
        target: p.address.clone(),
        origin,
        component: Some(Component::Etcd),
    }))
}

/// Join lone curl parts (headers, body, `-w` status line) of one directory and file stem.
fn pair_curl_parts(probes: Vec<PendingProbe>) -> Vec<PendingProbe> {
    let mut out: Vec<PendingProbe> = Vec::new();
    // (directory, stem) → index in `out` of the joined probe, and the parts it holds.
    let mut groups: Vec<((PathBuf, String), usize, Vec<CurlPart>)> = Vec::new();
    for p in probes {
        if let Some((part, dir, stem)) = p.curl_part.clone() {
            let key = (dir, stem);
            // A part the group already holds starts a new group: two header files of one stem
            // are two responses, and merging them would lose one.
            if let Some(g) = groups
                .iter_mut()
                .find(|g| g.0 == key && !g.2.contains(&part))
            {
                merge_part(&mut out[g.1], p, part);
                g.2.push(part);
                continue;
            }
            groups.push((key, out.len(), vec![part]));
        }
        out.push(p);
    }
    out
}

fn merge_part(base: &mut PendingProbe, other: PendingProbe, part: CurlPart) {
    let b = &mut base.probe;
    let o = other.probe;
    if part == CurlPart::Headers {
        // The headers file is the response itself: its status and tool win.
        b.origin.tool = o.origin.tool;
        b.status = o.status.or(b.status);
    }
    b.status = b.status.or(o.status);
    b.method = b.method.take().or(o.method);
    b.path = b.path.take().or(o.path);
    b.latency_ms = b.latency_ms.or(o.latency_ms);
    b.body = b.body.take().or(o.body);
    b.status_body = b.status_body.take().or(o.status_body);
    b.user = b.user.take().or(o.user);
    b.error = b.error.take().or(o.error);
    b.exit_code = b.exit_code.or(o.exit_code);
    let h = &mut b.headers;
    let oh = o.headers;
    h.retry_after = h.retry_after.take().or(oh.retry_after);
    h.flow_schema_uid = h.flow_schema_uid.take().or(oh.flow_schema_uid);
    h.priority_level_uid = h.priority_level_uid.take().or(oh.priority_level_uid);
    h.audit_id = h.audit_id.take().or(oh.audit_id);
    h.content_type = h.content_type.take().or(oh.content_type);
    h.date = h.date.take().or(oh.date);
    for f in o.origin.files {
        if !b.origin.files.contains(&f) {
            b.origin.files.push(f);
        }
    }
    base.at = base.at.or(other.at);
}

/// The probe with what may differ between identical attempts cleared: timing, identity of the
/// attempt (Audit-Id, Date) and where it was read. What remains is the outcome.
fn outcome_of(p: &Probe) -> Probe {
    let mut o = p.clone();
    o.attempts = 1;
    o.status_counts.clear();
    o.latency_ms = None;
    o.at = None;
    o.origin.files.clear();
    o.headers.audit_id = None;
    o.headers.date = None;
    o
}

/// Fold `p` into an identical earlier probe (attempts and status counts add up, the slowest
/// latency and the latest time are kept), or append it.
fn fold_into(folded: &mut Vec<(Probe, Option<String>)>, p: Probe, gv: Option<String>) {
    // The object group/version is part of the key: one outcome against two versions of a group
    // (a conversion failing for v1 only) is two observations that map to different targets.
    let key = outcome_of(&p);
    let Some((f, _)) = folded
        .iter_mut()
        .find(|(f, fgv)| *fgv == gv && outcome_of(f) == key)
    else {
        folded.push((p, gv));
        return;
    };
    let counts = |q: &Probe| -> BTreeMap<String, u64> {
        if !q.status_counts.is_empty() {
            return q.status_counts.clone();
        }
        q.status
            .map(|c| BTreeMap::from([(c.to_string(), u64::from(q.attempts))]))
            .unwrap_or_default()
    };
    let mut merged = counts(f);
    for (k, v) in counts(&p) {
        *merged.entry(k).or_default() += v;
    }
    f.status_counts = merged;
    f.attempts = f.attempts.saturating_add(p.attempts);
    f.latency_ms = match (f.latency_ms, p.latency_ms) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    f.at = f.at.max(p.at);
    for file in p.origin.files {
        if !f.origin.files.contains(&file) {
            f.origin.files.push(file);
        }
    }
}

/// One finding per pattern, component, file and target: a log repeating one error 60 times is one
/// fact with a count and a time span, which is what a rule needs.
fn fold_log_hits(imp: &Importer, clock: &Clock) -> Vec<LogFinding> {
    fold_hits(&imp.log_hits, clock, &imp.bundle)
}

/// Fold hits by pattern, component, origin and target (the objects of `b` name the targets).
pub(crate) fn fold_hits(hits: &[LogHit], clock: &Clock, b: &EvidenceBundle) -> Vec<LogFinding> {
    let mut out: Vec<LogFinding> = Vec::new();
    for h in hits {
        let target = log_target(&h.fields, b);
        let component = h
            .component
            .unwrap_or(crate::bundle::observations::Component::Unknown);
        let at = h.at.and_then(|s| clock.resolve(s));
        let existing = out.iter_mut().find(|f| {
            f.pattern == h.pattern.id
                && f.component == component
                && f.origin.as_deref() == Some(h.origin.as_str())
                && f.target == target
        });
        match existing {
            Some(f) => {
                f.count += 1;
                f.first_seen = match (f.first_seen, at) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                f.last_seen = f.last_seen.max(at);
            }
            None => out.push(LogFinding {
                pattern: h.pattern.id.to_string(),
                component,
                severity: h.severity.clone(),
                first_seen: at,
                last_seen: at,
                count: 1,
                message: h.message.clone(),
                fields: h.fields.clone(),
                target,
                origin: Some(h.origin.clone()),
            }),
        }
    }
    out
}

/// A bundle keeps at most this many timed hops: the slowest (a day of a busy kube-apiserver's
/// log holds many thousands of traces; the slow ones are the evidence).
const MAX_TIMED_HOPS: usize = 5000;

/// Timed hops, their times resolved and their targets mapped (the objects are all known now).
fn timed_hops(imp: &mut Importer, clock: &Clock) {
    let mut hops: Vec<crate::bundle::TimedHop> = std::mem::take(&mut imp.hops)
        .into_iter()
        .map(|p| {
            let mut hop = p.hop;
            hop.started_at = hop
                .started_at
                .or_else(|| p.at.and_then(|s| clock.resolve(s)));
            hop.target = hop_target(hop.layer, &hop.fields, hop.path.as_deref(), &imp.bundle);
            for step in &mut hop.steps {
                if matches!(
                    step.layer,
                    HopLayer::Admission | HopLayer::Conversion | HopLayer::Storage
                ) {
                    step.target = hop_target(step.layer, &step.fields, None, &imp.bundle);
                }
            }
            hop
        })
        .collect();
    if hops.len() > MAX_TIMED_HOPS {
        let dropped = hops.len() - MAX_TIMED_HOPS;
        let mut order: Vec<usize> = (0..hops.len()).collect();
        order.sort_by(|&a, &b| hops[b].duration_ms.total_cmp(&hops[a].duration_ms));
        let keep: std::collections::HashSet<usize> =
            order.into_iter().take(MAX_TIMED_HOPS).collect();
        hops = hops
            .into_iter()
            .enumerate()
            .filter(|(i, _)| keep.contains(i))
            .map(|(_, h)| h)
            .collect();
        imp.bundle.gaps.push(Gap::new(
            "timed_hops",
            GapReason::Skipped,
            format!(
                "{dropped} more timed hops were read and not kept: the {MAX_TIMED_HOPS} slowest are"
            ),
        ));
    }
    imp.bundle.timed_hops = hops;
}

/// Gaps for the evidence a diagnosis usually wants but that no supplied file held.
fn not_supplied_gaps(b: &mut EvidenceBundle) {
    let mut gaps: Vec<Gap> = Vec::new();
    let mut gap = |source: String, detail: &str| {
        gaps.push(Gap::new(source, GapReason::NotSupplied, detail));
    };
    if b.api_services.is_empty() {
        gap(
            "objects/apiservices".into(),
            "no APIService objects (kubectl get apiservices -o json): availability conditions and backend wiring are unknown",
        );
    }
    if b.metrics_for(MetricTarget::Apiserver).is_none() {
        gap(
            "metrics/apiserver".into(),
            "no kube-apiserver /metrics dump (kubectl get --raw /metrics)",
        );
    }
    if b.metrics_for(MetricTarget::Etcd).is_none() {
        gap(
            "metrics/etcd".into(),
            "no etcd /metrics dump: storage latency can only be judged from kube-apiserver's side",
        );
    }
    let backed: Vec<_> = b
        .api_services
        .iter()
        .filter_map(|a| a.service.clone())
        .collect();
    if !backed.is_empty() && b.services.is_empty() {
        gap(
            "objects/services".into(),
            "no Service objects (or only empty lists, which do not say their kind) for the APIServices' backends",
        );
    }
    // The aggregator resolves ExternalName Services by DNS, without endpoints.
    let needs_endpoints = backed.iter().any(|r| {
        b.service(&r.namespace, &r.name)
            .is_none_or(|s| s.type_ != "ExternalName")
    });
    if needs_endpoints && b.endpoints.is_empty() && b.endpoint_slices.is_empty() {
        gap(
            "objects/endpoints".into(),
            "no Endpoints or EndpointSlices for the APIServices' backends",
        );
    }
    let mut missing_webhooks: Vec<String> = b
        .probes
        .iter()
        .flat_map(webhooks_named)
        .chain(
            b.log_findings
                .iter()
                .filter_map(|f| f.fields.get("webhook").cloned()),
        )
        .filter(|n| webhook_ref(n, b).kind == Kind::Webhook)
        .collect();
    missing_webhooks.sort();
    missing_webhooks.dedup();
    for name in missing_webhooks {
        gap(
            format!("objects/webhooks/{name}"),
            "the webhook is named by the evidence but its configuration was not supplied (kubectl get validatingwebhookconfigurations,mutatingwebhookconfigurations -o json)",
        );
    }
    let throttled = b
        .probes
        .iter()
        .any(|p| p.status == Some(429) || p.status_counts.contains_key("429"));
    // A 429's `X-Kubernetes-PF-*-UID` headers name a FlowSchema and priority level by UID only;
    // without the objects the rejection cannot be tied to the configuration that made it.
    if throttled && b.flow_schemas.is_empty() {
        gap(
            "objects/flowcontrol".into(),
            "429 responses were seen but no FlowSchemas/PriorityLevelConfigurations were supplied",
        );
    }
    for a in b
        .api_services
        .iter()
        .filter(|a| !a.is_local() && a.ca_bundle_present)
    {
        let owner = ObjectRef::cluster(Kind::ApiService, &a.name);
        let verified = b
            .certificates
            .iter()
            .any(|c| c.verification.is_some() && c.origin.owner.as_ref() == Some(&owner));
        if !verified {
            gap(
                format!("tls/{owner}"),
                "the backend's serving certificate was not supplied: Available=True does not prove the TLS path (the availability probe skips verification)",
            );
        }
    }
    b.gaps.extend(gaps);
}
