//! Building facts, and conversions between CEL values, JSON and display text.
//!
//! A fact is built once, directly as the value the interpreter holds ([`Fact`]): maps and lists
//! are the interpreter's own containers behind a reference count ([`super::shared::Shared`]), so
//! binding a fact to a variable, listing it in another fact or handing it to a comprehension shares
//! it rather than copying it. There is no second form: a fact built as a `cel::Value` and converted
//! would cost the conversion and, while both exist, twice the memory (at 20,000 probes the request
//! facts alone were 110 MB in each form).
//!
//! Facts are built by hand (not through serde) because the fact model is its own documented shape,
//! not a serialisation of the bundle: every key is always present, strings are `""` rather than
//! `null` when absent, and numbers that rules compare are doubles or ints as `docs/facts.md` says.

use std::collections::{BTreeMap, HashMap};

use cel::Value;
use cel::common::types::{CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelString};
use cel::common::value::Val;
use cel::objects::Key;

use super::shared::Shared;

/// A fact value, as the interpreter holds it. Cloning one shares its maps and lists.
#[derive(Debug)]
pub struct Fact(Box<dyn Val>);

impl Clone for Fact {
    fn clone(&self) -> Self {
        Fact(self.0.clone_as_boxed())
    }
}

impl Fact {
    /// An int.
    pub fn int(v: i64) -> Self {
        Fact(Box::new(CelInt::from(v)))
    }
    /// A double.
    pub fn float(v: f64) -> Self {
        Fact(Box::new(CelDouble::from(v)))
    }
    /// A string.
    pub fn string(v: impl Into<String>) -> Self {
        Fact(Box::new(CelString::from(v.into())))
    }
    /// The value, to bind in a context (shared, not copied).
    pub fn to_val(&self) -> Box<dyn Val> {
        self.0.clone_as_boxed()
    }
    /// The value, to hand to the interpreter.
    pub fn into_val(self) -> Box<dyn Val> {
        self.0
    }
    /// The value itself.
    pub fn as_val(&self) -> &dyn Val {
        self.0.as_ref()
    }
    /// A copy as a `cel::Value`, for what inspects a fact's shape or prints it (the rule checker,
    /// the fact model's documentation), never on the evaluation path.
    pub fn to_value(&self) -> Value {
        Value::try_from(self.0.as_ref()).unwrap_or(Value::Null)
    }
}

