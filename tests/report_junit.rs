//! The CI gate tells the truth: `-o junit` fails exactly the test cases that make `--fail-on` exit
//! 1, skips the waived ones and passes the rest with their finding in `<system-out>`; a webhook's
//! test case names its configuration; and with waivers the headline, the JSON summary and the
//! table's totals agree. Checked through the real binary on a bundle, the XML parsed.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::util::{extpath, repo};

/// adm-webhooks.yaml plus a second `noep.webhook.example.com` in another configuration: two
/// webhooks of one name, which must be two test cases.
fn bundle(dir: &std::path::Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(repo().join("fixtures/bundles/adm-webhooks.yaml")).unwrap();
    let copy = "  - kind: Validating\n    configuration: vwh-noep-copy\n    name: noep.webhook.example.com\n    target: {service: {namespace: hooks, name: noep, port: 443, path: /validate}, ca_bundle_present: true}\n    effective_timeout_seconds: 10\n    failure_policy: Fail\n    match_policy: Equivalent\n    rules: [{operations: [CREATE], api_groups: [apps], api_versions: [v1], resources: [deployments]}]\n";
    let text = text.replacen("webhooks:\n", &format!("webhooks:\n{copy}"), 1);
    let path = dir.join("bundle.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn waivers(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("waivers.yaml");
    std::fs::write(
        &path,
        "apiVersion: extpath.dev/v1alpha1\nkind: Waivers\nwaivers:\n  - rule: '*'\n    subject: ValidatingWebhook/garbage.*\n    reason: vendor fix due, TICKET-1\n    expires: 2999-01-01\n  - rule: '*'\n    subject: MutatingWebhook/*\n    reason: mutating webhooks are migrated next sprint\n    expires: 2999-01-01\n",
    )
    .unwrap();
    path
}

struct Run {
    code: i32,
    stdout: String,
}

fn analyze(args: &[&std::ffi::OsStr]) -> Run {
    let out = extpath().arg("analyze").args(args).output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
    }
}

/// The verdicts of the JSON output: (kind, name, parent) → (gate severity, waived).
fn verdicts(json: &str) -> Vec<(String, Option<String>, bool)> {
    let d: Value = serde_json::from_str(json).unwrap();
    d["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let gate = match (
                v["class"].as_str().unwrap(),
                v["severity"].as_str().unwrap(),
            ) {
                ("Healthy", _) => None,
                ("Inconclusive", "info") => Some("warning".to_string()),
                (_, s) => Some(s.to_string()),
            };
            (
                format!("{}/{}", v["subject"]["kind"], v["subject"]["name"]),
                gate,
                !v["waived"].is_null(),
            )
        })
        .collect()
}

#[test]
fn junit_follows_fail_on_and_waivers() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle(dir.path());
    let waivers = waivers(dir.path());
    for fail_on in ["critical", "warning"] {
        for waived in [false, true] {
            let mut args: Vec<&std::ffi::OsStr> = vec![bundle.as_os_str(), "--fail-on".as_ref()];
            args.push(fail_on.as_ref());
            if waived {
                args.extend(["--waivers".as_ref(), waivers.as_os_str()]);
            }
            let json = analyze(&[args.as_slice(), &["-o".as_ref(), "json".as_ref()]].concat());
            let junit = analyze(&[args.as_slice(), &["-o".as_ref(), "junit".as_ref()]].concat());
            let what = format!("--fail-on {fail_on}, waivers {waived}");
            assert_eq!(json.code, junit.code, "{what}: one gate");

            let expected = verdicts(&json.stdout);
            let fails = |gate: &Option<String>| {
                matches!(
                    (gate.as_deref(), fail_on),
                    (Some("critical"), _) | (Some("warning"), "warning")
                )
            };
            let want_failures = expected.iter().filter(|(_, g, w)| !w && fails(g)).count();
            let want_skipped = expected.iter().filter(|(_, _, w)| *w).count();
            assert_eq!(want_skipped > 0, waived, "{what}");
            assert_eq!(junit.code, i32::from(want_failures > 0), "{what}");

            let doc = roxmltree::Document::parse(&junit.stdout)
                .unwrap_or_else(|e| panic!("{what}: {e}\n{}", junit.stdout));
            let root = doc.root_element();
            assert_eq!(root.tag_name().name(), "testsuites", "{what}");
            let suites: Vec<_> = root
                .children()
                .filter(|n| n.has_tag_name("testsuite"))
                .collect();
            assert_eq!(suites.len(), 1, "{what}");
            let suite = suites[0];
            for el in [root, suite] {
                assert_eq!(
                    el.attribute("tests"),
                    Some(expected.len().to_string().as_str())
                );
                assert_eq!(
                    el.attribute("failures"),
                    Some(want_failures.to_string().as_str()),
                    "{what}"
                );
                assert_eq!(
                    el.attribute("skipped"),
                    Some(want_skipped.to_string().as_str()),
                    "{what}"
                );
                assert_eq!(el.attribute("errors"), Some("0"));
                let time: f64 = el.attribute("time").unwrap().parse().unwrap();
                assert!(time > 0.0, "{what}: the run's time");
            }
            let property = |name: &str| {
                suite
                    .descendants()
                    .find(|n| n.has_tag_name("property") && n.attribute("name") == Some(name))
                    .and_then(|n| n.attribute("value"))
            };
            assert_eq!(property("fail-on"), Some(fail_on));

            let cases: Vec<_> = suite
                .children()
                .filter(|n| n.has_tag_name("testcase"))
                .collect();
            assert_eq!(cases.len(), expected.len(), "{what}");
            let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
            for c in &cases {
                assert_eq!(c.attribute("time"), Some("0"), "{what}");
                let child = |tag: &str| c.children().find(|n| n.has_tag_name(tag));
                let outcome = match (child("failure"), child("skipped")) {
                    (Some(_), None) => "failure",
                    (None, Some(_)) => "skipped",
                    (None, None) => "pass",
                    _ => panic!("{what}: a case is one thing"),
                };
                *outcomes.entry(outcome).or_default() += 1;
                // A waived finding says what it would have been; a pass is either a bare
                // (healthy) case or carries its finding.
                let out = child("system-out").and_then(|n| n.text()).unwrap_or("");
                match outcome {
                    "skipped" => assert!(out.starts_with("waived until"), "{what}: {out}"),
                    "pass" if c.has_children() => assert!(
                        out.starts_with(&format!("below --fail-on {fail_on}: ")),
                        "{what}: {out}"
                    ),
                    _ => {}
                }
            }
            assert_eq!(outcomes.get("failure").copied().unwrap_or(0), want_failures);
            assert_eq!(outcomes.get("skipped").copied().unwrap_or(0), want_skipped);

            // Two webhooks of one name in two configurations are two test cases, named apart.
            let noep: Vec<&str> = cases
                .iter()
                .filter_map(|c| c.attribute("name"))
                .filter(|n| n.starts_with("noep.webhook.example.com"))
                .collect();
            assert_eq!(
                noep,
                [
                    "noep.webhook.example.com (in vwh-noep)",
                    "noep.webhook.example.com (in vwh-noep-copy)"
                ],
                "{what}"
            );
        }
    }
}

