//! `replay`: every scenario end to end — the reference server started, scanned through its TLS
//! listener, classified with the bundled rules, and compared with the scenario's `expect:` block —
//! plus the shape of a failure (the table, the JSON, exit 1) and of bad input (exit 2).

use serde_json::Value;

use crate::util::{extpath, repo};

/// Scenarios at once: each has its own server and ports; a few at a time keep the whole run short
/// on two cores without starving the timing-sensitive ones (slow webhooks, watch terminations).
const JOBS: &str = "4";

fn replay(args: &[&str]) -> (i32, String, String) {
    let out = extpath()
        .current_dir(repo())
        .env_remove("KUBECONFIG")
        .arg("replay")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The failed checks of a ReplayReport, one line each.
fn mismatches(report: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for s in report["scenarios"].as_array().unwrap() {
        if let Some(e) = s.get("error") {
            out.push(format!("{}: could not run: {e}", s["scenario"]));
        }
        for c in s["checks"].as_array().unwrap() {
            if c["ok"] != true {
                out.push(format!(
                    "{}: {} expected {}, got {} — {}",
                    s["scenario"].as_str().unwrap(),
                    c["subject"].as_str().unwrap(),
                    c["expected"].as_str().unwrap(),
                    c["got"].as_str().unwrap(),
                    c["summary"].as_str().unwrap()
                ));
            }
        }
    }
    out
}

#[test]
fn every_scenario_gets_the_verdicts_it_expects() {
    let (code, stdout, stderr) = replay(&["--all", "-o", "json", "-j", JOBS]);
    let report: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("no ReplayReport ({e}), exit {code}: {stderr}"));
    let scenarios = report["scenarios"].as_array().unwrap();
    let on_disk = std::fs::read_dir(repo().join("fixtures/scenarios"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "yaml")
        })
        .count();
    assert_eq!(scenarios.len(), on_disk, "--all runs every scenario file");
    assert!(scenarios.len() >= 20, "only {} scenarios", scenarios.len());
    let failed = mismatches(&report);
    assert!(
        failed.is_empty(),
        "{} scenario(s) failed:\n{}",
        report["failed"],
        failed.join("\n")
    );
    assert_eq!(code, 0, "{stderr}");
    // Every scenario checks at least one subject, and forbids the misattributions of its fault.
    for s in scenarios {
        assert!(
            !s["checks"].as_array().unwrap().is_empty(),
            "{} checks nothing",
            s["scenario"]
        );
    }
}

/// Durations vary from run to run; everything else in the table is fixed.
fn without_times(text: &str) -> String {
    let re = regex::Regex::new(r"\d+\.\ds").unwrap();
    re.replace_all(text, "N.Ns").into_owned()
}

#[test]
fn a_mismatch_is_a_failed_row_naming_subject_expectation_and_verdict_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        std::fs::read_to_string(repo().join("fixtures/scenarios/aggregation-service-missing.yaml"))
            .unwrap()
            .replace(
                "    APIService/v1alpha1.wardle.example.com: Aggregation\n",
                "    APIService/v1alpha1.wardle.example.com: Storage\n    APIServer/kube-apiserver: Storage\n",
            )
            .replace("    Request/GET /apis/wardle.example.com/*: Aggregation\n", "")
            .replace("forbid: [Admission,", "forbid: [Aggregation, Admission,");
    let file = dir.path().join("wrong.yaml");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();

    let (code, stdout, stderr) = replay(&[file, "--color", "never"]);
    assert_eq!(code, 1, "{stderr}");
    insta::assert_snapshot!("replay_failed_table", without_times(&stdout));
    assert!(
        stdout.lines().any(|l| l.contains(
            "expected Storage, got Aggregation (critical) — APIService v1alpha1.wardle.example.com points at Service wardle-system/api, which does not exist"
        )),
        "piped output is not wrapped, so grep finds a whole mismatch: {stdout}"
    );

    let (code, stdout, _) = replay(&[file, "-o", "json"]);
    assert_eq!(code, 1);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (report["passed"].as_u64(), report["failed"].as_u64()),
        (Some(0), Some(1))
    );
    let failed = mismatches(&report);
    assert!(
        failed.iter().any(|m| m.contains(
            "APIService/v1alpha1.wardle.example.com expected Storage, got Aggregation (critical)"
        )),
        "{failed:?}"
    );
    assert!(
        failed.iter().any(|m| m
            .contains("Request/GET /apis/wardle.example.com/v1alpha1 expected not Aggregation")),
        "a forbidden class on a subject not listed: {failed:?}"
    );
}

#[test]
fn bad_input_is_exit_2_naming_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: extpath.dev/v1alpha1\nkind: Scenario\nname: bad\nexpect:\n  subjects:\n    ValidatingWebhookConfiguration/x: Admission\n",
    )
    .unwrap();
    let (code, stdout, stderr) = replay(&[bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{stdout}");
    assert!(
        stderr.contains("bad.yaml:6: expect: subject \"ValidatingWebhookConfiguration/x\" is not Kind/name with Kind one of APIService, ValidatingWebhook"),
        "{stderr}"
    );
    let (code, _, stderr) = replay(&[]);
    assert_eq!(code, 2, "a scenario or --all is required: {stderr}");
    let (code, _, stderr) = replay(&["--all", "--dir", dir.path().join("none").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot read"), "{stderr}");
}
