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
use std::rc::Rc;
use std::sync::Arc;

use cel::Value;
use cel::common::ast::{EntryExpr, Expr as Ast, IdedExpr, LiteralValue};
use cel::objects::Key;

use super::{Expr, Rule, RuleError};
use crate::engine::diagnosis::SubjectKind;
use crate::engine::eval::root_context;
use crate::engine::facts::sample::sample_bundle;
use crate::engine::facts::{COMMON_VARIABLES, FactBase, cluster_vars, subject_vars, variables_for};
use crate::engine::functions::{FUNCTIONS, counter_value, gauge_value, histogram_value};
use crate::engine::metrics_query::{CounterAnswer, GaugeAnswer, HistogramAnswer, MetricsIndex};
use crate::engine::settings::Settings;
use crate::engine::subjects::{SubjectSource, subjects};

/// Functions, macros and operators of CEL's standard library and string extension that rules may use.
const STANDARD: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "string",
    "int",
    "uint",
    "double",
    "bool",
    "bytes",
    "type",
    "dyn",
    "has",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "max",
    "min",
    "timestamp",
    "duration",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "replace",
    "split",
    "substring",
    "trim",
    "format",
    "quote",
    "reverse",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getFullYear",
    "getHours",
    "getMilliseconds",
    "getMinutes",
    "getMonth",
    "getSeconds",
];

/// Keys whose maps have arbitrary keys (labels, counts): any field may be read from them.
const DYNAMIC_MAPS: &[&str] = &[
    "labels",
    "status_counts",
    "fields",
    "match_labels",
    "selector",
];

/// The shape of a fact value, for the static walk.
#[derive(Debug, Clone)]
enum Shape {
    Any,
    Scalar,
    List(Rc<Shape>),
    Map(Rc<HashMap<String, Shape>>),
    DynMap,
}

fn shape_of(v: &Value, key: Option<&str>) -> Shape {
    match v {
        Value::Map(m) => {
            if key.is_some_and(|k| DYNAMIC_MAPS.contains(&k)) {
                return Shape::DynMap;
            }
            Shape::Map(Rc::new(
                m.map
                    .iter()
                    .filter_map(|(k, v)| match k {
                        Key::String(s) => Some((s.to_string(), shape_of(v, Some(s)))),
                        _ => None,
                    })
                    .collect(),
            ))
        }
        Value::List(l) => Shape::List(Rc::new(l.first().map_or(Shape::Any, |x| shape_of(x, None)))),
        _ => Shape::Scalar,
    }
}

