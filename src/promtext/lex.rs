//! Byte-level lexing of the pieces of one line: metric and label names, the label set, the value,
//! the timestamp, and HELP text.
//!
//! It owns the character rules of the text format 0.0.4 and nothing about families or series. It
//! never allocates per line: label names and unescaped values are copied into a [`LabelScratch`]
//! that the parser reuses, so a selected line costs a few copies and no `String`s until it starts
//! a new series.
//!
//! Leniency follows what Prometheus' own scraper (`textparse`) accepts rather than the letter of the
//! spec, so that anything a Prometheus server would ingest parses here too: blanks are allowed
//! around label names, `=` and `,`; a trailing comma closes a label set; an unknown escape in a
//! label value (`\t`) is kept verbatim; no blank is needed between `}` and the value.

/// Bytes allowed in a metric name after the first (`[a-zA-Z0-9_:]`).
pub(super) fn is_metric_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

fn is_label_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

pub(super) fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Index of the first non-blank byte of `b` at or after `pos`.
pub(super) fn skip_blanks(b: &[u8], mut pos: usize) -> usize {
    while pos < b.len() && is_blank(b[pos]) {
        pos += 1;
    }
    pos
}

/// Length of the metric name at the start of `b`, if one is there: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
pub(super) fn metric_name_len(b: &[u8]) -> Option<usize> {
    let len = b
        .iter()
        .position(|&c| !is_metric_name_byte(c))
        .unwrap_or(b.len());
    (len > 0 && !b[0].is_ascii_digit()).then_some(len)
}

/// A short, printable excerpt of bytes for an error message.
pub(super) fn excerpt(b: &[u8]) -> String {
    const MAX: usize = 48;
    let cut = &b[..b.len().min(MAX)];
    let mut s = String::from_utf8_lossy(cut).into_owned();
    if b.len() > MAX {
        s.push('…');
    }
    s
}

/// The label pairs of the line being parsed, copied as `name 0xFF value 0xFE` back to back (values
/// unescaped). While the pairs are in name order and none was taken out of the middle, the buffer
/// *is* the series identity (see [`push_key_pair`]), so the common line needs no key of its own.
#[derive(Debug, Default)]
pub(super) struct LabelScratch {
    buf: Vec<u8>,
    /// `(name start, value start, value end)` in `buf`; the name ends one byte before its value.
    pairs: Vec<(u32, u32, u32)>,
    /// Set when `buf` no longer holds exactly the pairs, in order (sorted, or `le` taken out of
    /// the middle).
    reordered: bool,
    /// How many labels are called `le`.
    le_count: usize,
}

/// Text copied from a `&str` at ASCII delimiters is valid UTF-8, so this never falls back.
fn text(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or_default()
}

impl LabelScratch {
    pub(super) fn clear(&mut self) {
        self.buf.clear();
        self.pairs.clear();
        self.reordered = false;
        self.le_count = 0;
    }

    pub(super) fn len(&self) -> usize {
        self.pairs.len()
    }

    fn name_bytes(&self, i: usize) -> &[u8] {
        let (s, v, _) = self.pairs[i];
        &self.buf[s as usize..v as usize - 1]
    }

    pub(super) fn name(&self, i: usize) -> &str {
        text(self.name_bytes(i))
    }

    pub(super) fn value(&self, i: usize) -> &str {
        let (_, v, e) = self.pairs[i];
        text(&self.buf[v as usize..e as usize])
    }

    /// How many labels are called `le`.
    pub(super) fn le_count(&self) -> usize {
        self.le_count
    }

    /// Index of the (last) label called `name`.
    pub(super) fn rposition(&self, name: &str) -> Option<usize> {
        (0..self.len())
            .rev()
            .find(|&i| self.name_bytes(i) == name.as_bytes())
    }

    /// Drop pair `i`. The last pair (where exporters put `le`) is cut from the buffer too, which
    /// keeps it the series identity.
    pub(super) fn remove(&mut self, i: usize) {
        let (start, _, _) = self.pairs.remove(i);
        if i == self.pairs.len() {
            self.buf.truncate(start as usize);
        } else {
            self.reordered = true;
        }
    }

