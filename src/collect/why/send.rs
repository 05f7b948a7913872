//! Sending the one request `why` reproduces, and recording what came back as a [`Probe`]: status,
//! latency, `Retry-After`, the APF headers, `Audit-Id`, the `Status` body and its causes or the
//! plain body (the aggregator's `service unavailable`, `error trying to reach service: …`), or the
//! transport error when nothing came back.
//!
//! A watch is read for a short time only: its events are counted (bookmarks apart), an in-stream
//! `ERROR` event is kept (410 `Expired`, `too old resource version`), and how the stream ended is
//! recorded — closed by the server, broken, or still open when the deadline came (not a failure:
//! a quiet watch is a healthy one).
//!
//! Writes are sent only with `dryRun=All`; [`super::target::Target`] adds it and [`send`] refuses a
//! write target without it, so nothing `why` sends is ever stored.

use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::Value;

use super::target::{Addressed, Method, Target};
use crate::bundle::probes::{ClientTool, ProbeKind, WatchEnd};
use crate::bundle::{Probe, ProbeOrigin, Rung, StatusBody, WatchOutcome};
use crate::collect::fetch::{FetchError, Fetcher, LineSplitter, error_chain, headers_of};

/// Bounds of the reproduction.
#[derive(Debug, Clone, Copy)]
pub struct SendOptions {
    /// Until the response headers (and, for non-watch requests, the whole body) arrive.
    pub request_timeout: Duration,
    /// How long a watch stream is read.
    pub watch_for: Duration,
}

/// The largest non-Status error body kept (the same bound as the collector's probes).
const BODY_LIMIT: usize = 2048;

fn new_probe(target: &Target, user: Option<&str>) -> Probe {
    let mut p = Probe::new(ProbeOrigin {
        kind: ProbeKind::Probe,
        tool: ClientTool::Extpath,
        files: Vec::new(),
    });
    p.method = Some(target.method.http().to_string());
    p.path = Some(target.path.clone());
    p.user = user.map(str::to_string);
    // The deepest rung the request can reach: a watch is the long-running branch, and a dry-run
    // write goes through admission (webhooks run on dry runs that declare sideEffects None or
    // NoneOnDryRun) but never to storage, so admission is as far as it proves anything.
    p.rung = Some(match (&target.addressed, target.method) {
        (_, Method::Watch) => Rung::Watch,
        (_, m) if m.is_write() => Rung::Admission,
        (Addressed::Discovery { .. }, _) => Rung::Discovery,
        _ => Rung::Verb,
    });
    p.at = Some(jiff::Timestamp::now());
    p.reproduced = true;
    p
}

fn round_ms(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

fn timed_out(d: Duration) -> String {
    format!("the client timed out: no response within {}", humantime(d))
}

/// `10s`, `1.5s`, `250ms`: how kubectl writes a duration.
pub fn humantime(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// A non-2xx body is kept as a Status when it is one; otherwise as text, because the aggregator's
/// own failures are plain text (`service unavailable`, `error trying to reach service: …`,
/// REFERENCE §2.2) and those words are what tells an aggregation 503 from any other.
fn keep_error_body(p: &mut Probe, status: u16, body: &[u8]) {
    if (200..300).contains(&status) {
        return;
    }
    match serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| StatusBody::from_json(&v))
    {
        Some(s) => p.status_body = Some(s),
        None => {
            let text = String::from_utf8_lossy(body);
            p.body = Some(text.chars().take(BODY_LIMIT).collect());
        }
    }
}

/// Send `target` with `client` (the user's credentials, impersonation included) and record it.
///
/// # Errors
/// Never for what the server answered (any status is evidence); only a write target without
/// `dryRun=All` is refused, before anything is sent.
pub async fn send(
    client: &kube::Client,
    target: &Target,
    body: Option<Vec<u8>>,
    user: Option<&str>,
    opts: SendOptions,
) -> Result<Probe, String> {
    let query = target.path.split_once('?').map_or("", |(_, q)| q);
    if target.method.is_write() && !super::target::query_has(query, "dryRun", "All") {
        return Err(format!(
            "refusing to send {} {} without dryRun=All",
            target.method.http(),
            target.path
        ));
    }
    let mut p = new_probe(target, user);
    if target.method == Method::Watch {
        watch(client, target, opts, &mut p).await;
        return Ok(p);
    }
    let fetcher = Fetcher::new(client.clone(), opts.request_timeout);
    match fetcher
        .request(target.method.http(), &target.path, body)
        .await
    {
        Ok(r) => {
            p.status = Some(r.status);
            p.latency_ms = Some(round_ms(r.latency_ms));
            p.headers = r.headers.clone();
            keep_error_body(&mut p, r.status, &r.body);
        }
        Err(FetchError::Timeout(d)) => p.error = Some(timed_out(d)),
        Err(e) => p.error = Some(e.to_string()),
    }
    Ok(p)
}

/// Open the watch, read it for `opts.watch_for`, and fill `p`.
async fn watch(client: &kube::Client, target: &Target, opts: SendOptions, p: &mut Probe) {
    let req = match http::Request::get(&target.path)
        .header("accept", "application/json")
        .body(kube::client::Body::from(Vec::new()))
    {
        Ok(r) => r,
        Err(e) => {
            p.error = Some(e.to_string());
            return;
        }
    };
    let started = Instant::now();
    // Only the headers are bounded by the request timeout: a watch's body never ends by itself,
    // and `watch_for` bounds how long it is read.
    let res = match tokio::time::timeout(opts.request_timeout, client.send(req)).await {
        Err(_) => {
            p.error = Some(timed_out(opts.request_timeout));
            return;
        }
        Ok(Err(e)) => {
            p.error = Some(error_chain(&e));
            return;
        }
        Ok(Ok(r)) => r,
    };
    let status = res.status().as_u16();
    p.status = Some(status);
    p.latency_ms = Some(round_ms(started.elapsed().as_secs_f64() * 1000.0));
    p.headers = headers_of(res.headers());
    let mut body = res.into_body();
    // A refused watch (403, 410 for a too-old resourceVersion, 503 from the aggregator) answers
    // with an ordinary finite body, read like any other error.
    if !(200..300).contains(&status) {
        let bytes = tokio::time::timeout(opts.request_timeout, body.collect())
            .await
            .ok()
            .and_then(Result::ok)
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        keep_error_body(p, status, &bytes);
        return;
    }
    let mut seen = WatchOutcome::default();
    let mut lines = LineSplitter::default();
    let deadline = tokio::time::Instant::now() + opts.watch_for;
    let mut on_line = |line: &str| -> Result<(), FetchError> {
        read_event(line, &mut seen);
        Ok(())
    };
    let (end, detail) = loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            // Still open when the deadline came: what a quiet, healthy watch looks like.
            Err(_) => {
                break (
                    WatchEnd::Unknown,
                    format!(
                        "still open after {} (the stream was read for that long)",
                        humantime(opts.watch_for)
                    ),
                );
            }
            Ok(None) => {
                let _ = lines.finish(&mut on_line);
                break (
                    WatchEnd::Closed,
                    format!(
                        "the server closed the stream after {:.1}s",
                        started.elapsed().as_secs_f64()
                    ),
                );
            }
            Ok(Some(Err(e))) => break (WatchEnd::Broken, error_chain(&e)),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data()
                    && let Err(e) = lines.push(&data, &mut on_line)
                {
                    break (WatchEnd::Broken, e.to_string());
                }
            }
        }
    };
    let mut outcome = seen;
    outcome.end = end;
    outcome.end_detail = Some(detail);
    outcome.duration_seconds = Some((started.elapsed().as_secs_f64() * 10.0).round() / 10.0);
    p.watch = Some(outcome);
}

