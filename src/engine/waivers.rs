//! Waivers for CI gates, and the gate itself.
//!
//! A waivers file lets a team accept a known finding for a while without turning the gate off:
//!
//! ```yaml
//! apiVersion: extpath.dev/v1alpha1
//! kind: Waivers
//! waivers:
//!   - rule: aggregation-cert-expiring-soon     # a rule id, or "*"
//!     subject: APIService/v1beta1.metrics.k8s.io   # Kind/name; "*" globs in the name (and kind)
//!     reason: cert-manager renews it on the 3rd; tracked in OPS-1234
//!     expires: 2026-12-31                     # YYYY-MM-DD; the waiver stops applying the day after
//! ```
//!
//! This module owns the file format and its two-phase loader (parse with unknown fields rejected and
//! every value's line kept, then validate with `file:line` errors), applying waivers to a
//! [`Diagnosis`] ([`apply_waivers`]), and the `--fail-on` gate ([`exceeds`], DESIGN §4). It does not
//! own the clock: the caller passes `today`, so tests and replays are deterministic. Waivers are a
//! policy about *now*, which is why they are judged at the caller's date and not at the bundle's
//! collection time.
//!
//! Matching: a waiver's `rule` matches a verdict when it is `*` or the id of one of the rules that
//! decided the verdict (`verdict.rules[].id`); consequences do not count, because waiving a symptom
//! must not hide the failure that causes it. `Healthy` verdicts are never waived, so a waiver whose
//! finding has gone away is reported as `unmatched` — the signal to delete it.

use std::path::Path;

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::diagnosis::{
    AppliedWaiver, Class, DIAGNOSIS_API_VERSION, Diagnosis, Severity, SubjectKind, Verdict,
    WaiverNotice,
};

/// `kind` of a waivers file.
pub const WAIVERS_KIND: &str = "Waivers";

/// `WaiverNotice::problem` for a waiver that matched no verdict.
pub const NOTICE_UNMATCHED: &str = "unmatched";
/// `WaiverNotice::problem` for a waiver past its expiry date.
pub const NOTICE_EXPIRED: &str = "expired";

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

/// A validated waivers file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Waivers {
    /// In file order; when several match one verdict, the first unexpired one is recorded.
    pub waivers: Vec<Waiver>,
}

/// One waiver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiver {
    /// A rule id, or `*` for any rule.
    pub rule: String,
    /// Which subjects it covers.
    pub subject: SubjectPattern,
    /// Why the finding is accepted (shown wherever the waiver applies).
    pub reason: String,
    /// Last day on which the waiver applies.
    pub expires: jiff::civil::Date,
    /// Line of the waiver in its file, for messages.
    pub line: u64,
}

/// `Kind/name`, where the kind may be `*` and the name may contain `*` (any run of characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubjectPattern {
    /// `None` matches every kind.
    pub kind: Option<SubjectKind>,
    /// Glob over the subject's name.
    pub name: String,
}

impl std::fmt::Display for SubjectPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Some(k) => write!(f, "{k}/{}", self.name),
            None => write!(f, "*/{}", self.name),
        }
    }
}

impl SubjectPattern {
    /// Parse `Kind/name`, `*/name` or a bare `*` (everything). The kind is matched
    /// case-insensitively against the subject kinds and stored in its canonical spelling.
    ///
    /// # Errors
    /// A message saying what is wrong, for the loader to attach a file and line to.
    pub fn parse(text: &str) -> Result<SubjectPattern, String> {
        let text = text.trim();
        if text == "*" {
            return Ok(SubjectPattern {
                kind: None,
                name: "*".into(),
            });
        }
        let Some((kind, name)) = text.split_once('/') else {
            return Err(format!(
                "subject {text:?} is not Kind/name (for example APIService/v1beta1.metrics.k8s.io, \
                 or ValidatingWebhook/* for all validating webhooks)"
            ));
        };
        if name.is_empty() {
            return Err(format!(
                "subject {text:?} has an empty name; write {kind}/* to cover every {kind}"
            ));
        }
        let kind = if kind == "*" {
            None
        } else {
            Some(SubjectKind::parse(kind).ok_or_else(|| {
                let known: Vec<&str> = SubjectKind::ALL.iter().map(|k| k.as_str()).collect();
                format!(
                    "subject {text:?}: unknown kind {kind:?}, expected one of {} or *",
                    known.join(", ")
                )
            })?)
        };
        Ok(SubjectPattern {
            kind,
            name: name.to_string(),
        })
    }

    /// Whether the pattern covers this subject.
    pub fn matches(&self, subject: &super::diagnosis::Subject) -> bool {
        self.kind.is_none_or(|k| k == subject.kind) && glob_match(&self.name, &subject.name)
    }
}

impl Waiver {
    /// Whether the waiver covers this verdict (ignoring expiry). `Healthy` verdicts are never covered.
    pub fn matches(&self, v: &Verdict) -> bool {
        v.class != Class::Healthy
            && (self.rule == "*" || v.rules.iter().any(|r| r.id == self.rule))
            && self.subject.matches(&v.subject)
    }

