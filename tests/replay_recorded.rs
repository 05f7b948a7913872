//! The replay property: a recorded incident served back by `replay serve --bundle` is collected as
//! it was recorded, and judged as it was judged.
//!
//! For every fixture bundle and every real capture case (`fixtures/raw/*`, imported as `import --raw`
//! does): serve it, `collect` from the replay beside it (metrics window 0 for a single dump; a few
//! milliseconds for a windowed recording, whose two scrapes the replay serves), merge the evidence
//! the replay carried, and check that
//! * the evidence is the recorded evidence, after [`normalise`] (what a collection legitimately adds
//!   or cannot reproduce — each exclusion is commented there),
//! * a request the recording held only as a person's client output (kubectl, curl) and that the
//!   collection sends again gets the recorded outcome back (status, Status or body, headers), and
//! * `analyze` of the collection gives the same verdicts (subject, class, severity) as `analyze` of
//!   the recording.
//!
//! `REPLAY_DUMP=DIR` keeps every collected bundle there, for a look at a difference.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use extpath::bundle::carried::{carried, merge};
use extpath::bundle::metrics::{SeriesWindow, default_selection};
use extpath::bundle::probes::ProbeKind;
use extpath::bundle::{
    CertSource, Collection, EvidenceBundle, FailurePolicy, MatchPolicy, Probe, WebhookKind,
    load_bundle,
};
use extpath::collect::refs::References;
use extpath::collect::{CollectOptions, EtcdOptions};
use extpath::engine::{Filter, RuleSet, Settings, analyze};
use extpath::refserver::{RefServer, StartOptions};
use serde_json::Value;

use crate::util::repo;

/// Recordings whose replay is known to differ. The list only ever shrinks; it is empty.
const KNOWN_EXCEPTIONS: &[&str] = &[];