    /// Sort the pairs by label name (exporters usually emit them sorted already) and reject a label
    /// given twice, which would make the series identity ambiguous.
    pub(super) fn sort_and_check(&mut self) -> Result<(), String> {
        let buf = &self.buf;
        let name = |p: &(u32, u32, u32)| &buf[p.0 as usize..p.1 as usize - 1];
        // Strictly increasing names are sorted and free of duplicates in one pass.
        if self.pairs.is_sorted_by(|a, b| name(a) < name(b)) {
            return Ok(());
        }
        self.pairs.sort_unstable_by(|a, b| name(a).cmp(name(b)));
        self.reordered = true;
        if let Some(w) = self.pairs.windows(2).find(|w| name(&w[0]) == name(&w[1])) {
            return Err(format!("label {:?} given twice", text(name(&w[0]))));
        }
        Ok(())
    }

    /// The series identity of the current (sorted) pairs: the buffer itself when it still is one,
    /// else written into `spare`.
    pub(super) fn key<'a>(&'a self, spare: &'a mut Vec<u8>) -> &'a [u8] {
        if !self.reordered {
            return &self.buf;
        }
        spare.clear();
        for i in 0..self.len() {
            push_key_pair(spare, self.name(i), self.value(i));
        }
        spare
    }
}

/// Append one label to a series identity: `name 0xFF value 0xFE`. Neither byte occurs in UTF-8, so
/// distinct label sets (pushed in name order) never share a key.
pub(super) fn push_key_pair(key: &mut Vec<u8>, name: &str, value: &str) {
    key.extend_from_slice(name.as_bytes());
    key.push(0xFF);
    key.extend_from_slice(value.as_bytes());
    key.push(0xFE);
}

fn offset(n: usize) -> Result<u32, String> {
    u32::try_from(n).map_err(|_| "label set too long".to_string())
}

/// Lex a label set starting at `line[pos] == '{'`; return the index just past the closing `}`.
pub(super) fn lex_labels(
    line: &str,
    mut pos: usize,
    out: &mut LabelScratch,
) -> Result<usize, String> {
    let b = line.as_bytes();
    debug_assert_eq!(b.get(pos), Some(&b'{'));
    pos += 1;
    loop {
        pos = skip_blanks(b, pos);
        match b.get(pos) {
            None => return Err("label set is not closed with '}'".into()),
            Some(b'}') => return Ok(pos + 1),
            Some(_) => {}
        }
        let name_start = pos;
        pos += b[pos..]
            .iter()
            .position(|&c| !is_label_name_byte(c))
            .unwrap_or(b.len() - pos);
        let name = &line[name_start..pos];
        if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
            return Err(format!(
                "invalid label name at {:?}",
                excerpt(&b[name_start..])
            ));
        }
        pos = skip_blanks(b, pos);
        if b.get(pos) != Some(&b'=') {
            return Err(format!("label {name:?}: expected '=' after the name"));
        }
        pos = skip_blanks(b, pos + 1);
        if b.get(pos) != Some(&b'"') {
            return Err(format!("label {name:?}: value is not quoted"));
        }
        pos += 1;
        let n_start = offset(out.buf.len())?;
        out.buf.extend_from_slice(name.as_bytes());
        out.buf.push(0xFF);
        let v_start = offset(out.buf.len())?;
        pos = lex_quoted(line, pos, &mut out.buf).map_err(|m| format!("label {name:?}: {m}"))?;
        out.pairs.push((n_start, v_start, offset(out.buf.len())?));
        out.buf.push(0xFE);
        out.le_count += usize::from(name == "le");
        pos = skip_blanks(b, pos);
        match b.get(pos) {
            Some(b',') => pos += 1,
            Some(b'}') => {}
            None => return Err("label set is not closed with '}'".into()),
            _ => return Err(format!("expected ',' or '}}' after label {name:?}")),
        }
    }
}

/// Unescape a quoted label value whose opening quote ends just before `pos`; return the index just
/// past the closing quote.
fn lex_quoted(line: &str, mut pos: usize, out: &mut Vec<u8>) -> Result<usize, String> {
    let b = line.as_bytes();
    loop {
        // Label values are short: a plain loop beats a vectorised search's setup.
        let Some(i) = b[pos..].iter().position(|&c| c == b'"' || c == b'\\') else {
            return Err("value is not closed with '\"'".into());
        };
        // Both delimiters are ASCII, so what is copied ends at a char boundary.
        out.extend_from_slice(&b[pos..pos + i]);
        pos += i;
        if b[pos] == b'"' {
            return Ok(pos + 1);
        }
        match b.get(pos + 1) {
            Some(b'n') => out.push(b'\n'),
            Some(b'\\') => out.push(b'\\'),
            Some(b'"') => out.push(b'"'),
            // Kept verbatim, as Prometheus does; the next byte is copied by the next round.
            Some(_) => {
                out.push(b'\\');
                pos += 1;
                continue;
            }
            None => return Err("value ends in an unfinished escape".into()),
        }
        pos += 2;
    }
}