    /// Expired when `today` is after the last day of validity.
    pub fn is_expired(&self, today: jiff::civil::Date) -> bool {
        today > self.expires
    }

    fn notice(&self, problem: &str) -> WaiverNotice {
        WaiverNotice {
            rule: self.rule.clone(),
            subject: self.subject.to_string(),
            problem: problem.to_string(),
            reason: self.reason.clone(),
            expires: self.expires.to_string(),
        }
    }
}

/// `*` matches any run of characters (including none); every other character matches itself.
fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with backtracking to the last star: linear in practice, no recursion.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

// ---- loading -------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(rename = "apiVersion")]
    api_version: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    #[serde(default)]
    waivers: Vec<Spanned<RawWaiver>>,
}

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
        Some(v) if v.value == DIAGNOSIS_API_VERSION => {}
        Some(v) => {
            return Err(invalid(
                v.referenced.line(),
                format!(
                    "apiVersion {:?} is not supported, expected {DIAGNOSIS_API_VERSION:?}",
                    v.value
                ),
            ));
        }
        None => {
            return Err(invalid(
                1,
                format!(
                    "missing apiVersion: a waivers file starts with `apiVersion: {DIAGNOSIS_API_VERSION}` \
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
            rule: rule.value,
            subject: pattern,
            reason: reason.value.trim().to_string(),
            expires: date,
            line,
        });
    }
    Ok(Waivers { waivers })
}

fn is_rule_id(s: &str) -> bool {
    !s.starts_with('-')
        && !s.ends_with('-')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Exactly `YYYY-MM-DD` (jiff alone would also take `20261231` and datetimes).
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

// ---- applying and gating -------------------------------------------------------------------

/// Apply waivers to a diagnosis as of `today`.
///
/// A matching, unexpired waiver sets `verdict.waived` (the first such waiver in file order wins; a
/// verdict already waived keeps its waiver). Every expired waiver is reported in
/// `d.waiver_notices` as `expired` — it no longer applies — and every unexpired waiver that matched
/// no verdict as `unmatched`. `d.summary.worst` is recomputed, since it only counts verdicts that
/// are not waived. Notices are appended, so call this once per diagnosis.
pub fn apply_waivers(d: &mut Diagnosis, w: &Waivers, today: jiff::civil::Date) {
    let mut matched = vec![false; w.waivers.len()];
    for v in &mut d.verdicts {
        for (i, waiver) in w.waivers.iter().enumerate() {
            if !waiver.matches(v) {
                continue;
            }
            matched[i] = true;
            if waiver.is_expired(today) || v.waived.is_some() {
                continue;
            }
            v.waived = Some(AppliedWaiver {
                reason: waiver.reason.clone(),
                expires: waiver.expires.to_string(),
            });
        }
    }
    for (waiver, matched) in w.waivers.iter().zip(matched) {
        if waiver.is_expired(today) {
            d.waiver_notices.push(waiver.notice(NOTICE_EXPIRED));
        } else if !matched {
            d.waiver_notices.push(waiver.notice(NOTICE_UNMATCHED));
        }
    }
    d.summary.worst = worst_unwaived(d);
}

/// The severity a verdict has for the gate: `None` for `Healthy` (it never fails a gate), at least
/// `Warning` for `Inconclusive` (DESIGN §4: not being able to judge a subject is a finding), the
/// verdict's own severity otherwise.
pub fn gate_severity(v: &Verdict) -> Option<Severity> {
    match v.class {
        Class::Healthy => None,
        Class::Inconclusive => Some(v.severity.max(Severity::Warning)),
        _ => Some(v.severity),
    }
}

/// The highest gate severity of any verdict that is not waived (`Info` when there is none).
pub fn worst_unwaived(d: &Diagnosis) -> Severity {
    d.verdicts
        .iter()
        .filter(|v| v.waived.is_none())
        .filter_map(gate_severity)
        .max()
        .unwrap_or(Severity::Info)
}

/// The `--fail-on` gate (DESIGN §4): true when a verdict that is not waived is at or above
/// `fail_on`, counting `Inconclusive` as `warning` and never counting `Healthy`.
pub fn exceeds(d: &Diagnosis, fail_on: Severity) -> bool {
    d.verdicts
        .iter()
        .filter(|v| v.waived.is_none())
        .filter_map(gate_severity)
        .any(|s| s >= fail_on)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_runs_of_any_characters() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "v1beta1.metrics.k8s.io"));
        assert!(glob_match("v1beta1.*", "v1beta1.metrics.k8s.io"));
        assert!(glob_match("*.k8s.io", "v1beta1.metrics.k8s.io"));
        assert!(glob_match("v1*.metrics.*", "v1beta1.metrics.k8s.io"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
        assert!(!glob_match("*.example.com", "v1beta1.metrics.k8s.io"));
        assert!(!glob_match("v1beta1.*", "v1.apps"));
        // A star must be able to give back characters it took too early.
        assert!(glob_match("*a*b", "xaxaxb"));
        assert!(!glob_match("*a*b", "xaxaxc"));
    }

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
