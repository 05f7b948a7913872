//! The fetch of each entry of [`super::SOURCES`] that is more than one reader of its file: etcd's
//! checks (or the gaps that say they were not made), the probes and objects of stages two and
//! three, and the metrics rounds. Each calls its source's file and shapes the answer into one
//! [`Contribution`]; the answers a later entry needs (stage two's Services, the Pods, the first
//! scrape) are left in the [`Run`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::{Contribution, FirstScrape, Found, Run, SourceFuture};
use crate::bundle::{EvidenceBundle, Gap, GapReason};
use crate::collect::backends::{self, Backends};
use crate::collect::etcd::{self, Etcd};
use crate::collect::metrics::window::{self, Round};
use crate::collect::{FetchError, discovery, logs, tls, wait_until};

pub(super) fn etcd_not_supplied<'a>(_: &'a Run<'a>) -> SourceFuture<'a> {
    // Not judged is not healthy: say what was not looked at, and how to look.
    let how = "pass --etcd-metrics-url (etcd's client URL, with --etcd-cert, --etcd-key and --etcd-ca for client TLS)";
    Box::pin(async move {
        Ok(Contribution {
            gaps: vec![
                Gap::new(
                    etcd::GAP_HEALTH,
                    GapReason::NotSupplied,
                    format!("etcd's own health was not checked: {how}"),
                ),
                Gap::new(
                    etcd::GAP_ALARMS,
                    GapReason::NotSupplied,
                    format!("etcd's alarms (NOSPACE, CORRUPT) were not checked: {how}"),
                ),
            ],
            ..Contribution::default()
        })
    })
}

pub(super) fn etcd_checks<'a>(run: &'a Run<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let Some(e) = &run.etcd else {
            return Ok(Contribution::default());
        };
        let (health, alarms) = tokio::join!(
            crate::collect::bounded(run.deadline, e.health()),
            crate::collect::bounded(run.deadline, e.alarms())
        );
        let mut checks = Vec::new();
        let mut gaps = Vec::new();
        for (id, result) in [(etcd::GAP_HEALTH, health), (etcd::GAP_ALARMS, alarms)] {
            match result {
                Ok(check) => checks.push(check),
                Err(e) => gaps.push(crate::collect::gap_for(id, &e)),
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

pub(super) fn discovery_probes<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let follow = discovery::FollowUps {
            list: run.opts.list_probe,
            delegation: run.opts.delegation_probe,
        };
        let (probes, gaps) =
            discovery::probe_all(&run.fetcher, found.bundle, follow, run.deadline).await;
        Ok(Contribution {
            gaps,
            probes,
            ..Contribution::default()
        })
    })
}

pub(super) fn admission_probes<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let (probes, gaps) = discovery::probe_admission(
            &run.fetcher,
            found.bundle,
            &run.opts.namespace,
            run.deadline,
        )
        .await;
        Ok(Contribution {
            gaps,
            probes,
            ..Contribution::default()
        })
    })
}

pub(super) fn backend_objects<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let found = Arc::new(backends::fetch(&run.fetcher, found.references).await?);
        // Stage three reads them (selectors, addresses); the bundle gets them when it lands.
        let _ = run.backends.set(Arc::clone(&found));
        let gaps = found.gaps.clone();
        Ok(Contribution {
            evidence: Some(Box::new(move |b: &mut EvidenceBundle| found.apply(b))),
            gaps,
            ..Contribution::default()
        })
    })
}

/// Stage two's Services (none when it failed).
fn found_backends(run: &Run<'_>) -> Arc<Backends> {
    run.backends.get().cloned().unwrap_or_default()
}

pub(super) fn pods<'a>(run: &'a Run<'a>, _: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let pods = Arc::new(backends::fetch_pods(&run.fetcher, &found_backends(run)).await?);
        let _ = run.pods.set(Arc::clone(&pods));
        Ok(Contribution::of(Box::new(move |b: &mut EvidenceBundle| {
            pods.apply(b)
        })))
    })
}

pub(super) fn pod_logs<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        // No Pods, no logs: their gap is already recorded.
        let Some(pods) = run.pods.get() else {
            return Ok(Contribution::default());
        };
        let (findings, gaps) = logs::fetch(
            &run.fetcher,
            found.bundle,
            found.references,
            &pods.by_service,
            run.deadline,
        )
        .await;
        Ok(Contribution {
            evidence: Some(Box::new(move |b: &mut EvidenceBundle| {
                b.log_findings.extend(findings)
            })),
            gaps,
            ..Contribution::default()
        })
    })
}

pub(super) fn handshakes<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let targets = tls::targets(
            found.bundle,
            &found_backends(run),
            &run.opts.backend_addresses,
        );
        let tls::Handshakes {
            certs,
            gaps,
            probes,
        } = tls::capture_all(targets, run.opts.request_timeout, run.deadline).await;
        Ok(Contribution {
            evidence: Some(Box::new(move |b: &mut EvidenceBundle| {
                b.certificates.extend(certs)
            })),
            gaps,
            probes,
            ..Contribution::default()
        })
    })
}

pub(super) fn prometheus<'a>(run: &'a Run<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let Some(p) = &run.prometheus else {
            return Ok(Contribution::default());
        };
        let (sources, gaps) = p.collect(run.etcd.is_none(), run.deadline).await;
        // In place of the API server's scrape, for the run's verdict on access.
        run.prometheus_brought
            .store(!sources.is_empty(), Ordering::Relaxed);
        Ok(Contribution {
            evidence: Some(Box::new(move |b: &mut EvidenceBundle| {
                b.metrics.extend(sources)
            })),
            gaps,
            ..Contribution::default()
        })
    })
}

pub(super) fn first_scrape<'a>(run: &'a Run<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let round = run.scrapes().first(run.deadline).await;
        let _ = run.first_scrape.set(FirstScrape {
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
        if let Ok(mut first) = run.first_round.lock() {
            *first = Some(round);
        }
        Ok(Contribution::default())
    })
}

pub(super) fn second_scrape<'a>(run: &'a Run<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let first = run
            .first_round
            .lock()
            .ok()
            .and_then(|mut f| f.take())
            .unwrap_or_default();
        if !first.any_ok() {
            // No first scrape to compare with: the second one will not happen.
            let mut c = scraped(run, first, None);
            c.skipped = true;
            return Ok(c);
        }
        let until = (Instant::now() + run.opts.window).min(run.deadline);
        wait_until(run.progress, "second /metrics scrape", "--window", until).await;
        let second = run.scrapes().second(&first, run.deadline).await;
        Ok(scraped(run, first, Some(second)))
    })
}

/// The metrics sources and gaps of the scrape rounds taken.
fn scraped(run: &Run<'_>, first: Round, second: Option<Round>) -> Contribution {
    let origins = window::Origins {
        apiserver: format!("{}/metrics", run.server),
        etcd: run.etcd.as_ref().map(Etcd::metrics_url),
    };
    let (sources, gaps) = window::finish(first, second, &origins);
    Contribution {
        evidence: Some(Box::new(move |b: &mut EvidenceBundle| {
            b.metrics.extend(sources)
        })),
        gaps,
        ..Contribution::default()
    }
}
