//! `/readyz?verbose` and `/livez?verbose`.
//!
//! An unhealthy answer is evidence, not a failure to collect: the 500 body with `[-]etcd failed:
//! reason withheld` is exactly what the Storage rules read. Only a request that got no answer at all
//! becomes a gap.

use super::sources::{Evidence, EvidenceFuture};
use super::{FetchError, Fetcher};
use crate::bundle::observations::{Component, HealthEndpoint};
use crate::bundle::{EvidenceBundle, HealthCheck, HealthCheckItem};

/// Parse verbose health output (`[+]name ok` / `[-]name failed: reason` lines, then
/// `readyz check passed|failed`).
pub fn parse_verbose(endpoint: HealthEndpoint, status: u16, body: &str) -> HealthCheck {
    let mut checks = Vec::new();
    let mut summary_ok = None;
    for line in body.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("[+]") {
            let name = rest.trim_end_matches(" ok").trim().to_string();
            checks.push(HealthCheckItem {
                name,
                ok: true,
                reason: None,
            });
        } else if let Some(rest) = line.strip_prefix("[-]") {
            let (name, reason) = match rest.split_once(" failed") {
                Some((n, r)) => (
                    n.trim().to_string(),
                    Some(r.trim_start_matches(':').trim().to_string()).filter(|s| !s.is_empty()),
                ),
                None => (rest.trim().to_string(), None),
            };
            checks.push(HealthCheckItem {
                name,
                ok: false,
                reason,
            });
        } else if line.ends_with("check passed") {
            summary_ok = Some(true);
        } else if line.ends_with("check failed") {
            summary_ok = Some(false);
        }
    }
    // The closing `… check passed|failed` line is the server's own verdict; the status code (500
    // when a check fails) and the check lines only stand in when a capture cut it off.
    let ok = summary_ok.unwrap_or((200..300).contains(&status) && checks.iter().all(|c| c.ok));
    HealthCheck {
        endpoint,
        ok,
        error: (!ok && checks.is_empty()).then(|| super::fetch::body_excerpt(body.as_bytes())),
        checks,
        target: None,
        origin: None,
        // Asked of the API server extpath connected to.
        component: Some(Component::KubeApiserver),
    }
}

/// Whether a body is a verbose health report: a `[+]`/`[-]` check line, or the endpoint's
/// `… check passed|failed` line.
fn is_health_report(body: &str) -> bool {
    body.lines().map(str::trim).any(|l| {
        l.starts_with("[+]")
            || l.starts_with("[-]")
            || l.ends_with("check passed")
            || l.ends_with("check failed")
    })
}

fn fetch_health<'a>(
    f: &'a Fetcher,
    endpoint: HealthEndpoint,
    path: &'static str,
) -> EvidenceFuture<'a> {
    Box::pin(async move {
        let res = f.request(http::Method::GET, path, None).await?;
        // Failing checks answer 500 with the report, which is evidence. 401/403 mean the report
        // was not readable at all (every user may read /readyz and /livez through the default
        // `system:public-info-viewer` binding, so a 403 says that binding was changed), and 404 a
        // server without the endpoint: gaps, not health.
        if matches!(res.status, 401 | 403 | 404) {
            return Err(super::fetch::status_error(&res));
        }
        let text = res.text();
        if !is_health_report(&text) {
            // An HTML login page or any other 200 is not a health report: absence of evidence
            // is a gap, never "passes (0 checks)".
            return Err(FetchError::Decode(format!(
                "{path} answered {} with no health checks and no `check passed|failed` line: {}",
                res.status,
                super::fetch::body_excerpt(text.as_bytes())
            )));
        }
        let mut check = parse_verbose(endpoint, res.status, &text);
        check.origin = Some(path.to_string());
        let apply: Evidence = Box::new(move |b: &mut EvidenceBundle| b.health_checks.push(check));
        Ok(apply)
    })
}

/// `/readyz?verbose`.
pub fn fetch_readyz(f: &Fetcher) -> EvidenceFuture<'_> {
    fetch_health(f, HealthEndpoint::ApiserverReadyz, "/readyz?verbose")
}

/// `/livez?verbose`.
pub fn fetch_livez(f: &Fetcher) -> EvidenceFuture<'_> {
    fetch_health(f, HealthEndpoint::ApiserverLivez, "/livez?verbose")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_etcd_check_is_read() {
        let body = "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n";
        let c = parse_verbose(HealthEndpoint::ApiserverReadyz, 500, body);
        assert!(!c.ok);
        let etcd = c.checks.iter().find(|c| c.name == "etcd").unwrap();
        assert!(!etcd.ok);
        assert_eq!(etcd.reason.as_deref(), Some("reason withheld"));
        assert!(
            parse_verbose(
                HealthEndpoint::ApiserverReadyz,
                200,
                "[+]ping ok\nreadyz check passed\n"
            )
            .ok
        );
    }
}
