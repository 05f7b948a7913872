//! Entry points that drive the [`Parser`] from a string, a blocking reader, or an async reader.
//!
//! None of them holds the body: each hands the reader's buffer to [`Parser::feed`] and consumes
//! it, so memory is one buffer, one unfinished line and the selected families. A body from a
//! server nobody controls can still be endless; [`Limits::max_body_bytes`] caps how much is read
//! (or the caller wraps the reader, e.g. `AsyncReadExt::take`, and treats a short read as it
//! likes). For the live path, `kube::Client::request_stream` gives an `AsyncBufRead` to pass to
//! [`parse_async`] directly.

use std::io::BufRead;

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::model::MetricFamily;
use super::parse::{Limits, ParseError, ParseErrorKind, Parser};
use super::selection::Selection;

/// Parse a whole text.
///
/// # Errors
/// The first malformed line of a selected family (or a line whose metric name cannot be read).
pub fn parse_str(text: &str, selection: &Selection) -> Result<Vec<MetricFamily>, ParseError> {
    let mut p = Parser::new(selection);
    p.feed(text.as_bytes())?;
    p.finish()
}

/// Parse from a blocking reader, one buffer at a time, with default [`Limits`].
///
/// # Errors
/// As [`parse_str`], plus a read error (as [`ParseErrorKind::Io`], numbered with the line where
/// reading stopped).
pub fn parse_reader<R: BufRead>(
    reader: R,
    selection: &Selection,
) -> Result<Vec<MetricFamily>, ParseError> {
    parse_reader_with(reader, selection, Limits::default())
}

/// [`parse_reader`] within `limits`.
///
/// # Errors
/// As [`parse_reader`], plus [`ParseErrorKind::TooLarge`] past the limits.
pub fn parse_reader_with<R: BufRead>(
    mut reader: R,
    selection: &Selection,
    limits: Limits,
) -> Result<Vec<MetricFamily>, ParseError> {
    let mut p = Parser::with_limits(selection, limits);
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(p.error_ahead(ParseErrorKind::Io, format!("read error: {e}"))),
        };
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len();
        p.feed(chunk)?;
        reader.consume(n);
    }
    p.finish()
}

/// Parse from an async reader (an HTTP body stream), one buffer at a time, with default
/// [`Limits`]: the body is never held whole.
///
/// # Errors
/// As [`parse_reader`].
pub async fn parse_async<R: AsyncBufRead + Unpin>(
    reader: R,
    selection: &Selection,
) -> Result<Vec<MetricFamily>, ParseError> {
    parse_async_with(reader, selection, Limits::default()).await
}

/// [`parse_async`] within `limits`.
///
/// # Errors
/// As [`parse_reader_with`].
pub async fn parse_async_with<R: AsyncBufRead + Unpin>(
    mut reader: R,
    selection: &Selection,
    limits: Limits,
) -> Result<Vec<MetricFamily>, ParseError> {
    let mut p = Parser::with_limits(selection, limits);
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(p.error_ahead(ParseErrorKind::Io, format!("read error: {e}"))),
        };
        if chunk.is_empty() {
            break;
        }
        let n = chunk.len();
        p.feed(chunk)?;
        reader.consume(n);
    }
    p.finish()
}
