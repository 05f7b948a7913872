//! The real captures (`fixtures/raw/`, copies of ../shared/captures) and the incident folders
//! (`fixtures/incidents/`): every case imported from its raw files and analysed with the bundled
//! rules must be classified right, scored by
//! [`crate::util::captures::score`] exactly as `../shared/tools/check-captures` scores the CLI's
//! `-o json`.

use extpath::engine::RuleSet;
use serde_json::Value;

use super::util::repo;
use crate::util::captures::{analyse, cases_in, incidents_dir, raw_dir, score};

/// Cases not yet classified right. The list only ever shrinks; it is empty.
const KNOWN_MISSES: &[&str] = &[];

#[test]
fn every_real_capture_is_classified_right() {
    every_case_is_classified_right(&raw_dir(), KNOWN_MISSES);
}

/// The incident folders written in real formats for classes the captures do not cover
/// (`fixtures/incidents/README.md`), scored the same way.
#[test]
fn every_incident_folder_is_classified_right() {
    every_case_is_classified_right(&incidents_dir(), &[]);
}

fn every_case_is_classified_right(root: &std::path::Path, known_misses: &[&str]) {
    let cases = cases_in(root);
    let rules = RuleSet::bundled();
    let mut misses = Vec::new();
    for case in &cases {
        let dir = case["dir"].as_str().unwrap();
        let doc = analyse(&root.join(dir), &rules);
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
        "{}: {}/{} cases right; misses:\n{}",
        root.display(),
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
        "now classified right, remove from the known misses: {fixed:?}"
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
