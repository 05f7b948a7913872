//! Fact values as the CEL interpreter holds them, shared rather than copied.
//!
//! The interpreter copies a map or list whenever it needs one of its own: each element a
//! comprehension (`observations.exists(o, …)`) binds to its variable, each argument it passes on,
//! each `cel::Value` it turns into a variable. With the built-in containers every such copy is a
//! deep one, and at 10,000 APIServices those copies were most of the analysis's time and memory.
//! [`to_val`] converts a fact once into a tree whose maps and lists are [`Shared`]: copying one
//! is a reference count, and it behaves as the built-in container it wraps in every other respect
//! (its type, equality, indexing, `in`, `size()`, iteration, conversion back to `cel::Value`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use cel::Value;
use cel::common::traits::{
    Adder, Comparer, Container, Divider, Indexer, Iterable, Modder, Multiplier, Negator, Sizer,
    Subtractor, Zeroer,
};
use cel::common::types::{CelList, CelMap, CelMapKey, CelString, Type};
use cel::common::value::{Builtin, BuiltinRef, CowVal, Val};
use cel::objects::Key;

/// A built-in CEL container behind a reference count.
#[derive(Debug)]
pub struct Shared<T>(Arc<T>);

impl<T: Clone> Shared<T> {
    /// The container itself: moved out when nothing else holds it, else copied (once, for the
    /// rare consumer that must own it).
    fn into_inner(self) -> T {
        Arc::unwrap_or_clone(self.0)
    }
}