fn function_result(name: &str) -> Option<Shape> {
    let v = match name {
        "counter" => counter_value(&CounterAnswer::default()),
        "gauge" => gauge_value(&GaugeAnswer::default()),
        "quantile" | "quantile_cumulative" | "above" => histogram_value(&HistogramAnswer {
            basis: "none",
            ..HistogramAnswer::default()
        }),
        "series" => {
            let row = crate::engine::facts::value::Obj::new()
                .v("labels", crate::engine::facts::value::Obj::new().build())
                .f("value", 0.0)
                .f("increase", 0.0)
                .f("rate", 0.0)
                .build();
            return Some(Shape::List(Rc::new(shape_of(&row, None))));
        }
        "human_seconds" | "human_bytes" | "percent" => return Some(Shape::Scalar),
        _ => return None,
    };
    Some(shape_of(&v, None))
}

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
            .map(|(k, v)| (k.to_string(), shape_of(v, Some(k))))
            .collect();
        let shapes = SubjectKind::ALL
            .iter()
            .map(|kind| {
                let mut m = cluster_shapes.clone();
                for (k, v) in by_kind.get(kind).into_iter().flatten() {
                    m.insert(k.to_string(), shape_of(v, Some(k)));
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

struct Walk<'a> {
    source: &'a str,
    what: &'a str,
    scope: &'a HashMap<String, Shape>,
    locals: std::cell::RefCell<Vec<(String, Shape)>>,
}

fn line_of(source: &str, expr: &Expr, id: u64) -> usize {
    let offset = expr
        .program
        .source_info()
        .offset_for(id)
        .map_or(0, |(s, _)| s as usize);
    expr.line + source.chars().take(offset).filter(|c| *c == '\n').count()
}

impl Walk<'_> {
    fn lookup(&self, name: &str) -> Option<Shape> {
        self.locals
            .borrow()
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
            .or_else(|| self.scope.get(name).cloned())
    }

    fn walk(&self, e: &IdedExpr) -> Result<Shape, (u64, String)> {
        match &e.expr {
            Ast::Ident(name) => match self.lookup(name) {
                Some(s) => Ok(s.clone()),
                None if [
                    "int",
                    "uint",
                    "double",
                    "bool",
                    "string",
                    "bytes",
                    "list",
                    "map",
                    "null_type",
                    "type",
                ]
                .contains(&name.as_str()) =>
                {
                    Ok(Shape::Any)
                }
                None => Err((e.id, format!("{}: unknown variable `{name}`", self.what))),
            },
            Ast::Select(sel) => {
                let inner_path = describe(&sel.operand);
                let base = self.walk(&sel.operand)?;
                match base {
                    Shape::Map(m) => match m.get(&sel.field) {
                        Some(s) => Ok(s.clone()),
                        None if sel.test => Ok(Shape::Scalar),
                        None => {
                            let mut known: Vec<&String> = m.keys().collect();
                            known.sort();
                            Err((
                                e.id,
                                format!(
                                    "{}: `{inner_path}` has no field `{}` (it has: {})",
                                    self.what,
                                    sel.field,
                                    known
                                        .iter()
                                        .map(|s| s.as_str())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            ))
                        }
                    },
                    Shape::List(_) => Err((
                        e.id,
                        format!(
                            "{}: `{inner_path}` is a list; `.{}` needs an element (use exists/all/map)",
                            self.what, sel.field
                        ),
                    )),
                    Shape::Scalar => Err((
                        e.id,
                        format!(
                            "{}: `{inner_path}` is not a map; it has no field `{}`",
                            self.what, sel.field
                        ),
                    )),
                    Shape::DynMap | Shape::Any => Ok(Shape::Any),
                }
            }
            Ast::Call(call) => {
                let mut target_shape = None;
                if let Some(t) = &call.target {
                    target_shape = Some(self.walk(t)?);
                }
                let mut arg_shapes = Vec::new();
                for a in &call.args {
                    arg_shapes.push(self.walk(a)?);
                }
                let f = call.func_name.as_str();
                let operator = f.starts_with('_')
                    || f.starts_with('@')
                    || f.starts_with('!')
                    || f.starts_with('-');
                if !operator && !STANDARD.contains(&f) && !FUNCTIONS.contains(&f) {
                    return Err((e.id, format!("{}: unknown function `{f}`", self.what)));
                }
                if let Some(s) = function_result(f).filter(|_| call.target.is_none()) {
                    return Ok(s);
                }
                if f == "_[_]" {
                    let base = arg_shapes.first().cloned().unwrap_or(Shape::Any);
                    return Ok(match base {
                        Shape::List(el) => (*el).clone(),
                        Shape::Map(m) => match call.args.get(1).map(|a| &a.expr) {
                            Some(Ast::Literal(LiteralValue::String(s))) => {
                                m.get(s.inner()).cloned().ok_or_else(|| {
                                    (
                                        e.id,
                                        format!(
                                            "{}: `{}` has no key `{}`",
                                            self.what,
                                            describe(&call.args[0]),
                                            s.inner()
                                        ),
                                    )
                                })?
                            }
                            _ => Shape::Any,
                        },
                        _ => Shape::Any,
                    });
                }
                let _ = target_shape;
                Ok(Shape::Any)
            }
            Ast::Comprehension(c) => {
                let range = self.walk(&c.iter_range)?;
                let element = match range {
                    Shape::List(el) => (*el).clone(),
                    Shape::Map(_) | Shape::DynMap => Shape::Scalar,
                    _ => Shape::Any,
                };
                let depth = self.locals.borrow().len();
                self.locals.borrow_mut().push((c.iter_var.clone(), element));
                if let Some(v2) = &c.iter_var2 {
                    self.locals.borrow_mut().push((v2.clone(), Shape::Any));
                }
                let result = (|| {
                    self.walk(&c.accu_init)?;
                    self.locals
                        .borrow_mut()
                        .push((c.accu_var.clone(), Shape::Any));
                    self.walk(&c.loop_cond)?;
                    self.walk(&c.loop_step)?;
                    self.walk(&c.result)
                })();
                self.locals.borrow_mut().truncate(depth);
                result.map(|_| Shape::Any)
            }
            Ast::List(l) => {
                for x in &l.elements {
                    self.walk(x)?;
                }
                Ok(Shape::Any)
            }
            Ast::Map(m) => {
                for entry in &m.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        self.walk(&me.key)?;
                        self.walk(&me.value)?;
                    }
                }
                Ok(Shape::Any)
            }
            Ast::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        self.walk(&f.value)?;
                    }
                }
                Ok(Shape::Any)
            }
            Ast::Literal(_) => Ok(Shape::Scalar),
            Ast::Unspecified => Ok(Shape::Any),
        }
    }
}

