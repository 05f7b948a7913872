//! Loading a waivers file in two phases: parse (serde-saphyr, unknown fields rejected, every value
//! kept with its line via `Spanned`), then validate into [`Waivers`] with errors that name the file
//! and the line of the offending value — or of its waiver, when a field is missing.
//!
//! What this file does not own: what a waiver means when applied (that is the parent module).

use std::path::Path;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::{SubjectPattern, WAIVERS_KIND, Waiver, Waivers};
use crate::engine::diagnosis::WAIVERS_API_VERSION;

/// Why a waivers file could not be loaded. Every variant names the file, and the line when known.
#[derive(Debug, thiserror::Error)]
pub enum WaiverError {
    /// The file could not be read.
    #[error("{path}: cannot read: {reason}")]
    Io {
        /// File.
        path: String,
        /// OS error text.
        reason: String,
    },
    /// YAML syntax, a wrong type, or an unknown field.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// File.
        path: String,
        /// 1-based line (0 when unknown).
        line: u64,
        /// 1-based column (0 when unknown).
        column: u64,
        /// What is wrong.
        message: String,
    },
    /// Well-formed YAML whose content is not a valid waiver.
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// File.
        path: String,
        /// 1-based line of the offending value (or of its waiver when a field is missing).
        line: u64,
        /// What is wrong and how to fix it.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(rename = "apiVersion")]
    api_version: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    #[serde(default)]
    waivers: Vec<Spanned<RawWaiver>>,
}

/// Unknown fields are errors: a waiver with an extra `namespace:` its author believes narrows it
/// would otherwise be read without it and waive more than meant, silently.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWaiver {
    rule: Option<Spanned<String>>,
    subject: Option<Spanned<String>>,
    reason: Option<Spanned<String>>,
    expires: Option<Spanned<String>>,
}

/// Load and validate a waivers file.
///
/// # Errors
/// [`WaiverError`] naming the file and line of the first problem.
pub fn load_waivers(path: &Path) -> Result<Waivers, WaiverError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| WaiverError::Io {
        path: shown.clone(),
        reason: e.to_string(),
    })?;
    parse_waivers(&text, &shown)
}

/// Parse and validate a waivers document; `path` is only used in messages.
///
/// # Errors
/// [`WaiverError`] naming `path` and the line of the first problem.
pub fn parse_waivers(text: &str, path: &str) -> Result<Waivers, WaiverError> {
    let raw: RawFile = serde_saphyr::from_str(text).map_err(|e| {
        let (line, column) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        WaiverError::Parse {
            path: path.to_string(),
            line,
            column,
            message: yaml_message(&e.to_string()),
        }
    })?;
    validate(raw, path)
}

/// serde-saphyr's message repeats the location (`error: line 5 column 5: …`); the error already
/// carries it, so keep only the part after it.
fn yaml_message(full: &str) -> String {
    let first = full.lines().next().unwrap_or_default();
    let rest = first.strip_prefix("error: ").unwrap_or(first);
    match rest.strip_prefix("line ") {
        Some(after) => match after.split_once(": ") {
            Some((_, msg)) => msg.to_string(),
            None => rest.to_string(),
        },
        None => rest.to_string(),
    }
}

