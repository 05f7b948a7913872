//! Waivers files (loading with file:line errors), applying them to a diagnosis, and the
//! `--fail-on` gate (DESIGN §4).

use extpath::engine::diagnosis::{Class, Diagnosis, Severity};
use extpath::engine::gate::{exceeds, worst};
use extpath::engine::waivers::{WaiverError, apply_waivers, load_waivers, parse_waivers};
use jiff::civil::date;

use crate::util::report_cases as cases;

const HEADER: &str = "apiVersion: extpath.dev/v1alpha1\nkind: Waivers\nwaivers:\n";

fn waivers(entries: &str) -> extpath::engine::waivers::Waivers {
    parse_waivers(&format!("{HEADER}{entries}"), "waivers.yaml").expect("valid waivers")
}

fn error(entries: &str) -> String {
    parse_waivers(&format!("{HEADER}{entries}"), "waivers.yaml")
        .expect_err("invalid waivers")
        .to_string()
}

#[test]
fn a_valid_file_loads_with_the_line_of_each_waiver() {
    let w = parse_waivers(cases::WAIVERS_D, "w.yaml").unwrap();
    assert_eq!(w.waivers.len(), 3);
    assert_eq!(w.waivers[0].rule, "admission-timeout-max-on-hot-path");
    assert_eq!(w.waivers[0].subject.to_string(), "MutatingWebhook/vault.*");
    assert_eq!(w.waivers[0].expires, date(2026, 12, 31));
    assert_eq!(
        w.waivers.iter().map(|w| w.line).collect::<Vec<_>>(),
        [4, 8, 12]
    );
    // Kinds are matched case-insensitively and stored canonically; a bare `*` covers everything.
    let w = waivers(
        "  - {rule: '*', subject: apiservice/*, reason: r, expires: 2027-01-01}\n  - {rule: '*', subject: '*', reason: r, expires: 2027-01-01}\n",
    );
    assert_eq!(w.waivers[0].subject.to_string(), "APIService/*");
    assert_eq!(w.waivers[1].subject.to_string(), "*/*");
}

#[test]
fn unknown_fields_are_rejected_with_file_line_and_column() {
    let e = error("  - rule: '*'\n    subjet: APIService/x\n");
    assert!(
        e.starts_with("waivers.yaml:5:5: unknown field `subjet`"),
        "{e}"
    );
    let e = parse_waivers(
        "apiVersion: extpath.dev/v1alpha1\nkind: Waivers\nwaiver: []\n",
        "w.yaml",
    )
    .unwrap_err();
    assert!(matches!(e, WaiverError::Parse { line: 3, .. }), "{e}");
}

#[test]
fn missing_reason_or_expiry_is_rejected_at_the_waiver() {
    let e = error("  - rule: '*'\n    subject: APIService/x\n    expires: 2027-01-01\n");
    assert!(
        e.starts_with("waivers.yaml:4: waivers[0]: missing `reason"),
        "{e}"
    );
    let e = error(
        "  - rule: '*'\n    subject: APIService/x\n    reason: ok\n    expires: 2027-01-01\n  - rule: '*'\n    subject: APIService/y\n    reason: '  '\n    expires: 2027-01-01\n",
    );
    assert!(
        e.starts_with("waivers.yaml:8: waivers[1]: missing `reason"),
        "blank reason: {e}"
    );
    let e = error("  - rule: '*'\n    subject: APIService/x\n    reason: because\n");
    assert!(
        e.starts_with("waivers.yaml:4: waivers[0]: missing `expires"),
        "{e}"
    );
    let e = error("  - subject: APIService/x\n    reason: because\n    expires: 2027-01-01\n");
    assert!(e.contains("missing `rule"), "{e}");
}