/// A map under construction. Field names are the fact model's, known at compile time, so a map
/// borrows them rather than storing a copy in each of thousands of facts.
#[derive(Debug, Default)]
pub struct Obj(Vec<(CelMapKey<'static>, Box<dyn Val>)>);

impl Obj {
    /// An empty map.
    pub fn new() -> Self {
        Obj(Vec::new())
    }
    fn set(mut self, k: CelMapKey<'static>, v: Box<dyn Val>) -> Self {
        self.0.push((k, v));
        self
    }
    /// Set a string.
    pub fn s(self, k: &'static str, v: impl Into<String>) -> Self {
        self.set(field(k), Box::new(CelString::from(v.into())))
    }
    /// Set an int.
    pub fn i(self, k: &'static str, v: i64) -> Self {
        self.set(field(k), Box::new(CelInt::from(v)))
    }
    /// Set a double.
    pub fn f(self, k: &'static str, v: f64) -> Self {
        self.set(field(k), Box::new(CelDouble::from(v)))
    }
    /// Set a bool.
    pub fn b(self, k: &'static str, v: bool) -> Self {
        self.set(field(k), Box::new(CelBool::from(v)))
    }
    /// Set any fact.
    pub fn v(self, k: &'static str, v: Fact) -> Self {
        self.set(field(k), v.0)
    }
    /// Set a value under a key that is data (a label name, a status code), not a field name.
    fn data(self, k: &str, v: Box<dyn Val>) -> Self {
        self.set(CelMapKey::String(CelString::from(k.to_owned())), v)
    }
    /// The finished map. A key set twice keeps its last value.
    pub fn build(self) -> Fact {
        // Collected once at its final size: growing a map field by field rehashes it several
        // times, and a request fact has about forty fields.
        let entries: HashMap<CelMapKey<'static>, Box<dyn Val>> = self.0.into_iter().collect();
        Fact(Box::new(Shared::new(CelMap::from(entries))))
    }
}

fn field(k: &'static str) -> CelMapKey<'static> {
    CelMapKey::String(CelString::from(k))
}

/// The fact `build` makes of `of`; the one for `None` (an absent object: every field at its
/// default) is built once for the process and shared, since most subjects' facts hold the same
/// absent sub-facts (a request that is no watch, a log line about no known object).
pub fn or_shared_absent<T>(
    absent: &'static std::sync::OnceLock<Fact>,
    of: Option<T>,
    build: impl Fn(Option<T>) -> Fact,
) -> Fact {
    match of {
        None => absent.get_or_init(|| build(None)).clone(),
        some => build(some),
    }
}

/// A list fact.
pub fn list<I: IntoIterator<Item = Fact>>(items: I) -> Fact {
    // Most of a fact's lists are empty (a request's causes, texts, admitting webhooks): they share
    // one container.
    static EMPTY: std::sync::OnceLock<Fact> = std::sync::OnceLock::new();
    let items: Vec<Box<dyn Val>> = items.into_iter().map(|f| f.0).collect();
    if items.is_empty() {
        return EMPTY
            .get_or_init(|| Fact(Box::new(Shared::new(CelList::from(Vec::new())))))
            .clone();
    }
    Fact(Box::new(Shared::new(CelList::from(items))))
}

/// A list of strings.
pub fn strings<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Fact {
    list(items.into_iter().map(Fact::string))
}

/// A string-to-string map (labels, selector, extracted fields).
pub fn string_map<'a, I: IntoIterator<Item = (&'a String, &'a String)>>(items: I) -> Fact {
    let mut o = Obj::new();
    for (k, v) in items {
        o = o.data(k, Box::new(CelString::from(v.clone())));
    }
    o.build()
}

/// A map from string keys to ints (status counts).
pub fn int_map(items: &BTreeMap<String, u64>) -> Fact {
    let mut o = Obj::new();
    for (k, v) in items {
        o = o.data(k, Box::new(CelInt::from(*v as i64)));
    }
    o.build()
}

/// A CEL value as JSON (for evidence in a Diagnosis). Maps become objects with sorted keys.
pub fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(i) => serde_json::Value::from(*i),
        Value::UInt(u) => serde_json::Value::from(*u),
        Value::Float(f) => {
            if f.is_finite() {
                let rounded = (f * 1e6).round() / 1e6;
                if rounded.fract() == 0.0 && rounded.abs() < 9e15 {
                    serde_json::Value::from(rounded as i64)
                } else {
                    serde_json::Value::from(rounded)
                }
            } else {
                serde_json::Value::String(f.to_string())
            }
        }
        Value::String(s) => serde_json::Value::String(s.to_string()),
        Value::List(l) => serde_json::Value::Array(l.iter().map(to_json).collect()),
        Value::Map(m) => {
            let sorted: BTreeMap<String, serde_json::Value> = m
                .map
                .iter()
                .map(|(k, v)| (key_text(k), to_json(v)))
                .collect();
            serde_json::Value::Object(sorted.into_iter().collect())
        }
        other => serde_json::Value::String(format!("{other:?}")),
    }
}

fn key_text(k: &Key) -> String {
    match k {
        Key::Int(i) => i.to_string(),
        Key::Uint(u) => u.to_string(),
        Key::Bool(b) => b.to_string(),
        Key::String(s) => s.to_string(),
    }
}

/// A number for humans: integers without a fraction, others with up to 3 significant decimals.
pub fn number_text(f: f64) -> String {
    if !f.is_finite() {
        return f.to_string();
    }
    if f.fract() == 0.0 && f.abs() < 1e15 {
        return format!("{}", f as i64);
    }
    let s = if f.abs() >= 100.0 {
        format!("{f:.1}")
    } else if f.abs() >= 1.0 {
        format!("{f:.2}")
    } else {
        format!("{f:.3}")
    };
    let s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    if s.is_empty() || s == "-" {
        "0".into()
    } else {
        s
    }
}

/// A CEL value as text inside a rendered template.
pub fn display_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::Float(f) => number_text(*f),
        // A value shown inside a sentence is one line: a body's final newline or a multi-line
        // message (`[+]ping ok\n[-]etcd failed`) would break the summary it sits in.
        Value::String(s) => s.trim_end().replace(['\n', '\r'], " "),
        Value::List(l) => l.iter().map(display_text).collect::<Vec<_>>().join(", "),
        Value::Map(_) => to_json(v).to_string(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(number_text(3.0), "3");
        assert_eq!(number_text(0.0042), "0.004");
        assert_eq!(number_text(12.5), "12.5");
        assert_eq!(number_text(1234.56), "1234.6");
        let v = Obj::new().f("a", 2.0).s("b", "x").build();
        assert_eq!(
            to_json(&v.to_value()),
            serde_json::json!({"a": 2, "b": "x"})
        );
    }
}
