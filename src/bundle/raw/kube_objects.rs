//! `kubectl get … -o json|yaml` output → validated objects, added to the bundle once all files are read.
//!
//! A file holds one object, a `List` (`kind: List` or a typed `*List`, whose items may omit their
//! `kind`), or several YAML documents, possibly after kubectl's own stderr lines (klog `memcache.go`
//! discovery warnings captured with `2>&1`), which are skipped, and before a capture's `exit=N`.
//! Each object of a kind extpath reads is validated at once — so a malformed one is an error naming
//! its file and item — but added only at assembly, so that an object supplied in several files is
//! kept once, at its highest resourceVersion. The mapping itself is `object_mapping.rs`. Kinds
//! extpath does not read (Flunder, …) are skipped without error, and Secrets are never even
//! deserialised. Object timestamps are recorded: they date the evidence.
//!
//! A ConfigMap is not mapped, but the PEM certificates its `data` values hold
//! (`extension-apiserver-authentication`'s `client-ca-file` and `requestheader-client-ca-file`,
//! every namespace's `kube-root-ca.crt`) are read as certificates *of that ConfigMap* (origin
//! `file`, owner `ConfigMap/<ns>/<name>`): never a served chain, never a leaf offered to an
//! APIService or webhook.
//!
//! When the file may not sink the import (inside a directory, without `--strict`), an item that
//! does not validate — a List's object, a ConfigMap's PEM value — is an `unreadable` gap naming the
//! file and the item, and the other items are kept.

use serde_json::{Value, json};

use crate::bundle::certs::CertSource;
use crate::bundle::{CertOrigin, Certificate, EvidenceBundle, Kind, ObjectRef};

use super::log_lines::is_klog;
use super::object_mapping::apply;
use super::state::{FileCtx, FileError, Importer, ObjectRecord, Yield};
use super::timeline::{Stamp, parse_rfc3339};
use super::trailer::parse_trailer;

/// Keys whose RFC 3339 values say when something happened.
const TIME_KEYS: &[&str] = &[
    "creationTimestamp",
    "lastTransitionTime",
    "lastTimestamp",
    "firstTimestamp",
    "eventTime",
    "lastObservedTime",
    "lastUpdateTime",
    "lastHeartbeatTime",
    "lastProbeTime",
    "startTime",
    "startedAt",
    "finishedAt",
    "time",
];

/// Lines kubectl may have written to a captured stream before the document.
pub(crate) fn is_leading_noise(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || is_klog(t) || t.starts_with("Warning: ")
}

/// Read a file of Kubernetes objects.
pub(crate) fn read(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let (skipped_lines, body) = skip_noise(text);
    let body = strip_trailing_noise(body);
    let docs = parse_documents(body, skipped_lines)?;
    let mut tally = Tally::default();
    for (i, doc) in docs.iter().enumerate() {
        let place = if docs.len() > 1 {
            format!("document {}", i + 1)
        } else {
            String::new()
        };
        if let Err(e) = add_value(imp, file, doc, None, &place, &mut tally) {
            imp.tolerate(file, e)?;
        }
    }
    Ok(tally.into_yield())
}

/// Skip kubectl's stderr lines before the document; returns how many lines were skipped (so parse
/// errors still name the right line) and the rest.
fn skip_noise(text: &str) -> (usize, &str) {
    let mut offset = 0;
    let mut lines = 0;
    for line in text.split_inclusive('\n') {
        if !is_leading_noise(line) {
            break;
        }
        offset += line.len();
        lines += 1;
    }
    (lines, &text[offset..])
}

/// Drop what a capture may have appended after the document (an `exit=0` line, stderr).
fn strip_trailing_noise(body: &str) -> &str {
    let mut end = 0;
    let mut offset = 0;
    for line in body.split_inclusive('\n') {
        offset += line.len();
        let t = line.trim();
        if !(is_leading_noise(t) || parse_trailer(t).is_some()) {
            end = offset;
        }
    }
    &body[..end]
}

