//! The contract documents in `docs/` are generated from the types and must stay equal to what
//! the current code generates; the bundle reference's example must be a valid bundle; and the
//! Diagnosis schema must describe what `-o json` really writes.

use extpath::report::reference::{BUNDLE_EXAMPLE, UPDATE_COMMAND, generated_docs};
use extpath::report::{Format, RenderOptions, render};
use serde_json::Value;

use super::util::repo;
use crate::util::report_cases as cases;

#[test]
fn generated_docs_are_up_to_date() {
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for (rel, generated) in generated_docs() {
        let path = repo().join(rel);
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &generated).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(current) if current == generated => {}
            _ => stale.push(rel),
        }
    }
    assert!(
        stale.is_empty(),
        "generated docs are out of date with the types: {stale:?}\nregenerate them with: {UPDATE_COMMAND}"
    );
}

#[test]
fn the_bundle_reference_example_is_a_valid_bundle() {
    let bundle = extpath::bundle::load_bundle_str(BUNDLE_EXAMPLE, "docs/bundle.md#example")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(bundle.api_services.len(), 1);
    assert!(bundle.gaps.iter().any(|g| g.source == "metrics/etcd"));
}

#[test]
fn the_bundle_reference_documents_every_type_and_top_level_field() {
    let md = generated_docs()
        .into_iter()
        .find(|(rel, _)| *rel == "docs/bundle.md")
        .map(|(_, text)| text)
        .unwrap();
    let schema = extpath::bundle::json_schema();
    assert!(md.contains("### EvidenceBundle\n"));
    for name in schema["$defs"].as_object().unwrap().keys() {
        assert!(
            md.contains(&format!("\n### {name}\n")),
            "section for {name}"
        );
    }
    for field in schema["properties"].as_object().unwrap().keys() {
        assert!(md.contains(&format!("| `{field}` |")), "row for {field}");
    }
    // Links point at sections that exist (GitHub's anchors are the lowercased heading).
    for link in md.split("](#").skip(1) {
        let anchor = &link[..link.find(')').unwrap()];
        let exists = schema["$defs"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.to_lowercase() == anchor);
        assert!(exists, "dangling link #{anchor}");
    }
}

#[test]
fn the_diagnosis_schema_describes_the_json_output() {
    let schema: Value = serde_json::from_str(
        &generated_docs()
            .into_iter()
            .find(|(rel, _)| *rel == "docs/diagnosis.schema.json")
            .unwrap()
            .1,
    )
    .unwrap();
    assert_eq!(schema["title"], "Diagnosis");
    for (name, d) in cases::all() {
        let mut out = Vec::new();
        render(&d, Format::Json, &RenderOptions::default(), &mut out).unwrap();
        let value: Value = serde_json::from_slice(&out).unwrap();
        if let Err(e) = conforms(&value, &schema, &schema, "$") {
            panic!("{name}: -o json does not match docs/diagnosis.schema.json: {e}");
        }
    }
}