/// Every recording: the fixture bundles, then the capture cases.
fn recordings() -> Vec<(String, EvidenceBundle)> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures/bundles"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
        .collect();
    files.sort();
    for f in files {
        let name = format!("bundles/{}", f.file_name().unwrap().to_string_lossy());
        // What a recording proves, not what it claims: a health report without checks is the
        // gap the live collector also records for it.
        let b = load_bundle(&f).unwrap();
        let b = extpath::engine::unproven::without_unproven_health(&b).into_owned();
        out.push((name, b));
    }
    let mut cases: Vec<PathBuf> = std::fs::read_dir(repo().join("fixtures/raw"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    for c in cases {
        let name = format!("raw/{}", c.file_name().unwrap().to_string_lossy());
        let b = extpath::bundle::raw::import_paths(std::slice::from_ref(&c)).unwrap();
        out.push((name, b));
    }
    out
}

/// Serve `recording`, collect from the replay, merge what it carried.
async fn replay(recording: &EvidenceBundle) -> EvidenceBundle {
    let server = RefServer::replay(recording.clone(), StartOptions::default())
        .await
        .unwrap();
    let windowed = recording.metrics.iter().any(|m| m.window.is_some());
    let opts = CollectOptions {
        window: if windowed {
            Duration::from_millis(10)
        } else {
            Duration::ZERO
        },
        etcd: server.etcd_url().map(|u| EtcdOptions {
            metrics_url: format!("{u}/metrics"),
            cert: None,
            key: None,
            ca: None,
        }),
        ..CollectOptions::default()
    };
    let mut collected = extpath::cli::collect_refserver::collect_from_refserver(&server, opts)
        .await
        .unwrap();
    server.shutdown().await;
    merge(&mut collected, &carried(recording));
    collected
}

/// 12 significant digits: what two scrapes give back of a fractional window delta (the replay
/// serves `after - delta` as the earlier scrape; `after - (after - delta)` is within an ulp).
fn round12(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(11 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

fn round_window(w: &mut SeriesWindow) {
    // Rates are deltas over the window's length, and a replay's window is as long as its client
    // makes it (here, milliseconds): only the deltas are the recording's.
    w.rate = None;
    for v in [&mut w.delta, &mut w.sum_delta, &mut w.count_delta]
        .into_iter()
        .flatten()
    {
        v.0 = round12(v.0);
    }
    for b in &mut w.buckets {
        b.count.0 = round12(b.count.0);
    }
}

/// Whether a collected probe is one extpath sends against any replay on its own: a probe of its
/// own whose request the recording does not hold (every remote APIService gets a discovery probe,
/// and one that answers a delegation probe as another user).
fn added_by_collection(p: &Probe, recording: &EvidenceBundle) -> bool {
    p.origin.kind == ProbeKind::Probe
        && !recording.probes.iter().any(|q| {
            q.origin == p.origin && q.method == p.method && q.path == p.path && q.user == p.user
        })
}

/// The evidence a recording and its replay must agree on, applied to both; `recording` decides
/// the exclusions that depend on what was recorded. Each exclusion says why a collection
/// legitimately differs there; everything else must be equal.
fn normalise(b: &EvidenceBundle, recording: &EvidenceBundle) -> Value {
    let mut b = b.clone();
    // Who collected, from where, when and over which window: the replay is another collection.
    // The server's version is evidence and stays.
    b.collection = Collection {
        server_version: b.collection.server_version.clone(),
        ..Collection::default()
    };
    // A collection's own account of what it could not read (a replay has no backends to shake
    // hands with, a raw import records files it skipped).
    b.gaps.clear();

    // Fields the API requires or defaults, which a hand-written recording may leave out: compared
    // as a collection reads them (a 0 priority or an empty sideEffects is the replay writing a
    // required field the recording did not have).
    for a in &mut b.api_services {
        a.group_priority_minimum = a.group_priority_minimum.filter(|p| *p != 0);
        a.version_priority = a.version_priority.filter(|p| *p != 0);
        if let Some(s) = &mut a.service {
            s.port.get_or_insert(443);
        }
    }
    for s in &mut b.services {
        if s.type_.is_empty() {
            s.type_ = "ClusterIP".into();
        }
        for p in &mut s.ports {
            if p.protocol.is_empty() {
                p.protocol = "TCP".into();
            }
        }
    }
    for w in &mut b.webhooks {
        w.side_effects = w.side_effects.take().filter(|s| !s.as_str().is_empty());
        if w.failure_policy.as_str().is_empty() {
            w.failure_policy = FailurePolicy::default();
        }
        if w.match_policy.as_str().is_empty() {
            w.match_policy = MatchPolicy::default();
        }
        if w.kind == WebhookKind::Mutating {
            w.reinvocation_policy.get_or_insert_with(|| "Never".into());
        }
        if let Some(s) = &mut w.target.service {
            s.port.get_or_insert(443);
        }
    }
    for c in &mut b.crds {
        if c.conversion.strategy.is_empty() {
            c.conversion.strategy = "None".into();
        }
    }

    // Objects a collection never asks for: it reads the Services (and their Endpoints and
    // EndpointSlices) that APIServices, webhooks and conversion webhooks name, and the Pods those
    // Services select.
    let refs = References::of(recording);
    let referenced =
        |ns: &str, name: &str| refs.services.contains(&(ns.to_string(), name.to_string()));
    b.services.retain(|s| referenced(&s.namespace, &s.name));
    b.endpoints.retain(|e| referenced(&e.namespace, &e.name));
    b.endpoint_slices.retain(|e| {
        e.service_name
            .as_deref()
            .is_some_and(|n| referenced(&e.namespace, n))
    });
    b.pods.retain(|p| {
        recording.services.iter().any(|s| {
            referenced(&s.namespace, &s.name)
                && s.namespace == p.namespace
                && !s.selector.is_empty()
                && s.selector.iter().all(|(k, v)| p.labels.get(k) == Some(v))
        })
    });
    // A container problem is `container: Reason`; a hand-written recording may give the reason
    // alone, and the container it names comes back under a name of the replay's.
    for p in &mut b.pods {
        for c in &mut p.container_problems {
            if let Some((_, reason)) = c.split_once(": ") {
                *c = reason.to_string();
            }
        }
    }
    // The file a caBundle certificate was read from (a raw import's): a collection reads it from
    // the object.
    for c in &mut b.certificates {
        if c.origin.source == CertSource::CaBundle {
            c.origin.file = None;
        }
    }

    // Probes: when they were sent; and of extpath's own probes, what the collection measures
    // itself (latency; the Date of the answer), the body of a success (a collection keeps the body
    // of failures only), and the probes it sends of every remote APIService whether or not the
    // recording had one.
    b.probes.retain(|p| !added_by_collection(p, recording));
    for p in &mut b.probes {
        p.at = None;
        if p.origin.kind == ProbeKind::Probe {
            p.latency_ms = None;
            p.headers.date = None;
            if p.status.is_some_and(|s| (200..300).contains(&s)) {
                p.body = None;
            }
            // What remains of a 2xx discovery body; a recording made before probes kept it (or
            // written by hand) has none, and the replay's answer names its group/version.
            let recorded_gv = recording.probes.iter().any(|q| {
                q.origin == p.origin && q.path == p.path && q.discovery_group_version.is_some()
            });
            if !recorded_gv {
                p.discovery_group_version = None;
            }
        }
    }

    // Metrics: when and where they were read, the window's bounds, rates and float rounding (see
    // `round_window`); and the families a collection does not keep (`default_selection`).
    let selection = default_selection();
    for m in &mut b.metrics {
        m.scraped_at = None;
        m.window = None;
        m.origin.clear();
        m.families.retain(|f| selection.wants(&f.name));
        for s in m.families.iter_mut().flat_map(|f| f.series.iter_mut()) {
            if let Some(w) = &mut s.window {
                round_window(w);
            }
        }
    }
    // Health checks: where they were read; and the error text of a verbose answer, whose failure
    // is in its items (a collection keeps an error only for an answer without items).
    for c in &mut b.health_checks {
        c.origin = None;
        c.target = None;
        // A recording made before owners were recorded reads as its owner.
        c.component = Some(c.owner());
        if !c.checks.is_empty() {
            c.error = None;
        }
    }

    let mut v = serde_json::to_value(&b).unwrap();
    // A collection lists objects in the server's order; a recording in whatever order it was made.
    if let Value::Object(m) = &mut v {
        for (_, list) in m.iter_mut() {
            if let Value::Array(items) = list {
                items.sort_by_key(|x| x.to_string());
            }
        }
    }
    v
}

/// Verdicts as (subject, class, severity). A request the collection added itself (see
/// `added_by_collection`) that nobody recorded is a subject of its own — a failing discovery probe
/// of an APIService the recording had not probed — and is left out with its evidence.
fn verdicts(
    b: &EvidenceBundle,
    recording: &EvidenceBundle,
    rules: &RuleSet,
) -> BTreeSet<(String, String, String)> {
    let added: Vec<String> = b
        .probes
        .iter()
        .filter(|p| added_by_collection(p, recording))
        .filter(|p| {
            !recording
                .probes
                .iter()
                .any(|q| q.method == p.method && q.path == p.path)
        })
        .map(|p| {
            format!(
                "Request/{} {}",
                p.method.as_deref().unwrap_or(""),
                p.path.as_deref().unwrap_or("")
            )
        })
        .collect();
    let d = analyze(b, rules, &Settings::default(), &Filter::default());
    let doc = serde_json::to_value(&d).unwrap();
    doc["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                format!(
                    "{}/{}",
                    v["subject"]["kind"].as_str().unwrap(),
                    v["subject"]["name"].as_str().unwrap()
                ),
                v["class"].as_str().unwrap().to_string(),
                v["severity"].as_str().unwrap().to_string(),
            )
        })
        .filter(|(subject, _, _)| !added.contains(subject))
        .collect()
}