/// Lex `value [timestamp]` (blanks around them allowed) from the rest of a sample line.
pub(super) fn lex_value_and_timestamp(rest: &str) -> Result<(f64, Option<i64>), String> {
    let mut tokens = rest.split([' ', '\t']).filter(|t| !t.is_empty());
    let value_text = tokens.next().ok_or("missing value")?;
    let value = parse_float(value_text).ok_or_else(|| format!("invalid value {value_text:?}"))?;
    // Timestamps are optional and rare: none of the ~7,800 samples of the real 1.24 kube-apiserver
    // capture (`captures/cases/00-healthy`) carries one. Windows are measured by the scrape times,
    // so a timestamp is kept but never used as the clock.
    let timestamp = match tokens.next() {
        None => None,
        Some(t) => Some(
            t.parse::<i64>()
                .map_err(|_| format!("invalid timestamp {t:?} (milliseconds as an integer)"))?,
        ),
    };
    if let Some(extra) = tokens.next() {
        return Err(format!("unexpected {extra:?} after the timestamp"));
    }
    Ok((value, timestamp))
}

/// A float as Go's `ParseFloat` reads it (decimal, exponent, `NaN`, `±Inf`, `Infinity`, any
/// case), with a fast path for the plain integers that most counters and bucket counts are.
/// Hexadecimal floats (`0x1p-3`), which Go also accepts, are rejected: no exporter writes them.
//
// Go's `strconv.FormatFloat(v, 'g', -1, 64)` is what client_golang writes, so real bodies mix
// integers, decimals and exponents in one family (`2e-07`, `5.51e-07`, `le="1e+06"` in the 1.24
// capture) and write infinities as `+Inf` (`rest_client_exec_plugin_ttl_seconds +Inf` there).
pub(super) fn parse_float(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if !b.is_empty() && b.len() <= 15 && b.iter().all(u8::is_ascii_digit) {
        // At most 15 digits: exactly representable, and the same f64 `str::parse` would give.
        let n = b.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
        return Some(n as f64);
    }
    s.parse::<f64>().ok()
}

/// A histogram bucket bound (`le`): a float that is not NaN, with `-0` read as `0` so that the two
/// spellings name one bucket (they compare equal, but would sort apart).
pub(super) fn parse_bucket_bound(s: &str) -> Option<f64> {
    parse_float(s)
        .filter(|b| !b.is_nan())
        .map(|b| if b == 0.0 { 0.0 } else { b })
}

