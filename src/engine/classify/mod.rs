//! The classifier (DESIGN §2): from what fired on each subject to one verdict per subject.
//!
//! * Rules of several classes fired: the one on the **earliest failing rung** of the ladder decides
//!   (docs/diagnosis.md#rule-9: registration → Service → port → endpoints → TLS → discovery → authn → authz →
//!   admission → conversion → verbs → storage → watch → backend; flow control comes first of all);
//!   ties go to the higher severity, then the higher confidence, then rule order. The deciding rules
//!   are those of the winner's class and rung; every other finding is a consequence.
//! * `support` rules never decide. Those of the verdict's class add to its evidence and confidence;
//!   the others are listed as `history` — findings from evidence such as the cumulative counters of a
//!   single metrics dump, which say something happened at some point, not that it is happening.
//! * No fault fired: `Healthy` (severity info) when Healthy rules fired, or when the subject's rules
//!   had the evidence they need and found nothing. `Inconclusive` (counted as a warning) when that
//!   evidence was absent — and for a failing request that no rule explains.
//! * Ruled-out classes come from the deciding rules' `rules_out`, from Healthy rules on the subject,
//!   and from Healthy rules on the API server and etcd, whose facts are cluster-wide ("Storage ruled
//!   out: etcd request p99 is 4 ms").

use std::collections::BTreeMap;

use super::diagnosis::{
    Class, Consequence, DIAGNOSIS_API_VERSION, DIAGNOSIS_KIND, Diagnosis, RuleHit, RuledOut,
    Severity, Subject, SubjectKind, Summary, Verdict,
};
use super::eval::{Evaluation, Hit, SubjectResult, decides};
use super::filter::Filter;
use super::rules::{Rule, RuleSet};
use crate::bundle::{EvidenceBundle, Gap, GapReason};

fn rule<'r>(rules: &'r RuleSet, h: &Hit) -> &'r Rule {
    &rules.rules[h.rule]
}

fn combine(confidences: impl Iterator<Item = f64>) -> f64 {
    // Noisy-OR: each rule is taken as an independent witness, so the verdict is wrong only if every
    // one of them is. Capped at 0.99 because no set of rules has seen every cluster.
    let miss: f64 = confidences.map(|c| 1.0 - c.clamp(0.0, 1.0)).product();
    ((1.0 - miss) * 100.0).round().min(99.0) / 100.0
}

fn rule_hit(rules: &RuleSet, h: &Hit) -> RuleHit {
    let r = rule(rules, h);
    RuleHit {
        id: r.id.clone(),
        class: r.class,
        severity: r.severity,
        rung: r.rung,
        component: r.component,
        summary: h.summary.clone(),
        evidence: h.evidence.clone(),
    }
}

fn consequence(rules: &RuleSet, h: &Hit) -> Consequence {
    let r = rule(rules, h);
    Consequence {
        rule: r.id.clone(),
        class: r.class,
        rung: r.rung,
        component: r.component,
        summary: h.summary.clone(),
    }
}

fn push_ruled_out(out: &mut Vec<RuledOut>, class: Class, because: &str, rule: &str, own: Class) {
    if class == own || out.iter().any(|r| r.class == class) {
        return;
    }
    out.push(RuledOut {
        class,
        because: because.to_string(),
        rule: rule.to_string(),
    });
}

fn push_unique(out: &mut Vec<String>, items: &[String]) {
    for s in items {
        if !s.trim().is_empty() && !out.contains(s) {
            out.push(s.clone());
        }
    }
}

