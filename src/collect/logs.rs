//! `--pod-logs`: the known error lines in the logs of the Pods behind the extension paths — the
//! extension API servers behind APIServices, the webhook servers behind webhooks and conversion
//! webhooks.
//!
//! Some failures leave no trace in kube-apiserver at all: an extension server whose identity may
//! not create SubjectAccessReviews answers every non-admin user with 500 while the APIService stays
//! Available and kube-apiserver's metrics stay flat (its SubjectAccessReview 403s are rejected
//! before instrumentation); an extension server that does not trust the front proxy says why only
//! in its own log. A careful human runs `kubectl logs` on the extension server; this is that step.
//!
//! For each referenced Service, up to [`PODS_PER_SERVICE`] of its Pods, the last [`TAIL_LINES`]
//! lines of one container (the `kubectl.kubernetes.io/default-container`, else the first). Only the
//! known error lines are kept (`bundle::raw::container_log_findings`, the raw importer's pattern
//! table), each attached to the object the Service backs. A Pod whose container has not started
//! (400) has no log and is skipped; a 403 is a gap (the shipped ClusterRole does not grant
//! `pods/log`). It is opt-in, like `--probe-admission`: logs are the one source that is not
//! Kubernetes objects or metrics.

use futures::StreamExt;
use k8s_openapi::api::core::v1 as core;
use tokio::time::Instant;

use super::fetch::{status_error, urlencode};
use super::refs::References;
use super::sources::{Contribution, Found, Run, SourceFuture};
use super::{FetchError, Fetcher};
use crate::bundle::observations::Component;
use crate::bundle::{EvidenceBundle, Gap, Kind, LogFinding};

/// Pods read per Service: replicas of one server write the same errors.
pub const PODS_PER_SERVICE: usize = 3;
/// Lines read from the end of each log.
pub const TAIL_LINES: usize = 500;
/// Bytes read at most per log.
///
/// `tailLines` counts lines, not bytes: a server that logs a whole object per line would make 500
/// lines arbitrarily large, so `limitBytes` bounds the read too.
const LIMIT_BYTES: usize = 1024 * 1024;
const IN_FLIGHT: usize = 16;

/// The container whose log to read.
fn container_of(pod: &core::Pod) -> Option<String> {
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("kubectl.kubernetes.io/default-container"))
        .cloned();
    annotated.or_else(|| {
        pod.spec
            .as_ref()?
            .containers
            .first()
            .map(|c| c.name.clone())
    })
}

/// Who writes the log of a Pod behind `owner_kind`, when its lines do not say.
fn writer_of(owner_kind: &Kind) -> Component {
    if *owner_kind == Kind::ApiService {
        Component::ExtensionApiserver
    } else {
        Component::Webhook
    }
}

