//! The delegation probe: one discovery GET of a remote APIService's group/version, sent as an
//! ordinary authenticated user instead of the scanner's own identity.
//!
//! An extension API server authorizes every proxied request itself, by a SubjectAccessReview it
//! creates as its own identity (delegated authorization) — except for members of `system:masters`,
//! which its delegating authorizer allows without asking. A scan usually runs as a cluster admin,
//! and kube-aggregator's availability check runs as `system:kube-aggregator` in `system:masters`, so
//! both pass while every other user gets `500 Internal Server Error: …: subjectaccessreviews…is
//! forbidden` when the extension's identity lost `system:auth-delegator`. This probe is the other
//! user: `Impersonate-User: extpath:delegation-probe`, `Impersonate-Group: system:authenticated`.
//! kube-apiserver lets any authenticated user read discovery (the default `system:discovery`
//! ClusterRole is bound to `system:authenticated`), so what comes back is the extension's own answer.
//! (Not `system:anonymous`: anonymous requests may be disabled, and are not bound to discovery.)
//!
//! It is sent only after the scanner's own discovery probe of the same path succeeded — otherwise
//! the earlier rung explains any failure — and it needs `impersonate` on `users` and `groups`,
//! which the shipped read-only ClusterRole does not grant: then kube-apiserver's 403 is a gap
//! (`probes/delegation/APIService/<name>`, forbidden), never a finding, and only the check from
//! the RBAC objects applies. What comes back is recorded, not judged: a 2xx (healthy), a 401, a 403
//! naming another user than the probe's (the extension treating the request as anonymous) or a 500
//! is an observation of the APIService with rung `authn` (401, TokenReviews) or `authz` and `user`
//! set; anything else (a 403 naming the probe's own user — kube-apiserver's RBAC, or the extension's —
//! a 429, a 503, no answer) is a gap with the reason, because it says nothing about delegation.

use tokio::time::Instant;

use super::discovery::probe_from;
use super::fetch::Response;
use super::{FetchError, Fetcher};
use crate::bundle::{Gap, GapReason, ObjectRef, Probe, Rung};

/// The user the probe impersonates.
pub const PROBE_USER: &str = "extpath:delegation-probe";
/// The group the probe impersonates: every authenticated user's.
pub const PROBE_GROUP: &str = "system:authenticated";

/// The gap source of one APIService's delegation probe.
pub fn gap_source(owner: &ObjectRef) -> String {
    format!("probes/delegation/{owner}")
}

/// What one delegation probe gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// An answer that is evidence about delegation.
    Observed(Box<Probe>),
    /// Nothing to judge from, and why.
    Gap(Gap),
}

/// Send the delegation probe of `path` for the APIService `owner`.
pub async fn probe(f: &Fetcher, owner: ObjectRef, path: &str, deadline: Instant) -> Outcome {
    let headers = [
        ("Impersonate-User", PROBE_USER),
        ("Impersonate-Group", PROBE_GROUP),
    ];
    let res = f
        .request_until(deadline, http::Method::GET, path, None, &headers)
        .await;
    classify(owner, path, &res)
}