/// What to run when a subject cannot be judged.
fn inconclusive_next(s: &Subject) -> Vec<String> {
    match s.kind {
        SubjectKind::ApiService => vec![
            format!("kubectl get apiservice {} -o yaml", s.name),
            format!("kubectl get --raw {}", gv_path(&s.name)),
        ],
        SubjectKind::ValidatingWebhook => vec![format!(
            "kubectl get validatingwebhookconfiguration {} -o yaml",
            s.parent.clone().unwrap_or_default()
        )],
        SubjectKind::MutatingWebhook => vec![format!(
            "kubectl get mutatingwebhookconfiguration {} -o yaml",
            s.parent.clone().unwrap_or_default()
        )],
        SubjectKind::CustomResourceDefinition => {
            vec![format!("kubectl get crd {} -o yaml", s.name)]
        }
        SubjectKind::FlowSchema | SubjectKind::PriorityLevel => vec![
            "kubectl get --raw /metrics | grep apiserver_flowcontrol_".into(),
            "kubectl get --raw /debug/api_priority_and_fairness/dump_priority_levels".into(),
        ],
        SubjectKind::ApiServer => vec![
            "kubectl get --raw '/readyz?verbose'".into(),
            "kubectl get --raw /metrics".into(),
        ],
        SubjectKind::Etcd => vec![
            "kubectl get --raw '/readyz/etcd'".into(),
            "etcdctl endpoint health".into(),
        ],
        SubjectKind::Request => vec![
            "repeat the request with kubectl -v=8 to see the status and the response body".into(),
        ],
        SubjectKind::Source => vec![format!(
            "kubectl auth can-i --list | grep -i {}",
            s.name.rsplit('/').next().unwrap_or("")
        )],
    }
}

/// The discovery path of the group/version an APIService serves.
fn gv_path(apiservice: &str) -> String {
    // An APIService is named `<version>.<group>` (DESIGN §1), the reverse of the URL's
    // `<group>/<version>`; the group itself contains dots, so only the first one splits. The core
    // group's `v1.` (group "") is served under the legacy prefix: kube-aggregator's
    // `APIAggregator.AddAPIService` (pkg/apiserver/apiserver.go) maps `legacyAPIServiceName`
    // to `/api`, every other APIService to `/apis/<group>/<version>`.
    match apiservice.split_once('.') {
        Some((v, "")) => format!("/api/{v}"),
        Some((v, g)) => format!("/apis/{g}/{v}"),
        None => format!("/apis/{apiservice}"),
    }
}