#[test]
fn bad_values_point_at_their_own_line() {
    let e =
        error("  - rule: '*'\n    subject: APIService/x\n    reason: r\n    expires: 31.12.2026\n");
    assert!(e.starts_with("waivers.yaml:7: waivers[0]: expires \"31.12.2026\" is not a date in the form YYYY-MM-DD"), "{e}");
    let e =
        error("  - rule: '*'\n    subject: APIService/x\n    reason: r\n    expires: 2027-02-30\n");
    assert!(
        e.starts_with("waivers.yaml:7:") && e.contains("not a valid date"),
        "{e}"
    );
    let e =
        error("  - rule: '*'\n    subject: Service/api\n    reason: r\n    expires: 2027-01-01\n");
    assert!(
        e.starts_with(
            "waivers.yaml:5: waivers[0]: subject \"Service/api\": unknown kind \"Service\""
        ),
        "{e}"
    );
    assert!(
        e.contains("APIService, ValidatingWebhook"),
        "lists the kinds: {e}"
    );
    let e = error(
        "  - rule: '*'\n    subject: v1beta1.metrics.k8s.io\n    reason: r\n    expires: 2027-01-01\n",
    );
    assert!(e.contains("is not Kind/name"), "{e}");
    let e = error(
        "  - rule: Aggregation\n    subject: APIService/x\n    reason: r\n    expires: 2027-01-01\n",
    );
    assert!(
        e.starts_with("waivers.yaml:4: waivers[0]: rule \"Aggregation\" is neither a rule id"),
        "{e}"
    );
}

#[test]
fn the_document_type_is_checked() {
    let e = parse_waivers("kind: Waivers\nwaivers: []\n", "w.yaml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("w.yaml:1: missing apiVersion"), "{e}");
    let e = parse_waivers("apiVersion: v1\nkind: Waivers\n", "w.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("w.yaml:1: apiVersion \"v1\" is not supported"),
        "{e}"
    );
    let e = parse_waivers(
        "apiVersion: extpath.dev/v1alpha1\nkind: EvidenceBundle\n",
        "w.yaml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("w.yaml:2: kind \"EvidenceBundle\" is not \"Waivers\""),
        "{e}"
    );
    let e = parse_waivers("", "w.yaml").unwrap_err().to_string();
    assert!(e.contains("missing apiVersion"), "{e}");
    // An empty list is a valid (if useless) file.
    assert!(
        parse_waivers(&format!("{HEADER}  []\n"), "w.yaml")
            .unwrap()
            .waivers
            .is_empty()
    );
}

#[test]
fn a_missing_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.yaml");
    let e = load_waivers(&path).unwrap_err();
    assert!(matches!(e, WaiverError::Io { .. }));
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot read", path.display()))
    );
    std::fs::write(&path, cases::WAIVERS_D).unwrap();
    assert_eq!(load_waivers(&path).unwrap().waivers.len(), 3);
}

fn verdict<'a>(d: &'a Diagnosis, name: &str) -> &'a extpath::engine::diagnosis::Verdict {
    d.verdicts
        .iter()
        .find(|v| v.subject.name == name)
        .unwrap_or_else(|| panic!("no verdict for {name}"))
}

#[test]
fn a_matching_unexpired_waiver_applies_and_the_worst_is_recomputed() {
    let mut d = cases::aggregation_wrong_ca_bundle();
    assert_eq!(d.summary.worst, Severity::Critical);
    let w = waivers(
        "  - rule: aggregation-tls-unknown-authority\n    subject: APIService/v1alpha1.wardle.*\n    reason: CA rotation in progress (CHG-77)\n    expires: 2026-11-29\n  - rule: '*'\n    subject: Request/get *\n    reason: same incident\n    expires: 2026-12-01\n",
    );
    apply_waivers(&mut d, &w, date(2026, 11, 29));
    let api = verdict(&d, "v1alpha1.wardle.example.com");
    let waived = api.waived.as_ref().expect("waived on its last valid day");
    assert_eq!(waived.reason, "CA rotation in progress (CHG-77)");
    assert_eq!(waived.expires, "2026-11-29");
    assert!(
        verdict(&d, "get flunders.wardle.example.com")
            .waived
            .is_some()
    );
    assert!(d.waiver_notices.is_empty(), "{:?}", d.waiver_notices);
    // Both criticals are waived: only the healthy verdicts count now.
    assert_eq!(d.summary.worst, Severity::Info);
    assert!(!exceeds(&d, Severity::Warning));
}

#[test]
fn expired_waivers_do_not_apply_and_are_reported() {
    let mut d = cases::aggregation_wrong_ca_bundle();
    let w = waivers(
        "  - rule: aggregation-tls-unknown-authority\n    subject: APIService/v1alpha1.wardle.example.com\n    reason: CA rotation\n    expires: 2026-11-28\n",
    );
    apply_waivers(&mut d, &w, date(2026, 11, 29));
    assert!(verdict(&d, "v1alpha1.wardle.example.com").waived.is_none());
    assert_eq!(d.waiver_notices.len(), 1);
    let n = &d.waiver_notices[0];
    assert_eq!(
        (
            n.problem.as_str(),
            n.rule.as_str(),
            n.subject.as_str(),
            n.expires.as_str()
        ),
        (
            "expired",
            "aggregation-tls-unknown-authority",
            "APIService/v1alpha1.wardle.example.com",
            "2026-11-28"
        )
    );
    assert!(exceeds(&d, Severity::Critical));
}

