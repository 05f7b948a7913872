//! Phase one and two of loading a rule file: spanned YAML → validated, compiled [`Rule`].
//!
//! Every value is read as `Spanned<T>` so that a problem found after parsing (an unknown class, a CEL
//! syntax error, a field the fact model does not have) still names the line it was written on. For a
//! block scalar (`when: |`) the span points at the indicator; the expression starts on the next line,
//! and a CEL error on its third line is reported three lines further down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::check::{SampleWorld, check_rule_all};
use super::template::{Part, Template, split};
use super::{Expr, Role, Rule, RuleError, RuleOut, RuleSet};
use crate::bundle::Rung;
use crate::engine::diagnosis::{Class, Component, Severity, SubjectKind};
use crate::engine::facts::SCHEMA;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRuleOut {
    class: Spanned<String>,
    because: Spanned<String>,
}

/// `subject: APIService` or `subject: [ValidatingWebhook, MutatingWebhook]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// `needs: EXPR`, or `needs: {when: EXPR, what: "…"}` with what the expression looks for in words
/// (the Inconclusive summary shows `what`, not the expression).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawNeeds {
    Expr(String),
    Described(DescribedNeeds),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribedNeeds {
    when: String,
    what: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    schema: Spanned<String>,
    id: Spanned<String>,
    class: Spanned<String>,
    severity: Spanned<String>,
    subject: Spanned<OneOrMany>,
    rung: Spanned<String>,
    #[serde(default)]
    component: Option<Spanned<String>>,
    #[serde(default)]
    confidence: Option<Spanned<f64>>,
    #[serde(default)]
    role: Option<Spanned<String>>,
    #[serde(default)]
    needs: Option<Spanned<RawNeeds>>,
    when: Spanned<String>,
    #[serde(default)]
    evidence: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    rules_out: Vec<RawRuleOut>,
    summary: Spanned<String>,
    #[serde(default)]
    next: Vec<Spanned<String>>,
    explain: Spanned<String>,
    #[serde(default)]
    references: Vec<String>,
}

/// Files of a rule directory, sorted; `*.test.yaml` are skipped.
///
/// # Errors
/// A [`RuleError`] when the directory cannot be read.
pub fn rule_files(dir: &Path) -> Result<Vec<PathBuf>, RuleError> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for e in std::fs::read_dir(dir)? {
            let p = e?.path();
            if p.is_dir() {
                walk(&p, out)?;
            } else if let Some(n) = p.file_name().and_then(|n| n.to_str())
                && (n.ends_with(".yaml") || n.ends_with(".yml"))
                // `<id>.test.yaml` beside a rule is its test (docs/rules.md), not a rule: loading
                // it would fail on the rule shape and make every tested directory unloadable.
                && !n.ends_with(".test.yaml")
                && !n.ends_with(".test.yml")
            {
                out.push(p);
            }
        }
        Ok(())
    }
    // Sorted because rule order is the classifier's last tie-break (and the order of `rules list`):
    // `read_dir` order differs between filesystems, and a verdict must not.
    let mut out = Vec::new();
    walk(dir, &mut out).map_err(|e| RuleError {
        file: dir.display().to_string(),
        line: 0,
        message: format!("cannot read rule directory: {e}"),
    })?;
    out.sort();
    Ok(out)
}

/// Load rule files from disk, returning every rule that loaded and every error.
pub fn load_paths(files: &[PathBuf]) -> (RuleSet, Vec<RuleError>) {
    let mut sources = Vec::new();
    let mut errors = Vec::new();
    for f in files {
        match std::fs::read_to_string(f) {
            Ok(t) => sources.push((f.display().to_string(), t)),
            Err(e) => errors.push(RuleError {
                file: f.display().to_string(),
                line: 0,
                message: format!("cannot read: {e}"),
            }),
        }
    }
    let (set, more) = load_sources(sources.into_iter(), false);
    errors.extend(more);
    (set, errors)
}

