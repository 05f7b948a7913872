//! Verdicts on the collection itself: a core source a live scan could not read (or read only up
//! to `--max-objects`), and an analysis `scan --timeout` stopped before every subject was judged.
//!
//! APIServices, webhook configurations and CRDs name every extension path a scan judges. When the
//! API server refuses them (401/403), or they time out, the subjects they would have given are not
//! judged at all — and "no findings" would be a lie a CI gate believes (a CronJob whose RBAC broke
//! would stay green). So each such gap becomes an `Inconclusive` verdict on a `Source` subject,
//! at `critical`: the default gate fails on it, and the headline says the collection is
//! incomplete. A source the user did not supply to a raw import (`not_supplied`) is not a failure
//! of the collection and gives no verdict; neither does an API the server does not serve.
//!
//! What it does not own: the gaps themselves (collect, raw import), the gate (`gate.rs`).

use crate::bundle::{EvidenceBundle, GapReason};
use crate::engine::diagnosis::{Class, Severity, Subject, SubjectKind, Verdict};

/// The sources that name what a scan judges, and what each stands for. Other sources (metrics,
/// logs, FlowSchemas) only add evidence about a subject these give: their gaps stay in the
/// diagnosis's `gaps` (and rules read them as `cluster.gaps`) instead of a verdict here.
const CORE_SOURCES: &[(&str, &str, &str)] = &[
    (
        "objects/apiservices",
        "APIServices",
        "apiservices.apiregistration.k8s.io",
    ),
    (
        "objects/validatingwebhookconfigurations",
        "validating webhook configurations",
        "validatingwebhookconfigurations.admissionregistration.k8s.io",
    ),
    (
        "objects/mutatingwebhookconfigurations",
        "mutating webhook configurations",
        "mutatingwebhookconfigurations.admissionregistration.k8s.io",
    ),
    (
        "objects/customresourcedefinitions",
        "CustomResourceDefinitions",
        "customresourcedefinitions.apiextensions.k8s.io",
    ),
];

/// `None` for reasons that are not a failure to read: an API the server does not serve has no
/// objects to miss, and `not_supplied` / `skipped` / `unreadable` describe what a raw import was
/// given (the file-level gap already names the file), not a collection that was refused.
fn reason_words(r: GapReason) -> Option<&'static str> {
    match r {
        GapReason::Forbidden => Some("forbidden (403)"),
        GapReason::Unauthorized => Some("unauthorized (401)"),
        GapReason::Timeout => Some("timed out"),
        GapReason::Unreachable => Some("unreachable"),
        GapReason::Error => Some("failed"),
        GapReason::Capped => Some("stopped at --max-objects"),
        GapReason::NotServed
        | GapReason::NotSupplied
        | GapReason::Skipped
        | GapReason::Unreadable => None,
    }
}

/// Said in the summary of a source the API server did not serve (a timeout, no connection, an
/// error), as opposed to one it refused (401/403): [`unanswered`] reads it back.
const NOT_PERMISSIONS: &str = "a timeout or an error, not a permission";

/// A `Source` verdict of a core source the API server did not serve — timed out, unreachable or
/// failing — rather than refused: the consequence of a failing server (a frozen etcd), which a
/// headline puts after the problem that explains it.
pub fn unanswered(v: &Verdict) -> bool {
    v.subject.kind == crate::engine::diagnosis::SubjectKind::Source
        && v.summary.contains(NOT_PERMISSIONS)
}

/// One `Inconclusive` verdict per core source the collection could not read.
pub fn incomplete_collection(bundle: &EvidenceBundle) -> Vec<Verdict> {
    let mut out = Vec::new();
    for (source, what, resource) in CORE_SOURCES {
        // One verdict per source, from its first gap that is a failure: however many gaps a
        // source has, its objects are unjudged once.
        let Some((gap, words)) = bundle
            .gaps
            .iter()
            .filter(|g| g.source == *source)
            .find_map(|g| reason_words(g.reason).map(|w| (g, w)))
        else {
            continue;
        };
        let subject = Subject::new(SubjectKind::Source, *source);
        let mut v = Verdict::new(subject, Vec::new());
        v.class = Class::Inconclusive;
        v.severity = Severity::Critical;
        let detail = if gap.detail.is_empty() {
            String::new()
        } else {
            format!(" — {}", gap.detail.trim())
        };
        let unanswered = matches!(
            gap.reason,
            GapReason::Timeout | GapReason::Unreachable | GapReason::Error
        );
        v.summary = if gap.reason == GapReason::Capped {
            format!(
                "the collection is incomplete: reading {what} {words}{detail}; those beyond are unjudged, so a failure there cannot be seen"
            )
        } else if unanswered {
            format!(
                "the collection is incomplete: reading {what} {words}{detail}; the API server did not serve them ({NOT_PERMISSIONS}), so every one of them is unjudged and a failure there cannot be seen"
            )
        } else {
            format!(
                "the collection is incomplete: reading {what} {words}{detail}; every one of them is unjudged, so a failure there cannot be seen"
            )
        };
        // A timeout or an error is the API server (or what it waits on: etcd) failing to
        // answer, never a missing permission: RBAC steps there send the reader the wrong way.
        v.next = if gap.reason == GapReason::Capped {
            vec![
                format!("kubectl get {resource} --no-headers | wc -l   # how many there are"),
                "rerun with a larger --max-objects (each object costs a few kB of memory)".into(),
            ]
        } else if unanswered {
            vec![
                "kubectl get --raw '/readyz?verbose'   # is the API server's storage (etcd) answering?".into(),
                format!("kubectl get {resource} --request-timeout=30s   # what the API server answers now"),
                "rerun the scan once the API server answers (or with a longer --timeout)".into(),
            ]
        } else {
            vec![
                format!("kubectl auth can-i list {resource}"),
                "kubectl apply -f deploy/rbac.yaml   # the read-only ClusterRole extpath needs"
                    .into(),
            ]
        };
        out.push(v);
    }
    out
}

