//! etcd as a source (`--etcd-metrics-url`, with `--etcd-cert/--etcd-key/--etcd-ca` for mutual
//! TLS): its own `/metrics`, `/health`, and the list of raised alarms.
//!
//! What kube-apiserver reports about etcd (`etcd_request_duration_seconds`, `[-]etcd failed`) says
//! that storage is slow or gone, not why. etcd's own metrics say why: WAL fsync and backend commit
//! latency (a slow disk), `has_leader` and leader changes (an unstable cluster), failed proposals,
//! and database size against its quota. The alarm list names what etcd itself has declared: a
//! `NOSPACE` alarm turns every write into `etcdserver: mvcc: database space exceeded` until someone
//! compacts, defragments and disarms.
//!
//! `/metrics` goes through the same streaming parser and family selection as the API server's, and
//! is scraped twice within the same window (the rounds are `super::metrics::window`), so
//! `etcd_server_leader_changes_seen_total` and the fsync histograms carry window deltas.
//!
//! The alarm list is etcd v3's gRPC gateway `POST /v3/maintenance/alarm` with `{"action":"GET"}`
//! (a read: GET is the list action; the path is `/v3/` from etcd 3.4 on). A `--listen-metrics-urls`
//! port serves `/metrics` and `/health` but not the gateway; the alarm list is then a `not_served`
//! gap. Each raised alarm becomes a failed item `alarm NOSPACE` (or `alarm CORRUPT`) of an
//! `etcd_health` check, with the member it was raised on, so a rule can name it.
//!
//! Nothing here judges: a `{"health":"false"}` answer is evidence; only a request that got no
//! usable answer becomes a gap.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::fetch::FetchError;
use super::sources::{Contribution, Run, SourceFuture};
use super::url_client::{ClientFiles, SetupError, UrlClient, split_url};
use super::{bounded, gap_for};
use crate::bundle::metrics::default_selection;
use crate::bundle::observations::{Component, HealthEndpoint};
use crate::bundle::{EvidenceBundle, Gap, GapReason, HealthCheck, HealthCheckItem};

/// Gap source of etcd's `/metrics`.
pub const GAP_METRICS: &str = "metrics/etcd";
/// Gap source of the second etcd scrape (the window).
pub const GAP_WINDOW: &str = "metrics/etcd/window";
/// Gap source of etcd's `/health`.
pub const GAP_HEALTH: &str = "health/etcd";
/// Gap source of the alarm list.
pub const GAP_ALARMS: &str = "health/etcd/alarms";

/// Where etcd is and how to authenticate to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOptions {
    /// `--etcd-metrics-url`: `http(s)://host:port/metrics` (a URL without a path gets `/metrics`).
    pub metrics_url: String,
    /// `--etcd-cert`: client certificate for mutual TLS.
    pub cert: Option<PathBuf>,
    /// `--etcd-key`: its key.
    pub key: Option<PathBuf>,
    /// `--etcd-ca`: the CA that signed etcd's serving certificate.
    pub ca: Option<PathBuf>,
}

/// A ready etcd client.
pub struct Etcd {
    http: UrlClient,
    metrics_url: String,
    base: String,
    target: String,
}

impl Etcd {
    /// Check the options and build the client.
    ///
    /// # Errors
    /// [`SetupError`] for a URL that is not http(s), a certificate without its key (or the
    /// reverse), or a file that cannot be read.
    pub fn new(opts: &EtcdOptions, request_timeout: Duration) -> Result<Self, SetupError> {
        let (base, target) = split_url("--etcd-metrics-url", &opts.metrics_url)?;
        let path = &opts.metrics_url[base.len()..];
        let metrics_url = if path.is_empty() || path == "/" {
            format!("{base}/metrics")
        } else {
            opts.metrics_url.clone()
        };
        let identity = match (&opts.cert, &opts.key) {
            (Some(c), Some(k)) => Some((("--etcd-cert", c.clone()), ("--etcd-key", k.clone()))),
            (None, None) => None,
            (Some(_), None) => {
                return Err(SetupError::Value {
                    flag: "--etcd-cert",
                    message: "needs --etcd-key".into(),
                });
            }
            (None, Some(_)) => {
                return Err(SetupError::Value {
                    flag: "--etcd-key",
                    message: "needs --etcd-cert".into(),
                });
            }
        };
        if base.starts_with("http://") && (identity.is_some() || opts.ca.is_some()) {
            return Err(SetupError::Value {
                flag: "--etcd-metrics-url",
                message: format!(
                    "{:?} is plain http, but TLS files were given: use https://",
                    opts.metrics_url
                ),
            });
        }
        let files = ClientFiles {
            ca: opts.ca.clone().map(|p| ("--etcd-ca", p)),
            identity,
            bearer_token: None,
        };
        Ok(Etcd {
            http: UrlClient::new(&files, request_timeout)?,
            metrics_url,
            base,
            target,
        })
    }

