//! The CEL function library rules call: metric queries and a few formatting helpers.
//!
//! Metric functions take a target (`'apiserver'`, `'etcd'`, `'extension'`), a family name (read under
//! whichever name the server's release gives it, `bundle::metrics::KNOWN_FAMILIES`) and a label
//! selector map, and answer with a
//! map that always says `present` and, for counters and histograms, whether the numbers describe the
//! metrics window or the whole process life. The semantics live in [`super::metrics_query`]; this file
//! only converts arguments and answers. `docs/facts.md` documents every function; [`FUNCTIONS`] lists
//! their names so that loading can reject a call to anything else.

use std::sync::Arc;

use cel::common::types::{CelBool, CelString};
use cel::common::value::CowVal;
use cel::extractors::IntoResolveResult;
use cel::objects::Key;
use cel::{Context, Env, ExecutionError, Value};

use super::facts::value::{Fact, Obj, list, number_text, string_map};
use super::metrics_query::{
    CounterAnswer, GaugeAnswer, HistogramAnswer, LabelMatch, MetricsIndex, label_match,
    parse_target,
};
use crate::bundle::MetricTarget;

/// Names of the functions this library adds (besides CEL's standard library and its string
/// extension).
pub const FUNCTIONS: &[&str] = &[
    "counter",
    "gauge",
    "quantile",
    "quantile_cumulative",
    "above",
    "series",
    "human_seconds",
    "human_bytes",
    "percent",
];

/// The CEL environment rules are compiled and run in: the standard library plus the string
/// extension (`lowerAscii`, `split`, `replace`, `join`, …).
pub fn env() -> Arc<Env> {
    static ENV: std::sync::OnceLock<Arc<Env>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .expect("the string extension declares no conflicting overloads");
        // CEL's `matches`, with the regex compiled once per pattern rather than per call (the
        // crate's own, behind its `regex` feature, is not enabled).
        cel::add_overload!(env, fn matches: (CelString, CelString) -> Result<CelBool>, id = "matches")
            .expect("matches is not declared without the regex feature");
        cel::add_member_overload!(env, fn matches: (CelString, CelString) -> Result<CelBool>)
            .expect("matches is not declared without the regex feature");
        Arc::new(env)
    })
    .clone()
}

/// `s.matches(re)` / `matches(s, re)`: whether RE2-style `re` matches anywhere in `s`, in the words
/// of CEL's own implementation when `re` is invalid.
fn matches(this: &CelString<'_>, re: &CelString<'_>) -> Result<CelBool, ExecutionError> {
    match super::regex_cache::compiled(re.inner()) {
        Ok(compiled) => Ok(CelBool::from(compiled.is_match(this.inner()))),
        Err(e) => Err(err(
            "matches",
            format!("'{}' not a valid regex:\n{e}", re.inner()),
        )),
    }
}