fn verdict_for(
    rules: &RuleSet,
    r: &SubjectResult,
    cluster_ruled_out: &[(Class, String, String)],
) -> Verdict {
    let (decide, support): (Vec<&Hit>, Vec<&Hit>) =
        r.hits.iter().partition(|h| decides(rule(rules, h)));
    let faults: Vec<&Hit> = decide
        .iter()
        .copied()
        .filter(|h| rule(rules, h).class != Class::Healthy)
        .collect();
    let healthy: Vec<&Hit> = r
        .hits
        .iter()
        .filter(|h| rule(rules, h).class == Class::Healthy)
        .collect();
    let mut verdict = Verdict::new(r.subject.clone(), r.related.clone());
    if let Some(winner) = faults.iter().copied().min_by(|a, b| {
        let (ra, rb) = (rule(rules, a), rule(rules, b));
        // The earliest rung wins because a break there makes every later rung fail too: with no
        // endpoints, TLS, discovery and every proxied verb fail as well, and those failures must
        // not take the blame. Severity, confidence and rule order only break ties, so the result
        // never depends on the order the rules happened to fire in.
        ra.rung
            .cmp(&rb.rung)
            .then(rb.severity.cmp(&ra.severity))
            .then(rb.confidence.total_cmp(&ra.confidence))
            .then(a.rule.cmp(&b.rule))
    }) {
        let w = rule(rules, winner);
        let deciding: Vec<&Hit> = faults
            .iter()
            .copied()
            // Same class *and* rung: two rules on one rung that see one break from different
            // evidence (a condition reason and a probe result) both prove it, while a rule of the
            // same class on a later rung is a consequence of that break like any other.
            .filter(|h| {
                let x = rule(rules, h);
                x.class == w.class && x.rung == w.rung
            })
            .collect();
        let backing: Vec<&Hit> = support
            .iter()
            .copied()
            .filter(|h| rule(rules, h).class == w.class)
            .collect();
        verdict.class = w.class;
        verdict.rung = Some(w.rung);
        // The verdict is as severe as the worst proof of it, not as the tie-break winner: a
        // critical and a warning rule on the same rung describe one break that is critical.
        verdict.severity = deciding
            .iter()
            .map(|h| rule(rules, h).severity)
            .max()
            .unwrap_or(w.severity);
        verdict.summary = winner.summary.clone();
        verdict.confidence = combine(
            deciding
                .iter()
                .map(|h| rule(rules, h).confidence)
                // Support rules corroborate but could not decide alone, so they count at half
                // weight.
                .chain(backing.iter().map(|h| rule(rules, h).confidence * 0.5)),
        );
        for h in deciding.iter().chain(backing.iter()) {
            verdict.rules.push(rule_hit(rules, h));
            push_unique(&mut verdict.next, &h.next);
            for (c, because) in &h.rules_out {
                push_ruled_out(
                    &mut verdict.ruled_out,
                    *c,
                    because,
                    &rule(rules, h).id,
                    w.class,
                );
            }
        }
        for h in &faults {
            if !deciding.iter().any(|d| std::ptr::eq(*d, *h)) {
                verdict.consequences.push(consequence(rules, h));
            }
        }
        // Support findings of another class did not take part in the decision; they are kept as
        // history so a reader still sees them, but they never count as consequences of the break.
        for h in &support {
            if rule(rules, h).class != w.class && rule(rules, h).class != Class::Healthy {
                verdict.history.push(consequence(rules, h));
            }
        }
    } else if !healthy.is_empty() {
        verdict.confidence = combine(healthy.iter().map(|h| rule(rules, h).confidence));
        verdict.summary = healthy[0].summary.clone();
        for h in &healthy {
            verdict.rules.push(rule_hit(rules, h));
            push_unique(&mut verdict.next, &h.next);
        }
        for h in &support {
            if rule(rules, h).class != Class::Healthy {
                verdict.history.push(consequence(rules, h));
            }
        }
    } else if r.subject.kind == SubjectKind::Request
        || (r.needs_declared > 0 && r.needs_met == 0)
        || support
            .iter()
            .any(|h| rule(rules, h).class != Class::Healthy)
    {
        // A failing request always has a cause; when no rule names it, "Healthy" would be a false
        // all-clear, so it is Inconclusive even when every check ran.
        verdict.class = Class::Inconclusive;
        verdict.severity = Severity::Warning;
        let history: Vec<&str> = support
            .iter()
            .filter(|h| rule(rules, h).class != Class::Healthy)
            .map(|h| h.summary.as_str())
            .collect();
        verdict.summary = if !history.is_empty() {
            // Support evidence cannot decide on its own: history (cumulative counters of one
            // dump), or a file nobody showed to be served. Each summary says which.
            format!(
                "only evidence that cannot decide on its own: {}",
                history.join("; ")
            )
        } else if r.subject.kind == SubjectKind::Request
            && (r.needs_declared == 0 || r.needs_met > 0)
        {
            "no rule explains this failure: the layer that produced it is not known".into()
        } else {
            format!(
                "the evidence these checks need is missing: {}",
                r.needs_unmet.join("; ")
            )
        };
        verdict.next = inconclusive_next(&r.subject);
        for h in &support {
            if rule(rules, h).class != Class::Healthy {
                // What would decide it: the support rule's own next steps.
                push_unique(&mut verdict.next, &h.next);
            }
            verdict.history.push(consequence(rules, h));
        }
    } else {
        // Rules ran with their evidence and found nothing: healthy as far as these checks go, but
        // no Healthy rule vouched for it, hence only an even confidence.
        verdict.confidence = 0.5;
        verdict.summary = format!(
            "no fault found by {} check(s) with the evidence supplied",
            r.rules_run
        );
        for h in &support {
            verdict.history.push(consequence(rules, h));
        }
    }
    for h in &healthy {
        for (c, because) in &h.rules_out {
            push_ruled_out(
                &mut verdict.ruled_out,
                *c,
                because,
                &rule(rules, h).id,
                verdict.class,
            );
        }
    }
    // A subject that could not be judged gets no cluster-wide exclusions: listing them would read
    // as a partial verdict.
    if verdict.class != Class::Inconclusive {
        for (c, because, rid) in cluster_ruled_out {
            push_ruled_out(&mut verdict.ruled_out, *c, because, rid, verdict.class);
        }
    }
    verdict
}