#[test]
fn a_warning_below_the_threshold_passes_with_its_finding() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle(dir.path());
    let run = analyze(&[bundle.as_os_str(), "-o".as_ref(), "junit".as_ref()]);
    let doc = roxmltree::Document::parse(&run.stdout).unwrap();
    let hot = doc
        .descendants()
        .find(|n| n.attribute("name") == Some("hot.webhook.example.com (in vwh-hot)"))
        .expect("the warning's test case");
    assert!(hot.children().all(|n| !n.has_tag_name("failure")));
    let out = hot
        .children()
        .find(|n| n.has_tag_name("system-out"))
        .and_then(|n| n.text())
        .unwrap();
    assert!(
        out.starts_with("below --fail-on critical: warning Admission"),
        "{out}"
    );
}

#[test]
fn with_waivers_the_headline_json_summary_and_table_agree() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle(dir.path());
    let waivers = waivers(dir.path());
    let args = [
        bundle.as_os_str(),
        "--waivers".as_ref(),
        waivers.as_os_str(),
    ];
    let json = analyze(&[&args[..], &["-o".as_ref(), "json".as_ref()]].concat());
    let d: Value = serde_json::from_str(&json.stdout).unwrap();
    let summary = &d["summary"];
    let all = d["verdicts"].as_array().unwrap();
    let waived: Vec<&Value> = all.iter().filter(|v| !v["waived"].is_null()).collect();
    assert_eq!(summary["waived"], waived.len(), "{summary}");
    let by_severity: u64 = summary["by_severity"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    let by_class: u64 = summary["by_class"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(by_severity + waived.len() as u64, all.len() as u64);
    assert_eq!(by_class, by_severity);

    // The headline names the worst verdict that is not waived: garbage.* (critical, first) is.
    let headline = summary["headline"].as_str().unwrap();
    assert!(!headline.contains("garbage.webhook"), "{headline}");
    let worst = all
        .iter()
        .find(|v| v["waived"].is_null() && v["severity"] == "critical")
        .unwrap();
    assert!(
        headline.contains(worst["subject"]["name"].as_str().unwrap()),
        "{headline} names {}",
        worst["subject"]["name"]
    );

    // The table's totals line says the same numbers.
    let table = analyze(&args);
    let totals = table
        .stdout
        .lines()
        .find(|l| l.starts_with("Totals:"))
        .expect("a totals line");
    let problems = summary["problems"].as_u64().unwrap();
    assert!(
        totals.contains(&format!("{problems} problem")),
        "{totals} counts {problems} problems"
    );
    assert!(
        totals.contains(&format!("{} waived", waived.len())),
        "{totals}"
    );
    let head_line = table
        .stdout
        .lines()
        .find(|l| l.starts_with("Headline:"))
        .unwrap();
    assert!(head_line.contains(headline), "{head_line}");
}