/// The name of the `Source` subject of an analysis cut short by its deadline.
pub const ANALYSIS_SOURCE: &str = "analysis";

/// The `Inconclusive` verdict of an analysis that `scan --timeout` stopped before every subject
/// was judged: critical, like a core source the collection could not read, because the subjects
/// left unjudged could hide any failure (a gate must not pass on a half-read cluster).
pub fn incomplete_analysis(cut: &crate::engine::eval::Cut) -> Verdict {
    let total: usize = cut.unjudged.values().sum();
    let kinds = cut
        .unjudged
        .iter()
        .map(|(k, n)| format!("{k} ×{}", crate::bundle::yaml_limits::thousands(*n)))
        .collect::<Vec<_>>()
        .join(", ");
    let subject = Subject::new(SubjectKind::Source, ANALYSIS_SOURCE);
    let mut v = Verdict::new(subject, Vec::new());
    v.class = Class::Inconclusive;
    v.severity = Severity::Critical;
    v.summary = format!(
        "the analysis is incomplete: --timeout {} ran out after {} of {} subjects were judged; {} are unjudged ({kinds}), so a failure there cannot be seen",
        humantime(cut.timeout),
        crate::bundle::yaml_limits::thousands(cut.judged),
        crate::bundle::yaml_limits::thousands(cut.judged + total),
        crate::bundle::yaml_limits::thousands(total),
    );
    v.next = vec![
        "rerun with a longer --timeout (the collection stops at 90% of it; the analysis has the rest)".into(),
        "kubectl extpath collect -o json > bundle.json && kubectl extpath analyze bundle.json   # analyze has no time limit".into(),
    ];
    v
}

fn humantime(d: std::time::Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{CollectionSource, Gap};

    #[test]
    fn a_forbidden_core_source_is_a_critical_inconclusive_and_a_missing_file_is_not() {
        let mut b = EvidenceBundle::new(CollectionSource::Live {
            server: "https://127.0.0.1:6443".into(),
            context: None,
        });
        b.gaps.push(Gap::new(
            "objects/apiservices",
            GapReason::Forbidden,
            "apiservices.apiregistration.k8s.io is forbidden: User \"ci\" cannot list resource \"apiservices\"",
        ));
        b.gaps.push(Gap::new(
            "objects/customresourcedefinitions",
            GapReason::NotSupplied,
            "",
        ));
        b.gaps
            .push(Gap::new("metrics/apiserver", GapReason::Forbidden, ""));
        let v = incomplete_collection(&b);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].subject.name, "objects/apiservices");
        assert_eq!(
            (v[0].class, v[0].severity),
            (Class::Inconclusive, Severity::Critical)
        );
        assert!(
            v[0].summary.contains("User \"ci\" cannot list"),
            "{}",
            v[0].summary
        );
    }

    #[test]
    fn a_timed_out_core_source_suggests_no_rbac() {
        let mut b = EvidenceBundle::new(CollectionSource::Live {
            server: "https://127.0.0.1:6443".into(),
            context: None,
        });
        b.gaps.push(Gap::new(
            "objects/apiservices",
            GapReason::Timeout,
            "no answer within 10s",
        ));
        b.gaps.push(Gap::new(
            "objects/customresourcedefinitions",
            GapReason::Forbidden,
            "",
        ));
        let v = incomplete_collection(&b);
        assert_eq!(v.len(), 2, "{v:?}");
        let timed_out = &v[0];
        assert!(unanswered(timed_out), "{}", timed_out.summary);
        assert!(
            timed_out
                .next
                .iter()
                .all(|n| !n.contains("can-i") && !n.contains("rbac")),
            "{:?}",
            timed_out.next
        );
        assert!(!unanswered(&v[1]));
        assert!(v[1].next.iter().any(|n| n.contains("can-i")));
    }
}
