//! Live collection: cluster → [`EvidenceBundle`]. The only module that talks to an API server.
//!
//! Collection never judges. It gathers what the rules read, and when a source cannot be read it
//! records a gap with the reason (403, timeout, not served, unreachable) and goes on: on a managed
//! cluster without etcd metrics the verdicts still come, with the gap named.
//!
//! Shape of a run (DESIGN §5, "fast"): every independent request is in flight at once, each under
//! `--request-timeout`, the whole run under `--timeout` (what has not answered by then becomes a
//! timeout gap). Three stages, because some requests need the answers of others:
//!
//! 1. [`STAGE_ONE`]: the objects that name everything else (APIServices, webhook configurations,
//!    CRDs, FlowSchemas and priority levels), RBAC ([`rbac`]), `/version`, `/readyz`, `/livez`,
//!    and the first `/metrics` scrape.
//! 2. For what stage one referenced: the Services, Endpoints and EndpointSlices behind each backend,
//!    Events in their namespaces, the discovery probe of every aggregated group/version (and, once
//!    it answered, a list of one resource it serves and the [`delegation`] probe), optional
//!    admission dry-run probes.
//! 3. Pods behind those Services (selectors come from stage two) and the TLS handshake with every
//!    reachable backend.
//!
//! Meanwhile the metrics window runs; the second scrape closes it. So a scan costs about three
//! round trips or the window, whichever is longer — not the sum of the requests.
//!
//! Beside the API server, two optional sources run in stage one: etcd ([`etcd`]: its `/metrics`,
//! scraped in the same rounds as the API server's, `/health` and the alarm list) and Prometheus
//! ([`prometheus`]: the API server's and etcd's families over `--since`, read instead of scraping
//! `/metrics`; no window to wait for then, unless etcd is scraped directly).
//!
//! Each source lives in its own file as an async fetch and a pure transform into bundle types; the
//! transforms are tested on hand-built objects.

pub mod backends;
pub mod certificates;
pub mod connect;
pub mod delegation;
pub mod discovery;
pub mod endpoint;
pub mod etcd;
pub mod fetch;
pub mod flowcontrol;
pub mod health;
pub mod logs;
pub mod metrics;
pub mod objects;
pub mod prometheus;
pub mod rbac;
pub mod refs;
mod scrapes;
pub mod tls_words;
pub mod why;

use std::collections::BTreeMap;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::bundle::{CollectionSource, EvidenceBundle, Gap, MetricTarget, TimeBasis};
pub use connect::{ConnectError, ConnectOptions, Connection, connect};
pub use endpoint::SetupError;
pub use etcd::EtcdOptions;
pub use fetch::{FetchError, Fetcher};
pub use prometheus::PrometheusOptions;

/// What a collection does beyond the defaults.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    /// Per request (`--request-timeout`, default 10 s).
    pub request_timeout: Duration,
    /// The whole run (`--timeout`); what is not done by then becomes a gap.
    pub timeout: Duration,
    /// Metrics window (`--window`): the time between the two scrapes; zero = one scrape.
    pub window: Duration,
    /// `--backend-address svc.ns=host:port`: where to reach a backend for the TLS handshake.
    pub backend_addresses: BTreeMap<String, String>,
    /// `--probe-admission`: send server-side dry-run creates through matching webhooks.
    pub probe_admission: bool,
    /// `--pod-logs`: read the known error lines of the logs of the Pods behind the extension paths.
    pub pod_logs: bool,
    /// After a discovery probe answers, list one resource of the group/version (off with
    /// `--skip-list-probe`: the least-privilege ClusterRole does not grant lists of aggregated
    /// resources).
    pub list_probe: bool,
    /// After a discovery probe answers, send it again as an ordinary authenticated user
    /// ([`delegation`]); off with `--skip-delegation-probe`, and when the collection itself
    /// impersonates (`--as`), since impersonation does not chain.
    pub delegation_probe: bool,
    /// Namespace for namespaced probes (`-n`).
    pub namespace: String,
    /// `--etcd-metrics-url` and its TLS files: etcd's own metrics, health and alarms.
    pub etcd: Option<EtcdOptions>,
    /// `--prometheus` and its options: read the metric families from Prometheus instead of
    /// scraping the API server (and etcd, unless `etcd` is given).
    pub prometheus: Option<PrometheusOptions>,
    /// `--max-scrape-bytes` and `--max-series`: how much one `/metrics` scrape may bring.
    pub scrape_limits: metrics::ScrapeLimits,
    /// `--max-objects`: how many objects one list may bring; a list with more stops there and
    /// becomes a `capped` gap.
    pub max_objects: usize,
}

