//! The generalisation check: verdicts must come from evidence, never from the names a capture
//! happens to use. Every real capture of `fixtures/raw/` is copied with every user-chosen name
//! (namespaces, Services, API groups, webhooks, APF objects, users…) and every file renamed
//! ([`renamer`]); the copy must be classified right against the case's expectation with its subject
//! names renamed the same way, and give the same verdicts (subject, class, severity) as the
//! original. The new names carry words rules look for (`storage`, `etcd`, `webhook`…), and the
//! rules themselves are checked not to match error texts by a bare word a name can hold.

mod renamer;

use std::collections::BTreeSet;

use extpath::engine::RuleSet;
use serde_json::Value;

use crate::util::captures::{analyse, cases, cases_in, incidents_dir, raw_dir, score};
use renamer::Renamer;

/// Cases whose verdicts still depend on a name, each with the reason. The list only ever shrinks.
const KNOWN_NAME_DEPENDENCIES: &[(&str, &str)] = &[];

/// One verdict as compared: subject kind, name, namespace and parent, class, severity.
type Key = (String, String, String, String, String, String);

fn verdict_keys(doc: &Value, rename: impl Fn(&str) -> String) -> BTreeSet<Key> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    doc["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            let subject = &v["subject"];
            (
                s(&subject["kind"]),
                rename(&s(&subject["name"])),
                rename(&s(&subject["namespace"])),
                rename(&s(&subject["parent"])),
                s(&v["class"]),
                s(&v["severity"]),
            )
        })
        .collect()
}

/// The case with its subject names as the renamed copy spells them.
fn renamed_case(case: &Value, rn: &Renamer) -> Value {
    let mut case = case.clone();
    for subject in case["subjects"].as_array_mut().into_iter().flatten() {
        if let Some(name) = subject["name"].as_str() {
            subject["name"] = Value::from(rn.rename_name(name));
        }
    }
    case
}

/// What is wrong with one case's renamed copy, if anything.
fn check_case(root: &std::path::Path, case: &Value, rules: &RuleSet) -> Result<(), String> {
    let dir = case["dir"].as_str().unwrap();
    let original = root.join(dir);
    let mut rn = Renamer::plan(&original).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("c");
    rn.copy_case(&original, &copy).unwrap();
    let before = analyse(&original, rules);
    let after = analyse(&copy, rules);
    let mut problems = Vec::new();
    if let Err(why) = score(&renamed_case(case, &rn), &after) {
        problems.push(format!("renamed copy misclassified: {why}"));
    }
    let want = verdict_keys(&before, |n| rn.rename_subject(n));
    let got = verdict_keys(&after, str::to_string);
    if want != got {
        problems.push(format!(
            "verdicts differ:\n    only original (renamed): {:?}\n    only renamed copy:       {:?}",
            want.difference(&got).collect::<Vec<_>>(),
            got.difference(&want).collect::<Vec<_>>()
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\n  map: {:?}\n  kept (in certificates): {:?}",
            problems.join("\n  "),
            rn.map(),
            rn.kept()
        ))
    }
}

#[test]
fn verdicts_do_not_depend_on_names() {
    // The real captures and the incident folders.
    let raw = raw_dir();
    let incidents = incidents_dir();
    let cases: Vec<(&std::path::Path, Value)> = cases()
        .into_iter()
        .map(|c| (raw.as_path(), c))
        .chain(
            cases_in(&incidents)
                .into_iter()
                .map(|c| (incidents.as_path(), c)),
        )
        .collect();
    let rules = RuleSet::bundled();
    // Two workers: the cases are independent and CI has two cores.
    let (left, right) = cases.split_at(cases.len() / 2);
    let run = |part: &[(&std::path::Path, Value)]| {
        part.iter()
            .map(|(root, c)| {
                (
                    c["dir"].as_str().unwrap().to_string(),
                    check_case(root, c, &rules),
                )
            })
            .collect::<Vec<_>>()
    };
    let results: Vec<(String, Result<(), String>)> = std::thread::scope(|s| {
        let l = s.spawn(|| run(left));
        let mut right = run(right);
        let mut all = l.join().unwrap();
        all.append(&mut right);
        all
    });
    let failing: Vec<&(String, Result<(), String>)> =
        results.iter().filter(|(_, r)| r.is_err()).collect();
    let unexpected: Vec<String> = failing
        .iter()
        .filter(|(d, _)| !KNOWN_NAME_DEPENDENCIES.iter().any(|(k, _)| k == d))
        .map(|(d, r)| format!("{d}: {}", r.as_ref().err().cloned().unwrap_or_default()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "{}/{} captures give the same verdicts renamed; name-dependent:\n{}",
        results.len() - failing.len(),
        results.len(),
        unexpected.join("\n")
    );
    let fixed: Vec<&str> = KNOWN_NAME_DEPENDENCIES
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| !failing.iter().any(|(d, _)| d == k))
        .collect();
    assert!(
        fixed.is_empty(),
        "no longer name-dependent, remove from KNOWN_NAME_DEPENDENCIES: {fixed:?}"
    );
}

