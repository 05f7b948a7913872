//! The scenario format (`fixtures/scenarios/*.yaml`, documented in `docs/scenarios.md`).
//!
//! A scenario describes a world for the reference server: Kubernetes objects to start with, users,
//! backends to spawn (extension API servers and webhooks, with certificate specs and behaviours), a
//! map of endpoint addresses to those backends, faults, the clients that use it (`traffic:`), and
//! an `expect:` block with the verdict class per subject and the
//! classes no verdict may blame. The server never reads `expect:`; it is data for `replay`, which
//! compares extpath's verdicts with it.
//!
//! Loading is two-phase, like bundles: [`load`] parses with serde-saphyr rejecting unknown fields,
//! then `validate` checks what the types cannot (references to CAs and
//! backends, classes, kinds). Every error is one line with the file and line.

mod expect;
mod traffic;
mod validate;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

pub use expect::{CLASSES, Expect, SUBJECT_KINDS};
pub use traffic::TrafficSpec;
pub use validate::ScenarioError;

/// `apiVersion` of scenario files.
pub const API_VERSION: &str = "extpath.dev/v1alpha1";
/// `kind` of scenario files.
pub const KIND: &str = "Scenario";

/// The fixed instant certificates are generated around when a scenario sets no `now`.
pub const DEFAULT_NOW: &str = "2026-11-29T08:00:00Z";

/// A scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// Always `extpath.dev/v1alpha1`.
    pub api_version: String,
    /// Always `Scenario`.
    pub kind: String,
    /// Short name.
    pub name: String,
    /// What the scenario shows.
    #[serde(default)]
    pub description: String,
    /// The fixed clock (RFC 3339) certificates are generated around and verified at.
    #[serde(default)]
    pub now: Option<String>,
    /// Server settings.
    #[serde(default)]
    pub server: ServerSettings,
    /// Extra certificate authorities to generate, by name (`caBundle: ${ca:NAME}` refers to them).
    #[serde(default)]
    pub cas: Vec<String>,
    /// Users besides the built-in `admin`.
    #[serde(default)]
    pub users: Vec<UserSpec>,
    /// Backends to spawn.
    #[serde(default)]
    pub backends: Vec<BackendSpec>,
    /// Endpoint address (`IP` or `IP:port`, as in Endpoints or a webhook URL host) → backend name.
    #[serde(default)]
    pub network: BTreeMap<String, String>,
    /// Initial objects, as Kubernetes YAML.
    #[serde(default)]
    pub objects: Vec<Value>,
    /// Faults.
    #[serde(default)]
    pub faults: Faults,
    /// Load the server puts on itself: clients that run through its full request path, so that
    /// counters move as they do on a real cluster with real clients.
    #[serde(default)]
    pub traffic: Vec<TrafficSpec>,
    /// What `replay` expects extpath to say (data the server never reads).
    #[serde(default)]
    pub expect: Expect,
}

fn d60() -> u64 {
    60
}
fn d30000() -> u64 {
    30_000
}
fn d5000() -> u64 {
    5_000
}
fn d1000() -> usize {
    1_000
}
fn d600() -> u32 {
    600
}
fn d15000() -> u64 {
    15_000
}

