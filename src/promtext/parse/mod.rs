//! The push parser: exposition lines in, selected [`MetricFamily`]s out.
//!
//! It owns the family-level rules of the text format 0.0.4 — which family a sample name belongs to,
//! HELP/TYPE, joining histogram `_bucket`/`_sum`/`_count` and summary `_sum`/`_count` onto their
//! series, duplicate lines — and leaves character rules to `lex` and chunking of byte streams to
//! `stream`. HELP/TYPE lines and the joining of samples seen before their TYPE are in `comments`.
//!
//! Cheapness of unselected families is the design constraint: a sample line is routed by its
//! metric name alone (the route of the previous line's name is reused, then a per-name cache), and
//! only the lines of selected families are checked for UTF-8, lexed and stored. So a malformed line
//! of an unselected family is not an error, but a line whose metric name cannot be read is, since
//! it cannot be attributed to any family.
//!
//! Behaviour on the format's loose ends, for selected families:
//! * A line given twice (same name and labels) keeps the last value (the spec leaves it undefined).
//! * A sample before its family's `# TYPE` is accepted: `x_bucket`/`x_sum`/`x_count` seen before
//!   `# TYPE x histogram` are held aside and joined onto `x` when the TYPE arrives (and dropped if it
//!   never does and `x_bucket` itself was not selected). A TYPE that contradicts an earlier one, or
//!   declares a histogram whose plain `x` samples were already seen, is an error.
//! * A family without `# TYPE` (or with `untyped`/`unknown`) is untyped; `x_total` is a family of its
//!   own name, as in format 0.0.4 (OpenMetrics' `# TYPE x counter` + `x_total` is not joined).
//! * A selected family declared by `# TYPE` but without samples is kept, with no series: it is
//!   exported and has nothing yet, which is not the same as not exported.
//! * Histogram `le` is compared as a number, so `1`, `1.0` and `1e+00` are the same bucket; a NaN
//!   `le` is an error. Buckets come out sorted; a missing `+Inf` bucket is not an error here.
//! * Label values are kept as written, empty ones included (`group=""` is a label with an empty
//!   value, not an absent label), because rules read them as such.
//!
//! The full table of behaviours, and the measured figures, are in `docs/metrics-parser.md`.

mod comments;
mod family;

use std::collections::HashMap;

use super::lex::{self, LabelScratch};
use super::model::{MetricFamily, MetricKind};
use super::selection::Selection;
use family::{FamilyBuilder, set_part};

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// A malformed line (including invalid UTF-8 in a selected family).
    Syntax,
    /// Reading the input failed.
    Io,
    /// The input went past a [`Limits`] bound.
    TooLarge,
}

/// A malformed line, a read error, or an input past its limits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
    /// The class of error.
    pub kind: ParseErrorKind,
}

/// Bounds on the input, so a caller streaming a body it does not control cannot be made to read or
/// buffer without end. Memory is otherwise bounded by the selected families, not by the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Stop with [`ParseErrorKind::TooLarge`] once more bytes than this were read. `None`: no cap.
    pub max_body_bytes: Option<u64>,
    /// The longest line accepted (the only part of the body ever buffered whole).
    pub max_line_bytes: usize,
}

// No body cap by default: callers that stream from a server they do not control set one. The line
// cap is far above real input: the real 1.24 kube-apiserver `/metrics` in `captures/` is 1.1–1.2 MB
// in about 8,000 lines, the longest 577 bytes, so 1 MiB is only reached by a broken or hostile body.
impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: None,
            max_line_bytes: 1 << 20,
        }
    }
}

/// Which part of a family a sample name sets.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    Value,
    Bucket,
    Sum,
    Count,
}

const SUFFIXES: [(&str, Part); 3] = [
    ("_bucket", Part::Bucket),
    ("_sum", Part::Sum),
    ("_count", Part::Count),
];

/// Where the samples of one metric name go.
#[derive(Clone, Copy, Debug)]
enum Route {
    Skip,
    Keep { family: usize, part: Part },
}

