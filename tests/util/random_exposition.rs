//! Random but valid expositions for the property tests: a generated model of families (every
//! kind, nasty label values, special floats, timestamps, HELP with escapes), the families the
//! parser must return for it, and a renderer that varies everything the format leaves free
//! (blanks, label order, trailing commas, `{}`, number spellings, bucket order, TYPE after the
//! samples, comments, CRLF, a missing final newline).

use std::collections::BTreeMap;

use extpath::promtext::{Bucket, MetricFamily, MetricKind, MetricSeries, MetricValue};
use proptest::prelude::*;

#[derive(Debug, Clone)]
pub enum GenKind {
    Counter,
    Gauge,
    /// Untyped, with or without a `# TYPE x untyped` line.
    Untyped(bool),
    Histogram,
    Summary,
}

#[derive(Debug, Clone)]
pub struct GenSeries {
    labels: BTreeMap<String, String>,
    value: f64,
    timestamp: Option<i64>,
    /// Finite bucket bounds and counts, plus the `+Inf` count.
    buckets: Vec<(f64, f64)>,
    inf: f64,
    sum: f64,
    count: f64,
    /// Summary quantile label text and value.
    quantiles: BTreeMap<&'static str, f64>,
}

#[derive(Debug, Clone)]
pub struct GenFamily {
    pub name: String,
    kind: GenKind,
    help: Option<String>,
    series: Vec<GenSeries>,
    type_after_samples: bool,
}

// Weighted towards the characters that are syntax somewhere in a line (quote, backslash, braces,
// comma, `=`, blanks, line ends): a label value holding them is where hand-written parsers and
// prometheus-parse go wrong (STACK.md §3), and uniform `any::<char>()` would almost never pick one.
fn nasty_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        4 => proptest::char::range('a', 'z'),
        1 => Just('"'),
        1 => Just('\\'),
        1 => Just('\n'),
        1 => Just('\r'),
        1 => Just('{'),
        1 => Just('}'),
        1 => Just(','),
        1 => Just('='),
        1 => Just(' '),
        1 => Just('\t'),
    ]
}

fn nasty_string(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(nasty_char(), 0..max).prop_map(String::from_iter)
}

// Integers get their own weight because they take the lexer's fast path; -0.0 because it compares
// equal to 0 yet prints and sorts differently (a bucket bound bug the long run once found).
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => any::<f64>(),
        2 => (0u32..1_000_000).prop_map(f64::from),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(-0.0),
    ]
}

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(
        // `le` and `quantile` are structure, not labels: the parser takes them out of a bucket or
        // a summary line, so a random label of that name would change the expected shape.
        "[a-zA-Z_][a-zA-Z0-9_]{0,5}".prop_filter("reserved", |n| n != "le" && n != "quantile"),
        nasty_string(8),
        0..4,
    )
}

fn series() -> impl Strategy<Value = GenSeries> {
    (
        labels(),
        value(),
        proptest::option::of(any::<i64>()),
        proptest::collection::vec(
            (
                prop_oneof![any::<f64>(), (-5i32..50).prop_map(|i| f64::from(i) / 4.0)],
                value(),
            ),
            0..5,
        ),
        (value(), value(), value()),
        proptest::collection::btree_map(
            prop_oneof![Just("0"), Just("0.5"), Just("0.9"), Just("0.99"), Just("1")],
            value(),
            0..3,
        ),
    )
        .prop_map(
            |(labels, value, timestamp, mut buckets, (inf, sum, count), quantiles)| {
                buckets.retain(|b| b.0.is_finite());
                buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                buckets.dedup_by(|a, b| a.0 == b.0);
                GenSeries {
                    labels,
                    value,
                    timestamp,
                    buckets,
                    inf,
                    sum,
                    count,
                    quantiles,
                }
            },
        )
}

fn family() -> impl Strategy<Value = GenFamily> {
    (
        "[a-zA-Z_:][a-zA-Z0-9_:]{0,8}",
        prop_oneof![
            Just(GenKind::Counter),
            Just(GenKind::Gauge),
            Just(GenKind::Untyped(true)),
            Just(GenKind::Untyped(false)),
            Just(GenKind::Histogram),
            Just(GenKind::Summary),
        ],
        proptest::option::of(nasty_string(12)),
        proptest::collection::vec(series(), 0..4),
        any::<bool>(),
    )
        .prop_map(|(name, kind, help, mut series, type_after_samples)| {
            // Distinct label sets: one line per series and part.
            let mut seen = std::collections::HashSet::new();
            series.retain(|s| seen.insert(s.labels.clone()));
            // HELP text cannot start with a blank or end with CR: the format has no way to say so.
            let help = help.map(|h| {
                h.trim_start_matches([' ', '\t'])
                    .trim_end_matches('\r')
                    .to_string()
            });
            GenFamily {
                name,
                kind,
                help,
                series,
                type_after_samples,
            }
        })
}

