//! Every source of a live collection, in one table ([`SOURCES`]): what it fetches, when it can be
//! sent (its [`Stage`]), whose answer it needs first, how the run's deadline bounds it, its progress
//! label, and one shape for what it brings back ([`Contribution`]: evidence, gaps, probes). Adding
//! a collector is adding its file and one entry here. The file holds the requests, a pure
//! transform into bundle types, and the entry's fetch: a function visible in `collect` only
//! (`pub(super)`, or `pub(in crate::collect)` a folder down) from the [`Run`] (and, from stage two
//! on, what stage one [`Found`]) to a [`SourceFuture`] — `super::etcd::checks`,
//! `super::backends::pods`, `super::metrics::window::first_scrape` are examples. The run
//! (`super::run`) schedules and lands every entry the same way.
//!
//! The table is in landing order: contributions are applied to the bundle in this order whatever
//! order the answers arrived in, so the bundle is the same from one run to the next. Stage one's
//! objects land as soon as stage one is in (stages two and three read them); everything else lands
//! at the end, metrics last, since the metrics window closes last. Within one landing, the evidence
//! of every entry goes in first, then every entry's gaps, then every entry's probes.
//!
//! What a later source needs from an earlier one (stage two's Services for stage three, the Pods
//! for their logs, the first scrape for the second and for the access verdicts) is handed over
//! through the [`Run`]'s `leave_*` / `found_*` methods, so a source's file never sees another's.
//!
//! What this file does not own: the fetches and the requests themselves (each source's file), the
//! timing of the stages and the decision that a cluster is unreachable or refused everything
//! (`super::run`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::BoxFuture;
use tokio::time::Instant;

use super::backends::{self, Backends, PodsBehind};
use super::etcd::{self, Etcd};
use super::metrics::prometheus::{self, Prometheus};
use super::metrics::window::{self, Round};
use super::refs::References;
use super::{
    CollectOptions, FetchError, Fetcher, Progress, authorizer, discovery, flowcontrol, health,
    logs, objects, rbac, tls,
};
use crate::bundle::{EvidenceBundle, Gap, Probe};

/// Evidence a source adds to the bundle (objects, checks, certificates, metrics, findings); it may
/// also record the gaps of single items it could not read (an object that does not decode).
pub type Evidence = Box<dyn FnOnce(&mut EvidenceBundle) + Send>;

/// A request whose answer is evidence (the stage-one readers, which `why` shares), or the failure
/// that becomes the source's gap.
pub type EvidenceFuture<'a> = BoxFuture<'a, Result<Evidence, FetchError>>;

/// What one source brings back.
#[derive(Default)]
pub struct Contribution {
    /// What it adds to the bundle.
    pub evidence: Option<Evidence>,
    /// What it could not collect, and why.
    pub gaps: Vec<Gap>,
    /// Requests whose outcome is itself an observation (discovery, dry-run and dial probes).
    pub probes: Vec<Probe>,
    /// It turned out to have nothing to do (the second scrape, when the first failed): no
    /// progress step, and one step fewer in the total.
    pub skipped: bool,
}

impl Contribution {
    /// Evidence only.
    pub fn of(evidence: Evidence) -> Self {
        Contribution {
            evidence: Some(evidence),
            ..Contribution::default()
        }
    }
}

/// A source's future: its contribution, or the failure that becomes its gap (under its id).
pub type SourceFuture<'a> = BoxFuture<'a, Result<Contribution, FetchError>>;

/// When a source can be sent, and with what.
#[derive(Clone, Copy)]
pub enum Stage {
    /// Stage one: needs nothing but the clients. Lands before stage two is sent.
    Objects(for<'a> fn(&'a Run<'a>) -> SourceFuture<'a>),
    /// Sent with stage one (stage two waits for it too), but lands with the metrics, last.
    Metrics(for<'a> fn(&'a Run<'a>) -> SourceFuture<'a>),
    /// Stage two: needs stage one's objects and what they reference — the Services and
    /// namespaces to read, and the group/versions to probe, are those the APIServices, webhooks
    /// and CRDs name (`refs::References`).
    Referenced(for<'a> fn(&'a Run<'a>, &'a Found<'a>) -> SourceFuture<'a>),
    /// Stage three: needs the Services stage two found — pods are found by their Service's
    /// selector, and a backend's address for the handshake comes from its Service's port and
    /// endpoints.
    Behind(for<'a> fn(&'a Run<'a>, &'a Found<'a>) -> SourceFuture<'a>),
    /// Sent beside stages two and three, once `--window` has passed since stage one ended.
    Window(for<'a> fn(&'a Run<'a>) -> SourceFuture<'a>),
}

/// How the run's deadline (`--timeout`) bounds a source.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// As a whole: a source not done by then is one timeout gap under its id.
    Whole,
    /// By itself: it bounds each of its requests and records which did not finish.
    Own,
}