impl Default for CollectOptions {
    fn default() -> Self {
        CollectOptions {
            request_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(60),
            window: Duration::from_secs(10),
            backend_addresses: BTreeMap::new(),
            probe_admission: false,
            pod_logs: false,
            list_probe: true,
            delegation_probe: true,
            max_objects: fetch::DEFAULT_MAX_OBJECTS,
            namespace: "default".into(),
            etcd: None,
            prometheus: None,
            scrape_limits: metrics::ScrapeLimits::default(),
        }
    }
}

/// What a source contributes: applied to the bundle in table order, so output is deterministic
/// whatever order the responses arrived in.
pub type Contribution = Box<dyn FnOnce(&mut EvidenceBundle) + Send>;

/// A source's future: its contribution, or the failure that becomes its gap.
pub type SourceFuture<'a> = BoxFuture<'a, Result<Contribution, FetchError>>;

/// One entry of the stage-one table.
pub struct Source {
    /// Gap source id when it fails (`objects/apiservices`, `metrics/apiserver`, …).
    pub id: &'static str,
    /// What it fetches, for progress output.
    pub what: &'static str,
    /// The fetch.
    pub fetch: for<'a> fn(&'a Fetcher) -> SourceFuture<'a>,
}

/// Stage one: the sources that need nothing but the API server. Add a collector here.
pub const STAGE_ONE: &[Source] = &[
    Source {
        id: "version",
        what: "/version",
        fetch: objects::fetch_version,
    },
    Source {
        id: "objects/apiservices",
        what: "APIServices",
        fetch: objects::fetch_api_services,
    },
    Source {
        id: "objects/validatingwebhookconfigurations",
        what: "validating webhooks",
        fetch: objects::fetch_validating_webhooks,
    },
    Source {
        id: "objects/mutatingwebhookconfigurations",
        what: "mutating webhooks",
        fetch: objects::fetch_mutating_webhooks,
    },
    Source {
        id: "objects/customresourcedefinitions",
        what: "CRDs",
        fetch: objects::fetch_crds,
    },
    Source {
        id: "objects/flowcontrol",
        what: "FlowSchemas and priority levels",
        fetch: flowcontrol::fetch,
    },
    Source {
        id: rbac::CLUSTER_ROLES,
        what: "ClusterRoles",
        fetch: rbac::fetch_cluster_roles,
    },
    Source {
        id: rbac::CLUSTER_ROLE_BINDINGS,
        what: "ClusterRoleBindings",
        fetch: rbac::fetch_cluster_role_bindings,
    },
    Source {
        id: rbac::ROLES,
        what: "Roles in kube-system",
        fetch: rbac::fetch_roles,
    },
    Source {
        id: rbac::ROLE_BINDINGS,
        what: "RoleBindings in kube-system",
        fetch: rbac::fetch_role_bindings,
    },
    Source {
        id: "health/readyz",
        what: "/readyz",
        fetch: health::fetch_readyz,
    },
    Source {
        id: "health/livez",
        what: "/livez",
        fetch: health::fetch_livez,
    },
];

/// Progress reporting, so the CLI can draw a bar on a TTY and nothing elsewhere.
pub trait Progress: Send + Sync {
    /// `total` steps are now known (or changed: a step that will not happen is taken off).
    fn set_total(&self, total: u64);
    /// One step finished.
    fn step(&self, what: &str);
    /// Waiting on purpose: `what` comes in `remaining`, because of `why` (a flag, a phase).
    /// Called about once a second while it lasts, so a bar can count down instead of looking hung.
    fn waiting(&self, _what: &str, _why: &str, _remaining: Duration) {}
}

