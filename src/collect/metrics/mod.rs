//! Where the metric families come from: a direct scrape of `/metrics` (kube-apiserver's, and
//! etcd's when `--etcd-metrics-url` is given), or an existing Prometheus (`--prometheus`).
//!
//! - [`scrape`](mod@scrape): one `/metrics` body, streamed through the shared parser under
//!   [`ScrapeLimits`], and the shaping of a target's families into a
//!   [`crate::bundle::MetricsSource`] (one scrape, or two a window apart).
//! - [`window`]: the rounds of direct scrapes — every target once, then again after `--window` —
//!   and the gaps of those that failed.
//! - [`prometheus`]: the same families read over Prometheus's HTTP API instead, for `--since`; its
//!   PromQL ([`prometheus::promql`]) and the families it knows ([`prometheus::families`]).
//!
//! What this module does not own: etcd's health and alarms ([`super::etcd`]), the HTTP client for
//! URLs that are not the API server ([`super::url_client`]), and what the families mean (the
//! engine's metric facts).

pub mod prometheus;
pub mod scrape;
pub mod window;

pub use scrape::{
    DEFAULT_MAX_SCRAPE_BYTES, DEFAULT_MAX_SERIES, ScrapeLimits, ScrapeParser, Scraped, scrape,
    scrape_whole, single, windowed,
};
