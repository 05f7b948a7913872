//! Health endpoints → `health_checks`: `/readyz?verbose`, `/livez?verbose`, `/healthz?verbose`
//! (also as kubectl wraps a failing one: `an error on the server ("[+]ping ok\n…[-]etcd failed:
//! reason withheld\n…readyz check failed")`), `etcdctl endpoint health`, and etcd's `/health` JSON.
//!
//! Which endpoint a verbose listing came from is read from its last line (`readyz check passed`,
//! `livez check failed`); a listing without one is taken as readyz, the endpoint people run.

use serde_json::Value;

use crate::bundle::observations::{Component, HealthEndpoint, health_owner};
use crate::bundle::{Gap, GapReason, HealthCheck, HealthCheckItem};

fn endpoint_word(e: HealthEndpoint) -> &'static str {
    match e {
        HealthEndpoint::ApiserverReadyz => "readyz",
        HealthEndpoint::ApiserverLivez => "livez",
        HealthEndpoint::ApiserverHealthz => "healthz",
        HealthEndpoint::EtcdHealth => "health",
    }
}

use super::state::{FileCtx, FileError, Importer, Yield};
use super::status_text::unwrap_server_error;
use super::trailer::parse_trailer;

/// Whether the lines are health output (detection).
pub(crate) fn looks_like(lines: &[&str]) -> bool {
    let first = lines.first().copied().unwrap_or_default();
    if first.contains("an error on the server (\"[+]")
        || first.contains("an error on the server (\"[-]")
    {
        return true;
    }
    let items = lines.iter().filter(|l| is_item(l) || is_verdict(l)).count();
    let others = lines
        .iter()
        .filter(|l| !(is_item(l) || is_verdict(l) || parse_trailer(l).is_some()))
        .count();
    // A saved listing may come with a few other lines (a prompt, a kubectl warning); four
    // check lines for each other line keeps a log that quotes a check or two from passing for one.
    if items > 0 && items >= others * 4 {
        return true;
    }
    lines.iter().any(|l| etcdctl_line(l).is_some())
        && lines.iter().all(|l| {
            etcdctl_line(l).is_some() || l.starts_with("Error: ") || parse_trailer(l).is_some()
        })
}

/// A verbose check line: `[+]etcd ok` or `[-]etcd failed: reason withheld`.
// The API server never puts a failing check's error in the response (`healthz.go` prints
// `reason withheld` and logs the error): the listing says which check failed, the kube-apiserver
// log says why (capture 13: `[-]etcd failed: reason withheld` while etcd was frozen).
fn is_item(l: &str) -> bool {
    l.starts_with("[+]") || l.starts_with("[-]")
}

/// The last line of a verbose listing, which names the endpoint.
fn is_verdict(l: &str) -> bool {
    let l = l.trim();
    ["readyz", "livez", "healthz"]
        .iter()
        .any(|e| l == format!("{e} check passed") || l == format!("{e} check failed"))
}

/// `127.0.0.1:2379 is healthy: successfully committed proposal: took = 1.2ms`.
fn etcdctl_line(l: &str) -> Option<(String, bool, String)> {
    let (target, rest) = l.trim().split_once(" is ")?;
    let (state, detail) = rest.split_once(": ")?;
    let ok = match state {
        "healthy" => true,
        "unhealthy" => false,
        _ => return None,
    };
    (!target.contains(' ')).then(|| (target.to_string(), ok, detail.to_string()))
}