/// Server-wide settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ServerSettings {
    /// `gitVersion` in `/version`, and the Kubernetes release whose metric names, buckets and
    /// health checks the server speaks (`profile.rs`; 1.24 to 1.30, default `v1.30.14`).
    #[serde(default)]
    pub version: Option<String>,
    /// Requests without credentials are `system:anonymous` (else 401).
    #[serde(default)]
    pub anonymous_auth: bool,
    /// Default request timeout (`--request-timeout`), seconds.
    #[serde(default = "d60")]
    pub request_timeout_seconds: u64,
    /// Period of the APIService availability controller, ms (the real one resyncs every 30 s).
    #[serde(default = "d30000")]
    pub availability_period_ms: u64,
    /// Timeout of one availability discovery probe, ms (5 s in kube-aggregator).
    #[serde(default = "d5000")]
    pub discovery_timeout_ms: u64,
    /// Watch events kept for resuming watches (older resourceVersions get 410).
    #[serde(default = "d1000")]
    pub watch_history: usize,
    /// Interval of watch bookmarks, ms.
    #[serde(default = "d15000")]
    pub bookmark_interval_ms: u64,
    /// Total APF seats (`--max-requests-inflight` + `--max-mutating-requests-inflight`).
    #[serde(default = "d600")]
    pub server_concurrency_limit: u32,
    /// Append about this many bytes of synthetic histogram families to `/metrics` (benchmarks of
    /// large clusters; see `synthetic.rs`). 0 = none.
    #[serde(default)]
    pub synthetic_metrics_bytes: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            version: None,
            anonymous_auth: false,
            request_timeout_seconds: d60(),
            availability_period_ms: d30000(),
            discovery_timeout_ms: d5000(),
            watch_history: d1000(),
            bookmark_interval_ms: d15000(),
            server_concurrency_limit: d600(),
            synthetic_metrics_bytes: 0,
        }
    }
}

/// A user.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct UserSpec {
    /// User name.
    pub name: String,
    /// Groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Bearer token.
    #[serde(default)]
    pub token: Option<String>,
    /// Issue a client certificate for the user (CN = name, O = groups).
    #[serde(default)]
    pub client_certificate: bool,
    /// What the user may do (members of `system:masters` may do everything).
    #[serde(default)]
    pub allow: Vec<Rule>,
}

/// An allow rule, RBAC-like.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Rule {
    /// Verbs (`*` for all).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// API groups (`""` core, `*` all).
    #[serde(default)]
    pub api_groups: Vec<String>,
    /// Resources (`*` all).
    #[serde(default)]
    pub resources: Vec<String>,
    /// Namespaces (empty = all).
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Non-resource URLs (a trailing `*` is a prefix match).
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    /// Object names (empty = all), as RBAC's `resourceNames`: deploy/rbac.yaml grants the
    /// impersonation of its probes' users by name.
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// What a backend is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BackendKind {
    /// An extension API server behind an APIService.
    Extension,
    /// An admission webhook (validating or mutating: the configuration decides).
    AdmissionWebhook,
    /// A CRD conversion webhook.
    ConversionWebhook,
}

/// A backend to spawn.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BackendSpec {
    /// Name (referenced by `network`).
    pub name: String,
    /// What it is.
    pub kind: BackendKind,
    /// Its serving certificate.
    pub certificate: CertSpec,
    /// For extensions: what it serves.
    #[serde(default)]
    pub extension: Option<ExtensionSpec>,
    /// How it behaves.
    #[serde(default)]
    pub behaviour: Behaviour,
}

/// Validity of a generated certificate, relative to the scenario clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ValiditySpec {
    /// Valid from 30 days before `now` for ten years.
    #[default]
    Valid,
    /// Expired one day before `now`.
    Expired,
    /// Valid only from one day after `now`.
    NotYetValid,
}

/// A serving certificate. SAN mismatch = other `names`; wrong CA = another `issuer` than the one
/// the caBundle names; self-signed = `issuer: selfSigned`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CertSpec {
    /// Name of a CA in `cas`, or `selfSigned`.
    pub issuer: String,
    /// DNS names and IP addresses.
    pub names: Vec<String>,
    /// Validity.
    #[serde(default)]
    pub validity: ValiditySpec,
}

/// What an extension API server serves.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExtensionSpec {
    /// `group/version` it serves.
    pub group_version: String,
    /// Its resources.
    pub resources: Vec<ExtensionResource>,
    /// Its objects (served by list/get/watch).
    #[serde(default)]
    pub objects: Vec<Value>,
}

/// One resource of an extension server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExtensionResource {
    /// Plural.
    pub name: String,
    /// Kind.
    pub kind: String,
    /// Namespaced (default true).
    #[serde(default = "yes")]
    pub namespaced: bool,
}

