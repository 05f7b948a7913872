//! The `traffic:` of a scenario: the clients the reference server runs against itself
//! (`crate::refserver::traffic` runs them). Only the format lives here.

use serde::Deserialize;
use serde_json::Value;

fn admin() -> String {
    "admin".into()
}
fn get() -> String {
    "GET".into()
}
fn one_u32() -> u32 {
    1
}
fn d500() -> u64 {
    500
}

/// A client the server runs against itself, through its whole request path (authentication, APF,
/// authorization, the aggregator, admission, storage), so that counters move as they do on a
/// cluster with real clients. It starts right after start-up and repeats every `everyMs`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TrafficSpec {
    /// Who sends it: `admin` (default) or a scenario user with a token or a client certificate.
    #[serde(default = "admin")]
    pub user: String,
    /// HTTP method (default `GET`).
    #[serde(default = "get")]
    pub method: String,
    /// Path and query (`/api/v1/namespaces/x/configmaps?dryRun=All`); a `?watch=true` GET is a
    /// watch, read until the server ends it.
    pub path: String,
    /// The request body (an object, sent as JSON).
    #[serde(default)]
    pub body: Option<Value>,
    /// Requests per round (default 1).
    #[serde(default = "one_u32")]
    pub count: u32,
    /// This entry's requests in flight at once, across rounds (default 1): a request waits for a
    /// free slot, so a watch (one slot) is re-opened only when the previous one has ended.
    #[serde(default = "one_u32")]
    pub concurrency: u32,
    /// A round starts this long after the previous one started (once its requests have slots),
    /// ms; 0 = one round only, right after start-up. Default 500.
    #[serde(default = "d500")]
    pub every_ms: u64,
}