    /// The `/metrics` URL scraped.
    pub fn metrics_url(&self) -> &str {
        &self.metrics_url
    }

    /// One scrape of `/metrics`, streamed, keeping the selected families.
    ///
    /// # Errors
    /// [`FetchError`] when the endpoint cannot be read or does not parse.
    pub async fn scrape(
        &self,
        limits: super::metrics::ScrapeLimits,
    ) -> Result<super::metrics::Scraped, FetchError> {
        let selection = default_selection();
        let mut parser = super::metrics::ScrapeParser::new(&selection, limits);
        let read = self
            .http
            .get_lines(&self.metrics_url, limits.lines(), |line| parser.line(line))
            .await;
        parser.finish(read)
    }

    /// `/health`.
    ///
    /// # Errors
    /// [`FetchError`] when no answer arrived, or the answer is not etcd's health document.
    pub async fn health(&self) -> Result<HealthCheck, FetchError> {
        let url = format!("{}/health", self.base);
        let (status, body) = self.http.get(&url).await?;
        health_check(status, &body, &self.target, &url)
    }

    /// The raised alarms, through the v3 gateway.
    ///
    /// # Errors
    /// [`FetchError`] when no answer arrived, the gateway is not served here (404), or the
    /// answer is not an alarm list.
    pub async fn alarms(&self) -> Result<HealthCheck, FetchError> {
        let url = format!("{}/v3/maintenance/alarm", self.base);
        let (status, body) = self.http.post_json(&url, &json!({"action": "GET"})).await?;
        if !(200..300).contains(&status) {
            let mut message = super::fetch::body_excerpt(&body);
            if status == 404 {
                message = format!(
                    "{url} is not served here (a --listen-metrics-urls port serves only /metrics \
                     and /health; give etcd's client URL to read alarms)"
                );
            }
            return Err(FetchError::Status {
                code: status,
                message,
            });
        }
        let v: Value =
            serde_json::from_slice(&body).map_err(|e| FetchError::Decode(e.to_string()))?;
        alarm_check(&v, &self.target, &url)
    }
}

/// etcd's `/health` answer (`{"health":"true"}`; 503 with `"false"` and, from 3.5 on, a
/// `reason`) as a health check.
///
/// # Errors
/// [`FetchError::Status`] for 401/403/404 and other answers that are not a health document.
pub fn health_check(
    status: u16,
    body: &[u8],
    target: &str,
    origin: &str,
) -> Result<HealthCheck, FetchError> {
    let parsed = serde_json::from_slice::<Value>(body).ok();
    let health = parsed
        .as_ref()
        .and_then(|v| v.get("health"))
        .and_then(Value::as_str);
    let Some(health) = health else {
        return Err(FetchError::status_with_body(status, body));
    };
    let ok = health == "true";
    let reason = parsed
        .as_ref()
        .and_then(|v| v.get("reason"))
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty());
    Ok(HealthCheck {
        endpoint: HealthEndpoint::EtcdHealth,
        ok,
        checks: Vec::new(),
        error: (!ok).then(|| {
            reason.map_or_else(
                || format!("etcd answered HTTP {status} with health false"),
                str::to_string,
            )
        }),
        target: Some(target.to_string()),
        origin: Some(origin.to_string()),
        component: Some(Component::Etcd),
    })
}

