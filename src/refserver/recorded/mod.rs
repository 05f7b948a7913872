//! Replay of a recorded incident: a bundle served back behind the reference server, so that
//! `collect`, `scan` and kubectl read the recording as they would read the cluster it came from.
//!
//! [`RefServer::replay`](super::RefServer::replay) loads the bundle's objects into the store as recorded (no defaulting, no controllers:
//! an APIService keeps its recorded conditions, Endpoints grow no EndpointSlices), and the server
//! then answers from the recording where a live one would compute:
//!
//! * `/metrics` renders the recorded kube-apiserver families; a windowed recording is served as its
//!   two scrapes (the first request gets the counters at the window's start, every later one those
//!   at its end), a single dump stays one. etcd's recorded metrics and `/health` get a plain-HTTP
//!   port of their own, like etcd's client port ([`endpoints`]);
//! * `/readyz`, `/livez` and `/version` give back the recorded checks (status 200 or 500) and version;
//! * requests to a remote APIService's group/version get the recorded outcome of the same request —
//!   extpath's own probe of it, else what a person's client recorded — with its status, headers,
//!   body or Status and latency, instead of being proxied ([`outcomes`]). Without one, the answer is
//!   what the aggregator would give from the recorded state alone: `service unavailable` when the
//!   APIService is not Available, the recorded x509 failure when its served chain did not verify,
//!   else an empty discovery document;
//! * FlowSchemas and priority levels are served in the flowcontrol version they were read from, and
//!   discovery lists the recorded APIServices' groups beside the built-in ones ([`discovery`]);
//! * what the recording does not hold is answered 403, so a collection records a gap ("not seen")
//!   instead of concluding it is absent: a gap the recording has, or a raw/hand-made recording that
//!   has none of a kind (a live collection that found no Services did see that there are none) —
//!   except the four lists a scan judges, which a raw recording that was not given them answers
//!   404, since nothing refused them ([`discovery`]).
//!
//! This mode serves recorded outcomes by design; scenario mode, where failures happen for real,
//! stays the basis of the reference server's tests. What cannot be served — client output, logs,
//! served certificate chains, … — is not this module's: `bundle::carried` lists it, and
//! `replay serve --bundle` writes it beside the kubeconfig for `--merge`. Like the rest of the
//! reference server, nothing here knows a verdict.

pub mod discovery;
pub mod endpoints;
pub mod outcomes;
mod recording;

pub use recording::{Recorded, not_recorded};

use std::collections::BTreeSet;

use axum::body::Body;
use http::Response;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::registry;
use super::request::RequestInfo;
use super::scenario::Scenario;
use super::status::ApiError;
use super::store::{Key, Store};
use crate::bundle::{CollectionSource, EvidenceBundle, to_k8s};

/// APF in a replay never limits: a recording's priority levels (a queue-full incident) would
/// otherwise reject the collection that reads them.
const UNLIMITED_SEATS: u32 = 1_000_000;

/// A name for the server's scenario, from where the recording came from.
fn describe(bundle: &EvidenceBundle) -> String {
    match &bundle.collection.source {
        CollectionSource::Live { server, .. } => format!("recording of {server}"),
        CollectionSource::Raw { paths } => format!("recording imported from {}", paths.join(" ")),
        CollectionSource::Unknown => "recording".to_string(),
    }
}

/// The store key of a recorded object, or why it cannot be stored.
fn key_of(store: &Store, obj: &Value) -> Result<Key, String> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // flowcontrol objects keep the version they were read in, which the registry (v1) may not
    // serve; their key is versionless anyway.
    if let Some(("flowcontrol.apiserver.k8s.io", _)) = api_version.split_once('/') {
        let resource = match kind {
            "FlowSchema" => "flowschemas",
            _ => "prioritylevelconfigurations",
        };
        return Ok(Key::new("flowcontrol.apiserver.k8s.io", resource, "", name));
    }
    let def = registry::by_kind(store, api_version, kind)
        .ok_or_else(|| format!("{api_version} {kind} is not served"))?;
    Ok(super::controllers::key_of(&def, obj))
}

