//! The containers of facts, shared rather than copied.
//!
//! The interpreter copies a map or list whenever it needs one of its own: each element a
//! comprehension (`observations.exists(o, …)`) binds to its variable, each argument it passes on,
//! each value it binds to a variable. With the built-in containers every such copy is a deep one,
//! and at 10,000 APIServices those copies were most of the analysis's time and memory. A fact's
//! maps and lists are [`Shared`] (`super::value` builds them so): copying one is a reference
//! count, and it behaves as the built-in container it wraps in every other respect (its type,
//! equality, indexing, `in`, `size()`, iteration, conversion back to `cel::Value`).

use std::sync::Arc;

use cel::common::traits::{
    Adder, Comparer, Container, Divider, Indexer, Iterable, Modder, Multiplier, Negator, Sizer,
    Subtractor, Zeroer,
};
use cel::common::types::Type;
use cel::common::value::{Builtin, BuiltinRef, CowVal, Val};

/// A built-in CEL container behind a reference count.
#[derive(Debug)]
pub struct Shared<T>(Arc<T>);

impl<T: Clone> Shared<T> {
    /// Share `container`.
    pub fn new(container: T) -> Self {
        Shared(Arc::new(container))
    }

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

#[cfg(test)]
mod tests {
    use crate::engine::facts::value::{Fact, Obj, list, strings};

    /// Every operation a rule may apply to a fact gives the same answer on the shared form as on
    /// the interpreter's own conversion of the same value (the fact copied out as a `cel::Value`).
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
            built_in.add_variable_from_value("f", fact.to_value());
            let mut shared = cel::Context::with_env(env.clone());
            shared.add_variable_as_val("f", fact.to_val());
            let want = program.execute(&built_in);
            let got = program.execute(&shared);
            assert!(got == want, "{src}: shared {got:?}, built-in {want:?}");
        }
    }

    /// A fact listed in several others is one container: a holder binds it by reference, and
    /// reads the same as a holder built from a copy of it.
    #[test]
    fn a_fact_listed_twice_is_shared_and_reads_as_a_copy() {
        let fact = Obj::new().i("code", 503).s("path", "/apis/x").build();
        let copy = Obj::new().i("code", 503).s("path", "/apis/x").build();
        let holder = |first: Fact| {
            Obj::new()
                .v("observations", list([fact.clone(), copy.clone()]))
                .v("first", first)
                .build()
        };
        let shared = holder(fact.clone());
        let copied = holder(copy.clone());
        let env = crate::engine::functions::env();
        for src in [
            "h.observations.exists(o, o.code >= 500)",
            "h.observations[0] == h.first && h.observations[1] == h.first",
            "h.first.path + string(size(h.observations))",
            "h",
        ] {
            let program = env.compile(src).unwrap_or_else(|e| panic!("{src}: {e}"));
            let mut a = cel::Context::with_env(env.clone());
            a.add_variable_as_val("h", shared.to_val());
            let mut b = cel::Context::with_env(env.clone());
            b.add_variable_as_val("h", copied.to_val());
            let want = program.execute(&b);
            assert!(program.execute(&a) == want, "{src}: {want:?}");
        }
        // Listing a fact shares its container: the copy in the list is the fact itself.
        let listed = list([fact.clone()]).to_val();
        let element = listed
            .as_indexer()
            .and_then(|i| i.get(&cel::common::types::CelInt::from(0)).ok())
            .expect("the list has its element");
        let map = |v: &dyn cel::common::value::Val| {
            std::ptr::from_ref(
                v.downcast_ref::<cel::common::types::CelMap>()
                    .expect("a map"),
            )
            .cast::<u8>()
        };
        assert!(std::ptr::eq(map(element.as_ref()), map(fact.as_val())));
        assert!(!std::ptr::eq(map(copy.as_val()), map(fact.as_val())));
    }
}
