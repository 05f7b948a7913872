//! `<id>.test.yaml`: the cases beside each rule, and the runner behind `rules test`.
//!
//! A case names an input — a bundle file, or a directory of raw incident files imported like
//! `analyze --raw` — and the subjects on which the rule must fire (`fires`) and must not
//! (`not_fires`), as `KIND` or `KIND/NAME` patterns. It may also pin the classifier's verdict on a
//! subject (`verdicts: {"APIService/x": Aggregation}`), which is how the differential rules of
//! docs/diagnosis.md are tested end to end, and override settings (`set: {cert_warn_days: 14}`).
//!
//! Inputs are resolved relative to the test file's directory first, then to the current directory
//! (the repository root for the bundled rules). Every case runs with the whole rule set, so a rule is
//! tested among the others, as in a real analysis.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::Filter;
use super::classify::classify;
use super::diagnosis::{Class, Diagnosis};
use super::eval::{Evaluation, evaluate};
use super::filter::SubjectPattern;
use super::rules::{RuleError, RuleSet};
use super::settings::Settings;
use crate::bundle::EvidenceBundle;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTestFile {
    #[serde(default)]
    rule: Option<String>,
    cases: Vec<Spanned<RawCase>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    #[serde(default)]
    name: Option<String>,
    input: String,
    #[serde(default)]
    fires: Vec<String>,
    #[serde(default)]
    not_fires: Vec<String>,
    #[serde(default)]
    verdicts: BTreeMap<String, String>,
    #[serde(default)]
    set: BTreeMap<String, f64>,
}

/// One case, parsed.
#[derive(Debug, Clone)]
pub struct Case {
    /// Line of the case in the test file.
    pub line: usize,
    /// Optional name.
    pub name: Option<String>,
    /// The input as written.
    pub input: String,
    /// Where the input resolved.
    pub path: PathBuf,
    /// Subjects it must fire on.
    pub fires: Vec<SubjectPattern>,
    /// Subjects it must not fire on.
    pub not_fires: Vec<SubjectPattern>,
    /// Expected verdict classes by exact subject (`KIND/NAME`).
    pub verdicts: Vec<(SubjectPattern, Class)>,
    /// Settings overrides.
    pub set: Vec<String>,
}

/// A test file, parsed.
#[derive(Debug, Clone)]
pub struct TestFile {
    /// The file.
    pub file: String,
    /// The rule under test.
    pub rule: String,
    /// Its cases.
    pub cases: Vec<Case>,
}

/// A failed expectation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `file:line` of the case.
    pub place: String,
    /// What went wrong.
    pub message: String,
}

/// Results of one test file.
#[derive(Debug, Clone)]
pub struct FileResult {
    /// The test file.
    pub file: String,
    /// The rule under test.
    pub rule: String,
    /// Number of cases.
    pub cases: usize,
    /// Failed expectations.
    pub failures: Vec<Failure>,
}

fn resolve(test_file: &Path, input: &str) -> PathBuf {
    let p = Path::new(input);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    if let Some(dir) = test_file.parent() {
        let near = dir.join(p);
        if near.exists() {
            return near;
        }
    }
    p.to_path_buf()
}

fn err(file: &str, line: usize, message: impl Into<String>) -> RuleError {
    RuleError {
        file: file.to_string(),
        line,
        message: message.into(),
    }
}

/// Parse a test file.
///
/// # Errors
/// A [`RuleError`] naming file and line.
pub fn parse_test_file(path: &Path) -> Result<TestFile, RuleError> {
    let file = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| err(&file, 0, format!("cannot read: {e}")))?;
    let raw: RawTestFile =
        serde_saphyr::from_str(&text).map_err(|e| super::rules::load::yaml_error(&file, &e))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let rule = raw
        .rule
        .unwrap_or_else(|| name.trim_end_matches(".test.yaml").to_string());
    let mut cases = Vec::new();
    for c in raw.cases {
        let line = c.referenced.line() as usize;
        let parse = |v: &[String]| -> Result<Vec<SubjectPattern>, RuleError> {
            v.iter()
                .map(|s| s.parse().map_err(|e| err(&file, line, format!("{e}"))))
                .collect()
        };
        let verdicts = c
            .value
            .verdicts
            .iter()
            .map(|(s, k)| {
                let p: SubjectPattern = s.parse().map_err(|e| err(&file, line, format!("{e}")))?;
                let class = Class::parse(k)
                    .ok_or_else(|| err(&file, line, format!("unknown class {k:?}")))?;
                Ok((p, class))
            })
            .collect::<Result<Vec<_>, RuleError>>()?;
        if c.value.fires.is_empty() && c.value.not_fires.is_empty() && verdicts.is_empty() {
            return Err(err(
                &file,
                line,
                "a case needs fires, not_fires or verdicts",
            ));
        }
        cases.push(Case {
            line,
            name: c.value.name.clone(),
            path: resolve(path, &c.value.input),
            input: c.value.input.clone(),
            fires: parse(&c.value.fires)?,
            not_fires: parse(&c.value.not_fires)?,
            verdicts,
            set: c
                .value
                .set
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
        });
    }
    if cases.is_empty() {
        return Err(err(&file, 0, "a test file needs at least one case"));
    }
    Ok(TestFile { file, rule, cases })
}

