//! The static half of checking a rule: walk each CEL expression's `a.b.c` chains, comprehension
//! variables included, through the shape of the fact model, and reject unknown variables, fields and
//! functions. Unlike evaluating on the sample, it also sees branches a short-circuit would skip.
//!
//! The shape is taken from the sample facts themselves (a list's elements have the shape of its
//! first element), so it cannot drift from what the builders produce. Maps whose keys are data
//! (labels, status counts) accept any field.

use std::collections::HashMap;
use std::rc::Rc;

use cel::Value;
use cel::common::ast::{EntryExpr, Expr as Ast, IdedExpr, LiteralValue};
use cel::objects::Key;

use super::Expr;
use crate::engine::functions::{FUNCTIONS, counter_value, gauge_value, histogram_value};
use crate::engine::metrics_query::{CounterAnswer, GaugeAnswer, HistogramAnswer};

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
pub enum Shape {
    /// Not known statically (a computed value, an empty sample list): nothing under it is checked,
    /// since a false "no such field" would reject a correct rule.
    Any,
    Scalar,
    List(Rc<Shape>),
    Map(Rc<HashMap<String, Shape>>),
    /// Keys are data (label names, status codes), so every field name is valid.
    DynMap,
}

pub fn shape_of(v: &Value, key: Option<&str>) -> Shape {
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
            return Some(Shape::List(Rc::new(shape_of(&row.to_value(), None))));
        }
        "human_seconds" | "human_bytes" | "percent" => return Some(Shape::Scalar),
        _ => return None,
    };
    Some(shape_of(&v.to_value(), None))
}

pub struct Walk<'a> {
    pub source: &'a str,
    pub what: &'a str,
    pub scope: &'a HashMap<String, Shape>,
    pub locals: std::cell::RefCell<Vec<(String, Shape)>>,
}

pub fn line_of(source: &str, expr: &Expr, id: u64) -> usize {
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

    pub fn walk(&self, e: &IdedExpr) -> Result<Shape, (u64, String)> {
        match &e.expr {
            Ast::Ident(name) => match self.lookup(name) {
                Some(s) => Ok(s.clone()),
                // CEL's type names are identifiers too (`type(x) == string`), not variables of
                // the fact model.
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
                        // `has(x.f)` is a presence test: CEL answers false for a missing field
                        // instead of failing, so it cannot break at run time (the price is that a
                        // misspelt field under `has` goes unnoticed).
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
                // The parser names operators `_+_`, `_[_]`, `!_`, `-_`, and its internal helpers
                // `@in`, `@not_strictly_false`; they are the language, not functions a rule names.
                let operator = f.starts_with('_')
                    || f.starts_with('@')
                    || f.starts_with('!')
                    || f.starts_with('-');
                if !operator && !STANDARD.contains(&f) && !FUNCTIONS.contains(&f) {
                    return Err((e.id, format!("{}: unknown function `{f}`", self.what)));
                }
                // extpath's functions are global calls (`quantile(...)`); a method call of the same
                // name is the standard library's, whose result shape is not ours to predict.
                if let Some(s) = function_result(f).filter(|_| call.target.is_none()) {
                    return Ok(s);
                }
                // Indexing with a literal string key is a field read in other clothes
                // (`x["f"]`) and is checked like one; a computed key cannot be.
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
                // CEL comprehensions over a map iterate its keys, which are strings.
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
                // The accumulator is pushed only after its initialiser is walked: `accu_init`
                // cannot see it. The locals are cut back afterwards even on error, so a later
                // sibling expression does not see this loop's variables.
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

/// Whether `name` is bound by a comprehension inside `expr`: the CEL library's reference list
/// reports `x` in `list.exists(x, …)` as a free variable, and it must not be taken for an unknown
/// fact variable.
pub fn is_comprehension_var(expr: &Expr, name: &str) -> bool {
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