/// A small structural check of a value against the subset of JSON Schema that schemars writes:
/// `$ref`, `anyOf`/`oneOf`, `type` (with `null`), `enum`/`const`, `properties` with `required`
/// and `additionalProperties`, `items`. Enough to catch a field the schema does not know, a
/// missing required field, or a value of the wrong type.
pub(crate) fn conforms(v: &Value, s: &Value, root: &Value, at: &str) -> Result<(), String> {
    if s == &Value::Bool(true) {
        return Ok(());
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap();
        return conforms(v, &root["$defs"][name], root, at);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = s.get(key).and_then(Value::as_array) {
            return if alts.iter().any(|a| conforms(v, a, root, at).is_ok()) {
                Ok(())
            } else {
                Err(format!("{at}: {v} matches none of the {key} alternatives"))
            };
        }
    }
    if let Some(c) = s.get("const") {
        return if v == c {
            Ok(())
        } else {
            Err(format!("{at}: {v} is not {c}"))
        };
    }
    if let Some(list) = s.get("enum").and_then(Value::as_array)
        && !list.contains(v)
    {
        return Err(format!("{at}: {v} is not one of {list:?}"));
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => return Ok(()),
    };
    let actual = match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let number_ok = actual == "integer" && types.contains(&"number");
    if !types.contains(&actual) && !number_ok {
        return Err(format!("{at}: {actual} where the schema says {types:?}"));
    }
    match v {
        Value::Object(map) => {
            let props = s.get("properties").and_then(Value::as_object);
            for req in s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let req = req.as_str().unwrap();
                if !map.contains_key(req) {
                    return Err(format!("{at}: required field {req} is missing"));
                }
            }
            for (k, val) in map {
                let field_at = format!("{at}.{k}");
                match props.and_then(|p| p.get(k)) {
                    Some(fs) => conforms(val, fs, root, &field_at)?,
                    None => match s.get("additionalProperties") {
                        Some(Value::Bool(false)) | None if props.is_some() => {
                            return Err(format!("{field_at}: not in the schema"));
                        }
                        Some(extra) if extra.is_object() => conforms(val, extra, root, &field_at)?,
                        _ => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    conforms(item, item_schema, root, &format!("{at}[{i}]"))?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[test]
fn the_structural_check_rejects_what_it_should() {
    let schema =
        serde_json::to_value(schemars::schema_for!(extpath::engine::diagnosis::Diagnosis)).unwrap();
    let mut out = Vec::new();
    render(
        &cases::healthy_with_expiring_cert(),
        Format::Json,
        &RenderOptions::default(),
        &mut out,
    )
    .unwrap();
    let good: Value = serde_json::from_slice(&out).unwrap();
    assert!(conforms(&good, &schema, &schema, "$").is_ok());

    let mut unknown = good.clone();
    unknown["verdicts"][0]["colour"] = Value::from("red");
    assert!(
        conforms(&unknown, &schema, &schema, "$")
            .unwrap_err()
            .contains("colour")
    );
    let mut wrong_type = good.clone();
    wrong_type["verdicts"][0]["confidence"] = Value::from("high");
    assert!(conforms(&wrong_type, &schema, &schema, "$").is_err());
    let mut missing = good.clone();
    missing["verdicts"][0]
        .as_object_mut()
        .unwrap()
        .remove("class");
    assert!(
        conforms(&missing, &schema, &schema, "$")
            .unwrap_err()
            .contains("class")
    );
    let mut bad_enum = good;
    bad_enum["verdicts"][0]["severity"] = Value::from("fatal");
    assert!(conforms(&bad_enum, &schema, &schema, "$").is_err());
}

/// Every `docs/diagnosis.md#rule-N` that a rule, the docs or the code cites exists, and no text
/// cites the design notes that do not ship.
#[test]
fn cited_diagnosis_rules_exist() {
    let root = super::util::repo();
    let diagnosis = std::fs::read_to_string(root.join("docs/diagnosis.md")).unwrap();
    let mut files = Vec::new();
    for dir in ["rules", "docs", "src"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p
                    .extension()
                    .is_some_and(|x| x == "yaml" || x == "md" || x == "rs")
                {
                    files.push(p);
                }
            }
        }
    }
    let mut cited = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, _) in text.match_indices("docs/diagnosis.md#rule-") {
            let n: String = text[i + "docs/diagnosis.md#rule-".len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if n.is_empty() {
                // `docs/diagnosis.md#rule-N` in prose about the scheme itself.
                continue;
            }
            assert!(
                diagnosis.contains(&format!("<a id=\"rule-{n}\"></a>")),
                "{}: cites docs/diagnosis.md#rule-{n}, which does not exist",
                f.display()
            );
            cited += 1;
        }
        if f.extension().is_some_and(|x| x == "yaml") {
            assert!(
                !text.contains("DESIGN §"),
                "{}: cites DESIGN, which does not ship",
                f.display()
            );
        }
    }
    assert!(cited > 50, "only {cited} citations found");
}

/// ARCHITECTURE.md's "Where things are" sends a newcomer to files and folders by name (issue 15:
/// each answer one place). Every path it names must exist, so that a move or a rename that forgets
/// the map fails here rather than misleading the next reader. Patterns (`<id>.yaml`, `*-tls-*`)
/// are checked up to their first placeholder: the folder they name must exist.
#[test]
fn every_path_the_architecture_map_names_exists() {
    let text = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let section = text
        .split("## Where things are")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("ARCHITECTURE.md has a \"Where things are\" section");
    let roots = ["src/", "rules/", "fixtures/", "docs/", "tests/", "benches/"];
    let mut named = 0;
    let mut missing = Vec::new();
    for quoted in section.split('`').skip(1).step_by(2) {
        if !roots.iter().any(|r| quoted.starts_with(r)) {
            continue;
        }
        named += 1;
        let fixed = quoted.find(['<', '*']).map_or(quoted, |at| {
            &quoted[..quoted[..at].rfind('/').map_or(0, |s| s + 1)]
        });
        if !repo().join(fixed).exists() {
            missing.push(quoted.to_string());
        }
    }
    assert!(
        named >= 10,
        "only {named} paths found: the section's format changed"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}