/// Push-based parser: feed it bytes ([`Parser::feed`]) or lines ([`Parser::push_line`]), then
/// [`Parser::finish`].
pub struct Parser<'s> {
    selection: &'s Selection,
    limits: Limits,
    line_no: usize,
    bytes_read: u64,
    /// The unfinished last line of the previous chunk.
    carry: Vec<u8>,
    /// Every TYPE seen, selected or not: suffixed names resolve through it.
    types: HashMap<String, MetricKind>,
    /// HELP of selected families, for families whose first sample comes later.
    helps: HashMap<String, String>,
    families: Vec<FamilyBuilder>,
    family_index: HashMap<String, usize>,
    routes: HashMap<Box<[u8]>, Route>,
    last_name: Vec<u8>,
    last_route: Option<Route>,
    labels: LabelScratch,
    key: Vec<u8>,
    lines_kept: usize,
    series_kept: usize,
}

/// A cap on the name → route cache, so a body of endless distinct names cannot grow it unbounded.
///
/// A real kube-apiserver body has a couple of hundred sample names (183 in the 1.24 capture
/// `00-healthy`), so the cap is never reached by honest input; clearing the whole cache when it is
/// reached costs only recomputation.
const MAX_CACHED_ROUTES: usize = 1 << 16;

impl<'s> Parser<'s> {
    /// A parser keeping the families `selection` wants, with default [`Limits`].
    pub fn new(selection: &'s Selection) -> Self {
        Parser::with_limits(selection, Limits::default())
    }

    /// A parser keeping the families `selection` wants, within `limits`.
    pub fn with_limits(selection: &'s Selection, limits: Limits) -> Self {
        Parser {
            selection,
            limits,
            line_no: 0,
            bytes_read: 0,
            carry: Vec::new(),
            types: HashMap::new(),
            helps: HashMap::new(),
            families: Vec::new(),
            family_index: HashMap::new(),
            routes: HashMap::new(),
            last_name: Vec::new(),
            last_route: None,
            labels: LabelScratch::default(),
            key: Vec::new(),
            lines_kept: 0,
            series_kept: 0,
        }
    }

    /// Number of sample lines kept so far.
    pub fn lines_kept(&self) -> usize {
        self.lines_kept
    }

    /// Number of series kept so far (a histogram's series counts once, whatever its buckets).
    pub fn series_kept(&self) -> usize {
        self.series_kept
    }

    /// Lines seen so far.
    pub fn lines_seen(&self) -> usize {
        self.line_no
    }

    pub(super) fn error(&self, kind: ParseErrorKind, message: String) -> ParseError {
        ParseError {
            line: self.line_no.max(1),
            message,
            kind,
        }
    }

    /// An error about the line after the last one seen (where reading stopped).
    pub(super) fn error_ahead(&self, kind: ParseErrorKind, message: String) -> ParseError {
        ParseError {
            line: self.line_no + 1,
            message,
            kind,
        }
    }

    fn syntax(&self, message: String) -> ParseError {
        self.error(ParseErrorKind::Syntax, message)
    }