/// Whom a source asks, for deciding that a cluster is unreachable or refused everything.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Asks {
    /// The API server, with the collection's credentials.
    ApiServer,
    /// The API server, on an endpoint any client may read (`/version`, bound to
    /// `system:public-info-viewer` for everyone): a refusal elsewhere does not show here, so it
    /// never counts towards "refused everything".
    ApiServerPublic,
    /// Another server (etcd, Prometheus, a backend), or several (the scrape rounds); the run's
    /// verdicts on access weigh the API server's first scrape on its own.
    Other,
}

/// One source.
pub struct Source {
    /// Its id: the gap source when it fails as a whole (`objects/apiservices`, …).
    pub id: &'static str,
    /// Its progress label; `None` for a source without a step of its own.
    pub what: Option<&'static str>,
    /// Whether these options send it at all.
    pub runs: fn(&CollectOptions) -> bool,
    /// The entry of the same stage whose answer it needs first (by id).
    pub after: Option<&'static str>,
    /// Whom it asks.
    pub asks: Asks,
    /// How `--timeout` bounds it.
    pub deadline: Deadline,
    /// When it is sent, and the fetch.
    pub stage: Stage,
}

fn always(_: &CollectOptions) -> bool {
    true
}

/// A stage-one reader of the API server (the functions `why` shares): bounded as a whole, its
/// evidence applied as it comes.
macro_rules! reads {
    ($id:expr, $what:expr, $fetch:path) => {
        Source {
            id: $id,
            what: Some($what),
            runs: always,
            after: None,
            asks: Asks::ApiServer,
            deadline: Deadline::Whole,
            stage: Stage::Objects(|run| {
                Box::pin(async move { $fetch(&run.fetcher).await.map(Contribution::of) })
            }),
        }
    };
}

/// Every source, in landing order. Add a collector here.
pub static SOURCES: &[Source] = &[
    Source {
        asks: Asks::ApiServerPublic,
        ..reads!(objects::GAP_VERSION, "/version", objects::fetch_version)
    },
    reads!(
        "objects/apiservices",
        "APIServices",
        objects::fetch_api_services
    ),
    reads!(
        "objects/validatingwebhookconfigurations",
        "validating webhooks",
        objects::fetch_validating_webhooks
    ),
    reads!(
        "objects/mutatingwebhookconfigurations",
        "mutating webhooks",
        objects::fetch_mutating_webhooks
    ),
    reads!(
        "objects/customresourcedefinitions",
        "CRDs",
        objects::fetch_crds
    ),
    reads!(
        "objects/flowcontrol",
        "FlowSchemas and priority levels",
        flowcontrol::fetch
    ),
    reads!(
        rbac::CLUSTER_ROLES,
        "ClusterRoles",
        rbac::fetch_cluster_roles
    ),
    reads!(
        rbac::CLUSTER_ROLE_BINDINGS,
        "ClusterRoleBindings",
        rbac::fetch_cluster_role_bindings
    ),
    reads!(rbac::ROLES, "Roles in kube-system", rbac::fetch_roles),
    reads!(
        rbac::ROLE_BINDINGS,
        "RoleBindings in kube-system",
        rbac::fetch_role_bindings
    ),
    reads!("health/readyz", "/readyz", health::fetch_readyz),
    reads!("health/livez", "/livez", health::fetch_livez),
    // etcd is two entries under one id, one per option: without `--etcd-metrics-url` the gaps
    // say what was not looked at and how to look (not judged is not healthy), with no step.
    Source {
        id: etcd::GAP_HEALTH,
        what: None,
        runs: |o| o.etcd.is_none(),
        after: None,
        asks: Asks::Other,
        deadline: Deadline::Own,
        stage: Stage::Objects(etcd::not_supplied),
    },
    Source {
        id: etcd::GAP_HEALTH,
        what: Some("etcd health and alarms"),
        runs: |o| o.etcd.is_some(),
        after: None,
        asks: Asks::Other,
        deadline: Deadline::Own,
        stage: Stage::Objects(etcd::checks),
    },
    Source {
        id: "probes/discovery",
        what: Some("discovery and list probes"),
        runs: always,
        after: None,
        asks: Asks::ApiServer,
        deadline: Deadline::Own,
        stage: Stage::Referenced(discovery::probes),
    },
    Source {
        id: authorizer::GAP_SOURCE,
        what: None,
        runs: |o| o.authorizer_probe,
        after: None,
        asks: Asks::ApiServer,
        deadline: Deadline::Own,
        stage: Stage::Referenced(authorizer::probes),
    },
    Source {
        id: "probes/admission",
        what: None,
        runs: |o| o.probe_admission,
        after: None,
        asks: Asks::ApiServer,
        deadline: Deadline::Own,
        stage: Stage::Referenced(discovery::admission_probes),
    },
    Source {
        id: "objects/backends",
        what: Some("Services, endpoints and events"),
        runs: always,
        after: None,
        asks: Asks::ApiServer,
        deadline: Deadline::Whole,
        stage: Stage::Referenced(backends::services),
    },
    Source {
        id: "objects/pods",
        what: Some("pods"),
        runs: always,
        after: None,
        asks: Asks::ApiServer,
        deadline: Deadline::Whole,
        stage: Stage::Behind(backends::pods),
    },
    // The logs of the Pods `objects/pods` found (their Services' selectors): it waits for that
    // entry alone, not for the handshakes of its stage.
    Source {
        id: "logs",
        what: None,
        runs: |o| o.pod_logs,
        after: Some("objects/pods"),
        asks: Asks::ApiServer,
        deadline: Deadline::Own,
        stage: Stage::Behind(logs::pod_logs),
    },
    Source {
        id: "certificates",
        what: Some("TLS handshakes"),
        runs: always,
        after: None,
        asks: Asks::Other,
        deadline: Deadline::Own,
        stage: Stage::Behind(tls::handshakes),
    },
    Source {
        id: "metrics/prometheus",
        what: Some("Prometheus"),
        runs: |o| o.prometheus.is_some(),
        after: None,
        asks: Asks::Other,
        deadline: Deadline::Own,
        stage: Stage::Metrics(prometheus::metrics),
    },
    Source {
        id: "metrics/apiserver",
        what: Some("/metrics"),
        runs: always,
        after: None,
        asks: Asks::Other,
        deadline: Deadline::Own,
        stage: Stage::Metrics(window::first_scrape),
    },
    Source {
        id: "metrics/apiserver/window",
        what: Some("/metrics (second scrape)"),
        runs: |o| !o.window.is_zero(),
        after: None,
        asks: Asks::Other,
        deadline: Deadline::Own,
        stage: Stage::Window(window::second_scrape),
    },
];