/// Read the logs of the Pods behind each referenced Service.
pub async fn fetch(
    f: &Fetcher,
    bundle: &EvidenceBundle,
    refs: &References,
    pods: &[((String, String), Vec<core::Pod>)],
    deadline: Instant,
) -> (Vec<LogFinding>, Vec<Gap>) {
    let mut reads = Vec::new();
    for ((ns, svc), list) in pods {
        let owners: Vec<_> = refs
            .backends
            .iter()
            .filter(|b| &b.service.namespace == ns && &b.service.name == svc)
            .map(|b| b.owner.clone())
            .collect();
        if owners.is_empty() {
            continue;
        }
        for pod in list.iter().take(PODS_PER_SERVICE) {
            let (Some(name), Some(container)) = (pod.metadata.name.clone(), container_of(pod))
            else {
                continue;
            };
            reads.push((ns.clone(), name, container, owners.clone()));
        }
    }
    let now = jiff::Timestamp::now();
    let results = futures::stream::iter(reads)
        .map(|(ns, name, container, owners)| async move {
            let path = format!(
                "/api/v1/namespaces/{ns}/pods/{name}/log?container={}&tailLines={TAIL_LINES}&limitBytes={LIMIT_BYTES}",
                urlencode(&container)
            );
            let res = match f
                .request_until(deadline, http::Method::GET, &path, None, &[])
                .await
            {
                Ok(r) if (200..300).contains(&r.status) => Ok(r.text()),
                Ok(r) => Err(status_error(&r)),
                Err(e) => Err(e),
            };
            (ns, name, owners, res)
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let mut results = results;
    results.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    let mut findings = Vec::new();
    let mut gaps = Vec::new();
    for (ns, name, owners, res) in results {
        let origin = format!("pods/{ns}/{name}/log");
        match res {
            Ok(text) => findings.extend(attach(&text, &origin, &owners, now, bundle)),
            // A container that has not started, or a Pod gone since it was listed: no log.
            Err(FetchError::Status {
                code: 400 | 404, ..
            }) => {}
            Err(e) => gaps.push(Gap::new(origin, e.gap_reason(), e.to_string())),
        }
    }
    (findings, gaps)
}

/// The findings of one log, each attached to every object the Pod serves unless its line names
/// another object itself.
fn attach(
    text: &str,
    origin: &str,
    owners: &[crate::bundle::ObjectRef],
    now: jiff::Timestamp,
    bundle: &EvidenceBundle,
) -> Vec<LogFinding> {
    let mut out = Vec::new();
    for owner in owners {
        let found = crate::bundle::raw::container_log_findings(
            text,
            origin,
            writer_of(&owner.kind),
            now,
            bundle,
        );
        for mut f in found {
            if f.target.is_none() {
                f.target = Some(owner.clone());
            }
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

/// The `logs` entry (stage three, `--pod-logs`, after `objects/pods`).
pub(super) fn pod_logs<'a>(run: &'a Run<'a>, found: &'a Found<'a>) -> SourceFuture<'a> {
    Box::pin(async move {
        // No Pods, no logs: their gap is already recorded.
        let Some(pods) = run.found_pods() else {
            return Ok(Contribution::default());
        };
        let (findings, gaps) = fetch(
            &run.fetcher,
            found.bundle,
            found.references,
            &pods.by_service,
            run.deadline,
        )
        .await;
        Ok(Contribution {
            evidence: Some(Box::new(move |b: &mut EvidenceBundle| {
                b.log_findings.extend(findings)
            })),
            gaps,
            ..Contribution::default()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::{CollectionSource, ObjectRef};

    const SAR: &str = "E1129 08:50:11.402439   18160 webhook.go:224] Failed to make webhook authorizer request: subjectaccessreviews.authorization.k8s.io is forbidden: User \"wardle-apiserver\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope\nI1129 08:50:12.000000   18160 secure_serving.go:213] Serving securely on [::]:443\n";

    #[test]
    fn known_lines_are_kept_and_attached_to_what_the_pod_serves() {
        let b = EvidenceBundle::new(CollectionSource::Unknown);
        let owner = ObjectRef::cluster(Kind::ApiService, "v1alpha1.wardle.example.com");
        let now: jiff::Timestamp = "2026-11-29T09:00:00Z".parse().unwrap();
        let found = attach(SAR, "pods/w/p/log", std::slice::from_ref(&owner), now, &b);
        assert_eq!(found.len(), 1, "{found:?}");
        let f = &found[0];
        assert_eq!(f.pattern, "sar-forbidden");
        assert_eq!(f.component, Component::ExtensionApiserver);
        assert_eq!(f.target.as_ref(), Some(&owner));
        assert_eq!(f.origin.as_deref(), Some("pods/w/p/log"));
        assert_eq!(
            f.first_seen.map(|t| t.to_string()).as_deref(),
            Some("2026-11-29T08:50:11.402439Z")
        );
        assert!(
            attach(
                "I1129 08:00:00.000000 1 x.go:1] fine\n",
                "o",
                &[owner],
                now,
                &b
            )
            .is_empty()
        );
    }

    #[test]
    fn the_default_container_annotation_wins() {
        let pod: core::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "annotations": {"kubectl.kubernetes.io/default-container": "server"}},
            "spec": {"containers": [{"name": "sidecar"}, {"name": "server"}]}
        }))
        .unwrap();
        assert_eq!(container_of(&pod).as_deref(), Some("server"));
        let pod: core::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"}, "spec": {"containers": [{"name": "only"}]}
        }))
        .unwrap();
        assert_eq!(container_of(&pod).as_deref(), Some("only"));
        assert_eq!(writer_of(&Kind::ValidatingWebhook), Component::Webhook);
        assert_eq!(writer_of(&Kind::ApiService), Component::ExtensionApiserver);
    }
}
