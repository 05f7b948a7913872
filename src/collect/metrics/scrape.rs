//! One `/metrics` scrape (kube-apiserver's here; etcd's through the same [`ScrapeParser`]), streamed
//! through the shared parser; and the shaping of any scraped target's families into a
//! [`MetricsSource`] — one scrape, or two a window apart (the rounds are [`super::window`]).
//!
//! The body of a large cluster's `/metrics` is tens of megabytes; it is fed to the parser line by
//! line as it arrives and only the families the rules read are kept. Two scrapes turn cumulative
//! counters into what happened during the window — a single scrape describes the whole life of the
//! process, which is how an old incident's counters get mistaken for a current one.
//!
//! A scrape is bounded by [`ScrapeLimits`]: the bytes read (`--max-scrape-bytes`), the series kept
//! (`--max-series`) and the longest line (the parser's 1 MiB). A scrape that reaches one is cut
//! there: the series read before the cut are kept, and the cut is said ([`Scraped::cut`]) so the
//! collection records it as a gap.

use crate::bundle::metrics::default_selection;
use crate::bundle::{MetricTarget, MetricsSource, Window};
use crate::promtext::{self, MetricFamily};

use crate::collect::fetch::LineLimits;
use crate::collect::{FetchError, Fetcher};

/// How much one scrape may bring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScrapeLimits {
    /// `--max-scrape-bytes`: the most bytes of one `/metrics` body read.
    pub max_bytes: u64,
    /// `--max-series`: the most series kept of the families the rules read, per scrape.
    pub max_series: usize,
}

/// `--max-scrape-bytes` default: 256 MiB, several times the largest clusters' `/metrics`.
pub const DEFAULT_MAX_SCRAPE_BYTES: u64 = 256 << 20;
/// `--max-series` default: 200,000 series of the selected families (a large cluster's
/// kube-apiserver has a few tens of thousands).
pub const DEFAULT_MAX_SERIES: usize = 200_000;

impl Default for ScrapeLimits {
    fn default() -> Self {
        ScrapeLimits {
            max_bytes: DEFAULT_MAX_SCRAPE_BYTES,
            max_series: DEFAULT_MAX_SERIES,
        }
    }
}

impl ScrapeLimits {
    /// The line limits of the body: the parser's longest line and `--max-scrape-bytes`.
    pub fn lines(&self) -> LineLimits {
        LineLimits {
            max_line: promtext::Limits::default().max_line_bytes,
            max_bytes: self.max_bytes,
            bytes_flag: "--max-scrape-bytes",
        }
    }
}

/// What one scrape kept.
#[derive(Debug)]
pub struct Scraped {
    /// The selected families (up to the cut, when there was one).
    pub families: Vec<MetricFamily>,
    /// Why the body was not read to its end, when a limit cut it.
    pub cut: Option<String>,
}

/// A parser of one scrape within its [`ScrapeLimits`]: feed it the body's lines, then give it
/// how the body ended.
pub struct ScrapeParser<'s> {
    parser: promtext::Parser<'s>,
    max_series: usize,
}

impl<'s> ScrapeParser<'s> {
    /// A parser keeping the families of `selection`.
    pub fn new(selection: &'s crate::promtext::Selection, limits: ScrapeLimits) -> Self {
        ScrapeParser {
            parser: promtext::Parser::new(selection),
            max_series: limits.max_series,
        }
    }

    /// One line of the body.
    ///
    /// # Errors
    /// [`FetchError::Decode`] for a malformed line, [`FetchError::Cut`] past `--max-series`.
    pub fn line(&mut self, line: &str) -> Result<(), FetchError> {
        self.parser
            .push_line(line)
            .map_err(|e| FetchError::Decode(e.to_string()))?;
        if self.parser.series_kept() > self.max_series {
            return Err(FetchError::Cut(format!(
                "more than {} series of the families extpath reads (--max-series), so the body was cut there",
                self.max_series
            )));
        }
        Ok(())
    }

    /// What was kept, given how reading the body ended: a cut keeps the series before it.
    ///
    /// # Errors
    /// The error that ended the body, unless it was a cut.
    pub fn finish(self, read: Result<(), FetchError>) -> Result<Scraped, FetchError> {
        let cut = match read {
            Ok(()) => None,
            Err(FetchError::Cut(why)) => Some(why),
            Err(e) => return Err(e),
        };
        let families = self
            .parser
            .finish()
            .map_err(|e| FetchError::Decode(e.to_string()))?;
        Ok(Scraped { families, cut })
    }
}

/// One scrape of `/metrics`.
///
/// # Errors
/// [`FetchError`] when the endpoint cannot be read or does not parse.
pub async fn scrape(f: &Fetcher, limits: ScrapeLimits) -> Result<Scraped, FetchError> {
    let selection = default_selection();
    let mut parser = ScrapeParser::new(&selection, limits);
    let read = f
        .get_lines("/metrics", limits.lines(), |line| parser.line(line))
        .await;
    parser.finish(read)
}

/// One scrape of `/metrics` within the default [`ScrapeLimits`], whole or not at all: a cut
/// scrape is the [`FetchError::Cut`] that ended it (for callers that keep no partial scrapes).
///
/// # Errors
/// As [`scrape`], and the cut.
pub async fn scrape_whole(f: &Fetcher) -> Result<Vec<MetricFamily>, FetchError> {
    let scraped = scrape(f, ScrapeLimits::default()).await?;
    match scraped.cut {
        Some(why) => Err(FetchError::Cut(why)),
        None => Ok(scraped.families),
    }
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
