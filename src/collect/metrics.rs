//! kube-apiserver `/metrics`: streamed through the shared parser, twice, a window apart; and the
//! shaping of any scraped target's families into a [`MetricsSource`].
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
    parser
        .finish()
        .map_err(|e| FetchError::Decode(e.to_string()))
}

/// A source from one scrape: counters are cumulative history.
pub fn single(
    target: MetricTarget,
    origin: &str,
    families: Vec<MetricFamily>,
    at: jiff::Timestamp,
) -> MetricsSource {
    MetricsSource {
        target,
        origin: origin.to_string(),
        scraped_at: Some(at),
        window: None,
        families,
    }
}

/// A source from two scrapes: every counter and histogram series carries its change over the window.
pub fn windowed(
    target: MetricTarget,
    origin: &str,
    first: Vec<MetricFamily>,
    mut second: Vec<MetricFamily>,
    start: jiff::Timestamp,
    end: jiff::Timestamp,
) -> MetricsSource {
    let window = Window { start, end };
    promtext::apply_window(&first, &mut second, window.seconds());
    MetricsSource {
        target,
        origin: origin.to_string(),
        scraped_at: Some(end),
        window: Some(window),
        families: second,
    }
}
