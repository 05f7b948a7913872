//! `why METHOD PATH`: reproduce one request and gather the evidence of its path only.
//!
//! The order matters, so it is fixed:
//!
//! 1. `/version` and a first `/metrics` scrape, with the gathering credentials ([`open_window`]):
//!    whether the API server can be reached at all (exit code 3 when it answers neither), and the
//!    start of a metrics window. This comes before anything else — before a write is planned — so
//!    that only a server that answers nothing is "unreachable": one that answers `/version` but
//!    hangs on storage is a server whose request is diagnosed.
//! 2. The request itself, with the user's credentials (`--as` impersonation included): GET, LIST or
//!    WATCH as given, or a server-side dry-run write. Recorded whatever the outcome ([`send`]).
//! 3. The path's evidence ([`gather`]), with the gathering credentials — without impersonation,
//!    so that a user who may not read APIServices, or whose priority level is saturated, still
//!    gets a diagnosis — then a second `/metrics` scrape. The window therefore brackets the request:
//!    its own rejection, its webhook calls and the etcd latency around it are in the increases.
//!
//! The result is an ordinary [`EvidenceBundle`] holding only this path's objects, plus the request
//! as a probe marked `reproduced` (so the engine builds the `Request` subject from it whatever its
//! outcome, and fills `related` with the APIService, webhook or CRD it concerns; a write's probe
//! lists the webhooks it is sent to), and a [`Trace`] of how the path was resolved: what serves
//! it, which webhooks and which FlowSchema match and why. Collection never judges: which rung broke is
//! the engine's answer.

pub mod flow_match;
pub mod gather;
pub mod send;
pub mod target;
pub mod webhook_match;
pub mod write;

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::bundle::{
    CollectionSource, EvidenceBundle, Gap, Kind, MetricTarget, ObjectRef, TimeBasis,
};
use crate::collect::{Connection, FetchError, Fetcher, metrics, objects};

pub use crate::bundle::trace::{Investigation, Trace};

pub use flow_match::{FlowMatch, UserInfo};
pub use gather::{CrdRoute, Serving};
pub use send::SendOptions;
pub use target::{Addressed, Method, ResourcePath, Target, TargetError};
pub use webhook_match::{Decision, WebhookMatch};
pub use write::{ObjectFile, PlanError, PlannedWrite, plan_write, read_object};

/// What `why` does beyond the request.
#[derive(Debug, Clone)]
pub struct WhyOptions {
    /// Per request (`--request-timeout`), the reproduced one included.
    pub request_timeout: Duration,
    /// Bound on the gathering after the request (`--timeout`).
    pub timeout: Duration,
    /// How long a watch is read (`--watch-for`).
    pub watch_for: Duration,
    /// `--backend-address svc.ns=host:port`: where to reach a backend for the TLS handshake.
    pub backend_addresses: BTreeMap<String, String>,
    /// The impersonated user (`--as`, `--as-group`), when given.
    pub as_user: Option<UserInfo>,
}

/// The request to reproduce.
#[derive(Debug, Clone)]
pub struct Reproduction {
    /// Method and path.
    pub target: Target,
    /// The body of a dry-run write.
    pub body: Option<Vec<u8>>,
    /// The labels of a written object (webhook object selectors).
    pub object_labels: BTreeMap<String, String>,
    /// What planning the request could not learn (kept as gaps of the bundle).
    pub gaps: Vec<Gap>,
}

/// The start of the investigation: the version answer and the first metrics scrape.
pub struct Window {
    version: Result<serde_json::Value, FetchError>,
    first: Result<Vec<crate::promtext::MetricFamily>, FetchError>,
    first_at: jiff::Timestamp,
}

/// Whether the API server answers at all, and the start of the metrics window.
///
/// # Errors
/// [`WhyError::Unreachable`] when neither `/version` nor `/metrics` got an answer (a refused or
/// broken connection, or no response in time); any HTTP answer, even an error status, is an answer.
pub async fn open_window(
    gatherer: &Connection,
    request_timeout: Duration,
) -> Result<Window, WhyError> {
    let f = Fetcher::new(gatherer.client.clone(), request_timeout);
    let (version, first) = tokio::join!(f.get_json("/version"), metrics::scrape_whole(&f));
    let first_at = jiff::Timestamp::now();
    if let (Err(v), Err(m)) = (&version, &first)
        && v.is_unreachable()
        && m.is_unreachable()
    {
        return Err(WhyError::Unreachable(
            crate::collect::tls_words::unreachable_message(&gatherer.server, &v.to_string()),
        ));
    }
    Ok(Window {
        version,
        first,
        first_at,
    })
}

/// Why there is nothing to investigate.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WhyError {
    /// The API server could not be reached at all (exit code 3).
    #[error("{0}")]
    Unreachable(String),
    /// The request was refused before sending (a write without `dryRun=All`).
    #[error("{0}")]
    Refused(String),
}

/// Run `fut` until `deadline`; a failure or a miss becomes a gap named `source`.
pub(crate) async fn bounded_gap<T>(
    deadline: Instant,
    source: &str,
    fut: impl std::future::Future<Output = Result<T, FetchError>>,
) -> Result<T, Gap> {
    super::bounded(deadline, fut)
        .await
        .map_err(|e| super::gap_for(source, &e))
}

