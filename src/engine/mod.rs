//! The rule engine: (bundle, rules, settings) → [`Diagnosis`]. Synchronous and pure: no network, no
//! clock (time checks use the bundle's collection time); the only I/O is reading rule files when
//! asked to load them.
//!
//! The pipeline, one module each:
//! * [`subjects`] — which subjects the bundle has (APIServices, webhooks, CRDs, APF objects, the API
//!   server, etcd, failing requests) and which object each observed request concerns;
//! * [`facts`] — the documented fact model rules read (`docs/facts.md`), built once per subject;
//! * [`functions`] and [`metrics_query`] — the CEL function library (metric queries that say whether a
//!   number is windowed or cumulative);
//! * [`rules`] — rule files: loading, checking against the fact model, templates;
//! * [`eval`] — running the rules on every subject;
//! * [`classify`] — one verdict per subject (DESIGN §2), the cluster summary;
//! * [`ruletest`] — the `<id>.test.yaml` runner behind `rules test`;
//! * [`rbac`] — RBAC evaluation over the bundle's roles and bindings (what an identity may do);
//! * [`settings`], [`filter`] — thresholds and `analyze` filters;
//! * [`diagnosis`] — the output contract.
//! * [`waivers`] — waivers files for CI gates; [`gate`] — the `--fail-on` gate policy.
//! * [`why`] — one reproduced request's path, rung by rung, with the verdicts placed on its rungs
//!   (`why`), and [`expect`] — a replayed scenario's verdicts compared with its `expect:` block.

pub mod classify;
pub mod diagnosis;
pub mod eval;
pub mod expect;
pub mod facts;
pub mod filter;
pub mod functions;
pub mod gate;
pub mod metrics_query;
pub mod problems;
pub mod rbac;
pub mod regex_cache;
pub mod rules;
pub mod ruletest;
pub mod settings;
pub mod subjects;
pub mod unproven;
pub mod waivers;
pub mod why;

pub use diagnosis::*;
pub use eval::Deadline;
pub use filter::Filter;
pub use rules::{RuleError, RuleSet};
pub use settings::Settings;

use crate::bundle::EvidenceBundle;

/// Classify a bundle: one verdict per subject, what proves it, what is ruled out, what to run next.
///
/// Pure: the same inputs give the same Diagnosis. Verdict filters (`filter.classes`,
/// `filter.subjects`) apply after classification; rule filters decide which rules run.
pub fn analyze(
    bundle: &EvidenceBundle,
    rules: &RuleSet,
    settings: &Settings,
    filter: &Filter,
) -> Diagnosis {
    analyze_until(bundle, rules, settings, filter, None)
}

/// [`analyze`] bounded by a deadline (`scan --timeout`): the subjects not judged when it passes
/// have no verdict, and one `Inconclusive` critical verdict on `Source/analysis` says how many of
/// which kind were left — the analysis never overruns by more than one subject's rules.
pub fn analyze_until(
    bundle: &EvidenceBundle,
    rules: &RuleSet,
    settings: &Settings,
    filter: &Filter,
    deadline: Option<Deadline>,
) -> Diagnosis {
    let bundle = unproven::without_unproven_health(bundle);
    let evaluation = eval::evaluate_until(&bundle, rules, settings, filter, deadline);
    classify::classify(&evaluation, rules, &bundle, filter)
}