/// Every JSON value of the body (kubectl prints one, concatenated captures hold several), or every
/// YAML document.
fn parse_documents(body: &str, skipped_lines: usize) -> Result<Vec<Value>, FileError> {
    let trimmed = body.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut docs = Vec::new();
        let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Value>();
        for item in stream.by_ref() {
            match item {
                Ok(v) => docs.push(v),
                Err(e) => {
                    return Err(FileError::at(
                        e.line() + skipped_lines,
                        format!("malformed JSON: {}", strip_location(&e.to_string())),
                    ));
                }
            }
        }
        return Ok(docs);
    }
    // `kubectl get -o yaml` of a large cluster is as big as the bundle made from it: the same
    // size-scaled limits apply.
    let options = crate::bundle::yaml_limits::options_for(body.len());
    serde_saphyr::from_multiple_with_options::<Value>(body, options).map_err(|e| {
        let line = e.location().map_or(0, |l| l.line() as usize);
        let message =
            crate::bundle::yaml_limits::budget_sentence(&e, body.len()).unwrap_or_else(|| {
                format!(
                    "malformed YAML: {}",
                    e.to_string().lines().next().unwrap_or_default()
                )
            });
        FileError::at(line + skipped_lines, message)
    })
}

fn strip_location(s: &str) -> String {
    match s.rfind(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// The PEM certificates of a ConfigMap's `data`, as certificates owned by it; `true` when one was
/// read. A value that holds PEM armour but does not decode is a problem of that item.
fn configmap_certificates(
    imp: &mut Importer,
    file: &FileCtx,
    obj: &serde_json::Map<String, Value>,
    place: &str,
) -> Result<bool, FileError> {
    let meta = |k: &str| {
        obj.get("metadata")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let owner = ObjectRef::namespaced(Kind::ConfigMap, meta("namespace"), meta("name"));
    let Some(data) = obj.get("data").and_then(Value::as_object) else {
        return Ok(false);
    };
    let mut read = false;
    for (key, value) in data {
        let Some(text) = value.as_str() else {
            continue;
        };
        if !text
            .lines()
            .any(|l| l.trim_start().starts_with("-----BEGIN CERTIFICATE-----"))
        {
            continue;
        }
        let decoded = match crate::pki::decode_pem(text.as_bytes()) {
            Ok(d) => d,
            Err(e) => {
                imp.tolerate(
                    file,
                    FileError::whole(format!(
                        "{}ConfigMap {:?}: data {key:?}: malformed PEM: {e}",
                        prefix(place),
                        meta("name")
                    )),
                )?;
                continue;
            }
        };
        for (i, (info, _der)) in decoded.into_iter().enumerate() {
            let known = imp
                .bundle
                .certificates
                .iter()
                .any(|c| c.sha256 == info.sha256 && c.origin.owner.as_ref() == Some(&owner));
            if !known {
                imp.bundle.certificates.push(Certificate::from_info(
                    info,
                    CertOrigin {
                        source: CertSource::File,
                        owner: Some(owner.clone()),
                        file: Some(file.shown.clone()),
                        endpoint: None,
                        chain_index: i,
                    },
                ));
            }
            read = true;
        }
    }
    Ok(read)
}

#[derive(Default)]
struct Tally {
    added: usize,
    empty_lists: usize,
    ignored_kinds: Vec<String>,
}

impl Tally {
    fn into_yield(self) -> Yield {
        if self.added > 0 {
            return Yield::Used;
        }
        if !self.ignored_kinds.is_empty() {
            return Yield::Nothing(format!(
                "Kubernetes objects of kinds extpath does not read: {}",
                self.ignored_kinds.join(", ")
            ));
        }
        Yield::Nothing(if self.empty_lists > 0 {
            "an empty kubectl List (the kind of its objects is not recorded in it)".into()
        } else {
            "no Kubernetes object in the document".into()
        })
    }
}

fn add_value(
    imp: &mut Importer,
    file: &FileCtx,
    v: &Value,
    defaults: Option<(&str, &str)>,
    place: &str,
    tally: &mut Tally,
) -> Result<(), FileError> {
    let Some(obj) = v.as_object() else {
        return Err(FileError::whole(format!(
            "{}expected a Kubernetes object, found {}",
            prefix(place),
            kind_of_json(v)
        )));
    };
    let str_of = |k: &str| obj.get(k).and_then(Value::as_str);
    let kind = str_of("kind").or(defaults.map(|d| d.1)).unwrap_or_default();
    let api_version = str_of("apiVersion")
        .or(defaults.map(|d| d.0))
        .unwrap_or_default();
    // A List: typed lists (`APIServiceList` from a raw GET) may omit their items' kind/apiVersion.
    if let Some(items) = obj.get("items").and_then(Value::as_array)
        && (kind == "List" || kind.ends_with("List"))
    {
        if items.is_empty() {
            tally.empty_lists += 1;
        }
        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
        for (i, item) in items.iter().enumerate() {
            let item_place = format!("{}items[{i}]", dotted(place));
            let d = item_kind.map(|k| (api_version, k));
            if let Err(e) = add_value(imp, file, item, d, &item_place, tally) {
                imp.tolerate(file, e)?;
            }
        }
        return Ok(());
    }
    if kind == "ConfigMap" {
        if configmap_certificates(imp, file, obj, place)? {
            tally.added += 1;
        } else {
            note_ignored(tally, kind);
        }
        return Ok(());
    }
    if kind == "Secret" {
        // Never deserialised: nothing of a Secret may reach the bundle.
        note_ignored(tally, kind);
        return Ok(());
    }
    let mut typed = v.clone();
    if let Some(o) = typed.as_object_mut() {
        o.insert("apiVersion".into(), json!(api_version));
        o.insert("kind".into(), json!(kind));
    }
    // Validate now (so a bad object names its file), add once every file is read (so an object
    // supplied twice is kept once: the copy with the higher resourceVersion).
    let mut scratch = EvidenceBundle::default();
    let mut scratch_trusts = Vec::new();
    let known = apply(&mut scratch, &mut scratch_trusts, &typed, None).map_err(|e| {
        let name = obj
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        FileError::whole(format!("{}{kind} {name:?}: {e}", prefix(place)))
    })?;
    if !known {
        note_ignored(tally, kind);
        return Ok(());
    }
    collect_times(imp, &typed);
    let meta = |k: &str| {
        typed
            .get("metadata")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let record = ObjectRecord {
        key: (
            api_version
                .split('/')
                .next()
                .unwrap_or_default()
                .to_string()
                + "/"
                + kind,
            meta("namespace"),
            meta("name"),
        ),
        resource_version: meta("resourceVersion").parse().unwrap_or(0),
        file: file.shown.clone(),
        value: typed,
    };
    match imp.objects.iter_mut().find(|o| o.key == record.key) {
        Some(existing) if record.resource_version > existing.resource_version => *existing = record,
        Some(_) => {}
        None => imp.objects.push(record),
    }
    tally.added += 1;
    Ok(())
}

/// Add every object kept, in the order first seen.
pub(crate) fn add_all(imp: &mut Importer) {
    let objects = std::mem::take(&mut imp.objects);
    for o in objects {
        // Validated when read; an error here cannot happen and would only drop the object.
        let _ = apply(&mut imp.bundle, &mut imp.ca_trusts, &o.value, Some(&o.file));
    }
}

fn note_ignored(tally: &mut Tally, kind: &str) {
    let k = if kind.is_empty() { "(no kind)" } else { kind };
    if !tally.ignored_kinds.iter().any(|x| x == k) {
        tally.ignored_kinds.push(k.to_string());
    }
}

fn prefix(place: &str) -> String {
    if place.is_empty() {
        String::new()
    } else {
        format!("{place}: ")
    }
}

fn dotted(place: &str) -> String {
    if place.is_empty() {
        String::new()
    } else {
        format!("{place}.")
    }
}

fn kind_of_json(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Record every object timestamp: the latest one bounds when the files were captured.
fn collect_times(imp: &mut Importer, v: &Value) {
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                if k == "annotations" {
                    continue;
                }
                if let (true, Value::String(s)) = (TIME_KEYS.contains(&k.as_str()), child) {
                    imp.stamp(parse_rfc3339(s).map(Stamp::Full));
                } else {
                    collect_times(imp, child);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| collect_times(imp, c)),
        _ => {}
    }
}
