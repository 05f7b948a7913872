//! The line parser: text exposition in, selected [`MetricFamily`]s out.
//!
//! It is push-based ([`Parser::push_line`]) so that a synchronous file reader and an async HTTP body
//! stream can both drive it without holding the whole body. Lines of families that were not selected
//! are rejected after reading only the metric name, which is what makes a 30 MB `/metrics` cheap:
//! most of its bytes are `apiserver_request_duration_seconds_bucket` lines nobody asked for.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use super::model::{Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue, parse_value};

/// Which families to keep.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    all: bool,
    exact: HashSet<String>,
    prefixes: Vec<String>,
}

impl Selection {
    /// Keep every family.
    pub fn all() -> Self {
        Selection {
            all: true,
            ..Selection::default()
        }
    }

    /// Keep the families with these exact names.
    pub fn names<I: IntoIterator<Item = S>, S: Into<String>>(names: I) -> Self {
        Selection {
            all: false,
            exact: names.into_iter().map(Into::into).collect(),
            prefixes: Vec::new(),
        }
    }

    /// Also keep every family whose name starts with `prefix`.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefixes.push(prefix.into());
        self
    }

    /// Add exact names.
    pub fn with_names<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.exact.extend(names.into_iter().map(Into::into));
        self
    }

    /// Whether the family `name` is kept.
    pub fn wants(&self, name: &str) -> bool {
        self.all || self.exact.contains(name) || self.prefixes.iter().any(|p| name.starts_with(p))
    }
}

/// A malformed line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

struct FamilyBuilder {
    family: MetricFamily,
    index: HashMap<Vec<(String, String)>, usize>,
}

/// Push-based parser.
pub struct Parser<'s> {
    selection: &'s Selection,
    line_no: usize,
    types: HashMap<String, MetricKind>,
    helps: HashMap<String, String>,
    families: Vec<FamilyBuilder>,
    family_index: HashMap<String, usize>,
    lines_kept: usize,
}

/// Histogram/summary sample suffixes and what they set.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Value,
    Bucket,
    Sum,
    Count,
}

impl<'s> Parser<'s> {
    /// A parser keeping the families `selection` wants.
    pub fn new(selection: &'s Selection) -> Self {
        Parser {
            selection,
            line_no: 0,
            types: HashMap::new(),
            helps: HashMap::new(),
            families: Vec::new(),
            family_index: HashMap::new(),
            lines_kept: 0,
        }
    }

    /// Number of sample lines kept so far.
    pub fn lines_kept(&self) -> usize {
        self.lines_kept
    }

    /// Lines seen so far.
    pub fn lines_seen(&self) -> usize {
        self.line_no
    }