fn describe(e: &IdedExpr) -> String {
    match &e.expr {
        Ast::Ident(n) => n.clone(),
        Ast::Select(s) => format!("{}.{}", describe(&s.operand), s.field),
        Ast::Call(c) => format!("{}(…)", c.func_name),
        _ => "expression".into(),
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
/// sample, as `file:line: message`.
pub fn check_rule(rule: &Rule, world: &SampleWorld) -> Result<(), RuleError> {
    for kind in &rule.subjects {
        check_kind(rule, *kind, world)?;
    }
    Ok(())
}

fn check_kind(rule: &Rule, kind: SubjectKind, world: &SampleWorld) -> Result<(), RuleError> {
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
    for (what, expr, _) in all_exprs(rule) {
        for v in expr.program.references().variables() {
            if !allowed.contains(&v) && !scope.contains_key(v) && !is_comprehension_var(expr, v) {
                return Err(error(
                    expr,
                    expr.line,
                    format!(
                        "{what}: unknown variable `{v}` for subject {kind} (known: {})",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        let walk = Walk {
            source: &expr.source,
            what: &what,
            scope,
            locals: std::cell::RefCell::new(Vec::new()),
        };
        if let Err((id, msg)) = walk.walk(expr.program.expression()) {
            return Err(error(expr, line_of(walk.source, expr, id), msg));
        }
    }
    let Some(ctx) = world.contexts.get(&kind) else {
        return Ok(());
    };
    for (what, expr, boolean) in all_exprs(rule) {
        match expr.program.execute(ctx) {
            Ok(Value::Bool(_)) => {}
            Ok(other) if boolean => {
                return Err(error(
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
                return Err(error(
                    expr,
                    expr.line,
                    format!("{what}: does not evaluate on the fact-model sample: {e}"),
                ));
            }
        }
    }
    Ok(())
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

fn is_comprehension_var(expr: &Expr, name: &str) -> bool {
    fn visit(e: &IdedExpr, name: &str) -> bool {
        match &e.expr {
            Ast::Comprehension(c) => {
                c.iter_var == name
                    || c.iter_var2.as_deref() == Some(name)
                    || c.accu_var == name
                    || visit(&c.iter_range, name)
                    || visit(&c.accu_init, name)
                    || visit(&c.loop_cond, name)
                    || visit(&c.loop_step, name)
                    || visit(&c.result, name)
            }
            Ast::Call(c) => {
                c.target.as_deref().is_some_and(|t| visit(t, name))
                    || c.args.iter().any(|a| visit(a, name))
            }
            Ast::Select(s) => visit(&s.operand, name),
            Ast::List(l) => l.elements.iter().any(|x| visit(x, name)),
            Ast::Map(m) => m.entries.iter().any(|en| match &en.expr {
                EntryExpr::MapEntry(me) => visit(&me.key, name) || visit(&me.value, name),
                EntryExpr::StructField(f) => visit(&f.value, name),
            }),
            _ => false,
        }
    }
    visit(expr.program.expression(), name)
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