#[test]
fn the_rename_map_comes_from_the_content() {
    // The service-missing capture has no certificates: its Service and namespace are renamed;
    // the healthy one holds the extension server's serving certificate, whose SANs keep them.
    let raw = raw_dir();
    let missing = Renamer::plan(&raw.join("02-service-missing-settled")).unwrap();
    let map: Vec<(&str, &str)> = missing.map();
    for name in ["wardle.example.com", "wardle-system", "api"] {
        assert!(map.iter().any(|(from, _)| *from == name), "{name}: {map:?}");
    }
    assert!(missing.kept().is_empty(), "{:?}", missing.kept());
    let healthy = Renamer::plan(&raw.join("00-healthy")).unwrap();
    assert_eq!(
        healthy
            .kept()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["api", "wardle-system"]
    );
    assert!(
        healthy
            .map()
            .iter()
            .any(|(from, _)| *from == "wardle.example.com")
    );
    let apf = Renamer::plan(&raw.join("12-apf-queue-full")).unwrap();
    let apf_map = apf.map();
    for name in ["flooders", "tiny", "apf-load"] {
        assert!(
            apf_map.iter().any(|(from, _)| *from == name),
            "{name}: {apf_map:?}"
        );
    }
    assert!(
        !apf_map
            .iter()
            .any(|(from, _)| ["catch-all", "global-default", "exempt"].contains(from)),
        "bootstrap APF objects are Kubernetes' names: {apf_map:?}"
    );
}

/// Words a rule may match bare in error texts: names Kubernetes fixes, which no user-chosen name
/// can take.
const FIXED_TEXT_WORDS: &[&str] = &["extension-apiserver-authentication"];

/// The top-level alternatives of a regex (`a|b(c|d)` → `a`, `b(c|d)`).
fn alternatives(re: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start, mut escaped) = (Vec::new(), 0i32, 0, false);
    for (i, c) in re.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '|' if depth == 0 => {
                out.push(&re[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&re[start..]);
    out
}

/// A text pattern that a name alone can satisfy: it starts with a word that could be a name or a
/// label of one (`storage`, `etcd.*refused`, `example.com`), rather than with a phrase of the
/// component's own wording (`etcdserver: `, `connection refused`, `x509: `). `None` when fine.
fn bare_name_word(pattern: &str) -> Option<String> {
    let token: String = pattern
        .chars()
        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.')
        .collect();
    let rest = &pattern[token.len()..];
    let word = token.trim_end_matches('.');
    let bare = !word.is_empty()
        && word.starts_with(|c: char| c.is_ascii_alphanumeric())
        && (rest.is_empty() || rest.starts_with('*') || rest.starts_with('('));
    let fixed = FIXED_TEXT_WORDS.contains(&word) || word.ends_with(".k8s.io");
    (bare && !fixed).then(|| word.to_string())
}

#[test]
fn rules_match_phrases_of_error_texts_not_words_a_name_can_hold() {
    // A rule that matches `storage` in an error text fires on an extension server whose group is
    // `backup.storage.example.org` (fixtures/bundles/outofscope-name-words.yaml): its verdict then
    // depends on a name. Text patterns start with the wording of the component that wrote them.
    let call = regex::Regex::new(r"\.(matches|contains)\('((?:[^'\\]|\\.)*)'\)").unwrap();
    let mut bad = Vec::new();
    for (path, text) in extpath::engine::rules::bundled_sources() {
        if path.ends_with(".test.yaml") {
            continue;
        }
        let rule: Value = serde_saphyr::from_str(text).unwrap();
        let when = rule["when"].as_str().unwrap_or_default();
        for c in call.captures_iter(when) {
            let arg = c[2].replace("\\\\", "\\");
            let patterns = if &c[1] == "matches" {
                alternatives(&arg)
            } else {
                vec![arg.as_str()]
            };
            bad.extend(
                patterns
                    .into_iter()
                    .filter_map(bare_name_word)
                    .map(|w| format!("{path}: `{w}`")),
            );
        }
    }
    assert!(
        bad.is_empty(),
        "text patterns a user-chosen name can satisfy:\n{}",
        bad.join("\n")
    );
    assert_eq!(alternatives(r"a|b(c|d)|\[-\]e"), ["a", "b(c|d)", r"\[-\]e"]);
    assert_eq!(bare_name_word("storage").as_deref(), Some("storage"));
    assert_eq!(bare_name_word("etcd.*(refused)").as_deref(), Some("etcd"));
    assert_eq!(bare_name_word("etcdserver: "), None);
    assert_eq!(bare_name_word("connection refused"), None);
    assert_eq!(
        bare_name_word("subjectaccessreviews.authorization.k8s.io"),
        None
    );
}
