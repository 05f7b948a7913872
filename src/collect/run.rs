//! One collection run: the stages of [`super::sources::SOURCES`] sent in order, every source of a
//! stage at once, each under the run's deadline; the contributions landed in table order; and the
//! two verdicts a run can reach before judging anything — the API server could not be reached, or
//! it refused every read.
//!
//! Stage one (and the metrics sent beside it) goes first; stages two and three follow while the
//! metrics window runs, and the second scrape closes the window. A source that waits for another of
//! its stage (`after`) is started as soon as that one is done, not when the whole stage is. What is
//! not done by `--timeout` becomes a gap (for a source bounded as a whole) or the source records
//! which of its requests did not finish.

use tokio::time::Instant;

use super::sources::{Asks, Contribution, Deadline, Found, Run, SOURCES, Source, Stage};
use super::{
    CollectOptions, Collected, Connection, FetchError, Fetcher, Progress, SetupError, bounded,
    etcd, gap_for, refs, tls, tls_words,
};
use crate::bundle::{CollectionSource, EvidenceBundle, MetricTarget, TimeBasis};

/// A source and what came back.
type Sent = (&'static Source, Result<Contribution, FetchError>);

/// Collect everything from a connected API server (and etcd and Prometheus, when given).
///
/// # Errors
/// [`SetupError`] when the etcd or Prometheus options cannot be used (a URL that is not http(s),
/// an unreadable certificate, key, CA or token file). Nothing has been requested then.
pub async fn collect(
    conn: &Connection,
    opts: &CollectOptions,
    progress: &dyn Progress,
) -> Result<Collected, SetupError> {
    let etcd = match &opts.etcd {
        Some(o) => Some(etcd::Etcd::new(o, opts.request_timeout)?),
        None => None,
    };
    let prometheus = match &opts.prometheus {
        Some(o) => Some(super::metrics::prometheus::Prometheus::new(
            o,
            opts.request_timeout,
        )?),
        None => None,
    };
    let deadline = Instant::now() + opts.timeout;
    let fetcher =
        Fetcher::new(conn.client.clone(), opts.request_timeout).with_max_objects(opts.max_objects);
    let mut bundle = EvidenceBundle::new(CollectionSource::Live {
        server: conn.server.clone(),
        context: conn.context.clone(),
    });
    let mut run = Run::new(
        fetcher,
        opts,
        deadline,
        progress,
        conn.server.clone(),
        etcd,
        prometheus,
    );
    run.own_user = conn.user.clone();
    run.count_steps();

    // Stage one, and the metrics sources beside it (stage two waits for them too: the window
    // opens when stage one is in).
    let (objects, mut last): (Vec<Sent>, Vec<Sent>) = send(&run, None, |s| {
        matches!(s, Stage::Objects(_) | Stage::Metrics(_))
    })
    .await
    .into_iter()
    .partition(|(s, _)| matches!(s.stage, Stage::Objects(_)));

    // Only the API server's answers decide "unreachable" or "refused": an etcd or Prometheus
    // source failing says nothing about whether the cluster's own API can be read.
    let (of_server, others): (Vec<Sent>, Vec<Sent>) = objects
        .into_iter()
        .partition(|(s, _)| s.asks != Asks::Other);
    if let Some(verdict) = access_verdict(conn, &run, &of_server) {
        land(&mut bundle, of_server);
        let (unreachable, refused) = match verdict {
            Access::Unreachable(why) => (Some(why), None),
            Access::Refused(why) => (None, Some(why)),
        };
        return Ok(Collected {
            bundle,
            unreachable,
            refused,
        });
    }
    land(&mut bundle, of_server.into_iter().chain(others).collect());

    // Stages two and three while the metrics window runs: they need what stage one found (the
    // Services, endpoints and Pods the APIServices and webhooks name), and running them inside
    // the window costs the scan no extra wall time.
    let references = refs::References::of(&bundle);
    let found = Found {
        bundle: &bundle,
        references: &references,
    };
    let later = async {
        let mut two = send(&run, Some(&found), |s| matches!(s, Stage::Referenced(_))).await;
        two.extend(send(&run, Some(&found), |s| matches!(s, Stage::Behind(_))).await);
        two
    };
    let window = send(&run, None, |s| matches!(s, Stage::Window(_)));
    let (later, window) = tokio::join!(later, window);
    last.extend(later);
    last.extend(window);
    // Landed in table order, not arrival order: the bundle of one cluster is the same whichever
    // server answered first, so bundles diff cleanly and snapshots hold.
    last.sort_by_key(|(s, _)| table_position(s));
    land(&mut bundle, last);

    // API server first, then etcd: one order whatever the sources.
    bundle
        .metrics
        .sort_by_key(|m| m.target != MetricTarget::Apiserver);
    bundle.gaps.extend(run.fetcher.take_cuts());
    bundle.collection.metrics_window = bundle
        .metrics_for(MetricTarget::Apiserver)
        .or_else(|| bundle.metrics.first())
        .and_then(|m| m.window.clone());

    bundle.collection.collected_at = Some(jiff::Timestamp::now());
    bundle.collection.collected_at_basis = Some(TimeBasis::Clock);
    // Last: a served chain is judged against the caBundle of the object that names it, so both
    // the handshakes (stage three) and the objects (stage one) must be in.
    tls::verify_served_chains(&mut bundle);
    Ok(Collected {
        bundle,
        unreachable: None,
        refused: None,
    })
}

/// Why there is nothing to judge.
enum Access {
    /// The API server could not be reached at all (exit code 3).
    Unreachable(String),
    /// It answered but refused every read (exit code 3, in kubectl's words).
    Refused(String),
}

/// Unreachable or refused, from what stage one's reads of the API server and the first scrape
/// said: `None` when there is something to judge.
fn access_verdict(conn: &Connection, run: &Run<'_>, of_server: &[Sent]) -> Option<Access> {
    let scrape = run.first_scrape();
    // Every read but the public /version refused, and /metrics too: nothing to judge at all.
    // That is not a scan with no findings; it is kubectl's "You must be logged in" (exit 3).
    // Without a scrape of its own, metrics Prometheus brought are still something to judge.
    let scrape_refused = if scrape.scraped {
        scrape.refused
    } else {
        !run.prometheus_brought()
    };
    let credentialed = of_server
        .iter()
        .filter(|(s, _)| s.asks == Asks::ApiServer)
        .count();
    let refusals: Vec<u16> = of_server
        .iter()
        .filter(|(s, _)| s.asks == Asks::ApiServer)
        .filter_map(|(_, r)| match r {
            Err(FetchError::Status {
                code: c @ (401 | 403),
                ..
            }) => Some(*c),
            _ => None,
        })
        .collect();
    if refusals.len() == credentialed && scrape_refused {
        let why = if refusals.iter().all(|c| *c == 401) {
            format!(
                "You must be logged in to the server (Unauthorized): {} rejected the credentials of {}",
                conn.server, conn.identity
            )
        } else {
            format!(
                "the server refused everything extpath reads (Forbidden): {} may not read APIServices, webhook configurations, CRDs, FlowSchemas, /readyz, /livez or /metrics at {} — bind the read-only ClusterRole in deploy/rbac.yaml",
                conn.identity, conn.server
            )
        };
        return Some(Access::Refused(why));
    }
    let transport_failures: Vec<String> = of_server
        .iter()
        .filter_map(|(_, r)| match r {
            Err(e) if e.is_unreachable() => Some(e.to_string()),
            _ => None,
        })
        .collect();
    // Every read failing at the transport, and the scrape too: one dial error among answers is a
    // gap on that source, not an unreachable cluster.
    if transport_failures.len() == of_server.len() && !scrape.apiserver_ok {
        return Some(Access::Unreachable(tls_words::unreachable_message(
            &conn.server,
            &transport_failures[0],
        )));
    }
    None
}

fn table_position(s: &Source) -> usize {
    SOURCES
        .iter()
        .position(|e| std::ptr::eq(e, s))
        .unwrap_or(usize::MAX)
}

/// Send the sources of one stage (those `stage` picks), all at once; the answers in table order.
async fn send<'a>(
    run: &'a Run<'a>,
    found: Option<&'a Found<'a>>,
    stage: fn(&Stage) -> bool,
) -> Vec<Sent> {
    let entries: Vec<&'static Source> = run.sources().filter(|s| stage(&s.stage)).collect();
    let chains = entries.iter().filter(|s| s.after.is_none()).map(|root| {
        let entries = &entries;
        async move {
            let mut out = vec![(*root, one(run, found, root).await)];
            let waiting = entries.iter().filter(|s| s.after == Some(root.id));
            out.extend(
                futures::future::join_all(
                    waiting.map(|s| async move { (*s, one(run, found, s).await) }),
                )
                .await,
            );
            out
        }
    });
    let mut sent: Vec<Sent> = futures::future::join_all(chains)
        .await
        .into_iter()
        .flatten()
        .collect();
    sent.sort_by_key(|(s, _)| table_position(s));
    sent
}

