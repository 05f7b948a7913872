//! HELP and TYPE lines, and joining `x_bucket`/`x_sum`/`x_count` samples seen before
//! `# TYPE x histogram|summary` onto `x` when that TYPE arrives.
//!
//! A TYPE line changes how later sample names resolve, so it also drops the cached routes of the
//! four names it affects. HELP and TYPE of unselected families are read by name only: an unknown
//! type there is not an error, but a name that cannot be read is, as for samples.

use super::{ParseError, set_part};
use super::{Parser, Part, SUFFIXES};
use crate::promtext::lex;
use crate::promtext::model::MetricKind;

impl Parser<'_> {
    pub(super) fn comment(&mut self, body: &[u8]) -> Result<(), ParseError> {
        let start = lex::skip_blanks(body, 0);
        let body = &body[start..];
        let keyword_len = body
            .iter()
            .position(|&b| lex::is_blank(b))
            .unwrap_or(body.len());
        let rest = &body[keyword_len..];
        if rest.is_empty() {
            // `# TYPE` or `# HELP` alone, or any other comment: nothing to attribute.
            return Ok(());
        }
        match &body[..keyword_len] {
            b"TYPE" => self.type_line(rest),
            b"HELP" => self.help_line(rest),
            _ => Ok(()),
        }
    }

    /// Read the metric name a HELP/TYPE line is about; return it and the rest after blanks.
    fn comment_subject<'l>(
        &self,
        rest: &'l [u8],
        what: &str,
    ) -> Result<(&'l str, &'l [u8]), ParseError> {
        let rest = &rest[lex::skip_blanks(rest, 0)..];
        let len = lex::metric_name_len(rest)
            .filter(|&n| rest.get(n).is_none_or(|&b| lex::is_blank(b)))
            .ok_or_else(|| {
                self.syntax(format!(
                    "invalid metric name in {what} at {:?}",
                    lex::excerpt(rest)
                ))
            })?;
        let name = std::str::from_utf8(&rest[..len]).unwrap_or_default();
        let after = &rest[len..];
        Ok((name, &after[lex::skip_blanks(after, 0)..]))
    }

    fn help_line(&mut self, rest: &[u8]) -> Result<(), ParseError> {
        let (name, text) = self.comment_subject(rest, "HELP")?;
        if !self.selection.wants(name) {
            return Ok(());
        }
        let Ok(text) = std::str::from_utf8(text) else {
            return Err(self.syntax(format!("HELP {name}: not valid UTF-8")));
        };
        let text = lex::unescape_help(text);
        if let Some(&i) = self.family_index.get(name) {
            self.families[i].family.help = Some(text.clone());
        }
        self.helps.insert(name.to_string(), text);
        Ok(())
    }

    fn type_line(&mut self, rest: &[u8]) -> Result<(), ParseError> {
        let (name, kind_text) = self.comment_subject(rest, "TYPE")?;
        let name = name.to_string();
        let wanted = self.selection.wants(&name);
        let kind_text = std::str::from_utf8(kind_text)
            .unwrap_or_default()
            .trim_end();
        let kind = match kind_text {
            "counter" => MetricKind::Counter,
            "gauge" => MetricKind::Gauge,
            "histogram" => MetricKind::Histogram,
            "summary" => MetricKind::Summary,
            // `unknown` is OpenMetrics' name for 0.0.4's `untyped`; a dump taken from a server
            // that negotiated OpenMetrics has it.
            "untyped" | "unknown" => MetricKind::Untyped,
            other if wanted => {
                return Err(self.syntax(format!("TYPE {name}: unknown metric type {other:?}")));
            }
            // OpenMetrics-only types (`gaugehistogram`, `stateset`, `info`) in families nobody
            // reads must not fail a scrape the rules could otherwise use.
            _ => MetricKind::Untyped,
        };
        // Two TYPEs for one name make every later sample ambiguous (is `x_count` a part of `x`
        // or a family?), so a selected family with two is rejected rather than guessed at.
        if let Some(&earlier) = self.types.get(&name)
            && earlier != kind
            && wanted
        {
            return Err(self.syntax(format!(
                "TYPE {name}: {kind_text} contradicts an earlier TYPE {}",
                earlier.as_str()
            )));
        }
        self.types.insert(name.clone(), kind);
        // Names that resolved before this TYPE may resolve differently now.
        self.last_route = None;
        self.routes.remove(name.as_bytes());
        for (suffix, _) in SUFFIXES {
            self.routes.remove(format!("{name}{suffix}").as_bytes());
        }
        if let Some(&i) = self.family_index.get(&name) {
            let fam = &mut self.families[i];
            if fam.provisional {
                // Held aside as `base_suffix` of another family, but it has a TYPE of its own: it
                // is a family nobody selected.
                fam.dead = true;
                self.family_index.remove(&name);
                return Ok(());
            }
            if kind == MetricKind::Histogram && fam.family.series.iter().any(|s| s.value.is_some())
            {
                return Err(self.syntax(format!(
                    "TYPE {name} histogram comes after samples of {name} without a _bucket, _sum or _count suffix"
                )));
            }
            fam.family.kind = kind;
        }
        if matches!(kind, MetricKind::Histogram | MetricKind::Summary) {
            self.join_early_samples(&name, kind, wanted)?;
        }
        if wanted {
            // A declared family is present even before (or without) its first sample: "this
            // server exports it and has no series of it" is not the same as "it does not export
            // it", and a written-back family with no series must read back as one.
            self.family_for(&name, false);
        }
        Ok(())
    }

    /// Join `x_bucket`/`x_sum`/`x_count` samples seen before `# TYPE x histogram|summary` onto `x`
    /// (or drop them when `x` is not selected: they were never a family of their own).
    fn join_early_samples(
        &mut self,
        name: &str,
        kind: MetricKind,
        wanted: bool,
    ) -> Result<(), ParseError> {
        for (suffix, part) in SUFFIXES {
            if part == Part::Bucket && kind == MetricKind::Summary {
                continue;
            }
            let early_name = format!("{name}{suffix}");
            if self.types.contains_key(&early_name) {
                continue;
            }
            let Some(ei) = self.family_index.remove(&early_name) else {
                continue;
            };
            self.families[ei].dead = true;
            if !wanted {
                continue;
            }
            let early = std::mem::take(&mut self.families[ei].family.series);
            let fi = self.family_for(name, false);
            for mut s in early {
                let mut le = None;
                if part == Part::Bucket {
                    let bound = s
                        .labels
                        .remove("le")
                        .and_then(|v| lex::parse_bucket_bound(&v));
                    if bound.is_none() {
                        return Err(self.syntax(format!(
                            "TYPE {name} histogram: an earlier {early_name} sample has no valid le label"
                        )));
                    }
                    le = bound;
                }
                let Some(value) = s.value else { continue };
                self.key.clear();
                for (k, v) in &s.labels {
                    lex::push_key_pair(&mut self.key, k, v);
                }
                let builder = &mut self.families[fi];
                let si = builder.series_for(&self.key, || std::mem::take(&mut s.labels));
                let series = &mut builder.family.series[si];
                set_part(series, part, value.0, le);
                if s.timestamp_ms.is_some() {
                    series.timestamp_ms = s.timestamp_ms;
                }
            }
        }
        Ok(())
    }
}
