//! The `--fail-on` gate (DESIGN §4): which verdicts count against a threshold, and the worst one.
//!
//! The policy is one function, [`severity`]: `Healthy` never counts, `Inconclusive` counts as at
//! least `Warning` (not being able to judge a subject is a finding), anything else at its own
//! severity; waived verdicts never count ([`fails`]). The summary's `worst` ([`worst`]), the exit
//! code of `analyze`, `why` and `fleet` ([`exceeds`], [`fails`]), JUnit's failed cases and the
//! display order all derive from it, so renderers read `summary.worst` rather than recomputing it.

use super::diagnosis::{Class, Diagnosis, Severity, Verdict};

/// The severity a verdict has for the gate: `None` for `Healthy` (it never fails a gate), at least
/// `Warning` for `Inconclusive`, the verdict's own severity otherwise. Waivers are not looked at.
pub fn severity(v: &Verdict) -> Option<Severity> {
    match v.class {
        Class::Healthy => None,
        Class::Inconclusive => Some(v.severity.max(Severity::Warning)),
        _ => Some(v.severity),
    }
}

/// Whether this verdict fails a gate at `fail_on`: not waived, and its gate severity at or above it.
pub fn fails(v: &Verdict, fail_on: Severity) -> bool {
    v.waived.is_none() && severity(v).is_some_and(|s| s >= fail_on)
}

/// The highest gate severity of any verdict that is not waived (`Info` when there is none): what
/// `summary.worst` holds.
pub fn worst<'a>(verdicts: impl IntoIterator<Item = &'a Verdict>) -> Severity {
    verdicts
        .into_iter()
        .filter(|v| v.waived.is_none())
        .filter_map(severity)
        .max()
        .unwrap_or(Severity::Info)
}

/// Whether a diagnosis fails the gate at `fail_on` (exit code 1). Not `summary.worst >= fail_on`:
/// with nothing but `Healthy` verdicts `worst` is `Info`, yet no verdict fails an `Info` gate.
pub fn exceeds(d: &Diagnosis, fail_on: Severity) -> bool {
    d.verdicts.iter().any(|v| fails(v, fail_on))
}
