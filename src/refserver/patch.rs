//! Patches: JSON merge patch (also used for strategic merge patch, which it equals for the
//! objects served here) and JSON patch (RFC 6902 add/replace/remove), for PATCH requests and for
//! the patches mutating webhooks return.

use serde_json::Value;

use super::status::ApiError;

// RFC 7386: `null` deletes a key, objects merge key by key, and anything else — arrays included —
// replaces the target whole. (A real strategic merge patch merges some lists by key, such as a
// pod's containers by name; none of the kinds served here has such a list.)
fn merge_patch(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

fn json_patch(target: &mut Value, ops: &Value) -> Result<(), ApiError> {
    for op in ops
        .as_array()
        .ok_or_else(|| ApiError::bad_request("json patch is not an array"))?
    {
        let path = op["path"].as_str().unwrap_or("");
        let (parent, last) = path.rsplit_once('/').unwrap_or(("", path));
        // RFC 6901 unescaping, `~1` before `~0`: the other order would read `~01` as `/`
        // instead of `~1`. Mutating webhooks escape `/` in label and annotation keys this way.
        let last = last.replace("~1", "/").replace("~0", "~");
        let container = target
            .pointer_mut(parent)
            .ok_or_else(|| ApiError::bad_request(format!("path {path} not found")))?;
        match (op["op"].as_str(), container) {
            (Some("add" | "replace"), Value::Object(m)) => {
                m.insert(last, op["value"].clone());
            }
            (Some("add"), Value::Array(a)) if last == "-" => a.push(op["value"].clone()),
            (Some("add" | "replace"), Value::Array(a)) => {
                let i: usize = last
                    .parse()
                    .map_err(|_| ApiError::bad_request("bad index"))?;
                if op["op"] == "add" && i <= a.len() {
                    a.insert(i, op["value"].clone());
                } else if i < a.len() {
                    a[i] = op["value"].clone();
                }
            }
            (Some("remove"), Value::Object(m)) => {
                m.remove(&last);
            }
            (Some("remove"), Value::Array(a)) => {
                if let Ok(i) = last.parse::<usize>()
                    && i < a.len()
                {
                    a.remove(i);
                }
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unsupported json patch operation at {path}"
                )));
            }
        }
    }
    Ok(())
}

/// Apply a patch of the given content type (merge and strategic merge are both merge patches here).
pub fn apply_patch(target: &mut Value, content_type: &str, body: &[u8]) -> Result<(), ApiError> {
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    if content_type.starts_with("application/json-patch+json") {
        json_patch(target, &patch)
    } else {
        merge_patch(target, &patch);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_and_json_patches() {
        let mut o = json!({"a": {"b": 1, "c": 2}});
        apply_patch(
            &mut o,
            "application/merge-patch+json",
            br#"{"a":{"b":null,"d":3}}"#,
        )
        .unwrap();
        assert_eq!(o, json!({"a": {"c": 2, "d": 3}}));
        apply_patch(
            &mut o,
            "application/json-patch+json",
            br#"[{"op":"add","path":"/a/e","value":5}]"#,
        )
        .unwrap();
        assert_eq!(o["a"]["e"], 5);
    }
}
