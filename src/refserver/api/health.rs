//! `/version`, `/healthz`, `/livez`, `/readyz` (with `?verbose` and per-check paths).
//!
//! The check list is the release's (`profile.rs`: 1.24's whole list as the real captures show it,
//! a subset of 1.30's otherwise; `/livez` and `/healthz` without the readyz-only checks) and the
//! wording kube-apiserver's: `[+]ping ok`, `[-]etcd failed: reason withheld` under a storage
//! fault, and the closing `readyz check passed` / `readyz check failed` (HTTP 500 on failure, like
//! the real one during an etcd stall).

use serde_json::Value;

use super::super::profile::READYZ_ONLY_CHECKS;
use super::super::state::State;
use super::super::status::text_response;
use super::super::storage_faults::etcd_healthy;

/// `/version`: the release the scenario chose (`profile.rs`).
pub fn version(state: &State) -> Value {
    state.profile.version_info()
}

/// `/healthz`, `/livez` or `/readyz`, optionally one check (`/readyz/etcd`).
pub fn health(state: &State, path: &str, verbose: bool) -> http::Response<axum::body::Body> {
    let mut segments = path.trim_start_matches('/').splitn(2, '/');
    let endpoint = segments.next().unwrap_or("healthz");
    let only = segments.next();
    let etcd_ok = etcd_healthy(state);
    let checks: Vec<&str> = state
        .profile
        .health_checks()
        .iter()
        .copied()
        .filter(|c| endpoint == "readyz" || !READYZ_ONLY_CHECKS.contains(c))
        .filter(|c| only.is_none_or(|o| o == *c))
        .collect();
    if checks.is_empty() {
        return text_response(404, "404 page not found\n".into());
    }
    let ok = etcd_ok || !checks.contains(&"etcd");
    let mut text = String::new();
    if verbose || !ok {
        for c in &checks {
            if *c == "etcd" && !etcd_ok {
                text.push_str("[-]etcd failed: reason withheld\n");
            } else {
                text.push_str(&format!("[+]{c} ok\n"));
            }
        }
        text.push_str(&format!(
            "{endpoint} check {}\n",
            if ok { "passed" } else { "failed" }
        ));
    } else {
        text.push_str("ok");
    }
    text_response(if ok { 200 } else { 500 }, text)
}
