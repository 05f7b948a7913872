//! The engine's findings placed on the request's steps: which rung broke (✗), which passed (✓),
//! which the request never reached (·), and what could not be judged (?).
//!
//! Every rule that fired on a verdict of this path — the request's own verdict, and those of the
//! APIService, webhooks, CRD, FlowSchema, priority level, API server and etcd it passes — lands on
//! the step of its rung and of its component (kube-apiserver's, or the extension API server's: an
//! aggregated request is authenticated and authorized by both, and the rule says whose step it
//! tests): on the step about its own object when it is about one (an APIService's TLS rule on that
//! APIService's TLS step; the request's rules on the steps of the objects the request is related
//! to), else on the path-wide step of that rung (authentication, priority and fairness, storage).
//! A finding with no step of its rung on this path is returned apart, so nothing is lost.
//!
//! The request's verdict decides where it broke: the first step holding one of its deciding rules.
//! When the request failed, steps after it did not see it; they are shown as not reached, with what their evidence
//! says and the findings about their objects (consequences, not this request's failures). Healthy
//! rules and history (cumulative counters) never mark a step.

use super::steps::{Finding, Seen, Step, StepState};
use crate::engine::diagnosis::{Class, Component, Diagnosis, Subject, SubjectKind, Verdict};

fn same(a: &Subject, b: &Subject) -> bool {
    a.kind == b.kind && a.name == b.name
}

struct Placed {
    finding: Finding,
    rung: crate::bundle::Rung,
    component: Component,
    subject: Subject,
    from_request: bool,
}

fn findings(d: &Diagnosis, request: Option<&Verdict>) -> Vec<Placed> {
    let mut out = Vec::new();
    for v in &d.verdicts {
        // A Healthy verdict's rules confirm a step rather than break it, and an Inconclusive one
        // says the evidence could not decide: the step's own evidence (`seen`) speaks for both.
        if matches!(v.class, Class::Healthy | Class::Inconclusive) {
            continue;
        }
        // An informational verdict of the request (a working watch is out of scope for a stale
        // controller) decides nothing about where it broke: it did not.
        let is_request = request.is_some_and(|r| same(&r.subject, &v.subject))
            && v.severity > crate::engine::diagnosis::Severity::Info;
        for r in &v.rules {
            out.push(Placed {
                finding: Finding {
                    rule: r.id.clone(),
                    class: r.class.to_string(),
                    subject: v.subject.to_string(),
                    summary: r.summary.clone(),
                    decides: is_request,
                },
                rung: r.rung,
                component: r.component,
                subject: v.subject.clone(),
                from_request: is_request,
            });
        }
        // Consequences (what a fault of this object does downstream) are shown where they land
        // but never decide: the request broke at the cause, not at its echo.
        for c in &v.consequences {
            out.push(Placed {
                finding: Finding {
                    rule: c.rule.clone(),
                    class: c.class.to_string(),
                    subject: v.subject.to_string(),
                    summary: c.summary.clone(),
                    decides: false,
                },
                rung: c.rung,
                component: c.component,
                subject: v.subject.clone(),
                from_request: is_request,
            });
        }
    }
    out
}

