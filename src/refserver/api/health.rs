//! `/version`, `/healthz`, `/livez`, `/readyz` (with `?verbose` and per-check paths).
//!
//! The check list and wording are kube-apiserver's: `[+]ping ok`, `[-]etcd failed: reason withheld`
//! under a storage fault, and the closing `readyz check passed` / `readyz check failed` (HTTP 500
//! on failure, like the real one during an etcd stall).

use serde_json::{Value, json};

use super::super::state::State;
use super::super::status::text_response;
use super::super::storage::etcd_healthy;

/// `/version`.
pub fn version(state: &State) -> Value {
    let git = state
        .scenario
        .server
        .version
        .clone()
        .unwrap_or_else(|| "v1.30.14".into());
    let trimmed = git.trim_start_matches('v');
    let mut parts = trimmed.split('.');
    let major = parts.next().unwrap_or("1").to_string();
    let minor = parts.next().unwrap_or("30").to_string();
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.22.12",
        "compiler": "gc",
        "platform": "linux/amd64",
        "emulationMajor": major,
        "emulationMinor": minor,
    })
}

const CHECKS: &[&str] = &[
    "ping",
    "log",
    "etcd",
    "informer-sync",
    "poststarthook/start-apiextensions-controllers",
    "poststarthook/apiservice-registration-controller",
    "poststarthook/apiservice-status-available-controller",
];

/// `/healthz`, `/livez` or `/readyz`, optionally one check (`/readyz/etcd`).
pub fn health(state: &State, path: &str, verbose: bool) -> http::Response<axum::body::Body> {
    let mut segments = path.trim_start_matches('/').splitn(2, '/');
    let endpoint = segments.next().unwrap_or("healthz");
    let only = segments.next();
    let etcd_ok = etcd_healthy(state);
    let checks: Vec<&str> = CHECKS
        .iter()
        .copied()
        .filter(|c| endpoint == "readyz" || *c != "informer-sync")
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
