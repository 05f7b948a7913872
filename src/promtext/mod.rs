//! Streaming parser for the Prometheus text exposition format (0.0.4), keeping only the families
//! asked for, and the arithmetic over two scrapes (window deltas, rates, `histogram_quantile`).
//!
//! Why not prometheus-parse: it is several times slower (a regex per line, a `String` per sample)
//! and mangles label values containing `,`, `=` or `}` and escapes (STACK.md §3). It stays in the
//! tree only as a dev-dependency, as the reference of a differential test on ordinary input.
//!
//! Layout: `lex` (characters of one line), `parse` (families, series, HELP/TYPE, joining),
//! `stream` (string, blocking and async entry points), `selection`, `window`, `quantile`,
//! `model` (the shape kept in bundles), and `write` (families back to text, for a replayed
//! recording). The behaviour on the format's loose ends is documented in `parse` and `lex`, and
//! in `docs/metrics-parser.md` with the measured figures.
//!
//! This module knows nothing of bundles, clusters or rules.

mod lex;
pub mod model;
mod parse;
mod quantile;
mod selection;
mod stream;
mod window;
mod write;

#[cfg(test)]
mod parse_tests;
#[cfg(test)]
mod window_tests;

pub use model::{Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue, SeriesWindow};
pub use parse::{Limits, ParseError, ParseErrorKind, Parser};
pub use quantile::{histogram_quantile, histogram_quantile_floor};
pub use selection::Selection;
pub use stream::{parse_async, parse_async_with, parse_reader, parse_reader_with, parse_str};
pub use window::apply_window;
pub use write::{format_value, window_start, write_family, write_text};