fn yes() -> bool {
    true
}

/// What the discovery document of an extension looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DiscoveryBehaviour {
    /// A correct APIResourceList.
    #[default]
    Normal,
    /// An APIResourceList for another groupVersion.
    WrongGroupVersion,
    /// A JSON body that is not an APIResourceList.
    NotApiResourceList,
}

/// How the backend treats the aggregator's front-proxy client certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FrontProxy {
    /// Trust `X-Remote-*` only with a client cert from the trusted front-proxy CA; otherwise 401.
    #[default]
    Verify,
    /// Trust `X-Remote-*` headers whatever the client certificate.
    Ignore,
}

/// The extension's authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Authorize {
    /// Everyone (no delegation at all).
    #[default]
    All,
    /// A generic apiserver's delegated authentication and authorization, decided by the scenario's
    /// RBAC objects for the backend's identity (the service account of the Pod the `network` maps
    /// to it): at start it reads `kube-system/extension-apiserver-authentication` (exiting when it
    /// may not, unless `authenticationTolerateLookupFailure`, which makes every request anonymous);
    /// it allows `system:masters` without a review and asks a SubjectAccessReview for everyone else
    /// — a 500 when its identity may not create one.
    Delegated,
    /// Nobody (403).
    None,
}

/// What a webhook answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum WebhookAnswer {
    /// Allow (conversion: convert).
    #[default]
    Allow,
    /// Deny with `denyMessage` (admission only).
    Deny,
    /// A body that is not a valid review.
    BadResponse,
}

/// Backend behaviour.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Behaviour {
    /// Nothing listens on its port (connection refused).
    #[serde(default)]
    pub down: bool,
    /// Every response is delayed this long, ms.
    #[serde(default)]
    pub slow_ms: u64,
    /// An extension server whose own storage hangs: its resource requests wait this long, ms,
    /// then answer 504 `Timeout: request did not complete within requested timeout`, and its
    /// `/readyz` says `[-]etcd failed`; discovery still answers at once.
    #[serde(default)]
    pub storage_hang_ms: Option<u64>,
    /// Answer every request with this status (a Status body).
    #[serde(default)]
    pub status: Option<u16>,
    /// Discovery document.
    #[serde(default)]
    pub discovery: DiscoveryBehaviour,
    /// Close every watch after this long, ms.
    #[serde(default)]
    pub close_watches_after_ms: Option<u64>,
    /// Go away this long after the first watch was opened, ms: stop listening (new connections
    /// are refused) while the connections already open stay, as a stopping server's graceful
    /// termination does — its open watches stay quiet, or end at `closeWatchesAfterMs`.
    #[serde(default)]
    pub down_after_first_watch_ms: Option<u64>,
    /// Front-proxy client certificate handling.
    #[serde(default)]
    pub front_proxy: FrontProxy,
    /// The front-proxy CA the backend trusts: a CA in `cas` (default: the server's real one).
    #[serde(default)]
    pub trusted_front_proxy_ca: Option<String>,
    /// Authorization (and, when `delegated`, delegated authentication).
    #[serde(default)]
    pub authorize: Authorize,
    /// With `authorize: delegated`: keep running when the authentication ConfigMap cannot be read
    /// (`--authentication-tolerate-lookup-failure`), treating every request as anonymous.
    #[serde(default)]
    pub authentication_tolerate_lookup_failure: bool,
    /// Webhook answer.
    #[serde(default)]
    pub answer: WebhookAnswer,
    /// Message of a denial.
    #[serde(default)]
    pub deny_message: Option<String>,
    /// JSON patch a mutating webhook returns.
    #[serde(default)]
    pub patch: Option<Vec<Value>>,
}

