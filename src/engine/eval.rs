//! Running rules: build the facts (cluster-wide once, each subject once), evaluate every rule of the
//! subject's kind, and record what fired with its rendered evidence, summary, next steps and
//! ruled-out classes. Classification is [`super::classify`]'s job; this module only says what fired.
//!
//! One root CEL context holds the function library and the cluster-wide variables; each subject gets
//! a child scope with its own variables, so nothing is rebuilt per rule.

use std::collections::BTreeMap;
use std::sync::Arc;

use cel::{Context, Value};

use super::diagnosis::{Class, Subject, SubjectKind};
use super::facts::value::{Fact, to_json};
use super::facts::{FactBase, cluster_vars, subject_vars};
use super::filter::Filter;
use super::functions::{env, register};
use super::metrics_query::MetricsIndex;
use super::rules::{Role, Rule, RuleSet};
use super::settings::Settings;
use super::subjects::{SubjectEntry, subjects_with};
use crate::bundle::EvidenceBundle;

/// A root context: the function library over `metrics`, and the cluster-wide variables.
/// The cluster-wide variables are built once and shared by every thread's root.
pub fn root_context(
    metrics: Arc<MetricsIndex>,
    cluster: &[(&'static str, Fact)],
) -> Context<'static, 'static> {
    let mut ctx = Context::with_env(env());
    register(&mut ctx, metrics);
    for (k, v) in cluster {
        ctx.add_variable_as_val(*k, v.to_val());
    }
    ctx
}

/// A subject's scope under a root context.
pub fn subject_context<'p>(
    root: &'p Context<'static, 'static>,
    vars: &[(&'static str, Fact)],
) -> Context<'p, 'static> {
    let mut ctx = root.new_inner_scope();
    for (k, v) in vars {
        ctx.add_variable_as_val(*k, v.to_val());
    }
    ctx
}

/// One rule that fired on one subject.
#[derive(Debug, Clone)]
pub struct Hit {
    /// Index of the rule in the rule set.
    pub rule: usize,
    /// Evidence values by name.
    pub evidence: BTreeMap<String, serde_json::Value>,
    /// Rendered summary.
    pub summary: String,
    /// Rendered next steps.
    pub next: Vec<String>,
    /// Classes ruled out, with rendered reasons.
    pub rules_out: Vec<(Class, String)>,
}

/// What the rules said about one subject.
#[derive(Debug, Clone)]
pub struct SubjectResult {
    /// The subject.
    pub subject: Subject,
    /// Related objects.
    pub related: Vec<Subject>,
    /// Rules that fired.
    pub hits: Vec<Hit>,
    /// Rules of this kind that ran.
    pub rules_run: usize,
    /// Rules of this kind that declare `needs`.
    pub needs_declared: usize,
    /// Rules whose declared `needs` held.
    pub needs_met: usize,
    /// The `needs` expressions that did not hold, as written.
    pub needs_unmet: Vec<String>,
}

/// An expression that failed at run time (data-dependent: the loader evaluated it on the sample).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    /// Rule id.
    pub rule: String,
    /// Subject.
    pub subject: String,
    /// What failed.
    pub message: String,
}

/// Everything that fired, per subject.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// One entry per subject, in subject order.
    pub subjects: Vec<SubjectResult>,
    /// Run-time evaluation errors.
    pub errors: Vec<EvalError>,
    /// When the deadline ran out before every subject was judged: what was left.
    pub cut: Option<Cut>,
}

/// A bound on the analysis (`scan --timeout`): subjects not judged by `at` are left unjudged.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// When the analysis must stop.
    pub at: std::time::Instant,
    /// The `--timeout` it comes from, for the message.
    pub timeout: std::time::Duration,
}

/// The subjects a deadline left unjudged.
#[derive(Debug, Clone)]
pub struct Cut {
    /// The `--timeout` that ran out.
    pub timeout: std::time::Duration,
    /// Subjects judged.
    pub judged: usize,
    /// Subjects not judged, by kind (`APIService` → 9,000).
    pub unjudged: BTreeMap<&'static str, usize>,
}

fn truthy(r: &Result<Value, cel::ExecutionError>) -> Option<bool> {
    match r {
        Ok(Value::Bool(b)) => Some(*b),
        _ => None,
    }
}

fn run_rule(
    rule: &Rule,
    index: usize,
    ctx: &Context<'_, '_>,
    subject: &str,
    result: &mut SubjectResult,
    errors: &mut Vec<EvalError>,
) {
    result.rules_run += 1;
    // `needs` is read whether or not the rule fires: when nothing fires, the classifier tells
    // "healthy" from "could not judge" by whether the evidence the rules need was there
    // (docs/rules.md, `needs`).
    if let Some(n) = &rule.needs {
        result.needs_declared += 1;
        match truthy(&n.program.execute(ctx)) {
            Some(true) => result.needs_met += 1,
            _ => {
                let what = rule.needs_what.as_ref().unwrap_or(&n.source);
                if !result.needs_unmet.contains(what) {
                    result.needs_unmet.push(what.clone());
                }
            }
        }
    }
    // A `when` that fails on this subject's data (the loader ran it on the sample, so the rule
    // itself is sound) does not fire and is reported: one odd object must neither invent a
    // finding nor stop the other subjects from being judged.
    let fired = match rule.when.program.execute(ctx) {
        Ok(Value::Bool(b)) => b,
        Ok(other) => {
            errors.push(EvalError {
                rule: rule.id.clone(),
                subject: subject.to_string(),
                message: format!("when gave {other:?}, not a boolean"),
            });
            false
        }
        Err(e) => {
            errors.push(EvalError {
                rule: rule.id.clone(),
                subject: subject.to_string(),
                message: format!("when: {e}"),
            });
            false
        }
    };
    if !fired {
        return;
    }
    let evidence = rule
        .evidence
        .iter()
        .map(|(name, e)| {
            // Evidence only shows why the rule fired; an error in it keeps the hit, with the
            // error as the value, rather than losing a finding over its illustration.
            let v = match e.program.execute(ctx) {
                Ok(v) => to_json(&v),
                Err(err) => serde_json::Value::String(format!("error: {err}")),
            };
            (name.clone(), v)
        })
        .collect();
    result.hits.push(Hit {
        rule: index,
        evidence,
        summary: rule.summary.render(ctx),
        // A step that renders empty does not apply to this subject (`{{cond ? '…' : ''}}`).
        next: rule
            .next
            .iter()
            .map(|t| t.render(ctx))
            .filter(|n| !n.trim().is_empty())
            .collect(),
        rules_out: rule
            .rules_out
            .iter()
            .map(|r| (r.class, r.because.render(ctx)))
            .collect(),
    });
}