/// etcd's alarm type, as the gateway spells it (a name, or the enum number).
fn alarm_name(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_u64() {
            Some(0) => "NONE".into(),
            Some(1) => "NOSPACE".into(),
            Some(2) => "CORRUPT".into(),
            _ => n.to_string(),
        },
        // The gateway omits a zero enum.
        Value::Null => "NONE".into(),
        other => other.to_string(),
    }
}

/// etcd member ids are 64-bit and printed in hex by etcd itself (`etcdctl member list`, its
/// logs); the gateway writes them as decimal strings.
fn member_hex(v: &Value) -> Option<String> {
    let n = match v {
        Value::String(s) => s.parse::<u64>().ok()?,
        Value::Number(n) => n.as_u64()?,
        _ => return None,
    };
    Some(format!("{n:x}"))
}

/// The gateway's alarm list (`{"alarms":[{"memberID":"…","alarm":"NOSPACE"}]}`; no `alarms`
/// when none is raised) as a health check: one failed item `alarm NOSPACE` per raised alarm.
///
/// # Errors
/// [`FetchError::Decode`] when the document is not an alarm list.
pub fn alarm_check(v: &Value, target: &str, origin: &str) -> Result<HealthCheck, FetchError> {
    let obj = v
        .as_object()
        .ok_or_else(|| FetchError::Decode("alarm list: not a JSON object".into()))?;
    let alarms = match obj.get("alarms") {
        None | Some(Value::Null) => &Vec::new(),
        Some(Value::Array(a)) => a,
        Some(_) => {
            return Err(FetchError::Decode(
                "alarm list: `alarms` is not a list".into(),
            ));
        }
    };
    let mut checks = Vec::new();
    for a in alarms {
        let name = alarm_name(a.get("alarm").unwrap_or(&Value::Null));
        if name == "NONE" {
            continue;
        }
        checks.push(HealthCheckItem {
            name: format!("alarm {name}"),
            ok: false,
            reason: a
                .get("memberID")
                .and_then(member_hex)
                .map(|m| format!("raised on member {m}")),
        });
    }
    let ok = checks.is_empty();
    let error = (!ok).then(|| {
        let names: Vec<&str> = checks
            .iter()
            .map(|c| c.name.trim_start_matches("alarm "))
            .collect();
        format!("alarms raised: {}", names.join(", "))
    });
    Ok(HealthCheck {
        endpoint: HealthEndpoint::EtcdHealth,
        ok,
        checks,
        error,
        target: Some(target.to_string()),
        origin: Some(origin.to_string()),
        component: Some(Component::Etcd),
    })
}

/// The `health/etcd` entry without `--etcd-metrics-url`: the gaps that say etcd's own health and
/// alarms were not looked at.
pub(super) fn not_supplied<'a>(_: &'a Run<'a>) -> SourceFuture<'a> {
    // Not judged is not healthy: say what was not looked at, and how to look.
    let how = "pass --etcd-metrics-url (etcd's client URL, with --etcd-cert, --etcd-key and --etcd-ca for client TLS)";
    Box::pin(async move {
        Ok(Contribution {
            gaps: vec![
                Gap::new(
                    GAP_HEALTH,
                    GapReason::NotSupplied,
                    format!("etcd's own health was not checked: {how}"),
                ),
                Gap::new(
                    GAP_ALARMS,
                    GapReason::NotSupplied,
                    format!("etcd's alarms (NOSPACE, CORRUPT) were not checked: {how}"),
                ),
            ],
            ..Contribution::default()
        })
    })
}

