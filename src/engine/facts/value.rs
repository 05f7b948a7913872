//! Building CEL values for facts: a small map builder and conversions between CEL values, JSON and
//! display text.
//!
//! Facts are built as `cel::Value` trees directly (not through serde) because the fact model is its
//! own documented shape, not a serialisation of the bundle: every key is always present, strings are
//! `""` rather than `null` when absent, and numbers that rules compare are doubles or ints as
//! `docs/facts.md` says.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cel::Value;
use cel::objects::{Key, Map};

/// Distinct keys each thread keeps one copy of, at most.
const KEY_LIMIT: usize = 4096;

/// A map key. The fact model's field names repeat in every fact (a bundle with 20,000 probes
/// has 20,000 request facts of the same fields): each thread keeps one shared copy of each name
/// instead of a new string per map. Data-dependent names beyond [`KEY_LIMIT`] distinct ones are
/// not kept, so the cache stays bounded.
fn key(k: &str) -> Key {
    thread_local! {
        static KEYS: std::cell::RefCell<HashMap<String, Arc<String>>> =
            std::cell::RefCell::new(HashMap::new());
    }
    KEYS.with_borrow_mut(|keys| {
        if let Some(k) = keys.get(k) {
            return Key::String(k.clone());
        }
        let shared = Arc::new(k.to_string());
        if keys.len() < KEY_LIMIT {
            keys.insert(k.to_string(), shared.clone());
        }
        Key::String(shared)
    })
}

/// A map under construction.
#[derive(Debug, Default)]
pub struct Obj(HashMap<Key, Value>);

impl Obj {
    /// An empty map.
    pub fn new() -> Self {
        Obj(HashMap::new())
    }
    /// Set a string.
    pub fn s(mut self, k: &str, v: impl Into<String>) -> Self {
        self.0.insert(key(k), Value::String(Arc::new(v.into())));
        self
    }
    /// Set an int.
    pub fn i(mut self, k: &str, v: i64) -> Self {
        self.0.insert(key(k), Value::Int(v));
        self
    }
    /// Set a double.
    pub fn f(mut self, k: &str, v: f64) -> Self {
        self.0.insert(key(k), Value::Float(v));
        self
    }
    /// Set a bool.
    pub fn b(mut self, k: &str, v: bool) -> Self {
        self.0.insert(key(k), Value::Bool(v));
        self
    }
    /// Set any value.
    pub fn v(mut self, k: &str, v: Value) -> Self {
        self.0.insert(key(k), v);
        self
    }
    /// The finished map.
    pub fn build(self) -> Value {
        Value::Map(Map {
            map: Arc::new(self.0),
        })
    }
}

/// A list value.
pub fn list<I: IntoIterator<Item = Value>>(items: I) -> Value {
    Value::List(Arc::new(items.into_iter().collect()))
}

/// A list of strings.
pub fn strings<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> Value {
    list(items.into_iter().map(|s| Value::String(Arc::new(s.into()))))
}

/// A string-to-string map (labels, selector, extracted fields).
pub fn string_map<'a, I: IntoIterator<Item = (&'a String, &'a String)>>(items: I) -> Value {
    let mut o = Obj::new();
    for (k, v) in items {
        o = o.s(k, v.clone());
    }
    o.build()
}

/// A map from string keys to ints (status counts).
pub fn int_map(items: &BTreeMap<String, u64>) -> Value {
    let mut o = Obj::new();
    for (k, v) in items {
        o = o.i(k, *v as i64);
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

/// The value at `key` of a map value, if it is a map with that key.
pub fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Map(m) => m.map.get(&Key::String(Arc::new(key.to_string()))),
        _ => None,
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
        assert_eq!(to_json(&v), serde_json::json!({"a": 2, "b": "x"}));
    }
}
