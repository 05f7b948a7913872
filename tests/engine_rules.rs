//! Rules as a product: the bundled rules pass their own tests and lint clean, a broken rule is one
//! line naming file and line (exit 2), user rules load beside the bundled ones, and `analyze`'s
//! filters, settings and exit codes behave as DESIGN §4 says.

use std::path::Path;

use extpath::engine::RuleSet;
use extpath::engine::ruletest::{Runner, parse_test_file, test_files};

use super::util::{extpath, repo};

fn run(args: &[&str]) -> (i32, String, String) {
    let out = extpath().current_dir(repo()).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn load_input(path: &Path) -> anyhow::Result<extpath::bundle::EvidenceBundle> {
    if path.is_dir() {
        Ok(extpath::bundle::raw::import_paths(&[path.to_path_buf()])?)
    } else {
        Ok(extpath::bundle::load_bundle(path)?)
    }
}

// Each rule ships with a test beside it, one case that fires and one that does not (STYLE.md,
// after semgrep-rules): a rule edited so that it never fires, or fires on everything, fails here
// rather than in someone's incident.
#[test]
fn every_bundled_rule_passes_its_test_cases() {
    let rules = RuleSet::bundled();
    let loader = load_input;
    let mut runner = Runner::new(&rules, &loader);
    let files = test_files(&repo().join("rules"));
    assert!(files.len() >= rules.len(), "one test file per rule");
    let mut failures = Vec::new();
    for f in files {
        let t = parse_test_file(&f).unwrap_or_else(|e| panic!("{e}"));
        // Inputs are written relative to the repository root.
        let t = extpath::engine::ruletest::TestFile {
            cases: t
                .cases
                .into_iter()
                .map(|mut c| {
                    if c.path.is_relative() {
                        c.path = repo().join(&c.path);
                    }
                    c
                })
                .collect(),
            ..t
        };
        let r = runner.run(&t);
        failures.extend(
            r.failures
                .iter()
                .map(|x| format!("{}: {}", x.place, x.message)),
        );
    }
    assert!(
        failures.is_empty(),
        "rule tests failed:\n{}",
        failures.join("\n")
    );
}

#[test]
fn rules_lint_and_rules_test_are_clean() {
    let (code, out, err) = run(&["rules", "lint"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(", 0 problem(s)"), "{out}");
    let (code, out, err) = run(&["rules", "test"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(" 0 failed"), "{out}");
}

const GOOD_RULE: &str = "schema: extpath.dev/rules/v1
id: team-apiservice-insecure
class: Aggregation
severity: warning
subject: APIService
rung: tls
when: apiservice.insecure_skip_tls_verify
summary: \"team policy: {{subject.name}} skips TLS verification\"
explain: Our clusters require a caBundle on every APIService.
";

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn a_broken_rule_is_one_line_naming_file_and_line() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "team-typo.yaml",
            "schema: extpath.dev/rules/v1\nid: team-typo\nclass: Aggregation\nseverity: warning\nsubject: APIService\nrung: tls\nwhen: |\n  apiservice.present &&\n    apiservice.avialable.status == 'True'\nsummary: x\nexplain: x\n",
            ":9: when: `apiservice` has no field `avialable`",
        ),
        (
            "team-fn.yaml",
            "schema: extpath.dev/rules/v1\nid: team-fn\nclass: Aggregation\nseverity: warning\nsubject: APIService\nrung: tls\nwhen: \"counterz('apiserver', 'x', {}).present\"\nsummary: x\nexplain: x\n",
            ":7: when: unknown function `counterz`",
        ),
        (
            "team-field.yaml",
            "schema: extpath.dev/rules/v1\nid: team-field\nclass: Aggregation\nseverity: warning\nsubject: APIService\nrung: tls\nwhen: 'true'\nsummary: x\nexplain: x\nwhenever: 1\n",
            ":10:",
        ),
        (
            "team-syntax.yaml",
            "schema: extpath.dev/rules/v1\nid: team-syntax\nclass: Aggregation\nseverity: warning\nsubject: APIService\nrung: tls\nwhen: \"apiservice.present && (\"\nsummary: x\nexplain: x\n",
            ":7: when: CEL syntax error",
        ),
        (
            "team-class.yaml",
            "schema: extpath.dev/rules/v1\nid: team-class\nclass: Network\nseverity: warning\nsubject: APIService\nrung: tls\nwhen: 'true'\nsummary: x\nexplain: x\n",
            ":3: unknown class \"Network\"",
        ),
        (
            "team-var.yaml",
            "schema: extpath.dev/rules/v1\nid: team-var\nclass: Aggregation\nseverity: warning\nsubject: Etcd\nrung: storage\nwhen: apiservice.present\nsummary: x\nexplain: x\n",
            ":7: when: unknown variable `apiservice` for subject Etcd",
        ),
        (
            "team-template.yaml",
            "schema: extpath.dev/rules/v1\nid: team-template\nclass: Aggregation\nseverity: warning\nsubject: APIService\nrung: tls\nwhen: 'true'\nsummary: \"{{ service.nmae }}\"\nexplain: x\n",
            ":8: summary: `service` has no field `nmae`",
        ),
        (
            "team-component.yaml",
            "schema: extpath.dev/rules/v1\nid: team-component\nclass: Auth\nseverity: warning\nsubject: APIService\nrung: authn\nwhen: 'true'\nsummary: x\nexplain: x\n",
            ":6: an APIService's authn is the extension API server's",
        ),
        (
            "team-component-kind.yaml",
            "schema: extpath.dev/rules/v1\nid: team-component-kind\nclass: Admission\nseverity: warning\nsubject: ValidatingWebhook\nrung: admission\ncomponent: extension_apiserver\nwhen: 'true'\nsummary: x\nexplain: x\n",
            ":7: component: extension_apiserver is for APIService and Request rules",
        ),
        (
            "team-component-name.yaml",
            "schema: extpath.dev/rules/v1\nid: team-component-name\nclass: Auth\nseverity: warning\nsubject: Request\nrung: authn\ncomponent: extension\nwhen: 'true'\nsummary: x\nexplain: x\n",
            ":7: unknown component \"extension\"",
        ),
    ];
    for (name, text, needle) in cases {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("team"), name, text);
        let d = dir.path().to_str().unwrap();
        for args in [
            vec!["analyze", "fixtures/bundles/agg-healthy.yaml", "--rules", d],
            vec!["rules", "list", "--rules", d],
        ] {
            let (code, _, err) = run(&args);
            assert_eq!(code, 2, "{name} {args:?}: {err}");
            assert_eq!(err.trim_end().lines().count(), 1, "{name}: one line: {err}");
            assert!(!err.contains("panicked"), "{err}");
            assert!(
                err.contains(&format!("{name}{needle}")),
                "{name}: expected {needle:?} in {err}"
            );
        }
        let (code, _, err) = run(&["rules", "lint", d]);
        assert_eq!(code, 2, "{name}: lint exit code: {err}");
        assert!(err.contains(&format!("{name}{needle}")), "{err}");
    }
}