/// The `health/etcd` entry: `/health` and the alarm list side by side, each bounded by the run's
/// deadline and each its own gap, so an etcd whose gateway is not served still has its health.
pub(super) fn checks<'a>(run: &'a Run<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let Some(e) = &run.etcd else {
            return Ok(Contribution::default());
        };
        let (health, alarms) = tokio::join!(
            bounded(run.deadline, e.health()),
            bounded(run.deadline, e.alarms())
        );
        let mut checks = Vec::new();
        let mut gaps = Vec::new();
        for (id, result) in [(GAP_HEALTH, health), (GAP_ALARMS, alarms)] {
            match result {
                Ok(check) => checks.push(check),
                Err(e) => gaps.push(gap_for(id, &e)),
            }
        }
        Ok(Contribution {
            evidence: Some(Box::new(move |b: &mut EvidenceBundle| {
                b.health_checks.extend(checks)
            })),
            gaps,
            ..Contribution::default()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nospace_alarm_is_named_with_its_member() {
        // What etcd 3.4.23's gateway answers once the quota is exceeded.
        let v: Value = serde_json::from_str(
            r#"{"header":{"cluster_id":"1","member_id":"2","revision":"18","raft_term":"2"},
                "alarms":[{"memberID":"3319814642761637952","alarm":"NOSPACE"}]}"#,
        )
        .unwrap();
        let c = alarm_check(&v, "127.0.0.1:2379", "u").unwrap();
        assert!(!c.ok);
        assert_eq!(c.endpoint, HealthEndpoint::EtcdHealth);
        assert_eq!(c.checks.len(), 1);
        assert_eq!(c.checks[0].name, "alarm NOSPACE");
        assert!(!c.checks[0].ok);
        assert_eq!(
            c.checks[0].reason.as_deref(),
            Some("raised on member 2e1259d415f2a040")
        );
        assert_eq!(c.error.as_deref(), Some("alarms raised: NOSPACE"));
        assert_eq!(c.target.as_deref(), Some("127.0.0.1:2379"));
    }

    #[test]
    fn no_alarms_is_a_passing_check_and_garbage_is_an_error() {
        let v: Value = serde_json::from_str(r#"{"header":{"revision":"1"}}"#).unwrap();
        let c = alarm_check(&v, "t", "u").unwrap();
        assert!(c.ok && c.checks.is_empty() && c.error.is_none());
        let v: Value = serde_json::from_str(r#"{"alarms":[{"memberID":1,"alarm":2}]}"#).unwrap();
        assert_eq!(
            alarm_check(&v, "t", "u").unwrap().checks[0].name,
            "alarm CORRUPT"
        );
        assert!(alarm_check(&json!([1]), "t", "u").is_err());
        assert!(alarm_check(&json!({"alarms": 3}), "t", "u").is_err());
    }

    #[test]
    fn health_answers_of_34_and_35() {
        let ok = health_check(200, br#"{"health":"true"}"#, "t", "u").unwrap();
        assert!(ok.ok && ok.error.is_none());
        let bad = health_check(503, br#"{"health":"false"}"#, "t", "u").unwrap();
        assert!(!bad.ok);
        assert_eq!(
            bad.error.as_deref(),
            Some("etcd answered HTTP 503 with health false")
        );
        let bad = health_check(
            503,
            br#"{"health":"false","reason":"ALARM NOSPACE"}"#,
            "t",
            "u",
        )
        .unwrap();
        assert_eq!(bad.error.as_deref(), Some("ALARM NOSPACE"));
        let e = health_check(404, b"404 page not found\n", "t", "u").unwrap_err();
        assert_eq!(e.gap_reason(), crate::bundle::GapReason::NotServed);
    }

    #[test]
    fn options_are_checked() {
        let opts = |url: &str, cert: bool, key: bool| EtcdOptions {
            metrics_url: url.into(),
            cert: cert.then(|| "c.pem".into()),
            key: key.then(|| "k.pem".into()),
            ca: None,
        };
        let t = Duration::from_secs(1);
        let e = Etcd::new(&opts("https://e:2379", true, false), t)
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "--etcd-cert: needs --etcd-key");
        let e = Etcd::new(&opts("http://e:2379", true, true), t)
            .err()
            .unwrap();
        assert!(e.to_string().contains("plain http"), "{e}");
        let e = Etcd::new(&opts("e:2379", false, false), t).err().unwrap();
        assert!(e.to_string().starts_with("--etcd-metrics-url"), "{e}");
        let ok = Etcd::new(&opts("http://e:2381", false, false), t).unwrap();
        assert_eq!(ok.metrics_url(), "http://e:2381/metrics");
        let ok = Etcd::new(&opts("http://e:2381/metrics", false, false), t).unwrap();
        assert_eq!(ok.metrics_url(), "http://e:2381/metrics");
    }
}
