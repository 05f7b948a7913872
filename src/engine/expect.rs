//! Comparing a scenario's `expect:` block with extpath's verdicts on it.
//!
//! `expect.subjects` names subjects (`Kind/name`, or `Kind/prefix*` for every subject of that kind
//! whose name starts with the prefix) and the class each must get. A fault class must come at
//! warning or above — a fault reported as info was not reported — and a pattern must match at least
//! one verdict, all of them with that class. Verdicts on subjects `expect` does not name are free,
//! except that none may carry a class of `expect.forbid` at warning or above: those are the
//! misattributions the scenario's fault must not be mistaken for (a slow webhook blamed on etcd).
//!
//! This file judges nothing about the cluster; it only compares two documents, so it is tested on
//! hand-built diagnoses. What it does not own: reading a scenario file (the reference server's
//! `scenario::Expect`, which the command line lends as an [`Expected`]: the engine and the
//! reference server know nothing of each other), running the scenario (`replay`), or drawing the
//! checks (`report::replay`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::engine::{Class, Diagnosis, Severity, Verdict};

/// What a scenario expects of extpath's verdicts: its `expect.subjects` and `expect.forbid`.
#[derive(Debug, Clone, Copy)]
pub struct Expected<'a> {
    /// Verdict class per subject: `Kind/name`, or `Kind/prefix*` for every subject of that kind
    /// whose name starts with the prefix.
    pub subjects: &'a BTreeMap<String, String>,
    /// Classes no verdict on another subject may carry at warning or above.
    pub forbid: &'a [String],
}

/// One comparison of what a scenario expects with what extpath said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Whether extpath said what was expected.
    pub ok: bool,
    /// The subject (`APIService/v1alpha1.wardle.example.com`), or the `expect` pattern that
    /// matched nothing.
    pub subject: String,
    /// What the scenario expects: a class, or `not <Class>` for a forbidden one.
    pub expected: String,
    /// What extpath said: `Class (severity)`, or `no verdict`.
    pub got: String,
    /// The verdict's one-line summary (empty without a verdict).
    pub summary: String,
}

/// A parsed `expect.subjects` key.
struct Pattern<'a> {
    kind: &'a str,
    name: &'a str,
    prefix: bool,
}