/// The request a collection's probe made again of what a person's client recorded: the replay
/// answered it with that recorded outcome (same method and path with query, else without; the
/// record closest to the wire).
fn client_outcome_for<'r>(p: &Probe, recording: &'r EvidenceBundle) -> Option<&'r Probe> {
    let path = p.path.as_deref()?;
    let bare = |x: &str| x.split('?').next().unwrap_or_default().to_string();
    let candidates = || {
        recording.probes.iter().filter(|q| {
            q.origin.kind == ProbeKind::ClientOutput
                && q.status.is_some()
                && q.method.as_deref().unwrap_or("GET") == p.method.as_deref().unwrap_or("")
        })
    };
    // Closest to the wire first: curl, then a kubectl trace, then kubectl's own error line.
    let rank = |q: &&Probe| q.origin.tool.wire_rank();
    candidates()
        .filter(|q| q.path.as_deref() == Some(path))
        .min_by_key(rank)
        .or_else(|| {
            candidates()
                .filter(|q| q.path.as_deref().map(bare) == Some(bare(path)))
                .min_by_key(rank)
        })
}

/// Outcomes the replay served from a person's client output come back as that client saw them:
/// status, Status body or plain body, and the headers that matter.
fn client_outcomes_differ(collected: &EvidenceBundle, recording: &EvidenceBundle) -> Vec<String> {
    let mut out = Vec::new();
    for p in collected
        .probes
        .iter()
        .filter(|p| added_by_collection(p, recording))
    {
        let Some(q) = client_outcome_for(p, recording) else {
            continue;
        };
        let failed = q.status.is_some_and(|s| !(200..300).contains(&s));
        let body = q
            .body
            .as_ref()
            .map(|b| b.chars().take(2048).collect::<String>());
        let h = |x: &Probe| {
            let h = &x.headers;
            (
                h.retry_after.clone(),
                h.flow_schema_uid.clone(),
                h.priority_level_uid.clone(),
                h.audit_id.clone(),
            )
        };
        // A Status kubectl made from a plain body comes back as that body, from which a client
        // makes the same Status again.
        let made_from = q
            .status_body
            .as_ref()
            .and_then(|s| match s.causes.as_slice() {
                [c] if c.reason == "UnexpectedServerResponse" => Some(c.message.clone()),
                _ => None,
            });
        let same = p.status == q.status
            && h(p) == h(q)
            && (!failed
                || match (&made_from, &q.status_body) {
                    (Some(b), _) => p.body.as_ref() == Some(b) && p.status_body.is_none(),
                    (None, Some(s)) => p.status_body.as_ref() == Some(s),
                    (None, None) => body.is_none() || p.body == body,
                });
        if !same {
            out.push(format!(
                "  outcome of {:?}:\n    recorded: {}\n    replayed: {}",
                p.path,
                serde_json::to_string(q).unwrap(),
                serde_json::to_string(p).unwrap()
            ));
        }
    }
    out
}