// Rule ids are stable and never reused (STYLE.md, after cargo-deny): waivers and alerts name them.
// A user rule that silently replaced a bundled one of the same id would change verdicts, and
// what a waiver covers, behind the user's back.
#[test]
fn user_rules_add_to_the_bundled_ones_and_an_id_clash_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir.path().join("team"),
        "team-apiservice-insecure.yaml",
        GOOD_RULE,
    );
    let d = dir.path().to_str().unwrap();
    let (code, out, err) = run(&[
        "analyze",
        "fixtures/bundles/agg-wiring.yaml",
        "--rules",
        d,
        "-o",
        "json",
        "--subject",
        "APIService/v1.insecure.example.com",
    ]);
    assert_eq!(code, 0, "a warning is below the default --fail-on: {err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = doc["verdicts"][0]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"team-apiservice-insecure"), "{ids:?}");
    assert!(
        ids.contains(&"aggregation-insecure-skip-tls-verify"),
        "{ids:?}"
    );
    // Its test runs with `rules test --rules DIR`; a case that expects the wrong thing fails (exit 1).
    write(
        &dir.path().join("team"),
        "team-apiservice-insecure.test.yaml",
        &format!(
            "cases:\n  - input: {}\n    fires: [APIService/v1.insecure.example.com]\n    not_fires: [APIService/v1.missing.example.com]\n",
            repo().join("fixtures/bundles/agg-wiring.yaml").display()
        ),
    );
    let (code, out, _) = run(&["rules", "test", "--rules", d, d]);
    assert_eq!(code, 0, "{out}");
    write(
        &dir.path().join("team"),
        "team-apiservice-insecure.test.yaml",
        &format!(
            "cases:\n  - input: {}\n    fires: [APIService/v1.missing.example.com]\n",
            repo().join("fixtures/bundles/agg-wiring.yaml").display()
        ),
    );
    let (code, out, _) = run(&["rules", "test", "--rules", d, d]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("expected to fire on APIService/v1.missing.example.com"),
        "{out}"
    );
    // A user rule with a bundled rule's id.
    let clash = GOOD_RULE.replace("team-apiservice-insecure", "aggregation-service-missing");
    let dir2 = tempfile::tempdir().unwrap();
    write(dir2.path(), "aggregation-service-missing.yaml", &clash);
    let (code, _, err) = run(&["rules", "list", "--rules", dir2.path().to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("is already used by rules/aggregation/aggregation-service-missing.yaml"),
        "{err}"
    );
}

// The exit code is the CI gate's whole interface (DESIGN §4, like `kubectl diff`): 0 below the
// threshold, 1 at or above it, and Inconclusive counted as a warning so that a gate cannot pass
// because the evidence it needed was missing.
#[test]
fn analyze_exit_codes_follow_fail_on() {
    let (code, _, _) = run(&["analyze", "fixtures/bundles/agg-healthy.yaml"]);
    assert_eq!(code, 0);
    let (code, _, _) = run(&["analyze", "fixtures/bundles/agg-wiring.yaml"]);
    assert_eq!(code, 1, "critical verdicts");
    // Only warnings: exit 0 unless --fail-on warning.
    let (code, _, _) = run(&["analyze", "fixtures/bundles/storage-moderate.yaml"]);
    assert_eq!(code, 0);
    let (code, _, _) = run(&[
        "analyze",
        "fixtures/bundles/storage-moderate.yaml",
        "--fail-on",
        "warning",
    ]);
    assert_eq!(code, 1);
    // Inconclusive counts as a warning.
    let (code, out, _) = run(&[
        "analyze",
        "fixtures/bundles/adm-history.yaml",
        "--fail-on",
        "warning",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Inconclusive"), "{out}");
    for (args, needle) in [
        (vec!["--set", "cert_warn_dayz=3"], "unknown setting"),
        (vec!["--set", "cert_warn_days=soon"], "not a number"),
        (vec!["--rule", "no-such-rule"], "no such rule"),
        (vec!["--subject", "Pod/x"], "expected KIND"),
        (vec!["--class", "Network"], "[possible values: Aggregation"),
    ] {
        let mut a = vec!["analyze", "fixtures/bundles/agg-healthy.yaml"];
        a.extend(args.iter().copied());
        let (code, _, err) = run(&a);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let (code, _, err) = run(&["analyze", "fixtures/bundles/no-such.yaml"]);
    assert_eq!(code, 2);
    assert!(err.contains("no-such.yaml"), "{err}");
}

#[test]
fn filters_choose_rules_and_verdicts() {
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a = vec!["analyze", "fixtures/bundles/agg-wiring.yaml", "-o", "json"];
        a.extend(args);
        let (_, out, err) = run(&a);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {err}"))
    };
    let all = json(&[]);
    assert!(all["verdicts"].as_array().unwrap().len() > 3);
    let only = json(&["--subject", "APIService/v1.missing.example.com"]);
    assert_eq!(only["verdicts"].as_array().unwrap().len(), 1);
    let warnings = json(&["--class", "Aggregation", "--subject", "APIService/v1.i*"]);
    assert_eq!(
        warnings["verdicts"][0]["subject"]["name"],
        "v1.insecure.example.com"
    );
    // Skipping the deciding rule changes the verdict; nothing else decides it.
    let skipped = json(&[
        "--skip-rule",
        "aggregation-insecure-skip-tls-verify",
        "--subject",
        "APIService/v1.insecure.example.com",
    ]);
    assert_eq!(skipped["verdicts"][0]["class"], "Healthy");
    let one_rule = json(&["--rule", "aggregation-service-missing"]);
    for v in one_rule["verdicts"].as_array().unwrap() {
        assert_eq!(v["subject"]["kind"], "APIService", "{v}");
    }
}

// `-o json` is a contract (docs/diagnosis.schema.json): scripts index `subject.namespace` or
// `parent` directly, so those keys are present as null rather than left out when empty.
#[test]
fn the_json_contract_keeps_null_fields_and_names() {
    let (_, out, _) = run(&["analyze", "fixtures/bundles/agg-wiring.yaml", "-o", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["apiVersion"], "extpath.dev/v1alpha2");
    assert_eq!(doc["kind"], "Diagnosis");
    let v = &doc["verdicts"][0];
    for key in ["namespace", "parent"] {
        assert!(v["subject"].as_object().unwrap().contains_key(key), "{v}");
    }
    for key in [
        "related",
        "class",
        "severity",
        "confidence",
        "rules",
        "ruled_out",
        "consequences",
        "next",
        "summary",
    ] {
        assert!(v.get(key).is_some(), "verdict has {key}: {v}");
    }
    assert!(v["rules"][0]["evidence"].is_object());
    assert!(
        doc["summary"]["headline"]
            .as_str()
            .unwrap()
            .contains("Aggregation")
    );
    let (_, yaml, _) = run(&["analyze", "fixtures/bundles/agg-wiring.yaml", "-o", "yaml"]);
    assert!(yaml.contains("kind: Diagnosis"));
}

// Thresholds are settings, not constants in rules: a team whose certificates rotate every week
// must be able to lower `cert_warn_days` without forking the rule.
#[test]
fn settings_change_what_rules_see() {
    let json = |args: &[&str]| -> serde_json::Value {
        let mut a = vec![
            "analyze",
            "fixtures/bundles/agg-tls.yaml",
            "-o",
            "json",
            "--subject",
            "APIService/v1.expiring.example.com",
        ];
        a.extend(args);
        serde_json::from_str(&run(&a).1).unwrap()
    };
    assert_eq!(json(&[])["verdicts"][0]["class"], "Aggregation");
    assert_eq!(
        json(&["--set", "cert_warn_days=5"])["verdicts"][0]["class"],
        "Healthy"
    );
}

#[test]
fn explain_a_rule_or_a_class() {
    let (code, out, _) = run(&["explain", "aggregation-tls-unknown-authority"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("caBundle") && out.contains("rung tls"),
        "{out}"
    );
    let (code, out, _) = run(&["explain", "apf"]);
    assert_eq!(code, 0);
    assert!(out.contains("apf-request-rejected"), "{out}");
    let (code, _, err) = run(&["explain", "nothing-like-it"]);
    assert_eq!(code, 2);
    assert!(err.contains("neither a rule id nor a class"), "{err}");
    let (code, out, _) = run(&["rules", "list"]);
    assert_eq!(code, 0);
    assert!(out.lines().count() > 100, "{out}");
}

/// What a rendered text shows when an interpolation came out empty or did not render: a
/// command with an empty argument (`kubectl -n  get endpoints `), an empty quoted value, a
/// `namespace/name` or `host:port` with one side missing, or template residue. `command` says the
/// text is a next step: its shell comment (after ` #`) is prose and is not read. Prose (a summary,
/// a comment) may quote evidence verbatim, double spaces and all, so only its words are read.
pub(crate) fn empty_interpolation(text: &str, command: bool) -> Option<&'static str> {
    if text.contains("{{") || text.contains("}}") {
        return Some("template residue");
    }
    let code = if command {
        text.split(" #").next().unwrap_or(text).trim_end()
    } else {
        text
    };
    if command {
        if code.contains("  ") {
            return Some("two spaces: an empty word between them");
        }
        if code.starts_with(' ') {
            return Some("an empty word at the start");
        }
        if code.ends_with(" -n") || code.ends_with(" get") || code.ends_with(" --namespace") {
            return Some("a command cut short");
        }
        for bad in ["-n get", "-n -o", "--namespace get", "-n describe"] {
            if code.contains(bad) {
                return Some("an empty namespace");
            }
        }
    }
    for w in code.split_whitespace() {
        if command && (w == "''" || w == "\"\"") {
            return Some("an empty quoted value");
        }
        let w = w.trim_matches(['\'', '"', '`', ';', ',', '.', '(', ')']);
        if w == "/" || w.starts_with("/:") {
            return Some("a namespace/name with a side missing");
        }
        if command
            && w.len() > 1
            && w.starts_with(':')
            && w[1..].chars().all(|c| c.is_ascii_digit())
        {
            return Some("a host:port without its host");
        }
    }
    for bad in ["<nil>", "=null", " null ", "Service / ", "service / "] {
        if text.contains(bad) {
            return Some("an empty or null value");
        }
    }
    None
}

#[test]
fn empty_interpolation_detector_knows_the_shapes() {
    for bad in [
        "kubectl -n  get endpoints  -o wide",
        "kubectl -n  get pods -o wide",
        "kubectl get svc -n  x",
        "kubectl get crd {{crd.name}}",
        "openssl s_client -connect :443",
        "kubectl describe apiservice ''",
        "kubectl get endpoints / -o yaml",
        "kubectl -n get pods",
    ] {
        assert!(empty_interpolation(bad, true).is_some(), "{bad}");
    }
    for good in [
        "kubectl -n shop get endpoints web -o wide",
        "kubectl get crd gadgets.example.org -o jsonpath='{.spec.conversion}'",
        "curl -kv https://127.0.0.1:8443/review",
        "kubectl get --raw /metrics | grep 'x{name=\"a\"'",
        "kubectl extpath scan --window 30s   # two scrapes:  the increase",
    ] {
        assert_eq!(empty_interpolation(good, true), None, "{good}");
    }
    assert!(empty_interpolation("Service / has no endpoints", false).is_some());
    assert_eq!(
        empty_interpolation("rejected (e.g. 'MyValue',  or 'my_value'): ok", false),
        None,
        "prose quotes evidence verbatim"
    );
}

// Every bundled rule's summary, next steps and rules-out reasons, rendered on every input its
// own test cases (and every other rule's) use: no interpolation may come out empty. A field that
// is empty for some subjects (a webhook called by URL has no Service) needs a step of its own,
// not a command with a hole in it.
#[test]
fn no_rendered_text_has_an_empty_interpolation() {
    use std::collections::BTreeSet;

    use extpath::engine::eval::evaluate;
    use extpath::engine::{Filter, Settings};

    let rules = RuleSet::bundled();
    let mut inputs: BTreeSet<(std::path::PathBuf, Vec<String>)> = BTreeSet::new();
    for f in test_files(&repo().join("rules")) {
        let t = parse_test_file(&f).unwrap_or_else(|e| panic!("{e}"));
        for c in t.cases {
            let path = if c.path.is_relative() {
                repo().join(&c.path)
            } else {
                c.path
            };
            inputs.insert((path, c.set));
        }
    }
    for e in std::fs::read_dir(repo().join("fixtures/bundles")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml" || x == "json") {
            inputs.insert((p, Vec::new()));
        }
    }
    let mut found = BTreeSet::new();
    let mut rendered = 0usize;
    for (path, set) in &inputs {
        let Ok(bundle) = load_input(path) else {
            continue;
        };
        let settings = Settings::with_assignments(set).unwrap();
        let evaluation = evaluate(&bundle, &rules, &settings, &Filter::default());
        for s in &evaluation.subjects {
            for h in &s.hits {
                let id = &rules.rules[h.rule].id;
                let texts = std::iter::once(("summary", &h.summary))
                    .chain(h.next.iter().map(|n| ("next", n)))
                    .chain(h.rules_out.iter().map(|(_, b)| ("rules_out", b)));
                for (part, text) in texts {
                    rendered += 1;
                    if let Some(why) = empty_interpolation(text, part == "next") {
                        found.insert(format!(
                            "{id} on {} ({}): {part} {text:?}: {why}",
                            s.subject,
                            path.strip_prefix(repo()).unwrap_or(path).display()
                        ));
                    }
                }
            }
        }
    }
    assert!(rendered > 1000, "only {rendered} texts rendered");
    assert!(
        found.is_empty(),
        "{} rendered text(s) with an empty interpolation:\n{}",
        found.len(),
        found.into_iter().collect::<Vec<_>>().join("\n")
    );
}
