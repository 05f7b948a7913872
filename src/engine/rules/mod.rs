//! Rules as data: `rules/<area>/<id>.yaml`, compiled and checked when loaded.
//!
//! A rule names its subject kind, the class and rung it diagnoses (and whose step that rung is:
//! kube-apiserver's, or the extension API server's behind an APIService), a CEL `when` over the fact model,
//! named `evidence` expressions, the classes its firing `rules_out` and why, templated `summary` and
//! `next` steps, and its runbook `explain` text (format: `docs/rules.md`). The bundled rules are
//! embedded in the binary by `build.rs`; `--rules DIR` adds a user's, and an id used twice is an error.
//!
//! Loading is two-phase like every input of the tool: the YAML is parsed into spanned raw types
//! (unknown fields rejected, with line numbers), then validated into a [`Rule`] — names parsed, CEL
//! compiled, field and function references checked against the fact model's shape, and every
//! expression evaluated against the fully populated sample ([`crate::engine::facts::sample`]). Every
//! failure is a [`RuleError`] whose `Display` is `file:line: message`.
//!
//! Sub-modules: [`load`] (YAML → rule), [`check`] (checks against the fact-model sample),
//! [`shape`] (the static walk of expressions), [`template`]
//! (`{{ }}` text).

pub mod check;
pub mod load;
pub mod shape;
pub mod template;

use std::path::Path;

use super::diagnosis::{Class, Component, Severity, SubjectKind};
use crate::bundle::Rung;
pub use template::Template;

/// A rule that could not be loaded: the file, the line, what is wrong. Shown as
/// `file:line: message`, or `file: message` when the problem is the whole file (line 0): an editor
/// jumping to `:0:` finds nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// The rule file (a repository path for bundled rules).
    pub file: String,
    /// 1-based line (0 when the problem is the whole file).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for RuleError {}

/// Whether a rule may decide a verdict or only support one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Its firing can decide the verdict of its subject.
    Verdict,
    /// Evidence that supports a verdict of its class decided by another rule, never decides alone —
    /// e.g. cumulative counters of a single metrics dump, which describe the process's whole life.
    Support,
}

impl Role {
    /// `verdict` or `support`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Verdict => "verdict",
            Role::Support => "support",
        }
    }
}

/// A compiled CEL expression with where it was written.
#[derive(Debug)]
pub struct Expr {
    /// The source.
    pub source: String,
    /// The compiled program.
    pub program: cel::Program,
    /// Line in the rule file where the expression starts.
    pub line: usize,
}

/// A class a firing rule excludes, and why.
#[derive(Debug)]
pub struct RuleOut {
    /// The excluded class.
    pub class: Class,
    /// Why, templated.
    pub because: Template,
}

/// A loaded, checked rule.
#[derive(Debug)]
pub struct Rule {
    /// Stable kebab-case id.
    pub id: String,
    /// The class it diagnoses.
    pub class: Class,
    /// Severity of its finding.
    pub severity: Severity,
    /// The subject kinds it fires on (one, or both webhook kinds).
    pub subjects: Vec<SubjectKind>,
    /// The rung of the ladder it tests.
    pub rung: Rung,
    /// Whose step that rung is: kube-apiserver's (default) or the extension API server's.
    pub component: Component,
    /// How strongly its firing supports its class (0..1).
    pub confidence: f64,
    /// Decide or support.
    pub role: Role,
    /// When false, the evidence this rule needs is absent (used for `Inconclusive`).
    pub needs: Option<Expr>,
    /// What `needs` looks for, in words (`needs: {when, what}`); shown when it is missing.
    pub needs_what: Option<String>,
    /// The condition.
    pub when: Expr,
    /// Named evidence values shown with a hit.
    pub evidence: Vec<(String, Expr)>,
    /// Classes ruled out when it fires.
    pub rules_out: Vec<RuleOut>,
    /// One sentence for a hit.
    pub summary: Template,
    /// Commands to run next.
    pub next: Vec<Template>,
    /// Runbook text.
    pub explain: String,
    /// Links.
    pub references: Vec<String>,
    /// Where it was loaded from.
    pub file: String,
    /// Embedded in the binary.
    pub bundled: bool,
}

/// The rules an analysis runs.
#[derive(Debug, Default)]
pub struct RuleSet {
    /// In load order: bundled first, then user rules.
    pub rules: Vec<Rule>,
}

mod bundled_files {
    include!(concat!(env!("OUT_DIR"), "/bundled_rules.rs"));
}

/// The bundled rule files: (repository path, content).
pub fn bundled_sources() -> &'static [(&'static str, &'static str)] {
    bundled_files::BUNDLED_RULES
}

impl Rule {
    /// The subject kinds as written (`ValidatingWebhook, MutatingWebhook`).
    pub fn subject_text(&self) -> String {
        self.subjects
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl RuleSet {
    /// The rules embedded in the binary.
    ///
    /// # Panics
    /// If an embedded rule does not load — impossible in a build whose tests pass (`rules lint`).
    pub fn bundled() -> RuleSet {
        match Self::bundled_checked() {
            Ok(set) => set,
            Err(e) => panic!("a bundled rule does not load: {e}"),
        }
    }

    /// The rules embedded in the binary, or the first that does not load.
    ///
    /// # Errors
    /// The first [`RuleError`] (only possible in a build whose rule tests fail).
    pub fn bundled_checked() -> Result<RuleSet, RuleError> {
        let (set, errors) = Self::bundled_all();
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(set),
        }
    }

    /// The embedded rules that load, and every error (for `rules lint`).
    pub fn bundled_all() -> (RuleSet, Vec<RuleError>) {
        load::load_sources(
            bundled_sources()
                .iter()
                .map(|(f, t)| (f.to_string(), t.to_string())),
            true,
        )
    }

    /// The `.yaml` rule files under `dir` (recursively; `*.test.yaml` are tests, not rules).
    ///
    /// # Errors
    /// The first [`RuleError`], naming file and line.
    pub fn load_dir(dir: &Path) -> Result<RuleSet, RuleError> {
        let (set, errors) = Self::load_dir_all(dir);
        match errors.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(set),
        }
    }

    /// Like [`RuleSet::load_dir`], but every error (for `rules lint`).
    pub fn load_dir_all(dir: &Path) -> (RuleSet, Vec<RuleError>) {
        match load::rule_files(dir) {
            Ok(files) => load::load_paths(&files),
            Err(e) => (RuleSet::default(), vec![e]),
        }
    }

    /// The bundled rules plus the user rules of `dir`; an id used twice is an error.
    ///
    /// # Errors
    /// The first [`RuleError`].
    pub fn bundled_with_dir(dir: &Path) -> Result<RuleSet, RuleError> {
        let mut set = RuleSet::bundled_checked()?;
        set.extend(RuleSet::load_dir(dir)?)?;
        Ok(set)
    }

    /// Add the rules of another set.
    ///
    /// # Errors
    /// A [`RuleError`] at the second file when an id is already used.
    pub fn extend(&mut self, other: RuleSet) -> Result<(), RuleError> {
        for r in other.rules {
            if let Some(existing) = self.get(&r.id) {
                return Err(RuleError {
                    file: r.file.clone(),
                    line: 0,
                    message: format!("rule id {:?} is already used by {}", r.id, existing.file),
                });
            }
            self.rules.push(r);
        }
        Ok(())
    }

    /// The rule with that id.
    pub fn get(&self, id: &str) -> Option<&Rule> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// No rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}
