//! Requests whose outcome is known: probes extpath sent, and requests seen in client output.
//!
//! A probe is one HTTP exchange (or one failed attempt at one) with what a diagnosis needs from it:
//! status, latency, the headers that matter (Retry-After, the APF headers, Audit-Id), the
//! Kubernetes `Status` body with its causes, the transport error text, and — for probes extpath sent —
//! the rung of the extension path it tested. Client output (kubectl stderr, `-v6` traces, curl) is
//! recorded in the same shape with `origin.kind: client_output`, so rules see one kind of thing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ObjectRef;

/// The rungs of an extension path, outside-in (docs/diagnosis.md#rule-9). When rules of several classes fire
/// on one subject, the one on the earliest rung is the verdict and the rest are its consequences.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Rung {
    /// API Priority and Fairness / max-in-flight: the outermost filter of every request.
    Flowcontrol,
    /// The object itself: APIService name and spec, webhook configuration, CRD definition.
    Registration,
    /// The Service the object points at exists.
    Service,
    /// The referenced port exists on the Service.
    Port,
    /// Ready endpoints exist for the port.
    Endpoints,
    /// TLS: caBundle, serving certificate, names, expiry.
    Tls,
    /// The backend is reachable and answers discovery for its group/version.
    Discovery,
    /// Authentication: the user at kube-apiserver, or the front-proxy identity at the backend.
    Authn,
    /// Authorization: the user at kube-apiserver, or delegated authorization at the backend.
    Authz,
    /// Admission webhooks on writes.
    Admission,
    /// CRD conversion webhooks.
    Conversion,
    /// Verbs on a served resource (list/get through the path).
    Verb,
    /// storage.Interface and etcd.
    Storage,
    /// Watch streams and the watch cache.
    Watch,
    /// Beyond the API server: the extension server's own backend, controllers.
    Backend,
}

impl Rung {
    /// Every rung in ladder order.
    pub const ALL: [Rung; 15] = [
        Rung::Flowcontrol,
        Rung::Registration,
        Rung::Service,
        Rung::Port,
        Rung::Endpoints,
        Rung::Tls,
        Rung::Discovery,
        Rung::Authn,
        Rung::Authz,
        Rung::Admission,
        Rung::Conversion,
        Rung::Verb,
        Rung::Storage,
        Rung::Watch,
        Rung::Backend,
    ];

    /// The snake_case name used in rules and output.
    pub fn as_str(self) -> &'static str {
        match self {
            Rung::Flowcontrol => "flowcontrol",
            Rung::Registration => "registration",
            Rung::Service => "service",
            Rung::Port => "port",
            Rung::Endpoints => "endpoints",
            Rung::Tls => "tls",
            Rung::Discovery => "discovery",
            Rung::Authn => "authn",
            Rung::Authz => "authz",
            Rung::Admission => "admission",
            Rung::Conversion => "conversion",
            Rung::Verb => "verb",
            Rung::Storage => "storage",
            Rung::Watch => "watch",
            Rung::Backend => "backend",
        }
    }
}

impl std::fmt::Display for Rung {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who produced the observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// extpath sent the request itself.
    Probe,
    /// Read from what a client printed (kubectl, curl, a trace).
    ClientOutput,
}

/// The client whose output an observation was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClientTool {
    /// extpath itself.
    Extpath,
    /// kubectl's normal stderr (`Error from server (…): …`).
    Kubectl,
    /// kubectl with `-v6`…`-v9` (round_trippers status lines, server response objects).
    KubectlTrace,
    /// curl (`-i` headers, `-w` status lines, body).
    Curl,
    /// A controller, as the Warning Event it recorded reports the failed request (`Error creating:
    /// Internal error occurred: failed calling webhook …` of a ReplicaSet).
    Controller,
    /// Some other client.
    Other,
}

impl ClientTool {
    /// How close this client's record of a response is to what was on the wire (lower is closer):
    /// curl shows the bytes; a kubectl trace the status and, from `-v8`, the body; kubectl's own
    /// error line is a Status it made up from the response (`the server is currently unable to
    /// handle the request` for a plain-text 503); a controller's Event summarises it further.
    #[must_use]
    pub fn wire_rank(self) -> u8 {
        match self {
            ClientTool::Curl => 0,
            ClientTool::Extpath => 1,
            ClientTool::KubectlTrace => 2,
            ClientTool::Other => 3,
            ClientTool::Kubectl => 4,
            ClientTool::Controller => 5,
        }
    }
}