/// Every `*.test.yaml` under a directory, sorted.
pub fn test_files(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".test.yaml"))
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

/// Loads an input path into a bundle: a file is a bundle, a directory is raw incident files.
pub type InputLoader = dyn Fn(&Path) -> anyhow::Result<EvidenceBundle>;

/// One cached analysis of an input with settings, or why it could not be made.
type Analysis = Result<(Evaluation, Diagnosis), String>;

/// Runs test files, caching each (input, settings) analysis.
pub struct Runner<'a> {
    rules: &'a RuleSet,
    load: &'a InputLoader,
    cache: HashMap<(PathBuf, Vec<String>), Analysis>,
}

impl<'a> Runner<'a> {
    /// A runner over a rule set with an input loader.
    pub fn new(rules: &'a RuleSet, load: &'a InputLoader) -> Self {
        Runner {
            rules,
            load,
            cache: HashMap::new(),
        }
    }

    fn analysis(
        &mut self,
        path: &Path,
        set: &[String],
    ) -> Result<&(Evaluation, Diagnosis), String> {
        let key = (path.to_path_buf(), set.to_vec());
        if !self.cache.contains_key(&key) {
            let result = (|| {
                let bundle = (self.load)(path).map_err(|e| format!("{e:#}"))?;
                let settings = Settings::with_assignments(set).map_err(|e| e.to_string())?;
                let filter = Filter::default();
                let evaluation = evaluate(&bundle, self.rules, &settings, &filter);
                let diagnosis = classify(&evaluation, self.rules, &bundle, &filter);
                Ok((evaluation, diagnosis))
            })();
            self.cache.insert(key.clone(), result);
        }
        self.cache[&key].as_ref().map_err(Clone::clone)
    }

    /// Run one test file.
    pub fn run(&mut self, t: &TestFile) -> FileResult {
        let mut failures = Vec::new();
        let Some(index) = self.rules.rules.iter().position(|r| r.id == t.rule) else {
            return FileResult {
                file: t.file.clone(),
                rule: t.rule.clone(),
                cases: t.cases.len(),
                failures: vec![Failure {
                    place: t.file.clone(),
                    message: format!("no loaded rule has id {:?}", t.rule),
                }],
            };
        };
        for c in &t.cases {
            let place = format!("{}:{}", t.file, c.line);
            let label = c.name.clone().unwrap_or_else(|| c.input.clone());
            let (evaluation, diagnosis) = match self.analysis(&c.path, &c.set) {
                Ok(x) => x,
                Err(e) => {
                    failures.push(Failure {
                        place,
                        message: format!("{label}: input {}: {e}", c.path.display()),
                    });
                    continue;
                }
            };
            let fired: Vec<&super::diagnosis::Subject> = evaluation
                .subjects
                .iter()
                .filter(|s| s.hits.iter().any(|h| h.rule == index))
                .map(|s| &s.subject)
                .collect();
            let fired_text = || {
                if fired.is_empty() {
                    "nowhere".to_string()
                } else {
                    fired
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            };
            for p in &c.fires {
                if !fired.iter().any(|s| p.matches(s)) {
                    failures.push(Failure {
                        place: place.clone(),
                        message: format!(
                            "{label}: expected to fire on {}, fired on {}",
                            pattern_text(p),
                            fired_text()
                        ),
                    });
                }
            }
            for p in &c.not_fires {
                if let Some(s) = fired.iter().find(|s| p.matches(s)) {
                    failures.push(Failure {
                        place: place.clone(),
                        message: format!(
                            "{label}: must not fire on {}, but fired on {s}",
                            pattern_text(p)
                        ),
                    });
                }
            }
            for (p, class) in &c.verdicts {
                let got: Vec<String> = diagnosis
                    .verdicts
                    .iter()
                    .filter(|v| p.matches(&v.subject))
                    .map(|v| format!("{}={}", v.subject, v.class))
                    .collect();
                let ok = diagnosis
                    .verdicts
                    .iter()
                    .any(|v| p.matches(&v.subject) && v.class == *class);
                if !ok {
                    failures.push(Failure {
                        place: place.clone(),
                        message: format!(
                            "{label}: expected verdict {class} on {}, got {}",
                            pattern_text(p),
                            if got.is_empty() {
                                "no verdict".into()
                            } else {
                                got.join(", ")
                            }
                        ),
                    });
                }
            }
        }
        FileResult {
            file: t.file.clone(),
            rule: t.rule.clone(),
            cases: t.cases.len(),
            failures,
        }
    }
}

fn pattern_text(p: &SubjectPattern) -> String {
    match &p.name {
        Some(n) => format!("{}/{n}", p.kind),
        None => p.kind.to_string(),
    }
}
