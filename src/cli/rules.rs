//! `rules list|lint|test`: show the rules, check rule files, run their `.test.yaml` cases.
//!
//! `lint` loads every rule (bundled, `--rules DIR`, and the directories given) with all checks and
//! prints every problem at once as `file:line: message` — all the problems of one file too, not
//! only its first — then counts the rules checked, bundled and custom apart. A rule file that does
//! not load exits 2 (an input error), a rule without a test beside it — one case that fires and one
//! that does not — exits 1.
//! `test` runs every test file of the directories given (default `./rules`) and of `--rules DIR`
//! against the bundled rules plus the rules of those directories, and exits 1 on any failed
//! expectation and on any rule of those directories that has no test: a directory of rules without
//! tests does not pass.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::analyze::RuleArgs;
use super::{EXIT_FINDINGS, EXIT_INPUT, EXIT_OK};
use crate::engine::RuleSet;
use crate::engine::rules::load::rule_files;
use crate::engine::ruletest::{Runner, parse_test_file, test_files};

/// Arguments of `rules`.
#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(subcommand)]
    command: RulesCommand,
}

#[derive(Debug, Subcommand)]
enum RulesCommand {
    /// List the bundled rules and those of `--rules DIR`.
    List {
        #[command(flatten)]
        rule_args: RuleArgs,
    },
    /// Check rule files: schema, CEL, fields against the fact model, a test beside each rule.
    Lint {
        /// Rule directories to check besides the bundled rules.
        #[arg(value_name = "DIR")]
        dirs: Vec<PathBuf>,
        #[command(flatten)]
        rule_args: RuleArgs,
    },
    /// Run the `<id>.test.yaml` cases of rule directories (default `./rules`).
    Test {
        /// Directories holding `*.test.yaml` files.
        #[arg(value_name = "DIR")]
        dirs: Vec<PathBuf>,
        #[command(flatten)]
        rule_args: RuleArgs,
    },
}

pub fn run(args: RulesArgs) -> anyhow::Result<u8> {
    match args.command {
        RulesCommand::List { rule_args } => list(&rule_args),
        RulesCommand::Lint { dirs, rule_args } => lint(&dirs, &rule_args),
        RulesCommand::Test { dirs, rule_args } => test(&dirs, &rule_args),
    }
}

fn list(rule_args: &RuleArgs) -> anyhow::Result<u8> {
    let set = rule_args.load()?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<52} {:<12} {:<9} {:<25} {:<12} SOURCE",
        "ID", "CLASS", "SEVERITY", "SUBJECT", "RUNG"
    )?;
    for r in &set.rules {
        writeln!(
            out,
            "{:<52} {:<12} {:<9} {:<25} {:<12} {}",
            r.id,
            r.class.as_str(),
            r.severity.as_str(),
            r.subject_text(),
            r.rung.as_str(),
            if r.bundled {
                "bundled".to_string()
            } else {
                r.file.clone()
            }
        )?;
    }
    Ok(EXIT_OK)
}

/// Test-file problems of one rule file on disk: a missing test, or one without a case that fires and
/// one that does not. Each names a line: the rule's first line for a missing test, the first case
/// for a missing kind of case.
fn test_problems(rule_file: &Path) -> Vec<String> {
    let test = test_beside(rule_file);
    if !test.exists() {
        return vec![format!(
            "{}:1: no test beside the rule (expected {})",
            rule_file.display(),
            test.display()
        )];
    }
    match parse_test_file(&test) {
        Err(e) => vec![e.to_string()],
        Ok(t) => {
            let first = t.cases.first().map_or(1, |c| c.line.max(1));
            let mut p = Vec::new();
            if !t.cases.iter().any(|c| !c.fires.is_empty()) {
                p.push(format!(
                    "{}:{first}: no case where the rule fires",
                    test.display()
                ));
            }
            if !t.cases.iter().any(|c| !c.not_fires.is_empty()) {
                p.push(format!(
                    "{}:{first}: no case where the rule must not fire",
                    test.display()
                ));
            }
            p
        }
    }
}

/// `<id>.test.yaml` beside `<id>.yaml` (or `.yml`).
fn test_beside(rule_file: &Path) -> PathBuf {
    rule_file.with_extension("test.yaml")
}

/// Add the rules of a user directory to `set`, every load error to `errors`; rules identical to
/// bundled ones (the repository's own `rules/`) are not clashes. Returns the rule files of the
/// directory that are not bundled ones — the custom rules, loaded or not.
fn add_dir_rules(set: &mut RuleSet, dir: &Path, errors: &mut Vec<String>) -> Vec<PathBuf> {
    let files = match rule_files(dir) {
        Ok(files) => files,
        Err(e) => {
            errors.push(e.to_string());
            return Vec::new();
        }
    };
    let bundled: Vec<String> = set
        .rules
        .iter()
        .filter(|r| r.bundled)
        .map(|r| r.file.clone())
        .collect();
    let custom: Vec<PathBuf> = files
        .iter()
        .filter(|f| {
            let shown = f.display().to_string();
            !bundled.iter().any(|b| same_file(b, &shown))
        })
        .cloned()
        .collect();
    let (more, load_errors) = crate::engine::rules::load::load_paths(&custom);
    errors.extend(load_errors.iter().map(ToString::to_string));
    for r in more.rules {
        if let Err(e) = set.extend(RuleSet { rules: vec![r] }) {
            errors.push(e.to_string());
        }
    }
    custom
}

