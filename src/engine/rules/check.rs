//! Load-time checks of a rule against the fact model: every field and function it names exists, and
//! every expression evaluates on the fully populated sample.
//!
//! The `cel` crate has no type checker, so two checks stand in for one. The static walk follows each
//! `a.b.c` chain, comprehension variables included, through the shape of the sample facts; it catches
//! a misspelt field even in a branch the sample would short-circuit past. The sample evaluation runs
//! `needs`, `when`, every evidence expression and every template placeholder against the sample
//! subject of the rule's kind; it catches wrong argument types and unknown functions at run time, and
//! requires `when`/`needs` to be booleans.

use std::collections::HashMap;
use std::sync::Arc;

use cel::Value;

use super::shape::{Shape, Walk, is_comprehension_var, line_of, shape_of};
use super::{Expr, Rule, RuleError};
use crate::engine::diagnosis::SubjectKind;
use crate::engine::eval::root_context;
use crate::engine::facts::sample::sample_bundle;
use crate::engine::facts::{COMMON_VARIABLES, FactBase, cluster_vars, subject_vars, variables_for};
use crate::engine::metrics_query::MetricsIndex;
use crate::engine::settings::Settings;
use crate::engine::subjects::{SubjectSource, subjects};

/// The facts of the sample bundle, by subject kind, their shapes, and a context to evaluate in —
/// built once per load, shared by every rule checked.
pub struct SampleWorld {
    contexts: HashMap<SubjectKind, cel::Context<'static, 'static>>,
    shapes: HashMap<SubjectKind, HashMap<String, Shape>>,
}

impl Default for SampleWorld {
    fn default() -> Self {
        Self::new()
    }
}

impl SampleWorld {
    /// Build the sample facts.
    pub fn new() -> Self {
        let bundle = sample_bundle();
        let base = FactBase::new(&bundle);
        let cluster = cluster_vars(&base, &Settings::default());
        let mut by_kind = HashMap::new();
        for e in subjects(&bundle) {
            // The Request whose related objects are all known is the most complete sample.
            if let SubjectSource::Request(_) = &e.source
                && e.related.is_empty()
            {
                continue;
            }
            by_kind
                .entry(e.subject.kind)
                .or_insert_with(|| subject_vars(&base, &e));
        }
        let cluster_shapes: HashMap<String, Shape> = cluster
            .iter()
            .map(|(k, v)| (k.to_string(), shape_of(&v.to_value(), Some(k))))
            .collect();
        let shapes = SubjectKind::ALL
            .iter()
            .map(|kind| {
                let mut m = cluster_shapes.clone();
                for (k, v) in by_kind.get(kind).into_iter().flatten() {
                    m.insert(k.to_string(), shape_of(&v.to_value(), Some(k)));
                }
                (*kind, m)
            })
            .collect();
        let metrics = Arc::new(MetricsIndex::new(&bundle.metrics));
        let contexts = by_kind
            .iter()
            .map(|(kind, vars)| {
                let mut all = cluster.clone();
                all.extend(vars.iter().cloned());
                (*kind, root_context(metrics.clone(), &all))
            })
            .collect();
        SampleWorld { contexts, shapes }
    }
}

fn all_exprs(rule: &Rule) -> Vec<(String, &Expr, bool)> {
    let mut v: Vec<(String, &Expr, bool)> = Vec::new();
    if let Some(n) = &rule.needs {
        v.push(("needs".into(), n, true));
    }
    v.push(("when".into(), &rule.when, true));
    for (name, e) in &rule.evidence {
        v.push((format!("evidence {name}"), e, false));
    }
    for e in rule.summary.exprs() {
        v.push(("summary".into(), e, false));
    }
    for t in &rule.next {
        for e in t.exprs() {
            v.push(("next".into(), e, false));
        }
    }
    for r in &rule.rules_out {
        for e in r.because.exprs() {
            v.push(("because".into(), e, false));
        }
    }
    v
}