pub fn families() -> impl Strategy<Value = Vec<GenFamily>> {
    proptest::collection::vec(family(), 0..6).prop_map(|mut fams| {
        // A `_<index>` ending keeps names and their _bucket/_sum/_count apart.
        for (i, f) in fams.iter_mut().enumerate() {
            f.name = format!("{}_{i}", f.name);
        }
        fams
    })
}

/// The families the parser should return for `fams`, series sorted by labels. A family without
/// series is returned when it was declared by a TYPE line (exported, nothing yet).
pub fn expected(fams: &[GenFamily]) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    let declared = |f: &&GenFamily| !matches!(f.kind, GenKind::Untyped(false));
    for f in fams.iter().filter(|f| !f.series.is_empty() || declared(f)) {
        let kind = match f.kind {
            GenKind::Counter => MetricKind::Counter,
            GenKind::Gauge => MetricKind::Gauge,
            GenKind::Untyped(_) => MetricKind::Untyped,
            GenKind::Histogram => MetricKind::Histogram,
            GenKind::Summary => MetricKind::Summary,
        };
        let mut series = Vec::new();
        for s in &f.series {
            let base = MetricSeries {
                labels: s.labels.clone(),
                timestamp_ms: s.timestamp,
                ..MetricSeries::default()
            };
            match f.kind {
                GenKind::Histogram => {
                    let mut buckets: Vec<Bucket> = s
                        .buckets
                        .iter()
                        .map(|&(le, c)| Bucket {
                            le: MetricValue(le),
                            count: MetricValue(c),
                        })
                        .collect();
                    buckets.push(Bucket {
                        le: MetricValue(f64::INFINITY),
                        count: MetricValue(s.inf),
                    });
                    series.push(MetricSeries {
                        buckets,
                        sum: Some(MetricValue(s.sum)),
                        count: Some(MetricValue(s.count)),
                        ..base
                    });
                }
                GenKind::Summary => {
                    for (q, v) in &s.quantiles {
                        let mut labels = s.labels.clone();
                        labels.insert("quantile".into(), (*q).into());
                        series.push(MetricSeries {
                            labels,
                            value: Some(MetricValue(*v)),
                            ..base.clone()
                        });
                    }
                    series.push(MetricSeries {
                        sum: Some(MetricValue(s.sum)),
                        count: Some(MetricValue(s.count)),
                        ..base
                    });
                }
                _ => series.push(MetricSeries {
                    value: Some(MetricValue(s.value)),
                    ..base
                }),
            }
        }
        out.push(MetricFamily {
            name: f.name.clone(),
            kind,
            help: f.help.clone(),
            series,
        });
    }
    normalised(out)
}

/// Series sorted by labels, as JSON (NaN is written "NaN", so it compares equal to itself).
pub fn normalised(mut fams: Vec<MetricFamily>) -> Vec<MetricFamily> {
    for f in &mut fams {
        f.series.sort_by(|a, b| a.labels.cmp(&b.labels));
    }
    fams
}

pub fn as_json(fams: &[MetricFamily]) -> serde_json::Value {
    serde_json::to_value(fams).unwrap()
}

/// A tiny deterministic choice source, so one generated case renders one way.
struct Choices(u64);

impl Choices {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
    fn coin(&mut self) -> bool {
        self.next(2) == 0
    }
    fn blanks(&mut self) -> &'static str {
        ["", "", " ", "\t", " \t "][self.next(5) as usize]
    }
    fn sep(&mut self) -> &'static str {
        [" ", " ", "\t", "  \t"][self.next(4) as usize]
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn number(v: f64, c: &mut Choices) -> String {
    if v.is_nan() {
        return ["NaN", "nan", "NaN"][c.next(3) as usize].into();
    }
    if v == f64::INFINITY {
        return ["+Inf", "Inf", "+inf", "Infinity"][c.next(4) as usize].into();
    }
    if v == f64::NEG_INFINITY {
        return ["-Inf", "-inf"][c.next(2) as usize].into();
    }
    match c.next(3) {
        0 => format!("{v}"),
        1 => format!("{v:e}"),
        _ => format!("{v:E}"),
    }
}