/// What the first round of scrapes said about the API server, for the run's verdicts on access.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstScrape {
    /// The API server's `/metrics` was scraped (not when Prometheus replaces it).
    pub scraped: bool,
    /// It answered.
    pub apiserver_ok: bool,
    /// It answered 401 or 403.
    pub refused: bool,
}

/// What the sources of one collection share: the clients, the options, the deadline, and the
/// answers a later source needs from an earlier one.
pub struct Run<'a> {
    /// The API server's client.
    pub fetcher: Fetcher,
    /// The options.
    pub opts: &'a CollectOptions,
    /// `--timeout` from the start.
    pub deadline: Instant,
    /// Progress output.
    pub progress: &'a dyn Progress,
    /// The API server's URL (the origin of its scraped metrics).
    pub server: String,
    /// etcd, with `--etcd-metrics-url`.
    pub etcd: Option<Etcd>,
    /// Prometheus, with `--prometheus`.
    pub prometheus: Option<Prometheus>,
    /// The user name the collection's requests are authenticated as, when its credentials say it
    /// (`connect::credential_user`).
    pub own_user: Option<String>,
    total: AtomicU64,
    first_round: Mutex<Option<Round>>,
    first_scrape: OnceLock<FirstScrape>,
    prometheus_brought: AtomicBool,
    backends: OnceLock<Arc<Backends>>,
    pods: OnceLock<Arc<PodsBehind>>,
}

impl<'a> Run<'a> {
    /// A run of `opts` through `fetcher` (and the etcd and Prometheus clients).
    pub fn new(
        fetcher: Fetcher,
        opts: &'a CollectOptions,
        deadline: Instant,
        progress: &'a dyn Progress,
        server: String,
        etcd: Option<Etcd>,
        prometheus: Option<Prometheus>,
    ) -> Self {
        Run {
            fetcher,
            opts,
            deadline,
            progress,
            server,
            etcd,
            prometheus,
            own_user: None,
            total: AtomicU64::new(0),
            first_round: Mutex::new(None),
            first_scrape: OnceLock::new(),
            prometheus_brought: AtomicBool::new(false),
            backends: OnceLock::new(),
            pods: OnceLock::new(),
        }
    }

    /// The sources these options send, in table order.
    pub fn sources(&self) -> impl Iterator<Item = &'static Source> + '_ {
        SOURCES.iter().filter(|s| (s.runs)(self.opts))
    }

    /// Tell the progress output how many steps the sources of this run have.
    pub fn count_steps(&self) {
        let total = self.sources().filter(|s| s.what.is_some()).count() as u64;
        self.total.store(total, Ordering::Relaxed);
        self.progress.set_total(total);
    }

