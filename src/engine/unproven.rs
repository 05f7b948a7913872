//! Evidence that proves nothing is not health (docs/diagnosis.md#rule-10).
//!
//! A bundle may say a kube-apiserver health endpoint passed while listing no check: a hand-written
//! or older bundle, a raw file holding only `readyz check passed`, a collector that took an HTML
//! login page for an answer. A verbose health report lists every check it ran, so "passed, 0
//! checks" proves nothing: before any rule sees the bundle, such a report becomes a gap, and the
//! rules that want kube-apiserver's health see it as not collected.
//!
//! Owns only that normalisation. It does not judge failing reports (a `/readyz` that answered 500
//! with no check lines is evidence of a failure and stays), and etcd's own `/health`, whose answer
//! (`{"health":"true"}`) has no checks by design.

use std::borrow::Cow;

use crate::bundle::observations::HealthEndpoint;
use crate::bundle::{EvidenceBundle, Gap, GapReason, HealthCheck};

/// The bundle the rules should see: `bundle` itself, or a copy without its unproven health
/// reports and with a gap for each.
pub fn without_unproven_health(bundle: &EvidenceBundle) -> Cow<'_, EvidenceBundle> {
    if !bundle.health_checks.iter().any(is_unproven) {
        return Cow::Borrowed(bundle);
    }
    let mut b = bundle.clone();
    let (unproven, kept): (Vec<HealthCheck>, Vec<HealthCheck>) =
        std::mem::take(&mut b.health_checks)
            .into_iter()
            .partition(is_unproven);
    b.health_checks = kept;
    for h in unproven {
        let from = h
            .origin
            .as_deref()
            .or(h.target.as_deref())
            .map(|o| format!(" (read from {o})"))
            .unwrap_or_default();
        b.gaps.push(Gap::new(
            format!("health/{}", source_name(h.endpoint)),
            GapReason::Error,
            format!(
                "{} was recorded as passing but lists no check{from}: not a health report, so \
                 kube-apiserver's health was not judged from it",
                endpoint_path(h.endpoint)
            ),
        ));
    }
    Cow::Owned(b)
}

fn is_unproven(h: &HealthCheck) -> bool {
    h.ok && h.checks.is_empty() && h.endpoint != HealthEndpoint::EtcdHealth
}

fn source_name(e: HealthEndpoint) -> &'static str {
    match e {
        HealthEndpoint::ApiserverReadyz => "readyz",
        HealthEndpoint::ApiserverLivez => "livez",
        HealthEndpoint::ApiserverHealthz => "healthz",
        HealthEndpoint::EtcdHealth => "etcd",
    }
}

fn endpoint_path(e: HealthEndpoint) -> &'static str {
    match e {
        HealthEndpoint::ApiserverReadyz => "/readyz",
        HealthEndpoint::ApiserverLivez => "/livez",
        HealthEndpoint::ApiserverHealthz => "/healthz",
        HealthEndpoint::EtcdHealth => "etcd /health",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Filter, RuleSet, Settings, analyze};

    fn fixture(name: &str) -> EvidenceBundle {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/bundles")
            .join(name);
        crate::bundle::load_bundle(&path).expect("fixture loads")
    }

    #[test]
    fn a_passing_report_without_checks_is_a_gap_not_health() {
        let b = fixture("apiserver-readyz-no-checks.yaml");
        let d = analyze(
            &b,
            &RuleSet::bundled(),
            &Settings::default(),
            &Filter::default(),
        );
        let gap = d.gaps.iter().find(|g| g.source == "health/readyz");
        assert!(
            gap.is_some_and(|g| g.detail.contains("lists no check")),
            "{:?}",
            d.gaps
        );
        let text = serde_json::to_string(&d).expect("serialises");
        assert!(!text.contains("passes (0 checks)"), "{text}");
        assert!(!text.contains("healthy-apiserver-ready"), "{text}");
    }

    #[test]
    fn failing_reports_and_etcd_health_stay_evidence() {
        let mut b = fixture("apiserver-readyz-no-checks.yaml");
        b.health_checks = vec![
            HealthCheck {
                endpoint: HealthEndpoint::ApiserverReadyz,
                ok: false,
                checks: vec![],
                error: Some("500 Internal Server Error".into()),
                target: None,
                origin: None,
                component: None,
            },
            HealthCheck {
                endpoint: HealthEndpoint::EtcdHealth,
                ok: true,
                checks: vec![],
                error: None,
                target: Some("127.0.0.1:2379".into()),
                origin: None,
                component: None,
            },
        ];
        assert!(matches!(without_unproven_health(&b), Cow::Borrowed(_)));
    }
}