/// Where an observation came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeOrigin {
    /// Probe or client output.
    pub kind: ProbeKind,
    /// The client.
    pub tool: ClientTool,
    /// The file(s) it was read from (raw import).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// A Kubernetes `Status` cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct StatusCause {
    /// e.g. `UnexpectedServerResponse`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The inner error, e.g. `error trying to reach service: dial tcp …: connection refused`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// `field`, when set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// A Kubernetes `Status` body (an error response, or an ERROR watch event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct StatusBody {
    /// `Failure` or `Success`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// `message`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// `reason` (`ServiceUnavailable`, `Forbidden`, `Expired`, `Timeout`, …).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// `details.group`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// `details.kind` (for a Forbidden, the resource).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// `details.name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// `details.causes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
}

impl StatusBody {
    /// Read a Kubernetes `Status` object (`kind: Status`, or an object with `status: Failure` and a
    /// numeric `code`); `None` when the value is not one.
    pub fn from_json(v: &serde_json::Value) -> Option<StatusBody> {
        let obj = v.as_object()?;
        let is_status = obj.get("kind").and_then(|k| k.as_str()) == Some("Status")
            || (obj.get("status").and_then(|s| s.as_str()).is_some()
                && obj.get("code").is_some_and(|c| c.is_u64())
                && obj.get("message").is_some());
        if !is_status {
            return None;
        }
        Some(StatusBody::read_fields(obj))
    }

    /// The fields of an object already known to be a `Status` (what each reader recognises as one
    /// differs: a collected body, a raw file's JSON): message, reason, code, details and causes.
    pub(crate) fn read_fields(obj: &serde_json::Map<String, serde_json::Value>) -> StatusBody {
        let text = |v: Option<&serde_json::Value>| {
            v.and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let details = obj.get("details");
        let d = |k: &str| text(details.and_then(|x| x.get(k)));
        let causes = details
            .and_then(|x| x.get("causes"))
            .and_then(serde_json::Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| StatusCause {
                        reason: text(c.get("reason")),
                        message: text(c.get("message")),
                        field: text(c.get("field")),
                    })
                    .collect()
            })
            .unwrap_or_default();
        StatusBody {
            status: text(obj.get("status")),
            message: text(obj.get("message")),
            reason: text(obj.get("reason")),
            code: obj
                .get("code")
                .and_then(serde_json::Value::as_u64)
                .and_then(|c| u16::try_from(c).ok()),
            group: d("group"),
            kind: d("kind"),
            name: d("name"),
            causes,
        }
    }
}

/// The headers of a response that matter to a diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct ResponseHeaders {
    /// `Retry-After` (APF 429, shutdown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
    /// `X-Kubernetes-PF-FlowSchema-UID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_schema_uid: Option<String>,
    /// `X-Kubernetes-PF-PriorityLevel-UID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_level_uid: Option<String>,
    /// `Audit-Id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit_id: Option<String>,
    /// `Content-Type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// `Date`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

/// How a watch stream went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct WatchOutcome {
    /// Events received (ADDED/MODIFIED/DELETED/BOOKMARK).
    #[serde(default)]
    pub events: u64,
    /// BOOKMARK events among them.
    #[serde(default)]
    pub bookmarks: u64,
    /// An in-stream `ERROR` event (e.g. 410 Expired, `too old resource version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_event: Option<StatusBody>,
    /// How the stream ended.
    pub end: WatchEnd,
    /// Detail of the end: the client's error text (`stream error: … INTERNAL_ERROR`, curl (92), …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_detail: Option<String>,
    /// How long the stream was open, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
}

/// How a watch stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum WatchEnd {
    /// The server closed it cleanly (normal at the watch timeout).
    Closed,
    /// The stream broke (reset, INTERNAL_ERROR, unexpected EOF).
    Broken,
    /// The client gave up waiting: the stream was open and silent.
    ClientTimeout,
    /// Still open when observed / unknown.
    #[default]
    Unknown,
}

