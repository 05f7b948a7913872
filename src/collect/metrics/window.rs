//! The direct scrapes of a collection — kube-apiserver's `/metrics` and, when asked, etcd's — taken
//! together, twice, a window apart, and turned into metrics sources and gaps.
//!
//! Both targets are scraped in the same round so that their windows cover the same period: an
//! fsync spike in etcd's window and a latency climb in the API server's are about the same minutes.
//! Each scrape keeps the time it finished, so each window is its own target's measured span.
//! When `--prometheus` replaces the API server scrape, only etcd (if given) is scraped here.
//!
//! A target whose first scrape failed is not scraped again (its gap is already recorded); a target
//! whose second scrape failed keeps its first, as cumulative history, with a `…/window` gap.

use tokio::time::Instant;

use super::scrape::{self, ScrapeLimits, Scraped};
use crate::bundle::{EvidenceBundle, Gap, GapReason, MetricTarget, MetricsSource};
use crate::collect::etcd::{self, Etcd};
use crate::collect::fetch::FetchError;
use crate::collect::sources::{Contribution, FirstScrape, Run, SourceFuture};
use crate::collect::{Fetcher, bounded, gap_for, wait_until};
use crate::promtext::MetricFamily;

/// One successful scrape.
pub struct Scrape {
    /// The selected families.
    pub families: Vec<MetricFamily>,
    /// Why the body was cut short, when a limit cut it (the families are those before the cut).
    pub cut: Option<String>,
    /// When the body had been read.
    pub at: jiff::Timestamp,
}

/// One round of scrapes; `None` for a target not scraped in this round.
#[derive(Default)]
pub struct Round {
    /// kube-apiserver `/metrics`.
    pub apiserver: Option<Result<Scrape, FetchError>>,
    /// etcd `/metrics`.
    pub etcd: Option<Result<Scrape, FetchError>>,
}

impl Round {
    /// Whether any target answered (a second round is worth taking).
    pub fn any_ok(&self) -> bool {
        matches!(self.apiserver, Some(Ok(_))) || matches!(self.etcd, Some(Ok(_)))
    }

    /// Whether the API server's `/metrics` answered.
    pub fn apiserver_ok(&self) -> bool {
        matches!(self.apiserver, Some(Ok(_)))
    }
}

/// What to scrape.
pub struct Scrapes<'a> {
    /// The API server's client.
    pub fetcher: &'a Fetcher,
    /// Scrape the API server (false when Prometheus replaces it).
    pub apiserver: bool,
    /// etcd, when `--etcd-metrics-url` was given.
    pub etcd: Option<&'a Etcd>,
    /// `--max-scrape-bytes` and `--max-series`.
    pub limits: ScrapeLimits,
}

async fn timed(
    fut: impl std::future::Future<Output = Result<Scraped, FetchError>>,
) -> Result<Scrape, FetchError> {
    let Scraped { families, cut } = fut.await?;
    Ok(Scrape {
        families,
        cut,
        at: jiff::Timestamp::now(),
    })
}

impl Scrapes<'_> {
    /// Scrape the API server and/or etcd, as asked, concurrently.
    async fn round(&self, apiserver: bool, etcd: bool, deadline: Instant) -> Round {
        let a = async {
            if apiserver {
                Some(bounded(deadline, timed(scrape::scrape(self.fetcher, self.limits))).await)
            } else {
                None
            }
        };
        let e = async {
            match self.etcd {
                Some(client) if etcd => {
                    Some(bounded(deadline, timed(client.scrape(self.limits))).await)
                }
                _ => None,
            }
        };
        let (apiserver, etcd) = tokio::join!(a, e);
        Round { apiserver, etcd }
    }

    /// The first round: every configured target.
    pub async fn first(&self, deadline: Instant) -> Round {
        self.round(self.apiserver, self.etcd.is_some(), deadline)
            .await
    }

    /// The second round: the targets that answered the first.
    pub async fn second(&self, first: &Round, deadline: Instant) -> Round {
        self.round(
            matches!(first.apiserver, Some(Ok(_))),
            matches!(first.etcd, Some(Ok(_))),
            deadline,
        )
        .await
    }
}

/// Where each target's metrics were read, for the sources' `origin`.
pub struct Origins<'a> {
    /// The API server's `/metrics` URL.
    pub apiserver: String,
    /// etcd's `/metrics` URL.
    pub etcd: Option<&'a str>,
}