    /// Feed a chunk of the body; lines may span chunks. Only the unfinished last line is kept.
    ///
    /// # Errors
    /// The first malformed line of a selected family, a line whose metric name cannot be read, or
    /// an input past the [`Limits`].
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), ParseError> {
        self.bytes_read += chunk.len() as u64;
        if let Some(max) = self.limits.max_body_bytes
            && self.bytes_read > max
        {
            return Err(self.error_ahead(
                ParseErrorKind::TooLarge,
                format!("body is larger than the {max}-byte limit"),
            ));
        }
        let mut rest = chunk;
        if !self.carry.is_empty() {
            let Some(nl) = memchr::memchr(b'\n', rest) else {
                self.check_line_length(self.carry.len() + rest.len())?;
                self.carry.extend_from_slice(rest);
                return Ok(());
            };
            self.check_line_length(self.carry.len() + nl)?;
            let mut line = std::mem::take(&mut self.carry);
            line.extend_from_slice(&rest[..nl]);
            let result = self.push_line(&line);
            line.clear();
            self.carry = line;
            result?;
            rest = &rest[nl + 1..];
        }
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', rest) {
            self.push_line(&rest[start..nl])?;
            start = nl + 1;
        }
        let tail = &rest[start..];
        self.check_line_length(tail.len())?;
        self.carry.extend_from_slice(tail);
        Ok(())
    }

    fn check_line_length(&self, len: usize) -> Result<(), ParseError> {
        if len > self.limits.max_line_bytes {
            return Err(self.error_ahead(
                ParseErrorKind::TooLarge,
                format!(
                    "line is longer than the {}-byte limit",
                    self.limits.max_line_bytes
                ),
            ));
        }
        Ok(())
    }

    /// Feed one whole line, with or without its `\n` (or `\r\n`). For callers that split lines
    /// themselves; use either this or [`Parser::feed`] on one parser, not both.
    ///
    /// # Errors
    /// A malformed line of a selected family, or a line whose metric name cannot be read.
    pub fn push_line(&mut self, raw: impl AsRef<[u8]>) -> Result<(), ParseError> {
        let mut line = raw.as_ref();
        self.line_no += 1;
        // `\r\n` is not in the 0.0.4 spec, but bodies saved on Windows or passed through some
        // proxies have it, and a stray `\r` would otherwise end up in the last value.
        if let [rest @ .., b'\n'] = line {
            line = rest;
        }
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        if line.len() > self.limits.max_line_bytes {
            return Err(self.error(
                ParseErrorKind::TooLarge,
                format!(
                    "line is longer than the {}-byte limit",
                    self.limits.max_line_bytes
                ),
            ));
        }
        let line = &line[lex::skip_blanks(line, 0)..];
        match line.first() {
            None => return Ok(()),
            Some(b'#') => return self.comment(&line[1..]),
            Some(_) => {}
        }
        // Consecutive lines mostly share their metric name: a prefix compare with the previous
        // one then stands for scanning the name and looking up its route.
        let n = self.last_name.len();
        let same_name =
            line.len() > n && !lex::is_metric_name_byte(line[n]) && line[..n] == self.last_name[..];
        let (name_len, route) = match self.last_route {
            Some(r) if same_name => (n, r),
            _ => {
                let len = lex::metric_name_len(line).unwrap_or(0);
                if len == 0 {
                    return Err(self.invalid_name(line));
                }
                let name = &line[..len];
                let r = self.route(name);
                self.last_name.clear();
                self.last_name.extend_from_slice(name);
                self.last_route = Some(r);
                (len, r)
            }
        };
        if !line
            .get(name_len)
            .is_none_or(|&b| lex::is_blank(b) || b == b'{')
        {
            return Err(self.invalid_name(line));
        }
        match route {
            Route::Skip => Ok(()),
            Route::Keep { family, part } => self.sample(family, part, line, name_len),
        }
    }

    fn invalid_name(&self, line: &[u8]) -> ParseError {
        self.syntax(format!("invalid metric name at {:?}", lex::excerpt(line)))
    }

    fn route(&mut self, name: &[u8]) -> Route {
        if let Some(&r) = self.routes.get(name) {
            return r;
        }
        // Metric names are ASCII (checked by the caller), so this never replaces anything.
        let name_str = String::from_utf8_lossy(name);
        let r = self.compute_route(&name_str);
        if self.routes.len() >= MAX_CACHED_ROUTES {
            self.routes.clear();
        }
        self.routes.insert(name.into(), r);
        r
    }

    fn compute_route(&mut self, name: &str) -> Route {
        let (family, part) = self.resolve(name);
        if self.selection.wants(family) {
            let family = self.family_for(family, false);
            return Route::Keep { family, part };
        }
        // `x_bucket` before `# TYPE x histogram`: hold it aside in case that TYPE comes.
        let waits_for_type = part == Part::Value
            && SUFFIXES.iter().any(|(suffix, _)| {
                name.strip_suffix(suffix).is_some_and(|base| {
                    !self.types.contains_key(base) && self.selection.wants(base)
                })
            });
        if waits_for_type {
            let family = self.family_for(name, true);
            return Route::Keep {
                family,
                part: Part::Value,
            };
        }
        Route::Skip
    }

    /// Map a sample name to its family and the part of the family it sets.
    fn resolve<'n>(&self, name: &'n str) -> (&'n str, Part) {
        // An exact TYPE wins over a suffix: a counter may be named `…_count` (kube-apiserver's
        // `apiserver_admission_webhook_rejection_count` is one) and is then its own family, not
        // the `_count` of a histogram `apiserver_admission_webhook_rejection`.
        if self.types.contains_key(name) {
            return (name, Part::Value);
        }
        for (suffix, part) in SUFFIXES {
            if let Some(base) = name.strip_suffix(suffix) {
                match self.types.get(base) {
                    Some(MetricKind::Histogram) => return (base, part),
                    Some(MetricKind::Summary) if part != Part::Bucket => return (base, part),
                    _ => {}
                }
            }
        }
        (name, Part::Value)
    }

    fn family_for(&mut self, name: &str, provisional: bool) -> usize {
        if let Some(&i) = self.family_index.get(name) {
            return i;
        }
        let family = MetricFamily {
            name: name.to_string(),
            kind: self.types.get(name).copied().unwrap_or_default(),
            help: self.helps.get(name).cloned(),
            series: Vec::new(),
        };
        self.families.push(FamilyBuilder::new(family, provisional));
        let i = self.families.len() - 1;
        self.family_index.insert(name.to_string(), i);
        i
    }

    fn sample(
        &mut self,
        fi: usize,
        part: Part,
        line: &[u8],
        name_len: usize,
    ) -> Result<(), ParseError> {
        let Ok(text) = std::str::from_utf8(line) else {
            return Err(self.syntax("not valid UTF-8".into()));
        };
        let name = &text[..name_len];
        let (value, timestamp, le) = self
            .lex_sample(text, name_len, part)
            .map_err(|m| self.syntax(format!("{name}: {m}")))?;
        // A bare `x` sample of a histogram has no place in its series (no bucket, sum or count):
        // accepting it would silently drop a value the exporter meant something by.
        if part == Part::Value && self.families[fi].family.kind == MetricKind::Histogram {
            return Err(self.syntax(format!(
                "{name}: a histogram sample needs a _bucket, _sum or _count suffix"
            )));
        }
        let builder = &mut self.families[fi];
        let before = builder.family.series.len();
        let labels = &self.labels;
        let key = labels.key(&mut self.key);
        let si = builder.series_for(key, || {
            (0..labels.len())
                .map(|i| (labels.name(i).to_string(), labels.value(i).to_string()))
                .collect()
        });
        if builder.family.series.len() > before {
            self.series_kept += 1;
        }
        set_part(&mut builder.family.series[si], part, value, le);
        if timestamp.is_some() {
            builder.family.series[si].timestamp_ms = timestamp;
        }
        self.lines_kept += 1;
        Ok(())
    }

    /// Lex labels, value and timestamp into `self.labels`; take `le` out of a bucket's labels.
    fn lex_sample(
        &mut self,
        text: &str,
        name_len: usize,
        part: Part,
    ) -> Result<(f64, Option<i64>, Option<f64>), String> {
        self.labels.clear();
        let mut pos = lex::skip_blanks(text.as_bytes(), name_len);
        if text.as_bytes().get(pos) == Some(&b'{') {
            pos = lex::lex_labels(text, pos, &mut self.labels)?;
        }
        let (value, timestamp) = lex::lex_value_and_timestamp(&text[pos..])?;
        let le = if part == Part::Bucket {
            // `le` comes last in exporters' output, out of name order: taking it out before
            // sorting leaves the rest usually sorted already.
            let i = self
                .labels
                .rposition("le")
                .ok_or("bucket without an le label")?;
            let le = self.labels.value(i);
            let bound = lex::parse_bucket_bound(le).ok_or_else(|| format!("invalid le {le:?}"))?;
            if self.labels.le_count() > 1 {
                return Err("label \"le\" given twice".into());
            }
            self.labels.remove(i);
            Some(bound)
        } else {
            None
        };
        self.labels.sort_and_check()?;
        Ok((value, timestamp, le))
    }

    /// Finish: parse the unfinished last line, and return the selected families in order of first
    /// appearance (histogram buckets are sorted by `le` as they are stored).
    ///
    /// # Errors
    /// A malformed last line (one without a trailing newline).
    pub fn finish(mut self) -> Result<Vec<MetricFamily>, ParseError> {
        // The format requires a final newline, but a body cut short or written by hand may lack
        // it; its last line is parsed like any other rather than lost.
        if !self.carry.is_empty() {
            let line = std::mem::take(&mut self.carry);
            self.push_line(&line)?;
        }
        Ok(self
            .families
            .into_iter()
            .filter(|b| !b.dead && !b.provisional)
            .map(|b| b.family)
            .collect())
    }
}