impl<'a> Pattern<'a> {
    fn parse(key: &'a str) -> Pattern<'a> {
        let (kind, name) = key.split_once('/').unwrap_or((key, ""));
        match name.strip_suffix('*') {
            Some(prefix) => Pattern {
                kind,
                name: prefix,
                prefix: true,
            },
            None => Pattern {
                kind,
                name,
                prefix: false,
            },
        }
    }

    fn matches(&self, v: &Verdict) -> bool {
        v.subject.kind.as_str() == self.kind
            && if self.prefix {
                v.subject.name.starts_with(self.name)
            } else {
                v.subject.name == self.name
            }
    }
}

/// Whether a verdict says what `class` expects: the class, and for a fault at warning or above.
/// Healthy and Inconclusive carry no severity of their own worth checking (the gate gives
/// Inconclusive its floor, `gate.rs`), so for them the class alone decides.
fn agrees(v: &Verdict, class: Class) -> bool {
    v.class == class
        && (matches!(class, Class::Healthy | Class::Inconclusive)
            || v.severity >= Severity::Warning)
}

fn got(v: &Verdict) -> String {
    format!("{} ({})", v.class, v.severity)
}

/// One check per expected subject (per matching verdict for a pattern), then one per verdict
/// with a forbidden class; `ok` says whether it holds.
/// Class names in `expect` were checked when the scenario loaded; an unknown one never agrees.
pub fn compare(expect: Expected<'_>, d: &Diagnosis) -> Vec<Check> {
    let mut out = Vec::new();
    let patterns: Vec<(Pattern<'_>, Option<Class>, &str)> = expect
        .subjects
        .iter()
        .map(|(k, c)| (Pattern::parse(k), Class::parse(c), c.as_str()))
        .collect();
    for ((pattern, class, class_name), key) in patterns.iter().zip(expect.subjects.keys()) {
        let matched: Vec<&Verdict> = d.verdicts.iter().filter(|v| pattern.matches(v)).collect();
        // A pattern that matched nothing fails: a subject the collector never listed would
        // otherwise make the scenario pass without extpath having said anything about it.
        if matched.is_empty() {
            out.push(Check {
                ok: false,
                subject: key.clone(),
                expected: (*class_name).to_string(),
                got: "no verdict".into(),
                summary: String::new(),
            });
        }
        for v in matched {
            out.push(Check {
                ok: class.is_some_and(|c| agrees(v, c)),
                subject: v.subject.to_string(),
                expected: (*class_name).to_string(),
                got: got(v),
                summary: v.summary.clone(),
            });
        }
    }
    let forbidden: Vec<Class> = expect
        .forbid
        .iter()
        .filter_map(|c| Class::parse(c))
        .collect();
    // Subjects `expect` names were judged above with their own class; `forbid` is about the
    // rest, where a misattribution would show (the same class on the faulty subject is right).
    for v in &d.verdicts {
        if patterns.iter().any(|(p, _, _)| p.matches(v)) {
            continue;
        }
        if forbidden.contains(&v.class) && v.severity >= Severity::Warning {
            out.push(Check {
                ok: false,
                subject: v.subject.to_string(),
                expected: format!("not {}", v.class),
                got: got(v),
                summary: v.summary.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Subject, SubjectKind, Summary};

    fn verdict(kind: SubjectKind, name: &str, class: Class, severity: Severity) -> Verdict {
        let subject = Subject::new(kind, name);
        Verdict {
            class,
            severity,
            confidence: 0.9,
            summary: format!("{name} is {class}"),
            ..Verdict::new(subject, Vec::new())
        }
    }

    fn diagnosis(verdicts: Vec<Verdict>) -> Diagnosis {
        Diagnosis {
            problems: Vec::new(),
            api_version: "extpath.dev/v1alpha1".into(),
            kind: "Diagnosis".into(),
            collected_at: None,
            verdicts,
            gaps: Vec::new(),
            waiver_notices: Vec::new(),
            summary: Summary::default(),
        }
    }

    /// An owned `expect:` block, lent to [`compare`] as an [`Expected`].
    struct Expect {
        subjects: BTreeMap<String, String>,
        forbid: Vec<String>,
    }

    fn compare_with(e: &Expect, d: &Diagnosis) -> Vec<Check> {
        compare(
            Expected {
                subjects: &e.subjects,
                forbid: &e.forbid,
            },
            d,
        )
    }

    fn failures(e: &Expect, d: &Diagnosis) -> Vec<Check> {
        compare_with(e, d).into_iter().filter(|c| !c.ok).collect()
    }

    fn expect(subjects: &[(&str, &str)], forbid: &[&str]) -> Expect {
        Expect {
            subjects: subjects
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            forbid: forbid.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_matching_verdict_passes_and_a_wrong_class_is_reported_with_its_summary() {
        let d = diagnosis(vec![verdict(
            SubjectKind::ApiService,
            "v1.a.example.com",
            Class::Aggregation,
            Severity::Critical,
        )]);
        let checks = compare_with(
            &expect(&[("APIService/v1.a.example.com", "Aggregation")], &[]),
            &d,
        );
        assert_eq!(checks.len(), 1);
        assert!(checks[0].ok, "{checks:?}");
        let m = failures(&expect(&[("APIService/v1.a.example.com", "Auth")], &[]), &d);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].expected, "Auth");
        assert_eq!(m[0].got, "Aggregation (critical)");
        assert_eq!(m[0].summary, "v1.a.example.com is Aggregation");
    }

    #[test]
    fn a_missing_subject_and_a_fault_at_info_are_mismatches() {
        let d = diagnosis(vec![verdict(
            SubjectKind::ApiServer,
            "kube-apiserver",
            Class::Storage,
            Severity::Info,
        )]);
        let m = failures(
            &expect(
                &[
                    ("APIServer/kube-apiserver", "Storage"),
                    ("Etcd/etcd", "Storage"),
                ],
                &[],
            ),
            &d,
        );
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0].got, "Storage (info)");
        assert_eq!(
            (m[1].subject.as_str(), m[1].got.as_str()),
            ("Etcd/etcd", "no verdict")
        );
    }

    #[test]
    fn a_pattern_needs_one_match_and_every_match_must_agree() {
        let d = diagnosis(vec![
            verdict(
                SubjectKind::Request,
                "GET /apis/x",
                Class::Auth,
                Severity::Critical,
            ),
            verdict(
                SubjectKind::Request,
                "GET /api/v1",
                Class::Storage,
                Severity::Critical,
            ),
        ]);
        assert!(failures(&expect(&[("Request/GET /apis/*", "Auth")], &[]), &d).is_empty());
        let m = failures(&expect(&[("Request/*", "Auth")], &[]), &d);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].subject, "Request/GET /api/v1");
        let m = failures(&expect(&[("Request/POST *", "Auth")], &[]), &d);
        assert_eq!(m[0].got, "no verdict");
    }

    #[test]
    fn forbidden_classes_count_only_on_unlisted_subjects_at_warning_or_above() {
        let d = diagnosis(vec![
            verdict(
                SubjectKind::ApiServer,
                "kube-apiserver",
                Class::Storage,
                Severity::Warning,
            ),
            verdict(SubjectKind::Etcd, "etcd", Class::Storage, Severity::Info),
            verdict(
                SubjectKind::PriorityLevel,
                "exempt",
                Class::Apf,
                Severity::Critical,
            ),
        ]);
        let m = failures(
            &expect(&[("PriorityLevel/exempt", "APF")], &["Storage", "APF"]),
            &d,
        );
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].subject, "APIServer/kube-apiserver");
        assert_eq!(m[0].expected, "not Storage");
    }
}