fn finish_one(
    target: MetricTarget,
    origin: &str,
    gap_metrics: &str,
    gap_window: &str,
    first: Option<Result<Scrape, FetchError>>,
    second: Option<Result<Scrape, FetchError>>,
    out: &mut (Vec<MetricsSource>, Vec<Gap>),
) {
    let cut = |s: &Option<Result<Scrape, FetchError>>| match s {
        Some(Ok(Scrape { cut: Some(why), .. })) => Some(why.clone()),
        _ => None,
    };
    if let Some(why) = cut(&first).or_else(|| cut(&second)) {
        out.1.push(Gap::new(
            gap_metrics,
            GapReason::Error,
            format!("the scrape was cut short: {why}; the series read before the cut are kept"),
        ));
    }
    match first {
        None => {}
        Some(Err(e)) => out.1.push(gap_for(gap_metrics, &e)),
        Some(Ok(one)) => {
            let source = match second {
                Some(Ok(two)) => {
                    scrape::windowed(target, origin, one.families, two.families, one.at, two.at)
                }
                Some(Err(e)) => {
                    out.1.push(Gap::new(
                        gap_window,
                        e.gap_reason(),
                        format!("second scrape failed ({e}); counters are cumulative history only"),
                    ));
                    scrape::single(target, origin, one.families, one.at)
                }
                None => scrape::single(target, origin, one.families, one.at),
            };
            out.0.push(source);
        }
    }
}

/// The sources and gaps of the rounds taken (API server first, then etcd).
pub fn finish(
    first: Round,
    second: Option<Round>,
    origins: &Origins<'_>,
) -> (Vec<MetricsSource>, Vec<Gap>) {
    let mut out = (Vec::new(), Vec::new());
    let second = second.unwrap_or_default();
    finish_one(
        MetricTarget::Apiserver,
        &origins.apiserver,
        "metrics/apiserver",
        "metrics/apiserver/window",
        first.apiserver,
        second.apiserver,
        &mut out,
    );
    finish_one(
        MetricTarget::Etcd,
        origins.etcd.unwrap_or_default(),
        etcd::GAP_METRICS,
        etcd::GAP_WINDOW,
        first.etcd,
        second.etcd,
        &mut out,
    );
    out
}

/// The targets these options scrape directly: the API server unless Prometheus replaces it, and
/// etcd when `--etcd-metrics-url` is given.
fn scrapes<'a>(run: &'a Run<'a>) -> Scrapes<'a> {
    Scrapes {
        fetcher: &run.fetcher,
        apiserver: run.prometheus.is_none(),
        etcd: run.etcd.as_ref(),
        limits: run.opts.scrape_limits,
    }
}

/// The `metrics/apiserver` entry, sent with stage one: the first round. With a window it is kept
/// for the second round, which lands both; without one it lands now.
pub(in crate::collect) fn first_scrape<'a>(run: &'a Run<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let round = scrapes(run).first(run.deadline).await;
        run.leave_first_scrape(FirstScrape {
            scraped: round.apiserver.is_some(),
            apiserver_ok: round.apiserver_ok(),
            refused: matches!(
                &round.apiserver,
                Some(Err(FetchError::Status {
                    code: 401 | 403,
                    ..
                }))
            ),
        });
        if run.opts.window.is_zero() {
            // One scrape: it lands now.
            return Ok(scraped(run, round, None));
        }
        run.leave_first_round(round);
        Ok(Contribution::default())
    })
}

/// The `metrics/apiserver/window` entry: the second round, `--window` after stage one ended (or
/// at the deadline, whichever is first), and both rounds landed together.
pub(in crate::collect) fn second_scrape<'a>(run: &'a Run<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let first = run.take_first_round();
        if !first.any_ok() {
            // No first scrape to compare with: the second one will not happen.
            let mut c = scraped(run, first, None);
            c.skipped = true;
            return Ok(c);
        }
        let until = (Instant::now() + run.opts.window).min(run.deadline);
        wait_until(run.progress, "second /metrics scrape", "--window", until).await;
        let second = scrapes(run).second(&first, run.deadline).await;
        Ok(scraped(run, first, Some(second)))
    })
}

/// The metrics sources and gaps of the scrape rounds taken.
fn scraped(run: &Run<'_>, first: Round, second: Option<Round>) -> Contribution {
    let origins = Origins {
        apiserver: format!("{}/metrics", run.server),
        etcd: run.etcd.as_ref().map(Etcd::metrics_url),
    };
    let (sources, gaps) = finish(first, second, &origins);
    Contribution {
        evidence: Some(Box::new(move |b: &mut EvidenceBundle| {
            b.metrics.extend(sources)
        })),
        gaps,
        ..Contribution::default()
    }
}
