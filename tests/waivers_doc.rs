//! docs/waivers.md works as written: its example loads, names rules that exist, and waives what it
//! says it waives on a real bundle; a waiver naming a rule that does not exist is exit 2 with
//! file:line, like `--rule nosuch`; `--help` names the file's real fields.

use extpath::engine::waivers::{apply_waivers, check_rule_ids, parse_waivers};
use extpath::engine::{Filter, RuleSet, Settings};

use crate::util::{extpath, repo};

/// The first ```yaml block of docs/waivers.md.
fn example() -> String {
    let doc = std::fs::read_to_string(repo().join("docs/waivers.md")).unwrap();
    let start = doc.find("```yaml\n").expect("a YAML example") + "```yaml\n".len();
    let len = doc[start..].find("```").unwrap();
    doc[start..start + len].to_string()
}

#[test]
fn the_documented_example_loads_and_waives_what_it_says() {
    let text = example();
    let w = parse_waivers(&text, "docs/waivers.md").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(w.waivers.len(), 2);
    let rules = RuleSet::bundled_checked().unwrap();
    check_rule_ids(&w, "docs/waivers.md", |id| rules.get(id).is_some())
        .unwrap_or_else(|e| panic!("{e}"));

    let bundle =
        extpath::bundle::load_bundle(&repo().join("fixtures/bundles/adm-webhooks.yaml")).unwrap();
    let mut d = extpath::engine::analyze(&bundle, &rules, &Settings::default(), &Filter::default());
    apply_waivers(&mut d, &w, jiff::civil::date(2026, 12, 1));
    let waived: Vec<String> = d
        .verdicts
        .iter()
        .filter(|v| v.waived.is_some())
        .map(|v| v.subject.to_string())
        .collect();
    assert_eq!(
        waived,
        [
            "MutatingWebhook/missing-svc.webhook.example.com",
            "ValidatingWebhook/hot.webhook.example.com",
            "MutatingWebhook/leases.webhook.example.com",
            "MutatingWebhook/lenient.webhook.example.com",
        ],
        "{waived:?}"
    );
    assert!(d.waiver_notices.is_empty(), "{:?}", d.waiver_notices);
    assert_eq!(d.summary.waived, 4);
}

#[test]
fn a_waiver_naming_an_unknown_rule_is_an_input_error_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("waivers.yaml");
    let text = example().replace(
        "rule: admission-webhook-long-timeout-hot-path",
        "rule: admision-webhook-long-timeout-hot-path",
    );
    std::fs::write(&path, text).unwrap();
    let out = extpath()
        .arg("analyze")
        .arg(repo().join("fixtures/bundles/adm-webhooks.yaml"))
        .arg("--waivers")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: {}:5: waivers[0]: rule \"admision-webhook-long-timeout-hot-path\": no such rule",
            path.display()
        )),
        "{stderr}"
    );
    // A waivers file that cannot be read is the same kind of error.
    let out = extpath()
        .arg("analyze")
        .arg(repo().join("fixtures/bundles/adm-webhooks.yaml"))
        .args(["--waivers", "/nonexistent/waivers.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_names_the_real_fields() {
    let out = extpath().args(["analyze", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let at = help.find("--waivers <FILE>").expect("--waivers in help");
    let text = &help[at..at + 600];
    for field in ["rule", "subject", "reason", "expires", "docs/waivers.md"] {
        assert!(text.contains(field), "{field} in: {text}");
    }
}