/// Evaluate every rule that the filter lets run on every subject of the bundle.
///
/// Subjects are independent, so they are shared out over the available cores in contiguous runs
/// (each thread with its own CEL context) and the results joined back in subject order: the
/// output is the same as one thread's. A large cluster has thousands of subjects (2,856 at the
/// scale benchmark), and CEL copies a variable's map on every access.
pub fn evaluate(
    bundle: &EvidenceBundle,
    rules: &RuleSet,
    settings: &Settings,
    filter: &Filter,
) -> Evaluation {
    evaluate_until(bundle, rules, settings, filter, None)
}

/// [`evaluate`], stopping at `deadline`: the subjects not judged by then are counted in
/// [`Evaluation::cut`] and have no result.
pub fn evaluate_until(
    bundle: &EvidenceBundle,
    rules: &RuleSet,
    settings: &Settings,
    filter: &Filter,
    deadline: Option<Deadline>,
) -> Evaluation {
    let base = FactBase::new(bundle);
    let metrics = Arc::new(MetricsIndex::new(&bundle.metrics));
    let cluster = cluster_vars(&base, settings);
    let entries = subjects_with(&base.lookup, &base.probe_targets);
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(entries.len().div_ceil(MIN_SUBJECTS_PER_THREAD))
        .max(1);
    // Which rules run on each kind of subject: decided once, not per subject.
    let kind_rules: std::collections::HashMap<SubjectKind, Vec<(usize, &Rule)>> = SubjectKind::ALL
        .iter()
        .map(|&kind| {
            let of_kind = rules
                .rules
                .iter()
                .enumerate()
                .filter(|(_, r)| r.subjects.contains(&kind) && filter.runs_rule(&r.id))
                .collect();
            (kind, of_kind)
        })
        .collect();
    let run = |chunk: &[SubjectEntry<'_>]| {
        let root = root_context(metrics.clone(), &cluster);
        let mut out = Vec::with_capacity(chunk.len());
        let mut errors = Vec::new();
        let mut unjudged: Vec<&'static str> = Vec::new();
        for entry in chunk {
            // Checked per subject, not per rule: a subject is judged with all its rules or not at
            // all, since half its rules could miss the one that decides its class.
            if deadline.is_some_and(|d| std::time::Instant::now() >= d.at) {
                unjudged.push(entry.subject.kind.as_str());
                continue;
            }
            let of_kind = kind_rules
                .get(&entry.subject.kind)
                .map_or(&[][..], Vec::as_slice);
            out.push(evaluate_subject(&base, &root, entry, of_kind, &mut errors));
        }
        (out, errors, unjudged)
    };
    type Part = (Vec<SubjectResult>, Vec<EvalError>, Vec<&'static str>);
    let parts: Vec<Part> = if threads == 1 {
        vec![run(&entries)]
    } else {
        let size = entries.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = entries
                .chunks(size)
                .map(|chunk| scope.spawn(|| run(chunk)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    };
    let mut out = Evaluation {
        subjects: Vec::with_capacity(entries.len()),
        errors: Vec::new(),
        cut: None,
    };
    let mut unjudged: BTreeMap<&'static str, usize> = BTreeMap::new();
    for (subjects, errors, left) in parts {
        out.subjects.extend(subjects);
        out.errors.extend(errors);
        for kind in left {
            *unjudged.entry(kind).or_default() += 1;
        }
    }
    if let Some(d) = deadline.filter(|_| !unjudged.is_empty()) {
        out.cut = Some(Cut {
            timeout: d.timeout,
            judged: out.subjects.len(),
            unjudged,
        });
    }
    out
}

/// Below this many subjects per thread, a thread costs more than it saves.
const MIN_SUBJECTS_PER_THREAD: usize = 200;

fn evaluate_subject(
    base: &FactBase<'_>,
    root: &Context<'static, 'static>,
    entry: &SubjectEntry<'_>,
    kind_rules: &[(usize, &Rule)],
    errors: &mut Vec<EvalError>,
) -> SubjectResult {
    let mut result = SubjectResult {
        subject: entry.subject.clone(),
        related: entry.related.clone(),
        hits: Vec::new(),
        rules_run: 0,
        needs_declared: 0,
        needs_met: 0,
        needs_unmet: Vec::new(),
    };
    if !kind_rules.is_empty() {
        let vars = subject_vars(base, entry);
        let ctx = subject_context(root, &vars);
        let name = entry.subject.to_string();
        for &(i, rule) in kind_rules {
            run_rule(rule, i, &ctx, &name, &mut result, errors);
        }
    }
    result
}

/// Whether a hit decides (rather than only supports).
pub fn decides(rule: &Rule) -> bool {
    rule.role == Role::Verdict
}