/// Count one line of a watch stream (`{"type": …, "object": …}`).
fn read_event(line: &str, outcome: &mut WatchOutcome) {
    let line = line.trim();
    if line.is_empty() {
        return;
    }
    let Ok(ev) = serde_json::from_str::<Value>(line) else {
        return;
    };
    match ev.get("type").and_then(Value::as_str) {
        // The API server reports an expired resourceVersion inside a started stream as an ERROR
        // event carrying a 410 `Expired` Status, not as an HTTP status: the stream itself was 200.
        Some("ERROR") => {
            outcome.error_event = ev.get("object").and_then(StatusBody::from_json);
        }
        // Bookmarks carry only a resourceVersion (the server's progress notes, sent when the
        // client asked with allowWatchBookmarks); counted apart so a stream of bookmarks alone is
        // not mistaken for changes.
        Some("BOOKMARK") => {
            outcome.events += 1;
            outcome.bookmarks += 1;
        }
        Some(_) => outcome.events += 1,
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_events_are_counted_and_errors_kept() {
        let mut o = WatchOutcome::default();
        read_event(r#"{"type":"ADDED","object":{"kind":"ConfigMap"}}"#, &mut o);
        read_event(
            r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap"}}"#,
            &mut o,
        );
        read_event("", &mut o);
        read_event(
            r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#,
            &mut o,
        );
        assert_eq!((o.events, o.bookmarks), (2, 1));
        let e = o.error_event.unwrap();
        assert_eq!((e.reason.as_str(), e.code), ("Expired", Some(410)));
    }

    #[test]
    fn error_bodies_are_kept_as_status_or_text() {
        let t = Target::parse("GET", "/apis/wardle.example.com/v1alpha1/flunders").unwrap();
        let mut p = new_probe(&t, Some("alice"));
        assert_eq!(p.rung, Some(Rung::Verb));
        keep_error_body(&mut p, 503, b"service unavailable\n");
        assert_eq!(p.body.as_deref(), Some("service unavailable\n"));
        let mut p = new_probe(&t, None);
        keep_error_body(
            &mut p,
            403,
            br#"{"kind":"Status","status":"Failure","message":"flunders.wardle.example.com is forbidden","reason":"Forbidden","code":403}"#,
        );
        assert_eq!(p.status_body.unwrap().reason, "Forbidden");
        let mut p = new_probe(&t, None);
        keep_error_body(&mut p, 200, b"{}");
        assert!(p.body.is_none() && p.status_body.is_none());
        assert_eq!(humantime(Duration::from_millis(1500)), "1.5s");
        assert_eq!(humantime(Duration::from_secs(10)), "10s");
        assert_eq!(humantime(Duration::from_millis(250)), "250ms");
    }

    #[tokio::test]
    async fn a_write_without_dry_run_is_never_sent() {
        // A client whose transport fails the test if anything reaches it.
        let transport = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            panic!("a write without dryRun=All reached the transport");
            #[allow(unreachable_code)]
            Ok::<http::Response<kube::client::Body>, std::convert::Infallible>(http::Response::new(
                kube::client::Body::empty(),
            ))
        });
        let client = kube::Client::new(transport, "default");
        let mut t = Target::new(Method::DryRunCreate, "/api/v1/namespaces/a/configmaps").unwrap();
        t.path = "/api/v1/namespaces/a/configmaps".into();
        let opts = SendOptions {
            request_timeout: Duration::from_secs(1),
            watch_for: Duration::from_secs(1),
        };
        let err = send(&client, &t, Some(b"{}".to_vec()), None, opts)
            .await
            .unwrap_err();
        assert!(err.contains("without dryRun=All"), "{err}");
    }
}