/// No progress output.
pub struct NoProgress;

impl Progress for NoProgress {
    fn set_total(&self, _: u64) {}
    fn step(&self, _: &str) {}
}

/// Sleep until `until`, telling `progress` what is awaited, and why, once a second.
pub async fn wait_until(progress: &dyn Progress, what: &str, why: &str, until: Instant) {
    loop {
        let now = Instant::now();
        if now >= until {
            return;
        }
        let remaining = until - now;
        progress.waiting(what, why, remaining);
        let tick = Duration::from_millis(u64::try_from(remaining.as_millis() % 1000).unwrap_or(0))
            .max(Duration::from_millis(1));
        tokio::time::sleep(tick.min(remaining)).await;
    }
}

/// The result of a collection.
pub struct Collected {
    /// The evidence, with gaps.
    pub bundle: EvidenceBundle,
    /// Set when the API server could not be reached at all (exit code 3).
    pub unreachable: Option<String>,
    /// Set when it answered but refused every read (401/403 everywhere): nothing to judge, which
    /// is not "no findings" (exit code 3, in kubectl's words).
    pub refused: Option<String>,
}

/// Run `fut` until `deadline`; a miss becomes a timeout.
async fn bounded<T>(
    deadline: Instant,
    fut: impl std::future::Future<Output = Result<T, FetchError>>,
) -> Result<T, FetchError> {
    match tokio::time::timeout_at(deadline, fut).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout(Duration::ZERO)),
    }
}

