//! Prometheus as a source (`--prometheus URL`): the same metric families a scrape gives, read from
//! an existing Prometheus over its HTTP API instead of scraping `/metrics`, over a window the user
//! chooses (`--since`, default 10 m, ending at `--until`, default now).
//!
//! Why: a two-scrape window only sees what happens while extpath runs. A Prometheus that has been
//! scraping the API server (and etcd) holds the minutes before someone ran the tool — usually the
//! minutes that matter — and costs no waiting.
//!
//! The result is shaped exactly like a two-scrape window: one [`MetricsSource`] per target
//! (`apiserver`, and `etcd` when Prometheus has its series), whose `window` is `until - since ..
//! until` and whose counter and histogram series carry `window` deltas and rates. The PromQL and
//! how instances are combined are in [`promql`] and `docs/prometheus.md`.
//!
//! Which series belong to which target is told by a label selector per target
//! (`--prometheus-apiserver-selector`, `--prometheus-etcd-selector`); the defaults match the job
//! names of kube-prometheus / the Prometheus operator (`apiserver`, `kube-etcd`), the
//! prometheus-community chart (`kubernetes-apiservers`) and plain set-ups (`kube-apiserver`,
//! `etcd`). The selector matters: extension API servers (metrics-server, …) export
//! `apiserver_request_total` too, and must not be summed into kube-apiserver's.
//!
//! Requests: `/api/v1/metadata` (family types) and, per target, `/api/v1/label/__name__/values`
//! restricted to the target and the window (which families exist); then one instant query per
//! selected family, all in flight at once (at most [`IN_FLIGHT`]), each under `--request-timeout`,
//! evaluated at the same `time`. A family whose query fails is a gap of its own; the others stand.

pub mod families;
pub mod promql;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::bundle::metrics::default_selection;
use crate::bundle::{EvidenceBundle, Gap, GapReason, MetricTarget, MetricsSource, Window};
use crate::collect::fetch::{FetchError, urlencode};
use crate::collect::sources::{Contribution, Run, SourceFuture};
use crate::collect::url_client::{ClientFiles, SetupError, UrlClient, split_url};
use crate::collect::{bounded, gap_for};
use promql::{FamilyPlan, Metadata, Sample, Selector};

/// Default `--prometheus-apiserver-selector`.
pub const DEFAULT_APISERVER_SELECTOR: &str =
    r#"job=~"apiserver|kube-apiserver|kubernetes-apiservers""#;
/// Default `--prometheus-etcd-selector`.
pub const DEFAULT_ETCD_SELECTOR: &str = r#"job=~"etcd|kube-etcd""#;
/// Default `--since`.
pub const DEFAULT_SINCE: Duration = Duration::from_secs(600);
/// Queries in flight at once: enough that a scan costs a few round trips, few enough not to load
/// a shared Prometheus.
pub const IN_FLIGHT: usize = 8;

/// Where Prometheus is, how to reach it, and what to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusOptions {
    /// `--prometheus`: the base URL (`http://prometheus:9090`, or a path prefix such as
    /// `https://host/prometheus`).
    pub url: String,
    /// `--since`: the window's length.
    pub since: Duration,
    /// `--until`: the window's end (the queries' evaluation time); now when absent.
    pub until: Option<jiff::Timestamp>,
    /// `--prometheus-bearer-token-file`.
    pub bearer_token_file: Option<PathBuf>,
    /// `--prometheus-ca`.
    pub ca: Option<PathBuf>,
    /// `--prometheus-apiserver-selector`: the matchers of kube-apiserver's series.
    pub apiserver_selector: String,
    /// `--prometheus-etcd-selector`: the matchers of etcd's series.
    pub etcd_selector: String,
}

impl PrometheusOptions {
    /// Options with the defaults for everything but the URL.
    pub fn new(url: impl Into<String>) -> Self {
        PrometheusOptions {
            url: url.into(),
            since: DEFAULT_SINCE,
            until: None,
            bearer_token_file: None,
            ca: None,
            apiserver_selector: DEFAULT_APISERVER_SELECTOR.into(),
            etcd_selector: DEFAULT_ETCD_SELECTOR.into(),
        }
    }
}

/// A ready Prometheus client.
pub struct Prometheus {
    http: UrlClient,
    base: String,
    since: Duration,
    until: Option<jiff::Timestamp>,
    apiserver: Selector,
    etcd: Selector,
}

/// Prometheus' answer envelope.
#[derive(Deserialize)]
struct Envelope<T> {
    status: String,
    #[serde(default = "Option::default")]
    data: Option<T>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct VectorData {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<Sample>,
}

/// One target to read.
struct Target<'a> {
    target: MetricTarget,
    selector: &'a Selector,
}

