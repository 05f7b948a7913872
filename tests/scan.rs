//! `scan`: collect + analyze in one command, on the embedded demo (the reference server running
//! fixtures/scenarios/demo.yaml) — verdicts, the gate's exit codes, waivers and `--save-bundle`.

use serde_json::Value;

use crate::util::extpath;

fn scan(args: &[&str]) -> (i32, String, String) {
    let out = extpath()
        .env_remove("KUBECONFIG")
        .args(["scan", "--demo", "--window", "0"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn verdict<'a>(d: &'a Value, kind: &str, name: &str) -> &'a Value {
    d["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["subject"]["kind"] == kind && v["subject"]["name"] == name)
        .unwrap_or_else(|| panic!("no verdict for {kind}/{name}"))
}

#[test]
fn the_demo_is_diagnosed_and_gates() {
    let (code, stdout, stderr) = scan(&["-o", "json"]);
    assert_eq!(code, 1, "critical verdicts exit 1: {stderr}");
    let d: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(d["kind"], "Diagnosis");
    let wardle = verdict(&d, "APIService", "v1alpha1.wardle.example.com");
    assert_eq!(wardle["class"], "Aggregation");
    assert_eq!(wardle["severity"], "critical");
    assert_eq!(
        wardle["rung"], "tls",
        "Available=True is not taken on trust"
    );
    let metrics = verdict(&d, "APIService", "v1beta1.metrics.example.com");
    assert_eq!(metrics["class"], "Aggregation");
    assert_eq!(metrics["rung"], "service");
    let webhook = verdict(&d, "ValidatingWebhook", "policy.webhook.example.com");
    assert_eq!(webhook["class"], "Healthy");
    // The slow webhook's timeouts so far are in one scrape's cumulative counters only: with no
    // window they cannot say whether it is still failing, so no verdict blames it yet.
    let defaults = verdict(&d, "MutatingWebhook", "defaults.webhook.example.com");
    assert_eq!(defaults["class"], "Inconclusive", "{defaults}");
    for v in d["verdicts"].as_array().unwrap() {
        let class = v["class"].as_str().unwrap();
        assert!(
            !matches!(class, "Storage" | "APF" | "Admission"),
            "misattribution: {v}"
        );
    }
    // Two problems, each an APIService with the request that failed through it folded under it.
    assert_eq!(d["apiVersion"], "extpath.dev/v1alpha2");
    let problems = d["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{problems:#?}");
    for p in problems {
        assert_eq!(p["class"], "Aggregation");
        assert_eq!(p["root"]["kind"], "APIService");
        let members = p["members"].as_array().unwrap();
        assert!(
            members.iter().any(|m| m["kind"] == "Request"),
            "the request echo is folded under its APIService: {p}"
        );
    }
    assert_eq!(d["summary"]["problems"], 2);
    assert!(
        d["summary"]["headline"]
            .as_str()
            .unwrap()
            .starts_with("2 problems: Aggregation ×2 ("),
        "{}",
        d["summary"]["headline"]
    );
}

#[test]
fn waivers_and_the_threshold_decide_the_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let waivers = dir.path().join("waivers.yaml");
    std::fs::write(
        &waivers,
        "apiVersion: extpath.dev/v1alpha1\nkind: Waivers\nwaivers:\n  - rule: '*'\n    subject: APIService/*\n    reason: known, tracked in INC-1\n    expires: 2999-01-01\n  - rule: '*'\n    subject: Request/*\n    reason: known, tracked in INC-1\n    expires: 2999-01-01\n",
    )
    .unwrap();
    let bundle = dir.path().join("bundle.json");
    let (code, stdout, stderr) = scan(&[
        "-o",
        "json",
        "--waivers",
        waivers.to_str().unwrap(),
        "--save-bundle",
        bundle.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "every critical verdict is waived: {stderr}");
    let d: Value = serde_json::from_str(&stdout).unwrap();
    let wardle = verdict(&d, "APIService", "v1alpha1.wardle.example.com");
    assert_eq!(wardle["waived"]["reason"], "known, tracked in INC-1");
    // The saved bundle is a valid bundle, and analysing it gives the same verdicts.
    let out = extpath()
        .args(["analyze", "-o", "json"])
        .arg(&bundle)
        .output()
        .unwrap();
    let again: Value = serde_json::from_slice(&out.stdout).unwrap();
    let classes = |d: &Value| -> Vec<(String, String, String)> {
        d["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["subject"]["kind"].as_str().unwrap().to_string(),
                    v["subject"]["name"].as_str().unwrap().to_string(),
                    v["class"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(classes(&again), classes(&d));
    // With --fail-on warning, the gate counts every verdict not waived at warning or above
    // (Inconclusive verdicts are warnings).
    let (code, stdout, _) = scan(&[
        "-o",
        "json",
        "--fail-on",
        "warning",
        "--waivers",
        waivers.to_str().unwrap(),
    ]);
    let d: Value = serde_json::from_str(&stdout).unwrap();
    let counted = d["verdicts"].as_array().unwrap().iter().any(|v| {
        v["waived"].is_null() && (v["severity"] != "info" || v["class"] == "Inconclusive")
    });
    assert_eq!(code, if counted { 1 } else { 0 }, "{stdout}");
}

#[test]
fn a_bad_rule_id_fails_before_collecting() {
    let (code, _, stderr) = scan(&["--rule", "no-such-rule"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no-such-rule"), "{stderr}");
}

#[test]
fn a_timeout_not_longer_than_the_window_is_refused_before_collecting() {
    let (code, stdout, stderr) = scan_with(&["--timeout", "5s", "--window", "10s"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stdout.is_empty());
    assert!(
        stderr.starts_with("error: --timeout 5s is not longer than --window 10s"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

fn scan_with(args: &[&str]) -> (i32, String, String) {
    let out = extpath()
        .env_remove("KUBECONFIG")
        .args(["scan", "--demo"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