fn gap_for(id: &str, e: &FetchError) -> Gap {
    let detail = match e {
        FetchError::Timeout(d) if d.is_zero() => "not finished within --timeout".to_string(),
        other => other.to_string(),
    };
    Gap::new(id, e.gap_reason(), detail)
}

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
        Some(o) => Some(prometheus::Prometheus::new(o, opts.request_timeout)?),
        None => None,
    };
    let started = Instant::now();
    let deadline = started + opts.timeout;
    let fetcher =
        Fetcher::new(conn.client.clone(), opts.request_timeout).with_max_objects(opts.max_objects);
    let mut bundle = EvidenceBundle::new(CollectionSource::Live {
        server: conn.server.clone(),
        context: conn.context.clone(),
    });
    let extra_steps = u64::from(etcd.is_some()) + u64::from(prometheus.is_some());
    // Stage one, the first scrape, the second one (when there is a window), and stages two and
    // three (Services…, discovery probes, Pods, TLS handshakes).
    let second_scrape = u64::from(!opts.window.is_zero());
    let total = STAGE_ONE.len() as u64 + 1 + second_scrape + 4 + extra_steps;
    progress.set_total(total);

    // Stage one, the first scrapes, etcd's health and alarms, and Prometheus.
    let stage_one = futures::future::join_all(STAGE_ONE.iter().map(|s| {
        let f = &fetcher;
        async move {
            let r = bounded(deadline, (s.fetch)(f)).await;
            progress.step(s.what);
            (s, r)
        }
    }));
    let scrapes = scrapes::Scrapes {
        fetcher: &fetcher,
        apiserver: prometheus.is_none(),
        etcd: etcd.as_ref(),
        limits: opts.scrape_limits,
    };
    let first_scrape = async {
        let round = scrapes.first(deadline).await;
        progress.step("/metrics");
        round
    };
    let etcd_checks = async {
        match &etcd {
            Some(e) => {
                let (health, alarms) =
                    tokio::join!(bounded(deadline, e.health()), bounded(deadline, e.alarms()));
                progress.step("etcd health and alarms");
                vec![(etcd::GAP_HEALTH, health), (etcd::GAP_ALARMS, alarms)]
            }
            None => Vec::new(),
        }
    };
    let from_prometheus = async {
        match &prometheus {
            Some(p) => {
                let r = p.collect(etcd.is_none(), deadline).await;
                progress.step("Prometheus");
                r
            }
            None => (Vec::new(), Vec::new()),
        }
    };
    let (stage_one, first, etcd_checks, (prom_sources, prom_gaps)) =
        tokio::join!(stage_one, first_scrape, etcd_checks, from_prometheus);

    let mut transport_failures = Vec::new();
    let mut refusals: Vec<u16> = Vec::new();
    for (source, result) in stage_one {
        match result {
            Ok(apply) => apply(&mut bundle),
            Err(e) => {
                if e.is_unreachable() {
                    transport_failures.push(e.to_string());
                }
                if let FetchError::Status {
                    code: c @ (401 | 403),
                    ..
                } = &e
                    && source.id != "version"
                {
                    refusals.push(*c);
                }
                bundle.gaps.push(gap_for(source.id, &e));
            }
        }
    }
    // Every source but /version (public) refused, and /metrics too: nothing to judge at all.
    // That is not a scan with no findings; it is kubectl's "You must be logged in" (exit 3).
    let scrape_refused = match &first.apiserver {
        Some(Err(FetchError::Status {
            code: 401 | 403, ..
        })) => true,
        Some(_) => false,
        None => prom_sources.is_empty(),
    };
    // `/version` is readable without credentials (system:public-info-viewer), so it never
    // counts towards "refused everything".
    if refusals.len() == STAGE_ONE.len() - 1 && scrape_refused {
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
        return Ok(Collected {
            unreachable: None,
            refused: Some(why),
            bundle,
        });
    }
    if transport_failures.len() == STAGE_ONE.len() && !first.apiserver_ok() {
        return Ok(Collected {
            unreachable: Some(tls_words::unreachable_message(
                &conn.server,
                &transport_failures[0],
            )),
            refused: None,
            bundle,
        });
    }
    if etcd.is_none() {
        // Not judged is not healthy: say what was not looked at, and how to look.
        let how = "pass --etcd-metrics-url (etcd's client URL, with --etcd-cert, --etcd-key and --etcd-ca for client TLS)";
        bundle.gaps.push(Gap::new(
            etcd::GAP_HEALTH,
            crate::bundle::GapReason::NotSupplied,
            format!("etcd's own health was not checked: {how}"),
        ));
        bundle.gaps.push(Gap::new(
            etcd::GAP_ALARMS,
            crate::bundle::GapReason::NotSupplied,
            format!("etcd's alarms (NOSPACE, CORRUPT) were not checked: {how}"),
        ));
    }
    for (id, result) in etcd_checks {
        match result {
            Ok(check) => bundle.health_checks.push(check),
            Err(e) => bundle.gaps.push(gap_for(id, &e)),
        }
    }

    // Stages two and three while the metrics window runs.
    let references = refs::References::of(&bundle);
    let window = async {
        if first.any_ok() && !opts.window.is_zero() {
            let until = (Instant::now() + opts.window).min(deadline);
            wait_until(progress, "second /metrics scrape", "--window", until).await;
            let second = scrapes.second(&first, deadline).await;
            progress.step("/metrics (second scrape)");
            Some(second)
        } else {
            if second_scrape > 0 {
                // No first scrape to compare with: the second one will not happen.
                progress.set_total(total - 1);
            }
            None
        }
    };
    let later = later_stages(&fetcher, &bundle, &references, opts, deadline, progress);
    let (second, later) = tokio::join!(window, later);
    for apply in later.contributions {
        apply(&mut bundle);
    }
    bundle.gaps.extend(later.gaps);
    bundle.probes.extend(later.probes);

    let origins = scrapes::Origins {
        apiserver: format!("{}/metrics", conn.server),
        etcd: etcd.as_ref().map(etcd::Etcd::metrics_url),
    };
    let (scraped, scrape_gaps) = scrapes::finish(first, second, &origins);
    bundle.metrics.extend(prom_sources);
    bundle.metrics.extend(scraped);
    // API server first, then etcd: one order whatever the sources.
    bundle
        .metrics
        .sort_by_key(|m| m.target != MetricTarget::Apiserver);
    bundle.gaps.extend(prom_gaps);
    bundle.gaps.extend(scrape_gaps);
    bundle.gaps.extend(fetcher.take_cuts());
    bundle.collection.metrics_window = bundle
        .metrics_for(MetricTarget::Apiserver)
        .or_else(|| bundle.metrics.first())
        .and_then(|m| m.window.clone());

    bundle.collection.collected_at = Some(jiff::Timestamp::now());
    bundle.collection.collected_at_basis = Some(TimeBasis::Clock);
    crate::bundle::verify_served_chains(&mut bundle);
    Ok(Collected {
        bundle,
        unreachable: None,
        refused: None,
    })
}