/// Send one source under the run's deadline, and count its progress step.
async fn one<'a>(
    run: &'a Run<'a>,
    found: Option<&'a Found<'a>>,
    s: &'static Source,
) -> Result<Contribution, FetchError> {
    let fut = match (s.stage, found) {
        (Stage::Objects(f) | Stage::Metrics(f) | Stage::Window(f), _) => f(run),
        (Stage::Referenced(f) | Stage::Behind(f), Some(found)) => f(run, found),
        // The run sends stages two and three with what stage one found.
        (Stage::Referenced(_) | Stage::Behind(_), None) => return Ok(Contribution::default()),
    };
    // A source that bounds its own requests keeps what finished (one slow backend among twenty
    // handshakes); bounding it as a whole would throw the nineteen answers away.
    let r = match s.deadline {
        Deadline::Whole => bounded(run.deadline, fut).await,
        Deadline::Own => fut.await,
    };
    match (&r, s.what) {
        (Ok(c), Some(_)) if c.skipped => run.skip_step(),
        (_, Some(what)) => run.progress.step(what),
        (_, None) => {}
    }
    r
}

/// Apply what came back, in the order given: every source's evidence, then every gap (a source
/// that failed as a whole is a gap under its id), then every probe.
fn land(bundle: &mut EvidenceBundle, sent: Vec<Sent>) {
    let mut gaps = Vec::new();
    let mut probes = Vec::new();
    for (source, result) in sent {
        match result {
            Ok(c) => {
                if let Some(evidence) = c.evidence {
                    evidence(bundle);
                }
                gaps.extend(c.gaps);
                probes.extend(c.probes);
            }
            Err(e) => gaps.push(gap_for(source.id, &e)),
        }
    }
    bundle.gaps.extend(gaps);
    bundle.probes.extend(probes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{Gap, GapReason};

    #[test]
    fn every_entry_is_found_at_its_place_in_the_table() {
        for (i, s) in SOURCES.iter().enumerate() {
            assert_eq!(table_position(s), i, "{}", s.id);
        }
    }

    #[test]
    fn evidence_lands_before_gaps_and_gaps_in_the_order_given() {
        let gap = |id: &str| Gap::new(id, GapReason::Forbidden, "");
        let mut b = EvidenceBundle::new(CollectionSource::Live {
            server: String::new(),
            context: None,
        });
        let first = Contribution {
            evidence: Some(Box::new(|b: &mut EvidenceBundle| {
                b.gaps.push(Gap::new("item", GapReason::Error, ""))
            })),
            gaps: vec![gap("first")],
            ..Contribution::default()
        };
        land(
            &mut b,
            vec![
                (&SOURCES[0], Ok(first)),
                (
                    &SOURCES[1],
                    Err(FetchError::Timeout(std::time::Duration::ZERO)),
                ),
                (
                    &SOURCES[2],
                    Ok(Contribution::of(Box::new(|_: &mut EvidenceBundle| {}))),
                ),
            ],
        );
        let order: Vec<&str> = b.gaps.iter().map(|g| g.source.as_str()).collect();
        assert_eq!(order, ["item", "first", SOURCES[1].id]);
        assert_eq!(b.gaps[2].detail, "not finished within --timeout");
    }
}
