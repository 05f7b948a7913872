//! Problems: verdicts grouped by root cause.
//!
//! One stalled etcd gives a Storage verdict on etcd, another on kube-apiserver (its readyz fails
//! because etcd does) and one on every request that timed out; an unavailable APIService gives one
//! on the APIService and one on every request that went through it. Those are one problem each,
//! not nine rows. A problem is a root verdict — a fault (a class other than `Healthy` and
//! `Inconclusive`) at warning or above — with the verdicts it explains folded under it:
//!
//! * a Request whose related object (the APIService, webhook or CRD it went through) has a fault
//!   verdict of the same class;
//! * a FlowSchema whose priority level has an APF fault;
//! * kube-apiserver's Storage verdict when etcd has one, its APF verdict when a priority level has
//!   one (the worst);
//! * a Request with a Storage verdict when etcd has one, an APF verdict when a priority level or
//!   kube-apiserver has one, or an Auth verdict when kube-apiserver has one (its own authenticator
//!   or authorizer failing: every request it judges meets it), and no related object of its own.
//!
//! Everything else at warning or above is a problem of its own. `Inconclusive` verdicts are not
//! problems (nothing was found to be broken) and `Healthy` ones are not either; both stay in
//! `verdicts`. The grouping reads only verdicts, so it needs no evidence and is the same for a
//! live scan and an offline bundle.
//!
//! What it does not own: deciding classes (the classifier), waivers (`waivers.rs` refreshes a
//! problem's severity after applying them).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use super::diagnosis::{Class, Severity, Subject, SubjectKind, Verdict};

/// One root cause and the verdicts it explains.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Problem {
    /// The root verdict's class.
    pub class: Class,
    /// The worst severity among the root and its members that is not waived (the root's when all
    /// are waived).
    pub severity: Severity,
    /// The subject of the root verdict.
    pub root: Subject,
    /// The root verdict's summary.
    pub summary: String,
    /// The subjects of the verdicts it explains, besides the root (their verdicts are in
    /// `verdicts`).
    pub members: Vec<Subject>,
    /// Every verdict of the problem is waived.
    pub waived: bool,
}

fn is_fault(v: &Verdict) -> bool {
    !matches!(v.class, Class::Healthy | Class::Inconclusive) && v.severity >= Severity::Warning
}

/// The verdicts by subject and the worst fault of each (kind, class), built once per grouping so
/// that finding a verdict's parent is a lookup, not a scan of every verdict.
pub struct VerdictIndex<'v> {
    by_subject: HashMap<&'v Subject, Vec<usize>>,
    worst_fault: HashMap<(SubjectKind, Class), usize>,
}

impl<'v> VerdictIndex<'v> {
    /// Index a verdict list.
    pub fn new(verdicts: &'v [Verdict]) -> Self {
        let mut by_subject: HashMap<&Subject, Vec<usize>> = HashMap::new();
        let mut worst_fault: HashMap<(SubjectKind, Class), usize> = HashMap::new();
        for (j, x) in verdicts.iter().enumerate() {
            by_subject.entry(&x.subject).or_default().push(j);
            if is_fault(x) {
                // The worst such fault, then the first by subject (the last of equals, as
                // `Iterator::max_by` keeps): a stable choice.
                let worse = |cur: &Verdict| {
                    x.severity
                        .cmp(&cur.severity)
                        .then(cur.subject.cmp(&x.subject))
                        != std::cmp::Ordering::Less
                };
                worst_fault
                    .entry((x.subject.kind, x.class))
                    .and_modify(|cur| {
                        if worse(&verdicts[*cur]) {
                            *cur = j;
                        }
                    })
                    .or_insert(j);
            }
        }
        VerdictIndex {
            by_subject,
            worst_fault,
        }
    }

    /// The indexes of the verdicts on `s`, in list order.
    fn of(&self, s: &Subject) -> &[usize] {
        self.by_subject.get(s).map_or(&[], Vec::as_slice)
    }
}

