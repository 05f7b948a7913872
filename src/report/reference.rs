//! The generated contract documents: `docs/diagnosis.schema.json`, `docs/fleet.schema.json`,
//! `docs/bundle.schema.json` and `docs/bundle.md`.
//!
//! The schemas come straight from the types (schemars); `bundle.md` is rendered from the bundle's
//! schema — every description in it is a doc comment on a type in `src/bundle/` — behind a short
//! hand-written introduction and an example. Generating instead of writing keeps the reference
//! true: a test (`tests/docs.rs`) regenerates all four and fails when a checked-in file differs.
//!
//! What this module does not own: the types or their doc comments (that is `bundle` and
//! `engine::diagnosis`); to change a description, edit the doc comment and regenerate.

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::engine::diagnosis::Diagnosis;

/// The command that regenerates the files, printed by the test when they are stale.
pub const UPDATE_COMMAND: &str = "UPDATE_DOCS=1 cargo test --test main docs";

/// Every generated document: its path relative to the repository root, and its content.
pub fn generated_docs() -> Vec<(&'static str, String)> {
    vec![
        ("docs/diagnosis.schema.json", diagnosis_schema_json()),
        ("docs/fleet.schema.json", fleet_schema_json()),
        ("docs/bundle.schema.json", bundle_schema_json()),
        ("docs/bundle.md", bundle_reference_markdown()),
    ]
}

/// The JSON Schema of the `Diagnosis` document (`-o json`), pretty-printed.
pub fn diagnosis_schema_json() -> String {
    let schema = schemars::schema_for!(Diagnosis);
    pretty(&serde_json::to_value(schema).unwrap_or(Value::Null))
}

/// The JSON Schema of the fleet document (`scan --context a,b,c -o json`), pretty-printed.
pub fn fleet_schema_json() -> String {
    let schema = schemars::schema_for!(super::fleet::FleetDiagnosis);
    pretty(&serde_json::to_value(schema).unwrap_or(Value::Null))
}