/// Reproduce `repro` with `user` and investigate its path with `gatherer` (the same connection
/// unless `--as` impersonates), in the window `window` opened.
///
/// # Errors
/// [`WhyError::Refused`] for a write without `dryRun=All` (never sent).
pub async fn investigate(
    user: &Connection,
    gatherer: &Connection,
    repro: &Reproduction,
    window: Window,
    opts: &WhyOptions,
) -> Result<Investigation, WhyError> {
    let f = Fetcher::new(gatherer.client.clone(), opts.request_timeout);

    // 1. Reachability and the start of the window: `open_window`, before the request was planned.
    let Window {
        version,
        first,
        first_at,
    } = window;

    // 2. The request.
    let as_name = opts.as_user.as_ref().map(|u| u.name.as_str());
    let mut probe = send::send(
        &user.client,
        &repro.target,
        repro.body.clone(),
        as_name,
        SendOptions {
            request_timeout: opts.request_timeout,
            watch_for: opts.watch_for,
        },
    )
    .await
    .map_err(WhyError::Refused)?;

    // 3. The path, then the end of the window.
    let deadline = Instant::now() + opts.timeout;
    let write = repro
        .target
        .method
        .is_write()
        .then_some(gather::WriteFacts {
            object_labels: &repro.object_labels,
        });
    let path = gather::gather(&f, &repro.target, &probe, write, opts, deadline).await;
    let second = metrics::scrape_whole(&f).await;
    let second_at = jiff::Timestamp::now();

    let mut bundle = EvidenceBundle::new(CollectionSource::Live {
        server: gatherer.server.clone(),
        context: gatherer.context.clone(),
    });
    match &version {
        Ok(v) => bundle.collection.server_version = objects::version_of(v),
        Err(e) => bundle.gaps.push(super::gap_for("version", e)),
    }
    let origin = format!("{}/metrics", gatherer.server);
    match (first, second) {
        (Ok(a), Ok(b)) => bundle.metrics.push(metrics::windowed(
            MetricTarget::Apiserver,
            &origin,
            a,
            b,
            first_at,
            second_at,
        )),
        (_, Ok(b)) => bundle.metrics.push(metrics::single(
            MetricTarget::Apiserver,
            &origin,
            b,
            second_at,
        )),
        (Ok(a), Err(e)) => {
            bundle.metrics.push(metrics::single(
                MetricTarget::Apiserver,
                &origin,
                a,
                first_at,
            ));
            bundle.gaps.push(super::gap_for("metrics/apiserver", &e));
        }
        (Err(e), Err(_)) => bundle.gaps.push(super::gap_for("metrics/apiserver", &e)),
    }
    bundle.collection.metrics_window = bundle
        .metrics_for(MetricTarget::Apiserver)
        .and_then(|m| m.window.clone());

    let mut path = path;
    let scratch = std::mem::take(&mut path.bundle);
    bundle.api_services = scratch.api_services;
    bundle.services = scratch.services;
    bundle.endpoints = scratch.endpoints;
    bundle.endpoint_slices = scratch.endpoint_slices;
    bundle.pods = scratch.pods;
    bundle.webhooks = scratch.webhooks;
    bundle.crds = scratch.crds;
    bundle.flow_schemas = scratch.flow_schemas;
    bundle.priority_levels = scratch.priority_levels;
    bundle.certificates = scratch.certificates;
    bundle.health_checks = scratch.health_checks;
    bundle.events = scratch.events;
    bundle.cluster_roles = scratch.cluster_roles;
    bundle.cluster_role_bindings = scratch.cluster_role_bindings;
    bundle.roles = scratch.roles;
    bundle.role_bindings = scratch.role_bindings;
    bundle.gaps.extend(repro.gaps.iter().cloned());
    bundle.gaps.extend(scratch.gaps);

    // The request concerns the APIService of an aggregated path; for anything else the engine
    // reads the object from the request itself (a webhook named in the error, the CRD of the path).
    if probe.user.is_none() {
        probe.user = path.user.as_ref().map(|u| u.name.clone());
    }
    if let Some(a) = &path.api_service {
        probe.target = Some(ObjectRef::cluster(Kind::ApiService, a));
    }
    // The webhooks a write is sent to, as matched: what a slow write's latency is compared with.
    probe.admitted_by = path
        .webhooks
        .iter()
        .filter(|m| m.decision == webhook_match::Decision::Called)
        .map(|m| ObjectRef::cluster(m.kind.clone(), &m.name))
        .collect();
    bundle.probes.push(probe);
    bundle.collection.collected_at = Some(second_at);
    bundle.collection.collected_at_basis = Some(TimeBasis::Clock);
    crate::collect::tls::verify_served_chains(&mut bundle);

    let trace = Trace {
        method: repro.target.method,
        verb: repro.target.verb.clone(),
        addressed: repro.target.addressed.clone(),
        serving: path.serving,
        user: path.user,
        api_service: path.api_service,
        crd: path.crd,
        webhooks: path.webhooks,
        webhooks_not_in_rules: path.webhooks_not_in_rules,
        flow_schema: path.flow_schema,
        flow_schema_from_header: path.flow_schema_from_header,
        window_seconds: bundle
            .collection
            .metrics_window
            .as_ref()
            .map(|w| w.seconds()),
    };
    Ok(Investigation {
        request: bundle.probes.len() - 1,
        bundle,
        trace,
    })
}
