//! kube-apiserver `/metrics`: streamed through the shared parser, twice, a window apart.
//!
//! The body of a large cluster's `/metrics` is tens of megabytes; it is fed to the parser line by
//! line as it arrives and only the families the rules read are kept. Two scrapes turn cumulative
//! counters into what happened during the window — a single scrape describes the whole life of the
//! process, which is how an old incident's counters get mistaken for a current one.

use crate::bundle::metrics::default_selection;
use crate::bundle::{MetricTarget, MetricsSource, Window};
use crate::promtext::{self, MetricFamily};

use super::{FetchError, Fetcher};

/// One scrape of `/metrics`.
///
/// # Errors
/// [`FetchError`] when the endpoint cannot be read or does not parse.
pub async fn scrape(f: &Fetcher) -> Result<Vec<MetricFamily>, FetchError> {
    let selection = default_selection();
    let mut parser = promtext::Parser::new(&selection);
    f.get_lines("/metrics", |line| {
        parser.push_line(line).map_err(|e| e.to_string())
    })
    .await?;
    Ok(parser.finish())
}

/// A source from one scrape: counters are cumulative history.
pub fn single(families: Vec<MetricFamily>, at: jiff::Timestamp, server: &str) -> MetricsSource {
    MetricsSource {
        target: MetricTarget::Apiserver,
        origin: format!("{server}/metrics"),
        scraped_at: Some(at),
        window: None,
        families,
    }
}

/// A source from two scrapes: every counter and histogram series carries its change over the window.
pub fn windowed(
    first: Vec<MetricFamily>,
    mut second: Vec<MetricFamily>,
    start: jiff::Timestamp,
    end: jiff::Timestamp,
    server: &str,
) -> MetricsSource {
    let window = Window { start, end };
    promtext::apply_window(&first, &mut second, window.seconds());
    MetricsSource {
        target: MetricTarget::Apiserver,
        origin: format!("{server}/metrics"),
        scraped_at: Some(end),
        window: Some(window),
        families: second,
    }
}
