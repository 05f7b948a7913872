//! Streaming parser for the Prometheus text exposition format, keeping only the families asked for.
//!
//! Why not prometheus-parse: it is about 8× slower (a regex per line, a `String` per sample) and
//! mangles label values containing `,`, `=` or `}` and escapes (STACK.md §3). It stays in the tree
//! only as a dev-dependency, as the reference of a differential test on ordinary input.
//!
//! This module owns the text format and the arithmetic over scrapes (window deltas, rates,
//! `histogram_quantile`). It knows nothing of bundles, clusters or rules.

pub mod model;
mod parse;
mod quantile;
mod window;

pub use model::{Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue, SeriesWindow};
pub use parse::{ParseError, Parser, Selection, parse_reader, parse_str};
pub use quantile::histogram_quantile;
pub use window::apply_window;