    /// A step announced in the total will not happen.
    pub fn skip_step(&self) {
        let total = self.total.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
        self.progress.set_total(total);
    }

    /// What the first round of scrapes said about the API server.
    pub fn first_scrape(&self) -> FirstScrape {
        self.first_scrape.get().copied().unwrap_or_default()
    }

    /// Whether Prometheus brought any metrics (in place of the API server's scrape).
    pub fn prometheus_brought(&self) -> bool {
        self.prometheus_brought.load(Ordering::Relaxed)
    }

    /// Stage two leaves the Services it found for stage three (selectors, addresses); the bundle
    /// gets them when stage two lands, after stage three has run.
    pub(super) fn leave_backends(&self, found: Arc<Backends>) {
        let _ = self.backends.set(found);
    }

    /// Stage two's Services (none when it failed).
    pub(super) fn found_backends(&self) -> Arc<Backends> {
        self.backends.get().cloned().unwrap_or_default()
    }

    /// The Pods stage three found, for the logs that wait for them.
    pub(super) fn leave_pods(&self, pods: Arc<PodsBehind>) {
        let _ = self.pods.set(pods);
    }

    /// The Pods found behind the Services; `None` when their read failed (its gap is recorded).
    pub(super) fn found_pods(&self) -> Option<&Arc<PodsBehind>> {
        self.pods.get()
    }

    /// What the first scrape said about the API server, read by the access verdicts as soon as
    /// stage one is in.
    pub(super) fn leave_first_scrape(&self, said: FirstScrape) {
        let _ = self.first_scrape.set(said);
    }

    /// The first round of scrapes, kept for the second to compare with.
    pub(super) fn leave_first_round(&self, round: Round) {
        if let Ok(mut first) = self.first_round.lock() {
            *first = Some(round);
        }
    }

    /// The first round of scrapes, taken by the second (empty when none was kept).
    pub(super) fn take_first_round(&self) -> Round {
        self.first_round
            .lock()
            .ok()
            .and_then(|mut f| f.take())
            .unwrap_or_default()
    }

    /// Prometheus brought metrics, in place of the API server's scrape.
    pub(super) fn leave_prometheus_brought(&self, brought: bool) {
        self.prometheus_brought.store(brought, Ordering::Relaxed);
    }
}

/// What stage one found, for stages two and three.
pub struct Found<'a> {
    /// The bundle with stage one's objects.
    pub bundle: &'a EvidenceBundle,
    /// The backends they point at.
    pub references: &'a References,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_per_options_and_after_names_an_earlier_entry_of_the_same_stage() {
        let opts = CollectOptions::default();
        let mut seen = std::collections::BTreeSet::new();
        for (i, s) in SOURCES.iter().enumerate() {
            if (s.runs)(&opts) {
                assert!(seen.insert(s.id), "{} twice", s.id);
            }
            if let Some(after) = s.after {
                let j = SOURCES
                    .iter()
                    .position(|e| e.id == after)
                    .unwrap_or_else(|| panic!("{}: no entry {after}", s.id));
                assert!(j < i, "{} is after a later entry", s.id);
                // The run chains one level: what waits is started when its entry is done.
                assert!(
                    SOURCES[j].after.is_none(),
                    "{after} waits itself",
                    after = after
                );
                assert_eq!(
                    std::mem::discriminant(&SOURCES[j].stage),
                    std::mem::discriminant(&s.stage),
                    "{} waits for an entry of another stage",
                    s.id
                );
            }
        }
    }

    #[tokio::test]
    async fn the_steps_are_those_of_the_options() {
        struct Count(AtomicU64);
        impl Progress for Count {
            fn set_total(&self, total: u64) {
                self.0.store(total, Ordering::Relaxed);
            }
            fn step(&self, _: &str) {}
        }
        let count = |opts: &CollectOptions| {
            let progress = Count(AtomicU64::new(0));
            let run = Run::new(
                test_fetcher(),
                opts,
                Instant::now(),
                &progress,
                String::new(),
                None,
                None,
            );
            run.count_steps();
            progress.0.load(Ordering::Relaxed)
        };
        // Stage one's twelve reads, /metrics twice, and four steps of stages two and three.
        assert_eq!(count(&CollectOptions::default()), 12 + 2 + 4);
        let one_scrape = CollectOptions {
            window: std::time::Duration::ZERO,
            probe_admission: true,
            pod_logs: true,
            ..CollectOptions::default()
        };
        assert_eq!(count(&one_scrape), 12 + 1 + 4);
    }

    fn test_fetcher() -> Fetcher {
        let url = "http://127.0.0.1:1"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        let config = kube::Config::new(url);
        let client = kube::Client::try_from(config).unwrap_or_else(|e| panic!("{e}"));
        Fetcher::new(client, std::time::Duration::from_secs(1))
    }
}
