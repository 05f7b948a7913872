//! `docs/facts.md` and `docs/rules.md` document what the code has: every field of the fact model,
//! every function and setting, and every bundled rule.

use cel::Value;
use extpath::engine::facts::sample::sample_bundle;
use extpath::engine::facts::{FactBase, cluster_vars, subject_vars};
use extpath::engine::functions::FUNCTIONS;
use extpath::engine::settings::SETTINGS;
use extpath::engine::subjects::subjects;
use extpath::engine::{RuleSet, Settings};

use super::util::repo;

fn keys(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Map(m) => {
            for (k, x) in m.map.iter() {
                if let cel::objects::Key::String(s) = k {
                    out.insert(s.to_string());
                    // Label and count maps have data as keys, not fields.
                    if ![
                        "labels",
                        "status_counts",
                        "fields",
                        "match_labels",
                        "selector",
                    ]
                    .contains(&s.as_str())
                    {
                        keys(x, out);
                    }
                }
            }
        }
        Value::List(l) => {
            if let Some(x) = l.first() {
                keys(x, out);
            }
        }
        _ => {}
    }
}

#[test]
fn facts_md_documents_every_field_function_and_setting() {
    let doc = std::fs::read_to_string(repo().join("docs/facts.md")).unwrap();
    let bundle = sample_bundle();
    let base = FactBase::new(&bundle);
    let mut fields = std::collections::BTreeSet::new();
    for (name, v) in cluster_vars(&base, &Settings::default()) {
        fields.insert(name.to_string());
        keys(&v.to_value(), &mut fields);
    }
    for e in subjects(&bundle) {
        for (name, v) in subject_vars(&base, &e) {
            fields.insert(name.to_string());
            keys(&v.to_value(), &mut fields);
        }
    }
    let missing: Vec<&String> = fields
        .iter()
        .filter(|f| !doc.contains(&format!("`{f}`")) && !doc.contains(&format!("{f}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "fields not in docs/facts.md: {missing:?}"
    );
    for f in FUNCTIONS {
        assert!(
            doc.contains(&format!("`{f}(")),
            "function {f} not documented"
        );
    }
    for s in SETTINGS {
        assert!(
            doc.contains(&format!("`{}`", s.name)),
            "setting {} not documented",
            s.name
        );
    }
}

#[test]
fn rules_md_lists_every_bundled_rule() {
    let doc = std::fs::read_to_string(repo().join("docs/rules.md")).unwrap();
    for r in &RuleSet::bundled().rules {
        assert!(
            doc.contains(&format!("| `{}` | {} |", r.id, r.class)),
            "docs/rules.md does not list {} ({})",
            r.id,
            r.class
        );
    }
}
