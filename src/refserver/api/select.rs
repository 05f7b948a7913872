//! Label and field selectors of list and watch requests (`labelSelector=app=x,tier!=db,env in (a,b)`,
//! `fieldSelector=metadata.name=x`), as apimachinery parses them, for the subset clients send.

use serde_json::Value;

use super::super::request::RequestInfo;
use super::super::status::ApiError;

/// A parsed label selector requirement.
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

fn parse_selector(s: &str) -> Result<Vec<Requirement>, ApiError> {
    let mut out = Vec::new();
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let set = |rest: &str| -> Vec<String> {
            rest.trim()
                .trim_start_matches('(')
                .trim_end_matches(')')
                .split(',')
                .map(|v| v.trim().to_string())
                .collect()
        };
        let r = if let Some((k, v)) = p.split_once("!=") {
            Requirement::NotEq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once("==") {
            Requirement::Eq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once('=') {
            Requirement::Eq(k.trim().into(), v.trim().into())
        } else if let Some((k, v)) = p.split_once(" notin ") {
            Requirement::NotIn(k.trim().into(), set(v))
        } else if let Some((k, v)) = p.split_once(" in ") {
            Requirement::In(k.trim().into(), set(v))
        } else if let Some(k) = p.strip_prefix('!') {
            Requirement::NotExists(k.trim().into())
        } else if p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        {
            Requirement::Exists(p.into())
        } else {
            return Err(ApiError::bad_request(format!(
                "unable to parse requirement: {p}"
            )));
        };
        out.push(r);
    }
    Ok(out)
}

fn selector_matches(reqs: &[Requirement], labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    reqs.iter().all(|r| match r {
        Requirement::Eq(k, v) => get(k) == Some(v.as_str()),
        Requirement::NotEq(k, v) => get(k) != Some(v.as_str()),
        Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
        Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
        Requirement::Exists(k) => get(k).is_some(),
        Requirement::NotExists(k) => get(k).is_none(),
    })
}

/// Label and field selector filter of a list or watch.
pub fn filter(
    info: &RequestInfo,
) -> Result<impl Fn(&Value) -> bool + Send + Sync + 'static, ApiError> {
    let labels = parse_selector(info.param("labelSelector").unwrap_or(""))?;
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
        selector_matches(
            &labels,
            o.pointer("/metadata/labels").unwrap_or(&Value::Null),
        ) && fields.iter().all(|(k, v, eq)| {
            let ptr = format!("/{}", k.replace('.', "/"));
            (o.pointer(&ptr).and_then(Value::as_str).unwrap_or("") == v) == *eq
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_match_like_apimachinery() {
        let reqs = parse_selector("app=x,tier!=db,env in (a, b),!legacy").unwrap();
        assert!(selector_matches(&reqs, &json!({"app": "x", "env": "b"})));
        assert!(!selector_matches(&reqs, &json!({"app": "x", "env": "c"})));
    }
}
