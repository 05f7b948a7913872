//! Which families a parse keeps.
//!
//! A selection names families (the histogram `x`, never `x_bucket`), exactly or by prefix. It is the
//! only thing that decides whether a sample line is looked at past its metric name, so it is what
//! keeps a 30 MB `/metrics` cheap when the rules read a few dozen families of it.

use std::collections::HashSet;

/// Which families to keep.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    all: bool,
    exact: HashSet<String>,
    prefixes: Vec<String>,
}

impl Selection {
    /// Keep every family.
    pub fn all() -> Self {
        Selection {
            all: true,
            ..Selection::default()
        }
    }

    /// Keep the families with these exact names.
    pub fn names<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Selection {
            all: false,
            exact: names.into_iter().map(Into::into).collect(),
            prefixes: Vec::new(),
        }
    }

    /// Also keep every family whose name starts with `prefix`.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefixes.push(prefix.into());
        self
    }

    /// Add exact names.
    pub fn with_names<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.exact.extend(names.into_iter().map(Into::into));
        self
    }

    /// Whether the family `name` is kept.
    pub fn wants(&self, name: &str) -> bool {
        self.all || self.exact.contains(name) || self.prefixes.iter().any(|p| name.starts_with(p))
    }
}