fn validate(raw: RawFile, path: &str) -> Result<Waivers, WaiverError> {
    let invalid = |line: u64, message: String| WaiverError::Invalid {
        path: path.to_string(),
        line,
        message,
    };
    match &raw.api_version {
        Some(v) if v.value == WAIVERS_API_VERSION => {}
        Some(v) => {
            return Err(invalid(
                v.referenced.line(),
                format!(
                    "apiVersion {:?} is not supported, expected {WAIVERS_API_VERSION:?}",
                    v.value
                ),
            ));
        }
        None => {
            return Err(invalid(
                1,
                format!(
                    "missing apiVersion: a waivers file starts with `apiVersion: {WAIVERS_API_VERSION}` \
                     and `kind: {WAIVERS_KIND}`"
                ),
            ));
        }
    }
    match &raw.kind {
        Some(k) if k.value == WAIVERS_KIND => {}
        Some(k) => {
            return Err(invalid(
                k.referenced.line(),
                format!("kind {:?} is not {WAIVERS_KIND:?}", k.value),
            ));
        }
        None => {
            return Err(invalid(1, format!("missing `kind: {WAIVERS_KIND}`")));
        }
    }

    let mut waivers = Vec::with_capacity(raw.waivers.len());
    for (i, entry) in raw.waivers.into_iter().enumerate() {
        let line = entry.referenced.line();
        let w = entry.value;
        let place = format!("waivers[{i}]");
        // Blank counts as missing: `reason: ""` tells the next on-call nothing, and the line of
        // the waiver is the best place to point at when the field is absent altogether.
        let required = |field: Option<Spanned<String>>, what: &str| {
            field
                .filter(|f| !f.value.trim().is_empty())
                .ok_or_else(|| invalid(line, format!("{place}: missing `{what}`")))
        };

        let rule = required(w.rule, "rule (a rule id, or \"*\")")?;
        if rule.value != "*" && !is_rule_id(&rule.value) {
            return Err(invalid(
                rule.referenced.line(),
                format!(
                    "{place}: rule {:?} is neither a rule id (kebab-case, like \
                     aggregation-service-missing) nor \"*\"",
                    rule.value
                ),
            ));
        }
        let subject = required(w.subject, "subject (Kind/name)")?;
        let pattern = SubjectPattern::parse(&subject.value)
            .map_err(|m| invalid(subject.referenced.line(), format!("{place}: {m}")))?;
        let reason = required(
            w.reason,
            "reason: say why the finding is accepted, so the next on-call knows",
        )?;
        let expires = required(
            w.expires,
            "expires (YYYY-MM-DD): waivers must run out so that they are reviewed",
        )?;
        let date = parse_date(&expires.value)
            .map_err(|m| invalid(expires.referenced.line(), format!("{place}: {m}")))?;
        waivers.push(Waiver {
            rule_line: rule.referenced.line(),
            rule: rule.value,
            subject: pattern,
            reason: reason.value.trim().to_string(),
            expires: date,
            line,
        });
    }
    Ok(Waivers { waivers })
}

/// Check that every waiver's rule (other than `*`) is one of the rules loaded: a waiver naming a
/// rule that does not exist waives nothing, and would only be noticed as `unmatched` after the
/// collection, so it is an error, like `--rule nosuch`. `path` is only used in messages.
///
/// # Errors
/// [`WaiverError::Invalid`] at the line of the first unknown rule id.
pub fn check_rule_ids(
    waivers: &Waivers,
    path: &str,
    is_rule: impl Fn(&str) -> bool,
) -> Result<(), WaiverError> {
    for (i, w) in waivers.waivers.iter().enumerate() {
        if w.rule != "*" && !is_rule(&w.rule) {
            return Err(WaiverError::Invalid {
                path: path.to_string(),
                line: w.rule_line,
                message: format!(
                    "waivers[{i}]: rule {:?}: no such rule (`kubectl extpath rules list` lists them; \
                     \"*\" waives every rule on the subject)",
                    w.rule
                ),
            });
        }
    }
    Ok(())
}

fn is_rule_id(s: &str) -> bool {
    !s.starts_with('-')
        && !s.ends_with('-')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Exactly `YYYY-MM-DD` (jiff alone would also take `20261231` and datetimes). Only a date: it is
/// compared with the local date of the run (`cli/analyze.rs`), so a time of day would promise a
/// precision the check does not have.
fn parse_date(s: &str) -> Result<jiff::civil::Date, String> {
    let b = s.as_bytes();
    let shape_ok = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        });
    if !shape_ok {
        return Err(format!(
            "expires {s:?} is not a date in the form YYYY-MM-DD"
        ));
    }
    s.parse::<jiff::civil::Date>()
        .map_err(|e| format!("expires {s:?} is not a valid date: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_must_be_exactly_yyyy_mm_dd() {
        assert_eq!(
            parse_date("2026-12-31").unwrap(),
            jiff::civil::date(2026, 12, 31)
        );
        for bad in [
            "20261231",
            "2026-1-31",
            "2026-12-31T00:00:00Z",
            "31.12.2026",
            "",
        ] {
            let err = parse_date(bad).unwrap_err();
            assert!(err.contains("YYYY-MM-DD"), "{bad}: {err}");
        }
        let err = parse_date("2026-02-30").unwrap_err();
        assert!(err.contains("not a valid date"), "{err}");
    }

    #[test]
    fn rule_ids_are_kebab_case() {
        assert!(is_rule_id("aggregation-service-missing"));
        assert!(is_rule_id("apf-429"));
        assert!(!is_rule_id("Aggregation"));
        assert!(!is_rule_id("aggregation_service"));
        assert!(!is_rule_id("-leading"));
        assert!(!is_rule_id("agg*"));
    }

    #[test]
    fn yaml_messages_lose_the_repeated_location() {
        assert_eq!(
            yaml_message(
                "error: line 5 column 5: unknown field `subjet`, expected one of rule\nmore"
            ),
            "unknown field `subjet`, expected one of rule"
        );
        assert_eq!(yaml_message("something else"), "something else");
    }
}