/// The index of the verdict a fault verdict is explained by, if any (one step).
fn parent(verdicts: &[Verdict], index: &VerdictIndex<'_>, i: usize) -> Option<usize> {
    let v = &verdicts[i];
    let fault_on = |s: &Subject, class: Class| {
        index
            .of(s)
            .iter()
            .copied()
            .find(|&j| verdicts[j].class == class && is_fault(&verdicts[j]))
    };
    let fault_of_kind =
        |kind: SubjectKind, class: Class| index.worst_fault.get(&(kind, class)).copied();
    match v.subject.kind {
        // Only a fault of the *same* class explains a request: a 429 on a request through a
        // broken APIService is APF's doing, and folding it under the APIService would hide it.
        SubjectKind::Request => v
            .related
            .iter()
            .find_map(|r| fault_on(r, v.class))
            .or_else(|| match v.class {
                // Only a request with no extension object of its own: one that went through an
                // APIService hits the extension server's storage, which is not this etcd (DESIGN
                // rule 3).
                Class::Storage if v.related.is_empty() => fault_of_kind(SubjectKind::Etcd, v.class),
                Class::Apf if v.related.is_empty() => {
                    fault_of_kind(SubjectKind::PriorityLevel, v.class)
                        // No priority level to blame (APF off, so max-in-flight rejected it, or the
                        // APF metrics were not read): the 429 is still the API server's own
                        // overload.
                        .or_else(|| fault_of_kind(SubjectKind::ApiServer, v.class))
                }
                // A request refused by kube-apiserver's own authentication or authorization (an
                // authorization webhook that cannot be reached) while kube-apiserver has that
                // Auth fault: the request is the symptom. A request through an APIService is
                // judged again by the extension server, whose delegated auth is not this.
                Class::Auth if v.related.is_empty() => {
                    fault_of_kind(SubjectKind::ApiServer, v.class)
                }
                _ => None,
            }),
        SubjectKind::FlowSchema => v.related.iter().find_map(|r| fault_on(r, v.class)),
        SubjectKind::ApiServer => match v.class {
            // kube-apiserver's `/readyz/etcd` check fails because etcd does: the API server is the
            // messenger, etcd the cause.
            Class::Storage => fault_of_kind(SubjectKind::Etcd, v.class),
            Class::Apf => fault_of_kind(SubjectKind::PriorityLevel, v.class),
            _ => None,
        },
        _ => None,
    }
    .filter(|&p| p != i)
}

/// Group the verdicts into problems, worst first (the order of the roots in `verdicts`, which is
/// worst first already).
pub fn group(verdicts: &[Verdict]) -> Vec<Problem> {
    let index = VerdictIndex::new(verdicts);
    let faults: Vec<usize> = (0..verdicts.len())
        .filter(|&i| is_fault(&verdicts[i]))
        .collect();
    let root_of = |mut i: usize| {
        // Chains are short (Request → APIServer → PriorityLevel); the bound guards the unexpected.
        for _ in 0..8 {
            match parent(verdicts, &index, i) {
                Some(p) if is_fault(&verdicts[p]) => i = p,
                _ => break,
            }
        }
        i
    };
    let mut problems: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut problem_of_root: HashMap<usize, usize> = HashMap::new();
    for &i in &faults {
        let r = root_of(i);
        match problem_of_root.get(&r) {
            Some(&k) => {
                if i != r {
                    problems[k].1.push(i);
                }
            }
            None => {
                problem_of_root.insert(r, problems.len());
                problems.push((r, if i == r { Vec::new() } else { vec![i] }));
            }
        }
    }
    let mut out: Vec<Problem> = problems
        .into_iter()
        .map(|(r, members)| {
            let root = &verdicts[r];
            let mut p = Problem {
                class: root.class,
                severity: root.severity,
                root: root.subject.clone(),
                summary: root.summary.clone(),
                members: members
                    .iter()
                    .map(|&m| verdicts[m].subject.clone())
                    .collect(),
                waived: false,
            };
            refresh_with(&mut p, verdicts, &index);
            p
        })
        .collect();
    sort(&mut out);
    out
}

/// Problems that count first, then the worst, then by class and root (stable output, so that two
/// runs on one bundle diff cleanly). Waived problems go last: they are listed, so that an expired
/// or too-broad waiver can be noticed, but never above one someone has to act on.
pub fn sort(problems: &mut [Problem]) {
    problems.sort_by(|a, b| {
        a.waived
            .cmp(&b.waived)
            .then(b.severity.cmp(&a.severity))
            .then(a.class.cmp(&b.class))
            .then(a.root.cmp(&b.root))
    });
}

/// Recompute a problem's severity and `waived` from its verdicts (after waivers were applied).
pub fn refresh(p: &mut Problem, verdicts: &[Verdict]) {
    refresh_with(p, verdicts, &VerdictIndex::new(verdicts));
}

/// [`refresh`] with the verdicts already indexed (many problems, one index).
pub fn refresh_with(p: &mut Problem, verdicts: &[Verdict], index: &VerdictIndex<'_>) {
    let of = |s: &Subject| index.of(s).first().map(|&j| &verdicts[j]);
    let all: Vec<&Verdict> = std::iter::once(&p.root)
        .chain(p.members.iter())
        .filter_map(of)
        .collect();
    // A member can be worse than its root (a critical request failure behind a warning on the
    // APIService): the problem is as bad as the worst verdict in it that still counts.
    p.waived = !all.is_empty() && all.iter().all(|v| v.waived.is_some());
    p.severity = all
        .iter()
        .filter(|v| p.waived || v.waived.is_none())
        .map(|v| v.severity)
        .max()
        .unwrap_or(p.severity);
}