/// What stages two and three produced.
#[derive(Default)]
struct Later {
    contributions: Vec<Contribution>,
    probes: Vec<crate::bundle::Probe>,
    gaps: Vec<Gap>,
}

async fn later_stages(
    fetcher: &Fetcher,
    bundle: &EvidenceBundle,
    references: &refs::References,
    opts: &CollectOptions,
    deadline: Instant,
    progress: &dyn Progress,
) -> Later {
    let mut out = Later::default();

    // Stage two needs stage one: the Services and namespaces to read, and the group/versions to
    // probe, are those the APIServices, webhooks and CRDs name (`refs::References`).
    // Stage two: objects behind the references, discovery probes, events.
    let objects = async {
        let r = bounded(deadline, backends::fetch(fetcher, references)).await;
        progress.step("Services, endpoints and events");
        r
    };
    let probes = async {
        let follow = discovery::FollowUps {
            list: opts.list_probe,
            delegation: opts.delegation_probe,
        };
        let r = discovery::probe_all(fetcher, bundle, follow, deadline).await;
        progress.step("discovery and list probes");
        r
    };
    let admission = async {
        if opts.probe_admission {
            discovery::probe_admission(fetcher, bundle, &opts.namespace, deadline).await
        } else {
            (Vec::new(), Vec::new())
        }
    };
    let (objects, (probes, probe_gaps), (adm_probes, adm_gaps)) =
        tokio::join!(objects, probes, admission);
    out.probes.extend(probes);
    out.probes.extend(adm_probes);
    out.gaps.extend(probe_gaps);
    out.gaps.extend(adm_gaps);
    let backends = match objects {
        Ok(b) => b,
        Err(e) => {
            out.gaps.push(gap_for("objects/backends", &e));
            backends::Backends::default()
        }
    };

    // Stage three needs stage two: pods are found by their Service's selector, and a backend's
    // address for the handshake comes from its Service's port and endpoints.
    // Stage three: pods behind the Services (then, with --pod-logs, their logs), and TLS
    // handshakes with the backends.
    let pods_and_logs = async {
        let pods = bounded(deadline, backends::fetch_pods(fetcher, &backends)).await;
        progress.step("pods");
        let logs = match &pods {
            Ok(p) if opts.pod_logs => {
                logs::fetch(fetcher, bundle, references, &p.by_service, deadline).await
            }
            _ => (Vec::new(), Vec::new()),
        };
        (pods, logs)
    };
    let targets = certificates::targets(bundle, &backends, &opts.backend_addresses);
    let handshakes = async {
        let r = certificates::capture_all(targets, opts.request_timeout, deadline).await;
        progress.step("TLS handshakes");
        r
    };
    let ((pods, (log_findings, log_gaps)), handshakes) = tokio::join!(pods_and_logs, handshakes);
    out.gaps.extend(backends.gaps.clone());
    out.contributions
        .push(Box::new(move |b: &mut EvidenceBundle| backends.apply(b)));
    match pods {
        Ok(p) => out
            .contributions
            .push(Box::new(move |b: &mut EvidenceBundle| p.apply(b))),
        Err(e) => out.gaps.push(gap_for("objects/pods", &e)),
    }
    out.gaps.extend(log_gaps);
    out.contributions
        .push(Box::new(move |b: &mut EvidenceBundle| {
            b.log_findings.extend(log_findings)
        }));
    let certificates::Handshakes {
        certs,
        gaps: cert_gaps,
        probes: dial_probes,
    } = handshakes;
    out.contributions
        .push(Box::new(move |b: &mut EvidenceBundle| {
            b.certificates.extend(certs)
        }));
    out.gaps.extend(cert_gaps);
    out.probes.extend(dial_probes);
    out
}