/// Check a compiled rule against the fact model.
///
/// # Errors
/// The first unknown variable, field or function, or expression that does not evaluate on the
/// sample, as `file:line: message` ([`check_rule_all`] gives every one).
pub fn check_rule(rule: &Rule, world: &SampleWorld) -> Result<(), RuleError> {
    match check_rule_all(rule, world).into_iter().next() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Every problem of a compiled rule against the fact model: one per expression at most (the first
/// thing wrong in it), for each subject kind, without repeats; empty when the rule is sound.
pub fn check_rule_all(rule: &Rule, world: &SampleWorld) -> Vec<RuleError> {
    let mut errors: Vec<RuleError> = Vec::new();
    // Each kind is checked on its own sample: the kinds of one rule see the same variable names,
    // but not necessarily the same populated shapes, and a rule must run on every kind it names.
    for kind in &rule.subjects {
        for e in check_kind(rule, *kind, world) {
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
    }
    errors
}

fn check_kind(rule: &Rule, kind: SubjectKind, world: &SampleWorld) -> Vec<RuleError> {
    let mut errors = Vec::new();
    // Expressions already wrong by name are not run on the sample too.
    let mut wrong: Vec<usize> = Vec::new();
    let empty = HashMap::new();
    let scope = world.shapes.get(&kind).unwrap_or(&empty);
    let allowed: Vec<&str> = COMMON_VARIABLES
        .iter()
        .chain(variables_for(kind))
        .copied()
        .collect();
    let error = |expr: &Expr, line: usize, message: String| RuleError {
        file: rule.file.clone(),
        line: line.max(expr.line),
        message,
    };
    for (i, (what, expr, _)) in all_exprs(rule).into_iter().enumerate() {
        // Unknown variables first: the walk would report the same mistake less clearly (as a
        // missing field of nothing), and the message lists the variables that do exist.
        let references = expr.program.references();
        let unknown = references.variables().into_iter().find(|v| {
            !allowed.contains(v) && !scope.contains_key(*v) && !is_comprehension_var(expr, v)
        });
        if let Some(v) = unknown {
            errors.push(error(
                expr,
                expr.line,
                format!(
                    "{what}: unknown variable `{v}` for subject {kind} (known: {})",
                    allowed.join(", ")
                ),
            ));
            wrong.push(i);
            continue;
        }
        let walk = Walk {
            source: &expr.source,
            what: &what,
            scope,
            locals: std::cell::RefCell::new(Vec::new()),
        };
        if let Err((id, msg)) = walk.walk(expr.program.expression()) {
            errors.push(error(expr, line_of(walk.source, expr, id), msg));
            wrong.push(i);
        }
    }
    let Some(ctx) = world.contexts.get(&kind) else {
        return errors;
    };
    for (i, (what, expr, boolean)) in all_exprs(rule).into_iter().enumerate() {
        if wrong.contains(&i) {
            continue;
        }
        match expr.program.execute(ctx) {
            Ok(Value::Bool(_)) => {}
            // `needs` and `when` run on every subject and decide on `true`: anything else (a count,
            // a string) is a rule that never fires the way its author meant.
            Ok(other) if boolean => {
                errors.push(error(
                    expr,
                    expr.line,
                    format!(
                        "{what}: must be a boolean, the sample gives {}",
                        short(&other)
                    ),
                ));
            }
            Ok(_) => {}
            // Evidence and templates run only when the rule fires; an index or key that the sample
            // lacks is data, not a mistake. Wrong names, types and calls are mistakes everywhere.
            Err(e) if !boolean && is_data_dependent(&e) => {}
            Err(e) => {
                errors.push(error(
                    expr,
                    expr.line,
                    format!("{what}: does not evaluate on the fact-model sample: {e}"),
                ));
            }
        }
    }
    errors
}

fn is_data_dependent(e: &cel::ExecutionError) -> bool {
    matches!(
        e,
        cel::ExecutionError::IndexOutOfBounds(_)
            | cel::ExecutionError::NoSuchKey(_)
            | cel::ExecutionError::DivisionByZero(_)
            | cel::ExecutionError::RemainderByZero(_)
    )
}

fn short(v: &Value) -> String {
    let s = format!("{v:?}");
    if s.len() > 60 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(60).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}
