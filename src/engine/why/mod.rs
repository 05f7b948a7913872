//! Where one reproduced request (`why`) broke: its path described rung by rung from the evidence,
//! with the engine's verdicts placed on those rungs.
//!
//! The pipeline of `why` after collection, pure like classification:
//! * [`steps`] and [`objects`] describe — the rungs a request passes, in kube-apiserver's order, each
//!   with what the evidence shows there (and whether it looks sound on its own);
//! * [`ladder`] judges — it places every rule that fired on this path on the step of its rung and
//!   object, and says which step broke, which passed and which the request never reached;
//! * [`explain`] ties them: the request's own verdict, its steps, the findings with no step here.
//!
//! What this module does not own: reproducing the request or gathering its path (`collect::why`
//! produces the [`Investigation`]), classifying (the [`Diagnosis`] comes from [`super::analyze`]), or
//! drawing the result (`report::why`).

pub mod ladder;
pub mod objects;
pub mod steps;

pub use steps::{Finding, Seen, Step, StepState, status_line};

use crate::bundle::trace::{Investigation, Method};
use crate::engine::diagnosis::{Class, Diagnosis, SubjectKind, Verdict};

/// A request's path as judged: its steps, the findings with no step on it, and its own verdict.
#[derive(Debug, Clone)]
pub struct Explained<'d> {
    /// The request's own verdict; `None` when it succeeded and nothing slowed or staled it.
    pub verdict: Option<&'d Verdict>,
    /// The steps, rung by rung, each with its state and the findings placed on it.
    pub path: Vec<Step>,
    /// Findings of this path with no step of their rung.
    pub other: Vec<Finding>,
}

/// The request's own verdict: the Request subject named after the reproduced request. A Healthy
/// one is no verdict: the request succeeded and nothing slowed or staled it.
pub fn request_verdict<'d>(d: &'d Diagnosis, inv: &Investigation) -> Option<&'d Verdict> {
    let p = inv.probe();
    let bare = p
        .path
        .as_deref()
        .unwrap_or("")
        .split('?')
        .next()
        .unwrap_or("");
    let method = if inv.trace.method == Method::Watch {
        "WATCH".to_string()
    } else {
        p.method.clone().unwrap_or_else(|| "GET".into())
    };
    let name = format!("{method} {bare}");
    d.verdicts
        .iter()
        .filter(|v| v.subject.kind == SubjectKind::Request)
        .filter(|v| v.class != Class::Healthy)
        .find(|v| v.subject.name == name || v.subject.name.starts_with(&format!("{name} ")))
}

/// Describe the investigated request's path and place the diagnosis of it on its rungs.
pub fn explain<'d>(inv: &Investigation, d: &'d Diagnosis) -> Explained<'d> {
    let verdict = request_verdict(d, inv);
    let mut path = steps::observe(inv);
    let answer = match inv.probe().status {
        Some(s) => format!("answered {}", status_line(s)),
        None => "no response".to_string(),
    };
    let answered = inv.probe().status.is_some_and(|s| (200..400).contains(&s));
    let other = ladder::mark(&mut path, d, verdict, &answer, answered);
    Explained {
        verdict,
        path,
        other,
    }
}