fn gap_id(target: MetricTarget) -> String {
    format!("metrics/{}", target.as_str())
}

impl Prometheus {
    /// Check the options and build the client.
    ///
    /// # Errors
    /// [`SetupError`] for a URL that is not http(s), a malformed selector, a zero `--since`, or a
    /// file that cannot be read.
    pub fn new(opts: &PrometheusOptions, request_timeout: Duration) -> Result<Self, SetupError> {
        split_url("--prometheus", &opts.url)?;
        if opts.since.is_zero() {
            return Err(SetupError::Value {
                flag: "--since",
                message: "must be longer than zero".into(),
            });
        }
        let selector = |flag: &'static str, text: &str| {
            Selector::parse(text).map_err(|message| SetupError::Value { flag, message })
        };
        let files = ClientFiles {
            ca: opts.ca.clone().map(|p| ("--prometheus-ca", p)),
            identity: None,
            bearer_token: opts
                .bearer_token_file
                .clone()
                .map(|p| ("--prometheus-bearer-token-file", p)),
        };
        Ok(Prometheus {
            http: UrlClient::new(&files, request_timeout)?,
            base: opts.url.trim_end_matches('/').to_string(),
            since: opts.since,
            until: opts.until,
            apiserver: selector("--prometheus-apiserver-selector", &opts.apiserver_selector)?,
            etcd: selector("--prometheus-etcd-selector", &opts.etcd_selector)?,
        })
    }

    fn api<T: DeserializeOwned>(
        &self,
        answer: Result<(u16, bytes::Bytes), FetchError>,
    ) -> Result<T, FetchError> {
        let (status, body) = answer?;
        let envelope: Option<Envelope<T>> = serde_json::from_slice(&body).ok();
        match envelope {
            Some(Envelope {
                status: s,
                data: Some(data),
                ..
            }) if s == "success" && (200..300).contains(&status) => Ok(data),
            Some(Envelope { error, .. }) if !(200..300).contains(&status) || error.is_some() => {
                Err(FetchError::Status {
                    code: status,
                    message: error.unwrap_or_else(|| "Prometheus answered an error".into()),
                })
            }
            _ if !(200..300).contains(&status) => Err(FetchError::status_with_body(status, &body)),
            _ => Err(FetchError::Decode(
                "not a Prometheus API answer (is the URL Prometheus' base URL?)".into(),
            )),
        }
    }

    async fn names(
        &self,
        selector: &Selector,
        start: &str,
        end: &str,
    ) -> Result<BTreeSet<String>, FetchError> {
        let url = format!(
            "{}/api/v1/label/__name__/values?match[]={}&start={start}&end={end}",
            self.base,
            urlencode(&format!("{{{}}}", selector.matchers)),
        );
        let names: Vec<String> = self.api(self.http.get(&url).await)?;
        Ok(names.into_iter().collect())
    }

    async fn query(
        &self,
        plan: &FamilyPlan,
        selector: &Selector,
        time: &str,
    ) -> Result<Vec<Sample>, FetchError> {
        let url = format!("{}/api/v1/query", self.base);
        let q = promql::query(plan, selector, self.since);
        let data: VectorData = self.api(
            self.http
                .post_form(&url, &[("query", q.as_str()), ("time", time)])
                .await,
        )?;
        if data.result_type != "vector" {
            return Err(FetchError::Decode(format!(
                "expected a vector, got a {}",
                data.result_type
            )));
        }
        Ok(data.result)
    }

    /// Read the API server's families and, when `etcd` is true, etcd's, over the window.
    /// Returns the sources that have series, and the gaps.
    pub async fn collect(&self, etcd: bool, deadline: Instant) -> (Vec<MetricsSource>, Vec<Gap>) {
        let end = self.until.unwrap_or_else(jiff::Timestamp::now);
        let end_ms = end.as_millisecond();
        let start_ms = end_ms - i64::try_from(self.since.as_millis()).unwrap_or(i64::MAX / 2);
        let start = jiff::Timestamp::from_millisecond(start_ms).unwrap_or(end);
        let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
        let (start_s, end_s) = (seconds(start_ms), seconds(end_ms));

        let mut targets = vec![Target {
            target: MetricTarget::Apiserver,
            selector: &self.apiserver,
        }];
        if etcd {
            targets.push(Target {
                target: MetricTarget::Etcd,
                selector: &self.etcd,
            });
        }
        let mut gaps = Vec::new();

        // Types first (shared by every target), and which families each target has.
        let metadata_url = format!("{}/api/v1/metadata", self.base);
        let metadata = bounded(deadline, async {
            self.api::<HashMap<String, Vec<Metadata>>>(self.http.get(&metadata_url).await)
        });
        let names = futures::future::join_all(
            targets
                .iter()
                .map(|t| bounded(deadline, self.names(t.selector, &start_s, &end_s))),
        );
        let (metadata, names) = tokio::join!(metadata, names);
        let metadata = match metadata {
            Ok(m) => m,
            Err(e) if e.is_unreachable() => {
                for t in &targets {
                    gaps.push(Gap::new(
                        gap_id(t.target),
                        e.gap_reason(),
                        format!("Prometheus at {}: {e}", self.base),
                    ));
                }
                return (Vec::new(), gaps);
            }
            // Some Prometheus-compatible stores keep no metadata; types are then inferred.
            Err(_) => HashMap::new(),
        };

        let selection = default_selection();
        let mut jobs = Vec::new();
        for (i, (t, names)) in targets.iter().zip(names).enumerate() {
            match names {
                Err(e) => gaps.push(Gap::new(
                    gap_id(t.target),
                    e.gap_reason(),
                    format!("Prometheus at {}: {e}", self.base),
                )),
                Ok(names) if names.is_empty() => gaps.push(Gap::new(
                    gap_id(t.target),
                    GapReason::NotServed,
                    format!(
                        "Prometheus at {} has no series matching {{{}}} between {start} and {end} \
                         (set the target's selector with --prometheus-{}-selector)",
                        self.base,
                        t.selector.matchers,
                        t.target.as_str()
                    ),
                )),
                Ok(names) => {
                    let plans = promql::plan(&names, &metadata, &selection);
                    if plans.is_empty() {
                        gaps.push(Gap::new(
                            gap_id(t.target),
                            GapReason::NotServed,
                            format!(
                                "Prometheus at {} has series matching {{{}}}, but none of the \
                                 families extpath reads",
                                self.base, t.selector.matchers
                            ),
                        ));
                    }
                    jobs.extend(plans.into_iter().map(|p| (i, p)));
                }
            }
        }

        let answers: Vec<(usize, FamilyPlan, Result<Vec<Sample>, FetchError>)> =
            futures::stream::iter(jobs)
                .map(|(i, plan)| {
                    let selector = targets[i].selector;
                    let end_s = &end_s;
                    async move {
                        let r = bounded(deadline, self.query(&plan, selector, end_s)).await;
                        (i, plan, r)
                    }
                })
                .buffer_unordered(IN_FLIGHT)
                .collect()
                .await;

        let mut families: Vec<Vec<crate::promtext::MetricFamily>> = vec![Vec::new(); targets.len()];
        let mut asked = vec![false; targets.len()];
        for (i, plan, answer) in answers {
            asked[i] = true;
            let id = format!("{}/{}", gap_id(targets[i].target), plan.name);
            match answer.and_then(|samples| {
                promql::assemble(&plan, &samples, self.since).map_err(FetchError::Decode)
            }) {
                Ok(f) if f.series.is_empty() => {}
                Ok(f) => families[i].push(f),
                Err(e) => gaps.push(gap_for(&id, &e)),
            }
        }
        let mut sources = Vec::new();
        for (i, mut fams) in families.into_iter().enumerate() {
            if !asked[i] {
                continue;
            }
            fams.sort_by(|a, b| a.name.cmp(&b.name));
            sources.push(MetricsSource {
                target: targets[i].target,
                origin: format!(
                    "{}/api/v1/query {{{}}}[{}] at {end}",
                    self.base,
                    targets[i].selector.matchers,
                    promql::range(self.since)
                ),
                scraped_at: Some(end),
                window: Some(Window { start, end }),
                families: fams,
            });
        }
        gaps.sort_by(|a, b| a.source.cmp(&b.source));
        (sources, gaps)
    }
}

/// The `metrics/prometheus` entry (`--prometheus`), sent with stage one and landed last. It reads
/// etcd's families too unless etcd is scraped directly (`--etcd-metrics-url`).
pub(in crate::collect) fn metrics<'a>(run: &'a Run<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let Some(p) = &run.prometheus else {
            return Ok(Contribution::default());
        };
        let (sources, gaps) = p.collect(run.etcd.is_none(), run.deadline).await;
        // In place of the API server's scrape, for the run's verdict on access.
        run.leave_prometheus_brought(!sources.is_empty());
        Ok(Contribution {
            evidence: Some(Box::new(move |b: &mut EvidenceBundle| {
                b.metrics.extend(sources)
            })),
            gaps,
            ..Contribution::default()
        })
    })
}