/// Faults.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Faults {
    /// Storage latency and errors.
    #[serde(default)]
    pub storage: Vec<StorageFault>,
    /// Watch terminations.
    #[serde(default)]
    pub watch: Option<WatchFault>,
    /// An etcd-style `/metrics` endpoint and its values.
    #[serde(default)]
    pub etcd: Option<EtcdSpec>,
}

/// A storage fault for one resource (or `*`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StorageFault {
    /// Resource plural, or `*`.
    pub resource: String,
    /// Group (default: any).
    #[serde(default)]
    pub group: Option<String>,
    /// Storage operations (`get`, `list`, `create`, `update`, `delete`); empty = all.
    #[serde(default)]
    pub operations: Vec<String>,
    /// Added latency, ms.
    #[serde(default)]
    pub latency_ms: u64,
    /// Error returned instead of the result (`etcdserver: request timed out`).
    #[serde(default)]
    pub error: Option<String>,
    /// Hold matching operations until the test releases them (`RunningServer::release_held`).
    #[serde(default)]
    pub hold: bool,
}

/// Forced watch termination.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WatchFault {
    /// Close watches of these resources (empty = all) this long after they start, ms.
    pub terminate_after_ms: u64,
    /// Resources.
    #[serde(default)]
    pub resources: Vec<String>,
}

fn one() -> f64 {
    1.0
}

/// Values of the etcd `/metrics` endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EtcdSpec {
    /// Observations of `etcd_disk_wal_fsync_duration_seconds`, seconds.
    #[serde(default)]
    pub wal_fsync_seconds: Vec<f64>,
    /// Observations of `etcd_disk_backend_commit_duration_seconds`, seconds.
    #[serde(default)]
    pub backend_commit_seconds: Vec<f64>,
    /// `etcd_server_has_leader`.
    #[serde(default = "one")]
    pub has_leader: f64,
    /// `etcd_server_leader_changes_seen_total`.
    #[serde(default)]
    pub leader_changes: f64,
    /// `etcd_mvcc_db_total_size_in_bytes`.
    #[serde(default)]
    pub db_size_bytes: f64,
    /// `etcd_server_quota_backend_bytes`.
    #[serde(default)]
    pub quota_backend_bytes: Option<f64>,
}

/// Load and validate a scenario file.
///
/// # Errors
/// A [`ScenarioError`] whose `Display` is one line with the file and line.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        path: shown.clone(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    load_str(&text, &shown)
}

/// Load and validate a scenario from text; `path` is only used in messages.
///
/// # Errors
/// A [`ScenarioError`] naming `path` and the line.
pub fn load_str(text: &str, path: &str) -> Result<Scenario, ScenarioError> {
    if text.trim().is_empty() {
        return Err(ScenarioError {
            path: path.into(),
            line: 0,
            message: "empty file, expected a Scenario".into(),
        });
    }
    let scenario: Scenario =
        serde_saphyr::from_str(text).map_err(|e: serde_saphyr::Error| ScenarioError {
            path: path.into(),
            line: e.location().map(|l| l.line() as usize).unwrap_or(0),
            message: e.to_string().lines().next().unwrap_or_default().to_string(),
        })?;
    validate::validate(&scenario, text, path)?;
    Ok(scenario)
}

impl Scenario {
    /// The scenario clock.
    pub fn clock(&self) -> jiff::Timestamp {
        self.now
            .as_deref()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| DEFAULT_NOW.parse().unwrap_or(jiff::Timestamp::UNIX_EPOCH))
    }

    /// A scenario with no objects and no backends (an empty cluster).
    pub fn empty(name: &str) -> Self {
        Scenario {
            api_version: API_VERSION.into(),
            kind: KIND.into(),
            name: name.into(),
            description: String::new(),
            now: None,
            server: ServerSettings::default(),
            cas: Vec::new(),
            users: Vec::new(),
            backends: Vec::new(),
            network: BTreeMap::new(),
            objects: Vec::new(),
            faults: Faults::default(),
            traffic: Vec::new(),
            expect: Expect::default(),
        }
    }
}