/// Store the recording's objects as they are, and a Namespace for every namespace they live in.
pub(super) fn load(store: &Store, bundle: &EvidenceBundle) -> anyhow::Result<()> {
    let objects = to_k8s::objects(bundle);
    let namespaces: BTreeSet<String> = objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/namespace").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    for ns in namespaces {
        let o = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
            "status": {"phase": "Active"}});
        let _ = store.create(Key::new("", "namespaces", "", &ns), o, false);
    }
    for o in objects {
        let key = key_of(store, &o).map_err(|e| anyhow::anyhow!("loading the recording: {e}"))?;
        // A second object of the same name (a hand-made bundle) cannot be stored; the first stays.
        let _ = store.create(key, o, false);
    }
    Ok(())
}

/// The scenario a replay's server runs: empty, named after where the recording came from, speaking
/// the recorded release.
pub(super) fn scenario_for(bundle: &EvidenceBundle) -> Scenario {
    let mut scenario = Scenario::empty(&describe(bundle));
    scenario.server.server_concurrency_limit = UNLIMITED_SEATS;
    scenario.server.version = bundle
        .collection
        .server_version
        .as_ref()
        .map(|v| v.git_version.clone());
    scenario
}

/// Accept and drop connections until shutdown: a handshake with a recorded backend ends at once.
pub(super) async fn close_every_connection(
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => drop(accepted),
        }
    }
}

/// Where a collection beside the replay shakes hands with the recording's backends: every Service
/// and webhook URL the recording references, all at the port that closes at once.
pub fn backend_addresses(r: &Recorded) -> std::collections::BTreeMap<String, String> {
    let b = &r.bundle;
    let to = format!("127.0.0.1:{}", r.no_backend_port);
    let mut targets: Vec<&crate::bundle::WebhookTarget> =
        b.webhooks.iter().map(|w| &w.target).collect();
    targets.extend(b.crds.iter().filter_map(|c| c.conversion.webhook.as_ref()));
    let mut keys: Vec<String> = b
        .api_services
        .iter()
        .filter_map(|a| a.service.as_ref())
        .chain(targets.iter().filter_map(|t| t.service.as_ref()))
        .map(|s| format!("{}.{}", s.name, s.namespace))
        .collect();
    for t in targets {
        let Some(url) = t.url.as_deref() else {
            continue;
        };
        let hostport = url
            .split_once("://")
            .map_or(url, |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default();
        let has_port = if hostport.starts_with('[') {
            hostport.contains("]:")
        } else {
            hostport.contains(':')
        };
        keys.push(if has_port {
            hostport.to_string()
        } else {
            format!("{hostport}:443")
        });
    }
    keys.into_iter().map(|k| (k, to.clone())).collect()
}

/// The answer of a replayed recording to a request by `user` (after impersonation), or `None` when
/// the reference server's own handlers answer it (objects from the store, `/api`, …). Called after
/// authentication, before APF and authorization: a recorded answer is given exactly as recorded.
pub async fn answer(
    store: &Store,
    r: &Recorded,
    info: &RequestInfo,
    path_and_query: &str,
    user: &str,
) -> Option<Response<Body>> {
    if let Some(resp) = outcomes::answer(r, info, path_and_query, user).await {
        return Some(resp);
    }
    if let Some(resp) = endpoints::answer(r, info) {
        return Some(resp);
    }
    if let Some(resp) = discovery::answer(store, r, info) {
        return Some(resp);
    }
    if !matches!(info.method.as_str(), "GET" | "HEAD") {
        return Some(
            ApiError::Status {
                code: 405,
                reason: "MethodNotAllowed",
                message: format!(
                    "{} is not allowed: a replayed recording is read-only",
                    info.verb
                ),
                details: None,
            }
            .into_response(),
        );
    }
    None
}