fn sample(
    out: &mut Vec<String>,
    name: &str,
    labels: &[(String, String)],
    v: f64,
    ts: Option<i64>,
    c: &mut Choices,
) {
    let mut line = format!("{}{name}", c.blanks());
    let mut pairs = labels.to_vec();
    // Exporters order labels in many ways; series identity must not depend on it.
    for i in (1..pairs.len()).rev() {
        pairs.swap(i, c.next(i as u64 + 1) as usize);
    }
    if !pairs.is_empty() || c.next(4) == 0 {
        line.push_str(c.blanks());
        line.push('{');
        let body: Vec<String> = pairs
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}{k}{}={}\"{}\"{}",
                    c.blanks(),
                    c.blanks(),
                    c.blanks(),
                    escape_label(v),
                    c.blanks()
                )
            })
            .collect();
        line.push_str(&body.join(","));
        if !pairs.is_empty() && c.next(4) == 0 {
            line.push(',');
        }
        line.push('}');
    }
    line.push_str(c.sep());
    line.push_str(&number(v, c));
    if let Some(t) = ts {
        line.push_str(c.sep());
        line.push_str(&t.to_string());
    }
    line.push_str(c.blanks());
    out.push(line);
}

pub fn render(fams: &[GenFamily], seed: u64) -> String {
    let mut c = Choices(seed);
    let mut lines = Vec::new();
    for f in fams {
        let type_name = match f.kind {
            GenKind::Counter => Some("counter"),
            GenKind::Gauge => Some("gauge"),
            GenKind::Untyped(true) => Some(["untyped", "unknown"][c.next(2) as usize]),
            GenKind::Untyped(false) => None,
            GenKind::Histogram => Some("histogram"),
            GenKind::Summary => Some("summary"),
        };
        let type_line =
            type_name.map(|t| format!("#{}TYPE{}{}{}{t}", c.sep(), c.sep(), f.name, c.sep()));
        if let Some(h) = &f.help {
            lines.push(format!(
                "#{}HELP{}{}{}{}",
                c.sep(),
                c.sep(),
                f.name,
                c.sep(),
                escape_help(h)
            ));
        }
        if c.next(5) == 0 {
            lines.push("# a comment, with {braces} and \"quotes\"".into());
        }
        if !f.type_after_samples
            && let Some(t) = &type_line
        {
            lines.push(t.clone());
        }
        for s in &f.series {
            let labels: Vec<(String, String)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            match f.kind {
                GenKind::Histogram => {
                    let mut bucket_lines = Vec::new();
                    let bounds = s.buckets.iter().copied().chain([(f64::INFINITY, s.inf)]);
                    for (le, count) in bounds {
                        let mut l = labels.clone();
                        l.push(("le".into(), number(le, &mut c)));
                        sample(
                            &mut bucket_lines,
                            &format!("{}_bucket", f.name),
                            &l,
                            count,
                            s.timestamp,
                            &mut c,
                        );
                    }
                    if c.next(4) == 0 {
                        bucket_lines.reverse();
                    }
                    lines.extend(bucket_lines);
                }
                GenKind::Summary => {
                    for (q, v) in &s.quantiles {
                        let mut l = labels.clone();
                        l.push(("quantile".into(), (*q).into()));
                        sample(&mut lines, &f.name, &l, *v, s.timestamp, &mut c);
                    }
                }
                _ => sample(&mut lines, &f.name, &labels, s.value, s.timestamp, &mut c),
            }
            if matches!(f.kind, GenKind::Histogram | GenKind::Summary) {
                sample(
                    &mut lines,
                    &format!("{}_sum", f.name),
                    &labels,
                    s.sum,
                    s.timestamp,
                    &mut c,
                );
                sample(
                    &mut lines,
                    &format!("{}_count", f.name),
                    &labels,
                    s.count,
                    s.timestamp,
                    &mut c,
                );
            }
            if c.next(6) == 0 {
                lines.push(c.blanks().into());
            }
        }
        if f.type_after_samples
            && let Some(t) = type_line
        {
            lines.push(t);
        }
    }
    let eol = if c.coin() { "\n" } else { "\r\n" };
    let mut text = lines.join(eol);
    if c.next(4) != 0 {
        text.push_str(eol);
    }
    text
}