/// Read health output.
pub(crate) fn read(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        return read_etcd_json(imp, file, trimmed);
    }
    let lines: Vec<&str> = trimmed.lines().map(str::trim_end).collect();
    // `etcdctl endpoint health` prints one line per endpoint: one health check each.
    if lines.iter().any(|l| etcdctl_line(l).is_some()) {
        for l in &lines {
            if let Some((target, ok, detail)) = etcdctl_line(l) {
                imp.bundle.health_checks.push(HealthCheck {
                    endpoint: HealthEndpoint::EtcdHealth,
                    ok,
                    checks: Vec::new(),
                    error: (!ok).then_some(detail),
                    target: Some(target),
                    origin: Some(file.shown.clone()),
                    component: Some(Component::Etcd),
                });
            }
        }
        return Ok(Yield::Used);
    }
    // A failing readyz reaches kubectl as a 500 whose body it quotes with escaped newlines.
    let (listing, wrapped_error) = match lines.first().and_then(|l| unwrap_server_error(l)) {
        Some(inner) => (inner, Some(lines[0].to_string())),
        None if lines
            .first()
            .is_some_and(|l| l.contains("an error on the server (\"")) =>
        {
            return Err(FileError::at(
                1,
                "kubectl's `an error on the server (\"…\")` around the health output is cut short",
            ));
        }
        None => (lines.join("\n"), None),
    };
    let mut checks = Vec::new();
    let mut endpoint = HealthEndpoint::ApiserverReadyz;
    let mut verdict: Option<bool> = None;
    for (i, l) in listing.lines().enumerate() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("[+]") {
            let name = rest.strip_suffix(" ok").unwrap_or(rest);
            checks.push(HealthCheckItem {
                name: name.to_string(),
                ok: true,
                reason: None,
            });
        } else if let Some(rest) = l.strip_prefix("[-]") {
            // The reason is nearly always `reason withheld`: healthz.go's `handleRootHealth` keeps
            // the cause out of the HTTP answer and only logs it, so the API server's log has the
            // detail.
            let (name, reason) = match rest.split_once(" failed") {
                Some((n, r)) => (n, r.trim_start_matches(':').trim()),
                None => (rest, ""),
            };
            checks.push(HealthCheckItem {
                name: name.to_string(),
                ok: false,
                reason: (!reason.is_empty()).then(|| reason.to_string()),
            });
        } else if is_verdict(l) {
            endpoint = match l.split_whitespace().next() {
                Some("livez") => HealthEndpoint::ApiserverLivez,
                Some("healthz") => HealthEndpoint::ApiserverHealthz,
                _ => HealthEndpoint::ApiserverReadyz,
            };
            verdict = Some(l.ends_with("passed"));
        } else if l.is_empty() || parse_trailer(l).is_some() {
            continue;
        } else {
            return Err(FileError::at(
                i + 1,
                format!("unexpected line in health output: {l:?}"),
            ));
        }
    }
    if checks.is_empty() && verdict.is_none() {
        return Err(FileError::whole("health output without any check"));
    }
    let ok = verdict.unwrap_or_else(|| checks.iter().all(|c| c.ok));
    let error = if ok {
        None
    } else {
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.name.as_str())
            .collect();
        Some(match wrapped_error {
            Some(_) => format!(
                "HTTP 500 from the endpoint; failed checks: {}",
                failed.join(", ")
            ),
            None => format!("failed checks: {}", failed.join(", ")),
        })
    };
    // Whose listing it is decides which rules may read it: kube-apiserver's `[-]etcd` is a
    // Storage fault, an extension server's is its own backend's. Never assumed.
    let component = health_owner(&checks);
    if component == Component::Unknown {
        imp.bundle.gaps.push(Gap::new(
            format!("file:{}", file.shown),
            GapReason::Skipped,
            format!(
                "a {} listing whose checks ({}) do not say which server answered — kube-apiserver, \
                 an extension API server or etcd: kept, but not judged",
                endpoint_word(endpoint),
                checks
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    imp.bundle.health_checks.push(HealthCheck {
        endpoint,
        ok,
        checks,
        error,
        target: None,
        origin: Some(file.shown.clone()),
        component: Some(component),
    });
    Ok(Yield::Used)
}

/// etcd's own `/health` answer: `{"health":"true"}`, or `"false"` with a reason (3.5+).
fn read_etcd_json(imp: &mut Importer, file: &FileCtx, text: &str) -> Result<Yield, FileError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| FileError::at(e.line(), format!("malformed etcd health JSON: {e}")))?;
    let health = v.get("health").and_then(Value::as_str).unwrap_or_default();
    let ok = health == "true";
    imp.bundle.health_checks.push(HealthCheck {
        endpoint: HealthEndpoint::EtcdHealth,
        component: Some(Component::Etcd),
        ok,
        checks: Vec::new(),
        error: (!ok).then(|| {
            v.get("reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
                .unwrap_or("etcd reported health false")
                .to_string()
        }),
        target: None,
        origin: Some(file.shown.clone()),
    });
    Ok(Yield::Used)
}