/// Place the diagnosis on the steps and set each step's state. A deciding rule of the request whose
/// rung has no step here (a 404 route on `verb`, an extension's backend on `backend`) gets a step of
/// its own, described by `answer` (what the server answered). `answered` says the request got a
/// success status: then every step was passed through, even the one its verdict is on (a slow
/// webhook, a watch gone stale), and none is "not reached". Returns the other findings that have
/// no step on this path.
pub fn mark(
    steps: &mut Vec<Step>,
    d: &Diagnosis,
    request: Option<&Verdict>,
    answer: &str,
    answered: bool,
) -> Vec<Finding> {
    let related: Vec<&Subject> = request
        .map(|r| r.related.iter().collect())
        .unwrap_or_default();
    let mut leftover = Vec::new();
    for p in findings(d, request) {
        // The step of the finding's component, when the path has one of that rung (an aggregated
        // path has kube-apiserver's authn and the extension server's); else any of the rung.
        let component = if steps
            .iter()
            .any(|s| s.rung == p.rung && s.component == p.component)
        {
            Some(p.component)
        } else {
            None
        };
        let of_rung = |s: &Step| s.rung == p.rung && component.is_none_or(|c| s.component == c);
        let own: Vec<usize> = steps
            .iter()
            .enumerate()
            .filter(|(_, s)| of_rung(s))
            .filter(|(_, s)| {
                s.subject.as_ref().is_some_and(|x| {
                    same(x, &p.subject) || (p.from_request && related.iter().any(|r| same(r, x)))
                })
            })
            .map(|(i, _)| i)
            .collect();
        // A finding about an APIService, webhook or CRD with no step of its own here concerns
        // another path's object: putting it on this path's rung-wide step would blame this
        // request for an object it never touched. Path-wide subjects (API server, etcd, a
        // priority level) have no object step, so the rung-wide step is theirs.
        let object_kinds = [
            SubjectKind::ApiService,
            SubjectKind::ValidatingWebhook,
            SubjectKind::MutatingWebhook,
            SubjectKind::CustomResourceDefinition,
        ];
        let targets: Vec<usize> = if !own.is_empty() {
            own
        } else if object_kinds.contains(&p.subject.kind) {
            Vec::new()
        } else {
            steps
                .iter()
                .enumerate()
                .filter(|(_, s)| of_rung(s) && s.subject.is_none())
                .map(|(i, _)| i)
                .collect()
        };
        if targets.is_empty() {
            if p.finding.decides {
                // After the request-wide steps, before the first step of a later rung: kube-apiserver's
                // filter chain (`DefaultBuildHandlerChain` in apiserver `pkg/server/config.go`)
                // authenticates, applies APF and authorizes every request before any handler, so a
                // handler-level rung (`verb`, `backend`) can only come after authorization.
                let start = steps
                    .iter()
                    .position(|s| s.rung == crate::bundle::Rung::Authz)
                    .map_or(0, |i| i + 1);
                let at = (start..steps.len())
                    .find(|&i| steps[i].rung > p.rung)
                    .unwrap_or(steps.len());
                let mut step = Step::new(p.rung, Seen::Unknown, answer);
                step.component = p.component;
                step.findings.push(p.finding);
                steps.insert(at, step);
            } else {
                leftover.push(p.finding);
            }
            continue;
        }
        for i in targets {
            if !steps[i]
                .findings
                .iter()
                .any(|f| f.rule == p.finding.rule && f.subject == p.finding.subject)
            {
                steps[i].findings.push(p.finding.clone());
            }
        }
    }
    // A rule outranks the step's own evidence: a finding is a judged fault, `seen` only what the
    // trace showed (a bad answer without a rule to explain it is "attention", not a break).
    for s in steps.iter_mut() {
        s.state = if !s.findings.is_empty() {
            StepState::Failed
        } else {
            match s.seen {
                Seen::Ok => StepState::Passed,
                Seen::Bad => StepState::Attention,
                Seen::Unknown => StepState::Unknown,
            }
        };
    }
    // The admission head lists the webhooks a write is sent to; it speaks for the steps about
    // them that follow it, so it never reads ✓ above a webhook that broke.
    for i in 0..steps.len() {
        if steps[i].rung != crate::bundle::Rung::Admission || steps[i].subject.is_some() {
            continue;
        }
        let webhooks = steps[i + 1..]
            .iter()
            .take_while(|s| s.rung == crate::bundle::Rung::Admission && s.subject.is_some());
        let mut worst = steps[i].state;
        for w in webhooks {
            worst = match (worst, w.state) {
                (StepState::Failed, _) | (_, StepState::Failed) => StepState::Failed,
                (StepState::Attention, _) | (_, StepState::Attention) => StepState::Attention,
                (s, _) => s,
            };
        }
        steps[i].state = worst;
    }
    // A request that got a success passed every step, so "not reached" applies only to one that
    // failed; the first deciding step is where it stopped.
    if !answered
        && let Some(broke) = steps
            .iter()
            .position(|s| s.findings.iter().any(|f| f.decides))
    {
        // What lands after the break is about the objects there (an APIService's consequence),
        // not this request, which never got there: listed, but not a ✗ of this request.
        for s in steps.iter_mut().skip(broke + 1) {
            if !s.findings.iter().any(|f| f.decides) {
                s.state = StepState::NotReached;
            }
        }
    }
    leftover
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::Rung;
    use crate::engine::diagnosis::{Consequence, RuleHit, Severity, Summary};

    fn step(rung: Rung, seen: Seen, about: Option<Subject>) -> Step {
        Step {
            rung,
            component: Component::KubeApiserver,
            state: StepState::Unknown,
            object: about.as_ref().map(|s| s.to_string()),
            evidence: String::new(),
            notes: vec![],
            findings: vec![],
            seen,
            subject: about,
        }
    }

    fn verdict(s: Subject, class: Class, rung: Rung, related: Vec<Subject>) -> Verdict {
        Verdict {
            class,
            severity: Severity::Critical,
            confidence: 0.9,
            rung: Some(rung),
            rules: vec![RuleHit {
                id: format!("{}-{rung}", class.as_str().to_lowercase()),
                class,
                severity: Severity::Critical,
                rung,
                component: Default::default(),
                summary: "s".into(),
                evidence: Default::default(),
            }],
            ..Verdict::new(s, related)
        }
    }

    fn diagnosis(verdicts: Vec<Verdict>) -> Diagnosis {
        Diagnosis {
            problems: Vec::new(),
            api_version: String::new(),
            kind: String::new(),
            collected_at: None,
            verdicts,
            gaps: vec![],
            waiver_notices: vec![],
            summary: Summary::default(),
        }
    }

    #[test]
    fn the_request_breaks_at_its_rung_and_later_steps_are_not_reached() {
        let api = Subject::new(SubjectKind::ApiService, "v1alpha1.wardle.example.com");
        let req = Subject::new(
            SubjectKind::Request,
            "GET /apis/wardle.example.com/v1alpha1/flunders",
        );
        let mut steps = vec![
            step(Rung::Authn, Seen::Ok, None),
            step(Rung::Flowcontrol, Seen::Ok, None),
            step(Rung::Service, Seen::Ok, Some(api.clone())),
            step(Rung::Tls, Seen::Bad, Some(api.clone())),
            step(Rung::Discovery, Seen::Ok, Some(api.clone())),
            step(Rung::Storage, Seen::Bad, None),
        ];
        let request = verdict(req, Class::Aggregation, Rung::Tls, vec![api.clone()]);
        let mut own = verdict(api.clone(), Class::Aggregation, Rung::Tls, vec![]);
        own.consequences.push(Consequence {
            rule: "aggregation-discovery-x".into(),
            class: Class::Aggregation,
            rung: Rung::Discovery,
            component: Default::default(),
            summary: "c".into(),
        });
        let healthy = verdict(
            Subject::new(SubjectKind::ApiServer, "kube-apiserver"),
            Class::Healthy,
            Rung::Flowcontrol,
            vec![],
        );
        let d = diagnosis(vec![request.clone(), own, healthy]);
        let leftover = mark(&mut steps, &d, Some(&request), "answered 503", false);
        assert!(leftover.is_empty());
        let states: Vec<StepState> = steps.iter().map(|s| s.state).collect();
        assert_eq!(
            states,
            [
                StepState::Passed,
                StepState::Passed,
                StepState::Passed,
                StepState::Failed,
                StepState::NotReached,
                StepState::NotReached,
            ]
        );
        assert_eq!(
            steps[4].findings.len(),
            1,
            "the APIService's consequence is still listed on the step it is about"
        );
        assert_eq!(
            steps[3].findings.len(),
            2,
            "the request's and the APIService's"
        );
        assert!(steps[3].findings.iter().any(|f| f.decides));
    }

    #[test]
    fn path_wide_findings_land_on_path_wide_steps_and_the_rest_is_kept() {
        let req = Subject::new(SubjectKind::Request, "GET /api/v1/namespaces/a/configmaps");
        let mut steps = vec![
            step(Rung::Authn, Seen::Ok, None),
            step(Rung::Flowcontrol, Seen::Bad, None),
            step(Rung::Authz, Seen::Unknown, None),
            step(Rung::Storage, Seen::Ok, None),
        ];
        let request = verdict(req, Class::Apf, Rung::Flowcontrol, vec![]);
        let level = verdict(
            Subject::new(SubjectKind::PriorityLevel, "tiny"),
            Class::Apf,
            Rung::Flowcontrol,
            vec![],
        );
        let elsewhere = verdict(
            Subject::new(SubjectKind::ApiServer, "kube-apiserver"),
            Class::Watch,
            Rung::Watch,
            vec![],
        );
        let d = diagnosis(vec![request.clone(), level, elsewhere]);
        let leftover = mark(&mut steps, &d, Some(&request), "answered 503", false);
        assert_eq!(leftover.len(), 1, "no watch step on this path");
        assert_eq!(steps[1].findings.len(), 2);
        assert_eq!(steps[0].state, StepState::Passed);
        assert_eq!(steps[2].state, StepState::NotReached);
        assert_eq!(steps[3].state, StepState::NotReached);

        // Without a failing request nothing is "not reached"; bad evidence without a rule is
        // attention.
        let mut steps = vec![step(Rung::Storage, Seen::Bad, None)];
        mark(
            &mut steps,
            &diagnosis(vec![]),
            None,
            "answered 200 OK",
            true,
        );
        assert_eq!(steps[0].state, StepState::Attention);
    }

    #[test]
    fn the_extension_servers_authn_is_its_own_step_after_tls_and_discovery() {
        let api = Subject::new(SubjectKind::ApiService, "v1alpha1.wardle.example.com");
        let req = Subject::new(
            SubjectKind::Request,
            "GET /apis/wardle.example.com/v1alpha1/flunders",
        );
        let ext = |mut s: Step| {
            s.component = Component::ExtensionApiserver;
            s
        };
        let mut steps = vec![
            step(Rung::Authn, Seen::Ok, None),
            step(Rung::Flowcontrol, Seen::Ok, None),
            step(Rung::Authz, Seen::Ok, None),
            step(Rung::Service, Seen::Ok, Some(api.clone())),
            step(Rung::Tls, Seen::Ok, Some(api.clone())),
            step(Rung::Discovery, Seen::Ok, Some(api.clone())),
            ext(step(Rung::Authn, Seen::Bad, Some(api.clone()))),
            ext(step(Rung::Authz, Seen::Unknown, Some(api.clone()))),
            ext(step(Rung::Verb, Seen::Unknown, Some(api.clone()))),
        ];
        let mut request = verdict(req, Class::Auth, Rung::Authn, vec![api.clone()]);
        request.rules[0].component = Component::ExtensionApiserver;
        let mut own = verdict(api.clone(), Class::Auth, Rung::Authn, vec![]);
        own.rules[0].component = Component::ExtensionApiserver;
        // A user's 401 at kube-apiserver, on another verdict, stays on kube-apiserver's step.
        let user = verdict(
            Subject::new(SubjectKind::Request, "GET /apis/other"),
            Class::Auth,
            Rung::Authn,
            vec![],
        );
        let d = diagnosis(vec![request.clone(), own, user]);
        mark(&mut steps, &d, Some(&request), "answered 503", false);
        let states: Vec<StepState> = steps.iter().map(|s| s.state).collect();
        assert_eq!(
            states,
            [
                StepState::Failed,
                StepState::Passed,
                StepState::Passed,
                StepState::Passed,
                StepState::Passed,
                StepState::Passed,
                StepState::Failed,
                StepState::NotReached,
                StepState::NotReached,
            ]
        );
        assert_eq!(
            steps[6].findings.len(),
            2,
            "the request's and the APIService's"
        );
        assert!(steps[6].findings.iter().any(|f| f.decides));
        assert!(
            steps[0].findings.iter().all(|f| !f.decides),
            "kube-apiserver's authn holds only the other request's finding"
        );
    }

    #[test]
    fn a_deciding_rule_without_a_step_gets_one_where_its_rung_belongs() {
        let req = Subject::new(SubjectKind::Request, "GET /apis/nope.example.com/v1/things");
        let mut steps = vec![
            step(Rung::Authn, Seen::Ok, None),
            step(Rung::Flowcontrol, Seen::Ok, None),
            step(Rung::Authz, Seen::Ok, None),
            step(Rung::Registration, Seen::Bad, None),
            step(Rung::Storage, Seen::Ok, None),
        ];
        let request = verdict(req, Class::OutOfScope, Rung::Verb, vec![]);
        let d = diagnosis(vec![request.clone()]);
        let leftover = mark(
            &mut steps,
            &d,
            Some(&request),
            "answered 404 Not Found",
            false,
        );
        assert!(leftover.is_empty());
        let rungs: Vec<Rung> = steps.iter().map(|s| s.rung).collect();
        assert_eq!(
            rungs,
            [
                Rung::Authn,
                Rung::Flowcontrol,
                Rung::Authz,
                Rung::Registration,
                Rung::Verb,
                Rung::Storage
            ]
        );
        assert_eq!(steps[4].state, StepState::Failed);
        assert_eq!(steps[4].evidence, "answered 404 Not Found");
        assert_eq!(steps[5].state, StepState::NotReached);
    }
}