/// What an answer to the delegation probe is: evidence, or a gap (see the module documentation).
pub fn classify(owner: ObjectRef, path: &str, res: &Result<Response, FetchError>) -> Outcome {
    let source = gap_source(&owner);
    let r = match res {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Gap(Gap::new(
                source,
                e.gap_reason(),
                format!("the delegation probe got no answer: {e}"),
            ));
        }
    };
    let text = r.message();
    let rung = match r.status {
        200..=299 => Rung::Authz,
        401 => Rung::Authn,
        // kube-apiserver's impersonation filter runs before anything is proxied: this 403 is
        // about the collector's own rights, and the extension server never saw the request.
        403 if text.contains("cannot impersonate") => {
            return Outcome::Gap(Gap::new(
                source,
                GapReason::Forbidden,
                format!(
                    "the collector may not impersonate {PROBE_USER} (it needs `impersonate` on users \
                     and groups, which the read-only ClusterRole does not grant), so only the RBAC \
                     objects were checked: {text}"
                ),
            ));
        }
        403 if text.contains(&format!("User \"{PROBE_USER}\"")) => {
            return Outcome::Gap(Gap::new(
                source,
                GapReason::Forbidden,
                format!(
                    "an ordinary authenticated user may not read this group/version here, so the \
                     delegation probe tells nothing: {text}"
                ),
            ));
        }
        // An extension server whose own identity may not create a review answers 500: the
        // apiserver authorization filter turns an authorizer *error* (as opposed to a "no") into
        // `InternalError`. TokenReviews are delegated authentication, SubjectAccessReviews
        // delegated authorization; the text says which one failed.
        403 | 500 if text.contains("tokenreviews") => Rung::Authn,
        403 | 500 => Rung::Authz,
        // A 503 is the aggregator failing to reach the backend, a 429 is APF: earlier rungs, which
        // the scanner's own probe of the same path judges.
        other => {
            return Outcome::Gap(Gap::new(
                source,
                GapReason::Error,
                format!(
                    "the delegation probe got {other}, which says nothing about delegation: {text}"
                ),
            ));
        }
    };
    let mut p = probe_from("GET", path, rung, owner, res);
    p.user = Some(PROBE_USER.to_string());
    Outcome::Observed(Box::new(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::Kind;

    use crate::collect::fetch::answers::{answer, forbidden as status};

    fn owner() -> ObjectRef {
        ObjectRef::cluster(Kind::ApiService, "v1alpha1.wardle.example.com")
    }

    const PATH: &str = "/apis/wardle.example.com/v1alpha1";

    #[test]
    fn a_failed_review_is_evidence_at_the_authz_rung() {
        let sar = "Internal Server Error: \"/apis/wardle.example.com/v1alpha1\": subjectaccessreviews.authorization.k8s.io is forbidden: User \"system:serviceaccount:wardle:api\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope";
        let Outcome::Observed(p) = classify(owner(), PATH, &answer(500, sar)) else {
            panic!("a 500 is evidence");
        };
        assert_eq!(p.rung, Some(Rung::Authz));
        assert_eq!(p.user.as_deref(), Some(PROBE_USER));
        assert_eq!(p.status, Some(500));
        assert!(p.body.as_deref().unwrap().contains("subjectaccessreviews"));
        let Outcome::Observed(ok) = classify(owner(), PATH, &answer(200, "{}")) else {
            panic!("a 2xx is evidence");
        };
        assert_eq!((ok.status, ok.rung), (Some(200), Some(Rung::Authz)));
        let Outcome::Observed(anon) = classify(
            owner(),
            PATH,
            &answer(
                403,
                &status(
                    403,
                    "forbidden: User \"system:anonymous\" cannot get path \"/apis/wardle.example.com/v1alpha1\"",
                ),
            ),
        ) else {
            panic!("a 403 for another user is evidence");
        };
        assert_eq!(anon.rung, Some(Rung::Authz));
        let Outcome::Observed(unauth) = classify(owner(), PATH, &answer(401, "Unauthorized"))
        else {
            panic!("a 401 is evidence");
        };
        assert_eq!(unauth.rung, Some(Rung::Authn));
    }

    #[test]
    fn what_says_nothing_about_delegation_is_a_gap() {
        let impersonate = status(
            403,
            "users \"extpath:delegation-probe\" is forbidden: User \"gate\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
        );
        let Outcome::Gap(g) = classify(owner(), PATH, &answer(403, &impersonate)) else {
            panic!("may not impersonate: a gap");
        };
        assert_eq!(
            g.source,
            "probes/delegation/APIService/v1alpha1.wardle.example.com"
        );
        assert_eq!(g.reason, GapReason::Forbidden);
        let own = status(
            403,
            "forbidden: User \"extpath:delegation-probe\" cannot get path \"/apis/wardle.example.com/v1alpha1\"",
        );
        assert!(matches!(
            classify(owner(), PATH, &answer(403, &own)),
            Outcome::Gap(Gap {
                reason: GapReason::Forbidden,
                ..
            })
        ));
        assert!(matches!(
            classify(owner(), PATH, &answer(503, "service unavailable")),
            Outcome::Gap(Gap {
                reason: GapReason::Error,
                ..
            })
        ));
        assert!(matches!(
            classify(
                owner(),
                PATH,
                &Err(FetchError::Timeout(std::time::Duration::from_secs(1)))
            ),
            Outcome::Gap(Gap {
                reason: GapReason::Timeout,
                ..
            })
        ));
    }
}