fn rank(v: &Verdict) -> (std::cmp::Reverse<Severity>, usize, SubjectKind, String) {
    // DESIGN gate policy: Inconclusive counts as a warning, so the unjudged sort with the warnings,
    // never below them.
    let sev = if v.class == Class::Inconclusive {
        v.severity.max(Severity::Warning)
    } else {
        v.severity
    };
    // Within one severity, verdicts group by class in the order of DESIGN §1's class table
    // (`Class::ALL`); kind and name only make the order stable between runs.
    let class_pos = Class::ALL.iter().position(|c| *c == v.class).unwrap_or(0);
    (
        std::cmp::Reverse(sev),
        class_pos,
        v.subject.kind,
        v.subject.name.clone(),
    )
}

/// Turn an evaluation into the Diagnosis document.
pub fn classify(
    eval: &Evaluation,
    rules: &RuleSet,
    bundle: &EvidenceBundle,
    filter: &Filter,
) -> Diagnosis {
    // What a healthy API server or etcd rules out holds for every subject; a faulty one rules
    // nothing out for the others.
    let mut cluster_ruled_out: Vec<(Class, String, String)> = Vec::new();
    for r in eval
        .subjects
        .iter()
        .filter(|r| matches!(r.subject.kind, SubjectKind::ApiServer | SubjectKind::Etcd))
        // Judged without any cluster-wide exclusions: these subjects are where the exclusions come
        // from, so feeding them their own would be circular.
        .filter(|r| r.rules_run > 0 && verdict_for(rules, r, &[]).class == Class::Healthy)
    {
        for h in &r.hits {
            let x = rule(rules, h);
            if x.class == Class::Healthy {
                for (c, because) in &h.rules_out {
                    if !cluster_ruled_out.iter().any(|(k, _, _)| k == c) {
                        cluster_ruled_out.push((*c, because.clone(), x.id.clone()));
                    }
                }
            }
        }
    }
    // A subject no rule applied to has nothing to say (no verdict, not even Inconclusive); the
    // sources that could not be read and an analysis cut by --timeout become verdicts of their own
    // so that the gate and the headline count them like any other unjudged subject.
    let mut verdicts: Vec<Verdict> = eval
        .subjects
        .iter()
        .filter(|r| r.rules_run > 0)
        .map(|r| verdict_for(rules, r, &cluster_ruled_out))
        .chain(collection::incomplete_collection(bundle))
        .chain(eval.cut.as_ref().map(collection::incomplete_analysis))
        .filter(|v| filter.keeps(&v.subject, v.class))
        .collect();
    verdicts.sort_by_key(rank);
    let mut gaps = bundle.gaps.clone();
    // A rule whose expression failed on a subject is a hole in the analysis, not a finding: it is
    // reported as a gap so the reader knows that check did not run, instead of failing the scan.
    for e in &eval.errors {
        gaps.push(Gap::new(
            format!("rule/{}", e.rule),
            GapReason::Error,
            format!("{}: {}", e.subject, e.message),
        ));
    }
    let problems = crate::engine::problems::group(&verdicts);
    let summary = summarize(&verdicts, &problems);
    Diagnosis {
        api_version: DIAGNOSIS_API_VERSION.to_string(),
        kind: DIAGNOSIS_KIND.to_string(),
        collected_at: super::facts::judging_time(bundle),
        problems,
        verdicts,
        gaps,
        waiver_notices: Vec::new(),
        summary,
    }
}

