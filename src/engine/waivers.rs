//! Waivers for CI gates (the gate itself is [`super::gate`]).
//!
//! A waivers file lets a team accept a known finding for a while without turning the gate off:
//!
//! ```yaml
//! apiVersion: extpath.dev/v1alpha1
//! kind: Waivers
//! waivers:
//!   - rule: aggregation-tls-cert-expiring      # a rule id, or "*"
//!     subject: APIService/v1beta1.metrics.k8s.io   # Kind/name; "*" globs in the name (and kind)
//!     reason: cert-manager renews it on the 3rd; tracked in OPS-1234
//!     expires: 2026-12-31                     # YYYY-MM-DD; the waiver stops applying the day after
//! ```
//!
//! (docs/waivers.md documents it for users.)
//!
//! This module owns the file format and its two-phase loader (`waivers/load.rs`: parse with unknown fields
//! rejected and every value's line kept, then validate with `file:line` errors; [`check_rule_ids`]
//! then checks every rule id against the rules loaded, as `--rule` is), applying waivers to a
//! [`Diagnosis`] ([`apply_waivers`]); the `--fail-on` gate they feed is [`super::gate`]. It does not
//! own the clock: the caller passes `today`, so tests and replays are deterministic. Waivers are a
//! policy about *now*, which is why they are judged at the caller's date and not at the bundle's
//! collection time.
//!
//! Matching: a waiver's `rule` matches a verdict when it is `*` or the id of one of the rules that
//! decided the verdict (`verdict.rules[].id`); consequences do not count, because waiving a symptom
//! must not hide the failure that causes it. `Healthy` verdicts are never waived, so a waiver whose
//! finding has gone away is reported as `unmatched` — the signal to delete it.

mod load;

pub use load::{WaiverError, check_rule_ids, load_waivers, parse_waivers};

use super::diagnosis::{
    AppliedWaiver, Class, Diagnosis, Subject, SubjectKind, Verdict, WaiverNotice,
};

/// `kind` of a waivers file.
pub const WAIVERS_KIND: &str = "Waivers";

/// `WaiverNotice::problem` for a waiver that matched no verdict.
pub const NOTICE_UNMATCHED: &str = "unmatched";
/// `WaiverNotice::problem` for a waiver past its expiry date.
pub const NOTICE_EXPIRED: &str = "expired";

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
    /// Line of its `rule:` value, for messages about the rule.
    pub rule_line: u64,
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

/// Apply waivers to a diagnosis as of `today`.
///
/// A matching, unexpired waiver sets `verdict.waived` (the first such waiver in file order wins; a
/// verdict already waived keeps its waiver). Every expired waiver is reported in
/// `d.waiver_notices` as `expired` — it no longer applies — and every unexpired waiver that matched
/// no verdict as `unmatched`. A waived problem root's waiver also covers the verdicts it explains.
/// `d.summary` is recomputed ([`super::classify::summarize`]): its
/// headline names the worst verdict that is not waived, its counts keep waived verdicts apart, and
/// `worst` only counts verdicts that are not waived. Notices are appended, so call this once per
/// diagnosis.
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
    // A waiver on a problem's root covers the verdicts that root explains (the requests that
    // failed because of it): they are the same cause, and a gate must not fail on its echo.
    let mut first_of: std::collections::HashMap<Subject, usize> = std::collections::HashMap::new();
    for (j, v) in d.verdicts.iter().enumerate() {
        first_of.entry(v.subject.clone()).or_insert(j);
    }
    for p in &d.problems {
        let Some(root_waiver) = first_of
            .get(&p.root)
            .and_then(|&j| d.verdicts[j].waived.clone())
        else {
            continue;
        };
        let members: std::collections::HashSet<&Subject> = p.members.iter().collect();
        for v in d.verdicts.iter_mut() {
            if v.waived.is_none() && members.contains(&v.subject) {
                v.waived = Some(AppliedWaiver {
                    reason: format!("{} (explained by {})", root_waiver.reason, p.root),
                    expires: root_waiver.expires.clone(),
                });
            }
        }
    }
    let index = crate::engine::problems::VerdictIndex::new(&d.verdicts);
    for p in &mut d.problems {
        crate::engine::problems::refresh_with(p, &d.verdicts, &index);
    }
    crate::engine::problems::sort(&mut d.problems);
    d.summary = crate::engine::classify::summarize(&d.verdicts, &d.problems);
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
}