    /// Feed one line (with or without its trailing newline).
    ///
    /// # Errors
    /// A [`ParseError`] for a malformed line of a *selected* family, or a malformed comment.
    pub fn push_line(&mut self, raw: &str) -> Result<(), ParseError> {
        self.line_no += 1;
        let line = raw.trim_end_matches(['\n', '\r']);
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            return Ok(());
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            return self.comment(comment);
        }
        let name_end = trimmed.find(['{', ' ', '\t']).unwrap_or(trimmed.len());
        let name = &trimmed[..name_end];
        if !valid_metric_name(name) {
            return Err(self.err(format!("invalid metric name {name:?}")));
        }
        let (family, part) = self.resolve(name);
        if !self.selection.wants(family) {
            return Ok(());
        }
        let family = family.to_string();
        self.sample(&family, part, name, &trimmed[name_end..])
    }

    /// Finish: the selected families, in order of first appearance, histogram buckets sorted.
    pub fn finish(self) -> Vec<MetricFamily> {
        self.families
            .into_iter()
            .map(|mut b| {
                for s in &mut b.family.series {
                    s.buckets.sort_by(|a, b| {
                        a.le.0
                            .partial_cmp(&b.le.0)
                            .unwrap_or(std::cmp::Ordering::Equal)
                    });
                }
                b.family
            })
            .collect()
    }

    fn err(&self, message: String) -> ParseError {
        ParseError {
            line: self.line_no,
            message,
        }
    }

    fn comment(&mut self, comment: &str) -> Result<(), ParseError> {
        let comment = comment.trim_start();
        let (keyword, rest) = match comment.split_once([' ', '\t']) {
            Some(x) => x,
            None => return Ok(()),
        };
        match keyword {
            "TYPE" => {
                let rest = rest.trim();
                let (name, kind) = rest
                    .split_once([' ', '\t'])
                    .ok_or_else(|| self.err("TYPE line without a type".into()))?;
                let kind = match kind.trim() {
                    "counter" => MetricKind::Counter,
                    "gauge" => MetricKind::Gauge,
                    "histogram" => MetricKind::Histogram,
                    "summary" => MetricKind::Summary,
                    "untyped" | "unknown" => MetricKind::Untyped,
                    other => return Err(self.err(format!("unknown metric type {other:?}"))),
                };
                if !valid_metric_name(name) {
                    return Err(self.err(format!("invalid metric name {name:?} in TYPE")));
                }
                if self.selection.wants(name)
                    && let Some(&i) = self.family_index.get(name)
                {
                    self.families[i].family.kind = kind;
                }
                self.types.insert(name.to_string(), kind);
            }
            "HELP" => {
                let rest = rest.trim_start();
                let (name, text) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
                if self.selection.wants(name) {
                    let text = unescape_help(text);
                    if let Some(&i) = self.family_index.get(name) {
                        self.families[i].family.help = Some(text.clone());
                    }
                    self.helps.insert(name.to_string(), text);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Map a sample name to its family and the part of the family it sets.
    fn resolve<'n>(&self, name: &'n str) -> (&'n str, Part) {
        if let Some(kind) = self.types.get(name) {
            let _ = kind;
            return (name, Part::Value);
        }
        for (suffix, part) in [
            ("_bucket", Part::Bucket),
            ("_sum", Part::Sum),
            ("_count", Part::Count),
        ] {
            if let Some(base) = name.strip_suffix(suffix)
                && matches!(
                    self.types.get(base),
                    Some(MetricKind::Histogram) | Some(MetricKind::Summary)
                )
            {
                if part == Part::Bucket && self.types.get(base) == Some(&MetricKind::Summary) {
                    continue;
                }
                return (base, part);
            }
        }
        (name, Part::Value)
    }

    fn sample(
        &mut self,
        family: &str,
        part: Part,
        name: &str,
        rest: &str,
    ) -> Result<(), ParseError> {
        let (mut labels, after) =
            parse_labels(rest).map_err(|m| self.err(format!("{name}: {m}")))?;
        let mut fields = after.split_ascii_whitespace();
        let value_text = fields
            .next()
            .ok_or_else(|| self.err(format!("{name}: missing value")))?;
        let value = parse_value(value_text)
            .ok_or_else(|| self.err(format!("{name}: invalid value {value_text:?}")))?;
        let timestamp_ms = match fields.next() {
            Some(t) => Some(
                t.parse::<i64>()
                    .map_err(|_| self.err(format!("{name}: invalid timestamp {t:?}")))?,
            ),
            None => None,
        };
        if let Some(extra) = fields.next() {
            return Err(self.err(format!("{name}: unexpected {extra:?} after the value")));
        }
        let kind = self.types.get(family).copied().unwrap_or_default();
        // The bucket bound and the summary quantile are not part of the series identity of
        // _sum/_count; `le` never is.
        let mut le = None;
        if part == Part::Bucket {
            let pos = labels
                .iter()
                .position(|(k, _)| k == "le")
                .ok_or_else(|| self.err(format!("{name}: bucket without an le label")))?;
            let (_, v) = labels.remove(pos);
            le =
                Some(parse_value(&v).ok_or_else(|| self.err(format!("{name}: invalid le {v:?}")))?);
        }
        labels.sort();
        self.lines_kept += 1;
        let fi = match self.family_index.get(family) {
            Some(&i) => i,
            None => {
                self.families.push(FamilyBuilder {
                    family: MetricFamily {
                        name: family.to_string(),
                        kind,
                        help: self.helps.get(family).cloned(),
                        series: Vec::new(),
                    },
                    index: HashMap::new(),
                });
                self.family_index
                    .insert(family.to_string(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        let builder = &mut self.families[fi];
        let si = match builder.index.get(&labels) {
            Some(&i) => i,
            None => {
                builder.family.series.push(MetricSeries {
                    labels: labels.iter().cloned().collect(),
                    ..MetricSeries::default()
                });
                let i = builder.family.series.len() - 1;
                builder.index.insert(labels, i);
                i
            }
        };
        let series = &mut builder.family.series[si];
        if timestamp_ms.is_some() {
            series.timestamp_ms = timestamp_ms;
        }
        let v = MetricValue(value);
        match part {
            Part::Value => series.value = Some(v),
            Part::Sum => series.sum = Some(v),
            Part::Count => series.count = Some(v),
            Part::Bucket => {
                let le = MetricValue(le.unwrap_or(f64::INFINITY));
                match series.buckets.iter_mut().find(|b| b.le == le) {
                    Some(b) => b.count = v,
                    None => series.buckets.push(Bucket { le, count: v }),
                }
            }
        }
        Ok(())
    }
}

fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parse `{k="v",…}` at the start of `s` (if present); return the labels and the rest.
/// Label pairs in exposition order.
type Labels = Vec<(String, String)>;

fn parse_labels(s: &str) -> Result<(Labels, &str), String> {
    let s = s.trim_start();
    let Some(mut rest) = s.strip_prefix('{') else {
        return Ok((Vec::new(), s));
    };
    let mut labels = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let eq = rest
            .find('=')
            .ok_or_else(|| "label without '='".to_string())?;
        let key = rest[..eq].trim();
        if !valid_label_name(key) {
            return Err(format!("invalid label name {key:?}"));
        }
        rest = rest[eq + 1..].trim_start();
        let body = rest
            .strip_prefix('"')
            .ok_or_else(|| format!("label {key:?}: value is not quoted"))?;
        let mut value = String::new();
        let mut chars = body.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err(format!("label {key:?}: unterminated value")),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, other)) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => return Err(format!("label {key:?}: unterminated escape")),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key.to_string(), value));
        rest = body[end + 1..].trim_start();
        if let Some(r) = rest.strip_prefix(',') {
            rest = r;
        } else if !rest.starts_with('}') {
            return Err(format!("expected ',' or '}}' after label {key:?}"));
        }
    }
}

fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('\\') => out.push('\\'),
                Some(o) => {
                    out.push('\\');
                    out.push(o);
                }
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Parse a whole text.
///
/// # Errors
/// The first malformed line of a selected family.
pub fn parse_str(text: &str, selection: &Selection) -> Result<Vec<MetricFamily>, ParseError> {
    let mut p = Parser::new(selection);
    for line in text.split('\n') {
        p.push_line(line)?;
    }
    Ok(p.finish())
}

/// Parse from a reader, one line at a time (the body is never held whole).
///
/// # Errors
/// The first malformed line of a selected family, or an I/O error (as a [`ParseError`] with the
/// line number where reading stopped).
pub fn parse_reader<R: BufRead>(
    mut reader: R,
    selection: &Selection,
) -> Result<Vec<MetricFamily>, ParseError> {
    let mut p = Parser::new(selection);
    let mut buf = Vec::with_capacity(512);
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(|e| ParseError {
            line: p.lines_seen() + 1,
            message: format!("read error: {e}"),
        })?;
        if n == 0 {
            break;
        }
        let line = std::str::from_utf8(&buf).map_err(|_| ParseError {
            line: p.lines_seen() + 1,
            message: "not UTF-8".into(),
        })?;
        p.push_line(line)?;
    }
    Ok(p.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_joined_and_escapes_unescaped() {
        let text = r#"# HELP h A \\ histogram\nwith two lines
# TYPE h histogram
h_bucket{a="x,y=}",le="0.1"} 1
h_bucket{a="x,y=}",le="+Inf"} 3
h_bucket{le="1",a="x,y=}"} 2
h_sum{a="x,y=}"} 1.5
h_count{a="x,y=}"} 3
# TYPE c counter
c{q="say \"hi\"\n"} NaN 1700000000000
other_metric 5
"#;
        let fams = parse_str(text, &Selection::names(["h", "c"])).unwrap();
        assert_eq!(fams.len(), 2);
        let h = &fams[0];
        assert_eq!(h.kind, MetricKind::Histogram);
        assert_eq!(h.help.as_deref(), Some("A \\ histogram\nwith two lines"));
        let s = &h.series[0];
        assert_eq!(s.labels["a"], "x,y=}");
        let les: Vec<f64> = s.buckets.iter().map(|b| b.le.0).collect();
        assert_eq!(les, vec![0.1, 1.0, f64::INFINITY]);
        assert_eq!(s.count, Some(MetricValue(3.0)));
        let c = &fams[1].series[0];
        assert_eq!(c.labels["q"], "say \"hi\"\n");
        assert!(c.value.unwrap().0.is_nan());
        assert_eq!(c.timestamp_ms, Some(1_700_000_000_000));
    }

    #[test]
    fn malformed_selected_lines_name_the_line() {
        let err = parse_str("# TYPE c counter\nc{a=\"1} 2\n", &Selection::all()).unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse_str("c 1 2 3\n", &Selection::all()).unwrap_err();
        assert!(err.message.contains("unexpected"), "{err}");
        // An unselected family is never looked at past its name.
        assert!(parse_str("d{a=\"1} 2\n", &Selection::names(["c"])).is_ok());
    }
}
