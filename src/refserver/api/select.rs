//! Label and field selectors of list and watch requests (`labelSelector=app=x,tier!=db,env in (a,b)`,
//! `fieldSelector=metadata.name=x`), as apimachinery parses them, for the subset clients send. Label
//! selectors are `crate::semantics::label_selector` (one implementation, held to
//! `tests/semantics/label_selector.yaml`); field selectors are the equality subset.

use serde_json::Value;

use super::super::request::RequestInfo;
use super::super::status::ApiError;
use crate::semantics::label_selector;

/// Label and field selector filter of a list or watch.
pub fn filter(
    info: &RequestInfo,
) -> Result<impl Fn(&Value) -> bool + Send + Sync + 'static, ApiError> {
    let labels = label_selector::parse(info.param("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let fields: Vec<(String, String, bool)> = info
        .param("fieldSelector")
        .unwrap_or("")
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once("!=") {
            Some((k, v)) => (k.to_string(), v.to_string(), false),
            None => {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (k.to_string(), v.trim_start_matches('=').to_string(), true)
            }
        })
        .collect();
    Ok(move |o: &Value| {
        let own = o.pointer("/metadata/labels").unwrap_or(&Value::Null);
        label_selector::matches_all(&labels, |k| own.get(k).and_then(Value::as_str))
            && fields.iter().all(|(k, v, eq)| {
                let ptr = format!("/{}", k.replace('.', "/"));
                (o.pointer(&ptr).and_then(Value::as_str).unwrap_or("") == v) == *eq
            })
    })
}