/// The problems of a verdict list that are not waived.
pub fn open(problems: &[Problem]) -> impl Iterator<Item = &Problem> {
    problems.iter().filter(|p| !p.waived)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(
        kind: SubjectKind,
        name: &str,
        class: Class,
        sev: Severity,
        related: &[Subject],
    ) -> Verdict {
        let s = Subject::new(kind, name);
        let mut v = Verdict::new(s, related.to_vec());
        v.class = class;
        v.severity = sev;
        v.summary = format!("{name} broke");
        v
    }

    #[test]
    fn a_stalled_etcd_is_one_problem_and_echoes_fold_under_their_object() {
        use Class::*;
        use Severity::*;
        use SubjectKind::*;
        let api = Subject::new(ApiService, "v1.a.example.com");
        let verdicts = vec![
            v(Etcd, "etcd", Storage, Critical, &[]),
            v(ApiServer, "kube-apiserver", Storage, Critical, &[]),
            v(
                Request,
                "POST /api/v1/namespaces/x/configmaps",
                Storage,
                Critical,
                &[],
            ),
            v(Request, "GET /api/v1/pods", Storage, Critical, &[]),
            v(ApiService, "v1.a.example.com", Aggregation, Critical, &[]),
            v(
                Request,
                "GET /apis/a.example.com/v1",
                Aggregation,
                Critical,
                std::slice::from_ref(&api),
            ),
            v(ApiService, "v1.b.example.com", Healthy, Info, &[]),
            v(MutatingWebhook, "m.example.com", Inconclusive, Warning, &[]),
        ];
        let p = group(&verdicts);
        assert_eq!(p.len(), 2, "{p:#?}");
        let etcd = p
            .iter()
            .find(|x| x.root.kind == Etcd)
            .expect("etcd is a root");
        assert_eq!(etcd.members.len(), 3);
        let agg = p
            .iter()
            .find(|x| x.root == api)
            .expect("the APIService is a root");
        assert_eq!(agg.members.len(), 1);
    }

    #[test]
    fn apf_verdicts_gather_under_the_saturated_priority_level() {
        use Class::*;
        use Severity::*;
        use SubjectKind::*;
        let pl = Subject::new(PriorityLevel, "workload-low");
        let verdicts = vec![
            v(PriorityLevel, "workload-low", Apf, Critical, &[]),
            v(
                FlowSchema,
                "service-accounts",
                Apf,
                Critical,
                std::slice::from_ref(&pl),
            ),
            v(ApiServer, "kube-apiserver", Apf, Critical, &[]),
            v(Request, "PATCH /apis/apps/v1/x", Apf, Critical, &[]),
            v(FlowSchema, "system-nodes", Healthy, Info, &[]),
        ];
        let p = group(&verdicts);
        assert_eq!(p.len(), 1, "{p:#?}");
        assert_eq!(p[0].root, pl);
        assert_eq!(p[0].members.len(), 3);
    }

    #[test]
    fn a_failing_authorizer_explains_the_requests_it_refused() {
        use Class::*;
        use Severity::*;
        use SubjectKind::*;
        let api = Subject::new(ApiService, "v1.a.example.com");
        let verdicts = vec![
            v(ApiServer, "kube-apiserver", Auth, Critical, &[]),
            v(Request, "GET /api/v1/namespaces/x", Auth, Critical, &[]),
            // Through an APIService: the extension's delegated auth, a problem of its own.
            v(
                Request,
                "GET /apis/a.example.com/v1/xs",
                Auth,
                Critical,
                std::slice::from_ref(&api),
            ),
        ];
        let p = group(&verdicts);
        assert_eq!(p.len(), 2, "{p:#?}");
        let kas = p.iter().find(|p| p.root.kind == ApiServer).unwrap();
        assert_eq!(kas.members.len(), 1);
        assert_eq!(kas.members[0].kind, Request);
    }

    #[test]
    fn a_problem_whose_verdicts_are_all_waived_is_waived() {
        use Class::*;
        use Severity::*;
        use SubjectKind::*;
        let mut verdicts = vec![v(
            ApiService,
            "v1.a.example.com",
            Aggregation,
            Critical,
            &[],
        )];
        verdicts[0].waived = Some(crate::engine::diagnosis::AppliedWaiver {
            reason: "known".into(),
            expires: "2999-01-01".into(),
        });
        let p = group(&verdicts);
        assert!(p[0].waived);
        assert!(open(&p).next().is_none());
    }
}
