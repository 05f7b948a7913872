//! The real captures of `fixtures/raw/` as test cases: the list of cases with their expectation
//! (`expect.json`), how a case folder is imported and analysed in-process (the `analyze --raw`
//! path), and how a diagnosis is scored against a case, exactly as `../shared/tools/check-captures`
//! scores the CLI's `-o json`. Shared by `engine_captures` (are the captures classified right?) and
//! `generalise` (are they still, once every user-chosen name is changed?).

use std::path::{Path, PathBuf};

use extpath::engine::{Filter, RuleSet, Settings, analyze};
use serde_json::Value;

use super::repo;

/// The folder of the real captures.
pub fn raw_dir() -> PathBuf {
    repo().join("fixtures/raw")
}

/// The incident folders written in real formats (`fixtures/incidents/README.md`).
pub fn incidents_dir() -> PathBuf {
    repo().join("fixtures/incidents")
}

/// The cases of `fixtures/raw/expect.json`: `dir`, `subjects` (`kind`, optional `name`),
/// `classes`, `forbid`.
pub fn cases() -> Vec<Value> {
    cases_in(&raw_dir())
}

/// The cases of `<root>/expect.json`, in the same shape.
pub fn cases_in(root: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(root.join("expect.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Import a case folder from its raw files and analyse it with the bundled rules; the diagnosis as
/// the JSON `analyze -o json` prints.
pub fn analyse(dir: &Path, rules: &RuleSet) -> Value {
    let bundle = extpath::bundle::raw::import_paths(&[dir.to_path_buf()])
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let d = analyze(&bundle, rules, &Settings::default(), &Filter::default());
    serde_json::to_value(&d).unwrap()
}

fn severity(v: &Value) -> String {
    v["severity"].as_str().unwrap_or("").to_lowercase()
}

/// Score a diagnosis against a case: some verdict names one of the case's subjects with one of its
/// classes (at warning or above and decided by rules, unless Healthy), and no verdict at warning or
/// above blames a forbidden class on those subjects or cluster-wide (APIServer, Etcd); a healthy
/// case carries no critical verdict. `Err` says what was wrong and what was seen.
pub fn score(case: &Value, doc: &Value) -> Result<(), String> {
    let verdicts = doc["verdicts"].as_array().cloned().unwrap_or_default();
    let subjects = case["subjects"].as_array().unwrap();
    let classes: Vec<&str> = case["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let forbid: Vec<&str> = case["forbid"]
        .as_array()
        .map(|a| a.iter().map(|c| c.as_str().unwrap()).collect())
        .unwrap_or_default();
    let kind = |v: &Value| v["subject"]["kind"].as_str().unwrap_or("").to_lowercase();
    let on_subject = |v: &Value| {
        subjects.iter().any(|w| {
            kind(v) == w["kind"].as_str().unwrap().to_lowercase()
                && w["name"]
                    .as_str()
                    .is_none_or(|n| v["subject"]["name"].as_str() == Some(n))
        })
    };
    let class = |v: &Value| v["class"].as_str().unwrap_or("").to_string();
    // Healthy is info; Inconclusive (an expectation only the incident folders have) is decided by
    // the absence of a deciding rule, so neither needs rules of its own.
    let counts = |v: &Value| {
        class(v) == "Healthy"
            || (class(v) == "Inconclusive" && severity(v) == "warning")
            || (["warning", "critical"].contains(&severity(v).as_str())
                && v["rules"].as_array().is_some_and(|r| !r.is_empty()))
    };
    let hits = verdicts
        .iter()
        .filter(|v| on_subject(v) && classes.contains(&class(v).as_str()) && counts(v))
        .count();
    // A healthy case fails only on a critical verdict: a real healthy cluster may carry warnings
    // (a certificate near expiry) without contradicting its expectation. For a broken case, the
    // forbidden classes are checked on the subjects and cluster-wide too, because blaming the
    // API server or etcd for an extension's failure is the classic misattribution (DESIGN §1
    // rules 1 and 3: a 503 is not "etcd is down").
    let bad: Vec<String> = if classes == ["Healthy"] {
        verdicts
            .iter()
            .filter(|v| severity(v) == "critical")
            .map(|v| format!("{} {}", v["subject"], class(v)))
            .collect()
    } else {
        verdicts
            .iter()
            .filter(|v| {
                forbid.contains(&class(v).as_str())
                    && ["warning", "critical"].contains(&severity(v).as_str())
                    && (on_subject(v) || ["apiserver", "etcd"].contains(&kind(v).as_str()))
            })
            .map(|v| format!("{}/{} {}", kind(v), v["subject"]["name"], class(v)))
            .collect()
    };
    if hits > 0 && bad.is_empty() {
        return Ok(());
    }
    let seen: Vec<String> = verdicts
        .iter()
        .take(8)
        .map(|v| {
            format!(
                "{}/{}={}:{}",
                kind(v),
                v["subject"]["name"],
                class(v),
                severity(v)
            )
        })
        .collect();
    Err(if bad.is_empty() {
        format!("wanted {}; got {seen:?}", classes.join("|"))
    } else {
        format!("forbidden {bad:?}; got {seen:?}")
    })
}
