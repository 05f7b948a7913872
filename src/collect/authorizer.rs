//! The authorizer probe: one read that kube-apiserver's RBAC does not allow, sent impersonating an
//! ordinary user, so that every authorizer after RBAC in `--authorization-mode` (or the structured
//! authorization configuration) is asked.
//!
//! kube-apiserver's authorizers run in order and the first "allow" or "deny" wins. A scan usually
//! runs as a cluster admin, whom RBAC allows at once: an authorization webhook behind RBAC is never
//! asked for it, and a webhook that cannot be reached is invisible to the scan while every request
//! RBAC does not allow — most users' — fails with `500 Internal Server Error: "…": Post
//! "https://…/authorize…": dial tcp …: connect: connection refused` (the union authorizer turns an
//! authorizer's *error* into that 500, not into a "no"). This probe is such a request:
//! `Impersonate-User: extpath:authorizer-probe` (kube-apiserver adds `system:authenticated`), `GET
//! /api/v1/namespaces/extpath-authorizer-probe` — a namespace nobody creates, whose `get` no
//! default ClusterRole grants an authenticated user. It reads nothing even where something allows
//! it (the answer is then 404).
//!
//! What comes back is recorded, not judged: a 5xx is an observation (`from: probe`, rung `authz`,
//! `user` set, no target: it concerns kube-apiserver's own authorizer); a 403 naming the probe's
//! user (every authorizer answered: "no") and a 404 or 2xx (one allowed it) are the authorizers
//! working and leave nothing; kube-apiserver refusing the impersonation is a gap (the collector
//! needs `impersonate` on the user `extpath:authorizer-probe`, which deploy/rbac.yaml grants by
//! name), and so is anything else (no answer, 429, 401), because it says nothing about the
//! authorizers. Where RBAC itself allows the read (a cluster that binds broad roles to
//! `system:authenticated`) the webhook is not asked and the probe cannot tell.

use tokio::time::Instant;

use super::discovery::probe_record;
use super::fetch::Response;
use super::sources::{Contribution, Found, Run, SourceFuture};
use super::{FetchError, Fetcher};
use crate::bundle::{Gap, GapReason, Probe, Rung};

/// The user the probe impersonates.
pub const PROBE_USER: &str = "extpath:authorizer-probe";
/// What it reads: a namespace nobody has.
pub const PROBE_PATH: &str = "/api/v1/namespaces/extpath-authorizer-probe";
/// Its gap source.
pub const GAP_SOURCE: &str = "probes/authorizer";

/// What the authorizer probe gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The authorizers answered (allowed or denied): nothing to record.
    Answered,
    /// An answer that is evidence about the authorizers: they failed.
    Observed(Box<Probe>),
    /// Nothing to judge from, and why.
    Gap(Gap),
}

/// Send the authorizer probe.
pub async fn probe(f: &Fetcher, deadline: Instant) -> Outcome {
    let headers = [("Impersonate-User", PROBE_USER)];
    let res = f
        .request_until(deadline, http::Method::GET, PROBE_PATH, None, &headers)
        .await;
    classify(&res)
}

/// What an answer to the authorizer probe is (see the module documentation).
pub fn classify(res: &Result<Response, FetchError>) -> Outcome {
    let r = match res {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Gap(Gap::new(
                GAP_SOURCE,
                e.gap_reason(),
                format!(
                    "the authorizer probe ({PROBE_USER}: GET {PROBE_PATH}) got no answer, so \
                     kube-apiserver's authorizers after RBAC were not judged: {e}"
                ),
            ));
        }
    };
    let text = r.message();
    match r.status {
        // The impersonation filter runs before authorization: this 403 is about the collector's
        // own rights, and no authorizer was asked about the probe's user.
        403 if text.contains("cannot impersonate") => Outcome::Gap(Gap::new(
            GAP_SOURCE,
            GapReason::Forbidden,
            format!(
                "the collector may not impersonate {PROBE_USER} (it needs `impersonate` on that \
                 user, which deploy/rbac.yaml grants by name), so an authorization webhook behind \
                 RBAC was not asked: {text}"
            ),
        )),
        // Every authorizer answered: one allowed it (the namespace does not exist), or none did.
        200..=299 | 404 | 403 => Outcome::Answered,
        500..=599 if r.status != 503 => {
            // It concerns kube-apiserver's own authorizer, not an object on an extension path.
            let mut p = probe_record("GET", PROBE_PATH, Rung::Authz, res);
            p.user = Some(PROBE_USER.to_string());
            Outcome::Observed(Box::new(p))
        }
        other => Outcome::Gap(Gap::new(
            GAP_SOURCE,
            GapReason::Error,
            format!(
                "the authorizer probe ({PROBE_USER}: GET {PROBE_PATH}) got {other}, which says \
                 nothing about kube-apiserver's authorizers: {text}"
            ),
        )),
    }
}

/// The `probes/authorizer` entry (stage two, inside the metrics window: an authorizer's error
/// counters then move by the probe's own request).
pub(super) fn probes<'a>(run: &'a Run<'a>, _found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        let mut c = Contribution::default();
        match probe(&run.fetcher, run.deadline).await {
            Outcome::Answered => {}
            Outcome::Observed(p) => c.probes.push(*p),
            Outcome::Gap(g) => c.gaps.push(g),
        }
        Ok(c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::collect::fetch::answers::{answer, forbidden as status};

    #[test]
    fn a_failing_authorizer_is_an_observation_of_kube_apiserver() {
        // What kube-apiserver 1.24 and 1.36 answer when RBAC has no opinion and the webhook is down.
        let body = "Internal Server Error: \"/api/v1/namespaces/extpath-authorizer-probe\": Post \"https://127.0.0.1:42159/authorize?timeout=30s\": dial tcp 127.0.0.1:42159: connect: connection refused";
        let Outcome::Observed(p) = classify(&answer(500, body)) else {
            panic!("a 500 is evidence");
        };
        assert_eq!(p.rung, Some(Rung::Authz));
        assert_eq!(p.user.as_deref(), Some(PROBE_USER));
        assert_eq!(p.status, Some(500));
        assert_eq!(p.target, None);
        assert!(p.body.as_deref().unwrap().contains("/authorize"));
    }

    #[test]
    fn authorizers_that_answer_leave_nothing_and_the_rest_is_a_gap() {
        let denied = status(
            403,
            "namespaces \"extpath-authorizer-probe\" is forbidden: User \"extpath:authorizer-probe\" cannot get resource \"namespaces\" in API group \"\" at the cluster scope",
        );
        assert_eq!(classify(&answer(403, &denied)), Outcome::Answered);
        assert_eq!(classify(&answer(404, "{}")), Outcome::Answered);
        let impersonate = status(
            403,
            "users \"extpath:authorizer-probe\" is forbidden: User \"gate\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
        );
        let Outcome::Gap(g) = classify(&answer(403, &impersonate)) else {
            panic!("may not impersonate: a gap");
        };
        assert_eq!(
            (g.source.as_str(), g.reason),
            (GAP_SOURCE, GapReason::Forbidden)
        );
        for r in [
            answer(503, "service unavailable"),
            answer(429, "Too many requests"),
            answer(401, "Unauthorized"),
            Err(FetchError::Timeout(std::time::Duration::from_secs(1))),
        ] {
            assert!(matches!(classify(&r), Outcome::Gap(_)), "{r:?}");
        }
    }
}