fn lint(dirs: &[PathBuf], rule_args: &RuleArgs) -> anyhow::Result<u8> {
    let mut problems: Vec<String> = Vec::new();
    let (mut set, bundled_errors) = RuleSet::bundled_all();
    let bundled = set.len();
    let mut load_errors: Vec<String> = bundled_errors.iter().map(ToString::to_string).collect();
    let mut user_dirs: Vec<&PathBuf> = dirs.iter().collect();
    if let Some(d) = &rule_args.rules_dir {
        user_dirs.push(d);
    }
    let mut custom: Vec<PathBuf> = Vec::new();
    for dir in &user_dirs {
        custom.extend(add_dir_rules(&mut set, dir, &mut load_errors));
    }
    let mut checked_files = custom.clone();
    for r in set.rules.iter().filter(|r| r.bundled) {
        let p = PathBuf::from(&r.file);
        if p.exists() && !checked_files.contains(&p) {
            checked_files.push(p);
        }
    }
    for f in &checked_files {
        problems.extend(test_problems(f));
    }
    // An Inconclusive verdict names what was missing: a `needs` without words would show CEL.
    for r in set
        .rules
        .iter()
        .filter(|r| r.needs.is_some() && r.needs_what.is_none())
    {
        let line = r.needs.as_ref().map_or(1, |n| n.line.max(1));
        problems.push(format!(
            "{}:{line}: needs has no `what:` — write `needs: {{when: EXPR, what: \"…\"}}` so an Inconclusive verdict says what is missing in words",
            r.file
        ));
    }
    let mut err = std::io::stderr().lock();
    for e in load_errors.iter().chain(&problems) {
        writeln!(err, "{e}")?;
    }
    let from = if user_dirs.is_empty() {
        String::new()
    } else {
        let shown: Vec<String> = user_dirs.iter().map(|d| d.display().to_string()).collect();
        format!(" in {}", shown.join(", "))
    };
    writeln!(
        std::io::stdout().lock(),
        "{} rules checked ({bundled} bundled, {} custom{from}), {} problem(s)",
        bundled + custom.len(),
        custom.len(),
        load_errors.len() + problems.len()
    )?;
    Ok(if !load_errors.is_empty() {
        EXIT_INPUT
    } else if !problems.is_empty() {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}

fn same_file(a: &str, b: &str) -> bool {
    let canon = |s: &str| std::fs::canonicalize(s).ok();
    canon(a).is_some() && canon(a) == canon(b)
}

/// Load an input of a test case: a bundle file, or a directory of raw files.
pub fn load_input(path: &Path) -> anyhow::Result<crate::bundle::EvidenceBundle> {
    if path.is_dir() {
        Ok(crate::bundle::raw::import_paths(&[path.to_path_buf()])?)
    } else {
        Ok(crate::bundle::load_bundle(path)?)
    }
}

fn test(dirs: &[PathBuf], rule_args: &RuleArgs) -> anyhow::Result<u8> {
    let mut set = rule_args.load()?;
    let mut roots: Vec<PathBuf> = dirs.to_vec();
    if roots.is_empty() && Path::new("rules").is_dir() {
        roots.push(PathBuf::from("rules"));
    }
    if let Some(d) = &rule_args.rules_dir {
        roots.push(d.clone());
    }
    if roots.is_empty() {
        return Err(super::input_error(
            "no rule directory to test: give DIR or --rules DIR",
        ));
    }
    // The rules of each DIR are the ones its tests are about: load them (the bundled ones and
    // --rules DIR are loaded already).
    let mut plan: Vec<(Vec<PathBuf>, Vec<PathBuf>)> = Vec::new();
    for root in &roots {
        let rules = rule_files(root).map_err(super::input_error)?;
        let tests = test_files(root);
        if rules.is_empty() && tests.is_empty() {
            return Err(super::input_error(format!(
                "{}: no rule files (<id>.yaml) and no tests (<id>.test.yaml)",
                root.display()
            )));
        }
        if rule_args.rules_dir.as_ref() != Some(root) {
            let mut errors = Vec::new();
            add_dir_rules(&mut set, root, &mut errors);
            if let Some(e) = errors.into_iter().next() {
                return Err(super::input_error(e));
            }
        }
        plan.push((rules, tests));
    }
    let loader = load_input;
    let mut runner = Runner::new(&set, &loader);
    let mut failed = 0usize;
    let mut total = 0usize;
    let mut untested = 0usize;
    let mut out = std::io::stdout().lock();
    for (rules, tests) in &plan {
        // A rule without a test is a failure, not a pass by default.
        for r in rules.iter().filter(|r| !tests.contains(&test_beside(r))) {
            untested += 1;
            writeln!(
                out,
                "FAIL  {}\n      {}:1: no test beside the rule (expected {})",
                r.file_stem().and_then(|s| s.to_str()).unwrap_or_default(),
                r.display(),
                test_beside(r).display()
            )?;
        }
        for f in tests {
            let t = parse_test_file(f)?;
            let r = runner.run(&t);
            total += 1;
            if r.failures.is_empty() {
                writeln!(out, "ok    {} ({} case(s))", r.rule, r.cases)?;
            } else {
                failed += 1;
                writeln!(out, "FAIL  {}", r.rule)?;
                for x in &r.failures {
                    writeln!(out, "      {}: {}", x.place, x.message)?;
                }
            }
        }
    }
    writeln!(
        out,
        "{total} test file(s), {failed} failed, {untested} rule(s) without a test"
    )?;
    Ok(if failed + untested > 0 {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}