/// One observed request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Probe {
    /// Probe or client output, and from which files.
    pub origin: ProbeOrigin,
    /// HTTP method (`GET`, `POST`, …), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Request path with query (`/apis/wardle.example.com/v1alpha1`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// kubectl's own description of the request, e.g. `get flunders.wardle.example.com`
    /// (the suffix kubectl prints in parentheses), when that is all that is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The user the request was sent as, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// HTTP status, if a response arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Latency in milliseconds, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
    /// The headers that matter.
    #[serde(default, skip_serializing_if = "is_default_headers")]
    pub headers: ResponseHeaders,
    /// The `Status` body, when the response was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_body: Option<StatusBody>,
    /// A non-Status response body, truncated to 2 KiB (e.g. `service unavailable`,
    /// `error trying to reach service: …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The error the client printed or the transport error (no response, or in addition to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The client's exit code, for client output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Number of identical attempts folded into this record (client-go retries, floods).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub attempts: u32,
    /// For a request repeated many times: how many attempts got each status (e.g. `{"429": 393}`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub status_counts: std::collections::BTreeMap<String, u64>,
    /// The rung of the path the probe tested (probes sent by extpath).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rung: Option<Rung>,
    /// The object the request concerns (the APIService of an aggregated path, a webhook, a CRD),
    /// when the evidence allows mapping it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ObjectRef>,
    /// For watch requests: how the stream went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<WatchOutcome>,
    /// When the request was made, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<jiff::Timestamp>,
    /// For a discovery request that succeeded: the `groupVersion` the returned document names
    /// (empty when it names none, e.g. a body that is not an APIResourceList). A 2xx body is not
    /// kept, so this is what remains of it to tell a backend that serves another group/version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery_group_version: Option<String>,
    /// Sent by `why` to reproduce the request a user asks about: it is judged as a Request
    /// whatever its outcome — a watch that went quiet or a write that succeeded slowly is a
    /// question too, not only a failure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reproduced: bool,
    /// The address the client dialled, `host:port` (`127.0.0.1:9443`, `hook.ns.svc:443`), when
    /// its output says so — curl's `-v` notes (`Failed to connect to <host> port <port>`,
    /// `Connected to <host> (<ip>) port <port>`, `Trying <ip>:<port>`). What ties a dial of a
    /// backend's own address to the webhook or CRD conversion webhook served there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The admission webhooks this write is sent to, as extpath matched them the way the API
    /// server does (rules, namespace and object selectors): `kind` `ValidatingWebhook` or
    /// `MutatingWebhook`, `name` the webhook's `webhooks[].name`. Webhooks whose call could not
    /// be decided (`matchConditions`) are not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admitted_by: Vec<ObjectRef>,
}

fn one() -> u32 {
    1
}
fn is_one(n: &u32) -> bool {
    *n == 1
}
fn is_default_headers(h: &ResponseHeaders) -> bool {
    *h == ResponseHeaders::default()
}

impl Probe {
    /// An empty observation of the given origin.
    pub fn new(origin: ProbeOrigin) -> Self {
        Probe {
            origin,
            method: None,
            path: None,
            description: None,
            user: None,
            status: None,
            latency_ms: None,
            headers: ResponseHeaders::default(),
            status_body: None,
            body: None,
            error: None,
            exit_code: None,
            attempts: 1,
            status_counts: Default::default(),
            rung: None,
            target: None,
            watch: None,
            at: None,
            discovery_group_version: None,
            reproduced: false,
            address: None,
            admitted_by: Vec::new(),
        }
    }

    /// Every piece of error text this observation carries: transport error, body, Status message and
    /// causes, watch error event — the inner errors rules classify on (docs/diagnosis.md#rule-8).
    pub fn error_texts(&self) -> Vec<&str> {
        let mut out = Vec::new();
        if let Some(e) = &self.error {
            out.push(e.as_str());
        }
        if let Some(b) = &self.body {
            out.push(b.as_str());
        }
        if let Some(s) = &self.status_body {
            out.push(s.message.as_str());
            out.extend(s.causes.iter().map(|c| c.message.as_str()));
        }
        if let Some(w) = &self.watch {
            if let Some(s) = &w.error_event {
                out.push(s.message.as_str());
            }
            if let Some(d) = &w.end_detail {
                out.push(d.as_str());
            }
        }
        out.retain(|s| !s.is_empty());
        out
    }
}