#[test]
fn waivers_that_match_nothing_are_reported_as_unmatched() {
    let mut d = cases::healthy_with_expiring_cert();
    let w = waivers(concat!(
        // Wrong rule id for the subject.
        "  - rule: aggregation-tls-unknown-authority\n    subject: APIService/v1beta1.metrics.k8s.io\n    reason: r1\n    expires: 2027-01-01\n",
        // Healthy verdicts are never waived: this one matches only healthy subjects.
        "  - rule: '*'\n    subject: ValidatingWebhook/*\n    reason: r2\n    expires: 2027-01-01\n",
        // The real one.
        "  - rule: aggregation-cert-expiring-soon\n    subject: '*/v1beta1.metrics.k8s.io'\n    reason: r3\n    expires: 2027-01-01\n",
    ));
    apply_waivers(&mut d, &w, date(2026, 11, 29));
    let unmatched: Vec<&str> = d
        .waiver_notices
        .iter()
        .filter(|n| n.problem == "unmatched")
        .map(|n| n.reason.as_str())
        .collect();
    assert_eq!(unmatched, ["r1", "r2"]);
    assert!(
        d.verdicts
            .iter()
            .filter(|v| v.class == Class::Healthy)
            .all(|v| v.waived.is_none())
    );
    assert_eq!(
        verdict(&d, "v1beta1.metrics.k8s.io")
            .waived
            .as_ref()
            .unwrap()
            .reason,
        "r3"
    );
}

#[test]
fn the_first_unexpired_waiver_wins_and_consequences_do_not_match() {
    let mut d = cases::aggregation_wrong_ca_bundle();
    let w = waivers(concat!(
        // A consequence's rule id does not waive the verdict it belongs to.
        "  - rule: aggregation-discovery-unavailable\n    subject: APIService/*\n    reason: symptom\n    expires: 2027-01-01\n",
        "  - rule: '*'\n    subject: APIService/*\n    reason: old\n    expires: 2026-01-01\n",
        "  - rule: '*'\n    subject: APIService/*\n    reason: first\n    expires: 2027-01-01\n",
        "  - rule: aggregation-available-but-proxy-fails\n    subject: APIService/*\n    reason: second\n    expires: 2027-01-01\n",
    ));
    apply_waivers(&mut d, &w, date(2026, 11, 29));
    assert_eq!(
        verdict(&d, "v1alpha1.wardle.example.com")
            .waived
            .as_ref()
            .unwrap()
            .reason,
        "first"
    );
    let problems: Vec<(&str, &str)> = d
        .waiver_notices
        .iter()
        .map(|n| (n.reason.as_str(), n.problem.as_str()))
        .collect();
    // The second matching waiver did match (it is not "unmatched"), it just was not needed.
    assert_eq!(problems, [("symptom", "unmatched"), ("old", "expired")]);
}

#[test]
fn the_gate_counts_inconclusive_as_warning_and_never_healthy() {
    let mut d = cases::inconclusive_and_waived();
    // An Inconclusive verdict gates as a warning whatever severity it carries.
    for v in &mut d.verdicts {
        if v.class == Class::Inconclusive {
            v.severity = Severity::Info;
        }
    }
    assert!(exceeds(&d, Severity::Warning));
    assert!(!exceeds(&d, Severity::Critical));
    assert_eq!(worst(&d.verdicts), Severity::Warning);

    // The waived warning does not count; without the inconclusive verdict nothing does.
    d.verdicts.retain(|v| v.class != Class::Inconclusive);
    assert!(!exceeds(&d, Severity::Warning));
    // Healthy verdicts never fail a gate, even at the lowest threshold.
    d.verdicts.retain(|v| v.class == Class::Healthy);
    assert!(!exceeds(&d, Severity::Info));

    let d = cases::admission_webhook_unreachable();
    assert!(exceeds(&d, Severity::Critical));
    assert!(exceeds(&d, Severity::Warning));
    let d = cases::healthy_with_expiring_cert();
    assert!(!exceeds(&d, Severity::Critical));
    assert!(exceeds(&d, Severity::Warning));
}