/// The JSON Schema of the `EvidenceBundle` document, pretty-printed.
pub fn bundle_schema_json() -> String {
    pretty(&crate::bundle::json_schema())
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// The hand-written part of `docs/bundle.md`, before the example.
const BUNDLE_INTRO: &str = include_str!("bundle_intro.md");

/// The example in `docs/bundle.md`: an aggregated API whose caBundle does not match its serving
/// certificate, seen during an incident. The docs test checks that it loads as a bundle.
pub const BUNDLE_EXAMPLE: &str = include_str!("bundle_example.yaml");

/// `docs/bundle.md`: the introduction, the example, then one section per type reachable from
/// `EvidenceBundle`, in the order a reader meets them.
pub fn bundle_reference_markdown() -> String {
    schema_reference_markdown(
        &crate::bundle::json_schema(),
        BUNDLE_INTRO,
        Some(BUNDLE_EXAMPLE),
    )
}

/// Render a JSON Schema (as schemars writes it: a root object with `$defs`) as a Markdown
/// reference: `intro`, an optional YAML example, then a section per type with a field table
/// (name, type with links, required, description and default).
pub fn schema_reference_markdown(schema: &Value, intro: &str, example: Option<&str>) -> String {
    let empty = Map::new();
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let root_name = schema
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("Document")
        .to_string();

    let mut md = String::new();
    let _ = writeln!(
        md,
        "<!-- Generated from the doc comments of the types; do not edit by hand.\n     \
         Edit the doc comments (or src/report/bundle_intro.md) and run: {UPDATE_COMMAND} -->\n"
    );
    md.push_str(intro.trim_end());
    md.push_str("\n\n");
    if let Some(ex) = example {
        md.push_str("## Example\n\n```yaml\n");
        md.push_str(ex.trim_end());
        md.push_str("\n```\n\n");
    }
    md.push_str("## Types\n\n");

    for name in reading_order(&root_name, schema, defs) {
        let def = if name == root_name {
            schema
        } else {
            match defs.get(&name) {
                Some(d) => d,
                None => continue,
            }
        };
        write_type(&mut md, &name, def);
    }
    // Exactly one final newline, whatever the last section left: the docs test compares bytes
    // with the checked-in file, and editors that trim trailing blank lines must not make it stale.
    md.truncate(md.trim_end().len());
    md.push('\n');
    md
}

/// The root first, then every `$defs` entry in breadth-first order of first reference (in field
/// order), then anything unreferenced, alphabetically.
fn reading_order(root: &str, schema: &Value, defs: &Map<String, Value>) -> Vec<String> {
    let mut order = vec![root.to_string()];
    let mut seen: BTreeSet<String> = BTreeSet::from([root.to_string()]);
    let mut queue = VecDeque::from([schema]);
    while let Some(node) = queue.pop_front() {
        let mut refs = Vec::new();
        for (_, field) in ordered_fields(node) {
            collect_refs(field, &mut refs);
        }
        for variant in variants(node) {
            for (_, field) in ordered_fields(variant) {
                collect_refs(field, &mut refs);
            }
        }
        for r in refs {
            if seen.insert(r.clone())
                && let Some(d) = defs.get(&r)
            {
                order.push(r);
                queue.push_back(d);
            }
        }
    }
    for name in defs.keys() {
        if seen.insert(name.clone()) {
            order.push(name.clone());
        }
    }
    order
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                out.push(ref_name(r).to_string());
            }
            for key in ["items", "additionalProperties", "anyOf", "oneOf", "allOf"] {
                if let Some(inner) = m.get(key) {
                    collect_refs(inner, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

fn ref_name(r: &str) -> &str {
    r.rsplit('/').next().unwrap_or(r)
}

/// Object variants of a tagged enum (`oneOf` of objects).
fn variants(def: &Value) -> Vec<&Value> {
    def.get("oneOf")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter(|v| v.get("properties").is_some()).collect())
        .unwrap_or_default()
}

/// Required fields first in declaration order (schemars keeps `required` in that order), then
/// the optional ones alphabetically.
fn ordered_fields(def: &Value) -> Vec<(&str, &Value)> {
    let Some(props) = def.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let required = required_fields(def);
    let mut fields: Vec<(&str, &Value)> = required
        .iter()
        .filter_map(|r| props.get_key_value(*r).map(|(k, v)| (k.as_str(), v)))
        .collect();
    fields.extend(
        props
            .iter()
            .filter(|(k, _)| !required.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v)),
    );
    fields
}

fn required_fields(def: &Value) -> Vec<&str> {
    def.get("required")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn write_type(md: &mut String, name: &str, def: &Value) {
    let _ = writeln!(md, "### {name}\n");
    if let Some(d) = description(def) {
        let _ = writeln!(md, "{d}\n");
    }
    if def.get("properties").is_some() {
        write_fields(md, def, None);
    } else if let Some(values) = enum_values(def) {
        md.push_str("One of:\n\n| Value | Meaning |\n|---|---|\n");
        for (value, meaning) in values {
            let _ = writeln!(md, "| `{value}` | {} |", cell(&meaning));
        }
    } else if !variants(def).is_empty() {
        let tag = tag_field(def);
        let _ = writeln!(
            md,
            "An object whose `{}` field selects one of these forms:\n",
            tag.unwrap_or("type")
        );
        for variant in variants(def) {
            let tag_value = tag
                .and_then(|t| variant.pointer(&format!("/properties/{t}/const")))
                .and_then(Value::as_str)
                .unwrap_or("?");
            let _ = write!(md, "**`{}: {tag_value}`**", tag.unwrap_or("type"));
            if let Some(d) = description(variant) {
                let _ = write!(md, " — {d}");
            }
            md.push_str("\n\n");
            write_fields(md, variant, tag);
        }
    } else {
        let _ = writeln!(md, "Type: {}\n", type_text(def));
    }
}

fn write_fields(md: &mut String, def: &Value, skip: Option<&str>) {
    let required = required_fields(def);
    let fields: Vec<(&str, &Value)> = ordered_fields(def)
        .into_iter()
        .filter(|(k, _)| Some(*k) != skip)
        .collect();
    if fields.is_empty() {
        md.push_str("No other fields.\n\n");
        return;
    }
    md.push_str("| Field | Type | Required | Description |\n|---|---|---|---|\n");
    for (field, schema) in fields {
        let mut desc = description(schema).unwrap_or_default();
        if let Some(default) = schema.get("default") {
            if !desc.is_empty() {
                desc.push(' ');
            }
            // Written as JSON (`"critical"`, `10`, `[]`), the spelling the schema and a bundle
            // reader share, so quotes tell a string default from a number.
            let _ = write!(desc, "Default: `{default}`.");
        }
        let _ = writeln!(
            md,
            "| `{field}` | {} | {} | {} |",
            cell(&type_text(schema)),
            if required.contains(&field) { "yes" } else { "" },
            cell(&desc)
        );
    }
    md.push('\n');
}

/// The field that tags the variants of an internally tagged enum: the one property with a
/// `const` in every variant.
fn tag_field(def: &Value) -> Option<&str> {
    let vs = variants(def);
    let first = vs.first()?.get("properties")?.as_object()?;
    first
        .iter()
        .find(|(k, _)| {
            vs.iter()
                .all(|v| v.pointer(&format!("/properties/{k}/const")).is_some())
        })
        .map(|(k, _)| k.as_str())
}

/// `(value, meaning)` for string enums, whether written as `oneOf` of documented `const`s or as
/// a bare `enum` list.
fn enum_values(def: &Value) -> Option<Vec<(String, String)>> {
    if let Some(list) = def.get("enum").and_then(Value::as_array) {
        return Some(list.iter().map(|v| (scalar(v), String::new())).collect());
    }
    let one_of = def.get("oneOf")?.as_array()?;
    let mut out = Vec::new();
    for v in one_of {
        if let Some(c) = v.get("const") {
            out.push((scalar(c), description(v).unwrap_or_default()));
        } else if let Some(list) = v.get("enum").and_then(Value::as_array) {
            let meaning = description(v).unwrap_or_default();
            out.extend(list.iter().map(|x| (scalar(x), meaning.clone())));
        } else {
            return None;
        }
    }
    Some(out)
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A doc comment as one paragraph (schemars keeps the source's line breaks).
fn description(v: &Value) -> Option<String> {
    let d = v.get("description")?.as_str()?;
    Some(d.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// A readable type: `string`, `integer`, `timestamp (RFC 3339)`, `list of [Probe](#probe)`,
/// `map of string to integer`, …; `null` alternatives are dropped (the Required column says
/// whether a field may be absent).
fn type_text(s: &Value) -> String {
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = ref_name(r);
        // GitHub's heading anchors are the heading lowercased, spaces to hyphens, punctuation
        // dropped; a type name is one word, so lowercasing is the whole rule here.
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(c) = s.get("const") {
        return format!("`{}`", scalar(c));
    }
    if let Some(list) = s.get("enum").and_then(Value::as_array) {
        let vals: Vec<String> = list.iter().map(|v| format!("`{}`", scalar(v))).collect();
        return format!("one of {}", vals.join(", "));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = s.get(key).and_then(Value::as_array) {
            let texts: Vec<String> = alts
                .iter()
                .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                .map(type_text)
                .collect();
            return texts.join(" or ");
        }
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    let Some(t) = types.first() else {
        return "any JSON value".to_string();
    };
    match *t {
        "array" => match s.get("items") {
            Some(items) => format!("list of {}", type_text(items)),
            None => "list".to_string(),
        },
        "object" => match s.get("additionalProperties") {
            Some(v) if v.is_object() => format!("map of string to {}", type_text(v)),
            _ => "object".to_string(),
        },
        "string" => match s.get("format").and_then(Value::as_str) {
            Some("date-time") => "timestamp (RFC 3339)".to_string(),
            Some(f) => format!("string ({f})"),
            None => "string".to_string(),
        },
        "integer" if s.get("minimum").and_then(Value::as_f64) == Some(0.0) => {
            "integer ≥ 0".to_string()
        }
        other => other.to_string(),
    }
}

/// Table cells: no line breaks, pipes escaped.
fn cell(s: &str) -> String {
    s.replace(['\n', '\r'], " ").replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_read_like_words() {
        assert_eq!(type_text(&json!({"type": "string"})), "string");
        assert_eq!(
            type_text(&json!({"type": ["string", "null"], "format": "date-time"})),
            "timestamp (RFC 3339)"
        );
        assert_eq!(
            type_text(&json!({"type": "array", "items": {"$ref": "#/$defs/Probe"}})),
            "list of [Probe](#probe)"
        );
        assert_eq!(
            type_text(
                &json!({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}})
            ),
            "map of string to integer ≥ 0"
        );
        assert_eq!(
            type_text(&json!({"anyOf": [{"$ref": "#/$defs/Window"}, {"type": "null"}]})),
            "[Window](#window)"
        );
        assert_eq!(type_text(&json!(true)), "any JSON value");
    }

    #[test]
    fn string_enums_list_their_values_with_meanings() {
        let def = json!({"oneOf": [
            {"const": "a", "description": "First."},
            {"const": "b", "description": "Second\nline."}
        ]});
        assert_eq!(
            enum_values(&def).unwrap(),
            vec![
                ("a".to_string(), "First.".to_string()),
                ("b".to_string(), "Second line.".to_string())
            ]
        );
    }

    #[test]
    fn required_fields_come_first_in_declaration_order() {
        let def = json!({
            "properties": {"a": {}, "b": {}, "y": {}, "z": {}},
            "required": ["z", "b"]
        });
        let names: Vec<&str> = ordered_fields(&def).into_iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["z", "b", "a", "y"]);
    }
}
