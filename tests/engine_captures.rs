//! The real captures (`fixtures/raw/`, copies of ../shared/captures): every case imported from its
//! raw files and analysed with the bundled rules must be classified right, scored exactly as
//! `../shared/tools/check-captures` scores the CLI's `-o json`: some verdict names one of the case's
//! subjects with one of its classes (at warning or above and decided by rules, unless Healthy), and no
//! verdict at warning or above blames a forbidden class on those subjects or cluster-wide (APIServer,
//! Etcd); a healthy case carries no critical verdict.

use extpath::engine::{Filter, RuleSet, Settings, analyze};
use serde_json::Value;

use super::util::repo;

/// Cases not yet classified right. The list only ever shrinks; it is empty.
const KNOWN_MISSES: &[&str] = &[];

fn severity(v: &Value) -> String {
    v["severity"].as_str().unwrap_or("").to_lowercase()
}

fn score(case: &Value, doc: &Value) -> Result<(), String> {
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
    let counts = |v: &Value| {
        class(v) == "Healthy"
            || (["warning", "critical"].contains(&severity(v).as_str())
                && v["rules"].as_array().is_some_and(|r| !r.is_empty()))
    };
    let hits = verdicts
        .iter()
        .filter(|v| on_subject(v) && classes.contains(&class(v).as_str()) && counts(v))
        .count();
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

#[test]
fn every_real_capture_is_classified_right() {
    every_case_is_classified_right("fixtures/raw", KNOWN_MISSES);
}

/// The incident folders written in real formats for classes the captures do not cover
/// (`fixtures/incidents/README.md`), scored the same way.
#[test]
fn every_incident_folder_is_classified_right() {
    every_case_is_classified_right("fixtures/incidents", &[]);
}

fn every_case_is_classified_right(root: &str, known_misses: &[&str]) {
    let raw = repo().join(root);
    let cases: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(raw.join("expect.json")).unwrap()).unwrap();
    let rules = RuleSet::bundled();
    let mut misses = Vec::new();
    for case in &cases {
        let dir = case["dir"].as_str().unwrap();
        let bundle = extpath::bundle::raw::import_paths(&[raw.join(dir)])
            .unwrap_or_else(|e| panic!("{dir}: {e}"));
        let d = analyze(&bundle, &rules, &Settings::default(), &Filter::default());
        let doc = serde_json::to_value(&d).unwrap();
        if let Err(why) = score(case, &doc) {
            misses.push((dir.to_string(), why));
        }
    }
    let unexpected: Vec<&(String, String)> = misses
        .iter()
        .filter(|(d, _)| !known_misses.contains(&d.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "{root}: {}/{} cases right; misses:\n{}",
        cases.len() - misses.len(),
        cases.len(),
        unexpected
            .iter()
            .map(|(d, w)| format!("{d}: {w}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let fixed: Vec<&&str> = known_misses
        .iter()
        .filter(|k| !misses.iter().any(|(d, _)| d == *k))
        .collect();
    assert!(
        fixed.is_empty(),
        "now classified right, remove from KNOWN_MISSES: {fixed:?}"
    );
}

#[test]
fn analyze_raw_prints_the_json_the_capture_checker_reads() {
    let out = super::util::extpath()
        .current_dir(repo())
        .args([
            "analyze",
            "--raw",
            "fixtures/raw/02-service-missing-settled",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "critical verdicts exit 1");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let v = doc["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["subject"]["kind"] == "APIService")
        .unwrap();
    assert_eq!(v["class"], "Aggregation");
    assert_eq!(v["rules"][0]["id"], "aggregation-service-missing");
    assert!(
        v["ruled_out"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["class"] == "Storage"),
        "{v}"
    );
    let bad = super::util::extpath()
        .current_dir(repo())
        .args(["analyze", "--raw", "fixtures/raw/no-such-case"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