/// Unescape HELP text: `\\` and `\n`; any other backslash is kept verbatim.
///
/// HELP has no `\"` escape, unlike label values: the 0.0.4 format escapes only backslash and
/// newline there, since HELP text is not quoted.
pub(super) fn unescape_help(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(line: &str) -> Result<Vec<(String, String)>, String> {
        let mut s = LabelScratch::default();
        let end = lex_labels(line, 0, &mut s)?;
        assert!(end <= line.len());
        Ok((0..s.len())
            .map(|i| (s.name(i).to_string(), s.value(i).to_string()))
            .collect())
    }

    #[test]
    fn label_values_keep_delimiters_and_unescape() {
        let got = labels(r#"{a="x,y=}{", b = "q\"\\\n" , c="\t\é",}"#).unwrap();
        assert_eq!(
            got,
            vec![
                ("a".into(), "x,y=}{".into()),
                ("b".into(), "q\"\\\n".into()),
                ("c".into(), "\\t\\é".into()),
            ]
        );
        assert_eq!(labels("{}").unwrap(), vec![]);
        assert_eq!(labels("{ }").unwrap(), vec![]);
    }

    #[test]
    fn malformed_label_sets_say_what_is_wrong() {
        for (line, want) in [
            (r#"{a="1""#, "not closed with '}'"),
            (r#"{a="1"#, "not closed with '\"'"),
            (r#"{a="1\"#, "unfinished escape"),
            (r#"{a=1}"#, "not quoted"),
            (r#"{a "1"}"#, "expected '='"),
            (r#"{1a="1"}"#, "invalid label name"),
            (r#"{,}"#, "invalid label name"),
            (r#"{a="1",,}"#, "invalid label name"),
            (r#"{a="1" b="2"}"#, "expected ',' or '}'"),
            (r#"{a-b="1"}"#, "expected '='"),
        ] {
            let err = labels(line).unwrap_err();
            assert!(err.contains(want), "{line}: {err}");
        }
    }

    #[test]
    fn duplicate_labels_are_rejected_after_sorting() {
        let mut s = LabelScratch::default();
        lex_labels(r#"{b="1",a="2",b="3"}"#, 0, &mut s).unwrap();
        assert!(
            s.sort_and_check()
                .unwrap_err()
                .contains("\"b\" given twice")
        );
        let mut s = LabelScratch::default();
        lex_labels(r#"{b="1",a="2"}"#, 0, &mut s).unwrap();
        s.sort_and_check().unwrap();
        assert_eq!((s.name(0), s.value(0)), ("a", "2"));
    }

    #[test]
    fn the_series_identity_does_not_depend_on_order_or_le_position() {
        let key_of = |line: &str, drop_le: bool| {
            let mut s = LabelScratch::default();
            lex_labels(line, 0, &mut s).unwrap();
            if drop_le {
                let i = s.rposition("le").unwrap();
                s.remove(i);
            }
            s.sort_and_check().unwrap();
            let mut spare = Vec::new();
            s.key(&mut spare).to_vec()
        };
        let mut want = Vec::new();
        push_key_pair(&mut want, "a", "x\"y");
        push_key_pair(&mut want, "b", "");
        assert_eq!(key_of(r#"{a="x\"y",b=""}"#, false), want);
        assert_eq!(key_of(r#"{b="",a="x\"y"}"#, false), want);
        assert_eq!(key_of(r#"{a="x\"y",b="",le="1"}"#, true), want);
        assert_eq!(key_of(r#"{a="x\"y",le="1",b=""}"#, true), want);
        assert_eq!(key_of(r#"{le="+Inf",b="",a="x\"y"}"#, true), want);
        assert_eq!(key_of("{}", false), Vec::<u8>::new());
    }

    #[test]
    fn values_and_timestamps_follow_go() {
        let v = |s: &str| lex_value_and_timestamp(s).map(|(v, _)| v);
        assert_eq!(v(" 1e+06").unwrap(), 1e6);
        assert_eq!(v("-2.5E-3").unwrap(), -2.5e-3);
        assert_eq!(v("+Inf").unwrap(), f64::INFINITY);
        assert_eq!(v("-Inf").unwrap(), f64::NEG_INFINITY);
        assert_eq!(v("Infinity").unwrap(), f64::INFINITY);
        assert!(v("NaN").unwrap().is_nan());
        assert!(v("nan").unwrap().is_nan());
        assert_eq!(v("123456789012345").unwrap(), 123456789012345.0);
        assert_eq!(v("12345678901234567890").unwrap(), 12345678901234567890.0);
        assert_eq!(v(".5").unwrap(), 0.5);
        assert!(v("0x10").is_err());
        assert!(v("1_000").is_err());
        assert!(v("").unwrap_err().contains("missing value"));
        assert_eq!(
            lex_value_and_timestamp("1 -1500\t").unwrap(),
            (1.0, Some(-1500))
        );
        assert!(
            lex_value_and_timestamp("1 1.5e12")
                .unwrap_err()
                .contains("invalid timestamp")
        );
        assert!(
            lex_value_and_timestamp("1 2 3")
                .unwrap_err()
                .contains("unexpected \"3\"")
        );
    }

    #[test]
    fn bucket_bounds_are_numbers_with_one_zero() {
        assert_eq!(parse_bucket_bound("1e+00"), Some(1.0));
        assert_eq!(parse_bucket_bound("+Inf"), Some(f64::INFINITY));
        assert!(parse_bucket_bound("-0").unwrap().is_sign_positive());
        assert!(parse_bucket_bound("-0.E0").unwrap().is_sign_positive());
        assert_eq!(parse_bucket_bound("NaN"), None);
        assert_eq!(parse_bucket_bound("x"), None);
    }

    #[test]
    fn help_unescapes_only_backslash_and_newline() {
        assert_eq!(unescape_help(r"a\\b\nc\td\"), "a\\b\nc\\td\\");
        assert_eq!(unescape_help("plain"), "plain");
    }

    #[test]
    fn metric_names() {
        assert_eq!(metric_name_len(b"a:b_c{"), Some(5));
        assert_eq!(metric_name_len(b"_x 1"), Some(2));
        assert_eq!(metric_name_len(b"1x 1"), None);
        assert_eq!(metric_name_len(b"{a=\"1\"} 1"), None);
    }
}