fn err(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

fn target_arg(function: &str, v: &Value) -> Result<MetricTarget, ExecutionError> {
    match v {
        Value::String(s) => parse_target(s).ok_or_else(|| {
            err(
                function,
                format!("unknown metrics target {s:?} (apiserver, etcd, extension)"),
            )
        }),
        other => Err(err(
            function,
            format!("target must be a string, got {other:?}"),
        )),
    }
}

/// One family name, or a list: a rule names every spelling a metric had across the releases it
/// covers (e.g. `apiserver_storage_db_total_size_in_bytes`, deprecated in 1.28 for
/// `apiserver_storage_size_bytes`, REFERENCE.md §3), and the query reads whichever is present.
fn families_arg(function: &str, v: &Value) -> Result<Vec<String>, ExecutionError> {
    match v {
        Value::String(s) => Ok(vec![s.to_string()]),
        Value::List(l) => l
            .iter()
            .map(|x| match x {
                Value::String(s) => Ok(s.to_string()),
                other => Err(err(
                    function,
                    format!("family names must be strings: {other:?}"),
                )),
            })
            .collect(),
        other => Err(err(
            function,
            format!("family must be a string or a list of strings, got {other:?}"),
        )),
    }
}

/// The three arguments every metric function starts with: target, family (or families) and
/// label selector.
struct QueryArgs {
    target: MetricTarget,
    families: Vec<String>,
    selector: Vec<LabelMatch>,
}

impl QueryArgs {
    fn read(function: &str, t: &Value, f: &Value, s: &Value) -> Result<Self, ExecutionError> {
        Ok(QueryArgs {
            target: target_arg(function, t)?,
            families: families_arg(function, f)?,
            selector: selector_arg(function, s)?,
        })
    }
}

fn selector_arg(function: &str, v: &Value) -> Result<Vec<LabelMatch>, ExecutionError> {
    let Value::Map(m) = v else {
        return Err(err(function, format!("selector must be a map, got {v:?}")));
    };
    let mut out = Vec::new();
    // A CEL map has no order: sorting makes the first reported error the same on every run.
    let mut entries: Vec<_> = m.map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    for (k, val) in entries {
        let Key::String(key) = k else {
            return Err(err(function, "selector keys must be label names"));
        };
        let values = match val {
            Value::String(s) => vec![s.to_string()],
            Value::List(l) => l
                .iter()
                .map(|x| match x {
                    Value::String(s) => Ok(s.to_string()),
                    other => Err(err(
                        function,
                        format!("label values must be strings: {other:?}"),
                    )),
                })
                .collect::<Result<_, _>>()?,
            // Prometheus label values are strings, but `{'code': 429}` is the natural way to write
            // a status code in a rule.
            Value::Int(i) => vec![i.to_string()],
            other => {
                return Err(err(
                    function,
                    format!("label {key}: value must be a string or list, got {other:?}"),
                ));
            }
        };
        out.push(label_match(key, values).map_err(|e| err(function, e))?);
    }
    Ok(out)
}

fn number_arg(function: &str, v: &Value) -> Result<f64, ExecutionError> {
    match v {
        Value::Float(f) => Ok(*f),
        Value::Int(i) => Ok(*i as f64),
        Value::UInt(u) => Ok(*u as f64),
        other => Err(err(function, format!("expected a number, got {other:?}"))),
    }
}

/// The answer of `counter(…)` as a CEL map.
pub fn counter_value(a: &CounterAnswer) -> Fact {
    Obj::new()
        .b("present", a.present)
        .b("windowed", a.windowed)
        .i("series", a.series as i64)
        .f("total", a.total)
        .f("increase", a.increase)
        .f("rate", a.rate)
        .f("window_seconds", a.window_seconds)
        .build()
}

/// The answer of `gauge(…)` as a CEL map.
pub fn gauge_value(a: &GaugeAnswer) -> Fact {
    Obj::new()
        .b("present", a.present)
        .i("series", a.series as i64)
        .f("value", a.value)
        .f("max", a.max)
        .f("min", a.min)
        .build()
}

/// The answer of `quantile(…)` / `above(…)` as a CEL map.
pub fn histogram_value(a: &HistogramAnswer) -> Fact {
    Obj::new()
        .b("present", a.present)
        .b("windowed", a.windowed)
        .s("basis", a.basis)
        .f("count", a.count)
        .f("value", a.value)
        .f("fraction", a.fraction)
        .b("beyond_top_bucket", a.beyond_top_bucket)
        .f("top_bucket", a.top_bucket)
        .f("proven", a.proven)
        .f("mean", a.mean)
        .s("text", a.text.clone())
        .build()
}

/// Seconds for humans: `850 µs`, `4 ms`, `1.2 s`, `3 min`. Seconds go up to 120 so that the
/// deadlines readers compare with (a webhook's 10 or 30 s, the 60 s request timeout) keep their
/// unit.
pub fn human_seconds(s: f64) -> String {
    if !s.is_finite() {
        return s.to_string();
    }
    let a = s.abs();
    if a == 0.0 {
        "0 s".into()
    } else if a < 0.001 {
        format!("{} µs", number_text(s * 1e6))
    } else if a < 1.0 {
        format!("{} ms", number_text(s * 1e3))
    } else if a < 120.0 {
        format!("{} s", number_text(s))
    } else if a < 7200.0 {
        format!("{} min", number_text(s / 60.0))
    } else {
        format!("{} h", number_text(s / 3600.0))
    }
}

/// Bytes for humans: `512 B`, `7.5 MB`, in powers of 1000. etcd's quota is set in bytes and its
/// "2 GB" default is 2 GiB (`DefaultQuotaBytes = 2 * 1024 * 1024 * 1024`), so it reads `2.15 GB`
/// here: the byte count is what rules compare, the text only shows it.
pub fn human_bytes(b: f64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB"];
    let mut v = b;
    let mut i = 0;
    while v.abs() >= 1000.0 && i < units.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    format!("{} {}", number_text(v), units[i])
}

/// A metrics function's answer, built as a fact: the interpreter takes it as it is, where a
/// `cel::Value` would be built and then converted on every call (rules call these functions for
/// each of thousands of subjects).
struct Answer(Result<Fact, ExecutionError>);

impl<'c, 'call> IntoResolveResult<'c, 'call> for Answer {
    fn into_resolve_result(self) -> Result<CowVal<'c, 'call>, ExecutionError> {
        self.0.map(|f| CowVal::Owned(f.into_val()))
    }
}

/// Add the library to a root context, querying `metrics`.
///
/// # Panics
/// Never: the names do not clash with standard overloads (checked by a test).
pub fn register(ctx: &mut Context<'_, '_>, metrics: Arc<MetricsIndex>) {
    let m = metrics.clone();
    ctx.add_function("counter", move |t: Value, f: Value, s: Value| -> Answer {
        Answer(
            QueryArgs::read("counter", &t, &f, &s).map(|query| {
                counter_value(&m.counter(query.target, &query.families, &query.selector))
            }),
        )
    })
    .expect("counter is not a standard overload");
    let m = metrics.clone();
    ctx.add_function("gauge", move |t: Value, f: Value, s: Value| -> Answer {
        Answer(
            QueryArgs::read("gauge", &t, &f, &s)
                .map(|query| gauge_value(&m.gauge(query.target, &query.families, &query.selector))),
        )
    })
    .expect("gauge is not a standard overload");
    // `quantile` reads the metrics window when the bundle has one and the process life otherwise,
    // saying which in `basis`, so a rule can refuse a lifetime p99 as "now";
    // `quantile_cumulative` always reads the process life, to compare with the window.
    for (fname, cumulative) in [("quantile", false), ("quantile_cumulative", true)] {
        let m = metrics.clone();
        ctx.add_function(
            fname,
            move |t: Value, f: Value, s: Value, q: Value| -> Answer {
                Answer((|| {
                    let q = number_arg(fname, &q)?;
                    if !(0.0..=1.0).contains(&q) {
                        return Err(err(fname, format!("quantile {q} is outside 0..1")));
                    }
                    let query = QueryArgs::read(fname, &t, &f, &s)?;
                    let a = m.quantile(
                        query.target,
                        &query.families,
                        &query.selector,
                        q,
                        cumulative,
                    );
                    Ok(histogram_value(&a))
                })())
            },
        )
        .expect("quantile is not a standard overload");
    }
    let m = metrics.clone();
    ctx.add_function(
        "above",
        move |t: Value, f: Value, s: Value, x: Value| -> Answer {
            Answer((|| {
                let name = "above";
                let query = QueryArgs::read(name, &t, &f, &s)?;
                let a = m.above(
                    query.target,
                    &query.families,
                    &query.selector,
                    number_arg(name, &x)?,
                );
                Ok(histogram_value(&a))
            })())
        },
    )
    .expect("above is not a standard overload");
    let m = metrics;
    ctx.add_function("series", move |t: Value, f: Value, s: Value| -> Answer {
        Answer(QueryArgs::read("series", &t, &f, &s).map(|query| {
            let rows = m.series(query.target, &query.families, &query.selector);
            list(rows.iter().map(|r| {
                Obj::new()
                    .v("labels", string_map(r.labels.iter().map(|(k, v)| (k, v))))
                    .f("value", r.value)
                    .f("increase", r.increase)
                    .f("rate", r.rate)
                    .build()
            }))
        }))
    })
    .expect("series is not a standard overload");
    ctx.add_function(
        "human_seconds",
        |x: Value| -> Result<Value, ExecutionError> {
            Ok(human_seconds(number_arg("human_seconds", &x)?).into())
        },
    )
    .expect("human_seconds is not a standard overload");
    ctx.add_function("human_bytes", |x: Value| -> Result<Value, ExecutionError> {
        Ok(human_bytes(number_arg("human_bytes", &x)?).into())
    })
    .expect("human_bytes is not a standard overload");
    ctx.add_function("percent", |x: Value| -> Result<Value, ExecutionError> {
        Ok(format!("{}%", number_text(number_arg("percent", &x)? * 100.0)).into())
    })
    .expect("percent is not a standard overload");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(src: &str) -> Result<Value, ExecutionError> {
        let env = env();
        let mut ctx = Context::with_env(env.clone());
        register(&mut ctx, Arc::new(MetricsIndex::new(&[])));
        env.compile(src).unwrap().execute(&ctx)
    }

    #[test]
    fn matches_is_an_unanchored_regex_search_in_both_call_forms() {
        assert_eq!(
            eval(
                "'bad status from https://10.0.0.1/apis: 401'.matches('bad status from [^ ]*: 401')"
            ),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            eval("matches('watch chan error', 'chan')"),
            Ok(Value::Bool(true))
        );
        assert_eq!(eval("'abc'.matches('^b')"), Ok(Value::Bool(false)));
        let e = eval("'abc'.matches('(b')").unwrap_err();
        assert!(format!("{e:?}").contains("not a valid regex"), "{e:?}");
    }

    #[test]
    fn absent_metrics_are_explicit_and_numbers_compare_across_types() {
        assert_eq!(
            eval(
                "!counter('apiserver', 'x', {}).present && counter('apiserver', 'x', {}).total == 0"
            ),
            Ok(Value::Bool(true))
        );
        assert_eq!(eval("1.5 > 1"), Ok(Value::Bool(true)));
        assert!(eval("counter('nowhere', 'x', {})").is_err());
        assert_eq!(eval("human_seconds(0.004)"), Ok(Value::from("4 ms")));
        assert_eq!(eval("percent(0.5)"), Ok(Value::from("50%")));
        assert_eq!(
            eval("'a b'.split(' ').size() == 2 && 'ABC'.lowerAscii() == 'abc'"),
            Ok(Value::Bool(true))
        );
        assert_eq!(
            eval("quantile('etcd', ['a', 'b'], {'op=~': 'get|list'}, 0.99).basis"),
            Ok(Value::from("none"))
        );
    }
}