/// The sections of two normalised bundles that differ, shown side by side.
fn differences(want: &Value, got: &Value) -> Vec<String> {
    let mut keys: BTreeSet<&String> = want.as_object().unwrap().keys().collect();
    keys.extend(got.as_object().unwrap().keys());
    keys.into_iter()
        .filter(|k| want.get(*k) != got.get(*k))
        .map(|k| {
            let show = |v: Option<&Value>| {
                let t = v
                    .map(|v| serde_json::to_string(v).unwrap())
                    .unwrap_or_default();
                t.chars().take(100000).collect::<String>()
            };
            format!(
                "  {k}:\n    recorded: {}\n    replayed: {}",
                show(want.get(k)),
                show(got.get(k))
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recording_replays_to_the_same_evidence_and_verdicts() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rules = RuleSet::bundled();
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    let all = recordings();
    for (name, recording) in &all {
        let collected = replay(recording).await;
        if let Some(dir) = std::env::var_os("REPLAY_DUMP") {
            let f = PathBuf::from(dir).join(name.replace('/', "_"));
            std::fs::write(f, collected.to_yaml().unwrap()).unwrap();
        }
        let mut why = differences(
            &normalise(recording, recording),
            &normalise(&collected, recording),
        );
        why.extend(client_outcomes_differ(&collected, recording));
        let (want, got) = (
            verdicts(recording, recording, &rules),
            verdicts(&collected, recording, &rules),
        );
        if want != got {
            why.push(format!(
                "  verdicts:\n    only recorded: {:?}\n    only replayed: {:?}",
                want.difference(&got).collect::<Vec<_>>(),
                got.difference(&want).collect::<Vec<_>>()
            ));
        }
        if !why.is_empty() {
            failures.push((name.clone(), why.join("\n")));
        }
    }
    eprintln!(
        "{} recordings replayed in {:?}",
        all.len(),
        started.elapsed()
    );
    let unexpected: Vec<String> = failures
        .iter()
        .filter(|(n, _)| !KNOWN_EXCEPTIONS.contains(&n.as_str()))
        .map(|(n, w)| format!("{n}:\n{w}"))
        .collect();
    assert!(
        unexpected.is_empty(),
        "{} of {} recordings replay differently:\n{}",
        unexpected.len(),
        all.len(),
        unexpected.join("\n")
    );
    let fixed: Vec<&&str> = KNOWN_EXCEPTIONS
        .iter()
        .filter(|k| !failures.iter().any(|(n, _)| n == *k))
        .collect();
    assert!(
        fixed.is_empty(),
        "now replayed right, remove from KNOWN_EXCEPTIONS: {fixed:?}"
    );
}

/// Every kind of probe a collection makes is either served by the replay (the collection makes it
/// again, and it is not carried) or carried (the collection does not make it): never both, so a
/// merged collection holds each of extpath's own probes once. Conversion reads of CRDs
/// (`probes/conversion`) were neither served nor left alone: the list of the storage version came
/// back twice, the replay's (no item, so no reads after it) beside the carried one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_collection_holds_each_of_its_own_probes_once() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let recording =
        load_bundle(&repo().join("fixtures/bundles/adm-conversion-probes.yaml")).unwrap();
    let collected = replay(&recording).await;
    let mut seen = std::collections::BTreeMap::new();
    for p in collected
        .probes
        .iter()
        .filter(|p| p.origin.kind == ProbeKind::Probe)
    {
        *seen
            .entry((p.method.clone(), p.path.clone(), p.user.clone()))
            .or_insert(0) += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "probes made twice: {twice:?}");
    for p in recording.probes.iter() {
        assert!(
            seen.contains_key(&(p.method.clone(), p.path.clone(), p.user.clone())),
            "the recorded {:?} is missing from the replay",
            p.path
        );
    }
}