/// Totals and a headline, from the verdicts and the problems they form.
pub fn summarize(verdicts: &[Verdict], problems: &[crate::engine::problems::Problem]) -> Summary {
    let mut by_class: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_severity: BTreeMap<String, usize> = BTreeMap::new();
    let mut waived = 0;
    for v in verdicts {
        // A waived verdict was accepted by someone on purpose; counting it by class or severity
        // would make the totals (and the gate) disagree with the waiver.
        if v.waived.is_some() {
            waived += 1;
            continue;
        }
        *by_class.entry(v.class.as_str().to_string()).or_default() += 1;
        *by_severity
            .entry(v.severity.as_str().to_string())
            .or_default() += 1;
    }
    let open: Vec<&crate::engine::problems::Problem> =
        crate::engine::problems::open(problems).collect();
    let unread: Vec<&str> = verdicts
        .iter()
        .filter(|v| v.subject.kind == SubjectKind::Source && v.waived.is_none())
        .map(|v| v.subject.name.as_str())
        .filter(|name| *name != collection::ANALYSIS_SOURCE)
        .collect();
    let analysis_cut = verdicts.iter().any(|v| {
        v.subject.kind == SubjectKind::Source
            && v.subject.name == collection::ANALYSIS_SOURCE
            && v.waived.is_none()
    });
    let unjudged: Vec<&Verdict> = verdicts
        .iter()
        .filter(|v| {
            v.class == Class::Inconclusive
                && v.waived.is_none()
                && v.subject.kind != SubjectKind::Source
        })
        .collect();
    // Sources the API server did not serve (timeouts, errors) while a problem is open are most
    // likely its consequence (a frozen etcd times out every LIST): the problem leads, they follow.
    let unanswered_only = !unread.is_empty()
        && verdicts
            .iter()
            .filter(|v| {
                v.subject.kind == SubjectKind::Source
                    && v.waived.is_none()
                    && v.subject.name != collection::ANALYSIS_SOURCE
            })
            .all(collection::unanswered);
    let problems_lead = unanswered_only && !open.is_empty();
    let mut parts = Vec::new();
    if problems_lead {
        parts.push(problems_phrase(&open));
    }
    if !unread.is_empty() {
        parts.push(if unanswered_only {
            format!(
                "collection incomplete: {} timed out or failed (not a permission problem), so what they name is not judged",
                unread.join(", ")
            )
        } else {
            format!(
                "collection incomplete: {} could not be read, so what they name is not judged",
                unread.join(", ")
            )
        });
    }
    if analysis_cut {
        parts.push(
            "analysis incomplete: --timeout ran out before every subject was judged (Source/analysis says how many were not)"
                .to_string(),
        );
    }
    if !open.is_empty() && !problems_lead {
        parts.push(problems_phrase(&open));
    }
    // Only when nothing is broken: an open problem is what the headline must lead with, and the
    // unjudged subjects still show as Inconclusive verdicts in the list below it.
    if !unjudged.is_empty() && open.is_empty() {
        let names: Vec<String> = unjudged
            .iter()
            .take(3)
            .map(|v| v.subject.to_string())
            .collect();
        parts.push(format!(
            "nothing found broken, but {} subject(s) could not be judged: {}{}",
            unjudged.len(),
            names.join(", "),
            if unjudged.len() > 3 { ", …" } else { "" }
        ));
    }
    let headline = if !parts.is_empty() {
        parts.join("; ")
    } else if verdicts.is_empty() {
        "no subjects to judge in this evidence".into()
    } else {
        format!(
            "no findings: {} subject(s), none at warning or above",
            verdicts.len()
        )
    };
    Summary {
        subjects: verdicts.len(),
        by_class,
        by_severity,
        waived,
        worst: crate::engine::gate::worst(verdicts),
        problems: open.len(),
        headline,
    }
}

/// `3 problems: Aggregation ×2 (APIService/a, APIService/b), Admission ×1 (MutatingWebhook/m)`;
/// one problem is said with its summary.
fn problems_phrase(open: &[&crate::engine::problems::Problem]) -> String {
    if let [p] = open {
        return format!("1 problem: {} on {}: {}", p.class, p.root, p.summary);
    }
    let mut by_class: Vec<(Class, Vec<String>)> = Vec::new();
    for p in open {
        match by_class.iter_mut().find(|(c, _)| *c == p.class) {
            Some((_, roots)) => roots.push(p.root.to_string()),
            None => by_class.push((p.class, vec![p.root.to_string()])),
        }
    }
    let groups: Vec<String> = by_class
        .iter()
        .map(|(c, roots)| {
            let shown: Vec<&str> = roots.iter().take(3).map(String::as_str).collect();
            format!(
                "{c} ×{} ({}{})",
                roots.len(),
                shown.join(", "),
                if roots.len() > 3 { ", …" } else { "" }
            )
        })
        .collect();
    format!("{} problems: {}", open.len(), groups.join(", "))
}

mod collection;

#[cfg(test)]
mod tests;