/// Load rules from (file name, text) pairs. Duplicate ids are errors at the later file.
pub fn load_sources<I: Iterator<Item = (String, String)>>(
    sources: I,
    bundled: bool,
) -> (RuleSet, Vec<RuleError>) {
    let world = SampleWorld::new();
    let mut set = RuleSet::default();
    let mut errors = Vec::new();
    for (file, text) in sources {
        match load_one_all(&file, &text, bundled, &world) {
            Ok(rule) => {
                if let Err(e) = set.extend(RuleSet { rules: vec![rule] }) {
                    errors.push(e);
                }
            }
            Err(e) => errors.extend(e),
        }
    }
    (set, errors)
}

/// Every message is one line (`file:line: message`): the CEL parser's messages quote the source,
/// which may hold a line break or a control character, so those are written escaped.
fn err(file: &str, line: usize, message: impl Into<String>) -> RuleError {
    RuleError {
        file: file.to_string(),
        line,
        message: one_line(&message.into()),
    }
}

fn one_line(message: &str) -> String {
    if !message.contains(char::is_control) {
        return message.to_string();
    }
    message
        .chars()
        .map(|c| match c {
            '\n' => "\\n".to_string(),
            '\r' => "\\r".to_string(),
            '\t' => "\\t".to_string(),
            c if c.is_control() => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// The line where a spanned scalar's content starts: the next line for a block scalar.
fn content_line(text: &str, s: &Spanned<String>) -> usize {
    let line = s.referenced.line() as usize;
    let col = s.referenced.column() as usize;
    let src_line = text.lines().nth(line.saturating_sub(1)).unwrap_or("");
    let at: String = src_line.chars().skip(col.saturating_sub(1)).collect();
    let t = at.trim_start();
    if t.starts_with('|') || t.starts_with('>') {
        line + 1
    } else {
        line
    }
}

fn is_kebab(id: &str) -> bool {
    !id.is_empty()
        && id.split('-').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// Compile one CEL expression; a syntax error names the line inside the file.
pub fn compile(file: &str, line: usize, what: &str, source: &str) -> Result<Expr, RuleError> {
    let env = crate::engine::functions::env();
    env.compile(source)
        .map(|program| Expr {
            source: source.to_string(),
            program,
            line,
        })
        .map_err(|e| {
            let first = e.errors.first();
            let inner = first.map_or(0, |x| x.pos.0.max(1) as usize - 1);
            let msg = first.map_or_else(|| e.to_string(), |x| x.msg.clone());
            err(
                file,
                line + inner,
                format!("{what}: CEL syntax error: {msg}"),
            )
        })
}

fn template(file: &str, line: usize, what: &str, text: &str) -> Result<Template, RuleError> {
    let pieces = split(text).map_err(|m| err(file, line, format!("{what}: {m}")))?;
    let mut parts = Vec::new();
    for (is_expr, s) in pieces {
        if is_expr {
            parts.push(Part::Expr(compile(file, line, what, &s)?));
        } else {
            parts.push(Part::Text(s));
        }
    }
    Ok(Template {
        source: text.to_string(),
        parts,
    })
}

fn parse_class(file: &str, s: &Spanned<String>, allow_healthy: bool) -> Result<Class, RuleError> {
    let line = s.referenced.line() as usize;
    match Class::parse(&s.value) {
        Some(Class::Inconclusive) => Err(err(
            file,
            line,
            "class Inconclusive is given by the classifier, not by rules",
        )),
        Some(Class::Healthy) if !allow_healthy => {
            Err(err(file, line, "Healthy cannot be ruled out"))
        }
        Some(c) => Ok(c),
        None => Err(err(
            file,
            line,
            format!(
                "unknown class {:?} (one of Aggregation, Admission, Auth, APF, Storage, Watch, OutOfScope, Healthy)",
                s.value
            ),
        )),
    }
}

/// A YAML error as `file:line: message`. serde-saphyr prefixes its messages with
/// `error: line L column C: `; the line is already in front, so it is said once.
pub fn yaml_error(file: &str, e: &serde_saphyr::Error) -> RuleError {
    let line = e.location().map_or(0, |l| l.line() as usize);
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("invalid YAML");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let message = match first.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
        Some((loc, msg)) if loc.contains(" column ") => msg,
        _ => first,
    };
    err(file, line, message.to_string())
}

/// Load and check one rule file.
///
/// # Errors
/// The first problem, as `file:line: message` ([`load_one_all`] gives every one).
pub fn load_one(
    file: &str,
    text: &str,
    bundled: bool,
    world: &SampleWorld,
) -> Result<Rule, RuleError> {
    load_one_all(file, text, bundled, world).map_err(|mut errors| errors.swap_remove(0))
}

/// Load and check one rule file, reporting every problem at once (`rules lint`): a value that is
/// wrong does not hide the next one. Only a file that is not YAML of the rule shape stops at its
/// first problem, since nothing after it can be read.
///
/// # Errors
/// Every problem found, in file order of the checks, never empty.
pub fn load_one_all(
    file: &str,
    text: &str,
    bundled: bool,
    world: &SampleWorld,
) -> Result<Rule, Vec<RuleError>> {
    if text.trim().is_empty() {
        return Err(vec![err(file, 1, "empty rule file")]);
    }
    let raw: RawRule = serde_saphyr::from_str(text).map_err(|e| vec![yaml_error(file, &e)])?;
    let mut errs: Vec<RuleError> = Vec::new();
    // `keep(result)`: the value, or None with the error recorded.
    fn keep<T>(errs: &mut Vec<RuleError>, r: Result<T, RuleError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                errs.push(e);
                None
            }
        }
    }
    let line = |s: &Spanned<String>| s.referenced.line() as usize;
    if raw.schema.value != SCHEMA {
        errs.push(err(
            file,
            line(&raw.schema),
            format!(
                "schema {:?} is not supported (expected {SCHEMA:?})",
                raw.schema.value
            ),
        ));
    }
    let id = raw.id.value.clone();
    if !is_kebab(&id) {
        errs.push(err(
            file,
            line(&raw.id),
            format!("id {id:?} is not kebab-case (lowercase words joined by '-')"),
        ));
    }
    // The id is how `explain RULE`, waivers and the sibling `<id>.test.yaml` find a rule; a file
    // named otherwise would leave its test unrun (`rules test` pairs them by file name).
    let stem = Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    if stem != id {
        errs.push(err(
            file,
            line(&raw.id),
            format!("id {id:?} differs from the file name {stem:?}.yaml"),
        ));
    }
    let class = keep(&mut errs, parse_class(file, &raw.class, true));
    let severity = match raw.severity.value.as_str() {
        "info" => Some(Severity::Info),
        "warning" => Some(Severity::Warning),
        "critical" => Some(Severity::Critical),
        other => {
            errs.push(err(
                file,
                line(&raw.severity),
                format!("unknown severity {other:?} (info, warning, critical)"),
            ));
            None
        }
    };
    // DESIGN §2: Healthy verdicts are severity info; a Healthy rule at warning would make an
    // all-clear trip `--fail-on warning`.
    if class == Some(Class::Healthy) && severity.is_some_and(|s| s != Severity::Info) {
        errs.push(err(
            file,
            line(&raw.severity),
            "a Healthy rule has severity info",
        ));
    }
    let subjects = keep(&mut errs, subjects(file, &raw.subject));
    let rung = Rung::ALL.into_iter().find(|r| r.as_str() == raw.rung.value);
    if rung.is_none() {
        errs.push(err(
            file,
            line(&raw.rung),
            format!(
                "unknown rung {:?} (one of {})",
                raw.rung.value,
                Rung::ALL.map(|r| r.as_str()).join(", ")
            ),
        ));
    }
    let component = match &raw.component {
        None => Component::KubeApiserver,
        Some(c) => match Component::ALL.into_iter().find(|k| k.as_str() == c.value) {
            Some(k) => k,
            None => {
                errs.push(err(
                    file,
                    line(c),
                    format!(
                        "unknown component {:?} (one of {})",
                        c.value,
                        Component::ALL.map(|k| k.as_str()).join(", ")
                    ),
                ));
                Component::KubeApiserver
            }
        },
    };
    // The extension API server is met only through an APIService: its steps are an APIService's
    // (or a request's through one), and an APIService's authn/authz are always its steps —
    // kube-apiserver authenticates users, never APIServices.
    let component_line = raw.component.as_ref().map_or(line(&raw.rung), line);
    if let Some(subjects) = &subjects {
        if component == Component::ExtensionApiserver
            && !subjects
                .iter()
                .all(|k| matches!(k, SubjectKind::ApiService | SubjectKind::Request))
        {
            errs.push(err(
                file,
                component_line,
                "component: extension_apiserver is for APIService and Request rules (the extension API server is reached through an APIService)",
            ));
        }
        if let Some(r) = rung
            && component == Component::KubeApiserver
            && matches!(r, Rung::Authn | Rung::Authz)
            && subjects.contains(&SubjectKind::ApiService)
        {
            errs.push(err(
                file,
                component_line,
                format!(
                    "an APIService's {r} is the extension API server's (front-proxy authentication, delegated authorization): add `component: extension_apiserver`"
                ),
            ));
        }
    }
    // 0.8 when unset (docs/rules.md): one rule alone is good evidence, but the classifier's
    // noisy-OR lets a second independent rule on the same rung raise it (0.8 and 0.8 give 0.96).
    // Zero is refused because a rule that proves nothing should not exist.
    let confidence = match &raw.confidence {
        Some(c) if !(c.value > 0.0 && c.value <= 1.0) => {
            errs.push(err(
                file,
                c.referenced.line() as usize,
                format!("confidence {} is outside (0, 1]", c.value),
            ));
            0.8
        }
        Some(c) => c.value,
        None => 0.8,
    };
    let role = match raw.role.as_ref().map(|r| r.value.as_str()) {
        None | Some("verdict") => Role::Verdict,
        Some("support") => Role::Support,
        Some(other) => {
            errs.push(err(
                file,
                raw.role.as_ref().map_or(1, line),
                format!("unknown role {other:?} (verdict, support)"),
            ));
            Role::Verdict
        }
    };
    let (needs, needs_what) = match &raw.needs {
        Some(n) => {
            let at = n.referenced.line() as usize;
            match &n.value {
                RawNeeds::Expr(e) => {
                    let spanned = Spanned {
                        value: e.clone(),
                        referenced: n.referenced,
                        defined: n.defined,
                    };
                    let compiled = compile(file, content_line(text, &spanned), "needs", e);
                    (keep(&mut errs, compiled), None)
                }
                RawNeeds::Described(d) => {
                    if d.what.trim().is_empty() {
                        errs.push(err(file, at, "needs.what is empty"));
                    }
                    let compiled = compile(file, at + 1, "needs.when", &d.when);
                    (keep(&mut errs, compiled), Some(d.what.trim().to_string()))
                }
            }
        }
        None => (None, None),
    };
    let when = keep(
        &mut errs,
        compile(file, content_line(text, &raw.when), "when", &raw.when.value),
    );
    let mut evidence = Vec::new();
    for (name, e) in &raw.evidence {
        let compiled = compile(
            file,
            content_line(text, e),
            &format!("evidence {name}"),
            &e.value,
        );
        if let Some(c) = keep(&mut errs, compiled) {
            evidence.push((name.clone(), c));
        }
    }
    let mut rules_out = Vec::new();
    for r in &raw.rules_out {
        // Healthy is not a layer that can be excluded (parse_class refuses it here), and a rule
        // ruling out its own class would put "X ruled out" under an X verdict.
        let c = keep(&mut errs, parse_class(file, &r.class, false));
        if c.is_some() && c == class {
            errs.push(err(
                file,
                r.class.referenced.line() as usize,
                format!(
                    "a {} rule cannot rule out its own class",
                    class.map_or("", Class::as_str)
                ),
            ));
        }
        let because = template(
            file,
            content_line(text, &r.because),
            "because",
            &r.because.value,
        );
        if let (Some(c), Some(because)) = (c, keep(&mut errs, because)) {
            rules_out.push(RuleOut { class: c, because });
        }
    }
    let summary = keep(
        &mut errs,
        template(
            file,
            content_line(text, &raw.summary),
            "summary",
            raw.summary.value.trim(),
        ),
    );
    let mut next = Vec::new();
    for n in &raw.next {
        let t = template(file, content_line(text, n), "next", n.value.trim());
        if let Some(t) = keep(&mut errs, t) {
            next.push(t);
        }
    }
    if raw.explain.value.trim().is_empty() {
        errs.push(err(file, line(&raw.explain), "explain is empty"));
    }
    // Without its subject kinds a rule's expressions cannot be checked (the variables they see
    // depend on them). Anything else already found wrong gets a placeholder, so that the
    // expressions are still checked against the fact model: every problem is reported at once.
    let Some(subjects) = subjects else {
        return Err(errs);
    };
    let class = class.unwrap_or(Class::OutOfScope);
    let severity = severity.unwrap_or(Severity::Warning);
    let rung = rung.unwrap_or(Rung::ALL[0]);
    let when = match when {
        Some(w) => w,
        None => match compile(file, 1, "when", "false") {
            Ok(placeholder) => placeholder,
            Err(e) => return Err(vec![e]),
        },
    };
    let summary = summary.unwrap_or_else(|| Template {
        source: String::new(),
        parts: Vec::new(),
    });
    let rule = Rule {
        id,
        class,
        severity,
        subjects,
        rung,
        component,
        confidence,
        role,
        needs,
        needs_what,
        when,
        evidence,
        rules_out,
        summary,
        next,
        explain: raw.explain.value.trim_end().to_string(),
        references: raw.references,
        file: file.to_string(),
        bundled,
    };
    errs.extend(check_rule_all(&rule, world));
    if errs.is_empty() { Ok(rule) } else { Err(errs) }
}

/// The subject kinds of a rule: exact kind names (no aliases), not `Source`, all seeing the same
/// variables.
fn subjects(file: &str, subject: &Spanned<OneOrMany>) -> Result<Vec<SubjectKind>, RuleError> {
    let subject_line = subject.referenced.line() as usize;
    let names: Vec<String> = match &subject.value {
        OneOrMany::One(s) => vec![s.clone()],
        OneOrMany::Many(v) => v.clone(),
    };
    if names.is_empty() {
        return Err(err(
            file,
            subject_line,
            "subject: at least one subject kind",
        ));
    }
    let mut subjects = Vec::new();
    for n in &names {
        let k = SubjectKind::parse(n)
            .filter(|k| k.as_str() == n)
            .ok_or_else(|| {
                err(
                    file,
                    subject_line,
                    format!(
                        "unknown subject {n:?} (one of {})",
                        SubjectKind::ALL.map(|k| k.as_str()).join(", ")
                    ),
                )
            })?;
        // Source verdicts are made by `classify/collection.rs` from the bundle's gaps; a rule on
        // them would see no facts, since a source that could not be read has none.
        if k == SubjectKind::Source {
            return Err(err(
                file,
                subject_line,
                "subject: Source verdicts come from the collection's own gaps, not from rules",
            ));
        }
        if !subjects.contains(&k) {
            subjects.push(k);
        }
    }
    // A rule's expressions are compiled and checked once, against one set of variables; two
    // kinds that see different variables (an APIService's `apiservice` and `delegation` vs a webhook's `webhook`)
    // would leave one of them checked against facts it does not have.
    let vars = crate::engine::facts::variables_for(subjects[0]);
    if subjects
        .iter()
        .any(|k| crate::engine::facts::variables_for(*k) != vars)
    {
        return Err(err(
            file,
            subject_line,
            "subject kinds of one rule must see the same variables (e.g. ValidatingWebhook and MutatingWebhook)",
        ));
    }
    Ok(subjects)
}

#[cfg(test)]
mod one_line_tests {
    use super::*;

    #[test]
    fn a_cel_syntax_error_quoting_a_line_break_is_one_line() {
        // Found by the `rules` fuzz target: an unterminated string spanning lines.
        let e = compile("r.yaml", 3, "when", "'abc\ndef").expect_err("not CEL");
        let shown = e.to_string();
        assert!(!shown.contains('\n'), "{shown:?}");
        assert!(
            shown.starts_with("r.yaml:3: when: CEL syntax error"),
            "{shown}"
        );
        assert_eq!(one_line("a\u{7}b\tc"), "a\\u{7}b\\tc");
    }
}