impl<T: Val + Clone + 'static> Val for Shared<T> {
    fn get_type(&self) -> &Type {
        self.0.get_type()
    }

    fn cel_type() -> &'static Type
    where
        Self: Sized,
    {
        T::cel_type()
    }

    fn as_adder<'b, 'v>(&'b self) -> Option<&'b (dyn Adder + 'v)>
    where
        Self: 'v,
    {
        self.0.as_adder()
    }

    fn as_comparer(&self) -> Option<&dyn Comparer> {
        self.0.as_comparer()
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.0.as_container()
    }

    fn as_divider<'b, 'v>(&'b self) -> Option<&'b (dyn Divider + 'v)>
    where
        Self: 'v,
    {
        self.0.as_divider()
    }

    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn Indexer + 'v)>
    where
        Self: 'v,
    {
        self.0.as_indexer()
    }

    fn into_indexer<'v>(self: Box<Self>) -> Option<Box<dyn Indexer + 'v>>
    where
        Self: 'v,
    {
        // Only an element is taken out: index in place rather than copy the whole container.
        self.0.as_indexer()?;
        Some(self)
    }

    fn as_iterable<'b, 'v>(&'b self) -> Option<&'b (dyn Iterable + 'v)>
    where
        Self: 'v,
    {
        self.0.as_iterable()
    }

    fn as_modder<'b, 'v>(&'b self) -> Option<&'b (dyn Modder + 'v)>
    where
        Self: 'v,
    {
        self.0.as_modder()
    }

    fn as_multiplier<'b, 'v>(&'b self) -> Option<&'b (dyn Multiplier + 'v)>
    where
        Self: 'v,
    {
        self.0.as_multiplier()
    }

    fn as_negator<'b, 'v>(&'b self) -> Option<&'b (dyn Negator + 'v)>
    where
        Self: 'v,
    {
        self.0.as_negator()
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.0.as_sizer()
    }

    fn as_subtractor<'b, 'v>(&'b self) -> Option<&'b (dyn Subtractor + 'v)>
    where
        Self: 'v,
    {
        self.0.as_subtractor()
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        self.0.as_zeroer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        self.0.equals(other)
    }

    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v>
    where
        Self: 'v,
    {
        Box::new(Shared(Arc::clone(&self.0)))
    }

    fn as_builtin<'b, 'v>(&'b self) -> BuiltinRef<'b, 'v>
    where
        Self: 'v,
    {
        self.0.as_builtin()
    }

    fn into_builtin<'v>(self: Box<Self>) -> Option<Builtin<'v>>
    where
        Self: 'v,
    {
        Box::new(self.into_inner()).into_builtin()
    }
}

impl<T: Val + Clone + 'static> Indexer for Shared<T> {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, cel::ExecutionError>
    where
        Self: 'v,
    {
        match self.0.as_indexer() {
            Some(i) => i.get(idx),
            None => Err(cel::ExecutionError::function_error(
                "index",
                "the value cannot be indexed",
            )),
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, cel::ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

/// Distinct map keys stored once for the process, at most.
const KEY_LIMIT: usize = 4096;

/// A fact's map key as the interpreter holds it. The fact model's keys are a few hundred field
/// names repeated in every fact: each is stored once for the process and borrowed by every map
/// that has it. Data-dependent keys (label names) beyond [`KEY_LIMIT`] distinct ones are owned by
/// their map instead, so that what is kept for the process stays bounded.
fn map_key(k: &Key) -> CelMapKey<'static> {
    static KEYS: OnceLock<RwLock<HashSet<&'static str>>> = OnceLock::new();
    let Key::String(s) = k else {
        return CelMapKey::from(k.clone());
    };
    let keys = KEYS.get_or_init(Default::default);
    let known = keys
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .get(s.as_str())
        .copied();
    let stored = known.or_else(|| {
        let mut keys = keys.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(k) = keys.get(s.as_str()) {
            return Some(*k);
        }
        (keys.len() < KEY_LIMIT).then(|| {
            let k: &'static str = Box::leak(s.as_str().into());
            keys.insert(k);
            k
        })
    });
    CelMapKey::String(match stored {
        Some(k) => CelString::from(k),
        None => CelString::from(s.as_str().to_owned()),
    })
}

/// Variables converted once ([`to_val`]), to bind in any number of contexts: binding one
/// ([`Val::clone_as_boxed`]) shares it.
pub type Vars = Vec<(&'static str, Box<dyn Val>)>;

/// Facts converted once and found again by identity.
///
/// A fact that many variables hold — a probe's request fact is in its subject's `observations`,
/// in `apiserver.observations` and in the failing-request lists — is one `cel::Value` container
/// shared by reference count. Converting each holder's tree would convert that fact once per
/// holder; a container converted here is instead bound again by reference ([`to_val_with`]).
/// Each entry keeps its source alive, so no other container can take its address meanwhile.
#[derive(Debug, Default)]
pub struct Converted(HashMap<usize, (Value, Box<dyn Val>)>);

impl Converted {
    /// Convert each of `facts` once.
    pub fn of<'v>(facts: impl IntoIterator<Item = &'v Value>) -> Self {
        let mut done = Converted::default();
        for v in facts {
            if let Some(at) = address(v)
                && !done.0.contains_key(&at)
            {
                let val = to_val_with(v, &done);
                done.0.insert(at, (v.clone(), val));
            }
        }
        done
    }

    fn find(&self, v: &Value) -> Option<&(dyn Val + 'static)> {
        if self.0.is_empty() {
            return None;
        }
        self.0.get(&address(v)?).map(|(_, val)| val.as_ref())
    }
}

/// The address of a map's or list's shared container (its identity while it is alive).
fn address(v: &Value) -> Option<usize> {
    match v {
        Value::Map(m) => Some(Arc::as_ptr(&m.map).cast::<u8>() as usize),
        Value::List(l) => Some(Arc::as_ptr(l).cast::<u8>() as usize),
        _ => None,
    }
}

/// `vars` converted for the interpreter.
pub fn to_vars(vars: &[(&'static str, Value)]) -> Vars {
    to_vars_with(vars, &Converted::default())
}

/// `vars` converted for the interpreter, the containers already in `done` shared, not converted.
pub fn to_vars_with(vars: &[(&'static str, Value)], done: &Converted) -> Vars {
    vars.iter()
        .map(|(k, v)| (*k, to_val_with(v, done)))
        .collect()
}

/// A fact as the interpreter's value, its maps and lists [`Shared`].
pub fn to_val(v: &Value) -> Box<dyn Val> {
    to_val_with(v, &Converted::default())
}

/// [`to_val`], the containers already in `done` shared, not converted.
pub fn to_val_with(v: &Value, done: &Converted) -> Box<dyn Val> {
    if let Some(val) = done.find(v) {
        return val.clone_as_boxed();
    }
    match v {
        Value::Map(m) => {
            let entries: HashMap<CelMapKey<'static>, Box<dyn Val>> = m
                .map
                .iter()
                .map(|(k, v)| (map_key(k), to_val_with(v, done)))
                .collect();
            Box::new(Shared(Arc::new(CelMap::from(entries))))
        }
        Value::List(l) => {
            let items: Vec<Box<dyn Val>> = l.iter().map(|v| to_val_with(v, done)).collect();
            Box::new(Shared(Arc::new(CelList::from(items))))
        }
        // Scalars (and the opaque values facts never hold) convert as the interpreter would.
        other => Box::<dyn Val>::try_from(other.clone())
            .unwrap_or_else(|_| Box::new(cel::common::types::CelNull)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::facts::value::{Obj, list, strings};

    /// Every operation a rule may apply to a fact gives the same answer on the shared form as on
    /// the interpreter's own conversion of the same value.
    #[test]
    fn shared_facts_evaluate_as_the_built_in_containers_do() {
        let obs = |code: i64, path: &str| {
            Obj::new()
                .i("code", code)
                .s("path", path)
                .v("tags", strings(["a", "b"]))
                .build()
        };
        let fact = Obj::new()
            .s("name", "v1.a.example.com")
            .b("ok", true)
            .f("ratio", 0.5)
            .v("list", list([obs(200, "/x"), obs(503, "/y")]))
            .v("empty", list([]))
            .v("labels", Obj::new().s("app", "api").build())
            .build();
        let exprs = [
            "f.name",
            "f.ok && f.ratio < 1.0",
            "f.list.exists(o, o.code >= 500)",
            "f.list.filter(o, o.code >= 500).map(o, o.path)",
            "f.list.map(o, o.tags)",
            "f.list[1].tags[0]",
            "f.list.filter(o, o.code == 503)[0].path",
            "size(f.list) + size(f.labels) + size(f.empty)",
            "'app' in f.labels && 'nope' in f.labels",
            "'a' in f.list[0].tags",
            "has(f.labels.app) && !has(f.labels.other)",
            "f.labels == {'app': 'api'}",
            "{'app': 'api'} == f.labels",
            "f.list[0] == f.list[0] && f.list[0] != f.list[1]",
            "f.list[0].tags + ['c']",
            "f.empty + f.list[0].tags",
            "f.labels",
            "f.list",
            "f.list.all(o, o.path.startsWith('/'))",
            "f.list[5]",
            "f.labels.missing",
            "f.?labels.?app.orValue('none')",
            "f.labels[?'nope'].orValue('none')",
            "(f.ok ? f.list : f.empty)[0].code",
            "(f.ok ? f.labels : {}).app",
            "f.list.map(o, o).map(o, o.code)",
        ];
        let env = crate::engine::functions::env();
        for src in exprs {
            let program = env.compile(src).unwrap_or_else(|e| panic!("{src}: {e}"));
            let mut built_in = cel::Context::with_env(env.clone());
            built_in.add_variable_from_value("f", fact.clone());
            let mut shared = cel::Context::with_env(env.clone());
            shared.add_variable_as_val("f", to_val(&fact));
            let want = program.execute(&built_in);
            let got = program.execute(&shared);
            assert!(got == want, "{src}: shared {got:?}, built-in {want:?}");
        }
    }

    /// A container converted beforehand is bound where a tree holds it, and the tree evaluates
    /// as one converted from scratch; a container equal to it but not the same is converted anew.
    #[test]
    fn a_fact_converted_once_is_bound_by_reference_where_it_is_listed() {
        let fact = Obj::new().i("code", 503).s("path", "/apis/x").build();
        let twin = Obj::new().i("code", 503).s("path", "/apis/x").build();
        let done = Converted::of([&fact]);
        assert!(done.find(&fact).is_some());
        assert!(done.find(&twin).is_none());
        let holder = Obj::new()
            .v("observations", list([fact.clone(), twin]))
            .v("first", fact)
            .build();
        let env = crate::engine::functions::env();
        for src in [
            "h.observations.exists(o, o.code >= 500)",
            "h.observations[0] == h.first && h.observations[1] == h.first",
            "h.first.path + string(size(h.observations))",
            "h",
        ] {
            let program = env.compile(src).unwrap_or_else(|e| panic!("{src}: {e}"));
            let mut fresh = cel::Context::with_env(env.clone());
            fresh.add_variable_as_val("h", to_val(&holder));
            let mut bound = cel::Context::with_env(env.clone());
            bound.add_variable_as_val("h", to_val_with(&holder, &done));
            let want = program.execute(&fresh);
            assert!(program.execute(&bound) == want, "{src}: {want:?}");
        }
    }
}
